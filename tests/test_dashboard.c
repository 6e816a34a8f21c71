/* test_dashboard: the dashboard's pages from a seeded database (rows, plots, band, flagged
 * runs, escaping, links of the export), a real coordinator serving them to headless Chromium
 * behind the client key, and docs/ci-example.sh run against a real coordinator and worker. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_dash.h"
#include "nb_db.h"
#include "nb_db_boards.h"
#include "nb_db_deploy.h"
#include "nb_db_jobs.h"
#include "nb_db_regress.h"
#include <json-c/json.h>
#include "nb_db_runs.h"
#include "nb_db_workers.h"
#include "nb_svg.h"
#include "nb_time.h"
#include "nb_wire.h"
#include "png_read.h"
#include "testdb.h"
#include "testutil.h"

#define N_PERF 12        /* profile runs of deployment A */
#define HOSTILE "<script>alert(1)</script>&x"

/* What the seed put in the database: the expectations of every check below. */
static struct {
    char db[1024];
    int64_t dep[3];        /* A, B, C */
    size_t n_deps, n_workers, n_queued, n_flagged;
    size_t n_boards, n_never_checked; /* boards on the page; those no check has run on */
    int64_t flagged[N_PERF];
    int64_t ttft_flagged, tps_flagged; /* flagged on that metric alone */
    size_t n_cold;                     /* A's second series ("run", 32 tokens, 4 threads) */
    int64_t verify_old_b, verify_new_b, verify_a; /* matrix cells */
    int64_t queued_job;
    size_t gate_checks_new_b;
    int seeded;
} seed;

static char cmd[16384];

/* The coordinator and worker processes the tests share (0 = not started). */
static struct {
    pid_t coord, worker;
    char rpc[256], http[256], client_key[1024], worker_key[1024], key[128];
    int ci_ran;
} lab;

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static char *page(nb_db *db, const char *name)
{
    char *out = NULL;
    size_t len = 0;
    const char *ct = NULL;
    nb_err err = {0};
    nb_code rc = nb_dash_page(db, NULL, name, &out, &len, &ct, &err);
    if (rc)
        fail_msg("page %s: %s", name, err.msg);
    assert_int_equal(strlen(out), len);
    return out;
}

/* The page of one job or run: kind "job" or "run", as the dashboard names them. */
static char *item_page(nb_db *db, const char *kind, int64_t id)
{
    char name[64];
    snprintf(name, sizeof name, "%s-%" PRId64 ".html", kind, id);
    return page(db, name);
}

static int64_t add_dep(nb_db *db, const char *model, const char *backend, const char *board)
{
    nb_db_deployment d;
    memset(&d, 0, sizeof d);
    snprintf(d.model, sizeof d.model, "%s", model);
    snprintf(d.backend, sizeof d.backend, "%s", backend);
    snprintf(d.dtype, sizeof d.dtype, "bf16");
    snprintf(d.board, sizeof d.board, "%s", board);
    int64_t id = 0;
    nb_err err = {0};
    if (nb_db_deployment_upsert(db, &d, &id, &err))
        fail_msg("%s", err.msg);
    seed.dep[seed.n_deps++] = id;
    return id;
}

static int64_t add_run(nb_db *db, nb_db_run *r)
{
    int64_t id = 0;
    nb_err err = {0};
    if (nb_db_run_insert(db, r, &id, &err))
        fail_msg("%s", err.msg);
    return id;
}

/* What deployment A's run i ran with: mlir-air a1b2c3d.. for runs 0-3, b7c8d9e.. for 4-7,
 * c0ffee1.. after (two commit changes, three commits); NPU driver 2.19.0 before run 6 and
 * 2.20.0 from it (a third change); one firmware throughout. */
#define SEED_EVENTS 3
#define SEED_COMMITS 3
static void seed_toolchain(int i, nb_db_kv tc[3])
{
    tc[0] = (nb_db_kv){"air_sha", i < 4   ? "a1b2c3d4e5f60718"
                                  : i < 8 ? "b7c8d9e0f1a23344"
                                          : "c0ffee1234567890"};
    tc[1] = (nb_db_kv){"driver", i < 6 ? "2.19.0" : "2.20.0"};
    tc[2] = (nb_db_kv){"firmware", "1.5.2.380"};
}

/* Three deployments (one named to break HTML), two workers (one hostile board name), a
 * TPS/TTFT history with flagged runs, verify runs for the matrix, one queued job. */
static void seed_db(void)
{
    snprintf(seed.db, sizeof seed.db, "%s/dash.db", tu_group_tmp());
    nb_db *db = NULL;
    nb_err err = {0};
    if (nb_db_open(seed.db, NULL, &db, &err))
        fail_msg("%s", err.msg);
    /* strix-01 healthy with its probe's versions, strix-q quarantined, strix-d drained, the
     * hostile one never checked (no row: unknown) */
    const char *boards[4] = {"strix-01", HOSTILE, "strix-q", "strix-d"};
    for (int i = 0; i < 4; i++) {
        nb_db_worker w;
        memset(&w, 0, sizeof w);
        snprintf(w.id, sizeof w.id, "w%d", i);
        snprintf(w.board_name, sizeof w.board_name, "%s", boards[i]);
        snprintf(w.board_type, sizeof w.board_type, "npu4");
        snprintf(w.version, sizeof w.version, i ? "" : "0.1.0");
        snprintf(w.backends, sizeof w.backends, "cpu");
        if (nb_db_worker_upsert(db, &w, &err))
            fail_msg("%s", err.msg);
        seed.n_workers++;
    }
    nb_db_board_versions ver = {.driver = "2.19.0", .firmware = "1.5.2.380", .xrt = "2.19.0",
                              .kernel_path = "avx2", .cpu_model = "AMD Ryzen AI 9 HX 370",
                              .toolchain = "gcc 12.2.0, npubench 1fe6ab1"};
    if (nb_db_board_set_versions(db, "strix-01", &ver, &err) ||
        nb_db_board_set_health(db, "strix-01", NB_HEALTH_OK, "health check job 7: verify PASS",
                               &err) ||
        nb_db_board_set_health(db, "strix-q", NB_HEALTH_FAILED,
                               "health check job 8: verify FAIL " HOSTILE, &err) ||
        nb_db_board_set_drained(db, "strix-d", 1, &err))
        fail_msg("%s", err.msg);
    seed.n_boards = 4;
    seed.n_never_checked = 2; /* the hostile board and strix-d */
    int64_t a = add_dep(db, "SmolLM2-135M-Instruct", "cpu", "strix-01");
    int64_t b = add_dep(db, "Llama-3.2-1B-Instruct", "npu", "strix-02");
    add_dep(db, HOSTILE, "npu", "strix-02");
    int64_t t0 = nb_wall_ms() - 86400000LL;
    for (int i = 0; i < N_PERF; i++) {
        nb_db_run r;
        nb_db_run_init(&r);
        r.deployment_id = a;
        r.kind = "profile";
        r.outcome = NB_OUTCOME_PASS;
        r.started_ms = t0 + i * 60000LL;
        /* a steady series with two slow runs the check flagged */
        int slow = i == 7 || i == 10;
        r.value[NB_METRIC_TPS] = slow ? 80.0 : 100.0 + (i % 3);
        r.value[NB_METRIC_TTFT] = slow ? 60.0 : 40.0 + (i % 2);
        r.stddev[NB_METRIC_TPS] = 1.5;
        r.reps = 3;
        r.regression = slow;
        /* run 7 flagged on TPS only, run 10 on TTFT only (as the check writes its detail) */
        r.regression_detail = i == 7    ? "tps -20.0% (p=0.01, 3 vs 21 samples)"
                              : i == 10 ? "ttft +50.0% (median 60 vs 40, p=0.01, 3 vs 21 "
                                          "samples)"
                                        : NULL;
        nb_db_kv tc[3];
        seed_toolchain(i, tc);
        r.toolchain = tc;
        r.n_toolchain = 3;
        /* a profile's breakdown, as the worker's report carries it */
        r.report_json = i == 7 ? "{\"phases\": [{\"name\": \"prefill\", \"avg_ms\": 12.5}, "
                                 "{\"name\": \"decode\", \"avg_ms\": 3.25}], \"kernels\": "
                                 "[{\"name\": \"qkv_proj\", \"total_ms\": 40}, {\"name\": "
                                 "\"attention\", \"total_ms\": 25}, {\"name\": \"lm_head\", "
                                 "\"total_ms\": 9.5}]}"
                               : NULL;
        int64_t id = add_run(db, &r);
        if (slow)
            seed.flagged[seed.n_flagged++] = id;
        if (i == 10)
            seed.ttft_flagged = id;
        else if (i == 7)
            seed.tps_flagged = id;
        /* a second series between them: cold 32-token runs on 4 threads, slower; the
         * plots joined them with the profiles into one line */
        if (i % 2) {
            nb_db_run_init(&r);
            r.deployment_id = a;
            r.kind = "run";
            r.outcome = NB_OUTCOME_PASS;
            r.started_ms = t0 + i * 60000LL + 30000;
            r.generated_tokens = 32;
            r.env.threads = 4;
            r.value[NB_METRIC_TPS] = 60.0 + (i % 4);
            r.value[NB_METRIC_TTFT] = 70.0 + (i % 3);
            seed_toolchain(i, tc);
            r.toolchain = tc;
            r.n_toolchain = 3;
            add_run(db, &r);
            seed.n_cold++;
        }
    }
    /* the matrix: an old PASS and a newer FAIL of B (the newer shows), a PASS of A */
    /* B's FAIL: prompt 0 passes; 1, 2 and 3 fail, localized (as verify/nb_localize writes it)
     * to layer 7's MLP, to the KV cache (NaN stored as null; a near tie it outranks), and one
     * whose stored localization is damaged */
    nb_db_gate_check gc[4];
    memset(gc, 0, sizeof gc);
    for (int i = 0; i < 4; i++) {
        gc[i].prompt_index = i;
        gc[i].steps = 32;
        gc[i].divergence_step = i ? 3 : -1;
        gc[i].device_text = i ? HOSTILE : "ok";
        gc[i].ref_text = "ok";
        gc[i].status = i ? "FAIL" : "PASS";
    }
    gc[1].localization_verdict = "layer";
    gc[1].localization_json =
        "{\"verdict\":\"layer\",\"summary\":\"layer 7 mlp: hidden-state cosine 0.6437 to the "
        "reference (threshold 0.99) at step 0; KV cache / decode path clean (steps 1..2)\","
        "\"source\":\"engine\",\"note\":\"\",\"near_tie\":false,\"ref_margin\":1.75,"
        "\"near_tie_band\":0.25,\"kv\":\"clean\",\"kv_steps\":2,\"kv_first_bad_step\":-1,"
        "\"kv_max_diff\":0.0,\"kv_tolerance\":0.25,\"layers_status\":\"fault\",\"step\":0,"
        "\"first_layer\":7,\"sub_block\":\"mlp\",\"threshold\":0.99,\"final_norm_cos\":0.6349,"
        "\"final_norm_max_abs\":41.5,\"layers\":["
        "{\"layer\":6,\"cos_attn\":0.99999,\"max_abs_attn\":0.01,\"cos_mlp\":0.99999,"
        "\"max_abs_mlp\":0.02},"
        "{\"layer\":7,\"cos_attn\":0.99999,\"max_abs_attn\":0.02,\"cos_mlp\":0.64373,"
        "\"max_abs_mlp\":12.5},"
        "{\"layer\":8,\"cos_attn\":0.67898,\"max_abs_attn\":13.1,\"cos_mlp\":0.68005,"
        "\"max_abs_mlp\":14.2}],\"ms\":123.4}";
    gc[2].localization_verdict = "kv_cache";
    gc[2].localization_json =
        "{\"verdict\":\"kv_cache\",\"summary\":\"KV cache / decode path: decode step 1 gives NaN "
        "logits " HOSTILE "\",\"source\":\"engine\",\"note\":\"the trace has no hidden states\","
        "\"near_tie\":true,\"ref_margin\":0.125,\"near_tie_band\":0.25,\"kv\":\"fault\","
        "\"kv_steps\":1,\"kv_first_bad_step\":1,\"kv_max_diff\":null,\"kv_tolerance\":0.25,"
        "\"layers_status\":\"none\",\"step\":-1,\"first_layer\":-1,\"sub_block\":\"\","
        "\"threshold\":0.99,\"final_norm_cos\":null,\"final_norm_max_abs\":null,"
        "\"layers\":[],\"ms\":80}";
    gc[3].localization_verdict = "layer";
    gc[3].localization_json = "{\"verdict\": \"lay";
    /* prompt 0: the production gate's PASS with a decode-path defect (the summary hostile) */
    gc[0].decode_status = "fault";
    gc[0].decode_check_json =
        "{\"status\":\"fault\",\"steps\":4,\"first_bad_step\":1,\"max_diff\":2.125,"
        "\"tolerance\":0.25,\"ms\":90,\"summary\":\"decode-path defect: decode step 1 "
        "differs " HOSTILE "\",\"note\":\"\"}";
    gc[1].decode_status = "clean";
    gc[1].decode_check_json = "{\"status\":\"clean\",\"summary\":\"decode path clean\"}";
    gc[2].decode_status = "fault";
    gc[2].decode_check_json = "{\"summary\": \"dam";
    const struct {
        int64_t dep;
        nb_db_outcome o;
        int64_t at;
        int64_t *id;
    } v[3] = {{b, NB_OUTCOME_PASS, t0, &seed.verify_old_b},
              {b, NB_OUTCOME_FAIL, t0 + 3600000LL, &seed.verify_new_b},
              {a, NB_OUTCOME_PASS, t0 + 60000LL, &seed.verify_a}};
    for (int i = 0; i < 3; i++) {
        nb_db_run r;
        nb_db_run_init(&r);
        r.deployment_id = v[i].dep;
        r.kind = "verify";
        r.outcome = v[i].o;
        r.started_ms = v[i].at;
        r.report_json = "{\"verdict\": \"<b>x</b>\"}";
        /* B's runs name their reference as the coordinator stores it (a float32 one on
         * the GPU for the failing run: flagged); A's none */
        nb_db_kv ref[2][2] = {{{"reference_dtype", "bfloat16"}, {"reference_device", "cpu"}},
                              {{"reference_dtype", "float32"},
                               {"reference_device", "cuda (NVIDIA H200) " HOSTILE}}};
        if (i < 2) {
            r.toolchain = ref[i];
            r.n_toolchain = 2;
        }
        if (i == 1) {
            r.gate_checks = gc;
            r.n_gate_checks = 4;
            seed.gate_checks_new_b = 4;
        }
        /* A's PASS: a 1-prompt smoke, which must not read as a full set's PASS */
        nb_db_gate_check smoke = {.prompt_index = 0, .steps = 8, .divergence_step = -1,
                                  .device_text = "ok", .ref_text = "ok", .status = "PASS"};
        if (i == 2) {
            r.gate_checks = &smoke;
            r.n_gate_checks = 1;
        }
        *v[i].id = add_run(db, &r);
    }
    nb_db_job_new j;
    memset(&j, 0, sizeof j);
    j.kind = "verify";
    j.spec = "{}";
    j.spec_len = 2;
    j.spec_format = NB_SPEC_JSON;
    j.sel.board = "nowhere";
    j.sel.deployment = "instruct/*";
    int64_t jid = 0;
    if (nb_db_job_enqueue(db, &j, &jid, NULL, &err))
        fail_msg("%s", err.msg);
    seed.n_queued = 1;
    seed.queued_job = jid;
    nb_db_close(db);
    seed.seeded = 1;
}

