/* test_kernels_emu: the AVX-512 BF16 linear kernel built over an emulation of its few AVX-512
 * intrinsics (SDM semantics) and checked against portable, so its tiling is tested on CPUs without AVX-512. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"

#include "kernels_testlib.h"
#include "nb_kernels_impl.h"

/* nb_avx512.c over the emulated intrinsics (kernels_emu.c). */
void nb_avx512_emu_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                               int j0, int j1);

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
    if (nb_kernels_cpu_isa() < NB_ISA_AVX2)
        tu_skip("the emulation runs on AVX2, which this CPU lacks");
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
    int rc = tu_run_group(tests, NULL, NULL);
    nb_kernels_shutdown();
    return rc;
}
