/* nb_kernels: weight matrices, the thread pool's size and the public kernel entry points, which split
 * each call over the pool and run the active path's kernel on every slice (nb_portable.c, nb_avx2.c, ...). */
#include "nb_kernels.h"
#include "nb_kernels_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- weight matrices ------------------------------------------------------ */

const char *nb_wtype_name(nb_wtype t)
{
    switch (t) {
    case NB_W_F32: return "f32";
    case NB_W_BF16: return "bf16";
    case NB_W_Q4_1: return "q4_1";
    case NB_W_Q8_0: return "q8_0";
    case NB_W_Q5_0: return "q5_0";
    case NB_W_Q4_K: return "q4_k";
    case NB_W_Q6_K: return "q6_k";
    }
    return "?";
}

/* The nb_quant format of each in-memory weight type: sizes and dequantization come from there. */
static nb_quant_fmt wtype_fmt(nb_wtype t)
{
    switch (t) {
    case NB_W_F32: return NB_QUANT_F32;
    case NB_W_BF16: return NB_QUANT_BF16;
    case NB_W_Q4_1: return NB_QUANT_Q4_1;
    case NB_W_Q8_0: return NB_QUANT_Q8_0;
    case NB_W_Q5_0: return NB_QUANT_Q5_0;
    case NB_W_Q4_K: return NB_QUANT_Q4_K;
    case NB_W_Q6_K: return NB_QUANT_Q6_K;
    }
    return NB_QUANT_COUNT;
}

int nb_wtype_quantized(nb_wtype t)
{
    return t == NB_W_Q4_1 || t == NB_W_Q8_0 || t == NB_W_Q5_0 || t == NB_W_Q4_K ||
           t == NB_W_Q6_K;
}

int nb_wtype_of_quant(nb_quant_fmt f)
{
    switch (f) {
    case NB_QUANT_Q4_1: return NB_W_Q4_1;
    case NB_QUANT_Q8_0: return NB_W_Q8_0;
    case NB_QUANT_Q5_0: return NB_W_Q5_0;
    case NB_QUANT_Q4_K: return NB_W_Q4_K;
    case NB_QUANT_Q6_K: return NB_W_Q6_K;
    default: return -1;
    }
}

/* cols is a block multiple: nb_wmat_create checks it. */
static size_t wtype_row_bytes(nb_wtype t, int cols)
{
    nb_quant_fmt f = wtype_fmt(t);
    return (size_t)(cols / nb_quant_block_elems(f)) * (size_t)nb_quant_block_bytes(f);
}

/* A quantized block in PACK8 splits into its leading scales (the halves d, and m or dmin) and
 * the rest, so one F16C op converts 8 rows' scales (Q6_K's d, stored last, moves first). */
static size_t block_scale_bytes(nb_wtype t)
{
    switch (t) {
    case NB_W_Q4_1: return NB_QUANT_Q4_1_QS;
    case NB_W_Q4_K: return NB_QUANT_Q4_K_SCALES;
    case NB_W_Q8_0: return NB_QUANT_Q8_0_QS;
    case NB_W_Q5_0: return NB_QUANT_Q5_0_QH;
    case NB_W_Q6_K: return 2;
    default: return 0;
    }
}

/* Within those two parts, each row's bytes go in chunks: chunk c of row `lane` at
 * c * 8 * chunk + lane * chunk. Q4_1 chunks both finely: d0..d7 then m0..m7 (one F16C op
 * each), and its quants in 4-byte chunks, so one 32-byte load holds the same 4 quant bytes of 8
 * rows, a lane per row (nb_avx2.c's gemv8_q4_1). Q5_0 likewise: its rest (qh, then the 16 quant
 * bytes) in 4-byte chunks, qh re-ordered (q5_0_hbits); and Q4_K: d0..d7, dmin0..dmin7, then its
 * 12 scale bytes and 128 quant bytes in 4-byte chunks; and Q6_K: d0..d7, then ql, qh and its 16
 * scale bytes in 4-byte chunks. Q8_0 keeps each part of a row whole. */
static size_t block_scale_chunk(nb_wtype t)
{
    return t == NB_W_Q4_1 || t == NB_W_Q4_K || t == NB_W_Q6_K ? 2 : block_scale_bytes(t);
}
static size_t block_rest_chunk(nb_wtype t, size_t rest)
{
    return t == NB_W_Q8_0 ? rest : 4;
}

/* Q5_0's fifth bits in PACK8: bit 8i + k of the stored word is qh bit 4k + i and bit 8i + 4 + k
 * is qh bit 16 + 4k + i (i, k < 4), so the kernels move the bits of quant chunk k (weights
 * 4k..4k+3 and 16+4k..) to bit 4 of byte i with one shift each (nb_avx2_q5_0_gemv8).
 * to_grp: qh to that order; else back. */
