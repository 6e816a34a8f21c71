/* test_cli_cmds: the job commands through the real binary against a real coordinator and
 * worker — `workers`, `jobs`, `job`, `cancel` — their output and exit codes asserted exactly,
 * then the same database read without a coordinator (the embedded one, --db). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "testutil.h"

static char url[1300], db[1200];
static pid_t coord_pid, worker_pid;

/* 1 when `npubench args` prints needle. */
static int cli_prints(const char *args, const char *needle)
{
    tu_result r = tu_run_cli(args);
    int hit = r.out && strstr(r.out, needle);
    free(r.out);
    return hit;
}

static void start_coordinator(void)
{
    char sock[1200];
    snprintf(sock, sizeof sock, "%s/c.sock", tu_group_tmp());
    snprintf(url, sizeof url, "ipc://%s", sock);
    snprintf(db, sizeof db, "%s/c.db", tu_group_tmp());
    /* the committed traces, but in the base set's prompt 0 step 1 becomes tokens the model
     * never picks: a verify of that prompt fails there */
    char refs[1300], cmd[4096], base[1400];
    snprintf(refs, sizeof refs, "%s/refs", tu_group_tmp());
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s'/verify/references/*.json '%s'/", refs,
             tu_env("NB_SRC", "."), refs);
    tu_result r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    free(r.out);
    snprintf(base, sizeof base, "%s/b179c9523d0e6a0f-310f18e97323f258.json", refs);
    json_object *root = json_object_from_file(base), *prompts, *steps;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "prompts", &prompts));
    assert_true(json_object_object_get_ex(json_object_array_get_idx(prompts, 0), "steps", &steps));
    json_object *st = json_object_array_get_idx(steps, 1), *ids = json_object_new_array();
    for (int i = 1; i <= 5; i++)
        json_object_array_add(ids, json_object_new_int(i));
    json_object_object_add(st, "token", json_object_new_int(1));
    json_object_object_add(st, "topk_ids", ids);
    assert_int_equal(json_object_to_file(base, root), 0);
    json_object_put(root);
    coord_pid = tu_spawn("coord.log", "coordinator --listen '%s' --db '%s' --heartbeat-ms 100 "
                      "--refdir '%s'", url, db, refs);
    assert_true(tu_poll(20000, tu_ipc_ready(sock) || tu_exited(coord_pid)));
    assert_true(tu_ipc_ready(sock));
}

static int teardown(void **state)
{
    tu_stop(&worker_pid);
    tu_stop(&coord_pid);
    tu_teardown_kill(state);
    return tu_group_teardown(state);
}

/* Usage errors need no coordinator: exit 2, the word at fault named. */
static void test_usage(void **s)
{
    (void)s;
    free(tu_cli(2, "npubench cancel: expected a job id, got '0'", "cancel 0"));
    free(tu_cli(2, "npubench cancel: expected a job id, got '12x'", "cancel 12x"));
    free(tu_cli(2, "npubench cancel: expected a job id, got ''", "cancel"));
    free(tu_cli(2, "", "job abc"));
    free(tu_cli(2, "", "jobs --state sleeping"));
    free(tu_cli(2, "", "jobs --outcome maybe"));
    free(tu_cli(2, "", "workers --format yaml"));
    free(tu_cli(3, "", "workers --coordinator ipc://%s/nothing.sock", tu_group_tmp()));
    char *out = tu_cli(0, "", "cancel --help");
    assert_non_null(strstr(out, "npubench cancel ID [--reason R]"));
    free(out);
}

static void need_coordinator(void)
{
    if (coord_pid <= 0)
        start_coordinator();
}

#define COORD "--coordinator '%s'"

/* Known limit of issue 27: a worker declaring one file as native and as q4_1 (whose results
 * land in one deployment, q4_1 for SmolLM2's all-Q4_1 GGUF) was listed as two deployments.
 * `workers` lists one per stored name, the other declared words beside it. */
