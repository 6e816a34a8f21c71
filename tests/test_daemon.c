/* test_daemon: the worker daemon against a fake coordinator (nb_rpc server in this process):
 * register payload, lease -> execute -> one result, retries under one request id, backoff and
 * re-registration, stop/SIGTERM semantics, cancels, device claims, a real tiny CPU job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_executor.h"
#include "nb_daemon.h"
#include "nb_devlock.h"
#include "nb_file.h"
#include "nb_jobpb.h"
#include "nb_probe.h"
#include "nb_runenv.h"
#include "nb_rpc.h"
#include "nb_sha256.h"
#include "nb_time.h"
#include "nb_wire.h"
#include "nb_xrt.h"
#include "testutil.h"

/* ---- the fake coordinator --------------------------------------------------------------- */

#define MAX_JOBS 8
#define MAX_SEEN 64

typedef struct fake {
    int inited;
    pthread_mutex_t mu;
    nb_rpc_server *srv;
    char url[128];
    int closing;
    /* behaviour */
    int refuse_register;         /* answer ALREADY_EXISTS */
    int result_delay_first_ms;   /* sleep this long in the first ReportResult */
    int cancel_on_progress;      /* answer ReportProgress with cancel = true */
    /* queue */
    Npubench__JobSpec *jobs[MAX_JOBS];
    uint8_t *trace[MAX_JOBS];
    size_t trace_len[MAX_JOBS];
    int n_jobs, next_job;
    /* what it saw */
    int registers, heartbeats, heartbeats_busy, progress, leases_given, result_calls, releases;
    int deregisters, lock_claimed; /* Deregister calls; Register said it holds the lock */
    char deregister_instance[64];
    char board[64], device[32], instance[64], version[64], host[128], worker_id_sent[64];
    char tags[4][32];
    int n_tags, n_deployments, n_backends;
    char dep_model[256], dep_digest[80], backend0[16];
    uint64_t result_ids[MAX_SEEN];
    int n_result_ids;
    Npubench__JobResult *results[MAX_SEEN]; /* first result per lease */
    char result_lease[MAX_SEEN][32];
    int n_results;
    char release_lease[MAX_SEEN][32];
    int release_retry[MAX_SEEN];
    char release_reason[MAX_SEEN][128];
    int registered; /* the worker id is known (lost on a "restart") */
    int64_t reg_job; /* the lease the last Register said it holds */
    char board_key[128]; /* WorkerInfo.board_key of the last Register */
    char reg_lease[32];
} fake;

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

#define UNPACK(T, desc, var)                                                                     \
    T *var = NULL;                                                                               \
    do {                                                                                         \
        nb_err e_;                                                                               \
        if (nb_wire_unpack(&desc, req->payload, req->len, 0, &var, &e_))                         \
            return nb_rpc_reply_err(reply, &e_);                                                 \
    } while (0)

static nb_rpc_status h_register(void *u, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    fake *f = u;
    UNPACK(Npubench__RegisterRequest, npubench__register_request__descriptor, r);
    pthread_mutex_lock(&f->mu);
    f->registers++;
    f->reg_job = r->current_job_id;
    snprintf(f->reg_lease, sizeof f->reg_lease, "%s", r->lease_id);
    const Npubench__WorkerInfo *i = r->info;
    if (i) {
        snprintf(f->board, sizeof f->board, "%s", i->board_name);
        snprintf(f->device, sizeof f->device, "%s", i->device_id);
        snprintf(f->instance, sizeof f->instance, "%s", i->instance_id);
        f->lock_claimed = i->holds_device_lock;
        snprintf(f->version, sizeof f->version, "%s", i->version);
        snprintf(f->host, sizeof f->host, "%s", i->host);
        snprintf(f->worker_id_sent, sizeof f->worker_id_sent, "%s", i->worker_id);
        snprintf(f->board_key, sizeof f->board_key, "%s", i->board_key);
        f->n_tags = (int)(i->n_tags < 4 ? i->n_tags : 4);
        for (int t = 0; t < f->n_tags; t++)
            snprintf(f->tags[t], sizeof f->tags[t], "%s", i->tags[t]);
        f->n_deployments = (int)i->n_deployments;
        if (i->n_deployments) {
            snprintf(f->dep_model, sizeof f->dep_model, "%s", i->deployments[0]->model);
            snprintf(f->dep_digest, sizeof f->dep_digest, "%s", i->deployments[0]->digest);
        }
        f->n_backends = (int)i->n_backends;
        if (i->n_backends)
            snprintf(f->backend0, sizeof f->backend0, "%s", i->backends[0]);
    }
    int refuse = f->refuse_register;
    if (!refuse)
        f->registered = 1;
    pthread_mutex_unlock(&f->mu);
    nb_wire_free(r);
    if (refuse)
        return nb_rpc_reply_status(reply, NB_RPC_ALREADY_EXISTS,
                                   "host h device cpu:0 is served by a live worker");
    Npubench__RegisterResponse resp = NPUBENCH__REGISTER_RESPONSE__INIT;
    resp.worker_id = (char *)"w-1";
    resp.heartbeat_interval_ms = 100;
    resp.lease_ttl_ms = 5000;
    return nb_rpc_reply_pack(reply, &resp);
}

