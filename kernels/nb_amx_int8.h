/* nb_amx_int8: the AMX tile shapes and the int8 tile loop of quantized prefill, included by
 * nb_amx.c (the AMX tiles, or their C emulation) and nb_amx_vnni.c (the tiles on zmm registers).
 *
 * The includer defines the tile intrinsics used here (_tile_loadconfig, _tile_release,
 * _tile_zero, _tile_loadd, _tile_stored, _tile_dpbsud, _tile_dpbssd), NB_AMX_LINEAR_INT8 (the
 * linear built here) and NB_AMX_INT8_REST (its linear for everything the loop does not take),
 * and may define NB_AMX_INT8_TAKES(type) to keep some types off the loop. */
#include <stddef.h>
#include <string.h>

#include "nb_kernels_impl.h"

#ifndef NB_AMX_INT8_TAKES
#define NB_AMX_INT8_TAKES(t) 1
#endif

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

/* ---- quantized prefill on the int8 tiles (AMX-INT8: tdpbsud, tdpbssd) ----------------------
 * Every quantized type's reference (nb_portable.c Q4_1 / Q8_0, nb_kquant.c Q5_0 / Q4_K / Q6_K)
 * takes exact integer dots of the Q8 activation quants with the weight quants over fixed spans
 * of each 32-block, then one float step per span and output, blocks in order. The tiles give
 * exactly those integer dots for 16 activation rows x 16 weight rows at once (A: 16 of the Q8
 * rows in place; B: the weights as rows of 4-byte k-groups x 16 columns; int32, exact since
 * |dot| <= 32 * 127 * 127), and the float steps then run on 16-lane vectors (a lane per weight
 * row) in the reference's order, so the result is the reference bit for bit. What a type
 * changes is a small table (qt_ops): how many tile products a 32-block takes (Q8_0's 8 lanes of
 * 4 weights, Q6_K's two 16-value halves, one for the others), signed or
 * unsigned weights, how its PACK8 block expands to B rows and per-column fp32 factors, its
 * float step and its output. B is expanded once per 32 output columns (QB_NF vectors of 16
 * factors, then 8 rows of 64 bytes per product, per 32-block of K, for each of the two column
 * tiles) and every activation row tile of the call reuses it from L1/L2. PACK8 keeps 8 rows' same 4 bytes together (nb_kernels.c), so a
 * group's half of a B row is one 32-byte chunk transformed bytewise: no repacking at setup. */
#define QB_ROWS 8 /* B rows per 32 k: 32 / 4 */
#define QB_NF 3   /* factor vectors per 32-block */
#define QB_F (QB_NF * NB_VNNI * 4)
#define QB_STRIDE(rows) (QB_F + (rows) * TB) /* a 32-block's factors and B rows */
#define QB_BLOCK QB_STRIDE(QB_ROWS)
#define QS_ROW (2 * NB_VNNI)       /* a 32 x 32 output block's sums: row stride */
/* and one plane per sum of an output, 64 bytes more than the rows: at 4 KiB apart a step's
 * store to one plane and its load from the next alias in the CPU's store-to-load check */
#define QS_PLANE (2 * TM * QS_ROW + NB_VNNI)
#define QS_MAX 8                   /* planes at most (Q8_0's lanes) */

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* Row kg of 32-block o's B, the half of group h (columns 8h..8h+7); its factor f of row r. */
static uint8_t *qb_row(uint8_t *o, int kg, int h)
{
    return o + QB_F + kg * TB + h * 32;
}
static float *qb_f(uint8_t *o, int f, int h)
{
    return (float *)o + f * NB_VNNI + h * NB_PACK;
}

/* The 32-byte chunk c (8 rows x 4 bytes) of a PACK8 block's part at p. */
static const uint8_t *chunk(const uint8_t *p, int c)
{
    return p + (size_t)c * NB_PACK * 4;
}

/* Chunks and B row halves as one vector of 32 bytes, shifted as 32-bit words and masked per
 * byte (x86 has no byte shifts: as bytes, GCC widens every shift to 16 bits and packs back,
 * 3x the instructions). */
typedef uint32_t v8u32 __attribute__((vector_size(32)));
typedef uint8_t v32u8 __attribute__((vector_size(32)));
#define BYTES(x) (0x01010101u * (x)) /* x in every byte of a word */
/* The 8 B rows of a block unrolled: their shift counts become constants (-O2 does not). */
#define UNROLL8 _Pragma("GCC unroll 8")

static void ld32(v8u32 *v, const uint8_t *p)
{
    memcpy(v, p, sizeof *v);
}

