/* nb_rpc_cache: the server's idempotency cache — one execution per (request_id, method) of a
 * mutating method; duplicates get the first response, or wait while it is still running. */
#ifndef NB_RPC_CACHE_H
#define NB_RPC_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

typedef struct nb_rpc_cache nb_rpc_cache;
typedef struct nb_rpc_cache_entry nb_rpc_cache_entry;

typedef enum nb_rpc_cache_res {
    NB_RPC_CACHE_MISS,     /* run the handler (and finish the entry, if one was given) */
    NB_RPC_CACHE_HIT,      /* the first response was copied out */
    NB_RPC_CACHE_CONFLICT, /* the id was used before with a different payload */
    NB_RPC_CACHE_TIMEOUT,  /* the deadline passed while the first copy ran */
    NB_RPC_CACHE_STOPPED   /* nb_rpc_cache_stop was called while waiting */
} nb_rpc_cache_res;

/* A cache of at most max_entries responses and max_bytes payload bytes (both > 0); the least
 * recently used finished entries are dropped past either limit. */
nb_code nb_rpc_cache_new(int max_entries, size_t max_bytes, nb_rpc_cache **out, nb_err *err);

/* Looks (id, method) up.  MISS inserts an in-progress entry (*out) that the caller must
 * finish with nb_rpc_cache_finish (*out stays NULL when there was no memory for one: run
 * uncached); HIT copies the first response into *status, msg and the malloc'ed *pl (*len
 * bytes); a duplicate of a request still running waits for it until deadline_unix_ms (0 =
 * none). */
nb_rpc_cache_res nb_rpc_cache_begin(nb_rpc_cache *c, uint64_t id, const char *method,
                                    const void *payload, size_t payload_len,
                                    int64_t deadline_unix_ms, nb_rpc_cache_entry **out,
                                    int *status, char *msg, size_t msg_cap, uint8_t **pl,
                                    size_t *len);

/* Stores the response of an entry from nb_rpc_cache_begin and wakes its duplicates. */
void nb_rpc_cache_finish(nb_rpc_cache *c, nb_rpc_cache_entry *e, int status,
                         const char *message, const uint8_t *pl, size_t len);

/* Wakes every waiting duplicate with STOPPED; later waits stop at once.  Thread-safe. */
void nb_rpc_cache_stop(nb_rpc_cache *c);

/* Frees the cache and every entry; nobody may be inside it.  NULL ok. */
void nb_rpc_cache_free(nb_rpc_cache *c);

#endif
