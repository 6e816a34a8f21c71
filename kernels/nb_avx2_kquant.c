/* nb_avx2_kquant: AVX2 kernels for Q5_0, Q4_K and Q6_K weights against Q8 activations, 8 PACK8
 * rows at a time; compiled with the AVX2 flags alone and reached only through dispatch. */
#include <immintrin.h>
#include <string.h>

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

/* Each kernel is nb_kquant.c's definition bit for bit: the integer lane sums come from
 * maddubs (32 products into 16 pair sums) and madd (pairs into the 8 four-weight lanes, times
 * the integer scale of each lane), then lane += float(I) * dd, the portable tree of the lanes
 * (nb_reduce8), no FMA. maddubs wants an unsigned first operand: signed weights go in as |w|
 * against x carrying w's sign. No pair sum saturates: |w| <= 32, |x| <= 127. */

static inline __m256 lane_add(__m256 acc, __m256i prod16, __m256i scale16, float dd)
{
    __m256i is = _mm256_madd_epi16(prod16, scale16);
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dd)));
}

static inline __m256i signed_prod(__m256i w, __m256i xq)
{
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w));
}

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
        const int8_t *xb = x->q + b * 32;
        __m256i h = _mm256_loadu_si256((const __m256i *)(p + 16));
        const uint8_t *q = p + 16 + 32;
        __m256i s01 = _mm256_add_epi16(q5_0_pairs(q, h, xb, 0), q5_0_pairs(q, h, xb, 1));
        __m256i s23 = _mm256_add_epi16(q5_0_pairs(q, h, xb, 2), q5_0_pairs(q, h, xb, 3));
        __m256i is = _mm256_add_epi32(_mm256_madd_epi16(s01, ones), _mm256_madd_epi16(s23, ones));
        is = _mm256_sub_epi32(is, nb_x16_sum(xb));
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        __m256 dd = _mm256_mul_ps(dw, _mm256_broadcast_ss(x->d + b));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), dd));
    }
    _mm256_storeu_ps(out, acc);
}

/* ---- Q4_K: super-block = d, dmin (8 rows' first), then scales and qs per row -------------- */

/* The 12 scale bytes as 8 scale bytes and 8 min bytes (nb_quant_q4_k_scales, four at a time in
 * 32-bit words: bits 6-7 of each byte of the first and second words become bits 4-5). */
static inline void q4_k_scales8(const uint8_t *s, uint64_t *sc, uint64_t *m)
{
    uint32_t w0, w1, w2;
    memcpy(&w0, s, 4);
    memcpy(&w1, s + 4, 4);
    memcpy(&w2, s + 8, 4);
    uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
    uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
    *sc = (w0 & 0x3f3f3f3fu) | (uint64_t)sc_hi << 32;
    *m = (w1 & 0x3f3f3f3fu) | (uint64_t)m_hi << 32;
}