/* Low (sh 0) or high (sh 4) nibbles of chunk c into B row half dst. */
static void nibbles(uint8_t *dst, const uint8_t *c, int sh)
{
    v8u32 v;
    ld32(&v, c);
    v = (v >> sh) & BYTES(15);
    memcpy(dst, &v, sizeof v);
}

/* Q4_1 (d, m in 2-byte chunks, then 4 quant chunks): B row kg is chunk kg % 4's low (kg < 4)
 * or high nibbles; factors d, m. */
static void expand_q4_1(const uint8_t *g, uint8_t *o, int h)
{
    const uint8_t *q = g + NB_PACK * NB_QUANT_Q4_1_QS;
    UNROLL8
    for (int kg = 0; kg < QB_ROWS; kg++)
        nibbles(qb_row(o, kg, h), chunk(q, kg % 4), kg < 4 ? 0 : 4);
    nb_avx2_f16x8_to_f32(g, qb_f(o, 0, h));
    nb_avx2_f16x8_to_f32(g + 2 * NB_PACK, qb_f(o, 1, h));
}

/* Q8_0 (d in 2-byte chunks, then each row's 32 quants whole): B row kg of row r is its quants
 * 4kg..4kg+3; factor d. */
static void expand_q8_0(const uint8_t *g, uint8_t *o, int h)
{
    const uint8_t *q = g + NB_PACK * NB_QUANT_Q8_0_QS;
    UNROLL8
    for (int kg = 0; kg < QB_ROWS; kg++)
        for (int r = 0; r < NB_PACK; r++)
            memcpy(qb_row(o, kg, h) + 4 * r, q + r * NB_QUANT_QK + 4 * kg, 4);
    nb_avx2_f16x8_to_f32(g, qb_f(o, 0, h));
}

/* Q5_0 (d, then the re-ordered fifth bits and 4 quant chunks): weight e of k-group kg has its
 * fifth bit at bit 8e + kg of the row's word (nb_kernels.c q5_0_hbits). B holds q (0..31) as
 * unsigned bytes, so tdpbsud gives sum q x_q, and the step takes 16 sum x_q off (the
 * activation's o5): the reference's sum (q - 16) x_q exactly, with no signed product (whose
 * VNNI form needs A xor 0x80 made per A tile, 4% of Gemma's prefill); factor d. */
static void expand_q5_0(const uint8_t *g, uint8_t *o, int h)
{
    const uint8_t *rest = g + NB_PACK * NB_QUANT_Q5_0_QH;
    v8u32 hb;
    ld32(&hb, chunk(rest, 0));
    UNROLL8
    for (int kg = 0; kg < QB_ROWS; kg++) {
        v8u32 c;
        ld32(&c, chunk(rest, 1 + kg % 4));
        /* bit 8e + kg of row r's word: byte 4r + e, bit kg */
        c = ((c >> (kg < 4 ? 0 : 4)) & BYTES(15)) | ((hb >> kg) & BYTES(1)) << 4;
        memcpy(qb_row(o, kg, h), &c, sizeof c);
    }
    nb_avx2_f16x8_to_f32(g, qb_f(o, 0, h));
}

/* Q4_K (d, dmin in 2-byte chunks, then 3 chunks of 6-bit scales and 32 quant chunks), one
 * super-block = 8 32-blocks: sub-block s's B row kg is chunk 3 + 8(s / 2) + kg's low (s even)
 * or high nibbles; factors d, sc[s] and the reference's dmin * m[s]. */
static void expand_q4_k(const uint8_t *g, uint8_t *o, int h)
{
    const uint8_t *rest = g + NB_PACK * NB_QUANT_Q4_K_SCALES;
    for (int s = 0; s < 8; s++)
        UNROLL8
        for (int kg = 0; kg < QB_ROWS; kg++)
            nibbles(qb_row(o + (size_t)s * QB_BLOCK, kg, h), chunk(rest, 3 + 8 * (s / 2) + kg),
                    s & 1 ? 4 : 0);
    float d8[NB_PACK], dmin8[NB_PACK];
    nb_avx2_f16x8_to_f32(g, d8);
    nb_avx2_f16x8_to_f32(g + 2 * NB_PACK, dmin8);
    for (int r = 0; r < NB_PACK; r++) {
        uint8_t s12[12];
        int sc[8], m[8];
        for (int c = 0; c < 3; c++)
            memcpy(s12 + 4 * c, chunk(rest, c) + 4 * r, 4);
        nb_quant_q4_k_scales(s12, sc, m);
        float d = d8[r], dmin = dmin8[r];
        for (int s = 0; s < 8; s++) {
            uint8_t *ob = o + (size_t)s * QB_BLOCK;
            qb_f(ob, 0, h)[r] = d;
            qb_f(ob, 1, h)[r] = (float)sc[s];
            qb_f(ob, 2, h)[r] = dmin * (float)m[s];
        }
    }
}

