/* nb_db_int: what the db/ sources share and nothing outside db/ may use:
 * the handle's layout, the statement cache, transactions, bind/column helpers. */
#ifndef NB_DB_INT_H
#define NB_DB_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

typedef struct nb_db_stmt_slot {
    const char *sql; /* key: the address of a static SQL string */
    sqlite3_stmt *st;
} nb_db_stmt_slot;

struct nb_db {
    sqlite3 *h;
    char *path;
    pthread_mutex_t mu; /* recursive: public calls nest inside nb_db_begin */
    int user_tx;        /* 1 while an nb_db_begin transaction is open */
    int sync_full;      /* opened with nb_db_opts.sync_full */
    nb_db_clock_fn clock;
    void *clock_ud;
    nb_db_stmt_slot *stmts;
    size_t nstmts, capstmts;
};

void nb_db_lock(nb_db *db);
void nb_db_unlock(nb_db *db);

/* Fills err from the connection's last SQLite error: "<path>: <what>: <msg>".
 * Busy/locked map to NB_EUNAVAIL, I/O and full disk to NB_EIO, corruption to
 * NB_EDATALOSS, constraint violations to NB_EINVAL, the rest to NB_EINTERNAL. */
nb_code nb_db_sqlerr(nb_db *db, nb_err *err, const char *what);

/* *st = a prepared statement for a static SQL string, cached for the
 * handle's lifetime (keyed by the string's address), reset and with bindings
 * cleared. The caller must sqlite3_reset() it when done (nb_db_done) so that
 * no read transaction stays open between calls. */
nb_code nb_db_stmt(nb_db *db, const char *sql, sqlite3_stmt **st, nb_err *err);
void nb_db_done(sqlite3_stmt *st);

/* Runs SQL without results (may hold several statements). */
nb_code nb_db_exec(nb_db *db, const char *sql, nb_err *err);

/* A write transaction: BEGIN IMMEDIATE when none is open (so the write lock
 * is taken up front and busy_timeout applies, never a deadlocked upgrade),
 * else a SAVEPOINT inside the caller's transaction. */
typedef struct nb_db_tx {
    int outer;
} nb_db_tx;
nb_code nb_db_tx_begin(nb_db *db, nb_db_tx *tx, nb_err *err);
nb_code nb_db_tx_commit(nb_db *db, nb_db_tx *tx, nb_err *err); /* rolls back on failure */
void nb_db_tx_rollback(nb_db *db, nb_db_tx *tx);

/* Runs body (which sets rc) under the handle's lock inside a write
 * transaction, committed when rc is NB_OK and rolled back otherwise. */
#define NB_DB_WITH_TX(db, err, rc, body)                                                     \
    do {                                                                                     \
        nb_db_lock(db);                                                                      \
        nb_db_tx tx_;                                                                        \
        rc = nb_db_tx_begin(db, &tx_, err);                                                  \
        if (!rc) {                                                                           \
            body;                                                                            \
            if (!rc)                                                                         \
                rc = nb_db_tx_commit(db, &tx_, err);                                         \
            else                                                                             \
                nb_db_tx_rollback(db, &tx_);                                                 \
        }                                                                                    \
        nb_db_unlock(db);                                                                    \
    } while (0)

/* One step expecting SQLITE_DONE (INSERT/UPDATE/DELETE); resets st. */
nb_code nb_db_step_done(nb_db *db, sqlite3_stmt *st, nb_err *err, const char *what);

/* Binds: NULL strings become '' (NOT NULL DEFAULT '' columns) or SQL NULL
 * (_opt). NaN doubles and negative "absent" integers become SQL NULL.
 * Strings are bound SQLITE_STATIC: they must live until the statement is reset. */
void nb_db_bind_str(sqlite3_stmt *st, int i, const char *s);
void nb_db_bind_opt_str(sqlite3_stmt *st, int i, const char *s);
void nb_db_bind_opt_double(sqlite3_stmt *st, int i, double v);
void nb_db_bind_opt_int(sqlite3_stmt *st, int i, int64_t v, int present);

