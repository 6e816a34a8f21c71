/* nb_dash: the dashboard's HTML pages, from the database alone (db/ and common/), so the
 * coordinator serves them live and the CLI exports the same files for a CI artifact. */
#include "nb_dash.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_dash_page.h"
#include "nb_dash_job.h"
#include "nb_dash_loc.h"
#include "nb_dash_regress.h"
#include "nb_db_boards.h"
#include "nb_db_deploy.h"
#include "nb_db_joblog.h"
#include "nb_db_jobs.h"
#include "nb_db_runs.h"
#include "nb_db_workers.h"
#include "nb_dash_plot.h"
#include "nb_svg.h"
#include "nb_time.h"

#define HTML_TYPE "text/html; charset=utf-8"
#define SVG_TYPE "image/svg+xml"
#define MATRIX_RUNS 2000 /* newest verify runs the matrix looks through */

typedef struct page {
    FILE *f;
    char *buf;
    size_t len;
} page;

static nb_code page_open(page *p, nb_err *err)
{
    memset(p, 0, sizeof *p);
    p->f = open_memstream(&p->buf, &p->len);
    return p->f ? NB_OK : nb_err_set(err, NB_ENOMEM, "report: out of memory");
}

/* Closes the stream; on success the buffer moves to *out. */
static nb_code page_close(page *p, nb_code rc, char **out, size_t *len, nb_err *err)
{
    int bad = ferror(p->f);
    if (fclose(p->f) != 0)
        bad = 1;
    if (!rc && (bad || !p->buf))
        rc = nb_err_set(err, NB_ENOMEM, "report: out of memory writing a page");
    if (rc) {
        free(p->buf);
        return rc;
    }
    *out = p->buf;
    *len = p->len;
    return NB_OK;
}

static void opts_fill(const nb_dash_opts *in, nb_dash_opts *o)
{
    if (in)
        *o = *in;
    else {
        memset(o, 0, sizeof *o);
        o->draining = -1;
    }
    if (!o->now_ms)
        o->now_ms = nb_wall_ms();
    /* the band is the regression check's own baseline and threshold */
    static const nb_db_regression_opts check = NB_DB_REGRESSION_OPTS_DEFAULT;
    if (!o->band_runs)
        o->band_runs = check.last_n;
    if (!(o->band_rel > 0))
        o->band_rel = check.min_rel_change;
    if (!o->max_points)
        o->max_points = 100;
    if (!o->max_finished)
        o->max_finished = 50;
}

#define esc nb_svg_escape

static void head_refresh(FILE *f, const char *title, int refresh_s)
{
    nb_dash_head(f, title, refresh_s);
}

static void head(FILE *f, const char *title)
{
    nb_dash_head(f, title, 0);
}

static void foot(FILE *f, const nb_dash_opts *o)
{
    nb_dash_foot(f, o);
}

/* "12 s ago", "3 min ago", ... for a unix ms time; "never" for 0. */
static void age(FILE *f, int64_t now, int64_t then)
{
    if (then <= 0) {
        fputs("never", f);
        return;
    }
    char unit;
    int64_t v = nb_time_age(now, then, &unit);
    fprintf(f, "%" PRId64 " %s ago", v,
            unit == 's' ? "s" : unit == 'm' ? "min" : unit == 'h' ? "h" : "d");
}

static void cell(FILE *f, const char *s)
{
    fputs("<td>", f);
    if (s && *s)
        esc(f, s);
    else
        fputs("<span class=\"unknown\">unknown</span>", f);
    fputs("</td>", f);
}

static void num_cell(FILE *f, double v, double sd)
{
    if (!isfinite(v)) {
        fputs("<td>-</td>", f);
        return;
    }
    fprintf(f, "<td>%.2f", v);
    if (isfinite(sd))
        fprintf(f, " &#177; %.2f", sd);
    fputs("</td>", f);
}

static const char *outcome_class(nb_db_outcome o)
{
    return o == NB_OUTCOME_PASS ? "pass" : o == NB_OUTCOME_FAIL ? "fail" : "error";
}

/* A gate cell's verdict in the outcome words, with the prompts it stands on ("pass 8/8"),
 * so a 1-prompt smoke never reads as a full set; an imported status has no count. */
static void gate_verdict(FILE *f, const nb_db_history_row *r)
{
    fputs(nb_db_outcome_word(r->outcome), f);
    if (r->gate_total > 0)
        fprintf(f, " %d/%d", r->gate_pass, r->gate_total);
}

/* ---- boards ---- */

/* The board's row among b (by name); a board never written reads as unknown, not drained. */
static const nb_db_board *board_of(const nb_db_board *b, size_t n, const char *name)
{
    static const nb_db_board none; /* health unknown, never checked, nothing reported */
    for (size_t i = 0; i < n; i++)
        if (!strcmp(b[i].board, name))
            return &b[i];
    return &none;
}

/* Health as `workers` names it, coloured: ok, failed (quarantined), checking, unknown. */
static void health_cell(FILE *f, const nb_db_board *b)
{
    const char *label = nb_db_board_health_label(b);
    const char *cls = b->check_pending ? "checking"
                      : b->health == NB_HEALTH_OK     ? "pass"
                      : b->health == NB_HEALTH_FAILED ? "fail"
                                                      : "unknown";
    fprintf(f, "<td class=\"health %s\">%s%s</td>", cls, label,
            b->health == NB_HEALTH_FAILED && !b->check_pending ? " (quarantined)" : "");
}

/* The board's own drain, else the coordinator's, which holds every board. */
static void drain_cell(FILE *f, const nb_db_board *b, const nb_dash_opts *o)
{
    if (b->drained)
        fputs("<td class=\"drain drained\">drained</td>", f);
    else if (o->draining > 0)
        fputs("<td class=\"drain\">coordinator draining</td>", f);
    else
        fputs("<td class=\"drain\">no</td>", f);
}

static void checked_cell(FILE *f, const nb_dash_opts *o, const nb_db_board *b)
{
    fputs("<td class=\"checked\">", f);
    age(f, o->now_ms, b->checked_ms);
    if (b->checked_ms) {
        char when[32];
        nb_time_iso(when, b->checked_ms);
        fprintf(f, " <small>%s</small>", when);
    }
    fputs("</td>", f);
}

