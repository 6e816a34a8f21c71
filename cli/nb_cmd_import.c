/* nb_cmd_import: `npubench import`, perf.json / history.ndjson into the history through a
 * coordinator or the local database; idempotent. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_file.h"
#include "nb_svc.h"

int nb_cmd_import(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL, *backend = NULL, *dtype = NULL, *board = NULL;
    int help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"backend", NB_OPT_STR, &backend, 0, 0, "for rows naming none (default npu)"},
        {"dtype", NB_OPT_STR, &dtype, 0, 0, "for rows naming none (default bf16)"},
        {"board", NB_OPT_STR, &board, 0, 0, "board of every row (default: its runner)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " NB_CMD_DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[1];
    int np = 0;
    int rc = nb_cmd_parse("import", "npubench import FILE (perf.json or history.ndjson)", argc,
                          argv, opts, NB_NOPTS(opts), pos, 1, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!np)
        return nb_cmd_usage_error("import", "expected a FILE (perf.json or history.ndjson)%s", "");
    nb_err err;
    char *data;
    size_t len;
    if (nb_file_read(pos[0], (size_t)15 << 20, &data, &len, &err))
        return nb_cmd_fail("import", &err);
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("import", &sf, db, 1, &c))) {
        free(data);
        return rc;
    }
    Npubench__ImportRequest req = NPUBENCH__IMPORT_REQUEST__INIT;
    req.name = (char *)pos[0];
    req.content.data = (uint8_t *)data;
    req.content.len = len;
    if (backend)
        req.backend = (char *)backend;
    if (dtype)
        req.dtype = (char *)dtype;
    if (board)
        req.board = (char *)board;
    Npubench__ImportResponse *resp;
    rc = NB_EXIT_OK;
    if (nb_svc_call(c.svc, "Import", &req, &npubench__import_response__descriptor, &resp,
                    &err)) {
        rc = nb_cmd_fail("import", &err);
    } else {
        printf("%s: %d run%s imported, %d already stored, %d bad\n", pos[0], resp->imported,
               resp->imported == 1 ? "" : "s", resp->skipped, resp->bad);
        for (size_t i = 0; i < resp->n_errors; i++)
            fprintf(stderr, "npubench import: %s\n", resp->errors[i]);
        if (resp->bad)
            rc = NB_EXIT_USAGE;
        nb_wire_free(resp);
    }
    free(data);
    nb_cmd_conn_close(&c);
    return rc;
}
