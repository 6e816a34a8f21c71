/* nb_db_deploy: deployment identity rows and the per-model reference
 * deployment, both small tables keyed by names users type. */
#include "nb_db_deploy.h"

#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"

#define DEPLOY_COLS "id, model, weights_digest, backend, dtype, board, created_ms"

#define DEPLOY_COLS_D "d.id, d.model, d.weights_digest, d.backend, d.dtype, d.board, d.created_ms"

/* The DEPLOY_COLS starting at column c. */
static void read_deployment_at(sqlite3_stmt *st, int c, nb_db_deployment *d)
{
    memset(d, 0, sizeof *d);
    d->id = sqlite3_column_int64(st, c);
    nb_db_col_copy(st, c + 1, d->model, sizeof d->model);
    nb_db_col_copy(st, c + 2, d->weights_digest, sizeof d->weights_digest);
    nb_db_col_copy(st, c + 3, d->backend, sizeof d->backend);
    nb_db_col_copy(st, c + 4, d->dtype, sizeof d->dtype);
    nb_db_col_copy(st, c + 5, d->board, sizeof d->board);
    d->created_ms = sqlite3_column_int64(st, c + 6);
}

static void read_deployment(sqlite3_stmt *st, nb_db_deployment *d)
{
    read_deployment_at(st, 0, d);
}

static nb_code validate(const nb_db_deployment *d, nb_err *err)
{
    struct {
        const char *name;
        const char *buf;
        size_t size;
        int required;
    } f[] = {
        {"deployment.model", d->model, sizeof d->model, 1},
        {"deployment.weights_digest", d->weights_digest, sizeof d->weights_digest, 0},
        {"deployment.backend", d->backend, sizeof d->backend, 1},
        {"deployment.dtype", d->dtype, sizeof d->dtype, 1},
        {"deployment.board", d->board, sizeof d->board, 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        nb_code rc = nb_db_check_buf(err, f[i].name, f[i].buf, f[i].size);
        if (rc)
            return rc;
        if (f[i].required && !f[i].buf[0])
            return nb_err_set(err, NB_EINVAL, "%s: required, got an empty string", f[i].name);
    }
    return NB_OK;
}

static void bind_tuple(sqlite3_stmt *st, const nb_db_deployment *d)
{
    nb_db_bind_str(st, 1, d->model);
    nb_db_bind_str(st, 2, d->weights_digest);
    nb_db_bind_str(st, 3, d->backend);
    nb_db_bind_str(st, 4, d->dtype);
    nb_db_bind_str(st, 5, d->board);
}

static const char find_sql[] =
    "SELECT " DEPLOY_COLS " FROM deployments WHERE model = ? AND weights_digest = ? AND "
    "backend = ? AND dtype = ? AND board = ?";

static nb_code find_locked(nb_db *db, const nb_db_deployment *key, nb_db_deployment *out,
                           nb_err *err)
{
    sqlite3_stmt *st;
    nb_code code = nb_db_stmt(db, find_sql, &st, err);
    if (code)
        return code;
    bind_tuple(st, key);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        read_deployment(st, out);
    else if (rc == SQLITE_DONE)
        code = nb_err_set(err, NB_ENOTFOUND,
                          "no deployment model='%s' weights='%s' backend='%s' dtype='%s' "
                          "board='%s'",
                          key->model, key->weights_digest, key->backend, key->dtype,
                          key->board);
    else
        code = nb_db_sqlerr(db, err, "finding deployment");
    nb_db_done(st);
    return code;
}

static nb_code upsert_locked(nb_db *db, const nb_db_deployment *d, int64_t *id, nb_err *err)
{
    static const char ins[] = "INSERT INTO deployments (model, weights_digest, backend, dtype, "
                              "board, created_ms) VALUES (?, ?, ?, ?, ?, ?) "
                              "ON CONFLICT DO NOTHING";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, ins, &st, err);
    if (rc)
        return rc;
    bind_tuple(st, d);
    sqlite3_bind_int64(st, 6, nb_db_now_ms(db));
    if ((rc = nb_db_step_done(db, st, err, "inserting deployment")))
        return rc;
    nb_db_deployment found;
    if (!(rc = find_locked(db, d, &found, err)))
        *id = found.id;
    return rc;
}

nb_code nb_db_deployment_upsert(nb_db *db, const nb_db_deployment *d, int64_t *id, nb_err *err)
{
    nb_code rc = validate(d, err);
    if (rc)
        return rc;
    NB_DB_WITH_TX(db, err, rc, rc = upsert_locked(db, d, id, err));
    return rc;
}

nb_code nb_db_deployment_find(nb_db *db, const nb_db_deployment *key, nb_db_deployment *out,
                              nb_err *err)
{
    nb_code rc = validate(key, err);
    if (rc)
        return rc;
    nb_db_lock(db);
    rc = find_locked(db, key, out, err);
    nb_db_unlock(db);
    return rc;
}

