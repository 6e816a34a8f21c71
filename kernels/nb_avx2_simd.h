/* nb_avx2_simd: inline AVX2/FMA helpers (bf16 <-> fp32, exp) shared by the AVX2 and AVX-512 files.
 * Include only in files compiled with -mavx2 -mfma -mf16c: nothing here may run on a CPU without them. */
#ifndef NB_AVX2_SIMD_H
#define NB_AVX2_SIMD_H

/* A file without the flags would fail later on an intrinsic, far from the cause. */
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "nb_avx2_simd.h needs -mavx2 -mfma -mf16c (set per file in kernels/CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <stdint.h>

#include "nb_bf16.h"

/* 8 bf16 -> fp32, exact: the bf16 bits become the top half of each lane. */
static inline __m256 nb_ld_bf16x8(const nb_bf16 *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* fp32 -> bf16 bits in the low half of each lane, as nb_f32_to_bf16:
 * round to nearest even, NaN kept quiet with its sign. */
static inline __m256i nb_bf16_bits8(__m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i qn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, qn, nan);
}

/* 8 fp32 -> 8 bf16 (RNE). */
static inline __m128i nb_st_bf16x8(__m256 v)
{
    __m256i r = nb_bf16_bits8(v);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* The value a bf16 tensor would hold: nb_round_bf16 on 8 lanes. */
static inline __m256 nb_round_bf16x8(__m256 v)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(nb_bf16_bits8(v), 16));
}

/* Sums each of eight accumulators with the portable tree: lane r of the
 * result is ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)) of ar. hadd adds adjacent
 * pairs, the second hadd the pairs of pairs, the last add joins the halves. */
static inline __m256 nb_reduce8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                             __m256 a6, __m256 a7)
{
    __m256 h01 = _mm256_hadd_ps(a0, a1), h23 = _mm256_hadd_ps(a2, a3);
    __m256 h45 = _mm256_hadd_ps(a4, a5), h67 = _mm256_hadd_ps(a6, a7);
    __m256 q0 = _mm256_hadd_ps(h01, h23), q1 = _mm256_hadd_ps(h45, h67);
    __m256 lo = _mm256_permute2f128_ps(q0, q1, 0x20), hi = _mm256_permute2f128_ps(q0, q1, 0x31);
    return _mm256_add_ps(lo, hi);
}

/* nb_reduce8's tree for four accumulators: lane r of the result sums ar. */
static inline __m128 nb_reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
}