static uint32_t q5_0_hbits(uint32_t v, int to_grp)
{
    uint32_t r = 0;
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++) {
            int a = 8 * i + k, b = 4 * k + i; /* stored bit a <-> qh bit b, and +4 / +16 */
            if (to_grp) {
                r |= ((v >> b) & 1u) << a;
                r |= ((v >> (b + 16)) & 1u) << (a + 4);
            } else {
                r |= ((v >> a) & 1u) << b;
                r |= ((v >> (a + 4)) & 1u) << (b + 16);
            }
        }
    return r;
}

/* Row `lane`'s n bytes at src into (to_grp) or out of a part of a group at g, in chunks of c. */
static void chunk_copy(uint8_t *g, uint8_t *row, size_t n, size_t c, int lane, int to_grp)
{
    for (size_t k = 0; c && k < n / c; k++) {
        uint8_t *at = g + k * NB_PACK * c + (size_t)lane * c;
        if (to_grp)
            memcpy(at, row + k * c, c);
        else
            memcpy(row + k * c, at, c);
    }
}

/* Q6_K's 6-bit quants in PACK8, re-coded so that a kernel gets the four groups of a half
 * super-block from three 4-byte chunks with few instructions (nb_q6_k_w4): for half h and
 * weight l = 4i + j of each group (i < 8, j < 4), with w_k the quant of group 4h + k,
 *   byte 4(16h + i) + j      = w_0 | (w_3 & 3) << 6          (where ql had its chunk 16h + i)
 *   byte 4(16h + 8 + i) + j  = w_1 | (w_3 >> 2 & 3) << 6     (ql's chunk 16h + 8 + i)
 *   byte 128 + 4(8h + i) + j = w_2 | (w_3 >> 4) << 6         (qh's chunk 8h + i)
 * q holds ql then qh (208 bytes of the block less d and scales come after); to_grp: to that
 * code, else back to ql / qh. */
static void q6_k_recode(uint8_t *q, int to_grp)
{
    uint8_t t[192];
    int w[8][32];
    if (to_grp)
        for (int g = 0; g < 8; g++)
            nb_quant_q6_k_group(q, g, w[g]);
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            uint8_t *a = (to_grp ? t : q) + 4 * (16 * h + l / 4) + l % 4, *b = a + 32;
            uint8_t *c = (to_grp ? t : q) + 128 + 4 * (8 * h + l / 4) + l % 4;
            int *wk[4] = {&w[4 * h][l], &w[4 * h + 1][l], &w[4 * h + 2][l], &w[4 * h + 3][l]};
            if (to_grp) {
                *a = (uint8_t)(*wk[0] | (*wk[3] & 3) << 6);
                *b = (uint8_t)(*wk[1] | (*wk[3] >> 2 & 3) << 6);
                *c = (uint8_t)(*wk[2] | (*wk[3] >> 4) << 6);
            } else {
                *wk[0] = *a & 63;
                *wk[1] = *b & 63;
                *wk[2] = *c & 63;
                *wk[3] = *a >> 6 | (*b >> 6) << 2 | (*c >> 6) << 4;
            }
        }
    if (to_grp) {
        memcpy(q, t, sizeof t);
        return;
    }
    memset(q, 0, 192); /* back to ql (low nibbles k < 2, high k >= 2) and qh (bits 2k) */
    for (int g = 0; g < 8; g++) {
        int h = g / 4, k = g % 4;
        for (int l = 0; l < 32; l++) {
            q[64 * h + 32 * (k & 1) + l] |= (uint8_t)((w[g][l] & 15) << (k < 2 ? 0 : 4));
            q[128 + 32 * h + l] |= (uint8_t)((w[g][l] >> 4) << (2 * k));
        }
    }
}

/* Block b of row `lane` into or out of a quantized PACK8 group. Q6_K's d (at the block's end)
 * goes first, as the other types' scales: the block is rotated by 208 bytes on the way, and
 * its quants re-coded (q6_k_recode). */
