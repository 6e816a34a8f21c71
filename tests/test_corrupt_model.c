/* test_corrupt_model: damaged GGUF / safetensors / config files, made at test
 * time from the tiny generator's output; each must fail cleanly, naming the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "nb_gguf.h"
#include "nb_model.h"
#include "nb_safetensors.h"
#include "tools/nb_tiny.h"

static char tmp[4096];

static int setup(void **state)
{
    (void)state;
    return nb_tiny_mkdtemp(tmp, sizeof tmp, "test_corrupt");
}

static int teardown(void **state)
{
    (void)state;
    nb_tiny_rmtree(tmp);
    return 0;
}

static nb_tiny_buf image(nb_ttype t)
{
    nb_tiny_opts o = {.seed = 3, .type = t};
    nb_tiny_buf b;
    assert_int_equal(nb_tiny_gguf_image(&o, &b), 0);
    return b;
}

static void put_u32_at(nb_tiny_buf *b, size_t off, uint32_t v)
{
    assert_true(off + 4 <= b->n);
    memcpy(b->p + off, &v, 4);
}

static void put_u64_at(nb_tiny_buf *b, size_t off, uint64_t v)
{
    assert_true(off + 8 <= b->n);
    memcpy(b->p + off, &v, 8);
}

static uint32_t u32_at(const nb_tiny_buf *b, size_t off)
{
    uint32_t v;
    memcpy(&v, b->p + off, 4);
    return v;
}

static uint64_t u64_at(const nb_tiny_buf *b, size_t off)
{
    uint64_t v;
    memcpy(&v, b->p + off, 8);
    return v;
}

/* Offset of the length prefix of string s (the key or tensor name). */
static size_t str_at(const nb_tiny_buf *b, const char *s)
{
    size_t n = strlen(s);
    long at = nb_tiny_find(b->p, b->n, s, n, 0);
    while (at >= 8 && u64_at(b, (size_t)at - 8) != n)
        at = nb_tiny_find(b->p, b->n, s, n, (size_t)at + 1);
    if (at < 8)
        fail_msg("'%s' not in image", s);
    return (size_t)at - 8;
}

/* Offset of a KV's type field. */
static size_t kv_type_at(const nb_tiny_buf *b, const char *key)
{
    return str_at(b, key) + 8 + strlen(key);
}

/* Offset of a tensor info's n_dims field, and of its offset field. */
static size_t tinfo_at(const nb_tiny_buf *b, const char *name)
{
    return str_at(b, name) + 8 + strlen(name);
}

static size_t toffset_at(const nb_tiny_buf *b, const char *name)
{
    size_t p = tinfo_at(b, name);
    return p + 4 + 8 * u32_at(b, p) + 4;
}

/* End of tensor infos = start of the data section, rounded down. */
static size_t infos_end(const nb_tiny_buf *b)
{
    return toffset_at(b, "output_norm.weight") + 8;
}

static void write_case(const char *name, const void *d, size_t n, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", tmp, name);
    assert_int_equal(nb_tiny_write_file(path, d, n), 0);
}

#define assert_ok(rc, err)                                                                   \
    do {                                                                                     \
        nb_code rc_ = (rc);                                                                  \
        if (rc_ != NB_OK)                                                                    \
            fail_msg("%s: %s", nb_code_name(rc_), (err).msg);                               \
    } while (0)

#define check_err(rc, err, want, needle, file)                                               \
    do {                                                                                     \
        if ((rc) != (want) || !strstr((err).msg, (needle)) || !strstr((err).msg, (file)))   \
            fail_msg("got %s '%s'; want %s mentioning '%s' and '%s'", nb_code_name(rc),      \
                     (err).msg, nb_code_name(want), (needle), (file));                       \
    } while (0)

static void expect_gguf(const nb_tiny_buf *b, size_t n, nb_code want, const char *needle)
{
    char p[4200];
    write_case("case.gguf", b->p, n, p, sizeof p);
    nb_gguf *g = (nb_gguf *)1;
    nb_err err = {0};
    nb_code rc = nb_gguf_open(p, &g, &err);
    check_err(rc, err, want, needle, "case.gguf");
    assert_null(g);
}

/* Model-level errors: the GGUF parses but is not a usable Llama. */
static void expect_model(const nb_tiny_buf *b, nb_code want, const char *needle)
{
    char p[4200];
    write_case("model.gguf", b->p, b->n, p, sizeof p);
    nb_model *m = (nb_model *)1;
    nb_err err = {0};
    nb_code rc = nb_model_open(p, &m, &err);
    check_err(rc, err, want, needle, "model.gguf");
    assert_null(m);
}

/* ---- GGUF ---- */

static void test_truncation_sweep(void **state)
{
    (void)state;
    nb_tiny_buf b = image(NB_TT_Q4_1);
    size_t meta = infos_end(&b);
    char p[4200];
    snprintf(p, sizeof p, "%s/cut.gguf", tmp);
    /* every cut through header, metadata and tensor infos, then through the
     * data; descending, so each case is one truncate() of the same file */
    assert_int_equal(nb_tiny_write_file(p, b.p, b.n), 0);
    int cases = 0;
    for (size_t cut = b.n - 1; cut + 1 > 0; cut -= cut > meta + 64 ? 397 : 1) {
        assert_int_equal(truncate(p, (off_t)cut), 0);
        nb_gguf *g = NULL;
        nb_err err = {0};
        nb_code rc = nb_gguf_open(p, &g, &err);
        if (rc != NB_EFORMAT)
            fail_msg("cut at %zu of %zu: got %s '%s'", cut, b.n, nb_code_name(rc), err.msg);
        assert_null(g);
        assert_non_null(strstr(err.msg, "cut.gguf"));
        cases++;
        if (cut == 0)
            break;
    }
    assert_true((size_t)cases > meta);
    /* the exact size opens, one byte less does not */
    expect_gguf(&b, b.n - 1, NB_EFORMAT, "ends past end of file");
    assert_int_equal(nb_tiny_write_file(p, b.p, b.n), 0);
    nb_gguf *g;
    nb_err err;
    assert_int_equal(nb_gguf_open(p, &g, &err), NB_OK);
    nb_gguf_close(g);
    free(b.p);
}

