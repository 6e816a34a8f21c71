/* nb_db_runs: a run's words (outcomes, sources, metrics), reading runs and their detail rows back,
 * history queries over (deployment, time) and regression checks; nb_db_run_insert.c writes them. */
#include "nb_db_runs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nb_db_int.h"
#include "nb_outcome.h"
#include "nb_db_series.h"

static const char *const outcome_names[] = {"PASS", "FAIL", "ERROR"};
static const char *const source_names[] = {"local", "service", "import"};
static const char *const metric_names[] = {"ttft", "tps", "decode", "tpot", "gate"};
/* Column names per metric in runs and samples. */
static const char *const value_cols[] = {"ttft_ms", "tps", "decode_ms_per_token", "tpot_ms"};
static const char *const mean_cols[] = {"ttft_mean", "tps_mean", "decode_mean", "tpot_mean"};
static const char *const stddev_cols[] = {"ttft_stddev", "tps_stddev", "decode_stddev",
                                          "tpot_stddev"};

const char *nb_db_outcome_name(nb_db_outcome o)
{
    return (unsigned)o < 3 ? outcome_names[o] : "ERROR";
}

/* One order for both enums, so a stored verdict is an nb_outcome as it is. */
_Static_assert((int)NB_OUTCOME_PASS == (int)NB_OC_PASS && (int)NB_OUTCOME_FAIL == (int)NB_OC_FAIL &&
                   (int)NB_OUTCOME_ERROR == (int)NB_OC_ERROR,
               "nb_db_outcome and nb_outcome order pass, fail, error alike");

const char *nb_db_outcome_word(nb_db_outcome o)
{
    return nb_outcome_name(nb_outcome_of_run((int)o, 0));
}

nb_db_outcome nb_db_run_outcome(nb_db_outcome stored, int regression)
{
    return (nb_db_outcome)nb_outcome_of_run((int)stored, regression);
}

const char *nb_db_source_name(nb_db_source s)
{
    return (unsigned)s < 3 ? source_names[s] : "local";
}

nb_code nb_db_outcome_parse(const char *s, nb_db_outcome *out, nb_err *err)
{
    for (int i = 0; i < 3; i++) {
        if (s && strcasecmp(s, outcome_names[i]) == 0) {
            *out = (nb_db_outcome)i;
            return NB_OK;
        }
    }
    return nb_err_set(err, NB_EINVAL, "outcome '%s': expected PASS, FAIL or ERROR",
                      s ? s : "(null)");
}

static nb_db_outcome outcome_from_text(const char *s)
{
    nb_db_outcome o = NB_OUTCOME_ERROR;
    nb_db_outcome_parse(s, &o, NULL);
    return o;
}

static nb_db_source source_from_text(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, source_names[i]) == 0)
            return (nb_db_source)i;
    return NB_SOURCE_LOCAL;
}

const char *nb_db_metric_name(nb_db_metric m)
{
    return (unsigned)m <= NB_METRIC_GATE ? metric_names[m] : "unknown";
}

nb_code nb_db_metric_parse(const char *s, nb_db_metric *out, nb_err *err)
{
    if (s) {
        for (int i = 0; i <= NB_METRIC_GATE; i++) {
            if (strcasecmp(s, metric_names[i]) == 0 ||
                (i < NB_METRIC_N && strcasecmp(s, value_cols[i]) == 0)) {
                *out = (nb_db_metric)i;
                return NB_OK;
            }
        }
    }
    return nb_err_set(err, NB_EINVAL, "metric '%s': expected tps, ttft, decode, tpot or gate",
                      s ? s : "(null)");
}

int nb_db_metric_higher_is_better(nb_db_metric m) { return m == NB_METRIC_TPS; }

void nb_db_run_init(nb_db_run *run)
{
    memset(run, 0, sizeof *run);
    for (int m = 0; m < NB_METRIC_N; m++)
        run->value[m] = run->mean[m] = run->stddev[m] = NAN;
    run->prompt_tokens = run->generated_tokens = run->context_len = -1;
    run->outcome = NB_OUTCOME_ERROR;
    run->source = NB_SOURCE_LOCAL;
}

nb_code nb_db_job_runs_verdict(nb_db *db, int64_t job_id, size_t *n_runs, nb_db_outcome *worst,
                               nb_err *err)
{
    static const char sql[] =
        "SELECT count(*), max(CASE outcome WHEN 'ERROR' THEN 2 WHEN 'FAIL' THEN 1 "
        "ELSE (CASE WHEN regression = 1 THEN 1 ELSE 0 END) END) "
        "FROM runs WHERE job_id = ?1 OR job_id IN (SELECT id FROM jobs WHERE parent_id = ?1)";
    *n_runs = 0;
    *worst = NB_OUTCOME_PASS;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, job_id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            *n_runs = (size_t)sqlite3_column_int64(st, 0);
            int w = sqlite3_column_int(st, 1);
            *worst = w == NB_OUTCOME_FAIL ? NB_OUTCOME_FAIL
                     : w == NB_OUTCOME_ERROR ? NB_OUTCOME_ERROR
                                             : NB_OUTCOME_PASS;
        }
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