/* Q6_K (d in 2-byte chunks, then 48 chunks of re-coded quants and 4 of scales; nb_kernels.c
 * q6_k_recode): group q = 4hh + k's k-group kg comes from chunks a = 16hh + kg, b = a + 8 and
 * c = 32 + 8hh + kg (k < 3: chunk a, b or c's low 6 bits; k = 3: their top 2 bits). The
 * reference's integer is I = sc_a I_a + sc_b I_b, I_h = sum x_q (q - 32) over the block's
 * 16-value half h, sc_h its int8 scale. B rows hold q (0..63) as unsigned bytes, rows 0..3 the
 * first half, 4..7 the second: two products of K = 16 (tdpbsud) give sum q x_q per half, the
 * step takes 32 sum x_q off each (the activation's o6) for I_a and I_b and forms I exactly
 * (step_q6_k); factors d, sc_a, sc_b. */

static void expand_q6_k(const uint8_t *g, uint8_t *o, int h)
{
    const uint8_t *rest = g + NB_PACK * 2;
    float d8[NB_PACK];
    nb_avx2_f16x8_to_f32(g, d8);
    for (int q = 0; q < 8; q++) {
        int hh = q / 4, k = q % 4;
        uint8_t *ob = o + (size_t)q * QB_BLOCK;
        const uint8_t *sc = chunk(rest, 48 + q / 2) + 2 * (q % 2); /* row r's at 4r, 4r + 1 */
        for (int r = 0; r < NB_PACK; r++) {
            qb_f(ob, 0, h)[r] = d8[r];
            qb_f(ob, 1, h)[r] = (float)(int8_t)sc[4 * r];
            qb_f(ob, 2, h)[r] = (float)(int8_t)sc[4 * r + 1];
        }
        UNROLL8
        for (int kg = 0; kg < QB_ROWS; kg++) {
            v8u32 a, b, c, v;
            ld32(&a, chunk(rest, 16 * hh + kg));
            ld32(&b, chunk(rest, 16 * hh + 8 + kg));
            ld32(&c, chunk(rest, 32 + 8 * hh + kg));
            v = k == 0 ? a : k == 1 ? b : c;
            v = k < 3 ? v & BYTES(63)
                      : ((a >> 6) & BYTES(3)) | ((b >> 6) & BYTES(3)) << 2 |
                            ((c >> 6) & BYTES(3)) << 4;
            memcpy(qb_row(ob, kg, h), &v, sizeof v);
        }
    }
}

/* One C tile's float step: rows of 16 int32 dots (c0, and Q6_K's second half's c1), the block's
 * factors, per row the activation block's d and s (stride nb), the sums at st (QS_ROW per
 * row, QS_PLANE per sum), lane: Q8_0's 4-weight lane, dd: its d_w * d_x per row (QS_ROW). */
typedef struct qt_tile {
    const int32_t *c0, *c1;
    const uint8_t *f; /* the factor vectors (qb_f's layout: 16 floats each) */
    const float *dx, *sx;
    const int32_t *o5, *o6; /* the rows' activation offsets (q8_rows), stride nb and 2 nb */
    size_t nb;
    int rows, lane;
    float *st, *dd;
} qt_tile;

/* Vectors pass by pointer: the emulated build has no AVX-512 ABI to return them in. */

/* The tile's factor vectors f0..f2 (NULL: not needed), read once per step into registers. */
static void factors(const qt_tile *t, v16f *f0, v16f *f1, v16f *f2)
{
    memcpy(f0, t->f, sizeof *f0);
    if (f1)
        memcpy(f1, t->f + sizeof *f0, sizeof *f1);
    if (f2)
        memcpy(f2, t->f + 2 * sizeof *f0, sizeof *f2);
}
static void dots(v16f *d, const int32_t *c, int r)
{
    v16i v;
    memcpy(&v, c + r * NB_VNNI, sizeof v);
    *d = __builtin_convertvector(v, v16f);
}

static void add_to(float *p, const v16f *v)
{
    v16f a;
    memcpy(&a, p, sizeof a);
    a = a + *v;
    memcpy(p, &a, sizeof a);
}

/* The steps copy the tile's fields to locals first: the sums they store could alias them, and
 * reloading every field per row tripled the instructions of a row's 4-8 FP ops. */

