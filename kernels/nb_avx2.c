/* nb_avx2: the AVX2+FMA+F16C kernels, compiled for that target alone; dispatch runs them only
 * where CPUID says so. Linear layers reproduce the portable sums bit for bit (same lanes, same tree, mul then add). */
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

/* ---- linear layers -----------------------------------------------------------
 * Every output is the portable dot: lane l of an 8-lane accumulator sums
 * x[t+l]*w[t+l] over t = 0, 8, ...; then ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7));
 * then the K % 8 tail in order. Quantized rows do that per 32-block and add
 * the block sums in order. Products are rounded before the add (no FMA):
 * on Zen the adders and multipliers are separate pipes, so this costs no
 * throughput, and the result is exact against portable.
 *
 * n < GEMM_MIN_N (decode): groups of 8 weight rows stream once per X row,
 * converted in registers. Larger n (prefill): a group of 4 weight rows is
 * converted to fp32 once into scratch and reused by a 4x2 register tile
 * over a block of X rows that stays in L2. */
#define GEMM_MIN_N 4
#define XBLOCK_BYTES (192 * 1024)

/* 8 weights of row w at t as fp32 (exact). */
static inline __m256 lw_bf16(const void *w, int t)
{
    return nb_ld_bf16x8((const nb_bf16 *)w + t);
}

static inline __m256 lw_f32(const void *w, int t)
{
    return _mm256_loadu_ps((const float *)w + t);
}

static inline float w_scalar(nb_wtype ty, const void *w, int t)
{
    return ty == NB_W_BF16 ? nb_bf16_to_f32(((const nb_bf16 *)w)[t]) : ((const float *)w)[t];
}

/* Stores outputs s[0..cnt) of X row i at columns j.. */
static inline void put_row(void *Y, int f32out, size_t ld, int i, int j, __m256 s, int cnt)
{
    if (f32out) {
        float *y = (float *)Y + (size_t)i * ld + j;
        if (cnt == 8) {
            _mm256_storeu_ps(y, s);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, s);
            memcpy(y, tmp, sizeof(float) * (size_t)cnt);
        }
    } else {
        nb_bf16 *y = (nb_bf16 *)Y + (size_t)i * ld + j;
        __m128i b = nb_st_bf16x8(s);
        if (cnt == 8) {
            _mm_storeu_si128((__m128i *)y, b);
        } else {
            nb_bf16 tmp[8];
            _mm_storeu_si128((__m128i *)tmp, b);
            memcpy(y, tmp, sizeof(nb_bf16) * (size_t)cnt);
        }
    }
}

/* K % 8 tail of one dot, in the portable order. */
static inline float dot_tail(nb_wtype ty, const float *x, const void *w, int t, int K, float s)
{
    for (; t < K; t++)
        s += x[t] * w_scalar(ty, w, t);
    return s;
}

/* Eight rows (w[r] row pointers) against one fp32 X row: decode's GEMV. */
static void gemv8_dense(nb_wtype ty, const float *x, const void *const w[8], int K, float out[8])
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0;
    int K8 = K & ~7, t = 0;
#define GEMV_BODY(LW)                                                                          \
    for (; t < K8; t += 8) {                                                                   \
        __m256 xv = _mm256_loadu_ps(x + t);                                                    \
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(xv, LW(w[0], t)));                                \
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(xv, LW(w[1], t)));                                \
        a2 = _mm256_add_ps(a2, _mm256_mul_ps(xv, LW(w[2], t)));                                \
        a3 = _mm256_add_ps(a3, _mm256_mul_ps(xv, LW(w[3], t)));                                \
        a4 = _mm256_add_ps(a4, _mm256_mul_ps(xv, LW(w[4], t)));                                \
        a5 = _mm256_add_ps(a5, _mm256_mul_ps(xv, LW(w[5], t)));                                \
        a6 = _mm256_add_ps(a6, _mm256_mul_ps(xv, LW(w[6], t)));                                \
        a7 = _mm256_add_ps(a7, _mm256_mul_ps(xv, LW(w[7], t)));                                \
    }
    if (ty == NB_W_BF16) {
        GEMV_BODY(lw_bf16)
    } else {
        GEMV_BODY(lw_f32)
    }
