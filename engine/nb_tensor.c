/* nb_tensor: the weight type table, row addressing (undoing llama.cpp's q/k
 * rotary permutation) and dequantization bit-identical to gguf-py's numpy code. */
#include "nb_tensor.h"

#include <strings.h>
#include <stdint.h>
#include <string.h>

#include "nb_bf16.h"

#define QK 32 /* elements per block of every quantized type we read */

static const struct {
    const char *name;
    int block_elems;
    int block_bytes;
} ttypes[NB_TT_COUNT] = {
    [NB_TT_F32] = {"F32", 1, 4},
    [NB_TT_F16] = {"F16", 1, 2},
    [NB_TT_BF16] = {"BF16", 1, 2},
    [NB_TT_Q8_0] = {"Q8_0", QK, 2 + QK},
    [NB_TT_Q4_0] = {"Q4_0", QK, 2 + QK / 2},
    [NB_TT_Q4_1] = {"Q4_1", QK, 4 + QK / 2},
};

static int valid(nb_ttype t)
{
    return (int)t >= 0 && t < NB_TT_COUNT;
}

const char *nb_ttype_name(nb_ttype t)
{
    return valid(t) ? ttypes[t].name : "?";
}

int nb_ttype_from_name(const char *name)
{
    for (int t = 0; t < NB_TT_COUNT; t++)
        if (name && strcasecmp(name, ttypes[t].name) == 0)
            return t;
    return -1;
}

int nb_ttype_block_elems(nb_ttype t)
{
    return valid(t) ? ttypes[t].block_elems : 0;
}

int nb_ttype_block_bytes(nb_ttype t)
{
    return valid(t) ? ttypes[t].block_bytes : 0;
}

nb_code nb_ttype_row_bytes(nb_ttype t, int64_t n, size_t *out, nb_err *err)
{
    if (!valid(t))
        return nb_err_set(err, NB_EUNSUPPORTED, "tensor type %d is not supported", (int)t);
    if (n <= 0)
        return nb_err_set(err, NB_EINVAL, "row of %lld elements: must be positive", (long long)n);
    int be = ttypes[t].block_elems, bb = ttypes[t].block_bytes;
    if (n % be)
        return nb_err_set(err, NB_EFORMAT,
                          "row of %lld elements is not a multiple of the %s block size %d",
                          (long long)n, ttypes[t].name, be);
    uint64_t blocks = (uint64_t)n / (uint64_t)be;
    if (blocks > SIZE_MAX / (uint64_t)bb)
        return nb_err_set(err, NB_ENOMEM, "row of %lld %s elements: size overflows", (long long)n,
                          ttypes[t].name);
    *out = (size_t)(blocks * (uint64_t)bb);
    return NB_OK;
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

/* The mapping gives no alignment guarantee (safetensors offsets are
 * arbitrary), so every multi-byte load goes through memcpy. */
static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static float ldf32(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* One block of 32 elements; formulas and operand order follow gguf-py's
 * quants.py (Q8_0: x*d; Q4_0: d*(q-8); Q4_1: (d*q)+m), all in float32. */
static void dequant_block(nb_ttype t, const uint8_t *b, float *y)
{
    switch (t) {
    case NB_TT_Q8_0: {
        float d = nb_f16_to_f32(ld16(b));
        for (int j = 0; j < QK; j++)
            y[j] = (float)(int8_t)b[2 + j] * d;
        break;
    }
    case NB_TT_Q4_0: {
        float d = nb_f16_to_f32(ld16(b));
        const uint8_t *qs = b + 2;
        for (int j = 0; j < QK / 2; j++) {
            y[j] = d * (float)((int)(qs[j] & 0x0f) - 8);
            y[j + QK / 2] = d * (float)((int)(qs[j] >> 4) - 8);
        }
        break;
    }
    case NB_TT_Q4_1: {
        float d = nb_f16_to_f32(ld16(b));
        float m = nb_f16_to_f32(ld16(b + 2));
        const uint8_t *qs = b + 4;
        for (int j = 0; j < QK / 2; j++) {
            float lo = d * (float)(qs[j] & 0x0f);
            float hi = d * (float)(qs[j] >> 4);
            y[j] = lo + m;
            y[j + QK / 2] = hi + m;
        }
        break;
    }
    default:
        break;
    }
}

void nb_dequant_row(nb_ttype t, const void *src, int64_t n, float *dst)
{
    const uint8_t *s = src;
    switch (t) {
    case NB_TT_F32:
        memcpy(dst, s, (size_t)n * 4);
        break;
    case NB_TT_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = nb_f16_to_f32(ld16(s + 2 * i));
        break;
    case NB_TT_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = nb_bf16_to_f32(ld16(s + 2 * i));
        break;
    case NB_TT_Q8_0:
    case NB_TT_Q4_0:
    case NB_TT_Q4_1: {
        int bb = ttypes[t].block_bytes;
        for (int64_t b = 0; b < n / QK; b++)
            dequant_block(t, s + (size_t)b * bb, dst + b * QK);
        break;
    }
    default:
        break;
    }
}

void nb_tensor_row_f32(const nb_tensor *t, int64_t r, float *dst)
{
    nb_dequant_row(t->type, nb_tensor_row(t, r), t->cols, dst);
}

void nb_tensor_row_bf16(const nb_tensor *t, int64_t r, nb_bf16 *dst)
{
    const uint8_t *s = nb_tensor_row(t, r);
    int64_t n = t->cols;
    switch (t->type) {
    case NB_TT_BF16: /* already bf16: copy the bits (keeps NaN payloads) */
        memcpy(dst, s, (size_t)n * 2);
        break;
    case NB_TT_F32:
        for (int64_t i = 0; i < n; i++)
            dst[i] = nb_f32_to_bf16(ldf32(s + 4 * i));
        break;
    case NB_TT_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = nb_f32_to_bf16(nb_f16_to_f32(ld16(s + 2 * i)));
        break;
    case NB_TT_Q8_0:
    case NB_TT_Q4_0:
    case NB_TT_Q4_1: {
        int bb = ttypes[t->type].block_bytes;
        float y[QK];
        for (int64_t b = 0; b < n / QK; b++) {
            dequant_block(t->type, s + (size_t)b * bb, y);
            for (int j = 0; j < QK; j++)
                dst[b * QK + j] = nb_f32_to_bf16(y[j]);
        }
        break;
    }
    default:
        break;
    }
}
