/* nb_db_workers: worker registration, heartbeats and the alive/stale/gone
 * sweep; also the comma-list membership test the job matcher relies on. */
#include "nb_db_workers.h"

#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"

static const char *const state_names[] = {"alive", "stale", "gone"};

const char *nb_db_worker_state_name(nb_db_worker_state s)
{
    return (unsigned)s < 3 ? state_names[s] : "unknown";
}

static nb_db_worker_state parse_state(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, state_names[i]) == 0)
            return (nb_db_worker_state)i;
    return NB_WORKER_GONE;
}

int nb_db_list_has(const char *list, const char *item)
{
    if (!list || !item)
        return 0;
    size_t n = strlen(item);
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *start = p;
        while (*p && *p != ',')
            p++;
        const char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if ((size_t)(end - start) == n && n && memcmp(start, item, n) == 0)
            return 1;
        if (*p == ',')
            p++;
    }
    return 0;
}

#define WORKER_COLS                                                                          \
    "id, board_name, board_type, tags, host, backends, deployments, version, device_id, "   \
    "first_seen_ms, last_seen_ms, state"

static void read_worker(sqlite3_stmt *st, nb_db_worker *w)
{
    memset(w, 0, sizeof *w);
    nb_db_col_copy(st, 0, w->id, sizeof w->id);
    nb_db_col_copy(st, 1, w->board_name, sizeof w->board_name);
    nb_db_col_copy(st, 2, w->board_type, sizeof w->board_type);
    nb_db_col_copy(st, 3, w->tags, sizeof w->tags);
    nb_db_col_copy(st, 4, w->host, sizeof w->host);
    nb_db_col_copy(st, 5, w->backends, sizeof w->backends);
    nb_db_col_copy(st, 6, w->deployments, sizeof w->deployments);
    nb_db_col_copy(st, 7, w->version, sizeof w->version);
    nb_db_col_copy(st, 8, w->device_id, sizeof w->device_id);
    w->first_seen_ms = sqlite3_column_int64(st, 9);
    w->last_seen_ms = sqlite3_column_int64(st, 10);
    char state[16];
    nb_db_col_copy(st, 11, state, sizeof state);
    w->state = parse_state(state);
}

nb_code nb_db_worker_upsert(nb_db *db, const nb_db_worker *w, nb_err *err)
{
    struct {
        const char *name, *buf;
        size_t size;
    } f[] = {
        {"worker.id", w->id, sizeof w->id},
        {"worker.board_name", w->board_name, sizeof w->board_name},
        {"worker.board_type", w->board_type, sizeof w->board_type},
        {"worker.tags", w->tags, sizeof w->tags},
        {"worker.host", w->host, sizeof w->host},
        {"worker.backends", w->backends, sizeof w->backends},
        {"worker.deployments", w->deployments, sizeof w->deployments},
        {"worker.version", w->version, sizeof w->version},
        {"worker.device_id", w->device_id, sizeof w->device_id},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        nb_code rc = nb_db_check_buf(err, f[i].name, f[i].buf, f[i].size);
        if (rc)
            return rc;
    }
    if (!w->id[0])
        return nb_err_set(err, NB_EINVAL, "worker.id: required, got an empty string");
    static const char sql[] =
        "INSERT INTO workers (" WORKER_COLS ") "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, 'alive') "
        "ON CONFLICT (id) DO UPDATE SET board_name = excluded.board_name, "
        "board_type = excluded.board_type, tags = excluded.tags, host = excluded.host, "
        "backends = excluded.backends, deployments = excluded.deployments, "
        "version = excluded.version, device_id = excluded.device_id, "
        "last_seen_ms = excluded.last_seen_ms, state = 'alive'";
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        for (int i = 0; i < 9; i++)
            nb_db_bind_str(st, i + 1, f[i].buf);
        sqlite3_bind_int64(st, 10, nb_db_now_ms(db));
        rc = nb_db_step_done(db, st, err, "registering worker");
    }
    nb_db_unlock(db);
    return rc;
}

