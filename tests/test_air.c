/* test_air: the air backend — the host's pipe (frames, bounds, errors, crash and restart, the
 * device lock, the environment) over tests/fixtures/llms/pipe_echo, and every job kind through
 * the executor over the numpy SmolLM2 adapter (tests/fixtures/llms/smollm2_numpy). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "nb_air.h"
#include "nb_deployments.h"
#include "nb_executor.h"
#include "nb_jobpb.h"
#include "testutil.h"

static char llms[1000], lockpath[1000];

/* numpy and gguf (scripts/setup.sh installs both) in the python3 on PATH. */
static void require_python(void)
{
    tu_result r = tu_run("python3 -c 'import numpy, gguf'");
    int ok = r.code == 0;
    free(r.out);
    tu_require(ok, "python3 with numpy and gguf (scripts/setup.sh installs them)");
}

static void cfg_for(nb_air_cfg *c, const char *adapter)
{
    nb_air_cfg_default(c);
    snprintf(c->llms_dir, sizeof c->llms_dir, "%s", llms);
    snprintf(c->adapter, sizeof c->adapter, "%s", adapter);
    snprintf(c->lock, sizeof c->lock, "%s", lockpath);
    snprintf(c->host, sizeof c->host, "%s/engine/air_host.py", tu_env("NB_SRC", "."));
    c->backoff_ms = 100;
    c->grace_ms = 2000;
}

static int lock_is_held(void)
{
    int fd = open(lockpath, O_RDWR | O_CREAT, 0666);
    assert_true(fd >= 0);
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd); /* releases ours, if taken */
    return held;
}

/* ---- the pipe ------------------------------------------------------------------------------ */

