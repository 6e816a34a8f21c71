/* test_model_identity: one identity per model: the shared matching rule with aliases
 * (job/nb_job.c) and the deployments file's "canonical" and "aliases". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "nb_deploy.h"
#include "nb_deployments.h"
#include "nb_job.h"
#include "nb_runenv.h"

static const nb_job_alias aliases[] = {
    {"llama32_1b", "Llama-3.2-1B-Instruct"},
    {"llama32_1b_q4nx", "Llama-3.2-1B-Instruct"},
    {"Smollm2 135M 8k Lc100K Mix1 Ep2", "SmolLM2-135M-Instruct"},
    {"b179c9523d0e6a0f", "SmolLM2-135M-Instruct"},
};
#define N_ALIASES (sizeof aliases / sizeof aliases[0])

static void test_resolve(void **state)
{
    (void)state;
    assert_string_equal(nb_job_model_resolve("LLAMA32_1B", aliases, N_ALIASES),
                        "Llama-3.2-1B-Instruct");
    assert_string_equal(nb_job_model_resolve("b179c9523d0e6a0f", aliases, N_ALIASES),
                        "SmolLM2-135M-Instruct");
    /* Through nb_job_model_canon: a path of an aliased file name resolves too. */
    assert_string_equal(nb_job_model_resolve("/nightly/llama32_1b.gguf", aliases, N_ALIASES),
                        "Llama-3.2-1B-Instruct");
    assert_string_equal(nb_job_model_resolve("qwen25_0_5b", aliases, N_ALIASES),
                        "qwen25_0_5b");
    assert_string_equal(nb_job_model_resolve("llama32_1b", NULL, 0), "llama32_1b");
}

/* Known limit of issue 27: Gemma was "gemma-3-270m-q4_k_m" (its file's quantisation tag
 * kept) while SmolLM2 was "SmolLM2-135M-Instruct". One rule: the file's stem less a trailing
 * quantisation tag after '-', '_' or '.', any case. */
static void test_display_name_drops_quant_tag(void **state)
{
    (void)state;
    static const struct {
        const char *in, *name;
    } c[] = {
        {"gemma3", "gemma-3-270m"},
        {"models/gemma-3-270m-q4_k_m.gguf", "gemma-3-270m"},
        {"gemma-3-270m-q4_k_m", "gemma-3-270m"},
        {"instruct", "SmolLM2-135M-Instruct"},
        {"models/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"},
        {"Llama-3.2-1B-Instruct-Q4_K_S.gguf", "Llama-3.2-1B-Instruct"},
        {"Qwen2.5-0.5B-Instruct.q8_0.gguf", "Qwen2.5-0.5B-Instruct"},
        {"phi_f16.gguf", "phi"},
        {"Phi-3-mini.BF16", "Phi-3-mini"},
        {"model-F32", "model"},
        {"tiny-q5_1", "tiny"},
        {"tiny-Q5_K_M", "tiny"},
        {"tiny_q6_k", "tiny"},
        {"tiny.IQ4_XS.gguf", "tiny"},
        {"tiny-iq2_xxs", "tiny"},
        {"tiny-q4_0_4_4", "tiny"},
        /* not tags: kept whole */
        {"llama32_1b_q4nx", "llama32_1b_q4nx"},
        {"qwen25_0_5b", "qwen25_0_5b"},
        {"Llama-3.2-1B", "Llama-3.2-1B"},
        {"q4_0", "q4_0"},
        {"gemma-3-270m", "gemma-3-270m"},
        {"tiny-q", "tiny-q"},
        {"tiny-q4_", "tiny-q4_"},
        {"tiny-iq4_9", "tiny-iq4_9"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[256];
        nb_job_model_canon(c[i].in, out, sizeof out);
        if (strcmp(out, c[i].name))
            fail_msg("'%s': '%s', want '%s'", c[i].in, out, c[i].name);
    }
    /* the old name still names the model: a selector, history filter or stored row */
    assert_int_equal(nb_job_model_match("gemma-3-270m-q4_k_m", "gemma-3-270m", NULL), 2);
    assert_int_equal(nb_job_model_match("gemma3", "gemma-3-270m", NULL), 2);
}

static void test_match_aliased(void **state)
{
    (void)state;
    /* The four names one model had in the history, and the preset word. */
    const char *smol[] = {"SmolLM2-135M-Instruct", "Smollm2 135M 8k Lc100K Mix1 Ep2",
                          "b179c9523d0e6a0f", "instruct",
                          "models/SmolLM2-135M-Instruct.Q4_1.gguf"};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 5; j++) {
            int m = nb_job_model_match_aliased(smol[i], smol[j], NULL, aliases, N_ALIASES);
            if (m < 2)
                fail_msg("'%s' vs '%s': %d", smol[i], smol[j], m);
        }
    assert_int_equal(nb_job_model_match_aliased("llama32_1b", "Llama-3.2-1B-Instruct", NULL,
                                                aliases, N_ALIASES),
                     2);
    assert_int_equal(nb_job_model_match_aliased("Llama-3.2-1B-Instruct", "llama32_1b_q4nx",
                                                NULL, aliases, N_ALIASES),
                     2);
    assert_int_equal(nb_job_model_match_aliased("llama32_1b", "llama32_1b", NULL, aliases,
                                                N_ALIASES),
                     3);
    assert_int_equal(nb_job_model_match_aliased("llama32_1b", "SmolLM2-135M-Instruct", NULL,
                                                aliases, N_ALIASES),
                     0);
    assert_int_equal(nb_job_model_match_aliased("qwen25_0_5b", "llama32_1b", NULL, aliases,
                                                N_ALIASES),
                     0);
    assert_int_equal(nb_job_model_match_aliased("", "llama32_1b", NULL, aliases, N_ALIASES), 1);
    /* Without aliases it is the plain rule. */
    assert_int_equal(nb_job_model_match_aliased("llama32_1b", "Llama-3.2-1B-Instruct", NULL,
                                                NULL, 0),
                     0);
}

