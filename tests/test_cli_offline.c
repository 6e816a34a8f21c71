/* test_cli_offline: the history commands over a local database, no coordinator running (import,
 * history, compare, reference, report --html and its errors), submit matrix's usage errors,
 * and the dispatcher's and option parser's answers (help, version, -h, "--", limits and
 * durations named); exact output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <unistd.h>

#include "testutil.h"

static char db[1200];

/* The history of tests/data/db/history.ndjson (runs 1..5 with known TTFT and TPS). */
static void need_history(void)
{
    if (*db)
        return;
    tu_require_src();
    snprintf(db, sizeof db, "%s/h.db", tu_group_tmp());
    free(tu_cli(0, "tests/data/db/history.ndjson: 5 runs imported, 0 already stored, 0 bad",
             "import tests/data/db/history.ndjson --db '%s'", db));
}

/* import: idempotent (a second import stores nothing), each bad row named by line and field
 * (exit 2, the good rows kept), a perf.json, and a missing or unreadable FILE refused */
static void test_import(void **s)
{
    (void)s;
    need_history();
    free(tu_cli(0, "tests/data/db/history.ndjson: 0 runs imported, 5 already stored, 0 bad",
             "import tests/data/db/history.ndjson --db '%s'", db));
    free(tu_cli(2, "npubench import: history_bad.ndjson:2: ttft_ms: must be a finite number >= 0, "
                "got \"fast\"\n"
                "npubench import: history_bad.ndjson:5: model: required\n"
                "npubench import: history_bad.ndjson:7: ttft_ms: must be a finite number >= 0, "
                "got -3\n"
                "tests/data/db/history_bad.ndjson: 2 runs imported, 0 already stored, 5 bad",
             "import tests/data/db/history_bad.ndjson --db '%s'", db));
    free(tu_cli(0, "tests/data/db/perf_single.json: 1 run imported, 0 already stored, 0 bad",
             "import tests/data/db/perf_single.json --db '%s'", db));
    free(tu_cli(2, "npubench import: expected a FILE (perf.json or history.ndjson)",
             "import --db '%s'", db));
    free(tu_cli(2, "npubench import: error: /nonexistent.json: cannot open: No such file or "
                "directory",
             "import /nonexistent.json --db '%s'", db));
}

/* mlir-air's history before its PR #1867 (no runner key): the board said, the dtype from the
 * model's name, a verify fail shown as fail and an unreported status as ? */
