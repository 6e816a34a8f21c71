/* nb_coord_replay: the RPC server's kept answers (nb_rpc_replay_store) in the coordinator's
 * database, so a replayed Drain or CancelJob after a restart answers as the first time and
 * does nothing. */
#include <stdio.h>

#include "nb_coord_int.h"
#include "nb_db_replay.h"
#include "nb_time.h"

static void record(void *user, uint64_t id, uint64_t key, int64_t expires_ms, int status,
                   const char *message, const uint8_t *payload, size_t len)
{
    nb_coord *c = user;
    nb_err err;
    nb_code rc;
    if (len > NB_DB_REPLAY_PAYLOAD_MAX) /* not kept whole: a replay is refused instead */
        rc = nb_db_replay_record(c->db, id, key, expires_ms, NB_RPC_ALREADY_EXISTS,
                                 "request id already answered before a restart", NULL, 0, &err);
    else
        rc = nb_db_replay_record(c->db, id, key, expires_ms, status, message, payload, len,
                                 &err);
    if (rc)
        nb_coord_log(c, "request %llu: answer not kept for replays: %s", (unsigned long long)id,
                     err.msg);
    /* the table holds the last 10 minutes: every 1024th answer drops what expired */
    static unsigned kept;
    if ((__atomic_add_fetch(&kept, 1, __ATOMIC_RELAXED) & 1023) == 0 &&
        nb_db_replay_prune(c->db, nb_wall_ms(), &err))
        nb_coord_log(c, "kept answers: %s", err.msg);
}

static int lookup(void *user, uint64_t id, uint64_t key, int *status, char *message,
                  size_t message_cap, uint8_t **payload, size_t *len)
{
    nb_coord *c = user;
    nb_err err;
    int found = 0;
    if (nb_db_replay_lookup(c->db, id, key, nb_wall_ms(), &found, status, message, message_cap,
                            payload, len, &err)) {
        nb_coord_log(c, "request %llu: kept answers unreadable: %s", (unsigned long long)id,
                     err.msg);
        return 0;
    }
    return found;
}

nb_code nb_coord_replay_attach(nb_coord *c, nb_err *err)
{
    if (!c->secret && !c->worker_secret && !c->admin_secret)
        return NB_OK; /* no keys: no replay is refused, nothing to keep */
    nb_code rc = nb_db_replay_open(c->db, nb_wall_ms(), err);
    if (rc)
        return rc;
    nb_rpc_replay_store s = {c, record, lookup};
    nb_rpc_server_replay_store(c->srv, &s);
    return NB_OK;
}
