/* nb_trace: HF reference traces (verify/hf_reference.py output) loaded and validated.
 * Traces are found by model digest + prompts digest under verify/references/. */
#ifndef NB_TRACE_H
#define NB_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_gate.h"

/* The reference's hidden states at the position that produces one step's logits (position
 * n_ids - 1 + step, from the prompt and the first `step` chosen tokens). */
typedef struct nb_trace_states {
    int step;
    float *attn;  /* [n_layers][dim]: residual stream after each layer's attention block */
    float *mlp;   /* [n_layers][dim]: each layer's output (after its MLP block) */
    float *final; /* [dim]: the last layer's output after the final norm */
} nb_trace_states;

typedef struct nb_trace_prompt {
    char *text;
    int32_t *ids;
    int n_ids;
    nb_gate_step *steps;
    int n_steps;
    /* Optional ("hidden" in the JSON; traces before it have none): ascending by step. */
    nb_trace_states *states;
    int n_states;
    int n_layers, dim; /* of states */
} nb_trace_prompt;

typedef struct nb_trace_hidden {
    char *prompt;
    int32_t *ids;
    int n_ids;
    int n_layers, dim, n_pos;
    float *data;      /* [n_layers][n_pos][dim] */
    int last_post_norm;
    nb_gate_step final; /* top-k at the last prompt position */
} nb_trace_hidden;

/* The CPU a trace was made on (provenance.cpu): bf16 reference logits depend on it
 * (docs/numerics.md). All "" for traces written before it was recorded. */
typedef struct nb_trace_cpu {
    char model[128];     /* "AMD Ryzen 9 7950X 16-Core Processor" */
    char flags[256];     /* the numerics-relevant ISA flags, space-separated: "avx2 fma ..." */
    char capability[32]; /* torch.backends.cpu.get_cpu_capability(): "AVX2", "AVX512" ... */
} nb_trace_cpu;

typedef struct nb_trace {
    char path[1024];
    char sha256[65]; /* the file's own digest: which trace a report used, wherever it lay */
    char model_sha256[65];
    char prompts_sha256[65]; /* prompt file digest, or the prompt's for diagnosis */
    char transformers[32], torch[32], dtype[32], attn[32], date[40];
    /* provenance.device ("cuda", "cpu"), with provenance.gpu when given: "cuda (NVIDIA H200)";
     * "cpu" for a trace that names only its CPU; "" when it says neither */
    char device[96];
    nb_trace_cpu cpu;
    int n_tokens, k, chat;
    nb_trace_prompt *prompts;
    int n_prompts;
    nb_trace_hidden *hidden; /* NULL unless a diagnosis trace */
} nb_trace;

/* Loads and validates a trace (caller frees with nb_trace_free). Errors name
 * the file and the JSON field. */
nb_code nb_trace_load(const char *path, nb_trace **out, nb_err *err);
void nb_trace_free(nb_trace *t);

/* The conventional path of a trace: <dir>/<model16>-<prompts16>.json, or
 * <dir>/<model16>-diag-<prompt16>.json when diag. */
void nb_trace_path(const char *dir, const char *model_sha, const char *digest, int diag,
                   char *out, size_t cap);

/* Finds and loads the trace for these digests, or NB_ENOTFOUND with a
 * message saying how to regenerate it (make hf-reference). */
nb_code nb_trace_find(const char *dir, const char *model_sha, const char *digest, int diag,
                      nb_trace **out, nb_err *err);

#endif
