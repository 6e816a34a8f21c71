/* nb_coord_client: the client-facing API ("npubench.Client/<Method>") — submit, jobs,
 * cancel, workers, watch (long poll), history, compare, reference, import — as thin
 * translations between protobuf messages and db/ calls. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_coord_int.h"
#include "nb_db_owners.h"
#include "nb_db_alias.h"
#include "nb_db_deploy.h"
#include "nb_db_boards.h"
#include "nb_db_import.h"
#include "nb_file.h"
#include "nb_time.h"

#define C_METHOD(name) "npubench.Client/" name


/* ---- jobs as messages ---- */

static int kind_of_job(const nb_db_job *j)
{
    return nb_job_kind_parse_queued(j->kind);
}

/* A spec from the selector columns, for listings (which do not load specs). */
static Npubench__JobSpec *spec_from_sel(nb_arena *a, const nb_db_job *j)
{
    Npubench__JobSpec *s = nb_arena_alloc(a, sizeof *s);
    Npubench__DeploymentSelector *sel = nb_arena_alloc(a, sizeof *sel);
    if (!s || !sel)
        return NULL;
    npubench__job_spec__init(s);
    npubench__deployment_selector__init(sel);
    s->kind = kind_of_job(j);
    s->priority = j->priority;
    s->matrix = !strcmp(j->kind, NB_JOB_GROUP_MATRIX);
    const char *slash = strrchr(j->sel_deployment, '/');
    if (slash) {
        char *m = nb_arena_strndup(a, j->sel_deployment, (size_t)(slash - j->sel_deployment));
        sel->model = m && strcmp(m, "*") ? m : (char *)protobuf_c_empty_string;
        sel->dtype = strcmp(slash + 1, "*") ? nb_arena_strdup(a, slash + 1)
                                            : (char *)protobuf_c_empty_string;
    }
    sel->dtype_id = (Npubench__Dtype)j->sel_dtype_id;
    sel->backend = nb_arena_strdup(a, j->sel_backend);
    sel->board = nb_arena_strdup(a, j->sel_board);
    size_t nt = 0;
    for (const char *p = j->sel_tags; *p; p++)
        nt += *p == ',';
    if (j->sel_tags[0]) {
        sel->tags = nb_arena_calloc(a, nt + 1, sizeof *sel->tags);
        const char *p = j->sel_tags;
        while (sel->tags && *p) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            sel->tags[sel->n_tags++] = nb_arena_strndup(a, p, n);
            p += n + (e ? 1 : 0);
        }
    }
    s->selector = sel;
    return s;
}

static Npubench__Job *job_pb(nb_coord *c, nb_arena *a, const nb_db_job *j, int detail,
                             int with_log)
{
    Npubench__Job *m = nb_arena_alloc(a, sizeof *m);
    Npubench__Progress *p = nb_arena_alloc(a, sizeof *p);
    if (!m || !p)
        return NULL;
    npubench__job__init(m);
    npubench__progress__init(p);
    nb_err e;
    m->job_id = j->id;
    m->spec = NULL;
    if (detail && j->spec && j->spec_format == NB_SPEC_PROTO) {
        Npubench__JobSpec *s = NULL;
        if (nb_wire_unpack(&npubench__job_spec__descriptor, j->spec, j->spec_len, 0, &s, &e) ==
            NB_OK) {
            nb_arena_defer_free(a, nb_wire_free, s);
            m->spec = s;
        }
    }
    if (!m->spec)
        m->spec = spec_from_sel(a, j);
    m->state = nb_coord_state_to_pb(j->state);
    m->worker_id = nb_arena_strdup(a, j->leased_worker);
    m->created_unix_ms = j->created_ms;
    m->started_unix_ms = j->started_ms;
    m->finished_unix_ms = j->finished_ms;
    m->attempts = j->attempts;
    /* A finished job's last report ("rep 3/20") would read as still running. */
    int over = nb_job_state_terminal(j->state);
    p->total = (int32_t)j->progress_total;
    p->done = j->state == NB_JOB_DONE ? p->total : (int32_t)j->progress_done;
    p->message = nb_arena_strdup(a, over ? "" : j->progress_msg);
    m->progress = p;
    m->request_id = nb_arena_strdup(a, j->request_id);
    m->parent_job_id = j->parent_id;
    m->error = nb_arena_strdup(a, j->error);
    m->queued_reason = nb_arena_strdup(a, j->state == NB_JOB_QUEUED ? j->queued_reason : "");
    m->is_group = j->is_group;
    m->expires_unix_ms = j->expires_ms;
    if (with_log && j->log)
        m->log = nb_arena_strdup(a, j->log);
    if (!detail)
        return m;
    nb_db_job *kids = NULL;
    size_t nk = 0;
    if (j->is_group) {
        nb_db_job_filter f = {.parent_id = j->id, .limit = 10000, .oldest_first = 1};
        if (nb_db_job_list(c->db, &f, &kids, &nk, &e) == NB_OK && nk) {
            m->child_job_ids = nb_arena_calloc(a, nk, sizeof *m->child_job_ids);
            for (size_t i = 0; m->child_job_ids && i < nk; i++)
                m->child_job_ids[m->n_child_job_ids++] = kids[i].id;
        }
    }
    int matrix = j->is_group && !strcmp(j->kind, NB_JOB_GROUP_MATRIX);
    /* A matrix shows every board's result, those already in while others still run (a CI
     * that stops waiting keeps them); a sharded verify-full its merge, once there. */
    if (nb_job_state_terminal(j->state) || matrix) {
        size_t want = matrix ? nk : 1;
        m->results = nb_arena_calloc(a, want ? want : 1, sizeof *m->results);
        for (size_t i = 0; m->results && i < want; i++) {
            Npubench__JobResult *res = NULL;
            if (nb_coord_store_get(c, matrix ? kids[i].id : j->id, &res, &e) == NB_OK) {
                nb_arena_defer_free(a, nb_wire_free, res);
                if (!with_log && res->log != protobuf_c_empty_string) {
                    free(res->log);
                    res->log = (char *)protobuf_c_empty_string;
                }
                m->results[m->n_results++] = res;
            }
        }
    }
    nb_db_job_list_free(kids, nk);
    return m;
}

