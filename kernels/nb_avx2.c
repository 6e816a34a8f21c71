/* nb_avx2: the AVX2+FMA+F16C kernels, compiled with those flags alone (kernels/CMakeLists.txt); dispatch runs
 * them only where CPUID says so. Linear layers give the portable sums bit for bit (same lanes and tree; FMA only where exact). */

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

/* Pins a loaded vector in a register: GCC otherwise folds each use into a
 * memory operand, and a tile that reuses a load from registers turns into
 * twice the loads (Zen 3 retires two 256-bit loads a cycle: that, not the
 * arithmetic, then bounds the GEMM). */
#define IN_REG(v) __asm__("" : "+x"(v))

/* ---- linear layers -----------------------------------------------------------
 * Every output is the portable dot: lane l of an 8-lane accumulator sums
 * x[t+l]*w[t+l] over t = 0, 8, ...; then ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7));
 * then the K % 8 tail in order (quantized weights: the integer block dots
 * of nb_portable.c, see below). Products are rounded before the add (no FMA)
 * wherever X or W is fp32-valued: there x*w is inexact and an FMA would
 * change the bits. Where both are bf16-valued (the bf16 linear on bf16
 * weights) x*w has at most 16 significant bits, exact in fp32, so
 * fma(x, w, acc) rounds the same sum as add(acc, mul(x, w)) (unless the
 * product leaves the float range: below 2^-134 mulps rounds it, beyond
 * 2^128 it overflows; docs/numerics.md): there the decode and prefill
 * kernels both use FMA, which halves the FP ops, never stalls on a tiny
 * product (mulps rounding one to a denormal ran the GEMM at half speed),
 * and leaves registers for a 4x3 tile.
 *
 * Weights are PACK8 (nb_kernels_impl.h): 8 rows interleaved so a group
 * streams as one sequential read with 8 independent accumulators (on Zen 3
 * eight separate row streams get half the bandwidth of one). n <
 * GEMM_MIN_N (decode): each group streams once per X row, converted in
 * registers. Larger n (prefill): each dense group becomes fp32 rows in
 * scratch once per block of X rows (sized for L2) and meets every X row
 * pair of the block in 4x2 register tiles (triple in 4x3 ones with FMA,
 * above); a quantized group stays packed and meets the block's Q8 rows
 * one by one from L1. */
#define GEMM_MIN_N 4
#define XBLOCK_BYTES (384 * 1024)

/* K % 8 tail of one dot (w: that row's tail elements), portable order. */
static inline float tail_dot(int bf16, const float *x, const uint8_t *w, int tail, float s)
{
    for (int t = 0; t < tail; t++)
        s += x[t] * (bf16 ? nb_bf16_to_f32(((const nb_bf16 *)w)[t]) : ((const float *)w)[t]);
    return s;
}

typedef void (*gemv8_fn)(const float *x, const uint8_t *grp, int K, float out[8]);

/* Eight rows of a group against one fp32 X row; MAC is mul then add, or the FMA where every
 * product is exact (above). */
#define GEMV8_DENSE(NAME, ES, LW, MAC)                                                         \
    static void NAME(const float *x, const uint8_t *grp, int K, float out[8])                  \
    {                                                                                          \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,          \
               a6 = a0, a7 = a0;                                                               \
        int K8 = K & ~7;                                                                       \
        const uint8_t *p = grp;                                                                \
        for (int t = 0; t < K8; t += 8, p += 64 * (ES)) {                                      \
            __m256 xv = _mm256_loadu_ps(x + t);                                                \
            nb_prefetch_ahead(p, 64 * (ES) - 64);                                              \
            a0 = MAC(a0, xv, LW(p));                                                           \
            a1 = MAC(a1, xv, LW(p + 8 * (ES)));                                                \
            a2 = MAC(a2, xv, LW(p + 16 * (ES)));                                               \
            a3 = MAC(a3, xv, LW(p + 24 * (ES)));                                               \
            a4 = MAC(a4, xv, LW(p + 32 * (ES)));                                               \
            a5 = MAC(a5, xv, LW(p + 40 * (ES)));                                               \
            a6 = MAC(a6, xv, LW(p + 48 * (ES)));                                               \
            a7 = MAC(a7, xv, LW(p + 56 * (ES)));                                               \
        }                                                                                      \
        _mm256_storeu_ps(out, nb_reduce8(a0, a1, a2, a3, a4, a5, a6, a7));                     \
        int tail = K - K8;                                                                     \
        if (tail)                                                                              \
            for (int r = 0; r < 8; r++)                                                        \
                out[r] = tail_dot((ES) == 2, x + K8, p + (size_t)r * tail * (ES), tail, out[r]); \
    }

static inline __m256 lw_bf16(const uint8_t *p)
{
    return nb_ld_bf16x8((const nb_bf16 *)p);
}

static inline __m256 lw_f32(const uint8_t *p)
{
    return _mm256_loadu_ps((const float *)p);
}

static inline __m256 mac_mul_add(__m256 acc, __m256 x, __m256 w)
{
    return _mm256_add_ps(acc, _mm256_mul_ps(x, w));
}

static inline __m256 mac_fma(__m256 acc, __m256 x, __m256 w)
{
    return _mm256_fmadd_ps(x, w, acc);
}

GEMV8_DENSE(gemv8_bf16, 2, lw_bf16, mac_mul_add)
GEMV8_DENSE(gemv8_bf16_fma, 2, lw_bf16, mac_fma)
GEMV8_DENSE(gemv8_f32, 4, lw_f32, mac_mul_add)

/* Whether every product x*w of a dense linear is exact in fp32 (X and W both bf16-valued), so
 * its decode and prefill kernels may fuse (above): the one rule both follow. */
static inline int dense_exact(const nb_wmat *W, int xbf16)
{
    return xbf16 && W->type == NB_W_BF16;
}

/* The decode kernel of a dense group: the FMA one where the products are exact. */
static inline gemv8_fn gemv8_for(const nb_wmat *W, int exact)
{
    return W->type == NB_W_F32 ? gemv8_f32 : exact ? gemv8_bf16_fma : gemv8_bf16;
}

