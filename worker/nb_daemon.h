/* nb_daemon: the worker as a library: claims its device, dials the coordinator (the worker
 * only dials, so it works from behind NAT), registers, heartbeats, leases and runs jobs.
 * `npubench worker` runs it in the foreground; the embedded mode runs it in-process. */
#ifndef NB_DAEMON_H
#define NB_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_executor.h"

/* Zero-initialise and set what you need (0 / NULL = the default in brackets).
 * Strings and arrays are copied by nb_daemon_start. */
typedef struct nb_daemon_opts {
    const char *coordinator_url;  /* required: tcp://, ipc://, inproc://, tls+tcp:// */
    const char *secret;           /* shared secret [none] */
    const char *board_key;        /* the board's own key ("<id>.<secret>", an admin issued
                                     it); sent with every registration [none] */
    const char *tls_ca_file;      /* tls+tcp:// */
    const char *tls_cert_key_file;
    const char *tls_server_name;  /* the coordinator certificate's DNS name [URL host] */
    const char *board_name;       /* ["local"] */
    const char *board_type;       /* [""] */
    const char *const *tags;
    int n_tags;
    const char *device;           /* "cpu:N" or "xrt:N" ["cpu:0"] */
    /* What the worker serves: the deployments file, else these, else one default
     * deployment ("instruct" on the device's backend, bf16). */
    const char *deployments_file;
    const nb_deployment *deployments;
    int n_deployments;
    int threads;                  /* cpu threads per deployment [0 = all cores] */
    size_t mem_budget_bytes;      /* resident deployments [4 GiB] */
    int heartbeat_ms;             /* [the coordinator's, else 1000] */
    int lease_wait_ms;            /* LeaseJob long poll [2000] */
    int rpc_timeout_ms;           /* one call, on top of the long poll [5000] */
    int backoff_min_ms, backoff_max_ms; /* reconnect backoff, with jitter [100, 10000] */
    int grace_ms;                 /* on stop(finish_current): how long the current job
                                     may still run before it is handed back [30000] */
    const char *refdir;           /* HF traces [verify/references] */
    const char *rundir;           /* scratch files [the device lock directory] */
    const char *lockdir;          /* device lock files [nb_devlock_dir] */
    const char *reports_dir;      /* also keep verify/diagnosis reports here [no] */
    int quiet;                    /* no log lines on stderr */
    int client_paths;             /* nb_executor_opts.client_paths (embedded mode only) */
    /* Every log line (timestamped) also goes here; called from the daemon's threads. */
    void (*log)(void *user, const char *line);
    void *log_user;
} nb_daemon_opts;

typedef struct nb_daemon nb_daemon;

/* Checks the options, claims the device (NB_EUNAVAIL naming the holder's pid when
 * another worker has it; for "xrt:N" also when XRT is not built in or the probe finds
 * no device, with the probe's message), loads the deployments file (errors name the
 * entry), opens the client (background dial: the coordinator may be down) and starts
 * the threads (lease loop + heartbeat).  Registration happens in the background, with
 * backoff while the coordinator is unreachable.  Release with nb_daemon_stop. */
nb_code nb_daemon_start(const nb_daemon_opts *o, nb_daemon **out, nb_err *err);

/* Stops leasing.  finish_current: the running job may finish (its result is reported)
 * for up to grace_ms; past that, or when !finish_current, it is cancelled and handed
 * back with ReleaseJob (retry = true).  Joins the threads, releases the device, frees
 * d.  NULL ok. */
void nb_daemon_stop(nb_daemon *d, int finish_current);

/* A fatal error the daemon hit (the coordinator refused the registration:
 * ALREADY_EXISTS for a second worker on this host+device, UNAUTHENTICATED for a wrong
 * secret): NB_OK while none.  err (may be NULL) gets the message. */
nb_code nb_daemon_error(nb_daemon *d, nb_err *err);

/* Blocks until the daemon hits a fatal error or timeout_ms passes (< 0: forever);
 * returns nb_daemon_error's code. */
nb_code nb_daemon_wait(nb_daemon *d, int timeout_ms, nb_err *err);

/* nb_daemon_start, then run until SIGTERM/SIGINT (first: finish the current job within
 * grace_ms, else hand it back; second: hand it back now) or a fatal error; then stop.
 * NB_OK after a signal, else the start or fatal error. */
nb_code nb_daemon_run(const nb_daemon_opts *o, nb_err *err);

typedef struct nb_daemon_stats {
    uint64_t registrations;   /* successful Register calls */
    uint64_t connect_failures;/* Register/LeaseJob calls that found no coordinator */
    uint64_t heartbeats;      /* successful Heartbeat calls */
    uint64_t leases;          /* jobs leased */
    uint64_t results;         /* results the coordinator acknowledged */
    uint64_t result_retries;  /* ReportResult resends (same request id) */
    uint64_t released;        /* jobs handed back */
    uint64_t cancelled;       /* jobs stopped by a coordinator cancel */
} nb_daemon_stats;

void nb_daemon_get_stats(nb_daemon *d, nb_daemon_stats *out);
/* The id the coordinator assigned ("" before the first registration) into buf. */
void nb_daemon_worker_id(nb_daemon *d, char *buf, size_t cap);
/* The executor (deployment cache statistics for tests). */
nb_executor *nb_daemon_job_ctx(nb_daemon *d);

#endif
