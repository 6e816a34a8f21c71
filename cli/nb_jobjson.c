/* nb_jobjson: Job, JobResult and GateRecord as JSON, one builder each, field names as in the
 * proto where there is one so a reader can follow both. */
#include "nb_jobjson.h"

#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_localize.h"
#include "nb_outcome.h"
#include "nb_print.h"
#include "nb_out.h"
#include "nb_rpc.h"
#include "nb_verifypb.h"

static json_object *gate_json(const Npubench__GateRecord *g)
{
    json_object *o = json_object_new_object();
    nb_out_i64(o, "index", g->index);
    nb_out_str(o, "outcome", nb_outcome_name(nb_outcome_of_verdict(g->status)));
    nb_out_i64(o, "steps", g->steps);
    nb_out_i64(o, "divergence_step", g->divergence_step);
    nb_out_i64(o, "device_token", g->device_token);
    nb_out_i64(o, "reference_token", g->reference_token);
    nb_out_str(o, "device_text", g->device_text);
    nb_out_str(o, "reference_text", g->reference_text);
    nb_out_i64(o, "device_token_ref_rank", g->device_token_ref_rank);
    nb_out_i64(o, "reference_token_dev_rank", g->reference_token_dev_rank);
    nb_out_str(o, "fail_reason", g->fail_reason);
    /* the same object the report files carry; left out when absent or unreadable */
    nb_localization l;
    nb_err e;
    if (g->localization &&
        nb_verifypb_localization_from_pb(g->localization, "GateRecord", &l, &e) == NB_OK) {
        json_object *lj = nb_localize_json(&l);
        if (lj)
            json_object_object_add(o, "localization", lj);
        nb_localize_free(&l);
    }
    nb_decode_check dc;
    if (g->decode_check &&
        nb_verifypb_decode_check_from_pb(g->decode_check, "GateRecord", &dc, &e) == NB_OK) {
        json_object *dj = nb_decode_check_json(&dc);
        if (dj)
            json_object_object_add(o, "decode_check", dj);
    }
    if (g->decode_strict_fail)
        json_object_object_add(o, "decode_strict_fail", json_object_new_boolean(1));
    return o;
}

static json_object *ids_json(const int64_t *ids, size_t n)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_int64(ids[i]));
    return a;
}

static json_object *metrics_json(const Npubench__Metrics *m)
{
    json_object *o = json_object_new_object();
    nb_out_num(o, "ttft_ms", m->ttft_ms);
    nb_out_num(o, "ttft_ms_stddev", m->ttft_ms_stddev);
    nb_out_num(o, "tps", m->tps);
    nb_out_num(o, "tps_stddev", m->tps_stddev);
    nb_out_num(o, "decode_ms_per_token", m->decode_ms_per_token);
    nb_out_num(o, "tpot_ms", m->tpot_ms);
    nb_out_i64(o, "prompt_tokens", m->prompt_tokens);
    nb_out_i64(o, "generated_tokens", m->generated_tokens);
    nb_out_i64(o, "samples", (long long)m->n_samples);
    return o;
}

static json_object *result_json(const Npubench__JobResult *r)
{
    json_object *o = json_object_new_object();
    nb_out_i64(o, "job_id", r->job_id);
    nb_out_str(o, "outcome", nb_outcome_name(nb_outcome_of_result(r)));
    nb_out_str(o, "status", nb_rpc_status_name(r->status));
    nb_out_str(o, "status_message", r->status_message);
    const Npubench__Environment *e = r->environment;
    nb_out_str(o, "board", e ? e->board : "");
    char name[256];
    nb_out_str(o, "model", e ? nb_print_model_name(e, name, sizeof name) : ""); /* display */
    nb_out_str(o, "backend", e ? e->backend : "");
    nb_out_str(o, "dtype", e ? e->dtype : "");
    nb_out_str(o, "worker_id", r->worker_id);
    nb_out_i64(o, "started_unix_ms", r->started_unix_ms);
    nb_out_i64(o, "finished_unix_ms", r->finished_unix_ms);
    json_object_object_add(o, "run_ids", ids_json(r->run_ids, r->n_run_ids));
    nb_out_bool(o, "regression", r->regression);
    nb_out_str(o, "regression_detail", r->regression_detail);
    if (r->metrics)
        json_object_object_add(o, "metrics", metrics_json(r->metrics));
    if (r->verify) {
        json_object *v = json_object_new_object();
        nb_out_i64(v, "k", r->verify->k);
        nb_out_i64(v, "n_tokens", r->verify->n_tokens);
        nb_out_i64(v, "passed", r->verify->passed);
        nb_out_i64(v, "failed", r->verify->failed);
        json_object_object_add(o, "verify", v);
    }
    json_object *gates = json_object_new_array();
    for (size_t i = 0; i < r->n_gates; i++)
        json_object_array_add(gates, gate_json(r->gates[i]));
    json_object_object_add(o, "gates", gates);
    return o;
}

static json_object *target_json(const Npubench__JobSpec *s)
{
    const Npubench__DeploymentSelector *sel = s ? s->selector : NULL;
    json_object *o = json_object_new_object();
    nb_out_str(o, "model", sel ? sel->model : "");
    nb_out_str(o, "backend", sel ? sel->backend : "");
    nb_out_str(o, "dtype", sel ? sel->dtype : "");
    nb_out_str(o, "board", sel ? sel->board : "");
    json_object *tags = json_object_new_array();
    for (size_t i = 0; sel && i < sel->n_tags; i++)
        json_object_array_add(tags, json_object_new_string(sel->tags[i]));
    json_object_object_add(o, "tags", tags);
    return o;
}

json_object *nb_jobjson_job(const Npubench__Job *j)
{
    json_object *o = json_object_new_object();
    if (!o)
        return NULL;
    nb_outcome oc = nb_outcome_of_job(j);
    nb_out_i64(o, "job_id", j->job_id);
    nb_out_str(o, "kind", nb_job_kind_name(j->spec ? j->spec->kind : 0));
    nb_out_bool(o, "matrix", j->spec && j->spec->matrix);
    nb_out_str(o, "state", nb_job_pb_state_name(j->state));
    nb_out_str(o, "outcome", nb_outcome_name(oc));
    nb_out_i64(o, "exit_code", nb_outcome_exit(oc));
    json_object_object_add(o, "target", target_json(j->spec));
    nb_out_str(o, "worker_id", j->worker_id);
    nb_out_i64(o, "parent_job_id", j->parent_job_id);
    json_object_object_add(o, "child_job_ids", ids_json(j->child_job_ids, j->n_child_job_ids));
    nb_out_i64(o, "attempts", j->attempts);
    nb_out_i64(o, "created_unix_ms", j->created_unix_ms);
    nb_out_i64(o, "started_unix_ms", j->started_unix_ms);
    nb_out_i64(o, "finished_unix_ms", j->finished_unix_ms);
    json_object *p = json_object_new_object();
    nb_out_i64(p, "done", j->progress ? j->progress->done : 0);
    nb_out_i64(p, "total", j->progress ? j->progress->total : 0);
    json_object_object_add(o, "progress", p);
    nb_out_str(o, "queued_reason", j->queued_reason);
    nb_out_i64(o, "expires_unix_ms", j->expires_unix_ms);
    nb_out_str(o, "error", j->error);
    json_object *res = json_object_new_array();
    for (size_t i = 0; i < j->n_results; i++)
        json_object_array_add(res, result_json(j->results[i]));
    json_object_object_add(o, "results", res);
    return o;
}
