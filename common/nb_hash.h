/* nb_hash: the one non-cryptographic hash for in-memory tables (FNV-1a, 64-bit, with a final
 * mix so that the low bits, which index power-of-two tables, depend on every input byte). */
#ifndef NB_HASH_H
#define NB_HASH_H

#include <stddef.h>
#include <stdint.h>

#define NB_HASH_SEED 1469598103934665603ull /* FNV-1a offset basis */

/* Continues hash h over n bytes at p (start with NB_HASH_SEED, or any seed to salt it). */
uint64_t nb_hash_bytes(const void *p, size_t n, uint64_t h);
/* The hash of a NUL-terminated string. */
uint64_t nb_hash_str(const char *s);

#endif
