/* nb_cmd_jobs: the job commands — submit (and wait), jobs, job, cancel — as clients of a
 * coordinator or, for jobs/job/cancel, of an embedded one over the local database. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_job.h"
#include "nb_jobjson.h"
#include "nb_outcome.h"
#include "nb_out.h"
#include "nb_print.h"
#include "nb_rpc.h"
#include "nb_svc.h"
#include "nb_time.h"

static void fmt_time(char *buf, size_t cap, int64_t ms)
{
    if (ms <= 0) {
        snprintf(buf, cap, "-");
        return;
    }
    char iso[32];
    nb_time_iso(iso, ms);
    snprintf(buf, cap, "%s", iso);
}

static void fmt_target(char *buf, size_t cap, const Npubench__JobSpec *s)
{
    const Npubench__DeploymentSelector *sel = s ? s->selector : NULL;
    if (!sel) {
        snprintf(buf, cap, "*");
        return;
    }
    size_t len = (size_t)snprintf(buf, cap, "%s", *sel->model ? sel->model : "*");
    if (*sel->backend || *sel->dtype)
        len += (size_t)snprintf(buf + len, cap > len ? cap - len : 0, " %s/%s",
                                *sel->backend ? sel->backend : "*",
                                *sel->dtype ? sel->dtype : "*");
    if (*sel->board)
        len += (size_t)snprintf(buf + len, cap > len ? cap - len : 0, " @%s", sel->board);
    for (size_t i = 0; i < sel->n_tags; i++)
        len += (size_t)snprintf(buf + len, cap > len ? cap - len : 0, " #%s", sel->tags[i]);
}

/* ---------------------------------------------------------------- submit */

typedef struct submit_flags {
    nb_svc_flags sf;
    nb_out_flags of;
    const char *junit;
    const char *model, *board, *dtype, *backend, *prompt, *prompt_set, *reports, *expire;
    nb_strlist tags;
    int priority, matrix, wait, shards, timeout_s, keep, quiet, help;
    nb_cmd_params params;
    int64_t expire_ms; /* --expire-after; 0 = the coordinator's default, -1 = never */
} submit_flags;

/* A JobSpec and the storage its fields point into. */
typedef struct submit_job {
    Npubench__JobSpec spec;
    Npubench__DeploymentSelector sel;
    nb_cmd_params_buf params;
} submit_job;

static void submit_build(const submit_flags *f, int kind, submit_job *j)
{
    Npubench__JobSpec *spec = &j->spec;
    Npubench__DeploymentSelector *sel = &j->sel;
    npubench__job_spec__init(spec);
    npubench__deployment_selector__init(sel);
    spec->kind = kind;
    spec->selector = sel;
    sel->model = (char *)f->model;
    if (f->dtype) {
        sel->dtype = (char *)f->dtype; /* an engine dtype's name, or an exec deployment's label */
        sel->dtype_id = (Npubench__Dtype)nb_dtype_pb_of_name(f->dtype);
    }
    if (f->backend)
        sel->backend = (char *)f->backend;
    if (f->board)
        sel->board = (char *)f->board;
    sel->tags = (char **)f->tags.items;
    sel->n_tags = (size_t)f->tags.n;
    /* the options the parameter rows give, each where the user set it (0 leaves the kind's
     * default, or the deployment's, as the job's reader applies) */
    nb_cmd_params_apply(&f->params, spec, &j->params);
    spec->priority = f->priority;
    spec->matrix = f->matrix;
    spec->expire_after_ms = f->expire_ms;
    if (f->prompt)
        spec->prompt = (char *)f->prompt;
    if (f->prompt_set)
        spec->prompt_set = (char *)f->prompt_set;
}

static void print_submitted(const int64_t *ids, size_t n, int matrix)
{
    printf("job %lld submitted", (long long)ids[0]);
    if (n > 1) {
        printf(" (%zu %s:", n - 1, matrix ? "boards" : "shards");
        for (size_t i = 1; i < n; i++)
            printf(" %lld", (long long)ids[i]);
        printf(")");
    }
    printf("\n");
    fflush(stdout);
}


