/* test_cancel: run, profile, verify and diagnosis stop at the next token or prompt once the
 * cancel callback asks; prints the latency (no timed assertion; docs/service.md quotes it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nb_bench.h"
#include "nb_diagnosis.h"
#include "nb_diagnosis_run.h"
#include "nb_time.h"
#include "nb_verify.h"
#include "nb_verify_run.h"
#include "testutil.h"

static nb_deploy *dep;

/* A cancel request raised by a timer thread, and when it was raised. */
typedef struct trigger {
    int after_ms;
    int fired;
    double fired_at, polls;
    pthread_mutex_t mu;
    pthread_t th;
} trigger;

static void *fire(void *arg)
{
    trigger *t = arg;
    struct timespec ts = {t->after_ms / 1000, (long)(t->after_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&t->mu);
    t->fired = 1;
    t->fired_at = nb_now_ms();
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static int is_cancelled(void *user)
{
    trigger *t = user;
    pthread_mutex_lock(&t->mu);
    int f = t->fired;
    t->polls++;
    pthread_mutex_unlock(&t->mu);
    return f;
}

static void arm(trigger *t, int after_ms)
{
    memset(t, 0, sizeof *t);
    t->after_ms = after_ms;
    pthread_mutex_init(&t->mu, NULL);
    assert_int_equal(pthread_create(&t->th, NULL, fire, t), 0);
}

/* Joins the timer; prints and returns the ms from the request to the return. */
static double latency(trigger *t, const char *what)
{
    double back = nb_now_ms();
    pthread_join(t->th, NULL);
    assert_true(t->fired);
    double ms = back - t->fired_at;
    print_message("cancel latency of %s: %.1f ms (%.0f polls)\n", what, ms, t->polls);
    pthread_mutex_destroy(&t->mu);
    return ms;
}

static int setup(void **state)
{
    (void)state;
    if (!tu_model())
        return 0;
    nb_deploy_spec s;
    nb_deploy_spec_default(&s);
    snprintf(s.model, sizeof s.model, "instruct");
    s.threads = 1;
    nb_err err;
    if (nb_deploy_open(&s, &dep, &err)) {
        print_error("deploy: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nb_deploy_close(dep);
    return 0;
}

static void need_model(void)
{
    if (!dep)
        tu_require_model(); /* fails under CI, skips with the reason elsewhere */
}

/* 20 repetitions (+ warmup) of 64 tokens take seconds; a cancel after 200 ms ends inside
 * the first: NB_ECANCELED naming the token, no samples. */
static void bench_cancelled(int profile, int warmup, const char *what)
{
    need_model();
    nb_run_opts o;
    nb_run_opts_default(&o);
    o.n_tokens = 64;
    o.reps = 20;
    o.warmup = warmup;
    o.stop_eog = 0;
    trigger t;
    o.cancel = (nb_cancel){is_cancelled, &t};
    arm(&t, 200);
    nb_profile_result p;
    nb_err err = {0};
    nb_code rc = profile ? nb_bench_profile(dep, &o, &p, &err)
                         : nb_bench_run(dep, &o, &p.run, &err);
    assert_int_equal(rc, NB_ECANCELED);
    latency(&t, what);
    assert_non_null(strstr(err.msg, "cancelled at token"));
    assert_int_equal(p.run.n, 0); /* freed: a cancelled run reports no samples */
}

static void test_run_stops_between_tokens(void **s)
{
    (void)s;
    bench_cancelled(0, 0, "run (20 x 64 tokens)");
}

static void test_profile_stops(void **s)
{
    (void)s;
    bench_cancelled(1, 1, "profile (1 + 20 x 64 tokens)");
}

static void test_verify_stops(void **s)
{
    (void)s;
    need_model();
    trigger t;
    nb_verify_opts o = {0};
    o.cancelled = is_cancelled;
    o.progress_user = &t;
    arm(&t, 200);
    nb_verify_result v;
    nb_err err = {0};
    assert_int_equal(nb_verify_run(dep, &o, &v, &err), NB_ECANCELED);
    latency(&t, "verify (8 prompts)");
    nb_verify_result_free(&v);
}

static void test_diagnosis_stops(void **s)
{
    (void)s;
    need_model();
    trigger t;
    arm(&t, 0);
    pthread_join(t.th, NULL); /* already requested */
    nb_cancel c = {is_cancelled, &t};
    nb_diagnosis_result r;
    nb_err err = {0};
    assert_int_equal(nb_diagnosis_run(dep, NULL, NULL, NULL, &c, &r, &err), NB_ECANCELED);
    assert_string_equal(err.msg, "diagnosis cancelled before the forward pass");
    nb_diagnosis_result_free(&r);
    pthread_mutex_destroy(&t.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_stops_between_tokens),
        cmocka_unit_test(test_profile_stops),
        cmocka_unit_test(test_verify_stops),
        cmocka_unit_test(test_diagnosis_stops),
    };
    return tu_run_group(tests, setup, teardown);
}
