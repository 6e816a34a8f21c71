/* nb_exec_report: the report JSON a deployment's verify or diagnosis writes, mlir-air's
 * (verify/report.py) or npubench's own, read into the C results the job layer converts. */
#ifndef NB_EXEC_REPORT_H
#define NB_EXEC_REPORT_H

#include <json-c/json.h>

#include "nb_diagnosis.h"
#include "nb_err.h"
#include "nb_verify.h"

/* A verify report: mlir-air's {"config", "prompts", "topk_checks": [TopKCheckRecord +
 * "pair"], "summary"} (records of pair "npu_vs_hf" gate; ranks 1-based there) or
 * npubench's {"config", "records": [...]}.  Fills out (free with nb_verify_result_free):
 * one record per prompt, k and n_tokens from the report (k_dflt / the longest record
 * when it has none), the gate's verdict from the records' status.  A report without a
 * gate record, or a field of the wrong type or out of range, is NB_EFORMAT naming what
 * and the field ("report.json: topk_checks[1].divergence_step 40: must be -1..31"). */
nb_code nb_exec_report_verify(json_object *root, const char *what, int k_dflt,
                              nb_verify_result *out, nb_err *err);

/* A diagnosis report: mlir-air's {"config": {"prompt"}, "per_layer": [ComparisonRecord:
 * name, layer, cosine{min, p5, median, mean}, errors{max_abs}]} (its highest layer is the
 * post-final-norm hidden state) or npubench's {"prompt", "positions", "layers": [...]}. */
nb_code nb_exec_report_diagnosis(json_object *root, const char *what,
                                 nb_diagnosis_result *out, nb_err *err);

#endif
