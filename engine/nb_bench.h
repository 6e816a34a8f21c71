/* nb_bench: the timed jobs — run (TTFT, TPS, TPOT over repetitions) and profile (per phase, per op).
 * Setup is never inside a timed region; one untimed warm-up precedes the repetitions. */
#ifndef NB_BENCH_H
#define NB_BENCH_H

#include "nb_deploy.h"
#include "nb_engine.h"
#include "nb_generate.h"

typedef struct nb_run_opts {
    const char *prompt; /* NULL: the default prompt */
    int n_tokens;       /* tokens to generate */
    int reps;           /* timed repetitions (>= 1) */
    int warmup;         /* untimed runs first (0 or more) */
    int chat;           /* -1: the preset decides (instruct yes, base no), 0 no, 1 yes */
    int stop_eog;       /* stop at end-of-generation (run); profile never stops */
    nb_cancel cancel;   /* polled between repetitions and tokens: NB_ECANCELED */
    /* NULL, or called after each timed repetition (done of total, "TTFT .. ms, .. tok/s") */
    void (*progress)(void *user, int done, int total, const char *msg);
    void *progress_user;
    nb_token_hook on_token; /* tokens of each timed repetition (not of the warm-up) */
} nb_run_opts;

void nb_run_opts_default(nb_run_opts *o);

#define NB_DEFAULT_RUN_PROMPT "Write a short story about a robot who learns to paint."

typedef struct nb_run_sample {
    double tokenize_ms;
    double ttft_ms;      /* tokenize + prefill + LM head -> first token */
    double decode_ms;    /* decode wall time */
    double latency_ms;   /* ttft + decode */
    double tps;          /* decode tokens / decode wall time */
    double decode_ms_per_token;
    double tpot_ms;      /* MLPerf: (latency - TTFT) / (n - 1) */
    int prompt_tokens, generated_tokens;
} nb_run_sample;

typedef struct nb_stat {
    double mean, stddev;
} nb_stat;

typedef struct nb_run_result {
    nb_run_sample *samples; /* reps entries */
    int n;
    nb_stat ttft_ms, tps, decode_ms_per_token, tpot_ms;
    char *text;             /* generated text of the last repetition */
    char *prompt_text;      /* the prompt as fed (template applied) */
    double setup_ms;
} nb_run_result;

nb_code nb_bench_run(nb_deploy *d, const nb_run_opts *o, nb_run_result *out, nb_err *err);
void nb_run_result_free(nb_run_result *r);

typedef struct nb_profile_result {
    double setup_ms;
    int prompt_tokens, n_tokens, reps;
    nb_stat prefill_ms, decode_avg_ms; /* over repetitions */
    double lm_head_ms;      /* per call */
    nb_op_stats ops[NB_OP_COUNT]; /* summed over timed repetitions */
    nb_run_result run;      /* the same repetitions' TTFT/TPS */
} nb_profile_result;

nb_code nb_bench_profile(nb_deploy *d, const nb_run_opts *o, nb_profile_result *out,
                         nb_err *err);
void nb_profile_result_free(nb_profile_result *p);

/* Mean and sample standard deviation of n values. */
nb_stat nb_stat_of(const double *x, int n);

#endif
