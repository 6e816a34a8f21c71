/* nb_cmd_matrix: `npubench submit matrix`, the nightly in one command — each model x kind
 * submitted as a matrix job over the boards of a tag, awaited under one deadline, then one
 * summary table (model x board), one JUnit file, the exit code of the worst outcome. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_job.h"
#include "nb_jobjson.h"
#include "nb_outcome.h"
#include "nb_time.h"

#define MX_LIST 16 /* models, kinds */
#define MX_LIST_TEXT "16"
#define MX_ROWS 1024

/* Splits a comma list into at most MX_LIST items (buf keeps them); -1 when more. */
static int split(char *buf, const char **items)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == MX_LIST)
            return -1;
        items[n++] = t;
    }
    return n;
}

/* One summary row: what every kind said about one model on one board. */
typedef struct mx_row {
    int model;                  /* index into the --models list */
    char board[128];
    char gate[32];              /* "pass 8/8", "fail 6/8", "error", "-": history's words */
    double ttft, tps;           /* 0 = not measured */
    char flags[256];            /* regressions, errors */
    char jobs[64];
} mx_row;

static int row_cmp(const void *a, const void *b)
{
    const mx_row *x = a, *y = b;
    return x->model != y->model ? x->model - y->model : strcmp(x->board, y->board);
}

static mx_row *row_for(mx_row *rows, size_t *n, int model, const char *board)
{
    for (size_t i = 0; i < *n; i++)
        if (rows[i].model == model && !strcmp(rows[i].board, board))
            return &rows[i];
    if (*n == MX_ROWS)
        return NULL;
    mx_row *r = &rows[(*n)++];
    memset(r, 0, sizeof *r);
    r->model = model;
    snprintf(r->board, sizeof r->board, "%s", board);
    snprintf(r->gate, sizeof r->gate, "-");
    return r;
}

static void add_flag(mx_row *r, const char *fmt, const char *a, const char *b)
{
    size_t len = strlen(r->flags);
    snprintf(r->flags + len, sizeof r->flags - len, "%s", len ? "; " : "");
    len = strlen(r->flags);
    snprintf(r->flags + len, sizeof r->flags - len, fmt, a, b);
}

static void add_job(mx_row *r, int64_t id)
{
    size_t len = strlen(r->jobs);
    snprintf(r->jobs + len, sizeof r->jobs - len, "%s%lld", len ? "," : "", (long long)id);
}

/* One board's result of a model's job of kind into its row. */
static void take_result(mx_row *r, int kind, const Npubench__JobResult *res)
{
    nb_outcome o = nb_outcome_of_result(res);
    add_job(r, res->job_id);
    if (o == NB_OC_ERROR) {
        add_flag(r, "%s: %s", nb_job_kind_name(kind),
                 *res->status_message ? res->status_message : "no verdict");
        if (nb_job_kind_is(kind, NB_JOB_FAMILY_VERIFY))
            snprintf(r->gate, sizeof r->gate, "%s", nb_outcome_name(NB_OC_ERROR));
        return;
    }
    /* the gate's own verdict (a flagged run's regression is in FLAGS), with its prompts */
    if (nb_job_kind_is(kind, NB_JOB_FAMILY_VERIFY)) {
        const char *w = nb_outcome_name(nb_outcome_of_verdict(res->outcome));
        if (res->verify && res->verify->passed + res->verify->failed > 0)
            snprintf(r->gate, sizeof r->gate, "%s %d/%d", w, res->verify->passed,
                     res->verify->passed + res->verify->failed);
        else
            snprintf(r->gate, sizeof r->gate, "%s", w);
    }
    if (res->metrics && (nb_job_kind_is(kind, NB_JOB_FAMILY_PERFORMANCE) || !r->tps)) {
        if (res->metrics->ttft_ms > 0)
            r->ttft = res->metrics->ttft_ms;
        if (res->metrics->tps > 0)
            r->tps = res->metrics->tps;
    }
    if (res->regression)
        add_flag(r, "REGRESSION %s%s", res->regression_detail, "");
}

static int has_result_of(const Npubench__Job *j, int64_t id)
{
    for (size_t i = 0; i < j->n_results; i++)
        if (j->results[i]->job_id == id)
            return 1;
    return 0;
}

