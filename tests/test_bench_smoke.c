/* test_bench_smoke: every benchmark in bench/ run once at its smallest size (the engine bench on
 * the tiny Llama), exit 0 and its table printed, so a benchmark that rots fails here first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nb_kernels_impl.h"
#include "testutil.h"

/* Runs build/bench/<bench> args; asserts exit code, that each line of want (separated by
 * '\n') starts a line of the output, and no sanitizer report. The output (caller frees). */
static char *bench(const char *name, const char *args, int code, const char *want)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/bench/%s' %s", tu_group_tmp(),
             tu_env("NB_BUILD", "."), name, args);
    tu_result r = tu_run(cmd);
    print_message("$ %s %s  [exit %d]\n%s", name, args, r.code, r.out ? r.out : "");
    assert_non_null(r.out);
    assert_int_equal(r.code, code);
    for (const char *w = want; *w;) {
        size_t n = strcspn(w, "\n");
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)n, w);
        const char *at = strstr(r.out, line);
        assert_non_null(at);
        assert_true(at == r.out || at[-1] == '\n');
        w += n + (w[n] == '\n');
    }
    assert_null(strstr(r.out, "AddressSanitizer"));
    assert_null(strstr(r.out, "runtime error"));
    return r.out;
}

/* The paths bench_kernels --quant runs a second time without the prefill GEMM ("(per-row)"):
 * those up to the active one (NPUBENCH_ISA caps both processes alike) whose table has the GEMM,
 * as the dispatcher says on this host (none on AVX2, one on AVX-512 VNNI, two with AMX). */
static int paths_with_gemm(void)
{
    nb_isa best = nb_kernels_isa();
    int n = 0;
    for (int isa = NB_ISA_PORTABLE; isa <= (int)best; isa++) {
        nb_err err = {0};
        if (nb_kernels_set_isa((nb_isa)isa, &err) == NB_OK && nb_kernels_active()->kq_gemm)
            n++;
    }
    nb_kernels_use_table(NULL);
    return n;
}

/* Counts the lines of out that start with prefix. */
static int lines_starting(const char *out, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        n += !strncmp(p, prefix, len);
    return n;
}

/* prefill 8 and 4 tokens and 3 decode steps, twice each, on the tiny Llama as q4_1 and f32:
 * one "engine DTYPE TEST mean sd best samples bytes" line per test */
static void test_bench_engine(void **s)
{
    (void)s;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/nb_gen_tiny' --type q4_1 --out '%s/tiny.gguf'",
             tu_env("NB_TOOLS", "tests"), tu_group_tmp());
    tu_result g = tu_run(cmd);
    assert_int_equal(g.code, 0);
    free(g.out);
    char *out = bench("bench_engine", "--model tiny.gguf --dtype q4_1 --pp 8,4 --tg 3 --reps 2 --threads 1",
                      0, "engine q4_1 pp8 \nengine q4_1 pp4 \nengine q4_1 tg3 ");
    assert_int_equal(lines_starting(out, "engine "), 3);
    free(out);
    out = bench("bench_engine", "--model tiny.gguf --dtype f32 --pp 4 --tg 0 --reps 1 --cpu-time", 0,
                "engine f32 pp4 "); /* --cpu-time: the same lines, timed in process CPU time */
    assert_int_equal(lines_starting(out, "engine "), 1);
    free(out);
    free(bench("bench_engine", "--model tiny.gguf --reps 0", 2, "usage"));
    free(bench("bench_engine", "--model tiny.gguf --dtype int3", 2,
               "bench_engine: dtype 'int3': expected bf16, f32, q4_1 or native"));
    free(bench("bench_engine", "--model nothing.gguf", 2, "bench_engine: "));
}

static void test_bench_history(void **s)
{
    (void)s;
    char *out = bench("bench_history", "2000", 0, "bench_history: 2000 runs, ");
    assert_true(lines_starting(out, "  ") >= 3); /* the insert line and one per query */
    assert_null(strstr(out, "nan"));
    free(out);
    free(bench("bench_history", "0", 2, "usage: bench_history [N_RUNS (1..100000000"));
}

