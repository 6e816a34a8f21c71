/* test_verify_unit: diagnosis against the committed HF hidden states of the real model, the
 * trace's hidden-state parser on damaged input, and the cosine summary on hand-made rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <json-c/json.h>
#include <math.h>

#include "nb_base64.h"
#include "nb_diagnosis.h"
#include "nb_diagnosis_run.h"
#include "nb_sha256.h"
#include "nb_trace.h"
#include "nb_verify.h"
#include "testutil.h"

static nb_deploy *dep;

/* The committed diagnosis trace of the default model and prompt. */
static const char *diag_trace(void)
{
    static char path[2048];
    char digest[65];
    const char *p = NB_DIAGNOSIS_DEFAULT_PROMPT;
    nb_sha256_mem_hex(p, strlen(p), digest);
    /* b179c9523d0e6a0f...: SmolLM2-135M-Instruct.Q4_1.gguf, the digest its references carry */
    nb_trace_path(nb_verify_default_refdir(),
                  "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", digest, 1,
                  path, sizeof path);
    return path;
}

static void need_deploy(void)
{
    if (dep)
        return;
    tu_require_model();
    nb_deploy_spec s;
    nb_deploy_spec_default(&s);
    snprintf(s.model, sizeof s.model, "instruct");
    s.threads = 1;
    s.max_seq = 64;
    nb_err err;
    if (nb_deploy_open(&s, &dep, &err))
        fail_msg("deploy: %s", err.msg);
}

static int teardown(void **state)
{
    nb_deploy_close(dep);
    dep = NULL;
    return tu_group_teardown(state);
}

/* ---- nb_cos_stats_rows: values worked out by hand ---- */

static void test_cos_stats_by_hand(void **s)
{
    (void)s;
    /* rows: identical (1), orthogonal (0), opposite (-1), scaled (1) */
    const float a[] = {1, 0, 0, 1, 3, 4, 1, 2};
    const float b[] = {1, 0, 1, 0, -3, -4, 2, 4};
    nb_cos_stats st;
    nb_cos_stats_rows(a, b, 4, 2, &st);
    assert_float_equal(st.min, -1.0, 1e-12);
    assert_float_equal(st.p5, -1.0, 1e-12); /* floor(0.05 * 3) = 0: the smallest */
    assert_float_equal(st.median, 0.5, 1e-12); /* even n: the mean of 0 and 1 */
    assert_float_equal(st.mean, 0.25, 1e-12);
    assert_float_equal(st.max_abs, 8.0, 1e-12); /* 4 - (-4) */
    /* odd n: the middle one; a zero row against a zero row counts as equal, against a
     * non-zero row as orthogonal */
    const float c[] = {0, 0, 0, 0, 1, 1};
    const float d[] = {0, 0, 1, 0, 1, 1};
    nb_cos_stats_rows(c, d, 3, 2, &st);
    assert_float_equal(st.min, 0.0, 1e-12);
    assert_float_equal(st.median, 1.0, 1e-12);
    assert_float_equal(st.mean, 2.0 / 3.0, 1e-12);
    assert_float_equal(st.max_abs, 1.0, 1e-12);
    nb_cos_stats_rows(a, b, 0, 2, &st);
    assert_float_equal(st.min, 0.0, 0.0);
    assert_float_equal(st.mean, 0.0, 0.0);
}

/* ---- the hidden-state parser ---- */

static json_object *load_diag(void)
{
    tu_require_src();
    json_object *root = json_object_from_file(diag_trace());
    assert_non_null(root);
    return root;
}

static json_object *hidden_of(json_object *root)
{
    json_object *h;
    assert_true(json_object_object_get_ex(root, "hidden_states", &h));
    return h;
}

static json_object *layer_of(json_object *root, int l)
{
    json_object *layers;
    assert_true(json_object_object_get_ex(hidden_of(root), "layers", &layers));
    return json_object_array_get_idx(layers, (size_t)l);
}

/* Writes root to tmp/name (and drops root); the path. */
static const char *write_trace(json_object *root, const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", tu_group_tmp(), name);
    assert_int_equal(json_object_to_file_ext(path, root, JSON_C_TO_STRING_PLAIN), 0);
    json_object_put(root);
    return path;
}

static void expect_load_error(const char *path, nb_code code, const char *want)
{
    nb_trace *t = (nb_trace *)1;
    nb_err err = {0};
    assert_int_equal(nb_trace_load(path, &t, &err), code);
    print_message("%s\n", err.msg);
    assert_null(t);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, path)); /* errors name the file */
}

