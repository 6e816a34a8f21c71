/* nb_db_schema: the ordered list of schema migrations and the code applying
 * them, one transaction per step, recorded in schema_version. */
#include "nb_db_schema.h"

#include <stdio.h>
#include <string.h>

#include "nb_db_int.h"
#include "nb_dtype.h"
#include "nb_job.h"

/* Migration steps, applied in order; a step is never edited once released,
 * changes are new steps appended at the end. */
typedef struct migration {
    const char *name;
    const char *sql;
} migration;

static const char v1_sql[] =
    "PRAGMA application_id = 1313882696;\n" /* 0x4e504248 "NPBH", see nb_db.c */
    /* A deployment is what gets benchmarked: one model build on one backend,
     * dtype and board. Runs hang off it; the tuple is its identity. */
    "CREATE TABLE deployments (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  model TEXT NOT NULL CHECK (model <> ''),\n"
    "  weights_digest TEXT NOT NULL DEFAULT '',\n"
    "  backend TEXT NOT NULL CHECK (backend <> ''),\n"
    "  dtype TEXT NOT NULL CHECK (dtype <> ''),\n"
    "  board TEXT NOT NULL CHECK (board <> ''),\n"
    "  created_ms INTEGER NOT NULL,\n"
    "  UNIQUE (model, weights_digest, backend, dtype, board)\n"
    ");\n"
    "CREATE INDEX deployments_board ON deployments (board);\n"
    "CREATE TABLE workers (\n"
    "  id TEXT PRIMARY KEY,\n"
    "  board_name TEXT NOT NULL DEFAULT '',\n"
    "  board_type TEXT NOT NULL DEFAULT '',\n"
    "  tags TEXT NOT NULL DEFAULT '',\n"
    "  host TEXT NOT NULL DEFAULT '',\n"
    "  backends TEXT NOT NULL DEFAULT '',\n"
    "  deployments TEXT NOT NULL DEFAULT '',\n"
    "  version TEXT NOT NULL DEFAULT '',\n"
    "  device_id TEXT NOT NULL DEFAULT '',\n"
    "  first_seen_ms INTEGER NOT NULL,\n"
    "  last_seen_ms INTEGER NOT NULL,\n"
    "  state TEXT NOT NULL DEFAULT 'alive' CHECK (state IN ('alive','stale','gone'))\n"
    ") WITHOUT ROWID;\n"
    /* The queue. Selector columns ('' = any) are matched against a worker's
     * capabilities at lease time; a lease is (lease_id, leased_worker,
     * lease_expiry_ms) and every lease-holder call must present lease_id. */
    "CREATE TABLE jobs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  parent_id INTEGER REFERENCES jobs (id) ON DELETE CASCADE,\n"
    "  request_id TEXT UNIQUE,\n"
    "  kind TEXT NOT NULL CHECK (kind <> ''),\n"
    "  is_group INTEGER NOT NULL DEFAULT 0,\n"
    "  spec BLOB,\n"
    "  spec_format TEXT NOT NULL DEFAULT 'json' CHECK (spec_format IN ('json','proto')),\n"
    "  sel_backend TEXT NOT NULL DEFAULT '',\n"
    "  sel_board TEXT NOT NULL DEFAULT '',\n"
    "  sel_board_type TEXT NOT NULL DEFAULT '',\n"
    "  sel_deployment TEXT NOT NULL DEFAULT '',\n"
    "  sel_worker TEXT NOT NULL DEFAULT '',\n"
    "  sel_tags TEXT NOT NULL DEFAULT '',\n"
    "  priority INTEGER NOT NULL DEFAULT 0,\n"
    "  state TEXT NOT NULL CHECK (state IN\n"
    "    ('queued','leased','running','done','failed','cancelled')),\n"
    "  queued_reason TEXT NOT NULL DEFAULT '',\n"
    "  error TEXT NOT NULL DEFAULT '',\n"
    "  attempts INTEGER NOT NULL DEFAULT 0,\n"
    "  max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),\n"
    "  lease_id TEXT,\n"
    "  leased_worker TEXT,\n"
    "  lease_expiry_ms INTEGER,\n"
    "  created_ms INTEGER NOT NULL,\n"
    "  started_ms INTEGER,\n"
    "  finished_ms INTEGER,\n"
    "  progress_done INTEGER NOT NULL DEFAULT 0,\n"
    "  progress_total INTEGER NOT NULL DEFAULT 0,\n"
    "  progress_msg TEXT NOT NULL DEFAULT '',\n"
    "  log_bytes INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "CREATE INDEX jobs_sched ON jobs (state, priority DESC, created_ms, id);\n"
    "CREATE INDEX jobs_lease ON jobs (lease_expiry_ms) WHERE state IN ('leased','running');\n"
    "CREATE INDEX jobs_parent ON jobs (parent_id);\n"
    /* Job logs are rows, not a growing column of jobs: a jobs row is rewritten
     * on every lease renewal and progress update, and must stay small. */
    "CREATE TABLE job_logs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,\n"
    "  ts_ms INTEGER NOT NULL,\n"
    "  text TEXT NOT NULL\n"
    ");\n"
    "CREATE INDEX job_logs_job ON job_logs (job_id, id);\n"
    /* One row per verify/bench/profile result. (job_id, job_seq) is unique so
     * a job's results can be written once only, whatever happens to leases. */
    "CREATE TABLE runs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  job_id INTEGER REFERENCES jobs (id) ON DELETE SET NULL,\n"
    "  job_seq INTEGER,\n"
    "  lease_id TEXT,\n"
    "  deployment_id INTEGER NOT NULL REFERENCES deployments (id),\n"
    "  worker_id TEXT,\n"
    "  runner TEXT,\n"
    "  kind TEXT NOT NULL CHECK (kind <> ''),\n"
    "  outcome TEXT NOT NULL CHECK (outcome IN ('PASS','FAIL','ERROR')),\n"
    "  error TEXT,\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER,\n"
    "  ttft_ms REAL, tps REAL, decode_ms_per_token REAL, tpot_ms REAL,\n"
    "  ttft_mean REAL, tps_mean REAL, decode_mean REAL, tpot_mean REAL,\n"
    "  ttft_stddev REAL, tps_stddev REAL, decode_stddev REAL, tpot_stddev REAL,\n"
    "  prompt_tokens INTEGER, generated_tokens INTEGER, context_len INTEGER, reps INTEGER,\n"
    "  npubench_commit TEXT, board TEXT, cpu_info TEXT, npu_info TEXT,\n"
    "  backend TEXT, dtype TEXT, threads INTEGER, model_digest TEXT,\n"
    "  report_json TEXT,\n"
    "  regression INTEGER NOT NULL DEFAULT 0,\n"
    "  regression_detail TEXT,\n"
    "  source TEXT NOT NULL CHECK (source IN ('local','service','import')),\n"
    "  external_id TEXT\n"
    ");\n"
    "CREATE UNIQUE INDEX runs_external ON runs (external_id) WHERE external_id IS NOT NULL;\n"
    "CREATE UNIQUE INDEX runs_job ON runs (job_id, job_seq) WHERE job_id IS NOT NULL;\n"
    "CREATE INDEX runs_deployment_time ON runs (deployment_id, started_ms);\n"
    "CREATE INDEX runs_time ON runs (started_ms);\n"
    "CREATE TABLE samples (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  rep INTEGER NOT NULL,\n"
    "  ttft_ms REAL, tps REAL, decode_ms_per_token REAL, tpot_ms REAL,\n"
    "  PRIMARY KEY (run_id, rep)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE gate_checks (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  prompt_index INTEGER NOT NULL,\n"
    "  prompt TEXT,\n"
    "  steps INTEGER,\n"
    "  divergence_step INTEGER,\n"
    "  device_token INTEGER, device_text TEXT, device_rank INTEGER,\n"
    "  ref_token INTEGER, ref_text TEXT, ref_rank INTEGER,\n"
    "  device_top5 TEXT, ref_top5 TEXT,\n"
    "  agreed_prefix INTEGER,\n"
    "  status TEXT NOT NULL,\n"
    "  reason TEXT,\n"
    "  PRIMARY KEY (run_id, prompt_index)\n"
    ");\n"
    "CREATE TABLE layer_cosines (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  layer INTEGER NOT NULL,\n"
    "  min REAL, p5 REAL, median REAL, mean REAL, max_abs REAL,\n"
    "  PRIMARY KEY (run_id, layer)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE profile_phases (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  name TEXT NOT NULL,\n"
    "  calls INTEGER, total_ms REAL, avg_ms REAL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE profile_kernels (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  name TEXT NOT NULL,\n"
    "  calls INTEGER, total_ms REAL, avg_ms REAL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE toolchain (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  key TEXT NOT NULL,\n"
    "  value TEXT NOT NULL,\n"
    "  PRIMARY KEY (run_id, key)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE reference_traces (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  model_digest TEXT NOT NULL,\n"
    "  prompts_digest TEXT NOT NULL,\n"
    "  n_tokens INTEGER NOT NULL,\n"
    "  k INTEGER NOT NULL,\n"
    "  path TEXT,\n"
    "  blob BLOB,\n"
    "  created_ms INTEGER NOT NULL,\n"
    "  UNIQUE (model_digest, prompts_digest, n_tokens, k),\n"
    "  CHECK ((path IS NULL) <> (blob IS NULL))\n"
    ");\n"
    /* "references" is an SQL keyword, hence the longer name. */
    "CREATE TABLE reference_deployments (\n"
    "  model TEXT PRIMARY KEY,\n"
    "  deployment_id INTEGER NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,\n"
    "  set_ms INTEGER NOT NULL\n"
    ");\n";

