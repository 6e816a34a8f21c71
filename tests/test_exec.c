/* test_exec: the exec backend — argv splitting, fork/exec with timeout/cancel/bounded capture,
 * the reference tooling's output formats (fixtures), npubench itself as a deployment, and the
 * deployments file + executor (nb_job) around exec deployments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_exec.h"
#include "nb_executor.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_json.h"
#include "nb_time.h"
#include "testutil.h"

static char fixture[1024];

static const char *fx(const char *name)
{
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/%s", tu_env("NB_SRC", "."), name);
    return fixture;
}

/* ---- splitting ------------------------------------------------------------------------ */

static void test_split(void **state)
{
    (void)state;
    char **av;
    int ac;
    nb_err err;
    assert_int_equal(nb_exec_split("make -C 'dir with space' PROMPT=\"say \\\"hi\\\" \\$x\" a\\ b",
                                   &av, &ac, &err), NB_OK);
    assert_int_equal(ac, 5);
    assert_string_equal(av[0], "make");
    assert_string_equal(av[1], "-C");
    assert_string_equal(av[2], "dir with space");
    assert_string_equal(av[3], "PROMPT=say \"hi\" $x");
    assert_string_equal(av[4], "a b");
    assert_null(av[5]);
    free(av);
    /* no expansion, empty quotes make an empty word, blanks collapse */
    assert_int_equal(nb_exec_split("  echo  $HOME '' \"*\"  ", &av, &ac, &err), NB_OK);
    assert_int_equal(ac, 4);
    assert_string_equal(av[1], "$HOME");
    assert_string_equal(av[2], "");
    assert_string_equal(av[3], "*");
    free(av);
    assert_int_equal(nb_exec_split("echo 'open", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "unterminated single quote opened at column 6"));
    assert_int_equal(nb_exec_split("echo \"open", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "double"));
    assert_int_equal(nb_exec_split("echo \\", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "trailing backslash"));
    assert_int_equal(nb_exec_split("   ", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "empty"));
    char q[64];
    assert_int_equal(nb_exec_shell_quote("it's", q, sizeof q, &err), NB_OK);
    assert_string_equal(q, "'it'\\''s'");
    assert_int_equal(nb_exec_shell_quote("0123456789", q, 8, &err), NB_ENOMEM);
}

/* ---- parsing ---------------------------------------------------------------------------- */

