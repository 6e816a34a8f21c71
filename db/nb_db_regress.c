/* nb_db_regress: the regressions table — a row per flagged run, kept as it goes from new to
 * acknowledged to fixed; every stored run of a series closes that series' open ones it is
 * back in the band of (called inside nb_db_run_insert's transaction). */
#include "nb_db_regress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"
#include "nb_db_runs.h"
#include "nb_stats.h"

static const char *const state_names[NB_REGRESS_STATE_N] = {"new", "acknowledged", "fixed"};

const char *nb_db_regress_state_name(nb_db_regress_state s)
{
    return (unsigned)s < NB_REGRESS_STATE_N ? state_names[s] : "?";
}

nb_code nb_db_regress_state_parse(const char *field, const char *s, nb_db_regress_state *out,
                                  nb_err *err)
{
    for (int i = 0; s && i < NB_REGRESS_STATE_N; i++)
        if (!strcmp(s, state_names[i])) {
            *out = (nb_db_regress_state)i;
            return NB_OK;
        }
    return nb_err_set(err, NB_EINVAL, "%s '%.64s': expected new, acknowledged or fixed", field,
                      s ? s : "");
}

static nb_db_regress_state state_of(const char *s)
{
    nb_db_regress_state st = NB_REGRESS_NEW;
    nb_err e;
    (void)nb_db_regress_state_parse("state", s, &st, &e);
    return st;
}

/* ---- reading ---- */

#define SELECT_COLS                                                                            \
    "SELECT g.id, g.run_id, g.deployment_id, g.series, d.model, d.board, r.kind, g.detail, "  \
    "g.state, g.created_ms, g.state_ms, g.ack_by, g.ack_note, g.ack_ms, g.fixed_ms, "          \
    "g.fixed_run_id, g.fixed_by, g.fixed_note FROM regressions g "                             \
    "JOIN runs r ON r.id = g.run_id JOIN deployments d ON d.id = g.deployment_id "

static void regression_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_regression *g = slot;
    g->id = sqlite3_column_int64(st, 0);
    g->run_id = sqlite3_column_int64(st, 1);
    g->deployment_id = sqlite3_column_int64(st, 2);
    nb_db_col_copy(st, 3, g->series, sizeof g->series);
    nb_db_col_copy(st, 4, g->model, sizeof g->model);
    nb_db_col_copy(st, 5, g->board, sizeof g->board);
    nb_db_col_copy(st, 6, g->kind, sizeof g->kind);
    nb_db_col_copy(st, 7, g->detail, sizeof g->detail);
    g->state = state_of((const char *)sqlite3_column_text(st, 8));
    g->created_ms = nb_db_col_int(st, 9, 0);
    g->state_ms = nb_db_col_int(st, 10, 0);
    nb_db_col_copy(st, 11, g->ack_by, sizeof g->ack_by);
    nb_db_col_copy(st, 12, g->ack_note, sizeof g->ack_note);
    g->ack_ms = nb_db_col_int(st, 13, 0);
    g->fixed_ms = nb_db_col_int(st, 14, 0);
    g->fixed_run_id = nb_db_col_int(st, 15, 0);
    nb_db_col_copy(st, 16, g->fixed_by, sizeof g->fixed_by);
    nb_db_col_copy(st, 17, g->fixed_note, sizeof g->fixed_note);
}

static nb_code load_metrics(nb_db *db, nb_db_regression *g, nb_err *err)
{
    static const char sql[] = "SELECT metric, base_median, new_median, band, higher_is_better "
                              "FROM regression_metrics WHERE regression_id = ? ORDER BY metric";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, g->id);
    int s;
    g->n_metrics = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW && g->n_metrics < NB_DB_REGRESS_METRICS_MAX) {
        nb_db_regress_metric *m = &g->metrics[g->n_metrics++];
        nb_db_col_copy(st, 0, m->metric, sizeof m->metric);
        m->base_median = nb_db_col_double(st, 1);
        m->new_median = nb_db_col_double(st, 2);
        m->band = nb_db_col_double(st, 3);
        m->higher_is_better = sqlite3_column_int(st, 4) != 0;
    }
    if (s != SQLITE_ROW && s != SQLITE_DONE)
        rc = nb_db_sqlerr(db, err, "reading regression metrics");
    nb_db_done(st);
    return rc;
}

