/* nb_hmac: HMAC-SHA256 per RFC 2104 / FIPS 198-1, built on nb_sha256.
 * Inner and outer pads are absorbed at init, so the key is never stored. */
#include "nb_hmac.h"

#include <string.h>

void nb_hmac_sha256_init(nb_hmac_ctx *h, const void *key, size_t key_len)
{
    uint8_t k[64] = {0}, pad[64];
    if (key_len > sizeof k) {
        nb_sha256 s;
        nb_sha256_init(&s);
        nb_sha256_update(&s, key, key_len);
        nb_sha256_final(&s, k); /* 32 bytes, rest stays zero */
    } else if (key_len) {
        memcpy(k, key, key_len);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    nb_sha256_init(&h->inner);
    nb_sha256_update(&h->inner, pad, sizeof pad);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    nb_sha256_init(&h->outer);
    nb_sha256_update(&h->outer, pad, sizeof pad);
    /* The key is a secret: don't leave copies on the stack. */
    volatile uint8_t *vk = k, *vp = pad;
    for (int i = 0; i < 64; i++)
        vk[i] = vp[i] = 0;
}

void nb_hmac_sha256_update(nb_hmac_ctx *h, const void *data, size_t n)
{
    nb_sha256_update(&h->inner, data, n);
}

void nb_hmac_sha256_final(nb_hmac_ctx *h, uint8_t out[NB_HMAC_SHA256_LEN])
{
    uint8_t ih[32];
    nb_sha256_final(&h->inner, ih);
    nb_sha256_update(&h->outer, ih, sizeof ih);
    nb_sha256_final(&h->outer, out);
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