static void test_import_nightly(void **s)
{
    (void)s;
    tu_require_src();
    char ndb[1200];
    snprintf(ndb, sizeof ndb, "%s/nightly.db", tu_group_tmp());
    free(tu_cli(0, "tests/data/db/mlir-air/history_pre1867.ndjson: 6 runs imported, 0 already "
                "stored, 0 bad\n"
                "tests/data/db/mlir-air/history_pre1867.ndjson: 6 rows named no runner: filed "
                "under board amdryzenai5pro340 (the nightly's runner; --runner to change)",
             "import tests/data/db/mlir-air/history_pre1867.ndjson --db '%s'", ndb));
    free(tu_cli(0, "6,2026-08-12T07:40:05Z,qwen25_7b_q4nx npu/q4nx @amdryzenai5pro340,bench,?,"
                "2310.50,,19.44,,-,imported\n"
                "5,2026-08-12T07:02:48Z,qwen25_3b_q4 npu/q4 @amdryzenai5pro340,bench,skip,"
                "1544.90,,11.37,,-,imported\n"
                "4,2026-08-12T06:33:20Z,llama32_3b npu/bf16 @amdryzenai5pro340,bench,fail,-,,-,,"
                "-,imported\n"
                "2,2026-08-12T05:51:12Z,llama32_1b_int4 npu/int4 @amdryzenai5pro340,bench,pass,"
                "702.40,,7.93,,-,imported",
             "history --format csv --db '%s'", ndb));
    /* Series: the nightly's profile row and each context of its sweep apart; --latest never
     * shows a sweep point as the model's throughput. */
    free(tu_cli(0, "tests/data/db/mlir-air/sweep_history_pre1867.ndjson: 3 runs imported, 0 "
                "already stored, 0 bad*",
             "import tests/data/db/mlir-air/sweep_history_pre1867.ndjson --db '%s'", ndb));
    free(tu_cli(0, "RUN,DATE (UTC),DEPLOYMENT,KIND,GATE,TTFT ms,TTFT sd,TPS,TPS sd,COMMIT,FLAG\n"
                "3,2026-08-12T06:09:55Z,llama32_1b_q4nx npu/q4nx @amdryzenai5pro340,bench,pass,"
                "893.31,,62.86,,-,imported\n"
                "\"7,3\",2026-08-12T08:14:37Z,llama32_1b_q4nx npu/q4nx @amdryzenai5pro340,"
                "\"sweep@1024,bench\",pass,-,,61.20,,-,imported\n"
                "\"8,3\",2026-08-12T08:14:37Z,llama32_1b_q4nx npu/q4nx @amdryzenai5pro340,"
                "\"sweep@131072,bench\",pass,-,,5.77,,-,imported",
             "history --latest --model llama32_1b_q4nx --format csv --db '%s'", ndb));
    free(tu_cli(0, "RUN,DATE (UTC),DEPLOYMENT,KIND,GATE,TTFT ms,TTFT sd,TPS,TPS sd,COMMIT,FLAG\n"
                "8,2026-08-12T08:14:37Z,llama32_1b_q4nx npu/q4nx @amdryzenai5pro340,"
                "sweep@131072,?,-,,5.77,,-,imported",
             "history --kind sweep --context 131072 --format csv --db '%s'", ndb));
    char *out = tu_cli(0, "      \"kind\":\"bench\",\n"
                       "      \"series\":\"llama32_1b_q4nx|npu|q4nx|amdryzenai5pro340|bench|"
                       "ctx=6|gen=-|prompt=-|threads=-\",",
                       "history --kind bench --model llama32_1b_q4nx --json --db '%s'", ndb);
    assert_null(strstr(out, "sweep"));
    free(out);

    /* A deployments file's dtypes table, and another runner. */
    char dep[1300];
    snprintf(dep, sizeof dep, "%s/dtypes.json", tu_group_tmp());
    FILE *f = fopen(dep, "w");
    assert_non_null(f);
    fputs("{\"deployments\": [], \"dtypes\": {\"_q4\": \"q4_k\"}}", f);
    fclose(f);
    snprintf(ndb, sizeof ndb, "%s/nightly2.db", tu_group_tmp());
    free(tu_cli(0, "tests/data/db/mlir-air/history_pre1867.ndjson: 6 rows named no runner: filed "
                "under board hx370 (--runner)",
             "import tests/data/db/mlir-air/history_pre1867.ndjson --runner hx370 "
             "--deployments '%s' --db '%s'", dep, ndb));
    free(tu_cli(0, "5,2026-08-12T07:02:48Z,qwen25_3b_q4 npu/q4_k @hx370,bench,skip,*",
             "history --format csv --db '%s'", ndb));
}

/* history: newest first in every format, the filters (board, dates, toolchain, metric),
 * none found said in words, and each bad filter refused naming the option at fault */
