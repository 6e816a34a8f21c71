/* test_service_lab: a real coordinator and 2-3 real `npubench worker` processes on
 * loopback (ipc and tcp), jobs submitted through the CLI, results checked in the SQLite
 * file; faults: a worker and the coordinator killed -9 mid-job, a wrong secret, a model
 * nobody serves, out-of-range fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/stat.h>

#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nb_time.h"
#include "testutil.h"

static char cmd[16384];

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *bin(void)
{
    return tu_env("NB_BIN", "npubench");
}

static void kill9(pid_t pid)
{
    tu_kill(pid);
}

/* Runs `npubench args` in the foreground. */
static tu_result cli(const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s", tu_env("NB_SRC", "."), bin(), args);
    tu_result r = tu_run(cmd);
    print_message("$ npubench %s  [exit %d]\n%s", args, r.code, r.out ? r.out : "");
    return r;
}

static int64_t db_int(const char *db, const char *fmt, ...)
{
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    sqlite3 *h;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(h));
    int64_t v = -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* Waits until `npubench workers` lists n alive workers. */
static void wait_workers(const char *url, int n)
{
    for (int i = 0; i < 300; i++) {
        snprintf(cmd, sizeof cmd, "'%s' workers --coordinator '%s' | grep -c ' alive '", bin(),
                 url);
        tu_result r = tu_run(cmd);
        int got = r.out ? atoi(r.out) : 0;
        free(r.out);
        if (got >= n)
            return;
        sleep_ms(100);
    }
    fail_msg("fewer than %d workers registered at %s", n, url);
}

/* Polls `npubench job ID` until it reports state (or 120 s pass). */
static char *wait_state(const char *url, long long id, const char *state)
{
    char want[64];
    snprintf(want, sizeof want, " %s\n", state);
    for (int i = 0; i < 1200; i++) {
        snprintf(cmd, sizeof cmd, "'%s' job %lld --coordinator '%s'", bin(), id, url);
        tu_result r = tu_run(cmd);
        /* the first line: "job 12: verify-full running" */
        const char *nl = r.out ? strchr(r.out, '\n') : NULL;
        if (nl && (size_t)(nl - r.out) + 1 >= strlen(want) &&
            !strncmp(nl + 1 - strlen(want), want, strlen(want)))
            return r.out;
        free(r.out);
        sleep_ms(100);
    }
    fail_msg("job %lld never reached %s", id, state);
    return NULL;
}

static long long submitted_id(const char *out)
{
    const char *p = out ? strstr(out, "job ") : NULL;
    return p ? atoll(p + 4) : -1;
}


/* No sanitizer report in any process's log (they were killed, so leaks are not
 * checked there, but memory errors and UB would have been printed). */
static void logs_clean(void)
{
    snprintf(cmd, sizeof cmd,
             "cat '%s'/*.log | grep -c -e AddressSanitizer -e 'runtime error' -e 'LeakSanitizer'",
             tu_group_tmp());
    tu_result r = tu_run(cmd);
    int n = r.out ? atoi(r.out) : 0;
    if (n) {
        snprintf(cmd, sizeof cmd, "cat '%s'/*.log", tu_group_tmp());
        tu_result all = tu_run(cmd);
        print_message("%s", all.out ? all.out : "");
        free(all.out);
    }
    free(r.out);
    assert_int_equal(n, 0);
}

#define WORKER_ARGS "worker --coordinator '%s' --board %s --device cpu:%d --threads 1 " \
                    "--heartbeat-ms 200 --tag strix --quiet"
#define COORD_ARGS "coordinator --listen '%s' --db '%s' --heartbeat-ms 200 --stale-ms 800 " \
                   "--gone-ms 2000 --lease-ms 4000"

/* ipc: verify-full sharded over two workers, a profile matrix, queued reasons,
 * validation, cancel. */