/* The children of j whose result j does not carry (still queued or running, cancelled,
 * expired, or finished since j was read): a row per board they are pinned to, from the
 * child's own result when it has one (GATE and FLAGS then agree), else saying what it is;
 * one row "-" when j has neither results nor children. */
static void unfinished(nb_cmd_conn *c, mx_row *rows, size_t *nr, int model, int kind,
                       const Npubench__Job *j)
{
    int any = j->n_results > 0;
    for (size_t k = 0; k < j->n_child_job_ids; k++) {
        if (has_result_of(j, j->child_job_ids[k]))
            continue;
        Npubench__Job *kid = NULL;
        nb_err err;
        if (nb_svc_get_job(c->svc, j->child_job_ids[k], 0, &kid, &err))
            continue;
        const char *board = kid->spec && kid->spec->selector && *kid->spec->selector->board
                                ? kid->spec->selector->board
                                : "?";
        mx_row *r = row_for(rows, nr, model, board);
        if (r) {
            for (size_t i = 0; i < kid->n_results; i++)
                take_result(r, kind, kid->results[i]);
            if (!kid->n_results) {
                add_job(r, kid->job_id);
                add_flag(r, "%s: %s", nb_job_kind_name(kind),
                         nb_outcome_name(nb_outcome_of_job(kid)));
            }
            any = 1;
        }
        nb_wire_free(kid);
    }
    mx_row *r = any ? NULL : row_for(rows, nr, model, "-");
    if (r) {
        add_job(r, j->job_id);
        add_flag(r, "%s: %s", nb_job_kind_name(kind), nb_outcome_name(nb_outcome_of_job(j)));
    }
}

typedef struct mx_flags {
    nb_svc_flags sf;
    nb_out_flags of;
    const char *models, *tag, *kinds, *junit, *expire;
    int timeout_s, keep, help;
    nb_cmd_params params; /* the kinds' parameters, as submit takes them, for every job */
} mx_flags;

static void print_rows(const mx_row *rows, size_t n, const char *const *models,
                       nb_out_format fmt)
{
    static const char *const heads[] = {"MODEL", "BOARD", "GATE", "TTFT ms", "TPS",
                                        "FLAGS", "JOBS"};
    nb_out_table *t = nb_out_table_new(heads, 7);
    nb_err err;
    for (size_t i = 0; t && i < n; i++) {
        char ttft[32] = "-", tps[32] = "-";
        if (rows[i].ttft > 0)
            snprintf(ttft, sizeof ttft, "%.2f", rows[i].ttft);
        if (rows[i].tps > 0)
            snprintf(tps, sizeof tps, "%.2f", rows[i].tps);
        const char *cells[] = {models[rows[i].model], rows[i].board, rows[i].gate, ttft, tps,
                               rows[i].flags[0] ? rows[i].flags : "-", rows[i].jobs};
        if (nb_out_table_row(t, cells, &err))
            break;
    }
    if (t)
        nb_out_table_print(stdout, t, fmt);
    nb_out_table_free(t);
}

static json_object *rows_json(const mx_row *rows, size_t n, const char *const *models)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_new_object();
        nb_out_str(o, "model", models[rows[i].model]);
        nb_out_str(o, "board", rows[i].board);
        nb_out_str(o, "gate", rows[i].gate);
        json_object_object_add(o, "ttft_ms",
                               rows[i].ttft > 0 ? json_object_new_double(rows[i].ttft) : NULL);
        json_object_object_add(o, "tps",
                               rows[i].tps > 0 ? json_object_new_double(rows[i].tps) : NULL);
        nb_out_str(o, "flags", rows[i].flags);
        nb_out_str(o, "job_ids", rows[i].jobs);
        json_object_array_add(a, o);
    }
    return a;
}

