/* nb_tokenizer: BPE reproducing HF tokenizers bit for bit: added tokens split out, then either
 * byte-level (regex pre-tokenizer, GPT-2's byte alphabet) or SentencePiece-style (space marker,
 * byte fallback, merges derived from the vocabulary as transformers does for Gemma). */
#include "nb_tokenizer.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "nb_chat.h"
#include "nb_file.h"
#include "nb_hash.h"
#include "nb_json.h"
#include "nb_utf8.h"

/* The GPT-2 split HF's ByteLevel(use_regex=true) applies. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* Splits transformers installs for GGUF "pre" types (integrations/gguf). */
#define RE_LLAMA3                                                                               \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"                     \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"                          \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                               \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"                 \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                                                             \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                                                             \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN                                                                               \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"   \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* GGUF "pre" names: NULL regex means GPT-2's ByteLevel split. transformers
 * gives every name outside its table the GPT-2 split (so "smollm" gets no
 * digit split there, unlike llama.cpp); we follow transformers, the reference. */
static const struct {
    const char *name;
    const char *re;
} gguf_pre[] = {
    {"default", NULL},      {"gpt2", NULL},         {"smollm", NULL},     {"starcoder", NULL},
    {"refact", NULL},       {"command-r", NULL},    {"codeshell", NULL},  {"exaone", NULL},
    {"minerva", NULL},      {"olmo", NULL},         {"llama3", RE_LLAMA3}, {"llama-v3", RE_LLAMA3},
    {"llama-bpe", RE_LLAMA3}, {"falcon3", RE_LLAMA3}, {"falcon-h1", RE_LLAMA3},
    {"pixtral", RE_LLAMA3}, {"midm-2.0", RE_LLAMA3}, {"lfm2", RE_LLAMA3},
    {"jina-v5-nano", RE_LLAMA3}, {"dbrx", RE_LLAMA3}, {"smaug-bpe", RE_LLAMA3},
    {"tekken", RE_TEKKEN},  {"qwen2", RE_QWEN2},    {"deepseek-r1-qwen", RE_QWEN2},
    {"kormo", RE_QWEN2},    {"f2llmv2", RE_QWEN2},  {"megrez", RE_QWEN2}, {"qwen35", RE_QWEN35}, {"gpt-4o", RE_GPT4O},
    {"llama4", RE_GPT4O},   {"kanana2", RE_GPT4O},  {"talkie", RE_GPT4O}, {"minimax-m2", RE_GPT4O},
};

#define MAX_STEPS 8
#define MAX_AFFIX 8
#define MAX_EOG 8
#define TOK_SPECIAL 1u /* skipped by decode(skip_special) */
#define TOK_BYTE 2u    /* spelled <0xHH>: decodes to that byte (SentencePiece byte fallback) */

/* U+2581, SentencePiece's stand-in for a space, in UTF-8 */
#define SPACE_MARK "\xe2\x96\x81"

enum step_kind { STEP_SPLIT, STEP_DIGITS, STEP_BYTELEVEL };

typedef struct pre_step {
    enum step_kind kind;
    pcre2_code *re; /* NULL for a ByteLevel step without its regex */
    int prefix_space;
} pre_step;

typedef struct added_tok {
    const char *s; /* points into t->strs */
    size_t n;
    int32_t id;
    uint8_t special, normalized, lstrip, rstrip;
} added_tok;

typedef struct pair_slot {
    uint64_t key; /* UINT64_MAX: empty */
    int32_t rank;
    int32_t id;
} pair_slot;

struct nb_tokenizer {
    size_t n_vocab;
    char *strs; /* vocab spellings, then decoded pieces, then added contents */
    size_t *key_off, *key_len;     /* spelling the vocab map is keyed on */
    size_t *piece_off, *piece_len; /* bytes a token decodes to */
    uint8_t *flags;
    uint64_t *vmap; /* high half of the hash | (id + 1), 0 empty: spares misses a key read */
    size_t vmap_cap;
    pair_slot *pairs;
    size_t pair_cap;
    int32_t byte_id[256]; /* byte-level: the alphabet's character; spm: <0xHH> (-1 none) */
    int spm;              /* SentencePiece-style vocabulary (space marker, byte fallback) */
    int32_t unk; /* BPE's unk_token for bytes without a token; -1: such bytes are dropped */
    int fuse_unk;
    int ignore_merges;
    pre_step steps[MAX_STEPS];
    size_t n_steps;
    added_tok *added;
    size_t n_added;
    /* per pass (0: matched on raw text, 1: "normalized"): CSR buckets by first byte */
    uint32_t bstart[2][257];
    uint32_t *bitems[2];
    int32_t prefix[MAX_AFFIX], suffix[MAX_AFFIX];
    size_t n_prefix, n_suffix;
    int32_t bos, eos, eot, eom;
    int32_t eog[MAX_EOG];
    size_t n_eog;
    nb_chat *chat; /* NULL until loaded */
    int no_post;       /* tokenizer.json had no post_processor */
    char pre_name[64];
    char src[256]; /* file name for messages */
};

/* ---------------------------------------------------------------- byte alphabet */

/* GPT-2 bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * rest are moved to U+0100.. in byte order. */
static uint16_t b2u[256];
static int16_t u2b[324];

static void alphabet_build(void)
{
    int n = 0;
    for (int i = 0; i < 324; i++)
        u2b[i] = -1;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        b2u[b] = (uint16_t)(keep ? b : 256 + n++);
        u2b[b2u[b]] = (int16_t)b;
    }
}

static void alphabet_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, alphabet_build);
}

static size_t put_cp(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2; /* the alphabet never goes past U+0143 */
}

/* Writes the bytes a (valid UTF-8) spelling stands for: mapped back through
 * the alphabet when every character is in it, else the spelling itself, as
 * HF's ByteLevel decoder does. o needs n bytes. */
static size_t spelling_bytes(const char *s, size_t n, char *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += nb_utf8_decode(s + i, &cp);
        if (cp >= 324 || u2b[cp] < 0) {
            memcpy(o, s, n);
            return n;
        }
        o[k++] = (char)u2b[cp];
    }
    return k;
}

/* A SentencePiece spelling <0xHH> (hex either case, as HF's ByteFallback decoder reads it):
 * returns the byte, or -1. */
static int fallback_byte(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The bytes a SentencePiece spelling decodes to: its byte for <0xHH>, else the spelling
 * with each space marker a space (HF's Replace decoder). o needs n bytes. */
static size_t spm_bytes(const char *s, size_t n, char *o)
{
    int b = fallback_byte(s, n);
    if (b >= 0) {
        o[0] = (char)b;
        return 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && !memcmp(s + i, SPACE_MARK, 3)) {
            o[k++] = ' ';
            i += 2;
        } else {
            o[k++] = s[i];
        }
    }
    return k;
}

static int in_alphabet(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += nb_utf8_decode(s + i, &cp);
        if (cp >= 324 || u2b[cp] < 0)
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- hash maps */

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static int32_t vocab_find(const nb_tokenizer *t, const char *s, size_t n)
{
    size_t mask = t->vmap_cap - 1;
    uint64_t h = nb_hash_bytes(s, n, NB_HASH_SEED), tag = h & ~0xffffffffull;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t v = t->vmap[i];
        if (!v)
            return -1;
        size_t id = (uint32_t)v - 1;
        if ((v & ~0xffffffffull) == tag && t->key_len[id] == n &&
            !memcmp(t->strs + t->key_off[id], s, n))
            return (int32_t)id;
    }
}

/* A later id with the same spelling wins, as in a Python dict built in id order. */
static void vocab_insert(nb_tokenizer *t, size_t id)
{
    const char *s = t->strs + t->key_off[id];
    size_t n = t->key_len[id], mask = t->vmap_cap - 1;
    uint64_t h = nb_hash_bytes(s, n, NB_HASH_SEED), tag = h & ~0xffffffffull;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t v = t->vmap[i];
        size_t o = (uint32_t)v - 1;
        if (!v || ((v & ~0xffffffffull) == tag && t->key_len[o] == n &&
                   !memcmp(t->strs + t->key_off[o], s, n))) {
            t->vmap[i] = tag | (uint64_t)(id + 1);
            return;
        }
    }
}

static const pair_slot *pair_find(const nb_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = t->pair_cap - 1;
    for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
        if (t->pairs[i].key == key)
            return &t->pairs[i];
        if (t->pairs[i].key == UINT64_MAX)
            return NULL;
    }
}

/* A repeated pair takes the later rank, as HF's merge map does. */
static void pair_insert(nb_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t id)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = t->pair_cap - 1;
    for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
        if (t->pairs[i].key == UINT64_MAX || t->pairs[i].key == key) {
            t->pairs[i].key = key;
            t->pairs[i].rank = rank;
            t->pairs[i].id = id;
            return;
        }
    }
}

/* ---------------------------------------------------------------- building */

/* Loader input, shared by both sources: vocab spellings by id, merges as
 * pairs of spellings, added tokens. All strings must be valid UTF-8. */
typedef struct tok_src {
    size_t n_vocab;
    const char **vs; /* NULL: id unused by the model (an added token fills it) */
    size_t *vn;
    size_t n_merges;
    const char **ma, **mb;
    size_t *man, *mbn;
    size_t n_added;
    added_tok *added; /* s points at caller memory until build copies it */
    int derive_merges; /* no merge list: derived from the vocabulary (derive_merges) */
} tok_src;

static void tok_src_free(tok_src *s)
{
    free(s->vs);
    free(s->vn);
    free(s->ma);
    free(s->mb);
    free(s->man);
    free(s->mbn);
    free(s->added);
    memset(s, 0, sizeof *s);
}

static nb_code tok_src_alloc(tok_src *s, size_t n_vocab, size_t n_merges, size_t n_added,
                             const char *what, nb_err *err)
{
    memset(s, 0, sizeof *s);
    s->n_vocab = n_vocab;
    s->n_merges = n_merges;
    s->n_added = 0; /* filled by the caller, up to n_added */
    s->vs = calloc(n_vocab ? n_vocab : 1, sizeof *s->vs);
    s->vn = calloc(n_vocab ? n_vocab : 1, sizeof *s->vn);
    s->ma = calloc(n_merges ? n_merges : 1, sizeof *s->ma);
    s->mb = calloc(n_merges ? n_merges : 1, sizeof *s->mb);
    s->man = calloc(n_merges ? n_merges : 1, sizeof *s->man);
    s->mbn = calloc(n_merges ? n_merges : 1, sizeof *s->mbn);
    s->added = calloc(n_added ? n_added : 1, sizeof *s->added);
    if (!s->vs || !s->vn || !s->ma || !s->mb || !s->man || !s->mbn || !s->added) {
        tok_src_free(s);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory for %zu tokens", what, n_vocab);
    }
    return NB_OK;
}

