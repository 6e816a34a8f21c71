/* nb_rpc_server: rep0 contexts hand received requests to a pool of handler threads; each
 * request is checked (size, MAC, deadline, method), deduplicated, run and answered. */
#include "nb_rpc_server.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>

#include "nb_hash.h"
#include "nb_replay.h"
#include "nb_rpc_cache.h"
#include "nb_rpc_pipes.h"
#include "nb_time.h"
#include "nb_wire.h"

enum {
    DEFAULT_CONTEXTS = 64,
    DEFAULT_THREADS = 8,
    DEFAULT_CACHE_ENTRIES = 4096,
    DEFAULT_MAX_CONNS = 512,   /* well under the usual 1,024 descriptors */
    DEFAULT_IDLE_MS = 120000,  /* workers speak every second, long polls last 10 s at most */
    MAX_CONTEXTS = 4096,
    MAX_THREADS = 1024
};
#define DEFAULT_CACHE_BYTES ((size_t)64 << 20)

/* ------------------------------------------------------------- replies */

nb_rpc_status nb_rpc_reply_status(nb_rpc_reply *reply, nb_rpc_status status, const char *fmt,
                                  ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reply->message, sizeof reply->message, fmt, ap);
    va_end(ap);
    return status;
}

nb_rpc_status nb_rpc_reply_err(nb_rpc_reply *reply, const nb_err *err)
{
    snprintf(reply->message, sizeof reply->message, "%s", err->msg);
    nb_rpc_status s = nb_rpc_status_from_code(err->code);
    /* A handler that failed without saying why still must not answer OK. */
    return s == NB_RPC_OK ? NB_RPC_INTERNAL : s;
}

nb_rpc_status nb_rpc_reply_pack(nb_rpc_reply *reply, const void *msg)
{
    nb_err e = {0};
    free(reply->payload);
    reply->payload = NULL;
    reply->len = 0;
    if (nb_wire_pack(msg, &reply->payload, &reply->len, &e) != NB_OK)
        return nb_rpc_reply_err(reply, &e);
    return NB_RPC_OK;
}

/* ------------------------------------------------------------- helpers */

/* Network bytes quoted in a message: printable ASCII only, bounded. */
static void sanitize(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap && i < NB_WIRE_METHOD_MAX; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[i] = '\0';
}

/* ------------------------------------------------------------- server */

typedef struct handler {
    char *method;
    nb_rpc_handler fn;
    void *user;
    unsigned flags;
} handler;

typedef struct service {
    char *name;
    bool serving;
} service;

typedef struct srv_ctx {
    nb_rpc_server *srv;
    nng_ctx ctx;
    nng_aio *aio;
    int sending;           /* the aio in flight is a send (else a recv) */
    nng_msg *msg;          /* received request waiting for a thread */
    struct srv_ctx *next;  /* work queue link */
} srv_ctx;

struct nb_rpc_server {
    nng_socket sock;
    nng_listener listener;
    nng_tls_config *tls;
    char *url;
    nb_wire_keys keys;
    nb_replay *replay; /* ids seen within the clock window (authenticated servers) */
    nb_rpc_replay_store store; /* answers kept across restarts (record NULL: none) */
    size_t max_msg;

    handler *handlers;
    int nhandlers;

    pthread_mutex_t health_mu;
    service *services;
    int nservices;

    srv_ctx *ctxs;
    int nctx, nctx_open;

    pthread_t *threads;
    int nthreads, nthreads_started;

    pthread_mutex_t mu; /* work queue, stopping, in_nng */
    pthread_cond_t cv;
    pthread_cond_t idle_cv; /* in_nng dropped to 0 while stopping */
    srv_ctx *qhead, *qtail;
    int stopping; /* also read without mu via __atomic_load_n */
    int in_nng;   /* threads inside nng_ctx_send/recv right now */
    int started;

    nb_rpc_cache *cache; /* NULL when disabled */
    nb_rpc_pipes *pipes; /* the connections, bounded (NULL on inproc) */

    /* ipc:// only: nng 1.5.2 stops accepting for good after a peer leaves during the SP
     * handshake (nanomsg/nng#1518, fixed in 1.6.0; Debian ships 1.5.2): the guard watches the
     * listener's "other" error count, which that failure bumps, and listens anew. */
    pthread_t guard;
    pthread_cond_t guard_cv; /* stopping, under mu */
    int guard_started;

    nb_rpc_server_stats stats; /* updated with __atomic builtins */
};

enum { GUARD_TICK_MS = 200 };

#define STAT(s, f) __atomic_fetch_add(&(s)->stats.f, 1, __ATOMIC_RELAXED)