#undef GEMV_BODY
    _mm256_storeu_ps(out, nb_reduce8(a0, a1, a2, a3, a4, a5, a6, a7));
    if (K8 < K)
        for (int r = 0; r < 8; r++)
            out[r] = dot_tail(ty, x, w[r], K8, K, out[r]);
}

/* Four weight rows against two X rows (and, with x1 == x0, against one):
 * out[c*4 + r] = dot(x_c, w_r). */
static void tile4x2_dense(nb_wtype ty, const float *x0, const float *x1, const void *const w[4],
                          int K, float out[8])
{
    __m256 a00 = _mm256_setzero_ps(), a10 = a00, a20 = a00, a30 = a00;
    __m256 a01 = a00, a11 = a00, a21 = a00, a31 = a00;
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    int K8 = K & ~7, t = 0;
    for (; t < K8; t += 8) {
        __m256 xa = _mm256_loadu_ps(x0 + t), xb = _mm256_loadu_ps(x1 + t);
        __m256 v = _mm256_loadu_ps(w0 + t);
        a00 = _mm256_add_ps(a00, _mm256_mul_ps(xa, v));
        a01 = _mm256_add_ps(a01, _mm256_mul_ps(xb, v));
        v = _mm256_loadu_ps(w1 + t);
        a10 = _mm256_add_ps(a10, _mm256_mul_ps(xa, v));
        a11 = _mm256_add_ps(a11, _mm256_mul_ps(xb, v));
        v = _mm256_loadu_ps(w2 + t);
        a20 = _mm256_add_ps(a20, _mm256_mul_ps(xa, v));
        a21 = _mm256_add_ps(a21, _mm256_mul_ps(xb, v));
        v = _mm256_loadu_ps(w3 + t);
        a30 = _mm256_add_ps(a30, _mm256_mul_ps(xa, v));
        a31 = _mm256_add_ps(a31, _mm256_mul_ps(xb, v));
    }
    _mm256_storeu_ps(out, nb_reduce8(a00, a10, a20, a30, a01, a11, a21, a31));
    if (K8 < K)
        for (int r = 0; r < 4; r++) {
            out[r] = dot_tail(ty, x0, w[r], K8, K, out[r]);
            out[4 + r] = dot_tail(ty, x1, w[r], K8, K, out[4 + r]);
        }
}

/* ---- quantized blocks in registers ---------------------------------------- */

/* The 32 weights of a Q4_1 block, exactly as nb_q4_1_block_f32: d*q is exact
 * in fp32 (d has 11 significant bits, q 4), so fma(q, d, m) rounds once,
 * like the reference's (d*q) + m. */
static inline void deq_q4_1(const uint8_t *blk, __m256 w[4])
{
    uint32_t dm32;
    memcpy(&dm32, blk, 4);
    __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dm32));
    __m256 d = _mm256_broadcastss_ps(dm), m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
    __m128i qs = _mm_loadu_si128((const __m128i *)(blk + 4));
    __m128i mask = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(qs, mask), hi = _mm_and_si128(_mm_srli_epi16(qs, 4), mask);
    w[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), d, m);
    w[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), d, m);
    w[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), d, m);
    w[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), d, m);
}

/* Q8_0: d * q, exact in fp32 (11 + 8 significant bits). */
static inline void deq_q8_0(const uint8_t *blk, __m256 w[4])
{
    uint16_t dh;
    memcpy(&dh, blk, 2);
    __m256 d = _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(dh)));
    const uint8_t *qs = blk + 2;
    for (int c = 0; c < 4; c++) {
        __m128i q8 = _mm_loadl_epi64((const __m128i *)(qs + 8 * c));
        w[c] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d);
    }
}

static inline void deq_block(nb_wtype ty, const uint8_t *blk, __m256 w[4])
{
    if (ty == NB_W_Q4_1)
        deq_q4_1(blk, w);
    else
        deq_q8_0(blk, w);
}

/* Eight quantized rows against one X row (fp32): per block, eight lane sums
 * (the first product starts them: 0 + p only differs from p in the sign of
 * a zero, and a block sum's zero sign cannot change s, which starts at +0
 * and never becomes -0), the tree, then s += block sum. */
