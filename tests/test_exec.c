/* test_exec: the exec backend — argv splitting, fork/exec with timeout/cancel/bounded capture,
 * the reference tooling's output formats (fixtures), npubench itself as a deployment, and the
 * deployments file + executor (nb_job) around exec deployments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_benchpb.h"
#include "nb_exec.h"
#include "nb_exec_report.h"
#include "nb_exec_out.h"
#include "nb_exec_proc.h"
#include "nb_executor.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_sha256.h"
#include "nb_json.h"
#include "nb_time.h"
#include "nb_verify.h"
#include "nb_bench.h"
#include "nb_diagnosis.h"
#include "nb_verifypb.h"
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
    assert_int_equal(nb_exec_deploy_split("make -C 'dir with space' PROMPT=\"say \\\"hi\\\" \\$x\" a\\ b",
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
    assert_int_equal(nb_exec_deploy_split("  echo  $HOME '' \"*\"  ", &av, &ac, &err), NB_OK);
    assert_int_equal(ac, 4);
    assert_string_equal(av[1], "$HOME");
    assert_string_equal(av[2], "");
    assert_string_equal(av[3], "*");
    free(av);
    assert_int_equal(nb_exec_deploy_split("echo 'open", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "unterminated single quote opened at column 6"));
    assert_int_equal(nb_exec_deploy_split("echo \"open", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "double"));
    assert_int_equal(nb_exec_deploy_split("echo \\", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "trailing backslash"));
    assert_int_equal(nb_exec_deploy_split("   ", &av, &ac, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "empty"));
    char q[64];
    assert_int_equal(nb_exec_deploy_shell_quote("it's", q, sizeof q, &err), NB_OK);
    assert_string_equal(q, "'it'\\''s'");
    assert_int_equal(nb_exec_deploy_shell_quote("0123456789", q, 8, &err), NB_ENOMEM);
}

/* ---- parsing: extract_perf's formats and precedence -------------------------------------- */

static nb_exec_out parsed(const char *text)
{
    nb_exec_out o;
    nb_exec_out_parse(text, strlen(text), &o);
    return o;
}

