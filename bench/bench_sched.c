/* bench_sched: the coordinator's scheduling cost — per-job overhead on tiny jobs (submit ->
 * lease, result -> committed), jobs/s sustained with several pollers, the same overheads
 * with real workers (nb_daemon) on tiny RUN jobs, and verify-full wall time on 1 vs 2
 * workers. Everything in one process over inproc://, on a throw-away database. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_coord.h"
#include "nb_daemon.h"
#include "nb_jobpb.h"
#include "nb_rpc.h"
#include "nb_runenv.h"
#include "nb_svc.h"
#include "nb_time.h"

static void die(const char *what, const nb_err *e)
{
    fprintf(stderr, "bench_sched: %s: %s\n", what, e ? e->msg : "failed");
    exit(1);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return n ? v[i] : 0;
}

/* ---- a protocol-level poller: leases and answers at once ---- */

typedef struct poller {
    const char *url;
    int index;
    pthread_t th;
    volatile int stop;
    int done;
    nb_rpc_client *cli;
    char id[128];
    char inst[32];         /* the instance id every worker call must carry */
    double *lease_at;      /* per job id: wall ms when the lease arrived */
    double *committed_ms;  /* per job id: ReportResult round trip */
    int max_id;
} poller;

/* The call's nb_code; *e (may be NULL) gets the error. */
static int pcall(nb_rpc_client *cli, const char *m, const void *req,
                 const ProtobufCMessageDescriptor *d, void *resp, nb_err *ep)
{
    uint8_t *pb;
    size_t len;
    nb_err local, *e = ep ? ep : &local;
    if (nb_wire_pack(req, &pb, &len, e))
        die("pack", e);
    uint8_t *out = NULL;
    size_t olen = 0;
    int st = -1;
    nb_code rc = nb_rpc_call(cli, m, pb, len, 15000, &st, NULL, &out, &olen, e);
    free(pb);
    if (!rc && resp && nb_wire_unpack(d, out, olen, 0, resp, e))
        rc = e->code;
    free(out);
    return rc;
}

static Npubench__JobResult *canned(int64_t job)
{
    Npubench__JobResult *r = nb_jobpb_result_new();
    nb_err e;
    r->job_id = job;
    r->outcome = NPUBENCH__OUTCOME__PASS;
    if (nb_runenv_pb_new(NULL, "bench", "cpu", &r->environment, &e))
        die("env", &e);
    r->environment->model = nb_jobpb_strdup("SmolLM2-135M-Instruct");
    r->environment->backend = nb_jobpb_strdup("cpu");
    r->environment->dtype = nb_jobpb_strdup("bf16");
    Npubench__Metrics *m = malloc(sizeof *m);
    npubench__metrics__init(m);
    m->samples = calloc(1, sizeof *m->samples);
    m->samples[0] = malloc(sizeof **m->samples);
    npubench__sample__init(m->samples[0]);
    m->samples[0]->tps = m->tps = 100;
    m->samples[0]->ttft_ms = m->ttft_ms = 10;
    m->n_samples = 1;
    r->metrics = m;
    return r;
}

static void *poller_main(void *arg)
{
    poller *p = arg;
    while (!p->stop) {
        Npubench__LeaseJobRequest lr = NPUBENCH__LEASE_JOB_REQUEST__INIT;
        lr.worker_id = p->id;
        lr.instance_id = p->inst;
        lr.wait_ms = 200;
        Npubench__LeaseJobResponse *resp = NULL;
        nb_err e;
        nb_code rc = pcall(p->cli, "npubench.Worker/LeaseJob", &lr,
                           &npubench__lease_job_response__descriptor, &resp, &e);
        /* a refused lease never turns into a job: retrying it would spin forever */
        if (rc == NB_ETIMEOUT)
            continue;
        if (rc)
            die("LeaseJob", &e);
        Npubench__Lease *l = resp->lease;
        if (l) {
            if (l->job_id < p->max_id)
                p->lease_at[l->job_id] = nb_now_ms();
            Npubench__JobResult *r = canned(l->job_id);
            Npubench__ReportResultRequest rr = NPUBENCH__REPORT_RESULT_REQUEST__INIT;
            rr.worker_id = p->id;
            rr.instance_id = p->inst;
            rr.lease_id = l->lease_id;
            rr.result = r;
            double t0 = nb_now_ms();
            Npubench__ReportResultResponse *ack = NULL;
            if (!pcall(p->cli, "npubench.Worker/ReportResult", &rr,
                       &npubench__report_result_response__descriptor, &ack, NULL)) {
                if (l->job_id < p->max_id)
                    p->committed_ms[l->job_id] = nb_now_ms() - t0;
                p->done++;
                nb_wire_free(ack);
            }
            nb_jobpb_free(r);
        }
        nb_wire_free(resp);
    }
    return NULL;
}

