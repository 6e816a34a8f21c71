/* test_tokenizer: nb_tokenizer against HF golden data for SmolLM2 (GGUF and an equivalent
 * tokenizer.json), a hand-built Llama-3 tokenizer, error paths and encode speed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "nb_gguf.h"
#include "nb_json.h"
#include "nb_time.h"
#include "nb_tokenizer.h"
#include "tools/nb_tiny.h"

#define MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct fixture {
    nb_gguf *g, *tiny_g;
    nb_tokenizer *tok;                 /* the real model's, NULL when absent */
    nb_tokenizer *tiny, *tiny_json;    /* nb_tiny.h's model: GGUF and HF directory */
    json_object *golden;
    char dir[64]; /* temp dir for generated tokenizer.json files */
} fixture;

static fixture fx;

static const char *src_dir(void)
{
    const char *s = getenv("NB_SRC");
    return s ? s : NB_SOURCE_DIR;
}

static int group_setup(void **state)
{
    (void)state;
    char path[1024];
    nb_err err = {0};
    snprintf(fx.dir, sizeof fx.dir, "/tmp/nb_test_tok_XXXXXX");
    if (!mkdtemp(fx.dir))
        return -1;
    snprintf(path, sizeof path, "%s/tests/data/tokenizer_golden_smollm2.json", src_dir());
    if (nb_json_read_file(path, 16u << 20, &fx.golden, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    /* the tiny model's tokenizer, both ways: the tests that need no real vocabulary */
    snprintf(path, sizeof path, "%s/tiny.gguf", fx.dir);
    nb_tiny_opts o = {.seed = 1, .type = NB_TT_F32};
    if (nb_tiny_write_gguf(&o, path) || nb_tiny_write_tokenizer(fx.dir))
        return -1;
    if (nb_gguf_open(path, &fx.tiny_g, &err) || nb_tokenizer_from_gguf(fx.tiny_g, &fx.tiny, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", fx.dir);
    if (nb_tokenizer_from_hf_json(path, &fx.tiny_json, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/models/" MODEL, src_dir());
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "SKIP model tests: %s not found (model-dependent tests are skipped)\n",
                path);
        return 0;
    }
    if (nb_gguf_open(path, &fx.g, &err) || nb_tokenizer_from_gguf(fx.g, &fx.tok, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    nb_tokenizer_free(fx.tok);
    nb_gguf_close(fx.g);
    nb_tokenizer_free(fx.tiny);
    nb_tokenizer_free(fx.tiny_json);
    nb_gguf_close(fx.tiny_g);
    json_object_put(fx.golden);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx.dir);
    return system(cmd) == 0 ? 0 : -1;
}

#define NEED_MODEL()                                                                    \
    do {                                                                                \
        tu_require(fx.tok != NULL, "models/" MODEL " is not fetched");                 \
    } while (0)

static json_object *field(json_object *o, const char *k)
{
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(o, k, &v));
    return v;
}

static size_t json_ids(json_object *arr, int32_t *out, size_t cap)
{
    size_t n = json_object_array_length(arr);
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)json_object_get_int(json_object_array_get_idx(arr, i));
    return n;
}

/* Encodes and compares with the expected ids, printing the first difference. */
static void check_ids(const nb_tokenizer *t, const char *text, size_t len, int add_bos,
                      int special, const int32_t *want, size_t n_want, const char *what)
{
    int32_t *ids;
    size_t n;
    nb_err err = {0};
    nb_code rc = nb_tokenizer_encode(t, text, len, add_bos, special, &ids, &n, &err);
    if (rc)
        fail_msg("%s: encode failed: %s", what, err.msg);
    size_t i = 0;
    while (i < n && i < n_want && ids[i] == want[i])
        i++;
    if (i != n || i != n_want)
        fail_msg("%s: text \"%.60s\": ids differ at %zu (got %zu ids, want %zu; got %d want %d)",
                 what, text, i, n, n_want, i < n ? ids[i] : -1, i < n_want ? want[i] : -1);
    free(ids);
}

static char *decode(const nb_tokenizer *t, const int32_t *ids, size_t n, int skip)
{
    char *s;
    size_t len;
    nb_err err = {0};
    if (nb_tokenizer_decode(t, ids, n, skip, &s, &len, &err))
        fail_msg("decode failed: %s", err.msg);
    assert_int_equal(strlen(s), len);
    return s;
}

static int32_t ids_buf[65536];

static void golden_cases(const nb_tokenizer *t, const char *what)
{
    json_object *cases = field(fx.golden, "cases");
    size_t n = json_object_array_length(cases), round_trips = 0;
    assert_true(n >= 40);
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        json_object *tx = field(c, "text");
        const char *text = json_object_get_string(tx);
        size_t len = (size_t)json_object_get_string_len(tx);
        size_t nw = json_ids(field(c, "ids"), ids_buf, 65536);
        check_ids(t, text, len, 1, 1, ids_buf, nw, what);
        char *d = decode(t, ids_buf, nw, 0);
        const char *hf = json_object_get_string(field(c, "decoded"));
        assert_string_equal(d, hf);
        if (!strcmp(hf, text)) { /* HF round-trips this text; so must we */
            assert_int_equal(strlen(d), len);
            round_trips++;
        }
        free(d);
        d = decode(t, ids_buf, nw, 1);
        assert_string_equal(d, json_object_get_string(field(c, "decoded_skip_special")));
        free(d);
        nw = json_ids(field(c, "ids_split_special"), ids_buf, 65536);
        check_ids(t, text, len, 1, 0, ids_buf, nw, "parse_special=0");
    }
    assert_true(round_trips + 2 >= n); /* all but the texts with bytes the vocabulary lacks */
}

static void test_golden_gguf(void **state)
{
    (void)state;
    NEED_MODEL();
    assert_int_equal(nb_tokenizer_vocab(fx.tok), 49152);
    assert_int_equal(nb_tokenizer_bos(fx.tok), 1);
    assert_int_equal(nb_tokenizer_eos(fx.tok), 2);
    assert_string_equal(nb_tokenizer_pre_name(fx.tok), "smollm");
    assert_int_equal(nb_tokenizer_chat_style(fx.tok), NB_CHAT_CHATML);
    assert_true(nb_tokenizer_is_eog(fx.tok, 2));
    assert_false(nb_tokenizer_is_eog(fx.tok, 1));
    assert_false(nb_tokenizer_is_eog(fx.tok, 905));
    /* the brief's anchor: digits one by one, no BOS (add_bos_token is false) */
    static const int32_t hello[] = {19556, 905, 216, 33, 34, 35, 36, 37};
    check_ids(fx.tok, "Hello world 12345", 17, 1, 1, hello, 8, "anchor");
    golden_cases(fx.tok, "gguf");
}

static void golden_chat(const nb_tokenizer *t, const char *what)
{
    json_object *chat = field(fx.golden, "chat");
    size_t n = json_object_array_length(chat);
    assert_true(n >= 40);
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(chat, i);
        const char *msg = json_object_get_string(field(c, "message"));
        if (strlen(msg) != (size_t)json_object_get_string_len(field(c, "message")))
            continue; /* a NUL inside cannot pass through the C string API */
        char *r;
        nb_err err = {0};
        if (nb_tokenizer_chat(t, msg, &r, &err))
            fail_msg("%s: chat failed: %s", what, err.msg);
        assert_string_equal(r, json_object_get_string(field(c, "rendered")));
        size_t nw = json_ids(field(c, "ids"), ids_buf, 65536);
        check_ids(t, r, strlen(r), 0, 1, ids_buf, nw, what);
        free(r);
    }
}

static void test_chat_gguf(void **state)
{
    (void)state;
    NEED_MODEL();
    golden_chat(fx.tok, "gguf chat");
}

static void invalid_utf8(const nb_tokenizer *t)
{
    static const struct {
        const char *s;
        size_t off;
    } bad[] = {
        {"abc\xff", 3},           {"\x80", 0},          {"ok \xc3", 3},
        {"\xc0\xaf", 0},          /* overlong */        {"x\xed\xa0\x80y", 1}, /* surrogate */
        {"\xf4\x90\x80\x80", 0}, /* > U+10FFFF */       {"caf\xc3\xa9\xe2\x82", 5},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 99;
        nb_err err = {0};
        assert_int_equal(nb_tokenizer_encode(t, bad[i].s, strlen(bad[i].s), 1, 1, &ids, &n, &err),
                         NB_EINVAL);
        assert_null(ids);
        assert_int_equal(n, 0);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", bad[i].off);
        if (!strstr(err.msg, want))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, err.msg, want);
    }
    char *out;
    nb_err err = {0};
    assert_int_equal(nb_tokenizer_chat(t, "bad \xfe", &out, &err), NB_EINVAL);
    /* embedded NUL is valid UTF-8 and is tokenized, not truncated */
    int32_t *ids;
    size_t n;
    assert_int_equal(nb_tokenizer_encode(t, "a\0b", 3, 0, 1, &ids, &n, &err), NB_OK);
    assert_int_equal(n, 3);
    free(ids);
    assert_int_equal(nb_tokenizer_encode(t, "", 0, 0, 1, &ids, &n, &err), NB_OK);
    assert_non_null(ids);
    assert_int_equal(n, 0);
    free(ids);
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    invalid_utf8(fx.tiny);
    invalid_utf8(fx.tiny_json);
    if (fx.tok)
        invalid_utf8(fx.tok);
}

