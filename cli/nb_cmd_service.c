/* nb_cmd_service: the service commands — coordinator, submit, jobs, job, cancel, workers,
 * history, compare, reference, import. Each is a client of a coordinator (--coordinator,
 * $NPUBENCH_COORDINATOR) or, for the history-side commands, of the local database. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_cmd.h"
#include "nb_coord.h"
#include "nb_db_runs.h"
#include "nb_embedded.h"
#include "nb_file.h"
#include "nb_job.h"
#include "nb_json.h"
#include "nb_rpc.h"
#include "nb_secret.h"
#include "nb_svc.h"
#include "nb_time.h"

#define DEFAULT_DB "var/npubench.db"

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "npubench %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return NB_EXIT_USAGE;
}

/* A connection: to the coordinator the flags name or, where allowed, to an
 * embedded coordinator over the local database. */
typedef struct conn {
    nb_svc *svc;
    nb_embedded *emb;
} conn;

static int conn_open(const char *cmd, const nb_svc_flags *f, const char *db, int allow_local,
                     conn *c)
{
    memset(c, 0, sizeof *c);
    nb_err err;
    const char *url = nb_svc_url(f);
    if (url) {
        if (nb_svc_open(f, url, &c->svc, &err))
            return nb_cmd_fail(cmd, &err);
        return NB_EXIT_OK;
    }
    if (!allow_local)
        return usage_error(cmd, "needs a coordinator: --coordinator URL or $NPUBENCH_COORDINATOR%s",
                           "");
    nb_embedded_opts eo = {.db_path = db ? db : DEFAULT_DB};
    if (nb_embedded_start(&eo, &c->emb, &err) ||
        nb_svc_open(NULL, nb_embedded_url(c->emb), &c->svc, &err)) {
        nb_embedded_stop(c->emb);
        c->emb = NULL;
        return nb_cmd_fail(cmd, &err);
    }
    return NB_EXIT_OK;
}

static void conn_close(conn *c)
{
    nb_svc_close(c->svc);
    nb_embedded_stop(c->emb);
    memset(c, 0, sizeof *c);
}

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

static void fmt_age(char *buf, size_t cap, int64_t ms)
{
    int64_t s = ms > 0 ? (nb_wall_ms() - ms) / 1000 : 0;
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, cap, "%llds", (long long)s);
    else if (s < 7200)
        snprintf(buf, cap, "%lldm", (long long)s / 60);
    else if (s < 172800)
        snprintf(buf, cap, "%lldh", (long long)s / 3600);
    else
        snprintf(buf, cap, "%lldd", (long long)s / 86400);
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

/* ---------------------------------------------------------------- coordinator */