static void test_truncation_messages(void **state)
{
    (void)state;
    nb_tiny_buf b = image(NB_TT_Q4_1);
    expect_gguf(&b, 10, NB_EFORMAT, "too small for a GGUF header");
    expect_gguf(&b, 0, NB_EFORMAT, "too small");
    size_t tok = kv_type_at(&b, "tokenizer.ggml.tokens");
    expect_gguf(&b, tok + 400, NB_EFORMAT, "metadata 'tokenizer.ggml.tokens'");
    expect_gguf(&b, kv_type_at(&b, "tokenizer.ggml.bos_token_id") + 6, NB_EFORMAT,
                "metadata 'tokenizer.ggml.bos_token_id'");
    /* early cuts leave too few bytes for the declared counts */
    expect_gguf(&b, kv_type_at(&b, "llama.block_count") + 2, NB_EFORMAT,
                "n_kv = 27 metadata entries cannot fit");
    expect_gguf(&b, tinfo_at(&b, "output_norm.weight") + 6, NB_EFORMAT,
                "tensor 'output_norm.weight'");
    expect_gguf(&b, tinfo_at(&b, "blk.0.attn_q.weight") + 6, NB_EFORMAT,
                "n_tensors = 20 tensor infos cannot fit");
    expect_gguf(&b, str_at(&b, "blk.1.ffn_down.weight") + 12, NB_EFORMAT,
                "tensor info 18 name at offset");
    /* cut inside the data: the last tensor is output_norm (F32, 64 values) */
    expect_gguf(&b, b.n - 100, NB_EFORMAT,
                "tensor 'output_norm.weight' (type F32, 1x64): data [");
    free(b.p);
}

static void test_header_fields(void **state)
{
    (void)state;
    nb_tiny_buf b = image(NB_TT_F16);
    memcpy(b.p, "GGUX", 4);
    expect_gguf(&b, b.n, NB_EFORMAT, "bad magic");
    memcpy(b.p, "GGUF", 4);
    put_u32_at(&b, 4, 1);
    expect_gguf(&b, b.n, NB_EUNSUPPORTED, "GGUF version 1 is not supported");
    put_u32_at(&b, 4, 4);
    expect_gguf(&b, b.n, NB_EUNSUPPORTED, "version 4");
    put_u32_at(&b, 4, 0x03000000u);
    expect_gguf(&b, b.n, NB_EUNSUPPORTED, "big-endian");
    put_u32_at(&b, 4, 2); /* v2 has the same layout */
    char p[4200];
    write_case("v2.gguf", b.p, b.n, p, sizeof p);
    nb_gguf *g;
    nb_err err;
    assert_int_equal(nb_gguf_open(p, &g, &err), NB_OK);
    assert_int_equal(nb_gguf_version(g), 2);
    nb_gguf_close(g);
    put_u32_at(&b, 4, 3);
    uint64_t n_kv = u64_at(&b, 16), n_t = u64_at(&b, 8);
    put_u64_at(&b, 16, 1ull << 60);
    expect_gguf(&b, b.n, NB_EFORMAT, "n_kv = 1152921504606846976");
    put_u64_at(&b, 16, UINT64_MAX);
    expect_gguf(&b, b.n, NB_EFORMAT, "n_kv");
    put_u64_at(&b, 16, n_kv + 1); /* one KV more: the first tensor info is read as one */
    expect_gguf(&b, b.n, NB_EFORMAT, "tensor info 0");
    put_u64_at(&b, 16, n_kv);
    put_u64_at(&b, 8, 1ull << 60);
    expect_gguf(&b, b.n, NB_EFORMAT, "n_tensors");
    put_u64_at(&b, 8, n_t + 100000);
    expect_gguf(&b, b.n, NB_EFORMAT, "n_tensors = 100020 tensor infos cannot fit");
    put_u64_at(&b, 8, n_t + 1); /* one more: the data is read as a tensor info */
    expect_gguf(&b, b.n, NB_EFORMAT, "tensor info 20");
    put_u64_at(&b, 8, n_t);
    free(b.p);
}