static nb_tokenizer *tok_new(const char *src)
{
    nb_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->unk = t->bos = t->eos = t->eot = t->eom = -1;
    snprintf(t->src, sizeof t->src, "%s", src);
    alphabet_init();
    return t;
}

typedef struct added_key {
    unsigned char first;
    size_t len;
    uint32_t idx;
} added_key;

/* by first byte, then longest first, then as listed (so the first listed wins a tie) */
static int added_key_cmp(const void *pa, const void *pb)
{
    const added_key *a = pa, *b = pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Per pass, the added tokens bucketed by first byte (CSR), longest first,
 * so the first hit at a position is the longest match there. */
static nb_code bucket_added(nb_tokenizer *t, nb_err *err)
{
    added_key *k = malloc((t->n_added ? t->n_added : 1) * sizeof *k);
    if (!k)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->src);
    for (int p = 0; p < 2; p++) {
        size_t m = 0;
        for (size_t i = 0; i < t->n_added; i++)
            if (t->added[i].normalized == p)
                k[m++] = (added_key){(unsigned char)t->added[i].s[0], t->added[i].n, (uint32_t)i};
        qsort(k, m, sizeof *k, added_key_cmp);
        t->bitems[p] = malloc((m ? m : 1) * sizeof *t->bitems[p]);
        if (!t->bitems[p]) {
            free(k);
            return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->src);
        }
        memset(t->bstart[p], 0, sizeof t->bstart[p]);
        for (size_t i = 0; i < m; i++) {
            t->bitems[p][i] = k[i].idx;
            t->bstart[p][k[i].first + 1]++;
        }
        for (int c = 0; c < 256; c++)
            t->bstart[p][c + 1] += t->bstart[p][c];
    }
    free(k);
    return NB_OK;
}

/* Copies src into t: strings, maps, merges, added-token buckets. */
/* The tables for n tokens, s's merges and added tokens, and total bytes of strings. */
static nb_code alloc_tables(nb_tokenizer *t, const tok_src *s, size_t n, size_t total,
                            nb_err *err)
{
    t->n_vocab = n;
    t->strs = malloc(total);
    t->key_off = calloc(n, sizeof *t->key_off);
    t->key_len = calloc(n, sizeof *t->key_len);
    t->piece_off = calloc(n, sizeof *t->piece_off);
    t->piece_len = calloc(n, sizeof *t->piece_len);
    t->flags = calloc(n, 1);
    t->vmap_cap = pow2_at_least(n * 2);
    t->vmap = calloc(t->vmap_cap, sizeof *t->vmap);
    t->pair_cap = pow2_at_least(s->n_merges * 2 + 1);
    t->pairs = malloc(t->pair_cap * sizeof *t->pairs);
    t->added = calloc(s->n_added ? s->n_added : 1, sizeof *t->added);
    if (!t->strs || !t->key_off || !t->key_len || !t->piece_off || !t->piece_len || !t->flags ||
        !t->vmap || !t->pairs || !t->added)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory for %zu tokens", t->src, n);
    return NB_OK;
}

/* Each spelling (the map's key) and the bytes it decodes to, from *off on in t->strs. */
static nb_code copy_vocab(nb_tokenizer *t, const tok_src *s, size_t n, size_t *off, nb_err *err)
{
    size_t o = *off;
    for (size_t i = 0; i < n; i++) {
        const char *v = s->vs[i];
        size_t vn = s->vn[i];
        if (!v)
            return nb_err_set(err, NB_EFORMAT, "%s: token id %zu has no string (ids must be 0..%zu "
                              "without gaps)", t->src, i, n - 1);
        t->key_off[i] = o;
        t->key_len[i] = vn;
        memcpy(t->strs + o, v, vn);
        o += vn;
        t->strs[o++] = '\0';
        t->piece_off[i] = o;
        if (t->spm) {
            t->piece_len[i] = spm_bytes(v, vn, t->strs + o);
            if (fallback_byte(v, vn) >= 0)
                t->flags[i] |= TOK_BYTE;
        } else {
            t->piece_len[i] = spelling_bytes(v, vn, t->strs + o);
        }
        o += t->piece_len[i];
        t->strs[o++] = '\0';
        vocab_insert(t, i);
    }
    *off = o;
    return NB_OK;
}

/* The merge table: (left, right) -> (rank, merged id); every part must be a token. */
static nb_code build_merges(nb_tokenizer *t, const tok_src *s, nb_err *err)
{
    for (size_t i = 0; i < t->pair_cap; i++)
        t->pairs[i].key = UINT64_MAX;
    char *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < s->n_merges; i++) {
        int32_t a = vocab_find(t, s->ma[i], s->man[i]);
        int32_t b = vocab_find(t, s->mb[i], s->mbn[i]);
        size_t need = s->man[i] + s->mbn[i];
        if (need > cap) {
            char *nb = realloc(buf, need);
            if (!nb) {
                free(buf);
                return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->src);
            }
            buf = nb;
            cap = need;
        }
        memcpy(buf, s->ma[i], s->man[i]);
        memcpy(buf + s->man[i], s->mb[i], s->mbn[i]);
        int32_t m = vocab_find(t, buf, need);
        if (a < 0 || b < 0 || m < 0) {
            const char *what = a < 0 ? "the left part" : b < 0 ? "the right part" : "the result";
            nb_code rc = nb_err_set(err, NB_EFORMAT,
                                    "%s: merge %zu \"%.*s %.*s\": %s is not in the vocabulary",
                                    t->src, i, (int)(s->man[i] > 64 ? 64 : s->man[i]), s->ma[i],
                                    (int)(s->mbn[i] > 64 ? 64 : s->mbn[i]), s->mb[i], what);
            free(buf);
            return rc;
        }
        pair_insert(t, a, b, (int32_t)i, m);
    }
    free(buf);
    return NB_OK;
}

typedef struct merge3 {
    int32_t a, b, m;
} merge3;

#define DERIVE_WORK_MAX (1ull << 32) /* bytes hashed; Gemma 3's 262,144 tokens: 2.7e7 */

/* The merges transformers derives for a SentencePiece vocabulary that lists none
 * (tokenization_utils_base.generate_merges with the Gemma GGUF builder's scores): every split
 * of a token, at a character boundary, into two tokens; ranked by the token's id (earlier
 * first: Gemma's scores do not follow its merge order, the file's order does), then by the
 * longer left part. One entry per distinct spelling, as in a Python dict. */
static nb_code derive_merges(nb_tokenizer *t, nb_err *err)
{
    merge3 *v = NULL;
    size_t n = 0, cap = 0;
    /* every split hashes the whole token: quadratic in its length, so a file of absurdly long
     * tokens is refused rather than left to run for hours */
    unsigned long long work = 0;
    for (size_t id = 0; id < t->n_vocab; id++) {
        work += (unsigned long long)t->key_len[id] * t->key_len[id];
        if (work > DERIVE_WORK_MAX)
            return nb_err_set(err, NB_EFORMAT,
                              "%s: tokenizer.ggml.tokens: deriving merges from tokens 0..%zu "
                              "(token %zu is %zu bytes) exceeds %llu bytes of hashing; "
                              "SentencePiece tokens are short", t->src, id, id, t->key_len[id],
                              DERIVE_WORK_MAX);
    }
    for (size_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->strs + t->key_off[id];
        size_t len = t->key_len[id];
        if (vocab_find(t, s, len) != (int32_t)id)
            continue; /* a later id took this spelling */
        for (size_t c = len ? len - 1 : 0; c > 0; c--) { /* longest left part first */
            if (((unsigned char)s[c] & 0xc0) == 0x80)
                continue;
            int32_t a = vocab_find(t, s, c), b;
            if (a < 0 || (b = vocab_find(t, s + c, len - c)) < 0)
                continue;
            if (n == cap) {
                size_t nn = cap ? cap * 2 : 1u << 16;
                merge3 *g = realloc(v, nn * sizeof *g);
                if (!g) {
                    free(v);
                    return nb_err_set(err, NB_ENOMEM, "%s: out of memory for merges", t->src);
                }
                v = g;
                cap = nn;
            }
            v[n++] = (merge3){a, b, (int32_t)id};
        }
    }
    if (n > INT32_MAX) {
        free(v);
        return nb_err_set(err, NB_EFORMAT, "%s: %zu derived merges exceeds %d", t->src, n,
                          INT32_MAX);
    }
    free(t->pairs);
    t->pair_cap = pow2_at_least(n * 2 + 1);
    if (!(t->pairs = malloc(t->pair_cap * sizeof *t->pairs))) {
        free(v);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory for %zu merges", t->src, n);
    }
    for (size_t i = 0; i < t->pair_cap; i++)
        t->pairs[i].key = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        pair_insert(t, v[i].a, v[i].b, (int32_t)i, v[i].m);
    free(v);
    return NB_OK;
}

/* Added tokens: contents copied from o on in t->strs; buckets per pass, longest first. */
static nb_code copy_added(nb_tokenizer *t, const tok_src *s, size_t n, size_t o, nb_err *err)
{
    for (size_t i = 0; i < s->n_added; i++) {
        added_tok a = s->added[i];
        if (a.id < 0 || (size_t)a.id >= n)
            return nb_err_set(err, NB_EFORMAT, "%s: added token id %d out of range (vocab %zu)",
                              t->src, a.id, n);
        if (a.n == 0)
            return nb_err_set(err, NB_EFORMAT, "%s: added token %d has empty content", t->src,
                              a.id);
        memcpy(t->strs + o, a.s, a.n);
        a.s = t->strs + o;
        o += a.n;
        t->strs[o++] = '\0';
        t->added[t->n_added++] = a;
        if (a.special)
            t->flags[a.id] |= TOK_SPECIAL;
    }
    return bucket_added(t, err);
}

static nb_code tok_build(nb_tokenizer *t, const tok_src *s, nb_err *err)
{
    size_t n = s->n_vocab, total = 1;
    if (n == 0 || n > INT32_MAX - 1)
        return nb_err_set(err, NB_EFORMAT, "%s: vocabulary of %zu tokens (must be 1..%d)",
                          t->src, n, INT32_MAX - 1);
    if (s->n_merges > INT32_MAX)
        return nb_err_set(err, NB_EFORMAT, "%s: %zu merges exceeds %d", t->src, s->n_merges,
                          INT32_MAX);
    /* each spelling twice (key and piece), each added content once */
    for (size_t i = 0; i < n; i++) {
        if (s->vn[i] > SIZE_MAX / 4 - total)
            return nb_err_set(err, NB_ENOMEM, "%s: token strings too large", t->src);
        total += 2 * s->vn[i] + 2;
    }
    for (size_t i = 0; i < s->n_added; i++) {
        if (s->added[i].n > SIZE_MAX / 4 - total)
            return nb_err_set(err, NB_ENOMEM, "%s: token strings too large", t->src);
        total += 2 * s->added[i].n + 2;
    }
    size_t o = 0;
    nb_code rc;
    if ((rc = alloc_tables(t, s, n, total, err)) || (rc = copy_vocab(t, s, n, &o, err)))
        return rc;
    for (int b = 0; b < 256; b++) {
        char sp[8];
        if (t->spm)
            t->byte_id[b] = vocab_find(t, sp, (size_t)snprintf(sp, sizeof sp, "<0x%02X>", b));
        else
            t->byte_id[b] = vocab_find(t, sp, put_cp(sp, b2u[b]));
    }
    if ((rc = s->derive_merges ? derive_merges(t, err) : build_merges(t, s, err)))
        return rc;
    return copy_added(t, s, n, o, err);
}

