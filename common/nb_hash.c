/* nb_hash: FNV-1a over bytes, finished with a shift-xor so that table indexes taken from the
 * low bits are well spread; not for anything an attacker must not predict. */
#include "nb_hash.h"

#include <string.h>

uint64_t nb_hash_bytes(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

uint64_t nb_hash_str(const char *s)
{
    return nb_hash_bytes(s, strlen(s), NB_HASH_SEED);
}
