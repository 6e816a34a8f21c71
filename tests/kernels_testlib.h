/* kernels_testlib: random inputs and fp32-rounding-aware comparisons for the kernel tests.
 * Header-only (each test is its own executable); shared by test_kernels.c and test_kernels_emu.c. */
#ifndef NB_KERNELS_TESTLIB_H
#define NB_KERNELS_TESTLIB_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_bf16.h"
#include "nb_kernels.h"

static uint64_t kt_rng = 0x9e3779b97f4a7c15ull;

static inline uint32_t kt_u32(void)
{
    kt_rng ^= kt_rng << 13;
    kt_rng ^= kt_rng >> 7;
    kt_rng ^= kt_rng << 17;
    return (uint32_t)(kt_rng >> 16);
}

/* Roughly normal(0, 1): sum of four uniforms, centred and scaled. */
static inline float kt_normal(void)
{
    float s = 0.0f;
    for (int i = 0; i < 4; i++)
        s += (float)(kt_u32() & 0xffffff) / 16777216.0f;
    return (s - 2.0f) * 1.7320508f;
}

static inline void kt_fill_bf16(nb_bf16 *p, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        p[i] = nb_f32_to_bf16(kt_normal() * scale);
}

static inline void kt_fill_f32(float *p, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        p[i] = kt_normal() * scale;
}

/* An attention test's q (qn values), k and v caches (kvn each), f32 or bf16: q and k at scale
 * 2, v at 1, in that order (the random stream makes runs comparable). */
static inline void kt_fill_qkv(void *q, size_t qn, void *kc, void *vc, size_t kvn, int f32)
{
    if (f32) {
        kt_fill_f32(q, qn, 2.0f);
        kt_fill_f32(kc, kvn, 2.0f);
        kt_fill_f32(vc, kvn, 1.0f);
    } else {
        kt_fill_bf16(q, qn, 2.0f);
        kt_fill_bf16(kc, kvn, 2.0f);
        kt_fill_bf16(vc, kvn, 1.0f);
    }
}

/* An IEEE half with exponent in [emin, emax] (biased), random mantissa. */
static inline uint16_t kt_f16(int sign, int emin, int emax)
{
    int e = emin + (int)(kt_u32() % (unsigned)(emax - emin + 1));
    return (uint16_t)((sign ? 0x8000 : 0) | (e << 10) | (kt_u32() & 0x3ff));
}

/* One random row of a weight type (cols elements): as nb_wmat_set_row takes it. */
static inline void kt_fill_row(nb_wtype t, int cols, uint8_t *dst)
{
    switch (t) {
    case NB_W_F32:
        kt_fill_f32((float *)dst, (size_t)cols, 0.05f);
        break;
    case NB_W_BF16:
        kt_fill_bf16((nb_bf16 *)dst, (size_t)cols, 0.05f);
        break;
    case NB_W_Q4_1:
        for (int b = 0; b < cols / 32; b++) {
            uint8_t *blk = dst + (size_t)b * 20;
            /* d in [2^-8, 2^-4); m = about -8d; now and then a subnormal d */
            uint16_t d = (kt_u32() % 50) ? kt_f16(0, 7, 10) : (uint16_t)(kt_u32() & 0x3ff);
            uint16_t m = kt_f16(1, 7, 12);
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &m, 2);
            for (int j = 0; j < 16; j++)
                blk[4 + j] = (uint8_t)kt_u32();
        }
        break;
    case NB_W_Q8_0:
        for (int b = 0; b < cols / 32; b++) {
            uint8_t *blk = dst + (size_t)b * 34;
            uint16_t d = kt_f16(0, 5, 8);
            memcpy(blk, &d, 2);
            for (int j = 0; j < 32; j++)
                blk[2 + j] = (uint8_t)kt_u32();
        }
        break;
    case NB_W_Q5_0:
        for (int b = 0; b < cols / 32; b++) {
            uint8_t *blk = dst + (size_t)b * 22;
            uint16_t d = kt_f16((int)(kt_u32() & 1), 7, 10); /* gguf-py's d = max / -16: either sign */
            memcpy(blk, &d, 2);
            for (int j = 2; j < 22; j++)
                blk[j] = (uint8_t)kt_u32();
        }
        break;
    case NB_W_Q4_K:
        for (int b = 0; b < cols / 256; b++) {
            uint8_t *blk = dst + (size_t)b * 144;
            uint16_t d = kt_f16(0, 3, 6), dmin = kt_f16(0, 3, 6);
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dmin, 2);
            for (int j = 4; j < 144; j++) /* all 6 bits of every scale and min, and the quants */
                blk[j] = (uint8_t)kt_u32();
        }
        break;
    case NB_W_Q6_K:
        for (int b = 0; b < cols / 256; b++) {
            uint8_t *blk = dst + (size_t)b * 210;
            for (int j = 0; j < 208; j++) /* ql, qh and signed scales */
                blk[j] = (uint8_t)kt_u32();
            uint16_t d = kt_f16(0, 2, 5);
            memcpy(blk + 208, &d, 2);
        }
        break;
    }
}

