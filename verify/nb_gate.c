/* nb_gate: top-k token-set inclusion at the first divergence (vLLM's check_logprobs_close idea).
 * Discrete, so bf16 ULP noise passes while real regressions fail. */
#include "nb_gate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int nb_gate_rank(const nb_gate_step *s, int k, int32_t id)
{
    for (int i = 0; i < k; i++)
        if (s->topk[i] == id)
            return i;
    return -1;
}

double nb_gate_bf16_step(double x)
{
    double a = fabs(x);
    if (!(a >= 0x1p-126) || isinf(a))
        return 0x1p-133;
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): a in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 1 - 7);
}

double nb_gate_near_tie_band(double top1)
{
    return NB_GATE_NEAR_TIE_STEPS * nb_gate_bf16_step(top1);
}

int nb_gate_is_near_tie(const nb_gate_result *g)
{
    return !isnan(g->ref_margin) && !g->ref_margin_beyond && g->ref_margin <= g->near_tie_band;
}

void nb_gate_margin(const nb_gate_step *ref, int k, int32_t dev_token, nb_gate_result *out)
{
    int r = nb_gate_rank(ref, k, dev_token);
    /* A top-k of ids alone (mlir-air's TopKCheckRecord carries no logits) reads as all
     * zeros: no margin can be told, rather than a margin of 0. */
    int any = 0;
    for (int i = 0; i < k && !any; i++)
        any = ref->logits[i] != 0.0f;
    if (!any) {
        out->ref_margin = NAN;
        out->near_tie_band = NAN;
        out->ref_margin_beyond = 0;
        return;
    }
    out->near_tie_band = nb_gate_near_tie_band(ref->logits[0]);
    out->ref_margin_beyond = r < 0;
    out->ref_margin = (double)ref->logits[0] - ref->logits[r < 0 ? k - 1 : r];
}

void nb_gate_check(const nb_gate_step *dev, int n_dev, const nb_gate_step *ref, int n_ref, int k,
                   nb_gate_result *out)
{
    memset(out, 0, sizeof *out);
    out->divergence = -1;
    out->dev_token = out->ref_token = -1;
    out->dev_rank_in_ref = out->ref_rank_in_dev = -1;
    out->ref_margin = out->near_tie_band = NAN;
    out->n_steps = n_dev < n_ref ? n_dev : n_ref;
    if (k < 1)
        k = 1;
    if (k > NB_GATE_K_MAX)
        k = NB_GATE_K_MAX;
    for (int i = 0; i < out->n_steps; i++) {
        if (dev[i].token == ref[i].token)
            continue;
        out->divergence = i;
        out->agreed = i;
        out->dev_token = dev[i].token;
        out->ref_token = ref[i].token;
        out->dev_rank_in_ref = nb_gate_rank(&ref[i], k, dev[i].token);
        out->ref_rank_in_dev = nb_gate_rank(&dev[i], k, ref[i].token);
        nb_gate_margin(&ref[i], k, dev[i].token, out);
        if (out->dev_rank_in_ref < 0) {
            out->status = NB_GATE_FAIL;
            snprintf(out->reason, sizeof out->reason,
                     "step %d: device token %d not in reference top-%d", i, dev[i].token, k);
        } else if (out->ref_rank_in_dev < 0) {
            out->status = NB_GATE_FAIL;
            snprintf(out->reason, sizeof out->reason,
                     "step %d: reference token %d not in device top-%d", i, ref[i].token, k);
        }
        return;
    }
    out->agreed = out->n_steps;
    if (n_dev != n_ref) {
        out->status = NB_GATE_FAIL;
        snprintf(out->reason, sizeof out->reason,
                 "device produced %d steps, reference %d: traces must be the same length", n_dev,
                 n_ref);
    }
}