/* Whole JobResults move from files beside the database into it, so they commit
 * with the job they belong to (a result is acknowledged only once all of it is
 * durable); the files of older versions are still read (coordinator store). */
static const char v2_sql[] =
    "CREATE TABLE job_results (\n"
    "  job_id INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,\n"
    "  result BLOB NOT NULL,\n"
    "  stored_ms INTEGER NOT NULL\n"
    ");\n";

/* mlir-air's nightly files: the verify status as the nightly reported it (a
 * skipped or unreported verify is neither PASS nor FAIL), and the measurement a
 * row came from, so the same numbers arriving through perf.json and through
 * history.ndjson are stored once (docs/mlir-air.md). */
static const char v3_sql[] =
    "ALTER TABLE runs ADD COLUMN verify_status TEXT\n"
    "  CHECK (verify_status IN ('pass','fail','error','skip','unknown'));\n"
    "ALTER TABLE runs ADD COLUMN measurement_key TEXT;\n"
    "CREATE INDEX runs_measurement ON runs (measurement_key)\n"
    "  WHERE measurement_key IS NOT NULL;\n";

/* One identity per model: the names a model goes by, each pointing at its canonical
 * name (db/nb_db_alias.h). NOCASE as model names are matched case-insensitively. */
static const char v4_sql[] = "CREATE TABLE model_aliases (\n"
                             "  alias TEXT NOT NULL PRIMARY KEY COLLATE NOCASE,\n"
                             "  model TEXT NOT NULL COLLATE NOCASE CHECK (model <> ''),\n"
                             "  origin TEXT NOT NULL DEFAULT '',\n"
                             "  set_ms INTEGER NOT NULL\n"
                             ") WITHOUT ROWID;\n"
                             "CREATE INDEX model_aliases_model ON model_aliases (model);\n";