static void test_metadata_fields(void **state)
{
    (void)state;
    nb_tiny_buf b = image(NB_TT_F32);
    /* a key length past EOF */
    size_t k0 = str_at(&b, "general.architecture");
    put_u64_at(&b, k0, 1ull << 62);
    expect_gguf(&b, b.n, NB_EFORMAT, "string length 4611686018427387904 runs past end of file");
    put_u64_at(&b, k0, 0);
    expect_gguf(&b, b.n, NB_EFORMAT, "metadata entry 0: key of 0 bytes");
    put_u64_at(&b, k0, strlen("general.architecture"));
    /* a string value length past EOF */
    size_t v = kv_type_at(&b, "general.name") + 4;
    uint64_t len = u64_at(&b, v);
    put_u64_at(&b, v, b.n);
    expect_gguf(&b, b.n, NB_EFORMAT, "metadata 'general.name'");
    put_u64_at(&b, v, len);
    /* unknown value type */
    size_t t = kv_type_at(&b, "general.type");
    put_u32_at(&b, t, 99);
    expect_gguf(&b, b.n, NB_EFORMAT, "unknown value type 99");
    put_u32_at(&b, t, 8);
    /* array element count past EOF, and a bad element type */
    size_t a = kv_type_at(&b, "tokenizer.ggml.tokens");
    uint64_t na = u64_at(&b, a + 8);
    put_u64_at(&b, a + 8, 1ull << 61);
    expect_gguf(&b, b.n, NB_EFORMAT, "'tokenizer.ggml.tokens': array of 2305843009213693952");
    put_u64_at(&b, a + 8, na);
    size_t tt = kv_type_at(&b, "tokenizer.ggml.token_type");
    put_u64_at(&b, tt + 8, 1ull << 61);
    expect_gguf(&b, b.n, NB_EFORMAT, "'tokenizer.ggml.token_type': array of");
    put_u64_at(&b, tt + 8, 300);
    put_u32_at(&b, tt + 4, 13);
    expect_gguf(&b, b.n, NB_EFORMAT, "unknown array element type 13");
    put_u32_at(&b, tt + 4, 5);
    /* bool must be 0 or 1 */
    size_t bo = kv_type_at(&b, "tokenizer.ggml.add_bos_token") + 4;
    b.p[bo] = 2;
    expect_gguf(&b, b.n, NB_EFORMAT, "bool byte is 2");
    b.p[bo] = 0;
    /* duplicate key (same length, so the layout is unchanged) */
    size_t gt = str_at(&b, "general.type");
    memcpy(b.p + gt + 8, "general.name", 12);
    expect_gguf(&b, b.n, NB_EFORMAT, "metadata key 'general.name' appears twice");
    memcpy(b.p + gt + 8, "general.type", 12);
    free(b.p);
}

static void test_alignment_field(void **state)
{
    (void)state;
    nb_tiny_opts o = {.seed = 3, .type = NB_TT_Q8_0, .alignment = 64};
    nb_tiny_buf b;
    assert_int_equal(nb_tiny_gguf_image(&o, &b), 0);
    size_t al = kv_type_at(&b, "general.alignment") + 4;
    put_u32_at(&b, al, 48);
    expect_gguf(&b, b.n, NB_EFORMAT, "general.alignment = 48: must be a power of two");
    put_u32_at(&b, al, 0);
    expect_gguf(&b, b.n, NB_EFORMAT, "general.alignment = 0");
    /* 32 is a power of two but every offset (multiples of 64) still fits */
    put_u32_at(&b, al, 32);
    char p[4200];
    write_case("a32.gguf", b.p, b.n, p, sizeof p);
    nb_gguf *g;
    nb_err err;
    assert_ok(nb_gguf_open(p, &g, &err), err);
    nb_gguf_close(g);
    put_u32_at(&b, al - 4, 8); /* alignment as a string: wrong type */
    expect_gguf(&b, b.n, NB_EFORMAT, "metadata");
    free(b.p);
}

static void test_tensor_fields(void **state)
{
    (void)state;
    nb_tiny_buf b = image(NB_TT_Q4_1);
    const char *q = "blk.0.attn_q.weight";
    size_t nd = tinfo_at(&b, q), off = toffset_at(&b, q);
    size_t ty = off - 4;
    uint64_t o0 = u64_at(&b, off);
    /* offset past the end, then misaligned */
    put_u64_at(&b, off, (uint64_t)b.n * 2 / 32 * 32);
    expect_gguf(&b, b.n, NB_EFORMAT,
                "tensor 'blk.0.attn_q.weight' (type Q4_1, 64x64): data [");
    expect_gguf(&b, b.n, NB_EFORMAT, "ends past end of file");
    put_u64_at(&b, off, UINT64_MAX / 32 * 32);
    expect_gguf(&b, b.n, NB_EFORMAT, "ends past end of file");
    put_u64_at(&b, off, o0 + 1);
    expect_gguf(&b, b.n, NB_EFORMAT, "data offset");
    expect_gguf(&b, b.n, NB_EFORMAT, "not a multiple of general.alignment (32)");
    put_u64_at(&b, off, o0);
    /* types */
    put_u32_at(&b, ty, 99);
    expect_gguf(&b, b.n, NB_EUNSUPPORTED, "tensor 'blk.0.attn_q.weight': unknown tensor type 99");
    put_u32_at(&b, ty, 13);
    expect_gguf(&b, b.n, NB_EUNSUPPORTED, "type Q5_K (13) is not supported");
    /* a supported k-quant whose rows (64) are no multiple of its 256-value super-block */
    put_u32_at(&b, ty, 14);
    expect_gguf(&b, b.n, NB_EFORMAT, "not a multiple of the Q6_K block size 256");
    put_u32_at(&b, ty, 3);
    /* n_dims */
    put_u32_at(&b, nd, 5);
    expect_gguf(&b, b.n, NB_EFORMAT, "tensor 'blk.0.attn_q.weight': n_dims = 5, must be 1..4");
    put_u32_at(&b, nd, 0);
    expect_gguf(&b, b.n, NB_EFORMAT, "n_dims = 0");
    put_u32_at(&b, nd, 2);
    /* dimensions: zero, huge, element count overflow, not a block multiple */
    put_u64_at(&b, nd + 4, 0);
    expect_gguf(&b, b.n, NB_EFORMAT, "dimension 0 = 0");
    put_u64_at(&b, nd + 4, 1ull << 63);
    expect_gguf(&b, b.n, NB_EFORMAT, "dimension 0");
    put_u64_at(&b, nd + 4, 1ull << 40);
    put_u64_at(&b, nd + 12, 1ull << 40);
    expect_gguf(&b, b.n, NB_EFORMAT, "element count overflows");
    put_u64_at(&b, nd + 12, 64);
    put_u64_at(&b, nd + 4, 48);
    expect_gguf(&b, b.n, NB_EFORMAT, "not a multiple of the Q4_1 block size 32");
    put_u64_at(&b, nd + 4, 64);
    /* duplicate and bad names */
    size_t up = str_at(&b, "blk.1.ffn_up.weight");
    b.p[up + 8 + 4] = '0';
    expect_gguf(&b, b.n, NB_EFORMAT, "tensor 'blk.0.ffn_up.weight' appears twice");
    b.p[up + 8 + 4] = '1';
    b.p[up + 8 + 2] = '\0';
    expect_gguf(&b, b.n, NB_EFORMAT, "NUL");
    b.p[up + 8 + 2] = 'k';
    /* restored image opens */
    char p[4200];
    write_case("ok.gguf", b.p, b.n, p, sizeof p);
    nb_gguf *g;
    nb_err err;
    assert_int_equal(nb_gguf_open(p, &g, &err), NB_OK);
    nb_gguf_close(g);
    free(b.p);
}