static void gemv8_quant(nb_wtype ty, const float *x, const uint8_t *const w[8], int K,
                        float out[8])
{
    size_t bb = ty == NB_W_Q4_1 ? 20 : 34;
    __m256 s = _mm256_setzero_ps();
    for (int b = 0; b < K / 32; b++) {
        const float *xb = x + b * 32;
        __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
        __m256 x2 = _mm256_loadu_ps(xb + 16), x3 = _mm256_loadu_ps(xb + 24);
        __m256 acc[8], v[4];
        for (int r = 0; r < 8; r++) {
            deq_block(ty, w[r] + b * bb, v);
            __m256 a = _mm256_mul_ps(x0, v[0]);
            a = _mm256_add_ps(a, _mm256_mul_ps(x1, v[1]));
            a = _mm256_add_ps(a, _mm256_mul_ps(x2, v[2]));
            acc[r] = _mm256_add_ps(a, _mm256_mul_ps(x3, v[3]));
        }
        s = _mm256_add_ps(
            s, nb_reduce8(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]));
    }
    _mm256_storeu_ps(out, s);
}

/* Four dequantized fp32 rows against two X rows, per-block sums as above. */
static void tile4x2_quant(const float *x0, const float *x1, const float *const w[4], int K,
                          float out[8])
{
    __m256 s = _mm256_setzero_ps();
    for (int b = 0; b < K; b += 32) {
        __m256 a00, a10, a20, a30, a01, a11, a21, a31;
        {
            __m256 xa = _mm256_loadu_ps(x0 + b), xb = _mm256_loadu_ps(x1 + b), v;
            v = _mm256_loadu_ps(w[0] + b);
            a00 = _mm256_mul_ps(xa, v);
            a01 = _mm256_mul_ps(xb, v);
            v = _mm256_loadu_ps(w[1] + b);
            a10 = _mm256_mul_ps(xa, v);
            a11 = _mm256_mul_ps(xb, v);
            v = _mm256_loadu_ps(w[2] + b);
            a20 = _mm256_mul_ps(xa, v);
            a21 = _mm256_mul_ps(xb, v);
            v = _mm256_loadu_ps(w[3] + b);
            a30 = _mm256_mul_ps(xa, v);
            a31 = _mm256_mul_ps(xb, v);
        }
        for (int t = b + 8; t < b + 32; t += 8) {
            __m256 xa = _mm256_loadu_ps(x0 + t), xb = _mm256_loadu_ps(x1 + t);
            __m256 v = _mm256_loadu_ps(w[0] + t);
            a00 = _mm256_add_ps(a00, _mm256_mul_ps(xa, v));
            a01 = _mm256_add_ps(a01, _mm256_mul_ps(xb, v));
            v = _mm256_loadu_ps(w[1] + t);
            a10 = _mm256_add_ps(a10, _mm256_mul_ps(xa, v));
            a11 = _mm256_add_ps(a11, _mm256_mul_ps(xb, v));
            v = _mm256_loadu_ps(w[2] + t);
            a20 = _mm256_add_ps(a20, _mm256_mul_ps(xa, v));
            a21 = _mm256_add_ps(a21, _mm256_mul_ps(xb, v));
            v = _mm256_loadu_ps(w[3] + t);
            a30 = _mm256_add_ps(a30, _mm256_mul_ps(xa, v));
            a31 = _mm256_add_ps(a31, _mm256_mul_ps(xb, v));
        }
        s = _mm256_add_ps(s, nb_reduce8(a00, a10, a20, a30, a01, a11, a21, a31));
    }
    _mm256_storeu_ps(out, s);
}

/* ---- drivers ------------------------------------------------------------------ */

static inline const void *wrow(const nb_wmat *W, int j)
{
    return W->data + (size_t)j * W->row_bytes;
}

/* Decode-sized n: every group of 8 rows streams once per X row. Rows past
 * j1 in the last group repeat row j1-1 and are not stored. */
