/* nb_exec_out: what a deployment's command printed, read the way mlir-air reads it: the
 * inference scripts' summary lines with bench/extract_perf.py's precedence, verify verdicts. */
#ifndef NB_EXEC_OUT_H
#define NB_EXEC_OUT_H

#include <stddef.h>

#include "nb_err.h"

/* The line formats a metric can come from, highest precedence first (extract_perf's
 * order; docs/mlir-air.md has one row per format).  A metric is read from the first
 * format that occurs anywhere in the output; within it, the first occurrence counts. */
typedef enum nb_exec_out_ttft_fmt {
    NB_EXEC_OUT_TTFT_NONE = -1,
    NB_EXEC_OUT_TTFT_WARM,     /* "Warm time to first token (TTFT): X.XXXs" (anywhere) */
    NB_EXEC_OUT_TTFT_COLD,     /* "Time to first token (TTFT): X.XXs" (at a line's start) */
    NB_EXEC_OUT_TTFT_PREFILL,  /* "End-to-end (prefill, per query)  N ms" */
    NB_EXEC_OUT_TTFT_ACTION,   /* "Action chunk (...): N ms" */
    NB_EXEC_OUT_TTFT_N
} nb_exec_out_ttft_fmt;

typedef enum nb_exec_out_tps_fmt {
    NB_EXEC_OUT_TPS_NONE = -1,
    NB_EXEC_OUT_TPS_PAREN,     /* "(Y.YY tok/s)", e.g. "Generated N tokens in X.XXs (Y.YY tok/s)" */
    NB_EXEC_OUT_TPS_DECODE_MS, /* "End-to-end (per token)  N ms": 1000 / N */
    NB_EXEC_OUT_TPS_LABEL,     /* "Tokens/second: Y.YY" */
    NB_EXEC_OUT_TPS_N
} nb_exec_out_tps_fmt;

typedef struct nb_exec_out {
    /* Rounded to 0.01 like extract_perf, so a run here and the nightly's perf.json of the
     * same output agree to the digit.  has_* is 0 when no format gave a usable value (a
     * winning "End-to-end (per token) 0 ms" is unusable, as there). */
    int has_ttft, has_tps;
    double ttft_ms, tps;
    nb_exec_out_ttft_fmt ttft_fmt;
    nb_exec_out_tps_fmt tps_fmt;
    double decode_ms_per_token;      /* the printed per-token ms when that won, else 1000/tps */
    int context_len;                 /* first "prompt_len=N" / "prompt_len: N"; -1 absent */
    int generated_tokens;            /* "Generated N tokens in", else npubench's
                                        "generated tokens: N"; -1 absent */
    int prompt_tokens;               /* npubench's "Prompt tokens: N"; -1 absent */
    int gate;                        /* -1: no "[verify] PASS|FAIL" verdict, 0: PASS, 1: FAIL */
    int gate_passed, gate_total;     /* from "(P/T prompts pass)" or the runner's Summary dict
                                        ('topk_passed': P, 'topk_failed': F); else -1 */
    char report_path[1024];          /* "[verify] JSON:   <path>", else npubench's
                                        "Report: <path>.json" */
} nb_exec_out;

/* Reads output (not NUL-terminated; lines end in \n, a trailing \r is dropped). */
void nb_exec_out_parse(const char *output, size_t len, nb_exec_out *out);

/* Every occurrence of the winning TTFT (ms) and TPS formats, in order: the samples of a
 * command that repeats itself.  *ttft / *tps are malloc'ed (free()); counts may differ. */
nb_code nb_exec_out_samples(const char *output, size_t len, double **ttft, int *n_ttft,
                            double **tps, int *n_tps, nb_err *err);

/* The printed name of a format, for messages and docs ("(X tok/s)"). */
const char *nb_exec_out_ttft_fmt_name(nb_exec_out_ttft_fmt f);
const char *nb_exec_out_tps_fmt_name(nb_exec_out_tps_fmt f);

#endif
