/* nb_httpd: one poll thread accepts and reads requests (each connection with a deadline),
 * a few handler threads answer complete ones; every answer closes its connection, so no
 * connection is ever idle between requests. */
#include "nb_httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nb_time.h"

typedef struct conn {
    int fd;
    char *buf;
    size_t len;
    double deadline;     /* nb_now_ms() */
    struct conn *next;   /* work queue */
} conn;

struct nb_httpd {
    nb_httpd_opts o;
    nb_httpd_fn fn;
    void *user;
    int lfd;
    int wake[2]; /* a pipe: stop wakes the poll thread */
    pthread_t poller, *workers;
    int n_workers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    conn *qhead, *qtail;
    int stopping;
    int open_conns; /* reading + queued + being answered */
};

static void conn_close(nb_httpd *h, conn *c)
{
    close(c->fd);
    free(c->buf);
    free(c);
    pthread_mutex_lock(&h->mu);
    h->open_conns--;
    pthread_mutex_unlock(&h->mu);
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* SO_SNDTIMEO passed or the peer left */
        p += w;
        n -= (size_t)w;
    }
}

static const char *reason(int st)
{
    switch (st) {
    case 200: return "OK";
    case 303: return "See Other";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

static void send_res(int fd, const nb_httpd_res *r)
{
    char head[NB_HTTPD_HEADERS_MAX + 512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n%s\r\n",
                     r->status, reason(r->status), r->ctype ? r->ctype : "text/plain", r->len,
                     r->headers);
    write_all(fd, head, (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
    if (r->body && r->len)
        write_all(fd, r->body, r->len);
}

static void send_plain(int fd, int status, const char *text)
{
    nb_httpd_res r = {.status = status, .ctype = "text/plain; charset=utf-8",
                      .body = (char *)text, .len = strlen(text)};
    send_res(fd, &r);
}

int nb_httpd_header(nb_httpd_res *res, const char *name, const char *value)
{
    size_t used = strlen(res->headers);
    int n = snprintf(res->headers + used, sizeof res->headers - used, "%s: %s\r\n", name, value);
    if (n < 0 || (size_t)n >= sizeof res->headers - used) {
        res->headers[used] = '\0';
        return -1;
    }
    return 0;
}

/* The value of header name in the header block (lines after the request line), trimmed,
 * into the block itself (its line is cut); "" when absent. */
static const char *header(char *lines, const char *name)
{
    size_t nl = strlen(name);
    for (char *p = lines; p && *p;) {
        char *end = strstr(p, "\r\n");
        if (!strncasecmp(p, name, nl) && p[nl] == ':') {
            char *v = p + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            char *e = end ? end : v + strlen(v);
            while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            static __thread char out[4][8192];
            static __thread int slot;
            char *o = out[slot++ & 3];
            size_t n = (size_t)(e - v) < sizeof out[0] - 1 ? (size_t)(e - v) : sizeof out[0] - 1;
            memcpy(o, v, n);
            o[n] = '\0';
            return o;
        }
        p = end ? end + 2 : NULL;
    }
    return "";
}

/* Bytes of a complete request in c (headers and Content-Length body), 0 while more is
 * needed, -1 when malformed. */
static long complete(const conn *c, size_t *head_len, size_t *body_len)
{
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    *head_len = (size_t)(end - c->buf) + 4;
    *body_len = 0;
    for (char *p = c->buf; p < end;) {
        char *eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
        if (!strncasecmp(p, "Content-Length:", 15)) {
            char *x;
            long v = strtol(p + 15, &x, 10);
            if (v < 0)
                return -1;
            *body_len = (size_t)v;
        }
        p = eol ? eol + 2 : end;
    }
    return c->len >= *head_len + *body_len ? (long)(*head_len + *body_len) : 0;
}

static void answer(nb_httpd *h, conn *c)
{
    size_t hl = 0, bl = 0;
    complete(c, &hl, &bl);
    c->buf[hl - 2] = '\0'; /* the header block ends with its last line's CRLF */
    char *body = c->buf + hl;
    char saved = body[bl];
    (void)saved;
    body[bl] = '\0'; /* buf has a spare byte (see the reader) */
    char *sp1 = strchr(c->buf, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    char *eol = strstr(c->buf, "\r\n");
    if (!sp1 || !sp2 || !eol || sp2 > eol) {
        send_plain(c->fd, 400, "malformed request line\n");
        return;
    }
    *sp1 = *sp2 = '\0';
    char *lines = eol + 2;
    nb_httpd_req req = {.method = c->buf, .target = sp1 + 1,
                        .authorization = header(lines, "Authorization"),
                        .cookie = header(lines, "Cookie"),
                        .content_type = header(lines, "Content-Type"),
                        .body = body, .body_len = bl};
    nb_httpd_res res;
    memset(&res, 0, sizeof res);
    res.status = 500;
    h->fn(h->user, &req, &res);
    send_res(c->fd, &res);
    free(res.body);
}

static void *worker_main(void *arg)
{
    nb_httpd *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->qhead && !h->stopping)
            pthread_cond_wait(&h->cv, &h->mu);
        if (!h->qhead)
            break;
        conn *c = h->qhead;
        h->qhead = c->next;
        if (!h->qhead)
            h->qtail = NULL;
        pthread_mutex_unlock(&h->mu);
        answer(h, c);
        conn_close(h, c);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Reads what c has; 1 when its request is complete (queued), -1 when it is closed. */
static int read_some(nb_httpd *h, conn *c)
{
    char tmp[4096];
    ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (r <= 0)
        return -1;
    if (c->len + (size_t)r > h->o.max_request) {
        send_plain(c->fd, 413, "request too large\n");
        return -1;
    }
    char *nb = realloc(c->buf, c->len + (size_t)r + 1); /* + 1: answer() ends the body */
    if (!nb)
        return -1;
    c->buf = nb;
    memcpy(c->buf + c->len, tmp, (size_t)r);
    c->len += (size_t)r;
    size_t hl, bl;
    long n = complete(c, &hl, &bl);
    if (n < 0) {
        send_plain(c->fd, 400, "malformed Content-Length\n");
        return -1;
    }
    if (n == 0 && hl + bl > h->o.max_request && memmem(c->buf, c->len, "\r\n\r\n", 4)) {
        send_plain(c->fd, 413, "request too large\n");
        return -1;
    }
    return n > 0;
}

static void *poller_main(void *arg)
{
    nb_httpd *h = arg;
    int cap = h->o.max_conns;
    conn **reading = calloc((size_t)cap, sizeof *reading);
    struct pollfd *pfd = calloc((size_t)cap + 2, sizeof *pfd);
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        int stop = h->stopping;
        pthread_mutex_unlock(&h->mu);
        if (stop || !reading || !pfd)
            break;
        pfd[0] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
        for (int i = 0; i < n; i++)
            pfd[i + 2] = (struct pollfd){.fd = reading[i]->fd, .events = POLLIN};
        double now = nb_now_ms(), next = now + 1000;
        for (int i = 0; i < n; i++)
            if (reading[i]->deadline < next)
                next = reading[i]->deadline;
        int wait = next > now ? (int)(next - now) + 1 : 0;
        if (poll(pfd, (nfds_t)n + 2, wait) < 0 && errno != EINTR)
            break;
        now = nb_now_ms();
        /* requests in progress: read, queue the complete, close the late */
        for (int i = n - 1; i >= 0; i--) {
            conn *c = reading[i];
            int st = 0;
            if (pfd[i + 2].revents)
                st = read_some(h, c);
            else if (now >= c->deadline) {
                send_plain(c->fd, 408, "request not received in time\n");
                st = -1;
            }
            if (!st)
                continue;
            reading[i] = reading[--n];
            if (st < 0) {
                conn_close(h, c);
                continue;
            }
            pthread_mutex_lock(&h->mu);
            if (h->qtail)
                h->qtail->next = c;
            else
                h->qhead = c;
            h->qtail = c;
            pthread_cond_signal(&h->cv);
            pthread_mutex_unlock(&h->mu);
        }
        if (!(pfd[0].revents & POLLIN))
            continue;
        for (;;) {
            int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                break;
            struct timeval tv = {h->o.write_timeout_ms / 1000,
                                 (h->o.write_timeout_ms % 1000) * 1000};
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            pthread_mutex_lock(&h->mu);
            int full = h->open_conns >= cap || n >= cap;
            if (!full)
                h->open_conns++;
            pthread_mutex_unlock(&h->mu);
            conn *c = full ? NULL : calloc(1, sizeof *c);
            if (!c) {
                /* over the cap: said at once and closed, so the descriptor is not held */
                send_plain(fd, 503, "too many connections; try again\n");
                close(fd);
                if (!full) {
                    pthread_mutex_lock(&h->mu);
                    h->open_conns--;
                    pthread_mutex_unlock(&h->mu);
                }
                continue;
            }
            c->fd = fd;
            c->deadline = now + h->o.request_timeout_ms;
            reading[n++] = c;
        }
    }
    for (int i = 0; i < n; i++)
        conn_close(h, reading[i]);
    free(reading);
    free(pfd);
    return NULL;
}

static nb_code listen_on(const char *host, const char *port, int *fd, int *bound, nb_err *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(*host ? host : NULL, port, &hints, &ai);
    if (g)
        return nb_err_set(err, NB_EINVAL, "%s:%s: %s", host, port, gai_strerror(g));
    int s = -1, e = 0;
    for (struct addrinfo *a = ai; a && s < 0; a = a->ai_next) {
        s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s < 0)
            continue;
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, a->ai_addr, a->ai_addrlen) || listen(s, 128)) {
            e = errno;
            close(s);
            s = -1;
        }
    }
    freeaddrinfo(ai);
    if (s < 0)
        return nb_err_set(err, e == EADDRINUSE ? NB_EUNAVAIL : NB_EIO, "%s:%s: %s", host, port,
                          strerror(e ? e : EINVAL));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *bound = 0;
    if (!getsockname(s, (struct sockaddr *)&ss, &sl))
        *bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd = s;
    return NB_OK;
}

nb_code nb_httpd_start(const char *host, const char *port, const nb_httpd_opts *opts,
                       nb_httpd_fn fn, void *user, nb_httpd **out, int *bound_port,
                       nb_err *err)
{
    *out = NULL;
    nb_httpd *h = calloc(1, sizeof *h);
    if (!h)
        return nb_err_set(err, NB_ENOMEM, "http: out of memory");
    if (opts)
        h->o = *opts;
    if (h->o.max_conns <= 0)
        h->o.max_conns = 64;
    if (h->o.request_timeout_ms <= 0)
        h->o.request_timeout_ms = 10000;
    if (h->o.write_timeout_ms <= 0)
        h->o.write_timeout_ms = 10000;
    if (h->o.threads <= 0)
        h->o.threads = 4;
    if (!h->o.max_request)
        h->o.max_request = 64 * 1024;
    h->fn = fn;
    h->user = user;
    h->wake[0] = h->wake[1] = -1;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    nb_code rc = listen_on(host, port, &h->lfd, bound_port, err);
    if (rc) {
        free(h);
        return rc;
    }
    h->workers = calloc((size_t)h->o.threads, sizeof *h->workers);
    if (!h->workers || pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) ||
        pthread_create(&h->poller, NULL, poller_main, h)) {
        close(h->lfd);
        if (h->wake[0] >= 0) {
            close(h->wake[0]);
            close(h->wake[1]);
        }
        free(h->workers);
        free(h);
        return nb_err_set(err, NB_EINTERNAL, "http: cannot start its threads");
    }
    for (int i = 0; i < h->o.threads; i++)
        if (!pthread_create(&h->workers[i], NULL, worker_main, h))
            h->n_workers++;
    *out = h;
    return NB_OK;
}

int nb_httpd_connections(nb_httpd *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->open_conns;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void nb_httpd_stop(nb_httpd *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (write(h->wake[1], "x", 1) < 0) {
        /* the poll wakes within its timeout anyway */
    }
    pthread_join(h->poller, NULL);
    for (int i = 0; i < h->n_workers; i++)
        pthread_join(h->workers[i], NULL);
    /* queued requests nobody answered */
    for (conn *c = h->qhead, *next; c; c = next) {
        next = c->next;
        conn_close(h, c);
    }
    close(h->lfd);
    close(h->wake[0]);
    close(h->wake[1]);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->workers);
    free(h);
}
