/* nb_db_run_insert: writing a run and its detail rows in one transaction, with what the run does
 * to its series' regressions (nb_db_regress.c); a stored run by external id; its regression flag. */
#include "nb_db_runs.h"

#include <stdio.h>

#include "nb_db_int.h"

static nb_code validate_run(const nb_db_run *r, nb_err *err)
{
    if (!r->kind || !*r->kind)
        return nb_err_set(err, NB_EINVAL, "run.kind: required (verify, bench, profile...)");
    if (r->deployment_id <= 0)
        return nb_err_set(err, NB_EINVAL, "run.deployment_id: required, got %lld",
                          (long long)r->deployment_id);
    if (r->started_ms <= 0)
        return nb_err_set(err, NB_EINVAL, "run.started_ms: required, got %lld",
                          (long long)r->started_ms);
    if ((unsigned)r->outcome > NB_OUTCOME_ERROR)
        return nb_err_set(err, NB_EINVAL, "run.outcome: invalid value %d", (int)r->outcome);
    if ((unsigned)r->source > NB_SOURCE_IMPORT)
        return nb_err_set(err, NB_EINVAL, "run.source: invalid value %d", (int)r->source);
    nb_code rc;
    if ((rc = nb_db_check_len(err, "run.kind", r->kind, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "run.worker_id", r->worker_id, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "run.runner", r->runner, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "run.env.npubench_commit", r->env.npubench_commit,
                              NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "run.external_id", r->external_id, NB_DB_NAME_MAX)))
        return rc;
    struct {
        const char *name;
        const void *p;
        size_t n;
    } arrays[] = {
        {"samples", r->samples, r->n_samples},
        {"gate_checks", r->gate_checks, r->n_gate_checks},
        {"cosines", r->cosines, r->n_cosines},
        {"phases", r->phases, r->n_phases},
        {"kernels", r->kernels, r->n_kernels},
        {"toolchain", r->toolchain, r->n_toolchain},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (arrays[i].n && !arrays[i].p)
            return nb_err_set(err, NB_EINVAL, "run.%s: count %zu with a NULL array",
                              arrays[i].name, arrays[i].n);
    for (size_t i = 0; i < r->n_gate_checks; i++)
        if (!r->gate_checks[i].status || !*r->gate_checks[i].status)
            return nb_err_set(err, NB_EINVAL, "run.gate_checks[%zu].status: required", i);
    for (size_t i = 0; i < r->n_phases; i++)
        if (!r->phases[i].name)
            return nb_err_set(err, NB_EINVAL, "run.phases[%zu].name: required", i);
    for (size_t i = 0; i < r->n_kernels; i++)
        if (!r->kernels[i].name)
            return nb_err_set(err, NB_EINVAL, "run.kernels[%zu].name: required", i);
    for (size_t i = 0; i < r->n_toolchain; i++)
        if (!r->toolchain[i].key || !r->toolchain[i].value)
            return nb_err_set(err, NB_EINVAL, "run.toolchain[%zu]: key and value required", i);
    return NB_OK;
}

static const char run_ins_sql[] =
    "INSERT INTO runs (job_id, job_seq, lease_id, deployment_id, worker_id, runner, kind, "
    "outcome, error, started_ms, finished_ms, "
    "ttft_ms, tps, decode_ms_per_token, tpot_ms, "
    "ttft_mean, tps_mean, decode_mean, tpot_mean, "
    "ttft_stddev, tps_stddev, decode_stddev, tpot_stddev, "
    "prompt_tokens, generated_tokens, context_len, reps, "
    "npubench_commit, board, cpu_info, npu_info, backend, dtype, threads, model_digest, "
    "report_json, regression, regression_detail, source, external_id, verify_status, "
    "measurement_key) VALUES ("
    "?,?,?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?,?,?, ?,?)";

static nb_code insert_row(nb_db *db, const nb_db_run *r, int64_t *id, nb_err *err)
{
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, run_ins_sql, &st, err);
    if (rc)
        return rc;
    int i = 1;
    nb_db_bind_opt_int(st, i++, r->job_id, r->job_id > 0);
    nb_db_bind_opt_int(st, i++, r->job_seq, r->job_id > 0);
    nb_db_bind_opt_str(st, i++, r->lease_id);
    sqlite3_bind_int64(st, i++, r->deployment_id);
    nb_db_bind_opt_str(st, i++, r->worker_id);
    nb_db_bind_opt_str(st, i++, r->runner);
    nb_db_bind_str(st, i++, r->kind);
    nb_db_bind_str(st, i++, nb_db_outcome_name(r->outcome));
    nb_db_bind_opt_str(st, i++, r->error);
    sqlite3_bind_int64(st, i++, r->started_ms);
    nb_db_bind_opt_int(st, i++, r->finished_ms, r->finished_ms > 0);
    for (int m = 0; m < NB_METRIC_N; m++)
        nb_db_bind_opt_double(st, i++, r->value[m]);
    for (int m = 0; m < NB_METRIC_N; m++)
        nb_db_bind_opt_double(st, i++, r->mean[m]);
    for (int m = 0; m < NB_METRIC_N; m++)
        nb_db_bind_opt_double(st, i++, r->stddev[m]);
    nb_db_bind_opt_int(st, i++, r->prompt_tokens, r->prompt_tokens >= 0);
    nb_db_bind_opt_int(st, i++, r->generated_tokens, r->generated_tokens >= 0);
    nb_db_bind_opt_int(st, i++, r->context_len, r->context_len >= 0);
    nb_db_bind_opt_int(st, i++, r->reps, r->reps > 0);
    nb_db_bind_opt_str(st, i++, r->env.npubench_commit);
    nb_db_bind_opt_str(st, i++, r->env.board);
    nb_db_bind_opt_str(st, i++, r->env.cpu_info);
    nb_db_bind_opt_str(st, i++, r->env.npu_info);
    nb_db_bind_opt_str(st, i++, r->env.backend);
    nb_db_bind_opt_str(st, i++, r->env.dtype);
    nb_db_bind_opt_int(st, i++, r->env.threads, r->env.threads > 0);
    nb_db_bind_opt_str(st, i++, r->env.model_digest);
    nb_db_bind_opt_str(st, i++, r->report_json);
    sqlite3_bind_int(st, i++, r->regression ? 1 : 0);
    nb_db_bind_opt_str(st, i++, r->regression_detail);
    nb_db_bind_str(st, i++, nb_db_source_name(r->source));
    nb_db_bind_opt_str(st, i++, r->external_id);
    nb_db_bind_opt_str(st, i++, r->verify_status);
    nb_db_bind_opt_str(st, i++, r->measurement_key);
    rc = nb_db_step_done(db, st, err, "inserting run");
    if (!rc)
        *id = sqlite3_last_insert_rowid(db->h);
    return rc;
}

