/* nb_coord_compare: Compare, SetReference and GetReference — two history runs side by side
 * (base, new, delta, the Mann-Whitney p, verify prompts that changed) and the per-model
 * reference deployment a run is compared against, matched like with like. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_db_deploy.h"
#include "nb_stats.h"
#include "nb_time.h"
#include "nb_verifypb.h"

/* Candidate runs of the reference deployment looked at, newest first. */
#define CMP_REF_SCAN 500

nb_code nb_coord_run_of_job(nb_coord *c, int64_t job_id, int64_t *run_id, nb_err *err)
{
    Npubench__JobResult *res;
    nb_code rc = nb_coord_store_get(c, job_id, &res, err);
    if (rc)
        return rc;
    *run_id = res->n_run_ids ? res->run_ids[0] : 0;
    nb_wire_free(res);
    return *run_id ? NB_OK
                   : nb_err_set(err, NB_ENOTFOUND, "job %lld wrote no history run",
                                (long long)job_id);
}

static void label_of(nb_coord *c, const nb_db_run *run, char *buf, size_t cap)
{
    nb_db_deployment d;
    nb_err e;
    char iso[32];
    nb_time_iso(iso, run->started_ms);
    if (nb_db_deployment_get(c->db, run->deployment_id, &d, &e) == NB_OK)
        snprintf(buf, cap, "run %lld: %s %s/%s on %s (%s, %s)", (long long)run->id, d.model,
                 d.backend, d.dtype, d.board, run->kind, iso);
    else
        snprintf(buf, cap, "run %lld (%s, %s)", (long long)run->id, run->kind, iso);
}

/* The reference of the model name names, as `history --model` matches names (case aside,
 * a file name, any alias): the table's own lookup first, then every reference's model. */
static nb_code ref_named(nb_coord *c, const char *name, nb_db_deployment *out, nb_err *err)
{
    nb_code rc = nb_db_reference_get(c->db, name, out, err);
    if (rc != NB_ENOTFOUND)
        return rc;
    nb_err e2;
    nb_db_reference *all = NULL;
    size_t n = 0;
    nb_coord_aliases at;
    if (nb_coord_alias_table(c, &at, &e2))
        return rc;
    if (nb_db_reference_list(c->db, &all, &n, &e2) == NB_OK)
        for (size_t i = 0; i < n; i++)
            if (nb_job_model_match_aliased(name, all[i].model, NULL, at.al, at.n)) {
                *out = all[i].dep;
                rc = NB_OK;
                break;
            }
    free(all);
    nb_coord_aliases_free(&at);
    return rc;
}

/* ---- like with like ---- */

/* What a run measures: verify runs a gate, diagnosis cosines, everything else (run, profile,
 * an imported bench or sweep) TTFT and throughput. */
static const char *family(const char *kind)
{
    const char *f = nb_job_kind_family(kind);
    return strcmp(f, "health") ? f : "performance";
}

/* Both known and different. */
static int differs(int64_t a, int64_t b)
{
    return a > 0 && b > 0 && a != b;
}

static int same_values(const nb_db_run_brief *a, const nb_db_run_brief *b)
{
    int any = 0;
    for (int m = 0; m < NB_METRIC_N; m++) {
        if (isnan(a->value[m]) || isnan(b->value[m]))
            continue;
        if (a->value[m] != b->value[m])
            return 0;
        any = 1;
    }
    return any;
}

/* The same measurement stored twice (the run itself, an import of the same nightly row
 * through another file, a run imported again): never its own base. */
static int duplicate_of(const nb_db_run_brief *a, const nb_db_run_brief *b)
{
    if (a->measurement_key[0] && !strcmp(a->measurement_key, b->measurement_key))
        return 1;
    int64_t dt = a->started_ms - b->started_ms;
    return (dt < 0 ? -dt : dt) < 1000 && same_values(a, b);
}