static void test_hidden_parsed(void **s)
{
    (void)s;
    tu_require_src();
    nb_trace *t;
    nb_err err;
    assert_int_equal(nb_trace_load(diag_trace(), &t, &err), NB_OK);
    assert_non_null(t->hidden);
    const nb_trace_hidden *h = t->hidden;
    assert_string_equal(h->prompt, NB_DIAGNOSIS_DEFAULT_PROMPT);
    assert_int_equal(h->n_layers, 30);
    assert_int_equal(h->dim, 576);
    assert_int_equal(h->n_pos, 5);
    assert_int_equal(h->n_ids, 5);
    const int32_t ids[] = {504, 3575, 282, 4649, 314};
    assert_memory_equal(h->ids, ids, sizeof ids);
    assert_true(h->last_post_norm);
    assert_int_equal(h->final.token, h->final.topk[0]);
    /* layer 0, position 0, element 0: the first four bytes of the base64 ("AAAUQA" = 2.3125f) */
    assert_float_equal(h->data[0], 2.3125, 0.0);
    assert_int_equal(t->n_prompts, 0);
    nb_trace_free(t);
}

static void test_hidden_damaged(void **s)
{
    (void)s;
    json_object *r = load_diag();
    json_object_object_add(hidden_of(r), "n_layers", json_object_new_int(29));
    expect_load_error(write_trace(r, "layers29.json"), NB_EFORMAT,
                      "hidden_states.layers must have n_layers=29 entries");

    r = load_diag();
    json_object_object_add(hidden_of(r), "dim", json_object_new_int(0));
    expect_load_error(write_trace(r, "dim0.json"), NB_EFORMAT, "dim0.json: dim: must be an integer 1..65536, got 0");

    r = load_diag();
    json_object_object_add(hidden_of(r), "n_pos", json_object_new_int(4));
    expect_load_error(write_trace(r, "pos4.json"), NB_EFORMAT,
                      "hidden_states.layers[0].data has 11520 bytes, expected 9216");

    r = load_diag();
    json_object_object_del(layer_of(r, 3), "data");
    expect_load_error(write_trace(r, "nodata.json"), NB_EFORMAT,
                      "hidden_states.layers[3].data missing");

    r = load_diag();
    json_object_object_add(layer_of(r, 5), "data", json_object_new_string("AAAU*AAA"));
    expect_load_error(write_trace(r, "b64.json"), NB_EFORMAT, "hidden_states.layers[5].data: base64: invalid character at offset 4");

    r = load_diag();
    json_object_object_add(hidden_of(r), "n_pos", json_object_new_int(65536));
    json_object_object_add(hidden_of(r), "dim", json_object_new_int(65536));
    expect_load_error(write_trace(r, "huge.json"), NB_EFORMAT, "hidden_states too large");

    r = load_diag();
    json_object_object_del(hidden_of(r), "prompt_ids");
    expect_load_error(write_trace(r, "noids.json"), NB_EFORMAT,
                      "hidden_states.prompt_ids missing or not an array");
}

/* ---- diagnosis against HF's hidden states ---- */

static void test_diagnosis_matches_hf(void **s)
{
    (void)s;
    need_deploy();
    tu_require_src();
    nb_diagnosis_result r;
    nb_err err;
    /* the trace found by digests, as `npubench diagnosis` does */
    if (nb_diagnosis_run(dep, NULL, NULL, NULL, NULL, &r, &err))
        fail_msg("diagnosis: %s", err.msg);
    assert_string_equal(r.prompt, NB_DIAGNOSIS_DEFAULT_PROMPT);
    assert_string_equal(r.trace_path, diag_trace());
    assert_int_equal(r.n_layers, 30);
    assert_int_equal(r.n_pos, 5);
    assert_int_equal(r.k, 5);
    for (int l = 0; l < r.n_layers; l++) {
        const nb_cos_stats *c = &r.layers[l].s;
        print_message("L%02d%s min %.6f median %.6f mean %.6f max_abs %.4f\n", l,
                      r.layers[l].post_norm ? "*" : " ", c->min, c->median, c->mean, c->max_abs);
        assert_int_equal(r.layers[l].layer, l);
        assert_int_equal(r.layers[l].post_norm, l == 29);
        /* the same weights in bf16 on both sides: measured min 0.99956 (the post-norm layer),
         * so 0.999 leaves twice the gap; a wrong layer, position or RoPE falls far below */
        assert_true(c->min > 0.999);
        assert_true(c->min <= c->p5 && c->p5 <= c->median && c->median <= 1.0 + 1e-9);
    }
    /* the next token after "The capital of France is" is HF's */
    assert_int_equal(r.dev_final.token, r.ref_final.token);
    assert_int_equal(r.dev_final.topk[0], r.ref_final.topk[0]);
    nb_diagnosis_result_free(&r);
    assert_null(r.layers);
}

