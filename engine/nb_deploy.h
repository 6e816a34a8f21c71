/* nb_deploy: a deployment = model + tokenizer + backend + dtype, set up once and kept resident.
 * Everything outside the timed regions (loading, digests, weight layout) happens in nb_deploy_open. */
#ifndef NB_DEPLOY_H
#define NB_DEPLOY_H

#include <stddef.h>

#include "nb_backend.h"
#include "nb_engine.h"
#include "nb_err.h"
#include "nb_model.h"
#include "nb_tokenizer.h"

typedef struct nb_deploy_spec {
    char model[1024];   /* "instruct", "base", a .gguf path or an HF directory */
    char backend[16];   /* a backend table's name (nb_backend_find); "" or default: cpu */
    nb_dtype dtype;
    int threads;        /* 0 = all cores */
    int max_seq;        /* 0 = 2048 */
    unsigned device;    /* XRT device index */
    /* "" = setup hashes the model file; else the caller's digest of that very file, taken
     * after its last change (a worker hashes its models once, to advertise them). */
    char model_sha256[65];
    /* The backend's own configuration where its table takes one (NB_BACKEND_ADAPTER: an
     * nb_air_cfg), the caller's, read only while opening; NULL otherwise. */
    const void *backend_cfg;
} nb_deploy_spec;

void nb_deploy_spec_default(nb_deploy_spec *s);

/* Resolves a model selector: a preset word (job/nb_preset: "instruct" and "base" name the
 * default SmolLM2-135M-Instruct GGUF, "gemma3" Gemma 3 270M) names its file under the models directory
 * ($NPUBENCH_MODELS, else ./models, else the source tree's models/). preset_out gets
 * the preset word or "" for explicit paths. */
nb_code nb_deploy_resolve_model(const char *sel, char *path, size_t cap, char *preset_out,
                                size_t preset_cap, nb_err *err);
/* The tokenizer of a model selector (as nb_deploy_open resolves it) without a backend or
 * weights set up: *model (nb_model_close) and *tok (nb_tokenizer_free) are the caller's;
 * both NULL on error. For `npubench tokenize`. */
nb_code nb_deploy_open_tokenizer(const char *sel, nb_model **model, nb_tokenizer **tok,
                                 nb_err *err);
/* The dtype a deployment of model selector sel on backend (NULL or "": cpu) asked for as
 * dtype is stored under (nb_deploy.dtype) without setting it up: the backend's
 * named_dtype over the model's file, else dtype. For a worker's listing (q4_1 and native
 * of one file are one deployment). */
nb_code nb_deploy_stored_dtype(const char *sel, const char *backend, nb_dtype dtype,
                               nb_dtype *out, nb_err *err);


typedef struct nb_deploy {
    nb_deploy_spec spec;
    char model_path[1024];
    char preset[16];        /* "instruct", "base" or "" */
    char model_sha256[65];
    char model_name[128];
    nb_model *model;
    nb_tokenizer *tok;
    const nb_backend_ops *ops; /* the backend's table */
    void *be;                  /* its state (ops->open's) */
    char device_info[256];     /* the backend's probe line, "" when it has no probe */
    double setup_ms;        /* load + digest + weight layout, never in a timed region */
    /* The dtype that names the deployment where its results go (Environment, reports, the
     * history's deployment): spec.dtype, unless the backend lays two dtypes out alike (cpu:
     * q4_1 and native, nb_engine_weights_dtype), so one file is one deployment. */
    nb_dtype dtype;
} nb_deploy;

/* Opens and sets up a deployment through its backend's table: probe (the xrt backend's runs
 * in a child process and fails with NB_EUNAVAIL when there is no device), model and
 * tokenizer, digest, then the backend's open.  Whole-job backends (exec) are refused. */
nb_code nb_deploy_open(const nb_deploy_spec *spec, nb_deploy **out, nb_err *err);
void nb_deploy_close(nb_deploy *d);

/* "<name> <backend>/<dtype>" for reports and history. */
void nb_deploy_describe(const nb_deploy *d, char *buf, size_t cap);

/* The operations run, verify, profile, diagnosis and localization use: the backend's table,
 * refused with NB_EUNSUPPORTED ("backend 'x' has no per-layer states") where its
 * capabilities lack the operation.  Arguments and results as nb_backend_ops says. */
nb_code nb_deploy_prefill(nb_deploy *d, const int32_t *ids, int n, const float **logits,
                          nb_err *err);
nb_code nb_deploy_decode_step(nb_deploy *d, int32_t token, int pos, const float **logits,
                              nb_err *err);
nb_code nb_deploy_prefill_logits(nb_deploy *d, const int32_t *ids, int n, int first,
                                 float *out, nb_err *err);
/* The backend's own tokenizer's ids for text (*ids malloc'ed); NB_EUNSUPPORTED when the
 * backend has none but the model file's (d->tok). */
nb_code nb_deploy_backend_tokenize(nb_deploy *d, const char *text, int32_t **ids, int *n,
                                   nb_err *err);
/* A job's log and cancel for a backend's own process (as nb_backend_ops.set_job_hooks);
 * nothing where the backend has none. */
void nb_deploy_set_job_hooks(nb_deploy *d, void (*line)(void *user, const char *text),
                             int (*cancelled)(void *user), void *user);
/* Hooks: NULL hook detaches (always allowed). */
nb_code nb_deploy_set_layer_hook(nb_deploy *d, nb_layer_hook hook, void *user, nb_err *err);
nb_code nb_deploy_set_stage_hook(nb_deploy *d, nb_stage_hook hook, void *user, nb_err *err);
/* Profile: on/off and reset; stats NULL where the backend keeps none. */
nb_code nb_deploy_profile(nb_deploy *d, int on, nb_err *err);
const nb_op_stats *nb_deploy_profile_stats(const nb_deploy *d);
/* The model's configuration (from the model file, whatever the backend). */
const nb_model_config *nb_deploy_cfg(const nb_deploy *d);
int nb_deploy_vocab(const nb_deploy *d);
int nb_deploy_max_seq(const nb_deploy *d);
size_t nb_deploy_resident_bytes(const nb_deploy *d);

#endif
