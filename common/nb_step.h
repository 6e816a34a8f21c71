/* nb_step: one greedy decoding step with its top-k, the unit both sides of the gate record.
 * A plain type below both the engine, which produces it, and the records that compare it. */
#ifndef NB_STEP_H
#define NB_STEP_H

#include <stdint.h>

#define NB_GATE_K_MAX 20

/* The chosen token and the top-k ids, logit descending, ties to the smaller
 * id (topk[0] is the chosen token). */
typedef struct nb_gate_step {
    int32_t token;
    int32_t topk[NB_GATE_K_MAX];
    float logits[NB_GATE_K_MAX];
} nb_gate_step;

#endif
