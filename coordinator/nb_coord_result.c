/* nb_coord_result: a worker's JobResult into the history — deployment upsert, the run with
 * samples/gates/cosines/phases/kernels/toolchain, the regression verdict, shard merging —
 * committed with the job and the whole result (the store) in one transaction. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_db_deploy.h"
#include "nb_jobpb.h"
#include "nb_localize.h"
#include "nb_stats.h"
#include "nb_time.h"
#include "nb_verifypb.h"

static const char *nz(const char *s)
{
    return s && *s ? s : NULL;
}

static double dv(double x, int present)
{
    return present ? x : NAN;
}

static const char *top_json(nb_arena *a, Npubench__TopToken *const *t, size_t n)
{
    if (!n)
        return NULL;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "token", json_object_new_int(t[i]->token));
        json_object_object_add(o, "text", json_object_new_string(t[i]->text));
        json_object_object_add(o, "logit", json_object_new_double(t[i]->logit));
        json_object_array_add(arr, o);
    }
    const char *s = nb_arena_strdup(a, json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN));
    json_object_put(arr);
    return s;
}

/* The record's localization as the JSON the reports carry (history column), NULL when it
 * has none or it does not read. */
static const char *loc_json(nb_arena *a, const Npubench__GateRecord *r, const char **verdict)
{
    nb_localization l;
    nb_err e;
    *verdict = NULL;
    if (!r->localization ||
        nb_verifypb_localization_from_pb(r->localization, "GateRecord", &l, &e) != NB_OK)
        return NULL;
    json_object *o = nb_localize_json(&l);
    const char *s = o ? nb_arena_strdup(a, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN))
                      : NULL;
    *verdict = nb_arena_strdup(a, l.verdict);
    json_object_put(o);
    nb_localize_free(&l);
    return s;
}

/* The record's decode-path check as the history stores it: JSON and status, NULL when none. */
static const char *dcheck_json(nb_arena *a, const Npubench__GateRecord *r, const char **status)
{
    nb_decode_check c;
    nb_err e;
    *status = NULL;
    if (!r->decode_check ||
        nb_verifypb_decode_check_from_pb(r->decode_check, "GateRecord", &c, &e) != NB_OK)
        return NULL;
    json_object *o = nb_decode_check_json(&c);
    const char *s = o ? nb_arena_strdup(a, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN))
                      : NULL;
    *status = nb_arena_strdup(a, nb_decode_check_status_name(c.status));
    json_object_put(o);
    return s;
}

static const char *outcome_text(Npubench__Outcome o)
{
    return o == NPUBENCH__OUTCOME__FAIL ? "FAIL" : o == NPUBENCH__OUTCOME__ERROR ? "ERROR"
                                                                                 : "PASS";
}

/* Appends key=value unless the key is already there (keys are unique per run). */
static void kv_add(nb_arena *a, nb_db_kv *kv, size_t *n, size_t cap, const char *key,
                   const char *value)
{
    if (!key || !*key || !value || !*value || *n >= cap)
        return;
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(kv[i].key, key))
            return;
    kv[*n].key = nb_arena_strdup(a, key);
    kv[*n].value = nb_arena_strdup(a, value);
    (*n)++;
}

/* The deployment that ran res: the history's key for the run. */
static nb_code result_deployment(const Npubench__JobResult *res, const char *default_board,
                                 nb_db_deployment *dep, nb_err *err)
{
    const Npubench__Environment *env = res->environment;
    if (!env || !*env->model)
        return nb_err_set(err, NB_EINVAL,
                          "job %lld result: environment.model is required (which deployment "
                          "ran it)",
                          (long long)res->job_id);
    /* The weights file names the model more stably than GGUF metadata
     * (general.name is free text): history rows key on the file's name. */
    nb_job_model_canon(*env->model_path ? env->model_path : env->model, dep->model,
                       sizeof dep->model);
    if (strlen(env->model_digest) >= sizeof dep->weights_digest)
        return nb_err_set(err, NB_EINVAL, "job %lld result: environment.model_digest: %zu "
                          "bytes, the limit is %zu", (long long)res->job_id,
                          strlen(env->model_digest), sizeof dep->weights_digest - 1);
    snprintf(dep->weights_digest, sizeof dep->weights_digest, "%s", env->model_digest);
    snprintf(dep->backend, sizeof dep->backend, "%s", *env->backend ? env->backend : "cpu");
    snprintf(dep->dtype, sizeof dep->dtype, "%s", *env->dtype ? env->dtype : "unknown");
    snprintf(dep->board, sizeof dep->board, "%s",
             *env->board ? env->board : default_board && *default_board ? default_board
                                                                       : "unknown");
    return NB_OK;
}

