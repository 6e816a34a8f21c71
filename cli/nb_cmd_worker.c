/* nb_cmd_worker: the worker commands — `npubench worker`, a long-lived worker that owns one
 * device and serves the coordinator's jobs (flags -> nb_daemon_opts), and `workers`. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_daemon.h"
#include "nb_file.h"
#include "nb_svc.h"

#define SECRET_FILE_MAX 4096

/* The secret file's first line (trailing whitespace stripped) into *out (malloc'ed). */
static nb_code read_secret(const char *path, char **out, nb_err *err)
{
    char *buf;
    size_t len;
    nb_code rc = nb_file_read(path, SECRET_FILE_MAX, &buf, &len, err);
    if (rc)
        return nb_err_prefix(err, "--secret-file: ");
    buf[strcspn(buf, "\r\n")] = '\0';
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    if (!n) {
        free(buf);
        return nb_err_set(err, NB_EINVAL, "--secret-file %s: empty", path);
    }
    *out = buf;
    return NB_OK;
}

int nb_cmd_worker(int argc, char **argv)
{
    const char *url = NULL, *board = NULL, *board_type = NULL, *deployments = NULL,
               *device = "cpu:0", *secret = NULL, *secret_file = NULL, *refdir = NULL,
               *reports = NULL, *tls_ca = NULL, *tls_cert = NULL;
    nb_strlist tags = {{0}, 0};
    int threads = 0, hb = 0, mem_mb = 0, wait_ms = 0, grace_ms = 0, quiet = 0, help = 0;
    nb_opt opts[] = {
        {"coordinator", NB_OPT_STR, &url, 0, 0, "coordinator URL (tcp://host:port, ipc://path)"},
        {"board", NB_OPT_STR, &board, 0, 0, "this board's name (required)"},
        {"board-type", NB_OPT_STR, &board_type, 0, 0, "board type, e.g. strix"},
        {"tag", NB_OPT_LIST, &tags, 0, 0, "a tag jobs can select (repeatable)"},
        {"deployments", NB_OPT_STR, &deployments, 0, 0, "deployments file (docs/service.md)"},
        {"device", NB_OPT_STR, &device, 0, 0, "cpu:N (default cpu:0) or xrt:N"},
        {"secret", NB_OPT_STR, &secret, 0, 0, "shared secret"},
        {"secret-file", NB_OPT_STR, &secret_file, 0, 0, "file holding the shared secret"},
        {"threads", NB_OPT_INT, &threads, 0, 1024, "cpu threads, 0 = all cores"},
        {"heartbeat-ms", NB_OPT_INT, &hb, 0, 600000, "heartbeat interval (default 1000)"},
        {"mem-budget-mb", NB_OPT_INT, &mem_mb, 0, 1 << 24, "resident deployments (default 4096)"},
        {"lease-wait-ms", NB_OPT_INT, &wait_ms, 0, 600000, "LeaseJob long poll (default 2000)"},
        {"grace-ms", NB_OPT_INT, &grace_ms, 0, 86400000,
         "on SIGTERM, how long the current job may finish (default 30000)"},
        {"refdir", NB_OPT_STR, &refdir, 0, 0, "HF traces (default verify/references)"},
        {"reports", NB_OPT_STR, &reports, 0, 0, "also keep verify/diagnosis reports here"},
        {"tls-ca", NB_OPT_STR, &tls_ca, 0, 0, "CA file for tls+tcp://"},
        {"tls-cert", NB_OPT_STR, &tls_cert, 0, 0, "client certificate + key (mutual TLS)"},
        {"quiet", NB_OPT_FLAG, &quiet, 0, 0, "no log lines on stderr"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *usage = "npubench worker --coordinator URL --board NAME [--tag T]... "
                        "[--deployments FILE] [--device cpu:N|xrt:N] [options]";
    int prc = nb_cmd_parse("worker", usage, argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (prc)
        return prc < 0 ? NB_EXIT_OK : prc;
    if (!url || !board) {
        fprintf(stderr, "npubench worker: %s is required\n", !url ? "--coordinator" : "--board");
        nb_args_usage(stderr, usage, opts, NB_NOPTS(opts));
        return NB_EXIT_USAGE;
    }
    nb_err err;
    if (secret && secret_file) {
        fprintf(stderr, "npubench worker: give --secret or --secret-file, not both\n");
        return NB_EXIT_USAGE;
    }
    char *file_secret = NULL;
    if (secret_file && read_secret(secret_file, &file_secret, &err))
        return nb_cmd_fail("worker", &err);
    nb_daemon_opts o = {0};
    o.coordinator_url = url;
    o.secret = file_secret ? file_secret : secret;
    o.board_name = board;
    o.board_type = board_type;
    o.tags = tags.items;
    o.n_tags = tags.n;
    o.device = device;
    o.deployments_file = deployments;
    o.threads = threads;
    o.heartbeat_ms = hb;
    o.mem_budget_bytes = (size_t)mem_mb << 20;
    o.lease_wait_ms = wait_ms;
    o.grace_ms = grace_ms;
    o.refdir = refdir;
    o.reports_dir = reports;
    o.tls_ca_file = tls_ca;
    o.tls_cert_key_file = tls_cert;
    o.quiet = quiet;
    nb_code rc = nb_daemon_run(&o, &err);
    free(file_secret);
    if (rc)
        return nb_cmd_fail("worker", &err);
    return NB_EXIT_OK;
}

/* ---------------------------------------------------------------- workers */

int nb_cmd_workers(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL;
    int all = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"all", NB_OPT_FLAG, &all, 0, 0, "include gone workers"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    int rc = nb_cmd_parse("workers", "npubench workers [--all]", argc, argv, opts, NB_NOPTS(opts),
                          NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("workers", &sf, db, 1, &c)))
        return rc;
    Npubench__ListWorkersRequest req = NPUBENCH__LIST_WORKERS_REQUEST__INIT;
    req.include_dead = all;
    nb_err err;
    Npubench__ListWorkersResponse *resp;
    if (nb_svc_call(c.svc, "ListWorkers", &req, &npubench__list_workers_response__descriptor,
                    &resp, &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("workers", &err);
    }
    printf("%-30s %-16s %-6s %-6s %-8s %-12s %s\n", "WORKER", "BOARD", "STATE", "SEEN", "JOB",
           "PROGRESS", "DEPLOYMENTS");
    for (size_t i = 0; i < resp->n_workers; i++) {
        const Npubench__WorkerStatus *w = resp->workers[i];
        const Npubench__WorkerInfo *in = w->info;
        char seen[16], job[24] = "-", prog[24] = "-", deps[512] = "";
        nb_cmd_fmt_age(seen, sizeof seen, w->last_heartbeat_unix_ms);
        if (w->current_job_id)
            snprintf(job, sizeof job, "%lld", (long long)w->current_job_id);
        if (w->progress && w->progress->total)
            snprintf(prog, sizeof prog, "%d/%d", w->progress->done, w->progress->total);
        size_t len = 0;
        for (size_t k = 0; in && k < in->n_deployments && len < sizeof deps; k++)
            len += (size_t)snprintf(deps + len, sizeof deps - len, "%s%s %s/%s", k ? ", " : "",
                                    in->deployments[k]->model, in->deployments[k]->backend,
                                    in->deployments[k]->dtype);
        for (size_t k = 0; in && k < in->n_tags && len < sizeof deps; k++)
            len += (size_t)snprintf(deps + len, sizeof deps - len, " #%s", in->tags[k]);
        printf("%-30s %-16s %-6s %-6s %-8s %-12s %s\n", in ? in->worker_id : "?",
               in ? in->board_name : "?", w->state, seen, job, prog, deps);
    }
    if (!resp->n_workers)
        printf("(no workers)\n");
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return NB_EXIT_OK;
}
