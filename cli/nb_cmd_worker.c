/* nb_cmd_worker: the worker commands — `npubench worker`, a long-lived worker that owns one
 * device and serves the coordinator's jobs (flags -> nb_daemon_opts), and `workers`. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_daemon.h"
#include "nb_deployments.h"
#include "nb_file.h"
#include "nb_job.h"
#include "nb_limits.h"
#include "nb_out.h"
#include "nb_secret.h"
#include "nb_svc.h"

int nb_cmd_worker(int argc, char **argv)
{
    nb_daemon_opts o = {.device = "cpu:0"};
    const char *secret = NULL, *secret_file = NULL, *board_key_file = NULL;
    nb_strlist tags = {{0}, 0}, deploy = {{0}, 0};
    int mem_mb = 0, help = 0;
    nb_opt opts[] = {
        {"coordinator", NB_OPT_STR, &o.coordinator_url, 0, 0, "coordinator URL (tcp://host:port, ipc://path)"},
        {"board", NB_OPT_STR, &o.board_name, 0, 0, "this board's name (required)"},
        {"board-type", NB_OPT_STR, &o.board_type, 0, 0, "board type, e.g. strix"},
        {"tag", NB_OPT_LIST, &tags, 0, 0, "a tag jobs can select (repeatable)"},
        {"deployments", NB_OPT_STR, &o.deployments_file, 0, 0, "deployments file (docs/service.md)"},
        {"deploy", NB_OPT_LIST, &deploy, 0, 0,
         "serve MODEL[:DTYPE[:BACKEND]] (repeatable; e.g. instruct:bf16, gemma3:native)"},
        {"device", NB_OPT_STR, &o.device, 0, 0, "cpu:N (default cpu:0) or xrt:N"},
        {"secret", NB_OPT_STR, &secret, 0, 0, "refused: use --secret-file"},
        {"secret-file", NB_OPT_STR, &secret_file, 0, 0,
         "worker key, mode 0600 (default $NPUBENCH_WORKER_SECRET, else $NPUBENCH_SECRET)"},
        {"board-key-file", NB_OPT_STR, &board_key_file, 0, 0,
         "this board's own key, mode 0600 (`npubench workers key issue BOARD` prints it)"},
        {"threads", NB_OPT_INT, &o.threads, 0, NB_JOB_THREADS_MAX, "cpu threads, 0 = all cores"},
        {"heartbeat-ms", NB_OPT_INT, &o.heartbeat_ms, 0, 600000, "heartbeat interval (default 1000)"},
        {"mem-budget-mb", NB_OPT_INT, &mem_mb, 0, 1 << 24, "resident deployments (default 4096)"},
        {"lease-wait-ms", NB_OPT_INT, &o.lease_wait_ms, 0, 600000, "LeaseJob long poll (default 2000)"},
        {"grace-ms", NB_OPT_INT, &o.grace_ms, 0, 86400000,
         "on SIGTERM, how long the current job may finish (default 30000)"},
        {"refdir", NB_OPT_STR, &o.refdir, 0, 0, "HF traces (default verify/references)"},
        {"reports", NB_OPT_STR, &o.reports_dir, 0, 0, "also keep verify/diagnosis reports here"},
        {"tls-ca", NB_OPT_STR, &o.tls_ca_file, 0, 0, "CA file for tls+tcp://"},
        {"tls-cert", NB_OPT_STR, &o.tls_cert_key_file, 0, 0, "client certificate + key (mutual TLS)"},
        {"tls-server-name", NB_OPT_STR, &o.tls_server_name, 0, 0,
         "DNS name in the coordinator's certificate (needed for IP-address URLs)"},
        {"quiet", NB_OPT_FLAG, &o.quiet, 0, 0, "no log lines on stderr"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *usage = "npubench worker --coordinator URL --board NAME [--tag T]... "
                        "[--deploy MODEL[:DTYPE[:BACKEND]]]... | [--deployments FILE] [--device cpu:N|xrt:N] [options]";
    int prc = nb_cmd_parse("worker", usage, argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (prc)
        return prc < 0 ? NB_EXIT_OK : prc;
    if (!o.coordinator_url || !o.board_name) {
        fprintf(stderr, "npubench worker: %s is required\n",
                !o.coordinator_url ? "--coordinator" : "--board");
        nb_args_usage(stderr, usage, opts, NB_NOPTS(opts));
        return NB_EXIT_USAGE;
    }
    nb_err err;
    /* One source of deployments: merging two would leave unclear which entry wins. */
    if (deploy.n && o.deployments_file)
        return nb_cmd_usage_error("worker", "--deploy and --deployments: give one or the other "
                                            "(a file can list every deployment)%s", "");
    nb_deployment *deps = NULL;
    int n_deps = 0;
    if (deploy.n && nb_deployments_from_specs(deploy.items, deploy.n, &deps, &n_deps, &err))
        return nb_cmd_usage_error("worker", "%s", err.msg);
    o.deployments = deps;
    o.n_deployments = n_deps;
    char *key = NULL;
    nb_code krc = secret && *secret
                      ? nb_secret_refuse_argv("--secret", "--secret-file",
                                              "NPUBENCH_WORKER_SECRET", &err)
                      : nb_secret_get("--secret-file", secret_file, "NPUBENCH_WORKER_SECRET",
                                      &key, &err);
    if (!krc && !key) /* one shared key serves workers too */
        krc = nb_secret_get("--secret-file", NULL, "NPUBENCH_SECRET", &key, &err);
    nb_secret_env_clear(); /* read: no job this worker starts inherits it */
    char *board_key = NULL;
    if (!krc && board_key_file && *board_key_file &&
        (krc = nb_secret_read_file(board_key_file, &board_key, &err)))
        nb_err_prefix(&err, "--board-key-file: ");
    if (krc) {
        nb_secret_free(key);
        nb_deployments_free(deps, n_deps);
        return nb_cmd_fail("worker", &err);
    }
    o.secret = key;
    o.board_key = board_key;
    o.tags = tags.items;
    o.n_tags = tags.n;
    o.mem_budget_bytes = (size_t)mem_mb << 20;
    nb_code rc = nb_daemon_run(&o, &err);
    nb_secret_free(key);
    nb_secret_free(board_key);
    nb_deployments_free(deps, n_deps);
    if (rc)
        return nb_cmd_fail("worker", &err);
    return NB_EXIT_OK;
}

