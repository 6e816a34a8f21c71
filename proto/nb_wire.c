/* nb_wire: protobuf-c with a counting allocator, and the envelope MACs.
 * The allocator fails past a cap, so hostile input cannot make unpack balloon. */
#include "nb_wire.h"

#include <stdlib.h>
#include <string.h>

#include "nb_hmac.h"

typedef struct bounded {
    size_t used, cap;
    int over;     /* an allocation was refused for the cap */
    int oom;      /* malloc itself failed */
} bounded;

static void *bounded_alloc(void *data, size_t n)
{
    bounded *b = data;
    if (n > b->cap - b->used) {
        b->over = 1;
        return NULL;
    }
    void *p = malloc(n ? n : 1);
    if (!p) {
        b->oom = 1;
        return NULL;
    }
    b->used += n;
    return p;
}

/* Blocks are plain malloc blocks, so nb_wire_free can use the system
 * allocator; the count only matters while unpacking. */
static void bounded_free(void *data, void *p)
{
    (void)data;
    free(p);
}

nb_code nb_wire_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                       size_t cap, void *out_msg, nb_err *err)
{
    if (!desc || desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || !out_msg)
        return nb_err_set(err, NB_EINVAL, "nb_wire_unpack: bad descriptor or output");
    ProtobufCMessage *none = NULL;
    memcpy(out_msg, &none, sizeof none);
    if (!data && len)
        return nb_err_set(err, NB_EINVAL, "%s payload: NULL data with length %zu", desc->name,
                          len);
    if (cap == 0)
        cap = NB_WIRE_UNPACK_CAP_DEFAULT;
    if (len > cap)
        return nb_err_set(err, NB_ENOMEM, "%s payload of %zu bytes exceeds the %zu-byte limit",
                          desc->name, len, cap);
    static const uint8_t empty[1];
    bounded b = {0, cap, 0, 0};
    ProtobufCAllocator a = {bounded_alloc, bounded_free, &b};
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &a, len, len ? data : empty);
    if (!m) {
        if (b.over)
            return nb_err_set(err, NB_ENOMEM,
                              "%s payload (%zu bytes) needs more than the %zu-byte unpack limit",
                              desc->name, len, cap);
        if (b.oom)
            return nb_err_set(err, NB_ENOMEM, "out of memory unpacking %s payload (%zu bytes)",
                              desc->name, len);
        return nb_err_set(err, NB_EINVAL, "malformed %s payload (%zu bytes)", desc->name, len);
    }
    memcpy(out_msg, &m, sizeof m);
    return NB_OK;
}

void nb_wire_free(void *msg)
{
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
}

nb_code nb_wire_pack(const void *msg, uint8_t **out, size_t *len, nb_err *err)
{
    const ProtobufCMessage *m = msg;
    *out = NULL;
    *len = 0;
    if (!m || !m->descriptor || m->descriptor->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        return nb_err_set(err, NB_EINVAL, "nb_wire_pack: not a protobuf-c message");
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        return nb_err_set(err, NB_ENOMEM, "out of memory packing %s (%zu bytes)",
                          m->descriptor->name, n);
    size_t w = protobuf_c_message_pack(m, p);
    if (w != n) {
        free(p);
        return nb_err_set(err, NB_EINTERNAL, "packing %s wrote %zu of %zu bytes",
                          m->descriptor->name, w, n);
    }
    *out = p;
    *len = n;
    return NB_OK;
}

/* --- MACs --------------------------------------------------------------- */

static void put_u64(nb_hmac_ctx *h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (56 - 8 * i));
    nb_hmac_sha256_update(h, b, sizeof b);
}

static void put_bytes(nb_hmac_ctx *h, const void *p, size_t n)
{
    put_u64(h, (uint64_t)n);
    if (n)
        nb_hmac_sha256_update(h, p, n);
}

static int has_secret(const char *secret)
{
    return secret && secret[0];
}

void nb_wire_request_mac(const char *secret, const char *method, uint64_t request_id,
                         int64_t deadline_unix_ms, const uint8_t *payload, size_t len,
                         uint8_t mac[NB_WIRE_MAC_LEN])
{
    static const char label[] = "npubench.rpc.v1 request";
    nb_hmac_ctx h;
    nb_hmac_sha256_init(&h, secret ? secret : "", secret ? strlen(secret) : 0);
    put_bytes(&h, label, sizeof label - 1);
    put_bytes(&h, method ? method : "", method ? strlen(method) : 0);
    put_u64(&h, request_id);
    put_u64(&h, (uint64_t)deadline_unix_ms);
    put_bytes(&h, payload, len);
    nb_hmac_sha256_final(&h, mac);
}