/* The portable tree of one accumulator: ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). */
static inline float nb_hsum8(__m256 a)
{
    __m256 h = _mm256_hadd_ps(a, a);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* e^x on 8 lanes, within 2 ulp of glibc's expf over the whole float range:
 * x = n ln2 + r, |r| <= ln2/2, Cephes' degree-6 polynomial for e^r, then
 * two exact power-of-two scalings so results down to the subnormals round
 * once. x > 88.73 gives inf, x < -103.98 gives 0, NaN stays NaN. */
static inline __m256 nb_exp8(__m256 x)
{
    /* max/min return the second operand when either is NaN: keep x there. */
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n in [-150, 128]: 2^n as 2^(n>>1) * 2^(n - (n>>1)), both normal. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

/* One lane of nb_exp8, bit for bit (tails must match the vector body). */
static inline float nb_exp1(float x)
{
    return _mm256_cvtss_f32(nb_exp8(_mm256_set1_ps(x)));
}

/* How far ahead of the block being read the rows-in-lanes decode kernels prefetch their PACK8
 * stream (bytes; a group's blocks follow one another, and the next group follows the last).
 * Those kernels spend several instructions per weight byte (Q6_K ~0.3), so the out-of-order
 * window holds only a few KB of loads and the hardware prefetcher alone kept Q6_K at 60-75% of
 * the read bandwidth on Zen 5; with the stream prefetched this far it streams at 95-105%. */
#ifndef NB_PREFETCH_AHEAD
#define NB_PREFETCH_AHEAD 6144
#endif

/* Prefetches every cache line of [p, p + bytes) NB_PREFETCH_AHEAD bytes on (p need not be
 * line-aligned; a prefetch never faults, so the stream's end may run past the matrix). */
static inline void nb_prefetch_ahead(const uint8_t *p, int bytes)
{
    for (int o = 0; o < bytes + 64; o += 64)
        _mm_prefetch((const char *)p + NB_PREFETCH_AHEAD + o, _MM_HINT_T0);
}

/* Keeps two running sums as chains: GCC re-associates a long run of integer vector adds into a
 * tree, which keeps every product live at once and spilled the 16 ymm registers of AVX2 (Q4_K:
 * 78 stack accesses per call); an empty asm that "changes" them stops that. */
static inline void nb_keep_chain(__m256i *a, __m256i *b)
{
    __asm__("" : "+x"(*a), "+x"(*b));
}

/* Q5_0 in PACK8 (nb_kernels.c), rows in lanes: quant chunk k (32 bytes at q, bytes 4k..4k+3 of
 * row r in lane r) and the rows' stored fifth bits h as the 5-bit quants of weights 4k..4k+3
 * (*lo) and 16+4k.. (*hi), 0..31, one byte each. */
static inline void nb_q5_0_chunk(const uint8_t *q, __m256i h, int k, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(16);
    __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
    *lo = _mm256_or_si256(_mm256_and_si256(raw, m4),
                          _mm256_and_si256(_mm256_slli_epi32(h, 4 - k), b4));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                          _mm256_and_si256(_mm256_srli_epi32(h, k), b4));
}

/* 16 * the sum of a Q8 block's 32 quants, in every lane (exact): what Q5_0's - 16 takes off;
 * from the row's half sums where it has them (hs: nb_q8_act). */
static inline __m256i nb_x16_sum(const int8_t *xb, const int32_t *hs)
{
    if (hs)
        return _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_set1_epi32(*hs), _mm256_set1_epi16(1)), 4);
    __m256i s = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)xb)),
        _mm256_set1_epi16(16));
    s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 1));
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4e));
    return _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xb1));
}

/* Q4_K in PACK8 (nb_kernels.c), rows in lanes: the 8 rows' 12 scale bytes as three 32-byte
 * chunks (words w0, w1, w2 of row r in lane r) to the rows' six-bit scales sc[0..3] / sc[4..7]
 * (sc[0], sc[1]: bytes 0..3 of each lane) and mins m[0..3] / m[4..7] (nb_quant_q4_k_scales). */
static inline void nb_q4_k_scales8(const uint8_t *p, __m256i sc[2], __m256i m[2])
{
    const __m256i m3f = _mm256_set1_epi8(0x3f), m0f = _mm256_set1_epi8(0x0f),
                  m30 = _mm256_set1_epi8(0x30);
    __m256i w0 = _mm256_loadu_si256((const __m256i *)p);
    __m256i w1 = _mm256_loadu_si256((const __m256i *)(p + 32));
    __m256i w2 = _mm256_loadu_si256((const __m256i *)(p + 64));
    sc[0] = _mm256_and_si256(w0, m3f);
    m[0] = _mm256_and_si256(w1, m3f);
    sc[1] = _mm256_or_si256(_mm256_and_si256(w2, m0f),
                            _mm256_and_si256(_mm256_srli_epi32(w0, 2), m30));
    m[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), m0f),
                           _mm256_and_si256(_mm256_srli_epi32(w1, 2), m30));
}

/* Bytes of each 32-bit lane of v picked by sel: byte i of every lane takes byte (sel >> 8i) & 3
 * of that lane, or 0 where bit 7 of (sel >> 8i) is set (pshufb, lane offsets added). */
static inline __m256i nb_lane_sel(__m256i v, uint32_t sel)
{
    const __m256i off = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0,
                                         0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    return _mm256_shuffle_epi8(v, _mm256_add_epi8(_mm256_set1_epi32((int)sel), off));
}
/* Byte j (< 4) of each lane zero-extended to the lane (both16: to both its 16-bit words, a
 * madd scale). */
static inline __m256i nb_lane_byte(__m256i v, int j, int both16)
{
    uint32_t u = (uint32_t)j;
    return nb_lane_sel(v, both16 ? 0x80008000u | u | u << 16 : 0x80808000u | u);
}
/* Signed bytes j and k of each lane as its two 16-bit words (a madd pair). */
static inline __m256i nb_lane_i8_pair16(__m256i v, int j, int k)
{
    return _mm256_srai_epi16(nb_lane_sel(v, 0x00800080u | (uint32_t)j << 8 | (uint32_t)k << 24),
                             8);
}
/* Signed byte j of each lane as the lane's int32. */
static inline __m256i nb_lane_i8_32(__m256i v, int j)
{
    return _mm256_srai_epi32(nb_lane_sel(v, 0x00808080u | (uint32_t)j << 24), 24);
}

