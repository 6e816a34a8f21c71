/* test_quant_kquant: Q5_0, Q4_K and Q6_K dequantization, bit for bit: hand-built blocks against
 * values written here from ggml's block layouts, real Gemma 3 blocks against gguf-py's; and
 * the real tensors through the native linears against fp64. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "nb_gguf.h"
#include "nb_kernels.h"
#include "nb_tensor.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#define assert_same_float(got, want)                                                          \
    do {                                                                                      \
        float g_ = (got), w_ = (want);                                                        \
        if (bits(g_) != bits(w_))                                                             \
            fail_msg("got %a (0x%08x), want %a (0x%08x)", (double)g_, bits(g_), (double)w_,  \
                     bits(w_));                                                               \
    } while (0)

static void put16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, 2);
}

static void test_type_table(void **state)
{
    (void)state;
    assert_string_equal(nb_ttype_name(NB_TT_Q4_K), "Q4_K");
    assert_int_equal(nb_ttype_from_name("q6_k"), NB_TT_Q6_K);
    assert_int_equal(nb_ttype_from_name("Q5_0"), NB_TT_Q5_0);
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q5_0), 22);
    assert_int_equal(nb_ttype_block_elems(NB_TT_Q5_0), 32);
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q4_K), 144);
    assert_int_equal(nb_ttype_block_elems(NB_TT_Q4_K), 256);
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q6_K), 210);
    assert_int_equal(nb_ttype_block_elems(NB_TT_Q6_K), 256);
    size_t rb = 0;
    nb_err err;
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q4_K, 2048, &rb, &err), NB_OK);
    assert_int_equal(rb, 8 * 144);
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q5_0, 640, &rb, &err), NB_OK);
    assert_int_equal(rb, 20 * 22);
    /* 640 is no multiple of 256: the message names the type and the block size */
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q6_K, 640, &rb, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "Q6_K block size 256"));
}

/* Q5_0: x = d * (q - 16), q = nibble | bit j of qh << 4; element j < 16 is the low nibble of
 * byte j, element j + 16 its high nibble, and qh's bit j belongs to element j. */
static void test_q5_0(void **state)
{
    (void)state;
    uint8_t blk[2 * 22];
    float y[64];
    put16(blk, 0x3800);                         /* d = 0.5 */
    uint32_t qh = 0x80010002u;                  /* elements 1, 16 and 31 */
    memcpy(blk + 2, &qh, 4);
    for (int j = 0; j < 16; j++)
        blk[6 + j] = (uint8_t)(j | (15 - j) << 4);
    put16(blk + 22, 0xc000);                    /* d = -2 */
    memset(blk + 24, 0xff, 4);                  /* every high bit */
    memset(blk + 28, 0x00, 16);                 /* q = 16: zero times -2 */
    nb_dequant_row(NB_TT_Q5_0, blk, 64, y);
    assert_same_float(y[0], -8.0f);             /* (0 - 16) * 0.5 */
    assert_same_float(y[1], 0.5f);              /* (1 + 16 - 16) * 0.5 */
    assert_same_float(y[15], -0.5f);            /* (15 - 16) * 0.5 */
    assert_same_float(y[16], 7.5f);             /* (15 + 16 - 16) * 0.5 */
    assert_same_float(y[17], -1.0f);            /* (14 - 16) * 0.5 */
    assert_same_float(y[31], 0.0f);             /* (0 + 16 - 16) * 0.5 */
    for (int j = 2; j < 15; j++) {
        assert_same_float(y[j], (float)(j - 16) * 0.5f);
        assert_same_float(y[j + 16], (float)(15 - j - 16) * 0.5f);
    }
    for (int j = 0; j < 32; j++)
        assert_same_float(y[32 + j], -0.0f);    /* float32: 0 * -2 is -0 */
}

/* Q4_K's 12 scale bytes from 8 six-bit scales and mins, packed as ggml packs them. */
static void pack_q4_k_scales(uint8_t *s, const int sc[8], const int m[8])
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* Q4_K: x = (d * sc[s]) * q - dmin * m[s] for sub-block s = i / 32; sub-blocks 2c and 2c+1
 * share the 32 bytes at 32c, low nibbles then high. */
