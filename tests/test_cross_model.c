/* test_cross_model: cross-model in the service — one real worker serving SmolLM2 and Gemma 3
 * (`worker --deploy`), both gates PASS, `history --latest` and `compare` across models and boards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/stat.h>

#include <json-c/json.h>

#include "testutil.h"

#define GEMMA_FILE "models/gemma-3-270m-q4_k_m.gguf"
#define SMOL "SmolLM2-135M-Instruct"
#define GEMMA "gemma-3-270m" /* its display name: the file stem less "-q4_k_m" */
/* Short jobs: one prompt, four tokens; the engine on one thread so two workers share the
 * machine's cores without starving each other. */
#define JOB "--max-prompts 1 --n-tokens 4 --wait --coordinator '%s'"
#define WORKER "worker --coordinator '%s' --threads 1 --heartbeat-ms 200 --quiet "

static char url[1300], db[1200];
static pid_t coord_pid, wa_pid, wb_pid;

/* 1 when `workers --json` lists board alive with n deployments. */
static int worker_alive(const char *board, int n)
{
    char args[1600];
    snprintf(args, sizeof args, "workers --json --coordinator '%s'", url);
    tu_result r = tu_run_cli(args);
    json_object *root = r.code == 0 && r.out ? json_tokener_parse(r.out) : NULL, *ws;
    int ok = 0;
    if (root && json_object_object_get_ex(root, "workers", &ws))
        for (size_t i = 0; i < json_object_array_length(ws); i++) {
            json_object *w = json_object_array_get_idx(ws, i), *b, *s, *d;
            if (json_object_object_get_ex(w, "board", &b) &&
                json_object_object_get_ex(w, "state", &s) &&
                json_object_object_get_ex(w, "deployments", &d) &&
                !strcmp(json_object_get_string(b), board) &&
                !strcmp(json_object_get_string(s), "alive") &&
                (int)json_object_array_length(d) == n)
                ok = 1;
        }
    json_object_put(root);
    free(r.out);
    return ok;
}

/* Submits a job and waits; asserts exit 0 and the lines of want; the history run it wrote. */
static long long job(const char *want, const char *fmt, const char *model, const char *dtype,
                     const char *board)
{
    char args[2048];
    snprintf(args, sizeof args, fmt, model, dtype, board);
    char *out = tu_cli(0, want, "%s " JOB, args, url);
    const char *h = strstr(out, "History: run ");
    assert_non_null(h);
    long long id = atoll(h + 13);
    char on[64];
    snprintf(on, sizeof on, " on %s\n", board);
    assert_non_null(strstr(h, on));
    free(out);
    return id;
}

static long long verify(const char *model, const char *dtype, const char *board)
{
    return job("[verify] PASS (1/1 prompts pass)", "submit verify --model %s --dtype %s "
               "--board %s", model, dtype, board);
}

static long long perf(const char *model, const char *dtype, const char *board)
{
    return job("", "submit run --model %s --dtype %s --board %s", model, dtype, board);
}

