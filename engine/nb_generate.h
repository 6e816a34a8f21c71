/* nb_generate: greedy decoding on a deployment with per-step top-k and timings.
 * The one loop behind run, verify, profile and the worker's jobs. */
#ifndef NB_GENERATE_H
#define NB_GENERATE_H

#include <stdint.h>

#include "nb_deploy.h"
#include "nb_step.h"

/* Cancellation as the caller defines it (the engine knows no jobs or workers): fn(user)
 * non-zero stops the work at its next token with NB_ECANCELED. fn NULL: never. */
typedef struct nb_cancel {
    int (*fn)(void *user);
    void *user;
} nb_cancel;

/* 1 when c asks to stop (c may be NULL). */
int nb_cancel_requested(const nb_cancel *c);

/* Progress inside one generation: fn(user, done, total) after each token (done of total
 * generated). Called on the generating thread inside the timed region, so it must only
 * record (a store under an uncontended lock), never block or do I/O. fn NULL: none. */
typedef struct nb_token_hook {
    void (*fn)(void *user, int done, int total);
    void *user;
} nb_token_hook;

typedef struct nb_gen_opts {
    int n_tokens;   /* tokens to generate (>= 1) */
    int k;          /* top-k kept per step (1..NB_GATE_K_MAX) */
    int stop_eog;   /* stop at an end-of-generation token (run); verify never stops */
    nb_cancel cancel; /* polled before the prefill and before every decode step */
    nb_token_hook on_token; /* after the first token and after every decode step */
} nb_gen_opts;

typedef struct nb_gen {
    nb_gate_step *steps;  /* n_steps entries; caller frees with nb_gen_free */
    int n_steps;
    int n_prompt;
    double prefill_ms;    /* prefill + LM head + first-token selection */
    double decode_ms;     /* wall time of decode steps 1..n-1 */
    double *step_ms;      /* per decode step (n_steps - 1 entries) */
} nb_gen;

/* Prefills ids and greedy-decodes. The first token comes from the prefill
 * logits; the argmax is top-1 of the same tie-broken order as the top-k.
 * NB_ECANCELED (nothing in *out) when o->cancel asks to stop. */
nb_code nb_generate(nb_deploy *d, const int32_t *ids, int n_ids, const nb_gen_opts *o,
                    nb_gen *out, nb_err *err);
void nb_gen_free(nb_gen *g);

#endif