/* ---------------------------------------------------------------- workers */

/* npubench.workers/1: one object per worker, ids and raw times. */
static json_object *worker_json(const Npubench__WorkerStatus *w)
{
    const Npubench__WorkerInfo *in = w->info;
    json_object *o = json_object_new_object();
    nb_out_str(o, "worker_id", in ? in->worker_id : "");
    nb_out_str(o, "board", in ? in->board_name : "");
    nb_out_str(o, "board_type", in ? in->board_type : "");
    nb_out_str(o, "host", in ? in->host : "");
    nb_out_str(o, "device", in ? in->device_id : "");
    nb_out_str(o, "version", in ? in->version : "");
    nb_out_str(o, "state", w->state);
    nb_out_i64(o, "last_heartbeat_unix_ms", w->last_heartbeat_unix_ms);
    nb_out_i64(o, "current_job_id", w->current_job_id);
    json_object *p = json_object_new_object();
    nb_out_i64(p, "done", w->progress ? w->progress->done : 0);
    nb_out_i64(p, "total", w->progress ? w->progress->total : 0);
    json_object_object_add(o, "progress", p);
    json_object *tags = json_object_new_array(), *deps = json_object_new_array();
    for (size_t k = 0; in && k < in->n_tags; k++)
        json_object_array_add(tags, json_object_new_string(in->tags[k]));
    /* one object per deployment its results land in (nb_job_dep_first) */
    for (size_t k = 0; in && k < in->n_deployments; k++) {
        if (nb_job_dep_first(in->deployments, k) != k)
            continue;
        json_object *d = json_object_new_object(), *declared = json_object_new_array();
        nb_out_str(d, "model", in->deployments[k]->model);
        nb_out_str(d, "backend", in->deployments[k]->backend);
        nb_out_str(d, "dtype", nb_job_dep_stored_dtype(in->deployments[k]));
        for (size_t j = k; j < in->n_deployments; j++)
            if (nb_job_dep_first(in->deployments, j) == k)
                json_object_array_add(declared,
                                      json_object_new_string(in->deployments[j]->dtype));
        json_object_object_add(d, "declared_dtypes", declared);
        nb_out_str(d, "digest", in->deployments[k]->digest);
        char name[256];
        nb_out_str(d, "name", nb_job_dep_name(in->deployments[k], name, sizeof name));
        json_object_array_add(deps, d);
    }
    json_object_object_add(o, "tags", tags);
    json_object_object_add(o, "deployments", deps);
    nb_out_str(o, "health", *w->health ? w->health : "unknown");
    nb_out_i64(o, "health_checked_unix_ms", w->health_checked_unix_ms);
    nb_out_str(o, "health_detail", w->health_detail);
    nb_out_i64(o, "health_job_id", w->health_job_id);
    nb_out_bool(o, "drained", w->drained);
    nb_out_i64(o, "job_errors", w->job_errors);
    nb_out_str(o, "driver_version", in ? in->driver_version : "");
    nb_out_str(o, "firmware_version", in ? in->firmware_version : "");
    nb_out_str(o, "xrt_version", in ? in->xrt_version : "");
    nb_out_str(o, "kernel_path", in ? in->kernel_path : "");
    nb_out_str(o, "cpu_model", in ? in->cpu_model : "");
    nb_out_str(o, "toolchain", in ? in->toolchain : "");
    return o;
}

