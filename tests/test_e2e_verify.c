/* test_e2e_verify: the real model through the CLI — verify-full PASSes on both prompt sets
 * against the committed HF traces, and the kv_offset fault makes the gate FAIL after prefill. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"

static char cmd[8192];

static void verify_full(const char *preset, const char *dtype)
{
    tu_require_model();
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' verify-full --model %s --dtype %s --reports '%s/reports-e2e'",
             tu_env("NB_SRC", "."), tu_env("NB_BIN", "npubench"), preset, dtype,
             tu_env("NB_BUILD", "."));
    tu_result r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[verify] PASS (8/8 prompts pass)"));
    free(r.out);
}

static void test_verify_full_instruct_bf16(void **s) { (void)s; verify_full("instruct", "bf16"); }
static void test_verify_full_base_bf16(void **s) { (void)s; verify_full("base", "bf16"); }

/* Returns the first divergence step printed for prompt 0, or -1. */
static int divergence_of(const char *out)
{
    const char *p = strstr(out, "diverge at step ");
    return p ? atoi(p + strlen("diverge at step ")) : -1;
}

static void test_fault_kv_offset_fails_after_prefill(void **s)
{
    (void)s;
    tu_require_model();
    snprintf(cmd, sizeof cmd,
             "cd '%s' && NPUBENCH_FAULT=kv_offset '%s' verify --reports '%s/reports-e2e'",
             tu_env("NB_SRC", "."), tu_env("NB_BIN", "npubench"), tu_env("NB_BUILD", "."));
    tu_result r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "[verify] FAIL"));
    /* prefill is untouched: step 0 agrees, the failure comes in decode */
    int step = divergence_of(r.out);
    assert_true(step >= 1);
    free(r.out);
}

/* Diagnosis runs prefill only, so the decode-only fault leaves it bit-identical. */
static void test_fault_leaves_diagnosis_unchanged(void **s)
{
    (void)s;
    tu_require_model();
    const char *fmt = "cd '%s' && %s '%s' diagnosis --reports '%s/reports-e2e' | grep '^L'";
    snprintf(cmd, sizeof cmd, fmt, tu_env("NB_SRC", "."), "", tu_env("NB_BIN", "npubench"),
             tu_env("NB_BUILD", "."));
    tu_result a = tu_run(cmd);
    snprintf(cmd, sizeof cmd, fmt, tu_env("NB_SRC", "."), "NPUBENCH_FAULT=kv_offset",
             tu_env("NB_BIN", "npubench"), tu_env("NB_BUILD", "."));
    tu_result b = tu_run(cmd);
    assert_int_equal(a.code, 0);
    assert_int_equal(b.code, 0);
    assert_true(strlen(a.out) > 100);
    assert_string_equal(a.out, b.out);
    free(a.out);
    free(b.out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_full_instruct_bf16),
        cmocka_unit_test(test_verify_full_base_bf16),
        cmocka_unit_test(test_fault_kv_offset_fails_after_prefill),
        cmocka_unit_test(test_fault_leaves_diagnosis_unchanged),
    };
    return tu_run_group(tests, NULL, NULL);
}
