/* nb_coord_state: the state every coordinator API shares once started — the rate-limited log,
 * the change counters that wake long polls (LeaseJob, WatchJob), the stats — apart from start-up. */
#include "nb_coord.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_coord_int.h"
#include "nb_log.h"
#include "nb_time.h"

static int64_t log_window(const nb_coord *c)
{
    return c->o.log_window_ms > 0 ? c->o.log_window_ms : COORD_LOG_WINDOW_MS;
}

/* Counts a line of kind fmt; 0 when it is over the burst. *dropped gets the count
 * suppressed in the window that just ended (to report once). Slots are reused oldest
 * window first, so a flood of distinct kinds cannot grow the table. */
static int log_admit(nb_coord *c, const char *fmt, int64_t now, unsigned *dropped)
{
    pthread_mutex_lock(&c->log_mu);
    coord_logkey *k = NULL, *oldest = &c->log_keys[0];
    for (size_t i = 0; i < COORD_LOG_KEYS && !k; i++) {
        if (c->log_keys[i].fmt == fmt)
            k = &c->log_keys[i];
        else if (c->log_keys[i].window_ms < oldest->window_ms)
            oldest = &c->log_keys[i];
    }
    if (!k) {
        k = oldest;
        *k = (coord_logkey){fmt, now, 0, 0};
    }
    *dropped = 0;
    if (now - k->window_ms >= log_window(c)) {
        *dropped = k->dropped;
        k->window_ms = now;
        k->lines = k->dropped = 0;
    }
    int ok = ++k->lines <= COORD_LOG_BURST;
    if (!ok)
        k->dropped++;
    pthread_mutex_unlock(&c->log_mu);
    return ok;
}

void nb_coord_log(nb_coord *c, const char *fmt, ...)
{
    if (c->o.quiet)
        return;
    unsigned dropped;
    int ok = log_admit(c, fmt, nb_wall_ms(), &dropped);
    if (dropped)
        nb_log("npubench coordinator", "%u more lines like \"%.80s\" suppressed", dropped,
               fmt);
    if (!ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    nb_logv("npubench coordinator", fmt, ap);
    va_end(ap);
}

void nb_coord_log_flush(nb_coord *c, int64_t now, int all)
{
    if (c->o.quiet)
        return;
    struct {
        const char *fmt;
        unsigned n;
    } due[COORD_LOG_KEYS];
    size_t nd = 0;
    pthread_mutex_lock(&c->log_mu);
    for (size_t i = 0; i < COORD_LOG_KEYS; i++) {
        coord_logkey *k = &c->log_keys[i];
        if (k->fmt && k->dropped && (all || now - k->window_ms >= log_window(c))) {
            due[nd].fmt = k->fmt;
            due[nd++].n = k->dropped;
            k->window_ms = now;
            k->lines = k->dropped = 0;
        }
    }
    pthread_mutex_unlock(&c->log_mu);
    for (size_t i = 0; i < nd; i++)
        nb_log("npubench coordinator", "%u more lines like \"%.80s\" suppressed", due[i].n,
               due[i].fmt);
}

static coord_seq *seq_slot(nb_coord *c, int64_t job_id)
{
    return &c->seqs[(uint64_t)job_id % COORD_SEQ_SLOTS];
}

void nb_coord_changed(nb_coord *c, int64_t job_id, int64_t parent_id)
{
    pthread_mutex_lock(&c->mu);
    c->gen++;
    int64_t ids[2] = {job_id, parent_id};
    for (int i = 0; i < 2; i++) {
        if (ids[i] <= 0)
            continue;
        coord_seq *s = seq_slot(c, ids[i]);
        s->job_id = ids[i];
        s->seq = c->gen;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

uint64_t nb_coord_job_seq(nb_coord *c, int64_t job_id)
{
    pthread_mutex_lock(&c->mu);
    coord_seq *s = seq_slot(c, job_id);
    /* A slot taken over by another job: report "changed now", so a watcher
     * re-reads the job instead of sleeping through its changes. */
    uint64_t v = s->job_id == job_id ? s->seq : (s->job_id ? c->gen : 0);
    pthread_mutex_unlock(&c->mu);
    return v;
}

uint64_t nb_coord_gen(nb_coord *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t g = c->gen;
    pthread_mutex_unlock(&c->mu);
    return g;
}

void nb_coord_queue_changed(nb_coord *c)
{
    pthread_mutex_lock(&c->mu);
    c->gen++;
    c->qgen++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

uint64_t nb_coord_qgen(nb_coord *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t g = c->qgen;
    pthread_mutex_unlock(&c->mu);
    return g;
}

/* Waits for *counter (c->gen or c->qgen) to move past *seen. */
static int wait_counter(nb_coord *c, const uint64_t *counter, uint64_t *seen, int64_t until_ms)
{
    int r = 1;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->stopping) {
            r = -1;
            break;
        }
        if (*counter != *seen) {
            r = 0;
            break;
        }
        int64_t now = nb_wall_ms();
        if (now >= until_ms)
            break;
        /* The condvar clock is CLOCK_REALTIME (the default), like until_ms. */
        struct timespec ts = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000L};
        int e = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (e != 0 && e != ETIMEDOUT && e != EINTR)
            break;
    }
    *seen = *counter;
    pthread_mutex_unlock(&c->mu);
    return r;
}

int nb_coord_wait(nb_coord *c, uint64_t *gen, int64_t until_ms)
{
    return wait_counter(c, &c->gen, gen, until_ms);
}

int nb_coord_wait_queue(nb_coord *c, uint64_t *qgen, int64_t until_ms)
{
    return wait_counter(c, &c->qgen, qgen, until_ms);
}

int64_t nb_coord_poll_until(nb_coord *c, const nb_rpc_request *req, int wait_ms)
{
    if (wait_ms < 0)
        wait_ms = 0;
    if (wait_ms > c->o.max_wait_ms)
        wait_ms = c->o.max_wait_ms;
    int64_t until = nb_wall_ms() + wait_ms;
    /* Answer before the caller gives up, or a lease granted at the last
     * moment is lost until it expires. */
    if (req->deadline_unix_ms > 0) {
        int64_t margin = 250;
        if (until > req->deadline_unix_ms - margin)
            until = req->deadline_unix_ms - margin;
    }
    return until;
}

void nb_coord_stat_add(nb_coord *c, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&c->mu);
    *field += n;
    pthread_mutex_unlock(&c->mu);
}