static nb_code worker_row(nb_out_table *t, const Npubench__WorkerStatus *w, nb_err *err)
{
    const Npubench__WorkerInfo *in = w->info;
    char seen[16], job[24] = "-", prog[24] = "-", deps[512] = "";
    nb_cmd_fmt_age(seen, sizeof seen, w->last_heartbeat_unix_ms);
    if (w->current_job_id)
        snprintf(job, sizeof job, "%lld", (long long)w->current_job_id);
    if (w->progress && w->progress->total)
        snprintf(prog, sizeof prog, "%d/%d", w->progress->done, w->progress->total);
    size_t len = 0;
    /* one deployment per stored name, the other words it was declared as beside it:
     * "SmolLM2-135M-Instruct cpu/q4_1 (also native)" */
    for (size_t k = 0; in && k < in->n_deployments && len < sizeof deps; k++) {
        if (nb_job_dep_first(in->deployments, k) != k)
            continue;
        char item[384];
        nb_job_dep_text(in->deployments, in->n_deployments, k, ", ", item, sizeof item);
        len += (size_t)snprintf(deps + len, sizeof deps - len, "%s%s", len ? ", " : "", item);
    }
    for (size_t k = 0; in && k < in->n_tags && len < sizeof deps; k++)
        len += (size_t)snprintf(deps + len, sizeof deps - len, " #%s", in->tags[k]);
    char health[48], checked[16] = "-";
    snprintf(health, sizeof health, "%s%s", *w->health ? w->health : "unknown",
             w->drained ? ", drained" : "");
    if (w->health_checked_unix_ms)
        nb_cmd_fmt_age(checked, sizeof checked, w->health_checked_unix_ms);
    const char *cells[] = {in ? in->worker_id : "?", in ? in->board_name : "?", w->state, health,
                           checked, seen, job, prog, deps};
    return nb_out_table_row(t, cells, err);
}

static int workers_print(const Npubench__ListWorkersResponse *resp, nb_out_format fmt)
{
    nb_err err;
    if (fmt == NB_OUT_JSON) {
        json_object *doc = nb_out_doc("workers"), *a = json_object_new_array();
        for (size_t i = 0; i < resp->n_workers; i++)
            json_object_array_add(a, worker_json(resp->workers[i]));
        json_object_object_add(doc, "workers", a);
        nb_out_print_doc(stdout, doc);
        return NB_EXIT_OK;
    }
    static const char *const heads[] = {"WORKER", "BOARD", "STATE",    "HEALTH",     "CHECKED",
                                        "SEEN",   "JOB",   "PROGRESS", "DEPLOYMENTS"};
    nb_out_table *t = nb_out_table_new(heads, 9);
    if (!t)
        return nb_cmd_usage_error("workers", "out of memory%s", "");
    for (size_t i = 0; i < resp->n_workers; i++)
        if (worker_row(t, resp->workers[i], &err)) {
            nb_out_table_free(t);
            return nb_cmd_fail("workers", &err);
        }
    if (!resp->n_workers && fmt == NB_OUT_TEXT)
        printf("(no workers)\n");
    else
        nb_out_table_print(stdout, t, fmt);
    nb_out_table_free(t);
    /* What each board runs: too wide for the table. */
    for (size_t i = 0; fmt == NB_OUT_TEXT && i < resp->n_workers; i++) {
        const Npubench__WorkerStatus *w = resp->workers[i];
        const Npubench__WorkerInfo *in = w->info;
        if (!in)
            continue;
        printf("%s: driver %s, firmware %s, XRT %s, kernels %s, CPU %s, toolchain %s\n",
               in->board_name, *in->driver_version ? in->driver_version : "unknown",
               *in->firmware_version ? in->firmware_version : "unknown",
               *in->xrt_version ? in->xrt_version : "unknown",
               *in->kernel_path ? in->kernel_path : "unknown",
               *in->cpu_model ? in->cpu_model : "unknown",
               *in->toolchain ? in->toolchain : "unknown");
        if (*w->health_detail)
            printf("%s: last health check: %s\n", in->board_name, w->health_detail);
    }
    return NB_EXIT_OK;
}

