/* nb_db_owners: one row per owned job, in a table created on first use (an older npubench
 * ignores it: its jobs are then nobody's, as before). */
#include "nb_db_owners.h"

#include "nb_db_int.h"

nb_code nb_db_owner_open(nb_db *db, nb_err *err)
{
    nb_db_lock(db);
    /* owner_turns: when each owner ('' = jobs of no named client) was last served a lease,
     * as a sequence number: the lease order's fair share (nb_db_jobs) */
    nb_code rc = nb_db_exec(db,
                            "CREATE TABLE IF NOT EXISTS job_owners (job_id INTEGER PRIMARY KEY, "
                            "owner TEXT NOT NULL);"
                            "CREATE TABLE IF NOT EXISTS owner_turns (owner TEXT PRIMARY KEY, "
                            "served INTEGER NOT NULL)",
                            err);
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_owner_set(nb_db *db, int64_t job_id, const char *owner, nb_err *err)
{
    nb_code rc = nb_db_check_len(err, "owner", owner, NB_DB_NAME_MAX);
    if (rc)
        return rc;
    nb_db_lock(db);
    sqlite3_stmt *st;
    if (!(rc = nb_db_stmt(db, "INSERT OR REPLACE INTO job_owners (job_id, owner) VALUES (?, ?)",
                          &st, err))) {
        sqlite3_bind_int64(st, 1, job_id);
        nb_db_bind_str(st, 2, owner);
        rc = nb_db_step_done(db, st, err, "recording a job's owner");
    }
    nb_db_unlock(db);
    return rc;
}

nb_code nb_db_owner_get(nb_db *db, int64_t job_id, char out[NB_DB_NAME_MAX], nb_err *err)
{
    out[0] = '\0';
    nb_db_lock(db);
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, "SELECT owner FROM job_owners WHERE job_id = ?", &st, err);
    if (!rc) {
        sqlite3_bind_int64(st, 1, job_id);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW)
            nb_db_col_copy(st, 0, out, NB_DB_NAME_MAX);
        else if (s != SQLITE_DONE)
            rc = nb_db_sqlerr(db, err, "reading a job's owner");
        nb_db_done(st);
    }
    nb_db_unlock(db);
    return rc;
}
