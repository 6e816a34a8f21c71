/* nb_utf8: strict UTF-8 validation (no overlongs, no surrogates, <= U+10FFFF).
 * Prompts, tokens and report text all pass through it. */
#ifndef NB_UTF8_H
#define NB_UTF8_H

#include <stddef.h>

/* Returns 1 when s[0..n) is valid UTF-8; otherwise 0 and *bad_offset (if
 * non-NULL) is the offset of the first invalid byte. */
int nb_utf8_valid(const char *s, size_t n, size_t *bad_offset);
/* Length of the longest valid UTF-8 prefix of s[0..n) that does not end
 * inside a sequence (for printing token text safely). */
size_t nb_utf8_valid_prefix(const char *s, size_t n);

/* Copies s[0..n) into a malloc'ed NUL-terminated string with every invalid
 * byte replaced by U+FFFD, so partial tokens print and serialise safely.
 * Returns NULL on allocation failure; caller frees. */
char *nb_utf8_sanitize(const char *s, size_t n);

#endif
