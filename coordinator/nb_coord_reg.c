/* nb_coord_reg: the registrations this coordinator process holds (full WorkerInfo, the
 * job each worker reports); the durable registry with liveness is db/nb_db_workers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_time.h"

static coord_worker *find_locked(nb_coord *c, const char *id)
{
    for (size_t i = 0; i < c->n_workers; i++)
        if (!strcmp(c->workers[i].id, id))
            return &c->workers[i];
    return NULL;
}

Npubench__WorkerInfo *nb_coord_reg_info(nb_coord *c, const char *id)
{
    uint8_t *copy = NULL;
    size_t len = 0;
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    if (w) {
        copy = malloc(w->info_len ? w->info_len : 1);
        if (copy) {
            memcpy(copy, w->info_pb, w->info_len);
            len = w->info_len;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!copy)
        return NULL;
    Npubench__WorkerInfo *info = NULL;
    nb_err e;
    if (nb_wire_unpack(&npubench__worker_info__descriptor, copy, len, 0, &info, &e) != NB_OK)
        info = NULL;
    free(copy);
    return info;
}

nb_code nb_coord_reg_put(nb_coord *c, const Npubench__WorkerInfo *info, nb_err *err)
{
    uint8_t *pb;
    size_t len;
    nb_code rc = nb_wire_pack(info, &pb, &len, err);
    if (rc)
        return rc;
    int64_t now = nb_wall_ms();
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, info->worker_id);
    if (!w) {
        if (c->n_workers == c->cap_workers) {
            size_t nc = c->cap_workers ? c->cap_workers * 2 : 16;
            coord_worker *p = realloc(c->workers, nc * sizeof *p);
            if (!p) {
                pthread_mutex_unlock(&c->mu);
                free(pb);
                return nb_err_set(err, NB_ENOMEM, "worker registry: out of memory");
            }
            c->workers = p;
            c->cap_workers = nc;
        }
        w = &c->workers[c->n_workers++];
        memset(w, 0, sizeof *w);
        snprintf(w->id, sizeof w->id, "%s", info->worker_id);
    } else if (strcmp(w->instance, info->instance_id) != 0) {
        /* A new process took the id over: whatever the old one ran is gone. */
        w->current_job = w->current_parent = 0;
        w->lease_id[0] = '\0';
        w->prog_done = w->prog_total = 0;
        w->prog_msg[0] = '\0';
        w->tok_done = w->tok_total = 0;
    }
    free(w->info_pb);
    w->info_pb = pb;
    w->info_len = len;
    snprintf(w->instance, sizeof w->instance, "%s", info->instance_id);
    snprintf(w->host, sizeof w->host, "%s", info->host);
    snprintf(w->device, sizeof w->device, "%s", info->device_id);
    w->registered_ms = now;
    w->last_heartbeat_ms = now;
    pthread_mutex_unlock(&c->mu);
    return NB_OK;
}