static nb_rpc_status h_heartbeat(void *u, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    fake *f = u;
    UNPACK(Npubench__Heartbeat, npubench__heartbeat__descriptor, h);
    pthread_mutex_lock(&f->mu);
    f->heartbeats++;
    if (h->current_job_id)
        f->heartbeats_busy++;
    int known = f->registered;
    pthread_mutex_unlock(&f->mu);
    nb_wire_free(h);
    Npubench__HeartbeatResponse resp = NPUBENCH__HEARTBEAT_RESPONSE__INIT;
    resp.reregister = !known;
    return nb_rpc_reply_pack(reply, &resp);
}

static nb_rpc_status h_lease(void *u, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    fake *f = u;
    UNPACK(Npubench__LeaseJobRequest, npubench__lease_job_request__descriptor, r);
    int wait = r->wait_ms;
    nb_wire_free(r);
    double end = nb_now_ms() + wait;
    for (;;) {
        pthread_mutex_lock(&f->mu);
        if (!f->registered) {
            pthread_mutex_unlock(&f->mu);
            return nb_rpc_reply_status(reply, NB_RPC_NOT_FOUND, "worker w-1 is not registered");
        }
        if (f->next_job < f->n_jobs) {
            int j = f->next_job++;
            f->leases_given++;
            pthread_mutex_unlock(&f->mu);
            Npubench__Lease l = NPUBENCH__LEASE__INIT;
            char id[32];
            snprintf(id, sizeof id, "L%d", j + 1);
            l.lease_id = id;
            l.job_id = 100 + j;
            l.spec = f->jobs[j];
            l.attempt = 1;
            l.expires_unix_ms = nb_wall_ms() + 5000;
            char hex[65] = "";
            if (f->trace[j]) {
                l.reference_trace.data = f->trace[j];
                l.reference_trace.len = f->trace_len[j];
                nb_sha256_mem_hex(f->trace[j], f->trace_len[j], hex);
                l.reference_trace_sha256 = hex;
            }
            Npubench__LeaseJobResponse resp = NPUBENCH__LEASE_JOB_RESPONSE__INIT;
            resp.lease = &l;
            return nb_rpc_reply_pack(reply, &resp);
        }
        int closing = f->closing;
        pthread_mutex_unlock(&f->mu);
        if (closing || nb_now_ms() >= end)
            break;
        sleep_ms(20);
    }
    Npubench__LeaseJobResponse resp = NPUBENCH__LEASE_JOB_RESPONSE__INIT;
    return nb_rpc_reply_pack(reply, &resp);
}

static nb_rpc_status h_progress(void *u, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    fake *f = u;
    UNPACK(Npubench__ReportProgressRequest, npubench__report_progress_request__descriptor, r);
    nb_wire_free(r);
    pthread_mutex_lock(&f->mu);
    f->progress++;
    int cancel = f->cancel_on_progress;
    pthread_mutex_unlock(&f->mu);
    Npubench__ReportProgressResponse resp = NPUBENCH__REPORT_PROGRESS_RESPONSE__INIT;
    resp.cancel = cancel != 0;
    resp.expires_unix_ms = nb_wall_ms() + 5000;
    return nb_rpc_reply_pack(reply, &resp);
}

static nb_rpc_status h_result(void *u, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    fake *f = u;
    pthread_mutex_lock(&f->mu);
    int first = f->result_calls++ == 0;
    int delay = f->result_delay_first_ms;
    if (f->n_result_ids < MAX_SEEN)
        f->result_ids[f->n_result_ids++] = req->request_id;
    pthread_mutex_unlock(&f->mu);
    if (first && delay)
        sleep_ms(delay); /* the reply "gets lost": the worker times out and resends */
    UNPACK(Npubench__ReportResultRequest, npubench__report_result_request__descriptor, r);
    pthread_mutex_lock(&f->mu);
    int dup = 0;
    for (int i = 0; i < f->n_results; i++)
        dup |= !strcmp(f->result_lease[i], r->lease_id);
    if (!dup && f->n_results < MAX_SEEN) { /* idempotent by lease id, like the db */
        snprintf(f->result_lease[f->n_results], 32, "%s", r->lease_id);
        f->results[f->n_results++] = r->result;
        r->result = NULL;
    }
    pthread_mutex_unlock(&f->mu);
    nb_wire_free(r);
    Npubench__ReportResultResponse resp = NPUBENCH__REPORT_RESULT_RESPONSE__INIT;
    resp.accepted = true;
    return nb_rpc_reply_pack(reply, &resp);
}

