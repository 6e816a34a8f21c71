/* nb_wire: bounded protobuf-c pack/unpack and the RPC envelope's MACs.
 * Every byte string from the network goes through nb_wire_unpack. */
#ifndef NB_WIRE_H
#define NB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "nb_err.h"
#include "npubench.pb-c.h"

/* Default cap on the memory one nb_wire_unpack may allocate (cap = 0).
 * protobuf-c allocates more than the input size (a 2-byte empty sub-message
 * becomes a whole C struct), so the cap, not the input length, is what bounds
 * the work.  Recursion is bounded by the schema: no message in
 * npubench.proto contains itself, and unknown fields are skipped, not
 * parsed, so protobuf-c's depth never exceeds the schema's nesting. */
#define NB_WIRE_UNPACK_CAP_DEFAULT ((size_t)64 << 20)

/* Unpacks len bytes as the message type desc into *(T **)out_msg, allocating
 * at most cap bytes (0 = NB_WIRE_UNPACK_CAP_DEFAULT).  out_msg is the address
 * of a pointer to the generated struct:
 *     Npubench__RegisterRequest *req;
 *     nb_wire_unpack(&npubench__register_request__descriptor, p, n, 0, &req, err);
 * Errors: NB_EINVAL "malformed npubench.RegisterRequest payload (N bytes)";
 * NB_ENOMEM when len or the allocations exceed cap.  The caller frees the
 * message with nb_wire_free.  Absent strings unpack as "" (proto3), never NULL. */
nb_code nb_wire_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                       size_t cap, void *out_msg, nb_err *err);

/* Frees a message from nb_wire_unpack (any generated struct pointer); NULL ok. */
void nb_wire_free(void *msg);
/* Replaces every string field of msg (nested and repeated included) that is not UTF-8 by a
 * copy with U+FFFD for each bad byte, so the message passes nb_wire_unpack's check: for a
 * message built with malloc'ed strings (freed by free), e.g. a worker's result holding a
 * program's raw output. 0, or -1 when out of memory (that string left as it was). */
int nb_wire_sanitize_utf8(void *msg);

/* Packs a generated message into a malloc'ed buffer (*out, *len; caller
 * frees; an empty message gives *out non-NULL and *len = 0). */
nb_code nb_wire_pack(const void *msg, uint8_t **out, size_t *len, nb_err *err);

/* --- envelope authentication ---------------------------------------------
 * MAC = HMAC-SHA256(secret, canonical fields), where the canonical form
 * length-prefixes every variable field (big-endian) after a domain label, so
 * no two field tuples share an input and a request MAC never verifies as a
 * response MAC.  A NULL or "" secret means "no authentication". */
#define NB_WIRE_MAC_LEN 32
#define NB_WIRE_METHOD_MAX 128 /* longest method name accepted */

void nb_wire_request_mac(const char *secret, const Npubench__RequestEnvelope *env,
                         uint8_t mac[NB_WIRE_MAC_LEN]);
void nb_wire_response_mac(const char *secret, uint64_t request_id, int status,
                          const char *message, const uint8_t *payload, size_t len,
                          uint8_t mac[NB_WIRE_MAC_LEN]);

/* Fills *env to carry the request, sent now (sent_unix_ms = the wall clock); env points
 * into the arguments and into mac_buf (which receives the MAC when secret is set), so
 * nothing is allocated and the arguments must outlive env. */
void nb_wire_request_init(Npubench__RequestEnvelope *env, uint8_t mac_buf[NB_WIRE_MAC_LEN],
                          const char *secret, const char *method, uint64_t request_id,
                          int64_t deadline_unix_ms, const uint8_t *payload, size_t len);
void nb_wire_response_init(Npubench__ResponseEnvelope *env, uint8_t mac_buf[NB_WIRE_MAC_LEN],
                           const char *secret, uint64_t request_id, int status,
                           const char *message, const uint8_t *payload, size_t len);

/* NB_OK when env carries a valid MAC for secret, NB_EAUTH otherwise
 * (missing, wrong length, wrong value).  Constant time in the MAC value. */
nb_code nb_wire_request_verify(const Npubench__RequestEnvelope *env, const char *secret,
                               nb_err *err);
