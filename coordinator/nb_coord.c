/* nb_coord: coordinator start-up and shut-down — options, database, RPC server, the APIs'
 * registration and the sweeper thread; the state they share is nb_coord_state.c's. */
#include "nb_coord.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_coord_int.h"
#include "nb_file.h"
#include "nb_log.h"
#include "nb_secret.h"
#include "nb_time.h"

/* ---- sweeper ---- */

static void *sweeper_main(void *arg)
{
    nb_coord *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int stop = c->stopping;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            break;
        nb_coord_sweep_workers(c);
        nb_coord_retention(c);
        nb_sched_expire(c);
        nb_coord_health_sweep(c);
        int64_t now = nb_wall_ms();
        nb_coord_log_flush(c, now, 0);
        if (now >= c->next_reasons_ms) {
            nb_sched_update_reasons(c);
            c->next_reasons_ms = now + 1000;
        }
        /* Sleep on the condvar so a stop ends the wait at once. */
        uint64_t g = nb_coord_gen(c);
        int64_t until = nb_wall_ms() + c->o.sweep_ms;
        while (nb_coord_wait(c, &g, until) == 0) {
        }
    }
    return NULL;
}

/* ---- lifecycle ---- */

/* Without any key, only this host may talk to us: a lab-wide listen needs keys, or an
 * explicit --insecure that every start repeats in the log. */
static nb_code check_exposure(nb_coord *c, nb_err *err)
{
    int keyed = c->secret || c->worker_secret || c->admin_secret;
    if (keyed || nb_coord_url_is_local(c->listen_url))
        return NB_OK;
    if (!c->o.insecure)
        return nb_err_set(err, NB_EINVAL,
                          "coordinator: --listen %s reaches beyond this host, and no key is "
                          "set: give --secret-file/--worker-secret-file (or $NPUBENCH_SECRET), "
                          "or --insecure to serve everyone unauthenticated",
                          c->listen_url);
    nb_coord_log(c, "WARNING: --insecure: %s serves without authentication; anyone who reaches "
                    "it can submit jobs, report results and set references",
                 c->listen_url);
    return NB_OK;
}

/* The address really bound: the listen URL with the port nng chose, not the dialable
 * form (which turns 0.0.0.0 into 127.0.0.1); the dialable form follows when it differs. */
static void bound_text(const char *listen, const char *dial, char *out, size_t cap)
{
    const char *lp = strrchr(listen, ':'), *dp = strrchr(dial, ':');
    char host[256];
    nb_coord_url_host(listen, host, sizeof host);
    if (!host[0] || !lp || !dp || !strcmp(listen, dial))
        snprintf(out, cap, "%s", dial);
    else if (!strcmp(lp, ":0"))
        snprintf(out, cap, "%.*s%s (dial %s)", (int)(lp - listen), listen, dp, dial);
    else
        snprintf(out, cap, "%s (dial %s)", listen, dial);
}

