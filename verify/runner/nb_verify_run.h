/* nb_verify_run: runs the gate for a deployment over a prompt set against the HF trace.
 * Used by `npubench verify` locally and by workers for (sharded) VERIFY jobs. */
#ifndef NB_VERIFY_RUN_H
#define NB_VERIFY_RUN_H

#include "nb_deploy.h"
#include "nb_generate.h"
#include "nb_verify.h"

typedef struct nb_verify_opts {
    const char *prompts_file; /* NULL: the preset's set (verify/prompts/<preset>.txt) */
    const char *reference;    /* trace path; NULL: look it up by digests */
    /* The digest of the file prompts_file was made from when it is a copy without that
     * file's comments and blank lines (a job's prompts travel as their text): the trace is
     * looked up by it and recorded with it. Only a key: a trace is used when its digest or
     * its every prompt's text matches. NULL: prompts_file's own digest. */
    const char *prompts_sha256;
    const char *refdir;       /* NULL: verify/references under the source tree */
    int max_prompts;          /* 0: all (verify uses 2) */
    int first, count;         /* shard: prompts [first, first+count) of the set; count 0 = to the end */
    int n_tokens;             /* 0: the trace's */
    int k;                    /* 0: the trace's */
    /* progress: called after each prompt (done, total) */
    void (*progress)(void *user, int done, int total, const char *msg);
    void *progress_user;
    nb_token_hook on_token; /* tokens of the prompt being generated */
    /* cancellation (with progress_user): checked between prompts and tokens;
     * non-zero stops with NB_ECANCELED */
    int (*cancelled)(void *user);
    nb_localize_when localize;
    /* 1: a PASS whose decode-path check finds a defect counts as a FAIL (--strict, the job
     * param strict=1); 0: it stays the production gate's PASS, flagged. */
    int strict;
} nb_verify_opts;

/* Fills out (free with nb_verify_result_free). A gate FAIL is NB_OK with
 * out->status == NB_GATE_FAIL; errors are set-up problems (no trace, token
 * mismatch with the reference, bad input). */
nb_code nb_verify_run(nb_deploy *d, const nb_verify_opts *o, nb_verify_result *out, nb_err *err);

#endif