static int shares_metric(const nb_db_run_brief *a, const nb_db_run_brief *b)
{
    for (int m = 0; m < NB_METRIC_N; m++)
        if (!isnan(a->value[m]) && !isnan(b->value[m]))
            return 1;
    return 0;
}

/* "performance, prompt 10 tokens, context 6, 20 generated tokens" / "verify, 2 prompts x 32
 * tokens": what a base must share with the run. */
static void describe_like(const nb_db_run_brief *r, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s", family(r->kind));
#define ADD(...)                                                                               \
    do {                                                                                       \
        if (n < cap)                                                                           \
            n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                              \
    } while (0)
    if (!strcmp(family(r->kind), "verify")) {
        ADD(", %d prompt%s x %d tokens", r->gate_prompts, r->gate_prompts == 1 ? "" : "s",
            r->gate_steps);
    } else {
        if (r->prompt_tokens > 0)
            ADD(", prompt %lld tokens", (long long)r->prompt_tokens);
        if (r->context_len > 0)
            ADD(", context %lld", (long long)r->context_len);
        if (r->generated_tokens > 0)
            ADD(", %lld generated tokens", (long long)r->generated_tokens);
    }
#undef ADD
}

/* Why cand is not like run: "self", "duplicate", "kind", "shape"; "" = it is like. */
static const char *unlike(const nb_db_run_brief *run, const nb_db_run_brief *cand)
{
    if (run->id == cand->id)
        return "self";
    if (duplicate_of(run, cand))
        return "duplicate";
    /* a performance run's kind is part of what it measured (db/nb_db_series.h): a cold `run`,
     * a warm `profile`, a nightly's row, one context of a sweep are not like each other */
    if (strcmp(family(run->kind), family(cand->kind)) ||
        (!strcmp(family(run->kind), "performance") && strcmp(run->kind, cand->kind)))
        return "kind";
    if (!strcmp(family(run->kind), "verify"))
        return run->gate_prompts != cand->gate_prompts || run->gate_steps != cand->gate_steps
                   ? "shape"
                   : "";
    if (differs(run->prompt_tokens, cand->prompt_tokens) ||
        differs(run->context_len, cand->context_len) ||
        differs(run->generated_tokens, cand->generated_tokens))
        return "shape";
    if (!strcmp(family(run->kind), "performance") && !shares_metric(run, cand))
        return "shape";
    return "";
}

/* The brief of run id among a deployment's (it is there: the run belongs to it). */
static nb_code brief_of(nb_coord *c, const nb_db_run *run, nb_db_run_brief *out, nb_err *err)
{
    nb_db_run_brief *b = NULL;
    size_t n = 0;
    nb_code rc = nb_db_runs_brief(c->db, run->deployment_id, NB_DB_HISTORY_MAX, &b, &n, err);
    if (rc)
        return rc;
    rc = nb_err_set(err, NB_ENOTFOUND, "run %lld: not found among its deployment's runs",
                    (long long)run->id);
    for (size_t i = 0; i < n; i++)
        if (b[i].id == run->id) {
            *out = b[i];
            rc = NB_OK;
            break;
        }
    free(b);
    return rc;
}

/* The newest run of the reference deployment like run a: *base_id, and in matched what it
 * was matched on. NB_ENOTFOUND with the reason when none is. */
