/* nb_gate: the production-readiness gate on two greedy traces.
 * At the first step whose chosen tokens differ, each side's token must be in the other's top-k; nothing after is checked. */
#ifndef NB_GATE_H
#define NB_GATE_H

#include <stdint.h>

#include "nb_step.h"

typedef enum nb_gate_status { NB_GATE_PASS = 0, NB_GATE_FAIL } nb_gate_status;

typedef struct nb_gate_result {
    nb_gate_status status;
    int n_steps;         /* steps compared: min of both lengths */
    int agreed;          /* steps before the first divergence */
    int divergence;      /* first differing step, -1 when none */
    int32_t dev_token, ref_token; /* at the divergence (-1 when none) */
    int dev_rank_in_ref; /* 0-based rank of the device token in the reference top-k, -1 absent */
    int ref_rank_in_dev; /* 0-based rank of the reference token in the device top-k, -1 absent */
    /* At the divergence, how close the reference's own choice was: its logit for its top-1
     * minus its logit for the device token (a near-tie is a margin near 0, bf16 noise from
     * another CPU can flip it; docs/numerics.md). When the device token is outside the
     * reference top-k, margin_beyond is 1 and the margin is more than ref_margin (top-1
     * minus the k-th). NAN when the traces do not diverge. */
    double ref_margin;
    int ref_margin_beyond;
    /* The near-tie band at this divergence: NB_GATE_NEAR_TIE_STEPS bf16 steps at the
     * reference's top-1 logit (nb_gate_near_tie_band); NAN with ref_margin. */
    double near_tie_band;
    char reason[160];    /* empty on PASS */
} nb_gate_result;

/* Compares device and reference traces with top-k sets of size k
 * (1..NB_GATE_K_MAX). Pure: no I/O, no allocation. */
void nb_gate_check(const nb_gate_step *dev, int n_dev, const nb_gate_step *ref, int n_ref, int k,
                   nb_gate_result *out);

/* Rank of id in a top-k list, -1 when absent. */
int nb_gate_rank(const nb_gate_step *s, int k, int32_t id);

/* A reference margin of at most this many bf16 steps at the reference's top-1 logit is a near
 * tie: between two references of one model (CPU bf16, H200 bf16 sdpa and eager, H200 fp32;
 * 40 prompts) every divergence has a margin of at most 2 steps at the diverging reference's
 * top-1 (docs/numerics.md), so such a divergence may be the reference's own noise, not the
 * device's error. In steps, not logits: bf16 spacing doubles with each binade, so a fixed
 * 0.25 was one step at 33 and four at 9. */
#define NB_GATE_NEAR_TIE_STEPS 2

/* The spacing of bf16 numbers at |x| (2^(e-7) for |x| in [2^e, 2^(e+1))); for |x| below the
 * normal range or not finite, the spacing of the smallest normal binade. */
double nb_gate_bf16_step(double x);
/* NB_GATE_NEAR_TIE_STEPS * nb_gate_bf16_step(top1). */
double nb_gate_near_tie_band(double top1);
/* 1 when g diverged with a known margin, the device token inside the reference's top-k, and
 * the margin at most g->near_tie_band. */
int nb_gate_is_near_tie(const nb_gate_result *g);

/* The reference's margin at a divergence (see nb_gate_result.ref_margin) from its top-k
 * step ref and the device's token: fills out->ref_margin and out->ref_margin_beyond. */
void nb_gate_margin(const nb_gate_step *ref, int k, int32_t dev_token, nb_gate_result *out);

#endif
