/* nb_cmd_regress: `npubench regressions` — the flagged regressions and their lifecycle (new,
 * acknowledged, fixed), and a person's acknowledgement or closing of one (admin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cmd.h"
#include "nb_time.h"

#define USAGE                                                                                  \
    "npubench regressions [--state new|acknowledged|fixed] [--limit N] "                      \
    "[--format table|json|csv|md]\n"                                                           \
    "       npubench regressions ack ID --note TEXT [--by NAME]\n"                            \
    "       npubench regressions close ID [--note TEXT] [--by NAME]\n"                        \
    "A regression is new when the check flags a run, acknowledged by a person (who, why),\n"  \
    "fixed when a later run of the same series is back inside the noise band, or closed by\n" \
    "a person. ack and close are admin actions ($NPUBENCH_ADMIN_SECRET or --secret-file)."

static void time_cell(char *buf, size_t cap, int64_t ms)
{
    if (ms > 0 && cap >= 32)
        nb_time_iso(buf, ms);
    else
        snprintf(buf, cap, "-");
}

static json_object *reg_json(const Npubench__Regression *g)
{
    json_object *o = json_object_new_object();
    nb_out_i64(o, "id", g->id);
    nb_out_i64(o, "run_id", g->run_id);
    nb_out_str(o, "state", g->state);
    nb_out_str(o, "model", g->model);
    nb_out_str(o, "board", g->board);
    nb_out_str(o, "kind", g->kind);
    nb_out_str(o, "series", g->series);
    nb_out_str(o, "detail", g->detail);
    nb_out_i64(o, "created_unix_ms", g->created_unix_ms);
    nb_out_i64(o, "state_unix_ms", g->state_unix_ms);
    nb_out_str(o, "ack_by", g->ack_by);
    nb_out_str(o, "ack_note", g->ack_note);
    nb_out_i64(o, "ack_unix_ms", g->ack_unix_ms);
    nb_out_i64(o, "fixed_unix_ms", g->fixed_unix_ms);
    nb_out_i64(o, "fixed_run_id", g->fixed_run_id);
    nb_out_str(o, "fixed_by", g->fixed_by);
    nb_out_str(o, "fixed_note", g->fixed_note);
    return o;
}

/* "run 17" or "closed by lead: why". */
static void fixed_cell(const Npubench__Regression *g, char *buf, size_t cap)
{
    if (strcmp(g->state, "fixed"))
        snprintf(buf, cap, "-");
    else if (g->fixed_run_id)
        snprintf(buf, cap, "run %lld back in the band", (long long)g->fixed_run_id);
    else if (!*g->fixed_by) /* the fixing run was removed since */
        snprintf(buf, cap, "a later run back in the band (since removed)");
    else
        snprintf(buf, cap, "closed by %s%s%s", g->fixed_by, *g->fixed_note ? ": " : "",
                 g->fixed_note);
}

static int print_list(const Npubench__RegressionsResponse *resp, nb_out_format fmt)
{
    if (fmt == NB_OUT_JSON) {
        json_object *doc = nb_out_doc("regressions"), *a = json_object_new_array();
        for (size_t i = 0; i < resp->n_regressions; i++)
            json_object_array_add(a, reg_json(resp->regressions[i]));
        json_object_object_add(doc, "regressions", a);
        nb_out_print_doc(stdout, doc);
        return NB_EXIT_OK;
    }
    static const char *const heads[] = {"ID",    "STATE",  "RUN",    "MODEL", "BOARD", "KIND",
                                        "FLAGGED", "DETAIL", "ACKNOWLEDGED", "FIXED"};
    nb_out_table *t = nb_out_table_new(heads, 10);
    if (!t)
        return nb_cmd_usage_error("regressions", "out of memory%s", "");
    nb_err err;
    for (size_t i = 0; i < resp->n_regressions; i++) {
        const Npubench__Regression *g = resp->regressions[i];
        char id[24], run[24], when[32], ack[1024], fixed[1024];
        snprintf(id, sizeof id, "%lld", (long long)g->id);
        snprintf(run, sizeof run, "%lld", (long long)g->run_id);
        time_cell(when, sizeof when, g->created_unix_ms);
        if (*g->ack_by)
            snprintf(ack, sizeof ack, "%s: %s", g->ack_by, g->ack_note);
        else
            snprintf(ack, sizeof ack, "-");
        fixed_cell(g, fixed, sizeof fixed);
        const char *cells[] = {id,       g->state, run, g->model, g->board,
                               g->kind,  when,  g->detail, ack, fixed};
        if (nb_out_table_row(t, cells, &err)) {
            nb_out_table_free(t);
            return nb_cmd_fail("regressions", &err);
        }
    }
    if (!resp->n_regressions && fmt == NB_OUT_TEXT)
        printf("(no regressions)\n");
    else
        nb_out_table_print(stdout, t, fmt);
    nb_out_table_free(t);
    return NB_EXIT_OK;
}

