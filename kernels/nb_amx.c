/* nb_amx: the AMX linear kernels: bf16 weights on the bf16 tiles (tdpbf16ps), quantized prefill
 * on the int8 tiles (tdpbsud / tdpbssd); every other op, and small linears, are nb_avx512.c's.
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
 * Quantized prefill (Q4_1, Q8_0, Q5_0, Q4_K, Q6_K) runs on the int8 tiles where the CPU has
 * AMX-INT8 (nb_amx_linear_int8, below).
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
/* The int8 tile loop (quantized prefill); what it does not take, the bf16 tiles below. */
#define NB_AMX_INT8_REST NB_AMX_LINEAR
#include "nb_amx_int8.h"

/* bf16: every tile 16 rows x 64 bytes. */
static void tiles_configure(void)
{
    tiles_configure_shapes(TB, TM);
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

