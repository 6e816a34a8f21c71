/* nb_db: the plumbing every db/ source uses (locking, cached statements, transactions, bind and
 * column helpers, the arena) and the calls on an open handle; nb_db_open.c opens and closes it. */
#include "nb_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"
#include "nb_time.h"

void nb_db_lock(nb_db *db) { pthread_mutex_lock(&db->mu); }
void nb_db_unlock(nb_db *db) { pthread_mutex_unlock(&db->mu); }

nb_code nb_db_sqlerr(nb_db *db, nb_err *err, const char *what)
{
    int rc = sqlite3_extended_errcode(db->h);
    nb_code code;
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: code = NB_EUNAVAIL; break;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM: code = NB_EIO; break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: code = NB_EDATALOSS; break;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE: code = NB_EINVAL; break;
    case SQLITE_NOMEM: code = NB_ENOMEM; break;
    default: code = NB_EINTERNAL; break;
    }
    return nb_err_set(err, code, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
}

nb_code nb_db_stmt(nb_db *db, const char *sql, sqlite3_stmt **out, nb_err *err)
{
    *out = NULL;
    for (size_t i = 0; i < db->nstmts; i++) {
        if (db->stmts[i].sql == sql) {
            sqlite3_stmt *st = db->stmts[i].st;
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            *out = st;
            return NB_OK;
        }
    }
    if (db->nstmts == db->capstmts) {
        size_t cap = db->capstmts ? db->capstmts * 2 : 32;
        nb_db_stmt_slot *s = realloc(db->stmts, cap * sizeof *s);
        if (!s)
            return nb_err_set(err, NB_ENOMEM, "%s: out of memory caching statements",
                              db->path);
        db->stmts = s;
        db->capstmts = cap;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
        return nb_db_sqlerr(db, err, "preparing statement");
    db->stmts[db->nstmts].sql = sql;
    db->stmts[db->nstmts].st = st;
    db->nstmts++;
    *out = st;
    return NB_OK;
}

void nb_db_done(sqlite3_stmt *st)
{
    if (st)
        sqlite3_reset(st);
}

nb_code nb_db_exec(nb_db *db, const char *sql, nb_err *err)
{
    if (sqlite3_exec(db->h, sql, NULL, NULL, NULL) != SQLITE_OK)
        return nb_db_sqlerr(db, err, "executing SQL");
    return NB_OK;
}

/* Transaction control runs through cached statements: a bulk insert opens
 * and releases a savepoint per row, and re-parsing that SQL would dominate. */
static const char sql_begin[] = "BEGIN IMMEDIATE";
static const char sql_commit[] = "COMMIT";
static const char sql_rollback[] = "ROLLBACK";
static const char sql_savepoint[] = "SAVEPOINT nb_tx";
static const char sql_release[] = "RELEASE nb_tx";
static const char sql_rollback_to[] = "ROLLBACK TO nb_tx";

static int run_cached(nb_db *db, const char *sql)
{
    sqlite3_stmt *st;
    if (nb_db_stmt(db, sql, &st, NULL) != NB_OK)
        return sqlite3_exec(db->h, sql, NULL, NULL, NULL);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

nb_code nb_db_tx_begin(nb_db *db, nb_db_tx *tx, nb_err *err)
{
    tx->outer = sqlite3_get_autocommit(db->h);
    if (run_cached(db, tx->outer ? sql_begin : sql_savepoint) != SQLITE_OK)
        return nb_db_sqlerr(db, err, "starting a transaction");
    return NB_OK;
}

nb_code nb_db_tx_commit(nb_db *db, nb_db_tx *tx, nb_err *err)
{
    if (run_cached(db, tx->outer ? sql_commit : sql_release) != SQLITE_OK) {
        nb_code rc = nb_db_sqlerr(db, err, "committing");
        nb_db_tx_rollback(db, tx);
        return rc;
    }
    return NB_OK;
}

void nb_db_tx_rollback(nb_db *db, nb_db_tx *tx)
{
    if (tx->outer) {
        if (!sqlite3_get_autocommit(db->h))
            run_cached(db, sql_rollback);
    } else {
        run_cached(db, sql_rollback_to);
        run_cached(db, sql_release);
    }
}

nb_code nb_db_step_done(nb_db *db, sqlite3_stmt *st, nb_err *err, const char *what)
{
    int rc = sqlite3_step(st);
    nb_code code = NB_OK;
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        code = nb_db_sqlerr(db, err, what);
    sqlite3_reset(st);
    return code;
}

void nb_db_bind_str(sqlite3_stmt *st, int i, const char *s)
{
    sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_STATIC);
}

void nb_db_bind_opt_str(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

void nb_db_bind_opt_double(sqlite3_stmt *st, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

void nb_db_bind_opt_int(sqlite3_stmt *st, int i, int64_t v, int present)
{
    if (present)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

void nb_db_col_copy(sqlite3_stmt *st, int i, char *buf, size_t size)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    size_t n = t ? (size_t)sqlite3_column_bytes(st, i) : 0;
    if (!size)
        return;
    if (n > size - 1)
        n = size - 1;
    if (n)
        memcpy(buf, t, n);
    buf[n] = '\0';
}

double nb_db_col_double(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return NAN;
    return sqlite3_column_double(st, i);
}

int64_t nb_db_col_int(sqlite3_stmt *st, int i, int64_t dflt)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return dflt;
    return sqlite3_column_int64(st, i);
}

/* Text column copies differ only in where the bytes go: the heap or an arena. */
static char *col_dup(sqlite3_stmt *st, int i, void *(*alloc)(void *ctx, size_t size), void *ctx,
                     int *oom)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return NULL;
    const unsigned char *t = sqlite3_column_text(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    char *s = alloc(ctx, n + 1);
    if (!s) {
        *oom = 1;
        return NULL;
    }
    if (n)
        memcpy(s, t, n);
    s[n] = '\0';
    return s;
}

static void *heap_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void *arena_alloc(void *ctx, size_t size) { return nb_db_arena_alloc(ctx, size); }

char *nb_db_col_strdup(sqlite3_stmt *st, int i, int *oom)
{
    return col_dup(st, i, heap_alloc, NULL, oom);
}

const char *nb_db_col_arena_dup(struct nb_db_arena **a, sqlite3_stmt *st, int i, int *oom)
{
    return col_dup(st, i, arena_alloc, a, oom);
}

nb_code nb_db_col_blobdup(sqlite3_stmt *st, int i, void **out, size_t *len)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return NB_OK;
    const void *b = sqlite3_column_blob(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    void *p = malloc(n ? n : 1);
    if (!p)
        return NB_ENOMEM;
    if (n)
        memcpy(p, b, n);
    *out = p;
    *len = n;
    return NB_OK;
}

nb_code nb_db_collect(nb_db *db, sqlite3_stmt *st, size_t elem, nb_db_row_fn row, void *ud,
                      void **out, size_t *n, nb_err *err, const char *what)
{
    char *arr = NULL;
    size_t cnt = 0, cap = 0;
    nb_code rc = NB_OK;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char *p = nc > SIZE_MAX / elem ? NULL : realloc(arr, nc * elem);
            if (!p) {
                rc = nb_err_set(err, NB_ENOMEM, "%s: out of memory", what);
                break;
            }
            arr = p;
            cap = nc;
        }
        void *slot = arr + cnt++ * elem;
        memset(slot, 0, elem);
        row(st, slot, ud);
    }
    if (!rc && s != SQLITE_DONE)
        rc = nb_db_sqlerr(db, err, what);
    if (rc) {
        free(arr);
        return rc;
    }
    *out = arr;
    *n = cnt;
    return NB_OK;
}