static void test_bench_kernels(void **s)
{
    (void)s;
    char *out = bench("bench_kernels", "--threads 1 --quick", 0,
                      "bench_kernels: 1 threads, best path \nread bandwidth (512 MiB, "
                      "huge-page slab): 1 thread \ncompute peak: \npath         weights\n"
                      "attention (9 heads, 3 kv heads, hd 64), \n  decode at pos 512: \n"
                      "  prefill chunk of 128 at pos0 384: ");
    assert_true(lines_starting(out, "portable ") >= 1); /* every path the CPU has, portable too */
    free(out);
    /* --quant: the five block-keeping types on every path, the prefill GEMM's path a second
     * time without it ("(per-row)", the peer it is judged against; AVX-512 VNNI and AMX hosts),
     * then Gemma's LM head both ways */
    out = bench("bench_kernels", "--threads 1 --quick --quant", 0,
                "block-keeping weights, 2048x2048 matrices \npath         type         GB/s\n"
                "portable     q8_0 \nportable     q6_k \n\nGemma 3 270M LM head (262144 x 640 "
                "Q8_0, 178 MB), \n  nb_linear_bf16_f32out \n  nb_linear_head_rows (+ callback) ");
    assert_int_equal(lines_starting(out, "portable "), 5);
    assert_int_equal(lines_starting(out, "(per-row) "), 5 * paths_with_gemm());
    assert_null(strstr(out, "attention ("));
    free(out);
    free(bench("bench_kernels", "--frobnicate", 2, "usage: bench_kernels"));
}

static void test_bench_rpc(void **s)
{
    (void)s;
    char *out = bench("bench_rpc", "", 0, "bench_rpc: \ninproc \nipc \ntcp ");
    free(out);
}

/* the air pipe: 20 round trips to the echo adapter with a small vocabulary; the share line */
static void test_bench_air_pipe(void **s)
{
    (void)s;
    tu_result py = tu_run("python3 -c 'import numpy'");
    int ok = py.code == 0;
    free(py.out);
    tu_require(ok, "python3 with numpy (scripts/setup.sh installs it)");
    free(bench("bench_air_pipe", "--calls 20 --vocab 1000", 0,
               "bench_air_pipe: 20 decode_step calls, 1000 float32 logits (3.9 KiB) per answer\n"
               "pipe overhead mean \nshare of a 15.91 ms decode step (llama32_1b_q4nx, 62.86 "
               "tok/s): "));
    free(bench("bench_air_pipe", "--calls 0", 2, "usage: bench_air_pipe"));
}

/* the protocol part and the real-worker part (the default model, 2 prompts x 1 token) */
static void test_bench_sched(void **s)
{
    (void)s;
    tu_require_model();
    char *out = bench("bench_sched", "--quick --verify-tokens 1 --verify-prompts 2", 0,
                      "| What | | | |\n|---|---|---|---|\n| tiny job, 1 poller (n=50) | "
                      "\n| 300 tiny jobs, 4 pollers | "
                      "\n| 100 acknowledged submits, one at a time | synchronous=FULL "
                      "\n| tiny RUN (1 token, 1 rep), real worker (n=5) | "
                      "\n| verify-full, 2 prompts x 1 tokens, 1 thread per worker | 1 worker ");
    assert_int_equal(lines_starting(out, "| "), 6); /* the head and one row per part */
    /* both verify-full runs pass the gate: 1 worker, then 2 shards on 2 workers */
    const char *vf = strstr(out, "| verify-full, ");
    assert_non_null(vf);
    assert_non_null(strstr(vf, " (PASS) | 2 workers (2 shards) "));
    assert_non_null(strstr(strstr(vf, "2 workers (2 shards) "), " (PASS) | speed-up "));
    free(out);
    free(bench("bench_sched", "--frobnicate", 2, "usage: bench_sched"));
    free(bench("bench_sched", "--verify-prompts 1", 2,
               "bench_sched: --verify-prompts 1: expected 2..8"));
}

