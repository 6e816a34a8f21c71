/* test_cli_local: the local commands through the real binary — run (embedded service and
 * --direct), diagnosis, profile on the default model — and compare, reference and history
 * over imported runs with known numbers: output lines and exit codes asserted exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <json-c/json.h>

#include "testutil.h"

static const char *tmp(void)
{
    return tu_group_tmp();
}

/* run: through the embedded coordinator and worker, and --direct on the executor alone; the
 * same greedy tokens either way. */
static void test_run(void **s)
{
    (void)s;
    tu_require_model();
    /* the model's one display name, not the GGUF's general.name */
    const char *want = "Deployment: SmolLM2-135M-Instruct cpu/bf16, 1 threads, kernels *\n"
                       "Setup: *\n"
                       "Prompt tokens: 31, generated tokens: 2, repetitions: 1\n"
                       "Time to first token (TTFT): *\nDecode: *\nTokens/second: *\n"
                       "Generated text:\nHello!";
    free(tu_cli(0, want, "run --prompt Hi --n-tokens 2 --threads 1 --reps 1 --warmup 0 "
                      "--db '%s/l.db'", tmp()));
    free(tu_cli(0, want, "run --direct --prompt Hi --n-tokens 2 --threads 1 --reps 1 --warmup 0 "
                      "--max-seq 64"));
}

/* The golden cases' texts and ids (HF's, tests/data/tokenizer_golden_smollm2.json) as
 * npubench tokenize --ids prints them: one line per text, the ids space-separated. */
static void golden_lines(const char *key, const char *texts_path, char **want)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/tests/data/tokenizer_golden_smollm2.json", tu_require_src());
    json_object *g = json_object_from_file(path), *cases = NULL;
    assert_non_null(g);
    assert_true(json_object_object_get_ex(g, "cases", &cases));
    json_object *texts = json_object_new_array();
    size_t cap = 1 << 20, len = 0;
    *want = calloc(1, cap);
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i), *t, *ids;
        assert_true(json_object_object_get_ex(c, "text", &t) &&
                    json_object_object_get_ex(c, key, &ids));
        json_object_array_add(texts, json_object_get(t));
        for (size_t k = 0; k < json_object_array_length(ids); k++)
            len += (size_t)snprintf(*want + len, cap - len, "%s%d", k ? " " : "",
                                    json_object_get_int(json_object_array_get_idx(ids, k)));
        len += (size_t)snprintf(*want + len, cap - len, "\n");
    }
    assert_int_equal(json_object_to_file(texts_path, texts), 0);
    json_object_put(texts);
    json_object_put(g);
}

/* tokenize: every golden text's ids equal HF's, with special-token text parsed (the default,
 * as verify encodes) and split; pieces printed escaped; bad input named with exit 2. */
static void test_tokenize(void **s)
{
    (void)s;
    tu_require_model();
    char texts[2048], *want = NULL;
    snprintf(texts, sizeof texts, "%s/golden_texts.json", tmp());
    static const char *const modes[][2] = {{"ids", ""}, {"ids_split_special", "--split-special"}};
    for (int m = 0; m < 2; m++) {
        golden_lines(modes[m][0], texts, &want);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' tokenize --texts-json '%s' --ids %s",
                 tu_env("NB_BIN", "npubench"), texts, modes[m][1]);
        tu_result r = tu_run(cmd);
        assert_int_equal(r.code, 0);
        if (strcmp(r.out, want))
            fail_msg("tokenize %s: ids differ from HF's golden ids", modes[m][1]);
        free(r.out);
        free(want);
    }
    free(tu_cli(0, "text 0: 3 ids\n  19556   \"Hello\"\n  216     \" \"\n"
                   "  1       \"<|im_start|>\"",
                "tokenize --text 'Hello <|im_start|>'"));
    /* a piece that is part of a character, and a control byte: escaped, never raw */
    free(tu_cli(0, "text 0: *", "tokenize --text \"$(printf 'a\\001\\303\\251')\""));
    free(tu_cli(2, "npubench tokenize: give exactly one of --text, --prompts-file and "
                   "--texts-json", "tokenize"));
    free(tu_cli(2, "npubench tokenize: give exactly one of --text, --prompts-file and "
                   "--texts-json", "tokenize --text a --texts-json b"));
    char bad[2100];
    snprintf(bad, sizeof bad, "npubench tokenize: error: %s/tests/data/tokenizer_golden_smollm2.json:"
             " not a JSON array of strings", tu_require_src());
    free(tu_cli(2, bad, "tokenize --texts-json '%s/tests/data/tokenizer_golden_smollm2.json'",
                tu_require_src()));
}

