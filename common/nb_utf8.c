/* nb_utf8: byte-level decoder per RFC 3629 Table 3-7.
 * Kept separate so every module rejects the same inputs. */
#include "nb_utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence at s (1..4) or 0 when invalid. */
static size_t seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else
        return 0;
    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

int nb_utf8_valid(const char *s, size_t n, size_t *bad_offset)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = seq_len(p + i, n - i);
        if (!l) {
            if (bad_offset)
                *bad_offset = i;
            return 0;
        }
        i += l;
    }
    return 1;
}

size_t nb_utf8_valid_prefix(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = seq_len(p + i, n - i);
        if (!l)
            break;
        i += l;
    }
    return i;
}

char *nb_utf8_sanitize(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    char *out = malloc(n * 3 + 1); /* worst case: every byte becomes 3 */
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        size_t l = seq_len(p + i, n - i);
        if (l && !(l == 1 && p[i] == 0)) {
            memcpy(out + o, p + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

size_t nb_utf8_decode(const char *str, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xe0) {
        *cp = ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
        return 2;
    }
    if (s[0] < 0xf0) {
        *cp = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
        return 3;
    }
    *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3f) << 12) |
          ((uint32_t)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
    return 4;
}

int nb_utf8_is_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}
