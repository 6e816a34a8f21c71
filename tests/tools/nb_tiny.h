/* nb_tiny: test-only generator of a tiny deterministic Llama (GGUF in any
 * supported type, HF safetensors directories) plus file helpers for tests. */
#ifndef NB_TINY_H
#define NB_TINY_H

/* Header-only so the nb_gen_tiny tool and every test share one copy; all
 * functions are static inline so unused ones cost nothing. Test code, not
 * product code: it writes files the product reads, never the reverse. */

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_bf16.h"
#include "nb_tensor.h"

#define NB_TINY_LAYERS 2
#define NB_TINY_DIM 64
#define NB_TINY_HEADS 4
#define NB_TINY_KV_HEADS 2
#define NB_TINY_HEAD_DIM 16
#define NB_TINY_FFN 128
#define NB_TINY_CTX 256
#define NB_TINY_N_SPECIAL 3
#define NB_TINY_N_MERGES 41
#define NB_TINY_VOCAB (NB_TINY_N_SPECIAL + 256 + NB_TINY_N_MERGES) /* 300 */
#define NB_TINY_BOS 1 /* <|im_start|>, as SmolLM2-Instruct */
#define NB_TINY_EOS 2 /* <|im_end|> */
#define NB_TINY_ROPE_THETA 100000.0f
#define NB_TINY_RMS_EPS 1e-5f
#define NB_TINY_MAX_TENSORS (3 + 9 * NB_TINY_LAYERS)

typedef struct nb_tiny_opts {
    uint64_t seed;
    nb_ttype type;   /* GGUF weight type, or the safetensors dtype (F32/F16/BF16) */
    int untied;      /* write a separate output / lm_head weight */
    int no_permute;  /* GGUF: store q/k in HF order (a deliberately wrong file) */
    unsigned alignment; /* GGUF: 0 = default 32, not written; else general.alignment */
} nb_tiny_opts;

enum {
    NB_TINY_EMBD, NB_TINY_ONORM, NB_TINY_HEAD, NB_TINY_ANORM, NB_TINY_Q, NB_TINY_K, NB_TINY_V,
    NB_TINY_O, NB_TINY_FNORM, NB_TINY_GATE, NB_TINY_UP, NB_TINY_DOWN
};

typedef struct nb_tiny_tensor {
    int kind, layer;
    char gguf[64], hf[96];
    int64_t rows, cols; /* HF shape; rows == 1 and vec for norms */
    int vec;
} nb_tiny_tensor;

static const char *const nb_tiny_special[NB_TINY_N_SPECIAL] = {"<|endoftext|>", "<|im_start|>",
                                                               "<|im_end|>"};

/* The first merges are SmolLM2's own; the rest build a few whole words. */
static const char *const nb_tiny_merges[NB_TINY_N_MERGES] = {
    "Ġ t", "Ġ a", "i n", "h e", "Ġ Ġ", "r e", "o n", "e r", "Ġt he", "a t", "Ġ s",
    "Ġ o", "e n", "Ġ c", "e s", "Ġ w", "n d", "i t", "o r", "i s", "l l",
    "Ġ b", "Ġ f", "a n", "Ġ m", "Ġ p", "Ġ d", "in g", "Ġa nd", "Ġ h", "o u",
    "Ġ l", "H e", "He ll", "Hell o", "Ġw or", "l d", "Ġwor ld", "Ġ i", "Ġi s", "Ġ T"};

static const char nb_tiny_chat_template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

/* ---- growable byte buffer ---- */

typedef struct nb_tiny_buf {
    uint8_t *p;
    size_t n, cap;
    int oom;
    uint64_t count; /* GGUF KVs written so far */
} nb_tiny_buf;

