/* nb_db_jobs: the job queue's state machine in SQL. Every transition is one
 * IMMEDIATE transaction, and lease-holder calls are checked against lease_id. */
#include "nb_db_jobs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "nb_db_int.h"
#include "nb_sha256.h"


static nb_job_state state_from_text(const char *s)
{
    nb_job_state st = NB_JOB_FAILED;
    nb_job_state_parse(s, &st, NULL);
    return st;
}

void nb_db_job_free(nb_db_job *job)
{
    if (!job)
        return;
    free(job->spec);
    free(job->log);
    job->spec = NULL;
    job->log = NULL;
    job->spec_len = 0;
}

void nb_db_job_list_free(nb_db_job *jobs, size_t n)
{
    if (!jobs)
        return;
    for (size_t i = 0; i < n; i++)
        nb_db_job_free(&jobs[i]);
    free(jobs);
}

/* ---- reading ---- */

#define JOB_COLS                                                                             \
    "id, parent_id, request_id, kind, is_group, spec_format, sel_backend, sel_board, "      \
    "sel_board_type, sel_deployment, sel_worker, sel_tags, priority, state, queued_reason, " \
    "error, attempts, max_attempts, lease_id, leased_worker, lease_expiry_ms, created_ms, "  \
    "started_ms, finished_ms, progress_done, progress_total, progress_msg, expires_ms, "     \
    "sel_dtype_id"

static void read_job(sqlite3_stmt *st, nb_db_job *j)
{
    memset(j, 0, sizeof *j);
    int i = 0;
    j->id = sqlite3_column_int64(st, i++);
    j->parent_id = nb_db_col_int(st, i++, 0);
    nb_db_col_copy(st, i++, j->request_id, sizeof j->request_id);
    nb_db_col_copy(st, i++, j->kind, sizeof j->kind);
    j->is_group = sqlite3_column_int(st, i++);
    char fmt[8];
    nb_db_col_copy(st, i++, fmt, sizeof fmt);
    j->spec_format = strcmp(fmt, "proto") == 0 ? NB_SPEC_PROTO : NB_SPEC_JSON;
    nb_db_col_copy(st, i++, j->sel_backend, sizeof j->sel_backend);
    nb_db_col_copy(st, i++, j->sel_board, sizeof j->sel_board);
    nb_db_col_copy(st, i++, j->sel_board_type, sizeof j->sel_board_type);
    nb_db_col_copy(st, i++, j->sel_deployment, sizeof j->sel_deployment);
    nb_db_col_copy(st, i++, j->sel_worker, sizeof j->sel_worker);
    nb_db_col_copy(st, i++, j->sel_tags, sizeof j->sel_tags);
    j->priority = sqlite3_column_int(st, i++);
    char state[16];
    nb_db_col_copy(st, i++, state, sizeof state);
    j->state = state_from_text(state);
    nb_db_col_copy(st, i++, j->queued_reason, sizeof j->queued_reason);
    nb_db_col_copy(st, i++, j->error, sizeof j->error);
    j->attempts = sqlite3_column_int(st, i++);
    j->max_attempts = sqlite3_column_int(st, i++);
    nb_db_col_copy(st, i++, j->lease_id, sizeof j->lease_id);
    nb_db_col_copy(st, i++, j->leased_worker, sizeof j->leased_worker);
    j->lease_expiry_ms = nb_db_col_int(st, i++, 0);
    j->created_ms = sqlite3_column_int64(st, i++);
    j->started_ms = nb_db_col_int(st, i++, 0);
    j->finished_ms = nb_db_col_int(st, i++, 0);
    j->progress_done = sqlite3_column_int64(st, i++);
    j->progress_total = sqlite3_column_int64(st, i++);
    nb_db_col_copy(st, i++, j->progress_msg, sizeof j->progress_msg);
    j->expires_ms = nb_db_col_int(st, i++, 0);
    j->sel_dtype_id = sqlite3_column_int(st, i++);
}

static void job_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    read_job(st, slot);
}

/* The job row without spec and log. */
static nb_code get_light(nb_db *db, int64_t id, nb_db_job *j, nb_err *err)
{
    static const char sql[] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        read_job(st, j);
    else if (s == SQLITE_DONE)
        rc = nb_err_set(err, NB_ENOTFOUND, "no job with id %lld", (long long)id);
    else
        rc = nb_db_sqlerr(db, err, "reading job");
    nb_db_done(st);
    return rc;
}

static void format_ts(char *buf, size_t size, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char s[32];
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03dZ", s, (int)(ms % 1000));
}

static nb_code load_spec(nb_db *db, nb_db_job *j, nb_err *err)
{
    static const char sql[] = "SELECT spec FROM jobs WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, j->id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        void *spec = NULL;
        if (nb_db_col_blobdup(st, 0, &spec, &j->spec_len)) {
            nb_db_done(st);
            return nb_err_set(err, NB_ENOMEM, "job %lld: out of memory reading spec",
                              (long long)j->id);
        }
        j->spec = spec;
    }
    nb_db_done(st);
    return NB_OK;
}

/* The job's log as one text, a "<timestamp> " before each line. */
static nb_code load_log(nb_db *db, nb_db_job *j, nb_err *err)
{
    static const char sql[] = "SELECT ts_ms, text FROM job_logs WHERE job_id = ? ORDER BY id";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, j->id);
    size_t len = 0, cap = 256;
    char *log = malloc(cap);
    if (!log) {
        nb_db_done(st);
        return nb_err_set(err, NB_ENOMEM, "job %lld: out of memory reading log",
                          (long long)j->id);
    }
    log[0] = '\0';
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        char ts[40];
        format_ts(ts, sizeof ts, sqlite3_column_int64(st, 0));
        const char *text = (const char *)sqlite3_column_text(st, 1);
        size_t tn = (size_t)sqlite3_column_bytes(st, 1);
        size_t need = len + strlen(ts) + 1 + tn + 1;
        if (need >= cap) {
            while (cap <= need)
                cap *= 2;
            char *p = realloc(log, cap);
            if (!p) {
                free(log);
                nb_db_done(st);
                return nb_err_set(err, NB_ENOMEM, "job %lld: out of memory reading log",
                                  (long long)j->id);
            }
            log = p;
        }
        len += (size_t)sprintf(log + len, "%s ", ts);
        if (tn)
            memcpy(log + len, text, tn);
        len += tn;
        log[len] = '\0';
    }
    nb_db_done(st);
    if (s != SQLITE_DONE) {
        free(log);
        return nb_db_sqlerr(db, err, "reading job log");
    }
    j->log = log;
    return NB_OK;
}

static nb_code load_payload(nb_db *db, nb_db_job *j, nb_err *err)
{
    nb_code rc = load_spec(db, j, err);
    return rc ? rc : load_log(db, j, err);
}

static nb_code get_full(nb_db *db, int64_t id, nb_db_job *out, nb_err *err)
{
    nb_code rc = get_light(db, id, out, err);
    if (!rc)
        rc = load_payload(db, out, err);
    if (rc)
        nb_db_job_free(out);
    return rc;
}

