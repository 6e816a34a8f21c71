/* nb_model: a Llama-family checkpoint opened from GGUF or an HF directory
 * (config.json + safetensors, sharded or not), validated, as tensor views. */
#ifndef NB_MODEL_H
#define NB_MODEL_H

#include <stdint.h>

#include "nb_err.h"
#include "nb_gguf.h"
#include "nb_tensor.h"

typedef enum nb_rope_scaling { NB_ROPE_NONE = 0, NB_ROPE_LLAMA3 } nb_rope_scaling;

typedef struct nb_model_config {
    char arch[32];          /* "llama" */
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
} nb_model_config;

typedef struct nb_layer_weights {
    nb_tensor attn_norm, wq, wk, wv, wo;
    nb_tensor ffn_norm, w_gate, w_up, w_down;
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
/* Weight type that dominates the file ("Q4_1", "BF16", ...). */
const char *nb_model_weight_type(const nb_model *m);

#endif
