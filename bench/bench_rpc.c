/* bench_rpc: round-trip latency of an nb_rpc call (tiny payload) against a
 * plain nng req/rep ping, same run, over inproc, ipc and tcp. */

/* Built only once nb_proto is linked into bench/ (top CMakeLists.txt). */
#if !__has_include("nb_rpc.h")
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "bench_rpc: nb_proto is not linked into bench/; nothing to measure\n");
    return 2;
}
#else

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "nb_rpc.h"
#include "nb_time.h"

#define RUN_MS 300.0 /* per measurement, after warm-up */
#define WARMUP 200

static const char payload[] = "ping1234";

/* ------------------------------------------------ plain nng req/rep ping */

static void *plain_echo(void *arg)
{
    nng_socket *s = arg;
    for (;;) {
        nng_msg *m;
        if (nng_recvmsg(*s, &m, 0) != 0)
            return NULL; /* socket closed */
        if (nng_sendmsg(*s, m, 0) != 0)
            nng_msg_free(m);
    }
}

static double plain_us(const char *url, int *calls)
{
    nng_socket rep, req;
    nng_listener l;
    pthread_t th;
    if (nng_rep0_open(&rep) || nng_listen(rep, url, &l, 0)) {
        fprintf(stderr, "bench_rpc: cannot listen on %s\n", url);
        exit(1);
    }
    char dial_url[128];
    int port = 0;
    if (strncmp(url, "tcp://", 6) == 0 &&
        nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port) == 0)
        snprintf(dial_url, sizeof dial_url, "tcp://127.0.0.1:%d", port);
    else
        snprintf(dial_url, sizeof dial_url, "%s", url);
    pthread_create(&th, NULL, plain_echo, &rep);
    if (nng_req0_open(&req) || nng_dial(req, dial_url, NULL, 0)) {
        fprintf(stderr, "bench_rpc: cannot dial %s\n", url);
        exit(1);
    }
    nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, 5000);
    int n = 0;
    double t0 = 0;
    for (int i = 0;; i++) {
        if (i == WARMUP)
            t0 = nb_now_ms();
        char buf[64];
        size_t len = sizeof buf;
        if (nng_send(req, (void *)payload, sizeof payload, 0) ||
            nng_recv(req, buf, &len, 0) || len != sizeof payload) {
            fprintf(stderr, "bench_rpc: plain ping failed on %s\n", url);
            exit(1);
        }
        if (i >= WARMUP) {
            n++;
            if (nb_now_ms() - t0 >= RUN_MS)
                break;
        }
    }
    double us = (nb_now_ms() - t0) * 1000.0 / n;
    nng_close(req);
    nng_close(rep);
    pthread_join(th, NULL);
    *calls = n;
    return us;
}

/* -------------------------------------------------------- nb_rpc calls */

static nb_rpc_status echo(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    (void)user;
    if (!(reply->payload = malloc(req->len ? req->len : 1)))
        return NB_RPC_RESOURCE_EXHAUSTED;
    memcpy(reply->payload, req->payload, req->len);
    reply->len = req->len;
    return NB_RPC_OK;
}

static double rpc_us(const char *url, const char *secret, int *calls)
{
    nb_err err = {0};
    nb_rpc_opts o = {0};
    o.secret = secret;
    nb_rpc_server *srv;
    nb_rpc_client *cli;
    if (nb_rpc_server_open(url, &o, &srv, &err) ||
        nb_rpc_server_handle(srv, "bench.Echo/Echo", echo, NULL, NB_RPC_READONLY, &err) ||
        nb_rpc_server_start(srv, &err) ||
        nb_rpc_client_open(nb_rpc_server_url(srv), &o, &cli, &err)) {
        fprintf(stderr, "bench_rpc: %s\n", err.msg);
        exit(1);
    }
    int n = 0;
    double t0 = 0;
    for (int i = 0;; i++) {
        if (i == WARMUP)
            t0 = nb_now_ms();
        uint8_t *resp = NULL;
        size_t rn = 0;
        int status;
        if (nb_rpc_call(cli, "bench.Echo/Echo", payload, sizeof payload, 5000, &status, NULL,
                        &resp, &rn, &err) != NB_OK ||
            rn != sizeof payload) {
            fprintf(stderr, "bench_rpc: %s\n", err.msg);
            exit(1);
        }
        free(resp);
        if (i >= WARMUP) {
            n++;
            if (nb_now_ms() - t0 >= RUN_MS)
                break;
        }
    }
    double us = (nb_now_ms() - t0) * 1000.0 / n;
    nb_rpc_client_close(cli);
    nb_rpc_server_close(srv);
    *calls = n;
    return us;
}

int main(void)
{
    char ipc_plain[128], ipc_rpc[128];
    snprintf(ipc_plain, sizeof ipc_plain, "ipc:///tmp/nb-bench-rpc-plain-%d.sock", (int)getpid());
    snprintf(ipc_rpc, sizeof ipc_rpc, "ipc:///tmp/nb-bench-rpc-%d.sock", (int)getpid());
    struct {
        const char *name, *plain, *rpc;
    } t[] = {{"inproc", "inproc://nb-bench-plain", "inproc://nb-bench-rpc"},
             {"ipc", ipc_plain, ipc_rpc},
             {"tcp", "tcp://127.0.0.1:0", "tcp://127.0.0.1:0"}};
    printf("bench_rpc: tiny (%zu-byte) request/response, %.0f ms per measurement\n",
           sizeof payload, RUN_MS);
    printf("%-8s %12s %12s %8s %14s %8s\n", "", "nng us/call", "rpc us/call", "ratio",
           "rpc+mac us/call", "ratio");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int n1, n2, n3;
        double p = plain_us(t[i].plain, &n1);
        double r = rpc_us(t[i].rpc, NULL, &n2);
        double a = rpc_us(t[i].rpc, "bench-secret", &n3);
        printf("%-8s %12.1f %12.1f %7.2fx %14.1f %7.2fx   (%d/%d/%d calls)\n", t[i].name, p, r,
               r / p, a, a / p, n1, n2, n3);
    }
    unlink(ipc_plain + strlen("ipc://"));
    unlink(ipc_rpc + strlen("ipc://"));
    return 0;
}

#endif /* __has_include("nb_rpc.h") */