static void test_parse_formats(void **state)
{
    (void)state;
    nb_exec_parsed p;
    const char *ref = "Time to first token (TTFT): 1.27s (tokenize + EOS-pad + NPU prefill + LM "
                      "head). First token: 791\nGenerated 10 tokens in 0.92s\nTokens/second: "
                      "10.87\nTime/token: 92ms\n";
    nb_exec_parse(ref, strlen(ref), &p);
    assert_true(p.has_ttft && fabs(p.ttft_ms - 1270.0) < 1e-9);
    assert_true(p.has_tps && fabs(p.tps - 10.87) < 1e-12);
    assert_true(p.has_decode && fabs(p.decode_ms_per_token - 1000.0 / 10.87) < 1e-9);
    assert_int_equal(p.gate, -1);
    /* only the profile's per-token line: tps = 1000 / N */
    const char *prof = "  End-to-end (prefill, per query)               1270.00 ms\n"
                       "  End-to-end (per token)                          92.34 ms\n";
    nb_exec_parse(prof, strlen(prof), &p);
    assert_false(p.has_ttft);
    assert_true(p.has_decode && fabs(p.decode_ms_per_token - 92.34) < 1e-12);
    assert_true(p.has_tps && fabs(p.tps - 1000.0 / 92.34) < 1e-9);
    /* our CLI's lines */
    const char *ours = "Prompt tokens: 42, generated tokens: 3, repetitions: 2\n"
                       "Time to first token (TTFT): 0.123s (123.45 ms ± 1.00)\n"
                       "Tokens/second: 42.50 ± 0.50\n[verify] PASS (2/2 prompts pass)\n"
                       "Report: reports/verify_topk_token_1.json (+ .md)\n";
    nb_exec_parse(ours, strlen(ours), &p);
    assert_true(fabs(p.ttft_ms - 123.0) < 1e-9);
    assert_true(fabs(p.tps - 42.5) < 1e-12);
    assert_int_equal(p.prompt_tokens, 42);
    assert_int_equal(p.generated_tokens, 3);
    assert_int_equal(p.gate, 0);
    assert_int_equal(p.gate_passed, 2);
    assert_int_equal(p.gate_total, 2);
    assert_string_equal(p.report_path, "reports/verify_topk_token_1.json");
    /* the reference tooling's verdict and report lines; ms TTFT */
    const char *rv = "[verify] Report: r/v.md\n[verify] JSON:   r/v.json\n"
                     "[verify] FAIL — see report for details.\nTime to first token (TTFT): 7 ms\n";
    nb_exec_parse(rv, strlen(rv), &p);
    assert_int_equal(p.gate, 1);
    assert_string_equal(p.report_path, "r/v.json");
    assert_true(fabs(p.ttft_ms - 7.0) < 1e-12);
    /* malformed numbers are absent, not zero */
    const char *bad = "Time to first token (TTFT): n/a\nTokens/second: fast\nTokens/second: -3\n"
                      "[verify] PASSED?\n";
    nb_exec_parse(bad, strlen(bad), &p);
    assert_false(p.has_ttft);
    assert_false(p.has_tps);
    double *tt, *tp;
    int nt, np;
    nb_err err;
    const char *reps = "Time to first token (TTFT): 1.0s\nTokens/second: 10\n"
                       "Time to first token (TTFT): 2.0s\nTokens/second: 20\n";
    assert_int_equal(nb_exec_parse_samples(reps, strlen(reps), &tt, &nt, &tp, &np, &err), NB_OK);
    assert_int_equal(nt, 2);
    assert_int_equal(np, 2);
    assert_true(tt[1] == 2000.0 && tp[0] == 10.0);
    free(tt);
    free(tp);
}

/* ---- processes -------------------------------------------------------------------------- */

typedef struct lines {
    int n;
    char last[256];
    int cancel_after; /* cancel once this many lines arrived (0 = never) */
} lines;

static void on_line(void *u, const char *l)
{
    lines *x = u;
    x->n++;
    snprintf(x->last, sizeof x->last, "%s", l);
}

static int on_cancel(void *u)
{
    lines *x = u;
    return x->cancel_after && x->n >= x->cancel_after;
}

