/* test_dequant: bit-exact dequantization of hand-built Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q4_K / Q6_K
 * blocks, F16 and BF16 rows, the q/k row un-permutation and bf16 rounding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "nb_bf16.h"
#include "nb_tensor.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Bitwise equality, so -0.0 vs 0.0 and NaN payload differences show. */
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
    assert_string_equal(nb_ttype_name(NB_TT_Q4_1), "Q4_1");
    assert_string_equal(nb_ttype_name(NB_TT_BF16), "BF16");
    assert_string_equal(nb_ttype_name((nb_ttype)99), "?");
    assert_int_equal(nb_ttype_from_name("q8_0"), NB_TT_Q8_0);
    assert_int_equal(nb_ttype_from_name("F16"), NB_TT_F16);
    assert_int_equal(nb_ttype_from_name("q5_k"), -1);
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q8_0), 34);
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q4_0), 18);
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q4_1), 20);
    assert_int_equal(nb_ttype_block_elems(NB_TT_Q4_1), 32);
    assert_int_equal(nb_ttype_block_elems(NB_TT_F32), 1);
    size_t rb = 0;
    nb_err err;
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q4_1, 576, &rb, &err), NB_OK);
    assert_int_equal(rb, 360); /* SmolLM2's 576-wide Q4_1 rows */
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q8_0, 1536, &rb, &err), NB_OK);
    assert_int_equal(rb, 48 * 34);
    assert_int_equal(nb_ttype_row_bytes(NB_TT_BF16, 7, &rb, &err), NB_OK);
    assert_int_equal(rb, 14);
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q4_0, 33, &rb, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "not a multiple"));
    assert_int_equal(nb_ttype_row_bytes(NB_TT_F32, 0, &rb, &err), NB_EINVAL);
    assert_int_equal(nb_ttype_row_bytes(NB_TT_F32, INT64_MAX, &rb, &err), NB_ENOMEM);
    assert_int_equal(nb_ttype_row_bytes((nb_ttype)42, 32, &rb, &err), NB_EUNSUPPORTED);
}

static void test_q8_0(void **state)
{
    (void)state;
    uint8_t blk[3 * 34];
    float y[96];
    /* block 0: d = 0.5, extremes and element order */
    put16(blk, 0x3800);
    for (int j = 0; j < 32; j++)
        blk[2 + j] = (uint8_t)(int8_t)(j - 16);
    blk[2 + 0] = (uint8_t)(int8_t)-128;
    blk[2 + 31] = 127;
    /* block 1: d = -0.5 */
    put16(blk + 34, 0xb800);
    for (int j = 0; j < 32; j++)
        blk[34 + 2 + j] = (uint8_t)(int8_t)(3 * j - 40);
    /* block 2: d = 2^-24, the smallest f16 subnormal */
    put16(blk + 68, 0x0001);
    for (int j = 0; j < 32; j++)
        blk[68 + 2 + j] = (uint8_t)(int8_t)(j == 5 ? -7 : j);
    nb_dequant_row(NB_TT_Q8_0, blk, 96, y);
    assert_same_float(y[0], -64.0f);
    assert_same_float(y[31], 63.5f);
    for (int j = 1; j < 31; j++)
        assert_same_float(y[j], (float)(j - 16) * 0.5f);
    assert_same_float(y[16], 0.0f);
    for (int j = 0; j < 32; j++)
        assert_same_float(y[32 + j], (float)(3 * j - 40) * -0.5f);
    assert_same_float(y[32 + 13], 0.5f); /* (39 - 40) * -0.5 */
    assert_same_float(y[64 + 5], -0x7p-24f);
    assert_same_float(y[64 + 0], 0.0f);
    assert_same_float(y[64 + 31], 0x1fp-24f);
    /* zero times a negative scale is -0.0 in float32, as numpy computes it */
    uint8_t z[34] = {0};
    put16(z, 0xbc00);
    nb_dequant_row(NB_TT_Q8_0, z, 32, y);
    assert_same_float(y[0], -0.0f);
}

