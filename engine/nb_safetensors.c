/* nb_safetensors: parses and validates safetensors headers (and a sharded
 * index) once at open; lookups are a binary search over a name-sorted table. */
#include "nb_safetensors.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nb_json.h"
#include "nb_mmap.h"

#define ST_MAX_HEADER (100u << 20) /* the format's own cap on the JSON header */
#define ST_MAX_INDEX (64u << 20)
#define ST_MAX_DIMS 8
#define ST_MAX_SHARDS 4096

typedef struct shard {
    char *path;
    nb_mmap mm;
} shard;

typedef struct entry {
    nb_tensor t;
    size_t shard;
} entry;

struct nb_safetensors {
    char *path;
    shard *shards;
    size_t n_shards;
    entry *tensors;
    size_t n_tensors, cap;
};

static nb_code oom(nb_err *err, const char *path)
{
    return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
}

static int dtype_of(const char *s, nb_ttype *t, size_t *bytes)
{
    if (!strcmp(s, "BF16")) { *t = NB_TT_BF16; *bytes = 2; return 1; }
    if (!strcmp(s, "F16")) { *t = NB_TT_F16; *bytes = 2; return 1; }
    if (!strcmp(s, "F32")) { *t = NB_TT_F32; *bytes = 4; return 1; }
    return 0;
}

/* Valid safetensors dtypes we do not load: reported as unsupported, not malformed. */
static int known_dtype(const char *s)
{
    static const char *known[] = {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64",
                                  "F64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3",
                                  "F6_E3M2", "E4M3", "E5M2"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(s, known[i]))
            return 1;
    return 0;
}

static int json_u64(json_object *o, uint64_t *v)
{
    if (!json_object_is_type(o, json_type_int))
        return 0;
    int64_t s = json_object_get_int64(o);
    if (s < 0)
        return 0;
    *v = s == INT64_MAX ? json_object_get_uint64(o) : (uint64_t)s;
    return 1;
}

static nb_code add_entry(nb_safetensors *st, const nb_tensor *t, size_t sh, nb_err *err)
{
    if (st->n_tensors == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 64;
        entry *n = realloc(st->tensors, cap * sizeof *n);
        if (!n)
            return oom(err, st->path);
        st->tensors = n;
        st->cap = cap;
    }
    st->tensors[st->n_tensors].t = *t;
    st->tensors[st->n_tensors].shard = sh;
    st->n_tensors++;
    return NB_OK;
}

/* 'shape': at most ST_MAX_DIMS non-negative integers whose product, times esz bytes, fits
 * an int64. */
static nb_code parse_shape(const char *path, const char *name, json_object *v, size_t esz,
                           uint64_t dims[ST_MAX_DIMS], size_t *nd, uint64_t *numel, nb_err *err)
{
    json_object *js;
    if (!json_object_object_get_ex(v, "shape", &js) || !json_object_is_type(js, json_type_array))
        return nb_err_set(err, NB_EFORMAT, "%s: tensor '%s': missing or non-array 'shape'", path,
                          name);
    *nd = json_object_array_length(js);
    if (*nd > ST_MAX_DIMS)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: tensor '%s': %zu dimensions (at most %d)",
                          path, name, *nd, ST_MAX_DIMS);
    *numel = 1;
    for (size_t d = 0; d < *nd; d++) {
        if (!json_u64(json_object_array_get_idx(js, d), &dims[d]) || dims[d] > INT64_MAX)
            return nb_err_set(err, NB_EFORMAT,
                              "%s: tensor '%s': shape[%zu] is not a non-negative integer", path,
                              name, d);
        if (dims[d] && *numel > (uint64_t)INT64_MAX / esz / dims[d])
            return nb_err_set(err, NB_EFORMAT, "%s: tensor '%s': element count overflows", path,
                              name);
        *numel *= dims[d];
    }
    return NB_OK;
}

