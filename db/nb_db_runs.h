/* nb_db_runs: verify/benchmark/profile results with their samples, gate checks,
 * layer cosines, profiles and toolchain; history queries and regression checks. */
#ifndef NB_DB_RUNS_H
#define NB_DB_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"
#include "nb_db_series.h"
#include "nb_stats.h"

typedef enum nb_db_outcome { NB_OUTCOME_PASS = 0, NB_OUTCOME_FAIL, NB_OUTCOME_ERROR } nb_db_outcome;
typedef enum nb_db_source { NB_SOURCE_LOCAL = 0, NB_SOURCE_SERVICE, NB_SOURCE_IMPORT } nb_db_source;

/* "PASS", "FAIL", "ERROR": the spelling the runs table stores and queries match, never shown. */
const char *nb_db_outcome_name(nb_db_outcome o);
/* "pass", "fail", "error": the word a person reads, job/nb_outcome's, as the CLI, JSON and
 * JUnit print it (the dashboard's cells use this one). */
const char *nb_db_outcome_word(nb_db_outcome o);
const char *nb_db_source_name(nb_db_source s);   /* "local", "service", "import" */
nb_code nb_db_outcome_parse(const char *s, nb_db_outcome *out, nb_err *err);
/* The one outcome a person sees for a run: a gate PASS the regression check flagged is a FAIL,
 * as `npubench job`, JSON, JUnit and the exit code say. */
nb_db_outcome nb_db_run_outcome(nb_db_outcome stored, int regression);

/* The per-run metrics, used as array indexes. GATE exists only as a history
 * query metric: value 1 for a PASS run, 0 for FAIL (ERROR runs excluded). */
typedef enum nb_db_metric {
    NB_METRIC_TTFT = 0, /* ttft_ms, time to first token, lower is better */
    NB_METRIC_TPS,      /* decode tokens per second, higher is better */
    NB_METRIC_DECODE,   /* decode_ms_per_token, lower is better */
    NB_METRIC_TPOT,     /* tpot_ms, time per output token incl. overheads, lower is better */
    NB_METRIC_N,
    NB_METRIC_GATE = NB_METRIC_N
} nb_db_metric;

const char *nb_db_metric_name(nb_db_metric m); /* "ttft", "tps", "decode", "tpot", "gate" */
/* Accepts those names and the column names ("ttft_ms", "decode_ms_per_token", ...). */
nb_code nb_db_metric_parse(const char *s, nb_db_metric *out, nb_err *err);
int nb_db_metric_higher_is_better(nb_db_metric m);

/* Absent doubles are NaN everywhere (stored as SQL NULL). */
typedef struct nb_db_sample {
    int rep;                 /* 0-based repetition index, unique within the run */
    double v[NB_METRIC_N];   /* indexed by nb_db_metric */
} nb_db_sample;

typedef struct nb_db_gate_check {
    int prompt_index;  /* unique within the run */
    const char *prompt;
    int steps;            /* tokens compared */
    int divergence_step;  /* first step where the tokens differ; -1 = none */
    int device_token, ref_token;
    const char *device_text, *ref_text;
    /* rank of the device token in the reference's distribution and of the
     * reference token in the device's (0 = top), -1 = unknown */
    int device_rank, ref_rank;
    const char *device_top5_json, *ref_top5_json; /* JSON arrays, as the verifier wrote them */
    int agreed_prefix;   /* tokens agreed before divergence */
    const char *status;  /* required, e.g. "PASS", "FAIL", "WARN" */
    const char *reason;
    /* The divergence localized (nb_localize_json text) and its verdict; NULL when none. */
    const char *localization_json, *localization_verdict;
    /* The decode-path check (nb_decode_check_json text) and its status ("clean", "fault",
     * "unchecked"); NULL when none was made (results from before it). A "fault" under a
     * "PASS" status is a PASS of the production gate with a decode-path defect. */
    const char *decode_check_json, *decode_status;
} nb_db_gate_check;

typedef struct nb_db_layer_cosine {
    int layer; /* unique within the run */
    double min, p5, median, mean, max_abs;
} nb_db_layer_cosine;

