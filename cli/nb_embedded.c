/* nb_embedded: nb_coord_start on inproc:// plus nb_daemon_start dialling it, for the local
 * commands and the history commands without a coordinator (or the worker's executor alone,
 * for --direct). Stale jobs of dead sessions are cancelled at start, since their session
 * tag pins them to a worker that is gone. */
#include "nb_embedded.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "nb_backend.h"
#include "nb_coord.h"
#include "nb_daemon.h"
#include "nb_executor.h"
#include "nb_file.h"
#include "nb_svc.h"
#include "nb_time.h"

/* Registration hashes the model once (the digest keys its reference traces): about a second
 * per 100 MB, several under the sanitizers on a loaded machine. */
#define REGISTER_WAIT_MS 120000

#define SESSION_TAG_PREFIX "embedded-"

struct nb_embedded {
    nb_coord *coord;
    nb_daemon *worker;
    char tag[64];
};

/* "embedded-<pid>-<hex>": 1 and the pid when tag is a session tag. */
static int session_pid(const char *tag, long *pid)
{
    if (strncmp(tag, SESSION_TAG_PREFIX, strlen(SESSION_TAG_PREFIX)))
        return 0;
    char *end;
    *pid = strtol(tag + strlen(SESSION_TAG_PREFIX), &end, 10);
    return *pid > 0 && *end == '-';
}

/* Whether tag is this session's own (own) or that of a session process no longer alive. */
static int session_ended(const nb_embedded *e, const char *tag, int own)
{
    if (own)
        return !strcmp(tag, e->tag);
    long pid;
    return session_pid(tag, &pid) && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 &&
           errno == ESRCH;
}

/* Cancels the unfinished jobs of sessions that ended: whose process no longer exists, or
 * (own) this one's as it stops, so a local command that failed or was interrupted before
 * its job finished never leaves that job queued in the local database. */
static void cancel_orphans(nb_embedded *e, int own)
{
    nb_svc *s;
    nb_err err;
    if (nb_svc_open(NULL, nb_coord_url(e->coord), &s, &err))
        return;
    for (int state = NPUBENCH__JOB_STATE__JOB_QUEUED; state <= NPUBENCH__JOB_STATE__JOB_RUNNING;
         state++) {
        Npubench__ListJobsRequest req = NPUBENCH__LIST_JOBS_REQUEST__INIT;
        req.state = state;
        req.limit = 1000;
        Npubench__ListJobsResponse *resp;
        if (nb_svc_call(s, "ListJobs", &req, &npubench__list_jobs_response__descriptor, &resp,
                        &err))
            break;
        for (size_t i = 0; i < resp->n_jobs; i++) {
            const Npubench__Job *j = resp->jobs[i];
            const Npubench__DeploymentSelector *sel = j->spec ? j->spec->selector : NULL;
            for (size_t t = 0; sel && t < sel->n_tags; t++) {
                if (!session_ended(e, sel->tags[t], own))
                    continue;
                Npubench__CancelJobRequest c = NPUBENCH__CANCEL_JOB_REQUEST__INIT;
                c.job_id = j->job_id;
                c.reason = own ? "its local command ended before the job did"
                               : "its embedded session (process) ended";
                Npubench__CancelJobResponse *cr;
                if (nb_svc_call(s, "CancelJob", &c, &npubench__cancel_job_response__descriptor,
                                &cr, &err) == NB_OK)
                    nb_wire_free(cr);
            }
        }
        nb_wire_free(resp);
    }
    nb_svc_close(s);
}

/* The one deployment a session serves: the local command's flags. */
static void session_deployment(const nb_embedded_opts *o, nb_deployment *dep)
{
    memset(dep, 0, sizeof *dep);
    snprintf(dep->model, sizeof dep->model, "%s", o->model && *o->model ? o->model : "instruct");
    snprintf(dep->backend, sizeof dep->backend, "%s",
             o->backend && *o->backend ? o->backend : nb_backend_default()->name);
    dep->dtype = o->dtype;
    snprintf(dep->name, sizeof dep->name, "local");
    dep->threads = o->threads;
    dep->max_seq = o->max_seq;
    dep->device = (unsigned)o->device;
}