static char *dup_opt(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static nb_code copy_opts(nb_coord *c, const nb_coord_opts *o, nb_err *err)
{
    c->o = *o;
    if (!o->listen_url || !*o->listen_url)
        return nb_err_set(err, NB_EINVAL, "coordinator: --listen URL is required");
    if (!o->db_path || !*o->db_path)
        return nb_err_set(err, NB_EINVAL, "coordinator: --db PATH is required");
    c->listen_url = dup_opt(o->listen_url);
    c->db_path = dup_opt(o->db_path);
    if (o->artifacts_dir && *o->artifacts_dir)
        c->artifacts_dir = strdup(o->artifacts_dir);
    else if (asprintf(&c->artifacts_dir, "%s.d", o->db_path) < 0)
        c->artifacts_dir = NULL;
    c->secret = dup_opt(o->secret);
    c->worker_secret = dup_opt(o->worker_secret);
    c->admin_secret = dup_opt(o->admin_secret);
    c->tls_cert = dup_opt(o->tls_cert_key_file);
    c->tls_ca = dup_opt(o->tls_ca_file);
    c->refdir = dup_opt(o->refdir);
    c->prompts_dir = dup_opt(o->prompts_dir);
    if (!c->listen_url || !c->db_path || !c->artifacts_dir)
        return nb_err_set(err, NB_ENOMEM, "coordinator: out of memory");
    c->o.listen_url = c->listen_url;
    c->o.db_path = c->db_path;
    c->o.artifacts_dir = c->artifacts_dir;
    c->o.secret = c->secret;
    c->o.worker_secret = c->worker_secret;
    c->o.admin_secret = c->admin_secret;
    c->o.tls_cert_key_file = c->tls_cert;
    c->o.tls_ca_file = c->tls_ca;
    c->o.refdir = c->refdir;
    c->o.prompts_dir = c->prompts_dir;
    c->http_url = dup_opt(o->http_url);
    c->o.http_url = c->http_url;

    nb_coord_opts *p = &c->o;
    if (p->lease_ms <= 0)
        p->lease_ms = 30000;
    if (p->heartbeat_ms <= 0)
        p->heartbeat_ms = 1000;
    if (p->stale_ms <= 0)
        p->stale_ms = 4LL * p->heartbeat_ms;
    if (p->gone_ms <= 0)
        p->gone_ms = 10LL * p->heartbeat_ms;
    if (p->gone_ms < p->stale_ms)
        return nb_err_set(err, NB_EINVAL,
                          "coordinator: gone timeout %lld ms is shorter than stale timeout "
                          "%lld ms",
                          (long long)p->gone_ms, (long long)p->stale_ms);
    if (p->lease_ms < 2LL * p->heartbeat_ms)
        return nb_err_set(err, NB_EINVAL,
                          "coordinator: --lease-ms %lld must be at least twice the heartbeat "
                          "interval (%d ms), or leases expire between renewals",
                          (long long)p->lease_ms, p->heartbeat_ms);
    if (p->lease_ms > 24LL * 3600 * 1000)
        return nb_err_set(err, NB_EINVAL, "coordinator: --lease-ms %lld exceeds one day",
                          (long long)p->lease_ms);
    if (p->sweep_ms <= 0) {
        p->sweep_ms = p->heartbeat_ms / 2;
        if (p->sweep_ms > 250)
            p->sweep_ms = 250;
        if (p->sweep_ms < 10)
            p->sweep_ms = 10;
    }
    if (p->expire_after_ms == 0)
        p->expire_after_ms = 24LL * 3600 * 1000;
    if (p->expire_after_ms > NB_JOB_EXPIRE_MS_MAX)
        return nb_err_set(err, NB_EINVAL, "coordinator: --expire-after %lld s exceeds %lld s",
                          (long long)(p->expire_after_ms / 1000),
                          (long long)(NB_JOB_EXPIRE_MS_MAX / 1000));
    if (p->health_retry_ms <= 0)
        p->health_retry_ms = 600000;
    if (p->health_errors <= 0)
        p->health_errors = 3;
    if (p->max_attempts <= 0)
        p->max_attempts = NB_DB_DEFAULT_MAX_ATTEMPTS;
    if (p->max_shards <= 0)
        p->max_shards = 16;
    if (p->handler_threads <= 0)
        p->handler_threads = 32;
    if (p->max_wait_ms <= 0)
        p->max_wait_ms = 10000;
    if (p->regression_last_n <= 0)
        p->regression_last_n = 10;
    if (p->regression_min_rel <= 0)
        p->regression_min_rel = 0.05;
    if (p->regression_alpha <= 0)
        p->regression_alpha = 0.05;
    if (p->min_free_mb <= 0)
        p->min_free_mb = 64;
    if (p->retention_days == 0)
        p->retention_days = 90;
    return NB_OK;
}

static void free_coord(nb_coord *c)
{
    nb_coord_reg_free_all(c);
    free(c->listen_url);
    free(c->db_path);
    free(c->artifacts_dir);
    nb_secret_free(c->secret);
    nb_secret_free(c->worker_secret);
    nb_secret_free(c->admin_secret);
    free(c->tls_cert);
    free(c->tls_ca);
    free(c->refdir);
    nb_coord_unlock_db(c);
    free(c->prompts_dir);
    free(c->http_url);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->log_mu);
    free(c);
}

