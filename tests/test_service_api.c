/* test_service_api: the coordinator's client and worker APIs driven message by message —
 * validation, auth, queued reasons, device claims, leases (idempotent results, expiry,
 * requeue), cancel via heartbeat, shard merge, matrix fan-out, history and regression. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "nb_coord.h"
#include "nb_jobpb.h"
#include "nb_rpc.h"
#include "nb_runenv.h"
#include "nb_time.h"
#include "nb_verifypb.h"
#include "nb_wire.h"
#include "testutil.h"

static int seq;
static int loud; /* start(): the coordinator logs to stderr (tests that read its log) */
static const char *start_prompts_dir; /* start(): the coordinator's prompts directory */
static const char *start_db;          /* start(): this database instead of a fresh one */
static int64_t start_expire_ms;       /* start(): the coordinator's --expire-after */
static int64_t submit_expire_ms;      /* submit(): JobSpec.expire_after_ms */
static const char *submit_dtype;      /* submit(): the selector's dtype word (NULL: none) */
static int submit_dtype_id;           /* submit(): the selector's npubench.Dtype (0: none) */
static int64_t start_health_ms;       /* start(): health checks every (0 = off) */
static int64_t start_health_retry_ms; /* start(): quarantined boards re-checked every */
static int64_t start_lease_ms;        /* start(): lease and gone times (0 = 400 / 600 ms) */
static int start_sync_normal;         /* start(): synchronous=NORMAL (not fsync per commit) */
static int64_t start_log_window_ms;   /* start(): the log rate limiter's window */

typedef struct env {
    nb_coord *coord;
    nb_rpc_client *cli;
    char db[1200];
} env;

static void start(env *e, const char *secret, const char *client_secret)
{
    memset(e, 0, sizeof *e);
    char url[128];
    snprintf(url, sizeof url, "inproc://svc-api-%d-%d", (int)getpid(), ++seq);
    if (start_db)
        snprintf(e->db, sizeof e->db, "%s", start_db);
    else
        snprintf(e->db, sizeof e->db, "%s/db-%d.sqlite", tu_group_tmp(), seq);
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    o.listen_url = url;
    o.db_path = e->db;
    o.secret = secret;
    o.prompts_dir = start_prompts_dir;
    o.heartbeat_ms = 50;
    o.lease_ms = start_lease_ms ? start_lease_ms : 400;
    o.stale_ms = 300;
    o.gone_ms = start_lease_ms ? start_lease_ms : 600;
    o.quiet = !loud;
    o.expire_after_ms = start_expire_ms;
    o.health_interval_ms = start_health_ms;
    o.health_retry_ms = start_health_retry_ms;
    o.health_errors = 2;
    o.sync_normal = start_sync_normal;
    o.log_window_ms = start_log_window_ms;
    nb_err err = {0};
    if (nb_coord_start(&o, &e->coord, &err))
        fail_msg("coordinator: %s", err.msg);
    nb_rpc_opts co;
    memset(&co, 0, sizeof co);
    co.secret = client_secret;
    co.timeout_ms = 5000;
    assert_int_equal(nb_rpc_client_open(nb_coord_url(e->coord), &co, &e->cli, &err), NB_OK);
}

/* start() with 60 s leases and liveness, for tests whose hand-driven workers neither
 * heartbeat nor hurry: at 400 / 600 ms a slow build (ASan, -O0 coverage, a loaded host) lets
 * a lease lapse or a worker go between two of the test's calls. Leases and liveness are the
 * subject of other tests, which keep the short times. */
static void start_patient(env *e)
{
    start_lease_ms = 60 * 1000;
    start(e, NULL, NULL);
    start_lease_ms = 0;
}

static void stop(env *e)
{
    nb_rpc_client_close(e->cli);
    nb_coord_stop(e->coord);
}

/* Calls method under request id (0: a fresh one); returns the gRPC status; *msg
 * (optional) gets the message. */
static int call_id(env *e, uint64_t id, const char *method, const void *req,
                   const ProtobufCMessageDescriptor *desc, void *resp, char *msg, size_t cap)
{
    uint8_t *pb;
    size_t len;
    nb_err err = {0};
    assert_int_equal(nb_wire_pack(req, &pb, &len, &err), NB_OK);
    int status = -1;
    char *m = NULL;
    uint8_t *out = NULL;
    size_t olen = 0;
    if (id)
        nb_rpc_call_id(e->cli, id, method, pb, len, 5000, &status, &m, &out, &olen, &err);
    else
        nb_rpc_call(e->cli, method, pb, len, 5000, &status, &m, &out, &olen, &err);
    free(pb);
    if (msg)
        snprintf(msg, cap, "%s", m ? m : err.msg);
    free(m);
    if (resp) {
        *(void **)resp = NULL;
        if (status == 0)
            assert_int_equal(nb_wire_unpack(desc, out, olen, 0, resp, &err), NB_OK);
    }
    free(out);
    return status;
}

static int call(env *e, const char *method, const void *req,
                const ProtobufCMessageDescriptor *desc, void *resp, char *msg, size_t cap)
{
    return call_id(e, 0, method, req, desc, resp, msg, cap);
}

static int64_t db_count(env *e, const char *sql_fmt, long long arg)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open_v2(e->db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    char sql[512];
    snprintf(sql, sizeof sql, sql_fmt, arg);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    int64_t n = -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

/* ---- worker side by hand ---- */

/* The instance each registered worker id was registered with: the worker methods carry it. */
static struct {
    char id[128], instance[64];
} insts[64];
static int n_insts;
static int reg_holds_lock; /* reg() registers as a process that holds the device lock */
static const char *reg_cpu_model = "Test CPU"; /* reg()'s probe: this CPU, driver 2.19.0-test */
static const char *reg_dtype = "bf16"; /* reg()'s deployment: this dtype word ... */
static int reg_dtype_id;               /* ... and this npubench.Dtype (0: none, as before) */

static const char *instance_of(const char *worker)
{
    for (int i = n_insts - 1; i >= 0; i--)
        if (!strcmp(insts[i].id, worker))
            return insts[i].instance;
    return "";
}

/* Registers a worker serving SmolLM2 on the CPU; no_prompt_range: its deployment cannot
 * run a prompt range (an exec one driving mlir-air's verify runner). */
static char *reg_dep(env *e, const char *board, const char *device, const char *instance,
                     const char *tag, int no_prompt_range, int *status)
{
    Npubench__Deployment d = NPUBENCH__DEPLOYMENT__INIT, *dp = &d;
    d.no_prompt_range = no_prompt_range;
    d.model = "SmolLM2-135M-Instruct";
    d.backend = "cpu";
    d.dtype = (char *)reg_dtype;
    d.dtype_id = (Npubench__Dtype)reg_dtype_id;
    d.digest = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
    Npubench__WorkerInfo info = NPUBENCH__WORKER_INFO__INIT;
    info.board_name = (char *)board;
    info.board_type = "cpu";
    info.host = "testhost";
    info.device_id = (char *)device;
    info.instance_id = (char *)instance;
    info.holds_device_lock = reg_holds_lock;
    info.driver_version = "2.19.0-test";
    info.cpu_model = (char *)reg_cpu_model;
    info.version = "test";
    char *backends[] = {"cpu"};
    info.backends = backends;
    info.n_backends = 1;
    info.deployments = &dp;
    info.n_deployments = 1;
    char *tags[] = {(char *)tag};
    if (tag) {
        info.tags = tags;
        info.n_tags = 1;
    }
    Npubench__RegisterRequest r = NPUBENCH__REGISTER_REQUEST__INIT;
    r.info = &info;
    Npubench__RegisterResponse *resp;
    int st = call(e, "npubench.Worker/Register", &r, &npubench__register_response__descriptor,
                  &resp, NULL, 0);
    if (status)
        *status = st;
    if (st)
        return NULL;
    char *id = strdup(resp->worker_id);
    nb_wire_free(resp);
    if (n_insts < 64) {
        snprintf(insts[n_insts].id, sizeof insts[n_insts].id, "%s", id);
        snprintf(insts[n_insts].instance, sizeof insts[n_insts].instance, "%s",
                 instance ? instance : "");
        n_insts++;
    }
    return id;
}

static char *reg(env *e, const char *board, const char *device, const char *instance,
                 const char *tag, int *status)
{
    return reg_dep(e, board, device, instance, tag, 0, status);
}

static Npubench__Lease *lease(env *e, const char *worker, int wait_ms)
{
    Npubench__LeaseJobRequest r = NPUBENCH__LEASE_JOB_REQUEST__INIT;
    r.worker_id = (char *)worker;
    r.instance_id = (char *)instance_of(worker);
    r.wait_ms = wait_ms;
    Npubench__LeaseJobResponse *resp;
    assert_int_equal(call(e, "npubench.Worker/LeaseJob", &r,
                          &npubench__lease_job_response__descriptor, &resp, NULL, 0),
                     0);
    Npubench__Lease *l = resp->lease;
    resp->lease = NULL;
    nb_wire_free(resp);
    return l;
}

static Npubench__HeartbeatResponse *heartbeat(env *e, const char *worker, int64_t job,
                                              const char *lease_id)
{
    Npubench__Heartbeat hb = NPUBENCH__HEARTBEAT__INIT;
    hb.worker_id = (char *)worker;
    hb.instance_id = (char *)instance_of(worker);
    hb.current_job_id = job;
    hb.lease_id = (char *)(lease_id ? lease_id : "");
    Npubench__HeartbeatResponse *resp;
    assert_int_equal(call(e, "npubench.Worker/Heartbeat", &hb,
                          &npubench__heartbeat_response__descriptor, &resp, NULL, 0),
                     0);
    return resp;
}

static Npubench__Environment *test_env(const char *board)
{
    Npubench__Environment *env;
    nb_err err;
    assert_int_equal(nb_runenv_pb_new(NULL, board, "cpu", &env, &err), NB_OK);
    env->model = nb_jobpb_strdup("SmolLM2-135M-Instruct");
    env->backend = nb_jobpb_strdup("cpu");
    env->dtype = nb_jobpb_strdup("bf16");
    env->model_digest =
        nb_jobpb_strdup("b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
    return env;
}

/* A RUN result whose samples have the given tokens/s (+ a little spread). */
static Npubench__JobResult *run_result(int64_t job, const char *board, double tps)
{
    Npubench__JobResult *r = nb_jobpb_result_new();
    r->job_id = job;
    r->outcome = NPUBENCH__OUTCOME__PASS;
    r->environment = test_env(board);
    Npubench__Metrics *m = malloc(sizeof *m);
    npubench__metrics__init(m);
    m->n_samples = 5;
    m->samples = calloc(5, sizeof *m->samples);
    for (int i = 0; i < 5; i++) {
        Npubench__Sample *s = malloc(sizeof *s);
        npubench__sample__init(s);
        s->rep = i;
        s->tps = tps * (1 + 0.002 * i);
        s->ttft_ms = 10 + 0.01 * i;
        s->decode_ms_per_token = 1000.0 / s->tps;
        s->prompt_tokens = 10;
        s->generated_tokens = 20;
        s->tpot_ms = s->decode_ms_per_token;
        s->latency_ms = s->ttft_ms + 19 * s->decode_ms_per_token;
        m->samples[i] = s;
    }
    m->tps = tps;
    m->ttft_ms = 10;
    m->decode_ms_per_token = 1000.0 / tps;
    m->tpot_ms = m->decode_ms_per_token;
    m->prompt_tokens = 10;
    m->generated_tokens = 20;
    r->metrics = m;
    return r;
}

/* A verify result over prompts [first, last) of 8; prompt `bad` diverges. */
static Npubench__JobResult *verify_result(int64_t job, int first, int last, int bad)
{
    nb_verify_result v;
    memset(&v, 0, sizeof v);
    v.n = last - first;
    v.recs = calloc((size_t)v.n, sizeof *v.recs);
    v.k = 5;
    v.n_tokens = 4;
    snprintf(v.prompts_path, sizeof v.prompts_path, "verify/prompts/instruct.txt");
    snprintf(v.prompts_sha256, sizeof v.prompts_sha256, "%064d", 0);
    snprintf(v.trace_path, sizeof v.trace_path, "verify/references/test.json");
    for (int i = 0; i < v.n; i++) {
        nb_verify_record *rc = &v.recs[i];
        rc->index = first + i;
        char p[32];
        snprintf(p, sizeof p, "prompt %d", first + i);
        rc->prompt = strdup(p);
        rc->n_prompt_ids = 3;
        rc->n_steps = 4;
        rc->dev = calloc(4, sizeof *rc->dev);
        rc->ref = calloc(4, sizeof *rc->ref);
        for (int s = 0; s < 4; s++) {
            rc->ref[s].token = 100 + s;
            rc->dev[s].token = (first + i == bad && s == 2) ? 999 : 100 + s;
            for (int t = 0; t < NB_GATE_K_MAX; t++) {
                rc->ref[s].topk[t] = rc->ref[s].token + t * 7;
                rc->dev[s].topk[t] = rc->dev[s].token + t * 7;
            }
        }
        nb_gate_check(rc->dev, 4, rc->ref, 4, 5, &rc->gate);
        rc->dev_token_text = strdup("");
        rc->ref_token_text = strdup("");
        rc->agreed_text = strdup("agreed");
        rc->dev_text = strdup("dev");
        rc->ref_text = strdup("ref");
    }
    v.n_pass = v.n_fail = 0;
    for (int i = 0; i < v.n; i++)
        v.recs[i].gate.status == NB_GATE_PASS ? v.n_pass++ : v.n_fail++;
    v.status = v.n_fail ? NB_GATE_FAIL : NB_GATE_PASS;
    Npubench__JobResult *r = nb_jobpb_result_new();
    nb_err err;
    assert_int_equal(nb_verifypb_verify_to_pb(&v, r, &err), NB_OK);
    nb_verify_result_free(&v);
    r->job_id = job;
    r->environment = test_env("b1");
    return r;
}

/* The outcome word the last accepted ReportResult answered with. */
static char reported_outcome[16];

/* ReportResult under request id (0: a fresh one, as every resend of a worker is not). */
static int report_id(env *e, uint64_t id, const char *worker, const Npubench__Lease *l,
                     Npubench__JobResult *res, int *accepted)
{
    Npubench__ReportResultRequest r = NPUBENCH__REPORT_RESULT_REQUEST__INIT;
    r.worker_id = (char *)worker;
    r.instance_id = (char *)instance_of(worker);
    r.lease_id = l->lease_id;
    r.result = res;
    Npubench__ReportResultResponse *resp;
    int st = call_id(e, id, "npubench.Worker/ReportResult", &r,
                     &npubench__report_result_response__descriptor, &resp, NULL, 0);
    if (!st) {
        *accepted = resp->accepted;
        snprintf(reported_outcome, sizeof reported_outcome, "%s", resp->outcome);
        nb_wire_free(resp);
    }
    return st;
}

static int report(env *e, const char *worker, const Npubench__Lease *l,
                  Npubench__JobResult *res, int *accepted)
{
    return report_id(e, 0, worker, l, res, accepted);
}

/* ---- client side ---- */

/* SubmitJob under request id key (NULL: a fresh one); *dup (optional) gets the reply's
 * duplicate flag. */
static int submit_as(env *e, const char *key, int *dup, int kind, const char *model,
                     int n_tokens, int k, int shards, int matrix, const char *tag, int64_t *ids,
                     size_t *n, char *msg, size_t cap)
{
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    spec.kind = kind;
    spec.selector = &sel;
    sel.model = (char *)model;
    if (submit_dtype)
        sel.dtype = (char *)submit_dtype;
    sel.dtype_id = (Npubench__Dtype)submit_dtype_id;
    spec.n_tokens = n_tokens;
    spec.k = k;
    spec.matrix = matrix;
    spec.expire_after_ms = submit_expire_ms;
    char *tags[] = {(char *)tag};
    if (tag) {
        sel.tags = tags;
        sel.n_tags = 1;
    }
    Npubench__SubmitJobRequest r = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    char fresh[64];
    snprintf(fresh, sizeof fresh, "t-%d-%ld", ++seq, (long)nb_wall_ms());
    r.request_id = (char *)(key ? key : fresh);
    r.spec = &spec;
    r.shards = shards;
    Npubench__SubmitJobResponse *resp;
    int st = call(e, "npubench.Client/SubmitJob", &r, &npubench__submit_job_response__descriptor,
                  &resp, msg, cap);
    if (!st) {
        *n = resp->n_job_ids;
        memcpy(ids, resp->job_ids, resp->n_job_ids * sizeof *ids);
        if (dup)
            *dup = resp->duplicate;
        nb_wire_free(resp);
    }
    return st;
}

static int submit(env *e, int kind, const char *model, int n_tokens, int k, int shards,
                  int matrix, const char *tag, int64_t *ids, size_t *n, char *msg, size_t cap)
{
    return submit_as(e, NULL, NULL, kind, model, n_tokens, k, shards, matrix, tag, ids, n, msg,
                     cap);
}

static Npubench__Job *get_job(env *e, int64_t id)
{
    Npubench__GetJobRequest r = NPUBENCH__GET_JOB_REQUEST__INIT;
    r.job_id = id;
    Npubench__GetJobResponse *resp;
    assert_int_equal(call(e, "npubench.Client/GetJob", &r, &npubench__get_job_response__descriptor,
                          &resp, NULL, 0),
                     0);
    Npubench__Job *j = resp->job;
    resp->job = NULL;
    nb_wire_free(resp);
    return j;
}

/* Whether job id is in state with a queued reason holding needle. */
static int job_queued_for(env *e, int64_t id, const char *needle)
{
    Npubench__Job *j = get_job(e, id);
    int ok = j->state == NPUBENCH__JOB_STATE__JOB_QUEUED && strstr(j->queued_reason, needle);
    nb_wire_free(j);
    return ok;
}

static int job_state(env *e, int64_t id)
{
    Npubench__Job *j = get_job(e, id);
    int st = j->state;
    nb_wire_free(j);
    return st;
}

/* ------------------------------------------------------------------ tests */

static void test_invalid_requests(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    char msg[1024];
    int64_t ids[8];
    size_t n;
    /* unknown method */
    int st = -1;
    char *m = NULL;
    nb_err err;
    nb_rpc_call(e.cli, "npubench.Client/Frobnicate", "", 0, 2000, &st, &m, NULL, NULL, &err);
    assert_int_equal(st, NB_RPC_UNIMPLEMENTED);
    free(m);
    /* malformed protobuf */
    static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    nb_rpc_call(e.cli, "npubench.Client/SubmitJob", junk, sizeof junk, 2000, &st, &m, NULL, NULL,
                &err);
    assert_int_equal(st, NB_RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(m, "SubmitJobRequest"));
    free(m);
    /* oversize */
    size_t big = (size_t)17 << 20;
    uint8_t *b = calloc(1, big);
    nb_rpc_call(e.cli, "npubench.Client/SubmitJob", b, big, 5000, &st, &m, NULL, NULL, &err);
    free(b);
    assert_int_equal(st, NB_RPC_RESOURCE_EXHAUSTED);
    free(m);
    /* out-of-range fields name the field */
    st = submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 5000, 0, 0, 0, NULL, ids, &n, msg,
                sizeof msg);
    assert_int_equal(st, NB_RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "n_tokens"));
    st = submit(&e, NPUBENCH__JOB_KIND__VERIFY, "instruct", 0, 99, 0, 0, NULL, ids, &n, msg,
                sizeof msg);
    assert_int_equal(st, NB_RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "k"));
    st = submit(&e, 0, "instruct", 0, 0, 0, 0, NULL, ids, &n, msg, sizeof msg);
    assert_int_equal(st, NB_RPC_INVALID_ARGUMENT);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 0);
    stop(&e);
}

