/* nb_cmd_local: run, verify, verify-full, diagnosis and profile — submitted as a job to an
 * embedded coordinator + CPU worker (default), to a lab coordinator (--coordinator URL), or
 * run in this process without the service (--direct). The output is the same either way. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_bench.h"
#include "nb_deploy.h"
#include "nb_diagnosis.h"
#include "nb_embedded.h"
#include "nb_job.h"
#include "nb_kernels.h"
#include "nb_prompts.h"
#include "nb_report.h"
#include "nb_svc.h"
#include "nb_verify.h"

int nb_cmd_exit_code(nb_code rc)
{
    switch (rc) {
    case NB_OK: return NB_EXIT_OK;
    case NB_EUNAVAIL:
    case NB_ETIMEOUT: return NB_EXIT_UNAVAILABLE;
    default: return NB_EXIT_USAGE;
    }
}

int nb_cmd_fail(const char *cmd, const nb_err *err)
{
    fprintf(stderr, "npubench %s: error: %s\n", cmd, err->msg);
    return nb_cmd_exit_code(err->code);
}

/* Flags every local command shares, parsed into a deployment spec. */
typedef struct common_flags {
    const char *model, *dtype, *backend;
    int threads, max_seq, device;
    /* where it runs */
    nb_svc_flags svc;
    const char *db;
    int direct;
} common_flags;

#define COMMON_OPTS(c)                                                                           \
    {"model", NB_OPT_STR, &(c).model, 0, 0, "instruct (default), base, a .gguf or an HF dir"},   \
        {"dtype", NB_OPT_STR, &(c).dtype, 0, 0, "bf16 (default), f32 or q4_1"},                  \
        {"backend", NB_OPT_STR, &(c).backend, 0, 0, "cpu (default) or xrt"},                     \
        {"threads", NB_OPT_INT, &(c).threads, 0, 1024, "kernel threads, 0 = all cores"},         \
        {"max-seq", NB_OPT_INT, &(c).max_seq, 0, 1 << 20, "KV cache length (default 2048)"},     \
        {"device", NB_OPT_INT, &(c).device, 0, 255, "XRT device index"},                         \
        {"db", NB_OPT_STR, &(c).db, 0, 0, "history database (default var/npubench.db)"},         \
        {"direct", NB_OPT_FLAG, &(c).direct, 0, 0, "run in this process, without the service"}, \
        NB_SVC_OPTS((c).svc)

static nb_code spec_from(const common_flags *c, nb_deploy_spec *s, nb_err *err)
{
    nb_deploy_spec_default(s);
    if (c->model)
        snprintf(s->model, sizeof s->model, "%s", c->model);
    if (c->backend)
        snprintf(s->backend, sizeof s->backend, "%s", c->backend);
    if (c->dtype) {
        nb_code rc = nb_dtype_parse(c->dtype, &s->dtype, err);
        if (rc)
            return nb_err_prefix(err, "--dtype: ");
    }
    s->threads = c->threads;
    s->max_seq = c->max_seq;
    s->device = (unsigned)c->device;
    return NB_OK;
}

int nb_cmd_parse(const char *cmd, const char *usage, int argc, char **argv, const nb_opt *opts,
                 int n_opts, const char **pos, int max_pos, int *n_pos, const int *help)
{
    nb_err err;
    if (nb_args_parse(argc, argv, opts, n_opts, pos, max_pos, n_pos, &err)) {
        fprintf(stderr, "npubench %s: %s\n", cmd, err.msg);
        nb_args_usage(stderr, usage, opts, n_opts);
        return NB_EXIT_USAGE;
    }
    if (*help) {
        nb_args_usage(stdout, usage, opts, n_opts);
        return -1;
    }
    return NB_EXIT_OK;
}

static nb_code check_prompt(const char *prompt, nb_err *err);

/* The start every local command shares: its flags, the deployment they
 * name and, for the service, the prompt (*prompt, when the command has one).
 * Returns what nb_cmd_parse does, or the exit code of the error it printed. */
