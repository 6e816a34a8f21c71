/* nb_localize_run: the engine side of a localization: one cache-free re-prefill through the
 * deployment's backend, its decode steps and hidden states compared (verify/nb_localize). */
#ifndef NB_LOCALIZE_RUN_H
#define NB_LOCALIZE_RUN_H

#include "nb_deploy.h"
#include "nb_localize.h"

/* The decode-path check (verify/nb_localize.h) on d for a generation dev[0..n_dev) of prompt_ids (top-k k), comparing
 * min(steps, n_dev - 1) steps; out is overwritten. An engine error is returned (out then
 * UNCHECKED with the reason in note). */
nb_code nb_decode_check_run(nb_deploy *d, const int32_t *prompt_ids, int n_prompt,
                            const nb_gate_step *dev, int n_dev, int k, int steps,
                            nb_decode_check *out, nb_err *err);

/* Localizes one record's divergence with the deployment that produced it: one cache-free
 * prefill of the prompt plus the agreed prefix, whose per-position logits are compared with
 * the decode steps' top-k logits (dev[1..divergence], k of them) and whose hidden states at the latest
 * reference position at or before the divergence are compared with ref's (ref may be NULL
 * or carry no states: the result says so). g must have a divergence. out is overwritten. */
nb_code nb_localize_run(nb_deploy *d, const int32_t *prompt_ids, int n_prompt,
                        const nb_gate_step *dev, int k, const nb_gate_result *g,
                        const nb_trace_prompt *ref, nb_localization *out, nb_err *err);

#endif
