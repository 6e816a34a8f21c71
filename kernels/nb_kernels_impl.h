/* nb_kernels_impl: what the dispatch table, the thread pool and the per-ISA kernel files share.
 * Internal to kernels/ (tests and benchmarks may use it too): the engine only sees nb_kernels.h. */
#ifndef NB_KERNELS_IMPL_H
#define NB_KERNELS_IMPL_H

#include <math.h>

#include "nb_kernels.h"
#include "nb_quant.h"

/* Weight layouts. ROWS: row-major, as nb_wmat_set_row gave them.
 * PACK8 (the SIMD paths): rows in groups of 8, interleaved so that one
 * kernel reading 8 rows at once streams memory sequentially: group g holds
 * rows 8g..8g+7 (rows past the end are zeros) as
 *   bf16/f32: for each 8-element chunk c < cols/8, the chunk of row 0..7
 *             (8 elements each); then the cols % 8 tail of row 0..7;
 *   quantized: for each block b, the leading scales of block b of rows
 *             0..7 (Q4_1 and Q4_K d,m / d,dmin: 4 bytes; Q8_0, Q5_0 and Q6_K
 *             d: 2, Q6_K's moved from the block's end), then the rest of block b
 *             for rows 0..7, so one F16C op converts 8 rows' scales. Q4_1, Q5_0,
 *             Q4_K and Q6_K keep 8 rows in the lanes of a vector: their parts go
 *             in 2- and 4-byte chunks (nb_kernels.c), Q5_0's fifth bits
 *             re-ordered.
 * A group is 8 * row_bytes long.
 * VNNI16 (bf16 only; the AVX-512 BF16 and AMX paths): rows in groups of
 * 16, cols padded with zeros to kp = a multiple of 32 (nb_vnni_cols); group
 * g holds, for each column pair p < kp/2, rows 16g..16g+15's elements 2p and
 * 2p+1 side by side: 64 bytes, one zmm for vdpbf16ps against a broadcast
 * pair of x, and 16 consecutive pairs (1 KiB) are one AMX B tile of 32
 * columns. So one layout serves both, and both stream it sequentially.
 * A group is 16 * kp * 2 bytes long. */
enum { NB_LAYOUT_ROWS = 0, NB_LAYOUT_PACK8 = 1, NB_LAYOUT_VNNI16 = 2 };
#define NB_PACK 8
#define NB_VNNI 16
#define NB_VNNI_KSTEP 32 /* columns per AMX tile row: 64 bytes of bf16 */

struct nb_wmat {
    nb_wtype type;
    int rows, cols;
    size_t row_bytes, bytes; /* bytes: rows * row_bytes, the logical size */
    uint8_t *data;           /* rows in `layout` */
    int layout;
    size_t alloc_bytes;      /* what data holds, with padding rows and a spare line */
    struct slab *slab;       /* the huge-page slab data lives in; NULL before finish */
};

/* Moves a matrix's rows (set, not yet finished) into its final home in a
 * huge-page slab, in the given layout. The finish entry of each path calls
 * this. */
nb_code nb_wmat_place(nb_wmat *w, int layout, nb_err *err);
/* Row r in the matrix's element type: a pointer into data (ROWS) or tmp,
 * filled with the row (tmp holds row_bytes). */
const uint8_t *nb_wmat_row(const nb_wmat *w, int r, uint8_t *tmp);
static inline const uint8_t *nb_wmat_group(const nb_wmat *w, int g)
{
    return w->data + (size_t)g * NB_PACK * w->row_bytes;
}

static inline int nb_vnni_cols(int cols)
{
    return (cols + NB_VNNI_KSTEP - 1) / NB_VNNI_KSTEP * NB_VNNI_KSTEP;
}
static inline const uint8_t *nb_wmat_vnni_group(const nb_wmat *w, int g)
{
    return w->data + (size_t)g * NB_VNNI * (size_t)nb_vnni_cols(w->cols) * 2;
}

/* Attention arguments as the public call received them; a path computes
 * the query rows [i0, i1) for the query heads [h0, h1). */
typedef struct nb_attn_args {
    void *out;
    const void *q, *kc, *vc;
    int n, pos0, n_heads, n_kv, hd;
} nb_attn_args;

/* One activation row in the Q8 form nb_q8_quantize_row makes. */
/* hs (may be NULL): per block, the sums of quants 0..15 and 16..31 as the low and high 16-bit
 * words of one int32 (nb_q8_half_sums), made once per row and call by the AVX2 linears so that
 * Q5_0's and Q6_K's offset terms need not sum x again for every group of 8 weight rows; kernels
 * compute the same integers themselves where it is NULL. */
