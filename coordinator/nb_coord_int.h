/* nb_coord_int: what the coordinator's sources share and nothing outside coordinator/ may
 * use — the server state, the worker registry, change notification, scheduling helpers. */
#ifndef NB_COORD_INT_H
#define NB_COORD_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_arena.h"
#include "nb_coord.h"
#include "nb_dash.h"
#include "nb_db.h"
#include "nb_db_deploy.h"
#include "nb_db_jobs.h"
#include "nb_db_runs.h"
#include "nb_db_workers.h"
#include "nb_job.h"
#include "nb_rpc.h"
#include "nb_wire.h"

#define COORD_SEQ_SLOTS 4096 /* jobs whose change counter is tracked for WatchJob */
#define COORD_TRACE_IX 64    /* (model, prompts) digests whose trace key is known */
#define COORD_EVENT_LOG 64   /* progress events kept per watched job */
#define COORD_LOG_KEYS 32    /* log message kinds rate-limited separately */
#define COORD_LOG_BURST 20   /* lines of one kind per window */
#define COORD_LOG_WINDOW_MS 10000

/* One registered worker as this coordinator process knows it (the durable
 * part, with liveness, is the db's workers table). */
typedef struct coord_worker {
    char id[NB_DB_NAME_MAX];
    uint8_t *info_pb;        /* packed WorkerInfo as registered (malloc'ed) */
    size_t info_len;
    char instance[NB_DB_NAME_MAX];
    char host[NB_DB_NAME_MAX], device[NB_DB_NAME_MAX];
    int64_t registered_ms, last_heartbeat_ms;
    int64_t current_job;     /* from heartbeats and leases; 0 = idle */
    int64_t current_parent;  /* its group, for waking the group's watchers */
    char lease_id[NB_DB_LEASE_ID_MAX];
    int64_t prog_done, prog_total;
    char prog_msg[NB_DB_MSG_MAX];
    int32_t tok_done, tok_total; /* inside its current unit; in memory only (never stored) */
    char unit[16];
    int64_t clock_offset_ms; /* the worker's clock minus ours, at its last heartbeat */
} coord_worker;

typedef struct coord_seq {
    int64_t job_id;
    uint64_t seq;
} coord_seq;

/* Rate limit state of one log message kind (keyed by its format string). */
typedef struct coord_logkey {
    const char *fmt;
    int64_t window_ms;        /* start of the current window */
    unsigned lines, dropped;  /* printed / suppressed in it */
} coord_logkey;

typedef struct coord_trace_ix {
    char model_sha[65], prompts_sha[65];
    int n_tokens, k;
} coord_trace_ix;

struct nb_coord {
    nb_coord_opts o;          /* strings below are owned copies */
    char *listen_url, *db_path, *artifacts_dir, *secret, *worker_secret, *admin_secret;
    char *tls_cert, *tls_ca, *refdir, *prompts_dir;
    char bound[1200];         /* the address really bound, for the log */
    nb_db *db;
    nb_rpc_server *srv;
    pthread_t sweeper;
    int sweeper_started;

    pthread_mutex_t mu;       /* everything below */
    pthread_cond_t cv;        /* broadcast on every change (gen++) and on stop */
    uint64_t gen;             /* any change (WatchJob) */
    uint64_t qgen;            /* the queue changed: something may be leasable (LeaseJob) */
    int stopping;
    coord_worker *workers;
    size_t n_workers, cap_workers;
    coord_seq seqs[COORD_SEQ_SLOTS];
    coord_trace_ix traces[COORD_TRACE_IX];
    size_t n_traces;
    nb_coord_stats stats;
    int64_t next_reasons_ms, next_gone_scan_ms, next_expire_ms, next_health_ms;
    int64_t next_retention_ms; /* sweeper thread only */
    int lock_fd;               /* flock on <db>.lock; -1 when not held */
    int db_lock_fd;            /* flock on the database file itself (its inode, whatever
                                  name reaches it); -1 when not held */
    pthread_mutex_t log_mu;   /* log_keys */
    coord_logkey log_keys[COORD_LOG_KEYS];
    int draining;             /* admin Drain: no new leases */
    char *http_url;            /* the dashboard (nb_coord_http.c); NULL = none */
    void *http;                /* its nb_httpd */
    char http_bound[300];      /* http://host:port/ really bound */
};

/* ---- nb_coord_state.c: the state the APIs share (nb_coord.c only starts and stops them) ---- */