static void test_out_precedence(void **state)
{
    (void)state;
    /* llama32_1b_q4nx --profile: the warm TTFT wins over the cold one printed before it;
     * "(Y.YY tok/s)"; prompt_len printed after the throughput still counts */
    nb_exec_out o = parsed("[inference] prefill (seq_len=2048, prompt=12 tok)...\n"
                           "Time to first token (TTFT): 2.10s\n"
                           "Warm time to first token (TTFT): 0.412s\n"
                           "Generated 127 tokens in 1.98s (64.12 tok/s)\n"
                           "Inference: prompt_len=2048, n_tokens=127\n"
                           "[profile] decode 15.6 ms/token, prefill TTFT 2.10s, P=12\n");
    assert_int_equal(o.ttft_fmt, NB_EXEC_OUT_TTFT_WARM);
    assert_true(o.has_ttft && o.ttft_ms == 412.0);
    assert_int_equal(o.tps_fmt, NB_EXEC_OUT_TPS_PAREN);
    assert_true(o.has_tps && o.tps == 64.12);
    assert_int_equal(o.context_len, 2048);
    assert_int_equal(o.generated_tokens, 127);
    /* llama32_1b --profile: "End-to-end (per token)" beats "Tokens/second:" (10.83, not
     * 10.87), the cold TTFT line beats "End-to-end (prefill, per query)" */
    o = parsed("LLAMA Inference: prompt_len=2048, n_tokens=20\n"
               "Time to first token (TTFT): 1.27s (tokenize + EOS-pad + NPU prefill + LM head)."
               " First token: 791\nGenerated 20 tokens in 1.84s\nTokens/second: 10.87\n"
               "Time/token: 92ms\n"
               "  End-to-end (prefill, per query)               412.50 ms\n"
               "  End-to-end (per token)                         92.34 ms\n");
    assert_int_equal(o.ttft_fmt, NB_EXEC_OUT_TTFT_COLD);
    assert_true(o.ttft_ms == 1270.0);
    assert_int_equal(o.tps_fmt, NB_EXEC_OUT_TPS_DECODE_MS);
    assert_true(o.tps == 10.83);
    assert_true(fabs(o.decode_ms_per_token - 92.34) < 1e-9);
    assert_int_equal(o.generated_tokens, 20);
    /* gemma3_4b_q4nx / qwen25_7b_q4nx / qwen3_8b_q4nx: "[inference] decode: N tokens in"
     * gives the count; "Y tok/s (Z ms/token)" is no "(Y tok/s)", "Tokens/second:" is read */
    o = parsed("[inference] prefill prompt_len=14...\n"
               "Time to first token (TTFT): 0.893s\n"
               "[inference] decode: 61 tokens in 3.21s 19.00 tok/s (52.6 ms/token)\n"
               "[inference] Inference: prompt_len=14, n_tokens=61\n"
               "Tokens/second: 19.00\n");
    assert_int_equal(o.generated_tokens, 61);
    assert_int_equal(o.context_len, 14);
    assert_int_equal(o.tps_fmt, NB_EXEC_OUT_TPS_LABEL);
    assert_true(o.has_tps && o.tps == 19.0);
    o = parsed("[inference] decode: x tokens in 1s\n");
    assert_int_equal(o.generated_tokens, -1);
    /* only the profile table: TTFT from the prefill row */
    o = parsed("  End-to-end (prefill, per query)     412.50 ms\n");
    assert_int_equal(o.ttft_fmt, NB_EXEC_OUT_TTFT_PREFILL);
    assert_true(o.ttft_ms == 412.5);
    assert_false(o.has_tps);
    /* smolvla's action chunk is its time to first output */
    o = parsed("Action chunk (50 steps x 32 dims): 87.25 ms\n");
    assert_int_equal(o.ttft_fmt, NB_EXEC_OUT_TTFT_ACTION);
    assert_true(o.ttft_ms == 87.25);
    /* a winning "End-to-end (per token) 0 ms" means no throughput, as in extract_perf */
    o = parsed("  End-to-end (per token)   0.00 ms\nTokens/second: 5.00\n");
    assert_int_equal(o.tps_fmt, NB_EXEC_OUT_TPS_DECODE_MS);
    assert_false(o.has_tps);
    /* the cold TTFT only at a line's start; seconds only ("7 ms" is not extract_perf's) */
    o = parsed("[profile] decode 15.6 ms/token, prefill TTFT 2.10s, P=12\n"
               "Time to first token (TTFT): 7 ms\n   Time to first token (TTFT): 1.5 s\n");
    assert_true(o.has_ttft && o.ttft_ms == 1500.0);
    /* the first occurrence counts, rounded to 0.01 half-even like Python's round() */
    o = parsed("x (10.125 tok/s)\nGenerated 3 tokens in 0.10s (20.00 tok/s)\n"
               "Time to first token (TTFT): 0.0015s\n");
    assert_true(o.tps == 10.12);
    assert_true(o.ttft_ms == 1.5);
    /* "(5.0 ms/tok, 9.9 tok/s)" is none of the formats (llama32_3b_q4nx's profile line) */
    o = parsed("[profile] decode 20 tok in 2.0s (100.0 ms/tok, 9.9 tok/s) | on-device\n");
    assert_false(o.has_tps);
    /* malformed numbers are absent, not zero */
    o = parsed("Time to first token (TTFT): n/a\nTokens/second: fast\nTokens/second: -3\n"
               "Tokens/second: 1.2.3\n(. tok/s)\n[verify] PASSED?\n");
    assert_false(o.has_ttft);
    assert_false(o.has_tps);
    assert_int_equal(o.gate, -1);
    assert_int_equal(o.context_len, -1);
    /* npubench's own CLI */
    o = parsed("Prompt tokens: 42, generated tokens: 3, repetitions: 2\n"
               "Time to first token (TTFT): 0.123s (123.45 ms ± 1.00)\n"
               "Tokens/second: 42.50 ± 0.50\n[verify] PASS (2/2 prompts pass)\n"
               "Report: reports/verify_topk_token_1.json (+ .md)\n");
    assert_true(o.ttft_ms == 123.0);
    assert_true(o.tps == 42.5);
    assert_int_equal(o.prompt_tokens, 42);
    assert_int_equal(o.generated_tokens, 3);
    assert_int_equal(o.gate, 0);
    assert_int_equal(o.gate_passed, 2);
    assert_int_equal(o.gate_total, 2);
    assert_string_equal(o.report_path, "reports/verify_topk_token_1.json");
    /* the verify runner: its Summary dict, a report path with a blank, FAIL on stderr */
    o = parsed("[verify] Report: /r d/v.md\n[verify] JSON:   /r d/v.json\n"
               "[verify] Summary: {'n_layer_records': 0, 'topk_passed': 7, 'topk_failed': 1}\n"
               "[verify] FAIL \xe2\x80\x94 see report for details.\n");
    assert_int_equal(o.gate, 1);
    assert_int_equal(o.gate_passed, 7);
    assert_int_equal(o.gate_total, 8);
    assert_string_equal(o.report_path, "/r d/v.json");
    /* the samples of a command that repeats itself: every line of the winning format */
    double *tt, *tp;
    int nt, np;
    nb_err err;
    const char *reps = "Time to first token (TTFT): 1.0s\nTokens/second: 10\n"
                       "Time to first token (TTFT): 2.0s\nTokens/second: 20\n"
                       "  End-to-end (prefill, per query)   5.00 ms\n";
    assert_int_equal(nb_exec_out_samples(reps, strlen(reps), &tt, &nt, &tp, &np, &err), NB_OK);
    assert_int_equal(nt, 2);
    assert_int_equal(np, 2);
    assert_true(tt[0] == 1000.0 && tt[1] == 2000.0 && tp[0] == 10.0 && tp[1] == 20.0);
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
    /* the worker's keys stay out of a job's environment (a job printing it would put them
     * in its log, readable by every client); other variables pass */
    setenv("NPUBENCH_WORKER_SECRET", "worker-key-must-not-leak-0123", 1);
    setenv("NPUBENCH_SECRET", "client-key-must-not-leak-0123", 1);
    setenv("NPUBENCH_ADMIN_SECRET", "admin-key-must-not-leak-0123", 1);
    setenv("NB_TEST_PASSES", "visible", 1);
    char *const envp[] = {"sh", "-c", "env", NULL};
    nb_exec_proc_opts oe = {.argv = envp};
    assert_int_equal(nb_exec_proc_run(&oe, &r, &err), NB_OK);
    assert_null(strstr(r.output, "must-not-leak"));
    assert_null(strstr(r.output, "NPUBENCH_WORKER_SECRET"));
    assert_non_null(strstr(r.output, "NB_TEST_PASSES=visible"));
    nb_exec_proc_result_free(&r);
    unsetenv("NPUBENCH_WORKER_SECRET");
    unsetenv("NPUBENCH_SECRET");
    unsetenv("NPUBENCH_ADMIN_SECRET");
    unsetenv("NB_TEST_PASSES");
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
    char *const hang[] = {"python3", (char *)fx("mlir-air/llama32_1b.py"), "run", NULL};
    char pidenv[1300];
    snprintf(pidenv, sizeof pidenv, "NB_AIR_PIDFILE=%s", pidfile);
    char *const hang_env[] = {"NB_AIR_MODE=hang", pidenv, NULL};
    nb_exec_proc_opts oh = {.argv = hang, .env = hang_env, .timeout_ms = 5000};
    double t0 = nb_now_ms();
    assert_int_equal(nb_exec_proc_run(&oh, &r, &err), NB_OK);
    double took = nb_now_ms() - t0;
    assert_true(r.timed_out);
    assert_true(took >= 4950 && took < 15000);
    assert_non_null(strstr(r.output, "Time to first token (TTFT): 1.27s"));
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
    char *const crash[] = {"python3", (char *)fx("mlir-air/llama32_1b.py"), "run", NULL};
    char *const crash_env[] = {"NB_AIR_MODE=crash", NULL};
    nb_exec_proc_opts ox = {.argv = crash, .env = crash_env};
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

/* ---- every job kind on the mlir-air stand-ins -------------------------------------------- */

/* One stand-in per mlir-air script family and what extract_perf reads from its output
 * (checked against bench/extract_perf.py on the same output; docs/mlir-air.md). */
typedef struct family {
    const char *script;
    double run_ttft, run_tps, prof_ttft, prof_tps;
    int n_layers;
} family;

static const family FAMILIES[] = {
    {"llama32_1b.py", 1270.0, 10.87, 1270.0, 10.83, 16},
    {"llama32_1b_q4nx.py", 2100.0, 64.12, 412.0, 64.12, 16},
    {"llama32_3b.py", 3050.0, 8.41, 3050.0, 8.41, 28},
    {"qwen25_0_5b.py", 610.0, 31.2, 610.0, 31.2, 24},
    {"smollm2_1_7b.py", 2480.0, 6.91, 2480.0, 6.99, 24},
};

/* The exec object the way a lab would write it for an mlir-air example (docs/service.md). */
static void air_deploy_json(char *buf, size_t cap, const char *script, const char *mode,
                            const char *dir, const char *extra)
{
    char py[1100];
    snprintf(py, sizeof py, "\"python3\", \"%s\"", fx(script));
    snprintf(buf, cap,
             "{\"run\": [%s, \"run\", \"--n-tokens\", \"{n_tokens}\", \"--prompt\", \"{prompt}\"],"
             " \"profile\": [%s, \"profile\", \"--n-tokens\", \"{n_tokens}\"],"
             " \"verify\": [%s, \"verify\", \"--max-prompts\", \"{max_prompts}\", \"--report-dir\","
             " \"%s\"],"
             " \"verify_full\": [%s, \"verify\", \"--report-dir\", \"%s\"],"
             " \"diagnosis\": [%s, \"diagnosis\", \"--prompt\", \"{prompt}\", \"--report-dir\","
             " \"%s\"], \"env\": {\"NB_AIR_MODE\": \"%s\"}%s}",
             py, py, py, dir, py, dir, py, dir, mode, extra ? extra : "");
}

static nb_code air_job(const char *script, const char *mode, const char *dir, int kind,
                       int reps, Npubench__JobResult **res, nb_err *err)
{
    char json[8192], path[300];
    snprintf(path, sizeof path, "mlir-air/%s", script);
    air_deploy_json(json, sizeof json, path, mode, dir, NULL);
    nb_exec_deploy *d = deploy_of(json);
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = kind;
    s.reps = reps;
    s.n_tokens = 20;
    *res = nb_jobpb_result_new();
    lines L = {0};
    nb_exec_job_hooks h = {NULL, on_line, &L};
    nb_code rc = nb_exec_job(d, "fixture-model", "bf16", &s, &h, *res, err);
    nb_exec_deploy_free(d);
    return rc;
}

static void expect_air_error(const char *script, const char *mode, const char *dir, int kind,
                             nb_code code, const char *needle)
{
    Npubench__JobResult *res;
    nb_err err;
    nb_code rc = air_job(script, mode, dir, kind, 0, &res, &err);
    if (rc != code || !strstr(err.msg, needle))
        fail_msg("%s %s %s: expected code %d with '%s', got %d: %s", script, mode,
                 nb_job_kind_name(kind), code, needle, rc, rc ? err.msg : "OK");
    nb_jobpb_free(res);
}

static void test_air_pass(void **state)
{
    (void)state;
    char *tmp = tu_tmpdir();
    nb_err err;
    for (size_t f = 0; f < sizeof FAMILIES / sizeof FAMILIES[0]; f++) {
        const family *F = &FAMILIES[f];
        Npubench__JobResult *res;
        /* run: one command run per repetition, extract_perf's numbers */
        if (air_job(F->script, "pass", tmp, NPUBENCH__JOB_KIND__RUN, 2, &res, &err))
            fail_msg("%s run: %s", F->script, err.msg);
        assert_int_equal(res->outcome, NPUBENCH__OUTCOME__PASS);
        assert_int_equal(res->metrics->n_samples, 2);
        assert_true(res->metrics->ttft_ms == F->run_ttft);
        assert_true(res->metrics->tps == F->run_tps);
        assert_true(res->metrics->tps_stddev == 0.0);
        assert_int_equal(res->metrics->context_len, 2048);
        assert_int_equal(res->metrics->generated_tokens, 20);
        nb_run_result rr;
        assert_int_equal(nb_benchpb_run_from_pb(res->metrics, &rr, &err), NB_OK);
        nb_run_result_free(&rr);
        nb_jobpb_free(res);
        /* profile */
        if (air_job(F->script, "pass", tmp, NPUBENCH__JOB_KIND__PROFILE, 0, &res, &err))
            fail_msg("%s profile: %s", F->script, err.msg);
        assert_true(res->metrics->ttft_ms == F->prof_ttft);
        assert_true(res->metrics->tps == F->prof_tps);
        nb_profile_result pr;
        assert_int_equal(nb_benchpb_profile_from_pb(res, &pr, &err), NB_OK);
        nb_profile_result_free(&pr);
        nb_jobpb_free(res);
        /* verify: 2 prompts, the report's records as gates + the verify summary */
        if (air_job(F->script, "pass", tmp, NPUBENCH__JOB_KIND__VERIFY, 0, &res, &err))
            fail_msg("%s verify: %s", F->script, err.msg);
        assert_int_equal(res->outcome, NPUBENCH__OUTCOME__PASS);
        assert_int_equal(res->n_gates, 2);
        assert_non_null(res->verify);
        assert_int_equal(res->verify->passed, 2);
        assert_int_equal(res->verify->failed, 0);
        assert_int_equal(res->verify->k, 5);
        assert_int_equal(res->verify->n_tokens, 32);
        assert_non_null(strstr(res->verify->prompts_path, "prompts/instruct.txt"));
        assert_int_equal(res->gates[0]->divergence_step, -1);
        assert_int_equal(res->gates[0]->steps, 32);
        assert_int_equal(res->gates[1]->divergence_step, 7);
        assert_int_equal(res->gates[1]->device_token, 264);
        assert_int_equal(res->gates[1]->reference_token, 220);
        assert_int_equal(res->gates[1]->device_token_ref_rank, 1); /* 2, 1-based there */
        assert_int_equal(res->gates[1]->n_reference_top, 5);
        assert_int_equal(res->gates[1]->reference_top[0]->token, 220);
        assert_string_equal(res->gates[1]->prompt, "The capital of France is");
        nb_verify_result vr;
        assert_int_equal(nb_verifypb_verify_from_pb(res, &vr, &err), NB_OK); /* the CLI's read */
        assert_int_equal(vr.n, 2);
        assert_int_equal(vr.status, NB_GATE_PASS);
        nb_verify_result_free(&vr);
        assert_non_null(strstr(res->report_json, "\"topk_checks\""));
        nb_jobpb_free(res);
        /* verify-full: every prompt of the set */
        if (air_job(F->script, "pass", tmp, NPUBENCH__JOB_KIND__VERIFY_FULL, 0, &res, &err))
            fail_msg("%s verify-full: %s", F->script, err.msg);
        assert_int_equal(res->n_gates, 8);
        assert_int_equal(res->verify->passed, 8);
        nb_jobpb_free(res);
        /* diagnosis: the per-layer cosines; the highest layer is post-final-norm */
        if (air_job(F->script, "pass", tmp, NPUBENCH__JOB_KIND__DIAGNOSIS, 0, &res, &err))
            fail_msg("%s diagnosis: %s", F->script, err.msg);
        assert_int_equal(res->outcome, NPUBENCH__OUTCOME__PASS);
        assert_int_equal(res->n_cosines, F->n_layers);
        assert_true(res->cosines[0]->min == 0.999);
        assert_true(res->cosines[0]->max_abs == 0.25);
        assert_false(res->cosines[0]->post_norm);
        assert_true(res->cosines[F->n_layers - 1]->post_norm);
        assert_string_equal(res->diagnosis->prompt, "The capital of France is");
        nb_diagnosis_result dr;
        assert_int_equal(nb_verifypb_diagnosis_from_pb(res, &dr, &err), NB_OK);
        nb_diagnosis_result_free(&dr);
        nb_jobpb_free(res);
    }
    tu_rmrf(tmp);
}

/* An exec run records the commit of the checkout it ran in (`git rev-parse HEAD` in exec.cwd)
 * as toolchain air_sha, as mlir-air's nightly rows name theirs; outside a checkout, none. */
static void test_exec_air_sha(void **state)
{
    (void)state;
    char *tmp = tu_tmpdir();
    char cmd[2048], sha[64] = "";
    snprintf(cmd, sizeof cmd,
             "cd '%s' && git init -q . && git -c user.email=t@t -c user.name=t commit -q "
             "--allow-empty -m air && git rev-parse HEAD",
             tmp);
    FILE *p = popen(cmd, "r");
    tu_require(p && fgets(sha, sizeof sha, p) && strlen(sha) >= 40, "git is not available");
    pclose(p);
    sha[40] = '\0';
    for (int inside = 1; inside >= 0; inside--) {
        char json[8192], extra[1200], dir[1100];
        snprintf(dir, sizeof dir, "%s%s", tmp, inside ? "" : "/elsewhere");
        if (!inside) {
            snprintf(cmd, sizeof cmd, "mkdir -p '%s' && rm -rf '%s/.git'", dir, tmp);
            assert_int_equal(system(cmd), 0);
        }
        snprintf(extra, sizeof extra, ", \"cwd\": \"%s\"", dir);
        air_deploy_json(json, sizeof json, "mlir-air/llama32_1b.py", "pass", dir, extra);
        nb_exec_deploy *d = deploy_of(json);
        Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
        s.kind = NPUBENCH__JOB_KIND__PROFILE;
        s.n_tokens = 20;
        Npubench__JobResult *res = nb_jobpb_result_new();
        res->environment = malloc(sizeof *res->environment);
        assert_non_null(res->environment);
        npubench__environment__init(res->environment);
        lines L = {0};
        nb_exec_job_hooks h = {NULL, on_line, &L};
        nb_err err;
        assert_int_equal(nb_exec_job(d, "llama32_1b", "bf16", &s, &h, res, &err), NB_OK);
        const char *got = NULL;
        for (size_t i = 0; i < res->environment->n_extra; i++)
            if (!strcmp(res->environment->extra[i]->key, "air_sha"))
                got = res->environment->extra[i]->value;
        if (inside) {
            assert_non_null(got);
            assert_string_equal(got, sha);
        } else {
            assert_null(got);
        }
        nb_jobpb_free(res);
        nb_exec_deploy_free(d);
    }
    tu_rmrf(tmp);
}

/* smolvla through exec: a latency-only profile ("throughput": false) and a verify whose
 * printed verdict is the gate ("verify_report": false); a prompt set reaches a command only
 * through {prompts_file}, and one without it refuses the job. */
static void test_exec_latency_and_verdict(void **state)
{
    (void)state;
    char json[4096];
    for (int fail = 0; fail < 2; fail++) {
        snprintf(json, sizeof json,
                 "{\"profile\": [\"python3\", \"%s\", \"profile\"], \"verify\": "
                 "[\"python3\", \"%s\", \"verify\"], \"env\": {\"NB_AIR_MODE\": \"%s\"}, "
                 "\"throughput\": false, \"verify_report\": false}",
                 fx("mlir-air/smolvla.py"), fx("mlir-air/smolvla.py"), fail ? "fail" : "pass");
        nb_exec_deploy *d = deploy_of(json);
        Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
        nb_err err;
        Npubench__JobResult *res = nb_jobpb_result_new();
        s.kind = NPUBENCH__JOB_KIND__PROFILE;
        if (nb_exec_job(d, "smolvla", "bf16", &s, NULL, res, &err))
            fail_msg("smolvla profile: %s", err.msg);
        assert_true(res->metrics->ttft_ms == 824.3);
        assert_true(res->metrics->tps == 0.0); /* none: stored as unknown, never 0 tok/s */
        nb_jobpb_free(res);
        res = nb_jobpb_result_new();
        s.kind = NPUBENCH__JOB_KIND__VERIFY;
        if (nb_exec_job(d, "smolvla", "bf16", &s, NULL, res, &err))
            fail_msg("smolvla verify: %s", err.msg);
        assert_int_equal(res->outcome, fail ? NPUBENCH__OUTCOME__FAIL : NPUBENCH__OUTCOME__PASS);
        assert_non_null(res->verify);
        assert_int_equal(res->verify->passed, !fail);
        assert_int_equal(res->verify->failed, fail);
        nb_jobpb_free(res);
        nb_exec_deploy_free(d);
    }
    /* without "throughput": false the latency alone is no result */
    snprintf(json, sizeof json, "{\"profile\": [\"python3\", \"%s\", \"profile\"]}",
             fx("mlir-air/smolvla.py"));
    nb_exec_deploy *d = deploy_of(json);
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = NPUBENCH__JOB_KIND__PROFILE;
    nb_err err;
    Npubench__JobResult *res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "smolvla", "bf16", &s, NULL, res, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "printed no usable decode throughput"));
    nb_jobpb_free(res);
    /* a client's prompts: refused by a command that cannot take them */
    char *prompts[] = {"What is 2+2?", "Name a colour."};
    s.prompts = prompts;
    s.n_prompts = 2;
    res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "smolvla", "bf16", &s, NULL, res, &err), NB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "the job names a prompt set (explicit prompts) but this "
                                    "deployment's 'profile' command takes no {prompts_file}"));
    nb_jobpb_free(res);
    nb_exec_deploy_free(d);
    /* ... and handed over, one prompt a line, by one that can */
    d = deploy_of("{\"profile\": {\"shell\": \"tail -n 1 {prompts_file}; wc -l < "
                  "{prompts_file}; echo 'Tokens/second: 5.00'\"}}");
    lines L = {0};
    nb_exec_job_hooks h = {NULL, on_line, &L};
    res = nb_jobpb_result_new();
    if (nb_exec_job(d, "m", "bf16", &s, &h, res, &err))
        fail_msg("prompts file: %s", err.msg);
    assert_true(res->metrics->tps == 5.0);
    assert_true(L.n >= 3);
    nb_jobpb_free(res);
    /* a prompt holding a line break cannot be one line of the file */
    char *bad[] = {"two\nlines"};
    s.prompts = bad;
    s.n_prompts = 1;
    res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "JobSpec.prompts[0]: holds a line break"));
    nb_jobpb_free(res);
    nb_exec_deploy_free(d);
}

