/* nb_diagnosis: what a diagnosis records: per-layer cosine of our hidden states vs HF over
 * prompt positions.  Informational only: it localises drift, it never fails a run. */
#ifndef NB_DIAGNOSIS_H
#define NB_DIAGNOSIS_H

#include "nb_gate.h"
#include "nb_trace.h"

typedef struct nb_cos_stats {
    double min, p5, median, mean, max_abs;
} nb_cos_stats;

/* Cosine per row of two [n][dim] fp32 matrices, summarised; max_abs is the
 * largest element-wise |a - b|. */
void nb_cos_stats_rows(const float *a, const float *b, int n, int dim, nb_cos_stats *out);

typedef struct nb_diagnosis_layer {
    int layer;
    int post_norm; /* the last layer is compared after the final norm */
    nb_cos_stats s;
} nb_diagnosis_layer;

typedef struct nb_diagnosis_result {
    char prompt[4096];
    int n_pos;
    int n_layers;
    nb_diagnosis_layer *layers;
    nb_gate_step dev_final, ref_final; /* top-k at the last position */
    int k;
    char trace_path[1024];
    char trace_sha256[65]; /* the trace file's digest ("" when not known) */
} nb_diagnosis_result;

void nb_diagnosis_result_free(nb_diagnosis_result *r);

#define NB_DIAGNOSIS_DEFAULT_PROMPT "The capital of France is"

#endif