static int parse_local(const char *cmd, const char *usage, int argc, char **argv,
                       const nb_opt *opts, int n_opts, const int *help, const common_flags *c,
                       const char *const *prompt, nb_deploy_spec *ds)
{
    int rc = nb_cmd_parse(cmd, usage, argc, argv, opts, n_opts, NULL, 0, NULL, help);
    if (rc)
        return rc;
    nb_err err;
    if (spec_from(c, ds, &err))
        return nb_cmd_fail(cmd, &err);
    if (!c->direct && prompt && check_prompt(*prompt, &err))
        return nb_cmd_fail(cmd, &err);
    return NB_EXIT_OK;
}

static void print_deployment(nb_deploy *d)
{
    char desc[256];
    nb_deploy_describe(d, desc, sizeof desc);
    printf("Deployment: %s, %d threads, kernels %s\n", desc, nb_kernels_threads(),
           nb_isa_name(nb_kernels_isa()));
}

/* The options run and profile share. */
static void timed_opts(nb_run_opts *ro, const char *prompt, int n_tokens, int reps, int warmup)
{
    nb_run_opts_default(ro);
    ro->prompt = prompt;
    ro->n_tokens = n_tokens;
    ro->reps = reps;
    ro->warmup = warmup;
}

static void report_written(const char *cmd, nb_code rc, const char *path, const nb_err *err)
{
    if (rc)
        fprintf(stderr, "npubench %s: warning: report not written: %s\n", cmd, err->msg);
    else
        printf("Report: %s (+ .md)\n", path);
}

/* ---- the service path ------------------------------------------------------ */

/* A job under construction: the spec plus the storage its fields point to. */
typedef struct job_build {
    Npubench__JobSpec spec;
    Npubench__DeploymentSelector sel;
    Npubench__KeyValue kv[8];
    Npubench__KeyValue *kvp[8];
    char vals[8][32];
    char *tags[1];
} job_build;

static void job_init(job_build *b, int kind, const common_flags *c, const nb_deploy_spec *ds)
{
    memset(b, 0, sizeof *b);
    npubench__job_spec__init(&b->spec);
    npubench__deployment_selector__init(&b->sel);
    b->spec.kind = kind;
    b->spec.selector = &b->sel;
    b->sel.model = (char *)ds->model;
    b->sel.dtype = (char *)nb_dtype_name(ds->dtype);
    if (c->backend)
        b->sel.backend = (char *)ds->backend;
    b->spec.params = b->kvp;
}

static void job_param(job_build *b, const char *key, const char *value)
{
    size_t i = b->spec.n_params;
    if (i >= sizeof b->kv / sizeof *b->kv)
        return;
    npubench__key_value__init(&b->kv[i]);
    b->kv[i].key = (char *)key;
    b->kv[i].value = (char *)value;
    b->kvp[i] = &b->kv[i];
    b->spec.n_params++;
}

static void job_param_int(job_build *b, const char *key, int v)
{
    size_t i = b->spec.n_params;
    if (i >= sizeof b->vals / sizeof *b->vals)
        return;
    snprintf(b->vals[i], sizeof b->vals[i], "%d", v);
    job_param(b, key, b->vals[i]);
}

static void job_common_params(job_build *b, const common_flags *c)
{
    if (c->threads)
        job_param_int(b, "threads", c->threads);
    if (c->max_seq)
        job_param_int(b, "max_seq", c->max_seq);
    if (c->device)
        job_param_int(b, "device", c->device);
}

/* The job fields and parameters run and profile share. */
static void job_timed(job_build *b, const common_flags *c, int n_tokens, int reps, int warmup)
{
    b->spec.n_tokens = n_tokens;
    b->spec.reps = reps;
    job_common_params(b, c);
    job_param_int(b, "warmup", warmup);
}

/* The prompt as the flag gave it: the same check (and message) the engine
 * applies, before anything is submitted. */
