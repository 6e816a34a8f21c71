/* test_kernels_emu: the AVX-512 BF16 linear kernel built over an emulation of its few AVX-512
 * intrinsics (SDM semantics) and checked against portable, so its tiling is tested on CPUs without AVX-512. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kernels_testlib.h"
#include "nb_kernels_impl.h"

/* ---- the AVX-512 subset nb_avx512.c uses, after the Intel SDM -------------
 * Everything 256-bit is real AVX2 (this file runs only where it exists);
 * the 512-bit types are structs, so no AVX-512 instruction or ABI is used. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

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
#pragma GCC pop_options

static void run(int rows, int cols, int n)
{
    nb_err err = {0};
    uint8_t *data = kt_rows(NB_W_BF16, rows, cols);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX2, &err), NB_OK);
    nb_wmat *Wp = kt_wmat_from(NB_W_BF16, rows, cols, data); /* PACK8, as AVX-512 finishes */
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
    nb_wmat *W = kt_wmat_from(NB_W_BF16, rows, cols, data);
    assert_true(W && Wp && Wp->layout == NB_LAYOUT_PACK8);
    free(data);
    size_t out = (size_t)n * rows;
    nb_bf16 *X = malloc(sizeof(nb_bf16) * (size_t)n * cols);
    kt_fill_bf16(X, (size_t)n * cols, 1.0f);
    float *ref32 = malloc(out * 4), *got32 = malloc(out * 4);
    nb_bf16 *ref16 = malloc(out * 2), *got16 = malloc(out * 2);
    nb_linear_bf16_f32out(W, X, n, ref32);
    nb_linear_bf16(W, X, n, ref16);
    /* two slices, as two threads would split the rows */
    int mid = (rows / 2) & ~15;
    nb_avx512_emu_linear_bf16(Wp, X, n, got32, 1, 0, mid);
    nb_avx512_emu_linear_bf16(Wp, X, n, got32, 1, mid, rows);
    nb_avx512_emu_linear_bf16(Wp, X, n, got16, 0, 0, rows);
    float *mag = kt_abs_dots(W, X, n);
    float rel = (float)cols * 6e-8f;
    char what[96];
    snprintf(what, sizeof what, "avx512bf16 (emulated) %dx%d n=%d", rows, cols, n);
    int bad = kt_check_f32(what, ref32, got32, mag, out, rel);
    for (size_t i = 0; i < out; i++)
        mag[i] *= rel;
    bad = bad || kt_check_bf16_tol(what, ref16, got16, out, mag, 0);
    if (bad)
        fail_msg("%s beyond fp32 rounding of portable", what);
    free(mag);
    free(X);
    free(ref32);
    free(got32);
    free(ref16);
    free(got16);
    nb_wmat_free(W);
    nb_wmat_free(Wp);
}

static void test_avx512_linear_emulated(void **state)
{
    (void)state;
    if (nb_kernels_cpu_isa() < NB_ISA_AVX2) {
        fprintf(stderr, "[  SKIP    ] the emulation runs on AVX2, which this CPU lacks\n");
        skip();
    }
    static const int cols[] = {64, 576, 1536, 13, 100, 33};
    static const int ns[] = {1, 3, 4, 17, 70};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            run(37, cols[c], ns[k]);
    run(200, 576, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx512_linear_emulated),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nb_kernels_shutdown();
    return rc;
}