/* Queue expiry: a job still waiting this long after its submission is expired by the
 * coordinator's sweeper (nb_db_jobs_expire). */
static const char v5_sql[] =
    "ALTER TABLE jobs ADD COLUMN expires_ms INTEGER;\n"
    "CREATE INDEX jobs_expiry ON jobs (expires_ms) WHERE expires_ms IS NOT NULL AND "
    "parent_id IS NULL;\n"
    /* Board health (LAVA's health checks), drain, consecutive job errors: per board, as
     * a board keeps them across its workers' restarts (db/nb_db_boards.h). */
    "CREATE TABLE boards (\n"
    "  board TEXT PRIMARY KEY CHECK (board <> ''),\n"
    "  health TEXT NOT NULL DEFAULT 'unknown' CHECK (health IN ('unknown','ok','failed')),\n"
    "  checked_ms INTEGER,\n"
    "  detail TEXT NOT NULL DEFAULT '',\n"
    "  job_errors INTEGER NOT NULL DEFAULT 0,\n"
    "  drained INTEGER NOT NULL DEFAULT 0,\n"
    "  check_job_id INTEGER NOT NULL DEFAULT 0\n"
    ") WITHOUT ROWID;\n";

/* Where a gate divergence comes from (verify/nb_localize.h): the whole localization as the
 * JSON the reports carry, and its verdict apart so history queries can filter on it. */
