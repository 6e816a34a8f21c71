/* nb_rpc_client: the req side of nb_rpc — a dialed socket on which any number of threads
 * call methods at once, each call with its own nng context, deadline and request id. */
#ifndef NB_RPC_CLIENT_H
#define NB_RPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_rpc_status.h"
#include "nb_rpc_transport.h"
#include "nb_wire.h"

typedef struct nb_rpc_client nb_rpc_client;

/* Dials url.  Unless opts->background_dial, fails (NB_EUNAVAIL naming the
 * URL and nng's reason) when nothing listens there.  opts may be NULL. */
nb_code nb_rpc_client_open(const char *url, const nb_rpc_opts *opts, nb_rpc_client **out,
                           nb_err *err);

/* Calls method with req (len bytes, the packed request message) and waits up
 * to timeout_ms (<= 0: opts.timeout_ms).  Thread-safe.
 * Returns NB_OK iff a response with status OK arrived; otherwise the nb_code
 * of the status (NB_ETIMEOUT for DEADLINE_EXCEEDED, NB_EAUTH, NB_EUNAVAIL for
 * an unreachable server ...) with err naming the method and the server's
 * message.  *status (may be NULL) always gets the gRPC code, also for local
 * failures.  *msg (may be NULL) gets a malloc'ed copy of the server's message
 * ("" if none), *resp and *resp_len the malloc'ed response payload (also on a
 * non-OK status; NULL/0 when empty or on a local failure); caller frees both. */
nb_code nb_rpc_call(nb_rpc_client *cli, const char *method, const void *req, size_t len,
                    int timeout_ms, int *status, char **msg, uint8_t **resp, size_t *resp_len,
                    nb_err *err);

/* nb_rpc_call with a caller-chosen request id (from nb_rpc_client_new_id):
 * retrying a mutating call after a timeout with the same id runs it at most
 * once on a server that still caches the first response. */
nb_code nb_rpc_call_id(nb_rpc_client *cli, uint64_t request_id, const char *method,
                       const void *req, size_t len, int timeout_ms, int *status, char **msg,
                       uint8_t **resp, size_t *resp_len, nb_err *err);

/* A fresh request id, unique with overwhelming probability across clients. */
uint64_t nb_rpc_client_new_id(nb_rpc_client *cli);

/* Message-level call: packs req_msg (a generated message), calls, and on OK
 * unpacks the response as resp_desc into *(T **)resp_out (free with
 * nb_wire_free; NULL on any failure).  Returns as nb_rpc_call. */
nb_code nb_rpc_call_pb(nb_rpc_client *cli, const char *method, const void *req_msg,
                       const ProtobufCMessageDescriptor *resp_desc, int timeout_ms,
                       void *resp_out, int *status, nb_err *err);
/* nb_rpc_call_pb under a caller-chosen request id (0: a fresh one; a retry passes the first
 * call's, and packing the same message again gives the same payload), with the server's
 * message in *msg as nb_rpc_call gives it (may be NULL).  resp_desc NULL: the response is
 * not read (resp_out may then be NULL). */
nb_code nb_rpc_call_pb_id(nb_rpc_client *cli, uint64_t request_id, const char *method,
                          const void *req_msg, const ProtobufCMessageDescriptor *resp_desc,
                          int timeout_ms, void *resp_out, int *status, char **msg,
                          nb_err *err);

/* grpc.health.v1.Health/Check for service ("" = server).  *serving gets
 * HealthCheckResponse.ServingStatus (1 = SERVING, 2 = NOT_SERVING).  An
 * unknown service is NB_ENOTFOUND with *status = NOT_FOUND. */
nb_code nb_rpc_health_check(nb_rpc_client *cli, const char *service, int timeout_ms,
                            int *serving, int *status, nb_err *err);

/* The URL this client dials.  Owned by cli. */
const char *nb_rpc_client_url(const nb_rpc_client *cli);

/* Closes the socket and frees cli.  No call may be in flight on another
 * thread (join them first).  NULL ok. */
void nb_rpc_client_close(nb_rpc_client *cli);

#endif