static void test_history(void **s)
{
    (void)s;
    need_history();
    char *out = tu_cli(0, "RUN DATE (UTC)           DEPLOYMENT                                     "
                       "KIND  GATE TTFT ms TPS   COMMIT FLAG\n"
                       "5   2025-03-13T00:00:00Z Qwen2.5-0.5B-Instruct npu/bf16 @npu-strix-01   "
                       "bench ?    199.70  34.10 -      imported\n"
                       "3   2025-03-11T02:10:31Z Llama-3.2-1B-Instruct npu/bf16 @npu-phoenix-02 "
                       "bench pass 661.40  11.00 -      imported",
                    "history --db '%s'", db);
    /* newest first: run 4 (03-12) above run 3 (03-11) */
    assert_true(strstr(out, "\n4   2025-03-12") < strstr(out, "\n3   2025-03-11"));
    free(out);
    out = tu_cli(0, "  \"schema\":\"npubench.history/1\",\n      \"source\":\"import\",\n"
                 "      \"kind\":\"bench\",",
              "history --json --limit 1 --db '%s'", db);
    const char *first = strstr(out, "\"run_id\":"); /* --limit 1: one run */
    assert_non_null(first);
    assert_null(strstr(first + 1, "\"run_id\""));
    free(out);
    free(tu_cli(0, "no runs of nothing-such in the history",
             "history --model nothing-such --db '%s'", db));
    /* a --db that names no file: refused, and not created empty (it was, silently) */
    char typo[1200];
    snprintf(typo, sizeof typo, "%s/typo.db", tu_group_tmp());
    free(tu_cli(2, "npubench history: --db *", "history --db '%s'", typo));
    assert_int_equal(access(typo, F_OK), -1);
    free(tu_cli(2, "npubench jobs: --db *", "jobs --db '%s'", typo));
    assert_int_equal(access(typo, F_OK), -1);
    free(tu_cli(0, "no runs in the history", "history --kind run --db '%s'", db));
    free(tu_cli(0, "| RUN | DATE (UTC) | DEPLOYMENT | KIND | GATE | TTFT ms | TTFT sd | TPS | TPS sd | COMMIT | FLAG |\n"
                "| 3 | 2025-03-11T02:10:31Z | Llama-3.2-1B-Instruct npu/bf16 @npu-phoenix-02 | "
                "bench | pass | - |  | - |  | - | imported |",
             "history --metric gate --board npu-phoenix-02 --since 2025-03-11 --until 2025-03-12 "
             "--format md --db '%s'", db));
    free(tu_cli(0, "RUN,DATE (UTC),DEPLOYMENT,KIND,GATE,TTFT ms,TTFT sd,TPS,TPS sd,COMMIT,FLAG\n"
                "4,2025-03-12T02:00:05Z,Llama-3.2-1B-Instruct npu/bf16 @npu-strix-01,bench,fail,"
                "471.00,,16.20,,-,imported",
             "history --toolchain peano=19.0.0.2025031101 --until 2025-03-13 --format csv "
             "--db '%s'", db));
    free(tu_cli(2, "npubench history: --metric 'decode': expected tps, ttft or gate",
             "history --metric decode --db '%s'", db));
    free(tu_cli(2, "npubench history: --kind 'nap': expected run, profile, verify, verify-full, "
                "diagnosis, bench or sweep",
             "history --kind nap --db '%s'", db));
    free(tu_cli(2, "npubench history: --since 'yesterday': expected YYYY-MM-DD, "
                "YYYY-MM-DDTHH:MM:SSZ or unix ms",
             "history --since yesterday --db '%s'", db));
    /* the field at fault is --until (the parser once named --since for both) */
    free(tu_cli(2, "npubench history: --until 'never': expected YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ "
                "or unix ms",
             "history --until never --db '%s'", db));
    /* a day the month lacks is refused, not rolled into March */
    free(tu_cli(2, "npubench history: --since '2025-02-30': not a valid date",
             "history --since 2025-02-30 --db '%s'", db));
    free(tu_cli(2, "npubench history: --until 2025-03-01 is not after --since",
             "history --since 2025-03-02 --until 2025-03-01 --db '%s'", db));
    free(tu_cli(2, "npubench history: --format 'yaml': expected text, json, csv or md",
             "history --format yaml --db '%s'", db));
    /* the option parser's errors name the option and, for a number, the allowed range */
    free(tu_cli(2, "npubench history: --limit: 'x' is not an integer", "history --limit x"));
    free(tu_cli(2, "npubench history: --limit: 0 is outside the allowed range 1..100000",
             "history --limit 0"));
    free(tu_cli(2, "npubench history: --limit needs a value", "history --limit"));
    free(tu_cli(2, "npubench history: --json takes no value", "history --json=1"));
    free(tu_cli(2, "npubench history: unexpected argument 'extra'", "history extra"));
    /* --name=value is the same as --name value */
    free(tu_cli(0, "RUN,DATE (UTC),DEPLOYMENT,KIND,GATE,TTFT ms,TTFT sd,TPS,TPS sd,COMMIT,FLAG\n5,*",
             "history --db='%s' --limit=1 --model=Qwen2.5-0.5B-Instruct --format=csv", db));
}

/* compare OLD NEW as text: the two runs named, one row per metric; one value a side is no
 * verdict ("~", exit 0) however large the change; --against names only 'reference' */
/* Untrusted text reaches no terminal raw: a run whose model and runner carry a title change
 * (ESC ] 0 ; ... BEL), a screen clear (ESC [ 2 J) and a C1 CSI prints them as \xHH in every
 * text format of `history`; the JSON keeps them escaped as JSON does. */