static nb_rpc_status h_release(void *u, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    fake *f = u;
    UNPACK(Npubench__ReleaseJobRequest, npubench__release_job_request__descriptor, r);
    pthread_mutex_lock(&f->mu);
    if (f->releases < MAX_SEEN) {
        snprintf(f->release_lease[f->releases], 32, "%s", r->lease_id);
        f->release_retry[f->releases] = r->retry;
        snprintf(f->release_reason[f->releases], 128, "%s", r->reason);
        f->releases++;
    }
    pthread_mutex_unlock(&f->mu);
    nb_wire_free(r);
    Npubench__ReleaseJobResponse resp = NPUBENCH__RELEASE_JOB_RESPONSE__INIT;
    resp.state = NPUBENCH__JOB_STATE__JOB_QUEUED;
    return nb_rpc_reply_pack(reply, &resp);
}

static nb_rpc_status h_deregister(void *u, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    fake *f = u;
    UNPACK(Npubench__DeregisterRequest, npubench__deregister_request__descriptor, r);
    pthread_mutex_lock(&f->mu);
    f->deregisters++;
    snprintf(f->deregister_instance, sizeof f->deregister_instance, "%s", r->instance_id);
    pthread_mutex_unlock(&f->mu);
    nb_wire_free(r);
    Npubench__DeregisterResponse resp = NPUBENCH__DEREGISTER_RESPONSE__INIT;
    return nb_rpc_reply_pack(reply, &resp);
}

static int url_seq;

static void fake_url(char *buf, size_t cap)
{
    snprintf(buf, cap, "inproc://nbtest-daemon-%ld-%d", (long)getpid(), ++url_seq);
}

static void fake_start(fake *f, const char *url)
{
    if (!f->inited) { /* first start; later ones are "restarts" */
        pthread_mutex_init(&f->mu, NULL);
        f->inited = 1;
    }
    snprintf(f->url, sizeof f->url, "%s", url);
    f->closing = 0;
    nb_rpc_opts o = {0};
    o.threads = 8;
    nb_err err;
    assert_int_equal(nb_rpc_server_open(url, &o, &f->srv, &err), NB_OK);
    struct {
        const char *m;
        nb_rpc_handler h;
    } hs[] = {{"npubench.Worker/Register", h_register},     {"npubench.Worker/Heartbeat", h_heartbeat},
              {"npubench.Worker/LeaseJob", h_lease},        {"npubench.Worker/ReportProgress", h_progress},
              {"npubench.Worker/ReportResult", h_result},   {"npubench.Worker/ReleaseJob", h_release},
              {"npubench.Worker/Deregister", h_deregister}};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        assert_int_equal(nb_rpc_server_handle(f->srv, hs[i].m, hs[i].h, f, 0, &err), NB_OK);
    assert_int_equal(nb_rpc_server_start(f->srv, &err), NB_OK);
}

/* Closes the server; the next fake_start on the same URL is a "restarted" coordinator
 * that has forgotten the worker. */
static void fake_close(fake *f)
{
    pthread_mutex_lock(&f->mu);
    f->closing = 1;
    f->registered = 0;
    pthread_mutex_unlock(&f->mu);
    nb_rpc_server_close(f->srv);
    f->srv = NULL;
}

static void fake_free(fake *f)
{
    if (f->srv)
        fake_close(f);
    for (int i = 0; i < f->n_results; i++)
        nb_jobpb_free(f->results[i]);
    for (int i = 0; i < f->n_jobs; i++)
        free(f->trace[i]);
}

static int fake_get(fake *f, const int *field)
{
    pthread_mutex_lock(&f->mu);
    int v = *field;
    pthread_mutex_unlock(&f->mu);
    return v;
}

/* Waits until *field >= want (or ms pass); returns the value. */
static int wait_for(fake *f, const int *field, int want, int ms)
{
    double end = nb_now_ms() + ms;
    int v;
    while ((v = fake_get(f, field)) < want && nb_now_ms() < end)
        sleep_ms(20);
    return v;
}

static void fake_push(fake *f, Npubench__JobSpec *spec)
{
    pthread_mutex_lock(&f->mu);
    f->jobs[f->n_jobs++] = spec;
    pthread_mutex_unlock(&f->mu);
}

/* ---- daemon set-up ---------------------------------------------------------------------------- */

static char fixture[1024];

static const char *fx(const char *name)
{
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/%s", tu_env("NB_SRC", "."), name);
    return fixture;
}

typedef struct env {
    char *tmp;
    nb_deployment dep;
} env;

/* An exec deployment whose "run" is cmd (shell), for protocol tests without a model. */
static void exec_deployment(env *e, const char *run_shell)
{
    char json[2048];
    snprintf(json, sizeof json, "[{\"name\": \"fx\", \"model\": \"Fixture-1B\", \"backend\": "
             "\"exec\", \"dtype\": \"bf16\", \"exec\": {\"run\": {\"shell\": \"%s\"}}}]", run_shell);
    nb_deployment *d;
    int n;
    nb_err err;
    if (nb_deployments_parse(json, strlen(json), "test", &d, &n, &err))
        fail_msg("%s", err.msg);
    e->dep = d[0];
    free(d); /* e->dep owns the exec commands now */
}

