/* nb_avx2_kquant: AVX2 kernels for Q5_0, Q4_K and Q6_K weights against Q8 activations, 8 PACK8
 * rows at a time; compiled with the AVX2 flags alone and reached only through dispatch. */
#include <immintrin.h>
#include <string.h>

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

/* Each kernel is nb_kquant.c's definition bit for bit, 8 rows in the 8 lanes of a vector: the
 * exact integer of each row's block from maddubs pair sums and madd (or vpdpbusd in
 * nb_avx512_kquant.c), then acc += float(I) * (d_w * d_x) once for the 8 rows, no FMA. maddubs
 * wants an unsigned first operand: the quants go in as they are (0..31, 0..15, 0..63) and the
 * offset of Q5_0 and Q6_K (16, 32) times the x sums, shared by the rows, comes off in int32.
 * Prefill runs the same kernels, one activation row at a time (nb_avx2.c). */

/* ---- Q5_0: block = the 8 rows' d, their fifth bits, then 4 chunks of quant bytes -------- */

/* Rows in lanes (PACK8 chunks Q5_0 so, nb_kernels.c): per block d0..d7, the 8 rows' fifth bits,
 * then 4 chunks of quant bytes. Chunk k against the broadcast x quants of its weights gives pair
 * sums (|pair| <= 2 * 31 * 127, two chunks' sum fits int16); madd makes each lane its row's
 * sum of q x over the block, less 16 sum x (shared by the rows) the exact integer of dot_q5_0
 * (nb_kquant.c), whose float steps then run once for 8 rows. */
static inline __m256i q5_0_pairs(const uint8_t *q, __m256i h, const int8_t *xb, int k)
{
    __m256i lo, hi;
    nb_q5_0_chunk(q, h, k, &lo, &hi);
    int32_t xl, xh;
    memcpy(&xl, xb + 4 * k, 4);
    memcpy(&xh, xb + 16 + 4 * k, 4);
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(xl)),
                            _mm256_maddubs_epi16(hi, _mm256_set1_epi32(xh)));
}

void nb_avx2_q5_0_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *p = grp;
    for (int b = 0; b < K / 32; b++, p += 8 * NB_QUANT_Q5_0_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q5_0_BYTES);
        const int8_t *xb = x->q + b * 32;
        __m256i h = _mm256_loadu_si256((const __m256i *)(p + 16));
        const uint8_t *q = p + 16 + 32;
        __m256i s01 = _mm256_add_epi16(q5_0_pairs(q, h, xb, 0), q5_0_pairs(q, h, xb, 1));
        __m256i s23 = _mm256_add_epi16(q5_0_pairs(q, h, xb, 2), q5_0_pairs(q, h, xb, 3));
        __m256i is = _mm256_add_epi32(_mm256_madd_epi16(s01, ones), _mm256_madd_epi16(s23, ones));
        is = _mm256_sub_epi32(is, nb_x16_sum(xb, x->hs ? x->hs + b : NULL));
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        __m256 dd = _mm256_mul_ps(dw, _mm256_broadcast_ss(x->d + b));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), dd));
    }
    _mm256_storeu_ps(out, acc);
}

/* Prefill: the same function for 4 activation rows at once, each chunk's quants made once for
 * the 4 (nb_q5_0_chunk is most of the single-row kernel's work); each row's steps and order are
 * nb_avx2_q5_0_gemv8's, so each row's bits are too. */
