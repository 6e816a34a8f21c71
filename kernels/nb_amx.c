/* nb_amx: the AMX linear kernels: bf16 weights on the bf16 tiles (tdpbf16ps), Q4_1 prefill on the int8
 * tiles (tdpbsud); every other op, and linears too small to fill a tile, are the AVX-512 BF16 path's.
 *
 * Numerics (Intel SDM, TDPBF16PS): for each output element, per column pair
 *   acc += bf16(a[2k]) * bf16(b[2k]);  acc += bf16(a[2k+1]) * bf16(b[2k+1])
 * round-to-nearest-even, denormal inputs read as zero, denormal results
 * flushed to zero, MXCSR ignored: the same operation as VDPBF16PS
 * (nb_avx512.c) in another order, so the same argument holds: products are
 * exact in fp32 and the result differs from portable by fp32 summation
 * order only (the documented tolerance, tests/test_kernels_emu.c).
 *
 * Tiles (palette 1, configured per thread at the start of each slice and
 * released at its end, so a context switch of an idle thread saves no
 * tile data): C0-C3 hold a 32x32 block of fp32 outputs (activation rows x
 * weight rows), A0/A1 16 activation rows x 32 columns each, B0/B1 32
 * columns x 16 weight rows each in VNNI pairs, which is the VNNI16 weight
 * layout verbatim: a B tile is 1 KiB of a group, read with a 64-byte stride.
 *
 * Q4_1 prefill runs on the int8 tiles where the CPU has AMX-INT8 (nb_amx_linear_int8, below).
 *
 * Built a second time by tests/kernels_amx_emu.c with NB_AMX_EMULATE over a
 * C emulation of the tile instructions, so the tiling is tested on every CPU. */
#ifndef NB_AMX_EMULATE
/* GCC spells the macros __AMX_TILE__/__AMX_BF16__, clang __AMXTILE__/__AMXBF16__. */
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || \
    !(defined(__AMX_BF16__) || defined(__AMXBF16__))
#error "nb_amx.c needs -mamx-tile -mamx-bf16 (CMakeLists.txt)"
#endif
#if !(defined(__AMX_INT8__) || defined(__AMXINT8__))
#error "nb_amx.c needs -mamx-int8 (CMakeLists.txt)"
#endif
#include <immintrin.h>
#define NB_AMX_LINEAR nb_amx_linear_bf16
#define NB_AMX_LINEAR_INT8 nb_amx_linear_int8
#define NB_AMX_SMALL nb_avx512_linear_bf16
#else
#define NB_AMX_LINEAR nb_amx_emu_linear_bf16
#define NB_AMX_LINEAR_INT8 nb_amx_emu_linear_int8
#define NB_AMX_SMALL nb_avx512_emu_linear_bf16
#endif

#include <string.h>

#include "nb_kernels_impl.h"

void NB_AMX_LINEAR(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                   int j1);
void NB_AMX_SMALL(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                  int j1);
void NB_AMX_LINEAR_INT8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1);

/* Below 16 activation rows an A tile is mostly padding: decode and short
 * prompts take the vector kernel, which is bound by weight bandwidth there. */
#define AMX_MIN_N 16
#define TM 16 /* tile rows */
#define TB 64 /* tile row bytes */

/* Tile numbers are immediates of the instructions: macros, not an enum,
 * so the intrinsics' stringizing sees the digits. */
#define T_C0 0
#define T_C1 1
#define T_C2 2
#define T_C3 3
#define T_A0 4
#define T_A1 5
#define T_B0 6
#define T_B1 7

/* The 64-byte LDTILECFG operand (SDM: palette, start_row, colsb[16] as
 * 16-bit, rows[16] as bytes); every tile used is 16 rows x 64 bytes. */
typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;
_Static_assert(sizeof(tilecfg) == 64, "LDTILECFG takes 64 bytes");

/* Palette 1 with C0-C3 16 rows x 64 bytes, A0/A1 16 rows x a_colsb, B0/B1 b_rows x 64 bytes. */
static void tiles_configure_shapes(int a_colsb, int b_rows)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = T_C0; t <= T_B1; t++) {
        int a = t == T_A0 || t == T_A1, b = t == T_B0 || t == T_B1;
        c.colsb[t] = (uint16_t)(a ? a_colsb : TB);
        c.rows[t] = (uint8_t)(b ? b_rows : TM);
    }
    _tile_loadconfig(&c);
}

