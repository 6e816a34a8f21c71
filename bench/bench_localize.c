/* bench_localize: what a localization costs next to the verify it explains, as a fraction of the
 * same run's verify time (never a timed assertion; the machine's load cancels out in the ratio). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_generate.h"
#include "nb_localize.h"
#include "nb_localize_run.h"
#include "nb_time.h"
#include "nb_verify.h"
#include "nb_verify_run.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_localize [--model instruct|base|PATH] [--prompts N] [--n-tokens N]\n"
            "                      [--threads N]\n"
            "Verifies N prompts with localization on every divergence (NPUBENCH_FAULT applies),\n"
            "then localizes each prompt as if it had diverged at its last step (the most\n"
            "expensive case: the longest cache-free prefill). Prints per prompt:\n"
            "  prompt <i> verify_ms <ms> divergence <step> localize_ms <ms> worst_ms <ms> "
            "worst_fraction <f>\n"
            "and the totals as fractions of the verify time.\n");
}

int main(int argc, char **argv)
{
    const char *model = "instruct";
    int prompts = 2, n_tokens = 32, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--model"))
            model = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--prompts"))
            prompts = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--n-tokens"))
            n_tokens = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else {
            usage();
            return 2;
        }
    }
    if (prompts < 1 || n_tokens < 2) {
        usage();
        return 2;
    }
    nb_deploy_spec spec;
    nb_deploy_spec_default(&spec);
    snprintf(spec.model, sizeof spec.model, "%s", model);
    spec.threads = threads;
    nb_deploy *d;
    nb_err err = {0};
    if (nb_deploy_open(&spec, &d, &err)) {
        fprintf(stderr, "bench_localize: %s\n", err.msg);
        return 2;
    }
    nb_verify_opts o = {0};
    o.max_prompts = prompts;
    o.n_tokens = n_tokens;
    o.localize = NB_LOCALIZE_DIVERGENCE;
    nb_verify_result r;
    nb_prompts ps;
    char ppath[1024];
    nb_trace *tr = NULL;
    nb_verify_default_prompts(d->preset, ppath, sizeof ppath);
    if (nb_verify_run(d, &o, &r, &err) || nb_prompts_load(ppath, &ps, &err) ||
        nb_trace_find(nb_verify_default_refdir(), d->model_sha256, ps.sha256, 0, &tr, &err)) {
        fprintf(stderr, "bench_localize: %s\n", err.msg);
        nb_deploy_close(d);
        return 2;
    }
    double verify_ms = 0, loc_ms = 0, worst_ms = 0;
    for (int i = 0; i < r.n; i++) {
        const nb_verify_record *v = &r.recs[i];
        const nb_trace_prompt *tp = &tr->prompts[v->index];
        double vm = v->prefill_ms + v->decode_ms;
        /* the worst case: a divergence at the last step */
        nb_gate_result g = v->gate;
        g.divergence = v->n_steps - 1;
        nb_localization l;
        double t0 = nb_now_ms();
        nb_code rc = nb_localize_run(d, tp->ids, tp->n_ids, v->dev, r.k, &g, tp, &l, &err);
        double wm = nb_now_ms() - t0;
        if (rc) {
            fprintf(stderr, "bench_localize: prompt %d: %s\n", v->index, err.msg);
            continue;
        }
        nb_localize_free(&l);
        double lm = v->loc.present ? v->loc.ms : 0.0;
        printf("prompt %d verify_ms %.1f divergence %d localize_ms %.1f worst_ms %.1f "
               "worst_fraction %.3f\n",
               v->index, vm, v->gate.divergence, lm, wm, wm / vm);
        verify_ms += vm;
        loc_ms += lm;
        worst_ms += wm;
    }
    printf("total verify_ms %.1f (wall %.1f) localize_ms %.1f (fraction %.3f) worst_ms %.1f "
           "(fraction %.3f)\n",
           verify_ms, r.wall_ms, loc_ms, loc_ms / verify_ms, worst_ms, worst_ms / verify_ms);
    nb_trace_free(tr);
    nb_prompts_free(&ps);
    nb_verify_result_free(&r);
    nb_deploy_close(d);
    return 0;
}
