/* test_localize: a failing gate arrives localized (issue 14), checked on the real model with the
 * engine's fault switches, and nb_diagnosis against the committed HF hidden states (issue 15). */
#include "testutil.h"

#include <math.h>

#include "nb_diagnosis.h"
#include "nb_diagnosis_run.h"
#include "nb_fault.h"
#include "nb_generate.h"
#include "nb_jobpb.h"
#include "nb_localize.h"
#include "nb_localize_run.h"
#include "nb_trace.h"
#include "nb_verify.h"
#include "nb_verify_run.h"
#include "nb_verifypb.h"

/* The layer the mlp_layer fault corrupts here: one in the middle, so layers on both sides
 * of it are checked. */
#define FAULT_LAYER 7

/* A deployment of the default model set up under NPUBENCH_FAULT=fault (NULL: none). The
 * engine reads the switch at setup only, so it is cleared again at once. */
static nb_deploy *open_dtype(const char *fault, nb_dtype dtype)
{
    tu_require_model();
    if (fault)
        setenv("NPUBENCH_FAULT", fault, 1);
    else
        unsetenv("NPUBENCH_FAULT");
    nb_deploy_spec s;
    nb_deploy_spec_default(&s);
    snprintf(s.model, sizeof s.model, "instruct");
    s.threads = 2;
    s.dtype = dtype;
    nb_deploy *d = NULL;
    nb_err err = {0};
    nb_code rc = nb_deploy_open(&s, &d, &err);
    unsetenv("NPUBENCH_FAULT");
    if (rc)
        print_error("deploy: %s\n", err.msg);
    assert_int_equal(rc, NB_OK);
    return d;
}

static nb_deploy *open_with_fault(const char *fault)
{
    return open_dtype(fault, NB_DTYPE_BF16);
}

/* verify on the first prompt of the instruct set, n_tokens steps. */
static void verify_one(nb_deploy *d, int n_tokens, nb_verify_result *r)
{
    nb_verify_opts o = {0};
    o.max_prompts = 1;
    o.n_tokens = n_tokens;
    nb_err err = {0};
    nb_code rc = nb_verify_run(d, &o, r, &err);
    if (rc)
        print_error("verify: %s\n", err.msg);
    assert_int_equal(rc, NB_OK);
    assert_int_equal(r->n, 1);
}

static void print_loc(const nb_localization *l)
{
    print_message("localization: %s | %s\n", l->summary, l->note);
    for (int i = 0; i < l->n_layers && l->layers; i++)
        print_message("  L%-2d attn %.5f mlp %.5f\n", i, l->layers[i].cos_attn,
                      l->layers[i].cos_mlp);
    print_message("  final %.5f\n", l->final_cos);
}

/* Every state before `upto` (layer, and within it attention before MLP) at or above the
 * threshold: the clean part of the network follows HF's hidden states. */
static void assert_clean_before(const nb_localization *l, int upto_layer, int upto_mlp)
{
    for (int i = 0; i < upto_layer; i++) {
        assert_true(l->layers[i].cos_attn >= NB_LOC_COS_THRESHOLD);
        assert_true(l->layers[i].cos_mlp >= NB_LOC_COS_THRESHOLD);
    }
    if (upto_mlp)
        assert_true(l->layers[upto_layer].cos_attn >= NB_LOC_COS_THRESHOLD);
}

/* The kv_offset fault (decode writes K/V one slot late into a poisoned cache): the gate fails
 * at step 1 and the localization names the KV cache / decode path at step 1, with the
 * prefill's layers clean against HF's. */
static void test_kv_offset_localized_to_kv_cache_step_1(void **s)
{
    (void)s;
    nb_deploy *d = open_with_fault("kv_offset");
    nb_verify_result r;
    verify_one(d, 4, &r);
    const nb_verify_record *v = &r.recs[0];
    assert_int_equal(v->gate.status, NB_GATE_FAIL);
    assert_int_equal(v->gate.divergence, 1);
    const nb_localization *l = &v->loc;
    print_loc(l);
    assert_true(l->present);
    assert_string_equal(l->source, "engine");
    assert_string_equal(l->verdict, "kv_cache");
    assert_int_equal(l->kv, NB_LOC_KV_FAULT);
    assert_int_equal(l->kv_first_bad, 1);
    assert_int_equal(l->kv_steps, 1);
    assert_non_null(strstr(l->summary, "KV cache / decode path"));
    assert_non_null(strstr(l->summary, "decode step 1"));
    /* the cache-free prefill is the clean path: every layer follows HF at step 0 */
    assert_int_equal(l->layers_status, NB_LOC_LAYERS_CLEAN);
    assert_int_equal(l->step, 0);
    assert_int_equal(l->first_layer, -1);
    assert_clean_before(l, l->n_layers, 0);
    nb_verify_result_free(&r);
    nb_deploy_close(d);
}