/* Column reads: text copied NUL-terminated into buf (truncated to fit),
 * NULL reads as ""; doubles read NULL as NaN; ints read NULL as dflt. */
void nb_db_col_copy(sqlite3_stmt *st, int i, char *buf, size_t size);
double nb_db_col_double(sqlite3_stmt *st, int i);
int64_t nb_db_col_int(sqlite3_stmt *st, int i, int64_t dflt);
/* Heap copy of a text column (NULL stays NULL); *oom set on allocation failure. */
char *nb_db_col_strdup(sqlite3_stmt *st, int i, int *oom);
struct nb_db_arena;
/* The same, copied into an arena (see below). */
const char *nb_db_col_arena_dup(struct nb_db_arena **a, sqlite3_stmt *st, int i, int *oom);

/* Steps st to its end into a heap array of elem-sized slots, each zeroed
 * and then filled by row(st, slot, ud); the array grows by doubling because
 * no caller knows its row count up front. *out (for free()) and *n are set on
 * success only; errors are "<what>: out of memory" or the SQLite error. */
typedef void (*nb_db_row_fn)(sqlite3_stmt *st, void *slot, void *ud);
nb_code nb_db_collect(nb_db *db, sqlite3_stmt *st, size_t elem, nb_db_row_fn row, void *ud,
                      void **out, size_t *n, nb_err *err, const char *what);

/* nb_db_collect over a one-off SQL string (built at run time, so not
 * cached) whose parameters bind(st, bind_ud) binds, under the handle's lock.
 * Errors name what: "preparing <what>", "reading <what>". */
typedef void (*nb_db_bind_fn)(sqlite3_stmt *st, const void *bind_ud);
nb_code nb_db_select_all(nb_db *db, const char *sql, nb_db_bind_fn bind, const void *bind_ud,
                         size_t elem, nb_db_row_fn row, void **out, size_t *n, nb_err *err,
                         const char *what);

/* *id = column 0 of the row that sql (one text parameter: key) selects;
 * NB_ENOTFOUND "no <noun> with <key_name> '<key>'" when there is none. */
nb_code nb_db_find_id(nb_db *db, const char *sql, const char *key, int64_t *id, nb_err *err,
                      const char *noun, const char *key_name);

/* Heap copy of a blob column into *out and *len (NULL column: *out stays NULL);
 * NB_ENOMEM when the copy cannot be allocated. */
nb_code nb_db_col_blobdup(sqlite3_stmt *st, int i, void **out, size_t *len);

/* NB_EINVAL "<field>: N bytes, limit is M" when s is longer than max-1. */
nb_code nb_db_check_len(nb_err *err, const char *field, const char *s, size_t max);
/* Same for a fixed buffer that might lack its NUL. */
nb_code nb_db_check_buf(nb_err *err, const char *field, const char *buf, size_t size);
/* snprintf into a fixed buffer. */
void nb_db_copy(char *dst, size_t size, const char *src);

/* Bump allocator for the strings and arrays of one returned struct, freed
 * at once by the struct's _free function. */
struct nb_db_arena;
void *nb_db_arena_alloc(struct nb_db_arena **a, size_t size);
char *nb_db_arena_strdup(struct nb_db_arena **a, const char *s);
void nb_db_arena_free(struct nb_db_arena *a);

/* A run just inserted (inside the insert's transaction): a flagged one opens a regression,
 * another closes the open regressions of its series it is back in the band of
 * (nb_db_regress.c). */
struct nb_db_run;
nb_code nb_db_regress_on_run_locked(nb_db *db, const struct nb_db_run *run, int64_t run_id,
                                    nb_err *err);

/* Schema migrations, run by nb_db_open (nb_db_schema.c). */
nb_code nb_db_schema_migrate(nb_db *db, nb_err *err);

#endif
