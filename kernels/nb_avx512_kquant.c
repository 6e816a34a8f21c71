/* nb_avx512_kquant: quantized-weight kernels on AVX-512 VNNI: the rows-in-lanes decode kernels of
 * Q4_1, Q5_0, Q4_K and Q6_K (ymm vpdpbusd for the AVX2 maddubs + add + madd), Q8_0's per-row
 * kernel (Gemma's LM head, two weight rows per zmm) and Q8_0's prefill GEMM (weight rows x
 * activation-row pairs in registers; at the end).
 *
 * Numerics: each kernel is its AVX2 twin's function, bit for bit (nb_kquant.c and nb_portable.c
 * define them). vpdpbusd wants an unsigned first operand: quants go in as they are (0..63), Q8_0's
 * signed weights as w + 128 (w xor 0x80), and the offset times the x sums, shared by the rows,
 * comes off again in int32: the exact integers of the AVX2 kernels, then their float steps in
 * their order (multiply, then add; no FMA).
 *
 * Built a second time by tests/kernels_emu.c with NB_AVX512_KQ_EMULATE over emulated intrinsics
 * (AVX2 flags), so hosts without VNNI test this tiling too. */
#ifndef NB_AVX512_KQ_EMULATE
#if !defined(__AVX512F__) || !defined(__AVX512VNNI__)
#error "nb_avx512_kquant.c needs -mavx512f -mavx512vnni (CMakeLists.txt)"
#endif
#include <immintrin.h>
#define NB_AVX512_Q8_0_GEMV8 nb_avx512_q8_0_gemv8
#define NB_AVX512_Q4_1_GEMV8 nb_avx512_q4_1_gemv8
#define NB_AVX512_Q5_0_GEMV8 nb_avx512_q5_0_gemv8
#define NB_AVX512_Q4_K_GEMV8 nb_avx512_q4_k_gemv8
#define NB_AVX512_Q6_K_GEMV8 nb_avx512_q6_k_gemv8
#define NB_AVX512_KQ_GEMM nb_avx512_kq_gemm
#else
#define NB_AVX512_Q8_0_GEMV8 nb_avx512_emu_q8_0_gemv8
#define NB_AVX512_Q4_1_GEMV8 nb_avx512_emu_q4_1_gemv8
#define NB_AVX512_Q5_0_GEMV8 nb_avx512_emu_q5_0_gemv8
#define NB_AVX512_Q4_K_GEMV8 nb_avx512_emu_q4_k_gemv8
#define NB_AVX512_Q6_K_GEMV8 nb_avx512_emu_q6_k_gemv8
#define NB_AVX512_KQ_GEMM nb_avx512_emu_kq_gemm
#endif

#include <string.h>

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

void NB_AVX512_Q8_0_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void NB_AVX512_Q4_1_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void NB_AVX512_Q5_0_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void NB_AVX512_Q4_K_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void NB_AVX512_Q6_K_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);

/* Lanes 0-7 of a zmm of d = d_w * d_x take row 2p's d, lanes 8-15 row 2p+1's. */
static const int32_t pair_idx[4][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
};

/* Rows 2p and 2p+1's lane sums of one block, I = sum w * x over each 4 weights, from 64 bytes of
 * signed weights (row 2p's 32, then row 2p+1's) and x's 32 quants in both halves. */
static inline __m512i pair_sums(const void *w, __m512i xq, __m512i x128)
{
    __m512i wu = _mm512_xor_si512(_mm512_loadu_si512(w), _mm512_set1_epi8((char)0x80));
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wu, xq), x128);
}

/* x's 32 quants of block b in both halves, and 128 * each lane's sum of 4 (the bias's part). */
static inline __m512i block_x(const nb_q8_act *x, int b, __m512i *x128)
{
    __m512i xq = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->q + b * 32)));
    *x128 = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), xq),
                              7);
    return xq;
}

/* The 8 rows' lanes, reduced per row by the AVX2 kernels' tree. */
static inline __m256 reduce_pairs(const __m512 acc[4])
{
    float a[4][16];
    for (int p = 0; p < 4; p++)
        _mm512_storeu_ps(a[p], acc[p]);
    return nb_reduce8(_mm256_loadu_ps(a[0]), _mm256_loadu_ps(a[0] + 8), _mm256_loadu_ps(a[1]),
                      _mm256_loadu_ps(a[1] + 8), _mm256_loadu_ps(a[2]), _mm256_loadu_ps(a[2] + 8),
                      _mm256_loadu_ps(a[3]), _mm256_loadu_ps(a[3] + 8));
}