/* Four fp32 weight rows against two X rows (x1 == x0 for one):
 * out[c*4 + r] = dot(x_c, w_r). Kept out of line: inlined into
 * gemm_rows, GCC 12 allocates its 16 live vectors worse and bf16 pp512
 * drops from ~490 to ~400 tok/s. */
__attribute__((noinline)) static void tile4x2_dense(const float *x0, const float *x1,
                                                    const float *const w[4], int K, float out[8])
{
    __m256 a00 = _mm256_setzero_ps(), a10 = a00, a20 = a00, a30 = a00;
    __m256 a01 = a00, a11 = a00, a21 = a00, a31 = a00;
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    int K8 = K & ~7, t = 0;
    for (; t < K8; t += 8) {
        __m256 xa = _mm256_loadu_ps(x0 + t), xb = _mm256_loadu_ps(x1 + t);
        IN_REG(xa);
        IN_REG(xb);
        __m256 v = _mm256_loadu_ps(w0 + t);
        IN_REG(v);
        a00 = _mm256_add_ps(a00, _mm256_mul_ps(xa, v));
        a01 = _mm256_add_ps(a01, _mm256_mul_ps(xb, v));
        v = _mm256_loadu_ps(w1 + t);
        IN_REG(v);
        a10 = _mm256_add_ps(a10, _mm256_mul_ps(xa, v));
        a11 = _mm256_add_ps(a11, _mm256_mul_ps(xb, v));
        v = _mm256_loadu_ps(w2 + t);
        IN_REG(v);
        a20 = _mm256_add_ps(a20, _mm256_mul_ps(xa, v));
        a21 = _mm256_add_ps(a21, _mm256_mul_ps(xb, v));
        v = _mm256_loadu_ps(w3 + t);
        IN_REG(v);
        a30 = _mm256_add_ps(a30, _mm256_mul_ps(xa, v));
        a31 = _mm256_add_ps(a31, _mm256_mul_ps(xb, v));
    }
    _mm256_storeu_ps(out, nb_reduce8(a00, a10, a20, a30, a01, a11, a21, a31));
    int tail = K - K8;
    if (tail)
        for (int r = 0; r < 4; r++) {
            out[r] = tail_dot(0, x0 + K8, (const uint8_t *)(w[r] + K8), tail, out[r]);
            out[4 + r] = tail_dot(0, x1 + K8, (const uint8_t *)(w[r] + K8), tail, out[4 + r]);
        }
}

/* One weight row's 8 k against the three X rows held in xa, xb, xc. */
#define FMA_ROW3(W, A0, A1, A2)                                                                \
    do {                                                                                       \
        __m256 v = _mm256_loadu_ps((W) + t);                                                   \
        IN_REG(v);                                                                             \
        A0 = _mm256_fmadd_ps(xa, v, A0);                                                       \
        A1 = _mm256_fmadd_ps(xb, v, A1);                                                       \
        A2 = _mm256_fmadd_ps(xc, v, A2);                                                       \
    } while (0)

/* Four fp32 weight rows against three X rows, by FMA (every product exact:
 * bf16 X, bf16 W): out[c*4 + r] = dot(x_c, w_r), each lane summed in the
 * decode kernel's order (gemv8_bf16_fma), so a row's bits do not depend on
 * n. 12 accumulators + 3 X rows + 1 weight vector are the 16 ymm; per 8 k,
 * 7 loads feed 12 FMAs: 6 cycles on Zen's two FMA pipes, against 8 mul+add
 * pairs in 4 for the 4x2 tile (x loads 0.25 per FMA either way). */
__attribute__((noinline)) static void tile4x3_fma(const float *const x[3],
                                                  const float *const w[4], int K, float out[12])
{
    __m256 a00 = _mm256_setzero_ps(), a10 = a00, a20 = a00, a30 = a00;
    __m256 a01 = a00, a11 = a00, a21 = a00, a31 = a00;
    __m256 a02 = a00, a12 = a00, a22 = a00, a32 = a00;
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2];
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    int K8 = K & ~7, t = 0;
    for (; t < K8; t += 8) {
        __m256 xa = _mm256_loadu_ps(x0 + t), xb = _mm256_loadu_ps(x1 + t),
               xc = _mm256_loadu_ps(x2 + t);
        IN_REG(xa);
        IN_REG(xb);
        IN_REG(xc);
        FMA_ROW3(w0, a00, a01, a02);
        FMA_ROW3(w1, a10, a11, a12);
        FMA_ROW3(w2, a20, a21, a22);
        FMA_ROW3(w3, a30, a31, a32);
    }
    _mm256_storeu_ps(out, nb_reduce8(a00, a10, a20, a30, a01, a11, a21, a31));
    _mm_storeu_ps(out + 8, nb_reduce4(a02, a12, a22, a32));
    int tail = K - K8;
    if (tail)
        for (int c = 0; c < 3; c++)
            for (int r = 0; r < 4; r++)
                out[c * 4 + r] = tail_dot(0, x[c] + K8, (const uint8_t *)(w[r] + K8), tail,
                                          out[c * 4 + r]);
}

/* ---- quantized weights x Q8 activations ------------------------------------
 * nb_portable.c defines the arithmetic: integer block dots, then per lane
 * acc += float(isum) * (d_w d_x), and Q4_1's m_w s_x in a sum of its own.
 * Dequantizing to fp32 instead costs ~25 ops per 32 weights and row
 * (unpack, convert, scale, multiply, add), which kept Q4_1 decode compute
 * bound at a third of the read bandwidth; maddubs + madd do the 32 products
 * and their sums in two. */

/* nb_q8_quantize_row, 8 lanes at a time. amax: max(|x|, acc) returns acc
 * for a NaN |x|, as the portable compare does; the clamps order their
 * operands so NaN lands on -127 there too. */