/* One row by the column where_col (id or run_id); under the lock. */
static nb_code get_locked(nb_db *db, const char *sql, int64_t key, const char *what,
                          nb_db_regression *out, nb_err *err)
{
    sqlite3_stmt *st;
    memset(out, 0, sizeof *out);
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        regression_row(st, out, NULL);
    else if (s == SQLITE_DONE)
        rc = nb_err_set(err, NB_ENOTFOUND, "%s %lld", what, (long long)key);
    else
        rc = nb_db_sqlerr(db, err, "reading a regression");
    nb_db_done(st);
    return rc ? rc : load_metrics(db, out, err);
}

static const char by_id_sql[] = SELECT_COLS "WHERE g.id = ?";
static const char by_run_sql[] = SELECT_COLS "WHERE g.run_id = ?";

nb_code nb_db_regress_get(nb_db *db, int64_t id, nb_db_regression *out, nb_err *err)
{
    nb_db_lock(db);
    nb_code rc = get_locked(db, by_id_sql, id, "no regression", out, err);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_regress_of_run(nb_db *db, int64_t run_id, nb_db_regression *out, nb_err *err)
{
    nb_db_lock(db);
    nb_code rc = get_locked(db, by_run_sql, run_id, "no regression of run", out, err);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_regress_list(nb_db *db, unsigned mask, size_t limit, nb_db_regression **out,
                           size_t *n, nb_err *err)
{
    static const char sql[] = SELECT_COLS "WHERE (?1 = 0 OR (?1 >> (CASE g.state WHEN 'new' THEN "
                                          "0 WHEN 'acknowledged' THEN 1 ELSE 2 END)) & 1) "
                                          "ORDER BY g.id DESC LIMIT ?2";
    *out = NULL;
    *n = 0;
    if (limit == 0 || limit > NB_DB_REGRESS_LIST_MAX)
        return nb_err_set(err, NB_EINVAL, "regressions: limit %zu, must be 1..%d", limit,
                          NB_DB_REGRESS_LIST_MAX);
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    void *arr = NULL;
    if (!rc) {
        sqlite3_bind_int64(st, 1, (int64_t)mask);
        sqlite3_bind_int64(st, 2, (int64_t)limit);
        rc = nb_db_collect(db, st, sizeof **out, regression_row, NULL, &arr, n, err, "regressions");
    }
    nb_db_regression *g = arr;
    for (size_t i = 0; !rc && i < *n; i++)
        rc = load_metrics(db, &g[i], err);
    nb_db_unlock(db);
    if (rc) {
        free(arr);
        *n = 0;
        return rc;
    }
    *out = g;
    return NB_OK;
}

nb_code nb_db_regress_count(nb_db *db, size_t n[NB_REGRESS_STATE_N], nb_err *err)
{
    static const char sql[] = "SELECT state, count(*) FROM regressions GROUP BY state";
    for (int i = 0; i < NB_REGRESS_STATE_N; i++)
        n[i] = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW)
            n[state_of((const char *)sqlite3_column_text(st, 0))] +=
                (size_t)sqlite3_column_int64(st, 1);
        if (s != SQLITE_DONE)
            rc = nb_db_sqlerr(db, err, "counting regressions");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

/* ---- a person's actions ---- */

static nb_code check_person(const char *by, const char *note, int note_required, nb_err *err)
{
    if (!by || !*by)
        return nb_err_set(err, NB_EINVAL, "--by: who acts is required (default $USER)");
    if (strlen(by) >= NB_DB_NAME_MAX)
        return nb_err_set(err, NB_EINVAL, "--by: %zu bytes, limit is %d", strlen(by),
                          NB_DB_NAME_MAX - 1);
    if (note_required && (!note || !*note))
        return nb_err_set(err, NB_EINVAL, "--note: why is required (e.g. 'known: driver 2.19 "
                                          "regressed decode, tracked in LAB-12')");
    if (note && strlen(note) >= NB_DB_MSG_MAX)
        return nb_err_set(err, NB_EINVAL, "--note: %zu bytes, limit is %d", strlen(note),
                          NB_DB_MSG_MAX - 1);
    return NB_OK;
}

/* How a fixed regression was fixed, for the refusal of acting on it again. */
static nb_code refuse_fixed(const nb_db_regression *g, const char *act, nb_err *err)
{
    if (*g->fixed_by)
        return nb_err_set(err, NB_EMISMATCH, "regression %lld is already fixed (closed by %s): "
                                             "nothing to %s",
                          (long long)g->id, g->fixed_by, act);
    if (!g->fixed_run_id) /* the fixing run was removed since */
        return nb_err_set(err, NB_EMISMATCH, "regression %lld is already fixed (by a later run "
                                             "back in the noise band): nothing to %s",
                          (long long)g->id, act);
    return nb_err_set(err, NB_EMISMATCH, "regression %lld is already fixed (run %lld is back "
                                         "in the noise band): nothing to %s",
                      (long long)g->id, (long long)g->fixed_run_id, act);
}

static nb_code act(nb_db *db, int64_t id, int close, const char *by, const char *note,
                   nb_db_regression *out, nb_err *err)
{
    static const char ack_sql[] = "UPDATE regressions SET state = 'acknowledged', ack_by = ?, "
                                  "ack_note = ?, ack_ms = ?3, state_ms = ?3 WHERE id = ?4";
    static const char close_sql[] = "UPDATE regressions SET state = 'fixed', fixed_by = ?, "
                                    "fixed_note = ?, fixed_ms = ?3, state_ms = ?3, "
                                    "fixed_run_id = NULL WHERE id = ?4";
    nb_code rc = check_person(by, note, !close, err);
    if (rc)
        return rc;
    nb_db_regression g;
    NB_DB_WITH_TX(db, err, rc, {
        rc = get_locked(db, by_id_sql, id, "no regression", &g, err);
        if (!rc && g.state == NB_REGRESS_FIXED)
            rc = refuse_fixed(&g, close ? "close" : "acknowledge", err);
        sqlite3_stmt *st;
        if (!rc)
            rc = nb_db_stmt(db, close ? close_sql : ack_sql, &st, err);
        if (!rc) {
            nb_db_bind_str(st, 1, by);
            nb_db_bind_str(st, 2, note ? note : "");
            sqlite3_bind_int64(st, 3, nb_db_now_ms(db));
            sqlite3_bind_int64(st, 4, id);
            rc = nb_db_step_done(db, st, err, "updating a regression");
        }
        if (!rc && out)
            rc = get_locked(db, by_id_sql, id, "no regression", out, err);
    });
    return rc;
}

nb_code nb_db_regress_ack(nb_db *db, int64_t id, const char *by, const char *note,
                          nb_db_regression *out, nb_err *err)
{
    return act(db, id, 0, by, note, out, err);
}

nb_code nb_db_regress_close(nb_db *db, int64_t id, const char *by, const char *note,
                            nb_db_regression *out, nb_err *err)
{
    return act(db, id, 1, by, note, out, err);
}

/* ---- a run stored: flagged (a new row) or back in the band (fixes) ---- */

/* The run's series key from its deployment. */
static nb_code series_of(nb_db *db, const nb_db_run *run, char *key, size_t cap, nb_err *err)
{
    static const char sql[] = "SELECT model, backend, dtype, board FROM deployments WHERE id = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, run->deployment_id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        nb_db_done(st);
        return nb_db_sqlerr(db, err, "reading the run's deployment");
    }
    nb_db_series s = {.model = (const char *)sqlite3_column_text(st, 0),
                      .backend = (const char *)sqlite3_column_text(st, 1),
                      .dtype = (const char *)sqlite3_column_text(st, 2),
                      .board = (const char *)sqlite3_column_text(st, 3),
                      .kind = run->kind,
                      .context_len = run->context_len,
                      .generated_tokens = run->generated_tokens,
                      .prompt_tokens = run->prompt_tokens,
                      .threads = run->env.threads};
    nb_db_series_key(&s, key, cap);
    nb_db_done(st);
    return NB_OK;
}

/* The run's value of metric m as the check compares it: the median of its repetitions, else
 * its headline value (NaN when it has none). */
static double run_value(const nb_db_run *run, int m)
{
    double *v = run->n_samples ? malloc(run->n_samples * sizeof *v) : NULL;
    size_t k = 0;
    for (size_t i = 0; v && i < run->n_samples; i++)
        if (!isnan(run->samples[i].v[m]))
            v[k++] = run->samples[i].v[m];
    double med = k ? nb_stats_median(v, k) : run->value[m];
    free(v);
    return med;
}

static int metric_index(const char *name)
{
    for (int m = 0; m < NB_METRIC_N; m++)
        if (!strcmp(name, nb_db_metric_name((nb_db_metric)m)))
            return m;
    return -1;
}

/* Back inside the band on every metric the regression was flagged on (and measured on one at
 * least); a regression flagged before its numbers were kept: the run was not flagged. */
static int back_in_band(const nb_db_regression *g, const nb_db_run *run)
{
    if (run->regression)
        return 0;
    if (!g->n_metrics) {
        for (int m = 0; m < NB_METRIC_N; m++)
            if (!isnan(run_value(run, m)))
                return 1;
        return 0;
    }
    for (size_t i = 0; i < g->n_metrics; i++) {
        const nb_db_regress_metric *x = &g->metrics[i];
        int m = metric_index(x->metric);
        double v = m < 0 ? NAN : run_value(run, m);
        if (isnan(v) || isnan(x->base_median))
            return 0;
        double lim = fabs(x->base_median) * x->band;
        if (x->higher_is_better ? v < x->base_median - lim : v > x->base_median + lim)
            return 0;
    }
    return 1;
}

static nb_code record_new(nb_db *db, const nb_db_run *run, int64_t run_id, const char *series,
                          nb_err *err)
{
    static const char ins[] = "INSERT INTO regressions (run_id, deployment_id, series, detail, "
                              "state, created_ms, state_ms) VALUES (?, ?, ?, ?, 'new', ?6, ?6)";
    static const char ins_m[] = "INSERT INTO regression_metrics (regression_id, metric, "
                                "base_median, new_median, band, higher_is_better) "
                                "VALUES (?, ?, ?, ?, ?, ?)";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, ins, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, run->deployment_id);
    nb_db_bind_str(st, 3, series);
    nb_db_bind_str(st, 4, run->regression_detail);
    sqlite3_bind_int64(st, 6, nb_db_now_ms(db));
    if ((rc = nb_db_step_done(db, st, err, "recording a regression")))
        return rc;
    int64_t gid = sqlite3_last_insert_rowid(db->h);
    const nb_db_regression_report *rep = run->regression_report;
    for (int m = 0; rep && !rc && m < NB_METRIC_N; m++) {
        if (!rep->checked[m] || !rep->m[m].regression)
            continue;
        if ((rc = nb_db_stmt(db, ins_m, &st, err)))
            break;
        sqlite3_bind_int64(st, 1, gid);
        sqlite3_bind_text(st, 2, nb_db_metric_name((nb_db_metric)m), -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 3, rep->m[m].base_median);
        sqlite3_bind_double(st, 4, rep->m[m].new_median);
        sqlite3_bind_double(st, 5, rep->min_rel_change);
        sqlite3_bind_int(st, 6, nb_db_metric_higher_is_better((nb_db_metric)m));
        rc = nb_db_step_done(db, st, err, "recording a regression's metric");
    }
    return rc;
}