nb_code nb_db_select_all(nb_db *db, const char *sql, nb_db_bind_fn bind, const void *bind_ud,
                         size_t elem, nb_db_row_fn row, void **out, size_t *n, nb_err *err,
                         const char *what)
{
    char msg[96];
    nb_code rc = NB_OK;
    sqlite3_stmt *st = NULL;
    nb_db_lock(db);
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(msg, sizeof msg, "preparing %s", what);
        rc = nb_db_sqlerr(db, err, msg);
    } else {
        bind(st, bind_ud);
        snprintf(msg, sizeof msg, "reading %s", what);
        rc = nb_db_collect(db, st, elem, row, NULL, out, n, err, msg);
    }
    sqlite3_finalize(st);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_find_id(nb_db *db, const char *sql, const char *key, int64_t *id, nb_err *err,
                      const char *noun, const char *key_name)
{
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    nb_db_bind_str(st, 1, key);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *id = sqlite3_column_int64(st, 0);
    else if (s == SQLITE_DONE)
        rc = nb_err_set(err, NB_ENOTFOUND, "no %s with %s '%s'", noun, key_name, key);
    else {
        char what[96];
        snprintf(what, sizeof what, "finding %s by %s", noun, key_name);
        rc = nb_db_sqlerr(db, err, what);
    }
    nb_db_done(st);
    return rc;
}