static void decode_errors(const nb_tokenizer *t)
{
    char *s = (char *)1;
    size_t len;
    nb_err err = {0};
    int32_t v = (int32_t)nb_tokenizer_vocab(t), bad[] = {5, v};
    assert_int_equal(nb_tokenizer_decode(t, bad, 2, 0, &s, &len, &err), NB_EINVAL);
    assert_null(s);
    char want[64];
    snprintf(want, sizeof want, "ids[1] = %d", v);
    assert_non_null(strstr(err.msg, want));
    int32_t neg[] = {-1};
    assert_int_equal(nb_tokenizer_decode(t, neg, 1, 0, &s, &len, &err), NB_EINVAL);
    const char *p;
    assert_int_equal(nb_tokenizer_piece(t, v, &p, &len, &err), NB_EINVAL);
    /* a character cut between tokens: raw bytes from piece, U+FFFD from decode (as HF) */
    int32_t *ids;
    size_t n;
    assert_int_equal(nb_tokenizer_encode(t, "\xf0\x9f\x98\x80", 4, 0, 1, &ids, &n, &err),
                     NB_OK);
    assert_true(n >= 2);
    assert_int_equal(nb_tokenizer_piece(t, ids[0], &p, &len, &err), NB_OK);
    assert_true(len >= 1 && len < 4 && (unsigned char)p[0] == 0xf0);
    s = decode(t, ids, 1, 0);
    assert_string_equal(s, "\xef\xbf\xbd"); /* one replacement per maximal subpart */
    free(s);
    s = decode(t, ids, n, 0);
    assert_string_equal(s, "\xf0\x9f\x98\x80");
    free(s);
    free(ids);
    s = decode(t, NULL, 0, 0);
    assert_string_equal(s, "");
    free(s);
    assert_int_equal(nb_tokenizer_find(t, "<|im_end|>"), 2);
    assert_int_equal(nb_tokenizer_find(t, "no such token here"), -1);
}

