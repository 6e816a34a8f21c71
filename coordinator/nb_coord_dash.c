/* nb_coord_dash: the dashboard as files over RPC (npubench.Client/Dashboard), so a CI job
 * exports the same pages --http serves from the client side, with only the client key. */
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_dash.h"

/* Under the transport's 16 MiB message limit, with room for the envelope. */
#define DASH_MAX_BYTES ((size_t)12 << 20)
#define DASH_MAX_FILES 100000

void nb_coord_dash_opts(nb_coord *c, nb_dash_opts *o)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_lock(&c->mu);
    o->draining = c->draining;
    pthread_mutex_unlock(&c->mu);
    o->band_runs = (size_t)c->o.regression_last_n;
    o->band_rel = c->o.regression_min_rel;
    o->generated_by = c->bound;
}

typedef struct collect {
    nb_arena *a;
    Npubench__DashboardFile **files;
    size_t n, cap, bytes;
} collect;

static nb_code add_file(void *ud, const char *name, const char *data, size_t len, nb_err *err)
{
    collect *k = ud;
    k->bytes += len + strlen(name);
    if (k->bytes > DASH_MAX_BYTES || k->n >= DASH_MAX_FILES)
        return nb_err_set(err, NB_ENOMEM,
                          "DashboardRequest: the export passes %zu MiB (at %s); ask for fewer "
                          "runs per plot (max_points)",
                          DASH_MAX_BYTES >> 20, name);
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        Npubench__DashboardFile **f = nb_arena_alloc(k->a, cap * sizeof *f);
        if (!f)
            return nb_err_set(err, NB_ENOMEM, "coordinator: out of memory");
        if (k->n)
            memcpy(f, k->files, k->n * sizeof *f);
        k->files = f;
        k->cap = cap;
    }
    Npubench__DashboardFile *f = nb_arena_alloc(k->a, sizeof *f);
    uint8_t *copy = len ? nb_arena_memdup(k->a, data, len) : NULL;
    char *nm = nb_arena_strdup(k->a, name);
    if (!f || !nm || (len && !copy))
        return nb_err_set(err, NB_ENOMEM, "coordinator: out of memory");
    npubench__dashboard_file__init(f);
    f->name = nm;
    f->content.data = copy;
    f->content.len = len;
    k->files[k->n++] = f;
    return NB_OK;
}

static nb_rpc_status h_dashboard(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__DashboardRequest, npubench__dashboard_request__descriptor);
    if (r->max_points < 0 || r->max_points > 10000) {
        nb_err_set(&err, NB_EINVAL, "DashboardRequest.max_points %d: must be 0..10000",
                   (int)r->max_points);
        nb_wire_free(r);
        return nb_rpc_reply_err(reply, &err);
    }
    nb_dash_opts o;
    nb_coord_dash_opts(c, &o);
    o.max_points = (size_t)r->max_points;
    nb_wire_free(r);
    nb_arena a = {0};
    collect k = {.a = &a};
    nb_rpc_status st;
    if (nb_dash_export(c->db, &o, add_file, &k, NULL, &err)) {
        st = nb_rpc_reply_err(reply, &err);
    } else {
        Npubench__DashboardResponse resp = NPUBENCH__DASHBOARD_RESPONSE__INIT;
        resp.files = k.files;
        resp.n_files = k.n;
        st = nb_rpc_reply_pack(reply, &resp);
    }
    nb_arena_free(&a);
    return st;
}

nb_code nb_coord_register_dash_api(nb_coord *c, nb_err *err)
{
    return nb_rpc_server_handle(c->srv, "npubench.Client/Dashboard", h_dashboard, c,
                                NB_RPC_READONLY, err);
}
