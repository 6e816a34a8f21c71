/* test_prompts: the prompt-file format, read by C (nb_prompts_load) and by Python
 * (verify/prompt_file.py, the HF reference's reader) from one fixture: identical lists. */
#include <json-c/json.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "nb_prompts.h"
#include "testutil.h"

/* tests/data/prompts/every_case.txt, prompt by prompt (the fixture says why each). */
static const char *const expected[] = {
    "plain prompt",
    "leading spaces are dropped",
    "trailing spaces and a tab are dropped",
    "both ends",
    "inner   spacing\tis kept",
    "crlf line",
    "a lone CR",
    "splits the line",
    "unicode spaces around",
    "vertical",
    "tab and form",
    "feed split lines",
    "unit separator is whitespace, not a break",
    "next line",
    "and line",
    "and paragraph",
    "separators split",
    "a # mid-line is prompt text",
    "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
    "zero\xe2\x80\x8bwidth space is not whitespace\xe2\x80\x8b",
    "last line without a newline",
};
#define N_EXPECTED ((int)(sizeof expected / sizeof expected[0]))

static void fixture(char *buf, size_t size)
{
    snprintf(buf, size, "%s/tests/data/prompts/every_case.txt", tu_env("NB_SRC", "."));
}

static int have_python(void)
{
    tu_result r = tu_run("python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))'");
    free(r.out);
    return r.code == 0;
}

/* Python's reader on path: its JSON list (stdout only), or NULL; *code = its exit. */
static json_object *python_prompts(const char *path, int *code, char **out)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 '%s/verify/prompt_file.py' '%s'%s", tu_env("NB_SRC", "."),
             path, out ? "" : " 2>/dev/null");
    tu_result r = tu_run(cmd);
    *code = r.code;
    json_object *j = r.code == 0 ? json_tokener_parse(r.out) : NULL;
    if (out)
        *out = r.out;
    else
        free(r.out);
    return j;
}

static void test_c_reader(void **state)
{
    (void)state;
    char path[2048];
    fixture(path, sizeof path);
    nb_prompts ps;
    nb_err err;
    assert_int_equal(nb_prompts_load(path, &ps, &err), NB_OK);
    assert_int_equal(ps.n, N_EXPECTED);
    for (int i = 0; i < N_EXPECTED; i++)
        assert_string_equal(ps.items[i], expected[i]);
    nb_prompts_free(&ps);
}

static void test_python_reader_agrees(void **state)
{
    (void)state;
    tu_require(have_python(), "python3 is not installed (scripts/setup.sh installs it)");
    char path[2048];
    fixture(path, sizeof path);
    int code;
    json_object *j = python_prompts(path, &code, NULL);
    assert_int_equal(code, 0);
    assert_non_null(j);
    assert_true(json_object_is_type(j, json_type_array));
    assert_int_equal((int)json_object_array_length(j), N_EXPECTED);
    for (int i = 0; i < N_EXPECTED; i++)
        assert_string_equal(json_object_get_string(json_object_array_get_idx(j, (size_t)i)),
                            expected[i]);
    json_object_put(j);
}

/* Every code point, against the Python that mlir-air's reader runs on. */
static void test_character_classes_match_python(void **state)
{
    (void)state;
    tu_require(have_python(), "python3 is not installed (scripts/setup.sh installs it)");
    tu_result r = tu_run(
        "python3 -c 'import json; r = range(0x110000); print(json.dumps("
        "[[c for c in r if chr(c).isspace()], "
        "[c for c in r if len((\"a\" + chr(c) + \"b\").splitlines()) > 1]]))' 2>/dev/null");
    assert_int_equal(r.code, 0);
    json_object *j = json_tokener_parse(r.out);
    free(r.out);
    assert_non_null(j);
    json_object *sets[2] = {json_object_array_get_idx(j, 0), json_object_array_get_idx(j, 1)};
    int (*const fn[2])(uint32_t) = {nb_prompts_is_space, nb_prompts_is_line_break};
    for (int s = 0; s < 2; s++) {
        size_t n = json_object_array_length(sets[s]), k = 0;
        for (uint32_t c = 0; c < 0x110000; c++) {
            int py = k < n && (uint32_t)json_object_get_int(json_object_array_get_idx(
                                  sets[s], k)) == c;
            k += py;
            if (fn[s](c) != py)
                fail_msg("U+%04X: %s is %d in C, %d in Python", c,
                         s ? "line break" : "whitespace", fn[s](c), py);
        }
    }
    json_object_put(j);
}

/* The refusals: both sides refuse the same files, naming the same line. */
static void test_both_refuse(void **state)
{
    (void)state;
    int py = have_python();
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    static const struct {
        const char *bytes;
        size_t len;
        const char *c_msg, *py_msg;
    } cases[] = {
#define BYTES(s) s, sizeof s - 1
        {BYTES("# ok\nfine\r\nbad\0prompt\n"), ":3: NUL character in a prompt",
         ":3: NUL character in a prompt"},
        {BYTES("# only a comment\n \xc2\xa0\n\xe3\x80\x80\n\x0b\n"), "no prompts", "no prompts"},
        {BYTES("ok\n\xff\n"), ":2: invalid UTF-8 at byte offset 3",
         ":2: invalid UTF-8 at byte offset 3"},
        {BYTES("a\r\nb\rc\x0b" "d\xe2\x80\xa8" "e \xc0\x80"),
         ":5: invalid UTF-8 at byte offset 13", ":5: invalid UTF-8 at byte offset 13"},
#undef BYTES
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/case%zu.txt", dir, i);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(cases[i].bytes, 1, cases[i].len, f), cases[i].len);
        fclose(f);
        nb_prompts ps;
        nb_err err;
        assert_int_equal(nb_prompts_load(path, &ps, &err), NB_EINVAL);
        if (!strstr(err.msg, cases[i].c_msg))
            fail_msg("case %zu: C says '%s', expected '%s'", i, err.msg, cases[i].c_msg);
        if (!py)
            continue;
        int code;
        char *out = NULL;
        json_object *j = python_prompts(path, &code, &out);
        assert_null(j);
        assert_int_equal(code, 2);
        if (!strstr(out, cases[i].py_msg))
            fail_msg("case %zu: Python says '%s', expected '%s'", i, out, cases[i].py_msg);
        free(out);
    }
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c_reader),
        cmocka_unit_test(test_python_reader_agrees),
        cmocka_unit_test(test_character_classes_match_python),
        cmocka_unit_test(test_both_refuse),
    };
    return tu_run_group(tests, NULL, NULL);
}
