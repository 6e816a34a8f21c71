/* nb_cmd_dash: `npubench report --html DIR`, the dashboard's pages as static files (a CI
 * artifact) from a coordinator over RPC or the local database, links relative. */
#include "nb_cmd.h"

#include <stdio.h>

#include "nb_args.h"
#include "nb_file.h"
#include "nb_svc.h"

int nb_cmd_dash(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL, *dir = NULL;
    int max_points = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"html", NB_OPT_STR, &dir, 0, 0, "directory to write index.html, pages and SVGs to"},
        {"max-points", NB_OPT_INT, &max_points, 1, 10000, "runs per plot, newest (default 100)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " NB_CMD_DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    int rc = nb_cmd_parse("report", "npubench report --html DIR [--coordinator URL | --db PATH]",
                          argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!dir || !*dir)
        return nb_cmd_usage_error("report", "expected --html DIR%s", "");
    nb_err err;
    if (nb_file_mkdirs(dir, &err))
        return nb_cmd_fail("report", &err);
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("report", &sf, db, 1, &c)))
        return rc;
    Npubench__DashboardRequest req = NPUBENCH__DASHBOARD_REQUEST__INIT;
    req.max_points = max_points;
    Npubench__DashboardResponse *resp;
    if (nb_svc_call(c.svc, "Dashboard", &req, &npubench__dashboard_response__descriptor, &resp,
                    &err)) {
        rc = nb_cmd_fail("report", &err);
        nb_cmd_conn_close(&c);
        return rc;
    }
    size_t bytes = 0;
    for (size_t i = 0; !rc && i < resp->n_files; i++) {
        const Npubench__DashboardFile *f = resp->files[i];
        /* The coordinator names the files: only flat names of a safe alphabet land in DIR,
         * so an answer cannot write elsewhere ("../x", "/etc/x", ".hidden"). */
        if (!f->name || !nb_file_plain_name(f->name)) {
            nb_err_set(&err, NB_EFORMAT,
                       "DashboardResponse.files[%zu].name '%.64s': not a flat file name of "
                       "letters, digits, '.', '-', '_'",
                       i, f->name ? f->name : "");
            rc = nb_cmd_fail("report", &err);
            break;
        }
        /* DIR is shorter than 4096 bytes (nb_file_mkdirs took it), a plain name at most 128 */
        char path[4096 + 1 + 128 + 1];
        snprintf(path, sizeof path, "%s/%s", dir, f->name);
        if (nb_file_write(path, f->content.data, f->content.len, &err))
            rc = nb_cmd_fail("report", &err);
        bytes += f->content.len;
    }
    if (!rc)
        printf("%s/index.html: %zu files, %zu KiB\n", dir, resp->n_files, (bytes + 1023) / 1024);
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return rc;
}
