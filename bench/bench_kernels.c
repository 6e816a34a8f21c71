/* bench_kernels: read bandwidth (STREAM-like), compute peak, decode GEMV GB/s and prefill GEMM GFLOP/s
 * per kernel path and weight type, on SmolLM2-135M's shapes.
 * Usage: bench_kernels [--threads N] [--quick] [--bandwidth (only the read bandwidth and peak)]
 * [--quant (the block-keeping types on 2048x2048 matrices and Gemma 3's 262144 x 640 head)]
 * [--cpu-time (that section timed in process CPU time)]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* --cpu-time: the read bandwidth and the block-keeping section time process CPU time instead
 * of wall time (on a shared, loaded host the wall clock counts other processes' turns); with
 * several threads both are then per CPU-second, so their ratio still holds. */
static int cpu_time;

static double time_ms(clockid_t cpu_clock)
{
    return nb_clock_ms(cpu_time ? cpu_clock : CLOCK_MONOTONIC);
}

static double clock_ms(void)
{
    return time_ms(CLOCK_PROCESS_CPUTIME_ID);
}

/* The same for one thread's own loops (the clock and the peak loops): its CPU time alone, so the
 * pool's spinning workers do not count. */
static double thread_ms(void)
{
    return time_ms(CLOCK_THREAD_CPUTIME_ID);
}

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
        double t0 = clock_ms();
        nb_pool_run(rd_task, &j, nt);
        double gbs = (double)w->bytes / ((clock_ms() - t0) * 1e6);
        if (gbs > best)
            best = gbs;
    }
    nb_wmat_free(w);
    return best;
}

/* ---- compute peak ------------------------------------------------------------------ */

/* The core clock in GHz as it runs now (turbo included): a chain of dependent 64-bit imuls,
 * 3 cycles each on every x86 core since Nehalem and Zen. Not adds: Golden Cove and later fold
 * chains of add-immediate in the renamer (several per cycle), which read a 2.4 GHz Sapphire
 * Rapids core as 18.8 GHz and put every "of peak" off by ~8x. Load from other processes reads
 * as a lower clock in wall time (--cpu-time times this and the loops below in the thread's CPU time). 0
 * where it cannot be measured. */
static double core_ghz(void)
{
#if defined(__x86_64__)
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t n = 10000000, acc = 3, m = 5;
        double t0 = thread_ms();
        __asm__ volatile("1:\n\t"
                         "imul %2, %1\n\timul %2, %1\n\timul %2, %1\n\timul %2, %1\n\t"
                         "imul %2, %1\n\timul %2, %1\n\timul %2, %1\n\timul %2, %1\n\t"
                         "dec %0\n\tjnz 1b"
                         : "+r"(n), "+r"(acc)
                         : "r"(m));
        double ghz = 3 * 8e7 / ((thread_ms() - t0) * 1e6);
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

/* ---- timed loops of the paths' inner instructions: FLOP per second of one core ------------
 * 12 independent accumulators (2 ports x up to 6 cycles of latency), 12 instructions a trip; the
 * sums leave through a volatile store so nothing is folded away. */
#define PEAK_TRIPS 4000000L

#if defined(__x86_64__)
#include <immintrin.h>

static volatile float peak_sink;

#define PEAK_BODY(OP)                                                                          \
    OP(a0); OP(a1); OP(a2); OP(a3); OP(a4); OP(a5); OP(a6); OP(a7); OP(a8); OP(a9); OP(a10);   \
    OP(a11)

static double loop_sse(void) /* mulps + addps: 4 lanes x 2 FLOP per pair */
{
    __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
           a8 = a0, a9 = a0, a10 = a0, a11 = a0, x = _mm_set1_ps(1e-9f), y = _mm_set1_ps(0.5f);
    double t0 = thread_ms();
    for (long i = 0; i < PEAK_TRIPS; i++) {
#define SSE_OP(a) a = _mm_add_ps(a, _mm_mul_ps(x, y)); __asm__ volatile("" : "+x"(a))
        PEAK_BODY(SSE_OP);
#undef SSE_OP
    }
    double ms = thread_ms() - t0;
    a0 = _mm_add_ps(_mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)),
                    _mm_add_ps(_mm_add_ps(a4, a5), _mm_add_ps(a6, a7)));
    peak_sink = _mm_cvtss_f32(_mm_add_ps(a0, _mm_add_ps(_mm_add_ps(a8, a9), _mm_add_ps(a10, a11))));
    return 12.0 * 8 * PEAK_TRIPS / (ms * 1e6);
}