/* ---- pages rendered in-process ---- */

/* B's failing verify run's page (as rendered, or as the browser parsed it): each stored
 * localization's verdict and key numbers; the damaged one said so, the page whole. */
static void expect_localization(const char *p)
{
    assert_int_equal(count(p, "<div class=\"localization\""), 3);
    /* the gate table names the verdicts */
    assert_int_equal(count(p, "<td class=\"loc-verdict\">layer 7 mlp</td>"), 1);
    assert_int_equal(count(p, "<td class=\"loc-verdict\">KV cache / decode path</td>"), 1);
    /* first diverging layer and sub-block, with the numbers */
    assert_non_null(strstr(p, "<h3>Prompt 1: <span class=\"loc-verdict\">layer 7 mlp</span>"));
    assert_non_null(strstr(p, "<b>layer 7, mlp</b>: cosine 0.64373, max abs 12.5 (threshold "
                              "0.99) at step 0"));
    assert_non_null(strstr(p, "1.750 logits (near-tie band 0.25): not a near tie"));
    assert_non_null(strstr(p, "clean over decode steps 1..2: largest difference 0.0000 logits, "
                              "tolerance 0.25"));
    assert_non_null(strstr(p, "cosine 0.63490, max abs 41.5"));
    assert_int_equal(count(p, "<tr class=\"loc-drop\"><td>7</td>"), 1);
    assert_int_equal(count(p, "<tr class=\"loc-l\">"), 2);
    /* the per-layer cosines as a line chart (it was a table only), the first drop marked */
    assert_int_equal(count(p, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"cosines\""),
                     1);
    assert_int_equal(count(p, "<path class=\"cos-mlp\""), 1);
    assert_int_equal(count(p, "<path class=\"cos-attn\""), 1);
    assert_int_equal(count(p, "<line class=\"drop\""), 1);
    assert_non_null(strstr(p, "<title>first drop: layer 7, 0.64373</title>"));
    assert_non_null(strstr(p, "<line class=\"threshold\""));
    assert_true(count(p, "<text class=\"ytick\"") >= 3);
    /* KV cache / decode path: the step, an unknown (NaN) difference; the near tie it outranks */
    assert_non_null(strstr(p, "<h3>Prompt 2: <span class=\"loc-verdict\">KV cache / decode "
                              "path</span>"));
    assert_non_null(strstr(p, "<b>fault at decode step 1</b>: largest difference from a "
                              "cache-free prefill unknown logits"));
    assert_non_null(strstr(p, "0.125 logits (near-tie band 0.25): a near tie"));
    assert_non_null(strstr(p, "the trace has no hidden states"));
    assert_non_null(strstr(p, "decode step 1 gives NaN logits &lt;script&gt;"));
    /* the decode-path column: a flagged PASS (yellow, said in the status), a clean one, a
     * damaged record said so, one never checked */
    assert_int_equal(count(p, "<td class=\"warn\">PASS (decode-path defect)</td>"), 1);
    assert_non_null(strstr(p, "<td class=\"decode-fault\">decode-path defect: decode step 1 "
                              "differs &lt;script&gt;"));
    assert_int_equal(count(p, "<td class=\"decode-ok\">decode path clean</td>"), 1);
    assert_int_equal(count(p, "<td class=\"decode-fault\">unreadable decode-path check</td>"), 1);
    assert_int_equal(count(p, "<td class=\"decode-ok\">not checked</td>"), 1);
    /* the damaged one */
    assert_int_equal(count(p, "<p class=\"loc-unreadable\">gate_checks.localization: "), 1);
    assert_non_null(strstr(p, "<h3>Prompt 3: <span class=\"loc-verdict\">a layer (not named"));
}

/* The boards page (as rendered, or as the browser parsed it): every board's health, last
 * check, drain and versions, once in the workers' table and once in the boards'. */
static void expect_board_health(const char *p)
{
    assert_int_equal(count(p, "<tr class=\"board-health\">"), seed.n_boards);
    assert_int_equal(count(p, "<td class=\"health pass\">ok</td>"), 2);
    assert_int_equal(count(p, "<td class=\"health fail\">failed (quarantined)</td>"), 2);
    assert_int_equal(count(p, "<td class=\"health unknown\">unknown</td>"),
                     2 * (seed.n_boards - 2));
    assert_int_equal(count(p, "<td class=\"drain drained\">drained</td>"), 2);
    assert_int_equal(count(p, "<td class=\"drain\">no</td>"), 2 * (seed.n_boards - 1));
    /* checked: an age and the time; never for the boards no check ran on */
    assert_int_equal(count(p, "<td class=\"checked\">never</td>"), 2 * seed.n_never_checked);
    assert_int_equal(count(p, " s ago <small>"), 2 * (seed.n_boards - seed.n_never_checked));
    assert_non_null(strstr(p, "<td class=\"detail\">health check job 7: verify PASS</td>"));
    assert_non_null(strstr(p, "health check job 8: verify FAIL &lt;script&gt;"));
    /* the probe's versions where the worker reported them, unknown elsewhere */
    const char *versions[] = {"2.19.0", "1.5.2.380", "2.19.0", "avx2", "AMD Ryzen AI 9 HX 370",
                              "gcc 12.2.0, npubench 1fe6ab1"};
    char row[1024] = "";
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        snprintf(row + strlen(row), sizeof row - strlen(row), "<td class=\"version\">%s</td>",
                 versions[i]);
    assert_non_null(strstr(p, row));
    assert_int_equal(count(p, "<td class=\"version\">unknown</td>"), 6 * (seed.n_boards - 1));
}

/* The text between the opening of the element with id and the next plot's (or the end). */
static char *plot_part(const char *p, const char *id)
{
    char open[96];
    snprintf(open, sizeof open, "<div class=\"plot\" id=\"%s\">", id);
    const char *a = strstr(p, open);
    if (!a)
        fail_msg("no plot %s on the page", id);
    const char *b = strstr(a + strlen(open), "<div class=\"plot\"");
    return strndup(a, b ? (size_t)(b - a) : strlen(a));
}

/* Deployment A's plots (as rendered, or as the browser parsed them): what each draws. */
static void expect_plots(const char *p)
{
    static const char *const ids[4] = {"plot-ttft", "plot-tps", "plot-ttft-commit",
                                       "plot-tps-commit"};
    char flagged[96], other[96];
    for (int k = 0; k < 4; k++) {
        char *q = plot_part(p, ids[k]);
        int ttft = k % 2 == 0, by_commit = k >= 2;
        /* one line, one band, one legend entry per series key: the profiles and the cold
         * 32-token runs (they were one line) */
        assert_int_equal(count(q, "<path class=\"series\""), 2);
        assert_int_equal(count(q, "<path class=\"band\""), 2);
        assert_int_equal(count(q, "<g class=\"legend-entry\""), 2);
        assert_int_equal(count(q, "<g class=\"series-0\""), 1);
        assert_int_equal(count(q, "<g class=\"series-1\""), 1);
        assert_non_null(strstr(q, ">profile (12 runs)</text>"));
        assert_non_null(strstr(q, ">run, 32 tokens, 4 threads (6 runs)</text>"));
        assert_non_null(strstr(q, "class=\"legend-note\""));
        assert_int_equal(count(q, "<circle class=\"pt"), N_PERF + seed.n_cold);
        /* the regression red on the plot of the metric it was flagged on, only there */
        assert_int_equal(count(q, "class=\"pt regression\""), 1);
        snprintf(flagged, sizeof flagged, "<a href=\"run-%" PRId64 ".html\"><circle class=\"pt regression\"",
                 ttft ? seed.ttft_flagged : seed.tps_flagged);
        snprintf(other, sizeof other, "<a href=\"run-%" PRId64 ".html\"><circle class=\"pt\"",
                 ttft ? seed.tps_flagged : seed.ttft_flagged);
        assert_non_null(strstr(q, flagged));
        assert_non_null(strstr(q, other));
        /* the probe's events on the time axis: the driver and two mlir-air changes */
        assert_int_equal(count(q, "<line class=\"event\""), by_commit ? 0 : SEED_EVENTS);
        if (!by_commit) {
            assert_non_null(strstr(q, ">driver 2.20.0</text>"));
            assert_non_null(strstr(q, ">mlir-air b7c8d9e</text>"));
            assert_non_null(strstr(q, ">mlir-air c0ffee1</text>"));
            assert_true(count(q, "<text class=\"xtick\"") >= 2);
        } else {
            /* x by commit: a tick per mlir-air commit, in order */
            assert_int_equal(count(q, "<text class=\"ctick\""), SEED_COMMITS);
            const char *a = strstr(q, ">a1b2c3d<"), *b = strstr(q, ">b7c8d9e<"),
                       *c = strstr(q, ">c0ffee1<");
            assert_true(a && b && c && a < b && b < c);
            assert_non_null(strstr(q, "by mlir-air commit"));
        }
        free(q);
    }
}

