/* nb_coord_health: board health as LAVA keeps it — a health-check job (a short verify of the
 * board's first deployment plus its device probe) scheduled when a board registers, after
 * N consecutive job errors and on a period; a board that fails one is quarantined (leases
 * health checks only) until one passes; drain and undrain per board; the versions its worker
 * read, kept with the board. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_db_boards.h"
#include "nb_time.h"

/* Queues a check of the board of info on its first deployment unless one is pending. */
static void schedule(nb_coord *c, const Npubench__WorkerInfo *info, const char *why)
{
    nb_err err;
    nb_db_board b;
    if (!*info->board_name || !info->n_deployments ||
        nb_db_board_get(c->db, info->board_name, &b, &err) || b.check_pending)
        return;
    const Npubench__Deployment *d = info->deployments[0];
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    sel.model = d->model;
    sel.backend = d->backend;
    sel.dtype = d->dtype;
    sel.dtype_id = d->dtype_id;
    sel.board = info->board_name;
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__HEALTH;
    spec.selector = &sel;
    spec.priority = NB_JOB_PRIORITY_MAX; /* before anything else the board would run */
    Npubench__SubmitJobRequest req = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    char rid[NB_DB_NAME_MAX];
    snprintf(rid, sizeof rid, "health-%.80s-%lld", info->board_name, (long long)nb_wall_ms());
    req.request_id = rid;
    req.spec = &spec;
    int64_t *ids = NULL;
    size_t n = 0;
    int dup = 0;
    if (nb_sched_submit(c, &req, &ids, &n, &dup, &err) ||
        nb_db_board_set_check(c->db, info->board_name, ids[0], &err)) {
        nb_coord_log(c, "board %s: health check not scheduled: %s", info->board_name, err.msg);
    } else {
        nb_coord_log(c, "board %s: health check job %lld (%s)", info->board_name,
                     (long long)ids[0], why);
    }
    free(ids);
}

/* The probe's versions as the board's, so the dashboard (the database alone) and a
 * restarted coordinator know them; WorkerInfo's limits were checked at Register. */
static void record_versions(nb_coord *c, const Npubench__WorkerInfo *info)
{
    nb_db_board_versions v;
    snprintf(v.driver, sizeof v.driver, "%s", info->driver_version);
    snprintf(v.firmware, sizeof v.firmware, "%s", info->firmware_version);
    snprintf(v.xrt, sizeof v.xrt, "%s", info->xrt_version);
    snprintf(v.kernel_path, sizeof v.kernel_path, "%s", info->kernel_path);
    snprintf(v.cpu_model, sizeof v.cpu_model, "%s", info->cpu_model);
    snprintf(v.toolchain, sizeof v.toolchain, "%s", info->toolchain);
    nb_err err;
    if (nb_db_board_set_versions(c->db, info->board_name, &v, &err))
        nb_coord_log(c, "board %s: versions not recorded: %s", info->board_name, err.msg);
}

void nb_coord_health_on_register(nb_coord *c, const Npubench__WorkerInfo *info)
{
    record_versions(c, info);
    if (c->o.health_interval_ms > 0)
        schedule(c, info, "registered");
}

void nb_coord_health_on_result(nb_coord *c, const char *worker_id, int kind,
                               const Npubench__JobResult *res)
{
    Npubench__WorkerInfo *info = nb_coord_reg_info(c, worker_id);
    if (!info || !*info->board_name) {
        nb_wire_free(info);
        return;
    }
    nb_err err;
    int no_verdict = res->status != NPUBENCH__STATUS_CODE__OK ||
                     res->outcome == NPUBENCH__OUTCOME__ERROR;
    if (nb_job_kind_is(kind, NB_JOB_FAMILY_HEALTH)) {
        int ok = !no_verdict && res->outcome == NPUBENCH__OUTCOME__PASS;
        char detail[NB_DB_MSG_MAX];
        if (no_verdict)
            snprintf(detail, sizeof detail, "health check job %lld: %s: %.300s",
                     (long long)res->job_id, nb_rpc_status_name(res->status),
                     res->status_message);
        else
            snprintf(detail, sizeof detail, "health check job %lld: verify %s",
                     (long long)res->job_id, ok ? "PASS" : "FAIL");
        if (nb_db_board_set_health(c->db, info->board_name, ok ? NB_HEALTH_OK : NB_HEALTH_FAILED,
                                   detail, &err) == NB_OK)
            nb_coord_log(c, "board %s: %s (%s)", info->board_name,
                         ok ? "healthy" : "quarantined: no job but health checks", detail);
        nb_coord_queue_changed(c); /* a quarantine lifted frees its queue */
    } else if (c->o.health_interval_ms > 0) {
        int errors = 0;
        if (nb_db_board_job_ended(c->db, info->board_name, no_verdict, &errors, &err) == NB_OK &&
            no_verdict && errors >= c->o.health_errors) {
            char why[64];
            snprintf(why, sizeof why, "%d consecutive job errors", errors);
            schedule(c, info, why);
        }
    }
    nb_wire_free(info);
}

void nb_coord_health_sweep(nb_coord *c)
{
    int64_t now = nb_wall_ms();
    if (c->o.health_interval_ms <= 0 || now < c->next_health_ms)
        return;
    c->next_health_ms = now + 1000;
    size_t n = 0;
    coord_worker *w = nb_coord_reg_snapshot(c, &n);
    for (size_t i = 0; i < n; i++) {
        Npubench__WorkerInfo *info = nb_coord_reg_info(c, w[i].id);
        nb_db_board b;
        nb_err err;
        nb_db_worker dw;
        if (info && nb_db_worker_get(c->db, w[i].id, &dw, &err) == NB_OK &&
            dw.state != NB_WORKER_GONE &&
            nb_db_board_get(c->db, info->board_name, &b, &err) == NB_OK) {
            int64_t every = b.health == NB_HEALTH_FAILED ? c->o.health_retry_ms
                                                         : c->o.health_interval_ms;
            if (now - b.checked_ms >= every)
                schedule(c, info, b.health == NB_HEALTH_FAILED ? "quarantined: retry"
                                                               : "periodic");
        }
        nb_wire_free(info);
    }
    nb_coord_reg_snapshot_free(w, n);
}

static int health_only(const nb_db_job *job, void *ud)
{
    return nb_job_kind_is(nb_job_kind_parse(job->kind), NB_JOB_FAMILY_HEALTH) &&
           nb_sched_pred(job, ud);
}

nb_db_job_pred nb_coord_health_pred(nb_coord *c, const char *board, int *none)
{
    nb_db_board b;
    nb_err err;
    *none = 0;
    if (!*board || nb_db_board_get(c->db, board, &b, &err))
        return nb_sched_pred;
    if (b.drained) {
        *none = 1;
        return NULL;
    }
    return b.health == NB_HEALTH_FAILED ? health_only : nb_sched_pred;
}

void nb_coord_health_status(nb_coord *c, nb_arena *a, Npubench__WorkerStatus *s)
{
    nb_db_board b;
    nb_err err;
    if (!s->info || !*s->info->board_name ||
        nb_db_board_get(c->db, s->info->board_name, &b, &err))
        return;
    s->health = (char *)nb_db_board_health_label(&b);
    s->health_checked_unix_ms = b.checked_ms;
    s->health_detail = nb_arena_strdup(a, b.detail);
    s->drained = b.drained;
    s->job_errors = b.job_errors;
    s->health_job_id = b.check_job_id;
}
