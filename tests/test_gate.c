/* test_gate: the top-k gate's decision table, case by case.
 * Each case builds device and reference traces by hand and checks status, step and ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "testutil.h"

#include "nb_gate.h"
#include "nb_kernels.h"
#include "nb_report.h"
#include "nb_trace.h"
#include "nb_verify.h"
#include "testutil.h"

#define K 5

/* A step choosing `tok` with top-5 = tok followed by others. */
static nb_gate_step step(int32_t tok, int32_t a, int32_t b, int32_t c, int32_t d)
{
    nb_gate_step s;
    memset(&s, 0, sizeof s);
    s.token = tok;
    int32_t ids[K] = {tok, a, b, c, d};
    for (int i = 0; i < K; i++) {
        s.topk[i] = ids[i];
        s.logits[i] = 10.0f - (float)i;
    }
    return s;
}

static void fill(nb_gate_step *dst, int n, int32_t base)
{
    for (int i = 0; i < n; i++)
        dst[i] = step(base + i, 900, 901, 902, 903);
}

static void test_all_match(void **state)
{
    (void)state;
    nb_gate_step dev[32], ref[32];
    fill(dev, 32, 100);
    fill(ref, 32, 100);
    nb_gate_result r;
    nb_gate_check(dev, 32, ref, 32, K, &r);
    assert_int_equal(r.status, NB_GATE_PASS);
    assert_int_equal(r.divergence, -1);
    assert_int_equal(r.agreed, 32);
    assert_int_equal(r.n_steps, 32);
}

static void test_divergence_in_band(void **state)
{
    (void)state;
    nb_gate_step dev[32], ref[32];
    fill(dev, 32, 100);
    fill(ref, 32, 100);
    /* step 7: device picks 555, the reference's runner-up; the reference's
     * choice 107 is the device's second. */
    ref[7] = step(107, 555, 1, 2, 3);
    dev[7] = step(555, 107, 4, 5, 6);
    /* after the divergence anything goes: nothing more is checked */
    for (int i = 8; i < 32; i++)
        dev[i] = step(7000 + i, 1, 2, 3, 4);
    nb_gate_result r;
    nb_gate_check(dev, 32, ref, 32, K, &r);
    assert_int_equal(r.status, NB_GATE_PASS);
    assert_int_equal(r.divergence, 7);
    assert_int_equal(r.agreed, 7);
    assert_int_equal(r.dev_token, 555);
    assert_int_equal(r.ref_token, 107);
    assert_int_equal(r.dev_rank_in_ref, 1);
    assert_int_equal(r.ref_rank_in_dev, 1);
    assert_string_equal(r.reason, "");
}

static void test_device_token_not_in_ref(void **state)
{
    (void)state;
    nb_gate_step dev[32], ref[32];
    fill(dev, 32, 100);
    fill(ref, 32, 100);
    ref[3] = step(103, 1, 2, 3, 4);
    dev[3] = step(999, 103, 5, 6, 7); /* 103 is in the device set, 999 not in ref */
    nb_gate_result r;
    nb_gate_check(dev, 32, ref, 32, K, &r);
    assert_int_equal(r.status, NB_GATE_FAIL);
    assert_int_equal(r.divergence, 3);
    assert_int_equal(r.dev_rank_in_ref, -1);
    assert_int_equal(r.ref_rank_in_dev, 1);
    assert_non_null(strstr(r.reason, "device token 999 not in reference top-5"));
}

static void test_ref_token_not_in_device(void **state)
{
    (void)state;
    nb_gate_step dev[32], ref[32];
    fill(dev, 32, 100);
    fill(ref, 32, 100);
    ref[12] = step(112, 444, 1, 2, 3);
    dev[12] = step(444, 5, 6, 7, 8); /* 444 in ref top-5, but 112 missing on device */
    nb_gate_result r;
    nb_gate_check(dev, 32, ref, 32, K, &r);
    assert_int_equal(r.status, NB_GATE_FAIL);
    assert_int_equal(r.divergence, 12);
    assert_int_equal(r.dev_rank_in_ref, 1);
    assert_int_equal(r.ref_rank_in_dev, -1);
    assert_non_null(strstr(r.reason, "reference token 112 not in device top-5"));
}

