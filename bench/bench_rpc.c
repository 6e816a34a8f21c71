/* bench_rpc: round-trip latency of an nb_rpc call (tiny payload) against a
 * plain nng req/rep ping, same run, over inproc, ipc and tcp. */
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

#define ROUNDS 7      /* interleaved rounds; the median is reported */
#define ROUND_MS 60.0 /* per variant per round */

static const char payload[] = "ping1234";

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_rpc: %s: %s\n", what, why);
    exit(1);
}

/* ------------------------------------------------ plain nng req/rep ping */

typedef struct plain {
    nng_socket rep, req;
    pthread_t th;
} plain;

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

static void plain_open(plain *p, const char *url)
{
    nng_listener l;
    if (nng_rep0_open(&p->rep) || nng_listen(p->rep, url, &l, 0))
        die(url, "cannot listen");
    char dial_url[128];
    int port = 0;
    if (strncmp(url, "tcp://", 6) == 0 &&
        nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port) == 0)
        snprintf(dial_url, sizeof dial_url, "tcp://127.0.0.1:%d", port);
    else
        snprintf(dial_url, sizeof dial_url, "%s", url);
    pthread_create(&p->th, NULL, plain_echo, &p->rep);
    if (nng_req0_open(&p->req) || nng_dial(p->req, dial_url, NULL, 0))
        die(dial_url, "cannot dial");
    nng_socket_set_ms(p->req, NNG_OPT_RECVTIMEO, 5000);
}

static void plain_ping(plain *p)
{
    char buf[64];
    size_t len = sizeof buf;
    if (nng_send(p->req, (void *)payload, sizeof payload, 0) || nng_recv(p->req, buf, &len, 0) ||
        len != sizeof payload)
        die("plain ping", "failed");
}

static void plain_close(plain *p)
{
    nng_close(p->req);
    nng_close(p->rep);
    pthread_join(p->th, NULL);
}

/* -------------------------------------------------------- nb_rpc calls */

typedef struct rpc {
    nb_rpc_server *srv;
    nb_rpc_client *cli;
} rpc;

static nb_rpc_status echo(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    (void)user;
    if (!(reply->payload = malloc(req->len ? req->len : 1)))
        return NB_RPC_RESOURCE_EXHAUSTED;
    memcpy(reply->payload, req->payload, req->len);
    reply->len = req->len;
    return NB_RPC_OK;
}

static void rpc_open(rpc *r, const char *url, const char *secret)
{
    nb_err err = {0};
    nb_rpc_opts o = {0};
    o.secret = secret;
    if (nb_rpc_server_open(url, &o, &r->srv, &err) ||
        nb_rpc_server_handle(r->srv, "bench.Echo/Echo", echo, NULL, NB_RPC_READONLY, &err) ||
        nb_rpc_server_start(r->srv, &err) ||
        nb_rpc_client_open(nb_rpc_server_url(r->srv), &o, &r->cli, &err))
        die(url, err.msg);
}

static void rpc_ping(rpc *r)
{
    nb_err err = {0};
    uint8_t *resp = NULL;
    size_t rn = 0;
    int status;
    if (nb_rpc_call(r->cli, "bench.Echo/Echo", payload, sizeof payload, 5000, &status, NULL,
                    &resp, &rn, &err) != NB_OK ||
        rn != sizeof payload)
        die("rpc call", err.msg);
    free(resp);
}

static void rpc_close(rpc *r)
{
    nb_rpc_client_close(r->cli);
    nb_rpc_server_close(r->srv);
}

/* µs per call of one variant over ROUND_MS. */
static double round_us(plain *p, rpc *r)
{
    int n = 0;
    double t0 = nb_now_ms(), t;
    do {
        if (p)
            plain_ping(p);
        else
            rpc_ping(r);
        n++;
    } while ((t = nb_now_ms() - t0) < ROUND_MS);
    return t * 1000.0 / n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    char ipc[3][128];
    const char *tag[3] = {"plain", "rpc", "mac"};
    for (int i = 0; i < 3; i++)
        snprintf(ipc[i], sizeof ipc[i], "ipc:///tmp/nb-bench-rpc-%s-%d.sock", tag[i],
                 (int)getpid());
    struct {
        const char *name, *url[3];
    } t[] = {{"inproc", {"inproc://nb-bench-plain", "inproc://nb-bench-rpc", "inproc://nb-bench-mac"}},
             {"ipc", {ipc[0], ipc[1], ipc[2]}},
             {"tcp", {"tcp://127.0.0.1:0", "tcp://127.0.0.1:0", "tcp://127.0.0.1:0"}}};

    printf("bench_rpc: %zu-byte echo, median of %d interleaved %.0f ms rounds\n", sizeof payload,
           ROUNDS, ROUND_MS);
    printf("%-8s %12s %12s %7s %16s %7s\n", "", "nng us/call", "rpc us/call", "ratio",
           "rpc+mac us/call", "ratio");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        plain p;
        rpc r, m;
        plain_open(&p, t[i].url[0]);
        rpc_open(&r, t[i].url[1], NULL);
        rpc_open(&m, t[i].url[2], "bench-secret");
        for (int w = 0; w < 200; w++) { /* warm up connections and caches */
            plain_ping(&p);
            rpc_ping(&r);
            rpc_ping(&m);
        }
        double us[3][ROUNDS];
        for (int k = 0; k < ROUNDS; k++) {
            us[0][k] = round_us(&p, NULL);
            us[1][k] = round_us(NULL, &r);
            us[2][k] = round_us(NULL, &m);
        }
        double med[3];
        for (int v = 0; v < 3; v++) {
            qsort(us[v], ROUNDS, sizeof us[v][0], cmp_double);
            med[v] = us[v][ROUNDS / 2];
        }
        printf("%-8s %12.1f %12.1f %6.2fx %16.1f %6.2fx\n", t[i].name, med[0], med[1],
               med[1] / med[0], med[2], med[2] / med[0]);
        rpc_close(&m);
        rpc_close(&r);
        plain_close(&p);
    }
    for (int i = 0; i < 3; i++)
        unlink(ipc[i] + strlen("ipc://"));
    return 0;
}