/* $NPUBENCH_SECRET exported for the lab (as "Running a lab" says) does not touch the local
 * commands: run, history and report --html use the in-process coordinator, which checks no
 * key; and no local run, passed or failed, leaves its job queued in the database. */
static void test_local_ignores_lab_secret(void **s)
{
    (void)s;
    tu_require_model();
    char db[1200], args[4096];
    snprintf(db, sizeof db, "%s/secret.db", tmp());
    const char *env = "env NPUBENCH_SECRET=lab-secret-for-the-coordinator ";
    snprintf(args, sizeof args,
             "%s'%s' run --prompt Hi --n-tokens 2 --threads 1 --reps 1 --warmup 0 --db '%s' 2>&1",
             env, tu_env("NB_BIN", "npubench"), db);
    tu_result r = tu_run(args);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\nHello!"));
    free(r.out);
    snprintf(args, sizeof args,
             "%s'%s' run --prompt Hi --n-tokens 2 --threads 1 --max-seq 8 --db '%s' 2>&1", env,
             tu_env("NB_BIN", "npubench"), db);
    r = tu_run(args);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "exceeds max_seq 8"));
    free(r.out);
    snprintf(args, sizeof args, "%s'%s' history --db '%s' --format csv 2>&1", env,
             tu_env("NB_BIN", "npubench"), db);
    r = tu_run(args);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "SmolLM2-135M-Instruct"));
    free(r.out);
    snprintf(args, sizeof args, "%s'%s' report --html '%s/secret-html' --db '%s' 2>&1", env,
             tu_env("NB_BIN", "npubench"), tmp(), db);
    r = tu_run(args);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    free(r.out);
    snprintf(args, sizeof args, "'%s' jobs --json --db '%s'", tu_env("NB_BIN", "npubench"),
             db);
    r = tu_run(args);
    assert_int_equal(r.code, 0);
    print_message("%s", r.out ? r.out : "");
    assert_null(strstr(r.out, "\"queued\""));
    assert_null(strstr(r.out, "\"leased\""));
    assert_null(strstr(r.out, "\"running\""));
    free(r.out);
}

/* verify --prompts-file FILE --reference TRACE with the project's own prompt file and its
 * committed trace: the prompts travel without the file's comments, and the worker's copy
 * has another digest; the trace is still the one for them (and recorded with the file's
 * digest). The same file with one prompt changed is refused. */