static void pack_block(const nb_wmat *w, uint8_t *grp, int b, int lane, uint8_t *row_blk,
                       int to_grp)
{
    nb_quant_fmt f = wtype_fmt(w->type);
    size_t bb = (size_t)nb_quant_block_bytes(f), sb = block_scale_bytes(w->type);
    uint8_t *g = grp + (size_t)b * NB_PACK * bb;
    uint8_t rot[NB_QUANT_Q6_K_BYTES], *blk = row_blk;
    if (w->type == NB_W_Q6_K) {
        blk = rot;
        if (to_grp) {
            memcpy(rot, row_blk + NB_QUANT_Q6_K_D, 2);
            memcpy(rot + 2, row_blk, NB_QUANT_Q6_K_D);
            q6_k_recode(rot + 2, 1);
        }
    }
    chunk_copy(g, blk, sb, block_scale_chunk(w->type), lane, to_grp);
    chunk_copy(g + NB_PACK * sb, blk + sb, bb - sb, block_rest_chunk(w->type, bb - sb), lane,
               to_grp);
    if (w->type == NB_W_Q6_K && !to_grp) {
        q6_k_recode(rot + 2, 0);
        memcpy(row_blk + NB_QUANT_Q6_K_D, rot, 2);
        memcpy(row_blk, rot + 2, NB_QUANT_Q6_K_D);
    }
    if (w->type == NB_W_Q5_0) { /* the qh chunk, now in the group (to_grp) or in blk */
        uint8_t *at = to_grp ? g + NB_PACK * sb + (size_t)lane * 4 : blk + sb;
        uint32_t v;
        memcpy(&v, at, 4);
        v = q5_0_hbits(v, to_grp);
        memcpy(at, &v, 4);
    }
}

/* Weights live in slabs of 2 MiB-aligned memory that ask for transparent
 * huge pages: decode streams every weight once per token, and with 4 KiB
 * pages TLB misses cost ~20% of the read bandwidth. Matrices are carved
 * from the current slab in order; a slab is freed with its last matrix. */
#define SLAB_ALIGN ((size_t)2 << 20)
#define SLAB_MIN ((size_t)32 << 20)

typedef struct slab {
    uint8_t *base;
    size_t size, used;
    int refs;
} slab;

static pthread_mutex_t slab_mu = PTHREAD_MUTEX_INITIALIZER;
static slab *slab_cur;

static uint8_t *slab_alloc(size_t bytes, slab **owner)
{
    bytes = (bytes + 63) & ~(size_t)63;
    pthread_mutex_lock(&slab_mu);
    slab *s = slab_cur;
    if (!s || s->size - s->used < bytes) {
        size_t size = bytes > SLAB_MIN ? (bytes + SLAB_ALIGN - 1) & ~(SLAB_ALIGN - 1) : SLAB_MIN;
        s = calloc(1, sizeof *s);
        uint8_t *base = s ? aligned_alloc(SLAB_ALIGN, size) : NULL;
        if (!base) {
            free(s);
            pthread_mutex_unlock(&slab_mu);
            return NULL;
        }
#ifdef MADV_HUGEPAGE
        (void)madvise(base, size, MADV_HUGEPAGE); /* advisory: fine if refused */
#endif
        s->base = base;
        s->size = size;
        if (slab_cur && slab_cur->refs == 0) {
            free(slab_cur->base);
            free(slab_cur);
        }
        slab_cur = s;
    }
    uint8_t *p = s->base + s->used;
    s->used += bytes;
    s->refs++;
    *owner = s;
    pthread_mutex_unlock(&slab_mu);
    return p;
}

static void slab_release(slab *s)
{
    pthread_mutex_lock(&slab_mu);
    if (--s->refs == 0 && s != slab_cur) {
        free(s->base);
        free(s);
    } else if (s->refs == 0) { /* the current slab, now empty: start it over */
        s->used = 0;
    }
    pthread_mutex_unlock(&slab_mu);
}

/* Frees the empty current slab (kernel shutdown), so a clean exit leaves
 * nothing allocated. */
void nb_wmat_release_slabs(void)
{
    pthread_mutex_lock(&slab_mu);
    if (slab_cur && slab_cur->refs == 0) {
        free(slab_cur->base);
        free(slab_cur);
        slab_cur = NULL;
    }
    pthread_mutex_unlock(&slab_mu);
}

