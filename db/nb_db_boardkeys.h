/* nb_db_boardkeys: per-board worker credentials — issued by an admin, several valid at once
 * (rotation), revoked one by one; only their SHA-256 is stored. */
#ifndef NB_DB_BOARDKEYS_H
#define NB_DB_BOARDKEYS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

#define NB_DB_BOARDKEY_ID_MAX 17 /* 16 hex digits */

typedef struct nb_db_boardkey {
    char key_id[NB_DB_BOARDKEY_ID_MAX];
    char board[NB_DB_NAME_MAX];
    int64_t created_ms, revoked_ms; /* revoked_ms 0: valid */
} nb_db_boardkey;

/* Creates the table if missing. */
nb_code nb_db_boardkey_open(nb_db *db, nb_err *err);

/* Stores key_id for board with sha256_hex of its secret. */
nb_code nb_db_boardkey_add(nb_db *db, const char *key_id, const char *board,
                           const char *sha256_hex, nb_err *err);

/* Revokes key_id: NB_ENOTFOUND naming it when there is none; *board gets its board. */
nb_code nb_db_boardkey_revoke(nb_db *db, const char *key_id, char board[NB_DB_NAME_MAX],
                              nb_err *err);

/* The keys of board ("" = every board), oldest first; *out malloc'ed (free()). */
nb_code nb_db_boardkey_list(nb_db *db, const char *board, nb_db_boardkey **out, size_t *n,
                            nb_err *err);

/* For a registration of board presenting key ("<key_id>.<secret>", may be ""): *has_keys = 1
 * when board has a valid key at all, *ok = 1 when key is one of them. */
nb_code nb_db_boardkey_check(nb_db *db, const char *board, const char *key, int *has_keys,
                             int *ok, nb_err *err);

#endif
