/* nb_dash_job: a job's page — kind, model, parameters, state and outcome, attempts and why it
 * was requeued, progress, its runs, and its log, which the page follows while the job runs. */
#include "nb_dash_job.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "nb_dash_page.h"
#include "nb_db_alias.h"
#include "nb_db_joblog.h"
#include "nb_db_runs.h"
#include "nb_db_workers.h"
#include "nb_job.h"
#include "nb_svg.h"
#include "nb_time.h"
#include "nb_wire.h"

#define esc nb_svg_escape
#define MAX_RUNS 500
#define MAX_CHILDREN 1000
#define MAX_REQUEUES 50

/* The runs a job stored; for a shard or matrix child, whose result its group stored (one run
 * per board it ran on), the group's run on the board this child's worker serves: what it ran
 * and came to, rather than "any" and "-". *r malloc'ed (free()); NB_OK with *n 0 for none. */
static nb_code job_runs(nb_db *db, const nb_db_job *j, size_t max, nb_db_job_run_ref **r,
                        size_t *n, nb_err *err)
{
    nb_code rc = nb_db_job_runs(db, j->id, max, r, n, err);
    if (rc || *n || j->parent_id <= 0 || !*j->leased_worker)
        return rc;
    nb_db_worker w;
    nb_err e;
    if (nb_db_worker_get(db, j->leased_worker, &w, &e))
        return NB_OK; /* a worker no longer stored: nothing known */
    free(*r);
    *r = NULL;
    if ((rc = nb_db_job_runs(db, j->parent_id, MAX_RUNS, r, n, err)))
        return rc;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*r)[i].board, w.board_name) && k < max)
            (*r)[k++] = (*r)[i];
    *n = k;
    if (!k) {
        free(*r);
        *r = NULL;
    }
    return NB_OK;
}

const char *nb_dash_job_outcome(nb_db *db, const nb_db_job *j)
{
    if (j->state == NB_JOB_CANCELLED)
        return strstr(j->error, "expire") ? "expired" : "cancelled";
    if (!nb_job_state_terminal(j->state))
        return "pending";
    size_t n = 0;
    nb_db_outcome w = NB_OUTCOME_PASS;
    nb_err e;
    if (nb_db_job_runs_verdict(db, j->id, &n, &w, &e) || !n) {
        /* a child whose group stored its result: the group's run on its board */
        nb_db_job_run_ref *r = NULL;
        if (j->state == NB_JOB_DONE && !job_runs(db, j, MAX_RUNS, &r, &n, &e) && n) {
            for (size_t i = 0; i < n; i++) {
                nb_db_outcome o = nb_db_run_outcome(r[i].outcome, r[i].regression);
                if (o > w)
                    w = o;
            }
            free(r);
            return nb_db_outcome_word(w);
        }
        return j->state == NB_JOB_FAILED ? "unavailable" : "-";
    }
    return nb_db_outcome_word(w);
}

static const char *outcome_class(const char *oc)
{
    return !strcmp(oc, "pass")                          ? "pass"
           : !strcmp(oc, "fail")                        ? "fail"
           : !strcmp(oc, "pending") || !strcmp(oc, "-") ? "none"
                                                        : "error";
}

static void row_start(FILE *f, const char *th)
{
    fprintf(f, "<tr><th>%s</th><td>", th);
}

static void row_text(FILE *f, const char *th, const char *v)
{
    row_start(f, th);
    esc(f, v && *v ? v : "-");
    fputs("</td></tr>\n", f);
}

static void row_time(FILE *f, const char *th, int64_t ms)
{
    char when[32];
    if (ms > 0)
        nb_time_iso(when, ms);
    row_text(f, th, ms > 0 ? when : "-");
}

/* The model as people name it: the history's canonical name for an alias, else the canonical
 * form of a preset word or file name ("instruct" -> "SmolLM2-135M-Instruct"). */
static void model_name(nb_db *db, const char *sel, char *out, size_t cap)
{
    char canon[NB_DB_NAME_MAX];
    nb_err e;
    out[0] = '\0';
    if (!sel || !*sel || !strcmp(sel, "*"))
        return;
    nb_job_model_canon(sel, canon, sizeof canon);
    if (nb_db_alias_resolve(db, sel, out, cap, &e) || !strcmp(out, sel))
        snprintf(out, cap, "%s", canon);
}