/* the cost of a localization next to its verify: 1 prompt, 2 tokens on the default model; one
 * "prompt" line and the totals, both fractions printed as numbers (a NaN would mean a zero
 * verify time); a bad option or a count below the minimum is a usage error */
static void test_bench_localize(void **s)
{
    (void)s;
    const char *model = tu_require_model();
    char args[2600];
    snprintf(args, sizeof args, "--model '%s' --prompts 1 --n-tokens 2 --threads 1", model);
    char *out = bench("bench_localize", args, 0,
                      "prompt 0 verify_ms \ntotal verify_ms ");
    free(out);
    out = bench("bench_localize", args, 0, "prompt 0 verify_ms \ntotal verify_ms ");
    assert_int_equal(lines_starting(out, "prompt "), 1);
    assert_non_null(strstr(out, " divergence -1 localize_ms 0.0 worst_ms "));
    assert_null(strstr(out, "nan"));
    free(out);
    free(bench("bench_localize", "--prompts 0", 2, "usage: bench_localize"));
    free(bench("bench_localize", "--n-tokens 1", 2, "usage: bench_localize"));
    free(bench("bench_localize", "--frobnicate", 2, "usage: bench_localize"));
    free(bench("bench_localize", "--model /nonexistent.gguf", 2, "bench_localize: "));
}

/* the tokenizer's load and encode times over the committed texts: one "npubench" line whose
 * text count is the file's (the numbers of texts and tokens are facts, not timings) */
static void test_bench_tokenizer(void **s)
{
    (void)s;
    const char *model = tu_require_model();
    const char *src = tu_require_src();
    char args[4200], cmd[4200];
    snprintf(args, sizeof args, "'%s' '%s/tests/data/tokenizer_texts.json'", model, src);
    char *out = bench("bench_tokenizer", args, 0, "npubench load_ms ");
    assert_int_equal(lines_starting(out, "npubench "), 1);
    snprintf(cmd, sizeof cmd, "python3 -c 'import json,sys; print(sum(isinstance(t, str) for t "
             "in json.load(open(sys.argv[1]))))' '%s/tests/data/tokenizer_texts.json'", src);
    tu_result n = tu_run(cmd);
    assert_int_equal(n.code, 0);
    char want[64];
    snprintf(want, sizeof want, " texts %d tokens ", atoi(n.out));
    assert_non_null(strstr(out, want));
    free(n.out);
    free(out);
    free(bench("bench_tokenizer", "only-one-arg", 2, "usage: "));
    snprintf(args, sizeof args, "'%s' /nonexistent.json", model);
    free(bench("bench_tokenizer", args, 2, ""));
    free(bench("bench_tokenizer", "/nonexistent.gguf x.json", 2, ""));
}

/* The benchmarks' other options and error paths, each a short run: bench_engine's unknown
 * option, bench_history without a usable $TMPDIR, bench_kernels --bandwidth --cpu-time,
 * bench_localize on a model with no HF trace, bench_tokenizer over non-string and non-UTF-8
 * entries, bench_sched's protocol part alone with npubench found next to it. */
