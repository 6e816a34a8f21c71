/* nb_db_boards: one row per board in the boards table (schema 5, versions 7), written by the
 * coordinator's registration, health scheduling and drain, read by leasing, `workers` and the
 * dashboard. */
#include "nb_db_boards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_db_int.h"

static const char *const HEALTH[] = {"unknown", "ok", "failed"};

const char *nb_db_health_name(nb_db_health h)
{
    return (unsigned)h <= NB_HEALTH_FAILED ? HEALTH[h] : "unknown";
}

static nb_db_health health_of(const char *s)
{
    for (int i = 0; i <= NB_HEALTH_FAILED; i++)
        if (s && !strcmp(s, HEALTH[i]))
            return (nb_db_health)i;
    return NB_HEALTH_UNKNOWN;
}

/* check_pending is read with the row, so every reader agrees on "checking" (a check job
 * that ended without reporting, cancelled or expired, is no longer pending). */
#define BOARD_COLS                                                                           \
    "board, health, checked_ms, detail, job_errors, drained, check_job_id, "                 \
    "EXISTS (SELECT 1 FROM jobs WHERE jobs.id = boards.check_job_id AND jobs.state IN "      \
    "('queued','leased','running')), driver, firmware, xrt, kernel_path, cpu_model, "        \
    "toolchain, versions_ms"

static void read_board(sqlite3_stmt *st, void *slot, void *ud)
{
    (void)ud;
    nb_db_board *b = slot;
    memset(b, 0, sizeof *b);
    nb_db_col_copy(st, 0, b->board, sizeof b->board);
    b->health = health_of((const char *)sqlite3_column_text(st, 1));
    b->checked_ms = nb_db_col_int(st, 2, 0);
    nb_db_col_copy(st, 3, b->detail, sizeof b->detail);
    b->job_errors = (int)nb_db_col_int(st, 4, 0);
    b->drained = (int)nb_db_col_int(st, 5, 0);
    b->check_job_id = nb_db_col_int(st, 6, 0);
    b->check_pending = b->check_job_id && nb_db_col_int(st, 7, 0);
    nb_db_board_versions *v = &b->versions;
    nb_db_col_copy(st, 8, v->driver, sizeof v->driver);
    nb_db_col_copy(st, 9, v->firmware, sizeof v->firmware);
    nb_db_col_copy(st, 10, v->xrt, sizeof v->xrt);
    nb_db_col_copy(st, 11, v->kernel_path, sizeof v->kernel_path);
    nb_db_col_copy(st, 12, v->cpu_model, sizeof v->cpu_model);
    nb_db_col_copy(st, 13, v->toolchain, sizeof v->toolchain);
    b->versions_ms = nb_db_col_int(st, 14, 0);
}

const char *nb_db_board_health_label(const nb_db_board *b)
{
    return b->check_pending ? "checking" : nb_db_health_name(b->health);
}

static nb_code check_name(const char *board, nb_err *err)
{
    if (!board || !*board)
        return nb_err_set(err, NB_EINVAL, "board: required, got an empty name");
    return nb_db_check_len(err, "board", board, NB_DB_NAME_MAX);
}

nb_code nb_db_board_get(nb_db *db, const char *board, nb_db_board *out, nb_err *err)
{
    static const char sql[] = "SELECT " BOARD_COLS " FROM boards WHERE board = ?";
    nb_code rc = check_name(board, err);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    snprintf(out->board, sizeof out->board, "%s", board);
    nb_db_lock(db);
    sqlite3_stmt *st;
    if (!(rc = nb_db_stmt(db, sql, &st, err))) {
        nb_db_bind_str(st, 1, board);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW)
            read_board(st, out, NULL);
        else if (s != SQLITE_DONE)
            rc = nb_db_sqlerr(db, err, "reading board");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}

static void bind_none(sqlite3_stmt *st, const void *ud)
{
    (void)st;
    (void)ud;
}

nb_code nb_db_board_list(nb_db *db, nb_db_board **out, size_t *n, nb_err *err)
{
    void *arr = NULL;
    nb_code rc = nb_db_select_all(db, "SELECT " BOARD_COLS " FROM boards ORDER BY board",
                                  bind_none, NULL, sizeof **out, read_board, &arr, n, err, "listing boards");
    *out = arr;
    return rc;
}

/* An UPSERT on ?1 = board, ?2 = a, ?3 = b, ?4 = text (a statement uses a prefix). */
typedef struct upd {
    const char *board, *text;
    int64_t a, b;
} upd;

