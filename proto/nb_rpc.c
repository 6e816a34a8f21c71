/* nb_rpc: the RPC transport — rep0 contexts feeding a handler thread pool on
 * the server, one req0 context per call on the client (see nb_rpc.h). */
#include "nb_rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "nb_replay.h"
#include "nb_time.h"

/* The C enum mirrors the generated one so either can be used. */
#define SAME(a, b) _Static_assert((int)NB_RPC_##a == (int)NPUBENCH__STATUS_CODE__##b, #a)
SAME(OK, OK);
SAME(CANCELLED, CANCELLED);
SAME(UNKNOWN, UNKNOWN);
SAME(INVALID_ARGUMENT, INVALID_ARGUMENT);
SAME(DEADLINE_EXCEEDED, DEADLINE_EXCEEDED);
SAME(NOT_FOUND, NOT_FOUND);
SAME(ALREADY_EXISTS, ALREADY_EXISTS);
SAME(PERMISSION_DENIED, PERMISSION_DENIED);
SAME(RESOURCE_EXHAUSTED, RESOURCE_EXHAUSTED);
SAME(FAILED_PRECONDITION, FAILED_PRECONDITION);
SAME(ABORTED, ABORTED);
SAME(OUT_OF_RANGE, OUT_OF_RANGE);
SAME(UNIMPLEMENTED, UNIMPLEMENTED);
SAME(INTERNAL, INTERNAL);
SAME(UNAVAILABLE, UNAVAILABLE);
SAME(DATA_LOSS, DATA_LOSS);
SAME(UNAUTHENTICATED, UNAUTHENTICATED);
#undef SAME

enum {
    DEFAULT_CONTEXTS = 64,
    DEFAULT_THREADS = 8,
    DEFAULT_CACHE_ENTRIES = 4096,
    DEFAULT_TIMEOUT_MS = 30000,
    MAX_CONTEXTS = 4096,
    MAX_THREADS = 1024,
    /* Envelope fields around the payload: id, status, message, MAC, tags. */
    ENVELOPE_SLACK = 1024,
    /* Extra allocation allowed when unpacking an envelope beyond its size. */
    ENVELOPE_UNPACK_SLACK = 64 * 1024
};
#define DEFAULT_CACHE_BYTES ((size_t)64 << 20)

/* ---------------------------------------------------------- status codes */

static const char *const status_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"};

static int status_valid(int s)
{
    return s >= 0 && s <= NB_RPC_UNAUTHENTICATED;
}

const char *nb_rpc_status_name(int status)
{
    return status_valid(status) ? status_names[status] : "UNKNOWN";
}

nb_rpc_status nb_rpc_status_from_code(nb_code code)
{
    switch (code) {
    case NB_OK: return NB_RPC_OK;
    case NB_EINVAL: return NB_RPC_INVALID_ARGUMENT;
    case NB_EFORMAT: return NB_RPC_INVALID_ARGUMENT;
    case NB_EIO: return NB_RPC_UNAVAILABLE;
    case NB_ENOMEM: return NB_RPC_RESOURCE_EXHAUSTED;
    case NB_EUNSUPPORTED: return NB_RPC_UNIMPLEMENTED;
    case NB_ENOTFOUND: return NB_RPC_NOT_FOUND;
    case NB_EMISMATCH: return NB_RPC_FAILED_PRECONDITION;
    case NB_EUNAVAIL: return NB_RPC_UNAVAILABLE;
    case NB_ETIMEOUT: return NB_RPC_DEADLINE_EXCEEDED;
    case NB_EAUTH: return NB_RPC_UNAUTHENTICATED;
    case NB_ECANCELED: return NB_RPC_CANCELLED;
    case NB_EINTERNAL: return NB_RPC_INTERNAL;
    }
    return NB_RPC_UNKNOWN;
}

nb_code nb_rpc_code_from_status(int status)
{
    switch (status) {
    case NB_RPC_OK: return NB_OK;
    case NB_RPC_CANCELLED: return NB_ECANCELED;
    case NB_RPC_INVALID_ARGUMENT: return NB_EINVAL;
    case NB_RPC_OUT_OF_RANGE: return NB_EINVAL;
    case NB_RPC_DEADLINE_EXCEEDED: return NB_ETIMEOUT;
    case NB_RPC_NOT_FOUND: return NB_ENOTFOUND;
    case NB_RPC_ALREADY_EXISTS: return NB_EMISMATCH;
    case NB_RPC_FAILED_PRECONDITION: return NB_EMISMATCH;
    case NB_RPC_PERMISSION_DENIED: return NB_EAUTH;
    case NB_RPC_UNAUTHENTICATED: return NB_EAUTH;
    case NB_RPC_RESOURCE_EXHAUSTED: return NB_ENOMEM;
    case NB_RPC_ABORTED: return NB_EUNAVAIL;
    case NB_RPC_UNAVAILABLE: return NB_EUNAVAIL;
    case NB_RPC_UNIMPLEMENTED: return NB_EUNSUPPORTED;
    case NB_RPC_DATA_LOSS: return NB_EIO;
    default: return NB_EINTERNAL; /* UNKNOWN, INTERNAL, out of range */
    }
}

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

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void free_secret(char *s)
{
    if (s) {
        volatile char *v = s;
        while (*v)
            *v++ = 0;
        free(s);
    }
}