nb_code nb_db_job_get(nb_db *db, int64_t id, nb_db_job *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    nb_db_lock(db);
    nb_code rc = get_full(db, id, out, err);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_job_peek(nb_db *db, int64_t id, nb_db_job *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    nb_db_lock(db);
    nb_code rc = get_light(db, id, out, err);
    nb_db_unlock(db);
    return rc;
}

static nb_code find_request_locked(nb_db *db, const char *request_id, int64_t *id, nb_err *err)
{
    static const char sql[] = "SELECT id FROM jobs WHERE request_id = ?";
    return nb_db_find_id(db, sql, request_id, id, err, "job", "request id");
}

nb_code nb_db_job_find_request(nb_db *db, const char *request_id, int64_t *id, nb_err *err)
{
    if (!request_id || !*request_id)
        return nb_err_set(err, NB_EINVAL, "request id is empty");
    nb_db_lock(db);
    nb_code rc = find_request_locked(db, request_id, id, err);
    nb_db_unlock(db);
    return rc;
}

/* ---- log ---- */

/* The first row of a trimmed log says what went: "[log trimmed: N earlier lines (B bytes)
 * dropped, the newest kept]". Its numbers grow with each trim, read back from its text. */
#define TRIM_MARK "[log trimmed: "

/* Makes room for `need` more bytes under the cap by dropping the job's oldest lines, down to
 * half the cap so a chatty job trims now and then, not on every line. The oldest dropped row
 * becomes the marker (it keeps its position, so readers by position still see it first).
 * *have is the job's log size before and after. */
static nb_code trim_log_locked(nb_db *db, int64_t id, int64_t need, int64_t *have, nb_err *err)
{
    static const char rows_sql[] =
        "SELECT id, length(CAST(text AS BLOB)), substr(text, 1, 80) FROM job_logs "
        "WHERE job_id = ? ORDER BY id";
    static const char del_sql[] = "DELETE FROM job_logs WHERE job_id = ? AND id > ? AND id <= ?";
    static const char mark_sql[] = "UPDATE job_logs SET text = ? WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, rows_sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    int64_t mark_id = 0, mark_bytes = 0, last = 0, dropped_bytes = 0, left = *have;
    int had_mark = 0;
    long long lines = 0, bytes = 0; /* as the marker already counts them */
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW && left + need > (int64_t)NB_DB_JOB_LOG_MAX / 2) {
        int64_t rid = sqlite3_column_int64(st, 0), len = sqlite3_column_int64(st, 1);
        const char *t = (const char *)sqlite3_column_text(st, 2);
        if (!mark_id) { /* the first row: the marker of an earlier trim, or the one to be */
            mark_id = rid;
            mark_bytes = len;
            if (t && sscanf(t, TRIM_MARK "%lld earlier lines (%lld bytes)", &lines, &bytes) == 2) {
                had_mark = 1;
                left -= len;
                continue;
            }
        }
        lines++;
        bytes += len;
        dropped_bytes += len;
        left -= len;
        last = rid;
    }
    nb_db_done(st);
    if (s != SQLITE_ROW && s != SQLITE_DONE)
        return nb_db_sqlerr(db, err, "reading job log for trimming");
    if (!last)
        return NB_OK; /* nothing but the marker: the new line alone is over the cap */
    char text[160];
    int tn = snprintf(text, sizeof text, TRIM_MARK "%lld earlier lines (%lld bytes) dropped, "
                      "the newest kept]\n", lines, bytes);
    rc = nb_db_stmt(db, del_sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, mark_id);
        sqlite3_bind_int64(st, 3, last);
        rc = nb_db_step_done(db, st, err, "trimming job log");
    }
    if (!rc)
        rc = nb_db_stmt(db, mark_sql, &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, text);
        sqlite3_bind_int64(st, 2, mark_id);
        rc = nb_db_step_done(db, st, err, "marking a trimmed job log");
    }
    /* the marker row's old text goes: an older marker, or a line counted as dropped */
    if (!rc)
        *have = *have - dropped_bytes - (had_mark ? mark_bytes : 0) + tn;
    return rc;
}

static nb_code append_log_locked(nb_db *db, int64_t id, const char *text, nb_err *err)
{
    static const char bytes_sql[] = "SELECT log_bytes FROM jobs WHERE id = ?";
    static const char ins_sql[] = "INSERT INTO job_logs (job_id, ts_ms, text) VALUES (?, ?, ?)";
    static const char upd_sql[] = "UPDATE jobs SET log_bytes = ? WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, bytes_sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    int s = sqlite3_step(st);
    int64_t have = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    nb_db_done(st);
    if (s == SQLITE_DONE)
        return nb_err_set(err, NB_ENOTFOUND, "no job with id %lld", (long long)id);
    if (s != SQLITE_ROW)
        return nb_db_sqlerr(db, err, "reading job log size");
    size_t n = strlen(text);
    /* one line longer than a quarter of the cap keeps its end (where a result line is) */
    size_t keep = NB_DB_JOB_LOG_MAX / 4;
    if (n > keep) {
        text += n - keep;
        n = keep;
    }
    int add_nl = n == 0 || text[n - 1] != '\n';
    if (have + (int64_t)n + add_nl > (int64_t)NB_DB_JOB_LOG_MAX) {
        rc = trim_log_locked(db, id, (int64_t)n + add_nl, &have, err);
        if (rc)
            return rc;
    }
    char *line = malloc(n + 2);
    if (!line)
        return nb_err_set(err, NB_ENOMEM, "job %lld: out of memory appending log",
                          (long long)id);
    memcpy(line, text, n);
    line[n] = '\n';
    line[n + add_nl] = '\0';
    int64_t total = have + (int64_t)n + add_nl;
    rc = nb_db_stmt(db, ins_sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, nb_db_now_ms(db));
        nb_db_bind_str(st, 3, line);
        rc = nb_db_step_done(db, st, err, "appending job log");
    }
    free(line);
    if (!rc)
        rc = nb_db_stmt(db, upd_sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, total);
        sqlite3_bind_int64(st, 2, id);
        rc = nb_db_step_done(db, st, err, "updating job log size");
    }
    return rc;
}