static void test_model_level_gguf(void **state)
{
    (void)state;
    nb_tiny_buf b = image(NB_TT_Q8_0);
    /* missing tensor (renamed, same length) */
    size_t up = str_at(&b, "blk.1.ffn_up.weight");
    memcpy(b.p + up + 8 + 6, "ffn_xx", 6);
    expect_model(&b, NB_ENOTFOUND, "required tensor 'blk.1.ffn_up.weight' is missing");
    memcpy(b.p + up + 8 + 6, "ffn_up", 6);
    /* config disagrees with a shape */
    size_t ffn = kv_type_at(&b, "llama.feed_forward_length") + 4;
    put_u32_at(&b, ffn, 256);
    expect_model(&b, NB_EMISMATCH,
                 "tensor 'blk.0.ffn_gate.weight': shape 128x64 (2-D), expected 256x64");
    put_u32_at(&b, ffn, 128);
    size_t kvh = kv_type_at(&b, "llama.attention.head_count_kv") + 4;
    put_u32_at(&b, kvh, 1);
    expect_model(&b, NB_EMISMATCH, "blk.0.attn_k.weight");
    put_u32_at(&b, kvh, 3);
    expect_model(&b, NB_EINVAL, "not divisible by llama.attention.head_count_kv");
    put_u32_at(&b, kvh, 2);
    /* unknown architecture */
    size_t arch = kv_type_at(&b, "general.architecture") + 4 + 8;
    memcpy(b.p + arch, "mamba", 5);
    expect_model(&b, NB_EUNSUPPORTED, "general.architecture 'mamba' is not supported");
    memcpy(b.p + arch, "llama", 5);
    /* invalid and missing config values */
    size_t bc = kv_type_at(&b, "llama.block_count") + 4;
    put_u32_at(&b, bc, 0);
    expect_model(&b, NB_EINVAL, "llama.block_count = 0: must be in 1..1024");
    put_u32_at(&b, bc, 5000);
    expect_model(&b, NB_EINVAL, "llama.block_count = 5000");
    put_u32_at(&b, bc, 2);
    size_t eps = kv_type_at(&b, "llama.attention.layer_norm_rms_epsilon") + 4;
    float neg = -1.0f;
    memcpy(b.p + eps, &neg, 4);
    expect_model(&b, NB_EINVAL, "layer_norm_rms_epsilon");
    float e5 = 1e-5f;
    memcpy(b.p + eps, &e5, 4);
    size_t ctx = str_at(&b, "llama.context_length");
    b.p[ctx + 8 + 19] = 'x';
    expect_model(&b, NB_ENOTFOUND, "'llama.context_length' not found");
    b.p[ctx + 8 + 19] = 'h';
    size_t vs = kv_type_at(&b, "llama.vocab_size") + 4;
    put_u32_at(&b, vs, 301);
    expect_model(&b, NB_EMISMATCH, "llama.vocab_size 301");
    put_u32_at(&b, vs, 300);
    size_t rd = kv_type_at(&b, "llama.rope.dimension_count") + 4;
    put_u32_at(&b, rd, 8);
    expect_model(&b, NB_EUNSUPPORTED, "partial rotary");
    put_u32_at(&b, rd, 16);
    /* every field restored: the model opens */
    char p[4200];
    write_case("model.gguf", b.p, b.n, p, sizeof p);
    nb_model *m;
    nb_err err;
    assert_int_equal(nb_model_open(p, &m, &err), NB_OK);
    nb_model_close(m);
    free(b.p);
    /* not a GGUF at all */
    nb_tiny_buf junk = {0};
    nb_tiny_printf(&junk, "this is not a model file, just some text of sufficient length");
    expect_model(&junk, NB_EFORMAT, "bad magic");
    free(junk.p);
    nb_err e2;
    assert_int_equal(nb_model_open("/nonexistent/m.gguf", &m, &e2), NB_ENOTFOUND);
    assert_non_null(strstr(e2.msg, "/nonexistent/m.gguf"));
}

/* ---- safetensors ---- */

static void st_file(const char *name, const char *header, size_t data_len, char *path,
                    size_t cap)
{
    nb_tiny_buf f = {0};
    nb_tiny_put_u64(&f, strlen(header));
    nb_tiny_put(&f, header, strlen(header));
    for (size_t i = 0; i < data_len; i++)
        nb_tiny_put(&f, "\x3f", 1);
    write_case(name, f.p, f.n, path, cap);
    free(f.p);
}