static void test_pipe_steps(void **state)
{
    (void)state;
    require_python();
    nb_air_cfg c;
    cfg_for(&c, "pipe_echo.verify_adapter");
    char *env[] = {"PIPE_ECHO_VOCAB=1000", NULL};
    c.env = env;
    setenv("NPUBENCH_TEST_SECRET", "hush", 1);
    nb_air *h;
    nb_err err;
    nb_code rc = nb_air_open(&c, &h, &err);
    unsetenv("NPUBENCH_TEST_SECRET");
    if (rc)
        fail_msg("%s", err.msg);
    nb_air_info info;
    nb_air_info_get(h, &info);
    assert_true(info.pid > 0);
    assert_int_equal(info.setups, 1);
    assert_string_equal(info.runner, "pipe_echo");
    assert_string_equal(info.model_name, "none/echo");
    assert_true(lock_is_held());

    int32_t ids[3] = {5, 9, 41};
    nb_air_prefill_out p;
    assert_int_equal(nb_air_prefill(h, ids, 3, 0, &p, &err), NB_OK);
    assert_int_equal(p.vocab, 1000);
    assert_int_equal(p.top1, 42);
    assert_true(p.logits[42] == 2.0f && p.logits[0] == -1.0f);
    assert_true(p.host_ms >= 0 && p.call_ms >= p.host_ms);
    nb_air_step_out s;
    assert_int_equal(nb_air_decode_step(h, 42, 3, &s, &err), NB_OK);
    assert_int_equal(s.top1, 43);
    /* the worker's NPUBENCH_* variables never reach the host */
    assert_int_equal(nb_air_decode_step(h, 7, 0, &s, &err), NB_OK);
    assert_int_equal(s.top1, 0);

    /* the adapter raising: an error with its message, the host kept */
    int32_t bad[1] = {666};
    assert_int_equal(nb_air_prefill(h, bad, 1, 0, &p, &err), NB_EIO);
    assert_non_null(strstr(err.msg, "the adapter raised ValueError: prompt starts with 666"));
    /* a request the host refuses: past max_seq is refused here already */
    assert_int_equal(nb_air_decode_step(h, 1, c.max_seq, &s, &err), NB_EINVAL);
    nb_air_info_get(h, &info);
    pid_t pid = info.pid;
    assert_int_equal(info.crashes, 0);

    /* a frame of another protocol version: the host answers ERROR and exits; the next call
     * starts a new one */
    uint8_t frame[24] = {'N', 'B', 'A', 'H', 9, 0, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    char ans[512];
    if (nb_air_raw(h, frame, sizeof frame, ans, sizeof ans, &err))
        fail_msg("%s", err.msg);
    assert_non_null(strstr(ans, "255 "));
    assert_non_null(strstr(ans, "protocol version 9"));
    /* bad magic */
    assert_true(tu_poll(5000, kill(pid, 0) != 0 || 1));
    frame[0] = 'X';
    frame[4] = 1;
    if (nb_air_raw(h, frame, sizeof frame, ans, sizeof ans, &err))
        fail_msg("%s", err.msg);
    assert_non_null(strstr(ans, "bad magic"));

    /* kill -9 of the host: the call errors with its output's tail, the next one restarts */
    assert_int_equal(nb_air_prefill(h, ids, 3, 0, &p, &err), NB_OK);
    nb_air_info_get(h, &info);
    pid = info.pid;
    kill(pid, SIGKILL);
    assert_int_not_equal(nb_air_decode_step(h, 1, 3, &s, &err), NB_OK);
    assert_non_null(strstr(err.msg, "air host pid"));
    assert_non_null(strstr(err.msg, "killed by signal 9"));
    assert_false(lock_is_held()); /* the dead host's lock is given back */
    assert_int_equal(nb_air_prefill(h, ids, 3, 0, &p, &err), NB_OK);
    nb_air_info_get(h, &info);
    assert_int_not_equal(info.pid, pid);
    assert_true(info.setups >= 3);
    assert_true(info.crashes >= 1);
    assert_true(lock_is_held());

    /* drain gives the lock and the host up; the next call takes both again */
    nb_air_drain(h);
    assert_false(lock_is_held());
    nb_air_info_get(h, &info);
    assert_int_equal(info.pid, 0);
    assert_int_equal(nb_air_decode_step(h, 2, 0, &s, &err), NB_OK);
    assert_true(lock_is_held());
    nb_air_close(h);
    assert_false(lock_is_held());
}

/* A host whose answer is over max_frame is dropped, not read; a missing adapter is a setup
 * error with Python's message; another holder of the lock makes the start wait, then fail. */
static void test_pipe_bounds_and_lock(void **state)
{
    (void)state;
    require_python();
    nb_air_cfg c;
    cfg_for(&c, "pipe_echo.verify_adapter");
    c.max_frame = 1 << 20; /* 128256 floats do not fit */
    char *env[] = {"PIPE_ECHO_VOCAB=300000", NULL};
    c.env = env;
    nb_air *h;
    nb_err err;
    if (nb_air_open(&c, &h, &err))
        fail_msg("%s", err.msg);
    int32_t ids[1] = {1};
    nb_air_prefill_out p;
    assert_int_equal(nb_air_prefill(h, ids, 1, 0, &p, &err), NB_EIO);
    assert_non_null(strstr(err.msg, "over the bounds"));
    nb_air_close(h);

    cfg_for(&c, "no_such_model.verify_adapter");
    assert_int_not_equal(nb_air_open(&c, &h, &err), NB_OK);
    assert_non_null(strstr(err.msg, "No module named 'no_such_model'"));
    assert_false(lock_is_held());

    int fd = open(lockpath, O_RDWR | O_CREAT, 0666);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0); /* a hand-run `make verify` */
    cfg_for(&c, "pipe_echo.verify_adapter");
    c.lock_wait_ms = 300;
    double t0 = tu_now_ms();
    assert_int_equal(nb_air_open(&c, &h, &err), NB_EUNAVAIL);
    assert_true(tu_now_ms() - t0 >= 290);
    assert_non_null(strstr(err.msg, "still held by another process"));
    close(fd);
}