/* pid is dead (or a zombie waiting for init) within ms. */
static int gone(pid_t pid, int ms)
{
    for (int waited = 0; waited <= ms; waited += 50) {
        char path[64], st[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return 1;
        size_t n = fread(st, 1, sizeof st - 1, f);
        fclose(f);
        st[n] = '\0';
        const char *rp = strrchr(st, ')');
        if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'))
            return 1;
        usleep(50 * 1000);
    }
    return 0;
}

static void test_proc(void **state)
{
    (void)state;
    nb_err err;
    nb_exec_proc_result r;
    char *tmp = tu_tmpdir();
    /* output, env override, cwd */
    char *const av[] = {"sh", "-c", "echo out; echo err >&2; echo \"$NB_X\"; pwd; exit 3", NULL};
    char *const env[] = {"NB_X=from-the-deployment", NULL};
    lines L = {0};
    nb_exec_proc_opts o = {.argv = av, .env = env, .cwd = tmp, .line = on_line, .user = &L};
    assert_int_equal(nb_exec_proc_run(&o, &r, &err), NB_OK);
    assert_int_equal(r.exit_code, 3);
    assert_non_null(strstr(r.output, "out\n"));
    assert_non_null(strstr(r.output, "err\n"));
    assert_non_null(strstr(r.output, "from-the-deployment"));
    assert_non_null(strstr(r.output, tmp + 1)); /* pwd (maybe with a /private prefix) */
    assert_int_equal(L.n, 4);
    nb_exec_proc_result_free(&r);
    /* bounded capture: the rest is counted, lines still all delivered */
    char *const big[] = {"sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done", NULL};
    L = (lines){0};
    nb_exec_proc_opts ob = {.argv = big, .max_output = 1000, .line = on_line, .user = &L};
    assert_int_equal(nb_exec_proc_run(&ob, &r, &err), NB_OK);
    assert_int_equal(r.len, 1000);
    assert_int_equal(r.dropped, 2000 * 11 - 1000);
    assert_int_equal(L.n, 2000);
    nb_exec_proc_result_free(&r);
    /* a program that does not exist */
    char *const nope[] = {"/nonexistent/npubench-runner", NULL};
    nb_exec_proc_opts on = {.argv = nope};
    assert_int_equal(nb_exec_proc_run(&on, &r, &err), NB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "/nonexistent/npubench-runner"));
    /* timeout: the whole group dies, grandchild included */
    char pidfile[1200];
    snprintf(pidfile, sizeof pidfile, "%s/child.pid", tmp);
    char *const hang[] = {"sh", (char *)fx("exec_hang.sh"), pidfile, NULL};
    nb_exec_proc_opts oh = {.argv = hang, .timeout_ms = 500};
    double t0 = nb_now_ms();
    assert_int_equal(nb_exec_proc_run(&oh, &r, &err), NB_OK);
    double took = nb_now_ms() - t0;
    assert_true(r.timed_out);
    assert_true(took >= 450 && took < 5000);
    assert_non_null(strstr(r.output, "Loading weights"));
    nb_exec_proc_result_free(&r);
    FILE *f = fopen(pidfile, "r");
    assert_non_null(f);
    long child = 0;
    assert_int_equal(fscanf(f, "%ld", &child), 1);
    fclose(f);
    assert_true(gone((pid_t)child, 3000)); /* the sleep is gone too */
    /* cancellation */
    char *const slow[] = {"sh", "-c", "echo one; sleep 30; echo two", NULL};
    L = (lines){0, "", 1};
    nb_exec_proc_opts oc = {.argv = slow, .cancelled = on_cancel, .line = on_line, .user = &L};
    t0 = nb_now_ms();
    assert_int_equal(nb_exec_proc_run(&oc, &r, &err), NB_OK);
    assert_true(r.cancelled);
    assert_true(nb_now_ms() - t0 < 5000);
    assert_null(strstr(r.output, "two"));
    nb_exec_proc_result_free(&r);
    /* a crash is reported as the signal */
    char *const crash[] = {"sh", (char *)fx("exec_crash.sh"), NULL};
    nb_exec_proc_opts ox = {.argv = crash};
    assert_int_equal(nb_exec_proc_run(&ox, &r, &err), NB_OK);
    assert_true(r.term_signal == SIGSEGV || r.exit_code == 128 + SIGSEGV);
    nb_exec_proc_result_free(&r);
    tu_rmrf(tmp);
}

/* ---- deployments -------------------------------------------------------------------------- */

static nb_exec_deploy *deploy_of(const char *json)
{
    json_object *o;
    nb_err err;
    if (nb_json_parse(json, strlen(json), "test", &o, &err))
        fail_msg("bad test json: %s", err.msg);
    nb_exec_deploy *d = NULL;
    nb_code rc = nb_exec_deploy_parse(o, "deployments[0]", &d, &err);
    json_object_put(o);
    if (rc)
        fail_msg("deploy: %s", err.msg);
    return d;
}