/* Submits model x kind (ids into jobs[]); the exit code of the error it printed, or 0. */
static int submit_all(nb_cmd_conn *c, const mx_flags *f, const char *const *models, int nm,
                      const int *kinds, int nk, int64_t *jobs, int *kind_of, int *model_of,
                      size_t *nj)
{
    for (int m = 0; m < nm; m++)
        for (int k = 0; k < nk; k++) {
            Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
            Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
            char *tags[1] = {(char *)f->tag};
            sel.model = (char *)models[m];
            sel.tags = tags;
            sel.n_tags = 1;
            spec.kind = kinds[k];
            spec.selector = &sel;
            spec.matrix = 1;
            nb_cmd_params_buf pb; /* unset ones: the kind's defaults, as the job's reader
                                   * applies them (verify's 2 prompts) */
            nb_cmd_params_apply(&f->params, &spec, &pb);
            nb_err err;
            if (f->expire && nb_args_duration("--expire-after", f->expire,
                                              NB_JOB_EXPIRE_MS_MAX, &spec.expire_after_ms, &err))
                return nb_cmd_usage_error("submit matrix", "%s", err.msg);
            int64_t *ids = NULL;
            size_t n = 0;
            if (nb_svc_submit(c->svc, &spec, 0, &ids, &n, &err)) {
                int code = nb_cmd_fail("submit matrix", &err);
                /* NOT_FOUND here is "no board can take it now" (none live, or every one
                 * drained or quarantined): unavailable, as a device would be */
                return err.code == NB_ENOTFOUND ? NB_EXIT_UNAVAILABLE : code;
            }
            jobs[*nj] = ids[0];
            kind_of[*nj] = kinds[k];
            model_of[*nj] = m;
            (*nj)++;
            if (f->of.json == 0)
                fprintf(stderr, "job %lld: %s %s on the boards tagged %s (%zu board%s)\n",
                        (long long)ids[0], nb_job_kind_name(kinds[k]), models[m], f->tag,
                        n - 1, n == 2 ? "" : "s");
            free(ids);
        }
    return NB_EXIT_OK;
}