static void test_verify_own_prompts_file(void **s)
{
    (void)s;
    tu_require_model();
    const char *src = tu_require_src();
    char ref[4096], pf[4096], bad[1200];
    snprintf(ref, sizeof ref, "%s/verify/references/b179c9523d0e6a0f-310f18e97323f258.json", src);
    snprintf(pf, sizeof pf, "%s/verify/prompts/base.txt", src);
    char *out = tu_cli(0, "  prompt 0: PASS  (all 4 steps agree)\n[verify] PASS (1/1 prompts pass)",
                       "verify --model base --prompts-file '%s' --reference '%s' --max-prompts 1 "
                       "--n-tokens 4 --threads 1 --reports '%s/vp' --db '%s/v.db'",
                       pf, ref, tmp(), tmp());
    free(out);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "grep -h '\"prompts_sha256\"' '%s'/vp/*.json", tmp());
    tu_result r = tu_run(cmd);
    assert_non_null(strstr(r.out, "310f18e97323f258"));
    free(r.out);
    /* without --reference: found by the file's digest */
    free(tu_cli(0, "[verify] PASS (1/1 prompts pass)",
                "verify --model base --prompts-file '%s' --max-prompts 1 --n-tokens 4 --threads 1 "
                "--reports '%s/vp' --db '%s/v.db'", pf, tmp(), tmp()));
    snprintf(bad, sizeof bad, "%s/base-changed.txt", tmp());
    snprintf(cmd, sizeof cmd, "sed 's/^The capital of France is$/The capital of Spain is/' '%s' > '%s'",
             pf, bad);
    r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' verify --model base --prompts-file '%s' --reference '%s' "
             "--max-prompts 1 --n-tokens 4 --threads 1 --db '%s/v.db' 2>&1",
             tu_env("NB_BIN", "npubench"), bad, ref, tmp());
    r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "made for prompt set 310f18e97323f258 (8 prompts)"));
    free(r.out);
}

/* Progress of a local command (on a TTY, or NPUBENCH_PROGRESS=1): per prompt, its total
 * fixed from the start, then done; silent otherwise (NPUBENCH_PROGRESS=0). It printed
 * nothing until the end. */
static void test_local_progress(void **s)
{
    (void)s;
    tu_require_model();
    char cmd[4096];
    /* 3 prompts of 32 tokens: the worker reports every 250 ms, so some report lands inside
     * a prompt and its token line ("verify: prompt 1/3, token 17/32") is printed */
    snprintf(cmd, sizeof cmd, "NPUBENCH_PROGRESS=1 '%s' verify --max-prompts 3 --n-tokens 32 "
             "--threads 1 --db '%s/pr.db' 2>&1 >/dev/null", tu_env("NB_BIN", "npubench"), tmp());
    tu_result r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "[job "));
    assert_non_null(strstr(r.out, "] done"));
    const char *tl = strstr(r.out, "] running verify: prompt ");
    assert_non_null(tl);
    int unit, ntok, tok, n = sscanf(tl, "] running verify: prompt %d/3, token %d/%d", &unit,
                                    &tok, &ntok);
    assert_int_equal(n, 3);
    assert_true(unit >= 1 && unit <= 3 && tok >= 1 && tok <= 32 && ntok == 32);
    assert_null(strchr(r.out, '\r')); /* not a terminal: plain lines */
    for (const char *p = r.out; (p = strstr(p, "/")); p++) /* no other total ever shown */
        if (p > r.out && p[-1] >= '0' && p[-1] <= '9')
            assert_int_equal(p[1], '3'); /* 3 prompts, 32 tokens */
    free(r.out);
    snprintf(cmd, sizeof cmd, "NPUBENCH_PROGRESS=0 '%s' verify --max-prompts 1 --n-tokens 4 "
             "--threads 1 --db '%s/pr.db' 2>&1 >/dev/null", tu_env("NB_BIN", "npubench"), tmp());
    r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "[job "));
    free(r.out);
}

/* diagnosis: every layer against the committed HF hidden states, a report written */
static void test_diagnosis(void **s)
{
    (void)s;
    tu_require_model();
    char *out = tu_cli(0, "[diagnosis] prompt \"The capital of France is\" (5 positions) — "
                       "informational, never fails\n"
                       "layer                    cos_min    cos_p5   cos_med  cos_mean   max_abs\n"
                       "L0                      0.9999*\nL29 (post-norm)         0.999*\n"
                       "Report: *",
                    "diagnosis --threads 1 --db '%s/l.db' --reports '%s/rep'", tmp(), tmp());
    free(out);
    tu_result r;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ls '%s/rep' | grep -c '^diagnosis_.*\\.\\(json\\|md\\)$'", tmp());
    r = tu_run(cmd);
    assert_string_equal(r.out, "2\n");
    free(r.out);
    free(tu_cli(2, "npubench diagnosis: error: no HF reference trace for model b179c9523d0e6a0f and "
                "prompt 7d6cb370f24461b5 *",
             "diagnosis --threads 1 --db '%s/l.db' --prompt 'Never traced'", tmp()));
}