static inline void nb_tiny_put(nb_tiny_buf *b, const void *d, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void nb_tiny_put_u32(nb_tiny_buf *b, uint32_t v) { nb_tiny_put(b, &v, 4); }
static inline void nb_tiny_put_u64(nb_tiny_buf *b, uint64_t v) { nb_tiny_put(b, &v, 8); }

static inline void nb_tiny_put_str(nb_tiny_buf *b, const char *s)
{
    nb_tiny_put_u64(b, strlen(s));
    nb_tiny_put(b, s, strlen(s));
}

static inline void nb_tiny_printf(nb_tiny_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void nb_tiny_printf(nb_tiny_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        nb_tiny_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    nb_tiny_put(b, big, (size_t)n);
    free(big);
}

/* A JSON string literal, quotes included. */
static inline void nb_tiny_json_str(nb_tiny_buf *b, const char *s)
{
    nb_tiny_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            nb_tiny_printf(b, "\\%c", c);
        else if (c == '\n')
            nb_tiny_put(b, "\\n", 2);
        else if (c < 0x20)
            nb_tiny_printf(b, "\\u%04x", c);
        else
            nb_tiny_put(b, s, 1);
    }
    nb_tiny_put(b, "\"", 1);
}

/* ---- files ---- */

static inline int nb_tiny_write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(d, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

static inline int nb_tiny_read_file(const char *path, uint8_t **d, size_t *n)
{
    *d = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    nb_tiny_buf b = {0};
    uint8_t chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        nb_tiny_put(&b, chunk, got);
    int bad = ferror(f) || b.oom;
    fclose(f);
    if (bad) {
        free(b.p);
        return -1;
    }
    *d = b.p;
    *n = b.n;
    return 0;
}

static inline int nb_tiny_file_exists(const char *path)
{
    return access(path, R_OK) == 0;
}

static inline int nb_tiny_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void nb_tiny_rmtree(const char *dir)
{
    nftw(dir, nb_tiny_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory under $TMPDIR (or /tmp) named after the test; fills dir. */
static inline int nb_tiny_mkdtemp(char *dir, size_t cap, const char *tag)
{
    const char *t = getenv("TMPDIR");
    if (snprintf(dir, cap, "%s/nb_%s_XXXXXX", t && *t ? t : "/tmp", tag) >= (int)cap)
        return -1;
    return mkdtemp(dir) ? 0 : -1;
}

/* Offset of needle in hay at or after from, or -1. */
static inline long nb_tiny_find(const uint8_t *hay, size_t n, const void *needle, size_t nl,
                                size_t from)
{
    for (size_t i = from; nl <= n && i <= n - nl; i++)
        if (!memcmp(hay + i, needle, nl))
            return (long)i;
    return -1;
}

/* ---- deterministic values ---- */

static inline uint64_t nb_tiny_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline int nb_tiny_tensors(const nb_tiny_opts *o, nb_tiny_tensor *t)
{
    static const struct {
        int kind;
        const char *gguf, *hf;
    } per_layer[9] = {
        {NB_TINY_ANORM, "attn_norm", "input_layernorm"},
        {NB_TINY_Q, "attn_q", "self_attn.q_proj"},
        {NB_TINY_K, "attn_k", "self_attn.k_proj"},
        {NB_TINY_V, "attn_v", "self_attn.v_proj"},
        {NB_TINY_O, "attn_output", "self_attn.o_proj"},
        {NB_TINY_FNORM, "ffn_norm", "post_attention_layernorm"},
        {NB_TINY_GATE, "ffn_gate", "mlp.gate_proj"},
        {NB_TINY_UP, "ffn_up", "mlp.up_proj"},
        {NB_TINY_DOWN, "ffn_down", "mlp.down_proj"},
    };
    const int64_t D = NB_TINY_DIM, Q = NB_TINY_HEADS * NB_TINY_HEAD_DIM,
                  KV = NB_TINY_KV_HEADS * NB_TINY_HEAD_DIM, F = NB_TINY_FFN;
    int n = 0;
    t[n] = (nb_tiny_tensor){NB_TINY_EMBD, -1, "token_embd.weight", "model.embed_tokens.weight",
                            NB_TINY_VOCAB, D, 0};
    n++;
    for (int l = 0; l < NB_TINY_LAYERS; l++)
        for (int k = 0; k < 9; k++) {
            nb_tiny_tensor *x = &t[n++];
            memset(x, 0, sizeof *x);
            x->kind = per_layer[k].kind;
            x->layer = l;
            snprintf(x->gguf, sizeof x->gguf, "blk.%d.%s.weight", l, per_layer[k].gguf);
            snprintf(x->hf, sizeof x->hf, "model.layers.%d.%s.weight", l, per_layer[k].hf);
            int64_t shapes[][2] = {{1, D}, {Q, D}, {KV, D}, {KV, D}, {D, Q},
                                   {1, D}, {F, D}, {F, D}, {D, F}};
            x->rows = shapes[k][0];
            x->cols = shapes[k][1];
            x->vec = x->rows == 1;
        }
    t[n++] = (nb_tiny_tensor){NB_TINY_ONORM, -1, "output_norm.weight", "model.norm.weight", 1, D,
                              1};
    if (o->untied)
        t[n++] = (nb_tiny_tensor){NB_TINY_HEAD, -1, "output.weight", "lm_head.weight",
                                  NB_TINY_VOCAB, D, 0};
    return n;
}

/* Logical (HF-order) value of element (r, c). Every value is a short
 * multiple of a power of two, exact in f16 and bf16, so F32/F16/BF16 files
 * of one seed hold identical weights. */
static inline float nb_tiny_value(const nb_tiny_opts *o, const nb_tiny_tensor *t, int64_t r,
                                  int64_t c)
{
    uint64_t id = (uint64_t)(t->kind * 64 + t->layer + 1);
    uint64_t h = nb_tiny_mix(o->seed ^ nb_tiny_mix(id * 0x100000001b3ull ^
                                                   ((uint64_t)r << 24) ^ (uint64_t)c));
    if (t->vec)
        return (float)(96 + (int)(h % 65)) / 128.0f; /* norms: 0.75 .. 1.25 */
    return (float)((int)(h % 255) - 127) / 256.0f;   /* weights: about +-0.5 */
}

static inline void nb_tiny_hf_row_values(const nb_tiny_opts *o, const nb_tiny_tensor *t,
                                         int64_t r, float *dst)
{
    for (int64_t c = 0; c < t->cols; c++)
        dst[c] = nb_tiny_value(o, t, r, c);
}

/* GGUF's per-tensor type, as llama.cpp quantizes: vectors stay F32; with
 * 4-bit types the embedding is Q8_0, like the real SmolLM2 Q4_1 file. */
static inline nb_ttype nb_tiny_gguf_type(const nb_tiny_opts *o, const nb_tiny_tensor *t)
{
    if (t->vec)
        return NB_TT_F32;
    if (t->kind == NB_TINY_EMBD && (o->type == NB_TT_Q4_0 || o->type == NB_TT_Q4_1))
        return NB_TT_Q8_0;
    return o->type;
}

/* HF row held in stored GGUF row s: llama.cpp's converter interleaves the
 * two rotary halves of each q/k head (stored h*hd + 2i + j = HF h*hd + j*hd/2 + i). */
static inline int64_t nb_tiny_hf_row_of_stored(const nb_tiny_opts *o, const nb_tiny_tensor *t,
                                               int64_t s)
{
    if (o->no_permute || (t->kind != NB_TINY_Q && t->kind != NB_TINY_K))
        return s;
    int64_t hd = NB_TINY_HEAD_DIM, half = hd / 2;
    int64_t h = s / hd, rem = s % hd, i = rem / 2, j = rem % 2;
    return h * hd + j * half + i;
}

/* ---- encoding ---- */

/* fp32 -> IEEE half, round to nearest even, subnormals included. */
static inline uint16_t nb_tiny_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return sign | 0x7e00u;
    if (ax >= 0x477ff000u) /* >= 65520 rounds to infinity */
        return sign | 0x7c00u;
    if (ax < 0x38800000u) { /* below 2^-14: subnormal half, exact scaling by 2^24 */
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax & 0x7fffffu) >> 13);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return sign | (uint16_t)h;
}

/* ggml's reference quantizers (quantize_row_*_ref); only validity matters,
 * tests compare against a hand dequantization of the bytes. */
static inline void nb_tiny_encode_row(nb_ttype type, const float *x, int64_t n, uint8_t *dst)
{
    switch (type) {
    case NB_TT_F32:
        memcpy(dst, x, (size_t)n * 4);
        return;
    case NB_TT_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = nb_tiny_f32_to_f16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        return;
    case NB_TT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = nb_f32_to_bf16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        return;
    default:
        break;
    }
    for (int64_t b = 0; b < n / 32; b++) {
        const float *v = x + 32 * b;
        if (type == NB_TT_Q8_0) {
            uint8_t *o = dst + 34 * b;
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(v[j]));
            float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t dh = nb_tiny_f32_to_f16(d);
            memcpy(o, &dh, 2);
            for (int j = 0; j < 32; j++)
                o[2 + j] = (uint8_t)(int8_t)roundf(v[j] * id);
        } else if (type == NB_TT_Q4_0) {
            uint8_t *o = dst + 18 * b;
            float amax = 0, max = 0;
            for (int j = 0; j < 32; j++)
                if (fabsf(v[j]) > amax) {
                    amax = fabsf(v[j]);
                    max = v[j];
                }
            float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t dh = nb_tiny_f32_to_f16(d);
            memcpy(o, &dh, 2);
            for (int j = 0; j < 16; j++) {
                int q0 = (int)(v[j] * id + 8.5f), q1 = (int)(v[j + 16] * id + 8.5f);
                q0 = q0 > 15 ? 15 : q0;
                q1 = q1 > 15 ? 15 : q1;
                o[2 + j] = (uint8_t)(q0 | q1 << 4);
            }
        } else { /* Q4_1 */
            uint8_t *o = dst + 20 * b;
            float mn = v[0], mx = v[0];
            for (int j = 1; j < 32; j++) {
                mn = fminf(mn, v[j]);
                mx = fmaxf(mx, v[j]);
            }
            float d = (mx - mn) / 15.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t dh = nb_tiny_f32_to_f16(d), mh = nb_tiny_f32_to_f16(mn);
            memcpy(o, &dh, 2);
            memcpy(o + 2, &mh, 2);
            for (int j = 0; j < 16; j++) {
                int q0 = (int)((v[j] - mn) * id + 0.5f), q1 = (int)((v[j + 16] - mn) * id + 0.5f);
                q0 = q0 > 15 ? 15 : q0;
                q1 = q1 > 15 ? 15 : q1;
                o[4 + j] = (uint8_t)(q0 | q1 << 4);
            }
        }
    }
}

static inline size_t nb_tiny_row_bytes(nb_ttype type, int64_t n)
{
    return (size_t)(n / nb_ttype_block_elems(type)) * (size_t)nb_ttype_block_bytes(type);
}

/* Bytes of one tensor as stored in the GGUF (malloc'ed): rows in stored
 * order, each encoded in nb_tiny_gguf_type. */
static inline uint8_t *nb_tiny_gguf_bytes(const nb_tiny_opts *o, const nb_tiny_tensor *t,
                                          size_t *len)
{
    nb_ttype ty = nb_tiny_gguf_type(o, t);
    size_t rb = nb_tiny_row_bytes(ty, t->cols);
    uint8_t *d = malloc(rb * (size_t)t->rows);
    float *row = malloc(sizeof(float) * (size_t)t->cols);
    if (!d || !row) {
        free(d);
        free(row);
        return NULL;
    }
    for (int64_t s = 0; s < t->rows; s++) {
        nb_tiny_hf_row_values(o, t, nb_tiny_hf_row_of_stored(o, t, s), row);
        nb_tiny_encode_row(ty, row, t->cols, d + rb * (size_t)s);
    }
    free(row);
    *len = rb * (size_t)t->rows;
    return d;
}

/* ---- vocabulary ---- */

typedef struct nb_tiny_vocab {
    char tok[NB_TINY_VOCAB][32];
    int n;
} nb_tiny_vocab;

static inline void nb_tiny_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        dst[1] = 0;
    } else { /* GPT-2 byte symbols are all below U+0800 */
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        dst[2] = 0;
    }
}

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to
 * U+0100 onward; byte tokens appear in that order, as in SmolLM2's vocab. */
