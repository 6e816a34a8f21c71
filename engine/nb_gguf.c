/* nb_gguf: GGUF v2/v3 reader. The whole file is validated at open, so every
 * getter afterwards is a bounds-safe hash lookup into the private mapping. */
#include "nb_gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_hash.h"
#include "nb_mmap.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_HEADER_BYTES 24     /* magic, version, n_tensors, n_kv */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT (1u << 30)
#define GGUF_MAX_DIMS 4          /* GGML_MAX_DIMS */
#define GGUF_MAX_KEY 65535       /* the spec's bound on key length */
#define GGUF_MAX_ARRAY_DEPTH 4   /* arrays of arrays are legal; bound the recursion */
/* Smallest encodings, used to reject counts that cannot fit in the bytes left
 * before anything is allocated: a KV is key length + 1 key byte + type + a
 * 1-byte value; a tensor info is name length + 1 name byte + n_dims + one
 * dim + type + offset. */
#define GGUF_MIN_KV_BYTES (8 + 1 + 4 + 1)
#define GGUF_MIN_TINFO_BYTES (8 + 1 + 4 + 8 + 4 + 8)

typedef struct kv {
    nb_gguf_str key;
    nb_gguf_vtype type;
    const uint8_t *val;  /* scalar bytes, string length field, or first array element */
    nb_gguf_vtype elem;  /* arrays only */
    uint64_t n;          /* arrays only */
    nb_gguf_str *strs;   /* string arrays: one view per item, built at open */
} kv;

struct nb_gguf {
    char *path;
    nb_mmap mm;
    const uint8_t *map; /* mm.data */
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    kv *kvs;
    uint64_t n_tensors;
    nb_tensor *tensors;
    size_t kv_cap, t_cap;        /* hash table sizes (powers of two) */
    uint64_t *kv_slot, *t_slot;  /* index + 1; 0 = empty */
    uint64_t alignment;
    size_t data_off;
};

/* ---- reading with bounds checks ---- */

typedef struct rd {
    const uint8_t *p;
    size_t pos, size;
    const char *path;
    nb_err *err;
} rd;

static size_t rd_left(const rd *r)
{
    return r->size - r->pos;
}

static nb_code rd_need(rd *r, size_t n, const char *what)
{
    if (n > rd_left(r))
        return nb_err_set(r->err, NB_EFORMAT,
                          "%s: %s at offset %zu needs %zu bytes: file ends at %zu (truncated?)",
                          r->path, what, r->pos, n, r->size);
    return NB_OK;
}

/* n raw bytes into v: GGUF is little-endian, as is every host we run on. */
static nb_code rd_bytes(rd *r, void *v, size_t n, const char *what)
{
    nb_code rc = rd_need(r, n, what);
    if (rc)
        return rc;
    memcpy(v, r->p + r->pos, n);
    r->pos += n;
    return NB_OK;
}

static nb_code rd_u32(rd *r, uint32_t *v, const char *what)
{
    return rd_bytes(r, v, sizeof *v, what);
}

static nb_code rd_u64(rd *r, uint64_t *v, const char *what)
{
    return rd_bytes(r, v, sizeof *v, what);
}

static nb_code rd_str(rd *r, nb_gguf_str *s, const char *what)
{
    uint64_t len;
    size_t at = r->pos;
    nb_code rc = rd_u64(r, &len, what);
    if (rc)
        return rc;
    if (len > rd_left(r))
        return nb_err_set(r->err, NB_EFORMAT,
                          "%s: %s at offset %zu: string length %" PRIu64
                          " runs past end of file (%zu bytes)",
                          r->path, what, at, len, r->size);
    s->ptr = (const char *)r->p + r->pos;
    s->len = len;
    r->pos += (size_t)len;
    return NB_OK;
}

/* ---- value types ---- */

static const char *vtype_names[] = {"uint8", "int8",  "uint16", "int16",  "uint32",
                                    "int32", "float32", "bool", "string", "array",
                                    "uint64", "int64", "float64"};

const char *nb_gguf_vtype_name(nb_gguf_vtype t)
{
    return (unsigned)t < sizeof vtype_names / sizeof vtype_names[0] ? vtype_names[t] : "?";
}