/* A verify report's per-layer records map into the localization's layers (each layer's output
 * only: no sub-block), and npubench's own report brings its localization back as written. */
static void test_report_localization(void **state)
{
    (void)state;
    const char *air =
        "{\"config\": {}, \"topk_checks\": [{\"pair\": \"npu_vs_hf\", \"prompt_idx\": 0, "
        "\"prompt_text\": \"p\", \"n_steps\": 4, \"k\": 5, \"divergence_step\": 2, "
        "\"test_chosen_at_div\": 7, \"ref_chosen_at_div\": 8, \"status\": \"FAIL\", "
        "\"test_chosen_rank_in_ref\": null, \"ref_chosen_rank_in_test\": null}], "
        "\"per_layer\": ["
        "{\"pair\": \"npu_vs_hf\", \"name\": \"ffn_out\", \"layer\": 0, "
        "\"cosine\": {\"min\": 0.9995}, \"errors\": {\"max_abs\": 0.1}},"
        "{\"pair\": \"npu_vs_hf\", \"name\": \"ffn_out\", \"layer\": 1, "
        "\"cosine\": {\"min\": 0.42}, \"errors\": {\"max_abs\": 30.0}},"
        "{\"pair\": \"npu_vs_hf\", \"name\": \"ffn_out\", \"layer\": 2, "
        "\"cosine\": {\"min\": 0.5}, \"errors\": {\"max_abs\": 9.0}}]}";
    json_object *root = json_tokener_parse(air);
    assert_non_null(root);
    nb_verify_result r;
    nb_err err = {0};
    if (nb_exec_report_verify(root, "report.json", 5, &r, &err))
        fail_msg("air report: %s", err.msg);
    const nb_localization *l = &r.recs[0].loc;
    print_message("%s | %s\n", l->summary, l->note);
    assert_true(l->present);
    assert_string_equal(l->verdict, "layer");
    assert_int_equal(l->first_layer, 1);
    assert_string_equal(l->sub_block, "");
    assert_int_equal(l->n_layers, 2); /* the highest record is the post-final-norm state */
    assert_true(l->final_cos == 0.5);
    assert_non_null(strstr(l->summary, "layer 1 output (sub-block not reported)"));
    assert_true(isnan(l->ref_margin)); /* ids without logits: no margin */

    /* npubench's report of the same: its localization object comes back as written */
    json_object *ours = json_object_new_object();
    json_object *cfg = json_object_new_object();
    json_object_object_add(cfg, "k", json_object_new_int(5));
    json_object_object_add(ours, "config", cfg);
    json_object *rec = json_object_new_object();
    json_object_object_add(rec, "index", json_object_new_int(0));
    json_object_object_add(rec, "prompt", json_object_new_string("p"));
    json_object_object_add(rec, "steps", json_object_new_int(4));
    json_object_object_add(rec, "divergence_step", json_object_new_int(1));
    json_object_object_add(rec, "status", json_object_new_string("FAIL"));
    json_object_object_add(rec, "localization", nb_localize_json(l));
    json_object *recs = json_object_new_array();
    json_object_array_add(recs, rec);
    json_object_object_add(ours, "records", recs);
    nb_verify_result o;
    if (nb_exec_report_verify(ours, "ours.json", 5, &o, &err))
        fail_msg("our report: %s", err.msg);
    assert_string_equal(o.recs[0].loc.summary, l->summary);
    assert_string_equal(o.recs[0].loc.source, "mlir-air report");
    assert_int_equal(o.recs[0].loc.first_layer, 1);
    nb_verify_result_free(&o);
    nb_verify_result_free(&r);
    json_object_put(ours);
    json_object_put(root);
}