static void gemv_rows(const nb_wmat *W, const float *xs, int n, void *Y, int f32out, int j0,
                      int j1)
{
    int K = W->cols, quant = W->type == NB_W_Q4_1 || W->type == NB_W_Q8_0;
    for (int j = j0; j < j1; j += 8) {
        int cnt = j1 - j < 8 ? j1 - j : 8;
        const void *w[8];
        for (int r = 0; r < 8; r++)
            w[r] = wrow(W, j + (r < cnt ? r : cnt - 1));
        for (int i = 0; i < n; i++) {
            float o[8];
            if (quant)
                gemv8_quant(W->type, xs + (size_t)i * K, (const uint8_t *const *)w, K, o);
            else
                gemv8_dense(W->type, xs + (size_t)i * K, w, K, o);
            put_row(Y, f32out, (size_t)W->rows, i, j, _mm256_loadu_ps(o), cnt);
        }
    }
}

/* Weight rows j..j+cnt-1 as fp32 rows of K in ws (stride K). */
static void convert_rows(const nb_wmat *W, int j, int cnt, float *ws)
{
    int K = W->cols;
    for (int r = 0; r < cnt; r++) {
        const void *src = wrow(W, j + r);
        float *dst = ws + (size_t)r * K;
        if (W->type == NB_W_BF16) {
            const nb_bf16 *b = src;
            int t = 0;
            for (; t + 8 <= K; t += 8)
                _mm256_storeu_ps(dst + t, nb_ld_bf16x8(b + t));
            for (; t < K; t++)
                dst[t] = nb_bf16_to_f32(b[t]);
        } else {
            size_t bb = W->type == NB_W_Q4_1 ? 20 : 34;
            for (int b = 0; b < K / 32; b++) {
                __m256 v[4];
                deq_block(W->type, (const uint8_t *)src + b * bb, v);
                for (int c = 0; c < 4; c++)
                    _mm256_storeu_ps(dst + b * 32 + c * 8, v[c]);
            }
        }
    }
}

static void store4(void *Y, int f32out, size_t ld, int i, int j, const float *o, int cnt)
{
    for (int r = 0; r < cnt; r++) {
        if (f32out)
            ((float *)Y)[(size_t)i * ld + j + r] = o[r];
        else
            ((nb_bf16 *)Y)[(size_t)i * ld + j + r] = nb_f32_to_bf16(o[r]);
    }
}

/* Prefill-sized n: X rows in L2-sized blocks; per block, each group of 4
 * weight rows becomes fp32 once (f32 weights are used in place) and meets
 * every X row pair of the block in registers. */
static void gemm_rows(const nb_wmat *W, const float *xs, int n, void *Y, int f32out, int j0,
                      int j1, float *ws)
{
    int K = W->cols, quant = W->type == NB_W_Q4_1 || W->type == NB_W_Q8_0;
    size_t ld = (size_t)W->rows;
    int xb = (int)(XBLOCK_BYTES / ((size_t)K * 4));
    xb = xb < 2 ? 2 : xb & ~1;
    for (int i0 = 0; i0 < n; i0 += xb) {
        int i1 = i0 + xb < n ? i0 + xb : n;
        for (int j = j0; j < j1; j += 4) {
            int cnt = j1 - j < 4 ? j1 - j : 4;
            const void *w[4];
            if (W->type == NB_W_F32) {
                for (int r = 0; r < 4; r++)
                    w[r] = wrow(W, j + (r < cnt ? r : cnt - 1));
            } else {
                convert_rows(W, j, cnt, ws);
                for (int r = 0; r < 4; r++)
                    w[r] = ws + (size_t)(r < cnt ? r : cnt - 1) * K;
            }
            for (int i = i0; i < i1; i += 2) {
                const float *x0 = xs + (size_t)i * K;
                const float *x1 = i + 1 < i1 ? x0 + K : x0;
                float o[8];
                if (quant)
                    tile4x2_quant(x0, x1, (const float *const *)w, K, o);
                else
                    tile4x2_dense(NB_W_F32, x0, x1, w, K, o); /* rows are fp32 now */
                store4(Y, f32out, ld, i, j, o, cnt);
                if (i + 1 < i1)
                    store4(Y, f32out, ld, i + 1, j, o + 4, cnt);
            }
        }
    }
}