static nb_code logf_locked(nb_db *db, int64_t id, nb_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static nb_code logf_locked(nb_db *db, int64_t id, nb_err *err, const char *fmt, ...)
{
    char buf[NB_DB_MSG_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return append_log_locked(db, id, buf, err);
}

nb_code nb_db_job_append_log(nb_db *db, int64_t id, const char *text, nb_err *err)
{
    if (!text)
        return nb_err_set(err, NB_EINVAL, "job %lld: log text is NULL", (long long)id);
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc, rc = append_log_locked(db, id, text, err));
    return rc;
}

/* ---- enqueue ---- */

static nb_code validate_new(const nb_db_job_new *j, nb_err *err)
{
    if (!j->kind || !*j->kind)
        return nb_err_set(err, NB_EINVAL, "job.kind: required (verify, bench, ...)");
    nb_code rc;
    if ((rc = nb_db_check_len(err, "job.kind", j->kind, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "job.request_id", j->request_id, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "job.sel.backend", j->sel.backend, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "job.sel.board", j->sel.board, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "job.sel.board_type", j->sel.board_type, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "job.sel.deployment", j->sel.deployment, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "job.sel.worker", j->sel.worker, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "job.sel.tags", j->sel.tags, NB_DB_LIST_MAX)))
        return rc;
    if (j->spec_len > NB_DB_SPEC_MAX)
        return nb_err_set(err, NB_EINVAL, "job.spec: %zu bytes, limit is %u", j->spec_len,
                          NB_DB_SPEC_MAX);
    if (j->spec_len && !j->spec)
        return nb_err_set(err, NB_EINVAL, "job.spec: NULL with length %zu", j->spec_len);
    if ((unsigned)j->spec_format > NB_SPEC_PROTO)
        return nb_err_set(err, NB_EINVAL, "job.spec_format: invalid value %d",
                          (int)j->spec_format);
    if (j->max_attempts < 0 || j->max_attempts > 1000)
        return nb_err_set(err, NB_EINVAL, "job.max_attempts: %d not in 0..1000",
                          j->max_attempts);
    if (j->parent_id < 0)
        return nb_err_set(err, NB_EINVAL, "job.parent_id: %lld is invalid",
                          (long long)j->parent_id);
    return NB_OK;
}

/* An existing job under the same request id must be the same request. */
static nb_code check_same_request(nb_db *db, int64_t id, const nb_db_job_new *j, nb_err *err)
{
    static const char sql[] = "SELECT kind, spec FROM jobs WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *kind = (const char *)sqlite3_column_text(st, 0);
        const void *spec = sqlite3_column_blob(st, 1);
        size_t n = (size_t)sqlite3_column_bytes(st, 1);
        if (!kind || strcmp(kind, j->kind) != 0 || n != j->spec_len ||
            (n && memcmp(spec, j->spec, n) != 0))
            rc = nb_err_set(err, NB_EMISMATCH,
                            "request id '%s' was already used for job %lld with a different "
                            "%s; use a new request id for a new request",
                            j->request_id, (long long)id,
                            kind && strcmp(kind, j->kind) != 0 ? "kind" : "spec");
    } else {
        rc = nb_db_sqlerr(db, err, "reading job for request id");
    }
    nb_db_done(st);
    return rc;
}

static const char enq_sql[] =
    "INSERT INTO jobs (parent_id, request_id, kind, is_group, spec, spec_format, sel_backend, "
    "sel_board, sel_board_type, sel_deployment, sel_worker, sel_tags, priority, state, "
    "attempts, max_attempts, created_ms, started_ms, expires_ms, sel_dtype_id) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?,?,?)";

/* A child joins only a group job that is still open. */
static nb_code check_parent(nb_db *db, int64_t parent_id, nb_err *err)
{
    nb_db_job parent;
    nb_code rc = get_light(db, parent_id, &parent, err);
    if (rc)
        return nb_err_prefix(err, "job.parent_id: ");
    if (!parent.is_group)
        return nb_err_set(err, NB_EINVAL, "job.parent_id: job %lld is not a group job",
                          (long long)parent_id);
    if (nb_job_state_terminal(parent.state))
        return nb_err_set(err, NB_EINVAL, "job.parent_id: group job %lld is already %s",
                          (long long)parent_id, nb_job_state_name(parent.state));
    return NB_OK;
}