static void daemon_opts(nb_daemon_opts *o, env *e, const char *url, const char *device)
{
    memset(o, 0, sizeof *o);
    o->coordinator_url = url;
    o->board_name = "lab-1";
    o->board_type = "strix";
    static const char *tags[] = {"strix", "ci"};
    o->tags = tags;
    o->n_tags = 2;
    o->device = device;
    o->deployments = &e->dep;
    o->n_deployments = 1;
    o->heartbeat_ms = 100;
    o->lease_wait_ms = 200;
    o->rpc_timeout_ms = 1000;
    o->backoff_min_ms = 50;
    o->backoff_max_ms = 400;
    o->grace_ms = 5000;
    o->lockdir = e->tmp;
    o->rundir = e->tmp;
    o->quiet = getenv("NB_TEST_VERBOSE") == NULL;
}

static Npubench__JobSpec *run_spec(void)
{
    static Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    Npubench__JobSpec *s = calloc(1, sizeof *s);
    npubench__job_spec__init(s);
    s->kind = NPUBENCH__JOB_KIND__RUN;
    sel.model = (char *)"fixture-1b";
    s->selector = &sel;
    return s;
}

static void env_init(env *e)
{
    memset(e, 0, sizeof *e);
    e->tmp = tu_tmpdir();
    assert_non_null(e->tmp);
}

static void env_free(env *e, fake *f)
{
    for (int i = 0; i < f->n_jobs; i++)
        free(f->jobs[i]);
    nb_exec_deploy_free(e->dep.exec);
    tu_rmrf(e->tmp);
}

/* A scratch environment whose one deployment runs run_shell. */
static void exec_env(env *e, const char *run_shell)
{
    env_init(e);
    exec_deployment(e, run_shell);
}

/* Serves f (its knobs already set) at a fresh url, with one run job queued
 * when push_run, and fills o for a daemon on device against it. */
static void serve_fake(fake *f, char *url, size_t url_size, int push_run, env *e,
                       const char *device, nb_daemon_opts *o)
{
    fake_url(url, url_size);
    fake_start(f, url);
    if (push_run)
        fake_push(f, run_spec());
    daemon_opts(o, e, url, device);
}

static nb_daemon *start_daemon(const nb_daemon_opts *o)
{
    nb_daemon *d;
    nb_err err;
    if (nb_daemon_start(o, &d, &err))
        fail_msg("nb_daemon_start: %s", err.msg);
    return d;
}

