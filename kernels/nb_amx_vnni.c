/* nb_amx_vnni: quantized prefill where the CPU has AVX-512 VNNI but no AMX: nb_amx_int8.h's int8
 * tile loop (the AMX path's, one copy) built over the tile instructions done on zmm registers.
 *
 * A tile here holds no data: a load records its address and stride, and a product is computed
 * when its C tile is stored, straight into the destination, each C row (16 int32 columns) one
 * zmm from its start value to its store. Per C row and k-group one vpdpbusd of the B row (16
 * columns x 4 bytes) and the A row's 4 bytes broadcast:
 *   TDPBSUD (A signed, B unsigned): vpdpbusd with B as its unsigned and A as its signed source.
 *   TDPBSSD (both signed): A xor 0x80 is A + 128 as an unsigned byte, so vpdpbusd of it (the
 *   unsigned source) with B (the signed one) gives sum (A + 128) B = sum A B + 128 sum B; the
 *   correction 128 sum B is one vector per product (the k-groups' vpdpbusd of 0x80 bytes with
 *   the B rows), taken off the start value once, not per row.
 * Every step wraps in int32 as the tile instructions do, so the dots are the tiles' bit for bit
 * (|128 sum B| <= 128 * 64 * 128 is far inside int32 anyway) and the outputs the reference's.
 * Per 16 x 16 C tile and 32-block: 16 rows x 8 k-groups = 128 vpdpbusd (64 MACs each), plus 8
 * for a signed product's correction and its A rows' xor (16 x 32 bytes, made once per product).
 *
 * Valid for the loop as written (block_q), which is all it implements: a C tile is zeroed, takes
 * one product and is stored (anything else aborts, as a misused tile instruction faults), and
 * the memory a tile was loaded from holds the same bytes until the products using it are
 * stored. Built a second time by tests/kernels_emu.c
 * with NB_AMX_VNNI_EMULATE over its emulated AVX-512 intrinsics, so every host tests it. */
#ifndef NB_AMX_VNNI_EMULATE
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512VNNI__)
#error "nb_amx_vnni.c needs -mavx512f -mavx512bw -mavx512vl -mavx512vnni (CMakeLists.txt)"
#endif
#include <immintrin.h>
#define NB_AMX_LINEAR_INT8 nb_amx_vnni_linear_int8
#define NB_AMX_INT8_REST nb_avx512_linear_bf16
#else
#define NB_AMX_LINEAR_INT8 nb_amx_vnni_emu_linear_int8
#define NB_AMX_INT8_REST nb_avx512_emu_linear_bf16
#endif

#include <stdlib.h>

#include "nb_kernels_impl.h" /* (the emulated build: kernels_emu.c defined the REST one above) */

/* The types measured faster on the loop than on the path's own prefill kernels
 * (docs/performance.md, issue 26): not Q8_0 (8 K = 4 products per block: 1/6 the speed of
 * nb_avx512_kquant.c's GEMM). Q6_K since its two unsigned K = 16 products (1.3-1.5x its
 * rows-in-lanes kernel). The emulated build takes every type, to test the loop on each. */
static int vnni_takes(nb_wtype t)
{
#ifdef NB_AMX_VNNI_EMULATE
    (void)t;
    return 1;
#else
    return t == NB_W_Q4_1 || t == NB_W_Q5_0 || t == NB_W_Q4_K || t == NB_W_Q6_K;
#endif
}
#define NB_AMX_INT8_TAKES(t) vnni_takes(t)

#define VT_TILES 8
#define VT_ROWS 16
#define VT_COLSB 64

/* A product waiting for its C tile's store: A rows (xored where signed) and B rows. */
typedef struct vt_op {
    const uint8_t *a, *b;
    long as, bs;
    int nk, sgn;
} vt_op;

static _Thread_local struct {
    uint8_t rows[VT_TILES];
    uint16_t colsb[VT_TILES];
    const uint8_t *p[VT_TILES]; /* a loaded tile's memory */
    long stride[VT_TILES];
    /* bit t: tile t is zeroed; has a product pending; (A tiles) ax[t] holds it xor 0x80 (made by
     * its first signed product). Bit masks, so a load's check of pending products is a test. */
    unsigned zeroed, pending, xored;
    vt_op op[VT_TILES];
    uint8_t ax[VT_TILES][VT_ROWS][VT_COLSB];
} vt;

/* LDTILECFG's shapes (bytes 16..47 colsb, 48..63 rows); every tile starts at zero. */
static void vt_loadconfig(const void *cfg)
{
    const uint8_t *c = cfg;
    for (int t = 0; t < VT_TILES; t++) {
        memcpy(&vt.colsb[t], c + 16 + 2 * t, 2);
        vt.rows[t] = c[48 + t];
    }
    vt.zeroed = (1u << VT_TILES) - 1;
    vt.pending = vt.xored = 0;
}

static void vt_release(void)
{
    vt.pending = 0;
}

/* The bookkeeping calls are inlined: their tile numbers are constants at every call, and as
 * calls they were 5% of Gemma's prefill. */
#define VT_INLINE static inline __attribute__((always_inline))

VT_INLINE void vt_zero(int t)
{
    vt.zeroed |= 1u << t;
    vt.pending &= ~(1u << t);
}

VT_INLINE void vt_loadd(int t, const void *p, long stride)
{
    for (unsigned m = vt.pending; m; m &= m - 1)
        if (vt.op[__builtin_ctz(m)].a == vt.ax[t][0])
            abort(); /* a pending product still reads this tile's xor (block_q stores first) */
    vt.xored &= ~(1u << t);
    vt.p[t] = p;
    vt.stride[t] = stride;
    vt.zeroed &= ~(1u << t);
    vt.pending &= ~(1u << t);
}

