/* nb_dash_loc: reads the localization JSON that verify/nb_localize wrote into the history with
 * common's accessors (dash/ sits above db/ only, never verify/) and writes it as HTML. */
#include "nb_dash_loc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nb_json.h"
#include "nb_svg.h"

#define esc nb_svg_escape

/* The stored text as an object; NULL (err says why) when it is not one. */
static json_object *parse(const char *json, nb_err *err)
{
    json_object *o = NULL;
    if (!json || !*json) {
        nb_err_set(err, NB_EFORMAT, "gate_checks.localization: empty");
        return NULL;
    }
    if (nb_json_parse(json, strlen(json), "gate_checks.localization", &o, err))
        return NULL;
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        nb_err_set(err, NB_EFORMAT, "gate_checks.localization: not a JSON object");
        return NULL;
    }
    return o;
}

static const char *verdict_of(json_object *o, const char *verdict)
{
    return verdict && *verdict ? verdict : nb_json_str(o, "verdict", "", NULL);
}

static void label(json_object *o, const char *verdict, char *buf, size_t cap)
{
    const char *v = verdict_of(o, verdict);
    if (!strcmp(v, "kv_cache"))
        snprintf(buf, cap, "KV cache / decode path");
    else if (!strcmp(v, "layer") && !strcmp(nb_json_str(o, "sub_block", "", NULL), "final_norm"))
        snprintf(buf, cap, "final norm");
    else if (!strcmp(v, "layer") && nb_json_int(o, "first_layer", -1) < 0)
        snprintf(buf, cap, "a layer (not named in the stored localization)");
    else if (!strcmp(v, "layer")) {
        const char *sub = nb_json_str(o, "sub_block", "", NULL);
        snprintf(buf, cap, "layer %lld %s", (long long)nb_json_int(o, "first_layer", -1),
                 *sub ? sub : "output"); /* an mlir-air report names no sub-block */
    }
    else if (!strcmp(v, "near_tie"))
        snprintf(buf, cap, "near tie");
    else
        snprintf(buf, cap, "not localized");
}

const char *nb_dash_loc_decode_label(const char *json, char *buf, size_t cap)
{
    nb_err err;
    json_object *o = parse(json, &err);
    const char *sum = o ? nb_json_str(o, "summary", "", NULL) : "";
    snprintf(buf, cap, "%s", *sum ? sum : "unreadable decode-path check");
    json_object_put(o);
    return buf;
}

const char *nb_dash_loc_label(const char *json, const char *verdict, char *buf, size_t cap)
{
    nb_err err;
    json_object *o = parse(json, &err);
    label(o, verdict, buf, cap);
    json_object_put(o);
    return buf;
}

/* A number of the JSON, or "unknown" (null: NaN or never measured). */
static void num(FILE *f, json_object *o, const char *key, const char *fmt)
{
    double v = nb_json_num(o, key, NAN);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("unknown", f);
}

static void row_open(FILE *f, const char *cls, const char *what)
{
    fprintf(f, "<tr class=\"%s\"><th>%s</th><td>", cls, what);
}

/* 1: is it a near tie? */
static void margin_row(FILE *f, json_object *o)
{
    row_open(f, "loc-margin", "Reference margin");
    num(f, o, "ref_margin", "%.3f");
    fputs(" logits (near-tie band ", f);
    num(f, o, "near_tie_band", "%.2f");
    fputs(nb_json_bool(o, "near_tie", 0) ? "): a near tie" : "): not a near tie", f);
    fputs("</td></tr>\n", f);
}

/* 2: do the decode steps match a cache-free prefill of the same tokens? */
static void kv_row(FILE *f, json_object *o)
{
    const char *kv = nb_json_str(o, "kv", "unchecked", NULL);
    row_open(f, "loc-kv", "KV cache / decode path");
    if (!strcmp(kv, "fault")) {
        fprintf(f, "<b>fault at decode step %lld</b>: largest difference from a cache-free "
                   "prefill ", (long long)nb_json_int(o, "kv_first_bad_step", -1));
        num(f, o, "kv_max_diff", "%.4g");
        fputs(" logits (NaN reads unknown), tolerance ", f);
        num(f, o, "kv_tolerance", "%.2f");
    } else if (!strcmp(kv, "clean")) {
        fprintf(f, "clean over decode steps 1..%lld: largest difference ",
                (long long)nb_json_int(o, "kv_steps", 0));
        num(f, o, "kv_max_diff", "%.4f");
        fputs(" logits, tolerance ", f);
        num(f, o, "kv_tolerance", "%.2f");
    } else {
        fputs("not checked", f);
    }
    fputs("</td></tr>\n", f);
}

/* The first layer entry numbered layer, NULL when absent. */
static json_object *layer_entry(json_object *layers, int64_t layer)
{
    size_t n = json_object_is_type(layers, json_type_array) ? json_object_array_length(layers) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *L = json_object_array_get_idx(layers, i);
        if (nb_json_int(L, "layer", -1) == layer)
            return L;
    }
    return NULL;
}