/* Bytes of a fixed-size value; 0 for strings, arrays and unknown types. */
static size_t scalar_bytes(uint32_t t)
{
    switch (t) {
    case NB_GGUF_UINT8: case NB_GGUF_INT8: case NB_GGUF_BOOL: return 1;
    case NB_GGUF_UINT16: case NB_GGUF_INT16: return 2;
    case NB_GGUF_UINT32: case NB_GGUF_INT32: case NB_GGUF_FLOAT32: return 4;
    case NB_GGUF_UINT64: case NB_GGUF_INT64: case NB_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static int is_int_type(nb_gguf_vtype t)
{
    return t <= NB_GGUF_INT32 || t == NB_GGUF_UINT64 || t == NB_GGUF_INT64;
}

/* Integer value at p as a sign flag and magnitude, so no width is lost. */
static void load_int(nb_gguf_vtype t, const uint8_t *p, int *neg, uint64_t *mag)
{
    int64_t s = 0;
    uint64_t u = 0;
    int is_signed = 1;
    switch (t) {
    case NB_GGUF_UINT8: u = p[0]; is_signed = 0; break;
    case NB_GGUF_INT8: s = (int8_t)p[0]; break;
    case NB_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); u = v; is_signed = 0; break; }
    case NB_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); s = v; break; }
    case NB_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); u = v; is_signed = 0; break; }
    case NB_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); s = v; break; }
    case NB_GGUF_UINT64: memcpy(&u, p, 8); is_signed = 0; break;
    case NB_GGUF_INT64: memcpy(&s, p, 8); break;
    default: break;
    }
    if (is_signed) {
        *neg = s < 0;
        *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    } else {
        *neg = 0;
        *mag = u;
    }
}