static void test_cfg_parse(void **state)
{
    (void)state;
    const char *json =
        "[{\"name\": \"a\", \"model\": \"m.gguf\", \"backend\": \"air\", \"air\": {\"llms_dir\": "
        "\"/x/llms\", \"adapter\": \"llama32_1b.verify_adapter\", \"model\": \"instruct\", "
        "\"python\": \"/opt/venv/bin/python\", \"env\": {\"XRT_HACK\": \"1\"}, \"lock\": \"\", "
        "\"step_timeout_s\": 30}}]";
    nb_deployment *d;
    int n;
    nb_err err;
    if (nb_deployments_parse(json, strlen(json), "deployments.json", &d, &n, &err))
        fail_msg("%s", err.msg);
    assert_non_null(d[0].air);
    assert_string_equal(d[0].air->adapter, "llama32_1b.verify_adapter");
    assert_string_equal(d[0].air->python, "/opt/venv/bin/python");
    assert_string_equal(d[0].air->env[0], "XRT_HACK=1");
    assert_string_equal(d[0].air->lock, "");
    assert_int_equal(d[0].air->step_timeout_ms, 30000);
    assert_int_equal(d[0].air->max_seq, 2048);
    nb_deployments_free(d, n);
    struct { const char *json, *want; } bad[] = {
        {"[{\"model\": \"m\", \"backend\": \"air\"}]", "deployments[0].air: required for backend \"air\""},
        {"[{\"model\": \"m\", \"air\": {}}]", "deployments[0].air: only for backend \"air\""},
        {"[{\"model\": \"m\", \"backend\": \"air\", \"air\": {\"adapter\": \"a.b\"}}]",
         "deployments[0].air.llms_dir: required"},
        {"[{\"model\": \"m\", \"backend\": \"air\", \"air\": {\"llms_dir\": \"x\", \"adapter\": "
         "\"a;rm\"}}]", "deployments[0].air.adapter 'a;rm': expected a dotted module path"},
        {"[{\"model\": \"m\", \"backend\": \"air\", \"air\": {\"llms_dir\": \"x\", \"adapter\": "
         "\"a\", \"env\": {\"NPUBENCH_TOKEN\": \"t\"}}}]", "env.NPUBENCH_TOKEN: NPUBENCH_* variables"},
        {"[{\"model\": \"m\", \"backend\": \"air\", \"air\": {\"llms_dir\": \"x\", \"adapter\": "
         "\"a\", \"max_seq\": 0}}]", "deployments[0].air.max_seq: must be an integer 1..1048576, got 0"},
        {"[{\"model\": \"m\", \"backend\": \"air\", \"air\": {\"llms_dir\": \"x\", \"adapter\": "
         "\"a\", \"colour\": 1}}]", "air.colour: unknown key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(nb_deployments_parse(bad[i].json, strlen(bad[i].json), "deployments.json",
                                              &d, &n, &err), NB_EINVAL);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("expected '%s' in: %s", bad[i].want, err.msg);
    }
}

/* `npubench air scan --air DIR` (issue 25) writes air entries this parser takes: every entry
 * of its output over the mlir-air stand-in tree parses, and its air entries carry an adapter. */
static void test_scan_output_parses(void **state)
{
    (void)state;
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "'%s' air scan '%s/tests/fixtures/mlir-air/llms' --air /data/hf "
             "--python /opt/mlir-air/bin/python3 2>/dev/null",
             tu_env("NB_BIN", "npubench"), tu_env("NB_SRC", "."));
    tu_result r = tu_run(cmd);
    tu_require(r.code == 0 && r.out, "npubench air scan (NB_BIN=%s)", tu_env("NB_BIN", "npubench"));
    nb_deployment *d;
    int n;
    nb_err err;
    if (nb_deployments_parse(r.out, strlen(r.out), "air scan", &d, &n, &err))
        fail_msg("%s", err.msg);
    int airs = 0;
    for (int i = 0; i < n; i++)
        if (d[i].air) {
            airs++;
            assert_non_null(strstr(d[i].air->adapter, ".verify_adapter"));
            assert_string_equal(d[i].air->python, "/opt/mlir-air/bin/python3");
            assert_int_equal(strncmp(d[i].model, "/data/hf/", 9), 0);
        }
    assert_true(airs > 0);
    nb_deployments_free(d, n);
    free(r.out);
}

/* ---- jobs through the executor -------------------------------------------------------------- */

