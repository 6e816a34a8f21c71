/* test_model_identity: one identity per model: the shared matching rule with aliases
 * (job/nb_job.c) and the deployments file's "canonical" and "aliases". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "testutil.h"
#include "nb_deployments.h"
#include "nb_job.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_match_aliased),
        cmocka_unit_test(test_deployments_file),
    };
    return tu_run_group(tests, NULL, NULL);
}
