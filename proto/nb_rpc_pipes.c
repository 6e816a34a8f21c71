/* nb_rpc_pipes: a table of (pipe id, last request) under a mutex, kept by nng's pipe events;
 * a thread closes the idle ones every idle_ms / 4 (at most once a second). */
#include "nb_rpc_pipes.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "nb_time.h"

typedef struct entry {
    uint32_t id;
    int64_t last_ms;
} entry;

struct nb_rpc_pipes {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    entry *e;
    int n, max, idle_ms, stopping, reaper_started;
    pthread_t reaper;
    nb_rpc_pipes_stats st;
};

static int find(nb_rpc_pipes *p, uint32_t id)
{
    for (int i = 0; i < p->n; i++)
        if (p->e[i].id == id)
            return i;
    return -1;
}

static void on_pipe(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    nb_rpc_pipes *p = arg;
    uint32_t id = (uint32_t)nng_pipe_id(pipe);
    pthread_mutex_lock(&p->mu);
    int refuse = 0;
    if (ev == NNG_PIPE_EV_ADD_PRE) {
        if (p->n >= p->max) {
            refuse = 1;
            p->st.refused++;
        } else {
            p->e[p->n++] = (entry){id, (int64_t)nb_now_ms()};
        }
    } else if (ev == NNG_PIPE_EV_REM_POST) {
        int i = find(p, id);
        if (i >= 0)
            p->e[i] = p->e[--p->n];
    }
    p->st.open = p->n;
    pthread_mutex_unlock(&p->mu);
    if (refuse)
        nng_pipe_close(pipe); /* its descriptor is freed now, not when the peer leaves */
}

void nb_rpc_pipes_touch(nb_rpc_pipes *p, nng_pipe pipe)
{
    if (!p)
        return;
    uint32_t id = (uint32_t)nng_pipe_id(pipe);
    pthread_mutex_lock(&p->mu);
    int i = find(p, id);
    if (i >= 0)
        p->e[i].last_ms = (int64_t)nb_now_ms();
    pthread_mutex_unlock(&p->mu);
}

static void *reaper_main(void *arg)
{
    nb_rpc_pipes *p = arg;
    int tick = p->idle_ms / 4 < 1000 ? p->idle_ms / 4 : 1000;
    if (tick < 10)
        tick = 10;
    uint32_t *idle = malloc((size_t)p->max * sizeof *idle);
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && idle) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)tick * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        int64_t now = (int64_t)nb_now_ms();
        int k = 0;
        for (int i = 0; i < p->n; i++)
            if (now - p->e[i].last_ms > p->idle_ms)
                idle[k++] = p->e[i].id;
        p->st.idle_closed += (uint64_t)k;
        pthread_mutex_unlock(&p->mu);
        /* closed outside the lock: the REM_POST callback takes it */
        for (int i = 0; i < k; i++) {
            nng_pipe pipe = NNG_PIPE_INITIALIZER;
            pipe.id = idle[i];
            nng_pipe_close(pipe);
        }
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    free(idle);
    return NULL;
}

nb_code nb_rpc_pipes_open(nng_socket sock, int max, int idle_ms, nb_rpc_pipes **out,
                          nb_err *err)
{
    *out = NULL;
    nb_rpc_pipes *p = calloc(1, sizeof *p);
    if (!p || !(p->e = calloc((size_t)max, sizeof *p->e))) {
        free(p);
        return nb_err_set(err, NB_ENOMEM, "out of memory for %d connections", max);
    }
    p->max = max;
    p->idle_ms = idle_ms;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int rv;
    if ((rv = nng_pipe_notify(sock, NNG_PIPE_EV_ADD_PRE, on_pipe, p)) ||
        (rv = nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, on_pipe, p))) {
        nb_rpc_pipes_close(p);
        return nb_err_set(err, NB_EINTERNAL, "pipe notifications: %s", nng_strerror(rv));
    }
    if (idle_ms > 0) {
        if (pthread_create(&p->reaper, NULL, reaper_main, p)) {
            nb_rpc_pipes_close(p);
            return nb_err_set(err, NB_EINTERNAL, "cannot start the connection reaper");
        }
        p->reaper_started = 1;
    }
    *out = p;
    return NB_OK;
}

void nb_rpc_pipes_get_stats(nb_rpc_pipes *p, nb_rpc_pipes_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    pthread_mutex_unlock(&p->mu);
}

void nb_rpc_pipes_close(nb_rpc_pipes *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->reaper_started)
        pthread_join(p->reaper, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->e);
    free(p);
}