static void test_divergence_at_step0(void **state)
{
    (void)state;
    nb_gate_step dev[32], ref[32];
    fill(dev, 32, 100);
    fill(ref, 32, 100);
    dev[0] = step(50, 1, 2, 3, 4);
    nb_gate_result r;
    nb_gate_check(dev, 32, ref, 32, K, &r);
    assert_int_equal(r.status, NB_GATE_FAIL);
    assert_int_equal(r.divergence, 0);
    assert_int_equal(r.agreed, 0);
    /* the same divergence inside the band passes */
    dev[0] = step(50, 100, 2, 3, 4);
    ref[0] = step(100, 7, 8, 9, 50);
    nb_gate_check(dev, 32, ref, 32, K, &r);
    assert_int_equal(r.status, NB_GATE_PASS);
    assert_int_equal(r.divergence, 0);
    assert_int_equal(r.dev_rank_in_ref, 4);
}

static void test_only_first_divergence_checked(void **state)
{
    (void)state;
    nb_gate_step dev[8], ref[8];
    fill(dev, 8, 100);
    fill(ref, 8, 100);
    ref[2] = step(102, 77, 1, 2, 3);
    dev[2] = step(77, 102, 1, 2, 3);
    dev[5] = step(12345, 1, 2, 3, 4); /* would fail, but is after the divergence */
    nb_gate_result r;
    nb_gate_check(dev, 8, ref, 8, K, &r);
    assert_int_equal(r.status, NB_GATE_PASS);
    assert_int_equal(r.divergence, 2);
}

static void test_k_limits_the_band(void **state)
{
    (void)state;
    nb_gate_step dev[4], ref[4];
    fill(dev, 4, 100);
    fill(ref, 4, 100);
    ref[1] = step(101, 1, 2, 3, 77); /* device token at rank 4 */
    dev[1] = step(77, 101, 1, 2, 3);
    nb_gate_result r;
    nb_gate_check(dev, 4, ref, 4, 5, &r);
    assert_int_equal(r.status, NB_GATE_PASS);
    nb_gate_check(dev, 4, ref, 4, 3, &r);
    assert_int_equal(r.status, NB_GATE_FAIL);
}

/* Traces of different lengths fail whichever side is longer, with the reason naming both;
 * the steps they share all agree. */
static void check_length_mismatch(int n_dev, int n_ref)
{
    nb_gate_step dev[32], ref[32];
    fill(dev, 32, 100);
    fill(ref, 32, 100);
    nb_gate_result r;
    nb_gate_check(dev, n_dev, ref, n_ref, K, &r);
    int shared = n_dev < n_ref ? n_dev : n_ref;
    char want[160];
    snprintf(want, sizeof want,
             "device produced %d steps, reference %d: traces must be the same length", n_dev,
             n_ref);
    assert_int_equal(r.status, NB_GATE_FAIL);
    assert_int_equal(r.divergence, -1);
    assert_int_equal(r.n_steps, shared);
    assert_int_equal(r.agreed, shared);
    assert_string_equal(r.reason, want);
}

static void test_length_mismatch_fails(void **state)
{
    (void)state;
    check_length_mismatch(20, 32); /* device stopped early */
    check_length_mismatch(32, 20); /* device ran past the reference */
    check_length_mismatch(0, 1);
    check_length_mismatch(1, 0);
}

/* Ties: the top-k both sides build orders equal logits by the smaller id,
 * so the greedy choice among tied logits is the smallest id. */
static void test_tied_logits(void **state)
{
    (void)state;
    float logits[10] = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.5f, 2.0f, -1.0f, 3.0f, 2.0f};
    int32_t ids[5];
    float vals[5];
    nb_topk_f32(logits, 10, 5, ids, vals);
    int32_t want[5] = {1, 2, 4, 8, 3};
    for (int i = 0; i < 5; i++)
        assert_int_equal(ids[i], want[i]);
    /* A device that breaks the tie the other way diverges at that step, and
     * the band still holds both tokens, so the gate passes. */
    nb_gate_step dev[1], ref[1];
    memset(dev, 0, sizeof dev);
    memset(ref, 0, sizeof ref);
    for (int i = 0; i < 5; i++) {
        ref[0].topk[i] = ids[i];
        dev[0].topk[i] = ids[i];
    }
    dev[0].topk[0] = 2;
    dev[0].topk[1] = 1;
    ref[0].token = ref[0].topk[0];
    dev[0].token = dev[0].topk[0];
    nb_gate_result r;
    nb_gate_check(dev, 1, ref, 1, K, &r);
    assert_int_equal(r.divergence, 0);
    assert_int_equal(r.status, NB_GATE_PASS);
}