/* One row of profile_phases or profile_kernels. */
typedef struct nb_db_profile_entry {
    const char *name; /* required */
    int64_t calls;
    double total_ms, avg_ms;
} nb_db_profile_entry;

typedef struct nb_db_kv {
    const char *key, *value; /* both required; keys unique within the run */
} nb_db_kv;

typedef struct nb_db_run_env {
    const char *npubench_commit, *board, *cpu_info, *npu_info, *backend, *dtype;
    int threads; /* 0 = unknown */
    const char *model_digest;
} nb_db_run_env;

struct nb_db_arena;

/* A run. As input (nb_db_run_insert) every pointer is borrowed and may be
 * NULL (strings: absent; arrays: with a count of 0). As output (nb_db_run_get)
 * everything is owned by the struct and released by nb_db_run_free. */
typedef struct nb_db_run {
    int64_t id;            /* out */
    int64_t job_id;        /* 0 = not from a job (set by nb_db_job_complete) */
    int job_seq;           /* index among the job's runs (set by nb_db_job_complete) */
    const char *lease_id;  /* the lease that produced it (set by nb_db_job_complete) */
    int64_t deployment_id; /* required: nb_db_deployment_upsert */
    const char *worker_id, *runner;
    const char *kind;      /* required: "verify", "bench", "profile", ... */
    nb_db_outcome outcome;
    const char *error;     /* why, for ERROR */
    int64_t started_ms;    /* required (> 0) */
    int64_t finished_ms;   /* 0 = unknown */
    double value[NB_METRIC_N];  /* headline values, as the benchmark reports them */
    double mean[NB_METRIC_N];   /* over reps */
    double stddev[NB_METRIC_N]; /* sample stddev over reps */
    int64_t prompt_tokens, generated_tokens, context_len; /* -1 = unknown */
    int reps;                   /* 0 = unknown */
    nb_db_run_env env;
    const char *report_json;
    int regression;             /* see nb_db_run_check_regression */
    const char *regression_detail;
    /* A flagged run: the check's numbers, kept with its regression (nb_db_regress.h) so a
     * later run of the series can be seen back in the band; NULL = not known. */
    const struct nb_db_regression_report *regression_report;
    nb_db_source source;
    const char *external_id;    /* unique when set (imports) */
    /* Imports: the verify status the source reported, "pass", "fail", "error", "skip"
     * or "unknown" (reported as "" or null); NULL for npubench's own runs. */
    const char *verify_status;
    /* Imports: which measurement the row reports ("<model>|<started_ms>|perf", or
     * "|sweep:<context_len>"), the same whichever file brought it; NULL otherwise. */
    const char *measurement_key;

    const nb_db_sample *samples;
    size_t n_samples;
    const nb_db_gate_check *gate_checks;
    size_t n_gate_checks;
    const nb_db_layer_cosine *cosines;
    size_t n_cosines;
    const nb_db_profile_entry *phases;
    size_t n_phases;
    const nb_db_profile_entry *kernels;
    size_t n_kernels;
    const nb_db_kv *toolchain;
    size_t n_toolchain;

    struct nb_db_arena *arena_; /* output only: owns everything above */
} nb_db_run;

/* A run with every metric NaN, counts -1/0 and no details, to fill in. */
void nb_db_run_init(nb_db_run *run);

/* Inserts run and all its details in one transaction; *id = the new run id.
 * NB_EINVAL for missing required fields or duplicate keys (names the field),
 * NB_EMISMATCH when external_id is already stored. */
nb_code nb_db_run_insert(nb_db *db, const nb_db_run *run, int64_t *id, nb_err *err);

/* Reads run id with all its details; release with nb_db_run_free. */
nb_code nb_db_run_get(nb_db *db, int64_t id, nb_db_run *out, nb_err *err);
void nb_db_run_free(nb_db_run *run);

/* The id of the run imported with external_id; NB_ENOTFOUND if none. */
nb_code nb_db_run_find_external(nb_db *db, const char *external_id, int64_t *id, nb_err *err);