static void expect_deploy_error(const char *json, const char *needle)
{
    json_object *o;
    nb_err err;
    assert_int_equal(nb_json_parse(json, strlen(json), "test", &o, &err), NB_OK);
    nb_exec_deploy *d = NULL;
    assert_int_equal(nb_exec_deploy_parse(o, "deployments[0]", &d, &err), NB_EINVAL);
    json_object_put(o);
    assert_null(d);
    if (!strstr(err.msg, needle))
        fail_msg("expected '%s' in: %s", needle, err.msg);
}

static void test_deploy_parse(void **state)
{
    (void)state;
    expect_deploy_error("{\"cwd\": \"/tmp\"}", "no command");
    expect_deploy_error("{\"run\": \"echo 'x\"}", "deployments[0].exec.run: command line: unterminated");
    expect_deploy_error("{\"run\": 7}", "deployments[0].exec.run: expected a command line");
    expect_deploy_error("{\"run\": \"x\", \"timeout_s\": -1}", "exec.timeout_s -1");
    expect_deploy_error("{\"run\": \"x\", \"bogus\": 1}", "exec.bogus: unknown key");
    expect_deploy_error("{\"run\": [\"a\", 3]}", "exec.run[1]: not a string");
    expect_deploy_error("{\"run\": \"x\", \"env\": {\"A=B\": \"c\"}}", "exec.env.A=B");
    nb_exec_deploy *d = deploy_of("{\"run\": \"make -C x run\", \"verify\": [\"sh\", \"v.sh\"],"
                                  " \"profile\": {\"shell\": \"echo {n_tokens}\"}}");
    assert_true(nb_exec_deploy_supports(d, NPUBENCH__JOB_KIND__RUN));
    assert_true(nb_exec_deploy_supports(d, NPUBENCH__JOB_KIND__VERIFY));
    assert_true(nb_exec_deploy_supports(d, NPUBENCH__JOB_KIND__PROFILE));
    assert_false(nb_exec_deploy_supports(d, NPUBENCH__JOB_KIND__VERIFY_FULL));
    nb_exec_deploy *c;
    nb_err err;
    assert_int_equal(nb_exec_deploy_dup(d, &c, &err), NB_OK);
    assert_true(nb_exec_deploy_supports(c, NPUBENCH__JOB_KIND__VERIFY));
    nb_exec_deploy_free(c);
    nb_exec_deploy_free(d);
}

/* ---- jobs on fixtures -------------------------------------------------------------------------- */

static nb_code exec_job(const char *json, int kind, int reps, Npubench__JobResult **res,
                        nb_err *err)
{
    nb_exec_deploy *d = deploy_of(json);
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = kind;
    s.reps = reps;
    *res = nb_jobpb_result_new();
    lines L = {0};
    nb_exec_job_hooks h = {NULL, on_line, &L};
    nb_code rc = nb_exec_job(d, "fixture-model", "bf16", &s, &h, *res, err);
    nb_exec_deploy_free(d);
    return rc;
}

