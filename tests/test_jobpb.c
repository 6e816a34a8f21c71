/* test_jobpb: C results <-> JobResult round trips through the wire (pack + bounded unpack),
 * hostile messages refused with the field named, and the shared JobSpec validator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_benchpb.h"
#include "nb_dtype.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_report.h"
#include "nb_runenv.h"
#include "nb_verifypb.h"
#include "nb_wire.h"
#include "nb_version.h"

/* ---- helpers ------------------------------------------------------------------------- */

/* Packs and unpacks msg (the network in between), returning the unpacked copy. */
static Npubench__JobResult *wire_trip(const Npubench__JobResult *msg)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    nb_err err;
    assert_int_equal(nb_wire_pack(msg, &buf, &len, &err), NB_OK);
    Npubench__JobResult *back = NULL;
    assert_int_equal(
        nb_wire_unpack(&npubench__job_result__descriptor, buf, len, 0, &back, &err), NB_OK);
    free(buf);
    return back;
}

static void fill_step(nb_gate_step *s, int32_t token, int seed)
{
    memset(s, 0, sizeof *s);
    s->token = token;
    s->topk[0] = token;
    s->logits[0] = 10.0f + (float)seed * 0.125f;
    for (int i = 1; i < NB_GATE_K_MAX; i++) {
        s->topk[i] = token + 100 * i + seed;
        s->logits[i] = s->logits[0] - (float)i * 0.5f;
    }
}

/* A verify result of n records over n_tokens steps; record i diverges at step i when
 * fail_at[i] >= 0 (and fails when fail_mask has bit i). */
static void make_verify(nb_verify_result *r, int first, int n, int n_tokens, int k,
                        const int *div, unsigned fail_mask)
{
    memset(r, 0, sizeof *r);
    r->recs = calloc((size_t)n, sizeof *r->recs);
    assert_non_null(r->recs);
    r->n = n;
    r->k = k;
    r->n_tokens = n_tokens;
    snprintf(r->prompts_path, sizeof r->prompts_path, "verify/prompts/instruct.txt");
    snprintf(r->prompts_sha256, sizeof r->prompts_sha256, "%064d", 7);
    snprintf(r->trace_path, sizeof r->trace_path, "verify/references/abc-def.json");
    snprintf(r->trace_transformers, sizeof r->trace_transformers, "5.24.0");
    snprintf(r->trace_torch, sizeof r->trace_torch, "2.15.0");
    snprintf(r->trace_date, sizeof r->trace_date, "2025-01-02T03:04:05Z");
    r->wall_ms = 1234.5 + first;
    for (int i = 0; i < n; i++) {
        nb_verify_record *v = &r->recs[i];
        v->index = first + i;
        assert_true(asprintf(&v->prompt, "prompt number %d | with \"quotes\"\n", first + i) > 0);
        int idx = first + i; /* values depend on the index, so shards equal the whole */
        v->n_prompt_ids = 11 + idx;
        v->n_steps = n_tokens;
        v->dev = calloc((size_t)n_tokens, sizeof *v->dev);
        v->ref = calloc((size_t)n_tokens, sizeof *v->ref);
        assert_true(v->dev && v->ref);
        for (int s = 0; s < n_tokens; s++) {
            int32_t t = 1000 + 7 * s + idx;
            fill_step(&v->ref[s], t, s);
            fill_step(&v->dev[s], (div[i] >= 0 && s == div[i]) ? t + 1 : t, s + 50);
        }
        nb_gate_check(v->dev, v->n_steps, v->ref, n_tokens, k, &v->gate);
        if (fail_mask & (1u << i)) { /* force a verdict the synthetic data may not give */
            v->gate.status = NB_GATE_FAIL;
            snprintf(v->gate.reason, sizeof v->gate.reason, "synthetic failure %d", i);
        }
        v->dev_token_text = strdup(v->gate.divergence >= 0 ? " dev" : "");
        v->ref_token_text = strdup(v->gate.divergence >= 0 ? " ref" : "");
        v->agreed_text = strdup("agreed ünïcode");
        v->dev_text = strdup("device generation");
        v->ref_text = strdup("reference generation");
        v->prefill_ms = 3.25 + idx;
        v->decode_ms = 40.125 + idx;
    }
    for (int i = 0; i < n; i++)
        if (r->recs[i].gate.status == NB_GATE_PASS)
            r->n_pass++;
        else
            r->n_fail++;
    r->status = r->n_fail ? NB_GATE_FAIL : NB_GATE_PASS;
}

static void test_env(nb_report_env *env)
{
    memset(env, 0, sizeof *env);
    snprintf(env->model, sizeof env->model, "models/x.gguf");
    snprintf(env->model_sha256, sizeof env->model_sha256, "%064d", 3);
    snprintf(env->backend, sizeof env->backend, "cpu");
    snprintf(env->dtype, sizeof env->dtype, "q4_1");
    snprintf(env->board, sizeof env->board, "lab-1");
    env->threads = 2;
    snprintf(env->isa, sizeof env->isa, "avx2");
}

