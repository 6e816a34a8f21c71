/* nb_coord_http: the read-only web dashboard (--http URL) on nng's HTTP server — the pages of
 * dash/ rendered per request from the coordinator's database, behind the RPC's keys. */
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_coord_int.h"
#include "nb_hmac.h"
#include "nb_svg.h"

#define COOKIE "npubench_view"
/* The cookie carries a token derived from the key, never the key itself, so a stolen
 * cookie opens the dashboard only and cannot sign RPCs. */
#define TOKEN_LABEL "npubench dashboard viewer/1"
#define KEY_MAX 4096

typedef enum auth { AUTH_OK, AUTH_SET_COOKIE, AUTH_MISSING, AUTH_WRONG_ROLE } auth;

static void view_token(const char *key, char hex[2 * NB_HMAC_SHA256_LEN + 1])
{
    uint8_t mac[NB_HMAC_SHA256_LEN];
    nb_hmac_sha256(key, strlen(key), TOKEN_LABEL, strlen(TOKEN_LABEL), mac);
    for (size_t i = 0; i < sizeof mac; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

/* 1 when s (len bytes) equals key, in time independent of where they differ. */
static int key_equal(const char *s, size_t len, const char *key)
{
    if (!key || strlen(key) != len)
        return 0;
    return nb_hmac_equal(s, key, len);
}

/* The viewer keys: the client key (or the one key) and the admin key. */
static int viewer_key(const nb_coord *c, const char *s, size_t len)
{
    return key_equal(s, len, c->secret) || key_equal(s, len, c->admin_secret);
}

static int hexval(int ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* The value of query parameter name, percent-decoded into out; -1 when absent or too long. */
static long query_param(const char *query, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = query; p && *p;) {
        const char *end = strchr(p, '&');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > nl && !strncmp(p, name, nl) && p[nl] == '=') {
            size_t o = 0;
            for (size_t i = nl + 1; i < n; i++) {
                int ch = (unsigned char)p[i];
                if (ch == '%' && i + 2 < n && hexval(p[i + 1]) >= 0 && hexval(p[i + 2]) >= 0) {
                    ch = hexval(p[i + 1]) * 16 + hexval(p[i + 2]);
                    i += 2;
                } else if (ch == '+') {
                    ch = ' ';
                }
                if (o + 1 >= cap)
                    return -1;
                out[o++] = (char)ch;
            }
            out[o] = '\0';
            return (long)o;
        }
        p = end ? end + 1 : NULL;
    }
    return -1;
}

/* The browser's credential: "Authorization: Bearer KEY", the cookie a first "?key=KEY"
 * set, or that "?key=KEY" itself (answered with the cookie and a redirect that drops the
 * key from the address bar and history). */
static auth check_auth(nb_coord *c, nng_http_req *req, const char *query, char token[65])
{
    int keyed = c->secret || c->admin_secret || c->worker_secret;
    if (!keyed)
        return AUTH_OK; /* loopback only: nb_coord_http_start refused anything else */
    int wrong_role = 0;
    const char *authz = nng_http_req_get_header(req, "Authorization");
    if (authz && !strncasecmp(authz, "Bearer ", 7)) {
        const char *k = authz + 7;
        if (viewer_key(c, k, strlen(k)))
            return AUTH_OK;
        wrong_role |= key_equal(k, strlen(k), c->worker_secret);
    }
    const char *cookie = nng_http_req_get_header(req, "Cookie");
    for (const char *p = cookie; p && (p = strstr(p, COOKIE "="));) {
        if (p != cookie && p[-1] != ' ' && p[-1] != ';') {
            p++;
            continue;
        }
        p += strlen(COOKIE) + 1;
        size_t n = strcspn(p, "; ");
        const char *keys[2] = {c->secret, c->admin_secret};
        for (int i = 0; i < 2; i++) {
            if (!keys[i])
                continue;
            view_token(keys[i], token);
            if (n == 64 && nb_hmac_equal(p, token, 64))
                return AUTH_OK;
        }
    }
    char *k = malloc(KEY_MAX);
    long n = k ? query_param(query, "key", k, KEY_MAX) : -1;
    auth a = AUTH_MISSING;
    if (n >= 0 && viewer_key(c, k, (size_t)n)) {
        view_token(k, token);
        a = AUTH_SET_COOKIE;
    } else if (n >= 0 && key_equal(k, (size_t)n, c->worker_secret)) {
        wrong_role = 1;
    }
    if (k) {
        memset(k, 0, KEY_MAX);
        free(k);
    }
    return a == AUTH_MISSING && wrong_role ? AUTH_WRONG_ROLE : a;
}

static nng_http_res *make_res(uint16_t status, const char *ctype, const char *body, size_t len)
{
    nng_http_res *res = NULL;
    if (nng_http_res_alloc(&res))
        return NULL;
    nng_http_res_set_status(res, status);
    nng_http_res_set_header(res, "Content-Type", ctype);
    nng_http_res_set_header(res, "Cache-Control", "no-store");
    nng_http_res_set_header(res, "X-Content-Type-Options", "nosniff");
    nng_http_res_set_header(res, "Referrer-Policy", "no-referrer");
    /* The pages carry no script at all: forbid any, and any fetch off this server. */
    nng_http_res_set_header(res, "Content-Security-Policy",
                            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                            "frame-ancestors 'none'");
    if (body && len && nng_http_res_copy_data(res, body, len)) {
        nng_http_res_free(res);
        return NULL;
    }
    return res;
}

/* A short HTML page for an error, the message escaped. */
static nng_http_res *error_res(uint16_t status, const char *title, const char *msg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%u ",
            status);
    nb_svg_escape(f, title);
    fprintf(f, "</title></head><body><h1>%u ", status);
    nb_svg_escape(f, title);
    fputs("</h1><p>", f);
    nb_svg_escape(f, msg);
    fputs("</p><p><a href=\"index.html\">npubench dashboard</a></p></body></html>\n", f);
    nng_http_res *res = NULL;
    if (fclose(f) == 0 && buf)
        res = make_res(status, "text/html; charset=utf-8", buf, len);
    free(buf);
    return res;
}