static void test_air_faults(void **state)
{
    (void)state;
    char *tmp = tu_tmpdir();
    nb_err err;
    for (size_t f = 0; f < sizeof FAMILIES / sizeof FAMILIES[0]; f++) {
        const char *sc = FAMILIES[f].script;
        /* FAIL: the runner exits 1 after its report; the gate's verdict, not an error */
        Npubench__JobResult *res;
        if (air_job(sc, "fail", tmp, NPUBENCH__JOB_KIND__VERIFY, 0, &res, &err))
            fail_msg("%s verify FAIL: %s", sc, err.msg);
        assert_int_equal(res->outcome, NPUBENCH__OUTCOME__FAIL);
        assert_int_equal(res->n_gates, 2);
        assert_int_equal(res->verify->failed, 1);
        assert_int_equal(res->gates[1]->status, NPUBENCH__OUTCOME__FAIL);
        assert_int_equal(res->gates[1]->divergence_step, 3);
        assert_int_equal(res->gates[1]->device_token_ref_rank, -1);
        assert_non_null(strstr(res->gates[1]->fail_reason, "test chose 9999 but it is not in ref top-5"));
        /* localized with what mlir-air's verify report provides: nothing, and it says so */
        const Npubench__Localization *loc = res->gates[1]->localization;
        assert_non_null(loc);
        assert_null(res->gates[0]->localization); /* a PASS without divergence */
        assert_string_equal(loc->source, "mlir-air report");
        assert_string_equal(loc->verdict, "unlocalized");
        assert_int_equal(loc->kv, 0);
        assert_int_equal(loc->layers_status, 0);
        assert_non_null(strstr(loc->note, "no per-layer records"));
        nb_jobpb_free(res);
        expect_air_error(sc, "fail", tmp, NPUBENCH__JOB_KIND__RUN, NB_EIO,
                         "exited with status 1; output tail: ");
        expect_air_error(sc, "fail", tmp, NPUBENCH__JOB_KIND__PROFILE, NB_EIO,
                         "failed to load xclbin");
        expect_air_error(sc, "crash", tmp, NPUBENCH__JOB_KIND__RUN, NB_EIO, "signal 11");
        expect_air_error(sc, "crash", tmp, NPUBENCH__JOB_KIND__VERIFY, NB_EIO, "signal 11");
        expect_air_error(sc, "crash", tmp, NPUBENCH__JOB_KIND__DIAGNOSIS, NB_EIO, "signal 11");
        /* no usable metric: an error quoting the tail, never a run stored at 0 tok/s */
        expect_air_error(sc, "nometric", tmp, NPUBENCH__JOB_KIND__RUN, NB_EFORMAT,
                         "printed no usable decode throughput");
        expect_air_error(sc, "nometric", tmp, NPUBENCH__JOB_KIND__PROFILE, NB_EFORMAT,
                         "output tail: ");
        expect_air_error(sc, "nometric", tmp, NPUBENCH__JOB_KIND__VERIFY, NB_EFORMAT,
                         "holds no gate record");
    }
    /* a hang: the deployment's timeout, the output's tail in the message */
    char json[8192];
    /* 5 s: python must have started and printed its first lines under a loaded CI box */
    air_deploy_json(json, sizeof json, "mlir-air/llama32_3b.py", "hang", tmp,
                    ", \"timeout_s\": 5");
    nb_exec_deploy *d = deploy_of(json);
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = NPUBENCH__JOB_KIND__RUN;
    Npubench__JobResult *res = nb_jobpb_result_new();
    double t0 = nb_now_ms();
    assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_ETIMEOUT);
    assert_true(nb_now_ms() - t0 < 15000);
    assert_non_null(strstr(err.msg, "timed out after 5 s"));
    assert_non_null(strstr(err.msg, "Time to first token (TTFT): 3.05s"));
    nb_jobpb_free(res);
    /* a shard of verify-full: the runner takes no prompt range, refused before running */
    assert_false(nb_exec_deploy_takes_range(d));
    Npubench__Shard sh = NPUBENCH__SHARD__INIT;
    sh.index = 1;
    sh.count = 2;
    sh.prompt_begin = 4;
    sh.prompt_end = 8;
    s.kind = NPUBENCH__JOB_KIND__VERIFY_FULL;
    s.shard = &sh;
    res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "shard 1/2 (prompts 4..8)"));
    assert_non_null(strstr(err.msg, "cannot run a prompt range"));
    nb_jobpb_free(res);
    nb_exec_deploy_free(d);
    /* a configured report the command did not write this time is not taken for its own */
    char old[1200];
    snprintf(old, sizeof old, "%s/old.json", tmp);
    FILE *fo = fopen(old, "w");
    assert_non_null(fo);
    fputs("{\"topk_checks\": []}", fo);
    fclose(fo);
    struct timespec past[2] = {{1000000000, 0}, {1000000000, 0}};
    assert_int_equal(utimensat(AT_FDCWD, old, past, 0), 0);
    snprintf(json, sizeof json,
             "{\"verify\": [\"sh\", \"-c\", \"echo '[verify] PASS'\"], \"report\": \"%s\"}", old);
    d = deploy_of(json);
    s.kind = NPUBENCH__JOB_KIND__VERIFY;
    s.shard = NULL;
    res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "the command did not write it"));
    nb_jobpb_free(res);
    nb_exec_deploy_free(d);
    /* a verify that prints a verdict but no report: nothing to show as gate records */
    d = deploy_of("{\"verify\": [\"sh\", \"-c\", \"echo '[verify] PASS'\"]}");
    res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "printed no report path"));
    nb_jobpb_free(res);
    nb_exec_deploy_free(d);
    tu_rmrf(tmp);
}