static void test_q4_k(void **state)
{
    (void)state;
    uint8_t blk[144];
    float y[256];
    static const int sc[8] = {1, 2, 63, 4, 17, 33, 48, 63};
    static const int m[8] = {0, 5, 6, 63, 16, 32, 47, 1};
    put16(blk, 0x3c00);      /* d = 1 */
    put16(blk + 2, 0x3800);  /* dmin = 0.5 */
    pack_q4_k_scales(blk + 4, sc, m);
    for (int i = 0; i < 128; i++)
        blk[16 + i] = (uint8_t)((i % 16) | (15 - i % 16) << 4);
    nb_dequant_row(NB_TT_Q4_K, blk, 256, y);
    assert_same_float(y[0], 0.0f);            /* s 0: 1 * 0 - 0.5 * 0 */
    assert_same_float(y[33], 25.5f);          /* s 1: byte 1's high nibble 14: 2 * 14 - 2.5 */
    assert_same_float(y[4 * 32 + 3], 43.0f);  /* s 4: byte 67's low nibble 3: 17 * 3 - 8 */
    assert_same_float(y[5 * 32], 479.0f);     /* s 5: byte 64's high nibble 15: 33 * 15 - 16 */
    assert_same_float(y[3 * 32 + 2], 20.5f);  /* s 3: byte 34's high nibble 13: 4 * 13 - 31.5 */
    assert_same_float(y[7 * 32 + 31], -0.5f); /* s 7: byte 127's high nibble 0: 0 - 0.5 */
    for (int i = 0; i < 256; i++) {
        int s = i / 32, byte = 32 * (s / 2) + i % 32;
        int q = s % 2 ? (15 - byte % 16) : byte % 16;
        assert_same_float(y[i], (float)sc[s] * (float)q - 0.5f * (float)m[s]);
    }
}

/* Q6_K: x = (d * sc[i / 16]) * (q - 32); value i of half h = i / 128, k = (i % 128) / 32,
 * l = i % 32: low 4 bits from ql[64h + 32(k & 1) + l] (high nibble when k >= 2), high 2 bits
 * from qh[32h + l] >> 2k. */
static void test_q6_k(void **state)
{
    (void)state;
    uint8_t blk[210];
    float y[256];
    for (int i = 0; i < 128; i++)
        blk[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 64; i++)
        blk[128 + i] = (uint8_t)(i * 53 + 7);
    static const int8_t sc[16] = {1, -1, 2, -2, 3, 5, -7, 11, 127, -128, 0, 64, -64, 9, 10, 100};
    memcpy(blk + 192, sc, 16);
    put16(blk + 208, 0x3400); /* d = 0.25 */
    /* element 0: ql[0] = 11 -> low 0xb, qh[0] = 7 -> bits 0-1 = 3: q = 0x3b = 59 */
    blk[0] = 0x2b;
    blk[128] = 0xe4;          /* 11 10 01 00: k = 0..3 get 0, 1, 2, 3 */
    nb_dequant_row(NB_TT_Q6_K, blk, 256, y);
    assert_same_float(y[0], 0.25f * 1.0f * (float)(0xb - 32));           /* k 0: high 0 */
    assert_same_float(y[64], 0.25f * 3.0f * (float)(0x2 | 2 << 4) - 0.25f * 3.0f * 32.0f);
    int ql32 = blk[32];
    assert_same_float(y[32], (0.25f * 2.0f) * (float)((ql32 & 15) | 1 << 4) - 0.5f * 32.0f);
    assert_same_float(y[96], (0.25f * -7.0f) * (float)((ql32 >> 4) | 3 << 4) + 1.75f * 32.0f);
    for (int i = 0; i < 256; i++) {
        int h = i / 128, k = (i % 128) / 32, l = i % 32;
        int lo = blk[64 * h + 32 * (k & 1) + l];
        lo = k >= 2 ? lo >> 4 : lo & 15;
        int hi = (blk[128 + 32 * h + l] >> (2 * k)) & 3;
        assert_same_float(y[i], (0.25f * (float)sc[i / 16]) * (float)((lo | hi << 4) - 32));
    }
}