static nb_code start_worker(nb_embedded *e, const nb_embedded_opts *o, nb_err *err)
{
    nb_deployment dep;
    session_deployment(o, &dep);
    const char *tags[1] = {e->tag};
    nb_daemon_opts d;
    memset(&d, 0, sizeof d);
    d.coordinator_url = nb_coord_url(e->coord);
    d.board_name = "local";
    d.board_type = "cpu";
    d.tags = tags;
    d.n_tags = 1;
    d.deployments = &dep;
    d.n_deployments = 1;
    d.threads = o->threads;
    d.quiet = 1;
    d.client_paths = 1; /* inproc: every client is this process and its user */
    /* A deployment whose backend probes a device of its own (xrt) claims that device. A
     * CPU session takes the highest free cpu:N, leaving the low numbers to lab workers; a
     * taken one (another session, a worker) is NB_EUNAVAIL from the device lock. */
    const nb_backend_ops *ops = nb_backend_find(dep.backend);
    int own_device = nb_backend_can(ops, NB_BACKEND_DEVICE) && ops->probe;
    char device[32];
    nb_code rc = NB_EUNAVAIL;
    for (int n = 255; n >= 192 && rc == NB_EUNAVAIL; n--) {
        if (own_device)
            snprintf(device, sizeof device, "%s:%d", ops->name, o->device);
        else
            snprintf(device, sizeof device, "%s:%d", nb_backend_default()->name, n);
        d.device = device;
        rc = nb_daemon_start(&d, &e->worker, err);
        if (own_device)
            break;
    }
    if (rc)
        return rc;
    /* Registration runs in the background; wait for it (inproc, after the model digest)
     * so a refusal is reported now instead of leaving the job queued. */
    for (int i = 0; i < REGISTER_WAIT_MS / 5; i++) {
        char id[128];
        nb_daemon_worker_id(e->worker, id, sizeof id);
        if ((rc = nb_daemon_error(e->worker, err)))
            return rc;
        if (id[0])
            return NB_OK;
        nb_sleep_ms(5);
    }
    return nb_err_set(err, NB_ETIMEOUT, "embedded worker: not registered after %d s",
                      REGISTER_WAIT_MS / 1000);
}

nb_code nb_embedded_start(const nb_embedded_opts *o, nb_embedded **out, nb_err *err)
{
    *out = NULL;
    nb_embedded *e = calloc(1, sizeof *e);
    if (!e)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    static int counter;
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        memset(rnd, 0, sizeof rnd);
    snprintf(e->tag, sizeof e->tag, SESSION_TAG_PREFIX "%ld-%02x%02x%02x%02x", (long)getpid(),
             rnd[0], rnd[1], rnd[2], rnd[3]);
    const char *db = o->db_path && *o->db_path ? o->db_path : "var/npubench.db";
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", db);
    char *slash = strrchr(dir, '/');
    nb_code rc = NB_OK;
    if (slash && slash != dir) {
        *slash = '\0';
        rc = nb_file_mkdirs(dir, err);
    }
    char url[128];
    snprintf(url, sizeof url, "inproc://npubench-%ld-%d", (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    nb_coord_opts co;
    memset(&co, 0, sizeof co);
    co.listen_url = url;
    co.db_path = db;
    co.source_local = 1;
    co.quiet = 1;
    if (!rc)
        rc = nb_coord_start(&co, &e->coord, err);
    if (!rc && o->with_worker) {
        cancel_orphans(e, 0);
        rc = start_worker(e, o, err);
    }
    if (rc) {
        nb_embedded_stop(e);
        return rc;
    }
    *out = e;
    return NB_OK;
}

const char *nb_embedded_url(const nb_embedded *e)
{
    return nb_coord_url(e->coord);
}

const char *nb_embedded_tag(const nb_embedded *e)
{
    return e->tag;
}

nb_code nb_embedded_worker_error(nb_embedded *e, nb_err *err)
{
    return e->worker ? nb_daemon_error(e->worker, err) : NB_OK;
}

void nb_embedded_stop(nb_embedded *e)
{
    if (!e)
        return;
    if (e->worker) /* a session that ran jobs (a history-only one submits none) */
        cancel_orphans(e, 1);
    nb_daemon_stop(e->worker, 0);
    nb_coord_stop(e->coord);
    free(e);
}

nb_code nb_embedded_execute(const nb_embedded_opts *o, const Npubench__JobSpec *spec,
                            Npubench__JobResult **out, nb_err *err)
{
    *out = NULL;
    nb_deployment dep;
    session_deployment(o, &dep);
    nb_executor_opts xo = {.deployments = &dep,
                           .n_deployments = 1,
                           .board = "local",
                           .board_type = "cpu",
                           .threads = o->threads};
    nb_executor *x;
    nb_code rc = nb_executor_new(&xo, &x, err);
    if (rc)
        return rc;
    rc = nb_executor_run(x, spec, 0, NULL, out, err);
    nb_executor_free(x);
    return rc;
}