/* One row per board: its health check, drain and what its worker's probe read. */
static void board_row(FILE *f, const nb_dash_opts *o, const nb_db_board *b, const char *name)
{
    const nb_db_board_versions *v = &b->versions;
    fputs("<tr class=\"board-health\">", f);
    cell(f, name);
    health_cell(f, b);
    checked_cell(f, o, b);
    fputs("<td class=\"detail\">", f);
    esc(f, *b->detail ? b->detail : "-");
    fprintf(f, "</td><td>%d</td>", b->job_errors);
    drain_cell(f, b, o);
    const char *probe[] = {v->driver, v->firmware, v->xrt, v->kernel_path, v->cpu_model,
                           v->toolchain};
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        fprintf(f, "<td class=\"version\">");
        esc(f, *probe[i] ? probe[i] : "unknown");
        fputs("</td>", f);
    }
    fputs("</tr>\n", f);
}

static nb_code page_boards(nb_db *db, const nb_dash_opts *o, FILE *f, nb_err *err)
{
    nb_db_worker *w = NULL;
    nb_db_board *b = NULL;
    size_t n = 0, nb = 0;
    nb_code rc = nb_db_worker_list(db, &w, &n, err);
    if (!rc)
        rc = nb_db_board_list(db, &b, &nb, err);
    if (rc) {
        free(w);
        return rc;
    }
    head_refresh(f, "Boards", 30);
    fprintf(f, "<p>%zu worker%s registered. Coordinator drain: %s.</p>\n", n, n == 1 ? "" : "s",
            o->draining < 0 ? "<span class=\"unknown\">unknown</span>"
            : o->draining   ? "<b>on</b> (no new leases)"
                            : "off");
    fputs("<h2>Workers</h2>\n<table id=\"boards\"><tr><th>Board</th><th>Type</th><th>State"
          "</th><th>Last heartbeat</th><th>Health</th><th>Last check</th><th>Drain</th>"
          "<th>Version</th><th>Host</th><th>Device</th><th>Backends</th><th>Deployments</th>"
          "<th>Tags</th><th>Worker</th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const char *st = nb_db_worker_state_name(w[i].state);
        const nb_db_board *bd = board_of(b, nb, w[i].board_name);
        fputs("<tr class=\"board\">", f);
        cell(f, w[i].board_name);
        cell(f, w[i].board_type);
        fprintf(f, "<td class=\"%s\">%s</td><td>", st, st);
        age(f, o->now_ms, w[i].last_seen_ms);
        fputs("</td>", f);
        health_cell(f, bd);
        checked_cell(f, o, bd);
        drain_cell(f, bd, o);
        cell(f, w[i].version);
        cell(f, w[i].host);
        cell(f, w[i].device_id);
        cell(f, w[i].backends);
        cell(f, w[i].deployments);
        cell(f, w[i].tags);
        cell(f, w[i].id);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    /* per board: a board keeps its health, drain and versions across its workers' restarts,
     * and a drained board without a live worker still shows */
    fputs("<h2>Health and versions</h2>\n<p>A failed health check quarantines the board: it "
          "leases nothing but health checks until one passes. A drained board finishes its job "
          "and leases nothing more. Versions are what its worker's probe read at "
          "registration.</p>\n<table id=\"board-health\"><tr><th>Board</th><th>Health</th>"
          "<th>Last check</th><th>Check result</th><th>Job errors</th><th>Drain</th>"
          "<th>NPU driver</th><th>Firmware</th><th>XRT</th><th>Kernels</th><th>CPU</th>"
          "<th>Toolchain</th></tr>\n",
          f);
    for (size_t i = 0; i < nb; i++)
        board_row(f, o, &b[i], b[i].board);
    for (size_t i = 0; i < n; i++) { /* boards no check, drain or registration wrote yet */
        int seen = 0;
        for (size_t k = 0; k < nb && !seen; k++)
            seen = !strcmp(b[k].board, w[i].board_name);
        for (size_t k = 0; k < i && !seen; k++)
            seen = !strcmp(w[k].board_name, w[i].board_name);
        if (!seen)
            board_row(f, o, board_of(NULL, 0, w[i].board_name), w[i].board_name);
    }
    fputs("</table>\n", f);
    free(w);
    free(b);
    foot(f, o);
    return NB_OK;
}

/* ---- queue ---- */

static void job_rows(FILE *f, nb_db *db, const nb_dash_opts *o, const nb_db_job *j, size_t n)
{
    fputs("<tr><th>Job</th><th>Kind</th><th>State</th><th>Outcome</th><th>Target</th>"
          "<th>Board / tags</th><th>Worker</th><th>Attempts</th><th>Created</th><th>Progress</th>"
          "<th>Why queued / error</th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const char *st = nb_job_state_name(j[i].state), *oc = nb_dash_job_outcome(db, &j[i]);
        fprintf(f, "<tr class=\"job\"><td><a href=\"job-%" PRId64 ".html\">%" PRId64 "</a></td>",
                j[i].id, j[i].id);
        cell(f, j[i].kind);
        cell(f, st);
        fprintf(f, "<td class=\"outcome %s\">%s</td>",
                !strcmp(oc, "pass")                                    ? "pass"
                : !strcmp(oc, "fail")                                  ? "fail"
                : !strcmp(oc, "pending") || !strcmp(oc, "-")           ? "none"
                                                                       : "error",
                oc);
        fputs("<td>", f);
        esc(f, j[i].sel_deployment);
        if (j[i].sel_backend[0]) {
            fputs(" on ", f);
            esc(f, j[i].sel_backend);
        }
        fputs("</td><td>", f);
        esc(f, j[i].sel_board);
        if (j[i].sel_tags[0]) {
            fputs(j[i].sel_board[0] ? " [" : "[", f);
            esc(f, j[i].sel_tags);
            fputs("]", f);
        }
        fputs("</td><td>", f);
        esc(f, j[i].leased_worker);
        fprintf(f, "</td><td>%d/%d</td><td>", j[i].attempts, j[i].max_attempts);
        age(f, o->now_ms, j[i].created_ms);
        fputs("</td><td>", f);
        if (j[i].progress_total > 0 && !nb_job_state_terminal(j[i].state))
            fprintf(f, "%" PRId64 "/%" PRId64, j[i].progress_done, j[i].progress_total);
        fputs("</td><td>", f);
        esc(f, j[i].state == NB_JOB_QUEUED ? j[i].queued_reason : j[i].error);
        fputs("</td></tr>\n", f);
    }
}

static nb_code page_queue(nb_db *db, const nb_dash_opts *o, FILE *f, nb_err *err)
{
    nb_db_job_filter act = {
        .states = NB_JOB_STATE_BIT(NB_JOB_QUEUED) | NB_JOB_STATE_BIT(NB_JOB_LEASED) |
                  NB_JOB_STATE_BIT(NB_JOB_RUNNING),
        .parent_id = -1,
        .limit = 1000,
        .oldest_first = 1};
    nb_db_job_filter fin = {.states = NB_JOB_STATE_BIT(NB_JOB_DONE) |
                                      NB_JOB_STATE_BIT(NB_JOB_FAILED) |
                                      NB_JOB_STATE_BIT(NB_JOB_CANCELLED),
                            .parent_id = -1,
                            .limit = o->max_finished};
    nb_db_job *a = NULL, *d = NULL;
    size_t na = 0, nd = 0;
    nb_code rc = nb_db_job_list(db, &act, &a, &na, err);
    if (!rc)
        rc = nb_db_job_list(db, &fin, &d, &nd, err);
    if (!rc) {
        head_refresh(f, "Queue", 10);
        fprintf(f, "<h2>Queued and running (%zu)</h2>\n<table id=\"active\">\n", na);
        job_rows(f, db, o, a, na);
        fprintf(f, "</table>\n<h2>Recently finished (%zu)</h2>\n<table id=\"finished\">\n", nd);
        job_rows(f, db, o, d, nd);
        fputs("</table>\n", f);
        foot(f, o);
    }
    nb_db_job_list_free(a, na);
    nb_db_job_list_free(d, nd);
    return rc;
}

/* ---- gate matrix: the newest verify / verify-full run per (model, board) ---- */

static int name_index(char (*names)[NB_DB_NAME_MAX], size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(names[i], s))
            return (int)i;
    snprintf(names[*n], NB_DB_NAME_MAX, "%s", s);
    return (int)(*n)++;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static nb_code gate_rows(nb_db *db, nb_db_history_row **rows, size_t *n, nb_err *err)
{
    *rows = NULL;
    *n = 0;
    const char *kinds[] = {nb_job_kind_name(NPUBENCH__JOB_KIND__VERIFY),
                           nb_job_kind_name(NPUBENCH__JOB_KIND__VERIFY_FULL)};
    for (size_t k = 0; k < 2; k++) {
        nb_db_history_query q = {.kind = kinds[k], .metric = NB_METRIC_GATE,
                                 .limit = MATRIX_RUNS};
        nb_db_history_row *r = NULL;
        size_t m = 0;
        nb_code rc = nb_db_history(db, &q, &r, &m, err);
        if (rc) {
            free(*rows);
            return rc;
        }
        nb_db_history_row *all = realloc(*rows, (*n + m + 1) * sizeof *all);
        if (!all) {
            free(r);
            free(*rows);
            return nb_err_set(err, NB_ENOMEM, "report: out of memory");
        }
        if (m)
            memcpy(all + *n, r, m * sizeof *r);
        *rows = all;
        *n += m;
        free(r);
    }
    return NB_OK;
}

/* The matrix cells: index [model * nb + board] of the newest row, -1 when none. */
typedef struct matrix {
    nb_db_history_row *rows;
    size_t n;
    char (*models)[NB_DB_NAME_MAX], (*boards)[NB_DB_NAME_MAX];
    size_t nm, nb;
    long *cell;
} matrix;

static void matrix_free(matrix *m)
{
    free(m->rows);
    free(m->models);
    free(m->boards);
    free(m->cell);
}

static nb_code matrix_build(nb_db *db, matrix *m, nb_err *err)
{
    memset(m, 0, sizeof *m);
    nb_code rc = gate_rows(db, &m->rows, &m->n, err);
    if (rc)
        return rc;
    size_t cap = m->n ? m->n : 1;
    m->models = calloc(cap, sizeof *m->models);
    m->boards = calloc(cap, sizeof *m->boards);
    if (!m->models || !m->boards) {
        matrix_free(m);
        return nb_err_set(err, NB_ENOMEM, "report: out of memory");
    }
    for (size_t i = 0; i < m->n; i++) {
        name_index(m->models, &m->nm, m->rows[i].model);
        name_index(m->boards, &m->nb, m->rows[i].board);
    }
    /* rows and columns in name order, so a page reads the same whatever ran last */
    qsort(m->models, m->nm, sizeof *m->models, cmp_name);
    qsort(m->boards, m->nb, sizeof *m->boards, cmp_name);
    m->cell = malloc((m->nm * m->nb + 1) * sizeof *m->cell);
    if (!m->cell) {
        matrix_free(m);
        return nb_err_set(err, NB_ENOMEM, "report: out of memory");
    }
    for (size_t i = 0; i < m->nm * m->nb; i++)
        m->cell[i] = -1;
    for (size_t i = 0; i < m->n; i++) {
        size_t mi = (size_t)name_index(m->models, &m->nm, m->rows[i].model);
        size_t bi = (size_t)name_index(m->boards, &m->nb, m->rows[i].board);
        long *c = &m->cell[mi * m->nb + bi];
        const nb_db_history_row *r = &m->rows[i];
        if (*c < 0 || r->started_ms > m->rows[*c].started_ms ||
            (r->started_ms == m->rows[*c].started_ms && r->run_id > m->rows[*c].run_id))
            *c = (long)i;
    }
    return NB_OK;
}

static nb_code page_matrix(nb_db *db, const nb_dash_opts *o, FILE *f, nb_err *err)
{
    matrix m;
    nb_code rc = matrix_build(db, &m, err);
    if (rc)
        return rc;
    head(f, "Gate matrix");
    fputs("<p>The newest verify or verify-full run of each model on each board; a cell links "
          "to its run.</p>\n<table id=\"matrix\"><tr><th>Model \\ Board</th>",
          f);
    for (size_t b = 0; b < m.nb; b++) {
        fputs("<th>", f);
        esc(f, m.boards[b]);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (size_t i = 0; i < m.nm; i++) {
        fputs("<tr class=\"matrix-row\"><th>", f);
        esc(f, m.models[i]);
        fputs("</th>", f);
        for (size_t b = 0; b < m.nb; b++) {
            long c = m.cell[i * m.nb + b];
            if (c < 0) {
                fputs("<td>-</td>", f);
                continue;
            }
            const nb_db_history_row *r = &m.rows[c];
            char when[32];
            nb_time_iso(when, r->started_ms);
            fprintf(f, "<td class=\"gate %s\"><a href=\"run-%" PRId64 ".html\">",
                    outcome_class(r->outcome), r->run_id);
            gate_verdict(f, r);
            fputs("</a> ", f);
            esc(f, r->backend);
            fputs("/", f);
            esc(f, r->dtype);
            fprintf(f, " <small>%s</small></td>", when);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (!m.nm)
        fputs("<p>No verify runs yet.</p>\n", f);
    foot(f, o);
    matrix_free(&m);
    return NB_OK;
}

/* ---- deployments ---- */

static nb_code series(nb_db *db, const nb_dash_opts *o, int64_t dep, nb_db_metric metric,
                      nb_db_history_row **rows, size_t *n, nb_err *err)
{
    nb_db_history_query q = {.deployment_id = dep, .metric = metric, .limit = o->max_points};
    nb_code rc = nb_db_history(db, &q, rows, n, err);
    if (rc)
        return rc;
    /* newest first from the db; plots read left to right, oldest first */
    for (size_t i = 0; i < *n / 2; i++) {
        nb_db_history_row t = (*rows)[i];
        (*rows)[i] = (*rows)[*n - 1 - i];
        (*rows)[*n - 1 - i] = t;
    }
    return NB_OK;
}

static nb_code plot(FILE *f, const nb_dash_opts *o, const nb_db_history_row *r, size_t n,
                    nb_db_metric metric, int by_commit, nb_err *err)
{
    nb_dash_plot_in in = {
        .title = metric == NB_METRIC_TTFT ? "TTFT (ms)" : "TPS (decode tokens/s)",
        .unit = metric == NB_METRIC_TTFT ? "ms" : "tokens/s",
        .rows = r,
        .n = n,
        .metric = metric,
        .band_runs = o->band_runs,
        .band_rel = o->band_rel,
        .by_commit = by_commit,
        .link = 1,
    };
    return nb_dash_plot_write(f, &in, err);
}

static const nb_db_history_row *find_run(const nb_db_history_row *r, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].run_id == id)
            return &r[i];
    return NULL;
}

typedef struct dep_data {
    nb_db_deployment d;
    nb_db_history_row *m[3]; /* TTFT, TPS, gate; oldest first */
    size_t n[3];
} dep_data;

static void dep_free(dep_data *dd)
{
    for (int i = 0; i < 3; i++)
        free(dd->m[i]);
}

static nb_code dep_load(nb_db *db, const nb_dash_opts *o, int64_t id, dep_data *dd,
                        nb_err *err)
{
    memset(dd, 0, sizeof *dd);
    nb_code rc = nb_db_deployment_get(db, id, &dd->d, err);
    if (rc == NB_ENOTFOUND)
        return nb_err_set(err, NB_ENOTFOUND, "report: no deployment %" PRId64, id);
    const nb_db_metric ms[3] = {NB_METRIC_TTFT, NB_METRIC_TPS, NB_METRIC_GATE};
    for (int i = 0; !rc && i < 3; i++)
        rc = series(db, o, id, ms[i], &dd->m[i], &dd->n[i], err);
    if (rc)
        dep_free(dd);
    return rc;
}

static void dep_title(FILE *f, const nb_db_deployment *d)
{
    esc(f, d->model);
    fputs(" ", f);
    esc(f, d->backend);
    fputs("/", f);
    esc(f, d->dtype);
    fputs(" on ", f);
    esc(f, d->board);
}

static nb_code page_deployment(nb_db *db, const nb_dash_opts *o, int64_t id, FILE *f,
                               nb_err *err)
{
    dep_data dd;
    nb_code rc = dep_load(db, o, id, &dd, err);
    if (rc)
        return rc;
    char title[NB_DB_NAME_MAX * 4 + 16];
    snprintf(title, sizeof title, "%s %s/%s on %s", dd.d.model, dd.d.backend, dd.d.dtype,
             dd.d.board);
    head(f, title);
    fprintf(f, "<p>Deployment %" PRId64 ", weights ", id);
    esc(f, dd.d.weights_digest[0] ? dd.d.weights_digest : "unknown");
    fprintf(f, ". Each plot draws one line per series (runs alike in kind, tokens, prompt "
               "and threads, named in its legend): runs of different series are never joined "
               "or compared. The shaded band of a series is the median of its previous %zu "
               "runs &#177; %.3g%%, the regression check's threshold; red points are runs it "
               "flagged on that plot's metric (a bigger move that was also significant, "
               "Mann-Whitney p &lt; 0.05). Orange lines mark a change of NPU driver, firmware "
               "or mlir-air commit from the run before. Each point links to its run.</p>\n",
            o->band_runs, o->band_rel * 100);
    for (int k = 0; k < 2 && !rc; k++) {
        nb_db_metric m = k ? NB_METRIC_TPS : NB_METRIC_TTFT;
        fprintf(f, "<div class=\"plot\" id=\"plot-%s\">\n", k ? "tps" : "ttft");
        rc = plot(f, o, dd.m[k], dd.n[k], m, 0, err);
        fprintf(f, "<p><a href=\"deployment-%" PRId64 "-%s.svg\">SVG</a></p></div>\n", id,
                k ? "tps" : "ttft");
        /* the same runs by commit, where they have one */
        if (!rc && nb_dash_plot_commit(dd.m[k], dd.n[k])) {
            fprintf(f, "<div class=\"plot\" id=\"plot-%s-commit\">\n", k ? "tps" : "ttft");
            rc = plot(f, o, dd.m[k], dd.n[k], m, 1, err);
            fputs("</div>\n", f);
        }
    }
    /* every run of the three series, newest first */
    fputs("<h2>Runs</h2>\n<table id=\"runs\"><tr><th>Run</th><th>Started</th><th>Kind</th>"
          "<th>Outcome</th><th>TTFT ms</th><th>TPS</th><th>Commit</th><th>Regression</th>"
          "</tr>\n",
          f);
    size_t tot = dd.n[0] + dd.n[1] + dd.n[2];
    const nb_db_history_row **all = calloc(tot ? tot : 1, sizeof *all);
    size_t na = 0;
    for (int k = 0; all && k < 3; k++)
        for (size_t i = 0; i < dd.n[k]; i++) {
            size_t j = 0;
            while (j < na && all[j]->run_id != dd.m[k][i].run_id)
                j++;
            if (j == na)
                all[na++] = &dd.m[k][i];
        }
    /* insertion sort, newest first: a page holds a few hundred rows at most */
    for (size_t i = 1; i < na; i++)
        for (size_t j = i; j > 0 && (all[j]->started_ms > all[j - 1]->started_ms ||
                                     (all[j]->started_ms == all[j - 1]->started_ms &&
                                      all[j]->run_id > all[j - 1]->run_id));
             j--) {
            const nb_db_history_row *t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    for (size_t i = 0; i < na; i++) {
        const nb_db_history_row *r = all[i];
        const nb_db_history_row *t = find_run(dd.m[0], dd.n[0], r->run_id);
        const nb_db_history_row *p = find_run(dd.m[1], dd.n[1], r->run_id);
        char when[32];
        nb_time_iso(when, r->started_ms);
        fprintf(f, "<tr class=\"run\"><td><a href=\"run-%" PRId64 ".html\">%" PRId64
                   "</a></td><td>%s</td>",
                r->run_id, r->run_id, when);
        cell(f, r->kind);
        nb_db_outcome shown = nb_db_run_outcome(r->outcome, r->regression);
        fprintf(f, "<td class=\"%s\">%s</td>", outcome_class(shown), nb_db_outcome_word(shown));
        num_cell(f, t ? t->value : NAN, t && t->reps > 1 ? t->stddev : NAN);
        num_cell(f, p ? p->value : NAN, p && p->reps > 1 ? p->stddev : NAN);
        cell(f, r->commit);
        fputs(r->regression ? "<td class=\"regression\">REGRESSION</td>" : "<td></td>", f);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    free(all);
    foot(f, o);
    dep_free(&dd);
    return rc;
}

static nb_code svg_deployment(nb_db *db, const nb_dash_opts *o, int64_t id, int tps, FILE *f,
                              nb_err *err)
{
    dep_data dd;
    nb_code rc = dep_load(db, o, id, &dd, err);
    if (rc)
        return rc;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    rc = plot(f, o, dd.m[tps], dd.n[tps], tps ? NB_METRIC_TPS : NB_METRIC_TTFT, 0, err);
    dep_free(&dd);
    return rc;
}

/* ---- overview ---- */

static nb_code page_index(nb_db *db, const nb_dash_opts *o, FILE *f, nb_err *err)
{
    nb_db_worker *w = NULL;
    nb_db_deployment *d = NULL;
    size_t nw = 0, nd = 0;
    nb_db_job_filter act = {.states = NB_JOB_STATE_BIT(NB_JOB_QUEUED) |
                                      NB_JOB_STATE_BIT(NB_JOB_LEASED) |
                                      NB_JOB_STATE_BIT(NB_JOB_RUNNING),
                            .parent_id = -1,
                            .limit = 1000};
    nb_db_job *j = NULL;
    size_t nj = 0;
    nb_db_board *b = NULL;
    size_t nb = 0;
    nb_code rc = nb_db_worker_list(db, &w, &nw, err);
    if (!rc)
        rc = nb_db_board_list(db, &b, &nb, err);
    if (!rc)
        rc = nb_db_deployment_list(db, NULL, &d, &nd, err);
    if (!rc)
        rc = nb_db_job_list(db, &act, &j, &nj, err);
    if (rc)
        goto out;
    size_t count[3] = {0, 0, 0}, quarantined = 0, drained = 0;
    for (size_t i = 0; i < nw; i++)
        if ((unsigned)w[i].state < 3)
            count[w[i].state]++;
    for (size_t i = 0; i < nb; i++) {
        quarantined += b[i].health == NB_HEALTH_FAILED;
        drained += b[i].drained != 0;
    }
    head_refresh(f, "npubench dashboard", 30);
    fprintf(f,
            "<ul id=\"summary\"><li><a href=\"boards.html\">Boards</a>: %zu alive, %zu stale, "
            "%zu gone; %zu quarantined, %zu drained</li><li><a href=\"queue.html\">Queue</a>: "
            "%zu queued or running</li><li><a href=\"matrix.html\">Gate matrix</a>: the newest "
            "verify per model and board</li>",
            count[0], count[1], count[2], quarantined, drained, nj);
    nb_dash_regress_summary(f, db);
    fputs("</ul>\n", f);
    fputs("<h2>Deployments</h2>\n<table id=\"deployments\"><tr><th>Model</th><th>Backend / "
          "dtype</th><th>Board</th><th>Gate</th><th>Latest TTFT ms</th><th>Latest TPS</th>"
          "<th>Latest run</th></tr>\n",
          f);
    for (size_t i = 0; i < nd; i++) {
        fprintf(f, "<tr class=\"deployment\"><td><a href=\"deployment-%" PRId64 ".html\">",
                d[i].id);
        esc(f, d[i].model);
        fputs("</a></td><td>", f);
        esc(f, d[i].backend);
        fputs("/", f);
        esc(f, d[i].dtype);
        fputs("</td>", f);
        cell(f, d[i].board);
        /* the newest verify's verdict (a FAIL showed as "-": there was no gate column),
         * with its kind: a 2-prompt verify is not a verify-full */
        {
            nb_db_history_row *g = NULL;
            size_t ng = 0;
            nb_err eg = {0};
            if (nb_db_runs_last(db, d[i].id, NB_METRIC_GATE, 1, &g, &ng, &eg) || !ng) {
                fputs("<td class=\"gate\">-</td>", f);
            } else {
                fprintf(f, "<td class=\"gate %s\"><a href=\"run-%" PRId64 ".html\">",
                        outcome_class(g[0].outcome), g[0].run_id);
                gate_verdict(f, &g[0]);
                fputs("</a> <small>", f);
                esc(f, g[0].kind);
                fputs("</small></td>", f);
            }
            free(g);
        }
        const nb_db_metric ms[2] = {NB_METRIC_TTFT, NB_METRIC_TPS};
        int64_t last = 0;
        int flagged = 0;
        for (int k = 0; k < 2; k++) {
            nb_db_history_row *r = NULL;
            size_t n = 0;
            nb_err e2 = {0};
            if (nb_db_runs_last(db, d[i].id, ms[k], 1, &r, &n, &e2) || !n) {
                fputs("<td>-</td>", f);
            } else {
                num_cell(f, r[0].value, NAN);
                if (r[0].run_id > last)
                    last = r[0].run_id;
                flagged |= r[0].regression;
            }
            free(r);
        }
        if (last)
            fprintf(f, "<td><a href=\"run-%" PRId64 ".html\">run %" PRId64 "</a>%s</td>", last,
                    last, flagged ? " <span class=\"regression\">REGRESSION</span>" : "");
        else
            fputs("<td>-</td>", f);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    foot(f, o);
out:
    free(w);
    free(b);
    free(d);
    nb_db_job_list_free(j, nj);
    return rc;
}

/* A profile's breakdown as bar charts (it was raw JSON only): its report's "phases" (average
 * ms per call) and "kernels" (total ms over the repetitions). Nothing for other reports. */
static void profile_bars(FILE *f, const char *report_json)
{
    json_object *root = json_tokener_parse(report_json);
    static const char *const keys[2] = {"phases", "kernels"};
    static const char *const fields[2] = {"avg_ms", "total_ms"};
    static const char *const titles[2] = {"Phases (average per call)",
                                          "Kernels (total over the repetitions)"};
    for (int k = 0; root && k < 2; k++) {
        json_object *arr, *o, *v;
        if (!json_object_object_get_ex(root, keys[k], &arr) ||
            !json_object_is_type(arr, json_type_array) || !json_object_array_length(arr))
            continue;
        size_t n = json_object_array_length(arr);
        if (n > 64)
            n = 64;
        const char *names[64];
        double values[64];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            o = json_object_array_get_idx(arr, i);
            if (!json_object_is_type(o, json_type_object) ||
                !json_object_object_get_ex(o, "name", &v))
                continue;
            names[m] = json_object_get_string(v);
            values[m] = json_object_object_get_ex(o, fields[k], &v) ? json_object_get_double(v)
                                                                   : NAN;
            m++;
        }
        if (!m)
            continue;
        fprintf(f, "<div class=\"plot\" id=\"profile-%s\">\n", keys[k]);
        nb_err e;
        (void)nb_svg_bars_write(f, titles[k], "ms", names, values, m, &e);
        fputs("</div>\n", f);
    }
    json_object_put(root);
}

/* ---- one run: its report ---- */

/* A toolchain entry of the run, NULL when absent. */
static const char *toolchain_of(const nb_db_run *r, const char *key)
{
    for (size_t i = 0; i < r->n_toolchain; i++)
        if (r->toolchain[i].key && !strcmp(r->toolchain[i].key, key))
            return r->toolchain[i].value;
    return NULL;
}

/* The reference a verify compared against, as its trace says it was made ("bfloat16 on cuda
 * (NVIDIA H200)"), with the warning a reference not in bf16 gets (docs/numerics.md). */
static void reference_row(FILE *f, const nb_db_run *r)
{
    const char *dt = toolchain_of(r, "reference_dtype"), *dev = toolchain_of(r, "reference_device");
    if (!dt && !dev)
        return;
    int warn = dt && strcmp(dt, "bfloat16");
    fprintf(f, "<tr><th>Reference</th><td class=\"%s\">", warn ? "warn" : "");
    esc(f, dt ? dt : "dtype not recorded");
    fputs(" on ", f);
    esc(f, dev ? dev : "a device not recorded");
    if (warn)
        fputs(": not bfloat16, its margins and near ties are not the bf16 gate's", f);
    fputs("</td></tr>\n", f);
}

static nb_code page_run(nb_db *db, const nb_dash_opts *o, int64_t id, FILE *f, nb_err *err)
{
    nb_db_run r;
    nb_code rc = nb_db_run_get(db, id, &r, err);
    if (rc == NB_ENOTFOUND)
        return nb_err_set(err, NB_ENOTFOUND, "report: no run %" PRId64, id);
    if (rc)
        return rc;
    nb_db_deployment d;
    memset(&d, 0, sizeof d);
    nb_err e2 = {0};
    int have_dep = nb_db_deployment_get(db, r.deployment_id, &d, &e2) == NB_OK;
    char title[64], when[32];
    snprintf(title, sizeof title, "Run %" PRId64, id);
    head(f, title);
    nb_time_iso(when, r.started_ms);
    fputs("<table id=\"run\">", f);
    fputs("<tr><th>Deployment</th><td>", f);
    if (have_dep) {
        fprintf(f, "<a href=\"deployment-%" PRId64 ".html\">", d.id);
        dep_title(f, &d);
        fputs("</a>", f);
    }
    fprintf(f, "</td></tr>\n<tr><th>Kind</th><td>");
    esc(f, r.kind);
    size_t n_defect = 0;
    size_t n_pass = 0;
    for (size_t i = 0; i < r.n_gate_checks; i++) {
        n_defect += r.gate_checks[i].decode_status && !strcmp(r.gate_checks[i].decode_status,
                                                              "fault");
        n_pass += !strcmp(r.gate_checks[i].status, "PASS");
    }
    nb_db_outcome shown = nb_db_run_outcome(r.outcome, r.regression);
    fprintf(f, "</td></tr>\n<tr><th>Outcome</th><td class=\"%s\">%s",
            shown == NB_OUTCOME_PASS && n_defect ? "warn" : outcome_class(shown),
            nb_db_outcome_word(shown));
    if (r.n_gate_checks) /* how many prompts the verdict stands on: a smoke's 1/1 is not 8/8 */
        fprintf(f, " %zu/%zu prompts", n_pass, r.n_gate_checks);
    if (n_defect) /* a PASS of the production gate, flagged; or a strict run's FAIL */
        fprintf(f, " (%zu decode-path defect%s)", n_defect, n_defect == 1 ? "" : "s");
    if (r.regression) {
        fputs(" (REGRESSION", f);
        if (r.regression_detail && *r.regression_detail) {
            fputs(": ", f);
            esc(f, r.regression_detail);
        }
        fputs(")", f);
    }
    if (r.error && *r.error) {
        fputs(": ", f);
        esc(f, r.error);
    }
    fprintf(f, "</td></tr>\n<tr><th>Started</th><td>%s</td></tr>\n<tr><th>Job</th><td>", when);
    if (r.job_id > 0) /* its page, with the log */
        fprintf(f, "<a href=\"job-%" PRId64 ".html\">job %" PRId64 "</a>", r.job_id, r.job_id);
    else
        fputs("none", f);
    fprintf(f, "</td></tr>\n<tr><th>Source</th><td>%s</td></tr>\n<tr><th>Commit</th>",
            nb_db_source_name(r.source));
    cell(f, r.env.npubench_commit);
    fputs("</tr>\n<tr><th>Worker</th>", f);
    cell(f, r.worker_id);
    fputs("</tr>\n", f);
    reference_row(f, &r);
    fprintf(f, "<tr><th>Regression</th><td class=\"%s\">", r.regression ? "regression" : "");
    esc(f, r.regression ? (r.regression_detail && *r.regression_detail ? r.regression_detail
                                                                       : "REGRESSION")
                        : "none");
    fputs("</td></tr>\n", f);
    nb_dash_regress_run_row(f, db, id);
    fputs("</table>\n", f);
    fputs("<h2>Metrics</h2>\n<table id=\"metrics\"><tr><th>Metric</th><th>Value</th>"
          "<th>Mean &#177; stddev</th></tr>\n",
          f);
    for (int m = 0; m < NB_METRIC_N; m++) {
        if (!isfinite(r.value[m]))
            continue;
        fprintf(f, "<tr class=\"metric\"><td>%s</td>", nb_db_metric_name((nb_db_metric)m));
        num_cell(f, r.value[m], NAN);
        num_cell(f, r.mean[m], r.reps > 1 ? r.stddev[m] : NAN);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    size_t n_loc = 0;
    for (size_t i = 0; i < r.n_gate_checks; i++)
        n_loc += r.gate_checks[i].localization_json && *r.gate_checks[i].localization_json;
    if (r.n_gate_checks) {
        fputs("<h2>Gate</h2>\n<table id=\"gate\"><tr><th>Prompt</th><th>Status</th><th>Steps"
              "</th><th>Divergence</th><th>Device token</th><th>Reference token</th><th>Reason"
              "</th><th>Decode path</th>",
              f);
        fputs(n_loc ? "<th>Localized</th></tr>\n" : "</tr>\n", f);
        for (size_t i = 0; i < r.n_gate_checks; i++) {
            char lbl_d[300];
            const nb_db_gate_check *g = &r.gate_checks[i];
            int pass = g->status && !strcmp(g->status, "PASS");
            /* a PASS of the production gate whose decode path is not right: flagged, not hidden */
            int defect = g->decode_status && !strcmp(g->decode_status, "fault");
            fprintf(f, "<tr class=\"gate-check\"><td>%d</td><td class=\"%s\">", g->prompt_index,
                    pass && defect ? "warn" : pass ? "pass" : "fail");
            esc(f, g->status);
            if (pass && defect)
                fputs(" (decode-path defect)", f);
            fprintf(f, "</td><td>%d</td><td>", g->steps);
            if (g->divergence_step >= 0)
                fprintf(f, "%d", g->divergence_step);
            else
                fputs("none", f);
            fprintf(f, "</td><td>%d ", g->device_token);
            esc(f, g->device_text);
            fprintf(f, "</td><td>%d ", g->ref_token);
            esc(f, g->ref_text);
            fputs("</td><td>", f);
            esc(f, g->reason);
            fprintf(f, "</td><td class=\"decode-%s\">", defect ? "fault" : "ok");
            if (g->decode_check_json && *g->decode_check_json)
                esc(f, nb_dash_loc_decode_label(g->decode_check_json, lbl_d, sizeof lbl_d));
            else
                fputs("not checked", f);
            if (n_loc && g->localization_json && *g->localization_json) {
                char lbl[128];
                fputs("</td><td class=\"loc-verdict\">", f);
                esc(f, nb_dash_loc_label(g->localization_json, g->localization_verdict, lbl,
                                         sizeof lbl));
            } else if (n_loc) {
                fputs("</td><td>", f);
            }
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    if (n_loc) {
        fputs("<h2>Localization</h2>\n<p>Where each diverging prompt left the reference: a near "
              "tie (the reference's own margin within the bf16 band), the KV cache / decode path "
              "(decode steps against a cache-free prefill of the same tokens), or the first layer "
              "and sub-block whose hidden state falls below the cosine threshold; the first drop "
              "is the finding, what follows it downstream damage (docs/localization.md).</p>\n",
              f);
        for (size_t i = 0; i < r.n_gate_checks; i++) {
            const nb_db_gate_check *g = &r.gate_checks[i];
            if (g->localization_json && *g->localization_json)
                nb_dash_loc_write(f, g->prompt_index, g->localization_json,
                                  g->localization_verdict);
        }
    }
    if (r.report_json && *r.report_json)
        profile_bars(f, r.report_json);
    if (r.report_json && *r.report_json) {
        fputs("<h2>Report</h2>\n<pre id=\"report\">", f);
        esc(f, r.report_json);
        fputs("</pre>\n", f);
    }
    foot(f, o);
    nb_db_run_free(&r);
    return NB_OK;
}

/* ---- names ---- */

typedef enum pkind { P_NONE, P_INDEX, P_BOARDS, P_QUEUE, P_MATRIX, P_DEP, P_SVG_TTFT,
                     P_SVG_TPS, P_RUN, P_JOB, P_JOB_LOG, P_BAD_JOB, P_REGRESS } pkind;

/* A positive decimal id then exactly suffix; no sign, no leading zeros, no overflow. */
static int parse_id(const char *s, const char *suffix, int64_t *id)
{
    if (*s < '1' || *s > '9')
        return 0;
    int64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (INT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (*s - '0');
    }
    *id = v;
    return !strcmp(s, suffix);
}

static pkind parse_name(const char *name, int64_t *id)
{
    if (!name || strlen(name) >= NB_DASH_NAME_MAX)
        return P_NONE;
    if (!strcmp(name, "") || !strcmp(name, "index.html"))
        return P_INDEX;
    if (!strcmp(name, "boards.html"))
        return P_BOARDS;
    if (!strcmp(name, "queue.html"))
        return P_QUEUE;
    if (!strcmp(name, "matrix.html"))
        return P_MATRIX;
    if (!strcmp(name, "regressions.html"))
        return P_REGRESS;
    if (!strncmp(name, "run-", 4))
        return parse_id(name + 4, ".html", id) ? P_RUN : P_NONE;
    if (!strncmp(name, "job-", 4)) { /* a job's page and its log: an id that is none is said */
        const char *s = name + 4, *end = strchr(s, '.');
        if (end && (!strcmp(end, ".html") || !strcmp(end, ".json")) &&
            (parse_id(s, ".html", id) || parse_id(s, "-log.json", id)))
            return !strcmp(end, ".html") ? P_JOB : P_JOB_LOG;
        return end && (!strcmp(end, ".html") || !strcmp(end, ".json")) ? P_BAD_JOB : P_NONE;
    }
    if (!strncmp(name, "deployment-", 11)) {
        const char *s = name + 11;
        if (parse_id(s, ".html", id))
            return P_DEP;
        if (parse_id(s, "-ttft.svg", id))
            return P_SVG_TTFT;
        if (parse_id(s, "-tps.svg", id))
            return P_SVG_TPS;
    }
    return P_NONE;
}

nb_code nb_dash_page(nb_db *db, const nb_dash_opts *opts, const char *name, char **out,
                       size_t *len, const char **ctype, nb_err *err)
{
    *out = NULL;
    *len = 0;
    *ctype = HTML_TYPE;
    nb_dash_opts o;
    opts_fill(opts, &o);
    int64_t id = 0;
    /* "name?query": only a job's log reads its query (after=SEQ) */
    char path[NB_DASH_NAME_MAX];
    const char *q = name ? strchr(name, '?') : NULL;
    if (q && (size_t)(q - name) < sizeof path) {
        memcpy(path, name, (size_t)(q - name));
        path[q - name] = '\0';
    }
    pkind k = parse_name(q ? ((size_t)(q - name) < sizeof path ? path : NULL) : name, &id);
    if (k == P_NONE)
        return nb_err_set(err, NB_ENOTFOUND, "report: no page '%.*s'", NB_DASH_NAME_MAX,
                          name ? name : "");
    if (k == P_BAD_JOB)
        return nb_err_set(err, NB_EINVAL,
                          "report: '%.*s': a job is named by its id, a whole number from 1 to "
                          "%" PRId64 " (job-ID.html, job-ID-log.json)",
                          NB_DASH_NAME_MAX, q ? path : name, INT64_MAX);
    page p;
    nb_code rc = page_open(&p, err);
    if (rc)
        return rc;
    switch (k) {
    case P_INDEX: rc = page_index(db, &o, p.f, err); break;
    case P_BOARDS: rc = page_boards(db, &o, p.f, err); break;
    case P_QUEUE: rc = page_queue(db, &o, p.f, err); break;
    case P_MATRIX: rc = page_matrix(db, &o, p.f, err); break;
    case P_DEP: rc = page_deployment(db, &o, id, p.f, err); break;
    case P_SVG_TTFT:
    case P_SVG_TPS:
        *ctype = SVG_TYPE;
        rc = svg_deployment(db, &o, id, k == P_SVG_TPS, p.f, err);
        break;
    case P_RUN: rc = page_run(db, &o, id, p.f, err); break;
    case P_JOB: rc = nb_dash_job_page(db, &o, id, p.f, err); break;
    case P_REGRESS: rc = nb_dash_regress_page(db, &o, p.f, err); break;
    case P_JOB_LOG:
        *ctype = "application/json";
        rc = nb_dash_job_log_json(db, id, q ? q + 1 : NULL, p.f, err);
        break;
    case P_NONE:
    case P_BAD_JOB: break;
    }
    return page_close(&p, rc, out, len, err);
}

/* ---- export ---- */

typedef struct idset {
    int64_t *v;
    size_t n, cap;
} idset;

static int idset_add(idset *s, int64_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == id)
            return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = id;
    return 0;
}

/* The job pages of an export, and the runs they link to. */
typedef struct job_ids {
    idset *jobs, *runs;
} job_ids;

static nb_code add_job_id(void *ud, int is_run, int64_t id, nb_err *err)
{
    job_ids *k = ud;
    return idset_add(is_run ? k->runs : k->jobs, id)
               ? nb_err_set(err, NB_ENOMEM, "report: out of memory")
               : NB_OK;
}

static nb_code emit(nb_db *db, const nb_dash_opts *o, const char *name, nb_dash_sink sink,
                    void *ud, size_t *count, nb_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    const char *ct;
    nb_code rc = nb_dash_page(db, o, name, &buf, &len, &ct, err);
    if (!rc)
        rc = sink(ud, name, buf, len, err);
    free(buf);
    if (!rc)
        (*count)++;
    return rc;
}

nb_code nb_dash_export(nb_db *db, const nb_dash_opts *opts, nb_dash_sink sink, void *ud,
                         size_t *n_files, nb_err *err)
{
    nb_dash_opts o;
    opts_fill(opts, &o);
    size_t count = 0;
    idset runs = {0};
    nb_db_deployment *d = NULL;
    size_t nd = 0;
    matrix m = {0};
    const char *fixed[] = {"index.html", "boards.html", "queue.html", "matrix.html",
                           "regressions.html"};
    nb_code rc = NB_OK;
    for (size_t i = 0; !rc && i < 5; i++)
        rc = emit(db, &o, fixed[i], sink, ud, &count, err);
    idset jobs = {0};
    job_ids ji = {&jobs, &runs};
    if (!rc)
        rc = nb_dash_job_export_ids(db, o.max_finished, add_job_id, &ji, err);
    if (!rc)
        rc = nb_dash_regress_export_ids(db, add_job_id, &ji, err);
    if (!rc)
        rc = nb_db_deployment_list(db, NULL, &d, &nd, err);
    for (size_t i = 0; !rc && i < nd; i++) {
        char name[NB_DASH_NAME_MAX];
        const char *fmt[] = {"deployment-%" PRId64 ".html", "deployment-%" PRId64 "-ttft.svg",
                             "deployment-%" PRId64 "-tps.svg"};
        for (int k = 0; !rc && k < 3; k++) {
            snprintf(name, sizeof name, fmt[k], d[i].id);
            rc = emit(db, &o, name, sink, ud, &count, err);
        }
        dep_data dd;
        if (!rc)
            rc = dep_load(db, &o, d[i].id, &dd, err);
        if (rc)
            break;
        for (int k = 0; k < 3; k++)
            for (size_t j = 0; j < dd.n[k]; j++)
                if (idset_add(&runs, dd.m[k][j].run_id))
                    rc = nb_err_set(err, NB_ENOMEM, "report: out of memory");
        dep_free(&dd);
    }
    if (!rc)
        rc = matrix_build(db, &m, err);
    for (size_t i = 0; !rc && i < m.nm * m.nb; i++)
        if (m.cell[i] >= 0 && idset_add(&runs, m.rows[m.cell[i]].run_id))
            rc = nb_err_set(err, NB_ENOMEM, "report: out of memory");
    /* every run's job and what that job's page links to, until nothing new comes */
    for (size_t r = 0, k = 0; !rc && (r < runs.n || k < jobs.n);) {
        if (r < runs.n) {
            int64_t job = 0;
            rc = nb_db_run_job(db, runs.v[r++], &job, err);
            if (!rc && job > 0)
                rc = add_job_id(&ji, 0, job, err);
        } else {
            rc = nb_dash_job_linked_ids(db, jobs.v[k++], add_job_id, &ji, err);
        }
    }
    for (size_t i = 0; !rc && i < jobs.n; i++) {
        char name[NB_DASH_NAME_MAX];
        snprintf(name, sizeof name, "job-%" PRId64 ".html", jobs.v[i]);
        rc = emit(db, &o, name, sink, ud, &count, err);
    }
    free(jobs.v);
    for (size_t i = 0; !rc && i < runs.n; i++) {
        char name[NB_DASH_NAME_MAX];
        snprintf(name, sizeof name, "run-%" PRId64 ".html", runs.v[i]);
        rc = emit(db, &o, name, sink, ud, &count, err);
    }
    matrix_free(&m);
    free(d);
    free(runs.v);
    if (n_files)
        *n_files = count;
    return rc;
}
