/* nb_portable: the portable C reference kernels, the truth every faster path is tested against,
 * plus the few ops that have no faster path (f32 norm/add/RoPE, top-k). */
#include "nb_kernels.h"
#include "nb_kernels_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- quantized weights: Q8 activations, integer block dots ------------------
 * The reference definition of a linear with Q4_1 / Q8_0 weights (every path
 * reproduces it bit for bit). Each activation row is quantized per 32-block
 * as llama.cpp's q8_1: d = amax/127, q = rint(x / d) in [-127, 127] (as
 * x * (1/d), clamped, so NaN and inf stay bounded), s = d * sum(q). A weight
 * block then meets it in exact integer arithmetic: for Q8_0, lane l (weights
 * 4l..4l+3) of acc gains float(sum w_q x_q) * (d_w d) and the output is
 * tree(acc); for Q4_1 the block's whole integer dot goes into one sum
 * (dot_q4_1), its offset m_w s into another, and the output is their sum. */

void nb_q8_quantize_row(const float *x, int k, int8_t *q, float *d, float *s)
{
    for (int b = 0; b < k / 32; b++) {
        const float *xb = x + (size_t)b * 32;
        float amax = 0.0f;
        for (int t = 0; t < 32; t++) {
            float a = fabsf(xb[t]);
            if (a > amax) /* NaN never wins */
                amax = a;
        }
        float db = amax / 127.0f, id = db > 0.0f ? 1.0f / db : 0.0f;
        int sum = 0;
        for (int t = 0; t < 32; t++) {
            float v = xb[t] * id;
            if (!(v >= -127.0f)) /* NaN clamps low, as the SIMD max does */
                v = -127.0f;
            if (v > 127.0f)
                v = 127.0f;
            int qi = (int)lrintf(v);
            q[b * 32 + t] = (int8_t)qi;
            sum += qi;
        }
        d[b] = db;
        s[b] = db * (float)sum;
    }
}

/* Output element idx of a bf16-activation linear: fp32, or rounded to bf16. */
static void put_out(void *Y, int f32out, size_t idx, float s)
{
    if (f32out)
        ((float *)Y)[idx] = s;
    else
        ((nb_bf16 *)Y)[idx] = nb_f32_to_bf16(s);
}

/* Q8_0: lane l of acc gains float(sum of the lane's 4 products) * (d_w d); tree(acc) + 0 (the
 * + 0, once Q4_1's zero offset sum, turns a -0 row into +0; the SIMD kernels do the same). */
static float dot_q8_0(const nb_wmat *W, const int8_t *xq, const float *xd, const uint8_t *row)
{
    float acc[8] = {0};
    for (int b = 0; b < W->cols / NB_QUANT_QK; b++) {
        const uint8_t *blk = row + (size_t)b * NB_QUANT_Q8_0_BYTES;
        const int8_t *xb = xq + b * NB_QUANT_QK;
        float dd = nb_quant_f16_at(blk + NB_QUANT_Q8_0_D) * xd[b];
        for (int l = 0; l < 8; l++) {
            int is = 0;
            for (int t = 4 * l; t < 4 * l + 4; t++)
                is += (int8_t)blk[NB_QUANT_Q8_0_QS + t] * xb[t];
            acc[l] += (float)is * dd;
        }
    }
    return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) +
           0.0f;
}

/* Q4_1: the whole block's integer dot, acc += float(isum) * (d_w d) and mt += m_w s in block
 * order, acc + mt. One float step per block and row (not per 4 weights): the SIMD kernels keep 8
 * rows in the lanes of one register and pay the float work once per 8 rows. */
static float dot_q4_1(const nb_wmat *W, const int8_t *xq, const float *xd, const float *xs,
                      const uint8_t *row)
{
    float acc = 0.0f, mt = 0.0f;
    for (int b = 0; b < W->cols / NB_QUANT_QK; b++) {
        const uint8_t *blk = row + (size_t)b * NB_QUANT_Q4_1_BYTES;
        const int8_t *xb = xq + b * NB_QUANT_QK;
        int w[NB_QUANT_QK], is = 0;
        nb_quant_nibbles(blk + NB_QUANT_Q4_1_QS, w);
        for (int t = 0; t < NB_QUANT_QK; t++)
            is += w[t] * xb[t];
        acc += (float)is * (nb_quant_f16_at(blk + NB_QUANT_Q4_1_D) * xd[b]);
        mt += nb_quant_f16_at(blk + NB_QUANT_Q4_1_M) * xs[b];
    }
    return acc + mt;
}

static void portable_linear_q8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                               int j0, int j1)
{
    int K = W->cols, nb = K / 32;
    size_t rb = (W->row_bytes + 63) & ~(size_t)63, qb = ((size_t)n * K + 63) & ~(size_t)63;
    uint8_t *tmp = nb_scratch_or_die(rb + qb + sizeof(float) * ((size_t)2 * n * nb + (size_t)K));
    int8_t *xq = (int8_t *)(tmp + rb);
    float *xd = (float *)(tmp + rb + qb), *xs = xd + (size_t)n * nb, *xf = xs + (size_t)n * nb;
    for (int i = 0; i < n; i++) {
        for (int t = 0; t < K; t++)
            xf[t] = nb_bf16_to_f32(X[(size_t)i * K + t]);
        nb_q8_quantize_row(xf, K, xq + (size_t)i * K, xd + (size_t)i * nb, xs + (size_t)i * nb);
    }
    for (int j = j0; j < j1; j++) {
        const uint8_t *row = nb_wmat_row(W, j, W->layout == NB_LAYOUT_ROWS ? NULL : tmp);
        for (int i = 0; i < n; i++) {
            float s;
            if (W->type == NB_W_Q4_1) {
                s = dot_q4_1(W, xq + (size_t)i * K, xd + (size_t)i * nb, xs + (size_t)i * nb,
                             row);
            } else if (W->type == NB_W_Q8_0) {
                s = dot_q8_0(W, xq + (size_t)i * K, xd + (size_t)i * nb, row);
            } else {
                nb_q8_act a = {xq + (size_t)i * K, xd + (size_t)i * nb, xs + (size_t)i * nb, NULL, 0};
                s = nb_kquant_dot_ref(W->type, row, K, &a);
            }
            put_out(Y, f32out, (size_t)i * W->rows + j, s);
        }
    }
}

/* Rows come through nb_wmat_row, so the reference also reads matrices a
 * SIMD path packed (bit-identical bytes, just gathered). */
static void portable_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                                 int j0, int j1)
{
    if (nb_wtype_quantized(W->type)) {
        portable_linear_q8(W, X, n, Y, f32out, j0, j1);
        return;
    }
    uint8_t *tmp = W->layout == NB_LAYOUT_ROWS ? NULL : nb_scratch_or_die(W->row_bytes);
    for (int j = j0; j < j1; j++) {
        const uint8_t *row = nb_wmat_row(W, j, tmp);
        for (int i = 0; i < n; i++) {
            float s = dot_bf16(X + (size_t)i * W->cols, (const nb_bf16 *)row, W->cols);
            put_out(Y, f32out, (size_t)i * W->rows + j, s);
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
        /* Below the k-th held value nothing can enter (false when either is NaN, which then
         * takes the full rule): one compare rejects almost all of a vocabulary. */
        if (have == k && v < vals[k - 1])
            continue;
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
