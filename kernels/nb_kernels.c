/* nb_kernels: dispatch, weight matrices and the portable C reference kernels.
 * Faster paths (kernels/nb_kernels_*.c) plug into the same table; this file is the truth they are tested against. */
#include "nb_kernels.h"
#include "nb_kernels_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- weight matrices ------------------------------------------------------ */

const char *nb_wtype_name(nb_wtype t)
{
    switch (t) {
    case NB_W_F32: return "f32";
    case NB_W_BF16: return "bf16";
    case NB_W_Q4_1: return "q4_1";
    case NB_W_Q8_0: return "q8_0";
    }
    return "?";
}

static size_t wtype_row_bytes(nb_wtype t, int cols)
{
    switch (t) {
    case NB_W_F32: return (size_t)cols * 4;
    case NB_W_BF16: return (size_t)cols * 2;
    case NB_W_Q4_1: return (size_t)(cols / 32) * 20;
    case NB_W_Q8_0: return (size_t)(cols / 32) * 34;
    }
    return 0;
}

nb_code nb_wmat_create(nb_wtype t, int rows, int cols, nb_wmat **out, nb_err *err)
{
    *out = NULL;
    if (rows <= 0 || cols <= 0 || rows > (1 << 24) || cols > (1 << 20))
        return nb_err_set(err, NB_EINVAL, "weight matrix %dx%d: dimensions out of range", rows,
                          cols);
    if ((t == NB_W_Q4_1 || t == NB_W_Q8_0) && cols % 32)
        return nb_err_set(err, NB_EINVAL,
                          "weight matrix %dx%d: %s needs cols to be a multiple of 32", rows, cols,
                          nb_wtype_name(t));
    nb_wmat *w = calloc(1, sizeof *w);
    if (!w)
        return nb_err_set(err, NB_ENOMEM, "out of memory for weight matrix");
    w->type = t;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = wtype_row_bytes(t, cols);
    w->bytes = w->row_bytes * (size_t)rows;
    /* 64-byte alignment: whole cache lines per row start for streaming. */
    size_t alloc = (w->bytes + 63) & ~(size_t)63;
    w->data = aligned_alloc(64, alloc);
    if (!w->data) {
        free(w);
        return nb_err_set(err, NB_ENOMEM, "out of memory for %dx%d %s weights (%zu bytes)", rows,
                          cols, nb_wtype_name(t), alloc);
    }
    *out = w;
    return NB_OK;
}

void nb_wmat_set_row(nb_wmat *w, int r, const void *src)
{
    memcpy(w->data + (size_t)r * w->row_bytes, src, w->row_bytes);
}

nb_code nb_wmat_finish(nb_wmat *w, nb_err *err)
{
    return nb_kernels_active()->wmat_finish(w, err);
}

void nb_wmat_free(nb_wmat *w)
{
    if (!w)
        return;
    free(w->data);
    free(w->packed);
    free(w);
}

int nb_wmat_rows(const nb_wmat *w) { return w->rows; }
int nb_wmat_cols(const nb_wmat *w) { return w->cols; }
nb_wtype nb_wmat_type(const nb_wmat *w) { return w->type; }
size_t nb_wmat_bytes(const nb_wmat *w) { return w->bytes + w->packed_bytes; }

void nb_wmat_get_row_f32(const nb_wmat *w, int r, float *dst)
{
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    switch (w->type) {
    case NB_W_F32:
        memcpy(dst, row, (size_t)w->cols * 4);
        break;
    case NB_W_BF16: {
        const nb_bf16 *b = (const nb_bf16 *)row;
        for (int i = 0; i < w->cols; i++)
            dst[i] = nb_bf16_to_f32(b[i]);
        break;
    }
    case NB_W_Q4_1:
        for (int b = 0; b < w->cols / 32; b++)
            nb_q4_1_block_f32(row + (size_t)b * 20, dst + b * 32);
        break;
    case NB_W_Q8_0:
        for (int b = 0; b < w->cols / 32; b++)
            nb_q8_0_block_f32(row + (size_t)b * 34, dst + b * 32);
        break;
    }
}