static void linear_any(const nb_wmat *W, const void *X, int xbf16, int n, void *Y, int f32out,
                       int j0, int j1)
{
    int K = W->cols;
    size_t xn = ((size_t)n * K + 15) & ~(size_t)15;
    int gemm = n >= GEMM_MIN_N;
    float *xs = nb_scratch_or_die(sizeof(float) * (xn + (gemm ? 4 * (size_t)K : 0)));
    if (xbf16) {
        const nb_bf16 *xb = X;
        size_t cnt = (size_t)n * K, t = 0;
        for (; t + 8 <= cnt; t += 8)
            _mm256_storeu_ps(xs + t, nb_ld_bf16x8(xb + t));
        for (; t < cnt; t++)
            xs[t] = nb_bf16_to_f32(xb[t]);
    } else {
        memcpy(xs, X, sizeof(float) * (size_t)n * K);
    }
    if (gemm)
        gemm_rows(W, xs, n, Y, f32out, j0, j1, xs + xn);
    else
        gemv_rows(W, xs, n, Y, f32out, j0, j1);
}

void nb_avx2_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                         int j1)
{
    linear_any(W, X, 1, n, Y, f32out, j0, j1);
}

static void avx2_linear_f32(const nb_wmat *W, const float *X, int n, float *Y, int j0, int j1)
{
    linear_any(W, X, 0, n, Y, 1, j0, j1);
}

static nb_code avx2_wmat_finish(nb_wmat *w, nb_err *err)
{
    (void)w; /* row-major is the layout both GEMV and the GEMM tiles stream */
    (void)err;
    return NB_OK;
}

/* ---- element-wise -------------------------------------------------------------- */

static void avx2_rmsnorm_bf16(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim,
                              float eps)
{
    for (int i = 0; i < n; i++) {
        const nb_bf16 *xr = x + (size_t)i * dim;
        nb_bf16 *yr = y + (size_t)i * dim;
        /* The sum of squares stays sequential, as in the reference: it is
         * 1% of the op and keeps the result exact. */
        float ss = 0.0f;
        for (int t = 0; t < dim; t++) {
            float v = nb_bf16_to_f32(xr[t]);
            ss += v * v;
        }
        float r = 1.0f / sqrtf(ss / (float)dim + eps);
        __m256 rv = _mm256_set1_ps(r);
        int t = 0;
        for (; t + 8 <= dim; t += 8) {
            __m256 h = nb_round_bf16x8(_mm256_mul_ps(nb_ld_bf16x8(xr + t), rv));
            _mm_storeu_si128((__m128i *)(yr + t),
                             nb_st_bf16x8(_mm256_mul_ps(nb_ld_bf16x8(w + t), h)));
        }
        for (; t < dim; t++) {
            float h = nb_round_bf16(nb_bf16_to_f32(xr[t]) * r);
            yr[t] = nb_f32_to_bf16(nb_bf16_to_f32(w[t]) * h);
        }
    }
}

static void avx2_silu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n)
{
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 gv = nb_ld_bf16x8(g + i);
        __m256 e = nb_exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        __m256 a = nb_round_bf16x8(_mm256_div_ps(gv, _mm256_add_ps(one, e)));
        _mm_storeu_si128((__m128i *)(out + i), nb_st_bf16x8(_mm256_mul_ps(a, nb_ld_bf16x8(u + i))));
    }
    for (; i < n; i++) {
        float gv = nb_bf16_to_f32(g[i]);
        float a = nb_round_bf16(gv / (1.0f + nb_exp1(-gv)));
        out[i] = nb_f32_to_bf16(a * nb_bf16_to_f32(u[i]));
    }
}

static void avx2_silu_mul_f32(float *out, const float *g, const float *u, size_t n)
{
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 e = nb_exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        __m256 a = _mm256_div_ps(gv, _mm256_add_ps(one, e));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(a, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        out[i] = g[i] / (1.0f + nb_exp1(-g[i])) * u[i];
}

static void avx2_add_bf16(nb_bf16 *x, const nb_bf16 *d, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(x + i),
                         nb_st_bf16x8(_mm256_add_ps(nb_ld_bf16x8(x + i), nb_ld_bf16x8(d + i))));
    for (; i < n; i++)
        x[i] = nb_f32_to_bf16(nb_bf16_to_f32(x[i]) + nb_bf16_to_f32(d[i]));
}