static void test_lab_ipc(void **s)
{
    (void)s;
    tu_require_model();
    char url[1200], db[1200];
    snprintf(url, sizeof url, "ipc://%s/c.sock", tu_group_tmp());
    snprintf(db, sizeof db, "%s/ipc.db", tu_group_tmp());
    pid_t c = tu_spawn("coord-ipc.log", COORD_ARGS, url, db);
    pid_t w0 = tu_spawn("w0.log", WORKER_ARGS, url, "lab-a", 10);
    pid_t w1 = tu_spawn("w1.log", WORKER_ARGS, url, "lab-b", 11);
    wait_workers(url, 2);

    tu_result r = cli("submit verify-full --model instruct --n-tokens 32 --wait --coordinator "
                      "'%s'",
                      url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[verify] PASS (8/8 prompts pass)"));
    assert_non_null(strstr(r.out, "2 shards"));
    /* the group has a token line of its own, a running shard's (it had only the summed
     * prompts: the coordinator never looked at its children's tokens) */
    const char *gtl = strstr(r.out, "] running verify-full: prompt ");
    if (!gtl)
        print_message("%s", r.out);
    assert_non_null(gtl);
    int gp, gn, gt, gtn;
    assert_int_equal(sscanf(gtl, "] running verify-full: prompt %d/%d, token %d/%d", &gp, &gn,
                            &gt, &gtn), 4);
    assert_true(gp >= 1 && gp <= 8 && gn == 8 && gt >= 1 && gt <= 32 && gtn == 32);
    long long g = submitted_id(r.out);
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM jobs WHERE parent_id = %lld", g), 2);
    /* stored on each real board its shards ran on, never on "lab-a+lab-b" */
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", g), 2);
    assert_int_equal(db_int(db, "SELECT count(DISTINCT d.board) FROM runs r JOIN deployments d "
                                "ON d.id = r.deployment_id WHERE r.job_id = %lld AND d.board IN "
                                "('lab-a', 'lab-b')", g), 2);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id IN (SELECT id FROM "
                                "jobs WHERE parent_id = %lld)", g), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT min(id) "
                                "FROM runs WHERE job_id = %lld) AND status = 'PASS'", g), 8);

    r = cli("submit profile --model instruct --tag strix --matrix --n-tokens 4 --reps 2 --wait "
            "--reports '%s/prof' --coordinator '%s'", tu_group_tmp(), url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "== lab-a"));
    assert_non_null(strstr(r.out, "== lab-b"));
    assert_non_null(strstr(r.out, "Tokens/second:"));
    /* a profile report per board, written by the CLI as locally, apart though same-second */
    const char *rep1 = strstr(r.out, "Report: ");
    assert_non_null(rep1);
    assert_non_null(strstr(rep1 + 1, "Report: "));
    snprintf(cmd, sizeof cmd, "ls '%s/prof' | grep -c '^profile_SmolLM2-135M-Instruct_.*\\.json$'",
             tu_group_tmp());
    tu_result ls = tu_run(cmd);
    assert_string_equal(ls.out, "2\n");
    free(ls.out);
    /* each cell said as it finished (on stderr, before the tables): board x model x kind */
    for (int b = 0; b < 2; b++) {
        char cell[128];
        snprintf(cell, sizeof cell, "] lab-%c × SmolLM2-135M-Instruct × profile: pass, TTFT ",
                 'a' + b);
        assert_non_null(strstr(r.out, cell));
    }
    free(r.out);
    /* the nightly: every model x kind cell of every board, as it finishes */
    r = cli("submit matrix --models instruct --boards strix --kinds run,verify --n-tokens 2 "
            "--reps 1 --max-prompts 1 --timeout 300 --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    for (int b = 0; b < 2; b++) {
        char cell[128];
        snprintf(cell, sizeof cell, "] lab-%c × SmolLM2-135M-Instruct × run: pass, TTFT ",
                 'a' + b);
        assert_non_null(strstr(r.out, cell));
        snprintf(cell, sizeof cell, "] lab-%c × SmolLM2-135M-Instruct × verify: pass, gate 1/1 "
                 "prompts pass", 'a' + b);
        assert_non_null(strstr(r.out, cell));
    }
    /* before the summary table */
    assert_true(strstr(r.out, "] lab-a × ") < strstr(r.out, "MODEL"));
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(DISTINCT d.board) FROM runs r JOIN deployments d "
                                "ON d.id = r.deployment_id WHERE r.kind = 'profile'"), 2);
    assert_int_equal(db_int(db, "SELECT count(*) FROM samples s JOIN runs r ON r.id = s.run_id "
                                "WHERE r.kind = 'profile'"), 4);
    assert_true(db_int(db, "SELECT count(*) FROM profile_kernels") > 0);

    /* --wait shows the tokens inside a repetition, coalesced by the worker (every 250 ms
     * at most), so a report lands inside one of these two 48-token repetitions */
    r = cli("submit run --model instruct --board lab-a --n-tokens 48 --reps 2 --wait "
            "--coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    const char *tl = strstr(r.out, "] running run: repetition ");
    if (!tl)
        print_message("%s", r.out);
    assert_non_null(tl);
    int rep, tok, ntok;
    assert_int_equal(sscanf(tl, "] running run: repetition %d/2, token %d/%d", &rep, &tok, &ntok),
                     3);
    assert_true(rep >= 1 && rep <= 2 && tok >= 1 && tok <= 48 && ntok == 48);
    free(r.out);

    /* a local command sent to the lab prints what it prints locally */
    r = cli("verify --n-tokens 4 --reports '%s/rep' --coordinator '%s'", tu_group_tmp(), url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[verify] PASS (2/2 prompts pass)"));
    assert_non_null(strstr(r.out, "Report: "));
    free(r.out);
    /* the trace the coordinator leased, named as it lies in the tree, not the worker's copy */
    snprintf(cmd, sizeof cmd, "grep -h '\"trace\"' '%s'/rep/verify_*.json", tu_group_tmp());
    tu_result tr = tu_run(cmd);
    assert_non_null(tr.out);
    assert_non_null(strstr(tr.out, "\"trace\":\"verify/references/b179c9523d0e6a0f-"));
    free(tr.out);

    /* history and comparison over what just ran */
    r = cli("history --model instruct --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "verify-full"));
    assert_non_null(strstr(r.out, "profile"));
    free(r.out);
    r = cli("history --model instruct --metric tps --json --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"tps\""));
    free(r.out);

    /* no registered worker serves this model: refused at once (exit 3), naming what is */
    r = cli("submit verify --model nosuch.gguf --coordinator '%s'", url);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.out, "selector model 'nosuch.gguf': no registered worker serves "
                                  "it, so it would wait until it expires; served: instruct"));
    free(r.out);
    /* served, but by no live worker of that board: it waits, and says why */
    r = cli("submit verify --model instruct --board nowhere --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    long long q = submitted_id(r.out);
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' jobs --coordinator '%s' | grep 'nowhere' | "
             "grep -q 'no live worker can run it'", bin(), url);
    assert_true(tu_poll(10000, system(cmd) == 0)); /* reasons are refreshed once a second */
    r = cli("cancel %lld --coordinator '%s'", q, url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "cancelled"));
    free(r.out);

    /* out-of-range fields are refused, naming the field; nothing is queued */
    int64_t before = db_int(db, "SELECT count(*) FROM jobs");
    r = cli("submit run --n-tokens 5000 --coordinator '%s'", url);
    assert_int_equal(r.code, 2);
    /* the CLI takes the job's own limit, so the refusal comes before any RPC */
    assert_non_null(strstr(r.out, "--n-tokens: 5000 is outside the allowed range 0..4096"));
    free(r.out);
    r = cli("submit verify --k 99 --coordinator '%s'", url);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "k"));
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM jobs"), before);

    kill9(w0);
    kill9(w1);
    kill9(c);
    logs_clean();
}

/* An exec deployment's entry in a deployments file: the mlir-air stand-in script run the
 * way an mlir-air example's Makefile runs its inference script and verify runner. */