/* The new row (a group starts running, a job queued); a child counts in its group's total. */
static nb_code insert_job(nb_db *db, const nb_db_job_new *j, int has_req, int64_t *id,
                          nb_err *err)
{
    int64_t now = nb_db_now_ms(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, enq_sql, &st, err);
    if (rc)
        return rc;
    int i = 1;
    nb_db_bind_opt_int(st, i++, j->parent_id, j->parent_id > 0);
    nb_db_bind_opt_str(st, i++, has_req ? j->request_id : NULL);
    nb_db_bind_str(st, i++, j->kind);
    sqlite3_bind_int(st, i++, j->is_group ? 1 : 0);
    if (j->spec)
        sqlite3_bind_blob(st, i++, j->spec, (int)j->spec_len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i++);
    nb_db_bind_str(st, i++, j->spec_format == NB_SPEC_PROTO ? "proto" : "json");
    nb_db_bind_str(st, i++, j->sel.backend);
    nb_db_bind_str(st, i++, j->sel.board);
    nb_db_bind_str(st, i++, j->sel.board_type);
    nb_db_bind_str(st, i++, j->sel.deployment);
    nb_db_bind_str(st, i++, j->sel.worker);
    nb_db_bind_str(st, i++, j->sel.tags);
    sqlite3_bind_int(st, i++, j->priority);
    nb_db_bind_str(st, i++, j->is_group ? "running" : "queued");
    sqlite3_bind_int(st, i++, j->max_attempts ? j->max_attempts : NB_DB_DEFAULT_MAX_ATTEMPTS);
    sqlite3_bind_int64(st, i++, now);
    nb_db_bind_opt_int(st, i++, now, j->is_group);
    /* from the stored creation time, so expires - created is exactly what was asked */
    nb_db_bind_opt_int(st, i++, now + j->expire_after_ms, j->expire_after_ms > 0);
    sqlite3_bind_int(st, i++, j->sel.dtype_id);
    if ((rc = nb_db_step_done(db, st, err, "enqueueing job")))
        return rc;
    *id = sqlite3_last_insert_rowid(db->h);
    if (j->parent_id) {
        static const char upd[] =
            "UPDATE jobs SET progress_total = progress_total + 1 WHERE id = ?";
        if ((rc = nb_db_stmt(db, upd, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, j->parent_id);
        if ((rc = nb_db_step_done(db, st, err, "counting group children")))
            return rc;
    }
    return NB_OK;
}

static nb_code enqueue_locked(nb_db *db, const nb_db_job_new *j, int64_t *id, int *existed,
                              nb_err *err)
{
    int has_req = j->request_id && *j->request_id;
    if (has_req) {
        int64_t old = 0;
        nb_err tmp;
        nb_code f = find_request_locked(db, j->request_id, &old, &tmp);
        if (f == NB_OK) {
            *id = old;
            *existed = 1;
            return check_same_request(db, old, j, err);
        }
        if (f != NB_ENOTFOUND)
            return nb_err_set(err, f, "%s", tmp.msg);
    }
    nb_code rc = j->parent_id ? check_parent(db, j->parent_id, err) : NB_OK;
    if (!rc)
        rc = insert_job(db, j, has_req, id, err);
    if (rc)
        return rc;
    return logf_locked(db, *id, err, "enqueued %s%s (priority %d)", j->is_group ? "group " : "",
                       j->kind, j->priority);
}

nb_code nb_db_job_enqueue(nb_db *db, const nb_db_job_new *job, int64_t *id, int *existed,
                          nb_err *err)
{
    int ex = 0;
    nb_code rc = validate_new(job, err);
    if (rc)
        return rc;
    NB_DB_WITH_TX(db, err, rc, rc = enqueue_locked(db, job, id, &ex, err));
    if (existed)
        *existed = ex;
    return rc;
}

/* ---- matching and leasing ---- */

static int row_has_tag(const void *user, const char *tag)
{
    return nb_db_list_has(user, tag);
}

int nb_db_job_matches(const nb_db_job *job, const nb_db_worker *w, char *why, size_t why_size)
{
    char dummy[1];
    if (!why) {
        why = dummy;
        why_size = sizeof dummy;
    }
    const nb_job_place p = {job->sel_worker, job->sel_board, job->sel_board_type, job->sel_tags};
    const nb_job_host h = {w->id, w->board_name, w->board_type, row_has_tag, w->tags};
    if (!nb_job_place_fits(&p, &h, why, why_size))
        return 0;
    /* The row's coarse lists; the advertised deployments are the scheduler's to match. */
    if (job->sel_backend[0] && !nb_db_list_has(w->backends, job->sel_backend)) {
        snprintf(why, why_size, "needs backend '%s'; worker '%s' has '%s'", job->sel_backend,
                 w->id, w->backends);
        return 0;
    }
    if (job->sel_deployment[0] && !nb_db_list_has(w->deployments, job->sel_deployment) &&
        !nb_db_list_has(w->deployments, "*")) {
        snprintf(why, why_size, "needs deployment '%s'; worker '%s' serves '%s'",
                 job->sel_deployment, w->id, w->deployments);
        return 0;
    }
    if (why_size)
        why[0] = '\0';
    return 1;
}

/* 128 random bits as hex; the time/pid/counter mix keeps ids distinct
 * even if getrandom() is unavailable. */
static void new_lease_id(char out[NB_DB_LEASE_ID_MAX], int64_t job_id)
{
    static unsigned long counter;
    struct {
        unsigned char rnd[16];
        struct timespec ts;
        pid_t pid;
        unsigned long n;
        int64_t job;
    } seed;
    memset(&seed, 0, sizeof seed);
    if (getrandom(seed.rnd, sizeof seed.rnd, GRND_NONBLOCK) != (ssize_t)sizeof seed.rnd)
        memset(seed.rnd, 0, sizeof seed.rnd);
    clock_gettime(CLOCK_REALTIME, &seed.ts);
    seed.pid = getpid();
    seed.n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    seed.job = job_id;
    char hex[65];
    nb_sha256_mem_hex(&seed, sizeof seed, hex);
    memcpy(out, hex, 32);
    out[32] = '\0';
}

static nb_code lease_locked(nb_db *db, const nb_db_worker *w, nb_db_job_pred pred, void *ud,
                            int64_t lease_ms, nb_db_job *out, int *found, nb_err *err)
{
    /* Exact-match selectors are filtered here, list selectors (backends,
     * deployments, tags) by nb_db_job_matches on the rows that remain. */
    /* Fair share between client identities: within a priority, the owner served a lease
     * longest ago goes first (a group's children are its owner's; jobs of no named client
     * are one owner ''), FIFO within an owner: one client's 10,000 jobs do not starve
     * another's. With no named clients this is FIFO. */
    static const char cand_sql[] =
        "SELECT " JOB_COLS " FROM (SELECT jobs.*, COALESCE(t.served, 0) AS nb_served FROM jobs "
        "LEFT JOIN job_owners o ON o.job_id = COALESCE(NULLIF(jobs.parent_id, 0), jobs.id) "
        "LEFT JOIN owner_turns t ON t.owner = COALESCE(o.owner, '') "
        "WHERE jobs.state = 'queued' AND jobs.is_group = 0 "
        "AND jobs.sel_worker IN ('', ?1) AND jobs.sel_board IN ('', ?2) "
        "AND jobs.sel_board_type IN ('', ?3)) "
        "ORDER BY priority DESC, nb_served, created_ms, id";
    static const char turn_sql[] =
        "INSERT OR REPLACE INTO owner_turns (owner, served) SELECT COALESCE((SELECT owner FROM "
        "job_owners WHERE job_id = COALESCE(NULLIF(j.parent_id, 0), j.id)), ''), (SELECT "
        "COALESCE(MAX(served), 0) + 1 FROM owner_turns) FROM jobs j WHERE j.id = ?";
    static const char upd_sql[] =
        "UPDATE jobs SET state = 'leased', lease_id = ?, leased_worker = ?, "
        "lease_expiry_ms = ?, queued_reason = '' WHERE id = ? AND state = 'queued'";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, cand_sql, &st, err);
    if (rc)
        return rc;
    nb_db_bind_str(st, 1, w->id);
    nb_db_bind_str(st, 2, w->board_name);
    nb_db_bind_str(st, 3, w->board_type);
    int64_t chosen = 0;
    int attempts = 0, max_attempts = 0;
    int s;
    nb_db_job cand;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        read_job(st, &cand);
        if (nb_db_job_matches(&cand, w, NULL, 0) && (!pred || pred(&cand, ud))) {
            chosen = cand.id;
            attempts = cand.attempts;
            max_attempts = cand.max_attempts;
            break;
        }
    }
    if (s != SQLITE_ROW && s != SQLITE_DONE)
        rc = nb_db_sqlerr(db, err, "scanning the queue");
    nb_db_done(st);
    if (rc || !chosen)
        return rc;

    int64_t expiry = nb_db_now_ms(db) + lease_ms;
    char lease[NB_DB_LEASE_ID_MAX];
    new_lease_id(lease, chosen);
    if ((rc = nb_db_stmt(db, upd_sql, &st, err)))
        return rc;
    sqlite3_bind_text(st, 1, lease, -1, SQLITE_STATIC);
    nb_db_bind_str(st, 2, w->id);
    sqlite3_bind_int64(st, 3, expiry);
    sqlite3_bind_int64(st, 4, chosen);
    if ((rc = nb_db_step_done(db, st, err, "leasing job")))
        return rc;
    if (sqlite3_changes(db->h) != 1)
        return nb_err_set(err, NB_EINTERNAL, "job %lld left the queue during leasing",
                          (long long)chosen);
    if ((rc = nb_db_stmt(db, turn_sql, &st, err)))
        return rc;
    sqlite3_bind_int64(st, 1, chosen);
    if ((rc = nb_db_step_done(db, st, err, "recording the owner's turn")))
        return rc;
    if ((rc = logf_locked(db, chosen, err, "leased to worker %s (attempt %d of %d, lease %.8s)",
                          w->id, attempts + 1, max_attempts, lease)))
        return rc;
    if ((rc = get_full(db, chosen, out, err)))
        return rc;
    *found = 1;
    return NB_OK;
}

nb_code nb_db_job_lease(nb_db *db, const nb_db_worker *w, nb_db_job_pred pred, void *ud,
                        int64_t lease_ms, nb_db_job *out, int *found, nb_err *err)
{
    memset(out, 0, sizeof *out);
    *found = 0;
    nb_code rc = nb_db_check_buf(err, "worker.id", w->id, sizeof w->id);
    if (rc)
        return rc;
    if (!w->id[0])
        return nb_err_set(err, NB_EINVAL, "lease: worker.id is empty");
    if (lease_ms <= 0 || lease_ms > 7LL * 24 * 3600 * 1000)
        return nb_err_set(err, NB_EINVAL, "lease: duration %lld ms not in 1 ms..7 days",
                          (long long)lease_ms);
    if (w->state != NB_WORKER_ALIVE)
        return NB_OK;
    NB_DB_WITH_TX(db, err, rc, rc = lease_locked(db, w, pred, ud, lease_ms, out, found, err));
    if (rc) {
        nb_db_job_free(out);
        *found = 0;
    }
    return rc;
}

/* ---- lease holder calls ---- */

