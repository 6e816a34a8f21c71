/* nb_base64: mbedTLS's RFC 4648 codec (standard alphabet, '=' padding), strict: whitespace
 * or stray characters are errors, not skipped. */
#include "nb_base64.h"

#include <stdlib.h>

#include <mbedtls/base64.h>

nb_code nb_base64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len, nb_err *err)
{
    *out = NULL;
    *out_len = 0;
    if (len % 4)
        return nb_err_set(err, NB_EFORMAT, "base64: length %zu is not a multiple of 4", len);
    /* mbedTLS skips line breaks and spaces; this format has none */
    for (size_t i = 0; i < len; i++)
        if (in[i] == ' ' || in[i] == '\r' || in[i] == '\n' || in[i] == '\t' || !in[i])
            return nb_err_set(err, NB_EFORMAT, "base64: invalid character at offset %zu", i);
    size_t n = len / 4 * 3;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return nb_err_set(err, NB_ENOMEM, "base64: out of memory (%zu bytes)", n);
    size_t got = 0;
    int rc = mbedtls_base64_decode(buf, n, &got, (const unsigned char *)in, len);
    if (rc) {
        free(buf);
        size_t at = 0; /* the first byte outside the alphabet, for the message */
        while (at < len && in[at] != '=' && nb_base64_alpha(in[at]))
            at++;
        return nb_err_set(err, NB_EFORMAT, "base64: invalid character at offset %zu", at);
    }
    *out = buf;
    *out_len = got;
    return NB_OK;
}

int nb_base64_alpha(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/';
}

nb_code nb_base64_encode(const uint8_t *in, size_t len, char **out, nb_err *err)
{
    size_t n = (len + 2) / 3 * 4;
    char *s = malloc(n + 1);
    if (!s)
        return nb_err_set(err, NB_ENOMEM, "base64: out of memory (%zu bytes)", n);
    size_t olen = 0;
    if (mbedtls_base64_encode((unsigned char *)s, n + 1, &olen, in, len)) {
        free(s);
        return nb_err_set(err, NB_EINTERNAL, "base64: encoding %zu bytes failed", len);
    }
    s[olen] = '\0';
    *out = s;
    return NB_OK;
}