/* bf16: every tile 16 rows x 64 bytes. */
static void tiles_configure(void)
{
    tiles_configure_shapes(TB, TM);
}

/* A thread's memo of the activations it converted in the current call (nb_call_id): 1 when X
 * (n x K) is already in buf and no other converter wrote the scratch since (nb_scratch_owner);
 * otherwise records them (the caller converts now) and gives 0. */
typedef struct x_memo {
    uint64_t id;
    const void *X, *buf;
    int n, K;
} x_memo;

static int x_memo_hit(x_memo *m, const void *X, const void *buf, int n, int K)
{
    if (nb_call_id && nb_scratch_owner == m && m->id == nb_call_id && m->X == X && m->buf == buf &&
        m->n == n && m->K == K)
        return 1;
    *m = (x_memo){nb_call_id, X, buf, n, K};
    nb_scratch_owner = m;
    return 0;
}

/* X as A-tile rows: n rounded up to 32 rows of kp columns, zero-padded
 * (padding rows and columns multiply zero weights and are never stored;
 * zeros rather than whatever follows X, since 0 * Inf would be NaN), once
 * per thread per call, like the AVX2 path's converted activations. */
static const nb_bf16 *pack_x(const nb_bf16 *X, int n, int K, int kp)
{
    int np = (n + 2 * TM - 1) / (2 * TM) * 2 * TM;
    nb_bf16 *xp = nb_scratch_or_die((size_t)np * kp * 2);
    static _Thread_local x_memo last;
    if (x_memo_hit(&last, X, xp, n, K))
        return xp;
    for (int i = 0; i < np; i++) {
        nb_bf16 *row = xp + (size_t)i * kp;
        int have = i < n ? K : 0;
        if (have)
            memcpy(row, X + (size_t)i * K, (size_t)K * 2);
        memset(row + have, 0, (size_t)(kp - have) * 2);
    }
    return xp;
}

/* One C tile (16 x 16 fp32) to Y: rows i.. below n, outputs j.. below j1. */
static void store_c(const float *c, void *Y, int f32out, size_t ld, int n, int i, int j, int j1)
{
    int rows = n - i < TM ? n - i : TM, cnt = j1 - j < NB_VNNI ? j1 - j : NB_VNNI;
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cnt; k++) {
            float v = c[r * NB_VNNI + k];
            if (f32out)
                ((float *)Y)[(size_t)(i + r) * ld + j + k] = v;
            else
                ((nb_bf16 *)Y)[(size_t)(i + r) * ld + j + k] = nb_f32_to_bf16(v);
        }
}

/* Outputs [j0, j1) for all n rows, 32 x 32 blocks: per 32 columns of K,
 * 2 A + 2 B tile loads feed 4 tdpbf16ps (each 16x16x32 MACs). Weight
 * columns outer, activation rows inner: the block's 64 KiB-per-1K-of-K of
 * weights stays in L2 while the packed X streams past it. A block past the
 * chunk's last group (j1 - j <= 16) still runs B1 on the next group or the
 * zero padding line, whose outputs are dropped: the tile shape stays fixed. */