static void test_exec_jobs(void **state)
{
    (void)state;
    char *tmp = tu_tmpdir();
    char json[4096];
    nb_err err;
    Npubench__JobResult *res;
    const char *pass = fx("exec_pass.sh");
    char passp[1024];
    snprintf(passp, sizeof passp, "%s", pass);
    /* run, once per repetition: every sample kept */
    snprintf(json, sizeof json, "{\"run\": [\"sh\", \"%s\", \"run\"], \"profile\": \"sh %s profile\","
             " \"verify\": \"sh %s verify %s\"}", passp, passp, passp, tmp);
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__RUN, 2, &res, &err), NB_OK);
    assert_non_null(res->metrics);
    assert_int_equal(res->metrics->n_samples, 2);
    assert_true(fabs(res->metrics->ttft_ms - 1270.0) < 1e-9);
    assert_true(fabs(res->metrics->tps - 10.87) < 1e-12);
    assert_true(res->metrics->tps_stddev == 0.0);
    assert_int_equal(res->outcome, NPUBENCH__OUTCOME__PASS);
    nb_jobpb_free(res);
    /* profile: TPS from its line, decode from "End-to-end (per token)" */
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__PROFILE, 0, &res, &err), NB_OK);
    assert_int_equal(res->metrics->n_samples, 1);
    nb_jobpb_free(res);
    /* verify PASS with the report's topk_checks as gate records */
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__VERIFY, 0, &res, &err), NB_OK);
    assert_int_equal(res->outcome, NPUBENCH__OUTCOME__PASS);
    assert_int_equal(res->n_gates, 2);
    assert_int_equal(res->gates[0]->divergence_step, -1);
    assert_int_equal(res->gates[1]->divergence_step, 7);
    assert_int_equal(res->gates[1]->device_token, 264);
    assert_int_equal(res->gates[1]->device_token_ref_rank, 1); /* 1-based there */
    assert_int_equal(res->gates[1]->n_reference_top, 5);
    assert_non_null(strstr(res->report_json, "topk_checks"));
    nb_jobpb_free(res);
    /* a kind without a command */
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__DIAGNOSIS, 0, &res, &err),
                     NB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "'diagnosis'"));
    nb_jobpb_free(res);
    /* verify FAIL: exit 1 with a verdict is a FAIL outcome, not an error */
    snprintf(json, sizeof json, "{\"verify\": [\"sh\", \"%s\", \"%s\"]}", fx("exec_fail.sh"), tmp);
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__VERIFY, 0, &res, &err), NB_OK);
    assert_int_equal(res->outcome, NPUBENCH__OUTCOME__FAIL);
    assert_int_equal(res->n_gates, 2);
    assert_int_equal(res->gates[1]->status, NPUBENCH__OUTCOME__FAIL);
    assert_non_null(strstr(res->gates[1]->fail_reason, "not in ref top-5"));
    nb_jobpb_free(res);
    /* malformed: no numbers, no verdict */
    snprintf(json, sizeof json, "{\"run\": \"sh %s\", \"verify\": \"sh %s\"}", fx("exec_malformed.sh"),
             fx("exec_malformed.sh"));
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__RUN, 0, &res, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "printed no 'Time to first token (TTFT):'"));
    nb_jobpb_free(res);
    /* hang: the deployment's timeout */
    snprintf(json, sizeof json, "{\"run\": \"sh %s\", \"timeout_s\": 0.5}", fx("exec_hang.sh"));
    double t0 = nb_now_ms();
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__RUN, 0, &res, &err), NB_ETIMEOUT);
    assert_true(nb_now_ms() - t0 < 5000);
    assert_non_null(strstr(err.msg, "timed out after"));
    assert_non_null(strstr(err.msg, "Loading weights")); /* the output's tail */
    nb_jobpb_free(res);
    /* crash */
    snprintf(json, sizeof json, "{\"run\": \"sh %s\"}", fx("exec_crash.sh"));
    nb_code rc = exec_job(json, NPUBENCH__JOB_KIND__RUN, 0, &res, &err);
    assert_int_equal(rc, NB_EIO);
    assert_true(strstr(err.msg, "signal 11") || strstr(err.msg, "status 139"));
    nb_jobpb_free(res);
    /* placeholders: argv words get values, never a shell */
    snprintf(json, sizeof json, "{\"run\": [\"sh\", \"-c\", \"echo \\\"Tokens/second: $0\\\"\", "
             "\"{n_tokens}\"]}");
    assert_int_equal(exec_job(json, NPUBENCH__JOB_KIND__RUN, 0, &res, &err), NB_OK);
    assert_true(res->metrics->tps == 100.0); /* RUN's default n_tokens */
    nb_jobpb_free(res);
    /* in shell commands a placeholder is one quoted word: no injection */
    {
        nb_exec_deploy *d = deploy_of("{\"run\": {\"shell\": \"p={prompt}; echo \\\"Tokens/second: ${#p}\\\"\"}}");
        Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
        s.kind = NPUBENCH__JOB_KIND__RUN;
        char prompt[3000];
        memset(prompt, 'x', sizeof prompt - 1);
        prompt[sizeof prompt - 1] = '\0';
        memcpy(prompt, "'; exit 9; '", 12);
        s.prompt = prompt;
        res = nb_jobpb_result_new();
        assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_OK);
        assert_true(res->metrics->tps == 2999.0); /* the whole prompt, intact */
        nb_jobpb_free(res);
        nb_exec_deploy_free(d);
    }
    tu_rmrf(tmp);
}

