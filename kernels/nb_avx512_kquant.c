/* nb_avx512_kquant: the prefill kernel of Q5_0, Q4_K and Q6_K weights on AVX-512 VNNI: an expanded
 * PACK8 group (nb_avx2_kquant_expand) met by one Q8 activation row, two weight rows per zmm.
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
#else
#define NB_AVX512_KQ_EXPANDED nb_avx512_emu_kquant_gemv8_expanded
#endif

#include "nb_avx2_simd.h"
#include "nb_kernels_impl.h"

void NB_AVX512_KQ_EXPANDED(nb_wtype t, const nb_q8_act *x, const uint8_t *e, int K,
                           float out[8]);

/* Lanes 0-7 of a zmm of d = d_w * d_x take row 2p's d, lanes 8-15 row 2p+1's. */
static const int32_t pair_idx[4][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
};

void NB_AVX512_KQ_EXPANDED(nb_wtype t, const nb_q8_act *x, const uint8_t *e, int K,
                           float out[8])
{
    uint8_t *ex = (uint8_t *)e;
    const __m512i bias = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1),
                  zero = _mm512_setzero_si512();
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
        __m512i xq = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->q + b * 32)));
        __m512i x128 = _mm512_slli_epi32(_mm512_dpbusd_epi32(zero, ones, xq), 7);
        const int8_t *w = nb_kq_exp_w(ex, b);
        const int16_t *sc = nb_kq_exp_sc(ex, b);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m512i wu = _mm512_xor_si512(_mm512_loadu_si512(w + 64 * p), bias);
            __m512i is = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, wu, xq), x128);
            /* both words of a scale lane are equal: the high one, sign-extended, is the scale */
            is = _mm512_mullo_epi32(is, _mm512_srai_epi32(_mm512_loadu_si512(sc + 32 * p), 16));
            acc[p] = _mm512_add_ps(acc[p], _mm512_mul_ps(_mm512_cvtepi32_ps(is),
                                                         _mm512_permutexvar_ps(idx[p], dd)));
        }
    }
    float a[4][16];
    for (int p = 0; p < 4; p++)
        _mm512_storeu_ps(a[p], acc[p]);
    __m256 tot = nb_reduce8(_mm256_loadu_ps(a[0]), _mm256_loadu_ps(a[0] + 8),
                            _mm256_loadu_ps(a[1]), _mm256_loadu_ps(a[1] + 8),
                            _mm256_loadu_ps(a[2]), _mm256_loadu_ps(a[2] + 8),
                            _mm256_loadu_ps(a[3]), _mm256_loadu_ps(a[3] + 8));
    if (t == NB_W_Q4_K) {
        float m[8];
        nb_avx2_kquant_mins8(x, e, K, m);
        tot = _mm256_sub_ps(tot, _mm256_loadu_ps(m));
    }
    _mm256_storeu_ps(out, tot);
}