static const char v6_sql[] = "ALTER TABLE gate_checks ADD COLUMN localization TEXT;\n"
                             "ALTER TABLE gate_checks ADD COLUMN localization_verdict TEXT;\n";

/* What each board's worker read at its registration (worker/nb_probe): the dashboard renders
 * from the database alone, and a coordinator restart must not forget the versions. */
static const char v7_sql[] = "ALTER TABLE boards ADD COLUMN driver TEXT NOT NULL DEFAULT '';\n"
                             "ALTER TABLE boards ADD COLUMN firmware TEXT NOT NULL DEFAULT '';\n"
                             "ALTER TABLE boards ADD COLUMN xrt TEXT NOT NULL DEFAULT '';\n"
                             "ALTER TABLE boards ADD COLUMN kernel_path TEXT NOT NULL DEFAULT '';\n"
                             "ALTER TABLE boards ADD COLUMN cpu_model TEXT NOT NULL DEFAULT '';\n"
                             "ALTER TABLE boards ADD COLUMN toolchain TEXT NOT NULL DEFAULT '';\n"
                             "ALTER TABLE boards ADD COLUMN versions_ms INTEGER;\n";

/* The decode-path check every verify makes (verify/nb_localize.h): its JSON, and its status
 * ('clean', 'fault', 'unchecked') apart so a flagged PASS can be found and shown. */
static const char v8_sql[] = "ALTER TABLE gate_checks ADD COLUMN decode_check TEXT;\n"
                             "ALTER TABLE gate_checks ADD COLUMN decode_status TEXT;\n";

/* A regression's lifecycle (db/nb_db_regress.h, as LNT keeps it): a row per flagged run, new,
 * acknowledged by a person or fixed (by a later run of its series back in the band, or closed
 * by a person), with the check's numbers per metric. Runs flagged before this version get a
 * row each, new, without numbers (a later unflagged run of their series fixes them). */
