/* nb_stats: mean/stddev/median and the two-sided Mann-Whitney U test, exact
 * (rank-sum dynamic programming, ties included) for small samples. */
#include "nb_stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

double nb_stats_mean(const double *x, size_t n)
{
    if (!n)
        return NAN;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s / (double)n;
}

double nb_stats_stddev(const double *x, size_t n)
{
    if (n < 2)
        return NAN;
    double m = nb_stats_mean(x, n), ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (double)(n - 1));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double nb_stats_median(const double *x, size_t n)
{
    if (!n || n > SIZE_MAX / sizeof(double))
        return NAN;
    double *c = malloc(n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, x, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

typedef struct ranked {
    double v;
    int from_x;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    return cmp_double(&((const ranked *)a)->v, &((const ranked *)b)->v);
}

/* Exact two-sided p: counts subsets of nx pooled items whose doubled
 * rank sum deviates from the null mean at least as much as observed.
 * Doubled midranks are integers, so the comparison is exact. */
static nb_code exact_p(const int *r2, size_t n, size_t nx, int64_t dev_obs, double *p,
                       nb_err *err)
{
    size_t smax = 0;
    for (size_t i = 0; i < n; i++)
        smax += (size_t)r2[i];
    size_t width = smax + 1;
    double *dp = calloc((nx + 1) * width, sizeof *dp);
    if (!dp)
        return nb_err_set(err, NB_ENOMEM, "Mann-Whitney exact: out of memory");
    dp[0] = 1; /* dp[k * width + s]: subsets of size k with doubled rank sum s */
    for (size_t i = 0; i < n; i++) {
        size_t r = (size_t)r2[i];
        size_t kmax = i + 1 < nx ? i + 1 : nx;
        for (size_t k = kmax; k >= 1; k--) {
            double *row = dp + k * width;
            const double *prev = dp + (k - 1) * width;
            for (size_t s = smax; s >= r; s--) {
                row[s] += prev[s - r];
                if (s == r)
                    break;
            }
        }
    }
    size_t ny = n - nx;
    int64_t base = (int64_t)(nx * (nx + 1)), mean2 = (int64_t)(nx * ny);
    double hit = 0, total = 0;
    const double *last = dp + nx * width;
    for (size_t s = 0; s <= smax; s++) {
        if (last[s] == 0)
            continue;
        total += last[s];
        int64_t dev = (int64_t)s - base - mean2;
        if (dev < 0)
            dev = -dev;
        if (dev >= dev_obs)
            hit += last[s];
    }
    free(dp);
    *p = total > 0 ? hit / total : 1.0;
    if (*p > 1)
        *p = 1;
    return NB_OK;
}

nb_code nb_stats_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                              nb_stats_mwu_method method, nb_stats_mwu *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (!nx || !ny)
        return nb_err_set(err, NB_EINVAL, "Mann-Whitney: empty sample (%zu vs %zu values)", nx,
                          ny);
    if (nx > (SIZE_MAX / 4) / sizeof(ranked) || ny > (SIZE_MAX / 4) / sizeof(ranked) - nx)
        return nb_err_set(err, NB_EINVAL, "Mann-Whitney: samples too large");
    int exact = method == NB_MWU_EXACT ||
                (method == NB_MWU_AUTO && nx <= NB_STATS_MWU_EXACT_MAX &&
                 ny <= NB_STATS_MWU_EXACT_MAX);
    if (exact && (nx > NB_STATS_MWU_EXACT_MAX || ny > NB_STATS_MWU_EXACT_MAX))
        return nb_err_set(err, NB_EINVAL,
                          "Mann-Whitney: exact test limited to %d values per sample (got %zu "
                          "and %zu)",
                          NB_STATS_MWU_EXACT_MAX, nx, ny);
    size_t n = nx + ny;
    ranked *all = malloc(n * sizeof *all);
    int *r2 = malloc(n * sizeof *r2);
    if (!all || !r2) {
        free(all);
        free(r2);
        return nb_err_set(err, NB_ENOMEM, "Mann-Whitney: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        double v = i < nx ? x[i] : y[i - nx];
        if (isnan(v)) {
            free(all);
            free(r2);
            return nb_err_set(err, NB_EINVAL, "Mann-Whitney: value %zu of %s is NaN",
                              i < nx ? i : i - nx, i < nx ? "x" : "y");
        }
        all[i].v = v;
        all[i].from_x = i < nx;
    }
    qsort(all, n, sizeof *all, cmp_ranked);
    /* Midranks, doubled: a tie group over sorted positions [a, b] (0-based)
     * shares rank (a + 1 + b + 1) / 2. */
    int64_t rx2 = 0;
    double tie_term = 0;
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b + 1 < n && all[b + 1].v == all[a].v)
            b++;
        int d = (int)(a + b + 2);
        for (size_t i = a; i <= b; i++) {
            r2[i] = d;
            if (all[i].from_x)
                rx2 += d;
        }
        double t = (double)(b - a + 1);
        tie_term += t * t * t - t;
        a = b + 1;
    }
    int64_t u2 = rx2 - (int64_t)(nx * (nx + 1)); /* 2 U_x */
    out->u = (double)u2 / 2;
    double mn = (double)nx * (double)ny;
    nb_code rc = NB_OK;
    if (exact) {
        int64_t dev = u2 - (int64_t)(nx * ny);
        rc = exact_p(r2, n, nx, dev < 0 ? -dev : dev, &out->p, err);
        out->exact = 1;
    } else {
        double umax = out->u > mn - out->u ? out->u : mn - out->u;
        double dn = (double)n;
        double var = mn / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
        if (var <= 0) {
            out->p = 1; /* every value equal: no evidence either way */
        } else {
            double z = (umax - mn / 2 - 0.5) / sqrt(var);
            out->p = erfc(z / sqrt(2.0));
            if (out->p > 1)
                out->p = 1;
        }
    }
    free(all);
    free(r2);
    return rc;
}