static double load_float(nb_gguf_vtype t, const uint8_t *p)
{
    if (t == NB_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    double d;
    memcpy(&d, p, 8);
    return d;
}

/* Validates one value of type t (recursing into arrays) and steps over it.
 * Counts are checked against the bytes left before any work per element,
 * so parsing stays linear in the file size. */
static nb_code skip_value(rd *r, uint32_t t, int depth, const char *what)
{
    size_t sb = scalar_bytes(t);
    if (sb) {
        nb_code rc = rd_need(r, sb, what);
        if (rc)
            return rc;
        if (t == NB_GGUF_BOOL && r->p[r->pos] > 1)
            return nb_err_set(r->err, NB_EFORMAT, "%s: %s at offset %zu: bool byte is %u, not 0/1",
                              r->path, what, r->pos, r->p[r->pos]);
        r->pos += sb;
        return NB_OK;
    }
    if (t == NB_GGUF_STRING) {
        nb_gguf_str s;
        return rd_str(r, &s, what);
    }
    if (t != NB_GGUF_ARRAY)
        return nb_err_set(r->err, NB_EFORMAT, "%s: %s at offset %zu: unknown value type %" PRIu32,
                          r->path, what, r->pos - 4, t);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return nb_err_set(r->err, NB_EFORMAT, "%s: %s: arrays nested deeper than %d",
                          r->path, what, GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    nb_code rc;
    if ((rc = rd_u32(r, &et, what)) || (rc = rd_u64(r, &n, what)))
        return rc;
    size_t esb = scalar_bytes(et);
    size_t min = esb ? esb : et == NB_GGUF_STRING ? 8 : et == NB_GGUF_ARRAY ? 12 : 0;
    if (!min)
        return nb_err_set(r->err, NB_EFORMAT, "%s: %s: unknown array element type %" PRIu32,
                          r->path, what, et);
    if (n > rd_left(r) / min)
        return nb_err_set(r->err, NB_EFORMAT,
                          "%s: %s: array of %" PRIu64 " %s elements cannot fit in the %zu bytes"
                          " left in the file",
                          r->path, what, n, nb_gguf_vtype_name(et), rd_left(r));
    if (esb && et != NB_GGUF_BOOL) {
        r->pos += (size_t)n * esb;
        return NB_OK;
    }
    for (uint64_t i = 0; i < n; i++)
        if ((rc = skip_value(r, et, depth + 1, what)))
            return rc;
    return NB_OK;
}

/* ---- name tables ---- */

static size_t table_cap(uint64_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    return cap;
}

typedef const char *(*name_fn)(const nb_gguf *g, uint64_t i, size_t *len);

static const char *kv_name(const nb_gguf *g, uint64_t i, size_t *len)
{
    *len = (size_t)g->kvs[i].key.len;
    return g->kvs[i].key.ptr;
}

static const char *tensor_name(const nb_gguf *g, uint64_t i, size_t *len)
{
    *len = strlen(g->tensors[i].name);
    return g->tensors[i].name;
}

/* Index of name in the table, or UINT64_MAX; *slot gets the probe end. */
static uint64_t table_find(const nb_gguf *g, const uint64_t *tab, size_t cap, name_fn fn,
                           const char *name, size_t len, size_t *slot)
{
    size_t s = (size_t)nb_hash_bytes(name, len, NB_HASH_SEED) & (cap - 1);
    for (; tab[s]; s = (s + 1) & (cap - 1)) {
        size_t l;
        const char *p = fn(g, tab[s] - 1, &l);
        if (l == len && memcmp(p, name, len) == 0) {
            *slot = s;
            return tab[s] - 1;
        }
    }
    *slot = s;
    return UINT64_MAX;
}

/* ---- open ---- */

static nb_code map_file(nb_gguf *g, const char *path, nb_err *err)
{
    nb_code rc = nb_mmap_open(path, &g->mm, err);
    if (rc)
        return rc;
    if (g->mm.size < GGUF_HEADER_BYTES)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: %zu bytes is too small for a GGUF header (%d bytes)", path,
                          g->mm.size, GGUF_HEADER_BYTES);
    g->map = g->mm.data;
    g->size = g->mm.size;
    return NB_OK;
}

static nb_code parse_kvs(nb_gguf *g, rd *r)
{
    char what[192];
    nb_code rc;
    if (g->n_kv > rd_left(r) / GGUF_MIN_KV_BYTES)
        return nb_err_set(r->err, NB_EFORMAT,
                          "%s: header: n_kv = %" PRIu64 " metadata entries cannot fit in the"
                          " %zu bytes left in the file",
                          g->path, g->n_kv, rd_left(r));
    g->kv_cap = table_cap(g->n_kv);
    g->kvs = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kvs);
    g->kv_slot = calloc(g->kv_cap, sizeof *g->kv_slot);
    if (!g->kvs || !g->kv_slot)
        return nb_err_set(r->err, NB_ENOMEM, "%s: out of memory for %" PRIu64 " metadata entries",
                          g->path, g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        kv *e = &g->kvs[i];
        snprintf(what, sizeof what, "metadata entry %" PRIu64 " key", i);
        if ((rc = rd_str(r, &e->key, what)))
            return rc;
        if (e->key.len == 0 || e->key.len > GGUF_MAX_KEY || memchr(e->key.ptr, 0, e->key.len))
            return nb_err_set(r->err, NB_EFORMAT,
                              "%s: metadata entry %" PRIu64 ": key of %" PRIu64
                              " bytes is empty, longer than %d or holds a NUL byte",
                              g->path, i, e->key.len, GGUF_MAX_KEY);
        int kl = e->key.len > 64 ? 64 : (int)e->key.len;
        size_t slot;
        if (table_find(g, g->kv_slot, g->kv_cap, kv_name, e->key.ptr, (size_t)e->key.len,
                       &slot) != UINT64_MAX)
            return nb_err_set(r->err, NB_EFORMAT, "%s: metadata key '%.*s' appears twice",
                              g->path, kl, e->key.ptr);
        snprintf(what, sizeof what, "metadata '%.*s'", kl, e->key.ptr);
        uint32_t t;
        if ((rc = rd_u32(r, &t, what)))
            return rc;
        e->type = (nb_gguf_vtype)t;
        if (t == NB_GGUF_ARRAY) {
            uint32_t et;
            if ((rc = rd_u32(r, &et, what)) || (rc = rd_u64(r, &e->n, what)))
                return rc;
            e->elem = (nb_gguf_vtype)et;
            e->val = r->p + r->pos;
            if (et == NB_GGUF_STRING) {
                /* views are built now so tokenizers get O(1) access per item */
                if (e->n > rd_left(r) / 8)
                    return nb_err_set(r->err, NB_EFORMAT,
                                      "%s: %s: array of %" PRIu64 " strings cannot fit in the"
                                      " %zu bytes left in the file",
                                      g->path, what, e->n, rd_left(r));
                if (e->n) {
                    e->strs = malloc((size_t)e->n * sizeof *e->strs);
                    if (!e->strs)
                        return nb_err_set(r->err, NB_ENOMEM, "%s: %s: out of memory for %" PRIu64
                                          " strings", g->path, what, e->n);
                }
                for (uint64_t j = 0; j < e->n; j++)
                    if ((rc = rd_str(r, &e->strs[j], what)))
                        return rc;
            } else {
                /* rewind over the element header and validate generically */
                r->pos -= 12;
                if ((rc = skip_value(r, NB_GGUF_ARRAY, 0, what)))
                    return rc;
            }
        } else {
            e->val = r->p + r->pos;
            if ((rc = skip_value(r, t, 0, what)))
                return rc;
        }
        g->kv_slot[slot] = i + 1;
    }
    return NB_OK;
}

