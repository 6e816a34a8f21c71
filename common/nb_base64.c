/* nb_base64: standard alphabet with '=' padding.
 * Strict: whitespace or stray characters are errors, not skipped. */
#include "nb_base64.h"

#include <stdlib.h>

static const char ALPHA[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

nb_code nb_base64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len, nb_err *err)
{
    *out = NULL;
    *out_len = 0;
    if (len % 4)
        return nb_err_set(err, NB_EFORMAT, "base64: length %zu is not a multiple of 4", len);
    size_t pad = 0;
    if (len && in[len - 1] == '=')
        pad++;
    if (len > 1 && in[len - 2] == '=')
        pad++;
    size_t n = len / 4 * 3 - pad;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return nb_err_set(err, NB_ENOMEM, "base64: out of memory (%zu bytes)", n);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)in[i + j];
            if (c == '=' && i + 4 == len && j >= 4 - (int)pad) {
                v[j] = 0;
                continue;
            }
            v[j] = val(c);
            if (v[j] < 0) {
                free(buf);
                return nb_err_set(err, NB_EFORMAT, "base64: invalid character at offset %zu",
                                  i + j);
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if (o < n) buf[o++] = (uint8_t)(w >> 16);
        if (o < n) buf[o++] = (uint8_t)(w >> 8);
        if (o < n) buf[o++] = (uint8_t)w;
    }
    *out = buf;
    *out_len = n;
    return NB_OK;
}

nb_code nb_base64_encode(const uint8_t *in, size_t len, char **out, nb_err *err)
{
    size_t n = (len + 2) / 3 * 4;
    char *s = malloc(n + 1);
    if (!s)
        return nb_err_set(err, NB_ENOMEM, "base64: out of memory (%zu bytes)", n);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)in[i] << 16;
        if (i + 1 < len) w |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len) w |= in[i + 2];
        s[o++] = ALPHA[(w >> 18) & 63];
        s[o++] = ALPHA[(w >> 12) & 63];
        s[o++] = i + 1 < len ? ALPHA[(w >> 6) & 63] : '=';
        s[o++] = i + 2 < len ? ALPHA[w & 63] : '=';
    }
    s[o] = '\0';
    *out = s;
    return NB_OK;
}
