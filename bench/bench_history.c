/* bench_history: builds a 1,000,000-run history (20 deployments, 5 boards) in
 * a temporary database, then times the typical history queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_db.h"
#include "nb_db_deploy.h"
#include "nb_db_runs.h"
#include "nb_time.h"

#define N_BOARDS 5
#define N_MODELS 4
#define N_DEPLOY (N_BOARDS * N_MODELS)

static const char *const boards[N_BOARDS] = {"strix-01", "strix-02", "phoenix-01", "hawk-01",
                                             "x86-01"};
static const char *const models[N_MODELS] = {"Llama-3.2-1B-Instruct", "Qwen2.5-0.5B-Instruct",
                                             "SmolLM2-135M-Instruct", "Phi-3-mini-4k"};
static const double base_tps[N_MODELS] = {18.0, 33.0, 95.0, 7.5};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static double uniform(void) /* xorshift64*, in [0, 1) */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static int die(const char *what, const nb_err *err)
{
    fprintf(stderr, "bench_history: %s: %s\n", what, err->msg);
    return 1;
}

typedef struct timing {
    const char *name;
    double total_ms;
    int n;
    size_t rows;
} timing;

static void report(const timing *t)
{
    printf("  %-52s %8.3f ms/query  (%d queries, %zu rows last)\n", t->name,
           t->total_ms / t->n, t->n, t->rows);
}

static void remove_db(const char *path)
{
    char p[640];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
}

