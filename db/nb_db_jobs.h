/* nb_db_jobs: the coordinator's durable job queue: idempotent enqueue, leases
 * matched to worker capabilities, expiry/requeue, completion with its runs. */
#ifndef NB_DB_JOBS_H
#define NB_DB_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"
#include "nb_db_runs.h"
#include "nb_db_workers.h"
#include "nb_job.h"

/* Job states, their names and transitions are nb_job's (job/nb_job.h). */

typedef enum nb_db_spec_format { NB_SPEC_JSON = 0, NB_SPEC_PROTO } nb_db_spec_format;

#define NB_DB_LEASE_ID_MAX 40
#define NB_DB_SPEC_MAX (16u << 20)      /* bytes of one job spec */
#define NB_DB_JOB_LOG_MAX (8u << 20)    /* bytes of log kept per job */
#define NB_DB_DEFAULT_MAX_ATTEMPTS 3

/* What a job needs from a worker; "" = anything. */
typedef struct nb_db_selector {
    const char *backend;    /* in the worker's backends */
    const char *board;      /* == worker board_name */
    const char *board_type; /* == worker board_type */
    const char *deployment; /* in the worker's deployments (or the worker serves "*") */
    const char *worker;     /* == worker id (pinned) */
    const char *tags;       /* comma list: every tag in the worker's tags */
    /* npubench.Dtype the job asks for (0: none; the dtype in deployment is then matched by
     * name, as an exec deployment's free label is); the coordinator matches by it */
    int dtype_id;
} nb_db_selector;

typedef struct nb_db_job_new {
    const char *request_id; /* idempotency key; NULL or "" = none */
    const char *kind;       /* required: "verify", "bench", "profile", "matrix", ... */
    const void *spec;       /* the request as the coordinator encoded it; copied */
    size_t spec_len;
    nb_db_spec_format spec_format;
    nb_db_selector sel;
    int priority;          /* higher runs first; FIFO within a priority */
    int max_attempts;      /* 0 = NB_DB_DEFAULT_MAX_ATTEMPTS */
    int64_t parent_id;     /* 0, or the group job this is a shard of */
    /* A group (matrix, sharded run) is never leased: it is running from
     * creation and finishes when its last child does (failed if any child
     * failed, cancelled if any was cancelled, else done). Enqueue the group
     * and its children inside one nb_db_begin/nb_db_commit. */
    int is_group;
    int64_t expire_after_ms; /* expires this long after its creation while queued; 0 = never */
} nb_db_job_new;

/* A job as stored. Fixed-size fields are copies; spec and log are
 * malloc'ed (NULL when not loaded) and released by nb_db_job_free. */
typedef struct nb_db_job {
    int64_t id, parent_id;
    char request_id[NB_DB_NAME_MAX];
    char kind[NB_DB_NAME_MAX];
    int is_group;
    nb_db_spec_format spec_format;
    void *spec;
    size_t spec_len;
    char sel_backend[NB_DB_NAME_MAX], sel_board[NB_DB_NAME_MAX],
        sel_board_type[NB_DB_NAME_MAX], sel_deployment[NB_DB_NAME_MAX],
        sel_worker[NB_DB_NAME_MAX];
    char sel_tags[NB_DB_LIST_MAX];
    int sel_dtype_id; /* nb_db_selector.dtype_id as stored */
    int priority;
    nb_job_state state;
    char queued_reason[NB_DB_MSG_MAX];
    char error[NB_DB_MSG_MAX];
    int attempts, max_attempts;
    char lease_id[NB_DB_LEASE_ID_MAX];
    char leased_worker[NB_DB_NAME_MAX];
    int64_t lease_expiry_ms; /* 0 when not leased */
    int64_t created_ms, started_ms, finished_ms; /* 0 = not yet */
    int64_t progress_done, progress_total;
    char progress_msg[NB_DB_MSG_MAX];
    char *log; /* "HH:MM:SS.mmm text\n" lines */
    int64_t expires_ms; /* queue expiry (unix ms); 0 = never */
} nb_db_job;

void nb_db_job_free(nb_db_job *job); /* frees spec and log, not job itself */
void nb_db_job_list_free(nb_db_job *jobs, size_t n);

/* Adds a job. With a request id already stored: *id = that job, *existed =
 * 1, and NB_EMISMATCH if its kind or spec differ (a reused key).
 * existed may be NULL. */
nb_code nb_db_job_enqueue(nb_db *db, const nb_db_job_new *job, int64_t *id, int *existed,
                          nb_err *err);

/* Full job (with spec and log); release with nb_db_job_free. */
nb_code nb_db_job_get(nb_db *db, int64_t id, nb_db_job *out, nb_err *err);

/* The job without spec and log (state, lease, holder): cheap enough for every lease-holder
 * call. Nothing to free. */
nb_code nb_db_job_peek(nb_db *db, int64_t id, nb_db_job *out, nb_err *err);

/* The job enqueued with request_id; NB_ENOTFOUND if none. */
nb_code nb_db_job_find_request(nb_db *db, const char *request_id, int64_t *id, nb_err *err);

/* 1 if w may run job; otherwise 0 and, if why is not NULL, a reason for
 * the job's queued_reason ("needs backend 'npu'; worker w1 has 'cpu'"). */
int nb_db_job_matches(const nb_db_job *job, const nb_db_worker *w, char *why, size_t why_size);

/* Extra caller filter applied after the selector match (job has no spec or
 * log loaded); nonzero = this worker takes it. Must not call into db. */
typedef int (*nb_db_job_pred)(const nb_db_job *job, void *ud);