/* The verify report without its timestamp (the one field that depends on the clock). */
static char *report_text(const nb_verify_result *r)
{
    nb_report_env env;
    test_env(&env);
    json_object *doc = nb_report_verify_json(r, &env, "verify");
    json_object_object_del(doc, "timestamp_utc");
    char *s = strdup(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
    json_object_put(doc);
    return s;
}

/* ---- verify --------------------------------------------------------------------------- */

static void test_verify_round_trip(void **state)
{
    (void)state;
    int div[3] = {-1, 2, 0};
    nb_verify_result r;
    make_verify(&r, 4, 3, 6, 5, div, 1u << 2);
    Npubench__JobResult *res = nb_jobpb_result_new();
    assert_non_null(res);
    nb_err err;
    assert_int_equal(nb_verifypb_verify_to_pb(&r, res, &err), NB_OK);
    assert_int_equal(res->outcome, NPUBENCH__OUTCOME__FAIL);
    assert_int_equal(res->n_gates, 3);
    /* the proto carries the chosen tokens of every step and k top entries */
    assert_int_equal(res->gates[1]->n_device_tokens, 6);
    assert_int_equal(res->gates[1]->n_reference_tokens, 6);
    assert_int_equal(res->gates[1]->divergence_step, 2);
    assert_int_equal(res->gates[1]->top_step, 2);
    assert_int_equal(res->gates[0]->top_step, 5);
    assert_int_equal(res->gates[1]->n_device_top, 5);

    Npubench__JobResult *back = wire_trip(res);
    nb_verify_result r2;
    assert_int_equal(nb_verifypb_verify_from_pb(back, &r2, &err), NB_OK);
    assert_int_equal(r2.n, 3);
    assert_int_equal(r2.n_pass, r.n_pass);
    assert_int_equal(r2.n_fail, r.n_fail);
    assert_int_equal(r2.status, r.status);
    for (int i = 0; i < 3; i++) {
        const nb_verify_record *a = &r.recs[i], *b = &r2.recs[i];
        assert_int_equal(a->index, b->index);
        assert_string_equal(a->prompt, b->prompt);
        assert_int_equal(a->gate.status, b->gate.status);
        assert_int_equal(a->gate.n_steps, b->gate.n_steps);
        assert_int_equal(a->gate.agreed, b->gate.agreed);
        assert_int_equal(a->gate.divergence, b->gate.divergence);
        assert_int_equal(a->gate.dev_token, b->gate.dev_token);
        assert_int_equal(a->gate.ref_token, b->gate.ref_token);
        assert_int_equal(a->gate.dev_rank_in_ref, b->gate.dev_rank_in_ref);
        assert_int_equal(a->gate.ref_rank_in_dev, b->gate.ref_rank_in_dev);
        assert_string_equal(a->gate.reason, b->gate.reason);
        int at = a->gate.divergence >= 0 ? a->gate.divergence : a->gate.n_steps - 1;
        assert_memory_equal(a->dev[at].topk, b->dev[at].topk, sizeof(int32_t) * 5);
        assert_memory_equal(a->dev[at].logits, b->dev[at].logits, sizeof(float) * 5);
        assert_memory_equal(a->ref[at].topk, b->ref[at].topk, sizeof(int32_t) * 5);
        for (int s = 0; s < a->n_steps; s++) {
            assert_int_equal(a->dev[s].token, b->dev[s].token);
            assert_int_equal(a->ref[s].token, b->ref[s].token);
        }
        assert_true(a->prefill_ms == b->prefill_ms && a->decode_ms == b->decode_ms);
        assert_string_equal(a->agreed_text, b->agreed_text);
        assert_string_equal(a->dev_text, b->dev_text);
        assert_string_equal(a->ref_token_text, b->ref_token_text);
    }
    /* what the reports and DB rows are made of is identical */
    char *j1 = report_text(&r), *j2 = report_text(&r2);
    assert_string_equal(j1, j2);
    free(j1);
    free(j2);
    /* and a result rebuilt from the message round-trips again to the same message */
    Npubench__JobResult *res2 = nb_jobpb_result_new();
    assert_int_equal(nb_verifypb_verify_to_pb(&r2, res2, &err), NB_OK);
    uint8_t *p1, *p2;
    size_t l1, l2;
    assert_int_equal(nb_wire_pack(res, &p1, &l1, &err), NB_OK);
    assert_int_equal(nb_wire_pack(res2, &p2, &l2, &err), NB_OK);
    assert_int_equal(l1, l2);
    assert_memory_equal(p1, p2, l1);
    free(p1);
    free(p2);
    nb_jobpb_free(res2);
    nb_jobpb_free(res);
    nb_jobpb_free(back);
    nb_verify_result_free(&r);
    nb_verify_result_free(&r2);
}

/* Shards reported separately, merged by the coordinator, equal the single run. */
static void test_verify_shard_merge(void **state)
{
    (void)state;
    int div[4] = {-1, 1, -1, 3};
    nb_verify_result whole, a, b;
    make_verify(&whole, 0, 4, 5, 5, div, 0);
    make_verify(&a, 0, 2, 5, 5, div, 0);
    make_verify(&b, 2, 2, 5, 5, div + 2, 0);
    nb_err err;
    Npubench__JobResult *ra = nb_jobpb_result_new(), *rb = nb_jobpb_result_new();
    assert_int_equal(nb_verifypb_verify_to_pb(&a, ra, &err), NB_OK);
    assert_int_equal(nb_verifypb_verify_to_pb(&b, rb, &err), NB_OK);
    Npubench__JobResult *ua = wire_trip(ra), *ub = wire_trip(rb);
    nb_verify_result m, mb;
    /* arrive out of order */
    assert_int_equal(nb_verifypb_verify_from_pb(ub, &m, &err), NB_OK);
    assert_int_equal(nb_verifypb_verify_from_pb(ua, &mb, &err), NB_OK);
    assert_int_equal(nb_verify_merge(&m, &mb, &err), NB_OK);
    m.wall_ms = whole.wall_ms;
    assert_int_equal(m.status, whole.status);
    char *j1 = report_text(&whole), *j2 = report_text(&m);
    assert_string_equal(j1, j2);
    free(j1);
    free(j2);
    nb_verify_result_free(&m);
    nb_verify_result_free(&mb);
    nb_verify_result_free(&whole);
    nb_verify_result_free(&a);
    nb_verify_result_free(&b);
    nb_jobpb_free(ra);
    nb_jobpb_free(rb);
    nb_jobpb_free(ua);
    nb_jobpb_free(ub);
}

static void expect_from_pb_error(Npubench__JobResult *res, const char *needle)
{
    nb_verify_result r;
    nb_err err;
    nb_err_clear(&err);
    assert_int_equal(nb_verifypb_verify_from_pb(res, &r, &err), NB_EINVAL);
    if (!strstr(err.msg, needle))
        fail_msg("expected '%s' in: %s", needle, err.msg);
}

static void test_verify_hostile(void **state)
{
    (void)state;
    int div[1] = {1};
    nb_verify_result r;
    make_verify(&r, 0, 1, 4, 5, div, 0);
    Npubench__JobResult *res = nb_jobpb_result_new();
    nb_err err;
    assert_int_equal(nb_verifypb_verify_to_pb(&r, res, &err), NB_OK);
    Npubench__GateRecord *g = res->gates[0];

    g->steps = 9; /* more steps than tokens carried */
    expect_from_pb_error(res, "gates[0].steps 9");
    g->steps = 4;
    g->divergence_step = 4;
    expect_from_pb_error(res, "gates[0].divergence_step 4");
    g->divergence_step = 1;
    g->top_step = -2;
    expect_from_pb_error(res, "gates[0].top_step");
    g->top_step = 1;
    g->agreed = 5;
    expect_from_pb_error(res, "gates[0].agreed 5");
    g->agreed = 1;
    res->verify->k = 21;
    expect_from_pb_error(res, "verify.k 21");
    res->verify->k = 5;
    /* a top list longer than NB_GATE_K_MAX */
    size_t n0 = g->n_device_top;
    Npubench__TopToken **big = calloc(NB_GATE_K_MAX + 1, sizeof *big);
    for (int i = 0; i < NB_GATE_K_MAX + 1; i++) {
        big[i] = malloc(sizeof *big[i]);
        npubench__top_token__init(big[i]);
    }
    Npubench__TopToken **old = g->device_top;
    g->device_top = big;
    g->n_device_top = NB_GATE_K_MAX + 1;
    expect_from_pb_error(res, "device_top: 21 entries");
    g->device_top = old;
    g->n_device_top = n0;
    for (int i = 0; i < NB_GATE_K_MAX + 1; i++)
        free(big[i]);
    free(big);
    /* still fine after restoring */
    nb_verify_result ok;
    assert_int_equal(nb_verifypb_verify_from_pb(res, &ok, &err), NB_OK);
    nb_verify_result_free(&ok);
    /* no summary: not a verify result */
    Npubench__VerifySummary *vs = res->verify;
    res->verify = NULL;
    expect_from_pb_error(res, "JobResult.verify: absent");
    res->verify = vs;
    nb_jobpb_free(res);
    nb_verify_result_free(&r);
}

/* ---- run / profile -------------------------------------------------------------------- */

static void make_run(nb_run_result *r, int n)
{
    memset(r, 0, sizeof *r);
    r->samples = calloc((size_t)n, sizeof *r->samples);
    r->n = n;
    double tt[8], tp[8], dm[8], po[8];
    for (int i = 0; i < n; i++) {
        nb_run_sample *s = &r->samples[i];
        s->tokenize_ms = 0.1 * (i + 1);
        s->ttft_ms = 20.0 / 3.0 + i;
        s->decode_ms = 100.0 + i * 0.3;
        s->latency_ms = s->ttft_ms + s->decode_ms;
        s->generated_tokens = 4;
        s->prompt_tokens = 17;
        s->decode_ms_per_token = s->decode_ms / 3;
        s->tps = 3 / (s->decode_ms / 1000.0);
        s->tpot_ms = s->decode_ms / 3;
        tt[i] = s->ttft_ms, tp[i] = s->tps, dm[i] = s->decode_ms_per_token, po[i] = s->tpot_ms;
    }
    r->ttft_ms = nb_stat_of(tt, n);
    r->tps = nb_stat_of(tp, n);
    r->decode_ms_per_token = nb_stat_of(dm, n);
    r->tpot_ms = nb_stat_of(po, n);
    r->text = strdup("generated text");
    r->prompt_text = strdup("<|im_start|>user\nhello<|im_end|>\n");
    r->setup_ms = 321.0;
}

static void test_run_round_trip(void **state)
{
    (void)state;
    nb_run_result r;
    make_run(&r, 3);
    nb_err err;
    Npubench__JobResult *res = nb_jobpb_result_new();
    assert_int_equal(nb_benchpb_run_to_pb(&r, 1, &res->metrics, &err), NB_OK);
    assert_int_equal(res->metrics->n_samples, 3); /* every sample, not only the mean */
    assert_int_equal(res->metrics->warmup, 1);
    Npubench__JobResult *back = wire_trip(res);
    nb_run_result r2;
    assert_int_equal(nb_benchpb_run_from_pb(back->metrics, &r2, &err), NB_OK);
    assert_int_equal(r2.n, 3);
    assert_memory_equal(r.samples, r2.samples, sizeof *r.samples * 3);
    assert_memory_equal(&r.ttft_ms, &r2.ttft_ms, sizeof r.ttft_ms);
    assert_memory_equal(&r.tps, &r2.tps, sizeof r.tps);
    assert_memory_equal(&r.tpot_ms, &r2.tpot_ms, sizeof r.tpot_ms);
    assert_true(r.setup_ms == r2.setup_ms);
    assert_string_equal(r.text, r2.text);
    assert_string_equal(r.prompt_text, r2.prompt_text);
    /* no samples: refused */
    nb_run_result r3;
    size_t n = back->metrics->n_samples;
    back->metrics->n_samples = 0;
    assert_int_equal(nb_benchpb_run_from_pb(back->metrics, &r3, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "Metrics.samples"));
    back->metrics->n_samples = n;
    nb_run_result_free(&r);
    nb_run_result_free(&r2);
    nb_jobpb_free(res);
    nb_jobpb_free(back);
}

static void test_profile_round_trip(void **state)
{
    (void)state;
    nb_profile_result p;
    memset(&p, 0, sizeof p);
    make_run(&p.run, 2);
    p.setup_ms = 321.0;
    p.prompt_tokens = 17;
    p.n_tokens = 4;
    p.reps = 2;
    p.prefill_ms = (nb_stat){6.5, 0.25};
    p.decode_avg_ms = (nb_stat){33.3, 1.5};
    p.ops[NB_OP_RMSNORM] = (nb_op_stats){120, 1.5};
    p.ops[NB_OP_LM_HEAD] = (nb_op_stats){8, 16.0};
    p.lm_head_ms = 2.0;
    nb_err err;
    Npubench__JobResult *res = nb_jobpb_result_new();
    assert_int_equal(nb_benchpb_profile_to_pb(&p, 1, res, &err), NB_OK);
    assert_int_equal(res->n_phases, 4);
    assert_int_equal(res->n_kernels, 2);
    assert_string_equal(res->phases[2]->name, "decode");
    assert_int_equal(res->phases[2]->calls, 2 * 3);
    assert_string_equal(res->kernels[0]->device, "cpu");
    Npubench__JobResult *back = wire_trip(res);
    nb_profile_result q;
    assert_int_equal(nb_benchpb_profile_from_pb(back, &q, &err), NB_OK);
    assert_true(q.setup_ms == p.setup_ms && q.lm_head_ms == p.lm_head_ms);
    assert_int_equal(q.prompt_tokens, 17);
    assert_int_equal(q.n_tokens, 4);
    assert_int_equal(q.reps, 2);
    assert_memory_equal(&q.prefill_ms, &p.prefill_ms, sizeof p.prefill_ms);
    assert_memory_equal(&q.decode_avg_ms, &p.decode_avg_ms, sizeof p.decode_avg_ms);
    assert_memory_equal(q.ops, p.ops, sizeof p.ops);
    nb_profile_result_free(&q);
    /* a kernel name no cpu op has */
    char *old = back->kernels[0]->name;
    back->kernels[0]->name = (char *)"warp_shuffle";
    assert_int_equal(nb_benchpb_profile_from_pb(back, &q, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "kernels[0].name 'warp_shuffle'"));
    back->kernels[0]->name = old;
    nb_profile_result_free(&p);
    nb_jobpb_free(res);
    nb_jobpb_free(back);
}

/* ---- diagnosis ------------------------------------------------------------------------ */

static void test_diagnosis_round_trip(void **state)
{
    (void)state;
    nb_diagnosis_result d;
    memset(&d, 0, sizeof d);
    snprintf(d.prompt, sizeof d.prompt, "The capital of France is");
    d.n_pos = 6;
    d.n_layers = 3;
    d.k = 5;
    d.layers = calloc(3, sizeof *d.layers);
    for (int l = 0; l < 3; l++) {
        d.layers[l].layer = l;
        d.layers[l].post_norm = l == 2;
        d.layers[l].s = (nb_cos_stats){0.99 - l * 0.01, 0.991, 0.995, 0.994, 0.0625 * (l + 1)};
    }
    fill_step(&d.dev_final, 42, 1);
    fill_step(&d.ref_final, 42, 2);
    snprintf(d.trace_path, sizeof d.trace_path, "verify/references/x-diag-y.json");
    nb_err err;
    Npubench__JobResult *res = nb_jobpb_result_new();
    assert_int_equal(nb_verifypb_diagnosis_to_pb(&d, res, &err), NB_OK);
    assert_int_equal(res->n_cosines, 3);
    assert_string_equal(res->cosines[1]->name, "L1");
    assert_true(res->cosines[2]->post_norm);
    Npubench__JobResult *back = wire_trip(res);
    nb_diagnosis_result e;
    assert_int_equal(nb_verifypb_diagnosis_from_pb(back, &e, &err), NB_OK);
    nb_report_env env;
    test_env(&env);
    json_object *j1 = nb_report_diagnosis_json(&d, &env), *j2 = nb_report_diagnosis_json(&e, &env);
    json_object_object_del(j1, "timestamp_utc");
    json_object_object_del(j2, "timestamp_utc");
    assert_string_equal(json_object_to_json_string(j1), json_object_to_json_string(j2));
    json_object_put(j1);
    json_object_put(j2);
    assert_memory_equal(d.dev_final.topk, e.dev_final.topk, sizeof(int32_t) * 5);
    assert_memory_equal(d.ref_final.logits, e.ref_final.logits, sizeof(float) * 5);
    nb_diagnosis_result_free(&e);
    Npubench__DiagnosisSummary *ds = back->diagnosis;
    back->diagnosis = NULL;
    assert_int_equal(nb_verifypb_diagnosis_from_pb(back, &e, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "JobResult.diagnosis"));
    back->diagnosis = ds;
    nb_diagnosis_result_free(&d);
    nb_jobpb_free(res);
    nb_jobpb_free(back);
}

/* ---- environment ---------------------------------------------------------------------- */

static void test_environment(void **state)
{
    (void)state;
    Npubench__Environment *e;
    nb_err err;
    assert_int_equal(nb_runenv_pb_new(NULL, "lab-7", "strix", &e, &err), NB_OK);
    assert_string_equal(e->board, "lab-7");
    assert_string_equal(e->board_type, "strix");
    assert_string_equal(e->npubench_version, NB_VERSION);
    assert_string_equal(e->npubench_commit, nb_commit());
    assert_true(strlen(e->cpu_info) > 0);
    assert_true(strlen(e->kernels_isa) > 0);
    Npubench__JobResult *res = nb_jobpb_result_new();
    res->environment = e;
    Npubench__JobResult *back = wire_trip(res);
    nb_report_env env;
    nb_verifypb_env_to_report(back->environment, &env);
    assert_string_equal(env.board, "lab-7");
    assert_string_equal(env.isa, e->kernels_isa);
    nb_jobpb_free(res);
    nb_jobpb_free(back);
    char cpu[128];
    nb_runenv_cpu_model(cpu, sizeof cpu);
    assert_true(cpu[0] != '\0');
}

/* ---- the shared JobSpec validator ----------------------------------------------------- */

static void expect_invalid(const Npubench__JobSpec *s, const char *needle)
{
    nb_err err;
    nb_err_clear(&err);
    assert_int_equal(nb_job_validate_spec(s, &err), NB_EINVAL);
    if (!strstr(err.msg, needle))
        fail_msg("expected '%s' in: %s", needle, err.msg);
}

static void test_validate_spec(void **state)
{
    (void)state;
    Npubench__JobSpec s = NPUBENCH__JOB_SPEC__INIT;
    nb_err err;
    expect_invalid(&s, "JobSpec.kind");
    s.kind = NPUBENCH__JOB_KIND__VERIFY;
    assert_int_equal(nb_job_validate_spec(&s, &err), NB_OK);
    s.kind = 99;
    expect_invalid(&s, "JobSpec.kind 99");
    s.kind = NPUBENCH__JOB_KIND__RUN;
    s.n_tokens = 4097;
    expect_invalid(&s, "JobSpec.n_tokens 4097");
    s.n_tokens = -1;
    expect_invalid(&s, "JobSpec.n_tokens -1");
    s.n_tokens = 4;
    s.k = 21;
    expect_invalid(&s, "JobSpec.k 21");
    s.k = 5;
    s.reps = 101;
    expect_invalid(&s, "JobSpec.reps 101");
    s.reps = 2;
    s.max_prompts = -3;
    expect_invalid(&s, "JobSpec.max_prompts -3");
    s.max_prompts = 0;
    s.timeout_ms = -1;
    expect_invalid(&s, "JobSpec.timeout_ms");
    s.timeout_ms = 0;
    Npubench__Shard sh = NPUBENCH__SHARD__INIT;
    sh.prompt_begin = 3;
    sh.prompt_end = 3;
    s.shard = &sh;
    expect_invalid(&s, "JobSpec.shard");
    sh.prompt_end = 5;
    assert_int_equal(nb_job_validate_spec(&s, &err), NB_OK);
    s.max_prompts = 4;
    expect_invalid(&s, "JobSpec.shard");
    s.max_prompts = 0;
    s.shard = NULL;
    s.prompt = (char *)"bad \xff utf-8";
    expect_invalid(&s, "JobSpec.prompt");
    s.prompt = (char *)"fine";
    Npubench__KeyValue kv1 = NPUBENCH__KEY_VALUE__INIT, kv2 = NPUBENCH__KEY_VALUE__INIT;
    Npubench__KeyValue *kvs[2] = {&kv1, &kv2};
    kv1.key = (char *)"threads";
    kv1.value = (char *)"four";
    s.params = kvs;
    s.n_params = 1;
    expect_invalid(&s, "JobSpec.params threads 'four'");
    kv1.value = (char *)"4";
    assert_int_equal(nb_job_validate_spec(&s, &err), NB_OK);
    kv2.key = (char *)"threads";
    kv2.value = (char *)"2";
    s.n_params = 2;
    expect_invalid(&s, "duplicate");
    kv2.key = (char *)"";
    expect_invalid(&s, "JobSpec.params[1]: empty key");
    kv2.key = (char *)"chat";
    kv2.value = (char *)"3";
    expect_invalid(&s, "JobSpec.params chat '3'");
    kv2.value = (char *)"1";
    assert_int_equal(nb_job_validate_spec(&s, &err), NB_OK);
}

/* The one matching rule: wildcards on either side, backend exact, dtype case-insensitive, the
 * best deployment (first of equals); places by pin, board, board type and every tag. */
static int csv_has(const void *user, const char *tag)
{
    const char *l = user;
    size_t n = strlen(tag);
    for (const char *p = l; (p = strstr(p, tag)); p += n)
        if ((p == l || p[-1] == ',') && (p[n] == ',' || !p[n]))
            return 1;
    return 0;
}

static void test_matching(void **state)
{
    (void)state;
    const nb_job_dep deps[] = {
        {.model = "base", .backend = "cpu", .dtype = "bf16", .name = "b16"},
        {.model = "instruct", .backend = "cpu", .dtype = "q4_1", .name = "smol-q4"},
        {.model = "models/SmolLM2-135M-Instruct.Q4_1.gguf", .backend = "exec", .dtype = "*"},
    };
    nb_job_dep want = {.model = "instruct", .backend = NULL, .dtype = NULL, .name = NULL};
    int score;
    assert_int_equal(nb_job_dep_pick(&want, deps, 3, &score), 1); /* 3 (exact) beats 2 */
    assert_int_equal(score, 3);
    want = (nb_job_dep){.model = "instruct", .backend = "cpu", .dtype = "BF16", .name = NULL};
    assert_int_equal(nb_job_dep_pick(&want, deps, 3, &score), 0); /* the same model, bf16 */
    assert_int_equal(score, 2);
    /* backend names are exact */
    want = (nb_job_dep){.model = "instruct", .backend = "CPU", .dtype = NULL, .name = NULL};
    assert_int_equal(nb_job_dep_pick(&want, deps, 3, NULL), -1);
    /* a deployment's name */
    want = (nb_job_dep){.model = "smol-q4", .backend = "*", .dtype = "*", .name = NULL};
    assert_int_equal(nb_job_dep_pick(&want, deps, 3, &score), 1);
    want = (nb_job_dep){.model = "SmolLM2-135M-Instruct", .backend = "exec", .dtype = "native"};
    assert_int_equal(nb_job_dep_pick(&want, deps, 3, &score), 2); /* "*" serves any dtype */
    /* a deployments file's declared names: mlir-air's model key names the entry */
    const char *const al[] = {"llama32_1b", "llama32_1b_q4nx"};
    const nb_job_dep air = {.model = "Llama-3.2-1B-Instruct", .backend = "exec", .dtype = "bf16",
                            .aliases = al, .n_aliases = 2};
    want = (nb_job_dep){.model = "LLAMA32_1B"};
    assert_int_equal(nb_job_dep_match(&want, &air), 2);
    want = (nb_job_dep){.model = "llama32_3b"};
    assert_int_equal(nb_job_dep_match(&want, &air), 0);
    want = (nb_job_dep){.model = "SmolLM2-135M-Instruct", .backend = "exec", .dtype = "native"};
    assert_int_equal(nb_job_dep_pick(&want, deps, 0, &score), -1);
    assert_int_equal(score, 0);
    /* the dtype as the enum where both sides carry it: it decides, the names do not */
    const int bf16 = nb_dtype_to_pb(NB_DTYPE_BF16), f32 = nb_dtype_to_pb(NB_DTYPE_F32);
    const nb_job_dep eng = {.model = "instruct", .backend = "cpu", .dtype = "bf16",
                            .dtype_id = bf16};
    want = (nb_job_dep){.model = "instruct", .dtype = "bf16", .dtype_id = f32};
    assert_int_equal(nb_job_dep_match(&want, &eng), 0);
    want = (nb_job_dep){.model = "instruct", .dtype = "label-only", .dtype_id = bf16};
    assert_true(nb_job_dep_match(&want, &eng) > 0);
    /* an exec entry's free label has no enum: its name is compared */
    want = (nb_job_dep){.model = "Llama-3.2-1B-Instruct", .dtype = "bf16", .dtype_id = bf16};
    assert_true(nb_job_dep_match(&want, &air) > 0);
    /* every engine dtype has a wire value, and back */
    for (nb_dtype d = NB_DTYPE_BF16; d <= NB_DTYPE_NATIVE; d++) {
        nb_dtype back;
        assert_int_not_equal(nb_dtype_to_pb(d), NPUBENCH__DTYPE__DTYPE_UNSPECIFIED);
        assert_int_equal(nb_dtype_from_pb(nb_dtype_to_pb(d), &back), 0);
        assert_int_equal(back, d);
    }
    nb_dtype none;
    assert_int_equal(nb_dtype_from_pb(NPUBENCH__DTYPE__DTYPE_UNSPECIFIED, &none), -1);

    const nb_job_host h = {"w1", "board-a", "npu4", csv_has, "lab,nightly"};
    char why[128];
    nb_job_place p = {NULL, NULL, NULL, NULL};
    assert_true(nb_job_place_fits(&p, &h, why, sizeof why));
    assert_string_equal(why, "");
    p = (nb_job_place){"w2", NULL, NULL, NULL};
    assert_false(nb_job_place_fits(&p, &h, why, sizeof why));
    assert_string_equal(why, "pinned to worker 'w2'");
    p = (nb_job_place){"w1", "board-b", NULL, NULL};
    assert_false(nb_job_place_fits(&p, &h, why, sizeof why));
    assert_string_equal(why, "needs board 'board-b'; worker 'w1' is on 'board-a'");
    p = (nb_job_place){NULL, "board-a", "npu6", NULL};
    assert_false(nb_job_place_fits(&p, &h, NULL, 0));
    p = (nb_job_place){NULL, NULL, "npu4", " nightly , lab"};
    assert_true(nb_job_place_fits(&p, &h, why, sizeof why));
    p = (nb_job_place){NULL, NULL, NULL, "nightly,perf"};
    assert_false(nb_job_place_fits(&p, &h, why, sizeof why));
    assert_string_equal(why, "needs tag 'perf'; worker 'w1' is not tagged so");
}

/* Typed params: read once, unset as -1, the keys from nb_job.h. */
static void test_params(void **state)
{
    (void)state;
    Npubench__KeyValue kv[3], *pkv[3] = {&kv[0], &kv[1], &kv[2]};
    for (int i = 0; i < 3; i++)
        npubench__key_value__init(&kv[i]);
    kv[0].key = NB_JOB_PARAM_THREADS, kv[0].value = "4";
    kv[1].key = NB_JOB_PARAM_LOCALIZE, kv[1].value = "divergence";
    kv[2].key = NB_JOB_PARAM_CHAT, kv[2].value = "0";
    Npubench__JobSpec s;
    npubench__job_spec__init(&s);
    s.kind = NPUBENCH__JOB_KIND__VERIFY;
    s.params = pkv;
    s.n_params = 3;
    nb_err err;
    assert_int_equal(nb_job_validate_spec(&s, &err), NB_OK);
    nb_job_params p;
    nb_job_params_read(&s, &p);
    assert_int_equal(p.threads, 4);
    assert_int_equal(p.chat, 0);
    assert_int_equal(p.max_seq, -1); /* inherits: the deployment's */
    assert_int_equal(p.warmup, -1);  /* verify takes no warmup */
    assert_int_equal(nb_job_param_or(p.warmup, 1), 1);
    assert_int_equal(nb_job_param_or(p.threads, 8), 4);
    assert_int_equal(p.localize, NB_LOCALIZE_DIVERGENCE);
    /* the kind's defaults, applied by the reader: verify's first 2 prompts, top-5, 32 tokens */
    assert_int_equal(p.max_prompts, NB_JOB_VERIFY_PROMPTS);
    assert_int_equal(p.k, NB_JOB_VERIFY_K);
    assert_int_equal(p.n_tokens, NB_JOB_VERIFY_N_TOKENS);
    assert_int_equal(p.strict, 0);
    assert_null(p.reference);
    kv[0].value = "1025"; /* the limit is nb_limits.h's */
    assert_int_equal(nb_job_validate_spec(&s, &err), NB_EINVAL);
    assert_string_equal(err.msg, "JobSpec.params threads '1025': must be an integer 0..1024");
}

/* Every kind's descriptor: each parameter has a row with a limit, a default within it (or
 * says what it inherits), help, and a key the reader and validation find; a value past the
 * limit is refused naming the field and the limit; the default is what the reader applies. */
static void test_kind_descriptors(void **state)
{
    (void)state;
    size_t n_kinds = 0;
    assert_false(nb_job_kind_is(0, NB_JOB_FAMILY_PERFORMANCE)); /* no kind, no family */
    for (size_t i = 0; nb_job_kind_at(i); i++, n_kinds++) {
        const nb_job_kind_desc *d = nb_job_kind_at(i);
        assert_ptr_equal(nb_job_kind_desc_of(d->kind), d);
        assert_int_equal(nb_job_kind_parse(d->name), d->kind);
        assert_non_null(d->family);
        /* one of the families the printers, JUnit, matrix and traces are keyed by */
        static const char *const families[] = {NB_JOB_FAMILY_VERIFY, NB_JOB_FAMILY_DIAGNOSIS,
                                               NB_JOB_FAMILY_PERFORMANCE, NB_JOB_FAMILY_HEALTH};
        int of = 0;
        for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
            of += !strcmp(d->family, families[f]);
            assert_int_equal(nb_job_kind_is(d->kind, families[f]),
                             !strcmp(d->family, families[f]));
        }
        assert_int_equal(of, 1);
        assert_string_equal(nb_job_kind_family(d->name), d->family);
        assert_non_null(d->stores);
        assert_non_null(d->help);
        assert_non_null(d->params);
        for (const nb_job_kind_param *kp = d->params; kp->p; kp++) {
            const nb_job_param_desc *p = kp->p;
            print_message("%s %s\n", d->name, p->key);
            assert_ptr_equal(nb_job_param_find(p->key), p);
            assert_non_null(p->help);
            if (p->type == NB_JOB_PT_TEXT)
                continue;
            assert_true(p->lo <= p->hi);
            assert_true(p->hi > 0); /* a limit, not an open range */
            if (!kp->inherit) {
                assert_true(kp->dflt >= p->lo && kp->dflt <= p->hi);
                if (p->in_spec) /* 0 is "the kind's default" on the wire */
                    assert_true(kp->dflt > 0);
            }
            if (p->type == NB_JOB_PT_ENUM) {
                long n = 0;
                while (p->names[n])
                    n++;
                assert_int_equal(p->hi, n - 1);
            }
            /* the reader applies the default of an unset parameter */
            Npubench__JobSpec s;
            npubench__job_spec__init(&s);
            s.kind = d->kind;
            nb_job_params jp;
            nb_job_params_read(&s, &jp);
            long got = *(const long *)((const char *)&jp + p->field);
            assert_int_equal(got, kp->inherit ? (p->in_spec ? 0 : -1) : kp->dflt);
            /* one past the limit is refused, naming the field and the limit */
            Npubench__KeyValue kv, *pkv = &kv, *slot[1];
            char buf[32], want[96];
            nb_err err;
            if (p->type == NB_JOB_PT_ENUM) {
                npubench__key_value__init(&kv);
                kv.key = (char *)p->key;
                kv.value = "bogus";
                s.params = &pkv;
                s.n_params = 1;
                snprintf(want, sizeof want, "JobSpec.params %s 'bogus': expected ", p->key);
            } else {
                s.params = slot;
                nb_job_param_set(&s, p, p->hi + 1, &kv, buf, sizeof buf);
                if (p->in_spec)
                    snprintf(want, sizeof want, "JobSpec.%s %ld: must be %ld..%ld", p->key,
                             p->hi + 1, p->lo, p->hi);
                else
                    snprintf(want, sizeof want, "JobSpec.params %s '%ld': must be an integer "
                             "%ld..%ld", p->key, p->hi + 1, p->lo, p->hi);
            }
            assert_int_equal(nb_job_validate_spec(&s, &err), NB_EINVAL);
            if (strncmp(err.msg, want, strlen(want)))
                fail_msg("%s %s: '%s' does not start '%s'", d->name, p->key, err.msg, want);
        }
    }
    assert_int_equal(n_kinds, 6);
    assert_null(nb_job_kind_at(n_kinds));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_round_trip),  cmocka_unit_test(test_verify_shard_merge),
        cmocka_unit_test(test_verify_hostile),     cmocka_unit_test(test_run_round_trip),
        cmocka_unit_test(test_profile_round_trip), cmocka_unit_test(test_diagnosis_round_trip),
        cmocka_unit_test(test_environment),        cmocka_unit_test(test_validate_spec),
        cmocka_unit_test(test_matching),           cmocka_unit_test(test_params),
        cmocka_unit_test(test_kind_descriptors),
    };
    return tu_run_group(tests, NULL, NULL);
}
