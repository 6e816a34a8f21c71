/* nb_rpc_server: the rep side of nb_rpc — a listening socket whose nng contexts feed a pool of
 * handler threads, with authentication, deadlines, health checks and idempotent replies.
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
 */
#ifndef NB_RPC_SERVER_H
#define NB_RPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_rpc_status.h"
#include "nb_rpc_transport.h"

typedef struct nb_rpc_server nb_rpc_server;

/* What a handler receives; valid only during the call. */
typedef struct nb_rpc_request {
    const char *method;
    uint64_t request_id;
    int64_t deadline_unix_ms;  /* on the server's clock (now + the request's timeout); 0 = none */
    const uint8_t *payload;    /* the method's request message, still packed */
    size_t len;
    unsigned roles;            /* NB_WIRE_ROLE_* of the key the request was signed with */
    const char *client;        /* the named client key's name (opts.client_keys); NULL for
                                  the role keys and without keys */
} nb_rpc_request;

/* Request ids an authenticated server remembers for the clock window (2 x
 * NB_WIRE_SKEW_MAX_MS); past it, new mutating requests get RESOURCE_EXHAUSTED. */
#define NB_RPC_REPLAY_IDS (1 << 20)

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

/* Where an authenticated server keeps the answers of the mutating requests it ran, beyond
 * its memory, so a captured request replayed after a restart gets the first answer again
 * instead of running again (and a worker's resend across the restart gets its answer).
 * record: the request (id, key) ran and answered status/message/payload (transient failures
 * are not recorded: their retry runs); keep it until expires_ms. lookup: 1 with the stored
 * answer (*payload malloc'ed), 0 when none. */
typedef struct nb_rpc_replay_store {
    void *user;
    void (*record)(void *user, uint64_t id, uint64_t key, int64_t expires_ms, int status,
                   const char *message, const uint8_t *payload, size_t len);
    int (*lookup)(void *user, uint64_t id, uint64_t key, int *status, char *message,
                  size_t message_cap, uint8_t **payload, size_t *len);
} nb_rpc_replay_store;

/* Before start: store (copied) is asked and told as above. No-op on a server without keys
 * (it refuses no replay). */
void nb_rpc_server_replay_store(nb_rpc_server *srv, const nb_rpc_replay_store *store);

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
    int connections;          /* open now (not counted on inproc) */
    uint64_t refused_connections; /* closed on arrival: opts.max_conns were open */
    uint64_t idle_closed;     /* closed after opts.idle_ms without a request */
    uint64_t listener_restarts; /* ipc:// listened anew after nng's listener stopped */
    uint64_t listener_restart_failures; /* ... and could not (retried every 200 ms) */
} nb_rpc_server_stats;

void nb_rpc_server_get_stats(nb_rpc_server *srv, nb_rpc_server_stats *out);

/* Stops serving: closes the socket (in-flight clients get errors), waits for
 * running handlers to return, frees everything.  After it returns no handler
 * runs, so handler state may be freed next.  NULL ok. */
void nb_rpc_server_close(nb_rpc_server *srv);

#endif