void nb_avx2_q8_quantize_row(const float *x, int k, int8_t *q, float *d, float *s)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-127.0f),
                 hi = _mm256_set1_ps(127.0f);
    for (int b = 0; b < k / 32; b++) {
        const float *xb = x + (size_t)b * 32;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int c = 0; c < 4; c++) {
            v[c] = _mm256_loadu_ps(xb + 8 * c);
            m = _mm256_max_ps(_mm256_andnot_ps(sign, v[c]), m);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float amax = _mm_cvtss_f32(m4);
        float db = amax / 127.0f, id = db > 0.0f ? 1.0f / db : 0.0f;
        __m256 idv = _mm256_set1_ps(id);
        __m256i qi[4];
        for (int c = 0; c < 4; c++) {
            __m256 t = _mm256_max_ps(_mm256_mul_ps(v[c], idv), lo);
            qi[c] = _mm256_cvtps_epi32(_mm256_min_ps(t, hi));
        }
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]),
                                       _mm256_add_epi32(qi[2], qi[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        /* packs interleave the 128-bit halves; the permute restores order */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                       _mm256_packs_epi32(qi[2], qi[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + (size_t)b * 32), p);
        d[b] = db;
        s[b] = db * (float)_mm_cvtsi128_si32(s4);
    }
}

void nb_avx2_f16x8_to_f32(const uint8_t *h, float out[8])
{
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
}

void nb_q8_half_sums(const int8_t *q, int nb, int32_t *hs)
{
    for (int b = 0; b < nb; b++) {
        int lo = 0, hi = 0;
        for (int t = 0; t < 16; t++) {
            lo += q[32 * b + t];
            hi += q[32 * b + 16 + t];
        }
        hs[b] = (int32_t)(((uint32_t)hi << 16) | ((uint32_t)lo & 0xffffu));
    }
}

/* One row's block: lane l += float(isum over weights 4l..4l+3) * dd. */
static inline __m256 q8_lane_add(__m256 acc, __m256i prod16, const float *dd)
{
    __m256i is = _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), _mm256_broadcast_ss(dd)));
}

/* Q8_0 row (32 signed quant bytes): maddubs wants its first operand
 * unsigned, so |w| against x carrying w's sign. */
static inline __m256i q8_0_prod(const uint8_t *qs, __m256i xq)
{
    __m256i w = _mm256_loadu_si256((const __m256i *)qs);
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w));
}

typedef nb_q8_act q8_act;

/* A PACK8 group's eight Q8_0 rows against one Q8 activation row, a row per accumulator.
 * Block b: the 8 rows' d as fp16, then their 32 quant bytes each. */
static void gemv8_q8_0(const q8_act *x, const uint8_t *grp, int K, float out[8])
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    float dd[8];
    const uint8_t *p = grp;
    enum { QB = NB_QUANT_QK };
    for (int b = 0; b < K / 32; b++, p += 8 * NB_QUANT_Q8_0_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q8_0_BYTES);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        _mm256_storeu_ps(dd, _mm256_mul_ps(dw, _mm256_broadcast_ss(x->d + b)));
        __m256i xq = _mm256_loadu_si256((const __m256i *)(x->q + b * 32));
        const uint8_t *q = p + 8 * NB_QUANT_Q8_0_QS;
        a0 = q8_lane_add(a0, q8_0_prod(q, xq), dd + 0);
        a1 = q8_lane_add(a1, q8_0_prod(q + QB, xq), dd + 1);
        a2 = q8_lane_add(a2, q8_0_prod(q + 2 * QB, xq), dd + 2);
        a3 = q8_lane_add(a3, q8_0_prod(q + 3 * QB, xq), dd + 3);
        a4 = q8_lane_add(a4, q8_0_prod(q + 4 * QB, xq), dd + 4);
        a5 = q8_lane_add(a5, q8_0_prod(q + 5 * QB, xq), dd + 5);
        a6 = q8_lane_add(a6, q8_0_prod(q + 6 * QB, xq), dd + 6);
        a7 = q8_lane_add(a7, q8_0_prod(q + 7 * QB, xq), dd + 7);
    }
    /* + 0: a -0 row becomes +0, as in the reference (dot_q8_0) */
    _mm256_storeu_ps(out, _mm256_add_ps(nb_reduce8(a0, a1, a2, a3, a4, a5, a6, a7),
                                        _mm256_setzero_ps()));
}

/* The 4 activation quants x[4k..4k+3] of block b in every 32-bit lane. */
static inline __m256i x4_bcast(const int8_t *xb, int k)
{
    int32_t v;
    memcpy(&v, xb + 4 * k, 4);
    return _mm256_set1_epi32(v);
}

/* Q4_1, 8 rows in the 8 lanes (PACK8 chunks it so, nb_kernels.c): per block, d0..d7, m0..m7,
 * then 4 loads of 32 bytes, load k holding quant bytes 4k..4k+3 of row r in lane r, whose low
 * nibbles are weights 4k..4k+3 and high nibbles weights 16+4k.. (nb_quant_nibbles). maddubs of
 * each nibble half with the broadcast x quants gives pair sums (|pair| <= 2 * 15 * 127); the 8 of
 * a block sum in int16 without overflow (8 * 3810 < 32767), madd with 1 makes each lane the
 * row's exact block dot. Then the float steps of dot_q4_1 (nb_portable.c) once for 8 rows:
 * ~40 instructions per 8 x 32 weights, where the per-row lane form took ~90. */
/* Quant bytes 4k..4k+3 of the 8 rows (32 bytes at q) against x's quants of those weights:
 * pair sums of the low nibbles with x[4k..], plus those of the high nibbles with x[16+4k..]. */
static inline __m256i q4_1_pairs(const uint8_t *q, const int8_t *xb, int k)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
    __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, x4_bcast(xb, k)),
                            _mm256_maddubs_epi16(hi, x4_bcast(xb, k + 4)));
}