static nb_code check_lease(nb_db *db, int64_t id, const char *lease_id, nb_db_job *j,
                           nb_err *err)
{
    nb_code rc = get_light(db, id, j, err);
    if (rc)
        return rc;
    if (j->state == NB_JOB_CANCELLED)
        return nb_err_set(err, NB_ECANCELED, "job %lld was cancelled%s%s", (long long)id,
                          j->error[0] ? ": " : "", j->error);
    if (!lease_id)
        return nb_job_state_terminal(j->state)
                   ? nb_err_set(err, NB_EMISMATCH, "job %lld already finished (%s)",
                                (long long)id, nb_job_state_name(j->state))
                   : NB_OK;
    if ((j->state != NB_JOB_LEASED && j->state != NB_JOB_RUNNING) ||
        strcmp(j->lease_id, lease_id) != 0)
        return nb_err_set(err, NB_EMISMATCH,
                          "job %lld: lease %.8s is not current (job is %s%s%s); stop working "
                          "on it",
                          (long long)id, lease_id, nb_job_state_name(j->state),
                          j->leased_worker[0] && j->state != NB_JOB_QUEUED ? ", held by " : "",
                          j->leased_worker[0] && j->state != NB_JOB_QUEUED ? j->leased_worker
                                                                           : "");
    return NB_OK;
}

static nb_code renew_locked(nb_db *db, int64_t id, const char *lease_id, int64_t lease_ms,
                            int64_t *expiry, nb_err *err)
{
    static const char sql[] = "UPDATE jobs SET lease_expiry_ms = ? WHERE id = ?";
    nb_db_job j;
    nb_code rc = check_lease(db, id, lease_id, &j, err);
    if (rc)
        return rc;
    int64_t e = nb_db_now_ms(db) + lease_ms;
    sqlite3_stmt *st;
    if ((rc = nb_db_stmt(db, sql, &st, err)))
        return rc;
    sqlite3_bind_int64(st, 1, e);
    sqlite3_bind_int64(st, 2, id);
    rc = nb_db_step_done(db, st, err, "renewing lease");
    if (!rc && expiry)
        *expiry = e;
    return rc;
}

nb_code nb_db_job_renew(nb_db *db, int64_t id, const char *lease_id, int64_t lease_ms,
                        int64_t *expiry_ms, nb_err *err)
{
    if (!lease_id)
        return nb_err_set(err, NB_EINVAL, "renew job %lld: lease id is NULL", (long long)id);
    if (lease_ms <= 0 || lease_ms > 7LL * 24 * 3600 * 1000)
        return nb_err_set(err, NB_EINVAL, "renew job %lld: duration %lld ms not in 1 ms..7 days",
                          (long long)id, (long long)lease_ms);
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc, rc = renew_locked(db, id, lease_id, lease_ms, expiry_ms, err));
    return rc;
}

static const char to_running_sql[] =
    "UPDATE jobs SET state = CASE state WHEN 'leased' THEN 'running' ELSE state END, "
    "started_ms = COALESCE(started_ms, ?) WHERE id = ?";

static nb_code start_locked(nb_db *db, int64_t id, const char *lease_id, nb_err *err)
{
    nb_db_job j;
    nb_code rc = check_lease(db, id, lease_id, &j, err);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    if ((rc = nb_db_stmt(db, to_running_sql, &st, err)))
        return rc;
    sqlite3_bind_int64(st, 1, nb_db_now_ms(db));
    sqlite3_bind_int64(st, 2, id);
    return nb_db_step_done(db, st, err, "starting job");
}

nb_code nb_db_job_start(nb_db *db, int64_t id, const char *lease_id, nb_err *err)
{
    if (!lease_id)
        return nb_err_set(err, NB_EINVAL, "start job %lld: lease id is NULL", (long long)id);
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc, rc = start_locked(db, id, lease_id, err));
    return rc;
}

static nb_code progress_locked(nb_db *db, int64_t id, const char *lease_id, int64_t done,
                               int64_t total, const char *msg, nb_err *err)
{
    static const char sql[] = "UPDATE jobs SET progress_done = ?, progress_total = ?, "
                              "progress_msg = ? WHERE id = ?";
    nb_db_job j;
    nb_code rc = check_lease(db, id, lease_id, &j, err);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    if (j.state == NB_JOB_LEASED) {
        if ((rc = nb_db_stmt(db, to_running_sql, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, nb_db_now_ms(db));
        sqlite3_bind_int64(st, 2, id);
        if ((rc = nb_db_step_done(db, st, err, "starting job")))
            return rc;
    }
    if ((rc = nb_db_stmt(db, sql, &st, err)))
        return rc;
    sqlite3_bind_int64(st, 1, done);
    sqlite3_bind_int64(st, 2, total);
    nb_db_bind_str(st, 3, msg);
    sqlite3_bind_int64(st, 4, id);
    return nb_db_step_done(db, st, err, "setting job progress");
}

nb_code nb_db_job_set_progress(nb_db *db, int64_t id, const char *lease_id, int64_t done,
                               int64_t total, const char *msg, nb_err *err)
{
    if (done < 0 || total < 0)
        return nb_err_set(err, NB_EINVAL, "job %lld progress: negative count (%lld/%lld)",
                          (long long)id, (long long)done, (long long)total);
    nb_code rc = nb_db_check_len(err, "job progress message", msg, NB_DB_MSG_MAX);
    if (rc)
        return rc;
    NB_DB_WITH_TX(db, err, rc, rc = progress_locked(db, id, lease_id, done, total, msg, err));
    return rc;
}

/* ---- finishing ---- */

static nb_code finish_group_if_done(nb_db *db, int64_t group_id, int depth, nb_err *err);

/* A child reached a terminal state: refresh its group's progress and
 * finish the group when nothing is left running. */
static nb_code child_finished(nb_db *db, const nb_db_job *child, int depth, nb_err *err)
{
    if (!child->parent_id)
        return NB_OK;
    return finish_group_if_done(db, child->parent_id, depth, err);
}

/* A group's children by state: all, terminal, failed, cancelled. */
typedef struct child_counts {
    int64_t total, term, failed, cancelled;
} child_counts;

/* Counts the group's children and records the progress they make. */
static nb_code count_children(nb_db *db, int64_t group_id, child_counts *c, nb_err *err)
{
    static const char count_sql[] =
        "SELECT count(*), "
        "sum(state IN ('done','failed','cancelled')), sum(state = 'failed'), "
        "sum(state = 'cancelled') FROM jobs WHERE parent_id = ?";
    static const char prog_sql[] = "UPDATE jobs SET progress_done = ?, progress_total = ? "
                                   "WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, count_sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, group_id);
    memset(c, 0, sizeof *c);
    if (sqlite3_step(st) == SQLITE_ROW) {
        c->total = sqlite3_column_int64(st, 0);
        c->term = sqlite3_column_int64(st, 1);
        c->failed = sqlite3_column_int64(st, 2);
        c->cancelled = sqlite3_column_int64(st, 3);
    } else {
        rc = nb_db_sqlerr(db, err, "counting group children");
    }
    nb_db_done(st);
    if (rc)
        return rc;
    if ((rc = nb_db_stmt(db, prog_sql, &st, err)))
        return rc;
    sqlite3_bind_int64(st, 1, c->term);
    sqlite3_bind_int64(st, 2, c->total);
    sqlite3_bind_int64(st, 3, group_id);
    return nb_db_step_done(db, st, err, "updating group progress");
}

/* Ends the group: failed if a child failed, else cancelled if one was, else done. */
static nb_code finish_group(nb_db *db, int64_t group_id, const child_counts *c, nb_err *err)
{
    static const char fin_sql[] = "UPDATE jobs SET state = ?, error = ?, finished_ms = ? "
                                  "WHERE id = ? AND state NOT IN ('done','failed','cancelled')";
    char why[NB_DB_MSG_MAX] = "";
    const char *state = "done";
    if (c->failed) {
        state = "failed";
        snprintf(why, sizeof why, "%lld of %lld children failed", (long long)c->failed,
                 (long long)c->total);
    } else if (c->cancelled) {
        state = "cancelled";
        snprintf(why, sizeof why, "%lld of %lld children cancelled", (long long)c->cancelled,
                 (long long)c->total);
    }
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, fin_sql, &st, err);
    if (rc)
        return rc;
    nb_db_bind_str(st, 1, state);
    nb_db_bind_str(st, 2, why);
    sqlite3_bind_int64(st, 3, nb_db_now_ms(db));
    sqlite3_bind_int64(st, 4, group_id);
    if ((rc = nb_db_step_done(db, st, err, "finishing group job")))
        return rc;
    return logf_locked(db, group_id, err, "group %s%s%s", state, why[0] ? ": " : "", why);
}

static nb_code finish_group_if_done(nb_db *db, int64_t group_id, int depth, nb_err *err)
{
    if (depth > 16)
        return nb_err_set(err, NB_EINTERNAL, "job groups nested deeper than 16 (job %lld)",
                          (long long)group_id);
    child_counts c;
    nb_code rc = count_children(db, group_id, &c, err);
    if (rc || c.term < c.total)
        return rc;
    nb_db_job g;
    if ((rc = get_light(db, group_id, &g, err)))
        return rc;
    if (nb_job_state_terminal(g.state))
        return NB_OK;
    if ((rc = finish_group(db, group_id, &c, err)))
        return rc;
    return child_finished(db, &g, depth + 1, err);
}

static nb_code stored_run_ids(nb_db *db, int64_t job_id, int64_t *ids, size_t n, nb_err *err)
{
    static const char sql[] = "SELECT id FROM runs WHERE job_id = ? ORDER BY job_seq";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, job_id);
    size_t k = 0;
    while (k < n && sqlite3_step(st) == SQLITE_ROW)
        ids[k++] = sqlite3_column_int64(st, 0);
    while (k < n)
        ids[k++] = 0;
    nb_db_done(st);
    return NB_OK;
}