/* Decode's Q4_1 (PACK8 in 4-byte chunks, nb_kernels.c): nb_avx2_q4_1_gemv8 bit for bit, with
 * vpdpbusd (unsigned nibbles times signed x quants, 4 products into each row's int32 lane) in
 * place of maddubs + add + madd: the integer block dot is exact either way. Two sums, low and
 * high nibbles, so consecutive vpdpbusd do not wait on each other. */
/* vpdpbusd of quant bytes 4k..4k+3 of the 8 rows (32 bytes at q), low nibbles against
 * x[4k..4k+3] into lo, high nibbles left in place (16 x their value: no shift) against
 * x[16+4k..] into hi, which the caller divides by 16 (exact: |hi| <= 16 * 15 * 127 * 16). */
static inline void q4_1_dots(const uint8_t *q, const int8_t *xb, int k, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
    int32_t xl, xh;
    memcpy(&xl, xb + 4 * k, 4);
    memcpy(&xh, xb + 16 + 4 * k, 4);
    *lo = _mm256_dpbusd_epi32(*lo, _mm256_and_si256(raw, m4), _mm256_set1_epi32(xl));
    *hi = _mm256_dpbusd_epi32(*hi, _mm256_andnot_si256(m4, raw), _mm256_set1_epi32(xh));
}

void NB_AVX512_Q4_1_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    __m256 acc = _mm256_setzero_ps(), mt = acc;
    const uint8_t *p = grp;
    for (int b = 0; b < K / 32; b++, p += 8 * NB_QUANT_Q4_1_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q4_1_BYTES);
        const int8_t *xb = x->q + b * 32;
        const uint8_t *q = p + 8 * NB_QUANT_Q4_1_QS;
        __m256i lo = _mm256_setzero_si256(), hi = lo, lo2 = lo, hi2 = lo;
        q4_1_dots(q, xb, 0, &lo, &hi);
        q4_1_dots(q, xb, 1, &lo2, &hi2);
        q4_1_dots(q, xb, 2, &lo, &hi);
        q4_1_dots(q, xb, 3, &lo2, &hi2);
        lo = _mm256_add_epi32(lo, lo2);
        hi = _mm256_srai_epi32(_mm256_add_epi32(hi, hi2), 4);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
        __m256 dd = _mm256_mul_ps(dw, _mm256_broadcast_ss(x->d + b));
        __m256 is = _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(is, dd));
        mt = _mm256_add_ps(mt, _mm256_mul_ps(mw, _mm256_broadcast_ss(x->s + b)));
    }
    _mm256_storeu_ps(out, _mm256_add_ps(acc, mt));
}

/* Decode's Q5_0 (PACK8, rows in lanes, nb_kernels.c): nb_avx2_q5_0_gemv8 bit for bit, vpdpbusd
 * (the 5-bit quants unsigned, x signed) in place of maddubs + add + madd; four sums, so
 * consecutive vpdpbusd do not wait on each other. */
void NB_AVX512_Q5_0_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *p = grp;
    for (int b = 0; b < K / 32; b++, p += 8 * NB_QUANT_Q5_0_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q5_0_BYTES);
        const int8_t *xb = x->q + b * 32;
        __m256i h = _mm256_loadu_si256((const __m256i *)(p + 16));
        const uint8_t *q = p + 16 + 32;
        __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i lo, hi;
            nb_q5_0_chunk(q, h, k, &lo, &hi);
            int32_t xl, xh;
            memcpy(&xl, xb + 4 * k, 4);
            memcpy(&xh, xb + 16 + 4 * k, 4);
            s[2 * (k & 1)] = _mm256_dpbusd_epi32(s[2 * (k & 1)], lo, _mm256_set1_epi32(xl));
            s[2 * (k & 1) + 1] = _mm256_dpbusd_epi32(s[2 * (k & 1) + 1], hi, _mm256_set1_epi32(xh));
        }
        __m256i is = _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]));
        is = _mm256_sub_epi32(is, nb_x16_sum(xb, x->hs ? x->hs + b : NULL));
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        __m256 dd = _mm256_mul_ps(dw, _mm256_broadcast_ss(x->d + b));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), dd));
    }
    _mm256_storeu_ps(out, acc);
}

/* Decode's Q4_K (PACK8, rows in lanes, nb_kernels.c): nb_avx2_q4_k_gemv8 bit for bit, vpdpbusd
 * (nibbles unsigned, x signed) in place of maddubs + add, mullo by the scale in place of madd
 * (the same exact integer); two sums per sub-block, so consecutive vpdpbusd do not wait. */