static nb_code match_reference(nb_coord *c, const nb_db_run *a, const nb_db_deployment *ref,
                               int64_t *base_id, char *matched, size_t cap, nb_err *err)
{
    nb_db_run_brief me, *cand = NULL;
    size_t n = 0;
    nb_code rc = brief_of(c, a, &me, err);
    if (!rc)
        rc = nb_db_runs_brief(c->db, ref->id, CMP_REF_SCAN, &cand, &n, err);
    if (rc)
        return rc;
    size_t like = 0, kind = 0, shape = 0, dup = 0, self = 0;
    *base_id = 0;
    for (size_t i = 0; i < n; i++) {
        const char *why = unlike(&me, &cand[i]);
        if (!*why) {
            if (!like++)
                *base_id = cand[i].id;
        }
        kind += !strcmp(why, "kind");
        shape += !strcmp(why, "shape");
        dup += !strcmp(why, "duplicate");
        self += !strcmp(why, "self");
    }
    free(cand);
    char what[256];
    describe_like(&me, what, sizeof what);
    if (!*base_id)
        return nb_err_set(err, NB_ENOTFOUND,
                          "the reference deployment %lld (%s %s/%s on %s) has no other run like "
                          "run %lld (%s): of its %zu other run%s, %zu %s another kind, %zu "
                          "another prompt length, context or token count, %zu %s the same "
                          "measurement stored again",
                          (long long)ref->id, ref->model, ref->backend, ref->dtype, ref->board,
                          (long long)a->id, what, n - self, n - self == 1 ? "" : "s", kind,
                          kind == 1 ? "is" : "are", shape, dup, dup == 1 ? "is" : "are");
    snprintf(matched, cap,
             "run %lld, the newest of %zu like run%s of the reference deployment %lld (%s %s/%s "
             "on %s): %s; left out: %zu of another kind, %zu of another shape, %zu duplicate%s of this "
             "run",
             (long long)*base_id, like, like == 1 ? "" : "s", (long long)ref->id, ref->model,
             ref->backend, ref->dtype, ref->board, what, kind, shape, dup, dup == 1 ? "" : "s");
    return NB_OK;
}

/* ---- the comparison ---- */

/* "PASS (2/2 prompts pass)": a run's outcome and its passing prompts; "" without a gate. */
static void gate_summary(const nb_db_run *r, char *buf, size_t cap)
{
    size_t pass = 0;
    for (size_t i = 0; i < r->n_gate_checks; i++)
        pass += !strcmp(r->gate_checks[i].status, "PASS");
    if (!r->n_gate_checks)
        snprintf(buf, cap, "%s", "");
    else
        snprintf(buf, cap, "%s (%zu/%zu prompts pass)",
                 r->outcome == NB_OUTCOME_PASS   ? "PASS"
                 : r->outcome == NB_OUTCOME_FAIL ? "FAIL"
                                                 : "ERROR",
                 pass, r->n_gate_checks);
}

/* Whether runs a and b are of different models (any name of one matches the other: the
 * alias table and file names, as `history --model`) and on different boards. */
static void scope_of(nb_coord *c, const nb_db_run *a, const nb_db_run *b, int *cross_model,
                     int *cross_board)
{
    nb_db_deployment da, db;
    nb_err e;
    *cross_model = *cross_board = 0;
    if (nb_db_deployment_get(c->db, a->deployment_id, &da, &e) ||
        nb_db_deployment_get(c->db, b->deployment_id, &db, &e))
        return; /* unknown: compared as before */
    *cross_board = strcmp(da.board, db.board) != 0;
    if (!strcmp(da.model, db.model))
        return;
    nb_coord_aliases at;
    if (nb_coord_alias_table(c, &at, &e)) {
        *cross_model = 1;
        return;
    }
    *cross_model = !nb_job_model_match_aliased(da.model, db.model, NULL, at.al, at.n);
    nb_coord_aliases_free(&at);
}

/* A run's samples of metric m (its headline value when it has none); *n = 0 when absent. */
static double *samples_of(const nb_db_run *r, int m, size_t *n)
{
    *n = 0;
    double *x = malloc((r->n_samples ? r->n_samples : 1) * sizeof *x);
    if (!x)
        return NULL;
    for (size_t i = 0; i < r->n_samples; i++)
        if (!isnan(r->samples[i].v[m]))
            x[(*n)++] = r->samples[i].v[m];
    if (!*n && !isnan(r->value[m]))
        x[(*n)++] = r->value[m];
    return x;
}

