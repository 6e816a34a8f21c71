/* nb_db_results: job_results rows — one packed JobResult per finished job, written inside the
 * completion's transaction, so an acknowledged result is never missing its artifact. */
#include "nb_db_results.h"

#include "nb_db_int.h"

nb_code nb_db_result_put(nb_db *db, int64_t job_id, const void *blob, size_t len, nb_err *err)
{
    static const char sql[] =
        "INSERT INTO job_results (job_id, result, stored_ms) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (job_id) DO UPDATE SET result = excluded.result, "
        "stored_ms = excluded.stored_ms";
    if (len > NB_DB_RESULT_MAX)
        return nb_err_set(err, NB_EINVAL, "job %lld result: %zu bytes, the limit is %zu",
                          (long long)job_id, len, NB_DB_RESULT_MAX);
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc, {
        sqlite3_stmt *st;
        rc = nb_db_stmt(db, sql, &st, err);
        if (!rc) {
            sqlite3_bind_int64(st, 1, job_id);
            sqlite3_bind_blob(st, 2, len ? blob : "", (int)len, SQLITE_STATIC);
            sqlite3_bind_int64(st, 3, nb_db_now_ms(db));
            rc = nb_db_step_done(db, st, err, "storing job result");
        }
    });
    return rc;
}

nb_code nb_db_result_get(nb_db *db, int64_t job_id, void **blob, size_t *len, nb_err *err)
{
    static const char sql[] = "SELECT result FROM job_results WHERE job_id = ?1";
    *blob = NULL;
    *len = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, job_id);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) {
            if (nb_db_col_blobdup(st, 0, blob, len))
                rc = nb_err_set(err, NB_ENOMEM, "job %lld result: out of memory",
                                (long long)job_id);
        } else if (s == SQLITE_DONE) {
            rc = nb_err_set(err, NB_ENOTFOUND, "job %lld: no stored result", (long long)job_id);
        } else {
            rc = nb_db_sqlerr(db, err, "reading job result");
        }
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_results_prune(nb_db *db, int64_t before_ms, size_t *n, nb_err *err)
{
    static const char sql[] =
        "DELETE FROM job_results WHERE job_id IN (SELECT id FROM jobs WHERE "
        "finished_ms IS NOT NULL AND finished_ms < ?1 AND state IN ('done','failed',"
        "'cancelled'))";
    nb_code rc;
    size_t gone = 0;
    NB_DB_WITH_TX(db, err, rc, {
        sqlite3_stmt *st;
        rc = nb_db_stmt(db, sql, &st, err);
        if (!rc) {
            sqlite3_bind_int64(st, 1, before_ms);
            rc = nb_db_step_done(db, st, err, "pruning job results");
            gone = (size_t)sqlite3_changes(db->h);
        }
    });
    if (n)
        *n = gone;
    return rc;
}