typedef struct job_ctx {
    int kill_after;   /* progress calls before the host is killed (-1 never) */
    int cancel_after; /* progress calls before cancel answers yes (-1 never) */
    int calls;
} job_ctx;

/* The pid of this process's air host child (python running air_host.py), 0 when none. */
static pid_t host_pid(void)
{
    return tu_child_running(getpid(), "air_host.py");
}

static void on_progress(void *u, int done, int total, const char *msg)
{
    job_ctx *j = u;
    (void)done;
    (void)total;
    (void)msg;
    if (++j->calls == j->kill_after) {
        pid_t p = host_pid();
        if (p > 0)
            kill(p, SIGKILL);
    }
}

static int is_cancelled(void *u)
{
    job_ctx *j = u;
    return j->cancel_after >= 0 && j->calls >= j->cancel_after;
}

/* An executor over one air deployment of the numpy SmolLM2 with env (NULL-terminated). */
static nb_executor *air_executor_with(const char *const *env, const char *lock, const char *keys,
                                      char *tmp);

static nb_executor *air_executor(const char *const *env, const char *lock, char *tmp)
{
    return air_executor_with(env, lock, "\"step_timeout_s\": 60", tmp);
}

/* The same with other keys of the "air" object (keys: "k": v, ...). */
static nb_executor *air_executor_with(const char *const *env, const char *lock, const char *keys,
                                      char *tmp)
{
    char json[8192], envs[1024] = "";
    for (int i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        size_t o = strlen(envs);
        snprintf(envs + o, sizeof envs - o, "%s\"%.*s\": \"%s\"", i ? ", " : "",
                 (int)(eq - env[i]), env[i], eq + 1);
    }
    int w = snprintf(json, sizeof json,
             "[{\"name\": \"smol-air\", \"model\": \"%s\", \"backend\": \"air\", \"air\": {"
             "\"llms_dir\": \"%s\", \"adapter\": \"smollm2_numpy.verify_adapter\", \"host\": "
             "\"%s/engine/air_host.py\", \"lock\": \"%s\", \"grace_s\": 2, %s, \"lock_wait_s\": 20, "
             "\"env\": {\"OMP_NUM_THREADS\": \"1\", \"OPENBLAS_NUM_THREADS\": \"1\"%s%s}}}]",
             tu_model(), llms, tu_env("NB_SRC", "."), lock, keys, envs[0] ? ", " : "", envs);
    assert_true(w > 0 && (size_t)w < sizeof json); /* a cut file would test another one */
    nb_deployment *deps;
    int n;
    nb_err err;
    if (nb_deployments_parse(json, strlen(json), "t", &deps, &n, &err))
        fail_msg("%s", err.msg);
    nb_executor_opts o = {.deployments = deps, .n_deployments = n, .rundir = tmp};
    nb_executor *c;
    if (nb_executor_new(&o, &c, &err))
        fail_msg("%s", err.msg);
    nb_deployments_free(deps, n);
    return c;
}

