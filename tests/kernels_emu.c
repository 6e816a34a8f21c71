/* kernels_emu: nb_avx512.c and nb_avx512_kquant.c built over an emulation of their few AVX-512
 * intrinsics (SDM semantics), for test_kernels_emu; a file of its own so that only it is compiled
 * for AVX2, never the test's main. */
/* ---- the AVX-512 subset nb_avx512.c uses, after the Intel SDM -------------
 * Everything 256-bit is real AVX2 (this file is compiled with the AVX2 flags,
 * tests/CMakeLists.txt, and the test calls it only where the CPU has them);
 * the 512-bit types are structs, so no AVX-512 instruction or ABI is used. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nb_bf16.h"

typedef struct emu_m512 { float f[16]; } emu_m512;
typedef struct emu_m512i { uint8_t b[64]; } emu_m512i;
typedef struct emu_m512bh { uint16_t h[32]; } emu_m512bh;
typedef struct emu_m256bh { uint16_t h[16]; } emu_m256bh;

static inline float emu_flush(float x) /* DAZ / FTZ */
{
    return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

static inline emu_m512 emu_setzero_ps(void)
{
    emu_m512 r;
    memset(&r, 0, sizeof r);
    return r;
}

static inline emu_m512i emu_loadu_si512(const void *p)
{
    emu_m512i r;
    memcpy(&r, p, sizeof r);
    return r;
}

static inline emu_m512i emu_set1_epi32(int32_t v)
{
    emu_m512i r;
    for (int k = 0; k < 16; k++)
        memcpy(r.b + 4 * k, &v, 4);
    return r;
}

/* VDPBF16PS: per lane, acc += odd pair product, then += even pair product,
 * each one fused step with RNE, denormals in and out flushed. */
static inline emu_m512 emu_dpbf16_ps(emu_m512 src, emu_m512bh a, emu_m512bh b)
{
    for (int j = 0; j < 16; j++) {
        float acc = emu_flush(src.f[j]);
        for (int k = 1; k >= 0; k--) {
            float x = emu_flush(nb_bf16_to_f32(a.h[2 * j + k]));
            float y = emu_flush(nb_bf16_to_f32(b.h[2 * j + k]));
            acc = emu_flush(fmaf(x, y, acc));
        }
        src.f[j] = acc;
    }
    return src;
}

static inline void emu_storeu_ps(void *p, emu_m512 v)
{
    memcpy(p, v.f, sizeof v.f);
}

/* VCVTNEPS2BF16: RNE, NaN quieted, denormal inputs read as zero. */
static inline emu_m256bh emu_cvtneps_pbh(emu_m512 a)
{
    emu_m256bh r;
    for (int j = 0; j < 16; j++)
        r.h[j] = nb_f32_to_bf16(emu_flush(a.f[j]));
    return r;
}

#define __m512 emu_m512
#define __m512i emu_m512i
#define __m512bh emu_m512bh
#define __m256bh emu_m256bh
#undef _mm512_setzero_ps /* a macro in unoptimised builds */
#define _mm512_setzero_ps emu_setzero_ps
#undef _mm512_loadu_si512 /* a macro in unoptimised builds */
#define _mm512_loadu_si512 emu_loadu_si512
#undef _mm512_set1_epi32 /* a macro in unoptimised builds */
#define _mm512_set1_epi32 emu_set1_epi32
#undef _mm512_dpbf16_ps /* a macro in unoptimised builds */
#define _mm512_dpbf16_ps emu_dpbf16_ps
#undef _mm512_cvtneps_pbh /* a macro in unoptimised builds */
#define _mm512_cvtneps_pbh emu_cvtneps_pbh
#undef _mm512_storeu_ps /* a macro in unoptimised builds */
#define _mm512_storeu_ps emu_storeu_ps

/* ---- the integer and fp32 ops of nb_avx512_kquant.c (AVX512F, AVX512_VNNI) ---- */

static inline emu_m512i emu_set1_epi8(char v)
{
    emu_m512i r;
    memset(r.b, (unsigned char)v, sizeof r.b);
    return r;
}

static inline emu_m512i emu_setzero_si512(void)
{
    return emu_set1_epi8(0);
}

static inline emu_m512i emu_broadcast_i64x4(__m256i a)
{
    emu_m512i r;
    memcpy(r.b, &a, 32);
    memcpy(r.b + 32, &a, 32);
    return r;
}

static inline void emu_i32(emu_m512i v, int32_t o[16])
{
    memcpy(o, v.b, 64);
}

static inline emu_m512i emu_from_i32(const int32_t v[16])
{
    emu_m512i r;
    memcpy(r.b, v, 64);
    return r;
}

/* VPDPBUSD: per dword lane, src + the four products of a's unsigned bytes and b's signed bytes,
 * wrapping (the non-saturating form). */
static inline emu_m512i emu_dpbusd_epi32(emu_m512i src, emu_m512i a, emu_m512i b)
{
    int32_t s[16];
    emu_i32(src, s);
    for (int j = 0; j < 16; j++) {
        int64_t acc = s[j];
        for (int k = 0; k < 4; k++)
            acc += (int64_t)a.b[4 * j + k] * (int8_t)b.b[4 * j + k];
        s[j] = (int32_t)(uint32_t)acc;
    }
    return emu_from_i32(s);
}

static inline emu_m512i emu_xor_si512(emu_m512i a, emu_m512i b)
{
    for (int k = 0; k < 64; k++)
        a.b[k] ^= b.b[k];
    return a;
}

static inline emu_m512i emu_sub_epi32(emu_m512i a, emu_m512i b)
{
    int32_t x[16], y[16];
    emu_i32(a, x);
    emu_i32(b, y);
    for (int j = 0; j < 16; j++)
        x[j] = (int32_t)((uint32_t)x[j] - (uint32_t)y[j]);
    return emu_from_i32(x);
}

/* VPMULLD: the low 32 bits of the product. */
static inline emu_m512i emu_mullo_epi32(emu_m512i a, emu_m512i b)
{
    int32_t x[16], y[16];
    emu_i32(a, x);
    emu_i32(b, y);
    for (int j = 0; j < 16; j++)
        x[j] = (int32_t)(uint32_t)((int64_t)x[j] * y[j]);
    return emu_from_i32(x);
}

static inline emu_m512i emu_slli_epi32(emu_m512i a, unsigned n)
{
    int32_t x[16];
    emu_i32(a, x);
    for (int j = 0; j < 16; j++)
        x[j] = n > 31 ? 0 : (int32_t)((uint32_t)x[j] << n);
    return emu_from_i32(x);
}

/* VPSRAD: arithmetic, counts past 31 fill with the sign. */
static inline emu_m512i emu_srai_epi32(emu_m512i a, unsigned n)
{
    int32_t x[16];
    emu_i32(a, x);
    for (int j = 0; j < 16; j++)
        x[j] = x[j] < 0 ? ~(~x[j] >> (n > 31 ? 31 : n)) : x[j] >> (n > 31 ? 31 : n);
    return emu_from_i32(x);
}

/* VCVTDQ2PS: round to nearest even, as C's int-to-float conversion does by default. */
static inline emu_m512 emu_cvtepi32_ps(emu_m512i a)
{
    int32_t x[16];
    emu_i32(a, x);
    emu_m512 r;
    for (int j = 0; j < 16; j++)
        r.f[j] = (float)x[j];
    return r;
}

static inline emu_m512 emu_mul_ps(emu_m512 a, emu_m512 b)
{
    for (int j = 0; j < 16; j++)
        a.f[j] = a.f[j] * b.f[j];
    return a;
}

static inline emu_m512 emu_add_ps(emu_m512 a, emu_m512 b)
{
    for (int j = 0; j < 16; j++)
        a.f[j] = a.f[j] + b.f[j];
    return a;
}

/* VPERMPS: lane j takes a's lane idx[j] mod 16. */
static inline emu_m512 emu_permutexvar_ps(emu_m512i idx, emu_m512 a)
{
    int32_t x[16];
    emu_i32(idx, x);
    emu_m512 r;
    for (int j = 0; j < 16; j++)
        r.f[j] = a.f[x[j] & 15];
    return r;
}

/* The upper half is undefined in hardware: zeros here, and the kernel never reads it. */
static inline emu_m512 emu_castps256_ps512(__m256 a)
{
    emu_m512 r = emu_setzero_ps();
    memcpy(r.f, &a, 32);
    return r;
}

/* attention's loops (nb_avx512.c) and the prefill GEMM (nb_avx512_kquant.c) */
static inline emu_m512 emu_set1_ps(float v)
{
    emu_m512 r;
    for (int j = 0; j < 16; j++)
        r.f[j] = v;
    return r;
}

static inline emu_m512 emu_loadu_ps(const void *p)
{
    emu_m512 r;
    memcpy(r.f, p, sizeof r.f);
    return r;
}

#undef _mm512_set1_ps
#define _mm512_set1_ps emu_set1_ps
#undef _mm512_loadu_ps
#define _mm512_loadu_ps emu_loadu_ps

#undef _mm512_mul_ps
#define _mm512_mul_ps emu_mul_ps
#undef _mm512_add_ps
#define _mm512_add_ps emu_add_ps

#define NB_AVX512_EMULATE 1
#include "nb_avx512.c"

#undef _mm512_set1_epi8
#define _mm512_set1_epi8 emu_set1_epi8
#undef _mm512_setzero_si512
#define _mm512_setzero_si512 emu_setzero_si512
#undef _mm512_broadcast_i64x4
#define _mm512_broadcast_i64x4 emu_broadcast_i64x4
#undef _mm512_dpbusd_epi32
#define _mm512_dpbusd_epi32 emu_dpbusd_epi32
#undef _mm512_xor_si512
#define _mm512_xor_si512 emu_xor_si512
#undef _mm512_sub_epi32
#define _mm512_sub_epi32 emu_sub_epi32
#undef _mm512_mullo_epi32
#define _mm512_mullo_epi32 emu_mullo_epi32
#undef _mm512_slli_epi32
#define _mm512_slli_epi32 emu_slli_epi32
#undef _mm512_srai_epi32
#define _mm512_srai_epi32 emu_srai_epi32
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps emu_cvtepi32_ps
#undef _mm512_permutexvar_ps
#define _mm512_permutexvar_ps emu_permutexvar_ps
#undef _mm512_castps256_ps512
#define _mm512_castps256_ps512 emu_castps256_ps512

/* ---- and those the prefill GEMM adds (AVX512F) ---- */

static inline void emu_storeu_si512(void *p, emu_m512i v)
{
    memcpy(p, v.b, sizeof v.b);
}

static inline emu_m512 emu_castsi512_ps(emu_m512i a)
{
    emu_m512 r;
    memcpy(r.f, a.b, sizeof r.f);
    return r;
}

#undef _mm512_storeu_si512
#define _mm512_storeu_si512 emu_storeu_si512
#undef _mm512_castsi512_ps
#define _mm512_castsi512_ps emu_castsi512_ps

/* ---- and the 256-bit VPDPBUSD of Q4_1's decode kernel (AVX512VL + VNNI): per 32-bit lane,
 * acc + the sum of its 4 products of an unsigned byte of a and a signed byte of b, no
 * saturation (wrapping, which no kernel reaches) ---- */

static inline __m256i emu_dpbusd256(__m256i acc, __m256i a, __m256i b)
{
    uint8_t ua[32];
    int8_t sb[32];
    int32_t r[8];
    memcpy(ua, &a, 32);
    memcpy(sb, &b, 32);
    memcpy(r, &acc, 32);
    for (int j = 0; j < 8; j++) {
        int64_t s = r[j];
        for (int k = 0; k < 4; k++)
            s += (int32_t)ua[4 * j + k] * sb[4 * j + k];
        r[j] = (int32_t)(uint32_t)s;
    }
    memcpy(&acc, r, 32);
    return acc;
}

#undef _mm256_dpbusd_epi32
#define _mm256_dpbusd_epi32 emu_dpbusd256

#define NB_AVX512_KQ_EMULATE 1
#include "nb_avx512_kquant.c"

/* ---- nb_amx_vnni.c: the int8 tile loop with its tile instructions on these (emulated) zmm
 * registers: vpdpbusd, set1, sub, load and store above ---- */
#define NB_AMX_VNNI_EMULATE 1
#include "nb_amx_vnni.c"
