/* nb_cmd_import: `npubench import`, perf.json / history.ndjson into the history through a
 * coordinator or the local database; idempotent. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_db_import.h"
#include "nb_file.h"
#include "nb_json.h"
#include "nb_svc.h"

#define IMPORT_DTYPES_MAX 64

/* A deployments file's "dtypes" table ({"_w8a8": "w8a8", ...}: a model name ending in the
 * key was built with the value) into kv; the file's other keys are the worker's. */
static int load_dtypes(const char *path, json_object **root, Npubench__KeyValue *kv,
                       Npubench__KeyValue **kvp, size_t *n)
{
    char *data;
    size_t len;
    nb_err err;
    *n = 0;
    *root = NULL;
    if (nb_file_read(path, (size_t)4 << 20, &data, &len, &err))
        return nb_cmd_fail("import", &err);
    nb_code rc = nb_json_parse(data, len, path, root, &err);
    free(data);
    if (rc)
        return nb_cmd_fail("import", &err);
    json_object *t = NULL;
    if (!json_object_is_type(*root, json_type_object) ||
        !json_object_object_get_ex(*root, "dtypes", &t))
        return NB_EXIT_OK;
    if (!json_object_is_type(t, json_type_object))
        return nb_cmd_usage_error("import", "%s: \"dtypes\" must be an object of model-name "
                                  "suffix to dtype (\"_q4nx\": \"q4nx\")", path);
    char msg[512];
    json_object_object_foreach(t, key, v)
    {
        if (*n == IMPORT_DTYPES_MAX) {
            snprintf(msg, sizeof msg, "%.300s: \"dtypes\" has more than %d entries", path,
                     IMPORT_DTYPES_MAX);
            return nb_cmd_usage_error("import", "%s", msg);
        }
        if (!*key || !json_object_is_type(v, json_type_string) ||
            !*json_object_get_string(v)) {
            snprintf(msg, sizeof msg, "%.300s: dtypes.'%.60s': expected a non-empty suffix "
                     "and a dtype string", path, key);
            return nb_cmd_usage_error("import", "%s", msg);
        }
        npubench__key_value__init(&kv[*n]);
        kv[*n].key = key;
        kv[*n].value = (char *)json_object_get_string(v);
        kvp[*n] = &kv[*n];
        (*n)++;
    }
    return NB_EXIT_OK;
}

int nb_cmd_import(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL, *backend = NULL, *dtype = NULL, *board = NULL, *runner = NULL,
               *deployments = NULL;
    int help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"backend", NB_OPT_STR, &backend, 0, 0, "for rows naming none (default npu)"},
        {"dtype", NB_OPT_STR, &dtype, 0, 0,
         "for rows naming none (default: the model name's, _q4nx _int4 _q4, else bf16)"},
        {"board", NB_OPT_STR, &board, 0, 0, "board of every row (default: its runner)"},
        {"runner", NB_OPT_STR, &runner, 0, 0,
         "board of rows naming no runner (default " NB_DB_IMPORT_NIGHTLY_RUNNER ", the nightly's)"},
        {"deployments", NB_OPT_STR, &deployments, 0, 0,
         "a deployments file whose \"dtypes\" table extends the model-name suffixes"},
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
    Npubench__KeyValue kv[IMPORT_DTYPES_MAX], *kvp[IMPORT_DTYPES_MAX];
    size_t nkv = 0;
    json_object *droot = NULL;
    if (deployments && (rc = load_dtypes(deployments, &droot, kv, kvp, &nkv))) {
        json_object_put(droot);
        return rc;
    }
    if (nb_file_read(pos[0], (size_t)15 << 20, &data, &len, &err)) {
        json_object_put(droot);
        return nb_cmd_fail("import", &err);
    }
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("import", &sf, db, 2, &c))) {
        free(data);
        json_object_put(droot);
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
    if (runner)
        req.runner = (char *)runner;
    req.dtypes = kvp;
    req.n_dtypes = nkv;
    Npubench__ImportResponse *resp;
    rc = NB_EXIT_OK;
    if (nb_svc_call(c.svc, "Import", &req, &npubench__import_response__descriptor, &resp,
                    &err)) {
        rc = nb_cmd_fail("import", &err);
    } else {
        printf("%s: %d run%s imported, %d already stored, %d bad\n", pos[0], resp->imported,
               resp->imported == 1 ? "" : "s", resp->skipped, resp->bad);
        if (resp->runner_assumed)
            printf("%s: %d row%s named no runner: filed under board %s (%s)\n", pos[0],
                   resp->runner_assumed, resp->runner_assumed == 1 ? "" : "s", resp->runner,
                   runner ? "--runner" : "the nightly's runner; --runner to change");
        for (size_t i = 0; i < resp->n_errors; i++)
            fprintf(stderr, "npubench import: %s\n", resp->errors[i]);
        if (resp->bad)
            rc = NB_EXIT_USAGE;
        nb_wire_free(resp);
    }
    free(data);
    json_object_put(droot);
    nb_cmd_conn_close(&c);
    return rc;
}