static Npubench__JobResult *run_job(nb_executor *c, int kind, int max_prompts, int n_tokens,
                                    job_ctx *jc, nb_code want)
{
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    sel.backend = (char *)"air";
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    s.kind = kind;
    s.selector = &sel;
    s.max_prompts = max_prompts;
    s.n_tokens = n_tokens;
    job_ctx none = {-1, -1, 0};
    if (!jc)
        jc = &none;
    nb_executor_hooks h = {.progress = on_progress, .cancelled = is_cancelled, .user = jc};
    Npubench__JobResult *res;
    nb_err err;
    nb_code rc = nb_executor_run(c, &s, 1, &h, &res, &err);
    if (rc != want)
        fail_msg("job kind %d: code %d, expected %d: %s\n%s", kind, rc, want,
                 rc ? err.msg : "", res && res->log ? res->log : "");
    return res;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* Verify PASS against the committed HF trace; five jobs in a row on one host (setup once, the
 * same host pid); run and profile metrics; diagnosis from the adapter's layer_intermediates. */
static void test_jobs_on_one_host(void **state)
{
    (void)state;
    require_python();
    tu_require_model();
    char *tmp = tu_tmpdir();
    nb_executor *c = air_executor(NULL, lockpath, tmp);
    Npubench__JobResult *r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 2, 32, NULL, NB_OK);
    if (r->outcome != NPUBENCH__OUTCOME__PASS)
        fail_msg("verify: %s", r->log);
    assert_int_equal(r->n_gates, 2);
    assert_non_null(strstr(r->log, "set up "));
    assert_int_equal(r->gates[0]->n_device_tokens, 32);
    pid_t pid = host_pid();
    assert_true(pid > 0);
    assert_true(lock_is_held());
    nb_jobpb_free(r);
    int kinds[4] = {NPUBENCH__JOB_KIND__RUN, NPUBENCH__JOB_KIND__PROFILE,
                    NPUBENCH__JOB_KIND__VERIFY, NPUBENCH__JOB_KIND__DIAGNOSIS};
    for (int i = 0; i < 4; i++) {
        r = run_job(c, kinds[i], 1, kinds[i] == NPUBENCH__JOB_KIND__VERIFY ? 4 : 8, NULL, NB_OK);
        assert_int_equal(count(r->log, "set up "), 0);
        assert_int_equal(host_pid(), pid);
        if (kinds[i] == NPUBENCH__JOB_KIND__RUN || kinds[i] == NPUBENCH__JOB_KIND__PROFILE) {
            assert_true(r->metrics->tps > 0);
            assert_true(r->metrics->ttft_ms > 0);
            assert_true(r->metrics->decode_ms_per_token > 0);
        }
        if (kinds[i] == NPUBENCH__JOB_KIND__DIAGNOSIS) {
            /* fp32 numpy against HF bf16 at every layer: close, never equal */
            assert_true(r->n_cosines >= 30);
            for (size_t l = 0; l < r->n_cosines; l++)
                if (!(r->cosines[l]->min > 0.95))
                    fail_msg("diagnosis layer %zu: min cosine %g\n%s", l, r->cosines[l]->min,
                             r->log);
        }
        nb_jobpb_free(r);
    }
    nb_executor_cache_stats st;
    nb_executor_stats(c, &st);
    assert_int_equal(st.setups, 1);
    nb_executor_free(c);
    assert_int_equal(host_pid(), 0);
    assert_false(lock_is_held());
    tu_rmrf(tmp);
}

/* Each fault FAILs and localizes where it was put. */
static void test_faults_localize(void **state)
{
    (void)state;
    require_python();
    tu_require_model();
    char *tmp = tu_tmpdir();
    const char *kv[] = {"SMOLLM2_KV_OFFSET=2", NULL};
    nb_executor *c = air_executor(kv, lockpath, tmp);
    Npubench__JobResult *r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 8, NULL, NB_OK);
    assert_int_equal(r->outcome, NPUBENCH__OUTCOME__FAIL);
    Npubench__Localization *l = r->gates[0]->localization;
    assert_non_null(l);
    if (strcmp(l->verdict, "kv_cache"))
        fail_msg("kv fault: verdict %s: %s", l->verdict, l->summary);
    assert_int_equal(l->kv, 2);
    nb_jobpb_free(r);
    nb_executor_free(c);

    const char *mlp[] = {"SMOLLM2_MLP_LAYER=5", "SMOLLM2_MLP_SCALE=10", NULL};
    c = air_executor(mlp, lockpath, tmp);
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 8, NULL, NB_OK);
    assert_int_equal(r->outcome, NPUBENCH__OUTCOME__FAIL);
    l = r->gates[0]->localization;
    assert_non_null(l);
    if (strcmp(l->verdict, "layer") || l->first_layer != 5 || strcmp(l->sub_block, "mlp"))
        fail_msg("mlp fault: verdict %s layer %d %s: %s", l->verdict, l->first_layer,
                 l->sub_block, l->summary);
    assert_int_equal(l->kv, 1);
    nb_jobpb_free(r);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

/* The adapter's own tokenizer must give the trace's prompt ids: the same ids pass, a
 * tokenizer one id off stops the verify before any step, naming it. */