static inline void nb_tiny_build_vocab(nb_tiny_vocab *v)
{
    v->n = 0;
    for (int i = 0; i < NB_TINY_N_SPECIAL; i++)
        snprintf(v->tok[v->n++], 32, "%s", nb_tiny_special[i]);
    int printable[256] = {0};
    for (int b = '!'; b <= '~'; b++)
        printable[b] = 1;
    for (int b = 0xa1; b <= 0xac; b++)
        printable[b] = 1;
    for (int b = 0xae; b <= 0xff; b++)
        printable[b] = 1;
    for (int b = 0; b < 256; b++)
        if (printable[b])
            nb_tiny_utf8(v->tok[v->n++], (unsigned)b);
    unsigned next = 256;
    for (int b = 0; b < 256; b++)
        if (!printable[b])
            nb_tiny_utf8(v->tok[v->n++], next++);
    for (int i = 0; i < NB_TINY_N_MERGES; i++) {
        const char *sp = strchr(nb_tiny_merges[i], ' ');
        snprintf(v->tok[v->n++], 32, "%.*s%s", (int)(sp - nb_tiny_merges[i]), nb_tiny_merges[i],
                 sp + 1);
    }
}

/* ---- GGUF ---- */

static inline void nb_tiny_kv_hdr(nb_tiny_buf *b, const char *key, uint32_t type)
{
    nb_tiny_put_str(b, key);
    nb_tiny_put_u32(b, type);
    b->count++;
}

