/* nb_coord_worker: the worker-facing API ("npubench.Worker/<Method>") — Register, Heartbeat
 * (cancels ride on its response), LeaseJob long poll, ReportProgress, ReportResult,
 * ReleaseJob — and the sweeper's worker side (stale/gone, expired leases). */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_db_boards.h"
#include "nb_fault.h"
#include "nb_time.h"
#include "nb_version.h"

#define W_METHOD(name) "npubench.Worker/" name

static nb_rpc_status bad(nb_rpc_reply *reply, const char *fmt, const char *arg)
{
    return nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT, fmt, arg);
}

/* ---- who may speak for a worker and its lease ---- */

/* The request comes from the process that registered worker_id.  A coordinator restarted
 * since knows no registration yet: then the lease check alone decides. */
static nb_rpc_status check_instance(nb_coord *c, const char *what, const char *worker_id,
                                    const char *instance, nb_rpc_reply *reply)
{
    if (!*worker_id)
        return nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT, "%s.worker_id: required",
                                   what);
    if (nb_coord_reg_instance_is(c, worker_id, instance) == 0)
        return nb_rpc_reply_status(reply, NB_RPC_PERMISSION_DENIED,
                                   "%s.instance_id: worker %s is registered by another process; "
                                   "only that process may act for it",
                                   what, worker_id);
    return NB_RPC_OK;
}

/* worker_id (as the registered instance) holds lease_id of job_id: PERMISSION_DENIED when
 * the lease is another worker's, FAILED_PRECONDITION when it is not the job's lease (it
 * expired and was requeued, or never existed).  A cancelled job passes: the caller answers
 * it.  The finished job's own lease passes too: a resend after a lost answer is
 * absorbed by the database. */
static nb_rpc_status check_holder(nb_coord *c, const char *what, const char *worker_id,
                                  const char *instance, int64_t job_id, const char *lease_id,
                                  nb_rpc_reply *reply)
{
    nb_rpc_status st = check_instance(c, what, worker_id, instance, reply);
    if (st)
        return st;
    if (job_id <= 0 || !*lease_id)
        return nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT,
                                   "%s: job_id and lease_id are required", what);
    nb_db_job j;
    nb_err err = {0};
    if (nb_db_job_peek(c->db, job_id, &j, &err))
        return nb_rpc_reply_err(reply, &err);
    if (j.state == NB_JOB_CANCELLED)
        return NB_RPC_OK;
    int same = !strcmp(j.lease_id, lease_id);
    if (same && *j.leased_worker && strcmp(j.leased_worker, worker_id))
        return nb_rpc_reply_status(reply, NB_RPC_PERMISSION_DENIED,
                                   "%s: job %lld is leased to another worker, not to %s", what,
                                   (long long)job_id, worker_id);
    if (!same || j.state == NB_JOB_QUEUED)
        return nb_rpc_reply_status(reply, NB_RPC_FAILED_PRECONDITION,
                                   "%s: lease %.8s is not the current lease of job %lld (the "
                                   "job is %s): it expired and was requeued, or was never "
                                   "this worker's; stop working on it",
                                   what, lease_id, (long long)job_id,
                                   nb_job_state_name(j.state));
    return NB_RPC_OK;
}

/* 1 when the database has job leased to worker under lease (the lease a coordinator that
 * restarted since granted): such a worker is alive and keeps its job, registered here yet
 * or not. */
static int holds_lease_in_db(nb_coord *c, const char *worker, int64_t job, const char *lease)
{
    nb_db_job j;
    nb_err err;
    if (job <= 0 || !lease || !*lease || nb_db_job_peek(c->db, job, &j, &err) != NB_OK)
        return 0;
    return (j.state == NB_JOB_LEASED || j.state == NB_JOB_RUNNING) &&
           !strcmp(j.lease_id, lease) && !strcmp(j.leased_worker, worker);
}

/* ---- Register ---- */

static nb_code check_field(const char *field, const char *s, nb_err *err)
{
    size_t n = strlen(s);
    if (n >= NB_DB_NAME_MAX)
        return nb_err_set(err, NB_EINVAL, "WorkerInfo.%s: %zu bytes, the limit is %d", field, n,
                          NB_DB_NAME_MAX - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == ',')
            return nb_err_set(err, NB_EINVAL,
                              "WorkerInfo.%s: contains a comma or a control character", field);
    return NB_OK;
}

