/* nb_avx512: the AVX-512 BF16 linear kernel for bf16 weights (vdpbf16ps on bf16 activations);
 * every other op of that path is the AVX2 one. Compiled with the AVX-512 flags alone (kernels/CMakeLists.txt),
 * run only where CPUID says so.
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
 * Built a second time by tests/kernels_emu.c with NB_AVX512_EMULATE: that
 * file is compiled with the AVX2 flags and defines the few AVX-512 types and
 * intrinsics used here after the SDM pseudocode, so the kernel's tiling is
 * tested on CPUs without AVX-512. */
#ifndef NB_AVX512_EMULATE
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512BF16__)
#error "nb_avx512.c needs -mavx512f -mavx512bw -mavx512vl -mavx512bf16 (kernels/CMakeLists.txt)"
#endif
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

/* Weights are PACK8 (nb_kernels_impl.h), as for AVX2: per 8-element chunk,
 * 64 bytes hold rows 0-3 of a group and the next 64 rows 4-7. One
 * vdpbf16ps of those against the chunk of x repeated four times leaves
 * each row's partial sums in its own four lanes. */
#define GEMM_MIN_N 4
#define XBLOCK_BYTES (256 * 1024)

static inline __m512bh as_bh(__m512i v)
{
    __m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}

static inline __m512bh ldw(const uint8_t *p)
{
    return as_bh(_mm512_loadu_si512((const void *)p));
}

/* 8 bf16 of x at p, repeated in each 128-bit quarter. */
static inline __m512bh ldx(const nb_bf16 *p)
{
    return as_bh(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)));
}

/* Lane sums of rows 0-3 (a) and 4-7 (b), four lanes per row, as 8 values. */
static inline __m256 rows8(__m512 a, __m512 b)
{
    a = _mm512_add_ps(a, _mm512_permute_ps(a, 0xb1));
    a = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4e));
    b = _mm512_add_ps(b, _mm512_permute_ps(b, 0xb1));
    b = _mm512_add_ps(b, _mm512_permute_ps(b, 0x4e));
    static const int32_t idx[16] = {0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28};
    return _mm512_castps512_ps256(_mm512_permutex2var_ps(a, _mm512_loadu_si512(idx), b));
}

/* The K % 8 tail (fp32, in order) of the 8 rows of a group against x. */
static void add_tails(const uint8_t *grp, const nb_bf16 *x, int K, float o[8])
{
    int K8 = K & ~7, tail = K - K8;
    if (!tail)
        return;
    const nb_bf16 *tp = (const nb_bf16 *)(grp + (size_t)NB_PACK * K8 * 2);
    for (int r = 0; r < 8; r++)
        for (int t = 0; t < tail; t++)
            o[r] += nb_bf16_to_f32(x[K8 + t]) * nb_bf16_to_f32(tp[r * tail + t]);
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

/* Decode: a group's 8 rows stream once per activation row. */
static void gemv(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0, int j1)
{
    int K = W->cols, nc = K / 8;
    for (int j = j0; j < j1; j += 8) {
        int cnt = j1 - j < 8 ? j1 - j : 8;
        const uint8_t *grp = nb_wmat_group(W, j / 8);
        for (int i = 0; i < n; i++) {
            const nb_bf16 *x = X + (size_t)i * K;
            __m512 a0 = _mm512_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;
            int c = 0;
            for (; c + 2 <= nc; c += 2) {
                const uint8_t *p = grp + (size_t)c * 128;
                __m512bh x0 = ldx(x + c * 8), x1 = ldx(x + c * 8 + 8);
                a0 = _mm512_dpbf16_ps(a0, ldw(p), x0);
                b0 = _mm512_dpbf16_ps(b0, ldw(p + 64), x0);
                a1 = _mm512_dpbf16_ps(a1, ldw(p + 128), x1);
                b1 = _mm512_dpbf16_ps(b1, ldw(p + 192), x1);
            }
            if (c < nc) {
                const uint8_t *p = grp + (size_t)c * 128;
                __m512bh x0 = ldx(x + c * 8);
                a0 = _mm512_dpbf16_ps(a0, ldw(p), x0);
                b0 = _mm512_dpbf16_ps(b0, ldw(p + 64), x0);
            }
            float o[8];
            _mm256_storeu_ps(o, rows8(_mm512_add_ps(a0, a1), _mm512_add_ps(b0, b1)));
            add_tails(grp, x, K, o);
            store(Y, f32out, (size_t)W->rows, i, j, o, cnt);
        }
    }
}

/* Prefill: a group's 8 rows x 4 activation rows per register tile (8
 * accumulators), activation rows in L2-sized blocks. */
static void gemm(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0, int j1)
{
    int K = W->cols, nc = K / 8;
    size_t ld = (size_t)W->rows;
    int xb = (int)(XBLOCK_BYTES / ((size_t)K * 2));
    xb = xb < 4 ? 4 : xb & ~3;
    for (int i0 = 0; i0 < n; i0 += xb) {
        int i1 = i0 + xb < n ? i0 + xb : n;
        for (int j = j0; j < j1; j += 8) {
            int wc = j1 - j < 8 ? j1 - j : 8;
            const uint8_t *grp = nb_wmat_group(W, j / 8);
            for (int i = i0; i < i1; i += 4) {
                int xc = i1 - i < 4 ? i1 - i : 4;
                const nb_bf16 *x[4];
                for (int c = 0; c < 4; c++)
                    x[c] = X + (size_t)(i + (c < xc ? c : xc - 1)) * K;
                __m512 a[4], b[4];
                for (int c = 0; c < 4; c++)
                    a[c] = b[c] = _mm512_setzero_ps();
                for (int c = 0; c < nc; c++) {
                    const uint8_t *p = grp + (size_t)c * 128;
                    __m512bh wa = ldw(p), wb = ldw(p + 64);
                    for (int r = 0; r < 4; r++) {
                        __m512bh xv = ldx(x[r] + c * 8);
                        a[r] = _mm512_dpbf16_ps(a[r], wa, xv);
                        b[r] = _mm512_dpbf16_ps(b[r], wb, xv);
                    }
                }
                for (int r = 0; r < xc; r++) {
                    float o[8];
                    _mm256_storeu_ps(o, rows8(a[r], b[r]));
                    add_tails(grp, x[r], K, o);
                    store(Y, f32out, ld, i + r, j, o, wc);
                }
            }
        }
    }
}

void NB_AVX512_LINEAR(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                      int j1)
{
    if (W->type != NB_W_BF16 || W->layout != NB_LAYOUT_PACK8) {
        nb_avx2_linear_bf16(W, X, n, Y, f32out, j0, j1); /* quantized rows: AVX2 kernels */
        return;
    }
    if (n >= GEMM_MIN_N)
        gemm(W, X, n, Y, f32out, j0, j1);
    else
        gemv(W, X, n, Y, f32out, j0, j1);
}
