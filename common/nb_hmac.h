/* nb_hmac: HMAC-SHA256 (RFC 2104, mbedTLS), and a constant-time compare.
 * Used to authenticate RPC envelopes with a shared secret. */
#ifndef NB_HMAC_H
#define NB_HMAC_H

#include <stddef.h>
#include <stdint.h>

#include <mbedtls/md.h>

#include "nb_sha256.h"

#define NB_HMAC_SHA256_LEN 32

/* Streaming state (mbedTLS md context: init allocates, final frees; every init must reach
 * final). */
typedef struct nb_hmac_ctx {
    mbedtls_md_context_t md;
    int ok; /* set up and fed without error */
} nb_hmac_ctx;

/* Keys of any length (longer than 64 bytes are hashed first, per RFC 2104). */
void nb_hmac_sha256_init(nb_hmac_ctx *h, const void *key, size_t key_len);
void nb_hmac_sha256_update(nb_hmac_ctx *h, const void *data, size_t n);
void nb_hmac_sha256_final(nb_hmac_ctx *h, uint8_t out[NB_HMAC_SHA256_LEN]);

/* One-shot HMAC of a single buffer. */
void nb_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n,
                    uint8_t out[NB_HMAC_SHA256_LEN]);

/* 1 if the n bytes at a and b are equal, else 0; the time taken does not
 * depend on where they differ, so a MAC check leaks nothing to a timer. */
int nb_hmac_equal(const void *a, const void *b, size_t n);

#endif