static nb_code complete_locked(nb_db *db, int64_t id, const char *lease_id,
                               const nb_db_job_result *res, int64_t *run_ids, int *duplicate,
                               nb_err *err)
{
    static const char fin_sql[] =
        "UPDATE jobs SET state = ?, error = ?, finished_ms = ?, lease_expiry_ms = NULL, "
        "started_ms = COALESCE(started_ms, ?) WHERE id = ?";
    nb_db_job j;
    nb_code rc = get_light(db, id, &j, err);
    if (rc)
        return rc;
    /* The same lease completing again: its acknowledgement was lost. */
    if ((j.state == NB_JOB_DONE || j.state == NB_JOB_FAILED) &&
        strcmp(j.lease_id, lease_id) == 0) {
        *duplicate = 1;
        return run_ids ? stored_run_ids(db, id, run_ids, res->n_runs, err) : NB_OK;
    }
    if ((rc = check_lease(db, id, lease_id, &j, err)))
        return rc;
    if (j.is_group)
        return nb_err_set(err, NB_EINVAL, "job %lld is a group; it finishes with its children",
                          (long long)id);
    for (size_t i = 0; i < res->n_runs; i++) {
        nb_db_run r = res->runs[i];
        r.job_id = id;
        r.job_seq = (int)i;
        r.lease_id = lease_id;
        int64_t rid = 0;
        if ((rc = nb_db_run_insert(db, &r, &rid, err)))
            return nb_err_prefix(err, "job %lld run %zu: ", (long long)id, i);
        if (run_ids)
            run_ids[i] = rid;
    }
    int64_t now = nb_db_now_ms(db);
    sqlite3_stmt *st;
    if ((rc = nb_db_stmt(db, fin_sql, &st, err)))
        return rc;
    nb_db_bind_str(st, 1, nb_job_state_name(res->state));
    nb_db_bind_str(st, 2, res->state == NB_JOB_FAILED ? res->error : "");
    sqlite3_bind_int64(st, 3, now);
    sqlite3_bind_int64(st, 4, now);
    sqlite3_bind_int64(st, 5, id);
    if ((rc = nb_db_step_done(db, st, err, "finishing job")))
        return rc;
    if ((rc = logf_locked(db, id, err, "%s by worker %s (%zu run%s)%s%s",
                          nb_job_state_name(res->state), j.leased_worker, res->n_runs,
                          res->n_runs == 1 ? "" : "s",
                          res->state == NB_JOB_FAILED && res->error ? ": " : "",
                          res->state == NB_JOB_FAILED && res->error ? res->error : "")))
        return rc;
    return child_finished(db, &j, 0, err);
}

nb_code nb_db_job_complete(nb_db *db, int64_t id, const char *lease_id,
                           const nb_db_job_result *res, int64_t *run_ids, int *duplicate,
                           nb_err *err)
{
    int dup = 0;
    if (duplicate)
        *duplicate = 0;
    if (!lease_id || !*lease_id)
        return nb_err_set(err, NB_EINVAL, "complete job %lld: lease id is empty",
                          (long long)id);
    if (res->state != NB_JOB_DONE && res->state != NB_JOB_FAILED)
        return nb_err_set(err, NB_EINVAL, "complete job %lld: state must be done or failed, "
                          "got %s", (long long)id, nb_job_state_name(res->state));
    if (res->n_runs && !res->runs)
        return nb_err_set(err, NB_EINVAL, "complete job %lld: %zu runs with a NULL array",
                          (long long)id, res->n_runs);
    if (res->n_runs > 100000)
        return nb_err_set(err, NB_EINVAL, "complete job %lld: %zu runs, limit is 100000",
                          (long long)id, res->n_runs);
    nb_code rc = nb_db_check_len(err, "job error", res->error, NB_DB_MSG_MAX);
    if (rc)
        return rc;
    NB_DB_WITH_TX(db, err, rc, rc = complete_locked(db, id, lease_id, res, run_ids, &dup, err));
    if (duplicate)
        *duplicate = dup;
    return rc;
}

static void id_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    *(int64_t *)slot = sqlite3_column_int64(st, 0);
}

/* Reads the ids a bound statement selects and resets it, so that callers
 * can update the rows it read without stepping it meanwhile. */
static nb_code collect_ids(nb_db *db, sqlite3_stmt *st, int64_t **ids, size_t *n, nb_err *err,
                           const char *what)
{
    void *arr = NULL;
    nb_code rc = nb_db_collect(db, st, sizeof **ids, id_row, NULL, &arr, n, err, what);
    nb_db_done(st);
    *ids = arr;
    return rc;
}