static const kv *find_kv(const nb_gguf *g, const char *key)
{
    size_t slot;
    uint64_t i = table_find(g, g->kv_slot, g->kv_cap, kv_name, key, strlen(key), &slot);
    return i == UINT64_MAX ? NULL : &g->kvs[i];
}

static nb_code read_alignment(nb_gguf *g, nb_err *err)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const kv *e = find_kv(g, "general.alignment");
    if (!e)
        return NB_OK;
    int neg;
    uint64_t a;
    if (!is_int_type(e->type))
        return nb_err_set(err, NB_EFORMAT, "%s: general.alignment is %s, expected uint32",
                          g->path, nb_gguf_vtype_name(e->type));
    load_int(e->type, e->val, &neg, &a);
    if (neg || a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: general.alignment = %s%" PRIu64 ": must be a power of two <= %u",
                          g->path, neg ? "-" : "", a, GGUF_MAX_ALIGNMENT);
    g->alignment = a;
    return NB_OK;
}

/* ggml type numbers; names only so errors can say what an unsupported type is. */
static const char *ggml_type_name(uint32_t t)
{
    static const char *names[] = {
        "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
        "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
        "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
        "IQ1_M", "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4",
        "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
    return t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

static int ggml_to_nb(uint32_t t)
{
    switch (t) {
    case 0: return NB_TT_F32;
    case 1: return NB_TT_F16;
    case 2: return NB_TT_Q4_0;
    case 3: return NB_TT_Q4_1;
    case 6: return NB_TT_Q5_0;
    case 8: return NB_TT_Q8_0;
    case 12: return NB_TT_Q4_K;
    case 14: return NB_TT_Q6_K;
    case 30: return NB_TT_BF16;
    default: return -1;
    }
}

/* "192x576": outermost dimension first, like a PyTorch shape. */
static void fmt_shape(char *buf, size_t cap, const uint64_t *ne, uint32_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t d = n; d-- > 0 && o < cap;)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRIu64, d + 1 == n ? "" : "x", ne[d]);
}

