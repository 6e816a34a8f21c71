/* nb_backend_air: the air backend's table: prefill and decode steps run by a deployment's own
 * mlir-air verify adapter in a resident host (nb_air); the gate and the rest stay in C. */
#include "nb_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_air.h"
#include "nb_deploy.h"

typedef struct air_be {
    nb_air *h;
    int vocab;     /* the model file's: the host's logits must match it */
    int n_layers;
    int max_seq;
    nb_layer_hook layer_hook;
    void *layer_user;
    nb_stage_hook stage_hook;
    void *stage_user;
} air_be;

static nb_code air_open(nb_deploy *d, void **be, nb_err *err)
{
    *be = NULL;
    const nb_air_cfg *cfg = d->spec.backend_cfg;
    if (!cfg)
        return nb_err_set(err, NB_EINVAL, "backend 'air': no air configuration (a deployments "
                          "file entry's \"air\" object)");
    air_be *a = calloc(1, sizeof *a);
    if (!a)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    const nb_model_config *mc = nb_model_cfg(d->model);
    a->vocab = mc->vocab;
    a->n_layers = mc->n_layers;
    a->max_seq = cfg->max_seq;
    nb_code rc = nb_air_open(cfg, &a->h, err);
    if (rc) {
        free(a);
        return rc;
    }
    nb_air_info info;
    nb_air_info_get(a->h, &info);
    if (info.n_layers && info.n_layers != a->n_layers) {
        nb_air_close(a->h);
        free(a);
        return nb_err_set(err, NB_EMISMATCH, "air adapter %s: config.n_layers %d, the model "
                          "file %s has %d layers", cfg->adapter, info.n_layers, d->model_path,
                          mc->n_layers);
    }
    *be = a;
    return NB_OK;
}

static void air_close(void *be)
{
    air_be *a = be;
    if (!a)
        return;
    nb_air_close(a->h);
    free(a);
}

static nb_code check_vocab(const air_be *a, int vocab, nb_err *err)
{
    if (vocab != a->vocab)
        return nb_err_set(err, NB_EMISMATCH, "air host: %d logits, the model file's vocabulary "
                          "has %d", vocab, a->vocab);
    return NB_OK;
}

/* The host's per-layer states to the hooks: layer outputs (the last layer's after the final
 * norm, as HF's hidden_states[-1]) and, for localization, each layer's stages. */
static nb_code feed_hooks(air_be *a, const nb_air_prefill_out *o, nb_err *err)
{
    if (!o->n_layers || !o->ffn_out)
        return nb_err_set(err, NB_EUNSUPPORTED, "air adapter gives no layer_intermediates "
                          "(its runner has no lite_mode switch and was built lite)");
    if (o->n_layers != a->n_layers)
        return nb_err_set(err, NB_EMISMATCH, "air host: %d layer_intermediates, the model has %d",
                          o->n_layers, a->n_layers);
    for (int l = 0; l < o->n_layers; l++) {
        if (!o->ffn_out[l])
            return nb_err_set(err, NB_EFORMAT, "air host: layer %d has no ffn_out", l);
        if (a->stage_hook) {
            if (o->attn && o->attn[l])
                a->stage_hook(a->stage_user, l, NB_STAGE_ATTN, 0, o->n_pos, o->dim, o->attn[l]);
            a->stage_hook(a->stage_user, l, NB_STAGE_MLP, 0, o->n_pos, o->dim, o->ffn_out[l]);
        }
        if (a->layer_hook) {
            const float *rows = l == o->n_layers - 1 && o->final_normed ? o->final_normed
                                                                         : o->ffn_out[l];
            a->layer_hook(a->layer_user, l, 0, o->n_pos, o->dim, rows);
        }
    }
    if (a->stage_hook && o->final_normed)
        a->stage_hook(a->stage_user, o->n_layers - 1, NB_STAGE_FINAL, 0, o->n_pos, o->dim,
                      o->final_normed);
    return NB_OK;
}

