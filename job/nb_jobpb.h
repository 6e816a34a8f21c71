/* nb_jobpb: conversions between the C result structs (verify, bench, diagnosis) and the
 * protobuf-c messages a worker reports (npubench.JobResult and its parts), both ways.
 *
 * Ownership: every message these functions build or extend is made of plain malloc
 * blocks (strings strdup'ed, arrays and sub-messages malloc'ed), exactly like a message
 * from nb_wire_unpack, so one call frees either kind: nb_jobpb_free (= nb_wire_free).
 * The *_to_pb functions fill fields of a JobResult the caller owns; that JobResult must
 * itself follow the rule (from nb_jobpb_result_new or nb_wire_unpack), and the fields
 * they set must be unset (NULL / empty) before the call.  On an error nothing that was
 * added stays half-built: the JobResult is as it was.
 * The *_from_pb functions fill C structs the caller frees with the struct's own free
 * (nb_verify_result_free, nb_run_result_free, ...); they validate counts and indexes,
 * never trusting the message (it came off the network). */
#ifndef NB_JOBPB_H
#define NB_JOBPB_H

#include "nb_bench.h"
#include "nb_deploy.h"
#include "nb_diagnosis.h"
#include "nb_err.h"
#include "nb_report.h"
#include "nb_verify.h"
#include "npubench.pb-c.h"

/* A fresh heap JobResult (all fields unset); NULL when out of memory. */
Npubench__JobResult *nb_jobpb_result_new(void);
/* Frees any message built here or unpacked by nb_wire_unpack, with everything in it. NULL ok. */
void nb_jobpb_free(void *msg);

/* ---- verify: JobResult.gates + JobResult.verify + JobResult.outcome ------------------
 * One GateRecord per record: the gate verdict, the chosen token of every step on both
 * sides (device_tokens / reference_tokens), the top-k (ids and logits) of both sides at
 * the step reports show (the divergence, else the last compared step: top_step), texts
 * and timings.  verify_from_pb(verify_to_pb(r)) gives a result for which nb_report_*
 * and nb_verify_merge produce the same documents as for r; the other steps' top-k lists
 * are not carried (no report shows them) and come back as copies of the chosen token. */
nb_code nb_jobpb_verify_to_pb(const nb_verify_result *r, Npubench__JobResult *out, nb_err *err);
/* Needs res->verify (NB_EINVAL "JobResult.verify: absent" otherwise). out is
 * overwritten (not freed first); free it with nb_verify_result_free. */
nb_code nb_jobpb_verify_from_pb(const Npubench__JobResult *res, nb_verify_result *out,
                                nb_err *err);

/* A GateRecord's localization into l (free with nb_localize_free); what names the record in
 * errors (enums, steps and counts out of range are NB_EINVAL). */
/* A GateRecord's decode-path check into c (UNCHECKED when m is NULL); an unknown status or a
 * step out of range is NB_EINVAL naming what.decode_check. */
nb_code nb_jobpb_decode_check_from_pb(const Npubench__DecodeCheck *m, const char *what,
                                      nb_decode_check *c, nb_err *err);
nb_code nb_jobpb_localization_from_pb(const Npubench__Localization *m, const char *what,
                                      nb_localization *l, nb_err *err);

/* ---- run: Metrics with every sample ------------------------------------------------
 * *out gets a new Metrics (means, stddevs, every sample, texts, setup); warmup is the
 * number of untimed runs that preceded the samples. */
nb_code nb_jobpb_run_to_pb(const nb_run_result *r, int warmup, Npubench__Metrics **out,
                           nb_err *err);
/* m must carry at least one sample; out is overwritten, free with nb_run_result_free. */
nb_code nb_jobpb_run_from_pb(const Npubench__Metrics *m, nb_run_result *out, nb_err *err);

/* ---- profile: Metrics + phases + kernels ------------------------------------------
 * Phases "setup" (once), "prefill" (per repetition), "decode" (per token, calls =
 * reps x tokens), "lm_head" (per call); each avg_ms with its stddev_ms.  Kernels: every
 * op with calls > 0 under its nb_op_name, device "cpu". */
nb_code nb_jobpb_profile_to_pb(const nb_profile_result *p, int warmup, Npubench__JobResult *out,
                               nb_err *err);
/* Needs res->metrics; unknown kernel names are NB_EINVAL naming them. */
nb_code nb_jobpb_profile_from_pb(const Npubench__JobResult *res, nb_profile_result *out,
                                 nb_err *err);

/* ---- diagnosis: JobResult.cosines + JobResult.diagnosis ------------------------------
 * One LayerCosine per layer (name "L<n>", post_norm on the last), and the top-k at the
 * last position of both sides.  Outcome is PASS: diagnosis never fails a deployment. */
nb_code nb_jobpb_diagnosis_to_pb(const nb_diagnosis_result *r, Npubench__JobResult *out,
                                 nb_err *err);
/* Needs res->diagnosis. */
nb_code nb_jobpb_diagnosis_from_pb(const Npubench__JobResult *res, nb_diagnosis_result *out,
                                   nb_err *err);

/* ---- environment -----------------------------------------------------------------
 * Where a result came from: npubench version + commit, board name/type, CPU model
 * (/proc/cpuinfo "model name"), host name, backend, dtype, threads and kernels ISA as
 * running now, model name/path/sha256.  d may be NULL (exec deployments fill the rest
 * themselves); board and board_type may be NULL. */
nb_code nb_jobpb_env_new(const nb_deploy *d, const char *board, const char *board_type,
                         Npubench__Environment **out, nb_err *err);
/* The report header (nb_report_verify_json etc.) from a reported Environment. */
void nb_jobpb_env_to_report(const Npubench__Environment *e, nb_report_env *out);

/* "model name" of /proc/cpuinfo (else the machine type from uname) into buf. */
void nb_jobpb_cpu_model(char *buf, size_t cap);

/* strdup that maps NULL to protobuf-c's shared empty string (which nb_jobpb_free
 * skips), for filling string fields by hand; NULL when out of memory. */
char *nb_jobpb_strdup(const char *s);

#endif