static void test_topk_nan_and_all_equal(void **state)
{
    (void)state;
    float x[6] = {NAN, 0.0f, 0.0f, 0.0f, NAN, 0.0f};
    int32_t ids[3];
    float vals[3];
    nb_topk_f32(x, 6, 3, ids, vals);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ids[2], 3);
}

/* At a divergence the report gives the reference's margin between its top-1 and the
 * device's token, from the reference top-k logits, so a near tie shows as one. */
static void test_reference_margin(void **state)
{
    (void)state;
    nb_gate_step dev[4], ref[4];
    fill(dev, 4, 100);
    fill(ref, 4, 100);
    nb_gate_result r;
    nb_gate_check(dev, 4, ref, 4, K, &r);
    assert_true(isnan(r.ref_margin)); /* no divergence, no margin */
    /* step 2: a near tie in the reference (17.125 vs 17.0), the device took the other. */
    ref[2] = step(102, 555, 1, 2, 3);
    const float lg[K] = {17.125f, 17.0f, 14.75f, 13.0f, 12.875f};
    memcpy(ref[2].logits, lg, sizeof lg);
    dev[2] = step(555, 102, 4, 5, 6);
    nb_gate_check(dev, 4, ref, 4, K, &r);
    assert_int_equal(r.divergence, 2);
    assert_true(r.ref_margin == 0.125);
    assert_int_equal(r.ref_margin_beyond, 0);
    /* The device token outside the reference top-5: more than top-1 minus the 5th. */
    dev[2] = step(999, 102, 4, 5, 6);
    nb_gate_check(dev, 4, ref, 4, K, &r);
    assert_int_equal(r.status, NB_GATE_FAIL);
    assert_true(r.ref_margin == 4.25);
    assert_int_equal(r.ref_margin_beyond, 1);

    /* What the report prints for each. */
    nb_verify_record rec[2];
    memset(rec, 0, sizeof rec);
    nb_gate_step dev2[4];
    memcpy(dev2, dev, sizeof dev2);
    dev2[2] = step(555, 102, 4, 5, 6);
    nb_gate_check(dev2, 4, ref, 4, K, &rec[0].gate);
    rec[0].index = 0;
    rec[1].gate = r;
    rec[1].index = 1;
    nb_verify_result vr;
    memset(&vr, 0, sizeof vr);
    vr.recs = rec;
    vr.n = 2;
    vr.k = K;
    vr.n_tokens = 4;
    nb_report_env env;
    memset(&env, 0, sizeof env);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    nb_report_print_verify(f, &vr, &env);
    fclose(f);
    assert_non_null(strstr(buf, "prompt 0: PASS  diverge at step 2: device 555 (ref rank 1, "
                                "ref margin 0.125 (near tie)) vs reference 102"));
    /* not in the reference's top-k: no rank -1 printed, only how far below it is */
    assert_non_null(strstr(buf, "prompt 1: FAIL  diverge at step 2: device 999 "
                                "(ref margin > 4.250) vs reference 102"));
    free(buf);
}

/* The near-tie band is NB_GATE_NEAR_TIE_STEPS bf16 steps at the reference's top-1 logit:
 * the step doubles at each power of two, the band follows it, and a margin exactly at the
 * band is a tie while one just over it (one more step, or any amount for an fp32 reference)
 * is not. */