/* 'data_offsets': [begin, end) inside the data section, exactly the bytes the shape needs. */
static nb_code parse_offsets(const char *path, const char *name, json_object *v,
                             uint64_t data_size, uint64_t need, nb_ttype type, uint64_t off[2],
                             nb_err *err)
{
    json_object *jo;
    if (!json_object_object_get_ex(v, "data_offsets", &jo) ||
        !json_object_is_type(jo, json_type_array) || json_object_array_length(jo) != 2 ||
        !json_u64(json_object_array_get_idx(jo, 0), &off[0]) ||
        !json_u64(json_object_array_get_idx(jo, 1), &off[1]))
        return nb_err_set(err, NB_EFORMAT,
                          "%s: tensor '%s': 'data_offsets' must be [begin, end] non-negative"
                          " integers", path, name);
    if (off[0] > off[1] || off[1] > data_size)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                          ") outside the data section (%" PRIu64 " bytes) or reversed",
                          path, name, off[0], off[1], data_size);
    if (off[1] - off[0] != need)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: tensor '%s': data_offsets span %" PRIu64 " bytes but shape x %s"
                          " needs %" PRIu64,
                          path, name, off[1] - off[0], nb_ttype_name(type), need);
    return NB_OK;
}

/* One header entry -> tensor view; every number is checked against the file. */
static nb_code parse_entry(const char *path, const char *name, json_object *v,
                           const uint8_t *data, uint64_t data_size, nb_tensor *t, nb_err *err)
{
    json_object *jd;
    if (strlen(name) >= NB_TENSOR_NAME_MAX)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: tensor '%.60s...': name longer than %d bytes",
                          path, name, NB_TENSOR_NAME_MAX - 1);
    if (!json_object_is_type(v, json_type_object))
        return nb_err_set(err, NB_EFORMAT, "%s: header: tensor '%s' is not a JSON object", path,
                          name);
    if (!json_object_object_get_ex(v, "dtype", &jd) || !json_object_is_type(jd, json_type_string))
        return nb_err_set(err, NB_EFORMAT, "%s: tensor '%s': missing or non-string 'dtype'", path,
                          name);
    const char *ds = json_object_get_string(jd);
    size_t esz;
    if (!dtype_of(ds, &t->type, &esz)) {
        if (known_dtype(ds))
            return nb_err_set(err, NB_EUNSUPPORTED,
                              "%s: tensor '%s': dtype %s is not supported (BF16, F16, F32 are)",
                              path, name, ds);
        return nb_err_set(err, NB_EFORMAT, "%s: tensor '%s': unknown dtype '%.32s'", path, name,
                          ds);
    }
    uint64_t dims[ST_MAX_DIMS], numel = 0, off[2] = {0, 0};
    size_t nd = 0;
    nb_code rc = parse_shape(path, name, v, esz, dims, &nd, &numel, err);
    if (!rc)
        rc = parse_offsets(path, name, v, data_size, numel * esz, t->type, off, err);
    if (rc)
        return rc;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = (int)nd;
    t->cols = nd ? (int64_t)dims[nd - 1] : 1;
    t->rows = 1;
    for (size_t d = 0; d + 1 < nd; d++)
        t->rows *= (int64_t)dims[d];
    if (nd && dims[nd - 1] == 0)
        t->rows = 0; /* an empty tensor has no rows to address */
    t->row_bytes = (size_t)t->cols * esz;
    t->data = data + off[0];
    t->qk_perm_heads = 0;
    return NB_OK;
}

