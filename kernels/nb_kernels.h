/* nb_kernels: the CPU compute kernels the engine calls, with run-time dispatch
 * (AMX-BF16, AVX-512 BF16, AVX2+FMA, portable C). Every path agrees with the portable one up to fp32 rounding. */
#ifndef NB_KERNELS_H
#define NB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_bf16.h"
#include "nb_err.h"
#include "nb_quant.h"

/* ---- dispatch and threads ---------------------------------------------- */

typedef enum nb_isa {
    NB_ISA_PORTABLE = 0,
    NB_ISA_AVX2,      /* AVX2 + FMA + F16C */
    NB_ISA_AVX512BF16, /* AVX-512F/BW/VL + AVX512_BF16 */
    NB_ISA_AMXBF16     /* that + AMX-TILE/AMX-BF16, XTILEDATA granted by the kernel */
} nb_isa;

/* The best path this CPU supports, capped by
 * NPUBENCH_ISA=portable|avx2|avx512bf16|amx-bf16. */
nb_isa nb_kernels_isa(void);
/* Forces a path (tests compare each against portable). Returns NB_EUNSUPPORTED
 * when the CPU lacks it, leaving the current path. */
nb_code nb_kernels_set_isa(nb_isa isa, nb_err *err);
const char *nb_isa_name(nb_isa isa);

/* Sizes the persistent thread pool the kernels use; 0 = all online cores.
 * Call at setup (again with another count resizes the pool; not while
 * kernels run). Kernels called before it run single-threaded. Kernel calls
 * from several threads at once are safe: one gets the pool, the others run
 * on their caller alone. Results never depend on the thread count. */
nb_code nb_kernels_init(int n_threads, nb_err *err);
int nb_kernels_threads(void);
/* Stops the pool and frees the calling thread's scratch and the empty
 * weight slab (clean exits under LeakSanitizer). */
void nb_kernels_shutdown(void);

/* ---- weight matrices --------------------------------------------------- */

/* Element types a weight matrix can hold in memory. */
typedef enum nb_wtype {
    NB_W_F32 = 0, /* fp32 (the f32 deployment dtype) */
    NB_W_BF16,    /* bf16 (the HF-faithful default) */
    NB_W_Q4_1,    /* GGUF Q4_1 blocks, kept packed; integer dots with Q8 activations */
    NB_W_Q8_0,    /* GGUF Q8_0 blocks, likewise */
    NB_W_Q5_0,    /* GGUF Q5_0 blocks, likewise */
    NB_W_Q4_K,    /* GGUF Q4_K super-blocks of 256, likewise (cols a multiple of 256) */
    NB_W_Q6_K     /* GGUF Q6_K super-blocks of 256, likewise */
} nb_wtype;

const char *nb_wtype_name(nb_wtype t);
/* 1 for the types that keep GGUF blocks (set_row takes the blocks as stored), else 0. */
int nb_wtype_quantized(nb_wtype t);
/* The block-keeping weight type of a stored quantized format (nb_quant.h), or -1 when the
 * kernels have no native linear for it (the caller then dequantizes to bf16 or f32). */
int nb_wtype_of_quant(nb_quant_fmt f);

/* An nn.Linear weight [rows x cols] in the layout the active path streams
 * best (the SIMD paths interleave 8 rows; portable keeps rows); built once
 * at setup. Any path computes on any layout (a mismatch is only slower).
 * Owned by the caller (nb_wmat_free). */
typedef struct nb_wmat nb_wmat;

nb_code nb_wmat_create(nb_wtype t, int rows, int cols, nb_wmat **out, nb_err *err);
/* Copies row r, given in the matrix's own element type (floats, bf16, or
 * cols/32 GGUF blocks). */
void nb_wmat_set_row(nb_wmat *w, int r, const void *src);
/* Moves the rows into huge-page memory in the active path's layout; call
 * once, after every row is set (set_row is invalid afterwards). */
nb_code nb_wmat_finish(nb_wmat *w, nb_err *err);
void nb_wmat_free(nb_wmat *w);
int nb_wmat_rows(const nb_wmat *w);
int nb_wmat_cols(const nb_wmat *w);
nb_wtype nb_wmat_type(const nb_wmat *w);
size_t nb_wmat_bytes(const nb_wmat *w); /* memory held, padding included */
/* Row r as fp32 (for embedding lookups): exact for f32/bf16, the block
 * dequantization for quantized types. */
void nb_wmat_get_row_f32(const nb_wmat *w, int r, float *dst);

/* Linear layers: Y[n x rows] = X[n x cols] . W^T, fp32 accumulation.
 * _bf16: bf16 activations in and out (each output rounded to bf16, as a
 * bf16 nn.Linear); W may be BF16 or any block-keeping type. Quantized W meets X
 * quantized to Q8 per 32-block (llama.cpp's q8_1; docs/numerics.md), so
 * its result is that approximation, the same on every path.
 * _bf16_f32out: same product, fp32 outputs (the LM head feeds top-k).
 * _f32: fp32 activations and W. */