/* ---- get ---- */

/* Counts rows of a detail table for one run so the array can be sized once. */
static nb_code count_rows(nb_db *db, const char *sql, int64_t id, size_t *n, nb_err *err)
{
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW)
        *n = (size_t)sqlite3_column_int64(st, 0);
    else
        rc = nb_db_sqlerr(db, err, "counting run details");
    nb_db_done(st);
    return rc;
}

static void *alloc_array(nb_db_run *out, size_t n, size_t size, int *oom)
{
    if (!n)
        return NULL;
    if (n > SIZE_MAX / size) {
        *oom = 1;
        return NULL;
    }
    void *p = nb_db_arena_alloc(&out->arena_, n * size);
    if (!p)
        *oom = 1;
    else
        memset(p, 0, n * size);
    return p;
}

typedef void (*detail_row_fn)(sqlite3_stmt *st, void *slot, struct nb_db_arena **a, int *oom);

/* One detail table of run id into an arena array sized by count_sql:
 * *arr and *n stay NULL and 0 when it is empty or cannot be allocated. */
static nb_code read_detail(nb_db *db, const char *count_sql, const char *rows_sql, int64_t id,
                           nb_db_run *out, size_t size, detail_row_fn row, void **arr,
                           size_t *n, int *oom, nb_err *err)
{
    size_t want = 0;
    sqlite3_stmt *st;
    nb_code rc = count_rows(db, count_sql, id, &want, err);
    if (rc)
        return rc;
    char *a = alloc_array(out, want, size, oom);
    if ((rc = nb_db_stmt(db, rows_sql, &st, err)))
        return rc;
    sqlite3_bind_int64(st, 1, id);
    size_t k = 0;
    while (a && k < want && sqlite3_step(st) == SQLITE_ROW)
        row(st, a + size * k++, &out->arena_, oom);
    nb_db_done(st);
    *arr = a;
    *n = a ? k : 0;
    return NB_OK;
}

static void sample_row(sqlite3_stmt *st, void *slot, struct nb_db_arena **a, int *oom)
{
    (void)a;
    (void)oom;
    nb_db_sample *s = slot;
    s->rep = sqlite3_column_int(st, 0);
    for (int m = 0; m < NB_METRIC_N; m++)
        s->v[m] = nb_db_col_double(st, 1 + m);
}

static void gate_row(sqlite3_stmt *st, void *slot, struct nb_db_arena **a, int *oom)
{
    nb_db_gate_check *c = slot;
    c->prompt_index = sqlite3_column_int(st, 0);
    c->prompt = nb_db_col_arena_dup(a, st, 1, oom);
    c->steps = sqlite3_column_int(st, 2);
    c->divergence_step = (int)nb_db_col_int(st, 3, -1);
    c->device_token = sqlite3_column_int(st, 4);
    c->device_text = nb_db_col_arena_dup(a, st, 5, oom);
    c->device_rank = (int)nb_db_col_int(st, 6, -1);
    c->ref_token = sqlite3_column_int(st, 7);
    c->ref_text = nb_db_col_arena_dup(a, st, 8, oom);
    c->ref_rank = (int)nb_db_col_int(st, 9, -1);
    c->device_top5_json = nb_db_col_arena_dup(a, st, 10, oom);
    c->ref_top5_json = nb_db_col_arena_dup(a, st, 11, oom);
    c->agreed_prefix = sqlite3_column_int(st, 12);
    c->status = nb_db_col_arena_dup(a, st, 13, oom);
    c->reason = nb_db_col_arena_dup(a, st, 14, oom);
    c->localization_json = nb_db_col_arena_dup(a, st, 15, oom);
    c->localization_verdict = nb_db_col_arena_dup(a, st, 16, oom);
    c->decode_check_json = nb_db_col_arena_dup(a, st, 17, oom);
    c->decode_status = nb_db_col_arena_dup(a, st, 18, oom);
}

static void cosine_row(sqlite3_stmt *st, void *slot, struct nb_db_arena **a, int *oom)
{
    (void)a;
    (void)oom;
    nb_db_layer_cosine *c = slot;
    c->layer = sqlite3_column_int(st, 0);
    c->min = nb_db_col_double(st, 1);
    c->p5 = nb_db_col_double(st, 2);
    c->median = nb_db_col_double(st, 3);
    c->mean = nb_db_col_double(st, 4);
    c->max_abs = nb_db_col_double(st, 5);
}

static void profile_row(sqlite3_stmt *st, void *slot, struct nb_db_arena **a, int *oom)
{
    nb_db_profile_entry *e = slot;
    e->name = nb_db_col_arena_dup(a, st, 0, oom);
    e->calls = sqlite3_column_int64(st, 1);
    e->total_ms = nb_db_col_double(st, 2);
    e->avg_ms = nb_db_col_double(st, 3);
}