/* Sets a stored run's regression flag and detail (after a later check). */
/* The verdict of job_id's runs (its own, and its children's for a group): *n_runs of them;
 * *worst the worst outcome, a run the regression check flagged counting as FAIL. */
nb_code nb_db_job_runs_verdict(nb_db *db, int64_t job_id, size_t *n_runs, nb_db_outcome *worst,
                               nb_err *err);

nb_code nb_db_run_set_regression(nb_db *db, int64_t id, int regression, const char *detail,
                                 nb_err *err);

/* ---- history ---- */

typedef struct nb_db_history_query {
    const char *model, *board, *backend, *dtype; /* NULL or "" = any */
    int64_t deployment_id;                       /* 0 = any */
    const char *kind;                            /* NULL or "" = any */
    int64_t context_len;                         /* 0 = any (a sweep's context axis) */
    /* Toolchain filters (NULL or "" = any): runs whose toolchain entry air_sha,
     * aie_hash or peano starts with the given text, so a short SHA selects. */
    const char *air_sha, *aie_hash, *peano;
    nb_db_metric metric; /* rows lacking this metric are skipped */
    int64_t since_ms;    /* started at or after; 0 = no bound */
    int64_t until_ms;    /* started before; 0 = no bound */
    const char *commit;  /* npubench commit starting with this; NULL or "" = any */
    /* "KEY=VALUE": the toolchain entry KEY starts with VALUE; "VALUE": some entry (or the
     * npubench commit) starts with it; NULL or "" = any. */
    const char *toolchain;
    size_t limit;        /* 0 = 100; at most NB_DB_HISTORY_MAX */
} nb_db_history_query;

#define NB_DB_HISTORY_MAX 100000

typedef struct nb_db_history_row {
    int64_t run_id, job_id, deployment_id;
    char model[NB_DB_NAME_MAX], board[NB_DB_NAME_MAX], backend[NB_DB_NAME_MAX],
        dtype[NB_DB_NAME_MAX];
    char weights_digest[NB_DB_DIGEST_MAX];
    char kind[NB_DB_NAME_MAX];
    char commit[NB_DB_NAME_MAX];
    nb_db_outcome outcome;
    nb_db_source source;
    int64_t started_ms;
    double value, mean, stddev; /* of the queried metric (mean/stddev NaN for gate) */
    int reps;
    int regression;
    /* Which metrics the check flagged: bit (1u << nb_db_metric) each, read from the run's
     * regression detail; every bit when the run is flagged and its detail names none (a
     * verdict stored without one: flagged everywhere rather than nowhere). 0 = none. */
    unsigned regression_metrics;
    char verify_status[16]; /* see nb_db_run.verify_status; "" when not imported */
    int64_t context_len, generated_tokens, prompt_tokens; /* -1 = unknown */
    int threads;                                          /* 0 = unknown */
    /* What the run ran on and with, from its toolchain entries ("" = not recorded): the NPU
     * driver and firmware the worker's probe read (keys "driver", "firmware") and the
     * mlir-air commit ("air_sha"); the dashboard marks where they change. */
    char driver[64], firmware[64], air_sha[64]; /* a 40-hex SHA fits; longer: cut */
    /* A gate query's rows (NB_METRIC_GATE): how many prompts the run's gate checked and how
     * many passed, so a 1-prompt smoke PASS reads 1/1 beside a full set's 8/8; 0 and 0 where
     * no per-prompt check was stored (an imported status) or another metric was queried. */
    int gate_pass, gate_total;
} nb_db_history_row;

/* The metrics a regression detail names (nb_db_run_check_regression's text, "tps -12.3%
 * (...); ttft +8.0% (...)"), as nb_db_history_row.regression_metrics; flagged with no
 * metric named: every bit; not flagged: 0. */
unsigned nb_db_regression_metrics(int regression, const char *detail);

/* The row's run as a series (strings point into h). */
nb_db_series nb_db_history_row_series(const nb_db_history_row *h);

