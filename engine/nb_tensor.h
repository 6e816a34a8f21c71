/* nb_tensor: a typed 2-D view of weights inside a mapped model file.
 * Loaders produce views; backends convert them into their own layouts. */
#ifndef NB_TENSOR_H
#define NB_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "nb_bf16.h"
#include "nb_err.h"
#include "nb_quant.h"

/* The formats of kernels/nb_quant.h (block layouts and formulas are defined there), under the
 * names the loaders use. */
typedef enum nb_ttype {
    NB_TT_F32 = NB_QUANT_F32,
    NB_TT_F16 = NB_QUANT_F16,
    NB_TT_BF16 = NB_QUANT_BF16,
    NB_TT_Q8_0 = NB_QUANT_Q8_0,
    NB_TT_Q4_0 = NB_QUANT_Q4_0,
    NB_TT_Q4_1 = NB_QUANT_Q4_1,
    NB_TT_Q5_0 = NB_QUANT_Q5_0,
    NB_TT_Q4_K = NB_QUANT_Q4_K,
    NB_TT_Q6_K = NB_QUANT_Q6_K,
    NB_TT_COUNT = NB_QUANT_COUNT
} nb_ttype;

const char *nb_ttype_name(nb_ttype t); /* "Q4_1"; "?" when out of range */
/* Case-insensitive name ("q4_1", "BF16") to type; -1 when unknown. */
int nb_ttype_from_name(const char *name);
/* Elements per block (1 for plain types) and bytes per block. */
int nb_ttype_block_elems(nb_ttype t);
int nb_ttype_block_bytes(nb_ttype t);
/* Bytes of one row of n elements; fails when n is not a block multiple or
 * the size overflows. */
nb_code nb_ttype_row_bytes(nb_ttype t, int64_t n, size_t *out, nb_err *err);

#define NB_TENSOR_NAME_MAX 128

typedef struct nb_tensor {
    char name[NB_TENSOR_NAME_MAX];
    nb_ttype type;
    int64_t cols;          /* innermost, contiguous dimension (GGUF ne[0]) */
    int64_t rows;          /* product of the outer dimensions; 1 for vectors */
    int n_dims;            /* as stored (1 or 2 for Llama weights) */
    const uint8_t *data;   /* first byte, inside the owner's mapping */
    size_t row_bytes;
    /* >0: rows are stored in llama.cpp's rotary-permuted order for this many
     * heads (GGUF q/k weights); nb_tensor_row() undoes it so callers always
     * see HF order. */
    int qk_perm_heads;
} nb_tensor;

/* Logical row r in HF order. r must be < rows. */
const void *nb_tensor_row(const nb_tensor *t, int64_t r);

/* Dequantizes one stored row of n elements to fp32 exactly as gguf-py does
 * (float32 arithmetic, no fused multiply-add). n must be a block multiple;
 * src needs no particular alignment. */
void nb_dequant_row(nb_ttype t, const void *src, int64_t n, float *dst);

/* Logical row r (HF order) as t->cols fp32 values, or rounded to bf16 (RNE)
 * as HF transformers holds it after loading in bfloat16. */
void nb_tensor_row_f32(const nb_tensor *t, int64_t r, float *dst);
void nb_tensor_row_bf16(const nb_tensor *t, int64_t r, nb_bf16 *dst);

#endif