static void test_pages(void **s)
{
    (void)s;
    seed_db();
    nb_db *db = NULL;
    nb_err err = {0};
    if (nb_db_open(seed.db, NULL, &db, &err))
        fail_msg("%s", err.msg);

    char *p = page(db, "index.html");
    assert_int_equal(count(p, "<tr class=\"deployment\">"), seed.n_deps);
    assert_null(strstr(p, "<script"));
    assert_non_null(strstr(p, "&lt;script&gt;alert(1)&lt;/script&gt;&amp;x"));
    assert_non_null(strstr(p, "1 quarantined, 1 drained"));
    /* the gate column: B's newest verify FAILs (it showed as "-"), linked to its run; the
     * page reloads itself */
    assert_non_null(strstr(p, "<th>Board</th><th>Gate</th>"));
    char gcell[160];
    /* in the outcome words, with the prompts the verdict stands on (item 14: a 1-prompt smoke
     * PASS looked like a full set's) */
    snprintf(gcell, sizeof gcell, "<td class=\"gate fail\"><a href=\"run-%" PRId64 ".html\">fail 1/4</a>",
             seed.verify_new_b);
    assert_non_null(strstr(p, gcell));
    assert_non_null(strstr(p, "<meta http-equiv=\"refresh\" content=\"30\">"));
    free(p);

    p = page(db, "boards.html");
    assert_int_equal(count(p, "<tr class=\"board\">"), seed.n_workers);
    assert_null(strstr(p, "<script"));
    assert_int_equal(count(p, "<td class=\"alive\">alive</td>"), seed.n_workers);
    assert_non_null(strstr(p, "<td>0.1.0</td>")); /* a version where one was registered */
    expect_board_health(p);
    free(p);

    p = page(db, "queue.html");
    assert_int_equal(count(p, "<tr class=\"job\">"), seed.n_queued);
    assert_non_null(strstr(p, "<meta http-equiv=\"refresh\" content=\"10\">")); /* live */
    /* the outcome in the words `npubench jobs` uses, apart from the state */
    assert_non_null(strstr(p, "<th>State</th><th>Outcome</th>"));
    assert_int_equal(count(p, "<td class=\"outcome none\">pending</td>"), seed.n_queued);
    free(p);
    /* a run the regression check flagged fails on its page, as in `npubench job` (it was a
     * green "Outcome PASS") */
    p = item_page(db, "run", seed.flagged[0]);
    assert_non_null(strstr(p, "<th>Outcome</th><td class=\"fail\">fail (REGRESSION: tps -20.0%"));
    /* its profile breakdown as bar charts with an axis, not only raw JSON */
    assert_non_null(strstr(p, "<div class=\"plot\" id=\"profile-phases\">"));
    assert_non_null(strstr(p, "<div class=\"plot\" id=\"profile-kernels\">"));
    assert_int_equal(count(p, "<rect class=\"bar\""), 5);
    assert_non_null(strstr(p, ">qkv_proj</text>"));
    assert_true(count(p, "<text class=\"ytick\"") >= 6);
    free(p);

    /* deployment A: a line, band and legend entry per series key, flags on their metric's
     * plot only, the probe's events, a second plot per metric by mlir-air commit */
    char name[64];
    snprintf(name, sizeof name, "deployment-%" PRId64 ".html", seed.dep[0]);
    p = page(db, name);
    expect_plots(p);
    for (size_t i = 0; i < seed.n_flagged; i++) {
        char link[64];
        snprintf(link, sizeof link, "<a href=\"run-%" PRId64 ".html\"><circle class=\"pt regression\"",
                 seed.flagged[i]);
        assert_non_null(strstr(p, link));
    }
    /* the runs table: the profiles, the cold runs and the verify of A */
    assert_int_equal(count(p, "<tr class=\"run\">"), N_PERF + seed.n_cold + 1);
    assert_int_equal(count(p, "<td class=\"regression\">REGRESSION</td>"), seed.n_flagged);
    /* a flagged run's outcome in the table is the fail its page and `npubench job` give */
    assert_int_equal(count(p, "<td class=\"fail\">fail</td><td>"),
                     seed.n_flagged);
    free(p);

    /* a deployment without TTFT/TPS runs still has its two plots, saying so */
    snprintf(name, sizeof name, "deployment-%" PRId64 ".html", seed.dep[1]);
    p = page(db, name);
    assert_int_equal(count(p, "class=\"nodata\""), 2);
    free(p);

    /* the matrix shows the newest verify of each model x board */
    p = page(db, "matrix.html");
    assert_int_equal(count(p, "<tr class=\"matrix-row\">"), 2);
    char cellref[64];
    snprintf(cellref, sizeof cellref, "href=\"run-%" PRId64 ".html\">fail 1/4<", seed.verify_new_b);
    assert_non_null(strstr(p, cellref));
    snprintf(cellref, sizeof cellref, "href=\"run-%" PRId64 ".html\"", seed.verify_old_b);
    assert_null(strstr(p, cellref));
    snprintf(cellref, sizeof cellref, "href=\"run-%" PRId64 ".html\">pass 1/1<", seed.verify_a);
    assert_non_null(strstr(p, cellref));
    free(p);

    /* a run's page: its gate records and its report, escaped */
    p = item_page(db, "run", seed.verify_new_b);
    assert_int_equal(count(p, "<tr class=\"gate-check\">"), seed.gate_checks_new_b);
    assert_null(strstr(p, "<script"));
    assert_null(strstr(p, "<b>x</b>"));
    assert_non_null(strstr(p, "&lt;b&gt;x&lt;/b&gt;"));
    expect_localization(p);
    /* the run's outcome counts its decode-path defects; the reference as its trace says */
    assert_non_null(strstr(p, "<th>Outcome</th><td class=\"fail\">fail 1/4 prompts (2 decode-path defects)"));
    assert_non_null(strstr(p, "<tr><th>Reference</th><td class=\"warn\">float32 on cuda "
                              "(NVIDIA H200) &lt;script&gt;"));
    assert_non_null(strstr(p, "not bfloat16, its margins and near ties are not the bf16 gate's"));
    free(p);
    /* a run without localizations has no such section */
    p = item_page(db, "run", seed.verify_old_b);
    assert_null(strstr(p, "Localization"));
    free(p);

    /* the SVG alone is a document of its own */
    snprintf(name, sizeof name, "deployment-%" PRId64 "-tps.svg", seed.dep[0]);
    char *svg = NULL;
    size_t len;
    const char *ct;
    assert_int_equal(nb_dash_page(db, NULL, name, &svg, &len, &ct, &err), NB_OK);
    assert_string_equal(ct, "image/svg+xml");
    assert_true(!strncmp(svg, "<?xml", 5));
    assert_int_equal(count(svg, "<circle class=\"pt"), N_PERF + seed.n_cold);
    assert_int_equal(count(svg, "<path class=\"series\""), 2);
    free(svg);

    /* names that are no page: not found, never a crash or another file */
    const char *bad[] = {"run-0.html", "run-01.html", "run-99999999.html", "run-1.htmlx",
                         "run--1.html", "../etc/passwd", "deployment-1-x.svg",
                         "run-99999999999999999999.html", "index.htm", "RUN-1.html", NULL};
    for (size_t i = 0; bad[i]; i++) {
        char *o = NULL;
        nb_code rc = nb_dash_page(db, NULL, bad[i], &o, &len, &ct, &err);
        if (rc != NB_ENOTFOUND)
            fail_msg("%s: code %d, want NB_ENOTFOUND", bad[i], (int)rc);
        assert_null(o);
    }
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    char *o = NULL;
    assert_int_equal(nb_dash_page(db, NULL, longname, &o, &len, &ct, &err), NB_ENOTFOUND);
    assert_int_equal(nb_dash_page(db, NULL, NULL, &o, &len, &ct, &err), NB_ENOTFOUND);
    nb_db_close(db);
}

/* The band: the median of the previous runs, widened by the check's threshold. */
static void test_band(void **s)
{
    (void)s;
    nb_svg_point pts[5];
    const double v[5] = {10, 30, 20, NAN, 50};
    for (int i = 0; i < 5; i++)
        pts[i] = (nb_svg_point){.run_id = i + 1, .when_ms = 1000 * (i + 1), .value = v[i],
                                .stddev = NAN};
    nb_svg_plot p = {.title = "t", .pts = pts, .n = 5, .band_runs = 3, .band_rel = 0.1};
    double lo, hi;
    assert_int_equal(nb_svg_band(&p, 0, &lo, &hi), 0); /* nothing before the first */
    assert_int_equal(nb_svg_band(&p, 1, &lo, &hi), 1);
    assert_true(fabs(lo - v[0] * 0.9) < 1e-9 && fabs(hi - v[0] * 1.1) < 1e-9);
    /* point 4: the previous 3 finite values are 10, 30, 20 (the NaN is skipped): median 20 */
    assert_int_equal(nb_svg_band(&p, 4, &lo, &hi), 1);
    assert_true(fabs(lo - 18.0) < 1e-9 && fabs(hi - 22.0) < 1e-9);
    p.band_runs = 1; /* only the one before: 20 (point 3 is NaN) */
    assert_int_equal(nb_svg_band(&p, 4, &lo, &hi), 1);
    assert_true(fabs(lo - 18.0) < 1e-9);
}

/* nb_svg_chart_write alone: a legend entry per series in its colour, the commit axis's ticks
 * thinned to fit (12 commits: every second), events escaped, one before the first run (no
 * run before it to differ from) left out, no time ticks on a commit axis. */
static void test_chart(void **s)
{
    (void)s;
    nb_svg_point a[12], b[3];
    const char *commits[12];
    char names[12][24]; /* room for any int the -O1 build assumes i could be */
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "%02dabcdef99", i);
        commits[i] = names[i];
        a[i] = (nb_svg_point){.run_id = i + 1, .when_ms = 1764800000000LL + 60000LL * i,
                              .value = 10 + i % 3, .stddev = NAN, .slot = i};
    }
    for (int i = 0; i < 3; i++)
        b[i] = (nb_svg_point){.run_id = 20 + i, .when_ms = 1764800000000LL, .value = 30,
                              .stddev = NAN, .slot = 4 * i, .regression = i == 2};
    nb_svg_series ser[2] = {{"profile", a, 12}, {"run, 32 tokens <b>", b, 3}};
    nb_svg_mark marks[2] = {{0, "driver before everything"}, {5, "firmware <i>9</i>"}};
    nb_svg_chart c = {.title = "TTFT", .unit = "ms", .band_runs = 10, .band_rel = 0.05,
                      .series = ser, .n_series = 2, .n_slots = 12, .slot_text = commits,
                      .xlabel = "mlir-air commit", .marks = marks, .n_marks = 2};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    nb_err err;
    assert_int_equal(nb_svg_chart_write(f, &c, &err), NB_OK);
    fclose(f);
    assert_int_equal(count(buf, "<g class=\"legend-entry\""), 2);
    char swatch[64];
    for (size_t k = 0; k < 2; k++) {
        snprintf(swatch, sizeof swatch, "r=\"3\" fill=\"%s\"/>", nb_svg_series_colour(k));
        assert_int_equal(count(buf, swatch), 1); /* the legend's swatch */
    }
    assert_non_null(strstr(buf, ">run, 32 tokens &lt;b&gt; (3 runs)</text>"));
    assert_int_equal(count(buf, "<text class=\"ctick\""), 6);
    assert_non_null(strstr(buf, ">00abcde<title>00abcdef99</title>"));
    assert_non_null(strstr(buf, ">10abcde<"));
    assert_null(strstr(buf, ">11abcde<"));
    assert_int_equal(count(buf, "<text class=\"xtick\""), 0);
    assert_int_equal(count(buf, "<line class=\"event\""), 1);
    assert_non_null(strstr(buf, ">firmware &lt;i&gt;9&lt;/i&gt;</text>"));
    assert_null(strstr(buf, "driver before everything"));
    assert_int_equal(count(buf, "class=\"pt regression\""), 1);
    assert_non_null(strstr(buf, "by mlir-air commit"));
    free(buf);
}

/* Which metrics a stored regression concerns, read from its detail as the check writes it;
 * flagged without a metric named: all (never silently none). */
static void test_regression_metrics(void **s)
{
    (void)s;
    assert_int_equal(nb_db_regression_metrics(0, "tps -20.0% (p=0.01)"), 0);
    assert_int_equal(nb_db_regression_metrics(1, "tps -20.0% (p=0.01, 3 vs 21 samples)"),
                     1u << NB_METRIC_TPS);
    assert_int_equal(nb_db_regression_metrics(1, "ttft +8.0% (median 1 vs 2, p=0.01); decode "
                                                 "+9.1% (p=0.02)"),
                     (1u << NB_METRIC_TTFT) | (1u << NB_METRIC_DECODE));
    assert_int_equal(nb_db_regression_metrics(1, "TPOT +5%"), 1u << NB_METRIC_TPOT);
    const unsigned all = (1u << NB_METRIC_N) - 1;
    assert_int_equal(nb_db_regression_metrics(1, NULL), all);
    assert_int_equal(nb_db_regression_metrics(1, ""), all);
    assert_int_equal(nb_db_regression_metrics(1, "tpsx -1%; ttfts"), all);
}