static void test_deployments_file(void **state)
{
    (void)state;
    const char *ok =
        "{\"deployments\": [{\"name\": \"l1b\", \"model\": \"Llama-3.2-1B-Instruct\", "
        "\"backend\": \"cpu\", \"dtype\": \"bf16\", \"canonical\": \"Llama-3.2-1B-Instruct\", "
        "\"aliases\": [\"llama32_1b\", \"llama32_1b_q4nx\"]},"
        "{\"model\": \"instruct\"}]}";
    nb_deployment *d;
    int n;
    nb_err err;
    assert_int_equal(nb_deployments_parse(ok, strlen(ok), "deployments.json", &d, &n, &err),
                     NB_OK);
    assert_int_equal(n, 2);
    assert_string_equal(d[0].canonical, "Llama-3.2-1B-Instruct");
    assert_int_equal(d[0].n_aliases, 2);
    assert_string_equal(d[0].aliases[0], "llama32_1b");
    assert_string_equal(d[0].aliases[1], "llama32_1b_q4nx");
    assert_string_equal(d[1].canonical, "");
    assert_int_equal(d[1].n_aliases, 0);
    nb_deployments_free(d, n);

    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"[{\"model\": \"instruct\", \"aliases\": \"llama32_1b\"}]",
         "deployments.json: deployments[0].aliases: must be a list of strings"},
        {"[{\"model\": \"instruct\", \"aliases\": [\"a\", 7]}]",
         "deployments.json: deployments[0].aliases[1]: must be a string of 1..127 bytes, got 7"},
        {"[{\"model\": \"instruct\", \"aliases\": [\"\"]}]",
         "deployments.json: deployments[0].aliases[0]: must be a string of 1..127 bytes, got \"\""},
        {"[{\"model\": \"instruct\", \"aliases\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\","
         "\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}]",
         "deployments.json: deployments[0].aliases: 17 aliases, the limit is 16"},
        {"[{\"model\": \"instruct\", \"canonical\": 1}]",
         "deployments.json: deployments[0].canonical: must be a string of 1..127 bytes, got 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(nb_deployments_parse(bad[i].json, strlen(bad[i].json),
                                              "deployments.json", &d, &n, &err),
                         NB_EINVAL);
        assert_string_equal(err.msg, bad[i].msg);
    }
}

/* The dtype a deployment of sel is stored under when asked for dt (Environment, reports). */
static nb_dtype stored_dtype(const char *sel, nb_dtype dt, char *env_dtype, size_t cap)
{
    nb_deploy_spec s;
    nb_deploy_spec_default(&s);
    snprintf(s.model, sizeof s.model, "%s", sel);
    s.dtype = dt;
    s.threads = 1;
    s.max_seq = 16;
    nb_deploy *d = NULL;
    nb_err err = {0};
    if (nb_deploy_open(&s, &d, &err))
        fail_msg("%s %s: %s", sel, nb_dtype_name(dt), err.msg);
    nb_report_env env;
    nb_runenv_report(d, NULL, &env);
    snprintf(env_dtype, cap, "%s", env.dtype);
    nb_dtype got = d->dtype;
    nb_deploy_close(d);
    return got;
}

/* Item 12 of issue 27: q4_1 and native lay out the same weights, so they are one deployment
 * of the file under one name, the file's own: SmolLM2's GGUF is all Q4_1 (q4_1), Gemma 3's
 * mixes Q5_0 / Q4_K / Q6_K (native). They were stored as two deployments. */
