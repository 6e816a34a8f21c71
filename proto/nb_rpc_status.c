/* nb_rpc_status: names of the gRPC status codes and the mapping between them and nb_code;
 * the C enum is checked against the generated one so that either can be used. */
#include "nb_rpc_status.h"

#include "npubench.pb-c.h"

#define SAME(a, b) _Static_assert((int)NB_RPC_##a == (int)NPUBENCH__STATUS_CODE__##b, #a)
SAME(OK, OK);
SAME(CANCELLED, CANCELLED);
SAME(UNKNOWN, UNKNOWN);
SAME(INVALID_ARGUMENT, INVALID_ARGUMENT);
SAME(DEADLINE_EXCEEDED, DEADLINE_EXCEEDED);
SAME(NOT_FOUND, NOT_FOUND);
SAME(ALREADY_EXISTS, ALREADY_EXISTS);
SAME(PERMISSION_DENIED, PERMISSION_DENIED);
SAME(RESOURCE_EXHAUSTED, RESOURCE_EXHAUSTED);
SAME(FAILED_PRECONDITION, FAILED_PRECONDITION);
SAME(ABORTED, ABORTED);
SAME(OUT_OF_RANGE, OUT_OF_RANGE);
SAME(UNIMPLEMENTED, UNIMPLEMENTED);
SAME(INTERNAL, INTERNAL);
SAME(UNAVAILABLE, UNAVAILABLE);
SAME(DATA_LOSS, DATA_LOSS);
SAME(UNAUTHENTICATED, UNAUTHENTICATED);
#undef SAME

static const char *const status_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"};

bool nb_rpc_status_valid(int s)
{
    return s >= 0 && s <= NB_RPC_UNAUTHENTICATED;
}

const char *nb_rpc_status_name(int status)
{
    return nb_rpc_status_valid(status) ? status_names[status] : "UNKNOWN";
}

nb_rpc_status nb_rpc_status_from_code(nb_code code)
{
    switch (code) {
    case NB_OK: return NB_RPC_OK;
    case NB_EINVAL: return NB_RPC_INVALID_ARGUMENT;
    case NB_EFORMAT: return NB_RPC_INVALID_ARGUMENT;
    case NB_EIO: return NB_RPC_UNAVAILABLE;
    case NB_ENOMEM: return NB_RPC_RESOURCE_EXHAUSTED;
    case NB_EUNSUPPORTED: return NB_RPC_UNIMPLEMENTED;
    case NB_ENOTFOUND: return NB_RPC_NOT_FOUND;
    case NB_EMISMATCH: return NB_RPC_FAILED_PRECONDITION;
    case NB_EUNAVAIL: return NB_RPC_UNAVAILABLE;
    case NB_ETIMEOUT: return NB_RPC_DEADLINE_EXCEEDED;
    case NB_EAUTH: return NB_RPC_UNAUTHENTICATED;
    case NB_ECANCELED: return NB_RPC_CANCELLED;
    case NB_EINTERNAL: return NB_RPC_INTERNAL;
    case NB_EDATALOSS: return NB_RPC_DATA_LOSS;
    }
    return NB_RPC_UNKNOWN;
}

nb_code nb_rpc_code_from_status(int status)
{
    switch (status) {
    case NB_RPC_OK: return NB_OK;
    case NB_RPC_CANCELLED: return NB_ECANCELED;
    case NB_RPC_INVALID_ARGUMENT: return NB_EINVAL;
    case NB_RPC_OUT_OF_RANGE: return NB_EINVAL;
    case NB_RPC_DEADLINE_EXCEEDED: return NB_ETIMEOUT;
    case NB_RPC_NOT_FOUND: return NB_ENOTFOUND;
    case NB_RPC_ALREADY_EXISTS: return NB_EMISMATCH;
    case NB_RPC_FAILED_PRECONDITION: return NB_EMISMATCH;
    case NB_RPC_PERMISSION_DENIED: return NB_EAUTH;
    case NB_RPC_UNAUTHENTICATED: return NB_EAUTH;
    case NB_RPC_RESOURCE_EXHAUSTED: return NB_ENOMEM;
    case NB_RPC_ABORTED: return NB_EUNAVAIL;
    case NB_RPC_UNAVAILABLE: return NB_EUNAVAIL;
    case NB_RPC_UNIMPLEMENTED: return NB_EUNSUPPORTED;
    case NB_RPC_DATA_LOSS: return NB_EDATALOSS;
    default: return NB_EINTERNAL; /* UNKNOWN, INTERNAL, out of range */
    }
}

bool nb_rpc_status_transient(int status)
{
    return status == NB_RPC_UNAVAILABLE || status == NB_RPC_ABORTED ||
           status == NB_RPC_RESOURCE_EXHAUSTED;
}