/* What a plot draws, asserted (not only that an <svg> exists): value ticks at round steps
 * with a gridline each, time ticks, the unit, an error bar per run with a spread, and no
 * axis below zero for a quantity that cannot be (it had min/max labels only, and a band or
 * an error bar could push the axis negative). */
static void test_plot_axes(void **s)
{
    (void)s;
    double t[16];
    size_t nt;
    nb_svg_ticks(0, 10, t, 16, &nt);
    assert_int_equal(nt, 6);
    for (size_t i = 0; i < nt; i++)
        assert_true(fabs(t[i] - 2.0 * (double)i) < 1e-9);
    nb_svg_ticks(0.13, 0.91, t, 16, &nt);
    assert_true(nt >= 3 && nt <= 8);
    assert_true(fabs(t[0] - 0.2) < 1e-9 && fabs(t[1] - t[0] - 0.2) < 1e-9);

    nb_svg_point pts[4];
    const double v[4] = {1.0, 2.0, 1.5, 2.5};
    for (int i = 0; i < 4; i++)
        pts[i] = (nb_svg_point){.run_id = i + 1, .when_ms = 1764800000000LL + 3600000LL * i,
                                .value = v[i], .stddev = 3.0};
    nb_svg_plot p = {.title = "TPS", .pts = pts, .n = 4, .band_runs = 2, .band_rel = 0.05,
                     .higher_is_better = 1, .unit = "tokens/s", .nonnegative = 1};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    nb_err err;
    assert_int_equal(nb_svg_plot_write(f, &p, &err), NB_OK);
    fclose(f);
    print_message("%s", buf);
    size_t ticks = count(buf, "<text class=\"ytick\"");
    assert_true(ticks >= 3 && ticks <= 8);
    assert_int_equal(count(buf, "<line class=\"grid\""), ticks);
    assert_int_equal(count(buf, "<text class=\"xtick\""), 4);
    assert_int_equal(count(buf, "<line class=\"xgrid\""), 4);
    assert_int_equal(count(buf, "<line class=\"errbar\""), 4);
    assert_non_null(strstr(buf, "class=\"ylabel\""));
    assert_non_null(strstr(buf, ">tokens/s</text>"));
    assert_non_null(strstr(buf, ">0</text>")); /* the axis starts at 0 ... */
    for (const char *q = buf; (q = strstr(q, "<text class=\"ytick\"")); q++) {
        const char *gt = strchr(q, '>');
        assert_non_null(gt);
        assert_true(gt[1] != '-'); /* ... and never below it */
    }
    free(buf);
}

/* ---- the export: every link of every page resolves inside the export ---- */

typedef struct files {
    char names[4096][NB_DASH_NAME_MAX];
    char *data[4096];
    size_t n;
} files;

static nb_code keep(void *ud, const char *name, const char *data, size_t len, nb_err *err)
{
    files *f = ud;
    if (f->n >= 4096)
        return nb_err_set(err, NB_ENOMEM, "too many files");
    snprintf(f->names[f->n], NB_DASH_NAME_MAX, "%s", name);
    f->data[f->n] = strndup(data, len);
    f->n++;
    return NB_OK;
}

static int has_file(const files *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name))
            return 1;
    return 0;
}

/* Every link of the exported files f names a file f holds (fails naming it); their count. */
static size_t export_links(const files *f)
{
    size_t links = 0;
    for (size_t i = 0; i < f->n; i++) {
        for (const char *p = f->data[i]; (p = strstr(p, "href=\"")); ) {
            p += 6;
            size_t l = strcspn(p, "\"");
            char target[NB_DASH_NAME_MAX + 1];
            assert_true(l < sizeof target);
            memcpy(target, p, l);
            target[l] = '\0';
            if (strncmp(target, "http", 4)) { /* the SVG namespace is no link */
                if (!has_file(f, target))
                    fail_msg("%s links to %s, which the export does not hold", f->names[i],
                             target);
                links++;
            }
        }
    }
    return links;
}

/* ---- a job's page and its live log ---- */

/* nb_dash_page's code for name (the page freed). */
static nb_code page_code(nb_db *db, const char *name, const char **ct)
{
    char *o = NULL;
    size_t len = 0;
    nb_err err = {0};
    nb_code rc = nb_dash_page(db, NULL, name, &o, &len, ct, &err);
    if (rc)
        assert_null(o);
    free(o);
    return rc;
}

/* The log endpoint's answer, parsed. */
static json_object *log_json(nb_db *db, int64_t job, const char *query)
{
    char name[128];
    snprintf(name, sizeof name, "job-%" PRId64 "-log.json%s", job, query);
    char *out = NULL;
    size_t len = 0;
    const char *ct = NULL;
    nb_err err = {0};
    if (nb_dash_page(db, NULL, name, &out, &len, &ct, &err))
        fail_msg("%s: %s", name, err.msg);
    assert_string_equal(ct, "application/json");
    json_object *o = json_tokener_parse(out);
    if (!o)
        fail_msg("%s: not JSON: %s", name, out);
    free(out);
    return o;
}

static int64_t jget(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("no %s", key);
    return json_object_get_int64(v);
}

/* A running job that was requeued once (its page follows the log live) and a finished one
 * whose run the regression check flagged (its page stands still and says fail). */