static void teardown(env *e, fake *f)
{
    fake_free(f);
    env_free(e, f);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_register_lease_result(void **state)
{
    (void)state;
    env e;
    char run[1200];
    snprintf(run, sizeof run, "python3 %s run", fx("mlir-air/llama32_1b.py"));
    exec_env(&e, run);
    fake f = {0};
    char url[128];
    nb_daemon_opts o;
    serve_fake(&f, url, sizeof url, 1, &e, "cpu:7", &o);
    o.board_key = "0123456789abcdef.board-secret"; /* the board's own key rides along */
    nb_daemon *d = start_daemon(&o);
    assert_int_equal(wait_for(&f, &f.n_results, 1, 10000), 1);
    wait_for(&f, &f.heartbeats, 2, 3000);
    nb_daemon_stats st;
    nb_daemon_get_stats(d, &st);
    char wid[64];
    nb_daemon_worker_id(d, wid, sizeof wid);
    nb_daemon_stop(d, 1);
    /* the register payload */
    assert_string_equal(f.board, "lab-1");
    assert_string_equal(f.device, "cpu:7");
    assert_int_equal(strlen(f.instance), 32);
    assert_non_null(strstr(f.version, NB_VERSION));
    assert_true(strlen(f.host) > 0);
    assert_int_equal(f.n_tags, 2);
    assert_string_equal(f.tags[1], "ci");
    assert_int_equal(f.n_deployments, 1);
    assert_string_equal(f.dep_model, "Fixture-1B");
    assert_string_equal(f.backend0, "exec");
    assert_string_equal(f.worker_id_sent, ""); /* first registration: the coordinator assigns */
    assert_string_equal(f.board_key, "0123456789abcdef.board-secret");
    assert_string_equal(wid, "w-1");
    /* lease -> execute -> exactly one result */
    assert_int_equal(f.leases_given, 1);
    assert_int_equal(f.n_results, 1);
    assert_int_equal(f.result_calls, 1);
    Npubench__JobResult *r = f.results[0];
    assert_int_equal(r->job_id, 100);
    assert_string_equal(r->worker_id, "w-1");
    assert_int_equal(r->status, NPUBENCH__STATUS_CODE__OK);
    assert_non_null(r->metrics);
    assert_true(r->metrics->tps > 10.8 && r->metrics->tps < 10.9);
    assert_string_equal(r->environment->board, "lab-1");
    assert_non_null(strstr(r->log, "Tokens/second: 10.87"));
    assert_true(f.heartbeats >= 1);
    assert_int_equal(st.results, 1);
    assert_int_equal(f.releases, 0);
    teardown(&e, &f);
}

static void test_result_retry_same_id(void **state)
{
    (void)state;
    env e;
    char run[1200];
    snprintf(run, sizeof run, "python3 %s run", fx("mlir-air/llama32_1b.py"));
    exec_env(&e, run);
    fake f = {0};
    f.result_delay_first_ms = 1500; /* > the worker's rpc timeout */
    char url[128];
    nb_daemon_opts o;
    serve_fake(&f, url, sizeof url, 1, &e, "cpu:8", &o);
    o.rpc_timeout_ms = 300;
    nb_daemon *d = start_daemon(&o);
    double end = nb_now_ms() + 15000;
    nb_daemon_stats st;
    do {
        sleep_ms(50);
        nb_daemon_get_stats(d, &st);
    } while (!st.results && nb_now_ms() < end);
    nb_rpc_server_stats ss;
    nb_rpc_server_get_stats(f.srv, &ss);
    nb_daemon_stop(d, 1);
    assert_int_equal(st.results, 1);
    assert_true(st.result_retries >= 1);
    /* the handler ran once; every resend carried the first request id and was answered
     * from the server's cache */
    assert_int_equal(f.result_calls, 1);
    assert_int_equal(f.n_results, 1);
    assert_true(ss.replayed >= 1);
    for (int i = 1; i < f.n_result_ids; i++)
        assert_true(f.result_ids[i] == f.result_ids[0]);
    teardown(&e, &f);
}

static void test_backoff_and_reregister(void **state)
{
    (void)state;
    env e;
    char run[1200];
    snprintf(run, sizeof run, "python3 %s run", fx("mlir-air/llama32_1b.py"));
    exec_env(&e, run);
    char url[128];
    fake_url(url, sizeof url);
    nb_daemon_opts o;
    daemon_opts(&o, &e, url, "cpu:9");
    o.rpc_timeout_ms = 200;
    nb_daemon *d;
    nb_err err;
    /* nobody listens yet: the worker starts anyway and keeps trying */
    assert_int_equal(nb_daemon_start(&o, &d, &err), NB_OK);
    sleep_ms(1200);
    nb_daemon_stats st;
    nb_daemon_get_stats(d, &st);
    assert_int_equal(st.registrations, 0);
    assert_true(st.connect_failures >= 2);
    /* backoff: far fewer attempts than a busy loop would make */
    assert_true(st.connect_failures <= 12);
    fake f = {0};
    fake_start(&f, url);
    assert_true(wait_for(&f, &f.registers, 1, 8000) >= 1);
    /* the coordinator "restarts": forgets the worker, which registers again */
    fake_close(&f);
    sleep_ms(300);
    fake_start(&f, url);
    assert_true(wait_for(&f, &f.registers, 2, 8000) >= 2);
    assert_string_equal(f.worker_id_sent, "w-1"); /* keeps its id */
    fake_push(&f, run_spec());
    assert_int_equal(wait_for(&f, &f.n_results, 1, 10000), 1);
    nb_daemon_get_stats(d, &st);
    assert_true(st.registrations >= 2);
    nb_daemon_stop(d, 1);
    teardown(&e, &f);
}

/* The coordinator restarts while a job runs: the worker registers again at once, holding
 * its lease (not once the job ends), and the job's one result is reported. */
static void test_reregister_while_running(void **state)
{
    (void)state;
    env e;
    exec_env(&e, "sleep 3; echo 'Tokens/second: 5'");
    fake f = {0};
    char url[128];
    nb_daemon_opts o;
    serve_fake(&f, url, sizeof url, 1, &e, "cpu:13", &o);
    nb_daemon *d = start_daemon(&o);
    assert_int_equal(wait_for(&f, &f.leases_given, 1, 8000), 1);
    assert_int_equal(wait_for(&f, &f.registers, 1, 1000), 1);
    fake_close(&f);
    fake_start(&f, url);
    double t0 = nb_now_ms();
    assert_int_equal(wait_for(&f, &f.registers, 2, 1500), 2);
    assert_true(nb_now_ms() - t0 < 1500);
    assert_int_equal(fake_get(&f, &f.n_results), 0); /* the job still runs */
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.reg_job, 100);
    assert_string_equal(f.reg_lease, "L1");
    assert_string_equal(f.worker_id_sent, "w-1");
    pthread_mutex_unlock(&f.mu);
    assert_int_equal(wait_for(&f, &f.n_results, 1, 10000), 1);
    nb_daemon_stop(d, 1);
    assert_int_equal(f.releases, 0);
    assert_int_equal(f.leases_given, 1);
    teardown(&e, &f);
}

/* A job that takes ~1 s: a stop that lets it finish reports it; heartbeats keep coming
 * while it runs (their own thread). */
static void test_stop_finishes_current(void **state)
{
    (void)state;
    env e;
    exec_env(&e, "sleep 1; echo 'Tokens/second: 5'");
    fake f = {0};
    char url[128];
    nb_daemon_opts o;
    serve_fake(&f, url, sizeof url, 1, &e, "cpu:10", &o);
    nb_daemon *d = start_daemon(&o);
    assert_int_equal(wait_for(&f, &f.leases_given, 1, 8000), 1);
    sleep_ms(500);
    nb_daemon_stop(d, 1);
    assert_int_equal(f.n_results, 1);
    assert_true(f.results[0]->metrics && f.results[0]->metrics->tps == 5.0);
    assert_int_equal(f.releases, 0);
    /* a clean stop gives the registration up, so a successor registers at once */
    assert_int_equal(f.deregisters, 1);
    assert_string_equal(f.deregister_instance, f.instance);
    assert_int_equal(f.lock_claimed, 1);
    assert_true(f.heartbeats_busy >= 1);
    assert_true(f.progress >= 1); /* lease renewals while running */
    teardown(&e, &f);
}