/* Elements per block of a weight type: rows must hold whole blocks. */
static inline int kt_block_elems(nb_wtype t)
{
    return t == NB_W_Q4_K || t == NB_W_Q6_K ? 256 : t == NB_W_F32 || t == NB_W_BF16 ? 1 : 32;
}

static inline size_t kt_row_bytes(nb_wtype t, int cols)
{
    switch (t) {
    case NB_W_F32: return (size_t)cols * 4;
    case NB_W_BF16: return (size_t)cols * 2;
    case NB_W_Q4_1: return (size_t)(cols / 32) * 20;
    case NB_W_Q8_0: return (size_t)(cols / 32) * 34;
    case NB_W_Q5_0: return (size_t)(cols / 32) * 22;
    case NB_W_Q4_K: return (size_t)(cols / 256) * 144;
    case NB_W_Q6_K: return (size_t)(cols / 256) * 210;
    }
    return 0;
}

/* rows x cols random rows of a weight type, row after row (caller frees). */
static inline uint8_t *kt_rows(nb_wtype t, int rows, int cols)
{
    size_t rb = kt_row_bytes(t, cols);
    uint8_t *d = malloc(rb * (size_t)rows);
    for (int r = 0; r < rows; r++)
        kt_fill_row(t, cols, d + rb * (size_t)r);
    return d;
}

/* A matrix of those rows, finished by the active path (so in its layout),
 * or NULL (the caller asserts). */
static inline nb_wmat *kt_wmat_from(nb_wtype t, int rows, int cols, const uint8_t *data)
{
    nb_wmat *w;
    nb_err err = {0};
    if (nb_wmat_create(t, rows, cols, &w, &err))
        return NULL;
    size_t rb = kt_row_bytes(t, cols);
    for (int r = 0; r < rows; r++)
        nb_wmat_set_row(w, r, data + rb * (size_t)r);
    if (nb_wmat_finish(w, &err)) {
        nb_wmat_free(w);
        return NULL;
    }
    return w;
}

static inline nb_wmat *kt_wmat(nb_wtype t, int rows, int cols)
{
    uint8_t *d = kt_rows(t, rows, cols);
    nb_wmat *w = kt_wmat_from(t, rows, cols, d);
    free(d);
    return w;
}

/* Distance in representable bf16 steps (ordered like integers). */
static inline int kt_bf16_ulps(nb_bf16 a, nb_bf16 b)
{
    int ia = (a & 0x8000) ? -(int)(a & 0x7fff) : (int)a;
    int ib = (b & 0x8000) ? -(int)(b & 0x7fff) : (int)b;
    return abs(ia - ib);
}