/* --wait: live progress on stderr, then the result as the local command prints it, its
 * history runs and the final state (or the JSON document); exit by the job's outcome. */
static int submit_wait(nb_svc *svc, int64_t id, const char *kind, const submit_flags *f,
                       json_object *doc)
{
    nb_err err;
    Npubench__Job *job;
    nb_svc_progress pr = {.f = stderr, .kind = kind};
    nb_code wrc;
    if (f->matrix) { /* each board's cell as it finishes, beside the group's progress */
        int k = nb_job_kind_parse(kind);
        nb_cmd_cells *cells = calloc(1, sizeof *cells);
        if (!cells)
            return nb_cmd_usage_error("submit", "out of memory%s", "");
        *cells = (nb_cmd_cells){.svc = svc, .f = stderr, .groups = &id, .kinds = &k, .n = 1,
                                .pr = &pr};
        wrc = nb_svc_wait(svc, id, (int64_t)f->timeout_s * 1000, nb_cmd_cells_watch, cells, &job,
                          &err);
        free(cells);
    } else
        wrc = nb_svc_wait(svc, id, (int64_t)f->timeout_s * 1000, nb_svc_print_progress, &pr,
                          &job, &err);
    int gave_up = wrc == NB_ETIMEOUT;
    if (gave_up) {
        nb_cmd_give_up(svc, "submit", "submit --wait", id, f->timeout_s, f->keep);
        wrc = nb_svc_get_job(svc, id, f->junit != NULL, &job, &err);
    } else if (wrc == NB_OK && f->junit) {
        nb_wire_free(job);
        wrc = nb_svc_get_job(svc, id, 1, &job, &err);
    }
    if (wrc) {
        json_object_put(doc);
        return nb_cmd_fail("submit", &err);
    }
    int rc = NB_EXIT_OK;
    if (!doc && job->n_results) {
        nb_print_opts po = {.cmd = "submit", .reports_dir = f->reports, .quiet = f->quiet};
        rc = nb_print_job(stdout, &po, job);
        for (size_t i = 0; i < job->n_results; i++) {
            const Npubench__JobResult *res = job->results[i];
            if (res->n_run_ids > 1) { /* a sharded verify-full: stored on each of its boards */
                printf("History: runs");
                for (size_t r = 0; r < res->n_run_ids; r++)
                    printf("%s %lld", r ? "," : "", (long long)res->run_ids[r]);
                printf(" (one per board its shards ran on)\n");
                continue;
            }
            for (size_t r = 0; r < res->n_run_ids; r++)
                printf("History: run %lld%s%s%s\n", (long long)res->run_ids[r],
                       res->environment ? " on " : "", res->environment ? res->environment->board : "",
                       res->regression ? " (REGRESSION)" : "");
        }
    }
    nb_outcome o = nb_outcome_of_job(job);
    if (!doc)
        printf("job %lld %s: %s\n", (long long)job->job_id, nb_job_pb_state_name(job->state),
               nb_outcome_name(o));
    nb_cmd_report r = {.cmd = "submit", .doc = doc, .junit = f->junit};
    int code = nb_cmd_report_jobs(&r, (const Npubench__Job *const *)&job, 1);
    nb_wire_free(job);
    if (gave_up && code < NB_EXIT_EXPIRED) /* with --keep the job may even have finished */
        code = NB_EXIT_EXPIRED;
    return code > rc ? code : rc;
}

