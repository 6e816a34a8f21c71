/* nb_localize: one cache-free prefill of prompt + agreed prefix answers both questions after a
 * divergence: do the decode steps match it (KV cache), and which layer leaves the reference. */
#include "nb_localize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_json.h"
#include "nb_time.h"

void nb_localize_init(nb_localization *out)
{
    memset(out, 0, sizeof *out);
    out->ref_margin = NAN;
    out->kv_first_bad = -1;
    out->step = -1;
    out->first_layer = -1;
    out->final_cos = out->final_max_abs = NAN;
}

void nb_localize_pick_layer(nb_localization *l, int have_attn)
{
    l->threshold = NB_LOC_COS_THRESHOLD;
    l->first_layer = -1;
    l->sub_block[0] = '\0';
    l->layers_status = NB_LOC_LAYERS_CLEAN;
    for (int i = 0; i < l->n_layers && l->layers; i++) {
        const nb_loc_layer *L = &l->layers[i];
        /* NaN is below every threshold: NaN activations are a fault, not a tie */
        const char *sub = have_attn && !(L->cos_attn >= NB_LOC_COS_THRESHOLD) ? "attention"
                          : !(L->cos_mlp >= NB_LOC_COS_THRESHOLD) ? (have_attn ? "mlp" : "")
                                                                   : NULL;
        if (sub) {
            l->first_layer = L->layer;
            snprintf(l->sub_block, sizeof l->sub_block, "%s", sub);
            break;
        }
    }
    if (l->first_layer < 0 && !isnan(l->final_cos) && l->final_cos < NB_LOC_COS_THRESHOLD) {
        l->first_layer = l->n_layers > 0 ? l->layers[l->n_layers - 1].layer : 0;
        snprintf(l->sub_block, sizeof l->sub_block, "final_norm");
    }
    if (l->first_layer >= 0)
        l->layers_status = NB_LOC_LAYERS_FAULT;
}

/* The first part of the summary: what the verdict names. */
static void verdict_text(const nb_localization *l, char *buf, size_t cap)
{
    if (!strcmp(l->verdict, "kv_cache") && isnan(l->kv_max_diff)) {
        snprintf(buf, cap,
                 "KV cache / decode path: decode step %d gives NaN logits where a cache-free "
                 "prefill of the same tokens gives finite ones", l->kv_first_bad);
    } else if (!strcmp(l->verdict, "kv_cache")) {
        snprintf(buf, cap,
                 "KV cache / decode path: decode step %d differs from a cache-free prefill of the "
                 "same tokens by %.3g logits (tolerance %.2f)",
                 l->kv_first_bad, l->kv_max_diff, l->kv_tol);
    } else if (!strcmp(l->verdict, "layer")) {
        double c = NAN;
        if (!strcmp(l->sub_block, "final_norm"))
            c = l->final_cos;
        else
            for (int i = 0; l->layers && i < l->n_layers; i++)
                if (l->layers[i].layer == l->first_layer)
                    c = !strcmp(l->sub_block, "attention") ? l->layers[i].cos_attn
                                                            : l->layers[i].cos_mlp;
        if (!l->sub_block[0]) /* a report with each layer's output only */
            snprintf(buf, cap, "layer %d output (sub-block not reported): cosine %.4f to the "
                     "reference (threshold %.2f)", l->first_layer, c, l->threshold);
        else
            snprintf(buf, cap, "layer %d %s: hidden-state cosine %.4f to the reference "
                     "(threshold %.2f) at step %d", l->first_layer, l->sub_block, c,
                     l->threshold, l->step);
    } else if (!strcmp(l->verdict, "near_tie")) {
        snprintf(buf, cap, "near tie: reference margin %.3f within the bf16 band %.2f",
                 l->ref_margin, l->band);
    } else {
        snprintf(buf, cap, "not localized");
    }
}