/* ---- attention ----------------------------------------------------------------
 * Per item (query rows [i0,i1) x heads [h0,h1) of one kv group), keys in
 * tiles of TK: each tile of K is converted once to fp32 and transposed so a
 * vector holds 8 keys; a score then sums q[t]*k[t] over t = 0..hd-1 in
 * order, as the reference does, and is exact. Softmax: max, exp (nb_exp8,
 * within 2 ulp of expf), sum (8 lanes + tree: the reference sums in order),
 * weights e/sum. Then each V tile is converted once and every row's output
 * accumulates w[p]*v[p] over p in order (exact given the weights). Only exp
 * and the softmax sum differ from the reference, by fp32 rounding. */
#define TK 128

typedef struct attn_scr {
    float *kt;  /* [hd][TK] */
    float *vt;  /* [TK][hd] */
    float *qf;  /* [nrh][hd] */
    float *acc; /* [nrh][hd] */
    float *s;   /* [nrh][ctxp] */
    int ctxp;
} attn_scr;

#define ATTN_AVX2(NAME, T, LD8, LD1, ST8, ST1)                                                  \
    static void NAME(const nb_attn_args *a, int i0, int i1, int h0, int h1)                    \
    {                                                                                           \
        int hd = a->hd, group = a->n_heads / a->n_kv, kvdim = a->n_kv * hd;                     \
        int qdim = a->n_heads * hd, nh = h1 - h0, nrh = (i1 - i0) * nh;                         \
        int ctx = a->pos0 + i1, ctxp = (ctx + 15) & ~15;                                        \
        const T *q = a->q, *kc = a->kc, *vc = a->vc;                                            \
        T *out = a->out;                                                                        \
        float scale = 1.0f / sqrtf((float)hd);                                                  \
        size_t fl = (size_t)hd * TK * 2 + (size_t)nrh * hd * 2 + (size_t)nrh * ctxp;            \
        float *base = nb_scratch_or_die(sizeof(float) * fl);                                    \
        attn_scr S = {base, base + (size_t)hd * TK, base + (size_t)hd * TK * 2, NULL, NULL,     \
                      ctxp};                                                                    \
        S.acc = S.qf + (size_t)nrh * hd;                                                        \
        S.s = S.acc + (size_t)nrh * hd;                                                         \
        /* row-heads: index rh = (i - i0) * nh + (h - h0) */                                    \
        for (int i = i0; i < i1; i++)                                                           \
            for (int h = h0; h < h1; h++) {                                                     \
                const T *qh = q + (size_t)i * qdim + (size_t)h * hd;                            \
                float *qf = S.qf + (size_t)((i - i0) * nh + (h - h0)) * hd;                     \
                for (int t = 0; t < hd; t++)                                                    \
                    qf[t] = LD1(qh[t]);                                                         \
            }                                                                                   \
        memset(S.acc, 0, sizeof(float) * (size_t)nrh * hd);                                     \
        int kvh = h0 / group;                                                                   \
        const T *kbase = kc + (size_t)kvh * hd, *vbase = vc + (size_t)kvh * hd;                 \
        /* pass 1: scores */                                                                    \
        for (int p0 = 0; p0 < ctx; p0 += TK) {                                                  \
            int pn = ctx - p0 < TK ? ctx - p0 : TK, pn16 = (pn + 15) & ~15;                     \
            for (int p = 0; p < pn16; p++)                                                      \
                for (int t = 0; t < hd; t++)                                                    \
                    S.kt[(size_t)t * TK + p] =                                                  \
                        p < pn ? LD1(kbase[(size_t)(p0 + p) * kvdim + t]) : 0.0f;               \
            for (int rh = 0; rh < nrh; rh++) {                                                  \
                int len = a->pos0 + i0 + rh / nh + 1;                                           \
                if (len <= p0)                                                                  \
                    continue;                                                                   \
                int lim = len - p0 < pn16 ? len - p0 : pn16;                                    \
                const float *qf = S.qf + (size_t)rh * hd;                                       \
                float *srow = S.s + (size_t)rh * ctxp + p0;                                     \
                for (int p = 0; p < lim; p += 16) {                                             \
                    __m256 s0 = _mm256_setzero_ps(), s1 = s0;                                   \
                    const float *kt = S.kt + p;                                                 \
                    for (int t = 0; t < hd; t++) {                                              \
                        __m256 qv = _mm256_broadcast_ss(qf + t);                                \
                        s0 = _mm256_add_ps(s0, _mm256_mul_ps(qv, _mm256_loadu_ps(kt)));         \
                        s1 = _mm256_add_ps(s1, _mm256_mul_ps(qv, _mm256_loadu_ps(kt + 8)));     \
                        kt += TK;                                                               \
                    }                                                                           \
                    __m256 sc = _mm256_set1_ps(scale);                                          \
                    _mm256_storeu_ps(srow + p, _mm256_mul_ps(s0, sc));                          \
                    _mm256_storeu_ps(srow + p + 8, _mm256_mul_ps(s1, sc));                      \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        /* softmax per row-head, over its own len */                                            \
        for (int rh = 0; rh < nrh; rh++) {                                                      \
            int len = a->pos0 + i0 + rh / nh + 1;                                               \
            softmax_row(S.s + (size_t)rh * ctxp, len);                                       \
        }                                                                                       \
        /* pass 2: weighted sum of values */                                                    \
        for (int p0 = 0; p0 < ctx; p0 += TK) {                                                  \
            int pn = ctx - p0 < TK ? ctx - p0 : TK;                                             \
            for (int p = 0; p < pn; p++) {                                                      \
                const T *vr = vbase + (size_t)(p0 + p) * kvdim;                                 \
                float *dst = S.vt + (size_t)p * hd;                                             \
                int t = 0;                                                                      \
                for (; t + 8 <= hd; t += 8)                                                     \
                    _mm256_storeu_ps(dst + t, LD8(vr + t));                                     \
                for (; t < hd; t++)                                                             \
                    dst[t] = LD1(vr[t]);                                                        \
            }                                                                                   \
            for (int rh = 0; rh < nrh; rh++) {                                                  \
                int len = a->pos0 + i0 + rh / nh + 1;                                           \
                if (len <= p0)                                                                  \
                    continue;                                                                   \
                int lim = len - p0 < pn ? len - p0 : pn;                                        \
                pv_accumulate(S.acc + (size_t)rh * hd, S.s + (size_t)rh * ctxp + p0, S.vt,   \
                                 lim, hd);                                                      \
            }                                                                                   \
        }                                                                                       \
        for (int rh = 0; rh < nrh; rh++) {                                                      \
            int i = i0 + rh / nh, h = h0 + rh % nh;                                             \
            T *o = out + (size_t)i * qdim + (size_t)h * hd;                                     \
            const float *ac = S.acc + (size_t)rh * hd;                                          \
            int t = 0;                                                                          \
            for (; t + 8 <= hd; t += 8)                                                         \
                ST8(o + t, _mm256_loadu_ps(ac + t));                                            \
            for (; t < hd; t++)                                                                 \
                o[t] = ST1(ac[t]);                                                              \
        }                                                                                       \
    }

/* Softmax weights in place: s[p] = exp(s[p] - max) / sum. */
static void softmax_row(float *s, int len)
{
    float mx = -INFINITY;
    for (int p = 0; p < len; p++)
        if (s[p] > mx)
            mx = s[p];
    __m256 mv = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
    int p = 0;
    for (; p + 8 <= len; p += 8) {
        __m256 e = nb_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + p), mv));
        _mm256_storeu_ps(s + p, e);
        acc = _mm256_add_ps(acc, e);
    }
    float l[8];
    _mm256_storeu_ps(l, acc);
    float sum = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    for (; p < len; p++) {
        s[p] = nb_exp1(s[p] - mx);
        sum += s[p];
    }
    __m256 sv = _mm256_set1_ps(sum);
    p = 0;
    for (; p + 8 <= len; p += 8)
        _mm256_storeu_ps(s + p, _mm256_div_ps(_mm256_loadu_ps(s + p), sv));
    for (; p < len; p++)
        s[p] = s[p] / sum;
}

