/* nb_rpc_client: one req0 socket per client, one nng context per call, so calls from many
 * threads overlap; envelopes carry a MAC, a deadline and the caller's request id. */
#include "nb_rpc_client.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "nb_time.h"

#define DEFAULT_TIMEOUT_MS 30000

struct nb_rpc_client {
    nng_socket sock;
    nng_dialer dialer;
    nng_tls_config *tls;
    char *url;
    char *secret;
    size_t max_msg;
    int timeout_ms;
    int resend_ms;
    uint64_t id_base;
    uint64_t id_next; /* __atomic */
};

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
        return v;
    /* No entropy source: still distinct per process and per open. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    static uint64_t salt;
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 48) ^
                 __atomic_add_fetch(&salt, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

uint64_t nb_rpc_client_new_id(nb_rpc_client *cli)
{
    uint64_t v;
    do
        v = cli->id_base + __atomic_fetch_add(&cli->id_next, 1, __ATOMIC_RELAXED);
    while (v == 0); /* 0 marks "no request" in error replies */
    return v;
}

const char *nb_rpc_client_url(const nb_rpc_client *cli)
{
    return cli ? cli->url : NULL;
}

enum { DIAL_RETRY_MS = 500 };

/* One dialer on cl->sock, started: *rv is nng's answer (0: connected, or dialling in the
 * background). A non-zero return is a set-up error, with err set. */
static nb_code dial_once(nb_rpc_client *cl, const char *url, const nb_rpc_opts *o, int *rv,
                         nb_err *err)
{
    *rv = 0;
    int e;
    if ((e = nng_dialer_create(&cl->dialer, cl->sock, url)))
        return nb_rpc_nng_fail(err, NB_EINVAL, e, "%s: cannot create dialer", url);
    nng_dialer_set_size(cl->dialer, NNG_OPT_RECVMAXSZ, cl->max_msg);
    if (cl->tls && (e = nng_dialer_set_ptr(cl->dialer, NNG_OPT_TLS_CONFIG, cl->tls)))
        return nb_rpc_nng_fail(err, NB_EINTERNAL, e, "%s: setting TLS config", url);
    *rv = nng_dialer_start(cl->dialer, o->background_dial ? NNG_FLAG_NONBLOCK : 0);
    return NB_OK;
}

nb_code nb_rpc_client_open(const char *url, const nb_rpc_opts *opts, nb_rpc_client **out,
                           nb_err *err)
{
    *out = NULL;
    const nb_rpc_opts *o;
    nb_code c = nb_rpc_check_open(url, opts, &o, err);
    if (c)
        return c;
    if (o->timeout_ms < 0 || o->resend_ms < 0)
        return nb_err_set(err, NB_EINVAL, "%s: negative opts.timeout_ms or opts.resend_ms", url);
    nb_rpc_client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return nb_err_set(err, NB_ENOMEM, "out of memory opening %s", url);
    cl->sock = (nng_socket)NNG_SOCKET_INITIALIZER;
    cl->max_msg = o->max_msg_bytes ? o->max_msg_bytes : NB_RPC_MAX_MSG_DEFAULT;
    cl->timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    cl->resend_ms = o->resend_ms;
    cl->id_base = random_u64();
    if (!(cl->url = strdup(url)) ||
        (o->secret && o->secret[0] && !(cl->secret = strdup(o->secret)))) {
        c = nb_err_set(err, NB_ENOMEM, "out of memory opening %s", url);
        goto fail;
    }
    if ((c = nb_rpc_open_socket(url, o, false, &cl->tls, &cl->sock, cl->max_msg, err)))
        goto fail;
    int rv;
    /* Back off up to 2 s between reconnects instead of nng's fixed 100 ms. */
    nng_socket_set_ms(cl->sock, NNG_OPT_RECONNMINT, 100);
    nng_socket_set_ms(cl->sock, NNG_OPT_RECONNMAXT, 2000);
    /* A refused (or, in the handshake, dropped) ipc:// dial is tried again for up to
     * DIAL_RETRY_MS: the server listens anew on the same path when nng 1.5.2's listener gave
     * up (nb_rpc_server.c), and a client that dials in that gap must not fail. A failed synchronous start leaves
     * nng's dialer started and idle, so each try takes a new one. */
    double give_up = nb_now_ms() + DIAL_RETRY_MS;
    for (;;) {
        if ((c = dial_once(cl, url, o, &rv, err)) || rv == 0)
            break;
        if (strncmp(url, "ipc://", 6) || o->background_dial ||
            (rv != NNG_ECONNREFUSED && rv != NNG_ENOENT && rv != NNG_ECONNSHUT &&
             rv != NNG_ECONNRESET && rv != NNG_ECLOSED) ||
            nb_now_ms() >= give_up)
            break;
        nng_dialer_close(cl->dialer);
        nb_sleep_ms(20);
    }
    if (c)
        goto fail;
    if (rv) {
        const char *hint = "";
        if (nb_rpc_url_is_tls(url) && (rv == NNG_ECRYPTO || rv == NNG_EPEERAUTH))
            hint = " (TLS handshake failed: is the server's certificate signed by "
                   "opts.tls_ca_file, for the name in opts.tls_server_name or the URL?)";
        else if (nb_rpc_url_is_tls(url) && rv == NNG_ECONNSHUT)
            hint = " (the server ended the TLS handshake: does it require a client "
                   "certificate, opts.tls_cert_key_file?)";
        else if (rv == NNG_ECONNREFUSED)
            hint = " (is the server running?)";
        c = nb_err_set(err, NB_EUNAVAIL, "%s: cannot connect: %s%s", url, nng_strerror(rv),
                       hint);
        goto fail;
    }
    *out = cl;
    return NB_OK;
fail:
    nb_rpc_client_close(cl);
    return c;
}

