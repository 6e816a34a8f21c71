/* bench_air_pipe: what the air backend's pipe costs per step — decode_step round trips to a host
 * whose adapter answers at once (tests/fixtures/llms/pipe_echo) with a 128256-float logits row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_air.h"
#include "nb_stats.h"
#include "nb_time.h"

/* llama32_1b_q4nx, the fastest nightly decode: 62.86 tok/s */
#define NIGHTLY_TPS 62.86

static int usage(void)
{
    fprintf(stderr, "usage: bench_air_pipe [--calls N (1..100000)] [--vocab V (1..1000000)] "
                    "[--python PY]\n");
    return 2;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int calls = 2000, vocab = 128256;
    const char *python = "python3";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--calls"))
            calls = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--vocab"))
            vocab = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--python"))
            python = argv[++i];
        else
            return usage();
    }
    if (calls < 1 || calls > 100000 || vocab < 1 || vocab > 1000000)
        return usage();
    nb_air_cfg c;
    nb_air_cfg_default(&c);
    const char *src = getenv("NB_SRC") ? getenv("NB_SRC") : NB_SOURCE_DIR;
    snprintf(c.llms_dir, sizeof c.llms_dir, "%s/tests/fixtures/llms", src);
    snprintf(c.host, sizeof c.host, "%s/engine/air_host.py", src);
    snprintf(c.adapter, sizeof c.adapter, "pipe_echo.verify_adapter");
    snprintf(c.python, sizeof c.python, "%s", python);
    c.lock[0] = '\0'; /* no device behind it */
    char vbuf[64];
    snprintf(vbuf, sizeof vbuf, "PIPE_ECHO_VOCAB=%d", vocab);
    char *env[] = {vbuf, NULL};
    c.env = env;
    nb_air *h;
    nb_err err;
    if (nb_air_open(&c, &h, &err)) {
        fprintf(stderr, "bench_air_pipe: %s\n", err.msg);
        return 1;
    }
    double *over = malloc(sizeof *over * (size_t)calls), *host = malloc(sizeof *host * (size_t)calls),
           *rt = malloc(sizeof *rt * (size_t)calls);
    if (!over || !host || !rt)
        return 1;
    int32_t prompt[32];
    for (int i = 0; i < 32; i++)
        prompt[i] = i + 1;
    nb_air_prefill_out p;
    if (nb_air_prefill(h, prompt, 32, 0, &p, &err)) {
        fprintf(stderr, "bench_air_pipe: %s\n", err.msg);
        return 1;
    }
    int32_t tok = p.top1;
    for (int i = -50; i < calls; i++) { /* 50 warm-up calls */
        nb_air_step_out s;
        if (nb_air_decode_step(h, tok, 32 + (i < 0 ? 0 : i % 1000), &s, &err)) {
            fprintf(stderr, "bench_air_pipe: %s\n", err.msg);
            return 1;
        }
        if (s.vocab != vocab || s.logits[s.top1] != 2.0f) {
            fprintf(stderr, "bench_air_pipe: the answer's logits are not the adapter's\n");
            return 1;
        }
        tok = s.top1;
        if (i < 0)
            continue;
        rt[i] = s.call_ms;
        host[i] = s.host_ms;
        over[i] = s.call_ms - s.host_ms;
    }
    nb_air_close(h);
    qsort(over, (size_t)calls, sizeof *over, cmp_d);
    size_t n = (size_t)calls;
    double o_mean = nb_stats_mean(over, n), r_mean = nb_stats_mean(rt, n),
           r_sd = nb_stats_stddev(rt, n), h_mean = nb_stats_mean(host, n);
    double step_ms = 1000.0 / NIGHTLY_TPS;
    double median = over[calls / 2], p90 = over[(size_t)((double)calls * 0.9)];
    printf("bench_air_pipe: %d decode_step calls, %d float32 logits (%.1f KiB) per answer\n", calls,
           vocab, vocab * 4.0 / 1024.0);
    printf("round trip    mean %.3f ms (sd %.3f)\n", r_mean, r_sd);
    printf("adapter       mean %.3f ms (host-side, inside the round trip)\n", h_mean);
    printf("pipe overhead mean %.3f ms, median %.3f ms, p90 %.3f ms\n", o_mean, median, p90);
    printf("share of a %.2f ms decode step (llama32_1b_q4nx, %.2f tok/s): %.2f%% (median %.2f%%)\n",
           step_ms, NIGHTLY_TPS, 100.0 * o_mean / step_ms, 100.0 * median / step_ms);
    free(over);
    free(host);
    free(rt);
    return 0;
}
