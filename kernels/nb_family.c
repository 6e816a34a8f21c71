/* nb_family: the kernels a Llama-like family beyond Llama needs (Gemma's fp32-weight RMSNorm,
 * the GELU-tanh gate), portable C: they are a small share of a step next to the linears. */
#include <math.h>

#include "nb_kernels.h"
#include "nb_kernels_impl.h"

void nb_rmsnorm_f32w_bf16(nb_bf16 *y, const nb_bf16 *x, const float *w, int n, int dim,
                          float eps)
{
    for (int i = 0; i < n; i++) {
        const nb_bf16 *xr = x + (size_t)i * dim;
        nb_bf16 *yr = y + (size_t)i * dim;
        float r = nb_rms_scale_bf16(xr, dim, eps);
        /* (x * r) * w in fp32 and one rounding: HF's Gemma3RMSNorm computes in float */
        for (int t = 0; t < dim; t++)
            yr[t] = nb_f32_to_bf16((nb_bf16_to_f32(xr[t]) * r) * w[t]);
    }
}

/* PyTorch's gelu(approximate='tanh'), its operation order. */
static inline float gelu_tanh(float x)
{
    const float beta = 0.7978845608028654f; /* sqrt(2 / pi) */
    const float kappa = 0.044715f;
    float inner = beta * (x + kappa * (x * x * x));
    return 0.5f * x * (1.0f + tanhf(inner));
}

void nb_gelu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float a = nb_round_bf16(gelu_tanh(nb_bf16_to_f32(g[i])));
        out[i] = nb_f32_to_bf16(a * nb_bf16_to_f32(u[i]));
    }
}

void nb_gelu_mul_f32(float *out, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gelu_tanh(g[i]) * u[i];
}
