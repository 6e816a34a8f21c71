/* nb_coord_lock: one coordinator per database — an flock on "<db>.lock" holding the owner's
 * pid, so a second coordinator is refused with a message naming who holds the file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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
    /* The lock file goes by the name given; the database's inode is the same through every
     * name: a hard link or a symlink to a served file finds it taken here. */
    int dfd = open(c->db_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
    if (dfd < 0)
        return nb_err_set(err, NB_EIO, "%s: cannot open the database: %s", c->db_path,
                          strerror(errno));
    if (flock(dfd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
        struct stat st;
        int known = fstat(dfd, &st) == 0;
        close(dfd);
        return nb_err_set(err, NB_EUNAVAIL,
                          "%s is in use by another coordinator under another name (a hard link "
                          "or symlink to the same file: device %llu, inode %llu); stop it first "
                          "or give this one another --db",
                          c->db_path, known ? (unsigned long long)st.st_dev : 0ULL,
                          known ? (unsigned long long)st.st_ino : 0ULL);
    }
    c->db_lock_fd = dfd;
    return NB_OK;
}

void nb_coord_unlock_db(nb_coord *c)
{
    if (c->db_lock_fd >= 0)
        close(c->db_lock_fd); /* after nb_db_close: see nb_coord_int.h */
    c->db_lock_fd = -1;
    if (c->lock_fd > 0)
        close(c->lock_fd); /* releases the flock */
    c->lock_fd = -1;
}
