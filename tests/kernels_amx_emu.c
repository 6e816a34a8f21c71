/* kernels_amx_emu: nb_amx.c built over a C emulation of the AMX tile instructions it uses (SDM semantics),
 * for test_kernels_emu; a file of its own so that the emulated names never reach the test's main. */
/* ---- the tile state and instructions, after the Intel SDM ------------------
 * Eight tiles of at most 16 rows x 64 bytes per thread, as the hardware has
 * them. Faithful where the kernel could go wrong unnoticed: shapes come from
 * the last LDTILECFG; a load or store touches rows x colsb bytes only and
 * zeroes the rest of the tile; TDPBF16PS checks the shapes the SDM checks
 * (#UD there, abort here) and computes as its pseudocode does:
 *   for m < C.rows, k < A.colsb/4, n < C.colsb/4:
 *     C[m][n] += fp32(A[m].bf16[2k])   * fp32(B[k].bf16[2n])
 *     C[m][n] += fp32(A[m].bf16[2k+1]) * fp32(B[k].bf16[2n+1])
 * each step the exact product (bf16 x bf16 fits fp32) added with one
 * round-to-nearest-even, denormal bf16 inputs read as zero and denormal
 * fp32 results flushed to zero (the SDM's DAZ/FTZ note: MXCSR is neither
 * read nor written). TDPBSUD and TDPBSSD (quantized prefill) likewise, in int32. Tile
 * instructions without a configuration fault, as they would (#UD): abort. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_bf16.h"

#define EMU_TILES 8
#define EMU_ROWS 16
#define EMU_COLSB 64

static _Thread_local struct {
    int configured;
    uint8_t rows[EMU_TILES];
    uint16_t colsb[EMU_TILES];
    uint8_t data[EMU_TILES][EMU_ROWS][EMU_COLSB];
} emu_t;

static inline float emu_flush(float x) /* DAZ / FTZ */
{
    return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

static void emu_check(int ok)
{
    if (!ok)
        abort(); /* where the hardware raises #GP or #UD */
}

static void emu_tile_release(void)
{
    memset(&emu_t, 0, sizeof emu_t);
}

/* LDTILECFG: palette 0 releases; palette 1 takes rows (bytes 48..63) and
 * colsb (16-bit, bytes 16..47) per tile and zeroes every tile. */
static void emu_tile_loadconfig(const void *cfg)
{
    const uint8_t *c = cfg;
    emu_tile_release();
    if (c[0] == 0)
        return;
    emu_check(c[0] == 1 && c[1] == 0);
    for (int t = 0; t < EMU_TILES; t++) {
        uint16_t cb;
        memcpy(&cb, c + 16 + 2 * t, 2);
        uint8_t r = c[48 + t];
        emu_check(r <= EMU_ROWS && cb <= EMU_COLSB && (r == 0) == (cb == 0));
        emu_t.rows[t] = r;
        emu_t.colsb[t] = cb;
    }
    emu_t.configured = 1;
}

static void emu_tile_used(int t)
{
    emu_check(emu_t.configured && t >= 0 && t < EMU_TILES && emu_t.rows[t]);
}

static void emu_tile_loadd(int t, const void *base, long stride)
{
    emu_tile_used(t);
    memset(emu_t.data[t], 0, sizeof emu_t.data[t]);
    for (int r = 0; r < emu_t.rows[t]; r++)
        memcpy(emu_t.data[t][r], (const uint8_t *)base + r * stride, emu_t.colsb[t]);
}

static void emu_tile_stored(int t, void *base, long stride)
{
    emu_tile_used(t);
    for (int r = 0; r < emu_t.rows[t]; r++)
        memcpy((uint8_t *)base + r * stride, emu_t.data[t][r], emu_t.colsb[t]);
}

static void emu_tile_zero(int t)
{
    emu_tile_used(t);
    memset(emu_t.data[t], 0, sizeof emu_t.data[t]);
}

static float emu_bf16(const uint8_t *row, int idx)
{
    nb_bf16 h;
    memcpy(&h, row + 2 * idx, 2);
    return emu_flush(nb_bf16_to_f32(h));
}

/* The shapes a tile dot product needs (the SDM's #UD checks): C rows = A rows, C and B as wide,
 * A's 4-byte groups = B's rows, three distinct tiles. */
static void emu_dot_shapes(int c, int a, int b)
{
    emu_tile_used(c);
    emu_tile_used(a);
    emu_tile_used(b);
    emu_check(emu_t.rows[c] == emu_t.rows[a] && emu_t.colsb[c] == emu_t.colsb[b] &&
              emu_t.colsb[a] / 4 == emu_t.rows[b] && emu_t.colsb[a] % 4 == 0 &&
              emu_t.colsb[c] % 4 == 0 && c != a && c != b && a != b);
}

static void emu_tile_dpbf16ps(int c, int a, int b)
{
    emu_dot_shapes(c, a, b);
    for (int m = 0; m < emu_t.rows[c]; m++) {
        float tmp[EMU_COLSB / 4];
        memcpy(tmp, emu_t.data[c][m], sizeof tmp);
        for (int k = 0; k < emu_t.colsb[a] / 4; k++)
            for (int n = 0; n < emu_t.colsb[c] / 4; n++)
                for (int e = 0; e < 2; e++) {
                    float x = emu_bf16(emu_t.data[a][m], 2 * k + e);
                    float y = emu_bf16(emu_t.data[b][k], 2 * n + e);
                    tmp[n] = emu_flush(fmaf(x, y, tmp[n]));
                }
        memset(emu_t.data[c][m], 0, EMU_COLSB);
        memcpy(emu_t.data[c][m], tmp, emu_t.colsb[c]);
    }
}

/* TDPBSUD / TDPBSSD: the same shape checks; per row m, column n, k-group k, C[m][n] (int32) +=
 * the sum of the 4 products of signed bytes A[m][4k+e] and unsigned (TDPBSUD) or signed
 * (TDPBSSD) bytes B[k][4n+e], wrapping. */
static void emu_tile_dpb(int c, int a, int b, int b_signed)
{
    emu_dot_shapes(c, a, b);
    for (int m = 0; m < emu_t.rows[c]; m++) {
        int32_t tmp[EMU_COLSB / 4];
        memcpy(tmp, emu_t.data[c][m], sizeof tmp);
        for (int k = 0; k < emu_t.colsb[a] / 4; k++)
            for (int n = 0; n < emu_t.colsb[c] / 4; n++) {
                int32_t s = 0;
                for (int e = 0; e < 4; e++) {
                    uint8_t y = emu_t.data[b][k][4 * n + e];
                    s += (int8_t)emu_t.data[a][m][4 * k + e] * (b_signed ? (int8_t)y : y);
                }
                tmp[n] = (int32_t)((uint32_t)tmp[n] + (uint32_t)s);
            }
        memset(emu_t.data[c][m], 0, EMU_COLSB);
        memcpy(emu_t.data[c][m], tmp, emu_t.colsb[c]);
    }
}

static void emu_tile_dpbsud(int c, int a, int b)
{
    emu_tile_dpb(c, a, b, 0);
}

static void emu_tile_dpbssd(int c, int a, int b)
{
    emu_tile_dpb(c, a, b, 1);
}

#define _tile_loadconfig emu_tile_loadconfig
#define _tile_release emu_tile_release
#define _tile_loadd emu_tile_loadd
#define _tile_stored emu_tile_stored
#define _tile_zero emu_tile_zero
#define _tile_dpbf16ps emu_tile_dpbf16ps
#define _tile_dpbsud emu_tile_dpbsud
#define _tile_dpbssd emu_tile_dpbssd

#define NB_AMX_EMULATE 1
#include "nb_amx.c"

/* The emulated instruction alone, for the test's semantic checks (DAZ,
 * FTZ, pair order): C[0][0] of a 1x1 (one pair) product, c0 + a.b. */
float nb_amx_emu_dot_pair(float c0, const nb_bf16 a[2], const nb_bf16 b[2])
{
    uint8_t cfg[64] = {1};
    for (int t = 0; t < 3; t++) {
        cfg[16 + 2 * t] = 4;
        cfg[48 + t] = 1;
    }
    emu_tile_loadconfig(cfg);
    uint8_t buf[4];
    memcpy(buf, &c0, 4);
    emu_tile_loadd(0, buf, 4);
    emu_tile_loadd(1, a, 4);
    emu_tile_loadd(2, b, 4);
    emu_tile_dpbf16ps(0, 1, 2);
    float r;
    emu_tile_stored(0, &r, 4);
    emu_tile_release();
    return r;
}