void nb_wire_response_mac(const char *secret, uint64_t request_id, int status,
                          const char *message, const uint8_t *payload, size_t len,
                          uint8_t mac[NB_WIRE_MAC_LEN])
{
    static const char label[] = "npubench.rpc.v1 response";
    nb_hmac_ctx h;
    nb_hmac_sha256_init(&h, secret ? secret : "", secret ? strlen(secret) : 0);
    put_bytes(&h, label, sizeof label - 1);
    put_u64(&h, request_id);
    put_u64(&h, (uint64_t)(int64_t)status);
    put_bytes(&h, message ? message : "", message ? strlen(message) : 0);
    put_bytes(&h, payload, len);
    nb_hmac_sha256_final(&h, mac);
}

void nb_wire_request_init(Npubench__RequestEnvelope *env, uint8_t mac_buf[NB_WIRE_MAC_LEN],
                          const char *secret, const char *method, uint64_t request_id,
                          int64_t deadline_unix_ms, const uint8_t *payload, size_t len)
{
    npubench__request_envelope__init(env);
    env->method = (char *)method;
    env->request_id = request_id;
    env->deadline_unix_ms = deadline_unix_ms;
    env->payload.data = (uint8_t *)payload;
    env->payload.len = len;
    if (has_secret(secret)) {
        nb_wire_request_mac(secret, method, request_id, deadline_unix_ms, payload, len, mac_buf);
        env->mac.data = mac_buf;
        env->mac.len = NB_WIRE_MAC_LEN;
    }
}

void nb_wire_response_init(Npubench__ResponseEnvelope *env, uint8_t mac_buf[NB_WIRE_MAC_LEN],
                           const char *secret, uint64_t request_id, int status,
                           const char *message, const uint8_t *payload, size_t len)
{
    npubench__response_envelope__init(env);
    env->request_id = request_id;
    env->status = (Npubench__StatusCode)status;
    env->message = (char *)(message ? message : "");
    env->payload.data = (uint8_t *)payload;
    env->payload.len = len;
    if (has_secret(secret)) {
        nb_wire_response_mac(secret, request_id, status, env->message, payload, len, mac_buf);
        env->mac.data = mac_buf;
        env->mac.len = NB_WIRE_MAC_LEN;
    }
}

nb_code nb_wire_request_verify(const Npubench__RequestEnvelope *env, const char *secret,
                               nb_err *err)
{
    if (!has_secret(secret))
        return NB_OK;
    if (env->mac.len != NB_WIRE_MAC_LEN)
        return nb_err_set(err, NB_EAUTH,
                          "%s: request carries no valid MAC (%zu bytes, want %d): "
                          "the client has no or a different secret",
                          env->method, env->mac.len, NB_WIRE_MAC_LEN);
    uint8_t want[NB_WIRE_MAC_LEN];
    nb_wire_request_mac(secret, env->method, env->request_id, env->deadline_unix_ms,
                        env->payload.data, env->payload.len, want);
    if (!nb_hmac_equal(want, env->mac.data, NB_WIRE_MAC_LEN))
        return nb_err_set(err, NB_EAUTH,
                          "%s: request MAC does not verify: the client's secret differs",
                          env->method);
    return NB_OK;
}

nb_code nb_wire_response_verify(const Npubench__ResponseEnvelope *env, const char *secret,
                                nb_err *err)
{
    if (!has_secret(secret))
        return NB_OK;
    if (env->mac.len != NB_WIRE_MAC_LEN)
        return nb_err_set(err, NB_EAUTH,
                          "response carries no MAC: the server has no secret set "
                          "(both ends need the same secret)");
    uint8_t want[NB_WIRE_MAC_LEN];
    nb_wire_response_mac(secret, env->request_id, (int)env->status, env->message,
                         env->payload.data, env->payload.len, want);
    if (!nb_hmac_equal(want, env->mac.data, NB_WIRE_MAC_LEN))
        return nb_err_set(err, NB_EAUTH,
                          "response MAC does not verify: the server's secret differs");
    return NB_OK;
}