/* A report names the trace as the preset names it (verify/references/...), with its digest,
 * never the scratch copy the worker wrote of the coordinator's bytes (/tmp/.../trace-*) */
static void test_report_names_real_trace(void **s)
{
    (void)s;
    tu_require_model();
    const char *src = tu_require_src();
    free(tu_cli(0, "[verify] PASS (1/1 prompts pass)\nReport: *",
             "verify --max-prompts 1 --n-tokens 4 --threads 1 --reports '%s/vt' --db '%s/v.db'",
             tmp(), tmp()));
    free(tu_cli(0, "Report: *", "diagnosis --threads 1 --reports '%s/vt' --db '%s/v.db'", tmp(),
             tmp()));
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s/vt' && sha256sum '%s/verify/references/b179c9523d0e6a0f-f31be4262e898413.json' "
             "| cut -c1-64 && grep -h -e '\"trace' -e '\"reference\"' -e '\"reference_sha256' "
             "-e '^| reference |' verify_*.json verify_*.md diagnosis_*.json", tmp(), src);
    tu_result r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    char sha[65] = "", want[512];
    memcpy(sha, r.out, 64);
    snprintf(want, sizeof want, "\"trace\":\"verify/references/b179c9523d0e6a0f-f31be4262e898413"
             ".json\",\n      \"trace_sha256\":\"%s\",", sha);
    assert_non_null(strstr(r.out, want));
    snprintf(want, sizeof want, "| reference | verify/references/b179c9523d0e6a0f-f31be4262e898413"
             ".json (`%.16s`) (", sha);
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "\"reference\":\"verify/references/b179c9523d0e6a0f-diag-"));
    assert_non_null(strstr(r.out, "\"reference_sha256\":\""));
    assert_null(strstr(r.out, "/trace-"));
    free(r.out);
}

/* profile: the phases and one line per kernel, the call counts those of 30 layers */
static void test_profile(void **s)
{
    (void)s;
    tu_require_model();
    free(tu_cli(0, "Phase                         ms\n  setup (once)  *\n  prefill total  *\n"
                "  decode per token *\n  LM head per call *\n"
                "Kernel (all 1 repetitions)  calls   total ms     avg ms\n"
                "  embedding                     2 *\n  rmsnorm                     120 *\n"
                "  qkv_proj                     60 *\n  attention                    60 *\n"
                "  lm_head                       2 *\n"
                "Prompt tokens: 42, generated tokens: 2, repetitions: 1\nReport: *",
             "profile --n-tokens 2 --reps 1 --warmup 0 --threads 1 --db '%s/l.db' --reports "
             "'%s/prof'", tmp(), tmp()));
    /* the report beside verify's, named with the model: its phases and kernels in ms */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s/prof' && ls && grep -c '\"lm_head\"' "
             "profile_SmolLM2-135M-Instruct_*.json && grep -c '^| prefill | 1 | ' "
             "profile_SmolLM2-135M-Instruct_*.md", tmp());
    tu_result r = tu_run(cmd);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, ".json\nprofile_SmolLM2-135M-Instruct_"));
    assert_non_null(strstr(r.out, ".md\n2\n1\n")); /* a phase and a kernel; the md's phase */
    free(r.out);
}

/* verify's verdict through the binary: the committed trace passes (exit 0); the same trace
 * with step 2 of prompt 0 replaced by tokens the model never picks fails there (exit 1),
 * named in the summary and in the report. */
