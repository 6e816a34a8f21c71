/* nb_secret: RPC keys from a file only its owner can read, or from the environment —
 * never from argv, which every user of the host sees in ps. */
#ifndef NB_SECRET_H
#define NB_SECRET_H

#include <stddef.h>

#include "nb_err.h"

#define NB_SECRET_FILE_MAX 4096 /* bytes of a key file */
#define NB_SECRET_MIN 16        /* bytes of a key, at least */

/* The key in path (trailing whitespace trimmed) into *out (malloc'ed; free with
 * nb_secret_free).  Refused (NB_EAUTH) when group or others may read or write the file,
 * naming its mode; NB_EINVAL for an empty file or one that is not a regular file, and for a
 * key that nb_secret_check refuses. */
nb_code nb_secret_read_file(const char *path, char **out, nb_err *err);

/* A key is text: NB_SECRET_MIN..NB_SECRET_FILE_MAX bytes of printable ASCII (0x21..0x7e,
 * inner spaces allowed).  A NUL byte (a raw binary key: it would cut the key short, to nothing
 * when leading, and turn authentication off) or another control or non-ASCII byte is refused
 * with NB_EINVAL naming where (a file or a variable) and the byte's offset; len is the key's
 * length in bytes, NULs included. */
nb_code nb_secret_check(const char *where, const char *key, size_t len, nb_err *err);

/* flag names the option in messages ("--worker-secret-file").  The file when path is set,
 * else $env_name when set, else *out = NULL and NB_OK (no key). */
nb_code nb_secret_get(const char *flag, const char *path, const char *env_name, char **out,
                      nb_err *err);

/* The refusal for a key given on the command line: NB_EINVAL naming the option, the file
 * option and the variable to use instead. */
nb_code nb_secret_refuse_argv(const char *flag, const char *file_flag, const char *env_name,
                              nb_err *err);

/* Overwrites and frees a key; NULL ok. */
void nb_secret_free(char *s);

#endif