/* acc += float(I) * (d_w * d_x); mt += m_w * s_x (Q4_1). */
static void step_q4_1(const qt_tile *t)
{
    const int32_t *c = t->c0;
    const float *dx = t->dx, *sx = t->sx;
    float *a = t->st;
    size_t nb = t->nb;
    v16f f0, f1;
    factors(t, &f0, &f1, NULL);
    for (int r = t->rows; r > 0; r--, c += NB_VNNI, dx += nb, sx += nb, a += QS_ROW) {
        v16f is, p, m;
        dots(&is, c, 0);
        p = is * (f0 * *dx);
        add_to(a, &p);
        m = f1 * *sx; /* here, not above: GCC then broadcasts s_x from memory, not on p5 */
        add_to(a + QS_PLANE, &m);
    }
}

/* The integer dots of C row r less off, as floats (exact: |.| < 2^24). */
static void dots_less(v16f *d, const int32_t *c, int r, int32_t off)
{
    v16i v;
    memcpy(&v, c + r * NB_VNNI, sizeof v);
    *d = __builtin_convertvector(v - off, v16f);
}

/* acc += float(I) * (d_w * d_x), I = sum q x_q - 16 sum x_q (Q5_0). */
static void step_q5_0(const qt_tile *t)
{
    const int32_t *c = t->c0, *o5 = t->o5;
    const float *dx = t->dx;
    float *a = t->st;
    size_t nb = t->nb;
    v16f f0;
    factors(t, &f0, NULL, NULL);
    for (int r = t->rows; r > 0; r--, c += NB_VNNI, dx += nb, o5 += nb, a += QS_ROW) {
        v16f is, p;
        dots_less(&is, c, 0, *o5);
        p = is * (f0 * *dx);
        add_to(a, &p);
    }
}

/* Lane l's acc += float(I_l) * dd (Q8_0), dd = d_w * d_x made by lane 0 and read by the other
 * seven (the reference too rounds it once per block): 25 FP ops per row and block, not 32. */
static void step_q8_0(const qt_tile *t)
{
    const int32_t *c = t->c0;
    const float *dx = t->dx;
    float *a = t->st + t->lane * QS_PLANE, *dd = t->dd;
    size_t nb = t->nb;
    v16f f0;
    factors(t, &f0, NULL, NULL);
    for (int r = t->rows; r > 0; r--, c += NB_VNNI, dx += nb, a += QS_ROW, dd += QS_ROW) {
        v16f is, p, d;
        if (t->lane == 0) {
            d = f0 * *dx;
            memcpy(dd, &d, sizeof d);
        } else {
            memcpy(&d, dd, sizeof d);
        }
        dots(&is, c, 0);
        p = is * d;
        add_to(a, &p);
    }
}

/* acc += float(I sc) * (d * d_x), float(I) * sc being exact (|I sc| < 2^24); mt += (dmin m) s_x. */
static void step_q4_k(const qt_tile *t)
{
    const int32_t *c = t->c0;
    const float *dx = t->dx, *sx = t->sx;
    float *a = t->st;
    size_t nb = t->nb;
    v16f f0, f1, f2;
    factors(t, &f0, &f1, &f2);
    for (int r = t->rows; r > 0; r--, c += NB_VNNI, dx += nb, sx += nb, a += QS_ROW) {
        v16f is, p, m;
        dots(&is, c, 0);
        p = (is * f1) * (f0 * *dx);
        add_to(a, &p);
        m = f2 * *sx; /* here, not above: GCC then broadcasts s_x from memory, not on p5 */
        add_to(a + QS_PLANE, &m);
    }
}

/* acc += float(I) * (d * d_x), I = sc_a I_a + sc_b I_b formed in float from the two products:
 * exact, as |sc_h I_h| <= 128 * 16 * 32 * 127 < 2^23 and |I| < 2^24, so float(I) is the
 * reference's (which forms I in int32 and converts it). */
static void step_q6_k(const qt_tile *t)
{
    const int32_t *c = t->c0, *c1 = t->c1, *o6 = t->o6;
    const float *dx = t->dx;
    float *a = t->st;
    size_t nb = t->nb;
    v16f f0, f1, f2;
    factors(t, &f0, &f1, &f2);
    for (int r = t->rows; r > 0;
         r--, c += NB_VNNI, c1 += NB_VNNI, dx += nb, o6 += 2 * nb, a += QS_ROW) {
        v16f ia, ib, p;
        dots_less(&ia, c, 0, o6[0]);
        dots_less(&ib, c1, 0, o6[1]);
        p = (ia * f1 + ib * f2) * (f0 * *dx);
        add_to(a, &p);
    }
}