/* warm: nonzero where the kernel's weight group was just read for another activation row (a
 * later row of a prefill block, nb_avx2.c), so the decode kernels skip their software prefetch
 * of the stream ahead (nb_prefetch_ahead), which only the first pass over the group needs. */
typedef struct nb_q8_act {
    const int8_t *q;
    const float *d, *s;
    const int32_t *hs;
    int warm;
} nb_q8_act;

/* The prefill GEMM of Q8_0 (nb_avx512_kquant.c, on AVX-512 VNNI): the same function as the
 * per-row kernel, bit for bit, with each weight group's conversion and scales shared by many
 * activation rows. The activations of a call go once into pair records (pairs(): rows 2p and
 * 2p+1 of the Q8 form side by side, pairs_bytes(n, K) bytes); a group of 8 weight rows is
 * expanded per block of activation rows (expand(): gemm_bytes(t, K) bytes at g); gemm() then
 * gives the 8 outputs of each of the n rows whose pair records start at pr (n even or odd; out
 * holds 8 * (n rounded up to even) floats; xs: the rows' d_x * sum(q) sums, n rows of K/32).
 * The types that keep rows in lanes (Q4_1, Q5_0, Q4_K, Q6_K) meet each activation row with
 * their decode kernels instead. */
typedef struct nb_kq_gemm_ops {
    size_t (*pairs_bytes)(int n, int K);
    void (*pairs)(const int8_t *xq, const float *xd, int n, int K, uint8_t *dst);
    size_t (*gemm_bytes)(nb_wtype t, int K);
    void (*expand)(nb_wtype t, const uint8_t *grp, int K, uint8_t *g);
    void (*gemm)(nb_wtype t, const uint8_t *g, int K, const uint8_t *pr, const float *xs, int n,
                 float *out);
} nb_kq_gemm_ops;
/* 1 for the types nb_kq_gemm_ops computes. */
static inline int nb_kq_gemm_type(nb_wtype t)
{
    return t == NB_W_Q8_0;
}
extern const nb_kq_gemm_ops nb_avx512_kq_gemm; /* nb_avx512_kquant.c */

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
    /* The bf16 linear whose every output row is, bit for bit, what linear_bf16 gives that row
     * alone (n = 1, the decode step): NULL when linear_bf16 already is (its prefill kernels
     * accumulate each row in the decode kernel's order). The AMX tile kernel is not: it adds
     * bf16 pairs in another order (nb_kernels_row_exact). */
    void (*linear_bf16_rows)(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                             int j0, int j1);
    void (*rmsnorm_bf16)(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim,
                         float eps);
    void (*silu_mul_bf16)(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n);
    void (*silu_mul_f32)(float *out, const float *g, const float *u, size_t n);
    void (*add_bf16)(nb_bf16 *x, const nb_bf16 *d, size_t n);
    void (*rope_bf16)(nb_bf16 *x, int n_heads, int hd, const float *cos, const float *sin);
    void (*attention_bf16)(const nb_attn_args *a, int i0, int i1, int h0, int h1);
    void (*attention_f32)(const nb_attn_args *a, int i0, int i1, int h0, int h1);
    /* The PACK8 Q8_0 kernel (NULL: the AVX2 one). */
    void (*q8_0_gemv8)(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
    /* The Q4_1, Q5_0, Q4_K and Q6_K kernels of 8 PACK8 rows (NULL: the nb_avx2_*_gemv8 ones); their
     * prefill runs them too, one activation row at a time. */
    void (*q4_1_gemv8)(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
    void (*q5_0_gemv8)(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
    void (*q4_k_gemv8)(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
    void (*q6_k_gemv8)(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
    /* The quantized prefill GEMM (NULL: the kernels above, one activation row at a time). */
    const nb_kq_gemm_ops *kq_gemm;
    /* The inner loops of nb_avx2.c's attention (NULL: its AVX2 ones): the scores of 4 query
     * rows against a key tile transposed to [hd][NB_ATTN_TK] (keys [0, lim), lim a multiple of
     * 16; out[k][p] = scale * sum over t in order of q_k[t] * kt[t][p]), and the weighted sums
     * of cnt <= 4 row-heads over the same n keys, acc[k][t] += w[k][p] * v[p][t] over p in
     * order (v rows of hd). Any version gives the same bits. */
    void (*attn_scores4)(const float *kt, const float *const q[4], int lim, int hd, float scale,
                         float *const out[4]);
    void (*attn_pv)(float *const acc[], const float *const w[], int cnt, const float *v, int n,
                    int hd);
} nb_kernel_table;

extern const nb_kernel_table nb_kernels_portable;
extern const nb_kernel_table nb_kernels_avx2; /* nb_avx2.c */
const nb_kernel_table *nb_kernels_active(void);
/* The best path the CPU (and OS) supports, ignoring NPUBENCH_ISA. */
nb_isa nb_kernels_cpu_isa(void);
/* Tests: makes t the active table, so a kernel built over emulated
 * instructions runs behind the public calls (thread pool, batches);
 * NULL restores the detected path. */
void nb_kernels_use_table(const nb_kernel_table *t);

#define NB_ATTN_TK 64 /* keys per attention tile */
/* nb_avx512.c's attention loops, 16 lanes wide (same sums, same order, same bits). */
void nb_avx512_attn_scores4(const float *kt, const float *const q[4], int lim, int hd,
                            float scale, float *const out[4]);
void nb_avx512_attn_pv(float *const acc[], const float *const w[], int cnt, const float *v,
                       int n, int hd);

/* The AVX-512 BF16 path is the AVX2 table with this linear kernel and
 * weight finish (nb_avx512.c): bf16 weights in VNNI16, the rest PACK8 and
 * handed to the AVX2 kernels. The AMX path is that table again with the
 * tile kernel (nb_amx.c), which hands small n to the AVX-512 one. */
void nb_avx2_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                         int j1);
void nb_avx512_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                           int j0, int j1);
nb_code nb_avx512_wmat_finish(nb_wmat *w, nb_err *err);
void nb_amx_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1);
/* The AMX table's linear where the CPU also has AMX-INT8 (nb_amx.c): quantized prefill (n >= 16)
 * on the int8 tiles, the same bits as the reference; everything else nb_amx_linear_bf16's. */
void nb_amx_linear_int8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1);
/* The AVX-512 table's linear where the CPU has AVX-512 VNNI (nb_amx_vnni.c): the same int8 tile
 * loop with the tile instructions on zmm registers, the same bits; everything else
 * nb_avx512_linear_bf16's. */
