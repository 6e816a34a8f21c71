/* nb_exec_report: mlir-air's and npubench's verify / diagnosis report JSON into
 * nb_verify_result / nb_diagnosis_result, every field checked and named when wrong. */
#include "nb_exec_report.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_json.h"
#include "nb_localize.h"

#define MAX_RECORDS 4096
#define MAX_STEPS 4096
#define MAX_LAYERS 1024

/* ---- helpers ------------------------------------------------------------------------------- */

static char *dup_member(json_object *o, const char *key, int *ok)
{
    char *s = strdup(nb_json_str(o, key, "", NULL));
    if (!s)
        *ok = 0;
    return s;
}

/* n steps of unknown tokens (-1): mlir-air records only the tokens at the divergence. */
static nb_gate_step *steps_new(int n)
{
    nb_gate_step *v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    for (int i = 0; v && i < (n > 0 ? n : 1); i++) {
        v[i].token = -1;
        for (int j = 0; j < NB_GATE_K_MAX; j++)
            v[i].topk[j] = -1;
    }
    return v;
}

/* A JSON array of token ids as a step's top list (the first NB_GATE_K_MAX). */
static void top_of(json_object *arr, nb_gate_step *s)
{
    size_t n = arr ? json_object_array_length(arr) : 0;
    for (size_t i = 0; i < n && i < NB_GATE_K_MAX; i++) {
        json_object *t = json_object_array_get_idx(arr, i);
        s->topk[i] = json_object_is_type(t, json_type_int) ? json_object_get_int(t) : -1;
    }
}

static int64_t need(json_object *o, const char *what, const char *key, int64_t lo, int64_t hi,
                    int64_t dflt, nb_code *rc, nb_err *err)
{
    int64_t v = dflt;
    if (!*rc)
        *rc = nb_json_need_int(o, what, key, 0, lo, hi, dflt, &v, err);
    return v;
}

/* ---- verify --------------------------------------------------------------------------------- */

/* Fields both layouts share once read: where each format keeps them differs. */
typedef struct rec_fields {
    const char *status_key, *pass_word, *fail_word;
    const char *index_key, *steps_key, *prompt_key;
} rec_fields;

static const rec_fields AIR = {"status", "OK", "FAIL", "prompt_idx", "n_steps", "prompt_text"};
static const rec_fields OURS = {"status", "PASS", "FAIL", "index", "steps", "prompt"};

/* The parts common to both layouts: index, prompt, steps, divergence, status, reason. */
static nb_code record_common(json_object *r, const char *what, const rec_fields *f,
                             int n_tokens, nb_verify_record *v, nb_err *err)
{
    nb_code rc = NB_OK;
    v->index = (int)need(r, what, f->index_key, 0, MAX_RECORDS * 1024, 0, &rc, err);
    int steps = (int)need(r, what, f->steps_key, 0, MAX_STEPS, 0, &rc, err);
    int div = (int)need(r, what, "divergence_step", -1, steps ? steps - 1 : -1, -1, &rc, err);
    if (rc)
        return rc;
    const char *st = nb_json_str(r, f->status_key, "", NULL);
    if (strcmp(st, f->pass_word) && strcmp(st, f->fail_word))
        return nb_err_set(err, NB_EFORMAT, "%s: '%s' must be \"%s\" or \"%s\", got \"%.40s\"",
                          what, f->status_key, f->pass_word, f->fail_word, st);
    nb_gate_result *g = &v->gate;
    g->status = strcmp(st, f->pass_word) ? NB_GATE_FAIL : NB_GATE_PASS;
    g->n_steps = steps;
    g->divergence = div;
    g->agreed = div >= 0 ? div : steps;
    g->dev_token = g->ref_token = -1;
    g->dev_rank_in_ref = g->ref_rank_in_dev = -1;
    g->ref_margin = g->near_tie_band = NAN;
    snprintf(g->reason, sizeof g->reason, "%s", nb_json_str(r, "fail_reason", "", NULL));
    v->n_steps = steps;
    v->dev = steps_new(steps);
    v->ref = steps_new(n_tokens > steps ? n_tokens : steps);
    int ok = v->dev && v->ref;
    v->prompt = dup_member(r, f->prompt_key, &ok);
    if (!ok)
        return nb_err_set(err, NB_ENOMEM, "out of memory reading %s", what);
    return NB_OK;
}