static void gemv8_q4_k(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    enum { SB = NB_QUANT_Q4_K_SCALES, RB = NB_QUANT_Q4_K_BYTES - NB_QUANT_Q4_K_SCALES };
    __m256 acc[8], mt[8];
    for (int r = 0; r < 8; r++)
        acc[r] = mt[r] = _mm256_setzero_ps();
    float dd[8], dmin[8];
    int16_t sc[8][8];
    const uint8_t *p = grp;
    for (int S = 0; S < K / NB_QUANT_QK_K; S++, p += 8 * NB_QUANT_Q4_K_BYTES) {
        /* d0 dmin0 d1 dmin1 .. as 32-bit lanes -> d0..d7 | dmin0..dmin7 */
        __m256i raw = _mm256_loadu_si256((const __m256i *)p);
        __m256i dm = _mm256_packus_epi32(_mm256_and_si256(raw, _mm256_set1_epi32(0xffff)),
                                         _mm256_srli_epi32(raw, 16));
        dm = _mm256_permute4x64_epi64(dm, 0xd8);
        __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(dm));
        _mm256_storeu_ps(dmin, _mm256_cvtph_ps(_mm256_extracti128_si256(dm, 1)));
        const uint8_t *rows = p + 8 * SB;
        __m256 xs = _mm256_loadu_ps(x->s + 8 * S);
        for (int r = 0; r < 8; r++) {
            uint64_t s8, m8;
            q4_k_scales8(rows + r * RB, &s8, &m8);
            _mm_storeu_si128((__m128i *)sc[r], _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)s8)));
            /* lane s: (dmin * m[s]) * s_x[b], dmin * m exact */
            __m256 mv = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m8)));
            mt[r] = _mm256_add_ps(mt[r], _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(dmin[r]), mv), xs));
        }
        for (int s = 0; s < 8; s++) {
            int b = 8 * S + s;
            _mm256_storeu_ps(dd, _mm256_mul_ps(dw, _mm256_set1_ps(x->d[b])));
            __m256i xq = _mm256_loadu_si256((const __m256i *)(x->q + b * 32));
            const __m128i shift = _mm_cvtsi32_si128(4 * (s & 1));
            const uint8_t *qs = rows + (NB_QUANT_Q4_K_QS - SB) + 32 * (s / 2);
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(qs + r * RB));
                __m256i w = _mm256_and_si256(_mm256_srl_epi16(q, shift), _mm256_set1_epi8(15));
                acc[r] = lane_add(acc[r], _mm256_maddubs_epi16(w, xq),
                                  _mm256_set1_epi16(sc[r][s]), dd[r]);
            }
        }
    }
    __m256 t = nb_reduce8(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]);
    __m256 m = nb_reduce8(mt[0], mt[1], mt[2], mt[3], mt[4], mt[5], mt[6], mt[7]);
    _mm256_storeu_ps(out, _mm256_sub_ps(t, m));
}

/* ---- Q6_K: whole super-blocks per row, d at the end --------------------------------------- */

/* Row by row through each half super-block (4 groups of 32): the half's ql (2 x 32 bytes) and
 * qh (32 bytes) are loaded once and give all four groups' 6-bit quants with constant shifts.
 * Each row's accumulator still takes the groups in order, as the reference does. */
static void gemv8_q6_k(const nb_q8_act *x, const uint8_t *grp, int K, float out[8])
{
    enum { RB = NB_QUANT_Q6_K_BYTES };
    const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                                          3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30),
                  c32 = _mm256_set1_epi8(32);
    __m256 acc[8];
    for (int r = 0; r < 8; r++)
        acc[r] = _mm256_setzero_ps();
    float dd4[4][8];
    const uint8_t *p = grp;
    for (int S = 0; S < K / NB_QUANT_QK_K; S++, p += 8 * RB) {
        uint16_t h[8];
        for (int r = 0; r < 8; r++)
            memcpy(&h[r], p + r * RB + NB_QUANT_Q6_K_D, 2);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        for (int half = 0; half < 2; half++) {
            int b0 = 8 * S + 4 * half;
            for (int k = 0; k < 4; k++)
                _mm256_storeu_ps(dd4[k], _mm256_mul_ps(dw, _mm256_set1_ps(x->d[b0 + k])));
            const int8_t *xq = x->q + (size_t)b0 * 32;
            for (int r = 0; r < 8; r++) {
                const uint8_t *blk = p + r * RB;
                __m256i sc16 = _mm256_cvtepi8_epi16(
                    _mm_loadu_si128((const __m128i *)(blk + NB_QUANT_Q6_K_SCALES)));
                const uint8_t *ql = blk + NB_QUANT_Q6_K_QL + 64 * half;
                __m256i ql0 = _mm256_loadu_si256((const __m256i *)ql);
                __m256i ql1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
                __m256i qh = _mm256_loadu_si256(
                    (const __m256i *)(blk + NB_QUANT_Q6_K_QH + 32 * half));
                /* group k: low bits from ql0 / ql1 (low nibbles for k < 2, high for k >= 2),
                 * high bits (qh >> 2k) & 3, moved to bits 4-5 */
                __m256i w[4];
                w[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                                       _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
                w[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                       _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
                w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                       _mm256_and_si256(qh, m30));
                w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
                __m256 a = acc[r];
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    /* dword g of the row's scales is (sc[2g], sc[2g+1]): to every dword, then
                     * sc[2g] to the low 16 values' words, sc[2g+1] to the high ones' */
                    const __m256i gidx = _mm256_set1_epi32(4 * half + k);
                    __m256i s16 = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, gidx),
                                                      pick);
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + 32 * k));
                    a = lane_add(a, signed_prod(_mm256_sub_epi8(w[k], c32), xv), s16, dd4[k][r]);
                }
                acc[r] = a;
            }
        }
    }
    _mm256_storeu_ps(out, nb_reduce8(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6],
                                     acc[7]));
}