__attribute__((target("avx2,fma"))) static double loop_fma(void) /* 8 lanes x 2 FLOP */
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0, x = _mm256_set1_ps(1e-9f),
           y = _mm256_set1_ps(0.5f);
    double t0 = thread_ms();
    for (long i = 0; i < PEAK_TRIPS; i++) {
#define FMA_OP(a) a = _mm256_fmadd_ps(x, y, a); __asm__ volatile("" : "+x"(a))
        PEAK_BODY(FMA_OP);
#undef FMA_OP
    }
    double ms = thread_ms() - t0;
    float o[8];
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                      _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))));
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o),
                                      _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
    peak_sink = o[0];
    _mm256_zeroupper();
    return 12.0 * 16 * PEAK_TRIPS / (ms * 1e6);
}

/* vdpbf16ps zmm: 16 lanes x 2 products x 2 FLOP */
__attribute__((target("avx512f,avx512bf16"))) static double loop_dpbf16(void)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x30003000);
    double t0 = thread_ms();
    for (long i = 0; i < PEAK_TRIPS; i++) {
#define BF_OP(a) a = _mm512_dpbf16_ps(a, x, y); __asm__ volatile("" : "+v"(a))
        PEAK_BODY(BF_OP);
#undef BF_OP
    }
    double ms = thread_ms() - t0;
    a0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                       _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    a0 = _mm512_add_ps(a0, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    peak_sink = _mm512_reduce_add_ps(a0);
    _mm256_zeroupper();
    return 12.0 * 64 * PEAK_TRIPS / (ms * 1e6);
}

/* The tile loops: palette 1, four 16 x 64-byte C tiles, two A and two B tiles (the 2 x 2 block
 * nb_amx.c's GEMMs run), four independent tile products a trip. One tdpbf16ps is 16 x 16 x 32
 * products (16384 FLOP), one tdpbssd 16 x 16 x 64 (32768 int8 OPs, a multiply and an add each).
 * Only called where the dispatcher chose the AMX path, which needs the tile permission this
 * process was already granted (nb_dispatch.c). */
#define TILE_TRIPS (PEAK_TRIPS / 16)