/* HF's Oniguruma \s is Unicode White_Space; PCRE2's \s under UCP (10.42)
 * also takes U+180E, which left White_Space in Unicode 6.3. Rewriting \s and
 * \S into explicit White_Space classes makes the two agree. */
#define WS_CLASS "\\t-\\r\\x{85}\\p{Z}"
static char *rewrite_ws(const char *re)
{
    size_t n = strlen(re), o = 0;
    char *out = malloc(n * 24 + 1);
    if (!out)
        return NULL;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = re[i];
        if (c == '\\' && i + 1 < n) {
            char d = re[i + 1];
            if (d == 's' && in_class) {
                o += (size_t)sprintf(out + o, "%s", WS_CLASS);
            } else if (d == 's') {
                o += (size_t)sprintf(out + o, "[%s]", WS_CLASS);
            } else if (d == 'S' && !in_class) {
                o += (size_t)sprintf(out + o, "[^%s]", WS_CLASS);
            } else {
                out[o++] = c;
                out[o++] = d;
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            out[o++] = c;
            /* a ']' right after '[' or '[^' is a literal */
            if (i + 1 < n && re[i + 1] == '^')
                out[o++] = re[++i];
            if (i + 1 < n && re[i + 1] == ']')
                out[o++] = re[++i];
            continue;
        }
        if (c == '[' && in_class && i + 1 < n && re[i + 1] == ':') {
            const char *e = strstr(re + i + 2, ":]"); /* POSIX class inside a class */
            if (e) {
                size_t l = (size_t)(e + 2 - (re + i));
                memcpy(out + o, re + i, l);
                o += l;
                i += l - 1;
                continue;
            }
        }
        if (c == ']' && in_class)
            in_class = 0;
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

static nb_code compile_re(const nb_tokenizer *t, const char *re, int literal, pcre2_code **out,
                          nb_err *err)
{
    char *pat = literal ? strdup(re) : rewrite_ws(re);
    if (!pat)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->src);
    int ec;
    PCRE2_SIZE eo;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
    free(pat);
    if (!c) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: pre-tokenizer regex does not compile at offset %zu: %s "
                          "(pattern \"%.120s\")",
                          t->src, (size_t)eo, (const char *)msg, re);
    }
    (void)pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    *out = c;
    return NB_OK;
}

static nb_code add_step(nb_tokenizer *t, enum step_kind kind, const char *re, int literal,
                        int prefix_space, nb_err *err)
{
    if (t->n_steps == MAX_STEPS)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: more than %d pre-tokenizer steps", t->src,
                          MAX_STEPS);
    pre_step *s = &t->steps[t->n_steps];
    s->kind = kind;
    s->prefix_space = prefix_space;
    s->re = NULL;
    if (re) {
        nb_code rc = compile_re(t, re, literal, &s->re, err);
        if (rc)
            return rc;
    }
    t->n_steps++;
    return NB_OK;
}

static void add_eog(nb_tokenizer *t, int32_t id)
{
    if (id < 0)
        return;
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return;
    if (t->n_eog < MAX_EOG)
        t->eog[t->n_eog++] = id;
}

static int32_t find_cstr(const nb_tokenizer *t, const char *s)
{
    return vocab_find(t, s, strlen(s));
}

/* The chat template, told which of its tokens the vocabulary has. */
static nb_code setup_chat(nb_tokenizer *t, const char *tmpl, size_t len, nb_err *err)
{
    nb_chat_vocab v = {
        .has_chatml = find_cstr(t, "<|im_start|>") >= 0 && find_cstr(t, "<|im_end|>") >= 0,
        .has_llama3 = find_cstr(t, "<|start_header_id|>") >= 0 &&
                      find_cstr(t, "<|end_header_id|>") >= 0 && find_cstr(t, "<|eot_id|>") >= 0,
    };
    char *bos = NULL;
    if (t->bos >= 0 && !(bos = strndup(t->strs + t->key_off[t->bos], t->key_len[t->bos])))
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->src);
    v.bos = bos;
    nb_code rc = nb_chat_parse(tmpl, len, &v, t->src, &t->chat, err);
    free(bos);
    return rc;
}

/* Ids the model reports and the end-of-generation set. */
static void setup_eog(nb_tokenizer *t)
{
    add_eog(t, t->eos);
    add_eog(t, t->eot);
    add_eog(t, t->eom);
    add_eog(t, find_cstr(t, "<|im_end|>"));
    add_eog(t, find_cstr(t, "<|eot_id|>"));
}

void nb_tokenizer_free(nb_tokenizer *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_steps; i++)
        pcre2_code_free(t->steps[i].re);
    free(t->strs);
    free(t->key_off);
    free(t->key_len);
    free(t->piece_off);
    free(t->piece_len);
    free(t->flags);
    free(t->vmap);
    free(t->pairs);
    free(t->added);
    free(t->bitems[0]);
    free(t->bitems[1]);
    nb_chat_free(t->chat);
    free(t);
}

/* ---------------------------------------------------------------- GGUF */

static nb_code gguf_opt_id(const nb_gguf *g, const char *key, size_t n_vocab, int32_t *out,
                           nb_err *err)
{
    *out = -1;
    if (!nb_gguf_has(g, key))
        return NB_OK;
    uint64_t v;
    nb_code rc = nb_gguf_get_u64(g, key, &v, err);
    if (rc)
        return rc;
    if (v >= n_vocab)
        return nb_err_set(err, NB_EFORMAT, "%s: %s = %llu is past the vocabulary (%zu tokens)",
                          nb_gguf_path(g), key, (unsigned long long)v, n_vocab);
    *out = (int32_t)v;
    return NB_OK;
}

static nb_code gguf_opt_bool(const nb_gguf *g, const char *key, int def, int *out, nb_err *err)
{
    *out = def;
    return nb_gguf_has(g, key) ? nb_gguf_get_bool(g, key, out, err) : NB_OK;
}

/* Spells a raw-text token in the byte alphabet, as transformers does for
 * GGUF tokens with characters outside it. *out malloc'ed. */
static char *respell(const char *s, size_t n, size_t *on)
{
    char *o = malloc(n * 2 + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += put_cp(o + k, b2u[(unsigned char)s[i]]);
    *on = k;
    return o;
}

/* "a b" -> merge i of s (pointing into m); 0 when m is not two tokens and one space. */
static int split_merge(const char *m, size_t ml, tok_src *s, size_t i)
{
    const char *sp = m && ml > 1 ? memchr(m + 1, ' ', ml - 1) : NULL;
    if (!sp || sp + 1 == m + ml || memchr(sp + 1, ' ', (size_t)(m + ml - sp - 1)))
        return 0;
    s->ma[i] = m;
    s->man[i] = (size_t)(sp - m);
    s->mb[i] = sp + 1;
    s->mbn[i] = (size_t)(m + ml - sp - 1);
    return 1;
}

/* A SentencePiece ("llama") vocabulary: transformers builds it per architecture, and only the
 * Gemma builder is reproduced here (spaces become U+2581 before BPE, no prefix space, no
 * pre-tokenizer split, byte fallback, merges derived from the token order); Llama-2 style
 * files (Metaspace with a prefix space, merges by score) would need their own pipeline. */
static nb_code spm_family(nb_tokenizer *t, const nb_gguf *g, nb_err *err)
{
    static const char *const archs[] = {"gemma", "gemma2", "gemma3"};
    nb_gguf_str arch = {"", 0};
    nb_code rc = nb_gguf_has(g, "general.architecture")
                     ? nb_gguf_get_str(g, "general.architecture", &arch, err)
                     : NB_OK;
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strlen(archs[i]) == arch.len && !memcmp(archs[i], arch.ptr, arch.len)) {
            t->spm = 1;
            snprintf(t->pre_name, sizeof t->pre_name, "gemma");
            return NB_OK;
        }
    return nb_err_set(err, NB_EUNSUPPORTED,
                      "%s: tokenizer.ggml.model \"llama\" (SentencePiece) with "
                      "general.architecture \"%.*s\": only the gemma, gemma2 and gemma3 "
                      "SentencePiece vocabularies are supported", nb_gguf_path(g),
                      (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
}

/* The pre-tokenizer steps of tokenizer.ggml.pre (GPT-2's split when absent). */
static nb_code gguf_pre_steps(nb_tokenizer *t, const nb_gguf *g, nb_err *err)
{
    const char *path = nb_gguf_path(g);
    nb_gguf_str model;
    nb_code rc = nb_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (rc)
        return rc;
    if (model.len == 5 && !memcmp(model.ptr, "llama", 5))
        return spm_family(t, g, err);
    if (model.len != 4 || memcmp(model.ptr, "gpt2", 4))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: tokenizer.ggml.model \"%.*s\": only \"gpt2\" (byte-level BPE) "
                          "and \"llama\" (SentencePiece, Gemma family) are supported", path,
                          (int)(model.len > 64 ? 64 : model.len), model.ptr);
    const char *re = NULL;
    snprintf(t->pre_name, sizeof t->pre_name, "default");
    if (nb_gguf_has(g, "tokenizer.ggml.pre")) {
        nb_gguf_str pre;
        if ((rc = nb_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err)))
            return rc;
        size_t k, nk = sizeof gguf_pre / sizeof gguf_pre[0];
        for (k = 0; k < nk; k++)
            if (strlen(gguf_pre[k].name) == pre.len && !memcmp(gguf_pre[k].name, pre.ptr, pre.len))
                break;
        if (k == nk)
            return nb_err_set(err, NB_EUNSUPPORTED,
                              "%s: tokenizer.ggml.pre \"%.*s\" is not a supported pre-tokenizer "
                              "(supported: gpt2-style, llama-bpe, qwen2, gpt-4o, tekken families)",
                              path, (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
        re = gguf_pre[k].re;
        snprintf(t->pre_name, sizeof t->pre_name, "%s", gguf_pre[k].name);
    }
    if (re) {
        if ((rc = add_step(t, STEP_SPLIT, re, 0, 0, err)) ||
            (rc = add_step(t, STEP_BYTELEVEL, NULL, 0, 0, err)))
            return rc;
        return NB_OK;
    }
    return add_step(t, STEP_BYTELEVEL, RE_GPT2, 0, 0, err);
}

/* tokenizer.ggml.token_type (n entries) into malloc'ed *types; NULL when absent. */
static nb_code gguf_token_types(const nb_gguf *g, uint64_t n, int32_t **types, nb_err *err)
{
    const char *path = nb_gguf_path(g);
    *types = NULL;
    if (!nb_gguf_has(g, "tokenizer.ggml.token_type"))
        return NB_OK;
    nb_gguf_vtype et;
    uint64_t nt;
    nb_code rc = nb_gguf_get_arr_info(g, "tokenizer.ggml.token_type", &et, &nt, err);
    if (rc)
        return rc;
    if (nt != n)
        return nb_err_set(err, NB_EFORMAT, "%s: tokenizer.ggml.token_type has %llu entries, "
                          "tokenizer.ggml.tokens %llu", path, (unsigned long long)nt,
                          (unsigned long long)n);
    if (!(*types = malloc(n * sizeof **types)))
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    if ((rc = nb_gguf_get_arr_i32(g, "tokenizer.ggml.token_type", *types, n, err))) {
        free(*types);
        *types = NULL;
    }
    return rc;
}

/* The ids named in the metadata (bos, eos, eot, eom into t; unk and pad, which only make
 * their tokens special). */
static nb_code gguf_named_ids(nb_tokenizer *t, const nb_gguf *g, uint64_t n, int32_t *unk,
                              int32_t *pad, nb_err *err)
{
    nb_code rc;
    if ((rc = gguf_opt_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos, err)) ||
        (rc = gguf_opt_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos, err)) ||
        (rc = gguf_opt_id(g, "tokenizer.ggml.eot_token_id", n, &t->eot, err)) ||
        (rc = gguf_opt_id(g, "tokenizer.ggml.eom_token_id", n, &t->eom, err)) ||
        (rc = gguf_opt_id(g, "tokenizer.ggml.unknown_token_id", n, unk, err)) ||
        (rc = gguf_opt_id(g, "tokenizer.ggml.padding_token_id", n, pad, err)))
        return rc;
    return NB_OK;
}

