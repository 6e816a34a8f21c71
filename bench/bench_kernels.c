/* bench_kernels: read bandwidth (STREAM-like), compute peak, decode GEMV GB/s and prefill GEMM GFLOP/s
 * per kernel path and weight type, on SmolLM2-135M's shapes.
 * Usage: bench_kernels [--threads N] [--quick] [--bandwidth (only the read bandwidth and peak)]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_kernels.h"
#include "nb_kernels_impl.h"
#include "nb_time.h"

/* SmolLM2-135M: dim 576, kv_dim 192, ffn 1536, 30 layers, vocab 49152. */
#define DIM 576
#define KV 192
#define FFN 1536
#define LAYERS 30
#define VOCAB 49152

static double min_seconds = 1.0;

/* ---- read bandwidth ------------------------------------------------------------- */

typedef struct rd_job {
    const uint64_t *p;
    size_t words;
    uint64_t sums[64];
} rd_job;

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
    /* unsigned: the sum of arbitrary words wraps, which signed lanes may not (UB) */
    typedef unsigned long long v4 __attribute__((vector_size(32)));
    v4 a = {0, 0, 0, 0}, b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a += *(const v4 *)(p + i);
        b += *(const v4 *)(p + i + 4);
        c += *(const v4 *)(p + i + 8);
        d += *(const v4 *)(p + i + 12);
    }
    a += b + c + d;
    uint64_t s = (uint64_t)(a[0] + a[1] + a[2] + a[3]);
    for (; i < n; i++)
        s += p[i];
    return s;
}
#endif

static uint64_t sum_plain(const uint64_t *p, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += p[i];
    return s;
}

static void rd_task(void *arg, int tid, int nt)
{
    rd_job *j = arg;
    size_t per = j->words / (size_t)nt, lo = per * (size_t)tid;
    size_t hi = tid == nt - 1 ? j->words : lo + per;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        j->sums[tid & 63] = sum_avx2(j->p + lo, hi - lo);
        return;
    }
#endif
    j->sums[tid & 63] = sum_plain(j->p + lo, hi - lo);
}

/* GB/s reading a 512 MiB weight-slab buffer with nt threads. */
static double read_bandwidth(int nt)
{
    nb_wmat *w;
    nb_err err = {0};
    if (nb_wmat_create(NB_W_BF16, 262144, 1024, &w, &err)) {
        fprintf(stderr, "bench_kernels: %s\n", err.msg);
        exit(2);
    }
    memset(w->data, 1, w->bytes);
    rd_job j = {(const uint64_t *)w->data, w->bytes / 8, {0}};
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = nb_now_ms();
        nb_pool_run(rd_task, &j, nt);
        double gbs = (double)w->bytes / ((nb_now_ms() - t0) * 1e6);
        if (gbs > best)
            best = gbs;
    }
    nb_wmat_free(w);
    return best;
}

/* ---- compute peak ------------------------------------------------------------------ */

/* The core clock in GHz as it runs now (turbo included): a chain of
 * dependent adds retires one per cycle (1-cycle latency on every x86 core);
 * 8 per loop trip hide the branch. Load from other processes reads as a
 * lower clock. 0 where it cannot be measured. */
static double core_ghz(void)
{
#if defined(__x86_64__)
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t n = 25000000, acc = 0;
        double t0 = nb_now_ms();
        __asm__ volatile("1:\n\t"
                         "add $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\t"
                         "add $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\t"
                         "dec %0\n\tjnz 1b"
                         : "+r"(n), "+r"(acc));
        double ghz = 2e8 / ((nb_now_ms() - t0) * 1e6);
        best = ghz > best ? ghz : best;
    }
    return best;
#else
    return 0;
#endif
}

/* bf16/fp32 multiply-add FLOP per cycle per core of each path's inner
 * instruction at full issue (docs/performance.md): portable's SSE2 mul +
 * add on 4 lanes, two ports; AVX2: 2 FMA ports x 8 lanes x 2; AVX-512
 * BF16: 2 ports x 16 lanes x 2 products x 2 (parts with one 512-bit FMA
 * port: half); AMX: one 16x16x32 TDPBF16PS per 16 cycles. */
static double flop_per_cycle(nb_isa isa)
{
    switch (isa) {
    case NB_ISA_PORTABLE: return 8;
    case NB_ISA_AVX2: return 32;
    case NB_ISA_AVX512BF16: return 128;
    case NB_ISA_AMXBF16: return 1024;
    }
    return 0;
}

/* ---- a model's worth of weights ---------------------------------------------------- */