static void test_adapter_tokenizer(void **state)
{
    (void)state;
    require_python();
    tu_require_model();
    char *tmp = tu_tmpdir(), trace[1200];
    snprintf(trace, sizeof trace, "SMOLLM2_TOKENIZER_TRACE=%s/verify/references/"
             "b179c9523d0e6a0f-f31be4262e898413.json", tu_env("NB_SRC", "."));
    const char *same[] = {trace, NULL}, *off[] = {trace, "SMOLLM2_TOKENIZER_SHIFT=1", NULL};
    nb_executor *c = air_executor(same, lockpath, tmp);
    Npubench__JobResult *r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 2, NULL, NB_OK);
    assert_int_equal(r->outcome, NPUBENCH__OUTCOME__PASS);
    nb_jobpb_free(r);
    nb_executor_free(c);
    c = air_executor(off, lockpath, tmp);
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 2, NULL, NB_EMISMATCH);
    if (!strstr(r->status_message, "prompt 0: the backend's tokenizer gives 7 ids, the "
                                   "reference used 7 (first difference at position 6)"))
        fail_msg("%s", r->status_message);
    nb_jobpb_free(r);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

/* A host killed mid-job (kill -9, and the adapter's own crash switch): the job errors with the
 * host's output tail, the next job restarts it and passes; cancel stops between steps. */
static void test_crash_restart_cancel(void **state)
{
    (void)state;
    require_python();
    tu_require_model();
    char *tmp = tu_tmpdir(), once[1300], crash[1400];
    snprintf(once, sizeof once, "FAULT_ONCE=%s/crashed", tmp);
    snprintf(crash, sizeof crash, "SMOLLM2_%s", once);
    const char *env[] = {"SMOLLM2_CRASH_AT_STEP=3", crash, NULL};
    nb_executor *c = air_executor(env, lockpath, tmp);
    Npubench__JobResult *r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 8, NULL, NB_EIO);
    assert_int_equal(r->outcome, NPUBENCH__OUTCOME__ERROR);
    if (!strstr(r->status_message, "crash switch at decode step 3") ||
        !strstr(r->status_message, "killed by signal 9"))
        fail_msg("no stderr tail in: %s", r->status_message);
    /* what the host printed is in the job's log too */
    assert_non_null(strstr(r->log, "| smollm2_numpy: crash switch at decode step 3"));
    nb_jobpb_free(r);
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 8, NULL, NB_OK);
    assert_int_equal(r->outcome, NPUBENCH__OUTCOME__PASS);
    nb_jobpb_free(r);

    /* kill -9 from outside after the first prompt */
    pid_t before = host_pid();
    job_ctx k = {1, -1, 0};
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 2, 4, &k, NB_EIO);
    assert_non_null(strstr(r->status_message, "killed by signal 9"));
    nb_jobpb_free(r);
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 2, 4, NULL, NB_OK);
    assert_int_equal(r->outcome, NPUBENCH__OUTCOME__PASS);
    assert_true(host_pid() != before);
    nb_jobpb_free(r);

    /* cancel after the first prompt: stops there, the host stays */
    pid_t pid = host_pid();
    job_ctx cc = {-1, 1, 0};
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 2, 4, &cc, NB_ECANCELED);
    nb_jobpb_free(r);
    assert_int_equal(host_pid(), pid);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

/* A slow setup stays out of the timed region; a step that hangs past step_timeout_s is a
 * DEADLINE error with the host's tail, and the next job runs on a new host. */