void nb_localize_finish(nb_localization *l, const nb_gate_result *g)
{
    l->band = NB_GATE_NEAR_TIE;
    if (g) {
        l->ref_margin = g->ref_margin;
        l->near_tie = !isnan(g->ref_margin) && !g->ref_margin_beyond &&
                      g->ref_margin <= NB_GATE_NEAR_TIE;
    }
    /* A real fault outranks a near tie: a near tie only explains a divergence when the
     * deployment's numbers otherwise follow the reference. */
    const char *v = l->kv == NB_LOC_KV_FAULT                   ? "kv_cache"
                    : l->layers_status == NB_LOC_LAYERS_FAULT ? "layer"
                    : l->near_tie                             ? "near_tie"
                                                              : "unlocalized";
    snprintf(l->verdict, sizeof l->verdict, "%s", v);
    char head[200], kv[96], layers[96];
    verdict_text(l, head, sizeof head);
    if (l->kv == NB_LOC_KV_CLEAN)
        snprintf(kv, sizeof kv, "KV cache / decode path clean (steps 1..%d)", l->kv_steps);
    else if (l->kv == NB_LOC_KV_UNCHECKED)
        snprintf(kv, sizeof kv, "decode path not checked (%s)",
                 l->kv_steps == 0 && !strcmp(l->source, "engine") ? "divergence at step 0"
                                                                   : "not reported");
    else
        kv[0] = '\0';
    if (l->layers_status == NB_LOC_LAYERS_CLEAN)
        snprintf(layers, sizeof layers, "every layer >= %.2f at step %d", l->threshold, l->step);
    else if (l->layers_status == NB_LOC_LAYERS_NONE)
        snprintf(layers, sizeof layers, "layers not compared");
    else
        layers[0] = '\0';
    snprintf(l->summary, sizeof l->summary, "%s%s%s%s%s", head, kv[0] ? "; " : "", kv,
             layers[0] ? "; " : "", layers);
}

nb_code nb_localize_copy(nb_localization *dst, const nb_localization *src, nb_err *err)
{
    *dst = *src;
    if (!src->layers || src->n_layers <= 0) {
        dst->layers = NULL;
        return NB_OK;
    }
    dst->layers = malloc(sizeof *dst->layers * (size_t)src->n_layers);
    if (!dst->layers) {
        dst->n_layers = 0;
        return nb_err_set(err, NB_ENOMEM, "out of memory copying a localization");
    }
    memcpy(dst->layers, src->layers, sizeof *dst->layers * (size_t)src->n_layers);
    return NB_OK;
}

void nb_localize_free(nb_localization *l)
{
    free(l->layers);
    l->layers = NULL;
    l->n_layers = 0;
}

static const char *const kv_names[] = {"unchecked", "clean", "fault"};
static const char *const layer_names[] = {"none", "clean", "fault"};

/* JSON has no NaN: unknown numbers are null. */
static json_object *num(double x)
{
    return isnan(x) || isinf(x) ? NULL : json_object_new_double(x);
}

json_object *nb_localize_json(const nb_localization *l)
{
    if (!l->present)
        return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "verdict", nb_json_new_str(l->verdict));
    json_object_object_add(o, "summary", nb_json_new_str(l->summary));
    json_object_object_add(o, "source", nb_json_new_str(l->source));
    json_object_object_add(o, "note", nb_json_new_str(l->note));
    json_object_object_add(o, "near_tie", json_object_new_boolean(l->near_tie));
    json_object_object_add(o, "ref_margin", num(l->ref_margin));
    json_object_object_add(o, "near_tie_band", num(l->band));
    json_object_object_add(o, "kv", nb_json_new_str(kv_names[l->kv]));
    json_object_object_add(o, "kv_steps", json_object_new_int(l->kv_steps));
    json_object_object_add(o, "kv_first_bad_step", json_object_new_int(l->kv_first_bad));
    json_object_object_add(o, "kv_max_diff", num(l->kv_max_diff));
    json_object_object_add(o, "kv_tolerance", num(l->kv_tol));
    json_object_object_add(o, "layers_status", nb_json_new_str(layer_names[l->layers_status]));
    json_object_object_add(o, "step", json_object_new_int(l->step));
    json_object_object_add(o, "first_layer", json_object_new_int(l->first_layer));
    json_object_object_add(o, "sub_block", nb_json_new_str(l->sub_block));
    json_object_object_add(o, "threshold", num(l->threshold));
    json_object_object_add(o, "final_norm_cos", num(l->final_cos));
    json_object_object_add(o, "final_norm_max_abs", num(l->final_max_abs));
    json_object *arr = json_object_new_array();
    for (int i = 0; i < l->n_layers && l->layers; i++) {
        const nb_loc_layer *L = &l->layers[i];
        json_object *r = json_object_new_object();
        json_object_object_add(r, "layer", json_object_new_int(L->layer));
        json_object_object_add(r, "cos_attn", num(L->cos_attn));
        json_object_object_add(r, "max_abs_attn", num(L->max_abs_attn));
        json_object_object_add(r, "cos_mlp", num(L->cos_mlp));
        json_object_object_add(r, "max_abs_mlp", num(L->max_abs_mlp));
        json_object_array_add(arr, r);
    }
    json_object_object_add(o, "layers", arr);
    json_object_object_add(o, "ms", json_object_new_double(l->ms));
    return o;
}


