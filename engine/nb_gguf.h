/* nb_gguf: read-only GGUF v2/v3 reader over a private mmap of the file.
 * Every offset, count and size is bounds- and overflow-checked at open. */
#ifndef NB_GGUF_H
#define NB_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_tensor.h"

typedef struct nb_gguf nb_gguf;

/* GGUF metadata value types, numbered as in the file format. */
typedef enum nb_gguf_vtype {
    NB_GGUF_UINT8 = 0,
    NB_GGUF_INT8 = 1,
    NB_GGUF_UINT16 = 2,
    NB_GGUF_INT16 = 3,
    NB_GGUF_UINT32 = 4,
    NB_GGUF_INT32 = 5,
    NB_GGUF_FLOAT32 = 6,
    NB_GGUF_BOOL = 7,
    NB_GGUF_STRING = 8,
    NB_GGUF_ARRAY = 9,
    NB_GGUF_UINT64 = 10,
    NB_GGUF_INT64 = 11,
    NB_GGUF_FLOAT64 = 12
} nb_gguf_vtype;

/* A string inside the mapping: not NUL-terminated. */
typedef struct nb_gguf_str {
    const char *ptr;
    uint64_t len;
} nb_gguf_str;

nb_code nb_gguf_open(const char *path, nb_gguf **out, nb_err *err);
void nb_gguf_close(nb_gguf *g);

const char *nb_gguf_path(const nb_gguf *g);
uint32_t nb_gguf_version(const nb_gguf *g);

/* Scalar getters coerce between integer widths when the value fits, and
 * fail with NB_ENOTFOUND (absent) or NB_EFORMAT (wrong type), naming the key. */
int nb_gguf_has(const nb_gguf *g, const char *key);
nb_code nb_gguf_get_u64(const nb_gguf *g, const char *key, uint64_t *out, nb_err *err);
nb_code nb_gguf_get_i64(const nb_gguf *g, const char *key, int64_t *out, nb_err *err);
nb_code nb_gguf_get_f64(const nb_gguf *g, const char *key, double *out, nb_err *err); /* f32/f64 */
nb_code nb_gguf_get_bool(const nb_gguf *g, const char *key, int *out, nb_err *err);
nb_code nb_gguf_get_str(const nb_gguf *g, const char *key, nb_gguf_str *out, nb_err *err);

/* Arrays: element type and count, then typed access. Strings come back as
 * an array of views the reader owns (valid until nb_gguf_close), built at
 * open so item access is O(1). Numeric arrays are copied out, converted to
 * the requested type: n must equal the element count (NB_EINVAL otherwise);
 * i32 takes any integer elements that fit (NB_EFORMAT naming the index if
 * not), f32 takes float or integer elements. */
nb_code nb_gguf_get_arr_info(const nb_gguf *g, const char *key, nb_gguf_vtype *elem,
                             uint64_t *n, nb_err *err);
nb_code nb_gguf_get_arr_str(const nb_gguf *g, const char *key, const nb_gguf_str **items,
                            uint64_t *n, nb_err *err);
nb_code nb_gguf_get_arr_i32(const nb_gguf *g, const char *key, int32_t *dst, uint64_t n,
                            nb_err *err);
nb_code nb_gguf_get_arr_f32(const nb_gguf *g, const char *key, float *dst, uint64_t n,
                            nb_err *err);

/* Enumerates the metadata in file order (i < nb_gguf_n_kv). */
uint64_t nb_gguf_n_kv(const nb_gguf *g);
nb_code nb_gguf_kv_at(const nb_gguf *g, uint64_t i, nb_gguf_str *key, nb_gguf_vtype *type,
                      nb_err *err);
const char *nb_gguf_vtype_name(nb_gguf_vtype t);

/* Tensors. A found tensor is a view into the mapping (see nb_tensor.h). */
uint64_t nb_gguf_n_tensors(const nb_gguf *g);
nb_code nb_gguf_tensor_at(const nb_gguf *g, uint64_t i, nb_tensor *out, nb_err *err);
nb_code nb_gguf_find_tensor(const nb_gguf *g, const char *name, nb_tensor *out, nb_err *err);

#endif