static void test_near_tie_band_in_bf16_steps(void **state)
{
    (void)state;
    assert_int_equal(NB_GATE_NEAR_TIE_STEPS, 2);
    assert_true(nb_gate_bf16_step(1.0) == 0x1p-7);
    assert_true(nb_gate_bf16_step(-1.0) == 0x1p-7);
    assert_true(nb_gate_bf16_step(15.99) == 0.0625);   /* [8, 16) */
    assert_true(nb_gate_bf16_step(16.0) == 0.125);     /* [16, 32) starts at 16 */
    assert_true(nb_gate_bf16_step(31.99) == 0.125);
    assert_true(nb_gate_bf16_step(32.0) == 0.25);      /* [32, 64) */
    assert_true(nb_gate_bf16_step(0.0) == 0x1p-133);   /* below the normal range */
    assert_true(nb_gate_bf16_step(NAN) == 0x1p-133);
    assert_true(nb_gate_near_tie_band(33.0) == 0.5);
    assert_true(nb_gate_near_tie_band(17.0) == 0.25);
    assert_true(nb_gate_near_tie_band(9.0) == 0.125);
    nb_gate_step dev[2], ref[2];
    fill(dev, 2, 100);
    fill(ref, 2, 100);
    ref[1] = step(101, 555, 1, 2, 3);
    dev[1] = step(555, 101, 4, 5, 6);
    struct {
        float top1, second;
        int tie;
    } cases[] = {
        {33.0f, 32.5f, 1},        /* 2 steps at 33: exactly the band */
        {33.0f, 32.75f, 1},       /* 1 step: under */
        {33.0f, 32.25f, 0},       /* 3 steps: over */
        {33.0f, 32.4999f, 0},     /* an fp32 reference just over */
        {17.0f, 16.75f, 1},       /* 2 steps at 17 (0.25) */
        {17.0f, 16.625f, 0},      /* 3 steps at 17 (0.375): what was a tie at 33 is not here */
        {9.0f, 8.875f, 1},        /* 2 steps at 9 (0.125) */
        {9.0f, 8.8125f, 0},       /* 3 steps at 9 (0.1875), under the old fixed 0.25 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const float lg[K] = {cases[i].top1, cases[i].second, 1.0f, 0.5f, 0.25f};
        memcpy(ref[1].logits, lg, sizeof lg);
        nb_gate_result r;
        nb_gate_check(dev, 2, ref, 2, K, &r);
        assert_int_equal(r.divergence, 1);
        assert_true(r.near_tie_band == nb_gate_near_tie_band(cases[i].top1));
        if (nb_gate_is_near_tie(&r) != cases[i].tie)
            fail_msg("case %zu: top-1 %g, second %g: near tie %d, expected %d", i,
                     cases[i].top1, cases[i].second, nb_gate_is_near_tie(&r), cases[i].tie);
        assert_int_equal(r.status, NB_GATE_PASS); /* the gate itself never reads the band */
    }
    /* beyond the top-k: never a tie, however small the gap to the k-th */
    dev[1] = step(999, 101, 4, 5, 6);
    const float lg[K] = {33.0f, 33.0f, 33.0f, 33.0f, 33.0f};
    memcpy(ref[1].logits, lg, sizeof lg);
    nb_gate_result r;
    nb_gate_check(dev, 2, ref, 2, K, &r);
    assert_int_equal(r.ref_margin_beyond, 1);
    assert_false(nb_gate_is_near_tie(&r));
}

/* A trace's dtype and device reach the report as the trace says them; a trace not in bf16
 * gets a warning naming its dtype and device, a bf16 one none. */
static void test_reference_dtype_device_reported(void **state)
{
    (void)state;
    nb_verify_result vr;
    memset(&vr, 0, sizeof vr);
    snprintf(vr.trace_dtype, sizeof vr.trace_dtype, "float32");
    snprintf(vr.trace_device, sizeof vr.trace_device, "cuda (NVIDIA H200)");
    char warn[300];
    assert_non_null(strstr(nb_verify_trace_warning(&vr, warn, sizeof warn),
                           "the reference is float32 on cuda (NVIDIA H200), not bfloat16"));
    nb_report_env env;
    memset(&env, 0, sizeof env);
    json_object *j = nb_report_verify_json(&vr, &env, "verify");
    json_object *c = NULL, *x = NULL;
    assert_true(json_object_object_get_ex(j, "config", &c) &&
                json_object_object_get_ex(c, "reference", &c));
    assert_true(json_object_object_get_ex(c, "dtype", &x));
    assert_string_equal(json_object_get_string(x), "float32");
    assert_true(json_object_object_get_ex(c, "device", &x));
    assert_string_equal(json_object_get_string(x), "cuda (NVIDIA H200)");
    assert_true(json_object_object_get_ex(c, "warning", &x));
    json_object_put(j);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    nb_report_print_verify(f, &vr, &env);
    fclose(f);
    assert_non_null(strstr(buf, "[verify] warning: the reference is float32 on cuda"));
    free(buf);
    snprintf(vr.trace_dtype, sizeof vr.trace_dtype, "bfloat16");
    assert_string_equal(nb_verify_trace_warning(&vr, warn, sizeof warn), "");
    j = nb_report_verify_json(&vr, &env, "verify");
    assert_true(json_object_object_get_ex(j, "config", &c) &&
                json_object_object_get_ex(c, "reference", &c));
    assert_false(json_object_object_get_ex(c, "warning", &x));
    json_object_put(j);
    /* a committed H200 trace: dtype and device from its provenance */
    char path[2048];
    const char *src = getenv("NB_SRC");
    snprintf(path, sizeof path, "%s/verify/references-h200/smollm2-instruct-fp32-sdpa.json",
             src && *src ? src : NB_SOURCE_DIR);
    nb_trace *t;
    nb_err err;
    assert_int_equal(nb_trace_load(path, &t, &err), NB_OK);
    assert_string_equal(t->dtype, "float32");
    assert_string_equal(t->device, "cuda (NVIDIA H200)");
    nb_trace_free(t);
    /* a committed CPU trace: its provenance says cpu */
    snprintf(path, sizeof path, "%s/verify/references/b179c9523d0e6a0f-f31be4262e898413.json",
             src && *src ? src : NB_SOURCE_DIR);
    assert_int_equal(nb_trace_load(path, &t, &err), NB_OK);
    assert_string_equal(t->device, "cpu");
    assert_string_equal(t->dtype, "bfloat16");
    nb_trace_free(t);
}