void nb_avx2_q4_1_gemv8(const q8_act *x, const uint8_t *grp, int K, float out[8])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps(), mt = acc;
    const uint8_t *p = grp;
    for (int b = 0; b < K / 32; b++, p += 8 * NB_QUANT_Q4_1_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q4_1_BYTES);
        const int8_t *xb = x->q + b * 32;
        const uint8_t *q = p + 8 * NB_QUANT_Q4_1_QS;
        __m256i s01 = _mm256_add_epi16(q4_1_pairs(q, xb, 0), q4_1_pairs(q, xb, 1));
        __m256i s23 = _mm256_add_epi16(q4_1_pairs(q, xb, 2), q4_1_pairs(q, xb, 3));
        __m256i is = _mm256_madd_epi16(_mm256_add_epi16(s01, s23), ones);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
        __m256 dd = _mm256_mul_ps(dw, _mm256_broadcast_ss(x->d + b));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), dd));
        mt = _mm256_add_ps(mt, _mm256_mul_ps(mw, _mm256_broadcast_ss(x->s + b)));
    }
    _mm256_storeu_ps(out, _mm256_add_ps(acc, mt));
}

/* ---- drivers ------------------------------------------------------------------ */

static inline void store_outs(void *Y, int f32out, size_t ld, int i, int j, const float *o,
                              int cnt)
{
    if (f32out) {
        memcpy((float *)Y + (size_t)i * ld + j, o, sizeof(float) * (size_t)cnt);
        return;
    }
    nb_bf16 *y = (nb_bf16 *)Y + (size_t)i * ld + j;
    if (cnt == 8) {
        _mm_storeu_si128((__m128i *)y, nb_st_bf16x8(_mm256_loadu_ps(o)));
        return;
    }
    if (cnt == 4) { /* the GEMM's tiles: a scalar rounding each took a twentieth of its time */
        __m256 v = _mm256_castps128_ps256(_mm_loadu_ps(o));
        _mm_storel_epi64((__m128i *)y, nb_st_bf16x8(_mm256_insertf128_ps(v, _mm_setzero_ps(), 1)));
        return;
    }
    for (int r = 0; r < cnt; r++)
        y[r] = nb_f32_to_bf16(o[r]);
}

/* Decode-sized n: each group streams once per X row (n < GEMM_MIN_N: the
 * group is still in L1 for the next X row). j0 is a multiple of 8. */
static void gemv_rows(const nb_wmat *W, const float *xs, int exact, int n, void *Y, int f32out,
                      int j0, int j1)
{
    int K = W->cols;
    gemv8_fn fn = gemv8_for(W, exact);
    for (int j = j0; j < j1; j += 8) {
        int cnt = j1 - j < 8 ? j1 - j : 8;
        const uint8_t *grp = nb_wmat_group(W, j / 8);
        for (int i = 0; i < n; i++) {
            float o[8];
            fn(xs + (size_t)i * K, grp, K, o);
            store_outs(Y, f32out, (size_t)W->rows, i, j, o, cnt);
        }
    }
}

/* The 8 rows of a dense group as fp32 rows of K in ws (exact). The groups of a matrix are one
 * sequential stream: prefetched ahead as the decode kernel does, since waiting on each line of
 * it from memory took a tenth of the bf16 prefill GEMM's time. */
static void group_to_f32(const nb_wmat *W, const uint8_t *grp, float *ws)
{
    int K = W->cols, K8 = K & ~7, tail = K - K8;
    int bf = W->type == NB_W_BF16;
    size_t es = bf ? 2 : 4;
    const uint8_t *p = grp;
    for (int t = 0; t < K8; t += 8) { /* (the type tested outside: GCC kept it per vector) */
        nb_prefetch_ahead(p, 64 * (int)es - 64);
        if (bf)
            for (int r = 0; r < 8; r++, p += 16)
                _mm256_storeu_ps(ws + (size_t)r * K + t, lw_bf16(p));
        else
            for (int r = 0; r < 8; r++, p += 32)
                _mm256_storeu_ps(ws + (size_t)r * K + t, lw_f32(p));
    }
    for (int r = 0; r < 8; r++)
        for (int t = 0; t < tail; t++)
            ws[(size_t)r * K + K8 + t] = bf ? nb_bf16_to_f32(((const nb_bf16 *)p)[r * tail + t])
                                            : ((const float *)p)[r * tail + t];
}

/* Prefill-sized n: X rows in L2-sized blocks; per block, each group of 8
 * rows becomes fp32 once and meets every X row pair (exact: triple, by
 * FMA; see the top of the file) in registers. */
static void gemm_rows(const nb_wmat *W, const float *xs, int exact, int n, void *Y, int f32out,
                      int j0, int j1, float *ws)
{
    int K = W->cols;
    size_t ld = (size_t)W->rows;
    int xb = (int)(XBLOCK_BYTES / ((size_t)K * 4));
    xb = xb < 2 ? 2 : xb & ~1;
    for (int i0 = 0; i0 < n; i0 += xb) {
        int i1 = i0 + xb < n ? i0 + xb : n;
        for (int j = j0; j < j1; j += 8) {
            int cnt = j1 - j < 8 ? j1 - j : 8;
            group_to_f32(W, nb_wmat_group(W, j / 8), ws);
            /* the next group into L2 a slice per tile, so its conversion does not wait on
             * memory or L3 (the triples of both halves share out its lines) */
            const uint8_t *nxt = j + 8 < j1 ? nb_wmat_group(W, j / 8 + 1) : NULL;
            size_t plen = nxt ? NB_PACK * W->row_bytes : 0, pfo = 0;
            size_t pstep = (plen / (size_t)(2 * ((i1 - i0 + 2) / 3)) + 127) & ~(size_t)63;
            for (int h = 0; h < 8 && h < cnt; h += 4) {
                const float *w[4] = {ws + (size_t)h * K, ws + (size_t)(h + 1) * K,
                                     ws + (size_t)(h + 2) * K, ws + (size_t)(h + 3) * K};
                int hc = cnt - h < 4 ? cnt - h : 4;
                if (exact) {
                    /* a short last triple repeats its first row; the copies are not stored */
                    for (int i = i0; i < i1; i += 3, pfo += pstep) {
                        for (size_t o = pfo; o < pfo + pstep && o < plen; o += 64)
                            _mm_prefetch((const char *)nxt + o, _MM_HINT_T1);
                        const float *x[3] = {xs + (size_t)i * K, NULL, NULL};
                        x[1] = i + 1 < i1 ? x[0] + K : x[0];
                        x[2] = i + 2 < i1 ? x[0] + 2 * (size_t)K : x[0];
                        float o[12];
                        tile4x3_fma(x, w, K, o);
                        for (int c = 0; c < 3 && i + c < i1; c++)
                            store_outs(Y, f32out, ld, i + c, j + h, o + 4 * c, hc);
                    }
                    continue;
                }
                for (int i = i0; i < i1; i += 2) {
                    const float *x0 = xs + (size_t)i * K;
                    const float *x1 = i + 1 < i1 ? x0 + K : x0;
                    float o[8];
                    tile4x2_dense(x0, x1, w, K, o);
                    store_outs(Y, f32out, ld, i, j + h, o, hc);
                    if (i + 1 < i1)
                        store_outs(Y, f32out, ld, i + 1, j + h, o + 4, hc);
                }
            }
        }
    }
}