/* Python's str.isspace(), which transformers' Gemma builder uses */
static int py_space(uint32_t c)
{
    return nb_utf8_is_space(c) || (c >= 0x1c && c <= 0x1f);
}

/* One SentencePiece token into s as transformers' Gemma builder has it: a token of
 * whitespace holding a space is respelled as that many U+2581 (the normalizer turns text
 * spaces into U+2581, so only that spelling can match); control tokens and the named ones
 * (bos, eos, unk, pad, and GemmaTokenizer's default mask "<mask>") are special added tokens,
 * user-defined ones plain added tokens unless respelled (their text is then not in the
 * vocabulary, so transformers does not add them). */
static nb_code spm_token(const char *path, const nb_gguf_str *tok, int32_t id, int type,
                         int named, tok_src *s, char **owned, size_t *n_owned, nb_err *err)
{
    size_t nc = 0, spaces = 0, blank = 1;
    for (size_t i = 0; i < tok->len; nc++) {
        uint32_t cp;
        i += nb_utf8_decode(tok->ptr + i, &cp);
        spaces += cp == ' ';
        blank &= (size_t)py_space(cp);
    }
    int respelled = spaces && blank;
    if (respelled) {
        char *r = malloc(nc * 3 + 1);
        if (!r)
            return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
        for (size_t i = 0; i < nc; i++)
            memcpy(r + 3 * i, SPACE_MARK, 3);
        owned[(*n_owned)++] = r;
        s->vs[id] = r;
        s->vn[id] = nc * 3;
    }
    int special = type == 3 || named || (tok->len == 6 && !memcmp(tok->ptr, "<mask>", 6));
    if (special || (type == 4 && !respelled)) {
        added_tok *a = &s->added[s->n_added++];
        a->s = tok->ptr;
        a->n = tok->len;
        a->id = id;
        a->special = (uint8_t)special;
    }
    return NB_OK;
}

/* The vocabulary into s: spellings outside the byte alphabet respelled (into *owned), and
 * added tokens: control tokens spelled in the alphabet (special), user-defined (not
 * special), and bos/eos/unk/pad, which transformers registers as special. */
static nb_code gguf_read_tokens(nb_tokenizer *t, const char *path, const nb_gguf_str *toks,
                                uint64_t n, const int32_t *types, int32_t unk, int32_t pad,
                                tok_src *s, char **owned, size_t *n_owned, nb_err *err)
{
    nb_code rc;
    for (uint64_t i = 0; i < n; i++) {
        size_t bad;
        if (toks[i].len == 0 || !nb_utf8_valid(toks[i].ptr, toks[i].len, &bad))
            return nb_err_set(err, NB_EFORMAT, "%s: tokenizer.ggml.tokens[%llu] is %s", path,
                              (unsigned long long)i, toks[i].len ? "not valid UTF-8" : "empty");
        s->vs[i] = toks[i].ptr;
        s->vn[i] = toks[i].len;
        int type = types ? types[i] : 1;
        int named = (int32_t)i == t->bos || (int32_t)i == t->eos || (int32_t)i == unk ||
                    (int32_t)i == pad;
        if (t->spm) {
            if ((rc = spm_token(path, &toks[i], (int32_t)i, type, named, s, owned, n_owned, err)))
                return rc;
            continue;
        }
        int alpha = in_alphabet(toks[i].ptr, toks[i].len);
        if (!alpha) {
            char *r = respell(toks[i].ptr, toks[i].len, &s->vn[i]);
            if (!r)
                return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
            owned[(*n_owned)++] = r;
            s->vs[i] = r;
        }
        /* one spelled outside the alphabet is not in transformers' vocabulary
         * under its own text, so it is never matched whole */
        int special = alpha && (type == 3 || named), user = alpha && type == 4;
        if (special || user) {
            added_tok *a = &s->added[s->n_added++];
            a->s = toks[i].ptr;
            a->n = toks[i].len;
            a->id = (int32_t)i;
            a->special = (uint8_t)special;
        }
    }
    return NB_OK;
}