/* mlp_layer:N corrupts layer N's down projection: the localization names layer N and its
 * MLP; every state before it, and layer N's attention, follow HF's. nb_diagnosis (issue 15)
 * sees the same drop against the committed diagnosis trace. */
static void test_mlp_fault_localized_to_layer_and_mlp(void **s)
{
    (void)s;
    char fault[32];
    snprintf(fault, sizeof fault, "mlp_layer:%d", FAULT_LAYER);
    nb_deploy *d = open_with_fault(fault);
    nb_verify_result r;
    verify_one(d, 4, &r);
    const nb_verify_record *v = &r.recs[0];
    assert_int_equal(v->gate.status, NB_GATE_FAIL);
    const nb_localization *l = &v->loc;
    print_loc(l);
    assert_true(l->present);
    assert_string_equal(l->verdict, "layer");
    assert_int_equal(l->layers_status, NB_LOC_LAYERS_FAULT);
    assert_int_equal(l->first_layer, FAULT_LAYER);
    assert_string_equal(l->sub_block, "mlp");
    assert_true(l->layers[FAULT_LAYER].cos_mlp < NB_LOC_COS_THRESHOLD);
    assert_clean_before(l, FAULT_LAYER, 1);
    /* both paths carry the same corrupted weights: prefill and decode still agree */
    assert_int_not_equal(l->kv, NB_LOC_KV_FAULT);
    char want[64];
    snprintf(want, sizeof want, "layer %d mlp", FAULT_LAYER);
    assert_non_null(strstr(l->summary, want));
    nb_verify_result_free(&r);

    nb_diagnosis_result dg;
    nb_err err = {0};
    assert_int_equal(nb_diagnosis_run(d, NULL, NULL, NULL, NULL, &dg, &err), NB_OK);
    for (int i = 0; i < FAULT_LAYER; i++)
        assert_true(dg.layers[i].s.min >= NB_LOC_COS_THRESHOLD);
    print_message("diagnosis under the fault: L%d min cos %.4f\n", FAULT_LAYER,
                  dg.layers[FAULT_LAYER].s.min);
    assert_true(dg.layers[FAULT_LAYER].s.min < NB_LOC_COS_THRESHOLD);
    nb_diagnosis_result_free(&dg);
    nb_deploy_close(d);
}

/* The clean engine: nb_diagnosis's per-layer cosines against HF's committed hidden states are
 * above the threshold at every layer and position (issue 15), and a localization of a
 * pretended divergence finds the decode path and every layer clean, then labels a reference
 * margin inside the bf16 band a near tie. */
