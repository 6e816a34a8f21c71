/* nb_utf8: strict UTF-8 validation (no overlongs, no surrogates, <= U+10FFFF).
 * Prompts, tokens and report text all pass through it. */
#ifndef NB_UTF8_H
#define NB_UTF8_H

#include <stddef.h>
#include <stdint.h>

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

/* Decodes the character at s, which must start a valid sequence (checked beforehand with
 * nb_utf8_valid); returns its length 1..4. */
size_t nb_utf8_decode(const char *s, uint32_t *cp);
/* Unicode White_Space: what Rust's char::is_whitespace and regex \s match. */
int nb_utf8_is_space(uint32_t c);

#endif