static void test_decode_errors(void **state)
{
    (void)state;
    decode_errors(fx.tiny);
    decode_errors(fx.tiny_json);
    if (fx.tok)
        decode_errors(fx.tok);
}

/* nb_tiny.h's GGUF and HF directory carry one vocabulary; transformers 5
 * tokenizes both the same (its GPT2Tokenizer class ignores the file's
 * Digits step), and so must we. */
static void test_tiny_both_paths(void **state)
{
    (void)state;
    assert_int_equal(nb_tokenizer_vocab(fx.tiny), NB_TINY_VOCAB);
    assert_int_equal(nb_tokenizer_vocab(fx.tiny_json), NB_TINY_VOCAB);
    assert_int_equal(nb_tokenizer_bos(fx.tiny), NB_TINY_BOS);
    assert_int_equal(nb_tokenizer_bos(fx.tiny_json), NB_TINY_BOS);
    assert_int_equal(nb_tokenizer_eos(fx.tiny), NB_TINY_EOS);
    assert_int_equal(nb_tokenizer_eos(fx.tiny_json), NB_TINY_EOS);
    assert_string_equal(nb_tokenizer_pre_name(fx.tiny), "smollm");
    assert_string_equal(nb_tokenizer_pre_name(fx.tiny_json), "gpt2");
    /* ids from transformers 5.24 AutoTokenizer, on the GGUF and on the directory */
    static const int32_t x1[] = {90, 223, 223, 19}, hello[] = {293, 296, 223, 19, 20, 21, 22, 23};
    check_ids(fx.tiny, "x  1", 4, 1, 1, x1, 4, "tiny gguf");
    check_ids(fx.tiny_json, "x  1", 4, 1, 1, x1, 4, "tiny json");
    check_ids(fx.tiny, "Hello world 12345", 17, 1, 1, hello, 8, "tiny gguf");
    check_ids(fx.tiny_json, "Hello world 12345", 17, 1, 1, hello, 8, "tiny json");
    json_object *cases = field(fx.golden, "cases");
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *tx = field(json_object_array_get_idx(cases, i), "text");
        const char *text = json_object_get_string(tx);
        size_t len = (size_t)json_object_get_string_len(tx), n;
        int32_t *ids;
        nb_err err = {0};
        assert_int_equal(nb_tokenizer_encode(fx.tiny, text, len, 1, 1, &ids, &n, &err), NB_OK);
        check_ids(fx.tiny_json, text, len, 1, 1, ids, n, "tiny gguf vs json");
        free(ids);
        char *a, *b;
        assert_int_equal(nb_tokenizer_chat(fx.tiny, text, &a, &err), NB_OK);
        assert_int_equal(nb_tokenizer_chat(fx.tiny_json, text, &b, &err), NB_OK);
        assert_string_equal(a, b);
        assert_non_null(strstr(a, "<|im_start|>system\nYou are a helpful AI assistant named "
                                  "SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n"));
        free(a);
        free(b);
    }
}