nb_code nb_db_check_len(nb_err *err, const char *field, const char *s, size_t max)
{
    if (!s)
        return NB_OK;
    size_t n = strnlen(s, max);
    if (n >= max)
        return nb_err_set(err, NB_EINVAL, "%s: %zu+ bytes, limit is %zu", field, n, max - 1);
    return NB_OK;
}

nb_code nb_db_check_buf(nb_err *err, const char *field, const char *buf, size_t size)
{
    if (!memchr(buf, '\0', size))
        return nb_err_set(err, NB_EINVAL, "%s: not NUL-terminated within %zu bytes", field,
                          size);
    return NB_OK;
}

void nb_db_copy(char *dst, size_t size, const char *src)
{
    if (size)
        snprintf(dst, size, "%s", src ? src : "");
}

/* ---- arena ---- */

struct nb_db_arena {
    struct nb_db_arena *next;
    size_t used, cap;
    max_align_t data[]; /* cap bytes */
};

void *nb_db_arena_alloc(struct nb_db_arena **a, size_t size)
{
    const size_t align = sizeof(max_align_t);
    if (size > SIZE_MAX / 2)
        return NULL;
    size = (size + align - 1) / align * align;
    if (!size)
        size = align;
    if (!*a || (*a)->cap - (*a)->used < size) {
        size_t cap = size > 4096 ? size : 4096;
        struct nb_db_arena *n = malloc(sizeof *n + cap);
        if (!n)
            return NULL;
        n->next = *a;
        n->used = 0;
        n->cap = cap;
        *a = n;
    }
    void *p = (char *)(*a)->data + (*a)->used;
    (*a)->used += size;
    return p;
}

