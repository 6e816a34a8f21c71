/* nb_print: the CLI's result output — run and profile tables, and a JobResult printed the way
 * each local command prints it, whether it came from a coordinator or ran in this process. */
#include "nb_print.h"

#include <string.h>

#include "nb_benchpb.h"
#include "nb_cmd.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_outcome.h"
#include "nb_report.h"
#include "nb_rpc.h"
#include "nb_verifypb.h"

void nb_print_run(FILE *f, const nb_run_result *r)
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

void nb_print_profile(FILE *f, const nb_profile_result *p)
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

static int print_verify(FILE *f, const nb_print_opts *o, const Npubench__JobResult *res,
                        const char *kind)
{
    nb_err err;
    nb_verify_result r;
    if (nb_verifypb_verify_from_pb(res, &r, &err)) {
        fprintf(stderr, "npubench %s: error: result unreadable: %s\n", o->cmd, err.msg);
        return NB_EXIT_USAGE;
    }
    nb_report_env env;
    memset(&env, 0, sizeof env);
    if (res->environment)
        nb_verifypb_env_to_report(res->environment, &env);
    if (!o->quiet)
        nb_report_print_verify(f, &r, &env);
    else
    {
        char word[64];
        fprintf(f, "[verify] %s (%d/%d prompts pass)\n", nb_verify_result_word(&r, word,
                                                                              sizeof word),
                r.n_pass, r.n);
    }
    if (o->reports_dir) {
        char path[1200];
        if (nb_report_write_verify(o->reports_dir, &r, &env, kind, path, sizeof path, &err))
            fprintf(stderr, "npubench %s: warning: report not written: %s\n", o->cmd, err.msg);
        else
            fprintf(f, "Report: %s (+ .md)\n", path);
    }
    int code = r.status == NB_GATE_PASS ? NB_EXIT_OK : NB_EXIT_FAIL;
    nb_verify_result_free(&r);
    return code;
}

/* The model's one display name (its file's, as history and workers show it), not the
 * GGUF's general.name ("Smollm2 135M 8k Lc100K Mix1 Ep2"). */
const char *nb_print_model_name(const Npubench__Environment *e, char *name, size_t cap)
{
    nb_job_model_canon(*e->model_path ? e->model_path : e->model, name, cap);
    return *name ? name : *e->model ? e->model : "?";
}

static void print_deployment(FILE *f, const Npubench__Environment *e)
{
    if (!e)
        return;
    char name[256];
    fprintf(f, "Deployment: %s %s/%s, %d threads, kernels %s\n",
            nb_print_model_name(e, name, sizeof name), e->backend, e->dtype, e->threads,
            e->kernels_isa);
}

static int print_run(FILE *f, const nb_print_opts *o, const Npubench__JobResult *res,
                     const char *kind)
{
    (void)kind;
    nb_err err;
    nb_run_result r;
    if (!res->metrics || nb_benchpb_run_from_pb(res->metrics, &r, &err)) {
        fprintf(stderr, "npubench %s: error: result has no readable metrics%s%s\n", o->cmd,
                res->metrics ? ": " : "", res->metrics ? err.msg : "");
        return NB_EXIT_USAGE;
    }
    print_deployment(f, res->environment);
    nb_print_run(f, &r);
    if (o->show_text)
        fprintf(f, "Generated text:\n%s\n", r.text ? r.text : "");
    nb_run_result_free(&r);
    return NB_EXIT_OK;
}

static int print_profile(FILE *f, const nb_print_opts *o, const Npubench__JobResult *res,
                         const char *kind)
{
    (void)kind;
    nb_err err;
    nb_profile_result p;
    if (nb_benchpb_profile_from_pb(res, &p, &err)) {
        fprintf(stderr, "npubench %s: error: result unreadable: %s\n", o->cmd, err.msg);
        return NB_EXIT_USAGE;
    }
    print_deployment(f, res->environment);
    nb_print_profile(f, &p);
    nb_print_run(f, &p.run);
    nb_profile_result_free(&p);
    if (o->reports_dir) { /* beside verify's, named the same way */
        nb_report_env env;
        memset(&env, 0, sizeof env);
        if (res->environment)
            nb_verifypb_env_to_report(res->environment, &env);
        char path[1200];
        if (nb_report_write_bench(o->reports_dir, res, &env, "profile", path, sizeof path, &err))
            fprintf(stderr, "npubench %s: warning: report not written: %s\n", o->cmd, err.msg);
        else
            fprintf(f, "Report: %s (+ .md)\n", path);
    }
    return NB_EXIT_OK;
}

static int print_diagnosis(FILE *f, const nb_print_opts *o, const Npubench__JobResult *res,
                           const char *kind)
{
    (void)kind;
    nb_err err;
    nb_diagnosis_result r;
    if (nb_verifypb_diagnosis_from_pb(res, &r, &err)) {
        fprintf(stderr, "npubench %s: error: result unreadable: %s\n", o->cmd, err.msg);
        return NB_EXIT_USAGE;
    }
    nb_report_print_diagnosis(f, &r);
    if (o->reports_dir) {
        nb_report_env env;
        memset(&env, 0, sizeof env);
        if (res->environment)
            nb_verifypb_env_to_report(res->environment, &env);
        char path[1200];
        if (nb_report_write_diagnosis(o->reports_dir, &r, &env, path, sizeof path, &err))
            fprintf(stderr, "npubench %s: warning: report not written: %s\n", o->cmd, err.msg);
        else
            fprintf(f, "Report: %s (+ .md)\n", path);
    }
    nb_diagnosis_result_free(&r);
    return NB_EXIT_OK; /* informational: never fails on numbers */
}