/* Quantized weights, any n: X rows (as Q8) in L2-sized blocks, each group
 * streamed once per block and kept in L1 across the block's rows (a group
 * is at most 8 * 2048/32 * 34 bytes here; prefill needs no fp32 copy). The
 * rows-in-lanes kernels (Q4_1, Q5_0, Q4_K, Q6_K) decode the group's quants
 * again per X row: a few instructions per weight byte, against the ~13
 * the per-lane form's float steps cost per 32 weights and row. */
/* The prefill GEMM (kt->kq_gemm) of a group block: X rows in blocks of pair records (i0 even),
 * each group expanded once per block and met by the block's rows in register tiles. */
#define GEMM_XBLOCK_BYTES (1024 * 1024)
#define GEMM_XBLOCK_MAX 256

static void kq_gemm_rows(const nb_kq_gemm_ops *gm, const nb_wmat *W, const uint8_t *pairs,
                         const float *xsum, int n, void *Y, int f32out, int j0, int j1,
                         uint8_t *g)
{
    int K = W->cols, nb = K / 32;
    int xb = (int)(GEMM_XBLOCK_BYTES / (gm->pairs_bytes(2, K) / 2));
    xb = xb < 2 ? 2 : xb > GEMM_XBLOCK_MAX ? GEMM_XBLOCK_MAX : xb & ~1;
    float o[8 * GEMM_XBLOCK_MAX];
    for (int i0 = 0; i0 < n; i0 += xb) {
        int i1 = i0 + xb < n ? i0 + xb : n;
        const uint8_t *pr = pairs + gm->pairs_bytes(i0, K); /* i0 even: whole records */
        for (int j = j0; j < j1; j += 8) {
            int cnt = j1 - j < 8 ? j1 - j : 8;
            gm->expand(W->type, nb_wmat_group(W, j / 8), K, g);
            gm->gemm(W->type, g, K, pr, xsum + (size_t)i0 * nb, i1 - i0, o);
            for (int i = i0; i < i1; i++)
                store_outs(Y, f32out, (size_t)W->rows, i, j, o + 8 * (i - i0), cnt);
        }
    }
}

/* The path's kernel of 8 PACK8 rows of type t (the AVX2 one where the table names none). */
static nb_q8_gemv8_fn qkernel(const nb_kernel_table *kt, nb_wtype t)
{
    nb_q8_gemv8_fn k = NULL, avx2 = NULL;
    switch (t) {
    case NB_W_Q4_1: k = kt->q4_1_gemv8, avx2 = nb_avx2_q4_1_gemv8; break;
    case NB_W_Q5_0: k = kt->q5_0_gemv8, avx2 = nb_avx2_q5_0_gemv8; break;
    case NB_W_Q4_K: k = kt->q4_k_gemv8, avx2 = nb_avx2_q4_k_gemv8; break;
    case NB_W_Q6_K: k = kt->q6_k_gemv8, avx2 = nb_avx2_q6_k_gemv8; break;
    default: k = kt->q8_0_gemv8, avx2 = gemv8_q8_0; break; /* Q8_0 */
    }
    return k ? k : avx2;
}

static void qlinear_rows(const nb_wmat *W, const int8_t *xq, const float *xd, const float *xsum,
                         const int32_t *xhs, int n, void *Y, int f32out, int j0, int j1)
{
    int K = W->cols, nb = K / 32;
    const nb_kernel_table *kt = nb_kernels_active();
    nb_q8_gemv8_fn fn = qkernel(kt, W->type);
    int xb = (int)(XBLOCK_BYTES / ((size_t)K + 8 * (size_t)nb));
    xb = xb < 1 ? 1 : xb;
    for (int i0 = 0; i0 < n; i0 += xb) {
        int i1 = i0 + xb < n ? i0 + xb : n;
        for (int j = j0; j < j1; j += 8) {
            int cnt = j1 - j < 8 ? j1 - j : 8;
            const uint8_t *grp = nb_wmat_group(W, j / 8);
            int i = i0;
            /* Q5_0 prefill: 4 rows per pass, the quants made once for them (the same bits) */
            for (; W->type == NB_W_Q5_0 && i + 4 <= i1; i += 4) {
                q8_act a[4];
                float o[4][8];
                for (int r = 0; r < 4; r++)
                    a[r] = (q8_act){xq + (size_t)(i + r) * K, xd + (size_t)(i + r) * nb,
                                    xsum + (size_t)(i + r) * nb, xhs + (size_t)(i + r) * nb, 0};
                nb_avx2_q5_0_gemv8x4(a, grp, K, o);
                for (int r = 0; r < 4; r++)
                    store_outs(Y, f32out, (size_t)W->rows, i + r, j, o[r], cnt);
            }
            for (; i < i1; i++) {
                q8_act a = {xq + (size_t)i * K, xd + (size_t)i * nb, xsum + (size_t)i * nb,
                            xhs + (size_t)i * nb, i > i0};
                float o[8];
                fn(&a, grp, K, o);
                store_outs(Y, f32out, (size_t)W->rows, i, j, o, cnt);
            }
        }
    }
}