/* ---- real blocks: tests/data/quant_golden_gemma3.txt (tests/tools/quant_golden.py) ---- */

typedef struct golden {
    char type[8], tensor[96];
    long row, block;
    uint8_t raw[256];
    size_t n_raw;
    uint32_t val[256];
    int n_val;
} golden;

static int unhex(const char *s, uint8_t *out, size_t cap, size_t *n)
{
    *n = 0;
    while (s[0] && s[1] && s[0] != '\n') {
        unsigned v;
        if (*n >= cap || sscanf(s, "%2x", &v) != 1)
            return -1;
        out[(*n)++] = (uint8_t)v;
        s += 2;
    }
    return 0;
}

/* Reads the next block of the golden file; 0 at its end. */
static int next_golden(FILE *f, golden *g)
{
    char *line = NULL;
    size_t cap = 0;
    int got = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#')
            continue;
        if (!strncmp(line, "block ", 6)) {
            memset(g, 0, sizeof *g);
            assert_int_equal(sscanf(line + 6, "%7s %95s %ld %ld", g->type, g->tensor, &g->row,
                                    &g->block), 4);
        } else if (!strncmp(line, "raw ", 4)) {
            assert_int_equal(unhex(line + 4, g->raw, sizeof g->raw, &g->n_raw), 0);
        } else if (!strncmp(line, "f32 ", 4)) {
            char *p = line + 4, *end;
            while (g->n_val < 256 && (g->val[g->n_val] = (uint32_t)strtoul(p, &end, 16), end != p)) {
                g->n_val++;
                p = end;
            }
            got = 1;
            break;
        }
    }
    free(line);
    return got;
}

static FILE *open_golden(void)
{
    const char *src = tu_require_src();
    char path[2048];
    snprintf(path, sizeof path, "%s/tests/data/quant_golden_gemma3.txt", src);
    FILE *f = fopen(path, "r");
    tu_require(f != NULL, "%s is missing", path);
    return f;
}

static void test_golden_blocks(void **state)
{
    (void)state;
    FILE *f = open_golden();
    golden g;
    int per_type[NB_TT_COUNT] = {0};
    while (next_golden(f, &g)) {
        int t = nb_ttype_from_name(g.type);
        assert_true(t >= 0);
        assert_int_equal(g.n_raw, (size_t)nb_ttype_block_bytes((nb_ttype)t));
        assert_int_equal(g.n_val, nb_ttype_block_elems((nb_ttype)t));
        float y[256];
        nb_dequant_row((nb_ttype)t, g.raw, g.n_val, y);
        for (int i = 0; i < g.n_val; i++)
            if (bits(y[i]) != g.val[i])
                fail_msg("%s %s row %ld block %ld value %d: %a, gguf-py 0x%08x", g.type,
                         g.tensor, g.row, g.block, i, (double)y[i], g.val[i]);
        per_type[t]++;
    }
    fclose(f);
    assert_true(per_type[NB_TT_Q5_0] >= 3 && per_type[NB_TT_Q4_K] >= 3 &&
                per_type[NB_TT_Q6_K] >= 3);
}

/* The loader finds those blocks where gguf-py did: the model's tensors have the golden types,
 * shapes that hold the rows, and the same bytes at row / block. */
static void test_golden_in_model(void **state)
{
    (void)state;
    char path[2048];
    snprintf(path, sizeof path, "%s/models/gemma-3-270m-q4_k_m.gguf", tu_require_src());
    tu_require(access(path, R_OK) == 0, "%s is not fetched", path);
    nb_gguf *m;
    nb_err err;
    assert_int_equal(nb_gguf_open(path, &m, &err), NB_OK);
    FILE *f = open_golden();
    golden g;
    int n = 0;
    while (next_golden(f, &g)) {
        nb_tensor t;
        assert_int_equal(nb_gguf_find_tensor(m, g.tensor, &t, &err), NB_OK);
        assert_string_equal(nb_ttype_name(t.type), g.type);
        assert_true(g.row < t.rows);
        const uint8_t *row = t.data + (size_t)g.row * t.row_bytes;
        assert_memory_equal(row + (size_t)g.block * g.n_raw, g.raw, g.n_raw);
        float *y = malloc(sizeof(float) * (size_t)t.cols);
        nb_dequant_row(t.type, row, t.cols, y);
        for (int i = 0; i < g.n_val; i++)
            assert_int_equal(bits(y[(size_t)g.block * g.n_val + i]), g.val[i]);
        free(y);
        n++;
    }
    fclose(f);
    nb_gguf_close(m);
    assert_true(n >= 9);
}