void nb_amx_vnni_linear_int8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                             int j0, int j1);

/* What the CPU and the OS offer, as the dispatcher reads them (CPUID leaves 1 and 7, XGETBV,
 * and whether Linux granted the tile data state), and what it decides from that alone. */
typedef struct nb_cpu_facts {
    int osxsave, avx, fma, f16c, avx2;
    int avx512f, avx512bw, avx512vl, avx512bf16, vnni;
    int amx_tile, amx_bf16, amx_int8;
    uint64_t xcr0;
    int tiles_permitted; /* arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) succeeded */
} nb_cpu_facts;

typedef struct nb_dispatch_choice {
    nb_isa best;  /* the fastest path the CPU and OS allow */
    int vnni;     /* quantized kernels on AVX-512 VNNI (the AVX-512 and AMX paths) */
    int amx_int8; /* quantized prefill on the int8 tiles (the AMX path) */
} nb_dispatch_choice;

void nb_dispatch_pick(const nb_cpu_facts *f, nb_dispatch_choice *out);
/* The AVX-512 and AMX tables for a choice, each built from the AVX2 table. */
void nb_dispatch_build(const nb_dispatch_choice *c, nb_kernel_table *avx512,
                       nb_kernel_table *amx);

/* Frees the weight slab kept for reuse once every matrix is gone. */
void nb_wmat_release_slabs(void);

/* The activation side of a quantized-weight linear (nb_portable.c): row x
 * of k (a multiple of 32) as k/32 Q8 blocks, quants q[k], scales d[k/32]
 * and d * sum(q) in s[k/32]. nb_avx2_q8_quantize_row is the same function,
 * bit for bit, 8 lanes at a time. */
void nb_q8_quantize_row(const float *x, int k, int8_t *q, float *d, float *s);
void nb_avx2_q8_quantize_row(const float *x, int k, int8_t *q, float *d, float *s);
/* hs[b] of a quantized row (nb_q8_act), nb blocks. */
void nb_q8_half_sums(const int8_t *q, int nb, int32_t *hs);
/* 8 IEEE halves at h (any alignment) to fp32, as nb_f16_to_f32 does each, in one F16C op: a
 * PACK8 group's 2-byte scale chunk (the AMX int8 tiles' B expansion). */
void nb_avx2_f16x8_to_f32(const uint8_t *h, float out[8]);


/* The k-quant and Q5_0 linears (nb_kquant.c defines the arithmetic): the reference dot of one
 * row (K values, blocks as stored) with x; 0 for other types. Their kernels of 8 PACK8 rows
 * (below) are the same function bit for bit. */
