/* nb_file: small file helpers shared by reports, traces, prompt sets and configs.
 * Reads are capped; writes are atomic (temp + rename). */
#include "nb_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

nb_code nb_file_read(const char *path, size_t max_bytes, char **data, size_t *len, nb_err *err)
{
    *data = NULL;
    if (len)
        *len = 0;
    /* O_NONBLOCK: opening a FIFO or a device must not wait for a writer or the hardware;
     * the type and size are checked on the open descriptor before one byte is read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return nb_err_set(err, errno == ENOENT ? NB_ENOTFOUND : NB_EIO, "%s: cannot open: %s",
                          path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return nb_err_set(err, NB_EIO, "%s: not a regular file", path);
    }
    if ((size_t)st.st_size > max_bytes) {
        close(fd);
        return nb_err_set(err, NB_ENOMEM, "%s: %lld bytes exceeds the limit of %zu bytes", path,
                          (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory (%zu bytes)", path, n);
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(buf);
        return nb_err_set(err, NB_EIO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = '\0';
    *data = buf;
    if (len)
        *len = n;
    return NB_OK;
}

nb_code nb_file_write(const char *path, const void *data, size_t len, nb_err *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return nb_err_set(err, NB_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return nb_err_set(err, NB_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    /* fwrite's buffer is declared non-null even for 0 bytes (empty uploads). */
    size_t put = len ? fwrite(data, 1, len, f) : 0;
    /* fsync before the rename: a file that replaced another is never empty after a crash. */
    int bad = put != len || fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return nb_err_set(err, NB_EIO, "%s: write failed: %s", path, strerror(errno));
    }
    return NB_OK;
}

int nb_file_plain_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128 || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int nb_file_readable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

nb_code nb_file_mkdirs(const char *dir, nb_err *err)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return nb_err_set(err, NB_EINVAL, "directory path '%s': empty or too long", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0775) != 0 && errno != EEXIST)
                return nb_err_set(err, NB_EIO, "%s: cannot create directory: %s", buf,
                                  strerror(errno));
            buf[i] = c;
        }
    }
    return NB_OK;
}

int nb_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}