static void poller_start(poller *p, const char *url, int index, double *lease_at,
                         double *committed, int max_id)
{
    memset(p, 0, sizeof *p);
    p->url = url;
    p->index = index;
    p->lease_at = lease_at;
    p->committed_ms = committed;
    p->max_id = max_id;
    nb_err e;
    if (nb_rpc_client_open(url, NULL, &p->cli, &e))
        die("client", &e);
    Npubench__Deployment d = NPUBENCH__DEPLOYMENT__INIT, *dp = &d;
    d.model = "SmolLM2-135M-Instruct";
    d.backend = "cpu";
    d.dtype = "bf16";
    Npubench__WorkerInfo info = NPUBENCH__WORKER_INFO__INIT;
    char dev[16];
    snprintf(dev, sizeof dev, "cpu:%d", index);
    snprintf(p->inst, sizeof p->inst, "bench-%d", index);
    info.board_name = "bench";
    info.host = "bench-host";
    info.device_id = dev;
    info.instance_id = p->inst;
    info.deployments = &dp;
    info.n_deployments = 1;
    Npubench__RegisterRequest rq = NPUBENCH__REGISTER_REQUEST__INIT;
    rq.info = &info;
    Npubench__RegisterResponse *rr = NULL;
    if (pcall(p->cli, "npubench.Worker/Register", &rq, &npubench__register_response__descriptor,
              &rr, &e))
        die("register", &e);
    snprintf(p->id, sizeof p->id, "%s", rr->worker_id);
    nb_wire_free(rr);
    pthread_create(&p->th, NULL, poller_main, p);
}

static void poller_stop(poller *p)
{
    p->stop = 1;
    pthread_join(p->th, NULL);
    nb_rpc_client_close(p->cli);
}

static Npubench__JobSpec run_spec(Npubench__DeploymentSelector *sel, const char *tag)
{
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    npubench__deployment_selector__init(sel);
    sel->model = "instruct";
    static char *tags[1];
    tags[0] = (char *)tag;
    if (tag) {
        sel->tags = tags;
        sel->n_tags = 1;
    }
    s.kind = NPUBENCH__JOB_KIND__RUN;
    s.selector = sel;
    s.n_tokens = 1;
    s.reps = 1;
    return s;
}

static nb_coord *coord_open_sync(const char *url, const char *db, int sync_normal)
{
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    o.listen_url = url;
    o.db_path = db;
    o.quiet = 1;
    o.sync_normal = sync_normal;
    o.heartbeat_ms = 200;
    o.lease_ms = 30000;
    nb_coord *c;
    nb_err e;
    if (nb_coord_start(&o, &c, &e))
        die("coordinator", &e);
    return c;
}

static nb_coord *coord_open(const char *url, const char *db)
{
    return coord_open_sync(url, db, 0);
}

/* The cost of durable acknowledgement: acknowledged submits/s, one at a time, with every
 * commit fsync()ed (synchronous=FULL, the default) against synchronous=NORMAL (survives
 * kill -9, not a power loss), 3 interleaved rounds each on fresh databases; medians. */
static void bench_durable(const char *dir, int n)
{
    double rate[2][3];
    for (int round = 0; round < 3; round++)
        for (int normal = 0; normal < 2; normal++) {
            char url[128], db[1024];
            snprintf(url, sizeof url, "inproc://bench-sched-durable-%d-%d", round, normal);
            snprintf(db, sizeof db, "%s/durable-%d-%d.db", dir, round, normal);
            nb_coord *c = coord_open_sync(url, db, normal);
            nb_svc *svc;
            nb_err e;
            if (nb_svc_open(NULL, url, &svc, &e))
                die("client", &e);
            Npubench__DeploymentSelector sel;
            Npubench__JobSpec spec = run_spec(&sel, NULL);
            double t0 = nb_now_ms();
            for (int i = 0; i < n; i++) {
                int64_t *ids;
                size_t k;
                if (nb_svc_submit(svc, &spec, 0, &ids, &k, &e))
                    die("submit", &e);
                free(ids);
            }
            rate[normal][round] = n / ((nb_now_ms() - t0) / 1000);
            nb_svc_close(svc);
            nb_coord_stop(c);
        }
    printf("| %d acknowledged submits, one at a time | synchronous=FULL (default, fsync per "
           "commit) %.0f submits/s | synchronous=NORMAL %.0f submits/s | durable costs %.2fx |\n",
           n, pct(rate[0], 3, 0.5), pct(rate[1], 3, 0.5), pct(rate[1], 3, 0.5) / pct(rate[0], 3, 0.5));
}