/* Network bytes quoted in a message: printable ASCII only, bounded. */
static void sanitize(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap && i < NB_WIRE_METHOD_MAX; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[i] = '\0';
}

static const char *const schemes[] = {"tcp://",     "tcp4://",     "tcp6://",
                                      "ipc://",     "inproc://",   "tls+tcp://",
                                      "tls+tcp4://", "tls+tcp6://"};

static nb_code check_url(const char *url, nb_err *err)
{
    if (!url || !url[0])
        return nb_err_set(err, NB_EINVAL, "empty RPC URL");
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
            return NB_OK;
    return nb_err_set(err, NB_EINVAL,
                      "%s: unsupported URL scheme; use tcp://host:port, ipc:///path, "
                      "inproc://name or tls+tcp://host:port",
                      url);
}

static int url_is_tls(const char *url)
{
    return strncmp(url, "tls+", 4) == 0;
}

static nb_code nng_fail(nb_err *err, nb_code code, int rv, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static nb_code nng_fail(nb_err *err, nb_code code, int rv, const char *fmt, ...)
{
    char what[NB_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nb_err_set(err, code, "%s: %s", what, nng_strerror(rv));
}

static nb_code tls_setup(const char *url, const nb_rpc_opts *o, int server,
                         nng_tls_config **out, nb_err *err)
{
    *out = NULL;
    nng_tls_config *cfg;
    int rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT);
    if (rv == NNG_ENOTSUP)
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: TLS is not available in this nng build (nng_tls_config_alloc: "
                          "%s); use tcp:// or link an nng built with a TLS engine",
                          url, nng_strerror(rv));
    if (rv)
        return nng_fail(err, NB_EINTERNAL, rv, "%s: nng_tls_config_alloc", url);
    nb_code c = NB_OK;
    const char *cert = o->tls_cert_key_file, *ca = o->tls_ca_file;
    if (server && !(cert && cert[0])) {
        c = nb_err_set(err, NB_EINVAL,
                       "%s: a tls+tcp:// server needs opts.tls_cert_key_file "
                       "(one PEM file with certificate and unencrypted key)",
                       url);
        goto out;
    }
    if (!server && !(ca && ca[0])) {
        c = nb_err_set(err, NB_EINVAL,
                       "%s: a tls+tcp:// client needs opts.tls_ca_file to verify the server",
                       url);
        goto out;
    }
    if (cert && cert[0] && (rv = nng_tls_config_cert_key_file(cfg, cert, NULL))) {
        c = nng_fail(err, NB_EINVAL, rv, "%s: loading TLS certificate and key from %s", url,
                     cert);
        goto out;
    }
    if (ca && ca[0]) {
        if ((rv = nng_tls_config_ca_file(cfg, ca))) {
            c = nng_fail(err, NB_EINVAL, rv, "%s: loading TLS CA certificates from %s", url, ca);
            goto out;
        }
        if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED))) {
            c = nng_fail(err, NB_EINTERNAL, rv, "%s: TLS auth mode", url);
            goto out;
        }
    } else if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE))) {
        c = nng_fail(err, NB_EINTERNAL, rv, "%s: TLS auth mode", url);
        goto out;
    }
    if (!server) {
        /* Our own config replaces nng's default one, which would have taken
         * the server name from the URL; do the same. */
        const char *name = o->tls_server_name;
        nng_url *u = NULL;
        if (!(name && name[0])) {
            if ((rv = nng_url_parse(&u, url))) {
                c = nng_fail(err, NB_EINVAL, rv, "%s: parsing URL", url);
                goto out;
            }
            name = u->u_hostname;
            unsigned char ip[16];
            if (inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1) {
                c = nb_err_set(err, NB_EINVAL,
                               "%s: the host is an IP address, which this nng's TLS engine "
                               "(mbedTLS 2.28) cannot match against a certificate; set "
                               "opts.tls_server_name (--tls-server-name) to a DNS name the "
                               "server's certificate carries",
                               url);
                nng_url_free(u);
                goto out;
            }
        }
        rv = nng_tls_config_server_name(cfg, name);
        nng_url_free(u);
        if (rv) {
            c = nng_fail(err, NB_EINVAL, rv, "%s: TLS server name", url);
            goto out;
        }
    }
out:
    if (c != NB_OK)
        nng_tls_config_free(cfg);
    else
        *out = cfg;
    return c;
}

/* ------------------------------------------------------ response cache */

/* One cached (or in-progress) response, keyed by (request_id, method). */
typedef struct cache_ent {
    uint64_t id, key_hash, payload_hash;
    char *method;
    int done;                 /* 0 while the first execution runs */
    int waiters;              /* duplicates waiting on it: not evictable */
    int status;
    char *message;
    uint8_t *payload;
    size_t len;
    struct cache_ent *hnext;  /* bucket chain */
    struct cache_ent *prev, *next; /* LRU list, newest at head */
} cache_ent;

