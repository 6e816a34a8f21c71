/* nb_rpc: request/response RPC over nng req0/rep0 with gRPC-style status codes.
 * One server per listening URL; clients are thread-safe and call concurrently.
 *
 * Transports: tcp://host:port, ipc:///path, inproc://name (coordinator and
 * worker in one process) and tls+tcp://host:port (certificate files in opts).
 *
 * Wire: each request is an npubench.RequestEnvelope {method, request_id,
 * deadline_unix_ms, mac, payload}, each reply an npubench.ResponseEnvelope
 * {request_id, status, message, payload, mac} (proto/npubench.proto).
 *
 * Server model: `contexts` nng contexts each loop recv -> queue -> send; a pool
 * of `threads` handler threads takes queued requests, so handlers may block
 * (SQLite writes, bounded long polls).  Never block in a handler longer than
 * the request's deadline: a blocked handler holds a thread and a context.
 * Size threads >= the number of concurrent long polls you allow, plus 2.
 *
 * Guarantees the server gives every handler:
 *   - the MAC verified (when the server has a secret; otherwise UNAUTHENTICATED
 *     is answered and the handler is not called) under a key whose role the method
 *     takes (else PERMISSION_DENIED),
 *   - the sender's clock within NB_WIRE_SKEW_MAX_MS of the server's (else
 *     UNAUTHENTICATED naming the skew), the timeout at most NB_WIRE_TIMEOUT_MAX_MS
 *     (else INVALID_ARGUMENT) and not yet passed (else DEADLINE_EXCEEDED),
 *   - the request at most max_msg_bytes long,
 *   - for methods not registered NB_RPC_READONLY: one execution per
 *     (request_id, method) while the entry stays in the response cache; an nng
 *     resend or a client retry with the same id gets the first response again.
 * Unknown methods get UNIMPLEMENTED; "grpc.health.v1.Health/Check" is built in.
 *
 * Deadlines travel as the send time and deadline on the sender's clock; the
 * server takes their difference as the timeout, counted from arrival on its own
 * clock (gRPC's rule), so clocks need to agree only within the skew window.
 *
 * Replay: an authenticated server refuses requests without times, requests sent
 * outside the skew window and mutating request ids it saw within the window
 * (ALREADY_EXISTS) once the response cache no longer answers them.  Without TLS
 * the traffic is readable; the MAC only proves origin.
 * Responses are MAC'ed too: a client with a secret refuses unauthenticated
 * answers (including every answer of a server without a secret).
 *
 * Known nng 1.5.2 defect (Debian's libnng): closing a pipe while a message
 * is half received can leave nng_close waiting forever (reproduced over tcp;
 * ipc and tls share the code; fixed for tcp upstream in 1.6.0, nanomsg/nng
 * #1636).  inproc is immune.  Close a client only when no reply can still be
 * arriving (no call in flight or timed out moments ago); a server closed while
 * requests arrive carries the same risk.
 */
#ifndef NB_RPC_H
#define NB_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_wire.h"

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

#define NB_RPC_MAX_MSG_DEFAULT ((size_t)16 << 20)
#define NB_RPC_HEALTH_CHECK "grpc.health.v1.Health/Check"

/* Options for servers and clients; zero-initialise and set what you need
 * (every 0 means the default in brackets).  Strings are copied at open. */
typedef struct nb_rpc_opts {
    const char *secret;        /* client: the key it signs with; server: the client key, or
                                  the one shared key of every role when the two below are
                                  unset; NULL/"" = no auth (embedded mode) */
    size_t max_msg_bytes;      /* NNG_OPT_RECVMAXSZ and our own check [16 MiB] */
    /* server */
    int contexts;              /* requests in flight at once [64] */
    int threads;               /* handler threads [8] */
    int cache_entries;         /* idempotency cache entries [4096]; < 0 disables */
    size_t cache_bytes;        /* cached response payload bytes [64 MiB] */
    /* client */
    int timeout_ms;            /* used when a call passes timeout_ms <= 0 [30000] */
    int resend_ms;             /* NNG_OPT_REQ_RESENDTIME [0 = resend only after a
                                  reconnect, never on a timer within a call] */
    bool background_dial;      /* false: open fails if the server is unreachable;
                                  true: connect (and reconnect) in the background */
    /* TLS, for tls+tcp:// URLs */
    const char *tls_cert_key_file; /* PEM cert + unencrypted key: required on a
                                      server, optional on a client (mutual TLS) */
    const char *tls_ca_file;       /* client: CA verifying the server (required);
                                      server: if set, client certs are required */
    const char *tls_server_name;   /* client: name to verify [the URL's host] */
    /* server: keys of the other roles (nb_wire_keys_init); NULL/"" = none */
    const char *worker_secret;
    const char *admin_secret;
} nb_rpc_opts;