/* ---- prefill: a group expanded once, then met by many activation rows --------------------
 * Decoding the blocks costs the kernels above as much as the products. In prefill a group
 * meets hundreds of activation rows, so it is decoded once into scratch: per 32-block b, the
 * 8 rows' signed weights w (the integer the reference multiplies: q - 16, q, q - 32), the madd
 * scale vector of each row (the lane scales as 16-bit words) and d_w of each row; for Q4_K,
 * per super-block, each row's 8 lanes of dmin * m[s] (exact). Meeting a row is then the Q8_0
 * kernel's work: same integers, same lane sums, same order, so the same bits. */
size_t nb_avx2_kquant_expand_bytes(nb_wtype t, int K)
{
    size_t nb = (size_t)K / 32;
    return nb * NB_KQ_EXP_BLOCK + (t == NB_W_Q4_K ? nb / 8 * 8 * 8 * 4 : 0);
}

void nb_avx2_kquant_expand(nb_wtype t, const uint8_t *grp, int K, uint8_t *e)
{
    if (t == NB_W_Q4_K) {
        enum { SB = NB_QUANT_Q4_K_SCALES, RB = NB_QUANT_Q4_K_BYTES - NB_QUANT_Q4_K_SCALES };
        const uint8_t *p = grp;
        for (int S = 0; S < K / NB_QUANT_QK_K; S++, p += 8 * NB_QUANT_Q4_K_BYTES) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)p);
            __m256i dm = _mm256_packus_epi32(_mm256_and_si256(raw, _mm256_set1_epi32(0xffff)),
                                             _mm256_srli_epi32(raw, 16));
            dm = _mm256_permute4x64_epi64(dm, 0xd8);
            __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(dm));
            float dmin[8];
            _mm256_storeu_ps(dmin, _mm256_cvtph_ps(_mm256_extracti128_si256(dm, 1)));
            const uint8_t *rows = p + 8 * SB;
            int16_t sc[8][8];
            for (int r = 0; r < 8; r++) {
                uint64_t s8, m8;
                q4_k_scales8(rows + r * RB, &s8, &m8);
                _mm_storeu_si128((__m128i *)sc[r], _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)s8)));
                __m256 mv = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m8)));
                _mm256_storeu_ps(nb_kq_exp_mins(e, K, S) + 8 * r, _mm256_mul_ps(_mm256_set1_ps(dmin[r]), mv));
            }
            for (int s = 0; s < 8; s++) {
                int b = 8 * S + s;
                _mm256_storeu_ps(nb_kq_exp_dw(e, b), dw);
                const __m128i shift = _mm_cvtsi32_si128(4 * (s & 1));
                const uint8_t *qs = rows + (NB_QUANT_Q4_K_QS - SB) + 32 * (s / 2);
                for (int r = 0; r < 8; r++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)(qs + r * RB));
                    __m256i w = _mm256_and_si256(_mm256_srl_epi16(q, shift), _mm256_set1_epi8(15));
                    _mm256_storeu_si256((__m256i *)(nb_kq_exp_w(e, b) + 32 * r), w);
                    _mm256_storeu_si256((__m256i *)(nb_kq_exp_sc(e, b) + 16 * r), _mm256_set1_epi16(sc[r][s]));
                }
            }
        }
        return;
    }
    /* Q6_K */
    enum { RB = NB_QUANT_Q6_K_BYTES };
    const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                                          3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    const uint8_t *p = grp;
    for (int S = 0; S < K / NB_QUANT_QK_K; S++, p += 8 * RB) {
        uint16_t h[8];
        __m256i sc16[8];
        for (int r = 0; r < 8; r++) {
            memcpy(&h[r], p + r * RB + NB_QUANT_Q6_K_D, 2);
            sc16[r] = _mm256_cvtepi8_epi16(
                _mm_loadu_si128((const __m128i *)(p + r * RB + NB_QUANT_Q6_K_SCALES)));
        }
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        for (int g = 0; g < 8; g++) {
            int b = 8 * S + g, half = g / 4, k = g % 4;
            _mm256_storeu_ps(nb_kq_exp_dw(e, b), dw);
            const __m128i lshift = _mm_cvtsi32_si128(k < 2 ? 0 : 4);
            const __m128i hshift = _mm_cvtsi32_si128(2 * k);
            size_t lo_off = NB_QUANT_Q6_K_QL + 64 * (size_t)half + 32 * (size_t)(k & 1);
            size_t hi_off = NB_QUANT_Q6_K_QH + 32 * (size_t)half;
            for (int r = 0; r < 8; r++) {
                const uint8_t *blk = p + r * RB;
                __m256i lo = _mm256_loadu_si256((const __m256i *)(blk + lo_off));
                __m256i hi = _mm256_loadu_si256((const __m256i *)(blk + hi_off));
                lo = _mm256_and_si256(_mm256_srl_epi16(lo, lshift), _mm256_set1_epi8(15));
                hi = _mm256_and_si256(_mm256_srl_epi16(hi, hshift), _mm256_set1_epi8(3));
                __m256i w = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)),
                                            _mm256_set1_epi8(32));
                _mm256_storeu_si256((__m256i *)(nb_kq_exp_w(e, b) + 32 * r), w);
                _mm256_storeu_si256(
                    (__m256i *)(nb_kq_exp_sc(e, b) + 16 * r),
                    _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16[r], _mm256_set1_epi32(g)),
                                        pick));
            }
        }
    }
}

