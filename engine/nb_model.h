/* nb_model: a Llama-like checkpoint (llama, gemma3) opened from GGUF or an HF directory
 * (config.json + safetensors, sharded or not), validated, as tensor views plus what its family does. */
#ifndef NB_MODEL_H
#define NB_MODEL_H

#include <stdint.h>

#include "nb_err.h"
#include "nb_gguf.h"
#include "nb_tensor.h"

typedef enum nb_rope_scaling { NB_ROPE_NONE = 0, NB_ROPE_LLAMA3 } nb_rope_scaling;

/* The gate activation of the gated FFN: act(gate(x)) * up(x). */
typedef enum nb_ffn_act { NB_ACT_SILU = 0, NB_ACT_GELU_TANH } nb_ffn_act;

typedef struct nb_model_config {
    char arch[32];          /* general.architecture: "llama", "gemma3" */
    char name[128];         /* general.name or the directory name */
    int n_layers;
    int dim;                /* hidden size */
    int ffn_dim;            /* intermediate size */
    int n_heads;
    int n_kv_heads;
    int head_dim;
    int vocab;
    int max_ctx;            /* context length the model was trained for */
    float rms_eps;
    float rope_theta;
    nb_rope_scaling rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_max_pos;
    int tied_embeddings;    /* lm_head is the token embedding */
    /* What the family does beyond Llama (all 0 for Llama; docs/numerics.md has the formulas). */
    int norm_unit_offset;   /* RMSNorm scales by (1 + w), in fp32, rounded once (Gemma) */
    int post_norms;         /* RMSNorm on the attention and FFN outputs before each residual add */
    int qk_norm;            /* per-head RMSNorm of q and k before RoPE */
    nb_ffn_act act;
    int embed_scaled;       /* embeddings times sqrt(dim), in the activation dtype */
    float attn_scale;       /* softmax scale of q.k */
    int sliding_window;     /* keys a sliding layer sees (its own included); 0: none */
    int swa_every;          /* with a window: layer l is global when (l + 1) % swa_every == 0 */
    float rope_theta_swa;   /* RoPE base of the sliding layers */
    float final_softcap;    /* logits = cap * tanh(logits / cap); 0: none */
} nb_model_config;

/* Whether layer l attends through the sliding window (else to every earlier position). */
int nb_model_layer_is_swa(const nb_model_config *c, int l);

/* Norm weights are as HF holds them: the GGUF converter's folded "1 + w" of Gemma is undone by
 * nb_model_norm_row(). Tensors a family lacks have data == NULL. */
typedef struct nb_layer_weights {
    nb_tensor attn_norm, wq, wk, wv, wo;
    nb_tensor ffn_norm, w_gate, w_up, w_down;
    nb_tensor q_norm, k_norm;             /* qk_norm: head_dim each */
    nb_tensor post_attn_norm, post_ffn_norm; /* post_norms */
} nb_layer_weights;

typedef enum nb_model_format { NB_FMT_GGUF = 0, NB_FMT_SAFETENSORS } nb_model_format;

typedef struct nb_model nb_model; /* opaque: owns mappings */

/* path: a .gguf file, or a directory holding config.json and
 * model.safetensors or model.safetensors.index.json. */
nb_code nb_model_open(const char *path, nb_model **out, nb_err *err);
void nb_model_close(nb_model *m);

const nb_model_config *nb_model_cfg(const nb_model *m);
nb_model_format nb_model_format_of(const nb_model *m);
const char *nb_model_path(const nb_model *m);
const nb_tensor *nb_model_tok_embd(const nb_model *m);
const nb_tensor *nb_model_out_norm(const nb_model *m);
const nb_tensor *nb_model_lm_head(const nb_model *m); /* the embedding when tied */
const nb_layer_weights *nb_model_layer(const nb_model *m, int l);
/* The GGUF reader for GGUF models (tokenizer metadata), else NULL. */
const nb_gguf *nb_model_gguf(const nb_model *m);
/* The HF directory for safetensors models (tokenizer.json), else NULL. */
const char *nb_model_dir(const nb_model *m);
/* A norm weight vector as HF's parameter holds it before its dtype cast (fp32, t->cols values):
 * the stored values, less the 1 llama.cpp's converter adds to Gemma's norms. */
void nb_model_norm_row(const nb_model *m, const nb_tensor *t, float *dst);
/* Weight type that dominates the file ("Q4_1", "BF16", ...). */
const char *nb_model_weight_type(const nb_model *m);

#endif
