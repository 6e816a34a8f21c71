/* nb_cmd_wait: `npubench wait JOB...` — waits for jobs under one deadline and exits by their
 * outcome — and the reporting `wait`, `job` and `submit --wait` share (JSON, JUnit). */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_job.h"
#include "nb_jobjson.h"
#include "nb_junit.h"
#include "nb_outcome.h"
#include "nb_print.h"
#include "nb_time.h"

int nb_cmd_report_jobs(const nb_cmd_report *r, const Npubench__Job *const *jobs, size_t n)
{
    int code = NB_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        int c = nb_outcome_exit(nb_outcome_of_job(jobs[i]));
        if (c > code)
            code = c;
    }
    nb_err err;
    if (r->junit && nb_junit_write(r->junit, jobs, n, &err)) {
        nb_cmd_fail(r->cmd, &err);
        if (code < NB_EXIT_USAGE)
            code = NB_EXIT_USAGE;
    }
    if (r->doc) {
        if (!r->list && n == 1) {
            json_object_object_add(r->doc, "job", nb_jobjson_job(jobs[0]));
        } else {
            json_object *a = json_object_new_array();
            for (size_t i = 0; i < n; i++)
                json_object_array_add(a, nb_jobjson_job(jobs[i]));
            json_object_object_add(r->doc, "jobs", a);
        }
        nb_out_i64(r->doc, "exit_code", code);
        nb_out_print_doc(stdout, r->doc);
    }
    return code;
}

int nb_cmd_job_ids(const char *cmd, const char *const *pos, int np, int64_t *ids)
{
    if (!np)
        return nb_cmd_usage_error(cmd, "expected a job id%s", "");
    for (int i = 0; i < np; i++) {
        char *end;
        long long id = strtoll(pos[i], &end, 10);
        if (*end || id <= 0)
            return nb_cmd_usage_error(cmd, "expected a job id, got '%s'", pos[i]);
        ids[i] = id;
    }
    return NB_EXIT_OK;
}

nb_code nb_cmd_wait_job(nb_svc *svc, int64_t id, int64_t end_ms, int log, Npubench__Job **out,
                        nb_err *err)
{
    return nb_cmd_wait_job_fn(svc, id, end_ms, log, NULL, NULL, out, err);
}

static int cell_seen(nb_cmd_cells *c, int64_t id)
{
    for (size_t i = 0; i < c->n_seen; i++)
        if (c->seen[i] == id)
            return 1;
    if (c->n_seen < NB_CMD_CELLS_MAX)
        c->seen[c->n_seen++] = id;
    return 0;
}

void nb_cmd_cells_poll(nb_cmd_cells *c, int force)
{
    double now = nb_now_ms();
    if (!force && c->last_ms > 0 && now - c->last_ms < 1000.0)
        return;
    c->last_ms = now;
    for (size_t g = 0; g < c->n; g++) {
        Npubench__Job *j = NULL;
        nb_err err;
        if (nb_svc_get_job(c->svc, c->groups[g], 0, &j, &err))
            continue; /* the next poll, or the final read, says what went wrong */
        for (size_t i = 0; i < j->n_results; i++)
            if (j->results[i]->job_id != j->job_id && !cell_seen(c, j->results[i]->job_id)) {
                if (c->pr && c->pr->open) { /* a token line of the terminal gives way */
                    fputs("\r\033[K", c->f);
                    c->pr->open = 0;
                }
                fprintf(c->f, "[job %lld] ", (long long)j->job_id);
                nb_print_cell(c->f, c->kinds[g], j->results[i]);
            }
        nb_wire_free(j);
    }
    fflush(c->f);
}

int nb_cmd_cells_watch(void *ud, int64_t job_id, const Npubench__WatchJobResponse *w)
{
    nb_cmd_cells *c = ud;
    if (c->pr)
        nb_svc_print_progress(c->pr, job_id, w);
    nb_cmd_cells_poll(c, w->done);
    return 0;
}