/* 3: the first hidden state below the cosine threshold. */
static void layer_row(FILE *f, json_object *o)
{
    const char *st = nb_json_str(o, "layers_status", "none", NULL);
    const char *sub = nb_json_str(o, "sub_block", "", NULL);
    int64_t first = nb_json_int(o, "first_layer", -1), step = nb_json_int(o, "step", -1);
    row_open(f, "loc-layer", "First diverging layer");
    if (!strcmp(st, "fault")) {
        json_object *L = !strcmp(sub, "final_norm")
                             ? o
                             : layer_entry(nb_json_get(o, "layers"), first);
        const char *cos = !strcmp(sub, "final_norm") ? "final_norm_cos"
                          : !strcmp(sub, "attention") ? "cos_attn"
                                                      : "cos_mlp";
        const char *abs = !strcmp(sub, "final_norm") ? "final_norm_max_abs"
                          : !strcmp(sub, "attention") ? "max_abs_attn"
                                                      : "max_abs_mlp";
        if (!strcmp(sub, "final_norm"))
            fputs("<b>the final norm</b>", f);
        else
            fprintf(f, "<b>layer %lld, %s</b>", (long long)first,
                    *sub ? sub : "output (sub-block not reported)");
        fputs(": cosine ", f);
        num(f, L, cos, "%.5f");
        fputs(", max abs ", f);
        num(f, L, abs, "%.4g");
        fputs(" (threshold ", f);
        num(f, o, "threshold", "%.2f");
        fprintf(f, ") at step %lld", (long long)step);
    } else if (!strcmp(st, "clean")) {
        fputs("none: every layer at or above ", f);
        num(f, o, "threshold", "%.2f");
        fprintf(f, " at step %lld", (long long)step);
    } else {
        fputs("not compared", f);
    }
    fputs("</td></tr>\n", f);
}

/* Every layer's cosines, the first drop marked: where to look, and what followed it. */
static void layers_table(FILE *f, json_object *o)
{
    json_object *layers = nb_json_get(o, "layers");
    size_t n = json_object_is_type(layers, json_type_array) ? json_object_array_length(layers) : 0;
    if (!n)
        return;
    int64_t first = nb_json_int(o, "first_layer", -1);
    /* the line chart first (it was a table only): where the drop is, at a glance */
    if (n <= 1024) {
        double attn[1024], mlp[1024];
        long drop = -1, ids[1024];
        for (size_t i = 0; i < n; i++) {
            json_object *L = json_object_array_get_idx(layers, i);
            ids[i] = (long)nb_json_int(L, "layer", (int64_t)i);
            attn[i] = nb_json_num(L, "cos_attn", NAN);
            mlp[i] = nb_json_num(L, "cos_mlp", NAN);
            if (first >= 0 && nb_json_int(L, "layer", -1) == first)
                drop = (long)i;
        }
        nb_err e;
        fputs("<div class=\"plot loc-cosines\">\n", f);
        (void)nb_svg_cosines_write(f, ids, attn, mlp, n, drop, nb_json_num(o, "threshold", NAN), &e);
        fputs("</div>\n", f);
    }
    fprintf(f, "<details><summary>Per-layer cosines (%zu layers)</summary>\n<table "
               "class=\"loc-layers\"><tr><th>Layer</th><th>cos after attention</th><th>max abs"
               "</th><th>cos after MLP</th><th>max abs</th></tr>\n",
            n);
    for (size_t i = 0; i < n; i++) {
        json_object *L = json_object_array_get_idx(layers, i);
        int64_t id = nb_json_int(L, "layer", -1);
        fprintf(f, "<tr class=\"%s\"><td>%lld</td><td>", id == first ? "loc-drop" : "loc-l",
                (long long)id);
        num(f, L, "cos_attn", "%.5f");
        fputs("</td><td>", f);
        num(f, L, "max_abs_attn", "%.4g");
        fputs("</td><td>", f);
        num(f, L, "cos_mlp", "%.5f");
        fputs("</td><td>", f);
        num(f, L, "max_abs_mlp", "%.4g");
        fputs("</td></tr>\n", f);
    }
    fputs("</table></details>\n", f);
}

void nb_dash_loc_write(FILE *f, int prompt, const char *json, const char *verdict)
{
    nb_err err;
    json_object *o = parse(json, &err);
    char lbl[128];
    label(o, verdict, lbl, sizeof lbl);
    fprintf(f, "<div class=\"localization\" id=\"loc-%d\">\n<h3>Prompt %d: <span "
               "class=\"loc-verdict\">",
            prompt, prompt);
    esc(f, lbl);
    fputs("</span></h3>\n", f);
    if (!o) {
        fputs("<p class=\"loc-unreadable\">", f);
        esc(f, err.msg);
        fputs("</p>\n</div>\n", f);
        return;
    }
    fputs("<p class=\"loc-summary\">", f);
    esc(f, nb_json_str(o, "summary", "", NULL));
    fputs("</p>\n<table class=\"loc-numbers\">\n", f);
    margin_row(f, o);
    kv_row(f, o);
    layer_row(f, o);
    row_open(f, "loc-final", "Final norm");
    fputs("cosine ", f);
    num(f, o, "final_norm_cos", "%.5f");
    fputs(", max abs ", f);
    num(f, o, "final_norm_max_abs", "%.4g");
    fputs("</td></tr>\n", f);
    row_open(f, "loc-source", "Computed by");
    esc(f, nb_json_str(o, "source", "unknown", NULL));
    fputs(" in ", f);
    num(f, o, "ms", "%.0f");
    fputs(" ms</td></tr>\n", f);
    const char *note = nb_json_str(o, "note", "", NULL);
    if (*note) {
        row_open(f, "loc-note", "Not checked");
        esc(f, note);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    layers_table(f, o);
    fputs("</div>\n", f);
    json_object_put(o);
}