/* bf16 outputs that may differ by fp32 rounding. An element passes when
 * |ref - got| <= tol[i] (the fp32 rounding bound: what the sum's error is
 * relative to, which for cancelling sums exceeds the output's own ulp);
 * otherwise it may be one bf16 step off, and at most max(1, n/50) such
 * elements. tol may be NULL (no absolute bound) or hold one value for all
 * when tol_all is set. Prints the first offender; 0 when within tolerance. */
static inline int kt_check_bf16_tol(const char *what, const nb_bf16 *ref, const nb_bf16 *got,
                                    size_t n, const float *tol, int tol_all)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        int u = kt_bf16_ulps(ref[i], got[i]);
        if (!u)
            continue;
        float t = tol ? tol[tol_all ? 0 : i] : 0.0f;
        if (fabsf(nb_bf16_to_f32(ref[i]) - nb_bf16_to_f32(got[i])) <= t)
            continue;
        if (u > 1) {
            fprintf(stderr, "%s: element %zu: ref %g got %g (%d bf16 ulps)\n", what, i,
                    nb_bf16_to_f32(ref[i]), nb_bf16_to_f32(got[i]), u);
            return 1;
        }
        off++;
    }
    if (off > (n / 50 > 1 ? n / 50 : 1)) {
        fprintf(stderr, "%s: %zu of %zu elements one bf16 ulp off\n", what, off, n);
        return 1;
    }
    return 0;
}

static inline int kt_check_bf16(const char *what, const nb_bf16 *ref, const nb_bf16 *got, size_t n)
{
    return kt_check_bf16_tol(what, ref, got, n, NULL, 0);
}

/* fp32 outputs: |ref - got| <= rel * scale[i] (scale: the sum of |terms|
 * or the magnitude the rounding is relative to). */
static inline int kt_check_f32(const char *what, const float *ref, const float *got,
                               const float *scale, size_t n, float rel)
{
    for (size_t i = 0; i < n; i++) {
        float tol = rel * (scale ? scale[i] : fabsf(ref[i])) + 1e-30f;
        if (!(fabsf(ref[i] - got[i]) <= tol) && !(isnan(ref[i]) && isnan(got[i])) &&
            ref[i] != got[i]) {
            fprintf(stderr, "%s: element %zu: ref %.9g got %.9g (tolerance %.3g)\n", what, i,
                    ref[i], got[i], tol);
            return 1;
        }
    }
    return 0;
}

/* sum_j |x_ij w_kj| per output (i, k): what fp32 rounding of a dot is
 * relative to. */
static inline float *kt_abs_dots(const nb_wmat *W, const nb_bf16 *X, int n)
{
    int rows = nb_wmat_rows(W), cols = nb_wmat_cols(W);
    float *s = calloc((size_t)n * rows, sizeof(float));
    float *w = malloc(sizeof(float) * (size_t)cols);
    for (int k = 0; k < rows; k++) {
        nb_wmat_get_row_f32(W, k, w);
        for (int i = 0; i < n; i++) {
            float a = 0.0f;
            for (int j = 0; j < cols; j++)
                a += fabsf(nb_bf16_to_f32(X[(size_t)i * cols + j]) * w[j]);
            s[(size_t)i * rows + k] = a;
        }
    }
    free(w);
    return s;
}

#include "nb_kernels_impl.h"

/* The fp64 dot of a dequantized weight row with a Q8 activation row (per-32 scales), and in
 * *mag the sum of the products' magnitudes, which bounds fp32 summation error. */
static inline double kt_fp64_dot_q8(const float *w, const nb_q8_act *x, int K, double *mag)
{
    double exact = 0.0;
    *mag = 0.0;
    for (int i = 0; i < K; i++) {
        double p = (double)w[i] * ((double)x->q[i] * x->d[i / 32]);
        exact += p;
        *mag += fabs(p);
    }
    return exact;
}

