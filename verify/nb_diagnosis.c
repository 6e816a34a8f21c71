/* nb_diagnosis: the per-layer cosine summary a diagnosis records, and its result's lifetime.
 * The run that captures the layers is verify/runner/nb_diagnosis_run. */
#include "nb_diagnosis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void nb_cos_stats_rows(const float *a, const float *b, int n, int dim, nb_cos_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0)
        return;
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!c)
        return;
    double sum = 0.0, max_abs = 0.0;
    for (int i = 0; i < n; i++) {
        const float *x = a + (size_t)i * dim, *y = b + (size_t)i * dim;
        double dot = 0, nx = 0, ny = 0;
        for (int t = 0; t < dim; t++) {
            dot += (double)x[t] * y[t];
            nx += (double)x[t] * x[t];
            ny += (double)y[t] * y[t];
            double d = fabs((double)x[t] - y[t]);
            if (d > max_abs)
                max_abs = d;
        }
        c[i] = nx > 0 && ny > 0 ? dot / (sqrt(nx) * sqrt(ny)) : (nx == ny ? 1.0 : 0.0);
        sum += c[i];
    }
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    out->min = c[0];
    /* nearest-rank percentiles, as numpy's 'lower' would pick */
    out->p5 = c[(size_t)floor(0.05 * (n - 1))];
    out->median = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    out->mean = sum / n;
    out->max_abs = max_abs;
    free(c);
}

void nb_diagnosis_result_free(nb_diagnosis_result *r)
{
    free(r->layers);
    r->layers = NULL;
    r->n_layers = 0;
}
