/* test_json: common/nb_json's typed field readers, the one set every reader of a checked
 * document calls (deployments file, air config, imported rows, configs, traces). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "nb_json.h"
#include "testutil.h"

static json_object *doc(const char *text)
{
    json_object *o;
    nb_err err;
    if (nb_json_parse(text, strlen(text), "test", &o, &err))
        fail_msg("%s", err.msg);
    return o;
}

static void want(nb_code rc, const nb_err *err, const char *msg)
{
    assert_int_equal(rc, NB_EFORMAT);
    assert_string_equal(err->msg, msg);
}

/* Each reader: the value it reads, its default when absent, and one message shape naming the
 * field's path and its limit. */
static void test_readers(void **state)
{
    (void)state;
    json_object *o = doc("{\"n\": 5, \"big\": 5000, \"x\": 0.5, \"s\": \"abc\", \"b\": true, "
                         "\"e\": \"hf\", \"nul\": null, \"neg\": -1}");
    nb_err err;
    int64_t i;
    double d;
    char buf[4];
    int b, e;
    const char *const names[] = {"auto", "hf", "none", NULL};

    assert_int_equal(nb_json_need_int(o, "dep[0]", "n", 1, 0, 10, 7, &i, &err), NB_OK);
    assert_int_equal(i, 5);
    assert_int_equal(nb_json_need_int(o, "dep[0]", "absent", 0, 0, 10, 7, &i, &err), NB_OK);
    assert_int_equal(i, 7);
    assert_int_equal(nb_json_need_int(o, "dep[0]", "nul", 0, 0, 10, 7, &i, &err), NB_OK);
    assert_int_equal(i, 7);
    want(nb_json_need_int(o, "dep[0]", "big", 0, 0, 1024, 0, &i, &err), &err,
         "dep[0].big: must be an integer 0..1024, got 5000");
    want(nb_json_need_int(o, "dep[0]", "absent", 1, 0, 1024, 0, &i, &err), &err,
         "dep[0].absent: required");
    want(nb_json_need_int(o, NULL, "x", 0, 0, INT32_MAX, 0, &i, &err), &err,
         "x: must be a non-negative integer, got 0.5");

    assert_int_equal(nb_json_need_num(o, "cfg", "x", 1, 0, 1, 0, &d, &err), NB_OK);
    assert_true(d == 0.5);
    want(nb_json_need_num(o, "cfg", "neg", 0, 0, DBL_MAX, NAN, &d, &err), &err,
         "cfg.neg: must be a finite number >= 0, got -1");
    want(nb_json_need_num(o, "cfg", "big", 0, 0, 600, 0, &d, &err), &err,
         "cfg.big: must be a number 0..600, got 5000");
    want(nb_json_need_num(o, "cfg", "s", 0, -DBL_MAX, DBL_MAX, 0, &d, &err), &err,
         "cfg.s: must be a finite number, got \"abc\"");

    memcpy(buf, "zz", 3);
    assert_int_equal(nb_json_need_strcpy(o, "d", "absent", 0, 1, buf, sizeof buf, &err), NB_OK);
    assert_string_equal(buf, "zz"); /* absent leaves the default in place */
    assert_int_equal(nb_json_need_strcpy(o, "d", "s", 1, 1, buf, sizeof buf, &err), NB_OK);
    assert_string_equal(buf, "abc");
    char small[3];
    want(nb_json_need_strcpy(o, "d", "s", 1, 1, small, sizeof small, &err), &err,
         "d.s: must be a string of 1..2 bytes, got \"abc\"");
    want(nb_json_need_strcpy(o, "d", "n", 1, 0, small, sizeof small, &err), &err,
         "d.n: must be a string of at most 2 bytes, got 5");
    /* key NULL: o itself is the value, named by what (an array element) */
    json_object *arr = doc("[\"\", 7]");
    want(nb_json_need_strcpy(json_object_array_get_idx(arr, 0), "d.aliases[0]", NULL, 1, 1, buf,
                             sizeof buf, &err),
         &err, "d.aliases[0]: must be a string of 1..3 bytes, got \"\"");
    json_object_put(arr);

    assert_int_equal(nb_json_need_bool(o, "a", "b", 1, 0, &b, &err), NB_OK);
    assert_int_equal(b, 1);
    want(nb_json_need_bool(o, "a", "n", 1, 0, &b, &err), &err, "a.n: must be true or false, got 5");

    assert_int_equal(nb_json_need_enum(o, "a", "e", 1, names, -1, &e, &err), NB_OK);
    assert_int_equal(e, 1);
    assert_int_equal(nb_json_need_enum(o, "a", "absent", 0, names, -1, &e, &err), NB_OK);
    assert_int_equal(e, -1);
    want(nb_json_need_enum(o, "a", "s", 1, names, -1, &e, &err), &err,
         "a.s: must be auto, hf or none, got \"abc\"");
    json_object_put(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers),
    };
    return tu_run_group(tests, NULL, NULL);
}