static void test_auth(void **s)
{
    (void)s;
    env e;
    start(&e, "s3cret", "wrong");
    int64_t ids[8];
    size_t n;
    char msg[512];
    int st = submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, ids, &n, msg,
                    sizeof msg);
    assert_int_equal(st, NB_RPC_UNAUTHENTICATED);
    int rs;
    char *id = reg(&e, "b1", "cpu:0", "i1", NULL, &rs);
    assert_null(id);
    assert_int_equal(rs, NB_RPC_UNAUTHENTICATED);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 0);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM workers WHERE %lld = 0", 0), 0);
    stop(&e);
    /* the right secret works */
    start(&e, "s3cret", "s3cret");
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    stop(&e);
}

/* ---- the trust boundary (issue 10) ---- */

/* Registers worker b1 on cpu:0 as inst-a (*worker), submits a RUN and leases it. */
static Npubench__Lease *run_leased(env *e, char **worker)
{
    int st;
    *worker = reg(e, "b1", "cpu:0", "inst-a", NULL, &st);
    assert_non_null(*worker);
    int64_t ids[8];
    size_t n;
    char msg[512];
    assert_int_equal(submit(e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    Npubench__Lease *l = lease(e, *worker, 2000);
    assert_non_null(l);
    assert_int_equal(l->job_id, ids[0]);
    return l;
}


static nb_rpc_client *open_as(env *e, const char *key)
{
    nb_rpc_opts co;
    memset(&co, 0, sizeof co);
    co.secret = key;
    co.timeout_ms = 5000;
    nb_rpc_client *cli;
    nb_err err = {0};
    assert_int_equal(nb_rpc_client_open(nb_coord_url(e->coord), &co, &cli, &err), NB_OK);
    return cli;
}

/* Calls with another key than e's own client. */
static int call_as(env *e, nb_rpc_client *cli, const char *method, const void *req, char *msg,
                   size_t cap)
{
    nb_rpc_client *own = e->cli;
    e->cli = cli;
    int st = call(e, method, req, NULL, NULL, msg, cap);
    e->cli = own;
    return st;
}

/* Workers, clients and admins hold different keys, and each method takes its role's only. */
static void test_roles(void **s)
{
    (void)s;
    env e;
    memset(&e, 0, sizeof e);
    char url[128];
    snprintf(url, sizeof url, "inproc://svc-api-roles-%d", (int)getpid());
    snprintf(e.db, sizeof e.db, "%s/roles.sqlite", tu_group_tmp());
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    o.listen_url = url;
    o.db_path = e.db;
    o.quiet = 1;
    o.secret = "client-key";
    o.worker_secret = "client-key";
    nb_err err = {0};
    assert_int_equal(nb_coord_start(&o, &e.coord, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "the client key and the worker key are the same"));
    o.worker_secret = "worker-key";
    o.admin_secret = "admin-key";
    assert_int_equal(nb_coord_start(&o, &e.coord, &err), NB_OK);
    nb_rpc_client *client = open_as(&e, "client-key"), *worker = open_as(&e, "worker-key"),
                  *admin = open_as(&e, "admin-key");
    char msg[512];
    /* a client key on a worker method */
    e.cli = client;
    int st;
    assert_null(reg(&e, "b1", "cpu:0", "inst-a", NULL, &st));
    assert_int_equal(st, NB_RPC_PERMISSION_DENIED);
    Npubench__ReportResultRequest rr = NPUBENCH__REPORT_RESULT_REQUEST__INIT;
    assert_int_equal(call_as(&e, client, "npubench.Worker/ReportResult", &rr, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "needs the worker credential; the request was signed with the "
                                "client key"));
    /* the admin key is no worker key either */
    assert_int_equal(call_as(&e, admin, "npubench.Worker/ReportResult", &rr, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    /* a worker key cannot submit */
    int64_t ids[8];
    size_t n;
    e.cli = worker;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "needs the client credential"));
    char *w = reg(&e, "b1", "cpu:0", "inst-a", NULL, &st);
    assert_non_null(w);
    /* reference sets are the admin's */
    Npubench__SetReferenceRequest sr = NPUBENCH__SET_REFERENCE_REQUEST__INIT;
    sr.job_id = 424242;
    assert_int_equal(call_as(&e, client, "npubench.Client/SetReference", &sr, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "needs the admin credential"));
    assert_int_equal(call_as(&e, admin, "npubench.Client/SetReference", &sr, msg, sizeof msg),
                     NB_RPC_NOT_FOUND);
    e.cli = client;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     NB_RPC_OK);
    /* drain is the admin's: no leases while on, the queued job waits */
    Npubench__DrainRequest dr = NPUBENCH__DRAIN_REQUEST__INIT;
    dr.drain = 1;
    assert_int_equal(call_as(&e, client, "npubench.Client/Drain", &dr, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_int_equal(call_as(&e, admin, "npubench.Client/Drain", &dr, msg, sizeof msg),
                     NB_RPC_OK);
    e.cli = worker;
    assert_null(lease(&e, w, 0));
    dr.drain = 0;
    assert_int_equal(call_as(&e, admin, "npubench.Client/Drain", &dr, msg, sizeof msg),
                     NB_RPC_OK);
    Npubench__Lease *l = lease(&e, w, 2000);
    assert_non_null(l);
    assert_int_equal(l->job_id, ids[0]);
    nb_wire_free(l);
    e.cli = client;
    free(w);
    nb_rpc_client_close(worker);
    nb_rpc_client_close(admin);
    stop(&e);
}

/* A coordinator (db tmp/NAME.sqlite, e->cli unset) with a client, a worker and an admin key
 * in *o, and n named client keys; o keeps pointing at static strings. */
static void start_three_keys(env *e, nb_coord_opts *o, const char *name,
                             const char *const *client_names, const char *const *client_keys,
                             int n)
{
    memset(e, 0, sizeof *e);
    snprintf(e->db, sizeof e->db, "%s/%s.sqlite", tu_group_tmp(), name);
    static char url[128];
    snprintf(url, sizeof url, "inproc://svc-api-%s", name);
    memset(o, 0, sizeof *o);
    o->listen_url = url;
    o->db_path = e->db;
    o->quiet = 1;
    o->secret = "client-key-0123456789";
    o->worker_secret = "worker-key-0123456789";
    o->admin_secret = "admin-key-0123456789";
    o->client_names = client_names;
    o->client_keys = client_keys;
    o->n_client_keys = n;
    nb_err err = {0};
    if (nb_coord_start(o, &e->coord, &err))
        fail_msg("coordinator: %s", err.msg);
}

/* Priority above the client limit (100) needs the admin credential: the client key is
 * refused naming the limit, the admin key and priorities up to the limit are taken. */
static void test_priority_above_limit_needs_admin(void **s)
{
    (void)s;
    env e;
    nb_coord_opts o;
    start_three_keys(&e, &o, "priority", NULL, NULL, 0);
    nb_rpc_client *client = open_as(&e, o.secret), *admin = open_as(&e, o.admin_secret);
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    spec.n_tokens = 8;
    Npubench__SubmitJobRequest r = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    r.spec = &spec;
    char msg[512];
    spec.priority = 101;
    assert_int_equal(call_as(&e, client, "npubench.Client/SubmitJob", &r, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "JobSpec.priority 101: above 100 needs the admin credential"));
    assert_int_equal(call_as(&e, admin, "npubench.Client/SubmitJob", &r, msg, sizeof msg),
                     NB_RPC_OK);
    spec.priority = 100;
    assert_int_equal(call_as(&e, client, "npubench.Client/SubmitJob", &r, msg, sizeof msg),
                     NB_RPC_OK);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 2);
    nb_rpc_client_close(client);
    nb_rpc_client_close(admin);
    nb_coord_stop(e.coord);
}

/* Client identities own their jobs: with named client keys (alice, bob), a job alice
 * submitted is cancelled by alice or by the admin key, not by bob (PERMISSION_DENIED naming
 * the owner); a job of the shared client key stays anyone's. Fair share: bob's one job is
 * leased before alice's second. */
static void test_client_identities_own_jobs(void **s)
{
    (void)s;
    env e;
    nb_coord_opts o;
    const char *names[] = {"alice", "bob"};
    const char *keys[] = {"alice-key-0123456789", "bob-key-0123456789ab"};
    start_three_keys(&e, &o, "owners", names, keys, 2);
    nb_rpc_client *alice = open_as(&e, keys[0]), *bob = open_as(&e, keys[1]),
                  *admin = open_as(&e, o.admin_secret), *shared = open_as(&e, o.secret);
    int64_t ids[4];
    size_t n;
    char msg[512];
    e.cli = alice;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids + 1,
                            &n, msg, sizeof msg),
                     0);
    e.cli = shared;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids + 2,
                            &n, msg, sizeof msg),
                     0);
    Npubench__CancelJobRequest cr = NPUBENCH__CANCEL_JOB_REQUEST__INIT;
    cr.job_id = ids[0];
    assert_int_equal(call_as(&e, bob, "npubench.Client/CancelJob", &cr, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "belongs to client alice; cancelling another client's job needs "
                                "the admin credential"));
    assert_int_equal(call_as(&e, shared, "npubench.Client/CancelJob", &cr, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_int_equal(call_as(&e, alice, "npubench.Client/CancelJob", &cr, msg, sizeof msg),
                     NB_RPC_OK);
    cr.job_id = ids[1];
    assert_int_equal(call_as(&e, admin, "npubench.Client/CancelJob", &cr, msg, sizeof msg),
                     NB_RPC_OK);
    cr.job_id = ids[2]; /* the shared key's job: anyone's */
    assert_int_equal(call_as(&e, bob, "npubench.Client/CancelJob", &cr, msg, sizeof msg),
                     NB_RPC_OK);
    /* fair share: alice queues 6 jobs, then bob 1; the worker's second lease is bob's, not
     * alice's second */
    int64_t fa[6], fb;
    e.cli = alice;
    for (int i = 0; i < 6; i++)
        assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL,
                                fa + i, &n, msg, sizeof msg),
                         0);
    e.cli = bob;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, &fb, &n,
                            msg, sizeof msg),
                     0);
    nb_rpc_client *worker = open_as(&e, o.worker_secret);
    e.cli = worker;
    int st;
    char *w = reg(&e, "b1", "cpu:0", "inst-fair", NULL, &st);
    assert_non_null(w);
    int64_t order[3];
    for (int i = 0; i < 3; i++) {
        Npubench__Lease *l = lease(&e, w, 2000);
        assert_non_null(l);
        order[i] = l->job_id;
        Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
        int acc = 0;
        assert_int_equal(report(&e, w, l, res, &acc), 0);
        nb_jobpb_free(res);
        nb_wire_free(l);
    }
    assert_int_equal(order[0], fa[0]);
    assert_int_equal(order[1], fb);
    assert_int_equal(order[2], fa[1]);
    free(w);
    nb_rpc_client_close(worker);
    e.cli = NULL;
    nb_rpc_client_close(alice);
    nb_rpc_client_close(bob);
    nb_rpc_client_close(admin);
    nb_rpc_client_close(shared);
    nb_coord_stop(e.coord);
}

/* A second secret holder knows a worker's id and (it used to leak) its lease: it can
 * neither report, release nor renew for it, and ListWorkers shows no lease. */
static void test_forged_result_refused(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    char *a;
    Npubench__Lease *l = run_leased(&e, &a);
    int st;
    char *b = reg(&e, "b2", "cpu:1", "inst-b", NULL, &st);
    int64_t ids[8];
    size_t n;
    char msg[512];
    nb_wire_free(heartbeat(&e, a, l->job_id, l->lease_id));
    /* no lease id and no instance id leave the coordinator */
    Npubench__ListWorkersRequest lw = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
    Npubench__ListWorkersResponse *wr;
    assert_int_equal(call(&e, "npubench.Client/ListWorkers", &lw,
                          &npubench__list_workers_response__descriptor, &wr, NULL, 0),
                     0);
    assert_int_equal(wr->n_workers, 2);
    for (size_t i = 0; i < wr->n_workers; i++) {
        assert_string_equal(wr->workers[i]->lease_id, "");
        assert_string_equal(wr->workers[i]->info->instance_id, "");
    }
    nb_wire_free(wr);
    /* a's id and lease, b's process */
    Npubench__JobResult *res = run_result(l->job_id, "b1", 99999);
    Npubench__ReportResultRequest r = NPUBENCH__REPORT_RESULT_REQUEST__INIT;
    r.worker_id = a;
    r.instance_id = "inst-b";
    r.lease_id = l->lease_id;
    r.result = res;
    assert_int_equal(call(&e, "npubench.Worker/ReportResult", &r, NULL, NULL, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "registered by another process"));
    /* b's own id with a's lease */
    r.worker_id = b;
    assert_int_equal(call(&e, "npubench.Worker/ReportResult", &r, NULL, NULL, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "is leased to another worker"));
    /* a made-up lease is an error, not an OK */
    r.worker_id = a;
    r.instance_id = "inst-a";
    r.lease_id = "0123456789abcdef0123456789abcdef";
    assert_int_equal(call(&e, "npubench.Worker/ReportResult", &r, NULL, NULL, msg, sizeof msg),
                     NB_RPC_FAILED_PRECONDITION);
    Npubench__ReleaseJobRequest rel = NPUBENCH__RELEASE_JOB_REQUEST__INIT;
    rel.worker_id = b;
    rel.instance_id = "inst-b";
    rel.job_id = l->job_id;
    rel.lease_id = l->lease_id;
    assert_int_equal(call(&e, "npubench.Worker/ReleaseJob", &rel, NULL, NULL, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    rel.worker_id = a;
    rel.instance_id = "inst-a";
    rel.lease_id = "0123456789abcdef0123456789abcdef";
    assert_int_equal(call(&e, "npubench.Worker/ReleaseJob", &rel, NULL, NULL, msg, sizeof msg),
                     NB_RPC_FAILED_PRECONDITION);
    Npubench__ReportProgressRequest pr = NPUBENCH__REPORT_PROGRESS_REQUEST__INIT;
    pr.worker_id = b;
    pr.instance_id = "inst-b";
    pr.job_id = l->job_id;
    pr.lease_id = l->lease_id;
    assert_int_equal(call(&e, "npubench.Worker/ReportProgress", &pr, NULL, NULL, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", l->job_id),
                     0);
    /* one slot per worker: a second lease while a holds one is refused */
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    Npubench__LeaseJobRequest lr = NPUBENCH__LEASE_JOB_REQUEST__INIT;
    lr.worker_id = a;
    lr.instance_id = "inst-a";
    assert_int_equal(call(&e, "npubench.Worker/LeaseJob", &lr, NULL, NULL, msg, sizeof msg),
                     NB_RPC_FAILED_PRECONDITION);
    assert_non_null(strstr(msg, "a worker has 1 slot"));
    /* the holder's own report goes through, with its own numbers */
    nb_jobpb_free(res);
    res = run_result(l->job_id, "b1", 100);
    int acc = 0;
    assert_int_equal(report(&e, a, l, res, &acc), 0);
    assert_true(acc);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM samples WHERE tps > 1000 AND %lld = 0",
                              0),
                     0);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(a);
    free(b);
    stop(&e);
}

/* A restarted worker is accepted at once: after a clean stop (Deregister) and after
 * kill -9 (the new process holds the device lock, so the old one is dead). */
static void test_restart_accepted_at_once(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    int st;
    char *w = reg(&e, "b1", "cpu:0", "inst-a", NULL, &st);
    assert_non_null(w);
    /* kill -9: nothing deregistered, the heartbeat is fresh */
    reg_holds_lock = 1;
    char *w2 = reg(&e, "b1", "cpu:0", "inst-b", NULL, &st);
    reg_holds_lock = 0;
    assert_int_equal(st, NB_RPC_OK);
    assert_string_equal(w2, w);
    /* the old process can no longer act for the id */
    Npubench__Heartbeat hb = NPUBENCH__HEARTBEAT__INIT;
    hb.worker_id = w;
    hb.instance_id = "inst-a";
    char msg[512];
    assert_int_equal(call(&e, "npubench.Worker/Heartbeat", &hb, NULL, NULL, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    /* SIGTERM: the clean stop deregisters, and even a lock-less successor is accepted */
    Npubench__DeregisterRequest dr = NPUBENCH__DEREGISTER_REQUEST__INIT;
    dr.worker_id = w;
    dr.instance_id = "inst-b";
    assert_int_equal(call(&e, "npubench.Worker/Deregister", &dr, NULL, NULL, msg, sizeof msg),
                     NB_RPC_OK);
    /* deregistered is gone at once, not after the sweep's gone-ms (600 ms here): `workers`
     * no longer lists it, `workers --all` lists it gone */
    for (int all = 0; all < 2; all++) {
        Npubench__ListWorkersRequest lr = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
        lr.include_dead = all;
        Npubench__ListWorkersResponse *lw;
        assert_int_equal(call(&e, "npubench.Client/ListWorkers", &lr,
                              &npubench__list_workers_response__descriptor, &lw, NULL, 0),
                         0);
        assert_int_equal(lw->n_workers, all);
        if (all) {
            assert_string_equal(lw->workers[0]->state, "gone");
            assert_false(lw->workers[0]->alive);
        }
        nb_wire_free(lw);
    }
    char *w3 = reg(&e, "b1", "cpu:0", "inst-c", NULL, &st);
    assert_int_equal(st, NB_RPC_OK);
    free(w);
    free(w2);
    free(w3);
    stop(&e);
}

/* History rows carry the coordinator's clock, not the worker's (+60 s here), and keep the
 * worker's offset; a submit without request id gets one, so its replay finds its job. */
static void test_coordinator_clock_and_submit_ids(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    int st;
    char *w = reg(&e, "b1", "cpu:0", "inst-a", NULL, &st);
    int64_t ids[1];
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    spec.n_tokens = 8;
    Npubench__SubmitJobRequest sr = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    sr.spec = &spec;
    uint8_t *pb, *out = NULL;
    size_t len, olen = 0;
    nb_err err = {0};
    assert_int_equal(nb_wire_pack(&sr, &pb, &len, &err), NB_OK);
    assert_int_equal(nb_rpc_call_id(e.cli, 0xabc, "npubench.Client/SubmitJob", pb, len, 5000,
                                    &st, NULL, &out, &olen, &err),
                     NB_OK);
    free(pb);
    Npubench__SubmitJobResponse *sresp;
    assert_int_equal(nb_wire_unpack(&npubench__submit_job_response__descriptor, out, olen, 0,
                                    &sresp, &err),
                     NB_OK);
    free(out);
    ids[0] = sresp->job_ids[0];
    nb_wire_free(sresp);
    Npubench__Job *j = get_job(&e, ids[0]);
    assert_string_equal(j->request_id, "rpc-0000000000000abc");
    nb_wire_free(j);
    Npubench__Lease *l = lease(&e, w, 2000);
    assert_non_null(l);
    Npubench__Progress prog = NPUBENCH__PROGRESS__INIT;
    prog.done = 1;
    prog.total = 5;
    prog.message = "rep 1/5";
    Npubench__ReportProgressRequest pr = NPUBENCH__REPORT_PROGRESS_REQUEST__INIT;
    pr.worker_id = w;
    pr.instance_id = "inst-a";
    pr.job_id = l->job_id;
    pr.lease_id = l->lease_id;
    pr.progress = &prog;
    assert_int_equal(call(&e, "npubench.Worker/ReportProgress", &pr, NULL, NULL, NULL, 0),
                     NB_RPC_OK);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    int64_t ahead = nb_wall_ms() + 60000;
    res->started_unix_ms = ahead;
    res->finished_unix_ms = ahead + 2000;
    int acc = 0;
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_true(acc);
    int64_t now = nb_wall_ms();
    assert_true(db_count(&e, "SELECT max(finished_ms) FROM runs WHERE job_id = %lld", ids[0]) <=
                now);
    assert_int_equal(db_count(&e, "SELECT max(finished_ms - started_ms) FROM runs WHERE job_id "
                                  "= %lld",
                              ids[0]),
                     2000);
    int64_t off = db_count(&e, "SELECT CAST(value AS INTEGER) FROM toolchain WHERE key = "
                               "'worker_clock_offset_ms' AND %lld = 0",
                           0);
    assert_true(off > 59000 && off <= 62000);
    /* done: no "rep 1/5" left over */
    j = get_job(&e, ids[0]);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_DONE);
    assert_string_equal(j->progress->message, "");
    assert_int_equal(j->progress->done, 5);
    assert_int_equal(j->progress->total, 5);
    nb_wire_free(j);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* Prompt sets are names inside the prompts directory: paths are refused, a FIFO there does
 * not hang the coordinator, and a NUL inside a prompt is refused naming the field. */
/* Every string field is UTF-8 at the boundary: selector.model with a lone continuation
 * byte or an overlong sequence is refused naming the field, nothing enqueued, and what is
 * listed stays valid JSON for every parser. */
static void test_invalid_utf8_refused(void **s)
{
    (void)s;
    env e;
    start(&e, "utf8-key-0123456789", "utf8-key-0123456789");
    const char *bad[] = {"Smol\x80LM", "Smol\xc0\xafLM", "\xed\xa0\x80", "ok\xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int64_t ids[8];
        size_t n;
        char msg[512];
        assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, bad[i], 8, 0, 0, 0, NULL, ids, &n,
                                msg, sizeof msg),
                         NB_RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(msg, "DeploymentSelector.model: invalid UTF-8 at byte"));
    }
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 0);
    /* a worker's result with a program's raw bytes goes in sanitized, not lost */
    int st;
    char *w = reg(&e, "b1", "cpu:0", "inst-u", NULL, &st);
    assert_non_null(w);
    int64_t ids[8];
    size_t n;
    char msg[512];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    Npubench__Lease *l = lease(&e, w, 2000);
    assert_non_null(l);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    res->log = strdup("raw \xff\xfe bytes");
    int acc = 0;
    assert_int_equal(report(&e, w, l, res, &acc), NB_RPC_INVALID_ARGUMENT);
    assert_int_equal(nb_wire_sanitize_utf8(res), 0);
    assert_string_equal(res->log, "raw \xef\xbf\xbd\xef\xbf\xbd bytes");
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_int_equal(acc, 1);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* An idempotency key (SubmitJobRequest.request_id) names one submission: the same spec
 * again is the same job (duplicate), another spec under it is refused naming the key. */
static void test_request_id_other_spec_refused(void **s)
{
    (void)s;
    env e;
    start_patient(&e);
    int64_t ids[8], again[8];
    size_t n;
    int dup = -1;
    char msg[512];
    assert_int_equal(submit_as(&e, "idem-1", &dup, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0,
                               0, NULL, ids, &n, msg, sizeof msg),
                     0);
    assert_int_equal(dup, 0);
    assert_int_equal(submit_as(&e, "idem-1", &dup, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0,
                               0, NULL, again, &n, msg, sizeof msg),
                     0);
    assert_int_equal(dup, 1);
    assert_int_equal(again[0], ids[0]);
    assert_int_equal(submit_as(&e, "idem-1", &dup, NPUBENCH__JOB_KIND__RUN, "instruct", 16, 0,
                               0, 0, NULL, again, &n, msg, sizeof msg),
                     NB_RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "SubmitJobRequest.request_id: 'idem-1' was already used for job"));
    assert_non_null(strstr(msg, "with a different spec"));
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 1);
    stop(&e);
}

