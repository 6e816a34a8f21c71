/* nb_bench: repetitions of the greedy loop with TTFT/TPS/TPOT, and the per-op profile.
 * Profiling toggles the engine's timers only around profile jobs; run jobs pay nothing. */
#include "nb_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_generate.h"
#include "nb_stats.h"
#include "nb_time.h"
#include "nb_utf8.h"

void nb_run_opts_default(nb_run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_tokens = 100;
    o->reps = 3;
    o->warmup = 1;
    o->chat = -1;
    o->stop_eog = 1;
}

nb_stat nb_stat_of(const double *x, int n)
{
    nb_stat s = {0, 0};
    if (n <= 0)
        return s;
    s.mean = nb_stats_mean(x, (size_t)n);
    s.stddev = n > 1 ? nb_stats_stddev(x, (size_t)n) : 0.0;
    return s;
}

/* *chat_out: the template was applied (it carries its own BOS, if any). */
static nb_code prepare_prompt(nb_deploy *d, const nb_run_opts *o, char **text, int *chat_out,
                              nb_err *err)
{
    const char *p = o->prompt ? o->prompt : NB_DEFAULT_RUN_PROMPT;
    size_t bad;
    if (!*p)
        return nb_err_set(err, NB_EINVAL, "--prompt: empty prompt");
    if (!nb_utf8_valid(p, strlen(p), &bad))
        return nb_err_set(err, NB_EINVAL, "--prompt: invalid UTF-8 at byte offset %zu", bad);
    int chat = o->chat;
    if (chat < 0)
        chat = strcmp(d->preset, "base") && nb_tokenizer_chat_style(d->tok) != NB_CHAT_NONE;
    *chat_out = chat;
    if (chat)
        return nb_tokenizer_chat(d->tok, p, text, err);
    *text = strdup(p);
    return *text ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory");
}

/* One repetition: the clock starts before tokenization; tok reports its tokens (NULL: no). */
static nb_code one_rep(nb_deploy *d, const char *text, int chat, const nb_run_opts *o,
                       const nb_token_hook *tok, nb_run_sample *s, nb_gen *g, nb_err *err)
{
    memset(s, 0, sizeof *s);
    double t0 = nb_now_ms();
    int32_t *ids = NULL;
    size_t n_ids = 0;
    nb_code rc = nb_tokenizer_encode(d->tok, text, strlen(text), !chat, 1, &ids, &n_ids, err);
    if (rc)
        return rc;
    s->tokenize_ms = nb_now_ms() - t0;
    nb_gen_opts go = {.n_tokens = o->n_tokens, .k = 1, .stop_eog = o->stop_eog,
                      .cancel = o->cancel};
    if (tok)
        go.on_token = *tok;
    rc = nb_generate(d, ids, (int)n_ids, &go, g, err);
    free(ids);
    if (rc)
        return rc;
    s->prompt_tokens = (int)n_ids;
    s->generated_tokens = g->n_steps;
    s->ttft_ms = s->tokenize_ms + g->prefill_ms;
    s->decode_ms = g->decode_ms;
    s->latency_ms = s->ttft_ms + s->decode_ms;
    int dec = g->n_steps - 1;
    s->tps = dec > 0 && g->decode_ms > 0 ? dec / (g->decode_ms / 1000.0) : 0.0;
    s->decode_ms_per_token = dec > 0 ? g->decode_ms / dec : 0.0;
    s->tpot_ms = dec > 0 ? (s->latency_ms - s->ttft_ms) / dec : 0.0;
    return NB_OK;
}

static void summarise(nb_run_result *r)
{
    double *v = calloc((size_t)(r->n > 0 ? r->n : 1), sizeof(double));
    if (!v)
        return;
#define STAT(field)                                                                              \
    do {                                                                                         \
        for (int i = 0; i < r->n; i++)                                                           \
            v[i] = r->samples[i].field;                                                          \
        r->field = nb_stat_of(v, r->n);                                                          \
    } while (0)
    STAT(ttft_ms);
    STAT(tps);
    STAT(decode_ms_per_token);
    STAT(tpot_ms);
#undef STAT
    free(v);
}

static char *gen_text(nb_deploy *d, const nb_gen *g)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(g->n_steps > 0 ? g->n_steps : 1));
    if (!ids)
        return NULL;
    for (int i = 0; i < g->n_steps; i++)
        ids[i] = g->steps[i].token;
    char *text = NULL, *clean = NULL;
    size_t len = 0;
    nb_err e;
    if (nb_tokenizer_decode(d->tok, ids, (size_t)g->n_steps, 1, &text, &len, &e) == NB_OK)
        clean = nb_utf8_sanitize(text, len);
    free(text);
    free(ids);
    return clean;
}

