/* nb_rpc_cache: the idempotency cache of the RPC server — (request_id, method) to the first
 * response in an nb_lru under an entry and a byte limit; duplicates wait on running ones. */
#include "nb_rpc_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_hash.h"
#include "nb_lru.h"
#include "nb_rpc_status.h"
#include "nb_time.h"

/* One cached (or in-progress) response.  Pinned in the LRU while its first execution runs
 * and while duplicates wait on it, so that their pointer stays valid. */
struct nb_rpc_cache_entry {
    uint64_t id, payload_hash;
    char *method;
    int done; /* 0 while the first execution runs */
    int status;
    char *message;
    uint8_t *payload;
    size_t len;
    nb_lru_node *node;
};

typedef struct cache_key {
    uint64_t id;
    const char *method;
} cache_key;

struct nb_rpc_cache {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* an entry finished, or stopping */
    int stopping;
    nb_lru *lru;       /* of nb_rpc_cache_entry, cost = payload bytes */
};

static uint64_t key_hash(uint64_t id, const char *method)
{
    return nb_hash_bytes(method, strlen(method), NB_HASH_SEED ^ (id * 0x9e3779b97f4a7c15ull));
}

static int ent_match(const void *value, const void *key)
{
    const nb_rpc_cache_entry *e = value;
    const cache_key *k = key;
    return e->id == k->id && strcmp(e->method, k->method) == 0;
}

static void ent_free(void *user, void *value)
{
    nb_rpc_cache_entry *e = value;
    free(e->method);
    free(e->message);
    free(e->payload);
    free(e);
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

/* A new in-progress entry, pinned until it finishes; NULL without memory. */
static nb_rpc_cache_entry *insert(nb_rpc_cache *s, uint64_t kh, uint64_t id, const char *method,
                                  uint64_t payload_hash)
{
    nb_rpc_cache_entry *e = calloc(1, sizeof *e);
    nb_err ignored = {0};
    if (!e || !(e->method = strdup(method)) ||
        nb_lru_put(s->lru, kh, e, 0, &e->node, &ignored) != NB_OK) {
        if (e)
            free(e->method);
        free(e);
        return NULL;
    }
    e->id = id;
    e->payload_hash = payload_hash;
    nb_lru_pin(e->node, 1);
    return e;
}

/* Waits (mu held) until e is done: HIT, or TIMEOUT at the deadline, or STOPPED. */
static nb_rpc_cache_res wait_done(nb_rpc_cache *s, const nb_rpc_cache_entry *e,
                                  int64_t deadline_unix_ms)
{
    while (!e->done) {
        if (s->stopping)
            return NB_RPC_CACHE_STOPPED;
        int64_t left = deadline_unix_ms ? deadline_unix_ms - nb_wall_ms() : 1000;
        if (left <= 0)
            return NB_RPC_CACHE_TIMEOUT;
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
    return NB_RPC_CACHE_HIT;
}

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
    cache_key key = {id, method};
    pthread_mutex_lock(&s->mu);
    nb_lru_node *n = nb_lru_find(s->lru, kh, &key);
    if (!n) {
        /* No memory for an entry: run uncached rather than fail. */
        *out = insert(s, kh, id, method, payload_hash);
        pthread_mutex_unlock(&s->mu);
        return NB_RPC_CACHE_MISS;
    }
    nb_rpc_cache_entry *e = nb_lru_value(n);
    if (e->payload_hash != payload_hash) {
        pthread_mutex_unlock(&s->mu);
        return NB_RPC_CACHE_CONFLICT;
    }
    nb_lru_pin(n, 1);
    nb_rpc_cache_res r = wait_done(s, e, deadline_unix_ms);
    if (r == NB_RPC_CACHE_HIT) {
        if (ent_copy(e, status, msg, msg_cap, pl, len) != 0) {
            *status = NB_RPC_RESOURCE_EXHAUSTED;
            snprintf(msg, msg_cap, "out of memory replaying a cached response");
        }
        nb_lru_touch(s->lru, n);
    }
    nb_lru_pin(n, -1);
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
    nb_lru_pin(e->node, -1);
    /* A transient failure (e.g. a result that could not be stored yet) is not the answer
     * for good: the client's retry under the same id must run again. */
    int transient = nb_rpc_status_transient(status);
    if ((!kept || transient) && !nb_lru_pinned(e->node))
        nb_lru_remove(s->lru, e->node);
    else
        nb_lru_set_cost(s->lru, e->node, e->len);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

nb_code nb_rpc_cache_new(int max_entries, size_t max_bytes, nb_rpc_cache **out, nb_err *err)
{
    *out = NULL;
    nb_rpc_cache *s = calloc(1, sizeof *s);
    if (!s)
        return nb_err_set(err, NB_ENOMEM, "out of memory for the response cache");
    nb_lru_opts lo = {.max_count = (size_t)max_entries,
                      .max_cost = max_bytes,
                      .match = ent_match,
                      .drop = ent_free};
    nb_code c = nb_lru_new(&lo, &s->lru, err);
    if (c) {
        free(s);
        return nb_err_prefix(err, "response cache: ");
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
    nb_lru_free(s->lru);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