static void test_verify_verdicts(void **s)
{
    (void)s;
    tu_require_model();
    const char *src = tu_require_src();
    char ref[4096], bad[4096];
    snprintf(ref, sizeof ref, "%s/verify/references/b179c9523d0e6a0f-f31be4262e898413.json",
             src);
    free(tu_cli(0, "[verify] model SmolLM2-135M-Instruct (b179c9523d0e6a0f) cpu/bf16, 1 prompts x "
                "4 tokens, top-5\n"
                "  prompt 0: PASS  (all 4 steps agree)\n[verify] PASS (1/1 prompts pass)",
             "verify --max-prompts 1 --n-tokens 4 --threads 1 --reference '%s' --reports "
             "'%s/vr0' --db '%s/v.db'", ref, tmp(), tmp()));
    json_object *root = json_object_from_file(ref), *prompts, *steps;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "prompts", &prompts));
    assert_true(json_object_object_get_ex(json_object_array_get_idx(prompts, 0), "steps", &steps));
    json_object *st = json_object_array_get_idx(steps, 2), *ids = json_object_new_array();
    for (int i = 1; i <= 5; i++)
        json_object_array_add(ids, json_object_new_int(i));
    json_object_object_add(st, "token", json_object_new_int(1));
    json_object_object_add(st, "topk_ids", ids);
    snprintf(bad, sizeof bad, "%s/bad-trace.json", tmp());
    assert_int_equal(json_object_to_file(bad, root), 0);
    json_object_put(root);
    free(tu_cli(1, "  prompt 0: FAIL  diverge at step 2: device 504 (ref margin > 1.750) vs "
                "reference 1 — step 2: device token 504 not in reference top-5\n"
                "[verify] FAIL (0/1 prompts pass)\nReport: *",
             "verify --max-prompts 1 --n-tokens 4 --threads 1 --reference '%s' --reports "
             "'%s/vr1' --db '%s/v.db'", bad, tmp(), tmp()));
    char cmd[4096];
    /* reports are named with the model's display name */
    snprintf(cmd, sizeof cmd, "ls '%s'/vr1 | grep -c '^verify_topk_token_SmolLM2-135M-Instruct_'",
             tmp());
    tu_result rn = tu_run(cmd);
    assert_string_equal(rn.out, "2\n"); /* the .json and the .md */
    free(rn.out);
    snprintf(cmd, sizeof cmd, "cat '%s'/vr1/verify_topk_token_*.md", tmp());
    tu_result r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    print_message("%s", r.out ? r.out : "");
    assert_non_null(strstr(r.out, "# npubench verify — FAIL\n"));
    assert_non_null(strstr(r.out, "\n| 0 | FAIL | step 2 | 504 `The` (-1; ref margin > 1.750) "
                                  "| 1 `<\\|im_start\\|>` (-1) | 504, "));
    assert_non_null(strstr(r.out, " | 1, 2, 3, 4, 5 |\n|  | agreed prefix: ⏎⏎ — **step 2: "
                                  "device token 504 not in reference top-5** |"));
    assert_non_null(strstr(r.out, "\n**Summary:** 0/1 prompts pass — FAIL ("));
    free(r.out);
}

/* A decode-path defect the gate does not see (NPUBENCH_FAULT=kv_short: decode attends one KV
 * position fewer; divergence at step 6, inside the top-5): through the embedded service the
 * run stays the production gate's PASS (exit 0), flagged on the prompt, the summary, the
 * report JSON and Markdown; --strict makes it a FAIL (exit 1). */
