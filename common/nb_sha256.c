/* nb_sha256: FIPS 180-4 SHA-256, used for model, prompt-set and trace digests.
 * Streaming so multi-GB weight files hash without being held in memory. */
#include "nb_sha256.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block(nb_sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
    s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

void nb_sha256_init(nb_sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->nbuf = 0;
}

void nb_sha256_update(nb_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->len += n;
    if (s->nbuf) {
        size_t take = 64 - s->nbuf < n ? 64 - s->nbuf : n;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        n -= take;
        if (s->nbuf == 64) {
            block(s, s->buf);
            s->nbuf = 0;
        }
    }
    while (n >= 64) {
        block(s, p);
        p += 64;
        n -= 64;
    }
    memcpy(s->buf, p, n);
    s->nbuf += n;
}

void nb_sha256_final(nb_sha256 *s, uint8_t out[32])
{
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80;
    nb_sha256_update(s, &pad, 1);
    uint8_t z = 0;
    while (s->nbuf != 56)
        nb_sha256_update(s, &z, 1);
    uint8_t lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (uint8_t)(bits >> (56 - 8 * i));
    nb_sha256_update(s, lb, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void nb_sha256_hex(const uint8_t d[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = '\0';
}

void nb_sha256_mem_hex(const void *data, size_t n, char hex[65])
{
    nb_sha256 s;
    uint8_t d[32];
    nb_sha256_init(&s);
    nb_sha256_update(&s, data, n);
    nb_sha256_final(&s, d);
    nb_sha256_hex(d, hex);
}

/* Digests of files already hashed by this process, keyed by identity and modification time:
 * a worker hashes its model when it registers and again when it sets the deployment up, and
 * a 100 MB model costs seconds (much more under the sanitizers). */
#define DIGEST_MEMO 16
static struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char hex[65];
} memo[DIGEST_MEMO];
static unsigned memo_next;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static int memo_find(const struct stat *st, char hex[65])
{
    int found = 0;
    pthread_mutex_lock(&memo_lock);
    for (int i = 0; i < DIGEST_MEMO && !found; i++)
        if (memo[i].hex[0] && memo[i].dev == st->st_dev && memo[i].ino == st->st_ino &&
            memo[i].size == st->st_size && memo[i].mtime.tv_sec == st->st_mtim.tv_sec &&
            memo[i].mtime.tv_nsec == st->st_mtim.tv_nsec) {
            memcpy(hex, memo[i].hex, 65);
            found = 1;
        }
    pthread_mutex_unlock(&memo_lock);
    return found;
}

static void memo_put(const struct stat *st, const char hex[65])
{
    pthread_mutex_lock(&memo_lock);
    unsigned i = memo_next++ % DIGEST_MEMO;
    memo[i].dev = st->st_dev;
    memo[i].ino = st->st_ino;
    memo[i].size = st->st_size;
    memo[i].mtime = st->st_mtim;
    memcpy(memo[i].hex, hex, 65);
    pthread_mutex_unlock(&memo_lock);
}

nb_code nb_sha256_file(const char *path, char hex[65], nb_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return nb_err_set(err, NB_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int memoable = !fstat(fileno(f), &st) && S_ISREG(st.st_mode);
    if (memoable && memo_find(&st, hex)) {
        fclose(f);
        return NB_OK;
    }
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory hashing", path);
    }
    nb_sha256 s;
    nb_sha256_init(&s);
    size_t n;
    while ((n = fread(buf, 1, CHUNK, f)) > 0)
        nb_sha256_update(&s, buf, n);
    int bad = ferror(f);
    free(buf);
    fclose(f);
    if (bad)
        return nb_err_set(err, NB_EIO, "%s: read error while hashing", path);
    uint8_t d[32];
    nb_sha256_final(&s, d);
    nb_sha256_hex(d, hex);
    /* A file changed while it was read would be remembered under its old identity. */
    struct stat after;
    if (memoable && !stat(path, &after) && after.st_ino == st.st_ino &&
        after.st_size == st.st_size && after.st_mtim.tv_sec == st.st_mtim.tv_sec &&
        after.st_mtim.tv_nsec == st.st_mtim.tv_nsec)
        memo_put(&st, hex);
    return NB_OK;
}
