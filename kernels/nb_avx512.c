/* nb_avx512: the AVX-512 BF16 linear kernel for bf16 weights (vdpbf16ps on bf16 activations)
 * and attention's two inner loops 16 lanes wide; every other op of that path is the AVX2 one. Compiled with the AVX-512 flags alone (kernels/CMakeLists.txt),
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
#define NB_AVX512_FINISH nb_avx512_wmat_finish
#define NB_AVX512_SCORES4 nb_avx512_attn_scores4
#define NB_AVX512_PV nb_avx512_attn_pv
#else
#define NB_AVX512_LINEAR nb_avx512_emu_linear_bf16
#define NB_AVX512_FINISH nb_avx512_emu_wmat_finish
#define NB_AVX512_SCORES4 nb_avx512_emu_attn_scores4
#define NB_AVX512_PV nb_avx512_emu_attn_pv
#endif

#include <string.h>

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

void NB_AVX512_LINEAR(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                      int j1);
nb_code NB_AVX512_FINISH(nb_wmat *w, nb_err *err);
void NB_AVX512_SCORES4(const float *kt, const float *const q[4], int lim, int hd, float scale,
                       float *const out[4]);
void NB_AVX512_PV(float *const acc[], const float *const w[], int cnt, const float *v, int n,
                  int hd);

/* Weights are VNNI16 (nb_kernels_impl.h): one 64-byte line holds a column
 * pair of 16 rows, so vdpbf16ps of it against x's pair broadcast to every
 * lane adds two products to each of 16 outputs, with no reduction across
 * lanes at the end.
 *
 * Register tile (prefill): MR activation rows x NP panels of 16 outputs.
 * 32 zmm: 6 x 4 = 24 accumulators, 4 weight lines, 1 broadcast (3 spare).
 * Per column pair that is 4 weight loads + 6 broadcast loads for 24
 * vdpbf16ps: 2 FMA ports retire it in 12 cycles, while the 2 load ports
 * need 5, so the FMA ports, not loads, bound it (docs/performance.md). */
#define MR 6
#define NP 4
#define GEMM_MIN_N 4

static inline __m512bh as_bh(__m512i v)
{
    __m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}

/* Column pair p of x (elements 2p, 2p+1) as one 32-bit broadcast value. */
static inline int32_t xpair(const nb_bf16 *x, int p)
{
    int32_t v;
    memcpy(&v, x + 2 * p, 4);
    return v;
}

/* The last, odd column of x as the pair (x[K-1], 0): reading x[K] could
 * touch the next page, and a NaN there would poison the zero weight. */
static inline int32_t xlast(const nb_bf16 *x, int K)
{
    uint16_t h[2] = {x[K - 1], 0};
    int32_t v;
    memcpy(&v, h, 4);
    return v;
}

/* One column pair p into the mr x np accumulators: np weight lines, each
 * row's pair broadcast (a memory broadcast operand of vdpbf16ps). */
static inline __attribute__((always_inline)) void step(__m512 acc[MR][NP], const uint8_t *g,
                                                       size_t gstride, int p,
                                                       const int32_t *xs, int mr, int np)
{
    __m512bh w[NP];
#pragma GCC unroll 4
    for (int q = 0; q < np; q++)
        w[q] = as_bh(_mm512_loadu_si512((const void *)(g + q * gstride + (size_t)p * 64)));
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        __m512bh xv = as_bh(_mm512_set1_epi32(xs[r]));
#pragma GCC unroll 4
        for (int q = 0; q < np; q++)
            acc[r][q] = _mm512_dpbf16_ps(acc[r][q], w[q], xv);
    }
}

/* 16 outputs of one row; whole vectors where all 16 are in range.
 * VCVTNEPS2BF16 rounds as nb_f32_to_bf16 does (RNE, NaN kept quiet) for
 * every value an accumulator can hold: vdpbf16ps never leaves a denormal,
 * the one input class where the instruction (DAZ) and the C differ. */
static void store16(void *Y, int f32out, size_t ld, int i, int j, __m512 acc, int cnt)
{
    size_t at = (size_t)i * ld + (size_t)j;
    if (cnt == NB_VNNI) {
        if (f32out) {
            _mm512_storeu_ps((float *)Y + at, acc);
        } else {
            __m256bh h = _mm512_cvtneps_pbh(acc);
            __m256i v;
            memcpy(&v, &h, sizeof v);
            _mm256_storeu_si256((__m256i *)((nb_bf16 *)Y + at), v);
        }
        return;
    }
    float o[16];
    _mm512_storeu_ps(o, acc);
    for (int r = 0; r < cnt; r++) {
        if (f32out)
            ((float *)Y)[at + r] = o[r];
        else
            ((nb_bf16 *)Y)[at + r] = nb_f32_to_bf16(o[r]);
    }
}

/* Outputs [j, j + 16 np) (clipped to j1) of rows x[0..mr), the first
 * `keep` of them stored (a short last block repeats its last row rather
 * than taking a slower shape). Inlined with constant np and mr so the
 * accumulators stay in registers. */
