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

nb_code nb_secret_read_file(const char *path, char **out, nb_err *err)
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
    if (!rc)
        rc = nb_secret_check(path, buf, len, err);
    if (rc) {
        nb_secret_free(buf);
        return rc;
    }
    *out = buf;
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