nb_code nb_coord_start(const nb_coord_opts *o, nb_coord **out, nb_err *err)
{
    *out = NULL;
    nb_coord *c = calloc(1, sizeof *c);
    if (!c)
        return nb_err_set(err, NB_ENOMEM, "coordinator: out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_mutex_init(&c->log_mu, NULL);
    c->gen = 1;
    c->lock_fd = -1;
    c->db_lock_fd = -1;
    nb_code rc = copy_opts(c, o, err);
    if (rc)
        goto fail;
    if ((rc = nb_file_mkdirs(c->artifacts_dir, err)))
        goto fail;
    if ((rc = nb_coord_lock_db(c, err)))
        goto fail;
    /* An answer acknowledges a commit: it must be on disk first (WAL fsync per commit), or a
     * power loss drops jobs and results their senders were told are stored. */
    nb_db_opts dbo = {.sync_full = !o->sync_normal};
    if ((rc = nb_db_open(c->db_path, &dbo, &c->db, err)))
        goto fail;
    /* A damaged page found now is a clear refusal; found mid-commit it would fail jobs. */
    if ((rc = nb_db_check(c->db, err)))
        goto fail;
    nb_coord_retention(c);
    /* Leases that ran out while no coordinator was up. Workers that are
     * still alive keep theirs: they renew them on their next heartbeat. */
    size_t nq = 0, nf = 0;
    if ((rc = nb_db_jobs_requeue_expired(c->db, &nq, &nf, err)))
        goto fail;

    if ((rc = check_exposure(c, err)))
        goto fail;
    nb_rpc_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.secret = c->secret;
    ro.worker_secret = c->worker_secret;
    ro.admin_secret = c->admin_secret;
    ro.client_names = o->client_names;
    ro.client_keys = o->client_keys;
    ro.n_client_keys = o->n_client_keys;
    ro.threads = c->o.handler_threads;
    ro.contexts = c->o.handler_threads * 2;
    ro.tls_cert_key_file = c->tls_cert;
    ro.tls_ca_file = c->tls_ca;
    if ((rc = nb_rpc_server_open(c->listen_url, &ro, &c->srv, err)))
        goto fail;
    if ((rc = nb_coord_register_client_api(c, err)) || (rc = nb_coord_register_worker_api(c, err)) ||
        (rc = nb_coord_register_dash_api(c, err)) || (rc = nb_coord_register_regress_api(c, err)) ||
        (rc = nb_coord_replay_attach(c, err)) ||
        (rc = nb_coord_boardkeys_start(c, err)))
        goto fail;
    if (pthread_create(&c->sweeper, NULL, sweeper_main, c) != 0) {
        rc = nb_err_set(err, NB_EINTERNAL, "coordinator: cannot start the sweeper thread");
        goto fail;
    }
    c->sweeper_started = 1;
    if ((rc = nb_rpc_server_start(c->srv, err)))
        goto fail;
    bound_text(c->listen_url, nb_rpc_server_url(c->srv), c->bound, sizeof c->bound);
    if ((rc = nb_coord_http_start(c, err)))
        goto fail;
    nb_coord_log(c, "serving %s, db %s (%zu expired lease%s requeued, %zu failed)", c->bound,
                 c->db_path, nq, nq == 1 ? "" : "s", nf);
    *out = c;
    return NB_OK;
fail:
    nb_coord_stop(c);
    return rc;
}

const char *nb_coord_url(const nb_coord *c)
{
    return nb_rpc_server_url(c->srv);
}

const char *nb_coord_http_url(const nb_coord *c)
{
    return c->http ? c->http_bound : NULL;
}

void nb_coord_stop(nb_coord *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    /* Handlers see `stopping` and return; then no handler touches c. */
    nb_coord_http_stop(c);
    nb_rpc_server_close(c->srv);
    c->srv = NULL;
    if (c->sweeper_started)
        pthread_join(c->sweeper, NULL);
    nb_coord_log_flush(c, nb_wall_ms(), 1);
    nb_db_close(c->db);
    free_coord(c);
}

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

nb_code nb_coord_run(const nb_coord_opts *o, nb_err *err)
{
    nb_coord *c;
    nb_code rc = nb_coord_start(o, &c, err);
    if (rc)
        return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    struct sigaction old_term, old_int;
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    signal(SIGPIPE, SIG_IGN);
    if (!o->quiet)
        fprintf(stderr, "npubench coordinator: listening on %s\n", c->bound);
    if (!o->quiet && c->http)
        fprintf(stderr, "npubench coordinator: dashboard on %s\n", c->http_bound);
    while (!got_signal)
        nb_sleep_ms(100);
    nb_coord_log(c, "signal %d: stopping (queued and running jobs stay in %s)", (int)got_signal,
                 c->db_path);
    nb_coord_stop(c);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    got_signal = 0;
    return NB_OK;
}