nb_code nb_wmat_create(nb_wtype t, int rows, int cols, nb_wmat **out, nb_err *err)
{
    *out = NULL;
    if (t != NB_W_F32 && t != NB_W_BF16 && !nb_wtype_quantized(t))
        return nb_err_set(err, NB_EINVAL, "weight matrix: unknown element type %d", (int)t);
    if (rows <= 0 || cols <= 0 || rows > (1 << 24) || cols > (1 << 20))
        return nb_err_set(err, NB_EINVAL, "weight matrix %dx%d: dimensions out of range", rows,
                          cols);
    int be = nb_quant_block_elems(wtype_fmt(t));
    if (cols % be)
        return nb_err_set(err, NB_EINVAL,
                          "weight matrix %dx%d: %s needs cols to be a multiple of %d", rows, cols,
                          nb_wtype_name(t), be);
    nb_wmat *w = calloc(1, sizeof *w);
    if (!w)
        return nb_err_set(err, NB_ENOMEM, "out of memory for weight matrix");
    w->type = t;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = wtype_row_bytes(t, cols);
    w->bytes = w->row_bytes * (size_t)rows;
    /* Rows are staged in ordinary memory until finish places them. */
    w->alloc_bytes = (w->bytes + 63) & ~(size_t)63;
    w->data = aligned_alloc(64, w->alloc_bytes);
    if (!w->data) {
        free(w);
        return nb_err_set(err, NB_ENOMEM, "out of memory for %dx%d %s weights (%zu bytes)", rows,
                          cols, nb_wtype_name(t), wtype_row_bytes(t, cols) * (size_t)rows);
    }
    *out = w;
    return NB_OK;
}

void nb_wmat_set_row(nb_wmat *w, int r, const void *src)
{
    memcpy(w->data + (size_t)r * w->row_bytes, src, w->row_bytes);
}

/* Copies row r (row-major, src) into a PACK8 buffer dst. */
static void pack_row(const nb_wmat *w, uint8_t *dst, int r, const uint8_t *src)
{
    uint8_t *grp = dst + (size_t)(r / NB_PACK) * NB_PACK * w->row_bytes;
    int lane = r % NB_PACK;
    if (nb_wtype_quantized(w->type)) {
        nb_quant_fmt f = wtype_fmt(w->type);
        size_t bb = (size_t)nb_quant_block_bytes(f);
        for (int b = 0; b < w->cols / nb_quant_block_elems(f); b++)
            pack_block(w, grp, b, lane, (uint8_t *)src + (size_t)b * bb, 1);
        return;
    }
    size_t es = w->type == NB_W_BF16 ? 2 : 4;
    int K = w->cols, K8 = K & ~7, tail = K - K8;
    for (int c = 0; c < K8 / 8; c++)
        memcpy(grp + ((size_t)c * 64 + (size_t)lane * 8) * es, src + (size_t)c * 8 * es, 8 * es);
    if (tail)
        memcpy(grp + ((size_t)NB_PACK * K8 + (size_t)lane * tail) * es, src + (size_t)K8 * es,
               (size_t)tail * es);
}

/* Element c of row r in a VNNI16 buffer (nb_kernels_impl.h). */
static size_t vnni_offset(const nb_wmat *w, int r, int c)
{
    size_t grp = (size_t)(r / NB_VNNI) * NB_VNNI * (size_t)nb_vnni_cols(w->cols) * 2;
    return grp + (size_t)(c / 2) * NB_VNNI * 4 + (size_t)(r % NB_VNNI) * 4 + (size_t)(c % 2) * 2;
}

/* Row r in or out of a VNNI16 buffer: one bf16 at a time, done once at
 * setup (or per row read by a path that finished nothing itself). */
static void vnni_row(const nb_wmat *w, uint8_t *vnni, int r, uint8_t *row, int to_vnni)
{
    for (int c = 0; c < w->cols; c++) {
        uint8_t *v = vnni + vnni_offset(w, r, c);
        if (to_vnni)
            memcpy(v, row + (size_t)c * 2, 2);
        else
            memcpy(row + (size_t)c * 2, v, 2);
    }
}

static void unpack_row(const nb_wmat *w, int r, uint8_t *dst)
{
    if (w->layout == NB_LAYOUT_VNNI16) {
        vnni_row(w, w->data, r, dst, 0);
        return;
    }
    const uint8_t *grp = nb_wmat_group(w, r / NB_PACK);
    int lane = r % NB_PACK;
    if (nb_wtype_quantized(w->type)) {
        nb_quant_fmt f = wtype_fmt(w->type);
        size_t bb = (size_t)nb_quant_block_bytes(f);
        for (int b = 0; b < w->cols / nb_quant_block_elems(f); b++)
            pack_block(w, (uint8_t *)grp, b, lane, dst + (size_t)b * bb, 0);
        return;
    }
    size_t es = w->type == NB_W_BF16 ? 2 : 4;
    int K = w->cols, K8 = K & ~7, tail = K - K8;
    for (int c = 0; c < K8 / 8; c++)
        memcpy(dst + (size_t)c * 8 * es, grp + ((size_t)c * 64 + (size_t)lane * 8) * es, 8 * es);
    if (tail)
        memcpy(dst + (size_t)K8 * es, grp + ((size_t)NB_PACK * K8 + (size_t)lane * tail) * es,
               (size_t)tail * es);
}

