/* nb_secret: key files are checked like ssh checks private keys (owner-only modes), and
 * opened without blocking so a FIFO in their place cannot stall a start. */
#include "nb_secret.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static nb_code read_key_file(const char *path, char **out, size_t *out_len, nb_err *err);

nb_code nb_secret_read_file(const char *path, char **out, nb_err *err)
{
    size_t len = 0;
    nb_code rc = read_key_file(path, out, &len, err);
    if (!rc && (rc = nb_secret_check(path, *out, len, err))) {
        nb_secret_free(*out);
        *out = NULL;
    }
    return rc;
}

void nb_secret_free_named(char **names, char **keys, int n)
{
    for (int i = 0; i < n; i++) {
        free(names ? names[i] : NULL);
        nb_secret_free(keys ? keys[i] : NULL);
    }
    free(names);
    free(keys);
}

nb_code nb_secret_read_named(const char *path, char ***names, char ***keys, int *n,
                             nb_err *err)
{
    *names = *keys = NULL;
    *n = 0;
    char *buf = NULL;
    size_t len = 0;
    nb_code rc = read_key_file(path, &buf, &len, err);
    if (rc)
        return rc;
    if (memchr(buf, 0, len))
        rc = nb_err_set(err, NB_EINVAL, "%s: a NUL byte: a key file is text", path);
    int cap = 0, line = 0;
    for (char *p = buf, *next; !rc && p && *p; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next)
            *next++ = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        size_t nl = strcspn(p, " \t");
        char *k = p + nl;
        while (*k == ' ' || *k == '\t')
            k++;
        size_t kl = strlen(k);
        while (kl && isspace((unsigned char)k[kl - 1]))
            k[--kl] = '\0';
        char where[4200];
        snprintf(where, sizeof where, "%s:%d", path, line);
        if (!nl || nl > 63 || strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789._-") < nl) {
            rc = nb_err_set(err, NB_EINVAL, "%s: expected NAME KEY, NAME 1..63 letters, digits, "
                            "'.', '_', '-'", where);
            break;
        }
        if ((rc = nb_secret_check(where, k, kl, err)))
            break;
        if (*n == cap) {
            int nc = cap ? 2 * cap : 8;
            char **a = realloc(*names, (size_t)nc * sizeof *a), **b = a ? realloc(*keys, (size_t)nc * sizeof *b) : NULL;
            if (a)
                *names = a;
            if (!a || !b) {
                rc = nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
                break;
            }
            *keys = b;
            cap = nc;
        }
        (*names)[*n] = strndup(p, nl);
        (*keys)[*n] = strdup(k);
        (*n)++;
        if (!(*names)[*n - 1] || !(*keys)[*n - 1])
            rc = nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    memset(buf, 0, len); /* the lines were cut with NULs: wipe all of it */
    nb_secret_free(buf);
    if (rc) {
        nb_secret_free_named(*names, *keys, *n);
        *names = *keys = NULL;
        *n = 0;
    }
    return rc;
}

/* The file's bytes, trailing whitespace trimmed, after the mode and size checks. */
static nb_code read_key_file(const char *path, char **out, size_t *out_len, nb_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return nb_err_set(err, errno == ENOENT ? NB_ENOTFOUND : NB_EIO, "%s: cannot open: %s",
                          path, strerror(errno));
    struct stat st;
    nb_code rc = NB_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = nb_err_set(err, NB_EINVAL, "%s: not a regular file", path);
    else if (st.st_mode & 077)
        rc = nb_err_set(err, NB_EAUTH,
                        "%s: mode %04o lets other users read or change the key; it must be "
                        "0600 (chmod 600 %s)",
                        path, (unsigned)(st.st_mode & 07777), path);
    else if (st.st_size > NB_SECRET_FILE_MAX)
        rc = nb_err_set(err, NB_EINVAL, "%s: %lld bytes, the limit for a key file is %d", path,
                        (long long)st.st_size, NB_SECRET_FILE_MAX);
    char *buf = rc ? NULL : calloc(1, (size_t)st.st_size + 1);
    if (!rc && !buf)
        rc = nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    size_t len = 0;
    while (!rc && len < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + len, (size_t)st.st_size - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = nb_err_set(err, NB_EIO, "%s: short read", path);
        else
            len += (size_t)r;
    }
    close(fd);
    while (!rc && len && isspace((unsigned char)buf[len - 1]))
        buf[--len] = '\0';
    if (!rc && !len)
        rc = nb_err_set(err, NB_EINVAL, "%s: the key file is empty", path);
    if (rc) {
        nb_secret_free(buf);
        return rc;
    }
    *out = buf;
    *out_len = len;
    return NB_OK;
}

