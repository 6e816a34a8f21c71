/* nb_rpc_cache: the idempotency cache of the RPC server — a hash of (request_id, method) to
 * the first response, in LRU order under an entry and a byte limit; duplicates wait on it. */
#include "nb_rpc_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_hash.h"
#include "nb_rpc_status.h"
#include "nb_time.h"

/* One cached (or in-progress) response, keyed by (request_id, method). */
struct nb_rpc_cache_entry {
    uint64_t id, key_hash, payload_hash;
    char *method;
    int done;                 /* 0 while the first execution runs */
    int waiters;              /* duplicates waiting on it: not evictable */
    int status;
    char *message;
    uint8_t *payload;
    size_t len;
    struct nb_rpc_cache_entry *hnext;  /* bucket chain */
    struct nb_rpc_cache_entry *prev, *next; /* LRU list, newest at head */
};

struct nb_rpc_cache {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* an entry finished, or stopping */
    int stopping;
    nb_rpc_cache_entry **buckets;
    size_t nbuckets;
    nb_rpc_cache_entry *lru_head, *lru_tail;
    int count, max_count;
    size_t bytes, max_bytes;
};

static uint64_t key_hash(uint64_t id, const char *method)
{
    return nb_hash_bytes(method, strlen(method), NB_HASH_SEED ^ (id * 0x9e3779b97f4a7c15ull));
}

static void lru_unlink(nb_rpc_cache *s, nb_rpc_cache_entry *e)
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

static void lru_push_head(nb_rpc_cache *s, nb_rpc_cache_entry *e)
{
    e->prev = NULL;
    e->next = s->lru_head;
    if (s->lru_head)
        s->lru_head->prev = e;
    s->lru_head = e;
    if (!s->lru_tail)
        s->lru_tail = e;
}

static void ent_free(nb_rpc_cache_entry *e)
{
    free(e->method);
    free(e->message);
    free(e->payload);
    free(e);
}

/* Unlinks e from its bucket and the LRU list and frees it (mu held). */
static void cache_remove(nb_rpc_cache *s, nb_rpc_cache_entry *e)
{
    nb_rpc_cache_entry **pp = &s->buckets[e->key_hash & (s->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = e->hnext;
    lru_unlink(s, e);
    s->count--;
    s->bytes -= e->len;
    ent_free(e);
}

static void cache_evict(nb_rpc_cache *s, const nb_rpc_cache_entry *keep)
{
    nb_rpc_cache_entry *e = s->lru_tail;
    while (e && (s->count > s->max_count || s->bytes > s->max_bytes)) {
        nb_rpc_cache_entry *prev = e->prev;
        if (e != keep && e->done && e->waiters == 0)
            cache_remove(s, e);
        e = prev;
    }
}

/* Copies a finished entry's response out (mu held). */
static int ent_copy(const nb_rpc_cache_entry *e, int *status, char *msg, size_t msg_cap,
                    uint8_t **pl, size_t *len)
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
nb_rpc_cache_res nb_rpc_cache_begin(nb_rpc_cache *s, uint64_t id, const char *method,
                                    const void *payload, size_t payload_len,
                                    int64_t deadline_unix_ms, nb_rpc_cache_entry **out,
                                    int *status, char *msg, size_t msg_cap, uint8_t **pl,
                                    size_t *len)
{
    *out = NULL;
    /* Only compared with the first copy's, to spot an id reused for another request. */
    uint64_t payload_hash = nb_hash_bytes(payload, payload_len, NB_HASH_SEED);
    uint64_t kh = key_hash(id, method);
    pthread_mutex_lock(&s->mu);
    nb_rpc_cache_entry *e = s->buckets[kh & (s->nbuckets - 1)];
    while (e && !(e->id == id && e->key_hash == kh && strcmp(e->method, method) == 0))
        e = e->hnext;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->method = strdup(method))) {
            free(e);
            pthread_mutex_unlock(&s->mu);
            return NB_RPC_CACHE_MISS; /* no memory: run uncached rather than fail */
        }
        e->id = id;
        e->key_hash = kh;
        e->payload_hash = payload_hash;
        nb_rpc_cache_entry **b = &s->buckets[kh & (s->nbuckets - 1)];
        e->hnext = *b;
        *b = e;
        lru_push_head(s, e);
        s->count++;
        cache_evict(s, e);
        *out = e;
        pthread_mutex_unlock(&s->mu);
        return NB_RPC_CACHE_MISS;
    }
    if (e->payload_hash != payload_hash) {
        pthread_mutex_unlock(&s->mu);
        return NB_RPC_CACHE_CONFLICT;
    }
    e->waiters++;
    nb_rpc_cache_res r = NB_RPC_CACHE_HIT;
    while (!e->done) {
        if (s->stopping) {
            r = NB_RPC_CACHE_STOPPED;
            break;
        }
        int64_t left = deadline_unix_ms ? deadline_unix_ms - nb_wall_ms() : 1000;
        if (left <= 0) {
            r = NB_RPC_CACHE_TIMEOUT;
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
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    if (r == NB_RPC_CACHE_HIT) {
        if (ent_copy(e, status, msg, msg_cap, pl, len) != 0) {
            *status = NB_RPC_RESOURCE_EXHAUSTED;
            snprintf(msg, msg_cap, "out of memory replaying a cached response");
        }
        lru_unlink(s, e);
        lru_push_head(s, e);
    }
    e->waiters--;
    pthread_mutex_unlock(&s->mu);
    return r;
}

void nb_rpc_cache_finish(nb_rpc_cache *s, nb_rpc_cache_entry *e, int status,
                         const char *message, const uint8_t *pl, size_t len)
{
    pthread_mutex_lock(&s->mu);
    e->status = status;
    int kept = (e->message = strdup(message)) != NULL;
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
    s->bytes += e->len;
    if (!kept && e->waiters == 0)
        cache_remove(s, e);
    else
        cache_evict(s, e);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

nb_code nb_rpc_cache_new(int max_entries, size_t max_bytes, nb_rpc_cache **out, nb_err *err)
{
    *out = NULL;
    nb_rpc_cache *s = calloc(1, sizeof *s);
    if (!s)
        return nb_err_set(err, NB_ENOMEM, "out of memory for the response cache");
    s->max_count = max_entries;
    s->max_bytes = max_bytes;
    size_t nb = 16;
    while (nb < (size_t)max_entries * 2)
        nb *= 2;
    s->nbuckets = nb;
    if (!(s->buckets = calloc(nb, sizeof *s->buckets))) {
        free(s);
        return nb_err_set(err, NB_ENOMEM, "out of memory for the response cache");
    }
    pthread_mutex_init(&s->mu, NULL);
    /* Waits are bounded by the wall-clock deadline, but measured on the monotonic clock so
     * that a clock step does not wake or stall them. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = s;
    return NB_OK;
}

void nb_rpc_cache_stop(nb_rpc_cache *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void nb_rpc_cache_free(nb_rpc_cache *s)
{
    if (!s)
        return;
    while (s->lru_head)
        cache_remove(s, s->lru_head);
    free(s->buckets);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
