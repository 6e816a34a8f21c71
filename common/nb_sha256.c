/* nb_sha256: SHA-256 (mbedTLS) for model, prompt-set and trace digests, streaming so
 * multi-GB weight files hash without being held in memory; hex form and a per-file cache. */
#include "nb_sha256.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The digest is mbedTLS's (the library nng's TLS already brings); this module adds the hex
 * form and the per-file cache. */
void nb_sha256_init(nb_sha256 *s)
{
    mbedtls_sha256_init(&s->ctx);
    mbedtls_sha256_starts_ret(&s->ctx, 0);
}

void nb_sha256_update(nb_sha256 *s, const void *data, size_t n)
{
    mbedtls_sha256_update_ret(&s->ctx, data, n);
}

void nb_sha256_final(nb_sha256 *s, uint8_t out[32])
{
    mbedtls_sha256_finish_ret(&s->ctx, out);
    mbedtls_sha256_free(&s->ctx);
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