/* How an output ends from its sums (planes QS_PLANE apart), as the reference ends. */
enum { OUT_ONE, OUT_SUM, OUT_DIFF, OUT_TREE8 };

/* Outputs of 16 consecutive columns from their sums at a: lane by lane the scalar
 * reference's expression (adds and subtracts only, so whole vectors give its bits). */
static inline __attribute__((always_inline)) void out16(int kind, const float *a, v16f *o)
{
    v16f l[QS_MAX];
    int planes = kind == OUT_TREE8 ? 8 : kind == OUT_ONE ? 1 : 2;
    for (int k = 0; k < planes; k++)
        memcpy(&l[k], a + k * QS_PLANE, sizeof l[k]);
    if (kind == OUT_ONE)
        *o = l[0];
    else if (kind == OUT_SUM)
        *o = l[0] + l[1];
    else if (kind == OUT_DIFF)
        *o = l[0] - l[1];
    else
        *o = (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) + 0.0f;
}

typedef uint16_t v16u16 __attribute__((vector_size(32)));
typedef uint32_t v16u __attribute__((vector_size(64)));

/* nb_f32_to_bf16 on 16 lanes, the same integer steps (RNE, NaN kept quiet with its sign). */
static inline __attribute__((always_inline)) void bf16x16(const v16f *v, v16u16 *h)
{
    v16u u;
    memcpy(&u, v, sizeof u);
    v16u r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x0040u;
    v16u nan = (v16u)((u & 0x7fffffffu) > 0x7f800000u);
    r = (q & nan) | (r & ~nan);
    *h = __builtin_convertvector(r, v16u16);
}

/* Rows x cols (<= 32) outputs of a 32 x 32 block's sums st to Y at (i, j), row stride ld:
 * 16 columns at a time, a short last group through a lane buffer. Inlined per kind. */
static inline __attribute__((always_inline)) void store_kind(int kind, const float *st, int rows,
                                                            int cols, void *Y, int f32out,
                                                            size_t ld, int i, int j)
{
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k += NB_VNNI) {
            int cnt = cols - k < NB_VNNI ? cols - k : NB_VNNI;
            size_t idx = (size_t)(i + r) * ld + (size_t)(j + k);
            v16f v;
            out16(kind, st + r * QS_ROW + k, &v);
            if (f32out) {
                if (cnt == NB_VNNI) /* a constant size: one store, not a copy loop */
                    memcpy((float *)Y + idx, &v, sizeof v);
                else
                    memcpy((float *)Y + idx, &v, sizeof(float) * (size_t)cnt);
            } else {
                v16u16 h;
                bf16x16(&v, &h);
                if (cnt == NB_VNNI)
                    memcpy((nb_bf16 *)Y + idx, &h, sizeof h);
                else
                    memcpy((nb_bf16 *)Y + idx, &h, sizeof(nb_bf16) * (size_t)cnt);
            }
        }
}

static void store_out(int kind, const float *st, int rows, int cols, void *Y, int f32out,
                      size_t ld, int i, int j)
{
    switch (kind) {
    case OUT_ONE:
        store_kind(OUT_ONE, st, rows, cols, Y, f32out, ld, i, j);
        break;
    case OUT_SUM:
        store_kind(OUT_SUM, st, rows, cols, Y, f32out, ld, i, j);
        break;
    case OUT_DIFF:
        store_kind(OUT_DIFF, st, rows, cols, Y, f32out, ld, i, j);
        break;
    default:
        store_kind(OUT_TREE8, st, rows, cols, Y, f32out, ld, i, j);
    }
}

typedef struct qt_ops {
    nb_wtype type;
    int elems, bytes; /* a PACK8 block: weights and bytes per row */
    int subs, span;   /* tile products per 32-block, and per float step */
    int depth;        /* k per product: 32, Q6_K's 16 (its halves) or Q8_0's 4 (its lanes) */
    int sgn;          /* bit s: product s has signed weights (tdpbssd), else tdpbsud */
    int sums;         /* fp32 sums per output */
    void (*expand)(const uint8_t *g, uint8_t *o, int h);
    void (*step)(const qt_tile *t);
    int out; /* OUT_*: how an output ends from its sums */
} qt_ops;