/* npubench itself as an exec deployment: our run and verify print the tooling's lines. */
static void test_exec_npubench(void **state)
{
    (void)state;
    tu_require_model();
    char *tmp = tu_tmpdir();
    char json[4096];
    const char *bin = tu_env("NB_BIN", "npubench");
    snprintf(json, sizeof json,
             "{\"run\": \"%s run --n-tokens {n_tokens} --reps {reps} --warmup 0 --dtype q4_1\","
             " \"verify\": \"%s verify --max-prompts {max_prompts} --n-tokens {n_tokens} "
             "--reports %s\", \"cwd\": \"%s\"}",
             bin, bin, tmp, tmp);
    nb_exec_deploy *d = deploy_of(json);
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = NPUBENCH__JOB_KIND__RUN;
    s.n_tokens = 3;
    s.reps = 1;
    Npubench__JobResult *res = nb_jobpb_result_new();
    nb_err err;
    nb_code rc = nb_exec_job(d, "instruct", "q4_1", &s, NULL, res, &err);
    if (rc)
        fail_msg("npubench run: %s", err.msg);
    assert_true(res->metrics->ttft_ms > 0);
    assert_true(res->metrics->tps > 0);
    assert_int_equal(res->metrics->generated_tokens, 3);
    assert_true(res->metrics->prompt_tokens > 0);
    nb_jobpb_free(res);
    s.kind = NPUBENCH__JOB_KIND__VERIFY;
    s.n_tokens = 2;
    s.max_prompts = 1;
    res = nb_jobpb_result_new();
    rc = nb_exec_job(d, "instruct", "bf16", &s, NULL, res, &err);
    if (rc)
        fail_msg("npubench verify: %s", err.msg);
    assert_int_equal(res->outcome, NPUBENCH__OUTCOME__PASS);
    assert_int_equal(res->n_gates, 1); /* from our report's records */
    assert_int_equal(res->gates[0]->steps, 2);
    assert_int_equal(res->gates[0]->n_device_tokens, 2);
    nb_jobpb_free(res);
    nb_exec_deploy_free(d);
    tu_rmrf(tmp);
}

/* ---- the deployments file and nb_job around exec ------------------------------------------ */

static void expect_file_error(const char *json, const char *needle)
{
    nb_deployment *d;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(json, strlen(json), "deployments.json", &d, &n, &err),
                     NB_EINVAL);
    if (!strstr(err.msg, needle))
        fail_msg("expected '%s' in: %s", needle, err.msg);
}