/* A field of the deployment: what the job asked for, else (asked "" or "*": any) where its
 * first run ran, else "any". */
static void dep_row(FILE *f, const char *th, const char *asked, const char *ran)
{
    int any = !asked || !*asked || !strcmp(asked, "*");
    row_start(f, th);
    if (!any)
        esc(f, asked);
    else if (ran && *ran) {
        esc(f, ran);
        fputs(" <small>(where it ran)</small>", f);
    } else
        fputs("any", f);
    fputs("</td></tr>\n", f);
}

/* Model, dtype, board and backend as asked (or where it ran: ran, NULL before any run). */
static void dep_rows(FILE *f, nb_db *db, const char *model, const char *dtype, const char *board,
                     const char *backend, const nb_db_job_run_ref *ran)
{
    char name[NB_DB_NAME_MAX];
    model_name(db, model, name, sizeof name);
    dep_row(f, "Model", name, ran ? ran->model : NULL);
    if (*name && strcmp(name, model))
        row_text(f, "Asked as", model);
    dep_row(f, "Dtype", dtype, ran ? ran->dtype : NULL);
    dep_row(f, "Board", board, ran ? ran->board : NULL);
    dep_row(f, "Backend", backend, ran ? ran->backend : NULL);
}

/* What the spec asks, as a list of "name value" rows; a spec that does not decode says so. */
static void spec_rows(FILE *f, nb_db *db, const nb_db_job *j, const nb_db_job_run_ref *ran)
{
    if (j->spec_format != NB_SPEC_PROTO || !j->spec) {
        /* the deployment selector the queue keeps: "model/dtype" */
        char sel[NB_DB_NAME_MAX];
        snprintf(sel, sizeof sel, "%s", j->sel_deployment);
        char *slash = strchr(sel, '/');
        if (slash)
            *slash = '\0';
        dep_rows(f, db, sel, slash ? slash + 1 : "", j->sel_board, j->sel_backend, ran);
        if (j->spec && j->spec_len) {
            row_start(f, "Parameters");
            fputs("<code>", f);
            char *s = strndup(j->spec, j->spec_len > 4096 ? 4096 : j->spec_len);
            esc(f, s ? s : "");
            free(s);
            fputs("</code></td></tr>\n", f);
        }
        return;
    }
    Npubench__JobSpec *s = NULL;
    nb_err e;
    if (nb_wire_unpack(&npubench__job_spec__descriptor, j->spec, j->spec_len, 0, (void **)&s,
                       &e)) {
        row_text(f, "Parameters", "the stored spec does not decode");
        return;
    }
    const Npubench__DeploymentSelector *d = s->selector;
    dep_rows(f, db, d ? d->model : "", d ? d->dtype : "", d && *d->board ? d->board : j->sel_board,
             d ? d->backend : "", ran);
    if (*j->sel_tags)
        row_text(f, "Tags", j->sel_tags);
    if (!(s->n_tokens > 0 || s->reps > 0 || s->k > 0 || s->max_prompts > 0 || s->priority > 0 ||
          *s->prompt_set || s->n_prompts || *s->prompt || s->shard || s->matrix ||
          s->timeout_ms > 0 || s->n_params)) {
        row_text(f, "Parameters", "the defaults");
        nb_wire_free(s);
        return;
    }
    row_start(f, "Parameters");
    fputs("<ul class=\"params\">", f);
#define PARAM_INT(name, v)                                                                     \
    if ((v) > 0)                                                                               \
    fprintf(f, "<li>%s %d</li>", name, (int)(v))
    PARAM_INT("tokens", s->n_tokens);
    PARAM_INT("repetitions", s->reps);
    PARAM_INT("top-k", s->k);
    PARAM_INT("max prompts", s->max_prompts);
    PARAM_INT("priority", s->priority);
#undef PARAM_INT
    if (*s->prompt_set && !s->n_prompts) {
        fputs("<li>prompt set ", f);
        esc(f, s->prompt_set);
        fputs("</li>", f);
    }
    if (s->n_prompts)
        fprintf(f, "<li>%zu explicit prompt%s</li>", s->n_prompts, s->n_prompts == 1 ? "" : "s");
    if (*s->prompt) {
        fputs("<li>prompt <q>", f);
        char p[201];
        snprintf(p, sizeof p, "%s", s->prompt);
        esc(f, p);
        fputs(strlen(s->prompt) > 200 ? "...</q></li>" : "</q></li>", f);
    }
    if (s->shard)
        fprintf(f, "<li>shard %d of %d: prompts %d..%d</li>", s->shard->index + 1,
                s->shard->count, s->shard->prompt_begin, s->shard->prompt_end - 1);
    if (s->matrix)
        fputs("<li>matrix</li>", f);
    if (s->timeout_ms > 0)
        fprintf(f, "<li>timeout %" PRId64 " s</li>", s->timeout_ms / 1000);
    for (size_t i = 0; i < s->n_params; i++) {
        fputs("<li>", f);
        esc(f, s->params[i]->key);
        fputs("=", f);
        esc(f, s->params[i]->value);
        fputs("</li>", f);
    }
    fputs("</ul></td></tr>\n", f);
    nb_wire_free(s);
}

