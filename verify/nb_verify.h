/* nb_verify: what a verify records (one gate record per prompt) and what the coordinator does
 * with it: merge shards, free; the prompt sets' and references' places.  The run: verify/runner/. */
#ifndef NB_VERIFY_H
#define NB_VERIFY_H

#include "nb_gate.h"
#include "nb_job.h"
#include "nb_localize.h"
#include "nb_prompts.h"
#include "nb_trace.h"

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
    nb_decode_check dcheck; /* the decode-path check (every record) */
    int strict_fail;        /* the gate passed but the run is strict and dcheck found a defect */
} nb_verify_record;

typedef struct nb_verify_result {
    nb_verify_record *recs;
    int n;
    int n_pass, n_fail;
    int n_decode_faults;    /* records whose decode-path check found a defect */
    int strict;             /* nb_verify_opts.strict: such a record fails */
    nb_gate_status status;  /* PASS iff every record passes (its gate, and under strict its
                             * decode-path check) */
    double dcheck_ms;       /* the decode-path checks' cost, within wall_ms */
    int k, n_tokens;
    char prompts_path[1024], prompts_sha256[65], trace_path[1024];
    char trace_sha256[65]; /* the trace file's digest ("" when not known) */
    char trace_transformers[32], trace_torch[32], trace_date[40];
    nb_trace_cpu trace_cpu; /* the CPU the reference was made on */
    /* What the reference was computed in and on (provenance dtype and device, "" unknown) */
    char trace_dtype[32], trace_device[96];
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

void nb_verify_result_free(nb_verify_result *r);

/* The warning a reference not made in bf16 gets wherever the result is shown (the gate's
 * near-tie band and the bf16 logit rounding assume a bf16 reference), "" for a bf16 one or
 * one that does not say. Returns buf. */
const char *nb_verify_trace_warning(const nb_verify_result *r, char *buf, size_t cap);

/* A record's outcome in words, the same everywhere it is shown: "PASS", "PASS (decode-path
 * defect)" (the production gate passed, the decode-path check did not), "FAIL (decode-path
 * defect, --strict)" or "FAIL". */
const char *nb_verify_record_word(const nb_verify_record *v);
/* The run's: "PASS", "PASS (N decode-path defect(s))" into buf, or "FAIL". Returns buf. */
const char *nb_verify_result_word(const nb_verify_result *r, char *buf, size_t cap);

/* n_pass, n_fail, n_decode_faults and status from the records (and strict): sets each
 * record's strict_fail. */
void nb_verify_summarise(nb_verify_result *r);

/* Appends src's records to dst (shard merge); recomputes the summary.
 * src is emptied. */
nb_code nb_verify_merge(nb_verify_result *dst, nb_verify_result *src, nb_err *err);

#endif
