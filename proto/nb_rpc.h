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
 * Replay: a captured request replays only until its deadline (authenticated
 * servers refuse requests without one) and, for cached methods, is absorbed by
 * the cache.  Without TLS the traffic is readable; the MAC only proves origin.
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

/* The whole RPC layer, for callers that serve and call alike; each part has its own header. */
#include "nb_rpc_client.h"
#include "nb_rpc_server.h"
#include "nb_rpc_status.h"
#include "nb_rpc_transport.h"

#endif
