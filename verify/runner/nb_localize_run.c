/* nb_localize_run: one cache-free prefill of prompt + agreed prefix answers both questions
 * after a divergence: do the decode steps match it (KV cache), and which layer leaves the reference. */
#include "nb_localize_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_time.h"

/* The hidden states of one position, captured by the engine's stage hook. */
typedef struct capture {
    int pos, n_layers, dim;
    float *attn, *mlp, *final; /* [n_layers][dim], [n_layers][dim], [dim] */
} capture;

static void on_stage(void *user, int layer, nb_stage st, int pos0, int n, int dim,
                     const float *hidden)
{
    capture *c = user;
    if (c->pos < pos0 || c->pos >= pos0 + n || dim != c->dim || layer < 0 ||
        layer >= c->n_layers)
        return;
    const float *row = hidden + (size_t)(c->pos - pos0) * dim;
    float *dst = st == NB_STAGE_ATTN  ? c->attn + (size_t)layer * dim
                 : st == NB_STAGE_MLP ? c->mlp + (size_t)layer * dim
                                      : c->final;
    memcpy(dst, row, sizeof(float) * (size_t)dim);
}

/* Cosine and largest |a - b| of two vectors; NaN anywhere gives a NaN cosine. */
static void cos_abs(const float *a, const float *b, int n, double *cos, double *max_abs)
{
    double dot = 0, na = 0, nb = 0, m = 0;
    for (int i = 0; i < n; i++) {
        dot += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m))
            m = d; /* NaN sticks */
    }
    *cos = na > 0 && nb > 0 ? dot / (sqrt(na) * sqrt(nb)) : (na == nb ? 1.0 : 0.0);
    if (isnan(dot) || isnan(na) || isnan(nb))
        *cos = NAN;
    *max_abs = m;
}

/* Decode step s (1..d) against row s of the prefill logits, over the device's top-k ids:
 * the largest difference, NaN sticking (a NaN logit is a fault), and the first step beyond
 * NB_LOC_KV_TOL (-1 when none). */
static void compare_steps(const nb_gate_step *dev, int d, int k, const float *rows, int vocab,
                          double *max_diff, int *first_bad)
{
    *max_diff = 0;
    *first_bad = -1;
    for (int s = 1; s <= d; s++) {
        const float *lg = rows + (size_t)s * vocab;
        for (int j = 0; j < k; j++) {
            int32_t id = dev[s].topk[j];
            double diff = id >= 0 && id < vocab ? fabs((double)lg[id] - dev[s].logits[j]) : NAN;
            if (!(diff <= *max_diff))
                *max_diff = diff;
            if (!(diff <= NB_LOC_KV_TOL) && *first_bad < 0)
                *first_bad = s;
        }
    }
}

static void check_kv(const nb_gate_step *dev, int d, int k, const float *rows, int vocab,
                     nb_localization *out)
{
    out->kv_tol = NB_LOC_KV_TOL;
    out->kv_steps = d;
    compare_steps(dev, d, k, rows, vocab, &out->kv_max_diff, &out->kv_first_bad);
    out->kv = d <= 0 ? NB_LOC_KV_UNCHECKED
              : out->kv_first_bad >= 0 ? NB_LOC_KV_FAULT
                                       : NB_LOC_KV_CLEAN;
}

/* The prompt and the first d device tokens, the logits of positions n_prompt - 1 on (row s:
 * what step s's decode should give) from one cache-free prefill; *ids_out and *rows_out owned
 * by the caller, also on error. */
static nb_code replay(nb_deploy *d, const int32_t *prompt_ids, int n_prompt, const nb_gate_step *dev,
                      int steps, int32_t **ids_out, float **rows_out, nb_err *err)
{
    int vocab = nb_deploy_vocab(d), n = n_prompt + steps;
    int32_t *ids = *ids_out = malloc(sizeof(int32_t) * (size_t)n);
    float *rows = *rows_out = malloc(sizeof(float) * (size_t)(steps + 1) * vocab);
    if (!ids || !rows)
        return nb_err_set(err, NB_ENOMEM, "out of memory (%d positions)", n);
    memcpy(ids, prompt_ids, sizeof(int32_t) * (size_t)n_prompt);
    for (int s = 0; s < steps; s++)
        ids[n_prompt + s] = dev[s].token;
    return nb_deploy_prefill_logits(d, ids, n, n_prompt - 1, rows, err);
}