static void test_clean_engine_follows_hf(void **s)
{
    (void)s;
    nb_deploy *d = open_with_fault(NULL);
    nb_diagnosis_result dg;
    nb_err err = {0};
    assert_int_equal(nb_diagnosis_run(d, NULL, NULL, NULL, NULL, &dg, &err), NB_OK);
    double worst = 1.0;
    for (int i = 0; i < dg.n_layers; i++)
        worst = fmin(worst, dg.layers[i].s.min);
    print_message("clean diagnosis: worst per-position cosine %.5f\n", worst);
    assert_true(worst >= NB_LOC_COS_THRESHOLD);
    nb_diagnosis_result_free(&dg);

    nb_trace *tr = NULL;
    nb_prompts ps;
    char ppath[1024];
    nb_verify_default_prompts("instruct", ppath, sizeof ppath);
    assert_int_equal(nb_prompts_load(ppath, &ps, &err), NB_OK);
    assert_int_equal(nb_trace_find(nb_verify_default_refdir(), d->model_sha256, ps.sha256, 0, &tr,
                                   &err),
                     NB_OK);
    nb_prompts_free(&ps);
    const nb_trace_prompt *tp = &tr->prompts[0];
    assert_true(tp->n_states >= 1); /* the committed trace carries them */
    nb_gen g;
    nb_gen_opts go = {.n_tokens = 6, .k = tr->k};
    assert_int_equal(nb_generate(d, tp->ids, tp->n_ids, &go, &g, &err), NB_OK);
    /* a divergence at step 5 as if the tokens had differed there */
    nb_gate_result gr;
    nb_gate_check(g.steps, 5, tp->steps, 5, tr->k, &gr);
    gr.status = NB_GATE_FAIL;
    gr.divergence = 5;
    nb_localization l;
    assert_int_equal(nb_localize_run(d, tp->ids, tp->n_ids, g.steps, tr->k, &gr, tp, &l, &err),
                     NB_OK);
    print_loc(&l);
    print_message("clean decode vs cache-free prefill: largest top-k logit difference %.4f\n",
                  l.kv_max_diff);
    assert_int_equal(l.kv, NB_LOC_KV_CLEAN);
    assert_int_equal(l.kv_steps, 5);
    assert_true(l.kv_max_diff <= NB_LOC_KV_TOL);
    assert_int_equal(l.layers_status, NB_LOC_LAYERS_CLEAN);
    assert_clean_before(&l, l.n_layers, 0);
    assert_true(l.final_cos >= NB_LOC_COS_THRESHOLD);
    assert_string_equal(l.verdict, "unlocalized");
    /* the same with a reference margin of one bf16 step at 17: a near tie */
    gr.ref_margin = 0.125;
    gr.ref_margin_beyond = 0;
    nb_localize_finish(&l, &gr);
    assert_string_equal(l.verdict, "near_tie");
    assert_non_null(strstr(l.summary, "near tie"));
    nb_localize_free(&l);

    /* a reference without hidden states (an older trace): layers are not compared, and the
     * result says why */
    nb_trace_prompt bare = *tp;
    bare.n_states = 0;
    assert_int_equal(nb_localize_run(d, tp->ids, tp->n_ids, g.steps, tr->k, &gr, &bare, &l, &err),
                     NB_OK);
    assert_int_equal(l.layers_status, NB_LOC_LAYERS_NONE);
    assert_null(l.layers);
    assert_non_null(strstr(l.note, "no hidden states"));
    nb_localize_free(&l);
    nb_gen_free(&g);
    nb_trace_free(tr);
    nb_deploy_close(d);
}

/* A real near tie, held: the f32 engine on the instruct set's second prompt takes token 624
 * at step 15 where HF's bf16 reference takes 260, and HF's own logits for the two are equal
 * in bf16 (margin 0). The gate passes (each is in the other's top-5); asked to localize
 * divergences, the worker finds the decode path and every layer clean and says near tie. */
static void test_real_near_tie_labelled(void **s)
{
    (void)s;
    nb_deploy *d = open_dtype(NULL, NB_DTYPE_F32);
    nb_verify_opts o = {0};
    o.first = 1;
    o.count = 1;
    o.n_tokens = 16;
    o.localize = NB_LOCALIZE_DIVERGENCE;
    nb_verify_result r;
    nb_err err = {0};
    nb_code rc = nb_verify_run(d, &o, &r, &err);
    if (rc)
        print_error("verify: %s\n", err.msg);
    assert_int_equal(rc, NB_OK);
    assert_int_equal(r.n, 1);
    const nb_verify_record *v = &r.recs[0];
    assert_int_equal(v->index, 1);
    assert_int_equal(v->gate.status, NB_GATE_PASS);
    assert_int_equal(v->gate.divergence, 15);
    const nb_localization *l = &v->loc;
    print_loc(l);
    assert_true(l->present);
    assert_true(l->near_tie);
    assert_true(l->ref_margin >= 0.0 && l->ref_margin <= NB_GATE_NEAR_TIE);
    assert_int_equal(l->kv, NB_LOC_KV_CLEAN);
    assert_int_equal(l->kv_steps, 15);
    assert_int_equal(l->layers_status, NB_LOC_LAYERS_CLEAN);
    assert_string_equal(l->verdict, "near_tie");
    assert_non_null(strstr(l->summary, "near tie"));
    nb_verify_result_free(&r);
    nb_deploy_close(d);
}