static void test_client_paths_and_nul(void **s)
{
    (void)s;
    char dir[1200], fifo[1300];
    snprintf(dir, sizeof dir, "%s/prompts-root", tu_group_tmp());
    mkdir(dir, 0755);
    snprintf(fifo, sizeof fifo, "%s/hang.txt", dir);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    env e;
    start_prompts_dir = dir;
    start(&e, NULL, NULL);
    start_prompts_dir = NULL;
    const char *bad[] = {"/etc/shadow", "../../etc/shadow", "models/x.gguf", ".hidden"};
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__VERIFY_FULL;
    Npubench__SubmitJobRequest r = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    r.spec = &spec;
    char msg[512];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        spec.prompt_set = (char *)bad[i];
        assert_int_equal(call(&e, "npubench.Client/SubmitJob", &r, NULL, NULL, msg, sizeof msg),
                         NB_RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(msg, "JobSpec.prompt_set: '"));
        assert_non_null(strstr(msg, "is not a prompt set name"));
    }
    /* 40 submits naming a FIFO used to pin every handler thread */
    spec.prompt_set = "hang";
    r.shards = 2;
    double t0 = nb_now_ms();
    for (int i = 0; i < 40; i++)
        assert_int_equal(call(&e, "npubench.Client/SubmitJob", &r, NULL, NULL, msg, sizeof msg),
                         NB_RPC_OK);
    assert_true(nb_now_ms() - t0 < 5000);
    /* "abc\0def": pack "abcXdef", then turn the X into a NUL on the wire */
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    spec.prompt_set = "";
    spec.prompt = "abcXdef";
    r.shards = 0;
    uint8_t *pb;
    size_t len;
    nb_err err = {0};
    assert_int_equal(nb_wire_pack(&r, &pb, &len, &err), NB_OK);
    uint8_t *x = memchr(pb, 'X', len);
    assert_non_null(x);
    *x = 0;
    int st = -1;
    char *m = NULL;
    nb_rpc_call(e.cli, "npubench.Client/SubmitJob", pb, len, 5000, &st, &m, NULL, NULL, &err);
    free(pb);
    assert_int_equal(st, NB_RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(m, "JobSpec.prompt: contains a NUL byte"));
    free(m);
    stop(&e);
    unlink(fifo);
}

/* Text from the network cannot forge coordinator log lines: control characters are
 * escaped (a release reason carrying a newline stays on its one line). */
static void test_log_lines_escaped(void **s)
{
    (void)s;
    char path[1200];
    snprintf(path, sizeof path, "%s/coord-stderr.log", tu_group_tmp());
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    dup2(fileno(f), 2);
    env e;
    start(&e, NULL, NULL);
    nb_coord_stop(e.coord); /* restart loud: start() is quiet */
    nb_rpc_client_close(e.cli);
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    char url[128];
    snprintf(url, sizeof url, "inproc://svc-api-log-%d", (int)getpid());
    o.listen_url = url;
    o.db_path = e.db;
    nb_err err = {0};
    assert_int_equal(nb_coord_start(&o, &e.coord, &err), NB_OK);
    e.cli = open_as(&e, NULL);
    char *w, msg[512];
    Npubench__Lease *l = run_leased(&e, &w);
    Npubench__ReleaseJobRequest rel = NPUBENCH__RELEASE_JOB_REQUEST__INIT;
    rel.worker_id = w;
    rel.instance_id = "inst-a";
    rel.job_id = l->job_id;
    rel.lease_id = l->lease_id;
    rel.reason = "bye\n2026-01-01T00:00:00Z npubench coordinator: FORGED";
    rel.retry = 1;
    assert_int_equal(call(&e, "npubench.Worker/ReleaseJob", &rel, NULL, NULL, msg, sizeof msg),
                     NB_RPC_OK);
    stop(&e);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "cat '%s'", path);
    tu_result r = tu_run(cmd);
    assert_non_null(strstr(r.out, "bye\\n2026-01-01T00:00:00Z npubench coordinator: FORGED"));
    assert_null(strstr(r.out, "\n2026-01-01T00:00:00Z npubench coordinator: FORGED"));
    free(r.out);
    nb_wire_free(l);
    free(w);
}

static void test_queued_reason_and_device_claim(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    int64_t ids[8];
    size_t n;
    char msg[512];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__VERIFY, "nosuch-model", 0, 0, 0, 0, NULL,
                            ids, &n, msg, sizeof msg),
                     0);
    /* reasons are refreshed once a second */
    assert_true(tu_poll(5000, job_queued_for(&e, ids[0], "no worker")));
    int st;
    char *w = reg(&e, "b1", "cpu:0", "inst-a", NULL, &st);
    assert_non_null(w);
    /* a second process claiming the same device is refused while the first lives */
    char *w2 = reg(&e, "b1", "cpu:0", "inst-b", NULL, &st);
    assert_null(w2);
    assert_int_equal(st, NB_RPC_ALREADY_EXISTS);
    /* the worker serves SmolLM2 only: the job stays queued, with the reason */
    Npubench__Lease *l = lease(&e, w, 0);
    assert_null(l);
    assert_true(tu_poll(5000, job_queued_for(&e, ids[0], "nosuch-model")));
    free(w);
    stop(&e);
}

/* A fresh coordinator with worker *w (board b1, cpu:0) holding the lease of one RUN of 8
 * tokens, ids[0]. */
static Npubench__Lease *start_keyed_with_lease(env *e, const char *key, char **w,
                                               int64_t ids[8])
{
    start(e, key, key);
    int st;
    *w = reg(e, "b1", "cpu:0", "inst-a", NULL, &st);
    assert_non_null(*w);
    size_t n;
    char msg[512];
    assert_int_equal(submit(e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    Npubench__Lease *l = lease(e, *w, 2000);
    assert_non_null(l);
    return l;
}

static Npubench__Lease *start_with_lease(env *e, char **w, int64_t ids[8])
{
    return start_keyed_with_lease(e, NULL, w, ids);
}

static void dump_jobs(const char *db)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(h, "SELECT id, kind, state, attempts, leased_worker, lease_expiry_ms, "
                              "queued_reason, error FROM jobs ORDER BY id", -1, &st,
                           NULL) != SQLITE_OK) {
        print_message("jobs of %s: %s\n", db, sqlite3_errmsg(h));
        sqlite3_close(h);
        return;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        print_message("job");
        for (int i = 0; i < sqlite3_column_count(st); i++)
            print_message(" %s=%s", sqlite3_column_name(st, i),
                          sqlite3_column_text(st, i) ? (const char *)sqlite3_column_text(st, i)
                                                     : "NULL");
        print_message(" (now %lld)\n", (long long)nb_wall_ms());
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
}

/* Heartbeat of worker for job under lease; returns its reregister flag (-1: refused). */
static int heartbeat_rereg(env *e, const char *worker, int64_t job, const char *lease_id)
{
    Npubench__HeartbeatResponse *r = heartbeat(e, worker, job, lease_id);
    int rr = r->reregister;
    nb_wire_free(r);
    return rr;
}

/* BoardKey as the admin: the key issued, or the list; status returned. */
static int board_key(env *e, const char *op, const char *board, const char *key_id,
                     char *key, size_t cap, size_t *n_keys)
{
    Npubench__BoardKeyRequest r = NPUBENCH__BOARD_KEY_REQUEST__INIT;
    r.op = (char *)op;
    r.board = (char *)(board ? board : "");
    r.key_id = (char *)(key_id ? key_id : "");
    Npubench__BoardKeyResponse *resp;
    int st = call(e, "npubench.Client/BoardKey", &r, &npubench__board_key_response__descriptor,
                  &resp, NULL, 0);
    if (!st) {
        if (key)
            snprintf(key, cap, "%s", resp->key);
        if (n_keys)
            *n_keys = resp->n_keys;
        nb_wire_free(resp);
    }
    return st;
}

/* Registers board on device with board key bk (may be ""); the status, msg the message. */
static int reg_with_key(env *e, const char *board, const char *device, const char *bk,
                        char *msg, size_t cap)
{
    Npubench__WorkerInfo info = NPUBENCH__WORKER_INFO__INIT;
    info.board_name = (char *)board;
    info.host = "testhost";
    info.device_id = (char *)device;
    info.instance_id = (char *)device;
    info.version = "test";
    info.board_key = (char *)bk;
    Npubench__RegisterRequest rr = NPUBENCH__REGISTER_REQUEST__INIT;
    rr.info = &info;
    return call(e, "npubench.Worker/Register", &rr, NULL, NULL, msg, cap);
}

/* Worker identity per board (keys on): an admin issues keys bound to a board, several valid
 * at once (rotation); once a board has keys, only a registration with one of its own is that
 * board — none, another board's or a revoked key is PERMISSION_DENIED; a board without keys
 * registers as before; the key is never listed. */
static void test_board_keys(void **s)
{
    (void)s;
    env e;
    start(&e, "board-keys-key-0123", "board-keys-key-0123");
    char a[128], b[128], c2[128], msg[512];
    assert_int_equal(board_key(&e, "issue", "b1", NULL, a, sizeof a, NULL), 0);
    assert_int_equal(board_key(&e, "issue", "b1", NULL, b, sizeof b, NULL), 0);
    assert_int_equal(board_key(&e, "issue", "b2", NULL, c2, sizeof c2, NULL), 0);
    assert_int_equal(strlen(a), 16 + 1 + 64);
    assert_int_equal(reg_with_key(&e, "b1", "cpu:0", "", msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "board b1 registers only with one of its own keys"));
    assert_int_equal(reg_with_key(&e, "b1", "cpu:0", c2, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_int_equal(reg_with_key(&e, "b1", "cpu:0", a, msg, sizeof msg), 0);
    assert_int_equal(reg_with_key(&e, "b1", "cpu:1", b, msg, sizeof msg), 0); /* rotation */
    assert_int_equal(reg_with_key(&e, "b2", "cpu:2", c2, msg, sizeof msg), 0);
    assert_int_equal(reg_with_key(&e, "b3", "cpu:3", "", msg, sizeof msg), 0); /* no keys */
    char id[17];
    snprintf(id, sizeof id, "%.16s", a);
    size_t n = 0;
    assert_int_equal(board_key(&e, "revoke", NULL, id, NULL, 0, &n), 0);
    assert_int_equal(n, 2); /* b1's keys, one revoked */
    assert_int_equal(reg_with_key(&e, "b1", "cpu:4", a, msg, sizeof msg),
                     NB_RPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "not one of them, or was revoked"));
    assert_int_equal(reg_with_key(&e, "b1", "cpu:4", b, msg, sizeof msg), 0);
    assert_int_equal(board_key(&e, "list", "", NULL, NULL, 0, &n), 0);
    assert_int_equal(n, 3);
    /* the key is never listed with the worker */
    Npubench__ListWorkersRequest lr = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
    Npubench__ListWorkersResponse *lw;
    assert_int_equal(call(&e, "npubench.Client/ListWorkers", &lr,
                          &npubench__list_workers_response__descriptor, &lw, NULL, 0),
                     0);
    for (size_t i = 0; i < lw->n_workers; i++)
        if (lw->workers[i]->info)
            assert_string_equal(lw->workers[i]->info->board_key, "");
    nb_wire_free(lw);
    assert_int_equal(board_key(&e, "forge", "b1", NULL, NULL, 0, NULL), NB_RPC_INVALID_ARGUMENT);
    stop(&e);
}

/* A worker id is taken over only by the holder of its device claim (keys on): a process with
 * the worker key registering under a live worker's id from another host, or on its device
 * without the lock, is refused; the real worker's heartbeats and result go on. */
static void test_worker_id_takeover_needs_device_claim(void **s)
{
    (void)s;
    env e;
    int64_t ids[8];
    char *w;
    Npubench__Lease *l = start_keyed_with_lease(&e, "takeover-key-0123", &w, ids);
    Npubench__WorkerInfo info = NPUBENCH__WORKER_INFO__INIT;
    info.worker_id = w;
    info.board_name = "b1";
    info.device_id = "cpu:0";
    info.instance_id = "inst-evil";
    info.version = "test";
    Npubench__RegisterRequest rr = NPUBENCH__REGISTER_REQUEST__INIT;
    rr.info = &info;
    char msg[512];
    const char *hosts[] = {"otherhost", "testhost"};
    for (int i = 0; i < 2; i++) {
        info.host = (char *)hosts[i];
        info.holds_device_lock = i == 0; /* elsewhere with "the lock"; here without it */
        assert_int_equal(call(&e, "npubench.Worker/Register", &rr, NULL, NULL, msg, sizeof msg),
                         NB_RPC_ALREADY_EXISTS);
        assert_non_null(strstr(msg, i == 0 ? "only a process holding that device's claim may "
                                             "take it over"
                                           : "is already served by worker"));
    }
    Npubench__HeartbeatResponse *hb = heartbeat(&e, w, l->job_id, l->lease_id);
    assert_int_equal(hb->reregister, 0);
    assert_int_equal(hb->n_cancels, 0);
    nb_wire_free(hb);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    int acc = 0;
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_int_equal(acc, 1);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* A coordinator restart is invisible to a running job (keys on): the worker's heartbeats
 * keep it alive past gone-ms before it registers again, and its registration with the lease
 * keeps the job; nothing is requeued (attempts stay 0), the result is accepted. */
static void test_restart_keeps_running_jobs(void **s)
{
    (void)s;
    env e;
    int64_t ids[8];
    char *w;
    Npubench__Lease *l = start_keyed_with_lease(&e, "restart-key", &w, ids);
    assert_int_equal(heartbeat_rereg(&e, w, l->job_id, l->lease_id), 0);
    stop(&e);
    char db[sizeof e.db];
    snprintf(db, sizeof db, "%s", e.db);
    start_db = db;
    start(&e, "restart-key", "restart-key");
    start_db = NULL;
    /* 3 x gone-ms (600 ms) of heartbeats from a worker the new process does not know */
    double end = nb_now_ms() + 1800;
    while (nb_now_ms() < end) {
        assert_int_equal(heartbeat_rereg(&e, w, l->job_id, l->lease_id), 1);
        usleep(50 * 1000);
    }
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE id = %lld AND state IN "
                                  "('leased','running') AND attempts = 0", ids[0]), 1);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM workers WHERE state = 'alive' AND "
                                  "%lld = 0", 0), 1);
    /* it registers again holding the lease: known, and the job is its own */
    Npubench__Deployment d = NPUBENCH__DEPLOYMENT__INIT, *dp = &d;
    d.model = "SmolLM2-135M-Instruct";
    d.backend = "cpu";
    d.dtype = "bf16";
    Npubench__WorkerInfo info = NPUBENCH__WORKER_INFO__INIT;
    info.worker_id = w;
    info.board_name = "b1";
    info.host = "testhost";
    info.device_id = "cpu:0";
    info.instance_id = "inst-a";
    info.holds_device_lock = 1;
    info.deployments = &dp;
    info.n_deployments = 1;
    Npubench__RegisterRequest rr = NPUBENCH__REGISTER_REQUEST__INIT;
    rr.info = &info;
    rr.current_job_id = l->job_id;
    rr.lease_id = l->lease_id;
    assert_int_equal(call(&e, "npubench.Worker/Register", &rr, NULL, NULL, NULL, 0), 0);
    assert_int_equal(heartbeat_rereg(&e, w, l->job_id, l->lease_id), 0);
    Npubench__WorkerStatus *ws = NULL;
    Npubench__ListWorkersRequest lr = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
    Npubench__ListWorkersResponse *lw;
    assert_int_equal(call(&e, "npubench.Client/ListWorkers", &lr,
                          &npubench__list_workers_response__descriptor, &lw, NULL, 0),
                     0);
    assert_int_equal(lw->n_workers, 1);
    ws = lw->workers[0];
    assert_int_equal(ws->current_job_id, l->job_id);
    nb_wire_free(lw);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    int acc = 0;
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_int_equal(acc, 1);
    Npubench__Job *j = get_job(&e, ids[0]);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_DONE);
    nb_wire_free(j);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* The queue matches the dtype by the enum: a selector naming it by npubench.Dtype alone is
 * refused where no registered deployment has that dtype and leased by the one that has it;
 * the job row keeps the enum (sel_dtype_id). A database of the version before opens with its
 * queued jobs' enum filled from their dtype word (canonical names only; an exec label stays
 * 0, matched by name), and such a job is still leased by the deployment it names. */