/* Real Gemma weights of each type through the native linear, on every kernel path: each output
 * within the Q8 activation bound (sum_b d_b / 2 * sum |w|) of the fp64 dot of the dequantized
 * row, so the blocks the loader hands over are the ones the kernels read. */
static void test_real_linears(void **state)
{
    (void)state;
    static const char *names[] = {"blk.0.attn_q.weight", "blk.0.attn_output.weight",
                                  "blk.0.ffn_down.weight", "blk.0.attn_v.weight"};
    char path[2048];
    snprintf(path, sizeof path, "%s/models/gemma-3-270m-q4_k_m.gguf", tu_require_src());
    tu_require(access(path, R_OK) == 0, "%s is not fetched", path);
    nb_gguf *m;
    nb_err err;
    assert_int_equal(nb_gguf_open(path, &m, &err), NB_OK);
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    nb_isa best = nb_kernels_isa();
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        nb_tensor t;
        assert_int_equal(nb_gguf_find_tensor(m, names[k], &t, &err), NB_OK);
        int wt = nb_wtype_of_quant((nb_quant_fmt)t.type);
        assert_true(wt >= 0);
        int rows = t.rows < 96 ? (int)t.rows : 96, cols = (int)t.cols;
        nb_bf16 *x = malloc(sizeof(nb_bf16) * (size_t)cols);
        float *w = malloc(sizeof(float) * (size_t)cols), y[96];
        for (int c = 0; c < cols; c++) /* deterministic, signed, a few larger values */
            x[c] = nb_f32_to_bf16((float)((c * 7919) % 201 - 100) / (c % 29 ? 50.0f : 5.0f));
        for (nb_isa isa = NB_ISA_PORTABLE; isa <= NB_ISA_AMXBF16; isa++) {
            if (nb_kernels_set_isa(isa, &err))
                continue;
            nb_wmat *W;
            assert_int_equal(nb_wmat_create((nb_wtype)wt, rows, cols, &W, &err), NB_OK);
            for (int r = 0; r < rows; r++)
                nb_wmat_set_row(W, r, nb_tensor_row(&t, r));
            assert_int_equal(nb_wmat_finish(W, &err), NB_OK);
            nb_linear_bf16_f32out(W, x, 1, y);
            for (int r = 0; r < rows; r++) {
                nb_tensor_row_f32(&t, r, w);
                double exact = 0, bound = 0, mag = 0;
                for (int b = 0; b < cols / 32; b++) {
                    double amax = 0, wabs = 0;
                    for (int c = b * 32; c < b * 32 + 32; c++) {
                        double xv = nb_bf16_to_f32(x[c]);
                        amax = amax > fabs(xv) ? amax : fabs(xv);
                        wabs += fabs(w[c]);
                        exact += w[c] * xv;
                        mag += fabs(w[c] * xv);
                    }
                    bound += amax / 127 / 2 * wabs;
                }
                bound = bound * (1 + 1e-5) + 1e-5 * mag;
                if (fabs(y[r] - exact) > bound)
                    fail_msg("%s (%s) row %d: %.9g, fp64 %.9g, bound %.3g", names[k],
                             nb_isa_name(isa), r, (double)y[r], exact, bound);
            }
            nb_wmat_free(W);
        }
        free(x);
        free(w);
    }
    nb_kernels_set_isa(best, &err);
    nb_kernels_shutdown();
    nb_gguf_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),    cmocka_unit_test(test_q5_0),
        cmocka_unit_test(test_q4_k),          cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_golden_blocks), cmocka_unit_test(test_golden_in_model),
        cmocka_unit_test(test_real_linears),
    };
    return tu_run_group(tests, NULL, NULL);
}
