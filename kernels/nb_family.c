/* nb_family: the kernels a Llama-like family beyond Llama needs (Gemma's fp32-weight RMSNorm,
 * the GELU-tanh gate), portable C: they are a small share of a step next to the linears. */
#include <math.h>
#include <pthread.h>

#include "nb_kernels.h"
#include "nb_kernels_impl.h"

static void rmsnorm_f32w_rows(nb_bf16 *y, const nb_bf16 *x, const float *w, int n, int dim,
                              float eps)
{
    for (int i = 0; i < n; i += 4) {
        float r[4];
        if (i + 4 <= n)
            nb_rms_scale4_bf16(x + (size_t)i * dim, dim, eps, r);
        for (int k = 0; k < 4 && i + k < n; k++) {
            const nb_bf16 *xr = x + (size_t)(i + k) * dim;
            nb_bf16 *yr = y + (size_t)(i + k) * dim;
            float rk = i + 4 <= n ? r[k] : nb_rms_scale_bf16(xr, dim, eps);
            /* (x * r) * w in fp32 and one rounding: HF's Gemma3RMSNorm computes in float */
            for (int t = 0; t < dim; t++)
                yr[t] = nb_f32_to_bf16((nb_bf16_to_f32(xr[t]) * rk) * w[t]);
        }
    }
}

typedef struct rms_job {
    nb_bf16 *y;
    const nb_bf16 *x;
    const float *w;
    int n, dim;
    float eps;
} rms_job;

static void rms_task(void *arg, int tid, int nt)
{
    const rms_job *j = arg;
    int r0, r1;
    nb_split(j->n, 1, tid, nt, &r0, &r1);
    if (r0 < r1)
        rmsnorm_f32w_rows(j->y + (size_t)r0 * j->dim, j->x + (size_t)r0 * j->dim, j->w, r1 - r0,
                          j->dim, j->eps);
}

/* Rows split over the pool in prefill (each row on its own: any split agrees). */
void nb_rmsnorm_f32w_bf16(nb_bf16 *y, const nb_bf16 *x, const float *w, int n, int dim,
                          float eps)
{
    rms_job j = {y, x, w, n, dim, eps};
    int nt = (size_t)n * dim < NB_PAR_MIN_ELEMS || n < 2 ? 1 : nb_pool_size();
    nb_pool_run(rms_task, &j, nt);
}

/* PyTorch's gelu(approximate='tanh'), its operation order. */
static inline float gelu_tanh(float x)
{
    const float beta = 0.7978845608028654f; /* sqrt(2 / pi) */
    const float kappa = 0.044715f;
    float inner = beta * (x + kappa * (x * x * x));
    return 0.5f * x * (1.0f + tanhf(inner));
}

/* The bf16 gate's activation, bf16(gelu_tanh(g)), is a function of a 16-bit input: a table of
 * all 65536 answers (128 KiB, made once) gives every one bit for bit, where tanhf per element
 * was 15% of Gemma's prefill. */
static nb_bf16 gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    for (uint32_t v = 0; v < (1u << 16); v++)
        gelu_table[v] = nb_f32_to_bf16(nb_round_bf16(gelu_tanh(nb_bf16_to_f32((nb_bf16)v))));
}

typedef struct gelu_job {
    nb_bf16 *out;
    const nb_bf16 *g, *u;
    size_t n;
} gelu_job;

static void gelu_task(void *arg, int tid, int nt)
{
    const gelu_job *j = arg;
    size_t lo, hi;
    nb_split_elems(j->n, tid, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        float a = nb_bf16_to_f32(gelu_table[j->g[i]]);
        j->out[i] = nb_f32_to_bf16(a * nb_bf16_to_f32(j->u[i]));
    }
}

void nb_gelu_mul_bf16(nb_bf16 *out, const nb_bf16 *g, const nb_bf16 *u, size_t n)
{
    pthread_once(&gelu_once, gelu_table_init);
    gelu_job j = {out, g, u, n};
    nb_pool_run(gelu_task, &j, n < NB_PAR_MIN_ELEMS ? 1 : nb_pool_size());
}

void nb_gelu_mul_f32(float *out, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gelu_tanh(g[i]) * u[i];
}