/* Q6_K in PACK8 (nb_kernels.c's q6_k_recode), rows in lanes: the 6-bit quants of the four groups
 * of a half super-block at one 4-weight chunk, from its three stored chunks a, b, c. */
static inline void nb_q6_k_w4(__m256i a, __m256i b, __m256i c, __m256i w[4])
{
    const __m256i m6 = _mm256_set1_epi8(63);
    w[0] = _mm256_and_si256(a, m6);
    w[1] = _mm256_and_si256(b, m6);
    w[2] = _mm256_and_si256(c, m6);
    w[3] = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 6), _mm256_set1_epi8(3)),
                        _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi8(12))),
        _mm256_and_si256(_mm256_srli_epi16(c, 2), _mm256_set1_epi8(48)));
}

/* A Q8 block's sums of quants 0..15 and 16..31 as the two 16-bit words of every lane (exact:
 * |sum| <= 16 * 127): a madd pair against Q6_K's two scales of the block. */
static inline __m256i nb_x_half_sums16(const int8_t *xb, const int32_t *hs)
{
    if (hs)
        return _mm256_set1_epi32(*hs);
    __m256i v = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)xb)),
        _mm256_set1_epi16(1));
    v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0x4e));
    v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0xb1));
    __m256i a = _mm256_permute2x128_si256(v, v, 0x00), b = _mm256_permute2x128_si256(v, v, 0x11);
    return _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi32(0xffff)),
                           _mm256_slli_epi32(b, 16));
}

/* Q4_K's PACK8 super-block head (8 rows): d and dmin as floats, the six-bit scales and mins. */
static inline void nb_q4_k_head(const uint8_t *p, __m256 *dw, __m256 *dmin, __m256i sc[2],
                                __m256i m[2])
{
    *dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    *dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
    nb_q4_k_scales8(p + 32, sc, m);
}

/* Q4_K's min term of sub-block j (byte j of its min word m) for 8 rows: mt + (dmin * m) * s_x,
 * the reference's order. */
static inline __m256 nb_q4_k_min(__m256 mt, __m256i m, int j, __m256 dmin, float xs)
{
    __m256 mv = _mm256_cvtepi32_ps(nb_lane_byte(m, j, 0));
    return _mm256_add_ps(mt, _mm256_mul_ps(_mm256_mul_ps(dmin, mv), _mm256_set1_ps(xs)));
}

/* Q6_K's PACK8 super-block of 8 rows: d0..d7, the re-coded quant chunks (32 where ql was, 16
 * where qh was), the 4 scale chunks. */
enum { NB_Q6K_QL = 16, NB_Q6K_QH = 16 + 32 * 32, NB_Q6K_SC = 16 + 48 * 32 };

/* Chunk i (< 8) of groups k0, k0 + 1 (k0 = 0 or 2) of half h of a Q6_K super-block at p: the
 * 6-bit quants, one byte each (nb_q6_k_w4; groups 0 and 1 need no third chunk). */
static inline void nb_q6_k_w2(const uint8_t *p, int h, int i, int k0, __m256i w[2])
{
    __m256i a = _mm256_loadu_si256((const __m256i *)(p + NB_Q6K_QL + 32 * (16 * h + i)));
    __m256i b = _mm256_loadu_si256((const __m256i *)(p + NB_Q6K_QL + 32 * (16 * h + 8 + i)));
    if (k0 == 0) {
        w[0] = _mm256_and_si256(a, _mm256_set1_epi8(63));
        w[1] = _mm256_and_si256(b, _mm256_set1_epi8(63));
        return;
    }
    __m256i c = _mm256_loadu_si256((const __m256i *)(p + NB_Q6K_QH + 32 * (8 * h + i)));
    __m256i w4[4];
    nb_q6_k_w4(a, b, c, w4);
    w[0] = w4[2];
    w[1] = w4[3];
}

#endif