static void gemm_tiles(const nb_wmat *W, const nb_bf16 *xp, int n, void *Y, int f32out, int j0,
                       int j1)
{
    int K = W->cols, kp = nb_vnni_cols(K), groups = (W->rows + NB_VNNI - 1) / NB_VNNI;
    size_t ld = (size_t)W->rows, xstride = (size_t)kp * 2;
    float c[TM * NB_VNNI];
    for (int j = j0; j < j1; j += 2 * NB_VNNI) {
        int g0 = j / NB_VNNI, g1 = g0 + 1 < groups ? g0 + 1 : g0;
        const uint8_t *b0 = nb_wmat_vnni_group(W, g0), *b1 = nb_wmat_vnni_group(W, g1);
        for (int i = 0; i < n; i += 2 * TM) {
            const uint8_t *a0 = (const uint8_t *)(xp + (size_t)i * kp), *a1 = a0 + TM * xstride;
            _tile_zero(T_C0);
            _tile_zero(T_C1);
            _tile_zero(T_C2);
            _tile_zero(T_C3);
            for (int k = 0; k < kp; k += NB_VNNI_KSTEP) {
                size_t boff = (size_t)k / 2 * TB; /* 16 pair rows of 64 bytes per step */
                _tile_loadd(T_A0, a0 + (size_t)k * 2, xstride);
                _tile_loadd(T_A1, a1 + (size_t)k * 2, xstride);
                _tile_loadd(T_B0, b0 + boff, TB);
                _tile_loadd(T_B1, b1 + boff, TB);
                _tile_dpbf16ps(T_C0, T_A0, T_B0);
                _tile_dpbf16ps(T_C1, T_A0, T_B1);
                _tile_dpbf16ps(T_C2, T_A1, T_B0);
                _tile_dpbf16ps(T_C3, T_A1, T_B1);
            }
            int jb = j + NB_VNNI;
            _tile_stored(T_C0, c, NB_VNNI * 4);
            store_c(c, Y, f32out, ld, n, i, j, j1);
            if (jb < j1) {
                _tile_stored(T_C1, c, NB_VNNI * 4);
                store_c(c, Y, f32out, ld, n, i, jb, j1);
            }
            if (i + TM < n) {
                _tile_stored(T_C2, c, NB_VNNI * 4);
                store_c(c, Y, f32out, ld, n, i + TM, j, j1);
                if (jb < j1) {
                    _tile_stored(T_C3, c, NB_VNNI * 4);
                    store_c(c, Y, f32out, ld, n, i + TM, jb, j1);
                }
            }
        }
    }
}

void NB_AMX_LINEAR(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                   int j1)
{
    if (W->layout != NB_LAYOUT_VNNI16 || n < AMX_MIN_N) {
        NB_AMX_SMALL(W, X, n, Y, f32out, j0, j1);
        return;
    }
    const nb_bf16 *xp = pack_x(X, n, W->cols, nb_vnni_cols(W->cols));
    tiles_configure();
    gemm_tiles(W, xp, n, Y, f32out, j0, j1);
    _tile_release();
}

/* ---- Q4_1 prefill on the int8 tiles (AMX-INT8, tdpbsud) ---------------------------------
 * The reference (nb_portable.c dot_q4_1) takes each 32-block's exact integer dot of the Q8
 * activation quants with the weight nibbles, then per block acc += float(isum) * (d_w d_x) and
 * mt += m_w s_x, output acc + mt. TDPBSUD gives the integer dots of 16 activation rows x 16
 * weight rows per block (A: 16 rows x 32 signed bytes, one block of the Q8 rows in place; B: 8
 * rows of 4-byte k-groups x 16 columns of unsigned nibbles), exact in int32 (|dot| <= 32 * 127
 * * 15); the float steps then run per block on 16-lane vectors in the same order, so the
 * result is the reference bit for bit.
 * Weights: Q4_1's PACK8 (4-byte chunks, nb_kernels.c) is repacked once at setup so that B row kg
 * of block b is two 32-byte chunks of two groups with a mask (kg < 4) or a shift and a mask:
 * expand_b builds a 16-row column tile's B rows and fp32 d, m per block (640 bytes a block) once
 * per 32 output columns, and every activation row tile of the call reuses it from L1/L2. */
#define QB_ROWS 8 /* B rows per block: 32 k / 4 */
#define QB_BLOCK (QB_ROWS * TB + 2 * NB_VNNI * 4) /* B rows, then d[16] and m[16] as fp32 */

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* C: 16 x 16 int32, A: 16 rows x 32 bytes, B: 8 rows x 64 bytes. */
static void tiles_configure_int8(void)
{
    tiles_configure_shapes(NB_QUANT_QK, QB_ROWS);
}

/* Weight rows j..j+15 (two PACK8 groups; a group past the matrix reads as zeros) as per-block B
 * tiles and fp32 scales at bt. */