static const char v9_sql[] =
    "CREATE TABLE regressions (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL UNIQUE REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  deployment_id INTEGER NOT NULL REFERENCES deployments (id),\n"
    "  series TEXT NOT NULL,\n"
    "  detail TEXT NOT NULL DEFAULT '',\n"
    "  state TEXT NOT NULL DEFAULT 'new' CHECK (state IN ('new','acknowledged','fixed')),\n"
    "  created_ms INTEGER NOT NULL,\n"
    "  state_ms INTEGER NOT NULL,\n"
    "  ack_by TEXT NOT NULL DEFAULT '',\n"
    "  ack_note TEXT NOT NULL DEFAULT '',\n"
    "  ack_ms INTEGER,\n"
    "  fixed_ms INTEGER,\n"
    "  fixed_run_id INTEGER REFERENCES runs (id) ON DELETE SET NULL,\n"
    "  fixed_by TEXT NOT NULL DEFAULT '',\n"
    "  fixed_note TEXT NOT NULL DEFAULT ''\n"
    ");\n"
    "CREATE INDEX regressions_open ON regressions (series) WHERE state <> 'fixed';\n"
    "CREATE TABLE regression_metrics (\n"
    "  regression_id INTEGER NOT NULL REFERENCES regressions (id) ON DELETE CASCADE,\n"
    "  metric TEXT NOT NULL,\n"
    "  base_median REAL, new_median REAL, band REAL,\n"
    "  higher_is_better INTEGER NOT NULL,\n"
    "  PRIMARY KEY (regression_id, metric)\n"
    ") WITHOUT ROWID;\n"
    "INSERT INTO regressions (run_id, deployment_id, series, detail, state, created_ms, "
    "state_ms)\n"
    "  SELECT r.id, r.deployment_id, d.model || '|' || d.backend || '|' || d.dtype || '|' || "
    "d.board || '|' || nb_series_shape(r.kind, r.context_len, r.generated_tokens, "
    "r.prompt_tokens, r.threads), COALESCE(r.regression_detail, ''), 'new', "
    "COALESCE(r.finished_ms, r.started_ms), COALESCE(r.finished_ms, r.started_ms)\n"
    "  FROM runs r JOIN deployments d ON d.id = r.deployment_id WHERE r.regression <> 0;\n";

/* The queued job's dtype as the enum (npubench.Dtype; 0 = none, matched by the name in
 * sel_deployment, as an exec deployment's free label is), so the coordinator matches by it.
 * Rows queued before get it from their pattern's dtype word (nb_sel_dtype_id, nb_dtype's one
 * word -> enum rule), once, here. */
static const char v10_sql[] =
    "ALTER TABLE jobs ADD COLUMN sel_dtype_id INTEGER NOT NULL DEFAULT 0;\n"
    "UPDATE jobs SET sel_dtype_id = nb_sel_dtype_id(sel_deployment);\n";

/* A model's display name lost its quantisation tag (nb_job_model_canon: "gemma-3-270m-q4_k_m"
 * is "gemma-3-270m"). The names this npubench stores (every deployment with a run that is not
 * an import: imports keep the nightly's own names) are renamed once: a deployment whose new
 * tuple is already stored merges into it (its runs, regressions and reference follow), the
 * regression series and references follow, and the old name stays an alias of the new one so
 * everything that named it still resolves. nb_model_canon is nb_job_model_canon. */
