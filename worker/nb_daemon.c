/* nb_daemon: the worker's two threads: the lease loop (register, lease, execute, report)
 * and the heartbeat (liveness, progress, lease renewal, cancels), over one nb_rpc client. */
#include "nb_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_backend.h"
#include "nb_devlock.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_log.h"
#include "nb_probe.h"
#include "nb_rpc.h"
#include "nb_time.h"
#include "nb_wire.h"
#include "nb_version.h"

#define M_REGISTER "npubench.Worker/Register"
#define M_HEARTBEAT "npubench.Worker/Heartbeat"
#define M_LEASE "npubench.Worker/LeaseJob"
#define M_PROGRESS "npubench.Worker/ReportProgress"
#define M_RESULT "npubench.Worker/ReportResult"
#define M_RELEASE "npubench.Worker/ReleaseJob"
#define M_DEREGISTER "npubench.Worker/Deregister"

#define MAX_TAGS 64
#define PROG_MIN_MS 250 /* progress goes out at most this often between heartbeats */
#define NB_DAEMON_BACKENDS_MAX 8 /* registered backends a worker lists */

struct nb_daemon {
    /* configuration (immutable after start) */
    char url[1024], secret[256], board_key[128], board[128], board_type[64], device[32],
        host[256];
    char version[64], instance_id[33];
    char **tags;
    int n_tags;
    int hb_ms, wait_ms, rpc_ms, bmin, bmax, grace_ms, quiet;
    void (*log)(void *, const char *);
    void *log_user;
    const char *backends[NB_DAEMON_BACKENDS_MAX];
    size_t n_backends;
    nb_devlock *lock;
    nb_executor *ctx;
    nb_rpc_client *cli;
    pthread_t lease_th, hb_th;
    int threads_started;

    /* shared state, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char worker_id[128];
    int registered, need_register;
    int stopping, finish_current, lease_done, hb_stop;
    int64_t job_id;
    char lease_id[128];
    int prog_done, prog_total;
    char prog_msg[256];
    int tok_done, tok_total; /* inside the current unit (prompt, repetition) */
    char unit[16];
    int prog_dirty; /* progress changed since it was last sent */
    int finishing;  /* the job's result is on its way: no more progress-only reports */
    int cancel, cancel_by_coordinator;
    nb_code fatal;
    int fatal_set; /* fatal != NB_OK, as an int to wait on */
    nb_err fatal_err;
    nb_daemon_stats stats;
    unsigned rng;
};

/* ---- logging -------------------------------------------------------------------------- */

static void dlog(nb_daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(nb_daemon *d, const char *text)
{
    dlog(d, "%s", text);
}

static void dlog(nb_daemon *d, const char *fmt, ...)
{
    char tag[48], line[NB_LOG_LINE_MAX];
    snprintf(tag, sizeof tag, "npubench worker[%ld]", (long)getpid());
    va_list ap;
    va_start(ap, fmt);
    nb_log_vformat(line, sizeof line, tag, fmt, ap);
    va_end(ap);
    if (!d->quiet)
        nb_log_write(line);
    if (d->log)
        d->log(d->log_user, line);
}

/* ---- small helpers ---------------------------------------------------------------------- */

/* Waits up to ms on the condition variable (mu held by the caller); 1 when woken by
 * a stop. */
static int nap_locked(nb_daemon *d, int ms, const int *flag)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)(ms % 1000) * 1000000;
    ts.tv_sec += ms / 1000 + ns / 1000000000;
    ts.tv_nsec = (long)(ns % 1000000000);
    while (!*flag) {
        if (pthread_cond_timedwait(&d->cv, &d->mu, &ts) == ETIMEDOUT)
            break;
    }
    return *flag;
}

static int nap(nb_daemon *d, int ms, const int *flag)
{
    pthread_mutex_lock(&d->mu);
    int r = nap_locked(d, ms, flag);
    pthread_mutex_unlock(&d->mu);
    return r;
}

/* Exponential backoff with jitter: [base/2, base] with base = min * 2^attempt. */
static int backoff_ms(nb_daemon *d, int attempt)
{
    int64_t base = d->bmin;
    for (int i = 0; i < attempt && base < d->bmax; i++)
        base *= 2;
    if (base > d->bmax)
        base = d->bmax;
    pthread_mutex_lock(&d->mu);
    unsigned r = (unsigned)rand_r(&d->rng);
    pthread_mutex_unlock(&d->mu);
    return (int)(base / 2 + (int64_t)(r % (unsigned)(base / 2 + 1)));
}

static int retryable(nb_code rc)
{
    return rc == NB_ETIMEOUT || rc == NB_EUNAVAIL || rc == NB_EIO;
}

static void set_fatal(nb_daemon *d, const nb_err *err)
{
    pthread_mutex_lock(&d->mu);
    if (!d->fatal) {
        d->fatal = err->code ? err->code : NB_EINTERNAL;
        d->fatal_set = 1;
        d->fatal_err = *err;
    }
    d->stopping = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    dlog(d, "fatal: %s", err->msg);
}

/* One call of req under request id (0: a fresh one; a retry passes the first call's, and
 * the same message packs to the same payload); on OK the response is unpacked into *resp
 * (nb_wire_free) unless desc is NULL. */
static nb_code call(nb_daemon *d, const char *method, uint64_t id, const void *req,
                    int timeout_ms, const ProtobufCMessageDescriptor *desc, void *resp,
                    int *status, nb_err *err)
{
    return nb_rpc_call_pb_id(d->cli, id, method, req, desc, timeout_ms, resp, status, NULL, err);
}

/* ---- registration ------------------------------------------------------------------------ */