/* Per-repetition samples and, per metric, mean and stddev over the samples that have it. */
static nb_code result_metrics(nb_arena *a, const Npubench__Metrics *m, nb_db_run *run,
                              nb_err *err)
{
    /* 0 is "not printed" (an exec deployment's script without a TTFT line), never a
     * measurement: stored as unknown so it neither plots nor gates. */
    run->value[NB_METRIC_TTFT] = dv(m->ttft_ms, m->ttft_ms > 0);
    /* likewise a throughput of 0: a deployment reporting a latency only (smolvla) */
    run->value[NB_METRIC_TPS] = dv(m->tps, m->tps > 0);
    run->value[NB_METRIC_DECODE] = dv(m->decode_ms_per_token, m->decode_ms_per_token > 0);
    run->value[NB_METRIC_TPOT] = dv(m->tpot_ms, m->tpot_ms > 0);
    run->prompt_tokens = m->prompt_tokens > 0 ? m->prompt_tokens : -1;
    run->context_len = m->context_len > 0 ? m->context_len : -1;
    run->generated_tokens = m->generated_tokens;
    run->reps = (int)m->n_samples;
    nb_db_sample *s = nb_arena_calloc(a, m->n_samples, sizeof *s);
    double *col = nb_arena_calloc(a, m->n_samples ? m->n_samples : 1, sizeof *col);
    if (m->n_samples && (!s || !col))
        return nb_err_set(err, NB_ENOMEM, "result: out of memory");
    for (size_t i = 0; i < m->n_samples; i++) {
        const Npubench__Sample *x = m->samples[i];
        s[i].rep = (int)i;
        s[i].v[NB_METRIC_TTFT] = dv(x->ttft_ms, x->ttft_ms > 0);
        s[i].v[NB_METRIC_TPS] = dv(x->tps, x->tps > 0);
        s[i].v[NB_METRIC_DECODE] = dv(x->decode_ms_per_token, x->decode_ms_per_token > 0);
        s[i].v[NB_METRIC_TPOT] = dv(x->tpot_ms, x->generated_tokens >= 2);
    }
    for (int k = 0; k < NB_METRIC_N; k++) {
        size_t nc = 0;
        for (size_t i = 0; i < m->n_samples; i++)
            if (!isnan(s[i].v[k]))
                col[nc++] = s[i].v[k];
        if (nc) {
            run->mean[k] = nb_stats_mean(col, nc);
            run->stddev[k] = nc > 1 ? nb_stats_stddev(col, nc) : 0.0;
        }
    }
    run->samples = s;
    run->n_samples = m->n_samples;
    return NB_OK;
}

static nb_code result_gates(nb_arena *a, const Npubench__JobResult *res, nb_db_run *run,
                            nb_err *err)
{
    if (!res->n_gates)
        return NB_OK;
    nb_db_gate_check *g = nb_arena_calloc(a, res->n_gates, sizeof *g);
    if (!g)
        return nb_err_set(err, NB_ENOMEM, "result: out of memory");
    for (size_t i = 0; i < res->n_gates; i++) {
        const Npubench__GateRecord *r = res->gates[i];
        g[i].prompt_index = r->index;
        g[i].prompt = r->prompt;
        g[i].steps = r->steps;
        g[i].divergence_step = r->divergence_step;
        g[i].device_token = r->device_token;
        g[i].ref_token = r->reference_token;
        g[i].device_text = r->device_text;
        g[i].ref_text = r->reference_text;
        g[i].device_rank = r->device_token_ref_rank;
        g[i].ref_rank = r->reference_token_dev_rank;
        g[i].device_top5_json = top_json(a, r->device_top, r->n_device_top);
        g[i].ref_top5_json = top_json(a, r->reference_top, r->n_reference_top);
        g[i].agreed_prefix = r->agreed;
        g[i].status = outcome_text(r->status);
        g[i].reason = nz(r->fail_reason);
        g[i].localization_json = loc_json(a, r, &g[i].localization_verdict);
        g[i].decode_check_json = dcheck_json(a, r, &g[i].decode_status);
    }
    run->gate_checks = g;
    run->n_gate_checks = res->n_gates;
    return NB_OK;
}

