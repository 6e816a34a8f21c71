/* nb_deploy: resolves model selectors, loads model and tokenizer, sets up the backend.
 * The model digest is computed here once, so traces and history rows can key on it. */
#include "nb_deploy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_file.h"
#include "nb_preset.h"
#include "nb_sha256.h"
#include "nb_time.h"

void nb_deploy_spec_default(nb_deploy_spec *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->model, sizeof s->model, "instruct");
    snprintf(s->backend, sizeof s->backend, "%s", nb_backend_default()->name);
    s->dtype = NB_DTYPE_BF16;
}

nb_code nb_deploy_resolve_model(const char *sel, char *path, size_t cap, char *preset_out,
                                size_t preset_cap, nb_err *err)
{
    if (preset_cap)
        preset_out[0] = '\0';
    const nb_preset *p = nb_preset_find(sel);
    if (!p) {
        if (!nb_file_exists(sel))
            return nb_err_set(err, NB_ENOTFOUND, "--model %s: no such file or directory", sel);
        snprintf(path, cap, "%s", sel);
        return NB_OK;
    }
    snprintf(preset_out, preset_cap, "%s", sel);
    const char *env = getenv("NPUBENCH_MODELS");
    const char *dirs[3] = {env, "models", NB_SOURCE_DIR "/models"};
    for (int i = 0; i < 3; i++) {
        if (!dirs[i] || !*dirs[i])
            continue;
        snprintf(path, cap, "%s/%s", dirs[i], p->file);
        if (nb_file_exists(path))
            return NB_OK;
    }
    return nb_err_set(err, NB_ENOTFOUND,
                      "--model %s: %s not found in $NPUBENCH_MODELS, ./models or %s/models; run "
                      "scripts/fetch_model.sh",
                      sel, p->file, NB_SOURCE_DIR);
}

static nb_code open_tokenizer(nb_deploy *d, nb_err *err)
{
    const nb_gguf *g = nb_model_gguf(d->model);
    if (g)
        return nb_tokenizer_from_gguf(g, &d->tok, err);
    char p[1100];
    snprintf(p, sizeof p, "%s/tokenizer.json", nb_model_dir(d->model));
    return nb_tokenizer_from_hf_json(p, &d->tok, err);
}

nb_code nb_deploy_open_tokenizer(const char *sel, nb_model **model, nb_tokenizer **tok,
                                 nb_err *err)
{
    nb_deploy d;
    memset(&d, 0, sizeof d);
    *model = NULL;
    *tok = NULL;
    nb_code rc = nb_deploy_resolve_model(sel, d.model_path, sizeof d.model_path, d.preset,
                                          sizeof d.preset, err);
    if (!rc)
        rc = nb_model_open(d.model_path, &d.model, err);
    if (!rc && (rc = open_tokenizer(&d, err)) != NB_OK) {
        nb_model_close(d.model);
        d.model = NULL;
    }
    *model = d.model;
    *tok = d.tok;
    return rc;
}

nb_code nb_deploy_stored_dtype(const char *sel, const char *backend, nb_dtype dtype,
                               nb_dtype *out, nb_err *err)
{
    *out = dtype;
    const nb_backend_ops *ops =
        backend && *backend ? nb_backend_find(backend) : nb_backend_default();
    if (!ops || !ops->named_dtype)
        return NB_OK;
    char path[1024], preset[16];
    nb_model *m = NULL;
    nb_code rc = nb_deploy_resolve_model(sel, path, sizeof path, preset, sizeof preset, err);
    if (!rc)
        rc = nb_model_open(path, &m, err);
    if (!rc)
        *out = ops->named_dtype(m, dtype);
    nb_model_close(m);
    return rc;
}

nb_code nb_deploy_open(const nb_deploy_spec *spec, nb_deploy **out, nb_err *err)
{
    *out = NULL;
    nb_deploy *d = calloc(1, sizeof *d);
    if (!d)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    d->spec = *spec;
    d->dtype = spec->dtype;
    double t0 = nb_now_ms();
    nb_code rc = nb_backend_lookup(spec->backend, 0, NB_BACKEND_WHOLE_JOB, NULL, &d->ops, err);
    if (rc)
        goto fail;
    /* The device before the model: no device is the answer, however the model is given. */
    if (d->ops->probe &&
        (rc = d->ops->probe(spec->device, d->device_info, sizeof d->device_info, err)))
        goto fail;
    if ((rc = nb_deploy_resolve_model(spec->model, d->model_path, sizeof d->model_path,
                                      d->preset, sizeof d->preset, err)))
        goto fail;
    if ((rc = nb_model_open(d->model_path, &d->model, err)))
        goto fail;
    if ((rc = open_tokenizer(d, err)))
        goto fail;
    if (spec->model_sha256[0])
        memcpy(d->model_sha256, spec->model_sha256, sizeof d->model_sha256);
    else if (nb_model_format_of(d->model) == NB_FMT_GGUF)
        rc = nb_sha256_file(d->model_path, d->model_sha256, err);
    else {
        char p[1100];
        snprintf(p, sizeof p, "%s/config.json", d->model_path);
        rc = nb_sha256_file(p, d->model_sha256, err);
    }
    if (rc)
        goto fail;
    snprintf(d->model_name, sizeof d->model_name, "%s", nb_model_cfg(d->model)->name);
    if ((rc = d->ops->open(d, &d->be, err)))
        goto fail;
    d->setup_ms = nb_now_ms() - t0;
    *out = d;
    return NB_OK;
fail:
    nb_deploy_close(d);
    return rc;
}

