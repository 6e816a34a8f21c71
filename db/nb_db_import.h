/* nb_db_import: loads results of the reference tooling (perf.json objects or
 * lists, history.ndjson rows) into runs, idempotently, in one transaction. */
#ifndef NB_DB_IMPORT_H
#define NB_DB_IMPORT_H

#include <stddef.h>

#include "nb_db.h"

/* Accepted shapes, per object, as mlir-air's nightly writes them (docs/mlir-air.md; a
 * perf.json file holds one object or a JSON list of them, an .ndjson file one per line):
 *   perf:    {model, timestamp_utc, runner, verify_status,
 *             metrics{ttft_ms, decode_tokens_per_sec, context_len},
 *             toolchain{mlir_air_sha, mlir_aie_hash, llvm_aie_version, ...},
 *             run_params{n_tokens, prompt}}   (extract_perf.py; per model runner is "")
 *   history: {date, timestamp_utc, run_id, air_sha, aie_hash, peano, model, runner,
 *             ttft_ms, decode_tokens_per_sec, context_len, verify_status}
 *   sweep:   history's keys with ms_per_token and status instead of ttft_ms
 *            (sweep_history.ndjson), or sweep.json's {model, ..., points[...]}: one
 *            run of kind "sweep" per point
 * Each becomes one run (kind "bench" or "sweep", source import) of the deployment
 * (model, weights digest if given, backend, dtype (the object's, else the model name's
 * suffix, else bf16), board = runner, or the nightly's runner when the row names none).
 * A row with a run_id is keyed by (run_id, model, runner[, context]):
 * external id "<run_id>/<model>/<runner>" (+ "/sweep:<context_len>"); one without, by
 * "sha256:" + the SHA-256 of its canonical JSON (keys sorted, numbers normalized), so
 * importing a file twice skips every row the second time. One measurement (model,
 * timestamp_utc, series) that arrives through several files (the per-model perf.json,
 * the combined one, history.ndjson) is stored once: later copies add what the stored one
 * lacked (row key, runner, verify status, toolchain) and count as skipped and merged.
 * The original object is kept as the run's report JSON; toolchain entries go to the
 * toolchain table, perf.json's long names stored as history's short ones (air_sha,
 * aie_hash, peano), empty values dropped. verify_status pass/fail (case-insensitive;
 * also passed/ok/failed/error) set the outcome; "skip", "" and null are stored as
 * verify status "skip" / "unknown" with outcome ERROR, neither a pass nor a fail.
 * Imported runs carry one value per metric: no repetitions, mean or spread (NULL). */
/* The board of a row that names no runner (no `runner` key: every history row written
 * before mlir-air PR #1867; or "": extract_perf's per-model perf.json) unless the options
 * name another: the label the nightly runs on (nightlyPerfBenchmark.yml's `runs-on`). Such
 * rows are counted in the report (n_runner_assumed), never filed under a silent "unknown";
 * a later copy naming its runner moves the run to that board. */
#define NB_DB_IMPORT_NIGHTLY_RUNNER "amdryzenai5pro340"

/* One rule of the model-name -> dtype table: a model name ending in suffix
 * (case-insensitive) was built with dtype. */
typedef struct nb_db_dtype_rule {
    const char *suffix, *dtype;
} nb_db_dtype_rule;

/* The dtype a model's name says it was built with: extra's rules first (in order; a
 * deployments file's "dtypes" table), then the built-in ones (mlir-air's directory names:
 * "_q4nx" q4nx, "_int4" int4, "_q4" q4); NULL when no suffix matches. */
const char *nb_db_dtype_of_model(const char *model, const nb_db_dtype_rule *extra,
                                 size_t n_extra);

typedef struct nb_db_import_opts {
    const char *backend; /* unless the object names one; NULL = "npu" */
    const char *dtype;   /* unless the object names one; NULL = the model name's dtype
                          * (nb_db_dtype_of_model with dtypes), else "bf16" */
    const char *board;   /* NULL = each object's runner */
    const char *runner;  /* board of rows naming no runner; NULL = NB_DB_IMPORT_NIGHTLY_RUNNER */
    const nb_db_dtype_rule *dtypes; /* extra model-suffix rules, checked first */
    size_t n_dtypes;
} nb_db_import_opts;

#define NB_DB_IMPORT_BAD_KEEP 100
#define NB_DB_IMPORT_FILE_MAX (512u << 20)

typedef struct nb_db_import_bad {
    size_t line;             /* 1-based line where the object starts */
    char msg[NB_DB_MSG_MAX]; /* "h.ndjson:3: field 'ttft_ms': expected a number, got string" */
} nb_db_import_bad;

typedef struct nb_db_import_report {
    size_t n_imported;
    size_t n_skipped; /* already stored (same row key, or the same measurement) */
    size_t n_merged;  /* of those, the same measurement from another file, merged in */
    size_t n_runner_assumed; /* rows naming no runner, filed under runner_assumed */
    char runner_assumed[NB_DB_NAME_MAX];
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