void NB_AVX512_Q4_K_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps(), mt = acc;
    const uint8_t *p = grp;
    for (int S = 0; S < K / NB_QUANT_QK_K; S++, p += 8 * NB_QUANT_Q4_K_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q4_K_BYTES);
        __m256 dw, dmin;
        __m256i sc[2], m[2];
        nb_q4_k_head(p, &dw, &dmin, sc, m);
        const uint8_t *q = p + 128;
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            int b = 8 * S + 2 * c;
            const int8_t *x0 = x->q + (size_t)b * 32, *x1 = x0 + 32;
            __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            __m256i hi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 32 * (8 * c + i)));
                int32_t v0, v1;
                memcpy(&v0, x0 + 4 * i, 4);
                memcpy(&v1, x1 + 4 * i, 4);
                lo[i & 1] = _mm256_dpbusd_epi32(lo[i & 1], _mm256_and_si256(raw, m4),
                                                _mm256_set1_epi32(v0));
                hi[i & 1] = _mm256_dpbusd_epi32(
                    hi[i & 1], _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                    _mm256_set1_epi32(v1));
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                int j = 2 * (c & 1) + h; /* the sub-block's byte in its scale / min word */
                __m256i is = _mm256_mullo_epi32(_mm256_add_epi32(h ? hi[0] : lo[0], h ? hi[1] : lo[1]),
                                                nb_lane_byte(sc[c / 2], j, 0));
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is),
                                                       _mm256_mul_ps(dw, _mm256_set1_ps(x->d[b + h]))));
                mt = nb_q4_k_min(mt, m[c / 2], j, dmin, x->s[b + h]);
            }
        }
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(acc, mt));
}

/* Decode's Q6_K (PACK8, rows in lanes, quants re-coded: nb_kernels.c): nb_avx2_q6_k_gemv8 bit for
 * bit, vpdpbusd (6-bit quants unsigned, x signed) in place of maddubs + add + madd, per group one
 * int32 sum for weights 0..15 and one for 16..31, each times its scale by mullo; the - 32 as
 * there. */

/* Groups k0, k0 + 1 of half h over the 8 chunks, as nb_avx2_kquant.c's q6_k_pair: two passes per
 * half (groups 0-1, then 2-3); one pass over all four groups ran at two thirds of the AVX2
 * kernel's speed on Zen 5. s[k][0] sums weights 0..15 of group k0 + k, s[k][1] 16..31. */
static inline void q6_k_pair(const uint8_t *p, int h, int k0, const int8_t *xh, __m256i s[2][2])
{
    for (int k = 0; k < 2; k++)
        s[k][0] = s[k][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        __m256i w[2];
        nb_q6_k_w2(p, h, i, k0, w);
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) {
            int32_t v;
            memcpy(&v, xh + 32 * (k0 + k) + 4 * i, 4);
            s[k][i >= 4] = _mm256_dpbusd_epi32(s[k][i >= 4], w[k], _mm256_set1_epi32(v));
        }
    }
}

void NB_AVX512_Q6_K_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *p = grp;
    for (int S = 0; S < K / NB_QUANT_QK_K; S++, p += 8 * NB_QUANT_Q6_K_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q6_K_BYTES);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        for (int h = 0; h < 2; h++) {
            const int8_t *xh = x->q + (size_t)(8 * S + 4 * h) * 32;
#pragma GCC unroll 2
            for (int k0 = 0; k0 < 4; k0 += 2) {
                __m256i s[2][2];
                q6_k_pair(p, h, k0, xh, s);
#pragma GCC unroll 2
                for (int k = 0; k < 2; k++) {
                    int g = 4 * h + k0 + k, j = 2 * (g & 1);
                    __m256i scw = _mm256_loadu_si256((const __m256i *)(p + NB_Q6K_SC + 32 * (g / 2)));
                    __m256i is = _mm256_add_epi32(
                        _mm256_mullo_epi32(s[k][0], nb_lane_i8_32(scw, j)),
                        _mm256_mullo_epi32(s[k][1], nb_lane_i8_32(scw, j + 1)));
                    /* 32 * (sc[2g] * sum x[0..15] + sc[2g+1] * sum x[16..31]) */
                    is = _mm256_sub_epi32(
                        is, _mm256_slli_epi32(
                                _mm256_madd_epi16(nb_x_half_sums16(xh + 32 * (k0 + k), x->hs ? x->hs + 8 * S + g : NULL),
                                                  nb_lane_i8_pair16(scw, j, j + 1)),
                                5));
                    __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(x->d[8 * S + g]));
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), dd));
                }
            }
        }
    }
    _mm256_storeu_ps(out, acc);
}