/* Part A: scheduling cost alone, with pollers that answer at once. */
static void bench_protocol(const char *dir, int n_lat, int n_tput, int n_pollers)
{
    char url[128], db[1024];
    snprintf(url, sizeof url, "inproc://bench-sched-a");
    snprintf(db, sizeof db, "%s/a.db", dir);
    nb_coord *c = coord_open(url, db);
    nb_svc *svc;
    nb_err e;
    if (nb_svc_open(NULL, url, &svc, &e))
        die("client", &e);
    int max_id = n_lat + n_tput + 16;
    double *lease_at = calloc((size_t)max_id, sizeof *lease_at);
    double *committed = calloc((size_t)max_id, sizeof *committed);
    double *lat = calloc((size_t)max_id, sizeof *lat), *sub = calloc((size_t)max_id, sizeof *sub),
           *com = calloc((size_t)max_id, sizeof *com);
    poller p[16];
    poller_start(&p[0], url, 0, lease_at, committed, max_id);
    Npubench__DeploymentSelector sel;
    Npubench__JobSpec spec = run_spec(&sel, NULL);
    /* latency: one job in flight at a time */
    for (int i = 0; i < n_lat; i++) {
        double t0 = nb_now_ms();
        int64_t *ids;
        size_t n;
        if (nb_svc_submit(svc, &spec, 0, &ids, &n, &e))
            die("submit", &e);
        double t1 = nb_now_ms();
        int64_t id = ids[0];
        free(ids);
        while (!lease_at[id] || !committed[id])
            usleep(50);
        sub[i] = t1 - t0;
        lat[i] = lease_at[id] - t0;
        com[i] = committed[id];
    }
    printf("| tiny job, 1 poller (n=%d) | submit RPC %.2f ms (p99 %.2f) | submit -> lease %.2f ms "
           "(p99 %.2f) | result -> committed %.2f ms (p99 %.2f) |\n",
           n_lat, pct(sub, n_lat, 0.5), pct(sub, n_lat, 0.99), pct(lat, n_lat, 0.5),
           pct(lat, n_lat, 0.99), pct(com, n_lat, 0.5), pct(com, n_lat, 0.99));
    for (int i = 1; i < n_pollers; i++)
        poller_start(&p[i], url, i, lease_at, committed, max_id);
    /* throughput: a backlog drained by n_pollers */
    int before = 0;
    for (int i = 0; i < n_pollers; i++)
        before += p[i].done;
    double t0 = nb_now_ms();
    for (int i = 0; i < n_tput; i++) {
        int64_t *ids;
        size_t n;
        if (nb_svc_submit(svc, &spec, 0, &ids, &n, &e))
            die("submit", &e);
        free(ids);
    }
    double t_sub = nb_now_ms() - t0;
    for (;;) {
        int d = 0;
        for (int i = 0; i < n_pollers; i++)
            d += p[i].done;
        if (d - before >= n_tput)
            break;
        usleep(1000);
    }
    double t_all = nb_now_ms() - t0;
    printf("| %d tiny jobs, %d pollers | submitted at %.0f jobs/s | completed at %.0f jobs/s "
           "sustained | |\n",
           n_tput, n_pollers, n_tput / (t_sub / 1000), n_tput / (t_all / 1000));
    for (int i = 0; i < n_pollers; i++)
        poller_stop(&p[i]);
    nb_svc_close(svc);
    nb_coord_stop(c);
    free(lease_at);
    free(committed);
    free(lat);
    free(sub);
    free(com);
}

/* ---- real workers ---- */