int nb_cmd_submit(int argc, char **argv)
{
    if (argc > 0 && !strcmp(argv[0], "matrix"))
        return nb_cmd_submit_matrix(argc - 1, argv + 1);
    submit_flags f = {.model = "instruct"};
    nb_opt head[] = {
        NB_SVC_OPTS(f.sf),
        {"model", NB_OPT_STR, &f.model, 0, 0,
         "instruct (default), base, gemma3, or a model name the workers serve"},
        {"board", NB_OPT_STR, &f.board, 0, 0, "run on this board"},
        {"tag", NB_OPT_LIST, &f.tags, 0, 0, "run on workers with this tag (repeatable)"},
        {"dtype", NB_OPT_STR, &f.dtype, 0, 0, "bf16, f32, q4_1, native (default: any served)"},
        {"backend", NB_OPT_STR, &f.backend, 0, 0, "cpu, xrt, exec, air (default: any served)"},
    };
    nb_opt tail[] = {
        {"priority", NB_OPT_INT, &f.priority, -NB_JOB_PRIORITY_MAX, NB_JOB_PRIORITY_MAX,
         "higher runs first"},
        {"matrix", NB_OPT_FLAG, &f.matrix, 0, 0, "one job per matching board"},
        {"shards", NB_OPT_INT, &f.shards, 0, NB_JOB_SHARDS_MAX, "verify-full shards (default: idle workers)"},
        {"prompt", NB_OPT_STR, &f.prompt, 0, 0, "prompt (run, profile, diagnosis)"},
        {"prompts", NB_OPT_STR, &f.prompt_set, 0, 0, "prompt set (instruct, base)"},
        {"wait", NB_OPT_FLAG, &f.wait, 0, 0, "wait, show progress, print the result"},
        {"timeout", NB_OPT_INT, &f.timeout_s, 0, 7 * 86400,
         "with --wait: give up after N s, cancel the job (exit 5)"},
        {"keep", NB_OPT_FLAG, &f.keep, 0, 0, "with --timeout: leave the job queued"},
        {"expire-after", NB_OPT_STR, &f.expire, 0, 0,
         "expire the job if still queued after DUR (90s, 15m, 2h, 1d, never; default: the "
         "coordinator's)"},
        NB_OUT_JSON_OPT(f.of),
        {"junit", NB_OPT_STR, &f.junit, 0, 0, "with --wait: write a JUnit XML file"},
        {"reports", NB_OPT_STR, &f.reports, 0, 0, "with --wait: write reports here"},
        {"quiet", NB_OPT_FLAG, &f.quiet, 0, 0, "with --wait: verify summary line only"},
        {"help", NB_OPT_FLAG, &f.help, 0, 0, "this help"},
    };
    /* The kinds' parameters come from their rows (name, limits, help): a parameter with an
     * option is on submit without a line here. */
    nb_opt opts[NB_NOPTS(head) + NB_CMD_PARAMS_MAX + NB_NOPTS(tail)];
    int nopt = nb_cmd_params_opts(&f.params, head, NB_NOPTS(head), tail, NB_NOPTS(tail), opts);
    char kinds[128], words[128], usage[1024];
    nb_job_kind_list(kinds, sizeof kinds);
    size_t wl = 0;
    for (size_t i = 0; nb_job_kind_at(i) && wl < sizeof words; i++)
        wl += (size_t)snprintf(words + wl, sizeof words - wl, "%s%s", i ? "," : "",
                               nb_job_kind_at(i)->name);
    snprintf(usage, sizeof usage,
             "npubench submit {%.120s} --model M [--board B|--tag T] [--wait [--timeout S] "
             "[--junit F]] [options]\n"
             "       npubench submit matrix --models A,B --boards TAG [...] "
             "(npubench submit matrix --help)\n" NB_OC_EXIT_HELP,
             words);
    const char *pos[1];
    int np = 0;
    int rc = nb_cmd_parse("submit", usage, argc, argv, opts, nopt, pos, 1, &np, &f.help);
    if (rc)
        return rc < 0 ? 0 : rc;
    int kind = np ? nb_job_kind_parse(pos[0]) : 0;
    if (!kind)
        return nb_cmd_usage_error("submit", "expected a kind: %s, or matrix", kinds);
    if ((f.junit || f.keep || f.timeout_s) && !f.wait)
        return nb_cmd_usage_error("submit", "--junit, --timeout and --keep need --wait%s", "");
    nb_err perr;
    if (f.expire &&
        nb_args_duration("--expire-after", f.expire, NB_JOB_EXPIRE_MS_MAX, &f.expire_ms, &perr))
        return nb_cmd_usage_error("submit", "%s", perr.msg);
    submit_job j;
    submit_build(&f, kind, &j);
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("submit", &f.sf, NULL, 0, &c)))
        return rc;
    nb_err err;
    int64_t *ids = NULL;
    size_t n = 0;
    if (nb_svc_submit(c.svc, &j.spec, f.shards, &ids, &n, &err)) {
        nb_cmd_conn_close(&c);
        int code = nb_cmd_fail("submit", &err);
        /* no registered deployment serves the selector: the lab cannot run it (exit 3) */
        return err.code == NB_ENOTFOUND ? NB_EXIT_UNAVAILABLE : code;
    }
    json_object *doc = NULL;
    if (f.of.json) {
        doc = nb_out_doc("submit");
        json_object *a = json_object_new_array();
        for (size_t i = 0; i < n; i++)
            json_object_array_add(a, json_object_new_int64(ids[i]));
        json_object_object_add(doc, "job_ids", a);
    } else {
        print_submitted(ids, n, f.matrix);
    }
    if (f.wait)
        rc = submit_wait(c.svc, ids[0], nb_job_kind_name(kind), &f, doc);
    else if (doc)
        nb_out_print_doc(stdout, doc);
    free(ids);
    nb_cmd_conn_close(&c);
    return rc;
}

