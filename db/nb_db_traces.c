/* nb_db_traces: reference trace cache rows, a file path or an inline blob
 * per (model digest, prompts digest, n_tokens, k). */
#include "nb_db_traces.h"

#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"

static nb_code check_key(const nb_db_trace_key *k, nb_err *err)
{
    if (!k->model_digest || !*k->model_digest)
        return nb_err_set(err, NB_EINVAL, "trace key: model_digest is required");
    if (!k->prompts_digest || !*k->prompts_digest)
        return nb_err_set(err, NB_EINVAL, "trace key: prompts_digest is required");
    if (k->n_tokens <= 0 || k->k <= 0)
        return nb_err_set(err, NB_EINVAL, "trace key: n_tokens (%d) and k (%d) must be > 0",
                          k->n_tokens, k->k);
    nb_code rc;
    if ((rc = nb_db_check_len(err, "trace key model_digest", k->model_digest,
                              NB_DB_DIGEST_MAX)) ||
        (rc = nb_db_check_len(err, "trace key prompts_digest", k->prompts_digest,
                              NB_DB_DIGEST_MAX)))
        return rc;
    return NB_OK;
}

/* The cached statement sql with the key bound to ?1..?4. */
static nb_code keyed_stmt(nb_db *db, const char *sql, const nb_db_trace_key *k,
                          sqlite3_stmt **st, nb_err *err)
{
    nb_code rc = nb_db_stmt(db, sql, st, err);
    if (rc)
        return rc;
    nb_db_bind_str(*st, 1, k->model_digest);
    nb_db_bind_str(*st, 2, k->prompts_digest);
    sqlite3_bind_int(*st, 3, k->n_tokens);
    sqlite3_bind_int(*st, 4, k->k);
    return NB_OK;
}

nb_code nb_db_trace_put(nb_db *db, const nb_db_trace_key *key, const char *path,
                        const void *blob, size_t len, nb_err *err)
{
    static const char sql[] =
        "INSERT INTO reference_traces (model_digest, prompts_digest, n_tokens, k, path, blob, "
        "created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
        "ON CONFLICT (model_digest, prompts_digest, n_tokens, k) DO UPDATE SET "
        "path = excluded.path, blob = excluded.blob, created_ms = excluded.created_ms";
    nb_code rc = check_key(key, err);
    if (rc)
        return rc;
    if ((path != NULL) == (blob != NULL))
        return nb_err_set(err, NB_EINVAL, "trace put: give exactly one of a path or a blob");
    if (path && !*path)
        return nb_err_set(err, NB_EINVAL, "trace put: path is empty");
    if (blob && len > NB_DB_TRACE_BLOB_MAX)
        return nb_err_set(err, NB_EINVAL, "trace put: blob of %zu bytes, limit is %u", len,
                          NB_DB_TRACE_BLOB_MAX);
    nb_db_lock(db);
    sqlite3_stmt *st;
    rc = keyed_stmt(db, sql, key, &st, err);
    if (!rc) {
        nb_db_bind_opt_str(st, 5, path);
        if (blob)
            sqlite3_bind_blob(st, 6, blob, (int)len, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 6);
        sqlite3_bind_int64(st, 7, nb_db_now_ms(db));
        rc = nb_db_step_done(db, st, err, "storing reference trace");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_trace_get(nb_db *db, const nb_db_trace_key *key, char **path, void **blob,
                        size_t *len, int64_t *created_ms, nb_err *err)
{
    static const char sql[] = "SELECT path, blob, created_ms FROM reference_traces WHERE "
                              "model_digest = ?1 AND prompts_digest = ?2 AND n_tokens = ?3 "
                              "AND k = ?4";
    *path = NULL;
    *blob = NULL;
    *len = 0;
    nb_code rc = check_key(key, err);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    rc = keyed_stmt(db, sql, key, &st, err);
    if (!rc) {
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) {
            int oom = 0;
            *path = nb_db_col_strdup(st, 0, &oom);
            if (nb_db_col_blobdup(st, 1, blob, len))
                oom = 1;
            if (created_ms)
                *created_ms = sqlite3_column_int64(st, 2);
            if (oom) {
                free(*path);
                free(*blob);
                *path = NULL;
                *blob = NULL;
                *len = 0;
                rc = nb_err_set(err, NB_ENOMEM, "reading reference trace: out of memory");
            }
        } else if (s == SQLITE_DONE) {
            rc = nb_err_set(err, NB_ENOTFOUND,
                            "no cached reference trace for model %.16s prompts %.16s "
                            "n_tokens=%d k=%d",
                            key->model_digest, key->prompts_digest, key->n_tokens, key->k);
        } else {
            rc = nb_db_sqlerr(db, err, "reading reference trace");
        }
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_trace_delete(nb_db *db, const nb_db_trace_key *key, nb_err *err)
{
    static const char sql[] = "DELETE FROM reference_traces WHERE model_digest = ?1 AND "
                              "prompts_digest = ?2 AND n_tokens = ?3 AND k = ?4";
    nb_code rc = check_key(key, err);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    rc = keyed_stmt(db, sql, key, &st, err);
    if (!rc) {
        rc = nb_db_step_done(db, st, err, "deleting reference trace");
        if (!rc && sqlite3_changes(db->h) == 0)
            rc = nb_err_set(err, NB_ENOTFOUND, "no cached reference trace to delete");
    }
    nb_db_unlock(db);
    return rc;
}