static nb_code parse_tensor_infos(nb_gguf *g, rd *r, uint64_t *offs)
{
    nb_code rc;
    char what[192];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        nb_tensor *t = &g->tensors[i];
        nb_gguf_str name;
        snprintf(what, sizeof what, "tensor info %" PRIu64 " name", i);
        if ((rc = rd_str(r, &name, what)))
            return rc;
        if (name.len == 0 || name.len >= NB_TENSOR_NAME_MAX || memchr(name.ptr, 0, name.len))
            return nb_err_set(r->err, NB_EFORMAT,
                              "%s: tensor info %" PRIu64 ": name of %" PRIu64
                              " bytes is empty, longer than %d or holds a NUL byte",
                              g->path, i, name.len, NB_TENSOR_NAME_MAX - 1);
        memcpy(t->name, name.ptr, (size_t)name.len);
        t->name[name.len] = '\0';
        size_t slot;
        if (table_find(g, g->t_slot, g->t_cap, tensor_name, t->name, (size_t)name.len, &slot) !=
            UINT64_MAX)
            return nb_err_set(r->err, NB_EFORMAT, "%s: tensor '%s' appears twice", g->path,
                              t->name);
        g->t_slot[slot] = i + 1;
        snprintf(what, sizeof what, "tensor '%s'", t->name);
        uint32_t nd;
        if ((rc = rd_u32(r, &nd, what)))
            return rc;
        if (nd < 1 || nd > GGUF_MAX_DIMS)
            return nb_err_set(r->err, NB_EFORMAT, "%s: %s: n_dims = %" PRIu32 ", must be 1..%d",
                              g->path, what, nd, GGUF_MAX_DIMS);
        uint64_t ne[GGUF_MAX_DIMS];
        uint64_t rows = 1;
        for (uint32_t d = 0; d < nd; d++) {
            if ((rc = rd_u64(r, &ne[d], what)))
                return rc;
            if (ne[d] == 0 || ne[d] > INT64_MAX)
                return nb_err_set(r->err, NB_EFORMAT, "%s: %s: dimension %" PRIu32 " = %" PRIu64
                                  " is out of range (1..2^63-1)", g->path, what, d, ne[d]);
            if (d > 0) {
                if (rows > (uint64_t)INT64_MAX / ne[d] || rows * ne[d] > (uint64_t)INT64_MAX / ne[0])
                    return nb_err_set(r->err, NB_EFORMAT, "%s: %s: element count overflows",
                                      g->path, what);
                rows *= ne[d];
            }
        }
        uint32_t gt;
        if ((rc = rd_u32(r, &gt, what)))
            return rc;
        int nt = ggml_to_nb(gt);
        if (nt < 0) {
            const char *tn = ggml_type_name(gt);
            if (tn)
                return nb_err_set(r->err, NB_EUNSUPPORTED,
                                  "%s: %s: type %s (%" PRIu32 ") is not supported"
                                  " (F32, F16, BF16, Q8_0, Q4_0, Q4_1 are)",
                                  g->path, what, tn, gt);
            return nb_err_set(r->err, NB_EUNSUPPORTED, "%s: %s: unknown tensor type %" PRIu32,
                              g->path, what, gt);
        }
        if ((rc = rd_u64(r, &offs[i], what)))
            return rc;
        char shape[96];
        fmt_shape(shape, sizeof shape, ne, nd);
        t->type = (nb_ttype)nt;
        t->cols = (int64_t)ne[0];
        t->rows = (int64_t)rows;
        t->n_dims = (int)nd;
        t->qk_perm_heads = 0;
        nb_err sub;
        if ((rc = nb_ttype_row_bytes(t->type, t->cols, &t->row_bytes, &sub)))
            return nb_err_set(r->err, NB_EFORMAT, "%s: %s (type %s, %s): %s", g->path, what,
                              nb_ttype_name(t->type), shape, sub.msg);
        if (rows > SIZE_MAX / t->row_bytes)
            return nb_err_set(r->err, NB_EFORMAT, "%s: %s (type %s, %s): byte size overflows",
                              g->path, what, nb_ttype_name(t->type), shape);
        if (offs[i] % g->alignment)
            return nb_err_set(r->err, NB_EFORMAT,
                              "%s: %s (type %s, %s): data offset %" PRIu64
                              " is not a multiple of general.alignment (%" PRIu64 ")",
                              g->path, what, nb_ttype_name(t->type), shape, offs[i], g->alignment);
    }
    return NB_OK;
}

static nb_code place_tensors(nb_gguf *g, size_t infos_end, const uint64_t *offs, nb_err *err)
{
    uint64_t a = g->alignment;
    uint64_t start = ((uint64_t)infos_end + a - 1) / a * a;
    g->data_off = start > g->size ? g->size : (size_t)start;
    if (g->n_tensors && start > g->size)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: tensor data section would start at offset %" PRIu64
                          ", past end of file (%zu bytes)",
                          g->path, start, g->size);
    uint64_t avail = g->size - g->data_off;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        nb_tensor *t = &g->tensors[i];
        uint64_t len = (uint64_t)t->rows * t->row_bytes;
        if (offs[i] > avail || len > avail - offs[i])
            return nb_err_set(err, NB_EFORMAT,
                              "%s: tensor '%s' (type %s, %lldx%lld): data [%" PRIu64 ", %" PRIu64
                              ") ends past end of file (%zu bytes)",
                              g->path, t->name, nb_ttype_name(t->type), (long long)t->rows,
                              (long long)t->cols, start + offs[i],
                              start + offs[i] + len, g->size);
        t->data = g->map + g->data_off + offs[i];
    }
    return NB_OK;
}

