/* nb_db_regress: a flagged regression's lifecycle, as LNT keeps it: new when the check flags a
 * run, acknowledged by a person (who, why), fixed when a later run of the same series is back
 * inside the noise band, or closed by a person. */
#ifndef NB_DB_REGRESS_H
#define NB_DB_REGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"
#include "nb_db_series.h"

typedef enum nb_db_regress_state {
    NB_REGRESS_NEW = 0,
    NB_REGRESS_ACKNOWLEDGED,
    NB_REGRESS_FIXED,
    NB_REGRESS_STATE_N
} nb_db_regress_state;

#define NB_REGRESS_STATE_BIT(s) (1u << (s))
#define NB_DB_REGRESS_LIST_MAX 10000

const char *nb_db_regress_state_name(nb_db_regress_state s); /* "new", "acknowledged", "fixed" */
/* The name back; an error naming field and the three words. */
nb_code nb_db_regress_state_parse(const char *field, const char *s, nb_db_regress_state *out,
                                  nb_err *err);

/* What the check measured, per metric it flagged: the baseline's median before the regression
 * and the band (relative) a later run must be back inside. */
typedef struct nb_db_regress_metric {
    char metric[16]; /* nb_db_metric_name */
    double base_median, new_median, band;
    int higher_is_better;
} nb_db_regress_metric;

#define NB_DB_REGRESS_METRICS_MAX 4

typedef struct nb_db_regression {
    int64_t id, run_id, deployment_id;
    char series[NB_DB_SERIES_MAX]; /* nb_db_series_key of the flagged run */
    char model[NB_DB_NAME_MAX], board[NB_DB_NAME_MAX], kind[NB_DB_NAME_MAX];
    char detail[NB_DB_MSG_MAX];    /* the check's words */
    nb_db_regress_state state;
    int64_t created_ms, state_ms;  /* flagged; last change of state */
    char ack_by[NB_DB_NAME_MAX], ack_note[NB_DB_MSG_MAX];
    int64_t ack_ms;                /* 0 = never acknowledged */
    /* fixed: by fixed_run_id (fixed_by "") or closed by a person (fixed_by, fixed_note) */
    int64_t fixed_ms, fixed_run_id;
    char fixed_by[NB_DB_NAME_MAX], fixed_note[NB_DB_MSG_MAX];
    nb_db_regress_metric metrics[NB_DB_REGRESS_METRICS_MAX];
    size_t n_metrics; /* 0: flagged before the numbers were kept (or imported flagged) */
} nb_db_regression;

/* The regressions in the states of mask (NB_REGRESS_STATE_BITs; 0 = all), newest first, at
 * most limit (1..NB_DB_REGRESS_LIST_MAX). *out malloc'ed (free()), NULL when *n == 0. */
nb_code nb_db_regress_list(nb_db *db, unsigned mask, size_t limit, nb_db_regression **out,
                           size_t *n, nb_err *err);
/* How many regressions are in each state (n[NB_REGRESS_NEW] ...). */
nb_code nb_db_regress_count(nb_db *db, size_t n[NB_REGRESS_STATE_N], nb_err *err);
/* One by id, or the one of a flagged run; NB_ENOTFOUND naming it. */
nb_code nb_db_regress_get(nb_db *db, int64_t id, nb_db_regression *out, nb_err *err);
nb_code nb_db_regress_of_run(nb_db *db, int64_t run_id, nb_db_regression *out, nb_err *err);

/* A person acknowledges it (new -> acknowledged; acknowledging again replaces who and why):
 * by and note required (NB_EINVAL naming --by / --note and the limit). A fixed one:
 * NB_EMISMATCH saying how it was fixed. *out (may be NULL) gets the row after. */
nb_code nb_db_regress_ack(nb_db *db, int64_t id, const char *by, const char *note,
                          nb_db_regression *out, nb_err *err);
/* A person closes it (new or acknowledged -> fixed, fixed_by = by, note may be ""); already
 * fixed: NB_EMISMATCH. */
nb_code nb_db_regress_close(nb_db *db, int64_t id, const char *by, const char *note,
                            nb_db_regression *out, nb_err *err);

#endif
