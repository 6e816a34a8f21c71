/* nb_db_traces: cache of reference (CPU/HF) token traces, keyed by what they
 * depend on, so verification need not regenerate them for every run. */
#ifndef NB_DB_TRACES_H
#define NB_DB_TRACES_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

typedef struct nb_db_trace_key {
    const char *model_digest;   /* required: sha256 of the model weights */
    const char *prompts_digest; /* required: sha256 of the prompt set */
    int n_tokens;               /* > 0: tokens generated per prompt */
    int k;                      /* > 0: top-k kept per step */
} nb_db_trace_key;

#define NB_DB_TRACE_BLOB_MAX (256u << 20)

/* Stores (replacing) the trace for key: either a path to a trace file or the
 * trace bytes themselves (exactly one of path / blob+len). */
nb_code nb_db_trace_put(nb_db *db, const nb_db_trace_key *key, const char *path,
                        const void *blob, size_t len, nb_err *err);

/* Looks key up; NB_ENOTFOUND if absent. Exactly one of *path and *blob is
 * set (malloc'ed; free() both). created_ms may be NULL. */
nb_code nb_db_trace_get(nb_db *db, const nb_db_trace_key *key, char **path, void **blob,
                        size_t *len, int64_t *created_ms, nb_err *err);

/* Forgets key's trace (e.g. the file vanished); NB_ENOTFOUND if absent. */
nb_code nb_db_trace_delete(nb_db *db, const nb_db_trace_key *key, nb_err *err);

#endif
