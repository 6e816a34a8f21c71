/* nb_lru: the one least-recently-used cache — hashed entries with a cost, dropped oldest first
 * past a count or cost budget, never while pinned; callers bring their own lock. */
#ifndef NB_LRU_H
#define NB_LRU_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

typedef struct nb_lru nb_lru;
typedef struct nb_lru_node nb_lru_node;

typedef struct nb_lru_opts {
    size_t max_count; /* entries kept at most [0 = no limit] */
    size_t max_cost;  /* sum of the entries' costs kept at most [0 = no limit] */
    /* Whether value has key (the key given to nb_lru_find). */
    int (*match)(const void *value, const void *key);
    /* value leaves the cache: evicted, removed, or the cache freed. Optional. */
    void (*drop)(void *user, void *value);
    void *user;
} nb_lru_opts;

nb_code nb_lru_new(const nb_lru_opts *o, nb_lru **out, nb_err *err);
/* Drops every entry (drop callback) and frees the cache. NULL ok. */
void nb_lru_free(nb_lru *l);

/* The entry whose value matches key among those inserted with hash; NULL if none. Does not
 * change the order: nb_lru_touch when the lookup counts as a use. */
nb_lru_node *nb_lru_find(const nb_lru *l, uint64_t hash, const void *key);
/* Makes n the most recently used entry. */
void nb_lru_touch(nb_lru *l, nb_lru_node *n);

/* Inserts value as the most recently used entry, then evicts past the budget (never the new
 * entry, which may alone exceed it). *node (optional) gets its handle. NB_ENOMEM leaves the
 * cache as it was and value with the caller. */
nb_code nb_lru_put(nb_lru *l, uint64_t hash, void *value, size_t cost, nb_lru_node **node,
                   nb_err *err);
/* Changes n's cost, then evicts past the budget (never n). */
void nb_lru_set_cost(nb_lru *l, nb_lru_node *n, size_t cost);
/* Pins (+1) or unpins (-1) n: pinned entries are never evicted, only removed. */
void nb_lru_pin(nb_lru_node *n, int delta);
/* Removes n and drops its value. */
void nb_lru_remove(nb_lru *l, nb_lru_node *n);

void *nb_lru_value(const nb_lru_node *n);
int nb_lru_pinned(const nb_lru_node *n);

typedef struct nb_lru_stats {
    size_t count;     /* entries now */
    size_t cost;      /* their summed cost */
    uint64_t evicted; /* entries evicted for the budget so far (not removed ones) */
} nb_lru_stats;
void nb_lru_get_stats(const nb_lru *l, nb_lru_stats *out);

#endif