static int update(nb_cmd_conn *c, const char *op, const char *id_word, const char *by,
                  const char *note, nb_out_format fmt)
{
    char *end;
    long long id = strtoll(id_word, &end, 10);
    if (*end || id <= 0 || !*id_word)
        return nb_cmd_usage_error("regressions", "%s: expected a regression id (a whole number "
                                                 ">= 1, the ID column)",
                                  id_word);
    Npubench__RegressionUpdateRequest req = NPUBENCH__REGRESSION_UPDATE_REQUEST__INIT;
    req.id = id;
    req.op = (char *)op;
    req.by = (char *)(by ? by : "");
    req.note = (char *)(note ? note : "");
    nb_err err;
    Npubench__RegressionUpdateResponse *resp;
    if (nb_svc_call(c->svc, "RegressionUpdate", &req,
                    &npubench__regression_update_response__descriptor, &resp, &err))
        return nb_cmd_fail("regressions", &err);
    const Npubench__Regression *g = resp->regression;
    if (fmt == NB_OUT_JSON && g) {
        json_object *doc = nb_out_doc("regressions");
        json_object_object_add(doc, "regression", reg_json(g));
        nb_out_print_doc(stdout, doc);
    } else if (g) {
        printf("regression %lld (run %lld, %s on %s): %s\n", (long long)g->id,
               (long long)g->run_id, g->model, g->board, g->state);
    }
    nb_wire_free(resp);
    return NB_EXIT_OK;
}

int nb_cmd_regressions(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    nb_out_flags of = {0};
    const char *db = NULL, *state = NULL, *note = NULL, *by = NULL;
    int limit = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"state", NB_OPT_STR, &state, 0, 0, "only new, acknowledged or fixed ones"},
        {"limit", NB_OPT_INT, &limit, 1, 10000, "the newest N (default 1000)"},
        {"note", NB_OPT_STR, &note, 0, 0, "ack: why (required); close: why (optional)"},
        {"by", NB_OPT_STR, &by, 0, 0, "who acts (default $USER)"},
        {"db", NB_OPT_STR, &db, 0, 0, "local database without a coordinator"},
        NB_OUT_OPTS(of),
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[3];
    int np = 0;
    int rc = nb_cmd_parse("regressions", USAGE, argc, argv, opts, NB_NOPTS(opts), pos, 3, &np,
                          &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    int ack = np && !strcmp(pos[0], "ack"), close = np && !strcmp(pos[0], "close");
    if (np && (!(ack || close) || np != 2))
        return nb_cmd_usage_error("regressions", "expected 'ack ID --note TEXT' or 'close ID'%s",
                                  "");
    if (ack && (!note || !*note))
        return nb_cmd_usage_error("regressions", "ack: --note TEXT is required (why it is "
                                                 "acknowledged)%s",
                                  "");
    if (np && state)
        return nb_cmd_usage_error("regressions", "--state lists; it does not go with %s",
                                  pos[0]);
    if (!by || !*by)
        by = getenv("USER");
    if (np && (!by || !*by))
        return nb_cmd_usage_error("regressions", "--by NAME: who acts ($USER is not set)%s", "");
    if (of.format && !strcmp(of.format, "table"))
        of.format = "text";
    nb_err err;
    nb_out_format fmt;
    if (nb_out_format_of(&of, &fmt, &err))
        return nb_cmd_usage_error("regressions", "%s", err.msg);
    if (state) {
        static const char *const known[] = {"new", "acknowledged", "fixed"};
        int ok = 0;
        for (int i = 0; i < 3; i++)
            ok |= !strcmp(state, known[i]);
        if (!ok)
            return nb_cmd_usage_error("regressions", "--state '%s': expected new, acknowledged "
                                                     "or fixed",
                                      state);
    }
    nb_cmd_conn c;
    sf.admin = np > 0; /* ack / close */
    if ((rc = nb_cmd_conn_open("regressions", &sf, db, 1, &c)))
        return rc;
    if (np) {
        rc = update(&c, ack ? "ack" : "close", pos[1], by, note, fmt);
        nb_cmd_conn_close(&c);
        return rc;
    }
    Npubench__RegressionsRequest req = NPUBENCH__REGRESSIONS_REQUEST__INIT;
    req.state = (char *)(state ? state : "");
    req.limit = limit;
    Npubench__RegressionsResponse *resp;
    if (nb_svc_call(c.svc, "Regressions", &req, &npubench__regressions_response__descriptor,
                    &resp, &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("regressions", &err);
    }
    rc = print_list(resp, fmt);
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return rc;
}