void nb_q4_1_block_f32(const uint8_t *blk, float *dst)
{
    uint16_t dh, mh;
    memcpy(&dh, blk, 2);
    memcpy(&mh, blk + 2, 2);
    float d = nb_f16_to_f32(dh), m = nb_f16_to_f32(mh);
    const uint8_t *qs = blk + 4;
    for (int j = 0; j < 16; j++) {
        float lo = d * (float)(qs[j] & 15), hi = d * (float)(qs[j] >> 4);
        dst[j] = lo + m;
        dst[j + 16] = hi + m;
    }
}

void nb_q8_0_block_f32(const uint8_t *blk, float *dst)
{
    uint16_t dh;
    memcpy(&dh, blk, 2);
    float d = nb_f16_to_f32(dh);
    const int8_t *qs = (const int8_t *)(blk + 2);
    for (int j = 0; j < 32; j++)
        dst[j] = d * (float)qs[j];
}

/* ---- portable linear layers ---------------------------------------------- */

/* Eight fixed partial sums: a defined summation order the compiler can
 * vectorise without -ffast-math. */
static float dot_bf16(const nb_bf16 *x, const nb_bf16 *w, int k)
{
    float acc[8] = {0};
    int t = 0;
    for (; t + 8 <= k; t += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += nb_bf16_to_f32(x[t + l]) * nb_bf16_to_f32(w[t + l]);
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; t < k; t++)
        s += nb_bf16_to_f32(x[t]) * nb_bf16_to_f32(w[t]);
    return s;
}

static float dot_f32(const float *x, const float *w, int k)
{
    float acc[8] = {0};
    int t = 0;
    for (; t + 8 <= k; t += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += x[t + l] * w[t + l];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; t < k; t++)
        s += x[t] * w[t];
    return s;
}

/* Dot of a bf16 activation row with one quantized weight row. */
static float dot_q(const nb_wmat *W, const nb_bf16 *x, const uint8_t *row)
{
    float blk[32], s = 0.0f;
    for (int b = 0; b < W->cols / 32; b++) {
        if (W->type == NB_W_Q4_1)
            nb_q4_1_block_f32(row + (size_t)b * 20, blk);
        else
            nb_q8_0_block_f32(row + (size_t)b * 34, blk);
        float acc[8] = {0};
        for (int t = 0; t < 32; t += 8)
            for (int l = 0; l < 8; l++)
                acc[l] += nb_bf16_to_f32(x[b * 32 + t + l]) * blk[t + l];
        s += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    return s;
}

static float row_dot_bf16(const nb_wmat *W, const nb_bf16 *x, int j)
{
    const uint8_t *row = W->data + (size_t)j * W->row_bytes;
    if (W->type == NB_W_BF16)
        return dot_bf16(x, (const nb_bf16 *)row, W->cols);
    return dot_q(W, x, row);
}

static void portable_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                                 int j0, int j1)
{
    for (int i = 0; i < n; i++) {
        const nb_bf16 *x = X + (size_t)i * W->cols;
        for (int j = j0; j < j1; j++) {
            float s = row_dot_bf16(W, x, j);
            if (f32out)
                ((float *)Y)[(size_t)i * W->rows + j] = s;
            else
                ((nb_bf16 *)Y)[(size_t)i * W->rows + j] = nb_f32_to_bf16(s);
        }
    }
}

static void portable_linear_f32(const nb_wmat *W, const float *X, int n, float *Y, int j0, int j1)
{
    for (int i = 0; i < n; i++)
        for (int j = j0; j < j1; j++)
            Y[(size_t)i * W->rows + j] =
                dot_f32(X + (size_t)i * W->cols,
                        (const float *)(W->data + (size_t)j * W->row_bytes), W->cols);
}