/* ---------------------------------------------------------------- jobs / job */

static int state_parse(const char *s)
{
    for (int i = 1; i <= 6; i++)
        if (!strcmp(s, nb_job_pb_state_name(i)))
            return i;
    return -1;
}

static int finished(int state)
{
    return state == NPUBENCH__JOB_STATE__JOB_DONE || state == NPUBENCH__JOB_STATE__JOB_FAILED ||
           state == NPUBENCH__JOB_STATE__JOB_CANCELLED;
}

/* What `jobs` keeps beyond the server's filter: "failed" is what a user means by it, "did not
 * pass" — a gate FAIL is a job done with outcome fail, not a job in state failed. */
typedef struct jobs_filter {
    int failed;  /* --state failed */
    int outcome; /* --outcome: an nb_outcome, or -1 */
} jobs_filter;

static int jobs_keep(const jobs_filter *f, const Npubench__Job *j)
{
    nb_outcome o = nb_outcome_of_job(j);
    if (f->failed && (o == NB_OC_PASS || (j->state != NPUBENCH__JOB_STATE__JOB_FAILED &&
                                               j->state != NPUBENCH__JOB_STATE__JOB_DONE)))
        return 0;
    return f->outcome < 0 || (int)o == f->outcome;
}

/* machine: csv/md, where AGE is whole seconds (a number a spreadsheet sorts), not "92s" */
static nb_code jobs_row(nb_out_table *t, const Npubench__Job *j, int machine, nb_err *err)
{
    char id[24], target[256], age[24], prog[32] = "-";
    snprintf(id, sizeof id, "%lld", (long long)j->job_id);
    fmt_target(target, sizeof target, j->spec);
    if (machine) {
        int64_t ms = nb_wall_ms() - j->created_unix_ms;
        snprintf(age, sizeof age, "%lld", (long long)(ms > 0 ? ms / 1000 : 0));
    } else {
        nb_cmd_fmt_age(age, sizeof age, j->created_unix_ms);
    }
    /* a finished job's last progress report is history, not progress */
    if (j->progress && j->progress->total > 0 && !finished(j->state))
        snprintf(prog, sizeof prog, "%d/%d", j->progress->done, j->progress->total);
    const char *cells[] = {
        id,
        j->spec && j->spec->matrix ? NB_JOB_GROUP_MATRIX : nb_job_kind_name(j->spec ? j->spec->kind : 0),
        nb_job_pb_state_name(j->state),
        finished(j->state) ? nb_outcome_name(nb_outcome_of_job(j)) : "-",
        target,
        *j->worker_id ? j->worker_id : "-",
        prog,
        age,
        *j->queued_reason ? j->queued_reason : j->error};
    return nb_out_table_row(t, cells, err);
}