static void test_q4_0(void **state)
{
    (void)state;
    uint8_t blk[2 * 18];
    float y[64];
    put16(blk, 0x4000); /* d = 2 */
    for (int j = 0; j < 16; j++)
        blk[2 + j] = (uint8_t)(j | (15 - j) << 4);
    put16(blk + 18, 0x0200); /* d = 2^-15, subnormal f16 */
    for (int j = 0; j < 16; j++)
        blk[18 + 2 + j] = (uint8_t)(0x0f | (j == 3 ? 0 : 8) << 4);
    nb_dequant_row(NB_TT_Q4_0, blk, 64, y);
    /* element j < 16 is the low nibble of byte j, element j + 16 its high nibble */
    for (int j = 0; j < 16; j++) {
        assert_same_float(y[j], 2.0f * (float)(j - 8));
        assert_same_float(y[j + 16], 2.0f * (float)(7 - j));
    }
    assert_same_float(y[0], -16.0f);
    assert_same_float(y[15], 14.0f);
    assert_same_float(y[16], 14.0f);
    assert_same_float(y[31], -16.0f);
    assert_same_float(y[32], 0x7p-15f);
    assert_same_float(y[32 + 16 + 3], -0x8p-15f);
    assert_same_float(y[32 + 16 + 4], 0.0f);
    /* negative d */
    uint8_t n[18];
    put16(n, 0xc000); /* -2 */
    for (int j = 0; j < 16; j++)
        n[2 + j] = (uint8_t)(0x00 | 0xf0);
    nb_dequant_row(NB_TT_Q4_0, n, 32, y);
    assert_same_float(y[0], 16.0f);
    assert_same_float(y[16], -14.0f);
}

static void test_q4_1(void **state)
{
    (void)state;
    uint8_t blk[3 * 20];
    float y[96];
    put16(blk, 0x3c00);     /* d = 1 */
    put16(blk + 2, 0xbc00); /* m = -1 */
    for (int j = 0; j < 16; j++)
        blk[4 + j] = (uint8_t)(j | (15 - j) << 4);
    /* d = 1 + 2^-10, m = 2^-24: d*q is exact, the add rounds (to d*q here) */
    put16(blk + 20, 0x3c01);
    put16(blk + 22, 0x0001);
    for (int j = 0; j < 16; j++)
        blk[24 + j] = (uint8_t)(15 | 1 << 4);
    /* d = -0.25, m = 3.5; q = 0 gives exactly m */
    put16(blk + 40, 0xb400);
    put16(blk + 42, 0x4300);
    for (int j = 0; j < 16; j++)
        blk[44 + j] = (uint8_t)(j == 0 ? 0x00 : 0xf7);
    nb_dequant_row(NB_TT_Q4_1, blk, 96, y);
    for (int j = 0; j < 16; j++) {
        assert_same_float(y[j], (float)j - 1.0f);
        assert_same_float(y[j + 16], (float)(15 - j) - 1.0f);
    }
    assert_same_float(y[32], 15.0146484375f);          /* 15*(1+2^-10) + 2^-24 rounds down */
    assert_same_float(y[32 + 16], 0x1.004p0f); /* 1.0009765625 + 2^-24 is a tie: to even */
    assert_same_float(y[64], 3.5f);
    assert_same_float(y[64 + 16], 3.5f);
    assert_same_float(y[64 + 1], -0.25f * 7.0f + 3.5f);
    assert_same_float(y[64 + 17], -0.25f * 15.0f + 3.5f);
    assert_same_float(y[64 + 17], -0.25f);
}

static void test_f16(void **state)
{
    (void)state;
    const uint16_t h[] = {0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x8000,
                          0x3555, 0xc000, 0x8001, 0x3c00, 0x0000};
    const float want[] = {0x1p-24f, 0x3ffp-24f, 0x1p-14f, 65504.0f, INFINITY, -INFINITY, -0.0f,
                          0.333251953125f, -2.0f, -0x1p-24f, 1.0f, 0.0f};
    uint8_t raw[sizeof h + 1];
    memcpy(raw + 1, h, sizeof h); /* deliberately misaligned source */
    float y[12];
    nb_dequant_row(NB_TT_F16, raw + 1, 12, y);
    for (int i = 0; i < 12; i++)
        assert_same_float(y[i], want[i]);
    uint16_t nan = 0x7e00;
    nb_dequant_row(NB_TT_F16, &nan, 1, y);
    assert_true(isnan(y[0]));
}

static void test_bf16_and_f32(void **state)
{
    (void)state;
    const uint16_t b[] = {0x3f80, 0x0001, 0xff80, 0x4049, 0x8000, 0x7f7f};
    const float want[] = {1.0f, 0x1p-133f, -INFINITY, 3.140625f, -0.0f, 0x1.fep127f};
    float y[6];
    nb_dequant_row(NB_TT_BF16, b, 6, y);
    for (int i = 0; i < 6; i++)
        assert_same_float(y[i], want[i]);
    uint16_t nan = 0x7fc1;
    nb_dequant_row(NB_TT_BF16, &nan, 1, y);
    assert_true(isnan(y[0]));
    const float f[] = {1.5f, -0x1p-149f, 1e30f};
    nb_dequant_row(NB_TT_F32, f, 3, y);
    for (int i = 0; i < 3; i++)
        assert_same_float(y[i], f[i]);
}

static nb_tensor view(nb_ttype t, const void *data, int64_t rows, int64_t cols)
{
    nb_tensor v;
    memset(&v, 0, sizeof v);
    v.type = t;
    v.rows = rows;
    v.cols = cols;
    v.n_dims = rows > 1 ? 2 : 1;
    v.data = data;
    assert_int_equal(nb_ttype_row_bytes(t, cols, &v.row_bytes, NULL), NB_OK);
    return v;
}

