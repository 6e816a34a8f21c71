/* nb_replay: the request ids a server saw within the clock window, so a captured request
 * is refused for as long as its send time is still accepted (the response cache forgets
 * sooner: it is bounded by count and bytes, this set by time). */
#ifndef NB_REPLAY_H
#define NB_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

typedef struct nb_replay nb_replay;

/* A set of at most max_ids ids, each remembered for window_ms after it was first seen. */
nb_code nb_replay_open(size_t max_ids, int64_t window_ms, nb_replay **out, nb_err *err);

typedef enum nb_replay_res { NB_REPLAY_NEW, NB_REPLAY_SEEN, NB_REPLAY_FULL } nb_replay_res;

/* Records (id, method_hash) at now_ms: NEW the first time within the window, SEEN after,
 * FULL when max_ids ids are inside the window (nothing recorded: refuse the request).
 * Thread-safe. */
nb_replay_res nb_replay_check(nb_replay *r, uint64_t id, uint64_t method_hash, int64_t now_ms);

/* Forgets (id, method_hash): the request it recorded failed without effect (a transient
 * status), so its retry under the same id is not a replay. Thread-safe; no-op if absent. */
void nb_replay_forget(nb_replay *r, uint64_t id, uint64_t method_hash);

void nb_replay_close(nb_replay *r); /* NULL ok */

#endif
