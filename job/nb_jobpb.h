/* nb_jobpb: the rule every npubench.JobResult part follows, and its three helpers.  The
 * conversions of results live beside the results: verify/nb_verifypb (verify, localization,
 * diagnosis, the report header), verify/runner/nb_benchpb (run, profile), verify/runner/nb_runenv
 * (the Environment).
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

#include "nb_err.h"
#include "npubench.pb-c.h"

/* A fresh heap JobResult (all fields unset); NULL when out of memory. */
Npubench__JobResult *nb_jobpb_result_new(void);
/* Frees any message built here or unpacked by nb_wire_unpack, with everything in it. NULL ok. */
void nb_jobpb_free(void *msg);

/* strdup that maps NULL to protobuf-c's shared empty string (which nb_jobpb_free
 * skips), for filling string fields by hand; NULL when out of memory. */
char *nb_jobpb_strdup(const char *s);
/* n zeroed elements for a repeated field (at least one, so n == 0 is not a NULL "failure"). */
void *nb_jobpb_calloc(size_t n, size_t size);
/* NB_ENOMEM "out of memory building the job result", the conversions' one failure. */
nb_code nb_jobpb_oom(nb_err *err);

#endif
