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

/* Named keys, one "NAME KEY" per line (# comments and blank lines skipped), from a file
 * checked as nb_secret_read_file checks one (owner-only mode, size); each key as
 * nb_secret_check, names 1..63 bytes of [A-Za-z0-9._-]. *names and *keys malloc'ed arrays
 * of *n malloc'ed strings: free with nb_secret_free_named. Errors name the file and line. */
nb_code nb_secret_read_named(const char *path, char ***names, char ***keys, int *n,
                             nb_err *err);
void nb_secret_free_named(char **names, char **keys, int n);

/* flag names the option in messages ("--worker-secret-file").  The file when path is set,
 * else $env_name when set, else *out = NULL and NB_OK (no key). */
nb_code nb_secret_get(const char *flag, const char *path, const char *env_name, char **out,
                      nb_err *err);

/* The refusal for a key given on the command line: NB_EINVAL naming the option, the file
 * option and the variable to use instead. */
nb_code nb_secret_refuse_argv(const char *flag, const char *file_flag, const char *env_name,
                              nb_err *err);

/* The environment variables keys come from ($NPUBENCH_SECRET, $NPUBENCH_WORKER_SECRET,
 * $NPUBENCH_ADMIN_SECRET), NULL-terminated. */
extern const char *const nb_secret_env_names[];

/* 1 when the environment entry "NAME=value" (or a bare NAME) is one of them: a child
 * process (an exec job) must not inherit it. */
int nb_secret_env_entry(const char *entry);

/* Unsets them in this process once the key is read, so nothing it starts inherits a key. */
void nb_secret_env_clear(void);

/* Overwrites and frees a key; NULL ok. */
void nb_secret_free(char *s);

#endif