/* The row of metric m, or 0 unless both runs have it. */
static int metric_row(nb_coord *c, const nb_db_run *ra, const nb_db_run *rb, int m, double tol,
                      Npubench__CompareRow *x)
{
    double v = ra->value[m], b = rb->value[m];
    if (isnan(v) || isnan(b))
        return 0; /* a metric one side lacks compares nothing */
    npubench__compare_row__init(x);
    x->metric = (char *)nb_db_metric_name((nb_db_metric)m);
    x->value = isnan(v) ? 0 : v;
    x->base_value = isnan(b) ? 0 : b;
    x->delta_pct = !isnan(v) && !isnan(b) && b != 0 ? (v - b) / fabs(b) * 100 : 0;
    int hib = nb_db_metric_higher_is_better((nb_db_metric)m);
    /* Beyond the noise band (tol) in the bad direction; a verdict also needs significance
     * below, as benchstat: a change the samples cannot tell from noise is no regression. */
    int beyond = !isnan(v) && !isnan(b) && (hib ? x->delta_pct < -tol : x->delta_pct > tol);
    x->regression = 0;
    x->p_value = -1;
    size_t na, nb;
    double *sa = samples_of(ra, m, &na), *sb = samples_of(rb, m, &nb);
    x->n = (int32_t)na;
    x->base_n = (int32_t)nb;
    nb_stats_regression_params p = {tol / 100, c->o.regression_alpha, hib};
    nb_stats_regression_result res;
    nb_err e;
    if (sa && sb && na && nb && nb_stats_regression(sa, na, sb, nb, &p, &res, &e) == NB_OK) {
        x->p_value = res.p;
        x->significant = res.p < c->o.regression_alpha;
        x->regression = beyond && x->significant;
    }
    free(sa);
    free(sb);
    return 1;
}

static const nb_db_gate_check *gate_at(const nb_db_run *r, int index)
{
    for (size_t i = 0; i < r->n_gate_checks; i++)
        if (r->gate_checks[i].prompt_index == index)
            return &r->gate_checks[i];
    return NULL;
}

static int passed(const nb_db_gate_check *g)
{
    return g && !strcmp(g->status, "PASS");
}

/* The verify prompts whose outcome or divergence step differ, in prompt order (a's, then
 * those only b has); *both = prompts in both runs, *worse = a prompt b passed fails in a. */
static void prompt_changes(nb_arena *ar, const nb_db_run *a, const nb_db_run *b,
                           Npubench__CompareResponse *resp, int *worse)
{
    size_t cap = a->n_gate_checks + b->n_gate_checks;
    *worse = 0;
    if (!cap)
        return;
    resp->prompt_changes = nb_arena_calloc(ar, cap, sizeof *resp->prompt_changes);
    if (!resp->prompt_changes)
        return;
    for (size_t pass = 0; pass < 2; pass++) {
        const nb_db_run *from = pass ? b : a, *other = pass ? a : b;
        for (size_t i = 0; i < from->n_gate_checks; i++) {
            const nb_db_gate_check *g = &from->gate_checks[i], *h = gate_at(other, g->prompt_index);
            if (pass && h)
                continue; /* seen from a's side */
            const nb_db_gate_check *ga = pass ? h : g, *gb = pass ? g : h;
            resp->prompts_compared += ga && gb;
            if (ga && gb && !strcmp(ga->status, gb->status) &&
                ga->divergence_step == gb->divergence_step)
                continue;
            *worse |= passed(gb) && ga && !passed(ga);
            Npubench__PromptChange *pc = nb_arena_alloc(ar, sizeof *pc);
            if (!pc)
                return;
            npubench__prompt_change__init(pc);
            pc->index = g->prompt_index;
            pc->prompt = nb_arena_strdup(ar, g->prompt ? g->prompt : "");
            pc->status = nb_arena_strdup(ar, ga ? ga->status : "");
            pc->base_status = nb_arena_strdup(ar, gb ? gb->status : "");
            pc->divergence_step = ga ? ga->divergence_step : -1;
            pc->base_divergence_step = gb ? gb->divergence_step : -1;
            resp->prompt_changes[resp->n_prompt_changes++] = pc;
        }
    }
}