/* Sends the RegisterRequest: who this worker is and the deployments it serves. */
static nb_code call_register(nb_daemon *d, int timeout_ms, Npubench__RegisterResponse **resp,
                             int *status, size_t *n_deps, nb_err *err)
{
    Npubench__Deployment **deps = NULL;
    nb_code rc = nb_executor_advertise(d->ctx, &deps, n_deps, err);
    if (rc)
        return rc;
    Npubench__WorkerInfo info = NPUBENCH__WORKER_INFO__INIT;
    pthread_mutex_lock(&d->mu);
    char wid[128], lease[128];
    snprintf(wid, sizeof wid, "%s", d->worker_id);
    snprintf(lease, sizeof lease, "%s", d->lease_id);
    int64_t job = d->job_id;
    pthread_mutex_unlock(&d->mu);
    info.worker_id = wid;
    info.board_name = d->board;
    info.board_type = d->board_type;
    info.tags = d->tags;
    info.n_tags = (size_t)d->n_tags;
    info.host = d->host;
    info.backends = (char **)d->backends;
    info.n_backends = d->n_backends;
    info.deployments = deps;
    info.n_deployments = *n_deps;
    info.device_id = d->device;
    info.version = d->version;
    info.instance_id = d->instance_id;
    info.holds_device_lock = 1; /* nb_daemon_start took it before dialing */
    info.board_key = d->board_key;
    nb_probe pr;
    nb_probe_read(&pr);
    info.driver_version = pr.driver;
    info.firmware_version = pr.firmware;
    info.xrt_version = pr.xrt;
    info.kernel_path = pr.kernel_path;
    info.cpu_model = pr.cpu_model;
    info.toolchain = pr.toolchain;
    Npubench__RegisterRequest req = NPUBENCH__REGISTER_REQUEST__INIT;
    req.info = &info;
    req.current_job_id = job; /* a restarted coordinator keeps the job running */
    req.lease_id = lease;
    rc = call(d, M_REGISTER, 0, &req, timeout_ms, &npubench__register_response__descriptor,
              resp, status, err);
    for (size_t i = 0; i < *n_deps; i++)
        nb_jobpb_free(deps[i]);
    free(deps);
    return rc;
}

/* Takes the coordinator's answer: our id, and a shorter heartbeat if it asks for one. */
static void take_registration(nb_daemon *d, const Npubench__RegisterResponse *resp,
                              size_t n_deps)
{
    pthread_mutex_lock(&d->mu);
    int first = !d->worker_id[0] || strcmp(d->worker_id, resp->worker_id);
    snprintf(d->worker_id, sizeof d->worker_id, "%s", resp->worker_id);
    d->registered = 1;
    d->need_register = 0;
    d->stats.registrations++;
    if (resp->heartbeat_interval_ms > 0 && resp->heartbeat_interval_ms < d->hb_ms)
        d->hb_ms = resp->heartbeat_interval_ms;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (first)
        dlog(d, "registered with %s as %s (board %s, device %s, %zu deployments)", d->url,
             resp->worker_id, d->board, d->device, n_deps);
    else
        dlog(d, "re-registered with %s as %s", d->url, resp->worker_id);
}

static nb_code do_register(nb_daemon *d, nb_err *err)
{
    size_t n_deps = 0;
    Npubench__RegisterResponse *resp = NULL;
    int status = 0;
    /* Short: a live coordinator answers at once, and a stop waits for this call. */
    nb_code rc = call_register(d, d->rpc_ms < 2000 ? d->rpc_ms : 2000, &resp, &status, &n_deps,
                               err);
    if (rc) {
        if (status == NB_RPC_ALREADY_EXISTS || status == NB_RPC_UNAUTHENTICATED ||
            status == NB_RPC_PERMISSION_DENIED || status == NB_RPC_INVALID_ARGUMENT) {
            nb_err f;
            nb_err_set(&f, status == NB_RPC_UNAUTHENTICATED ? NB_EAUTH : NB_EUNAVAIL,
                       "the coordinator at %s refused the registration (%s): %s", d->url,
                       nb_rpc_status_name(status), err->msg);
            set_fatal(d, &f);
        }
        return rc;
    }
    take_registration(d, resp, n_deps);
    nb_wire_free(resp);
    return NB_OK;
}

/* A clean stop gives the registration up, so a successor registers at once; one short try:
 * a coordinator that does not answer ages the registration out itself. */
static void do_deregister(nb_daemon *d)
{
    Npubench__DeregisterRequest req = NPUBENCH__DEREGISTER_REQUEST__INIT;
    req.worker_id = d->worker_id;
    req.instance_id = d->instance_id;
    nb_err err;
    if (d->registered && call(d, M_DEREGISTER, 0, &req, 1000, NULL, NULL, NULL, &err) == NB_OK)
        dlog(d, "deregistered from %s", d->url);
}

/* ---- job hooks ------------------------------------------------------------------------------ */

/* Both hooks only record and wake the heartbeat thread, which sends the latest state at
 * most every PROG_MIN_MS: a token costs a store, never a round trip. */