/* Each line as open, its time, its text (escaped), close. */
static void log_lines(FILE *f, const nb_db_log_line *l, size_t n, const char *open,
                      const char *close)
{
    for (size_t i = 0; i < n; i++) {
        char when[32];
        nb_time_iso(when, l[i].ts_ms);
        fprintf(f, "%s%s ", open, when);
        esc(f, l[i].text);
        fputs(close, f);
    }
}

static void requeue_row(FILE *f, nb_db *db, const nb_db_job *j)
{
    nb_db_log_line *l = NULL;
    size_t n = 0;
    nb_err e;
    if (nb_db_job_requeues(db, j->id, MAX_REQUEUES, &l, &n, &e) || !n) {
        row_text(f, "Requeues", j->attempts ? "" : "none");
        return;
    }
    row_start(f, "Requeues");
    fputs("<ol class=\"requeues\">", f);
    log_lines(f, l, n, "<li class=\"requeue\">", "</li>");
    fputs("</ol></td></tr>\n", f);
    nb_db_log_lines_free(l, n);
}

static void runs_section(FILE *f, nb_db *db, const nb_db_job *j)
{
    nb_db_job_run_ref *r = NULL;
    size_t n = 0;
    nb_err e;
    if (job_runs(db, j, MAX_RUNS, &r, &n, &e)) {
        fputs("<p class=\"error\">", f);
        esc(f, e.msg);
        fputs("</p>\n", f);
        return;
    }
    fprintf(f, "<h2>Runs (%zu)</h2>\n", n);
    if (!n) {
        fputs(nb_job_state_terminal(j->state)
                  ? "<p class=\"runs-none\">This job stored no run.</p>\n"
                  : "<p class=\"runs-none\">No run stored yet.</p>\n",
              f);
        return;
    }
    fputs("<table id=\"job-runs\"><tr><th>Run</th><th>Job</th><th>Kind</th><th>Outcome</th>"
          "</tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        nb_db_outcome o = nb_db_run_outcome(r[i].outcome, r[i].regression);
        const char *cls = o == NB_OUTCOME_PASS ? "pass" : o == NB_OUTCOME_FAIL ? "fail" : "error";
        fprintf(f,
                "<tr class=\"job-run\"><td><a href=\"run-%" PRId64 ".html\">run %" PRId64
                "</a></td><td>%" PRId64 "</td><td>",
                r[i].run_id, r[i].run_id, r[i].job_id);
        esc(f, r[i].kind);
        fprintf(f, "</td><td class=\"%s\">%s%s</td></tr>\n", cls, nb_db_outcome_word(o),
                r[i].regression ? " (REGRESSION)" : "");
    }
    fputs("</table>\n", f);
    free(r);
}

