/* nb_db_workers: the workers the coordinator has seen (boards, backends, tags)
 * and their liveness, alive -> stale -> gone as heartbeats stop. */
#ifndef NB_DB_WORKERS_H
#define NB_DB_WORKERS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

typedef enum nb_db_worker_state {
    NB_WORKER_ALIVE = 0,
    NB_WORKER_STALE, /* missed heartbeats: gets no new leases */
    NB_WORKER_GONE   /* presumed dead: its leases are released */
} nb_db_worker_state;

const char *nb_db_worker_state_name(nb_db_worker_state s);

/* Lists (tags, backends, deployments) are comma-separated, e.g. "cpu,npu";
 * items are compared exactly after trimming blanks. A deployments list of
 * "*" serves any deployment. The same struct describes a worker to the job
 * matcher (nb_db_job_lease). */
typedef struct nb_db_worker {
    char id[NB_DB_NAME_MAX];         /* required: stable worker id */
    char board_name[NB_DB_NAME_MAX]; /* e.g. "strix-01" */
    char board_type[NB_DB_NAME_MAX]; /* e.g. "npu4", "cpu" */
    char tags[NB_DB_LIST_MAX];
    char host[NB_DB_NAME_MAX];
    char backends[NB_DB_LIST_MAX];
    char deployments[NB_DB_LIST_MAX];
    char version[NB_DB_NAME_MAX];
    char device_id[NB_DB_NAME_MAX];
    int64_t first_seen_ms; /* out */
    int64_t last_seen_ms;  /* out */
    nb_db_worker_state state; /* out */
} nb_db_worker;

/* Registers w (or updates its description), marks it alive and seen now. */
nb_code nb_db_worker_upsert(nb_db *db, const nb_db_worker *w, nb_err *err);

/* Heartbeat: last seen = now, state alive. NB_ENOTFOUND if never registered. */
nb_code nb_db_worker_touch(nb_db *db, const char *id, nb_err *err);

/* A clean stop (Deregister): gone at once, not after the sweep's timeouts; its last seen time
 * stays. NB_ENOTFOUND if never registered. A new registration makes it alive again. */
nb_code nb_db_worker_gone(nb_db *db, const char *id, nb_err *err);

nb_code nb_db_worker_get(nb_db *db, const char *id, nb_db_worker *out, nb_err *err);

/* All workers by id; *out malloc'ed (free()), NULL when *n == 0. */
nb_code nb_db_worker_list(nb_db *db, nb_db_worker **out, size_t *n, nb_err *err);

/* Ages workers: alive ones not seen for stale_after_ms become stale, and
 * alive/stale ones not seen for gone_after_ms become gone. Counts go to
 * n_stale / n_gone (either may be NULL). */
nb_code nb_db_worker_sweep(nb_db *db, int64_t stale_after_ms, int64_t gone_after_ms,
                           size_t *n_stale, size_t *n_gone, nb_err *err);

/* 1 if item is in the comma-separated list (blanks around items ignored). */
int nb_db_list_has(const char *list, const char *item);

#endif