/* A verdict can only come from the parts: a real fault outranks a near tie. */
static void test_verdict_order(void **s)
{
    (void)s;
    nb_gate_result g = {.divergence = 3, .ref_margin = 0.0625, .status = NB_GATE_FAIL};
    nb_localization l = {.present = 1, .kv = NB_LOC_KV_FAULT, .kv_first_bad = 2, .kv_steps = 3,
                         .layers_status = NB_LOC_LAYERS_CLEAN, .step = 0, .first_layer = -1};
    nb_localize_finish(&l, &g);
    assert_string_equal(l.verdict, "kv_cache");
    assert_true(l.near_tie);
    l.kv = NB_LOC_KV_CLEAN;
    l.layers_status = NB_LOC_LAYERS_FAULT;
    l.first_layer = 4;
    snprintf(l.sub_block, sizeof l.sub_block, "attention");
    nb_localize_finish(&l, &g);
    assert_string_equal(l.verdict, "layer");
    l.layers_status = NB_LOC_LAYERS_CLEAN;
    nb_localize_finish(&l, &g);
    assert_string_equal(l.verdict, "near_tie");
    g.ref_margin = 0.5; /* outside the band */
    nb_localize_finish(&l, &g);
    assert_string_equal(l.verdict, "unlocalized");
    g.ref_margin = 0.125;
    g.ref_margin_beyond = 1; /* the device token outside the reference top-k: no tie */
    nb_localize_finish(&l, &g);
    assert_string_equal(l.verdict, "unlocalized");
}

/* A localization survives the wire and JSON; out-of-range values off the network are refused. */
static void test_localization_round_trips(void **s)
{
    (void)s;
    nb_loc_layer layers[2] = {{0, 0.999, 0.5, 0.998, 0.7}, {1, 0.995, 1.5, 0.61, 40.0}};
    nb_localization l = {.present = 1, .kv = NB_LOC_KV_CLEAN, .kv_steps = 3, .kv_first_bad = -1,
                         .kv_max_diff = 0.0, .kv_tol = NB_LOC_KV_TOL,
                         .layers_status = NB_LOC_LAYERS_FAULT, .step = 0, .n_layers = 2,
                         .layers = layers, .first_layer = 1, .final_cos = 0.5,
                         .threshold = NB_LOC_COS_THRESHOLD, .ms = 12.5};
    snprintf(l.sub_block, sizeof l.sub_block, "mlp");
    snprintf(l.source, sizeof l.source, "engine");
    nb_gate_result g = {.divergence = 3, .ref_margin = NAN, .status = NB_GATE_FAIL};
    nb_localize_finish(&l, &g);

    nb_gate_step steps[4] = {{0}};
    nb_verify_record rec = {.index = 0, .prompt = "p", .gate = g, .dev = steps, .ref = steps,
                            .n_steps = 4, .dev_token_text = "", .ref_token_text = "",
                            .agreed_text = "", .dev_text = "", .ref_text = "", .loc = l};
    rec.gate.n_steps = 4;
    rec.gate.agreed = 3;
    nb_verify_result r = {.recs = &rec, .n = 1, .n_fail = 1, .status = NB_GATE_FAIL, .k = 1,
                          .n_tokens = 4};
    Npubench__JobResult *res = nb_jobpb_result_new();
    nb_err err = {0};
    assert_int_equal(nb_verifypb_verify_to_pb(&r, res, &err), NB_OK);
    nb_verify_result back;
    assert_int_equal(nb_verifypb_verify_from_pb(res, &back, &err), NB_OK);
    const nb_localization *b = &back.recs[0].loc;
    assert_true(b->present);
    assert_string_equal(b->verdict, "layer");
    assert_string_equal(b->summary, l.summary);
    assert_string_equal(b->sub_block, "mlp");
    assert_int_equal(b->first_layer, 1);
    assert_int_equal(b->n_layers, 2);
    assert_true(b->layers[1].cos_mlp == 0.61 && b->layers[1].max_abs_mlp == 40.0);
    assert_true(isnan(b->ref_margin));
    nb_verify_result_free(&back);

    /* JSON (report files, the history column) */
    json_object *o = nb_localize_json(&l);
    nb_localization j;
    assert_int_equal(nb_localize_from_json(o, &j, &err), NB_OK);
    assert_string_equal(j.verdict, "layer");
    assert_int_equal(j.kv, NB_LOC_KV_CLEAN);
    assert_int_equal(j.n_layers, 2);
    assert_true(j.layers[0].cos_attn == 0.999);
    assert_true(isnan(j.ref_margin)); /* written as null */
    nb_localize_free(&j);
    json_object_put(o);

    res->gates[0]->localization->kv = 7;
    assert_int_equal(nb_verifypb_verify_from_pb(res, &back, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "localization"));
    res->gates[0]->localization->kv = 1;
    res->gates[0]->localization->first_layer = -5;
    assert_int_equal(nb_verifypb_verify_from_pb(res, &back, &err), NB_EINVAL);
    nb_jobpb_free(res);
}

/* Per-prompt hidden states in a trace: optional (older traces load without them), and a
 * malformed one is an error naming the field. */