int nb_cmd_coordinator(int argc, char **argv)
{
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    const char *secret = NULL, *files[3] = {NULL, NULL, NULL};
    int lease_ms = 0, hb_ms = 0, stale_ms = 0, gone_ms = 0, attempts = 0, shards = 0,
        last_n = 0, min_change = 0, quiet = 0, insecure = 0, help = 0;
    nb_opt opts[] = {
        {"listen", NB_OPT_STR, &o.listen_url, 0, 0, "URL to serve: tcp://host:port, ipc://path, "
                                                    "tls+tcp://host:port"},
        {"db", NB_OPT_STR, &o.db_path, 0, 0, "SQLite queue + history file (created)"},
        {"secret", NB_OPT_STR, &secret, 0, 0, "refused: use --secret-file"},
        {"secret-file", NB_OPT_STR, &files[0], 0, 0,
         "client key (mode 0600; default $NPUBENCH_SECRET); alone: the key of every role"},
        {"worker-secret-file", NB_OPT_STR, &files[1], 0, 0,
         "worker key (default $NPUBENCH_WORKER_SECRET)"},
        {"admin-secret-file", NB_OPT_STR, &files[2], 0, 0,
         "admin key: set-reference (default $NPUBENCH_ADMIN_SECRET)"},
        {"insecure", NB_OPT_FLAG, &insecure, 0, 0, "serve beyond loopback without any key"},
        {"lease-ms", NB_OPT_INT, &lease_ms, 100, 86400000, "lease length (default 30000)"},
        {"heartbeat-ms", NB_OPT_INT, &hb_ms, 10, 600000, "worker heartbeat (default 1000)"},
        {"stale-ms", NB_OPT_INT, &stale_ms, 10, 86400000, "stale after (default 4 heartbeats)"},
        {"gone-ms", NB_OPT_INT, &gone_ms, 10, 86400000, "gone after (default 10 heartbeats)"},
        {"max-attempts", NB_OPT_INT, &attempts, 1, 100, "leases per job (default 3)"},
        {"max-shards", NB_OPT_INT, &shards, 1, NB_JOB_SHARDS_MAX, "verify-full shards at most (default 16)"},
        {"regression-runs", NB_OPT_INT, &last_n, 1, 100000, "baseline runs (default 10)"},
        {"regression-pct", NB_OPT_INT, &min_change, 1, 1000, "min. change in % (default 5)"},
        {"tls-cert", NB_OPT_STR, &o.tls_cert_key_file, 0, 0, "server certificate + key (PEM)"},
        {"tls-ca", NB_OPT_STR, &o.tls_ca_file, 0, 0, "CA that client certificates must chain to"},
        {"artifacts", NB_OPT_STR, &o.artifacts_dir, 0, 0, "result store (default DB.d)"},
        {"refdir", NB_OPT_STR, &o.refdir, 0, 0, "HF traces to cache (default verify/references)"},
        {"prompts-dir", NB_OPT_STR, &o.prompts_dir, 0, 0,
         "named prompt sets (default verify/prompts)"},
        {"quiet", NB_OPT_FLAG, &quiet, 0, 0, "no log lines"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *usage = "npubench coordinator --listen URL --db PATH [options]";
    int rc =
        nb_cmd_parse("coordinator", usage, argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!o.listen_url || !o.db_path)
        return usage_error("coordinator", "--listen URL and --db PATH are required%s", "");
    char *keys[3] = {NULL, NULL, NULL};
    nb_err err;
    if (nb_svc_coord_keys(secret, files, keys, &err))
        return nb_cmd_fail("coordinator", &err);
    o.secret = keys[0];
    o.worker_secret = keys[1];
    o.admin_secret = keys[2];
    o.insecure = insecure;
    o.lease_ms = lease_ms;
    o.heartbeat_ms = hb_ms;
    o.stale_ms = stale_ms;
    o.gone_ms = gone_ms;
    o.max_attempts = attempts;
    o.max_shards = shards;
    o.regression_last_n = last_n;
    o.regression_min_rel = min_change / 100.0;
    o.quiet = quiet;
    nb_code c = nb_coord_run(&o, &err);
    for (int i = 0; i < 3; i++)
        nb_secret_free(keys[i]);
    return c ? nb_cmd_fail("coordinator", &err) : NB_EXIT_OK;
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
        return usage_error("submit", "expected a kind: run, verify, verify-full, diagnosis or "
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
    conn c;
    if ((rc = conn_open("submit", &sf, NULL, 0, &c)))
        return rc;
    nb_err err;
    int64_t *ids = NULL;
    size_t n = 0;
    if (nb_svc_submit(c.svc, &spec, shards, &ids, &n, &err)) {
        conn_close(&c);
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
            nb_svc_print_opts po = {.cmd = "submit", .reports_dir = reports, .quiet = quiet};
            rc = nb_svc_print_job(stdout, &po, job);
            for (size_t i = 0; i < job->n_results; i++)
                for (size_t r = 0; r < job->results[i]->n_run_ids; r++)
                    printf("History: run %lld%s\n", (long long)job->results[i]->run_ids[r],
                           job->results[i]->regression ? " (REGRESSION)" : "");
            printf("job %lld %s\n", (long long)job->job_id, nb_job_pb_state_name(job->state));
            nb_wire_free(job);
        }
    }
    free(ids);
    conn_close(&c);
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
    fmt_age(age, sizeof age, j->created_unix_ms);
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
            return usage_error("jobs", "--state '%s': expected queued, leased, running, done, "
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
    conn c;
    if ((rc = conn_open("jobs", &sf, db, 1, &c)))
        return rc;
    nb_err err;
    Npubench__ListJobsResponse *resp;
    if (nb_svc_call(c.svc, "ListJobs", &req, &npubench__list_jobs_response__descriptor, &resp,
                    &err)) {
        conn_close(&c);
        return nb_cmd_fail("jobs", &err);
    }
    printf("%-6s %-12s %-10s %-34s %-26s %-8s %-5s %s\n", "JOB", "KIND", "STATE", "TARGET",
           "WORKER", "PROGRESS", "AGE", "NOTE");
    for (size_t i = 0; i < resp->n_jobs; i++)
        job_line(resp->jobs[i]);
    if (!resp->n_jobs)
        printf("(no jobs)\n");
    nb_wire_free(resp);
    conn_close(&c);
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
        return usage_error("job", "expected a job id, got '%s'", np ? pos[0] : "");
    conn c;
    if ((rc = conn_open("job", &sf, db, 1, &c)))
        return rc;
    nb_err err;
    Npubench__Job *j;
    if (get_job(c.svc, id, log, &j, &err)) {
        conn_close(&c);
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
        nb_svc_print_opts po = {.cmd = "job"};
        rc = nb_svc_print_job(stdout, &po, j);
    }
    nb_wire_free(j);
    conn_close(&c);
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
        return usage_error("cancel", "expected a job id, got '%s'", np ? pos[0] : "");
    conn c;
    if ((rc = conn_open("cancel", &sf, db, 1, &c)))
        return rc;
    Npubench__CancelJobRequest req = NPUBENCH__CANCEL_JOB_REQUEST__INIT;
    req.job_id = id;
    if (reason)
        req.reason = (char *)reason;
    nb_err err;
    Npubench__CancelJobResponse *resp;
    if (nb_svc_call(c.svc, "CancelJob", &req, &npubench__cancel_job_response__descriptor, &resp,
                    &err)) {
        conn_close(&c);
        return nb_cmd_fail("cancel", &err);
    }
    printf("job %lld %s\n", id, nb_job_pb_state_name(resp->state));
    nb_wire_free(resp);
    conn_close(&c);
    return NB_EXIT_OK;
}

/* ---------------------------------------------------------------- workers */

int nb_cmd_workers(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL;
    int all = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"all", NB_OPT_FLAG, &all, 0, 0, "include gone workers"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    int rc = nb_cmd_parse("workers", "npubench workers [--all]", argc, argv, opts, NB_NOPTS(opts),
                          NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    conn c;
    if ((rc = conn_open("workers", &sf, db, 1, &c)))
        return rc;
    Npubench__ListWorkersRequest req = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
    req.include_dead = all;
    nb_err err;
    Npubench__ListWorkersResponse *resp;
    if (nb_svc_call(c.svc, "ListWorkers", &req, &npubench__list_workers_response__descriptor,
                    &resp, &err)) {
        conn_close(&c);
        return nb_cmd_fail("workers", &err);
    }
    printf("%-30s %-16s %-6s %-6s %-8s %-12s %s\n", "WORKER", "BOARD", "STATE", "SEEN", "JOB",
           "PROGRESS", "DEPLOYMENTS");
    for (size_t i = 0; i < resp->n_workers; i++) {
        const Npubench__WorkerStatus *w = resp->workers[i];
        const Npubench__WorkerInfo *in = w->info;
        char seen[16], job[24] = "-", prog[24] = "-", deps[512] = "";
        fmt_age(seen, sizeof seen, w->last_heartbeat_unix_ms);
        if (w->current_job_id)
            snprintf(job, sizeof job, "%lld", (long long)w->current_job_id);
        if (w->progress && w->progress->total)
            snprintf(prog, sizeof prog, "%d/%d", w->progress->done, w->progress->total);
        size_t len = 0;
        for (size_t k = 0; in && k < in->n_deployments && len < sizeof deps; k++)
            len += (size_t)snprintf(deps + len, sizeof deps - len, "%s%s %s/%s", k ? ", " : "",
                                    in->deployments[k]->model, in->deployments[k]->backend,
                                    in->deployments[k]->dtype);
        for (size_t k = 0; in && k < in->n_tags && len < sizeof deps; k++)
            len += (size_t)snprintf(deps + len, sizeof deps - len, " #%s", in->tags[k]);
        printf("%-30s %-16s %-6s %-6s %-8s %-12s %s\n", in ? in->worker_id : "?",
               in ? in->board_name : "?", w->state, seen, job, prog, deps);
    }
    if (!resp->n_workers)
        printf("(no workers)\n");
    nb_wire_free(resp);
    conn_close(&c);
    return NB_EXIT_OK;
}

/* ---------------------------------------------------------------- history */

typedef struct hist_run {
    const Npubench__HistoryRow *any;
    const Npubench__HistoryRow *m[3]; /* ttft, tps, gate */
} hist_run;

static int metric_slot(const char *m)
{
    return !strcmp(m, "ttft") ? 0 : !strcmp(m, "tps") ? 1 : !strcmp(m, "gate") ? 2 : -1;
}

static const char *outcome_word(int o)
{
    return o == NPUBENCH__OUTCOME__PASS ? "PASS" : o == NPUBENCH__OUTCOME__FAIL ? "FAIL"
                                                                                : "ERROR";
}

static void fmt_metric(char *buf, size_t cap, const Npubench__HistoryRow *r)
{
    if (!r) {
        snprintf(buf, cap, "-");
        return;
    }
    if (r->reps > 1 && r->stddev > 0)
        snprintf(buf, cap, "%.2f ± %.2f", r->mean ? r->mean : r->value, r->stddev);
    else
        snprintf(buf, cap, "%.2f", r->value);
}

static json_object *hist_json(const hist_run *h)
{
    const Npubench__HistoryRow *r = h->any;
    json_object *o = json_object_new_object();
    char iso[32];
    nb_time_iso(iso, r->finished_unix_ms);
    json_object_object_add(o, "run_id", json_object_new_int64(r->run_id));
    json_object_object_add(o, "job_id", json_object_new_int64(r->job_id));
    json_object_object_add(o, "started_utc", json_object_new_string(iso));
    json_object_object_add(o, "model", json_object_new_string(r->model));
    json_object_object_add(o, "backend", json_object_new_string(r->backend));
    json_object_object_add(o, "dtype", json_object_new_string(r->dtype));
    json_object_object_add(o, "board", json_object_new_string(r->board));
    json_object_object_add(o, "deployment_id", json_object_new_int64(r->deployment_id));
    json_object_object_add(o, "kind", json_object_new_string(r->kind_name));
    json_object_object_add(o, "source", json_object_new_string(r->source));
    json_object_object_add(o, "outcome", json_object_new_string(outcome_word(r->outcome)));
    json_object_object_add(o, "commit", json_object_new_string(r->npubench_commit));
    json_object_object_add(o, "model_digest", json_object_new_string(r->model_digest));
    json_object_object_add(o, "regression", json_object_new_boolean(r->regression));
    json_object *m = json_object_new_object();
    static const char *const names[3] = {"ttft_ms", "tps", "gate"};
    for (int i = 0; i < 3; i++) {
        if (!h->m[i])
            continue;
        json_object *v = json_object_new_object();
        json_object_object_add(v, "value", json_object_new_double(h->m[i]->value));
        if (i < 2) {
            json_object_object_add(v, "mean", json_object_new_double(h->m[i]->mean));
            json_object_object_add(v, "stddev", json_object_new_double(h->m[i]->stddev));
            json_object_object_add(v, "reps", json_object_new_int(h->m[i]->reps));
        }
        json_object_object_add(m, names[i], v);
    }
    json_object_object_add(o, "metrics", m);
    return o;
}

static int hist_cmp(const void *a, const void *b)
{
    const hist_run *x = a, *y = b;
    if (x->any->finished_unix_ms != y->any->finished_unix_ms)
        return x->any->finished_unix_ms < y->any->finished_unix_ms ? 1 : -1;
    return x->any->run_id < y->any->run_id ? 1 : x->any->run_id > y->any->run_id ? -1 : 0;
}

int nb_cmd_history(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *model = NULL, *board = NULL, *metric = NULL, *since = NULL, *db = NULL,
               *backend = NULL, *dtype = NULL, *kind = NULL;
    int json = 0, limit = 50, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"model", NB_OPT_STR, &model, 0, 0, "model (instruct, a name or a path)"},
        {"board", NB_OPT_STR, &board, 0, 0, "only this board"},
        {"backend", NB_OPT_STR, &backend, 0, 0, "only this backend"},
        {"dtype", NB_OPT_STR, &dtype, 0, 0, "only this dtype"},
        {"kind", NB_OPT_STR, &kind, 0, 0, "only runs of this kind (run, verify, ...)"},
        {"metric", NB_OPT_STR, &metric, 0, 0, "tps, ttft or gate (default: all three)"},
        {"since", NB_OPT_STR, &since, 0, 0, "YYYY-MM-DD[THH:MM:SSZ] (UTC)"},
        {"limit", NB_OPT_INT, &limit, 1, 100000, "newest N runs (default 50)"},
        {"json", NB_OPT_FLAG, &json, 0, 0, "JSON array instead of a table"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    int rc = nb_cmd_parse("history",
                          "npubench history --model M [--board B] [--metric tps|ttft|gate] "
                          "[--since DATE] [--json]",
                          argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    Npubench__HistoryRequest req = NPUBENCH__HISTORY_REQUEST__INIT;
    if (metric) {
        nb_db_metric m;
        if (nb_db_metric_parse(metric, &m, &err) ||
            (m != NB_METRIC_TPS && m != NB_METRIC_TTFT && m != NB_METRIC_GATE))
            return usage_error("history", "--metric '%s': expected tps, ttft or gate", metric);
        req.metric = (char *)nb_db_metric_name(m);
    }
    if (since && nb_svc_parse_date(since, &req.since_unix_ms, &err))
        return usage_error("history", "%s", err.msg);
    if (kind && !(req.kind = nb_job_kind_parse(kind)))
        return usage_error("history", "--kind '%s': expected run, verify, verify-full, "
                                      "diagnosis or profile",
                           kind);
    req.model = (char *)(model ? model : "");
    req.board = (char *)(board ? board : "");
    req.backend = (char *)(backend ? backend : "");
    req.dtype = (char *)(dtype ? dtype : "");
    req.limit = limit;
    conn c;
    if ((rc = conn_open("history", &sf, db, 1, &c)))
        return rc;
    Npubench__HistoryResponse *resp;
    if (nb_svc_call(c.svc, "History", &req, &npubench__history_response__descriptor, &resp,
                    &err)) {
        conn_close(&c);
        return nb_cmd_fail("history", &err);
    }
    /* One line per run: the rows come one per (run, metric). */
    hist_run *runs = calloc(resp->n_rows ? resp->n_rows : 1, sizeof *runs);
    size_t nr = 0;
    for (size_t i = 0; runs && i < resp->n_rows; i++) {
        const Npubench__HistoryRow *r = resp->rows[i];
        size_t k = 0;
        while (k < nr && runs[k].any->run_id != r->run_id)
            k++;
        if (k == nr)
            runs[nr++].any = r;
        int slot = metric_slot(r->metric);
        if (slot >= 0)
            runs[k].m[slot] = r;
    }
    if (runs)
        qsort(runs, nr, sizeof *runs, hist_cmp);
    if (nr > (size_t)limit)
        nr = (size_t)limit;
    int regressed = 0;
    if (json) {
        json_object *arr = json_object_new_array();
        for (size_t i = 0; i < nr; i++)
            json_object_array_add(arr, hist_json(&runs[i]));
        printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY));
        json_object_put(arr);
    } else if (!nr) {
        printf("no runs%s%s in the history\n", model ? " of " : "", model ? model : "");
    } else {
        printf("%-6s %-20s %-44s %-12s %-5s %-16s %-16s %-12s %s\n", "RUN", "DATE (UTC)",
               "DEPLOYMENT", "KIND", "GATE", "TTFT ms", "TPS", "COMMIT", "FLAG");
        for (size_t i = 0; i < nr; i++) {
            const Npubench__HistoryRow *r = runs[i].any;
            char date[32], dep[256], ttft[40], tps[40];
            nb_time_iso(date, r->finished_unix_ms);
            snprintf(dep, sizeof dep, "%s %s/%s @%s", r->model, r->backend, r->dtype, r->board);
            fmt_metric(ttft, sizeof ttft, runs[i].m[0]);
            fmt_metric(tps, sizeof tps, runs[i].m[1]);
            printf("%-6lld %-20s %-44s %-12s %-5s %-16s %-16s %-12.12s %s\n",
                   (long long)r->run_id, date, dep, r->kind_name, outcome_word(r->outcome),
                   ttft, tps, *r->npubench_commit ? r->npubench_commit : "-",
                   r->regression ? "REGRESSION" : "");
            regressed |= r->regression;
        }
    }
    free(runs);
    nb_wire_free(resp);
    conn_close(&c);
    (void)regressed; /* history reports; only submit --wait and compare fail on it */
    return NB_EXIT_OK;
}

/* ---------------------------------------------------------------- compare */

int nb_cmd_compare(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *against = NULL, *db = NULL;
    int jobs = 0, tol = 0, json = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"against", NB_OPT_STR, &against, 0, 0, "'reference': the model's reference deployment"},
        {"jobs", NB_OPT_FLAG, &jobs, 0, 0, "the ids are job ids, not run ids"},
        {"tolerance", NB_OPT_INT, &tol, 0, 1000, "% change counted as a regression (default 5)"},
        {"json", NB_OPT_FLAG, &json, 0, 0, "the comparison as JSON"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[2];
    int np = 0;
    int rc =
        nb_cmd_parse("compare", "npubench compare RUN_A RUN_B | compare RUN --against reference",
                     argc, argv, opts, NB_NOPTS(opts), pos, 2, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (against && strcmp(against, "reference"))
        return usage_error("compare", "--against '%s': only 'reference' is known", against);
    if ((against && np != 1) || (!against && np != 2))
        return usage_error("compare", "expected RUN_A RUN_B, or RUN --against reference%s", "");
    long long ids[2] = {0, 0};
    for (int i = 0; i < np; i++) {
        char *end;
        ids[i] = strtoll(pos[i], &end, 10);
        if (*end || ids[i] <= 0)
            return usage_error("compare", "'%s' is not a run id", pos[i]);
    }
    Npubench__CompareRequest req = NPUBENCH__COMPARE_REQUEST__INIT;
    if (jobs) {
        req.job_id = ids[0];
        req.base_job_id = ids[1];
    } else {
        req.run_id = ids[0];
        req.base_run_id = ids[1];
    }
    req.tolerance_pct = tol;
    conn c;
    if ((rc = conn_open("compare", &sf, db, 1, &c)))
        return rc;
    nb_err err;
    Npubench__CompareResponse *resp;
    if (nb_svc_call(c.svc, "Compare", &req, &npubench__compare_response__descriptor, &resp,
                    &err)) {
        conn_close(&c);
        return nb_cmd_fail("compare", &err);
    }
    if (json) {
        printf("%s\n", resp->report_json);
    } else {
        printf("%s\n%s %s\n\n", resp->label, against ? "reference:" : "vs", resp->base_label);
        char head[64];
        if (against)
            snprintf(head, sizeof head, "vs reference (× / %%)");
        else
            snprintf(head, sizeof head, "vs run %lld (× / %%)", (long long)resp->base_run_id);
        printf("%-20s | %-12s | %s\n", "Metric", "Value", head);
        printf("%-20s-|-%-12s-|-%s\n", "--------------------", "------------",
               "------------------------");
        static const struct {
            const char *metric, *label;
        } show[] = {{"ttft", "TTFT (ms)"}, {"tps", "TPS (tokens/s)"},
                    {"decode", "Decode (ms/token)"}};
        for (size_t s = 0; s < sizeof show / sizeof *show; s++) {
            for (size_t i = 0; i < resp->n_rows; i++) {
                const Npubench__CompareRow *r = resp->rows[i];
                if (strcmp(r->metric, show[s].metric))
                    continue;
                char vs[64];
                if (r->base_value > 0 && r->value > 0)
                    snprintf(vs, sizeof vs, "%.2f× / %+.1f%%%s", r->value / r->base_value,
                             r->delta_pct, r->regression ? "  REGRESSION" : "");
                else
                    snprintf(vs, sizeof vs, "-");
                char val[32];
                if (r->value > 0)
                    snprintf(val, sizeof val, "%.2f", r->value);
                else
                    snprintf(val, sizeof val, "-");
                printf("%-20s | %-12s | %s\n", show[s].label, val, vs);
            }
        }
    }
    rc = resp->outcome == NPUBENCH__OUTCOME__FAIL ? NB_EXIT_FAIL : NB_EXIT_OK;
    nb_wire_free(resp);
    conn_close(&c);
    return rc;
}

/* ---------------------------------------------------------------- reference */

int nb_cmd_reference(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL;
    int run = 0, job = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"run", NB_OPT_INT, &run, 1, 2147483647, "the deployment of this history run"},
        {"job", NB_OPT_INT, &job, 1, 2147483647, "the deployment of this job's run"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[2];
    int np = 0;
    int rc = nb_cmd_parse("reference", "npubench reference set DEPLOYMENT | reference set --run N",
                          argc, argv, opts, NB_NOPTS(opts), pos, 2, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!np || strcmp(pos[0], "set"))
        return usage_error("reference", "expected 'set DEPLOYMENT' (a deployment id from "
                                        "`npubench history --json`)%s",
                           "");
    Npubench__SetReferenceRequest req = NPUBENCH__SET_REFERENCE_REQUEST__INIT;
    if (np == 2) {
        char *end;
        long long d = strtoll(pos[1], &end, 10);
        if (*end || d <= 0)
            return usage_error("reference", "'%s' is not a deployment id", pos[1]);
        req.deployment_id = d;
    } else if (run) {
        req.run_id = run;
    } else if (job) {
        req.job_id = job;
    } else {
        return usage_error("reference", "set: name a DEPLOYMENT id, --run N or --job N%s", "");
    }
    conn c;
    if ((rc = conn_open("reference", &sf, db, 1, &c)))
        return rc;
    nb_err err;
    Npubench__SetReferenceResponse *resp;
    if (nb_svc_call(c.svc, "SetReference", &req, &npubench__set_reference_response__descriptor,
                    &resp, &err)) {
        conn_close(&c);
        return nb_cmd_fail("reference", &err);
    }
    printf("reference of %s: deployment %lld (%s)", resp->model, (long long)resp->deployment_id,
           resp->description);
    if (resp->previous_deployment_id && resp->previous_deployment_id != resp->deployment_id)
        printf(", was deployment %lld", (long long)resp->previous_deployment_id);
    printf("\n");
    nb_wire_free(resp);
    conn_close(&c);
    return NB_EXIT_OK;
}

/* ---------------------------------------------------------------- import */

int nb_cmd_import(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL, *backend = NULL, *dtype = NULL, *board = NULL;
    int help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"backend", NB_OPT_STR, &backend, 0, 0, "for rows naming none (default npu)"},
        {"dtype", NB_OPT_STR, &dtype, 0, 0, "for rows naming none (default bf16)"},
        {"board", NB_OPT_STR, &board, 0, 0, "board of every row (default: its runner)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[1];
    int np = 0;
    int rc = nb_cmd_parse("import", "npubench import FILE (perf.json or history.ndjson)", argc,
                          argv, opts, NB_NOPTS(opts), pos, 1, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!np)
        return usage_error("import", "expected a FILE (perf.json or history.ndjson)%s", "");
    nb_err err;
    char *data;
    size_t len;
    if (nb_file_read(pos[0], (size_t)15 << 20, &data, &len, &err))
        return nb_cmd_fail("import", &err);
    conn c;
    if ((rc = conn_open("import", &sf, db, 1, &c))) {
        free(data);
        return rc;
    }
    Npubench__ImportRequest req = NPUBENCH__IMPORT_REQUEST__INIT;
    req.name = (char *)pos[0];
    req.content.data = (uint8_t *)data;
    req.content.len = len;
    if (backend)
        req.backend = (char *)backend;
    if (dtype)
        req.dtype = (char *)dtype;
    if (board)
        req.board = (char *)board;
    Npubench__ImportResponse *resp;
    rc = NB_EXIT_OK;
    if (nb_svc_call(c.svc, "Import", &req, &npubench__import_response__descriptor, &resp,
                    &err)) {
        rc = nb_cmd_fail("import", &err);
    } else {
        printf("%s: %d run%s imported, %d already stored, %d bad\n", pos[0], resp->imported,
               resp->imported == 1 ? "" : "s", resp->skipped, resp->bad);
        for (size_t i = 0; i < resp->n_errors; i++)
            fprintf(stderr, "npubench import: %s\n", resp->errors[i]);
        if (resp->bad)
            rc = NB_EXIT_USAGE;
        nb_wire_free(resp);
    }
    free(data);
    conn_close(&c);
    return rc;
}
