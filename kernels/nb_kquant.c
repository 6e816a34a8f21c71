/* nb_kquant: the reference definition of a linear with Q5_0, Q4_K or Q6_K weights (portable C)
 * against Q8 activations; nb_avx2_kquant.c reproduces it bit for bit. */
#include "nb_kernels_impl.h"

/* The activations are nb_q8_quantize_row's 32-blocks, as for Q4_1 and Q8_0 (nb_portable.c):
 * quants x_q, scale d_x[b], d_x[b] * sum(x_q) in s_x[b]. Every 32 weights of a row meet one
 * activation block in exact integer arithmetic, the block's small integer scales folded in, and
 * the row's one fp32 sum then gains float(I) * (d_w * d_x[b]), blocks in order:
 *   Q5_0: I = sum (q - 16) x_q
 *   Q4_K: I = sc[s] * sum q x_q (s: the sub-block); and mt += (dmin * m[s]) * s_x[b]
 *         in a sum of its own; out = acc - mt
 *   Q6_K: I = sc[2g] * sum_{t<16} (q - 32) x_q + sc[2g+1] * sum_{t>=16} (q - 32) x_q
 * I stays exact (|I| < 2^24) and so does float(I). One float step per block and row is what
 * lets the SIMD kernels keep 8 rows in the 8 lanes of one vector (nb_avx2_kquant.c) and stream
 * at the read bandwidth; per-lane sums (8 floats per row, reduced by a tree) cost a convert,
 * multiply and add per row and 4 weights, which kept decode at 35-50% of it. The result is the
 * dot of the dequantized weights with the Q8 activations up to fp32 rounding of the per-block
 * terms (test_kernels checks it against fp64). */

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
    float acc = 0.0f, mt = 0.0f;
    int sc[8], m[8];
    for (int S = 0; S < K / NB_QUANT_QK_K; S++) {
        const uint8_t *blk = row + (size_t)S * NB_QUANT_Q4_K_BYTES;
        float d = nb_quant_f16_at(blk + NB_QUANT_Q4_K_D);
        float dmin = nb_quant_f16_at(blk + NB_QUANT_Q4_K_DMIN);
        nb_quant_q4_k_scales(blk + NB_QUANT_Q4_K_SCALES, sc, m);
        for (int s = 0; s < 8; s++) {
            int b = 8 * S + s, is = 0;
            const uint8_t *qs = blk + NB_QUANT_Q4_K_QS + 32 * (s / 2);
            for (int t = 0; t < 32; t++)
                is += ((s & 1 ? qs[t] >> 4 : qs[t]) & 15) * xq[b * 32 + t];
            acc += (float)(is * sc[s]) * (d * xd[b]);
            mt += (dmin * (float)m[s]) * xs[b];
        }
    }
    return acc - mt;
}

static float dot_q6_k(const uint8_t *row, int K, const int8_t *xq, const float *xd)
{
    float acc = 0.0f;
    int w[32];
    for (int S = 0; S < K / NB_QUANT_QK_K; S++) {
        const uint8_t *blk = row + (size_t)S * NB_QUANT_Q6_K_BYTES;
        float d = nb_quant_f16_at(blk + NB_QUANT_Q6_K_D);
        const int8_t *sc = (const int8_t *)(blk + NB_QUANT_Q6_K_SCALES);
        for (int g = 0; g < 8; g++) {
            int b = 8 * S + g, ia = 0, ib = 0;
            nb_quant_q6_k_group(blk, g, w);
            for (int t = 0; t < 16; t++) {
                ia += (w[t] - 32) * xq[b * 32 + t];
                ib += (w[t + 16] - 32) * xq[b * 32 + t + 16];
            }
            acc += (float)(sc[2 * g] * ia + sc[2 * g + 1] * ib) * (d * xd[b]);
        }
    }
    return acc;
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