static nb_code parse(nb_gguf *g, nb_err *err)
{
    rd r = {g->map, 0, g->size, g->path, err};
    if (memcmp(g->map, GGUF_MAGIC, 4) != 0)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: bad magic %02x %02x %02x %02x: not a GGUF file (expected 'GGUF')",
                          g->path, g->map[0], g->map[1], g->map[2], g->map[3]);
    r.pos = 4;
    nb_code rc;
    if ((rc = rd_u32(&r, &g->version, "header version")))
        return rc;
    if (g->version != 2 && g->version != 3) {
        if (g->version == 0x02000000u || g->version == 0x03000000u)
            return nb_err_set(err, NB_EUNSUPPORTED,
                              "%s: big-endian GGUF is not supported (this host is little-endian)",
                              g->path);
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: GGUF version %" PRIu32 " is not supported (only 2 and 3)",
                          g->path, g->version);
    }
    if ((rc = rd_u64(&r, &g->n_tensors, "header n_tensors")) ||
        (rc = rd_u64(&r, &g->n_kv, "header n_kv")))
        return rc;
    if ((rc = parse_kvs(g, &r)) || (rc = read_alignment(g, err)))
        return rc;
    if (g->n_tensors > rd_left(&r) / GGUF_MIN_TINFO_BYTES)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: header: n_tensors = %" PRIu64 " tensor infos cannot fit in the"
                          " %zu bytes left after the metadata",
                          g->path, g->n_tensors, rd_left(&r));
    g->t_cap = table_cap(g->n_tensors);
    size_t nt = g->n_tensors ? (size_t)g->n_tensors : 1;
    g->tensors = calloc(nt, sizeof *g->tensors);
    g->t_slot = calloc(g->t_cap, sizeof *g->t_slot);
    uint64_t *offs = calloc(nt, sizeof *offs);
    if (!g->tensors || !g->t_slot || !offs) {
        free(offs);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory for %" PRIu64 " tensors", g->path,
                          g->n_tensors);
    }
    rc = parse_tensor_infos(g, &r, offs);
    if (!rc)
        rc = place_tensors(g, r.pos, offs, err);
    free(offs);
    return rc;
}

nb_code nb_gguf_open(const char *path, nb_gguf **out, nb_err *err)
{
    *out = NULL;
    nb_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    nb_code rc = map_file(g, path, err);
    if (!rc)
        rc = parse(g, err);
    if (rc) {
        nb_gguf_close(g);
        return rc;
    }
    *out = g;
    return NB_OK;
}

void nb_gguf_close(nb_gguf *g)
{
    if (!g)
        return;
    if (g->kvs)
        for (uint64_t i = 0; i < g->n_kv; i++)
            free(g->kvs[i].strs);
    free(g->kvs);
    free(g->kv_slot);
    free(g->tensors);
    free(g->t_slot);
    nb_mmap_close(&g->mm);
    free(g->path);
    free(g);
}

const char *nb_gguf_path(const nb_gguf *g)
{
    return g->path;
}

uint32_t nb_gguf_version(const nb_gguf *g)
{
    return g->version;
}

/* ---- metadata getters ---- */

int nb_gguf_has(const nb_gguf *g, const char *key)
{
    return find_kv(g, key) != NULL;
}

static nb_code lookup(const nb_gguf *g, const char *key, const kv **e, nb_err *err)
{
    *e = find_kv(g, key);
    if (!*e)
        return nb_err_set(err, NB_ENOTFOUND, "%s: metadata key '%s' not found", g->path, key);
    return NB_OK;
}