/* After record_common: mlir-air's TopKCheckRecord: tokens, top-5 lists and 1-based ranks
 * at the divergence only; texts as the runner rendered them (quoted, markdown-escaped). */
static nb_code record_air(json_object *r, const char *what, nb_verify_record *v, nb_err *err)
{
    nb_code rc = NB_OK;
    nb_gate_result *g = &v->gate;
    int64_t tr = need(r, what, "test_chosen_rank_in_ref", 1, NB_GATE_K_MAX, 0, &rc, err);
    int64_t rr = need(r, what, "ref_chosen_rank_in_test", 1, NB_GATE_K_MAX, 0, &rc, err);
    int64_t dt = need(r, what, "test_chosen_at_div", -1, INT32_MAX, -1, &rc, err);
    int64_t rt = need(r, what, "ref_chosen_at_div", -1, INT32_MAX, -1, &rc, err);
    if (rc)
        return rc;
    g->dev_rank_in_ref = tr > 0 ? (int)tr - 1 : -1;
    g->ref_rank_in_dev = rr > 0 ? (int)rr - 1 : -1;
    if (g->divergence >= 0) {
        g->dev_token = (int32_t)dt;
        g->ref_token = (int32_t)rt;
        nb_gate_step *d = &v->dev[g->divergence], *f = &v->ref[g->divergence];
        d->token = g->dev_token;
        f->token = g->ref_token;
        top_of(nb_json_get_type(r, "test_topk_at_div", json_type_array), d);
        top_of(nb_json_get_type(r, "ref_topk_at_div", json_type_array), f);
    }
    int ok = 1;
    v->dev_token_text = dup_member(r, "test_chosen_text_at_div", &ok);
    v->ref_token_text = dup_member(r, "ref_chosen_text_at_div", &ok);
    v->agreed_text = dup_member(r, "agreed_prefix_text", &ok);
    v->dev_text = strdup(""); /* the runner keeps no whole generations */
    v->ref_text = strdup("");
    ok = ok && v->dev_text && v->ref_text;
    return ok ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory reading %s", what);
}

/* After record_common: npubench's record: every step's tokens (topk_checks) and the top
 * lists at the top step. */
static nb_code record_ours(json_object *r, const char *what, nb_verify_record *v, nb_err *err)
{
    nb_gate_result *g = &v->gate;
    json_object *dev = nb_json_get_type(r, "device", json_type_object),
                *ref = nb_json_get_type(r, "reference", json_type_object);
    v->n_prompt_ids = (int)nb_json_int(r, "prompt_tokens", 0);
    v->prefill_ms = nb_json_num(r, "prefill_ms", 0);
    v->decode_ms = nb_json_num(r, "decode_ms", 0);
    g->dev_token = (int32_t)nb_json_int(dev, "token", -1);
    g->ref_token = (int32_t)nb_json_int(ref, "token", -1);
    g->dev_rank_in_ref = (int)nb_json_int(dev, "rank_in_reference", -1);
    g->ref_rank_in_dev = (int)nb_json_int(ref, "rank_in_device", -1);
    g->ref_margin = nb_json_num(ref, "margin", NAN);
    g->ref_margin_beyond = (int)nb_json_int(ref, "margin_beyond_topk", 0);
    g->near_tie_band = nb_json_num(ref, "near_tie_band", NAN);
    json_object *checks = nb_json_get_type(r, "topk_checks", json_type_array);
    size_t n = checks ? json_object_array_length(checks) : 0;
    for (size_t i = 0; i < n && i < (size_t)v->n_steps; i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        v->dev[i].token = (int32_t)nb_json_int(c, "device_token", -1);
        v->ref[i].token = (int32_t)nb_json_int(c, "reference_token", -1);
    }
    int at = g->divergence >= 0 ? g->divergence : v->n_steps - 1;
    if (at >= 0) {
        top_of(nb_json_get_type(dev, "topk", json_type_array), &v->dev[at]);
        top_of(nb_json_get_type(ref, "topk", json_type_array), &v->ref[at]);
    }
    int ok = 1;
    v->dev_token_text = dup_member(dev, "text", &ok);
    v->ref_token_text = dup_member(ref, "text", &ok);
    v->agreed_text = dup_member(r, "agreed_prefix", &ok);
    v->dev_text = dup_member(r, "device_text", &ok);
    v->ref_text = dup_member(r, "reference_text", &ok);
    return ok ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory reading %s", what);
}

