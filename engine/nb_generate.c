/* nb_generate: the greedy loop; timing brackets only prefill/decode, never setup.
 * Top-k uses nb_topk_f32 so both sides of the gate break ties the same way. */
#include "nb_generate.h"

#include <stdlib.h>
#include <string.h>

#include "nb_kernels.h"
#include "nb_time.h"

static void pick(const float *logits, int vocab, int k, nb_gate_step *s)
{
    nb_topk_f32(logits, vocab, k, s->topk, s->logits);
    s->token = s->topk[0];
}

int nb_cancel_requested(const nb_cancel *c)
{
    return c && c->fn && c->fn(c->user);
}

static nb_code cancelled(nb_gen *out, int step, nb_err *err)
{
    nb_gen_free(out);
    return nb_err_set(err, NB_ECANCELED, "cancelled at token %d", step);
}

nb_code nb_generate(nb_deploy *d, const int32_t *ids, int n_ids, const nb_gen_opts *o,
                    nb_gen *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (o->n_tokens < 1 || o->n_tokens > 65536)
        return nb_err_set(err, NB_EINVAL, "n_tokens %d: must be 1..65536", o->n_tokens);
    if (o->k < 1 || o->k > NB_GATE_K_MAX)
        return nb_err_set(err, NB_EINVAL, "k %d: must be 1..%d", o->k, NB_GATE_K_MAX);
    int max_seq = nb_deploy_max_seq(d);
    if (n_ids + o->n_tokens - 1 > max_seq)
        return nb_err_set(err, NB_EINVAL,
                          "prompt of %d tokens + n_tokens %d exceeds max_seq %d", n_ids,
                          o->n_tokens, max_seq);
    out->steps = calloc((size_t)o->n_tokens, sizeof *out->steps);
    out->step_ms = calloc((size_t)o->n_tokens, sizeof *out->step_ms);
    if (!out->steps || !out->step_ms) {
        nb_gen_free(out);
        return nb_err_set(err, NB_ENOMEM, "out of memory for %d steps", o->n_tokens);
    }
    out->n_prompt = n_ids;
    int vocab = nb_deploy_vocab(d);
    const float *logits;
    if (nb_cancel_requested(&o->cancel))
        return cancelled(out, 0, err);
    double t0 = nb_now_ms();
    nb_code rc = nb_deploy_prefill(d, ids, n_ids, &logits, err);
    if (rc) {
        nb_gen_free(out);
        return rc;
    }
    pick(logits, vocab, o->k, &out->steps[0]);
    out->prefill_ms = nb_now_ms() - t0;
    out->n_steps = 1;
    if (o->on_token.fn)
        o->on_token.fn(o->on_token.user, 1, o->n_tokens);
    double td = nb_now_ms();
    for (int i = 1; i < o->n_tokens; i++) {
        int32_t prev = out->steps[i - 1].token;
        if (o->stop_eog && nb_tokenizer_is_eog(d->tok, prev))
            break;
        /* One poll per token: a cancel costs at most one decode step, and the poll (an
         * uncontended lock in the worker) is noise next to a step. */
        if (nb_cancel_requested(&o->cancel))
            return cancelled(out, i, err);
        double ts = nb_now_ms();
        if ((rc = nb_deploy_decode_step(d, prev, n_ids + i - 1, &logits, err))) {
            nb_gen_free(out);
            return rc;
        }
        pick(logits, vocab, o->k, &out->steps[i]);
        out->step_ms[i - 1] = nb_now_ms() - ts;
        out->n_steps++;
        if (o->on_token.fn)
            o->on_token.fn(o->on_token.user, out->n_steps, o->n_tokens);
    }
    out->decode_ms = nb_now_ms() - td;
    return NB_OK;
}

void nb_gen_free(nb_gen *g)
{
    free(g->steps);
    free(g->step_ms);
    memset(g, 0, sizeof *g);
}