/* Layer cosines, profile phases and kernels: flat copies into the arena. */
static nb_code result_tables(nb_arena *a, const Npubench__JobResult *res, nb_db_run *run,
                             nb_err *err)
{
    nb_db_layer_cosine *l = nb_arena_calloc(a, res->n_cosines, sizeof *l);
    nb_db_profile_entry *p = nb_arena_calloc(a, res->n_phases, sizeof *p);
    nb_db_profile_entry *k = nb_arena_calloc(a, res->n_kernels, sizeof *k);
    if ((res->n_cosines && !l) || (res->n_phases && !p) || (res->n_kernels && !k))
        return nb_err_set(err, NB_ENOMEM, "result: out of memory");
    for (size_t i = 0; i < res->n_cosines; i++) {
        const Npubench__LayerCosine *x = res->cosines[i];
        l[i] = (nb_db_layer_cosine){x->layer, x->min, x->p5, x->median, x->mean, x->max_abs};
    }
    for (size_t i = 0; i < res->n_phases; i++) {
        const Npubench__ProfilePhase *x = res->phases[i];
        p[i] = (nb_db_profile_entry){x->name, x->calls, x->total_ms, x->avg_ms};
    }
    for (size_t i = 0; i < res->n_kernels; i++) {
        const Npubench__ProfileKernel *x = res->kernels[i];
        k[i] = (nb_db_profile_entry){x->name, x->calls, x->total_ms, x->avg_ms};
    }
    if (res->n_cosines) {
        run->cosines = l;
        run->n_cosines = res->n_cosines;
    }
    if (res->n_phases) {
        run->phases = p;
        run->n_phases = res->n_phases;
    }
    if (res->n_kernels) {
        run->kernels = k;
        run->n_kernels = res->n_kernels;
    }
    return NB_OK;
}

/* The run's environment columns and its toolchain key=value list. */
static nb_code result_environment(nb_arena *a, const Npubench__Environment *env,
                                  const Npubench__VerifySummary *vs,
                                  const nb_db_deployment *dep, const char *clock_offset,
                                  nb_db_run *run, nb_err *err)
{
    run->env.npubench_commit = nz(env->npubench_commit);
    run->env.board = nb_arena_strdup(a, dep->board);
    run->env.cpu_info = nz(env->cpu_info);
    run->env.npu_info = nz(env->npu_info);
    run->env.backend = nb_arena_strdup(a, dep->backend);
    run->env.dtype = nb_arena_strdup(a, dep->dtype);
    run->env.threads = env->threads;
    run->env.model_digest = nz(env->model_digest);
    size_t cap = 10 + env->n_extra, n = 0;
    nb_db_kv *kv = nb_arena_calloc(a, cap, sizeof *kv);
    if (!kv)
        return nb_err_set(err, NB_ENOMEM, "result: out of memory");
    kv_add(a, kv, &n, cap, "npubench_version", env->npubench_version);
    kv_add(a, kv, &n, cap, "board_type", env->board_type);
    kv_add(a, kv, &n, cap, "compiler", env->compiler);
    kv_add(a, kv, &n, cap, "toolchain", env->toolchain);
    kv_add(a, kv, &n, cap, "model", env->model);
    kv_add(a, kv, &n, cap, "worker_clock_offset_ms", clock_offset);
    if (vs) { /* what the gate compared against, as the trace says it was made */
        kv_add(a, kv, &n, cap, "reference_dtype", vs->trace_dtype);
        kv_add(a, kv, &n, cap, "reference_device", vs->trace_device);
    }
    for (size_t i = 0; i < env->n_extra; i++)
        kv_add(a, kv, &n, cap, env->extra[i]->key, env->extra[i]->value);
    run->toolchain = kv;
    run->n_toolchain = n;
    return NB_OK;
}

/* History rows carry the coordinator's clock (a worker's clock may be off by minutes): the
 * run ends now and lasts as long as the worker measured; the worker's offset is kept. */
static void result_times(const Npubench__JobResult *res, nb_db_run *run, char offset[32])
{
    int64_t now = nb_wall_ms(), took = res->finished_unix_ms - res->started_unix_ms;
    run->finished_ms = now;
    run->started_ms = res->started_unix_ms > 0 && took >= 0 && took <= NB_WIRE_TIMEOUT_MAX_MS
                          ? now - took
                          : now;
    offset[0] = '\0';
    if (res->finished_unix_ms > 0)
        snprintf(offset, 32, "%lld", (long long)(res->finished_unix_ms - now));
}