static void kv_row(sqlite3_stmt *st, void *slot, struct nb_db_arena **a, int *oom)
{
    nb_db_kv *kv = slot;
    kv->key = nb_db_col_arena_dup(a, st, 0, oom);
    kv->value = nb_db_col_arena_dup(a, st, 1, oom);
}

static nb_code read_details(nb_db *db, int64_t id, nb_db_run *out, int *oom, nb_err *err)
{
    static const char n_samp[] = "SELECT count(*) FROM samples WHERE run_id = ?";
    static const char n_gate[] = "SELECT count(*) FROM gate_checks WHERE run_id = ?";
    static const char n_cos[] = "SELECT count(*) FROM layer_cosines WHERE run_id = ?";
    static const char n_ph[] = "SELECT count(*) FROM profile_phases WHERE run_id = ?";
    static const char n_kern[] = "SELECT count(*) FROM profile_kernels WHERE run_id = ?";
    static const char n_tc[] = "SELECT count(*) FROM toolchain WHERE run_id = ?";
    static const char q_samp[] = "SELECT rep, ttft_ms, tps, decode_ms_per_token, tpot_ms "
                                 "FROM samples WHERE run_id = ? ORDER BY rep";
    static const char q_gate[] =
        "SELECT prompt_index, prompt, steps, divergence_step, device_token, device_text, "
        "device_rank, ref_token, ref_text, ref_rank, device_top5, ref_top5, agreed_prefix, "
        "status, reason, localization, localization_verdict, decode_check, decode_status FROM "
        "gate_checks WHERE run_id = ? "
        "ORDER BY prompt_index";
    static const char q_cos[] = "SELECT layer, min, p5, median, mean, max_abs FROM "
                                "layer_cosines WHERE run_id = ? ORDER BY layer";
    static const char q_ph[] = "SELECT name, calls, total_ms, avg_ms FROM profile_phases "
                               "WHERE run_id = ? ORDER BY seq";
    static const char q_kern[] = "SELECT name, calls, total_ms, avg_ms FROM profile_kernels "
                                 "WHERE run_id = ? ORDER BY seq";
    static const char q_tc[] = "SELECT key, value FROM toolchain WHERE run_id = ? ORDER BY key";
    void *p;
    nb_code rc;
    if ((rc = read_detail(db, n_samp, q_samp, id, out, sizeof *out->samples, sample_row, &p,
                          &out->n_samples, oom, err)))
        return rc;
    out->samples = p;
    if ((rc = read_detail(db, n_gate, q_gate, id, out, sizeof *out->gate_checks, gate_row, &p,
                          &out->n_gate_checks, oom, err)))
        return rc;
    out->gate_checks = p;
    if ((rc = read_detail(db, n_cos, q_cos, id, out, sizeof *out->cosines, cosine_row, &p,
                          &out->n_cosines, oom, err)))
        return rc;
    out->cosines = p;
    if ((rc = read_detail(db, n_ph, q_ph, id, out, sizeof *out->phases, profile_row, &p,
                          &out->n_phases, oom, err)))
        return rc;
    out->phases = p;
    if ((rc = read_detail(db, n_kern, q_kern, id, out, sizeof *out->kernels, profile_row, &p,
                          &out->n_kernels, oom, err)))
        return rc;
    out->kernels = p;
    if ((rc = read_detail(db, n_tc, q_tc, id, out, sizeof *out->toolchain, kv_row, &p,
                          &out->n_toolchain, oom, err)))
        return rc;
    out->toolchain = p;
    return NB_OK;
}

static const char run_get_sql[] =
    "SELECT id, job_id, job_seq, lease_id, deployment_id, worker_id, runner, kind, outcome, "
    "error, started_ms, finished_ms, "
    "ttft_ms, tps, decode_ms_per_token, tpot_ms, "
    "ttft_mean, tps_mean, decode_mean, tpot_mean, "
    "ttft_stddev, tps_stddev, decode_stddev, tpot_stddev, "
    "prompt_tokens, generated_tokens, context_len, reps, "
    "npubench_commit, board, cpu_info, npu_info, backend, dtype, threads, model_digest, "
    "report_json, regression, regression_detail, source, external_id, verify_status, "
    "measurement_key FROM runs WHERE id = ?";