/* ListJobs pages (newest first) until limit jobs pass the filter; a finished job is fetched
 * whole, since ListJobs carries no results and the outcome is in them. */
static nb_code jobs_fetch(nb_svc *svc, Npubench__ListJobsRequest *req, const jobs_filter *f,
                          int limit, Npubench__Job ***out, size_t *n, nb_err *err)
{
    *out = calloc((size_t)limit, sizeof **out);
    *n = 0;
    if (!*out)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    for (;;) {
        Npubench__ListJobsResponse *resp;
        nb_code rc = nb_svc_call(svc, "ListJobs", req, &npubench__list_jobs_response__descriptor,
                                 &resp, err);
        if (rc)
            return rc;
        for (size_t i = 0; i < resp->n_jobs && *n < (size_t)limit; i++) {
            Npubench__Job *j = resp->jobs[i];
            if (finished(j->state) && (rc = nb_svc_get_job(svc, j->job_id, 0, &j, err))) {
                nb_wire_free(resp);
                return rc;
            }
            if (j == resp->jobs[i])
                resp->jobs[i] = NULL; /* moved out: protobuf-c frees no NULL element */
            if (jobs_keep(f, j))
                (*out)[(*n)++] = j;
            else
                nb_wire_free(j);
        }
        int64_t next = resp->next_before_job_id;
        nb_wire_free(resp);
        if (*n >= (size_t)limit || !next)
            return NB_OK;
        req->before_job_id = next;
    }
}

static void jobs_free(Npubench__Job **jobs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        nb_wire_free(jobs[i]);
    free(jobs);
}

/* The jobs as the format asks; NB_EXIT_OK or the error it printed. */
static int jobs_print(Npubench__Job *const *jobs, size_t n, nb_out_format fmt)
{
    nb_err err;
    if (fmt == NB_OUT_JSON) {
        json_object *doc = nb_out_doc("jobs"), *a = json_object_new_array();
        for (size_t i = 0; i < n; i++)
            json_object_array_add(a, nb_jobjson_job(jobs[i]));
        json_object_object_add(doc, "jobs", a);
        nb_out_print_doc(stdout, doc);
        return NB_EXIT_OK;
    }
    int machine = fmt == NB_OUT_CSV || fmt == NB_OUT_MD;
    const char *const heads[] = {"JOB",    "KIND",     "STATE", "OUTCOME", "TARGET",
                                 "WORKER", "PROGRESS", machine ? "AGE s" : "AGE", "NOTE"};
    nb_out_table *t = nb_out_table_new(heads, 9);
    if (!t)
        return nb_cmd_usage_error("jobs", "out of memory%s", "");
    for (size_t i = 0; i < n; i++)
        if (jobs_row(t, jobs[i], machine, &err)) {
            nb_out_table_free(t);
            return nb_cmd_fail("jobs", &err);
        }
    if (!n && fmt == NB_OUT_TEXT)
        printf("(no jobs)\n");
    else
        nb_out_table_print(stdout, t, fmt);
    nb_out_table_free(t);
    return NB_EXIT_OK;
}

/* --state and --outcome into the request and the client-side filter; NB_EXIT_OK or the usage
 * error it printed. */