/* ------------------------------------------------- tokenizer.json equivalent of the GGUF */

static void write_json(json_object *o, const char *path)
{
    if (json_object_to_file_ext(path, o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE))
        fail_msg("cannot write %s", path);
}

static json_object *jstrn(const char *s, uint64_t n)
{
    return json_object_new_string_len(s, (int)n);
}

/* A tokenizer.json (+ tokenizer_config.json) with the GGUF's vocabulary,
 * merges and control tokens, and the pipeline transformers builds for it. */
static void gguf_to_hf_json(const char *dir, char *path, size_t cap)
{
    nb_err err = {0};
    const nb_gguf_str *toks, *merges;
    uint64_t n, nm;
    assert_int_equal(nb_gguf_get_arr_str(fx.g, "tokenizer.ggml.tokens", &toks, &n, &err), NB_OK);
    assert_int_equal(nb_gguf_get_arr_str(fx.g, "tokenizer.ggml.merges", &merges, &nm, &err),
                     NB_OK);
    int32_t *types = calloc(n, sizeof *types);
    assert_non_null(types);
    assert_int_equal(nb_gguf_get_arr_i32(fx.g, "tokenizer.ggml.token_type", types, n, &err), NB_OK);
    json_object *root = json_object_new_object(), *model = json_object_new_object();
    json_object *vocab = json_object_new_object(), *jm = json_object_new_array();
    json_object *added = json_object_new_array();
    for (uint64_t i = 0; i < n; i++) {
        char *k = strndup(toks[i].ptr, toks[i].len);
        json_object_object_add(vocab, k, json_object_new_int((int)i));
        free(k);
        if (types[i] == 3) {
            json_object *a = json_object_new_object();
            json_object_object_add(a, "id", json_object_new_int((int)i));
            json_object_object_add(a, "content", jstrn(toks[i].ptr, toks[i].len));
            json_object_object_add(a, "special", json_object_new_boolean(1));
            json_object_object_add(a, "normalized", json_object_new_boolean(0));
            json_object_array_add(added, a);
        }
    }
    /* merges alternate between the two spellings HF accepts */
    for (uint64_t i = 0; i < nm; i++) {
        if (i % 2) {
            json_object_array_add(jm, jstrn(merges[i].ptr, merges[i].len));
            continue;
        }
        const char *sp = memchr(merges[i].ptr + 1, ' ', merges[i].len - 1);
        json_object *pair = json_object_new_array();
        json_object_array_add(pair, jstrn(merges[i].ptr, (uint64_t)(sp - merges[i].ptr)));
        json_object_array_add(pair, jstrn(sp + 1, merges[i].len - (uint64_t)(sp + 1 - merges[i].ptr)));
        json_object_array_add(jm, pair);
    }
    free(types);
    json_object_object_add(model, "type", json_object_new_string("BPE"));
    json_object_object_add(model, "vocab", vocab);
    json_object_object_add(model, "merges", jm);
    json_object_object_add(model, "ignore_merges", json_object_new_boolean(0));
    json_object *pre = json_object_new_object();
    json_object_object_add(pre, "type", json_object_new_string("ByteLevel"));
    json_object_object_add(pre, "add_prefix_space", json_object_new_boolean(0));
    json_object_object_add(pre, "use_regex", json_object_new_boolean(1));
    json_object *dec = json_object_new_object();
    json_object_object_add(dec, "type", json_object_new_string("ByteLevel"));
    json_object_object_add(root, "version", json_object_new_string("1.0"));
    json_object_object_add(root, "added_tokens", added);
    json_object_object_add(root, "normalizer", NULL);
    json_object_object_add(root, "pre_tokenizer", pre);
    json_object_object_add(root, "post_processor", NULL);
    json_object_object_add(root, "decoder", dec);
    json_object_object_add(root, "model", model);
    snprintf(path, cap, "%s/tokenizer.json", dir);
    write_json(root, path);
    json_object_put(root);

    nb_gguf_str tmpl;
    assert_int_equal(nb_gguf_get_str(fx.g, "tokenizer.chat_template", &tmpl, &err), NB_OK);
    json_object *cfg = json_object_new_object();
    json_object_object_add(cfg, "chat_template", jstrn(tmpl.ptr, tmpl.len));
    json_object_object_add(cfg, "bos_token", json_object_new_string("<|im_start|>"));
    json_object *eos = json_object_new_object();
    json_object_object_add(eos, "content", json_object_new_string("<|im_end|>"));
    json_object_object_add(cfg, "eos_token", eos);
    char cpath[256];
    snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", dir);
    write_json(cfg, cpath);
    json_object_put(cfg);
}

