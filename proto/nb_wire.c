/* nb_wire: protobuf-c with a counting allocator, and the envelope MACs.
 * The allocator fails past a cap, so hostile input cannot make unpack balloon. */
#include "nb_wire.h"

#include <stdlib.h>
#include <string.h>

#include "nb_hmac.h"
#include "nb_secret.h"
#include "nb_utf8.h"
#include "nb_time.h"

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

static int get_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *i < n && shift < 64; shift += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

/* protobuf-c hands strings over NUL-terminated, so "abc\0def" would arrive as "abc":
 * a string field holding a NUL byte is refused instead, naming the field; so is one that is
 * not UTF-8 (proto3 strings are UTF-8; protobuf-c does not check, and every JSON the service
 * writes would break on it).  Runs on bytes protobuf-c already accepted; the walk stops
 * quietly on anything it does not expect. */
static nb_code check_nul(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n,
                         int depth, nb_err *err)
{
    size_t i = 0;
    uint64_t key, v;
    while (i < n && get_varint(p, n, &i, &key)) {
        unsigned wt = (unsigned)(key & 7);
        if (wt == 0 && get_varint(p, n, &i, &v))
            continue;
        if (wt == 1 || wt == 5) {
            i += wt == 1 ? 8 : 4;
            continue;
        }
        if (wt != 2 || !get_varint(p, n, &i, &v) || v > n - i)
            return NB_OK;
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
        size_t bad = 0;
        if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + i, 0, (size_t)v))
            return nb_err_set(err, NB_EINVAL, "%s.%s: contains a NUL byte", d->short_name,
                              f->name);
        if (f && f->type == PROTOBUF_C_TYPE_STRING &&
            !nb_utf8_valid((const char *)p + i, (size_t)v, &bad))
            return nb_err_set(err, NB_EINVAL, "%s.%s: invalid UTF-8 at byte %zu", d->short_name,
                              f->name, bad);
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < 32) {
            nb_code rc = check_nul(f->descriptor, p + i, (size_t)v, depth + 1, err);
            if (rc)
                return rc;
        }
        i += (size_t)v;
    }
    return NB_OK;
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
    nb_code rc = len ? check_nul(desc, data, len, 0, err) : NB_OK;
    if (rc) {
        protobuf_c_message_free_unpacked(m, NULL);
        return rc;
    }
    memcpy(out_msg, &m, sizeof m);
    return NB_OK;
}

/* Replaces the malloc'ed string at *sp by its sanitized copy when it is not UTF-8. */
static int fix_string(char **sp)
{
    if (!*sp || nb_utf8_valid(*sp, strlen(*sp), NULL))
        return 0;
    char *clean = nb_utf8_sanitize(*sp, strlen(*sp));
    if (!clean)
        return -1;
    free(*sp);
    *sp = clean;
    return 0;
}

int nb_wire_sanitize_utf8(void *msg)
{
    ProtobufCMessage *m = msg;
    if (!m)
        return 0;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    int rc = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char *base = (char *)m + f->offset;
        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        /* a oneof member is there only when its case says so (the members share memory) */
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(uint32_t *)((char *)m + f->quantifier_offset) != f->id)
            continue;
        size_t n = 1;
        void **items = (void **)base;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            n = *(size_t *)((char *)m + f->quantifier_offset);
            items = *(void ***)base;
        }
        for (size_t k = 0; k < n && items; k++) {
            if (f->type == PROTOBUF_C_TYPE_STRING)
                rc |= items[k] != (void *)protobuf_c_empty_string ? fix_string((char **)&items[k])
                                                                   : 0;
            else
                rc |= nb_wire_sanitize_utf8(items[k]);
        }
    }
    return rc ? -1 : 0;
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

void nb_wire_request_mac(const char *secret, const Npubench__RequestEnvelope *env,
                         uint8_t mac[NB_WIRE_MAC_LEN])
{
    static const char label[] = "npubench.rpc.v2 request";
    const char *method = env->method;
    nb_hmac_ctx h;
    nb_hmac_sha256_init(&h, secret ? secret : "", secret ? strlen(secret) : 0);
    put_bytes(&h, label, sizeof label - 1);
    put_bytes(&h, method ? method : "", method ? strlen(method) : 0);
    put_u64(&h, env->request_id);
    put_u64(&h, (uint64_t)env->deadline_unix_ms);
    put_u64(&h, (uint64_t)env->sent_unix_ms);
    put_bytes(&h, env->payload.data, env->payload.len);
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
    env->sent_unix_ms = nb_wall_ms();
    nb_wire_request_seal(env, mac_buf, secret);
}

void nb_wire_request_seal(Npubench__RequestEnvelope *env, uint8_t mac_buf[NB_WIRE_MAC_LEN],
                          const char *secret)
{
    env->mac.data = NULL;
    env->mac.len = 0;
    if (has_secret(secret)) {
        nb_wire_request_mac(secret, env, mac_buf);
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
    nb_wire_request_mac(secret, env, want);
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

/* --- roles -------------------------------------------------------------- */

static nb_code keys_add(nb_wire_keys *k, const char *name, const char *key, unsigned roles,
                        nb_err *err)
{
    if (!has_secret(key))
        return NB_OK;
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->key[i], key))
            return nb_err_set(err, NB_EINVAL,
                              "the %s key and the %s key are the same: give each role its own",
                              k->name[i], name);
    if (!(k->key[k->n] = strdup(key)))
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    k->name[k->n] = name;
    k->roles[k->n++] = roles;
    return NB_OK;
}