static size_t air_entry(char *buf, size_t cap, const char *model, const char *script,
                        const char *mode, const char *extra)
{
    char py[1200], rep[1200];
    snprintf(py, sizeof py, "\"python3\", \"%s/tests/fixtures/mlir-air/%s\"",
             tu_env("NB_SRC", "."), script);
    snprintf(rep, sizeof rep, "\"--report-dir\", \"%s/air-reports\"", tu_group_tmp());
    int n = snprintf(buf, cap,
                     "{\"model\": \"%s\", \"backend\": \"exec\", \"dtype\": \"bf16\", \"exec\": {"
                     "\"run\": [%s, \"run\", \"--n-tokens\", \"{n_tokens}\"],"
                     " \"profile\": [%s, \"profile\", \"--n-tokens\", \"{n_tokens}\"],"
                     " \"verify\": [%s, \"verify\", \"--max-prompts\", \"{max_prompts}\", %s],"
                     " \"verify_full\": [%s, \"verify\", %s],"
                     " \"diagnosis\": [%s, \"diagnosis\", \"--prompt\", \"{prompt}\", %s],"
                     " \"env\": {\"NB_AIR_MODE\": \"%s\"}%s}}",
                     model, py, py, py, rep, py, rep, py, rep, mode, extra);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

typedef struct air_dep {
    const char *model, *script, *mode, *extra;
} air_dep;

/* A deployments file of air_entry's under the group's tmp dir, its path into path. */
static void air_file(const char *name, const air_dep *deps, size_t n, char *path, size_t cap)
{
    static char file[65536];
    size_t len = (size_t)snprintf(file, sizeof file, "{\"deployments\": [");
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(file + len, sizeof file - len, "%s", i ? ", " : "");
        len += air_entry(file + len, sizeof file - len, deps[i].model, deps[i].script,
                         deps[i].mode, deps[i].extra);
    }
    snprintf(file + len, sizeof file - len, "]}");
    snprintf(path, cap, "%s/%s", tu_group_tmp(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(file, f);
    fclose(f);
}


/* `npubench ARGS --coordinator URL`: the exit code, every needle in the output, the output
 * (the caller frees). */
static char *expect_out(const char *url, int code, const char *args, const char *const *needles)
{
    tu_result r = cli("%s --coordinator '%s'", args, url);
    if (r.code != code)
        fail_msg("`npubench %s`: exit %d, expected %d:\n%s", args, r.code, code,
                 r.out ? r.out : "");
    for (; needles && *needles; needles++)
        if (!r.out || !strstr(r.out, *needles))
            fail_msg("`npubench %s`: no '%s' in:\n%s", args, *needles, r.out ? r.out : "");
    return r.out;
}

/* `npubench ARGS --coordinator URL` must exit with code and print every needle. */
static void expect_cli(const char *url, int code, const char *args, const char *const *needles)
{
    free(expect_out(url, code, args, needles));
}

/* Board health with real processes: a coordinator with health checks on, two boards whose
 * first deployment passes mlir-air's verify and crashes in it (exec stand-ins, no model).
 * Each check runs the worker's device probe and a 1-prompt verify; the failing board is
 * quarantined (a job pinned to it waits), the other takes jobs; `workers` shows both with
 * what the probe read; drain / undrain by board. */
static void test_lab_health(void **s)
{
    (void)s;
    static const air_dep good[] = {{"Llama-3.2-1B-Instruct", "llama32_1b.py", "pass", ""}};
    static const air_dep bad[] = {{"air-crash", "llama32_3b.py", "crash", ""}};
    char gpath[1200], bpath[1200], url[1200], db[1200];
    air_file("health-good.json", good, 1, gpath, sizeof gpath);
    air_file("health-bad.json", bad, 1, bpath, sizeof bpath);
    snprintf(url, sizeof url, "ipc://%s/health.sock", tu_group_tmp());
    snprintf(db, sizeof db, "%s/health.db", tu_group_tmp());
    pid_t c = tu_spawn("coord-health.log", COORD_ARGS " --health-interval 1h --health-retry 1h",
                    url, db);
    pid_t wg = tu_spawn("w-hg.log", WORKER_ARGS " --deployments '%s'", url, "hgood", 27, gpath);
    pid_t wb = tu_spawn("w-hb.log", WORKER_ARGS " --deployments '%s'", url, "hbad", 28, bpath);
    wait_workers(url, 2);
    const char *q = "SELECT count(*) FROM boards WHERE health = '%s'";
    assert_true(tu_poll(60000, db_int(db, q, "ok") == 1 && db_int(db, q, "failed") == 1));
    assert_int_equal(db_int(db, q, "ok"), 1);
    assert_int_equal(db_int(db, q, "failed"), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM boards WHERE board = '%s' AND health = "
                                "'failed' AND detail LIKE 'health check job %%: UNAVAILABLE: %%'",
                            "hbad"), 1);
    /* the check's log has the device probe; no history run for either check */
    /* (the worker's log lines are appended just after the result commits) */
    assert_true(tu_poll(10000, db_int(db, "SELECT count(*) FROM job_logs l JOIN jobs j ON "
                                          "j.id = l.job_id WHERE j.kind = 'health' AND l.text "
                                          "LIKE '%%device probe: driver %%kernels %%'") == 2));
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs"), 0);
    const char *listed[] = {"\"board\":\"hbad\"", "\"health\":\"failed\"",
                            "\"health\":\"ok\"", "\"kernel_path\":\"", "\"cpu_model\":\"",
                            "\"driver_version\":\"unknown\"", NULL};
    expect_cli(url, 0, "workers --json", listed);
    const char *table[] = {"HEALTH", " failed ", "hbad: last health check: health check job ",
                           "hgood: driver unknown, firmware unknown, XRT unknown, kernels ", NULL};
    expect_cli(url, 0, "workers", table);
    /* quarantined: a job for the failing board waits; the healthy board runs its own */
    char *out = expect_out(url, 0, "submit verify --model air-crash --board hbad --json", NULL);
    char *idp = strstr(out, "\"job_ids\":[");
    assert_non_null(idp);
    long long waiting = strtoll(idp + 11, NULL, 10);
    free(out);
    const char *pass[] = {"done: pass", NULL};
    expect_cli(url, 0, "submit verify --model Llama-3.2-1B-Instruct --board hgood --wait", pass);
    assert_int_equal(db_int(db, "SELECT count(*) FROM jobs WHERE id = %lld AND state = "
                                "'queued'", waiting), 1);
    /* and says why (the reasons are refreshed every second) */
    assert_true(tu_poll(10000, db_int(db, "SELECT count(*) FROM jobs WHERE id = %lld AND "
                                          "queued_reason LIKE '%%board hbad could run it but is "
                                          "quarantined (failed its health check)%%'",
                                      waiting) == 1));
    const char *drained[] = {"board hgood drained: 0 jobs still running there, no new ones",
                             NULL};
    expect_cli(url, 0, "workers drain hgood", drained);
    const char *undrained[] = {"board hgood undrained", NULL};
    expect_cli(url, 0, "workers undrain hgood", undrained);

    /* the nightly matrix in one command: model x board, one JUnit file, the worst exit */
    char junit[1300], args[2048];
    snprintf(junit, sizeof junit, "%s/matrix.xml", tu_group_tmp());
    snprintf(args, sizeof args, "submit matrix --models Llama-3.2-1B-Instruct --boards strix "
             "--kinds verify,profile --timeout 120 --junit '%s' --format csv", junit);
    const char *mx[] = {"MODEL,BOARD,GATE,TTFT ms,TPS,FLAGS,JOBS\n",
                        "\nLlama-3.2-1B-Instruct,hgood,pass 2/2,", NULL};
    out = expect_out(url, 0, args, mx);
    assert_null(strstr(out, "hbad")); /* it serves no Llama */
    free(out);
    snprintf(cmd, sizeof cmd, "xmllint --noout --schema '%s/tests/junit.xsd' '%s' 2>/dev/null "
             "&& grep -c '<testsuite ' '%s'", tu_env("NB_SRC", "."), junit, junit);
    tu_result x = tu_run(cmd);
    assert_int_equal(x.code, 0);
    assert_string_equal(x.out, "2\n"); /* the verify's and the profile's */
    free(x.out);
    /* a model only the quarantined board serves: no cell that would wait out --timeout
     * (it did, exit 5 after the whole deadline), the refusal at once, naming the board */
    const char *held[] = {"board hbad is quarantined (failed its health check)", NULL};
    double t0 = tu_now_ms();
    free(expect_out(url, 3, "submit matrix --models air-crash --boards strix --kinds verify "
                            "--timeout 60 --format csv", held));
    assert_true(tu_now_ms() - t0 < 30000);
    /* a health check by hand, awaited and printed (it was "job of unknown kind 6") */
    const char *health[] = {"[health] ", "done: pass", NULL};
    out = expect_out(url, 0, "submit health --board hgood --model Llama-3.2-1B-Instruct --wait",
                     health);
    long long hjob = strtoll(strstr(out, "job ") + 4, NULL, 10);
    free(out);
    snprintf(args, sizeof args, "job %lld --print", hjob);
    const char *printed[] = {"[health] PASS", NULL};
    expect_cli(url, 0, args, printed);
    kill9(wg);
    kill9(wb);
    kill9(c);
    logs_clean();
}

/* mlir-air through exec, every job kind through the CLI: a coordinator and one worker
 * serving the stand-ins of the five script families and the faults. No model needed. */
static void test_lab_exec(void **s)
{
    (void)s;
    static const air_dep deps[] = {
        {"Llama-3.2-1B-Instruct", "llama32_1b.py", "pass", ""},
        {"llama32-1b-q4nx", "llama32_1b_q4nx.py", "pass", ""},
        {"Llama-3.2-3B-Instruct", "llama32_3b.py", "pass", ""},
        {"Qwen2.5-0.5B-Instruct", "qwen25_0_5b.py", "pass", ""},
        {"SmolLM2-1.7B-Instruct", "smollm2_1_7b.py", "pass", ""},
        {"air-fail", "llama32_1b.py", "fail", ""},
        {"air-nometric", "llama32_1b_q4nx.py", "nometric", ""},
        {"air-crash", "llama32_3b.py", "crash", ""},
        {"air-hang", "qwen25_0_5b.py", "hang", ", \"timeout_s\": 5"},
    };
    char path[1200], url[1200], db[1200];
    air_file("air-deployments.json", deps, sizeof deps / sizeof deps[0], path, sizeof path);
    snprintf(url, sizeof url, "ipc://%s/air.sock", tu_group_tmp());
    snprintf(db, sizeof db, "%s/air.db", tu_group_tmp());
    pid_t c = tu_spawn("coord-air.log", COORD_ARGS, url, db);
    pid_t w = tu_spawn("w-air.log", WORKER_ARGS " --deployments '%s'", url, "npu-lab", 30, path);
    wait_workers(url, 1);

    /* verify: PASS exits 0, FAIL exits 1, both show the gate records */
    const char *pass_v[] = {"[verify] PASS (2/2 prompts pass)", "prompt 0: PASS  (all 32 steps",
                            "prompt 1: PASS  diverge at step 7: device 264 (ref rank 1) vs "
                            "reference 220",
                            NULL};
    expect_cli(url, 0, "submit verify --model Llama-3.2-1B-Instruct --wait", pass_v);
    const char *fail_v[] = {"[verify] FAIL (1/2 prompts pass)",
                            "prompt 1: FAIL  diverge at step 3: device 9999",
                            "test chose 9999 but it is not in ref top-5", NULL};
    expect_cli(url, 1, "submit verify --model air-fail --wait", fail_v);
    long long fail_job = db_int(db, "SELECT max(id) FROM jobs");
    char args[256];
    snprintf(args, sizeof args, "job %lld --print", fail_job);
    expect_cli(url, 1, args, fail_v);
    assert_int_equal(db_int(db, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT id "
                                "FROM runs WHERE job_id = %lld) AND status = 'FAIL'", fail_job), 1);

    /* verify-full: the runner takes no prompt range, so one job even when shards are asked */
    const char *full[] = {"[verify] PASS (8/8 prompts pass)", NULL};
    tu_result r = cli("submit verify-full --model Llama-3.2-3B-Instruct --shards 2 --wait "
                      "--coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, full[0]));
    assert_null(strstr(r.out, "shards"));
    long long g = submitted_id(r.out);
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM jobs WHERE parent_id = %lld", g), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT id "
                                "FROM runs WHERE job_id = %lld)", g), 8);

    /* run / profile: extract_perf's numbers, stored as measured */
    const char *run_3b[] = {"Tokens/second: 8.41", NULL};
    expect_cli(url, 0, "submit run --model Llama-3.2-3B-Instruct --n-tokens 20 --reps 2 --wait",
               run_3b);
    const char *prof_q4[] = {"Tokens/second: 64.12", "0.412", NULL};
    expect_cli(url, 0, "submit profile --model llama32-1b-q4nx --n-tokens 20 --wait", prof_q4);
    assert_int_equal(db_int(db, "SELECT CAST(round(ttft_ms) AS INTEGER) FROM runs WHERE kind = "
                                "'profile' ORDER BY id DESC LIMIT 1"), 412);
    assert_int_equal(db_int(db, "SELECT context_len FROM runs WHERE kind = 'profile' ORDER BY "
                                "id DESC LIMIT 1"), 2048);
    const char *prof_1b[] = {"Tokens/second: 10.83", NULL};
    expect_cli(url, 0, "submit profile --model Llama-3.2-1B-Instruct --n-tokens 20 --wait",
               prof_1b);
    const char *run_q[] = {"Tokens/second: 31.20", NULL};
    expect_cli(url, 0, "submit run --model Qwen2.5-0.5B-Instruct --n-tokens 20 --wait", run_q);
    const char *run_s[] = {"Tokens/second: 6.91", NULL};
    expect_cli(url, 0, "submit run --model SmolLM2-1.7B-Instruct --n-tokens 20 --wait", run_s);

    /* diagnosis: informational, the per-layer table */
    const char *diag[] = {"[diagnosis] prompt", "L15 (post-norm)", NULL};
    expect_cli(url, 0, "submit diagnosis --model Llama-3.2-1B-Instruct --wait", diag);

    /* faults: an error (not 0, not 1) naming what went wrong; nothing stored as measured */
    int64_t runs_before = db_int(db, "SELECT count(*) FROM runs WHERE outcome = 'PASS'");
    const char *nometric[] = {"printed no usable decode throughput", NULL};
    expect_cli(url, 2, "submit run --model air-nometric --n-tokens 20 --wait", nometric);
    const char *crash[] = {"signal 11", NULL};
    r = cli("submit verify --model air-crash --wait --coordinator '%s'", url);
    assert_true(r.code != 0 && r.code != 1);
    assert_non_null(strstr(r.out, crash[0]));
    free(r.out);
    r = cli("submit run --model air-hang --wait --coordinator '%s'", url);
    assert_true(r.code != 0 && r.code != 1);
    assert_non_null(strstr(r.out, "timed out after 5 s"));
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE outcome = 'PASS'"), runs_before);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE tps = 0"), 0);

    kill9(w);
    kill9(c);
    logs_clean();
}