nb_code nb_cmd_wait_job_fn(nb_svc *svc, int64_t id, int64_t end_ms, int log,
                           nb_svc_watch_fn fn, void *ud, Npubench__Job **out, nb_err *err)
{
    int64_t left = end_ms ? end_ms - nb_wall_ms() : 0;
    nb_code rc = end_ms && left <= 0 ? NB_ETIMEOUT
                                     : nb_svc_wait(svc, id, end_ms ? left : 0, fn, ud, out,
                                                   err);
    if (rc == NB_ETIMEOUT || (rc == NB_OK && log)) {
        if (*out)
            nb_wire_free(*out);
        rc = nb_svc_get_job(svc, id, log, out, err);
    }
    return rc;
}

void nb_cmd_give_up(nb_svc *svc, const char *cmd, const char *who, int64_t id, int timeout_s,
                    int keep)
{
    char reason[96];
    /* "expired" is the word nb_outcome reads, so `job` and `jobs` show it the same way */
    snprintf(reason, sizeof reason, "expired: %s gave up after %d s", who, timeout_s);
    if (keep) {
        fprintf(stderr, "npubench %s: %s; job %lld kept (--keep)\n", cmd, reason, (long long)id);
        return;
    }
    Npubench__CancelJobRequest req = NPUBENCH__CANCEL_JOB_REQUEST__INIT;
    req.job_id = id;
    req.reason = reason;
    nb_err err;
    Npubench__CancelJobResponse *resp;
    if (nb_svc_call(svc, "CancelJob", &req, &npubench__cancel_job_response__descriptor, &resp,
                    &err)) {
        fprintf(stderr, "npubench %s: %s; job %lld not cancelled: %s\n", cmd, reason,
                (long long)id, err.msg);
        return;
    }
    fprintf(stderr, "npubench %s: %s; job %lld %s\n", cmd, reason, (long long)id,
            nb_job_pb_state_name(resp->state));
    nb_wire_free(resp);
}

#define WAIT_MAX 64

int nb_cmd_wait(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    nb_out_flags of = {0};
    const char *junit = NULL;
    int timeout_s = 0, quiet = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"timeout", NB_OPT_INT, &timeout_s, 0, 7 * 86400, "give up after N s (exit 5)"},
        NB_OUT_JSON_OPT(of),
        {"junit", NB_OPT_STR, &junit, 0, 0, "write a JUnit XML file"},
        {"quiet", NB_OPT_FLAG, &quiet, 0, 0, "no line per job, only the exit code"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[WAIT_MAX];
    int np = 0;
    int rc = nb_cmd_parse("wait",
                          "npubench wait JOB... [--timeout S] [--json] [--junit FILE]\n"
                          NB_OC_EXIT_HELP,
                          argc, argv, opts, NB_NOPTS(opts), pos, WAIT_MAX, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    int64_t ids[WAIT_MAX];
    if ((rc = nb_cmd_job_ids("wait", pos, np, ids)))
        return rc;
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("wait", &sf, NULL, 0, &c)))
        return rc;
    Npubench__Job *jobs[WAIT_MAX] = {0};
    int64_t end = timeout_s ? nb_wall_ms() + (int64_t)timeout_s * 1000 : 0;
    nb_err err;
    for (int i = 0; i < np; i++)
        if (nb_cmd_wait_job(c.svc, ids[i], end, junit != NULL, &jobs[i], &err)) {
            rc = nb_cmd_fail("wait", &err);
            goto out;
        }
    for (int i = 0; i < np && !of.json && !quiet; i++) {
        nb_outcome o = nb_outcome_of_job(jobs[i]);
        printf("job %lld %s %s: %s (exit %d)%s%s\n", (long long)jobs[i]->job_id,
               nb_job_kind_name(jobs[i]->spec ? jobs[i]->spec->kind : 0),
               nb_job_pb_state_name(jobs[i]->state), nb_outcome_name(o), nb_outcome_exit(o),
               *jobs[i]->error ? " — " : "", jobs[i]->error);
    }
    nb_cmd_report r = {.cmd = "wait", .doc = of.json ? nb_out_doc("wait") : NULL,
                       .junit = junit, .list = 1};
    rc = nb_cmd_report_jobs(&r, (const Npubench__Job *const *)jobs, (size_t)np);
out:
    for (int i = 0; i < np; i++)
        nb_wire_free(jobs[i]);
    nb_cmd_conn_close(&c);
    return rc;
}