nb_code nb_wire_keys_init(nb_wire_keys *k, const char *client, const char *worker,
                          const char *admin, nb_err *err)
{
    memset(k, 0, sizeof *k);
    int shared = !has_secret(worker) && !has_secret(admin);
    unsigned client_roles = shared                ? NB_WIRE_ROLES_ALL
                            : has_secret(admin)   ? NB_WIRE_ROLE_CLIENT
                                                  : NB_WIRE_ROLE_CLIENT | NB_WIRE_ROLE_ADMIN;
    nb_code rc;
    if ((rc = keys_add(k, "client", client, client_roles, err)) ||
        (rc = keys_add(k, "worker", worker, NB_WIRE_ROLE_WORKER, err)) ||
        (rc = keys_add(k, "admin", admin, NB_WIRE_ROLE_ADMIN | NB_WIRE_ROLE_CLIENT, err)))
        nb_wire_keys_free(k);
    return rc;
}

nb_code nb_wire_keys_add_client(nb_wire_keys *k, const char *name, const char *key,
                                nb_err *err)
{
    if (!k->n)
        return nb_err_set(err, NB_EINVAL, "client key '%s': named clients need the lab keys "
                          "set (--secret-file)", name);
    if (!name || !*name || !has_secret(key))
        return nb_err_set(err, NB_EINVAL, "a named client key needs a name and a key");
    if (k->n >= NB_WIRE_KEYS_MAX)
        return nb_err_set(err, NB_EINVAL, "client key '%s': at most %d named clients", name,
                          NB_WIRE_CLIENTS_MAX);
    for (int i = 0; i < k->n; i++)
        if (k->client[i] && !strcmp(k->client[i], name))
            return nb_err_set(err, NB_EINVAL, "client key '%s': the name is given twice", name);
    char *nm = strdup(name);
    if (!nm)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    int at = k->n;
    nb_code rc = keys_add(k, nm, key, NB_WIRE_ROLE_CLIENT, err);
    if (rc || k->n == at) {
        free(nm);
        return rc;
    }
    k->client[at] = nm;
    return NB_OK;
}

const char *nb_wire_keys_client(const nb_wire_keys *k, const char *key)
{
    for (int i = 0; key && i < k->n; i++)
        if (k->key[i] == key)
            return k->client[i];
    return NULL;
}

void nb_wire_keys_free(nb_wire_keys *k)
{
    for (int i = 0; i < k->n; i++) {
        nb_secret_free(k->key[i]);
        free(k->client[i]);
    }
    memset(k, 0, sizeof *k);
}

const char *nb_wire_role_name(unsigned roles)
{
    switch (roles) {
    case NB_WIRE_ROLE_CLIENT: return "client";
    case NB_WIRE_ROLE_WORKER: return "worker";
    case NB_WIRE_ROLE_ADMIN: return "admin";
    case NB_WIRE_ROLE_CLIENT | NB_WIRE_ROLE_ADMIN: return "client+admin";
    case NB_WIRE_ROLES_ALL: return "shared";
    default: return "no";
    }
}

nb_code nb_wire_request_verify_keys(const Npubench__RequestEnvelope *env, const nb_wire_keys *k,
                                    unsigned *roles, const char **key, nb_err *err)
{
    *roles = 0;
    *key = NULL;
    if (!k->n) {
        *roles = NB_WIRE_ROLES_ALL;
        return NB_OK;
    }
    nb_code rc = NB_EAUTH;
    for (int i = 0; i < k->n; i++) {
        if (nb_wire_request_verify(env, k->key[i], err) == NB_OK) {
            *roles = k->roles[i];
            *key = k->key[i];
            nb_err_clear(err);
            return NB_OK;
        }
    }
    /* err holds the last key's reason, which reads the same for every key */
    return rc;
}

/* --- clocks ------------------------------------------------------------- */

nb_code nb_wire_request_clock(const Npubench__RequestEnvelope *env, int64_t now, int required,
                              int64_t *deadline, nb_err *err)
{
    *deadline = 0;
    const char *m = env->method;
    if (!env->sent_unix_ms || !env->deadline_unix_ms) {
        if (required)
            return nb_err_set(err, NB_EINVAL,
                              "%.128s: request has no send time or deadline; an authenticated "
                              "server requires both",
                              m);
        /* An unauthenticated peer without a send time: its deadline is all there is. */
        if (env->deadline_unix_ms && now > env->deadline_unix_ms)
            return nb_err_set(err, NB_ETIMEOUT, "%.128s: deadline passed %lld ms ago", m,
                              (long long)(now - env->deadline_unix_ms));
        *deadline = env->deadline_unix_ms;
        return NB_OK;
    }
    int64_t skew = env->sent_unix_ms - now;
    if (skew > NB_WIRE_SKEW_MAX_MS || skew < -NB_WIRE_SKEW_MAX_MS)
        return nb_err_set(err, NB_EAUTH,
                          "%.128s: the sender's clock is %.1f s %s the server's; the accepted "
                          "skew is +-%lld s (synchronise the clocks, e.g. with NTP)",
                          m, (double)(skew < 0 ? -skew : skew) / 1000.0,
                          skew < 0 ? "behind" : "ahead of", NB_WIRE_SKEW_MAX_MS / 1000);
    int64_t timeout = env->deadline_unix_ms - env->sent_unix_ms;
    if (timeout > NB_WIRE_TIMEOUT_MAX_MS)
        return nb_err_set(err, NB_EINVAL,
                          "%.128s: deadline %lld s after the send time exceeds the limit of "
                          "%lld s",
                          m, (long long)(timeout / 1000), NB_WIRE_TIMEOUT_MAX_MS / 1000);
    if (timeout <= 0)
        return nb_err_set(err, NB_ETIMEOUT, "%.128s: deadline passed %lld ms before the send time",
                          m, (long long)-timeout);
    *deadline = now + timeout;
    return NB_OK;
}