void nb_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, nb_bf16 *Y);
void nb_linear_bf16_f32out(const nb_wmat *W, const nb_bf16 *X, int n, float *Y);
void nb_linear_f32(const nb_wmat *W, const float *X, int n, float *Y);
/* The LM head of one decode step: Y[j] = X . W[j] for the rows j in [r0, r1) only (Y indexed
 * by j, other entries untouched), fp32 outputs as nb_linear_bf16_f32out computes them, bit for
 * bit, split over the thread pool. When done is not NULL, each thread calls done(user, j0, j1,
 * Y) as soon as it has finished the rows [j0, j1) (disjoint chunks covering [r0, r1), any order,
 * concurrently from several threads): a top-k can then scan the chunk while it is in cache. */
typedef void (*nb_rows_done_fn)(void *user, int j0, int j1, const float *Y);
/* r0 must be a multiple of NB_HEAD_ROW_ALIGN (kernels start whole row groups there) and
 * 0 <= r0 <= r1 <= rows, else NB_EINVAL naming the range. */
#define NB_HEAD_ROW_ALIGN 16
nb_code nb_linear_head_rows(const nb_wmat *W, const nb_bf16 *X, float *Y, int r0, int r1,
                            nb_rows_done_fn done, void *user, nb_err *err);
/* On (non-zero) for the calling thread: every bf16 linear it calls computes each row as the
 * active path's decode step (n = 1) would, bit for bit, whatever n is, on that path's fastest
 * kernel that does (the AVX-512 BF16 one on the AMX path; every other path's prefill kernels
 * already do). A prefill so computed compares with decode steps like with like
 * (verify/nb_localize.c's decode-path check). Off by default. */
void nb_kernels_row_exact(int on);
/* Several linears of the same X in one parallel call (Y[k] = X . W[k]^T,
 * each as nb_linear_bf16 / nb_linear_f32 would compute it, bit for bit):
 * q/k/v or gate/up pay one thread-pool hand-off instead of several. All
 * W[k] must have the same cols. */
void nb_linear_bf16_batch(const nb_wmat *const *W, nb_bf16 *const *Y, int count,
                          const nb_bf16 *X, int n);
void nb_linear_f32_batch(const nb_wmat *const *W, float *const *Y, int count, const float *X,
                         int n);

/* ---- element-wise and row ops ------------------------------------------ */
/* bf16 variants round exactly where HF transformers' bf16 Llama rounds. */

/* LlamaRMSNorm: v = mean(x^2) in fp32; h = bf16(x * 1/sqrt(v + eps));
 * y = bf16(w * h). n rows of dim. */
void nb_rmsnorm_bf16(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim, float eps);
void nb_rmsnorm_f32(float *y, const float *x, const float *w, int n, int dim, float eps);

/* HF rotate_half RoPE on n_heads vectors of hd at one position.
 * cos/sin: hd/2 values (the table already rounded to bf16 in bf16 mode).
 * bf16: a' = bf16(bf16(a*c) + bf16(-b*s)), b' = bf16(bf16(b*c) + bf16(a*s))
 * for a = x[i], b = x[i + hd/2]. */
void nb_rope_bf16(nb_bf16 *x, int n_heads, int hd, const float *cos, const float *sin);
void nb_rope_f32(float *x, int n_heads, int hd, const float *cos, const float *sin);

/* out = bf16(bf16(silu(g)) * u) (HF: act_fn(gate) * up, both bf16 ops). */
void nb_silu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n);
void nb_silu_mul_f32(float *out, const float *g, const float *u, size_t n);

/* Gemma's RMSNorm: y = bf16((x * 1/sqrt(mean(x^2) + eps)) * w) all in fp32, w the fp32 weight
 * (1 + HF's parameter). f32 activations use nb_rmsnorm_f32 with that weight. */
void nb_rmsnorm_f32w_bf16(nb_bf16 *y, const nb_bf16 *x, const float *w, int n, int dim,
                          float eps);

/* out = bf16(bf16(gelu_tanh(g)) * u) (HF: gelu_pytorch_tanh(gate) * up, both bf16 ops). */
void nb_gelu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n);
void nb_gelu_mul_f32(float *out, const float *g, const float *u, size_t n);

/* x = bf16(x + d): the residual add. */
void nb_add_bf16(nb_bf16 *x, const nb_bf16 *d, size_t n);
void nb_add_f32(float *x, const float *d, size_t n);

/* Causal GQA attention for n query rows at positions pos0..pos0+n-1 against
 * cache rows 0..pos0+n-1 (the rows for the queries themselves included).
 * q/out: [n][n_heads*hd]; k/v cache: [ctx][n_kv*hd] rows. Scores, softmax
 * (scale 1/sqrt(hd)) and the weighted sum are fp32; only out is rounded
 * (bf16 variant). Query head h reads kv head h / (n_heads / n_kv). */
void nb_attention_bf16(nb_bf16 *out, const nb_bf16 *q, const nb_bf16 *kc, const nb_bf16 *vc,
                       int n, int pos0, int n_heads, int n_kv, int hd);
void nb_attention_f32(float *out, const float *q, const float *kc, const float *vc, int n,
                      int pos0, int n_heads, int n_kv, int hd);

/* The k largest of x[0..n): value descending, ties to the smaller index.
 * k <= n; ids/vals hold k entries. NaN sorts last. */
void nb_topk_f32(const float *x, int n, int k, int32_t *ids, float *vals);

#endif