nb_code nb_decode_check_run(nb_deploy *d, const int32_t *prompt_ids, int n_prompt,
                            const nb_gate_step *dev, int n_dev, int k, int steps,
                            nb_decode_check *out, nb_err *err)
{
    nb_decode_check_init(out);
    double t0 = nb_now_ms();
    int m = steps < n_dev - 1 ? steps : n_dev - 1;
    if (m < 1 || n_prompt < 1) {
        snprintf(out->note, sizeof out->note, "no decode step to check (%d steps generated)",
                 n_dev);
        return NB_OK;
    }
    int32_t *ids = NULL;
    float *rows = NULL;
    nb_code rc = replay(d, prompt_ids, n_prompt, dev, m, &ids, &rows, err);
    if (rc) {
        nb_err_prefix(err, "decode-path check: ");
        snprintf(out->note, sizeof out->note, "%.150s", err->msg);
    } else {
        out->steps = m;
        compare_steps(dev, m, k, rows, nb_deploy_vocab(d), &out->max_diff,
                      &out->first_bad);
        out->status = out->first_bad >= 0 ? NB_LOC_KV_FAULT : NB_LOC_KV_CLEAN;
    }
    free(ids);
    free(rows);
    out->ms = nb_now_ms() - t0;
    return rc;
}

/* The latest reference position at or before the divergence, -1 when none. */
static int pick_states(const nb_trace_prompt *ref, int d)
{
    int best = -1;
    for (int i = 0; ref && i < ref->n_states; i++)
        if (ref->states[i].step <= d)
            best = i;
    return best;
}

/* Both stages of every layer and the final norm against the reference, then the first drop. */
static void compare_layers(const capture *c, const nb_trace_states *rs, nb_localization *out)
{
    for (int l = 0; l < c->n_layers; l++) {
        nb_loc_layer *L = &out->layers[l];
        size_t off = (size_t)l * c->dim;
        L->layer = l;
        cos_abs(c->attn + off, rs->attn + off, c->dim, &L->cos_attn, &L->max_abs_attn);
        cos_abs(c->mlp + off, rs->mlp + off, c->dim, &L->cos_mlp, &L->max_abs_mlp);
    }
    cos_abs(c->final, rs->final, c->dim, &out->final_cos, &out->final_max_abs);
    /* the engine's own final norm: a NaN there is a drop too */
    if (isnan(out->final_cos))
        out->final_cos = -1.0;
    nb_localize_pick_layer(out, 1);
}

/* Why no layers are compared, or NULL when they can be. */
static const char *states_missing(const nb_trace_prompt *ref, int pick, const nb_model_config *cfg)
{
    if (!ref || ref->n_states == 0)
        return "the reference trace has no hidden states for this prompt (regenerate it with "
               "`make hf-reference`)";
    if (pick < 0)
        return "the reference keeps no hidden states at or before the divergence step";
    if (ref->n_layers != cfg->n_layers || ref->dim != cfg->dim)
        return "the reference's hidden states are of another shape than the model's";
    return NULL;
}

nb_code nb_localize_run(nb_deploy *d, const int32_t *prompt_ids, int n_prompt,
                        const nb_gate_step *dev, int k, const nb_gate_result *g,
                        const nb_trace_prompt *ref, nb_localization *out, nb_err *err)
{
    nb_localize_init(out);
    int div = g->divergence;
    if (div < 0 || n_prompt < 1)
        return nb_err_set(err, NB_EINVAL, "localize: no divergence to localize");
    double t0 = nb_now_ms();
    const nb_model_config *cfg = nb_deploy_cfg(d);
    int pick = pick_states(ref, div);
    const char *missing = states_missing(ref, pick, cfg);
    int32_t *ids = NULL;
    float *rows = NULL;
    capture c = {.n_layers = cfg->n_layers, .dim = cfg->dim, .pos = -1};
    c.attn = calloc((size_t)cfg->n_layers * cfg->dim, sizeof(float));
    c.mlp = calloc((size_t)cfg->n_layers * cfg->dim, sizeof(float));
    c.final = calloc((size_t)cfg->dim, sizeof(float));
    out->layers = missing ? NULL : calloc((size_t)cfg->n_layers, sizeof *out->layers);
    nb_code rc = NB_OK;
    if (!c.attn || !c.mlp || !c.final || (!missing && !out->layers)) {
        rc = nb_err_set(err, NB_ENOMEM, "localize: out of memory (%d layers)", cfg->n_layers);
        goto done;
    }
    if (!missing) {
        out->step = ref->states[pick].step;
        c.pos = n_prompt - 1 + out->step;
        rc = nb_deploy_set_stage_hook(d, on_stage, &c, err);
    }
    if (!rc)
        rc = replay(d, prompt_ids, n_prompt, dev, div, &ids, &rows, err);
    nb_deploy_set_stage_hook(d, NULL, NULL, NULL);
    if (rc) {
        nb_err_prefix(err, "localize: ");
        goto done;
    }
    snprintf(out->source, sizeof out->source, "engine");
    check_kv(dev, div, k, rows, nb_deploy_vocab(d), out);
    if (missing) {
        snprintf(out->note, sizeof out->note, "%s", missing);
    } else {
        out->n_layers = cfg->n_layers;
        compare_layers(&c, &ref->states[pick], out);
    }
    out->present = 1;
    nb_localize_finish(out, g);
done:
    free(ids);
    free(rows);
    free(c.attn);
    free(c.mlp);
    free(c.final);
    if (rc)
        nb_localize_free(out);
    out->ms = nb_now_ms() - t0;
    return rc;
}