/* Writes key to tmp/name with mode 0600; path gets where. */
static void key_file(char *path, size_t cap, const char *name, const char *key)
{
    snprintf(path, cap, "%s/%s", tu_group_tmp(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", key);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0);
}

/* tls-less tcp with a secret: a wrong one is refused and nothing runs. */
static void test_wrong_secret(void **s)
{
    (void)s;
    char url[128], db[1200], log[1300], right[1300], wrong[1300];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", 20000 + (int)(getpid() % 20000));
    snprintf(db, sizeof db, "%s/auth.db", tu_group_tmp());
    key_file(right, sizeof right, "right.key", "right-0123456789abcdef");
    key_file(wrong, sizeof wrong, "wrong.key", "wrong-0123456789abcdef");
    pid_t c = tu_spawn("coord-auth.log", COORD_ARGS " --secret-file '%s'", url, db, right);
    snprintf(log, sizeof log, "%s/coord-auth.log", tu_group_tmp());
    for (int i = 0; i < 100; i++) {
        tu_result r = cli("jobs --coordinator '%s' --secret-file '%s'", url, right);
        int ok = r.code == 0;
        free(r.out);
        if (ok)
            break;
        sleep_ms(100);
    }
    tu_result r = cli("submit run --coordinator '%s' --secret-file '%s'", url, wrong);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "UNAUTHENTICATED"));
    assert_non_null(strstr(r.out, "request MAC does not verify: the client's secret differs"));
    free(r.out);
    r = cli("submit run --coordinator '%s'", url);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "UNAUTHENTICATED"));
    assert_non_null(strstr(r.out, "request carries no valid MAC"));
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM jobs"), 0);
    /* unreachable coordinator: exit 3 */
    r = cli("jobs --coordinator tcp://127.0.0.1:1");
    assert_int_equal(r.code, 3);
    free(r.out);
    kill9(c);
}

