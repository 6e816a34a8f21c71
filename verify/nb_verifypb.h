/* nb_verifypb: verify, localization and diagnosis results <-> the npubench.JobResult parts a
 * worker reports, both ways, under nb_jobpb's ownership rule; what the coordinator merges and
 * reports from, with no engine behind it. */
#ifndef NB_VERIFYPB_H
#define NB_VERIFYPB_H

#include "nb_diagnosis.h"
#include "nb_err.h"
#include "nb_jobpb.h"
#include "nb_localize.h"
#include "nb_report.h"
#include "nb_verify.h"
#include "npubench.pb-c.h"

/* ---- verify: JobResult.gates + JobResult.verify + JobResult.outcome ------------------
 * One GateRecord per record: the gate verdict, the chosen token of every step on both
 * sides (device_tokens / reference_tokens), the top-k (ids and logits) of both sides at
 * the step reports show (the divergence, else the last compared step: top_step), texts
 * and timings.  verify_from_pb(verify_to_pb(r)) gives a result for which nb_report_*
 * and nb_verify_merge produce the same documents as for r; the other steps' top-k lists
 * are not carried (no report shows them) and come back as copies of the chosen token. */
nb_code nb_verifypb_verify_to_pb(const nb_verify_result *r, Npubench__JobResult *out, nb_err *err);
/* Needs res->verify (NB_EINVAL "JobResult.verify: absent" otherwise). out is
 * overwritten (not freed first); free it with nb_verify_result_free. */
nb_code nb_verifypb_verify_from_pb(const Npubench__JobResult *res, nb_verify_result *out,
                                nb_err *err);

/* A GateRecord's localization into l (free with nb_localize_free); what names the record in
 * errors (enums, steps and counts out of range are NB_EINVAL). */
nb_code nb_verifypb_localization_from_pb(const Npubench__Localization *m, const char *what,
                                      nb_localization *l, nb_err *err);

/* ---- diagnosis: JobResult.cosines + JobResult.diagnosis ------------------------------
 * One LayerCosine per layer (name "L<n>", post_norm on the last), and the top-k at the
 * last position of both sides.  Outcome is PASS: diagnosis never fails a deployment. */
nb_code nb_verifypb_diagnosis_to_pb(const nb_diagnosis_result *r, Npubench__JobResult *out,
                                 nb_err *err);
/* Needs res->diagnosis. */
nb_code nb_verifypb_diagnosis_from_pb(const Npubench__JobResult *res, nb_diagnosis_result *out,
                                   nb_err *err);

/* ---- compare ----------------------------------------------------------------------------
 * The rows of a comparison as JSON, rendered here once for the coordinator's report_json and
 * `compare --json` (npubench.compare/1, docs/service.md): [{metric, base_value, value,
 * delta_pct, regression, p_value (null: not computable), n, base_n, significant}]. */
json_object *nb_verifypb_compare_rows_json(const Npubench__CompareResponse *resp);

/* ---- the report header ---------------------------------------------------------------- */
/* The report header (nb_report_verify_json etc.) from a reported Environment. */
void nb_verifypb_env_to_report(const Npubench__Environment *e, nb_report_env *out);

#endif