/* ---- the child rows of a run: one insert per row, each error naming the row ---- */

static nb_code insert_samples(nb_db *db, const nb_db_run *r, int64_t id, nb_err *err)
{
    static const char sql[] = "INSERT INTO samples (run_id, rep, ttft_ms, tps, "
                              "decode_ms_per_token, tpot_ms) VALUES (?,?,?,?,?,?)";
    sqlite3_stmt *st;
    char what[96];
    nb_code rc;
    for (size_t k = 0; k < r->n_samples; k++) {
        const nb_db_sample *s = &r->samples[k];
        if ((rc = nb_db_stmt(db, sql, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, s->rep);
        for (int m = 0; m < NB_METRIC_N; m++)
            nb_db_bind_opt_double(st, 3 + m, s->v[m]);
        snprintf(what, sizeof what, "inserting run.samples[%zu] (rep %d)", k, s->rep);
        if ((rc = nb_db_step_done(db, st, err, what)))
            return rc;
    }
    return NB_OK;
}

static nb_code insert_gate_checks(nb_db *db, const nb_db_run *r, int64_t id, nb_err *err)
{
    static const char sql[] =
        "INSERT INTO gate_checks (run_id, prompt_index, prompt, steps, divergence_step, "
        "device_token, device_text, device_rank, ref_token, ref_text, ref_rank, device_top5, "
        "ref_top5, agreed_prefix, status, reason, localization, localization_verdict, "
        "decode_check, decode_status) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    sqlite3_stmt *st;
    char what[96];
    nb_code rc;
    for (size_t k = 0; k < r->n_gate_checks; k++) {
        const nb_db_gate_check *g = &r->gate_checks[k];
        if ((rc = nb_db_stmt(db, sql, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, g->prompt_index);
        nb_db_bind_opt_str(st, 3, g->prompt);
        sqlite3_bind_int(st, 4, g->steps);
        nb_db_bind_opt_int(st, 5, g->divergence_step, g->divergence_step >= 0);
        sqlite3_bind_int(st, 6, g->device_token);
        nb_db_bind_opt_str(st, 7, g->device_text);
        nb_db_bind_opt_int(st, 8, g->device_rank, g->device_rank >= 0);
        sqlite3_bind_int(st, 9, g->ref_token);
        nb_db_bind_opt_str(st, 10, g->ref_text);
        nb_db_bind_opt_int(st, 11, g->ref_rank, g->ref_rank >= 0);
        nb_db_bind_opt_str(st, 12, g->device_top5_json);
        nb_db_bind_opt_str(st, 13, g->ref_top5_json);
        sqlite3_bind_int(st, 14, g->agreed_prefix);
        nb_db_bind_str(st, 15, g->status);
        nb_db_bind_opt_str(st, 16, g->reason);
        nb_db_bind_opt_str(st, 17, g->localization_json);
        nb_db_bind_opt_str(st, 18, g->localization_verdict);
        nb_db_bind_opt_str(st, 19, g->decode_check_json);
        nb_db_bind_opt_str(st, 20, g->decode_status);
        snprintf(what, sizeof what, "inserting run.gate_checks[%zu] (prompt %d)", k,
                 g->prompt_index);
        if ((rc = nb_db_step_done(db, st, err, what)))
            return rc;
    }
    return NB_OK;
}

static nb_code insert_cosines(nb_db *db, const nb_db_run *r, int64_t id, nb_err *err)
{
    static const char sql[] = "INSERT INTO layer_cosines (run_id, layer, min, p5, median, "
                              "mean, max_abs) VALUES (?,?,?,?,?,?,?)";
    sqlite3_stmt *st;
    char what[96];
    nb_code rc;
    for (size_t k = 0; k < r->n_cosines; k++) {
        const nb_db_layer_cosine *c = &r->cosines[k];
        if ((rc = nb_db_stmt(db, sql, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, c->layer);
        nb_db_bind_opt_double(st, 3, c->min);
        nb_db_bind_opt_double(st, 4, c->p5);
        nb_db_bind_opt_double(st, 5, c->median);
        nb_db_bind_opt_double(st, 6, c->mean);
        nb_db_bind_opt_double(st, 7, c->max_abs);
        snprintf(what, sizeof what, "inserting run.cosines[%zu] (layer %d)", k, c->layer);
        if ((rc = nb_db_step_done(db, st, err, what)))
            return rc;
    }
    return NB_OK;
}

/* Phases and kernels share one row shape; field names the run's field in errors. sql is
 * static: nb_db_stmt caches statements by the address of their text. */
static nb_code insert_profile(nb_db *db, const char *sql, const char *field,
                              const nb_db_profile_entry *e, size_t n, int64_t id, nb_err *err)
{
    char what[96];
    sqlite3_stmt *st;
    nb_code rc;
    for (size_t k = 0; k < n; k++) {
        if ((rc = nb_db_stmt(db, sql, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, (int64_t)k);
        nb_db_bind_str(st, 3, e[k].name);
        sqlite3_bind_int64(st, 4, e[k].calls);
        nb_db_bind_opt_double(st, 5, e[k].total_ms);
        nb_db_bind_opt_double(st, 6, e[k].avg_ms);
        snprintf(what, sizeof what, "inserting run.%s[%zu]", field, k);
        if ((rc = nb_db_step_done(db, st, err, what)))
            return rc;
    }
    return NB_OK;
}

static nb_code insert_toolchain(nb_db *db, const nb_db_run *r, int64_t id, nb_err *err)
{
    static const char sql[] = "INSERT INTO toolchain (run_id, key, value) VALUES (?,?,?)";
    sqlite3_stmt *st;
    char what[96];
    nb_code rc;
    for (size_t k = 0; k < r->n_toolchain; k++) {
        if ((rc = nb_db_stmt(db, sql, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, id);
        nb_db_bind_str(st, 2, r->toolchain[k].key);
        nb_db_bind_str(st, 3, r->toolchain[k].value);
        snprintf(what, sizeof what, "inserting run.toolchain[%zu] (key '%.40s')", k,
                 r->toolchain[k].key);
        if ((rc = nb_db_step_done(db, st, err, what)))
            return rc;
    }
    return NB_OK;
}

static nb_code insert_details(nb_db *db, const nb_db_run *r, int64_t id, nb_err *err)
{
    static const char phase_sql[] = "INSERT INTO profile_phases (run_id, seq, name, calls, "
                                    "total_ms, avg_ms) VALUES (?,?,?,?,?,?)";
    static const char kern_sql[] = "INSERT INTO profile_kernels (run_id, seq, name, calls, "
                                   "total_ms, avg_ms) VALUES (?,?,?,?,?,?)";
    nb_code rc;
    if ((rc = insert_samples(db, r, id, err)) || (rc = insert_gate_checks(db, r, id, err)) ||
        (rc = insert_cosines(db, r, id, err)) ||
        (rc = insert_profile(db, phase_sql, "phases", r->phases, r->n_phases, id, err)) ||
        (rc = insert_profile(db, kern_sql, "kernels", r->kernels, r->n_kernels, id, err)))
        return rc;
    return insert_toolchain(db, r, id, err);
}

static nb_code find_external_locked(nb_db *db, const char *ext, int64_t *id, nb_err *err)
{
    static const char sql[] = "SELECT id FROM runs WHERE external_id = ?";
    return nb_db_find_id(db, sql, ext, id, err, "run", "external id");
}

static nb_code check_deployment(nb_db *db, int64_t id, nb_err *err)
{
    static const char sql[] = "SELECT 1 FROM deployments WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    int s = sqlite3_step(st);
    if (s == SQLITE_DONE)
        rc = nb_err_set(err, NB_EINVAL, "run.deployment_id: no deployment with id %lld",
                        (long long)id);
    else if (s != SQLITE_ROW)
        rc = nb_db_sqlerr(db, err, "checking deployment");
    nb_db_done(st);
    return rc;
}

static nb_code insert_locked(nb_db *db, const nb_db_run *run, int64_t *id, nb_err *err)
{
    if (run->external_id) {
        int64_t other = 0;
        nb_err tmp;
        nb_code f = find_external_locked(db, run->external_id, &other, &tmp);
        if (f == NB_OK)
            return nb_err_set(err, NB_EMISMATCH,
                              "run.external_id '%s' is already stored (run %lld)",
                              run->external_id, (long long)other);
        if (f != NB_ENOTFOUND)
            return nb_err_set(err, f, "%s", tmp.msg);
    }
    nb_code rc = check_deployment(db, run->deployment_id, err);
    if (!rc)
        rc = insert_row(db, run, id, err);
    if (!rc)
        rc = insert_details(db, run, *id, err);
    if (!rc) /* a flagged run opens a regression, a run back in the band fixes its series' */
        rc = nb_db_regress_on_run_locked(db, run, *id, err);
    return rc;
}

nb_code nb_db_run_insert(nb_db *db, const nb_db_run *run, int64_t *id, nb_err *err)
{
    nb_code rc = validate_run(run, err);
    if (rc)
        return rc;
    int64_t new_id = 0;
    NB_DB_WITH_TX(db, err, rc, rc = insert_locked(db, run, &new_id, err));
    if (!rc)
        *id = new_id;
    return rc;
}

nb_code nb_db_run_find_external(nb_db *db, const char *external_id, int64_t *id, nb_err *err)
{
    if (!external_id)
        return nb_err_set(err, NB_EINVAL, "run external id is NULL");
    nb_db_lock(db);
    nb_code rc = find_external_locked(db, external_id, id, err);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_run_set_regression(nb_db *db, int64_t id, int regression, const char *detail,
                                 nb_err *err)
{
    static const char sql[] = "UPDATE runs SET regression = ?, regression_detail = ? "
                              "WHERE id = ?";
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        sqlite3_bind_int(st, 1, regression ? 1 : 0);
        nb_db_bind_opt_str(st, 2, detail);
        sqlite3_bind_int64(st, 3, id);
        rc = nb_db_step_done(db, st, err, "setting regression flag");
        if (!rc && sqlite3_changes(db->h) == 0)
            rc = nb_err_set(err, NB_ENOTFOUND, "no run with id %lld", (long long)id);
    }
    nb_db_unlock(db);
    return rc;
}
