/* nb_db_results: each finished job's whole JobResult (packed protobuf) kept in the database,
 * so it commits in the same transaction as the job's completion and its runs. */
#ifndef NB_DB_RESULTS_H
#define NB_DB_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

#define NB_DB_RESULT_MAX ((size_t)64 << 20) /* one packed JobResult */

/* Stores (replacing) the result bytes of job_id; joins the caller's
 * nb_db_begin transaction when one is open. NB_EINVAL over the size limit. */
nb_code nb_db_result_put(nb_db *db, int64_t job_id, const void *blob, size_t len, nb_err *err);

/* The stored bytes of job_id (malloc'ed into *blob; free()); NB_ENOTFOUND if none. */
nb_code nb_db_result_get(nb_db *db, int64_t job_id, void **blob, size_t *len, nb_err *err);

/* Retention: deletes the stored results of jobs that finished before
 * before_ms (their runs rows stay); *n gets the count (may be NULL). */
nb_code nb_db_results_prune(nb_db *db, int64_t before_ms, size_t *n, nb_err *err);

#endif
