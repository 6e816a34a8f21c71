/* test_reference_devices: the clean engine against references made on another device (an NVIDIA
 * H200: bf16 sdpa, bf16 eager, fp32 sdpa; verify/references-h200) on every kernel path, AMX emulated. */
#include "testutil.h"

#include <math.h>

#include "nb_kernels.h"
#include "nb_kernels_impl.h"
#include "nb_verify_run.h"

/* nb_avx512.c and nb_amx.c over emulated instructions (kernels_emu.c, kernels_amx_emu.c). */
void nb_avx512_emu_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                               int j0, int j1);
nb_code nb_avx512_emu_wmat_finish(nb_wmat *w, nb_err *err);
void nb_amx_emu_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                            int j0, int j1);

/* The emulated AMX table's linear where the CPU has AVX-512 BF16: short calls on the real
 * AVX-512 kernel (the bits the emulated one gives, test_kernels_emu; nb_amx.c hands calls of
 * fewer than 16 rows, a tile's height, to it), the tiles emulated. Only saves time. */
static void amx_emu_fast(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                         int j1)
{
    if (n < 16)
        nb_avx512_linear_bf16(W, X, n, Y, f32out, j0, j1);
    else
        nb_amx_emu_linear_bf16(W, X, n, Y, f32out, j0, j1);
}

/* One reference set: the model preset, its prompt set and the H200 traces made for both. */
typedef struct refset {
    const char *preset, *h200; /* h200: the traces' stem under verify/references-h200 */
    int sweep_emu;             /* prompts the sweep runs on the emulated AMX path (0: all) */
} refset;

/* Gemma's 262k-row head and emulated tiles make each of its prompts minutes there: two. */
static const refset sets[] = {
    {"instruct", "smollm2-instruct", 0},
    {"base", "smollm2-base", 0},
    {"gemma3", "gemma3", 2},
};
static const char *const kinds[] = {"bf16-sdpa", "bf16-eager", "fp32-sdpa"};
#define N_KINDS 3

/* The kernel paths: every real one the CPU has from AVX2 up, then the AMX table emulated. */
#define PATH_AMX_EMU (NB_ISA_AMXBF16 + 1)

static int use_path(int p)
{
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    nb_err err;
    nb_kernels_use_table(NULL);
    if (p == PATH_AMX_EMU) {
        /* as the dispatcher wires the AMX path: the tile kernel for prefill-sized linears,
         * the AVX-512 BF16 kernel for short ones and as the row-exact peer */
        int real512 = nb_kernels_cpu_isa() >= NB_ISA_AVX512BF16;
        emu = nb_kernels_avx2;
        emu.isa = NB_ISA_AMXBF16;
        emu.linear_bf16 = real512 ? amx_emu_fast : nb_amx_emu_linear_bf16;
        emu.linear_bf16_rows = real512 ? nb_avx512_linear_bf16 : nb_avx512_emu_linear_bf16;
        emu.wmat_finish = nb_avx512_emu_wmat_finish;
        nb_kernels_use_table(&emu);
        return 1;
    }
    if (p > (int)nb_kernels_cpu_isa())
        return 0;
    assert_int_equal(nb_kernels_set_isa((nb_isa)p, &err), NB_OK);
    return 1;
}

static const char *path_name(int p)
{
    return p == PATH_AMX_EMU ? "amx-bf16 (emulated)" : nb_isa_name((nb_isa)p);
}

static void trace_path(const char *stem, const char *kind, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/verify/references-h200/%s-%s.json", tu_env("NB_SRC", "."), stem,
             kind);
}

typedef struct tally {
    int records, divergences, near_ties, decode_checks;
    double worst_steps; /* the largest margin at a divergence, in bf16 steps at the top-1 */
} tally;

/* The engine on path p, bf16, over the set's first n_prompts prompts (0: all) and n_tokens
 * steps (0: the traces'): generated once (against the bf16-sdpa trace, every divergence
 * localized), then gated against each H200 trace. Every record must PASS, every divergence
 * must be a near tie (and localized as one), and every decode-path check exactly clean. */
