/* nb_rpc_status: the gRPC canonical status codes every RPC answer carries, and their one
 * mapping to and from nb_code, used by server, client and the handlers alike. */
#ifndef NB_RPC_STATUS_H
#define NB_RPC_STATUS_H

#include <stdbool.h>

#include "nb_err.h"

/* gRPC canonical status codes (npubench.StatusCode). */
typedef enum nb_rpc_status {
    NB_RPC_OK = 0,
    NB_RPC_CANCELLED = 1,
    NB_RPC_UNKNOWN = 2,
    NB_RPC_INVALID_ARGUMENT = 3,
    NB_RPC_DEADLINE_EXCEEDED = 4,
    NB_RPC_NOT_FOUND = 5,
    NB_RPC_ALREADY_EXISTS = 6,
    NB_RPC_PERMISSION_DENIED = 7,
    NB_RPC_RESOURCE_EXHAUSTED = 8,
    NB_RPC_FAILED_PRECONDITION = 9,
    NB_RPC_ABORTED = 10,
    NB_RPC_OUT_OF_RANGE = 11,
    NB_RPC_UNIMPLEMENTED = 12,
    NB_RPC_INTERNAL = 13,
    NB_RPC_UNAVAILABLE = 14,
    NB_RPC_DATA_LOSS = 15,
    NB_RPC_UNAUTHENTICATED = 16
} nb_rpc_status;

/* "DEADLINE_EXCEEDED"; "UNKNOWN" for numbers outside 0..16. */
const char *nb_rpc_status_name(int status);
/* NB_EINVAL -> INVALID_ARGUMENT, NB_ENOTFOUND -> NOT_FOUND, NB_ETIMEOUT ->
 * DEADLINE_EXCEEDED, NB_EAUTH -> UNAUTHENTICATED, NB_EIO/NB_EUNAVAIL ->
 * UNAVAILABLE, NB_EMISMATCH -> FAILED_PRECONDITION ... */
nb_rpc_status nb_rpc_status_from_code(nb_code code);
/* The inverse, folding gRPC codes nb_code lacks into the nearest one
 * (ALREADY_EXISTS -> NB_EMISMATCH, PERMISSION_DENIED -> NB_EAUTH, ...). */
nb_code nb_rpc_code_from_status(int status);
/* Whether status is one of the codes above (0..16). */
bool nb_rpc_status_valid(int status);
/* Whether a handler's status says "nothing done, try again" (UNAVAILABLE, ABORTED,
 * RESOURCE_EXHAUSTED): not the answer for good, so a retry under the same request id must
 * run again (the response cache and the replay set both let it through). */
bool nb_rpc_status_transient(int status);

#endif