static void expect_st(const char *header, size_t data_len, nb_code want, const char *needle)
{
    char p[4200];
    st_file("case.safetensors", header, data_len, p, sizeof p);
    nb_safetensors *st = (nb_safetensors *)1;
    nb_err err = {0};
    nb_code rc = nb_safetensors_open(p, &st, &err);
    check_err(rc, err, want, needle, "case.safetensors");
    assert_null(st);
}

static void test_safetensors_headers(void **state)
{
    (void)state;
    const char *ok = "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                     "\"__metadata__\":{\"format\":\"pt\"}}";
    char p[4200];
    st_file("ok.safetensors", ok, 12, p, sizeof p);
    nb_safetensors *st;
    nb_err err;
    assert_int_equal(nb_safetensors_open(p, &st, &err), NB_OK);
    nb_tensor t;
    assert_int_equal(nb_safetensors_find(st, "a", &t, &err), NB_OK);
    assert_int_equal(t.rows, 2);
    assert_int_equal(t.cols, 3);
    assert_int_equal(nb_safetensors_n_tensors(st), 1);
    nb_safetensors_close(st);

    expect_st(ok, 11, NB_EFORMAT, "tensor 'a': data_offsets [0, 12) outside the data section");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,10]}}", 12,
              NB_EFORMAT, "tensor 'a': data_offsets span 10 bytes but shape x BF16 needs 12");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", 12,
              NB_EFORMAT, "needs 24");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[12,0]}}", 12,
              NB_EFORMAT, "reversed");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0]}}", 12,
              NB_EFORMAT, "'data_offsets' must be [begin, end]");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[-2,10]}}", 12,
              NB_EFORMAT, "data_offsets");
    expect_st("{\"a\":{\"dtype\":\"Q9\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", 12,
              NB_EFORMAT, "tensor 'a': unknown dtype 'Q9'");
    expect_st("{\"a\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12,
              NB_EUNSUPPORTED, "dtype I32 is not supported");
    expect_st("{\"a\":{\"dtype\":7,\"shape\":[3],\"data_offsets\":[0,12]}}", 12, NB_EFORMAT,
              "'dtype'");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":[-1,3],\"data_offsets\":[0,12]}}", 12,
              NB_EFORMAT, "shape[0] is not a non-negative integer");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":\"2x3\",\"data_offsets\":[0,12]}}", 12,
              NB_EFORMAT, "'shape'");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4294967296,4294967296],"
              "\"data_offsets\":[0,12]}}", 12, NB_EFORMAT, "element count overflows");
    expect_st("{\"a\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,1,1,1,1,1,1],"
              "\"data_offsets\":[0,2]}}", 12, NB_EUNSUPPORTED, "9 dimensions");
    expect_st("{\"a\":[1,2]}", 0, NB_EFORMAT, "tensor 'a' is not a JSON object");
    expect_st("[1,2]", 0, NB_EFORMAT, "header is not a JSON object");
    expect_st("{\"a\":{\"dtype\":\"BF16\",", 0, NB_EFORMAT, "invalid JSON");
    expect_st("{\"a\" 1}", 0, NB_EFORMAT, "invalid JSON");
    expect_st("{} x", 0, NB_EFORMAT, "unexpected data");
    /* header length past EOF, file shorter than the length field */
    nb_tiny_buf f = {0};
    nb_tiny_put_u64(&f, 1000);
    nb_tiny_put(&f, "{}", 2);
    write_case("case.safetensors", f.p, f.n, p, sizeof p);
    st = (nb_safetensors *)1;
    nb_code rc = nb_safetensors_open(p, &st, &err);
    check_err(rc, err, NB_EFORMAT, "header length 1000 runs past end of file (10 bytes)",
              "case.safetensors");
    write_case("case.safetensors", f.p, 5, p, sizeof p);
    rc = nb_safetensors_open(p, &st, &err);
    check_err(rc, err, NB_EFORMAT, "too small", "case.safetensors");
    free(f.p);
    /* an empty tensor is legal; a zero-length header is not JSON */
    expect_st("", 0, NB_EFORMAT, "invalid JSON");
    st_file("empty.safetensors",
            "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[0,0]}}", 0, p, sizeof p);
    assert_int_equal(nb_safetensors_open(p, &st, &err), NB_OK);
    assert_int_equal(nb_safetensors_find(st, "e", &t, &err), NB_OK);
    assert_int_equal(t.rows, 0);
    nb_safetensors_close(st);
    assert_int_equal(nb_safetensors_open_dir(tmp, &st, &err), NB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "model.safetensors"));
}

/* ---- HF directories ---- */

static void hf_dir(const char *name, int shards, char *dir, size_t cap)
{
    nb_tiny_opts o = {.seed = 3, .type = NB_TT_BF16};
    snprintf(dir, cap, "%s/%s", tmp, name);
    assert_int_equal(nb_tiny_write_hf(&o, dir, shards), 0);
}

static void edit(const char *dir, const char *file, const char *from, const char *to)
{
    char p[8300];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(nb_tiny_read_file(p, &d, &n), 0);
    long at = nb_tiny_find(d, n, from, strlen(from), 0);
    if (at < 0)
        fail_msg("'%s' not in %s", from, p);
    nb_tiny_buf o = {0};
    nb_tiny_put(&o, d, (size_t)at);
    nb_tiny_put(&o, to, strlen(to));
    nb_tiny_put(&o, d + at + strlen(from), n - (size_t)at - strlen(from));
    assert_int_equal(nb_tiny_write_file(p, o.p, o.n), 0);
    free(d);
    free(o.p);
}