/* mlir-air's per-layer records of the NPU-vs-HF pair (diagnosis mode writes them; a verify
 * report's "per_layer" is [] today) as each layer's output: min cosine over the positions and
 * max abs error; the highest layer is the post-final-norm state. */
static nb_code air_layers(json_object *root, nb_localization *l, nb_err *err)
{
    json_object *arr = nb_json_get_type(root, "per_layer", json_type_array);
    size_t n = arr ? json_object_array_length(arr) : 0;
    if (n > MAX_LAYERS)
        n = MAX_LAYERS;
    int top = -1;
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(arr, i);
        int64_t layer = nb_json_int(r, "layer", -1);
        if (!strcmp(nb_json_str(r, "pair", "npu_vs_hf", NULL), "npu_vs_hf") && layer > top &&
            layer < MAX_LAYERS)
            top = (int)layer;
    }
    if (top < 0)
        return NB_OK;
    l->layers = calloc(top > 0 ? (size_t)top : 1, sizeof *l->layers);
    if (top > 0 && !l->layers)
        return nb_err_set(err, NB_ENOMEM, "out of memory for the report's per-layer records");
    l->n_layers = top;
    for (int i = 0; i < top; i++)
        l->layers[i] = (nb_loc_layer){i, NAN, NAN, NAN, NAN};
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(arr, i);
        int64_t layer = nb_json_int(r, "layer", -1);
        if (strcmp(nb_json_str(r, "pair", "npu_vs_hf", NULL), "npu_vs_hf") || layer < 0 ||
            layer > top)
            continue;
        double c = nb_json_num(nb_json_get_type(r, "cosine", json_type_object), "min", NAN);
        double m = nb_json_num(nb_json_get_type(r, "errors", json_type_object), "max_abs", NAN);
        if (layer == top) {
            l->final_cos = c;
            l->final_max_abs = m;
        } else {
            l->layers[layer].cos_mlp = c;
            l->layers[layer].max_abs_mlp = m;
        }
    }
    l->step = -1;
    nb_localize_pick_layer(l, 0);
    return NB_OK;
}

/* A FAIL record's localization from what the report provides: npubench's own "localization"
 * object as written, or, from mlir-air's report, the per-layer records when there are any;
 * what is not there is said in the note. */
static nb_code report_localization(json_object *root, json_object *r, int ours, const char *what,
                                   nb_verify_record *v, nb_err *err)
{
    json_object *lj = ours ? nb_json_get_type(r, "localization", json_type_object) : NULL;
    if (lj) {
        nb_code rc = nb_localize_from_json(lj, &v->loc, err);
        return rc ? nb_err_prefix(err, "%s.localization: ", what) : NB_OK;
    }
    if (v->gate.status == NB_GATE_PASS || v->gate.divergence < 0)
        return NB_OK;
    nb_localization *l = &v->loc;
    memset(l, 0, sizeof *l);
    l->kv_first_bad = l->step = l->first_layer = -1;
    l->kv_max_diff = l->kv_tol = l->final_cos = l->final_max_abs = l->threshold = NAN;
    snprintf(l->source, sizeof l->source, "%s", ours ? "npubench report" : "mlir-air report");
    nb_code rc = ours ? NB_OK : air_layers(root, l, err);
    if (rc)
        return rc;
    snprintf(l->note, sizeof l->note, "%s",
             l->n_layers ? "the report gives each layer's output only, summarised over "
                           "positions; no logits (margin) and no prefill-vs-decode check"
             : ours ? "the report carries no localization (made before npubench had one)"
                    : "the report carries no logits (margin), no prefill-vs-decode check and "
                      "no per-layer records (mlir-air writes those in diagnosis mode only)");
    l->present = 1;
    nb_localize_finish(l, &v->gate);
    return NB_OK;
}

