/* nb_job: executes one JobSpec on this worker's deployments and fills its JobResult.
 * Deployments are set up once and kept resident in a memory-bounded LRU cache; setup is
 * never inside a timed region.  nb_job_validate_spec is shared with the coordinator. */
#ifndef NB_JOB_H
#define NB_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_exec.h"
#include "npubench.pb-c.h"

/* Spec limits (nb_job_validate_spec; the coordinator refuses submits past them). */
#define NB_JOB_N_TOKENS_MAX 4096
#define NB_JOB_REPS_MAX 100
#define NB_JOB_WARMUP_MAX 100
#define NB_JOB_PROMPT_MAX_BYTES 65536
#define NB_JOB_PROMPTS_MAX 4096
#define NB_JOB_PARAMS_MAX 64
#define NB_JOB_TIMEOUT_MS_MAX (7LL * 24 * 3600 * 1000)

/* Defaults the worker applies to a 0 field. */
#define NB_JOB_RUN_REPS_DEFAULT 3       /* RUN / PROFILE, after one warm-up */
#define NB_JOB_RUN_N_TOKENS_DEFAULT 100 /* RUN */
#define NB_JOB_PROFILE_N_TOKENS_DEFAULT 20
#define NB_JOB_VERIFY_PROMPTS 2         /* VERIFY: the first 2 prompts */
#define NB_JOB_VERIFY_K 5               /* VERIFY: top-5 */
#define NB_JOB_VERIFY_N_TOKENS 32       /* VERIFY: 32 tokens per prompt */

/* NB_EINVAL naming the field and its limit ("JobSpec.n_tokens 5000: must be 0..4096")
 * for: kind unset/unknown; n_tokens, k (0..NB_GATE_K_MAX), reps, max_prompts,
 * priority, timeout_ms out of range; a shard with begin < 0, end <= begin, or end past
 * max_prompts; oversize or non-UTF-8 prompts; too many prompts or params; params
 * with an empty key, a duplicate key or a bad value for the keys the worker reads
 * (threads, max_seq, warmup, chat, ignore_eos, device: integers in range).  Pure. */
nb_code nb_job_validate_spec(const Npubench__JobSpec *spec, nb_err *err);

/* ---- deployments a worker serves --------------------------------------------------- */

/* Filled by the deployments file, or in code (empty name/backend/dtype get the defaults). */
typedef struct nb_job_deployment {
    char name[64];      /* unique label: "smollm-q4", defaults to "<model>-<backend>-<dtype>" */
    char model[1024];   /* selector for nb_deploy_open: "instruct", "base", a .gguf path */
    char backend[16];   /* "cpu" (default), "xrt" or "exec" */
    char dtype[16];     /* "bf16" (default), "f32", "q4_1" */
    int threads;        /* 0 = the worker's default */
    int max_seq;        /* 0 = the engine's default */
    unsigned device;    /* XRT device index */
    nb_exec_deploy *exec; /* backend "exec": its commands (owned) */
} nb_job_deployment;

/* The deployments file (JSON; format in docs/service.md, "Deployments file").
 * *out is malloc'ed (free with nb_job_deployments_free); errors name the file and the
 * entry ("deployments.json: deployments[2].backend 'gpu': expected cpu, xrt or exec"). */
nb_code nb_job_deployments_load(const char *path, nb_job_deployment **out, int *n, nb_err *err);
/* The same from a parsed JSON document; what names the source in errors. */
nb_code nb_job_deployments_parse(const char *json, size_t len, const char *what,
                                 nb_job_deployment **out, int *n, nb_err *err);
void nb_job_deployments_free(nb_job_deployment *d, int n);

/* ---- the executor -------------------------------------------------------------------- */