static void expand_b(const nb_wmat *W, int j, uint8_t *bt)
{
    int nb = W->cols / NB_QUANT_QK, groups = (W->rows + NB_PACK - 1) / NB_PACK;
    for (int h = 0; h < 2; h++) {
        int g = j / NB_PACK + h;
        const uint8_t *grp = g < groups ? nb_wmat_group(W, g) : NULL;
        for (int b = 0; b < nb; b++) {
            uint8_t *o = bt + (size_t)b * QB_BLOCK;
            float *d = (float *)(o + QB_ROWS * TB), *m = d + NB_VNNI;
            if (!grp) {
                for (int kg = 0; kg < QB_ROWS; kg++)
                    memset(o + kg * TB + h * 32, 0, 32);
                for (int r = 0; r < NB_PACK; r++)
                    d[h * NB_PACK + r] = m[h * NB_PACK + r] = 0.0f;
                continue;
            }
            const uint8_t *blk = grp + (size_t)b * NB_PACK * NB_QUANT_Q4_1_BYTES;
            const uint8_t *q = blk + NB_PACK * NB_QUANT_Q4_1_QS;
            for (int kg = 0; kg < QB_ROWS; kg++) {
                const uint8_t *c = q + (kg % 4) * 32;
                uint8_t *dst = o + kg * TB + h * 32;
                int sh = kg < 4 ? 0 : 4;
                for (int t = 0; t < 32; t++)
                    dst[t] = (uint8_t)((c[t] >> sh) & 15);
            }
            for (int r = 0; r < NB_PACK; r++) {
                d[h * NB_PACK + r] = nb_quant_f16_at(blk + 2 * r);
                m[h * NB_PACK + r] = nb_quant_f16_at(blk + 2 * NB_PACK + 2 * r);
            }
        }
    }
}

/* The call's activations as Q8 rows (nb_avx2_q8_quantize_row: the reference's bits, 8 lanes at
 * a time; a CPU with AMX has AVX2, and the emulated build runs where AVX2 is), rows padded with
 * zero quants to a multiple of 32, once per thread per call as pack_x does. The scratch also
 * holds the B tiles of two column tiles, returned in *bt. */
typedef struct q8_rows {
    const int8_t *q;
    const float *d, *s;
} q8_rows;

static q8_rows quant_x(const nb_bf16 *X, int n, int K, uint8_t **bt)
{
    int np = (n + 2 * TM - 1) / (2 * TM) * 2 * TM, nb = K / NB_QUANT_QK;
    size_t qb = ((size_t)np * K + 63) & ~(size_t)63, fb = sizeof(float) * (2 * (size_t)n * nb);
    size_t xf = sizeof(float) * (size_t)K, bb = 2 * (size_t)nb * QB_BLOCK;
    fb = (fb + 63) & ~(size_t)63;
    xf = (xf + 63) & ~(size_t)63;
    uint8_t *base = nb_scratch_or_die(qb + fb + xf + bb);
    q8_rows x = {(const int8_t *)base, (const float *)(base + qb),
                 (const float *)(base + qb) + (size_t)n * nb};
    *bt = base + qb + fb + xf;
    static _Thread_local x_memo last;
    if (x_memo_hit(&last, X, base, n, K))
        return x;
    float *row = (float *)(base + qb + fb);
    for (int i = 0; i < n; i++) {
        for (int t = 0; t < K; t++)
            row[t] = nb_bf16_to_f32(X[(size_t)i * K + t]);
        nb_avx2_q8_quantize_row(row, K, (int8_t *)base + (size_t)i * K,
                                (float *)x.d + (size_t)i * nb, (float *)x.s + (size_t)i * nb);
    }
    memset(base + (size_t)n * K, 0, (size_t)(np - n) * K);
    return x;
}

/* One block's C tile (rows i.. of the 16, columns of B tile at o) into the float sums: per row,
 * acc += float(isum) * (d_w * d_x), mt += m_w * s_x, 16 weight rows at once. */
static void scale_tile(const int32_t *c, const uint8_t *o, const q8_rows *x, int nb, int b, int i,
                       int rows, float *acc, float *mt)
{
    v16f dw, mw, a, m;
    memcpy(&dw, o + QB_ROWS * TB, sizeof dw);
    memcpy(&mw, o + QB_ROWS * TB + sizeof dw, sizeof mw);
    for (int r = 0; r < rows; r++) {
        v16i is;
        memcpy(&is, c + r * NB_VNNI, sizeof is);
        float dx = x->d[(size_t)(i + r) * nb + b], sx = x->s[(size_t)(i + r) * nb + b];
        memcpy(&a, acc + r * 2 * NB_VNNI, sizeof a);
        memcpy(&m, mt + r * 2 * NB_VNNI, sizeof m);
        a = a + __builtin_convertvector(is, v16f) * (dw * dx);
        m = m + mw * sx;
        memcpy(acc + r * 2 * NB_VNNI, &a, sizeof a);
        memcpy(mt + r * 2 * NB_VNNI, &m, sizeof m);
    }
}

