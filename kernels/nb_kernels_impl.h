/* nb_kernels_impl: what the dispatch table and the per-ISA kernel files share.
 * Internal to kernels/: the engine only sees nb_kernels.h. */
#ifndef NB_KERNELS_IMPL_H
#define NB_KERNELS_IMPL_H

#include "nb_kernels.h"

struct nb_wmat {
    nb_wtype type;
    int rows, cols;
    size_t row_bytes, bytes;
    uint8_t *data;      /* rows in the element type, row-major */
    void *packed;       /* optional per-ISA repacked copy (NULL when unused) */
    size_t packed_bytes;
    nb_isa packed_isa;
};

/* One path's kernels. Linear kernels compute output columns [j0, j1) so the
 * thread pool can split work by rows of W. */
typedef struct nb_kernel_table {
    nb_isa isa;
    nb_code (*wmat_finish)(nb_wmat *w, nb_err *err);
    void (*linear_bf16)(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1);
    void (*linear_f32)(const nb_wmat *W, const float *X, int n, float *Y, int j0, int j1);
} nb_kernel_table;

extern const nb_kernel_table nb_kernels_portable;
const nb_kernel_table *nb_kernels_active(void);

/* Exact gguf-py block dequantization (float32 ops, no FMA). */
void nb_q4_1_block_f32(const uint8_t *blk, float *dst);
void nb_q8_0_block_f32(const uint8_t *blk, float *dst);

#endif
