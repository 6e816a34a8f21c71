/* nb_db_boardkeys: a table created on first use (like rpc_replay: an older npubench ignores
 * it); a key's secret is compared by its SHA-256, in constant time. */
#include "nb_db_boardkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"
#include "nb_hmac.h"
#include "nb_sha256.h"

static const char create_sql[] = "CREATE TABLE IF NOT EXISTS board_keys (\n"
                                 "  key_id TEXT PRIMARY KEY,\n"
                                 "  board TEXT NOT NULL,\n"
                                 "  secret_sha256 TEXT NOT NULL,\n"
                                 "  created_ms INTEGER NOT NULL,\n"
                                 "  revoked_ms INTEGER\n"
                                 ");";

nb_code nb_db_boardkey_open(nb_db *db, nb_err *err)
{
    nb_db_lock(db);
    nb_code rc = nb_db_exec(db, create_sql, err);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_boardkey_add(nb_db *db, const char *key_id, const char *board,
                           const char *sha256_hex, nb_err *err)
{
    nb_code rc = nb_db_check_len(err, "board", board, NB_DB_NAME_MAX);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    if (!(rc = nb_db_stmt(db,
                          "INSERT INTO board_keys (key_id, board, secret_sha256, created_ms) "
                          "VALUES (?, ?, ?, ?)",
                          &st, err))) {
        nb_db_bind_str(st, 1, key_id);
        nb_db_bind_str(st, 2, board);
        nb_db_bind_str(st, 3, sha256_hex);
        sqlite3_bind_int64(st, 4, nb_db_now_ms(db));
        rc = nb_db_step_done(db, st, err, "storing a board key");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_boardkey_revoke(nb_db *db, const char *key_id, char board[NB_DB_NAME_MAX],
                              nb_err *err)
{
    board[0] = '\0';
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, "SELECT board FROM board_keys WHERE key_id = ?", &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, key_id);
        if (sqlite3_step(st) == SQLITE_ROW)
            nb_db_col_copy(st, 0, board, NB_DB_NAME_MAX);
        else
            rc = nb_err_set(err, NB_ENOTFOUND, "board key '%s': no such key", key_id);
        nb_db_done(st);
    }
    if (!rc && !(rc = nb_db_stmt(db,
                                 "UPDATE board_keys SET revoked_ms = COALESCE(revoked_ms, ?) "
                                 "WHERE key_id = ?",
                                 &st, err))) {
        sqlite3_bind_int64(st, 1, nb_db_now_ms(db));
        nb_db_bind_str(st, 2, key_id);
        rc = nb_db_step_done(db, st, err, "revoking a board key");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_boardkey_list(nb_db *db, const char *board, nb_db_boardkey **out, size_t *n,
                            nb_err *err)
{
    *out = NULL;
    *n = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db,
                            "SELECT key_id, board, created_ms, COALESCE(revoked_ms, 0) FROM "
                            "board_keys WHERE ?1 = '' OR board = ?1 ORDER BY created_ms, key_id",
                            &st, err);
    size_t cap = 0;
    if (!rc) {
        nb_db_bind_str(st, 1, board ? board : "");
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            if (*n == cap) {
                size_t nc = cap ? 2 * cap : 8;
                nb_db_boardkey *p = realloc(*out, nc * sizeof *p);
                if (!p) {
                    rc = nb_err_set(err, NB_ENOMEM, "board keys: out of memory");
                    break;
                }
                *out = p;
                cap = nc;
            }
            nb_db_boardkey *k = &(*out)[(*n)++];
            nb_db_col_copy(st, 0, k->key_id, sizeof k->key_id);
            nb_db_col_copy(st, 1, k->board, sizeof k->board);
            k->created_ms = sqlite3_column_int64(st, 2);
            k->revoked_ms = sqlite3_column_int64(st, 3);
        }
        if (!rc && s != SQLITE_DONE)
            rc = nb_db_sqlerr(db, err, "listing board keys");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

nb_code nb_db_boardkey_check(nb_db *db, const char *board, const char *key, int *has_keys,
                             int *ok, nb_err *err)
{
    *has_keys = *ok = 0;
    char id[NB_DB_BOARDKEY_ID_MAX] = "", want[65] = "";
    const char *dot = key ? strchr(key, '.') : NULL;
    if (dot && (size_t)(dot - key) < sizeof id) {
        memcpy(id, key, (size_t)(dot - key));
        id[dot - key] = '\0';
        nb_sha256_mem_hex(dot + 1, strlen(dot + 1), want);
    }
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db,
                            "SELECT key_id, secret_sha256 FROM board_keys WHERE board = ? AND "
                            "revoked_ms IS NULL",
                            &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, board);
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            *has_keys = 1;
            const char *kid = (const char *)sqlite3_column_text(st, 0);
            const char *sha = (const char *)sqlite3_column_text(st, 1);
            if (*id && kid && sha && !strcmp(kid, id) && strlen(sha) == 64 &&
                nb_hmac_equal(sha, want, 64))
                *ok = 1;
        }
        if (s != SQLITE_DONE)
            rc = nb_db_sqlerr(db, err, "checking a board key");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}
