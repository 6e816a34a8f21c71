/* nb_tensor: row addressing (undoing llama.cpp's q/k rotary permutation) and rows as fp32 or
 * bf16; the type table and the dequantization itself are nb_quant's. */
#include "nb_tensor.h"

#include <string.h>

#include "nb_bf16.h"
#include "nb_quant.h"

const char *nb_ttype_name(nb_ttype t)
{
    return nb_quant_name((nb_quant_fmt)t);
}

int nb_ttype_from_name(const char *name)
{
    return nb_quant_from_name(name);
}

int nb_ttype_block_elems(nb_ttype t)
{
    return nb_quant_block_elems((nb_quant_fmt)t);
}

int nb_ttype_block_bytes(nb_ttype t)
{
    return nb_quant_block_bytes((nb_quant_fmt)t);
}

nb_code nb_ttype_row_bytes(nb_ttype t, int64_t n, size_t *out, nb_err *err)
{
    return nb_quant_row_bytes((nb_quant_fmt)t, n, out, err);
}

/* GGUF keeps q/k rows interleaved per head (llama.cpp's permute for its rope
 * kernel); HF order has the two rotary halves contiguous. */
static int64_t stored_row(const nb_tensor *t, int64_t r)
{
    if (t->qk_perm_heads <= 0)
        return r;
    int64_t hd = t->rows / t->qk_perm_heads, half = hd / 2;
    int64_t h = r / hd, rem = r % hd;
    int64_t j = rem / half, i = rem % half;
    return h * hd + 2 * i + j;
}

const void *nb_tensor_row(const nb_tensor *t, int64_t r)
{
    return t->data + (size_t)stored_row(t, r) * t->row_bytes;
}

void nb_dequant_row(nb_ttype t, const void *src, int64_t n, float *dst)
{
    nb_quant_row_f32((nb_quant_fmt)t, src, n, dst);
}

void nb_tensor_row_f32(const nb_tensor *t, int64_t r, float *dst)
{
    nb_dequant_row(t->type, nb_tensor_row(t, r), t->cols, dst);
}

void nb_tensor_row_bf16(const nb_tensor *t, int64_t r, nb_bf16 *dst)
{
    const uint8_t *s = nb_tensor_row(t, r);
    int64_t n = t->cols;
    if (t->type == NB_TT_BF16) { /* already bf16: copy the bits (keeps NaN payloads) */
        memcpy(dst, s, (size_t)n * 2);
        return;
    }
    /* Through exact fp32 values, a chunk (a multiple of every block size) at a time. */
    int be = nb_ttype_block_elems(t->type), bb = nb_ttype_block_bytes(t->type);
    if (!be)
        return;
    float y[NB_QUANT_QK_K];
    for (int64_t i = 0; i < n; i += NB_QUANT_QK_K) {
        int m = n - i < NB_QUANT_QK_K ? (int)(n - i) : NB_QUANT_QK_K;
        nb_quant_row_f32((nb_quant_fmt)t->type, s + (size_t)(i / be) * (size_t)bb, m, y);
        for (int j = 0; j < m; j++)
            dst[i + j] = nb_f32_to_bf16(y[j]);
    }
}