static nb_code air_prefill(void *be, const int32_t *ids, int n, const float **logits,
                           nb_err *err)
{
    air_be *a = be;
    nb_air_prefill_out o;
    int want = a->layer_hook || a->stage_hook;
    nb_code rc = nb_air_prefill(a->h, ids, n, want, &o, err);
    if (!rc)
        rc = check_vocab(a, o.vocab, err);
    if (!rc && want)
        rc = feed_hooks(a, &o, err);
    *logits = rc ? NULL : o.logits;
    return rc;
}

static nb_code air_decode_step(void *be, int32_t token, int pos, const float **logits,
                               nb_err *err)
{
    air_be *a = be;
    nb_air_step_out o;
    nb_code rc = nb_air_decode_step(a->h, token, pos, &o, err);
    if (!rc)
        rc = check_vocab(a, o.vocab, err);
    *logits = rc ? NULL : o.logits;
    return rc;
}

/* The runner's prefill answers the last position only, so the logits of positions first..n-1
 * are one fresh prefill per prefix; the stage hooks see the longest, which holds every
 * position (each prefix is causal: its states are the longest's first rows). */
static nb_code air_prefill_logits(void *be, const int32_t *ids, int n, int first, float *out,
                                  nb_err *err)
{
    air_be *a = be;
    if (first < 0 || first >= n)
        return nb_err_set(err, NB_EINVAL, "air prefill_logits: first %d outside 0..%d", first,
                          n - 1);
    for (int end = n; end > first; end--) {
        nb_air_prefill_out o;
        int want = end == n && (a->layer_hook || a->stage_hook);
        nb_code rc = nb_air_prefill(a->h, ids, end, want, &o, err);
        if (!rc)
            rc = check_vocab(a, o.vocab, err);
        if (!rc && want)
            rc = feed_hooks(a, &o, err);
        if (rc)
            return rc;
        memcpy(out + (size_t)(end - 1 - first) * (size_t)a->vocab, o.logits,
               sizeof(float) * (size_t)a->vocab);
    }
    return NB_OK;
}

static nb_code air_tokenize(void *be, const char *text, int32_t **ids, int *n, nb_err *err)
{
    return nb_air_tokenize(((air_be *)be)->h, text, ids, n, err);
}

static void air_set_job_hooks(void *be, void (*line)(void *user, const char *text),
                              int (*cancelled)(void *user), void *user)
{
    nb_air_set_hooks(((air_be *)be)->h, line, cancelled, user);
}

static int air_max_seq(const void *be) { return ((const air_be *)be)->max_seq; }

/* Its weights and cache live in the host process, outside the worker's memory budget. */
static size_t air_resident_bytes(const void *be)
{
    (void)be;
    return 0;
}

static void air_set_layer_hook(void *be, nb_layer_hook hook, void *user)
{
    air_be *a = be;
    a->layer_hook = hook;
    a->layer_user = user;
}

static void air_set_stage_hook(void *be, nb_stage_hook hook, void *user)
{
    air_be *a = be;
    a->stage_hook = hook;
    a->stage_user = user;
}

const nb_backend_ops nb_backend_air = {
    .name = "air",
    .caps = NB_BACKEND_STEPS | NB_BACKEND_LAYER_STATES | NB_BACKEND_REPREFILL |
            NB_BACKEND_PROMPT_RANGES | NB_BACKEND_READS_MODEL | NB_BACKEND_ADAPTER,
    .open = air_open,
    .close = air_close,
    .prefill = air_prefill,
    .decode_step = air_decode_step,
    .max_seq = air_max_seq,
    .resident_bytes = air_resident_bytes,
    .set_layer_hook = air_set_layer_hook,
    .set_stage_hook = air_set_stage_hook,
    .prefill_logits = air_prefill_logits,
    .tokenize = air_tokenize,
    .set_job_hooks = air_set_job_hooks,
};
