/* nb_cmd_coordinator: `npubench coordinator`, the long-lived job queue and history server
 * (flags -> nb_coord_opts; nb_coord_run serves until a signal). */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_coord.h"
#include "nb_job.h"
#include "nb_svc.h"

int nb_cmd_coordinator(int argc, char **argv)
{
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    const char *secret = NULL, *secret_file = NULL;
    int lease_ms = 0, hb_ms = 0, stale_ms = 0, gone_ms = 0, attempts = 0, shards = 0,
        last_n = 0, min_change = 0, quiet = 0, help = 0;
    nb_opt opts[] = {
        {"listen", NB_OPT_STR, &o.listen_url, 0, 0, "URL to serve: tcp://host:port, ipc://path, "
                                                    "tls+tcp://host:port"},
        {"db", NB_OPT_STR, &o.db_path, 0, 0, "SQLite queue + history file (created)"},
        {"secret", NB_OPT_STR, &secret, 0, 0, "shared secret for clients and workers"},
        {"secret-file", NB_OPT_STR, &secret_file, 0, 0, "file holding the shared secret"},
        {"lease-ms", NB_OPT_INT, &lease_ms, 100, 86400000, "lease length (default 30000)"},
        {"heartbeat-ms", NB_OPT_INT, &hb_ms, 10, 600000, "worker heartbeat (default 1000)"},
        {"stale-ms", NB_OPT_INT, &stale_ms, 10, 86400000, "stale after (default 4 heartbeats)"},
        {"gone-ms", NB_OPT_INT, &gone_ms, 10, 86400000, "gone after (default 10 heartbeats)"},
        {"max-attempts", NB_OPT_INT, &attempts, 1, 100, "leases per job (default 3)"},
        {"max-shards", NB_OPT_INT, &shards, 1, NB_JOB_SHARDS_MAX, "verify-full shards at most (default 16)"},
        {"regression-runs", NB_OPT_INT, &last_n, 1, 100000, "baseline runs (default 10)"},
        {"regression-pct", NB_OPT_INT, &min_change, 1, 1000, "min. change in % (default 5)"},
        {"tls-cert", NB_OPT_STR, &o.tls_cert_key_file, 0, 0, "server certificate + key (PEM)"},
        {"tls-ca", NB_OPT_STR, &o.tls_ca_file, 0, 0, "CA that client certificates must chain to"},
        {"artifacts", NB_OPT_STR, &o.artifacts_dir, 0, 0, "result store (default DB.d)"},
        {"refdir", NB_OPT_STR, &o.refdir, 0, 0, "HF traces to cache (default verify/references)"},
        {"quiet", NB_OPT_FLAG, &quiet, 0, 0, "no log lines"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *usage = "npubench coordinator --listen URL --db PATH [options]";
    int rc =
        nb_cmd_parse("coordinator", usage, argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!o.listen_url || !o.db_path)
        return nb_cmd_usage_error("coordinator", "--listen URL and --db PATH are required%s", "");
    nb_svc_flags sf = {.secret = secret, .secret_file = secret_file};
    char *sec = NULL;
    nb_err err;
    if (nb_svc_secret(&sf, &sec, &err))
        return nb_cmd_fail("coordinator", &err);
    o.secret = sec;
    o.lease_ms = lease_ms;
    o.heartbeat_ms = hb_ms;
    o.stale_ms = stale_ms;
    o.gone_ms = gone_ms;
    o.max_attempts = attempts;
    o.max_shards = shards;
    o.regression_last_n = last_n;
    o.regression_min_rel = min_change / 100.0;
    o.quiet = quiet;
    nb_code c = nb_coord_run(&o, &err);
    if (sec) {
        memset(sec, 0, strlen(sec));
        free(sec);
    }
    return c ? nb_cmd_fail("coordinator", &err) : NB_EXIT_OK;
}
