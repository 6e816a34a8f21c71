/* nb_avx512_kquant: quantized-weight kernels on AVX-512 VNNI, two weight rows per zmm: the prefill
 * kernel of Q5_0, Q4_K and Q6_K (an expanded PACK8 group) and the Q8_0 one (Gemma's LM head).
 *
 * Why it exists: in Gemma 3's prefill the AVX2 expanded kernel is most of the time, and it
 * spends 7 instructions per 32 products of one row (two vpsignb, vpmaddubsw, vpmaddwd, convert,
 * multiply, add). vpdpbusd forms the four-weight lane sums in one instruction for two rows at
 * once, so a block of 8 rows takes 4 x (xor, dpbusd, sub, mullo, convert, multiply, add).
 *
 * Numerics: the same function as nb_avx2_kquant_gemv8_expanded, bit for bit. vpdpbusd wants an
 * unsigned first operand; the signed weights go in as w + 128 (w xor 0x80) and 128 * sum(x) of
 * each lane (one vpdpbusd of ones, shared by the rows) comes off again: the exact integer sum of
 * w * x of the lane, as the AVX2 pair sums give it, times the lane's scale (exact in int32).
 * Lane l of row r then takes float(I) * (d_w * d_x) in the AVX2 order (multiply, then add; no
 * FMA), the lanes of each row reduce by the same tree (nb_reduce8), and Q4_K's min term is the
 * AVX2 one itself (nb_avx2_kquant_mins8).
 *
 * Built a second time by tests/kernels_emu.c with NB_AVX512_KQ_EMULATE over emulated intrinsics
 * (AVX2 flags), so hosts without VNNI test this tiling too. */
#ifndef NB_AVX512_KQ_EMULATE
#if !defined(__AVX512F__) || !defined(__AVX512VNNI__)
#error "nb_avx512_kquant.c needs -mavx512f -mavx512vnni (CMakeLists.txt)"
#endif
#include <immintrin.h>
#define NB_AVX512_KQ_EXPANDED nb_avx512_kquant_gemv8_expanded
#define NB_AVX512_Q8_0_GEMV8 nb_avx512_q8_0_gemv8
#else
#define NB_AVX512_KQ_EXPANDED nb_avx512_emu_kquant_gemv8_expanded
#define NB_AVX512_Q8_0_GEMV8 nb_avx512_emu_q8_0_gemv8
#endif

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

void NB_AVX512_KQ_EXPANDED(nb_wtype t, const nb_q8_act *x, const uint8_t *e, int K,
                           float out[8]);
void NB_AVX512_Q8_0_GEMV8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);

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

/* Decode's Q8_0 (PACK8: per block the 8 rows' fp16 d, then their 32 quants each): the AVX2
 * gemv8_q8_0 bit for bit. Its lane sums are plain (no scale), and it adds a zero vector at the
 * end (Q4_1's min term), which turns a -0 row into +0: done here too. */
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

void NB_AVX512_KQ_EXPANDED(nb_wtype t, const nb_q8_act *x, const uint8_t *e, int K,
                           float out[8])
{
    uint8_t *ex = (uint8_t *)e;
    __m512i idx[4];
    __m512 acc[4];
    for (int p = 0; p < 4; p++) {
        idx[p] = _mm512_loadu_si512(pair_idx[p]);
        acc[p] = _mm512_setzero_ps();
    }
    for (int b = 0; b < K / 32; b++) {
        /* d_w * d_x of the 8 rows, as the AVX2 kernel rounds it */
        __m512 dd = _mm512_castps256_ps512(
            _mm256_mul_ps(_mm256_loadu_ps(nb_kq_exp_dw(ex, b)), _mm256_set1_ps(x->d[b])));
        __m512i x128, xq = block_x(x, b, &x128);
        const int8_t *w = nb_kq_exp_w(ex, b);
        const int16_t *sc = nb_kq_exp_sc(ex, b);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            /* both words of a scale lane are equal: the high one, sign-extended, is the scale */
            __m512i is = _mm512_mullo_epi32(pair_sums(w + 64 * p, xq, x128),
                                            _mm512_srai_epi32(_mm512_loadu_si512(sc + 32 * p), 16));
            acc[p] = _mm512_add_ps(acc[p], _mm512_mul_ps(_mm512_cvtepi32_ps(is),
                                                         _mm512_permutexvar_ps(idx[p], dd)));
        }
    }
    __m256 tot = reduce_pairs(acc);
    if (t == NB_W_Q4_K) {
        float m[8];
        nb_avx2_kquant_mins8(x, e, K, m);
        tot = _mm256_sub_ps(tot, _mm256_loadu_ps(m));
    }
    _mm256_storeu_ps(out, tot);
}
