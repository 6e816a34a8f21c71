/* nb_quant: the format table and the scalar block dequantization, bit-identical to gguf-py's
 * numpy code; the reference the loaders read weights with and every kernel path is tested by. */
#include "nb_quant.h"

#include <strings.h>

static const struct {
    const char *name;
    int block_elems;
    int block_bytes;
} fmts[NB_QUANT_COUNT] = {
    [NB_QUANT_F32] = {"F32", 1, 4},
    [NB_QUANT_F16] = {"F16", 1, 2},
    [NB_QUANT_BF16] = {"BF16", 1, 2},
    [NB_QUANT_Q8_0] = {"Q8_0", NB_QUANT_QK, NB_QUANT_Q8_0_BYTES},
    [NB_QUANT_Q4_0] = {"Q4_0", NB_QUANT_QK, NB_QUANT_Q4_0_BYTES},
    [NB_QUANT_Q4_1] = {"Q4_1", NB_QUANT_QK, NB_QUANT_Q4_1_BYTES},
    [NB_QUANT_Q5_0] = {"Q5_0", NB_QUANT_QK, NB_QUANT_Q5_0_BYTES},
    [NB_QUANT_Q4_K] = {"Q4_K", NB_QUANT_QK_K, NB_QUANT_Q4_K_BYTES},
    [NB_QUANT_Q6_K] = {"Q6_K", NB_QUANT_QK_K, NB_QUANT_Q6_K_BYTES},
};

static int valid(nb_quant_fmt f)
{
    return (int)f >= 0 && f < NB_QUANT_COUNT;
}

const char *nb_quant_name(nb_quant_fmt f)
{
    return valid(f) ? fmts[f].name : "?";
}

int nb_quant_from_name(const char *name)
{
    for (int f = 0; f < NB_QUANT_COUNT; f++)
        if (name && strcasecmp(name, fmts[f].name) == 0)
            return f;
    return -1;
}

int nb_quant_block_elems(nb_quant_fmt f)
{
    return valid(f) ? fmts[f].block_elems : 0;
}

int nb_quant_block_bytes(nb_quant_fmt f)
{
    return valid(f) ? fmts[f].block_bytes : 0;
}

nb_code nb_quant_row_bytes(nb_quant_fmt f, int64_t n, size_t *out, nb_err *err)
{
    if (!valid(f))
        return nb_err_set(err, NB_EUNSUPPORTED, "tensor type %d is not supported", (int)f);
    if (n <= 0)
        return nb_err_set(err, NB_EINVAL, "row of %lld elements: must be positive", (long long)n);
    int be = fmts[f].block_elems, bb = fmts[f].block_bytes;
    if (n % be)
        return nb_err_set(err, NB_EFORMAT,
                          "row of %lld elements is not a multiple of the %s block size %d",
                          (long long)n, fmts[f].name, be);
    uint64_t blocks = (uint64_t)n / (uint64_t)be;
    if (blocks > SIZE_MAX / (uint64_t)bb)
        return nb_err_set(err, NB_ENOMEM, "row of %lld %s elements: size overflows", (long long)n,
                          fmts[f].name);
    *out = (size_t)(blocks * (uint64_t)bb);
    return NB_OK;
}

/* Q4_K's eight 6-bit scales and mins: the low six bits of bytes 0..3 (scales) and 4..7 (mins)
 * for sub-blocks 0..3; for 4..7 a nibble of bytes 8..11 below the top two bits of bytes 0..7. */
static void q4_k_scale_min(const uint8_t *s, int sc[8], int m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 0x3f;
        m[j] = s[j + 4] & 0x3f;
        sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 2) & 0x30);
        m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
    }
}

static void q4_k_block(const uint8_t *b, float *y)
{
    float d = nb_quant_f16_at(b + NB_QUANT_Q4_K_D), dmin = nb_quant_f16_at(b + NB_QUANT_Q4_K_DMIN);
    int sc[8], m[8];
    q4_k_scale_min(b + NB_QUANT_Q4_K_SCALES, sc, m);
    const uint8_t *qs = b + NB_QUANT_Q4_K_QS;
    for (int s = 0; s < 8; s++) {
        float ds = d * (float)sc[s], dm = dmin * (float)m[s];
        const uint8_t *g = qs + 32 * (s / 2);
        int shift = 4 * (s % 2);
        for (int l = 0; l < 32; l++) {
            float p = ds * (float)((g[l] >> shift) & 0x0f); /* two roundings, as numpy */
            y[32 * s + l] = p - dm;
        }
    }
}