/* acc[t] += w[p] * v[p][t] for p = 0..n-1 in order (v rows of hd). */
static void pv_accumulate(float *acc, const float *w, const float *v, int n, int hd)
{
    if (hd == 64) {
        __m256 a0 = _mm256_loadu_ps(acc), a1 = _mm256_loadu_ps(acc + 8);
        __m256 a2 = _mm256_loadu_ps(acc + 16), a3 = _mm256_loadu_ps(acc + 24);
        __m256 a4 = _mm256_loadu_ps(acc + 32), a5 = _mm256_loadu_ps(acc + 40);
        __m256 a6 = _mm256_loadu_ps(acc + 48), a7 = _mm256_loadu_ps(acc + 56);
        for (int p = 0; p < n; p++) {
            __m256 wv = _mm256_broadcast_ss(w + p);
            const float *vr = v + (size_t)p * 64;
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(wv, _mm256_loadu_ps(vr)));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(wv, _mm256_loadu_ps(vr + 8)));
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(wv, _mm256_loadu_ps(vr + 16)));
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(wv, _mm256_loadu_ps(vr + 24)));
            a4 = _mm256_add_ps(a4, _mm256_mul_ps(wv, _mm256_loadu_ps(vr + 32)));
            a5 = _mm256_add_ps(a5, _mm256_mul_ps(wv, _mm256_loadu_ps(vr + 40)));
            a6 = _mm256_add_ps(a6, _mm256_mul_ps(wv, _mm256_loadu_ps(vr + 48)));
            a7 = _mm256_add_ps(a7, _mm256_mul_ps(wv, _mm256_loadu_ps(vr + 56)));
        }
        _mm256_storeu_ps(acc, a0);
        _mm256_storeu_ps(acc + 8, a1);
        _mm256_storeu_ps(acc + 16, a2);
        _mm256_storeu_ps(acc + 24, a3);
        _mm256_storeu_ps(acc + 32, a4);
        _mm256_storeu_ps(acc + 40, a5);
        _mm256_storeu_ps(acc + 48, a6);
        _mm256_storeu_ps(acc + 56, a7);
        return;
    }
    for (int p = 0; p < n; p++) {
        __m256 wv = _mm256_broadcast_ss(w + p);
        const float *vr = v + (size_t)p * hd;
        int t = 0;
        for (; t + 8 <= hd; t += 8)
            _mm256_storeu_ps(acc + t, _mm256_add_ps(_mm256_loadu_ps(acc + t),
                                                    _mm256_mul_ps(wv, _mm256_loadu_ps(vr + t))));
        for (; t < hd; t++)
            acc[t] += w[p] * vr[t];
    }
}