/* ---- SubmitJob ---- */

static nb_rpc_status h_submit(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__SubmitJobRequest, npubench__submit_job_request__descriptor);
    nb_err err = {0};
    int64_t *ids = NULL;
    size_t n = 0;
    int dup = 0;
    nb_rpc_status st;
    /* Without a client key the envelope's id becomes the job's: a replay that outlives the
     * RPC layer's memory (a restart) still finds its job instead of making another. */
    char rid[32];
    char *own_rid = r->request_id;
    if (!*r->request_id) {
        snprintf(rid, sizeof rid, "rpc-%016llx", (unsigned long long)req->request_id);
        r->request_id = rid; /* borrowed until nb_wire_free(r) */
    }
    /* jumping the whole queue is the admin's: a client key alone gets up to the limit */
    if (r->spec && r->spec->priority > NB_JOB_PRIORITY_CLIENT_MAX &&
        !(req->roles & NB_WIRE_ROLE_ADMIN)) {
        st = nb_rpc_reply_status(reply, NB_RPC_PERMISSION_DENIED,
                                 "JobSpec.priority %d: above %d needs the admin credential",
                                 r->spec->priority, NB_JOB_PRIORITY_CLIENT_MAX);
    } else if (nb_coord_disk_room(c, &err) || nb_sched_submit(c, r, &ids, &n, &dup, &err)) {
        st = nb_rpc_reply_err(reply, &err);
    } else {
        if (req->client && !dup && n && nb_db_owner_set(c->db, ids[0], req->client, &err))
            nb_coord_log(c, "job %lld: owner %s not recorded: %s", (long long)ids[0],
                         req->client, err.msg);
        Npubench__SubmitJobResponse resp = NPUBENCH__SUBMIT_JOB_RESPONSE__INIT;
        resp.job_ids = ids;
        resp.n_job_ids = n;
        resp.duplicate = dup;
        st = nb_rpc_reply_pack(reply, &resp);
    }
    free(ids);
    r->request_id = own_rid;
    nb_wire_free(r);
    return st;
}

/* ---- GetJob / ListJobs ---- */

static nb_rpc_status h_get(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__GetJobRequest, npubench__get_job_request__descriptor);
    nb_err err = {0};
    nb_db_job j;
    nb_rpc_status st;
    if (nb_db_job_get(c->db, r->job_id, &j, &err)) {
        st = nb_rpc_reply_err(reply, &err);
    } else {
        nb_arena a = {0};
        Npubench__GetJobResponse resp = NPUBENCH__GET_JOB_RESPONSE__INIT;
        resp.job = job_pb(c, &a, &j, 1, r->include_log);
        st = nb_coord_reply_built(reply, &resp, resp.job && !a.failed, "GetJob");
        nb_arena_free(&a);
        nb_db_job_free(&j);
    }
    nb_wire_free(r);
    return st;
}

