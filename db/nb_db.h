/* nb_db: the npubench history database (one SQLite file): deployments, workers,
 * the coordinator's job queue and every verify/benchmark run. Handle + transactions. */
#ifndef NB_DB_H
#define NB_DB_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

/* One connection to one database file. Every nb_db_* call on a handle is
 * serialized by a (recursive) mutex inside it, so a handle may be shared by
 * threads; several processes may open the same file (WAL, busy_timeout). */
typedef struct nb_db nb_db;

/* Size limits (including the NUL) on identity strings. Longer input is
 * rejected with NB_EINVAL naming the field, so the fixed-size buffers of the
 * structs the API fills never truncate what was stored through it. */
#define NB_DB_NAME_MAX 128   /* model, backend, dtype, board, kind, worker id, ... */
#define NB_DB_DIGEST_MAX 80  /* "sha256:" + 64 hex digits fits */
#define NB_DB_LIST_MAX 512   /* comma-separated lists: tags, backends, deployments */
#define NB_DB_MSG_MAX 512    /* reasons, errors, progress messages */

typedef struct nb_db_opts {
    int busy_timeout_ms; /* how long to wait for another writer; <= 0: 5000 */
    /* 0: synchronous=NORMAL. In WAL mode every COMMIT is write()n to the WAL
     * before it returns, so a killed process (kill -9, crash) loses nothing;
     * only an OS crash or power loss can drop the last commits, because the
     * WAL is fsync()ed at checkpoints instead of at every commit.
     * 1: synchronous=FULL, fsync at every commit: survives power loss too,
     * at roughly one fsync per enqueue/complete. */
    int sync_full;
} nb_db_opts;

/* Opens (creating if missing) the database at path, sets WAL, foreign_keys,
 * busy_timeout and synchronous, then applies pending schema migrations, each
 * in its own transaction. opts may be NULL. Errors: NB_EIO (cannot open),
 * NB_EFORMAT (not an npubench database), NB_EUNSUPPORTED (the file's schema
 * is newer than this program). On success *out is owned by the caller and
 * released with nb_db_close. */
nb_code nb_db_open(const char *path, const nb_db_opts *opts, nb_db **out, nb_err *err);

/* PRAGMA quick_check: every page and index readable and consistent (O(size),
 * run once at a coordinator's start). NB_EDATALOSS naming the first problem
 * SQLite reports and how many it found. */
nb_code nb_db_check(nb_db *db, nb_err *err);

/* Deletes every row of every table (ids start over), keeping the schema: a fresh database
 * without the cost of building one (its migrations re-parse the schema; ~10 ms). For
 * harnesses that need a clean database per input. */
nb_code nb_db_clear(nb_db *db, nb_err *err);

/* Closes the handle (NULL is fine); an open nb_db_begin transaction is rolled back. */
void nb_db_close(nb_db *db);

/* The path given to nb_db_open (owned by db). */
const char *nb_db_path(const nb_db *db);

/* Wall clock used for every timestamp the database writes (created, lease
 * expiry, last seen...), in milliseconds since the Unix epoch. Tests replace
 * it to move time forward; NULL restores the real clock. */
typedef int64_t (*nb_db_clock_fn)(void *ud);
void nb_db_set_clock(nb_db *db, nb_db_clock_fn fn, void *ud);
int64_t nb_db_now_ms(nb_db *db);

/* Groups many calls into one transaction (bulk inserts, imports): every
 * nb_db_* call in between joins it (as a savepoint, so a failing call undoes
 * only its own work). The calling thread holds the handle until commit or
 * rollback; other threads' calls wait. Not nestable: a second begin fails
 * with NB_EINVAL. A failed commit rolls back and releases the handle. */
nb_code nb_db_begin(nb_db *db, nb_err *err);
nb_code nb_db_commit(nb_db *db, nb_err *err);
void nb_db_rollback(nb_db *db);

#endif
