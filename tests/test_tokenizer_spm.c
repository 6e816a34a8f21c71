/* test_tokenizer_spm: the SentencePiece-style vocabulary (Gemma 3's GGUF) against ids and
 * decodings HF transformers produced, plus a hand-built vocabulary for the rules themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "nb_gguf.h"
#include "nb_json.h"
#include "nb_time.h"
#include "nb_tokenizer.h"
#include "nb_utf8.h"
#include "tools/nb_tiny.h"

#define MODEL "gemma-3-270m-q4_k_m.gguf"
#define GOLDEN "tests/data/tokenizer_golden_gemma3.json"

typedef struct fixture {
    nb_gguf *g;
    nb_tokenizer *tok; /* the real model's, NULL when absent */
    double load_ms;
    json_object *golden;
    char dir[64];
} fixture;

static fixture fx;

static const char *src_dir(void)
{
    const char *s = getenv("NB_SRC");
    return s ? s : NB_SOURCE_DIR;
}

/* Bytes of one GGUF value of type ty at p (bounded by end), or 0 when malformed. */
static size_t gguf_value_size(const uint8_t *p, const uint8_t *end, uint32_t ty)
{
    static const size_t fixed[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (ty > 12)
        return 0;
    if (ty != 8 && ty != 9)
        return (size_t)(end - p) >= fixed[ty] ? fixed[ty] : 0;
    if (end - p < 8 + (ty == 9 ? 4 : 0))
        return 0;
    uint64_t n;
    if (ty == 8) {
        memcpy(&n, p, 8);
        return n <= (uint64_t)(end - p - 8) ? (size_t)n + 8 : 0;
    }
    uint32_t et;
    memcpy(&et, p, 4);
    memcpy(&n, p + 4, 8);
    const uint8_t *q = p + 12;
    for (uint64_t i = 0; i < n; i++) {
        size_t k = gguf_value_size(q, end, et);
        if (!k)
            return 0;
        q += k;
    }
    return (size_t)(q - p);
}

/* A copy of the GGUF at src with its metadata and no tensors, for a loader that does not
 * read every tensor type of the file yet (the tokenizer reads only the metadata). */
static int metadata_copy(const char *src, const char *dst)
{
    uint8_t *d;
    size_t n;
    if (nb_tiny_read_file(src, &d, &n) || n < 24)
        return -1;
    const uint8_t *p = d + 24, *end = d + n;
    uint64_t nkv;
    memcpy(&nkv, d + 16, 8);
    for (uint64_t i = 0; i < nkv && p; i++) {
        size_t k = gguf_value_size(p, end, 8);
        if (!k || end - p - (ptrdiff_t)k < 4) {
            p = NULL;
            break;
        }
        uint32_t ty;
        memcpy(&ty, p + k, 4);
        size_t v = gguf_value_size(p + k + 4, end, ty);
        p = v ? p + k + 4 + v : NULL;
    }
    int rc = -1;
    if (p) {
        memset(d + 8, 0, 8); /* no tensors */
        rc = nb_tiny_write_file(dst, d, (size_t)(p - d));
    }
    free(d);
    return rc;
}

static int group_setup(void **state)
{
    (void)state;
    char path[1024];
    nb_err err = {0};
    snprintf(fx.dir, sizeof fx.dir, "/tmp/nb_test_spm_XXXXXX");
    if (!mkdtemp(fx.dir))
        return -1;
    snprintf(path, sizeof path, "%s/" GOLDEN, src_dir());
    if (nb_json_read_file(path, 16u << 20, &fx.golden, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/models/" MODEL, src_dir());
    if (access(path, R_OK) != 0)
        return 0; /* the model tests say so through tu_require */
    if (nb_gguf_open(path, &fx.g, &err) == NB_EUNSUPPORTED) {
        fprintf(stderr, "%s\n(the tokenizer reads the file's metadata alone)\n", err.msg);
        char meta[128];
        snprintf(meta, sizeof meta, "%s/meta.gguf", fx.dir);
        if (metadata_copy(path, meta) || nb_gguf_open(meta, &fx.g, &err)) {
            fprintf(stderr, "%s: metadata copy failed: %s\n", path, err.msg);
            return -1;
        }
    } else if (!fx.g) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    double t0 = nb_now_ms();
    if (nb_tokenizer_from_gguf(fx.g, &fx.tok, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    fx.load_ms = nb_now_ms() - t0;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    nb_tokenizer_free(fx.tok);
    nb_gguf_close(fx.g);
    json_object_put(fx.golden);
    nb_tiny_rmtree(fx.dir);
    return 0;
}

#define NEED_MODEL() tu_require(fx.tok != NULL, "models/" MODEL " is not fetched")

static json_object *field(json_object *o, const char *k)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, k, &v))
        fail_msg("golden data: no field \"%s\"", k);
    return v;
}

static int32_t ids_buf[1 << 16];

static size_t json_ids(json_object *arr, int32_t *out, size_t cap)
{
    size_t n = json_object_array_length(arr);
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)json_object_get_int(json_object_array_get_idx(arr, i));
    return n;
}

static void check_ids(const nb_tokenizer *t, const char *text, size_t len, int add_bos,
                      int special, const int32_t *want, size_t n_want, const char *what)
{
    int32_t *ids;
    size_t n;
    nb_err err = {0};
    if (nb_tokenizer_encode(t, text, len, add_bos, special, &ids, &n, &err))
        fail_msg("%s: encode failed: %s", what, err.msg);
    size_t i = 0;
    while (i < n && i < n_want && ids[i] == want[i])
        i++;
    if (i != n || i != n_want)
        fail_msg("%s: text \"%.60s\": ids differ at %zu (got %zu ids, want %zu; got %d want %d)",
                 what, text, i, n, n_want, i < n ? ids[i] : -1, i < n_want ? want[i] : -1);
    free(ids);
}

static void check_decode(const nb_tokenizer *t, const int32_t *ids, size_t n, int skip,
                         json_object *want, const char *what)
{
    char *s;
    size_t len;
    nb_err err = {0};
    if (nb_tokenizer_decode(t, ids, n, skip, &s, &len, &err))
        fail_msg("%s: decode failed: %s", what, err.msg);
    size_t wl = (size_t)json_object_get_string_len(want);
    if (len != wl || memcmp(s, json_object_get_string(want), wl))
        fail_msg("%s: decoded \"%.80s\" (%zu bytes), HF \"%.80s\" (%zu bytes)", what, s, len,
                 json_object_get_string(want), wl);
    free(s);
}

/* ------------------------------------------------- the real vocabulary */

static void test_vocab(void **state)
{
    (void)state;
    NEED_MODEL();
    json_object *prov = field(fx.golden, "provenance");
    fprintf(stderr, "gemma3 tokenizer loaded in %.0f ms\n", fx.load_ms);
    assert_int_equal(nb_tokenizer_vocab(fx.tok), json_object_get_int(field(prov, "vocab_size")));
    assert_int_equal(nb_tokenizer_bos(fx.tok), json_object_get_int(field(prov, "bos_token_id")));
    assert_int_equal(nb_tokenizer_eos(fx.tok), json_object_get_int(field(prov, "eos_token_id")));
    assert_string_equal(nb_tokenizer_pre_name(fx.tok), "gemma");
    assert_true(nb_tokenizer_is_eog(fx.tok, nb_tokenizer_eos(fx.tok)));
    /* a token of spaces is found under its U+2581 spelling, and decodes to spaces */
    int32_t two = nb_tokenizer_find(fx.tok, "\xe2\x96\x81\xe2\x96\x81");
    assert_true(two >= 0);
    assert_int_equal(nb_tokenizer_find(fx.tok, "  "), -1);
    const char *p;
    size_t n;
    nb_err err = {0};
    assert_int_equal(nb_tokenizer_piece(fx.tok, two, &p, &n, &err), NB_OK);
    assert_int_equal(n, 2);
    assert_memory_equal(p, "  ", 2);
    int32_t b = nb_tokenizer_find(fx.tok, "<0x0A>");
    assert_true(b >= 0);
    assert_int_equal(nb_tokenizer_piece(fx.tok, b, &p, &n, &err), NB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(p[0], '\n');
}

/* Every text of every file the golden data was made from: ids with specials parsed and
 * split, both decodings. */
static void test_golden(void **state)
{
    (void)state;
    NEED_MODEL();
    json_object *cases = field(fx.golden, "cases");
    size_t n = json_object_array_length(cases), with_special = 0, fallback = 0;
    assert_true(n >= 100);
    int32_t byte0 = nb_tokenizer_find(fx.tok, "<0x00>");
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        json_object *tx = field(c, "text");
        const char *text = json_object_get_string(tx);
        size_t len = (size_t)json_object_get_string_len(tx);
        char what[96];
        snprintf(what, sizeof what, "case %zu (%s)", i,
                 json_object_get_string(field(c, "source")));
        size_t nw = json_ids(field(c, "ids"), ids_buf, 1 << 16);
        check_ids(fx.tok, text, len, 1, 1, ids_buf, nw, what);
        for (size_t k = 0; k < nw; k++)
            fallback += ids_buf[k] >= byte0 && ids_buf[k] < byte0 + 256;
        check_decode(fx.tok, ids_buf, nw, 0, field(c, "decoded"), what);
        check_decode(fx.tok, ids_buf, nw, 1, field(c, "decoded_skip_special"), what);
        size_t ns = json_ids(field(c, "ids_split_special"), ids_buf + nw, (1 << 16) - nw);
        with_special += ns != nw || memcmp(ids_buf, ids_buf + nw, nw * sizeof *ids_buf);
        check_ids(fx.tok, text, len, 1, 0, ids_buf + nw, ns, what);
    }
    /* the data exercise what they are meant to */
    assert_true(with_special >= 3);
    assert_true(fallback >= 4);
}

static void test_golden_decode(void **state)
{
    (void)state;
    NEED_MODEL();
    json_object *d = field(fx.golden, "decode");
    size_t n = json_object_array_length(d);
    assert_true(n >= 6);
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(d, i);
        size_t nw = json_ids(field(c, "ids"), ids_buf, 1 << 16);
        char what[48];
        snprintf(what, sizeof what, "decode case %zu", i);
        check_decode(fx.tok, ids_buf, nw, 0, field(c, "decoded"), what);
        check_decode(fx.tok, ids_buf, nw, 1, field(c, "decoded_skip_special"), what);
    }
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    NEED_MODEL();
    static const struct {
        const char *s;
        size_t n, off;
    } bad[] = {{"ab\xff", 3, 2}, {"\xc3", 1, 0}, {"x\xe2\x96", 3, 1}, {"\xed\xa0\x80", 3, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 7;
        nb_err err = {0};
        assert_int_equal(nb_tokenizer_encode(fx.tok, bad[i].s, bad[i].n, 1, 1, &ids, &n, &err),
                         NB_EINVAL);
        char want[48];
        snprintf(want, sizeof want, "byte offset %zu", bad[i].off);
        if (!strstr(err.msg, "invalid UTF-8") || !strstr(err.msg, want))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, err.msg, want);
        assert_null(ids);
        assert_int_equal(n, 0);
    }
}

