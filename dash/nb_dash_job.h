/* nb_dash_job: one job's page (what it runs, where it stands, its outcome, attempts, runs and
 * log, reloading itself while the job runs) and its log's lines after a point as JSON. */
#ifndef NB_DASH_JOB_H
#define NB_DASH_JOB_H

#include <stdint.h>
#include <stdio.h>

#include "nb_dash.h"
#include "nb_db_jobs.h"

/* Log lines a page shows at first and a poll returns at most. */
#define NB_DASH_JOB_LOG_LINES 2000
/* Seconds between the reloads of an unfinished job's page. */
#define NB_DASH_JOB_REFRESH_S 5

/* A job's outcome in the words `npubench jobs`, `job`, JSON and JUnit use (pass, fail, error,
 * unavailable, cancelled, expired, pending): from its state and its runs' verdicts
 * (nb_db_job_runs_verdict: a flagged run fails). A finished job without a run (a health
 * check) is "-": its verdict is its board's health. Static strings. */
const char *nb_dash_job_outcome(nb_db *db, const nb_db_job *j);

/* job-<id>.html: NB_ENOTFOUND naming the id when there is no such job. */
nb_code nb_dash_job_page(nb_db *db, const nb_dash_opts *o, int64_t id, FILE *f, nb_err *err);

/* job-<id>-log.json[?after=SEQ]: {"job", "state", "outcome", "finished", "progress",
 * "lines": [{"seq", "ts_ms", "text"}], "next", "more"}, the lines after SEQ (0 = from the
 * start), at most NB_DASH_JOB_LOG_LINES; "next" is the position to ask from next time.
 * query is what followed '?' (NULL = none); an `after` that is no integer >= 0: NB_EINVAL
 * naming it; no such job: NB_ENOTFOUND. */
nb_code nb_dash_job_log_json(nb_db *db, int64_t id, const char *query, FILE *f, nb_err *err);

/* Called for each job page an export holds (is_run 0) and each run those pages link to
 * (is_run 1); ids may repeat. A non-zero code stops the walk. */
typedef nb_code (*nb_dash_job_id_fn)(void *ud, int is_run, int64_t id, nb_err *err);

/* The jobs the queue page lists (every unfinished one, the newest max_finished finished
 * ones), the jobs of the groups among them, and their runs. */
nb_code nb_dash_job_export_ids(nb_db *db, size_t max_finished, nb_dash_job_id_fn fn, void *ud,
                               nb_err *err);

/* What job job_id's page links to: itself, its runs, its group and, for a group, its jobs; a
 * job no longer stored: nothing. */
nb_code nb_dash_job_linked_ids(nb_db *db, int64_t job_id, nb_dash_job_id_fn fn, void *ud,
                               nb_err *err);

#endif
