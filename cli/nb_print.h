/* nb_print: prints results as the local commands do — run/profile tables, verify lines and
 * reports, diagnosis layers — from a JobResult, so every path prints through one place. */
#ifndef NB_PRINT_H
#define NB_PRINT_H

#include <stdio.h>

#include "nb_bench.h"
#include "nb_wire.h"

/* The timings of a run: setup, tokens, TTFT, decode, tokens/second. */
void nb_print_run(FILE *f, const nb_run_result *r);
/* The phase and kernel table of a profile. */
void nb_print_profile(FILE *f, const nb_profile_result *p);

typedef struct nb_print_opts {
    const char *cmd;         /* "verify", "run", ... for error lines */
    const char *reports_dir; /* write verify/diagnosis reports here; NULL = don't */
    int quiet;               /* verify: only the summary line */
    int show_text;           /* run: the generated text */
} nb_print_opts;

/* Prints a finished job's result the way `npubench <kind>` does locally
 * (verify lines + Report:, run/profile tables, diagnosis layers), or its
 * error, and returns the exit code (nb_outcome_exit): 0 pass, 1 gate FAIL or
 * regression, 2 no verdict, 3 unavailable, 4 cancelled, 5 expired; the highest
 * wins. Matrix groups print every board's. */
int nb_print_job(FILE *f, const nb_print_opts *o, const Npubench__Job *job);
/* One result of a job of that kind, as nb_print_job prints each: the result, or its error
 * with the exit code its status maps to; a regression turns a pass into exit code 1. */
int nb_print_result(FILE *f, const nb_print_opts *o, int kind, const Npubench__JobResult *res);
/* One cell of a matrix as it finishes, on one line: "lab-a × SmolLM2-135M-Instruct ×
 * profile: pass, TTFT 250.0 ms, 50.00 tokens/s" (a verify: "gate 8/8 prompts pass"; an
 * error: its message; a regression: its detail), in nb_outcome's words. */
void nb_print_cell(FILE *f, int kind, const Npubench__JobResult *res);
/* A result's model by its display name (the canonical form of its file or name:
 * "SmolLM2-135M-Instruct", never the GGUF's general.name); "?" when none. */
const char *nb_print_model_name(const Npubench__Environment *e, char *name, size_t cap);

#endif
