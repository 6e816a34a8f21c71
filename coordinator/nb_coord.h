/* nb_coord: the npubench coordinator — the client and worker APIs over nb_rpc, the
 * durable queue and history in SQLite (db/), scheduling, sharding, leases and sweeping. */
#ifndef NB_COORD_H
#define NB_COORD_H

#include <stdint.h>

#include "nb_err.h"

/* Options; zero-initialise and set what you need (0 = the default in brackets).
 * Strings are copied by nb_coord_start. */
typedef struct nb_coord_opts {
    const char *listen_url;   /* required: tcp://host:port, ipc://path, inproc://name,
                                 tls+tcp://host:port */
    const char *db_path;      /* required: the SQLite history/queue file (created) */
    const char *artifacts_dir;/* where committed JobResults are kept [<db_path>.d] */
    const char *secret;       /* the client key, or the one key of every role when the two
                                 below are unset; NULL/"" = no authentication, which is
                                 allowed on loopback, ipc and inproc only */
    const char *tls_cert_key_file; /* PEM cert + key, for tls+tcp:// */
    const char *tls_ca_file;  /* if set, clients must present certificates */
    int64_t lease_ms;         /* lease length; renewed by progress/heartbeats [30000] */
    int heartbeat_ms;         /* interval asked of workers [1000] */
    int64_t stale_ms;         /* no heartbeat this long: stale, no new leases [4 x hb] */
    int64_t gone_ms;          /* no heartbeat this long: gone, leases released [10 x hb] */
    int sweep_ms;             /* sweeper period [min(250, hb / 2)] */
    int max_attempts;         /* leases per job before it fails [3] */
    int max_shards;           /* cap on verify-full shards [16] */
    int handler_threads;      /* nb_rpc handler pool [32]; bounds concurrent long polls */
    int max_wait_ms;          /* cap on one LeaseJob / WatchJob long poll [10000] */
    /* Regression detection on RUN/PROFILE results. */
    int regression_last_n;    /* baseline: the deployment's last N runs [10] */
    double regression_min_rel;/* minimum relative change [0.05] */
    double regression_alpha;  /* Mann-Whitney significance [0.05] */
    int min_free_mb;          /* below this much free disk, new work is refused [64] */
    int retention_days;       /* stored results of jobs finished longer ago are deleted
                                 (runs stay); < 0 keeps them forever [90] */
    const char *refdir;       /* HF traces the coordinator may cache and ship
                                 [verify/references of the source tree] */
    int source_local;         /* record runs as source "local" (embedded mode) */
    int quiet;                /* no log lines on stderr */
    const char *worker_secret;/* the key of the worker role (Register, LeaseJob, results) */
    const char *admin_secret; /* the key of the admin role (SetReference) [the client key] */
    int insecure;             /* allow a non-loopback listen without any key (warned on
                                 every start) */
    const char *prompts_dir;  /* where named prompt sets live [verify/prompts] */
    int64_t expire_after_ms;  /* queue expiry of jobs that name none; < 0 = never [24 h] */
    /* Board health checks (HEALTH jobs): on when health_interval_ms > 0 — at registration,
     * every interval, after health_errors consecutive job errors [3], and every
     * health_retry_ms [10 min] while a board is quarantined. */
    int64_t health_interval_ms;
    int64_t health_retry_ms;
    int health_errors;
    const char *http_url;     /* the read-only web dashboard: http://host:port (":0" picks a
                                 port); NULL = none. Loopback only without keys, as listen */
    int http_max_conns;       /* dashboard connections open at once; more get 503 [64] */
    int http_request_timeout_ms; /* a dashboard request (headers and body) must arrive
                                 within this from its connect, else it is closed [10000] */
    int64_t log_window_ms;    /* a log line's kind prints at most 20 lines per window; what
                                 it suppressed is counted when the window ends [10000] */
    /* Client identities: named client keys (the client role; read at start). A job
     * submitted with one is that client's: another client cancels it only with the admin
     * key. */
    const char *const *client_names;
    const char *const *client_keys;
    int n_client_keys;
    int sync_normal;          /* 1: commits are not fsync()ed (synchronous=NORMAL): an
                                 acknowledged job or result survives kill -9 but not a power
                                 loss; for benchmarks. 0 (default): synchronous=FULL, every
                                 acknowledged commit is on disk before the answer */
} nb_coord_opts;

typedef struct nb_coord nb_coord;

/* Locks the database against a second coordinator (<db_path>.lock), opens it
 * (migrating it), checks its integrity, applies the retention rule, requeues
 * leases that expired while no coordinator ran, binds listen_url and starts
 * serving plus the sweeper thread. Errors: NB_EINVAL (options), NB_EIO/
 * NB_EFORMAT (database), NB_EDATALOSS (damaged database), NB_EUNAVAIL
 * (address in use, or the database held by another coordinator). On success
 * *out is released with nb_coord_stop. */
nb_code nb_coord_start(const nb_coord_opts *o, nb_coord **out, nb_err *err);

/* The URL clients and workers dial (the bound port for ":0"). Owned by c. */
const char *nb_coord_url(const nb_coord *c);

/* The dashboard's URL with the bound port (http://127.0.0.1:8080/), or NULL when
 * http_url was not given. Owned by c. */
const char *nb_coord_http_url(const nb_coord *c);

/* Stops serving (wakes long polls, waits for running handlers), stops the
 * sweeper, closes the database and frees c. Jobs stay in the database:
 * a coordinator started later on the same file carries on. NULL ok. */
void nb_coord_stop(nb_coord *c);

/* nb_coord_start, then serve until SIGTERM or SIGINT, then nb_coord_stop.
 * Prints the URL on stderr once listening (unless quiet). Returns NB_OK
 * after a signal, or the start error. */
nb_code nb_coord_run(const nb_coord_opts *o, nb_err *err);

/* Counters for benchmarks and tests. */
typedef struct nb_coord_stats {
    uint64_t submitted, leased, completed, requeued, cancelled, merged;
} nb_coord_stats;
void nb_coord_get_stats(nb_coord *c, nb_coord_stats *out);

#endif