static inline float ld1_bf16(nb_bf16 v) { return nb_bf16_to_f32(v); }
static inline float ld1_f32(float v) { return v; }
static inline __m256 ld8_f32(const float *p) { return _mm256_loadu_ps(p); }
static inline void st8_bf16(nb_bf16 *p, __m256 v) { _mm_storeu_si128((__m128i *)p, nb_st_bf16x8(v)); }
static inline void st8_f32(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
static inline nb_bf16 st1_bf16(float v) { return nb_f32_to_bf16(v); }
static inline float st1_f32(float v) { return v; }

ATTN_AVX2(avx2_attention_bf16, nb_bf16, nb_ld_bf16x8, ld1_bf16, st8_bf16, st1_bf16)
ATTN_AVX2(avx2_attention_f32, float, ld8_f32, ld1_f32, st8_f32, st1_f32)

const nb_kernel_table nb_kernels_avx2 = {
    .isa = NB_ISA_AVX2,
    .wmat_finish = avx2_wmat_finish,
    .linear_bf16 = nb_avx2_linear_bf16,
    .linear_f32 = avx2_linear_f32,
    .rmsnorm_bf16 = avx2_rmsnorm_bf16,
    .silu_mul_bf16 = avx2_silu_mul_bf16,
    .silu_mul_f32 = avx2_silu_mul_f32,
    .add_bf16 = avx2_add_bf16,
    .attention_bf16 = avx2_attention_bf16,
    .attention_f32 = avx2_attention_f32,
};