static int sel_filter_ok(const Npubench__DeploymentSelector *s, const nb_db_job *j)
{
    if (!s)
        return 1;
    char model[NB_DB_NAME_MAX];
    snprintf(model, sizeof model, "%s", j->sel_deployment);
    char *slash = strrchr(model, '/');
    if (slash)
        *slash = '\0';
    if (*s->model && strcmp(model, "*") && !nb_job_model_match(s->model, model, NULL))
        return 0;
    if (*s->board && strcmp(s->board, j->sel_board))
        return 0;
    if (*s->backend && strcmp(s->backend, j->sel_backend))
        return 0;
    return 1;
}

static nb_rpc_status h_list(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__ListJobsRequest, npubench__list_jobs_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    size_t limit = r->limit > 0 ? (size_t)r->limit : 50;
    if (limit > 1000)
        limit = 1000;
    nb_db_job_filter f = {.parent_id = -1, .limit = 5000};
    if (r->state > 0 && r->state <= NPUBENCH__JOB_STATE__JOB_CANCELLED)
        f.states = NB_JOB_STATE_BIT(r->state - 1);
    nb_db_job *jobs = NULL;
    size_t n = 0;
    if (nb_db_job_list(c->db, &f, &jobs, &n, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    nb_arena a = {0};
    Npubench__ListJobsResponse resp = NPUBENCH__LIST_JOBS_RESPONSE__INIT;
    resp.jobs = nb_arena_calloc(&a, limit, sizeof *resp.jobs);
    for (size_t i = 0; resp.jobs && i < n; i++) {
        if (r->before_job_id > 0 && jobs[i].id >= r->before_job_id)
            continue;
        if (!sel_filter_ok(r->selector, &jobs[i]))
            continue;
        if (resp.n_jobs == limit) {
            resp.next_before_job_id = resp.jobs[limit - 1]->job_id;
            break;
        }
        Npubench__Job *m = job_pb(c, &a, &jobs[i], 0, 0);
        if (m)
            resp.jobs[resp.n_jobs++] = m;
    }
    st = nb_coord_reply_built(reply, &resp, !a.failed, "ListJobs");
    nb_arena_free(&a);
    nb_db_job_list_free(jobs, n);
out:
    nb_wire_free(r);
    return st;
}

/* ---- CancelJob ---- */

static nb_rpc_status h_cancel(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__CancelJobRequest, npubench__cancel_job_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    char why[NB_DB_MSG_MAX];
    snprintf(why, sizeof why, "%.400s", *r->reason ? r->reason : "cancelled by a client");
    nb_db_job j;
    /* a named client's job: another client cancels it only with the admin key (the job's
     * group decides for its children) */
    char owner[NB_DB_NAME_MAX] = "";
    nb_db_job pj;
    int64_t top = nb_db_job_peek(c->db, r->job_id, &pj, &err) == NB_OK && pj.parent_id
                      ? pj.parent_id
                      : r->job_id;
    nb_db_owner_get(c->db, top, owner, &err);
    if (*owner && !(req->roles & NB_WIRE_ROLE_ADMIN) &&
        (!req->client || strcmp(req->client, owner))) {
        st = nb_rpc_reply_status(reply, NB_RPC_PERMISSION_DENIED,
                                 "CancelJobRequest: job %lld belongs to client %s; cancelling "
                                 "another client's job needs the admin credential",
                                 (long long)r->job_id, owner);
    } else if (nb_db_job_cancel(c->db, r->job_id, why, &err) ||
               nb_db_job_get(c->db, r->job_id, &j, &err)) {
        if (err.code == NB_EMISMATCH)
            st = nb_rpc_reply_status(reply, NB_RPC_FAILED_PRECONDITION, "%s", err.msg);
        else
            st = nb_rpc_reply_err(reply, &err);
    } else {
        nb_coord_stat_add(c, &c->stats.cancelled, 1);
        nb_coord_changed(c, j.id, j.parent_id);
        nb_coord_log(c, "job %lld cancelled (%s)", (long long)j.id, why);
        Npubench__CancelJobResponse resp = NPUBENCH__CANCEL_JOB_RESPONSE__INIT;
        resp.state = nb_coord_state_to_pb(j.state);
        st = nb_rpc_reply_pack(reply, &resp);
        nb_db_job_free(&j);
    }
    nb_wire_free(r);
    return st;
}

/* ---- ListWorkers ---- */

static char **split_list(nb_arena *a, const char *list, size_t *n)
{
    *n = 0;
    if (!list || !*list)
        return NULL;
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    char **out = nb_arena_calloc(a, cap, sizeof *out);
    for (const char *p = list; out && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        out[(*n)++] = nb_arena_strndup(a, p, len);
        p += len + (e ? 1 : 0);
    }
    return out;
}

static nb_rpc_status h_workers(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__ListWorkersRequest, npubench__list_workers_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    nb_db_worker *w = NULL;
    size_t n = 0;
    if (nb_db_worker_list(c->db, &w, &n, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    size_t nr = 0;
    coord_worker *snap = nb_coord_reg_snapshot(c, &nr);
    nb_arena a = {0};
    Npubench__ListWorkersResponse resp = NPUBENCH__LIST_WORKERS_RESPONSE__INIT;
    resp.workers = nb_arena_calloc(&a, n ? n : 1, sizeof *resp.workers);
    for (size_t i = 0; resp.workers && i < n; i++) {
        if (w[i].state == NB_WORKER_GONE && !r->include_dead)
            continue;
        Npubench__WorkerStatus *s = nb_arena_alloc(&a, sizeof *s);
        Npubench__Progress *p = nb_arena_alloc(&a, sizeof *p);
        if (!s || !p)
            break;
        npubench__worker_status__init(s);
        npubench__progress__init(p);
        Npubench__WorkerInfo *info = nb_coord_reg_info(c, w[i].id);
        if (info) {
            nb_arena_defer_free(&a, nb_wire_free, info);
            /* the instance id is what proves a worker process: it stays here */
            if (info->instance_id != protobuf_c_empty_string)
                free(info->instance_id);
            info->instance_id = (char *)protobuf_c_empty_string;
        } else {
            /* Known from the db only (e.g. before it re-registered after a restart). */
            info = nb_arena_alloc(&a, sizeof *info);
            if (!info)
                break;
            npubench__worker_info__init(info);
            info->worker_id = nb_arena_strdup(&a, w[i].id);
            info->board_name = nb_arena_strdup(&a, w[i].board_name);
            info->board_type = nb_arena_strdup(&a, w[i].board_type);
            info->host = nb_arena_strdup(&a, w[i].host);
            info->device_id = nb_arena_strdup(&a, w[i].device_id);
            info->version = nb_arena_strdup(&a, w[i].version);
            info->tags = split_list(&a, w[i].tags, &info->n_tags);
            info->backends = split_list(&a, w[i].backends, &info->n_backends);
        }
        s->info = info;
        s->alive = w[i].state == NB_WORKER_ALIVE;
        s->state = (char *)nb_db_worker_state_name(w[i].state);
        s->last_heartbeat_unix_ms = w[i].last_seen_ms;
        s->registered_unix_ms = w[i].first_seen_ms;
        for (size_t k = 0; k < nr; k++) {
            if (strcmp(snap[k].id, w[i].id))
                continue;
            s->current_job_id = snap[k].current_job;
            /* lease ids never leave the coordinator but to their holder */
            s->clock_offset_ms = snap[k].clock_offset_ms;
            p->done = (int32_t)snap[k].prog_done;
            p->total = (int32_t)snap[k].prog_total;
            p->message = nb_arena_strdup(&a, snap[k].prog_msg);
        }
        s->progress = p;
        nb_coord_health_status(c, &a, s);
        resp.workers[resp.n_workers++] = s;
    }
    st = nb_coord_reply_built(reply, &resp, !a.failed, "ListWorkers");
    nb_arena_free(&a);
    nb_coord_reg_snapshot_free(snap, nr);
    free(w);
out:
    nb_wire_free(r);
    return st;
}

/* ---- WatchJob ---- */

/* What a child that has not reported yet will count to: a verify-full shard its prompt
 * range (so the group's total is right from the start, not growing 0/3, 1/5, 2/7), else 1. */
static int64_t planned_total(nb_coord *c, int64_t id)
{
    nb_db_job j;
    nb_err e;
    int64_t t = 1;
    if (nb_db_job_get(c->db, id, &j, &e))
        return t;
    Npubench__JobSpec *s = NULL;
    if (j.spec && j.spec_format == NB_SPEC_PROTO &&
        nb_wire_unpack(&npubench__job_spec__descriptor, j.spec, j.spec_len, 0, &s, &e) == NB_OK &&
        s->shard && s->shard->prompt_end > s->shard->prompt_begin)
        t = s->shard->prompt_end - s->shard->prompt_begin;
    nb_wire_free(s);
    nb_db_job_free(&j);
    return t;
}

/* A group's progress: its children's, summed; and where a running child's unit stands (its
 * token position: *tok_total > 0), so a sharded verify-full or a matrix shows a token line of
 * its own as a single job does (the first running child's, as its worker last said). */
static void group_progress(nb_coord *c, const nb_db_job *g, int64_t *done, int64_t *total,
                           char *msg, size_t cap, Npubench__Progress *tok, char *unit,
                           size_t ucap)
{
    nb_db_job *kids = NULL;
    size_t nk = 0, fin = 0, running = 0;
    nb_db_job_filter f = {.parent_id = g->id, .limit = 10000};
    nb_err e;
    *done = *total = 0;
    if (nb_db_job_list(c->db, &f, &kids, &nk, &e) == NB_OK) {
        for (size_t i = 0; i < nk; i++) {
            int64_t t = kids[i].progress_total > 0 ? kids[i].progress_total
                                                    : planned_total(c, kids[i].id);
            int term = nb_job_state_terminal(kids[i].state);
            *total += t;
            *done += term ? t : kids[i].progress_done < t ? kids[i].progress_done : t;
            fin += term;
            running += kids[i].state == NB_JOB_RUNNING || kids[i].state == NB_JOB_LEASED;
            if (kids[i].state == NB_JOB_RUNNING && tok->tokens_total <= 0 &&
                nb_coord_reg_job_tokens(c, kids[i].id, &tok->tokens_done, &tok->tokens_total,
                                        unit, ucap))
                tok->unit = unit;
        }
    }
    snprintf(msg, cap, "%zu of %zu %s finished, %zu running", fin, nk,
             !strcmp(g->kind, NB_JOB_GROUP_MATRIX) ? "boards" : "shards", running);
    nb_db_job_list_free(kids, nk);
}

static nb_rpc_status h_watch(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__WatchJobRequest, npubench__watch_job_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    int64_t until = nb_coord_poll_until(c, req, r->wait_ms);
    uint64_t gen = nb_coord_gen(c);
    for (;;) {
        uint64_t seq = nb_coord_job_seq(c, r->job_id);
        if (!seq)
            seq = 1; /* never changed since this coordinator started */
        nb_db_job j;
        if (nb_db_job_get(c->db, r->job_id, &j, &err)) {
            st = nb_rpc_reply_err(reply, &err);
            break;
        }
        int term = nb_job_state_terminal(j.state);
        int timeout = 0;
        if (seq <= r->after_seq && !term) {
            nb_db_job_free(&j);
            int w = nb_coord_wait(c, &gen, until);
            if (w == 0)
                continue;
            timeout = 1;
            if (nb_db_job_get(c->db, r->job_id, &j, &err)) {
                st = nb_rpc_reply_err(reply, &err);
                break;
            }
        }
        Npubench__WatchJobResponse resp = NPUBENCH__WATCH_JOB_RESPONSE__INIT;
        Npubench__ProgressEvent ev = NPUBENCH__PROGRESS_EVENT__INIT, *evp = &ev;
        Npubench__Progress p = NPUBENCH__PROGRESS__INIT;
        char msg[NB_DB_MSG_MAX], unit[16];
        resp.state = nb_coord_state_to_pb(j.state);
        resp.done = nb_job_state_terminal(j.state);
        resp.last_seq = timeout ? r->after_seq : seq;
        if (!timeout || resp.done) {
            int64_t d = j.progress_done, t = j.progress_total;
            if (j.state == NB_JOB_QUEUED && j.attempts > 0) /* back in the queue: say why */
                snprintf(msg, sizeof msg, "requeued after attempt %d%s%.180s%s%s%.180s", j.attempts,
                         *j.error ? " (" : "", j.error, *j.error ? ")" : "",
                         *j.queued_reason ? "; " : "", j.queued_reason);
            else
                snprintf(msg, sizeof msg, "%s", j.state == NB_JOB_QUEUED ? j.queued_reason
                                                                         : j.progress_msg);
            if (j.is_group)
                group_progress(c, &j, &d, &t, msg, sizeof msg, &p, unit, sizeof unit);
            if (j.state == NB_JOB_DONE) { /* its last report ("1/3 repetition 1") is past */
                d = t;
                if (!j.is_group)
                    msg[0] = '\0';
            }
            p.done = (int32_t)d;
            p.total = (int32_t)t;
            p.message = msg;
            /* where the unit under way is, as its worker last said (memory only) */
            if (j.state == NB_JOB_RUNNING && !j.is_group &&
                nb_coord_reg_job_tokens(c, j.id, &p.tokens_done, &p.tokens_total, unit,
                                        sizeof unit))
                p.unit = unit;
            ev.seq = resp.last_seq = seq > r->after_seq ? seq : r->after_seq + 1;
            ev.unix_ms = nb_wall_ms();
            ev.progress = &p;
            ev.state = resp.state;
            resp.events = &evp;
            resp.n_events = 1;
        }
        st = nb_rpc_reply_pack(reply, &resp);
        nb_db_job_free(&j);
        break;
    }
    nb_wire_free(r);
    return st;
}

/* ---- History ---- */

static nb_rpc_status h_history(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__HistoryRequest, npubench__history_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    nb_arena a = {0};
    nb_db_history_row *rows = NULL;
    size_t n = 0;
    nb_db_deployment *deps = NULL;
    size_t nd = 0;
    nb_coord_aliases at = {0};
    nb_db_metric metrics[3];
    int nm = 0;
    if (*r->metric) {
        if (nb_db_metric_parse(r->metric, &metrics[0], &err)) {
            st = nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT, "HistoryRequest.metric: %s",
                                     err.msg);
            goto out;
        }
        nm = 1;
    } else {
        metrics[nm++] = NB_METRIC_TTFT;
        metrics[nm++] = NB_METRIC_TPS;
        metrics[nm++] = NB_METRIC_GATE;
    }
    size_t limit = r->limit > 0 ? (size_t)r->limit : 100;
    if (limit > NB_DB_HISTORY_MAX)
        limit = NB_DB_HISTORY_MAX;
    /* "instruct", a path, the model's name or any alias of it: every stored name it
     * matches. */
    if (nb_db_deployment_list(c->db, NULL, &deps, &nd, &err) ||
        nb_coord_alias_table(c, &at, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    const char *names[64];
    size_t nn = 0;
    for (size_t i = 0; i < nd && nn < 64; i++) {
        if (*r->model &&
            !nb_job_model_match_aliased(r->model, deps[i].model, NULL, at.al, at.n))
            continue;
        int seen = 0;
        for (size_t k = 0; k < nn; k++)
            seen |= !strcmp(names[k], deps[i].model);
        if (!seen)
            names[nn++] = deps[i].model;
    }
    if (!*r->model) {
        nn = 1; /* no model filter: one query over everything */
        names[0] = "";
    }
    Npubench__HistoryResponse resp = NPUBENCH__HISTORY_RESPONSE__INIT;
    size_t cap = 0;
    for (size_t mi = 0; mi < nn; mi++) {
        for (int k = 0; k < nm; k++) {
            nb_db_history_query q = {.model = names[mi],  .board = r->board,
                                     .backend = r->backend, .dtype = r->dtype,
                                     .metric = metrics[k], .since_ms = r->since_unix_ms,
                                     .air_sha = r->air_sha, .aie_hash = r->aie_hash,
                                     .peano = r->peano, .limit = limit,
                                     .until_ms = r->until_unix_ms, .commit = r->commit,
                                     .toolchain = r->toolchain};
            if (r->kind)
                q.kind = nb_job_kind_name(r->kind);
            if (*r->kind_name)
                q.kind = r->kind_name;
            q.context_len = r->context_len;
            if (nb_db_history(c->db, &q, &rows, &n, &err)) {
                st = nb_rpc_reply_err(reply, &err);
                goto out;
            }
            if (resp.n_rows + n > cap) {
                size_t nc = (resp.n_rows + n) * 2;
                Npubench__HistoryRow **p = nb_arena_calloc(&a, nc, sizeof *p);
                if (!p) {
                    free(rows);
                    break;
                }
                if (resp.n_rows)
                    memcpy(p, resp.rows, resp.n_rows * sizeof *p);
                resp.rows = p;
                cap = nc;
            }
            for (size_t i = 0; i < n; i++) {
                Npubench__HistoryRow *h = nb_arena_alloc(&a, sizeof *h);
                if (!h)
                    break;
                npubench__history_row__init(h);
                const nb_db_history_row *x = &rows[i];
                h->job_id = x->job_id;
                h->finished_unix_ms = x->started_ms;
                h->model = nb_arena_strdup(&a, x->model);
                h->backend = nb_arena_strdup(&a, x->backend);
                h->dtype = nb_arena_strdup(&a, x->dtype);
                h->board = nb_arena_strdup(&a, x->board);
                h->kind = nb_job_kind_parse(x->kind);
                h->kind_name = nb_arena_strdup(&a, x->kind);
                h->outcome = x->outcome == NB_OUTCOME_PASS   ? NPUBENCH__OUTCOME__PASS
                             : x->outcome == NB_OUTCOME_FAIL ? NPUBENCH__OUTCOME__FAIL
                                                             : NPUBENCH__OUTCOME__ERROR;
                h->metric = (char *)nb_db_metric_name(metrics[k]);
                h->value = x->value;
                h->mean = isnan(x->mean) ? 0 : x->mean;
                h->stddev = isnan(x->stddev) ? 0 : x->stddev;
                h->npubench_commit = nb_arena_strdup(&a, x->commit);
                h->model_digest = nb_arena_strdup(&a, x->weights_digest);
                h->run_id = x->run_id;
                h->regression = x->regression;
                h->reps = x->reps;
                h->deployment_id = x->deployment_id;
                h->source = (char *)nb_db_source_name(x->source);
                h->verify_status = nb_arena_strdup(&a, x->verify_status);
                nb_db_series se = nb_db_history_row_series(x);
                char key[NB_DB_SERIES_MAX], label[NB_DB_SERIES_MAX];
                h->series = nb_arena_strdup(&a, nb_db_series_key(&se, key, sizeof key));
                h->series_label =
                    nb_arena_strdup(&a, nb_db_series_label(&se, label, sizeof label));
                h->context_len = x->context_len > 0 ? x->context_len : 0;
                h->generated_tokens = x->generated_tokens > 0 ? x->generated_tokens : 0;
                h->gate_pass = x->gate_pass;
                h->gate_total = x->gate_total;
                resp.rows[resp.n_rows++] = h;
            }
            free(rows);
            rows = NULL;
        }
    }
    st = nb_coord_reply_built(reply, &resp, !a.failed, "History");
out:
    nb_coord_aliases_free(&at);
    free(deps);
    nb_arena_free(&a);
    nb_wire_free(r);
    return st;
}

/* ---- Import ---- */

/* Model-suffix dtype rules an import request may carry. */
#define NB_COORD_IMPORT_DTYPES_MAX 64

/* Error messages name the uploaded file, not our temporary copy. */
static void strip_prefix(char *msg, const char *prefix)
{
    size_t n = strlen(prefix);
    for (char *p = strstr(msg, prefix); p; p = strstr(p, prefix))
        memmove(p, p + n, strlen(p + n) + 1);
}

static nb_rpc_status h_import(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__ImportRequest, npubench__import_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    const char *base = strrchr(r->name, '/');
    base = base ? base + 1 : r->name;
    char name[128];
    size_t k = 0;
    for (size_t i = 0; base[i] && k + 1 < sizeof name; i++)
        name[k++] = base[i] == '/' || (unsigned char)base[i] < 0x20 ? '_' : base[i];
    name[k] = '\0';
    if (!k || !strcmp(name, ".") || !strcmp(name, ".."))
        snprintf(name, sizeof name, "import.json");
    char dir[1200], path[1400];
    snprintf(dir, sizeof dir, "%s/import-XXXXXX", c->artifacts_dir);
    if (nb_coord_disk_room(c, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    if (!mkdtemp(dir)) {
        st = nb_rpc_reply_status(reply, NB_RPC_INTERNAL, "import: cannot create %s", dir);
        goto out;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    nb_db_import_report rep;
    memset(&rep, 0, sizeof rep);
    nb_code rc = nb_file_write(path, r->content.data, r->content.len, &err);
    if (!rc) {
        nb_db_dtype_rule rules[NB_COORD_IMPORT_DTYPES_MAX];
        size_t nr = 0;
        for (size_t i = 0; i < r->n_dtypes && nr < NB_COORD_IMPORT_DTYPES_MAX; i++)
            if (r->dtypes[i] && *r->dtypes[i]->key && *r->dtypes[i]->value)
                rules[nr++] = (nb_db_dtype_rule){r->dtypes[i]->key, r->dtypes[i]->value};
        nb_db_import_opts io = {*r->backend ? r->backend : NULL, *r->dtype ? r->dtype : NULL,
                                *r->board ? r->board : NULL, *r->runner ? r->runner : NULL,
                                rules, nr};
        rc = nb_db_import_file_ex(c->db, path, &io, &rep, &err);
    }
    unlink(path);
    rmdir(dir);
    char prefix[1300];
    snprintf(prefix, sizeof prefix, "%s/", dir);
    if (rc && rc != NB_EFORMAT) {
        strip_prefix(err.msg, prefix);
        st = nb_rpc_reply_err(reply, &err);
    } else {
        Npubench__ImportResponse resp = NPUBENCH__IMPORT_RESPONSE__INIT;
        resp.imported = (int32_t)rep.n_imported;
        resp.skipped = (int32_t)rep.n_skipped;
        resp.bad = (int32_t)rep.n_bad;
        resp.runner_assumed = (int32_t)rep.n_runner_assumed;
        resp.runner = rep.runner_assumed;
        char *msgs[NB_DB_IMPORT_BAD_KEEP];
        for (size_t i = 0; i < rep.n_bad_kept && i < NB_DB_IMPORT_BAD_KEEP; i++) {
            strip_prefix(rep.bad[i].msg, prefix);
            msgs[resp.n_errors++] = rep.bad[i].msg;
        }
        resp.errors = msgs;
        nb_coord_log(c, "import %s: %zu imported, %zu already stored, %zu bad", name,
                     rep.n_imported, rep.n_skipped, rep.n_bad);
        st = nb_rpc_reply_pack(reply, &resp);
    }
    nb_db_import_report_free(&rep);
out:
    nb_wire_free(r);
    return st;
}

/* ---- Drain (admin) ---- */

/* One board: its workers finish the job they hold and lease nothing more. */
static nb_rpc_status drain_board(nb_coord *c, const Npubench__DrainRequest *r, nb_rpc_reply *reply)
{
    nb_err err = {0};
    nb_db_worker *w = NULL;
    size_t n = 0;
    int known = 0, running = 0;
    if (nb_db_worker_list(c->db, &w, &n, &err))
        return nb_rpc_reply_err(reply, &err);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(w[i].board_name, r->board))
            continue;
        known = 1;
        int64_t held = 0, job = 0;
        if (nb_db_jobs_held(c->db, w[i].id, &held, &job, &err) == NB_OK)
            running += (int)held;
    }
    free(w);
    if (!known)
        return nb_rpc_reply_status(reply, NB_RPC_NOT_FOUND,
                                   "DrainRequest.board '%s': no worker of that board has "
                                   "registered", r->board);
    if (nb_db_board_set_drained(c->db, r->board, r->drain, &err))
        return nb_rpc_reply_err(reply, &err);
    nb_coord_log(c, "board %s %s", r->board,
                 r->drain ? "drained: finishes its job, takes no more" : "undrained");
    nb_coord_queue_changed(c);
    Npubench__DrainResponse resp = NPUBENCH__DRAIN_RESPONSE__INIT;
    resp.draining = r->drain;
    resp.running = running;
    return nb_rpc_reply_pack(reply, &resp);
}

static nb_rpc_status h_drain(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__DrainRequest, npubench__drain_request__descriptor);
    if (*r->board) {
        nb_rpc_status st = drain_board(c, r, reply);
        nb_wire_free(r);
        return st;
    }
    pthread_mutex_lock(&c->mu);
    int was = c->draining;
    c->draining = r->drain;
    pthread_mutex_unlock(&c->mu);
    if (was != r->drain) {
        nb_coord_log(c, "%s", r->drain ? "draining: no new leases" : "drain over: leasing again");
        nb_coord_queue_changed(c);
    }
    Npubench__DrainResponse resp = NPUBENCH__DRAIN_RESPONSE__INIT;
    resp.draining = r->drain;
    nb_db_job_filter f = {.states = NB_JOB_STATE_BIT(NB_JOB_LEASED) |
                                    NB_JOB_STATE_BIT(NB_JOB_RUNNING),
                          .limit = NB_DB_HISTORY_MAX};
    nb_db_job *jobs = NULL;
    size_t n = 0;
    nb_err err = {0};
    if (!nb_db_job_list(c->db, &f, &jobs, &n, &err))
        nb_db_job_list_free(jobs, n);
    resp.running = (int32_t)n;
    nb_wire_free(r);
    return nb_rpc_reply_pack(reply, &resp);
}

nb_code nb_coord_register_client_api(nb_coord *c, nb_err *err)
{
    struct {
        const char *m;
        nb_rpc_handler fn;
        unsigned flags;
    } tab[] = {
        {C_METHOD("SubmitJob"), h_submit, 0},
        {C_METHOD("GetJob"), h_get, NB_RPC_READONLY},
        {C_METHOD("ListJobs"), h_list, NB_RPC_READONLY},
        {C_METHOD("CancelJob"), h_cancel, 0},
        {C_METHOD("ListWorkers"), h_workers, NB_RPC_READONLY},
        {C_METHOD("WatchJob"), h_watch, NB_RPC_READONLY},
        {C_METHOD("History"), h_history, NB_RPC_READONLY},
        {C_METHOD("Compare"), nb_coord_compare_rpc, NB_RPC_READONLY},
        {C_METHOD("SetReference"), nb_coord_setref_rpc, NB_RPC_ADMIN},
        {C_METHOD("GetReference"), nb_coord_getref_rpc, NB_RPC_READONLY},
        {C_METHOD("Import"), h_import, 0},
        {C_METHOD("Drain"), h_drain, NB_RPC_ADMIN},
    };
    for (size_t i = 0; i < sizeof tab / sizeof *tab; i++) {
        nb_code rc = nb_rpc_server_handle(c->srv, tab[i].m, tab[i].fn, c, tab[i].flags, err);
        if (rc)
            return rc;
    }
    return NB_OK;
}
