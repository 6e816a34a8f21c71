/* nb_err: the error value every npubench function fills in.
 * A code for programs, a message naming the file/field/limit for people. */
#ifndef NB_ERR_H
#define NB_ERR_H

#include <stdarg.h>

/* Codes are stable: the CLI maps them to exit codes and the RPC layer to
 * gRPC-style status codes. */
typedef enum nb_code {
    NB_OK = 0,
    NB_EINVAL,       /* bad argument or input value (names the field) */
    NB_EIO,          /* file or socket I/O failed */
    NB_ENOMEM,       /* allocation failed or a size limit was exceeded */
    NB_EFORMAT,      /* malformed file: bad magic, truncated, bad offsets */
    NB_EUNSUPPORTED, /* well-formed but not supported (type, architecture) */
    NB_ENOTFOUND,    /* missing file, tensor, key, reference trace */
    NB_EMISMATCH,    /* inputs disagree (digests, token ids, shapes) */
    NB_EUNAVAIL,     /* device or service not available */
    NB_ETIMEOUT,     /* deadline exceeded */
    NB_EAUTH,        /* authentication failed */
    NB_ECANCELED,    /* job or operation cancelled */
    NB_EINTERNAL,    /* invariant broken: a bug */
    NB_EDATALOSS     /* stored data is damaged (corrupt database page, not a database) */
} nb_code;

#define NB_ERR_MSG_MAX 512

typedef struct nb_err {
    nb_code code;
    char msg[NB_ERR_MSG_MAX];
} nb_err;

/* Sets code and a printf-style message; returns code so callers can write
 * `return nb_err_set(err, NB_EINVAL, "...")`. err may be NULL. */
nb_code nb_err_set(nb_err *err, nb_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
nb_code nb_err_vset(nb_err *err, nb_code code, const char *fmt, va_list ap);

/* Prepends context ("loading x.gguf: ") to an existing message. */
nb_code nb_err_prefix(nb_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void nb_err_clear(nb_err *err);
const char *nb_code_name(nb_code code);

#endif