/* Log line on stderr ("npubench coordinator: ..."), unless quiet. Control characters are
 * escaped (client strings cannot forge lines); each format string prints at most
 * COORD_LOG_BURST lines per COORD_LOG_WINDOW_MS, then one line counting the suppressed. */
void nb_coord_log(nb_coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports the lines suppressed in windows that ended by now (all of them when all): a flood
 * that stops is counted once its window ends, not only when a line of its kind comes again.
 * The sweeper calls it every tick, the stop once more with all set. */
void nb_coord_log_flush(nb_coord *c, int64_t now, int all);
/* Something changed about job (0 = the queue in general; parent too if
 * non-zero): bumps its change counter and wakes every long poll. */
void nb_coord_changed(nb_coord *c, int64_t job_id, int64_t parent_id);
/* The change counter of job_id (0 when never changed here). */
uint64_t nb_coord_job_seq(nb_coord *c, int64_t job_id);
/* Waits until the global counter moves past *gen, the wall clock passes
 * until_ms, or the coordinator stops; *gen gets the current counter.
 * Returns 0 on a change, 1 on timeout, -1 when stopping. */
int nb_coord_wait(nb_coord *c, uint64_t *gen, int64_t until_ms);
uint64_t nb_coord_gen(nb_coord *c);
/* The queue changed (submit, requeue, release): wakes LeaseJob polls too. */
void nb_coord_queue_changed(nb_coord *c);
uint64_t nb_coord_qgen(nb_coord *c);
/* nb_coord_wait on the queue counter. */
int nb_coord_wait_queue(nb_coord *c, uint64_t *qgen, int64_t until_ms);
/* Wall-clock end of a long poll: now + wait_ms, capped by the options and by
 * the request's deadline minus a margin for the reply to travel back. */
int64_t nb_coord_poll_until(nb_coord *c, const nb_rpc_request *req, int wait_ms);
void nb_coord_stat_add(nb_coord *c, uint64_t *field, uint64_t n);

/* 1 when url cannot be reached from another host (loopback, ipc, inproc). */
int nb_coord_url_is_local(const char *url);
/* The host of a tcp/tls URL into host ("" for ipc and inproc, which never leave the host). */
void nb_coord_url_host(const char *url, char *host, size_t cap);

/* ---- nb_coord_http.c: the read-only web dashboard ---- */

/* Serves the dashboard at c->http_url (nothing when NULL); refuses a non-loopback URL
 * without keys unless insecure, as the RPC listen is refused. */
nb_code nb_coord_http_start(nb_coord *c, nb_err *err);
/* Stops it and waits for its requests; before the database closes. */
void nb_coord_http_stop(nb_coord *c);

/* ---- nb_coord_dash.c: the dashboard as files over RPC ---- */

/* The pages' options from the coordinator's state (drain) and its regression settings. */
void nb_coord_dash_opts(nb_coord *c, nb_dash_opts *o);
/* Registers npubench.Client/Dashboard (client role). */
nb_code nb_coord_register_dash_api(nb_coord *c, nb_err *err);

/* ---- nb_coord_regress.c: the regression lifecycle ---- */

/* Registers npubench.Client/Regressions (client role) and RegressionUpdate (admin). */
nb_code nb_coord_register_regress_api(nb_coord *c, nb_err *err);

/* ---- nb_coord_reg.c: the in-memory registry (all take c->mu) ---- */

/* The registration of id, unpacked into a fresh message the caller frees
 * with nb_wire_free; NULL if id is not registered in this process. */
Npubench__WorkerInfo *nb_coord_reg_info(nb_coord *c, const char *id);
/* Stores/replaces the registration of info->worker_id. */
nb_code nb_coord_reg_put(nb_coord *c, const Npubench__WorkerInfo *info, nb_err *err);
/* Heartbeat bookkeeping: 0 for an unknown id, 2 when the job or its
 * progress changed since the last report, else 1. */
int nb_coord_reg_heartbeat(nb_coord *c, const char *id, int64_t job, const char *lease,
                           int64_t done, int64_t total, const char *msg);
void nb_coord_reg_set_job(nb_coord *c, const char *id, int64_t job, const char *lease,
                          int64_t parent);
/* Records the token position p reports for job on worker id (a no-op when id runs another
 * job); nb_coord_reg_job_tokens reads it back for whichever worker runs job: 1 and the
 * position when one does and reported tokens, else 0. */
void nb_coord_reg_tokens(nb_coord *c, const char *id, int64_t job, const Npubench__Progress *p);
int nb_coord_reg_job_tokens(nb_coord *c, int64_t job, int32_t *done, int32_t *total, char *unit,
                            size_t cap);
/* 1 when id is registered by the process instance, 0 when by another one, -1 when id is
 * not registered here (a coordinator restarted since). */
int nb_coord_reg_instance_is(nb_coord *c, const char *id, const char *instance);
/* The group of the job id currently runs (0 if none or unknown). */
int64_t nb_coord_reg_parent(nb_coord *c, const char *id);
/* Copy of the whole registry (caller frees the array and each info_pb). */
coord_worker *nb_coord_reg_snapshot(nb_coord *c, size_t *n);
void nb_coord_reg_snapshot_free(coord_worker *w, size_t n);
void nb_coord_reg_free_all(nb_coord *c);
/* Records the worker's clock offset (its heartbeat's time minus ours). */
void nb_coord_reg_set_clock(nb_coord *c, const char *id, int64_t offset_ms);
/* Forgets id's registration if instance made it (a clean stop); 1 when removed. */
int nb_coord_reg_remove(nb_coord *c, const char *id, const char *instance);
/* The registration of id (without its WorkerInfo) into *out; 0 when none. */
int nb_coord_reg_get(nb_coord *c, const char *id, coord_worker *out);
/* Looks for another live registration of host + device; fills holder. */
int nb_coord_reg_find_device(nb_coord *c, const char *host, const char *device,
                             const char *except_id, coord_worker *holder);

/* ---- nb_sched.c: selectors, matching, submission ---- */


/* The db selector strings of spec (pointers into buf). */
typedef struct sched_sel {
    nb_db_selector sel;
    char deployment[NB_DB_NAME_MAX]; /* "<model or *>/<dtype or *>" */
    char tags[NB_DB_LIST_MAX];
} sched_sel;
nb_code nb_sched_selector(const Npubench__JobSpec *spec, sched_sel *out, nb_err *err);

/* 1 if worker info can run a job with db selector fields (those of
 * nb_db_job: sel_backend, sel_board, sel_deployment, sel_dtype_id, sel_tags, sel_worker;
 * the dtype by the enum where both the job and the deployment carry one, nb_job_dep_match);
 * otherwise 0 with why. dep_out (may be NULL) gets the index of the served
 * deployment that matched (-1 when the worker serves any). */
int nb_sched_worker_serves(const Npubench__WorkerInfo *w, const char *worker_id,
                           const char *backend, const char *board, const char *deployment,
                           int dtype_id, const char *tags, const char *pin, char *why,
                           size_t why_cap, int *dep_out);
/* nb_db_job_pred adapter: ud is the Npubench__WorkerInfo. */
int nb_sched_pred(const nb_db_job *job, void *ud);
/* The db matcher struct for w (deployments "*": nb_sched_pred checks them). */
void nb_sched_db_worker(const Npubench__WorkerInfo *w, nb_db_worker *out);

/* Prompt set of a verify spec as the coordinator sees it: count (after
 * max_prompts) and digest; 0 with *n = 0 when it cannot be read here. */
int nb_sched_prompt_set(const char *root, const Npubench__JobSpec *spec, int *n, char sha[65],
                        char *path, size_t path_cap);

/* SubmitJob: validates, expands shards/matrix, enqueues durably. *ids
 * malloc'ed: [0] is the job to watch, then its children. */
nb_code nb_sched_submit(nb_coord *c, const Npubench__SubmitJobRequest *req, int64_t **ids,
                        size_t *n, int *duplicate, nb_err *err);
/* Expires the jobs past their queue expiry (sweeper; nb_db_jobs_expire) and wakes their
 * watchers. */
void nb_sched_expire(nb_coord *c);
/* Refreshes queued_reason of queued jobs (sweeper). */
void nb_sched_update_reasons(nb_coord *c);

/* ---- nb_coord_result.c: results into the history ---- */

/* Commits a worker's result for job under lease (ReportResult): runs,
 * deployment, regression verdict, shard merge, artifact. *accepted = 0 when
 * the lease is no longer valid (result dropped). */
nb_code nb_coord_result_commit(nb_coord *c, const char *worker_id, const char *lease_id,
                               const Npubench__JobResult *res, int *accepted, nb_err *err);
/* Fills arena-owned run from res for a job of kind (no deployment id yet:
 * *dep gets the deployment to upsert). */
nb_code nb_coord_result_to_run(nb_arena *a, const Npubench__JobResult *res, const char *kind,
                               const char *default_board, nb_db_source source, nb_db_run *run,
                               nb_db_deployment *dep, nb_err *err);

/* ---- nb_coord_merge.c: verify-full shards into one result ---- */

/* Merges the stored results of group's children (this_res standing in for
 * child this_id, not stored yet or just stored) into one JobResult owned by
 * a, as a single-worker VERIFY_FULL run would have reported it. */
#define NB_COORD_MERGE_BOARDS 64
/* The distinct boards a group's shards ran on, in shard order (the merged result's
 * environment names the first): the merged run is stored on each of them. */
typedef struct nb_coord_boards {
    char name[NB_COORD_MERGE_BOARDS][NB_DB_NAME_MAX];
    size_t n;
} nb_coord_boards;

nb_code nb_coord_merge_verify_group(nb_coord *c, const nb_db_job *group, int64_t this_id,
                                    const Npubench__JobResult *this_res, nb_arena *a,
                                    Npubench__JobResult **out, nb_coord_boards *boards,
                                    nb_err *err);

/* ---- nb_coord_store.c: committed JobResults, whole ---- */

/* Stores res (packed) as the result of job in the database (joining the caller's
 * transaction); replaces an older one. Fault point "result_store". */
nb_code nb_coord_store_put(nb_coord *c, int64_t job_id, const Npubench__JobResult *res, nb_err *err);
/* The stored result of job (free with nb_wire_free); NB_ENOTFOUND if none. */
nb_code nb_coord_store_get(nb_coord *c, int64_t job_id, Npubench__JobResult **out, nb_err *err);
/* The file an older version kept job's result in (read when the database has none). */
void nb_coord_store_legacy_path(const nb_coord *c, int64_t job_id, char *buf, size_t cap);

/* ---- nb_coord_disk.c: free space and retention ---- */

/* NB_ENOMEM (RESOURCE_EXHAUSTED) naming the free space when the artifacts' filesystem
 * has less than min_free_mb free (fault point "disk_full"): callers refuse new work. */
nb_code nb_coord_disk_room(nb_coord *c, nb_err *err);
/* Once an hour (and at the first call): removes temporary files older than an hour and
 * stored results of jobs finished more than retention_days ago. */
void nb_coord_retention(nb_coord *c);

/* ---- nb_coord_lock.c: one coordinator per database ---- */

/* flock on <db_path>.lock (exclusive; shared for embedded coordinators), pid written
 * in it; NB_EUNAVAIL naming the holder's pid when taken. Then the same flock on the
 * database file itself, so another name for the file (a hard link, a symlink) cannot start
 * a second coordinator on it either; released after the database is closed (closing that
 * descriptor earlier would drop SQLite's POSIX locks on the file). */
nb_code nb_coord_lock_db(nb_coord *c, nb_err *err);
void nb_coord_unlock_db(nb_coord *c);

/* ---- nb_coord_replay.c: answers kept across restarts ---- */

/* With keys on: the server's answers to mutating requests are kept in the database for
 * the clock window, and a request id an earlier process answered gets that answer. */
nb_code nb_coord_replay_attach(nb_coord *c, nb_err *err);

/* ---- nb_coord_boardkeys.c: per-board worker credentials ---- */

/* The table and npubench.Client/BoardKey (admin). */
nb_code nb_coord_boardkeys_start(nb_coord *c, nb_err *err);
/* A registration of board presenting key: NB_OK when the board has no keys or key is one
 * of them, else NB_EAUTH naming the board. */
nb_code nb_coord_boardkey_admit(nb_coord *c, const char *board, const char *key, nb_err *err);

/* ---- nb_coord_traces.c: the reference trace cache ---- */

/* For a lease of spec to a worker serving model digest model_sha: the
 * cached trace bytes (malloc'ed; caller frees) and their sha256, or NULL
 * when none is known. Fills the cache from refdir on a miss. */
uint8_t *nb_coord_traces_for_lease(nb_coord *c, const Npubench__JobSpec *spec, const char *model_sha,
                          size_t *len, char sha_hex[65], char *name, size_t name_cap);
/* After a verify/diagnosis result: caches the trace the worker used when
 * this coordinator can read it and has none for that key yet. */
void nb_coord_traces_confirm(nb_coord *c, const Npubench__JobSpec *spec, const Npubench__JobResult *res);

/* ---- the handlers' shared steps (nb_coord_client.c, _worker.c, _compare.c, _dash.c) ---- */

/* Unpacks req (an nb_rpc_request *) as T into a variable named r, or answers reply with
 * INVALID_ARGUMENT. */
#define NB_COORD_UNPACK(T, desc)                                                             \
    T *r;                                                                                    \
    do {                                                                                     \
        nb_err e_;                                                                           \
        if (nb_wire_unpack(&desc, req->payload, req->len, 0, &r, &e_))                       \
            return nb_rpc_reply_err(reply, &e_);                                             \
    } while (0)

/* Packs a response built in an arena, or, when building it ran out of memory (ok = 0),
 * answers RESOURCE_EXHAUSTED naming the call. */
static inline nb_rpc_status nb_coord_reply_built(nb_rpc_reply *reply, const void *resp, int ok,
                                                 const char *rpc)
{
    if (!ok)
        return nb_rpc_reply_status(reply, NB_RPC_RESOURCE_EXHAUSTED, "%s: out of memory", rpc);
    return nb_rpc_reply_pack(reply, resp);
}

/* ---- nb_coord_health.c: board health checks, quarantine, drain ---- */

/* A board registered: its health check, when checks are on. */
void nb_coord_health_on_register(nb_coord *c, const Npubench__WorkerInfo *info);
/* A result of kind committed from worker: a check's verdict is the board's health (fail =
 * quarantined); other jobs count consecutive errors, N of them schedule a check. */
void nb_coord_health_on_result(nb_coord *c, const char *worker_id, int kind,
                               const Npubench__JobResult *res);
/* Sweeper: checks due by period (ok boards) or retry (quarantined ones). */
void nb_coord_health_sweep(nb_coord *c);
/* The lease filter for a worker of board: every job, health checks only (quarantined), or
 * *none = 1 (drained). */
nb_db_job_pred nb_coord_health_pred(nb_coord *c, const char *board, int *none);
/* The board's health, drain and errors into s (ListWorkers). */
void nb_coord_health_status(nb_coord *c, nb_arena *a, Npubench__WorkerStatus *s);

/* nb_coord_compare.c: Compare, SetReference (set and unset), GetReference. */
nb_rpc_status nb_coord_compare_rpc(void *user, const nb_rpc_request *req, nb_rpc_reply *reply);
nb_rpc_status nb_coord_setref_rpc(void *user, const nb_rpc_request *req, nb_rpc_reply *reply);
nb_rpc_status nb_coord_getref_rpc(void *user, const nb_rpc_request *req, nb_rpc_reply *reply);
/* The history run a job wrote (its first); NB_ENOTFOUND when none. */
nb_code nb_coord_run_of_job(nb_coord *c, int64_t job_id, int64_t *run_id, nb_err *err);

/* nb_coord_alias.c: a model's other names into the history's alias table: those a worker's
 * deployment declares (its canonical name, aliases, selector, digest) and those a result
 * shows (GGUF general.name, the weights digest) for the deployment model it was stored
 * under.  Best effort: failures are logged. */
void nb_coord_alias_from_deployment(nb_coord *c, const Npubench__Deployment *d);
void nb_coord_alias_from_result(nb_coord *c, const Npubench__JobResult *res, const char *canonical);

/* The alias table as nb_job_model_match_aliased takes it (al points into raw). */
struct nb_db_alias;
typedef struct nb_coord_aliases {
    struct nb_db_alias *raw;
    nb_job_alias *al;
    size_t n;
} nb_coord_aliases;
nb_code nb_coord_alias_table(nb_coord *c, nb_coord_aliases *t, nb_err *err);
void nb_coord_aliases_free(nb_coord_aliases *t);

nb_code nb_coord_register_client_api(nb_coord *c, nb_err *err);
nb_code nb_coord_register_worker_api(nb_coord *c, nb_err *err);
/* The worker-facing side of the sweeper: ages workers, releases leases of
 * gone ones, requeues expired leases. */
void nb_coord_sweep_workers(nb_coord *c);

/* Job state mapping: db <-> proto (Npubench__JobState). */
int nb_coord_state_to_pb(nb_job_state s);

#endif
