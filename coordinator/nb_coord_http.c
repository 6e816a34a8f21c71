/* nb_coord_http: the read-only web dashboard (--http URL) on nb_httpd (bounded connections,
 * a deadline per request) — the pages of dash/ rendered per request from the coordinator's
 * database, behind the RPC's keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_coord_int.h"
#include "nb_hmac.h"
#include "nb_httpd.h"
#include "nb_svg.h"

#define COOKIE "npubench_view"
/* The cookie carries a token derived from the key, never the key itself, so a stolen
 * cookie opens the dashboard only and cannot sign RPCs. */
#define TOKEN_LABEL "npubench dashboard viewer/1"
#define KEY_MAX 4096

typedef enum auth { AUTH_OK, AUTH_MISSING, AUTH_WRONG_ROLE } auth;

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

/* The browser's credential: "Authorization: Bearer KEY" or the cookie that signing in
 * (POST /signin, a form) set. A key in the URL is never taken: browsers keep URLs in their
 * history, session and sync files. */
static auth check_auth(nb_coord *c, const nb_httpd_req *req, char token[65])
{
    int keyed = c->secret || c->admin_secret || c->worker_secret;
    if (!keyed)
        return AUTH_OK; /* loopback only: nb_coord_http_start refused anything else */
    int wrong_role = 0;
    const char *authz = req->authorization;
    if (!strncasecmp(authz, "Bearer ", 7)) {
        const char *k = authz + 7;
        if (viewer_key(c, k, strlen(k)))
            return AUTH_OK;
        wrong_role |= key_equal(k, strlen(k), c->worker_secret);
    }
    const char *cookie = *req->cookie ? req->cookie : NULL;
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
    return wrong_role ? AUTH_WRONG_ROLE : AUTH_MISSING;
}

/* res answers status with a copy of body (the security headers every answer carries);
 * 0 on success, -1 out of memory (res then a bare 500). */
static int make_res(nb_httpd_res *res, int status, const char *ctype, const char *body,
                    size_t len)
{
    res->status = status;
    res->ctype = ctype;
    res->headers[0] = '\0';
    nb_httpd_header(res, "Cache-Control", "no-store");
    nb_httpd_header(res, "X-Content-Type-Options", "nosniff");
    nb_httpd_header(res, "Referrer-Policy", "no-referrer");
    /* The pages carry no script at all: forbid any, and any fetch off this server. */
    nb_httpd_header(res, "Content-Security-Policy",
                    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                    "frame-ancestors 'none'; form-action 'self'");
    res->body = NULL;
    res->len = 0;
    if (body && len) {
        res->body = malloc(len);
        if (!res->body) {
            res->status = 500;
            return -1;
        }
        memcpy(res->body, body, len);
        res->len = len;
    }
    return 0;
}

static void page_res(nb_httpd_res *res, int status, const char *title, const char *msg,
                     const char *signin_next);

/* A short HTML page for an error, the message escaped. */
static void error_res(nb_httpd_res *res, int status, const char *title, const char *msg)
{
    page_res(res, status, title, msg, NULL);
}

/* The error page; with signin_next, a sign-in form that comes back to that page. */
static void page_res(nb_httpd_res *res, int status, const char *title, const char *msg,
                     const char *signin_next)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        res->status = 500;
        return;
    }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%d ",
            status);
    nb_svg_escape(f, title);
    fprintf(f, "</title></head><body><h1>%d ", status);
    nb_svg_escape(f, title);
    fputs("</h1><p>", f);
    nb_svg_escape(f, msg);
    fputs("</p>", f);
    if (signin_next) {
        fputs("<form method=\"post\" action=\"/signin\"><input type=\"hidden\" name=\"next\" "
              "value=\"",
              f);
        nb_svg_escape(f, signin_next);
        fputs("\"><label>Client key <input type=\"password\" name=\"key\" "
              "autocomplete=\"current-password\"></label> <button>Sign in</button></form>",
              f);
    }
    fputs("<p><a href=\"index.html\">npubench dashboard</a></p></body></html>\n", f);
    if (fclose(f) == 0 && buf)
        make_res(res, status, "text/html; charset=utf-8", buf, len);
    else
        res->status = 500;
    free(buf);
}