/* A 512-token prompt and a 64 KiB text with no space (one BPE word): both must encode in
 * about linear time; the figures are printed, not asserted (the host is shared). */
static void test_long(void **state)
{
    (void)state;
    NEED_MODEL();
    json_object *cases = field(fx.golden, "cases");
    size_t nc = json_object_array_length(cases), len = 0, cap = 1 << 17;
    char *text = malloc(cap);
    assert_non_null(text);
    int32_t *ids;
    size_t n = 0;
    nb_err err = {0};
    for (size_t i = 0; n < 512; i = (i + 1) % nc) {
        json_object *tx = field(json_object_array_get_idx(cases, i), "text");
        size_t l = (size_t)json_object_get_string_len(tx);
        if (len + l + 1 > cap)
            break;
        memcpy(text + len, json_object_get_string(tx), l);
        len += l;
        text[len++] = ' ';
        assert_int_equal(nb_tokenizer_encode(fx.tok, text, len, 1, 1, &ids, &n, &err), NB_OK);
        free(ids);
    }
    assert_true(n >= 512);
    double t0 = nb_now_ms();
    assert_int_equal(nb_tokenizer_encode(fx.tok, text, len, 1, 1, &ids, &n, &err), NB_OK);
    double dt = nb_now_ms() - t0;
    free(ids);
    fprintf(stderr, "encode: %zu bytes -> %zu tokens in %.3f ms\n", len, n, dt);
    /* 64 KiB of CJK and letters without a space: one word for BPE */
    static const char unit[] = "\xe8\xa8\x88\xe7\xae\x97\xe6\xa9\x9f" "abcdefgh";
    for (len = 0; len + sizeof unit - 1 <= 65536; len += sizeof unit - 1)
        memcpy(text + len, unit, sizeof unit - 1);
    t0 = nb_now_ms();
    assert_int_equal(nb_tokenizer_encode(fx.tok, text, len, 0, 1, &ids, &n, &err), NB_OK);
    dt = nb_now_ms() - t0;
    fprintf(stderr, "encode: %zu bytes in one word -> %zu tokens in %.3f ms\n", len, n, dt);
    char *back;
    size_t bl;
    assert_int_equal(nb_tokenizer_decode(fx.tok, ids, n, 0, &back, &bl, &err), NB_OK);
    assert_int_equal(bl, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
    free(text);
}

/* Random text: the byte soup (valid UTF-8 or not) never crashes; valid UTF-8 without U+2581
 * decodes back to itself, specials parsed or not (spaces, byte fallback and added tokens all
 * keep their bytes); random ids decode without error. */
static void test_random_round_trip(void **state)
{
    (void)state;
    NEED_MODEL();
    static const char *const pieces[] = {
        " ", "  ", "\t", "\n", "\n\n", "\r\n", "a", "the", "Hello", "7", "123", ".", "<",
        ">", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<unused3>", "</div>",
        "[multimodal]", "<0x41>", "\xc3\xa9", "\xe8\xa8\x88", "\xf0\x9f\x98\x80",
        "\xf0\xa0\x80\x80", "\xee\x80\x80", "\x01", "\x00", "\xcc\x81"};
    enum { NPIECE = sizeof pieces / sizeof pieces[0] };
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char text[512];
    size_t roundtrips = 0;
    for (int it = 0; it < 3000; it++) {
        size_t len = 0;
        int raw = it % 4 == 3; /* every fourth: raw random bytes, mostly invalid UTF-8 */
        while (len < 200) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (raw) {
                text[len++] = (char)(x >> 24);
                continue;
            }
            const char *p = pieces[(x >> 20) % NPIECE];
            size_t pl = (x >> 20) % NPIECE == 28 ? 1 : strlen(p); /* the NUL piece */
            memcpy(text + len, p, pl);
            len += pl;
        }
        for (int special = 0; special < 2; special++) {
            int32_t *ids;
            size_t n;
            nb_err err = {0};
            nb_code rc = nb_tokenizer_encode(fx.tok, text, len, 1, special, &ids, &n, &err);
            size_t bad;
            int valid = nb_utf8_valid(text, len, &bad);
            assert_int_equal(rc, valid ? NB_OK : NB_EINVAL);
            if (rc)
                continue;
            char *back;
            size_t bl;
            assert_int_equal(nb_tokenizer_decode(fx.tok, ids + 1, n - 1, 0, &back, &bl, &err),
                             NB_OK);
            if (bl != len || memcmp(back, text, len))
                fail_msg("iteration %d (specials %d): \"%.80s\" decodes to \"%.80s\"", it,
                         special, text, back);
            roundtrips++;
            free(back);
            free(ids);
        }
    }
    assert_true(roundtrips >= 4000);
    int32_t ids[64];
    for (int it = 0; it < 2000; it++) {
        for (int i = 0; i < 64; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ids[i] = (int32_t)(x % nb_tokenizer_vocab(fx.tok));
        }
        char *s;
        size_t l;
        nb_err err = {0};
        assert_int_equal(nb_tokenizer_decode(fx.tok, ids, 64, it & 1, &s, &l, &err), NB_OK);
        assert_int_equal(strlen(s) <= l, 1);
        free(s);
    }
}