static nb_code open_shard(nb_safetensors *st, size_t sh, nb_err *err)
{
    shard *s = &st->shards[sh];
    const char *p = s->path;
    nb_code rc = nb_mmap_open(p, &s->mm, err);
    if (rc)
        return rc;
    if (s->mm.size < 8)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: %zu bytes is too small for a safetensors file (8-byte header"
                          " length first)", p, s->mm.size);
    uint64_t hlen;
    memcpy(&hlen, s->mm.data, 8);
    if (hlen > s->mm.size - 8)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: header length %" PRIu64 " runs past end of file (%zu bytes)", p,
                          hlen, s->mm.size);
    if (hlen > ST_MAX_HEADER)
        return nb_err_set(err, NB_EFORMAT, "%s: header length %" PRIu64 " exceeds the %u-byte"
                          " limit", p, hlen, ST_MAX_HEADER);
    char what[512];
    snprintf(what, sizeof what, "%s: header", p);
    json_object *root;
    if ((rc = nb_json_parse((const char *)s->mm.data + 8, (size_t)hlen, what, &root, err)))
        return rc;
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return nb_err_set(err, NB_EFORMAT, "%s: header is not a JSON object", p);
    }
    const uint8_t *data = s->mm.data + 8 + hlen;
    uint64_t data_size = s->mm.size - 8 - hlen;
    json_object_object_foreach(root, name, v)
    {
        if (!strcmp(name, "__metadata__"))
            continue;
        nb_tensor t;
        if ((rc = parse_entry(p, name, v, data, data_size, &t, err)) ||
            (rc = add_entry(st, &t, sh, err)))
            break;
    }
    json_object_put(root);
    return rc;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->t.name, ((const entry *)b)->t.name);
}

static const entry *find_entry(const nb_safetensors *st, const char *name)
{
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[mid].t.name, name);
        if (!c)
            return &st->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static nb_code sort_and_check(nb_safetensors *st, nb_err *err)
{
    if (st->n_tensors)
        qsort(st->tensors, st->n_tensors, sizeof *st->tensors, cmp_entry);
    for (size_t i = 1; i < st->n_tensors; i++)
        if (!strcmp(st->tensors[i].t.name, st->tensors[i - 1].t.name))
            return nb_err_set(err, NB_EFORMAT, "%s: tensor '%s' appears in both %s and %s",
                              st->path, st->tensors[i].t.name,
                              st->shards[st->tensors[i - 1].shard].path,
                              st->shards[st->tensors[i].shard].path);
    return NB_OK;
}

static nb_code add_shard(nb_safetensors *st, const char *path, nb_err *err)
{
    shard *n = realloc(st->shards, (st->n_shards + 1) * sizeof *n);
    if (!n)
        return oom(err, st->path);
    st->shards = n;
    memset(&n[st->n_shards], 0, sizeof *n);
    if (!(n[st->n_shards].path = strdup(path)))
        return oom(err, st->path);
    st->n_shards++;
    return NB_OK;
}

static int is_index(const char *path)
{
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".json");
}

/* Shard file names come from the index; a '/' would let it point anywhere. */
static int plain_file_name(const char *s)
{
    return s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* Opens the shards weight_map names, in first-mention order, each once; dir holds them. */
static nb_code open_shards(nb_safetensors *st, json_object *wm, const char *dir, nb_err *err)
{
    nb_code rc = NB_OK;
    json_object_object_foreach(wm, name, v)
    {
        const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
        if (!f || !plain_file_name(f))
            return nb_err_set(err, NB_EFORMAT,
                              "%s: weight_map['%.128s'] must be a shard file name without '/'",
                              st->path, name);
        char full[4096 + 256];
        snprintf(full, sizeof full, "%s/%s", dir, f);
        size_t i = 0;
        while (i < st->n_shards && strcmp(st->shards[i].path, full))
            i++;
        if (i < st->n_shards)
            continue;
        if (st->n_shards >= ST_MAX_SHARDS)
            return nb_err_set(err, NB_EFORMAT, "%s: more than %d shards", st->path,
                              ST_MAX_SHARDS);
        if ((rc = add_shard(st, full, err)) || (rc = open_shard(st, st->n_shards - 1, err)))
            return rc;
    }
    if (st->n_shards == 0)
        return nb_err_set(err, NB_EFORMAT, "%s: 'weight_map' is empty", st->path);
    return NB_OK;
}

/* Every tensor weight_map names is in the shard it names. */
static nb_code check_weight_map(const nb_safetensors *st, json_object *wm, nb_err *err)
{
    json_object_object_foreach(wm, name, v)
    {
        const entry *e = find_entry(st, name);
        const char *f = json_object_get_string(v);
        const char *base = e ? strrchr(st->shards[e->shard].path, '/') + 1 : NULL;
        if (!e || strcmp(base, f))
            return nb_err_set(err, NB_EFORMAT,
                              "%s: weight_map says tensor '%.128s' is in %s, but %s", st->path,
                              name, f, e ? "it is in another shard" : "no shard holds it");
    }
    return NB_OK;
}

static nb_code open_index(nb_safetensors *st, nb_err *err)
{
    json_object *root, *wm;
    nb_code rc = nb_json_read_file(st->path, ST_MAX_INDEX, &root, err);
    if (rc)
        return rc;
    if (!json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "weight_map", &wm) ||
        !json_object_is_type(wm, json_type_object)) {
        json_object_put(root);
        return nb_err_set(err, NB_EFORMAT, "%s: no 'weight_map' object", st->path);
    }
    char dir[4096];
    const char *slash = strrchr(st->path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - st->path) : 1,
             slash ? st->path : ".");
    if (!(rc = open_shards(st, wm, dir, err)) && !(rc = sort_and_check(st, err)))
        rc = check_weight_map(st, wm, err);
    json_object_put(root);
    return rc;
}

