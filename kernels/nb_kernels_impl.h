/* nb_kernels_impl: what the dispatch table, the thread pool and the per-ISA kernel files share.
 * Internal to kernels/ (tests and benchmarks may use it too): the engine only sees nb_kernels.h. */
#ifndef NB_KERNELS_IMPL_H
#define NB_KERNELS_IMPL_H

#include "nb_kernels.h"

struct nb_wmat {
    nb_wtype type;
    int rows, cols;
    size_t row_bytes, bytes;
    uint8_t *data;      /* rows in the element type, row-major: every path streams this */
    size_t alloc_bytes; /* bytes plus a zeroed spare cache line */
    struct slab *slab;  /* the huge-page slab data was carved from */
    void *packed;       /* optional per-ISA repacked copy (NULL: no path needs one today) */
    size_t packed_bytes;
    nb_isa packed_isa;
};

/* Attention arguments as the public call received them; a path computes
 * the query rows [i0, i1) for the query heads [h0, h1). */
typedef struct nb_attn_args {
    void *out;
    const void *q, *kc, *vc;
    int n, pos0, n_heads, n_kv, hd;
} nb_attn_args;

/* One path's kernels. Linear kernels compute output columns [j0, j1) so the
 * thread pool can split work by rows of W; element-wise kernels get a slice
 * of rows or elements. Every entry is a pure function of its slice: the
 * result never depends on how the work was split. */
typedef struct nb_kernel_table {
    nb_isa isa;
    nb_code (*wmat_finish)(nb_wmat *w, nb_err *err);
    void (*linear_bf16)(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1);
    void (*linear_f32)(const nb_wmat *W, const float *X, int n, float *Y, int j0, int j1);
    void (*rmsnorm_bf16)(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim,
                         float eps);
    void (*silu_mul_bf16)(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n);
    void (*silu_mul_f32)(float *out, const float *g, const float *u, size_t n);
    void (*add_bf16)(nb_bf16 *x, const nb_bf16 *d, size_t n);
    void (*attention_bf16)(const nb_attn_args *a, int i0, int i1, int h0, int h1);
    void (*attention_f32)(const nb_attn_args *a, int i0, int i1, int h0, int h1);
} nb_kernel_table;

extern const nb_kernel_table nb_kernels_portable;
extern const nb_kernel_table nb_kernels_avx2; /* nb_avx2.c */
const nb_kernel_table *nb_kernels_active(void);
/* The best path the CPU (and OS) supports, ignoring NPUBENCH_ISA. */
nb_isa nb_kernels_cpu_isa(void);

/* The AVX-512 BF16 path is the AVX2 table with this linear kernel
 * (nb_avx512.c), which hands non-bf16 weights to the AVX2 one. */
void nb_avx2_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                         int j1);
void nb_avx512_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                           int j0, int j1);

/* Frees the weight slab kept for reuse once every matrix is gone. */
void nb_wmat_release_slabs(void);

/* Exact gguf-py block dequantization (float32 ops, no FMA). */
void nb_q4_1_block_f32(const uint8_t *blk, float *dst);
void nb_q8_0_block_f32(const uint8_t *blk, float *dst);

/* ---- thread pool (nb_pool.c) ---------------------------------------------
 * A fixed set of worker threads parked between calls (spin, then condvar).
 * nb_pool_run(fn, arg, want) runs fn(arg, tid, nt) on nt = min(want, size)
 * threads, the caller being tid 0, and returns when every call returned.
 * A call made while another is in flight (another thread, or from inside
 * fn) runs fn(arg, 0, 1) inline, so every fn must accept any nt. */
typedef void (*nb_pool_fn)(void *arg, int tid, int nt);

nb_code nb_pool_resize(int n_threads, nb_err *err);
int nb_pool_size(void);
void nb_pool_run(nb_pool_fn fn, void *arg, int want);
void nb_pool_shutdown(void);

/* Per-thread scratch of at least bytes, 64-byte aligned; the same buffer
 * (grown when needed, contents lost) on each call from one thread, freed
 * when the thread exits. NULL only on out-of-memory. */
void *nb_scratch(size_t bytes);
/* Frees the calling thread's scratch now (shutdown, tests). */
void nb_scratch_release(void);
/* Like nb_scratch, but aborts on out-of-memory: kernels have no error
 * path, and their sizes are bounded at setup. */
void *nb_scratch_or_die(size_t bytes);

/* [lo, hi) of tid's share of 0..n, shares rounded to multiples of align. */
static inline void nb_split(int n, int align, int tid, int nt, int *lo, int *hi)
{
    int units = (n + align - 1) / align;
    int per = units / nt, extra = units % nt;
    int u0 = tid * per + (tid < extra ? tid : extra);
    int u1 = u0 + per + (tid < extra ? 1 : 0);
    *lo = u0 * align < n ? u0 * align : n;
    *hi = u1 * align < n ? u1 * align : n;
}

#endif