void nb_rpc_client_close(nb_rpc_client *cli)
{
    if (!cli)
        return;
    if (nng_socket_id(cli->sock) > 0)
        nng_close(cli->sock);
    if (cli->tls)
        nng_tls_config_free(cli->tls);
    free(cli->url);
    nb_rpc_secret_free(cli->secret);
    free(cli);
}

/* Maps a transport failure of one call to (status, nb_code, message). */
static nb_code call_fail(nb_rpc_client *cli, const char *method, int rv, int sending,
                         int timeout_ms, int *status, nb_err *err)
{
    switch (rv) {
    case NNG_ETIMEDOUT:
        *status = NB_RPC_DEADLINE_EXCEEDED;
        if (sending)
            return nb_err_set(err, NB_ETIMEOUT,
                              "%s: no connection to %s within %d ms (is the server up?)",
                              method, cli->url, timeout_ms);
        return nb_err_set(err, NB_ETIMEOUT, "%s: no response from %s within %d ms", method,
                          cli->url, timeout_ms);
    case NNG_ENOMEM:
        *status = NB_RPC_RESOURCE_EXHAUSTED;
        return nb_rpc_nng_fail(err, NB_ENOMEM, rv, "%s: %s", method, cli->url);
    default:
        *status = NB_RPC_UNAVAILABLE;
        return nb_rpc_nng_fail(err, NB_EUNAVAIL, rv, "%s: %s %s", method,
                               sending ? "sending to" : "waiting for", cli->url);
    }
}

/* The request envelope, MAC'ed and packed into an nng message of at most max_msg bytes. */
static nb_code pack_request(nb_rpc_client *cli, uint64_t request_id, const char *method,
                            const void *req, size_t len, int timeout_ms, nng_msg **out,
                            int *status, nb_err *err)
{
    Npubench__RequestEnvelope env;
    uint8_t mac[NB_WIRE_MAC_LEN];
    nb_wire_request_init(&env, mac, cli->secret, method, request_id,
                         nb_wall_ms() + timeout_ms, req, len);
    size_t n = protobuf_c_message_get_packed_size(&env.base);
    if (n > cli->max_msg) {
        *status = NB_RPC_RESOURCE_EXHAUSTED;
        return nb_err_set(err, NB_ENOMEM, "%s: request of %zu bytes exceeds the %zu-byte limit",
                          method, n, cli->max_msg);
    }
    int rv;
    if ((rv = nng_msg_alloc(out, n))) {
        *status = NB_RPC_RESOURCE_EXHAUSTED;
        return nb_rpc_nng_fail(err, NB_ENOMEM, rv, "%s: allocating %zu bytes", method, n);
    }
    protobuf_c_message_pack(&env.base, nng_msg_body(*out));
    return NB_OK;
}

/* Sends m (consumed) on a context of its own and waits for the reply within timeout_ms in
 * all; *reply is the raw answer. */