nb_code nb_coord_result_to_run(nb_arena *a, const Npubench__JobResult *res, const char *kind,
                               const char *default_board, nb_db_source source, nb_db_run *run,
                               nb_db_deployment *dep, nb_err *err)
{
    nb_db_run_init(run);
    memset(dep, 0, sizeof *dep);
    nb_code rc = result_deployment(res, default_board, dep, err);
    if (rc)
        return rc;
    run->kind = kind;
    run->worker_id = nz(res->worker_id);
    run->runner = nb_arena_strdup(a, dep->board);
    run->outcome = res->outcome == NPUBENCH__OUTCOME__FAIL    ? NB_OUTCOME_FAIL
                   : res->outcome == NPUBENCH__OUTCOME__ERROR ? NB_OUTCOME_ERROR
                                                              : NB_OUTCOME_PASS;
    if (run->outcome == NB_OUTCOME_ERROR)
        run->error = nz(res->status_message) ? res->status_message : "no verdict";
    char offset[32];
    result_times(res, run, offset);
    run->source = source;
    run->report_json = nz(res->report_json);
    if ((res->metrics && (rc = result_metrics(a, res->metrics, run, err))) ||
        (rc = result_gates(a, res, run, err)) || (rc = result_tables(a, res, run, err)) ||
        (rc = result_environment(a, res->environment, res->verify, dep, offset, run, err)))
        return rc;
    if (a->failed)
        return nb_err_set(err, NB_ENOMEM, "result: out of memory");
    return NB_OK;
}

/* ---- committing ---- */

static nb_code load_spec(const nb_db_job *j, Npubench__JobSpec **spec, nb_err *err)
{
    *spec = NULL;
    if (j->spec_format != NB_SPEC_PROTO || !j->spec)
        return nb_err_set(err, NB_EFORMAT, "job %lld: stored spec is not a JobSpec",
                          (long long)j->id);
    return nb_wire_unpack(&npubench__job_spec__descriptor, j->spec, j->spec_len, 0, spec, err);
}

/* res with the coordinator's verdicts, stored whole inside the caller's transaction: a
 * failed store fails the commit, so the worker retries instead of a result going missing. */
static nb_code store_with(nb_coord *c, int64_t job_id, const Npubench__JobResult *res,
                          int64_t *run_ids, size_t n_runs, int regression, const char *detail,
                          nb_err *err)
{
    Npubench__JobResult copy = *res;
    copy.run_ids = run_ids;
    copy.n_run_ids = n_runs;
    copy.regression = regression;
    copy.regression_detail = (char *)(detail ? detail : "");
    return nb_coord_store_put(c, job_id, &copy, err);
}

/* Ends the transaction of nb_db_begin: commit when rc is OK, else roll back. */
static nb_code end_tx(nb_coord *c, nb_code rc, nb_err *err)
{
    if (!rc)
        return nb_db_commit(c->db, err);
    nb_db_rollback(c->db);
    return rc;
}

static int wants_regression(int kind)
{
    const nb_job_kind_desc *d = nb_job_kind_desc_of(kind);
    return d && d->regression;
}

