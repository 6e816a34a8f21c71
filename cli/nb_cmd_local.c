/* nb_cmd_local: run, verify, verify-full, diagnosis and profile — each builds one job and
 * hands it to an embedded coordinator + CPU worker (default), a lab coordinator
 * (--coordinator URL) or the worker's executor alone (--direct); nb_print prints it. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_args.h"
#include "nb_deploy.h"
#include "nb_diagnosis.h"
#include "nb_embedded.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_print.h"
#include "nb_prompts.h"
#include "nb_svc.h"
#include "nb_verify.h"

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
    {"model", NB_OPT_STR, &(c).model, 0, 0, "instruct (default), base, gemma3, a .gguf or an HF dir"},   \
        {"dtype", NB_OPT_STR, &(c).dtype, 0, 0, "bf16 (default), f32, q4_1 or native"},                  \
        {"backend", NB_OPT_STR, &(c).backend, 0, 0, "cpu (default) or xrt"},                     \
        {"threads", NB_OPT_INT, &(c).threads, 0, NB_JOB_THREADS_MAX, "kernel threads, 0 = all cores"}, \
        {"max-seq", NB_OPT_INT, &(c).max_seq, 0, NB_JOB_MAX_SEQ_MAX, "KV cache length (default 2048)"}, \
        {"device", NB_OPT_INT, &(c).device, 0, NB_JOB_DEVICE_MAX, "XRT device index"},          \
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

static nb_code check_prompt(const char *prompt, nb_err *err);

/* The start every local command shares: its flags, the deployment they
 * name and, for the service, the prompt (*prompt, when the command has one).
 * Returns what nb_cmd_parse does, or the exit code of the error it printed. */
/* The command's word is its kind's (job/nb_job.c), and so is its usage line. */
static int parse_local(int kind, int argc, char **argv, const nb_opt *opts, int n_opts,
                       const int *help, const common_flags *c, const char *const *prompt,
                       nb_deploy_spec *ds)
{
    const char *cmd = nb_job_kind_name(kind);
    char usage[128];
    snprintf(usage, sizeof usage, "npubench %s [options]", cmd);
    int rc = nb_cmd_parse(cmd, usage, argc, argv, opts, n_opts, NULL, 0, NULL, help);
    if (rc)
        return rc;
    nb_err err;
    if (spec_from(c, ds, &err))
        return nb_cmd_fail(cmd, &err);
    if (prompt && check_prompt(*prompt, &err))
        return nb_cmd_fail(cmd, &err);
    return NB_EXIT_OK;
}

/* ---- the job and its path ------------------------------------------------------- */

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
    b->sel.dtype = (char *)nb_dtype_name(ds->dtype); /* for the coordinator's matching */
    b->sel.dtype_id = (Npubench__Dtype)nb_dtype_to_pb(ds->dtype);
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
        job_param_int(b, NB_JOB_PARAM_THREADS, c->threads);
    if (c->max_seq)
        job_param_int(b, NB_JOB_PARAM_MAX_SEQ, c->max_seq);
    if (c->device)
        job_param_int(b, NB_JOB_PARAM_DEVICE, c->device);
}