static nb_code check_info(const Npubench__WorkerInfo *w, nb_err *err)
{
    nb_code rc;
    if ((rc = check_field("worker_id", w->worker_id, err)) ||
        (rc = check_field("board_name", w->board_name, err)) ||
        (rc = check_field("board_type", w->board_type, err)) ||
        (rc = check_field("host", w->host, err)) ||
        (rc = check_field("device_id", w->device_id, err)) ||
        (rc = check_field("version", w->version, err)) ||
        (rc = check_field("instance_id", w->instance_id, err)))
        return rc;
    /* the probe's strings, kept with the board (nb_db_boards) */
    const struct {
        const char *field, *value;
    } probe[] = {{"driver_version", w->driver_version}, {"firmware_version", w->firmware_version},
                 {"xrt_version", w->xrt_version},       {"kernel_path", w->kernel_path},
                 {"cpu_model", w->cpu_model},           {"toolchain", w->toolchain}};
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++)
        if (strlen(probe[i].value) >= NB_DB_BOARD_TEXT_MAX)
            return nb_err_set(err, NB_EINVAL, "WorkerInfo.%s: %zu bytes, the limit is %d",
                              probe[i].field, strlen(probe[i].value), NB_DB_BOARD_TEXT_MAX - 1);
    if (w->n_tags > 64 || w->n_backends > 16 || w->n_deployments > 256)
        return nb_err_set(err, NB_EINVAL,
                          "WorkerInfo: %zu tags, %zu backends, %zu deployments; the limits are "
                          "64, 16 and 256",
                          w->n_tags, w->n_backends, w->n_deployments);
    for (size_t i = 0; i < w->n_tags; i++)
        if ((rc = check_field("tags", w->tags[i], err)))
            return rc;
    for (size_t i = 0; i < w->n_backends; i++)
        if ((rc = check_field("backends", w->backends[i], err)))
            return rc;
    for (size_t i = 0; i < w->n_deployments; i++) {
        const Npubench__Deployment *d = w->deployments[i];
        if (strlen(d->model) >= 1024 || strlen(d->backend) >= 64 || strlen(d->dtype) >= 64 ||
            strlen(d->stored_dtype) >= 64 ||
            strlen(d->digest) >= NB_DB_DIGEST_MAX || strlen(d->canonical) >= NB_DB_NAME_MAX)
            return nb_err_set(err, NB_EINVAL, "WorkerInfo.deployments[%zu]: a field is too long",
                              i);
        if (d->n_aliases > NB_JOB_MODEL_ALIASES_MAX)
            return nb_err_set(err, NB_EINVAL, "WorkerInfo.deployments[%zu].aliases: %zu, the "
                              "limit is %d", i, d->n_aliases, NB_JOB_MODEL_ALIASES_MAX);
        for (size_t k = 0; k < d->n_aliases; k++)
            if (!*d->aliases[k] || strlen(d->aliases[k]) >= NB_DB_NAME_MAX)
                return nb_err_set(err, NB_EINVAL, "WorkerInfo.deployments[%zu].aliases[%zu]: "
                                  "must be 1..%d bytes", i, k, NB_DB_NAME_MAX - 1);
    }
    return NB_OK;
}

/* A stable id for a worker that has none yet: the same board, host and
 * device give the same id, so a restarted worker keeps its history. */
static void make_id(const Npubench__WorkerInfo *w, char *out, size_t cap)
{
    char raw[3 * NB_DB_NAME_MAX];
    snprintf(raw, sizeof raw, "%s@%s:%s", *w->board_name ? w->board_name : "board",
             *w->host ? w->host : "host", *w->device_id ? w->device_id : "cpu");
    size_t k = 0;
    for (size_t i = 0; raw[i] && k + 1 < cap && k + 1 < NB_DB_NAME_MAX; i++) {
        unsigned char ch = (unsigned char)raw[i];
        out[k++] = isalnum(ch) || ch == '.' || ch == '-' || ch == '_' || ch == '@' || ch == ':'
                       ? (char)ch
                       : '_';
    }
    out[k] = '\0';
}

/* The worker's deployments as `workers` lists them (one per deployment its results land in,
 * by display name: nb_job_dep_text), for the dashboard's workers table. */
