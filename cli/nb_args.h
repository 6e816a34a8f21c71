/* nb_args: declarative --flag parsing for every subcommand.
 * Unknown flags, missing values and out-of-range numbers are errors naming the flag and the limit. */
#ifndef NB_ARGS_H
#define NB_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "nb_err.h"

typedef enum nb_opt_type {
    NB_OPT_STR,   /* const char ** */
    NB_OPT_INT,   /* int *, checked against [lo, hi] */
    NB_OPT_FLAG,  /* int *, set to 1 (or to `lo` when lo != 0) */
    NB_OPT_LIST   /* nb_strlist * (repeatable) */
} nb_opt_type;

#define NB_LIST_MAX 32

typedef struct nb_strlist {
    const char *items[NB_LIST_MAX];
    int n;
} nb_strlist;

typedef struct nb_opt {
    const char *name;   /* without the leading "--" */
    nb_opt_type type;
    void *dst;
    long lo, hi;
    const char *help;
} nb_opt;

/* Parses argv[0..argc) (the words after the subcommand). Positional words
 * go to pos (up to max_pos); more is an error. */
nb_code nb_args_parse(int argc, char **argv, const nb_opt *opts, int n_opts, const char **pos,
                      int max_pos, int *n_pos, nb_err *err);
void nb_args_usage(FILE *f, const char *usage, const nb_opt *opts, int n_opts);

/* A duration as people write it: "90" or "90s", "15m", "2h", "1d", or "never" (*ms = -1),
 * at most max_ms; the error names field and the limit. */
nb_code nb_args_duration(const char *field, const char *s, int64_t max_ms, int64_t *ms,
                         nb_err *err);

/* The length of an nb_opt array. */
#define NB_NOPTS(o) ((int)(sizeof(o) / sizeof *(o)))

#endif