void nb_avx2_kquant_gemv8_expanded(nb_wtype t, const nb_q8_act *x, const uint8_t *e, int K,
                                   float out[8])
{
    __m256 acc[8];
    for (int r = 0; r < 8; r++)
        acc[r] = _mm256_setzero_ps();
    float dd[8];
    uint8_t *ex = (uint8_t *)e;
    for (int b = 0; b < K / 32; b++) {
        _mm256_storeu_ps(dd, _mm256_mul_ps(_mm256_loadu_ps(nb_kq_exp_dw(ex, b)),
                                           _mm256_set1_ps(x->d[b])));
        __m256i xq = _mm256_loadu_si256((const __m256i *)(x->q + b * 32));
        const int8_t *w = nb_kq_exp_w(ex, b);
        const int16_t *sc = nb_kq_exp_sc(ex, b);
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++)
            acc[r] = lane_add(acc[r],
                              signed_prod(_mm256_loadu_si256((const __m256i *)(w + 32 * r)), xq),
                              _mm256_loadu_si256((const __m256i *)(sc + 16 * r)), dd[r]);
    }
    __m256 tot = nb_reduce8(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]);
    if (t == NB_W_Q4_K) {
        float m[8];
        nb_avx2_kquant_mins8(x, nb_kq_exp_mins(ex, K, 0), K, m);
        tot = _mm256_sub_ps(tot, _mm256_loadu_ps(m));
    }
    _mm256_storeu_ps(out, tot);
}

void nb_avx2_kquant_mins8(const nb_q8_act *x, const float *mins0, int K, float m[8])
{
    __m256 mt[8];
    for (int r = 0; r < 8; r++)
        mt[r] = _mm256_setzero_ps();
    for (int S = 0; S < K / NB_QUANT_QK_K; S++) {
        __m256 xs = _mm256_loadu_ps(x->s + 8 * S);
        const float *mins = mins0 + (size_t)S * 64;
        for (int r = 0; r < 8; r++)
            mt[r] = _mm256_add_ps(mt[r], _mm256_mul_ps(_mm256_loadu_ps(mins + 8 * r), xs));
    }
    _mm256_storeu_ps(m, nb_reduce8(mt[0], mt[1], mt[2], mt[3], mt[4], mt[5], mt[6], mt[7]));
}

nb_q8_gemv8_fn nb_avx2_kquant_gemv8(nb_wtype t)
{
    switch (t) {
    case NB_W_Q5_0: return nb_avx2_q5_0_gemv8;
    case NB_W_Q4_K: return gemv8_q4_k;
    case NB_W_Q6_K: return gemv8_q6_k;
    default: return NULL;
    }
}
