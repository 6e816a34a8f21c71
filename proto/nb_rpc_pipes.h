/* nb_rpc_pipes: the connections (nng pipes) of a server's socket, bounded: at most max at
 * once (more are closed as they arrive) and none idle longer than idle_ms (closed by a
 * reaper), so idle or hostile peers cannot hold the process's descriptors. */
#ifndef NB_RPC_PIPES_H
#define NB_RPC_PIPES_H

#include <stdint.h>

#include <nng/nng.h>

#include "nb_err.h"

typedef struct nb_rpc_pipes nb_rpc_pipes;

/* Watches sock's pipes (before its listener starts): max > 0, idle_ms > 0 (0: never). */
nb_code nb_rpc_pipes_open(nng_socket sock, int max, int idle_ms, nb_rpc_pipes **out,
                          nb_err *err);

/* The pipe carried a request now: not idle. */
void nb_rpc_pipes_touch(nb_rpc_pipes *p, nng_pipe pipe);

typedef struct nb_rpc_pipes_stats {
    int open;             /* pipes now */
    uint64_t refused;     /* closed on arrival: max were open */
    uint64_t idle_closed; /* closed by the reaper */
} nb_rpc_pipes_stats;
void nb_rpc_pipes_get_stats(nb_rpc_pipes *p, nb_rpc_pipes_stats *out);

/* Stops the reaper and frees; after the socket is closed (its callbacks use p). NULL ok. */
void nb_rpc_pipes_close(nb_rpc_pipes *p);

#endif
