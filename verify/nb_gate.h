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
    char reason[160];    /* empty on PASS */
} nb_gate_result;

/* Compares device and reference traces with top-k sets of size k
 * (1..NB_GATE_K_MAX). Pure: no I/O, no allocation. */
void nb_gate_check(const nb_gate_step *dev, int n_dev, const nb_gate_step *ref, int n_ref, int k,
                   nb_gate_result *out);

/* Rank of id in a top-k list, -1 when absent. */
int nb_gate_rank(const nb_gate_step *s, int k, int32_t id);

/* A reference margin at or below this many logits is a near tie: two CPUs' bf16 references
 * differ by up to ~0.19 logits (docs/numerics.md), so such a divergence may be the
 * reference's noise, not the device's error. */
#define NB_GATE_NEAR_TIE 0.25

/* The reference's margin at a divergence (see nb_gate_result.ref_margin) from its top-k
 * step ref and the device's token: fills out->ref_margin and out->ref_margin_beyond. */
void nb_gate_margin(const nb_gate_step *ref, int k, int32_t dev_token, nb_gate_result *out);

#endif