/* ------------------------------------------------- a hand-built vocabulary */

/* tokens of a small SentencePiece GGUF: ids are the positions, which rank the merges */
static const char *const mini_tokens[] = {
    "<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "\n", "  ",
    "\xe2\x96\x81", "a", "b", "aa", "aaa", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab", "<0xC3>",
    "<0xA9>", "<tag>",
};
static const int32_t mini_types[] = {3, 3, 3, 3, 3, 3, 4, 4, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 4};

static void put_arr_hdr(nb_tiny_buf *b, const char *key, uint32_t et, uint64_t n)
{
    nb_tiny_kv_hdr(b, key, 9);
    nb_tiny_put_u32(b, et);
    nb_tiny_put_u64(b, n);
}

/* long_tok > 0: one more token, of that many 'b's */
static nb_code mini_open(const char *arch, size_t long_tok, nb_tokenizer **t, nb_err *err)
{
    size_t nm = sizeof mini_tokens / sizeof mini_tokens[0], nt = nm + (long_tok > 0);
    nb_tiny_buf b = {0};
    nb_tiny_put(&b, "GGUF", 4);
    nb_tiny_put_u32(&b, 3);
    nb_tiny_put_u64(&b, 0);
    nb_tiny_put_u64(&b, 0); /* the count, patched below */
    nb_tiny_kv_str(&b, "general.architecture", arch);
    nb_tiny_kv_str(&b, "tokenizer.ggml.model", "llama");
    put_arr_hdr(&b, "tokenizer.ggml.tokens", 8, nt);
    for (size_t i = 0; i < nm; i++)
        nb_tiny_put_str(&b, mini_tokens[i]);
    if (long_tok) {
        char *lt = malloc(long_tok);
        assert_non_null(lt);
        memset(lt, 'b', long_tok);
        nb_tiny_put_u64(&b, long_tok);
        nb_tiny_put(&b, lt, long_tok);
        free(lt);
    }
    put_arr_hdr(&b, "tokenizer.ggml.token_type", 5, nt);
    for (size_t i = 0; i < nt; i++)
        nb_tiny_put_u32(&b, i < nm ? (uint32_t)mini_types[i] : 1);
    nb_tiny_kv_u32(&b, "tokenizer.ggml.bos_token_id", 2);
    nb_tiny_kv_u32(&b, "tokenizer.ggml.eos_token_id", 1);
    nb_tiny_kv_u32(&b, "tokenizer.ggml.unknown_token_id", 3);
    assert_false(b.oom);
    memcpy(b.p + 16, &b.count, 8);
    char path[128];
    snprintf(path, sizeof path, "%s/mini-%s.gguf", fx.dir, arch);
    assert_int_equal(nb_tiny_write_file(path, b.p, b.n), 0);
    free(b.p);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(path, &g, err), NB_OK);
    nb_code rc = nb_tokenizer_from_gguf(g, t, err);
    nb_gguf_close(g);
    return rc;
}