static nb_code commit_single(nb_coord *c, const nb_db_job *j, const Npubench__JobSpec *spec,
                             const char *lease_id, const Npubench__JobResult *res,
                             const char *default_board, int *accepted, nb_err *err)
{
    nb_arena a = {0};
    nb_db_run run;
    nb_db_deployment dep;
    nb_code rc = nb_coord_result_to_run(&a, res, nb_job_kind_name(spec->kind), default_board,
                                        c->o.source_local ? NB_SOURCE_LOCAL : NB_SOURCE_SERVICE,
                                        &run, &dep, err);
    nb_db_regression_report rep;
    memset(&rep, 0, sizeof rep);
    if (rc || (rc = nb_db_begin(c->db, err))) {
        nb_arena_free(&a);
        return rc;
    }
    rc = nb_db_deployment_upsert(c->db, &dep, &run.deployment_id, err);
    if (!rc)
        nb_coord_alias_from_result(c, res, dep.model);
    if (!rc && wants_regression(spec->kind) && run.outcome != NB_OUTCOME_ERROR) {
        nb_db_regression_opts ro = {(size_t)c->o.regression_last_n, c->o.regression_min_rel,
                                    c->o.regression_alpha};
        rc = nb_db_run_check_regression(c->db, &run, &ro, &rep, err);
        if (!rc && rep.regression) {
            run.regression = 1;
            run.regression_detail = rep.detail;
            run.regression_report = &rep; /* its numbers open the regression's lifecycle */
        }
    }
    int64_t run_id = 0;
    int dup = 0;
    /* A health check is the board's verdict, not the deployment's: no history run. */
    size_t keep = spec->kind != NPUBENCH__JOB_KIND__HEALTH;
    if (!rc) {
        nb_db_job_result jr = {.state = NB_JOB_DONE, .runs = &run, .n_runs = keep};
        rc = nb_db_job_complete(c->db, j->id, lease_id, &jr, keep ? &run_id : NULL, &dup, err);
    }
    /* A retried report (dup) changes nothing: its result committed the first time. */
    if (!rc && !dup)
        rc = store_with(c, j->id, res, keep ? &run_id : NULL, keep, run.regression,
                        run.regression_detail, err);
    rc = end_tx(c, rc, err);
    if (!rc) {
        *accepted = 1;
        if (!dup && run.regression)
            nb_coord_log(c, "job %lld run %lld: REGRESSION %s", (long long)j->id,
                      (long long)run_id, rep.detail);
    }
    nb_arena_free(&a);
    return rc;
}

/* A job that could not be executed: failed with the worker's reason. */
static nb_code commit_failed(nb_coord *c, const nb_db_job *j, const char *lease_id,
                             const Npubench__JobResult *res, int *accepted, nb_err *err)
{
    char why[NB_DB_MSG_MAX];
    snprintf(why, sizeof why, "%s: %s", nb_rpc_status_name(res->status),
             *res->status_message ? res->status_message : "the worker gave no reason");
    nb_code rc = nb_db_begin(c->db, err);
    if (rc)
        return rc;
    /* The stored result commits with the failure: once failed, `job ID` shows it. */
    nb_db_job_result jr = {.state = NB_JOB_FAILED, .error = why};
    int dup = 0;
    rc = nb_db_job_complete(c->db, j->id, lease_id, &jr, NULL, &dup, err);
    if (!rc && !dup)
        rc = store_with(c, j->id, res, NULL, 0, 0, NULL, err);
    rc = end_tx(c, rc, err);
    if (!rc)
        *accepted = 1;
    return rc;
}

/* A shard whose worker ran it but returned no verify result (a deployment that cannot
 * produce one): failed now, naming that, instead of refusing the result until the lease
 * has expired max_attempts times. */
static nb_code commit_no_verify(nb_coord *c, const nb_db_job *j, const char *lease_id,
                                const Npubench__JobResult *res, int *accepted, nb_err *err)
{
    Npubench__JobResult failed = *res;
    failed.status = NPUBENCH__STATUS_CODE__INVALID_ARGUMENT;
    failed.status_message = (char *)"shard yielded no verify result (JobResult.verify absent): "
                                    "its deployment's verify_full did not produce a gate";
    return commit_failed(c, j, lease_id, &failed, accepted, err);
}

/* One shard of a verify-full group: no run of its own; the last shard to
 * finish merges them all into the group's run, in the same transaction. */