/* The lease of j is gone (expired, released, worker lost): back to the
 * queue, or failed after max_attempts. */
static nb_code requeue_locked(nb_db *db, const nb_db_job *j, const char *why, int *failed,
                              nb_err *err)
{
    static const char fail_sql[] =
        "UPDATE jobs SET state = 'failed', attempts = ?, error = ?, finished_ms = ?, "
        "lease_id = NULL, lease_expiry_ms = NULL WHERE id = ?";
    static const char queue_sql[] =
        "UPDATE jobs SET state = 'queued', attempts = ?, queued_reason = ?, lease_id = NULL, "
        "leased_worker = NULL, lease_expiry_ms = NULL, progress_done = 0, progress_msg = '' "
        "WHERE id = ?";
    int attempts = j->attempts + 1;
    char msg[NB_DB_MSG_MAX];
    sqlite3_stmt *st;
    nb_code rc;
    *failed = attempts >= j->max_attempts;
    if (*failed) {
        snprintf(msg, sizeof msg, "%s; gave up after %d of %d attempts", why, attempts,
                 j->max_attempts);
        if ((rc = nb_db_stmt(db, fail_sql, &st, err)))
            return rc;
        sqlite3_bind_int(st, 1, attempts);
        nb_db_bind_str(st, 2, msg);
        sqlite3_bind_int64(st, 3, nb_db_now_ms(db));
        sqlite3_bind_int64(st, 4, j->id);
    } else {
        snprintf(msg, sizeof msg, "%s; retry %d of %d", why, attempts + 1, j->max_attempts);
        if ((rc = nb_db_stmt(db, queue_sql, &st, err)))
            return rc;
        sqlite3_bind_int(st, 1, attempts);
        nb_db_bind_str(st, 2, msg);
        sqlite3_bind_int64(st, 3, j->id);
    }
    if ((rc = nb_db_step_done(db, st, err, "requeueing job")))
        return rc;
    if ((rc = logf_locked(db, j->id, err, "%s", msg)))
        return rc;
    return *failed ? child_finished(db, j, 0, err) : NB_OK;
}

static nb_code release_locked(nb_db *db, int64_t id, const char *lease_id, const char *reason,
                             nb_err *err)
{
    nb_db_job j;
    nb_code rc = check_lease(db, id, lease_id, &j, err);
    if (rc)
        return rc;
    char why[NB_DB_MSG_MAX];
    snprintf(why, sizeof why, "released by worker %s%s%.300s", j.leased_worker,
             reason && *reason ? ": " : "", reason ? reason : "");
    int failed;
    return requeue_locked(db, &j, why, &failed, err);
}

nb_code nb_db_job_release(nb_db *db, int64_t id, const char *lease_id, const char *reason,
                          nb_err *err)
{
    if (!lease_id)
        return nb_err_set(err, NB_EINVAL, "release job %lld: lease id is NULL", (long long)id);
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc, rc = release_locked(db, id, lease_id, reason, err));
    return rc;
}

/* Requeues the leased/running jobs that sql (one int64 or text parameter)
 * selects; ids are collected first so no statement is stepped while the
 * rows it reads are being updated. */
static nb_code requeue_where(nb_db *db, const char *sql, int64_t iarg, const char *sarg,
                             const char *reason, size_t *n_requeued, size_t *n_failed,
                             nb_err *err)
{
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    if (sarg)
        nb_db_bind_str(st, 1, sarg);
    else
        sqlite3_bind_int64(st, 1, iarg);
    int64_t *ids = NULL;
    size_t n = 0;
    rc = collect_ids(db, st, &ids, &n, err, "finding jobs to requeue");
    size_t nq = 0, nf = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        nb_db_job j;
        if ((rc = get_light(db, ids[i], &j, err)))
            break;
        char why[NB_DB_MSG_MAX];
        if (reason)
            snprintf(why, sizeof why, "worker %s lost: %.300s", j.leased_worker, reason);
        else
            snprintf(why, sizeof why, "lease on worker %s expired", j.leased_worker);
        int failed = 0;
        rc = requeue_locked(db, &j, why, &failed, err);
        if (failed)
            nf++;
        else
            nq++;
    }
    free(ids);
    if (!rc) {
        if (n_requeued)
            *n_requeued = nq;
        if (n_failed)
            *n_failed = nf;
    }
    return rc;
}

nb_code nb_db_jobs_requeue_expired(nb_db *db, size_t *n_requeued, size_t *n_failed,
                                   nb_err *err)
{
    static const char sql[] = "SELECT id FROM jobs WHERE state IN ('leased','running') AND "
                              "lease_expiry_ms < ? ORDER BY id";
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc,
            rc = requeue_where(db, sql, nb_db_now_ms(db), NULL, NULL, n_requeued, n_failed,
                               err));
    return rc;
}

nb_code nb_db_jobs_release_worker(nb_db *db, const char *worker_id, const char *reason,
                                  size_t *n_requeued, size_t *n_failed, nb_err *err)
{
    static const char sql[] = "SELECT id FROM jobs WHERE state IN ('leased','running') AND "
                              "leased_worker = ? ORDER BY id";
    if (!worker_id || !*worker_id)
        return nb_err_set(err, NB_EINVAL, "release worker: worker id is empty");
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc,
            rc = requeue_where(db, sql, 0, worker_id, reason ? reason : "gone", n_requeued,
                               n_failed, err));
    return rc;
}

nb_code nb_db_jobs_held(nb_db *db, const char *worker_id, int64_t *n, int64_t *job_id,
                        nb_err *err)
{
    static const char sql[] = "SELECT count(*), COALESCE(max(id), 0) FROM jobs WHERE state IN "
                              "('leased','running') AND leased_worker = ?";
    *n = *job_id = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, worker_id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            *n = sqlite3_column_int64(st, 0);
            *job_id = sqlite3_column_int64(st, 1);
        } else
            rc = nb_db_sqlerr(db, err, "counting leases");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