/* Placeholders: argv words get values, never a shell; in shell commands a value is one
 * quoted word (no injection). */
static void test_exec_placeholders(void **state)
{
    (void)state;
    nb_err err;
    nb_exec_deploy *d = deploy_of("{\"run\": [\"sh\", \"-c\", \"echo \\\"Tokens/second: $0\\\"\", "
                                  "\"{n_tokens}\"], \"verify_full\": \"v {prompt_begin} {prompt_end}\"}");
    assert_true(nb_exec_deploy_takes_range(d));
    assert_true(nb_exec_deploy_uses(d, NPUBENCH__JOB_KIND__RUN, "{n_tokens}"));
    assert_false(nb_exec_deploy_uses(d, NPUBENCH__JOB_KIND__RUN, "{reps}"));
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = NPUBENCH__JOB_KIND__RUN;
    Npubench__JobResult *res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_OK);
    assert_true(res->metrics->tps == 100.0); /* RUN's default n_tokens */
    assert_true(res->metrics->ttft_ms == 0.0); /* no TTFT line: unknown, not measured */
    nb_jobpb_free(res);
    s.kind = NPUBENCH__JOB_KIND__DIAGNOSIS;
    res = nb_jobpb_result_new();
    assert_int_equal(nb_exec_job(d, "m", "bf16", &s, NULL, res, &err), NB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "'diagnosis'"));
    nb_jobpb_free(res);
    nb_exec_deploy_free(d);
    d = deploy_of("{\"run\": {\"shell\": \"p={prompt}; echo \\\"Tokens/second: ${#p}\\\"\"}}");
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
                      "deployments[0].backend 'gpu': expected cpu, xrt, exec or air");
    expect_file_error("[{\"model\": \"m\", \"dtype\": \"fp8\"}]", "deployments[0].dtype");
    expect_file_error("[{\"model\": \"m\", \"backend\": \"exec\"}]", "deployments[0].exec: required");
    expect_file_error("[{\"model\": \"m\", \"exec\": {\"run\": \"x\"}}]", "only for backend");
    expect_file_error("[{\"model\": \"m\", \"threads\": -2}]",
                      "deployments[0].threads: must be an integer 0..1024, got -2");
    expect_file_error("[{\"model\": \"a\", \"name\": \"x\"}, {\"model\": \"b\", \"name\": \"x\"}]",
                      "deployments[1].name 'x': used twice");
    expect_file_error("[{\"model\": \"m\", \"colour\": \"red\"}]", "deployments[0].colour: unknown key");
    const char *ok = "{\"deployments\": [{\"model\": \"instruct\", \"dtype\": \"q4_1\", \"threads\": 2},"
                     " {\"name\": \"air\", \"model\": \"Llama-3.2-1B\", \"backend\": \"exec\","
                     "  \"dtype\": \"int4-awq\", \"exec\": {\"run\": \"make run\"}}]}";
    nb_deployment *d;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(ok, strlen(ok), "deployments.json", &d, &n, &err), NB_OK);
    assert_int_equal(n, 2);
    assert_string_equal(d[0].name, "instruct-cpu-q4_1");
    assert_int_equal(d[0].threads, 2);
    assert_string_equal(d[1].backend, "exec");
    assert_non_null(d[1].exec);
    /* the engine's dtype is the enum; an exec entry's is its commands' free label, apart */
    assert_int_equal(d[0].dtype, NB_DTYPE_Q4_1);
    assert_string_equal(d[0].exec_dtype, "");
    assert_string_equal(nb_deployment_dtype(&d[0]), "q4_1");
    assert_string_equal(d[1].exec_dtype, "int4-awq");
    assert_string_equal(nb_deployment_dtype(&d[1]), "int4-awq");
    nb_deployments_free(d, n);
}