static inline void nb_tiny_kv_u32(nb_tiny_buf *b, const char *key, uint32_t v)
{
    nb_tiny_kv_hdr(b, key, 4);
    nb_tiny_put_u32(b, v);
}

static inline void nb_tiny_kv_f32(nb_tiny_buf *b, const char *key, float v)
{
    nb_tiny_kv_hdr(b, key, 6);
    nb_tiny_put(b, &v, 4);
}

static inline void nb_tiny_kv_bool(nb_tiny_buf *b, const char *key, int v)
{
    uint8_t x = (uint8_t)(v != 0);
    nb_tiny_kv_hdr(b, key, 7);
    nb_tiny_put(b, &x, 1);
}

static inline void nb_tiny_kv_str(nb_tiny_buf *b, const char *key, const char *v)
{
    nb_tiny_kv_hdr(b, key, 8);
    nb_tiny_put_str(b, v);
}

static inline uint32_t nb_tiny_ggml_type(nb_ttype t)
{
    static const uint32_t m[NB_TT_COUNT] = {[NB_TT_F32] = 0, [NB_TT_F16] = 1, [NB_TT_BF16] = 30,
                                            [NB_TT_Q8_0] = 8, [NB_TT_Q4_0] = 2, [NB_TT_Q4_1] = 3};
    return m[t];
}

