/* nb_exec: one job on an exec deployment: build the command, run it (nb_exec_proc), read
 * what it printed (nb_exec_out) and the report it wrote (nb_exec_report) into a JobResult. */
#include "nb_exec.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_exec_out.h"
#include "nb_exec_proc.h"
#include "nb_exec_report.h"
#include "nb_file.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_json.h"
#include "nb_runenv.h"
#include "nb_time.h"
#include "nb_verify.h"
#include "nb_verifypb.h"

#define REPORT_MAX_BYTES ((size_t)64 << 20)
#define TAIL_BYTES 300

/* "`make -C x profile`" for messages, bounded. */
static void describe(char *const *argv, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; argv[i] && o + 4 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " " : "", argv[i]);
    if (o >= cap - 4 && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
}

static void tail_of(const char *s, size_t len, char *buf, size_t cap)
{
    size_t n = len < TAIL_BYTES ? len : TAIL_BYTES;
    snprintf(buf, cap, "%.*s", (int)n, s + len - n);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static void note(const nb_exec_job_hooks *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const nb_exec_job_hooks *h, const char *fmt, ...)
{
    if (!h || !h->line)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    h->line(h->user, line);
}

/* ---- the placeholders of one job ------------------------------------------------------------ */

static int default_n_tokens(int kind)
{
    switch (kind) {
    case NPUBENCH__JOB_KIND__VERIFY:
    case NPUBENCH__JOB_KIND__VERIFY_FULL: return NB_JOB_VERIFY_N_TOKENS;
    case NPUBENCH__JOB_KIND__RUN: return NB_JOB_RUN_N_TOKENS_DEFAULT;
    default: return NB_JOB_PROFILE_N_TOKENS_DEFAULT;
    }
}

static void vars_of(const Npubench__JobSpec *s, const char *model, const char *dtype,
                    nb_exec_deploy_vars *v)
{
    v->n_tokens = s->n_tokens ? s->n_tokens : default_n_tokens(s->kind);
    v->k = s->k ? s->k : NB_JOB_VERIFY_K;
    v->max_prompts = s->max_prompts                           ? s->max_prompts
                     : s->kind == NPUBENCH__JOB_KIND__VERIFY ? NB_JOB_VERIFY_PROMPTS
                                                              : 0;
    v->reps = s->reps ? s->reps : 1;
    v->prompt = s->prompt && *s->prompt ? s->prompt : "The capital of France is";
    v->prompt_begin = s->shard ? s->shard->prompt_begin : 0;
    v->prompt_end = s->shard ? s->shard->prompt_end : 0;
    v->model = model ? model : "";
    v->dtype = dtype ? dtype : "";
}

/* ---- metrics ------------------------------------------------------------------------------- */

static nb_code add_sample(Npubench__Metrics *m, double ttft, double tps)
{
    Npubench__Sample **v = realloc(m->samples, sizeof *v * (m->n_samples + 1));
    if (!v)
        return NB_ENOMEM;
    m->samples = v;
    Npubench__Sample *s = malloc(sizeof *s);
    if (!s)
        return NB_ENOMEM;
    npubench__sample__init(s);
    s->rep = (int32_t)m->n_samples;
    s->ttft_ms = ttft; /* 0 when no TTFT line was printed: the coordinator stores unknown */
    s->tps = tps; /* 0: a latency-only deployment (exec "throughput": false) */
    s->decode_ms_per_token = tps > 0 ? 1000.0 / tps : 0;
    s->tpot_ms = s->decode_ms_per_token;
    v[m->n_samples++] = s;
    return NB_OK;
}

static void mean_sd(Npubench__Metrics *m, size_t off, double *mean, double *sd)
{
    size_t n = m->n_samples;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += *(double *)((char *)m->samples[i] + off);
    *mean = n ? s / (double)n : 0;
    double q = 0;
    for (size_t i = 0; i < n; i++) {
        double d = *(double *)((char *)m->samples[i] + off) - *mean;
        q += d * d;
    }
    *sd = n > 1 ? sqrt(q / (double)(n - 1)) : 0;
}

/* One command run's samples: every occurrence of the winning formats (one per run for
 * mlir-air's scripts).  No throughput is an error: a run stored as 0 tok/s reads as a
 * catastrophic regression, not as "the script printed nothing we know". */
static nb_code bench_samples(const char *out, size_t len, const char *what, const char *tail,
                             int no_throughput, Npubench__Metrics *m, nb_err *err)
{
    double *tt = NULL, *tp = NULL;
    int nt = 0, np = 0;
    nb_code rc = nb_exec_out_samples(out, len, &tt, &nt, &tp, &np, err);
    if (!rc && no_throughput) {
        /* a latency is the measurement (smolvla's action chunk): its TTFT formats */
        np = 0;
        if (!nt)
            rc = nb_err_set(err, NB_EFORMAT,
                            "`%s` printed no latency (none of '%s', '%s', '%s', '%s'; the "
                            "deployment reports no throughput); output tail: %s",
                            what, nb_exec_out_ttft_fmt_name(NB_EXEC_OUT_TTFT_WARM),
                            nb_exec_out_ttft_fmt_name(NB_EXEC_OUT_TTFT_COLD),
                            nb_exec_out_ttft_fmt_name(NB_EXEC_OUT_TTFT_PREFILL),
                            nb_exec_out_ttft_fmt_name(NB_EXEC_OUT_TTFT_ACTION), tail);
    } else if (!rc && !np)
        rc = nb_err_set(err, NB_EFORMAT,
                        "`%s` printed no usable decode throughput (none of '%s', '%s', '%s'); "
                        "output tail: %s",
                        what, nb_exec_out_tps_fmt_name(NB_EXEC_OUT_TPS_PAREN),
                        nb_exec_out_tps_fmt_name(NB_EXEC_OUT_TPS_DECODE_MS),
                        nb_exec_out_tps_fmt_name(NB_EXEC_OUT_TPS_LABEL), tail);
    int n = nt > np ? nt : np;
    for (int i = 0; !rc && i < n; i++)
        if (add_sample(m, nt ? tt[i < nt ? i : nt - 1] : 0, np ? tp[i < np ? i : np - 1] : 0))
            rc = nb_err_set(err, NB_ENOMEM, "out of memory");
    free(tt);
    free(tp);
    return rc;
}

static void bench_summary(Npubench__Metrics *m, const nb_exec_out *o, int n_tokens)
{
    mean_sd(m, offsetof(Npubench__Sample, ttft_ms), &m->ttft_ms, &m->ttft_ms_stddev);
    mean_sd(m, offsetof(Npubench__Sample, tps), &m->tps, &m->tps_stddev);
    mean_sd(m, offsetof(Npubench__Sample, decode_ms_per_token), &m->decode_ms_per_token,
            &m->decode_ms_per_token_stddev);
    mean_sd(m, offsetof(Npubench__Sample, tpot_ms), &m->tpot_ms, &m->tpot_ms_stddev);
    m->prompt_tokens = o->prompt_tokens > 0 ? o->prompt_tokens : 0;
    m->context_len = o->context_len > 0 ? o->context_len : 0;
    m->generated_tokens = o->generated_tokens >= 0 ? o->generated_tokens : n_tokens;
    m->requested_tokens = n_tokens;
    for (size_t i = 0; i < m->n_samples; i++) {
        m->samples[i]->prompt_tokens = m->prompt_tokens;
        m->samples[i]->generated_tokens = m->generated_tokens;
    }
}

/* ---- the report ------------------------------------------------------------------------------ */

/* The report: exec.report first (it must have been written by this job), else the path
 * the command printed; relative paths are the command's, so below exec.cwd. */
static nb_code report_read(const nb_exec_deploy *d, const nb_exec_out *o, int64_t started_ms,
                           const char *what, char **text, size_t *len, char *path, size_t cap,
                           nb_err *err)
{
    *text = NULL;
    const char *p = d->report ? d->report : o->report_path[0] ? o->report_path : NULL;
    if (!p)
        return nb_err_set(err, NB_EFORMAT,
                          "`%s` printed no report path ('[verify] JSON: <path>') and the "
                          "deployment sets no exec.report",
                          what);
    snprintf(path, cap, "%s%s%s", p[0] != '/' && d->cwd ? d->cwd : "",
             p[0] != '/' && d->cwd ? "/" : "", p);
    struct stat st;
    if (stat(path, &st))
        return nb_err_set(err, NB_ENOTFOUND, "`%s`: report %s: %s", what, path, strerror(errno));
    /* A fixed exec.report left by an earlier job must not pass for this one's (1 s slack
     * for file systems with coarse timestamps). */
    int64_t mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (mtime_ms < started_ms - 1000)
        return nb_err_set(err, NB_EFORMAT,
                          "`%s`: report %s was last written %.1f s before the job started: "
                          "the command did not write it",
                          what, path, (double)(started_ms - mtime_ms) / 1000.0);
    nb_code rc = nb_file_read(path, REPORT_MAX_BYTES, text, len, err);
    return rc ? nb_err_prefix(err, "`%s`: report: ", what) : NB_OK;
}

static nb_code report_to_result(int kind, const char *text, size_t len, const char *path,
                                const nb_exec_out *o, double wall_ms,
                                const nb_exec_job_hooks *hooks, Npubench__JobResult *res,
                                nb_err *err)
{
    json_object *root;
    nb_code rc = nb_json_parse(text, len, path, &root, err);
    if (rc)
        return rc;
    if (kind == NPUBENCH__JOB_KIND__DIAGNOSIS) {
        nb_diagnosis_result dr;
        if (!(rc = nb_exec_report_diagnosis(root, path, &dr, err))) {
            rc = nb_verifypb_diagnosis_to_pb(&dr, res, err);
            nb_diagnosis_result_free(&dr);
        }
    } else {
        nb_verify_result vr;
        if (!(rc = nb_exec_report_verify(root, path, NB_JOB_VERIFY_K, &vr, err))) {
            vr.wall_ms = wall_ms;
            /* The records are the verdict: verify_runner --no-strict prints PASS on a
             * failing gate. */
            if (o->gate >= 0 && o->gate != (vr.status == NB_GATE_FAIL))
                note(hooks, "npubench: the command printed [verify] %s but its report has "
                            "%d/%d prompts passing; the report decides",
                     o->gate ? "FAIL" : "PASS", vr.n_pass, vr.n);
            rc = nb_verifypb_verify_to_pb(&vr, res, err);
            nb_verify_result_free(&vr);
        }
    }
    json_object_put(root);
    return rc;
}

/* ---- one run of the command ------------------------------------------------------------------ */

/* Runs argv once; errors for a command that did not finish normally.  *o gets what it
 * printed; metrics (bench kinds) get its samples. */
static nb_code run_once(const nb_exec_deploy *d, const Npubench__JobSpec *spec,
                        char *const *argv, const char *what, const nb_exec_job_hooks *hooks,
                        nb_exec_out *o, Npubench__Metrics *m, double *wall_ms, nb_err *err)
{
    nb_exec_proc_opts po = {.argv = argv, .cwd = d->cwd, .env = d->env,
                            .timeout_ms = d->timeout_ms, .max_output = d->max_output,
                            .cancelled = hooks ? hooks->cancelled : NULL,
                            .line = hooks ? hooks->line : NULL,
                            .user = hooks ? hooks->user : NULL};
    if (spec->timeout_ms > 0 && spec->timeout_ms < po.timeout_ms)
        po.timeout_ms = spec->timeout_ms;
    nb_exec_proc_result pr;
    nb_code rc = nb_exec_proc_run(&po, &pr, err);
    if (rc)
        return rc;
    *wall_ms += pr.wall_ms;
    char tail[TAIL_BYTES + 8];
    tail_of(pr.output, pr.len, tail, sizeof tail);
    if (pr.dropped) /* the summary lines come last: say why they may not have been read */
        note(hooks, "npubench: %zu bytes of output past exec.max_output_kb (%zu KiB) were not "
                    "read; raise it if the summary lines are missing",
             pr.dropped, d->max_output / 1024);
    nb_exec_out_parse(pr.output, pr.len, o);
    int is_verify = spec->kind == NPUBENCH__JOB_KIND__VERIFY ||
                    spec->kind == NPUBENCH__JOB_KIND__VERIFY_FULL;
    if (pr.cancelled)
        rc = nb_err_set(err, NB_ECANCELED, "`%s` cancelled", what);
    else if (pr.timed_out)
        rc = nb_err_set(err, NB_ETIMEOUT, "`%s` timed out after %.0f s; output tail: %s", what,
                        (double)po.timeout_ms / 1000.0, tail);
    else if (pr.term_signal)
        rc = nb_err_set(err, NB_EIO, "`%s` killed by signal %d (%s); output tail: %s", what,
                        pr.term_signal, strsignal(pr.term_signal), tail);
    else if (pr.exit_code != 0 && !(is_verify && o->gate == 1)) /* mlir-air: FAIL exits 1 */
        rc = nb_err_set(err, NB_EIO, "`%s` exited with status %d; output tail: %s", what,
                        pr.exit_code, tail);
    else if (m)
        rc = bench_samples(pr.output, pr.len, what, tail, d->no_throughput, m, err);
    nb_exec_proc_result_free(&pr);
    return rc;
}

/* ---- the mlir-air commit the job ran ---------------------------------------------------------- */

/* `git rev-parse HEAD` in the deployment's directory, so an exec run lines up with mlir-air's
 * nightly rows (toolchain air_sha, `history --air-sha`). 1 with sha filled (40 hex digits),
 * 0 when the directory is no git checkout (or git is missing): noted, nothing recorded. */
static int checkout_sha(const nb_exec_deploy *d, const nb_exec_job_hooks *hooks, char *sha,
                        size_t cap)
{
    char *const argv[] = {"git", "rev-parse", "HEAD", NULL};
    nb_exec_proc_opts po = {.argv = argv, .cwd = d->cwd, .env = d->env, .timeout_ms = 10000,
                            .max_output = 4096};
    nb_exec_proc_result pr;
    nb_err e;
    if (nb_exec_proc_run(&po, &pr, &e)) {
        note(hooks, "npubench: no mlir-air commit recorded (git rev-parse HEAD in %s: %s)",
             d->cwd ? d->cwd : ".", e.msg);
        return 0;
    }
    size_t n = 0;
    while (n < pr.len && ((pr.output[n] >= '0' && pr.output[n] <= '9') ||
                          (pr.output[n] >= 'a' && pr.output[n] <= 'f')))
        n++;
    int ok = pr.exit_code == 0 && (n == 40 || n == 64) && n < cap;
    if (ok)
        snprintf(sha, cap, "%.*s", (int)n, pr.output);
    else
        note(hooks, "npubench: no mlir-air commit recorded (%s is not a git checkout: git "
                    "rev-parse HEAD exited %d)",
             d->cwd ? d->cwd : ".", pr.exit_code);
    nb_exec_proc_result_free(&pr);
    return ok;
}

/* ---- the job's prompt set ------------------------------------------------------------------ */

/* A client's prompt set reaches the script only through {prompts_file}: the named set's file
 * (verify/nb_verify.h), or the job's explicit prompts written one a line to a file beside
 * the reports. A command without the placeholder would silently run its own prompts:
 * refused, naming why. *path "" when the job names no set. */
static nb_code job_prompts(const nb_exec_deploy *d, const Npubench__JobSpec *spec, char *path,
                           size_t cap, int *written, nb_err *err)
{
    path[0] = '\0';
    *written = 0;
    if (!spec->n_prompts && !*spec->prompt_set)
        return NB_OK;
    const char *what = spec->n_prompts ? "explicit prompts" : spec->prompt_set;
    if (!nb_exec_deploy_uses(d, spec->kind, "{prompts_file}"))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "the job names a prompt set (%s) but this deployment's '%s' command "
                          "takes no {prompts_file}, so it would run its own prompts instead "
                          "(mlir-air's Makefile targets pass no prompts file; call "
                          "verify_runner.py with --prompts-file {prompts_file})",
                          what, nb_job_kind_name(spec->kind));
    if (!spec->n_prompts) {
        nb_code rc = nb_verify_prompt_set_path(NULL, spec->prompt_set, path, cap, err);
        if (rc)
            return rc;
        if (!nb_file_readable(path))
            return nb_err_set(err, NB_ENOTFOUND, "JobSpec.prompt_set '%s': %s is not readable",
                              spec->prompt_set, path);
        return NB_OK;
    }
    const char *dir = getenv("TMPDIR");
    snprintf(path, cap, "%s/npubench-prompts-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return nb_err_set(err, NB_EIO, "prompts file %s: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    int ok = f != NULL;
    for (size_t i = 0; ok && i < spec->n_prompts; i++) {
        /* one prompt a line: a line break inside one would make two */
        if (strpbrk(spec->prompts[i], "\r\n\v\f")) {
            fclose(f);
            unlink(path);
            return nb_err_set(err, NB_EINVAL,
                              "JobSpec.prompts[%zu]: holds a line break; a prompts file has "
                              "one prompt a line",
                              i);
        }
        ok = fprintf(f, "%s\n", spec->prompts[i]) >= 0;
    }
    if (f && fclose(f))
        ok = 0;
    if (!ok) {
        unlink(path);
        return nb_err_set(err, NB_EIO, "prompts file %s: cannot write", path);
    }
    *written = 1;
    return NB_OK;
}

/* verify with "verify_report": false: the printed verdict, one gate record for it. */
static nb_code verdict_to_result(const nb_exec_out *o, const char *what, const char *tail,
                                 double wall_ms, Npubench__JobResult *res, nb_err *err)
{
    if (o->gate < 0)
        return nb_err_set(err, NB_EFORMAT,
                          "`%s` printed no verdict ('[verify] PASS' or '[verify] FAIL'); output "
                          "tail: %s",
                          what, tail);
    Npubench__VerifySummary *v = malloc(sizeof *v);
    if (!v)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    npubench__verify_summary__init(v);
    v->passed = o->gate == 0;
    v->failed = o->gate == 1;
    v->wall_ms = wall_ms;
    res->verify = v;
    res->outcome = o->gate ? NPUBENCH__OUTCOME__FAIL : NPUBENCH__OUTCOME__PASS;
    return NB_OK;
}

nb_code nb_exec_job(const nb_exec_deploy *d, const char *model, const char *dtype,
                    const Npubench__JobSpec *spec, const nb_exec_job_hooks *hooks,
                    Npubench__JobResult *res, nb_err *err)
{
    if (spec->kind == NPUBENCH__JOB_KIND__VERIFY_FULL && spec->shard &&
        !nb_exec_deploy_takes_range(d))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "shard %d/%d (prompts %d..%d): this deployment's verify_full command "
                          "takes no {prompt_begin}/{prompt_end}, so it cannot run a prompt range "
                          "(mlir-air's verify runner takes --max-prompts only); submit it "
                          "unsharded",
                          spec->shard->index, spec->shard->count, spec->shard->prompt_begin,
                          spec->shard->prompt_end);
    nb_exec_deploy_vars v;
    vars_of(spec, model, dtype, &v);
    char prompts[1100];
    int prompts_tmp = 0;
    nb_code rc = job_prompts(d, spec, prompts, sizeof prompts, &prompts_tmp, err);
    if (rc)
        return rc;
    v.prompts_file = prompts;
    char **argv;
    if ((rc = nb_exec_deploy_argv(d, spec->kind, &v, &argv, err))) {
        if (prompts_tmp)
            unlink(prompts);
        return rc;
    }
    char what[512];
    describe(argv, what, sizeof what);
    int is_bench = spec->kind == NPUBENCH__JOB_KIND__RUN ||
                   spec->kind == NPUBENCH__JOB_KIND__PROFILE;
    /* A command that takes {reps} repeats itself; otherwise it runs once per repetition. */
    int runs = is_bench && !nb_exec_deploy_uses(d, spec->kind, "{reps}") && spec->reps > 1
                   ? spec->reps
                   : 1;
    Npubench__Metrics *m = NULL;
    if (is_bench) {
        if (!(m = malloc(sizeof *m))) {
            nb_exec_deploy_argv_free(argv);
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        }
        npubench__metrics__init(m);
    }
    int64_t started_ms = nb_wall_ms();
    double wall_ms = 0;
    nb_exec_out o;
    char sha[72];
    if (checkout_sha(d, hooks, sha, sizeof sha) && nb_runenv_pb_extra(res->environment, "air_sha", sha))
        rc = nb_err_set(err, NB_ENOMEM, "out of memory");
    for (int r = 0; r < runs && !rc; r++)
        rc = run_once(d, spec, argv, what, hooks, &o, m, &wall_ms, err);
    nb_exec_deploy_argv_free(argv);
    if (!rc && is_bench) {
        bench_summary(m, &o, v.n_tokens);
        res->metrics = m;
        m = NULL;
        res->outcome = NPUBENCH__OUTCOME__PASS;
        note(hooks, "npubench: TTFT from '%s', throughput from '%s'",
             nb_exec_out_ttft_fmt_name(o.ttft_fmt), nb_exec_out_tps_fmt_name(o.tps_fmt));
    } else if (!rc && d->verdict_only) {
        rc = verdict_to_result(&o, what, "(see the job's log)", wall_ms, res, err);
    } else if (!rc) {
        char *text = NULL, path[2048];
        size_t len = 0;
        rc = report_read(d, &o, started_ms, what, &text, &len, path, sizeof path, err);
        if (!rc)
            rc = report_to_result(spec->kind, text, len, path, &o, wall_ms, hooks, res, err);
        if (!rc)
            res->report_json = text;
        else
            free(text);
    }
    if (m)
        protobuf_c_message_free_unpacked(&m->base, NULL);
    if (prompts_tmp)
        unlink(prompts);
    return rc;
}