static void test_slow_setup_and_hang(void **state)
{
    (void)state;
    require_python();
    tu_require_model();
    char *tmp = tu_tmpdir(), once[1300];
    snprintf(once, sizeof once, "SMOLLM2_FAULT_ONCE=%s/hung", tmp);
    const char *env[] = {"SMOLLM2_SLOW_SETUP_S=1.5", "SMOLLM2_HANG_AT_STEP=2", once, NULL};
    nb_executor *c = air_executor_with(env, lockpath, "\"step_timeout_s\": 3", tmp);
    Npubench__JobResult *r = run_job(c, NPUBENCH__JOB_KIND__RUN, 1, 1, NULL, NB_OK);
    assert_true(r->metrics->ttft_ms > 0 && r->metrics->ttft_ms < 1500);
    const char *set = strstr(r->log, "set up ");
    assert_non_null(set);
    double ms = atof(strstr(set, " in ") + 4);
    if (!(ms >= 1500))
        fail_msg("setup %.1f ms, the adapter slept 1500: %s", ms, r->log);
    nb_jobpb_free(r);
    double t0 = tu_now_ms();
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 4, NULL, NB_ETIMEOUT);
    assert_true(tu_now_ms() - t0 < 30000);
    if (!strstr(r->status_message, "hang switch at decode step 2"))
        fail_msg("no tail in: %s", r->status_message);
    nb_jobpb_free(r);
    r = run_job(c, NPUBENCH__JOB_KIND__VERIFY, 1, 4, NULL, NB_OK);
    assert_int_equal(r->outcome, NPUBENCH__OUTCOME__PASS);
    nb_jobpb_free(r);
    nb_executor_free(c);
    tu_rmrf(tmp);
}

/* verify-full over two prompt ranges on two air hosts gives the records of one run. */
static void test_shards_equal_whole(void **state)
{
    (void)state;
    require_python();
    tu_require_model();
    char *tmp = tu_tmpdir();
    nb_executor *one = air_executor(NULL, "", tmp), *two = air_executor(NULL, "", tmp);
    Npubench__JobResult *whole = run_job(one, NPUBENCH__JOB_KIND__VERIFY_FULL, 4, 6, NULL, NB_OK);
    Npubench__JobResult *part[2];
    for (int i = 0; i < 2; i++) {
        Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
        sel.backend = (char *)"air";
        Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
        Npubench__Shard sh = NPUBENCH__SHARD__INIT;
        sh.prompt_begin = 2 * i;
        sh.prompt_end = 2 * i + 2;
        s.kind = NPUBENCH__JOB_KIND__VERIFY_FULL;
        s.selector = &sel;
        s.shard = &sh;
        s.max_prompts = 4;
        s.n_tokens = 6;
        nb_err err;
        if (nb_executor_run(i ? two : one, &s, 2, NULL, &part[i], &err))
            fail_msg("shard %d: %s", i, err.msg);
    }
    assert_int_equal(whole->n_gates, 4);
    for (int g = 0; g < 4; g++) {
        const Npubench__GateRecord *a = whole->gates[g], *b = part[g / 2]->gates[g % 2];
        assert_int_equal(a->index, b->index);
        assert_int_equal(a->status, b->status);
        assert_int_equal(a->n_device_tokens, b->n_device_tokens);
        assert_memory_equal(a->device_tokens, b->device_tokens,
                            sizeof(int32_t) * a->n_device_tokens);
    }
    nb_jobpb_free(whole);
    nb_jobpb_free(part[0]);
    nb_jobpb_free(part[1]);
    nb_executor_free(one);
    nb_executor_free(two);
    tu_rmrf(tmp);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(llms, sizeof llms, "%s/tests/fixtures/llms", tu_env("NB_SRC", "."));
    /* each run its own lock: never the real /tmp/mlir-air-npu.lock of a board */
    snprintf(lockpath, sizeof lockpath, "%s/mlir-air-npu.lock",
             tu_env("XDG_RUNTIME_DIR", "/tmp"));
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cfg_parse),
        cmocka_unit_test(test_scan_output_parses),
        cmocka_unit_test(test_pipe_steps),
        cmocka_unit_test(test_pipe_bounds_and_lock),
        cmocka_unit_test(test_jobs_on_one_host),
        cmocka_unit_test(test_faults_localize),
        cmocka_unit_test(test_adapter_tokenizer),
        cmocka_unit_test(test_crash_restart_cancel),
        cmocka_unit_test(test_slow_setup_and_hang),
        cmocka_unit_test(test_shards_equal_whole),
    };
    return tu_run_group(tests, group_setup, NULL);
}
