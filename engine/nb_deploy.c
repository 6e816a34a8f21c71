/* nb_deploy: resolves model selectors, loads model and tokenizer, sets up the backend.
 * The model digest is computed here once, so traces and history rows can key on it. */
#include "nb_deploy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_file.h"
#include "nb_sha256.h"
#include "nb_time.h"
#include "nb_xrt.h"

/* The preset words a selector may use instead of a path: the file each names under the
 * models directory, the model's name (what the history and matching know it by; for Gemma the
 * file's stem, which is what a path to it canonicalizes to) and its prompt set. */
static const struct {
    const char *word, *file, *model, *prompts;
} presets[] = {
    {"instruct", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct", "instruct"},
    {"base", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct", "base"},
    {"gemma3", "gemma-3-270m-q4_k_m.gguf", "gemma-3-270m-q4_k_m", "gemma3"},
};

static int preset_index(const char *word)
{
    for (size_t i = 0; word && i < sizeof presets / sizeof *presets; i++)
        if (!strcmp(word, presets[i].word))
            return (int)i;
    return -1;
}

const char *nb_deploy_preset_model(const char *word)
{
    int i = preset_index(word);
    return i < 0 ? NULL : presets[i].model;
}

const char *nb_deploy_preset_prompts(const char *word)
{
    int i = preset_index(word);
    return presets[i < 0 ? 0 : i].prompts;
}

void nb_deploy_spec_default(nb_deploy_spec *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->model, sizeof s->model, "instruct");
    snprintf(s->backend, sizeof s->backend, "cpu");
    s->dtype = NB_DTYPE_BF16;
}

nb_code nb_deploy_resolve_model(const char *sel, char *path, size_t cap, char *preset_out,
                                size_t preset_cap, nb_err *err)
{
    if (preset_cap)
        preset_out[0] = '\0';
    int p = preset_index(sel);
    if (p < 0) {
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
        snprintf(path, cap, "%s/%s", dirs[i], presets[p].file);
        if (nb_file_exists(path))
            return NB_OK;
    }
    return nb_err_set(err, NB_ENOTFOUND,
                      "--model %s: %s not found in $NPUBENCH_MODELS, ./models or %s/models; run "
                      "scripts/fetch_model.sh",
                      sel, presets[p].file, NB_SOURCE_DIR);
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

nb_code nb_deploy_open(const nb_deploy_spec *spec, nb_deploy **out, nb_err *err)
{
    *out = NULL;
    nb_deploy *d = calloc(1, sizeof *d);
    if (!d)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    d->spec = *spec;
    double t0 = nb_now_ms();
    nb_code rc;
    if (!strcmp(spec->backend, "xrt")) {
        char info[256];
        if ((rc = nb_xrt_probe(spec->device, info, sizeof info, err)))
            goto fail;
        /* A device exists, but the NPU kernels for this model family are
         * built by the deployment's own toolchain: run it through `exec`. */
        rc = nb_err_set(err, NB_EUNSUPPORTED,
                        "xrt backend: %s, but no in-process NPU kernels are available for %s; "
                        "use an exec deployment",
                        info, spec->model);
        goto fail;
    }
    if (strcmp(spec->backend, "cpu")) {
        rc = nb_err_set(err, NB_EINVAL, "backend '%s': expected cpu or xrt", spec->backend);
        goto fail;
    }
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
    nb_engine_opts eo;
    nb_engine_opts_default(&eo);
    eo.dtype = spec->dtype;
    eo.threads = spec->threads;
    eo.max_seq = spec->max_seq;
    if ((rc = nb_engine_setup(d->model, &eo, &d->engine, err)))
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
    nb_engine_free(d->engine);
    nb_tokenizer_free(d->tok);
    nb_model_close(d->model);
    free(d);
}

void nb_deploy_describe(const nb_deploy *d, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s/%s", d->model_name, d->spec.backend, nb_dtype_name(d->spec.dtype));
}