typedef struct nb_job_ctx_opts {
    const nb_job_deployment *deployments; /* copied (exec commands too) */
    int n_deployments;
    const char *board;        /* board name for environments ["local"] */
    const char *board_type;   /* [""] */
    int threads;              /* cpu threads when a deployment says 0 [0 = all cores] */
    size_t mem_budget_bytes;  /* resident deployments' estimated size [0 = 4 GiB] */
    const char *refdir;       /* HF traces [verify/references] */
    const char *rundir;       /* scratch for traces received with a lease [/tmp] */
    const char *reports_dir;  /* if set, verify/diagnosis reports are also written here */
} nb_job_ctx_opts;

typedef struct nb_job_ctx nb_job_ctx;

/* Copies the options; sets nothing up yet (deployments open on their first job). */
nb_code nb_job_ctx_new(const nb_job_ctx_opts *o, nb_job_ctx **out, nb_err *err);
void nb_job_ctx_free(nb_job_ctx *c);

/* What a worker advertises: one npubench.Deployment per configured deployment: model =
 * the entry's `model` as configured ("instruct", a .gguf path, an exec deployment's model
 * name; the coordinator matches it case-insensitively, by basename and by preset family),
 * backend, dtype, digest = the weights' sha256 (hashed once per process; "" when the file
 * cannot be read and for exec).  A model that cannot be read is still listed: its jobs
 * fail with the loader's message.  *out is a malloc'ed array of malloc'ed messages (free
 * each with nb_jobpb_free, then the array). */
nb_code nb_job_ctx_advertise(nb_job_ctx *c, Npubench__Deployment ***out, size_t *n,
                             nb_err *err);
/* Backends of the configured deployments, deduplicated ("cpu", "exec"), as static
 * strings in out[0..*n). */
void nb_job_ctx_backends(const nb_job_ctx *c, const char **out, size_t cap, size_t *n);

/* Per-job hooks (all optional).  progress is called from the executing thread after
 * each unit of work (prompt, repetition); cancelled is polled between units and a
 * non-zero answer stops the job with NB_ECANCELED; log receives the job's log lines
 * (also copied, bounded, into JobResult.log). */
typedef struct nb_job_hooks {
    void (*progress)(void *user, int done, int total, const char *msg);
    int (*cancelled)(void *user);
    void (*log)(void *user, const char *line);
    void *user;
    /* The coordinator's cached HF trace (Lease.reference_trace); used for VERIFY,
     * VERIFY_FULL and DIAGNOSIS when non-empty and its sha256 matches. */
    const uint8_t *reference_trace;
    size_t reference_trace_len;
    const char *reference_trace_sha256;
} nb_job_hooks;

/* Validates spec, resolves the deployment from spec->selector (+ params threads /
 * max_seq / device), sets it up if not resident (evicting least recently used ones
 * past the memory budget), runs the job and fills *out (a new JobResult, free with
 * nb_jobpb_free): job_id, shard, status, outcome, metrics with every sample, gates,
 * cosines, phases/kernels, environment, report_json/report_md, log, start/finish.
 * Returns the job's own code: NB_OK when it ran (a gate FAIL is NB_OK with outcome
 * FAIL); otherwise *out still describes the failure (status from the code,
 * status_message = err->msg, outcome ERROR).  *out is NULL only on NB_ENOMEM.
 * Not thread-safe: one job at a time per ctx. */
nb_code nb_job_execute(nb_job_ctx *c, const Npubench__JobSpec *spec, int64_t job_id,
                       const nb_job_hooks *hooks, Npubench__JobResult **out, nb_err *err);

typedef struct nb_job_cache_stats {
    int resident;       /* deployments set up now */
    int setups;         /* nb_deploy_open calls so far */
    int evictions;
    size_t resident_bytes;
} nb_job_cache_stats;
void nb_job_ctx_stats(const nb_job_ctx *c, nb_job_cache_stats *out);

/* "RUN", "VERIFY", ...; "UNSPECIFIED" otherwise. */
const char *nb_job_kind_name(int kind);

#endif
