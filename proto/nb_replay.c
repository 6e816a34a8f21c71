/* nb_replay: a ring of (id, expiry) in arrival order, so expiry is a pop from the head,
 * indexed by a chained hash over ring slots. */
#include "nb_replay.h"

#include <pthread.h>
#include <stdlib.h>

#define NIL UINT32_MAX

typedef struct slot {
    uint64_t id, mh;
    int64_t expires;
    uint32_t next; /* bucket chain */
    int forgotten; /* nb_replay_forget: kept in ring and chain until expiry, never matches */
} slot;

struct nb_replay {
    pthread_mutex_t mu;
    slot *ring;
    uint32_t *buckets;
    size_t cap, nbuckets, head, count;
    int64_t window;
};

static size_t bucket_of(const nb_replay *r, uint64_t id, uint64_t mh)
{
    uint64_t h = (id ^ (mh * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    return (size_t)(h >> 17) & (r->nbuckets - 1);
}

nb_code nb_replay_open(size_t max_ids, int64_t window_ms, nb_replay **out, nb_err *err)
{
    *out = NULL;
    if (max_ids == 0 || max_ids >= NIL)
        return nb_err_set(err, NB_EINVAL, "replay set: %zu ids, the range is 1..%u", max_ids,
                          NIL - 1);
    nb_replay *r = calloc(1, sizeof *r);
    size_t nb = 1;
    while (nb < max_ids)
        nb <<= 1;
    if (r) {
        r->ring = calloc(max_ids, sizeof *r->ring);
        r->buckets = malloc(nb * sizeof *r->buckets);
    }
    if (!r || !r->ring || !r->buckets) {
        nb_replay_close(r);
        return nb_err_set(err, NB_ENOMEM, "replay set: out of memory for %zu ids", max_ids);
    }
    for (size_t i = 0; i < nb; i++)
        r->buckets[i] = NIL;
    r->cap = max_ids;
    r->nbuckets = nb;
    r->window = window_ms;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return NB_OK;
}

/* Drops the oldest entry from its chain and the ring. */
static void pop_head(nb_replay *r)
{
    slot *s = &r->ring[r->head];
    uint32_t *p = &r->buckets[bucket_of(r, s->id, s->mh)];
    while (*p != NIL && *p != (uint32_t)r->head)
        p = &r->ring[*p].next;
    if (*p != NIL)
        *p = s->next;
    r->head = (r->head + 1) % r->cap;
    r->count--;
}

/* Appends an entry at the ring's tail and chains it into bucket b; the ring has room. */
static void push(nb_replay *r, size_t b, uint64_t id, uint64_t mh, int64_t expires)
{
    size_t at = (r->head + r->count) % r->cap;
    r->ring[at] = (slot){id, mh, expires, r->buckets[b], 0};
    r->buckets[b] = (uint32_t)at;
    r->count++;
}

nb_replay_res nb_replay_check(nb_replay *r, uint64_t id, uint64_t method_hash, int64_t now_ms)
{
    pthread_mutex_lock(&r->mu);
    while (r->count && r->ring[r->head].expires <= now_ms)
        pop_head(r);
    size_t b = bucket_of(r, id, method_hash);
    nb_replay_res res = NB_REPLAY_NEW;
    for (uint32_t i = r->buckets[b]; i != NIL; i = r->ring[i].next)
        if (r->ring[i].id == id && r->ring[i].mh == method_hash && !r->ring[i].forgotten) {
            res = NB_REPLAY_SEEN;
            break;
        }
    if (res == NB_REPLAY_NEW && r->count == r->cap)
        res = NB_REPLAY_FULL;
    if (res == NB_REPLAY_NEW)
        push(r, b, id, method_hash, now_ms + r->window);
    pthread_mutex_unlock(&r->mu);
    return res;
}


void nb_replay_forget(nb_replay *r, uint64_t id, uint64_t method_hash)
{
    pthread_mutex_lock(&r->mu);
    for (uint32_t i = r->buckets[bucket_of(r, id, method_hash)]; i != NIL; i = r->ring[i].next)
        if (r->ring[i].id == id && r->ring[i].mh == method_hash && !r->ring[i].forgotten) {
            r->ring[i].forgotten = 1;
            break;
        }
    pthread_mutex_unlock(&r->mu);
}

void nb_replay_close(nb_replay *r)
{
    if (!r)
        return;
    if (r->ring && r->buckets)
        pthread_mutex_destroy(&r->mu);
    free(r->ring);
    free(r->buckets);
    free(r);
}