static uint16_t http_status(nb_code rc)
{
    switch (rc) {
    case NB_ENOTFOUND: return NNG_HTTP_STATUS_NOT_FOUND;
    case NB_EUNAVAIL: return NNG_HTTP_STATUS_SERVICE_UNAVAILABLE;
    default: return NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR;
    }
}

static nng_http_res *serve(nb_coord *c, nng_http_req *req)
{
    const char *uri = nng_http_req_get_uri(req);
    if (!uri || uri[0] != '/')
        return error_res(NNG_HTTP_STATUS_BAD_REQUEST, "Bad request", "the path must start with /");
    const char *q = strchr(uri, '?');
    size_t plen = q ? (size_t)(q - uri) : strlen(uri);
    char name[NB_DASH_NAME_MAX];
    if (plen - 1 >= sizeof name)
        return error_res(NNG_HTTP_STATUS_NOT_FOUND, "Not found", "no such page");
    memcpy(name, uri + 1, plen - 1);
    name[plen - 1] = '\0';

    char token[65];
    switch (check_auth(c, req, q ? q + 1 : NULL, token)) {
    case AUTH_OK: break;
    case AUTH_SET_COOKIE: {
        char cookie[160], loc[NB_DASH_NAME_MAX + 2], body[NB_DASH_NAME_MAX + 16];
        snprintf(cookie, sizeof cookie, COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict", token);
        snprintf(loc, sizeof loc, "/%s", name);
        /* a body, so the answer has a length and a kept-alive connection goes on */
        int blen = snprintf(body, sizeof body, "see %s\n", loc);
        nng_http_res *res =
            make_res(NNG_HTTP_STATUS_SEE_OTHER, "text/plain", body, (size_t)blen);
        if (res && (nng_http_res_set_header(res, "Set-Cookie", cookie) ||
                    nng_http_res_set_header(res, "Location", loc))) {
            nng_http_res_free(res);
            res = NULL;
        }
        return res;
    }
    case AUTH_WRONG_ROLE:
        return error_res(NNG_HTTP_STATUS_FORBIDDEN, "Forbidden",
                         "the dashboard needs the client or admin credential; this is the "
                         "worker key");
    case AUTH_MISSING:
        return error_res(NNG_HTTP_STATUS_UNAUTHORIZED, "Unauthorized",
                         "this coordinator has keys: open /?key=CLIENT_KEY once (a cookie "
                         "keeps you signed in; the key is not stored), or send "
                         "'Authorization: Bearer CLIENT_KEY'");
    }

    nb_dash_opts o;
    nb_coord_dash_opts(c, &o);
    char *body = NULL;
    size_t len = 0;
    const char *ctype = NULL;
    nb_err err = {0};
    nb_code rc = nb_dash_page(c->db, &o, name, &body, &len, &ctype, &err);
    nng_http_res *res;
    if (rc) {
        if (rc != NB_ENOTFOUND)
            nb_coord_log(c, "dashboard: /%s: %s", name, err.msg);
        res = error_res(http_status(rc), rc == NB_ENOTFOUND ? "Not found" : "Error", err.msg);
    } else {
        res = make_res(NNG_HTTP_STATUS_OK, ctype, body, len);
    }
    free(body);
    return res;
}

static void on_request(nng_aio *aio)
{
    nng_http_req *req = nng_aio_get_input(aio, 0);
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    nb_coord *c = nng_http_handler_get_data(h);
    pthread_mutex_lock(&c->mu);
    int stopping = c->stopping;
    if (!stopping)
        c->http_inflight++;
    pthread_mutex_unlock(&c->mu);
    if (stopping) {
        nng_aio_finish(aio, NNG_ECLOSED);
        return;
    }
    nng_http_res *res = serve(c, req);
    pthread_mutex_lock(&c->mu);
    c->http_inflight--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (!res) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

nb_code nb_coord_http_start(nb_coord *c, nb_err *err)
{
    if (!c->http_url)
        return NB_OK;
    int keyed = c->secret || c->worker_secret || c->admin_secret;
    if (strncmp(c->http_url, "http://", 7))
        return nb_err_set(err, NB_EINVAL, "coordinator: --http %s: expected http://host:port",
                          c->http_url);
    if (!keyed && !nb_coord_url_is_local(c->http_url)) {
        if (!c->o.insecure)
            return nb_err_set(err, NB_EINVAL,
                              "coordinator: --http %s reaches beyond this host, and no key is "
                              "set: give --secret-file (viewers sign in with the client key), "
                              "or --insecure",
                              c->http_url);
        nb_coord_log(c, "WARNING: --insecure: the dashboard %s is open to anyone who reaches it",
                     c->http_url);
    }
    nng_url *url = NULL;
    nng_http_server *srv = NULL;
    nng_http_handler *h = NULL;
    int rv = nng_url_parse(&url, c->http_url);
    if (rv)
        return nb_err_set(err, NB_EINVAL, "coordinator: --http %s: %s", c->http_url,
                          nng_strerror(rv));
    if (url->u_path[0] && strcmp(url->u_path, "/")) {
        nng_url_free(url);
        return nb_err_set(err, NB_EINVAL,
                          "coordinator: --http %s: the dashboard is served at the root; give "
                          "no path",
                          c->http_url);
    }
    if ((rv = nng_http_server_hold(&srv, url)) || (rv = nng_http_handler_alloc(&h, "/", on_request)) ||
        (rv = nng_http_handler_set_tree(h)) || (rv = nng_http_handler_set_data(h, c, NULL)) ||
        (rv = nng_http_server_add_handler(srv, h))) {
        if (h)
            nng_http_handler_free(h);
        goto fail;
    }
    if ((rv = nng_http_server_start(srv)))
        goto fail;
    nng_sockaddr sa;
    int port = 0;
    if (!nng_http_server_get_addr(srv, &sa)) {
        if (sa.s_family == NNG_AF_INET)
            port = ntohs(sa.s_in.sa_port);
        else if (sa.s_family == NNG_AF_INET6)
            port = ntohs(sa.s_in6.sa_port);
    }
    snprintf(c->http_bound, sizeof c->http_bound, "http://%s:%d/",
             strcmp(url->u_hostname, "0.0.0.0") ? url->u_hostname : "127.0.0.1",
             port ? port : atoi(url->u_port));
    c->http = srv;
    nng_url_free(url);
    nb_coord_log(c, "dashboard on %s", c->http_bound);
    return NB_OK;
fail:
    if (srv)
        nng_http_server_release(srv);
    nng_url_free(url);
    return nb_err_set(err, rv == NNG_EADDRINUSE ? NB_EUNAVAIL : NB_EINVAL,
                      "coordinator: --http %s: %s", c->http_url, nng_strerror(rv));
}

void nb_coord_http_stop(nb_coord *c)
{
    if (!c->http)
        return;
    nng_http_server *srv = c->http;
    nng_http_server_stop(srv);
    /* A request already inside serve() still reads the database: wait for it. */
    pthread_mutex_lock(&c->mu);
    while (c->http_inflight > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    nng_http_server_release(srv);
    c->http = NULL;
}
