/* nb_db_open: opening a database (pragmas, the identity check, migrations, the owners' tables)
 * and closing it; the top of db/'s plumbing, over nb_db.c, nb_db_schema.c and nb_db_owners.c. */
#include "nb_db.h"

#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"
#include "nb_db_owners.h"
#include "nb_db_series.h"

/* PRAGMA application_id of npubench databases: "NPBH". Lets open() refuse
 * some other program's SQLite file instead of migrating tables into it. */
#define NB_DB_APP_ID 0x4e504248

static nb_code pragma_int(nb_db *db, const char *sql, int64_t *out, nb_err *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
        return nb_db_sqlerr(db, err, sql);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return nb_db_sqlerr(db, err, sql);
    return NB_OK;
}

/* Refuses files that are SQLite but not ours before anything is written. */
static nb_code check_identity(nb_db *db, nb_err *err)
{
    int64_t app = 0, ntables = 0, has_version = 0;
    nb_code rc = pragma_int(db, "PRAGMA application_id", &app, err);
    if (rc)
        return rc;
    if (app != 0 && app != NB_DB_APP_ID)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: not an npubench database (SQLite application_id 0x%08llx, "
                          "expected 0x%08x)",
                          db->path, (unsigned long long)app, NB_DB_APP_ID);
    rc = pragma_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'", &ntables,
                    err);
    if (rc)
        return rc;
    rc = pragma_int(db,
                    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                    "name = 'schema_version'",
                    &has_version, err);
    if (rc)
        return rc;
    if (ntables > 0 && !has_version)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: not an npubench database (%lld tables, no schema_version)",
                          db->path, (long long)ntables);
    return NB_OK;
}

static nb_code configure(nb_db *db, const nb_db_opts *opts, nb_err *err)
{
    int busy = opts && opts->busy_timeout_ms > 0 ? opts->busy_timeout_ms : 5000;
    sqlite3_busy_timeout(db->h, busy);
    nb_code rc = check_identity(db, err);
    if (rc)
        return rc;
    rc = nb_db_exec(db, "PRAGMA foreign_keys = ON", err);
    if (rc)
        return rc;
    int64_t fk = 0;
    rc = pragma_int(db, "PRAGMA foreign_keys", &fk, err);
    if (rc)
        return rc;
    if (fk != 1)
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: this SQLite build does not enforce foreign keys", db->path);

    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK)
        return nb_db_sqlerr(db, err, "setting journal_mode=WAL");
    char mode[16] = "";
    if (sqlite3_step(st) == SQLITE_ROW)
        nb_db_col_copy(st, 0, mode, sizeof mode);
    sqlite3_finalize(st);
    /* An in-memory database reports "memory"; it has no crash to survive. */
    if (strcmp(mode, "wal") != 0 && strcmp(mode, "memory") != 0)
        return nb_err_set(err, NB_EIO,
                          "%s: cannot switch to WAL journal (got '%s'); is the file on a "
                          "filesystem without shared memory support, or read-only?",
                          db->path, mode[0] ? mode : sqlite3_errmsg(db->h));
    db->sync_full = opts && opts->sync_full;
    rc = nb_db_exec(db,
                    opts && opts->sync_full ? "PRAGMA synchronous = FULL"
                                            : "PRAGMA synchronous = NORMAL",
                    err);
    if (rc)
        return rc;
    /* Up to 64 MiB of page cache (allocated as used): a bulk import or a
     * 1M-run history otherwise spills dirty pages to the WAL again and again.
     * And truncate the WAL back to 64 MiB after checkpoints, so one big
     * transaction does not leave a huge -wal file behind for good. */
    rc = nb_db_exec(db, "PRAGMA cache_size = -65536; PRAGMA journal_size_limit = 67108864",
                    err);
    if (rc)
        return rc;
    rc = nb_db_schema_migrate(db, err);
    /* who owns which job (client identities): the lease order reads it on every database */
    return rc ? rc : nb_db_owner_open(db, err);
}

nb_code nb_db_open(const char *path, const nb_db_opts *opts, nb_db **out, nb_err *err)
{
    *out = NULL;
    if (!path || !*path)
        return nb_err_set(err, NB_EINVAL, "database path is empty");
    nb_db *db = calloc(1, sizeof *db);
    if (!db)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    db->path = strdup(path);
    if (!db->path) {
        free(db);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&db->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    nb_db_set_clock(db, NULL, NULL); /* the real clock */

    int rc = sqlite3_open_v2(path, &db->h,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                             NULL);
    nb_code code;
    if (rc != SQLITE_OK) {
        code = nb_err_set(err, NB_EIO, "%s: cannot open database: %s", path,
                          db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
        nb_db_close(db);
        return code;
    }
    sqlite3_extended_result_codes(db->h, 1);
    if ((rc = nb_db_series_register(db->h)) != SQLITE_OK) {
        code = nb_err_set(err, NB_EIO, "%s: cannot register the series function: %s", path,
                          sqlite3_errstr(rc));
        nb_db_close(db);
        return code;
    }
    code = configure(db, opts, err);
    if (code) {
        nb_db_close(db);
        return code;
    }
    *out = db;
    return NB_OK;
}

void nb_db_close(nb_db *db)
{
    if (!db)
        return;
    if (db->h) {
        if (!sqlite3_get_autocommit(db->h))
            sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
        for (size_t i = 0; i < db->nstmts; i++)
            sqlite3_finalize(db->stmts[i].st);
        /* Keeps query plans good as tables grow; cheap when nothing changed. */
        sqlite3_exec(db->h, "PRAGMA optimize", NULL, NULL, NULL);
        sqlite3_close_v2(db->h);
    }
    free(db->stmts);
    pthread_mutex_destroy(&db->mu);
    free(db->path);
    free(db);
}