static void test_hf_json_equivalent(void **state)
{
    (void)state;
    NEED_MODEL();
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/smollm2", fx.dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    gguf_to_hf_json(dir, path, sizeof path);
    nb_tokenizer *t;
    nb_err err = {0};
    if (nb_tokenizer_from_hf_json(path, &t, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(nb_tokenizer_vocab(t), 49152);
    assert_int_equal(nb_tokenizer_bos(t), 1);
    assert_int_equal(nb_tokenizer_eos(t), 2);
    assert_string_equal(nb_tokenizer_pre_name(t), "gpt2");
    assert_int_equal(nb_tokenizer_chat_style(t), NB_CHAT_CHATML);
    assert_true(nb_tokenizer_is_eog(t, 2));
    golden_cases(t, "tokenizer.json");
    golden_chat(t, "tokenizer.json chat");
    nb_tokenizer_free(t);
}

/* ------------------------------------------------- hand-built Llama-3 tokenizer */

#define RE_LLAMA3                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"        \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* GPT-2's byte alphabet, so ids 0..255 are the bytes in order. */
static void byte_char(int b, char out[3])
{
    int n = 0, cp = b;
    int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    if (!keep) {
        for (int i = 0; i < b; i++)
            if (!((i >= 0x21 && i <= 0x7e) || (i >= 0xa1 && i <= 0xac) || i >= 0xae))
                n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    }
}

static const char *l3_merges[][2] = {
    {"1", "2"}, {"12", "3"}, {"4", "5"}, {"45", "6"}, {"3", "4"},     {"'", "L"},  {"'L", "L"},
    {"A", "M"}, {"AM", "A"}, {"L", "L"}, {"'LL", "AMA"}, {"'", "s"}, {"\xc4\xa0", "w"},
    {"\xc4\xa0w", "o"},
};
static const char *l3_special[] = {"<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                                   "<|end_header_id|>"};

/* Writes the tokenizer; ids: bytes 0..255, merges 256..269, "ABC" 270, specials 271..274. */
static void write_llama3(const char *dir, const char *tmpl, int ignore_merges, char *path,
                         size_t cap)
{
    json_object *vocab = json_object_new_object(), *merges = json_object_new_array();
    int id = 0;
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char(b, c);
        json_object_object_add(vocab, c, json_object_new_int(id++));
    }
    for (size_t i = 0; i < sizeof l3_merges / sizeof l3_merges[0]; i++) {
        char m[32];
        snprintf(m, sizeof m, "%s%s", l3_merges[i][0], l3_merges[i][1]);
        json_object_object_add(vocab, m, json_object_new_int(id++));
        json_object *p = json_object_new_array();
        json_object_array_add(p, json_object_new_string(l3_merges[i][0]));
        json_object_array_add(p, json_object_new_string(l3_merges[i][1]));
        json_object_array_add(merges, p);
    }
    json_object_object_add(vocab, "ABC", json_object_new_int(id++));
    json_object *added = json_object_new_array();
    for (size_t i = 0; i < 4; i++) {
        json_object *a = json_object_new_object();
        json_object_object_add(a, "id", json_object_new_int(id++));
        json_object_object_add(a, "content", json_object_new_string(l3_special[i]));
        json_object_object_add(a, "special", json_object_new_boolean(1));
        json_object_array_add(added, a);
    }
    json_object *pre = json_tokener_parse(
        "{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{},\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}");
    assert_non_null(pre);
    json_object *seq, *pat;
    assert_true(json_object_object_get_ex(pre, "pretokenizers", &seq));
    assert_true(json_object_object_get_ex(json_object_array_get_idx(seq, 0), "pattern", &pat));
    json_object_object_add(pat, "Regex", json_object_new_string(RE_LLAMA3));
    json_object *post = json_tokener_parse(
        "{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},"
        "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
        "\"<|begin_of_text|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
        "\"special_tokens\":{\"<|begin_of_text|>\":{\"id\":\"<|begin_of_text|>\",\"ids\":[271],"
        "\"tokens\":[\"<|begin_of_text|>\"]}}}]}");
    assert_non_null(post);
    json_object *model = json_object_new_object(), *root = json_object_new_object();
    json_object_object_add(model, "type", json_object_new_string("BPE"));
    json_object_object_add(model, "ignore_merges", json_object_new_boolean(ignore_merges));
    json_object_object_add(model, "vocab", vocab);
    json_object_object_add(model, "merges", merges);
    json_object *dec = json_object_new_object();
    json_object_object_add(dec, "type", json_object_new_string("ByteLevel"));
    json_object_object_add(root, "added_tokens", added);
    json_object_object_add(root, "pre_tokenizer", pre);
    json_object_object_add(root, "post_processor", post);
    json_object_object_add(root, "decoder", dec);
    json_object_object_add(root, "model", model);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, cap, "%s/tokenizer.json", dir);
    write_json(root, path);
    json_object_put(root);
    if (tmpl) {
        json_object *cfg = json_object_new_object();
        json_object_object_add(cfg, "chat_template", json_object_new_string(tmpl));
        json_object_object_add(cfg, "bos_token", json_object_new_string("<|begin_of_text|>"));
        json_object_object_add(cfg, "eos_token", json_object_new_string("<|eot_id|>"));
        char cpath[256];
        snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", dir);
        write_json(cfg, cpath);
        json_object_put(cfg);
    }
}

static void test_llama3_pretokenizer(void **state)
{
    (void)state;
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/llama3", fx.dir);
    static const char tmpl[] =
        "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] "
        "+ '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
        "}}{% endif %}";
    write_llama3(dir, tmpl, 1, path, sizeof path);
    nb_tokenizer *t;
    nb_err err = {0};
    if (nb_tokenizer_from_hf_json(path, &t, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(nb_tokenizer_pre_name(t), "llama-bpe");
    assert_int_equal(nb_tokenizer_vocab(t), 275);
    assert_int_equal(nb_tokenizer_bos(t), 271);
    assert_int_equal(nb_tokenizer_eos(t), 272);
    assert_true(nb_tokenizer_is_eog(t, 272));
    assert_int_equal(nb_tokenizer_chat_style(t), NB_CHAT_LLAMA3);
    /* expected ids computed with HF tokenizers 0.23.3 on the same tokenizer.json */
    static const struct {
        const char *text;
        int32_t ids[12];
        size_t n;
    } cases[] = {
        /* digits in threes: "345","6" (one run "3456" would give 3,456) */
        {"3456", {271, 51, 258, 54}, 4},
        /* (?i:'ll) splits "'LL" from "AMA" (unsplit: the 'LLAMA merge, 266) */
        {"'LLAMA", {271, 262, 264}, 3},
        {"'llama it's", {271, 39, 108, 108, 97, 109, 97, 32, 105, 116, 267}, 11},
        {"x 1234567", {271, 120, 32, 257, 259, 55}, 6},
        /* ignore_merges: a whole word in the vocabulary is taken as is */
        {"ABC ABCD", {271, 270, 32, 65, 66, 67, 68}, 7},
        {" wo\n\n\r\nx", {271, 269, 10, 10, 13, 10, 120}, 7},
        {"<|begin_of_text|>hi<|eot_id|>", {271, 271, 104, 105, 272}, 5},
        {"HE'S", {271, 72, 69, 39, 83}, 5},
        {"a  \n  b  ", {271, 97, 32, 32, 10, 32, 32, 98, 32, 32}, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_ids(t, cases[i].text, strlen(cases[i].text), 1, 1, cases[i].ids, cases[i].n,
                  "llama3");
    static const int32_t nobos[] = {270};
    check_ids(t, "ABC", 3, 0, 1, nobos, 1, "llama3 add_bos=0");
    char *r;
    assert_int_equal(nb_tokenizer_chat(t, "  Hi there \n", &r, &err), NB_OK);
    assert_string_equal(r, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there"
                           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    free(r);
    char *d = decode(t, (const int32_t[]){271, 262, 264, 272}, 4, 1);
    assert_string_equal(d, "'LLAMA");
    free(d);
    nb_tokenizer_free(t);

    /* without ignore_merges "ABC" is built from its bytes (no merges make it) */
    snprintf(dir, sizeof dir, "%s/llama3-merges", fx.dir);
    write_llama3(dir, NULL, 0, path, sizeof path);
    if (nb_tokenizer_from_hf_json(path, &t, &err))
        fail_msg("%s", err.msg);
    static const int32_t abc[] = {271, 65, 66, 67};
    check_ids(t, "ABC", 3, 1, 1, abc, 4, "llama3 merges");
    /* no template: the style comes from the vocabulary */
    assert_int_equal(nb_tokenizer_chat_style(t), NB_CHAT_LLAMA3);
    nb_tokenizer_free(t);
}

/* Llama-3.1's default system turn (knowledge cutoff, the templates' fixed date). */
static void test_llama31_chat(void **state)
{
    (void)state;
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/llama31", fx.dir);
    static const char tmpl[] =
        "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" "
        "%}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting "
        "Knowledge Date: December 2023\\n\" }}{{- \"Today Date: \" + date_string + \"\\n\\n\" }}"
        "{{- system_message }}{{- \"<|eot_id|>\" }}{%- for message in messages %}{{- "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] "
        "| trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
        "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
    write_llama3(dir, tmpl, 1, path, sizeof path);
    nb_tokenizer *t;
    nb_err err = {0};
    if (nb_tokenizer_from_hf_json(path, &t, &err))
        fail_msg("%s", err.msg);
    char *r;
    assert_int_equal(nb_tokenizer_chat(t, "\tWhat is 2+2?\n", &r, &err), NB_OK);
    assert_string_equal(r, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                           "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                           "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?"
                           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    /* rendered text tokenizes with the specials whole and no second BOS */
    int32_t *ids;
    size_t n;
    assert_int_equal(nb_tokenizer_encode(t, r, strlen(r), 0, 1, &ids, &n, &err), NB_OK);
    assert_int_equal(ids[0], 271);
    assert_int_equal(ids[1], 273);
    assert_int_equal(ids[n - 1], 10); /* "\n" */
    free(ids);
    free(r);
    nb_tokenizer_free(t);
}

/* GGUF metadata the loader must refuse, on the tiny model's image. */
static void test_bad_gguf(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to; /* same length: the string's 8-byte length prefix, then text */
        size_t n;
        const char *needle;
        nb_code code;
    } bad[] = {
        {"smollm", "foobar", 6, "tokenizer.ggml.pre \"foobar\"", NB_EUNSUPPORTED},
        {"\x04\0\0\0\0\0\0\0gpt2", "\x04\0\0\0\0\0\0\0bert", 12, "only \"gpt2\"",
         NB_EUNSUPPORTED},
        {"Hell o", "Hell X", 6, "merge", NB_EFORMAT}, /* "HellX" is not a token */
    };
    nb_tiny_opts o = {.seed = 1, .type = NB_TT_F32};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_tiny_buf img;
        assert_int_equal(nb_tiny_gguf_image(&o, &img), 0);
        long at = nb_tiny_find(img.p, img.n, bad[i].from, bad[i].n, 0);
        assert_true(at > 0);
        memcpy(img.p + at, bad[i].to, bad[i].n);
        char path[256];
        snprintf(path, sizeof path, "%s/bad%zu.gguf", fx.dir, i);
        assert_int_equal(nb_tiny_write_file(path, img.p, img.n), 0);
        free(img.p);
        nb_gguf *g;
        nb_tokenizer *t = (nb_tokenizer *)1;
        nb_err err = {0};
        assert_int_equal(nb_gguf_open(path, &g, &err), NB_OK);
        nb_code rc = nb_tokenizer_from_gguf(g, &t, &err);
        nb_gguf_close(g);
        if (rc != bad[i].code || !strstr(err.msg, bad[i].needle))
            fail_msg("case %zu: got %s \"%s\", want %s with \"%s\"", i, nb_code_name(rc),
                     err.msg, nb_code_name(bad[i].code), bad[i].needle);
        assert_null(t);
    }
}

/* ------------------------------------------------- bad tokenizer.json files */

static nb_code load_text(const char *name, const char *json, nb_err *err)
{
    char path[256];
    snprintf(path, sizeof path, "%s/bad", fx.dir); /* no tokenizer_config.json here */
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/bad/%s.json", fx.dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    nb_tokenizer *t = NULL;
    nb_code rc = nb_tokenizer_from_hf_json(path, &t, err);
    nb_tokenizer_free(t);
    return rc;
}

static void test_bad_hf_json(void **state)
{
    (void)state;
#define BPE(v, m) "{\"model\":{\"type\":\"BPE\",\"vocab\":" v ",\"merges\":" m "},"
#define BL "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}"
    static const struct {
        const char *name, *json, *needle;
        nb_code code;
    } bad[] = {
        {"trunc", "{\"model\":", "invalid JSON", NB_EFORMAT},
        {"notbpe", "{\"model\":{\"type\":\"Unigram\"}}", "BPE", NB_EUNSUPPORTED},
        {"merge", BPE("{\"a\":0,\"b\":1}", "[\"a b\"]") BL "}", "merge 0", NB_EFORMAT},
        {"mergefmt", BPE("{\"a\":0,\"b\":1,\"ab\":2}", "[\"ab\"]") BL "}", "merges[0]", NB_EFORMAT},
        {"gap", BPE("{\"a\":0,\"b\":2}", "[]") BL "}", "without gaps", NB_EFORMAT},
        {"dup", BPE("{\"a\":0,\"b\":0}", "[]") BL "}", "twice", NB_EFORMAT},
        {"negid", BPE("{\"a\":-1}", "[]") BL "}", "model.vocab", NB_EFORMAT},
        {"norm", BPE("{\"a\":0}", "[]") BL ",\"normalizer\":{\"type\":\"NFC\"}}", "normalizer",
         NB_EUNSUPPORTED},
        {"nopre", BPE("{\"a\":0}", "[]") "\"pre_tokenizer\":null}", "pre_tokenizer",
         NB_EUNSUPPORTED},
        {"badre", BPE("{\"a\":0}", "[]") "\"pre_tokenizer\":{\"type\":\"Sequence\","
         "\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
         "\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}}",
         "does not compile", NB_EUNSUPPORTED},
        {"meta", BPE("{\"a\":0}", "[]") "\"pre_tokenizer\":{\"type\":\"Metaspace\"}}", "Metaspace",
         NB_EUNSUPPORTED},
        {"addedid", BPE("{\"a\":0}", "[]") BL ",\"added_tokens\":[{\"content\":\"x\"}]}",
         "added_tokens[0].id", NB_EFORMAT},
        {"post", BPE("{\"a\":0}", "[]") BL ",\"post_processor\":{\"type\":\"TemplateProcessing\","
         "\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}}],\"special_tokens\":{\"<s>\":"
         "{\"ids\":[7]}}}}", "out of range", NB_EFORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_err err = {0};
        nb_code rc = load_text(bad[i].name, bad[i].json, &err);
        if (rc != bad[i].code || !strstr(err.msg, bad[i].needle))
            fail_msg("%s: got %s \"%s\", want %s with \"%s\"", bad[i].name, nb_code_name(rc),
                     err.msg, nb_code_name(bad[i].code), bad[i].needle);
    }
    nb_err err = {0};
    nb_tokenizer *t = NULL;
    assert_int_not_equal(nb_tokenizer_from_hf_json("/nonexistent/tokenizer.json", &t, &err),
                         NB_OK);
    assert_non_null(strstr(err.msg, "/nonexistent/tokenizer.json"));
    assert_null(t);
}

/* ------------------------------------------------- speed */

static void test_encode_speed(void **state)
{
    (void)state;
    NEED_MODEL();
    json_object *cases = field(fx.golden, "cases");
    size_t nc = json_object_array_length(cases), len = 0, cap = 1 << 16;
    char *text = malloc(cap);
    assert_non_null(text);
    /* a mixed text of about 2000 tokens from the golden texts */
    for (size_t i = 0; len < 7000; i = (i + 1) % nc) {
        json_object *tx = field(json_object_array_get_idx(cases, i), "text");
        size_t l = (size_t)json_object_get_string_len(tx);
        if (l > 2000 || len + l + 1 > cap)
            continue;
        memcpy(text + len, json_object_get_string(tx), l);
        len += l;
        text[len++] = '\n';
    }
    double best = 1e9;
    size_t n = 0;
    for (int r = 0; r < 7; r++) {
        int32_t *ids;
        nb_err err = {0};
        double t0 = nb_now_ms();
        assert_int_equal(nb_tokenizer_encode(fx.tok, text, len, 1, 1, &ids, &n, &err), NB_OK);
        double dt = nb_now_ms() - t0;
        if (dt < best)
            best = dt;
        free(ids);
    }
    free(text);
    fprintf(stderr, "encode: %zu bytes -> %zu tokens in %.3f ms (best of 7)\n", len, n, best);
    assert_true(n >= 2000);
#if defined(__SANITIZE_ADDRESS__)
    assert_true(best < 100.0); /* instrumented build */
#else
    assert_true(best < 10.0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_gguf),        cmocka_unit_test(test_chat_gguf),
        cmocka_unit_test(test_invalid_utf8),       cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_hf_json_equivalent), cmocka_unit_test(test_llama3_pretokenizer),
        cmocka_unit_test(test_llama31_chat),       cmocka_unit_test(test_bad_gguf),
        cmocka_unit_test(test_bad_hf_json),        cmocka_unit_test(test_tiny_both_paths),
        cmocka_unit_test(test_encode_speed),
    };
    return tu_run_group(tests, group_setup, group_teardown);
}
