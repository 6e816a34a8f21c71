/* nb_db_alias: the model_aliases table: set (resolving chains), resolve, list. Aliases
 * compare case-insensitively, as nb_job_model_match compares model names. */
#include "nb_db_alias.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nb_db_int.h"

static nb_code resolve_locked(nb_db *db, const char *name, char *out, size_t cap, nb_err *err)
{
    static const char sql[] = "SELECT model FROM model_aliases WHERE alias = ?";
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    nb_db_bind_str(st, 1, name);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        nb_db_col_copy(st, 0, out, cap);
    else if (s == SQLITE_DONE)
        snprintf(out, cap, "%s", name);
    else
        rc = nb_db_sqlerr(db, err, "resolving a model alias");
    nb_db_done(st);
    return rc;
}

nb_code nb_db_alias_resolve(nb_db *db, const char *name, char *out, size_t cap, nb_err *err)
{
    nb_db_lock(db);
    nb_code rc = resolve_locked(db, name ? name : "", out, cap, err);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_alias_set(nb_db *db, const char *alias, const char *model, const char *origin,
                        nb_err *err)
{
    static const char ins[] =
        "INSERT INTO model_aliases (alias, model, origin, set_ms) VALUES (?1, ?2, ?3, ?4) "
        "ON CONFLICT (alias) DO UPDATE SET model = ?2, origin = ?3, set_ms = ?4";
    /* The aliases that named alias as their model follow it to the canonical name. */
    static const char follow[] = "UPDATE model_aliases SET model = ?2 WHERE model = ?1";
    nb_code rc;
    if (!alias || !*alias || !model || !*model)
        return nb_err_set(err, NB_EINVAL, "model alias: alias and model are required");
    if ((rc = nb_db_check_len(err, "model alias", alias, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "model alias's model", model, NB_DB_NAME_MAX)) ||
        (rc = nb_db_check_len(err, "model alias's origin", origin, 32)))
        return rc;
    NB_DB_WITH_TX(db, err, rc, {
        char canon[NB_DB_NAME_MAX];
        sqlite3_stmt *st;
        rc = resolve_locked(db, model, canon, sizeof canon, err);
        if (!rc && strcasecmp(canon, alias) && !(rc = nb_db_stmt(db, ins, &st, err))) {
            nb_db_bind_str(st, 1, alias);
            nb_db_bind_str(st, 2, canon);
            nb_db_bind_str(st, 3, origin);
            sqlite3_bind_int64(st, 4, nb_db_now_ms(db));
            rc = nb_db_step_done(db, st, err, "recording a model alias");
            if (!rc && !(rc = nb_db_stmt(db, follow, &st, err))) {
                nb_db_bind_str(st, 1, alias);
                nb_db_bind_str(st, 2, canon);
                rc = nb_db_step_done(db, st, err, "re-pointing model aliases");
            }
        }
    });
    return rc;
}

static void alias_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_alias *a = slot;
    nb_db_col_copy(st, 0, a->alias, sizeof a->alias);
    nb_db_col_copy(st, 1, a->model, sizeof a->model);
    nb_db_col_copy(st, 2, a->origin, sizeof a->origin);
}

static void bind_none(sqlite3_stmt *st, const void *ud)
{
    (void)st;
    (void)ud;
}

nb_code nb_db_alias_list(nb_db *db, nb_db_alias **out, size_t *n, nb_err *err)
{
    static const char sql[] =
        "SELECT alias, model, origin FROM model_aliases ORDER BY model, alias";
    void *arr = NULL;
    nb_code rc = nb_db_select_all(db, sql, bind_none, NULL, sizeof **out, alias_row, &arr, n, err,
                                  "model aliases");
    *out = arr;
    return rc;
}