static void test_deployments_file(void **state)
{
    (void)state;
    expect_file_error("{}", "expected {\"deployments\": [...]}");
    expect_file_error("{\"deployments\": []}", "0 deployments");
    expect_file_error("[{\"backend\": \"cpu\"}]", "deployments[0].model: required");
    expect_file_error("[{\"model\": \"m\", \"backend\": \"gpu\"}]",
                      "deployments[0].backend 'gpu': expected cpu, xrt or exec");
    expect_file_error("[{\"model\": \"m\", \"dtype\": \"fp8\"}]", "deployments[0].dtype");
    expect_file_error("[{\"model\": \"m\", \"backend\": \"exec\"}]", "deployments[0].exec: required");
    expect_file_error("[{\"model\": \"m\", \"exec\": {\"run\": \"x\"}}]", "only for backend");
    expect_file_error("[{\"model\": \"m\", \"threads\": -2}]", "deployments[0].threads");
    expect_file_error("[{\"model\": \"a\", \"name\": \"x\"}, {\"model\": \"b\", \"name\": \"x\"}]",
                      "deployments[1].name 'x': used twice");
    expect_file_error("[{\"model\": \"m\", \"colour\": \"red\"}]", "deployments[0].colour: unknown key");
    const char *ok = "{\"deployments\": [{\"model\": \"instruct\", \"dtype\": \"q4_1\", \"threads\": 2},"
                     " {\"name\": \"air\", \"model\": \"Llama-3.2-1B\", \"backend\": \"exec\","
                     "  \"dtype\": \"bf16\", \"exec\": {\"run\": \"make run\"}}]}";
    nb_deployment *d;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(ok, strlen(ok), "deployments.json", &d, &n, &err), NB_OK);
    assert_int_equal(n, 2);
    assert_string_equal(d[0].name, "instruct-cpu-q4_1");
    assert_int_equal(d[0].threads, 2);
    assert_string_equal(d[1].backend, "exec");
    assert_non_null(d[1].exec);
    nb_deployments_free(d, n);
}

typedef struct prog {
    int calls, last_done, last_total;
} prog;

static void on_prog(void *u, int done, int total, const char *msg)
{
    prog *p = u;
    (void)msg;
    p->calls++;
    p->last_done = done;
    p->last_total = total;
}

static void test_job_execute_exec(void **state)
{
    (void)state;
    char *tmp = tu_tmpdir();
    char json[4096];
    snprintf(json, sizeof json,
             "[{\"name\": \"air\", \"model\": \"Llama-3.2-1B-Instruct\", \"backend\": \"exec\","
             " \"dtype\": \"bf16\", \"exec\": {\"run\": \"sh %s run\", \"verify\": \"sh %s verify %s\"}}]",
             fx("exec_pass.sh"), fixture, tmp);
    nb_deployment *deps;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(json, strlen(json), "t", &deps, &n, &err), NB_OK);
    nb_executor_opts o = {.deployments = deps, .n_deployments = n, .board = "lab-9",
                         .board_type = "strix", .rundir = tmp};
    nb_executor *c;
    assert_int_equal(nb_executor_new(&o, &c, &err), NB_OK);
    nb_deployments_free(deps, n); /* the context keeps copies */
    const char *backs[4];
    size_t nb;
    nb_executor_backends(c, backs, 4, &nb);
    assert_int_equal(nb, 1);
    assert_string_equal(backs[0], "exec");
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    sel.model = (char *)"llama-3.2-1b-instruct"; /* case-insensitive */
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = NPUBENCH__JOB_KIND__VERIFY;
    s.selector = &sel;
    prog P = {0};
    nb_executor_hooks h = {.progress = on_prog, .user = &P};
    Npubench__JobResult *res;
    assert_int_equal(nb_executor_run(c, &s, 42, &h, &res, &err), NB_OK);
    assert_int_equal(res->job_id, 42);
    assert_int_equal(res->status, NPUBENCH__STATUS_CODE__OK);
    assert_int_equal(res->outcome, NPUBENCH__OUTCOME__PASS);
    assert_string_equal(res->environment->board, "lab-9");
    assert_string_equal(res->environment->backend, "exec");
    assert_true(strlen(res->environment->cpu_info) > 0);
    assert_non_null(strstr(res->log, "[verify] PASS")); /* the command's output, in the log */
    assert_true(res->finished_unix_ms >= res->started_unix_ms);
    assert_true(P.calls >= 2 && P.last_done == P.last_total);
    nb_jobpb_free(res);
    /* a model this worker does not serve: the result says why */
    sel.model = (char *)"Qwen3-4B";
    assert_int_equal(nb_executor_run(c, &s, 43, NULL, &res, &err), NB_ENOTFOUND);
    assert_non_null(res);
    assert_int_equal(res->status, NPUBENCH__STATUS_CODE__NOT_FOUND);
    assert_int_equal(res->outcome, NPUBENCH__OUTCOME__ERROR);
    assert_non_null(strstr(res->status_message, "no deployment on this worker serves model 'Qwen3-4B'"));
    assert_non_null(strstr(res->status_message, "air (Llama-3.2-1B-Instruct exec/bf16)"));
    nb_jobpb_free(res);
    /* an invalid spec is refused before anything runs */
    sel.model = (char *)"";
    s.n_tokens = 99999;
    assert_int_equal(nb_executor_run(c, &s, 44, NULL, &res, &err), NB_EINVAL);
    assert_int_equal(res->status, NPUBENCH__STATUS_CODE__INVALID_ARGUMENT);
    assert_non_null(strstr(res->status_message, "JobSpec.n_tokens 99999"));
    nb_jobpb_free(res);
    /* advertised: one deployment, no digest for exec */
    Npubench__Deployment **adv;
    size_t na;
    assert_int_equal(nb_executor_advertise(c, &adv, &na, &err), NB_OK);
    assert_int_equal(na, 1);
    assert_string_equal(adv[0]->model, "Llama-3.2-1B-Instruct");
    assert_string_equal(adv[0]->backend, "exec");
    nb_jobpb_free(adv[0]);
    free(adv);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