/* Vocabulary, added tokens and merges into s, then the tables built from them. */
static nb_code gguf_build(nb_tokenizer *t, const nb_gguf *g, tok_src *s, char ***owned,
                          size_t *n_owned, nb_err *err)
{
    const char *path = nb_gguf_path(g);
    const nb_gguf_str *toks, *merges;
    uint64_t n, nm;
    nb_code rc;
    /* a SentencePiece file may list no merges: transformers derives them */
    int derive = t->spm && !nb_gguf_has(g, "tokenizer.ggml.merges");
    merges = NULL;
    nm = 0;
    if ((rc = nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", &toks, &n, err)) ||
        (!derive && (rc = nb_gguf_get_arr_str(g, "tokenizer.ggml.merges", &merges, &nm, err))))
        return rc;
    if (n == 0 || n > INT32_MAX - 1)
        return nb_err_set(err, NB_EFORMAT, "%s: tokenizer.ggml.tokens has %llu entries (must be "
                          "1..%d)", path, (unsigned long long)n, INT32_MAX - 1);
    int32_t *types, pad, unk; /* named special tokens only: transformers' BPE gets no unk */
    if ((rc = gguf_token_types(g, n, &types, err)))
        return rc;
    if ((rc = gguf_named_ids(t, g, n, &unk, &pad, err)) ||
        (rc = tok_src_alloc(s, n, nm, n, path, err))) {
        free(types);
        return rc;
    }
    if (!(*owned = calloc(n, sizeof **owned))) {
        free(types);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    rc = gguf_read_tokens(t, path, toks, n, types, unk, pad, s, *owned, n_owned, err);
    free(types);
    if (rc)
        return rc;
    if (t->spm) { /* GemmaTokenizer's BPE: unknown characters fused into one unk */
        t->unk = unk;
        t->fuse_unk = 1;
    }
    s->derive_merges = derive;
    for (uint64_t i = 0; i < nm; i++)
        if (!split_merge(merges[i].ptr, merges[i].len, s, i))
            return nb_err_set(err, NB_EFORMAT, "%s: tokenizer.ggml.merges[%llu] \"%.*s\" is "
                              "not two tokens separated by one space", path,
                              (unsigned long long)i,
                              (int)(merges[i].len > 64 ? 64 : merges[i].len), merges[i].ptr);
    return tok_build(t, s, err);
}

static nb_code gguf_load(nb_tokenizer *t, const nb_gguf *g, tok_src *s, char ***owned,
                         size_t *n_owned, nb_err *err)
{
    nb_code rc;
    if ((rc = gguf_pre_steps(t, g, err)) || (rc = gguf_build(t, g, s, owned, n_owned, err)))
        return rc;
    int add_bos, add_eos;
    /* transformers adds BOS to a SentencePiece vocabulary whose file does not say */
    if ((rc = gguf_opt_bool(g, "tokenizer.ggml.add_bos_token", t->spm, &add_bos, err)) ||
        (rc = gguf_opt_bool(g, "tokenizer.ggml.add_eos_token", 0, &add_eos, err)))
        return rc;
    if (add_bos && t->bos >= 0)
        t->prefix[t->n_prefix++] = t->bos;
    if (add_eos && t->eos >= 0)
        t->suffix[t->n_suffix++] = t->eos;
    nb_gguf_str tmpl = {NULL, 0};
    if (nb_gguf_has(g, "tokenizer.chat_template") &&
        (rc = nb_gguf_get_str(g, "tokenizer.chat_template", &tmpl, err)))
        return rc;
    return setup_chat(t, tmpl.ptr, tmpl.len, err);
}

nb_code nb_tokenizer_from_gguf(const nb_gguf *g, nb_tokenizer **out, nb_err *err)
{
    *out = NULL;
    nb_tokenizer *t = tok_new(nb_gguf_path(g));
    if (!t)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", nb_gguf_path(g));
    tok_src s = {0};
    char **owned = NULL;
    size_t n_owned = 0;
    nb_code rc = gguf_load(t, g, &s, &owned, &n_owned, err);
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    tok_src_free(&s);
    if (rc) {
        nb_tokenizer_free(t);
        return rc;
    }
    setup_eog(t);
    *out = t;
    return NB_OK;
}

/* ---------------------------------------------------------------- tokenizer.json */

#define HF_JSON_MAX (256u << 20)

static int jtype_is(json_object *o, const char *type)
{
    const char *s = nb_json_str(o, "type", NULL, NULL);
    return s && !strcmp(s, type);
}

/* Pre-tokenizer steps from the JSON tree: ByteLevel, Split (Isolated),
 * Digits, and Sequences of them; ByteLevel must come last. */
static nb_code hf_pre(nb_tokenizer *t, json_object *p, int depth, nb_err *err)
{
    const char *type = nb_json_str(p, "type", NULL, NULL);
    if (!type)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: pre_tokenizer without a type", t->src);
    if (!strcmp(type, "Sequence") && depth == 0) {
        json_object *arr = nb_json_get(p, "pretokenizers");
        if (!arr || !json_object_is_type(arr, json_type_array))
            return nb_err_set(err, NB_EFORMAT, "%s: pre_tokenizer Sequence without "
                              "\"pretokenizers\"", t->src);
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
            nb_code rc = hf_pre(t, json_object_array_get_idx(arr, i), 1, err);
            if (rc)
                return rc;
        }
        return NB_OK;
    }
    if (t->n_steps && t->steps[t->n_steps - 1].kind == STEP_BYTELEVEL)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: pre_tokenizer %s after ByteLevel is not "
                          "supported", t->src, type);
    if (!strcmp(type, "ByteLevel"))
        return add_step(t, STEP_BYTELEVEL, nb_json_bool(p, "use_regex", 1) ? RE_GPT2 : NULL, 0,
                        nb_json_bool(p, "add_prefix_space", 1), err);
    if (!strcmp(type, "Digits"))
        return add_step(t, STEP_DIGITS,
                        nb_json_bool(p, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", 0, 0,
                        err);
    if (!strcmp(type, "Split")) {
        json_object *pat = nb_json_get(p, "pattern");
        const char *re = nb_json_str(pat, "Regex", NULL, NULL);
        const char *lit = nb_json_str(pat, "String", NULL, NULL);
        const char *beh = nb_json_str(p, "behavior", NULL, NULL);
        if ((!re && !lit) || !beh || strcmp(beh, "Isolated") || nb_json_bool(p, "invert", 0))
            return nb_err_set(err, NB_EUNSUPPORTED, "%s: pre_tokenizer Split is supported only "
                              "with a Regex/String pattern, behavior Isolated, invert false",
                              t->src);
        return add_step(t, STEP_SPLIT, re ? re : lit, re == NULL, 0, err);
    }
    return nb_err_set(err, NB_EUNSUPPORTED, "%s: pre_tokenizer type \"%s\" is not supported "
                      "(ByteLevel, Split, Digits, Sequence)", t->src, type);
}

/* Ids of a TemplateProcessing's special-token name. */
static nb_code hf_special_ids(nb_tokenizer *t, json_object *pp, const char *name, int32_t *dst,
                              size_t *n, nb_err *err)
{
    json_object *st = nb_json_get(nb_json_get(pp, "special_tokens"), name);
    json_object *ids = nb_json_get(st, "ids");
    if (!ids || !json_object_is_type(ids, json_type_array))
        return nb_err_set(err, NB_EFORMAT, "%s: post_processor special token \"%s\" has no ids",
                          t->src, name);
    for (size_t i = 0; i < json_object_array_length(ids); i++) {
        int64_t id = json_object_get_int64(json_object_array_get_idx(ids, i));
        if (id < 0 || (uint64_t)id >= t->n_vocab)
            return nb_err_set(err, NB_EFORMAT, "%s: post_processor id %lld out of range",
                              t->src, (long long)id);
        if (*n == MAX_AFFIX)
            return nb_err_set(err, NB_EUNSUPPORTED, "%s: post_processor adds more than %d "
                              "tokens", t->src, MAX_AFFIX);
        dst[(*n)++] = (int32_t)id;
    }
    return NB_OK;
}

static nb_code hf_post(nb_tokenizer *t, json_object *pp, int depth, nb_err *err)
{
    if (!pp || jtype_is(pp, "ByteLevel"))
        return NB_OK;
    if (jtype_is(pp, "Sequence") && depth == 0) {
        json_object *arr = nb_json_get(pp, "processors");
        for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
            nb_code rc = hf_post(t, json_object_array_get_idx(arr, i), 1, err);
            if (rc)
                return rc;
        }
        return NB_OK;
    }
    if (!jtype_is(pp, "TemplateProcessing"))
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: post_processor type \"%s\" is not supported "
                          "(TemplateProcessing, ByteLevel)", t->src,
                          nb_json_str(pp, "type", "?", NULL));
    json_object *single = nb_json_get(pp, "single");
    int seen_a = 0;
    for (size_t i = 0; single && i < json_object_array_length(single); i++) {
        json_object *it = json_object_array_get_idx(single, i);
        json_object *sp = nb_json_get(it, "SpecialToken");
        if (nb_json_get(it, "Sequence")) {
            seen_a = 1;
            continue;
        }
        const char *name = nb_json_str(sp, "id", NULL, NULL);
        if (!name)
            return nb_err_set(err, NB_EFORMAT, "%s: post_processor.single[%zu] is neither "
                              "Sequence nor SpecialToken", t->src, i);
        nb_code rc = seen_a ? hf_special_ids(t, pp, name, t->suffix, &t->n_suffix, err)
                            : hf_special_ids(t, pp, name, t->prefix, &t->n_prefix, err);
        if (rc)
            return rc;
    }
    return NB_OK;
}

/* A special-token field of tokenizer_config.json: a string or {"content": ...}. */
static int32_t cfg_token(const nb_tokenizer *t, json_object *cfg, const char *key)
{
    json_object *v = nb_json_get(cfg, key);
    const char *s = nb_json_str(cfg, key, NULL, NULL);
    if (!s)
        s = nb_json_str(v, "content", NULL, NULL);
    return s ? vocab_find(t, s, strlen(s)) : -1;
}

static const char *cfg_template(json_object *cfg, size_t *len)
{
    json_object *v = nb_json_get(cfg, "chat_template");
    if (v && json_object_is_type(v, json_type_string)) {
        *len = (size_t)json_object_get_string_len(v);
        return json_object_get_string(v);
    }
    for (size_t i = 0; v && json_object_is_type(v, json_type_array) &&
                       i < json_object_array_length(v); i++) {
        json_object *e = json_object_array_get_idx(v, i);
        const char *name = nb_json_str(e, "name", NULL, NULL);
        if (name && !strcmp(name, "default"))
            return nb_json_str(e, "template", NULL, len);
    }
    return NULL;
}

static nb_code hf_str_entry(const nb_tokenizer *t, const char *what, size_t i, const char *s,
                            size_t n, nb_err *err)
{
    size_t bad;
    if (!s)
        return nb_err_set(err, NB_EFORMAT, "%s: %s[%zu] is not a string", t->src, what, i);
    if (!nb_utf8_valid(s, n, &bad) || n == 0)
        return nb_err_set(err, NB_EFORMAT, "%s: %s[%zu] is %s", t->src, what, i,
                          n ? "not valid UTF-8" : "empty");
    return NB_OK;
}

/* The BPE model's options we do not implement are refused rather than ignored. */
static nb_code hf_check_model(const nb_tokenizer *t, json_object *model, nb_err *err)
{
    if (!jtype_is(model, "BPE"))
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: model.type must be \"BPE\"", t->src);
    const char *cs = nb_json_str(model, "continuing_subword_prefix", NULL, NULL);
    const char *ew = nb_json_str(model, "end_of_word_suffix", NULL, NULL);
    if ((cs && *cs) || (ew && *ew) || nb_json_bool(model, "byte_fallback", 0) ||
        nb_json_get(model, "dropout"))
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: BPE with continuing_subword_prefix, "
                          "end_of_word_suffix, byte_fallback or dropout is not supported", t->src);
    return NB_OK;
}

/* One past the largest token id of the vocabulary and the added tokens, checked to be
 * fillable before anything is allocated for it. */
static nb_code hf_count_ids(const nb_tokenizer *t, json_object *vocab, json_object *added,
                            size_t *out, nb_err *err)
{
    size_t na = added ? json_object_array_length(added) : 0, n = 0;
    json_object_object_foreach(vocab, k0, v0) {
        int64_t id = json_object_get_int64(v0);
        if (!json_object_is_type(v0, json_type_int) || id < 0 || id >= INT32_MAX - 1)
            return nb_err_set(err, NB_EFORMAT, "%s: model.vocab[\"%.64s\"]: id must be an "
                              "integer 0..%d", t->src, k0, INT32_MAX - 2);
        if ((size_t)id >= n)
            n = (size_t)id + 1;
    }
    for (size_t i = 0; i < na; i++) {
        json_object *idv = nb_json_get(json_object_array_get_idx(added, i), "id");
        int64_t id = idv ? json_object_get_int64(idv) : -1;
        if (!idv || !json_object_is_type(idv, json_type_int) || id < 0 || id >= INT32_MAX - 1)
            return nb_err_set(err, NB_EFORMAT, "%s: added_tokens[%zu].id must be an integer "
                              "0..%d", t->src, i, INT32_MAX - 2);
        if ((size_t)id >= n)
            n = (size_t)id + 1;
    }
    size_t nv = (size_t)json_object_object_length(vocab);
    if (n > nv + na)
        return nb_err_set(err, NB_EFORMAT, "%s: token ids reach %zu but only %zu vocab entries "
                          "and %zu added tokens exist (ids must be 0..N-1 without gaps)",
                          t->src, n - 1, nv, na);
    *out = n;
    return NB_OK;
}

static nb_code hf_read_vocab(const nb_tokenizer *t, json_object *vocab, tok_src *s,
                             nb_err *err)
{
    size_t vi = 0;
    json_object_object_foreach(vocab, k, v) {
        size_t id = (size_t)json_object_get_int64(v), kl = strlen(k);
        nb_code rc = hf_str_entry(t, "model.vocab", vi++, k, kl, err);
        if (rc)
            return rc;
        if (s->vs[id])
            return nb_err_set(err, NB_EFORMAT, "%s: model.vocab: id %zu appears twice", t->src, id);
        s->vs[id] = k;
        s->vn[id] = kl;
    }
    return NB_OK;
}

/* Merges as ["a", "b"] pairs or as "a b" strings (older files). */
static nb_code hf_read_merges(const nb_tokenizer *t, json_object *merges, tok_src *s,
                              nb_err *err)
{
    for (size_t i = 0; i < s->n_merges; i++) {
        json_object *m = json_object_array_get_idx(merges, i);
        if (json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2) {
            json_object *a = json_object_array_get_idx(m, 0), *b = json_object_array_get_idx(m, 1);
            if (!json_object_is_type(a, json_type_string) ||
                !json_object_is_type(b, json_type_string))
                return nb_err_set(err, NB_EFORMAT, "%s: model.merges[%zu] is not two strings",
                                  t->src, i);
            s->ma[i] = json_object_get_string(a);
            s->man[i] = (size_t)json_object_get_string_len(a);
            s->mb[i] = json_object_get_string(b);
            s->mbn[i] = (size_t)json_object_get_string_len(b);
            continue;
        }
        const char *ms = json_object_is_type(m, json_type_string) ? json_object_get_string(m)
                                                                  : NULL;
        size_t ml = ms ? (size_t)json_object_get_string_len(m) : 0;
        if (!split_merge(ms, ml, s, i))
            return nb_err_set(err, NB_EFORMAT, "%s: model.merges[%zu] is neither \"a b\" nor "
                              "[\"a\", \"b\"]", t->src, i);
    }
    return NB_OK;
}