/* Decode's Q8_0 (PACK8: per block the 8 rows' fp16 d, then their 32 quants each): the AVX2
 * gemv8_q8_0 bit for bit. Its lane sums are plain (no scale), and it adds a zero vector at the
 * end, which turns a -0 row into +0: done here too. */
void NB_AVX512_Q8_0_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    enum { SB = NB_QUANT_Q8_0_QS, QB = NB_QUANT_QK };
    __m512i idx[4];
    __m512 acc[4];
    for (int p = 0; p < 4; p++) {
        idx[p] = _mm512_loadu_si512(pair_idx[p]);
        acc[p] = _mm512_setzero_ps();
    }
    const uint8_t *g = grp;
    for (int b = 0; b < K / 32; b++, g += 8 * (SB + QB)) {
        if (!x->warm)
            nb_prefetch_ahead(g, 8 * NB_QUANT_Q8_0_BYTES);
        __m512 dd = _mm512_castps256_ps512(
            _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g)),
                          _mm256_set1_ps(x->d[b])));
        __m512i x128, xq = block_x(x, b, &x128);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++)
            acc[p] = _mm512_add_ps(acc[p],
                                   _mm512_mul_ps(_mm512_cvtepi32_ps(pair_sums(g + 8 * SB + 2 * QB * p,
                                                                              xq, x128)),
                                                 _mm512_permutexvar_ps(idx[p], dd)));
    }
    _mm256_storeu_ps(out, _mm256_add_ps(reduce_pairs(acc), _mm256_setzero_ps()));
}

/* ---- prefill GEMM of Q8_0: 8 weight rows x 4 activation rows in registers -----------------
 * The kernel above meets one activation row at a time: per 2 rows and 32 weights it spends
 * about 8 instructions (bias xor and subtraction, permute of d, ...). Here a zmm holds one
 * weight row against two activation rows (lanes 0-7 the 8 four-weight lanes of row i, 8-15 of
 * row i+1), and everything that depends on one side only is prepared once for that side:
 *   - weights as unsigned codes w + 128, so vpdpbusd takes them as they are and x stays signed;
 *     128 times each lane's sum(x) comes off through the accumulator's start value,
 *     -sum4(x) << 7, made per activation pair record and shared by the 8 rows;
 *   - d_x of both rows as a vector, so d_w * d_x is one multiply by a broadcast d_w.
 * Per row, activation pair and 32-block: vpdpbusd, convert, d multiply, multiply, add: 5
 * instructions for 64 products. The lane arithmetic and order are the per-row kernel's (lane +=
 * float(I) * (d_w * d_x), blocks in order, the rows' lanes reduced by nb_reduce8, the trailing
 * + 0), so the outputs are its bit for bit. (Q4_1, Q5_0, Q4_K and Q6_K sum blocks whole, rows
 * in lanes: their prefill is their decode kernel, one activation row at a time.) */

enum {
    REC = 192, /* an activation pair record: 64 quants, 16 x -sum4(x), 16 x d_x */
    GB = 288,  /* an expanded block of 8 rows: 8 x 32 codes, 8 d_w */
    GB_DW = 256,
};

static size_t gemm_pairs_bytes(int n, int K)
{
    return (size_t)((n + 1) / 2) * (size_t)(K / 32) * REC;
}

static void gemm_pairs(const int8_t *xq, const float *xd, int n, int K, uint8_t *dst)
{
    int nb = K / 32;
    for (int p = 0; p < (n + 1) / 2; p++) {
        int i0 = 2 * p, i1 = 2 * p + 1 < n ? 2 * p + 1 : 2 * p; /* an odd last row pairs itself */
        for (int b = 0; b < nb; b++) {
            uint8_t *rec = dst + ((size_t)p * nb + b) * REC;
            memcpy(rec, xq + (size_t)i0 * K + 32 * b, 32);
            memcpy(rec + 32, xq + (size_t)i1 * K + 32 * b, 32);
            __m512i s4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1),
                                             _mm512_loadu_si512(rec));
            _mm512_storeu_si512(rec + 64, _mm512_sub_epi32(_mm512_setzero_si512(), s4));
            float dx[16];
            for (int l = 0; l < 8; l++) {
                dx[l] = xd[(size_t)i0 * nb + b];
                dx[8 + l] = xd[(size_t)i1 * nb + b];
            }
            memcpy(rec + 128, dx, sizeof dx);
        }
    }
}

