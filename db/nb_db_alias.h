/* nb_db_alias: one identity per model: the other names a model goes by (a weights digest,
 * GGUF general.name, a preset word, mlir-air's model key) mapped to its canonical name. */
#ifndef NB_DB_ALIAS_H
#define NB_DB_ALIAS_H

#include <stddef.h>

#include "nb_db.h"

typedef struct nb_db_alias {
    char alias[NB_DB_NAME_MAX]; /* unique, compared case-insensitively */
    char model[NB_DB_NAME_MAX]; /* the canonical name */
    char origin[32];            /* who said so: "deployments", "result", ... */
} nb_db_alias;

/* Records alias as another name of model (both 1..NB_DB_NAME_MAX-1 bytes, else NB_EINVAL
 * naming the field and the limit). model is first resolved through the table, so chains
 * collapse to one canonical name; an alias equal to that name is no alias and is skipped.
 * The latest statement wins: re-pointing an alias is how a mistake is corrected. */
nb_code nb_db_alias_set(nb_db *db, const char *alias, const char *model, const char *origin,
                        nb_err *err);

/* The canonical name of name (itself when it is no alias) into out (cap bytes). */
nb_code nb_db_alias_resolve(nb_db *db, const char *name, char *out, size_t cap, nb_err *err);

/* Every alias, ordered by (model, alias). *out malloc'ed (free()); NULL when *n == 0. */
nb_code nb_db_alias_list(nb_db *db, nb_db_alias **out, size_t *n, nb_err *err);

#endif