/* A health check: the device probe its log recorded, then the short verify it ran through
 * the board's first deployment (or, without one to run, the probe alone as the verdict). */
static int print_health(FILE *f, const nb_print_opts *o, const Npubench__JobResult *res,
                        const char *kind)
{
    const char *probe = res->log ? strstr(res->log, "health check: device probe: ") : NULL;
    if (probe)
        fprintf(f, "[health] %.*s\n", (int)strcspn(probe, "\n"), probe);
    if (res->n_gates) {
        nb_print_opts q = *o;
        q.reports_dir = NULL; /* a check writes no report, as it writes no history run */
        int code = print_verify(f, &q, res, kind);
        fprintf(f, "[health] %s\n", code == NB_EXIT_OK ? "PASS: the board is healthy"
                                                      : "FAIL: the board is quarantined");
        return code;
    }
    int pass = res->outcome == NPUBENCH__OUTCOME__PASS;
    fprintf(f, "[health] %s (the device probe is the check: no verify command)\n",
            pass ? "PASS" : "FAIL");
    return pass ? NB_EXIT_OK : NB_EXIT_FAIL;
}

/* How a kind's results print: its own printer where it has one (profile's per-kernel table),
 * else its family's, so a new kind of a family prints as the family does. */
typedef int print_fn(FILE *f, const nb_print_opts *o, const Npubench__JobResult *res,
                     const char *kind);
static const struct {
    int kind;           /* npubench.JobKind; 0: any kind of family */
    const char *family; /* NB_JOB_FAMILY_* */
    print_fn *fn;
} printers[] = {
    {NPUBENCH__JOB_KIND__PROFILE, NULL, print_profile},
    {0, NB_JOB_FAMILY_VERIFY, print_verify},
    {0, NB_JOB_FAMILY_PERFORMANCE, print_run},
    {0, NB_JOB_FAMILY_DIAGNOSIS, print_diagnosis},
    {0, NB_JOB_FAMILY_HEALTH, print_health},
};

int nb_print_result(FILE *f, const nb_print_opts *o, int kind, const Npubench__JobResult *res)
{
    if (res->status != NPUBENCH__STATUS_CODE__OK) {
        fprintf(stderr, "npubench %s: error: %s\n", o->cmd,
                *res->status_message ? res->status_message : nb_rpc_status_name(res->status));
        return nb_outcome_exit(nb_outcome_of_result(res));
    }
    const nb_job_kind_desc *d = nb_job_kind_desc_of(kind);
    print_fn *fn = NULL;
    for (size_t i = 0; d && !fn && i < sizeof printers / sizeof *printers; i++)
        if (printers[i].kind ? printers[i].kind == kind : !strcmp(printers[i].family, d->family))
            fn = printers[i].fn;
    if (!fn) {
        fprintf(stderr, "npubench %s: error: job of unknown kind %d\n", o->cmd, kind);
        return NB_EXIT_USAGE;
    }
    int code = fn(f, o, res, d->name);
    if (res->regression) {
        fprintf(f, "Regression: %s\n", res->regression_detail);
        if (code == NB_EXIT_OK)
            code = NB_EXIT_FAIL;
    }
    return code;
}

int nb_print_job(FILE *f, const nb_print_opts *o, const Npubench__Job *job)
{
    int kind = job->spec ? job->spec->kind : 0;
    if (job->state == NPUBENCH__JOB_STATE__JOB_CANCELLED) {
        fprintf(stderr, "npubench %s: job %lld was cancelled%s%s\n", o->cmd,
                (long long)job->job_id, *job->error ? ": " : "", job->error);
        return nb_outcome_exit(nb_outcome_of_job(job));
    }
    int matrix = job->is_group && job->spec && job->spec->matrix;
    if (!job->n_results) {
        fprintf(stderr, "npubench %s: error: job %lld %s without a result%s%s\n", o->cmd,
                (long long)job->job_id, nb_job_pb_state_name(job->state), *job->error ? ": " : "",
                job->error);
        return nb_outcome_exit(nb_outcome_of_job(job));
    }
    int code = NB_EXIT_OK;
    for (size_t i = 0; i < job->n_results; i++) {
        const Npubench__JobResult *res = job->results[i];
        if (matrix && res->environment)
            fprintf(f, "== %s (job %lld, worker %s) ==\n", res->environment->board,
                    (long long)res->job_id, res->worker_id);
        int c = nb_print_result(f, o, kind, res);
        /* The worst code wins: usage/unavailable over a gate FAIL over a PASS. */
        if (c > code)
            code = c;
    }
    return code;
}

void nb_print_cell(FILE *f, int kind, const Npubench__JobResult *res)
{
    const Npubench__Environment *e = res->environment;
    nb_outcome o = nb_outcome_of_result(res);
    char name[256];
    fprintf(f, "%s × %s × %s: %s", e && *e->board ? e->board : *res->worker_id ? res->worker_id : "?",
            e ? nb_print_model_name(e, name, sizeof name) : "?", nb_job_kind_name(kind),
            nb_outcome_name(o));
    if (res->status != NPUBENCH__STATUS_CODE__OK)
        fprintf(f, ", %s", *res->status_message ? res->status_message : "no verdict");
    else if (res->verify)
        fprintf(f, ", gate %d/%d prompts pass", res->verify->passed,
                res->verify->passed + res->verify->failed);
    else if (res->metrics && res->metrics->tps > 0)
        fprintf(f, ", TTFT %.1f ms, %.2f tokens/s", res->metrics->ttft_ms, res->metrics->tps);
    if (res->regression)
        fprintf(f, ", REGRESSION %s", res->regression_detail);
    fputc('\n', f);
}