const uint8_t *nb_wmat_row(const nb_wmat *w, int r, uint8_t *tmp)
{
    if (w->layout == NB_LAYOUT_ROWS)
        return w->data + (size_t)r * w->row_bytes;
    unpack_row(w, r, tmp);
    return tmp;
}

nb_code nb_wmat_place(nb_wmat *w, int layout, nb_err *err)
{
    if (w->slab)
        return nb_err_set(err, NB_EINVAL, "weight matrix %dx%d: finished twice", w->rows,
                          w->cols);
    if (layout == NB_LAYOUT_VNNI16 && w->type != NB_W_BF16)
        return nb_err_set(err, NB_EINVAL, "weight matrix %dx%d: VNNI16 holds bf16 only", w->rows,
                          w->cols);
    size_t rows = (size_t)w->rows, bytes = w->bytes;
    if (layout == NB_LAYOUT_PACK8) {
        rows = (rows + NB_PACK - 1) / NB_PACK * NB_PACK;
        bytes = rows * w->row_bytes;
    } else if (layout == NB_LAYOUT_VNNI16) {
        rows = (rows + NB_VNNI - 1) / NB_VNNI * NB_VNNI;
        bytes = rows * (size_t)nb_vnni_cols(w->cols) * 2;
    }
    /* One spare cache line: SIMD paths may load a whole vector that ends
     * past the last element (never using the extra lanes). */
    size_t alloc = ((bytes + 63) & ~(size_t)63) + 64;
    slab *s;
    uint8_t *dst = slab_alloc(alloc, &s);
    if (!dst)
        return nb_err_set(err, NB_ENOMEM, "out of memory for %dx%d %s weights (%zu bytes)",
                          w->rows, w->cols, nb_wtype_name(w->type), alloc);
    /* Zero what no row fills: padding lanes sit inside the last group. */
    size_t filled = layout == NB_LAYOUT_PACK8    ? (rows - NB_PACK) * w->row_bytes
                    : layout == NB_LAYOUT_VNNI16 ? 0 /* column padding everywhere */
                                                 : w->bytes;
    memset(dst + filled, 0, alloc - filled);
    if (layout == NB_LAYOUT_VNNI16)
        for (int r = 0; r < w->rows; r++)
            vnni_row(w, dst, r, w->data + (size_t)r * w->row_bytes, 1);
    else if (layout == NB_LAYOUT_PACK8)
        for (int r = 0; r < w->rows; r++)
            pack_row(w, dst, r, w->data + (size_t)r * w->row_bytes);
    else
        memcpy(dst, w->data, w->bytes);
    free(w->data);
    w->data = dst;
    w->slab = s;
    w->layout = layout;
    w->alloc_bytes = alloc;
    return NB_OK;
}

nb_code nb_wmat_finish(nb_wmat *w, nb_err *err)
{
    return nb_kernels_active()->wmat_finish(w, err);
}

void nb_wmat_free(nb_wmat *w)
{
    if (!w)
        return;
    if (w->slab)
        slab_release(w->slab);
    else
        free(w->data);
    free(w);
}

int nb_wmat_rows(const nb_wmat *w) { return w->rows; }
int nb_wmat_cols(const nb_wmat *w) { return w->cols; }
nb_wtype nb_wmat_type(const nb_wmat *w) { return w->type; }
size_t nb_wmat_bytes(const nb_wmat *w) { return w->alloc_bytes; }

void nb_wmat_get_row_f32(const nb_wmat *w, int r, float *dst)
{
    uint8_t *tmp = w->layout == NB_LAYOUT_ROWS ? NULL : nb_scratch_or_die(w->row_bytes);
    nb_quant_row_f32(wtype_fmt(w->type), nb_wmat_row(w, r, tmp), w->cols, dst);
}

/* ---- threads: the pool every entry point splits its calls over -------------- */

nb_code nb_kernels_init(int threads, nb_err *err)
{
    if (threads < 0 || threads > 1024)
        return nb_err_set(err, NB_EINVAL, "--threads %d: must be 0 (all cores) to 1024", threads);
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
        if (threads > 1024)
            threads = 1024;
    }
    (void)nb_kernels_active(); /* detect once, before any worker exists */
    return nb_pool_resize(threads, err);
}

int nb_kernels_threads(void)
{
    return nb_pool_size();
}

void nb_kernels_shutdown(void)
{
    nb_pool_shutdown();
    nb_scratch_release();
    nb_wmat_release_slabs();
}

/* ---- linear layers: split by rows of W -------------------------------------- */

/* Below this many multiply-adds a call runs on the caller alone: waking the
 * pool costs a few microseconds. */