static nb_code cancel_locked(nb_db *db, int64_t id, const char *reason, int depth, nb_err *err)
{
    static const char sql[] = "UPDATE jobs SET state = 'cancelled', error = ?, finished_ms = ?, "
                              "lease_expiry_ms = NULL WHERE id = ?";
    static const char kids_sql[] = "SELECT id FROM jobs WHERE parent_id = ? AND state NOT IN "
                                   "('done','failed','cancelled') ORDER BY id";
    if (depth > 16)
        return nb_err_set(err, NB_EINTERNAL, "job groups nested deeper than 16 (job %lld)",
                          (long long)id);
    nb_db_job j;
    nb_code rc = get_light(db, id, &j, err);
    if (rc)
        return rc;
    if (j.state == NB_JOB_CANCELLED)
        return NB_OK;
    if (nb_job_state_terminal(j.state))
        return nb_err_set(err, NB_EMISMATCH, "job %lld already finished (%s)", (long long)id,
                          nb_job_state_name(j.state));
    sqlite3_stmt *st;
    if ((rc = nb_db_stmt(db, sql, &st, err)))
        return rc;
    nb_db_bind_str(st, 1, reason && *reason ? reason : "cancelled");
    sqlite3_bind_int64(st, 2, nb_db_now_ms(db));
    sqlite3_bind_int64(st, 3, id);
    if ((rc = nb_db_step_done(db, st, err, "cancelling job")))
        return rc;
    if ((rc = logf_locked(db, id, err, "cancelled (was %s)%s%.300s",
                          nb_job_state_name(j.state), reason && *reason ? ": " : "",
                          reason ? reason : "")))
        return rc;
    if (j.is_group) {
        /* Collect first: cancelling a child updates rows this query reads. */
        if ((rc = nb_db_stmt(db, kids_sql, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, id);
        int64_t *kids = NULL;
        size_t n = 0;
        rc = collect_ids(db, st, &kids, &n, err, "cancelling group");
        for (size_t i = 0; i < n && !rc; i++)
            rc = cancel_locked(db, kids[i], "group cancelled", depth + 1, err);
        free(kids);
        if (rc)
            return rc;
    }
    return child_finished(db, &j, 0, err);
}

nb_code nb_db_job_cancel(nb_db *db, int64_t id, const char *reason, nb_err *err)
{
    nb_code rc = nb_db_check_len(err, "cancel reason", reason, NB_DB_MSG_MAX);
    if (rc)
        return rc;
    NB_DB_WITH_TX(db, err, rc, rc = cancel_locked(db, id, reason, 0, err));
    return rc;
}

/* Top-level jobs past their queue expiry with nothing of them running: a plain job still
 * queued, or a group none of whose children holds a lease. */
static const char expired_sql[] =
    "SELECT id FROM jobs j WHERE parent_id IS NULL AND expires_ms IS NOT NULL AND "
    "expires_ms <= ?1 AND (state = 'queued' OR (is_group = 1 AND state = 'running' AND "
    "NOT EXISTS (SELECT 1 FROM jobs k WHERE k.parent_id = j.id AND "
    "k.state IN ('leased','running')))) ORDER BY id LIMIT 1000";

static nb_code expire_locked(nb_db *db, int64_t now, int64_t **ids, size_t *n, nb_err *err)
{
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, expired_sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, now);
    if ((rc = collect_ids(db, st, ids, n, err, "finding expired jobs")))
        return rc;
    for (size_t i = 0; i < *n && !rc; i++) {
        nb_db_job j;
        if ((rc = get_light(db, (*ids)[i], &j, err)))
            break;
        char why[NB_DB_MSG_MAX];
        snprintf(why, sizeof why, "expired: still queued %.1f s after submission (its queue "
                 "expiry)", (double)(j.expires_ms - j.created_ms) / 1000.0);
        rc = cancel_locked(db, j.id, why, 0, err);
    }
    return rc;
}

/* Whether any job is due (no transaction: the sweeper asks often, and mostly none is). */
static int any_expired(nb_db *db, int64_t now)
{
    nb_err e;
    sqlite3_stmt *st;
    int due = 0;
    nb_db_lock(db);
    if (nb_db_stmt(db, expired_sql, &st, &e) == NB_OK) {
        sqlite3_bind_int64(st, 1, now);
        due = sqlite3_step(st) == SQLITE_ROW;
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return due;
}

nb_code nb_db_jobs_expire(nb_db *db, int64_t now_ms, int64_t **ids, size_t *n, nb_err *err)
{
    *ids = NULL;
    *n = 0;
    if (!any_expired(db, now_ms))
        return NB_OK;
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc, rc = expire_locked(db, now_ms, ids, n, err));
    if (rc) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

nb_code nb_db_job_set_queued_reason(nb_db *db, int64_t id, const char *reason, nb_err *err)
{
    static const char sql[] = "UPDATE jobs SET queued_reason = ? WHERE id = ? AND "
                              "state = 'queued'";
    static const char exists_sql[] = "SELECT 1 FROM jobs WHERE id = ?";
    nb_code rc = nb_db_check_len(err, "queued reason", reason, NB_DB_MSG_MAX);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, reason);
        sqlite3_bind_int64(st, 2, id);
        rc = nb_db_step_done(db, st, err, "setting queued reason");
    }
    if (!rc && sqlite3_changes(db->h) == 0 && !(rc = nb_db_stmt(db, exists_sql, &st, err))) {
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) != SQLITE_ROW)
            rc = nb_err_set(err, NB_ENOTFOUND, "no job with id %lld", (long long)id);
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

/* Binds in the order nb_db_job_list adds the filters. */
static void bind_job_filter(sqlite3_stmt *st, const void *ud)
{
    const nb_db_job_filter *f = ud;
    int i = 1;
    if (f->kind && *f->kind)
        nb_db_bind_str(st, i++, f->kind);
    if (f->parent_id > 0)
        sqlite3_bind_int64(st, i++, f->parent_id);
    if (f->worker && *f->worker)
        nb_db_bind_str(st, i++, f->worker);
    if (f->since_ms > 0)
        sqlite3_bind_int64(st, i++, f->since_ms);
    sqlite3_bind_int64(st, i, (int64_t)(f->limit ? f->limit : 100));
}

nb_code nb_db_job_list(nb_db *db, const nb_db_job_filter *f, nb_db_job **jobs, size_t *n,
                       nb_err *err)
{
    *jobs = NULL;
    *n = 0;
    if (f->limit > NB_DB_HISTORY_MAX)
        return nb_err_set(err, NB_EINVAL, "job list: limit %zu exceeds %d", f->limit,
                          NB_DB_HISTORY_MAX);
    char sql[1024];
    size_t len = (size_t)snprintf(sql, sizeof sql, "SELECT " JOB_COLS " FROM jobs WHERE 1");
    if (f->states) {
        len += (size_t)snprintf(sql + len, sizeof sql - len, " AND state IN (");
        int first = 1;
        for (int s = 0; s <= NB_JOB_CANCELLED; s++) {
            if (f->states & NB_JOB_STATE_BIT(s)) {
                len += (size_t)snprintf(sql + len, sizeof sql - len, "%s'%s'", first ? "" : ",",
                                        nb_job_state_name((nb_job_state)s));
                first = 0;
            }
        }
        if (first)
            len += (size_t)snprintf(sql + len, sizeof sql - len, "NULL");
        len += (size_t)snprintf(sql + len, sizeof sql - len, ")");
    }
    if (f->kind && *f->kind)
        len += (size_t)snprintf(sql + len, sizeof sql - len, " AND kind = ?");
    if (f->parent_id > 0)
        len += (size_t)snprintf(sql + len, sizeof sql - len, " AND parent_id = ?");
    else if (f->parent_id < 0)
        len += (size_t)snprintf(sql + len, sizeof sql - len, " AND parent_id IS NULL");
    if (f->worker && *f->worker)
        len += (size_t)snprintf(sql + len, sizeof sql - len, " AND leased_worker = ?");
    if (f->since_ms > 0)
        len += (size_t)snprintf(sql + len, sizeof sql - len, " AND created_ms >= ?");
    snprintf(sql + len, sizeof sql - len, " ORDER BY created_ms %s, id %s LIMIT ?",
             f->oldest_first ? "ASC" : "DESC", f->oldest_first ? "ASC" : "DESC");
    void *arr = NULL;
    nb_code rc = nb_db_select_all(db, sql, bind_job_filter, f, sizeof **jobs, job_row, &arr, n,
                                  err, "job list");
    *jobs = arr;
    return rc;
}