static void test_job_pages(void **s)
{
    (void)s;
    nb_db *db = tdb_open("jobs.db");
    nb_err err = {0};
    nb_db_worker w;
    memset(&w, 0, sizeof w);
    snprintf(w.id, sizeof w.id, "wj");
    snprintf(w.board_name, sizeof w.board_name, "strix-01");
    snprintf(w.backends, sizeof w.backends, "cpu");
    snprintf(w.deployments, sizeof w.deployments, "*");
    if (nb_db_worker_upsert(db, &w, &err))
        fail_msg("%s", err.msg);
    nb_db_job_new jn;
    memset(&jn, 0, sizeof jn);
    jn.kind = "profile";
    jn.spec = "{\"reps\": 5}";
    jn.spec_len = strlen(jn.spec);
    jn.spec_format = NB_SPEC_JSON;
    jn.sel.board = "strix-01";
    jn.sel.deployment = "instruct/q4_1";
    int64_t run_job = 0, done_job = 0;
    nb_db_job j;
    int found = 0;
    assert_int_equal(nb_db_job_enqueue(db, &jn, &run_job, NULL, &err), NB_OK);
    /* leased, given back (a requeue with its cause), leased again, two log lines, progress */
    assert_int_equal(nb_db_job_lease(db, &w, NULL, NULL, 60000, &j, &found, &err), NB_OK);
    assert_true(found);
    assert_int_equal(nb_db_job_release(db, run_job, j.lease_id, "worker stopping", &err), NB_OK);
    nb_db_job_free(&j);
    assert_int_equal(nb_db_job_lease(db, &w, NULL, NULL, 60000, &j, &found, &err), NB_OK);
    assert_int_equal(j.id, run_job);
    assert_int_equal(nb_db_job_set_progress(db, run_job, j.lease_id, 2, 5, "repetition 2", &err),
                     NB_OK);
    assert_int_equal(nb_db_job_append_log(db, run_job, "[wj] 1/5 loading " HOSTILE, &err), NB_OK);
    assert_int_equal(nb_db_job_append_log(db, run_job, "[wj] 2/5 repetition 2", &err), NB_OK);
    nb_db_job_free(&j);
    /* the finished one: a run the regression check flagged */
    jn.kind = "run";
    assert_int_equal(nb_db_job_enqueue(db, &jn, &done_job, NULL, &err), NB_OK);
    assert_int_equal(nb_db_job_lease(db, &w, NULL, NULL, 60000, &j, &found, &err), NB_OK);
    assert_int_equal(j.id, done_job);
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = tdb_deployment(db, "strix-01");
    r.kind = "run";
    r.outcome = NB_OUTCOME_PASS;
    r.started_ms = nb_wall_ms();
    r.value[NB_METRIC_TPS] = 50;
    r.regression = 1;
    r.regression_detail = "tps -50.0%";
    nb_db_job_result res = {.state = NB_JOB_DONE, .runs = &r, .n_runs = 1};
    int64_t run_id = 0;
    assert_int_equal(nb_db_job_complete(db, done_job, j.lease_id, &res, &run_id, NULL, &err),
                     NB_OK);
    nb_db_job_free(&j);

    /* the queue's rows link to the job pages */
    char *p = page(db, "queue.html"), want[256];
    snprintf(want, sizeof want, "<td><a href=\"job-%" PRId64 ".html\">%" PRId64 "</a></td>",
             run_job, run_job);
    assert_non_null(strstr(p, want));
    snprintf(want, sizeof want, "<a href=\"job-%" PRId64 ".html\">", done_job);
    assert_non_null(strstr(p, want));
    free(p);

    /* the running job: what it is, where it stands, why it was requeued, its log, live */
    p = item_page(db, "job", run_job);
    assert_non_null(strstr(p, "<tr><th>Kind</th><td>profile</td></tr>"));
    assert_non_null(strstr(p, "<tr><th>Model</th><td>SmolLM2-135M-Instruct</td></tr>"));
    assert_non_null(strstr(p, "<tr><th>Dtype</th><td>q4_1</td></tr>"));
    assert_non_null(strstr(p, "<tr><th>Board</th><td>strix-01</td></tr>"));
    assert_non_null(strstr(p, "&quot;reps&quot;: 5"));
    assert_non_null(strstr(p, "<td id=\"job-state\">running</td>"));
    assert_non_null(strstr(p, "<td class=\"outcome none\">pending</td>"));
    /* the second attempt runs, as the log's "attempt 2 of 3" says */
    assert_non_null(strstr(p, "<tr><th>Attempts</th><td>2 of 3</td></tr>"));
    assert_non_null(strstr(p, "<tr><th>Backend</th><td>any</td></tr>")); /* not asked, no run */
    assert_int_equal(count(p, "<li class=\"requeue\">"), 1);
    assert_non_null(strstr(p, "released by worker wj: worker stopping; retry 2 of 3</li>"));
    assert_non_null(strstr(p, "<td id=\"job-progress\">2/5 repetition 2</td>"));
    /* enqueued, leased, requeued, leased again, the worker's two lines */
    assert_int_equal(count(p, "<span class=\"log-line\">"), 6);
    assert_non_null(strstr(p, "leased to worker wj (attempt 2 of 3"));
    assert_non_null(strstr(p, "[wj] 1/5 loading &lt;script&gt;alert(1)&lt;/script&gt;&amp;x"));
    assert_non_null(strstr(p, "No run stored yet."));
    /* live: the page reloads itself while the job runs (the pages carry no script) and
     * points at the lines after its last as JSON */
    assert_null(strstr(p, "<script"));
    assert_non_null(strstr(p, "<meta http-equiv=\"refresh\" content=\"5\">"));
    snprintf(want, sizeof want, "<code>job-%" PRId64 "-log.json?after=", run_job);
    assert_non_null(strstr(p, want));
    free(p);

    /* the log endpoint: every line, then only those after K */
    json_object *o = log_json(db, run_job, ""), *lines, *v;
    assert_true(json_object_object_get_ex(o, "lines", &lines));
    assert_int_equal(json_object_array_length(lines), 6);
    int64_t seq1 = jget(json_object_array_get_idx(lines, 3), "seq"); /* leased again */
    int64_t seq3 = jget(json_object_array_get_idx(lines, 5), "seq");
    assert_int_equal(jget(o, "next"), seq3);
    assert_true(json_object_object_get_ex(o, "finished", &v) && !json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(o, "state", &v));
    assert_string_equal(json_object_get_string(v), "running");
    json_object_put(o);
    char q[64];
    snprintf(q, sizeof q, "?after=%" PRId64, seq1);
    o = log_json(db, run_job, q);
    assert_true(json_object_object_get_ex(o, "lines", &lines));
    assert_int_equal(json_object_array_length(lines), 2);
    assert_true(jget(json_object_array_get_idx(lines, 0), "seq") > seq1);
    assert_true(json_object_object_get_ex(json_object_array_get_idx(lines, 0), "text", &v));
    assert_string_equal(json_object_get_string(v), "[wj] 1/5 loading " HOSTILE);
    json_object_put(o);
    snprintf(q, sizeof q, "?x=1&after=%" PRId64, seq3);
    o = log_json(db, run_job, q);
    assert_true(json_object_object_get_ex(o, "lines", &lines));
    assert_int_equal(json_object_array_length(lines), 0);
    assert_int_equal(jget(o, "next"), seq3);
    json_object_put(o);
    /* a line appended later is what the next poll gets */
    assert_int_equal(nb_db_job_append_log(db, run_job, "[wj] 3/5 repetition 3", &err), NB_OK);
    o = log_json(db, run_job, q);
    assert_true(json_object_object_get_ex(o, "lines", &lines));
    assert_int_equal(json_object_array_length(lines), 1);
    json_object_put(o);

    /* the finished job: its outcome in the CLI's word (a flagged run fails), its run linked,
     * no script and no reload */
    p = item_page(db, "job", done_job);
    assert_non_null(strstr(p, "<td id=\"job-state\">done</td>"));
    assert_non_null(strstr(p, "<tr><th>Attempts</th><td>1 of 3</td></tr>"));
    /* a field the job left open: where its run ran */
    assert_non_null(strstr(p, "<tr><th>Backend</th><td>cpu <small>(where it ran)</small></td>"));
    assert_non_null(strstr(p, "<tr><th>Outcome</th><td class=\"outcome fail\">fail</td></tr>"));
    snprintf(want, sizeof want, "<a href=\"run-%" PRId64 ".html\">run %" PRId64 "</a>", run_id,
             run_id);
    assert_non_null(strstr(p, want));
    assert_non_null(strstr(p, "<td class=\"fail\">fail (REGRESSION)</td>"));
    assert_null(strstr(p, "<script"));
    assert_null(strstr(p, "http-equiv=\"refresh\""));
    free(p);
    /* the run's page links back to its job's page */
    p = item_page(db, "run", run_id);
    snprintf(want, sizeof want, "<tr><th>Job</th><td><a href=\"job-%" PRId64 ".html\">job %" PRId64
                                "</a></td></tr>",
             done_job, done_job);
    assert_non_null(strstr(p, want));
    free(p);
    o = log_json(db, done_job, "");
    assert_true(json_object_object_get_ex(o, "finished", &v) && json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(o, "outcome", &v));
    assert_string_equal(json_object_get_string(v), "fail");
    json_object_put(o);

    /* cancelled while it ran: the attempt it was on counts, as its log's "attempt 1 of 3" (the
     * page said 0 of 3) */
    int64_t cancelled_job = 0;
    assert_int_equal(nb_db_job_enqueue(db, &jn, &cancelled_job, NULL, &err), NB_OK);
    assert_int_equal(nb_db_job_lease(db, &w, NULL, NULL, 60000, &j, &found, &err), NB_OK);
    assert_int_equal(j.id, cancelled_job);
    nb_db_job_free(&j);
    assert_int_equal(nb_db_job_cancel(db, cancelled_job, "cancelled by a person", &err), NB_OK);
    p = item_page(db, "job", cancelled_job);
    assert_non_null(strstr(p, "<td id=\"job-state\">cancelled</td>"));
    assert_non_null(strstr(p, "leased to worker wj (attempt 1 of 3"));
    assert_non_null(strstr(p, "<tr><th>Attempts</th><td>1 of 3</td></tr>"));
    free(p);

    /* a sharded verify-full: its group stores the run (one per board), so a shard's page
     * shows where it ran and what it came to from the group's run on its worker's board (it
     * said "any" and "-"), and the group, never leased, has no "0 of 3" attempts */
    int64_t group = 0, shard = 0;
    nb_db_job_new gn = {.kind = "verify-full", .spec = "{}", .spec_len = 2,
                        .spec_format = NB_SPEC_JSON, .is_group = 1};
    gn.sel.deployment = "instruct";
    assert_int_equal(nb_db_begin(db, &err), NB_OK);
    assert_int_equal(nb_db_job_enqueue(db, &gn, &group, NULL, &err), NB_OK);
    nb_db_job_new sn = gn;
    sn.is_group = 0;
    sn.parent_id = group;
    assert_int_equal(nb_db_job_enqueue(db, &sn, &shard, NULL, &err), NB_OK);
    assert_int_equal(nb_db_commit(db, &err), NB_OK);
    assert_int_equal(nb_db_job_lease(db, &w, NULL, NULL, 60000, &j, &found, &err), NB_OK);
    assert_int_equal(j.id, shard);
    nb_db_job_result none = {.state = NB_JOB_DONE};
    assert_int_equal(nb_db_job_complete(db, shard, j.lease_id, &none, NULL, NULL, &err), NB_OK);
    nb_db_job_free(&j);
    nb_db_run_init(&r);
    r.deployment_id = tdb_deployment(db, "strix-01");
    r.job_id = group;
    r.kind = "verify-full";
    r.outcome = NB_OUTCOME_PASS;
    r.started_ms = nb_wall_ms();
    int64_t group_run = 0;
    assert_int_equal(nb_db_run_insert(db, &r, &group_run, &err), NB_OK);
    p = item_page(db, "job", shard);
    assert_non_null(strstr(p, "<tr><th>Dtype</th><td>q4_1 <small>(where it ran)</small></td>"));
    assert_non_null(strstr(p, "<tr><th>Backend</th><td>cpu <small>(where it ran)</small></td>"));
    assert_non_null(strstr(p, "<tr><th>Outcome</th><td class=\"outcome pass\">pass</td></tr>"));
    snprintf(want, sizeof want, "<a href=\"run-%" PRId64 ".html\">", group_run);
    assert_non_null(strstr(p, want));
    free(p);
    p = item_page(db, "job", group);
    assert_null(strstr(p, "<tr><th>Attempts</th><td>0 of"));
    assert_non_null(strstr(p, "<tr><th>Attempts</th><td>its jobs"));
    free(p);

    /* a job as the coordinator stores it (a protobuf spec): its parameters listed, escaped */
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    Npubench__KeyValue kv = NPUBENCH__KEY_VALUE__INIT, *kvs[1] = {&kv};
    sel.model = "instruct";
    sel.dtype = "q4_1";
    sel.board = "strix-01";
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    spec.selector = &sel;
    spec.n_tokens = 8;
    spec.reps = 3;
    spec.prompt = "say " HOSTILE;
    kv.key = "threads";
    kv.value = "2";
    spec.params = kvs;
    spec.n_params = 1;
    uint8_t *pb = NULL;
    size_t pb_len = 0;
    assert_int_equal(nb_wire_pack(&spec, &pb, &pb_len, &err), NB_OK);
    jn.kind = "run";
    jn.spec = pb;
    jn.spec_len = pb_len;
    jn.spec_format = NB_SPEC_PROTO;
    int64_t pb_job = 0;
    assert_int_equal(nb_db_job_enqueue(db, &jn, &pb_job, NULL, &err), NB_OK);
    free(pb);
    p = item_page(db, "job", pb_job);
    assert_non_null(strstr(p, "<tr><th>Model</th><td>SmolLM2-135M-Instruct</td></tr>\n"
                              "<tr><th>Asked as</th><td>instruct</td></tr>"));
    assert_non_null(strstr(p, "<tr><th>Dtype</th><td>q4_1</td></tr>"));
    assert_non_null(strstr(p, "<li>tokens 8</li><li>repetitions 3</li>"));
    assert_non_null(strstr(p, "<li>prompt <q>say &lt;script&gt;alert(1)&lt;/script&gt;&amp;x</q>"));
    assert_non_null(strstr(p, "<li>threads=2</li>"));
    assert_non_null(strstr(p, "<td class=\"outcome none\">pending</td>"));
    assert_null(strstr(p, "<script"));
    free(p);

    /* bad ids: a clear refusal (400 over HTTP) or not found (404), never a crash */
    const char *ct;
    const char *const einval[] = {"job-abc.html", "job-0.html", "job--1.html", "job-01.html",
                                  "job-99999999999999999999.html", "job-1x.html",
                                  "job-abc-log.json", NULL};
    for (size_t i = 0; einval[i]; i++)
        if (page_code(db, einval[i], &ct) != NB_EINVAL)
            fail_msg("%s: want NB_EINVAL", einval[i]);
    assert_int_equal(page_code(db, "job-999999.html", &ct), NB_ENOTFOUND);
    assert_int_equal(page_code(db, "job-999999-log.json", &ct), NB_ENOTFOUND);
    assert_int_equal(page_code(db, "job-922337203685477580.html", &ct), NB_ENOTFOUND);
    snprintf(want, sizeof want, "job-%" PRId64 "-log.json?after=x", run_job);
    assert_int_equal(page_code(db, want, &ct), NB_EINVAL);
    snprintf(want, sizeof want, "job-%" PRId64 "-log.json?after=-1", run_job);
    assert_int_equal(page_code(db, want, &ct), NB_EINVAL);
    snprintf(want, sizeof want, "job-%" PRId64 "-log.json?after=99999999999999999999", run_job);
    assert_int_equal(page_code(db, want, &ct), NB_EINVAL);
    assert_int_equal(page_code(db, "job-1", &ct), NB_ENOTFOUND);
    /* exported: every job page and every run, each link held (a run's job page among them) */
    files *f = calloc(1, sizeof *f);
    assert_non_null(f);
    size_t n = 0;
    if (nb_dash_export(db, NULL, keep, f, &n, &err))
        fail_msg("%s", err.msg);
    assert_true(export_links(f) > 0);
    snprintf(want, sizeof want, "job-%" PRId64 ".html", done_job);
    assert_true(has_file(f, want));
    snprintf(want, sizeof want, "run-%" PRId64 ".html", run_id);
    assert_true(has_file(f, want));
    for (size_t i = 0; i < f->n; i++)
        free(f->data[i]);
    free(f);
    nb_db_close(db);
}

/* A flagged run of deployment dep (series by threads) at t; flagged 0: an ordinary run. */
static int64_t lifecycle_run(nb_db *db, int64_t dep, int64_t t, int threads, int flagged)
{
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = dep;
    r.kind = "profile";
    r.outcome = NB_OUTCOME_PASS;
    r.started_ms = t;
    r.env.threads = threads;
    r.value[NB_METRIC_TPS] = flagged ? 70 : 100;
    r.regression = flagged;
    r.regression_detail = flagged ? "tps -30.0% " HOSTILE : NULL;
    return add_run(db, &r);
}

/* The regressions page and a flagged run's page: each regression's state and history. */
static void test_regress_pages(void **s)
{
    (void)s;
    nb_db *db = tdb_open("regress.db");
    nb_err err = {0};
    int64_t dep = tdb_deployment(db, "strix-01");
    int64_t t = nb_wall_ms() - 3600000;
    int64_t a = lifecycle_run(db, dep, t, 4, 1), b = lifecycle_run(db, dep, t + 1000, 4, 1);
    nb_db_regression g;
    assert_int_equal(nb_db_regress_of_run(db, a, &g, &err), NB_OK);
    assert_int_equal(nb_db_regress_ack(db, g.id, "lead", "driver 2.19 " HOSTILE, NULL, &err),
                     NB_OK);
    lifecycle_run(db, dep, t + 2000, 1, 0);                    /* another series: no fix */
    int64_t fix = lifecycle_run(db, dep, t + 3000, 4, 0);      /* the series back: fixes both */
    int64_t e = lifecycle_run(db, dep, t + 4000, 4, 1), f = lifecycle_run(db, dep, t + 5000, 4, 1);
    assert_int_equal(nb_db_regress_of_run(db, f, &g, &err), NB_OK);
    assert_int_equal(nb_db_regress_ack(db, g.id, "lead", "looking", NULL, &err), NB_OK);

    char *p = page(db, "regressions.html"), want[512];
    assert_non_null(strstr(p, "<p id=\"regress-counts\">1 new, 1 acknowledged, 2 fixed.</p>"));
    assert_int_equal(count(p, "<tr class=\"regression-row\">"), 4);
    assert_int_equal(count(p, "<td class=\"regress-state fail\">new</td>"), 1);
    assert_int_equal(count(p, "<td class=\"regress-state warn\">acknowledged</td>"), 1);
    assert_int_equal(count(p, "<td class=\"regress-state pass\">fixed</td>"), 2);
    assert_null(strstr(p, "<script"));
    const int64_t flagged[4] = {a, b, e, f};
    for (int i = 0; i < 4; i++) {
        snprintf(want, sizeof want, "<a href=\"run-%" PRId64 ".html\">run %" PRId64 "</a>",
                 flagged[i], flagged[i]);
        assert_non_null(strstr(p, want));
    }
    /* a's whole history: acknowledged (who, why, escaped), then fixed by the run back in the
     * band */
    assert_non_null(strstr(p, "<span class=\"ack\">acknowledged by lead at "));
    assert_non_null(strstr(p, ": driver 2.19 &lt;script&gt;"));
    snprintf(want, sizeof want, "fixed by <a href=\"run-%" PRId64 ".html\">run %" PRId64
                                "</a>, back inside the noise band",
             fix, fix);
    assert_int_equal(count(p, want), 2);
    assert_non_null(strstr(p, "<a href=\"regressions.html\">Regressions</a>")); /* the nav */
    free(p);
    p = page(db, "index.html"); /* the overview counts them, linked */
    assert_non_null(strstr(p, "<li id=\"regress-summary\"><a href=\"regressions.html\">"
                              "Regressions</a>: <span class=\"regression\">1 new</span>, 1 "
                              "acknowledged, 2 fixed</li>"));
    free(p);

    /* the flagged runs' pages show their state; a run that opened none has no such row */
    p = item_page(db, "run", f);
    assert_non_null(strstr(p, "<tr><th>Regression state</th><td class=\"regress-state warn\">"
                              "acknowledged</td></tr>"));
    assert_non_null(strstr(p, "acknowledged by lead at "));
    free(p);
    p = item_page(db, "run", e);
    assert_non_null(strstr(p, "<tr><th>Regression state</th><td class=\"regress-state fail\">"
                              "new</td></tr>"));
    assert_null(strstr(p, "Regression history"));
    free(p);
    p = item_page(db, "run", a);
    assert_non_null(strstr(p, "<td class=\"regress-state pass\">fixed</td>"));
    free(p);
    p = item_page(db, "run", fix);
    assert_null(strstr(p, "Regression state"));
    free(p);
    nb_db_close(db);
}

