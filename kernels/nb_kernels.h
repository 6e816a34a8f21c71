/* nb_kernels: the CPU compute kernels the engine calls, with run-time dispatch
 * (AVX-512 BF16, AVX2+FMA, portable C). Every path agrees with the portable one up to fp32 rounding. */
#ifndef NB_KERNELS_H
#define NB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_bf16.h"

typedef enum nb_isa {
    NB_ISA_PORTABLE = 0,
    NB_ISA_AVX2,      /* AVX2 + FMA + F16C */
    NB_ISA_AVX512BF16 /* AVX-512F/BW/VL + AVX512_BF16 */
} nb_isa;

/* Detects the best path once; NPUBENCH_ISA=portable|avx2|avx512bf16 caps it. */
nb_isa nb_kernels_isa(void);
/* Forces a path (tests compare each against portable); returns the previous.
 * Asking for a path the CPU lacks keeps the current one and returns -1. */
int nb_kernels_set_isa(nb_isa isa);
const char *nb_isa_name(nb_isa isa);

/* Matrix products. W is row-major [m rows x k cols] (an nn.Linear weight);
 * X is [n x k]; Y is [n x m]: Y[i][j] = sum_t X[i][t] * W[j][t], accumulated
 * in fp32. The _bf16 variants round each output to bf16 (a bf16 Linear). */
void nb_matmul_bf16(nb_bf16 *Y, const nb_bf16 *X, const nb_bf16 *W, int n, int k, int m);
void nb_matmul_f32(float *Y, const float *X, const float *W, int n, int k, int m);
/* Same product with fp32 outputs (the LM head feeds top-k in fp32). */
void nb_matmul_bf16_f32out(float *Y, const nb_bf16 *X, const nb_bf16 *W, int n, int k, int m);

#endif