static nb_code check_prompt(const char *prompt, nb_err *err)
{
    if (!prompt)
        return NB_OK;
    nb_prompts ps;
    nb_code rc = nb_prompts_single(prompt, &ps, err);
    if (!rc)
        nb_prompts_free(&ps);
    return rc;
}

/* Stops waiting when the embedded worker died. */
static int watch_embedded(void *ud, int64_t job_id, const Npubench__WatchJobResponse *w)
{
    (void)job_id;
    (void)w;
    return ud && nb_embedded_worker_error(ud, NULL) != NB_OK;
}

/* Submits b's job to the coordinator c names, or to an embedded coordinator
 * and worker for deployment ds; waits; prints as the local command does. */
static int run_service(const char *cmd, const common_flags *c, const nb_deploy_spec *ds,
                       job_build *b, const nb_svc_print_opts *po)
{
    nb_err err;
    nb_embedded *emb = NULL;
    nb_svc *svc = NULL;
    const char *url = nb_svc_url(&c->svc);
    int code;
    if (url) {
        if (nb_svc_open(&c->svc, url, &svc, &err))
            return nb_cmd_fail(cmd, &err);
    } else {
        nb_embedded_opts eo = {.db_path = c->db,
                               .with_worker = 1,
                               .model = ds->model,
                               .backend = ds->backend,
                               .dtype = nb_dtype_name(ds->dtype),
                               .threads = ds->threads,
                               .max_seq = ds->max_seq,
                               .device = (int)ds->device};
        if (nb_embedded_start(&eo, &emb, &err) ||
            nb_svc_open(NULL, nb_embedded_url(emb), &svc, &err)) {
            code = nb_cmd_fail(cmd, &err);
            nb_embedded_stop(emb);
            return code;
        }
        /* Only this session's worker may take it. */
        b->tags[0] = (char *)nb_embedded_tag(emb);
        b->sel.tags = b->tags;
        b->sel.n_tags = 1;
    }
    int64_t *ids = NULL;
    size_t n = 0;
    Npubench__Job *job = NULL;
    if (nb_svc_submit(svc, &b->spec, 0, &ids, &n, &err) ||
        nb_svc_wait(svc, ids[0], 0, emb ? watch_embedded : NULL, emb, &job, &err)) {
        nb_err werr;
        if (emb && nb_embedded_worker_error(emb, &werr))
            err = werr;
        code = nb_cmd_fail(cmd, &err);
    } else {
        code = nb_svc_print_job(stdout, po, job);
    }
    nb_wire_free(job);
    free(ids);
    nb_svc_close(svc);
    nb_embedded_stop(emb);
    return code;
}

/* ---- run ------------------------------------------------------------------- */

void nb_cmd_print_run(FILE *f, const nb_run_result *r)
{
    fprintf(f, "Setup: %.1f ms (once, outside every timed region)\n", r->setup_ms);
    const nb_run_sample *last = &r->samples[r->n - 1];
    fprintf(f, "Prompt tokens: %d, generated tokens: %d, repetitions: %d\n", last->prompt_tokens,
            last->generated_tokens, r->n);
    fprintf(f, "Time to first token (TTFT): %.3fs (%.2f ms ± %.2f)\n", r->ttft_ms.mean / 1000.0,
            r->ttft_ms.mean, r->ttft_ms.stddev);
    fprintf(f, "Decode: %.2f ms/token ± %.2f (TPOT %.2f ms)\n", r->decode_ms_per_token.mean,
            r->decode_ms_per_token.stddev, r->tpot_ms.mean);
    fprintf(f, "Tokens/second: %.2f ± %.2f\n", r->tps.mean, r->tps.stddev);
}