static void test_dtype_enum_in_queue(void **s)
{
    (void)s;
    env e;
    start_patient(&e);
    reg_dtype = "q4_1";
    reg_dtype_id = NPUBENCH__DTYPE__DTYPE_Q4_1;
    char *w = reg(&e, "bq", "cpu:0", "inst-q", NULL, NULL);
    assert_non_null(w);
    int64_t ids[8];
    size_t n = 0;
    char msg[1024];
    const int RUN = NPUBENCH__JOB_KIND__RUN;
    const char *model = "SmolLM2-135M-Instruct";
    submit_dtype_id = NPUBENCH__DTYPE__DTYPE_BF16;
    assert_int_equal(submit(&e, RUN, model, 0, 0, 0, 0, NULL, ids, &n, msg, sizeof msg),
                     NB_RPC_NOT_FOUND);
    assert_non_null(strstr(msg, "dtype bf16: no registered worker serves it"));
    submit_dtype_id = NPUBENCH__DTYPE__DTYPE_Q4_1;
    assert_int_equal(submit(&e, RUN, model, 0, 0, 0, 0, NULL, ids, &n, msg, sizeof msg), 0);
    submit_dtype_id = 0;
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE id = %lld AND sel_dtype_id = "
                                  "3 AND sel_deployment = 'SmolLM2-135M-Instruct/*'",
                              ids[0]),
                     1);
    Npubench__Lease *l = lease(&e, w, 0);
    assert_non_null(l);
    assert_int_equal(l->job_id, ids[0]);
    nb_wire_free(l);

    /* queued by name in a database of the version before: one canonical word, one exec label */
    submit_dtype = "q4_1";
    int64_t old_ids[2];
    assert_int_equal(submit(&e, RUN, model, 0, 0, 0, 0, NULL, ids, &n, msg, sizeof msg), 0);
    old_ids[0] = ids[0];
    submit_dtype = NULL;
    stop(&e);
    char db[sizeof e.db];
    snprintf(db, sizeof db, "%s", e.db);
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO jobs (kind, is_group, spec, spec_format, sel_deployment, priority, "
             "state, attempts, max_attempts, created_ms) SELECT kind, 0, spec, spec_format, "
             "'SmolLM2-135M-Instruct/int4-awq', priority, 'queued', 0, 3, created_ms FROM jobs "
             "WHERE id = %lld;"
             "ALTER TABLE jobs DROP COLUMN sel_dtype_id;"
             "DELETE FROM schema_version WHERE version >= 10;",
             (long long)old_ids[0]);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    old_ids[1] = sqlite3_last_insert_rowid(h);
    sqlite3_close(h);
    start_db = db;
    start_lease_ms = 60 * 1000;
    start(&e, NULL, NULL);
    start_lease_ms = 0;
    start_db = NULL;
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE id = %lld AND sel_dtype_id = "
                                  "3", old_ids[0]),
                     1);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE id = %lld AND sel_dtype_id = "
                                  "0", old_ids[1]),
                     1);
    free(w);
    w = reg(&e, "bq2", "cpu:1", "inst-q2", NULL, NULL);
    reg_dtype = "bf16";
    reg_dtype_id = 0;
    l = lease(&e, w, 0);
    assert_non_null(l);
    assert_int_equal(l->job_id, old_ids[0]);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* Replay memory survives a restart (keys on): a captured Drain(on) replayed after the
 * coordinator restarted gets its first answer and drains nothing; a worker's result resent
 * under its request id across the restart gets its answer (accepted) and stores nothing
 * twice. */
static void test_replay_after_restart(void **s)
{
    (void)s;
    env e;
    int64_t ids[8];
    char *w;
    Npubench__Lease *l = start_keyed_with_lease(&e, "replay-key", &w, ids);
    char msg[512];
    Npubench__DrainRequest dr = NPUBENCH__DRAIN_REQUEST__INIT;
    dr.drain = 1;
    uint64_t drain_id = nb_rpc_client_new_id(e.cli);
    assert_int_equal(call_id(&e, drain_id, "npubench.Client/Drain", &dr, NULL, NULL, msg,
                             sizeof msg),
                     NB_RPC_OK);
    dr.drain = 0;
    assert_int_equal(call(&e, "npubench.Client/Drain", &dr, NULL, NULL, msg, sizeof msg),
                     NB_RPC_OK);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    uint64_t result_id = nb_rpc_client_new_id(e.cli);
    int acc = 0;
    assert_int_equal(report_id(&e, result_id, w, l, res, &acc), 0);
    assert_int_equal(acc, 1);
    stop(&e);
    char db[sizeof e.db];
    snprintf(db, sizeof db, "%s", e.db);
    start_db = db;
    start(&e, "replay-key", "replay-key");
    start_db = NULL;
    dr.drain = 1;
    assert_int_equal(call_id(&e, drain_id, "npubench.Client/Drain", &dr, NULL, NULL, msg,
                             sizeof msg),
                     NB_RPC_OK);
    /* not drained: a queued job is leased */
    int st;
    char *w2 = reg(&e, "b1", "cpu:0", "inst-a", NULL, &st);
    assert_non_null(w2);
    size_t n;
    int64_t more[8];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, more, &n,
                            msg, sizeof msg),
                     0);
    Npubench__Lease *l2 = lease(&e, w2, 2000);
    assert_non_null(l2);
    assert_int_equal(l2->job_id, more[0]);
    /* the resent result: the first answer, one run */
    acc = 0;
    assert_int_equal(report_id(&e, result_id, w, l, res, &acc), 0);
    assert_int_equal(acc, 1);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 1);
    nb_wire_free(l2);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    free(w2);
    stop(&e);
}

static void test_lease_result_idempotent_and_cancel(void **s)
{
    (void)s;
    env e;
    int64_t ids[8];
    size_t n;
    char msg[512];
    char *w;
    Npubench__Lease *l = start_with_lease(&e, &w, ids);
    assert_int_equal(l->job_id, ids[0]);
    assert_int_equal(l->attempt, 1);
    assert_int_equal(l->spec->n_tokens, 8);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    int acc = 0;
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_true(acc);
    /* a resend after a lost ack changes nothing */
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_true(acc);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 1);
    Npubench__Job *j = get_job(&e, ids[0]);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_DONE);
    assert_int_equal(j->n_results, 1);
    assert_int_equal(j->results[0]->n_run_ids, 1);
    assert_int_equal(j->results[0]->metrics->n_samples, 5);
    nb_wire_free(j);
    nb_jobpb_free(res);
    nb_wire_free(l);

    /* cancel reaches the worker through its heartbeat */
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    l = lease(&e, w, 2000);
    assert_non_null(l);
    Npubench__HeartbeatResponse *hb = heartbeat(&e, w, l->job_id, l->lease_id);
    assert_int_equal(hb->n_cancels, 0);
    nb_wire_free(hb);
    Npubench__CancelJobRequest cr = NPUBENCH__CANCEL_JOB_REQUEST__INIT;
    cr.job_id = l->job_id;
    Npubench__CancelJobResponse *cresp;
    assert_int_equal(call(&e, "npubench.Client/CancelJob", &cr,
                          &npubench__cancel_job_response__descriptor, &cresp, NULL, 0),
                     0);
    assert_int_equal(cresp->state, NPUBENCH__JOB_STATE__JOB_CANCELLED);
    nb_wire_free(cresp);
    hb = heartbeat(&e, w, l->job_id, l->lease_id);
    assert_int_equal(hb->n_cancels, 1);
    assert_int_equal(hb->cancels[0]->job_id, l->job_id);
    nb_wire_free(hb);
    res = run_result(l->job_id, "b1", 100);
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_false(acc);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", l->job_id),
                     0);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* A coordinator, workers *a and *b on one board, a RUN job in ids[0] leased to a. */
static Npubench__Lease *leased_to_a(env *e, char **a, char **b, int64_t *ids)
{
    start(e, NULL, NULL);
    int st;
    *a = reg(e, "b1", "cpu:0", "inst-a", NULL, &st);
    *b = reg(e, "b1", "cpu:1", "inst-b", NULL, &st);
    assert_true(*a && *b);
    size_t n;
    char msg[512];
    assert_int_equal(submit(e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    Npubench__Lease *la = lease(e, *a, 2000);
    assert_non_null(la);
    assert_int_equal(la->job_id, ids[0]);
    return la;
}

static void test_lease_expiry_requeues(void **s)
{
    (void)s;
    env e;
    char *a, *b;
    int64_t ids[8];
    Npubench__Lease *la = leased_to_a(&e, &a, &b, ids);
    /* a dies: no heartbeats; b keeps polling and gets the job after the
     * lease expires (or a is declared gone) */
    Npubench__Lease *lb = NULL;
    for (int i = 0; i < 40 && !lb; i++) {
        nb_wire_free(heartbeat(&e, b, 0, NULL));
        lb = lease(&e, b, 100);
    }
    assert_non_null(lb);
    assert_int_equal(lb->job_id, ids[0]);
    assert_int_equal(lb->attempt, 2);
    Npubench__JobResult *res = run_result(ids[0], "b1", 100);
    int acc = 0;
    /* a's lease is gone: its late result is an error, not an OK that drops it */
    assert_int_equal(report(&e, a, la, res, &acc), NB_RPC_FAILED_PRECONDITION);
    assert_int_equal(report(&e, b, lb, res, &acc), 0);
    assert_true(acc);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 1);
    nb_jobpb_free(res);
    nb_wire_free(la);
    nb_wire_free(lb);
    free(a);
    free(b);
    stop(&e);
}

/* Two CPU workers a and b, a verify-full submitted in two shards, each leased: ids[0] is
 * the group. */
static void two_shards(env *e, char **a, char **b, int64_t ids[8], Npubench__Lease **la,
                       Npubench__Lease **lb)
{
    int st;
    *a = reg(e, "b1", "cpu:0", "inst-a", NULL, &st);
    *b = reg(e, "b1", "cpu:1", "inst-b", NULL, &st);
    size_t n;
    char msg[512];
    assert_int_equal(submit(e, NPUBENCH__JOB_KIND__VERIFY_FULL, "instruct", 0, 0, 2, 0, NULL,
                            ids, &n, msg, sizeof msg),
                     0);
    assert_int_equal(n, 3); /* the group and its two shards */
    *la = lease(e, *a, 2000);
    *lb = lease(e, *b, 2000);
    assert_non_null(*la);
    assert_non_null(*lb);
    assert_non_null((*la)->spec->shard);
    assert_non_null((*lb)->spec->shard);
}

/* The coordinator's own sweep requeues an expired lease while its holder is alive (it keeps
 * heartbeating, but without the job: it lost track of it), so the worker-gone path plays no
 * part; the next worker gets the job as attempt 2. */
static void test_lease_sweep_requeues_while_holder_lives(void **s)
{
    (void)s;
    env e;
    char *a, *b;
    int64_t ids[8];
    Npubench__Lease *la = leased_to_a(&e, &a, &b, ids);
    Npubench__Lease *lb = NULL;
    double deadline = tu_now_ms() + 5000; /* lease_ms is 400 */
    while (!lb && tu_now_ms() < deadline) {
        nb_wire_free(heartbeat(&e, a, 0, NULL));
        nb_wire_free(heartbeat(&e, b, 0, NULL));
        lb = lease(&e, b, 50);
    }
    assert_non_null(lb);
    assert_int_equal(lb->job_id, ids[0]);
    assert_int_equal(lb->attempt, 2);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM workers WHERE state = 'alive'", 0), 2);
    /* a's heartbeat with the old lease is answered with a cancel of it */
    Npubench__HeartbeatResponse *hr = heartbeat(&e, a, la->job_id, la->lease_id);
    assert_int_equal(hr->n_cancels, 1);
    nb_wire_free(hr);
    nb_wire_free(la);
    nb_wire_free(lb);
    free(a);
    free(b);
    stop(&e);
}

/* A resent SubmitJob (same request id) gets the first answer, the same ids and duplicate set,
 * even once the pool that planned it is gone: it is not planned again. */
static void test_duplicate_request_id_short_circuits(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    int st;
    char *a = reg(&e, "b1", "cpu:0", "inst-a", NULL, &st);
    assert_non_null(a);
    int64_t ids[8], again[8];
    size_t n, n2;
    int dup = -1;
    char msg[512];
    assert_int_equal(submit_as(&e, "resend-1", &dup, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0,
                               0, 1, NULL, ids, &n, msg, sizeof msg),
                     0);
    assert_int_equal(n, 2); /* the matrix and its one board */
    assert_int_equal(dup, 0);
    assert_int_equal(submit_as(&e, "resend-1", &dup, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0,
                               0, 1, NULL, again, &n2, msg, sizeof msg),
                     0);
    assert_int_equal(dup, 1);
    assert_int_equal(n2, 2);
    assert_memory_equal(again, ids, 2 * sizeof *ids);
    /* a stops heartbeating: no live worker, so a new matrix submit is refused ... */
    assert_true(tu_poll(5000, db_count(&e, "SELECT count(*) FROM workers WHERE state = 'alive'",
                                       0) == 0));
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 1, NULL, again,
                            &n2, msg, sizeof msg),
                     NB_RPC_NOT_FOUND);
    assert_non_null(strstr(msg, "matrix: no live worker matches"));
    /* ... but the resend still gets its first answer */
    dup = -1;
    assert_int_equal(submit_as(&e, "resend-1", &dup, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0,
                               0, 1, NULL, again, &n2, msg, sizeof msg),
                     0);
    assert_int_equal(dup, 1);
    assert_int_equal(n2, 2);
    assert_memory_equal(again, ids, 2 * sizeof *ids);
    free(a);
    stop(&e);
}

static void test_shards_merge_like_one_worker(void **s)
{
    (void)s;
    env e;
    start_patient(&e);
    char *a, *b;
    int64_t ids[8];
    size_t n;
    char msg[512];
    Npubench__Lease *la, *lb;
    two_shards(&e, &a, &b, ids, &la, &lb);
    int acc;
    Npubench__Lease *ls[2] = {la, lb};
    const char *ws[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        Npubench__Shard *sh = ls[i]->spec->shard;
        Npubench__JobResult *r = verify_result(ls[i]->job_id, sh->prompt_begin, sh->prompt_end, 5);
        r->shard = NULL;
        assert_int_equal(report(&e, ws[i], ls[i], r, &acc), 0);
        assert_true(acc);
        nb_jobpb_free(r);
    }
    Npubench__Job *g = get_job(&e, ids[0]);
    assert_int_equal(g->state, NPUBENCH__JOB_STATE__JOB_DONE);
    assert_int_equal(g->n_results, 1);
    assert_int_equal(g->results[0]->n_gates, 8);
    assert_int_equal(g->results[0]->outcome, NPUBENCH__OUTCOME__FAIL);
    assert_int_equal(g->results[0]->verify->passed, 7);
    for (int i = 0; i < 8; i++)
        assert_int_equal(g->results[0]->gates[i]->index, i);
    assert_int_equal(g->n_child_job_ids, 2);
    nb_wire_free(g);
    /* one run, the group's; none for the shards */
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 1);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id IN (SELECT id FROM "
                                  "jobs WHERE parent_id = %lld)",
                              ids[0]),
                     0);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM gate_checks WHERE run_id = (SELECT id "
                                  "FROM runs WHERE job_id = %lld)",
                              ids[0]),
                     8);
    /* the same prompts unsharded on one worker: the same outcome */
    int64_t one[8];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__VERIFY_FULL, "instruct", 0, 0, 1, 0, NULL,
                            one, &n, msg, sizeof msg),
                     0);
    assert_int_equal(n, 1);
    Npubench__Lease *l1 = lease(&e, a, 2000);
    assert_null(l1->spec->shard);
    Npubench__JobResult *r = verify_result(l1->job_id, 0, 8, 5);
    assert_int_equal(report(&e, a, l1, r, &acc), 0);
    Npubench__Job *j1 = get_job(&e, one[0]);
    assert_int_equal(j1->results[0]->outcome, NPUBENCH__OUTCOME__FAIL);
    assert_int_equal(j1->results[0]->verify->passed, 7);
    nb_wire_free(j1);
    nb_jobpb_free(r);
    nb_wire_free(l1);
    nb_wire_free(la);
    nb_wire_free(lb);
    free(a);
    free(b);
    stop(&e);
}