static void test_mini_rules(void **state)
{
    (void)state;
    nb_tokenizer *t;
    nb_err err = {0};
    if (mini_open("gemma3", 0, &t, &err))
        fail_msg("%s", err.msg);
    /* BOS added (no flag in the file); spaces become U+2581: "▁ab" is one token */
    static const int32_t w1[] = {2, 15};
    check_ids(t, " ab", 3, 1, 1, w1, 2, "space marker");
    /* "aaaa": "aa" (id 11) merges before "aaa" (id 12); the pairs a+a rank leftmost first */
    static const int32_t w2[] = {11, 11};
    check_ids(t, "aaaa", 4, 0, 1, w2, 2, "merge order by id");
    /* "aaa" from a, a, a: a+a merges first (leftmost), then aa+a */
    static const int32_t w3[] = {12};
    check_ids(t, "aaa", 3, 0, 1, w3, 1, "longer left part");
    /* é has no token: its bytes; 'z' has neither (no <0x7A>): one unk for a run of them */
    static const int32_t w4[] = {16, 17, 3, 9};
    check_ids(t, "\xc3\xa9zzz" "a", 6, 0, 1, w4, 4, "byte fallback and fused unk");
    /* specials parsed, or not; user-defined "<tag>" and "\n" always; "  " is respelled, so
     * its raw spelling is not an added token */
    static const int32_t w5[] = {5, 9, 6, 18};
    check_ids(t, "<start_of_turn>a\n<tag>", 22, 0, 1, w5, 4, "specials");
    static const int32_t w6[] = {7, 9};
    check_ids(t, "  a", 3, 0, 1, w6, 2, "two spaces");
    int32_t *ids;
    size_t n;
    assert_int_equal(nb_tokenizer_encode(t, "<start_of_turn>", 15, 0, 0, &ids, &n, &err), NB_OK);
    assert_true(n > 1); /* text, split into unk and fallback bytes, not the special token */
    free(ids);
    /* decoding: spaces back, special skipped, a cut character is one U+FFFD per byte */
    static const int32_t d1[] = {2, 15, 7, 16};
    char *s;
    size_t len;
    assert_int_equal(nb_tokenizer_decode(t, d1, 4, 1, &s, &len, &err), NB_OK);
    assert_string_equal(s, " ab  \xef\xbf\xbd");
    free(s);
    assert_int_equal(nb_tokenizer_decode(t, d1, 4, 0, &s, &len, &err), NB_OK);
    assert_string_equal(s, "<bos> ab  \xef\xbf\xbd");
    free(s);
    static const int32_t d2[] = {16, 2, 17, 16, 16};
    assert_int_equal(nb_tokenizer_decode(t, d2, 5, 1, &s, &len, &err), NB_OK);
    /* the run joins across the skipped special and is invalid as a whole: every byte goes */
    assert_string_equal(s, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
    nb_tokenizer_free(t);
}

static void test_mini_refused(void **state)
{
    (void)state;
    nb_tokenizer *t = (nb_tokenizer *)1;
    nb_err err = {0};
    assert_int_equal(mini_open("llama", 0, &t, &err), NB_EUNSUPPORTED);
    if (!strstr(err.msg, "general.architecture \"llama\"") || !strstr(err.msg, "gemma3"))
        fail_msg("message \"%s\" names neither the architecture nor what is supported", err.msg);
    assert_null(t);
    /* one token of 70,000 bytes: deriving its merges would hash 4.9e9 bytes; refused at once */
    t = (nb_tokenizer *)1;
    assert_int_equal(mini_open("gemma3", 70000, &t, &err), NB_EFORMAT);
    if (!strstr(err.msg, "70000 bytes") || !strstr(err.msg, "tokenizer.ggml.tokens"))
        fail_msg("message \"%s\" names neither the field nor the token's size", err.msg);
    assert_null(t);
    /* one of 20,000 bytes is within the limit and works */
    assert_int_equal(mini_open("gemma3", 20000, &t, &err), NB_OK);
    nb_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab),        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_golden_decode), cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_long),         cmocka_unit_test(test_random_round_trip),
        cmocka_unit_test(test_mini_rules),
        cmocka_unit_test(test_mini_refused),
    };
    return tu_run_group(tests, group_setup, group_teardown);
}