static const char v11_sql[] =
    "CREATE TEMP TABLE nb_ren AS SELECT d.id, d.model AS old, nb_model_canon(d.model) AS new "
    "FROM deployments d WHERE nb_model_canon(d.model) <> d.model "
    "AND nb_model_canon(d.model) <> '' "
    "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.deployment_id = d.id AND r.source = 'import');\n"
    /* each renamed deployment's row under its new tuple: one already named so, else the
     * first of those renamed to it */
    "CREATE TEMP TABLE nb_map AS SELECT n.id, (SELECT e.id FROM deployments e "
    "LEFT JOIN nb_ren r2 ON r2.id = e.id WHERE COALESCE(r2.new, e.model) = n.new "
    "AND e.weights_digest = d.weights_digest AND e.backend = d.backend AND e.dtype = d.dtype "
    "AND e.board = d.board ORDER BY r2.id IS NOT NULL, e.id LIMIT 1) AS target "
    "FROM nb_ren n JOIN deployments d ON d.id = n.id;\n"
    "UPDATE runs SET deployment_id = (SELECT target FROM nb_map m WHERE m.id = deployment_id) "
    "WHERE deployment_id IN (SELECT id FROM nb_map WHERE target <> id);\n"
    "UPDATE regressions SET deployment_id = "
    "(SELECT target FROM nb_map m WHERE m.id = deployment_id) "
    "WHERE deployment_id IN (SELECT id FROM nb_map WHERE target <> id);\n"
    "UPDATE reference_deployments SET deployment_id = "
    "(SELECT target FROM nb_map m WHERE m.id = deployment_id) "
    "WHERE deployment_id IN (SELECT id FROM nb_map WHERE target <> id);\n"
    "DELETE FROM deployments WHERE id IN (SELECT id FROM nb_map WHERE target <> id);\n"
    "UPDATE deployments SET model = (SELECT new FROM nb_ren n WHERE n.id = deployments.id) "
    "WHERE id IN (SELECT id FROM nb_map WHERE target = id);\n"
    /* a reference set under an old and the new name: the one set last stays */
    "DELETE FROM reference_deployments WHERE model IN (SELECT old FROM nb_ren) AND EXISTS "
    "(SELECT 1 FROM reference_deployments o WHERE o.model = nb_model_canon("
    "reference_deployments.model) AND o.set_ms >= reference_deployments.set_ms);\n"
    "DELETE FROM reference_deployments WHERE EXISTS (SELECT 1 FROM reference_deployments o "
    "WHERE o.model IN (SELECT old FROM nb_ren) AND nb_model_canon(o.model) = "
    "reference_deployments.model AND o.set_ms > reference_deployments.set_ms);\n"
    "UPDATE OR REPLACE reference_deployments SET model = nb_model_canon(model) "
    "WHERE model IN (SELECT old FROM nb_ren);\n"
    "UPDATE regressions SET series = "
    "nb_model_canon(substr(series, 1, instr(series, '|') - 1)) || "
    "substr(series, instr(series, '|')) "
    "WHERE substr(series, 1, instr(series, '|') - 1) IN (SELECT old FROM nb_ren);\n"
    /* the aliases of an old name follow it; the old name becomes one */
    "UPDATE model_aliases SET model = (SELECT new FROM nb_ren n WHERE n.old = model_aliases.model "
    "LIMIT 1) WHERE model IN (SELECT old FROM nb_ren);\n"
    "INSERT INTO model_aliases (alias, model, origin, set_ms) "
    "SELECT DISTINCT old, new, 'renamed', CAST(strftime('%s', 'now') AS INTEGER) * 1000 "
    "FROM nb_ren WHERE true "
    "ON CONFLICT (alias) DO UPDATE SET model = excluded.model, origin = excluded.origin;\n"
    "DELETE FROM model_aliases WHERE alias = model;\n"
    "DROP TABLE nb_map;\n"
    "DROP TABLE nb_ren;\n";

static const migration migrations[] = {
    {"initial schema", v1_sql},
    {"job results in the database", v2_sql},
    {"import: verify status and measurement key", v3_sql},
    {"model aliases", v4_sql},
    {"queue expiry, board health", v5_sql},
    {"gate localizations", v6_sql},
    {"board versions", v7_sql},
    {"gate decode-path checks", v8_sql},
    {"regression lifecycle", v9_sql},
    {"queued jobs' dtype as the enum", v10_sql},
    {"model names without their quantisation tag", v11_sql},
};

#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

int nb_db_schema_latest(void) { return N_MIGRATIONS; }

static const char version_table_sql[] = "CREATE TABLE IF NOT EXISTS schema_version (\n"
                                        "  version INTEGER PRIMARY KEY,\n"
                                        "  name TEXT NOT NULL,\n"
                                        "  applied_ms INTEGER NOT NULL\n"
                                        ")";

