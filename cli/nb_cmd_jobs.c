/* nb_cmd_jobs: the job commands — submit (and wait), jobs, job, cancel — as clients of a
 * coordinator or, for jobs/job/cancel, of an embedded one over the local database. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_job.h"
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

int nb_cmd_submit(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *model = "instruct", *board = NULL, *dtype = NULL, *backend = NULL,
               *prompt = NULL, *prompt_set = NULL, *reports = NULL;
    nb_strlist tags = {0};
    int n_tokens = 0, k = 0, reps = 0, priority = 0, matrix = 0, wait = 0, shards = 0,
        max_prompts = -1, threads = 0, timeout_s = 0, quiet = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"model", NB_OPT_STR, &model, 0, 0, "model (default instruct)"},
        {"board", NB_OPT_STR, &board, 0, 0, "run on this board"},
        {"tag", NB_OPT_LIST, &tags, 0, 0, "run on workers with this tag (repeatable)"},
        {"dtype", NB_OPT_STR, &dtype, 0, 0, "bf16, f32, q4_1 (default: any served)"},
        {"backend", NB_OPT_STR, &backend, 0, 0, "cpu, xrt, exec (default: any served)"},
        {"n-tokens", NB_OPT_INT, &n_tokens, 0, NB_JOB_N_TOKENS_MAX, "tokens per prompt / run"},
        {"k", NB_OPT_INT, &k, 0, 1000, "top-k of the gate"},
        {"reps", NB_OPT_INT, &reps, 0, 1000, "measured repetitions (run, profile)"},
        {"priority", NB_OPT_INT, &priority, -1000000, 1000000, "higher runs first"},
        {"matrix", NB_OPT_FLAG, &matrix, 0, 0, "one job per matching board"},
        {"shards", NB_OPT_INT, &shards, 0, NB_JOB_SHARDS_MAX, "verify-full shards (default: idle workers)"},
        {"prompt", NB_OPT_STR, &prompt, 0, 0, "prompt (run, profile, diagnosis)"},
        {"prompts", NB_OPT_STR, &prompt_set, 0, 0, "prompt set (instruct, base)"},
        {"max-prompts", NB_OPT_INT, &max_prompts, 0, NB_JOB_PROMPTS_MAX, "first N prompts"},
        {"threads", NB_OPT_INT, &threads, 0, 1024, "kernel threads on the worker"},
        {"wait", NB_OPT_FLAG, &wait, 0, 0, "wait, show progress, print the result"},
        {"timeout", NB_OPT_INT, &timeout_s, 0, 7 * 86400, "give up waiting after N s"},
        {"reports", NB_OPT_STR, &reports, 0, 0, "with --wait: write reports here"},
        {"quiet", NB_OPT_FLAG, &quiet, 0, 0, "with --wait: verify summary line only"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *usage = "npubench submit {run,verify,verify-full,diagnosis,profile} --model M "
                        "[--board B|--tag T] [--wait] [options]";
    const char *pos[1];
    int np = 0;
    int rc = nb_cmd_parse("submit", usage, argc, argv, opts, NB_NOPTS(opts), pos, 1, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    int kind = np ? nb_job_kind_parse(pos[0]) : 0;
    if (!kind)
        return nb_cmd_usage_error("submit", "expected a kind: run, verify, verify-full, diagnosis or "
                                     "profile%s",
                           "");
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    spec.kind = kind;
    spec.selector = &sel;
    sel.model = (char *)model;
    if (dtype)
        sel.dtype = (char *)dtype;
    if (backend)
        sel.backend = (char *)backend;
    if (board)
        sel.board = (char *)board;
    sel.tags = (char **)tags.items;
    sel.n_tags = (size_t)tags.n;
    spec.n_tokens = n_tokens;
    spec.k = k;
    spec.reps = reps;
    spec.priority = priority;
    spec.matrix = matrix;
    if (prompt)
        spec.prompt = (char *)prompt;
    if (prompt_set)
        spec.prompt_set = (char *)prompt_set;
    if (max_prompts >= 0)
        spec.max_prompts = max_prompts;
    else if (kind == NPUBENCH__JOB_KIND__VERIFY)
        spec.max_prompts = 2;
    Npubench__KeyValue kv = NPUBENCH__KEY_VALUE__INIT, *kvp = &kv;
    char tbuf[16];
    if (threads) {
        snprintf(tbuf, sizeof tbuf, "%d", threads);
        kv.key = "threads";
        kv.value = tbuf;
        spec.params = &kvp;
        spec.n_params = 1;
    }
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("submit", &sf, NULL, 0, &c)))
        return rc;
    nb_err err;
    int64_t *ids = NULL;
    size_t n = 0;
    if (nb_svc_submit(c.svc, &spec, shards, &ids, &n, &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("submit", &err);
    }
    printf("job %lld submitted", (long long)ids[0]);
    if (n > 1) {
        printf(" (%zu %s:", n - 1, matrix ? "boards" : "shards");
        for (size_t i = 1; i < n; i++)
            printf(" %lld", (long long)ids[i]);
        printf(")");
    }
    printf("\n");
    fflush(stdout);
    rc = NB_EXIT_OK;
    if (wait) {
        Npubench__Job *job;
        nb_svc_progress pr = {.f = stderr};
        if (nb_svc_wait(c.svc, ids[0], (int64_t)timeout_s * 1000, nb_svc_print_progress, &pr,
                        &job, &err)) {
            rc = nb_cmd_fail("submit", &err);
        } else {
            nb_print_opts po = {.cmd = "submit", .reports_dir = reports, .quiet = quiet};
            rc = nb_print_job(stdout, &po, job);
            for (size_t i = 0; i < job->n_results; i++)
                for (size_t r = 0; r < job->results[i]->n_run_ids; r++)
                    printf("History: run %lld%s\n", (long long)job->results[i]->run_ids[r],
                           job->results[i]->regression ? " (REGRESSION)" : "");
            printf("job %lld %s\n", (long long)job->job_id, nb_job_pb_state_name(job->state));
            nb_wire_free(job);
        }
    }
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

static void job_line(const Npubench__Job *j)
{
    char target[256], age[16], prog[32] = "-";
    fmt_target(target, sizeof target, j->spec);
    nb_cmd_fmt_age(age, sizeof age, j->created_unix_ms);
    if (j->progress && j->progress->total > 0)
        snprintf(prog, sizeof prog, "%d/%d", j->progress->done, j->progress->total);
    const char *note = *j->queued_reason ? j->queued_reason : *j->error ? j->error : "";
    printf("%-6lld %-12s %-10s %-34s %-26s %-8s %-5s %s\n", (long long)j->job_id,
           j->spec && j->spec->matrix ? "matrix" : nb_job_kind_name(j->spec ? j->spec->kind : 0),
           nb_job_pb_state_name(j->state), target, *j->worker_id ? j->worker_id : "-", prog, age, note);
}

int nb_cmd_jobs(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *state = NULL, *db = NULL, *model = NULL, *board = NULL;
    int limit = 50, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"state", NB_OPT_STR, &state, 0, 0, "queued, leased, running, done, failed, cancelled"},
        {"model", NB_OPT_STR, &model, 0, 0, "only jobs for this model"},
        {"board", NB_OPT_STR, &board, 0, 0, "only jobs for this board"},
        {"limit", NB_OPT_INT, &limit, 1, 1000, "newest N (default 50)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    int rc = nb_cmd_parse("jobs", "npubench jobs [--state S] [--limit N]", argc, argv, opts,
                          NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    Npubench__ListJobsRequest req = NPUBENCH__LIST_JOBS_REQUEST__INIT;
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    if (state) {
        int s = state_parse(state);
        if (s < 0)
            return nb_cmd_usage_error("jobs", "--state '%s': expected queued, leased, running, done, "
                                       "failed or cancelled",
                               state);
        req.state = s;
    }
    if (model || board) {
        sel.model = (char *)(model ? model : "");
        sel.board = (char *)(board ? board : "");
        req.selector = &sel;
    }
    req.limit = limit;
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("jobs", &sf, db, 1, &c)))
        return rc;
    nb_err err;
    Npubench__ListJobsResponse *resp;
    if (nb_svc_call(c.svc, "ListJobs", &req, &npubench__list_jobs_response__descriptor, &resp,
                    &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("jobs", &err);
    }
    printf("%-6s %-12s %-10s %-34s %-26s %-8s %-5s %s\n", "JOB", "KIND", "STATE", "TARGET",
           "WORKER", "PROGRESS", "AGE", "NOTE");
    for (size_t i = 0; i < resp->n_jobs; i++)
        job_line(resp->jobs[i]);
    if (!resp->n_jobs)
        printf("(no jobs)\n");
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return NB_EXIT_OK;
}

static nb_code get_job(nb_svc *s, int64_t id, int log, Npubench__Job **out, nb_err *err)
{
    Npubench__GetJobRequest req = NPUBENCH__GET_JOB_REQUEST__INIT;
    req.job_id = id;
    req.include_log = log;
    Npubench__GetJobResponse *r;
    *out = NULL;
    nb_code rc = nb_svc_call(s, "GetJob", &req, &npubench__get_job_response__descriptor, &r, err);
    if (rc)
        return rc;
    *out = r->job;
    r->job = NULL;
    nb_wire_free(r);
    return *out ? NB_OK : nb_err_set(err, NB_EINTERNAL, "GetJob %lld: empty answer",
                                     (long long)id);
}

static void result_summary(const Npubench__JobResult *r)
{
    printf("  result of job %lld: %s", (long long)r->job_id,
           r->status != NPUBENCH__STATUS_CODE__OK ? "not run"
           : r->outcome == NPUBENCH__OUTCOME__FAIL ? "FAIL"
           : r->outcome == NPUBENCH__OUTCOME__ERROR ? "ERROR"
                                                    : "PASS");
    if (r->environment)
        printf(" on %s (%s %s/%s)", r->environment->board, r->environment->model,
               r->environment->backend, r->environment->dtype);
    if (*r->worker_id)
        printf(", worker %s", r->worker_id);
    printf("\n");
    if (r->status != NPUBENCH__STATUS_CODE__OK)
        printf("    %s: %s\n", nb_rpc_status_name(r->status), r->status_message);
    if (r->verify)
        printf("    gate: %d/%d prompts pass (k=%d, %d tokens)\n", r->verify->passed,
               r->verify->passed + r->verify->failed, r->verify->k, r->verify->n_tokens);
    for (size_t i = 0; i < r->n_gates; i++)
        if (r->gates[i]->status != NPUBENCH__OUTCOME__PASS)
            printf("    prompt %d: %s\n", r->gates[i]->index, r->gates[i]->fail_reason);
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

int nb_cmd_job(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL;
    int log = 0, help = 0, print = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"log", NB_OPT_FLAG, &log, 0, 0, "show the job's log"},
        {"print", NB_OPT_FLAG, &print, 0, 0, "print the result as the local command would"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[1];
    int np = 0;
    int rc = nb_cmd_parse("job", "npubench job ID [--log]", argc, argv, opts, NB_NOPTS(opts), pos,
                          1, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *end;
    long long id = np ? strtoll(pos[0], &end, 10) : 0;
    if (!np || *end || id <= 0)
        return nb_cmd_usage_error("job", "expected a job id, got '%s'", np ? pos[0] : "");
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("job", &sf, db, 1, &c)))
        return rc;
    nb_err err;
    Npubench__Job *j;
    if (get_job(c.svc, id, log, &j, &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("job", &err);
    }
    char target[256], t1[32], t2[32], t3[32];
    fmt_target(target, sizeof target, j->spec);
    fmt_time(t1, sizeof t1, j->created_unix_ms);
    fmt_time(t2, sizeof t2, j->started_unix_ms);
    fmt_time(t3, sizeof t3, j->finished_unix_ms);
    printf("job %lld: %s %s\n", (long long)j->job_id,
           j->spec && j->spec->matrix ? "matrix" : nb_job_kind_name(j->spec ? j->spec->kind : 0),
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
    if (*j->error)
        printf("  error:     %s\n", j->error);
    for (size_t i = 0; i < j->n_child_job_ids; i++) {
        Npubench__Job *k;
        if (get_job(c.svc, j->child_job_ids[i], 0, &k, &err) == NB_OK) {
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
    for (size_t i = 0; i < j->n_results; i++)
        result_summary(j->results[i]);
    if (log && *j->log)
        printf("log:\n%s", j->log);
    rc = NB_EXIT_OK;
    if (print && j->n_results) {
        nb_print_opts po = {.cmd = "job"};
        rc = nb_print_job(stdout, &po, j);
    }
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
