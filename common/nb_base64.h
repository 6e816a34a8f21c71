/* nb_base64: RFC 4648 base64, for float arrays inside JSON traces.
 * Decoding rejects any non-alphabet character. */
#ifndef NB_BASE64_H
#define NB_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

/* Decodes into a malloc'ed buffer (caller frees). */
nb_code nb_base64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len, nb_err *err);
/* 1 when c is one of the 64 letters of the alphabet. */
int nb_base64_alpha(char c);
/* Encodes into a malloc'ed NUL-terminated string (caller frees). */
nb_code nb_base64_encode(const uint8_t *in, size_t len, char **out, nb_err *err);

#endif