static void expect_spec_error(const char *spec, const char *want)
{
    nb_deployment d;
    nb_err err;
    assert_int_equal(nb_deployment_parse_spec(spec, "--deploy 1", &d, &err), NB_EINVAL);
    assert_string_equal(err.msg, want);
}

/* worker --deploy MODEL[:DTYPE[:BACKEND]]: defaults, each field's error, duplicates. */
static void test_deploy_specs(void **state)
{
    (void)state;
    nb_deployment d;
    nb_err err;
    assert_int_equal(nb_deployment_parse_spec("gemma3:native", "x", &d, &err), NB_OK);
    assert_string_equal(d.model, "gemma3");
    assert_int_equal(d.dtype, NB_DTYPE_NATIVE); /* the enum from the SPEC on */
    assert_string_equal(d.exec_dtype, "");
    assert_string_equal(d.backend, "cpu");
    assert_string_equal(d.name, "gemma3-cpu-native");
    assert_int_equal(nb_deployment_parse_spec("m.gguf::xrt", "x", &d, &err), NB_OK);
    assert_int_equal(d.dtype, NB_DTYPE_BF16);
    assert_string_equal(d.backend, "xrt");
    assert_int_equal(nb_deployment_parse_spec("instruct", "x", &d, &err), NB_OK);
    assert_string_equal(d.name, "instruct-cpu-bf16");
    expect_spec_error("", "--deploy 1: MODEL is empty, expected MODEL[:DTYPE[:BACKEND]] "
                          "(e.g. instruct:bf16, gemma3:native)");
    expect_spec_error(":bf16", "--deploy 1: MODEL is empty, expected MODEL[:DTYPE[:BACKEND]] "
                               "(e.g. instruct:bf16, gemma3:native)");
    expect_spec_error("a:b:c:d", "--deploy 1: more than 3 fields, expected "
                                 "MODEL[:DTYPE[:BACKEND]]");
    expect_spec_error("m:q9", "--deploy 1: dtype: dtype 'q9': expected bf16, f32, q4_1 or native");
    expect_spec_error("m::gpu", "--deploy 1: backend 'gpu': expected cpu, xrt, exec or air");
    expect_spec_error("m::exec", "--deploy 1: exec: required for backend \"exec\" (only a "
                                 "deployments file can give its commands)");
    expect_spec_error("m:bf16bf16bf16bf16", "--deploy 1: DTYPE is 16 bytes, the limit is 15");
    expect_spec_error("m::cpucpucpucpucpucp", "--deploy 1: BACKEND is 17 bytes, the limit is 15");
    char big[1100];
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    expect_spec_error(big, "--deploy 1: MODEL is 1099 bytes, the limit is 1023");

    const char *two[] = {"instruct:bf16", "gemma3:native"}, *dup[] = {"instruct", "instruct:bf16"};
    nb_deployment *ds;
    int n;
    assert_int_equal(nb_deployments_from_specs(two, 2, &ds, &n, &err), NB_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ds[1].model, "gemma3");
    nb_deployments_free(ds, n);
    assert_int_equal(nb_deployments_from_specs(dup, 2, &ds, &n, &err), NB_EINVAL);
    assert_string_equal(err.msg, "--deploy 2 'instruct:bf16': the same deployment "
                                 "(instruct-cpu-bf16) as --deploy 1");
    assert_null(ds);
    assert_int_equal(nb_deployments_from_specs(two, 0, &ds, &n, &err), NB_EINVAL);
    assert_string_equal(err.msg, "--deploy: 0 given, must be 1..64");
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
             " \"dtype\": \"bf16\", \"exec\": {\"run\": \"python3 %s run\", \"verify\": "
             "\"python3 %s verify --max-prompts {max_prompts} --report-dir %s\"}}]",
             fx("mlir-air/llama32_1b.py"), fixture, tmp);
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
    assert_true(adv[0]->no_prompt_range); /* no verify_full {prompt_begin}/{prompt_end} */
    assert_int_equal(adv[0]->dtype_id, NPUBENCH__DTYPE__DTYPE_UNSPECIFIED); /* a free label */
    nb_jobpb_free(adv[0]);
    free(adv);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