static void test_export_links(void **s)
{
    (void)s;
    assert_true(seed.seeded);
    nb_db *db = NULL;
    nb_err err = {0};
    if (nb_db_open(seed.db, NULL, &db, &err))
        fail_msg("%s", err.msg);
    files *f = calloc(1, sizeof *f);
    assert_non_null(f);
    size_t n = 0;
    if (nb_dash_export(db, NULL, keep, f, &n, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(n, f->n);
    /* 5 overview pages (regressions.html the fifth), 3 files per deployment, a page per run
     * (every run is linked), a page per job the queue lists */
    size_t runs = N_PERF + seed.n_cold + 3;
    assert_int_equal(n, 5 + 3 * seed.n_deps + runs + seed.n_queued);
    assert_true(export_links(f) > n);
    nb_db_close(db);

    /* `report --html DIR --db DB`: the same files, through the embedded coordinator */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/local-report", tu_group_tmp());
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' report --html '%s' --db '%s'",
             tu_env("NB_SRC", "."), tu_env("NB_BIN", "npubench"), dir, seed.db);
    tu_result r = tu_run(cmd);
    if (r.code)
        fail_msg("report --html --db: exit %d\n%s", r.code, r.out ? r.out : "");
    free(r.out);
    for (size_t i = 0; i < f->n; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, f->names[i]);
        if (access(path, R_OK))
            fail_msg("report --html did not write %s", path);
    }
    snprintf(cmd, sizeof cmd, "ls '%s' | wc -l", dir);
    r = tu_run(cmd);
    assert_int_equal(r.out ? (size_t)atol(r.out) : 0, f->n);
    free(r.out);
    /* a usage error without --html */
    snprintf(cmd, sizeof cmd, "'%s' report --db '%s'", tu_env("NB_BIN", "npubench"), seed.db);
    r = tu_run(cmd);
    assert_int_equal(r.code, 2);
    free(r.out);
    for (size_t i = 0; i < f->n; i++)
        free(f->data[i]);
    free(f);
}

/* ---- a real coordinator; Chromium ---- */

static const char *bin(void)
{
    return tu_env("NB_BIN", "npubench");
}

static void key_file(char *path, size_t cap, const char *name, char *key, size_t kcap)
{
    snprintf(path, cap, "%s/%s", tu_group_tmp(), name);
    /* a fresh random key per run, in the base64 alphabet that needs URL encoding */
    FILE *r = fopen("/dev/urandom", "rb");
    assert_non_null(r);
    unsigned char raw[24];
    assert_int_equal(fread(raw, 1, sizeof raw, r), sizeof raw);
    fclose(r);
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < sizeof raw && k + 1 < kcap; i++)
        key[k++] = b64[raw[i] & 63];
    if (k + 2 < kcap) {
        key[k++] = '+';
        key[k++] = '/';
    }
    key[k] = '\0';
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", key);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0);
}

/* The first "WORD URL" of the log into out; 1 when found. */
static int log_url(const char *log, const char *word, char *out, size_t cap)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", tu_group_tmp(), log);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, word);
        if (!p)
            continue;
        p += strlen(word);
        size_t n = strcspn(p, " )\n");
        if (n && n < cap) {
            memcpy(out, p, n);
            out[n] = '\0';
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The coordinator on the seeded database, with client and worker keys and the dashboard. */
static void lab_up(void)
{
    if (lab.coord)
        return;
    assert_true(seed.seeded);
    char wkey[128];
    key_file(lab.client_key, sizeof lab.client_key, "client.key", lab.key, sizeof lab.key);
    key_file(lab.worker_key, sizeof lab.worker_key, "worker.key", wkey, sizeof wkey);
    lab.coord = tu_spawn("coord.log",
                      "coordinator --listen tcp://127.0.0.1:0 --http http://127.0.0.1:0 "
                      "--db '%s' --secret-file '%s' --worker-secret-file '%s' "
                      "--heartbeat-ms 200",
                      seed.db, lab.client_key, lab.worker_key);
    if (!tu_poll(20000, log_url("coord.log", "dashboard on ", lab.http, sizeof lab.http) &&
                            log_url("coord.log", "(dial ", lab.rpc, sizeof lab.rpc)))
        fail_msg("the coordinator never said where it serves (see %s/coord.log)", tu_group_tmp());
}

static const char *chromium(void)
{
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome", NULL};
    static char found[256];
    for (size_t i = 0; names[i]; i++) {
        snprintf(cmd, sizeof cmd, "command -v %s", names[i]);
        tu_result r = tu_run(cmd);
        int ok = r.code == 0 && r.out && *r.out;
        if (ok)
            snprintf(found, sizeof found, "%.*s", (int)strcspn(r.out, "\n"), r.out);
        free(r.out);
        if (ok)
            return found;
    }
    return NULL;
}

/* The URL-encoded client key (base64's + and / are not URL-safe). */
static void url_key(char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = lab.key; *p && o + 4 < cap; p++) {
        if (*p == '+' || *p == '/' || *p == '=')
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", (unsigned char)*p);
        else
            out[o++] = *p;
    }
    out[o] = '\0';
}

/* Signs the browser profile in as a person would: the dashboard's sign-in form posted with
 * the key (a local page that submits it), which sets the cookie the profile keeps. */
static void browser_sign_in(const char *browser, const char *profile)
{
    char page[1200];
    snprintf(page, sizeof page, "%s/signin.html", tu_group_tmp());
    FILE *f = fopen(page, "w");
    assert_non_null(f);
    fprintf(f, "<!DOCTYPE html><html><body><form method=\"post\" action=\"%ssignin\">"
               "<input name=\"key\" value=\"%s\"><input name=\"next\" value=\"/index.html\">"
               "</form><script>document.forms[0].submit()</script></body></html>\n",
            lab.http, lab.key);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "'%s' --headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage "
             "--user-data-dir='%s' --virtual-time-budget=3000 --dump-dom 'file://%s' "
             "2>/dev/null",
             browser, profile, page);
    tu_result r = tu_run(cmd);
    free(r.out);
    unlink(page);
}

/* Chromium headless on the page (signed in first when with_key, as a browser would): the
 * DOM it built, and in the same run a screenshot into the build dir when shot is set. */
static char *browse_at(const char *browser, const char *name, int with_key, const char *shot,
                       const char *window)
{
    char profile[1200], dir[1200], shot_flag[1400] = "";
    snprintf(profile, sizeof profile, "%s/chromium-profile%s", tu_group_tmp(),
             with_key ? "-signed-in" : "");
    static int signed_in;
    if (with_key && !signed_in) {
        browser_sign_in(browser, profile);
        signed_in = 1;
    }
    snprintf(dir, sizeof dir, "%s/tests/dashboard", tu_env("NB_BUILD", "."));
    if (shot) {
        mkdir(dir, 0755);
        snprintf(shot_flag, sizeof shot_flag, "--screenshot='%s/%s'", dir, shot);
        char old[1400];
        snprintf(old, sizeof old, "%s/%s", dir, shot);
        unlink(old); /* a stale one must not pass for this run's */
    }
    snprintf(cmd, sizeof cmd,
             "'%s' --headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage "
             "--hide-scrollbars --force-device-scale-factor=1 --user-data-dir='%s' "
             "--window-size=%s %s --dump-dom '%s%s' 2>/dev/null",
             browser, profile, window, shot_flag, lab.http, name);
    tu_result r = tu_run(cmd);
    if (r.code != 0 || !r.out || (!strstr(r.out, "</html>") && !strstr(r.out, "</svg>")))
        fail_msg("chromium could not load %s (exit %d):\n%s", name, r.code, r.out ? r.out : "");
    if (shot) {
        char png[1400];
        snprintf(png, sizeof png, "%s/%s", dir, shot);
        struct stat st;
        if (stat(png, &st) || st.st_size < 1000)
            fail_msg("chromium wrote no screenshot of %s to %s", name, png);
        print_message("screenshot: %s\n", png);
    }
    return r.out;
}

static char *browse(const char *browser, const char *name, int with_key, const char *shot)
{
    return browse_at(browser, name, with_key, shot, "1280,1000");
}

/* ---- what the screenshots show ---- */

/* The number in attribute name of the tag opening at tag; NAN when it has none. */
static double attr_num(const char *tag, const char *name)
{
    char pat[32];
    snprintf(pat, sizeof pat, " %s=\"", name);
    const char *end = strchr(tag, '>'), *a = strstr(tag, pat);
    return a && end && a < end ? strtod(a + strlen(pat), NULL) : NAN;
}

/* The colour in attribute fill or stroke ("#rrggbb") of the tag at tag; -1 when none. */
static long attr_colour(const char *tag, const char *name)
{
    char pat[32];
    snprintf(pat, sizeof pat, " %s=\"#", name);
    const char *end = strchr(tag, '>'), *a = strstr(tag, pat);
    return a && end && a < end ? strtol(a + strlen(pat), NULL, 16) : -1;
}

static long hex(const char *c)
{
    return strtol(c + 1, NULL, 16);
}

/* c at opacity a over white, as the browser composes a band. */
static long over_white(long c, double a)
{
    long out = 0;
    for (int s = 0; s < 24; s += 8)
        out |= (long)(255 - a * (255 - ((c >> s) & 255)) + 0.5) << s;
    return out;
}

/* The screenshot of one plot (its SVG alone, drawn at 1:1 from the top left) against the DOM
 * the browser built from it in the same run: every point and legend swatch in its colour
 * where the DOM puts it; red only on the point of red_run (the run flagged on this plot's
 * metric) and none on plain_run's (flagged on the other metric); each event's orange line
 * down the plot; the first series' band as its tint. */
