/* nb_cmd_worker: `npubench worker`: a long-lived worker that owns one device and serves
 * the coordinator's jobs (flags -> nb_daemon_opts; the daemon does the rest). */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_daemon.h"
#include "nb_secret.h"

int nb_cmd_worker(int argc, char **argv)
{
    const char *url = NULL, *board = NULL, *board_type = NULL, *deployments = NULL,
               *device = "cpu:0", *secret = NULL, *secret_file = NULL, *refdir = NULL,
               *reports = NULL, *tls_ca = NULL, *tls_cert = NULL, *tls_name = NULL;
    nb_strlist tags = {{0}, 0};
    int threads = 0, hb = 0, mem_mb = 0, wait_ms = 0, grace_ms = 0, quiet = 0, help = 0;
    nb_opt opts[] = {
        {"coordinator", NB_OPT_STR, &url, 0, 0, "coordinator URL (tcp://host:port, ipc://path)"},
        {"board", NB_OPT_STR, &board, 0, 0, "this board's name (required)"},
        {"board-type", NB_OPT_STR, &board_type, 0, 0, "board type, e.g. strix"},
        {"tag", NB_OPT_LIST, &tags, 0, 0, "a tag jobs can select (repeatable)"},
        {"deployments", NB_OPT_STR, &deployments, 0, 0, "deployments file (docs/service.md)"},
        {"device", NB_OPT_STR, &device, 0, 0, "cpu:N (default cpu:0) or xrt:N"},
        {"secret", NB_OPT_STR, &secret, 0, 0, "refused: use --secret-file"},
        {"secret-file", NB_OPT_STR, &secret_file, 0, 0,
         "worker key, mode 0600 (default $NPUBENCH_WORKER_SECRET, else $NPUBENCH_SECRET)"},
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
        {"tls-server-name", NB_OPT_STR, &tls_name, 0, 0,
         "DNS name in the coordinator's certificate (needed for IP-address URLs)"},
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
    char *key = NULL;
    nb_code krc = secret && *secret
                      ? nb_secret_refuse_argv("--secret", "--secret-file",
                                              "NPUBENCH_WORKER_SECRET", &err)
                      : nb_secret_get("--secret-file", secret_file, "NPUBENCH_WORKER_SECRET",
                                      &key, &err);
    if (!krc && !key) /* one shared key serves workers too */
        krc = nb_secret_get("--secret-file", NULL, "NPUBENCH_SECRET", &key, &err);
    if (krc)
        return nb_cmd_fail("worker", &err);
    nb_daemon_opts o = {0};
    o.coordinator_url = url;
    o.secret = key;
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
    o.tls_server_name = tls_name;
    o.quiet = quiet;
    nb_code rc = nb_daemon_run(&o, &err);
    nb_secret_free(key);
    if (rc)
        return nb_cmd_fail("worker", &err);
    return NB_EXIT_OK;
}