/* The resident cache: set up once per deployment, LRU-evicted past the memory budget. */
static void test_job_cache(void **state)
{
    (void)state;
    tu_require_model();
    const char *json = "[{\"name\": \"a\", \"model\": \"instruct\", \"dtype\": \"q4_1\", \"threads\": 1},"
                       " {\"name\": \"b\", \"model\": \"base\", \"dtype\": \"q4_1\", \"threads\": 1}]";
    nb_deployment *deps;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(json, strlen(json), "t", &deps, &n, &err), NB_OK);
    char *tmp = tu_tmpdir();
    nb_executor_opts o = {.deployments = deps, .n_deployments = n, .rundir = tmp,
                         .mem_budget_bytes = 1 << 20}; /* room for one at most */
    nb_executor *c;
    assert_int_equal(nb_executor_new(&o, &c, &err), NB_OK);
    nb_deployments_free(deps, n);
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    Npubench__KeyValue w = NPUBENCH__KEY_VALUE__INIT;
    w.key = (char *)"warmup";
    w.value = (char *)"0";
    Npubench__KeyValue *kv[1] = {&w};
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = NPUBENCH__JOB_KIND__RUN;
    s.selector = &sel;
    s.n_tokens = 1;
    s.reps = 1;
    s.params = kv;
    s.n_params = 1;
    const char *order[] = {"instruct", "instruct", "base", "instruct"};
    for (int i = 0; i < 4; i++) {
        sel.model = (char *)order[i];
        Npubench__JobResult *res;
        if (nb_executor_run(c, &s, i, NULL, &res, &err))
            fail_msg("%s: %s", order[i], err.msg);
        assert_int_equal(res->metrics->n_samples, 1);
        assert_int_equal(res->metrics->warmup, 0);
        assert_string_equal(res->environment->dtype, "q4_1");
        nb_jobpb_free(res);
    }
    nb_executor_cache_stats st;
    nb_executor_stats(c, &st);
    assert_int_equal(st.setups, 3);    /* the repeat of "instruct" was resident */
    assert_int_equal(st.evictions, 2); /* each switch evicted the other */
    assert_int_equal(st.resident, 1);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),           cmocka_unit_test(test_parse_formats),
        cmocka_unit_test(test_proc),            cmocka_unit_test(test_deploy_parse),
        cmocka_unit_test(test_exec_jobs),       cmocka_unit_test(test_deployments_file),
        cmocka_unit_test(test_job_execute_exec), cmocka_unit_test(test_exec_npubench),
        cmocka_unit_test(test_job_cache),
    };
    return tu_run_group(tests, NULL, NULL);
}