static void test_verify_decode_defect(void **s)
{
    (void)s;
    tu_require_model();
    setenv("NPUBENCH_FAULT", "kv_short", 1);
    char *out = tu_cli(0, "  prompt 0: PASS (decode-path defect)  diverge at step 6: *\n"
                          "    decode-path defect: decode step 1 differs from a cache-free "
                          "prefill of the same tokens by 2.12 logits (tolerance 0.25)\n"
                          "[verify] PASS (1 decode-path defect) (1/1 prompts pass)",
                       "verify --max-prompts 1 --n-tokens 8 --threads 1 --reports '%s/vd0' "
                       "--db '%s/vd.db'", tmp(), tmp());
    free(out);
    free(tu_cli(1, "  prompt 0: FAIL (decode-path defect, --strict)  diverge at step 6: *\n"
                   "[verify] FAIL (0/1 prompts pass)",
                "verify --strict --max-prompts 1 --n-tokens 8 --threads 1 --reports '%s/vd1' "
                "--db '%s/vd.db'", tmp(), tmp()));
    unsetenv("NPUBENCH_FAULT");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cat '%s'/vd0/verify_topk_token_*.json", tmp());
    tu_result r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    json_object *root = json_tokener_parse(r.out), *recs, *sum, *x;
    free(r.out);
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "records", &recs));
    json_object *rec = json_object_array_get_idx(recs, 0);
    assert_true(json_object_object_get_ex(rec, "status", &x));
    assert_string_equal(json_object_get_string(x), "PASS"); /* the production gate's */
    assert_true(json_object_object_get_ex(rec, "outcome", &x));
    assert_string_equal(json_object_get_string(x), "PASS (decode-path defect)");
    assert_true(json_object_object_get_ex(rec, "decode_check", &x) &&
                json_object_object_get_ex(x, "first_bad_step", &x));
    assert_int_equal(json_object_get_int(x), 1);
    assert_true(json_object_object_get_ex(root, "summary", &sum) &&
                json_object_object_get_ex(sum, "decode_path_defects", &x));
    assert_int_equal(json_object_get_int(x), 1);
    json_object_put(root);
    snprintf(cmd, sizeof cmd, "cat '%s'/vd0/verify_topk_token_*.md", tmp());
    r = tu_run(cmd);
    assert_non_null(strstr(r.out, "# npubench verify — PASS (1 decode-path defect)\n"));
    assert_non_null(strstr(r.out, "| 0 | PASS (decode-path defect) | step 6 |"));
    assert_non_null(strstr(r.out, "| 0 | **decode-path defect: decode step 1 differs"));
    free(r.out);
}

/* compare / reference / history over tests/data/db/history.ndjson (runs 1..5 with known
 * TTFT and TPS): every output format and the verdict's exit code */