/* The report_json of the comparison (the same numbers as the rows). */
static json_object *report_doc(const Npubench__CompareResponse *resp, double tol, double alpha)
{
    json_object *doc = json_object_new_object(), *arr = nb_verifypb_compare_rows_json(resp);
    json_object_object_add(doc, "run", json_object_new_string(resp->label));
    json_object_object_add(doc, "base", json_object_new_string(resp->base_label));
    json_object_object_add(doc, "tolerance_pct", json_object_new_double(tol));
    json_object_object_add(doc, "test", json_object_new_string("mann-whitney-u two-sided"));
    json_object_object_add(doc, "alpha", json_object_new_double(alpha));
    json_object_object_add(doc, "rows", arr);
    json_object_object_add(doc, "prompts_compared", json_object_new_int(resp->prompts_compared));
    json_object_object_add(doc, "prompts_changed",
                           json_object_new_int((int)resp->n_prompt_changes));
    return doc;
}

/* The base run of a: given, a job's, or the reference's like run (matched filled). */
static nb_code base_of(nb_coord *c, const Npubench__CompareRequest *r, const nb_db_run *a,
                       int64_t *b_id, char *matched, size_t cap, nb_err *err)
{
    *b_id = r->base_run_id;
    if (!*b_id && r->base_job_id)
        return nb_coord_run_of_job(c, r->base_job_id, b_id, err);
    if (*b_id)
        return NB_OK;
    nb_db_deployment d, ref;
    nb_code rc = nb_db_deployment_get(c->db, a->deployment_id, &d, err);
    if (rc)
        return rc;
    if (ref_named(c, d.model, &ref, err))
        return nb_err_set(err, NB_EMISMATCH,
                          "no reference deployment is set for model %s; set one with "
                          "`npubench reference set DEPLOYMENT`",
                          d.model);
    return match_reference(c, a, &ref, b_id, matched, cap, err);
}