static void test_one_dtype_name_per_file(void **state)
{
    (void)state;
    tu_require_src();
    static const struct {
        const char *sel;
        nb_dtype name;
    } m[] = {{"instruct", NB_DTYPE_Q4_1}, {"gemma3", NB_DTYPE_NATIVE}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        char path[1024], preset[16], env[32];
        nb_err err = {0};
        if (nb_deploy_resolve_model(m[i].sel, path, sizeof path, preset, sizeof preset, &err) ||
            access(path, R_OK)) {
            print_message("%s not fetched: not checked\n", m[i].sel);
            continue;
        }
        assert_int_equal(stored_dtype(m[i].sel, NB_DTYPE_Q4_1, env, sizeof env), m[i].name);
        assert_string_equal(env, nb_dtype_name(m[i].name));
        assert_int_equal(stored_dtype(m[i].sel, NB_DTYPE_NATIVE, env, sizeof env), m[i].name);
        assert_string_equal(env, nb_dtype_name(m[i].name));
        /* bf16 stays bf16: a layout of its own */
        assert_int_equal(stored_dtype(m[i].sel, NB_DTYPE_BF16, env, sizeof env), NB_DTYPE_BF16);
        /* what a worker lists before its first job (nb_deploy_stored_dtype, from the file's
         * tensor types) is the name setup gives */
        static const nb_dtype asked[] = {NB_DTYPE_Q4_1, NB_DTYPE_NATIVE, NB_DTYPE_BF16};
        for (size_t k = 0; k < sizeof asked / sizeof *asked; k++) {
            nb_dtype got = NB_DTYPE_F32;
            assert_int_equal(nb_deploy_stored_dtype(m[i].sel, "cpu", asked[k], &got, &err),
                             NB_OK);
            assert_int_equal(got, asked[k] == NB_DTYPE_BF16 ? NB_DTYPE_BF16 : m[i].name);
        }
        /* a backend without named_dtype: as asked */
        nb_dtype got = NB_DTYPE_F32;
        assert_int_equal(nb_deploy_stored_dtype(m[i].sel, "exec", NB_DTYPE_NATIVE, &got, &err),
                         NB_OK);
        assert_int_equal(got, NB_DTYPE_NATIVE);
    }
}

/* A worker's listing: one item per deployment its results land in, by display name. */
static void test_dep_listing(void **state)
{
    (void)state;
    static const struct {
        const char *model, *dtype, *stored, *digest;
    } e[] = {
        {"gemma3", "q4_1", "native", "a5fd"},
        {"instruct", "bf16", "bf16", "b179"},
        {"models/gemma-3-270m-q4_k_m.gguf", "native", "native", "a5fd"},
        {"gemma3", "native", "native", "ffff"}, /* other weights: another deployment */
        {"instruct", "native", "q4_1", "b179"},
        {"instruct", "Q4_1", "q4_1", "b179"},
    };
    enum { N = sizeof e / sizeof e[0] };
    Npubench__Deployment d[N], *p[N];
    for (size_t i = 0; i < N; i++) {
        npubench__deployment__init(&d[i]);
        d[i].model = (char *)e[i].model;
        d[i].backend = (char *)"cpu";
        d[i].dtype = (char *)e[i].dtype;
        d[i].stored_dtype = (char *)e[i].stored;
        d[i].digest = (char *)e[i].digest;
        p[i] = &d[i];
    }
    static const size_t first[N] = {0, 1, 0, 3, 4, 4};
    for (size_t i = 0; i < N; i++)
        assert_int_equal(nb_job_dep_first(p, i), first[i]);
    static const char *const text[N] = {"gemma-3-270m cpu/native (also q4_1)",
                                        "SmolLM2-135M-Instruct cpu/bf16", NULL,
                                        "gemma-3-270m cpu/native",
                                        "SmolLM2-135M-Instruct cpu/q4_1 (also native)", NULL};
    for (size_t i = 0; i < N; i++) {
        if (!text[i])
            continue;
        char out[256];
        nb_job_dep_text(p, N, i, ", ", out, sizeof out);
        assert_string_equal(out, text[i]);
    }
    /* an older worker says no stored dtype: its entries stand as declared */
    d[4].stored_dtype = (char *)"";
    assert_int_equal(nb_job_dep_first(p, 4), 4);
    char out[256];
    nb_job_dep_text(p, N, 4, ", ", out, sizeof out);
    assert_string_equal(out, "SmolLM2-135M-Instruct cpu/native");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_match_aliased),
        cmocka_unit_test(test_display_name_drops_quant_tag),
        cmocka_unit_test(test_deployments_file),
        cmocka_unit_test(test_one_dtype_name_per_file),
        cmocka_unit_test(test_dep_listing),
    };
    return tu_run_group(tests, NULL, NULL);
}