static nb_code hf_read_added(const nb_tokenizer *t, json_object *added, size_t na, tok_src *s,
                             nb_err *err)
{
    for (size_t i = 0; i < na; i++) {
        json_object *a = json_object_array_get_idx(added, i);
        size_t cl = 0;
        const char *c = nb_json_str(a, "content", NULL, &cl);
        nb_code rc = hf_str_entry(t, "added_tokens", i, c, cl, err);
        if (rc)
            return rc;
        if (nb_json_bool(a, "single_word", 0))
            return nb_err_set(err, NB_EUNSUPPORTED, "%s: added_tokens[%zu] \"%.64s\": "
                              "single_word is not supported", t->src, i, c);
        added_tok *d = &s->added[s->n_added++];
        d->s = c;
        d->n = cl;
        d->id = (int32_t)json_object_get_int64(nb_json_get(a, "id"));
        d->special = (uint8_t)nb_json_bool(a, "special", 0);
        d->normalized = (uint8_t)nb_json_bool(a, "normalized", !d->special);
        d->lstrip = (uint8_t)nb_json_bool(a, "lstrip", 0);
        d->rstrip = (uint8_t)nb_json_bool(a, "rstrip", 0);
        if (!s->vs[d->id]) { /* an id past the model's vocabulary: the first listed names it */
            s->vs[d->id] = c;
            s->vn[d->id] = cl;
        }
    }
    return NB_OK;
}

/* Vocabulary, merges and added tokens into s, then the tables built from them. */
static nb_code hf_build(nb_tokenizer *t, json_object *root, json_object *model, tok_src *s,
                        nb_err *err)
{
    json_object *vocab = nb_json_get(model, "vocab"), *merges = nb_json_get(model, "merges");
    json_object *added = NULL; /* null is no array either */
    json_object_object_get_ex(root, "added_tokens", &added);
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return nb_err_set(err, NB_EFORMAT, "%s: model.vocab is not an object", t->src);
    if (!merges || !json_object_is_type(merges, json_type_array))
        return nb_err_set(err, NB_EFORMAT, "%s: model.merges is not an array", t->src);
    if (added && !json_object_is_type(added, json_type_array))
        return nb_err_set(err, NB_EFORMAT, "%s: added_tokens is not an array", t->src);
    size_t na = added ? json_object_array_length(added) : 0, n = 0;
    nb_code rc;
    if ((rc = hf_count_ids(t, vocab, added, &n, err)) ||
        (rc = tok_src_alloc(s, n, json_object_array_length(merges), na, t->src, err)) ||
        (rc = hf_read_vocab(t, vocab, s, err)) || (rc = hf_read_merges(t, merges, s, err)) ||
        (rc = hf_read_added(t, added, na, s, err)))
        return rc;
    return tok_build(t, s, err);
}

/* The pre-tokenizer steps, decoder and unk token of the file's own pipeline. */
static nb_code hf_pipeline(nb_tokenizer *t, json_object *root, json_object *model, nb_err *err)
{
    json_object *pre = nb_json_get(root, "pre_tokenizer");
    if (!pre)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: no pre_tokenizer (a byte-level BPE "
                          "needs ByteLevel)", t->src);
    nb_code rc = hf_pre(t, pre, 0, err);
    if (rc)
        return rc;
    if (t->steps[t->n_steps - 1].kind != STEP_BYTELEVEL)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: pre_tokenizer must end with ByteLevel "
                          "(only byte-level BPE is supported)", t->src);
    json_object *dec = nb_json_get(root, "decoder");
    if (dec && !jtype_is(dec, "ByteLevel"))
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: decoder \"%s\" is not supported "
                          "(ByteLevel)", t->src, nb_json_str(dec, "type", "?", NULL));
    const char *unk = nb_json_str(model, "unk_token", NULL, NULL);
    if (unk)
        t->unk = vocab_find(t, unk, strlen(unk));
    t->fuse_unk = nb_json_bool(model, "fuse_unk", 0);
    return NB_OK;
}

/* What the steps amount to, in GGUF "pre" terms where one fits. */
static void hf_pre_name(nb_tokenizer *t, json_object *root)
{
    const pre_step *st = t->steps;
    if (t->n_steps == 1 && st[0].re)
        snprintf(t->pre_name, sizeof t->pre_name, "gpt2");
    else if (t->n_steps == 2 && st[0].kind == STEP_DIGITS && st[1].re)
        snprintf(t->pre_name, sizeof t->pre_name, "smollm");
    else
        snprintf(t->pre_name, sizeof t->pre_name, "custom");
    json_object *seq = nb_json_path(root, "pre_tokenizer", "pretokenizers", NULL);
    const char *re = NULL;
    if (t->n_steps == 2 && st[0].kind == STEP_SPLIT && !st[1].re && seq)
        re = nb_json_str(nb_json_get(json_object_array_get_idx(seq, 0), "pattern"), "Regex",
                         NULL, NULL);
    if (re && !strcmp(re, RE_LLAMA3))
        snprintf(t->pre_name, sizeof t->pre_name, "llama-bpe");
    else if (re && !strcmp(re, RE_QWEN2))
        snprintf(t->pre_name, sizeof t->pre_name, "qwen2");
}

/* bos/eos from tokenizer_config.json (or the class's defaults, or well-known names) and the
 * tokens encode adds around the text. */
static void hf_specials(nb_tokenizer *t, json_object *cfg, int gpt2_class)
{
    t->bos = cfg_token(t, cfg, "bos_token");
    t->eos = cfg_token(t, cfg, "eos_token");
    if (gpt2_class) { /* the class's defaults, unless given (also as null) */
        if (!json_object_object_get_ex(cfg, "bos_token", NULL))
            t->bos = find_cstr(t, "<|endoftext|>");
        if (!json_object_object_get_ex(cfg, "eos_token", NULL))
            t->eos = find_cstr(t, "<|endoftext|>");
    }
    if (t->bos < 0 && t->n_prefix)
        t->bos = t->prefix[0];
    static const char *eos_names[] = {"<|eot_id|>", "<|im_end|>", "<|end_of_text|>",
                                      "<|endoftext|>", "</s>"};
    for (size_t i = 0; t->eos < 0 && i < sizeof eos_names / sizeof *eos_names; i++)
        t->eos = find_cstr(t, eos_names[i]);
    /* an explicit add_bos_token / add_eos_token makes transformers rebuild the
     * post-processor as [bos] $A [eos] from those flags */
    if (nb_json_get_type(cfg, "add_bos_token", json_type_boolean) ||
        nb_json_get_type(cfg, "add_eos_token", json_type_boolean) || t->no_post) {
        t->n_prefix = t->n_suffix = 0;
        if (nb_json_bool(cfg, "add_bos_token", 0) && t->bos >= 0)
            t->prefix[t->n_prefix++] = t->bos;
        if (nb_json_bool(cfg, "add_eos_token", 0) && t->eos >= 0)
            t->suffix[t->n_suffix++] = t->eos;
    }
    t->eot = find_cstr(t, "<|eot_id|>");
}

static nb_code hf_load(nb_tokenizer *t, json_object *root, json_object *cfg, tok_src *s,
                       nb_err *err)
{
    json_object *model = nb_json_get(root, "model");
    nb_code rc = hf_check_model(t, model, err);
    if (rc)
        return rc;
    /* transformers 5 builds a tokenizer class that has its own __init__ from
     * that class's pipeline, taking only vocab, merges and the post-processor
     * from tokenizer.json. GPT2Tokenizer (SmolLM2's) thus gets GPT-2's
     * ByteLevel split, no normalizer, whatever the file says (SmolLM2's file
     * adds Digits, which `tokenizers` alone would honour). */
    const char *cls = nb_json_str(cfg, "tokenizer_class", NULL, NULL);
    int gpt2_class = cls && (!strcmp(cls, "GPT2Tokenizer") || !strcmp(cls, "GPT2TokenizerFast"));
    json_object *norm = nb_json_get(root, "normalizer");
    if (!gpt2_class && norm)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: normalizer \"%s\" is not supported (only "
                          "null)", t->src, nb_json_str(norm, "type", "?", NULL));
    t->ignore_merges = nb_json_bool(model, "ignore_merges", 0);
    if ((rc = hf_build(t, root, model, s, err)))
        return rc;
    if (gpt2_class) {
        t->ignore_merges = 0;
        t->unk = -1;
        rc = add_step(t, STEP_BYTELEVEL, RE_GPT2, 0, nb_json_bool(cfg, "add_prefix_space", 0),
                      err);
    } else {
        rc = hf_pipeline(t, root, model, err);
    }
    if (rc)
        return rc;
    json_object *post = nb_json_get(root, "post_processor");
    t->no_post = !post;
    if ((rc = hf_post(t, post, 0, err)))
        return rc;
    hf_pre_name(t, root);
    hf_specials(t, cfg, gpt2_class);
    size_t tl = 0;
    const char *tmpl = cfg_template(cfg, &tl);
    return setup_chat(t, tmpl, tl, err);
}

nb_code nb_tokenizer_from_hf_json(const char *path, nb_tokenizer **out, nb_err *err)
{
    *out = NULL;
    nb_tokenizer *t = tok_new(path);
    if (!t)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    json_object *root = NULL, *cfg = NULL;
    nb_code rc = nb_json_read_file(path, HF_JSON_MAX, &root, err);
    if (rc) {
        nb_tokenizer_free(t);
        return rc;
    }
    /* tokenizer_config.json beside it carries bos/eos and the chat template */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path + 1) : 0;
    char *cpath = malloc(dl + sizeof "tokenizer_config.json");
    if (!cpath) {
        json_object_put(root);
        nb_tokenizer_free(t);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    memcpy(cpath, path, dl);
    memcpy(cpath + dl, "tokenizer_config.json", sizeof "tokenizer_config.json");
    if (nb_file_exists(cpath))
        rc = nb_json_read_file(cpath, HF_JSON_MAX, &cfg, err);
    free(cpath);
    tok_src s = {0};
    if (!rc)
        rc = hf_load(t, root, cfg, &s, err);
    tok_src_free(&s);
    json_object_put(root);
    json_object_put(cfg);
    if (rc) {
        nb_tokenizer_free(t);
        return rc;
    }
    setup_eog(t);
    *out = t;
    return NB_OK;
}