char *nb_db_arena_strdup(struct nb_db_arena **a, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *d = nb_db_arena_alloc(a, n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

void nb_db_arena_free(struct nb_db_arena *a)
{
    while (a) {
        struct nb_db_arena *n = a->next;
        free(a);
        a = n;
    }
}

/* ---- an open handle: its clock and path, integrity, clearing, the caller's transaction ---- */

static int64_t real_clock(void *ud)
{
    (void)ud;
    return nb_wall_ms();
}

void nb_db_set_clock(nb_db *db, nb_db_clock_fn fn, void *ud)
{
    nb_db_lock(db);
    db->clock = fn ? fn : real_clock;
    db->clock_ud = fn ? ud : NULL;
    nb_db_unlock(db);
}

int64_t nb_db_now_ms(nb_db *db) { return db->clock(db->clock_ud); }

const char *nb_db_path(const nb_db *db) { return db->path; }

nb_code nb_db_check(nb_db *db, nb_err *err)
{
    nb_db_lock(db);
    sqlite3_stmt *st = NULL;
    nb_code rc = NB_OK;
    if (sqlite3_prepare_v2(db->h, "PRAGMA quick_check(20)", -1, &st, NULL) != SQLITE_OK) {
        rc = nb_db_sqlerr(db, err, "integrity check");
    } else {
        char first[256] = "";
        int n = 0, s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            char line[256];
            nb_db_col_copy(st, 0, line, sizeof line);
            if (!strcmp(line, "ok"))
                continue;
            if (!n++)
                snprintf(first, sizeof first, "%s", line);
        }
        if (s != SQLITE_DONE) /* too damaged to walk: SQLITE_CORRUPT, DATA_LOSS */
            rc = nb_db_sqlerr(db, err, "integrity check failed");
        else if (n)
            rc = nb_err_set(err, NB_EDATALOSS,
                            "%s: integrity check failed (%d problem%s%s), first: %s; restore "
                            "a backup or recover with `sqlite3 %s .recover`",
                            db->path, n, n == 1 ? "" : "s", n >= 20 ? " or more" : "", first,
                            db->path);
    }
    sqlite3_finalize(st);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_clear(nb_db *db, nb_err *err)
{
    nb_db_lock(db);
    /* the table list first (a statement reading sqlite_schema must end before DELETEs) */
    char *names = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&names, &len);
    sqlite3_stmt *st = NULL;
    nb_code rc = NB_OK;
    if (!f || sqlite3_prepare_v2(db->h,
                                 "SELECT name FROM sqlite_schema WHERE type = 'table' AND name "
                                 "NOT LIKE 'sqlite_%' AND name <> 'schema_version'",
                                 -1, &st, NULL) != SQLITE_OK)
        rc = f ? nb_db_sqlerr(db, err, "listing tables")
               : nb_err_set(err, NB_ENOMEM, "%s: out of memory", db->path);
    while (!rc && sqlite3_step(st) == SQLITE_ROW)
        fprintf(f, "DELETE FROM \"%s\";", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (f)
        fclose(f);
    if (!rc)
        rc = nb_db_exec(db, "PRAGMA foreign_keys = OFF", err);
    if (!rc) {
        nb_code r2 = nb_db_exec(db, names ? names : "", err);
        if (!r2) {
            sqlite3_stmt *q = NULL;
            if (sqlite3_prepare_v2(db->h, "DELETE FROM sqlite_sequence", -1, &q, NULL) ==
                SQLITE_OK)
                sqlite3_step(q); /* absent when no table uses AUTOINCREMENT */
            sqlite3_finalize(q);
        }
        nb_err ignored;
        nb_db_exec(db, "PRAGMA foreign_keys = ON", &ignored);
        rc = r2;
    }
    free(names);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_begin(nb_db *db, nb_err *err)
{
    nb_db_lock(db);
    if (db->user_tx) {
        nb_db_unlock(db);
        return nb_err_set(err, NB_EINVAL, "%s: a transaction is already open on this handle",
                          db->path);
    }
    if (sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        nb_code rc = nb_db_sqlerr(db, err, "starting a transaction");
        nb_db_unlock(db);
        return rc;
    }
    db->user_tx = 1; /* the lock stays held until commit/rollback */
    return NB_OK;
}

nb_code nb_db_commit(nb_db *db, nb_err *err)
{
    nb_db_lock(db);
    if (!db->user_tx) {
        nb_db_unlock(db);
        return nb_err_set(err, NB_EINVAL, "%s: commit without nb_db_begin", db->path);
    }
    nb_code rc = NB_OK;
    if (sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = nb_db_sqlerr(db, err, "committing");
        if (!sqlite3_get_autocommit(db->h))
            sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    }
    db->user_tx = 0;
    nb_db_unlock(db); /* this call's lock */
    nb_db_unlock(db); /* the one nb_db_begin kept */
    return rc;
}

void nb_db_rollback(nb_db *db)
{
    nb_db_lock(db);
    if (!db->user_tx) {
        nb_db_unlock(db);
        return;
    }
    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    db->user_tx = 0;
    nb_db_unlock(db);
    nb_db_unlock(db);
}