static void test_history_escapes_control_bytes(void **s)
{
    (void)s;
    char edb[1200], nd[1200];
    snprintf(edb, sizeof edb, "%s/escapes.db", tu_group_tmp());
    snprintf(nd, sizeof nd, "%s/escapes.ndjson", tu_group_tmp());
    FILE *f = fopen(nd, "w");
    assert_non_null(f);
    fputs("{\"date\": \"2025-03-10\", \"timestamp_utc\": \"2025-03-10T02:00:04Z\", "
          "\"run_id\": \"esc-1\", \"model\": \"Evil\\u001b]0;pwned\\u0007Model\", "
          "\"runner\": \"npu\\u001b[2J\\u009bbox\", \"ttft_ms\": 418.2, "
          "\"decode_tokens_per_sec\": 18.1, \"context_len\": 2048, \"verify_status\": "
          "\"PASS\"}\n",
          f);
    fclose(f);
    char *imp = tu_cli(0, "", "import '%s' --db '%s'", nd, edb);
    assert_non_null(strstr(imp, ": 1 run imported, 0 already stored, 0 bad"));
    free(imp);
    const char *formats[] = {"", "--format csv", "--format md"};
    for (int i = 0; i < 3; i++) {
        char *out = tu_cli(0, "", "history %s --db '%s'", formats[i], edb);
        assert_null(strchr(out, 0x1b));
        assert_null(strchr(out, 0x07));
        assert_null(strstr(out, "\xc2\x9b"));
        assert_non_null(strstr(out, "Evil\\x1b]0;pwned\\x07Model"));
        assert_non_null(strstr(out, "npu\\x1b[2J\\xc2\\x9bbox"));
        free(out);
    }
}

static void test_compare_text(void **s)
{
    (void)s;
    need_history();
    free(tu_cli(0, "run 4: Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01 (bench, "
                "2025-03-12T02:00:05Z)\n"
                "vs run 2: Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01 (bench, "
                "2025-03-11T02:00:07Z)\n"
                "Metric             | Base (run 2)   | New (run 4)    | Change (× / %)   | "
                "Mann-Whitney\n"
                "TTFT (ms)          | 415.90         | 471.00         | 1.13× / +13.2%   | p=1 (1 "
                "vs 1)  ~\n"
                "TPS (tokens/s)     | 18.30          | 16.20          | 0.89× / -11.5%   | p=1 (1 "
                "vs 1)  ~\n"
                "REGRESSION = worse beyond the noise band (±5%) and Mann-Whitney p < 0.05; ~ = "
                "not significant\n"
                "Outcome: pass (exit 0)",
             "compare 2 4 --db '%s'", db));
    /* the same word in JSON */
    free(tu_cli(0, "  \"outcome\":\"pass\",\n  \"exit_code\":0,",
             "compare 2 4 --json --db '%s'", db));
    free(tu_cli(0, "TTFT (ms)          | 418.20         | 415.90         | 0.99× / -0.5%    | p=1 (1 "
                "vs 1)  ~\n"
                "TPS (tokens/s)     | 18.10          | 18.30          | 1.01× / +1.1%    | p=1 (1 "
                "vs 1)  ~",
             "compare 1 2 --db '%s'", db));
    free(tu_cli(2, "npubench compare: --against 'yesterday': only 'reference' is known",
             "compare 4 --against yesterday --db '%s'", db));
}

/* reference: none set, set by run, shown per model in text and JSON, unset (naming what it
 * was), then gone: show and unset of a model without one are NOT_FOUND (exit 2) */
