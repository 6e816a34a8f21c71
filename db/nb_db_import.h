/* nb_db_import: loads results of the reference tooling (perf.json objects or
 * lists, history.ndjson rows) into runs, idempotently, in one transaction. */
#ifndef NB_DB_IMPORT_H
#define NB_DB_IMPORT_H

#include <stddef.h>

#include "nb_db.h"

/* Accepted shapes, per object (a perf.json file holds one object or a JSON
 * list of them; history.ndjson holds one object per line):
 *   perf:    {model, timestamp_utc, runner, verify_status,
 *             metrics{ttft_ms, decode_tokens_per_sec, context_len},
 *             toolchain{key: value...}, run_params{n_tokens, prompt}}
 *   history: {date, timestamp_utc, run_id, air_sha, aie_hash, peano, model,
 *             runner, ttft_ms, decode_tokens_per_sec, context_len, verify_status}
 * Each becomes one run (kind "bench", source import) of the deployment
 * (model, weights digest if given, backend, dtype, board). The run's
 * external id is run_id when present, else "sha256:" + the SHA-256 of the
 * object's canonical JSON (keys sorted, numbers normalized), so importing
 * the same file twice skips every row the second time. The original object
 * is kept as the run's report JSON; toolchain entries (and the history
 * rows' air_sha/aie_hash/peano) go to the toolchain table.
 * verify_status PASS/FAIL/ERROR (case-insensitive; also passed/ok/failed/
 * error); missing or null means the run was not verified: outcome ERROR. */
typedef struct nb_db_import_opts {
    const char *backend; /* unless the object names one; NULL = "npu" */
    const char *dtype;   /* unless the object names one; NULL = "bf16" */
    const char *board;   /* NULL = each object's runner */
} nb_db_import_opts;

#define NB_DB_IMPORT_BAD_KEEP 100
#define NB_DB_IMPORT_FILE_MAX (512u << 20)

typedef struct nb_db_import_bad {
    size_t line;             /* 1-based line where the object starts */
    char msg[NB_DB_MSG_MAX]; /* "h.ndjson:3: field 'ttft_ms': expected a number, got string" */
} nb_db_import_bad;

typedef struct nb_db_import_report {
    size_t n_imported;
    size_t n_skipped; /* already stored (same external id) */
    size_t n_bad;     /* rejected rows, all counted */
    nb_db_import_bad *bad; /* the first NB_DB_IMPORT_BAD_KEEP of them; malloc'ed */
    size_t n_bad_kept;
} nb_db_import_report;

/* Imports path. Bad rows are skipped and reported while every good row is
 * committed, all in one transaction: NB_OK when no row was bad, NB_EFORMAT
 * when some were (err names the first and the count; counts are valid).
 * Other errors (unreadable file, database failure) import nothing.
 * opts may be NULL. Release rep with nb_db_import_report_free. */
nb_code nb_db_import_file_ex(nb_db *db, const char *path, const nb_db_import_opts *opts,
                             nb_db_import_report *rep, nb_err *err);
void nb_db_import_report_free(nb_db_import_report *rep);

/* nb_db_import_file_ex with default options, keeping only the counts. */
nb_code nb_db_import_file(nb_db *db, const char *path, size_t *n_imported, size_t *n_skipped,
                          nb_err *err);

#endif
