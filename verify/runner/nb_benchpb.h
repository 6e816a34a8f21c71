/* nb_benchpb: run and profile results (engine/nb_bench) <-> npubench.Metrics, a profile's
 * phases and kernels, both ways, under nb_jobpb's ownership rule. */
#ifndef NB_BENCHPB_H
#define NB_BENCHPB_H

#include "nb_bench.h"
#include "nb_err.h"
#include "nb_jobpb.h"
#include "npubench.pb-c.h"

/* ---- run: Metrics with every sample ------------------------------------------------
 * *out gets a new Metrics (means, stddevs, every sample, texts, setup); warmup is the
 * number of untimed runs that preceded the samples. */
nb_code nb_benchpb_run_to_pb(const nb_run_result *r, int warmup, Npubench__Metrics **out,
                           nb_err *err);
/* m must carry at least one sample; out is overwritten, free with nb_run_result_free. */
nb_code nb_benchpb_run_from_pb(const Npubench__Metrics *m, nb_run_result *out, nb_err *err);

/* ---- profile: Metrics + phases + kernels ------------------------------------------
 * Phases "setup" (once), "prefill" (per repetition), "decode" (per token, calls =
 * reps x tokens), "lm_head" (per call); each avg_ms with its stddev_ms.  Kernels: every
 * op with calls > 0 under its nb_op_name, device "cpu". */
nb_code nb_benchpb_profile_to_pb(const nb_profile_result *p, int warmup, Npubench__JobResult *out,
                               nb_err *err);
/* Needs res->metrics; unknown kernel names are NB_EINVAL naming them. */
nb_code nb_benchpb_profile_from_pb(const Npubench__JobResult *res, nb_profile_result *out,
                                 nb_err *err);

#endif