static nb_daemon *daemon_open(const char *url, int dev, const char *tag)
{
    nb_daemon_opts o;
    memset(&o, 0, sizeof o);
    char device[16];
    snprintf(device, sizeof device, "cpu:%d", dev);
    const char *tags[1] = {tag};
    o.coordinator_url = url;
    o.board_name = "bench";
    o.device = device;
    o.tags = tags;
    o.n_tags = 1;
    o.threads = 1;
    o.quiet = 1;
    o.heartbeat_ms = 200;
    nb_daemon *d;
    nb_err e;
    if (nb_daemon_start(&o, &d, &e))
        die("worker", &e);
    /* the deployment is set up before registering: seconds, far more under a sanitizer */
    for (int i = 0; i < 12000; i++) {
        char id[128];
        nb_daemon_worker_id(d, id, sizeof id);
        if (id[0])
            return d;
        usleep(5000);
    }
    die("worker: not registered within 60 s", NULL);
    return NULL;
}

static Npubench__Job *run_job(nb_svc *svc, Npubench__JobSpec *spec, int shards, double *wall)
{
    nb_err e;
    int64_t *ids;
    size_t n;
    double t0 = nb_now_ms();
    if (nb_svc_submit(svc, spec, shards, &ids, &n, &e))
        die("submit", &e);
    Npubench__Job *j;
    if (nb_svc_wait(svc, ids[0], 0, NULL, NULL, &j, &e))
        die("wait", &e);
    *wall = nb_now_ms() - t0;
    free(ids);
    if (j->state != NPUBENCH__JOB_STATE__JOB_DONE)
        fprintf(stderr, "bench_sched: job %lld ended %d: %s\n", (long long)j->job_id, j->state,
                j->error);
    return j;
}

/* Part B: one in-process worker on tiny RUN jobs; part C: verify-full on worker processes. */
static void bench_workers(const char *dir, int n_tiny, int verify_tokens, int verify_prompts,
                          const char *npubench)
{
    char url[128], db[1024];
    snprintf(url, sizeof url, "inproc://bench-sched-b");
    snprintf(db, sizeof db, "%s/b.db", dir);
    nb_coord *c = coord_open(url, db);
    nb_svc *svc;
    nb_err e;
    if (nb_svc_open(NULL, url, &svc, &e))
        die("client", &e);
    nb_daemon *w1 = daemon_open(url, 240, "bench");
    Npubench__DeploymentSelector sel;
    Npubench__JobSpec spec = run_spec(&sel, "bench");
    Npubench__KeyValue kv = NPUBENCH__KEY_VALUE__INIT, *kvp = &kv;
    kv.key = "warmup";
    kv.value = "0";
    spec.params = &kvp;
    spec.n_params = 1;
    double wall;
    nb_wire_free(run_job(svc, &spec, 0, &wall)); /* sets the deployment up */
    double *start = calloc((size_t)n_tiny, sizeof *start),
           *commit = calloc((size_t)n_tiny, sizeof *commit),
           *walls = calloc((size_t)n_tiny, sizeof *walls),
           *exec = calloc((size_t)n_tiny, sizeof *exec);
    for (int i = 0; i < n_tiny; i++) {
        Npubench__Job *j = run_job(svc, &spec, 0, &walls[i]);
        if (j->n_results) {
            /* the worker's own start (same host clock) */
            start[i] = (double)(j->results[0]->started_unix_ms - j->created_unix_ms);
            commit[i] = (double)(j->finished_unix_ms - j->results[0]->finished_unix_ms);
            exec[i] = (double)(j->results[0]->finished_unix_ms - j->results[0]->started_unix_ms);
        }
        nb_wire_free(j);
    }
    printf("| tiny RUN (1 token, 1 rep), real worker (n=%d) | submit -> worker start %.0f ms "
           "(p99 %.0f) | result -> committed %.0f ms (p99 %.0f) | job %.0f ms of %.0f ms wall |\n",
           n_tiny, pct(start, n_tiny, 0.5), pct(start, n_tiny, 0.99), pct(commit, n_tiny, 0.5),
           pct(commit, n_tiny, 0.99), pct(exec, n_tiny, 0.5), pct(walls, n_tiny, 0.5));
    nb_daemon_stop(w1, 0);
    nb_svc_close(svc);
    nb_coord_stop(c);
    free(start);
    free(commit);
    free(walls);
    free(exec);

    /* verify-full, 1 vs 2 workers: separate `npubench worker` processes (the
     * kernels' thread pool is per process), both set up first. */
    char curl[1200];
    snprintf(curl, sizeof curl, "ipc://%s/c.sock", dir);
    snprintf(db, sizeof db, "%s/c.db", dir);
    c = coord_open(curl, db);
    if (nb_svc_open(NULL, curl, &svc, &e))
        die("client", &e);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        char dev[16];
        snprintf(dev, sizeof dev, "cpu:%d", 242 + i);
        pids[i] = fork();
        if (pids[i] == 0) {
            execl(npubench, npubench, "worker", "--coordinator", curl, "--board", "bench",
                  "--device", dev, "--threads", "1", "--tag", "bench", "--heartbeat-ms", "200",
                  "--quiet", (char *)NULL);
            _exit(127);
        }
    }
    for (int tries = 0;; tries++) {
        Npubench__ListWorkersRequest lw = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
        Npubench__ListWorkersResponse *ws;
        size_t alive = 0;
        if (nb_svc_call(svc, "ListWorkers", &lw, &npubench__list_workers_response__descriptor,
                        &ws, &e) == NB_OK) {
            for (size_t i = 0; i < ws->n_workers; i++)
                alive += ws->workers[i]->alive;
            nb_wire_free(ws);
        }
        if (alive >= 2)
            break;
        if (tries > 300)
            die("worker processes did not register", NULL);
        usleep(50000);
    }
    Npubench__JobSpec vf = spec;
    vf.kind = NPUBENCH__JOB_KIND__VERIFY_FULL;
    vf.n_tokens = verify_tokens;
    vf.max_prompts = verify_prompts;
    vf.reps = 0;
    vf.params = NULL;
    vf.n_params = 0;
    Npubench__Job *j = run_job(svc, &vf, 2, &wall); /* warm-up: sets up both */
    nb_wire_free(j);
    double w_one, w_two;
    j = run_job(svc, &vf, 1, &w_one);
    int pass1 = j->n_results && j->results[0]->outcome == NPUBENCH__OUTCOME__PASS;
    nb_wire_free(j);
    j = run_job(svc, &vf, 2, &w_two);
    int pass2 = j->n_results && j->results[0]->outcome == NPUBENCH__OUTCOME__PASS;
    nb_wire_free(j);
    printf("| verify-full, %d prompts x %d tokens, 1 thread per worker | 1 worker %.1f s (%s) | "
           "2 workers (2 shards) %.1f s (%s) | speed-up %.2fx |\n",
           verify_prompts, verify_tokens, w_one / 1000, pass1 ? "PASS" : "FAIL", w_two / 1000,
           pass2 ? "PASS" : "FAIL", w_one / w_two);
    for (int i = 0; i < 2; i++) {
        kill(pids[i], SIGKILL); /* idle workers; the database is thrown away */
        waitpid(pids[i], NULL, 0);
    }
    nb_svc_close(svc);
    nb_coord_stop(c);
}