static void q6_k_block(const uint8_t *b, float *y)
{
    float d = nb_quant_f16_at(b + NB_QUANT_Q6_K_D);
    const uint8_t *ql = b + NB_QUANT_Q6_K_QL, *qh = b + NB_QUANT_Q6_K_QH;
    for (int e = 0; e < NB_QUANT_QK_K; e++) {
        int h = e / 128, r = e % 128;
        int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
        int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
        float ds = d * (float)(int8_t)b[NB_QUANT_Q6_K_SCALES + e / 16];
        y[e] = ds * (float)((lo | hi << 4) - 32);
    }
}

void nb_quant_block_f32(nb_quant_fmt f, const uint8_t *b, float *y)
{
    int q[NB_QUANT_QK];
    switch (f) {
    case NB_QUANT_Q8_0: {
        float d = nb_quant_f16_at(b + NB_QUANT_Q8_0_D);
        for (int j = 0; j < NB_QUANT_QK; j++)
            y[j] = (float)(int8_t)b[NB_QUANT_Q8_0_QS + j] * d;
        break;
    }
    case NB_QUANT_Q4_0: {
        float d = nb_quant_f16_at(b + NB_QUANT_Q4_0_D);
        nb_quant_nibbles(b + NB_QUANT_Q4_0_QS, q);
        for (int j = 0; j < NB_QUANT_QK; j++)
            y[j] = d * (float)(q[j] - 8);
        break;
    }
    case NB_QUANT_Q4_1: {
        float d = nb_quant_f16_at(b + NB_QUANT_Q4_1_D), m = nb_quant_f16_at(b + NB_QUANT_Q4_1_M);
        nb_quant_nibbles(b + NB_QUANT_Q4_1_QS, q);
        for (int j = 0; j < NB_QUANT_QK; j++)
            y[j] = d * (float)q[j] + m;
        break;
    }
    case NB_QUANT_Q5_0: {
        float d = nb_quant_f16_at(b + NB_QUANT_Q5_0_D);
        uint32_t qh = (uint32_t)b[NB_QUANT_Q5_0_QH] | (uint32_t)b[NB_QUANT_Q5_0_QH + 1] << 8 |
                      (uint32_t)b[NB_QUANT_Q5_0_QH + 2] << 16 | (uint32_t)b[NB_QUANT_Q5_0_QH + 3] << 24;
        nb_quant_nibbles(b + NB_QUANT_Q5_0_QS, q);
        for (int j = 0; j < NB_QUANT_QK; j++)
            y[j] = d * (float)((q[j] | (int)((qh >> j) & 1) << 4) - 16);
        break;
    }
    case NB_QUANT_Q4_K:
        q4_k_block(b, y);
        break;
    case NB_QUANT_Q6_K:
        q6_k_block(b, y);
        break;
    default:
        break;
    }
}

void nb_quant_row_f32(nb_quant_fmt f, const void *src, int64_t n, float *dst)
{
    const uint8_t *s = src;
    uint16_t h;
    switch (f) {
    case NB_QUANT_F32:
        memcpy(dst, s, (size_t)n * 4);
        break;
    case NB_QUANT_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = nb_quant_f16_at(s + 2 * i);
        break;
    case NB_QUANT_BF16:
        for (int64_t i = 0; i < n; i++) {
            memcpy(&h, s + 2 * i, 2);
            dst[i] = nb_bf16_to_f32(h);
        }
        break;
    case NB_QUANT_Q8_0:
    case NB_QUANT_Q4_0:
    case NB_QUANT_Q4_1:
    case NB_QUANT_Q5_0:
    case NB_QUANT_Q4_K:
    case NB_QUANT_Q6_K: {
        int be = fmts[f].block_elems;
        for (int64_t b = 0; b < n / be; b++)
            nb_quant_block_f32(f, s + (size_t)b * (size_t)fmts[f].block_bytes, dst + b * be);
        break;
    }
    default:
        break;
    }
}