static void test_workers_one_deployment_per_file(void **s)
{
    (void)s;
    tu_require_model();
    need_coordinator();
    pid_t w = tu_spawn("worker-b2.log", "worker --coordinator '%s' --board b2 --threads 1 "
                       "--heartbeat-ms 100 --deploy instruct:native --deploy instruct:q4_1 "
                       "--deploy instruct:bf16", url);
    char args[2048];
    snprintf(args, sizeof args, "workers --format csv --coordinator '%s'", url);
    assert_true(tu_poll(60000, cli_prints(args, ",b2,alive,") || tu_exited(w)));
    char *out = tu_cli(0, "", "workers --format md " COORD, url);
    assert_non_null(strstr(out, " | - | - | SmolLM2-135M-Instruct cpu/q4_1 (also native), "
                                "SmolLM2-135M-Instruct cpu/bf16 |\n"));
    assert_null(strstr(out, "cpu/native"));
    free(out);
    out = tu_cli(0, "          \"model\":\"instruct\",\n          \"backend\":\"cpu\",\n"
                 "          \"dtype\":\"q4_1\",\n          \"declared_dtypes\":[\n"
                 "            \"native\",\n            \"q4_1\"\n          ],",
                 "workers --json " COORD, url);
    /* two deployments, not three */
    json_object *root = json_tokener_parse(out), *ws, *deps;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "workers", &ws));
    assert_true(json_object_object_get_ex(json_object_array_get_idx(ws, 0), "deployments",
                                          &deps));
    assert_int_equal(json_object_array_length(deps), 2);
    json_object_put(root);
    free(out);
    tu_stop(&w);
}

/* No worker: the job waits (exit 5), is cancelled with its reason kept (exit 4); a cancel
 * repeats harmlessly; an unknown id is NOT_FOUND (exit 2) naming the call. */
static void test_queued_then_cancelled(void **s)
{
    (void)s;
    need_coordinator();
    free(tu_cli(0, "(no workers)", "workers " COORD, url));
    free(tu_cli(0, "WORKER,BOARD,STATE,HEALTH,CHECKED,SEEN,JOB,PROGRESS,DEPLOYMENTS", "workers --format csv " COORD,
             url));
    free(tu_cli(0, "  \"schema\":\"npubench.workers/1\",\n  \"workers\":[\n  ]", "workers --json " COORD,
             url));
    free(tu_cli(0, "job 1 submitted", "submit run --n-tokens 2 --board nowhere " COORD, url));
    free(tu_cli(5,
             "job 1: run queued\n  target:    instruct @nowhere\n  requeued:  0 time(s)\n"
             "  created:   2*\n  started:   -\n  finished:  -",
             "job 1 " COORD, url));
    /* the sweeper writes why it waits */
    char args[2048];
    snprintf(args, sizeof args, "job 1 --coordinator '%s'", url);
    assert_true(tu_poll(20000, cli_prints(args, "  waiting:   no worker is registered\n")));
    free(tu_cli(0, "JOB,KIND,STATE,OUTCOME,TARGET,WORKER,PROGRESS,AGE s,NOTE\n"
                "1,run,queued,-,instruct @nowhere,-,-,*",
             "jobs --format csv " COORD, url));
    free(tu_cli(0, "(no jobs)", "jobs --state done " COORD, url));
    free(tu_cli(0, "job 1 cancelled", "cancel 1 --reason 'not needed' " COORD, url));
    free(tu_cli(4, "job 1: run cancelled\n  finished:  2*\n  error:     not needed", "job 1 " COORD,
             url));
    free(tu_cli(0, "job 1 cancelled", "cancel 1 " COORD, url));
    free(tu_cli(0, "1,run,cancelled,cancelled,instruct @nowhere,-,-,*",
             "jobs --outcome cancelled --format csv " COORD, url));
    free(tu_cli(0, "(no jobs)", "jobs --state queued " COORD, url));
    char want[2048];
    snprintf(want, sizeof want,
             "npubench cancel: error: NOT_FOUND: no job with id 99 (CancelJob from %s)", url);
    free(tu_cli(2, want, "cancel 99 " COORD, url));
    snprintf(want, sizeof want,
             "npubench job: error: NOT_FOUND: no job with id 99 (GetJob from %s)", url);
    free(tu_cli(2, want, "job 99 " COORD, url));
    /* --wait --timeout gives up: the job is cancelled as expired, or kept with --keep */
    free(tu_cli(5, "job 2 submitted\nnpubench submit: expired: submit --wait gave up after 1 s; "
                "job 2 cancelled\njob 2 cancelled: expired",
             "submit run --board nowhere --wait --timeout 1 " COORD, url));
    free(tu_cli(5, "job 3 submitted\nnpubench submit: expired: submit --wait gave up after 1 s; "
                "job 3 kept (--keep)\njob 3 queued: pending",
             "submit run --board nowhere --wait --timeout 1 --keep " COORD, url));
    free(tu_cli(5, "job 3 run queued: pending (exit 5)", "wait 3 --timeout 1 " COORD, url));
    free(tu_cli(0, "job 3 cancelled", "cancel 3 " COORD, url));
    free(tu_cli(2, "npubench submit: --junit, --timeout and --keep need --wait",
             "submit run --keep " COORD, url));
}

