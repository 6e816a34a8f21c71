/* kernels_emu: nb_avx512.c built over an emulation of its few AVX-512 intrinsics (SDM semantics), for
 * test_kernels_emu; a file of its own so that only it is compiled for AVX2, never the test's main. */
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
typedef struct emu_m512d { float f[16]; } emu_m512d;

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

static inline emu_m512i emu_broadcast_i32x4(__m128i v)
{
    emu_m512i r;
    for (int k = 0; k < 4; k++)
        memcpy(r.b + 16 * k, &v, 16);
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

static inline emu_m512 emu_add_ps(emu_m512 a, emu_m512 b)
{
    for (int j = 0; j < 16; j++)
        a.f[j] += b.f[j];
    return a;
}

/* VPERMILPS imm: within each 128-bit lane, element k takes element imm[2k+1:2k]. */
static inline emu_m512 emu_permute_ps(emu_m512 a, int imm)
{
    emu_m512 r;
    for (int j = 0; j < 16; j++)
        r.f[j] = a.f[(j & ~3) | ((imm >> (2 * (j & 3))) & 3)];
    return r;
}

static inline emu_m512 emu_permutex2var_ps(emu_m512 a, emu_m512i idx, emu_m512 b)
{
    emu_m512 r;
    for (int j = 0; j < 16; j++) {
        int32_t k;
        memcpy(&k, idx.b + 4 * j, 4);
        r.f[j] = (k & 16) ? b.f[k & 15] : a.f[k & 15];
    }
    return r;
}

static inline __m256 emu_castps512_ps256(emu_m512 v)
{
    return _mm256_loadu_ps(v.f);
}

#define __m512 emu_m512
#define __m512i emu_m512i
#define __m512bh emu_m512bh
#undef _mm512_setzero_ps /* a macro in unoptimised builds */
#define _mm512_setzero_ps emu_setzero_ps
#undef _mm512_loadu_si512 /* a macro in unoptimised builds */
#define _mm512_loadu_si512 emu_loadu_si512
#undef _mm512_broadcast_i32x4 /* a macro in unoptimised builds */
#define _mm512_broadcast_i32x4 emu_broadcast_i32x4
#undef _mm512_dpbf16_ps /* a macro in unoptimised builds */
#define _mm512_dpbf16_ps emu_dpbf16_ps
#undef _mm512_add_ps /* a macro in unoptimised builds */
#define _mm512_add_ps emu_add_ps
#undef _mm512_permute_ps /* a macro in unoptimised builds */
#define _mm512_permute_ps emu_permute_ps
#undef _mm512_permutex2var_ps /* a macro in unoptimised builds */
#define _mm512_permutex2var_ps emu_permutex2var_ps
#undef _mm512_castps512_ps256 /* a macro in unoptimised builds */
#define _mm512_castps512_ps256 emu_castps512_ps256

#define NB_AVX512_EMULATE 1
#include "nb_avx512.c"