typedef enum { CACHE_MISS, CACHE_HIT, CACHE_CONFLICT, CACHE_TIMEOUT, CACHE_STOPPED } cache_res;

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

    pthread_mutex_t cache_mu;
    pthread_cond_t cache_cv; /* an entry finished, or stopping */
    cache_ent **buckets;
    size_t nbuckets;
    cache_ent *lru_head, *lru_tail;
    int cache_count, cache_max;
    size_t cache_bytes, cache_max_bytes;

    nb_rpc_server_stats stats; /* updated with __atomic builtins */
};

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

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
    /* FNV-1a over 8-byte words: fast, and good enough to spot a reused id. */
    const uint8_t *b = p;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        b += 8;
        n -= 8;
    }
    while (n--)
        h = (h ^ *b++) * 0x100000001b3ull;
    return h;
}

static uint64_t key_hash(uint64_t id, const char *method)
{
    return hash_bytes(method, strlen(method), 0xcbf29ce484222325ull ^ (id * 0x9e3779b97f4a7c15ull));
}

static void lru_unlink(nb_rpc_server *s, cache_ent *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        s->lru_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->lru_tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_head(nb_rpc_server *s, cache_ent *e)
{
    e->prev = NULL;
    e->next = s->lru_head;
    if (s->lru_head)
        s->lru_head->prev = e;
    s->lru_head = e;
    if (!s->lru_tail)
        s->lru_tail = e;
}

static void ent_free(cache_ent *e)
{
    free(e->method);
    free(e->message);
    free(e->payload);
    free(e);
}

/* Unlinks e from its bucket and the LRU list and frees it (cache_mu held). */
static void cache_remove(nb_rpc_server *s, cache_ent *e)
{
    cache_ent **pp = &s->buckets[e->key_hash & (s->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = e->hnext;
    lru_unlink(s, e);
    s->cache_count--;
    s->cache_bytes -= e->len;
    ent_free(e);
}

static void cache_evict(nb_rpc_server *s, const cache_ent *keep)
{
    cache_ent *e = s->lru_tail;
    while (e && (s->cache_count > s->cache_max || s->cache_bytes > s->cache_max_bytes)) {
        cache_ent *prev = e->prev;
        if (e != keep && e->done && e->waiters == 0)
            cache_remove(s, e);
        e = prev;
    }
}

/* Copies a finished entry's response out (cache_mu held). */
static int ent_copy(const cache_ent *e, int *status, char *msg, size_t msg_cap, uint8_t **pl,
                    size_t *len)
{
    *status = e->status;
    snprintf(msg, msg_cap, "%s", e->message ? e->message : "");
    *pl = NULL;
    *len = 0;
    if (e->len) {
        if (!(*pl = malloc(e->len)))
            return -1;
        memcpy(*pl, e->payload, e->len);
        *len = e->len;
    }
    return 0;
}

/* Looks (id, method) up.  MISS inserts an in-progress entry (*out) that the
 * caller must finish with cache_finish; HIT copies the first response;
 * a duplicate of a request still running waits for it until the deadline. */
static cache_res cache_begin(nb_rpc_server *s, uint64_t id, const char *method,
                             uint64_t payload_hash, int64_t deadline_unix_ms, cache_ent **out,
                             int *status, char *msg, size_t msg_cap, uint8_t **pl, size_t *len)
{
    *out = NULL;
    uint64_t kh = key_hash(id, method);
    pthread_mutex_lock(&s->cache_mu);
    cache_ent *e = s->buckets[kh & (s->nbuckets - 1)];
    while (e && !(e->id == id && e->key_hash == kh && strcmp(e->method, method) == 0))
        e = e->hnext;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->method = dup_str(method))) {
            free(e);
            pthread_mutex_unlock(&s->cache_mu);
            return CACHE_MISS; /* no memory: run uncached rather than fail */
        }
        e->id = id;
        e->key_hash = kh;
        e->payload_hash = payload_hash;
        cache_ent **b = &s->buckets[kh & (s->nbuckets - 1)];
        e->hnext = *b;
        *b = e;
        lru_push_head(s, e);
        s->cache_count++;
        cache_evict(s, e);
        *out = e;
        pthread_mutex_unlock(&s->cache_mu);
        return CACHE_MISS;
    }
    if (e->payload_hash != payload_hash) {
        pthread_mutex_unlock(&s->cache_mu);
        return CACHE_CONFLICT;
    }
    e->waiters++;
    cache_res r = CACHE_HIT;
    while (!e->done) {
        if (s->stopping) {
            r = CACHE_STOPPED;
            break;
        }
        int64_t left = deadline_unix_ms ? deadline_unix_ms - nb_wall_ms() : 1000;
        if (left <= 0) {
            r = CACHE_TIMEOUT;
            break;
        }
        if (left > 1000)
            left = 1000; /* wake to re-check stopping and the wall clock */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (long)(left % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cache_cv, &s->cache_mu, &ts);
    }
    if (r == CACHE_HIT) {
        if (ent_copy(e, status, msg, msg_cap, pl, len) != 0) {
            *status = NB_RPC_RESOURCE_EXHAUSTED;
            snprintf(msg, msg_cap, "out of memory replaying a cached response");
        }
        lru_unlink(s, e);
        lru_push_head(s, e);
    }
    e->waiters--;
    pthread_mutex_unlock(&s->cache_mu);
    return r;
}

