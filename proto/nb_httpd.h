/* nb_httpd: a small HTTP/1.1 server for the dashboard, bounded against slow and idle
 * clients: a connection cap, a deadline for the whole request, one request per connection. */
#ifndef NB_HTTPD_H
#define NB_HTTPD_H

#include <stddef.h>

#include "nb_err.h"

typedef struct nb_httpd nb_httpd;

/* One request, as parsed (every string NUL-terminated; absent headers are ""). */
typedef struct nb_httpd_req {
    const char *method;        /* "GET", "POST", ... */
    const char *target;        /* "/path?query" */
    const char *authorization; /* the Authorization header */
    const char *cookie;
    const char *content_type;
    const char *body;          /* Content-Length bytes (POST), NUL-terminated */
    size_t body_len;
} nb_httpd_req;

#define NB_HTTPD_HEADERS_MAX 1024

/* The handler's answer: status, Content-Type, a malloc'ed body (freed by the server) and
 * extra header lines ("Name: value\r\n" each). */
typedef struct nb_httpd_res {
    int status;
    const char *ctype;
    char *body;
    size_t len;
    char headers[NB_HTTPD_HEADERS_MAX];
} nb_httpd_res;

typedef void (*nb_httpd_fn)(void *user, const nb_httpd_req *req, nb_httpd_res *res);

typedef struct nb_httpd_opts {
    int max_conns;         /* connections open at once; more are answered 503 and closed [64] */
    int request_timeout_ms;/* from accept to the whole request read; then closed [10000] */
    int write_timeout_ms;  /* for the answer [10000] */
    int threads;           /* handler threads [4] */
    size_t max_request;    /* header and body bytes [64 KiB] */
} nb_httpd_opts;

/* Listens on host:port (port "0": any; *bound_port gets it) and serves with fn. */
nb_code nb_httpd_start(const char *host, const char *port, const nb_httpd_opts *opts,
                       nb_httpd_fn fn, void *user, nb_httpd **out, int *bound_port,
                       nb_err *err);

/* Stops listening, closes every connection and waits for running handlers. NULL ok. */
void nb_httpd_stop(nb_httpd *h);

/* Connections open now (for tests and stats). */
int nb_httpd_connections(nb_httpd *h);

/* Appends "name: value\r\n" to res->headers; -1 when it does not fit. */
int nb_httpd_header(nb_httpd_res *res, const char *name, const char *value);

#endif