nb_code nb_safetensors_open(const char *path, nb_safetensors **out, nb_err *err)
{
    *out = NULL;
    nb_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return oom(err, path);
    }
    nb_code rc;
    if (is_index(path)) {
        rc = open_index(st, err);
    } else {
        rc = add_shard(st, path, err);
        if (!rc)
            rc = open_shard(st, 0, err);
        if (!rc)
            rc = sort_and_check(st, err);
    }
    if (rc) {
        nb_safetensors_close(st);
        return rc;
    }
    *out = st;
    return NB_OK;
}

nb_code nb_safetensors_open_dir(const char *dir, nb_safetensors **out, nb_err *err)
{
    char p[4096];
    struct stat sb;
    if (snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir) >= (int)sizeof p)
        return nb_err_set(err, NB_EINVAL, "%s: path too long", dir);
    if (stat(p, &sb) == 0)
        return nb_safetensors_open(p, out, err);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (stat(p, &sb) == 0)
        return nb_safetensors_open(p, out, err);
    *out = NULL;
    return nb_err_set(err, NB_ENOTFOUND,
                      "%s: no model.safetensors or model.safetensors.index.json", dir);
}

void nb_safetensors_close(nb_safetensors *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_shards; i++) {
        nb_mmap_close(&st->shards[i].mm);
        free(st->shards[i].path);
    }
    free(st->shards);
    free(st->tensors);
    free(st->path);
    free(st);
}

const char *nb_safetensors_path(const nb_safetensors *st)
{
    return st->path;
}

size_t nb_safetensors_n_files(const nb_safetensors *st)
{
    return st->n_shards;
}

size_t nb_safetensors_n_tensors(const nb_safetensors *st)
{
    return st->n_tensors;
}

nb_code nb_safetensors_tensor_at(const nb_safetensors *st, size_t i, nb_tensor *out, nb_err *err)
{
    if (i >= st->n_tensors)
        return nb_err_set(err, NB_EINVAL, "%s: tensor index %zu out of range (%zu tensors)",
                          st->path, i, st->n_tensors);
    *out = st->tensors[i].t;
    return NB_OK;
}

nb_code nb_safetensors_find(const nb_safetensors *st, const char *name, nb_tensor *out,
                            nb_err *err)
{
    const entry *e = find_entry(st, name);
    if (!e)
        return nb_err_set(err, NB_ENOTFOUND, "%s: tensor '%s' not found", st->path, name);
    *out = e->t;
    return NB_OK;
}

const char *nb_safetensors_file_of(const nb_safetensors *st, const char *name)
{
    const entry *e = find_entry(st, name);
    return e ? st->shards[e->shard].path : NULL;
}