nb_code nb_exec_report_verify(json_object *root, const char *what, int k_dflt,
                              nb_verify_result *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    json_object *cfg = nb_json_get_type(root, "config", json_type_object);
    json_object *arr = nb_json_get_type(root, "topk_checks", json_type_array);
    const char *key = "topk_checks";
    int ours = !arr;
    if (ours) {
        arr = nb_json_get_type(root, "records", json_type_array);
        key = "records";
    }
    /* report.py writes "topk_checks": null when the gate ran no prompt at all. */
    if (!arr && json_object_object_get_ex(root, "topk_checks", NULL))
        return nb_err_set(err, NB_EFORMAT, "%s: 'topk_checks' holds no gate record: the gate "
                          "did not run", what);
    if (!arr)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: neither 'topk_checks' (mlir-air) nor 'records' (npubench) is an "
                          "array: not a verify report",
                          what);
    size_t n = json_object_array_length(arr);
    if (n > MAX_RECORDS)
        return nb_err_set(err, NB_EFORMAT, "%s: %zu %s, at most %d", what, n, key, MAX_RECORDS);
    /* n_tokens first: every record's reference steps are allocated to it. */
    int longest = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = nb_json_int(json_object_array_get_idx(arr, i), ours ? "steps" : "n_steps", 0);
        if (s > longest && s <= MAX_STEPS)
            longest = (int)s;
    }
    int64_t k = k_dflt, n_tokens = longest;
    nb_code rc = NB_OK;
    if (ours) {
        char w[256];
        snprintf(w, sizeof w, "%s: config", what);
        k = need(cfg, w, "k", 1, NB_GATE_K_MAX, k_dflt, &rc, err);
        n_tokens = need(cfg, w, "n_tokens", 0, MAX_STEPS, longest, &rc, err);
    } else if (n) {
        char w[256];
        snprintf(w, sizeof w, "%s: topk_checks[0]", what);
        k = need(json_object_array_get_idx(arr, 0), w, "k", 1, NB_GATE_K_MAX, k_dflt, &rc, err);
    }
    if (rc)
        return rc;
    if (n_tokens < longest)
        n_tokens = longest;
    out->recs = calloc(n ? n : 1, sizeof *out->recs);
    if (!out->recs)
        return nb_err_set(err, NB_ENOMEM, "out of memory reading %s", what);
    out->k = (int)k;
    out->n_tokens = (int)n_tokens;
    snprintf(out->prompts_path, sizeof out->prompts_path, "%s",
             nb_json_str(cfg, "prompts_file", "", NULL));
    snprintf(out->prompts_sha256, sizeof out->prompts_sha256, "%s",
             nb_json_str(cfg, "prompts_sha256", "", NULL));
    for (size_t i = 0; i < n && !rc; i++) {
        json_object *r = json_object_array_get_idx(arr, i);
        char w[256];
        snprintf(w, sizeof w, "%s: %s[%zu]", what, key, i);
        if (!json_object_is_type(r, json_type_object)) {
            rc = nb_err_set(err, NB_EFORMAT, "%s: not an object", w);
            break;
        }
        /* Only the NPU-vs-HF pair gates (report.py's has_failure). */
        if (!ours && strcmp(nb_json_str(r, "pair", "npu_vs_hf", NULL), "npu_vs_hf"))
            continue;
        nb_verify_record *v = &out->recs[out->n++]; /* counted first: freed on error */
        rc = record_common(r, w, ours ? &OURS : &AIR, out->n_tokens, v, err);
        if (!rc)
            rc = ours ? record_ours(r, w, v, err) : record_air(r, w, v, err);
        if (!rc)
            rc = report_localization(root, r, ours, w, v, err);
        if (!rc && v->gate.status == NB_GATE_PASS)
            out->n_pass++;
        else if (!rc)
            out->n_fail++;
    }
    if (!rc && !out->n)
        rc = nb_err_set(err, NB_EFORMAT, "%s: '%s' holds no gate record: the gate did not run",
                        what, key);
    if (rc) {
        nb_verify_result_free(out);
        return rc;
    }
    out->status = out->n_fail ? NB_GATE_FAIL : NB_GATE_PASS;
    return NB_OK;
}

