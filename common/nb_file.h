/* nb_file: whole-file reads with a size cap, atomic writes, directory creation.
 * Every caller states the largest file it is willing to read. */
#ifndef NB_FILE_H
#define NB_FILE_H

#include <stddef.h>

#include "nb_err.h"

/* Reads path into a malloc'ed, NUL-terminated buffer (caller frees).
 * Files over max_bytes are NB_ENOMEM naming the limit. */
nb_code nb_file_read(const char *path, size_t max_bytes, char **data, size_t *len, nb_err *err);
/* Writes via a temporary file (fsynced) and rename, so readers never see half a file;
 * data may be NULL when len is 0. */
nb_code nb_file_write(const char *path, const void *data, size_t len, nb_err *err);
/* mkdir -p. */
nb_code nb_file_mkdirs(const char *dir, nb_err *err);
int nb_file_exists(const char *path);
/* 1 when s can only name a file directly inside some directory: 1..128 of [A-Za-z0-9._-],
 * not starting with '.' (no "..", no '/', no hidden files). */
int nb_file_plain_name(const char *s);
/* 1 when path is a regular file this process may read (a FIFO, a device, a missing and an
 * unreadable file all give 0, so callers answer them alike). */
int nb_file_readable(const char *path);

#endif