static void children_section(FILE *f, nb_db *db, const nb_db_job *j)
{
    nb_db_job_filter cf = {.parent_id = j->id, .limit = MAX_CHILDREN, .oldest_first = 1};
    nb_db_job *c = NULL;
    size_t n = 0;
    nb_err e;
    if (nb_db_job_list(db, &cf, &c, &n, &e) || !n) {
        nb_db_job_list_free(c, n);
        return;
    }
    fprintf(f, "<h2>Jobs of this group (%zu)</h2>\n<table id=\"job-children\"><tr><th>Job</th>"
               "<th>Board</th><th>State</th><th>Outcome</th></tr>\n",
            n);
    for (size_t i = 0; i < n; i++) {
        const char *oc = nb_dash_job_outcome(db, &c[i]);
        fprintf(f, "<tr class=\"job-child\"><td><a href=\"job-%" PRId64 ".html\">job %" PRId64
                   "</a></td><td>",
                c[i].id, c[i].id);
        esc(f, c[i].leased_worker[0] ? c[i].leased_worker : c[i].sel_board);
        fprintf(f, "</td><td>%s</td><td class=\"outcome %s\">%s</td></tr>\n",
                nb_job_state_name(c[i].state), outcome_class(oc), oc);
    }
    fputs("</table>\n", f);
    nb_db_job_list_free(c, n);
}

/* The log as stored: a finished job's first NB_DASH_JOB_LOG_LINES lines, an unfinished one's
 * last (the page reloads itself while the job runs: the pages carry no script, docs/service.md;
 * job-<id>-log.json gives a script the lines after a point). */
static void log_section(FILE *f, nb_db *db, const nb_db_job *j)
{
    nb_db_log_line *l = NULL;
    size_t n = 0;
    int more = 0;
    nb_err e;
    int live = !nb_job_state_terminal(j->state);
    fputs("<h2>Log</h2>\n", f);
    nb_code rc = live ? nb_db_job_log_tail(db, j->id, NB_DASH_JOB_LOG_LINES, &l, &n, &more, &e)
                      : nb_db_job_log_after(db, j->id, 0, NB_DASH_JOB_LOG_LINES, &l, &n, &more,
                                            &e);
    if (rc) {
        fputs("<p class=\"error\">", f);
        esc(f, e.msg);
        fputs("</p>\n", f);
        return;
    }
    if (more && live)
        fprintf(f, "<p id=\"log-more\">The last %d lines; the whole log: <code>job-%" PRId64
                   "-log.json?after=0</code> (served by the coordinator).</p>\n",
                NB_DASH_JOB_LOG_LINES, j->id);
    int64_t last = n ? l[n - 1].seq : 0;
    fprintf(f, "<pre id=\"log\" data-after=\"%" PRId64 "\">", last);
    log_lines(f, l, n, "<span class=\"log-line\">", "\n</span>");
    fputs("</pre>\n<p id=\"log-end\">", f);
    if (!n)
        fputs("Nothing logged yet. ", f);
    if (live)
        fprintf(f, "Live: this page reloads every %d s while the job has not finished; "
                   "the lines after these as JSON: <code>job-%" PRId64 "-log.json?after=%" PRId64
                   "</code>.",
                NB_DASH_JOB_REFRESH_S, j->id, last);
    else if (more)
        fprintf(f, "The first %d lines; the rest: <code>job-%" PRId64 "-log.json?after=%" PRId64
                   "</code> (served by the coordinator).",
                NB_DASH_JOB_LOG_LINES, j->id, last);
    fputs("</p>\n", f);
    nb_db_log_lines_free(l, n);
}

/* "3/8 prompt 3" or "-". */
static void progress_text(const nb_db_job *j, char *buf, size_t cap)
{
    if (j->progress_total > 0 || *j->progress_msg)
        snprintf(buf, cap, "%" PRId64 "/%" PRId64 "%s%s", j->progress_done, j->progress_total,
                 *j->progress_msg ? " " : "", j->progress_msg);
    else
        snprintf(buf, cap, "-");
}