static void deployments_text(const Npubench__WorkerInfo *w, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < w->n_deployments; i++) {
        if (nb_job_dep_first(w->deployments, i) != i)
            continue;
        char item[384];
        nb_job_dep_text(w->deployments, w->n_deployments, i, "; ", item, sizeof item);
        for (char *p = item; *p; p++)
            if (*p == ',')
                *p = ';';
        size_t need = strlen(item) + (len ? 1 : 0);
        if (len + need + 4 >= cap) {
            snprintf(out + len, cap - len, "%s...", len ? "," : "");
            return;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", item);
    }
}

static nb_rpc_status h_register(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__RegisterRequest, npubench__register_request__descriptor);
    nb_rpc_status st = NB_RPC_OK;
    if (!r->info) {
        st = bad(reply, "RegisterRequest.info: required%s", "");
        goto out;
    }
    Npubench__WorkerInfo info = *r->info;
    if (check_info(&info, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    char id[NB_DB_NAME_MAX];
    if (*info.worker_id)
        snprintf(id, sizeof id, "%s", info.worker_id);
    else
        make_id(&info, id, sizeof id);
    info.worker_id = id;
    if (!*info.device_id)
        info.device_id = "cpu";
    if (!*info.board_name)
        info.board_name = *info.host ? info.host : "board";
    /* a board with keys is only its key's holder; the key is never stored or listed */
    nb_code krc = nb_coord_boardkey_admit(c, info.board_name, info.board_key, &err);
    if (krc) {
        st = krc == NB_EAUTH ? nb_rpc_reply_status(reply, NB_RPC_PERMISSION_DENIED, "%s", err.msg)
                             : nb_rpc_reply_err(reply, &err);
        goto out;
    }
    info.board_key = (char *)"";

    /* One worker per device: a live registration of the same host and
     * device by another process is refused while it keeps heartbeating. */
    int64_t now = nb_wall_ms(), fresh = 2LL * c->o.heartbeat_ms + 1000;
    coord_worker holder;
    int same_proc = 0, replaced = 0;
    if (nb_coord_reg_find_device(c, info.host, info.device_id, NULL, &holder)) {
        nb_db_worker dbw;
        int alive = nb_db_worker_get(c->db, holder.id, &dbw, &err) == NB_OK &&
                    dbw.state == NB_WORKER_ALIVE;
        same_proc = !strcmp(holder.id, id) &&
                    (*info.instance_id ? !strcmp(holder.instance, info.instance_id)
                                       : *r->info->worker_id != '\0');
        /* A process that holds the device lock proves the older one dead (the lock dies
         * with its process): it takes over at once, after SIGTERM as after kill -9. */
        if (!same_proc && alive && now - holder.last_heartbeat_ms < fresh &&
            !info.holds_device_lock) {
            st = nb_rpc_reply_status(
                reply, NB_RPC_ALREADY_EXISTS,
                "device %s on host %s is already served by worker %s (last heartbeat %lld ms "
                "ago); stop that worker first",
                info.device_id, info.host, holder.id, (long long)(now - holder.last_heartbeat_ms));
            goto out;
        }
        replaced = !same_proc;
    }
    /* A worker id is taken over only through its device claim: while another process holds
     * it alive, a registration of the same id from another host or device, or without the
     * device lock, is refused (the worker key alone does not make a process that worker). */
    coord_worker cur;
    if (nb_coord_reg_get(c, id, &cur) && strcmp(cur.instance, info.instance_id) &&
        now - cur.last_heartbeat_ms < fresh &&
        (strcmp(cur.host, info.host) || strcmp(cur.device, info.device_id) ||
         !info.holds_device_lock)) {
        nb_db_worker dbw;
        if (nb_db_worker_get(c->db, id, &dbw, &err) == NB_OK && dbw.state == NB_WORKER_ALIVE) {
            st = nb_rpc_reply_status(
                reply, NB_RPC_ALREADY_EXISTS,
                "worker %s is served by a live process on host %s, device %s (last heartbeat "
                "%lld ms ago); only a process holding that device's claim may take it over",
                id, cur.host, cur.device, (long long)(now - cur.last_heartbeat_ms));
            goto out;
        }
    }
    for (size_t i = 0; i < info.n_deployments; i++)
        nb_coord_alias_from_deployment(c, info.deployments[i]);
    nb_db_worker w;
    nb_sched_db_worker(&info, &w);
    deployments_text(&info, w.deployments, sizeof w.deployments);
    if (nb_db_worker_upsert(c->db, &w, &err) || nb_coord_reg_put(c, &info, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    if (replaced || (!*r->info->worker_id && !same_proc)) {
        /* A new process on this device: whatever the old one held is lost. */
        size_t nq = 0, nf = 0;
        nb_db_jobs_release_worker(c->db, id, "the worker restarted", &nq, &nf, &err);
        if (nq || nf)
            nb_coord_log(c, "worker %s restarted: %zu job%s requeued, %zu failed", id, nq,
                         nq == 1 ? "" : "s", nf);
    }
    nb_coord_log(c, "worker %s registered (board %s, %zu deployment%s, %s)", id, info.board_name,
                 info.n_deployments, info.n_deployments == 1 ? "" : "s", info.version);
    if (r->current_job_id > 0 && holds_lease_in_db(c, id, r->current_job_id, r->lease_id)) {
        /* a restart of ours while the worker ran the job: it keeps running */
        nb_db_job j;
        int64_t parent = nb_db_job_peek(c->db, r->current_job_id, &j, &err) ? 0 : j.parent_id;
        nb_coord_reg_set_job(c, id, r->current_job_id, r->lease_id, parent);
        nb_db_job_renew(c->db, r->current_job_id, r->lease_id, c->o.lease_ms, NULL, &err);
        nb_coord_log(c, "worker %s holds the lease of job %lld: it keeps running", id,
                     (long long)r->current_job_id);
    }
    nb_coord_health_on_register(c, &info);
    Npubench__RegisterResponse resp = NPUBENCH__REGISTER_RESPONSE__INIT;
    resp.worker_id = id;
    resp.heartbeat_interval_ms = c->o.heartbeat_ms;
    resp.lease_ttl_ms = (int32_t)c->o.lease_ms;
    char version[96];
    snprintf(version, sizeof version, "npubench %s (%s)", NB_VERSION, nb_commit());
    resp.coordinator_version = version;
    st = nb_rpc_reply_pack(reply, &resp);
    nb_coord_queue_changed(c);
out:
    nb_wire_free(r);
    return st;
}

/* ---- Heartbeat ---- */

static void add_cancel(nb_arena *a, Npubench__HeartbeatResponse *resp, int64_t job,
                       const char *lease, const char *reason)
{
    Npubench__Cancel **arr = nb_arena_calloc(a, resp->n_cancels + 1, sizeof *arr);
    Npubench__Cancel *x = nb_arena_alloc(a, sizeof *x);
    if (!arr || !x)
        return;
    npubench__cancel__init(x);
    x->job_id = job;
    x->lease_id = nb_arena_strdup(a, lease);
    x->reason = nb_arena_strdup(a, reason);
    if (resp->n_cancels)
        memcpy(arr, resp->cancels, resp->n_cancels * sizeof *arr);
    arr[resp->n_cancels++] = x;
    resp->cancels = arr;
}

/* Renews the lease the worker says it holds and records its progress; a
 * cancelled or lost lease is reported back as a Cancel. */
static void renew_current(nb_coord *c, const char *worker, int64_t job, const char *lease,
                          const Npubench__Progress *p, int changed, nb_arena *a,
                          Npubench__HeartbeatResponse *resp)
{
    nb_err err;
    nb_code rc = nb_db_job_renew(c->db, job, lease, c->o.lease_ms, NULL, &err);
    if (rc == NB_OK) {
        if (p && changed) {
            rc = nb_db_job_set_progress(c->db, job, lease, p->done < 0 ? 0 : p->done,
                                        p->total < 0 ? 0 : p->total, p->message, &err);
            if (!rc && *p->message) {
                char line[NB_DB_MSG_MAX + 64];
                snprintf(line, sizeof line, "[%s] %d/%d %s", worker, p->done, p->total,
                         p->message);
                nb_db_job_append_log(c->db, job, line, &err);
            }
        } else
            rc = nb_db_job_start(c->db, job, lease, &err);
        if (changed)
            nb_coord_changed(c, job, nb_coord_reg_parent(c, worker));
    }
    if (rc == NB_ECANCELED || rc == NB_EMISMATCH || rc == NB_ENOTFOUND)
        add_cancel(a, resp, job, lease, err.msg);
}

static nb_rpc_status h_heartbeat(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__Heartbeat, npubench__heartbeat__descriptor);
    nb_rpc_status st = check_instance(c, "Heartbeat", r->worker_id, r->instance_id, reply);
    if (st)
        goto out;
    Npubench__HeartbeatResponse resp = NPUBENCH__HEARTBEAT_RESPONSE__INIT;
    nb_arena a = {0};
    const Npubench__Progress *p = r->progress;
    int known = nb_coord_reg_heartbeat(c, r->worker_id, r->current_job_id, r->lease_id,
                                       p ? p->done : 0, p ? p->total : 0, p ? p->message : "");
    if (p)
        nb_coord_reg_tokens(c, r->worker_id, r->current_job_id, p);
    if (r->unix_ms > 0)
        nb_coord_reg_set_clock(c, r->worker_id, r->unix_ms - nb_wall_ms());
    /* Registered with a coordinator that restarted, or never: the worker registers again
     * and carries on. One that holds a lease in the db is alive meanwhile: its row is
     * touched, so the sweep does not call it gone and requeue the job it runs. */
    int alive = known || holds_lease_in_db(c, r->worker_id, r->current_job_id, r->lease_id);
    if (!alive || nb_db_worker_touch(c->db, r->worker_id, &err) != NB_OK || !known)
        resp.reregister = 1;
    if (r->current_job_id > 0 && *r->lease_id)
        renew_current(c, r->worker_id, r->current_job_id, r->lease_id, p, known == 2, &a,
                      &resp);
    st = nb_rpc_reply_pack(reply, &resp);
    nb_arena_free(&a);
out:
    nb_wire_free(r);
    return st;
}

/* ---- LeaseJob ---- */

static nb_rpc_status lease_reply(nb_coord *c, const char *worker, Npubench__WorkerInfo *info,
                                 nb_db_job *job, nb_rpc_reply *reply)
{
    nb_err err = {0};
    Npubench__JobSpec *spec = NULL;
    if (job->spec_format != NB_SPEC_PROTO ||
        nb_wire_unpack(&npubench__job_spec__descriptor, job->spec, job->spec_len, 0, &spec,
                       &err)) {
        /* Unreadable spec: fail it now rather than lease it forever. */
        nb_db_job_result jr = {.state = NB_JOB_FAILED, .error = "stored spec is unreadable"};
        nb_db_job_complete(c->db, job->id, job->lease_id, &jr, NULL, NULL, &err);
        return nb_rpc_reply_status(reply, NB_RPC_INTERNAL, "job %lld: stored spec unreadable",
                                   (long long)job->id);
    }
    int dep = -1;
    nb_sched_worker_serves(info, worker, job->sel_backend, job->sel_board, job->sel_deployment,
                           job->sel_dtype_id, job->sel_tags, job->sel_worker, NULL, 0, &dep);
    const char *digest = dep >= 0 ? info->deployments[dep]->digest : "";
    size_t tlen = 0;
    char tsha[65], tname[1200];
    uint8_t *trace = nb_coord_traces_for_lease(c, spec, digest, &tlen, tsha, tname, sizeof tname);

    Npubench__Lease lease = NPUBENCH__LEASE__INIT;
    lease.lease_id = job->lease_id;
    lease.job_id = job->id;
    lease.spec = spec;
    lease.expires_unix_ms = job->lease_expiry_ms;
    lease.attempt = job->attempts + 1;
    lease.reference_trace.data = trace;
    lease.reference_trace.len = tlen;
    lease.reference_trace_sha256 = tsha;
    lease.reference_trace_path = tname;
    Npubench__LeaseJobResponse resp = NPUBENCH__LEASE_JOB_RESPONSE__INIT;
    resp.lease = &lease;
    nb_rpc_status st = nb_rpc_reply_pack(reply, &resp);
    free(trace);
    nb_wire_free(spec);
    if (st == NB_RPC_OK) {
        nb_coord_reg_set_job(c, worker, job->id, job->lease_id, job->parent_id);
        nb_coord_stat_add(c, &c->stats.leased, 1);
        nb_coord_changed(c, job->id, job->parent_id);
    }
    return st;
}

static nb_rpc_status h_lease(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__LeaseJobRequest, npubench__lease_job_request__descriptor);
    nb_rpc_status st = NB_RPC_OK;
    Npubench__WorkerInfo *info = NULL;
    if ((st = check_instance(c, "LeaseJobRequest", r->worker_id, r->instance_id, reply)))
        goto out;
    info = nb_coord_reg_info(c, r->worker_id);
    if (!info) {
        st = nb_rpc_reply_status(reply, NB_RPC_NOT_FOUND,
                                 "worker %s is not registered with this coordinator; Register "
                                 "again",
                                 r->worker_id);
        goto out;
    }
    /* One job at a time per worker process (its one slot): a second lease would sit
     * queued behind the first on the board while another board idles. */
    int64_t held = 0, held_job = 0;
    if (nb_db_jobs_held(c->db, r->worker_id, &held, &held_job, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    if (held >= 1) {
        st = nb_rpc_reply_status(reply, NB_RPC_FAILED_PRECONDITION,
                                 "LeaseJobRequest: worker %s already holds the lease of job "
                                 "%lld, and a worker has 1 slot; report or release it first",
                                 r->worker_id, (long long)held_job);
        goto out;
    }
    int64_t until = nb_coord_poll_until(c, req, r->wait_ms);
    uint64_t gen = nb_coord_qgen(c);
    int drained = 0;
    for (;;) {
        /* A worker asking for work is alive. */
        if (nb_db_worker_touch(c->db, r->worker_id, &err)) {
            st = nb_rpc_reply_err(reply, &err);
            goto out;
        }
        /* Drain and quarantine are read on every pass, not once before the long poll: a
         * board drained while this request waits must not lease the job that wakes it. */
        pthread_mutex_lock(&c->mu);
        int draining = c->draining;
        pthread_mutex_unlock(&c->mu);
        int board_none = 0;
        nb_db_job_pred pred = nb_coord_health_pred(c, info->board_name, &board_none);
        if (draining || board_none) { /* no work while drained; the worker polls again */
            drained = 1;
            break;
        }
        nb_db_worker w;
        nb_sched_db_worker(info, &w);
        w.state = NB_WORKER_ALIVE;
        nb_db_job job;
        int found = 0;
        if (nb_db_job_lease(c->db, &w, pred, info, c->o.lease_ms, &job, &found, &err)) {
            st = nb_rpc_reply_err(reply, &err);
            goto out;
        }
        if (found) {
            st = lease_reply(c, r->worker_id, info, &job, reply);
            nb_db_job_free(&job);
            goto out;
        }
        if (nb_coord_wait_queue(c, &gen, until) != 0)
            break;
    }
    Npubench__LeaseJobResponse none = NPUBENCH__LEASE_JOB_RESPONSE__INIT;
    none.drained = drained;
    st = nb_rpc_reply_pack(reply, &none);
out:
    nb_wire_free(info);
    nb_wire_free(r);
    return st;
}

/* ---- ReportProgress ---- */

static nb_rpc_status h_progress(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__ReportProgressRequest, npubench__report_progress_request__descriptor);
    nb_rpc_status st;
    Npubench__ReportProgressResponse resp = NPUBENCH__REPORT_PROGRESS_RESPONSE__INIT;
    if ((st = check_holder(c, "ReportProgressRequest", r->worker_id, r->instance_id, r->job_id,
                           r->lease_id, reply)))
        goto out;
    int64_t expiry = 0;
    nb_code rc = nb_db_job_renew(c->db, r->job_id, r->lease_id, c->o.lease_ms, &expiry, &err);
    const Npubench__Progress *p = r->progress;
    if (!rc && p) {
        int changed = nb_coord_reg_heartbeat(c, r->worker_id, r->job_id, r->lease_id, p->done,
                                             p->total, p->message) != 1;
        nb_coord_reg_tokens(c, r->worker_id, r->job_id, p);
        rc = nb_db_job_set_progress(c->db, r->job_id, r->lease_id, p->done < 0 ? 0 : p->done,
                                    p->total < 0 ? 0 : p->total, p->message, &err);
        /* Renewals repeat the last progress: log only what is new. */
        if (!rc && changed && *p->message) {
            char line[NB_DB_MSG_MAX + 64];
            snprintf(line, sizeof line, "[%s] %d/%d %s", r->worker_id, p->done, p->total,
                     p->message);
            nb_db_job_append_log(c->db, r->job_id, line, &err);
        }
    }
    if (rc == NB_ECANCELED || rc == NB_EMISMATCH) {
        resp.cancel = 1;
    } else if (rc) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    resp.expires_unix_ms = expiry;
    nb_coord_changed(c, r->job_id, nb_coord_reg_parent(c, r->worker_id));
    st = nb_rpc_reply_pack(reply, &resp);
out:
    nb_wire_free(r);
    return st;
}

/* ---- ReportResult ---- */

/* The committed result's outcome word: its runs' (a regression fails a run), else its own. */
static const char *result_word(nb_coord *c, const Npubench__JobResult *res)
{
    static const char *const words[] = {"pass", "fail", "error"};
    if (res->status != NPUBENCH__STATUS_CODE__OK)
        return "error";
    size_t n = 0;
    nb_db_outcome worst = NB_OUTCOME_PASS;
    nb_err e;
    if (nb_db_job_runs_verdict(c->db, res->job_id, &n, &worst, &e) == NB_OK && n)
        return words[worst];
    return res->outcome == NPUBENCH__OUTCOME__PASS   ? "pass"
           : res->outcome == NPUBENCH__OUTCOME__FAIL ? "fail"
                                                     : "error";
}

static nb_rpc_status h_result(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__ReportResultRequest, npubench__report_result_request__descriptor);
    nb_rpc_status st;
    char *own_worker_id = r->result ? r->result->worker_id : NULL;
    if (!r->result) {
        st = bad(reply, "ReportResultRequest.result: required%s", "");
        goto out;
    }
    if ((st = check_holder(c, "ReportResultRequest", r->worker_id, r->instance_id,
                           r->result->job_id, r->lease_id, reply)))
        goto out;
    if (!*r->result->worker_id)
        r->result->worker_id = r->worker_id; /* borrowed until nb_wire_free(r) */
    int accepted = 0;
    if (nb_coord_result_commit(c, r->worker_id, r->lease_id, r->result, &accepted, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    if (accepted && *r->result->log)
        nb_db_job_append_log(c->db, r->result->job_id, r->result->log, &err);
    nb_coord_reg_set_job(c, r->worker_id, 0, NULL, 0);
    if (accepted && nb_fault("kill_after_commit"))
        raise(SIGKILL); /* committed, not acknowledged: the worker must re-report */
    Npubench__ReportResultResponse resp = NPUBENCH__REPORT_RESULT_RESPONSE__INIT;
    resp.accepted = accepted;
    resp.outcome = accepted ? (char *)result_word(c, r->result) : "";
    st = nb_rpc_reply_pack(reply, &resp);
out:
    if (r->result)
        r->result->worker_id = own_worker_id; /* give back what the message owns */
    nb_wire_free(r);
    return st;
}

/* ---- ReleaseJob ---- */

static nb_rpc_status h_release(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__ReleaseJobRequest, npubench__release_job_request__descriptor);
    nb_rpc_status st;
    if ((st = check_holder(c, "ReleaseJobRequest", r->worker_id, r->instance_id, r->job_id,
                           r->lease_id, reply)))
        goto out;
    char why[NB_DB_MSG_MAX];
    snprintf(why, sizeof why, "%.400s", *r->reason ? r->reason : "released");
    nb_code rc;
    if (r->retry) {
        rc = nb_db_job_release(c->db, r->job_id, r->lease_id, why, &err);
    } else {
        nb_db_job_result jr = {.state = NB_JOB_FAILED, .error = why};
        rc = nb_db_job_complete(c->db, r->job_id, r->lease_id, &jr, NULL, NULL, &err);
    }
    if (rc == NB_EMISMATCH) { /* lost between the check and the release */
        st = nb_rpc_reply_status(reply, NB_RPC_FAILED_PRECONDITION, "ReleaseJobRequest: %s",
                                 err.msg);
        goto out;
    }
    if (rc && rc != NB_ECANCELED) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    nb_coord_reg_set_job(c, r->worker_id, 0, NULL, 0);
    nb_db_job j;
    Npubench__ReleaseJobResponse resp = NPUBENCH__RELEASE_JOB_RESPONSE__INIT;
    if (nb_db_job_get(c->db, r->job_id, &j, &err) == NB_OK) {
        resp.state = nb_coord_state_to_pb(j.state);
        nb_coord_changed(c, j.id, j.parent_id);
        nb_coord_queue_changed(c);
        nb_coord_log(c, "job %lld released by %s (%s): now %s", (long long)j.id, r->worker_id, why,
                     nb_job_state_name(j.state));
        nb_db_job_free(&j);
    }
    if (r->retry)
        nb_coord_stat_add(c, &c->stats.requeued, 1);
    st = nb_rpc_reply_pack(reply, &resp);
out:
    nb_wire_free(r);
    return st;
}

/* ---- Deregister ---- */

static nb_rpc_status h_deregister(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    nb_err err = {0};
    NB_COORD_UNPACK(Npubench__DeregisterRequest, npubench__deregister_request__descriptor);
    nb_rpc_status st = check_instance(c, "DeregisterRequest", r->worker_id, r->instance_id, reply);
    if (st)
        goto out;
    if (nb_coord_reg_remove(c, r->worker_id, r->instance_id)) {
        size_t nq = 0, nf = 0;
        /* listed as gone at once: `workers` must not show a stopped process alive until the
         * sweep's gone-ms passes */
        if (nb_db_worker_gone(c->db, r->worker_id, &err))
            nb_coord_log(c, "worker %s: deregistration not recorded: %s", r->worker_id, err.msg);
        nb_db_jobs_release_worker(c->db, r->worker_id, "the worker stopped", &nq, &nf, &err);
        nb_coord_log(c, "worker %s stopped and deregistered (%zu job%s requeued, %zu failed)",
                     r->worker_id, nq, nq == 1 ? "" : "s", nf);
        nb_coord_queue_changed(c);
    }
    Npubench__DeregisterResponse resp = NPUBENCH__DEREGISTER_RESPONSE__INIT;
    st = nb_rpc_reply_pack(reply, &resp);
out:
    nb_wire_free(r);
    return st;
}

/* ---- sweeper ---- */

void nb_coord_sweep_workers(nb_coord *c)
{
    nb_err err;
    size_t ns = 0, ng = 0;
    if (nb_db_worker_sweep(c->db, c->o.stale_ms, c->o.gone_ms, &ns, &ng, &err))
        nb_coord_log(c, "sweep: %s", err.msg);
    if (ns || ng)
        nb_coord_log(c, "sweep: %zu worker%s went stale, %zu gone", ns, ns == 1 ? "" : "s", ng);
    int64_t now = nb_wall_ms();
    int changed = 0;
    if (ng || now >= c->next_gone_scan_ms) {
        c->next_gone_scan_ms = now + 5000;
        nb_db_worker *w = NULL;
        size_t n = 0;
        if (nb_db_worker_list(c->db, &w, &n, &err) == NB_OK) {
            for (size_t i = 0; i < n; i++) {
                if (w[i].state != NB_WORKER_GONE)
                    continue;
                size_t nq = 0, nf = 0;
                char why[128];
                snprintf(why, sizeof why, "no heartbeat for %lld ms",
                         (long long)(now - w[i].last_seen_ms));
                if (nb_db_jobs_release_worker(c->db, w[i].id, why, &nq, &nf, &err) == NB_OK &&
                    (nq || nf)) {
                    nb_coord_log(c, "worker %s gone (%s): %zu job%s requeued, %zu failed", w[i].id,
                                 why, nq, nq == 1 ? "" : "s", nf);
                    nb_coord_stat_add(c, &c->stats.requeued, nq);
                    nb_coord_reg_set_job(c, w[i].id, 0, NULL, 0);
                    changed = 1;
                }
            }
            free(w);
        }
    }
    size_t nq = 0, nf = 0;
    if (nb_db_jobs_requeue_expired(c->db, &nq, &nf, &err) == NB_OK && (nq || nf)) {
        nb_coord_log(c, "sweep: %zu expired lease%s requeued, %zu job%s failed", nq,
                     nq == 1 ? "" : "s", nf, nf == 1 ? "" : "s");
        nb_coord_stat_add(c, &c->stats.requeued, nq);
        changed = 1;
    }
    if (changed)
        nb_coord_queue_changed(c);
}

nb_code nb_coord_register_worker_api(nb_coord *c, nb_err *err)
{
    struct {
        const char *m;
        nb_rpc_handler fn;
    } tab[] = {
        {W_METHOD("Register"), h_register},     {W_METHOD("Heartbeat"), h_heartbeat},
        {W_METHOD("LeaseJob"), h_lease},        {W_METHOD("ReportProgress"), h_progress},
        {W_METHOD("ReportResult"), h_result},   {W_METHOD("ReleaseJob"), h_release},
        {W_METHOD("Deregister"), h_deregister},
    };
    for (size_t i = 0; i < sizeof tab / sizeof *tab; i++) {
        nb_code rc = nb_rpc_server_handle(c->srv, tab[i].m, tab[i].fn, c, NB_RPC_WORKER, err);
        if (rc)
            return rc;
    }
    return NB_OK;
}