/* The runs row under st into *out, columns in run_get_sql's order; strings in its arena. */
static void read_row(sqlite3_stmt *st, nb_db_run *out, int *oom)
{
    struct nb_db_arena **a = &out->arena_;
    int i = 0;
    out->id = sqlite3_column_int64(st, i++);
    out->job_id = nb_db_col_int(st, i++, 0);
    out->job_seq = (int)nb_db_col_int(st, i++, 0);
    out->lease_id = nb_db_col_arena_dup(a, st, i++, oom);
    out->deployment_id = sqlite3_column_int64(st, i++);
    out->worker_id = nb_db_col_arena_dup(a, st, i++, oom);
    out->runner = nb_db_col_arena_dup(a, st, i++, oom);
    out->kind = nb_db_col_arena_dup(a, st, i++, oom);
    out->outcome = outcome_from_text((const char *)sqlite3_column_text(st, i++));
    out->error = nb_db_col_arena_dup(a, st, i++, oom);
    out->started_ms = sqlite3_column_int64(st, i++);
    out->finished_ms = nb_db_col_int(st, i++, 0);
    for (int m = 0; m < NB_METRIC_N; m++)
        out->value[m] = nb_db_col_double(st, i++);
    for (int m = 0; m < NB_METRIC_N; m++)
        out->mean[m] = nb_db_col_double(st, i++);
    for (int m = 0; m < NB_METRIC_N; m++)
        out->stddev[m] = nb_db_col_double(st, i++);
    out->prompt_tokens = nb_db_col_int(st, i++, -1);
    out->generated_tokens = nb_db_col_int(st, i++, -1);
    out->context_len = nb_db_col_int(st, i++, -1);
    out->reps = (int)nb_db_col_int(st, i++, 0);
    out->env.npubench_commit = nb_db_col_arena_dup(a, st, i++, oom);
    out->env.board = nb_db_col_arena_dup(a, st, i++, oom);
    out->env.cpu_info = nb_db_col_arena_dup(a, st, i++, oom);
    out->env.npu_info = nb_db_col_arena_dup(a, st, i++, oom);
    out->env.backend = nb_db_col_arena_dup(a, st, i++, oom);
    out->env.dtype = nb_db_col_arena_dup(a, st, i++, oom);
    out->env.threads = (int)nb_db_col_int(st, i++, 0);
    out->env.model_digest = nb_db_col_arena_dup(a, st, i++, oom);
    out->report_json = nb_db_col_arena_dup(a, st, i++, oom);
    out->regression = sqlite3_column_int(st, i++);
    out->regression_detail = nb_db_col_arena_dup(a, st, i++, oom);
    char src[16];
    nb_db_col_copy(st, i++, src, sizeof src);
    out->source = source_from_text(src);
    out->external_id = nb_db_col_arena_dup(a, st, i++, oom);
    out->verify_status = nb_db_col_arena_dup(a, st, i++, oom);
    out->measurement_key = nb_db_col_arena_dup(a, st, i++, oom);
}

nb_code nb_db_run_get(nb_db *db, int64_t id, nb_db_run *out, nb_err *err)
{
    nb_db_run_init(out);
    nb_db_lock(db);
    sqlite3_stmt *st;
    int oom = 0;
    nb_code rc = nb_db_stmt(db, run_get_sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW)
            read_row(st, out, &oom);
        else if (s == SQLITE_DONE)
            rc = nb_err_set(err, NB_ENOTFOUND, "no run with id %lld", (long long)id);
        else
            rc = nb_db_sqlerr(db, err, "reading run");
        nb_db_done(st);
    }
    if (!rc)
        rc = read_details(db, id, out, &oom, err);
    nb_db_unlock(db);
    if (!rc && oom)
        rc = nb_err_set(err, NB_ENOMEM, "reading run %lld: out of memory", (long long)id);
    if (rc)
        nb_db_run_free(out);
    return rc;
}

void nb_db_run_free(nb_db_run *run)
{
    if (!run)
        return;
    nb_db_arena_free(run->arena_);
    nb_db_run_init(run);
}

/* ---- history ---- */

/* The toolchain keys history can filter on, as mlir-air's history rows name them
 * (the importer stores perf.json's toolchain entries under the same names). */
static const char *const tc_filter_keys[] = {"air_sha", "aie_hash", "peano"};
#define NB_TC_FILTERS (sizeof tc_filter_keys / sizeof tc_filter_keys[0])

static const char *tc_filter(const nb_db_history_query *q, size_t k)
{
    const char *v = k == 0 ? q->air_sha : k == 1 ? q->aie_hash : q->peano;
    return v && *v ? v : NULL;
}

/* Appends the WHERE clause for q's filters; binds come in the same order
 * in bind_filters. */
static void filter_sql(char *buf, size_t size, const nb_db_history_query *q)
{
    size_t n = strlen(buf);
#define ADD(s) n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s", s)
    ADD(" WHERE 1");
    if (q->model && *q->model)
        ADD(" AND d.model = ?");
    if (q->board && *q->board)
        ADD(" AND d.board = ?");
    if (q->backend && *q->backend)
        ADD(" AND d.backend = ?");
    if (q->dtype && *q->dtype)
        ADD(" AND d.dtype = ?");
    if (q->deployment_id > 0)
        ADD(" AND r.deployment_id = ?");
    if (q->kind && *q->kind)
        ADD(" AND r.kind = ?");
    if (q->context_len > 0)
        ADD(" AND r.context_len = ?");
    if (q->since_ms > 0)
        ADD(" AND r.started_ms >= ?");
    if (q->until_ms > 0)
        ADD(" AND r.started_ms < ?");
    if (q->commit && *q->commit)
        ADD(" AND substr(r.npubench_commit, 1, length(?)) = ?");
    if (q->toolchain && *q->toolchain) {
        /* KEY=VALUE: that entry; a bare VALUE: any entry, or the run's own commit. */
        if (strchr(q->toolchain, '='))
            ADD(" AND EXISTS (SELECT 1 FROM toolchain t WHERE t.run_id = r.id AND t.key = ? "
                "AND substr(t.value, 1, length(?)) = ?)");
        else
            ADD(" AND (EXISTS (SELECT 1 FROM toolchain t WHERE t.run_id = r.id AND "
                "substr(t.value, 1, length(?)) = ?) OR "
                "substr(r.npubench_commit, 1, length(?)) = ?)");
    }
    for (size_t k = 0; k < NB_TC_FILTERS; k++) {
        if (tc_filter(q, k))
            ADD(" AND EXISTS (SELECT 1 FROM toolchain t WHERE t.run_id = r.id AND t.key = ? "
                "AND substr(t.value, 1, length(?)) = ?)");
    }
    if (q->metric == NB_METRIC_GATE) {
        ADD(" AND r.outcome IN ('PASS', 'FAIL')");
    } else {
        ADD(" AND r.");
        ADD(value_cols[q->metric]);
        ADD(" IS NOT NULL");
    }
#undef ADD
}