/* A verify-full sharded over two boards is stored on each real board (each one's latest
 * gate is the merged verdict), never on a board named "b1+b2" of its own. */
static void test_shards_stored_on_real_boards(void **s)
{
    (void)s;
    env e;
    start_patient(&e);
    int st;
    char *a = reg(&e, "sb1", "cpu:0", "inst-sa", NULL, &st);
    char *b = reg(&e, "sb2", "cpu:1", "inst-sb", NULL, &st);
    int64_t ids[8];
    size_t n;
    char msg[512];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__VERIFY_FULL, "instruct", 0, 0, 2, 0, NULL,
                            ids, &n, msg, sizeof msg), 0);
    assert_int_equal(n, 3);
    Npubench__Lease *ls[2] = {lease(&e, a, 2000), lease(&e, b, 2000)};
    const char *ws[2] = {a, b}, *boards[2] = {"sb1", "sb2"};
    for (int i = 0; i < 2; i++) {
        assert_non_null(ls[i]);
        Npubench__Shard *sh = ls[i]->spec->shard;
        Npubench__JobResult *r = verify_result(ls[i]->job_id, sh->prompt_begin, sh->prompt_end, -1);
        r->shard = NULL;
        nb_wire_free(r->environment);
        r->environment = test_env(boards[i]);
        int acc;
        assert_int_equal(report(&e, ws[i], ls[i], r, &acc), 0);
        assert_true(acc);
        nb_jobpb_free(r);
        nb_wire_free(ls[i]);
    }
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 2);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM deployments WHERE board LIKE '%%+%%' "
                                  "AND %lld", 1), 0);
    assert_int_equal(db_count(&e, "SELECT count(DISTINCT d.board) FROM runs r JOIN deployments d "
                                  "ON d.id = r.deployment_id WHERE r.job_id = %lld AND d.board "
                                  "IN ('sb1', 'sb2')", ids[0]), 2);
    Npubench__Job *g = get_job(&e, ids[0]);
    assert_int_equal(g->results[0]->n_run_ids, 2);
    assert_string_equal(g->results[0]->environment->board, "sb1");
    nb_wire_free(g);
    free(a);
    free(b);
    stop(&e);
}

/* A deployment that cannot run a prompt range keeps verify-full whole; a shard whose
 * result carries no verify summary fails at once, saying so (no lease-expiry retries). */
static void test_shards_need_prompt_ranges(void **s)
{
    (void)s;
    env e;
    start_patient(&e);
    char *a, *b;
    int64_t ids[8];
    size_t n;
    char msg[512];
    Npubench__Lease *la, *lb;
    two_shards(&e, &a, &b, ids, &la, &lb);
    int st, acc = 0;
    Npubench__JobResult *r = run_result(la->job_id, "b1", 10.0); /* no JobResult.verify */
    assert_int_equal(report(&e, a, la, r, &acc), 0);
    assert_true(acc);
    nb_jobpb_free(r);
    Npubench__Job *j = get_job(&e, la->job_id);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_FAILED);
    assert_non_null(strstr(j->error, "shard yielded no verify result"));
    nb_wire_free(j);
    Npubench__Shard *sh = lb->spec->shard;
    r = verify_result(lb->job_id, sh->prompt_begin, sh->prompt_end, -1);
    assert_int_equal(report(&e, b, lb, r, &acc), 0);
    nb_jobpb_free(r);
    j = get_job(&e, ids[0]);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_FAILED);
    assert_non_null(strstr(j->error, "1 of 2 children failed"));
    nb_wire_free(j);
    /* a third worker whose deployment takes no prompt range: verify-full is one job */
    char *c = reg_dep(&e, "npu", "xrt:0", "inst-c", NULL, 1, &st);
    assert_non_null(c);
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__VERIFY_FULL, "instruct", 0, 0, 2, 0, NULL,
                            ids, &n, msg, sizeof msg),
                     0);
    assert_int_equal(n, 1);
    Npubench__Lease *l1 = lease(&e, c, 2000);
    assert_non_null(l1);
    assert_null(l1->spec->shard);
    nb_wire_free(l1);
    nb_wire_free(la);
    nb_wire_free(lb);
    free(a);
    free(b);
    free(c);
    stop(&e);
}

static void test_matrix_and_history_regression(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    int st;
    char *a = reg(&e, "b1", "cpu:0", "inst-a", "strix", &st);
    char *b = reg(&e, "b2", "cpu:1", "inst-b", "strix", &st);
    char *c = reg(&e, "b3", "cpu:2", "inst-c", NULL, &st);
    int64_t ids[8];
    size_t n;
    char msg[512];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__PROFILE, "instruct", 4, 0, 0, 1, "strix",
                            ids, &n, msg, sizeof msg),
                     0);
    assert_int_equal(n, 3); /* group + boards b1 and b2, not b3 */
    assert_null(lease(&e, c, 0));
    Npubench__Lease *la = lease(&e, a, 2000), *lb = lease(&e, b, 2000);
    assert_non_null(la);
    assert_non_null(lb);
    assert_string_equal(la->spec->selector->board, "b1");
    assert_string_equal(lb->spec->selector->board, "b2");
    int acc;
    Npubench__JobResult *r = run_result(la->job_id, "b1", 100);
    assert_int_equal(report(&e, a, la, r, &acc), 0);
    nb_jobpb_free(r);
    r = run_result(lb->job_id, "b2", 100);
    assert_int_equal(report(&e, b, lb, r, &acc), 0);
    nb_jobpb_free(r);
    nb_wire_free(la);
    nb_wire_free(lb);
    Npubench__Job *g = get_job(&e, ids[0]);
    assert_int_equal(g->state, NPUBENCH__JOB_STATE__JOB_DONE);
    assert_int_equal(g->n_results, 2);
    nb_wire_free(g);

    /* history on b1: steady runs, then a slow one is flagged */
    for (int i = 0; i < 6; i++) {
        int64_t one[4];
        assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, "strix",
                                one, &n, msg, sizeof msg),
                         0);
        Npubench__Lease *l = lease(&e, a, 2000);
        assert_non_null(l);
        r = run_result(l->job_id, "b1", i < 5 ? 100 + i * 0.1 : 50);
        assert_int_equal(report(&e, a, l, r, &acc), 0);
        nb_jobpb_free(r);
        Npubench__Job *j = get_job(&e, l->job_id);
        assert_int_equal(j->results[0]->regression, i == 5);
        /* the worker is told the committed outcome: a flagged run is "fail" (its log said
         * "measured; pass unless the regression check flags it") */
        assert_string_equal(reported_outcome, i == 5 ? "fail" : "pass");
        if (i == 5)
            assert_non_null(strstr(j->results[0]->regression_detail, "tps"));
        nb_wire_free(j);
        nb_wire_free(l);
    }
    Npubench__HistoryRequest hr = NPUBENCH__HISTORY_REQUEST__INIT;
    hr.model = "instruct";
    hr.board = "b1";
    hr.metric = "tps";
    Npubench__HistoryResponse *h;
    assert_int_equal(call(&e, "npubench.Client/History", &hr,
                          &npubench__history_response__descriptor, &h, NULL, 0),
                     0);
    assert_int_equal(h->n_rows, 7); /* the matrix run on b1 + 6 */
    assert_true(h->rows[0]->regression);
    assert_false(h->rows[1]->regression);
    assert_true(fabs(h->rows[0]->value - 50) < 1e-9);
    Npubench__CompareRequest cr = NPUBENCH__COMPARE_REQUEST__INIT;
    cr.run_id = h->rows[0]->run_id;
    cr.base_run_id = h->rows[1]->run_id;
    Npubench__CompareResponse *cmp;
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, NULL, 0),
                     0);
    assert_int_equal(cmp->outcome, NPUBENCH__OUTCOME__FAIL);
    nb_wire_free(cmp);
    /* against the reference: none set yet, then b2's deployment */
    cr.base_run_id = 0;
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, msg, sizeof msg),
                     NB_RPC_FAILED_PRECONDITION);
    Npubench__SetReferenceRequest sr = NPUBENCH__SET_REFERENCE_REQUEST__INIT;
    sr.job_id = ids[2];
    Npubench__SetReferenceResponse *srr;
    assert_int_equal(call(&e, "npubench.Client/SetReference", &sr,
                          &npubench__set_reference_response__descriptor, &srr, NULL, 0),
                     0);
    assert_string_equal(srr->model, "SmolLM2-135M-Instruct");
    nb_wire_free(srr);
    /* b2 ran only the matrix's profile: no base for a cold `run` (another series) */
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, msg, sizeof msg),
                     NB_RPC_NOT_FOUND);
    assert_non_null(strstr(msg, "1 is another kind"));
    /* a profile on b1, later: b2's profile is its base */
    Npubench__Lease *lp;
    int64_t one[4];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__PROFILE, "instruct", 4, 0, 0, 0, "strix",
                            one, &n, msg, sizeof msg),
                     0);
    assert_non_null(lp = lease(&e, a, 2000));
    r = run_result(lp->job_id, "b1", 99);
    assert_int_equal(report(&e, a, lp, r, &acc), 0);
    nb_jobpb_free(r);
    nb_wire_free(lp);
    nb_wire_free(h);
    assert_int_equal(call(&e, "npubench.Client/History", &hr,
                          &npubench__history_response__descriptor, &h, NULL, 0),
                     0);
    assert_string_equal(h->rows[0]->kind_name, "profile");
    cr.run_id = h->rows[0]->run_id;
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, NULL, 0),
                     0);
    assert_non_null(strstr(cmp->base_label, "b2"));
    nb_wire_free(cmp);
    nb_wire_free(h);
    free(a);
    free(b);
    free(c);
    stop(&e);
}

/* The oldest (order "ASC") or newest ("DESC") run of the deployments of model. */
static int64_t run_of_model(env *e, const char *model, const char *order)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT r.id FROM runs r JOIN deployments d ON d.id = r.deployment_id "
             "WHERE d.model = '%s' ORDER BY r.started_ms %s LIMIT %%lld",
             model, order);
    return db_count(e, sql, 1);
}

/* One identity per model: a deployments file's aliases reach the history through the
 * worker's registration, and history and compare accept any of the model's names. */
static void test_model_aliases_in_history(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    Npubench__Deployment d = NPUBENCH__DEPLOYMENT__INIT, *dp = &d;
    d.model = "Llama-3.2-1B-Instruct";
    d.backend = "exec";
    d.dtype = "bf16";
    char *al[] = {"llama32_1b", "llama32_1b_q4nx"};
    d.aliases = al;
    d.n_aliases = 2;
    Npubench__WorkerInfo info = NPUBENCH__WORKER_INFO__INIT;
    info.board_name = "amdryzenai5pro340";
    info.host = "krackan";
    info.device_id = "npu:0";
    info.version = "test";
    info.deployments = &dp;
    info.n_deployments = 1;
    Npubench__RegisterRequest rr = NPUBENCH__REGISTER_REQUEST__INIT;
    rr.info = &info;
    Npubench__RegisterResponse *regr;
    assert_int_equal(call(&e, "npubench.Worker/Register", &rr,
                          &npubench__register_response__descriptor, &regr, NULL, 0),
                     0);
    nb_wire_free(regr);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM model_aliases WHERE model = "
                                  "'Llama-3.2-1B-Instruct' AND origin = 'deployments' AND %lld",
                              1LL),
                     2);
    /* Submit takes the aliases too; a name nothing registered serves is refused at once,
     * naming what is served, instead of waiting in the queue for a day. */
    int64_t ids[4];
    size_t n;
    char msg[1024];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "llama32_1b", 0, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     0);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE id = %lld AND state = "
                                  "'queued'",
                              (long long)ids[0]),
                     1);
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "qwen9_9b", 0, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg),
                     NB_RPC_NOT_FOUND);
    assert_non_null(strstr(msg, "selector model 'qwen9_9b': no registered worker serves it"));
    assert_non_null(strstr(msg, "served: Llama-3.2-1B-Instruct exec/bf16 (also llama32_1b, "
                                "llama32_1b_q4nx)"));

    char path[2048];
    snprintf(path, sizeof path, "%s/tests/data/db/mlir-air/history.ndjson",
             tu_env("NB_SRC", "."));
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    Npubench__ImportRequest ir = NPUBENCH__IMPORT_REQUEST__INIT;
    ir.name = "history.ndjson";
    ir.content.data = buf;
    ir.content.len = len;
    Npubench__ImportResponse *irr;
    assert_int_equal(call(&e, "npubench.Client/Import", &ir,
                          &npubench__import_response__descriptor, &irr, NULL, 0),
                     0);
    assert_int_equal(irr->imported, 7);
    nb_wire_free(irr);

    /* llama32_1b (2 nightlies) and llama32_1b_q4nx (2), by the canonical name or an alias. */
    const char *names[] = {"Llama-3.2-1B-Instruct", "llama32_1b", "LLAMA32_1B_Q4NX"};
    for (size_t i = 0; i < 3; i++) {
        Npubench__HistoryRequest hr = NPUBENCH__HISTORY_REQUEST__INIT;
        hr.model = (char *)names[i];
        hr.metric = "tps";
        Npubench__HistoryResponse *h;
        assert_int_equal(call(&e, "npubench.Client/History", &hr,
                              &npubench__history_response__descriptor, &h, NULL, 0),
                         0);
        assert_int_equal(h->n_rows, 4);
        size_t q4 = 0;
        for (size_t k = 0; k < h->n_rows; k++)
            q4 += !strcmp(h->rows[k]->model, "llama32_1b_q4nx");
        assert_int_equal(q4, 2);
        nb_wire_free(h);
    }
    /* Compare against the reference, set on a deployment stored under another name. */
    Npubench__SetReferenceRequest sr = NPUBENCH__SET_REFERENCE_REQUEST__INIT;
    sr.run_id = run_of_model(&e, "llama32_1b", "ASC");
    Npubench__SetReferenceResponse *srr;
    assert_int_equal(call(&e, "npubench.Client/SetReference", &sr,
                          &npubench__set_reference_response__descriptor, &srr, NULL, 0),
                     0);
    nb_wire_free(srr);
    Npubench__CompareRequest cr = NPUBENCH__COMPARE_REQUEST__INIT;
    cr.run_id = run_of_model(&e, "llama32_1b_q4nx", "DESC");
    Npubench__CompareResponse *cmp;
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, NULL, 0),
                     0);
    /* The reference deployment's (llama32_1b's) newest run: history.ndjson's line 3. */
    assert_int_equal(cmp->base_run_id, 3);
    assert_int_equal(sr.run_id, 1);
    nb_wire_free(cmp);
    stop(&e);
}

/* import through the CLI into a local database, then history over it. */
/* Runs `npubench ARGS --db db`; asserts the exit code and that each line of want (lines
 * separated by '\n') is a whole line of the output. */
static void expect_cli(const char *db, int code, const char *want, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s --db '%s'", tu_env("NB_BIN", "npubench"), args, db);
    tu_result r = tu_run(cmd);
    print_message("$ npubench %s  [exit %d]\n%s", args, r.code, r.out ? r.out : "");
    assert_int_equal(r.code, code);
    for (const char *w = want; *w;) {
        size_t n = strcspn(w, "\n");
        char line[512];
        snprintf(line, sizeof line, "\n%.*s\n", (int)n, w);
        assert_non_null(strstr(r.out, line));
        w += n + (w[n] == '\n');
    }
    free(r.out);
}

static void db_exec(const char *db, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_close(h);
}

/* compare OLD NEW (git diff / benchstat order): a verdict needs a change beyond the noise
 * band (--tolerance, default 5%) AND Mann-Whitney p < 0.05. Imported rows have one value
 * each (p = 1): side by side, "~", exit 0; with five samples a side the same change is a
 * REGRESSION (exit 1), and the other order an improvement (exit 0). Overlapping samples
 * whose means differ by 6% (p = 0.7) are noise. */