static void test_trace_states_optional_and_checked(void **s)
{
    (void)s;
    char path[1024];
    snprintf(path, sizeof path, "%s/t.json", tu_group_tmp());
    const char *head =
        "{\"format\": \"npubench-hf-trace/1\", \"provenance\": {\"model_sha256\": "
        "\"b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53\"}, "
        "\"n_tokens\": 1, \"k\": 1, \"prompts\": [{\"text\": \"a\", \"prompt_ids\": [1], "
        "\"steps\": [{\"token\": 2, \"topk_ids\": [2], \"topk_logits\": [1.0]}]%s}]}";
    const char *cases[][2] = {
        {"", NULL},
        /* one layer, dim 2: attn/mlp 4 bytes, final_norm 4 bytes; 1.0 = 0x3f80 */
        {", \"hidden\": {\"encoding\": \"bf16le-base64\", \"n_layers\": 1, \"dim\": 2, "
         "\"positions\": [{\"step\": 0, \"attn\": \"gD+APw==\", \"mlp\": \"gD+APw==\", "
         "\"final_norm\": \"gD+APw==\"}]}",
         NULL},
        {", \"hidden\": {\"encoding\": \"bf16le-base64\", \"n_layers\": 1, \"dim\": 2, "
         "\"positions\": [{\"step\": 0, \"attn\": \"gD8=\", \"mlp\": \"gD+APw==\", "
         "\"final_norm\": \"gD+APw==\"}]}",
         "prompts[0].hidden.positions[0].attn has 2 bytes, expected 4"},
        {", \"hidden\": {\"encoding\": \"f32le-base64\", \"n_layers\": 1, \"dim\": 2, "
         "\"positions\": []}",
         "prompts[0].hidden.encoding"},
        {", \"hidden\": {\"encoding\": \"bf16le-base64\", \"n_layers\": 1, \"dim\": 2, "
         "\"positions\": [{\"step\": 1, \"attn\": \"gD+APw==\", \"mlp\": \"gD+APw==\", "
         "\"final_norm\": \"gD+APw==\"}]}",
         "step"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, head, cases[i][0]);
        fclose(f);
        nb_trace *t = NULL;
        nb_err err = {0};
        nb_code rc = nb_trace_load(path, &t, &err);
        if (!cases[i][1]) {
            assert_int_equal(rc, NB_OK);
            assert_int_equal(t->prompts[0].n_states, i == 0 ? 0 : 1);
            if (i == 1) {
                assert_true(t->prompts[0].states[0].attn[1] == 1.0f);
                assert_true(t->prompts[0].states[0].final[0] == 1.0f);
            }
            nb_trace_free(t);
        } else {
            assert_int_equal(rc, NB_EFORMAT);
            print_message("case %zu: %s\n", i, err.msg);
            assert_non_null(strstr(err.msg, cases[i][1]));
        }
    }
}

/* NPUBENCH_FAULT entries with a number: the value, absence, and a malformed one told apart. */
static void test_fault_arg(void **s)
{
    (void)s;
    long v = -1;
    setenv("NPUBENCH_FAULT", "kv_offset,mlp_layer:12", 1);
    assert_int_equal(nb_fault_arg("mlp_layer", &v), 1);
    assert_int_equal(v, 12);
    assert_true(nb_fault("kv_offset"));
    assert_false(nb_fault("mlp_layer")); /* listed with a value, not as a plain point */
    setenv("NPUBENCH_FAULT", "mlp_layer:x", 1);
    assert_int_equal(nb_fault_arg("mlp_layer", &v), -1);
    setenv("NPUBENCH_FAULT", "mlp_layer:", 1);
    assert_int_equal(nb_fault_arg("mlp_layer", &v), -1);
    setenv("NPUBENCH_FAULT", "mlp_layers:3", 1);
    assert_int_equal(nb_fault_arg("mlp_layer", &v), 0);
    unsetenv("NPUBENCH_FAULT");
    assert_int_equal(nb_fault_arg("mlp_layer", &v), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fault_arg),
        cmocka_unit_test(test_verdict_order),
        cmocka_unit_test(test_localization_round_trips),
        cmocka_unit_test(test_trace_states_optional_and_checked),
        cmocka_unit_test(test_kv_offset_localized_to_kv_cache_step_1),
        cmocka_unit_test(test_mlp_fault_localized_to_layer_and_mlp),
        cmocka_unit_test(test_clean_engine_follows_hf),
        cmocka_unit_test(test_real_near_tie_labelled),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
