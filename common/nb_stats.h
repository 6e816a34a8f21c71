/* nb_stats: descriptive statistics and the Mann-Whitney U test behind
 * regression detection (a change must be both large and significant). */
#ifndef NB_STATS_H
#define NB_STATS_H

#include <stddef.h>

#include "nb_err.h"

/* NaN when n == 0 (mean, median) or n < 2 (stddev, the n-1 sample form). */
double nb_stats_mean(const double *x, size_t n);
double nb_stats_stddev(const double *x, size_t n);
double nb_stats_median(const double *x, size_t n); /* NaN also if out of memory */

typedef enum nb_stats_mwu_method {
    NB_MWU_AUTO = 0,   /* exact when both samples <= NB_STATS_MWU_EXACT_MAX, else asymptotic */
    NB_MWU_EXACT,      /* permutation distribution of the (mid)ranks */
    NB_MWU_ASYMPTOTIC  /* normal approximation, tie and continuity corrected */
} nb_stats_mwu_method;

#define NB_STATS_MWU_EXACT_MAX 20

typedef struct nb_stats_mwu {
    double u;  /* U of x: R_x - n_x (n_x + 1) / 2 (ties get midranks) */
    double p;  /* two-sided p-value */
    int exact; /* 1 if p came from the exact distribution */
} nb_stats_mwu;

/* Two-sided Mann-Whitney U test of x against y, as scipy.stats.mannwhitneyu
 * (alternative='two-sided'). Exact: p = P(|U - nx ny / 2| >= observed) over
 * all C(nx+ny, nx) equally likely splits of the pooled midranks, computed by
 * dynamic programming over rank sums; with no ties this equals scipy's
 * method='exact', with ties it is the exact conditional (permutation) test
 * where scipy's 'exact' ignores the ties. Asymptotic: z = (max(U, nx ny - U)
 * - nx ny / 2 - 1/2) / sigma with the tie-corrected sigma, p = 2 (1 - Phi(z)),
 * as scipy's method='asymptotic' with use_continuity=True.
 * NB_EINVAL for an empty sample, a NaN, or EXACT beyond the size limit. */
nb_code nb_stats_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                              nb_stats_mwu_method method, nb_stats_mwu *out, nb_err *err);

typedef struct nb_stats_regression_params {
    double min_rel_change; /* e.g. 0.05: flag only changes larger than 5% */
    double alpha;          /* e.g. 0.05: flag only when p < alpha */
    int higher_is_better;  /* 1 for throughput, 0 for latencies */
} nb_stats_regression_params;

typedef struct nb_stats_regression_result {
    int regression;  /* worse by more than min_rel_change AND p < alpha */
    int improvement; /* better by more than min_rel_change AND p < alpha */
    double rel_change; /* (median(new) - median(base)) / |median(base)| */
    double new_median, base_median;
    double u, p;
    size_t n_new, n_base;
} nb_stats_regression_result;

/* Compares new samples with baseline samples. The change is measured on
 * medians (robust to one slow repetition); significance by the U test. */
nb_code nb_stats_regression(const double *new_samples, size_t n_new, const double *base,
                            size_t n_base, const nb_stats_regression_params *params,
                            nb_stats_regression_result *out, nb_err *err);

#endif