nb_code nb_stats_regression(const double *new_samples, size_t n_new, const double *base,
                            size_t n_base, const nb_stats_regression_params *params,
                            nb_stats_regression_result *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (!(params->min_rel_change >= 0) || !isfinite(params->min_rel_change))
        return nb_err_set(err, NB_EINVAL, "regression: min_rel_change must be >= 0 (got %g)",
                          params->min_rel_change);
    if (!(params->alpha > 0 && params->alpha < 1))
        return nb_err_set(err, NB_EINVAL, "regression: alpha must be in (0, 1) (got %g)",
                          params->alpha);
    nb_stats_mwu t;
    nb_code rc = nb_stats_mann_whitney(new_samples, n_new, base, n_base, NB_MWU_AUTO, &t, err);
    if (rc)
        return nb_err_prefix(err, "regression: ");
    out->n_new = n_new;
    out->n_base = n_base;
    out->u = t.u;
    out->p = t.p;
    out->new_median = nb_stats_median(new_samples, n_new);
    out->base_median = nb_stats_median(base, n_base);
    if (isnan(out->new_median) || isnan(out->base_median))
        return nb_err_set(err, NB_ENOMEM, "regression: out of memory");
    double d = out->new_median - out->base_median;
    if (out->base_median != 0)
        out->rel_change = d / fabs(out->base_median);
    else
        out->rel_change = d == 0 ? 0 : copysign(INFINITY, d);
    int significant = t.p < params->alpha;
    int worse = params->higher_is_better ? out->rel_change < -params->min_rel_change
                                         : out->rel_change > params->min_rel_change;
    int better = params->higher_is_better ? out->rel_change > params->min_rel_change
                                          : out->rel_change < -params->min_rel_change;
    out->regression = significant && worse;
    out->improvement = significant && better;
    return NB_OK;
}