/* Outputs [j0, j1) of n >= 16 rows of a Q4_1 matrix: per 32 output columns, the two column
 * tiles' B once, then per 32 activation rows and block 2 A + 2 B tile loads, 4 tdpbsud and the
 * 4 C tiles' float steps; the block's sums stay in acc/mt (32 x 32 each, L1). */
static void gemm_q4_1(const nb_wmat *W, const q8_rows *x, uint8_t *bt, int n, void *Y,
                      int f32out, int j0, int j1)
{
    int K = W->cols, nb = K / NB_QUANT_QK;
    size_t ld = (size_t)W->rows;
    uint8_t *bt1 = bt + (size_t)nb * QB_BLOCK;
    int32_t c[4][TM * NB_VNNI];
    float acc[2 * TM * 2 * NB_VNNI], mt[2 * TM * 2 * NB_VNNI];
    for (int j = j0; j < j1; j += 2 * NB_VNNI) {
        int two = j + NB_VNNI < j1;
        expand_b(W, j, bt);
        if (two)
            expand_b(W, j + NB_VNNI, bt1);
        for (int i = 0; i < n; i += 2 * TM) {
            memset(acc, 0, sizeof acc);
            memset(mt, 0, sizeof mt);
            const int8_t *a0 = x->q + (size_t)i * K, *a1 = a0 + (size_t)TM * K;
            for (int b = 0; b < nb; b++) {
                const uint8_t *o0 = bt + (size_t)b * QB_BLOCK;
                const uint8_t *o1 = two ? bt1 + (size_t)b * QB_BLOCK : o0;
                _tile_zero(T_C0);
                _tile_zero(T_C1);
                _tile_zero(T_C2);
                _tile_zero(T_C3);
                _tile_loadd(T_A0, a0 + (size_t)b * NB_QUANT_QK, (long)K);
                _tile_loadd(T_A1, a1 + (size_t)b * NB_QUANT_QK, (long)K);
                _tile_loadd(T_B0, o0, TB);
                _tile_loadd(T_B1, o1, TB);
                _tile_dpbsud(T_C0, T_A0, T_B0);
                _tile_dpbsud(T_C1, T_A0, T_B1);
                _tile_dpbsud(T_C2, T_A1, T_B0);
                _tile_dpbsud(T_C3, T_A1, T_B1);
                _tile_stored(T_C0, c[0], NB_VNNI * 4);
                _tile_stored(T_C1, c[1], NB_VNNI * 4);
                _tile_stored(T_C2, c[2], NB_VNNI * 4);
                _tile_stored(T_C3, c[3], NB_VNNI * 4);
                for (int t = 0; t < 4; t++) {
                    int ii = i + (t >> 1) * TM, rows = n - ii < TM ? n - ii : TM;
                    if (rows <= 0 || (!two && (t & 1)))
                        continue;
                    size_t off = (size_t)(t >> 1) * TM * 2 * NB_VNNI + (size_t)(t & 1) * NB_VNNI;
                    scale_tile(c[t], (t & 1) ? o1 : o0, x, nb, b, ii, rows, acc + off, mt + off);
                }
            }
            int rows = n - i < 2 * TM ? n - i : 2 * TM, cols = j1 - j < 2 * NB_VNNI ? j1 - j : 2 * NB_VNNI;
            for (int r = 0; r < rows; r++)
                for (int k = 0; k < cols; k++) {
                    float v = acc[r * 2 * NB_VNNI + k] + mt[r * 2 * NB_VNNI + k];
                    size_t idx = (size_t)(i + r) * ld + j + k;
                    if (f32out)
                        ((float *)Y)[idx] = v;
                    else
                        ((nb_bf16 *)Y)[idx] = nb_f32_to_bf16(v);
                }
        }
    }
}

/* The AMX path's linear where the CPU has AMX-INT8: Q4_1 prefill on the int8 tiles, the rest
 * (bf16 on the bf16 tiles, decode and other types on the AVX-512 kernels) as before. */
void NB_AMX_LINEAR_INT8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1)
{
    if (W->type != NB_W_Q4_1 || W->layout != NB_LAYOUT_PACK8 || n < AMX_MIN_N) {
        NB_AMX_LINEAR(W, X, n, Y, f32out, j0, j1);
        return;
    }
    uint8_t *bt;
    q8_rows x = quant_x(X, n, W->cols, &bt);
    tiles_configure_int8();
    gemm_q4_1(W, &x, bt, n, Y, f32out, j0, j1);
    _tile_release();
}