static int bind_filters(sqlite3_stmt *st, const nb_db_history_query *q)
{
    int i = 1;
    if (q->model && *q->model)
        nb_db_bind_str(st, i++, q->model);
    if (q->board && *q->board)
        nb_db_bind_str(st, i++, q->board);
    if (q->backend && *q->backend)
        nb_db_bind_str(st, i++, q->backend);
    if (q->dtype && *q->dtype)
        nb_db_bind_str(st, i++, q->dtype);
    if (q->deployment_id > 0)
        sqlite3_bind_int64(st, i++, q->deployment_id);
    if (q->kind && *q->kind)
        nb_db_bind_str(st, i++, q->kind);
    if (q->context_len > 0)
        sqlite3_bind_int64(st, i++, q->context_len);
    if (q->since_ms > 0)
        sqlite3_bind_int64(st, i++, q->since_ms);
    if (q->until_ms > 0)
        sqlite3_bind_int64(st, i++, q->until_ms);
    if (q->commit && *q->commit) {
        nb_db_bind_str(st, i++, q->commit);
        nb_db_bind_str(st, i++, q->commit);
    }
    if (q->toolchain && *q->toolchain) {
        const char *eq = strchr(q->toolchain, '='), *v = eq ? eq + 1 : q->toolchain;
        if (eq)
            sqlite3_bind_text(st, i++, q->toolchain, (int)(eq - q->toolchain), SQLITE_TRANSIENT);
        for (int k = 0; k < (eq ? 2 : 4); k++)
            nb_db_bind_str(st, i++, v);
    }
    for (size_t k = 0; k < NB_TC_FILTERS; k++) {
        const char *v = tc_filter(q, k);
        if (!v)
            continue;
        nb_db_bind_str(st, i++, tc_filter_keys[k]);
        nb_db_bind_str(st, i++, v);
        nb_db_bind_str(st, i++, v);
    }
    return i;
}

static nb_code check_query(const nb_db_history_query *q, nb_err *err)
{
    if ((unsigned)q->metric > NB_METRIC_GATE)
        return nb_err_set(err, NB_EINVAL, "history: invalid metric %d", (int)q->metric);
    if (q->limit > NB_DB_HISTORY_MAX)
        return nb_err_set(err, NB_EINVAL, "history: limit %zu exceeds %d", q->limit,
                          NB_DB_HISTORY_MAX);
    return NB_OK;
}

static void bind_history(sqlite3_stmt *st, const void *ud)
{
    const nb_db_history_query *q = ud;
    int i = bind_filters(st, q);
    sqlite3_bind_int64(st, i, (int64_t)(q->limit ? q->limit : 100));
}

static void bind_board(sqlite3_stmt *st, const void *ud) { bind_filters(st, ud); }

typedef struct baseline_args {
    int64_t deployment_id, exclude_id;
    size_t n;
    const char *shape; /* NULL = any series */
} baseline_args;

static void bind_baseline(sqlite3_stmt *st, const void *ud)
{
    const baseline_args *a = ud;
    sqlite3_bind_int64(st, 1, a->deployment_id);
    sqlite3_bind_int64(st, 2, a->exclude_id);
    sqlite3_bind_int64(st, 3, (int64_t)a->n);
    nb_db_bind_opt_str(st, 4, a->shape);
}

