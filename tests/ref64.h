/* ref64: the fp64 formulas (HF's definitions) that test_kernels_ref and test_engine_ref check
 * the kernels and the engine against; written from the definitions, sharing no kernel code. */
#ifndef NB_REF64_H
#define NB_REF64_H

#include <math.h>
#include <stddef.h>

/* 1 / sqrt(mean(x^2) + eps) over all n elements (LlamaRMSNorm). */
static inline double ref64_rms_inv(const double *x, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    return 1 / sqrt(ss / n + eps);
}

static inline double ref64_silu(double g)
{
    return g / (1 + exp(-g));
}

/* One query head over n_pos cached positions: out[hd] = softmax(q.k_p / sqrt(hd)) . v_p, where
 * k_p = k + p * stride (likewise v). */
static inline void ref64_attend(const double *q, const double *k, const double *v, int n_pos,
                                int stride, int hd, double *out)
{
    double sc[n_pos], mx = -INFINITY, sum = 0;
    for (int p = 0; p < n_pos; p++) {
        double d = 0;
        for (int i = 0; i < hd; i++)
            d += q[i] * k[(size_t)p * stride + i];
        sc[p] = d / sqrt((double)hd);
        mx = fmax(mx, sc[p]);
    }
    for (int p = 0; p < n_pos; p++)
        sum += sc[p] = exp(sc[p] - mx);
    for (int i = 0; i < hd; i++) {
        double acc = 0;
        for (int p = 0; p < n_pos; p++)
            acc += sc[p] / sum * v[(size_t)p * stride + i];
        out[i] = acc;
    }
}

#endif