int nb_cmd_run(int argc, char **argv)
{
    common_flags c = {0};
    const char *prompt = NULL;
    int n_tokens = 100, reps = 3, warmup = 1, chat = -1, help = 0, ignore_eos = 0;
    nb_opt opts[] = {
        {"ignore-eos", NB_OPT_FLAG, &ignore_eos, 0, 0, "generate all n-tokens (benchmarks)"},
        COMMON_OPTS(c),
        {"prompt", NB_OPT_STR, &prompt, 0, 0, "prompt text"},
        {"n-tokens", NB_OPT_INT, &n_tokens, 1, NB_JOB_N_TOKENS_MAX, "tokens to generate (default 100)"},
        {"reps", NB_OPT_INT, &reps, 1, 1000, "timed repetitions (default 3)"},
        {"warmup", NB_OPT_INT, &warmup, 0, 100, "untimed warm-up runs (default 1)"},
        {"chat", NB_OPT_FLAG, &chat, 1, 0, "apply the chat template"},
        {"no-chat", NB_OPT_FLAG, &chat, 2, 0, "feed the raw prompt"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    nb_deploy_spec ds;
    int rc = parse_local("run", "npubench run [options]", argc, argv, opts, NB_NOPTS(opts), &help,
                         &c, &prompt, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    if (!c.direct) {
        job_build b;
        job_init(&b, NPUBENCH__JOB_KIND__RUN, &c, &ds);
        b.spec.prompt = (char *)(prompt ? prompt : "");
        job_timed(&b, &c, n_tokens, reps, warmup);
        if (chat > 0)
            job_param_int(&b, "chat", chat == 1);
        if (ignore_eos)
            job_param_int(&b, "ignore_eos", 1);
        nb_svc_print_opts po = {.cmd = "run", .show_text = 1};
        return run_service("run", &c, &ds, &b, &po);
    }
    nb_deploy *d;
    if (nb_deploy_open(&ds, &d, &err))
        return nb_cmd_fail("run", &err);
    nb_run_opts ro;
    timed_opts(&ro, prompt, n_tokens, reps, warmup);
    ro.chat = chat == 1 ? 1 : chat == 2 ? 0 : -1;
    ro.stop_eog = !ignore_eos;
    nb_run_result r;
    if (nb_bench_run(d, &ro, &r, &err)) {
        nb_deploy_close(d);
        return nb_cmd_fail("run", &err);
    }
    print_deployment(d);
    nb_cmd_print_run(stdout, &r);
    printf("Generated text:\n%s\n", r.text ? r.text : "");
    nb_run_result_free(&r);
    nb_deploy_close(d);
    return NB_EXIT_OK;
}

/* ---- verify ---------------------------------------------------------------- */

static int verify_common(const char *cmd, int argc, char **argv, int full)
{
    common_flags c = {0};
    const char *prompts_file = NULL, *reference = NULL, *reports = "reports";
    int max_prompts = full ? 0 : 2, n_tokens = 0, k = 0, help = 0, quiet = 0;
    nb_opt opts[] = {
        COMMON_OPTS(c),
        {"prompts-file", NB_OPT_STR, &prompts_file, 0, 0, "prompt set (default: the preset's)"},
        {"max-prompts", NB_OPT_INT, &max_prompts, 0, NB_JOB_PROMPTS_MAX, "first N prompts (0 = all)"},
        {"reference", NB_OPT_STR, &reference, 0, 0, "HF trace to use instead of the lookup"},
        {"n-tokens", NB_OPT_INT, &n_tokens, 0, NB_JOB_N_TOKENS_MAX, "steps per prompt (default: the trace's)"},
        {"k", NB_OPT_INT, &k, 0, NB_GATE_K_MAX, "top-k set size (default: the trace's)"},
        {"reports", NB_OPT_STR, &reports, 0, 0, "report directory (default reports/)"},
        {"quiet", NB_OPT_FLAG, &quiet, 0, 0, "only the summary line"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    char usage[128];
    snprintf(usage, sizeof usage, "npubench %s [options]", cmd);
    nb_deploy_spec ds;
    int rc = parse_local(cmd, usage, argc, argv, opts, NB_NOPTS(opts), &help, &c, NULL, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    if (!c.direct) {
        job_build b;
        job_init(&b, full ? NPUBENCH__JOB_KIND__VERIFY_FULL : NPUBENCH__JOB_KIND__VERIFY, &c,
                 &ds);
        /* The file's prompts travel as content: the service opens no client paths. */
        nb_prompts ps = {0};
        if (prompts_file && nb_prompts_load(prompts_file, &ps, &err))
            return nb_cmd_fail(cmd, &err);
        b.spec.prompts = ps.items;
        b.spec.n_prompts = (size_t)ps.n;
        /* 0 means "all" here; the job's 0 means the kind's default. */
        b.spec.max_prompts = max_prompts ? max_prompts : full ? 0 : NB_JOB_PROMPTS_MAX;
        b.spec.n_tokens = n_tokens;
        b.spec.k = k;
        job_common_params(&b, &c);
        if (reference)
            job_param(&b, "reference", reference);
        nb_svc_print_opts po = {.cmd = cmd, .reports_dir = reports, .quiet = quiet};
        int code = run_service(cmd, &c, &ds, &b, &po);
        nb_prompts_free(&ps);
        return code;
    }
    nb_deploy *d;
    if (nb_deploy_open(&ds, &d, &err))
        return nb_cmd_fail(cmd, &err);
    nb_verify_opts vo = {.prompts_file = prompts_file, .reference = reference,
                         .max_prompts = max_prompts, .n_tokens = n_tokens, .k = k};
    nb_verify_result r;
    if (nb_verify_run(d, &vo, &r, &err)) {
        nb_deploy_close(d);
        return nb_cmd_fail(cmd, &err);
    }
    nb_report_env env;
    nb_report_env_from(d, NULL, &env);
    if (!quiet)
        nb_report_print_verify(stdout, &r, &env);
    else
        printf("[verify] %s (%d/%d prompts pass)\n", r.status == NB_GATE_PASS ? "PASS" : "FAIL",
               r.n_pass, r.n);
    char path[1200];
    report_written(cmd, nb_report_write_verify(reports, &r, &env, cmd, path, sizeof path, &err),
                   path, &err);
    int code = r.status == NB_GATE_PASS ? NB_EXIT_OK : NB_EXIT_FAIL;
    nb_verify_result_free(&r);
    nb_deploy_close(d);
    return code;
}

int nb_cmd_verify(int argc, char **argv)
{
    return verify_common("verify", argc, argv, 0);
}

int nb_cmd_verify_full(int argc, char **argv)
{
    return verify_common("verify-full", argc, argv, 1);
}

/* ---- diagnosis ------------------------------------------------------------- */

int nb_cmd_diagnosis(int argc, char **argv)
{
    common_flags c = {0};
    const char *prompt = NULL, *reference = NULL, *reports = "reports";
    int help = 0;
    nb_opt opts[] = {
        COMMON_OPTS(c),
        {"prompt", NB_OPT_STR, &prompt, 0, 0, "prompt (default \"" NB_DIAGNOSIS_DEFAULT_PROMPT "\")"},
        {"reference", NB_OPT_STR, &reference, 0, 0, "HF hidden-states trace"},
        {"reports", NB_OPT_STR, &reports, 0, 0, "report directory (default reports/)"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    nb_deploy_spec ds;
    int rc = parse_local("diagnosis", "npubench diagnosis [options]", argc, argv, opts,
                         NB_NOPTS(opts), &help, &c, &prompt, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    if (!c.direct) {
        job_build b;
        job_init(&b, NPUBENCH__JOB_KIND__DIAGNOSIS, &c, &ds);
        if (prompt)
            b.spec.prompt = (char *)prompt;
        job_common_params(&b, &c);
        if (reference)
            job_param(&b, "reference", reference);
        nb_svc_print_opts po = {.cmd = "diagnosis", .reports_dir = reports};
        return run_service("diagnosis", &c, &ds, &b, &po);
    }
    nb_deploy *d;
    if (nb_deploy_open(&ds, &d, &err))
        return nb_cmd_fail("diagnosis", &err);
    nb_diagnosis_result r;
    if (nb_diagnosis_run(d, prompt, reference, NULL, &r, &err)) {
        nb_deploy_close(d);
        return nb_cmd_fail("diagnosis", &err);
    }
    nb_report_env env;
    nb_report_env_from(d, NULL, &env);
    nb_report_print_diagnosis(stdout, &r);
    char path[1200];
    nb_code wrc = nb_report_write_diagnosis(reports, &r, &env, path, sizeof path, &err);
    report_written("diagnosis", wrc, path, &err);
    nb_diagnosis_result_free(&r);
    nb_deploy_close(d);
    return NB_EXIT_OK; /* informational: never fails on numbers */
}

/* ---- profile --------------------------------------------------------------- */

void nb_cmd_print_profile(FILE *f, const nb_profile_result *p)
{
    fprintf(f, "Phase                         ms\n");
    fprintf(f, "  setup (once)          %10.2f\n", p->setup_ms);
    fprintf(f, "  prefill total         %10.2f ± %.2f  (%d prompt tokens)\n", p->prefill_ms.mean,
            p->prefill_ms.stddev, p->prompt_tokens);
    fprintf(f, "  decode per token      %10.2f ± %.2f  (%d tokens)\n", p->decode_avg_ms.mean,
            p->decode_avg_ms.stddev, p->n_tokens);
    fprintf(f, "  LM head per call      %10.3f\n", p->lm_head_ms);
    fprintf(f, "Kernel (all %d repetitions)  calls   total ms     avg ms\n", p->reps);
    for (int i = 0; i < NB_OP_COUNT; i++) {
        const nb_op_stats *s = &p->ops[i];
        if (!s->calls)
            continue;
        fprintf(f, "  %-22s %8ld %10.2f %10.4f\n", nb_op_name((nb_op)i), s->calls, s->total_ms,
                s->total_ms / s->calls);
    }
}

int nb_cmd_profile(int argc, char **argv)
{
    common_flags c = {0};
    const char *prompt = NULL;
    int n_tokens = 20, reps = 3, warmup = 1, help = 0;
    nb_opt opts[] = {
        COMMON_OPTS(c),
        {"prompt", NB_OPT_STR, &prompt, 0, 0, "prompt text"},
        {"n-tokens", NB_OPT_INT, &n_tokens, 1, NB_JOB_N_TOKENS_MAX, "tokens to generate (default 20)"},
        {"reps", NB_OPT_INT, &reps, 1, 1000, "timed repetitions (default 3)"},
        {"warmup", NB_OPT_INT, &warmup, 0, 100, "untimed warm-up runs (default 1)"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    nb_deploy_spec ds;
    int rc = parse_local("profile", "npubench profile [options]", argc, argv, opts,
                         NB_NOPTS(opts), &help, &c, &prompt, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    if (!c.direct) {
        job_build b;
        job_init(&b, NPUBENCH__JOB_KIND__PROFILE, &c, &ds);
        if (prompt)
            b.spec.prompt = (char *)prompt;
        job_timed(&b, &c, n_tokens, reps, warmup);
        nb_svc_print_opts po = {.cmd = "profile"};
        return run_service("profile", &c, &ds, &b, &po);
    }
    nb_deploy *d;
    if (nb_deploy_open(&ds, &d, &err))
        return nb_cmd_fail("profile", &err);
    nb_run_opts ro;
    timed_opts(&ro, prompt, n_tokens, reps, warmup);
    nb_profile_result p;
    if (nb_bench_profile(d, &ro, &p, &err)) {
        nb_deploy_close(d);
        return nb_cmd_fail("profile", &err);
    }
    print_deployment(d);
    nb_cmd_print_profile(stdout, &p);
    nb_cmd_print_run(stdout, &p.run);
    nb_profile_result_free(&p);
    nb_deploy_close(d);
    return NB_EXIT_OK;
}
