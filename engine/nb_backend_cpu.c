/* nb_backend_cpu: the CPU backend's table over nb_engine: every capability, the default
 * backend of a deployment. */
#include "nb_backend.h"

#include "nb_deploy.h"

static nb_code cpu_open(nb_deploy *d, void **be, nb_err *err)
{
    nb_engine_opts eo;
    nb_engine_opts_default(&eo);
    eo.dtype = d->spec.dtype;
    eo.threads = d->spec.threads;
    eo.max_seq = d->spec.max_seq;
    nb_engine *e = NULL;
    nb_code rc = nb_engine_setup(d->model, &eo, &e, err);
    if (!rc)
        d->dtype = nb_engine_weights_dtype(e);
    *be = e;
    return rc;
}

static void cpu_close(void *be) { nb_engine_free(be); }

static nb_code cpu_prefill(void *be, const int32_t *ids, int n, const float **logits,
                           nb_err *err)
{
    return nb_engine_prefill(be, ids, n, logits, err);
}

static nb_code cpu_decode_step(void *be, int32_t token, int pos, const float **logits,
                               nb_err *err)
{
    return nb_engine_decode_step(be, token, pos, logits, err);
}

static int cpu_max_seq(const void *be) { return nb_engine_max_seq(be); }

/* Weights in their layout plus a full KV cache (fp32 K and V per layer). */
static size_t cpu_resident_bytes(const void *be)
{
    const nb_model_config *cfg = nb_engine_cfg(be);
    size_t kv = (size_t)2 * (size_t)cfg->n_layers * (size_t)nb_engine_max_seq(be) *
                (size_t)cfg->n_kv_heads * (size_t)cfg->head_dim * sizeof(float);
    return nb_engine_weight_bytes(be) + kv;
}

static void cpu_set_layer_hook(void *be, nb_layer_hook hook, void *user)
{
    nb_engine_set_layer_hook(be, hook, user);
}

static void cpu_set_stage_hook(void *be, nb_stage_hook hook, void *user)
{
    nb_engine_set_stage_hook(be, hook, user);
}

static nb_code cpu_prefill_logits(void *be, const int32_t *ids, int n, int first, float *out,
                                  nb_err *err)
{
    return nb_engine_prefill_logits(be, ids, n, first, out, err);
}

static void cpu_profile(void *be, int on) { nb_engine_profile(be, on); }
static void cpu_profile_reset(void *be) { nb_engine_profile_reset(be); }
static const nb_op_stats *cpu_profile_stats(const void *be) { return nb_engine_profile_stats(be); }

const nb_backend_ops nb_backend_cpu = {
    .name = "cpu",
    .caps = NB_BACKEND_STEPS | NB_BACKEND_LAYER_STATES | NB_BACKEND_REPREFILL |
            NB_BACKEND_PROFILE | NB_BACKEND_PROMPT_RANGES | NB_BACKEND_DEVICE |
            NB_BACKEND_READS_MODEL,
    .open = cpu_open,
    .close = cpu_close,
    .named_dtype = nb_engine_model_dtype,
    .prefill = cpu_prefill,
    .decode_step = cpu_decode_step,
    .max_seq = cpu_max_seq,
    .resident_bytes = cpu_resident_bytes,
    .set_layer_hook = cpu_set_layer_hook,
    .set_stage_hook = cpu_set_stage_hook,
    .prefill_logits = cpu_prefill_logits,
    .profile = cpu_profile,
    .profile_reset = cpu_profile_reset,
    .profile_stats = cpu_profile_stats,
};
