/* nb_kquant: the reference definition of a linear with Q5_0, Q4_K or Q6_K weights (portable C)
 * against Q8 activations; nb_avx2_kquant.c reproduces it bit for bit. */
#include "nb_kernels_impl.h"

/* The activations are nb_q8_quantize_row's 32-blocks, as for Q4_1 and Q8_0 (nb_portable.c):
 * quants x_q, scale d_x[b], d_x[b] * sum(x_q) in s_x[b]. Every 32 weights of a row meet one
 * activation block in exact integer arithmetic; lane l (weights 4l..4l+3 of the block) of an
 * 8-lane fp32 accumulator then gains float(I_l) * dd, and the row's output is the portable
 * tree of the lanes (minus a min term for Q4_K):
 *   Q4_K: I_l = sc[s] * sum q x_q (s: sub-block);     dd = d_w * d_x[b]
 *         and lane s of a second accumulator mt gains (dmin * m[s]) * s_x[b] per
 *         super-block; out = tree(acc) - tree(mt)
 *   Q6_K: I_l = sc[2g + l / 4] * sum (q - 32) x_q;    dd = d_w * d_x[b]
 * Folding the small integer scales of the k-quants into I_l keeps it exact (|I_l| < 2^22) and
 * costs the SIMD path one madd, where scaling in fp32 would cost a convert and a multiply per
 * sub-block. The result is the dot of the dequantized weights with the Q8 activations up to
 * fp32 rounding of the per-block terms (test_kernels checks it against fp64).
 * Q5_0 instead sums the block whole: acc += float(sum over the block of (q - 16) x_q) *
 * (d_w * d_x[b]), blocks in order, out = acc (|sum| <= 32 * 16 * 127, exact). */

static inline float tree8(const float a[8])
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* acc[l] += float(scale_l * sum over the lane's 4 products) * dd, for one 32-block. */
static inline void lanes_add(float acc[8], const int w[32], const int8_t *xb, const int sc[8],
                             float dd)
{
    for (int l = 0; l < 8; l++) {
        int is = 0;
        for (int t = 4 * l; t < 4 * l + 4; t++)
            is += w[t] * xb[t];
        acc[l] += (float)(is * sc[l]) * dd;
    }
}

/* Q5_0 sums each block whole (as Q4_1 does, nb_portable.c): decode keeps 8 rows in the 8 lanes
 * of one vector (nb_avx2_q5_0_gemv8), and one float step per block and 8 rows is what lets it
 * stream at the read bandwidth; per-lane sums cost a convert, multiply and add per row. */
static float dot_q5_0(const uint8_t *row, int K, const int8_t *xq, const float *xd)
{
    float acc = 0.0f;
    int w[32];
    for (int b = 0; b < K / 32; b++) {
        const uint8_t *blk = row + (size_t)b * NB_QUANT_Q5_0_BYTES;
        nb_quant_q5_0_quants(blk, w);
        int is = 0;
        for (int t = 0; t < 32; t++)
            is += (w[t] - 16) * xq[b * 32 + t];
        acc += (float)is * (nb_quant_f16_at(blk + NB_QUANT_Q5_0_D) * xd[b]);
    }
    return acc;
}

static float dot_q4_k(const uint8_t *row, int K, const int8_t *xq, const float *xd,
                      const float *xs)
{
    float acc[8] = {0}, mt[8] = {0};
    int w[32], sc[8], m[8], scl[8];
    for (int S = 0; S < K / NB_QUANT_QK_K; S++) {
        const uint8_t *blk = row + (size_t)S * NB_QUANT_Q4_K_BYTES;
        float d = nb_quant_f16_at(blk + NB_QUANT_Q4_K_D);
        float dmin = nb_quant_f16_at(blk + NB_QUANT_Q4_K_DMIN);
        nb_quant_q4_k_scales(blk + NB_QUANT_Q4_K_SCALES, sc, m);
        for (int s = 0; s < 8; s++) {
            int b = 8 * S + s;
            const uint8_t *qs = blk + NB_QUANT_Q4_K_QS + 32 * (s / 2);
            for (int t = 0; t < 32; t++)
                w[t] = (s & 1 ? qs[t] >> 4 : qs[t]) & 15;
            for (int l = 0; l < 8; l++)
                scl[l] = sc[s];
            lanes_add(acc, w, xq + b * 32, scl, d * xd[b]);
            mt[s] += (dmin * (float)m[s]) * xs[b];
        }
    }
    return tree8(acc) - tree8(mt);
}

static float dot_q6_k(const uint8_t *row, int K, const int8_t *xq, const float *xd)
{
    float acc[8] = {0};
    int w[32], scl[8];
    for (int S = 0; S < K / NB_QUANT_QK_K; S++) {
        const uint8_t *blk = row + (size_t)S * NB_QUANT_Q6_K_BYTES;
        float d = nb_quant_f16_at(blk + NB_QUANT_Q6_K_D);
        const int8_t *sc = (const int8_t *)(blk + NB_QUANT_Q6_K_SCALES);
        for (int g = 0; g < 8; g++) {
            int b = 8 * S + g;
            nb_quant_q6_k_group(blk, g, w);
            for (int t = 0; t < 32; t++)
                w[t] -= 32;
            for (int l = 0; l < 8; l++)
                scl[l] = sc[2 * g + l / 4];
            lanes_add(acc, w, xq + b * 32, scl, d * xd[b]);
        }
    }
    return tree8(acc);
}

float nb_kquant_dot_ref(nb_wtype t, const uint8_t *row, int K, const nb_q8_act *x)
{
    switch (t) {
    case NB_W_Q5_0: return dot_q5_0(row, K, x->q, x->d);
    case NB_W_Q4_K: return dot_q4_k(row, K, x->q, x->d, x->s);
    case NB_W_Q6_K: return dot_q6_k(row, K, x->q, x->d);
    default: return 0.0f;
    }
}