static void test_compare_verdicts(void **s)
{
    (void)s;
    char db[1200], args[2048];
    snprintf(db, sizeof db, "%s/compare.db", tu_group_tmp());
    snprintf(args, sizeof args, "import '%s/tests/data/db/history.ndjson'",
             tu_env("NB_SRC", "."));
    expect_cli(db, 0, "", args);
    /* run 1 then run 2, both strix-01: within 5%; base and new side by side, the U test's p */
    expect_cli(db, 0,
               "TTFT (ms)          | 418.20         | 415.90         | 0.99× / -0.5%    | p=1 (1 vs 1)  ~\n"
               "TPS (tokens/s)     | 18.10          | 18.30          | 1.01× / +1.1%    | p=1 (1 vs 1)  ~\n"
               "REGRESSION = worse beyond the noise band (±5%) and Mann-Whitney p < 0.05; ~ = not significant",
               "compare 1 2");
    /* run 2 then run 4: TTFT +13.2%, TPS -11.5%, but one value a side: no verdict */
    expect_cli(db, 0,
               "TTFT (ms)          | 415.90         | 471.00         | 1.13× / +13.2%   | p=1 (1 vs 1)  ~\n"
               "TPS (tokens/s)     | 18.30          | 16.20          | 0.89× / -11.5%   | p=1 (1 vs 1)  ~",
               "compare 2 4");
    /* five repetitions a side, apart: significant (p = 0.0079) */
    for (int rep = 0; rep < 5; rep++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "INSERT INTO samples (run_id, rep, ttft_ms, tps) VALUES (2, %d, %g, %g), "
                 "(4, %d, %g, %g)",
                 rep, 415.9 + rep * 0.1, 18.3 + rep * 0.01, rep, 471.0 + rep * 0.1,
                 16.2 + rep * 0.01);
        db_exec(db, sql);
    }
    expect_cli(db, 1,
               "TTFT (ms)          | 415.90         | 471.00         | 1.13× / +13.2%   | p=0.0079 (5 vs 5)  REGRESSION\n"
               "TPS (tokens/s)     | 18.30          | 16.20          | 0.89× / -11.5%   | p=0.0079 (5 vs 5)  REGRESSION",
               "compare 2 4");
    /* the other order: 4 is the base, 2 is better on both */
    expect_cli(db, 0,
               "Metric             | Base (run 4)   | New (run 2)    | Change (× / %)   | Mann-Whitney\n"
               "TPS (tokens/s)     | 16.20          | 18.30          | 1.13× / +13.0%   | p=0.0079 (5 vs 5)",
               "compare 4 2");
    expect_cli(db, 1,
               "TTFT (ms)          | 415.90         | 471.00         | 1.13× / +13.2%   | p=0.0079 (5 vs 5)  REGRESSION\n"
               "TPS (tokens/s)     | 18.30          | 16.20          | 0.89× / -11.5%   | p=0.0079 (5 vs 5)\n"
               "REGRESSION = worse beyond the noise band (±12%) and Mann-Whitney p < 0.05; ~ = not significant",
               "compare 2 4 --tolerance 12");
    expect_cli(db, 0,
               "TTFT (ms)          | 415.90         | 471.00         | 1.13× / +13.2%   | p=0.0079 (5 vs 5)\n"
               "TPS (tokens/s)     | 18.30          | 16.20          | 0.89× / -11.5%   | p=0.0079 (5 vs 5)",
               "compare 2 4 --tolerance 14");
    /* beyond the band but noise: -6.1% on the means, samples that overlap (p = 0.7) */
    db_exec(db, "UPDATE runs SET tps = 17.0 WHERE id = 1");
    db_exec(db, "INSERT INTO samples (run_id, rep, tps) VALUES (3, 0, 14), (3, 1, 18.1), "
                "(3, 2, 22.2), (1, 0, 13), (1, 1, 17), (1, 2, 21)");
    db_exec(db, "UPDATE runs SET tps = 18.1 WHERE id = 3");
    expect_cli(db, 0, "TPS (tokens/s)     | 18.10          | 17.00          | 0.94× / -6.1%    | p=0.7 (3 vs 3)  ~",
               "compare 3 1");
    expect_cli(db, 2, "", "compare 4 2 --against nothing");
    expect_cli(db, 2, "", "compare 0 2");
    /* The default band is the coordinator's minimum change, 5 (percent): significant changes
     * of 4% on both metrics are inside it (exit 0), of 6% beyond it (exit 1). */
    static const double pct[2] = {4, 6};
    for (int i = 0; i < 2; i++) {
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "DELETE FROM samples WHERE run_id = 4; UPDATE runs SET ttft_ms = %.6f, tps = "
                 "%.6f WHERE id = 4",
                 415.9 * (1 + pct[i] / 100), 18.3 * (1 - pct[i] / 100));
        db_exec(db, sql);
        for (int rep = 0; rep < 5; rep++) {
            snprintf(sql, sizeof sql,
                     "INSERT INTO samples (run_id, rep, ttft_ms, tps) VALUES (4, %d, %.6f, %.6f)",
                     rep, 415.9 * (1 + pct[i] / 100) + rep * 0.1,
                     18.3 * (1 - pct[i] / 100) + rep * 0.01);
            db_exec(db, sql);
        }
        expect_cli(db, i,
                   i ? "TTFT (ms)          | 415.90         | 440.85         | 1.06× / +6.0%    | p=0.0079 (5 vs 5)  REGRESSION"
                     : "TTFT (ms)          | 415.90         | 432.54         | 1.04× / +4.0%    | p=0.0079 (5 vs 5)",
                   "compare 2 4");
    }
}

/* `npubench ARGS --db db`: asserts the exit code and that each of the NULL-ended needles is
 * in the output. */
/* The jobs table as the CLI's coordinator left it: a failed expectation about a job's state
 * (health "checking" once flaked under ASan) then says which transition happened. */

static void expect_cli_has(const char *db, int code, const char *args, const char *const *needles)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s --db '%s' 2>&1", tu_env("NB_BIN", "npubench"), args, db);
    tu_result r = tu_run(cmd);
    print_message("$ npubench %s  [exit %d]\n%s", args, r.code, r.out ? r.out : "");
    assert_int_equal(r.code, code);
    for (size_t i = 0; needles[i]; i++)
        if (!strstr(r.out, needles[i])) {
            dump_jobs(db);
            fail_msg("'%s' not in the output of npubench %s", needles[i], args);
        }
    free(r.out);
}


/* --against reference compares like with like: the reference deployment's newest run of
 * the same kind and shape (context, prompt, tokens), never the same measurement stored
 * again, and says what it matched or why nothing matched; reference show / unset; history
 * --until / --toolchain. */
static void test_compare_reference_cli(void **s)
{
    (void)s;
    char db[1200], args[2048];
    snprintf(db, sizeof db, "%s/compare-ref.db", tu_group_tmp());
    snprintf(args, sizeof args, "import '%s/tests/data/db/history.ndjson'",
             tu_env("NB_SRC", "."));
    expect_cli(db, 0, "", args);
    const char *empty[] = {"no reference is set", NULL};
    expect_cli_has(db, 0, "reference show", empty);
    const char *unknown[] = {"NOT_FOUND: model 'nothing-like-this' has no reference", NULL};
    expect_cli_has(db, 2, "reference show nothing-like-this", unknown);
    const char *set[] = {"reference of Llama-3.2-1B-Instruct: deployment 1 "
                         "(Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01)", NULL};
    expect_cli_has(db, 0, "reference set --run 1", set);
    /* run 4 stored again (same time, same numbers) and a newer run at another context on
     * the reference deployment: neither is run 4's base */
    db_exec(db, "INSERT INTO runs (deployment_id, kind, outcome, started_ms, ttft_ms, tps, "
                "context_len, source) SELECT deployment_id, kind, outcome, started_ms, ttft_ms, "
                "tps, context_len, 'import' FROM runs WHERE id = 4");
    db_exec(db, "INSERT INTO runs (deployment_id, kind, outcome, started_ms, ttft_ms, tps, "
                "context_len, source) SELECT deployment_id, kind, outcome, started_ms + 3600000, "
                "ttft_ms, tps * 2, 512, 'import' FROM runs WHERE id = 4");
    const char *matched[] = {
        "reference: run 2: Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01",
        "matched: run 2, the newest of 2 like runs of the reference deployment 1",
        "performance, context 2048; left out: 0 of another kind, 1 of another shape, "
        "1 duplicate of this run",
        "| 1.13× / +13.2%   | p=1 (1 vs 1)  ~", NULL};
    expect_cli_has(db, 0, "compare 4 --against reference", matched);
    const char *json[] = {"\"base_run_id\":2,", "\"p_value\":1", "\"matched\":\"run 2,", NULL};
    expect_cli_has(db, 0, "compare 4 --against reference --json", json);
    const char *shown[] = {"Llama-3.2-1B-Instruct: deployment 1 (Llama-3.2-1B-Instruct npu/bf16 "
                           "on npu-strix-01), set ",
                           ", 5 runs, latest run 7", NULL};
    expect_cli_has(db, 0, "reference show llama-3.2-1b-instruct", shown);
    /* Qwen's reference deployment has no run but run 5 itself */
    expect_cli(db, 0, "", "reference set --run 5");
    const char *none[] = {"has no other run like run 5 (performance, context 1024): of its 0 "
                          "other runs", NULL};
    expect_cli_has(db, 2, "compare 5 --against reference", none);
    const char *unset_ok[] = {"reference of Llama-3.2-1B-Instruct unset (was deployment 1, "
                              "Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01)", NULL};
    expect_cli_has(db, 0, "reference unset LLAMA-3.2-1B-INSTRUCT", unset_ok);
    const char *unset[] = {"no reference deployment is set for model Llama-3.2-1B-Instruct",
                           NULL};
    expect_cli_has(db, 2, "compare 4 --against reference", unset);
    expect_cli(db, 2, "", "reference unset LLAMA-3.2-1B-INSTRUCT");
    const char *qwen[] = {"Qwen2.5-0.5B-Instruct: deployment ", NULL};
    expect_cli_has(db, 0, "reference show", qwen);

    /* history filters: before a date, a toolchain entry (imported runs carry mlir-air's) */
    const char *until[] = {"\"run_id\":1,", NULL};
    expect_cli_has(db, 0, "history --until 2025-03-11 --json", until);
    snprintf(args, sizeof args, "'%s' history --until 2025-03-11 --json --db '%s' | grep -c "
             "'\"run_id\"'", tu_env("NB_BIN", "npubench"), db);
    tu_result r = tu_run(args);
    assert_string_equal(r.out, "1\n");
    free(r.out);
    snprintf(args, sizeof args, "'%s' history --toolchain air_sha=b7c8 --json --db '%s' | grep "
             "'\"run_id\"'", tu_env("NB_BIN", "npubench"), db);
    r = tu_run(args);
    assert_non_null(strstr(r.out, "\"run_id\":4,"));
    assert_null(strstr(r.out, "\"run_id\":2,"));
    free(r.out);
    expect_cli(db, 2, "", "history --until yesterday");
}

/* Two verify runs side by side: no metric to compare, so the prompts that changed outcome
 * or divergence step are the comparison; a prompt that passed and now fails is a FAIL;
 * a verify against a run shares nothing, which is an error, not an empty table. */
static void test_compare_verify_prompts(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    int st, acc;
    char *w = reg(&e, "b1", "cpu:0", "inst-v", NULL, &st);
    int64_t jobs[3];
    for (int i = 0; i < 3; i++) {
        int64_t ids[4];
        size_t n;
        char msg[512];
        assert_int_equal(submit(&e, i < 2 ? NPUBENCH__JOB_KIND__VERIFY : NPUBENCH__JOB_KIND__RUN,
                                "instruct", 4, 5, 0, 0, NULL, ids, &n, msg, sizeof msg), 0);
        Npubench__Lease *l = lease(&e, w, 2000);
        assert_non_null(l);
        jobs[i] = l->job_id;
        Npubench__JobResult *r = i < 2 ? verify_result(l->job_id, 0, 4, i == 0 ? -1 : 1)
                                       : run_result(l->job_id, "b1", 100);
        assert_int_equal(report(&e, w, l, r, &acc), 0);
        assert_true(acc);
        nb_jobpb_free(r);
        nb_wire_free(l);
    }
    Npubench__CompareRequest cr = NPUBENCH__COMPARE_REQUEST__INIT;
    cr.job_id = jobs[1];
    cr.base_job_id = jobs[0];
    Npubench__CompareResponse *cmp;
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, NULL, 0), 0);
    assert_int_equal(cmp->outcome, NPUBENCH__OUTCOME__FAIL);
    assert_int_equal(cmp->n_rows, 0);
    assert_int_equal(cmp->prompts_compared, 4);
    assert_int_equal(cmp->n_prompt_changes, 1);
    Npubench__PromptChange *pc = cmp->prompt_changes[0];
    assert_int_equal(pc->index, 1);
    assert_string_equal(pc->prompt, "prompt 1");
    assert_string_equal(pc->base_status, "PASS");
    assert_string_equal(pc->status, "FAIL");
    assert_int_equal(pc->base_divergence_step, -1);
    assert_int_equal(pc->divergence_step, 2);
    assert_string_equal(cmp->kind, "verify");
    nb_wire_free(cmp);
    /* the other way round: the prompt got better, which passes */
    cr.job_id = jobs[0];
    cr.base_job_id = jobs[1];
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, NULL, 0), 0);
    assert_int_equal(cmp->outcome, NPUBENCH__OUTCOME__PASS);
    assert_int_equal(cmp->n_prompt_changes, 1);
    assert_string_equal(cmp->prompt_changes[0]->status, "PASS");
    nb_wire_free(cmp);
    /* the same run twice: every prompt compared, none changed */
    cr.base_job_id = jobs[0];
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, NULL, 0), 0);
    assert_int_equal(cmp->outcome, NPUBENCH__OUTCOME__PASS);
    assert_int_equal(cmp->prompts_compared, 4);
    assert_int_equal(cmp->n_prompt_changes, 0);
    nb_wire_free(cmp);
    char msg[512];
    cr.job_id = jobs[2];
    assert_int_equal(call(&e, "npubench.Client/Compare", &cr,
                          &npubench__compare_response__descriptor, &cmp, msg, sizeof msg),
                     NB_RPC_FAILED_PRECONDITION);
    assert_non_null(strstr(msg, "share no metric and no verify prompt"));
    free(w);
    stop(&e);
}

static Npubench__WorkerStatus *worker_status(env *e, const char *board,
                                             Npubench__ListWorkersResponse **keep)
{
    Npubench__ListWorkersRequest r = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
    assert_int_equal(call(e, "npubench.Client/ListWorkers", &r,
                          &npubench__list_workers_response__descriptor, keep, NULL, 0), 0);
    for (size_t i = 0; i < (*keep)->n_workers; i++)
        if (!strcmp((*keep)->workers[i]->info->board_name, board))
            return (*keep)->workers[i];
    fail_msg("no worker of board %s", board);
    return NULL;
}

static int drain_board(env *e, const char *board, int drain, char *msg, size_t cap)
{
    Npubench__DrainRequest r = NPUBENCH__DRAIN_REQUEST__INIT;
    r.drain = drain;
    r.board = (char *)board;
    Npubench__DrainResponse *resp;
    int st = call(e, "npubench.Client/Drain", &r, &npubench__drain_response__descriptor, &resp,
                  msg, cap);
    if (!st)
        nb_wire_free(resp);
    return st;
}

/* A result that gave no verdict (the device went away). */
static Npubench__JobResult *error_result(int64_t job)
{
    Npubench__JobResult *r = nb_jobpb_result_new();
    r->job_id = job;
    r->status = NPUBENCH__STATUS_CODE__UNAVAILABLE;
    r->status_message = nb_jobpb_strdup("device timeout");
    r->outcome = NPUBENCH__OUTCOME__ERROR;
    return r;
}

/* Board health, LAVA style: a check is queued when a board registers and runs before its
 * other work; a failed check quarantines the board (only checks are leased to it) until a
 * retried check passes; N consecutive job errors call a check; a drained board leases
 * nothing until undrained; checks write no history run. */
static void test_board_health(void **s)
{
    (void)s;
    env e;
    start_health_ms = 3600 * 1000;
    start_health_retry_ms = 300;
    /* the last check stays leased until the coordinator stops, and the CLI then reads it as
     * "checking" */
    start_patient(&e);
    start_health_ms = start_health_retry_ms = 0;
    int st, acc;
    char *w = reg(&e, "hb1", "cpu:0", "inst-h", NULL, &st);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE kind = 'health' AND "
                                  "sel_board = 'hb1' AND state = 'queued' AND %lld", 1), 1);
    /* the probe's versions are the board's, in the database (the dashboard reads them) */
    assert_int_equal(db_count(&e, "SELECT count(*) FROM boards WHERE board = 'hb1' AND driver = "
                                  "'2.19.0-test' AND cpu_model = 'Test CPU' AND firmware = '' "
                                  "AND versions_ms > %lld", 0), 1);
    char long_cpu[300];
    memset(long_cpu, 'x', sizeof long_cpu - 1);
    long_cpu[sizeof long_cpu - 1] = '\0';
    reg_cpu_model = long_cpu;
    assert_null(reg(&e, "hb2", "cpu:1", "inst-h2", NULL, &st));
    reg_cpu_model = "Test CPU";
    assert_int_equal(st, NB_RPC_INVALID_ARGUMENT);
    int64_t ids[4];
    size_t n;
    char msg[512];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg), 0);
    int64_t run_job = ids[0];
    /* the check first, whatever was queued before */
    Npubench__Lease *l = lease(&e, w, 2000);
    assert_non_null(l);
    assert_int_equal(l->spec->kind, NPUBENCH__JOB_KIND__HEALTH);
    assert_string_equal(l->spec->selector->board, "hb1");
    assert_string_equal(l->spec->selector->model, "SmolLM2-135M-Instruct");
    int64_t check1 = l->job_id;
    Npubench__JobResult *r = verify_result(l->job_id, 0, 1, 0); /* prompt 0 diverges: FAIL */
    assert_int_equal(report(&e, w, l, r, &acc), 0);
    assert_true(acc);
    nb_jobpb_free(r);
    nb_wire_free(l);
    Npubench__ListWorkersResponse *lw;
    Npubench__WorkerStatus *ws = worker_status(&e, "hb1", &lw);
    assert_string_equal(ws->health, "failed");
    assert_non_null(strstr(ws->health_detail, "verify FAIL"));
    assert_true(ws->health_checked_unix_ms > 0);
    nb_wire_free(lw);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld",
                              (long long)check1), 0);
    /* quarantined: the run waits; the retried check (300 ms) is leased, passes (short polls:
     * a lease call is what keeps this hand-driven worker alive) */
    l = NULL;
    assert_true(tu_poll(5000, (l = lease(&e, w, 100)) != NULL));
    assert_int_equal(l->spec->kind, NPUBENCH__JOB_KIND__HEALTH);
    assert_true(l->job_id != check1);
    r = verify_result(l->job_id, 0, 1, -1);
    assert_int_equal(report(&e, w, l, r, &acc), 0);
    nb_jobpb_free(r);
    nb_wire_free(l);
    ws = worker_status(&e, "hb1", &lw);
    assert_string_equal(ws->health, "ok");
    nb_wire_free(lw);
    l = lease(&e, w, 2000);
    assert_non_null(l);
    assert_int_equal(l->job_id, run_job);
    /* two jobs without a verdict in a row call a check */
    r = error_result(l->job_id);
    assert_int_equal(report(&e, w, l, r, &acc), 0);
    nb_jobpb_free(r);
    nb_wire_free(l);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE kind = 'health' AND "
                                  "state = 'queued' AND %lld", 1), 0);
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, ids, &n,
                            msg, sizeof msg), 0);
    l = lease(&e, w, 2000);
    assert_non_null(l);
    r = error_result(l->job_id);
    assert_int_equal(report(&e, w, l, r, &acc), 0);
    nb_jobpb_free(r);
    nb_wire_free(l);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE kind = 'health' AND "
                                  "state = 'queued' AND %lld", 1), 1);
    ws = worker_status(&e, "hb1", &lw);
    assert_string_equal(ws->health, "checking");
    assert_int_equal(ws->job_errors, 2);
    nb_wire_free(lw);
    /* drained: nothing is leased, not even the check, until undrained */
    assert_int_equal(drain_board(&e, "hb1", 1, msg, sizeof msg), 0);
    assert_int_equal(drain_board(&e, "no-such-board", 1, msg, sizeof msg), NB_RPC_NOT_FOUND);
    assert_non_null(strstr(msg, "no-such-board"));
    assert_null(lease(&e, w, 300));
    ws = worker_status(&e, "hb1", &lw);
    assert_true(ws->drained);
    nb_wire_free(lw);
    assert_int_equal(drain_board(&e, "hb1", 0, msg, sizeof msg), 0);
    l = lease(&e, w, 2000);
    assert_non_null(l);
    assert_int_equal(l->spec->kind, NPUBENCH__JOB_KIND__HEALTH);
    nb_wire_free(l);
    free(w);
    stop(&e);
    /* the CLI: drain by board name, and the table says so */
    const char *drained[] = {"board hb1 drained: 1 job still running there, no new ones", NULL};
    expect_cli_has(e.db, 0, "workers drain hb1", drained);
    const char *shown[] = {"\"health\":\"checking\"", "\"drained\":true", "\"job_errors\":2",
                           NULL};
    expect_cli_has(e.db, 0, "workers --all --json", shown);
    expect_cli(e.db, 2, "", "workers drain");
}