__attribute__((target("amx-tile"))) static void peak_tiles_configure(void)
{
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile,amx-bf16,amx-int8"))) static double loop_tiles(int int8)
{
    static uint8_t buf[2][16 * 64] __attribute__((aligned(64)));
    memset(buf, 0, sizeof buf);
    peak_tiles_configure();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, buf[0], 64);
    _tile_loadd(5, buf[1], 64);
    _tile_loadd(6, buf[0], 64);
    _tile_loadd(7, buf[1], 64);
    double t0 = thread_ms();
    if (int8) {
        for (long i = 0; i < TILE_TRIPS; i++) {
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
    } else {
        for (long i = 0; i < TILE_TRIPS; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    static uint8_t out[16 * 64] __attribute__((aligned(64)));
    _tile_stored(0, out, 64); /* the sums leave, so the loop is not dead */
    double ms = thread_ms() - t0;
    _tile_release();
    peak_sink = out[0];
    return 4.0 * 16 * 16 * (int8 ? 64 : 32) * 2 * TILE_TRIPS / (ms * 1e6);
}

static double loop_tdpbf16ps(void) { return loop_tiles(0); }
static double loop_tdpbssd(void) { return loop_tiles(1); }

/* A timed loop's best of 3 (the others share the core with whatever else runs). */
static double best_of_3(double (*loop)(void))
{
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double g = loop();
        best = g > best ? g : best;
    }
    return best;
}
#endif

typedef struct peak_info {
    double gflops_core; /* one core */
    double per_cycle;   /* FLOP per cycle at the measured clock */
    const char *how;
} peak_info;

/* One core's peak on a path: a timed loop of its inner instruction, best of 3, where this CPU
 * runs that path (elsewhere the measured clock x the instruction's documented rate). */
static peak_info path_peak(nb_isa isa, double ghz)
{
    peak_info pk = {ghz * flop_per_cycle(isa), flop_per_cycle(isa), "clock x documented rate"};
#if defined(__x86_64__)
    double (*loop)(void) = isa == NB_ISA_PORTABLE     ? loop_sse
                           : isa == NB_ISA_AVX2       ? loop_fma
                           : isa == NB_ISA_AVX512BF16 ? loop_dpbf16
                           : isa == NB_ISA_AMXBF16    ? loop_tdpbf16ps
                                                      : NULL;
    if (!loop || nb_kernels_cpu_isa() < isa)
        return pk;
    double best = best_of_3(loop);
    pk.gflops_core = best;
    pk.per_cycle = ghz > 0 ? best / ghz : 0;
    pk.how = isa == NB_ISA_PORTABLE       ? "timed mulps+addps loop"
             : isa == NB_ISA_AVX2         ? "timed vfmadd231ps loop"
             : isa == NB_ISA_AVX512BF16   ? "timed vdpbf16ps loop"
                                          : "timed tdpbf16ps loop";
#endif
    return pk;
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
        /* every half scale of a block: d = 2^-7, and a small negative m / dmin */
        const struct {
            nb_wtype t;
            size_t bb, d, m; /* block bytes, offsets of d and of m (0: none) */
        } f[] = {{NB_W_Q4_1, NB_QUANT_Q4_1_BYTES, NB_QUANT_Q4_1_D, NB_QUANT_Q4_1_M},
                 {NB_W_Q8_0, NB_QUANT_Q8_0_BYTES, NB_QUANT_Q8_0_D, 0},
                 {NB_W_Q5_0, NB_QUANT_Q5_0_BYTES, NB_QUANT_Q5_0_D, 0},
                 {NB_W_Q4_K, NB_QUANT_Q4_K_BYTES, NB_QUANT_Q4_K_D, NB_QUANT_Q4_K_DMIN},
                 {NB_W_Q6_K, NB_QUANT_Q6_K_BYTES, NB_QUANT_Q6_K_D, 0}};
        for (size_t k = 0; k < sizeof f / sizeof *f; k++)
            if (f[k].t == t)
                for (size_t b = 0; b < w->bytes / f[k].bb; b++) {
                    uint16_t d = 0x2000, m = 0xa400;
                    memcpy(p + b * f[k].bb + f[k].d, &d, 2);
                    if (f[k].m)
                        memcpy(p + b * f[k].bb + f[k].m, &m, 2);
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

/* ---- the block-keeping weight types, and Gemma 3's LM head ------------------------- */

/* Decode GB/s of a set of 2048 x 2048 matrices (about 128 MB, far beyond the caches) of
 * type t: each streamed once per step with one activation row. */
static double quant_decode_gbs(nb_wtype t, const nb_bf16 *x, nb_bf16 *y, double *gf_prefill)
{
    enum { R = 2048, C = 2048, MAXM = 64 };
    nb_wmat *m[MAXM];
    size_t bytes = 0;
    int cnt = 0;
    while (cnt < MAXM && bytes < ((size_t)128 << 20)) {
        m[cnt] = rand_wmat(t, R, C);
        bytes += m[cnt]->bytes;
        cnt++;
    }
    double t0 = clock_ms();
    long steps = 0;
    do {
        for (int k = 0; k < cnt; k++)
            nb_linear_bf16(m[k], x, 1, y);
        steps++;
    } while (clock_ms() - t0 < min_seconds * 1e3);
    double gbs = (double)bytes * steps / ((clock_ms() - t0) * 1e6);
    /* prefill: 128 rows through one matrix at a time */
    t0 = clock_ms();
    long reps = 0;
    do {
        nb_linear_bf16(m[reps % cnt], x, 128, y);
        reps++;
    } while (clock_ms() - t0 < min_seconds * 1e3);
    *gf_prefill = 2.0 * 128 * R * C * reps / ((clock_ms() - t0) * 1e6);
    for (int k = 0; k < cnt; k++)
        nb_wmat_free(m[k]);
    return gbs;
}

static void noop_rows(void *user, int j0, int j1, const float *Y)
{
    (void)Y;
    *(volatile int *)user += j1 - j0;
}

/* Gemma 3 270M's tied head: 262144 x 640, Q8_0 in the GGUF. ms per decode step through the
 * public linear and through the row-range call, and its GB/s against the read bandwidth. */
static void head_bench(int nt, double bwn, const nb_bf16 *x)
{
    enum { V = 262144, D = 640 };
    nb_wmat *w = rand_wmat(NB_W_Q8_0, V, D);
    float *y = malloc(sizeof(float) * V);
    volatile int seen = 0;
    for (int pass = 0; pass < 2; pass++) {
        double t0 = clock_ms();
        long steps = 0;
        do {
            nb_err err;
            if (pass == 0)
                nb_linear_bf16_f32out(w, x, 1, y);
            else if (nb_linear_head_rows(w, x, y, 0, V, noop_rows, (void *)&seen, &err))
                exit(2);
            steps++;
        } while (clock_ms() - t0 < min_seconds * 1e3);
        double ms = (clock_ms() - t0) / steps;
        double gbs = (double)w->bytes / (ms * 1e6);
        printf("  %-34s %8.2f ms %8.2f GB/s  %5.0f%% of the %d-thread read bandwidth\n",
               pass == 0 ? "nb_linear_bf16_f32out" : "nb_linear_head_rows (+ callback)", ms, gbs,
               100 * gbs / bwn, nt);
    }
    free(y);
    nb_wmat_free(w);
}

static void quant_section(nb_isa best, int nt, double bwn)
{
    nb_err err = {0};
    nb_bf16 *x = calloc((size_t)128 * 2048, 2), *y = calloc((size_t)128 * 2048, 2);
    for (size_t i = 0; i < (size_t)128 * 2048; i++)
        x[i] = nb_f32_to_bf16((float)((i * 37) % 100) / 50.0f - 1.0f);
    static const nb_wtype ts[] = {NB_W_Q8_0, NB_W_Q4_1, NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
    static const double bits[] = {8.5, 5.0, 5.5, 4.5, 6.5625}; /* bits per weight */
    printf("block-keeping weights, 2048x2048 matrices (~128 MB per set), decode n=1 and "
           "prefill n=128;\nratio x: against the best existing type (q8_0, q4_1) on the same "
           "path, GB/s and weights/s; of bw: decode GB/s against the %d-thread read bandwidth "
           "above\n", nt);
    printf("%-12s %-6s %10s %10s %10s %10s %12s %10s %8s\n", "path", "type", "GB/s", "Gw/s",
           "xGB/s", "xGw/s", "prefill GF/s", "xGF/s", "of bw");
    /* A path with the prefill GEMM runs a second time without it (its per-row kernels), in the
     * same run: the new/old ratio the GEMM is judged by. On AMX-INT8 the path's own line is
     * the int8 tiles' prefill (nb_amx.c), its per-row line the AVX-512 kernels' (its decode
     * linear, linear_bf16_rows); with AVX-512 VNNI the avx512bf16 line is the int8 loop on zmm
     * registers (nb_amx_vnni.c) for the types it takes, its per-row line the AVX-512 kernels'. */
    static nb_kernel_table rows_only;
    for (int isa = NB_ISA_PORTABLE, pass = 0; isa <= (int)best; isa += pass, pass ^= 1) {
        if (nb_kernels_set_isa((nb_isa)isa, &err)) {
            pass = 1;
            continue;
        }
        const char *label = nb_isa_name((nb_isa)isa);
        if (pass == 0) {
            if (!nb_kernels_active()->kq_gemm) {
                pass = 1;
            } else {
                rows_only = *nb_kernels_active();
                rows_only.kq_gemm = NULL;
                if (rows_only.linear_bf16_rows)
                    rows_only.linear_bf16 = rows_only.linear_bf16_rows;
                else if (rows_only.linear_bf16 == nb_amx_vnni_linear_int8)
                    rows_only.linear_bf16 = nb_avx512_linear_bf16; /* its rows-in-lanes kernels */
                nb_kernels_use_table(&rows_only);
                label = "(per-row)";
            }
        }
        double best_gbs = 0, best_gws = 0, best_gf = 0;
        for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) {
            double gf, gbs = quant_decode_gbs(ts[k], x, y, &gf), gws = gbs * 8 / bits[k];
            if (k < 2) {
                best_gbs = gbs > best_gbs ? gbs : best_gbs;
                best_gws = gws > best_gws ? gws : best_gws;
                best_gf = gf > best_gf ? gf : best_gf;
            }
            printf("%-12s %-6s %10.2f %10.2f %10s %10s %12.1f %10s %7.0f%%\n", label,
                   nb_wtype_name(ts[k]), gbs, gws, "", "", gf, "", 100 * gbs / bwn);
            if (k >= 2)
                printf("%-12s %-6s %10s %10s %10.2f %10.2f %12s %10.2f\n", "", "", "", "",
                       gbs / best_gbs, gws / best_gws, "", gf / best_gf);
            fflush(stdout);
        }
    }
    nb_kernels_use_table(NULL);
    nb_kernels_set_isa(best, &err);
    printf("\nGemma 3 270M LM head (262144 x 640 Q8_0, %.0f MB), %s, %d threads:\n",
           262144.0 * 640 / 32 * 34 / 1e6, nb_isa_name(best), nt);
    head_bench(nt, bwn, x);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    int threads = 0, bw_only = 0, quant_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--quick")) {
            min_seconds = 0.3;
        } else if (!strcmp(argv[i], "--bandwidth")) {
            bw_only = 1;
        } else if (!strcmp(argv[i], "--quant")) {
            quant_only = 1;
        } else if (!strcmp(argv[i], "--cpu-time")) {
            cpu_time = 1;
        } else {
            fprintf(stderr,
                    "usage: bench_kernels [--threads N] [--quick] [--bandwidth] [--quant] "
                    "[--cpu-time]\n");
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
    peak_info pk = path_peak(best, ghz);
    printf("compute peak: %s %.0f GFLOP/s (%d threads x %.2f GHz x %.0f FLOP/cycle, %s)\n",
           nb_isa_name(best), pk.gflops_core * nt, nt, ghz, pk.per_cycle, pk.how);
#if defined(__x86_64__)
    /* the quantized prefill's tiles, where the dispatcher put them (it read CPUID's AMX-INT8) */
    if (nb_kernels_active()->linear_bf16 == nb_amx_linear_int8) {
        double g = best_of_3(loop_tdpbssd);
        printf("int8 tiles: %.0f GOP/s (%d threads x %.0f OP/cycle, timed tdpbssd loop)\n",
               g * nt, nt, ghz > 0 ? g / ghz : 0);
    }
#endif
    printf("\n");
    if (bw_only) {
        nb_kernels_shutdown();
        return 0;
    }
    if (quant_only) {
        quant_section(best, nt, bwn);
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
            double peak = path_peak((nb_isa)isa, ghz).gflops_core * nt;
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