/* general.file_type (llama_ftype) for the dominant type. */
static inline uint32_t nb_tiny_ftype(nb_ttype t)
{
    static const uint32_t m[NB_TT_COUNT] = {[NB_TT_F32] = 0, [NB_TT_F16] = 1, [NB_TT_BF16] = 32,
                                            [NB_TT_Q8_0] = 7, [NB_TT_Q4_0] = 2, [NB_TT_Q4_1] = 3};
    return m[t];
}

/* The whole GGUF file in memory (malloc'ed into out). 0 on success. */
static inline int nb_tiny_gguf_image(const nb_tiny_opts *o, nb_tiny_buf *out)
{
    nb_tiny_tensor ts[NB_TINY_MAX_TENSORS];
    int nt = nb_tiny_tensors(o, ts);
    nb_tiny_vocab *v = malloc(sizeof *v);
    if (!v)
        return -1;
    nb_tiny_build_vocab(v);
    unsigned align = o->alignment ? o->alignment : 32;
    int quant = o->type == NB_TT_Q8_0 || o->type == NB_TT_Q4_0 || o->type == NB_TT_Q4_1;

    nb_tiny_buf b = {0};
    nb_tiny_put(&b, "GGUF", 4);
    nb_tiny_put_u32(&b, 3);
    nb_tiny_put_u64(&b, (uint64_t)nt);
    nb_tiny_put_u64(&b, 0); /* n_kv, patched once the KVs are written */
    nb_tiny_kv_str(&b, "general.architecture", "llama");
    nb_tiny_kv_str(&b, "general.type", "model");
    nb_tiny_kv_str(&b, "general.name", "tiny-llama");
    if (o->alignment)
        nb_tiny_kv_u32(&b, "general.alignment", o->alignment);
    nb_tiny_kv_u32(&b, "llama.block_count", NB_TINY_LAYERS);
    nb_tiny_kv_u32(&b, "llama.context_length", NB_TINY_CTX);
    nb_tiny_kv_u32(&b, "llama.embedding_length", NB_TINY_DIM);
    nb_tiny_kv_u32(&b, "llama.feed_forward_length", NB_TINY_FFN);
    nb_tiny_kv_u32(&b, "llama.attention.head_count", NB_TINY_HEADS);
    nb_tiny_kv_u32(&b, "llama.attention.head_count_kv", NB_TINY_KV_HEADS);
    nb_tiny_kv_f32(&b, "llama.rope.freq_base", NB_TINY_ROPE_THETA);
    nb_tiny_kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", NB_TINY_RMS_EPS);
    nb_tiny_kv_u32(&b, "general.file_type", nb_tiny_ftype(o->type));
    nb_tiny_kv_u32(&b, "llama.vocab_size", NB_TINY_VOCAB);
    nb_tiny_kv_u32(&b, "llama.rope.dimension_count", NB_TINY_HEAD_DIM);
    nb_tiny_kv_bool(&b, "tokenizer.ggml.add_space_prefix", 0);
    nb_tiny_kv_bool(&b, "tokenizer.ggml.add_bos_token", 0);
    nb_tiny_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    nb_tiny_kv_str(&b, "tokenizer.ggml.pre", "smollm");
    nb_tiny_kv_hdr(&b, "tokenizer.ggml.tokens", 9);
    nb_tiny_put_u32(&b, 8);
    nb_tiny_put_u64(&b, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++)
        nb_tiny_put_str(&b, v->tok[i]);
    nb_tiny_kv_hdr(&b, "tokenizer.ggml.token_type", 9);
    nb_tiny_put_u32(&b, 5);
    nb_tiny_put_u64(&b, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++)
        nb_tiny_put_u32(&b, i < NB_TINY_N_SPECIAL ? 3u : 1u);
    nb_tiny_kv_hdr(&b, "tokenizer.ggml.merges", 9);
    nb_tiny_put_u32(&b, 8);
    nb_tiny_put_u64(&b, NB_TINY_N_MERGES);
    for (int i = 0; i < NB_TINY_N_MERGES; i++)
        nb_tiny_put_str(&b, nb_tiny_merges[i]);
    nb_tiny_kv_u32(&b, "tokenizer.ggml.bos_token_id", NB_TINY_BOS);
    nb_tiny_kv_u32(&b, "tokenizer.ggml.eos_token_id", NB_TINY_EOS);
    nb_tiny_kv_u32(&b, "tokenizer.ggml.unknown_token_id", 0);
    nb_tiny_kv_u32(&b, "tokenizer.ggml.padding_token_id", NB_TINY_EOS);
    nb_tiny_kv_str(&b, "tokenizer.chat_template", nb_tiny_chat_template);
    if (quant)
        nb_tiny_kv_u32(&b, "general.quantization_version", 2);
    free(v);
    if (!b.oom)
        memcpy(b.p + 16, &b.count, 8);

    uint64_t off = 0;
    size_t sizes[NB_TINY_MAX_TENSORS];
    for (int i = 0; i < nt; i++) {
        const nb_tiny_tensor *t = &ts[i];
        nb_tiny_put_str(&b, t->gguf);
        nb_tiny_put_u32(&b, t->vec ? 1 : 2);
        nb_tiny_put_u64(&b, (uint64_t)t->cols);
        if (!t->vec)
            nb_tiny_put_u64(&b, (uint64_t)t->rows);
        nb_ttype ty = nb_tiny_gguf_type(o, t);
        nb_tiny_put_u32(&b, nb_tiny_ggml_type(ty));
        nb_tiny_put_u64(&b, off);
        sizes[i] = nb_tiny_row_bytes(ty, t->cols) * (size_t)t->rows;
        off += (sizes[i] + align - 1) / align * align;
    }
    static const uint8_t zeros[256];
    int rc = 0;
    for (int i = 0; i < nt && !rc; i++) {
        nb_tiny_put(&b, zeros, (align - b.n % align) % align);
        size_t len;
        uint8_t *d = nb_tiny_gguf_bytes(o, &ts[i], &len);
        if (!d) {
            rc = -1;
            break;
        }
        nb_tiny_put(&b, d, len);
        free(d);
    }
    if (rc || b.oom) {
        free(b.p);
        return -1;
    }
    *out = b;
    return 0;
}

