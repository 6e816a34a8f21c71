/* nb_backend: one operations table per deployment backend (cpu, xrt, exec, ...), as nng gives
 * each TLS engine one ops table; run, verify, profile, diagnosis and localization use only it. */
#ifndef NB_BACKEND_H
#define NB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "nb_engine.h"
#include "nb_err.h"

struct nb_deploy;

/* What a backend can do.  A caller asks nb_backend_can() before an optional operation; the
 * nb_deploy_* wrappers answer NB_EUNSUPPORTED, naming the backend, where a capability lacks. */
enum {
    NB_BACKEND_STEPS = 1u << 0,        /* prefill and decode_step in this process */
    NB_BACKEND_LAYER_STATES = 1u << 1, /* per-layer (and per-stage) hidden states: diagnosis,
                                        * localization */
    NB_BACKEND_REPREFILL = 1u << 2,    /* prefill_logits: one cache-free re-prefill that keeps
                                        * every position's logits (localization's KV check) */
    NB_BACKEND_PROFILE = 1u << 3,      /* per-op timings (profile's table) */
    NB_BACKEND_PROMPT_RANGES = 1u << 4, /* a verify-full may run a prompt range (a shard); for
                                         * exec only where its commands take the range */
    NB_BACKEND_WHOLE_JOB = 1u << 5,    /* runs whole jobs only, through its own commands (exec):
                                        * no open, no steps; the worker's executor runs it */
    NB_BACKEND_DEVICE = 1u << 6,       /* names a device kind: a worker's --device KIND:N */
    NB_BACKEND_READS_MODEL = 1u << 7,  /* its model is a file here: the worker digests it */
    NB_BACKEND_ADAPTER = 1u << 8,      /* steps run by a deployment's mlir-air verify adapter in
                                        * a resident host process: the deployments file's
                                        * "air" object configures it (spec.backend_cfg) */
};

/* The table.  name is the one place a backend's name is written; every other module finds
 * the table by name (nb_backend_find) and asks it.  Unused operations are NULL. */
typedef struct nb_backend_ops {
    const char *name; /* as in deployments files, --backend and the wire: "cpu" */
    unsigned caps;    /* NB_BACKEND_* */

    /* Whether this build has the backend (NULL: always); 0 refuses it before any probe. */
    int (*built)(void);
    /* Answers whether device index `device` is there, without opening it in this process
     * (NULL: nothing to probe).  info: one line on the device for logs and errors. */
    nb_code (*probe)(unsigned device, char *info, size_t cap, nb_err *err);

    /* After nb_deploy_open has resolved and opened the model and tokenizer (d->model,
     * d->tok, d->model_path, d->spec filled, d->device_info the probe's line), sets the
     * backend up (the timed regions start after this) and returns its state in *be. */
    nb_code (*open)(struct nb_deploy *d, void **be, nb_err *err);
    void (*close)(void *be);
    /* The dtype a deployment of model m asked for as d is stored under, where the backend
     * lays two dtypes out alike (cpu: q4_1 and native, nb_engine_model_dtype); its open sets
     * nb_deploy.dtype to the same. NULL: d names itself. */
    nb_dtype (*named_dtype)(const nb_model *m, nb_dtype d);
    /* The backend's part of "<model> <backend>/<dtype>" (NULL: "<name>/<dtype>"). */
    void (*describe)(const struct nb_deploy *d, char *buf, size_t cap);

    /* NB_BACKEND_STEPS: a fresh sequence's prompt (positions 0..n-1), then one token at pos
     * (== tokens already in the cache); *logits: vocab floats owned by the backend, valid
     * until its next call. */
    nb_code (*prefill)(void *be, const int32_t *ids, int n, const float **logits, nb_err *err);
    nb_code (*decode_step)(void *be, int32_t token, int pos, const float **logits,
                           nb_err *err);
    int (*max_seq)(const void *be);           /* the longest sequence it holds */
    size_t (*resident_bytes)(const void *be); /* what it keeps resident (weights + cache) */

    /* NB_BACKEND_LAYER_STATES: hooks as nb_engine_set_layer_hook / _set_stage_hook. */
    void (*set_layer_hook)(void *be, nb_layer_hook hook, void *user);
    void (*set_stage_hook)(void *be, nb_stage_hook hook, void *user);
    /* NB_BACKEND_REPREFILL: as nb_engine_prefill_logits. */
    nb_code (*prefill_logits)(void *be, const int32_t *ids, int n, int first, float *out,
                              nb_err *err);
    /* The backend's own tokenizer where it runs one besides the model file's (air: the
     * adapter's, which the device side really uses); NULL, or NB_EUNSUPPORTED when this
     * deployment has none.  *ids malloc'ed. */
    nb_code (*tokenize)(void *be, const char *text, int32_t **ids, int *n, nb_err *err);
    /* Where the backend runs a process of its own (air): each line it prints, for the job's
     * log, and a cancel it polls while it waits (a lock, a restart's backoff); all NULL
     * clears them.  NULL: nothing to hook. */
    void (*set_job_hooks)(void *be, void (*line)(void *user, const char *text),
                          int (*cancelled)(void *user), void *user);
    /* NB_BACKEND_PROFILE: as nb_engine_profile, _profile_reset, _profile_stats. */
    void (*profile)(void *be, int on);
    void (*profile_reset)(void *be);
    const nb_op_stats *(*profile_stats)(const void *be);
} nb_backend_ops;

/* How a new backend (e.g. `air`) plugs in: one file and one table entry.
 *   1. engine/nb_backend_<name>.c defines `const nb_backend_ops nb_backend_<name>` with its
 *      name, its caps and the operations those caps promise (open/close and, with
 *      NB_BACKEND_STEPS, prefill/decode_step/max_seq/resident_bytes); its state stays private
 *      to that file.  engine/ globs its *.c, so CMake needs no change; a backend that needs a
 *      library adds it to engine's nb_module line.
 *   2. engine/nb_backend.c: one X(<name>) in NB_BACKEND_LIST.
 * Nothing else changes: deployments files and --backend accept the name, the worker
 * advertises it, run/verify/profile/diagnosis/localization call it through nb_deploy_*, and
 * they refuse (NB_EUNSUPPORTED, naming the backend and the capability) what its caps lack. */

/* The table named name (exact, as the wire and files spell it), or NULL. */
const nb_backend_ops *nb_backend_find(const char *name);
/* The backend a deployment gets when none is named (cpu). */
const nb_backend_ops *nb_backend_default(void);
/* The i-th registered table, NULL past the last: for listings and advertisement. */
const nb_backend_ops *nb_backend_at(size_t i);
/* 1 when ops has every capability in caps (ops may be NULL: 0). */
int nb_backend_can(const nb_backend_ops *ops, unsigned caps);
/* "cpu, xrt or exec": the registered names with every capability in need and none in refuse,
 * each followed by suffix (":N" gives "cpu:N or xrt:N"), for messages. */
void nb_backend_names(unsigned need, unsigned refuse, const char *suffix, char *buf, size_t cap);
/* The table named name among those nb_backend_names(need, refuse) lists, else NB_EINVAL:
 * "<what>backend 'gpu': expected cpu, xrt or exec". */
nb_code nb_backend_lookup(const char *name, unsigned need, unsigned refuse, const char *what,
                          const nb_backend_ops **out, nb_err *err);

#endif