/* One layer of the reference negated: exactly that layer's cosines become -1. */
static void test_diagnosis_localises_a_layer(void **s)
{
    (void)s;
    need_deploy();
    json_object *root = load_diag();
    json_object *L = layer_of(root, 7);
    json_object *d;
    assert_true(json_object_object_get_ex(L, "data", &d));
    uint8_t *raw;
    size_t len;
    nb_err err;
    assert_int_equal(nb_base64_decode(json_object_get_string(d),
                                      (size_t)json_object_get_string_len(d), &raw, &len, &err),
                     NB_OK);
    float *f = (float *)raw;
    for (size_t i = 0; i < len / sizeof *f; i++)
        f[i] = -f[i];
    char *b64;
    assert_int_equal(nb_base64_encode(raw, len, &b64, &err), NB_OK);
    free(raw);
    json_object_object_add(L, "data", json_object_new_string(b64));
    free(b64);
    const char *path = write_trace(root, "neg7.json");
    nb_diagnosis_result r;
    assert_int_equal(nb_diagnosis_run(dep, NULL, path, NULL, NULL, &r, &err), NB_OK);
    for (int l = 0; l < r.n_layers; l++)
        if (l == 7)
            assert_true(r.layers[l].s.max_abs > 1.0 && r.layers[l].s.median < -0.98);
        else
            assert_true(r.layers[l].s.min > 0.999);
    nb_diagnosis_result_free(&r);
}

static int cancel_now(void *user)
{
    (void)user;
    return 1;
}

static void expect_diag_error(const char *prompt, const char *trace, const nb_cancel *cancel,
                              nb_code code, const char *want)
{
    nb_diagnosis_result r;
    nb_err err = {0};
    assert_int_equal(nb_diagnosis_run(dep, prompt, trace, NULL, cancel, &r, &err), code);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, want));
    assert_null(r.layers);
}

static void test_diagnosis_refusals(void **s)
{
    (void)s;
    need_deploy();
    /* a prompt HF never ran: no trace to compare with, and the message says how to make one */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_group_tmp());
    nb_diagnosis_result r;
    nb_err err = {0};
    assert_int_equal(nb_diagnosis_run(dep, "An unknown prompt", NULL, dir, NULL, &r, &err),
                     NB_ENOTFOUND);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "hf-reference"));
    /* the trace of another prompt */
    expect_diag_error("Hello", diag_trace(), NULL, NB_EMISMATCH,
                      "trace is for prompt \"The capital of France is\", not \"Hello\"");
    /* a gate trace has no hidden states */
    char gate[4096];
    snprintf(gate, sizeof gate, "%s/b179c9523d0e6a0f-310f18e97323f258.json",
             nb_verify_default_refdir());
    expect_diag_error(NULL, gate, NULL, NB_EFORMAT, "no hidden_states (not a diagnosis trace)");
    /* a model of another shape */
    json_object *root = load_diag();
    json_object *h = hidden_of(root);
    json_object *layers;
    assert_true(json_object_object_get_ex(h, "layers", &layers));
    json_object_array_del_idx(layers, 29, 1);
    json_object_object_add(h, "n_layers", json_object_new_int(29));
    expect_diag_error(NULL, write_trace(root, "l29.json"), NULL, NB_EMISMATCH,
                      "trace has 29 layers x 576 dim, model 30 x 576");
    /* ids that are not our tokenizer's */
    root = load_diag();
    json_object *ids = json_object_new_array();
    for (int i = 0; i < 5; i++)
        json_object_array_add(ids, json_object_new_int(1 + i));
    json_object_object_add(hidden_of(root), "prompt_ids", ids);
    expect_diag_error(NULL, write_trace(root, "ids.json"), NULL, NB_EMISMATCH,
                      "our tokenizer's 5 ids differ from the reference's 5");
    /* cancelled before the one forward pass */
    nb_cancel c = {cancel_now, NULL};
    expect_diag_error(NULL, diag_trace(), &c, NB_ECANCELED,
                      "diagnosis cancelled before the forward pass");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cos_stats_by_hand),
        cmocka_unit_test(test_hidden_parsed),
        cmocka_unit_test(test_hidden_damaged),
        cmocka_unit_test(test_diagnosis_matches_hf),
        cmocka_unit_test(test_diagnosis_localises_a_layer),
        cmocka_unit_test(test_diagnosis_refusals),
    };
    return tu_run_group(tests, tu_group_setup, teardown);
}
