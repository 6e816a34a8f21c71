/* bench_engine: llama-bench's pp/tg tests through the engine API: prefill of N tokens from an empty
 * cache (nb_engine_prefill) and N decode steps from position 0 (nb_engine_decode_step), tokens/s.
 * --cpu-time: tokens per second of process CPU time (on a shared host the wall clock counts other
 * processes' turns; at --threads 1 this is the engine's own speed, with more it counts spinning). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_engine.h"
#include "nb_kernels.h"
#include "nb_model.h"
#include "nb_time.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_engine --model PATH [--dtype bf16|q4_1|f32] [--threads N]\n"
            "                    [--pp N[,N...]] [--tg N] [--reps N] [--cpu-time]\n"
            "Prints one line per test:\n"
            "  engine <dtype> <test> <tokens/s mean> <sd> <best> <sample,sample,...> <weight bytes>\n");
}

/* Token ids for a run: any valid ids do, as for llama-bench (random). */
static void fill_ids(int32_t *ids, int n, int vocab)
{
    uint32_t s = 42;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)(s % (uint32_t)vocab);
    }
}

static void print_test(const char *dtype, const char *test, const double *v, int n, size_t wbytes)
{
    double m = 0, q = 0, best = 0;
    for (int i = 0; i < n; i++) {
        m += v[i];
        best = v[i] > best ? v[i] : best;
    }
    m /= n;
    for (int i = 0; i < n; i++)
        q += (v[i] - m) * (v[i] - m);
    printf("engine %s %s %.2f %.2f %.2f ", dtype, test, m, n > 1 ? sqrt(q / (n - 1)) : 0.0, best);
    for (int i = 0; i < n; i++)
        printf("%s%.2f", i ? "," : "", v[i]);
    printf(" %zu\n", wbytes);
}

int main(int argc, char **argv)
{
    const char *model = NULL, *pp_list = "128,512";
    int tg = 128, reps = 3;
    clockid_t clk = CLOCK_MONOTONIC;
    nb_engine_opts o;
    nb_engine_opts_default(&o);
    nb_err err = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model") && v)
            model = v, i++;
        else if (!strcmp(a, "--dtype") && v) {
            if (nb_dtype_parse(v, &o.dtype, &err)) {
                fprintf(stderr, "bench_engine: %s\n", err.msg);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--threads") && v)
            o.threads = atoi(v), i++;
        else if (!strcmp(a, "--pp") && v)
            pp_list = v, i++;
        else if (!strcmp(a, "--tg") && v)
            tg = atoi(v), i++;
        else if (!strcmp(a, "--reps") && v)
            reps = atoi(v), i++;
        else if (!strcmp(a, "--cpu-time"))
            clk = CLOCK_PROCESS_CPUTIME_ID;
        else {
            usage();
            return 2;
        }
    }
    if (!model || reps < 1 || reps > 100 || tg < 0) {
        usage();
        return 2;
    }
    nb_model *m;
    if (nb_model_open(model, &m, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 2;
    }
    int max_pp = 0;
    for (const char *p = pp_list; *p;) {
        int n = atoi(p);
        if (n > max_pp)
            max_pp = n;
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    o.max_seq = (max_pp > tg ? max_pp : tg) + 1;
    nb_engine *e;
    double t0 = nb_now_ms();
    if (nb_engine_setup(m, &o, &e, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        nb_model_close(m);
        return 2;
    }
    nb_model_close(m);
    double setup_ms = nb_now_ms() - t0;
    int vocab = nb_engine_vocab(e);
    size_t wbytes = nb_engine_weight_bytes(e);
    fprintf(stderr, "bench_engine: %s, %d threads, kernels %s, %.1f MB of weights, setup %.0f ms\n",
            nb_dtype_name(o.dtype), nb_kernels_threads(), nb_isa_name(nb_kernels_isa()),
            wbytes / 1e6, setup_ms);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(max_pp > tg ? max_pp : tg) + 4);
    double *tps = malloc(sizeof(double) * (size_t)reps);
    const float *logits;
    int rc = 0;
    for (const char *p = pp_list; *p && !rc;) {
        int n = atoi(p);
        if (n > 0) {
            fill_ids(ids, n, vocab);
            /* one untimed warm-up, as llama-bench does */
            for (int r = -1; r < reps && !rc; r++) {
                double s = nb_clock_ms(clk);
                if (nb_engine_prefill(e, ids, n, &logits, &err))
                    rc = 1;
                if (r >= 0)
                    tps[r] = n / ((nb_clock_ms(clk) - s) / 1e3);
            }
            char test[32];
            snprintf(test, sizeof test, "pp%d", n);
            if (!rc)
                print_test(nb_dtype_name(o.dtype), test, tps, reps, wbytes);
        }
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    if (tg > 0 && !rc) {
        fill_ids(ids, tg, vocab);
        for (int r = -1; r < reps && !rc; r++) {
            nb_engine_reset(e);
            double s = nb_clock_ms(clk);
            for (int i = 0; i < tg && !rc; i++)
                if (nb_engine_decode_step(e, ids[i], i, &logits, &err))
                    rc = 1;
            if (r >= 0)
                tps[r] = tg / ((nb_clock_ms(clk) - s) / 1e3);
        }
        char test[32];
        snprintf(test, sizeof test, "tg%d", tg);
        if (!rc)
            print_test(nb_dtype_name(o.dtype), test, tps, reps, wbytes);
    }
    if (rc)
        fprintf(stderr, "bench_engine: %s\n", err.msg);
    fflush(stdout);
    free(ids);
    free(tps);
    nb_engine_free(e);
    nb_kernels_shutdown();
    return rc ? 1 : 0;
}
