/* nb_deploy: a deployment = model + tokenizer + backend + dtype, set up once and kept resident.
 * Everything outside the timed regions (loading, digests, weight layout) happens in nb_deploy_open. */
#ifndef NB_DEPLOY_H
#define NB_DEPLOY_H

#include <stddef.h>

#include "nb_engine.h"
#include "nb_err.h"
#include "nb_model.h"
#include "nb_tokenizer.h"

typedef struct nb_deploy_spec {
    char model[1024];   /* "instruct", "base", a .gguf path or an HF directory */
    char backend[16];   /* "cpu" (default) or "xrt" */
    nb_dtype dtype;
    int threads;        /* 0 = all cores */
    int max_seq;        /* 0 = 2048 */
    unsigned device;    /* XRT device index */
    /* "" = setup hashes the model file; else the caller's digest of that very file, taken
     * after its last change (a worker hashes its models once, to advertise them). */
    char model_sha256[65];
} nb_deploy_spec;

void nb_deploy_spec_default(nb_deploy_spec *s);

/* Resolves a model selector: "instruct" and "base" name the default
 * SmolLM2-135M-Instruct GGUF, "gemma3" Gemma 3 270M, under the models directory
 * ($NPUBENCH_MODELS, else ./models, else the source tree's models/). preset_out gets
 * the preset word or "" for explicit paths. */
nb_code nb_deploy_resolve_model(const char *sel, char *path, size_t cap, char *preset_out,
                                size_t preset_cap, nb_err *err);

/* The model name a preset word stands for ("instruct" -> "SmolLM2-135M-Instruct"), or
 * NULL when word is no preset.  Needs no file system. */
const char *nb_deploy_preset_model(const char *word);
/* The prompt set (verify/prompts/<set>.txt) of a preset word; "instruct" for anything else. */
const char *nb_deploy_preset_prompts(const char *word);

typedef struct nb_deploy {
    nb_deploy_spec spec;
    char model_path[1024];
    char preset[16];        /* "instruct", "base" or "" */
    char model_sha256[65];
    char model_name[128];
    nb_model *model;
    nb_tokenizer *tok;
    nb_engine *engine;
    double setup_ms;        /* load + digest + weight layout, never in a timed region */
} nb_deploy;

/* Opens and sets up a deployment. The xrt backend probes the device in a
 * child process and fails with NB_EUNAVAIL when there is none. */
nb_code nb_deploy_open(const nb_deploy_spec *spec, nb_deploy **out, nb_err *err);
void nb_deploy_close(nb_deploy *d);

/* "<name> <backend>/<dtype>" for reports and history. */
void nb_deploy_describe(const nb_deploy *d, char *buf, size_t cap);

#endif
