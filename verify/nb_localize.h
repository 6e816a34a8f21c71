/* nb_localize: where a diverging verify went wrong: a near tie, the KV cache / decode path, or
 * the first layer and sub-block whose hidden state leaves the reference's (docs/localization.md). */
#ifndef NB_LOCALIZE_H
#define NB_LOCALIZE_H

#include <json-c/json.h>
#include <stdint.h>

#include "nb_gate.h"
#include "nb_trace.h"

/* Decode logits may differ from a cache-free prefill's only by accumulation order (GEMV vs
 * GEMM blocking) before the bf16 rounding of the logits: at most a couple of bf16 ulps of a
 * logit near 32 (0.125 each). Measured on the clean engine: 0.0 on every step of both prompt
 * sets (docs/localization.md); the kv_offset fault gives NaN or differences of whole logits. */
#define NB_LOC_KV_TOL 0.25

/* A hidden state whose cosine to the reference's falls below this is where the deployment
 * left the reference. The clean bf16 engine stays above 0.999 at every layer and stage
 * (docs/localization.md); the mlp_layer fault drops its layer to about 0.6. */
#define NB_LOC_COS_THRESHOLD 0.99

typedef enum nb_loc_kv {
    NB_LOC_KV_UNCHECKED = 0, /* no decode step before the divergence (or no engine) */
    NB_LOC_KV_CLEAN,
    NB_LOC_KV_FAULT
} nb_loc_kv;

typedef enum nb_loc_layers {
    NB_LOC_LAYERS_NONE = 0, /* no reference hidden states to compare with (note says why) */
    NB_LOC_LAYERS_CLEAN,
    NB_LOC_LAYERS_FAULT
} nb_loc_layers;

typedef struct nb_loc_layer {
    int layer;
    double cos_attn, max_abs_attn; /* after the attention block's residual add */
    double cos_mlp, max_abs_mlp;   /* after the MLP block's residual add (the layer's output) */
} nb_loc_layer;

typedef struct nb_localization {
    int present;        /* 0: none computed (no divergence, not asked, or not reported) */
    char source[32];    /* "engine" (a cache-free re-run here), "mlir-air report" */
    /* 1: the margin (from the gate result) */
    int near_tie;       /* reference margin within NB_GATE_NEAR_TIE, device token in its top-k */
    double ref_margin;  /* NAN when unknown */
    double band;        /* NB_GATE_NEAR_TIE */
    /* 2: prefill vs decode, steps 1..divergence */
    nb_loc_kv kv;
    int kv_steps;       /* decode steps compared */
    int kv_first_bad;   /* first step beyond kv_tol, -1 */
    double kv_max_diff; /* largest |prefill - decode| over each step's device top-k logits */
    double kv_tol;
    /* 3: layers at the position of reference step `step` */
    nb_loc_layers layers_status;
    int step;           /* -1 when no layers were compared */
    int n_layers;
    nb_loc_layer *layers; /* n_layers, owned */
    double final_cos, final_max_abs; /* after the final norm */
    int first_layer;    /* -1 */
    char sub_block[16]; /* "attention", "mlp", "final_norm" or "" */
    double threshold;
    /* the verdict over all three */
    char verdict[16];   /* "kv_cache", "layer", "near_tie", "unlocalized" */
    char summary[400];  /* one line for people (verify, job, JUnit) */
    char note[256];     /* what could not be checked and why; "" when everything was */
    double ms;          /* time the localization took */
} nb_localization;

/* A localization with nothing in it (present 0, every number unknown). */
void nb_localize_init(nb_localization *out);

/* From l->layers (and final_cos, NaN = not reported) sets first_layer, sub_block and
 * layers_status: the first state below NB_LOC_COS_THRESHOLD, attention before MLP in a layer
 * when have_attn, else each layer's output only (sub_block ""). */
void nb_localize_pick_layer(nb_localization *l, int have_attn);

/* Sets the margin part from g, then verdict and summary from the three parts (also for
 * localizations mapped from another tool's report). */
void nb_localize_finish(nb_localization *l, const nb_gate_result *g);

/* Deep copy (layers duplicated); NB_ENOMEM. */
nb_code nb_localize_copy(nb_localization *dst, const nb_localization *src, nb_err *err);
void nb_localize_free(nb_localization *l);

/* The localization as a JSON object (report files, --json, the history), NULL when absent. */
json_object *nb_localize_json(const nb_localization *l);
/* Reads what nb_localize_json wrote (unknown or missing fields keep their defaults). */
nb_code nb_localize_from_json(json_object *o, nb_localization *out, nb_err *err);

#endif