/* Runs matching q, newest first (started_ms, then id). *rows malloc'ed
 * (free()), NULL when *n == 0. */
nb_code nb_db_history(nb_db *db, const nb_db_history_query *q, nb_db_history_row **rows,
                      size_t *n, nb_err *err);

/* The last n (>= 1) runs of a deployment having metric, newest first. */
nb_code nb_db_runs_last(nb_db *db, int64_t deployment_id, nb_db_metric metric, size_t n,
                        nb_db_history_row **rows, size_t *nrows, nb_err *err);

/* What a run measured, enough to tell like from unlike without loading it whole. */
typedef struct nb_db_run_brief {
    int64_t id, started_ms;
    char kind[NB_DB_NAME_MAX];
    int64_t prompt_tokens, generated_tokens, context_len; /* -1 = unknown */
    int gate_prompts, gate_steps; /* verify: prompts checked, most tokens compared */
    double value[NB_METRIC_N];    /* NaN = absent */
    char measurement_key[NB_DB_MSG_MAX]; /* "" = none (not imported) */
} nb_db_run_brief;

/* The newest limit (1..NB_DB_HISTORY_MAX) runs of a deployment, newest first. *out
 * malloc'ed (free()), NULL when *n == 0. */
nb_code nb_db_runs_brief(nb_db *db, int64_t deployment_id, size_t limit, nb_db_run_brief **out,
                         size_t *n, nb_err *err);

typedef struct nb_db_board_summary {
    char board[NB_DB_NAME_MAX];
    size_t n_runs;
    double mean, min, max; /* of the metric */
    int64_t last_ms;       /* newest run */
} nb_db_board_summary;

/* Aggregates q's matching runs per board (q->limit ignored), by board name. */
nb_code nb_db_history_by_board(nb_db *db, const nb_db_history_query *q,
                               nb_db_board_summary **rows, size_t *n, nb_err *err);

/* ---- regression detection ---- */

typedef struct nb_db_regression_opts {
    size_t last_n;         /* baseline: the deployment's last N runs with the metric */
    double min_rel_change; /* see nb_stats_regression */
    double alpha;
} nb_db_regression_opts;

#define NB_DB_REGRESSION_OPTS_DEFAULT {10, 0.05, 0.05}

/* Pooled baseline samples of metric from the deployment's last n runs
 * (excluding run exclude_id; 0 = none), newest runs first. A run without
 * samples contributes its headline value. *out malloc'ed (free()). */
nb_code nb_db_runs_baseline(nb_db *db, int64_t deployment_id, nb_db_metric metric, size_t n,
                            int64_t exclude_id, double **out, size_t *count, nb_err *err);
/* The same over the deployment's runs of one series only: shape is nb_db_series_shape's
 * text (NULL = every run, as nb_db_runs_baseline). */
nb_code nb_db_runs_baseline_series(nb_db *db, int64_t deployment_id, const char *shape,
                                   nb_db_metric metric, size_t n, int64_t exclude_id,
                                   double **out, size_t *count, nb_err *err);

typedef struct nb_db_regression_report {
    int regression; /* any metric regressed */
    nb_stats_regression_result m[NB_METRIC_N];
    int checked[NB_METRIC_N]; /* 1 where both sides had data */
    char detail[NB_DB_MSG_MAX]; /* "tps -12.3% (p=0.0011, 5 vs 50 samples); ..." */
    double min_rel_change;      /* the band the check used (opts->min_rel_change) */
} nb_db_regression_report;

/* Compares run (its samples, or its headline values) with the baseline of
 * its deployment's runs of the same series (kind, context, tokens, prompt length, threads:
 * nb_db_series_shape) for TTFT, TPS, decode and TPOT; run->id (if set) is
 * excluded from the baseline. Reads only: store the verdict in the run
 * (regression, regression_detail) before inserting, or with
 * nb_db_run_set_regression. opts NULL = defaults. */
nb_code nb_db_run_check_regression(nb_db *db, const nb_db_run *run,
                                   const nb_db_regression_opts *opts,
                                   nb_db_regression_report *rep, nb_err *err);

#endif