static nb_code portable_wmat_finish(nb_wmat *w, nb_err *err)
{
    (void)w;
    (void)err;
    return NB_OK;
}

const nb_kernel_table nb_kernels_portable = {
    .isa = NB_ISA_PORTABLE,
    .wmat_finish = portable_wmat_finish,
    .linear_bf16 = portable_linear_bf16,
    .linear_f32 = portable_linear_f32,
};

void nb_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, nb_bf16 *Y)
{
    nb_kernels_active()->linear_bf16(W, X, n, Y, 0, 0, W->rows);
}

void nb_linear_bf16_f32out(const nb_wmat *W, const nb_bf16 *X, int n, float *Y)
{
    nb_kernels_active()->linear_bf16(W, X, n, Y, 1, 0, W->rows);
}

void nb_linear_f32(const nb_wmat *W, const float *X, int n, float *Y)
{
    nb_kernels_active()->linear_f32(W, X, n, Y, 0, W->rows);
}

/* ---- element-wise ---------------------------------------------------------- */

void nb_rmsnorm_bf16(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim, float eps)
{
    for (int i = 0; i < n; i++) {
        const nb_bf16 *xr = x + (size_t)i * dim;
        nb_bf16 *yr = y + (size_t)i * dim;
        float ss = 0.0f;
        for (int t = 0; t < dim; t++) {
            float v = nb_bf16_to_f32(xr[t]);
            ss += v * v;
        }
        float r = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int t = 0; t < dim; t++) {
            float h = nb_round_bf16(nb_bf16_to_f32(xr[t]) * r);
            yr[t] = nb_f32_to_bf16(nb_bf16_to_f32(w[t]) * h);
        }
    }
}

void nb_rmsnorm_f32(float *y, const float *x, const float *w, int n, int dim, float eps)
{
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * dim;
        float *yr = y + (size_t)i * dim;
        float ss = 0.0f;
        for (int t = 0; t < dim; t++)
            ss += xr[t] * xr[t];
        float r = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int t = 0; t < dim; t++)
            yr[t] = w[t] * (xr[t] * r);
    }
}

void nb_rope_bf16(nb_bf16 *x, int n_heads, int hd, const float *cos, const float *sin)
{
    int half = hd / 2;
    for (int h = 0; h < n_heads; h++) {
        nb_bf16 *v = x + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            float a = nb_bf16_to_f32(v[i]), b = nb_bf16_to_f32(v[i + half]);
            float c = cos[i], s = sin[i];
            v[i] = nb_f32_to_bf16(nb_round_bf16(a * c) + nb_round_bf16(-b * s));
            v[i + half] = nb_f32_to_bf16(nb_round_bf16(b * c) + nb_round_bf16(a * s));
        }
    }
}

void nb_rope_f32(float *x, int n_heads, int hd, const float *cos, const float *sin)
{
    int half = hd / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * cos[i] - b * sin[i];
            v[i + half] = b * cos[i] + a * sin[i];
        }
    }
}

static inline float silu(float g)
{
    return g / (1.0f + expf(-g));
}

void nb_silu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float a = nb_round_bf16(silu(nb_bf16_to_f32(g[i])));
        out[i] = nb_f32_to_bf16(a * nb_bf16_to_f32(u[i]));
    }
}

void nb_silu_mul_f32(float *out, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = silu(g[i]) * u[i];
}

void nb_add_bf16(nb_bf16 *x, const nb_bf16 *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = nb_f32_to_bf16(nb_bf16_to_f32(x[i]) + nb_bf16_to_f32(d[i]));
}

void nb_add_f32(float *x, const float *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += d[i];
}

/* ---- attention ------------------------------------------------------------- */

/* One query head against keys 0..len-1: two passes (max, then exp-sum and
 * weighted sum) so the result does not depend on any tiling. */