static void linear_any(const nb_wmat *W, const void *X, int xbf16, int n, void *Y, int f32out,
                       int j0, int j1)
{
    int K = W->cols, quant = nb_wtype_quantized(W->type);
    size_t xn = ((size_t)n * K + 15) & ~(size_t)15, nb = (size_t)K / 32;
    int gemm = !quant && n >= GEMM_MIN_N;
    /* fp32 X, then the dense GEMM's group rows or the Q8 form of X */
    size_t qoff = sizeof(float) * (xn + (gemm ? 8 * (size_t)K : 0));
    size_t qn = ((size_t)n * K + 63) & ~(size_t)63;
    size_t qa = quant ? qn + ((sizeof(float) * 3 * n * nb + 63) & ~(size_t)63) : 0;
    /* The prefill GEMM's pair records of X, then room for one expanded group: the size depends
     * on n and K alone, so the slices of a batch keep the converted X (a larger scratch would
     * lose it). */
    const nb_kq_gemm_ops *gm = quant && n >= GEMM_MIN_N ? nb_kernels_active()->kq_gemm : NULL;
    size_t pb = gm ? (gm->pairs_bytes(n, K) + 63) & ~(size_t)63 : 0;
    size_t gb = gm ? gm->gemm_bytes(NB_W_Q8_0, K) : 0;
    uint8_t *base = nb_scratch_or_die(qoff + qa + pb + gb);
    uint8_t *pairs = base + qoff + qa;
    float *xs = (float *)base;
    int8_t *xq = (int8_t *)(base + qoff);
    float *xd = (float *)(base + qoff + qn), *xsum = xd + (size_t)n * nb;
    int32_t *xhs = (int32_t *)(xsum + (size_t)n * nb);
    /* Later slices of the same call on this thread find X converted, unless another converter
     * (a batch's other matrix type) has written the scratch since. */
    static _Thread_local struct {
        uint64_t id;
        const void *X;
        int n, K, quant;
    } last;
    if (!(nb_call_id && nb_scratch_owner == &last && last.id == nb_call_id && last.X == X &&
          last.n == n && last.K == K && last.quant == quant)) {
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
        if (quant)
            for (int i = 0; i < n; i++)
            {
                nb_avx2_q8_quantize_row(xs + (size_t)i * K, K, xq + (size_t)i * K,
                                        xd + (size_t)i * nb, xsum + (size_t)i * nb);
                nb_q8_half_sums(xq + (size_t)i * K, (int)nb, xhs + (size_t)i * nb);
            }
        if (gm)
            gm->pairs(xq, xd, n, K, pairs);
    }
    nb_scratch_owner = &last;
    last.id = nb_call_id;
    last.X = X;
    last.n = n;
    last.K = K;
    last.quant = quant;
    if (gm && nb_kq_gemm_type(W->type))
        kq_gemm_rows(gm, W, pairs, xsum, n, Y, f32out, j0, j1, pairs + pb);
    else if (quant)
        qlinear_rows(W, xq, xd, xsum, xhs, n, Y, f32out, j0, j1);
    else if (gemm)
        gemm_rows(W, xs, dense_exact(W, xbf16), n, Y, f32out, j0, j1, xs + xn);
    else
        gemv_rows(W, xs, dense_exact(W, xbf16), n, Y, f32out, j0, j1);
}

void nb_avx2_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                         int j1)
{
    if (W->layout != NB_LAYOUT_PACK8) { /* finished under another path */
        nb_kernels_portable.linear_bf16(W, X, n, Y, f32out, j0, j1);
        return;
    }
    linear_any(W, X, 1, n, Y, f32out, j0, j1);
}

static void avx2_linear_f32(const nb_wmat *W, const float *X, int n, float *Y, int j0, int j1)
{
    if (W->layout != NB_LAYOUT_PACK8) {
        nb_kernels_portable.linear_f32(W, X, n, Y, j0, j1);
        return;
    }
    linear_any(W, X, 0, n, Y, 1, j0, j1);
}

static nb_code avx2_wmat_finish(nb_wmat *w, nb_err *err)
{
    return nb_wmat_place(w, NB_LAYOUT_PACK8, err);
}

/* ---- element-wise -------------------------------------------------------------- */