/* fp32 -> bf16 through a tensor view: round to nearest, ties to even. */
static void test_row_bf16_rounding(void **state)
{
    (void)state;
    const uint32_t in[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f80ffffu,
                           0x7f7fffffu, 0x80000001u, 0x7fc00001u, 0x00000000u};
    const uint16_t want[] = {0x3f80, 0x3f82, 0x3f81, 0x3f81, 0x7f80, 0x8000, 0x7fc0, 0x0000};
    float f[8];
    memcpy(f, in, sizeof f);
    nb_tensor t = view(NB_TT_F32, f, 1, 8);
    nb_bf16 out[8];
    nb_tensor_row_bf16(&t, 0, out);
    for (int i = 0; i < 8; i++)
        assert_int_equal(out[i], want[i]);
    /* BF16 source: bits are copied, NaN payload kept */
    const uint16_t src[] = {0x7f81, 0x1234};
    t = view(NB_TT_BF16, src, 1, 2);
    nb_tensor_row_bf16(&t, 0, out);
    assert_int_equal(out[0], 0x7f81);
    assert_int_equal(out[1], 0x1234);
    /* F16 source: exact through fp32, then RNE (0x3c01 = 1 + 2^-10 -> 1.0) */
    const uint16_t h[] = {0x3c01, 0x3c03, 0x0001};
    t = view(NB_TT_F16, h, 1, 3);
    nb_tensor_row_bf16(&t, 0, out);
    assert_int_equal(out[0], 0x3f80);
    assert_int_equal(out[1], 0x3f80);
    assert_int_equal(out[2], nb_f32_to_bf16(0x1p-24f));
    /* quantized source: each dequantized value rounded */
    uint8_t q[20];
    put16(q, 0x3c01);
    put16(q + 2, 0x0000);
    for (int j = 0; j < 16; j++)
        q[4 + j] = 0xff;
    t = view(NB_TT_Q4_1, q, 1, 32);
    nb_bf16 qo[32];
    nb_tensor_row_bf16(&t, 0, qo);
    for (int j = 0; j < 32; j++)
        assert_int_equal(qo[j], nb_f32_to_bf16(15.0146484375f));
    assert_int_equal(qo[0], 0x4170); /* 15.0146 rounds to 15.0 in bf16 */
}

/* Stored row of logical row r for hd = 8 (half 4): hand-written table. */
static void test_qk_unpermute(void **state)
{
    (void)state;
    float rows[16][32];
    for (int s = 0; s < 16; s++)
        for (int c = 0; c < 32; c++)
            rows[s][c] = (float)(s * 100 + c);
    nb_tensor t = view(NB_TT_F32, rows, 16, 32);
    t.qk_perm_heads = 2;
    /* HF row h*8 + j*4 + i is stored at h*8 + 2*i + j */
    const int stored[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
    float y[32];
    for (int r = 0; r < 16; r++) {
        assert_ptr_equal(nb_tensor_row(&t, r), rows[stored[r]]);
        nb_tensor_row_f32(&t, r, y);
        assert_same_float(y[3], (float)(stored[r] * 100 + 3));
    }
    t.qk_perm_heads = 0;
    for (int r = 0; r < 16; r++)
        assert_ptr_equal(nb_tensor_row(&t, r), rows[r]);
    /* quantized rows move as whole rows too */
    uint8_t q[4][34];
    for (int s = 0; s < 4; s++) {
        memset(q[s], 0, 34);
        put16(q[s], 0x3c00);
        q[s][2] = (uint8_t)s;
    }
    nb_tensor tq = view(NB_TT_Q8_0, q, 4, 32);
    tq.qk_perm_heads = 1; /* hd 4: HF 0,1,2,3 = stored 0,2,1,3 */
    nb_tensor_row_f32(&tq, 1, y);
    assert_same_float(y[0], 2.0f);
    nb_tensor_row_f32(&tq, 2, y);
    assert_same_float(y[0], 1.0f);
}

/* Small deterministic values for the k-quant and Q5_0 blocks below. */
static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Q5_0: element j is the low nibble (byte j, or the high one of byte j - 16) plus bit j of the
 * little-endian qh word as its fifth bit, less 16; times d. */
static void test_q5_0(void **state)
{
    (void)state;
    uint8_t blk[22];
    int q[32];
    uint32_t seed = 7, qh = 0;
    for (int j = 0; j < 32; j++)
        q[j] = (int)(lcg(&seed) % 32);
    q[0] = 0, q[31] = 31, q[16] = 16;
    memset(blk, 0, sizeof blk);
    put16(blk, 0xb400); /* d = -0.25 */
    for (int j = 0; j < 32; j++) {
        qh |= (uint32_t)(q[j] >> 4) << j;
        blk[6 + j % 16] |= (uint8_t)((q[j] & 15) << (j < 16 ? 0 : 4));
    }
    blk[2] = (uint8_t)qh, blk[3] = (uint8_t)(qh >> 8), blk[4] = (uint8_t)(qh >> 16),
    blk[5] = (uint8_t)(qh >> 24);
    float y[32];
    nb_dequant_row(NB_TT_Q5_0, blk, 32, y);
    for (int j = 0; j < 32; j++)
        assert_same_float(y[j], -0.25f * (float)(q[j] - 16));
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q5_0), 22);
}