nb_code nb_dash_job_page(nb_db *db, const nb_dash_opts *o, int64_t id, FILE *f, nb_err *err)
{
    nb_db_job j;
    nb_code rc = nb_db_job_get(db, id, &j, err); /* the spec, for the parameters */
    if (rc == NB_ENOTFOUND)
        return nb_err_set(err, NB_ENOTFOUND, "report: no job %" PRId64, id);
    if (rc)
        return rc;
    free(j.log); /* read in pages below */
    j.log = NULL;
    char title[64];
    snprintf(title, sizeof title, "Job %" PRId64, id);
    nb_dash_head(f, title, nb_job_state_terminal(j.state) ? 0 : NB_DASH_JOB_REFRESH_S);
    const char *oc = nb_dash_job_outcome(db, &j);
    fputs("<table id=\"job\">\n", f);
    row_text(f, "Kind", j.kind);
    nb_db_job_run_ref *ran = NULL;
    size_t n_ran = 0;
    nb_err e;
    if (job_runs(db, &j, 1, &ran, &n_ran, &e))
        n_ran = 0;
    spec_rows(f, db, &j, n_ran ? ran : NULL);
    free(ran);
    fprintf(f, "<tr><th>State</th><td id=\"job-state\">%s</td></tr>\n",
            nb_job_state_name(j.state));
    fprintf(f, "<tr><th>Outcome</th><td class=\"outcome %s\">%s</td></tr>\n", outcome_class(oc),
            oc);
    if (j.state == NB_JOB_QUEUED && *j.queued_reason)
        row_text(f, "Why queued", j.queued_reason);
    if (*j.error)
        row_text(f, "Error", j.error);
    /* attempts counts the leases lost; the one that ran (or runs) is one more, as the log's
     * "leased to worker ... (attempt N of M)" counts. A requeue clears the worker, so one still
     * named holds (or held, up to its end or a cancel) the lease of that last attempt; a job
     * that gave up has counted it already. */
    int ran_now = *j.leased_worker && !(j.state == NB_JOB_FAILED && j.attempts >= j.max_attempts);
    if (j.is_group) /* never leased itself: "0 of 3" read as a job that never ran */
        row_text(f, "Attempts", "its jobs' own (a group is not leased)");
    else
        fprintf(f, "<tr><th>Attempts</th><td>%d of %d</td></tr>\n", j.attempts + ran_now,
                j.max_attempts);
    requeue_row(f, db, &j);
    char prog[NB_DB_MSG_MAX + 48];
    progress_text(&j, prog, sizeof prog);
    fputs("<tr><th>Progress</th><td id=\"job-progress\">", f);
    esc(f, prog);
    fputs("</td></tr>\n", f);
    row_text(f, "Worker", j.leased_worker);
    if (j.parent_id > 0)
        fprintf(f, "<tr><th>Group</th><td><a href=\"job-%" PRId64 ".html\">job %" PRId64
                   "</a></td></tr>\n",
                j.parent_id, j.parent_id);
    row_time(f, "Submitted", j.created_ms);
    row_time(f, "Started", j.started_ms);
    row_time(f, "Finished", j.finished_ms);
    fputs("</table>\n", f);
    if (j.is_group)
        children_section(f, db, &j);
    runs_section(f, db, &j);
    log_section(f, db, &j);
    nb_dash_foot(f, o);
    nb_db_job_free(&j);
    return NB_OK;
}

/* after=N from a query string ("after=12&x=y"); 0 when absent. -1 when it is no integer
 * >= 0 that fits. */
static int64_t query_after(const char *q)
{
    for (const char *p = q; p && *p;) {
        size_t len = strcspn(p, "&");
        if (!strncmp(p, "after=", 6)) {
            const char *s = p + 6, *end = p + len;
            if (s == end)
                return -1;
            int64_t v = 0;
            for (; s < end; s++) {
                if (*s < '0' || *s > '9' || v > (INT64_MAX - 9) / 10)
                    return -1;
                v = v * 10 + (*s - '0');
            }
            return v;
        }
        p += len + (p[len] == '&');
    }
    return 0;
}