#define ATTN_GEN(NAME, T, LOAD, STORE)                                                           \
    void NAME(T *out, const T *q, const T *kc, const T *vc, int n, int pos0, int n_heads,       \
              int n_kv, int hd)                                                                  \
    {                                                                                            \
        int group = n_heads / n_kv, kvdim = n_kv * hd, qdim = n_heads * hd;                      \
        float scale = 1.0f / sqrtf((float)hd);                                                   \
        int ctx = pos0 + n;                                                                      \
        float *sc = malloc(sizeof(float) * (size_t)(ctx > 0 ? ctx : 1));                         \
        float *acc = malloc(sizeof(float) * (size_t)hd);                                         \
        float *qf = malloc(sizeof(float) * (size_t)hd);                                          \
        if (!sc || !acc || !qf)                                                                  \
            abort(); /* hd and ctx are bounded at setup; this is true OOM */                    \
        for (int i = 0; i < n; i++) {                                                            \
            int len = pos0 + i + 1;                                                              \
            for (int h = 0; h < n_heads; h++) {                                                  \
                const T *qh = q + (size_t)i * qdim + (size_t)h * hd;                             \
                int kvh = h / group;                                                             \
                for (int t = 0; t < hd; t++)                                                     \
                    qf[t] = LOAD(qh[t]);                                                         \
                float mx = -INFINITY;                                                            \
                for (int p = 0; p < len; p++) {                                                  \
                    const T *kr = kc + (size_t)p * kvdim + (size_t)kvh * hd;                     \
                    float s = 0.0f;                                                              \
                    for (int t = 0; t < hd; t++)                                                 \
                        s += qf[t] * LOAD(kr[t]);                                                \
                    s *= scale;                                                                  \
                    sc[p] = s;                                                                   \
                    if (s > mx)                                                                  \
                        mx = s;                                                                  \
                }                                                                                \
                float sum = 0.0f;                                                                \
                for (int p = 0; p < len; p++) {                                                  \
                    sc[p] = expf(sc[p] - mx);                                                    \
                    sum += sc[p];                                                                \
                }                                                                                \
                for (int t = 0; t < hd; t++)                                                     \
                    acc[t] = 0.0f;                                                               \
                for (int p = 0; p < len; p++) {                                                  \
                    const T *vr = vc + (size_t)p * kvdim + (size_t)kvh * hd;                     \
                    float wgt = sc[p] / sum;                                                     \
                    for (int t = 0; t < hd; t++)                                                 \
                        acc[t] += wgt * LOAD(vr[t]);                                             \
                }                                                                                \
                T *o = out + (size_t)i * qdim + (size_t)h * hd;                                  \
                for (int t = 0; t < hd; t++)                                                     \
                    o[t] = STORE(acc[t]);                                                        \
            }                                                                                    \
        }                                                                                        \
        free(sc);                                                                                \
        free(acc);                                                                               \
        free(qf);                                                                                \
    }

#define F32_ID(x) (x)
ATTN_GEN(nb_attention_bf16, nb_bf16, nb_bf16_to_f32, nb_f32_to_bf16)
ATTN_GEN(nb_attention_f32, float, F32_ID, F32_ID)

/* ---- top-k ------------------------------------------------------------------ */

/* a ranks before b: larger value, then smaller id; NaN never ranks first. */
static int ranks_before(float va, int32_t ia, float vb, int32_t ib)
{
    if (isnan(vb))
        return !isnan(va) || ia < ib;
    if (isnan(va))
        return 0;
    return va > vb || (va == vb && ia < ib);
}

void nb_topk_f32(const float *x, int n, int k, int32_t *ids, float *vals)
{
    int have = 0;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (have == k && !ranks_before(v, i, vals[k - 1], ids[k - 1]))
            continue;
        int pos = have < k ? have++ : k - 1;
        while (pos > 0 && ranks_before(v, i, vals[pos - 1], ids[pos - 1])) {
            vals[pos] = vals[pos - 1];
            ids[pos] = ids[pos - 1];
            pos--;
        }
        vals[pos] = v;
        ids[pos] = i;
    }
}