static void test_compare_formats_and_reference(void **s)
{
    (void)s;
    const char *src = tu_require_src();
    char db[1200];
    snprintf(db, sizeof db, "%s/h.db", tmp());
    char want[2048];
    snprintf(want, sizeof want, "%s/tests/data/db/history.ndjson: 5 runs imported, 0 already "
             "stored, 0 bad", src);
    free(tu_cli(0, want, "import '%s/tests/data/db/history.ndjson' --db '%s'", src, db));
    /* OLD NEW; one value a side (p = 1) is no verdict however large the change */
    free(tu_cli(0, "  \"schema\":\"npubench.compare/1\",\n  \"run_id\":4,\n  \"base_run_id\":2,\n"
                "  \"outcome\":\"pass\",\n  \"exit_code\":0,\n  \"noise_band_pct\":5.0,\n"
                "  \"test\":\"mann-whitney-u two-sided\",\n  \"alpha\":0.05,\n"
                "      \"metric\":\"ttft\",\n"
                "      \"value\":471.0,\n      \"regression\":false,\n      \"p_value\":1.0,\n"
                "      \"metric\":\"tps\",",
             "compare 2 4 --json --db '%s'", db));
    free(tu_cli(0, "metric,base_run,base,run,value,delta_pct,regression,p_value\n"
                "ttft,2,415.9000,4,471.0000,+13.25,no,1\ntps,2,18.3000,4,16.2000,-11.48,no,1",
             "compare 2 4 --format csv --db '%s'", db));
    free(tu_cli(0, "| metric | base_run | base | run | value | delta_pct | regression | p_value |\n"
                "|---|---|---|---|---|---|---|---|\n"
                "| ttft | 2 | 415.9000 | 4 | 471.0000 | +13.25 | no | 1 |\n"
                "| tps | 2 | 18.3000 | 4 | 16.2000 | -11.48 | no | 1 |",
             "compare 2 4 --format md --tolerance 20 --db '%s'", db));
    free(tu_cli(2, "npubench compare: error: NOT_FOUND: no run with id 999 (Compare from *",
             "compare 999 2 --db '%s'", db));
    free(tu_cli(2, "npubench compare: '2x' is not a run id", "compare 2x 1 --db '%s'", db));
    free(tu_cli(2, "npubench compare: expected OLD NEW (two run ids, the base first), or RUN "
                "--against reference",
             "compare 2 --db '%s'", db));
    free(tu_cli(0, "reference of Llama-3.2-1B-Instruct: deployment 1 (Llama-3.2-1B-Instruct "
                "npu/bf16 on npu-strix-01)",
             "reference set --run 1 --db '%s'", db));
    free(tu_cli(0, "run 4: Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01 (bench, "
                "2025-03-12T02:00:05Z)\n"
                "reference: run 2: Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01 (bench, "
                "2025-03-11T02:00:07Z)\n"
                "matched: run 2, the newest of 2 like runs of the reference deployment 1 *\n"
                "TTFT (ms)          | 415.90         | 471.00         | 1.13× / +13.2%   | p=1 (1 "
                "vs 1)  ~\n"
                "TPS (tokens/s)     | 18.30          | 16.20          | 0.89× / -11.5%   | p=1 (1 "
                "vs 1)  ~",
             "compare 4 --against reference --db '%s'", db));
    free(tu_cli(2, "npubench reference: set: name a DEPLOYMENT id, --run N or --job N",
             "reference set --db '%s'", db));
    free(tu_cli(2, "npubench reference: '0' is not a deployment id", "reference set 0 --db '%s'",
             db));
    free(tu_cli(2, "npubench reference: error: NOT_FOUND: no deployment with id 999 *",
             "reference set 999 --db '%s'", db));
    free(tu_cli(2, "npubench reference: unset: name the MODEL (any of its names)",
             "reference unset --db '%s'", db));
    free(tu_cli(2, "npubench reference: expected 'set DEPLOYMENT' (a deployment id from `npubench "
                "history --json`), 'show [MODEL]' or 'unset MODEL'",
             "reference bogus --db '%s'", db));
    free(tu_cli(0, "Llama-3.2-1B-Instruct: deployment 1 (Llama-3.2-1B-Instruct npu/bf16 on "
                "npu-strix-01), set *",
             "reference show --db '%s'", db));
    free(tu_cli(0, "RUN,DATE (UTC),DEPLOYMENT,KIND,GATE,TTFT ms,TTFT sd,TPS,TPS sd,COMMIT,FLAG\n"
                "5,2025-03-13T00:00:00Z,Qwen2.5-0.5B-Instruct npu/bf16 @npu-strix-01,bench,?,"
                "199.70,,34.10,,-,imported\n"
                "2,2025-03-11T02:00:07Z,Llama-3.2-1B-Instruct npu/bf16 @npu-strix-01,bench,pass,"
                "415.90,,18.30,,-,imported",
             "history --format csv --db '%s'", db));
    char *out = tu_cli(0, "| RUN | DATE (UTC) | DEPLOYMENT | KIND | GATE | TTFT ms | TTFT sd | TPS | TPS sd "
                       "| COMMIT | FLAG |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
                       "| 5 | 2025-03-13T00:00:00Z | Qwen2.5-0.5B-Instruct npu/bf16 @npu-strix-01 "
                       "| bench | ? | 199.70 |  | 34.10 |  | - | imported |",
                    "history --format md --limit 2 --db '%s'", db);
    assert_null(strstr(out, "| 3 |")); /* --limit 2: runs 5 and 4 */
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_tokenize),
        cmocka_unit_test(test_verify_decode_defect),
        cmocka_unit_test(test_diagnosis),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_verify_verdicts),
        cmocka_unit_test(test_compare_formats_and_reference),
        cmocka_unit_test(test_local_ignores_lab_secret),
        cmocka_unit_test(test_verify_own_prompts_file),
        cmocka_unit_test(test_local_progress),
        cmocka_unit_test(test_report_names_real_trace),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