/* The resident cache: set up once per deployment, LRU-evicted past the memory budget. */
/* An executor over the instruct and base q4_1 deployments (1 thread) under budget. */
static nb_executor *q4_executor(size_t budget, char **tmp)
{
    const char *json = "[{\"name\": \"a\", \"model\": \"instruct\", \"dtype\": \"q4_1\", \"threads\": 1},"
                       " {\"name\": \"b\", \"model\": \"base\", \"dtype\": \"q4_1\", \"threads\": 1}]";
    nb_deployment *deps;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(json, strlen(json), "t", &deps, &n, &err), NB_OK);
    *tmp = tu_tmpdir();
    nb_executor_opts o = {.deployments = deps, .n_deployments = n, .rundir = *tmp,
                         .mem_budget_bytes = budget};
    nb_executor *c;
    assert_int_equal(nb_executor_new(&o, &c, &err), NB_OK);
    nb_deployments_free(deps, n);
    return c;
}

/* A one-token, one-repetition RUN spec without warm-up; params[1] is free for the test. */
typedef struct tiny_run {
    Npubench__DeploymentSelector sel;
    Npubench__KeyValue kv[2];
    Npubench__KeyValue *kvp[2];
    Npubench__JobSpec s;
} tiny_run;

static void tiny_run_init(tiny_run *t, const char *model)
{
    npubench__deployment_selector__init(&t->sel);
    t->sel.model = (char *)model;
    for (int i = 0; i < 2; i++) {
        npubench__key_value__init(&t->kv[i]);
        t->kvp[i] = &t->kv[i];
    }
    t->kv[0].key = (char *)"warmup";
    t->kv[0].value = (char *)"0";
    npubench__job_spec__init(&t->s);
    t->s.kind = NPUBENCH__JOB_KIND__RUN;
    t->s.selector = &t->sel;
    t->s.n_tokens = 1;
    t->s.reps = 1;
    t->s.params = t->kvp;
    t->s.n_params = 1;
}

/* params threads=1024 runs on at most this machine's cores (logged); a deployment bigger
 * than the memory budget is refused, naming both sizes. */