nb_code nb_secret_check(const char *where, const char *key, size_t len, nb_err *err)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch == 0)
            return nb_err_set(err, NB_EINVAL,
                              "%s: a NUL byte at offset %zu: a key is text (a raw binary key "
                              "would be cut there); encode it, e.g. `head -c 32 /dev/urandom "
                              "| base64`",
                              where, i);
        if (ch < 0x20 || ch > 0x7e)
            return nb_err_set(err, NB_EINVAL,
                              "%s: byte 0x%02x at offset %zu: a key is printable ASCII "
                              "(0x20..0x7e); encode it, e.g. with base64",
                              where, ch, i);
    }
    if (len < NB_SECRET_MIN)
        return nb_err_set(err, NB_EINVAL, "%s: a key of %zu bytes; the minimum is %d", where,
                          len, NB_SECRET_MIN);
    if (len > NB_SECRET_FILE_MAX)
        return nb_err_set(err, NB_EINVAL, "%s: a key of %zu bytes; the limit is %d", where, len,
                          NB_SECRET_FILE_MAX);
    if (key[0] == ' ')
        return nb_err_set(err, NB_EINVAL, "%s: the key starts with a space", where);
    return NB_OK;
}

nb_code nb_secret_get(const char *flag, const char *path, const char *env_name, char **out,
                      nb_err *err)
{
    *out = NULL;
    if (path && *path) {
        nb_code rc = nb_secret_read_file(path, out, err);
        return rc ? nb_err_prefix(err, "%s: ", flag) : NB_OK;
    }
    const char *e = env_name ? getenv(env_name) : NULL;
    if (!e || !*e)
        return NB_OK;
    char where[128];
    snprintf(where, sizeof where, "$%s", env_name);
    nb_code rc = nb_secret_check(where, e, strlen(e), err);
    if (rc)
        return rc;
    *out = strdup(e);
    return *out ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory");
}

nb_code nb_secret_refuse_argv(const char *flag, const char *file_flag, const char *env_name,
                              nb_err *err)
{
    return nb_err_set(err, NB_EINVAL,
                      "%s: a key on the command line is visible to every user in ps; use %s "
                      "FILE (mode 0600) or $%s",
                      flag, file_flag, env_name);
}

void nb_secret_free(char *s)
{
    if (!s)
        return;
    volatile char *v = s;
    while (*v)
        *v++ = 0;
    free(s);
}

const char *const nb_secret_env_names[] = {"NPUBENCH_SECRET", "NPUBENCH_WORKER_SECRET",
                                           "NPUBENCH_ADMIN_SECRET", NULL};

int nb_secret_env_entry(const char *entry)
{
    size_t n = strcspn(entry, "=");
    for (size_t i = 0; nb_secret_env_names[i]; i++)
        if (strlen(nb_secret_env_names[i]) == n && !strncmp(entry, nb_secret_env_names[i], n))
            return 1;
    return 0;
}

void nb_secret_env_clear(void)
{
    for (size_t i = 0; nb_secret_env_names[i]; i++)
        unsetenv(nb_secret_env_names[i]);
}