static void test_reference(void **s)
{
    (void)s;
    need_history();
    free(tu_cli(0, "no reference is set", "reference show --db '%s'", db));
    free(tu_cli(0, "reference of Llama-3.2-1B-Instruct: deployment 1 (Llama-3.2-1B-Instruct "
                "npu/bf16 on npu-strix-01)",
             "reference set --run 2 --db '%s'", db));
    free(tu_cli(0, "Llama-3.2-1B-Instruct: deployment 1 (Llama-3.2-1B-Instruct npu/bf16 on "
                "npu-strix-01), set *",
             "reference show Llama-3.2-1B-Instruct --db '%s'", db));
    free(tu_cli(0, "  \"schema\":\"npubench.reference/1\",\n"
                "      \"model\":\"Llama-3.2-1B-Instruct\",\n      \"deployment_id\":1,\n"
                "      \"deployment\":\"Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01\",",
             "reference show --json --db '%s'", db));
    free(tu_cli(0, "reference of Llama-3.2-1B-Instruct unset (was deployment 1, "
                "Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01)",
             "reference unset Llama-3.2-1B-Instruct --db '%s'", db));
    free(tu_cli(2, "npubench reference: error: NOT_FOUND: model 'Llama-3.2-1B-Instruct' has no "
                "reference deployment (set one with `npubench reference set DEPLOYMENT`) *",
             "reference show Llama-3.2-1B-Instruct --db '%s'", db));
    free(tu_cli(2, "npubench reference: error: NOT_FOUND: model 'Llama-3.2-1B-Instruct' has no "
                "reference deployment *",
             "reference unset Llama-3.2-1B-Instruct --db '%s'", db));
    free(tu_cli(2, "npubench reference: error: NOT_FOUND: job 999: no stored result *",
             "reference set --job 999 --db '%s'", db));
}

/* report --html: the dashboard's pages written from the database, one per deployment */
static void test_report_html(void **s)
{
    (void)s;
    need_history();
    char want[1400];
    snprintf(want, sizeof want, "%s/site/index.html: *", tu_group_tmp()); /* counts vary */
    free(tu_cli(0, want, "report --html '%s/site' --db '%s'", tu_group_tmp(), db));
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cd '%s/site' && ls index.html boards.html deployment-1.html "
             "deployment-1-tps.svg deployment-3.html | wc -l", tu_group_tmp());
    tu_result r = tu_run(cmd);
    assert_string_equal(r.out, "5\n");
    free(r.out);
    free(tu_cli(2, "npubench report: expected --html DIR", "report --db '%s'", db));
}

/* report --html: its usage, and each way it cannot write the site named (exit 2; a coordinator
 * that is not there, exit 3) */
static void test_report_errors(void **s)
{
    (void)s;
    need_history();
    char *out = tu_cli(0, "usage: npubench report --html DIR [--coordinator URL | --db PATH]\n"
                       "  --max-points N           runs per plot, newest (default 100)",
                    "report --help");
    free(out);
    free(tu_cli(2, "npubench report: --max-points: 10001 is outside the allowed range 1..10000",
             "report --html x --max-points 10001"));
    free(tu_cli(2, "npubench report: error: /dev/null/site: cannot create directory: Not a "
                "directory",
             "report --html /dev/null/site --db '%s'", db));
    /* a database that is not there: named, never created empty */
    free(tu_cli(2, "npubench report: --db /dev/null/h.db: no such database (a local run or "
                "`npubench import FILE --db` creates one)",
             "report --html '%s/site-db' --db /dev/null/h.db", tu_group_tmp()));
    char want[2600];
    snprintf(want, sizeof want, "npubench report: error: ipc://%s/none.sock: cannot connect: "
             "Connection refused (is the server running?)", tu_group_tmp());
    free(tu_cli(3, want, "report --html '%s/site-x' --coordinator 'ipc://%s/none.sock'",
             tu_group_tmp(), tu_group_tmp()));
    /* a page that cannot be written (a directory where index.html goes): named, nothing
     * claimed written */
    char dir[1300];
    snprintf(dir, sizeof dir, "mkdir -p '%s/site-ro/index.html'", tu_group_tmp());
    tu_result r = tu_run(dir);
    assert_int_equal(r.code, 0);
    free(r.out);
    snprintf(want, sizeof want, "npubench report: error: %s/site-ro/index.html: write failed: Is "
             "a directory", tu_group_tmp());
    out = tu_cli(2, want, "report --html '%s/site-ro' --db '%s'", tu_group_tmp(), db);
    assert_null(strstr(out, "files,"));
    free(out);
}

/* The dispatcher and the option parser through the binary: usage with no command, help,
 * version, -h, "--", and each bad option or duration named with its limit before any
 * connection or database is opened */