/* The 8 rows of data (rb bytes each) as one PACK8 group, as the engine places them. */
static inline nb_wmat *kt_pack8(nb_wtype t, int K, const uint8_t *data, size_t rb)
{
    nb_wmat *W;
    nb_err err = {0};
    if (nb_wmat_create(t, 8, K, &W, &err))
        abort();
    for (int r = 0; r < 8; r++)
        nb_wmat_set_row(W, r, data + rb * (size_t)r);
    if (nb_wmat_place(W, NB_LAYOUT_PACK8, &err))
        abort();
    return W;
}

/* ---- the rows-in-lanes kernels of Q5_0, Q4_K and Q6_K (8 PACK8 rows against one Q8 row) -----
 * fn (the kernel of type t) against the portable reference dot of each row (bit for bit:
 * nb_kquant.c defines the arithmetic) and the fp64 dot of the dequantized weights with the
 * dequantized Q8 row (within fp32 summation slack), on one group of rows of random blocks and
 * K of 1, 3 and 8 super-blocks. Activations: random, then every quant at +-127 (the largest
 * integer sums). 0: all agree. */
static inline int kt_check_gemv8(const char *path, nb_wtype t, nb_q8_gemv8_fn fn)
{
    int bad = 0;
    static const int Ks[] = {256, 768, 2048}; /* whole 256-blocks for the k-quants */
    for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
        int K = Ks[c], nb = K / 32;
        size_t rb = kt_row_bytes(t, K);
        uint8_t *data = kt_rows(t, 8, K);
        nb_wmat *W = kt_pack8(t, K, data, rb);
        float *xf = malloc(sizeof(float) * (size_t)K), *w = malloc(sizeof(float) * (size_t)K);
        int8_t *q = malloc((size_t)K);
        float *d = malloc(sizeof(float) * (size_t)nb), *sx = malloc(sizeof(float) * (size_t)nb);
        for (int v = 0; v < 3; v++) {
            for (int i = 0; i < K; i++) /* v 1, 2: |x| equal per block, so every q is +-127 */
                xf[i] = v == 0 ? kt_normal() : (v == 1 ? 1.0f : ((i * 7) % 3 ? 3.0f : -3.0f));
            nb_q8_quantize_row(xf, K, q, d, sx);
            nb_q8_act x = {q, d, sx, NULL, v == 1}; /* warm (no prefetch) must not change bits */
            float got[8];
            fn(&x, nb_wmat_group(W, 0), K, got);
            for (int r = 0; r < 8; r++) {
                float ref = nb_kquant_dot_ref(t, data + rb * (size_t)r, K, &x);
                nb_wmat_get_row_f32(W, r, w);
                double mag, exact = kt_fp64_dot_q8(w, &x, K, &mag);
                if (memcmp(&got[r], &ref, 4) || fabs(got[r] - exact) > 1e-5 * mag + 1e-6) {
                    fprintf(stderr, "%s %s K=%d act %d row %d: %.9g, ref %.9g, fp64 %.9g\n", path,
                            nb_wtype_name(t), K, v, r, got[r], ref, exact);
                    bad = 1;
                }
            }
        }
        free(xf);
        free(w);
        free(q);
        free(d);
        free(sx);
        free(data);
        nb_wmat_free(W);
    }
    return bad;
}

/* Q8_0's per-row definition (nb_portable.c): lane l of an 8-lane sum gains
 * float(sum of its 4 products) * (d_w * d_x) per block; the tree, then + 0. */
static inline float kt_q8_0_dot_ref(const uint8_t *row, int K, const nb_q8_act *x)
{
    float acc[8] = {0};
    for (int b = 0; b < K / 32; b++) {
        const uint8_t *blk = row + (size_t)b * (NB_QUANT_Q8_0_QS + NB_QUANT_QK);
        const int8_t *w = (const int8_t *)(blk + NB_QUANT_Q8_0_QS);
        float dd = nb_quant_f16_at(blk) * x->d[b];
        for (int l = 0; l < 8; l++) {
            int is = 0;
            for (int t = 4 * l; t < 4 * l + 4; t++)
                is += w[t] * x->q[b * 32 + t];
            acc[l] += (float)is * dd;
        }
    }
    return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) +
           0.0f;
}