static const qt_ops qt_types[] = {
    {NB_W_Q4_1, NB_QUANT_QK, NB_QUANT_Q4_1_BYTES, 1, 1, 32, 0, 2, expand_q4_1, step_q4_1,
     OUT_SUM},
    {NB_W_Q8_0, NB_QUANT_QK, NB_QUANT_Q8_0_BYTES, 8, 1, 4, 255, 8, expand_q8_0, step_q8_0,
     OUT_TREE8},
    {NB_W_Q5_0, NB_QUANT_QK, NB_QUANT_Q5_0_BYTES, 1, 1, 32, 0, 1, expand_q5_0, step_q5_0,
     OUT_ONE},
    {NB_W_Q4_K, NB_QUANT_QK_K, NB_QUANT_Q4_K_BYTES, 1, 1, 32, 0, 2, expand_q4_k, step_q4_k,
     OUT_DIFF},
    {NB_W_Q6_K, NB_QUANT_QK_K, NB_QUANT_Q6_K_BYTES, 2, 2, 16, 0, 1, expand_q6_k, step_q6_k,
     OUT_ONE},
};

static const qt_ops *qt_find(nb_wtype t)
{
    for (size_t k = 0; k < sizeof qt_types / sizeof *qt_types; k++)
        if (qt_types[k].type == t)
            return &qt_types[k];
    return NULL;
}

/* C: 16 x 16 int32, A: 16 rows x a product's depth in bytes, B: its k-groups x 64 bytes. */
static void tiles_configure_int8(const qt_ops *op)
{
    tiles_configure_shapes(op->depth, op->depth / 4);
}

/* Bytes of a 32-block's factors and B rows. */
static size_t qb_stride(const qt_ops *op)
{
    return QB_STRIDE((size_t)op->subs * op->depth / 4);
}

/* Weight rows j..j+15 (two PACK8 groups; a group past the matrix reads as zeros) as every
 * 32-block's B rows and factors at bt. */
static void expand_b(const qt_ops *op, const nb_wmat *W, int j, uint8_t *bt)
{
    int npb = W->cols / op->elems, per = op->elems / NB_QUANT_QK;
    int groups = (W->rows + NB_PACK - 1) / NB_PACK, brows = op->subs * op->depth / 4;
    size_t stride = qb_stride(op);
    for (int h = 0; h < 2; h++) {
        int g = j / NB_PACK + h;
        if (g < groups) {
            const uint8_t *grp = nb_wmat_group(W, g);
            for (int pb = 0; pb < npb; pb++)
                op->expand(grp + (size_t)pb * NB_PACK * op->bytes, bt + (size_t)pb * per * stride,
                           h);
            continue;
        }
        for (int b = 0; b < npb * per; b++) {
            uint8_t *o = bt + (size_t)b * stride;
            for (int kg = 0; kg < brows; kg++)
                memset(qb_row(o, kg, h), 0, 32);
            for (int f = 0; f < QB_NF; f++)
                memset(qb_f(o, f, h), 0, NB_PACK * sizeof(float));
        }
    }
}

/* The call's activations as Q8 rows (nb_avx2_q8_quantize_row: the reference's bits, 8 lanes at
 * a time; a CPU with AMX has AVX2 and F16C, as the expansion's nb_avx2_f16x8_to_f32 needs, and
 * the emulated build runs where AVX2 is), rows padded with
 * zero quants to a multiple of 32, once per thread per call as pack_x does. The scratch also
 * holds the B tiles of two column tiles, returned in *bt. */
typedef struct q8_rows {
    const int8_t *q;
    const float *d, *s;
    /* per row and 32-block, from the quants' exact sums over its 16-value halves:
     * o5 = 16 sum x_q (Q5_0's offset), o6 = 32 sum x_q over each half, two words (Q6_K's) */
    const int32_t *o5, *o6;
} q8_rows;

/* K bf16 to fp32 (exact: the bits become the top half), 16 at a time (K % 32 == 0): as a scalar
 * loop it was 2% of Gemma's native prefill. */
static void bf16_row(const nb_bf16 *x, int K, float *row)
{
    for (int t = 0; t < K; t += 16) {
        v16u16 h;
        memcpy(&h, x + t, sizeof h);
        v16u u = __builtin_convertvector(h, v16u) << 16;
        memcpy(row + t, &u, sizeof u);
    }
}

/* The sum of 16 int8 at q, 8 bytes to a word: biased to unsigned bytes (+128 each), pairs
 * added into 16-bit lanes, the lanes summed by one multiply (every partial sum < 2^16). */
static int32_t sum16(const int8_t *q)
{
    const uint64_t bias = 0x8080808080808080ull, m = 0x00ff00ff00ff00ffull;
    uint64_t a, b;
    memcpy(&a, q, sizeof a);
    memcpy(&b, q + 8, sizeof b);
    a ^= bias;
    b ^= bias;
    uint64_t l = (a & m) + ((a >> 8) & m) + (b & m) + ((b >> 8) & m);
    return (int32_t)((l * 0x0001000100010001ull) >> 48) - 16 * 128;
}