void nb_deploy_close(nb_deploy *d)
{
    if (!d)
        return;
    if (d->be && d->ops->close)
        d->ops->close(d->be);
    nb_tokenizer_free(d->tok);
    nb_model_close(d->model);
    free(d);
}

void nb_deploy_describe(const nb_deploy *d, char *buf, size_t cap)
{
    if (d->ops && d->ops->describe) {
        d->ops->describe(d, buf, cap);
        return;
    }
    snprintf(buf, cap, "%s %s/%s", d->model_name, d->spec.backend, nb_dtype_name(d->dtype));
}

/* The refusal of an operation the backend's table does not offer. */
static nb_code lacks(const nb_deploy *d, unsigned cap, nb_err *err)
{
    const char *what = cap == NB_BACKEND_STEPS          ? "in-process prefill and decode steps"
                       : cap == NB_BACKEND_LAYER_STATES ? "per-layer states"
                       : cap == NB_BACKEND_REPREFILL    ? "cache-free re-prefill"
                                                        : "per-op timings";
    return nb_err_set(err, NB_EUNSUPPORTED, "backend '%s' has no %s", d->ops->name, what);
}

nb_code nb_deploy_prefill(nb_deploy *d, const int32_t *ids, int n, const float **logits,
                          nb_err *err)
{
    if (!nb_backend_can(d->ops, NB_BACKEND_STEPS))
        return lacks(d, NB_BACKEND_STEPS, err);
    return d->ops->prefill(d->be, ids, n, logits, err);
}

nb_code nb_deploy_decode_step(nb_deploy *d, int32_t token, int pos, const float **logits,
                              nb_err *err)
{
    if (!nb_backend_can(d->ops, NB_BACKEND_STEPS))
        return lacks(d, NB_BACKEND_STEPS, err);
    return d->ops->decode_step(d->be, token, pos, logits, err);
}

nb_code nb_deploy_prefill_logits(nb_deploy *d, const int32_t *ids, int n, int first,
                                 float *out, nb_err *err)
{
    if (!nb_backend_can(d->ops, NB_BACKEND_REPREFILL))
        return lacks(d, NB_BACKEND_REPREFILL, err);
    return d->ops->prefill_logits(d->be, ids, n, first, out, err);
}

nb_code nb_deploy_backend_tokenize(nb_deploy *d, const char *text, int32_t **ids, int *n,
                                   nb_err *err)
{
    *ids = NULL;
    *n = 0;
    if (!d->ops->tokenize)
        return nb_err_set(err, NB_EUNSUPPORTED, "backend '%s' has no tokenizer of its own",
                          d->ops->name);
    return d->ops->tokenize(d->be, text, ids, n, err);
}

void nb_deploy_set_job_hooks(nb_deploy *d, void (*line)(void *user, const char *text),
                             int (*cancelled)(void *user), void *user)
{
    if (d->ops->set_job_hooks)
        d->ops->set_job_hooks(d->be, line, cancelled, user);
}

nb_code nb_deploy_set_layer_hook(nb_deploy *d, nb_layer_hook hook, void *user, nb_err *err)
{
    if (!nb_backend_can(d->ops, NB_BACKEND_LAYER_STATES))
        return hook ? lacks(d, NB_BACKEND_LAYER_STATES, err) : NB_OK;
    d->ops->set_layer_hook(d->be, hook, user);
    return NB_OK;
}

nb_code nb_deploy_set_stage_hook(nb_deploy *d, nb_stage_hook hook, void *user, nb_err *err)
{
    if (!nb_backend_can(d->ops, NB_BACKEND_LAYER_STATES))
        return hook ? lacks(d, NB_BACKEND_LAYER_STATES, err) : NB_OK;
    d->ops->set_stage_hook(d->be, hook, user);
    return NB_OK;
}

nb_code nb_deploy_profile(nb_deploy *d, int on, nb_err *err)
{
    if (!nb_backend_can(d->ops, NB_BACKEND_PROFILE))
        return on ? lacks(d, NB_BACKEND_PROFILE, err) : NB_OK;
    if (on)
        d->ops->profile_reset(d->be);
    d->ops->profile(d->be, on);
    return NB_OK;
}

const nb_op_stats *nb_deploy_profile_stats(const nb_deploy *d)
{
    return nb_backend_can(d->ops, NB_BACKEND_PROFILE) ? d->ops->profile_stats(d->be) : NULL;
}

const nb_model_config *nb_deploy_cfg(const nb_deploy *d)
{
    return nb_model_cfg(d->model);
}

int nb_deploy_vocab(const nb_deploy *d)
{
    return nb_model_cfg(d->model)->vocab;
}

int nb_deploy_max_seq(const nb_deploy *d)
{
    return d->ops->max_seq ? d->ops->max_seq(d->be) : 0;
}

size_t nb_deploy_resident_bytes(const nb_deploy *d)
{
    return d->ops->resident_bytes ? d->ops->resident_bytes(d->be) : 0;
}
