/* nb_rpc_transport: what the RPC server and client share below the envelope — the options,
 * URL and method-name rules, TLS configuration and opening the nng socket of either side. */
#ifndef NB_RPC_TRANSPORT_H
#define NB_RPC_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "nb_err.h"

#define NB_RPC_MAX_MSG_DEFAULT ((size_t)16 << 20)
/* Built into every server; the client calls it with nb_rpc_health_check. */
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
    int max_conns;             /* connections at once; more are closed on arrival [512] */
    int idle_ms;               /* a connection without a request this long is closed
                                  [120000]; < 0 never */
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
    /* server: named client keys (client identities), n_client_keys of them */
    const char *const *client_names;
    const char *const *client_keys;
    int n_client_keys;
} nb_rpc_opts;

enum {
    /* Envelope fields around the payload: id, status, message, MAC, tags. */
    NB_RPC_ENVELOPE_SLACK = 1024,
    /* Extra allocation allowed when unpacking an envelope beyond its size. */
    NB_RPC_ENVELOPE_UNPACK_SLACK = 64 * 1024
};

/* NB_EINVAL unless url has a scheme nng serves for us (tcp, ipc, inproc, tls+tcp). */
nb_code nb_rpc_check_url(const char *url, nb_err *err);
/* Whether url is tls+tcp[46]://. */
bool nb_rpc_url_is_tls(const char *url);
/* "pkg.Service/Method": one inner '/', [A-Za-z0-9._], at most NB_WIRE_METHOD_MAX bytes. */
bool nb_rpc_method_ok(const char *method);
/* The checks server and client open alike: url's scheme (nb_rpc_check_url) and
 * opts.max_msg_bytes not below what an envelope needs.  *o gets opts, or all-default
 * options when opts is NULL. */
nb_code nb_rpc_check_open(const char *url, const nb_rpc_opts *opts, const nb_rpc_opts **o,
                          nb_err *err);

/* The socket of a server (rep0) or client (req0) with its receive limit, and for a TLS URL
 * its TLS configuration (*tls, to free with nng_tls_config_free; NULL otherwise). */
nb_code nb_rpc_open_socket(const char *url, const nb_rpc_opts *o, bool server,
                           nng_tls_config **tls, nng_socket *sock, size_t max_msg, nb_err *err);

/* nb_err_set with ": <nng's reason for rv>" after the formatted text. */
nb_code nb_rpc_nng_fail(nb_err *err, nb_code code, int rv, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Overwrites a secret before freeing it, so it does not linger in freed memory.  NULL ok. */
void nb_rpc_secret_free(char *secret);

#endif
