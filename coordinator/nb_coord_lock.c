/* nb_coord_lock: one coordinator per database — an flock on "<db>.lock" holding the owner's
 * pid, so a second coordinator is refused with a message naming who holds the file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "nb_coord_int.h"

nb_code nb_coord_lock_db(nb_coord *c, nb_err *err)
{
    char path[1200];
    snprintf(path, sizeof path, "%s.lock", c->db_path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return nb_err_set(err, NB_EIO, "%s: cannot open the database lock: %s", path,
                          strerror(errno));
    /* Embedded (local) coordinators share the history file by design, each session taking
     * only its own jobs; a service coordinator must be alone on it. */
    int shared = c->o.source_local;
    if (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        close(fd);
        return nb_err_set(err, NB_EUNAVAIL,
                          "%s is in use by another coordinator (pid %s, lock %s); stop it "
                          "first or give this one another --db",
                          c->db_path, *buf ? buf : "unknown", path);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        nb_coord_log(c, "%s: cannot record the pid: %s", path, strerror(errno));
    c->lock_fd = fd;
    return NB_OK;
}

void nb_coord_unlock_db(nb_coord *c)
{
    if (c->lock_fd > 0)
        close(c->lock_fd); /* releases the flock */
    c->lock_fd = -1;
}