static size_t gemm_bytes(nb_wtype t, int K)
{
    (void)t; /* Q8_0 */
    return (size_t)(K / 32) * GB;
}

/* PACK8 block: the 8 rows' fp16 d, then their 32 quants each -> d_w as floats, codes w + 128. */
static void gemm_expand(nb_wtype t, const uint8_t *grp, int K, uint8_t *g)
{
    enum { SB = NB_QUANT_Q8_0_QS, QB = NB_QUANT_QK };
    (void)t;
    for (int b = 0; b < K / 32; b++) {
        const uint8_t *p = grp + (size_t)b * 8 * (SB + QB);
        uint8_t *blk = g + (size_t)b * GB;
        _mm256_storeu_ps((float *)(blk + GB_DW),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)));
        for (int r = 0; r < 8; r++)
            _mm256_storeu_si256(
                (__m256i *)(blk + 32 * r),
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + 8 * SB + QB * r)),
                                 _mm256_set1_epi8((char)0x80)));
    }
}

/* np (1 or 2, a constant after inlining) activation pairs from pr against the 8 rows of g:
 * out[2 * np][8]. */
static inline __attribute__((always_inline)) void gemm_tile(const uint8_t *g, int nb,
                                                            const uint8_t *pr, int np, float *out)
{
    __m512 acc[2][8];
    for (int p = 0; p < np; p++)
        for (int r = 0; r < 8; r++)
            acc[p][r] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * GB;
        __m512i xp[2], init[2];
        __m512 dx[2];
        for (int p = 0; p < np; p++) {
            const uint8_t *rec = pr + ((size_t)p * nb + b) * REC;
            xp[p] = _mm512_loadu_si512(rec);
            init[p] = _mm512_slli_epi32(_mm512_loadu_si512(rec + 64), 7);
            dx[p] = _mm512_loadu_ps((const float *)(rec + 128));
        }
        const float *dw = (const float *)(blk + GB_DW);
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            __m512i u =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 32 * r)));
            __m512 w = _mm512_set1_ps(dw[r]);
            for (int p = 0; p < np; p++) {
                __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(init[p], u, xp[p]));
                acc[p][r] = _mm512_add_ps(acc[p][r], _mm512_mul_ps(f, _mm512_mul_ps(dx[p], w)));
            }
        }
    }
    for (int p = 0; p < np; p++) {
        float lanes[8][16];
        for (int r = 0; r < 8; r++)
            _mm512_storeu_ps(lanes[r], acc[p][r]);
        for (int h = 0; h < 2; h++)
            _mm256_storeu_ps(out + 8 * (2 * p + h),
                             nb_reduce8(_mm256_loadu_ps(lanes[0] + 8 * h),
                                        _mm256_loadu_ps(lanes[1] + 8 * h),
                                        _mm256_loadu_ps(lanes[2] + 8 * h),
                                        _mm256_loadu_ps(lanes[3] + 8 * h),
                                        _mm256_loadu_ps(lanes[4] + 8 * h),
                                        _mm256_loadu_ps(lanes[5] + 8 * h),
                                        _mm256_loadu_ps(lanes[6] + 8 * h),
                                        _mm256_loadu_ps(lanes[7] + 8 * h)));
    }
}

static void gemm_tile1(const uint8_t *g, int nb, const uint8_t *pr, float *out)
{
    gemm_tile(g, nb, pr, 1, out);
}
static void gemm_tile2(const uint8_t *g, int nb, const uint8_t *pr, float *out)
{
    gemm_tile(g, nb, pr, 2, out);
}

static void gemm(nb_wtype t, const uint8_t *g, int K, const uint8_t *pr, const float *xs, int n,
                 float *out)
{
    int nb = K / 32, np = (n + 1) / 2, p = 0;
    (void)t;
    (void)xs;
    for (; p + 2 <= np; p += 2)
        gemm_tile2(g, nb, pr + (size_t)p * nb * REC, out + 16 * p);
    if (p < np)
        gemm_tile1(g, nb, pr + (size_t)p * nb * REC, out + 16 * p);
    for (int i = 0; i < n; i++) /* as gemv8_q8_0: -0 becomes +0 */
        _mm256_storeu_ps(out + 8 * i, _mm256_add_ps(_mm256_loadu_ps(out + 8 * i),
                                                    _mm256_setzero_ps()));
}

const nb_kq_gemm_ops NB_AVX512_KQ_GEMM = {gemm_pairs_bytes, gemm_pairs, gemm_bytes, gemm_expand,
                                          gemm};