static nb_code run_reps(nb_deploy *d, const nb_run_opts *o, nb_run_result *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (o->reps < 1 || o->reps > 1000)
        return nb_err_set(err, NB_EINVAL, "--reps %d: must be 1..1000", o->reps);
    if (o->warmup < 0 || o->warmup > 100)
        return nb_err_set(err, NB_EINVAL, "warm-up count %d: must be 0..100", o->warmup);
    int chat = 0;
    nb_code rc = prepare_prompt(d, o, &out->prompt_text, &chat, err);
    if (rc)
        return rc;
    out->samples = calloc((size_t)o->reps, sizeof *out->samples);
    if (!out->samples) {
        nb_run_result_free(out);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    out->setup_ms = d->setup_ms;
    nb_gen g;
    nb_run_sample s;
    for (int w = 0; w < o->warmup; w++) {
        if ((rc = one_rep(d, out->prompt_text, chat, o, NULL, &s, &g, err))) {
            nb_run_result_free(out);
            return rc;
        }
        nb_gen_free(&g);
    }
    for (int r = 0; r < o->reps; r++) {
        if ((rc = one_rep(d, out->prompt_text, chat, o, &o->on_token, &out->samples[r], &g, err))) {
            nb_run_result_free(out);
            return rc;
        }
        out->n++;
        if (r == o->reps - 1)
            out->text = gen_text(d, &g);
        nb_gen_free(&g);
        if (o->progress) {
            char msg[96];
            snprintf(msg, sizeof msg, "repetition %d: TTFT %.1f ms, %.1f tokens/s", r + 1,
                     out->samples[r].ttft_ms, out->samples[r].tps);
            o->progress(o->progress_user, r + 1, o->reps, msg);
        }
    }
    summarise(out);
    return NB_OK;
}

nb_code nb_bench_run(nb_deploy *d, const nb_run_opts *o, nb_run_result *out, nb_err *err)
{
    return run_reps(d, o, out, err);
}

void nb_run_result_free(nb_run_result *r)
{
    free(r->samples);
    free(r->text);
    free(r->prompt_text);
    memset(r, 0, sizeof *r);
}

nb_code nb_bench_profile(nb_deploy *d, const nb_run_opts *o, nb_profile_result *out,
                         nb_err *err)
{
    memset(out, 0, sizeof *out);
    nb_run_opts po = *o;
    po.stop_eog = 0; /* every profile has the same number of decode steps */
    /* Warm-up without timers, then the timed repetitions with them. */
    nb_run_opts wo = po;
    wo.reps = po.warmup > 0 ? po.warmup : 1;
    wo.warmup = 0;
    wo.progress = NULL; /* the timed repetitions are the progress */
    nb_run_result warm;
    nb_code rc = NB_OK;
    if (po.warmup > 0) {
        if ((rc = run_reps(d, &wo, &warm, err)))
            return rc;
        nb_run_result_free(&warm);
    }
    po.warmup = 0;
    /* A backend without per-op timings (air: the steps run in the adapter's process) still
     * profiles its phases: TTFT, decode ms/token; its op table stays empty. */
    int per_op = nb_backend_can(d->ops, NB_BACKEND_PROFILE);
    if (per_op && (rc = nb_deploy_profile(d, 1, err)))
        return rc;
    rc = run_reps(d, &po, &out->run, err);
    if (per_op)
        nb_deploy_profile(d, 0, NULL);
    if (rc)
        return rc;
    if (per_op)
        memcpy(out->ops, nb_deploy_profile_stats(d), sizeof out->ops);
    out->setup_ms = d->setup_ms;
    out->reps = out->run.n;
    out->n_tokens = o->n_tokens;
    out->prompt_tokens = out->run.samples[0].prompt_tokens;
    double pre[1000], dec[1000];
    for (int i = 0; i < out->run.n; i++) {
        pre[i] = out->run.samples[i].ttft_ms - out->run.samples[i].tokenize_ms;
        dec[i] = out->run.samples[i].decode_ms_per_token;
    }
    out->prefill_ms = nb_stat_of(pre, out->run.n);
    out->decode_avg_ms = nb_stat_of(dec, out->run.n);
    const nb_op_stats *lm = &out->ops[NB_OP_LM_HEAD];
    out->lm_head_ms = lm->calls ? lm->total_ms / lm->calls : 0.0;
    return NB_OK;
}

void nb_profile_result_free(nb_profile_result *p)
{
    nb_run_result_free(&p->run);
}