static int jobs_filters(const char *state, const char *outcome, Npubench__ListJobsRequest *req,
                        jobs_filter *f)
{
    nb_err err;
    f->failed = 0;
    f->outcome = -1;
    if (outcome) {
        nb_outcome o;
        if (nb_outcome_parse("--outcome", outcome, &o, &err))
            return nb_cmd_usage_error("jobs", "%s", err.msg);
        f->outcome = (int)o;
    }
    if (state) {
        int s = state_parse(state);
        if (s < 0)
            return nb_cmd_usage_error("jobs", "--state '%s': expected queued, leased, running, "
                                              "done, failed or cancelled",
                                      state);
        f->failed = s == NPUBENCH__JOB_STATE__JOB_FAILED;
        req->state = f->failed ? 0 : s;
    }
    return NB_EXIT_OK;
}

int nb_cmd_jobs(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    nb_out_flags of = {0};
    const char *state = NULL, *outcome = NULL, *db = NULL, *model = NULL, *board = NULL;
    int limit = 50, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"state", NB_OPT_STR, &state, 0, 0,
         "queued, leased, running, done, failed (did not pass), cancelled"},
        {"outcome", NB_OPT_STR, &outcome, 0, 0,
         "pass, fail, error, unavailable, cancelled, expired, pending"},
        {"model", NB_OPT_STR, &model, 0, 0, "only jobs for this model"},
        {"board", NB_OPT_STR, &board, 0, 0, "only jobs for this board"},
        {"limit", NB_OPT_INT, &limit, 1, 1000, "newest N (default 50)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        NB_OUT_OPTS(of),
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    int rc = nb_cmd_parse("jobs",
                          "npubench jobs [--state S] [--outcome O] [--limit N] "
                          "[--json|--format csv|md]",
                          argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    nb_out_format fmt;
    if (nb_out_format_of(&of, &fmt, &err))
        return nb_cmd_usage_error("jobs", "%s", err.msg);
    Npubench__ListJobsRequest req = NPUBENCH__LIST_JOBS_REQUEST__INIT;
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    jobs_filter f;
    if ((rc = jobs_filters(state, outcome, &req, &f)))
        return rc;
    if (model || board) {
        sel.model = (char *)(model ? model : "");
        sel.board = (char *)(board ? board : "");
        req.selector = &sel;
    }
    req.limit = f.failed || f.outcome >= 0 ? 1000 : limit;
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("jobs", &sf, db, 1, &c)))
        return rc;
    Npubench__Job **jobs;
    size_t n;
    if (jobs_fetch(c.svc, &req, &f, limit, &jobs, &n, &err))
        rc = nb_cmd_fail("jobs", &err);
    else
        rc = jobs_print(jobs, n, fmt);
    jobs_free(jobs, n);
    nb_cmd_conn_close(&c);
    return rc;
}