/* A real worker (the default model, 1 thread) runs a run, a diagnosis, a verify and a sharded
 * verify-full; `workers`, `job`, `jobs` and `wait` report each exactly. */
static void test_worker_runs_jobs(void **s)
{
    (void)s;
    tu_require_model();
    need_coordinator();
    worker_pid = tu_spawn("worker.log", "worker --coordinator '%s' --board b1 --tag nightly --threads 1 "
                       "--heartbeat-ms 100", url);
    char args[2048];
    snprintf(args, sizeof args, "workers --format csv --coordinator '%s'", url);
    assert_true(tu_poll(60000, cli_prints(args, ",b1,alive,") || tu_exited(worker_pid)));
    char *out = tu_cli(0, "| WORKER | BOARD | STATE | HEALTH | CHECKED | SEEN | JOB | PROGRESS | "
                       "DEPLOYMENTS |\n|---|---|---|---|---|---|---|---|---|",
                    "workers --format md " COORD, url);
    assert_non_null(strstr(out, " | b1 | alive | "));
    /* the model's display name, not the preset word (JSON keeps both) */
    assert_non_null(strstr(out, " | - | - | SmolLM2-135M-Instruct cpu/bf16 #nightly |\n"));
    free(out);
    out = tu_cli(0, "      \"board\":\"b1\",\n      \"state\":\"alive\",\n"
                 "      \"current_job_id\":0,\n          \"model\":\"instruct\",\n"
                 "          \"backend\":\"cpu\",\n          \"dtype\":\"bf16\",\n"
                 "          \"name\":\"SmolLM2-135M-Instruct\"",
              "workers --json " COORD, url);
    free(out);
    free(tu_cli(0, "job 4 submitted\nHistory: run 1 on b1\njob 4 done: pass",
             "submit run --n-tokens 2 --reps 1 --wait " COORD, url));
    free(tu_cli(0, "job 4: run done\n  target:    instruct\n  requeued:  0 time(s)\n"
                "  progress:  1/1 \n  result of job 4: pass on b1 (SmolLM2-135M-Instruct cpu/bf16), *\n"
                "    TTFT *\n    history run 1",
             "job 4 " COORD, url));
    free(tu_cli(0, "job 5 submitted", "submit diagnosis " COORD, url));
    free(tu_cli(0, "job 6 submitted", "submit verify --max-prompts 1 --n-tokens 2 " COORD, url));
    free(tu_cli(0, "job 5 diagnosis done: pass (exit 0)\njob 6 verify done: pass (exit 0)",
             "wait 5 6 " COORD, url));
    free(tu_cli(0, "job 5: diagnosis done\n    30 layer cosines, last median 0.99*\n"
                "    history run 2",
             "job 5 " COORD, url));
    free(tu_cli(0, "    gate: 1/1 prompts pass (k=5, 2 tokens); decode-path defects: 0\n"
                "  prompt 0: PASS  (all 2 steps agree)\n[verify] PASS (1/1 prompts pass)",
             "job 6 --print " COORD, url));
    out = tu_cli(0, "log:", "job 6 --log " COORD, url);
    assert_non_null(strstr(out, " 1/1 prompt 0: PASS\n"));
    free(out);
    char junit[1200];
    snprintf(junit, sizeof junit, "%s/j.xml", tu_group_tmp());
    free(tu_cli(0, "  \"schema\":\"npubench.job/1\",\n    \"job_id\":5,\n"
                "    \"kind\":\"diagnosis\",\n    \"state\":\"done\",\n"
                "    \"outcome\":\"pass\",\n    \"exit_code\":0,",
             "job 5 --json --junit '%s' " COORD, junit, url));
    char *buf = tu_slurp(junit);
    tu_expect_lines(buf, "<testsuites name=\"npubench\" tests=\"1\" failures=\"0\" errors=\"0\">\n"
                      "  <testsuite name=\"job 5 diagnosis\" id=\"5\" tests=\"1\" failures=\"0\" "
                      "errors=\"0\" skipped=\"0\" *");
    free(tu_cli(0, "job 7 submitted (2 shards: 8 9)\n  prompt 0: PASS  (all 2 steps agree)\n"
                "  prompt 1: PASS  (all 2 steps agree)\n[verify] PASS (2/2 prompts pass)\n"
                "job 7 done: pass",
             "submit verify-full --shards 2 --max-prompts 2 --n-tokens 2 --wait " COORD, url));
    free(tu_cli(0, "job 7: verify-full done\n  progress:  2/2 \n"
                "  child 8: done prompts [0, 1) worker b1@*\n"
                "  child 9: done prompts [1, 2) worker b1@*\n"
                "    gate: 2/2 prompts pass (k=5, 2 tokens); decode-path defects: 0",
             "job 7 " COORD, url));
    free(tu_cli(0, "JOB,KIND,STATE,OUTCOME,TARGET,WORKER,PROGRESS,AGE s,NOTE\n"
                "7,verify-full,done,pass,instruct,-,-,*\n6,verify,done,pass,instruct,b1@*\n"
                "5,diagnosis,done,pass,instruct,b1@*\n4,run,done,pass,instruct,b1@*",
             "jobs --state done --format csv " COORD, url));
    /* a gate FAIL: exit 1, the failing prompt a JUnit failure with the divergence */
    snprintf(junit, sizeof junit, "%s/fail.xml", tu_group_tmp());
    free(tu_cli(1, "job 10 submitted\n  prompt 0: FAIL  diverge at step 1: device 30 (ref margin "
                "> 4.000) vs reference 1 — step 1: device token 30 not in reference top-5\n"
                "  prompt 1: PASS  (all 2 steps agree)\n[verify] FAIL (1/2 prompts pass)\n"
                "job 10 done: fail",
             "submit verify --prompts base --max-prompts 2 --n-tokens 2 --wait --junit '%s' "
             COORD, junit, url));
    free(buf);
    buf = tu_slurp(junit);
    print_message("%s\n", buf);
    tu_expect_lines(buf, "<testsuites name=\"npubench\" tests=\"2\" failures=\"1\" errors=\"0\">\n"
                      "  <testsuite name=\"job 10 verify\" id=\"10\" tests=\"2\" failures=\"1\" "
                      "errors=\"0\" skipped=\"0\" *\n"
                      "      <failure type=\"gate\" message=\"diverged at step 1: device 30 "
                      "&apos;.&apos; vs reference 1 &apos;&lt;|im_start|&gt;&apos;, reference "
                      "margin *\n"
                      "agreed prefix:  Paris</failure>");
    free(tu_cli(1, "    \"outcome\":\"fail\",\n    \"exit_code\":1,", "job 10 --json " COORD, url));
    free(tu_cli(0, "10,verify,done,fail,instruct,b1@*", "jobs --state failed --format csv " COORD,
             url));
    free(tu_cli(0, "10,verify,done,fail,instruct,b1@*", "jobs --outcome fail --format csv " COORD,
             url));
    /* a job without results (cancelled) is one JUnit error naming its state and reason */
    snprintf(junit, sizeof junit, "%s/cancelled.xml", tu_group_tmp());
    free(tu_cli(4, "", "wait 1 --quiet --junit '%s' " COORD, junit, url));
    free(buf);
    buf = tu_slurp(junit);
    assert_non_null(strstr(buf, "<error type=\"cancelled\" message=\"cancelled: job cancelled: "
                                "not needed\""));
    /* several jobs: the highest exit code (1 cancelled -> 4) */
    free(tu_cli(4, "  \"schema\":\"npubench.wait/1\",", "wait 1 4 --json " COORD, url));
    out = tu_cli(4, "", "wait 1 --quiet " COORD, url);
    assert_string_equal(out, "");
    free(out);
    /* submit matrix over the boards tagged nightly: the run's row (board, no gate, its child
     * job), as JSON with one JUnit file; then, the board drained, the child waits, the
     * deadline passes (exit 5) and the row says so before the job is cancelled as expired */
    snprintf(junit, sizeof junit, "%s/matrix.xml", tu_group_tmp());
    free(tu_cli(0, "  \"schema\":\"npubench.matrix/1\",\n      \"model\":\"instruct\",\n"
                "      \"board\":\"b1\",\n      \"gate\":\"-\",\n      \"flags\":\"\",\n"
                "      \"job_ids\":\"12\"\n  \"exit_code\":0",
             "submit matrix --models instruct --boards nightly --kinds run --n-tokens 2 --reps 1 "
             "--timeout 300 --json --junit '%s' " COORD, junit, url));
    free(buf);
    buf = tu_slurp(junit);
    tu_expect_lines(buf, "<testsuites name=\"npubench\" tests=\"1\" failures=\"0\" errors=\"0\">");
    free(buf);
    free(tu_cli(0, "board b1 drained: 0 jobs still running there, no new ones",
             "workers drain b1 " COORD, url));
    out = tu_cli(0, "", "workers --format md " COORD, url);
    assert_non_null(strstr(out, ", drained | "));
    free(out);
    /* a matrix whose only board is drained: refused at once, naming it (it waited out the
     * whole --timeout, exit 5); no job is left for the board once it is undrained (else the
     * worker would be mid-job at the SIGTERM below) */
    free(tu_cli(3, "npubench submit matrix: error: NOT_FOUND: matrix: no board can take it now: "
                "board b1 is drained *",
             "submit matrix --models instruct --boards nightly --kinds run --timeout 60 "
             "--format csv " COORD, url));
    free(tu_cli(2, "npubench job: error: NOT_FOUND: *", "job 13 " COORD, url));
    free(tu_cli(0, "board b1 undrained: takes jobs again", "workers undrain b1 " COORD, url));
    /* the coordinator, not only the message, took the undrain: the board is listed without it */
    out = tu_cli(0, "", "workers --format md " COORD, url);
    assert_non_null(strstr(out, " | b1 | alive | "));
    assert_null(strstr(out, ", drained | "));
    free(out);
    free(tu_cli(2, "npubench workers: expected 'drain BOARD' or 'undrain BOARD'",
             "workers drain " COORD, url));
    /* SIGTERM: the worker deregisters and stops; it is gone at once (not after the sweep's
     * gone-ms): only --all lists it, gone */
    tu_stop(&worker_pid);
    snprintf(args, sizeof args, "workers --coordinator '%s'", url);
    assert_true(cli_prints(args, "(no workers)\n"));
    free(tu_cli(0, "WORKER,BOARD,STATE,HEALTH,CHECKED,SEEN,JOB,PROGRESS,DEPLOYMENTS\nb1@*",
             "workers --all --format csv " COORD, url));
    out = tu_cli(0, "", "workers --all --format csv " COORD, url);
    assert_non_null(strstr(out, ",b1,gone,"));
    free(out);
}