static void cache_finish(nb_rpc_server *s, cache_ent *e, int status, const char *message,
                         const uint8_t *pl, size_t len)
{
    pthread_mutex_lock(&s->cache_mu);
    e->status = status;
    int kept = (e->message = dup_str(message)) != NULL;
    if (kept && len) {
        if ((e->payload = malloc(len))) {
            memcpy(e->payload, pl, len);
            e->len = len;
        } else {
            kept = 0;
        }
    }
    e->done = 1;
    if (!kept) {
        /* Out of memory: waiters learn so; later duplicates rerun rather
         * than replay a truncated answer. */
        e->status = NB_RPC_RESOURCE_EXHAUSTED;
        free(e->message);
        e->message = NULL;
    }
    s->cache_bytes += e->len;
    if (!kept && e->waiters == 0)
        cache_remove(s, e);
    else
        cache_evict(s, e);
    pthread_cond_broadcast(&s->cache_cv);
    pthread_mutex_unlock(&s->cache_mu);
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

/* Worker methods take the worker key only, admin methods the admin key, the rest a client
 * (or admin) key: a board's key cannot submit, a laptop's key cannot report results. */
static int check_role(unsigned flags, unsigned roles, const char *name, char *msg, size_t cap)
{
    unsigned need = (flags & NB_RPC_WORKER)  ? NB_WIRE_ROLE_WORKER
                    : (flags & NB_RPC_ADMIN) ? NB_WIRE_ROLE_ADMIN
                                             : NB_WIRE_ROLE_CLIENT;
    if (roles & need)
        return NB_RPC_OK;
    snprintf(msg, cap, "%s: needs the %s credential; the request was signed with the %s key",
             name, nb_wire_role_name(need), nb_wire_role_name(roles));
    return NB_RPC_PERMISSION_DENIED;
}

/* A mutating request id seen within the clock window again, after the response cache let
 * it go: a replay, refused (a resend the cache still holds never gets here). */
static int check_replay(nb_rpc_server *s, uint64_t id, const char *method, const char *name,
                        char *msg, size_t cap)
{
    if (!s->replay)
        return NB_RPC_OK;
    switch (nb_replay_check(s->replay, id, key_hash(id, method), nb_wall_ms())) {
    case NB_REPLAY_NEW: return NB_RPC_OK;
    case NB_REPLAY_SEEN:
        snprintf(msg, cap, "%s: request id %llu was already used within the last %lld s", name,
                 (unsigned long long)id, 2 * NB_WIRE_SKEW_MAX_MS / 1000);
        return NB_RPC_ALREADY_EXISTS;
    case NB_REPLAY_FULL: break;
    }
    snprintf(msg, cap, "%s: more than %d requests within %lld s; try again later", name,
             NB_RPC_REPLAY_IDS, 2 * NB_WIRE_SKEW_MAX_MS / 1000);
    return NB_RPC_RESOURCE_EXHAUSTED;
}

/* Decodes, checks and runs one request; consumes in; returns the reply. */
static nng_msg *serve(nb_rpc_server *s, nng_msg *in)
{
    size_t n = nng_msg_len(in);
    uint64_t id = 0;
    int st;
    char msg[NB_ERR_MSG_MAX] = "";
    uint8_t *pl = NULL;
    size_t pl_len = 0;
    Npubench__RequestEnvelope *env = NULL;
    nb_err e = {0};
    char name[NB_WIRE_METHOD_MAX + 1];
    unsigned roles = 0;
    const char *key = NULL;
    int64_t deadline = 0;

    STAT(s, requests);
    /* inproc does not enforce NNG_OPT_RECVMAXSZ; the stream transports
     * drop the connection before we see such a message. */
    if (n > s->max_msg) {
        STAT(s, oversize);
        st = NB_RPC_RESOURCE_EXHAUSTED;
        snprintf(msg, sizeof msg, "request of %zu bytes exceeds the server's %zu-byte limit", n,
                 s->max_msg);
        goto reply;
    }
    if (nb_wire_unpack(&npubench__request_envelope__descriptor, nng_msg_body(in), n,
                       n + ENVELOPE_UNPACK_SLACK, &env, &e) != NB_OK) {
        STAT(s, malformed);
        st = e.code == NB_EINVAL ? NB_RPC_INVALID_ARGUMENT : nb_rpc_status_from_code(e.code);
        snprintf(msg, sizeof msg, "%s", e.msg);
        goto reply;
    }
    id = env->request_id;
    sanitize(name, sizeof name, env->method);
    if (nb_wire_request_verify_keys(env, &s->keys, &roles, &key, &e) != NB_OK) {
        STAT(s, unauthenticated);
        st = NB_RPC_UNAUTHENTICATED;
        snprintf(msg, sizeof msg, "%s", e.msg);
        goto reply;
    }
    if (nb_wire_request_clock(env, nb_wall_ms(), s->keys.n > 0, &deadline, &e) != NB_OK) {
        if (e.code == NB_ETIMEOUT)
            STAT(s, expired);
        st = nb_rpc_status_from_code(e.code);
        snprintf(msg, sizeof msg, "%s", e.msg);
        goto reply;
    }
    if (strlen(env->method) > NB_WIRE_METHOD_MAX) {
        st = NB_RPC_INVALID_ARGUMENT;
        snprintf(msg, sizeof msg, "method name '%s...' longer than %d bytes", name,
                 NB_WIRE_METHOD_MAX);
        goto reply;
    }
    if (strcmp(env->method, NB_RPC_HEALTH_CHECK) == 0) {
        st = health_check(s, env, &pl, &pl_len, msg, sizeof msg);
        goto reply;
    }
    const handler *h = find_handler(s, env->method);
    if (!h) {
        STAT(s, unimplemented);
        st = NB_RPC_UNIMPLEMENTED;
        snprintf(msg, sizeof msg, "unknown method '%s' on %s", name, s->url);
        goto reply;
    }
    if ((st = check_role(h->flags, roles, name, msg, sizeof msg)))
        goto reply;
    cache_ent *ent = NULL;
    if (!(h->flags & NB_RPC_READONLY) && s->cache_max > 0) {
        uint64_t ph = hash_bytes(env->payload.data, env->payload.len, 0x84222325cbf29ce4ull);
        cache_res r = cache_begin(s, id, env->method, ph, deadline, &ent, &st, msg,
                                  sizeof msg, &pl, &pl_len);
        switch (r) {
        case CACHE_MISS:
            break;
        case CACHE_HIT:
            STAT(s, replayed);
            goto reply;
        case CACHE_CONFLICT:
            st = NB_RPC_INVALID_ARGUMENT;
            snprintf(msg, sizeof msg,
                     "%s: request_id %llu was already used for a different payload", name,
                     (unsigned long long)id);
            goto reply;
        case CACHE_TIMEOUT:
            STAT(s, expired);
            st = NB_RPC_DEADLINE_EXCEEDED;
            snprintf(msg, sizeof msg,
                     "%s: deadline passed while the first copy of request %llu was running",
                     name, (unsigned long long)id);
            goto reply;
        case CACHE_STOPPED:
            st = NB_RPC_UNAVAILABLE;
            snprintf(msg, sizeof msg, "server shutting down");
            goto reply;
        }
    }
    if (!(h->flags & NB_RPC_READONLY) &&
        (st = check_replay(s, id, env->method, name, msg, sizeof msg))) {
        if (ent)
            cache_finish(s, ent, st, msg, NULL, 0);
        goto reply;
    }
    nb_rpc_request req = {env->method, id, deadline, env->payload.data, env->payload.len,
                          roles};
    nb_rpc_reply rep;
    memset(&rep, 0, sizeof rep);
    STAT(s, handled);
    st = h->fn(h->user, &req, &rep);
    rep.message[sizeof rep.message - 1] = '\0';
    if (!status_valid(st)) {
        snprintf(msg, sizeof msg, "%s: handler returned invalid status %d", name, st);
        st = NB_RPC_INTERNAL;
        free(rep.payload);
    } else if (rep.len && !rep.payload) {
        snprintf(msg, sizeof msg, "%s: handler returned %zu payload bytes at NULL", name,
                 rep.len);
        st = NB_RPC_INTERNAL;
    } else if (rep.len > s->max_msg - ENVELOPE_SLACK) {
        snprintf(msg, sizeof msg, "%s: response of %zu bytes exceeds the %zu-byte message limit",
                 name, rep.len, s->max_msg);
        st = NB_RPC_RESOURCE_EXHAUSTED;
        free(rep.payload);
    } else {
        memcpy(msg, rep.message, sizeof msg);
        pl = rep.payload;
        pl_len = rep.len;
    }
    if (ent)
        cache_finish(s, ent, st, msg, pl, pl_len);

reply:;
    nng_msg *out = make_reply(key, id, st, msg, pl, pl_len);
    free(pl);
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

static nb_code bound_url(nb_rpc_server *s, const char *url, nb_err *err)
{
    nng_url *u = NULL;
    if (strncmp(url, "ipc://", 6) == 0 || strncmp(url, "inproc://", 9) == 0 ||
        nng_url_parse(&u, url) != 0) {
        s->url = dup_str(url);
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

static nb_code check_max_msg(const char *url, const nb_rpc_opts *o, nb_err *err)
{
    if (o->max_msg_bytes && o->max_msg_bytes < 2 * ENVELOPE_SLACK)
        return nb_err_set(err, NB_EINVAL, "%s: opts.max_msg_bytes %zu below the minimum %d",
                          url, o->max_msg_bytes, 2 * ENVELOPE_SLACK);
    return NB_OK;
}

/* The socket of a server (rep0) or client (req0) with its message limit.
 * TLS first: without a TLS engine nng lacks the tls+tcp transport too, and
 * "TLS is not available" says more than "not supported". */
static nb_code open_socket(const char *url, const nb_rpc_opts *o, int server,
                           nng_tls_config **tls, nng_socket *sock, size_t max_msg, nb_err *err)
{
    nb_code c;
    if (url_is_tls(url) && (c = tls_setup(url, o, server, tls, err)))
        return c;
    int rv = server ? nng_rep0_open(sock) : nng_req0_open(sock);
    if (rv)
        return nng_fail(err, NB_EINTERNAL, rv, "%s: %s", url,
                        server ? "nng_rep0_open" : "nng_req0_open");
    nng_socket_set_size(*sock, NNG_OPT_RECVMAXSZ, max_msg);
    return NB_OK;
}

nb_code nb_rpc_server_open(const char *url, const nb_rpc_opts *opts, nb_rpc_server **out,
                           nb_err *err)
{
    static const nb_rpc_opts none;
    const nb_rpc_opts *o = opts ? opts : &none;
    *out = NULL;
    nb_code c = check_url(url, err);
    if (c)
        return c;
    if (o->contexts < 0 || o->contexts > MAX_CONTEXTS || o->threads < 0 ||
        o->threads > MAX_THREADS)
        return nb_err_set(err, NB_EINVAL,
                          "%s: opts.contexts %d / opts.threads %d out of range (0..%d / 0..%d)",
                          url, o->contexts, o->threads, MAX_CONTEXTS, MAX_THREADS);
    if ((c = check_max_msg(url, o, err)))
        return c;

    nb_rpc_server *s = calloc(1, sizeof *s);
    if (!s)
        return nb_err_set(err, NB_ENOMEM, "out of memory opening %s", url);
    s->max_msg = o->max_msg_bytes ? o->max_msg_bytes : NB_RPC_MAX_MSG_DEFAULT;
    s->nctx = o->contexts ? o->contexts : DEFAULT_CONTEXTS;
    s->nthreads = o->threads ? o->threads : DEFAULT_THREADS;
    s->cache_max = o->cache_entries < 0 ? 0
                   : o->cache_entries ? o->cache_entries
                                      : DEFAULT_CACHE_ENTRIES;
    s->cache_max_bytes = o->cache_bytes ? o->cache_bytes : DEFAULT_CACHE_BYTES;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    pthread_mutex_init(&s->health_mu, NULL);
    pthread_mutex_init(&s->cache_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cache_cv, &ca);
    pthread_condattr_destroy(&ca);
    s->sock = (nng_socket)NNG_SOCKET_INITIALIZER;

    if ((c = nb_wire_keys_init(&s->keys, o->secret, o->worker_secret, o->admin_secret, err)))
        goto fail;
    if (s->keys.n && (c = nb_replay_open(NB_RPC_REPLAY_IDS, 2 * NB_WIRE_SKEW_MAX_MS, &s->replay,
                                         err)))
        goto fail;
    if (s->cache_max > 0) {
        size_t nb = 16;
        while (nb < (size_t)s->cache_max * 2)
            nb *= 2;
        s->nbuckets = nb;
        if (!(s->buckets = calloc(nb, sizeof *s->buckets))) {
            c = nb_err_set(err, NB_ENOMEM, "out of memory for the response cache");
            goto fail;
        }
    }
    if ((c = add_service(s, "", 0, err)) ||
        (c = add_service(s, "grpc.health.v1.Health", strlen("grpc.health.v1.Health"), err)))
        goto fail;

    if ((c = open_socket(url, o, 1, &s->tls, &s->sock, s->max_msg, err)))
        goto fail;
    int rv;
    if ((rv = nng_listener_create(&s->listener, s->sock, url))) {
        c = nng_fail(err, NB_EINVAL, rv, "%s: cannot create listener", url);
        goto fail;
    }
    nng_listener_set_size(s->listener, NNG_OPT_RECVMAXSZ, s->max_msg); /* not on inproc */
    if (s->tls) {
        if ((rv = nng_listener_set_ptr(s->listener, NNG_OPT_TLS_CONFIG, s->tls))) {
            c = nng_fail(err, NB_EINTERNAL, rv, "%s: setting TLS config", url);
            goto fail;
        }
    }
    if ((rv = nng_listener_start(s->listener, 0))) {
        c = nng_fail(err, rv == NNG_EADDRINUSE ? NB_EUNAVAIL : NB_EIO, rv,
                     "%s: cannot listen", url);
        goto fail;
    }
    if ((c = bound_url(s, url, err)))
        goto fail;

    if (!(s->ctxs = calloc((size_t)s->nctx, sizeof *s->ctxs)) ||
        !(s->threads = calloc((size_t)s->nthreads, sizeof *s->threads))) {
        c = nb_err_set(err, NB_ENOMEM, "out of memory for %d contexts", s->nctx);
        goto fail;
    }
    for (int i = 0; i < s->nctx; i++) {
        srv_ctx *x = &s->ctxs[i];
        x->srv = s;
        if ((rv = nng_aio_alloc(&x->aio, ctx_cb, x))) {
            c = nng_fail(err, NB_ENOMEM, rv, "%s: nng_aio_alloc", url);
            goto fail;
        }
        s->nctx_open++;
        if ((rv = nng_ctx_open(&x->ctx, s->sock))) {
            c = nng_fail(err, NB_EINTERNAL, rv, "%s: nng_ctx_open", url);
            goto fail;
        }
    }
    *out = s;
    return NB_OK;
fail:
    nb_rpc_server_close(s);
    return c;
}

static int method_ok(const char *m)
{
    size_t n = strlen(m), slashes = 0;
    if (n == 0 || n > NB_WIRE_METHOD_MAX || m[0] == '/' || m[n - 1] == '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = m[i];
        if (ch == '/')
            slashes++;
        else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || ch == '.' || ch == '_'))
            return 0;
    }
    return slashes == 1;
}

nb_code nb_rpc_server_handle(nb_rpc_server *srv, const char *method, nb_rpc_handler fn,
                             void *user, unsigned flags, nb_err *err)
{
    if (!srv || !method || !fn)
        return nb_err_set(err, NB_EINVAL, "nb_rpc_server_handle: NULL argument");
    if (srv->started)
        return nb_err_set(err, NB_EINVAL,
                          "%s: register handlers before nb_rpc_server_start", method);
    if (!method_ok(method))
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
    char *copy = dup_str(method);
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
    while (s->in_nng > 0)
        pthread_cond_wait(&s->idle_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->cache_mu);
    pthread_cond_broadcast(&s->cache_cv);
    pthread_mutex_unlock(&s->cache_mu);
    for (int i = 0; i < s->nthreads_started; i++)
        pthread_join(s->threads[i], NULL);
    if (nng_socket_id(s->sock) > 0)
        nng_close(s->sock);
    for (int i = 0; i < s->nctx_open; i++) {
        nng_aio_stop(s->ctxs[i].aio);
        if (s->ctxs[i].msg)
            nng_msg_free(s->ctxs[i].msg);
        nng_aio_free(s->ctxs[i].aio);
    }
    if (s->tls)
        nng_tls_config_free(s->tls);
    if (s->buckets) {
        while (s->lru_head)
            cache_remove(s, s->lru_head);
        free(s->buckets);
    }
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
    pthread_mutex_destroy(&s->health_mu);
    pthread_mutex_destroy(&s->cache_mu);
    pthread_cond_destroy(&s->cache_cv);
    free(s);
}

/* ------------------------------------------------------------- client */

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

nb_code nb_rpc_client_open(const char *url, const nb_rpc_opts *opts, nb_rpc_client **out,
                           nb_err *err)
{
    static const nb_rpc_opts none;
    const nb_rpc_opts *o = opts ? opts : &none;
    *out = NULL;
    nb_code c = check_url(url, err);
    if (c)
        return c;
    if (o->timeout_ms < 0 || o->resend_ms < 0)
        return nb_err_set(err, NB_EINVAL, "%s: negative opts.timeout_ms or opts.resend_ms", url);
    if ((c = check_max_msg(url, o, err)))
        return c;
    nb_rpc_client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return nb_err_set(err, NB_ENOMEM, "out of memory opening %s", url);
    cl->sock = (nng_socket)NNG_SOCKET_INITIALIZER;
    cl->max_msg = o->max_msg_bytes ? o->max_msg_bytes : NB_RPC_MAX_MSG_DEFAULT;
    cl->timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    cl->resend_ms = o->resend_ms;
    cl->id_base = random_u64();
    if (!(cl->url = dup_str(url)) ||
        (o->secret && o->secret[0] && !(cl->secret = dup_str(o->secret)))) {
        c = nb_err_set(err, NB_ENOMEM, "out of memory opening %s", url);
        goto fail;
    }
    if ((c = open_socket(url, o, 0, &cl->tls, &cl->sock, cl->max_msg, err)))
        goto fail;
    int rv;
    /* Back off up to 2 s between reconnects instead of nng's fixed 100 ms. */
    nng_socket_set_ms(cl->sock, NNG_OPT_RECONNMINT, 100);
    nng_socket_set_ms(cl->sock, NNG_OPT_RECONNMAXT, 2000);
    if ((rv = nng_dialer_create(&cl->dialer, cl->sock, url))) {
        c = nng_fail(err, NB_EINVAL, rv, "%s: cannot create dialer", url);
        goto fail;
    }
    nng_dialer_set_size(cl->dialer, NNG_OPT_RECVMAXSZ, cl->max_msg);
    if (cl->tls) {
        if ((rv = nng_dialer_set_ptr(cl->dialer, NNG_OPT_TLS_CONFIG, cl->tls))) {
            c = nng_fail(err, NB_EINTERNAL, rv, "%s: setting TLS config", url);
            goto fail;
        }
    }
    if ((rv = nng_dialer_start(cl->dialer, o->background_dial ? NNG_FLAG_NONBLOCK : 0))) {
        const char *hint = "";
        if (url_is_tls(url) && (rv == NNG_ECRYPTO || rv == NNG_EPEERAUTH))
            hint = " (TLS handshake failed: is the server's certificate signed by "
                   "opts.tls_ca_file, for the name in opts.tls_server_name or the URL?)";
        else if (url_is_tls(url) && rv == NNG_ECONNSHUT)
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
    free_secret(cli->secret);
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
        return nng_fail(err, NB_ENOMEM, rv, "%s: %s", method, cli->url);
    default:
        *status = NB_RPC_UNAVAILABLE;
        return nng_fail(err, NB_EUNAVAIL, rv, "%s: %s %s", method,
                        sending ? "sending to" : "waiting for", cli->url);
    }
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
    if (!method_ok(method)) {
        *status = NB_RPC_INVALID_ARGUMENT;
        return nb_err_set(err, NB_EINVAL, "nb_rpc_call: bad method name '%.*s'",
                          NB_WIRE_METHOD_MAX, method);
    }
    if (timeout_ms <= 0)
        timeout_ms = cli->timeout_ms;

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
    nng_msg *m;
    int rv;
    if ((rv = nng_msg_alloc(&m, n))) {
        *status = NB_RPC_RESOURCE_EXHAUSTED;
        return nng_fail(err, NB_ENOMEM, rv, "%s: allocating %zu bytes", method, n);
    }
    protobuf_c_message_pack(&env.base, nng_msg_body(m));

    nng_ctx ctx;
    nng_aio *aio = NULL;
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
    nng_msg *reply = NULL;
    Npubench__ResponseEnvelope *renv = NULL;
    if ((rv = nng_aio_result(aio))) {
        if (nng_aio_get_msg(aio))
            nng_msg_free(nng_aio_get_msg(aio));
        c = call_fail(cli, method, rv, 1, timeout_ms, status, err);
        goto done;
    }
    double left = timeout_ms - (nb_now_ms() - t0);
    nng_aio_set_timeout(aio, left < 1 ? 1 : (nng_duration)left);
    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    if ((rv = nng_aio_result(aio))) {
        c = call_fail(cli, method, rv, 0, timeout_ms, status, err);
        goto done;
    }
    reply = nng_aio_get_msg(aio);
    size_t rn = nng_msg_len(reply);
    if ((c = nb_wire_unpack(&npubench__response_envelope__descriptor, nng_msg_body(reply), rn,
                            rn + ENVELOPE_UNPACK_SLACK, &renv, err))) {
        *status = NB_RPC_DATA_LOSS;
        nb_err_prefix(err, "%s: response from %s: ", method, cli->url);
        goto done;
    }
    if (renv->request_id != request_id && renv->request_id != 0) {
        *status = NB_RPC_DATA_LOSS;
        c = nb_err_set(err, NB_EMISMATCH, "%s: response for request %llu, expected %llu",
                       method, (unsigned long long)renv->request_id,
                       (unsigned long long)request_id);
        goto done;
    }
    int rs = status_valid((int)renv->status) ? (int)renv->status : NB_RPC_UNKNOWN;
    nb_err ve = {0};
    if (nb_wire_response_verify(renv, cli->secret, &ve) != NB_OK) {
        *status = NB_RPC_UNAUTHENTICATED;
        if (rs == NB_RPC_UNAUTHENTICATED)
            c = nb_err_set(err, NB_EAUTH, "%s: %s refused our request: %s", method, cli->url,
                           renv->message);
        else
            c = nb_err_set(err, NB_EAUTH, "%s: %s: %s", method, cli->url, ve.msg);
        goto done;
    }
    *status = rs;
    if (msg && !(*msg = dup_str(renv->message))) {
        *status = NB_RPC_RESOURCE_EXHAUSTED;
        c = nb_err_set(err, NB_ENOMEM, "%s: out of memory copying the response", method);
        goto done;
    }
    if (resp && renv->payload.len) {
        if (!(*resp = malloc(renv->payload.len))) {
            if (msg) {
                free(*msg);
                *msg = NULL;
            }
            *status = NB_RPC_RESOURCE_EXHAUSTED;
            c = nb_err_set(err, NB_ENOMEM, "%s: out of memory copying %zu response bytes",
                           method, renv->payload.len);
            goto done;
        }
        memcpy(*resp, renv->payload.data, renv->payload.len);
        if (resp_len)
            *resp_len = renv->payload.len;
    }
    if (rs != NB_RPC_OK)
        c = nb_err_set(err, nb_rpc_code_from_status(rs), "%s: %s: %s", method,
                       nb_rpc_status_name(rs), renv->message[0] ? renv->message : "(no message)");
done:
    nb_wire_free(renv);
    if (reply)
        nng_msg_free(reply);
    nng_aio_free(aio);
    nng_ctx_close(ctx);
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

nb_code nb_rpc_call_pb(nb_rpc_client *cli, const char *method, const void *req_msg,
                       const ProtobufCMessageDescriptor *resp_desc, int timeout_ms,
                       void *resp_out, int *status, nb_err *err)
{
    int st_local;
    if (!status)
        status = &st_local;
    *status = NB_RPC_INTERNAL;
    if (!resp_out || !resp_desc)
        return nb_err_set(err, NB_EINVAL, "nb_rpc_call_pb: NULL argument");
    ProtobufCMessage *none = NULL;
    memcpy(resp_out, &none, sizeof none);
    uint8_t *buf, *rb = NULL;
    size_t n, rn = 0;
    nb_code c = nb_wire_pack(req_msg, &buf, &n, err);
    if (c)
        return nb_err_prefix(err, "%s: ", method);
    c = nb_rpc_call(cli, method, buf, n, timeout_ms, status, NULL, &rb, &rn, err);
    free(buf);
    if (c == NB_OK && (c = nb_wire_unpack(resp_desc, rb, rn, 0, resp_out, err))) {
        *status = NB_RPC_DATA_LOSS;
        nb_err_prefix(err, "%s: response: ", method);
    }
    free(rb);
    return c;
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