static q8_rows quant_x(const nb_bf16 *X, int n, int K, uint8_t **bt)
{
    int np = (n + 2 * TM - 1) / (2 * TM) * 2 * TM, nb = K / NB_QUANT_QK;
    size_t qb = ((size_t)np * K + 63) & ~(size_t)63, fb = sizeof(float) * (5 * (size_t)n * nb);
    size_t xf = sizeof(float) * (size_t)K, bb = 2 * (size_t)nb * QB_BLOCK; /* the largest */
    fb = (fb + 63) & ~(size_t)63;
    xf = (xf + 63) & ~(size_t)63;
    uint8_t *base = nb_scratch_or_die(qb + fb + xf + bb);
    float *fw = (float *)(base + qb);
    q8_rows x = {(const int8_t *)base, fw, fw + (size_t)n * nb,
                 (const int32_t *)(fw + 2 * (size_t)n * nb),
                 (const int32_t *)(fw + 3 * (size_t)n * nb)};
    *bt = base + qb + fb + xf;
    static _Thread_local x_memo last;
    if (x_memo_hit(&last, X, base, n, K))
        return x;
    float *row = (float *)(base + qb + fb);
    for (int i = 0; i < n; i++) {
        bf16_row(X + (size_t)i * K, K, row);
        nb_avx2_q8_quantize_row(row, K, (int8_t *)base + (size_t)i * K,
                                (float *)x.d + (size_t)i * nb, (float *)x.s + (size_t)i * nb);
        int32_t *o5 = (int32_t *)x.o5 + (size_t)i * nb, *o6 = (int32_t *)x.o6 + 2 * (size_t)i * nb;
        const int8_t *q = x.q + (size_t)i * K;
        for (int b = 0; b < nb; b++) {
            int32_t lo = sum16(q + 32 * b), hi = sum16(q + 32 * b + 16);
            o5[b] = 16 * (lo + hi);
            o6[2 * b] = 32 * lo;
            o6[2 * b + 1] = 32 * hi;
        }
    }
    memset(base + (size_t)n * K, 0, (size_t)(np - n) * K);
    return x;
}

/* 32-block b's tile products for activation rows i..i+31 (A at a0, a1) and the column tiles at
 * o0, o1, each span's 4 C tiles then stepped into the sums st (the second column tile only
 * where `two`; rows from n on never). */
/* A 32 x 32 output block's sums (st), its C tiles (c) and Q8_0's d_w d_x (dd). The C tiles
 * start 2 KiB (mod 4 KiB) past the sums: at the same offset, which separate stack arrays had,
 * a step's load of the next C row met its store to a sum row 4 KiB away, which the CPU's
 * store-to-load check (12 address bits) takes for a dependency. */
#define QT_SUMS (QS_MAX * QS_PLANE * 4)
typedef struct qt_work {
    _Alignas(64) float st[QS_MAX * QS_PLANE];
    uint8_t pad[(2048 + 4096 - QT_SUMS % 4096) % 4096];
    int32_t c[2][4][TM * NB_VNNI];
    float dd[2 * TM * QS_ROW];
} qt_work;
_Static_assert(offsetof(qt_work, c) % 4096 == 2048, "C tiles 2 KiB off the sums, mod 4 KiB");

