/* portable_isa: the fuzz build's stand-ins for the AVX2/AVX-512 kernel files (gcc-only today):
 * NPUBENCH_ISA is pinned to portable before main, and reaching a stand-in aborts naming it. */
#include <stdio.h>
#include <stdlib.h>

#include "nb_kernels_impl.h"

__attribute__((constructor)) static void portable_only(void)
{
    setenv("NPUBENCH_ISA", "portable", 1);
}

static void unreachable(const char *what)
{
    fprintf(stderr, "portable_isa: %s called in a portable-only build\n", what);
    abort();
}

const nb_kernel_table nb_kernels_avx2 = {.isa = NB_ISA_PORTABLE};

void nb_avx2_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                         int j1)
{
    (void)W, (void)X, (void)n, (void)Y, (void)f32out, (void)j0, (void)j1;
    unreachable("nb_avx2_linear_bf16");
}

void nb_avx512_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                           int j0, int j1)
{
    (void)W, (void)X, (void)n, (void)Y, (void)f32out, (void)j0, (void)j1;
    unreachable("nb_avx512_linear_bf16");
}

void nb_avx2_q8_quantize_row(const float *x, int k, int8_t *q, float *d, float *s)
{
    (void)x, (void)k, (void)q, (void)d, (void)s;
    unreachable("nb_avx2_q8_quantize_row");
}