static long long worker_pid_of(const char *job_out, const char *names[], pid_t pids[], int n)
{
    const char *w = strstr(job_out, "worker:");
    for (int i = 0; w && i < n; i++)
        if (strstr(w, names[i]) && strstr(w, names[i]) < strchr(w, '\n'))
            return pids[i];
    return -1;
}

/* tcp: a worker killed -9 mid verify-full, then the coordinator killed -9 with
 * queued and running jobs; everything completes once, nothing is lost. */
static void test_lab_faults_tcp(void **s)
{
    (void)s;
    tu_require_model();
    char url[128], db[1200];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", 20001 + (int)(getpid() % 20000));
    snprintf(db, sizeof db, "%s/tcp.db", tu_group_tmp());
    pid_t c = tu_spawn("coord-tcp.log", COORD_ARGS, url, db);
    const char *names[3] = {"lab-x@", "lab-y@", "lab-z@"};
    pid_t w[3];
    w[0] = tu_spawn("wx.log", WORKER_ARGS, url, "lab-x", 20);
    w[1] = tu_spawn("wy.log", WORKER_ARGS, url, "lab-y", 21);
    w[2] = tu_spawn("wz.log", WORKER_ARGS, url, "lab-z", 22);
    wait_workers(url, 3);

    /* Two shards on two of the three workers; the second's worker dies. */
    tu_result r = cli("submit verify-full --model instruct --n-tokens 24 --shards 2 "
                      "--coordinator '%s'",
                      url);
    assert_int_equal(r.code, 0);
    long long g = submitted_id(r.out);
    const char *sh = strstr(r.out, "shards: ");
    assert_non_null(sh);
    long long kid = atoll(strchr(sh + 8, ' ') + 1); /* the second shard */
    free(r.out);
    char *out = wait_state(url, kid, "running");
    pid_t victim = (pid_t)worker_pid_of(out, names, w, 3);
    free(out);
    assert_true(victim > 0);
    sleep_ms(300);
    kill9(victim);
    for (int i = 0; i < 3; i++)
        if (w[i] == victim)
            w[i] = -1;
    out = wait_state(url, g, "done");
    free(out);
    r = cli("job %lld --print --coordinator '%s'", g, url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[verify] PASS (8/8 prompts pass)"));
    free(r.out);
    /* one run per board the shards ran on (the requeued shard's board among them) */
    long long nruns = db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", g);
    assert_true(nruns >= 1);
    assert_int_equal(db_int(db, "SELECT count(DISTINCT d.board) FROM runs r JOIN deployments d "
                                "ON d.id = r.deployment_id WHERE r.job_id = %lld AND d.board NOT "
                                "LIKE '%%+%%'", g), nruns);
    assert_int_equal(db_int(db, "SELECT attempts FROM jobs WHERE id = %lld", kid), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT min(id) "
                                "FROM runs WHERE job_id = %lld)", g), 8);

    /* Three runs on the two survivors: two run, one waits; the coordinator dies. */
    long long ids[3];
    for (int i = 0; i < 3; i++) {
        r = cli("submit run --model instruct --n-tokens 16 --reps 2 --coordinator '%s'", url);
        assert_int_equal(r.code, 0);
        ids[i] = submitted_id(r.out);
        free(r.out);
    }
    out = wait_state(url, ids[0], "running");
    free(out);
    kill9(c);
    sleep_ms(500);
    c = tu_spawn("coord-tcp.log", COORD_ARGS, url, db);
    for (int i = 0; i < 3; i++) {
        out = wait_state(url, ids[i], "done");
        free(out);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[i]), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE kind = 'run'"), 3);
    /* the workers re-attached to the new coordinator */
    wait_workers(url, 2);
    for (int i = 0; i < 3; i++)
        kill9(w[i]);
    kill9(c);
    logs_clean();
}

/* Waits (polling, 120 s at most) for pid to end; returns its wait status. */
static int wait_exit(pid_t pid, double *ms)
{
    double t0 = nb_now_ms();
    int status = 0;
    for (int i = 0; i < 1200; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            *ms = nb_now_ms() - t0;
            return status;
        }
        sleep_ms(100);
    }
    fail_msg("pid %d did not exit within 120 s", (int)pid);
    return -1;
}

static long long grep_count(const char *log, const char *pattern)
{
    snprintf(cmd, sizeof cmd, "grep -c -e '%s' '%s/%s'", pattern, tu_group_tmp(), log);
    tu_result r = tu_run(cmd);
    long long n = r.out ? atoll(r.out) : -1;
    free(r.out);
    return n;
}

/* Submits a run long enough to be caught running (50 x 200 tokens) and returns its id once
 * a worker runs it; *runner gets the index of that worker in names/pids. */
static long long long_run(const char *url, const char *names[], pid_t pids[], int n,
                          int *runner)
{
    tu_result r = cli("submit run --model instruct --n-tokens 200 --reps 50 --coordinator '%s'",
                      url);
    assert_int_equal(r.code, 0);
    long long id = submitted_id(r.out);
    free(r.out);
    char *out = wait_state(url, id, "running");
    pid_t pid = (pid_t)worker_pid_of(out, names, pids, n);
    free(out);
    *runner = -1;
    for (int i = 0; i < n; i++)
        if (pids[i] == pid && pid > 0)
            *runner = i;
    assert_true(*runner >= 0);
    return id;
}

/* ipc: the coordinator killed -9 between a result's commit and its acknowledgement (fault
 * point kill_after_commit): the worker re-reports, no duplicate row. A second coordinator on
 * the same file is refused. A SIGSTOPped worker's lease expires and the job goes to the
 * other worker; a cancel stops that run; a SIGTERMed worker stops a long run after its
 * grace (500 ms) and exits 0 (the runs are 50 x 200 tokens: minutes, unless stopped). */