/* A worker already in LeaseJob's long poll when its board is drained (or quarantined): the
 * job submitted next wakes the poll but is not leased there. The drain was read once, before
 * the poll, and the job ran on the drained board 3 of 3 times. */
static int open_client(env *e, nb_rpc_client **cli);

typedef struct poller {
    env *e;
    const char *worker;
    int status, got;
    int64_t job;
    pthread_t th;
} poller;

static void *poll_lease(void *arg)
{
    poller *P = arg;
    env t = *P->e;
    P->status = -1;
    if (open_client(P->e, &t.cli))
        return NULL;
    Npubench__LeaseJobRequest r = NPUBENCH__LEASE_JOB_REQUEST__INIT;
    r.worker_id = (char *)P->worker;
    r.instance_id = (char *)instance_of(P->worker);
    r.wait_ms = 3000;
    Npubench__LeaseJobResponse *resp = NULL;
    P->status = call(&t, "npubench.Worker/LeaseJob", &r, &npubench__lease_job_response__descriptor,
                     &resp, NULL, 0);
    if (!P->status && resp) {
        P->got = resp->lease != NULL;
        P->job = resp->lease ? resp->lease->job_id : 0;
        nb_wire_free(resp);
    }
    nb_rpc_client_close(t.cli);
    return NULL;
}

static void test_drain_takes_effect_in_long_poll(void **s)
{
    (void)s;
    env e;
    start_patient(&e);
    int st;
    char *w = reg(&e, "dr1", "cpu:0", "inst-dr", NULL, &st);
    assert_non_null(w);
    char msg[512];
    int64_t ids[4];
    size_t n;
    for (int round = 0; round < 3; round++) {
        poller P = {.e = &e, .worker = w};
        assert_int_equal(pthread_create(&P.th, NULL, poll_lease, &P), 0);
        usleep(300 * 1000); /* the poll is waiting on the empty queue */
        assert_int_equal(drain_board(&e, "dr1", 1, msg, sizeof msg), 0);
        assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, ids,
                                &n, msg, sizeof msg), 0);
        pthread_join(P.th, NULL);
        assert_int_equal(P.status, 0);
        if (P.got)
            fail_msg("round %d: job %lld leased on the drained board", round, (long long)P.job);
        assert_int_equal(drain_board(&e, "dr1", 0, msg, sizeof msg), 0);
        Npubench__Lease *l = lease(&e, w, 2000);
        assert_non_null(l);
        assert_int_equal(l->job_id, ids[0]);
        Npubench__JobResult *r = run_result(l->job_id, "dr1", 100);
        int acc;
        assert_int_equal(report(&e, w, l, r, &acc), 0);
        nb_jobpb_free(r);
        nb_wire_free(l);
    }
    free(w);
    stop(&e);
}

/* A matrix over a tag with a drained (or quarantined) board leaves that board out, saying so
 * in the group's log, instead of a cell that waits out the caller's --timeout; while the
 * other cells run, the group carries the results already in. */
static void test_matrix_leaves_held_board_out(void **s)
{
    (void)s;
    env e;
    start_patient(&e);
    int st;
    char *a = reg(&e, "mq1", "cpu:0", "inst-mq1", "night", &st);
    char *b = reg(&e, "mq2", "cpu:1", "inst-mq2", "night", &st);
    char *q = reg(&e, "mq3", "cpu:2", "inst-mq3", "night", &st);
    assert_true(a && b && q);
    char msg[512];
    assert_int_equal(drain_board(&e, "mq3", 1, msg, sizeof msg), 0);
    int64_t ids[8];
    size_t n;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__PROFILE, "instruct", 4, 0, 0, 1, "night",
                            ids, &n, msg, sizeof msg), 0);
    assert_int_equal(n, 3); /* the group, mq1 and mq2 */
    Npubench__GetJobRequest gr = NPUBENCH__GET_JOB_REQUEST__INIT;
    gr.job_id = ids[0];
    gr.include_log = 1;
    Npubench__GetJobResponse *gresp;
    assert_int_equal(call(&e, "npubench.Client/GetJob", &gr,
                          &npubench__get_job_response__descriptor, &gresp, NULL, 0), 0);
    assert_int_equal(gresp->job->n_child_job_ids, 2);
    assert_non_null(strstr(gresp->job->log, "matrix: board mq3 left out: drained"));
    nb_wire_free(gresp);
    Npubench__Job *g;
    Npubench__Lease *la = lease(&e, a, 2000);
    assert_non_null(la);
    int acc;
    Npubench__JobResult *r = run_result(la->job_id, "mq1", 100);
    assert_int_equal(report(&e, a, la, r, &acc), 0);
    nb_jobpb_free(r);
    nb_wire_free(la);
    g = get_job(&e, ids[0]);
    assert_int_equal(g->state, NPUBENCH__JOB_STATE__JOB_RUNNING);
    assert_int_equal(g->n_results, 1); /* mq1's, while mq2's runs */
    nb_wire_free(g);
    /* every board held: nothing to run, said at submission */
    assert_int_equal(drain_board(&e, "mq1", 1, msg, sizeof msg), 0);
    assert_int_equal(drain_board(&e, "mq2", 1, msg, sizeof msg), 0);
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__PROFILE, "instruct", 4, 0, 0, 1, "night",
                            ids, &n, msg, sizeof msg), NB_RPC_NOT_FOUND);
    assert_non_null(strstr(msg, "is drained"));
    free(a);
    free(b);
    free(q);
    stop(&e);
}

/* Queue expiry: a job nobody serves expires in the queue (cancelled, "expired: ...", which
 * `job` exits 5 on), one that says never stays, the coordinator's default applies to the
 * rest, and an expiry that passes while no coordinator runs is applied by the next one. */
static void test_queue_expiry(void **s)
{
    (void)s;
    env e;
    start_expire_ms = 3600 * 1000;
    start(&e, NULL, NULL);
    start_expire_ms = 0;
    int64_t soon[4], never[4], dflt[4], later[4];
    size_t n;
    char msg[512];
    submit_expire_ms = 200;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "nobody-serves-this", 4, 0, 0, 0, NULL,
                            soon, &n, msg, sizeof msg), 0);
    submit_expire_ms = -1;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "nobody-serves-this", 4, 0, 0, 0, NULL,
                            never, &n, msg, sizeof msg), 0);
    submit_expire_ms = 0;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "nobody-serves-this", 4, 0, 0, 0, NULL,
                            dflt, &n, msg, sizeof msg), 0);
    submit_expire_ms = -2;
    int sst = submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 4, 0, 0, 0, NULL, later, &n, msg,
                     sizeof msg);
    submit_expire_ms = 0; /* before any assertion: a failure must not leak it into later tests */
    assert_int_equal(sst, NB_RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "JobSpec.expire_after_ms -2"));
    assert_true(tu_poll(5000, job_state(&e, soon[0]) == NPUBENCH__JOB_STATE__JOB_CANCELLED));
    Npubench__Job *j = get_job(&e, soon[0]);
    assert_int_equal(strncmp(j->error, "expired:", 8), 0);
    assert_int_equal(j->expires_unix_ms, j->created_unix_ms + 200);
    assert_true(j->finished_unix_ms >= j->expires_unix_ms);
    nb_wire_free(j);
    j = get_job(&e, never[0]);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_QUEUED);
    assert_int_equal(j->expires_unix_ms, 0);
    nb_wire_free(j);
    j = get_job(&e, dflt[0]);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_QUEUED);
    assert_int_equal(j->expires_unix_ms - j->created_unix_ms, 3600 * 1000);
    nb_wire_free(j);

    /* An expiry that passes while the coordinator is down. */
    submit_expire_ms = 400;
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "nobody-serves-this", 4, 0, 0, 0, NULL,
                            later, &n, msg, sizeof msg), 0);
    submit_expire_ms = 0;
    j = get_job(&e, later[0]);
    int64_t exp = j->expires_unix_ms;
    nb_wire_free(j);
    stop(&e);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE id = %lld AND state = 'queued'",
                              (long long)later[0]), 1);
    assert_true(tu_poll(5000, nb_wall_ms() > exp));
    char db[1200];
    snprintf(db, sizeof db, "%s", e.db);
    start_db = db;
    start(&e, NULL, NULL);
    start_db = NULL;
    assert_true(tu_poll(5000, job_state(&e, later[0]) == NPUBENCH__JOB_STATE__JOB_CANCELLED));
    assert_int_equal(job_state(&e, never[0]), NPUBENCH__JOB_STATE__JOB_QUEUED);
    stop(&e);
    /* the CLI reads it as expired: exit 5 */
    char args[64];
    snprintf(args, sizeof args, "job %lld", (long long)later[0]);
    expect_cli(db, 5, "", args);
    snprintf(args, sizeof args, "job %lld", (long long)never[0]);
    expect_cli(db, 5, "", args); /* still queued: pending, also 5 */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' jobs --outcome expired --json --db '%s'",
             tu_env("NB_BIN", "npubench"), db);
    tu_result r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    char want[64];
    snprintf(want, sizeof want, "\"job_id\":%lld,", (long long)later[0]);
    assert_non_null(strstr(r.out, want));
    snprintf(want, sizeof want, "\"job_id\":%lld,", (long long)never[0]);
    assert_null(strstr(r.out, want));
    free(r.out);
}

static void test_import_and_history_cli(void **s)
{
    (void)s;
    char cmd[8192], db[1200];
    snprintf(db, sizeof db, "%s/import.db", tu_group_tmp());
    const char *bin = tu_env("NB_BIN", "npubench"), *src = tu_env("NB_SRC", ".");
    snprintf(cmd, sizeof cmd, "'%s' import '%s/tests/data/db/history.ndjson' --db '%s'", bin, src,
             db);
    tu_result r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "5 runs imported, 0 already stored, 0 bad"));
    free(r.out);
    r = tu_run(cmd); /* idempotent */
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "0 runs imported, 5 already stored"));
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' import '%s/tests/data/db/history_bad.ndjson' --db '%s'", bin,
             src, db);
    r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "history_bad.ndjson:"));
    assert_null(strstr(r.out, "import-")); /* the coordinator's temporary copy is not named */
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' history --model Llama-3.2-1B-Instruct --metric ttft --db '%s'",
             bin, db);
    r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "npu-strix-01"));
    assert_non_null(strstr(r.out, "418.20"));
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' history --model Llama-3.2-1B-Instruct --since 2025-03-11 "
             "--json --db '%s'", bin, db);
    r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "2025-03-10T"));
    assert_non_null(strstr(r.out, "\"source\":\"import\""));
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' history --since yesterday --db '%s'", bin, db);
    r = tu_run(cmd);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "--since"));
    free(r.out);
    /* submit without a coordinator is a usage error; an unreachable one exit 3 */
    snprintf(cmd, sizeof cmd, "env -u NPUBENCH_COORDINATOR '%s' submit run", bin);
    r = tu_run(cmd);
    assert_int_equal(r.code, 2);
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' workers --coordinator ipc://%s/nothing-here", bin,
             tu_group_tmp());
    r = tu_run(cmd);
    assert_int_equal(r.code, 3);
    free(r.out);
}

/* ---- durability faults ---- */

/* A result that cannot be stored fails ReportResult as UNAVAILABLE (the worker retries under
 * the same request id, which is not answered from the cache) and writes nothing; the retry
 * once the disk has room is accepted and `job ID` shows the whole result. */
static void result_store_failure_retried(const char *key)
{
    env e;
    int64_t ids[8];
    char *w;
    Npubench__Lease *l = start_keyed_with_lease(&e, key, &w, ids);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    uint64_t rid = nb_rpc_client_new_id(e.cli);
    int acc = -1;
    setenv("NPUBENCH_FAULT", "result_store", 1);
    assert_int_equal(report_id(&e, rid, w, l, res, &acc), NB_RPC_UNAVAILABLE);
    assert_int_equal(acc, -1);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 0);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE id = %lld AND state IN "
                                  "('leased','running')", ids[0]), 1);
    unsetenv("NPUBENCH_FAULT");
    assert_int_equal(report_id(&e, rid, w, l, res, &acc), 0);
    assert_int_equal(acc, 1);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 1);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM job_results WHERE job_id = %lld",
                              ids[0]), 1);
    Npubench__Job *j = get_job(&e, ids[0]);
    assert_int_equal(j->state, NPUBENCH__JOB_STATE__JOB_DONE);
    assert_int_equal(j->n_results, 1);
    assert_int_equal(j->results[0]->metrics->n_samples, 5);
    nb_wire_free(j);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* Without keys and with them (issue 24: the signed retry was refused as a replay,
 * ALREADY_EXISTS, and the result lost). */
static void test_result_store_failure_retried(void **s)
{
    (void)s;
    result_store_failure_retried(NULL);
    result_store_failure_retried("store-key");
}

/* ---- a SQLite VFS that counts syncs: the default VFS with xSync wrapped ---- */

static sqlite3_vfs *real_vfs, count_vfs;
/* each set of real methods (the unix VFS has one for the database, another for its WAL)
 * and its copy whose xSync counts */
static struct {
    const sqlite3_io_methods *real;
    sqlite3_io_methods counting;
} methods[8];
static int n_methods, n_syncs;

static int count_sync(sqlite3_file *f, int flags)
{
    __atomic_fetch_add(&n_syncs, 1, __ATOMIC_RELAXED);
    int n = __atomic_load_n(&n_methods, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (f->pMethods == &methods[i].counting)
            return methods[i].real->xSync(f, flags);
    return SQLITE_IOERR_FSYNC;
}

/* The real VFS opens the file in place; its methods are swapped for the counting copy. */
static int count_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)v;
    int rc = real_vfs->xOpen(real_vfs, name, f, flags, out);
    if (rc != SQLITE_OK || !f->pMethods)
        return rc;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < n_methods && methods[i].real != f->pMethods)
        i++;
    if (i == n_methods && n_methods < 8) {
        methods[i].real = f->pMethods;
        methods[i].counting = *f->pMethods;
        methods[i].counting.xSync = count_sync;
        __atomic_store_n(&n_methods, n_methods + 1, __ATOMIC_RELEASE);
    }
    if (i < n_methods)
        f->pMethods = &methods[i].counting;
    pthread_mutex_unlock(&mu);
    return rc;
}

static void count_syncs_install(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    assert_non_null(real_vfs);
    count_vfs = *real_vfs;
    count_vfs.zName = "nbtest-count";
    count_vfs.xOpen = count_open;
    assert_int_equal(sqlite3_vfs_register(&count_vfs, 1), SQLITE_OK);
}

static void count_syncs_remove(void)
{
    sqlite3_vfs_unregister(&count_vfs);
    sqlite3_vfs_register(real_vfs, 1);
}

/* Acknowledged is durable (keys on): every acknowledged submit and result was fsync()ed
 * before its answer (synchronous=FULL: >= 1 sync each); the benchmark setting
 * (sync_normal) shows the test can tell: 20 submits make next to no syncs there. */
static void test_acknowledged_is_durable(void **s)
{
    (void)s;
    count_syncs_install();
    for (int normal = 0; normal < 2; normal++) {
        env e;
        start_sync_normal = normal;
        start(&e, "durable-key", "durable-key");
        start_sync_normal = 0;
        int st;
        char *w = reg(&e, "b1", "cpu:0", "inst-a", NULL, &st);
        assert_non_null(w);
        int64_t ids[8];
        size_t n;
        char msg[512];
        int before = __atomic_load_n(&n_syncs, __ATOMIC_RELAXED);
        for (int i = 0; i < 20; i++)
            assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL,
                                    ids, &n, msg, sizeof msg),
                             0);
        int submits = __atomic_load_n(&n_syncs, __ATOMIC_RELAXED) - before;
        Npubench__Lease *l = lease(&e, w, 2000);
        assert_non_null(l);
        Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
        int acc = 0;
        before = __atomic_load_n(&n_syncs, __ATOMIC_RELAXED);
        assert_int_equal(report(&e, w, l, res, &acc), 0);
        assert_int_equal(acc, 1);
        int results = __atomic_load_n(&n_syncs, __ATOMIC_RELAXED) - before;
        print_message("synchronous=%s: 20 submits made %d syncs, 1 result %d\n",
                      normal ? "NORMAL" : "FULL", submits, results);
        if (normal) {
            assert_true(submits < 10);
        } else {
            assert_true(submits >= 20);
            assert_true(results >= 1);
        }
        nb_jobpb_free(res);
        nb_wire_free(l);
        free(w);
        stop(&e);
    }
    count_syncs_remove();
}

/* A full disk refuses new work with RESOURCE_EXHAUSTED naming the free space, while the
 * result of a job already accepted still commits. */
static void test_disk_full_refuses_new_work(void **s)
{
    (void)s;
    env e;
    int64_t ids[8];
    size_t n;
    char msg[512];
    char *w;
    Npubench__Lease *l = start_keyed_with_lease(&e, "disk-key", &w, ids);
    setenv("NPUBENCH_FAULT", "disk_full", 1);
    int64_t more[8];
    assert_int_equal(submit(&e, NPUBENCH__JOB_KIND__RUN, "instruct", 8, 0, 0, 0, NULL, more, &n,
                            msg, sizeof msg),
                     NB_RPC_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(msg, "coordinator disk full: 0 MiB free in "));
    assert_non_null(strstr(msg, "new work needs at least 64 MiB (--min-free-mb)"));
    Npubench__ImportRequest ir = NPUBENCH__IMPORT_REQUEST__INIT;
    ir.name = "h.ndjson";
    assert_int_equal(call(&e, "npubench.Client/Import", &ir, NULL, NULL, msg, sizeof msg),
                     NB_RPC_RESOURCE_EXHAUSTED);
    Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
    int acc = 0;
    assert_int_equal(report(&e, w, l, res, &acc), 0);
    assert_int_equal(acc, 1);
    /* a submit refused for the full disk, resent under the same request id once there is
     * room, is executed (keys on: not refused as a replay) */
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    spec.n_tokens = 8;
    Npubench__SubmitJobRequest sr = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    sr.request_id = "disk-full-retry";
    sr.spec = &spec;
    uint64_t rid = nb_rpc_client_new_id(e.cli);
    assert_int_equal(call_id(&e, rid, "npubench.Client/SubmitJob", &sr, NULL, NULL, msg,
                             sizeof msg),
                     NB_RPC_RESOURCE_EXHAUSTED);
    unsetenv("NPUBENCH_FAULT");
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 1);
    assert_int_equal(call_id(&e, rid, "npubench.Client/SubmitJob", &sr, NULL, NULL, msg,
                             sizeof msg),
                     NB_RPC_OK);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 2);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE job_id = %lld", ids[0]), 1);
    nb_jobpb_free(res);
    nb_wire_free(l);
    free(w);
    stop(&e);
}