#define PAR_MIN_MACS 32768.0
/* Row chunks are multiples of this, so every chunk is whole PACK8 and
 * VNNI16 groups and whole SIMD tiles (the AVX-512 and AMX kernels start a
 * group at every j0). */
#define ROW_ALIGN 16
#define GEMM_ROWS_MIN 4 /* n from which the paths switch to their prefill kernels */

/* Threads take row chunks from a shared counter instead of fixed halves:
 * on a loaded machine a descheduled worker then delays a call by at most
 * one chunk, not by its whole share. Prefill chunks are fewer and larger:
 * each one converts the activations again. */
_Thread_local uint64_t nb_call_id;
_Thread_local const void *nb_scratch_owner;
/* nb_kernels_row_exact: per calling thread, so one engine's check never changes another's. */
static _Thread_local int row_exact;

void nb_kernels_row_exact(int on)
{
    row_exact = on;
}

static atomic_uint_fast64_t call_seq;

#define MAX_BATCH 8

/* Chunks run over the matrices of a batch in order: chunk c belongs to
 * the matrix whose [first, first + n_chunks) range holds it. */
typedef struct lin_job {
    uint64_t id;
    const nb_kernel_table *kt;
    const void *X;
    void (*lin_bf16)(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                     int j1);
    int n, f32out, f32, count, n_chunks;
    struct {
        const nb_wmat *W;
        void *Y;
        int chunk, first, lo, hi; /* rows [lo, hi) in chunks from lo */
    } m[MAX_BATCH];
    nb_rows_done_fn done; /* nb_linear_head_rows: called per finished chunk */
    void *user;
    atomic_int next;
} lin_job;

static void lin_task(void *arg, int tid, int nt)
{
    (void)tid;
    (void)nt;
    lin_job *j = arg;
    nb_call_id = j->id;
    int k = 0;
    for (;;) {
        int c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (c >= j->n_chunks)
            break;
        while (k + 1 < j->count && c >= j->m[k + 1].first)
            k++;
        const nb_wmat *W = j->m[k].W;
        int j0 = j->m[k].lo + (c - j->m[k].first) * j->m[k].chunk;
        int j1 = j0 + j->m[k].chunk < j->m[k].hi ? j0 + j->m[k].chunk : j->m[k].hi;
        if (j->f32)
            j->kt->linear_f32(W, j->X, j->n, j->m[k].Y, j0, j1);
        else
            j->lin_bf16(W, j->X, j->n, j->m[k].Y, j->f32out, j0, j1);
        if (j->done)
            j->done(j->user, j0, j1, j->m[k].Y);
    }
    nb_call_id = 0;
}

/* Rows [lo, hi) of each W[k] (lo a multiple of ROW_ALIGN); NULL lo/hi: all rows. */
static void linear_batch_rows(const nb_wmat *const *W, void *const *Y, int count, const void *X,
                              int n, int f32out, int f32, const int *lo, const int *hi,
                              nb_rows_done_fn done, void *user)
{
    lin_job j = {.id = atomic_fetch_add(&call_seq, 1) + 1, .kt = nb_kernels_active(), .X = X,
                 .n = n, .f32out = f32out, .f32 = f32, .count = count, .done = done,
                 .user = user};
    j.lin_bf16 = row_exact && j.kt->linear_bf16_rows ? j.kt->linear_bf16_rows : j.kt->linear_bf16;
    double macs = 0;
    for (int k = 0; k < count; k++) {
        j.m[k].lo = lo ? lo[k] : 0;
        j.m[k].hi = hi ? hi[k] : W[k]->rows;
        macs += (double)n * (j.m[k].hi - j.m[k].lo) * W[k]->cols;
    }
    int nt = macs < PAR_MIN_MACS ? 1 : nb_pool_size();
    int want = nt == 1 ? 1 : nt * (n >= 4 ? 4 : 8); /* chunks per matrix */
    /* In decode, a matrix far larger than the caches (the LM head) gets chunks of about
     * 256 KiB of weights instead: a done callback then finds its outputs in cache, and a
     * descheduled thread holds up less. (Prefill keeps few chunks: each converts X again.) */
    for (int k = 0; k < count; k++) {
        int rows = j.m[k].hi - j.m[k].lo;
        int units = (rows + ROW_ALIGN - 1) / ROW_ALIGN;
        int per = (units + want - 1) / want;
        int cap = (int)((256u << 10) / ((size_t)ROW_ALIGN * W[k]->row_bytes + 1)) + 1;
        if (nt > 1 && n < GEMM_ROWS_MIN && per > cap)
            per = cap;
        j.m[k].W = W[k];
        j.m[k].Y = Y[k];
        j.m[k].chunk = per * ROW_ALIGN;
        j.m[k].first = j.n_chunks;
        j.n_chunks += (rows + j.m[k].chunk - 1) / j.m[k].chunk;
    }
    atomic_init(&j.next, 0);
    nb_pool_run(lin_task, &j, nt);
}