/* A job that would hang: stop without finishing hands it back at once; a finishing stop
 * hands it back when the grace period ends. */
static void test_stop_hands_back(void **state)
{
    (void)state;
    for (int finish = 0; finish < 2; finish++) {
        env e;
        exec_env(&e, "sleep 30; echo 'Tokens/second: 5'");
        fake f = {0};
        char url[128];
        nb_daemon_opts o;
        serve_fake(&f, url, sizeof url, 1, &e, "cpu:11", &o);
        o.grace_ms = 400;
        nb_daemon *d = start_daemon(&o);
        assert_int_equal(wait_for(&f, &f.leases_given, 1, 8000), 1);
        sleep_ms(200);
        double t0 = nb_now_ms();
        nb_daemon_stop(d, finish);
        double took = nb_now_ms() - t0;
        assert_true(took < 4000);
        if (finish)
            assert_true(took >= 350);
        assert_int_equal(f.n_results, 0);
        assert_int_equal(f.releases, 1);
        assert_string_equal(f.release_lease[0], "L1");
        assert_true(f.release_retry[0]); /* requeued for another worker */
        assert_non_null(strstr(f.release_reason[0], "shutting down"));
        teardown(&e, &f);
    }
}

static void test_cancel_from_coordinator(void **state)
{
    (void)state;
    env e;
    exec_env(&e, "sleep 30; echo 'Tokens/second: 5'");
    fake f = {0};
    f.cancel_on_progress = 1;
    char url[128];
    nb_daemon_opts o;
    serve_fake(&f, url, sizeof url, 1, &e, "cpu:12", &o);
    nb_daemon *d = start_daemon(&o);
    assert_int_equal(wait_for(&f, &f.releases, 1, 8000), 1);
    nb_daemon_stats st;
    nb_daemon_get_stats(d, &st);
    nb_daemon_stop(d, 1);
    assert_int_equal(st.cancelled, 1);
    assert_false(f.release_retry[0]); /* cancelled: not requeued */
    assert_non_null(strstr(f.release_reason[0], "cancelled"));
    assert_int_equal(f.n_results, 0);
    teardown(&e, &f);
}

static void test_device_claims(void **state)
{
    (void)state;
    env e;
    exec_env(&e, "echo 'Tokens/second: 5'");
    fake f = {0};
    char url[128];
    nb_daemon_opts o;
    serve_fake(&f, url, sizeof url, 0, &e, "cpu:3", &o);
    nb_daemon *a, *b;
    nb_err err;
    assert_int_equal(nb_daemon_start(&o, &a, &err), NB_OK);
    assert_int_equal(nb_daemon_start(&o, &b, &err), NB_EUNAVAIL);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
    if (!strstr(err.msg, "device cpu:3 is already claimed by") || !strstr(err.msg, pid))
        fail_msg("unexpected: %s", err.msg);
    /* another device is fine */
    o.device = "cpu:4";
    assert_int_equal(nb_daemon_start(&o, &b, &err), NB_OK);
    nb_daemon_stop(b, 0);
    nb_daemon_stop(a, 0);
    /* released: claimable again */
    o.device = "cpu:3";
    assert_int_equal(nb_daemon_start(&o, &a, &err), NB_OK);
    nb_daemon_stop(a, 0);
    /* bad ids */
    o.device = "gpu:0";
    assert_int_equal(nb_daemon_start(&o, &a, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "expected cpu:N or xrt:N"));
    nb_devlock *l;
    assert_int_equal(nb_devlock_acquire("cpu/../x", e.tmp, &l, &err), NB_EINVAL);
    /* a separate process holding the lock is named too */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "flock -n %s/device-cpu_5.lock -c 'echo 4242 > %s/device-cpu_5.lock; "
             "sleep 2' >/dev/null 2>&1 & sleep 0.5; echo started", e.tmp, e.tmp);
    tu_result r = tu_run(cmd);
    free(r.out);
    if (r.code == 0) {
        assert_int_equal(nb_devlock_acquire("cpu:5", e.tmp, &l, &err), NB_EUNAVAIL);
        assert_non_null(strstr(err.msg, "pid 4242"));
    }
    /* xrt without a device fails cleanly with the probe's message */
    char info[256];
    nb_err pe;
    if (nb_xrt_probe(0, info, sizeof info, &pe) != NB_OK) {
        o.device = "xrt:0";
        assert_int_equal(nb_daemon_start(&o, &a, &err), NB_EUNAVAIL);
        assert_non_null(strstr(err.msg, "--device xrt:0"));
    }
    teardown(&e, &f);
}