/* ---- diagnosis -------------------------------------------------------------------------------- */

nb_code nb_exec_report_diagnosis(json_object *root, const char *what,
                                 nb_diagnosis_result *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    out->dev_final.token = out->ref_final.token = -1;
    json_object *air = nb_json_get_type(root, "per_layer", json_type_array);
    json_object *arr = air ? air : nb_json_get_type(root, "layers", json_type_array);
    if (!arr)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: neither 'per_layer' (mlir-air) nor 'layers' (npubench) is an "
                          "array: not a diagnosis report",
                          what);
    size_t n = json_object_array_length(arr);
    if (n > MAX_LAYERS)
        return nb_err_set(err, NB_EFORMAT, "%s: %zu layers, at most %d", what, n, MAX_LAYERS);
    out->layers = calloc(n ? n : 1, sizeof *out->layers);
    if (!out->layers)
        return nb_err_set(err, NB_ENOMEM, "out of memory reading %s", what);
    const char *prompt = air ? nb_json_str(nb_json_get(root, "config"), "prompt", "", NULL)
                             : nb_json_str(root, "prompt", "", NULL);
    snprintf(out->prompt, sizeof out->prompt, "%s", prompt);
    snprintf(out->trace_path, sizeof out->trace_path, "%s",
             nb_json_str(root, "reference", "", NULL));
    out->n_pos = (int)nb_json_int(root, "positions", 0);
    int top = -1;
    nb_code rc = NB_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        json_object *r = json_object_array_get_idx(arr, i);
        char w[256];
        snprintf(w, sizeof w, "%s: %s[%zu]", what, air ? "per_layer" : "layers", i);
        nb_diagnosis_layer *L = &out->layers[i];
        L->layer = (int)need(r, w, "layer", 0, MAX_LAYERS, 0, &rc, err);
        json_object *cos = air ? nb_json_get(r, "cosine") : r;
        json_object *errs = air ? nb_json_get(r, "errors") : r;
        const char *pre = air ? "" : "cos_";
        const char *keys[4] = {"min", "p5", "median", "mean"};
        double *dst[4] = {&L->s.min, &L->s.p5, &L->s.median, &L->s.mean};
        for (int k = 0; k < 4 && !rc; k++) {
            char key[16];
            snprintf(key, sizeof key, "%s%s", pre, keys[k]);
            rc = nb_json_need_num(cos, w, key, 1, -DBL_MAX, DBL_MAX, 0, dst[k], err);
        }
        if (!rc)
            rc = nb_json_need_num(errs, w, "max_abs", 1, -DBL_MAX, DBL_MAX, 0, &L->s.max_abs, err);
        L->post_norm = !air && nb_json_bool(r, "post_final_norm", 0);
        if (L->layer > top)
            top = L->layer;
        out->n_layers++;
    }
    if (rc) {
        nb_diagnosis_result_free(out);
        return rc;
    }
    /* verify_runner's last cell is the post-final-norm hidden state, at n_layers - 1. */
    for (int i = 0; air && i < out->n_layers; i++)
        out->layers[i].post_norm = out->layers[i].layer == top;
    return NB_OK;
}
