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

/* Starts `npubench args` in the background with its output in tmp/log; returns its pid. */
static pid_t spawn(const char *log, const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char line[8192];
    snprintf(line, sizeof line, "cd '%s' && exec '%s' %s >>'%s/%s' 2>&1", tu_env("NB_SRC", "."),
             bin(), args, tu_group_tmp(), log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void kill9(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
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

static int need_model(void)
{
    if (!tu_model()) {
        print_message("SKIP: the default model is not fetched (scripts/fetch_model.sh)\n");
        return 0;
    }
    return 1;
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
    if (!need_model())
        skip();
    char url[1200], db[1200];
    snprintf(url, sizeof url, "ipc://%s/c.sock", tu_group_tmp());
    snprintf(db, sizeof db, "%s/ipc.db", tu_group_tmp());
    pid_t c = spawn("coord-ipc.log", COORD_ARGS, url, db);
    pid_t w0 = spawn("w0.log", WORKER_ARGS, url, "lab-a", 10);
    pid_t w1 = spawn("w1.log", WORKER_ARGS, url, "lab-b", 11);
    wait_workers(url, 2);

    tu_result r = cli("submit verify-full --model instruct --n-tokens 4 --wait --coordinator "
                      "'%s'",
                      url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[verify] PASS (8/8 prompts pass)"));
    assert_non_null(strstr(r.out, "2 shards"));
    long long g = submitted_id(r.out);
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(*) FROM jobs WHERE parent_id = %lld", g), 2);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", g), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id IN (SELECT id FROM "
                                "jobs WHERE parent_id = %lld)", g), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT id "
                                "FROM runs WHERE job_id = %lld) AND status = 'PASS'", g), 8);

    r = cli("submit profile --model instruct --tag strix --matrix --n-tokens 4 --reps 2 --wait "
            "--coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "== lab-a"));
    assert_non_null(strstr(r.out, "== lab-b"));
    assert_non_null(strstr(r.out, "Tokens/second:"));
    free(r.out);
    assert_int_equal(db_int(db, "SELECT count(DISTINCT d.board) FROM runs r JOIN deployments d "
                                "ON d.id = r.deployment_id WHERE r.kind = 'profile'"), 2);
    assert_int_equal(db_int(db, "SELECT count(*) FROM samples s JOIN runs r ON r.id = s.run_id "
                                "WHERE r.kind = 'profile'"), 4);
    assert_true(db_int(db, "SELECT count(*) FROM profile_kernels") > 0);

    /* a local command sent to the lab prints what it prints locally */
    r = cli("verify --n-tokens 4 --reports '%s/rep' --coordinator '%s'", tu_group_tmp(), url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[verify] PASS (2/2 prompts pass)"));
    assert_non_null(strstr(r.out, "Report: "));
    free(r.out);

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

    /* nobody serves this model: it waits, and says why */
    r = cli("submit verify --model nosuch.gguf --coordinator '%s'", url);
    assert_int_equal(r.code, 0);
    long long q = submitted_id(r.out);
    free(r.out);
    sleep_ms(1500);
    r = cli("jobs --coordinator '%s'", url);
    assert_non_null(strstr(r.out, "no live worker can run it"));
    assert_non_null(strstr(r.out, "nosuch.gguf"));
    free(r.out);
    r = cli("cancel %lld --coordinator '%s'", q, url);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "cancelled"));
    free(r.out);

    /* out-of-range fields are refused, naming the field; nothing is queued */
    int64_t before = db_int(db, "SELECT count(*) FROM jobs");
    r = cli("submit run --n-tokens 5000 --coordinator '%s'", url);
    assert_int_equal(r.code, 2);
    /* the CLI knows the job's token limit (job/nb_job.h) and refuses before sending */
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
    key_file(right, sizeof right, "right.key", "right");
    key_file(wrong, sizeof wrong, "wrong.key", "wrong");
    pid_t c = spawn("coord-auth.log", COORD_ARGS " --secret-file '%s'", url, db, right);
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
    assert_int_not_equal(r.code, 0);
    assert_non_null(strstr(r.out, "UNAUTHENTICATED"));
    free(r.out);
    r = cli("submit run --coordinator '%s'", url);
    assert_int_not_equal(r.code, 0);
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
    if (!need_model())
        skip();
    char url[128], db[1200];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", 20001 + (int)(getpid() % 20000));
    snprintf(db, sizeof db, "%s/tcp.db", tu_group_tmp());
    pid_t c = spawn("coord-tcp.log", COORD_ARGS, url, db);
    const char *names[3] = {"lab-x@", "lab-y@", "lab-z@"};
    pid_t w[3];
    w[0] = spawn("wx.log", WORKER_ARGS, url, "lab-x", 20);
    w[1] = spawn("wy.log", WORKER_ARGS, url, "lab-y", 21);
    w[2] = spawn("wz.log", WORKER_ARGS, url, "lab-z", 22);
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
    assert_int_equal(db_int(db, "SELECT count(*) FROM runs WHERE job_id = %lld", g), 1);
    assert_int_equal(db_int(db, "SELECT attempts FROM jobs WHERE id = %lld", kid), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT id "
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
    c = spawn("coord-tcp.log", COORD_ARGS, url, db);
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

/* Embedded mode: the local command goes through an in-process coordinator and worker,
 * prints as before, and lands in the local history. */
static void test_embedded_history(void **s)
{
    (void)s;
    if (!need_model())
        skip();
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
    /* the reference deployment's only run with metrics is run 2 itself */
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "no other run"));
    free(r.out);
    r = cli("run --n-tokens 4 --reps 2 --warmup 0 --ignore-eos --db '%s'", db);
    assert_int_equal(r.code, 0);
    free(r.out);
    r = cli("compare 3 --against reference --db '%s'", db);
    assert_true(r.code == 0 || r.code == 1); /* 1 only if it regressed by > 5% */
    assert_non_null(strstr(r.out, "vs reference (× / %)"));
    assert_non_null(strstr(r.out, "TTFT (ms)"));
    assert_non_null(strstr(r.out, "Decode (ms/token)"));
    free(r.out);
    r = cli("compare 3 2 --db '%s'", db);
    assert_true(r.code == 0 || r.code == 1);
    assert_non_null(strstr(r.out, "vs run 2 (× / %)"));
    free(r.out);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_secret),
        cmocka_unit_test(test_lab_ipc),
        cmocka_unit_test(test_lab_faults_tcp),
        cmocka_unit_test(test_embedded_history),
    };
    return cmocka_run_group_tests(tests, tu_group_setup, tu_group_teardown);
}