static void result_summary(const Npubench__JobResult *r)
{
    /* the outcome word and model name every other place prints (a flagged run fails) */
    printf("  result of job %lld: %s", (long long)r->job_id,
           nb_outcome_name(nb_outcome_of_result(r)));
    char name[256];
    if (r->environment)
        printf(" on %s (%s %s/%s)", r->environment->board,
               nb_print_model_name(r->environment, name, sizeof name), r->environment->backend,
               r->environment->dtype);
    if (*r->worker_id)
        printf(", worker %s", r->worker_id);
    printf("\n");
    if (r->status != NPUBENCH__STATUS_CODE__OK)
        printf("    %s: %s\n", nb_rpc_status_name(r->status), r->status_message);
    if (r->verify)
        printf("    gate: %d/%d prompts pass (k=%d, %d tokens); decode-path defects: %d%s\n",
               r->verify->passed, r->verify->passed + r->verify->failed, r->verify->k,
               r->verify->n_tokens, r->verify->decode_faults, r->verify->strict ? " (strict)" : "");
    for (size_t i = 0; i < r->n_gates; i++) {
        const Npubench__GateRecord *g = r->gates[i];
        if (g->status != NPUBENCH__OUTCOME__PASS)
            printf("    prompt %d: %s%s\n", g->index, g->fail_reason,
                   g->decode_strict_fail ? " (--strict; the gate itself passed)" : "");
        else if (g->decode_check && g->decode_check->status &&
                 !strcmp(g->decode_check->status, "fault"))
            printf("    prompt %d: PASS (decode-path defect): decode step %d differs from a "
                   "cache-free prefill by %.3g logits\n", g->index,
                   g->decode_check->first_bad_step, g->decode_check->max_diff);
        /* a FAIL's localization, or a PASS's when one was asked for */
        const Npubench__Localization *l = g->localization;
        if (l && l->summary && *l->summary)
            printf("      prompt %d localized: %s%s%s\n", g->index, l->summary,
                   l->note && *l->note ? " — " : "", l->note ? l->note : "");
    }
    if (r->metrics)
        printf("    TTFT %.2f ms, %.2f tokens/s, decode %.2f ms/token (%zu samples)\n",
               r->metrics->ttft_ms, r->metrics->tps, r->metrics->decode_ms_per_token,
               r->metrics->n_samples);
    if (r->n_cosines)
        printf("    %zu layer cosines, last median %.6f\n", r->n_cosines,
               r->cosines[r->n_cosines - 1]->median);
    for (size_t i = 0; i < r->n_run_ids; i++)
        printf("    history run %lld\n", (long long)r->run_ids[i]);
    if (r->regression)
        printf("    REGRESSION: %s\n", r->regression_detail);
}

/* job, kind, state, target, shard, worker, times, progress, why it waits, its error. */
static void print_job_head(const Npubench__Job *j)
{
    char target[256], t1[32], t2[32], t3[32];
    fmt_target(target, sizeof target, j->spec);
    fmt_time(t1, sizeof t1, j->created_unix_ms);
    fmt_time(t2, sizeof t2, j->started_unix_ms);
    fmt_time(t3, sizeof t3, j->finished_unix_ms);
    printf("job %lld: %s %s\n", (long long)j->job_id,
           j->spec && j->spec->matrix ? NB_JOB_GROUP_MATRIX : nb_job_kind_name(j->spec ? j->spec->kind : 0),
           nb_job_pb_state_name(j->state));
    printf("  target:    %s\n", target);
    if (j->parent_job_id)
        printf("  part of:   job %lld\n", (long long)j->parent_job_id);
    if (j->spec && j->spec->shard)
        printf("  shard:     %d of %d, prompts [%d, %d)\n", j->spec->shard->index + 1,
               j->spec->shard->count, j->spec->shard->prompt_begin, j->spec->shard->prompt_end);
    if (*j->worker_id)
        printf("  worker:    %s\n", j->worker_id);
    printf("  requeued:  %d time(s)\n  created:   %s\n  started:   %s\n  finished:  %s\n", j->attempts,
           t1, t2, t3);
    if (j->progress && (j->progress->total || *j->progress->message))
        printf("  progress:  %d/%d %s\n", j->progress->done, j->progress->total,
               j->progress->message);
    if (*j->queued_reason)
        printf("  waiting:   %s\n", j->queued_reason);
    if (j->expires_unix_ms && j->state == NPUBENCH__JOB_STATE__JOB_QUEUED) {
        char te[32];
        fmt_time(te, sizeof te, j->expires_unix_ms);
        printf("  expires:   %s (if still queued)\n", te);
    }
    if (*j->error)
        printf("  error:     %s\n", j->error);
}