static void test_refused_registration(void **state)
{
    (void)state;
    env e;
    exec_env(&e, "echo 'Tokens/second: 5'");
    fake f = {0};
    f.refuse_register = 1;
    char url[128];
    nb_daemon_opts o;
    serve_fake(&f, url, sizeof url, 0, &e, "cpu:13", &o);
    nb_daemon *d;
    nb_err err;
    assert_int_equal(nb_daemon_start(&o, &d, &err), NB_OK);
    nb_code rc = nb_daemon_wait(d, 5000, &err);
    assert_int_equal(rc, NB_EUNAVAIL);
    assert_non_null(strstr(err.msg, "ALREADY_EXISTS"));
    nb_daemon_stop(d, 0);
    assert_int_equal(f.leases_given, 0);
    teardown(&e, &f);
}

/* The real engine: a verify (trace shipped in the lease, none on disk) and a run on one
 * resident deployment, set up once. */
static void test_real_cpu_jobs(void **state)
{
    (void)state;
    tu_require_model();
    env e;
    env_init(&e);
    snprintf(e.dep.model, sizeof e.dep.model, "instruct");
    snprintf(e.dep.backend, sizeof e.dep.backend, "cpu");
    e.dep.dtype = NB_DTYPE_BF16;
    snprintf(e.dep.name, sizeof e.dep.name, "smollm");
    fake f = {0};
    char url[128];
    fake_url(url, sizeof url);
    fake_start(&f, url);
    static Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    sel.model = (char *)"SmolLM2-135M-Instruct";
    Npubench__JobSpec *v = calloc(1, sizeof *v);
    npubench__job_spec__init(v);
    v->kind = NPUBENCH__JOB_KIND__VERIFY;
    v->selector = &sel;
    v->max_prompts = 1;
    v->n_tokens = 2;
    Npubench__JobSpec *r = calloc(1, sizeof *r);
    npubench__job_spec__init(r);
    r->kind = NPUBENCH__JOB_KIND__RUN;
    r->selector = &sel;
    r->n_tokens = 2;
    r->reps = 2;
    /* the coordinator's cached trace for the instruct prompt set */
    char tpath[1200];
    snprintf(tpath, sizeof tpath, "%s/verify/references/b179c9523d0e6a0f-f31be4262e898413.json",
             tu_env("NB_SRC", "."));
    char *tr;
    size_t tl;
    nb_err err;
    assert_int_equal(nb_file_read(tpath, (size_t)64 << 20, &tr, &tl, &err), NB_OK);
    f.trace[0] = (uint8_t *)tr;
    f.trace_len[0] = tl;
    /* explicit prompts (no trace for them: an error), then a reference named by path */
    static char *pp[] = {(char *)"A prompt nobody has traced"};
    Npubench__JobSpec *x = calloc(1, sizeof *x), *p = calloc(1, sizeof *p);
    npubench__job_spec__init(x);
    *p = *v;
    x->kind = NPUBENCH__JOB_KIND__VERIFY;
    x->selector = &sel;
    x->prompts = pp;
    x->n_prompts = 1;
    x->n_tokens = 2;
    static Npubench__KeyValue refkv = NPUBENCH__KEY_VALUE__INIT, *refp = &refkv;
    refkv.key = (char *)"reference";
    refkv.value = (char *)"/etc/passwd";
    p->params = &refp;
    p->n_params = 1;
    fake_push(&f, v);
    fake_push(&f, r);
    fake_push(&f, x);
    fake_push(&f, p);
    nb_daemon_opts o;
    daemon_opts(&o, &e, url, "cpu:14");
    o.refdir = e.tmp; /* no traces on disk: only the lease's */
    nb_daemon *d;
    assert_int_equal(nb_daemon_start(&o, &d, &err), NB_OK);
    int got = wait_for(&f, &f.n_results, 4, 240000);
    nb_executor_cache_stats cs;
    nb_executor_stats(nb_daemon_job_ctx(d), &cs);
    nb_daemon_stop(d, 1);
    assert_int_equal(got, 4);
    Npubench__JobResult *vr = f.results[0], *rr = f.results[1];
    /* the explicit prompts' file is gone with the job */
    assert_int_not_equal(f.results[2]->status, NPUBENCH__STATUS_CODE__OK);
    char ls[1300];
    snprintf(ls, sizeof ls, "ls '%s' | grep -c '^prompts-'", o.rundir ? o.rundir : e.tmp);
    tu_result lr = tu_run(ls);
    assert_int_equal(atoi(lr.out ? lr.out : "1"), 0);
    free(lr.out);
    /* a reference the client named by path is never opened */
    assert_int_equal(f.results[3]->status, NPUBENCH__STATUS_CODE__INVALID_ARGUMENT);
    assert_non_null(strstr(f.results[3]->status_message, "is not a trace name"));
    if (vr->status)
        fail_msg("verify: %s", vr->status_message);
    assert_int_equal(vr->outcome, NPUBENCH__OUTCOME__PASS);
    assert_int_equal(vr->n_gates, 1);
    assert_int_equal(vr->gates[0]->steps, 2);
    assert_non_null(strstr(vr->report_json, "\"records\""));
    assert_non_null(strstr(vr->report_md, "Top-k token check"));
    assert_string_equal(vr->environment->model_digest,
                        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
    assert_non_null(strstr(vr->log, "reference trace from the coordinator"));
    if (rr->status)
        fail_msg("run: %s", rr->status_message);
    assert_int_equal(rr->metrics->n_samples, 2);
    assert_int_equal(rr->metrics->warmup, 1);
    assert_true(rr->metrics->ttft_ms > 0 && rr->metrics->samples[1]->ttft_ms > 0);
    assert_true(rr->metrics->setup_ms > 0); /* reported, never inside a sample */
    assert_int_equal(cs.setups, 1);          /* resident between jobs */
    assert_int_equal(cs.resident, 1);
    assert_string_equal(f.dep_digest,
                        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
    teardown(&e, &f);
}

/* `npubench worker` as a process: a second one on the same device refuses naming the
 * first's pid (exit 3); SIGTERM makes the first exit 0. */
static void test_cli_worker(void **state)
{
    (void)state;
    char *tmp = tu_tmpdir();
    const char *bin = tu_env("NB_BIN", "npubench");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && (XDG_RUNTIME_DIR=%s %s worker --coordinator ipc://%s/none.ipc --board b "
             "--device cpu:21 --quiet >/dev/null 2>&1 & echo $! > a.pid; wait $!; echo $? > a.rc) "
             ">/dev/null 2>&1 &",
             tmp, tmp, bin, tmp);
    assert_int_equal(system(cmd), 0);
    char pidpath[1200], rcpath[1200];
    snprintf(pidpath, sizeof pidpath, "%s/a.pid", tmp);
    snprintf(rcpath, sizeof rcpath, "%s/a.rc", tmp);
    long pid = 0;
    for (int i = 0; i < 100 && !pid; i++) {
        FILE *f = fopen(pidpath, "r");
        if (f) {
            if (fscanf(f, "%ld", &pid) != 1)
                pid = 0;
            fclose(f);
        }
        if (!pid)
            sleep_ms(50);
    }
    assert_true(pid > 0);
    sleep_ms(800); /* let it claim the device */
    snprintf(cmd, sizeof cmd, "XDG_RUNTIME_DIR=%s %s worker --coordinator ipc://%s/none.ipc "
             "--board b --device cpu:21", tmp, bin, tmp);
    tu_result r = tu_run(cmd);
    char want[64];
    snprintf(want, sizeof want, "already claimed by pid %ld", pid);
    if (r.code != 3 || !strstr(r.out, want))
        fail_msg("second worker: exit %d, output: %s", r.code, r.out);
    free(r.out);
    assert_int_equal(kill((pid_t)pid, SIGTERM), 0);
    int rc = -1;
    for (int i = 0; i < 300 && rc < 0; i++) {
        FILE *f = fopen(rcpath, "r");
        if (f) {
            if (fscanf(f, "%d", &rc) != 1)
                rc = -1;
            fclose(f);
        }
        if (rc < 0)
            sleep_ms(50);
    }
    assert_int_equal(rc, 0);
    tu_rmrf(tmp);
}

/* What the probe read goes with each result (its environment's extras, stored as the run's
 * toolchain entries "driver" and "firmware"), so the dashboard can mark where a board's
 * driver or firmware changed; what it could not read is left out, not stored as a version. */
static void test_probe_in_result(void **s)
{
    (void)s;
    Npubench__Environment *e = NULL;
    nb_err err = {0};
    assert_int_equal(nb_runenv_pb_new(NULL, "strix-01", "npu4", &e, &err), NB_OK);
    size_t before = e->n_extra;
    nb_probe p;
    memset(&p, 0, sizeof p);
    snprintf(p.driver, sizeof p.driver, "2.20.0");
    snprintf(p.firmware, sizeof p.firmware, "unknown");
    assert_int_equal(nb_probe_env_add(&p, e), NB_OK);
    assert_int_equal(e->n_extra, before + 1);
    assert_string_equal(e->extra[before]->key, "driver");
    assert_string_equal(e->extra[before]->value, "2.20.0");
    snprintf(p.firmware, sizeof p.firmware, "1.5.2.380");
    assert_int_equal(nb_probe_env_add(&p, e), NB_OK);
    assert_int_equal(e->n_extra, before + 3);
    assert_string_equal(e->extra[before + 2]->key, "firmware");
    assert_string_equal(e->extra[before + 2]->value, "1.5.2.380");
    nb_jobpb_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_in_result),
        cmocka_unit_test(test_register_lease_result),
        cmocka_unit_test(test_result_retry_same_id),
        cmocka_unit_test(test_backoff_and_reregister),
        cmocka_unit_test(test_reregister_while_running),
        cmocka_unit_test(test_stop_finishes_current),
        cmocka_unit_test(test_stop_hands_back),
        cmocka_unit_test(test_cancel_from_coordinator),
        cmocka_unit_test(test_device_claims),
        cmocka_unit_test(test_refused_registration),
        cmocka_unit_test(test_real_cpu_jobs),
        cmocka_unit_test(test_cli_worker),
    };
    return tu_run_group(tests, NULL, NULL);
}
