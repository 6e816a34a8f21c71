/* nb_db_replay: the answers of the mutating requests an authenticated coordinator ran
 * within the clock window, kept in the database: a captured request replayed after a restart
 * gets its first answer instead of running again. */
#ifndef NB_DB_REPLAY_H
#define NB_DB_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

#define NB_DB_REPLAY_PAYLOAD_MAX (64 * 1024) /* a larger answer is kept without its payload */

/* Creates the table if missing and drops the entries expired before now_ms. */
nb_code nb_db_replay_open(nb_db *db, int64_t now_ms, nb_err *err);

/* Drops the entries expired before now_ms. */
nb_code nb_db_replay_prune(nb_db *db, int64_t now_ms, nb_err *err);

/* Keeps the answer of request (id, key) until expires_ms. Written without an fsync of its
 * own: the WAL frame is written before this returns (a kill -9 keeps it) and reaches the
 * disk with the next synchronous commit. */
nb_code nb_db_replay_record(nb_db *db, uint64_t id, uint64_t key, int64_t expires_ms,
                            int status, const char *message, const uint8_t *payload,
                            size_t len, nb_err *err);

/* The answer kept for (id, key) and not expired at now_ms: *found = 1 with status, message
 * (cap bytes) and *payload (malloc'ed, *len bytes; NULL when empty). */
nb_code nb_db_replay_lookup(nb_db *db, uint64_t id, uint64_t key, int64_t now_ms, int *found,
                            int *status, char *message, size_t cap, uint8_t **payload,
                            size_t *len, nb_err *err);

#endif