/* Leases the first queued job, by priority DESC then FIFO, that w matches
 * (and pred accepts, if given) for lease_ms: state leased, a fresh lease id,
 * expiry now + lease_ms. *found = 0 when nothing matched. On success *out is
 * the full job (release with nb_db_job_free). Stale/gone workers get nothing. */
nb_code nb_db_job_lease(nb_db *db, const nb_db_worker *w, nb_db_job_pred pred, void *ud,
                        int64_t lease_ms, nb_db_job *out, int *found, nb_err *err);

/* Errors shared by the lease-holder calls below: NB_ENOTFOUND (no such job),
 * NB_ECANCELED (cancelled meanwhile: stop working on it), NB_EMISMATCH (the
 * lease was lost: expired and requeued or given to another worker, or the
 * job already finished). */

/* Extends the lease to now + lease_ms; *expiry_ms (may be NULL) = new expiry. */
nb_code nb_db_job_renew(nb_db *db, int64_t id, const char *lease_id, int64_t lease_ms,
                        int64_t *expiry_ms, nb_err *err);

/* The worker began executing: leased -> running, started time set. */
nb_code nb_db_job_start(nb_db *db, int64_t id, const char *lease_id, nb_err *err);

/* Progress (also moves leased -> running). lease_id NULL skips the lease
 * check (coordinator-side updates). */
nb_code nb_db_job_set_progress(nb_db *db, int64_t id, const char *lease_id, int64_t done,
                               int64_t total, const char *msg, nb_err *err);

typedef struct nb_db_job_result {
    nb_job_state state;    /* NB_JOB_DONE or NB_JOB_FAILED */
    const char *error;        /* for FAILED */
    const nb_db_run *runs;    /* written with job_id/job_seq/lease_id filled in */
    size_t n_runs;
} nb_db_job_result;

/* Finishes a job and writes its runs, all in one transaction. A retry by the
 * same lease after success (a lost acknowledgement) changes nothing and
 * returns NB_OK with *duplicate = 1 and the stored run ids; any other lease
 * gets NB_EMISMATCH and writes nothing. run_ids (n_runs entries) and
 * duplicate may be NULL. */
nb_code nb_db_job_complete(nb_db *db, int64_t id, const char *lease_id,
                           const nb_db_job_result *res, int64_t *run_ids, int *duplicate,
                           nb_err *err);

/* The lease holder gives the job back (worker shutting down): as if its
 * lease had expired now. */
nb_code nb_db_job_release(nb_db *db, int64_t id, const char *lease_id, const char *reason,
                          nb_err *err);

/* Requeues every leased/running job whose lease expired (attempts + 1, or
 * failed once attempts reach max_attempts, with a reason naming the
 * worker). Counts go to n_requeued / n_failed (may be NULL). Run this when
 * the coordinator starts and periodically. */
nb_code nb_db_jobs_requeue_expired(nb_db *db, size_t *n_requeued, size_t *n_failed,
                                   nb_err *err);

/* How many leases worker_id holds now (*n) and the newest one's job (*job_id, 0 if none). */
nb_code nb_db_jobs_held(nb_db *db, const char *worker_id, int64_t *n, int64_t *job_id,
                        nb_err *err);

/* Same for every lease held by worker_id (it is gone). */
nb_code nb_db_jobs_release_worker(nb_db *db, const char *worker_id, const char *reason,
                                  size_t *n_requeued, size_t *n_failed, nb_err *err);

/* Cancels a job that has not finished, and the unfinished children of a
 * group. Already cancelled: NB_OK. Done/failed: NB_EMISMATCH. */
nb_code nb_db_job_cancel(nb_db *db, int64_t id, const char *reason, nb_err *err);

/* Expires the top-level jobs whose expiry is at or before now_ms and of which nothing
 * runs (a queued job; a group with no child leased or running): cancelled, with an error
 * starting "expired:", their unfinished children with them. *ids (malloc'ed, free())
 * lists them; at most 1000 per call. */
nb_code nb_db_jobs_expire(nb_db *db, int64_t now_ms, int64_t **ids, size_t *n, nb_err *err);

/* Why a queued job is still waiting (shown by `npubench jobs`); ignored
 * (NB_OK) when the job is no longer queued. */
nb_code nb_db_job_set_queued_reason(nb_db *db, int64_t id, const char *reason, nb_err *err);

/* Appends one log line (a newline is added if missing). A job's log keeps its newest lines:
 * one that would pass NB_DB_JOB_LOG_MAX drops the oldest down to half the cap, and the first
 * line left says so ("[log trimmed: N earlier lines (B bytes) dropped, the newest kept]"); a
 * line over a quarter of the cap keeps its end. That is still NB_OK. */
nb_code nb_db_job_append_log(nb_db *db, int64_t id, const char *text, nb_err *err);

typedef struct nb_db_job_filter {
    unsigned states;       /* NB_JOB_STATE_BIT()s; 0 = all */
    const char *kind;      /* NULL or "" = any */
    int64_t parent_id;     /* 0 = any; -1 = top-level jobs only */
    const char *worker;    /* leased_worker; NULL or "" = any */
    int64_t since_ms;      /* created at or after */
    size_t limit;          /* 0 = 100; at most NB_DB_HISTORY_MAX */
    int oldest_first;      /* default newest first */
} nb_db_job_filter;

/* Jobs matching f, without spec and log. Release with nb_db_job_list_free. */
nb_code nb_db_job_list(nb_db *db, const nb_db_job_filter *f, nb_db_job **jobs, size_t *n,
                       nb_err *err);

#endif