/* Recomputes env's MAC into mac_buf after its fields were changed (tests forging times). */
void nb_wire_request_seal(Npubench__RequestEnvelope *env, uint8_t mac_buf[NB_WIRE_MAC_LEN],
                          const char *secret);
nb_code nb_wire_response_verify(const Npubench__ResponseEnvelope *env, const char *secret,
                                nb_err *err);

/* --- roles ---------------------------------------------------------------
 * A server holds one key per role, as a lab separates agent tokens from user tokens: the
 * key a request's MAC verifies under is what the request may do. */
#define NB_WIRE_ROLE_CLIENT 1u /* submit, watch, query, cancel, import */
#define NB_WIRE_ROLE_WORKER 2u /* the npubench.Worker methods, nothing else */
#define NB_WIRE_ROLE_ADMIN 4u  /* reference sets; admins may do what clients do */
#define NB_WIRE_ROLES_ALL 7u
#define NB_WIRE_CLIENTS_MAX 64 /* named client keys (client identities) */
#define NB_WIRE_KEYS_MAX (3 + NB_WIRE_CLIENTS_MAX)

typedef struct nb_wire_keys {
    char *key[NB_WIRE_KEYS_MAX]; /* owned copies */
    unsigned roles[NB_WIRE_KEYS_MAX];
    const char *name[NB_WIRE_KEYS_MAX]; /* "client", "worker", "admin": for messages */
    char *client[NB_WIRE_KEYS_MAX];     /* a named client key's name (owned); NULL else */
    int n;                       /* 0: no authentication, every request has every role */
} nb_wire_keys;

/* Adds a named client key (the client role, an identity that owns its jobs) to keys that
 * nb_wire_keys_init set up with at least one key; NB_EINVAL for a repeated key or name. */
nb_code nb_wire_keys_add_client(nb_wire_keys *k, const char *name, const char *key,
                                nb_err *err);

/* Keys per role (NULL or "" = none).  Only client set: one shared key with every role.
 * Without an admin key the client key also holds the admin role.  Two roles with the
 * same key are refused (NB_EINVAL): the key would not tell them apart. */
nb_code nb_wire_keys_init(nb_wire_keys *k, const char *client, const char *worker,
                          const char *admin, nb_err *err);
void nb_wire_keys_free(nb_wire_keys *k);
/* The roles a key set grants, as text: "client", "worker", "client+admin", "shared". */
const char *nb_wire_role_name(unsigned roles);

/* Verifies env under every key of k: NB_OK with *roles and *key (the key that verified,
 * owned by k; NULL when k has none and *roles = NB_WIRE_ROLES_ALL); NB_EAUTH otherwise. */
nb_code nb_wire_request_verify_keys(const Npubench__RequestEnvelope *env, const nb_wire_keys *k,
                                    unsigned *roles, const char **key, nb_err *err);
/* The named client whose key is key (one nb_wire_request_verify_keys returned), else NULL. */
const char *nb_wire_keys_client(const nb_wire_keys *k, const char *key);

/* --- clocks ----------------------------------------------------------------
 * gRPC semantics: the timeout travels, not the sender's deadline, so a skewed clock does
 * not shorten calls; the send time bounds how long a captured request stays valid. */
#define NB_WIRE_SKEW_MAX_MS (5LL * 60 * 1000)        /* accepted clock difference, both ways */
#define NB_WIRE_TIMEOUT_MAX_MS (24LL * 60 * 60 * 1000) /* longest deadline of a request */

/* Checks env's times against the server's clock now: |now - sent| within
 * NB_WIRE_SKEW_MAX_MS (NB_EAUTH naming the skew), timeout = deadline - sent within
 * 1..NB_WIRE_TIMEOUT_MAX_MS (NB_EINVAL over the cap, NB_ETIMEOUT when none is left).
 * *deadline = the server-clock deadline now + timeout (0 when env has none).  required:
 * the server authenticates, so requests without times are refused (NB_EINVAL). */
nb_code nb_wire_request_clock(const Npubench__RequestEnvelope *env, int64_t now, int required,
                              int64_t *deadline, nb_err *err);

#endif