/* A trace records the CPU it was made on; the committed ones predate that and still load. */
static void test_trace_cpu_provenance(void **state)
{
    (void)state;
    char path[2048], tmp[2048];
    const char *src = getenv("NB_SRC");
    snprintf(path, sizeof path,
             "%s/verify/references/b179c9523d0e6a0f-310f18e97323f258.json",
             src && *src ? src : NB_SOURCE_DIR);
    nb_trace *t;
    nb_err err;
    assert_int_equal(nb_trace_load(path, &t, &err), NB_OK);
    assert_string_equal(t->cpu.model, "");
    assert_string_equal(t->cpu.capability, "");
    nb_trace_free(t);

    json_object *doc = json_object_from_file(path), *prov;
    assert_non_null(doc);
    assert_true(json_object_object_get_ex(doc, "provenance", &prov));
    json_object *cpu = json_object_new_object(), *flags = json_object_new_array();
    json_object_object_add(cpu, "model", json_object_new_string("Intel(R) Xeon(R) Gold 6448Y"));
    json_object_array_add(flags, json_object_new_string("avx2"));
    json_object_array_add(flags, json_object_new_string("avx512_bf16"));
    json_object_array_add(flags, json_object_new_string("amx_bf16"));
    json_object_object_add(cpu, "flags", flags);
    json_object_object_add(cpu, "torch_capability", json_object_new_string("AVX512"));
    json_object_object_add(prov, "cpu", cpu);
    snprintf(tmp, sizeof tmp, "%s/nbtest-trace-cpu-%d.json", tu_env("TMPDIR", "/tmp"),
             (int)getpid());
    assert_int_equal(json_object_to_file(tmp, doc), 0);
    json_object_put(doc);
    assert_int_equal(nb_trace_load(tmp, &t, &err), NB_OK);
    unlink(tmp);
    assert_string_equal(t->cpu.model, "Intel(R) Xeon(R) Gold 6448Y");
    assert_string_equal(t->cpu.flags, "avx2 avx512_bf16 amx_bf16");
    assert_string_equal(t->cpu.capability, "AVX512");
    /* And the report says so. */
    nb_verify_result vr;
    memset(&vr, 0, sizeof vr);
    vr.trace_cpu = t->cpu;
    nb_trace_free(t);
    nb_report_env env;
    memset(&env, 0, sizeof env);
    json_object *j = nb_report_verify_json(&vr, &env, "verify");
    json_object *c = NULL;
    assert_true(json_object_object_get_ex(j, "config", &c) &&
                json_object_object_get_ex(c, "reference", &c) &&
                json_object_object_get_ex(c, "cpu", &c));
    assert_string_equal(json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN),
                        "{\"model\":\"Intel(R) Xeon(R) Gold 6448Y\",\"flags\":\"avx2 "
                        "avx512_bf16 amx_bf16\",\"torch_capability\":\"AVX512\"}");
    json_object_put(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_match),
        cmocka_unit_test(test_near_tie_band_in_bf16_steps),
        cmocka_unit_test(test_reference_dtype_device_reported),
        cmocka_unit_test(test_divergence_in_band),
        cmocka_unit_test(test_device_token_not_in_ref),
        cmocka_unit_test(test_ref_token_not_in_device),
        cmocka_unit_test(test_divergence_at_step0),
        cmocka_unit_test(test_only_first_divergence_checked),
        cmocka_unit_test(test_k_limits_the_band),
        cmocka_unit_test(test_length_mismatch_fails),
        cmocka_unit_test(test_tied_logits),
        cmocka_unit_test(test_topk_nan_and_all_equal),
        cmocka_unit_test(test_reference_margin),
        cmocka_unit_test(test_trace_cpu_provenance),
    };
    return tu_run_group(tests, NULL, NULL);
}