void nb_avx2_q5_0_gemv8x4(const nb_q8_act x[4], const uint8_t *grp, int K, float out[4][8])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int r = 0; r < 4; r++)
        acc[r] = _mm256_setzero_ps();
    const uint8_t *p = grp;
    for (int b = 0; b < K / 32; b++, p += 8 * NB_QUANT_Q5_0_BYTES) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(p + 16));
        const uint8_t *q = p + 16 + 32;
        __m256i s[2][4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i lo, hi;
            nb_q5_0_chunk(q, h, k, &lo, &hi);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const int8_t *xb = x[r].q + b * 32;
                int32_t xl, xh;
                memcpy(&xl, xb + 4 * k, 4);
                memcpy(&xh, xb + 16 + 4 * k, 4);
                __m256i c = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(xl)),
                                             _mm256_maddubs_epi16(hi, _mm256_set1_epi32(xh)));
                s[k / 2][r] = k & 1 ? _mm256_add_epi16(s[k / 2][r], c) : c;
            }
        }
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m256i is = _mm256_add_epi32(_mm256_madd_epi16(s[0][r], ones),
                                          _mm256_madd_epi16(s[1][r], ones));
            is = _mm256_sub_epi32(is, nb_x16_sum(x[r].q + b * 32, x[r].hs ? x[r].hs + b : NULL));
            __m256 dd = _mm256_mul_ps(dw, _mm256_broadcast_ss(x[r].d + b));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(_mm256_cvtepi32_ps(is), dd));
        }
    }
    for (int r = 0; r < 4; r++)
        _mm256_storeu_ps(out[r], acc[r]);
}

/* ---- Q4_K: super-block = the 8 rows' d, dmin, scale words, then 32 chunks of quants -------- */

/* Rows in lanes (PACK8 chunks Q4_K so, nb_kernels.c): per super-block d0..d7, dmin0..dmin7, the
 * rows' scale words (nb_q4_k_scales8), then 32 chunks of quant bytes; chunk 8c + i holds bytes
 * 32c + 4i.. of each row, whose low nibbles are weights 4i.. of sub-block 2c and high nibbles
 * those of 2c + 1. maddubs against the broadcast x quants gives pair sums (|pair| <= 2 * 15 *
 * 127, 8 chunks' sum fits int16), madd by the sub-block's scale in both words makes each lane its
 * row's exact sc[s] * sum q x (dot_q4_k, nb_kquant.c), whose float steps then run once for 8
 * rows: ~15 instructions per 8 rows x 32 weights besides the products, where the per-row lane
 * form took ~60. */
static inline __m256 q4_k_sub(__m256 acc, __m256i s16, __m256i sc, int j, __m256 dw, float xd)
{
    __m256i is = _mm256_madd_epi16(s16, nb_lane_byte(sc, j, 1));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is),
                                            _mm256_mul_ps(dw, _mm256_set1_ps(xd))));
}

void nb_avx2_q4_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
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
            __m256i lo = _mm256_setzero_si256(), hi = lo;
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 32 * (8 * c + i)));
                int32_t v0, v1;
                memcpy(&v0, x0 + 4 * i, 4);
                memcpy(&v1, x1 + 4 * i, 4);
                lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(_mm256_and_si256(raw, m4),
                                                               _mm256_set1_epi32(v0)));
                hi = _mm256_add_epi16(
                    hi, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                                             _mm256_set1_epi32(v1)));
                nb_keep_chain(&lo, &hi);
            }
            /* sub-blocks 2c and 2c + 1: scale / min byte (2c) % 4 of word (2c) / 4 */
            acc = q4_k_sub(acc, lo, sc[c / 2], 2 * (c & 1), dw, x->d[b]);
            mt = nb_q4_k_min(mt, m[c / 2], 2 * (c & 1), dmin, x->s[b]);
            acc = q4_k_sub(acc, hi, sc[c / 2], 2 * (c & 1) + 1, dw, x->d[b + 1]);
            mt = nb_q4_k_min(mt, m[c / 2], 2 * (c & 1) + 1, dmin, x->s[b + 1]);
        }
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(acc, mt));
}

/* ---- Q6_K: super-block = the 8 rows' d, then chunks of ql, qh and scales --------------------
 * Rows in lanes (PACK8 chunks Q6_K so, d moved first, quants re-coded: nb_kernels.c): half h of
 * the super-block (groups 4h..4h+3) reads chunks 16h + i, 16h + 8 + i and 32 + 8h + i, i < 8 the
 * 4-weight chunk, and makes all four groups' 6-bit quants from them (nb_q6_k_w4).
 * maddubs against the broadcast x quants gives pair sums (|pair| <= 2 * 63 * 127, two chunks' sum
 * fits int16), madd by the scale of the chunk's 16 weights sums them in int32, and 32 * (sc[2g] *
 * sum x[0..15] + sc[2g+1] * sum x[16..31]) (one madd, shared by the rows) comes off: the exact I
 * of dot_q6_k (nb_kquant.c), whose float steps then run once per group for 8 rows. */