static void expect_plot_pixels(const char *dom, const char *shot, int64_t red_run,
                               int64_t plain_run, size_t n_series, size_t n_events)
{
    char path[1400], msg[1600];
    snprintf(path, sizeof path, "%s/tests/dashboard/%s", tu_env("NB_BUILD", "."), shot);
    png_image img;
    if (png_read(path, &img, msg, sizeof msg))
        fail_msg("%s", msg);
    assert_true(img.w >= NB_SVG_W && img.h >= NB_SVG_H_PX);
    /* every circle: its centre pixel is its fill */
    size_t circles = 0, per_series[NB_SVG_PALETTE_N] = {0};
    double red_x = NAN, red_y = NAN;
    for (const char *t = dom; (t = strstr(t, "<circle")); t++) {
        double cx = attr_num(t, "cx"), cy = attr_num(t, "cy");
        long fill = attr_colour(t, "fill");
        assert_true(isfinite(cx) && isfinite(cy) && fill >= 0);
        long px = png_at(&img, (long)cx, (long)cy);
        if (!png_near(px, fill, 10))
            fail_msg("%s: the circle at (%.1f, %.1f) should be #%06lx, the screenshot has "
                     "#%06lx", shot, cx, cy, fill, px);
        circles++;
        for (size_t k = 0; k < n_series; k++)
            per_series[k] += fill == hex(nb_svg_series_colour(k));
        char link[64];
        snprintf(link, sizeof link, "<a href=\"run-%" PRId64 ".html\">", red_run);
        if (t - dom >= (long)strlen(link) && !strncmp(t - strlen(link), link, strlen(link))) {
            assert_true(png_near(px, hex(NB_SVG_FLAG_COLOUR), 10));
            red_x = cx;
            red_y = cy;
        }
        snprintf(link, sizeof link, "<a href=\"run-%" PRId64 ".html\">", plain_run);
        if (t - dom >= (long)strlen(link) && !strncmp(t - strlen(link), link, strlen(link)))
            assert_false(png_near(px, hex(NB_SVG_FLAG_COLOUR), 60));
    }
    assert_true(circles >= 2);
    for (size_t k = 0; k < n_series; k++) /* its points and its legend swatch */
        assert_true(per_series[k] >= 2);
    /* the flag's red nowhere but on the flagged run's point */
    assert_true(isfinite(red_x));
    size_t red = 0;
    for (long y = 0; y < (long)img.h; y++)
        for (long x = 0; x < (long)img.w; x++)
            if (png_near(png_at(&img, x, y), hex(NB_SVG_FLAG_COLOUR), 12)) {
                if (fabs((double)x - red_x) > 6 || fabs((double)y - red_y) > 6)
                    fail_msg("%s: red at (%ld, %ld), away from the flagged run's point at "
                             "(%.1f, %.1f)", shot, x, y, red_x, red_y);
                red++;
            }
    assert_true(red >= 20);
    /* the events: an orange line from the top of the plot to its axis */
    size_t events = 0;
    for (const char *t = dom; (t = strstr(t, "<line class=\"event\"")); t++, events++) {
        double x = attr_num(t, "x1"), y1 = attr_num(t, "y1"), y2 = attr_num(t, "y2");
        size_t orange = 0;
        for (long y = (long)y1; y < (long)y2; y++)
            orange += png_near(png_at(&img, (long)x, y), hex(NB_SVG_EVENT_COLOUR), 12);
        if (orange < (size_t)((y2 - y1) * 0.6))
            fail_msg("%s: the event line at x %.1f is orange over %zu of %.0f pixels", shot, x,
                     orange, y2 - y1);
    }
    assert_int_equal(events, n_events);
    /* the band: the first series' colour at the band's opacity over white */
    size_t tint = 0;
    long band = over_white(hex(nb_svg_series_colour(0)), 0.18);
    for (long y = 0; y < NB_SVG_H_PX; y++)
        for (long x = 0; x < NB_SVG_W; x++)
            tint += png_near(png_at(&img, x, y), band, 6);
    if (tint < 300)
        fail_msg("%s: the band's tint #%06lx on %zu pixels only", shot, band, tint);
    free(img.rgb);
}

/* One raw HTTP/1.1 request to the dashboard (extra header lines as given); the status code
 * of the answer, 0 when none came (the connection closed). */
/* A connection to the dashboard (10 s receive timeout); host gets its address. */
static int dash_connect(char host[256])
{
    int port = 0;
    if (sscanf(lab.http, "http://%255[^:]:%d", host, &port) != 2)
        fail_msg("cannot read %s", lab.http);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static int http_status(const char *target, const char *headers)
{
    char host[256];
    int fd = dash_connect(host);
    static char req[70000];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n",
                     target, host, headers);
    assert_true(n > 0 && (size_t)n < sizeof req);
    for (int off = 0; off < n;) {
        ssize_t w = send(fd, req + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (int)w;
    }
    char buf[64] = "";
    ssize_t got = recv(fd, buf, sizeof buf - 1, 0);
    close(fd);
    buf[got > 0 ? got : 0] = '\0';
    int status = 0;
    return sscanf(buf, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

/* s percent-encoded (every byte but letters and digits) into out. */
static void pct_encode(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z'))
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", ch);
    }
    out[o] = '\0';
}

/* One raw request (method, target, extra header lines, body) to the dashboard; the whole
 * answer (malloc'ed), "" when none came. */
static char *http_raw(const char *method, const char *target, const char *headers,
                      const char *body)
{
    char host[256];
    int fd = dash_connect(host);
    char req[8192];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\n"
                     "Content-Type: application/x-www-form-urlencoded\r\n\r\n%s",
                     method, target, host, headers, strlen(body), body);
    assert_true(n > 0 && (size_t)n < sizeof req);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    size_t cap = 1 << 20, len = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    ssize_t r;
    while (len + 1 < cap && (r = recv(fd, out + len, cap - 1 - len, 0)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fd);
    return out;
}

/* Sign-in is a form (or a header), never a key in the URL (browsers keep URLs in their
 * history, session and sync files); its redirect goes to a page of this server only. */
static void test_http_sign_in(void **s)
{
    (void)s;
    lab_up();
    char ek[256], body[1024], hdr[512];
    url_key(ek, sizeof ek);
    /* a key in the URL signs nothing in */
    char target[600];
    snprintf(target, sizeof target, "/boards.html?key=%s", ek);
    assert_int_equal(http_status(target, ""), 401);
    /* the 401 page carries the form, coming back to the page asked for */
    char *a = http_raw("GET", "/queue.html", "", "");
    assert_non_null(strstr(a, "HTTP/1.1 401"));
    assert_non_null(strstr(a, "<form method=\"post\" action=\"/signin\">"));
    assert_non_null(strstr(a, "name=\"next\" value=\"/queue.html\""));
    free(a);
    /* the form: a cookie and back to the page */
    snprintf(body, sizeof body, "key=%s&next=%%2Fboards.html", ek);
    a = http_raw("POST", "/signin", "", body);
    assert_non_null(strstr(a, "HTTP/1.1 303"));
    assert_non_null(strstr(a, "\r\nLocation: /boards.html\r\n"));
    char *ck = strstr(a, "Set-Cookie: npubench_view=");
    assert_non_null(ck);
    assert_non_null(strstr(ck, "HttpOnly; SameSite=Strict"));
    assert_null(strstr(a, lab.key)); /* the cookie is a token, not the key */
    snprintf(hdr, sizeof hdr, "Cookie: %.*s\r\n", (int)strcspn(ck + 12, ";"), ck + 12);
    free(a);
    assert_int_equal(http_status("/boards.html", hdr), 200);
    /* redirects only to local paths: another host is "/" */
    const char *const away[] = {"%2F%2Fevil.example%2Fx", "%2F%5Cevil.example",
                                "http%3A%2F%2Fevil.example%2F", "%2Fok%0D%0ASet-Cookie%3A+x",
                                NULL};
    for (size_t i = 0; away[i]; i++) {
        snprintf(body, sizeof body, "key=%s&next=%s", ek, away[i]);
        a = http_raw("POST", "/signin", "", body);
        assert_non_null(strstr(a, "HTTP/1.1 303"));
        if (!strstr(a, "\r\nLocation: /\r\n"))
            fail_msg("next=%s: %s", away[i], a);
        free(a);
    }
    /* a wrong key: 401 with the form again, no cookie */
    a = http_raw("POST", "/signin", "", "key=not-the-key&next=%2F");
    assert_non_null(strstr(a, "HTTP/1.1 401"));
    assert_null(strstr(a, "Set-Cookie"));
    free(a);
}

/* The credentials a script uses and hostile requests: refused or answered, never a crash. */
static void test_http_auth(void **s)
{
    (void)s;
    lab_up();
    char hdr[512], wkey[256];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", lab.key);
    assert_int_equal(http_status("/boards.html", hdr), 200);
    assert_int_equal(http_status("/boards.html", ""), 401);
    FILE *f = fopen(lab.worker_key, "r");
    assert_non_null(f);
    assert_non_null(fgets(wkey, sizeof wkey, f));
    fclose(f);
    wkey[strcspn(wkey, "\n")] = '\0';
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", wkey);
    assert_int_equal(http_status("/boards.html", hdr), 403); /* the worker key is no viewer */
    assert_int_equal(http_status("/boards.html", "Authorization: Bearer x\r\n"), 401);
    /* keys one byte shorter, one byte longer, and of the same length with one byte changed
     * (first, last): refused as a Bearer header and through the sign-in form, the right key
     * accepted both ways (a key check that compares a prefix, or only the key's own length,
     * lets them in) */
    {
        size_t kl = strlen(lab.key);
        static char near[5][3100], h2[3200], enc[3100], body[3300];
        snprintf(near[0], sizeof near[0], "%.*s", (int)kl - 1, lab.key);
        snprintf(near[1], sizeof near[1], "%.1000sA", lab.key);
        snprintf(near[2], sizeof near[2], "%.1000s", lab.key);
        near[2][kl - 1] = near[2][kl - 1] == 'A' ? 'B' : 'A';
        snprintf(near[3], sizeof near[3], "%.1000s", lab.key);
        near[3][0] = near[3][0] == 'A' ? 'B' : 'A';
        snprintf(near[4], sizeof near[4], "%.1000s%.1000s", lab.key, lab.key);
        for (int i = 0; i < 6; i++) {
            const char *k = i < 5 ? near[i] : lab.key;
            snprintf(h2, sizeof h2, "Authorization: Bearer %.2050s\r\n", k);
            int st = http_status("/boards.html", h2);
            if (st != (i < 5 ? 401 : 200))
                fail_msg("Bearer key %d (%s): status %d", i, k, st);
            pct_encode(k, enc, sizeof enc);
            snprintf(body, sizeof body, "key=%.3000s&next=%%2Fboards.html", enc);
            char *a = http_raw("POST", "/signin", "", body);
            if (!strstr(a, i < 5 ? "HTTP/1.1 401" : "HTTP/1.1 303"))
                fail_msg("sign-in with key %d (%s): %.40s", i, k, a);
            free(a);
        }
    }
    assert_int_equal(http_status("/boards.html", "Cookie: npubench_view=00\r\n"), 401);
    /* a cookie of the token's shape that no key made */
    snprintf(hdr, sizeof hdr, "Cookie: npubench_view=%064d\r\n", 0);
    assert_int_equal(http_status("/boards.html", hdr), 401);
    /* hostile: broken escapes, a key too long for any key file, junk cookies, long paths */
    static char big[20000];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *const targets[] = {"/?key=%", "/?key=%4", "/?key=%zz&key=", "/?&&&key",
                                   "/run-1.html?key=%00%00", "/%2e%2e/etc/passwd", "/run-.html",
                                   NULL};
    for (size_t i = 0; targets[i]; i++) {
        int st = http_status(targets[i], "");
        if (st != 401 && st != 404 && st != 400)
            fail_msg("%s: status %d", targets[i], st);
    }
    static char target[21000];
    snprintf(target, sizeof target, "/?key=%s", big);
    http_status(target, ""); /* refused or the connection dropped, either is fine */
    snprintf(target, sizeof target, "/%s", big);
    http_status(target, "");
    snprintf(hdr, sizeof hdr, "Cookie: a=b; npubench_view=; npubench_view=%.200s\r\n", big);
    assert_int_equal(http_status("/", hdr), 401);
    /* and the server still answers */
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", lab.key);
    assert_int_equal(http_status("/index.html", hdr), 200);
    assert_int_equal(http_status("/run-999999.html", hdr), 404);
    /* a job's page and log: an id that is none is a bad request, one not stored not found */
    assert_int_equal(http_status("/job-abc.html", hdr), 400);
    assert_int_equal(http_status("/job-99999999999999999999.html", hdr), 400);
    assert_int_equal(http_status("/job-999999.html", hdr), 404);
    /* /job/N as people type it: sent to job-N.html (which says what is wrong with N) */
    char *a = http_raw("GET", "/job/abc", hdr, "");
    assert_non_null(strstr(a, "HTTP/1.1 301"));
    assert_non_null(strstr(a, "Location: /job-abc.html"));
    free(a);
    assert_int_equal(http_status("/job/1/x", hdr), 404);
    assert_int_equal(http_status("/job/", hdr), 404);
    char jp[96];
    snprintf(jp, sizeof jp, "/job-%" PRId64 ".html", seed.queued_job);
    assert_int_equal(http_status(jp, hdr), 200);
    snprintf(jp, sizeof jp, "/job-%" PRId64 "-log.json?after=0", seed.queued_job);
    assert_int_equal(http_status(jp, hdr), 200);
    snprintf(jp, sizeof jp, "/job-%" PRId64 "-log.json?after=x", seed.queued_job);
    assert_int_equal(http_status(jp, hdr), 400);
}

static void test_browser(void **s)
{
    (void)s;
    const char *browser = chromium();
    tu_require(browser != NULL, "headless Chromium is not installed (apt-get install chromium; "
                                "scripts/setup.sh installs it)");
    lab_up();
    size_t workers = seed.n_workers + (lab.worker ? 1 : 0);

    /* without the key: refused, nothing of the data shown */
    char *dom = browse(browser, "boards.html", 0, NULL);
    assert_non_null(strstr(dom, "401 Unauthorized"));
    assert_int_equal(count(dom, "class=\"board\""), 0);
    free(dom);

    dom = browse(browser, "index.html", 1, "index.png");
    assert_int_equal(count(dom, "<tr class=\"deployment\">"), seed.n_deps + (lab.ci_ran ? 1 : 0));
    assert_null(strstr(dom, "<script"));
    free(dom);

    dom = browse(browser, "boards.html", 1, "boards.png");
    assert_int_equal(count(dom, "<tr class=\"board\">"), workers);
    assert_null(strstr(dom, "<script"));
    assert_non_null(strstr(dom, "Coordinator drain: off"));
    if (!lab.worker) /* the CI example's worker adds a board */
        expect_board_health(dom);
    free(dom);

    dom = browse(browser, "queue.html", 1, NULL);
    assert_true(count(dom, "<tr class=\"job\">") >= seed.n_queued);
    free(dom);

    dom = browse(browser, "matrix.html", 1, "matrix.png");
    assert_true(count(dom, "<tr class=\"matrix-row\">") >= 2);
    if (lab.ci_ran) /* the CI job's verify is in its board's column */
        assert_non_null(strstr(dom, "<th>ci-board</th>"));
    free(dom);

    char name[64];
    snprintf(name, sizeof name, "deployment-%" PRId64 ".html", seed.dep[0]);
    dom = browse_at(browser, name, 1, "deployment.png", "1280,2000"); /* all four plots */
    /* the browser parsed the inline SVG: its paths and points are DOM elements */
    expect_plots(dom);
    /* real axes, as the browser parsed them: ticks with gridlines and the units */
    assert_true(count(dom, "<text class=\"ytick\"") >= 6);
    assert_int_equal(count(dom, "<line class=\"grid\""), count(dom, "<text class=\"ytick\""));
    assert_true(count(dom, "<text class=\"xtick\"") >= 2);
    assert_non_null(strstr(dom, ">tokens/s</text>"));
    assert_non_null(strstr(dom, ">ms</text>"));
    assert_int_equal(count(dom, "<tr class=\"run\">"), N_PERF + seed.n_cold + 1);
    free(dom);
    /* each plot alone, its pixels: the TTFT-only regression red on the TTFT plot and not on
     * the TPS one, the TPS-only one the other way round */
    for (int k = 0; k < 2; k++) {
        char shot[32];
        snprintf(name, sizeof name, "deployment-%" PRId64 "-%s.svg", seed.dep[0],
                 k ? "tps" : "ttft");
        snprintf(shot, sizeof shot, "plot-%s.png", k ? "tps" : "ttft");
        dom = browse_at(browser, name, 1, shot, "700,420");
        expect_plot_pixels(dom, shot, k ? seed.tps_flagged : seed.ttft_flagged,
                           k ? seed.ttft_flagged : seed.tps_flagged, 2, SEED_EVENTS);
        free(dom);
    }

    snprintf(name, sizeof name, "run-%" PRId64 ".html", seed.verify_new_b);
    dom = browse(browser, name, 1, "run.png");
    assert_int_equal(count(dom, "<tr class=\"gate-check\">"), seed.gate_checks_new_b);
    assert_null(strstr(dom, "<script"));
    expect_localization(dom);
    free(dom);

    dom = browse(browser, "run-999999.html", 1, NULL);
    assert_non_null(strstr(dom, "404 Not found"));
    free(dom);

    /* a queued job's page as the browser parsed it: its state, its log, live by reloading
     * (no script); the regressions page lists the seed's flagged runs */
    snprintf(name, sizeof name, "job-%" PRId64 ".html", seed.queued_job);
    dom = browse(browser, name, 1, "job.png");
    assert_non_null(strstr(dom, "<td id=\"job-state\">queued</td>"));
    assert_non_null(strstr(dom, "enqueued verify (priority 0)"));
    assert_non_null(strstr(dom, "http-equiv=\"refresh\" content=\"5\""));
    assert_null(strstr(dom, "<script"));
    free(dom);
    dom = browse(browser, "regressions.html", 1, "regressions.png");
    assert_true(count(dom, "<tr class=\"regression-row\">") >= seed.n_flagged);
    free(dom);
    dom = browse(browser, "job-abc.html", 1, NULL);
    assert_non_null(strstr(dom, "400 Bad request"));
    free(dom);
}

/* ---- docs/ci-example.sh against a real coordinator and worker ---- */

static tu_result ci_script(const char *out, const char *extra_env)
{
    snprintf(cmd, sizeof cmd,
             "cd '%s' && NPUBENCH='%s' NPUBENCH_COORDINATOR='%s' NPUBENCH_SECRET=\"$(cat '%s')\" "
             "OUT='%s' SELECT='--board ci-board' %s sh docs/ci-example.sh",
             tu_env("NB_SRC", "."), bin(), lab.rpc, lab.client_key, out, extra_env);
    tu_result r = tu_run(cmd);
    print_message("$ docs/ci-example.sh (%s)  [exit %d]\n%s", extra_env, r.code,
                  r.out ? r.out : "");
    return r;
}

static void test_ci_example(void **s)
{
    (void)s;
    tu_require_model();
    lab_up();
    lab.worker = tu_spawn("worker.log",
                       "worker --coordinator '%s' --board ci-board --device cpu:31 --threads 1 "
                       "--heartbeat-ms 200 --secret-file '%s' --quiet",
                       lab.rpc, lab.worker_key);

    char out[1200], path[1400];
    snprintf(out, sizeof out, "%s/ci", tu_group_tmp());
    tu_result r = ci_script(out, "TIMEOUT=600");
    assert_int_equal(r.code, 0);
    free(r.out);
    lab.ci_ran = 1;

    /* the JUnit file validates and holds the verify's prompts and the profile's check */
    snprintf(cmd, sizeof cmd, "xmllint --noout --schema '%s/tests/junit.xsd' '%s/junit.xml'",
             tu_env("NB_SRC", "."), out);
    tu_result x = tu_run(cmd);
    if (x.code)
        fail_msg("junit.xml does not validate:\n%s", x.out ? x.out : "");
    free(x.out);
    snprintf(path, sizeof path, "%s/junit.xml", out);
    char *junit = tu_slurp(path);
    assert_true(count(junit, "<testsuite ") == 2);
    assert_non_null(strstr(junit, "name=\"prompt 0\""));
    free(junit);
    snprintf(path, sizeof path, "%s/jobs.json", out);
    char *jobs = tu_slurp(path);
    assert_true(count(jobs, "\"outcome\":\"pass\"") >= 2); /* both jobs */
    assert_null(strstr(jobs, "\"outcome\":\"fail\""));
    free(jobs);

    /* the report: the board, its verify in the matrix, the profile's deployment plotted */
    snprintf(path, sizeof path, "%s/report/boards.html", out);
    char *boards = tu_slurp(path);
    assert_non_null(strstr(boards, "<td>ci-board</td>"));
    /* what the live worker's probe read, kept with its board at Register: at least the
     * toolchain (the NPU versions read unknown on a host without one) */
    const char *row = strstr(boards, "<tr class=\"board-health\"><td>ci-board</td>");
    assert_non_null(row);
    const char *tool = strstr(row, ", npubench ");
    assert_true(tool && tool < strstr(row, "</tr>"));
    free(boards);
    snprintf(path, sizeof path, "%s/report/matrix.html", out);
    char *matrix = tu_slurp(path);
    assert_non_null(strstr(matrix, "<th>ci-board</th>"));
    assert_true(count(matrix, "<tr class=\"matrix-row\">") >= 2);
    free(matrix);
    snprintf(path, sizeof path, "%s/report/index.html", out);
    char *index = tu_slurp(path);
    assert_int_equal(count(index, "<tr class=\"deployment\">"), seed.n_deps + 1);
    free(index);

    /* nobody registered serves the model: refused at submit, exit 3 */
    snprintf(out, sizeof out, "%s/ci-nosuch", tu_group_tmp());
    r = ci_script(out, "MODEL=nosuch TIMEOUT=1");
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.out, "no registered worker serves it"));
    free(r.out);
    /* served, but by no board of that name: the job stays queued past TIMEOUT, exit 5,
     * report still written */
    snprintf(out, sizeof out, "%s/ci-elsewhere", tu_group_tmp());
    r = ci_script(out, "SELECT='--board elsewhere' TIMEOUT=1");
    assert_int_equal(r.code, 5);
    free(r.out);
    snprintf(path, sizeof path, "%s/report/queue.html", out);
    char *queue = tu_slurp(path);
    assert_non_null(strstr(queue, "elsewhere"));
    free(queue);
}