static inline int nb_tiny_write_gguf(const nb_tiny_opts *o, const char *path)
{
    nb_tiny_buf b;
    if (nb_tiny_gguf_image(o, &b))
        return -1;
    int rc = nb_tiny_write_file(path, b.p, b.n);
    free(b.p);
    return rc;
}

/* ---- HF directory ---- */

static inline const char *nb_tiny_st_dtype(nb_ttype t)
{
    return t == NB_TT_BF16 ? "BF16" : t == NB_TT_F16 ? "F16" : "F32";
}

/* One safetensors file holding tensors ts[first, last). */
static inline int nb_tiny_write_st(const nb_tiny_opts *o, const char *path,
                                   const nb_tiny_tensor *ts, int first, int last)
{
    size_t esz = o->type == NB_TT_F32 ? 4 : 2;
    nb_tiny_buf h = {0}, d = {0};
    nb_tiny_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    float *row = malloc(sizeof(float) * 4096);
    uint8_t *enc = malloc(4 * 4096);
    for (int i = first; i < last && row && enc; i++) {
        const nb_tiny_tensor *t = &ts[i];
        size_t begin = d.n, len = (size_t)(t->rows * t->cols) * esz;
        nb_tiny_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":", t->hf, nb_tiny_st_dtype(o->type));
        if (t->vec)
            nb_tiny_printf(&h, "[%lld]", (long long)t->cols);
        else
            nb_tiny_printf(&h, "[%lld,%lld]", (long long)t->rows, (long long)t->cols);
        nb_tiny_printf(&h, ",\"data_offsets\":[%zu,%zu]}", begin, begin + len);
        for (int64_t r = 0; r < t->rows; r++) {
            nb_tiny_hf_row_values(o, t, r, row);
            nb_tiny_encode_row(o->type, row, t->cols, enc);
            nb_tiny_put(&d, enc, (size_t)t->cols * esz);
        }
    }
    int bad = !row || !enc;
    free(row);
    free(enc);
    nb_tiny_put(&h, "}", 1);
    while (h.n % 8) /* the reference writer pads the header with spaces */
        nb_tiny_put(&h, " ", 1);
    nb_tiny_buf f = {0};
    nb_tiny_put_u64(&f, h.n);
    nb_tiny_put(&f, h.p, h.n);
    nb_tiny_put(&f, d.p, d.n);
    bad |= h.oom || d.oom || f.oom;
    int rc = bad ? -1 : nb_tiny_write_file(path, f.p, f.n);
    free(h.p);
    free(d.p);
    free(f.p);
    return rc;
}