int main(int argc, char **argv)
{
    int n_lat = 200, n_tput = 2000, pollers = 4, n_tiny = 20, vtok = 32, vprompts = 8,
        skip_workers = 0, n_durable = 500;
    /* the binary the worker processes run: $NB_BIN, else next to this bench */
    const char *npubench = getenv("NB_BIN");
    char self[1024];
    if (!npubench || !*npubench) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
        self[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(self, '/');
        snprintf(slash ? slash + 1 : self, 32, "../npubench");
        npubench = self;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            n_lat = 50;
            n_tput = 300;
            n_tiny = 5;
            vtok = 8;
            n_durable = 100;
        } else if (!strcmp(argv[i], "--no-workers")) {
            skip_workers = 1;
        } else if (!strcmp(argv[i], "--verify-tokens") && i + 1 < argc) {
            vtok = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--verify-prompts") && i + 1 < argc) {
            vprompts = atoi(argv[++i]);
            if (vprompts < 2 || vprompts > 8) { /* 2 shards need 2 prompts; the set has 8 */
                fprintf(stderr, "bench_sched: --verify-prompts %d: expected 2..8\n", vprompts);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_sched [--quick] [--no-workers] [--verify-tokens N] "
                            "[--verify-prompts N]\n"
                            "(worker processes run $NB_BIN, default ../npubench next to it)\n");
            return 2;
        }
    }
    char dir[] = "/tmp/bench_sched.XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp", NULL);
    printf("| What | | | |\n|---|---|---|---|\n");
    bench_protocol(dir, n_lat, n_tput, pollers);
    bench_durable(dir, n_durable);
    if (!skip_workers)
        bench_workers(dir, n_tiny, vtok, vprompts, npubench);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fprintf(stderr, "bench_sched: could not remove %s\n", dir);
    return 0;
}