static inline __attribute__((always_inline)) void tile(const nb_wmat *W, const nb_bf16 *const *x,
                                                       int mr, int np, int keep, int i, int j,
                                                       int j1, void *Y, int f32out)
{
    int K = W->cols, pairs = K / 2;
    size_t gstride = (size_t)NB_VNNI * nb_vnni_cols(K) * 2;
    const uint8_t *g = nb_wmat_vnni_group(W, j / NB_VNNI);
    /* Fully unrolled (the pragmas): with loops left, GCC keeps the
     * accumulators on the stack, a load and a store per vdpbf16ps. */
    __m512 acc[MR][NP];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < np; q++)
            acc[r][q] = _mm512_setzero_ps();
    int32_t xs[MR];
    for (int p = 0; p < pairs; p++) {
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++)
            xs[r] = xpair(x[r], p);
        if (mr == 1) /* decode: see linear_vnni */
            _mm_prefetch((const char *)g + (size_t)p * 64 + NB_PREFETCH_AHEAD, _MM_HINT_T0);
        step(acc, g, gstride, p, xs, mr, np);
    }
    if (K & 1) {
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++)
            xs[r] = xlast(x[r], K);
        step(acc, g, gstride, pairs, xs, mr, np);
    }
    size_t ld = (size_t)W->rows;
#pragma GCC unroll 4
    for (int q = 0; q < np; q++) {
        int jq = j + q * NB_VNNI, cnt = j1 - jq < NB_VNNI ? j1 - jq : NB_VNNI;
        for (int r = 0; r < keep && cnt > 0; r++)
            store16(Y, f32out, ld, i + r, jq, acc[r][q], cnt);
    }
}

/* The constant-shape instances tile() is inlined into. */
#define TILE_FN(mr, np)                                                                          \
    static void tile_##mr##_##np(const nb_wmat *W, const nb_bf16 *const *x, int keep, int i,   \
                                 int j, int j1, void *Y, int f32out)                             \
    {                                                                                            \
        tile(W, x, mr, np, keep, i, j, j1, Y, f32out);                                           \
    }
TILE_FN(1, 1)
TILE_FN(6, 1)
TILE_FN(6, 2)
TILE_FN(6, 3)
TILE_FN(6, 4)

typedef void (*tile_fn)(const nb_wmat *, const nb_bf16 *const *, int, int, int, int, void *,
                        int);
static const tile_fn tiles_6[NP] = {tile_6_1, tile_6_2, tile_6_3, tile_6_4};

/* Decode rows (n < GEMM_MIN_N) take one activation row and one panel per tile, so the weights
 * are one stream read front to back, prefetched NB_PREFETCH_AHEAD on. Four panels at once (four
 * streams 20 KB apart, the earlier shape) read Gemma's and SmolLM2's matrices from memory at
 * 26-33 GB/s where the one prefetched stream reads 35-40 on Zen 5, the read bandwidth being
 * ~38 (docs/performance.md). One panel is one chain of vdpbf16ps per output (the sum's order
 * is fixed: nb_kernels_row_exact's premise), 64 bytes per ~6 cycles: 43 GB/s at 4 GHz from
 * L2, above what one core reads from memory.
 * Prefill takes MR rows per tile, 4 panels at a time: the chunk's panels (a chunk is at most a few
 * hundred rows: under 1 MiB of weights) stay in L2 across row blocks. */
static void linear_vnni(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1)
{
    int K = W->cols, mr = n >= GEMM_MIN_N ? MR : 1, panels = mr == MR ? NP : 1;
    const tile_fn *fns = mr == MR ? tiles_6 : (const tile_fn[]){tile_1_1};
    for (int j = j0; j < j1; j += panels * NB_VNNI) {
        int np = (j1 - j + NB_VNNI - 1) / NB_VNNI;
        np = np < panels ? np : panels;
        for (int i = 0; i < n; i += mr) {
            int rows = n - i < mr ? n - i : mr;
            const nb_bf16 *x[MR];
            for (int r = 0; r < MR; r++)
                x[r] = X + (size_t)(i + (r < rows ? r : rows - 1)) * K;
            fns[np - 1](W, x, rows, i, j, j1, Y, f32out);
        }
    }
}

nb_code NB_AVX512_FINISH(nb_wmat *w, nb_err *err)
{
    return nb_wmat_place(w, w->type == NB_W_BF16 ? NB_LAYOUT_VNNI16 : NB_LAYOUT_PACK8, err);
}

void NB_AVX512_LINEAR(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                      int j1)
{
    if (W->layout != NB_LAYOUT_VNNI16) {
        nb_avx2_linear_bf16(W, X, n, Y, f32out, j0, j1); /* quantized or PACK8 rows */
        return;
    }
    linear_vnni(W, X, n, Y, f32out, j0, j1);
}

