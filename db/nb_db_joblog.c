/* nb_db_joblog: reads a job's stored log lines after a position, so a page that shows the log
 * fetches only what is new (the whole log is nb_db_job_get's). */
#include "nb_db_joblog.h"

#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"

void nb_db_log_lines_free(nb_db_log_line *lines, size_t n)
{
    for (size_t i = 0; lines && i < n; i++)
        free(lines[i].text);
    free(lines);
}

/* Lines of job_id after `after` that sql (parameters job, after, limit) selects. */
static nb_code read_lines(nb_db *db, const char *sql, int64_t job_id, int64_t after, size_t max,
                          nb_db_log_line **lines, size_t *n, int *more, nb_err *err)
{
    *lines = NULL;
    *n = 0;
    *more = 0;
    if (max == 0 || max > NB_DB_JOBLOG_BATCH_MAX)
        return nb_err_set(err, NB_EINVAL, "job log: %zu lines asked, limit is 1..%d", max,
                          NB_DB_JOBLOG_BATCH_MAX);
    nb_db_log_line *out = calloc(max, sizeof *out);
    if (!out)
        return nb_err_set(err, NB_ENOMEM, "job %lld log: out of memory", (long long)job_id);
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    size_t k = 0;
    if (!rc) {
        sqlite3_bind_int64(st, 1, job_id);
        sqlite3_bind_int64(st, 2, after);
        sqlite3_bind_int64(st, 3, (int64_t)max + 1); /* one more tells whether lines remain */
        int s, oom = 0;
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            if (k == max) {
                *more = 1;
                break;
            }
            out[k].seq = sqlite3_column_int64(st, 0);
            out[k].ts_ms = sqlite3_column_int64(st, 1);
            out[k].text = nb_db_col_strdup(st, 2, &oom);
            if (oom)
                break;
            if (!out[k].text && !(out[k].text = calloc(1, 1))) {
                oom = 1;
                break;
            }
            size_t len = strlen(out[k].text);
            if (len && out[k].text[len - 1] == '\n')
                out[k].text[len - 1] = '\0';
            k++;
        }
        if (oom)
            rc = nb_err_set(err, NB_ENOMEM, "job %lld log: out of memory", (long long)job_id);
        else if (s != SQLITE_ROW && s != SQLITE_DONE)
            rc = nb_db_sqlerr(db, err, "reading job log");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    if (rc || !k) {
        nb_db_log_lines_free(out, max); /* calloc'ed: unused slots are NULL */
        return rc;
    }
    *lines = out;
    *n = k;
    return NB_OK;
}

nb_code nb_db_job_log_after(nb_db *db, int64_t job_id, int64_t after, size_t max,
                            nb_db_log_line **lines, size_t *n, int *more, nb_err *err)
{
    static const char sql[] = "SELECT id, ts_ms, text FROM job_logs WHERE job_id = ? AND id > ? "
                              "ORDER BY id LIMIT ?";
    return read_lines(db, sql, job_id, after < 0 ? -1 : after, max, lines, n, more, err);
}

nb_code nb_db_job_log_tail(nb_db *db, int64_t job_id, size_t max, nb_db_log_line **lines,
                           size_t *n, int *earlier, nb_err *err)
{
    /* newest first (the second parameter is unused: id > -1), turned around below */
    static const char sql[] = "SELECT id, ts_ms, text FROM job_logs WHERE job_id = ? AND id > ? "
                              "ORDER BY id DESC LIMIT ?";
    nb_code rc = read_lines(db, sql, job_id, -1, max, lines, n, earlier, err);
    for (size_t i = 0; !rc && i < *n / 2; i++) {
        nb_db_log_line t = (*lines)[i];
        (*lines)[i] = (*lines)[*n - 1 - i];
        (*lines)[*n - 1 - i] = t;
    }
    return rc;
}

nb_code nb_db_job_requeues(nb_db *db, int64_t job_id, size_t max, nb_db_log_line **lines,
                           size_t *n, nb_err *err)
{
    /* the words of nb_db_jobs.c's requeue_locked */
    static const char sql[] = "SELECT id, ts_ms, text FROM job_logs WHERE job_id = ? AND id > ? "
                              "AND (text GLOB '*; retry [0-9]* of [0-9]*' OR "
                              "text GLOB '*; gave up after [0-9]* of [0-9]* attempts*') "
                              "ORDER BY id LIMIT ?";
    int more;
    return read_lines(db, sql, job_id, -1, max, lines, n, &more, err);
}

static void run_ref_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_job_run_ref *r = slot;
    r->run_id = sqlite3_column_int64(st, 0);
    r->job_id = sqlite3_column_int64(st, 1);
    nb_db_col_copy(st, 2, r->kind, sizeof r->kind);
    const char *o = (const char *)sqlite3_column_text(st, 3);
    r->outcome = o && !strcmp(o, "PASS")   ? NB_OUTCOME_PASS
                 : o && !strcmp(o, "FAIL") ? NB_OUTCOME_FAIL
                                           : NB_OUTCOME_ERROR;
    r->regression = sqlite3_column_int(st, 4) != 0;
    nb_db_col_copy(st, 5, r->model, sizeof r->model);
    nb_db_col_copy(st, 6, r->backend, sizeof r->backend);
    nb_db_col_copy(st, 7, r->dtype, sizeof r->dtype);
    nb_db_col_copy(st, 8, r->board, sizeof r->board);
}

nb_code nb_db_job_runs(nb_db *db, int64_t job_id, size_t max, nb_db_job_run_ref **out,
                       size_t *n, nb_err *err)
{
    static const char sql[] =
        "SELECT r.id, r.job_id, r.kind, r.outcome, r.regression, d.model, d.backend, d.dtype, "
        "d.board FROM runs r JOIN deployments d ON d.id = r.deployment_id WHERE r.job_id = ?1 OR "
        "r.job_id IN (SELECT id FROM jobs WHERE parent_id = ?1) ORDER BY r.job_id, r.job_seq, "
        "r.id LIMIT ?2";
    *out = NULL;
    *n = 0;
    if (max == 0 || max > NB_DB_JOBLOG_BATCH_MAX)
        return nb_err_set(err, NB_EINVAL, "job runs: %zu asked, limit is 1..%d", max,
                          NB_DB_JOBLOG_BATCH_MAX);
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    void *arr = NULL;
    if (!rc) {
        sqlite3_bind_int64(st, 1, job_id);
        sqlite3_bind_int64(st, 2, (int64_t)max);
        rc = nb_db_collect(db, st, sizeof **out, run_ref_row, NULL, &arr, n, err, "job runs");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    *out = arr;
    return rc;
}

nb_code nb_db_run_job(nb_db *db, int64_t run_id, int64_t *job_id, nb_err *err)
{
    static const char sql[] = "SELECT COALESCE(job_id, 0) FROM runs WHERE id = ?";
    *job_id = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, run_id);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW)
            *job_id = sqlite3_column_int64(st, 0);
        else if (s == SQLITE_DONE)
            rc = nb_err_set(err, NB_ENOTFOUND, "no run %lld", (long long)run_id);
        else
            rc = nb_db_sqlerr(db, err, "reading a run's job");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}
