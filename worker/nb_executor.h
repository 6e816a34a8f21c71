/* nb_executor: executes one JobSpec on this worker's deployments and fills its JobResult.
 * Deployments are set up once and kept resident in a memory-bounded LRU cache; setup is
 * never inside a timed region. */
#ifndef NB_EXECUTOR_H
#define NB_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "nb_deployments.h"
#include "nb_err.h"
#include "npubench.pb-c.h"

typedef struct nb_executor_opts {
    const nb_deployment *deployments; /* copied (exec commands too) */
    int n_deployments;
    const char *board;        /* board name for environments ["local"] */
    const char *board_type;   /* [""] */
    int threads;              /* cpu threads when a deployment says 0 [0 = all cores] */
    size_t mem_budget_bytes;  /* resident deployments' estimated size [0 = 4 GiB]; one
                                 deployment over it is refused (NB_ENOMEM) */
    const char *refdir;       /* HF traces [verify/references] */
    const char *rundir;       /* scratch for traces received with a lease [/tmp] */
    const char *reports_dir;  /* if set, verify/diagnosis reports are also written here */
    int client_paths;         /* params reference may name any path: only when the clients
                                 are this process (embedded mode) [names in refdir only] */
} nb_executor_opts;

typedef struct nb_executor nb_executor;

/* Copies the options; sets nothing up yet (deployments open on their first job). */
nb_code nb_executor_new(const nb_executor_opts *o, nb_executor **out, nb_err *err);
void nb_executor_free(nb_executor *c);

/* What a worker advertises: one npubench.Deployment per configured deployment: model =
 * the entry's `model` as configured ("instruct", a .gguf path, an exec deployment's model
 * name; the coordinator matches it case-insensitively, by basename and by preset family),
 * backend, dtype, digest = the weights' sha256 (hashed once per process; "" when the file
 * cannot be read and for exec), stored_dtype = the dtype its results are stored under
 * (nb_deploy_stored_dtype, read once per process; "" where unknown, and for exec).  A model
 * that cannot be read is still listed: its jobs fail with the loader's message.  *out is a malloc'ed array of malloc'ed messages (free
 * each with nb_jobpb_free, then the array). */
nb_code nb_executor_advertise(nb_executor *c, Npubench__Deployment ***out, size_t *n,
                             nb_err *err);
/* Backends of the configured deployments, deduplicated, in registry order (nb_backend_at),
 * as their tables' names in out[0..*n). */
void nb_executor_backends(const nb_executor *c, const char **out, size_t cap, size_t *n);

/* Per-job hooks (all optional).  progress is called from the executing thread after
 * each unit of work (prompt, repetition); cancelled is polled between units and a
 * non-zero answer stops the job with NB_ECANCELED; log receives the job's log lines
 * (also copied, bounded, into JobResult.log). */
typedef struct nb_executor_hooks {
    void (*progress)(void *user, int done, int total, const char *msg);
    int (*cancelled)(void *user);
    void (*log)(void *user, const char *line);
    void *user;
    /* The coordinator's cached HF trace (Lease.reference_trace); used for VERIFY,
     * VERIFY_FULL and DIAGNOSIS when non-empty and its sha256 matches. */
    const uint8_t *reference_trace;
    size_t reference_trace_len;
    const char *reference_trace_sha256;
    const char *reference_trace_path; /* its name where the coordinator found it; NULL, "": none */
    /* Tokens inside the current unit: unit ("prompt", "repetition") number progress done+1
     * of its total is at token done of total. Called once per token on the executing
     * thread, inside the timed region: it only records, the caller coalesces what it sends. */
    void (*tokens)(void *user, const char *unit, int done, int total);
} nb_executor_hooks;

/* Validates spec, resolves the deployment from spec->selector (+ params threads /
 * max_seq / device), sets it up if not resident (evicting least recently used ones
 * past the memory budget), runs the job and fills *out (a new JobResult, free with
 * nb_jobpb_free): job_id, shard, status, outcome, metrics with every sample, gates,
 * cosines, phases/kernels, environment, report_json/report_md, log, start/finish.
 * Returns the job's own code: NB_OK when it ran (a gate FAIL is NB_OK with outcome
 * FAIL); otherwise *out still describes the failure (status from the code,
 * status_message = err->msg, outcome ERROR).  *out is NULL only on NB_ENOMEM.
 * Not thread-safe: one job at a time per ctx. */
nb_code nb_executor_run(nb_executor *c, const Npubench__JobSpec *spec, int64_t job_id,
                       const nb_executor_hooks *hooks, Npubench__JobResult **out, nb_err *err);

/* The board is drained: closes the resident deployments when one of this worker's entries
 * holds a device between jobs (an air host and its lock), so a hand-run `make verify` gets the
 * NPU; the next job sets them up again.  Returns how many were closed. */
int nb_executor_release_devices(nb_executor *c);

typedef struct nb_executor_cache_stats {
    int resident;       /* deployments set up now */
    int setups;         /* nb_deploy_open calls so far */
    int evictions;
    size_t resident_bytes;
} nb_executor_cache_stats;
void nb_executor_stats(const nb_executor *c, nb_executor_cache_stats *out);

#endif