nb_code nb_dash_job_log_json(nb_db *db, int64_t id, const char *query, FILE *f, nb_err *err)
{
    int64_t after = query_after(query);
    if (after < 0)
        return nb_err_set(err, NB_EINVAL,
                          "report: job %" PRId64 " log: after must be a line number >= 0 "
                          "(after=SEQ)",
                          id);
    nb_db_job j;
    nb_code rc = nb_db_job_peek(db, id, &j, err);
    if (rc == NB_ENOTFOUND)
        return nb_err_set(err, NB_ENOTFOUND, "report: no job %" PRId64, id);
    if (rc)
        return rc;
    nb_db_log_line *l = NULL;
    size_t n = 0;
    int more = 0;
    rc = nb_db_job_log_after(db, id, after, NB_DASH_JOB_LOG_LINES, &l, &n, &more, err);
    if (rc)
        return rc;
    json_object *doc = json_object_new_object(), *arr = json_object_new_array();
    char prog[NB_DB_MSG_MAX + 48];
    progress_text(&j, prog, sizeof prog);
    json_object_object_add(doc, "job", json_object_new_int64(id));
    json_object_object_add(doc, "state", json_object_new_string(nb_job_state_name(j.state)));
    json_object_object_add(doc, "outcome", json_object_new_string(nb_dash_job_outcome(db, &j)));
    json_object_object_add(doc, "finished",
                           json_object_new_boolean(nb_job_state_terminal(j.state)));
    json_object_object_add(doc, "progress", json_object_new_string(prog));
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "seq", json_object_new_int64(l[i].seq));
        json_object_object_add(o, "ts_ms", json_object_new_int64(l[i].ts_ms));
        json_object_object_add(o, "text", json_object_new_string(l[i].text));
        json_object_array_add(arr, o);
    }
    json_object_object_add(doc, "lines", arr);
    json_object_object_add(doc, "next", json_object_new_int64(n ? l[n - 1].seq : after));
    json_object_object_add(doc, "more", json_object_new_boolean(more));
    fputs(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN), f);
    fputc('\n', f);
    json_object_put(doc);
    nb_db_log_lines_free(l, n);
    return NB_OK;
}

/* One job's page, its runs, its group and, for a group, its jobs. */
static nb_code export_job(nb_db *db, const nb_db_job *j, nb_dash_job_id_fn fn, void *ud,
                          nb_err *err)
{
    nb_code rc = fn(ud, 0, j->id, err);
    if (!rc && j->parent_id > 0)
        rc = fn(ud, 0, j->parent_id, err);
    nb_db_job_run_ref *r = NULL;
    size_t n = 0;
    if (!rc)
        rc = nb_db_job_runs(db, j->id, MAX_RUNS, &r, &n, err);
    for (size_t i = 0; !rc && i < n; i++)
        rc = fn(ud, 1, r[i].run_id, err);
    free(r);
    if (rc || !j->is_group)
        return rc;
    nb_db_job_filter cf = {.parent_id = j->id, .limit = MAX_CHILDREN, .oldest_first = 1};
    nb_db_job *c = NULL;
    size_t nc = 0;
    rc = nb_db_job_list(db, &cf, &c, &nc, err);
    for (size_t i = 0; !rc && i < nc; i++)
        rc = fn(ud, 0, c[i].id, err); /* a child's runs are its group's, listed above */
    nb_db_job_list_free(c, nc);
    return rc;
}

nb_code nb_dash_job_export_ids(nb_db *db, size_t max_finished, nb_dash_job_id_fn fn, void *ud,
                               nb_err *err)
{
    const nb_db_job_filter lists[2] = {
        {.states = NB_JOB_STATE_BIT(NB_JOB_QUEUED) | NB_JOB_STATE_BIT(NB_JOB_LEASED) |
                   NB_JOB_STATE_BIT(NB_JOB_RUNNING),
         .parent_id = -1,
         .limit = 1000},
        {.states = NB_JOB_STATE_BIT(NB_JOB_DONE) | NB_JOB_STATE_BIT(NB_JOB_FAILED) |
                   NB_JOB_STATE_BIT(NB_JOB_CANCELLED),
         .parent_id = -1,
         .limit = max_finished}};
    nb_code rc = NB_OK;
    for (int k = 0; !rc && k < 2; k++) {
        nb_db_job *j = NULL;
        size_t n = 0;
        rc = nb_db_job_list(db, &lists[k], &j, &n, err);
        for (size_t i = 0; !rc && i < n; i++)
            rc = export_job(db, &j[i], fn, ud, err);
        nb_db_job_list_free(j, n);
    }
    return rc;
}

nb_code nb_dash_job_linked_ids(nb_db *db, int64_t job_id, nb_dash_job_id_fn fn, void *ud,
                               nb_err *err)
{
    nb_db_job j;
    nb_code rc = nb_db_job_peek(db, job_id, &j, err);
    if (rc == NB_ENOTFOUND)
        return NB_OK;
    return rc ? rc : export_job(db, &j, fn, ud, err);
}