static json_object *json_cli(int code, const char *fmt, ...)
{
    char args[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *out = tu_cli(code, "", "%s", args);
    json_object *root = json_tokener_parse(out);
    free(out);
    assert_non_null(root);
    return root;
}

static const char *str_of(json_object *o, const char *key)
{
    json_object *v;
    assert_true(json_object_object_get_ex(o, key, &v));
    return json_object_get_string(v);
}

static long long int_of(json_object *o, const char *key)
{
    json_object *v;
    assert_true(json_object_object_get_ex(o, key, &v));
    return (long long)json_object_get_int64(v);
}

/* One `history --latest --json` row: its deployment, gate, the run it starts from, and
 * where its metrics come from (TTFT/TPS from run perf, the gate from run gate). */
static void expect_latest(json_object *row, const char *model, const char *dtype,
                          const char *board, long long perf_run, long long gate_run)
{
    assert_string_equal(str_of(row, "model"), model);
    assert_string_equal(str_of(row, "dtype"), dtype);
    assert_string_equal(str_of(row, "backend"), "cpu");
    assert_string_equal(str_of(row, "board"), board);
    assert_string_equal(str_of(row, "gate"), "pass 1/1"); /* the outcome word, the prompts */
    assert_string_equal(str_of(row, "kind"), "run");
    assert_int_equal(int_of(row, "run_id"), perf_run);
    json_object *m, *ttft, *tps, *gate;
    assert_true(json_object_object_get_ex(row, "metrics", &m));
    assert_true(json_object_object_get_ex(m, "ttft_ms", &ttft));
    assert_true(json_object_object_get_ex(m, "tps", &tps));
    assert_true(json_object_object_get_ex(m, "gate", &gate));
    json_object *v;
    assert_true(json_object_object_get_ex(ttft, "value", &v) && json_object_get_double(v) > 0);
    assert_true(json_object_object_get_ex(tps, "value", &v) && json_object_get_double(v) > 0);
    assert_int_equal(int_of(gate, "run_id"), gate_run);
    assert_true(json_object_object_get_ex(gate, "value", &v));
    assert_true(json_object_get_double(v) == 1.0);
}

static json_object *latest_rows(json_object *doc, size_t n)
{
    json_object *runs;
    assert_true(json_object_object_get_ex(doc, "runs", &runs));
    assert_int_equal(json_object_array_length(runs), n);
    return runs;
}

/* A compare's JSON: its scope and outcome, every row's regression flag false. */
static void expect_compare(json_object *doc, const char *scope, long long run, long long base)
{
    assert_string_equal(str_of(doc, "scope"), scope);
    assert_string_equal(str_of(doc, "outcome"), "pass");
    assert_int_equal(int_of(doc, "exit_code"), 0);
    assert_int_equal(int_of(doc, "run_id"), run);
    assert_int_equal(int_of(doc, "base_run_id"), base);
    json_object *rows, *reg;
    assert_true(json_object_object_get_ex(doc, "rows", &rows));
    for (size_t i = 0; i < json_object_array_length(rows); i++) {
        assert_true(json_object_object_get_ex(json_object_array_get_idx(rows, i), "regression",
                                              &reg));
        assert_false(json_object_get_boolean(reg));
    }
}

static void test_cross_model(void **s)
{
    (void)s;
    tu_require_model();
    char gemma[2048];
    snprintf(gemma, sizeof gemma, "%s/" GEMMA_FILE, tu_require_src());
    tu_require(access(gemma, R_OK) == 0, GEMMA_FILE " is not fetched (scripts/fetch_model.sh "
                                         "gemma3)");
    char sock[1200];
    snprintf(sock, sizeof sock, "%s/c.sock", tu_group_tmp());
    snprintf(url, sizeof url, "ipc://%s", sock);
    snprintf(db, sizeof db, "%s/c.db", tu_group_tmp());
    coord_pid = tu_spawn("coord.log", "coordinator --listen '%s' --db '%s' --heartbeat-ms 200",
                         url, db);
    assert_true(tu_poll(20000, tu_ipc_ready(sock) || tu_exited(coord_pid)));

    /* one worker, both models, no deployments file; it registers once it has hashed both
     * models' weights (seconds, ~25 s under ASan): a deadline, not a sleep */
    wa_pid = tu_spawn("wa.log", WORKER "--board lab-a --device cpu:40 --deploy instruct:bf16 "
                      "--deploy gemma3:native", url);
    assert_true(tu_poll(120000, worker_alive("lab-a", 2)));
    long long smol_gate = verify("instruct", "bf16", "lab-a");
    long long gemma_gate = verify("gemma3", "native", "lab-a");
    long long smol_perf = perf("instruct", "bf16", "lab-a");
    long long gemma_perf = perf("gemma3", "native", "lab-a");

    /* both models on that board side by side: the newest TTFT/TPS and the newest gate */
    json_object *doc = json_cli(0, "history --latest --json --coordinator '%s'", url);
    json_object *rows = latest_rows(doc, 2);
    expect_latest(json_object_array_get_idx(rows, 0), SMOL, "bf16", "lab-a", smol_perf,
                  smol_gate);
    expect_latest(json_object_array_get_idx(rows, 1), GEMMA, "native", "lab-a", gemma_perf,
                  gemma_gate);
    json_object_put(doc);
    char want[1024];
    snprintf(want, sizeof want,
             "RUN,DATE (UTC),DEPLOYMENT,KIND,GATE,TTFT ms,TTFT sd,TPS,TPS sd,COMMIT,FLAG\n"
             "\"%lld,%lld\",*\n\"%lld,%lld\",*",
             smol_perf, smol_gate, gemma_perf, gemma_gate);
    char *out = tu_cli(0, want, "history --latest --format csv --coordinator '%s'", url);
    assert_non_null(strstr(out, "," SMOL " cpu/bf16 @lab-a,\"run,verify\",pass 1/1,"));
    assert_non_null(strstr(out, "," GEMMA " cpu/native @lab-a,\"run,verify\",pass 1/1,"));
    free(out);

    /* two models: both sides and ratios, no regression verdict, exit 0; OLD NEW order */
    snprintf(want, sizeof want,
             "run %lld: " GEMMA " cpu/native on lab-a (run, *\n"
             "vs run %lld: " SMOL " cpu/bf16 on lab-a (run, *\n"
             "cross-model comparison: side by side (TTFT, TPS, gate, ratios), no regression "
             "verdict\nTTFT (ms)          | *\nTPS (tokens/s)     | *",
             gemma_perf, smol_perf);
    out = tu_cli(0, want, "compare %lld %lld --coordinator '%s'", smol_perf, gemma_perf, url);
    assert_null(strstr(out, "REGRESSION"));
    free(out);
    doc = json_cli(0, "compare %lld %lld --json --coordinator '%s'", smol_perf, gemma_perf, url);
    expect_compare(doc, "cross-model", gemma_perf, smol_perf);
    json_object_put(doc);
    snprintf(want, sizeof want,
             "cross-model comparison: side by side (TTFT, TPS, gate, ratios), no regression "
             "verdict\ngate: run %lld PASS (1/1 prompts pass), run %lld PASS (1/1 prompts pass)",
             gemma_gate, smol_gate);
    out = tu_cli(0, want, "compare %lld %lld --coordinator '%s'", smol_gate, gemma_gate, url);
    assert_null(strstr(out, "Verify: ")); /* prompt i of one set is not prompt i of the other */
    free(out);

    /* a second board for one model: one row per board, a like-with-like compare */
    wb_pid = tu_spawn("wb.log", WORKER "--board lab-b --device cpu:41 --deploy instruct", url);
    assert_true(tu_poll(120000, worker_alive("lab-b", 1)));
    long long b_gate = verify("instruct", "bf16", "lab-b");
    long long b_perf = perf("instruct", "bf16", "lab-b");
    doc = json_cli(0, "history --model instruct --latest --json --coordinator '%s'", url);
    rows = latest_rows(doc, 2);
    expect_latest(json_object_array_get_idx(rows, 0), SMOL, "bf16", "lab-a", smol_perf,
                  smol_gate);
    expect_latest(json_object_array_get_idx(rows, 1), SMOL, "bf16", "lab-b", b_perf, b_gate);
    json_object_put(doc);
    doc = json_cli(0, "history --latest --board lab-b --json --coordinator '%s'", url);
    expect_latest(json_object_array_get_idx(latest_rows(doc, 1), 0), SMOL, "bf16", "lab-b",
                  b_perf, b_gate);
    json_object_put(doc);
    doc = json_cli(0, "history --latest --json --coordinator '%s'", url);
    latest_rows(doc, 3);
    json_object_put(doc);

    /* same model across boards: the gate compared prompt by prompt, a verdict, exit 0 */
    snprintf(want, sizeof want,
             "same model across boards: compared as usual\n"
             "Verify: 1 prompt in both runs, 0 changed outcome or divergence step");
    free(tu_cli(0, want, "compare %lld %lld --coordinator '%s'", smol_gate, b_gate, url));
    /* timings of two boards sharing this machine's cores differ by chance: a tolerance
     * wider than any such difference keeps the verdict exact */
    doc = json_cli(0, "compare %lld %lld --tolerance 1000 --json --coordinator '%s'", smol_perf,
                   b_perf, url);
    expect_compare(doc, "cross-board", b_perf, smol_perf);
    json_object_put(doc);

    /* stopped cleanly, no process reported a memory error, UB or a leak (ASan builds) */
    tu_stop(&wb_pid);
    tu_stop(&wa_pid);
    tu_stop(&coord_pid);
    char grep[1600];
    snprintf(grep, sizeof grep, "grep -l -e Sanitizer -e 'runtime error' '%s'/*.log",
             tu_group_tmp());
    tu_result r = tu_run(grep);
    if (r.code != 1)
        fail_msg("sanitizer reports in: %s", r.out ? r.out : "?");
    free(r.out);
}

static int teardown(void **state)
{
    tu_stop(&wb_pid);
    tu_stop(&wa_pid);
    tu_stop(&coord_pid);
    return tu_group_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_model),
    };
    return tu_run_group(tests, tu_group_setup, teardown);
}