static void linear_batch(const nb_wmat *const *W, void *const *Y, int count, const void *X, int n,
                         int f32out, int f32)
{
    linear_batch_rows(W, Y, count, X, n, f32out, f32, NULL, NULL, NULL, NULL);
}

nb_code nb_linear_head_rows(const nb_wmat *W, const nb_bf16 *X, float *Y, int r0, int r1,
                            nb_rows_done_fn done, void *user, nb_err *err)
{
    if (r0 < 0 || r1 > W->rows || r0 > r1)
        return nb_err_set(err, NB_EINVAL, "head rows [%d, %d): must lie within [0, %d)", r0, r1,
                          W->rows);
    if (r0 % NB_HEAD_ROW_ALIGN)
        return nb_err_set(err, NB_EINVAL, "head rows [%d, %d): the start must be a multiple of %d",
                          r0, r1, NB_HEAD_ROW_ALIGN);
    if (r0 == r1)
        return NB_OK;
    void *y = Y;
    linear_batch_rows(&W, &y, 1, X, 1, 1, 0, &r0, &r1, done, user);
    return NB_OK;
}

static void linear(const nb_wmat *W, const void *X, int n, void *Y, int f32out, int f32)
{
    linear_batch(&W, &Y, 1, X, n, f32out, f32);
}

void nb_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, nb_bf16 *Y)
{
    linear(W, X, n, Y, 0, 0);
}

void nb_linear_bf16_f32out(const nb_wmat *W, const nb_bf16 *X, int n, float *Y)
{
    linear(W, X, n, Y, 1, 0);
}

void nb_linear_bf16_batch(const nb_wmat *const *W, nb_bf16 *const *Y, int count,
                          const nb_bf16 *X, int n)
{
    for (int k = 0; k < count; k += MAX_BATCH) {
        int c = count - k < MAX_BATCH ? count - k : MAX_BATCH;
        linear_batch(W + k, (void *const *)(Y + k), c, X, n, 0, 0);
    }
}

void nb_linear_f32_batch(const nb_wmat *const *W, float *const *Y, int count, const float *X,
                         int n)
{
    for (int k = 0; k < count; k += MAX_BATCH) {
        int c = count - k < MAX_BATCH ? count - k : MAX_BATCH;
        linear_batch(W + k, (void *const *)(Y + k), c, X, n, 0, 1);
    }
}

void nb_linear_f32(const nb_wmat *W, const float *X, int n, float *Y)
{
    linear(W, X, n, Y, 0, 1);
}

/* ---- element-wise: split by rows or elements ----------------------------------- */

typedef struct ew_job {
    const nb_kernel_table *kt;
    void *y;
    const void *a, *b;
    size_t n;
    int rows, dim;
    float eps;
} ew_job;

static void rms_task(void *arg, int tid, int nt)
{
    const ew_job *j = arg;
    int r0, r1;
    nb_split(j->rows, 1, tid, nt, &r0, &r1);
    if (r0 < r1)
        j->kt->rmsnorm_bf16((nb_bf16 *)j->y + (size_t)r0 * j->dim,
                            (const nb_bf16 *)j->a + (size_t)r0 * j->dim, j->b, r1 - r0, j->dim,
                            j->eps);
}

void nb_rmsnorm_bf16(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim, float eps)
{
    ew_job j = {nb_kernels_active(), y, x, w, 0, n, dim, eps};
    size_t elems = (size_t)n * dim;
    nb_pool_run(rms_task, &j, elems < NB_PAR_MIN_ELEMS || n < 2 ? 1 : nb_pool_size());
}

static void silu_task(void *arg, int tid, int nt)
{
    const ew_job *j = arg;
    size_t lo, hi;
    nb_split_elems(j->n, tid, nt, &lo, &hi);
    if (lo < hi)
        j->kt->silu_mul_bf16((nb_bf16 *)j->y + lo, (const nb_bf16 *)j->a + lo,
                             (const nb_bf16 *)j->b + lo, hi - lo);
}

static void silu_f32_task(void *arg, int tid, int nt)
{
    const ew_job *j = arg;
    size_t lo, hi;
    nb_split_elems(j->n, tid, nt, &lo, &hi);
    if (lo < hi)
        j->kt->silu_mul_f32((float *)j->y + lo, (const float *)j->a + lo,
                            (const float *)j->b + lo, hi - lo);
}