static nb_code get_locked(nb_db *db, int64_t id, nb_db_deployment *out, nb_err *err)
{
    static const char sql[] = "SELECT " DEPLOY_COLS " FROM deployments WHERE id = ?";
    sqlite3_stmt *st;
    nb_code code = nb_db_stmt(db, sql, &st, err);
    if (code)
        return code;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        read_deployment(st, out);
    else if (rc == SQLITE_DONE)
        code = nb_err_set(err, NB_ENOTFOUND, "no deployment with id %lld", (long long)id);
    else
        code = nb_db_sqlerr(db, err, "reading deployment");
    nb_db_done(st);
    return code;
}

nb_code nb_db_deployment_get(nb_db *db, int64_t id, nb_db_deployment *out, nb_err *err)
{
    nb_db_lock(db);
    nb_code rc = get_locked(db, id, out, err);
    nb_db_unlock(db);
    return rc;
}

static void deployment_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    read_deployment(st, slot);
}

nb_code nb_db_deployment_list(nb_db *db, const char *model, nb_db_deployment **out, size_t *n,
                              nb_err *err)
{
    static const char sql[] = "SELECT " DEPLOY_COLS " FROM deployments "
                              "WHERE ?1 = '' OR model = ?1 "
                              "ORDER BY model, board, backend, dtype, weights_digest";
    *out = NULL;
    *n = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, model);
        void *arr = NULL;
        rc = nb_db_collect(db, st, sizeof **out, deployment_row, NULL, &arr, n, err,
                           "listing deployments");
        nb_db_done(st);
        *out = arr;
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_reference_set(nb_db *db, int64_t deployment_id, nb_err *err)
{
    static const char sql[] =
        "INSERT INTO reference_deployments (model, deployment_id, set_ms) VALUES (?, ?, ?) "
        "ON CONFLICT (model) DO UPDATE SET deployment_id = excluded.deployment_id, "
        "set_ms = excluded.set_ms";
    nb_db_lock(db);
    nb_db_deployment d;
    nb_code rc = get_locked(db, deployment_id, &d, err);
    if (!rc) {
        sqlite3_stmt *st;
        rc = nb_db_stmt(db, sql, &st, err);
        if (!rc) {
            nb_db_bind_str(st, 1, d.model);
            sqlite3_bind_int64(st, 2, deployment_id);
            sqlite3_bind_int64(st, 3, nb_db_now_ms(db));
            rc = nb_db_step_done(db, st, err, "setting reference deployment");
        }
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_reference_get(nb_db *db, const char *model, nb_db_deployment *out, nb_err *err)
{
    /* One identity per model: a reference set under any of the model's names (its
     * canonical name or an alias, db/nb_db_alias.h) is the model's; its own name first,
     * then the one set last. */
    static const char sql[] =
        "SELECT d.id, d.model, d.weights_digest, d.backend, d.dtype, d.board, d.created_ms "
        "FROM reference_deployments r JOIN deployments d ON d.id = r.deployment_id "
        "WHERE r.model = ?1 OR r.model = (SELECT model FROM model_aliases WHERE alias = ?1) "
        "OR r.model IN (SELECT alias FROM model_aliases WHERE model = "
        "  COALESCE((SELECT model FROM model_aliases WHERE alias = ?1), ?1)) "
        "ORDER BY r.model = ?1 DESC, r.set_ms DESC LIMIT 1";
    if (!model || !*model)
        return nb_err_set(err, NB_EINVAL, "reference: model name is empty");
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code code = nb_db_stmt(db, sql, &st, err);
    if (!code) {
        nb_db_bind_str(st, 1, model);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            read_deployment(st, out);
        else if (rc == SQLITE_DONE)
            code = nb_err_set(err, NB_ENOTFOUND,
                              "model '%s' has no reference deployment (set one with "
                              "`npubench reference set DEPLOYMENT`)",
                              model);
        else
            code = nb_db_sqlerr(db, err, "reading reference deployment");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return code;
}

static void reference_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_reference *r = slot;
    nb_db_col_copy(st, 0, r->model, sizeof r->model);
    r->set_ms = sqlite3_column_int64(st, 1);
    read_deployment_at(st, 2, &r->dep);
}

nb_code nb_db_reference_list(nb_db *db, nb_db_reference **out, size_t *n, nb_err *err)
{
    static const char sql[] =
        "SELECT r.model, r.set_ms, " DEPLOY_COLS_D " FROM reference_deployments r "
        "JOIN deployments d ON d.id = r.deployment_id ORDER BY r.model";
    *out = NULL;
    *n = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        void *arr = NULL;
        rc = nb_db_collect(db, st, sizeof **out, reference_row, NULL, &arr, n, err,
                           "listing references");
        nb_db_done(st);
        *out = arr;
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_reference_clear(nb_db *db, const char *model, nb_err *err)
{
    static const char sql[] = "DELETE FROM reference_deployments WHERE model = ?";
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, model);
        rc = nb_db_step_done(db, st, err, "clearing reference deployment");
        if (!rc && sqlite3_changes(db->h) == 0)
            rc = nb_err_set(err, NB_ENOTFOUND, "model '%s' has no reference deployment",
                            model ? model : "");
    }
    nb_db_unlock(db);
    return rc;
}
