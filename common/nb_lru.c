/* nb_lru: a chained hash table (doubling as it fills) threaded on a doubly linked list whose
 * head is the most recently used entry; eviction walks from the tail. */
#include "nb_lru.h"

#include <stdlib.h>

struct nb_lru_node {
    uint64_t hash;
    void *value;
    size_t cost;
    int pins;
    nb_lru_node *hnext;      /* bucket chain */
    nb_lru_node *prev, *next; /* recency list, newest at head */
};

struct nb_lru {
    nb_lru_opts o;
    nb_lru_node **buckets;
    size_t nbuckets; /* a power of two */
    nb_lru_node *head, *tail;
    size_t count, cost;
    uint64_t evicted;
};

enum { MIN_BUCKETS = 16 };

nb_code nb_lru_new(const nb_lru_opts *o, nb_lru **out, nb_err *err)
{
    *out = NULL;
    if (!o->match)
        return nb_err_set(err, NB_EINVAL, "nb_lru_new: opts.match is required");
    nb_lru *l = calloc(1, sizeof *l);
    size_t nb = MIN_BUCKETS;
    /* Sized for the count limit up front, so that a bounded cache never rehashes. */
    while (o->max_count && nb < o->max_count * 2 && nb < ((size_t)1 << 30))
        nb *= 2;
    if (!l || !(l->buckets = calloc(nb, sizeof *l->buckets))) {
        free(l);
        return nb_err_set(err, NB_ENOMEM, "out of memory for a cache of %zu entries",
                          o->max_count);
    }
    l->o = *o;
    l->nbuckets = nb;
    *out = l;
    return NB_OK;
}

static nb_lru_node **bucket(const nb_lru *l, uint64_t hash)
{
    return &l->buckets[hash & (l->nbuckets - 1)];
}

static void list_unlink(nb_lru *l, nb_lru_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

static void list_push_head(nb_lru *l, nb_lru_node *n)
{
    n->prev = NULL;
    n->next = l->head;
    if (l->head)
        l->head->prev = n;
    l->head = n;
    if (!l->tail)
        l->tail = n;
}

/* Unlinks n from its bucket and the list, drops its value and frees it. */
static void unlink_drop(nb_lru *l, nb_lru_node *n)
{
    nb_lru_node **pp = bucket(l, n->hash);
    while (*pp && *pp != n)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = n->hnext;
    list_unlink(l, n);
    l->count--;
    l->cost -= n->cost;
    if (l->o.drop)
        l->o.drop(l->o.user, n->value);
    free(n);
}

static int over_budget(const nb_lru *l)
{
    return (l->o.max_count && l->count > l->o.max_count) ||
           (l->o.max_cost && l->cost > l->o.max_cost);
}

/* Evicts from the least recently used end while over budget, passing keep and pinned ones. */
static void evict(nb_lru *l, const nb_lru_node *keep)
{
    nb_lru_node *n = l->tail;
    while (n && over_budget(l)) {
        nb_lru_node *prev = n->prev;
        if (n != keep && n->pins == 0) {
            unlink_drop(l, n);
            l->evicted++;
        }
        n = prev;
    }
}

/* Doubles the table when chains would grow past two on average; failing to is harmless. */
static void grow(nb_lru *l)
{
    if (l->count < l->nbuckets * 2)
        return;
    size_t nb = l->nbuckets * 2;
    nb_lru_node **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < l->nbuckets; i++)
        for (nb_lru_node *n = l->buckets[i], *next; n; n = next) {
            next = n->hnext;
            n->hnext = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
        }
    free(l->buckets);
    l->buckets = b;
    l->nbuckets = nb;
}

nb_lru_node *nb_lru_find(const nb_lru *l, uint64_t hash, const void *key)
{
    for (nb_lru_node *n = *bucket(l, hash); n; n = n->hnext)
        if (n->hash == hash && l->o.match(n->value, key))
            return n;
    return NULL;
}

void nb_lru_touch(nb_lru *l, nb_lru_node *n)
{
    list_unlink(l, n);
    list_push_head(l, n);
}

nb_code nb_lru_put(nb_lru *l, uint64_t hash, void *value, size_t cost, nb_lru_node **node,
                   nb_err *err)
{
    if (node)
        *node = NULL;
    nb_lru_node *n = calloc(1, sizeof *n);
    if (!n)
        return nb_err_set(err, NB_ENOMEM, "out of memory for a cache entry");
    n->hash = hash;
    n->value = value;
    n->cost = cost;
    grow(l);
    nb_lru_node **b = bucket(l, hash);
    n->hnext = *b;
    *b = n;
    list_push_head(l, n);
    l->count++;
    l->cost += cost;
    evict(l, n);
    if (node)
        *node = n;
    return NB_OK;
}

void nb_lru_set_cost(nb_lru *l, nb_lru_node *n, size_t cost)
{
    l->cost = l->cost - n->cost + cost;
    n->cost = cost;
    evict(l, n);
}

void nb_lru_pin(nb_lru_node *n, int delta)
{
    n->pins += delta;
}

int nb_lru_pinned(const nb_lru_node *n)
{
    return n->pins > 0;
}

void nb_lru_remove(nb_lru *l, nb_lru_node *n)
{
    unlink_drop(l, n);
}

void *nb_lru_value(const nb_lru_node *n)
{
    return n->value;
}

void nb_lru_get_stats(const nb_lru *l, nb_lru_stats *out)
{
    out->count = l->count;
    out->cost = l->cost;
    out->evicted = l->evicted;
}

void nb_lru_free(nb_lru *l)
{
    if (!l)
        return;
    while (l->head)
        unlink_drop(l, l->head);
    free(l->buckets);
    free(l);
}