/* A second coordinator on the same database is refused, naming the holder's pid. */
static void test_second_coordinator_refused(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    o.listen_url = "inproc://svc-api-second";
    o.db_path = e.db;
    o.quiet = 1;
    nb_coord *second = NULL;
    nb_err err = {0};
    assert_int_equal(nb_coord_start(&o, &second, &err), NB_EUNAVAIL);
    assert_null(second);
    char want[64];
    snprintf(want, sizeof want, "in use by another coordinator (pid %ld, lock ", (long)getpid());
    assert_non_null(strstr(err.msg, want));
    stop(&e);
    /* once the first stopped, the file is free again */
    assert_int_equal(nb_coord_start(&o, &second, &err), NB_OK);
    nb_coord_stop(second);
}

/* A hard link or a symlink to a served database is the same file: a second coordinator on
 * it is refused (the lock is the file's, not its name's); once the first stops, the other
 * name serves. */
static void test_second_coordinator_other_name_refused(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    char hard[1300], soft[1300];
    snprintf(hard, sizeof hard, "%s.hardlink", e.db);
    snprintf(soft, sizeof soft, "%s.symlink", e.db);
    assert_int_equal(link(e.db, hard), 0);
    assert_int_equal(symlink(e.db, soft), 0);
    const char *names[] = {hard, soft};
    for (int i = 0; i < 2; i++) {
        nb_coord_opts o;
        memset(&o, 0, sizeof o);
        o.listen_url = "inproc://svc-api-second-name";
        o.db_path = names[i];
        o.quiet = 1;
        nb_coord *second = NULL;
        nb_err err = {0};
        assert_int_equal(nb_coord_start(&o, &second, &err), NB_EUNAVAIL);
        assert_null(second);
        assert_non_null(strstr(err.msg, "is in use by another coordinator under another name"));
    }
    stop(&e);
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    o.listen_url = "inproc://svc-api-second-name";
    o.db_path = hard;
    o.quiet = 1;
    nb_coord *second = NULL;
    nb_err err = {0};
    assert_int_equal(nb_coord_start(&o, &second, &err), NB_OK);
    nb_coord_stop(second);
}

/* A TCP connection to 127.0.0.1:port (receive timeout ms), or -1. */
static int tcp_to(int port, int ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until EOF or the receive timeout: 1 when the server closed the connection. */
static int closed_by_server(int fd)
{
    char buf[512];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0)
            return 1;
        if (r < 0)
            return errno == ECONNRESET;
    }
}

/* Slowloris (keys on): 200 connections to the dashboard that never finish their headers.
 * Past the cap (32 here) they are answered 503 and closed at once; the rest are closed at
 * the request deadline (600 ms here); the RPC port answers all along, and afterwards the
 * dashboard serves a whole request again. Bounded and on loopback only. */
static void test_dashboard_slowloris(void **s)
{
    (void)s;
    env e;
    memset(&e, 0, sizeof e);
    snprintf(e.db, sizeof e.db, "%s/slowloris.sqlite", tu_group_tmp());
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    o.listen_url = "tcp://127.0.0.1:0";
    o.http_url = "http://127.0.0.1:0";
    o.db_path = e.db;
    o.quiet = 1;
    o.secret = "slowloris-key-0123456789";
    o.http_max_conns = 32;
    o.http_request_timeout_ms = 600;
    nb_err err = {0};
    assert_int_equal(nb_coord_start(&o, &e.coord, &err), NB_OK);
    nb_rpc_opts co;
    memset(&co, 0, sizeof co);
    co.secret = o.secret;
    co.timeout_ms = 5000;
    assert_int_equal(nb_rpc_client_open(nb_coord_url(e.coord), &co, &e.cli, &err), NB_OK);
    int port = 0;
    assert_int_equal(sscanf(nb_coord_http_url(e.coord), "http://127.0.0.1:%d", &port), 1);
    enum { N = 200 };
    int fds[N];
    double t0 = nb_now_ms();
    for (int i = 0; i < N; i++) {
        fds[i] = tcp_to(port, 3000);
        assert_true(fds[i] >= 0);
        const char *part = "GET /index.html HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        assert_true(send(fds[i], part, strlen(part), MSG_NOSIGNAL) > 0);
    }
    /* the RPC port serves while the dashboard is flooded */
    Npubench__ListJobsRequest lr = NPUBENCH__LIST_JOBS_REQUEST__INIT;
    char msg[512];
    assert_int_equal(call(&e, "npubench.Client/ListJobs", &lr, NULL, NULL, msg, sizeof msg), 0);
    /* every one of them is closed by the server, none held past the deadline */
    int closed = 0;
    for (int i = 0; i < N; i++) {
        closed += closed_by_server(fds[i]);
        close(fds[i]);
    }
    double took = nb_now_ms() - t0;
    print_message("%d of %d half-open dashboard connections closed by the server in %.0f ms\n",
                  closed, N, took);
    assert_int_equal(closed, N);
    assert_true(took < 3000);
    assert_int_equal(call(&e, "npubench.Client/ListJobs", &lr, NULL, NULL, msg, sizeof msg), 0);
    /* a whole request is answered again */
    int fd = tcp_to(port, 5000);
    assert_true(fd >= 0);
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /index.html HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n",
                     o.secret);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    char buf[64] = "";
    assert_true(recv(fd, buf, sizeof buf - 1, 0) > 12);
    assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
    close(fd);
    stop(&e);
}

/* Empty Import content (a NULL buffer of 0 bytes) imports nothing and says so. */
static void test_empty_import(void **s)
{
    (void)s;
    env e;
    start(&e, NULL, NULL);
    Npubench__ImportRequest ir = NPUBENCH__IMPORT_REQUEST__INIT;
    ir.name = "empty.ndjson";
    Npubench__ImportResponse *resp;
    assert_int_equal(call(&e, "npubench.Client/Import", &ir, &npubench__import_response__descriptor,
                          &resp, NULL, 0),
                     0);
    assert_int_equal(resp->imported, 0);
    assert_int_equal(resp->skipped, 0);
    assert_int_equal(resp->bad, 0);
    nb_wire_free(resp);
    stop(&e);
}

/* Retention at start: temporary uploads older than an hour and legacy result files older
 * than --retention-days go; a fresh upload and a young result stay. */
static void test_retention_at_start(void **s)
{
    (void)s;
    char db[1200], dir[1300], path[1400];
    snprintf(db, sizeof db, "%s/retention.sqlite", tu_group_tmp());
    snprintf(dir, sizeof dir, "%s.d", db);
    assert_int_equal(mkdir(dir, 0755), 0);
    const char *names[] = {"import-old", "import-new", "job-1.pb", "job-2.pb", "notes.txt"};
    const int age_h[] = {2, 0, 24 * 40, 24 * 2, 24 * 400};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
        time_t t = time(NULL) - (time_t)age_h[i] * 3600;
        struct utimbuf ut = {t, t};
        assert_int_equal(utime(path, &ut), 0);
    }
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    o.listen_url = "inproc://svc-api-retention";
    o.db_path = db;
    o.retention_days = 30;
    o.quiet = 1;
    nb_coord *c;
    nb_err err;
    assert_int_equal(nb_coord_start(&o, &c, &err), NB_OK);
    const int kept[] = {0, 1, 0, 1, 1}; /* notes.txt is not ours to delete */
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (access(path, F_OK) != (kept[i] ? 0 : -1))
            fail_msg("%s: expected %s", names[i], kept[i] ? "kept" : "deleted");
    }
    nb_coord_stop(c);
}

/* The coordinator's log: a newline in a client's string stays on its line (escaped), and one
 * kind of line prints at most 20 times per window however often a client triggers it. */
static void test_log_escaped_and_rate_limited(void **s)
{
    (void)s;
    char path[1300];
    snprintf(path, sizeof path, "%s/coord-log.txt", tu_group_tmp());
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    close(fd);
    loud = 1;
    start_log_window_ms = 3000; /* > the flood's 30 calls, even on a loaded host */
    env e;
    start(&e, NULL, NULL);
    loud = 0;
    start_log_window_ms = 0;
    /* Every Import is logged with the name the client gave (its control characters made
     * '_'): a flood of them, each name carrying a forged log line. */
    Npubench__ImportRequest ir = NPUBENCH__IMPORT_REQUEST__INIT;
    ir.name = "evil\n2026-01-01T00:00:00Z npubench coordinator: forged";
    int failed = 0;
    for (int i = 0; i < 30; i++) {
        Npubench__ImportResponse *resp;
        if (call(&e, "npubench.Client/Import", &ir, &npubench__import_response__descriptor,
                 &resp, NULL, 0))
            failed++;
        else
            nb_wire_free(resp);
    }
    /* the flood stopped: its count comes when the window ends, with no line of its kind
     * after it (the coordinator still runs) */
    char cmdline[1500];
    snprintf(cmdline, sizeof cmdline,
             "grep -c '10 more lines like \"import %%s: %%zu imported' '%s'", path);
    double end = nb_now_ms() + 8000;
    int counted = 0;
    while (!counted && nb_now_ms() < end) {
        usleep(50 * 1000);
        fflush(stderr);
        tu_result r = tu_run(cmdline);
        counted = r.out && atoi(r.out) == 1;
        free(r.out);
    }
    stop(&e);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    assert_int_equal(failed, 0);
    if (!counted) {
        tu_result r;
        snprintf(cmdline, sizeof cmdline, "cat '%s'", path);
        r = tu_run(cmdline);
        fail_msg("no count of the suppressed lines while running:\n%s", r.out ? r.out : "");
    }
    snprintf(cmdline, sizeof cmdline, "grep -c 'import evil_2026' '%s'", path);
    tu_result r = tu_run(cmdline);
    assert_int_equal(atoi(r.out), 20); /* the burst, then silence */
    free(r.out);
    snprintf(cmdline, sizeof cmdline, "grep -c '^2026-01-01T00:00:00Z' '%s'", path);
    r = tu_run(cmdline);
    assert_int_equal(atoi(r.out), 0);
    free(r.out);
}

/* ---- exactly once under many clients ---- */

typedef struct load {
    env *e;                 /* shared coordinator; each thread opens its own client */
    int index, jobs;        /* this client's index and how many jobs it submits */
    int submitted, dup_acks, errors; /* checked by the main thread */
    pthread_t th;
} load;

static int open_client(env *e, nb_rpc_client **cli)
{
    nb_rpc_opts co;
    memset(&co, 0, sizeof co);
    co.timeout_ms = 20000;
    nb_err err;
    return nb_rpc_client_open(nb_coord_url(e->coord), &co, cli, &err) ? -1 : 0;
}

/* Submits each job twice under one request id (a client retry after a lost answer). */
static void *submitter(void *arg)
{
    load *L = arg;
    env t = *L->e;
    if (open_client(L->e, &t.cli)) {
        L->errors++;
        return NULL;
    }
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    spec.selector = &sel;
    sel.model = "instruct";
    spec.n_tokens = 4;
    Npubench__SubmitJobRequest r = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    r.spec = &spec;
    char key[64];
    r.request_id = key;
    for (int i = 0; i < L->jobs; i++) {
        snprintf(key, sizeof key, "load-%d-%d", L->index, i);
        int64_t first = 0;
        for (int attempt = 0; attempt < 2; attempt++) {
            Npubench__SubmitJobResponse *resp;
            if (call(&t, "npubench.Client/SubmitJob", &r,
                     &npubench__submit_job_response__descriptor, &resp, NULL, 0) ||
                resp->n_job_ids != 1) {
                L->errors++;
                continue;
            }
            if (attempt == 0) {
                first = resp->job_ids[0];
                L->submitted++;
            } else if (resp->duplicate && resp->job_ids[0] == first) {
                L->dup_acks++;
            }
            nb_wire_free(resp);
        }
    }
    nb_rpc_client_close(t.cli);
    return NULL;
}

/* Leases and reports until `want` results are accepted across all workers. */
typedef struct drain {
    env *e;
    int index, *accepted, want, errors;
    pthread_mutex_t *mu;
    pthread_t th;
} drain;

static void *worker_loop(void *arg)
{
    drain *D = arg;
    env t = *D->e;
    if (open_client(D->e, &t.cli)) {
        D->errors++;
        return NULL;
    }
    char dev[16], inst[16];
    snprintf(dev, sizeof dev, "cpu:%d", D->index);
    snprintf(inst, sizeof inst, "load-%d", D->index);
    int st;
    char *w = reg(&t, "b1", dev, inst, NULL, &st);
    for (;;) {
        pthread_mutex_lock(D->mu);
        int done = *D->accepted >= D->want;
        pthread_mutex_unlock(D->mu);
        if (done || !w || D->errors > 100) /* bounded: a refused worker must not spin */
            break;
        /* No cmocka assertions off the main thread: failures are counted instead. */
        Npubench__Heartbeat hb = NPUBENCH__HEARTBEAT__INIT;
        hb.worker_id = w;
        hb.instance_id = inst;
        hb.lease_id = "";
        Npubench__HeartbeatResponse *hr;
        if (call(&t, "npubench.Worker/Heartbeat", &hb, &npubench__heartbeat_response__descriptor,
                 &hr, NULL, 0) == 0)
            nb_wire_free(hr);
        Npubench__LeaseJobRequest lr = NPUBENCH__LEASE_JOB_REQUEST__INIT;
        lr.worker_id = w;
        lr.instance_id = inst;
        lr.wait_ms = 200;
        Npubench__LeaseJobResponse *resp;
        if (call(&t, "npubench.Worker/LeaseJob", &lr, &npubench__lease_job_response__descriptor,
                 &resp, NULL, 0)) {
            D->errors++;
            continue;
        }
        Npubench__Lease *l = resp->lease;
        resp->lease = NULL;
        nb_wire_free(resp);
        if (!l)
            continue;
        Npubench__JobResult *res = run_result(l->job_id, "b1", 100);
        int acc = 0;
        if (report(&t, w, l, res, &acc))
            D->errors++;
        pthread_mutex_lock(D->mu);
        *D->accepted += acc;
        pthread_mutex_unlock(D->mu);
        nb_jobpb_free(res);
        nb_wire_free(l);
    }
    free(w);
    nb_rpc_client_close(t.cli);
    return NULL;
}

/* 8 clients submit (each job twice, one request id) while 4 workers drain the queue: every
 * job exists once and has exactly one run. 8 x 125 = 1,000 jobs by default; NB_FAULTS_FULL=1
 * (make test-faults) runs the issue's 8 x 2,000 = 16,000. */
static void test_many_clients_exactly_once(void **s)
{
    (void)s;
    int per = getenv("NB_FAULTS_FULL") ? 2000 : 125;
    env e;
    /* 12 threads on 2 cores under ASan can leave a worker 600 ms between heartbeats */
    start_patient(&e);
    load L[8];
    for (int i = 0; i < 8; i++) {
        L[i] = (load){.e = &e, .index = i, .jobs = per};
        assert_int_equal(pthread_create(&L[i].th, NULL, submitter, &L[i]), 0);
    }
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int accepted = 0;
    drain D[4];
    for (int i = 0; i < 4; i++) {
        D[i] = (drain){.e = &e, .index = i, .accepted = &accepted, .want = 8 * per, .mu = &mu};
        assert_int_equal(pthread_create(&D[i].th, NULL, worker_loop, &D[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(L[i].th, NULL);
        assert_int_equal(L[i].errors, 0);
        assert_int_equal(L[i].submitted, per);
        assert_int_equal(L[i].dup_acks, per);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(D[i].th, NULL);
        assert_int_equal(D[i].errors, 0);
    }
    print_message("%d jobs from 8 clients, each submitted twice; 4 workers\n", 8 * per);
    assert_int_equal(accepted, 8 * per);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE %lld = 0", 0), 8 * per);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM jobs WHERE state = 'done' AND %lld = 0",
                              0), 8 * per);
    assert_int_equal(db_count(&e, "SELECT count(*) FROM runs WHERE %lld = 0", 0), 8 * per);
    assert_int_equal(db_count(&e, "SELECT count(DISTINCT job_id) FROM runs WHERE %lld = 0", 0),
                     8 * per);
    stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_requests),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_roles),
        cmocka_unit_test(test_priority_above_limit_needs_admin),
        cmocka_unit_test(test_client_identities_own_jobs),
        cmocka_unit_test(test_forged_result_refused),
        cmocka_unit_test(test_restart_accepted_at_once),
        cmocka_unit_test(test_restart_keeps_running_jobs),
        cmocka_unit_test(test_dtype_enum_in_queue),
        cmocka_unit_test(test_worker_id_takeover_needs_device_claim),
        cmocka_unit_test(test_board_keys),
        cmocka_unit_test(test_replay_after_restart),
        cmocka_unit_test(test_coordinator_clock_and_submit_ids),
        cmocka_unit_test(test_client_paths_and_nul),
        cmocka_unit_test(test_invalid_utf8_refused),
        cmocka_unit_test(test_request_id_other_spec_refused),
        cmocka_unit_test(test_log_lines_escaped),
        cmocka_unit_test(test_queued_reason_and_device_claim),
        cmocka_unit_test(test_lease_result_idempotent_and_cancel),
        cmocka_unit_test(test_lease_expiry_requeues),
        cmocka_unit_test(test_lease_sweep_requeues_while_holder_lives),
        cmocka_unit_test(test_duplicate_request_id_short_circuits),
        cmocka_unit_test(test_shards_merge_like_one_worker),
        cmocka_unit_test(test_shards_stored_on_real_boards),
        cmocka_unit_test(test_shards_need_prompt_ranges),
        cmocka_unit_test(test_matrix_and_history_regression),
        cmocka_unit_test(test_import_and_history_cli),
        cmocka_unit_test(test_result_store_failure_retried),
        cmocka_unit_test(test_disk_full_refuses_new_work),
        cmocka_unit_test(test_acknowledged_is_durable),
        cmocka_unit_test(test_second_coordinator_refused),
        cmocka_unit_test(test_second_coordinator_other_name_refused),
        cmocka_unit_test(test_dashboard_slowloris),
        cmocka_unit_test(test_empty_import),
        cmocka_unit_test(test_retention_at_start),
        cmocka_unit_test(test_log_escaped_and_rate_limited),
        cmocka_unit_test(test_many_clients_exactly_once),
        cmocka_unit_test(test_model_aliases_in_history),
        cmocka_unit_test(test_compare_verdicts),
        cmocka_unit_test(test_queue_expiry),
        cmocka_unit_test(test_board_health),
        cmocka_unit_test(test_drain_takes_effect_in_long_poll),
        cmocka_unit_test(test_matrix_leaves_held_board_out),
        cmocka_unit_test(test_compare_reference_cli),
        cmocka_unit_test(test_compare_verify_prompts),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