nb_code nb_db_regress_on_run_locked(nb_db *db, const nb_db_run *run, int64_t run_id, nb_err *err)
{
    static const char open_sql[] = SELECT_COLS "WHERE g.series = ? AND g.state <> 'fixed' AND "
                                               "r.started_ms < ? ORDER BY g.id";
    static const char fix_sql[] = "UPDATE regressions SET state = 'fixed', fixed_run_id = ?, "
                                  "fixed_ms = ?3, state_ms = ?3, fixed_by = '' WHERE id = ?4";
    char series[NB_DB_SERIES_MAX];
    nb_code rc = series_of(db, run, series, sizeof series, err);
    if (rc)
        return rc;
    if (run->regression)
        return record_new(db, run, run_id, series, err);
    /* the open regressions of this series flagged on a run before this one */
    sqlite3_stmt *st;
    if ((rc = nb_db_stmt(db, open_sql, &st, err)))
        return rc;
    sqlite3_bind_text(st, 1, series, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, run->started_ms);
    void *arr = NULL;
    size_t n = 0;
    rc = nb_db_collect(db, st, sizeof(nb_db_regression), regression_row, NULL, &arr, &n, err,
                       "open regressions");
    nb_db_regression *g = arr;
    for (size_t i = 0; !rc && i < n; i++) {
        if ((rc = load_metrics(db, &g[i], err)) || !back_in_band(&g[i], run))
            continue;
        if ((rc = nb_db_stmt(db, fix_sql, &st, err)))
            break;
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 3, nb_db_now_ms(db));
        sqlite3_bind_int64(st, 4, g[i].id);
        rc = nb_db_step_done(db, st, err, "fixing a regression");
    }
    free(arr);
    return rc;
}