/* ---------------------------------------------------------------- encoding */

typedef struct span {
    const char *p;
    size_t n;
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
} spans;

typedef struct bpe_cand {
    int32_t rank, pos, id;
} bpe_cand;

/* Per-call scratch: nothing here outlives one encode, so a tokenizer is
 * shared read-only between threads. */
typedef struct enc {
    const nb_tokenizer *t;
    pcre2_match_data *md;
    int32_t *ids;
    size_t n_ids, cap_ids;
    spans a, b;
    char **arena; /* prefix-space copies */
    size_t n_arena, cap_arena;
    int32_t *sym, *prev, *next;
    bpe_cand *heap;
    size_t cap_sym;
    char *spell; /* a pre-token in the byte alphabet (ignore_merges lookups) */
    char *norm;  /* SentencePiece: the stretch with spaces as U+2581 */
    size_t cap_norm;
    nb_err *err;
} enc;

static nb_code oom(enc *e)
{
    return nb_err_set(e->err, NB_ENOMEM, "%s: out of memory while encoding", e->t->src);
}

static nb_code push_id(enc *e, int32_t id)
{
    if (e->n_ids == e->cap_ids) {
        size_t nc = e->cap_ids ? e->cap_ids * 2 : 64;
        int32_t *n = realloc(e->ids, nc * sizeof *n);
        if (!n)
            return oom(e);
        e->ids = n;
        e->cap_ids = nc;
    }
    e->ids[e->n_ids++] = id;
    return NB_OK;
}

static nb_code push_span(enc *e, spans *s, const char *p, size_t n)
{
    if (!n)
        return NB_OK;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        span *v = realloc(s->v, nc * sizeof *v);
        if (!v)
            return oom(e);
        s->v = v;
        s->cap = nc;
    }
    s->v[s->n].p = p;
    s->v[s->n++].n = n;
    return NB_OK;
}

/* Isolated split: matches and the gaps between them both become pieces. */
static nb_code split_re(enc *e, const pcre2_code *re, span in, spans *out)
{
    size_t pos = 0, at = 0;
    nb_code rc;
    while (at < in.n) {
        uint32_t opts = PCRE2_NO_UTF_CHECK;
        int m = pcre2_match(re, (PCRE2_SPTR)in.p, in.n, at, opts, e->md, NULL);
        if (m == PCRE2_ERROR_JIT_STACKLIMIT)
            m = pcre2_match(re, (PCRE2_SPTR)in.p, in.n, at, opts | PCRE2_NO_JIT, e->md, NULL);
        if (m == PCRE2_ERROR_NOMATCH)
            break;
        if (m < 0) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(m, msg, sizeof msg);
            return nb_err_set(e->err, NB_ENOMEM, "%s: pre-tokenizer regex failed on a %zu-byte "
                              "piece: %s", e->t->src, in.n, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t s = ov[0], f = ov[1];
        if ((rc = push_span(e, out, in.p + pos, s - pos)) ||
            (rc = push_span(e, out, in.p + s, f - s)))
            return rc;
        pos = f;
        if (f > at) {
            at = f;
        } else { /* empty match: step over one character */
            at++;
            while (at < in.n && ((unsigned char)in.p[at] & 0xc0) == 0x80)
                at++;
        }
    }
    return push_span(e, out, in.p + pos, in.n - pos);
}

static nb_code grow_bpe(enc *e, size_t n)
{
    if (n <= e->cap_sym)
        return NB_OK;
    if (n > (size_t)INT32_MAX / 3)
        return nb_err_set(e->err, NB_ENOMEM, "%s: a %zu-byte pre-token exceeds the limit",
                          e->t->src, n);
    size_t nc = e->cap_sym ? e->cap_sym : 256;
    while (nc < n)
        nc *= 2;
    free(e->sym);
    free(e->prev);
    free(e->next);
    free(e->heap);
    free(e->spell);
    e->sym = malloc(nc * sizeof *e->sym);
    e->prev = malloc(nc * sizeof *e->prev);
    e->next = malloc(nc * sizeof *e->next);
    e->heap = malloc(3 * nc * sizeof *e->heap);
    e->spell = malloc(2 * nc);
    e->cap_sym = e->sym && e->prev && e->next && e->heap && e->spell ? nc : 0;
    return e->cap_sym ? NB_OK : oom(e);
}

static int cand_less(bpe_cand a, bpe_cand b)
{
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(bpe_cand *h, size_t *n, bpe_cand c)
{
    size_t i = (*n)++;
    while (i > 0 && cand_less(c, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n)
{
    bpe_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < *n && cand_less(h[l], last))
            m = l;
        if (l + 1 < *n && cand_less(h[l + 1], m == i ? last : h[l]))
            m = l + 1;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    if (*n)
        h[i] = last;
    return top;
}

static void try_pair(enc *e, size_t *nh, int32_t pos)
{
    int32_t nx = e->next[pos];
    if (nx < 0)
        return;
    const pair_slot *p = pair_find(e->t, e->sym[pos], e->sym[nx]);
    if (p)
        heap_push(e->heap, nh, (bpe_cand){p->rank, pos, p->id});
}

static nb_code bpe_merge(enc *e, int32_t n);

/* One pre-token through the byte alphabet and BPE. */
static nb_code bpe(enc *e, span w)
{
    const nb_tokenizer *t = e->t;
    nb_code rc = grow_bpe(e, w.n);
    if (rc)
        return rc;
    if (t->ignore_merges) {
        size_t k = 0;
        for (size_t i = 0; i < w.n; i++)
            k += put_cp(e->spell + k, b2u[(unsigned char)w.p[i]]);
        int32_t id = vocab_find(t, e->spell, k);
        if (id >= 0)
            return push_id(e, id);
    }
    int32_t n = 0;
    for (size_t i = 0; i < w.n; i++) {
        int32_t id = t->byte_id[(unsigned char)w.p[i]];
        if (id < 0) { /* as HF's BPE: unk (a run fused into one if asked), or dropped */
            int run = i > 0 && t->byte_id[(unsigned char)w.p[i - 1]] < 0;
            if (t->unk < 0 || (t->fuse_unk && run))
                continue;
            id = t->unk;
        }
        e->sym[n++] = id;
    }
    return bpe_merge(e, n);
}

/* One normalized SentencePiece word: a symbol per character in the vocabulary, else its
 * <0xHH> byte tokens, else unk (a run fused into one). As in HF's BPE, a pending unk is
 * flushed only by a character in the vocabulary or the end, not by byte tokens. */
static nb_code bpe_spm(enc *e, span w)
{
    const nb_tokenizer *t = e->t;
    nb_code rc = grow_bpe(e, w.n);
    if (rc)
        return rc;
    int32_t n = 0;
    int unk = 0;
    for (size_t i = 0; i < w.n;) {
        uint32_t cp;
        size_t l = nb_utf8_decode(w.p + i, &cp);
        int32_t id = vocab_find(t, w.p + i, l);
        if (id >= 0) {
            if (unk)
                e->sym[n++] = t->unk;
            unk = 0;
            e->sym[n++] = id;
        } else {
            size_t k = 0;
            while (k < l && t->byte_id[(unsigned char)w.p[i + k]] >= 0)
                k++;
            if (k == l) {
                for (k = 0; k < l; k++)
                    e->sym[n++] = t->byte_id[(unsigned char)w.p[i + k]];
            } else if (t->unk >= 0) {
                if (unk && !t->fuse_unk)
                    e->sym[n++] = t->unk;
                unk = 1;
            }
        }
        i += l;
    }
    if (unk)
        e->sym[n++] = t->unk;
    return bpe_merge(e, n);
}

/* BPE over the n symbols in e->sym: the lowest-ranked adjacent pair merges first, leftmost
 * among equals (HF's order); the result is appended to the ids. */
static nb_code bpe_merge(enc *e, int32_t n)
{
    const nb_tokenizer *t = e->t;
    nb_code rc;
    if (!n)
        return NB_OK;
    for (int32_t i = 0; i < n; i++) {
        e->prev[i] = i - 1;
        e->next[i] = i + 1;
    }
    e->next[n - 1] = -1;
    size_t nh = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        try_pair(e, &nh, i);
    while (nh) {
        bpe_cand c = heap_pop(e->heap, &nh);
        int32_t nx = e->next[c.pos];
        if (e->sym[c.pos] < 0 || nx < 0)
            continue;
        const pair_slot *p = pair_find(t, e->sym[c.pos], e->sym[nx]);
        if (!p || p->id != c.id || p->rank != c.rank)
            continue; /* stale: a neighbour merged since */
        e->sym[c.pos] = c.id;
        e->sym[nx] = -1;
        e->next[c.pos] = e->next[nx];
        if (e->next[nx] >= 0)
            e->prev[e->next[nx]] = c.pos;
        if (e->prev[c.pos] >= 0)
            try_pair(e, &nh, e->prev[c.pos]);
        try_pair(e, &nh, c.pos);
    }
    for (int32_t i = 0; i >= 0; i = e->next[i])
        if ((rc = push_id(e, e->sym[i])))
            return rc;
    return NB_OK;
}

static nb_code with_prefix_space(enc *e, span in, span *out)
{
    if (e->n_arena == e->cap_arena) {
        size_t nc = e->cap_arena ? e->cap_arena * 2 : 8;
        char **a = realloc(e->arena, nc * sizeof *a);
        if (!a)
            return oom(e);
        e->arena = a;
        e->cap_arena = nc;
    }
    char *p = malloc(in.n + 1);
    if (!p)
        return oom(e);
    p[0] = ' ';
    memcpy(p + 1, in.p, in.n);
    e->arena[e->n_arena++] = p;
    out->p = p;
    out->n = in.n + 1;
    return NB_OK;
}

/* SentencePiece-style: every space becomes U+2581 (GemmaTokenizer's normalizer), and the
 * stretch is one word (its pre-tokenizer splits on spaces, of which none are left). */
static nb_code encode_spm(enc *e, const char *p, size_t n)
{
    if (n > (SIZE_MAX - 1) / 3)
        return oom(e);
    if (3 * n > e->cap_norm) {
        char *b = realloc(e->norm, 3 * n);
        if (!b)
            return oom(e);
        e->norm = b;
        e->cap_norm = 3 * n;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') {
            memcpy(e->norm + k, SPACE_MARK, 3);
            k += 3;
        } else {
            e->norm[k++] = p[i];
        }
    }
    return bpe_spm(e, (span){e->norm, k});
}

/* A stretch of ordinary text through the pre-tokenizer steps, then BPE. */
static nb_code encode_text(enc *e, const char *p, size_t n)
{
    nb_code rc;
    if (e->t->spm)
        return encode_spm(e, p, n);
    e->a.n = 0;
    if ((rc = push_span(e, &e->a, p, n)))
        return rc;
    for (size_t k = 0; k < e->t->n_steps; k++) {
        const pre_step *st = &e->t->steps[k];
        e->b.n = 0;
        for (size_t i = 0; i < e->a.n; i++) {
            span s = e->a.v[i];
            if (st->prefix_space && s.p[0] != ' ' && (rc = with_prefix_space(e, s, &s)))
                return rc;
            if (st->re)
                rc = split_re(e, st->re, s, &e->b);
            else
                rc = push_span(e, &e->b, s.p, s.n);
            if (rc)
                return rc;
        }
        spans tmp = e->a;
        e->a = e->b;
        e->b = tmp;
    }
    for (size_t i = 0; i < e->a.n; i++)
        if ((rc = bpe(e, e->a.v[i])))
            return rc;
    return NB_OK;
}

/* Leftmost-longest added-token match in s[from, n) for one pass; returns 1
 * and the matched range (widened by lstrip/rstrip) and token. */
static int find_added(const nb_tokenizer *t, int pass, int parse_special, const char *s,
                      size_t from, size_t n, size_t *ms, size_t *me, int32_t *id)
{
    const uint32_t *bs = t->bstart[pass];
    if (bs[256] == 0)
        return 0;
    for (size_t i = from; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        for (uint32_t k = bs[c]; k < bs[c + 1]; k++) {
            const added_tok *a = &t->added[t->bitems[pass][k]];
            if (a->n > n - i || memcmp(s + i, a->s, a->n) || (a->special && !parse_special))
                continue;
            size_t st = i, en = i + a->n;
            while (a->lstrip && st > from) {
                size_t q = st - 1;
                while (q > from && ((unsigned char)s[q] & 0xc0) == 0x80)
                    q--;
                uint32_t cp;
                nb_utf8_decode(s + q, &cp);
                if (!nb_utf8_is_space(cp))
                    break;
                st = q;
            }
            while (a->rstrip && en < n) {
                uint32_t cp;
                size_t l = nb_utf8_decode(s + en, &cp);
                if (!nb_utf8_is_space(cp))
                    break;
                en += l;
            }
            *ms = st;
            *me = en;
            *id = a->id;
            return 1;
        }
    }
    return 0;
}

/* Pass 1 (raw-text added tokens) over the whole text, pass 2 (normalized
 * ones) over what pass 1 left, as HF's AddedVocabulary does. */
static nb_code encode_pass(enc *e, int pass, int parse_special, const char *s, size_t n)
{
    size_t pos = 0, ms, me;
    int32_t id;
    nb_code rc;
    while (pos < n && find_added(e->t, pass, parse_special, s, pos, n, &ms, &me, &id)) {
        if (ms > pos) {
            rc = pass == 0 ? encode_pass(e, 1, parse_special, s + pos, ms - pos)
                           : encode_text(e, s + pos, ms - pos);
            if (rc)
                return rc;
        }
        if ((rc = push_id(e, id)))
            return rc;
        pos = me;
    }
    if (pos < n)
        return pass == 0 ? encode_pass(e, 1, parse_special, s + pos, n - pos)
                         : encode_text(e, s + pos, n - pos);
    return NB_OK;
}

nb_code nb_tokenizer_encode(const nb_tokenizer *t, const char *text, size_t len, int add_bos,
                            int parse_special, int32_t **ids, size_t *n_ids, nb_err *err)
{
    *ids = NULL;
    *n_ids = 0;
    if (!text && len)
        return nb_err_set(err, NB_EINVAL, "text: NULL with length %zu", len);
    size_t bad;
    if (len && !nb_utf8_valid(text, len, &bad))
        return nb_err_set(err, NB_EINVAL, "text: invalid UTF-8 at byte offset %zu (byte 0x%02x)",
                          bad, (unsigned char)text[bad]);
    enc e = {.t = t, .err = err};
    e.md = pcre2_match_data_create(1, NULL);
    nb_code rc = e.md ? NB_OK : oom(&e);
    for (size_t i = 0; !rc && add_bos && i < t->n_prefix; i++)
        rc = push_id(&e, t->prefix[i]);
    if (!rc && len)
        rc = encode_pass(&e, 0, parse_special, text, len);
    for (size_t i = 0; !rc && add_bos && i < t->n_suffix; i++)
        rc = push_id(&e, t->suffix[i]);
    if (!rc && !e.ids && !(e.ids = malloc(sizeof *e.ids))) /* empty is still allocated */
        rc = oom(&e);
    pcre2_match_data_free(e.md);
    for (size_t i = 0; i < e.n_arena; i++)
        free(e.arena[i]);
    free(e.arena);
    free(e.a.v);
    free(e.b.v);
    free(e.sym);
    free(e.prev);
    free(e.next);
    free(e.heap);
    free(e.spell);
    free(e.norm);
    if (rc) {
        free(e.ids);
        return rc;
    }
    *ids = e.ids;
    *n_ids = e.n_ids;
    return NB_OK;
}

/* ---------------------------------------------------------------- decoding */

/* Length of the maximal valid-so-far prefix of a UTF-8 sequence at s:
 * returns the full length when the sequence is complete and valid, else 0
 * and *sub the number of bytes forming a maximal invalid subpart (>= 1). */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *sub)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    *sub = 1;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    for (size_t i = 1; i < len; i++) {
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
        if (i >= n || s[i] < l || s[i] > h) {
            *sub = i;
            return 0;
        }
    }
    return len;
}