/* workers drain|undrain BOARD: the board finishes its job and takes no more, or again. */
static int workers_drain(nb_cmd_conn *c, const char *board, int drain)
{
    Npubench__DrainRequest req = NPUBENCH__DRAIN_REQUEST__INIT;
    req.drain = drain;
    req.board = (char *)board;
    nb_err err;
    Npubench__DrainResponse *resp;
    if (nb_svc_call(c->svc, "Drain", &req, &npubench__drain_response__descriptor, &resp, &err))
        return nb_cmd_fail("workers", &err);
    if (drain)
        printf("board %s drained: %d job%s still running there, no new ones\n", board,
               resp->running, resp->running == 1 ? "" : "s");
    else
        printf("board %s undrained: takes jobs again\n", board);
    nb_wire_free(resp);
    return NB_EXIT_OK;
}

/* workers key issue BOARD | key revoke KEY_ID | key list [BOARD]: per-board credentials
 * (admin). */
static int workers_key(nb_cmd_conn *c, const char *op, const char *arg)
{
    Npubench__BoardKeyRequest req = NPUBENCH__BOARD_KEY_REQUEST__INIT;
    req.op = (char *)op;
    if (!strcmp(op, "revoke"))
        req.key_id = (char *)arg;
    else
        req.board = (char *)(arg ? arg : "");
    nb_err err;
    Npubench__BoardKeyResponse *resp;
    if (nb_svc_call(c->svc, "BoardKey", &req, &npubench__board_key_response__descriptor, &resp,
                    &err))
        return nb_cmd_fail("workers", &err);
    if (!strcmp(op, "issue"))
        printf("%s\n", resp->key); /* shown once: save it to the board's --board-key-file */
    else
        for (size_t i = 0; i < resp->n_keys; i++)
            printf("%s %s %s\n", resp->keys[i]->key_id, resp->keys[i]->board,
                   resp->keys[i]->revoked_unix_ms ? "revoked" : "valid");
    nb_wire_free(resp);
    return NB_EXIT_OK;
}

int nb_cmd_workers(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    nb_out_flags of = {0};
    const char *db = NULL;
    int all = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"all", NB_OPT_FLAG, &all, 0, 0, "include gone workers"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        NB_OUT_OPTS(of),
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[3];
    int np = 0;
    int rc = nb_cmd_parse("workers",
                          "npubench workers [--all] [--json|--format csv|md] | workers "
                          "drain|undrain BOARD | workers key issue BOARD|revoke KEY_ID|list "
                          "[BOARD]",
                          argc, argv, opts, NB_NOPTS(opts), pos, 3, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    int drain = np && !strcmp(pos[0], "drain"), undrain = np && !strcmp(pos[0], "undrain");
    int key = np && !strcmp(pos[0], "key");
    if (key && (np < 2 || (strcmp(pos[1], "list") && np != 3) ||
                (strcmp(pos[1], "issue") && strcmp(pos[1], "revoke") && strcmp(pos[1], "list"))))
        return nb_cmd_usage_error("workers", "expected 'key issue BOARD', 'key revoke KEY_ID' "
                                             "or 'key list [BOARD]'%s", "");
    if (np && !key && (!(drain || undrain) || np != 2))
        return nb_cmd_usage_error("workers", "expected 'drain BOARD' or 'undrain BOARD'%s", "");
    nb_err err;
    nb_out_format fmt;
    if (nb_out_format_of(&of, &fmt, &err))
        return nb_cmd_usage_error("workers", "%s", err.msg);
    nb_cmd_conn c;
    sf.admin = np > 0; /* drain / undrain */
    if ((rc = nb_cmd_conn_open("workers", &sf, db, 1, &c)))
        return rc;
    if (key) {
        rc = workers_key(&c, pos[1], np == 3 ? pos[2] : NULL);
        nb_cmd_conn_close(&c);
        return rc;
    }
    if (np) {
        rc = workers_drain(&c, pos[1], drain);
        nb_cmd_conn_close(&c);
        return rc;
    }
    Npubench__ListWorkersRequest req = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
    req.include_dead = all;
    Npubench__ListWorkersResponse *resp;
    if (nb_svc_call(c.svc, "ListWorkers", &req, &npubench__list_workers_response__descriptor,
                    &resp, &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("workers", &err);
    }
    rc = workers_print(resp, fmt);
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return rc;
}