static void expect_hf(const char *dir, nb_code want, const char *needle, const char *file)
{
    nb_model *m = (nb_model *)1;
    nb_err err = {0};
    nb_code rc = nb_model_open(dir, &m, &err);
    check_err(rc, err, want, needle, file);
    assert_null(m);
}

static void hf_case(const char *from, const char *to, nb_code want, const char *needle)
{
    char dir[4200];
    hf_dir("hfcase", 1, dir, sizeof dir);
    edit(dir, "config.json", from, to);
    expect_hf(dir, want, needle, "hfcase");
    nb_tiny_rmtree(dir);
}

static void hf_ok(const char *from, const char *to)
{
    char dir[4200];
    hf_dir("hfok", 1, dir, sizeof dir);
    edit(dir, "config.json", from, to);
    nb_model *m;
    nb_err err;
    assert_ok(nb_model_open(dir, &m, &err), err);
    nb_model_close(m);
    nb_tiny_rmtree(dir);
}

static void test_hf_config(void **state)
{
    (void)state;
    hf_case("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3", NB_ENOTFOUND,
            "required tensor 'model.layers.2.input_layernorm.weight' is missing");
    hf_case("\"intermediate_size\": 128", "\"intermediate_size\": 256", NB_EMISMATCH,
            "tensor 'model.layers.0.mlp.gate_proj.weight': shape 128x64 (2-D), expected 256x64"
            " (intermediate size x hidden size)");
    hf_case("\"head_dim\": 16", "\"head_dim\": 8", NB_EMISMATCH, "q_proj");
    hf_case("\"vocab_size\": 300", "\"vocab_size\": 320", NB_EMISMATCH, "vocab_size 320");
    /* either the architectures list or model_type identifies a Llama */
    hf_ok("\"LlamaForCausalLM\"", "\"GPT2LMHeadModel\"");
    hf_ok("\"model_type\": \"llama\"", "\"model_type\": \"gpt2\"");
    char dir[4200];
    hf_dir("hfarch", 1, dir, sizeof dir);
    edit(dir, "config.json", "\"LlamaForCausalLM\"", "\"GPT2LMHeadModel\"");
    edit(dir, "config.json", "\"model_type\": \"llama\"", "\"model_type\": \"gpt2\"");
    expect_hf(dir, NB_EUNSUPPORTED, "architecture GPT2LMHeadModel (model_type gpt2)", "config.json");
    nb_tiny_rmtree(dir);
    hf_case("\"hidden_size\": 64", "\"hidden_sizes\": 64", NB_EINVAL, "config.json: hidden_size: required");
    hf_case("\"hidden_size\": 64", "\"hidden_size\": \"64\"", NB_EINVAL,
            "config.json: hidden_size: must be a non-negative integer, got \"64\"");
    hf_case("\"hidden_size\": 64", "\"hidden_size\": 100000", NB_EINVAL,
            "hidden_size = 100000: must be in 1..65536");
    hf_case("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", NB_EINVAL,
            "num_attention_heads = 4 is not divisible by num_key_value_heads = 3");
    hf_case("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0", NB_EINVAL, "rms_norm_eps");
    hf_case("\"rope_theta\": 100000.0", "\"rope_theta\": -1", NB_EINVAL, "rope_theta");
    hf_case("\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\"}",
            NB_EUNSUPPORTED, "rope_type 'yarn' is not supported");
    hf_case("\"rope_scaling\": null",
            "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}", NB_EINVAL,
            "config.json: low_freq_factor: required");
    hf_case("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1", NB_EINVAL,
            "tie_word_embeddings");
    hf_case("{", "{{", NB_EFORMAT, "invalid JSON");
    /* missing config, missing weights */
    hf_dir("hfmiss", 1, dir, sizeof dir);
    char p[8300];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    remove(p);
    expect_hf(dir, NB_ENOTFOUND, "no model.safetensors or model.safetensors.index.json", "hfmiss");
    snprintf(p, sizeof p, "%s/config.json", dir);
    remove(p);
    expect_hf(dir, NB_ENOTFOUND, "config.json", "hfmiss");
    nb_tiny_rmtree(dir);
}

/* Accepted variants: defaults and transformers-5 rope_parameters. */
static void test_hf_config_variants(void **state)
{
    (void)state;
    char dir[4200];
    hf_dir("hfvar", 1, dir, sizeof dir);
    edit(dir, "config.json", "\"head_dim\": 16,", "");
    edit(dir, "config.json", "\"tie_word_embeddings\": true,", "");
    edit(dir, "config.json", "\"rope_theta\": 100000.0,", "");
    edit(dir, "config.json", "\"rope_scaling\": null,",
         "\"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"llama3\","
         " \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
         " \"original_max_position_embeddings\": 64},");
    nb_model *m;
    nb_err err;
    assert_ok(nb_model_open(dir, &m, &err), err);
    const nb_model_config *c = nb_model_cfg(m);
    assert_int_equal(c->head_dim, 16);
    assert_true(c->rope_theta == 500000.0f);
    assert_int_equal(c->rope_scaling, NB_ROPE_LLAMA3);
    assert_true(c->rope_factor == 8.0f);
    assert_true(c->rope_low_freq_factor == 1.0f);
    assert_true(c->rope_high_freq_factor == 4.0f);
    assert_int_equal(c->rope_orig_max_pos, 64);
    assert_int_equal(c->tied_embeddings, 1); /* no lm_head.weight: the embedding */
    nb_model_close(m);
    nb_tiny_rmtree(dir);
}