/* Ends a run of byte-fallback tokens written at o[start, w) as HF's ByteFallback decoder
 * does: kept when the run is valid UTF-8, else one U+FFFD per token (in place: o has room for
 * 3 bytes per piece byte). Returns the new end. */
static size_t end_run(char *o, size_t start, size_t w)
{
    size_t bad;
    if (nb_utf8_valid(o + start, w - start, &bad))
        return w;
    for (size_t i = start; i < w; i++)
        memcpy(o + start + 3 * (i - start), "\xef\xbf\xbd", 3);
    return start + 3 * (w - start);
}

/* SentencePiece decoding into o: the pieces (space markers already spaces), runs of <0xHH>
 * tokens through end_run. Returns the length; o is NUL-terminated. */
static size_t spm_decode(const nb_tokenizer *t, const int32_t *ids, size_t n_ids,
                         int skip_special, char *o)
{
    size_t w = 0, start = 0;
    int in_run = 0;
    for (size_t i = 0; i < n_ids; i++) {
        uint8_t f = t->flags[ids[i]];
        if (skip_special && (f & TOK_SPECIAL))
            continue;
        if (!(f & TOK_BYTE) && in_run)
            w = end_run(o, start, w);
        if ((f & TOK_BYTE) && !in_run)
            start = w;
        in_run = (f & TOK_BYTE) != 0;
        memcpy(o + w, t->strs + t->piece_off[ids[i]], t->piece_len[ids[i]]);
        w += t->piece_len[ids[i]];
    }
    if (in_run)
        w = end_run(o, start, w);
    o[w] = '\0';
    return w;
}

nb_code nb_tokenizer_decode(const nb_tokenizer *t, const int32_t *ids, size_t n_ids,
                            int skip_special, char **text, size_t *len, nb_err *err)
{
    *text = NULL;
    if (len)
        *len = 0;
    if (!ids && n_ids)
        return nb_err_set(err, NB_EINVAL, "ids: NULL with %zu ids", n_ids);
    size_t raw = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_vocab)
            return nb_err_set(err, NB_EINVAL, "ids[%zu] = %d: out of range (vocabulary of %zu)",
                              i, ids[i], t->n_vocab);
        if (!(skip_special && (t->flags[ids[i]] & TOK_SPECIAL)))
            raw += t->piece_len[ids[i]];
    }
    if (raw > (SIZE_MAX - 1) / 6)
        return nb_err_set(err, NB_ENOMEM, "decode: %zu bytes is too large", raw);
    unsigned char *b = malloc(raw + 1);
    char *o = malloc(raw * 3 + 1); /* every invalid byte may become U+FFFD */
    if (!b || !o) {
        free(b);
        free(o);
        return nb_err_set(err, NB_ENOMEM, "decode: out of memory for %zu bytes", raw);
    }
    if (t->spm) {
        free(b);
        *text = o;
        size_t w = spm_decode(t, ids, n_ids, skip_special, o);
        if (len)
            *len = w;
        return NB_OK;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_ids; i++)
        if (!(skip_special && (t->flags[ids[i]] & TOK_SPECIAL))) {
            memcpy(b + k, t->strs + t->piece_off[ids[i]], t->piece_len[ids[i]]);
            k += t->piece_len[ids[i]];
        }
    size_t w = 0;
    for (size_t i = 0; i < k;) {
        size_t sub, l = utf8_seq(b + i, k - i, &sub);
        if (l) {
            memcpy(o + w, b + i, l);
            w += l;
            i += l;
        } else { /* one U+FFFD per maximal subpart, as Rust's from_utf8_lossy */
            memcpy(o + w, "\xef\xbf\xbd", 3);
            w += 3;
            i += sub;
        }
    }
    o[w] = '\0';
    free(b);
    *text = o;
    if (len)
        *len = w;
    return NB_OK;
}

nb_code nb_tokenizer_piece(const nb_tokenizer *t, int32_t id, const char **bytes, size_t *len,
                           nb_err *err)
{
    if (id < 0 || (size_t)id >= t->n_vocab)
        return nb_err_set(err, NB_EINVAL, "token id %d: out of range (vocabulary of %zu)", id,
                          t->n_vocab);
    *bytes = t->strs + t->piece_off[id];
    *len = t->piece_len[id];
    return NB_OK;
}

int32_t nb_tokenizer_find(const nb_tokenizer *t, const char *token)
{
    return vocab_find(t, token, strlen(token));
}

/* ---------------------------------------------------------------- chat */

nb_code nb_tokenizer_chat(const nb_tokenizer *t, const char *msg, char **out, nb_err *err)
{
    return nb_chat_render(t->chat, msg, out, err);
}

nb_chat_style nb_tokenizer_chat_style(const nb_tokenizer *t)
{
    return nb_chat_get_style(t->chat);
}

size_t nb_tokenizer_vocab(const nb_tokenizer *t)
{
    return t->n_vocab;
}

int32_t nb_tokenizer_bos(const nb_tokenizer *t)
{
    return t->bos;
}

int32_t nb_tokenizer_eos(const nb_tokenizer *t)
{
    return t->eos;
}

int nb_tokenizer_is_eog(const nb_tokenizer *t, int32_t id)
{
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return 1;
    return 0;
}

const char *nb_tokenizer_pre_name(const nb_tokenizer *t)
{
    return t->pre_name;
}