static void bind_upd(sqlite3_stmt *st, const void *ud)
{
    const upd *u = ud;
    int n = sqlite3_bind_parameter_count(st); /* each statement uses a prefix of these */
    nb_db_bind_str(st, 1, u->board);
    if (n >= 2)
        sqlite3_bind_int64(st, 2, u->a);
    if (n >= 3)
        sqlite3_bind_int64(st, 3, u->b);
    if (n >= 4)
        nb_db_bind_str(st, 4, u->text ? u->text : "");
}

static nb_code upsert(nb_db *db, const char *sql, const upd *u, nb_err *err)
{
    nb_code rc = check_name(u->board, err);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    if (!(rc = nb_db_stmt(db, sql, &st, err))) {
        bind_upd(st, u);
        rc = nb_db_step_done(db, st, err, "writing board");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_board_set_drained(nb_db *db, const char *board, int drained, nb_err *err)
{
    static const char sql[] = "INSERT INTO boards (board, drained) VALUES (?1, ?2) "
                              "ON CONFLICT (board) DO UPDATE SET drained = ?2";
    upd u = {board, NULL, drained ? 1 : 0, 0};
    return upsert(db, sql, &u, err);
}

nb_code nb_db_board_set_health(nb_db *db, const char *board, nb_db_health health,
                               const char *detail, nb_err *err)
{
    static const char sql[] =
        "INSERT INTO boards (board, health, checked_ms, detail) VALUES (?1, ?5, ?3, ?4) "
        "ON CONFLICT (board) DO UPDATE SET health = ?5, checked_ms = ?3, detail = ?4, "
        "check_job_id = 0, job_errors = CASE WHEN ?2 THEN 0 ELSE job_errors END";
    nb_code rc = check_name(board, err);
    if (!rc)
        rc = nb_db_check_len(err, "board health detail", detail, NB_DB_MSG_MAX);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    if (!(rc = nb_db_stmt(db, sql, &st, err))) {
        upd u = {board, detail, health == NB_HEALTH_OK, nb_db_now_ms(db)};
        bind_upd(st, &u);
        nb_db_bind_str(st, 5, nb_db_health_name(health));
        rc = nb_db_step_done(db, st, err, "writing board health");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_board_set_versions(nb_db *db, const char *board, const nb_db_board_versions *v,
                                 nb_err *err)
{
    static const char sql[] =
        "INSERT INTO boards (board, driver, firmware, xrt, kernel_path, cpu_model, toolchain, "
        "versions_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (board) DO UPDATE SET "
        "driver = ?2, firmware = ?3, xrt = ?4, kernel_path = ?5, cpu_model = ?6, "
        "toolchain = ?7, versions_ms = ?8";
    const struct {
        const char *field, *value;
    } f[] = {{"board driver version", v->driver},     {"board firmware version", v->firmware},
             {"board XRT version", v->xrt},           {"board kernel path", v->kernel_path},
             {"board CPU model", v->cpu_model},       {"board toolchain", v->toolchain}};
    nb_code rc = check_name(board, err);
    for (size_t i = 0; !rc && i < sizeof f / sizeof f[0]; i++)
        rc = nb_db_check_buf(err, f[i].field, f[i].value, NB_DB_BOARD_TEXT_MAX);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    if (!(rc = nb_db_stmt(db, sql, &st, err))) {
        nb_db_bind_str(st, 1, board);
        for (int i = 0; i < 6; i++)
            nb_db_bind_str(st, i + 2, f[i].value);
        sqlite3_bind_int64(st, 8, nb_db_now_ms(db));
        rc = nb_db_step_done(db, st, err, "writing board versions");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_board_set_check(nb_db *db, const char *board, int64_t job_id, nb_err *err)
{
    static const char sql[] = "INSERT INTO boards (board, check_job_id) VALUES (?1, ?2) "
                              "ON CONFLICT (board) DO UPDATE SET check_job_id = ?2";
    upd u = {board, NULL, job_id, 0};
    return upsert(db, sql, &u, err);
}

nb_code nb_db_board_job_ended(nb_db *db, const char *board, int error, int *errors,
                              nb_err *err)
{
    static const char sql[] =
        "INSERT INTO boards (board, job_errors) VALUES (?1, ?2) "
        "ON CONFLICT (board) DO UPDATE SET job_errors = CASE WHEN ?2 THEN job_errors + 1 "
        "ELSE 0 END";
    upd u = {board, NULL, error ? 1 : 0, 0};
    nb_code rc = upsert(db, sql, &u, err);
    if (!rc && errors) {
        nb_db_board b;
        rc = nb_db_board_get(db, board, &b, err);
        *errors = b.job_errors;
    }
    return rc;
}