static void block_q(const qt_ops *op, const q8_rows *x, int K, int n, int i, int b,
                    const int8_t *a0, const int8_t *a1, const uint8_t *o0, const uint8_t *o1,
                    int two, qt_work *w)
{
    int nb = K / NB_QUANT_QK;
    int32_t(*c)[4][TM * NB_VNNI] = w->c;
    float *dd = w->dd, *st = w->st;
    for (int s = 0; s < op->subs; s++) {
        /* products of a full 32-block (Q6_K's two) share the A tiles */
        size_t ka = (size_t)b * NB_QUANT_QK + (size_t)s * op->depth % NB_QUANT_QK;
        size_t kb = QB_F + (size_t)s * (op->depth / 4) * TB;
        int32_t(*cs)[TM * NB_VNNI] = c[s % op->span];
        _tile_zero(T_C0);
        _tile_zero(T_C1);
        _tile_zero(T_C2);
        _tile_zero(T_C3);
        if (s == 0 || op->depth < NB_QUANT_QK) {
            _tile_loadd(T_A0, a0 + ka, (long)K);
            _tile_loadd(T_A1, a1 + ka, (long)K);
        }
        _tile_loadd(T_B0, o0 + kb, TB);
        _tile_loadd(T_B1, o1 + kb, TB);
        if ((op->sgn >> s) & 1) {
            _tile_dpbssd(T_C0, T_A0, T_B0);
            _tile_dpbssd(T_C1, T_A0, T_B1);
            _tile_dpbssd(T_C2, T_A1, T_B0);
            _tile_dpbssd(T_C3, T_A1, T_B1);
        } else {
            _tile_dpbsud(T_C0, T_A0, T_B0);
            _tile_dpbsud(T_C1, T_A0, T_B1);
            _tile_dpbsud(T_C2, T_A1, T_B0);
            _tile_dpbsud(T_C3, T_A1, T_B1);
        }
        _tile_stored(T_C0, cs[0], NB_VNNI * 4);
        _tile_stored(T_C1, cs[1], NB_VNNI * 4);
        _tile_stored(T_C2, cs[2], NB_VNNI * 4);
        _tile_stored(T_C3, cs[3], NB_VNNI * 4);
        if ((s + 1) % op->span)
            continue;
        for (int t = 0; t < 4; t++) {
            int ii = i + (t >> 1) * TM, rows = n - ii < TM ? n - ii : TM;
            if (rows <= 0 || (!two && (t & 1)))
                continue;
            const uint8_t *o = (t & 1) ? o1 : o0;
            qt_tile tt = {.c0 = c[0][t], .c1 = c[1][t], .dx = x->d + (size_t)ii * nb + b,
                          .sx = x->s + (size_t)ii * nb + b, .o5 = x->o5 + (size_t)ii * nb + b,
                          .o6 = x->o6 + 2 * ((size_t)ii * nb + b), .nb = (size_t)nb, .rows = rows,
                          .lane = s / op->span};
            size_t off = (size_t)(t >> 1) * TM * QS_ROW + (size_t)(t & 1) * NB_VNNI;
            tt.st = st + off;
            tt.dd = dd + off;
            tt.f = o;
            op->step(&tt);
        }
    }
}

/* Outputs [j0, j1) of n >= 16 rows: per 32 output columns, the two column tiles' B once, then
 * per 32 activation rows every 32-block's tile products and float steps (block_q); the sums
 * of the 32 x 32 outputs stay in st (L1). */
static void gemm_q(const qt_ops *op, const nb_wmat *W, const q8_rows *x, uint8_t *bt, int n,
                   void *Y, int f32out, int j0, int j1)
{
    int K = W->cols, nb = K / NB_QUANT_QK;
    size_t ld = (size_t)W->rows;
    size_t stride = qb_stride(op);
    uint8_t *bt1 = bt + (size_t)nb * stride;
    qt_work w;
    float *st = w.st;
    for (int j = j0; j < j1; j += 2 * NB_VNNI) {
        int two = j + NB_VNNI < j1;
        expand_b(op, W, j, bt);
        if (two)
            expand_b(op, W, j + NB_VNNI, bt1);
        for (int i = 0; i < n; i += 2 * TM) {
            memset(st, 0, sizeof(float) * (size_t)op->sums * QS_PLANE);
            const int8_t *a0 = x->q + (size_t)i * K, *a1 = a0 + (size_t)TM * K;
            for (int b = 0; b < nb; b++) {
                const uint8_t *o0 = bt + (size_t)b * stride;
                block_q(op, x, K, n, i, b, a0, a1, o0, two ? bt1 + (size_t)b * stride : o0,
                        two, &w);
            }
            int rows = n - i < 2 * TM ? n - i : 2 * TM;
            int cols = j1 - j < 2 * NB_VNNI ? j1 - j : 2 * NB_VNNI;
            store_out(op->out, st, rows, cols, Y, f32out, ld, i, j);
        }
    }
}

/* Quantized prefill on the int8 tiles; the rest (bf16 weights, decode, a type kept off the
 * loop) NB_AMX_INT8_REST's: on AMX the bf16 tiles (which hand decode to the AVX-512 kernels),
 * on the VNNI registers the AVX-512 path itself. */
void NB_AMX_LINEAR_INT8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1); /* (the emulated builds' names are in no header) */
void NB_AMX_LINEAR_INT8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                        int j1)
{
    const qt_ops *op = qt_find(W->type);
    if (!op || !NB_AMX_INT8_TAKES(W->type) || W->layout != NB_LAYOUT_PACK8 || n < AMX_MIN_N) {
        NB_AMX_INT8_REST(W, X, n, Y, f32out, j0, j1);
        return;
    }
    uint8_t *bt;
    q8_rows x = quant_x(X, n, W->cols, &bt);
    tiles_configure_int8(op);
    gemm_q(op, W, &x, bt, n, Y, f32out, j0, j1);
    _tile_release();
}