typedef struct model_w {
    nb_wmat *m[LAYERS][7];
    nb_wmat *lm;
    size_t bytes;
} model_w;

static nb_wmat *rand_wmat(nb_wtype t, int rows, int cols)
{
    nb_wmat *w;
    nb_err err = {0};
    if (nb_wmat_create(t, rows, cols, &w, &err)) {
        fprintf(stderr, "bench_kernels: %s\n", err.msg);
        exit(2);
    }
    /* Content does not change the speed of these kernels; keep the values
     * finite (zeros would do, random bytes keep the memory honest). */
    uint32_t s = 12345;
    uint8_t *p = w->data;
    for (size_t i = 0; i < w->bytes; i++) {
        s = s * 1103515245u + 12345u;
        p[i] = (uint8_t)(s >> 24);
    }
    if (t == NB_W_BF16 || t == NB_W_F32) {
        /* clear exponents that could make inf/NaN: small numbers only */
        if (t == NB_W_BF16)
            for (size_t i = 0; i < w->bytes / 2; i++)
                ((uint16_t *)p)[i] &= 0xbfff;
        else
            for (size_t i = 0; i < w->bytes / 4; i++)
                ((uint32_t *)p)[i] &= 0xbfffffff;
    } else {
        size_t bb = t == NB_W_Q4_1 ? 20 : 34;
        for (size_t b = 0; b < w->bytes / bb; b++) {
            uint16_t d = 0x2000; /* 2^-7 */
            memcpy(p + b * bb, &d, 2);
            if (t == NB_W_Q4_1) {
                uint16_t m = 0xa400;
                memcpy(p + b * bb + 2, &m, 2);
            }
        }
    }
    if (nb_wmat_finish(w, &err)) {
        fprintf(stderr, "bench_kernels: %s\n", err.msg);
        exit(2);
    }
    return w;
}

static void model_build(model_w *mw, nb_wtype t, nb_wtype lm_t)
{
    static const int shape[7][2] = {{DIM, DIM}, {KV, DIM}, {KV, DIM}, {DIM, DIM},
                                    {FFN, DIM}, {FFN, DIM}, {DIM, FFN}};
    mw->bytes = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < 7; k++) {
            mw->m[l][k] = rand_wmat(t, shape[k][0], shape[k][1]);
            mw->bytes += nb_wmat_bytes(mw->m[l][k]);
        }
    mw->lm = rand_wmat(lm_t, VOCAB, DIM);
    mw->bytes += nb_wmat_bytes(mw->lm);
}

static void model_free(model_w *mw)
{
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < 7; k++)
            nb_wmat_free(mw->m[l][k]);
    nb_wmat_free(mw->lm);
}

/* One decode step's linear layers (all 210 plus the LM head, n = 1):
 * seconds per step. */
static double decode_step_linears(const model_w *mw, nb_bf16 *x, nb_bf16 *y)
{
    double t0 = nb_now_ms();
    int steps = 0;
    do {
        for (int l = 0; l < LAYERS; l++)
            for (int k = 0; k < 7; k++)
                nb_linear_bf16(mw->m[l][k], x, 1, y);
        nb_linear_bf16(mw->lm, x, 1, y);
        steps++;
    } while (nb_now_ms() - t0 < min_seconds * 1e3);
    return (nb_now_ms() - t0) / 1e3 / steps;
}

/* One prefill chunk (n rows) through a layer's seven linears: GFLOP/s. */
static double prefill_gflops(const model_w *mw, int n, nb_bf16 *x, nb_bf16 *y)
{
    double flop = 0;
    for (int k = 0; k < 7; k++)
        flop += 2.0 * n * nb_wmat_rows(mw->m[0][k]) * nb_wmat_cols(mw->m[0][k]);
    double t0 = nb_now_ms();
    long reps = 0;
    do {
        int l = (int)(reps % LAYERS);
        for (int k = 0; k < 7; k++)
            nb_linear_bf16(mw->m[l][k], x, n, y);
        reps++;
    } while (nb_now_ms() - t0 < min_seconds * 1e3);
    return flop * reps / ((nb_now_ms() - t0) / 1e3) / 1e9;
}

