/* nb_verify: runs the gate for a deployment over a prompt set against the HF trace.
 * Used by `npubench verify` locally and by workers for (sharded) VERIFY jobs. */
#ifndef NB_VERIFY_H
#define NB_VERIFY_H

#include "nb_deploy.h"
#include "nb_gate.h"
#include "nb_localize.h"
#include "nb_prompts.h"
#include "nb_trace.h"

/* When a record gets a localization (nb_localize): on every FAIL with a divergence (the
 * default), also on a PASS with a divergence (--localize), or never. */
typedef enum nb_localize_when {
    NB_LOCALIZE_FAIL = 0,
    NB_LOCALIZE_DIVERGENCE,
    NB_LOCALIZE_OFF
} nb_localize_when;

/* "fail", "divergence" or "off" (the `localize` job param and --localize); NB_EINVAL naming
 * field otherwise. */
nb_code nb_verify_localize_parse(const char *s, const char *field, nb_localize_when *out,
                                 nb_err *err);

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
    /* cancellation (with progress_user): checked between prompts and tokens;
     * non-zero stops with NB_ECANCELED */
    int (*cancelled)(void *user);
    nb_localize_when localize;
} nb_verify_opts;

typedef struct nb_verify_record {
    int index;              /* index in the prompt set */
    char *prompt;
    int n_prompt_ids;
    nb_gate_result gate;
    nb_gate_step *dev, *ref;/* n_steps each */
    int n_steps;
    char *dev_token_text, *ref_token_text; /* at the divergence ("" when none) */
    char *agreed_text;      /* decoded agreed prefix */
    char *dev_text, *ref_text; /* whole generations */
    double prefill_ms, decode_ms;
    nb_localization loc;    /* loc.present 0 when none was made */
} nb_verify_record;

typedef struct nb_verify_result {
    nb_verify_record *recs;
    int n;
    int n_pass, n_fail;
    nb_gate_status status;  /* PASS iff every record passes */
    int k, n_tokens;
    char prompts_path[1024], prompts_sha256[65], trace_path[1024];
    char trace_transformers[32], trace_torch[32], trace_date[40];
    nb_trace_cpu trace_cpu; /* the CPU the reference was made on */
    double wall_ms;
} nb_verify_result;

/* Resolves the prompt set path for a preset ("instruct", "base", "gemma3") into buf. */
void nb_verify_default_prompts(const char *preset, char *buf, size_t cap);
/* The prompt set name of a model selector: its preset's, else "instruct". */
const char *nb_verify_preset_set(const char *model);
const char *nb_verify_default_refdir(void);
/* The prompt set called name ("instruct", "base", or any plain file name, see
 * nb_file_plain_name) inside root (NULL/"": the presets' directory) as root/name.txt.
 * NB_EINVAL naming JobSpec.prompt_set for a name that could reach outside root. */
nb_code nb_verify_prompt_set_path(const char *root, const char *name, char *buf, size_t cap,
                                  nb_err *err);

/* Fills out (free with nb_verify_result_free). A gate FAIL is NB_OK with
 * out->status == NB_GATE_FAIL; errors are set-up problems (no trace, token
 * mismatch with the reference, bad input). */
nb_code nb_verify_run(nb_deploy *d, const nb_verify_opts *o, nb_verify_result *out, nb_err *err);
void nb_verify_result_free(nb_verify_result *r);

/* Appends src's records to dst (shard merge); recomputes the summary.
 * src is emptied. */
nb_code nb_verify_merge(nb_verify_result *dst, nb_verify_result *src, nb_err *err);

#endif
