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

#define NB_AVX512_EMULATE 1
#include "nb_avx512.c"