static int get_enum(json_object *o, const char *key, const char *const *names, int n)
{
    const char *s = nb_json_str(o, key, "", NULL);
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return 0;
}

/* An integer member in the range a localization's steps and layers take, else dflt. */
static int get_i(json_object *o, const char *key, int dflt)
{
    int64_t x = nb_json_int(o, key, dflt);
    return x < -1 || x > 1 << 20 ? dflt : (int)x;
}

nb_code nb_localize_from_json(json_object *o, nb_localization *out, nb_err *err)
{
    nb_localize_init(out);
    if (!o || !json_object_is_type(o, json_type_object))
        return nb_err_set(err, NB_EFORMAT, "localization: not a JSON object");
    snprintf(out->verdict, sizeof out->verdict, "%s", nb_json_str(o, "verdict", "", NULL));
    snprintf(out->summary, sizeof out->summary, "%s", nb_json_str(o, "summary", "", NULL));
    snprintf(out->source, sizeof out->source, "%s", nb_json_str(o, "source", "", NULL));
    snprintf(out->note, sizeof out->note, "%s", nb_json_str(o, "note", "", NULL));
    snprintf(out->sub_block, sizeof out->sub_block, "%s", nb_json_str(o, "sub_block", "", NULL));
    json_object *nt = nb_json_get(o, "near_tie");
    out->near_tie = nt && json_object_get_boolean(nt);
    out->ref_margin = nb_json_num(o, "ref_margin", NAN);
    out->band = nb_json_num(o, "near_tie_band", NAN);
    out->kv = (nb_loc_kv)get_enum(o, "kv", kv_names, 3);
    out->kv_steps = get_i(o, "kv_steps", 0);
    out->kv_first_bad = get_i(o, "kv_first_bad_step", -1);
    out->kv_max_diff = nb_json_num(o, "kv_max_diff", NAN);
    out->kv_tol = nb_json_num(o, "kv_tolerance", NAN);
    out->layers_status = (nb_loc_layers)get_enum(o, "layers_status", layer_names, 3);
    out->step = get_i(o, "step", -1);
    out->first_layer = get_i(o, "first_layer", -1);
    out->threshold = nb_json_num(o, "threshold", NAN);
    out->final_cos = nb_json_num(o, "final_norm_cos", NAN);
    out->final_max_abs = nb_json_num(o, "final_norm_max_abs", NAN);
    out->ms = nb_json_num(o, "ms", NAN);
    json_object *arr = nb_json_get_type(o, "layers", json_type_array);
    size_t n = arr ? json_object_array_length(arr) : 0;
    if (n > 4096)
        return nb_err_set(err, NB_EFORMAT, "localization.layers: %zu entries (limit 4096)", n);
    if (n) {
        out->layers = calloc(n, sizeof *out->layers);
        if (!out->layers)
            return nb_err_set(err, NB_ENOMEM, "localization: out of memory");
        out->n_layers = (int)n;
        for (size_t i = 0; i < n; i++) {
            json_object *r = json_object_array_get_idx(arr, i);
            nb_loc_layer *L = &out->layers[i];
            L->layer = get_i(r, "layer", (int)i);
            L->cos_attn = nb_json_num(r, "cos_attn", NAN);
            L->max_abs_attn = nb_json_num(r, "max_abs_attn", NAN);
            L->cos_mlp = nb_json_num(r, "cos_mlp", NAN);
            L->max_abs_mlp = nb_json_num(r, "max_abs_mlp", NAN);
        }
    }
    out->present = 1;
    return NB_OK;
}