/* The same database without a coordinator: the embedded one answers jobs, job, workers and
 * cancel. */
static void test_embedded_database(void **s)
{
    (void)s;
    need_coordinator();
    free(tu_cli(0, "job 13 submitted", "submit run --board nowhere " COORD, url));
    tu_stop(&coord_pid);
    free(tu_cli(0, "JOB,KIND,STATE,OUTCOME,TARGET,WORKER,PROGRESS,AGE s,NOTE\n"
                "13,run,queued,-,instruct @nowhere,-,-,*\n"
                "3,run,cancelled,cancelled,instruct @nowhere,-,-,*",
             "jobs --format csv --db '%s'", db));
    free(tu_cli(4, "job 1: run cancelled\n  error:     not needed", "job 1 --db '%s'", db));
    /* the selector filters: by board, by model (the alias a job was submitted under) */
    char *out = tu_cli(0, "13,run,queued,-,instruct @nowhere,-,-,*\n1,run,cancelled,*",
                    "jobs --board nowhere --format csv --db '%s'", db);
    assert_null(strstr(out, "\n4,run,"));
    free(out);
    free(tu_cli(0, "(no jobs)", "jobs --model Qwen2.5-0.5B-Instruct --db '%s'", db));
    free(tu_cli(0, "13,run,queued,-,instruct @nowhere,-,-,*",
             "jobs --model instruct --limit 1 --format csv --db '%s'", db));
    free(tu_cli(5, "job 13: run queued", "job 13 --db '%s'", db));
    free(tu_cli(0, "job 13 cancelled", "cancel 13 --db '%s'", db));
    free(tu_cli(4, "job 13: run cancelled", "job 13 --db '%s'", db));
    free(tu_cli(0, "WORKER,BOARD,STATE,HEALTH,CHECKED,SEEN,JOB,PROGRESS,DEPLOYMENTS",
             "workers --all --format csv --db '%s'", db));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_queued_then_cancelled),
        cmocka_unit_test(test_worker_runs_jobs),
        cmocka_unit_test(test_embedded_database),
        /* last: a registered worker changes what the others' queued jobs wait for */
        cmocka_unit_test(test_workers_one_deployment_per_file),
    };
    return tu_run_group(tests, tu_group_setup, teardown);
}