/* One line per child job (shards, matrix boards); one that cannot be fetched is left out. */
static void print_children(nb_svc *svc, const Npubench__Job *j)
{
    nb_err err;
    for (size_t i = 0; i < j->n_child_job_ids; i++) {
        Npubench__Job *k;
        if (nb_svc_get_job(svc, j->child_job_ids[i], 0, &k, &err) == NB_OK) {
            printf("  child %lld: %s", (long long)k->job_id, nb_job_pb_state_name(k->state));
            if (k->spec && k->spec->shard)
                printf(" prompts [%d, %d)", k->spec->shard->prompt_begin,
                       k->spec->shard->prompt_end);
            if (k->spec && k->spec->selector && *k->spec->selector->board)
                printf(" board %s", k->spec->selector->board);
            if (*k->worker_id)
                printf(" worker %s", k->worker_id);
            if (*k->queued_reason)
                printf(" (%s)", k->queued_reason);
            if (*k->error)
                printf(" (%s)", k->error);
            printf("\n");
            nb_wire_free(k);
        }
    }
}

int nb_cmd_job(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    nb_out_flags of = {0};
    const char *db = NULL, *junit = NULL;
    int log = 0, help = 0, print = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"log", NB_OPT_FLAG, &log, 0, 0, "show the job's log"},
        {"print", NB_OPT_FLAG, &print, 0, 0, "print the result as the local command would"},
        NB_OUT_JSON_OPT(of),
        {"junit", NB_OPT_STR, &junit, 0, 0, "write a JUnit XML file (log as system-out)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[1];
    int np = 0;
    int rc = nb_cmd_parse("job",
                          "npubench job ID [--log] [--print] [--json] [--junit FILE]\n"
                          "exit by the job's outcome (a queued or running job: 5)\n"
                          NB_OC_EXIT_HELP,
                          argc, argv, opts, NB_NOPTS(opts), pos, 1, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    int64_t id;
    if ((rc = nb_cmd_job_ids("job", pos, np, &id)))
        return rc;
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("job", &sf, db, 1, &c)))
        return rc;
    nb_err err;
    Npubench__Job *j;
    if (nb_svc_get_job(c.svc, id, log || junit, &j, &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("job", &err);
    }
    rc = NB_EXIT_OK;
    if (!of.json) {
        print_job_head(j);
        print_children(c.svc, j);
        for (size_t i = 0; i < j->n_results; i++)
            result_summary(j->results[i]);
        size_t len = strlen(j->log);
        if (log && len) /* a log cut short by the worker's cap may lack the last newline */
            printf("log:\n%s%s", j->log, j->log[len - 1] == '\n' ? "" : "\n");
        if (print && j->n_results) {
            nb_print_opts po = {.cmd = "job"};
            rc = nb_print_job(stdout, &po, j);
        }
    }
    nb_cmd_report r = {.cmd = "job", .doc = of.json ? nb_out_doc("job") : NULL, .junit = junit};
    int code = nb_cmd_report_jobs(&r, (const Npubench__Job *const *)&j, 1);
    if (code > rc)
        rc = code;
    nb_wire_free(j);
    nb_cmd_conn_close(&c);
    return rc;
}

int nb_cmd_cancel(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *reason = NULL, *db = NULL;
    int help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"reason", NB_OPT_STR, &reason, 0, 0, "why (kept in the job)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[1];
    int np = 0;
    int rc = nb_cmd_parse("cancel", "npubench cancel ID [--reason R]", argc, argv, opts,
                          NB_NOPTS(opts), pos, 1, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *end;
    long long id = np ? strtoll(pos[0], &end, 10) : 0;
    if (!np || *end || id <= 0)
        return nb_cmd_usage_error("cancel", "expected a job id, got '%s'", np ? pos[0] : "");
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("cancel", &sf, db, 1, &c)))
        return rc;
    Npubench__CancelJobRequest req = NPUBENCH__CANCEL_JOB_REQUEST__INIT;
    req.job_id = id;
    if (reason)
        req.reason = (char *)reason;
    nb_err err;
    Npubench__CancelJobResponse *resp;
    if (nb_svc_call(c.svc, "CancelJob", &req, &npubench__cancel_job_response__descriptor, &resp,
                    &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("cancel", &err);
    }
    printf("job %lld %s\n", id, nb_job_pb_state_name(resp->state));
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return NB_EXIT_OK;
}