static nb_code exchange(nb_rpc_client *cli, const char *method, nng_msg *m, int timeout_ms,
                        nng_msg **reply, int *status, nb_err *err)
{
    *reply = NULL;
    nng_ctx ctx;
    nng_aio *aio = NULL;
    int rv;
    if ((rv = nng_ctx_open(&ctx, cli->sock))) {
        nng_msg_free(m);
        return call_fail(cli, method, rv, 1, timeout_ms, status, err);
    }
    /* A resend timer shorter than the call would run slow handlers twice (the
     * cache absorbs it for mutating methods, not for read-only ones), so by
     * default only a reconnect resends, and it does so at once. */
    int resend = cli->resend_ms > 0 ? cli->resend_ms
                 : timeout_ms > 0x7fffffff - 1000 ? 0x7fffffff
                                                  : timeout_ms + 1000;
    nng_ctx_set_ms(ctx, NNG_OPT_REQ_RESENDTIME, resend);
    if ((rv = nng_aio_alloc(&aio, NULL, NULL))) {
        nng_msg_free(m);
        nng_ctx_close(ctx);
        return call_fail(cli, method, rv, 1, timeout_ms, status, err);
    }
    double t0 = nb_now_ms();
    nng_aio_set_timeout(aio, timeout_ms);
    nng_aio_set_msg(aio, m);
    nng_ctx_send(ctx, aio);
    nng_aio_wait(aio);
    nb_code c = NB_OK;
    if ((rv = nng_aio_result(aio))) {
        if (nng_aio_get_msg(aio))
            nng_msg_free(nng_aio_get_msg(aio));
        c = call_fail(cli, method, rv, 1, timeout_ms, status, err);
    } else {
        double left = timeout_ms - (nb_now_ms() - t0);
        nng_aio_set_timeout(aio, left < 1 ? 1 : (nng_duration)left);
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        if ((rv = nng_aio_result(aio)))
            c = call_fail(cli, method, rv, 0, timeout_ms, status, err);
        else
            *reply = nng_aio_get_msg(aio);
    }
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    return c;
}

/* The response envelope of reply: decodable, for this request, MAC'ed by the server. */
static nb_code check_response(nb_rpc_client *cli, uint64_t request_id, const char *method,
                              nng_msg *reply, Npubench__ResponseEnvelope **renv, int *status,
                              nb_err *err)
{
    size_t rn = nng_msg_len(reply);
    nb_code c = nb_wire_unpack(&npubench__response_envelope__descriptor, nng_msg_body(reply),
                               rn, rn + NB_RPC_ENVELOPE_UNPACK_SLACK, renv, err);
    if (c) {
        *status = NB_RPC_DATA_LOSS;
        return nb_err_prefix(err, "%s: response from %s: ", method, cli->url);
    }
    const Npubench__ResponseEnvelope *r = *renv;
    if (r->request_id != request_id && r->request_id != 0) {
        *status = NB_RPC_DATA_LOSS;
        return nb_err_set(err, NB_EMISMATCH, "%s: response for request %llu, expected %llu",
                          method, (unsigned long long)r->request_id,
                          (unsigned long long)request_id);
    }
    nb_err ve = {0};
    if (nb_wire_response_verify(r, cli->secret, &ve) != NB_OK) {
        *status = NB_RPC_UNAUTHENTICATED;
        if ((int)r->status == NB_RPC_UNAUTHENTICATED)
            return nb_err_set(err, NB_EAUTH, "%s: %s refused our request: %s", method, cli->url,
                              r->message);
        return nb_err_set(err, NB_EAUTH, "%s: %s: %s", method, cli->url, ve.msg);
    }
    return NB_OK;
}

/* The server's message and payload into the caller's malloc'ed copies. */
static nb_code copy_response(const Npubench__ResponseEnvelope *renv, const char *method,
                             char **msg, uint8_t **resp, size_t *resp_len, int *status,
                             nb_err *err)
{
    if (msg && !(*msg = strdup(renv->message))) {
        *status = NB_RPC_RESOURCE_EXHAUSTED;
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory copying the response", method);
    }
    if (resp && renv->payload.len) {
        if (!(*resp = malloc(renv->payload.len))) {
            if (msg) {
                free(*msg);
                *msg = NULL;
            }
            *status = NB_RPC_RESOURCE_EXHAUSTED;
            return nb_err_set(err, NB_ENOMEM, "%s: out of memory copying %zu response bytes",
                              method, renv->payload.len);
        }
        memcpy(*resp, renv->payload.data, renv->payload.len);
        if (resp_len)
            *resp_len = renv->payload.len;
    }
    return NB_OK;
}