/* ---- attention's inner loops (nb_avx2.c's driver calls them through the table) -------------
 * The AVX2 loops, 16 keys or 16 columns per register instead of 8: the same products, each
 * sum in the same order (mul then add, never fused), so the same bits in half the
 * instructions. In Gemma 3's prefill (heads of 256, 512 keys) attention is the largest cost
 * after the linears. */

void NB_AVX512_SCORES4(const float *kt, const float *const q[4], int lim, int hd, float scale,
                       float *const out[4])
{
    __m512 sc = _mm512_set1_ps(scale);
    for (int p = 0; p < lim; p += 16) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *k = kt + p;
        for (int t = 0; t < hd; t++, k += NB_ATTN_TK) {
            __m512 kv = _mm512_loadu_ps(k);
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_set1_ps(q[0][t]), kv));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_set1_ps(q[1][t]), kv));
            a2 = _mm512_add_ps(a2, _mm512_mul_ps(_mm512_set1_ps(q[2][t]), kv));
            a3 = _mm512_add_ps(a3, _mm512_mul_ps(_mm512_set1_ps(q[3][t]), kv));
        }
        /* out[] may repeat a row (fewer than four): identical values */
        _mm512_storeu_ps(out[0] + p, _mm512_mul_ps(a0, sc));
        _mm512_storeu_ps(out[1] + p, _mm512_mul_ps(a1, sc));
        _mm512_storeu_ps(out[2] + p, _mm512_mul_ps(a2, sc));
        _mm512_storeu_ps(out[3] + p, _mm512_mul_ps(a3, sc));
    }
}

/* cols columns from c (16 each register, cols / 16 <= 16) with the accumulators in registers
 * across all n keys; a constant cols after inlining. */
static inline __attribute__((always_inline)) void pv_cols(float *acc, const float *w,
                                                          const float *v, int n, int hd, int c,
                                                          int cols)
{
    __m512 a[16];
    for (int k = 0; k < cols / 16; k++)
        a[k] = _mm512_loadu_ps(acc + c + 16 * k);
    for (int p = 0; p < n; p++) {
        __m512 wv = _mm512_set1_ps(w[p]);
        const float *vr = v + (size_t)p * hd + c;
#pragma GCC unroll 16
        for (int k = 0; k < cols / 16; k++)
            a[k] = _mm512_add_ps(a[k], _mm512_mul_ps(wv, _mm512_loadu_ps(vr + 16 * k)));
    }
    for (int k = 0; k < cols / 16; k++)
        _mm512_storeu_ps(acc + c + 16 * k, a[k]);
}

/* Columns [c, hd) of one row-head. */
static void pv_from(float *acc, const float *w, const float *v, int n, int hd, int c)
{
    for (; c + 256 <= hd; c += 256)
        pv_cols(acc, w, v, n, hd, c, 256);
    for (; c + 64 <= hd; c += 64)
        pv_cols(acc, w, v, n, hd, c, 64);
    for (; c + 16 <= hd; c += 16)
        pv_cols(acc, w, v, n, hd, c, 16);
    for (int p = 0; c < hd && p < n; p++)
        for (int t = c; t < hd; t++)
            acc[t] += w[p] * v[(size_t)p * hd + t];
}

/* Four row-heads over the same keys, 64 columns at a time: the 16 accumulators in registers,
 * each value row chunk loaded once for the four (one row-head at a time read the whole value
 * tile from L2 per row-head: 64 keys x 256 columns x 4 bytes is past L1). */
static void pv4_cols(float *const acc[4], const float *const w[4], const float *v, int n, int hd,
                     int c)
{
    __m512 a[4][4];
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++)
            a[k][j] = _mm512_loadu_ps(acc[k] + c + 16 * j);
    for (int p = 0; p < n; p++) {
        const float *vr = v + (size_t)p * hd + c;
        __m512 v0 = _mm512_loadu_ps(vr), v1 = _mm512_loadu_ps(vr + 16);
        __m512 v2 = _mm512_loadu_ps(vr + 32), v3 = _mm512_loadu_ps(vr + 48);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512 wv = _mm512_set1_ps(w[k][p]);
            a[k][0] = _mm512_add_ps(a[k][0], _mm512_mul_ps(wv, v0));
            a[k][1] = _mm512_add_ps(a[k][1], _mm512_mul_ps(wv, v1));
            a[k][2] = _mm512_add_ps(a[k][2], _mm512_mul_ps(wv, v2));
            a[k][3] = _mm512_add_ps(a[k][3], _mm512_mul_ps(wv, v3));
        }
    }
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++)
            _mm512_storeu_ps(acc[k] + c + 16 * j, a[k][j]);
}

void NB_AVX512_PV(float *const acc[], const float *const w[], int cnt, const float *v, int n,
                  int hd)
{
    int c = 0;
    if (cnt == 4)
        for (; c + 64 <= hd; c += 64)
            pv4_cols(acc, w, v, n, hd, c);
    for (int k = 0; k < cnt; k++)
        pv_from(acc[k], w[k], v, n, hd, c);
}