/* The job fields and parameters run and profile share. */
static void job_timed(job_build *b, const common_flags *c, int n_tokens, int reps, int warmup)
{
    b->spec.n_tokens = n_tokens;
    b->spec.reps = reps;
    job_common_params(b, c);
    job_param_int(b, NB_JOB_PARAM_WARMUP, warmup);
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

/* What a local command watches: its embedded worker, and progress to show (on a TTY, or
 * NPUBENCH_PROGRESS=1: a 24 s verify-full printed nothing until its end). */
typedef struct local_watch {
    nb_embedded *emb;
    int show;
    nb_svc_progress pr;
} local_watch;

/* Prints progress when asked; stops waiting when the embedded worker died. */
static int watch_embedded(void *ud, int64_t job_id, const Npubench__WatchJobResponse *w)
{
    local_watch *lw = ud;
    if (lw->show)
        nb_svc_print_progress(&lw->pr, job_id, w);
    return lw->emb && nb_embedded_worker_error(lw->emb, NULL) != NB_OK;
}

static int progress_wanted(void)
{
    const char *e = getenv("NPUBENCH_PROGRESS");
    return e && *e ? strcmp(e, "0") != 0 : isatty(STDERR_FILENO);
}

/* --direct: b's job on the executor in this process, printed as the service's result is. */
static int run_direct(const char *cmd, const nb_embedded_opts *eo, const job_build *b,
                      const nb_print_opts *po)
{
    nb_err err;
    Npubench__JobResult *res = NULL;
    nb_code rc = nb_embedded_execute(eo, &b->spec, &res, &err);
    int code = rc ? nb_cmd_fail(cmd, &err) : nb_print_result(stdout, po, b->spec.kind, res);
    nb_jobpb_free(res);
    return code;
}

/* Submits b's job to the coordinator c names, to an embedded coordinator and worker for
 * deployment ds, or (--direct) to that worker's executor alone; waits; prints. */
static int run_job(const char *cmd, const common_flags *c, const nb_deploy_spec *ds,
                   job_build *b, const nb_print_opts *po)
{
    nb_err err;
    nb_embedded *emb = NULL;
    nb_svc *svc = NULL;
    const char *url = nb_svc_url(&c->svc);
    nb_embedded_opts eo = {.db_path = c->db,
                           .with_worker = 1,
                           .model = ds->model,
                           .backend = ds->backend,
                           .dtype = ds->dtype,
                           .threads = ds->threads,
                           .max_seq = ds->max_seq,
                           .device = (int)ds->device};
    int code;
    if (c->direct) {
        return run_direct(cmd, &eo, b, po);
    } else if (url) {
        if (nb_svc_open(&c->svc, url, &svc, &err))
            return nb_cmd_fail(cmd, &err);
    } else {
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
    local_watch lw = {.emb = emb, .show = progress_wanted(), .pr = {.f = stderr, .kind = cmd}};
    if (nb_svc_submit(svc, &b->spec, 0, &ids, &n, &err) ||
        nb_svc_wait(svc, ids[0], 0, watch_embedded, &lw, &job, &err)) {
        nb_err werr;
        if (emb && nb_embedded_worker_error(emb, &werr))
            err = werr;
        code = nb_cmd_fail(cmd, &err);
    } else {
        code = nb_print_job(stdout, po, job);
    }
    nb_wire_free(job);
    free(ids);
    nb_svc_close(svc);
    nb_embedded_stop(emb);
    return code;
}

/* ---- run ------------------------------------------------------------------- */

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
        {"reps", NB_OPT_INT, &reps, 1, NB_JOB_REPS_MAX, "timed repetitions (default 3)"},
        {"warmup", NB_OPT_INT, &warmup, 0, NB_JOB_WARMUP_MAX, "untimed warm-up runs (default 1)"},
        {"chat", NB_OPT_FLAG, &chat, 1, 0, "apply the chat template"},
        {"no-chat", NB_OPT_FLAG, &chat, 2, 0, "feed the raw prompt"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    nb_deploy_spec ds;
    const char *cmd = nb_job_kind_name(NPUBENCH__JOB_KIND__RUN);
    int rc = parse_local(NPUBENCH__JOB_KIND__RUN, argc, argv, opts, NB_NOPTS(opts), &help,
                         &c, &prompt, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    job_build b;
    job_init(&b, NPUBENCH__JOB_KIND__RUN, &c, &ds);
    b.spec.prompt = (char *)(prompt ? prompt : "");
    job_timed(&b, &c, n_tokens, reps, warmup);
    if (chat > 0)
        job_param_int(&b, NB_JOB_PARAM_CHAT, chat == 1);
    if (ignore_eos)
        job_param_int(&b, NB_JOB_PARAM_IGNORE_EOS, 1);
    nb_print_opts po = {.cmd = cmd, .show_text = 1};
    return run_job(cmd, &c, &ds, &b, &po);
}

/* ---- verify ---------------------------------------------------------------- */

static int verify_common(int kind, int argc, char **argv)
{
    const char *cmd = nb_job_kind_name(kind);
    int full = kind == NPUBENCH__JOB_KIND__VERIFY_FULL;
    common_flags c = {0};
    const char *prompts_file = NULL, *reference = NULL, *reports = "reports", *localize = NULL;
    const nb_job_kind_param *mp = nb_job_kind_param_of(nb_job_kind_desc_of(kind), "max_prompts");
    int max_prompts = mp && !mp->inherit ? (int)mp->dflt : 0, n_tokens = 0, k = 0, help = 0, quiet = 0, strict = 0;
    nb_opt opts[] = {
        COMMON_OPTS(c),
        {"prompts-file", NB_OPT_STR, &prompts_file, 0, 0, "prompt set (default: the preset's)"},
        {"max-prompts", NB_OPT_INT, &max_prompts, 0, NB_JOB_PROMPTS_MAX, "first N prompts (0 = all)"},
        {"reference", NB_OPT_STR, &reference, 0, 0, "HF trace to use instead of the lookup"},
        {"n-tokens", NB_OPT_INT, &n_tokens, 0, NB_JOB_N_TOKENS_MAX, "steps per prompt (default: the trace's)"},
        {"k", NB_OPT_INT, &k, 0, NB_JOB_K_MAX, "top-k set size (default: the trace's)"},
        {"reports", NB_OPT_STR, &reports, 0, 0, "report directory (default reports/)"},
        {"localize", NB_OPT_STR, &localize, 0, 0,
         "fail (default: every FAIL), divergence (a PASS that diverges too) or off"},
        {"strict", NB_OPT_FLAG, &strict, 0, 0,
         "a decode-path defect fails a gate PASS (exit 1; without it: exit 0, flagged)"},
        {"quiet", NB_OPT_FLAG, &quiet, 0, 0, "only the summary line"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    nb_deploy_spec ds;
    int rc = parse_local(kind, argc, argv, opts, NB_NOPTS(opts), &help, &c, NULL, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    job_build b;
    job_init(&b, kind, &c, &ds);
    /* The file's prompts travel as content: the service opens no client paths. */
    nb_err err;
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
        job_param(&b, NB_JOB_PARAM_REFERENCE, reference);
    if (localize)
        job_param(&b, NB_JOB_PARAM_LOCALIZE, localize);
    if (strict)
        job_param(&b, NB_JOB_PARAM_STRICT, "1");
    /* the file's digest: its trace is found (and recorded) by it, not by the comment-free
     * copy the worker writes */
    if (prompts_file)
        job_param(&b, NB_JOB_PARAM_PROMPTS_SHA256, ps.sha256);
    nb_print_opts po = {.cmd = cmd, .reports_dir = reports, .quiet = quiet};
    int code = run_job(cmd, &c, &ds, &b, &po);
    nb_prompts_free(&ps);
    return code;
}

int nb_cmd_verify(int argc, char **argv)
{
    return verify_common(NPUBENCH__JOB_KIND__VERIFY, argc, argv);
}

int nb_cmd_verify_full(int argc, char **argv)
{
    return verify_common(NPUBENCH__JOB_KIND__VERIFY_FULL, argc, argv);
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
    const char *cmd = nb_job_kind_name(NPUBENCH__JOB_KIND__DIAGNOSIS);
    int rc = parse_local(NPUBENCH__JOB_KIND__DIAGNOSIS, argc, argv, opts,
                         NB_NOPTS(opts), &help, &c, &prompt, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    job_build b;
    job_init(&b, NPUBENCH__JOB_KIND__DIAGNOSIS, &c, &ds);
    if (prompt)
        b.spec.prompt = (char *)prompt;
    job_common_params(&b, &c);
    if (reference)
        job_param(&b, NB_JOB_PARAM_REFERENCE, reference);
    nb_print_opts po = {.cmd = cmd, .reports_dir = reports};
    return run_job(cmd, &c, &ds, &b, &po);
}

/* ---- profile --------------------------------------------------------------- */

int nb_cmd_profile(int argc, char **argv)
{
    common_flags c = {0};
    const char *prompt = NULL, *reports = "reports";
    int n_tokens = 20, reps = 3, warmup = 1, help = 0;
    nb_opt opts[] = {
        COMMON_OPTS(c),
        {"prompt", NB_OPT_STR, &prompt, 0, 0, "prompt text"},
        {"reports", NB_OPT_STR, &reports, 0, 0, "report directory (default reports/)"},
        {"n-tokens", NB_OPT_INT, &n_tokens, 1, NB_JOB_N_TOKENS_MAX, "tokens to generate (default 20)"},
        {"reps", NB_OPT_INT, &reps, 1, NB_JOB_REPS_MAX, "timed repetitions (default 3)"},
        {"warmup", NB_OPT_INT, &warmup, 0, NB_JOB_WARMUP_MAX, "untimed warm-up runs (default 1)"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    nb_deploy_spec ds;
    const char *cmd = nb_job_kind_name(NPUBENCH__JOB_KIND__PROFILE);
    int rc = parse_local(NPUBENCH__JOB_KIND__PROFILE, argc, argv, opts,
                         NB_NOPTS(opts), &help, &c, &prompt, &ds);
    if (rc)
        return rc < 0 ? 0 : rc;
    job_build b;
    job_init(&b, NPUBENCH__JOB_KIND__PROFILE, &c, &ds);
    if (prompt)
        b.spec.prompt = (char *)prompt;
    job_timed(&b, &c, n_tokens, reps, warmup);
    nb_print_opts po = {.cmd = cmd, .reports_dir = reports};
    return run_job(cmd, &c, &ds, &b, &po);
}