static void test_bench_options(void **s)
{
    (void)s;
    const char *src = tu_require_src();
    tu_require_model();
    char cmd[4096], args[4096], path[4096];
    free(bench("bench_engine", "--frobnicate", 2, "usage: bench_engine --model PATH"));
    /* its database goes under $TMPDIR: one that does not exist is exit 1, said so */
    snprintf(cmd, sizeof cmd, "TMPDIR=/nonexistent '%s/bench/bench_history' 10",
             tu_env("NB_BUILD", "."));
    tu_result r = tu_run(cmd);
    assert_int_equal(r.code, 1);
    assert_string_equal(r.out, "bench_history: mkdtemp: No such file or directory\n");
    free(r.out);
    /* --bandwidth stops after the bandwidth and peak lines (--cpu-time: process CPU clock) */
    char *out = bench("bench_kernels", "--threads 1 --quick --bandwidth --cpu-time", 0,
                      "bench_kernels: 1 threads, best path \nread bandwidth (512 MiB, huge-page "
                      "slab): 1 thread \ncompute peak: ");
    assert_null(strstr(out, "attention ("));
    assert_int_equal(lines_starting(out, "portable "), 0);
    free(out);
    /* a model that opens but has no HF trace: verify refuses, the bench says why */
    free(bench("bench_localize", "--frobnicate", 2, "usage: bench_localize [--model "));
    snprintf(cmd, sizeof cmd, "'%s/nb_gen_tiny' --type q4_1 --out '%s/tiny-loc.gguf'",
             tu_env("NB_TOOLS", "tests"), tu_group_tmp());
    tu_result g = tu_run(cmd);
    assert_int_equal(g.code, 0);
    free(g.out);
    free(bench("bench_localize", "--model tiny-loc.gguf --prompts 1 --n-tokens 2 --threads 1", 2,
               "bench_localize: no HF reference trace for model "));
    /* entries that are not strings are skipped; a text that is not UTF-8 is refused, named */
    snprintf(path, sizeof path, "%s/texts-mixed.json", tu_group_tmp());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("[\"a b\", 1, \"c\"]", f);
    fclose(f);
    snprintf(args, sizeof args, "'%s/models/SmolLM2-135M-Instruct.Q4_1.gguf' texts-mixed.json",
             src);
    out = bench("bench_tokenizer", args, 0, "npubench load_ms ");
    assert_non_null(strstr(out, " texts 2 tokens 3 encode_ms "));
    free(out);
    snprintf(path, sizeof path, "%s/texts-bad.json", tu_group_tmp());
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("[\"ok\", \"bad \xff byte\"]", f);
    fclose(f);
    snprintf(args, sizeof args, "'%s/models/SmolLM2-135M-Instruct.Q4_1.gguf' texts-bad.json", src);
    free(bench("bench_tokenizer", args, 2,
               "text 1: text: invalid UTF-8 at byte offset 4 (byte 0xff)"));
    /* without $NB_BIN it finds npubench next to itself; --no-workers: the protocol part only */
    snprintf(cmd, sizeof cmd, "cd '%s' && env -u NB_BIN '%s/bench/bench_sched' --quick "
             "--no-workers", tu_group_tmp(), tu_env("NB_BUILD", "."));
    r = tu_run(cmd);
    print_message("$ bench_sched --quick --no-workers  [exit %d]\n%s", r.code, r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    /* the head and the three protocol rows (latency, throughput, durable acknowledgement) */
    assert_int_equal(lines_starting(r.out, "| "), 4);
    assert_non_null(strstr(r.out, "\n| 300 tiny jobs, 4 pollers | "));
    assert_null(strstr(r.out, "real worker"));
    free(r.out);
}

/* `make bench`'s script knows a short size for every benchmark in bench/ (one it does not
 * know makes it exit 1), so a new benchmark cannot be left out of it unnoticed. */
static void test_run_all(void **s)
{
    (void)s;
    const char *src = tu_require_src();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && bench/run_all.sh --dry-run '%s'", src,
             tu_env("NB_BUILD", "."));
    tu_result r = tu_run(cmd);
    print_message("$ bench/run_all.sh --dry-run  [exit %d]\n%s", r.code, r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    snprintf(cmd, sizeof cmd, "ls '%s'/bench/*.c | wc -l", src);
    tu_result n = tu_run(cmd);
    assert_int_equal(lines_starting(r.out, "$ "), atoi(n.out ? n.out : "0"));
    assert_true(lines_starting(r.out, "$ ") >= 7);
    free(n.out);
    free(r.out);
    snprintf(cmd, sizeof cmd, "cd '%s' && bench/run_all.sh --frobnicate", src);
    r = tu_run(cmd);
    assert_int_equal(r.code, 2);
    free(r.out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_engine), cmocka_unit_test(test_bench_history),
        cmocka_unit_test(test_bench_kernels), cmocka_unit_test(test_bench_rpc),
        cmocka_unit_test(test_bench_air_pipe),
        cmocka_unit_test(test_bench_sched), cmocka_unit_test(test_bench_localize),
        cmocka_unit_test(test_bench_tokenizer), cmocka_unit_test(test_bench_options),
        cmocka_unit_test(test_run_all),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
