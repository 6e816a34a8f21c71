/* nb_dtype: the deployment dtype, one enum from the command line through the selector, the
 * deployments file and the worker's matching to the engine's weight layout. */
#ifndef NB_DTYPE_H
#define NB_DTYPE_H

#include "nb_err.h"

typedef enum nb_dtype {
    NB_DTYPE_BF16 = 0, /* HF-faithful: bf16 weights and activations, fp32 accumulation */
    NB_DTYPE_F32,      /* fp32 everywhere */
    NB_DTYPE_Q4_1,     /* GGUF Q4_1/Q8_0 weights kept quantized, bf16 activations (SmolLM2's name) */
    NB_DTYPE_NATIVE    /* every GGUF block type with a native linear kept as stored (Q4_1, Q8_0,
                        * Q5_0, Q4_K, Q6_K), bf16 activations: the same engine path as q4_1,
                        * under a name that is true of any model (Gemma 3 has no Q4_1) */
} nb_dtype;

/* "bf16", "f32", "q4_1", "native": the one spelling files, the wire and reports carry. */
const char *nb_dtype_name(nb_dtype d);
/* The inverse (also "fp32"); NB_EINVAL "dtype 'x': expected bf16, f32, q4_1 or native". */
nb_code nb_dtype_parse(const char *s, nb_dtype *out, nb_err *err);
/* npubench.Dtype on the wire <-> the enum: nb_dtype_to_pb never gives UNSPECIFIED;
 * nb_dtype_from_pb is 0 with *out set for an engine dtype, -1 for UNSPECIFIED or unknown. */
int nb_dtype_to_pb(nb_dtype d);
int nb_dtype_from_pb(int pb, nb_dtype *out);
/* The npubench.Dtype a selector's dtype word stands for: an engine dtype's canonical name,
 * exactly as nb_dtype_name spells it; 0 (UNSPECIFIED) for anything else (an exec deployment's
 * free label, "fp32", "*", "", NULL), which is then matched by name. The one place a word
 * becomes the enum at the edges (submit, a queue row stored before the enum was). */
int nb_dtype_pb_of_name(const char *name);

#endif