static void history_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_history_row *h = slot;
    h->run_id = sqlite3_column_int64(st, 0);
    h->job_id = nb_db_col_int(st, 1, 0);
    h->deployment_id = sqlite3_column_int64(st, 2);
    nb_db_col_copy(st, 3, h->model, sizeof h->model);
    nb_db_col_copy(st, 4, h->board, sizeof h->board);
    nb_db_col_copy(st, 5, h->backend, sizeof h->backend);
    nb_db_col_copy(st, 6, h->dtype, sizeof h->dtype);
    nb_db_col_copy(st, 7, h->weights_digest, sizeof h->weights_digest);
    nb_db_col_copy(st, 8, h->kind, sizeof h->kind);
    nb_db_col_copy(st, 9, h->commit, sizeof h->commit);
    h->outcome = outcome_from_text((const char *)sqlite3_column_text(st, 10));
    char src[16];
    nb_db_col_copy(st, 11, src, sizeof src);
    h->source = source_from_text(src);
    h->started_ms = sqlite3_column_int64(st, 12);
    h->value = nb_db_col_double(st, 13);
    h->mean = nb_db_col_double(st, 14);
    h->stddev = nb_db_col_double(st, 15);
    h->reps = (int)nb_db_col_int(st, 16, 0);
    h->regression = sqlite3_column_int(st, 17);
    nb_db_col_copy(st, 18, h->verify_status, sizeof h->verify_status);
    h->context_len = nb_db_col_int(st, 19, -1);
    h->generated_tokens = nb_db_col_int(st, 20, -1);
    h->prompt_tokens = nb_db_col_int(st, 21, -1);
    h->threads = (int)nb_db_col_int(st, 22, 0);
    h->regression_metrics =
        nb_db_regression_metrics(h->regression, (const char *)sqlite3_column_text(st, 23));
    nb_db_col_copy(st, 24, h->driver, sizeof h->driver);
    nb_db_col_copy(st, 25, h->firmware, sizeof h->firmware);
    nb_db_col_copy(st, 26, h->air_sha, sizeof h->air_sha);
    h->gate_pass = (int)nb_db_col_int(st, 27, 0);
    h->gate_total = (int)nb_db_col_int(st, 28, 0);
}

unsigned nb_db_regression_metrics(int regression, const char *detail)
{
    if (!regression)
        return 0;
    unsigned mask = 0;
    /* entries "; "-separated, each opening with the metric's name (metric_names, as
     * nb_db_run_check_regression writes them) */
    for (const char *p = detail; p && *p;) {
        p += strspn(p, "; ");
        size_t w = strcspn(p, " ;");
        for (int m = 0; m < NB_METRIC_N; m++)
            if (w == strlen(metric_names[m]) && !strncasecmp(p, metric_names[m], w))
                mask |= 1u << m;
        const char *next = strchr(p, ';');
        p = next ? next : NULL;
    }
    return mask ? mask : (1u << NB_METRIC_N) - 1;
}

nb_db_series nb_db_history_row_series(const nb_db_history_row *h)
{
    nb_db_series s = {h->model,          h->backend,          h->dtype,
                      h->board,          h->kind,             h->context_len,
                      h->generated_tokens, h->prompt_tokens, h->threads};
    return s;
}

static void board_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_board_summary *b = slot;
    nb_db_col_copy(st, 0, b->board, sizeof b->board);
    b->n_runs = (size_t)sqlite3_column_int64(st, 1);
    b->mean = nb_db_col_double(st, 2);
    b->min = nb_db_col_double(st, 3);
    b->max = nb_db_col_double(st, 4);
    b->last_ms = sqlite3_column_int64(st, 5);
}

/* A run without samples comes as one NULL-sample row: its headline value. */
static void baseline_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    *(double *)slot = sqlite3_column_type(st, 1) == SQLITE_NULL ? sqlite3_column_double(st, 0)
                                                                 : sqlite3_column_double(st, 1);
}

nb_code nb_db_history(nb_db *db, const nb_db_history_query *q, nb_db_history_row **rows,
                      size_t *n, nb_err *err)
{
    *rows = NULL;
    *n = 0;
    nb_code rc = check_query(q, err);
    if (rc)
        return rc;
    char sql[4096];
    int gate = q->metric == NB_METRIC_GATE;
    snprintf(sql, sizeof sql,
             "SELECT r.id, r.job_id, r.deployment_id, d.model, d.board, d.backend, d.dtype, "
             "d.weights_digest, r.kind, r.npubench_commit, r.outcome, r.source, r.started_ms, "
             "%s, %s, %s, r.reps, r.regression, r.verify_status, r.context_len, "
             "r.generated_tokens, r.prompt_tokens, r.threads, r.regression_detail, "
             "(SELECT value FROM toolchain WHERE run_id = r.id AND key = 'driver'), "
             "(SELECT value FROM toolchain WHERE run_id = r.id AND key = 'firmware'), "
             "(SELECT value FROM toolchain WHERE run_id = r.id AND key = 'air_sha'), %s "
             "FROM runs r JOIN deployments d ON d.id = r.deployment_id",
             gate ? "CASE r.outcome WHEN 'PASS' THEN 1.0 ELSE 0.0 END" : value_cols[q->metric],
             gate ? "NULL" : mean_cols[q->metric], gate ? "NULL" : stddev_cols[q->metric],
             /* on the gate_checks key; only where a gate is asked for */
             gate ? "(SELECT count(*) FROM gate_checks WHERE run_id = r.id AND status = 'PASS'), "
                    "(SELECT count(*) FROM gate_checks WHERE run_id = r.id)"
                  : "0, 0");
    filter_sql(sql, sizeof sql, q);
    size_t len = strlen(sql);
    snprintf(sql + len, sizeof sql - len, " ORDER BY r.started_ms DESC, r.id DESC LIMIT ?");
    void *arr = NULL;
    rc = nb_db_select_all(db, sql, bind_history, q, sizeof **rows, history_row, &arr, n, err,
                          "history query");
    *rows = arr;
    return rc;
}

