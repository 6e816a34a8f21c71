/* nb_hmac: HMAC-SHA256 through mbedTLS's md layer (the library nng's TLS already brings);
 * the constant-time compare is ours. */
#include "nb_hmac.h"

#include <string.h>

void nb_hmac_sha256_init(nb_hmac_ctx *h, const void *key, size_t key_len)
{
    mbedtls_md_init(&h->md);
    h->ok = mbedtls_md_setup(&h->md, mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), 1) == 0 &&
            mbedtls_md_hmac_starts(&h->md, key, key_len) == 0;
}

void nb_hmac_sha256_update(nb_hmac_ctx *h, const void *data, size_t n)
{
    if (h->ok && n)
        h->ok = mbedtls_md_hmac_update(&h->md, data, n) == 0;
}

void nb_hmac_sha256_final(nb_hmac_ctx *h, uint8_t out[NB_HMAC_SHA256_LEN])
{
    /* a failed setup (out of memory) gives zeroes: never a valid MAC, as a verifier's own
     * MAC over the same bytes is a real one */
    if (!h->ok || mbedtls_md_hmac_finish(&h->md, out) != 0)
        memset(out, 0, NB_HMAC_SHA256_LEN);
    mbedtls_md_free(&h->md); /* also wipes the padded key */
}

void nb_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n,
                    uint8_t out[NB_HMAC_SHA256_LEN])
{
    nb_hmac_ctx h;
    nb_hmac_sha256_init(&h, key, key_len);
    nb_hmac_sha256_update(&h, data, n);
    nb_hmac_sha256_final(&h, out);
}

int nb_hmac_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}