static void add_task(void *arg, int tid, int nt)
{
    const ew_job *j = arg;
    size_t lo, hi;
    nb_split_elems(j->n, tid, nt, &lo, &hi);
    if (lo < hi)
        j->kt->add_bf16((nb_bf16 *)j->y + lo, (const nb_bf16 *)j->a + lo, hi - lo);
}

void nb_silu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n)
{
    ew_job j = {nb_kernels_active(), out, g, u, n, 0, 0, 0};
    nb_pool_run(silu_task, &j, n < NB_PAR_MIN_ELEMS ? 1 : nb_pool_size());
}

void nb_silu_mul_f32(float *out, const float *g, const float *u, size_t n)
{
    ew_job j = {nb_kernels_active(), out, g, u, n, 0, 0, 0};
    nb_pool_run(silu_f32_task, &j, n < NB_PAR_MIN_ELEMS ? 1 : nb_pool_size());
}

void nb_add_bf16(nb_bf16 *x, const nb_bf16 *d, size_t n)
{
    ew_job j = {nb_kernels_active(), x, d, NULL, n, 0, 0, 0};
    nb_pool_run(add_task, &j, n < 4 * NB_PAR_MIN_ELEMS ? 1 : nb_pool_size());
}

void nb_rope_bf16(nb_bf16 *x, int n_heads, int hd, const float *cos, const float *sin)
{
    nb_kernels_active()->rope_bf16(x, n_heads, hd, cos, sin);
}

/* ---- attention: split over (query block, head range) items ----------------------- */

/* Query rows per prefill item: enough to share each converted key tile. */
#define ATTN_QB 16

typedef struct attn_job {
    const nb_kernel_table *kt;
    nb_attn_args a;
    int f32;
    int n_items, n_blocks, heads_per_item, items_per_block;
    atomic_int next;
} attn_job;

static void attn_task(void *arg, int tid, int nt)
{
    (void)tid;
    (void)nt;
    attn_job *j = arg;
    for (;;) {
        int it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (it >= j->n_items)
            break;
        /* Last query blocks first: they see the most keys. */
        int b = j->n_blocks - 1 - it / j->items_per_block;
        int h0 = (it % j->items_per_block) * j->heads_per_item;
        int i0 = b * ATTN_QB, i1 = i0 + ATTN_QB < j->a.n ? i0 + ATTN_QB : j->a.n;
        if (j->a.n == 1)
            i0 = 0, i1 = 1;
        if (j->f32)
            j->kt->attention_f32(&j->a, i0, i1, h0, h0 + j->heads_per_item);
        else
            j->kt->attention_bf16(&j->a, i0, i1, h0, h0 + j->heads_per_item);
    }
}

static void attention(void *out, const void *q, const void *kc, const void *vc, int n, int pos0,
                      int n_heads, int n_kv, int hd, int f32)
{
    if (n < 1)
        return;
    attn_job j = {.kt = nb_kernels_active(),
                  .a = {out, q, kc, vc, n, pos0, n_heads, n_kv, hd},
                  .f32 = f32};
    if (n == 1) {
        /* Decode: the heads of one kv group share each converted key and value tile, so an
         * item is as many heads of a group as still leaves every thread an item (a head per
         * item converted each tile group times over and scored one query four times). */
        int group = n_heads / n_kv, nt = nb_pool_size();
        j.n_blocks = 1;
        j.heads_per_item = group;
        while (j.heads_per_item > 1 && n_heads / j.heads_per_item < nt) {
            int h = j.heads_per_item - 1;
            while (group % h)
                h--;
            j.heads_per_item = h;
        }
    } else {
        j.n_blocks = (n + ATTN_QB - 1) / ATTN_QB;
        j.heads_per_item = n_heads / n_kv;
    }
    j.items_per_block = n_heads / j.heads_per_item;
    j.n_items = j.n_blocks * j.items_per_block;
    atomic_init(&j.next, 0);
    double work = (double)n * (pos0 + n) * n_heads * hd;
    nb_pool_run(attn_task, &j, work < PAR_MIN_MACS ? 1 : nb_pool_size());
}

void nb_attention_bf16(nb_bf16 *out, const nb_bf16 *q, const nb_bf16 *kc, const nb_bf16 *vc,
                       int n, int pos0, int n_heads, int n_kv, int hd)
{
    attention(out, q, kc, vc, n, pos0, n_heads, n_kv, hd, 0);
}

void nb_attention_f32(float *out, const float *q, const float *kc, const float *vc, int n,
                      int pos0, int n_heads, int n_kv, int hd)
{
    attention(out, q, kc, vc, n, pos0, n_heads, n_kv, hd, 1);
}