static void test_lab_durability(void **s)
{
    (void)s;
    tu_require_model();
    char url[1200], url2[1200], db[1200];
    snprintf(url, sizeof url, "ipc://%s/d.sock", tu_group_tmp());
    snprintf(url2, sizeof url2, "ipc://%s/d2.sock", tu_group_tmp());
    snprintf(db, sizeof db, "%s/durable.db", tu_group_tmp());
    setenv("NPUBENCH_FAULT", "kill_after_commit", 1);
    pid_t c = tu_spawn("coord-d.log", COORD_ARGS, url, db);
    unsetenv("NPUBENCH_FAULT");
    const char *names[2] = {"dur-a@", "dur-b@"};
    pid_t w[2];
    w[0] = tu_spawn("wd0.log", WORKER_ARGS " --grace-ms 500", url, "dur-a", 30);
    wait_workers(url, 1);

    tu_result r = cli(COORD_ARGS, url2, db);
    assert_int_equal(r.code, 3);
    char want[128];
    snprintf(want, sizeof want, "in use by another coordinator (pid %d, lock ", (int)c);
    assert_non_null(strstr(r.out, want));
    free(r.out);

    r = cli("submit run --model instruct --n-tokens 4 --reps 1 --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    long long id = submitted_id(r.out);
    free(r.out);
    double ms;
    int status = wait_exit(c, &ms);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", id), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM job_results WHERE job_id = %lld", id), 1);
    c = tu_spawn("coord-d.log", COORD_ARGS, url, db);
    wait_workers(url, 1);
    /* The worker leases again only after its report was answered. */
    r = cli("submit run --model instruct --n-tokens 4 --reps 1 --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    long long id2 = submitted_id(r.out);
    free(r.out);
    free(wait_state(url, id2, "done"));
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", id), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", id2), 1);
    assert_int_equal(grep_count("coord-d.log", "result from .* refused"), 0);
    assert_int_equal(grep_count("wd0.log", "dropped the result"), 0);

    /* SIGSTOP: the worker goes silent, is declared gone, its job goes to the other one (a
     * requeue for a lost worker is not an attempt of the job's). */
    w[1] = tu_spawn("wd1.log", WORKER_ARGS " --grace-ms 500", url, "dur-b", 31);
    wait_workers(url, 2);
    int stopped;
    long long slow = long_run(url, names, w, 2, &stopped);
    kill(w[stopped], SIGSTOP);
    const char *other = names[1 - stopped];
    char moved[256];
    snprintf(moved, sizeof moved, "SELECT count(*) FROM jobs WHERE id = %%lld AND state = "
             "'running' AND leased_worker LIKE '%s%%%%'", other);
    for (int i = 0; i < 600 && db_int(db, moved, slow) != 1; i++)
        sleep_ms(100);
    assert_int_equal(db_int(db, moved, slow), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM job_logs WHERE job_id = %lld AND text "
                                "LIKE '%%lost: no heartbeat%%'", slow), 1);
    r = cli("cancel %lld --coordinator '%s'", slow, url);
    assert_int_equal(r.code, 0);
    free(r.out);
    free(wait_state(url, slow, "cancelled"));
    kill(w[stopped], SIGCONT);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", slow), 0);

    /* SIGTERM: the long run stops after the grace and is handed back. */
    int runner;
    long long term = long_run(url, names, w, 2, &runner);
    kill(w[runner], SIGTERM);
    status = wait_exit(w[runner], &ms);
    print_message("SIGTERM to exit of a worker mid-run (grace 500 ms): %.0f ms\n", ms);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    w[runner] = -1;
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", term), 0);
    r = cli("cancel %lld --coordinator '%s'", term, url);
    assert_int_equal(r.code, 0);
    free(r.out);
    free(wait_state(url, term, "cancelled"));
    kill9(w[0]);
    kill9(w[1]);
    kill9(c);
    logs_clean();
}

/* Embedded mode: the local command goes through an in-process coordinator and worker,
 * prints as before, and lands in the local history. */
static void test_embedded_history(void **s)
{
    (void)s;
    tu_require_model();
    char db[1200];
    snprintf(db, sizeof db, "%s/local.db", tu_group_tmp());
    tu_result r =
        cli("verify --max-prompts 1 --n-tokens 4 --db '%s' --reports '%s/rep'", db, tu_group_tmp());
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[verify] PASS (1/1 prompts pass)"));
    free(r.out);
    r = cli("run --n-tokens 4 --reps 2 --warmup 0 --db '%s'", db);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Tokens/second:"));
    assert_non_null(strstr(r.out, "Generated text:"));
    free(r.out);
    r = cli("history --model instruct --db '%s'", db);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "verify"));
    assert_non_null(strstr(r.out, " run "));
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE source = 'local'"), 2);
    assert_int_equal(db_int(db, "SELECT count(*) FROM samples"), 2);
    /* compare the run against a reference set from the verify's deployment */
    r = cli("reference set --run 1 --db '%s'", db);
    assert_int_equal(r.code, 0);
    free(r.out);
    r = cli("compare 2 --against reference --db '%s'", db);
    /* the reference deployment's only other run is the verify: not like a run */
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "no other run like run 2"));
    assert_non_null(strstr(r.out, "1 is another kind"));
    free(r.out);
    r = cli("run --n-tokens 4 --reps 2 --warmup 0 --ignore-eos --db '%s'", db);
    assert_int_equal(r.code, 0);
    free(r.out);
    /* timings of real runs: only a 10x slowdown would fail at --tolerance 1000 (the verdict
     * against known numbers is test_service_api's test_compare_verdicts) */
    r = cli("compare 3 --against reference --tolerance 1000 --db '%s'", db);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "matched: run 2, the newest of 1 like run "));
    assert_non_null(strstr(r.out, "Base (run 2)"));
    assert_non_null(strstr(r.out, "TTFT (ms)"));
    assert_non_null(strstr(r.out, "Decode (ms/token)"));
    assert_non_null(strstr(r.out, "TPOT (ms)"));
    assert_non_null(strstr(r.out, "(2 vs 2)")); /* the U test over both runs' repetitions */
    free(r.out);
    r = cli("compare 2 3 --tolerance 1000 --db '%s'", db); /* OLD NEW */
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "New (run 3)"));
    free(r.out);
}

/* The file validates against tests/junit.xsd (xmllint, scripts/setup.sh installs it). */
static void junit_valid(const char *file)
{
    snprintf(cmd, sizeof cmd, "xmllint --noout --schema '%s/tests/junit.xsd' '%s'",
             tu_env("NB_SRC", "."), file);
    tu_result r = tu_run(cmd);
    if (r.code)
        fail_msg("%s does not validate:\n%s", file, r.out ? r.out : "");
    free(r.out);
}

/* Outcomes as exit codes, JSON documents, CSV / Markdown tables and JUnit files, through the
 * exec stand-ins (no model needed): a pass, a gate FAIL, a crash, and a model nobody serves. */