static int run(const char *path, long n_runs)
{
    nb_err err = {0};
    nb_db *db = NULL;
    if (nb_db_open(path, NULL, &db, &err))
        return die("open", &err);

    int64_t dep[N_DEPLOY];
    for (int b = 0; b < N_BOARDS; b++) {
        for (int m = 0; m < N_MODELS; m++) {
            nb_db_deployment d = {0};
            snprintf(d.model, sizeof d.model, "%s", models[m]);
            snprintf(d.backend, sizeof d.backend, "%s", b == N_BOARDS - 1 ? "cpu" : "npu");
            snprintf(d.dtype, sizeof d.dtype, "%s", b == N_BOARDS - 1 ? "q4_1" : "bf16");
            snprintf(d.board, sizeof d.board, "%s", boards[b]);
            if (nb_db_deployment_upsert(db, &d, &dep[b * N_MODELS + m], &err)) {
                nb_db_close(db);
                return die("deployment", &err);
            }
        }
    }

    /* One run a minute, newest last: ~694 days for 1M runs. */
    const int64_t t0 = 1672531200000LL; /* 2023-01-01 */
    const int64_t step = 60000;
    double t_start = nb_now_ms();
    if (nb_db_begin(db, &err)) {
        nb_db_close(db);
        return die("begin", &err);
    }
    nb_db_run r;
    for (long i = 0; i < n_runs; i++) {
        int k = (int)(uniform() * N_DEPLOY);
        int m = k % N_MODELS;
        nb_db_run_init(&r);
        r.deployment_id = dep[k];
        r.kind = uniform() < 0.3 ? "verify" : "bench";
        r.outcome = uniform() < 0.97 ? NB_OUTCOME_PASS : NB_OUTCOME_FAIL;
        r.started_ms = t0 + i * step;
        r.finished_ms = r.started_ms + 20000;
        double tps = base_tps[m] * (k / N_MODELS == N_BOARDS - 1 ? 0.6 : 1.0) *
                     (1.0 + 0.03 * (uniform() - 0.5));
        r.value[NB_METRIC_TPS] = tps;
        r.value[NB_METRIC_DECODE] = 1000.0 / tps;
        r.value[NB_METRIC_TTFT] = 2000.0 / base_tps[m] * (1.0 + 0.05 * uniform());
        r.mean[NB_METRIC_TPS] = tps;
        r.stddev[NB_METRIC_TPS] = 0.01 * tps;
        r.reps = 5;
        r.prompt_tokens = 32;
        r.generated_tokens = 128;
        r.env.npubench_commit = "0123456789ab";
        r.env.board = boards[k / N_MODELS];
        r.source = NB_SOURCE_SERVICE;
        int64_t id;
        if (nb_db_run_insert(db, &r, &id, &err)) {
            nb_db_rollback(db);
            nb_db_close(db);
            return die("insert", &err);
        }
    }
    if (nb_db_commit(db, &err)) {
        nb_db_close(db);
        return die("commit", &err);
    }
    double ins_ms = nb_now_ms() - t_start;
    printf("bench_history: %ld runs, %d deployments, %d boards\n", n_runs, N_DEPLOY, N_BOARDS);
    printf("  insert (one transaction, cached statements): %.0f ms, %.1f us/run\n", ins_ms,
           ins_ms * 1000.0 / (double)(n_runs ? n_runs : 1));
    nb_db_close(db); /* PRAGMA optimize: plans use fresh statistics */
    if (nb_db_open(path, NULL, &db, &err))
        return die("reopen", &err);

    const int64_t t_end = t0 + n_runs * step;
    const int64_t day = 86400000LL;
    timing t[7] = {
        {"history model+board tps since 90 days, limit 100", 0, 0, 0},
        {"history model+board gate since 30 days, limit 100", 0, 0, 0},
        {"history model (all boards) ttft, limit 100", 0, 0, 0},
        {"last 10 runs of a deployment", 0, 0, 0},
        {"regression baseline (last 10 runs, pooled)", 0, 0, 0},
        {"aggregate tps per board (one model, last 30 days)", 0, 0, 0},
        {"aggregate tps per board (one model, all time)", 0, 0, 0},
    };
    int rc = 0;
    for (int rep = 0; rep < 20 && !rc; rep++) {
        int b = rep % N_BOARDS, m = (rep / N_BOARDS) % N_MODELS, k = b * N_MODELS + m;
        nb_db_history_row *rows;
        size_t n;
        double s = nb_now_ms();
        nb_db_history_query q = {.model = models[m], .board = boards[b],
                                 .metric = NB_METRIC_TPS, .since_ms = t_end - 90 * day,
                                 .limit = 100};
        if ((rc = nb_db_history(db, &q, &rows, &n, &err)))
            break;
        t[0].total_ms += nb_now_ms() - s;
        t[0].n++;
        t[0].rows = n;
        free(rows);

        s = nb_now_ms();
        q.metric = NB_METRIC_GATE;
        q.since_ms = t_end - 30 * day;
        if ((rc = nb_db_history(db, &q, &rows, &n, &err)))
            break;
        t[1].total_ms += nb_now_ms() - s;
        t[1].n++;
        t[1].rows = n;
        free(rows);

        s = nb_now_ms();
        q = (nb_db_history_query){.model = models[m], .metric = NB_METRIC_TTFT, .limit = 100};
        if ((rc = nb_db_history(db, &q, &rows, &n, &err)))
            break;
        t[2].total_ms += nb_now_ms() - s;
        t[2].n++;
        t[2].rows = n;
        free(rows);

        s = nb_now_ms();
        if ((rc = nb_db_runs_last(db, dep[k], NB_METRIC_TPS, 10, &rows, &n, &err)))
            break;
        t[3].total_ms += nb_now_ms() - s;
        t[3].n++;
        t[3].rows = n;
        free(rows);

        double *base;
        s = nb_now_ms();
        if ((rc = nb_db_runs_baseline(db, dep[k], NB_METRIC_TPS, 10, 0, &base, &n, &err)))
            break;
        t[4].total_ms += nb_now_ms() - s;
        t[4].n++;
        t[4].rows = n;
        free(base);

        nb_db_board_summary *bs;
        s = nb_now_ms();
        q = (nb_db_history_query){.model = models[m], .metric = NB_METRIC_TPS,
                                  .since_ms = t_end - 30 * day};
        if ((rc = nb_db_history_by_board(db, &q, &bs, &n, &err)))
            break;
        t[5].total_ms += nb_now_ms() - s;
        t[5].n++;
        t[5].rows = n;
        free(bs);

        if (rep < 4) { /* every run of the model: fewer repetitions */
            s = nb_now_ms();
            q = (nb_db_history_query){.model = models[m], .metric = NB_METRIC_TPS};
            if ((rc = nb_db_history_by_board(db, &q, &bs, &n, &err)))
                break;
            t[6].total_ms += nb_now_ms() - s;
            t[6].n++;
            t[6].rows = n;
            free(bs);
        }
    }
    nb_db_close(db);
    if (rc)
        return die("query", &err);
    for (int i = 0; i < 7; i++)
        report(&t[i]);
    return 0;
}

int main(int argc, char **argv)
{
    long n_runs = 1000000;
    if (argc > 1) {
        char *end;
        n_runs = strtol(argv[1], &end, 10);
        if (*end || n_runs < 1 || n_runs > 100000000) {
            fprintf(stderr, "usage: bench_history [N_RUNS (1..100000000, default 1000000)]\n");
            return 2;
        }
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/nb_bench_history.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench_history: mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/history.db", dir);
    int rc = run(path, n_runs);
    remove_db(path); /* never leave the large file behind */
    rmdir(dir);
    return rc;
}