static void test_job_limits(void **state)
{
    (void)state;
    tu_require_model();
    char *tmp;
    nb_executor *c = q4_executor((size_t)400 << 20, &tmp);
    tiny_run t;
    tiny_run_init(&t, "instruct");
    t.kv[1].key = (char *)"threads";
    t.kv[1].value = (char *)"1024";
    t.s.n_params = 2;
    Npubench__JobResult *res;
    nb_err err;
    if (nb_executor_run(c, &t.s, 1, NULL, &res, &err))
        fail_msg("threads=1024: %s", err.msg);
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    char want[96];
    snprintf(want, sizeof want, "threads=1024: clamped to %d,", CPU_COUNT(&set));
    assert_non_null(strstr(res->log, want));
    assert_int_equal(res->environment->threads, CPU_COUNT(&set));
    nb_jobpb_free(res);
    nb_executor_free(c);
    tu_rmrf(tmp);

    c = q4_executor((size_t)1 << 20, &tmp);
    tiny_run_init(&t, "instruct");
    assert_int_equal(nb_executor_run(c, &t.s, 2, NULL, &res, &err), NB_ENOMEM);
    assert_non_null(strstr(err.msg, "the worker's memory budget is 1 MiB"));
    nb_jobpb_free(res);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

/* One job's params threads=1 does not stick to the worker: the next job on the same
 * resident deployment, without threads, runs (and is stored) with the deployment's count. */
static void test_job_threads_no_leak(void **state)
{
    (void)state;
    tu_require_model();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 2)
        tu_skip("one core: 1 thread is also all cores");
    const char *json = "[{\"name\": \"a\", \"model\": \"instruct\", \"dtype\": \"q4_1\"}]";
    nb_deployment *deps;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(json, strlen(json), "t", &deps, &n, &err), NB_OK);
    char *tmp = tu_tmpdir();
    nb_executor_opts o = {.deployments = deps, .n_deployments = n, .rundir = tmp,
                         .mem_budget_bytes = (size_t)800 << 20};
    nb_executor *c;
    assert_int_equal(nb_executor_new(&o, &c, &err), NB_OK);
    nb_deployments_free(deps, n);
    tiny_run t;
    const int want[3] = {(int)online, 1, (int)online};
    for (int i = 0; i < 3; i++) {
        tiny_run_init(&t, "instruct");
        if (i == 1) {
            t.kv[1].key = (char *)"threads";
            t.kv[1].value = (char *)"1";
            t.s.n_params = 2;
        }
        Npubench__JobResult *res;
        if (nb_executor_run(c, &t.s, i + 1, NULL, &res, &err))
            fail_msg("job %d: %s", i + 1, err.msg);
        if (res->environment->threads != want[i])
            fail_msg("job %d ran with %d threads, want %d", i + 1, (int)res->environment->threads,
                     want[i]);
        nb_jobpb_free(res);
    }
    nb_executor_free(c);
    tu_rmrf(tmp);
}

static void test_job_cache(void **state)
{
    (void)state;
    tu_require_model();
    char *tmp;
    nb_executor *c = q4_executor((size_t)300 << 20, &tmp); /* room for one at most */
    tiny_run t;
    tiny_run_init(&t, "instruct");
    nb_err err;
    const char *order[] = {"instruct", "instruct", "base", "instruct"};
    for (int i = 0; i < 4; i++) {
        t.sel.model = (char *)order[i];
        Npubench__JobResult *res;
        if (nb_executor_run(c, &t.s, i, NULL, &res, &err))
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

/* A worker hashes each model once, to advertise it; setup reuses that digest, but only while
 * the file is the one hashed: a model rewritten in place is hashed again at its next setup. */
static void test_job_digest_reuse(void **state)
{
    (void)state;
    tu_require_model();
    char *tmp = tu_tmpdir(), path[1100], cmd[3400], json[1500], hex[65];
    snprintf(path, sizeof path, "%s/m.gguf", tmp);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", tu_model(), path);
    assert_int_equal(system(cmd), 0);
    snprintf(json, sizeof json,
             "[{\"name\": \"copy\", \"model\": \"%s\", \"dtype\": \"q4_1\", \"threads\": 1},"
             " {\"name\": \"orig\", \"model\": \"instruct\", \"dtype\": \"q4_1\", \"threads\": 1}]",
             path);
    nb_deployment *deps;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(json, strlen(json), "t", &deps, &n, &err), NB_OK);
    nb_executor_opts o = {.deployments = deps, .n_deployments = n, .rundir = tmp,
                         .mem_budget_bytes = (size_t)300 << 20}; /* one resident at a time */
    nb_executor *c;
    assert_int_equal(nb_executor_new(&o, &c, &err), NB_OK);
    nb_deployments_free(deps, n);
    Npubench__Deployment **adv;
    size_t na;
    assert_int_equal(nb_executor_advertise(c, &adv, &na, &err), NB_OK);
    assert_int_equal(na, 2);
    assert_int_equal(nb_sha256_file(path, hex, &err), NB_OK);
    assert_string_equal(adv[0]->digest, hex);
    /* an engine deployment goes on the wire as the enum beside its name */
    assert_string_equal(adv[1]->dtype, "q4_1");
    assert_int_equal(adv[1]->dtype_id, NPUBENCH__DTYPE__DTYPE_Q4_1);
    for (size_t i = 0; i < na; i++)
        nb_jobpb_free(adv[i]);
    free(adv);

    const char *order[] = {"copy", "orig", "copy"};
    for (int i = 0; i < 3; i++) {
        if (i == 2) { /* rewritten in place, same inode: one byte more */
            FILE *f = fopen(path, "ab");
            assert_non_null(f);
            fputc(0, f);
            fclose(f);
            assert_int_equal(nb_sha256_file(path, hex, &err), NB_OK);
        }
        tiny_run t;
        tiny_run_init(&t, order[i]);
        Npubench__JobResult *res;
        if (nb_executor_run(c, &t.s, i, NULL, &res, &err))
            fail_msg("%s: %s", order[i], err.msg);
        if (i != 1)
            assert_string_equal(res->environment->model_digest, hex);
        nb_jobpb_free(res);
    }
    nb_executor_cache_stats st;
    nb_executor_stats(c, &st);
    assert_int_equal(st.setups, 3);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),           cmocka_unit_test(test_out_precedence),
        cmocka_unit_test(test_proc),            cmocka_unit_test(test_deploy_parse),
        cmocka_unit_test(test_air_pass),        cmocka_unit_test(test_report_localization),
        cmocka_unit_test(test_exec_air_sha),     cmocka_unit_test(test_exec_latency_and_verdict),
        cmocka_unit_test(test_air_faults),
        cmocka_unit_test(test_exec_placeholders), cmocka_unit_test(test_deployments_file),
        cmocka_unit_test(test_deploy_specs),
        cmocka_unit_test(test_job_execute_exec), cmocka_unit_test(test_exec_npubench),
        cmocka_unit_test(test_job_cache),       cmocka_unit_test(test_job_limits),
        cmocka_unit_test(test_job_threads_no_leak),
        cmocka_unit_test(test_job_digest_reuse),
    };
    return tu_run_group(tests, NULL, NULL);
}
