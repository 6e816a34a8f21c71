/* nb_quant: every weight format a model file can hold, each defined once (as ggml-common.h
 * does): block layout and size, and the scalar dequantization gguf-py, loaders and kernels share. */
#ifndef NB_QUANT_H
#define NB_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nb_bf16.h"
#include "nb_err.h"

/* The formats; engine/nb_tensor.h's nb_ttype takes its values from here. */
typedef enum nb_quant_fmt {
    NB_QUANT_F32 = 0,
    NB_QUANT_F16,
    NB_QUANT_BF16,
    NB_QUANT_Q8_0,
    NB_QUANT_Q4_0,
    NB_QUANT_Q4_1,
    NB_QUANT_Q5_0,
    NB_QUANT_Q4_K,
    NB_QUANT_Q6_K,
    NB_QUANT_COUNT
} nb_quant_fmt;

/* ---- block layouts ----------------------------------------------------------------------
 * Byte offsets, not structs: blocks sit at any address inside a mapped file (safetensors
 * offsets are arbitrary), so every multi-byte field is read through memcpy. All scales are
 * IEEE half. Formulas and operand order are gguf-py's quants.py, in float32 without FMA. */

#define NB_QUANT_QK 32   /* elements per block of the 32-element formats (Q8_0, Q4_0, Q4_1, Q5_0) */
#define NB_QUANT_QK_K 256 /* elements per super-block of the k-quants (Q4_K, Q6_K) */

/* Q8_0: d, then 32 signed bytes q;                      x = q * d */
#define NB_QUANT_Q8_0_D 0
#define NB_QUANT_Q8_0_QS 2
#define NB_QUANT_Q8_0_BYTES (NB_QUANT_Q8_0_QS + NB_QUANT_QK)
/* Q4_0: d, then 16 bytes of nibbles (nb_quant_nibbles); x = d * (q - 8) */
#define NB_QUANT_Q4_0_D 0
#define NB_QUANT_Q4_0_QS 2
#define NB_QUANT_Q4_0_BYTES (NB_QUANT_Q4_0_QS + NB_QUANT_QK / 2)
/* Q4_1: d, m, then 16 bytes of nibbles;                 x = d * q + m */
#define NB_QUANT_Q4_1_D 0
#define NB_QUANT_Q4_1_M 2
#define NB_QUANT_Q4_1_QS 4
#define NB_QUANT_Q4_1_BYTES (NB_QUANT_Q4_1_QS + NB_QUANT_QK / 2)

/* Q5_0: d, a little-endian uint32 of high bits (bit j for q[j]), 16 bytes of low nibbles
 * (nb_quant_nibbles);                                   x = d * (q - 16) */
#define NB_QUANT_Q5_0_D 0
#define NB_QUANT_Q5_0_QH 2
#define NB_QUANT_Q5_0_QS 6
#define NB_QUANT_Q5_0_BYTES (NB_QUANT_Q5_0_QS + NB_QUANT_QK / 2)
/* Q4_K: d, dmin, 12 bytes packing eight 6-bit (scale, min) pairs, 128 bytes of nibbles: bytes
 * 32g..32g+31 hold sub-block 2g in their low nibbles and 2g+1 in their high ones;
 *                                     x = (d * sc[s]) * q - dmin * m[s], s the 32-element sub-block */
#define NB_QUANT_Q4_K_D 0
#define NB_QUANT_Q4_K_DMIN 2
#define NB_QUANT_Q4_K_SCALES 4
#define NB_QUANT_Q4_K_QS 16
#define NB_QUANT_Q4_K_BYTES (NB_QUANT_Q4_K_QS + NB_QUANT_QK_K / 2)
/* Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 signed scales (one per 16
 * elements), then d;                  x = (d * sc[e / 16]) * (q - 32) */
#define NB_QUANT_Q6_K_QL 0
#define NB_QUANT_Q6_K_QH 128
#define NB_QUANT_Q6_K_SCALES 192
#define NB_QUANT_Q6_K_D 208
#define NB_QUANT_Q6_K_BYTES (NB_QUANT_Q6_K_D + 2)

/* The half at p, at any alignment. */
static inline float nb_quant_f16_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return nb_f16_to_f32(h);
}

/* The 4-bit layout of Q4_0 and Q4_1: byte j holds q[j] in its low nibble and q[j + 16] in its
 * high one (not q[2j], q[2j+1]). */
static inline void nb_quant_nibbles(const uint8_t *qs, int q[NB_QUANT_QK])
{
    for (int j = 0; j < NB_QUANT_QK / 2; j++) {
        q[j] = qs[j] & 0x0f;
        q[j + NB_QUANT_QK / 2] = qs[j] >> 4;
    }
}

/* ---- the format table ------------------------------------------------------------------- */

/* "Q4_1"; "?" when out of range. */
const char *nb_quant_name(nb_quant_fmt f);
/* Case-insensitive name ("q4_1", "BF16") to format; -1 when unknown. */
int nb_quant_from_name(const char *name);
/* Elements per block (1 for F32/F16/BF16) and bytes per block; 0 when out of range. */
int nb_quant_block_elems(nb_quant_fmt f);
int nb_quant_block_bytes(nb_quant_fmt f);
/* Bytes of a row of n elements: NB_EUNSUPPORTED for an unknown format, NB_EINVAL for n <= 0,
 * NB_EFORMAT when n is no block multiple, NB_ENOMEM when the size overflows. */
nb_code nb_quant_row_bytes(nb_quant_fmt f, int64_t n, size_t *out, nb_err *err);

/* ---- dequantization --------------------------------------------------------------------- */

/* One block of a quantized format (nb_quant_block_elems values) to fp32; nothing for other
 * formats. */
void nb_quant_block_f32(nb_quant_fmt f, const uint8_t *blk, float *dst);
/* A row of n elements (a block multiple) to fp32, src at any alignment. */
void nb_quant_row_f32(nb_quant_fmt f, const void *src, int64_t n, float *dst);

#endif