nb_code nb_rpc_call_id(nb_rpc_client *cli, uint64_t request_id, const char *method,
                       const void *req, size_t len, int timeout_ms, int *status, char **msg,
                       uint8_t **resp, size_t *resp_len, nb_err *err)
{
    int st_local;
    if (!status)
        status = &st_local;
    *status = NB_RPC_INTERNAL;
    if (msg)
        *msg = NULL;
    if (resp)
        *resp = NULL;
    if (resp_len)
        *resp_len = 0;
    if (!cli || !method || (!req && len))
        return nb_err_set(err, NB_EINVAL, "nb_rpc_call: NULL argument");
    if (!nb_rpc_method_ok(method)) {
        *status = NB_RPC_INVALID_ARGUMENT;
        return nb_err_set(err, NB_EINVAL, "nb_rpc_call: bad method name '%.*s'",
                          NB_WIRE_METHOD_MAX, method);
    }
    if (timeout_ms <= 0)
        timeout_ms = cli->timeout_ms;
    nng_msg *m, *reply;
    nb_code c = pack_request(cli, request_id, method, req, len, timeout_ms, &m, status, err);
    if (c || (c = exchange(cli, method, m, timeout_ms, &reply, status, err)))
        return c;
    Npubench__ResponseEnvelope *renv = NULL;
    if ((c = check_response(cli, request_id, method, reply, &renv, status, err)))
        goto done;
    int rs = nb_rpc_status_valid((int)renv->status) ? (int)renv->status : NB_RPC_UNKNOWN;
    *status = rs;
    if ((c = copy_response(renv, method, msg, resp, resp_len, status, err)))
        goto done;
    if (rs != NB_RPC_OK)
        c = nb_err_set(err, nb_rpc_code_from_status(rs), "%s: %s: %s", method,
                       nb_rpc_status_name(rs), renv->message[0] ? renv->message : "(no message)");
done:
    nb_wire_free(renv);
    nng_msg_free(reply);
    return c;
}

nb_code nb_rpc_call(nb_rpc_client *cli, const char *method, const void *req, size_t len,
                    int timeout_ms, int *status, char **msg, uint8_t **resp, size_t *resp_len,
                    nb_err *err)
{
    if (!cli)
        return nb_err_set(err, NB_EINVAL, "nb_rpc_call: NULL client");
    return nb_rpc_call_id(cli, nb_rpc_client_new_id(cli), method, req, len, timeout_ms, status,
                          msg, resp, resp_len, err);
}

nb_code nb_rpc_call_pb_id(nb_rpc_client *cli, uint64_t request_id, const char *method,
                          const void *req_msg, const ProtobufCMessageDescriptor *resp_desc,
                          int timeout_ms, void *resp_out, int *status, char **msg,
                          nb_err *err)
{
    int st_local;
    if (!status)
        status = &st_local;
    *status = NB_RPC_INTERNAL;
    if (msg)
        *msg = NULL;
    if (resp_desc && !resp_out)
        return nb_err_set(err, NB_EINVAL, "nb_rpc_call_pb: NULL argument");
    if (resp_out) {
        ProtobufCMessage *none = NULL;
        memcpy(resp_out, &none, sizeof none);
    }
    uint8_t *buf, *rb = NULL;
    size_t n, rn = 0;
    nb_code c = nb_wire_pack(req_msg, &buf, &n, err);
    if (c)
        return nb_err_prefix(err, "%s: ", method);
    if (!request_id)
        request_id = nb_rpc_client_new_id(cli);
    c = nb_rpc_call_id(cli, request_id, method, buf, n, timeout_ms, status, msg, &rb, &rn, err);
    free(buf);
    if (c == NB_OK && resp_desc && (c = nb_wire_unpack(resp_desc, rb, rn, 0, resp_out, err))) {
        *status = NB_RPC_DATA_LOSS;
        nb_err_prefix(err, "%s: response: ", method);
    }
    free(rb);
    return c;
}

nb_code nb_rpc_call_pb(nb_rpc_client *cli, const char *method, const void *req_msg,
                       const ProtobufCMessageDescriptor *resp_desc, int timeout_ms,
                       void *resp_out, int *status, nb_err *err)
{
    if (!resp_out || !resp_desc) {
        if (status)
            *status = NB_RPC_INTERNAL;
        return nb_err_set(err, NB_EINVAL, "nb_rpc_call_pb: NULL argument");
    }
    return nb_rpc_call_pb_id(cli, 0, method, req_msg, resp_desc, timeout_ms, resp_out, status,
                             NULL, err);
}

nb_code nb_rpc_health_check(nb_rpc_client *cli, const char *service_name, int timeout_ms,
                            int *serving, int *status, nb_err *err)
{
    Npubench__HealthCheckRequest r = NPUBENCH__HEALTH_CHECK_REQUEST__INIT;
    r.service = (char *)(service_name ? service_name : "");
    Npubench__HealthCheckResponse *hr;
    if (serving)
        *serving = NPUBENCH__HEALTH_CHECK_RESPONSE__SERVING_STATUS__UNKNOWN;
    nb_code c = nb_rpc_call_pb(cli, NB_RPC_HEALTH_CHECK, &r,
                               &npubench__health_check_response__descriptor, timeout_ms, &hr,
                               status, err);
    if (c)
        return c;
    if (serving)
        *serving = hr->status;
    nb_wire_free(hr);
    return NB_OK;
}
