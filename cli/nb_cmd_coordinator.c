/* nb_cmd_coordinator: `npubench coordinator`, the long-lived job queue and history server
 * (flags -> nb_coord_opts; nb_coord_run serves until a signal). */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_coord.h"
#include "nb_job.h"
#include "nb_secret.h"
#include "nb_svc.h"

int nb_cmd_coordinator(int argc, char **argv)
{
    nb_coord_opts o;
    memset(&o, 0, sizeof o);
    const char *secret = NULL, *files[3] = {NULL, NULL, NULL}, *expire = NULL,
               *health = NULL, *health_retry = NULL, *clients_file = NULL;
    int lease_ms = 0, hb_ms = 0, stale_ms = 0, gone_ms = 0, attempts = 0, shards = 0,
        last_n = 0, min_change = 0, quiet = 0, insecure = 0, help = 0;
    nb_opt opts[] = {
        {"listen", NB_OPT_STR, &o.listen_url, 0, 0, "URL to serve: tcp://host:port, ipc://path, "
                                                    "tls+tcp://host:port"},
        {"db", NB_OPT_STR, &o.db_path, 0, 0, "SQLite queue + history file (created)"},
        {"http", NB_OPT_STR, &o.http_url, 0, 0,
         "read-only web dashboard at http://host:port (viewers use the client key)"},
        {"secret", NB_OPT_STR, &secret, 0, 0, "refused: use --secret-file"},
        {"secret-file", NB_OPT_STR, &files[0], 0, 0,
         "client key (mode 0600; default $NPUBENCH_SECRET); alone: the key of every role"},
        {"worker-secret-file", NB_OPT_STR, &files[1], 0, 0,
         "worker key (default $NPUBENCH_WORKER_SECRET)"},
        {"admin-secret-file", NB_OPT_STR, &files[2], 0, 0,
         "admin key: set-reference, drain (default $NPUBENCH_ADMIN_SECRET)"},
        {"client-keys-file", NB_OPT_STR, &clients_file, 0, 0,
         "client identities: 'NAME KEY' per line (mode 0600); a client's jobs are its own"},
        {"insecure", NB_OPT_FLAG, &insecure, 0, 0, "serve beyond loopback without any key"},
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
        {"artifacts", NB_OPT_STR, &o.artifacts_dir, 0, 0, "temporary files (default DB.d)"},
        {"min-free-mb", NB_OPT_INT, &o.min_free_mb, 1, 1 << 20,
         "refuse new work below this free disk (default 64)"},
        {"retention-days", NB_OPT_INT, &o.retention_days, -1, 36500,
         "keep whole results this long; -1 forever (default 90)"},
        {"refdir", NB_OPT_STR, &o.refdir, 0, 0, "HF traces to cache (default verify/references)"},
        {"prompts-dir", NB_OPT_STR, &o.prompts_dir, 0, 0,
         "named prompt sets (default verify/prompts)"},
        {"expire-after", NB_OPT_STR, &expire, 0, 0,
         "expire jobs still queued after DUR unless they name their own (90s, 15m, 2h, 1d, "
         "never; default 1d)"},
        {"health-interval", NB_OPT_STR, &health, 0, 0,
         "board health checks: at registration, every DUR, after --health-errors (default: "
         "off)"},
        {"health-retry", NB_OPT_STR, &health_retry, 0, 0,
         "re-check a quarantined board every DUR (default 10m)"},
        {"health-errors", NB_OPT_INT, &o.health_errors, 1, 1000,
         "consecutive job errors that call a health check (default 3)"},
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
    char *keys[3] = {NULL, NULL, NULL};
    nb_err err;
    if (expire &&
        nb_args_duration("--expire-after", expire, NB_JOB_EXPIRE_MS_MAX, &o.expire_after_ms, &err))
        return nb_cmd_usage_error("coordinator", "%s", err.msg);
    if (health &&
        nb_args_duration("--health-interval", health, NB_JOB_EXPIRE_MS_MAX, &o.health_interval_ms,
                         &err))
        return nb_cmd_usage_error("coordinator", "%s", err.msg);
    if (health_retry && nb_args_duration("--health-retry", health_retry, NB_JOB_EXPIRE_MS_MAX,
                                         &o.health_retry_ms, &err))
        return nb_cmd_usage_error("coordinator", "%s", err.msg);
    if (nb_svc_coord_keys(secret, files, keys, &err))
        return nb_cmd_fail("coordinator", &err);
    o.secret = keys[0];
    o.worker_secret = keys[1];
    o.admin_secret = keys[2];
    o.insecure = insecure;
    o.lease_ms = lease_ms;
    o.heartbeat_ms = hb_ms;
    o.stale_ms = stale_ms;
    o.gone_ms = gone_ms;
    o.max_attempts = attempts;
    o.max_shards = shards;
    o.regression_last_n = last_n;
    o.regression_min_rel = min_change / 100.0;
    o.quiet = quiet;
    char **cnames = NULL, **ckeys = NULL;
    int nclients = 0;
    if (clients_file && nb_secret_read_named(clients_file, &cnames, &ckeys, &nclients, &err)) {
        for (int i = 0; i < 3; i++)
            nb_secret_free(keys[i]);
        nb_err_prefix(&err, "--client-keys-file: ");
        return nb_cmd_fail("coordinator", &err);
    }
    o.client_names = (const char *const *)cnames;
    o.client_keys = (const char *const *)ckeys;
    o.n_client_keys = nclients;
    nb_code c = nb_coord_run(&o, &err);
    nb_secret_free_named(cnames, ckeys, nclients);
    for (int i = 0; i < 3; i++)
        nb_secret_free(keys[i]);
    return c ? nb_cmd_fail("coordinator", &err) : NB_EXIT_OK;
}
