/* nb_sha256: SHA-256 of memory and files, for model and prompt digests.
 * Digests travel as 64 lowercase hex characters. */
#ifndef NB_SHA256_H
#define NB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include <mbedtls/sha256.h>

#include "nb_err.h"

/* mbedTLS's context: plain memory, no heap (copyable while streaming). */
typedef struct nb_sha256 {
    mbedtls_sha256_context ctx;
} nb_sha256;

void nb_sha256_init(nb_sha256 *s);
void nb_sha256_update(nb_sha256 *s, const void *data, size_t n);
void nb_sha256_final(nb_sha256 *s, uint8_t out[32]);
void nb_sha256_hex(const uint8_t d[32], char hex[65]);
/* The file's digest; remembered per process by (device, inode, size, mtime), so hashing the
 * same unchanged file again is free. */
nb_code nb_sha256_file(const char *path, char hex[65], nb_err *err);
void nb_sha256_mem_hex(const void *data, size_t n, char hex[65]);

#endif