/* Request ids an authenticated server remembers for the clock window (2 x
 * NB_WIRE_SKEW_MAX_MS); past it, new mutating requests get RESOURCE_EXHAUSTED. */
#define NB_RPC_REPLAY_IDS (1 << 20)

/* ---------------------------------------------------------------- server */

typedef struct nb_rpc_server nb_rpc_server;

/* What a handler receives; valid only during the call. */
typedef struct nb_rpc_request {
    const char *method;
    uint64_t request_id;
    int64_t deadline_unix_ms;  /* on the server's clock (now + the request's timeout); 0 = none */
    const uint8_t *payload;    /* the method's request message, still packed */
    size_t len;
    unsigned roles;            /* NB_WIRE_ROLE_* of the key the request was signed with */
} nb_rpc_request;

/* What a handler fills: payload must be malloc'ed (or NULL with len 0); the
 * server takes ownership and frees it.  message is sent with the status. */
typedef struct nb_rpc_reply {
    uint8_t *payload;
    size_t len;
    char message[NB_ERR_MSG_MAX];
} nb_rpc_reply;

/* Returns the status to send.  Runs on a pool thread; several handlers
 * (also of the same method) run concurrently, so user state needs its own
 * locking.  Unpack the payload with nb_wire_unpack and answer a failure with
 * `return nb_rpc_reply_err(reply, err)` (malformed -> INVALID_ARGUMENT). */
typedef nb_rpc_status (*nb_rpc_handler)(void *user, const nb_rpc_request *req,
                                        nb_rpc_reply *reply);

/* Sets reply->message (printf-style) and returns status. */
nb_rpc_status nb_rpc_reply_status(nb_rpc_reply *reply, nb_rpc_status status, const char *fmt,
                                  ...) __attribute__((format(printf, 3, 4)));
/* Status from err->code (nb_rpc_status_from_code), message from err->msg. */
nb_rpc_status nb_rpc_reply_err(nb_rpc_reply *reply, const nb_err *err);
/* Packs a generated message as the reply payload; NB_RPC_OK, or INTERNAL /
 * RESOURCE_EXHAUSTED with the message set. */
nb_rpc_status nb_rpc_reply_pack(nb_rpc_reply *reply, const void *msg);

/* Binds url (errors: bad URL, address in use, TLS files) without serving
 * yet: register handlers, then nb_rpc_server_start.  Peers that connect in
 * between wait.  opts may be NULL.  Close with nb_rpc_server_close. */
nb_code nb_rpc_server_open(const char *url, const nb_rpc_opts *opts, nb_rpc_server **out,
                           nb_err *err);

#define NB_RPC_READONLY 1u /* safe to run twice: responses are not cached */
#define NB_RPC_WORKER 2u   /* only requests signed with the worker key */
#define NB_RPC_ADMIN 4u    /* only requests signed with the admin key */

/* Registers fn for method ("pkg.Service/Method") before start.  Methods not
 * flagged NB_RPC_READONLY are treated as mutating: their responses are cached
 * for duplicate request ids.  The service part ("pkg.Service") becomes a
 * health-checkable service, SERVING from the start. */
nb_code nb_rpc_server_handle(nb_rpc_server *srv, const char *method, nb_rpc_handler fn,
                             void *user, unsigned flags, nb_err *err);

/* Starts serving; handlers are fixed from here on. */
nb_code nb_rpc_server_start(nb_rpc_server *srv, nb_err *err);

/* Health state of a service ("" = the whole server) as Health/Check
 * reports it: SERVING or NOT_SERVING.  NB_ENOTFOUND for a service that no
 * registered method belongs to.  Thread-safe, any time. */
nb_code nb_rpc_server_set_serving(nb_rpc_server *srv, const char *service, bool serving,
                                  nb_err *err);

/* The URL clients can dial: the bound port replaces ":0", and a wildcard
 * host ("*", "", "0.0.0.0") becomes 127.0.0.1.  Owned by srv. */
const char *nb_rpc_server_url(const nb_rpc_server *srv);

typedef struct nb_rpc_server_stats {
    uint64_t requests;        /* envelopes received */
    uint64_t handled;         /* handler executions */
    uint64_t replayed;        /* duplicates answered from the cache */
    uint64_t unauthenticated; /* refused for a missing/bad MAC */
    uint64_t expired;         /* refused for a passed deadline */
    uint64_t malformed;       /* undecodable envelopes */
    uint64_t unimplemented;   /* unknown methods */
    uint64_t oversize;        /* over max_msg_bytes (those nng did not drop) */
} nb_rpc_server_stats;

void nb_rpc_server_get_stats(nb_rpc_server *srv, nb_rpc_server_stats *out);

/* Stops serving: closes the socket (in-flight clients get errors), waits for
 * running handlers to return, frees everything.  After it returns no handler
 * runs, so handler state may be freed next.  NULL ok. */
void nb_rpc_server_close(nb_rpc_server *srv);

/* ---------------------------------------------------------------- client */

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
