/* nb_db_replay: one row per (request id, method key); ids are stored as their signed 64-bit
 * image (SQLite integers are signed). The table is created on first use rather than by a
 * schema migration: it holds nothing that outlives the 10-minute window, so an older
 * npubench opening the file loses nothing by ignoring it. */
#include "nb_db_replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS rpc_replay (\n"
    "  id INTEGER NOT NULL,\n"
    "  key INTEGER NOT NULL,\n"
    "  expires_ms INTEGER NOT NULL,\n"
    "  status INTEGER NOT NULL,\n"
    "  message TEXT NOT NULL,\n"
    "  payload BLOB,\n"
    "  PRIMARY KEY (id, key)\n"
    ") WITHOUT ROWID;\n"
    "CREATE INDEX IF NOT EXISTS rpc_replay_expiry ON rpc_replay (expires_ms);";

nb_code nb_db_replay_prune(nb_db *db, int64_t now_ms, nb_err *err)
{
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, "DELETE FROM rpc_replay WHERE expires_ms <= ?", &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, now_ms);
        rc = nb_db_step_done(db, st, err, "pruning kept answers");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_replay_open(nb_db *db, int64_t now_ms, nb_err *err)
{
    nb_db_lock(db);
    nb_code rc = nb_db_exec(db, create_sql, err);
    nb_db_unlock(db);
    return rc ? rc : nb_db_replay_prune(db, now_ms, err);
}

nb_code nb_db_replay_record(nb_db *db, uint64_t id, uint64_t key, int64_t expires_ms,
                            int status, const char *message, const uint8_t *payload,
                            size_t len, nb_err *err)
{
    static const char sql[] = "INSERT OR REPLACE INTO rpc_replay (id, key, expires_ms, status, "
                              "message, payload) VALUES (?, ?, ?, ?, ?, ?)";
    nb_db_lock(db);
    /* SQLite refuses a new safety level inside a transaction: then the row joins it */
    int toggle = db->sync_full && !db->user_tx;
    nb_code rc = toggle ? nb_db_exec(db, "PRAGMA synchronous = NORMAL", err) : NB_OK;
    sqlite3_stmt *st;
    if (!rc && !(rc = nb_db_stmt(db, sql, &st, err))) {
        sqlite3_bind_int64(st, 1, (int64_t)id);
        sqlite3_bind_int64(st, 2, (int64_t)key);
        sqlite3_bind_int64(st, 3, expires_ms);
        sqlite3_bind_int(st, 4, status);
        nb_db_bind_str(st, 5, message ? message : "");
        if (payload && len && len <= NB_DB_REPLAY_PAYLOAD_MAX)
            sqlite3_bind_blob(st, 6, payload, (int)len, SQLITE_STATIC);
        rc = nb_db_step_done(db, st, err, "keeping an answer");
    }
    nb_err ignored;
    if (toggle && nb_db_exec(db, "PRAGMA synchronous = FULL", &ignored) && !rc)
        rc = nb_err_set(err, NB_EIO, "%s: cannot restore synchronous=FULL: %s", db->path,
                        ignored.msg);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_replay_lookup(nb_db *db, uint64_t id, uint64_t key, int64_t now_ms, int *found,
                            int *status, char *message, size_t cap, uint8_t **payload,
                            size_t *len, nb_err *err)
{
    static const char sql[] = "SELECT status, message, payload FROM rpc_replay WHERE id = ? AND "
                              "key = ? AND expires_ms > ?";
    *found = 0;
    *payload = NULL;
    *len = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, (int64_t)id);
        sqlite3_bind_int64(st, 2, (int64_t)key);
        sqlite3_bind_int64(st, 3, now_ms);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) {
            *status = sqlite3_column_int(st, 0);
            const unsigned char *m = sqlite3_column_text(st, 1);
            snprintf(message, cap, "%s", m ? (const char *)m : "");
            int n = sqlite3_column_bytes(st, 2);
            const void *p = sqlite3_column_blob(st, 2);
            if (n > 0 && p) {
                *payload = malloc((size_t)n);
                if (!*payload)
                    rc = nb_err_set(err, NB_ENOMEM, "kept answer: out of memory");
                else {
                    memcpy(*payload, p, (size_t)n);
                    *len = (size_t)n;
                }
            }
            *found = !rc;
        } else if (s != SQLITE_DONE)
            rc = nb_db_sqlerr(db, err, "reading a kept answer");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}
