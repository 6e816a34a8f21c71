/* nb_devlock: flock(2) on a per-device file; the holder's pid is written inside for messages.
 * flock locks belong to the open file description, so two claims in one process conflict too. */
#include "nb_devlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_file.h"

struct nb_devlock {
    int fd;
    char path[1024];
};

nb_code nb_devlock_dir(char *buf, size_t cap, nb_err *err)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && *x)
        snprintf(buf, cap, "%s/npubench", x);
    else
        snprintf(buf, cap, "/tmp/npubench-%u", (unsigned)getuid());
    if (mkdir(buf, 0700) && errno != EEXIST)
        return nb_err_set(err, NB_EIO, "device lock directory %s: %s", buf, strerror(errno));
    return NB_OK;
}

/* The device id as a file name: ':' becomes '_'; other characters must be safe already. */
static nb_code file_name(const char *device_id, char name[80], nb_err *err)
{
    size_t n = strlen(device_id);
    if (!n || n > 64)
        return nb_err_set(err, NB_EINVAL, "device id '%s': must be 1..64 characters", device_id);
    for (size_t i = 0; i < n; i++) {
        char c = device_id[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == ':' || c == '.' || c == '_' || c == '-';
        if (!ok)
            return nb_err_set(err, NB_EINVAL, "device id '%s': character %zu is not one of "
                              "letters, digits, ':', '.', '_', '-'", device_id, i + 1);
        name[i] = c == ':' ? '_' : c;
    }
    name[n] = '\0';
    return NB_OK;
}

/* flock on the open file, then our pid inside it; a holder's pid goes into the error. */
static nb_code claim(nb_devlock *l, const char *device_id, nb_err *err)
{
    if (flock(l->fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        char pid[32] = "";
        ssize_t got = pread(l->fd, pid, sizeof pid - 1, 0);
        pid[got > 0 ? got : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            return nb_err_set(err, NB_EUNAVAIL,
                              "device %s is already claimed by pid %s (lock %s); one worker per "
                              "device: stop that worker or pick another --device",
                              device_id, pid[0] ? pid : "unknown", l->path);
        return nb_err_set(err, NB_EIO, "device lock %s: flock: %s", l->path, strerror(e));
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(l->fd, 0) || pwrite(l->fd, pid, (size_t)len, 0) != len)
        return nb_err_set(err, NB_EIO, "device lock %s: writing the pid: %s", l->path,
                          strerror(errno));
    return NB_OK;
}

nb_code nb_devlock_acquire(const char *device_id, const char *dir, nb_devlock **out,
                           nb_err *err)
{
    *out = NULL;
    char name[80], d[900];
    nb_code rc = file_name(device_id, name, err);
    if (rc)
        return rc;
    if (dir && *dir) {
        snprintf(d, sizeof d, "%s", dir);
        rc = nb_file_mkdirs(d, err);
    } else
        rc = nb_devlock_dir(d, sizeof d, err);
    if (rc)
        return rc;
    nb_devlock *l = calloc(1, sizeof *l);
    if (!l)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    snprintf(l->path, sizeof l->path, "%s/device-%s.lock", d, name);
    l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (l->fd < 0) {
        rc = nb_err_set(err, NB_EIO, "device lock %s: %s", l->path, strerror(errno));
        free(l);
        return rc;
    }
    if ((rc = claim(l, device_id, err))) {
        close(l->fd);
        free(l);
        return rc;
    }
    *out = l;
    return NB_OK;
}

void nb_devlock_release(nb_devlock *l)
{
    if (!l)
        return;
    /* Empty the pid first, so a reader never names a process that let go. */
    if (ftruncate(l->fd, 0)) {
        /* harmless: the lock itself is what counts */
    }
    flock(l->fd, LOCK_UN);
    close(l->fd);
    free(l);
}

const char *nb_devlock_path(const nb_devlock *l)
{
    return l->path;
}