static void test_lab_outputs(void **s)
{
    (void)s;
    static const air_dep deps[] = {
        {"Llama-3.2-1B-Instruct", "llama32_1b.py", "pass", ""},
        {"air-fail", "llama32_1b.py", "fail", ""},
        {"air-crash", "llama32_3b.py", "crash", ""},
    };
    char path[1200], url[1200], db[1200], junit[1300], args[1600];
    air_file("out-deployments.json", deps, 3, path, sizeof path);
    snprintf(url, sizeof url, "ipc://%s/out.sock", tu_group_tmp());
    snprintf(db, sizeof db, "%s/out.db", tu_group_tmp());
    pid_t c = tu_spawn("coord-out.log", COORD_ARGS, url, db);
    pid_t w = tu_spawn("w-out.log", WORKER_ARGS " --deployments '%s'", url, "npu-out", 29, path);
    wait_workers(url, 1);

    /* a gate FAIL: exit 1, one testcase per prompt, the failure says where and what */
    snprintf(junit, sizeof junit, "%s/fail.xml", tu_group_tmp());
    snprintf(args, sizeof args, "submit verify --model air-fail --wait --junit '%s'", junit);
    const char *fail_out[] = {"job ", "done: fail", NULL};
    char *out = expect_out(url, 1, args, fail_out);
    long long fail_id = submitted_id(out);
    free(out);
    junit_valid(junit);
    char *x = tu_slurp(junit);
    assert_non_null(strstr(x, "tests=\"2\" failures=\"1\" errors=\"0\""));
    assert_non_null(strstr(x, "name=\"prompt 0\""));
    assert_non_null(strstr(x, "classname=\"npubench.verify.air-fail.exec/bf16@npu-out\""));
    assert_non_null(strstr(x, "<failure type=\"gate\" message=\"diverged at step 3: device "
                              "9999 &apos;&quot;zzz&quot;&apos; vs reference 220"));
    assert_non_null(strstr(x, "<system-out>")); /* the job's log */
    free(x);

    /* a pass as JSON: the schema, ids, the outcome and its exit code, the gate records */
    const char *pass_json[] = {"\"schema\":\"npubench.submit/1\"", "\"outcome\":\"pass\"",
                               "\"exit_code\":0", "\"divergence_step\":7",
                               "\"device_token_ref_rank\":1", NULL};
    out = expect_out(url, 0, "submit verify --model Llama-3.2-1B-Instruct --wait --json",
                     pass_json);
    char *ids = strstr(out, "\"job_ids\":[");
    assert_non_null(ids);
    long long pass_id = atoll(ids + strcspn(ids, "0123456789"));
    free(out);
    /* verify lines leave out a rank of -1 (not in the other side's top list) */
    snprintf(args, sizeof args, "job %lld --print", fail_id);
    out = expect_out(url, 1, args, NULL);
    assert_null(strstr(out, "rank -1"));
    free(out);

    /* job and wait exit by outcome; wait takes the highest code of its jobs */
    snprintf(args, sizeof args, "job %lld --json", fail_id);
    const char *job_json[] = {"\"schema\":\"npubench.job/1\"", "\"outcome\":\"fail\"",
                              "\"exit_code\":1", "\"state\":\"done\"", NULL};
    free(expect_out(url, 1, args, job_json));
    snprintf(args, sizeof args, "wait %lld", pass_id);
    const char *wait_pass[] = {"pass (exit 0)", NULL};
    free(expect_out(url, 0, args, wait_pass));
    snprintf(junit, sizeof junit, "%s/wait.xml", tu_group_tmp());
    snprintf(args, sizeof args, "wait %lld %lld --timeout 30 --json --junit '%s'", pass_id,
             fail_id, junit);
    const char *wait_json[] = {"\"schema\":\"npubench.wait/1\"", "\"jobs\":[", "\"exit_code\":1",
                               NULL};
    free(expect_out(url, 1, args, wait_json));
    junit_valid(junit);

    /* no verdict: exit 2, a JUnit error */
    snprintf(junit, sizeof junit, "%s/crash.xml", tu_group_tmp());
    snprintf(args, sizeof args, "submit verify --model air-crash --wait --junit '%s'", junit);
    free(expect_out(url, 2, args, NULL));
    junit_valid(junit);
    x = tu_slurp(junit);
    assert_non_null(strstr(x, "errors=\"1\""));
    assert_non_null(strstr(x, "<error type="));
    free(x);

    /* no registered deployment is called that: refused at submit, exit 3 */
    const char *refused[] = {"no registered worker serves it", NULL};
    free(expect_out(url, 3, "submit verify --model nosuch --wait --timeout 1", refused));
    /* no live worker of that board: --timeout gives up, cancels it as expired, exit 5
     * (--keep keeps it) */
    const char *expired[] = {"gave up after 1 s", NULL};
    out = expect_out(url, 5,
                     "submit verify --model Llama-3.2-1B-Instruct --board nowhere --wait "
                     "--timeout 1",
                     expired);
    long long exp_id = submitted_id(out);
    free(out);
    snprintf(args, sizeof args, "job %lld", exp_id);
    free(expect_out(url, 5, args, NULL));
    out = expect_out(url, 5,
                     "submit verify --model Llama-3.2-1B-Instruct --board nowhere --wait "
                     "--timeout 1 --keep",
                     NULL);
    long long kept = submitted_id(out);
    free(out);
    snprintf(args, sizeof args, "wait %lld --timeout 1", kept);
    const char *pending[] = {"queued: pending (exit 5)", NULL};
    free(expect_out(url, 5, args, pending));
    /* a cancelled job: exit 4; the reason, control characters and "]]>" included, is
     * escaped in the JUnit file */
    snprintf(args, sizeof args, "cancel %lld --reason \"$(printf 'bad\\001 ]]> <&>')\"", kept);
    free(expect_out(url, 0, args, NULL));
    snprintf(junit, sizeof junit, "%s/cancel.xml", tu_group_tmp());
    snprintf(args, sizeof args, "job %lld --junit '%s'", kept, junit);
    free(expect_out(url, 4, args, NULL));
    junit_valid(junit);
    x = tu_slurp(junit);
    assert_non_null(strstr(x, " ]]&gt; &lt;&amp;&gt;"));
    assert_null(strchr(x, '\001'));
    free(x);

    /* jobs: the outcome column, --state failed (did not pass), --outcome, CSV, JSON */
    snprintf(args, sizeof args, "jobs --state failed --format csv");
    out = expect_out(url, 0, args, NULL);
    assert_non_null(strstr(out, "JOB,KIND,STATE,OUTCOME,TARGET,WORKER,PROGRESS,AGE s,NOTE\n"));
    char want[64];
    snprintf(want, sizeof want, "\n%lld,verify,done,fail,air-fail,", fail_id);
    assert_non_null(strstr(out, want));
    snprintf(want, sizeof want, "\n%lld,", pass_id);
    assert_null(strstr(out, want));
    free(out);
    out = expect_out(url, 0, "jobs --outcome expired --format md", NULL);
    snprintf(want, sizeof want, "| %lld | verify | cancelled | expired |", exp_id);
    assert_non_null(strstr(out, want));
    free(out);
    const char *jobs_json[] = {"\"schema\":\"npubench.jobs/1\"", "\"outcome\":\"cancelled\"",
                               NULL};
    free(expect_out(url, 0, "jobs --json", jobs_json));
    const char *bad_outcome[] = {"--outcome 'maybe': expected pass, fail", NULL};
    free(expect_out(url, 2, "jobs --outcome maybe", bad_outcome));

    /* the other printing commands: a schema each, -h everywhere */
    const char *workers_json[] = {"\"schema\":\"npubench.workers/1\"", "\"board\":\"npu-out\"",
                                  NULL};
    free(expect_out(url, 0, "workers --json", workers_json));
    const char *hist_json[] = {"\"schema\":\"npubench.history/1\"", "\"runs\":[", NULL};
    free(expect_out(url, 0, "history --model air-fail --json", hist_json));
    const char *hist_md[] = {"| RUN | DATE (UTC) | DEPLOYMENT |", NULL};
    free(expect_out(url, 0, "history --model air-fail --format md", hist_md));
    long long runs[2];
    for (int i = 0; i < 2; i++) {
        out = expect_out(url, 0, "submit run --model Llama-3.2-1B-Instruct --n-tokens 20 --wait",
                         NULL);
        const char *h = strstr(out, "History: run ");
        assert_non_null(h);
        runs[i] = atoll(h + 13);
        free(out);
    }
    snprintf(args, sizeof args, "compare %lld %lld --json", runs[0], runs[1]); /* OLD NEW */
    const char *cmp_json[] = {"\"schema\":\"npubench.compare/1\"", "\"metric\":\"tps\"",
                              "\"base_value\":", NULL};
    out = expect_out(url, 0, args, cmp_json);
    snprintf(want, sizeof want, "\"base_run_id\":%lld", runs[0]);
    assert_non_null(strstr(out, want));
    assert_null(strstr(out, "\"label\"")); /* ids, not prose */
    free(out);
    snprintf(args, sizeof args, "compare %lld %lld --format csv", runs[0], runs[1]);
    const char *cmp_csv[] = {"metric,base_run,base,run,value,delta_pct,regression,p_value\n",
                             ",+0.00,no,1\n", NULL}; /* the same numbers: p = 1 */
    free(expect_out(url, 0, args, cmp_csv));
    static const char *const help_cmds[] = {"history", "jobs", "job", "wait", "submit",
                                            "workers", "compare", "cancel"};
    for (size_t i = 0; i < sizeof help_cmds / sizeof *help_cmds; i++) {
        snprintf(args, sizeof args, "%s -h", help_cmds[i]);
        const char *usage[] = {"usage: npubench ", NULL};
        free(expect_out(url, 0, args, usage));
    }
    const char *codes[] = {"4 cancelled, 5 expired", NULL};
    free(expect_out(url, 0, "wait --help", codes));

    kill9(w);
    kill9(c);
    logs_clean();
}

