/* nb_avx512: the AVX-512 BF16 linear kernel for bf16 weights (vdpbf16ps on bf16 activations);
 * every other op of that path is the AVX2 one. Compiled for that target alone, run only where CPUID says so.
 *
 * Numerics (Intel SDM, VDPBF16PS): each fp32 lane does
 *   acc += bf16(a[2i+1]) * bf16(b[2i+1]);  acc += bf16(a[2i]) * bf16(b[2i])
 * as two fused steps, round-to-nearest-even, denormal inputs read as zero
 * and denormal results flushed to zero, MXCSR ignored. A product of two
 * bf16 values has at most 16 significant bits, so it is exact in fp32: each
 * step is one correctly rounded fp32 add, the same operation the reference
 * performs, in another order. For normal inputs the result therefore differs
 * from the portable path by fp32 summation order only; the flushes matter
 * only for |values| < 2^-126, which bf16 activations and weights of a
 * trained model do not reach. So this path is used for the HF-faithful bf16
 * mode; outputs are rounded to bf16 at the same point as everywhere else.
 *
 * Built a second time by tests/test_kernels_emu.c with NB_AVX512_EMULATE:
 * that file sets an AVX2 target and defines the few AVX-512 types and
 * intrinsics used here after the SDM pseudocode, so the kernel's tiling is
 * tested on CPUs without AVX-512. */
#ifndef NB_AVX512_EMULATE
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")
#include <immintrin.h>
#define NB_AVX512_LINEAR nb_avx512_linear_bf16
#else
#define NB_AVX512_LINEAR nb_avx512_emu_linear_bf16
#endif

#include <string.h>

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

void NB_AVX512_LINEAR(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                      int j1);

#define GEMM_MIN_N 4
#define XBLOCK_BYTES (256 * 1024)

static inline __m512bh as_bh(__m512i v)
{
    __m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}

/* 32 bf16 at p + t; past the row end (K % 32 tails, which no model
 * shape has) zeros, which add nothing. */
static inline __m512bh ld32(const nb_bf16 *p, int t, int K)
{
    if (t + 32 <= K)
        return as_bh(_mm512_loadu_si512((const void *)(p + t)));
    nb_bf16 tmp[32] = {0};
    memcpy(tmp, p + t, sizeof(nb_bf16) * (size_t)(K - t));
    return as_bh(_mm512_loadu_si512((const void *)tmp));
}

static inline __m256 fold(__m512 v)
{
    return _mm256_add_ps(_mm512_castps512_ps256(v),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* Eight 16-lane accumulators to one vector of their eight sums. */
static inline __m256 reduce8x16(const __m512 a[8])
{
    return nb_reduce8(fold(a[0]), fold(a[1]), fold(a[2]), fold(a[3]), fold(a[4]), fold(a[5]),
                      fold(a[6]), fold(a[7]));
}

static void store(void *Y, int f32out, size_t ld, int i, int j, const float *o, int cnt)
{
    for (int r = 0; r < cnt; r++) {
        if (f32out)
            ((float *)Y)[(size_t)i * ld + j + r] = o[r];
        else
            ((nb_bf16 *)Y)[(size_t)i * ld + j + r] = nb_f32_to_bf16(o[r]);
    }
}

static inline const nb_bf16 *row(const nb_wmat *W, int j)
{
    return (const nb_bf16 *)(W->data + (size_t)j * W->row_bytes);
}

/* Decode: eight weight rows stream against one activation row. */
static void gemv(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0, int j1)
{
    int K = W->cols;
    for (int j = j0; j < j1; j += 8) {
        int cnt = j1 - j < 8 ? j1 - j : 8;
        const nb_bf16 *w[8];
        for (int r = 0; r < 8; r++)
            w[r] = row(W, j + (r < cnt ? r : cnt - 1));
        for (int i = 0; i < n; i++) {
            const nb_bf16 *x = X + (size_t)i * K;
            __m512 a[8];
            for (int r = 0; r < 8; r++)
                a[r] = _mm512_setzero_ps();
            for (int t = 0; t < K; t += 32) {
                __m512bh xv = ld32(x, t, K);
                for (int r = 0; r < 8; r++)
                    a[r] = _mm512_dpbf16_ps(a[r], xv, ld32(w[r], t, K));
            }
            float o[8];
            _mm256_storeu_ps(o, reduce8x16(a));
            store(Y, f32out, (size_t)W->rows, i, j, o, cnt);
        }
    }
}

/* Prefill: 4 weight rows x 4 activation rows per register tile (16
 * accumulators), activation rows in L2-sized blocks. */
static void gemm(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0, int j1)
{
    int K = W->cols;
    size_t ld = (size_t)W->rows;
    int xb = (int)(XBLOCK_BYTES / ((size_t)K * 2));
    xb = xb < 4 ? 4 : xb & ~3;
    for (int i0 = 0; i0 < n; i0 += xb) {
        int i1 = i0 + xb < n ? i0 + xb : n;
        for (int j = j0; j < j1; j += 4) {
            int wc = j1 - j < 4 ? j1 - j : 4;
            const nb_bf16 *w[4];
            for (int r = 0; r < 4; r++)
                w[r] = row(W, j + (r < wc ? r : wc - 1));
            for (int i = i0; i < i1; i += 4) {
                int xc = i1 - i < 4 ? i1 - i : 4;
                const nb_bf16 *x[4];
                for (int c = 0; c < 4; c++)
                    x[c] = X + (size_t)(i + (c < xc ? c : xc - 1)) * K;
                __m512 a[16];
                for (int k = 0; k < 16; k++)
                    a[k] = _mm512_setzero_ps();
                for (int t = 0; t < K; t += 32) {
                    __m512bh x0 = ld32(x[0], t, K), x1 = ld32(x[1], t, K);
                    __m512bh x2 = ld32(x[2], t, K), x3 = ld32(x[3], t, K);
                    for (int r = 0; r < 4; r++) {
                        __m512bh wv = ld32(w[r], t, K);
                        a[r] = _mm512_dpbf16_ps(a[r], x0, wv);
                        a[4 + r] = _mm512_dpbf16_ps(a[4 + r], x1, wv);
                        a[8 + r] = _mm512_dpbf16_ps(a[8 + r], x2, wv);
                        a[12 + r] = _mm512_dpbf16_ps(a[12 + r], x3, wv);
                    }
                }
                float o[16];
                _mm256_storeu_ps(o, reduce8x16(a));
                _mm256_storeu_ps(o + 8, reduce8x16(a + 8));
                for (int c = 0; c < xc; c++)
                    store(Y, f32out, ld, i + c, j, o + 4 * c, wc);
            }
        }
    }
}

void NB_AVX512_LINEAR(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                      int j1)
{
    if (W->type != NB_W_BF16) { /* quantized rows: the AVX2 kernels */
        nb_avx2_linear_bf16(W, X, n, Y, f32out, j0, j1);
        return;
    }
    if (n >= GEMM_MIN_N)
        gemm(W, X, n, Y, f32out, j0, j1);
    else
        gemv(W, X, n, Y, f32out, j0, j1);
}