/* The committed tiny Gemma 3 directory (tests/tools), copied so config.json can be edited. */
static void gemma_dir(const char *name, char *dir, size_t cap)
{
    char cmd[9000];
    snprintf(dir, cap, "%s/%s", tmp, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s/tests/data/tiny_hf/gemma3' '%s'", dir,
             tu_require_src(), dir);
    assert_int_equal(system(cmd), 0);
}

static void gemma_case(const char *from, const char *to, nb_code want, const char *needle)
{
    char dir[4200];
    gemma_dir("gemcase", dir, sizeof dir);
    edit(dir, "config.json", from, to);
    expect_hf(dir, want, needle, "config.json");
    nb_tiny_rmtree(dir);
}

/* Gemma 3's own config keys: read as HF reads them, refused by name where the engine has no
 * such path (a global layer off the pattern, another activation, attention soft-capping). */
static void test_hf_gemma3_config(void **state)
{
    (void)state;
    char dir[4200];
    gemma_dir("gemok", dir, sizeof dir);
    nb_model *m;
    nb_err err;
    assert_ok(nb_model_open(dir, &m, &err), err);
    const nb_model_config *c = nb_model_cfg(m);
    assert_string_equal(c->arch, "gemma3");
    assert_true(c->post_norms && c->qk_norm && c->embed_scaled && c->norm_unit_offset);
    assert_int_equal(c->act, NB_ACT_GELU_TANH);
    assert_int_equal(c->sliding_window, 4);
    assert_int_equal(c->swa_every, 6);
    assert_true(c->rope_theta == 1e6f && c->rope_theta_swa == 1e4f);
    assert_true(c->attn_scale == 0.25f); /* query_pre_attn_scalar 16 */
    assert_true(c->final_softcap == 0.0f && c->tied_embeddings);
    nb_model_close(m);
    /* transformers 4's flat keys give the same bases */
    edit(dir, "config.json", "\"rope_parameters\": {", "\"rope_theta\": 2e6, \"rope_local_base_freq\": 5e3, \"rope_x\": {");
    edit(dir, "config.json", "\"query_pre_attn_scalar\": 16", "\"query_pre_attn_scalar\": 64");
    edit(dir, "config.json", "\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0");
    assert_ok(nb_model_open(dir, &m, &err), err);
    c = nb_model_cfg(m);
    assert_true(c->rope_theta == 2e6f && c->rope_theta_swa == 5e3f);
    assert_true(c->attn_scale == 0.125f && c->final_softcap == 30.0f);
    nb_model_close(m);
    nb_tiny_rmtree(dir);

    gemma_case("\"sliding_attention\",\n    \"full_attention\"",
               "\"full_attention\",\n    \"full_attention\"", NB_EUNSUPPORTED,
               "layer_types[4] is full_attention, which the pattern of one global layer in 6"
               " does not give");
    gemma_case("\"full_attention\"\n  ]", "\"cross_attention\"\n  ]", NB_EINVAL,
               "layer_types[5] 'cross_attention': expected sliding_attention or full_attention");
    gemma_case("\"full_attention\"\n  ]", "\"full_attention\", \"full_attention\"\n  ]", NB_EINVAL,
               "'layer_types' must be an array of 6 entries");
    gemma_case("\"rope_theta\": 10000.0", "\"rope_theta\": -5", NB_EINVAL,
               "the sliding layers' rope_theta -5 must be positive and finite");
    gemma_case("\"gelu_pytorch_tanh\"", "\"silu\"", NB_EUNSUPPORTED,
               "hidden_activation 'silu' is not supported (gelu_pytorch_tanh is)");
    gemma_case("\"attn_logit_softcapping\": null", "\"attn_logit_softcapping\": 50.0",
               NB_EUNSUPPORTED, "attn_logit_softcapping = 50: attention soft-capping is not supported");
    gemma_case("\"final_logit_softcapping\": null", "\"final_logit_softcapping\": -1",
               NB_EINVAL, "'final_logit_softcapping' = -1 must be >= 0 and finite");
    gemma_case("\"query_pre_attn_scalar\": 16", "\"query_pre_attn_scalar\": 0", NB_EINVAL,
               "query_pre_attn_scalar 0 must be positive");
    gemma_case("\"rope_type\": \"default\"\n    },\n    \"sliding_attention\"",
               "\"rope_type\": \"linear\"\n    },\n    \"sliding_attention\"", NB_EUNSUPPORTED,
               "rope_parameters.full_attention.rope_type 'linear' is not supported");
    gemma_dir("gemarch", dir, sizeof dir);
    edit(dir, "config.json", "\"Gemma3ForCausalLM\"", "\"Gemma3ForConditionalGeneration\"");
    edit(dir, "config.json", "\"gemma3_text\"", "\"gemma3\"");
    expect_hf(dir, NB_EUNSUPPORTED, "architecture Gemma3ForConditionalGeneration (model_type gemma3)",
              "config.json");
    nb_tiny_rmtree(dir);
}