static nb_code read_version(nb_db *db, int *version, nb_err *err)
{
    static const char sql[] = "SELECT COALESCE(MAX(version), 0) FROM schema_version";
    sqlite3_stmt *st;
    nb_code code = nb_db_stmt(db, sql, &st, err);
    if (code)
        return code;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        code = nb_db_sqlerr(db, err, "reading schema_version");
        nb_db_done(st);
        return code;
    }
    *version = sqlite3_column_int(st, 0);
    nb_db_done(st);
    return NB_OK;
}

nb_code nb_db_schema_version(nb_db *db, int *version, nb_err *err)
{
    nb_db_lock(db);
    nb_code rc = read_version(db, version, err);
    nb_db_unlock(db);
    return rc;
}

static nb_code apply_step(nb_db *db, int version, nb_err *err)
{
    const migration *m = &migrations[version - 1];
    nb_db_tx tx;
    nb_code rc = nb_db_tx_begin(db, &tx, err);
    if (rc)
        return rc;
    int cur = 0;
    /* Re-read under the write lock: another process may have migrated
     * between our check and BEGIN IMMEDIATE. */
    rc = nb_db_exec(db, version_table_sql, err);
    if (!rc)
        rc = read_version(db, &cur, err);
    if (!rc && cur >= version) {
        nb_db_tx_rollback(db, &tx);
        return NB_OK;
    }
    if (!rc)
        rc = nb_db_exec(db, m->sql, err);
    if (!rc) {
        static const char ins[] =
            "INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)";
        sqlite3_stmt *st;
        rc = nb_db_stmt(db, ins, &st, err);
        if (!rc) {
            sqlite3_bind_int(st, 1, version);
            sqlite3_bind_text(st, 2, m->name, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 3, nb_db_now_ms(db));
            rc = nb_db_step_done(db, st, err, "recording schema version");
        }
    }
    if (rc) {
        nb_db_tx_rollback(db, &tx);
        return nb_err_prefix(err, "migration %d (%s): ", version, m->name);
    }
    return nb_db_tx_commit(db, &tx, err);
}

/* nb_sel_dtype_id("<model or *>/<dtype or *>"): the dtype word's npubench.Dtype (v10_sql).
 * The dtype is after the last '/' (a model name may hold one, a dtype never does). */
static void sql_sel_dtype_id(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *pat = (const char *)sqlite3_value_text(argv[0]);
    const char *slash = pat ? strrchr(pat, '/') : NULL;
    sqlite3_result_int(ctx, slash ? nb_dtype_pb_of_name(slash + 1) : 0);
}

/* nb_model_canon(name): the model's display name (v11_sql), nb_job_model_canon's. */
static void sql_model_canon(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *name = (const char *)sqlite3_value_text(argv[0]);
    char out[NB_DB_NAME_MAX];
    nb_job_model_canon(name ? name : "", out, sizeof out);
    sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
}

nb_code nb_db_schema_migrate(nb_db *db, nb_err *err)
{
    if (sqlite3_create_function(db->h, "nb_sel_dtype_id", 1,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                sql_sel_dtype_id, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function(db->h, "nb_model_canon", 1,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                sql_model_canon, NULL, NULL) != SQLITE_OK)
        return nb_db_sqlerr(db, err, "registering the migrations' functions");
    int cur = 0;
    int64_t has = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                           "name = 'schema_version'",
                           -1, &st, NULL) != SQLITE_OK)
        return nb_db_sqlerr(db, err, "reading the schema");
    if (sqlite3_step(st) == SQLITE_ROW)
        has = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (has) {
        nb_code rc = read_version(db, &cur, err);
        if (rc)
            return rc;
    }
    if (cur > N_MIGRATIONS)
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: database schema version %d is newer than this npubench "
                          "(which knows versions up to %d); use a newer npubench",
                          db->path, cur, N_MIGRATIONS);
    for (int v = cur + 1; v <= N_MIGRATIONS; v++) {
        nb_code rc = apply_step(db, v, err);
        if (rc)
            return rc;
    }
    return NB_OK;
}