/* Attention time (ms) for n queries at pos0 against a filled cache. */
static double attention_ms(int n, int pos0)
{
    int heads = 9, kvh = 3, hd = 64, ctx = pos0 + n;
    nb_bf16 *q = calloc((size_t)n * heads * hd, 2), *o = calloc((size_t)n * heads * hd, 2);
    nb_bf16 *k = calloc((size_t)ctx * kvh * hd, 2), *v = calloc((size_t)ctx * kvh * hd, 2);
    for (size_t i = 0; i < (size_t)ctx * kvh * hd; i++) {
        k[i] = nb_f32_to_bf16((float)((i * 7919) % 200) / 100.0f - 1.0f);
        v[i] = nb_f32_to_bf16((float)((i * 104729) % 200) / 100.0f - 1.0f);
    }
    for (size_t i = 0; i < (size_t)n * heads * hd; i++)
        q[i] = nb_f32_to_bf16((float)((i * 31) % 200) / 100.0f - 1.0f);
    double t0 = nb_now_ms();
    int reps = 0;
    do {
        nb_attention_bf16(o, q, k, v, n, pos0, heads, kvh, hd);
        reps++;
    } while (nb_now_ms() - t0 < min_seconds * 300);
    double ms = (nb_now_ms() - t0) / reps;
    free(q);
    free(o);
    free(k);
    free(v);
    return ms;
}

int main(int argc, char **argv)
{
    int threads = 0, bw_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--quick")) {
            min_seconds = 0.3;
        } else if (!strcmp(argv[i], "--bandwidth")) {
            bw_only = 1;
        } else {
            fprintf(stderr, "usage: bench_kernels [--threads N] [--quick] [--bandwidth]\n");
            return 2;
        }
    }
    nb_err err = {0};
    if (nb_kernels_init(threads, &err)) {
        fprintf(stderr, "bench_kernels: %s\n", err.msg);
        return 2;
    }
    int nt = nb_kernels_threads();
    nb_isa best = nb_kernels_isa();
    printf("bench_kernels: %d threads, best path %s (CPU: %s)\n\n", nt, nb_isa_name(best),
           nb_isa_name(nb_kernels_cpu_isa()));

    double bw1 = read_bandwidth(1), bwn = read_bandwidth(nt), ghz = core_ghz();
    printf("read bandwidth (512 MiB, huge-page slab): 1 thread %.2f GB/s, %d threads %.2f GB/s\n",
           bw1, nt, bwn);
    printf("compute peak: %s %.0f GFLOP/s (%d threads x %.2f GHz x %.0f FLOP/cycle)\n\n",
           nb_isa_name(best), ghz * flop_per_cycle(best) * nt, nt, ghz, flop_per_cycle(best));
    if (bw_only) {
        nb_kernels_shutdown();
        return 0;
    }

    nb_bf16 *x = calloc((size_t)128 * FFN, 2), *y = calloc((size_t)128 * VOCAB, 2);
    for (size_t i = 0; i < (size_t)128 * FFN; i++)
        x[i] = nb_f32_to_bf16((float)((i * 37) % 100) / 50.0f - 1.0f);

    static const struct {
        nb_wtype t, lm;
        const char *name;
    } kinds[] = {{NB_W_BF16, NB_W_BF16, "bf16"}, {NB_W_Q4_1, NB_W_Q8_0, "q4_1 (+q8_0 head)"}};
    printf("%-12s %-18s %10s %12s %10s %14s %8s\n", "path", "weights", "MB/step", "decode ms",
           "GB/s", "prefill GF/s", "of peak");
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        for (int isa = NB_ISA_PORTABLE; isa <= (int)best; isa++) {
            if (nb_kernels_set_isa((nb_isa)isa, &err))
                continue;
            /* built per path: each finishes weights in its own layout */
            model_w mw;
            model_build(&mw, kinds[k].t, kinds[k].lm);
            double s = decode_step_linears(&mw, x, y);
            double gf = prefill_gflops(&mw, 128, x, y);
            double peak = ghz * flop_per_cycle((nb_isa)isa) * nt;
            printf("%-12s %-18s %10.1f %12.2f %10.2f %14.1f %7.0f%%\n", nb_isa_name((nb_isa)isa),
                   kinds[k].name, mw.bytes / 1e6, s * 1e3, mw.bytes / s / 1e9, gf,
                   peak > 0 ? 100 * gf / peak : 0);
            fflush(stdout);
            model_free(&mw);
        }
    }
    nb_kernels_set_isa(best, &err);
    printf("\nattention (9 heads, 3 kv heads, hd 64), %s:\n", nb_isa_name(best));
    printf("  decode at pos 512: %.3f ms/layer\n", attention_ms(1, 512));
    printf("  prefill chunk of 128 at pos0 384: %.2f ms/layer\n", attention_ms(128, 384));
    free(x);
    free(y);
    nb_kernels_shutdown();
    return 0;
}
