/* nb_dash_regress: regressions as LNT shows them — one row per flagged run with its state and
 * who did what — and the state on the flagged run's own page. */
#include "nb_dash_regress.h"

#include <inttypes.h>
#include <stdlib.h>

#include "nb_dash_page.h"
#include "nb_db_regress.h"
#include "nb_svg.h"
#include "nb_time.h"

#define esc nb_svg_escape

static void when(FILE *f, int64_t ms)
{
    char buf[32];
    if (ms > 0) {
        nb_time_iso(buf, ms);
        fputs(buf, f);
    }
}

/* What happened to it, in words: acknowledged by whom (why), fixed by which run or person. */
static void history(FILE *f, const nb_db_regression *g)
{
    if (g->ack_ms > 0) {
        fputs("<span class=\"ack\">acknowledged by ", f);
        esc(f, g->ack_by);
        fputs(" at ", f);
        when(f, g->ack_ms);
        fputs(": ", f);
        esc(f, g->ack_note);
        fputs("</span>", f);
    }
    if (g->state != NB_REGRESS_FIXED)
        return;
    if (g->ack_ms > 0)
        fputs("; ", f);
    if (g->fixed_run_id > 0) {
        fprintf(f, "<span class=\"fixed\">fixed by <a href=\"run-%" PRId64 ".html\">run %" PRId64
                   "</a>, back inside the noise band, at ",
                g->fixed_run_id, g->fixed_run_id);
        when(f, g->fixed_ms);
    } else if (!*g->fixed_by) { /* the fixing run was removed since (ON DELETE SET NULL) */
        fputs("<span class=\"fixed\">fixed by a later run of its series (since removed) at ", f);
        when(f, g->fixed_ms);
    } else {
        fputs("<span class=\"fixed\">closed by ", f);
        esc(f, g->fixed_by);
        fputs(" at ", f);
        when(f, g->fixed_ms);
        if (*g->fixed_note) {
            fputs(": ", f);
            esc(f, g->fixed_note);
        }
    }
    fputs("</span>", f);
}

static void state_cell(FILE *f, nb_db_regress_state s)
{
    const char *name = nb_db_regress_state_name(s);
    fprintf(f, "<td class=\"regress-state %s\">%s</td>",
            s == NB_REGRESS_NEW ? "fail" : s == NB_REGRESS_ACKNOWLEDGED ? "warn" : "pass", name);
}

nb_code nb_dash_regress_page(nb_db *db, const nb_dash_opts *o, FILE *f, nb_err *err)
{
    nb_db_regression *g = NULL;
    size_t n = 0;
    nb_code rc = nb_db_regress_list(db, 0, NB_DASH_REGRESS_MAX, &g, &n, err);
    if (rc)
        return rc;
    size_t count[NB_REGRESS_STATE_N] = {0};
    for (size_t i = 0; i < n; i++)
        count[g[i].state]++;
    nb_dash_head(f, "Regressions", 30);
    fprintf(f, "<p id=\"regress-counts\">%zu new, %zu acknowledged, %zu fixed%s.</p>\n"
               "<p>A regression is <b>new</b> when the check flags a run against the runs of its "
               "series (same model, backend, dtype, board, kind, tokens, prompt and threads); "
               "<b>acknowledged</b> when a person says who and why (<code>npubench regressions "
               "ack ID --note TEXT</code>, admin); <b>fixed</b> when a later run of the same "
               "series is back inside the noise band, or a person closes it "
               "(<code>npubench regressions close ID</code>).</p>\n",
            count[NB_REGRESS_NEW], count[NB_REGRESS_ACKNOWLEDGED], count[NB_REGRESS_FIXED],
            n == NB_DASH_REGRESS_MAX ? " among the newest listed" : "");
    fputs("<table id=\"regressions\"><tr><th>ID</th><th>State</th><th>Run</th><th>Model</th>"
          "<th>Board</th><th>Kind</th><th>Flagged</th><th>Detail</th><th>History</th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<tr class=\"regression-row\"><td>%" PRId64 "</td>", g[i].id);
        state_cell(f, g[i].state);
        fprintf(f, "<td><a href=\"run-%" PRId64 ".html\">run %" PRId64 "</a></td><td>",
                g[i].run_id, g[i].run_id);
        esc(f, g[i].model);
        fputs("</td><td>", f);
        esc(f, g[i].board);
        fputs("</td><td>", f);
        esc(f, g[i].kind);
        fputs("</td><td>", f);
        when(f, g[i].created_ms);
        fputs("</td><td>", f);
        esc(f, g[i].detail);
        fputs("</td><td>", f);
        history(f, &g[i]);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    free(g);
    nb_dash_foot(f, o);
    return NB_OK;
}

void nb_dash_regress_summary(FILE *f, nb_db *db)
{
    size_t n[NB_REGRESS_STATE_N];
    nb_err e;
    if (nb_db_regress_count(db, n, &e))
        return;
    fprintf(f, "<li id=\"regress-summary\"><a href=\"regressions.html\">Regressions</a>: "
               "<span class=\"%s\">%zu new</span>, %zu acknowledged, %zu fixed</li>",
            n[NB_REGRESS_NEW] ? "regression" : "", n[NB_REGRESS_NEW],
            n[NB_REGRESS_ACKNOWLEDGED], n[NB_REGRESS_FIXED]);
}

void nb_dash_regress_run_row(FILE *f, nb_db *db, int64_t run_id)
{
    nb_db_regression *g = malloc(sizeof *g);
    nb_err e;
    if (!g || nb_db_regress_of_run(db, run_id, g, &e)) {
        free(g);
        return;
    }
    fputs("<tr><th>Regression state</th>", f);
    state_cell(f, g->state);
    fputs("</tr>\n", f);
    if (g->ack_ms > 0 || g->state == NB_REGRESS_FIXED) {
        fputs("<tr><th>Regression history</th><td class=\"regress-history\">", f);
        history(f, g);
        fputs("</td></tr>\n", f);
    }
    free(g);
}

nb_code nb_dash_regress_export_ids(nb_db *db, nb_dash_job_id_fn fn, void *ud, nb_err *err)
{
    nb_db_regression *g = NULL;
    size_t n = 0;
    nb_code rc = nb_db_regress_list(db, 0, NB_DASH_REGRESS_MAX, &g, &n, err);
    for (size_t i = 0; !rc && i < n; i++) {
        rc = fn(ud, 1, g[i].run_id, err);
        if (!rc && g[i].fixed_run_id > 0)
            rc = fn(ud, 1, g[i].fixed_run_id, err);
    }
    free(g);
    return rc;
}
