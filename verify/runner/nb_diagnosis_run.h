/* nb_diagnosis_run: one prefill of a deployment with every layer's output captured, compared
 * with the HF trace's hidden states (verify/nb_diagnosis's result). */
#ifndef NB_DIAGNOSIS_RUN_H
#define NB_DIAGNOSIS_RUN_H

#include "nb_deploy.h"
#include "nb_diagnosis.h"
#include "nb_generate.h"

/* prompt NULL: the trace's prompt (the default diagnosis prompt).
 * trace_path NULL: looked up by model digest + prompt digest.
 * cancel (may be NULL) is polled before the forward pass: NB_ECANCELED. */
nb_code nb_diagnosis_run(nb_deploy *d, const char *prompt, const char *trace_path,
                         const char *refdir, const nb_cancel *cancel, nb_diagnosis_result *out,
                         nb_err *err);
#endif