nb_code nb_db_runs_last(nb_db *db, int64_t deployment_id, nb_db_metric metric, size_t n,
                        nb_db_history_row **rows, size_t *nrows, nb_err *err)
{
    if (deployment_id <= 0 || n == 0) {
        *rows = NULL;
        *nrows = 0;
        return nb_err_set(err, NB_EINVAL, "last runs: need a deployment id (got %lld) and a "
                          "count >= 1 (got %zu)", (long long)deployment_id, n);
    }
    nb_db_history_query q = {.deployment_id = deployment_id, .metric = metric, .limit = n};
    return nb_db_history(db, &q, rows, nrows, err);
}

typedef struct brief_args {
    int64_t deployment_id;
    size_t limit;
} brief_args;

static void bind_brief(sqlite3_stmt *st, const void *ud)
{
    const brief_args *a = ud;
    sqlite3_bind_int64(st, 1, a->deployment_id);
    sqlite3_bind_int64(st, 2, (int64_t)a->limit);
}

static void brief_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_run_brief *b = slot;
    int i = 0;
    b->id = sqlite3_column_int64(st, i++);
    b->started_ms = sqlite3_column_int64(st, i++);
    nb_db_col_copy(st, i++, b->kind, sizeof b->kind);
    b->prompt_tokens = nb_db_col_int(st, i++, -1);
    b->generated_tokens = nb_db_col_int(st, i++, -1);
    b->context_len = nb_db_col_int(st, i++, -1);
    for (int m = 0; m < NB_METRIC_N; m++)
        b->value[m] = nb_db_col_double(st, i++);
    nb_db_col_copy(st, i++, b->measurement_key, sizeof b->measurement_key);
    b->gate_prompts = (int)nb_db_col_int(st, i++, 0);
    b->gate_steps = (int)nb_db_col_int(st, i++, 0);
}

nb_code nb_db_runs_brief(nb_db *db, int64_t deployment_id, size_t limit, nb_db_run_brief **out,
                         size_t *n, nb_err *err)
{
    static const char sql[] =
        "SELECT r.id, r.started_ms, r.kind, r.prompt_tokens, r.generated_tokens, "
        "r.context_len, r.ttft_ms, r.tps, r.decode_ms_per_token, r.tpot_ms, "
        "r.measurement_key, (SELECT count(*) FROM gate_checks g WHERE g.run_id = r.id), "
        "(SELECT max(steps) FROM gate_checks g WHERE g.run_id = r.id) "
        "FROM runs r WHERE r.deployment_id = ? ORDER BY r.started_ms DESC, r.id DESC LIMIT ?";
    *out = NULL;
    *n = 0;
    if (limit == 0 || limit > NB_DB_HISTORY_MAX)
        return nb_err_set(err, NB_EINVAL, "runs of a deployment: limit %zu not in 1..%d", limit,
                          NB_DB_HISTORY_MAX);
    brief_args a = {deployment_id, limit};
    void *arr = NULL;
    nb_code rc = nb_db_select_all(db, sql, bind_brief, &a, sizeof **out, brief_row, &arr, n, err,
                                  "runs of a deployment");
    *out = arr;
    return rc;
}

nb_code nb_db_history_by_board(nb_db *db, const nb_db_history_query *q,
                               nb_db_board_summary **rows, size_t *n, nb_err *err)
{
    *rows = NULL;
    *n = 0;
    nb_code rc = check_query(q, err);
    if (rc)
        return rc;
    char sql[4096];
    const char *v = q->metric == NB_METRIC_GATE
                        ? "CASE r.outcome WHEN 'PASS' THEN 1.0 ELSE 0.0 END"
                        : value_cols[q->metric];
    snprintf(sql, sizeof sql,
             "SELECT d.board, count(*), avg(%s), min(%s), max(%s), max(r.started_ms) "
             "FROM runs r JOIN deployments d ON d.id = r.deployment_id",
             v, v, v);
    filter_sql(sql, sizeof sql, q);
    size_t len = strlen(sql);
    snprintf(sql + len, sizeof sql - len, " GROUP BY d.board ORDER BY d.board");
    void *arr = NULL;
    rc = nb_db_select_all(db, sql, bind_board, q, sizeof **rows, board_row, &arr, n, err,
                          "history-by-board query");
    *rows = arr;
    return rc;
}

/* ---- regression ---- */

nb_code nb_db_runs_baseline(nb_db *db, int64_t deployment_id, nb_db_metric metric, size_t n,
                            int64_t exclude_id, double **out, size_t *count, nb_err *err)
{
    return nb_db_runs_baseline_series(db, deployment_id, NULL, metric, n, exclude_id, out,
                                      count, err);
}

