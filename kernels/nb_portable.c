/* nb_portable: the portable C reference kernels, the truth every faster path is tested against,
 * plus the few ops that have no faster path (f32 norm/add/RoPE, top-k, block dequantization). */
#include "nb_kernels.h"
#include "nb_kernels_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- block dequantization (gguf-py, bit for bit) -------------------------- */

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

/* ---- linear layers ---------------------------------------------------------- */

/* Eight fixed partial sums: a defined summation order the compiler can
 * vectorise without -ffast-math, and that the AVX2 path reproduces exactly. */
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

/* Dot of a bf16 activation row with one quantized weight row: per block
 * eight partial sums, their tree, then the blocks in order. */
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

/* Rows come through nb_wmat_row, so the reference also reads matrices a
 * SIMD path packed (bit-identical bytes, just gathered). */
static void portable_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                                 int j0, int j1)
{
    uint8_t *tmp = W->layout == NB_LAYOUT_ROWS ? NULL : nb_scratch_or_die(W->row_bytes);
    for (int j = j0; j < j1; j++) {
        const uint8_t *row = nb_wmat_row(W, j, tmp);
        for (int i = 0; i < n; i++) {
            const nb_bf16 *x = X + (size_t)i * W->cols;
            float s = W->type == NB_W_BF16 ? dot_bf16(x, (const nb_bf16 *)row, W->cols)
                                           : dot_q(W, x, row);
            if (f32out)
                ((float *)Y)[(size_t)i * W->rows + j] = s;
            else
                ((nb_bf16 *)Y)[(size_t)i * W->rows + j] = nb_f32_to_bf16(s);
        }
    }
}

static void portable_linear_f32(const nb_wmat *W, const float *X, int n, float *Y, int j0, int j1)
{
    uint8_t *tmp = W->layout == NB_LAYOUT_ROWS ? NULL : nb_scratch_or_die(W->row_bytes);
    for (int j = j0; j < j1; j++) {
        const float *row = (const float *)nb_wmat_row(W, j, tmp);
        for (int i = 0; i < n; i++)
            Y[(size_t)i * W->rows + j] = dot_f32(X + (size_t)i * W->cols, row, W->cols);
    }
}

static nb_code portable_wmat_finish(nb_wmat *w, nb_err *err)
{
    return nb_wmat_place(w, NB_LAYOUT_ROWS, err);
}

/* ---- element-wise ------------------------------------------------------------ */

static void portable_rmsnorm_bf16(nb_bf16 *y, const nb_bf16 *x, const nb_bf16 *w, int n, int dim,
                                  float eps)
{
    for (int i = 0; i < n; i++) {
        const nb_bf16 *xr = x + (size_t)i * dim;
        nb_bf16 *yr = y + (size_t)i * dim;
        float r = nb_rms_scale_bf16(xr, dim, eps);
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

static void portable_rope_bf16(nb_bf16 *x, int n_heads, int hd, const float *cos,
                               const float *sin)
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

static void portable_silu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float a = nb_round_bf16(silu(nb_bf16_to_f32(g[i])));
        out[i] = nb_f32_to_bf16(a * nb_bf16_to_f32(u[i]));
    }
}

static void portable_silu_mul_f32(float *out, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = silu(g[i]) * u[i];
}

static void portable_add_bf16(nb_bf16 *x, const nb_bf16 *d, size_t n)
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
    static void NAME(const nb_attn_args *a, int i0, int i1, int h0, int h1)                     \
    {                                                                                            \
        int hd = a->hd, group = a->n_heads / a->n_kv, kvdim = a->n_kv * hd;                      \
        int qdim = a->n_heads * hd;                                                              \
        const T *q = a->q, *kc = a->kc, *vc = a->vc;                                             \
        T *out = a->out;                                                                         \
        float scale = 1.0f / sqrtf((float)hd);                                                   \
        int ctx = a->pos0 + i1;                                                                  \
        float *sc = nb_scratch_or_die(sizeof(float) * ((size_t)ctx + 2 * (size_t)hd));           \
        float *acc = sc + ctx, *qf = acc + hd;                                                   \
        for (int i = i0; i < i1; i++) {                                                          \
            int len = a->pos0 + i + 1;                                                           \
            for (int h = h0; h < h1; h++) {                                                      \
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
    }

#define F32_ID(x) (x)
ATTN_GEN(portable_attention_bf16, nb_bf16, nb_bf16_to_f32, nb_f32_to_bf16)
ATTN_GEN(portable_attention_f32, float, F32_ID, F32_ID)

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

const nb_kernel_table nb_kernels_portable = {
    .isa = NB_ISA_PORTABLE,
    .wmat_finish = portable_wmat_finish,
    .linear_bf16 = portable_linear_bf16,
    .linear_f32 = portable_linear_f32,
    .rmsnorm_bf16 = portable_rmsnorm_bf16,
    .silu_mul_bf16 = portable_silu_mul_bf16,
    .silu_mul_f32 = portable_silu_mul_f32,
    .add_bf16 = portable_add_bf16,
    .rope_bf16 = portable_rope_bf16,
    .attention_bf16 = portable_attention_bf16,
    .attention_f32 = portable_attention_f32,
};
