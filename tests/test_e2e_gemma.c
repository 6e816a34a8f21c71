/* test_e2e_gemma: Gemma 3 270M (the second model family) through the engine against the
 * committed HF bf16 traces: the gate on the prompt set, and the kv-offset fault failing it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "nb_deploy.h"
#include "nb_diagnosis.h"
#include "nb_engine.h"
#include "nb_gate.h"
#include "nb_generate.h"
#include "nb_model.h"
#include "nb_sha256.h"
#include "nb_trace.h"
#include "nb_localize.h"
#include "nb_verify.h"
#include "nb_verify_run.h"

#define GEMMA_FILE "models/gemma-3-270m-q4_k_m.gguf"
#define GEMMA_PROMPTS "verify/prompts/gemma3.txt"
#define DIAG_PROMPT "The capital of France is" /* the C side's default diagnosis prompt */

typedef struct fixture {
    char model[2048], prompts[2048], refdir[2048];
    nb_model *m;
    nb_trace *tr, *diag;
} fixture;

static fixture fx;

static int group_setup(void **state)
{
    (void)state;
    memset(&fx, 0, sizeof fx);
    const char *src = getenv("NB_SRC");
    if (!src || !*src)
        return 0;
    snprintf(fx.model, sizeof fx.model, "%s/%s", src, GEMMA_FILE);
    snprintf(fx.prompts, sizeof fx.prompts, "%s/%s", src, GEMMA_PROMPTS);
    snprintf(fx.refdir, sizeof fx.refdir, "%s/verify/references", src);
    if (access(fx.model, R_OK))
        return 0;
    nb_err err = {0};
    char msha[65], psha[65];
    if (nb_model_open(fx.model, &fx.m, &err) || nb_sha256_file(fx.model, msha, &err) ||
        nb_sha256_file(fx.prompts, psha, &err) ||
        nb_trace_find(fx.refdir, msha, psha, 0, &fx.tr, &err)) {
        fprintf(stderr, "test_e2e_gemma: %s\n", err.msg);
        return -1;
    }
    nb_sha256_mem_hex(DIAG_PROMPT, strlen(DIAG_PROMPT), psha);
    if (nb_trace_find(fx.refdir, msha, psha, 1, &fx.diag, &err)) {
        fprintf(stderr, "test_e2e_gemma: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    nb_trace_free(fx.tr);
    nb_trace_free(fx.diag);
    nb_model_close(fx.m);
    return tu_teardown_kill(state);
}

static void require_gemma(void)
{
    tu_require_src();
    tu_require(fx.m != NULL, GEMMA_FILE " is not fetched (scripts/fetch_model.sh gemma3)");
}

/* The gate over the first max prompts of the trace, fed the reference's own prompt ids (the
 * tokenizer is tested on its own); returns how many failed. */
static int gate_prompts(nb_dtype dtype, int max)
{
    nb_deploy_spec spec;
    nb_deploy_spec_default(&spec);
    assert_true(strlen(fx.model) < sizeof spec.model);
    memcpy(spec.model, fx.model, strlen(fx.model) + 1);
    spec.dtype = dtype;
    spec.max_seq = 256;
    nb_err err = {0};
    nb_deploy *d = NULL;
    nb_code rc = nb_deploy_open(&spec, &d, &err);
    if (rc)
        fail_msg("deployment setup: %s", err.msg);
    int fails = 0;
    for (int i = 0; i < fx.tr->n_prompts && i < max; i++) {
        const nb_trace_prompt *p = &fx.tr->prompts[i];
        nb_gen_opts go = {.n_tokens = p->n_steps, .k = fx.tr->k};
        nb_gen g;
        if ((rc = nb_generate(d, p->ids, p->n_ids, &go, &g, &err)))
            fail_msg("prompt %d: %s", i, err.msg);
        nb_gate_result r;
        nb_gate_check(g.steps, g.n_steps, p->steps, p->n_steps, fx.tr->k, &r);
        printf("  %s prompt %d: %s, %d/%d steps agree%s%s\n", nb_dtype_name(dtype), i,
               r.status == NB_GATE_PASS ? "PASS" : "FAIL", r.agreed, r.n_steps,
               r.reason[0] ? ": " : "", r.reason);
        fails += r.status != NB_GATE_PASS;
        nb_gen_free(&g);
    }
    nb_deploy_close(d);
    return fails;
}

/* The family switches the file's architecture selects, and the layer pattern HF derives. */
static void test_gemma_config(void **state)
{
    (void)state;
    require_gemma();
    const nb_model_config *c = nb_model_cfg(fx.m);
    assert_string_equal(c->arch, "gemma3");
    assert_true(c->norm_unit_offset && c->post_norms && c->qk_norm && c->embed_scaled);
    assert_int_equal(c->act, NB_ACT_GELU_TANH);
    assert_int_equal(c->tied_embeddings, 1);
    assert_int_equal(c->sliding_window, 512);
    assert_true(c->rope_theta == 1e6f && c->rope_theta_swa == 1e4f);
    for (int l = 0; l < c->n_layers; l++) /* every 6th layer is global: 5, 11, 17 */
        assert_int_equal(nb_model_layer_is_swa(c, l), l % 6 != 5);
    /* the converter stores 1 + w; the model hands out HF's w */
    float w[1024];
    const nb_layer_weights *lw = nb_model_layer(fx.m, 0);
    nb_model_norm_row(fx.m, &lw->attn_norm, w);
    float stored[1024];
    nb_tensor_row_f32(&lw->attn_norm, 0, stored);
    for (int i = 0; i < c->dim; i++)
        assert_true(w[i] == stored[i] - 1.0f);
}

static void test_gemma_gate_bf16(void **state)
{
    (void)state;
    require_gemma();
    assert_int_equal(gate_prompts(NB_DTYPE_BF16, fx.tr->n_prompts), 0);
}

static void test_gemma_gate_f32(void **state)
{
    (void)state;
    require_gemma();
    assert_int_equal(gate_prompts(NB_DTYPE_F32, 2), 0);
}

/* The deployment a board ships: Q5_0, Q4_K, Q6_K and the Q8_0 head kept in their blocks, every
 * prompt of the set, against the same HF bf16 traces (issue 12: bf16 and native both PASS). */
static void test_gemma_gate_native(void **state)
{
    (void)state;
    require_gemma();
    assert_int_equal(gate_prompts(NB_DTYPE_NATIVE, fx.tr->n_prompts), 0);
}

typedef struct capture {
    float *rows; /* [n_layers][n_pos][dim] */
    int n_pos, dim, n_layers;
} capture;

static void on_layer(void *user, int layer, int pos0, int n, int dim, const float *hidden)
{
    capture *c = user;
    if (layer >= 0 && layer < c->n_layers && dim == c->dim && pos0 + n <= c->n_pos)
        memcpy(c->rows + ((size_t)layer * c->n_pos + pos0) * dim, hidden,
               sizeof(float) * (size_t)n * dim);
}

/* What diagnosis reports: every layer's output over the prompt, against HF's hidden states. A
 * misplaced norm or a wrong rope base shows as a layer whose cosine falls well below 1. */
static void test_gemma_layers_track_hf(void **state)
{
    (void)state;
    require_gemma();
    const nb_trace_hidden *h = fx.diag->hidden;
    const nb_model_config *c = nb_model_cfg(fx.m);
    assert_int_equal(h->n_layers, c->n_layers);
    assert_int_equal(h->dim, c->dim);
    nb_engine_opts eo;
    nb_engine_opts_default(&eo);
    eo.max_seq = 64;
    nb_engine *e;
    nb_err err = {0};
    if (nb_engine_setup(fx.m, &eo, &e, &err))
        fail_msg("engine setup: %s", err.msg);
    capture cap = {.n_pos = h->n_pos, .dim = h->dim, .n_layers = h->n_layers};
    cap.rows = calloc((size_t)h->n_layers * h->n_pos * h->dim, sizeof(float));
    assert_non_null(cap.rows);
    nb_engine_set_layer_hook(e, on_layer, &cap);
    const float *logits;
    assert_int_equal(nb_engine_prefill(e, h->ids, h->n_ids, &logits, &err), NB_OK);
    for (int l = 0; l < h->n_layers; l++) {
        nb_cos_stats st;
        size_t off = (size_t)l * h->n_pos * h->dim;
        nb_cos_stats_rows(cap.rows + off, h->data + off, h->n_pos, h->dim, &st);
        printf("  layer %2d: cosine min %.5f median %.5f\n", l, st.min, st.median);
        assert_true(st.min > 0.999); /* 0.9999 and above on AVX2 */
    }
    free(cap.rows);
    nb_engine_free(e);
}

/* Past the 512-position window: a prefill of n + 1 tokens and a prefill of n followed by one
 * decode step reach the same last-position logits (the sliding layers' per-row slices in the
 * prefill chunk and the decode step's slice agree), and nothing there is NaN. */
static void test_gemma_past_window(void **state)
{
    (void)state;
    require_gemma();
    enum { N = 600 };
    const nb_model_config *c = nb_model_cfg(fx.m);
    assert_true(N > c->sliding_window + 1);
    int32_t ids[N + 1];
    const nb_trace_prompt *p = &fx.tr->prompts[0];
    ids[0] = p->ids[0]; /* BOS, then the prompts' own text over and over */
    for (int i = 1, k = 0; i <= N; i++) {
        const nb_trace_prompt *q = &fx.tr->prompts[k % fx.tr->n_prompts];
        ids[i] = q->ids[1 + (i - 1) % (q->n_ids - 1)];
        if ((i - 1) % (q->n_ids - 1) == q->n_ids - 2)
            k++;
    }
    nb_engine_opts eo;
    nb_engine_opts_default(&eo);
    eo.max_seq = N + 8;
    nb_engine *e;
    nb_err err = {0};
    if (nb_engine_setup(fx.m, &eo, &e, &err))
        fail_msg("engine setup: %s", err.msg);
    int V = c->vocab;
    float *a = malloc(sizeof(float) * (size_t)V);
    assert_non_null(a);
    const float *lg;
    assert_int_equal(nb_engine_prefill(e, ids, N + 1, &lg, &err), NB_OK);
    memcpy(a, lg, sizeof(float) * (size_t)V);
    assert_int_equal(nb_engine_prefill(e, ids, N, &lg, &err), NB_OK);
    assert_int_equal(nb_engine_decode_step(e, ids[N], N, &lg, &err), NB_OK);
    double worst = 0, mag = 0;
    int ta = 0, tb = 0;
    for (int i = 0; i < V; i++) {
        assert_false(isnan(a[i]) || isnan(lg[i]));
        worst = fmax(worst, fabs((double)a[i] - lg[i]));
        mag = fmax(mag, fabs((double)a[i]));
        ta = a[i] > a[ta] ? i : ta;
        tb = lg[i] > lg[tb] ? i : tb;
    }
    printf("  past the window: top-1 %d / %d, max |diff| %.3g of %.3g\n", ta, tb, worst, mag);
    assert_int_equal(ta, tb);
    assert_true(worst < 0.05 * mag); /* bf16 GEMM vs GEMV order: a few logit ulps */
    free(a);
    nb_engine_free(e);
}

/* A late KV write (the fault make verify injects) must fail this family's gate too: two
 * prompts are enough to show it, as they are for SmolLM2. */
static void test_gemma_kv_offset_fails(void **state)
{
    (void)state;
    require_gemma();
    setenv("NPUBENCH_FAULT", "kv_offset", 1);
    int fails = gate_prompts(NB_DTYPE_BF16, 2);
    unsetenv("NPUBENCH_FAULT");
    assert_int_equal(fails, 2);
}

/* The localization on this family: Gemma 3's residual stream after attention is the input of
 * pre_feedforward_layernorm (its post_attention_layernorm norms the attention output), so the
 * committed states must be taken there. mlp_layer:5 corrupts layer 5's down projection: the
 * verdict names layer 5's MLP with every state before it above the threshold, under bf16 and
 * under the native blocks. */
static void test_gemma_mlp_fault_localized(void **state)
{
    (void)state;
    require_gemma();
    const nb_dtype dts[] = {NB_DTYPE_BF16, NB_DTYPE_NATIVE};
    for (int t = 0; t < 2; t++) {
        nb_deploy_spec s;
        nb_deploy_spec_default(&s);
        assert_true(strlen(fx.model) < sizeof s.model);
        memcpy(s.model, fx.model, strlen(fx.model) + 1);
        s.dtype = dts[t];
        s.max_seq = 256;
        setenv("NPUBENCH_FAULT", "mlp_layer:5", 1);
        nb_deploy *d = NULL;
        nb_err err = {0};
        nb_code rc = nb_deploy_open(&s, &d, &err);
        unsetenv("NPUBENCH_FAULT");
        if (rc)
            fail_msg("deploy: %s", err.msg);
        nb_verify_opts o = {.prompts_file = fx.prompts, .refdir = fx.refdir, .max_prompts = 1,
                            .n_tokens = 4};
        nb_verify_result r;
        if (nb_verify_run(d, &o, &r, &err))
            fail_msg("verify: %s", err.msg);
        const nb_localization *l = &r.recs[0].loc;
        printf("  %s: %s\n", nb_dtype_name(dts[t]), l->summary);
        assert_int_equal(r.recs[0].gate.status, NB_GATE_FAIL);
        assert_string_equal(l->verdict, "layer");
        assert_int_equal(l->first_layer, 5);
        assert_string_equal(l->sub_block, "mlp");
        for (int i = 0; i < 5; i++)
            assert_true(l->layers[i].cos_attn >= NB_LOC_COS_THRESHOLD &&
                        l->layers[i].cos_mlp >= NB_LOC_COS_THRESHOLD);
        assert_true(l->layers[5].cos_attn >= NB_LOC_COS_THRESHOLD);
        assert_true(l->layers[5].cos_mlp < NB_LOC_COS_THRESHOLD);
        nb_verify_result_free(&r);
        nb_deploy_close(d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemma_config),
        cmocka_unit_test(test_gemma_layers_track_hf),
        cmocka_unit_test(test_gemma_past_window),
        cmocka_unit_test(test_gemma_gate_bf16),
        cmocka_unit_test(test_gemma_gate_f32),
        cmocka_unit_test(test_gemma_gate_native),
        cmocka_unit_test(test_gemma_kv_offset_fails),
        cmocka_unit_test(test_gemma_mlp_fault_localized),
    };
    return tu_run_group(tests, group_setup, group_teardown);
}