static inline int nb_tiny_write_buf(const char *dir, const char *name, nb_tiny_buf *b)
{
    char p[8192];
    int bad = snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p;
    int rc = b->oom || bad ? -1 : nb_tiny_write_file(p, b->p, b->n);
    free(b->p);
    memset(b, 0, sizeof *b);
    return rc;
}

static inline int nb_tiny_write_tokenizer(const char *dir)
{
    nb_tiny_vocab *v = malloc(sizeof *v);
    if (!v)
        return -1;
    nb_tiny_build_vocab(v);
    nb_tiny_buf b = {0};
    nb_tiny_printf(&b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
                       "\"added_tokens\":[");
    for (int i = 0; i < NB_TINY_N_SPECIAL; i++)
        nb_tiny_printf(&b, "%s{\"id\":%d,\"content\":\"%s\",\"single_word\":false,"
                           "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
                           "\"special\":true}", i ? "," : "", i, nb_tiny_special[i]);
    nb_tiny_printf(&b, "],\"normalizer\":null,"
                       "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                       "{\"type\":\"Digits\",\"individual_digits\":true},"
                       "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                       "\"trim_offsets\":true,\"use_regex\":true}]},"
                       "\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                       "\"trim_offsets\":false,\"use_regex\":true},"
                       "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                       "\"trim_offsets\":true,\"use_regex\":true},"
                       "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
                       "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
                       "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,"
                       "\"vocab\":{");
    for (int i = 0; i < v->n; i++) {
        if (i)
            nb_tiny_put(&b, ",", 1);
        nb_tiny_json_str(&b, v->tok[i]);
        nb_tiny_printf(&b, ":%d", i);
    }
    nb_tiny_printf(&b, "},\"merges\":[");
    for (int i = 0; i < NB_TINY_N_MERGES; i++) {
        if (i)
            nb_tiny_put(&b, ",", 1);
        nb_tiny_json_str(&b, nb_tiny_merges[i]);
    }
    nb_tiny_printf(&b, "]}}\n");
    free(v);
    if (nb_tiny_write_buf(dir, "tokenizer.json", &b))
        return -1;
    nb_tiny_printf(&b, "{\"add_prefix_space\":false,\"added_tokens_decoder\":{");
    for (int i = 0; i < NB_TINY_N_SPECIAL; i++)
        nb_tiny_printf(&b, "%s\"%d\":{\"content\":\"%s\",\"lstrip\":false,\"normalized\":false,"
                           "\"rstrip\":false,\"single_word\":false,\"special\":true}",
                       i ? "," : "", i, nb_tiny_special[i]);
    nb_tiny_printf(&b, "},\"additional_special_tokens\":[\"<|im_start|>\",\"<|im_end|>\"],"
                       "\"bos_token\":\"<|im_start|>\",\"eos_token\":\"<|im_end|>\","
                       "\"pad_token\":\"<|im_end|>\",\"unk_token\":\"<|endoftext|>\","
                       "\"clean_up_tokenization_spaces\":false,\"model_max_length\":%d,"
                       "\"tokenizer_class\":\"GPT2Tokenizer\",\"vocab_size\":%d,"
                       "\"chat_template\":", NB_TINY_CTX, NB_TINY_VOCAB);
    nb_tiny_json_str(&b, nb_tiny_chat_template);
    nb_tiny_printf(&b, "}\n");
    return nb_tiny_write_buf(dir, "tokenizer_config.json", &b);
}

static inline int nb_tiny_write_config(const nb_tiny_opts *o, const char *dir)
{
    nb_tiny_buf b = {0};
    nb_tiny_printf(&b,
                   "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n"
                   "  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n"
                   "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"pad_token_id\": %d,\n"
                   "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n"
                   "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n"
                   "  \"max_position_embeddings\": %d,\n  \"mlp_bias\": false,\n"
                   "  \"model_type\": \"llama\",\n  \"num_attention_heads\": %d,\n"
                   "  \"num_hidden_layers\": %d,\n  \"num_key_value_heads\": %d,\n"
                   "  \"pretraining_tp\": 1,\n  \"rms_norm_eps\": 1e-05,\n"
                   "  \"rope_scaling\": null,\n  \"rope_theta\": 100000.0,\n"
                   "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n"
                   "  \"use_cache\": true,\n  \"vocab_size\": %d\n}\n",
                   NB_TINY_BOS, NB_TINY_EOS, NB_TINY_EOS, NB_TINY_HEAD_DIM, NB_TINY_DIM,
                   NB_TINY_FFN, NB_TINY_CTX, NB_TINY_HEADS, NB_TINY_LAYERS, NB_TINY_KV_HEADS,
                   o->untied ? "false" : "true",
                   o->type == NB_TT_BF16 ? "bfloat16" : o->type == NB_TT_F16 ? "float16"
                                                                               : "float32",
                   NB_TINY_VOCAB);
    return nb_tiny_write_buf(dir, "config.json", &b);
}

/* config.json, tokenizer files and weights (o->type must be F32/F16/BF16);
 * shards >= 2 writes model-0000i-of-0000n.safetensors plus an index. */
static inline int nb_tiny_write_hf(const nb_tiny_opts *o, const char *dir, int shards)
{
    if (o->type != NB_TT_F32 && o->type != NB_TT_F16 && o->type != NB_TT_BF16)
        return -1;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    if (nb_tiny_write_config(o, dir) || nb_tiny_write_tokenizer(dir))
        return -1;
    nb_tiny_tensor ts[NB_TINY_MAX_TENSORS];
    int nt = nb_tiny_tensors(o, ts);
    char p[8192];
    if (strlen(dir) > 4096)
        return -1;
    if (shards < 2) {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        return nb_tiny_write_st(o, p, ts, 0, nt);
    }
    if (shards > nt)
        return -1;
    nb_tiny_buf idx = {0};
    nb_tiny_printf(&idx, "{\n  \"metadata\": {\"total_size\": 0},\n  \"weight_map\": {");
    for (int s = 0; s < shards; s++) {
        int first = nt * s / shards, last = nt * (s + 1) / shards;
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
        snprintf(p, sizeof p, "%s/%s", dir, name);
        if (nb_tiny_write_st(o, p, ts, first, last)) {
            free(idx.p);
            return -1;
        }
        for (int i = first; i < last; i++)
            nb_tiny_printf(&idx, "%s\n    \"%s\": \"%s\"", i ? "," : "", ts[i].hf, name);
    }
    nb_tiny_printf(&idx, "\n  }\n}\n");
    return nb_tiny_write_buf(dir, "model.safetensors.index.json", &idx);
}

#endif