static int check_set(const refset *rs, int p, int first, int n_prompts, int n_tokens, tally *t)
{
    tu_require_model();
    nb_deploy_spec s;
    nb_deploy_spec_default(&s);
    snprintf(s.model, sizeof s.model, "%s", rs->preset);
    s.threads = 2;
    s.dtype = NB_DTYPE_BF16;
    nb_deploy *d = NULL;
    nb_err err = {0};
    if (nb_deploy_open(&s, &d, &err)) {
        print_message("%s: the model cannot be opened: %s\n", rs->preset, err.msg);
        return 0; /* the other sets still run; the test is then skipped, not passed */
    }
    char path[2048];
    trace_path(rs->h200, kinds[0], path, sizeof path);
    nb_verify_opts o = {0};
    o.reference = path;
    o.first = first;
    o.count = n_prompts;
    o.n_tokens = n_tokens;
    o.strict = 1;
    o.localize = NB_LOCALIZE_DIVERGENCE; /* every divergence localized, PASS or not */
    nb_verify_result r;
    if (nb_verify_run(d, &o, &r, &err))
        fail_msg("%s on %s: %s", rs->preset, path_name(p), err.msg);
    for (int i = 0; i < r.n; i++) {
        const nb_verify_record *v = &r.recs[i];
        char sum[300];
        nb_decode_check_summary(&v->dcheck, sum, sizeof sum);
        if (v->dcheck.status != NB_LOC_KV_CLEAN || v->dcheck.max_diff != 0.0)
            fail_msg("%s prompt %d on %s: %s", rs->preset, v->index, path_name(p), sum);
        t->decode_checks++;
        /* against the trace it ran with, each divergence is localized: a near tie, the
         * decode path clean (the H200 traces keep no hidden states: layers not compared) */
        if (v->gate.divergence >= 0 && (!v->loc.present || strcmp(v->loc.verdict, "near_tie") ||
                                        (v->gate.divergence > 0 && v->loc.kv_max_diff != 0.0)))
            fail_msg("%s prompt %d on %s: divergence at step %d localized '%s' (decode steps "
                     "against the replay: %g): %s", rs->preset, v->index, path_name(p),
                     v->gate.divergence, v->loc.verdict, v->loc.kv_max_diff, v->loc.summary);
    }
    for (int k = 0; k < N_KINDS; k++) {
        trace_path(rs->h200, kinds[k], path, sizeof path);
        nb_trace *tr = NULL;
        if (nb_trace_load(path, &tr, &err))
            fail_msg("%s", err.msg);
        for (int i = 0; i < r.n; i++) {
            const nb_verify_record *v = &r.recs[i];
            const nb_trace_prompt *tp = &tr->prompts[v->index];
            nb_gate_result g;
            nb_gate_check(v->dev, v->n_steps, tp->steps, r.n_tokens, r.k, &g);
            t->records++;
            if (g.status != NB_GATE_PASS)
                fail_msg("%s prompt %d on %s against %s: %s", rs->preset, v->index,
                         path_name(p), kinds[k], g.reason);
            if (g.divergence < 0)
                continue;
            t->divergences++;
            double st = g.ref_margin / nb_gate_bf16_step(tp->steps[g.divergence].logits[0]);
            t->worst_steps = fmax(t->worst_steps, st);
            print_message("  %s prompt %d vs %s on %s: step %d, margin %.4f at top-1 %.4f "
                          "(%.2f bf16 steps) %s\n", rs->preset, v->index, kinds[k],
                          path_name(p), g.divergence, g.ref_margin,
                          tp->steps[g.divergence].logits[0], st,
                          nb_gate_is_near_tie(&g) ? "near tie" : "NOT A NEAR TIE");
            if (!nb_gate_is_near_tie(&g))
                fail_msg("%s prompt %d on %s against %s: a divergence at step %d with margin "
                         "%.4f is outside the near-tie band %.4f", rs->preset, v->index,
                         path_name(p), kinds[k], g.divergence, g.ref_margin, g.near_tie_band);
            t->near_ties++;
        }
        nb_trace_free(tr);
    }
    nb_verify_result_free(&r);
    nb_deploy_close(d);
    return 1;
}

/* Which prompts of a set a path checks: [first, first + count) (count 0: to the end), each
 * over n_tokens steps (0: the traces'); a list ends with n_tokens -1. */
typedef struct span {
    int first, count, n_tokens;
} span;

/* Each set on each path: spans on the real paths, spans_emu on the emulated AMX one (whose
 * tiles cost seconds per prefill). */
static void run(int n_sets, const span *spans, const span *spans_emu)
{
    int missing = 0;
    for (int p = NB_ISA_AVX2; p <= PATH_AMX_EMU; p++) {
        if (!use_path(p)) {
            print_message("%s: not on this CPU\n", path_name(p));
            continue;
        }
        tally t = {0};
        double t0 = tu_now_ms();
        for (int i = 0; i < n_sets; i++)
            for (const span *sp = p == PATH_AMX_EMU ? spans_emu : spans; sp->n_tokens >= 0; sp++) {
                int count = sp->count;
                if (p == PATH_AMX_EMU && !count && sets[i].sweep_emu)
                    count = sets[i].sweep_emu; /* the sweep's whole set: capped there */
                missing += !check_set(&sets[i], p, sp->first, count, sp->n_tokens, &t);
            }
        print_message("%s: %d records against %d H200 traces each PASS, %d divergences all near "
                      "ties (worst %.2f bf16 steps), %d decode-path checks clean (%.1f s)\n",
                      path_name(p), t.records, N_KINDS, t.divergences, t.worst_steps,
                      t.decode_checks, (tu_now_ms() - t0) / 1000.0);
    }
    nb_kernels_use_table(NULL);
    tu_require(!missing, "%d set(s) x path(s) had no model (see above)", missing);
}

/* The default suite's share: the instruct set's first 2 prompts, 32 steps, on every path;
 * on the emulated AMX path prompt 1 (it diverges at step 24: a replay of 24 decode tokens,
 * past the tile kernel's 16 rows) and prompt 3 over 5 steps (the one whose decode steps a
 * replay with the prompt on other kernels than the generation's misses by 0.312 logits). */
static void test_quick(void **state)
{
    (void)state;
    static const span real[] = {{0, 2, 0}, {0, 0, -1}};
    static const span emu[] = {{1, 1, 0}, {3, 1, 5}, {0, 0, -1}};
    run(1, real, emu);
}

/* Every set (SmolLM2 instruct and base, Gemma 3), every prompt and step (e2e). */
static void test_sweep(void **state)
{
    (void)state;
    static const span all[] = {{0, 0, 0}, {0, 0, -1}};
    run((int)(sizeof sets / sizeof *sets), all, all);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : "quick";
    if (strcmp(only, "quick") && strcmp(only, "sweep")) {
        fprintf(stderr, "usage: %s [quick|sweep]\n", argv[0]);
        return 2;
    }
    int rc;
    if (!strcmp(only, "quick")) {
        const struct CMUnitTest one[] = {cmocka_unit_test(test_quick)};
        rc = tu_run_group(one, NULL, NULL);
    } else {
        const struct CMUnitTest one[] = {cmocka_unit_test(test_sweep)};
        rc = tu_run_group(one, NULL, NULL);
    }
    nb_kernels_shutdown();
    return rc;
}