/* Q4_K: 8 sub-blocks of 32 with 6-bit scales sc and mins m; x = (d*sc)*q - dmin*m. */
static void test_q4_k(void **state)
{
    (void)state;
    uint8_t blk[144];
    int sc[8], mn[8], q[256];
    uint32_t seed = 11;
    for (int s = 0; s < 8; s++)
        sc[s] = (int)(lcg(&seed) % 64), mn[s] = (int)(lcg(&seed) % 64);
    sc[0] = 63, mn[7] = 63, sc[5] = 0; /* the top bits of the high sub-blocks matter */
    for (int e = 0; e < 256; e++)
        q[e] = (int)(lcg(&seed) % 16);
    memset(blk, 0, sizeof blk);
    put16(blk, 0x2c00);     /* d = 1/16 */
    put16(blk + 2, 0x3555); /* dmin = 0.333251953125 */
    uint8_t *k = blk + 4;
    for (int j = 0; j < 4; j++) { /* sub-blocks 0..3: 6 bits; 4..7: nibble + the 2 top bits */
        k[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        k[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        k[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
    for (int e = 0; e < 256; e++) { /* sub-block s: bytes 32*(s/2).., low nibble for even s */
        int s = e / 32, l = e % 32;
        blk[16 + 32 * (s / 2) + l] |= (uint8_t)(q[e] << (4 * (s % 2)));
    }
    float y[256];
    nb_dequant_row(NB_TT_Q4_K, blk, 256, y);
    for (int e = 0; e < 256; e++) {
        float ds = 0.0625f * (float)sc[e / 32], dm = 0x1.554p-2f * (float)mn[e / 32];
        float p = ds * (float)q[e];
        assert_same_float(y[e], p - dm);
    }
    assert_int_equal(nb_ttype_block_elems(NB_TT_Q4_K), 256);
    size_t rb = 0;
    nb_err err;
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q4_K, 640, &rb, &err), NB_EFORMAT);
    assert_int_equal(nb_ttype_row_bytes(NB_TT_Q4_K, 1024, &rb, &err), NB_OK);
    assert_int_equal(rb, 4 * 144);
}

/* Q6_K: 6-bit q = low nibble (ql) | 2 high bits (qh) << 4, less 32; one signed scale per 16. */
static void test_q6_k(void **state)
{
    (void)state;
    uint8_t blk[210];
    int q[256], sc[16];
    uint32_t seed = 5;
    for (int e = 0; e < 256; e++)
        q[e] = (int)(lcg(&seed) % 64);
    q[0] = 0, q[255] = 63;
    for (int i = 0; i < 16; i++)
        sc[i] = (int)(lcg(&seed) % 256) - 128;
    sc[3] = -128, sc[9] = 127;
    memset(blk, 0, sizeof blk);
    for (int e = 0; e < 256; e++) {
        /* each half of 128: ql byte r%64 (nibble r/64), qh byte r%32 (bit pair r/32) */
        int h = e / 128, r = e % 128;
        blk[64 * h + r % 64] |= (uint8_t)((q[e] & 15) << (4 * (r / 64)));
        blk[128 + 32 * h + r % 32] |= (uint8_t)((q[e] >> 4) << (2 * (r / 32)));
    }
    for (int i = 0; i < 16; i++)
        blk[192 + i] = (uint8_t)(int8_t)sc[i];
    put16(blk + 208, 0x1c00); /* d = 2^-8 */
    float y[256];
    nb_dequant_row(NB_TT_Q6_K, blk, 256, y);
    for (int e = 0; e < 256; e++)
        assert_same_float(y[e], (0x1p-8f * (float)sc[e / 16]) * (float)(q[e] - 32));
    assert_int_equal(nb_ttype_block_bytes(NB_TT_Q6_K), 210);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),   cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q4_0),         cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_f16),          cmocka_unit_test(test_bf16_and_f32),
        cmocka_unit_test(test_row_bf16_rounding), cmocka_unit_test(test_qk_unpermute),
        cmocka_unit_test(test_q5_0),         cmocka_unit_test(test_q4_k),
        cmocka_unit_test(test_q6_k),
    };
    return tu_run_group(tests, NULL, NULL);
}