nb_rpc_status nb_coord_compare_rpc(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__CompareRequest, npubench__compare_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    int64_t a_id = r->run_id, b_id = 0;
    nb_db_run ra, rb;
    int have_a = 0, have_b = 0;
    char matched[1024] = "";
    nb_arena ar = {0};
    if (!a_id && r->job_id && nb_coord_run_of_job(c, r->job_id, &a_id, &err))
        goto fail;
    if (!a_id) {
        st = nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT,
                                 "CompareRequest: run_id or job_id is required");
        goto out;
    }
    if (nb_db_run_get(c->db, a_id, &ra, &err))
        goto fail;
    have_a = 1;
    if (base_of(c, r, &ra, &b_id, matched, sizeof matched, &err)) {
        if (err.code != NB_EMISMATCH)
            goto fail;
        st = nb_rpc_reply_status(reply, NB_RPC_FAILED_PRECONDITION, "%s", err.msg);
        goto out;
    }
    if (nb_db_run_get(c->db, b_id, &rb, &err))
        goto fail;
    have_b = 1;
    {
        double tol = r->tolerance_pct > 0 ? r->tolerance_pct : c->o.regression_min_rel * 100;
        Npubench__CompareResponse resp = NPUBENCH__COMPARE_RESPONSE__INIT;
        Npubench__CompareRow rows[NB_METRIC_N], *rp[NB_METRIC_N];
        char label[1024], blabel[1024];
        label_of(c, &ra, label, sizeof label);
        label_of(c, &rb, blabel, sizeof blabel);
        int regressed = 0;
        for (int m = 0; m < NB_METRIC_N; m++) {
            if (!metric_row(c, &ra, &rb, m, tol, &rows[resp.n_rows]))
                continue;
            regressed |= rows[resp.n_rows].regression;
            rp[resp.n_rows] = &rows[resp.n_rows];
            resp.n_rows++;
        }
        int worse, cross_model, cross_board;
        prompt_changes(&ar, &ra, &rb, &resp, &worse);
        scope_of(c, &ra, &rb, &cross_model, &cross_board);
        if (cross_model) { /* side by side only: no verdict mixes two models */
            for (size_t i = 0; i < resp.n_rows; i++)
                rows[i].regression = 0;
            regressed = worse = 0;
        }
        char gate[64], base_gate[64];
        gate_summary(&ra, gate, sizeof gate);
        gate_summary(&rb, base_gate, sizeof base_gate);
        resp.gate = gate;
        resp.base_gate = base_gate;
        resp.cross_model = cross_model;
        resp.cross_board = cross_board;
        if (!resp.n_rows && !resp.prompts_compared) {
            st = nb_rpc_reply_status(reply, NB_RPC_FAILED_PRECONDITION,
                                     "run %lld (%s) and run %lld (%s) share no metric and no "
                                     "verify prompt: nothing to compare",
                                     (long long)a_id, ra.kind, (long long)b_id, rb.kind);
            goto out;
        }
        resp.rows = rp;
        resp.outcome = regressed || worse ? NPUBENCH__OUTCOME__FAIL : NPUBENCH__OUTCOME__PASS;
        resp.run_id = a_id;
        resp.base_run_id = b_id;
        resp.base_job_id = rb.job_id;
        resp.label = label;
        resp.base_label = blabel;
        resp.matched = matched;
        resp.kind = (char *)ra.kind;
        resp.base_kind = (char *)rb.kind;
        json_object *doc = report_doc(&resp, tol, c->o.regression_alpha);
        resp.report_json = (char *)json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY);
        st = nb_coord_reply_built(reply, &resp, !ar.failed, "Compare");
        json_object_put(doc);
    }
    goto out;
fail:
    st = nb_rpc_reply_err(reply, &err);
out:
    if (have_a)
        nb_db_run_free(&ra);
    if (have_b)
        nb_db_run_free(&rb);
    nb_arena_free(&ar);
    nb_wire_free(r);
    return st;
}

/* ---- the reference ---- */

static void describe(const nb_db_deployment *d, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s/%s on %s", d->model, d->backend, d->dtype, d->board);
}

/* Unset: the reference of r->model (any of its names) is forgotten. */
static nb_rpc_status unset_ref(nb_coord *c, const Npubench__SetReferenceRequest *r,
                               nb_rpc_reply *reply)
{
    nb_err err = {0};
    nb_db_deployment prev;
    if (!*r->model)
        return nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT,
                                   "SetReferenceRequest.model: required with unset");
    if (ref_named(c, r->model, &prev, &err) || nb_db_reference_clear(c->db, prev.model, &err))
        return nb_rpc_reply_err(reply, &err);
    char desc[4 * NB_DB_NAME_MAX + 16];
    describe(&prev, desc, sizeof desc);
    nb_coord_log(c, "reference of %s unset (was deployment %lld, %s)", prev.model,
                 (long long)prev.id, desc);
    Npubench__SetReferenceResponse resp = NPUBENCH__SET_REFERENCE_RESPONSE__INIT;
    resp.model = prev.model;
    resp.previous_deployment_id = prev.id;
    resp.description = desc;
    return nb_rpc_reply_pack(reply, &resp);
}