static void test_usage_and_options(void **s)
{
    (void)s;
    char *out = tu_cli(2, "usage: npubench <command> [options]   (npubench <command> --help)\n"
                       "  worker         serve a coordinator's jobs on this board's device "
                       "(long-lived)",
                    "");
    free(out);
    out = tu_cli(0, "usage: npubench <command> [options]   (npubench <command> --help)\n"
                 "  report         the dashboard as static files: report --html DIR",
              "help");
    free(out);
    free(tu_cli(0, "npubench " NB_VERSION " (*", "--version"));
    free(tu_cli(0, "npubench " NB_VERSION " (*", "version"));
    /* -h is --help: the usage on stdout, exit 0 */
    out = tu_cli(0, "  --limit N                newest N runs (default 50)", "history -h");
    assert_true(!strncmp(out, "usage: npubench history ", 24));
    free(out);
    /* after "--" a word that looks like a flag is a positional */
    free(tu_cli(2, "npubench cancel: expected a job id, got '--reason'", "cancel -- --reason"));
    /* a repeatable option holds 32 values */
    char tags[2048] = "";
    for (int i = 0; i < 33; i++)
        strcat(tags, " --tag t");
    free(tu_cli(2, "npubench submit: --tag given more than 32 times", "submit run%s", tags));
    /* durations: the option, the shape expected, the limit (30 days) */
    free(tu_cli(2, "npubench submit: --expire-after '0': expected a positive duration such as "
                "90s, 15m, 2h, 1d (plain numbers are seconds) or 'never'",
             "submit run --expire-after 0"));
    free(tu_cli(2, "npubench submit: --expire-after '31d': exceeds the limit of 2592000 s",
             "submit run --expire-after 31d"));
    /* a good one passes on to the next check */
    free(tu_cli(2, "npubench submit: needs a coordinator: --coordinator URL or "
                "$NPUBENCH_COORDINATOR",
             "submit run --expire-after 15m"));
    free(tu_cli(0, "usage: npubench coordinator --listen URL --db PATH [options]",
             "coordinator --help"));
    free(tu_cli(2, "npubench coordinator: --listen URL and --db PATH are required",
             "coordinator --db x"));
    const char *coord = "coordinator --listen ipc:///nonexistent/c.sock --db /nonexistent/c.db";
    free(tu_cli(2, "npubench coordinator: --expire-after '1y': expected a positive duration such "
                "as 90s, 15m, 2h, 1d (plain numbers are seconds) or 'never'",
             "%s --expire-after 1y", coord));
    free(tu_cli(2, "npubench coordinator: --health-interval '-1m': expected a positive duration "
                "such as 90s, 15m, 2h, 1d (plain numbers are seconds) or 'never'",
             "%s --health-interval -1m", coord));
    free(tu_cli(2, "npubench coordinator: --health-retry '721h': exceeds the limit of 2592000 s",
             "%s --health-retry 721h", coord));
    free(tu_cli(2, "npubench coordinator: --max-attempts: 101 is outside the allowed range 1..100",
             "%s --max-attempts 101", coord));
}

/* submit matrix's usage errors come before any connection: each names what is wrong */
static void test_matrix_usage(void **s)
{
    (void)s;
    free(tu_cli(2, "npubench submit matrix: --models A,B and --boards TAG are required",
             "submit matrix --models a"));
    free(tu_cli(2, "npubench submit matrix: --kinds 'health': expected run, verify, verify-full, "
                "diagnosis or profile",
             "submit matrix --models a --boards t --kinds health"));
    free(tu_cli(2, "npubench submit matrix: --format 'yaml': expected text, json, csv or md",
             "submit matrix --models a --boards t --format yaml"));
    free(tu_cli(2, "npubench submit matrix: --models and --kinds take 1 to 16 comma-separated names",
             "submit matrix --models a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q --boards t"));
    free(tu_cli(2, "npubench submit matrix: --models and --kinds take 1 to 16 comma-separated names",
             "submit matrix --models , --boards t"));
    free(tu_cli(2, "npubench workers: expected 'drain BOARD' or 'undrain BOARD'", "workers undrain"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import),         cmocka_unit_test(test_history),
        cmocka_unit_test(test_history_escapes_control_bytes),
        cmocka_unit_test(test_import_nightly),
        cmocka_unit_test(test_compare_text),   cmocka_unit_test(test_reference),
        cmocka_unit_test(test_report_html),    cmocka_unit_test(test_matrix_usage),
        cmocka_unit_test(test_report_errors),  cmocka_unit_test(test_usage_and_options),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