nb_code nb_db_runs_baseline_series(nb_db *db, int64_t deployment_id, const char *shape,
                                   nb_db_metric metric, size_t n, int64_t exclude_id,
                                   double **out, size_t *count, nb_err *err)
{
    *out = NULL;
    *count = 0;
    if ((unsigned)metric >= NB_METRIC_N)
        return nb_err_set(err, NB_EINVAL, "baseline: metric %s has no samples",
                          nb_db_metric_name(metric));
    if (n == 0 || n > NB_DB_HISTORY_MAX)
        return nb_err_set(err, NB_EINVAL, "baseline: run count %zu not in 1..%d", n,
                          NB_DB_HISTORY_MAX);
    const char *col = value_cols[metric];
    char sql[1024];
    /* The LEFT JOIN yields one NULL-sample row for a run without samples,
     * which then contributes its headline value. ?4 NULL: any series. */
    snprintf(sql, sizeof sql,
             "WITH last AS (SELECT id, started_ms, %s AS v FROM runs "
             "WHERE deployment_id = ?1 AND id <> ?2 AND %s IS NOT NULL AND (?4 IS NULL OR "
             "nb_series_shape(kind, context_len, generated_tokens, prompt_tokens, threads) = ?4) "
             "ORDER BY started_ms DESC, id DESC LIMIT ?3) "
             "SELECT last.v, s.%s FROM last LEFT JOIN samples s "
             "ON s.run_id = last.id AND s.%s IS NOT NULL "
             "ORDER BY last.started_ms DESC, last.id DESC, s.rep",
             col, col, col, col);
    baseline_args args = {deployment_id, exclude_id, n, shape};
    void *arr = NULL;
    nb_code rc = nb_db_select_all(db, sql, bind_baseline, &args, sizeof **out, baseline_row,
                                  &arr, count, err, "baseline samples");
    *out = arr;
    return rc;
}

nb_code nb_db_run_check_regression(nb_db *db, const nb_db_run *run,
                                   const nb_db_regression_opts *opts,
                                   nb_db_regression_report *rep, nb_err *err)
{
    static const nb_db_regression_opts dflt = NB_DB_REGRESSION_OPTS_DEFAULT;
    if (!opts)
        opts = &dflt;
    memset(rep, 0, sizeof *rep);
    rep->min_rel_change = opts->min_rel_change;
    if (run->deployment_id <= 0)
        return nb_err_set(err, NB_EINVAL, "regression check: run.deployment_id is required");
    if (run->n_samples && !run->samples)
        return nb_err_set(err, NB_EINVAL, "regression check: run.samples is NULL");
    size_t cap = run->n_samples ? run->n_samples : 1;
    double *cur = malloc(cap * sizeof *cur);
    if (!cur)
        return nb_err_set(err, NB_ENOMEM, "regression check: out of memory");
    size_t dl = 0;
    nb_code rc = NB_OK;
    /* Like with like: a cold `run` is no baseline for a warm `profile`, nor one context of a
     * sweep for another. */
    nb_db_series se = {.kind = run->kind,
                       .context_len = run->context_len,
                       .generated_tokens = run->generated_tokens,
                       .prompt_tokens = run->prompt_tokens,
                       .threads = run->env.threads};
    char shape[NB_DB_SERIES_MAX];
    nb_db_series_shape(&se, shape, sizeof shape);
    for (int m = 0; m < NB_METRIC_N && !rc; m++) {
        size_t nc = 0;
        for (size_t i = 0; i < run->n_samples; i++)
            if (!isnan(run->samples[i].v[m]))
                cur[nc++] = run->samples[i].v[m];
        if (!nc && !isnan(run->value[m]))
            cur[nc++] = run->value[m];
        if (!nc)
            continue;
        double *base = NULL;
        size_t nb = 0;
        rc = nb_db_runs_baseline_series(db, run->deployment_id, shape, (nb_db_metric)m,
                                        opts->last_n, run->id, &base, &nb, err);
        if (rc)
            break;
        if (nb) {
            nb_stats_regression_params p = {opts->min_rel_change, opts->alpha,
                                            nb_db_metric_higher_is_better((nb_db_metric)m)};
            rc = nb_stats_regression(cur, nc, base, nb, &p, &rep->m[m], err);
            if (!rc) {
                rep->checked[m] = 1;
                if (rep->m[m].regression) {
                    rep->regression = 1;
                    if (dl < sizeof rep->detail) {
                        int w = snprintf(rep->detail + dl, sizeof rep->detail - dl,
                                         "%s%s %+.1f%% (median %.4g vs %.4g, p=%.3g, %zu vs "
                                         "%zu samples)",
                                         dl ? "; " : "", metric_names[m],
                                         rep->m[m].rel_change * 100, rep->m[m].new_median,
                                         rep->m[m].base_median, rep->m[m].p, nc, nb);
                        dl += w > 0 ? (size_t)w : 0;
                    }
                }
            }
        }
        free(base);
    }
    free(cur);
    return rc;
}