float nb_kquant_dot_ref(nb_wtype t, const uint8_t *row, int K, const nb_q8_act *x);
typedef void (*nb_q8_gemv8_fn)(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
/* Q4_1's kernel of 8 PACK8 rows (rows in the lanes, nb_avx2.c), and the same function bit for
 * bit on AVX-512 VNNI (nb_avx512_kquant.c: vpdpbusd for maddubs + madd). */
void nb_avx2_q4_1_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_q4_1_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
/* Q5_0's kernel of 8 PACK8 rows (rows in the lanes, nb_avx2_kquant.c), and the same function bit
 * for bit on AVX-512 VNNI (nb_avx512_kquant.c). */
void nb_avx2_q5_0_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_q5_0_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
/* Q5_0 prefill: nb_avx2_q5_0_gemv8 for 4 activation rows at once, each row's bits its own. */
void nb_avx2_q5_0_gemv8x4(const nb_q8_act x[4], const uint8_t *grp, int K, float out[4][8]);
/* Q4_K's and Q6_K's likewise. */
void nb_avx2_q4_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_q4_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx2_q6_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_q6_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
/* The AVX2 Q8_0 kernel of 8 PACK8 rows, bit for bit, on AVX-512 VNNI (nb_avx512_kquant.c). */
void nb_avx512_q8_0_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);

/* ---- thread pool (nb_pool.c) ---------------------------------------------
 * A fixed set of worker threads parked between calls (spin, then condvar).
 * nb_pool_run(fn, arg, want) runs fn(arg, tid, nt) once for each tid < nt =
 * min(want, size), the caller taking tid 0 and then any share no worker has
 * claimed by then (one thread may run several tids, in turn), and returns
 * when every call returned.
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

/* The public call the current kernel slice belongs to: set by the pool
 * task around each slice (0 outside one), so a path may keep per-thread
 * work across the slices of one call, such as converted activations. */
extern _Thread_local uint64_t nb_call_id;
/* Which converter last wrote this thread's scratch (the address of its memo): a memo of the
 * current call is valid only while this still names it, since a batch may run another type's
 * converter on the same scratch between two slices of one matrix type. */
extern _Thread_local const void *nb_scratch_owner;

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

/* Element-wise ops: tid's share of 0..n in multiples of 64, so SIMD bodies see whole vectors
 * (each element on its own: any split gives the same bits). */
static inline void nb_split_elems(size_t n, int tid, int nt, size_t *lo, size_t *hi)
{
    size_t units = (n + 63) / 64, per = units / (size_t)nt, extra = units % (size_t)nt;
    size_t t = (size_t)tid;
    size_t u0 = t * per + (t < extra ? t : extra);
    size_t u1 = u0 + per + (t < extra ? 1 : 0);
    *lo = u0 * 64 < n ? u0 * 64 : n;
    *hi = u1 * 64 < n ? u1 * 64 : n;
}

/* Below this many elements an element-wise or row op runs on the calling thread alone: the
 * pool's hand-off would cost more than the split saves. */
#define NB_PAR_MIN_ELEMS 32768

/* 1 / rms of one bf16 row for rmsnorm. Every ISA scales by this same float:
 * the sum of squares stays sequential, as in the reference, because it is
 * 1% of the op and a reordered sum would change the result. */
static inline float nb_rms_scale_bf16(const nb_bf16 *x, int dim, float eps)
{
    float ss = 0.0f;
    for (int t = 0; t < dim; t++) {
        float v = nb_bf16_to_f32(x[t]);
        ss += v * v;
    }
    return 1.0f / sqrtf(ss / (float)dim + eps);
}

/* The same scale for 4 rows of stride dim at once: four sequential sums side by side, each row's
 * in its own order, so the bits are nb_rms_scale_bf16's; the 4 dependency chains overlap (one
 * chain's add latency bounded Gemma's norms, 6 per layer plus the per-head q/k norms). */
static inline void nb_rms_scale4_bf16(const nb_bf16 *x, int dim, float eps, float r[4])
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    const nb_bf16 *x0 = x, *x1 = x + dim, *x2 = x + 2 * (size_t)dim, *x3 = x + 3 * (size_t)dim;
    for (int t = 0; t < dim; t++) {
        float v0 = nb_bf16_to_f32(x0[t]), v1 = nb_bf16_to_f32(x1[t]);
        float v2 = nb_bf16_to_f32(x2[t]), v3 = nb_bf16_to_f32(x3[t]);
        s0 += v0 * v0;
        s1 += v1 * v1;
        s2 += v2 * v2;
        s3 += v3 * v3;
    }
    r[0] = 1.0f / sqrtf(s0 / (float)dim + eps);
    r[1] = 1.0f / sqrtf(s1 / (float)dim + eps);
    r[2] = 1.0f / sqrtf(s2 / (float)dim + eps);
    r[3] = 1.0f / sqrtf(s3 / (float)dim + eps);
}

#endif