/* SIGTERM, then its exit status (-1 when it did not exit within 20 s: killed then). */
static int stop(pid_t *pid)
{
    if (!*pid)
        return 0;
    kill(*pid, SIGTERM);
    int st = 0;
    int gone = tu_poll(20000, waitpid(*pid, &st, WNOHANG) == *pid);
    if (!gone) {
        tu_kill(*pid);
        *pid = 0;
        return -1;
    }
    for (int i = 0; i < TU_TRACK_MAX; i++)
        if (tu_tracked()[i] == *pid)
            tu_tracked()[i] = 0;
    *pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The worker and the coordinator stop cleanly on SIGTERM, and no process printed a sanitizer
 * report (under ASan the exit also runs the leak check over the dashboard's serving). */
static void test_stop_clean(void **s)
{
    (void)s;
    if (!lab.coord)
        tu_skip("no coordinator was started (the tests before it skipped)");
    assert_int_equal(stop(&lab.worker), 0);
    assert_int_equal(stop(&lab.coord), 0);
    snprintf(cmd, sizeof cmd,
             "cat '%s'/*.log | grep -c -e AddressSanitizer -e 'runtime error' -e LeakSanitizer",
             tu_group_tmp());
    tu_result r = tu_run(cmd);
    int n = r.out ? atoi(r.out) : -1;
    free(r.out);
    if (n != 0) {
        snprintf(cmd, sizeof cmd, "cat '%s'/*.log", tu_group_tmp());
        tu_result all = tu_run(cmd);
        print_message("%s", all.out ? all.out : "");
        free(all.out);
    }
    assert_int_equal(n, 0);
}

static int group_teardown(void **state)
{
    if (lab.worker)
        tu_kill(lab.worker);
    if (lab.coord)
        tu_kill(lab.coord);
    return tu_group_teardown(state);
}

/* argv[1] "pages": the pages in-process and over HTTP (no model); "browser": in headless
 * Chromium, DOM and screenshots (Skipped, exit 77, where there is none); "ci": the CI example
 * through a real worker running the model (e2e: slow under the sanitizers); none: all. */
int main(int argc, char **argv)
{
    const char *part = argc > 1 ? argv[1] : "";
    const struct CMUnitTest pages[] = {
        cmocka_unit_test(test_pages),
        cmocka_unit_test(test_band),
        cmocka_unit_test(test_regression_metrics),
        cmocka_unit_test(test_chart),
        cmocka_unit_test(test_plot_axes),
        cmocka_unit_test(test_job_pages),
        cmocka_unit_test(test_regress_pages),
        cmocka_unit_test(test_export_links),
        cmocka_unit_test(test_http_auth),
        cmocka_unit_test(test_http_sign_in),
        cmocka_unit_test(test_stop_clean),
    };
    const struct CMUnitTest browser[] = {
        cmocka_unit_test(test_pages), /* seeds the database the coordinator serves */
        cmocka_unit_test(test_browser),
        cmocka_unit_test(test_stop_clean),
    };
    const struct CMUnitTest ci[] = {
        cmocka_unit_test(test_pages), /* seeds the database the coordinator serves */
        cmocka_unit_test(test_ci_example),
        cmocka_unit_test(test_stop_clean),
    };
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_pages),      cmocka_unit_test(test_band),
        cmocka_unit_test(test_regression_metrics), cmocka_unit_test(test_chart),
        cmocka_unit_test(test_plot_axes),
        cmocka_unit_test(test_job_pages),      cmocka_unit_test(test_regress_pages),
        cmocka_unit_test(test_export_links), cmocka_unit_test(test_ci_example),
        cmocka_unit_test(test_http_auth),  cmocka_unit_test(test_http_sign_in),
        cmocka_unit_test(test_browser),
        cmocka_unit_test(test_stop_clean),
    };
    if (!strcmp(part, "pages"))
        return tu_run_group(pages, tu_group_setup, group_teardown);
    if (!strcmp(part, "browser"))
        return tu_run_group(browser, tu_group_setup, group_teardown);
    if (!strcmp(part, "ci"))
        return tu_run_group(ci, tu_group_setup, group_teardown);
    return tu_run_group(all, tu_group_setup, group_teardown);
}
