/* nb_mmap: whole-file read-only mappings; the descriptor is closed at once
 * since the mapping keeps the file alive. */
#include "nb_mmap.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

nb_code nb_mmap_open(const char *path, nb_mmap *m, nb_err *err)
{
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nb_err_set(err, errno == ENOENT ? NB_ENOTFOUND : NB_EIO, "%s: cannot open: %s",
                          path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return nb_err_set(err, NB_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return nb_err_set(err, NB_EINVAL, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return nb_err_set(err, NB_ENOMEM, "%s: %lld bytes is too large to map", path,
                          (long long)st.st_size);
    }
    if (st.st_size == 0) {
        close(fd);
        return NB_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return nb_err_set(err, NB_EIO, "%s: mmap of %lld bytes failed: %s", path,
                          (long long)st.st_size, strerror(e));
    m->data = p;
    m->size = (size_t)st.st_size;
    return NB_OK;
}

void nb_mmap_close(nb_mmap *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}