static void test_hf_index(void **state)
{
    (void)state;
    char dir[4200], p[8300];
    hf_dir("hfidx", 2, dir, sizeof dir);
    nb_model *m;
    nb_err err;
    assert_int_equal(nb_model_open(dir, &m, &err), NB_OK);
    nb_model_close(m);
    /* a tensor mapped to the wrong shard */
    edit(dir, "model.safetensors.index.json",
         "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"",
         "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"");
    expect_hf(dir, NB_EFORMAT,
              "weight_map says tensor 'model.norm.weight' is in model-00001-of-00002.safetensors",
              "model.safetensors.index.json");
    edit(dir, "model.safetensors.index.json",
         "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"",
         "\"model.norm.weight\": \"../model-00002-of-00002.safetensors\"");
    expect_hf(dir, NB_EFORMAT, "weight_map['model.norm.weight'] must be a shard file name",
              "index.json");
    edit(dir, "model.safetensors.index.json", "\"../model-00002-of-00002.safetensors\"",
         "\"model-00003-of-00002.safetensors\"");
    expect_hf(dir, NB_ENOTFOUND, "model-00003-of-00002.safetensors", "cannot open");
    edit(dir, "model.safetensors.index.json", "\"model-00003-of-00002.safetensors\"",
         "\"model-00002-of-00002.safetensors\"");
    edit(dir, "model.safetensors.index.json", "\"model.norm.weight\"", "\"model.extra.weight\"");
    expect_hf(dir, NB_EFORMAT, "'model.extra.weight' is in model-00002-of-00002.safetensors",
              "no shard holds it");
    edit(dir, "model.safetensors.index.json", "\"weight_map\"", "\"weights\"");
    expect_hf(dir, NB_EFORMAT, "no 'weight_map' object", "index.json");
    /* a truncated shard */
    hf_dir("hfidx2", 2, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(nb_tiny_read_file(p, &d, &n), 0);
    assert_int_equal(nb_tiny_write_file(p, d, n - 1), 0);
    free(d);
    expect_hf(dir, NB_EFORMAT, "outside the data section", "model-00001-of-00002.safetensors");
}

/* Touches the first and last row of every weight, so a view that escaped
 * the mapping shows up under ASan. */
static void touch_model(const nb_model *m)
{
    static float row[65536];
    const nb_tensor *g[3] = {nb_model_tok_embd(m), nb_model_out_norm(m), nb_model_lm_head(m)};
    for (int i = 0; i < 3; i++) {
        nb_tensor_row_f32(g[i], 0, row);
        nb_tensor_row_f32(g[i], g[i]->rows - 1, row);
    }
    for (int l = 0; l < nb_model_cfg(m)->n_layers; l++) {
        const nb_layer_weights *w = nb_model_layer(m, l);
        const nb_tensor *t[9] = {&w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo,
                                 &w->ffn_norm, &w->w_gate, &w->w_up, &w->w_down};
        for (int k = 0; k < 9; k++) {
            nb_tensor_row_f32(t[k], 0, row);
            nb_tensor_row_f32(t[k], t[k]->rows - 1, row);
        }
    }
}

/* Random byte damage in the parsed part of a file: any outcome but a crash
 * (or a sanitizer report) is fine, and a success must hold valid views. */
static void fuzz_file(const char *path, const uint8_t *orig, size_t n, size_t region,
                      int iters, uint64_t seed)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    for (int it = 0; it < iters; it++) {
        size_t at[4];
        int k = 1 + (int)(nb_tiny_mix(seed + (uint64_t)it) % 4);
        for (int j = 0; j < k; j++) {
            uint64_t r = nb_tiny_mix(seed ^ ((uint64_t)it << 8 | (uint64_t)j));
            at[j] = (size_t)(r % region);
            uint8_t v = (uint8_t)(r >> 40);
            if ((r >> 32) % 3 == 0) /* sometimes an extreme byte: length fields, counts */
                v = (r >> 34) % 2 ? 0xff : 0x00;
            fseek(f, (long)at[j], SEEK_SET);
            fputc(v, f);
        }
        fflush(f);
        nb_model *m = NULL;
        nb_err err = {0};
        if (nb_model_open(path, &m, &err) == NB_OK) {
            touch_model(m);
            nb_model_close(m);
        } else {
            assert_null(m);
            assert_true(err.msg[0] != '\0');
        }
        for (int j = 0; j < k; j++) {
            fseek(f, (long)at[j], SEEK_SET);
            fputc(orig[at[j]], f);
        }
    }
    fclose(f);
    (void)n;
}

static void test_random_damage_gguf(void **state)
{
    (void)state;
    nb_tiny_buf b = image(NB_TT_Q4_1);
    char p[4200];
    write_case("fuzz.gguf", b.p, b.n, p, sizeof p);
    fuzz_file(p, b.p, b.n, infos_end(&b) + 32, 3000, 11);
    free(b.p);
}

static void test_random_damage_safetensors(void **state)
{
    (void)state;
    char dir[4200], p[8300];
    hf_dir("hffuzz", 1, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(nb_tiny_read_file(p, &d, &n), 0);
    uint64_t hlen;
    memcpy(&hlen, d, 8);
    fuzz_file(p, d, n, (size_t)hlen + 8, 2000, 12);
    free(d);
    nb_tiny_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncation_sweep),   cmocka_unit_test(test_truncation_messages),
        cmocka_unit_test(test_header_fields),      cmocka_unit_test(test_metadata_fields),
        cmocka_unit_test(test_alignment_field),    cmocka_unit_test(test_tensor_fields),
        cmocka_unit_test(test_model_level_gguf),   cmocka_unit_test(test_safetensors_headers),
        cmocka_unit_test(test_hf_config),          cmocka_unit_test(test_hf_config_variants),
        cmocka_unit_test(test_hf_gemma3_config),
        cmocka_unit_test(test_hf_index),           cmocka_unit_test(test_random_damage_gguf),
        cmocka_unit_test(test_random_damage_safetensors),
    };
    return tu_run_group(tests, setup, teardown);
}
