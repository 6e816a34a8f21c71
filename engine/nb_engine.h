/* nb_engine: the CPU backend's forward pass for Llama-like families (llama, gemma3): setup() once,
 * then prefill(tokens) and decode_step(token, pos). One path serves run, verify, diagnosis, profile. */
#ifndef NB_ENGINE_H
#define NB_ENGINE_H

#include <stdint.h>

#include "nb_dtype.h"
#include "nb_err.h"
#include "nb_model.h"


typedef struct nb_engine_opts {
    nb_dtype dtype;
    int max_seq;  /* KV cache length; 0 = 2048 (capped at the model's context) */
    int threads;  /* 0 = all cores */
} nb_engine_opts;

void nb_engine_opts_default(nb_engine_opts *o);

/* Operations the profile reports; every kernel call is charged to one. */
typedef enum nb_op {
    NB_OP_EMBED = 0,
    NB_OP_RMSNORM,
    NB_OP_QKV_PROJ,
    NB_OP_ROPE,
    NB_OP_KV_WRITE,
    NB_OP_ATTENTION,
    NB_OP_O_PROJ,
    NB_OP_GATE_UP_PROJ,
    NB_OP_SILU_MUL,     /* the gate activation times up: SiLU, or GELU-tanh for Gemma */
    NB_OP_DOWN_PROJ,
    NB_OP_RESIDUAL,
    NB_OP_FINAL_NORM,
    NB_OP_LM_HEAD,
    NB_OP_COUNT
} nb_op;

const char *nb_op_name(nb_op op);

typedef struct nb_op_stats {
    long calls;
    double total_ms;
} nb_op_stats;

/* Receives layer outputs during prefill (diagnosis): for layer < n_layers-1
 * the block output, for the last layer the hidden state after the final
 * norm (as HF's hidden_states[-1]); rows pos0..pos0+n-1 as fp32. */
typedef void (*nb_layer_hook)(void *user, int layer, int pos0, int n, int dim,
                              const float *hidden);

typedef struct nb_engine nb_engine;

/* Converts the model's weights into the dtype's layout and allocates the KV
 * cache. The model must outlive the engine only during setup; afterwards
 * the engine owns copies of everything it needs. */
nb_code nb_engine_setup(const nb_model *m, const nb_engine_opts *o, nb_engine **out,
                        nb_err *err);
void nb_engine_free(nb_engine *e);

/* Starts a new sequence at position 0. */
void nb_engine_reset(nb_engine *e);

/* Runs the prompt (positions 0..n-1 of a fresh sequence) and points *logits
 * at the engine-owned vocab-sized logits of the last position (valid until
 * the next call). */
nb_code nb_engine_prefill(nb_engine *e, const int32_t *ids, int n, const float **logits,
                          nb_err *err);
/* Feeds token at position pos (== number of tokens already in the cache). */
nb_code nb_engine_decode_step(nb_engine *e, int32_t token, int pos, const float **logits,
                              nb_err *err);

void nb_engine_set_layer_hook(nb_engine *e, nb_layer_hook hook, void *user);

/* Where in a layer a stage hook sees the hidden state (localization: which sub-block drops).
 * ATTN: the residual stream after the attention block (HF: the input of
 * post_attention_layernorm); MLP: after the MLP block, the layer's output; FINAL: the last
 * layer's output after the final norm (HF's hidden_states[-1]). */
typedef enum nb_stage { NB_STAGE_ATTN = 0, NB_STAGE_MLP, NB_STAGE_FINAL } nb_stage;

const char *nb_stage_name(nb_stage s); /* "attention", "mlp", "final_norm" */

/* Receives rows pos0..pos0+n-1 (fp32) of one stage of one layer during prefill and decode.
 * NULL (the default) costs the normal path one pointer test per layer. */
typedef void (*nb_stage_hook)(void *user, int layer, nb_stage stage, int pos0, int n, int dim,
                              const float *hidden);
void nb_engine_set_stage_hook(nb_engine *e, nb_stage_hook hook, void *user);

/* A prefill of ids (a fresh sequence) that also keeps the logits of every position from first
 * on: out gets (n - first) rows of vocab floats, rounded as the decode path rounds them.
 * Positions 0..first run exactly as nb_engine_prefill runs a prompt of first + 1 tokens (the
 * cache a generation's decode steps read), the rest as further prefill chunks whose linears
 * compute each row as the decode step's kernel does (nb_kernels_row_exact): no decode-step
 * code runs and no cache entry a decode step would write is read, yet every number has a
 * counterpart from the same kernel as in a generation — like with like on every kernel path,
 * the AMX one included. By causality row i is what a prefill of ids[0..first+i] alone
 * would give, so one pass checks every decode step against a cache-free recomputation.
 * The caller owns out. */
nb_code nb_engine_prefill_logits(nb_engine *e, const int32_t *ids, int n, int first, float *out,
                                 nb_err *err);

/* Per-op timing; off by default so the production path pays nothing. */
void nb_engine_profile(nb_engine *e, int on);
void nb_engine_profile_reset(nb_engine *e);
const nb_op_stats *nb_engine_profile_stats(const nb_engine *e); /* NB_OP_COUNT entries */

int nb_engine_vocab(const nb_engine *e);
int nb_engine_max_seq(const nb_engine *e);
nb_dtype nb_engine_dtype(const nb_engine *e); /* as asked */
/* The one name of the weights as laid out: q4_1 and native keep the same blocks, so both
 * name the file's format (q4_1 when its layers' linears are all Q4_1, native for a mix);
 * else as asked. */
nb_dtype nb_engine_weights_dtype(const nb_engine *e);
/* nb_engine_weights_dtype of an engine m would set up under dtype d, read from the file's
 * tensor types without laying anything out (a worker lists its deployments before its
 * first job). An engine whose setup corrupts weights (NPUBENCH_FAULT) may say otherwise. */
nb_dtype nb_engine_model_dtype(const nb_model *m, nb_dtype d);
const nb_model_config *nb_engine_cfg(const nb_engine *e);
size_t nb_engine_weight_bytes(const nb_engine *e);

#endif
