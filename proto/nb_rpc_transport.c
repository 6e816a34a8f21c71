/* nb_rpc_transport: URL and method-name checks, TLS set-up and socket opening shared by the
 * RPC server and client, with errors that name the URL and the option to fix. */
#include "nb_rpc_transport.h"

#include <arpa/inet.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "nb_wire.h"

static const char *const schemes[] = {"tcp://",     "tcp4://",     "tcp6://",
                                      "ipc://",     "inproc://",   "tls+tcp://",
                                      "tls+tcp4://", "tls+tcp6://"};

nb_code nb_rpc_check_url(const char *url, nb_err *err)
{
    if (!url || !url[0])
        return nb_err_set(err, NB_EINVAL, "empty RPC URL");
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
            return NB_OK;
    return nb_err_set(err, NB_EINVAL,
                      "%s: unsupported URL scheme; use tcp://host:port, ipc:///path, "
                      "inproc://name or tls+tcp://host:port",
                      url);
}

bool nb_rpc_url_is_tls(const char *url)
{
    return strncmp(url, "tls+", 4) == 0;
}

nb_code nb_rpc_nng_fail(nb_err *err, nb_code code, int rv, const char *fmt, ...)
{
    char what[NB_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nb_err_set(err, code, "%s: %s", what, nng_strerror(rv));
}

/* The name a client verifies the server's certificate for.  Our own config replaces nng's
 * default one, which would have taken the server name from the URL; do the same. */
static nb_code tls_server_name(nng_tls_config *cfg, const char *url, const nb_rpc_opts *o,
                               nb_err *err)
{
    const char *name = o->tls_server_name;
    nng_url *u = NULL;
    int rv;
    if (!(name && name[0])) {
        if ((rv = nng_url_parse(&u, url)))
            return nb_rpc_nng_fail(err, NB_EINVAL, rv, "%s: parsing URL", url);
        name = u->u_hostname;
        unsigned char ip[16];
        if (inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1) {
            nng_url_free(u);
            return nb_err_set(err, NB_EINVAL,
                              "%s: the host is an IP address, which this nng's TLS engine "
                              "(mbedTLS 2.28) cannot match against a certificate; set "
                              "opts.tls_server_name (--tls-server-name) to a DNS name the "
                              "server's certificate carries",
                              url);
        }
    }
    rv = nng_tls_config_server_name(cfg, name);
    nng_url_free(u);
    if (rv)
        return nb_rpc_nng_fail(err, NB_EINVAL, rv, "%s: TLS server name", url);
    return NB_OK;
}

static nb_code tls_setup(const char *url, const nb_rpc_opts *o, int server,
                         nng_tls_config **out, nb_err *err)
{
    *out = NULL;
    nng_tls_config *cfg;
    int rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT);
    if (rv == NNG_ENOTSUP)
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: TLS is not available in this nng build (nng_tls_config_alloc: "
                          "%s); use tcp:// or link an nng built with a TLS engine",
                          url, nng_strerror(rv));
    if (rv)
        return nb_rpc_nng_fail(err, NB_EINTERNAL, rv, "%s: nng_tls_config_alloc", url);
    nb_code c = NB_OK;
    const char *cert = o->tls_cert_key_file, *ca = o->tls_ca_file;
    if (server && !(cert && cert[0])) {
        c = nb_err_set(err, NB_EINVAL,
                       "%s: a tls+tcp:// server needs opts.tls_cert_key_file "
                       "(one PEM file with certificate and unencrypted key)",
                       url);
        goto out;
    }
    if (!server && !(ca && ca[0])) {
        c = nb_err_set(err, NB_EINVAL,
                       "%s: a tls+tcp:// client needs opts.tls_ca_file to verify the server",
                       url);
        goto out;
    }
    if (cert && cert[0] && (rv = nng_tls_config_cert_key_file(cfg, cert, NULL))) {
        c = nb_rpc_nng_fail(err, NB_EINVAL, rv, "%s: loading TLS certificate and key from %s", url,
                            cert);
        goto out;
    }
    if (ca && ca[0]) {
        if ((rv = nng_tls_config_ca_file(cfg, ca))) {
            c = nb_rpc_nng_fail(err, NB_EINVAL, rv, "%s: loading TLS CA certificates from %s",
                                url, ca);
            goto out;
        }
        if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED))) {
            c = nb_rpc_nng_fail(err, NB_EINTERNAL, rv, "%s: TLS auth mode", url);
            goto out;
        }
    } else if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE))) {
        c = nb_rpc_nng_fail(err, NB_EINTERNAL, rv, "%s: TLS auth mode", url);
        goto out;
    }
    if (!server)
        c = tls_server_name(cfg, url, o, err);
out:
    if (c != NB_OK)
        nng_tls_config_free(cfg);
    else
        *out = cfg;
    return c;
}

bool nb_rpc_method_ok(const char *m)
{
    size_t n = strlen(m), slashes = 0;
    if (n == 0 || n > NB_WIRE_METHOD_MAX || m[0] == '/' || m[n - 1] == '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = m[i];
        if (ch == '/')
            slashes++;
        else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || ch == '.' || ch == '_'))
            return 0;
    }
    return slashes == 1;
}

nb_code nb_rpc_check_open(const char *url, const nb_rpc_opts *opts, const nb_rpc_opts **o,
                          nb_err *err)
{
    static const nb_rpc_opts none;
    *o = opts ? opts : &none;
    nb_code c = nb_rpc_check_url(url, err);
    if (c)
        return c;
    if ((*o)->max_msg_bytes && (*o)->max_msg_bytes < 2 * NB_RPC_ENVELOPE_SLACK)
        return nb_err_set(err, NB_EINVAL, "%s: opts.max_msg_bytes %zu below the minimum %d",
                          url, (*o)->max_msg_bytes, 2 * NB_RPC_ENVELOPE_SLACK);
    return NB_OK;
}

/* The socket of a server (rep0) or client (req0) with its message limit.
 * TLS first: without a TLS engine nng lacks the tls+tcp transport too, and
 * "TLS is not available" says more than "not supported". */
nb_code nb_rpc_open_socket(const char *url, const nb_rpc_opts *o, bool server,
                           nng_tls_config **tls, nng_socket *sock, size_t max_msg, nb_err *err)
{
    nb_code c;
    if (nb_rpc_url_is_tls(url) && (c = tls_setup(url, o, server, tls, err)))
        return c;
    int rv = server ? nng_rep0_open(sock) : nng_req0_open(sock);
    if (rv)
        return nb_rpc_nng_fail(err, NB_EINTERNAL, rv, "%s: %s", url,
                               server ? "nng_rep0_open" : "nng_req0_open");
    nng_socket_set_size(*sock, NNG_OPT_RECVMAXSZ, max_msg);
    return NB_OK;
}

void nb_rpc_secret_free(char *s)
{
    if (s) {
        volatile char *v = s;
        while (*v)
            *v++ = 0;
        free(s);
    }
}
