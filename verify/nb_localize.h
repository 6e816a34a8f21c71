/* nb_localize: where a diverging verify went wrong: a near tie, the KV cache / decode path, or
 * the first layer and sub-block whose hidden state leaves the reference's (docs/localization.md). */
#ifndef NB_LOCALIZE_H
#define NB_LOCALIZE_H

#include <json-c/json.h>
#include <stdint.h>

#include "nb_gate.h"
#include "nb_trace.h"

/* The cache-free prefill computes every linear per row as the decode step's kernel does
 * (nb_engine_prefill_logits, nb_kernels_row_exact), so on a clean engine both sides are the
 * same sums in the same order: measured 0.0 on every step, every prompt set and every kernel
 * path (AMX emulated; docs/localization.md). The tolerance is one bf16 step of a logit in
 * [32, 64) for what the attention's key blocking may still reorder; the decode faults give NaN
 * or differences of whole logits (2-19). */
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
    int near_tie;       /* nb_gate_is_near_tie: margin within the band, device token in top-k */
    double ref_margin;  /* NAN when unknown */
    double band;        /* the gate's near_tie_band (NAN unknown) */
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

/* The decode-path check every verify makes, PASS or FAIL (docs/localization.md): decode steps
 * 1..steps of the generation against one cache-free prefill of the prompt and those steps'
 * input tokens, over each step's device top-k logits. */
#define NB_DECODE_CHECK_STEPS 4 /* steps compared per prompt (fewer when the run is shorter) */

typedef struct nb_decode_check {
    nb_loc_kv status;   /* UNCHECKED when none was made (a run of one step, an old result) */
    int steps;          /* decode steps compared */
    int first_bad;      /* first step beyond tol, -1 */
    double max_diff;    /* largest |prefill - decode| logit; NaN: a NaN logit */
    double tol;         /* NB_LOC_KV_TOL */
    double ms;          /* what the check cost */
    char note[160];     /* why it is unchecked, "" otherwise */
} nb_decode_check;

/* One line for people: "decode path clean (steps 1..4, max 0 logits)" or "decode-path defect:
 * decode step 1 differs from a cache-free prefill of the same tokens by 13.9 logits
 * (tolerance 0.25)". */
void nb_decode_check_summary(const nb_decode_check *c, char *buf, size_t cap);
/* "unchecked", "clean", "fault". */
const char *nb_decode_check_status_name(nb_loc_kv s);
/* As a JSON object ({"status", "steps", "first_bad_step", "max_diff", "tolerance", "ms",
 * "summary", "note"}); NULL when unchecked without a note (nothing to say). */
json_object *nb_decode_check_json(const nb_decode_check *c);
/* Reads what nb_decode_check_json wrote; an absent or malformed object gives UNCHECKED. */
void nb_decode_check_from_json(json_object *o, nb_decode_check *out);
void nb_decode_check_init(nb_decode_check *c);

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