static nb_code commit_shard(nb_coord *c, const nb_db_job *j, const nb_db_job *group,
                            const char *lease_id, const Npubench__JobResult *res,
                            const char *default_board, int *accepted, nb_err *err)
{
    nb_code rc = nb_db_begin(c->db, err);
    if (rc)
        return rc;
    nb_db_job_result jr = {.state = NB_JOB_DONE};
    int dup = 0;
    rc = nb_db_job_complete(c->db, j->id, lease_id, &jr, NULL, &dup, err);
    /* Stored in the completion's transaction, so whoever merges finds it. */
    if (!rc && !dup)
        rc = store_with(c, j->id, res, NULL, 0, 0, NULL, err);
    nb_db_job g;
    memset(&g, 0, sizeof g);
    int merged = 0;
    int64_t run_ids[NB_COORD_MERGE_BOARDS], run_id = 0;
    size_t n_runs = 0;
    nb_arena a = {0};
    Npubench__JobResult *m = NULL;
    nb_coord_boards *boards = NULL;
    if (!rc && !dup && (rc = nb_db_job_get(c->db, group->id, &g, err)) == NB_OK &&
        g.state == NB_JOB_DONE) {
        if (!(boards = nb_arena_calloc(&a, 1, sizeof *boards)))
            rc = nb_err_set(err, NB_ENOMEM, "merge: out of memory");
        if (!rc)
            rc = nb_coord_merge_verify_group(c, &g, j->id, res, &a, &m, boards, err);
        /* One run per real board the shards ran on (each board's latest gate is this one);
         * a merge whose shards named no board is stored once, on the worker's. */
        size_t want = !rc && boards->n ? boards->n : 1;
        for (size_t i = 0; !rc && i < want; i++) {
            nb_db_run run;
            nb_db_deployment dep;
            char *orig = m->environment ? m->environment->board : NULL;
            if (m->environment && boards->n)
                m->environment->board = boards->name[i];
            rc = nb_coord_result_to_run(&a, m, nb_job_kind_name(NPUBENCH__JOB_KIND__VERIFY_FULL), default_board,
                                        c->o.source_local ? NB_SOURCE_LOCAL : NB_SOURCE_SERVICE,
                                        &run, &dep, err);
            if (m->environment)
                m->environment->board = orig;
            if (!rc)
                rc = nb_db_deployment_upsert(c->db, &dep, &run.deployment_id, err);
            if (!rc) {
                run.job_id = g.id;
                run.job_seq = (int)i;
                rc = nb_db_run_insert(c->db, &run, &run_ids[n_runs], err);
            }
            if (!rc)
                n_runs++;
        }
        run_id = n_runs ? run_ids[0] : 0;
        if (!rc && !(rc = store_with(c, g.id, m, run_ids, n_runs, 0, NULL, err)))
            merged = 1;
    }
    nb_db_job_free(&g);
    rc = end_tx(c, rc, err);
    if (!rc) {
        *accepted = 1;
        if (merged) {
            nb_coord_stat_add(c, &c->stats.merged, 1);
            nb_coord_log(c, "job %lld: shards merged into run %lld%s (%s)",
                         (long long)group->id, (long long)run_id,
                         n_runs > 1 ? ", stored on each of its boards" : "",
                         m && m->outcome == NPUBENCH__OUTCOME__PASS ? "PASS" : "FAIL");
        }
    }
    nb_arena_free(&a);
    return rc;
}

nb_code nb_coord_result_commit(nb_coord *c, const char *worker_id, const char *lease_id,
                               const Npubench__JobResult *res, int *accepted, nb_err *err)
{
    *accepted = 0;
    nb_db_job j, parent;
    memset(&parent, 0, sizeof parent);
    nb_code rc = nb_db_job_get(c->db, res->job_id, &j, err);
    if (rc)
        return rc;
    Npubench__JobSpec *spec = NULL;
    if ((rc = load_spec(&j, &spec, err)))
        goto out;
    if (j.parent_id && (rc = nb_db_job_get(c->db, j.parent_id, &parent, err)))
        goto out;
    Npubench__WorkerInfo *info = nb_coord_reg_info(c, worker_id);
    const char *board = info ? info->board_name : "";
    int is_shard = j.parent_id && nb_job_kind_parse(parent.kind) == NPUBENCH__JOB_KIND__VERIFY_FULL;
    if (res->status != NPUBENCH__STATUS_CODE__OK)
        rc = commit_failed(c, &j, lease_id, res, accepted, err);
    else if (is_shard && !res->verify)
        rc = commit_no_verify(c, &j, lease_id, res, accepted, err);
    else if (is_shard)
        rc = commit_shard(c, &j, &parent, lease_id, res, board, accepted, err);
    else
        rc = commit_single(c, &j, spec, lease_id, res, board, accepted, err);
    nb_wire_free(info);
    if (rc == NB_EMISMATCH || rc == NB_ECANCELED) {
        /* The lease is gone (expired and handed on, cancelled, finished):
         * the worker drops the result; nothing was written. */
        nb_coord_log(c, "job %lld: result from %s refused: %s", (long long)j.id, worker_id,
                     err->msg);
        *accepted = 0;
        rc = NB_OK;
    } else if (!rc) {
        nb_coord_stat_add(c, &c->stats.completed, 1);
        nb_coord_traces_confirm(c, spec, res);
        nb_coord_health_on_result(c, worker_id, spec->kind, res);
    }
    nb_coord_changed(c, j.id, j.parent_id);
out:
    nb_wire_free(spec);
    nb_db_job_free(&j);
    nb_db_job_free(&parent);
    return rc;
}