int nb_coord_reg_heartbeat(nb_coord *c, const char *id, int64_t job, const char *lease,
                           int64_t done, int64_t total, const char *msg)
{
    int r = 0;
    if (!msg)
        msg = "";
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    if (w) {
        r = w->current_job != job || w->prog_done != done || w->prog_total != total ||
                    strncmp(w->prog_msg, msg, sizeof w->prog_msg - 1)
                ? 2
                : 1;
        w->last_heartbeat_ms = nb_wall_ms();
        if (w->current_job != job) {
            w->current_parent = 0;
            w->tok_done = w->tok_total = 0;
        }
        w->current_job = job;
        snprintf(w->lease_id, sizeof w->lease_id, "%s", job && lease ? lease : "");
        w->prog_done = done;
        w->prog_total = total;
        snprintf(w->prog_msg, sizeof w->prog_msg, "%s", msg);
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

void nb_coord_reg_set_job(nb_coord *c, const char *id, int64_t job, const char *lease,
                          int64_t parent)
{
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    if (w) {
        w->current_job = job;
        w->current_parent = job ? parent : 0;
        snprintf(w->lease_id, sizeof w->lease_id, "%s", job && lease ? lease : "");
        w->prog_done = w->prog_total = 0;
        w->prog_msg[0] = '\0';
        w->tok_done = w->tok_total = 0;
    }
    pthread_mutex_unlock(&c->mu);
}

void nb_coord_reg_tokens(nb_coord *c, const char *id, int64_t job, const Npubench__Progress *p)
{
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    if (w && w->current_job == job) {
        w->tok_done = p->tokens_done < 0 ? 0 : p->tokens_done;
        w->tok_total = p->tokens_total < 0 ? 0 : p->tokens_total;
        snprintf(w->unit, sizeof w->unit, "%s", p->unit ? p->unit : "");
    }
    pthread_mutex_unlock(&c->mu);
}

int nb_coord_reg_job_tokens(nb_coord *c, int64_t job, int32_t *done, int32_t *total, char *unit,
                            size_t cap)
{
    int found = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_workers && !found; i++) {
        coord_worker *w = &c->workers[i];
        if (job > 0 && w->current_job == job && w->tok_total > 0) {
            *done = w->tok_done;
            *total = w->tok_total;
            snprintf(unit, cap, "%s", w->unit);
            found = 1;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

int nb_coord_reg_instance_is(nb_coord *c, const char *id, const char *instance)
{
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    int r = !w ? -1 : !strcmp(w->instance, instance ? instance : "");
    pthread_mutex_unlock(&c->mu);
    return r;
}

int64_t nb_coord_reg_parent(nb_coord *c, const char *id)
{
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    int64_t p = w ? w->current_parent : 0;
    pthread_mutex_unlock(&c->mu);
    return p;
}

coord_worker *nb_coord_reg_snapshot(nb_coord *c, size_t *n)
{
    *n = 0;
    pthread_mutex_lock(&c->mu);
    coord_worker *out = calloc(c->n_workers ? c->n_workers : 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; out && i < c->n_workers; i++) {
        out[k] = c->workers[i];
        out[k].info_pb = malloc(c->workers[i].info_len ? c->workers[i].info_len : 1);
        if (!out[k].info_pb)
            continue;
        memcpy(out[k].info_pb, c->workers[i].info_pb, c->workers[i].info_len);
        k++;
    }
    pthread_mutex_unlock(&c->mu);
    *n = k;
    return out;
}

void nb_coord_reg_snapshot_free(coord_worker *w, size_t n)
{
    if (!w)
        return;
    for (size_t i = 0; i < n; i++)
        free(w[i].info_pb);
    free(w);
}

void nb_coord_reg_set_clock(nb_coord *c, const char *id, int64_t offset_ms)
{
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    if (w)
        w->clock_offset_ms = offset_ms;
    pthread_mutex_unlock(&c->mu);
}

int nb_coord_reg_remove(nb_coord *c, const char *id, const char *instance)
{
    int removed = 0;
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    if (w && !strcmp(w->instance, instance)) {
        free(w->info_pb);
        *w = c->workers[--c->n_workers];
        removed = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return removed;
}

void nb_coord_reg_free_all(nb_coord *c)
{
    for (size_t i = 0; i < c->n_workers; i++)
        free(c->workers[i].info_pb);
    free(c->workers);
    c->workers = NULL;
    c->n_workers = c->cap_workers = 0;
}

int nb_coord_reg_find_device(nb_coord *c, const char *host, const char *device,
                             const char *except_id, coord_worker *holder)
{
    int found = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_workers; i++) {
        coord_worker *w = &c->workers[i];
        if (!strcmp(w->host, host) && !strcmp(w->device, device) &&
            (!except_id || strcmp(w->id, except_id))) {
            *holder = *w;
            holder->info_pb = NULL;
            holder->info_len = 0;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

int nb_coord_reg_get(nb_coord *c, const char *id, coord_worker *out)
{
    pthread_mutex_lock(&c->mu);
    coord_worker *w = find_locked(c, id);
    if (w) {
        *out = *w;
        out->info_pb = NULL;
        out->info_len = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return w != NULL;
}