/* 32 * (sc[2g] * sum x[0..15] + sc[2g+1] * sum x[16..31]) of each row: what the - 32 takes off. */
static inline __m256i q6_k_bias(const int8_t *xb, const int32_t *hs, __m256i scw, int g)
{
    int j = 2 * (g & 1);
    return _mm256_slli_epi32(
        _mm256_madd_epi16(nb_x_half_sums16(xb, hs), nb_lane_i8_pair16(scw, j, j + 1)), 5);
}

/* Groups k0, k0 + 1 of half h (sums I[2]) over the 8 chunks: two passes per half (groups 0-1,
 * then 2-3) keep the live vectors within the 16 ymm registers (one pass spilled); the second
 * pass reads chunks the first read, from L1. */
static inline void q6_k_pair(const uint8_t *p, int h, int k0, const int8_t *xh, __m256i scw0,
                             __m256i scw1, __m256i I[2])
{
    for (int k = 0; k < 2; k++)
        I[k] = _mm256_setzero_si256();
    /* p laundered: the compiler would keep the first pass's chunks for the second, in 16 ymm
     * registers a spill each, where the second pass's loads hit L1 */
    __asm__("" : "+r"(p));
#pragma GCC unroll 4
    for (int ip = 0; ip < 4; ip++) {
        __m256i t[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 2
        for (int i = 2 * ip; i < 2 * ip + 2; i++) {
            __m256i w[2];
            nb_q6_k_w2(p, h, i, k0, w);
#pragma GCC unroll 2
            for (int k = 0; k < 2; k++) {
                int32_t v;
                memcpy(&v, xh + 32 * (k0 + k) + 4 * i, 4);
                t[k] = _mm256_add_epi16(t[k], _mm256_maddubs_epi16(w[k], _mm256_set1_epi32(v)));
            }
            nb_keep_chain(&t[0], &t[1]);
        }
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) { /* weights 0..15 take sc[2g], 16..31 sc[2g+1] */
            int g = 4 * h + k0 + k, j = 2 * (g & 1) + (ip >= 2);
            I[k] = _mm256_add_epi32(
                I[k], _mm256_madd_epi16(t[k], nb_lane_i8_pair16(g / 2 & 1 ? scw1 : scw0, j, j)));
        }
        nb_keep_chain(&I[0], &I[1]);
    }
}

void nb_avx2_q6_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *p = grp;
    for (int S = 0; S < K / NB_QUANT_QK_K; S++, p += 8 * NB_QUANT_Q6_K_BYTES) {
        if (!x->warm)
            nb_prefetch_ahead(p, 8 * NB_QUANT_Q6_K_BYTES);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        for (int h = 0; h < 2; h++) {
            const int8_t *xh = x->q + (size_t)(8 * S + 4 * h) * 32;
            /* the scale words of groups 4h..4h+3: chunks 2h, 2h + 1 */
            __m256i scw0 = _mm256_loadu_si256((const __m256i *)(p + NB_Q6K_SC + 64 * h));
            __m256i scw1 = _mm256_loadu_si256((const __m256i *)(p + NB_Q6K_SC + 64 * h + 32));
#pragma GCC unroll 2
            for (int k0 = 0; k0 < 4; k0 += 2) {
                __m256i I[2];
                q6_k_pair(p, h, k0, xh, scw0, scw1, I);
#pragma GCC unroll 2
                for (int k = 0; k < 2; k++) {
                    int g = 4 * h + k0 + k;
                    __m256i is = _mm256_sub_epi32(
                        I[k], q6_k_bias(xh + 32 * (k0 + k), x->hs ? x->hs + 8 * S + g : NULL,
                                        g / 2 & 1 ? scw1 : scw0, g));
                    __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(x->d[8 * S + g]));
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), dd));
                }
            }
        }
    }
    _mm256_storeu_ps(out, acc);
}