static void hook_progress(void *u, int done, int total, const char *msg)
{
    nb_daemon *d = u;
    pthread_mutex_lock(&d->mu);
    d->prog_done = done;
    d->prog_total = total;
    snprintf(d->prog_msg, sizeof d->prog_msg, "%s", msg ? msg : "");
    d->tok_done = d->tok_total = 0; /* a unit ended: the next one's tokens start again */
    d->prog_dirty = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void hook_tokens(void *u, const char *unit, int done, int total)
{
    nb_daemon *d = u;
    pthread_mutex_lock(&d->mu);
    d->tok_done = done;
    d->tok_total = total;
    snprintf(d->unit, sizeof d->unit, "%s", unit ? unit : "");
    if (!d->prog_dirty) {
        d->prog_dirty = 1;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

static int hook_cancelled(void *u)
{
    nb_daemon *d = u;
    pthread_mutex_lock(&d->mu);
    int c = d->cancel;
    pthread_mutex_unlock(&d->mu);
    return c;
}

static void hook_log(void *u, const char *line)
{
    nb_daemon *d = u;
    /* job lines already carry a timestamp: print them under the worker's prefix */
    if (!d->quiet) {
        char text[NB_LOG_LINE_MAX];
        snprintf(text, sizeof text, "npubench worker[%ld]: job: %s", (long)getpid(), line);
        nb_log_write(text);
    }
    if (d->log)
        d->log(d->log_user, line);
}

/* ---- results and hand-backs ---------------------------------------------------------------- */

/* Sends req under one request id until the coordinator answers, retrying after
 * timeouts and outages (backoff); gives up past deadline_ms (monotonic, 0 = never)
 * or on a non-retryable status. */
static nb_code send_until_answered(nb_daemon *d, const char *method, const void *req,
                                   const ProtobufCMessageDescriptor *desc, void *resp,
                                   int64_t deadline_ms, uint64_t *retries, nb_err *err)
{
    nb_code rc;
    uint64_t id = nb_rpc_client_new_id(d->cli);
    for (int attempt = 0;; attempt++) {
        rc = call(d, method, id, req, d->rpc_ms, desc, resp, NULL, err);
        if (!rc || !retryable(rc))
            break;
        if (deadline_ms && nb_now_ms() >= (double)deadline_ms)
            break;
        if (retries)
            (*retries)++;
        int wait = backoff_ms(d, attempt < 6 ? attempt : 6);
        dlog(d, "%s: %s; retrying with the same request id in %d ms", method, err->msg, wait);
        static const int never = 0;
        nap(d, wait, &never);
    }
    return rc;
}

static int64_t give_up_at(nb_daemon *d)
{
    pthread_mutex_lock(&d->mu);
    int stopping = d->stopping;
    pthread_mutex_unlock(&d->mu);
    /* while running, results are worth waiting for; when stopping, only a grace */
    return stopping ? (int64_t)nb_now_ms() + d->grace_ms : 0;
}

static void release_job(nb_daemon *d, const Npubench__Lease *l, int retry, const char *reason)
{
    Npubench__ReleaseJobRequest req = NPUBENCH__RELEASE_JOB_REQUEST__INIT;
    char wid[128];
    pthread_mutex_lock(&d->mu);
    snprintf(wid, sizeof wid, "%s", d->worker_id);
    pthread_mutex_unlock(&d->mu);
    req.worker_id = wid;
    req.instance_id = d->instance_id;
    req.lease_id = l->lease_id;
    req.job_id = l->job_id;
    req.reason = (char *)reason;
    req.retry = retry != 0;
    Npubench__ReleaseJobResponse *resp = NULL;
    nb_err err;
    nb_code rc = send_until_answered(d, M_RELEASE, &req, &npubench__release_job_response__descriptor,
                                     &resp, (int64_t)nb_now_ms() + (d->grace_ms > 2000 ? d->grace_ms : 2000),
                                     NULL, &err);
    if (rc)
        dlog(d, "job %lld: hand-back failed (%s); its lease will expire on the coordinator",
             (long long)l->job_id, err.msg);
    else {
        dlog(d, "job %lld handed back (%s)", (long long)l->job_id, reason);
        pthread_mutex_lock(&d->mu);
        d->stats.released++;
        pthread_mutex_unlock(&d->mu);
    }
    nb_wire_free(resp);
}

static void report_result(nb_daemon *d, const Npubench__Lease *l, Npubench__JobResult *res)
{
    char wid[128];
    pthread_mutex_lock(&d->mu);
    snprintf(wid, sizeof wid, "%s", d->worker_id);
    pthread_mutex_unlock(&d->mu);
    char *w = nb_jobpb_strdup(wid);
    if (w) {
        if (res->worker_id != protobuf_c_empty_string)
            free(res->worker_id);
        res->worker_id = w;
    }
    /* a program's raw output may not be UTF-8: the coordinator refuses such a string, so
     * it goes with U+FFFD for each bad byte rather than not at all */
    nb_wire_sanitize_utf8(res);
    Npubench__ReportResultRequest req = NPUBENCH__REPORT_RESULT_REQUEST__INIT;
    req.worker_id = wid;
    req.instance_id = d->instance_id;
    req.lease_id = l->lease_id;
    req.result = res;
    Npubench__ReportResultResponse *resp = NULL;
    uint64_t retries = 0;
    nb_err err;
    nb_code rc = send_until_answered(d, M_RESULT, &req, &npubench__report_result_response__descriptor,
                                     &resp, give_up_at(d), &retries, &err);
    pthread_mutex_lock(&d->mu);
    d->stats.result_retries += retries;
    if (!rc && resp->accepted)
        d->stats.results++;
    pthread_mutex_unlock(&d->mu);
    if (rc)
        dlog(d, "job %lld: result not delivered: %s", (long long)l->job_id, err.msg);
    else if (!resp->accepted)
        dlog(d, "job %lld: the coordinator dropped the result (lease %s no longer valid)",
             (long long)l->job_id, l->lease_id);
    else
        /* the job's outcome as the coordinator committed it (a regression fails a run), in
         * the words `npubench job N`, JSON and JUnit use */
        dlog(d, "job %lld: result reported (%s%s%s)", (long long)l->job_id,
             *resp->outcome ? resp->outcome : "error",
             res->status ? ": " : "", res->status ? nb_rpc_status_name(res->status) : "");
    nb_wire_free(resp);
}

static void flush_progress(nb_daemon *d);

static void run_lease(nb_daemon *d, const Npubench__Lease *l)
{
    pthread_mutex_lock(&d->mu);
    d->job_id = l->job_id;
    snprintf(d->lease_id, sizeof d->lease_id, "%s", l->lease_id);
    d->prog_done = d->prog_total = 0;
    snprintf(d->prog_msg, sizeof d->prog_msg, "leased");
    d->tok_done = d->tok_total = 0;
    d->unit[0] = '\0';
    d->cancel = d->cancel_by_coordinator = 0;
    d->stats.leases++;
    int stopping = d->stopping;
    pthread_mutex_unlock(&d->mu);
    Npubench__JobSpec empty = NPUBENCH__JOB_SPEC__INIT;
    const Npubench__JobSpec *spec = l->spec ? l->spec : &empty;
    dlog(d, "job %lld: %s leased (lease %s, attempt %d)", (long long)l->job_id,
         nb_job_kind_name(spec->kind), l->lease_id, l->attempt);
    if (stopping) { /* leased while shutting down: give it straight back */
        release_job(d, l, 1, "worker shutting down");
    } else {
        nb_executor_hooks h = {hook_progress,          hook_cancelled,
                               hook_log,               d,
                               l->reference_trace.data, l->reference_trace.len,
                               l->reference_trace_sha256, l->reference_trace_path,
                               hook_tokens};
        Npubench__JobResult *res = NULL;
        nb_err err;
        nb_code rc = nb_executor_run(d->ctx, spec, l->job_id, &h, &res, &err);
        pthread_mutex_lock(&d->mu);
        int cancelled = d->cancel, by_coord = d->cancel_by_coordinator;
        pthread_mutex_unlock(&d->mu);
        if (rc == NB_ECANCELED && cancelled) {
            if (by_coord) {
                pthread_mutex_lock(&d->mu);
                d->stats.cancelled++;
                pthread_mutex_unlock(&d->mu);
                release_job(d, l, 0, "cancelled by the coordinator");
            } else
                release_job(d, l, 1, "worker shutting down");
        } else if (res) {
            pthread_mutex_lock(&d->mu);
            d->finishing = 1;
            pthread_mutex_unlock(&d->mu);
            flush_progress(d);
            report_result(d, l, res);
        } else
            dlog(d, "job %lld: no result (%s)", (long long)l->job_id, err.msg);
        nb_jobpb_free(res);
    }
    pthread_mutex_lock(&d->mu);
    d->job_id = 0;
    d->finishing = 0;
    d->lease_id[0] = '\0';
    d->cancel = 0;
    pthread_mutex_unlock(&d->mu);
}

/* ---- the lease loop --------------------------------------------------------------------- */

/* What the lease loop does after a step. */
typedef enum step { STEP_NEXT, STEP_STOP } step;

/* Registers; on a failure waits out a backoff, or stops where the failure is fatal. */
static step register_step(nb_daemon *d, int *failures)
{
    nb_err err;
    if (do_register(d, &err) == NB_OK) {
        *failures = 0;
        return STEP_NEXT;
    }
    pthread_mutex_lock(&d->mu);
    d->stats.connect_failures++;
    int fatal = d->fatal != NB_OK;
    pthread_mutex_unlock(&d->mu);
    if (fatal)
        return STEP_STOP;
    int wait = backoff_ms(d, (*failures)++);
    dlog(d, "coordinator %s: %s; retrying in %d ms", d->url, err.msg, wait);
    nap(d, wait, &d->stopping);
    return STEP_NEXT;
}

/* The lease call, resent on a timeout under the same request id: a lease granted while our
 * reply got lost comes back on the resend (the coordinator's response cache). */
static nb_code call_lease(nb_daemon *d, const Npubench__LeaseJobRequest *req,
                          Npubench__LeaseJobResponse **resp, int *status, nb_err *err)
{
    uint64_t id = nb_rpc_client_new_id(d->cli);
    nb_code rc = NB_OK;
    for (int tries = 0; tries < 3; tries++) {
        rc = call(d, M_LEASE, id, req, d->wait_ms + d->rpc_ms,
                  &npubench__lease_job_response__descriptor, resp, status, err);
        if (rc != NB_ETIMEOUT || d->stopping)
            break;
    }
    return rc;
}

/* After a failed lease call: register again where the coordinator lost us, stop where it
 * refuses our credentials, else back off and reconnect. */
static step lease_failed(nb_daemon *d, int status, const nb_err *err, int *failures)
{
    if (status == NB_RPC_NOT_FOUND) { /* the coordinator lost us (restart) */
        dlog(d, "coordinator: %s; registering again", err->msg);
        pthread_mutex_lock(&d->mu);
        d->need_register = 1;
        pthread_mutex_unlock(&d->mu);
        return STEP_NEXT;
    }
    if (status == NB_RPC_UNAUTHENTICATED) {
        set_fatal(d, err);
        return STEP_STOP;
    }
    pthread_mutex_lock(&d->mu);
    d->stats.connect_failures++;
    /* it may come back as a fresh process: register again then */
    d->need_register = 1;
    pthread_mutex_unlock(&d->mu);
    int wait = backoff_ms(d, (*failures)++);
    dlog(d, "coordinator %s unreachable (%s); reconnecting in %d ms", d->url, err->msg, wait);
    nap(d, wait, &d->stopping);
    return STEP_NEXT;
}

/* Asks for a job (a long poll) and runs the one granted. */
static step lease_step(nb_daemon *d, char *wid, int *failures)
{
    Npubench__LeaseJobRequest req = NPUBENCH__LEASE_JOB_REQUEST__INIT;
    req.worker_id = wid;
    req.instance_id = d->instance_id;
    req.wait_ms = d->wait_ms;
    nb_err err;
    Npubench__LeaseJobResponse *resp = NULL;
    int status = 0;
    double t0 = nb_now_ms();
    nb_code rc = call_lease(d, &req, &resp, &status, &err);
    if (rc)
        return lease_failed(d, status, &err, failures);
    *failures = 0;
    if (!resp->lease && resp->drained) {
        int n = nb_executor_release_devices(d->ctx);
        if (n)
            dlog(d, "board drained: %d resident deployment%s closed, devices released", n,
                 n == 1 ? "" : "s");
    }
    if (resp->lease)
        run_lease(d, resp->lease);
    else if (nb_now_ms() - t0 < 50) /* a coordinator that does not long-poll */
        nap(d, 200, &d->stopping);
    nb_wire_free(resp);
    return STEP_NEXT;
}

static void *lease_main(void *u)
{
    nb_daemon *d = u;
    int failures = 0;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        int stop = d->stopping, need = !d->registered || d->need_register;
        char wid[128];
        snprintf(wid, sizeof wid, "%s", d->worker_id);
        pthread_mutex_unlock(&d->mu);
        if (stop)
            break;
        if ((need ? register_step(d, &failures) : lease_step(d, wid, &failures)) == STEP_STOP)
            break;
    }
    pthread_mutex_lock(&d->mu);
    d->lease_done = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- the heartbeat ------------------------------------------------------------------------- */

/* One Heartbeat: liveness and progress; its answer asks us to register again or cancels
 * the current job. Fails only where the message cannot be packed (no call is made). */
static nb_code send_heartbeat(nb_daemon *d, char *wid, char *lease, int64_t job,
                              Npubench__Progress *prog)
{
    Npubench__Heartbeat hb = NPUBENCH__HEARTBEAT__INIT;
    hb.worker_id = wid;
    hb.instance_id = d->instance_id;
    hb.current_job_id = job;
    hb.lease_id = lease;
    hb.progress = job ? prog : NULL;
    hb.unix_ms = nb_wall_ms();
    nb_err err;
    Npubench__HeartbeatResponse *resp = NULL;
    int status = 0;
    nb_code rc = call(d, M_HEARTBEAT, 0, &hb, d->rpc_ms,
                      &npubench__heartbeat_response__descriptor, &resp, &status, &err);
    pthread_mutex_lock(&d->mu);
    if (!rc) {
        d->stats.heartbeats++;
        if (resp->reregister)
            d->need_register = 1;
        for (size_t i = 0; i < resp->n_cancels; i++)
            if (job && resp->cancels[i]->job_id == job && d->job_id == job &&
                !d->cancel) {
                d->cancel = d->cancel_by_coordinator = 1;
                emit(d, "cancel requested by the coordinator");
            }
    } else if (status == NB_RPC_NOT_FOUND)
        d->need_register = 1;
    pthread_mutex_unlock(&d->mu);
    nb_wire_free(resp);
    return NB_OK;
}

/* Progress renews the lease; its answer also carries cancellation. */
static void report_progress(nb_daemon *d, char *wid, char *lease, int64_t job,
                            Npubench__Progress *prog)
{
    Npubench__ReportProgressRequest pr = NPUBENCH__REPORT_PROGRESS_REQUEST__INIT;
    pr.worker_id = wid;
    pr.instance_id = d->instance_id;
    pr.lease_id = lease;
    pr.job_id = job;
    pr.progress = prog;
    nb_err err;
    Npubench__ReportProgressResponse *presp = NULL;
    int status = 0;
    nb_code rc = call(d, M_PROGRESS, 0, &pr, d->rpc_ms,
                      &npubench__report_progress_response__descriptor, &presp, &status, &err);
    /* FAILED_PRECONDITION: the lease is no longer ours (expired, requeued) */
    if ((!rc && presp->cancel) || (rc && status == NB_RPC_FAILED_PRECONDITION)) {
        pthread_mutex_lock(&d->mu);
        if (d->job_id == job && !d->cancel) {
            d->cancel = d->cancel_by_coordinator = 1;
            emit(d, "job cancelled by the coordinator");
        }
        pthread_mutex_unlock(&d->mu);
    }
    nb_wire_free(presp);
}

/* What the heartbeat and the flush before a result send: the job's ids and progress, copied
 * under the lock so the RPCs run without it. */
typedef struct prog_snap {
    char wid[128], lease[128], msg[256], unit[16];
    int64_t job;
    int registered;
    Npubench__Progress prog;
} prog_snap;

static void prog_snapshot(nb_daemon *d, prog_snap *s)
{
    pthread_mutex_lock(&d->mu);
    snprintf(s->wid, sizeof s->wid, "%s", d->worker_id);
    snprintf(s->lease, sizeof s->lease, "%s", d->lease_id);
    snprintf(s->msg, sizeof s->msg, "%s", d->prog_msg);
    s->job = d->job_id;
    s->registered = d->registered;
    npubench__progress__init(&s->prog);
    s->prog.done = d->prog_done;
    s->prog.total = d->prog_total;
    s->prog.tokens_done = d->tok_done;
    s->prog.tokens_total = d->tok_total;
    snprintf(s->unit, sizeof s->unit, "%s", d->unit);
    d->prog_dirty = 0; /* what changes from here on goes out with the next report */
    pthread_mutex_unlock(&d->mu);
    s->prog.message = s->msg;
    s->prog.unit = s->unit;
}

static void heartbeat_once(nb_daemon *d)
{
    prog_snap s;
    prog_snapshot(d, &s);
    if (!s.registered)
        return;
    if (send_heartbeat(d, s.wid, s.lease, s.job, &s.prog) == NB_OK && s.job)
        report_progress(d, s.wid, s.lease, s.job, &s.prog);
    /* The coordinator restarted while the job runs: the lease loop is busy with the job, so
     * this thread registers again at once, with the lease, and the job carries on. */
    pthread_mutex_lock(&d->mu);
    int again = d->need_register && d->job_id && !d->stopping;
    pthread_mutex_unlock(&d->mu);
    nb_err err;
    if (again && do_register(d, &err))
        dlog(d, "registering again while job %lld runs: %s", (long long)s.job, err.msg);
}

/* The job's last progress (N/N) goes out before its result: the heartbeat sends it only on
 * its period, so a job shorter than one period would otherwise end showing an older step. */
static void flush_progress(nb_daemon *d)
{
    prog_snap s;
    prog_snapshot(d, &s);
    if (s.registered && s.job)
        report_progress(d, s.wid, s.lease, s.job, &s.prog);
}

/* One wait on d->cv of at most ms (a progress hook or a stop wakes it early). */
static void wait_once_locked(nb_daemon *d, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (ms % 1000) * 1000000;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&d->cv, &d->mu, &ts);
}

/* The heartbeat on its period; between beats, changed progress at most every PROG_MIN_MS
 * (per prompt, repetition and token, coalesced to the latest state). */
static void *hb_main(void *u)
{
    nb_daemon *d = u;
    int64_t last_hb = (int64_t)nb_now_ms(), last_prog = 0;
    pthread_mutex_lock(&d->mu);
    while (!d->hb_stop) {
        int64_t now = (int64_t)nb_now_ms();
        int64_t next = last_hb + d->hb_ms;
        if (d->prog_dirty && d->job_id && !d->finishing && last_prog + PROG_MIN_MS < next)
            next = last_prog + PROG_MIN_MS;
        if (next > now) {
            wait_once_locked(d, next - now);
            continue;
        }
        int beat = now >= last_hb + d->hb_ms;
        pthread_mutex_unlock(&d->mu);
        if (beat) {
            heartbeat_once(d);
            last_hb = now;
        } else
            flush_progress(d);
        last_prog = now;
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- start / stop --------------------------------------------------------------------------- */

static void free_daemon(nb_daemon *d)
{
    nb_rpc_client_close(d->cli);
    nb_executor_free(d->ctx);
    nb_devlock_release(d->lock);
    for (int i = 0; i < d->n_tags; i++)
        free(d->tags[i]);
    free(d->tags);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

/* KIND:N where KIND is a backend that names a device (NB_BACKEND_DEVICE). */
static nb_code parse_device(const char *dev, const nb_backend_ops **kind, unsigned *index,
                            nb_err *err)
{
    char k[16];
    unsigned idx;
    char extra;
    const nb_backend_ops *ops = NULL;
    if (sscanf(dev, "%15[a-z]:%u%c", k, &idx, &extra) == 2 && idx <= NB_JOB_DEVICE_MAX)
        ops = nb_backend_find(k);
    if (!nb_backend_can(ops, NB_BACKEND_DEVICE)) {
        char names[128];
        nb_backend_names(NB_BACKEND_DEVICE, 0, ":N", names, sizeof names);
        return nb_err_set(err, NB_EINVAL, "--device '%s': expected %s (N 0..%d)", dev, names,
                          NB_JOB_DEVICE_MAX);
    }
    *kind = ops;
    *index = idx;
    return NB_OK;
}

static void random_hex(char *out, size_t bytes)
{
    unsigned char r[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, r, bytes) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)bytes) { /* no urandom: time and pid still tell processes apart */
        uint64_t x = (uint64_t)nb_wall_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)nb_now_ms();
        memcpy(r, &x, sizeof x);
    }
    for (size_t i = 0; i < bytes; i++)
        sprintf(out + 2 * i, "%02x", r[i]);
}

/* The options nb_daemon_start can refuse before it holds anything: the coordinator, the
 * number of tags, and the device (one whose backend has a probe, xrt, must be built in and
 * answer it). */
static nb_code check_opts(const nb_daemon_opts *o, const char *device,
                          const nb_backend_ops **dkind, unsigned *didx, char *dev_info,
                          size_t info_cap, nb_err *err)
{
    if (!o->coordinator_url || !*o->coordinator_url)
        return nb_err_set(err, NB_EINVAL, "--coordinator: required (tcp://host:port, ipc://path, "
                          "inproc://name)");
    if (o->n_tags < 0 || o->n_tags > MAX_TAGS)
        return nb_err_set(err, NB_EINVAL, "--tag: at most %d tags", MAX_TAGS);
    nb_code rc = parse_device(device, dkind, didx, err);
    if (rc)
        return rc;
    const nb_backend_ops *k = *dkind;
    if (!k->probe)
        return NB_OK;
    if (k->built && !k->built())
        return nb_err_set(err, NB_EUNAVAIL, "--device %s: this npubench was built without "
                          "%s support", device, k->name);
    if ((rc = k->probe(*didx, dev_info, info_cap, err)))
        return nb_err_prefix(err, "--device %s: ", device);
    return NB_OK;
}

/* The immutable configuration: names, identity and timings, defaults filled in. */
static void configure(nb_daemon *d, const nb_daemon_opts *o, const char *device)
{
    snprintf(d->url, sizeof d->url, "%s", o->coordinator_url);
    snprintf(d->secret, sizeof d->secret, "%s", o->secret ? o->secret : "");
    snprintf(d->board_key, sizeof d->board_key, "%s", o->board_key ? o->board_key : "");
    snprintf(d->board, sizeof d->board, "%s", o->board_name && *o->board_name ? o->board_name : "local");
    snprintf(d->board_type, sizeof d->board_type, "%s", o->board_type ? o->board_type : "");
    snprintf(d->device, sizeof d->device, "%s", device);
    snprintf(d->version, sizeof d->version, "%s+%s", NB_VERSION, nb_commit());
    if (gethostname(d->host, sizeof d->host - 1))
        snprintf(d->host, sizeof d->host, "unknown");
    random_hex(d->instance_id, 16);
    d->rng = (unsigned)strtoul(d->instance_id + 24, NULL, 16);
    d->hb_ms = o->heartbeat_ms > 0 ? o->heartbeat_ms : 1000;
    d->wait_ms = o->lease_wait_ms > 0 ? o->lease_wait_ms : 2000;
    d->rpc_ms = o->rpc_timeout_ms > 0 ? o->rpc_timeout_ms : 5000;
    d->bmin = o->backoff_min_ms > 0 ? o->backoff_min_ms : 100;
    d->bmax = o->backoff_max_ms > 0 ? o->backoff_max_ms : 10000;
    if (d->bmax < d->bmin)
        d->bmax = d->bmin;
    d->grace_ms = o->grace_ms > 0 ? o->grace_ms : 30000;
    d->quiet = o->quiet;
    d->log = o->log;
    d->log_user = o->log_user;
}

static nb_code copy_tags(nb_daemon *d, const nb_daemon_opts *o, nb_err *err)
{
    d->tags = calloc((size_t)(o->n_tags ? o->n_tags : 1), sizeof *d->tags);
    if (!d->tags)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    for (int i = 0; i < o->n_tags; i++) {
        if (!o->tags[i] || !*o->tags[i] || strlen(o->tags[i]) > 64)
            return nb_err_set(err, NB_EINVAL, "--tag %d: must be 1..64 characters", i + 1);
        if (!(d->tags[i] = strdup(o->tags[i])))
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        d->n_tags++;
    }
    return NB_OK;
}

/* The deployments this worker serves, as a copy in *out (free): the deployments file, else
 * those given, else the instruct model in bf16 on the device's backend. Those on the
 * device's backend, where it probes a device of its own (xrt), address its index. */
/* *out copies the entries shallowly: their exec commands stay owned by *file (free with
 * nb_deployments_free after the executor has copied them). */
static nb_code own_deployments(const nb_daemon_opts *o, const nb_backend_ops *dkind,
                               unsigned didx,
                               nb_deployment **out, int *n_out, nb_deployment **file,
                               int *n_file_out, nb_err *err)
{
    nb_deployment *file_deps = NULL, def;
    int n_file = 0;
    *file = NULL;
    *n_file_out = 0;
    const nb_deployment *deps = o->deployments;
    int n_deps = o->n_deployments;
    if (o->deployments_file && *o->deployments_file) {
        nb_code rc = nb_deployments_load(o->deployments_file, &file_deps, &n_file, err);
        if (rc)
            return rc;
        deps = file_deps;
        n_deps = n_file;
    } else if (!deps || n_deps <= 0) {
        memset(&def, 0, sizeof def);
        snprintf(def.model, sizeof def.model, "instruct");
        snprintf(def.backend, sizeof def.backend, "%s", dkind->name);
        def.dtype = NB_DTYPE_BF16;
        snprintf(def.name, sizeof def.name, "instruct-%s-bf16", def.backend);
        def.device = didx;
        deps = &def;
        n_deps = 1;
    }
    nb_deployment *mine = calloc((size_t)n_deps, sizeof *mine);
    for (int i = 0; mine && i < n_deps; i++) {
        mine[i] = deps[i];
        if (dkind->probe && nb_backend_find(mine[i].backend) == dkind)
            mine[i].device = didx;
    }
    if (!mine) {
        nb_deployments_free(file_deps, n_file);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    *file = file_deps;
    *n_file_out = n_file;
    *out = mine;
    *n_out = n_deps;
    return NB_OK;
}

/* The executor over this worker's deployments; runs go next to the device lock unless
 * --rundir says otherwise. */
static nb_code open_executor(nb_daemon *d, const nb_daemon_opts *o,
                             const nb_backend_ops *dkind, unsigned didx, nb_err *err)
{
    char lockdir[1024];
    snprintf(lockdir, sizeof lockdir, "%s", nb_devlock_path(d->lock));
    char *slash = strrchr(lockdir, '/');
    if (slash)
        *slash = '\0';
    nb_deployment *mine = NULL, *file = NULL;
    int n_mine = 0, n_file = 0;
    nb_code rc = own_deployments(o, dkind, didx, &mine, &n_mine, &file, &n_file, err);
    if (rc)
        return rc;
    nb_executor_opts co = {.deployments = mine, .n_deployments = n_mine, .board = d->board,
                          .board_type = d->board_type, .threads = o->threads,
                          .mem_budget_bytes = o->mem_budget_bytes, .refdir = o->refdir,
                          .rundir = o->rundir && *o->rundir ? o->rundir : lockdir,
                          .reports_dir = o->reports_dir, .client_paths = o->client_paths};
    rc = nb_executor_new(&co, &d->ctx, err);
    free(mine);
    nb_deployments_free(file, n_file);
    return rc;
}

/* The backends registered with the coordinator: the executor's, plus each probing backend
 * (xrt) built in whose device answers (the worker's own device kind answered already). */
static void list_backends(nb_daemon *d, const nb_backend_ops *dkind, unsigned didx)
{
    nb_executor_backends(d->ctx, d->backends, NB_DAEMON_BACKENDS_MAX, &d->n_backends);
    const nb_backend_ops *ops;
    for (size_t b = 0; (ops = nb_backend_at(b)) && d->n_backends < NB_DAEMON_BACKENDS_MAX; b++) {
        int has = 0;
        for (size_t i = 0; i < d->n_backends; i++)
            has |= d->backends[i] == ops->name;
        if (has || !ops->probe || (ops->built && !ops->built()))
            continue;
        char info[256];
        nb_err e2;
        if (ops == dkind || ops->probe(didx, info, sizeof info, &e2) == NB_OK)
            d->backends[d->n_backends++] = ops->name;
    }
}

static nb_code open_client(nb_daemon *d, const nb_daemon_opts *o, nb_err *err)
{
    nb_rpc_opts ro = {0};
    ro.secret = d->secret[0] ? d->secret : NULL;
    ro.timeout_ms = d->rpc_ms;
    ro.background_dial = true;
    ro.tls_ca_file = o->tls_ca_file;
    ro.tls_cert_key_file = o->tls_cert_key_file;
    ro.tls_server_name = o->tls_server_name;
    return nb_rpc_client_open(d->url, &ro, &d->cli, err);
}

/* Both threads or neither: a heartbeat without a lease loop is stopped again. */
static nb_code start_threads(nb_daemon *d, nb_err *err)
{
    if (pthread_create(&d->hb_th, NULL, hb_main, d))
        return nb_err_set(err, NB_EINTERNAL, "cannot start the heartbeat thread");
    if (pthread_create(&d->lease_th, NULL, lease_main, d)) {
        pthread_mutex_lock(&d->mu);
        d->hb_stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->hb_th, NULL);
        return nb_err_set(err, NB_EINTERNAL, "cannot start the lease thread");
    }
    d->threads_started = 1;
    return NB_OK;
}

nb_code nb_daemon_start(const nb_daemon_opts *o, nb_daemon **out, nb_err *err)
{
    *out = NULL;
    const char *device = o->device && *o->device ? o->device : "cpu:0";
    const nb_backend_ops *dkind = NULL;
    char dev_info[256] = "";
    unsigned didx = 0;
    nb_code rc = check_opts(o, device, &dkind, &didx, dev_info, sizeof dev_info, err);
    if (rc)
        return rc;
    nb_daemon *d = calloc(1, sizeof *d);
    if (!d)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    configure(d, o, device);
    rc = copy_tags(d, o, err);
    /* The device first: a second worker must not get as far as the coordinator. */
    if (!rc)
        rc = nb_devlock_acquire(device, o->lockdir, &d->lock, err);
    if (!rc)
        rc = open_executor(d, o, dkind, didx, err);
    if (!rc) {
        list_backends(d, dkind, didx);
        rc = open_client(d, o, err);
    }
    if (!rc)
        rc = start_threads(d, err);
    if (rc) {
        free_daemon(d);
        return rc;
    }
    dlog(d, "worker on device %s (lock %s)%s%s; coordinator %s", device, nb_devlock_path(d->lock),
         dev_info[0] ? ", " : "", dev_info, d->url);
    *out = d;
    return NB_OK;
}

/* Asks the lease loop to stop (non-blocking). */
static void request_stop(nb_daemon *d, int finish_current)
{
    pthread_mutex_lock(&d->mu);
    if (!d->stopping || !finish_current) {
        d->stopping = 1;
        d->finish_current = finish_current;
        if (!finish_current && d->job_id && !d->cancel)
            d->cancel = 1; /* hand it back now */
    }
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* Waits for the lease loop up to ms (< 0: forever); 1 when it is done. */
static int wait_lease_done(nb_daemon *d, int ms)
{
    pthread_mutex_lock(&d->mu);
    if (ms < 0)
        while (!d->lease_done)
            pthread_cond_wait(&d->cv, &d->mu);
    else
        nap_locked(d, ms, &d->lease_done);
    int done = d->lease_done;
    pthread_mutex_unlock(&d->mu);
    return done;
}

void nb_daemon_stop(nb_daemon *d, int finish_current)
{
    if (!d)
        return;
    if (d->threads_started) {
        pthread_mutex_lock(&d->mu);
        int64_t job = d->job_id;
        pthread_mutex_unlock(&d->mu);
        if (job)
            dlog(d, "stopping: %s job %lld", finish_current ? "finishing" : "handing back",
                 (long long)job);
        request_stop(d, finish_current);
        if (!wait_lease_done(d, finish_current ? d->grace_ms : 0)) {
            pthread_mutex_lock(&d->mu);
            if (d->job_id && !d->cancel) {
                d->cancel = 1;
                emit(d, "grace period over: handing the job back");
            }
            pthread_mutex_unlock(&d->mu);
        }
        pthread_join(d->lease_th, NULL);
        pthread_mutex_lock(&d->mu);
        d->hb_stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->hb_th, NULL);
        do_deregister(d);
        dlog(d, "stopped");
    }
    free_daemon(d);
}

nb_code nb_daemon_error(nb_daemon *d, nb_err *err)
{
    pthread_mutex_lock(&d->mu);
    nb_code rc = d->fatal;
    if (err) {
        if (rc)
            *err = d->fatal_err;
        else
            nb_err_clear(err);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

nb_code nb_daemon_wait(nb_daemon *d, int timeout_ms, nb_err *err)
{
    pthread_mutex_lock(&d->mu);
    if (timeout_ms < 0)
        while (!d->fatal)
            pthread_cond_wait(&d->cv, &d->mu);
    else {
        double end = nb_now_ms() + timeout_ms;
        while (!d->fatal && nb_now_ms() < end) {
            int left = (int)(end - nb_now_ms());
            nap_locked(d, left > 0 ? left : 1, &d->fatal_set);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return nb_daemon_error(d, err);
}

void nb_daemon_get_stats(nb_daemon *d, nb_daemon_stats *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->stats;
    pthread_mutex_unlock(&d->mu);
}

void nb_daemon_worker_id(nb_daemon *d, char *buf, size_t cap)
{
    pthread_mutex_lock(&d->mu);
    snprintf(buf, cap, "%s", d->worker_id);
    pthread_mutex_unlock(&d->mu);
}

nb_executor *nb_daemon_job_ctx(nb_daemon *d)
{
    return d->ctx;
}

nb_code nb_daemon_run(const nb_daemon_opts *o, nb_err *err)
{
    /* Signals are taken synchronously here; the daemon's threads inherit the mask. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    nb_daemon *d;
    nb_code rc = nb_daemon_start(o, &d, err);
    if (rc) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return rc;
    }
    int signals = 0;
    double deadline = 0;
    for (;;) {
        struct timespec ts = {0, 200 * 1000000L};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            signals++;
            if (signals == 1) {
                dlog(d, "%s: finishing the current job (up to %d ms), then exiting",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT", d->grace_ms);
                request_stop(d, 1);
                deadline = nb_now_ms() + d->grace_ms;
            } else {
                dlog(d, "second signal: handing the current job back now");
                request_stop(d, 0);
            }
        }
        if (nb_daemon_error(d, NULL))
            break;
        if (signals && wait_lease_done(d, 0))
            break;
        if (signals == 1 && nb_now_ms() >= deadline) {
            request_stop(d, 0);
            signals = 2;
        }
    }
    nb_err fatal;
    rc = nb_daemon_error(d, &fatal);
    if (rc && err)
        *err = fatal;
    nb_daemon_stop(d, signals < 2);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