static void avx2_rmsnorm_bf16(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim,
                              float eps)
{
    for (int i = 0; i < n; i++) {
        const nb_bf16 *xr = x + (size_t)i * dim;
        nb_bf16 *yr = y + (size_t)i * dim;
        float r = nb_rms_scale_bf16(xr, dim, eps);
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

/* RoPE as the reference: a' = bf16(bf16(a*c) + bf16(-b*s)),
 * b' = bf16(bf16(b*c) + bf16(a*s)), 8 pairs at a time. */
static void avx2_rope_bf16(nb_bf16 *x, int n_heads, int hd, const float *cos, const float *sin)
{
    int half = hd / 2;
    const __m256 neg = _mm256_set1_ps(-0.0f);
    for (int h = 0; h < n_heads; h++) {
        nb_bf16 *v = x + (size_t)h * hd;
        int i = 0;
        for (; i + 8 <= half; i += 8) {
            __m256 a = nb_ld_bf16x8(v + i), b = nb_ld_bf16x8(v + half + i);
            __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
            __m256 lo = _mm256_add_ps(nb_round_bf16x8(_mm256_mul_ps(a, c)),
                                      nb_round_bf16x8(_mm256_mul_ps(_mm256_xor_ps(b, neg), s)));
            __m256 hi = _mm256_add_ps(nb_round_bf16x8(_mm256_mul_ps(b, c)),
                                      nb_round_bf16x8(_mm256_mul_ps(a, s)));
            _mm_storeu_si128((__m128i *)(v + i), nb_st_bf16x8(lo));
            _mm_storeu_si128((__m128i *)(v + half + i), nb_st_bf16x8(hi));
        }
        for (; i < half; i++) {
            float a = nb_bf16_to_f32(v[i]), b = nb_bf16_to_f32(v[i + half]);
            float c = cos[i], s = sin[i];
            v[i] = nb_f32_to_bf16(nb_round_bf16(a * c) + nb_round_bf16(-b * s));
            v[i + half] = nb_f32_to_bf16(nb_round_bf16(b * c) + nb_round_bf16(a * s));
        }
    }
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
#define TK NB_ATTN_TK

/* rows [p][hd] (p < pn, pn a multiple of 8) -> kt [hd][TK], 8x8 blocks
 * transposed in registers. */
static void transpose_tile(const float *rows, int pn, int hd, float *kt)
{
    int hd8 = hd & ~7;
    for (int p = 0; p < pn; p += 8) {
        for (int t = 0; t < hd8; t += 8) {
            __m256 r0 = _mm256_loadu_ps(rows + (size_t)(p + 0) * hd + t);
            __m256 r1 = _mm256_loadu_ps(rows + (size_t)(p + 1) * hd + t);
            __m256 r2 = _mm256_loadu_ps(rows + (size_t)(p + 2) * hd + t);
            __m256 r3 = _mm256_loadu_ps(rows + (size_t)(p + 3) * hd + t);
            __m256 r4 = _mm256_loadu_ps(rows + (size_t)(p + 4) * hd + t);
            __m256 r5 = _mm256_loadu_ps(rows + (size_t)(p + 5) * hd + t);
            __m256 r6 = _mm256_loadu_ps(rows + (size_t)(p + 6) * hd + t);
            __m256 r7 = _mm256_loadu_ps(rows + (size_t)(p + 7) * hd + t);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
            float *d = kt + (size_t)t * TK + p;
            _mm256_storeu_ps(d + 0 * TK, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + 1 * TK, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 2 * TK, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 3 * TK, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 4 * TK, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 5 * TK, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 6 * TK, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 7 * TK, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (int t = hd8; t < hd; t++)
            for (int k = 0; k < 8; k++)
                kt[(size_t)t * TK + p + k] = rows[(size_t)(p + k) * hd + t];
    }
}

/* Scores of four query vectors against keys [0, lim) of a tile (lim a
 * multiple of 16): out[k][p] = scale * sum_t q_k[t] * kt[t][p], the sum in
 * t order (exact against the reference). */
static void scores4(const float *kt, const float *const q[4], int lim, int hd, float scale,
                    float *const out[4])
{
    __m256 sc = _mm256_set1_ps(scale);
    for (int p = 0; p < lim; p += 16) {
        __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0,
               b3 = a0;
        const float *k = kt + p;
        for (int t = 0; t < hd; t++, k += TK) {
            __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8);
            __m256 q0 = _mm256_broadcast_ss(q[0] + t), q1 = _mm256_broadcast_ss(q[1] + t);
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(q0, k0));
            b0 = _mm256_add_ps(b0, _mm256_mul_ps(q0, k1));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(q1, k0));
            b1 = _mm256_add_ps(b1, _mm256_mul_ps(q1, k1));
            __m256 q2 = _mm256_broadcast_ss(q[2] + t), q3 = _mm256_broadcast_ss(q[3] + t);
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(q2, k0));
            b2 = _mm256_add_ps(b2, _mm256_mul_ps(q2, k1));
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(q3, k0));
            b3 = _mm256_add_ps(b3, _mm256_mul_ps(q3, k1));
        }
        /* out[] may repeat a row (fewer than four): identical values */
        _mm256_storeu_ps(out[0] + p, _mm256_mul_ps(a0, sc));
        _mm256_storeu_ps(out[0] + p + 8, _mm256_mul_ps(b0, sc));
        _mm256_storeu_ps(out[1] + p, _mm256_mul_ps(a1, sc));
        _mm256_storeu_ps(out[1] + p + 8, _mm256_mul_ps(b1, sc));
        _mm256_storeu_ps(out[2] + p, _mm256_mul_ps(a2, sc));
        _mm256_storeu_ps(out[2] + p + 8, _mm256_mul_ps(b2, sc));
        _mm256_storeu_ps(out[3] + p, _mm256_mul_ps(a3, sc));
        _mm256_storeu_ps(out[3] + p + 8, _mm256_mul_ps(b3, sc));
    }
}

typedef void (*attn_scores4_fn)(const float *kt, const float *const q[4], int lim, int hd,
                                float scale, float *const out[4]);
typedef void (*attn_pv_fn)(float *const acc[], const float *const w[], int cnt, const float *v,
                           int n, int hd);
static void pv_accumulate(float *acc0, const float *w, const float *v, int n, int hd);

/* Four row-heads' weighted sums over 16 columns from c: each value row is loaded once for all
 * four (Gemma's head_dim 256 makes a 64-key value tile 64 KB, past L1: one head at a time
 * read it from L2 four times). Each accumulator still adds p = 0, 1, ... in order: the bits
 * of pv_accumulate. */
static void pv4_cols16(float *const acc[4], const float *const w[4], const float *v, int n,
                       int hd, int c)
{
    __m256 a00 = _mm256_loadu_ps(acc[0] + c), a01 = _mm256_loadu_ps(acc[0] + c + 8);
    __m256 a10 = _mm256_loadu_ps(acc[1] + c), a11 = _mm256_loadu_ps(acc[1] + c + 8);
    __m256 a20 = _mm256_loadu_ps(acc[2] + c), a21 = _mm256_loadu_ps(acc[2] + c + 8);
    __m256 a30 = _mm256_loadu_ps(acc[3] + c), a31 = _mm256_loadu_ps(acc[3] + c + 8);
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    for (int p = 0; p < n; p++) {
        const float *vr = v + (size_t)p * hd + c;
        __m256 v0 = _mm256_loadu_ps(vr), v1 = _mm256_loadu_ps(vr + 8);
        IN_REG(v0);
        IN_REG(v1);
        __m256 wv = _mm256_broadcast_ss(w0 + p);
        a00 = _mm256_add_ps(a00, _mm256_mul_ps(wv, v0));
        a01 = _mm256_add_ps(a01, _mm256_mul_ps(wv, v1));
        wv = _mm256_broadcast_ss(w1 + p);
        a10 = _mm256_add_ps(a10, _mm256_mul_ps(wv, v0));
        a11 = _mm256_add_ps(a11, _mm256_mul_ps(wv, v1));
        wv = _mm256_broadcast_ss(w2 + p);
        a20 = _mm256_add_ps(a20, _mm256_mul_ps(wv, v0));
        a21 = _mm256_add_ps(a21, _mm256_mul_ps(wv, v1));
        wv = _mm256_broadcast_ss(w3 + p);
        a30 = _mm256_add_ps(a30, _mm256_mul_ps(wv, v0));
        a31 = _mm256_add_ps(a31, _mm256_mul_ps(wv, v1));
    }
    _mm256_storeu_ps(acc[0] + c, a00);
    _mm256_storeu_ps(acc[0] + c + 8, a01);
    _mm256_storeu_ps(acc[1] + c, a10);
    _mm256_storeu_ps(acc[1] + c + 8, a11);
    _mm256_storeu_ps(acc[2] + c, a20);
    _mm256_storeu_ps(acc[2] + c + 8, a21);
    _mm256_storeu_ps(acc[3] + c, a30);
    _mm256_storeu_ps(acc[3] + c + 8, a31);
}