/* One worker's state by sql (?1 = id, ?2 = now when the statement has it). */
static nb_code mark(nb_db *db, const char *id, const char *sql, const char *what, nb_err *err)
{
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, id);
        if (sqlite3_bind_parameter_count(st) >= 2)
            sqlite3_bind_int64(st, 2, nb_db_now_ms(db));
        rc = nb_db_step_done(db, st, err, what);
        if (!rc && sqlite3_changes(db->h) == 0)
            rc = nb_err_set(err, NB_ENOTFOUND, "worker '%s' is not registered", id ? id : "");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_worker_touch(nb_db *db, const char *id, nb_err *err)
{
    return mark(db, id, "UPDATE workers SET last_seen_ms = ?2, state = 'alive' WHERE id = ?1",
                "recording heartbeat", err);
}

nb_code nb_db_worker_gone(nb_db *db, const char *id, nb_err *err)
{
    return mark(db, id, "UPDATE workers SET state = 'gone' WHERE id = ?1",
                "recording a deregistration", err);
}

nb_code nb_db_worker_get(nb_db *db, const char *id, nb_db_worker *out, nb_err *err)
{
    static const char sql[] = "SELECT " WORKER_COLS " FROM workers WHERE id = ?";
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        nb_db_bind_str(st, 1, id);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW)
            read_worker(st, out);
        else if (s == SQLITE_DONE)
            rc = nb_err_set(err, NB_ENOTFOUND, "worker '%s' is not registered", id ? id : "");
        else
            rc = nb_db_sqlerr(db, err, "reading worker");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

static void worker_row(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    read_worker(st, slot);
}

nb_code nb_db_worker_list(nb_db *db, nb_db_worker **out, size_t *n, nb_err *err)
{
    static const char sql[] = "SELECT " WORKER_COLS " FROM workers ORDER BY id";
    *out = NULL;
    *n = 0;
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (!rc) {
        void *arr = NULL;
        rc = nb_db_collect(db, st, sizeof **out, worker_row, NULL, &arr, n, err,
                           "listing workers");
        nb_db_done(st);
        *out = arr;
    }
    nb_db_unlock(db);
    return rc;
}

static nb_code mark_seen_before(nb_db *db, const char *sql, int64_t before, size_t *n,
                                nb_err *err, const char *what)
{
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, before);
    rc = nb_db_step_done(db, st, err, what);
    if (!rc)
        *n = (size_t)sqlite3_changes(db->h);
    return rc;
}

static nb_code sweep_locked(nb_db *db, int64_t stale_after_ms, int64_t gone_after_ms,
                            size_t *n_stale, size_t *n_gone, nb_err *err)
{
    static const char gone_sql[] =
        "UPDATE workers SET state = 'gone' WHERE state <> 'gone' AND last_seen_ms < ?";
    static const char stale_sql[] =
        "UPDATE workers SET state = 'stale' WHERE state = 'alive' AND last_seen_ms < ?";
    int64_t now = nb_db_now_ms(db);
    nb_code rc = mark_seen_before(db, gone_sql, now - gone_after_ms, n_gone, err,
                                  "marking workers gone");
    if (!rc)
        rc = mark_seen_before(db, stale_sql, now - stale_after_ms, n_stale, err,
                              "marking workers stale");
    return rc;
}

nb_code nb_db_worker_sweep(nb_db *db, int64_t stale_after_ms, int64_t gone_after_ms,
                           size_t *n_stale, size_t *n_gone, nb_err *err)
{
    if (stale_after_ms < 0 || gone_after_ms < stale_after_ms)
        return nb_err_set(err, NB_EINVAL,
                          "worker sweep: need 0 <= stale_after_ms (%lld) <= gone_after_ms "
                          "(%lld)",
                          (long long)stale_after_ms, (long long)gone_after_ms);
    size_t ng = 0, ns = 0;
    nb_code rc;
    NB_DB_WITH_TX(db, err, rc,
                  rc = sweep_locked(db, stale_after_ms, gone_after_ms, &ns, &ng, err));
    if (!rc) {
        if (n_stale)
            *n_stale = ns;
        if (n_gone)
            *n_gone = ng;
    }
    return rc;
}