static nb_code wrong_type(const nb_gguf *g, const char *key, const kv *e, const char *want,
                          nb_err *err)
{
    return nb_err_set(err, NB_EFORMAT, "%s: metadata '%s' is %s%s%s, expected %s", g->path, key,
                      nb_gguf_vtype_name(e->type), e->type == NB_GGUF_ARRAY ? " of " : "",
                      e->type == NB_GGUF_ARRAY ? nb_gguf_vtype_name(e->elem) : "", want);
}

/* The entry for key, which must have type t (want names it in the error). */
static nb_code lookup_as(const nb_gguf *g, const char *key, nb_gguf_vtype t, const char *want,
                         const kv **e, nb_err *err)
{
    nb_code rc = lookup(g, key, e, err);
    if (rc)
        return rc;
    if ((*e)->type != t)
        return wrong_type(g, key, *e, want, err);
    return NB_OK;
}

/* An integer entry of any width as sign and magnitude. */
static nb_code lookup_int(const nb_gguf *g, const char *key, int *neg, uint64_t *v, nb_err *err)
{
    const kv *e;
    nb_code rc = lookup(g, key, &e, err);
    if (rc)
        return rc;
    if (!is_int_type(e->type))
        return wrong_type(g, key, e, "an integer", err);
    load_int(e->type, e->val, neg, v);
    return NB_OK;
}

nb_code nb_gguf_get_u64(const nb_gguf *g, const char *key, uint64_t *out, nb_err *err)
{
    int neg;
    uint64_t v;
    nb_code rc = lookup_int(g, key, &neg, &v, err);
    if (rc)
        return rc;
    if (neg && v)
        return nb_err_set(err, NB_EFORMAT, "%s: metadata '%s' = -%" PRIu64 " is negative", g->path,
                          key, v);
    *out = v;
    return NB_OK;
}

nb_code nb_gguf_get_i64(const nb_gguf *g, const char *key, int64_t *out, nb_err *err)
{
    int neg;
    uint64_t v;
    nb_code rc = lookup_int(g, key, &neg, &v, err);
    if (rc)
        return rc;
    if (!neg && v > (uint64_t)INT64_MAX)
        return nb_err_set(err, NB_EFORMAT, "%s: metadata '%s' = %" PRIu64 " exceeds int64",
                          g->path, key, v);
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return NB_OK;
}

nb_code nb_gguf_get_f64(const nb_gguf *g, const char *key, double *out, nb_err *err)
{
    const kv *e;
    nb_code rc = lookup(g, key, &e, err);
    if (rc)
        return rc;
    if (e->type != NB_GGUF_FLOAT32 && e->type != NB_GGUF_FLOAT64)
        return wrong_type(g, key, e, "float32 or float64", err);
    *out = load_float(e->type, e->val);
    return NB_OK;
}

nb_code nb_gguf_get_bool(const nb_gguf *g, const char *key, int *out, nb_err *err)
{
    const kv *e;
    nb_code rc = lookup_as(g, key, NB_GGUF_BOOL, "bool", &e, err);
    if (rc)
        return rc;
    *out = e->val[0] != 0;
    return NB_OK;
}

nb_code nb_gguf_get_str(const nb_gguf *g, const char *key, nb_gguf_str *out, nb_err *err)
{
    const kv *e;
    nb_code rc = lookup_as(g, key, NB_GGUF_STRING, "string", &e, err);
    if (rc)
        return rc;
    memcpy(&out->len, e->val, 8);
    out->ptr = (const char *)e->val + 8;
    return NB_OK;
}

static nb_code lookup_arr(const nb_gguf *g, const char *key, const kv **e, nb_err *err)
{
    return lookup_as(g, key, NB_GGUF_ARRAY, "an array", e, err);
}

nb_code nb_gguf_get_arr_info(const nb_gguf *g, const char *key, nb_gguf_vtype *elem,
                             uint64_t *n, nb_err *err)
{
    const kv *e;
    nb_code rc = lookup_arr(g, key, &e, err);
    if (rc)
        return rc;
    *elem = e->elem;
    *n = e->n;
    return NB_OK;
}

nb_code nb_gguf_get_arr_str(const nb_gguf *g, const char *key, const nb_gguf_str **items,
                            uint64_t *n, nb_err *err)
{
    const kv *e;
    nb_code rc = lookup_arr(g, key, &e, err);
    if (rc)
        return rc;
    if (e->elem != NB_GGUF_STRING)
        return wrong_type(g, key, e, "array of string", err);
    *items = e->strs;
    *n = e->n;
    return NB_OK;
}