void nb_coord_get_stats(nb_coord *c, nb_coord_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}

int nb_coord_state_to_pb(nb_job_state s)
{
    switch (s) {
    case NB_JOB_QUEUED: return NPUBENCH__JOB_STATE__JOB_QUEUED;
    case NB_JOB_LEASED: return NPUBENCH__JOB_STATE__JOB_LEASED;
    case NB_JOB_RUNNING: return NPUBENCH__JOB_STATE__JOB_RUNNING;
    case NB_JOB_DONE: return NPUBENCH__JOB_STATE__JOB_DONE;
    case NB_JOB_FAILED: return NPUBENCH__JOB_STATE__JOB_FAILED;
    case NB_JOB_CANCELLED: return NPUBENCH__JOB_STATE__JOB_CANCELLED;
    }
    return NPUBENCH__JOB_STATE__JOB_STATE_UNSPECIFIED;
}

/* ---- what the APIs ask of an address ---- */

/* The host of a tcp/tls URL ("" for ipc and inproc, which never leave the host). */
void nb_coord_url_host(const char *url, char *host, size_t cap)
{
    host[0] = '\0';
    const char *p = strstr(url, "://");
    if (!p || !strncmp(url, "ipc://", 6) || !strncmp(url, "inproc://", 9))
        return;
    p += 3;
    const char *end = *p == '[' ? strchr(p, ']') : strrchr(p, ':');
    if (*p == '[' && end)
        p++;
    size_t n = end ? (size_t)(end - p) : strlen(p);
    snprintf(host, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

int nb_coord_url_is_local(const char *url)
{
    char host[256];
    nb_coord_url_host(url, host, sizeof host);
    return !strstr(url, "://") || !strncmp(url, "ipc://", 6) || !strncmp(url, "inproc://", 9) ||
           !strncmp(host, "127.", 4) || !strcmp(host, "::1") || !strcmp(host, "localhost");
}