static int32_t ld4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#define VT_UNROLL _Pragma("GCC unroll 16") /* -O2 does not: nk constant, b[] in registers */

/* rows C rows of o's product to dst (stride ds); nk constant where inlined, so the B rows stay
 * in registers. A row's vpdpbusd chain is serial; the rows' chains overlap out of order (four
 * rows interleaved by hand measured no faster). */
static inline __attribute__((always_inline)) void vt_rows(const vt_op *o, int rows, uint8_t *dst,
                                                         long ds, int nk)
{
    __m512i b[VT_COLSB / 4], start = _mm512_setzero_si512();
    VT_UNROLL
    for (int k = 0; k < VT_COLSB / 4; k++) /* all of b[] set: the generic nk is not bounded */
        b[k] = k < nk ? _mm512_loadu_si512(o->b + k * o->bs) : _mm512_setzero_si512();
    const uint8_t *a = o->a;
    long as = o->as;
    if (o->sgn) {
        __m512i k80 = _mm512_set1_epi8((char)0x80), corr = _mm512_setzero_si512();
        VT_UNROLL
        for (int k = 0; k < nk; k++)
            corr = _mm512_dpbusd_epi32(corr, k80, b[k]);
        start = _mm512_sub_epi32(start, corr);
        for (int r = 0; r < rows; r++) {
            __m512i acc = start;
            VT_UNROLL
            for (int k = 0; k < nk; k++)
                acc = _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(ld4(a + r * as + 4 * k)), b[k]);
            _mm512_storeu_si512(dst + r * ds, acc);
        }
        return;
    }
    for (int r = 0; r < rows; r++) {
        __m512i acc = start;
        VT_UNROLL
        for (int k = 0; k < nk; k++)
            acc = _mm512_dpbusd_epi32(acc, b[k], _mm512_set1_epi32(ld4(a + r * as + 4 * k)));
        _mm512_storeu_si512(dst + r * ds, acc);
    }
}

/* TILESTORED: tile c (zero, or its product) to dst, rows ds bytes apart. */
static void vt_stored(int c, void *dst, long ds)
{
    uint8_t *d = dst;
    int rows = vt.rows[c];
    if (!(vt.zeroed >> c & 1))
        abort(); /* a loaded C tile: not implemented (block_q zeroes its C tiles) */
    const vt_op *o = &vt.op[c];
    if (!(vt.pending >> c & 1))
        for (int r = 0; r < rows; r++)
            memset(d + r * ds, 0, VT_COLSB);
    else if (o->nk == 8) /* a K = 32 product: Q4_1, Q5_0, Q4_K */
        vt_rows(o, rows, d, ds, 8);
    else if (o->nk == 4) /* Q6_K's K = 16 halves */
        vt_rows(o, rows, d, ds, 4);
    else if (o->nk == 1) /* Q8_0's K = 4 lanes */
        vt_rows(o, rows, d, ds, 1);
    else
        vt_rows(o, rows, d, ds, o->nk);
}

/* A tile t's rows xor 0x80 into ax[t], once per load: the products of both C tiles it meets. */
static void vt_xor(int t)
{
    typedef uint8_t v32 __attribute__((vector_size(32)));
    int w = vt.colsb[t];
    for (int r = 0; r < vt.rows[t]; r++) {
        const uint8_t *src = vt.p[t] + r * vt.stride[t];
        uint8_t *dst = vt.ax[t][r];
        int e = 0;
        for (; e + 32 <= w; e += 32) { /* K = 32: one vector per row (Q8_0's K = 4: bytes) */
            v32 v;
            memcpy(&v, src + e, sizeof v);
            v ^= 0x80;
            memcpy(dst + e, &v, sizeof v);
        }
        for (; e < w; e++)
            dst[e] = (uint8_t)(src[e] ^ 0x80);
    }
    vt.xored |= 1u << t;
}

/* TDPBSUD / TDPBSSD: recorded, run at the store. */
VT_INLINE void vt_dpb(int c, int a, int b, int sgn)
{
    if (!(vt.zeroed >> c & 1) || vt.pending >> c & 1)
        abort(); /* a second product on a C tile: not implemented (block_q never does) */
    vt_op *o = &vt.op[c];
    o->nk = vt.rows[b];
    o->b = vt.p[b];
    o->bs = vt.stride[b];
    o->sgn = sgn;
    o->a = vt.p[a];
    o->as = vt.stride[a];
    if (sgn) {
        if (!(vt.xored >> a & 1))
            vt_xor(a);
        o->a = vt.ax[a][0];
        o->as = VT_COLSB;
    }
    vt.pending |= 1u << c;
}

VT_INLINE void vt_dpbsud(int c, int a, int b)
{
    vt_dpb(c, a, b, 0);
}

VT_INLINE void vt_dpbssd(int c, int a, int b)
{
    vt_dpb(c, a, b, 1);
}

/* immintrin.h may define the AMX ones as macros (GCC does, under a target pragma). */
#undef _tile_loadconfig
#undef _tile_release
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stored
#undef _tile_dpbsud
#undef _tile_dpbssd
#define _tile_loadconfig vt_loadconfig
#define _tile_release vt_release
#define _tile_zero vt_zero
#define _tile_loadd vt_loadd
#define _tile_stored vt_stored
#define _tile_dpbsud vt_dpbsud
#define _tile_dpbssd vt_dpbssd

#include "nb_amx_int8.h"
