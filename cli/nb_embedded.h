/* nb_embedded: a coordinator (and optionally one CPU worker) inside the CLI process over
 * inproc://, on the local history database — so a single machine runs every command
 * through the same service code path as a lab, and its runs land in the same history. */
#ifndef NB_EMBEDDED_H
#define NB_EMBEDDED_H

#include "nb_dtype.h"
#include "nb_err.h"
#include "npubench.pb-c.h"

typedef struct nb_embedded_opts {
    const char *db_path;  /* [var/npubench.db]; its directory is created */
    int with_worker;      /* also run a worker serving the deployment below */
    /* The worker's one deployment (the local command's flags). */
    const char *model;    /* ["instruct"] */
    const char *backend;  /* ["cpu"] */
    nb_dtype dtype;       /* [bf16] */
    int threads, max_seq, device;
} nb_embedded_opts;

typedef struct nb_embedded nb_embedded;

/* Starts the coordinator (runs recorded as source "local") and, with_worker,
 * the worker, and waits until the worker has registered. Jobs from an
 * embedded session that died (its process is gone) are cancelled. Errors:
 * the database's, or the worker's (its device is taken: NB_EUNAVAIL; a bad
 * deployment: NB_EINVAL naming the field). Release with nb_embedded_stop. */
nb_code nb_embedded_start(const nb_embedded_opts *o, nb_embedded **out, nb_err *err);

/* The coordinator's URL (inproc://npubench-<pid>-<n>). Owned by e. */
const char *nb_embedded_url(const nb_embedded *e);

/* The tag only this session's worker carries: put it in a job's selector
 * so that no other process's worker takes the job. Owned by e. */
const char *nb_embedded_tag(const nb_embedded *e);

/* NB_OK while the worker runs; its fatal error otherwise (err may be NULL). */
nb_code nb_embedded_worker_error(nb_embedded *e, nb_err *err);

/* Stops the worker (the current job is handed back), then the coordinator. NULL ok. */
void nb_embedded_stop(nb_embedded *e);

/* Runs spec in this process on the worker's executor alone — no coordinator, database,
 * device lock or history — serving the one deployment o describes (--direct). Returns
 * nb_executor_run's code; *out (free with nb_jobpb_free) as it fills it. */
nb_code nb_embedded_execute(const nb_embedded_opts *o, const Npubench__JobSpec *spec,
                            Npubench__JobResult **out, nb_err *err);

#endif