int nb_cmd_submit_matrix(int argc, char **argv)
{
    mx_flags f = {.kinds = "verify,profile"};
    nb_opt head[] = {
        NB_SVC_OPTS(f.sf),
        {"models", NB_OPT_STR, &f.models, 0, 0, "models, comma-separated (required)"},
        {"boards", NB_OPT_STR, &f.tag, 0, 0, "the boards with this tag (required)"},
        {"kinds", NB_OPT_STR, &f.kinds, 0, 0, "job kinds, comma-separated (default verify,profile)"},
    };
    nb_opt tail[] = {
        {"timeout", NB_OPT_INT, &f.timeout_s, 0, 7 * 86400, "give up after S seconds (exit 5)"},
        {"keep", NB_OPT_FLAG, &f.keep, 0, 0, "with --timeout: leave unfinished jobs queued"},
        {"expire-after", NB_OPT_STR, &f.expire, 0, 0, "each job's queue expiry (90s, 2h, ...)"},
        {"junit", NB_OPT_STR, &f.junit, 0, 0, "write one JUnit XML file of every job"},
        NB_OUT_OPTS(f.of),
        {"help", NB_OPT_FLAG, &f.help, 0, 0, "this help"},
    };
    /* The kinds' parameters from their rows (name, limits, help), as submit takes them. */
    nb_opt opts[NB_NOPTS(head) + NB_CMD_PARAMS_MAX + NB_NOPTS(tail)];
    int nopt = nb_cmd_params_opts(&f.params, head, NB_NOPTS(head), tail, NB_NOPTS(tail), opts);
    int rc = nb_cmd_parse("submit matrix",
                          "npubench submit matrix --models A,B --boards TAG "
                          "[--kinds verify,profile] [--timeout S] [--junit FILE] "
                          "[--json|--format csv|md]\n" NB_OC_EXIT_HELP,
                          argc, argv, opts, nopt, NULL, 0, NULL, &f.help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!f.models || !f.tag || !*f.tag)
        return nb_cmd_usage_error("submit matrix", "--models A,B and --boards TAG are "
                                                   "required%s", "");
    nb_err err;
    nb_out_format fmt;
    if (nb_out_format_of(&f.of, &fmt, &err))
        return nb_cmd_usage_error("submit matrix", "%s", err.msg);
    char mbuf[4096], kbuf[256];
    snprintf(mbuf, sizeof mbuf, "%s", f.models);
    snprintf(kbuf, sizeof kbuf, "%s", f.kinds);
    const char *models[MX_LIST], *kn[MX_LIST];
    int nm = split(mbuf, models), nk = split(kbuf, kn), kinds[MX_LIST];
    if (nm <= 0 || nk <= 0)
        return nb_cmd_usage_error("submit matrix", "--models and --kinds take 1 to %s "
                                                   "comma-separated names", MX_LIST_TEXT);
    for (int k = 0; k < nk; k++)
        if (!(kinds[k] = nb_job_kind_parse(kn[k])) || nb_job_kind_is(kinds[k], NB_JOB_FAMILY_HEALTH))
            return nb_cmd_usage_error("submit matrix", "--kinds '%s': expected run, verify, "
                                                       "verify-full, diagnosis or profile",
                                      kn[k]);
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("submit matrix", &f.sf, NULL, 0, &c)))
        return rc;
    int64_t ids[MX_LIST * MX_LIST];
    int kind_of[MX_LIST * MX_LIST], model_of[MX_LIST * MX_LIST];
    size_t nj = 0;
    Npubench__Job *jobs[MX_LIST * MX_LIST] = {0};
    mx_row *rows = calloc(MX_ROWS, sizeof *rows);
    size_t nr = 0;
    if (!rows) {
        rc = nb_cmd_usage_error("submit matrix", "out of memory%s", "");
        goto out;
    }
    if ((rc = submit_all(&c, &f, models, nm, kinds, nk, ids, kind_of, model_of, &nj)))
        goto out;
    int64_t end = f.timeout_s ? nb_wall_ms() + (int64_t)f.timeout_s * 1000 : 0;
    /* each cell on stderr as it finishes, whichever job is awaited (it was silent to the end) */
    nb_svc_progress pr = {.f = stderr};
    nb_cmd_cells *cells = f.of.json ? NULL : calloc(1, sizeof *cells);
    if (cells)
        *cells = (nb_cmd_cells){.svc = c.svc, .f = stderr, .groups = ids, .kinds = kind_of,
                                .n = nj, .pr = &pr};
    for (size_t i = 0; i < nj; i++)
        if (nb_cmd_wait_job_fn(c.svc, ids[i], end, f.junit != NULL,
                               cells ? nb_cmd_cells_watch : NULL, cells, &jobs[i], &err)) {
            free(cells);
            rc = nb_cmd_fail("submit matrix", &err);
            goto out;
        }
    for (size_t i = 0; i < nj; i++) {
        const Npubench__Job *j = jobs[i];
        for (size_t k = 0; k < j->n_results; k++) {
            const Npubench__JobResult *res = j->results[k];
            mx_row *r = row_for(rows, &nr, model_of[i],
                                res->environment && *res->environment->board
                                    ? res->environment->board
                                    : "?");
            if (r)
                take_result(r, kind_of[i], res);
        }
        unfinished(&c, rows, &nr, model_of[i], kind_of[i], j);
    }
    if (cells)
        nb_cmd_cells_poll(cells, 1); /* those that finished after the last answer */
    free(cells);
    qsort(rows, nr, sizeof *rows, row_cmp);
    nb_cmd_report rep = {.cmd = "submit matrix", .junit = f.junit, .list = 1};
    rc = nb_cmd_report_jobs(&rep, (const Npubench__Job *const *)jobs, nj);
    if (fmt == NB_OUT_JSON) {
        json_object *doc = nb_out_doc("matrix"), *a = json_object_new_array();
        for (size_t i = 0; i < nj; i++)
            json_object_array_add(a, json_object_new_int64(ids[i]));
        json_object_object_add(doc, "job_ids", a);
        json_object_object_add(doc, "rows", rows_json(rows, nr, models));
        nb_out_i64(doc, "exit_code", rc);
        nb_out_print_doc(stdout, doc);
    } else {
        print_rows(rows, nr, models, fmt);
    }
    /* After the table, which shows them as the deadline found them. */
    for (size_t i = 0; i < nj; i++)
        if (f.timeout_s && nb_outcome_of_job(jobs[i]) == NB_OC_PENDING)
            nb_cmd_give_up(c.svc, "submit matrix", "submit matrix", ids[i], f.timeout_s, f.keep);
out:
    for (size_t i = 0; i < nj; i++)
        nb_wire_free(jobs[i]);
    free(rows);
    nb_cmd_conn_close(&c);
    return rc;
}
