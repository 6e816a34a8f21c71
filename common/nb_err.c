/* nb_err: error values with user-facing messages.
 * Messages are truncated, never overflowed. */
#include "nb_err.h"

#include <stdio.h>
#include <string.h>

nb_code nb_err_vset(nb_err *err, nb_code code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

nb_code nb_err_set(nb_err *err, nb_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nb_err_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

nb_code nb_err_prefix(nb_err *err, const char *fmt, ...)
{
    if (!err)
        return NB_OK;
    char pre[NB_ERR_MSG_MAX], old[NB_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t np = strlen(pre), no = strnlen(old, sizeof old - 1);
    if (np > sizeof err->msg - 1)
        np = sizeof err->msg - 1;
    if (no > sizeof err->msg - 1 - np)
        no = sizeof err->msg - 1 - np;
    memcpy(err->msg, pre, np);
    memcpy(err->msg + np, old, no);
    err->msg[np + no] = '\0';
    return err->code;
}

void nb_err_clear(nb_err *err)
{
    if (err) {
        err->code = NB_OK;
        err->msg[0] = '\0';
    }
}

const char *nb_code_name(nb_code code)
{
    switch (code) {
    case NB_OK: return "OK";
    case NB_EINVAL: return "INVALID_ARGUMENT";
    case NB_EIO: return "IO_ERROR";
    case NB_ENOMEM: return "RESOURCE_EXHAUSTED";
    case NB_EFORMAT: return "BAD_FORMAT";
    case NB_EUNSUPPORTED: return "UNIMPLEMENTED";
    case NB_ENOTFOUND: return "NOT_FOUND";
    case NB_EMISMATCH: return "FAILED_PRECONDITION";
    case NB_EUNAVAIL: return "UNAVAILABLE";
    case NB_ETIMEOUT: return "DEADLINE_EXCEEDED";
    case NB_EAUTH: return "UNAUTHENTICATED";
    case NB_ECANCELED: return "CANCELLED";
    case NB_EINTERNAL: return "INTERNAL";
    case NB_EDATALOSS: return "DATA_LOSS";
    }
    return "UNKNOWN";
}