/* A prefill GEMM (nb_kq_gemm_ops) against the per-row definition, bit for bit (Q8_0's above)
 * and against the fp64 dot of the dequantized weights with the dequantized Q8 rows, for every
 * type it computes, on 8 weight rows and n = 1..9 activation rows (both
 * register tiles, an odd row pairing itself), starting from an odd pair (records at an offset).
 * Activations: random, then every quant at +-127. 0: all agree. */
static inline int kt_check_kq_gemm(const char *path, const nb_kq_gemm_ops *gm)
{
    int bad = 0;
    static const nb_wtype ts[] = {NB_W_Q8_0};
    static const int Ks[] = {256, 768, 2048};
    enum { NMAX = 9, SKIP = 2 }; /* SKIP rows (one pair) precede the rows the GEMM is given */
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++)
        for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
            nb_wtype t = ts[k];
            int K = Ks[c], nb = K / 32;
            size_t rb = kt_row_bytes(t, K);
            uint8_t *data = kt_rows(t, 8, K);
            nb_wmat *W = kt_pack8(t, K, data, rb);
            uint8_t *g = malloc(gm->gemm_bytes(t, K));
            gm->expand(t, nb_wmat_group(W, 0), K, g);
            int rows = SKIP + NMAX;
            float *xf = malloc(sizeof(float) * (size_t)K), *w = malloc(sizeof(float) * (size_t)K);
            int8_t *q = malloc((size_t)rows * K);
            float *d = malloc(sizeof(float) * (size_t)rows * nb);
            float *sx = malloc(sizeof(float) * (size_t)rows * nb);
            uint8_t *pr = malloc(gm->pairs_bytes(rows, K));
            float out[8 * (NMAX + 1)];
            for (int v = 0; v < 2; v++) {
                for (int i = 0; i < rows; i++) {
                    for (int e = 0; e < K; e++) /* v 1: |x| equal per block, every q +-127 */
                        xf[e] = v == 0 ? kt_normal() : ((e * 7 + i) % 3 ? 3.0f : -3.0f);
                    nb_q8_quantize_row(xf, K, q + (size_t)i * K, d + (size_t)i * nb,
                                       sx + (size_t)i * nb);
                }
                gm->pairs(q, d, rows, K, pr);
                for (int n = 1; n <= NMAX; n++) {
                    memset(out, 0xff, sizeof out);
                    gm->gemm(t, g, K, pr + gm->pairs_bytes(SKIP, K), sx + (size_t)SKIP * nb, n,
                             out);
                    for (int i = 0; i < n; i++) {
                        int xi = SKIP + i;
                        nb_q8_act x = {q + (size_t)xi * K, d + (size_t)xi * nb,
                                       sx + (size_t)xi * nb, NULL, 0};
                        for (int r = 0; r < 8; r++) {
                            const uint8_t *row = data + rb * (size_t)r;
                            float ref = kt_q8_0_dot_ref(row, K, &x);
                            nb_wmat_get_row_f32(W, r, w);
                            double mag, exact = kt_fp64_dot_q8(w, &x, K, &mag);
                            float got = out[8 * i + r];
                            if (memcmp(&got, &ref, 4) || fabs(got - exact) > 1e-5 * mag + 1e-6) {
                                fprintf(stderr, "%s gemm %s K=%d act %d n=%d row %d.%d: %.9g, "
                                        "ref %.9g, fp64 %.9g\n", path, nb_wtype_name(t), K, v, n,
                                        i, r, got, ref, exact);
                                bad = 1;
                            }
                        }
                    }
                }
            }
            free(xf);
            free(w);
            free(q);
            free(d);
            free(sx);
            free(pr);
            free(g);
            free(data);
            nb_wmat_free(W);
        }
    return bad;
}

#endif