/* The table's weighted sums of cnt row-heads: four at once where they fill a group and the
 * value tile outgrows L1 (head_dim >= 128), else one at a time. */
static void pv_rows(float *const acc[], const float *const w[], int cnt, const float *v, int n,
                    int hd)
{
    if (cnt == 4 && hd >= 128 && hd % 16 == 0) {
        for (int c = 0; c < hd; c += 16)
            pv4_cols16(acc, w, v, n, hd, c);
        return;
    }
    for (int k = 0; k < cnt; k++)
        pv_accumulate(acc[k], w[k], v, n, hd);
}

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
        const nb_kernel_table *kt_ = nb_kernels_active();                                       \
        attn_scores4_fn sc4 = kt_->attn_scores4 ? kt_->attn_scores4 : scores4;                  \
        attn_pv_fn pv = kt_->attn_pv ? kt_->attn_pv : pv_rows;                                  \
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
        /* pass 1: scores (K tile rows -> fp32 in vt, transposed into kt) */                  \
        for (int p0 = 0; p0 < ctx; p0 += TK) {                                                  \
            int pn = ctx - p0 < TK ? ctx - p0 : TK, pn16 = (pn + 15) & ~15;                     \
            for (int p = 0; p < pn16; p++) {                                                    \
                float *dst = S.vt + (size_t)p * hd;                                             \
                const T *kr = kbase + (size_t)(p0 + p) * kvdim;                                 \
                int t = 0;                                                                      \
                if (p < pn) {                                                                   \
                    for (; t + 8 <= hd; t += 8)                                                 \
                        _mm256_storeu_ps(dst + t, LD8(kr + t));                                 \
                    for (; t < hd; t++)                                                         \
                        dst[t] = LD1(kr[t]);                                                    \
                } else {                                                                        \
                    memset(dst, 0, sizeof(float) * (size_t)hd);                                 \
                }                                                                               \
            }                                                                                   \
            transpose_tile(S.vt, pn16, hd, S.kt);                                               \
            for (int rh0 = 0; rh0 < nrh; rh0 += 4) {                                            \
                int rc = nrh - rh0 < 4 ? nrh - rh0 : 4;                                         \
                /* rows grow with rh: the group's last row sees the most keys */                \
                int len = a->pos0 + i0 + (rh0 + rc - 1) / nh + 1;                               \
                if (len <= p0)                                                                  \
                    continue;                                                                   \
                int lim = len - p0 < pn16 ? len - p0 : pn16;                                    \
                const float *qs[4];                                                             \
                float *out4[4];                                                                 \
                for (int k = 0; k < 4; k++) {                                                   \
                    int rh = rh0 + (k < rc ? k : rc - 1);                                       \
                    qs[k] = S.qf + (size_t)rh * hd;                                             \
                    out4[k] = S.s + (size_t)rh * ctxp + p0;                                     \
                }                                                                               \
                sc4(S.kt, qs, lim, hd, scale, out4);                                            \
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
            /* the heads of one query row see the same keys: up to 4 share each value row */ \
            for (int rh = 0, cnt; rh < nrh; rh += cnt) {                                        \
                for (cnt = 1; cnt < 4 && rh + cnt < nrh && (rh + cnt) / nh == rh / nh; cnt++)   \
                    ;                                                                           \
                int len = a->pos0 + i0 + rh / nh + 1;                                           \
                if (len <= p0)                                                                  \
                    continue;                                                                   \
                int lim = len - p0 < pn ? len - p0 : pn;                                        \
                float *accs[4];                                                                 \
                const float *ws[4];                                                             \
                for (int k = 0; k < cnt; k++) {                                                 \
                    accs[k] = S.acc + (size_t)(rh + k) * hd;                                    \
                    ws[k] = S.s + (size_t)(rh + k) * ctxp + p0;                                 \
                }                                                                               \
                pv(accs, ws, cnt, S.vt, lim, hd);                                               \
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

/* acc[t] += w[p] * v[p][t] for p = 0..n-1 in order (v rows of hd). A head of a multiple of 64
 * (Gemma's 256) goes 64 columns at a time with the 8 accumulators in registers: each acc[t]
 * still takes p in order, and the generic loop's load and store of acc per key are gone. */
static void pv_accumulate(float *acc0, const float *w, const float *v, int n, int hd)
{
    for (int c = 0; hd % 64 == 0 && c < hd; c += 64) {
        float *acc = acc0 + c;
        __m256 a0 = _mm256_loadu_ps(acc), a1 = _mm256_loadu_ps(acc + 8);
        __m256 a2 = _mm256_loadu_ps(acc + 16), a3 = _mm256_loadu_ps(acc + 24);
        __m256 a4 = _mm256_loadu_ps(acc + 32), a5 = _mm256_loadu_ps(acc + 40);
        __m256 a6 = _mm256_loadu_ps(acc + 48), a7 = _mm256_loadu_ps(acc + 56);
        for (int p = 0; p < n; p++) {
            __m256 wv = _mm256_broadcast_ss(w + p);
            const float *vr = v + (size_t)p * hd + c;
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
    }
    if (hd % 64 == 0)
        return;
    float *acc = acc0;
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
    .rope_bf16 = avx2_rope_bf16,
    .attention_bf16 = avx2_attention_bf16,
    .attention_f32 = avx2_attention_f32,
};