/* A deployments file with one air deployment of the numpy SmolLM2 adapter whose device lock
 * is lock; its path into path. */
static void air_backend_file(const char *name, const char *lock, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", tu_group_tmp(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"deployments\": [{\"name\": \"smol-air\", \"model\": \"%s\", "
               "\"backend\": \"air\", \"air\": {\"llms_dir\": \"%s/tests/fixtures/llms\", "
               "\"adapter\": \"smollm2_numpy.verify_adapter\", \"lock\": \"%s\", "
               "\"lock_wait_s\": 20, \"grace_s\": 2, \"env\": {\"OMP_NUM_THREADS\": \"1\"}}}]}",
            tu_model(), tu_env("NB_SRC", "."), lock);
    fclose(f);
}

/* The air backend in a lab: verify-full sharded over two air workers (each its own resident
 * adapter host and device lock) passes as one job; SIGTERM stops a worker's host within the
 * grace and gives its lock back. */
static void test_lab_air_backend(void **s)
{
    (void)s;
    tu_require_model();
    tu_result py = tu_run("python3 -c 'import numpy, gguf'");
    int have_py = py.code == 0;
    free(py.out);
    tu_require(have_py, "python3 with numpy and gguf (scripts/setup.sh installs them)");
    char url[1200], db[1200], f[2][1200], lock[2][1200];
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(lock[i], sizeof lock[i], "%s/npu-%d.lock", tu_group_tmp(), i);
        snprintf(name, sizeof name, "air-%d.json", i);
        air_backend_file(name, lock[i], f[i], sizeof f[i]);
    }
    snprintf(url, sizeof url, "ipc://%s/airb.sock", tu_group_tmp());
    snprintf(db, sizeof db, "%s/airb.db", tu_group_tmp());
    pid_t c = tu_spawn("coord-airb.log", COORD_ARGS, url, db);
    pid_t w0 = tu_spawn("w-airb0.log", WORKER_ARGS " --deployments '%s'", url, "air-a", 40, f[0]);
    pid_t w1 = tu_spawn("w-airb1.log", WORKER_ARGS " --deployments '%s'", url, "air-b", 41, f[1]);
    wait_workers(url, 2);
    const char *full[] = {"[verify] PASS (8/8 prompts pass)", "2 shards", NULL};
    char *out = expect_out(url, 0, "submit verify-full --model SmolLM2-135M-Instruct.Q4_1 --n-tokens 3 --shards 2 "
                                   "--wait", full);
    long long g = submitted_id(out);
    free(out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM jobs WHERE parent_id = %lld", g), 2);
    assert_int_equal(db_int(db, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT id "
                                "FROM runs WHERE job_id = %lld) AND status = 'PASS'", g), 8);
    /* each worker ran a shard on its own host, which holds its lock */
    pid_t h0 = tu_child_running(w0, "air_host.py"), h1 = tu_child_running(w1, "air_host.py");
    assert_true(h0 > 0 && h1 > 0);
    snprintf(cmd, sizeof cmd, "flock -n '%s' true", lock[0]);
    assert_int_not_equal(system(cmd), 0);
    kill(w0, SIGTERM);
    assert_true(tu_poll(10000, kill(h0, 0) != 0));
    assert_true(tu_poll(10000, system(cmd) == 0)); /* the lock is free again */
    tu_stop(&w0);
    /* draining the other board stops its host and frees its lock; the worker stays */
    tu_result r = cli("workers drain air-b --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    free(r.out);
    snprintf(cmd, sizeof cmd, "flock -n '%s' true", lock[1]);
    assert_true(tu_poll(20000, system(cmd) == 0));
    assert_true(tu_poll(10000, kill(h1, 0) != 0));
    assert_false(tu_exited(w1));
    kill9(w1);
    kill9(c);
    logs_clean();
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (getenv("NB_TEST_FILTER")) /* one test by name, when debugging */
        cmocka_set_test_filter(getenv("NB_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_wrong_secret, tu_teardown_kill),
        cmocka_unit_test_teardown(test_lab_ipc, tu_teardown_kill),
        cmocka_unit_test_teardown(test_lab_exec, tu_teardown_kill),
        cmocka_unit_test_teardown(test_lab_air_backend, tu_teardown_kill),
        cmocka_unit_test_teardown(test_lab_outputs, tu_teardown_kill),
        cmocka_unit_test_teardown(test_lab_health, tu_teardown_kill),
        cmocka_unit_test_teardown(test_lab_faults_tcp, tu_teardown_kill),
        cmocka_unit_test_teardown(test_embedded_history, tu_teardown_kill),
        cmocka_unit_test_teardown(test_lab_durability, tu_teardown_kill),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