/* nng 1.5.2 frees a context that nng_ctx_send/recv still holds when
 * nng_close runs concurrently (use after free of the socket's mutex), so
 * every such call goes through this gate and close waits for it to drain. */
static int nng_enter(nb_rpc_server *s)
{
    pthread_mutex_lock(&s->mu);
    int ok = !s->stopping;
    if (ok)
        s->in_nng++;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void nng_leave(nb_rpc_server *s)
{
    pthread_mutex_lock(&s->mu);
    if (--s->in_nng == 0 && s->stopping)
        pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------ health */

/* "pkg.Service/Method" -> length of "pkg.Service". */
static size_t service_len(const char *method)
{
    const char *slash = strchr(method, '/');
    return slash ? (size_t)(slash - method) : strlen(method);
}

static service *find_service(nb_rpc_server *s, const char *name, size_t n)
{
    for (int i = 0; i < s->nservices; i++)
        if (strlen(s->services[i].name) == n && memcmp(s->services[i].name, name, n) == 0)
            return &s->services[i];
    return NULL;
}

static nb_code add_service(nb_rpc_server *s, const char *name, size_t n, nb_err *err)
{
    if (find_service(s, name, n))
        return NB_OK;
    service *ns = realloc(s->services, (size_t)(s->nservices + 1) * sizeof *ns);
    if (!ns)
        return nb_err_set(err, NB_ENOMEM, "out of memory registering service");
    s->services = ns;
    char *copy = malloc(n + 1);
    if (!copy)
        return nb_err_set(err, NB_ENOMEM, "out of memory registering service");
    memcpy(copy, name, n);
    copy[n] = '\0';
    s->services[s->nservices].name = copy;
    s->services[s->nservices].serving = true;
    s->nservices++;
    return NB_OK;
}

nb_code nb_rpc_server_set_serving(nb_rpc_server *srv, const char *service_name, bool serving,
                                  nb_err *err)
{
    if (!srv || !service_name)
        return nb_err_set(err, NB_EINVAL, "nb_rpc_server_set_serving: NULL argument");
    pthread_mutex_lock(&srv->health_mu);
    service *sv = find_service(srv, service_name, strlen(service_name));
    if (sv)
        sv->serving = serving;
    pthread_mutex_unlock(&srv->health_mu);
    if (!sv)
        return nb_err_set(err, NB_ENOTFOUND,
                          "no service '%s' on %s: services come from registered methods "
                          "(\"pkg.Service/Method\" -> \"pkg.Service\")",
                          service_name, srv->url);
    return NB_OK;
}

static int health_check(nb_rpc_server *s, const Npubench__RequestEnvelope *env, uint8_t **pl,
                        size_t *len, char *msg, size_t msg_cap)
{
    Npubench__HealthCheckRequest *hr;
    nb_err e = {0};
    if (nb_wire_unpack(&npubench__health_check_request__descriptor, env->payload.data,
                       env->payload.len, 0, &hr, &e) != NB_OK) {
        snprintf(msg, msg_cap, "%s", e.msg);
        return nb_rpc_status_from_code(e.code);
    }
    pthread_mutex_lock(&s->health_mu);
    service *sv = find_service(s, hr->service, strlen(hr->service));
    bool serving = sv && sv->serving;
    pthread_mutex_unlock(&s->health_mu);
    int st;
    if (!sv) {
        char name[NB_WIRE_METHOD_MAX + 1];
        sanitize(name, sizeof name, hr->service);
        snprintf(msg, msg_cap, "unknown service '%s'", name);
        st = NB_RPC_NOT_FOUND;
    } else {
        Npubench__HealthCheckResponse r = NPUBENCH__HEALTH_CHECK_RESPONSE__INIT;
        r.status = serving ? NPUBENCH__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                           : NPUBENCH__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
        if (nb_wire_pack(&r, pl, len, &e) != NB_OK) {
            snprintf(msg, msg_cap, "%s", e.msg);
            st = nb_rpc_status_from_code(e.code);
        } else {
            st = NB_RPC_OK;
        }
    }
    nb_wire_free(hr);
    return st;
}

/* --------------------------------------------------------- dispatching */

static const handler *find_handler(const nb_rpc_server *s, const char *method)
{
    for (int i = 0; i < s->nhandlers; i++)
        if (strcmp(s->handlers[i].method, method) == 0)
            return &s->handlers[i];
    return NULL;
}

/* key: the one the request verified under (NULL: the answer carries no MAC). */
static nng_msg *make_reply(const char *key, uint64_t id, int status, const char *message,
                           const uint8_t *pl, size_t len)
{
    Npubench__ResponseEnvelope env;
    uint8_t mac[NB_WIRE_MAC_LEN];
    nb_wire_response_init(&env, mac, key, id, status, message, pl, len);
    size_t n = protobuf_c_message_get_packed_size(&env.base);
    nng_msg *m;
    if (nng_msg_alloc(&m, n) != 0)
        return NULL;
    protobuf_c_message_pack(&env.base, nng_msg_body(m));
    return m;
}

/* What one request is answered with while it is served. */
typedef struct answer {
    int st;
    unsigned roles;  /* NB_WIRE_ROLE_* of the key the request verified under */
    const char *key; /* that key, to sign the answer with (NULL before verification) */
    int64_t deadline; /* on this server's clock; 0 = none */
    char msg[NB_ERR_MSG_MAX];
    uint8_t *pl; /* malloc'ed response payload */
    size_t len;
} answer;

static int answer_with(answer *a, int st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int answer_with(answer *a, int st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->msg, sizeof a->msg, fmt, ap);
    va_end(ap);
    a->st = st;
    return 1;
}

/* Size, envelope, MAC, deadline and method name of in; *env on success.  Returns 1 when a
 * answers the request already (refused), 0 when it may run. */
static int check_request(nb_rpc_server *s, nng_msg *in, Npubench__RequestEnvelope **env,
                         char *name, answer *a)
{
    size_t n = nng_msg_len(in);
    nb_err e = {0};
    /* inproc does not enforce NNG_OPT_RECVMAXSZ; the stream transports
     * drop the connection before we see such a message. */
    if (n > s->max_msg) {
        STAT(s, oversize);
        return answer_with(a, NB_RPC_RESOURCE_EXHAUSTED,
                           "request of %zu bytes exceeds the server's %zu-byte limit", n,
                           s->max_msg);
    }
    if (nb_wire_unpack(&npubench__request_envelope__descriptor, nng_msg_body(in), n,
                       n + NB_RPC_ENVELOPE_UNPACK_SLACK, env, &e) != NB_OK) {
        STAT(s, malformed);
        return answer_with(a, e.code == NB_EINVAL ? NB_RPC_INVALID_ARGUMENT
                                                  : nb_rpc_status_from_code(e.code),
                           "%s", e.msg);
    }
    sanitize(name, NB_WIRE_METHOD_MAX + 1, (*env)->method);
    if (nb_wire_request_verify_keys(*env, &s->keys, &a->roles, &a->key, &e) != NB_OK) {
        STAT(s, unauthenticated);
        return answer_with(a, NB_RPC_UNAUTHENTICATED, "%s", e.msg);
    }
    if (nb_wire_request_clock(*env, nb_wall_ms(), s->keys.n > 0, &a->deadline, &e) != NB_OK) {
        if (e.code == NB_ETIMEOUT)
            STAT(s, expired);
        return answer_with(a, nb_rpc_status_from_code(e.code), "%s", e.msg);
    }
    if (strlen((*env)->method) > NB_WIRE_METHOD_MAX)
        return answer_with(a, NB_RPC_INVALID_ARGUMENT, "method name '%s...' longer than %d bytes",
                           name, NB_WIRE_METHOD_MAX);
    return 0;
}

/* A duplicate's answer from the idempotency cache.  Returns 1 when a answers it, 0 when the
 * handler must run (*ent then to be finished, unless NULL). */
static int cached_answer(nb_rpc_server *s, const Npubench__RequestEnvelope *env,
                         const char *name, nb_rpc_cache_entry **ent, answer *a)
{
    unsigned long long id = (unsigned long long)env->request_id;
    switch (nb_rpc_cache_begin(s->cache, env->request_id, env->method, env->payload.data,
                               env->payload.len, a->deadline, ent, &a->st, a->msg,
                               sizeof a->msg, &a->pl, &a->len)) {
    case NB_RPC_CACHE_MISS:
        return 0;
    case NB_RPC_CACHE_HIT:
        STAT(s, replayed);
        return 1;
    case NB_RPC_CACHE_CONFLICT:
        return answer_with(a, NB_RPC_INVALID_ARGUMENT,
                           "%s: request_id %llu was already used for a different payload", name,
                           id);
    case NB_RPC_CACHE_TIMEOUT:
        STAT(s, expired);
        return answer_with(a, NB_RPC_DEADLINE_EXCEEDED,
                           "%s: deadline passed while the first copy of request %llu was running",
                           name, id);
    case NB_RPC_CACHE_STOPPED:
        break;
    }
    return answer_with(a, NB_RPC_UNAVAILABLE, "server shutting down");
}

/* Runs the handler and checks what it returned: a status in range, a payload where it says
 * there is one, within the message limit. */
static void run_handler(nb_rpc_server *s, const handler *h, const Npubench__RequestEnvelope *env,
                        const char *name, answer *a)
{
    nb_rpc_request req = {env->method,       env->request_id, a->deadline,
                          env->payload.data, env->payload.len, a->roles,
                          nb_wire_keys_client(&s->keys, a->key)};
    nb_rpc_reply rep;
    memset(&rep, 0, sizeof rep);
    STAT(s, handled);
    int st = h->fn(h->user, &req, &rep);
    rep.message[sizeof rep.message - 1] = '\0';
    if (!nb_rpc_status_valid(st)) {
        answer_with(a, NB_RPC_INTERNAL, "%s: handler returned invalid status %d", name, st);
        free(rep.payload);
    } else if (rep.len && !rep.payload) {
        answer_with(a, NB_RPC_INTERNAL, "%s: handler returned %zu payload bytes at NULL", name,
                    rep.len);
    } else if (rep.len > s->max_msg - NB_RPC_ENVELOPE_SLACK) {
        answer_with(a, NB_RPC_RESOURCE_EXHAUSTED,
                    "%s: response of %zu bytes exceeds the %zu-byte message limit", name,
                    rep.len, s->max_msg);
        free(rep.payload);
    } else {
        a->st = st;
        memcpy(a->msg, rep.message, sizeof a->msg);
        a->pl = rep.payload;
        a->len = rep.len;
    }
}

/* Worker methods take the worker key only, admin methods the admin key, the rest a client
 * (or admin) key: a board's key cannot submit, a laptop's key cannot report results. */
static int check_role(unsigned flags, answer *a, const char *name)
{
    unsigned need = (flags & NB_RPC_WORKER)  ? NB_WIRE_ROLE_WORKER
                    : (flags & NB_RPC_ADMIN) ? NB_WIRE_ROLE_ADMIN
                                             : NB_WIRE_ROLE_CLIENT;
    if (a->roles & need)
        return 0;
    return answer_with(a, NB_RPC_PERMISSION_DENIED,
                       "%s: needs the %s credential; the request was signed with the %s key",
                       name, nb_wire_role_name(need), nb_wire_role_name(a->roles));
}

/* A mutating request id seen within the clock window again, after the response cache let
 * it go: a replay, refused (a resend the cache still holds never gets here). */
static uint64_t replay_key(const Npubench__RequestEnvelope *env)
{
    return nb_hash_bytes(env->method, strlen(env->method),
                         NB_HASH_SEED ^ (env->request_id * 0x9e3779b97f4a7c15ull));
}

static int check_replay(nb_rpc_server *s, const Npubench__RequestEnvelope *env,
                        const char *name, answer *a)
{
    if (!s->replay)
        return 0;
    uint64_t id = env->request_id;
    uint64_t kh = replay_key(env);
    switch (nb_replay_check(s->replay, id, kh, nb_wall_ms())) {
    case NB_REPLAY_NEW:
        /* new to this process; an earlier one may have answered it (a restart since) */
        if (s->store.lookup && s->store.lookup(s->store.user, id, kh, &a->st, a->msg,
                                               sizeof a->msg, &a->pl, &a->len)) {
            STAT(s, replayed);
            return 1;
        }
        return 0;
    case NB_REPLAY_SEEN:
        return answer_with(a, NB_RPC_ALREADY_EXISTS,
                           "%s: request id %llu was already used within the last %lld s", name,
                           (unsigned long long)id, 2 * NB_WIRE_SKEW_MAX_MS / 1000);
    case NB_REPLAY_FULL: break;
    }
    return answer_with(a, NB_RPC_RESOURCE_EXHAUSTED,
                       "%s: more than %d requests within %lld s; try again later", name,
                       NB_RPC_REPLAY_IDS, 2 * NB_WIRE_SKEW_MAX_MS / 1000);
}

void nb_rpc_server_replay_store(nb_rpc_server *srv, const nb_rpc_replay_store *store)
{
    if (srv->replay && store)
        srv->store = *store;
}

/* Decodes, checks and runs one request; consumes in; returns the reply. */
static nng_msg *serve(nb_rpc_server *s, nng_msg *in)
{
    answer a = {.st = NB_RPC_OK};
    Npubench__RequestEnvelope *env = NULL;
    char name[NB_WIRE_METHOD_MAX + 1];
    STAT(s, requests);
    if (check_request(s, in, &env, name, &a))
        goto reply;
    if (strcmp(env->method, NB_RPC_HEALTH_CHECK) == 0) {
        a.st = health_check(s, env, &a.pl, &a.len, a.msg, sizeof a.msg);
        goto reply;
    }
    const handler *h = find_handler(s, env->method);
    if (!h) {
        STAT(s, unimplemented);
        answer_with(&a, NB_RPC_UNIMPLEMENTED, "unknown method '%s' on %s", name, s->url);
        goto reply;
    }
    if (check_role(h->flags, &a, name))
        goto reply;
    nb_rpc_cache_entry *ent = NULL;
    if (!(h->flags & NB_RPC_READONLY) && s->cache && cached_answer(s, env, name, &ent, &a))
        goto reply;
    if (!(h->flags & NB_RPC_READONLY) && check_replay(s, env, name, &a)) {
        if (ent)
            nb_rpc_cache_finish(s->cache, ent, a.st, a.msg, a.pl, a.len);
        goto reply;
    }
    run_handler(s, h, env, name, &a);
    /* nothing was done (e.g. a result not stored on a full disk): the client's retry under
     * this id is executed, not refused as a replay */
    if (s->replay && !(h->flags & NB_RPC_READONLY)) {
        if (nb_rpc_status_transient(a.st))
            nb_replay_forget(s->replay, env->request_id, replay_key(env));
        else if (s->store.record)
            s->store.record(s->store.user, env->request_id, replay_key(env),
                            nb_wall_ms() + 2 * NB_WIRE_SKEW_MAX_MS, a.st, a.msg, a.pl, a.len);
    }
    if (ent)
        nb_rpc_cache_finish(s->cache, ent, a.st, a.msg, a.pl, a.len);
reply:;
    nng_msg *out = make_reply(a.key, env ? env->request_id : 0, a.st, a.msg, a.pl, a.len);
    free(a.pl);
    nb_wire_free(env);
    nng_msg_free(in);
    return out;
}

/* nng callback: runs on nng's threads, so it only moves messages along. */
static void ctx_cb(void *arg)
{
    srv_ctx *c = arg;
    nb_rpc_server *s = c->srv;
    int rv = nng_aio_result(c->aio);
    if (c->sending) {
        nng_msg *m = rv != 0 ? nng_aio_get_msg(c->aio) : NULL;
        if (m)
            nng_msg_free(m); /* a failed send leaves the message ours */
        c->sending = 0;
        if (nng_enter(s)) {
            nng_ctx_recv(c->ctx, c->aio);
            nng_leave(s);
        }
        return;
    }
    if (rv != 0) {
        if (rv != NNG_ECLOSED && rv != NNG_ECANCELED && nng_enter(s)) {
            nng_ctx_recv(c->ctx, c->aio);
            nng_leave(s);
        }
        return;
    }
    nng_msg *m = nng_aio_get_msg(c->aio);
    if (m)
        nb_rpc_pipes_touch(s->pipes, nng_msg_get_pipe(m));
    nng_aio_set_msg(c->aio, NULL);
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        nng_msg_free(m);
        return;
    }
    c->msg = m;
    c->next = NULL;
    if (s->qtail)
        s->qtail->next = c;
    else
        s->qhead = c;
    s->qtail = c;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg)
{
    nb_rpc_server *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->qhead && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping)
            break;
        srv_ctx *c = s->qhead;
        s->qhead = c->next;
        if (!s->qhead)
            s->qtail = NULL;
        nng_msg *in = c->msg;
        c->msg = NULL;
        pthread_mutex_unlock(&s->mu);

        nng_msg *out = serve(s, in);
        if (!nng_enter(s)) {
            if (out)
                nng_msg_free(out); /* closing: nobody will read it */
        } else if (out) {
            c->sending = 1;
            nng_aio_set_msg(c->aio, out);
            nng_ctx_send(c->ctx, c->aio);
            nng_leave(s);
        } else {
            /* No memory for a reply: the client times out (or its resend
             * gets another chance); keep the context serving. */
            nng_ctx_recv(c->ctx, c->aio);
            nng_leave(s);
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The listener's "other" accept-error count (nng's statistics); 0 when unavailable. */
static uint64_t listener_other_errors(nng_listener l)
{
    nng_stat *all = NULL, *ls, *st;
    uint64_t v = 0;
    if (nng_stats_get(&all) != 0)
        return 0;
    if ((ls = nng_stat_find_listener(all, l)) && (st = nng_stat_find(ls, "other")))
        v = nng_stat_value(st);
    nng_stats_free(all);
    return v;
}

static nb_code start_listener(nb_rpc_server *s, const char *url, nb_err *err);

static void *guard_main(void *arg)
{
    nb_rpc_server *s = arg;
    int down = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += GUARD_TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->guard_cv, &s->mu, &ts);
        if (s->stopping)
            break;
        pthread_mutex_unlock(&s->mu);
        /* Only this thread touches the listener after open; close joins it first. Each
         * listener counts from 0, so any "other" error means this one may have given up; one
         * that nng retries by itself costs a needless restart, no more. A listener that could
         * not be made again (down) is tried again every tick: its handle counts nothing. */
        if (down || listener_other_errors(s->listener) > 0) {
            nb_err err = {0};
            nng_listener_close(s->listener); /* what is left of it; a bad handle is refused */
            down = start_listener(s, s->url, &err) != NB_OK;
            if (down) {
                nng_listener_close(s->listener); /* made but not started */
                __atomic_fetch_add(&s->stats.listener_restart_failures, 1, __ATOMIC_RELAXED);
            } else {
                __atomic_fetch_add(&s->stats.listener_restarts, 1, __ATOMIC_RELAXED);
            }
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static nb_code bound_url(nb_rpc_server *s, const char *url, nb_err *err)
{
    nng_url *u = NULL;
    if (strncmp(url, "ipc://", 6) == 0 || strncmp(url, "inproc://", 9) == 0 ||
        nng_url_parse(&u, url) != 0) {
        s->url = strdup(url);
        return s->url ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    int port = 0;
    if (strcmp(u->u_port, "0") == 0 || u->u_port[0] == '\0')
        nng_listener_get_int(s->listener, NNG_OPT_TCP_BOUND_PORT, &port);
    else
        port = atoi(u->u_port);
    const char *host = u->u_hostname;
    if (!host[0] || strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0)
        host = "127.0.0.1";
    else if (strcmp(host, "::") == 0)
        host = "::1";
    int v6 = strchr(host, ':') != NULL;
    size_t cap = strlen(u->u_scheme) + strlen(host) + 16;
    s->url = malloc(cap);
    if (s->url)
        snprintf(s->url, cap, "%s://%s%s%s:%d", u->u_scheme, v6 ? "[" : "", host, v6 ? "]" : "",
                 port);
    nng_url_free(u);
    return s->url ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory");
}

/* Listens on url (TLS configured) with the message limit; errors name the URL. */
static nb_code start_listener(nb_rpc_server *s, const char *url, nb_err *err)
{
    int rv;
    if ((rv = nng_listener_create(&s->listener, s->sock, url)))
        return nb_rpc_nng_fail(err, NB_EINVAL, rv, "%s: cannot create listener", url);
    nng_listener_set_size(s->listener, NNG_OPT_RECVMAXSZ, s->max_msg); /* not on inproc */
    if (s->tls && (rv = nng_listener_set_ptr(s->listener, NNG_OPT_TLS_CONFIG, s->tls)))
        return nb_rpc_nng_fail(err, NB_EINTERNAL, rv, "%s: setting TLS config", url);
    if ((rv = nng_listener_start(s->listener, 0)))
        return nb_rpc_nng_fail(err, rv == NNG_EADDRINUSE ? NB_EUNAVAIL : NB_EIO, rv,
                               "%s: cannot listen", url);
    return NB_OK;
}

/* The nctx contexts with their aios, and room for the handler threads. */
static nb_code open_contexts(nb_rpc_server *s, const char *url, nb_err *err)
{
    if (!(s->ctxs = calloc((size_t)s->nctx, sizeof *s->ctxs)) ||
        !(s->threads = calloc((size_t)s->nthreads, sizeof *s->threads)))
        return nb_err_set(err, NB_ENOMEM, "out of memory for %d contexts", s->nctx);
    for (int i = 0; i < s->nctx; i++) {
        srv_ctx *x = &s->ctxs[i];
        x->srv = s;
        int rv;
        if ((rv = nng_aio_alloc(&x->aio, ctx_cb, x)))
            return nb_rpc_nng_fail(err, NB_ENOMEM, rv, "%s: nng_aio_alloc", url);
        s->nctx_open++;
        if ((rv = nng_ctx_open(&x->ctx, s->sock)))
            return nb_rpc_nng_fail(err, NB_EINTERNAL, rv, "%s: nng_ctx_open", url);
    }
    return NB_OK;
}

nb_code nb_rpc_server_open(const char *url, const nb_rpc_opts *opts, nb_rpc_server **out,
                           nb_err *err)
{
    *out = NULL;
    const nb_rpc_opts *o;
    nb_code c = nb_rpc_check_open(url, opts, &o, err);
    if (c)
        return c;
    if (o->contexts < 0 || o->contexts > MAX_CONTEXTS || o->threads < 0 ||
        o->threads > MAX_THREADS)
        return nb_err_set(err, NB_EINVAL,
                          "%s: opts.contexts %d / opts.threads %d out of range (0..%d / 0..%d)",
                          url, o->contexts, o->threads, MAX_CONTEXTS, MAX_THREADS);

    nb_rpc_server *s = calloc(1, sizeof *s);
    if (!s)
        return nb_err_set(err, NB_ENOMEM, "out of memory opening %s", url);
    s->max_msg = o->max_msg_bytes ? o->max_msg_bytes : NB_RPC_MAX_MSG_DEFAULT;
    s->nctx = o->contexts ? o->contexts : DEFAULT_CONTEXTS;
    s->nthreads = o->threads ? o->threads : DEFAULT_THREADS;
    int cache_max = o->cache_entries < 0 ? 0
                    : o->cache_entries ? o->cache_entries
                                       : DEFAULT_CACHE_ENTRIES;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    pthread_cond_init(&s->guard_cv, NULL);
    pthread_mutex_init(&s->health_mu, NULL);
    s->sock = (nng_socket)NNG_SOCKET_INITIALIZER;

    if ((c = nb_wire_keys_init(&s->keys, o->secret, o->worker_secret, o->admin_secret, err)))
        goto fail;
    for (int i = 0; i < o->n_client_keys; i++)
        if ((c = nb_wire_keys_add_client(&s->keys, o->client_names[i], o->client_keys[i], err)))
            goto fail;
    if (s->keys.n && (c = nb_replay_open(NB_RPC_REPLAY_IDS, 2 * NB_WIRE_SKEW_MAX_MS, &s->replay,
                                         err)))
        goto fail;
    if (cache_max > 0 &&
        (c = nb_rpc_cache_new(cache_max, o->cache_bytes ? o->cache_bytes : DEFAULT_CACHE_BYTES,
                              &s->cache, err)))
        goto fail;
    if ((c = add_service(s, "", 0, err)) ||
        (c = add_service(s, "grpc.health.v1.Health", strlen("grpc.health.v1.Health"), err)))
        goto fail;

    /* inproc peers are this process: no descriptors to bound */
    if ((c = nb_rpc_open_socket(url, o, true, &s->tls, &s->sock, s->max_msg, err)) ||
        (strncmp(url, "inproc://", 9) &&
         (c = nb_rpc_pipes_open(s->sock, o->max_conns > 0 ? o->max_conns : DEFAULT_MAX_CONNS,
                                o->idle_ms < 0 ? 0 : o->idle_ms ? o->idle_ms : DEFAULT_IDLE_MS,
                                &s->pipes, err))) ||
        (c = start_listener(s, url, err)) || (c = bound_url(s, url, err)) ||
        (c = open_contexts(s, url, err)))
        goto fail;
    *out = s;
    return NB_OK;
fail:
    nb_rpc_server_close(s);
    return c;
}

nb_code nb_rpc_server_handle(nb_rpc_server *srv, const char *method, nb_rpc_handler fn,
                             void *user, unsigned flags, nb_err *err)
{
    if (!srv || !method || !fn)
        return nb_err_set(err, NB_EINVAL, "nb_rpc_server_handle: NULL argument");
    if (srv->started)
        return nb_err_set(err, NB_EINVAL,
                          "%s: register handlers before nb_rpc_server_start", method);
    if (!nb_rpc_method_ok(method))
        return nb_err_set(err, NB_EINVAL,
                          "method '%s': want \"pkg.Service/Method\" ([A-Za-z0-9._], at most "
                          "%d bytes)",
                          method, NB_WIRE_METHOD_MAX);
    if (strcmp(method, NB_RPC_HEALTH_CHECK) == 0 || find_handler(srv, method))
        return nb_err_set(err, NB_EINVAL, "method '%s' is already registered", method);
    if ((flags & ~(NB_RPC_READONLY | NB_RPC_WORKER | NB_RPC_ADMIN)) ||
        (flags & NB_RPC_WORKER && flags & NB_RPC_ADMIN))
        return nb_err_set(err, NB_EINVAL, "method '%s': unknown flags 0x%x", method, flags);
    handler *nh = realloc(srv->handlers, (size_t)(srv->nhandlers + 1) * sizeof *nh);
    if (!nh)
        return nb_err_set(err, NB_ENOMEM, "out of memory registering %s", method);
    srv->handlers = nh;
    char *copy = strdup(method);
    if (!copy)
        return nb_err_set(err, NB_ENOMEM, "out of memory registering %s", method);
    pthread_mutex_lock(&srv->health_mu);
    nb_code c = add_service(srv, method, service_len(method), err);
    pthread_mutex_unlock(&srv->health_mu);
    if (c) {
        free(copy);
        return c;
    }
    nh[srv->nhandlers++] = (handler){copy, fn, user, flags};
    return NB_OK;
}

nb_code nb_rpc_server_start(nb_rpc_server *srv, nb_err *err)
{
    if (!srv)
        return nb_err_set(err, NB_EINVAL, "nb_rpc_server_start: NULL server");
    if (srv->started)
        return nb_err_set(err, NB_EINVAL, "%s: server already started", srv->url);
    for (int i = 0; i < srv->nthreads; i++) {
        int rc = pthread_create(&srv->threads[i], NULL, worker_main, srv);
        if (rc)
            return nb_err_set(err, NB_ENOMEM, "%s: starting handler thread %d of %d: %s",
                              srv->url, i + 1, srv->nthreads, strerror(rc));
        srv->nthreads_started++;
    }
    if (strncmp(srv->url, "ipc://", 6) == 0) {
        int rc = pthread_create(&srv->guard, NULL, guard_main, srv);
        if (rc)
            return nb_err_set(err, NB_ENOMEM, "%s: starting the listener guard: %s", srv->url,
                              strerror(rc));
        srv->guard_started = 1;
    }
    srv->started = 1;
    for (int i = 0; i < srv->nctx; i++)
        nng_ctx_recv(srv->ctxs[i].ctx, srv->ctxs[i].aio);
    return NB_OK;
}

const char *nb_rpc_server_url(const nb_rpc_server *srv)
{
    return srv ? srv->url : NULL;
}

void nb_rpc_server_get_stats(nb_rpc_server *srv, nb_rpc_server_stats *out)
{
    out->requests = __atomic_load_n(&srv->stats.requests, __ATOMIC_RELAXED);
    out->handled = __atomic_load_n(&srv->stats.handled, __ATOMIC_RELAXED);
    out->replayed = __atomic_load_n(&srv->stats.replayed, __ATOMIC_RELAXED);
    out->unauthenticated = __atomic_load_n(&srv->stats.unauthenticated, __ATOMIC_RELAXED);
    out->expired = __atomic_load_n(&srv->stats.expired, __ATOMIC_RELAXED);
    out->malformed = __atomic_load_n(&srv->stats.malformed, __ATOMIC_RELAXED);
    out->unimplemented = __atomic_load_n(&srv->stats.unimplemented, __ATOMIC_RELAXED);
    out->oversize = __atomic_load_n(&srv->stats.oversize, __ATOMIC_RELAXED);
    out->listener_restarts = __atomic_load_n(&srv->stats.listener_restarts, __ATOMIC_RELAXED);
    out->listener_restart_failures =
        __atomic_load_n(&srv->stats.listener_restart_failures, __ATOMIC_RELAXED);
    if (srv->pipes) {
        nb_rpc_pipes_stats ps;
        nb_rpc_pipes_get_stats(srv->pipes, &ps);
        out->connections = ps.open;
        out->refused_connections = ps.refused;
        out->idle_closed = ps.idle_closed;
    }
}

void nb_rpc_server_close(nb_rpc_server *s)
{
    if (!s)
        return;
    /* Order matters: stop new nng calls and wait for those in progress, let
     * the threads finish their handlers and exit, close the socket so every
     * aio completes (callbacks no longer call into nng), wait for the
     * callbacks, and only then free what they use. */
    pthread_mutex_lock(&s->mu);
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->guard_cv);
    while (s->in_nng > 0)
        pthread_cond_wait(&s->idle_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (s->cache)
        nb_rpc_cache_stop(s->cache);
    for (int i = 0; i < s->nthreads_started; i++)
        pthread_join(s->threads[i], NULL);
    if (s->guard_started)
        pthread_join(s->guard, NULL); /* before the socket (and its listener) closes */
    if (nng_socket_id(s->sock) > 0)
        nng_close(s->sock);
    nb_rpc_pipes_close(s->pipes);
    for (int i = 0; i < s->nctx_open; i++) {
        nng_aio_stop(s->ctxs[i].aio);
        if (s->ctxs[i].msg)
            nng_msg_free(s->ctxs[i].msg);
        nng_aio_free(s->ctxs[i].aio);
    }
    if (s->tls)
        nng_tls_config_free(s->tls);
    nb_rpc_cache_free(s->cache);
    for (int i = 0; i < s->nhandlers; i++)
        free(s->handlers[i].method);
    free(s->handlers);
    for (int i = 0; i < s->nservices; i++)
        free(s->services[i].name);
    free(s->services);
    free(s->ctxs);
    free(s->threads);
    free(s->url);
    nb_wire_keys_free(&s->keys);
    nb_replay_close(s->replay);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle_cv);
    pthread_cond_destroy(&s->guard_cv);
    pthread_mutex_destroy(&s->health_mu);
    free(s);
}
