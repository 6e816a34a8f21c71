/* nb_db_deploy: deployments (model build x backend x dtype x board) and the
 * per-model "reference deployment" that comparisons default to. */
#ifndef NB_DB_DEPLOY_H
#define NB_DB_DEPLOY_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

typedef struct nb_db_deployment {
    int64_t id;                            /* out: assigned by the database */
    char model[NB_DB_NAME_MAX];            /* required, e.g. "SmolLM2-135M-Instruct" */
    char weights_digest[NB_DB_DIGEST_MAX]; /* sha256 hex of the weights; "" = unknown */
    char backend[NB_DB_NAME_MAX];          /* required: "cpu", "npu", ... */
    char dtype[NB_DB_NAME_MAX];            /* required: "q4_1", "bf16", ... */
    char board[NB_DB_NAME_MAX];            /* required: board name */
    int64_t created_ms;                    /* out */
} nb_db_deployment;

/* Returns the id of the deployment with d's (model, weights_digest, backend,
 * dtype, board), creating it if new. d->id and d->created_ms are ignored. */
nb_code nb_db_deployment_upsert(nb_db *db, const nb_db_deployment *d, int64_t *id, nb_err *err);

/* Looks up the deployment with key's tuple (key->id ignored); NB_ENOTFOUND if none. */
nb_code nb_db_deployment_find(nb_db *db, const nb_db_deployment *key, nb_db_deployment *out,
                              nb_err *err);

nb_code nb_db_deployment_get(nb_db *db, int64_t id, nb_db_deployment *out, nb_err *err);

/* All deployments, or those of one model (model NULL or "" = all), ordered by
 * (model, board, backend, dtype). *out is malloc'ed (free()); NULL when *n == 0. */
nb_code nb_db_deployment_list(nb_db *db, const char *model, nb_db_deployment **out, size_t *n,
                              nb_err *err);

/* Makes deployment_id the reference deployment of its model (replacing any). */
nb_code nb_db_reference_set(nb_db *db, int64_t deployment_id, nb_err *err);

/* The reference deployment of model, or of another name of it (db/nb_db_alias.h): its
 * own first, else the one set last; NB_ENOTFOUND if none was set. */
nb_code nb_db_reference_get(nb_db *db, const char *model, nb_db_deployment *out, nb_err *err);

typedef struct nb_db_reference {
    char model[NB_DB_NAME_MAX]; /* the name it was set under (the deployment's model) */
    nb_db_deployment dep;
    int64_t set_ms;
} nb_db_reference;

/* Every model's reference, by model name. *out malloc'ed (free()); NULL when *n == 0. */
nb_code nb_db_reference_list(nb_db *db, nb_db_reference **out, size_t *n, nb_err *err);

/* Forgets model's reference deployment; NB_ENOTFOUND if none was set. */
nb_code nb_db_reference_clear(nb_db *db, const char *model, nb_err *err);

#endif
