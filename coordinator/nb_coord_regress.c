/* nb_coord_regress: the regression lifecycle over RPC — Regressions lists them (client key),
 * RegressionUpdate acknowledges or closes one (admin key), as `npubench regressions` calls. */
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_db_regress.h"

#define LIST_DEFAULT 1000

/* g as a message; its strings borrowed from g. */
static void to_pb(const nb_db_regression *g, Npubench__Regression *m)
{
    npubench__regression__init(m);
    m->id = g->id;
    m->run_id = g->run_id;
    m->series = (char *)g->series;
    m->model = (char *)g->model;
    m->board = (char *)g->board;
    m->kind = (char *)g->kind;
    m->detail = (char *)g->detail;
    m->state = (char *)nb_db_regress_state_name(g->state);
    m->created_unix_ms = g->created_ms;
    m->state_unix_ms = g->state_ms;
    m->ack_by = (char *)g->ack_by;
    m->ack_note = (char *)g->ack_note;
    m->ack_unix_ms = g->ack_ms;
    m->fixed_unix_ms = g->fixed_ms;
    m->fixed_run_id = g->fixed_run_id;
    m->fixed_by = (char *)g->fixed_by;
    m->fixed_note = (char *)g->fixed_note;
}

static nb_rpc_status h_list(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__RegressionsRequest, npubench__regressions_request__descriptor);
    unsigned mask = 0;
    nb_db_regress_state st;
    nb_code rc = NB_OK;
    if (*r->state && !(rc = nb_db_regress_state_parse("RegressionsRequest.state", r->state, &st,
                                                      &err)))
        mask = NB_REGRESS_STATE_BIT(st);
    if (!rc && (r->limit < 0 || r->limit > NB_DB_REGRESS_LIST_MAX))
        rc = nb_err_set(&err, NB_EINVAL, "RegressionsRequest.limit %d: must be 0..%d",
                        (int)r->limit, NB_DB_REGRESS_LIST_MAX);
    size_t limit = r->limit ? (size_t)r->limit : LIST_DEFAULT;
    nb_wire_free(r);
    nb_db_regression *g = NULL;
    size_t n = 0;
    if (!rc)
        rc = nb_db_regress_list(c->db, mask, limit, &g, &n, &err);
    if (rc)
        return nb_rpc_reply_err(reply, &err);
    Npubench__Regression *items = calloc(n ? n : 1, sizeof *items);
    Npubench__Regression **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    for (size_t i = 0; items && ptrs && i < n; i++) {
        to_pb(&g[i], &items[i]);
        ptrs[i] = &items[i];
    }
    Npubench__RegressionsResponse resp = NPUBENCH__REGRESSIONS_RESPONSE__INIT;
    resp.regressions = ptrs;
    resp.n_regressions = n;
    nb_rpc_status s = nb_coord_reply_built(reply, &resp, items && ptrs, "Regressions");
    free(items);
    free(ptrs);
    free(g);
    return s;
}

static nb_rpc_status h_update(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__RegressionUpdateRequest,
                    npubench__regression_update_request__descriptor);
    nb_db_regression *g = malloc(sizeof *g);
    nb_code rc;
    int close = !strcmp(r->op, "close");
    if (!g)
        rc = nb_err_set(&err, NB_ENOMEM, "RegressionUpdate: out of memory");
    else if (!close && strcmp(r->op, "ack"))
        rc = nb_err_set(&err, NB_EINVAL, "RegressionUpdateRequest.op '%.32s': expected ack or "
                                         "close",
                        r->op);
    else if (close)
        rc = nb_db_regress_close(c->db, r->id, r->by, r->note, g, &err);
    else
        rc = nb_db_regress_ack(c->db, r->id, r->by, r->note, g, &err);
    if (!rc)
        nb_coord_log(c, "regression %lld (run %lld) %s by %.128s%s%.200s", (long long)g->id,
                     (long long)g->run_id, close ? "closed" : "acknowledged", r->by,
                     *r->note ? ": " : "", r->note);
    nb_wire_free(r);
    nb_rpc_status s;
    if (rc) {
        s = nb_rpc_reply_err(reply, &err);
    } else {
        Npubench__Regression m;
        to_pb(g, &m);
        Npubench__RegressionUpdateResponse resp = NPUBENCH__REGRESSION_UPDATE_RESPONSE__INIT;
        resp.regression = &m;
        s = nb_rpc_reply_pack(reply, &resp);
    }
    free(g);
    return s;
}

nb_code nb_coord_register_regress_api(nb_coord *c, nb_err *err)
{
    nb_code rc = nb_rpc_server_handle(c->srv, "npubench.Client/Regressions", h_list, c,
                                      NB_RPC_READONLY, err);
    return rc ? rc
              : nb_rpc_server_handle(c->srv, "npubench.Client/RegressionUpdate", h_update, c,
                                     NB_RPC_ADMIN, err);
}