static int http_status(nb_code rc)
{
    switch (rc) {
    case NB_EINVAL: return 400; /* a page name that names nothing it could (job-abc.html) */
    case NB_ENOTFOUND: return 404;
    case NB_EUNAVAIL: return 503;
    default: return 500;
    }
}

/* next as a path of this server, else "/": "//host/x" and "/\\host" are other sites to a
 * browser, and CR/LF would split the header. */
static void local_path(const char *next, char *out, size_t cap)
{
    int local = next[0] == '/' && next[1] != '/' && next[1] != '\\' &&
                !strpbrk(next, "\\\r\n") && strlen(next) < cap;
    snprintf(out, cap, "%s", local ? next : "/");
}

/* POST /signin, a form (key, next): a valid viewer key sets the cookie (a token derived
 * from the key, never the key) and goes back to next, a local path. */
static void sign_in(nb_coord *c, const nb_httpd_req *req, nb_httpd_res *res)
{
    char *k = malloc(KEY_MAX), next[NB_DASH_NAME_MAX + 2], raw_next[NB_DASH_NAME_MAX + 2];
    long n = k ? query_param(req->body, "key", k, KEY_MAX) : -1;
    if (query_param(req->body, "next", raw_next, sizeof raw_next) < 0)
        snprintf(raw_next, sizeof raw_next, "/");
    local_path(raw_next, next, sizeof next);
    char token[65];
    int ok = n >= 0 && viewer_key(c, k, (size_t)n);
    int worker = !ok && n >= 0 && key_equal(k, (size_t)n, c->worker_secret);
    if (ok)
        view_token(k, token);
    if (k) {
        memset(k, 0, KEY_MAX);
        free(k);
    }
    if (worker)
        return error_res(res, 403, "Forbidden",
                         "the dashboard needs the client or admin credential; this is the "
                         "worker key");
    if (!ok)
        return page_res(res, 401, "Unauthorized", "that is not a client or admin key", next);
    char cookie[200], body[NB_DASH_NAME_MAX + 16];
    snprintf(cookie, sizeof cookie,
             COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=28800", token);
    int blen = snprintf(body, sizeof body, "see %s\n", next);
    if (make_res(res, 303, "text/plain", body, (size_t)blen) == 0 &&
        (nb_httpd_header(res, "Set-Cookie", cookie) || nb_httpd_header(res, "Location", next)))
        res->status = 500;
}

static void serve(nb_coord *c, const nb_httpd_req *req, nb_httpd_res *res)
{
    const char *uri = req->target;
    if (!strcmp(req->method, "POST") && !strcmp(uri, "/signin"))
        return sign_in(c, req, res);
    if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD"))
        return error_res(res, 405, "Method not allowed",
                         "the dashboard is read-only: GET (and POST /signin)");
    if (uri[0] != '/')
        return error_res(res, 400, "Bad request", "the path must start with /");
    const char *q = strchr(uri, '?');
    size_t plen = q ? (size_t)(q - uri) : strlen(uri);
    char name[NB_DASH_NAME_MAX];
    if (plen - 1 >= sizeof name)
        return error_res(res, 404, "Not found", "no such page");
    memcpy(name, uri + 1, plen - 1);
    name[plen - 1] = '\0';

    char token[65];
    switch (check_auth(c, req, token)) {
    case AUTH_OK: break;
    case AUTH_WRONG_ROLE:
        return error_res(res, 403, "Forbidden",
                         "the dashboard needs the client or admin credential; this is the "
                         "worker key");
    case AUTH_MISSING: {
        char back[NB_DASH_NAME_MAX + 2];
        snprintf(back, sizeof back, "/%s", name);
        char next[NB_DASH_NAME_MAX + 2];
        local_path(back, next, sizeof next);
        return page_res(res, 401, "Unauthorized",
                        "this coordinator has keys: sign in with the client key (a cookie "
                        "keeps you signed in; the key is not stored), or send "
                        "'Authorization: Bearer CLIENT_KEY'",
                        next);
    }
    }

    /* /job/N, as people type it: the page is job-N.html (flat names keep the export's
     * relative links); what follows "job/" is checked there (job-abc.html is a 400) */
    if (!strncmp(name, "job/", 4)) {
        const char *id = name + 4;
        size_t n = strspn(id, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-");
        if (!*id || id[n] || n > 32)
            return error_res(res, 404, "Not found", "no such page: a job's page is /job-ID.html");
        char loc[48], body[64];
        snprintf(loc, sizeof loc, "/job-%.32s.html", id);
        int blen = snprintf(body, sizeof body, "see %s\n", loc);
        if (make_res(res, 301, "text/plain", body, (size_t)blen) == 0 &&
            nb_httpd_header(res, "Location", loc))
            res->status = 500;
        return;
    }
    nb_dash_opts o;
    nb_coord_dash_opts(c, &o);
    char *body = NULL;
    size_t len = 0;
    const char *ctype = NULL;
    nb_err err = {0};
    /* the query goes with the name: a job's log reads after=SEQ from it */
    char named[NB_DASH_NAME_MAX + 256];
    if (q && strlen(q) >= sizeof named - strlen(name))
        return error_res(res, 400, "Bad request", "the query is longer than 255 bytes");
    snprintf(named, sizeof named, "%s%s", name, q ? q : "");
    nb_code rc = nb_dash_page(c->db, &o, named, &body, &len, &ctype, &err);
    if (rc) {
        if (rc != NB_ENOTFOUND && rc != NB_EINVAL)
            nb_coord_log(c, "dashboard: /%s: %s", name, err.msg);
        error_res(res, http_status(rc),
                  rc == NB_ENOTFOUND ? "Not found" : rc == NB_EINVAL ? "Bad request" : "Error",
                  err.msg);
    } else {
        make_res(res, 200, ctype, body, len);
    }
    free(body);
}

static void on_request(void *user, const nb_httpd_req *req, nb_httpd_res *res)
{
    nb_coord *c = user;
    pthread_mutex_lock(&c->mu);
    int stopping = c->stopping;
    pthread_mutex_unlock(&c->mu);
    if (stopping)
        return error_res(res, 503, "Unavailable", "the coordinator is stopping");
    serve(c, req, res);
}

/* host and port of an http://host:port[/] URL; NB_EINVAL naming what is wrong. */
static nb_code parse_http_url(const char *url, char *host, size_t hcap, char *port,
                              size_t pcap, nb_err *err)
{
    const char *p = url + 7, *end = p + strcspn(p, "/");
    if (*end && strcmp(end, "/"))
        return nb_err_set(err, NB_EINVAL,
                          "coordinator: --http %s: the dashboard is served at the root; give "
                          "no path",
                          url);
    const char *colon = NULL;
    if (*p == '[') { /* [v6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb || rb[1] != ':')
            return nb_err_set(err, NB_EINVAL, "coordinator: --http %s: expected [addr]:port",
                              url);
        snprintf(host, hcap, "%.*s", (int)(rb - p - 1), p + 1);
        colon = rb + 1;
    } else {
        for (const char *x = p; x < end; x++)
            if (*x == ':')
                colon = x;
        if (!colon)
            return nb_err_set(err, NB_EINVAL, "coordinator: --http %s: expected http://host:port",
                              url);
        snprintf(host, hcap, "%.*s", (int)(colon - p), p);
    }
    snprintf(port, pcap, "%.*s", (int)(end - colon - 1), colon + 1);
    if (!*port || strspn(port, "0123456789") != strlen(port))
        return nb_err_set(err, NB_EINVAL, "coordinator: --http %s: the port must be a number",
                          url);
    return NB_OK;
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
    char host[256], port[16];
    nb_code rc = parse_http_url(c->http_url, host, sizeof host, port, sizeof port, err);
    if (rc)
        return rc;
    nb_httpd_opts ho = {.max_conns = c->o.http_max_conns,
                        .request_timeout_ms = c->o.http_request_timeout_ms};
    int bound = 0;
    nb_httpd *h = NULL;
    if ((rc = nb_httpd_start(!strcmp(host, "localhost") ? "127.0.0.1" : host, port, &ho,
                             on_request, c, &h, &bound, err)))
        return nb_err_prefix(err, "coordinator: --http %s: ", c->http_url);
    snprintf(c->http_bound, sizeof c->http_bound, "http://%s:%d/",
             strcmp(host, "0.0.0.0") ? host : "127.0.0.1", bound);
    c->http = h;
    nb_coord_log(c, "dashboard on %s", c->http_bound);
    return NB_OK;
}

void nb_coord_http_stop(nb_coord *c)
{
    if (!c->http)
        return;
    /* waits for the requests inside serve(), which read the database */
    nb_httpd_stop(c->http);
    c->http = NULL;
}