static nb_code check_count(const nb_gguf *g, const char *key, const kv *e, uint64_t n,
                           nb_err *err)
{
    if (n != e->n)
        return nb_err_set(err, NB_EINVAL,
                          "%s: metadata '%s' has %" PRIu64 " elements, caller asked for %" PRIu64,
                          g->path, key, e->n, n);
    return NB_OK;
}

nb_code nb_gguf_get_arr_i32(const nb_gguf *g, const char *key, int32_t *dst, uint64_t n,
                            nb_err *err)
{
    const kv *e;
    nb_code rc = lookup_arr(g, key, &e, err);
    if (rc)
        return rc;
    if (!is_int_type(e->elem))
        return wrong_type(g, key, e, "array of integers", err);
    if ((rc = check_count(g, key, e, n, err)))
        return rc;
    size_t sb = scalar_bytes(e->elem);
    for (uint64_t i = 0; i < n; i++) {
        int neg;
        uint64_t v;
        load_int(e->elem, e->val + i * sb, &neg, &v);
        if (v > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX))
            return nb_err_set(err, NB_EFORMAT,
                              "%s: metadata '%s'[%" PRIu64 "] = %s%" PRIu64 " does not fit int32",
                              g->path, key, i, neg ? "-" : "", v);
        dst[i] = neg ? (int32_t)(0 - (int64_t)v) : (int32_t)v;
    }
    return NB_OK;
}

nb_code nb_gguf_get_arr_f32(const nb_gguf *g, const char *key, float *dst, uint64_t n,
                            nb_err *err)
{
    const kv *e;
    nb_code rc = lookup_arr(g, key, &e, err);
    if (rc)
        return rc;
    int is_float = e->elem == NB_GGUF_FLOAT32 || e->elem == NB_GGUF_FLOAT64;
    if (!is_float && !is_int_type(e->elem))
        return wrong_type(g, key, e, "array of numbers", err);
    if ((rc = check_count(g, key, e, n, err)))
        return rc;
    size_t sb = scalar_bytes(e->elem);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *p = e->val + i * sb;
        if (is_float) {
            dst[i] = (float)load_float(e->elem, p);
        } else {
            int neg;
            uint64_t v;
            load_int(e->elem, p, &neg, &v);
            dst[i] = neg ? -(float)v : (float)v;
        }
    }
    return NB_OK;
}

uint64_t nb_gguf_n_kv(const nb_gguf *g)
{
    return g->n_kv;
}

nb_code nb_gguf_kv_at(const nb_gguf *g, uint64_t i, nb_gguf_str *key, nb_gguf_vtype *type,
                      nb_err *err)
{
    if (i >= g->n_kv)
        return nb_err_set(err, NB_EINVAL, "%s: metadata index %" PRIu64 " out of range (%" PRIu64
                          " entries)", g->path, i, g->n_kv);
    *key = g->kvs[i].key;
    *type = g->kvs[i].type;
    return NB_OK;
}

/* ---- tensors ---- */

uint64_t nb_gguf_n_tensors(const nb_gguf *g)
{
    return g->n_tensors;
}

nb_code nb_gguf_tensor_at(const nb_gguf *g, uint64_t i, nb_tensor *out, nb_err *err)
{
    if (i >= g->n_tensors)
        return nb_err_set(err, NB_EINVAL, "%s: tensor index %" PRIu64 " out of range (%" PRIu64
                          " tensors)", g->path, i, g->n_tensors);
    *out = g->tensors[i];
    return NB_OK;
}

nb_code nb_gguf_find_tensor(const nb_gguf *g, const char *name, nb_tensor *out, nb_err *err)
{
    size_t slot;
    uint64_t i = table_find(g, g->t_slot, g->t_cap, tensor_name, name, strlen(name), &slot);
    if (i == UINT64_MAX)
        return nb_err_set(err, NB_ENOTFOUND, "%s: tensor '%s' not found", g->path, name);
    *out = g->tensors[i];
    return NB_OK;
}
