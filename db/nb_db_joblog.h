/* nb_db_joblog: a job's log read line by line from a point on (its page polls for the lines
 * after the last one it shows), the stored lines as the coordinator appended them. */
#ifndef NB_DB_JOBLOG_H
#define NB_DB_JOBLOG_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"
#include "nb_db_runs.h"

#define NB_DB_JOBLOG_BATCH_MAX 5000 /* lines per read */

/* One stored line. seq grows with every line appended (to any job): "after seq" is a
 * position a reader can come back with. text has its trailing newline removed. */
typedef struct nb_db_log_line {
    int64_t seq, ts_ms;
    char *text;
} nb_db_log_line;

/* The lines of job_id with seq > after, oldest first, at most max (1..NB_DB_JOBLOG_BATCH_MAX);
 * *more = 1 when lines past those remain. *lines malloc'ed (nb_db_log_lines_free), NULL when
 * *n == 0. A job with no lines (or none left) gives *n = 0; the job's existence is the
 * caller's to check (nb_db_job_peek). */
nb_code nb_db_job_log_after(nb_db *db, int64_t job_id, int64_t after, size_t max,
                            nb_db_log_line **lines, size_t *n, int *more, nb_err *err);
void nb_db_log_lines_free(nb_db_log_line *lines, size_t n);

/* The last max (1..NB_DB_JOBLOG_BATCH_MAX) lines of job_id, oldest first; *earlier = 1 when
 * lines before them exist. As nb_db_job_log_after otherwise. */
nb_code nb_db_job_log_tail(nb_db *db, int64_t job_id, size_t max, nb_db_log_line **lines,
                           size_t *n, int *earlier, nb_err *err);

/* The lines of job_id that record a requeue or the last attempt's failure (nb_db_jobs writes
 * them as "<cause>; retry N of M" and "<cause>; gave up after N of M attempts"), oldest
 * first, at most max (1..NB_DB_JOBLOG_BATCH_MAX). */
nb_code nb_db_job_requeues(nb_db *db, int64_t job_id, size_t max, nb_db_log_line **lines,
                           size_t *n, nb_err *err);

/* A run a job stored (itself, or a child of the group it is). */
typedef struct nb_db_job_run_ref {
    int64_t run_id, job_id;
    char kind[NB_DB_NAME_MAX];
    nb_db_outcome outcome;
    int regression; /* the regression check flagged it */
    char model[NB_DB_NAME_MAX], backend[NB_DB_NAME_MAX], dtype[NB_DB_NAME_MAX],
        board[NB_DB_NAME_MAX]; /* its deployment: where the job ran */
} nb_db_job_run_ref;

/* The runs job_id stored and, for a group, its children stored, by job then sequence, at
 * most max (1..NB_DB_JOBLOG_BATCH_MAX). *out malloc'ed (free()), NULL when *n == 0. */
nb_code nb_db_job_runs(nb_db *db, int64_t job_id, size_t max, nb_db_job_run_ref **out,
                       size_t *n, nb_err *err);

/* The job that stored run_id: *job_id (0 when none, or the job was removed); NB_ENOTFOUND
 * for a run that is not stored. */
nb_code nb_db_run_job(nb_db *db, int64_t run_id, int64_t *job_id, nb_err *err);

#endif
