/* nb_cmd: what every subcommand shares — flag parsing with usage, error lines and the exit
 * codes they map to, the coordinator connection of the service commands, ages. */
#include "nb_cmd.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nb_time.h"

int nb_cmd_exit_code(nb_code rc)
{
    switch (rc) {
    case NB_OK: return NB_EXIT_OK;
    case NB_EUNAVAIL:
    case NB_ETIMEOUT: return NB_EXIT_UNAVAILABLE;
    case NB_EDATALOSS: return NB_EXIT_DATALOSS;
    default: return NB_EXIT_USAGE;
    }
}

int nb_cmd_fail(const char *cmd, const nb_err *err)
{
    fprintf(stderr, "npubench %s: error: %s\n", cmd, err->msg);
    return nb_cmd_exit_code(err->code);
}

int nb_cmd_parse(const char *cmd, const char *usage, int argc, char **argv, const nb_opt *opts,
                 int n_opts, const char **pos, int max_pos, int *n_pos, const int *help)
{
    nb_err err;
    if (nb_args_parse(argc, argv, opts, n_opts, pos, max_pos, n_pos, &err)) {
        fprintf(stderr, "npubench %s: %s\n", cmd, err.msg);
        nb_args_usage(stderr, usage, opts, n_opts);
        return NB_EXIT_USAGE;
    }
    if (*help) {
        nb_args_usage(stdout, usage, opts, n_opts);
        return -1;
    }
    return NB_EXIT_OK;
}

int nb_cmd_usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "npubench %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return NB_EXIT_USAGE;
}

int nb_cmd_conn_open(const char *cmd, const nb_svc_flags *f, const char *db, int allow_local,
                            nb_cmd_conn *c)
{
    memset(c, 0, sizeof *c);
    nb_err err;
    const char *url = nb_svc_url(f);
    if (url) {
        if (nb_svc_open(f, url, &c->svc, &err))
            return nb_cmd_fail(cmd, &err);
        return NB_EXIT_OK;
    }
    if (!allow_local)
        return nb_cmd_usage_error(cmd,
                                  "needs a coordinator: --coordinator URL or "
                                  "$NPUBENCH_COORDINATOR%s",
                                  "");
    /* A --db that names no file is a typo more often than a wish for an empty history:
     * only a command that stores (allow_local 2: import) may create it. */
    if (db && allow_local != 2 && access(db, F_OK) != 0)
        return nb_cmd_usage_error(cmd, "--db %s: no such database (a local run or `npubench "
                                       "import FILE --db` creates one)", db);
    nb_embedded_opts eo = {.db_path = db ? db : NB_CMD_DEFAULT_DB};
    if (nb_embedded_start(&eo, &c->emb, &err) ||
        nb_svc_open(NULL, nb_embedded_url(c->emb), &c->svc, &err)) {
        nb_embedded_stop(c->emb);
        c->emb = NULL;
        return nb_cmd_fail(cmd, &err);
    }
    return NB_EXIT_OK;
}

void nb_cmd_conn_close(nb_cmd_conn *c)
{
    nb_svc_close(c->svc);
    nb_embedded_stop(c->emb);
    memset(c, 0, sizeof *c);
}

void nb_cmd_fmt_age(char *buf, size_t cap, int64_t ms)
{
    int64_t now = nb_wall_ms();
    char unit;
    long long v = (long long)nb_time_age(now, ms > 0 ? ms : now, &unit);
    snprintf(buf, cap, "%lld%c", v, unit);
}
