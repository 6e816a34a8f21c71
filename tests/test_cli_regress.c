/* test_cli_regress: `npubench regressions` over a real keyed coordinator — the list in each
 * format and by state, an acknowledgement refused without the admin key and taken with it, a
 * person's close, the refusals (unknown id, already fixed, usage), each exit code asserted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <json-c/json.h>
#include <math.h>
#include <sys/stat.h>

#include "testdb.h"

static char url[1300], ck[1200], ak[1200], dbpath[1200];
static pid_t coord_pid;
static int64_t flagged_run, dep_id;
static const int64_t t0 = 1700000000000LL;

static void key(char *path, size_t cap, const char *name, const char *value)
{
    snprintf(path, cap, "%s/%s", tu_group_tmp(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", value);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0);
}

/* A history with one flagged run, served by a coordinator with client and admin keys. */
static void start(void)
{
    char *db = dbpath, sock[1200];
    snprintf(dbpath, sizeof dbpath, "%s/r.db", tu_group_tmp());
    nb_db *h = tdb_open("r.db");
    int64_t dep = tdb_deployment(h, "strix-01");
    dep_id = dep;
    for (int i = 0; i < 8; i++)
        tdb_checked_run(h, dep, t0 + i * 1000, 100.0 + (i % 3) * 0.3, 0, NULL);
    flagged_run = tdb_checked_run(h, dep, t0 + 10000, 70.0, 0, NULL);
    nb_db_close(h);
    key(ck, sizeof ck, "client.key", "client-key-0123456789abcdef");
    key(ak, sizeof ak, "admin.key", "admin-key-0123456789abcdef");
    snprintf(sock, sizeof sock, "%s/r.sock", tu_group_tmp());
    snprintf(url, sizeof url, "ipc://%s", sock);
    coord_pid = tu_spawn("coord.log", "coordinator --listen '%s' --db '%s' --secret-file '%s' "
                                      "--admin-secret-file '%s'",
                         url, db, ck, ak);
    assert_true(tu_poll(20000, tu_ipc_ready(sock) || tu_exited(coord_pid)));
    assert_true(tu_ipc_ready(sock));
}

static int teardown(void **state)
{
    tu_stop(&coord_pid);
    tu_teardown_kill(state);
    return tu_group_teardown(state);
}

#define AS_CLIENT "--coordinator '%s' --secret-file '%s'"