nb_rpc_status nb_coord_setref_rpc(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__SetReferenceRequest, npubench__set_reference_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    if (r->unset) {
        st = unset_ref(c, r, reply);
        goto out;
    }
    int64_t dep_id = r->deployment_id, run_id = r->run_id;
    if (!dep_id && !run_id && r->job_id && nb_coord_run_of_job(c, r->job_id, &run_id, &err))
        goto fail;
    if (!dep_id && run_id) {
        nb_db_run run;
        if (nb_db_run_get(c->db, run_id, &run, &err))
            goto fail;
        dep_id = run.deployment_id;
        nb_db_run_free(&run);
    }
    if (!dep_id) {
        st = nb_rpc_reply_status(reply, NB_RPC_INVALID_ARGUMENT,
                                 "SetReferenceRequest: deployment_id, run_id or job_id is "
                                 "required");
        goto out;
    }
    nb_db_deployment d, prev;
    if (nb_db_deployment_get(c->db, dep_id, &d, &err))
        goto fail;
    int had = nb_db_reference_get(c->db, d.model, &prev, &err) == NB_OK;
    if (nb_db_reference_set(c->db, dep_id, &err))
        goto fail;
    {
        char desc[4 * NB_DB_NAME_MAX + 16];
        describe(&d, desc, sizeof desc);
        Npubench__SetReferenceResponse resp = NPUBENCH__SET_REFERENCE_RESPONSE__INIT;
        resp.deployment_id = dep_id;
        resp.model = d.model;
        resp.previous_deployment_id = had ? prev.id : 0;
        resp.description = desc;
        nb_coord_log(c, "reference of %s: deployment %lld (%s)", d.model, (long long)dep_id, desc);
        st = nb_rpc_reply_pack(reply, &resp);
    }
    goto out;
fail:
    st = nb_rpc_reply_err(reply, &err);
out:
    nb_wire_free(r);
    return st;
}

/* One Reference message: the deployment, when it was set, its runs. */
static Npubench__Reference *ref_msg(nb_coord *c, nb_arena *a, const nb_db_reference *x)
{
    Npubench__Reference *m = nb_arena_alloc(a, sizeof *m);
    if (!m)
        return NULL;
    npubench__reference__init(m);
    char desc[4 * NB_DB_NAME_MAX + 16];
    describe(&x->dep, desc, sizeof desc);
    m->model = nb_arena_strdup(a, x->model);
    m->deployment_id = x->dep.id;
    m->description = nb_arena_strdup(a, desc);
    m->set_unix_ms = x->set_ms;
    nb_db_run_brief *b = NULL;
    size_t n = 0;
    nb_err e;
    if (nb_db_runs_brief(c->db, x->dep.id, NB_DB_HISTORY_MAX, &b, &n, &e) == NB_OK) {
        m->runs = (int32_t)n;
        m->latest_run_id = n ? b[0].id : 0;
    }
    free(b);
    return m;
}

nb_rpc_status nb_coord_getref_rpc(void *user, const nb_rpc_request *req, nb_rpc_reply *reply)
{
    nb_coord *c = user;
    NB_COORD_UNPACK(Npubench__GetReferenceRequest, npubench__get_reference_request__descriptor);
    nb_err err = {0};
    nb_rpc_status st;
    nb_db_reference *all = NULL;
    size_t n = 0;
    nb_arena a = {0};
    nb_db_deployment want;
    if ((*r->model && ref_named(c, r->model, &want, &err)) ||
        nb_db_reference_list(c->db, &all, &n, &err)) {
        st = nb_rpc_reply_err(reply, &err);
        goto out;
    }
    Npubench__GetReferenceResponse resp = NPUBENCH__GET_REFERENCE_RESPONSE__INIT;
    resp.references = nb_arena_calloc(&a, n ? n : 1, sizeof *resp.references);
    for (size_t i = 0; resp.references && i < n; i++) {
        if (*r->model && all[i].dep.id != want.id)
            continue;
        Npubench__Reference *m = ref_msg(c, &a, &all[i]);
        if (m)
            resp.references[resp.n_references++] = m;
    }
    st = nb_coord_reply_built(reply, &resp, !a.failed, "GetReference");
out:
    free(all);
    nb_arena_free(&a);
    nb_wire_free(r);
    return st;
}
