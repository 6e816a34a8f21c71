/* nb_coord_boardkeys: per-board worker credentials — the admin's BoardKey RPC (issue,
 * revoke, list) and the check a registration passes: a board with keys is registered only
 * with one of them, so the shared worker key alone no longer speaks for every board. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "nb_coord_int.h"
#include "nb_db_boardkeys.h"
#include "nb_sha256.h"

static int random_hex(char *out, size_t bytes)
{
    unsigned char raw[32];
    if (bytes > sizeof raw || getrandom(raw, bytes, 0) != (ssize_t)bytes)
        return -1;
    for (size_t i = 0; i < bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

static nb_rpc_status issue(nb_coord *c, const char *board, nb_rpc_reply *reply)
{
    nb_err err = {0};
    if (!*board)
        return nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT,
                                   "BoardKeyRequest.board: required to issue a key");
    char id[17], secret[65], sha[65], key[17 + 1 + 65];
    if (random_hex(id, 8) || random_hex(secret, 32))
        return nb_rpc_reply_status(reply, NB_RPC_UNAVAILABLE, "no randomness for a key");
    nb_sha256_mem_hex(secret, strlen(secret), sha);
    if (nb_db_boardkey_add(c->db, id, board, sha, &err))
        return nb_rpc_reply_err(reply, &err);
    snprintf(key, sizeof key, "%s.%s", id, secret);
    nb_coord_log(c, "board %s: key %s issued", board, id);
    Npubench__BoardKeyResponse resp = NPUBENCH__BOARD_KEY_RESPONSE__INIT;
    resp.key = key;
    nb_rpc_status st = nb_rpc_reply_pack(reply, &resp);
    memset(secret, 0, sizeof secret);
    memset(key, 0, sizeof key);
    return st;
}

static nb_rpc_status list(nb_coord *c, const char *board, nb_rpc_reply *reply)
{
    nb_err err = {0};
    nb_db_boardkey *k = NULL;
    size_t n = 0;
    if (nb_db_boardkey_list(c->db, board, &k, &n, &err))
        return nb_rpc_reply_err(reply, &err);
    Npubench__BoardKey *items = calloc(n ? n : 1, sizeof *items);
    Npubench__BoardKey **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    Npubench__BoardKeyResponse resp = NPUBENCH__BOARD_KEY_RESPONSE__INIT;
    for (size_t i = 0; items && ptrs && i < n; i++) {
        npubench__board_key__init(&items[i]);
        items[i].key_id = k[i].key_id;
        items[i].board = k[i].board;
        items[i].created_unix_ms = k[i].created_ms;
        items[i].revoked_unix_ms = k[i].revoked_ms;
        ptrs[i] = &items[i];
    }
    resp.keys = ptrs;
    resp.n_keys = n;
    nb_rpc_status st = nb_coord_reply_built(reply, &resp, items && ptrs, "BoardKey");
    free(items);
    free(ptrs);
    free(k);
    return st;
}

static nb_rpc_status h_board_key(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__BoardKeyRequest, npubench__board_key_request__descriptor);
    nb_rpc_status st;
    nb_err err = {0};
    if (!strcmp(r->op, "issue"))
        st = issue(c, r->board, reply);
    else if (!strcmp(r->op, "list"))
        st = list(c, r->board, reply);
    else if (!strcmp(r->op, "revoke")) {
        char board[NB_DB_NAME_MAX];
        if (nb_db_boardkey_revoke(c->db, r->key_id, board, &err))
            st = nb_rpc_reply_err(reply, &err);
        else {
            nb_coord_log(c, "board %s: key %s revoked", board, r->key_id);
            st = list(c, board, reply);
        }
    } else
        st = nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT,
                                 "BoardKeyRequest.op '%.32s': expected issue, revoke or list",
                                 r->op);
    nb_wire_free(r);
    return st;
}

nb_code nb_coord_boardkeys_start(nb_coord *c, nb_err *err)
{
    nb_code rc = nb_db_boardkey_open(c->db, err);
    if (rc)
        return rc;
    return nb_rpc_server_handle(c->srv, "npubench.Client/BoardKey", h_board_key, c,
                                NB_RPC_ADMIN, err);
}

nb_code nb_coord_boardkey_admit(nb_coord *c, const char *board, const char *key, nb_err *err)
{
    int has = 0, ok = 0;
    nb_code rc = nb_db_boardkey_check(c->db, board, key, &has, &ok, err);
    if (rc)
        return rc;
    if (has && !ok)
        return nb_err_set(err, NB_EAUTH,
                          "WorkerInfo.board_key: board %s registers only with one of its own "
                          "keys (`npubench workers key issue %s`); %s",
                          board, board,
                          *key ? "this key is not one of them, or was revoked" : "none given");
    return NB_OK;
}