static void test_list_ack_close(void **s)
{
    (void)s;
    start();
    char row[128];
    snprintf(row, sizeof row, "1,new,%lld,SmolLM2-135M-Instruct,strix-01,profile,*",
             (long long)flagged_run);
    char want[512];
    snprintf(want, sizeof want, "ID,STATE,RUN,MODEL,BOARD,KIND,FLAGGED,DETAIL,ACKNOWLEDGED,FIXED\n%s",
             row);
    free(tu_cli(0, want, "regressions --format csv " AS_CLIENT, url, ck));
    char *out = tu_cli(0, "", "regressions --format table " AS_CLIENT, url, ck);
    assert_non_null(strstr(out, "tps -30"));
    free(out);
    free(tu_cli(0, "(no regressions)", "regressions --state fixed " AS_CLIENT, url, ck));

    /* an acknowledgement is an admin action: the client key is refused */
    out = tu_cli(2, "", "regressions ack 1 --note 'driver 2.19, LAB-12' --by lead " AS_CLIENT,
                 url, ck);
    assert_non_null(strstr(out, "PERMISSION_DENIED: npubench.Client/RegressionUpdate: needs the "
                                "admin credential"));
    free(out);
    snprintf(want, sizeof want, "regression 1 (run %lld, SmolLM2-135M-Instruct on strix-01): "
                                "acknowledged",
             (long long)flagged_run);
    free(tu_cli(0, want, "regressions ack 1 --note 'driver 2.19, LAB-12' --by lead " AS_CLIENT,
                url, ak));
    /* listed by its new state, with who and why */
    out = tu_cli(0, "", "regressions --state acknowledged --format json " AS_CLIENT, url, ck);
    json_object *doc = json_tokener_parse(out), *arr, *g, *v;
    assert_non_null(doc);
    assert_true(json_object_object_get_ex(doc, "schema", &v));
    assert_string_equal(json_object_get_string(v), "npubench.regressions/1");
    assert_true(json_object_object_get_ex(doc, "regressions", &arr));
    assert_int_equal(json_object_array_length(arr), 1);
    g = json_object_array_get_idx(arr, 0);
    assert_true(json_object_object_get_ex(g, "ack_by", &v));
    assert_string_equal(json_object_get_string(v), "lead");
    assert_true(json_object_object_get_ex(g, "ack_note", &v));
    assert_string_equal(json_object_get_string(v), "driver 2.19, LAB-12");
    assert_true(json_object_object_get_ex(g, "state", &v));
    assert_string_equal(json_object_get_string(v), "acknowledged");
    assert_true(json_object_object_get_ex(g, "run_id", &v));
    assert_int_equal(json_object_get_int64(v), flagged_run);
    json_object_put(doc);
    free(out);
    free(tu_cli(0, "(no regressions)", "regressions --state new " AS_CLIENT, url, ck));

    /* refusals: an unknown id, usage */
    out = tu_cli(2, "", "regressions ack 99 --note x --by lead " AS_CLIENT, url, ak);
    assert_non_null(strstr(out, "no regression 99"));
    free(out);
    free(tu_cli(2, "npubench regressions: ack: --note TEXT is required (why it is acknowledged)",
                "regressions ack 1 --by lead " AS_CLIENT, url, ak));
    free(tu_cli(2, "npubench regressions: abc: expected a regression id (a whole number >= 1, "
                   "the ID column)",
                "regressions close abc --by lead " AS_CLIENT, url, ak));
    free(tu_cli(2, "npubench regressions: --state 'open': expected new, acknowledged or fixed",
                "regressions --state open " AS_CLIENT, url, ck));

    /* a later run of the same series back in the band (stored while the coordinator serves):
     * fixed on its own, by that run */
    nb_db *h = NULL;
    nb_err err = {0};
    if (nb_db_open(dbpath, NULL, &h, &err))
        fail_msg("%s", err.msg);
    int64_t good = tdb_checked_run(h, dep_id, t0 + 11000, 100.0, 0, NULL);
    nb_db_close(h);
    out = tu_cli(0, "", "regressions --state fixed --format csv " AS_CLIENT, url, ck);
    snprintf(want, sizeof want, ",\"lead: driver 2.19, LAB-12\",run %lld back in the band",
             (long long)good);
    if (!strstr(out, want))
        fail_msg("no \"%s\" in\n%s", want, out);
    free(out);
    out = tu_cli(2, "", "regressions close 1 --by lead " AS_CLIENT, url, ak);
    snprintf(want, sizeof want, "regression 1 is already fixed (run %lld is back in the noise "
                                "band): nothing to close",
             (long long)good);
    assert_non_null(strstr(out, want));
    free(out);

    /* another one, closed by a person; then there is nothing more to do */
    if (nb_db_open(dbpath, NULL, &h, &err))
        fail_msg("%s", err.msg);
    tdb_checked_run(h, dep_id, t0 + 20000, 60.0, 0, NULL);
    nb_db_close(h);
    free(tu_cli(0, "2,new,*", "regressions --state new --format csv " AS_CLIENT, url, ck));
    free(tu_cli(0, "regression 2 (run *", "regressions close 2 --by lead --note 'board "
                                          "replaced' " AS_CLIENT,
                url, ak));
    out = tu_cli(0, "", "regressions --state fixed --format csv " AS_CLIENT, url, ck);
    assert_non_null(strstr(out, ",closed by lead: board replaced"));
    free(out);
    out = tu_cli(2, "", "regressions ack 2 --note again --by lead " AS_CLIENT, url, ak);
    assert_non_null(strstr(out, "regression 2 is already fixed (closed by lead): nothing to "
                                "acknowledge"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_ack_close),
    };
    return tu_run_group(tests, tu_group_setup, teardown);
}
