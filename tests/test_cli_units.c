/* test_cli_units: the CLI's parts that no command line reaches on demand, in-process and
 * exact — the option parser and durations (every error naming the option and its limit),
 * JUnit XML for every kind of verdict (escaping, gate ranks and margins, results that gave no
 * verdict, jobs that never ran, a file that cannot be written), and nb_print_job's answer to
 * jobs a coordinator can send: cancelled or expired, without a result, of an unknown kind, a
 * result in error or without metrics, a matrix group with a regression. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "nb_air_scan.h"
#include "nb_args.h"
#include "nb_deployments.h"
#include "nb_junit.h"
#include "nb_print.h"
#include "nb_svc.h"
#include "testutil.h"

/* ---- capturing what a printer writes ---- */

typedef struct capture {
    char *buf;
    size_t len;
    FILE *f;
} capture;

static FILE *cap_open(capture *c)
{
    memset(c, 0, sizeof *c);
    c->f = open_memstream(&c->buf, &c->len);
    assert_non_null(c->f);
    return c->f;
}

/* What was written, NUL-terminated (the caller frees). */
static char *cap_close(capture *c)
{
    fclose(c->f);
    return c->buf;
}

/* stderr into a file until err_end, which returns what was written (the caller frees). */
static int err_fd = -1;
static FILE *err_tmp;

static void err_begin(void)
{
    fflush(stderr);
    err_tmp = tmpfile();
    assert_non_null(err_tmp);
    err_fd = dup(2);
    assert_true(err_fd >= 0);
    assert_true(dup2(fileno(err_tmp), 2) >= 0);
}

static char *err_end(void)
{
    fflush(stderr);
    dup2(err_fd, 2);
    close(err_fd);
    long n = ftell(err_tmp);
    assert_true(n >= 0);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    rewind(err_tmp);
    size_t got = fread(s, 1, (size_t)n, err_tmp);
    s[got] = '\0';
    fclose(err_tmp);
    return s;
}

/* ---- the option parser ---- */

typedef struct parsed {
    const char *name;
    int n, on, seven, help;
    nb_strlist tags;
    const char *pos[2];
    int np;
    nb_err err;
} parsed;

static nb_code parse(parsed *p, int with_help, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    p->np = -1;
    nb_opt opts[] = {
        {"name", NB_OPT_STR, &p->name, 0, 0, "a string"},
        {"n", NB_OPT_INT, &p->n, 1, 10, "a number"},
        {"on", NB_OPT_FLAG, &p->on, 0, 0, NULL},
        {"seven", NB_OPT_FLAG, &p->seven, 7, 0, "a flag that sets 7"},
        {"tag", NB_OPT_LIST, &p->tags, 0, 0, "repeatable"},
        {"help", NB_OPT_FLAG, &p->help, 0, 0, "this help"},
    };
    return nb_args_parse(argc, argv, opts, NB_NOPTS(opts) - !with_help, p->pos, 2, &p->np,
                         &p->err);
}

#define ARGV(...) (sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)), (char *[]){__VA_ARGS__}

/* Parses and asserts the error message. */
static void parse_fails(const char *want, int argc, char **argv)
{
    parsed p;
    assert_int_equal(parse(&p, 1, argc, argv), NB_EINVAL);
    assert_string_equal(p.err.msg, want);
}

static void test_args_parse(void **s)
{
    (void)s;
    parsed p;
    /* both spellings of a value, flags, a list, "-" as a word, "--" ending the flags */
    assert_int_equal(parse(&p, 1, ARGV("--name", "x", "--n=3", "-", "--on", "--seven", "--tag",
                                       "a", "--tag=b=c", "--", "--n")),
                     NB_OK);
    assert_string_equal(p.name, "x");
    assert_int_equal(p.n, 3);
    assert_int_equal(p.on, 1);
    assert_int_equal(p.seven, 7);
    assert_int_equal(p.tags.n, 2);
    assert_string_equal(p.tags.items[0], "a");
    assert_string_equal(p.tags.items[1], "b=c");
    assert_int_equal(p.np, 2);
    assert_string_equal(p.pos[0], "-");
    assert_string_equal(p.pos[1], "--n");
    assert_int_equal(p.help, 0);
    /* -h is --help where the command has one, else a word like any other */
    assert_int_equal(parse(&p, 1, ARGV("-h")), NB_OK);
    assert_int_equal(p.help, 1);
    assert_int_equal(p.np, 0);
    assert_int_equal(parse(&p, 0, ARGV("-h")), NB_OK);
    assert_int_equal(p.help, 0);
    assert_int_equal(p.np, 1);
    assert_string_equal(p.pos[0], "-h");
    /* after "--", -h is a word too */
    assert_int_equal(parse(&p, 1, ARGV("--", "-h")), NB_OK);
    assert_int_equal(p.help, 0);
    assert_string_equal(p.pos[0], "-h");
    /* a bounds-checked number at both ends */
    assert_int_equal(parse(&p, 1, ARGV("--n", "1")), NB_OK);
    assert_int_equal(p.n, 1);
    assert_int_equal(parse(&p, 1, ARGV("--n", "10")), NB_OK);
    assert_int_equal(p.n, 10);

    parse_fails("--n: 11 is outside the allowed range 1..10", ARGV("--n", "11"));
    parse_fails("--n: 0 is outside the allowed range 1..10", ARGV("--n=0"));
    parse_fails("--n: '3x' is not an integer", ARGV("--n", "3x"));
    parse_fails("--n: '' is not an integer", ARGV("--n="));
    parse_fails("--n: '99999999999999999999' is not an integer",
                ARGV("--n", "99999999999999999999"));
    parse_fails("--n needs a value", ARGV("--on", "--n"));
    parse_fails("--name needs a value", ARGV("--name"));
    parse_fails("--on takes no value", ARGV("--on=1"));
    parse_fails("unknown option '--nope'", ARGV("--nope=1"));
    parse_fails("unknown option '--na'", ARGV("--na", "x"));
    parse_fails("unexpected argument 'c'", ARGV("a", "b", "c"));
    /* a list holds NB_LIST_MAX (32) values: the 33rd is refused, naming the option */
    char *argv[2 * NB_LIST_MAX + 2];
    for (int i = 0; i <= NB_LIST_MAX; i++) {
        argv[2 * i] = "--tag";
        argv[2 * i + 1] = "t";
    }
    assert_int_equal(parse(&p, 1, 2 * NB_LIST_MAX, argv), NB_OK);
    assert_int_equal(p.tags.n, NB_LIST_MAX);
    parse_fails("--tag given more than 32 times", 2 * NB_LIST_MAX + 2, argv);
}

static void test_args_usage(void **s)
{
    (void)s;
    int n = 0, on = 0;
    const char *str = NULL;
    nb_strlist l = {.n = 0};
    nb_opt opts[] = {
        {"name", NB_OPT_STR, &str, 0, 0, "a string"},
        {"n", NB_OPT_INT, &n, 1, 10, "a number"},
        {"on", NB_OPT_FLAG, &on, 0, 0, NULL},
        {"tag", NB_OPT_LIST, &l, 0, 0, "repeatable"},
    };
    capture c;
    nb_args_usage(cap_open(&c), "npubench thing [options]", opts, NB_NOPTS(opts));
    char *out = cap_close(&c);
    assert_string_equal(out, "usage: npubench thing [options]\n"
                             "  --name V                 a string\n"
                             "  --n N                    a number\n"
                             "  --on                     \n"
                             "  --tag V                  repeatable\n");
    free(out);
}

static void duration_is(const char *s, int64_t want)
{
    nb_err err;
    int64_t ms = 0;
    if (nb_args_duration("--expire-after", s, 30LL * 86400 * 1000, &ms, &err))
        fail_msg("'%s': %s", s, err.msg);
    if (ms != want)
        fail_msg("'%s': %lld ms, expected %lld", s, (long long)ms, (long long)want);
}

static void duration_fails(const char *s, const char *want)
{
    nb_err err;
    int64_t ms = 12345;
    assert_int_equal(nb_args_duration("--health-retry", s, 30LL * 86400 * 1000, &ms, &err),
                     NB_EINVAL);
    assert_string_equal(err.msg, want);
    assert_int_equal(ms, 12345); /* untouched */
}

static void test_args_duration(void **s)
{
    (void)s;
    duration_is("90", 90000); /* plain numbers are seconds */
    duration_is("90s", 90000);
    duration_is("250ms", 250);
    duration_is("15m", 900000);
    duration_is("2h", 7200000);
    duration_is("1.5h", 5400000);
    duration_is("1d", 86400000);
    duration_is("30d", 2592000000LL); /* the limit itself */
    duration_is("0.4ms", 1);          /* rounded, but never to 0 (0 means "the default") */
    duration_is("1.6ms", 2);
    duration_is("never", -1);
    const char *shape = "expected a positive duration such as 90s, 15m, 2h, 1d (plain numbers "
                        "are seconds) or 'never'";
    const char *bad[] = {"", "0", "-5m", "5w", "m", "2 h", "nan", "1e999", "Never"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[256];
        snprintf(want, sizeof want, "--health-retry '%s': %s", bad[i], shape);
        duration_fails(bad[i], want);
    }
    duration_fails("30.5d", "--health-retry '30.5d': exceeds the limit of 2592000 s");
    duration_fails("721h", "--health-retry '721h': exceeds the limit of 2592000 s");
    duration_fails("inf", "--health-retry 'inf': exceeds the limit of 2592000 s");
}

/* ---- JUnit ---- */

static char *escaped(const char *s, int attr)
{
    capture c;
    nb_junit_escape(cap_open(&c), s, attr);
    return cap_close(&c);
}

static void escape_is(const char *s, int attr, const char *want)
{
    char *got = escaped(s, attr);
    if (strcmp(got, want))
        fail_msg("escape(\"%s\", %d): \"%s\", expected \"%s\"", s, attr, got, want);
    free(got);
}

static void test_junit_escape(void **s)
{
    (void)s;
    escape_is("a&b<c>d\"e'f", 0, "a&amp;b&lt;c&gt;d&quot;e&apos;f");
    escape_is("]]>", 0, "]]&gt;");
    /* line breaks and tabs: kept in character data, references in attributes */
    escape_is("a\nb\tc\rd", 0, "a\nb\tc&#13;d");
    escape_is("a\nb\tc\rd", 1, "a&#10;b&#9;c&#13;d");
    /* UTF-8 of every length passes through */
    escape_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd", 1,
              "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd");
    /* what XML 1.0 cannot carry becomes '?', one per byte dropped */
    escape_is("a\x01" "b\x1f" "c", 0, "a?b?c");
    escape_is("\xc3(", 0, "?(");                    /* a lead byte without its continuation */
    escape_is("\xc0\xaf", 0, "??");                 /* overlong 2-byte */
    escape_is("\xe0\x80\xaf", 0, "???");            /* overlong 3-byte */
    escape_is("\xed\xa0\x80", 0, "???");            /* a surrogate */
    escape_is("\xef\xbf\xbe|\xef\xbf\xbf", 0, "???|???"); /* U+FFFE, U+FFFF */
    escape_is("\xf0\x8f\xbf\xbf", 0, "????");       /* overlong 4-byte */
    escape_is("\xf4\x90\x80\x80", 0, "????");       /* beyond U+10FFFF */
    escape_is("\xf5\x80\x80\x80", 0, "????");       /* no such lead byte */
    escape_is("\x80" "x", 0, "?x");                 /* a stray continuation byte */
    escape_is("\xf0\x9f\x98", 0, "???");            /* cut short at the end */
    escape_is(NULL, 0, "");
}

static Npubench__TopToken top_a = NPUBENCH__TOP_TOKEN__INIT, top_b = NPUBENCH__TOP_TOKEN__INIT,
                          top_z = NPUBENCH__TOP_TOKEN__INIT;

/* The jobs of the JUnit and print tests, built as a coordinator sends them. */
typedef struct fixture {
    Npubench__JobSpec verify_spec, run_spec, diag_spec;
    Npubench__Environment env;
    Npubench__Localization loc;
    Npubench__GateRecord g_pass, g_fail, g_err;
    Npubench__GateRecord *gates[3];
    Npubench__TopToken *ref_top[2], *dev_top[2];
    Npubench__JobResult vres, r_unavail, r_regress, r_fail, r_noverdict, r_pass;
    Npubench__JobResult *vresults[1], *rresults[5];
    Npubench__Job verify, run, diag;
} fixture;

static fixture fx;

static void build_fixture(void)
{
    fixture *x = &fx;
    memset(x, 0, sizeof *x);
    x->verify_spec = (Npubench__JobSpec)NPUBENCH__JOB_SPEC__INIT;
    x->verify_spec.kind = NPUBENCH__JOB_KIND__VERIFY;
    x->run_spec = (Npubench__JobSpec)NPUBENCH__JOB_SPEC__INIT;
    x->run_spec.kind = NPUBENCH__JOB_KIND__RUN;
    x->diag_spec = (Npubench__JobSpec)NPUBENCH__JOB_SPEC__INIT;
    x->diag_spec.kind = NPUBENCH__JOB_KIND__DIAGNOSIS;
    x->env = (Npubench__Environment)NPUBENCH__ENVIRONMENT__INIT;
    x->env.model = "m<1>";
    x->env.backend = "cpu";
    x->env.dtype = "bf16";
    x->env.board = "b1";
    x->env.threads = 2;
    x->env.kernels_isa = "avx2";

    top_a.token = 11, top_a.logit = 5.0f;
    top_b.token = 12, top_b.logit = 3.5f;
    top_z.token = 13; /* logit 0: a runner that reports ids only */
    x->ref_top[0] = &top_a, x->ref_top[1] = &top_b;
    x->dev_top[0] = &top_z, x->dev_top[1] = &top_z;
    x->loc = (Npubench__Localization)NPUBENCH__LOCALIZATION__INIT;
    x->loc.summary = "layer 7 mlp";
    x->loc.note = "kv cache unchecked";

    x->g_pass = (Npubench__GateRecord)NPUBENCH__GATE_RECORD__INIT;
    x->g_pass.index = 0, x->g_pass.status = NPUBENCH__OUTCOME__PASS;
    x->g_pass.prefill_ms = 1000, x->g_pass.decode_ms = 500;
    x->g_fail = (Npubench__GateRecord)NPUBENCH__GATE_RECORD__INIT;
    x->g_fail.index = 1, x->g_fail.status = NPUBENCH__OUTCOME__FAIL;
    x->g_fail.divergence_step = 3, x->g_fail.device_token = 12, x->g_fail.reference_token = 11;
    x->g_fail.device_text = "\"b\"", x->g_fail.reference_text = "a&";
    x->g_fail.device_token_ref_rank = 1, x->g_fail.reference_token_dev_rank = 4;
    x->g_fail.reference_top = x->ref_top, x->g_fail.n_reference_top = 2;
    x->g_fail.device_top = x->dev_top, x->g_fail.n_device_top = 2;
    x->g_fail.fail_reason = "step 3: device token 12 not in reference top-1";
    x->g_fail.agreed_prefix = "The <b>";
    x->g_fail.localization = &x->loc;
    x->g_err = (Npubench__GateRecord)NPUBENCH__GATE_RECORD__INIT;
    x->g_err.index = 2, x->g_err.status = NPUBENCH__OUTCOME__ERROR;
    x->g_err.device_token_ref_rank = -1, x->g_err.reference_token_dev_rank = -1;
    x->gates[0] = &x->g_pass, x->gates[1] = &x->g_fail, x->gates[2] = &x->g_err;

    x->vres = (Npubench__JobResult)NPUBENCH__JOB_RESULT__INIT;
    x->vres.job_id = 3, x->vres.outcome = NPUBENCH__OUTCOME__FAIL;
    x->vres.environment = &x->env;
    x->vres.gates = x->gates, x->vres.n_gates = 3;
    x->vresults[0] = &x->vres;
    x->verify = (Npubench__Job)NPUBENCH__JOB__INIT;
    x->verify.job_id = 3, x->verify.spec = &x->verify_spec;
    x->verify.state = NPUBENCH__JOB_STATE__JOB_DONE;
    x->verify.created_unix_ms = 1741658400000LL; /* 2025-03-11T02:00:00Z */
    x->verify.started_unix_ms = 1741658401000LL;
    x->verify.finished_unix_ms = 1741658403500LL;
    x->verify.results = x->vresults, x->verify.n_results = 1;
    x->verify.log = "02:00:01.000 start\n02:00:03.500 <done> & gone\n";

    Npubench__JobResult *rs[] = {&x->r_unavail, &x->r_regress, &x->r_fail, &x->r_noverdict,
                                 &x->r_pass};
    for (int i = 0; i < 5; i++) {
        *rs[i] = (Npubench__JobResult)NPUBENCH__JOB_RESULT__INIT;
        rs[i]->job_id = 10 + i;
        rs[i]->outcome = NPUBENCH__OUTCOME__PASS;
        x->rresults[i] = rs[i];
    }
    x->r_unavail.status = NPUBENCH__STATUS_CODE__UNAVAILABLE;
    x->r_unavail.status_message = "device busy";
    x->r_unavail.outcome = NPUBENCH__OUTCOME__OUTCOME_UNSPECIFIED;
    x->r_regress.regression = 1;
    x->r_regress.regression_detail = "tps -12.3% (p=0.001)";
    x->r_regress.environment = &x->env;
    x->r_regress.started_unix_ms = 1000, x->r_regress.finished_unix_ms = 3250;
    x->r_fail.outcome = NPUBENCH__OUTCOME__FAIL;
    x->r_noverdict.outcome = NPUBENCH__OUTCOME__ERROR;
    x->r_pass.started_unix_ms = 5000, x->r_pass.finished_unix_ms = 4000; /* clock went back */
    x->run = (Npubench__Job)NPUBENCH__JOB__INIT;
    x->run.job_id = 9, x->run.spec = &x->run_spec;
    x->run.state = NPUBENCH__JOB_STATE__JOB_DONE;
    x->run.results = x->rresults, x->run.n_results = 5;

    x->diag = (Npubench__Job)NPUBENCH__JOB__INIT;
    x->diag.job_id = 20, x->diag.spec = &x->diag_spec;
    x->diag.state = NPUBENCH__JOB_STATE__JOB_FAILED;
    x->diag.error = "worker b1@h lost 3 times";
    x->diag.queued_reason = "no worker serves m";
    x->diag.created_unix_ms = 1741658400000LL;
}

static const char *const JUNIT_WANT =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<testsuites name=\"npubench\" tests=\"9\" failures=\"3\" errors=\"4\">\n"
    /* the verify: one case per prompt; a pass, a FAIL with ranks, the reference's margin
     * (the device's logits are all 0: none told) and its localization, a prompt that did
     * not run; the log as system-out */
    "  <testsuite name=\"job 3 verify\" id=\"3\" tests=\"3\" failures=\"1\" errors=\"1\" "
    "skipped=\"0\" time=\"2.500\" timestamp=\"2025-03-11T02:00:00\">\n"
    "    <testcase classname=\"npubench.verify.m&lt;1&gt;.cpu/bf16@b1\" name=\"prompt 0\" "
    "time=\"1.500\"/>\n"
    "    <testcase classname=\"npubench.verify.m&lt;1&gt;.cpu/bf16@b1\" name=\"prompt 1\" "
    "time=\"0.000\">\n"
    "      <failure type=\"gate\" message=\"diverged at step 3: device 12 &apos;&quot;b&quot;"
    "&apos; (ref rank 1) vs reference 11 &apos;a&amp;&apos; (device rank 4), reference margin "
    "1.500; localized: layer 7 mlp\">step 3: device token 12 not in reference top-1\n"
    "agreed prefix: The &lt;b&gt;\n"
    "localization: kv cache unchecked</failure>\n"
    "    </testcase>\n"
    "    <testcase classname=\"npubench.verify.m&lt;1&gt;.cpu/bf16@b1\" name=\"prompt 2\" "
    "time=\"0.000\">\n"
    "      <error type=\"gate\" message=\"the prompt did not run\">\n"
    "agreed prefix: </error>\n"
    "    </testcase>\n"
    "    <system-out>02:00:01.000 start\n"
    "02:00:03.500 &lt;done&gt; &amp; gone\n"
    "</system-out>\n"
    "  </testsuite>\n"
    /* the run: one case per result; its status, a regression, a FAIL, no verdict, a pass */
    "  <testsuite name=\"job 9 run\" id=\"9\" tests=\"5\" failures=\"2\" errors=\"2\" "
    "skipped=\"0\" time=\"0.000\" timestamp=\"1970-01-01T00:00:00\">\n"
    "    <testcase classname=\"npubench.run.?./@\" name=\"regression check\" time=\"0.000\">\n"
    "      <error type=\"UNAVAILABLE\" message=\"device busy\"></error>\n"
    "    </testcase>\n"
    "    <testcase classname=\"npubench.run.m&lt;1&gt;.cpu/bf16@b1\" name=\"regression check\" "
    "time=\"2.250\">\n"
    "      <failure type=\"regression\" message=\"tps -12.3% (p=0.001)\"></failure>\n"
    "    </testcase>\n"
    "    <testcase classname=\"npubench.run.?./@\" name=\"regression check\" time=\"0.000\">\n"
    "      <failure type=\"gate\" message=\"the gate failed\"></failure>\n"
    "    </testcase>\n"
    "    <testcase classname=\"npubench.run.?./@\" name=\"regression check\" time=\"0.000\">\n"
    "      <error type=\"error\" message=\"no verdict\"></error>\n"
    "    </testcase>\n"
    "    <testcase classname=\"npubench.run.?./@\" name=\"regression check\" time=\"0.000\"/>\n"
    "  </testsuite>\n"
    /* the diagnosis that never ran: one error naming its state, why, and why it waited */
    "  <testsuite name=\"job 20 diagnosis\" id=\"20\" tests=\"1\" failures=\"0\" errors=\"1\" "
    "skipped=\"0\" time=\"0.000\" timestamp=\"2025-03-11T02:00:00\">\n"
    "    <testcase classname=\"npubench.diagnosis\" name=\"job 20\" time=\"0.000\">\n"
    "      <error type=\"unavailable\" message=\"unavailable: job failed: worker b1@h lost 3 "
    "times\">no worker serves m</error>\n"
    "    </testcase>\n"
    "  </testsuite>\n"
    "</testsuites>\n";

static void test_junit_print(void **s)
{
    (void)s;
    build_fixture();
    const Npubench__Job *jobs[] = {&fx.verify, &fx.run, &fx.diag};
    capture c;
    nb_junit_print(cap_open(&c), jobs, 3);
    char *out = cap_close(&c);
    print_message("%s", out);
    assert_string_equal(out, JUNIT_WANT);
    free(out);
}

/* Item 12 of issue 27: a result's model in JUnit is its display name, as `job`, the verify
 * header and the dashboard say; the classname had the GGUF's general.name, spaces and all. */
static void test_junit_model_name(void **s)
{
    (void)s;
    build_fixture();
    Npubench__Environment e = fx.env;
    e.model = "Smollm2 135M 8k Lc100K Mix1 Ep2";
    e.model_path = "/lab/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    e.dtype = "q4_1";
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    Npubench__JobResult r = NPUBENCH__JOB_RESULT__INIT;
    r.job_id = 9;
    r.outcome = NPUBENCH__OUTCOME__PASS;
    r.environment = &e;
    Npubench__JobResult *rp[1] = {&r};
    Npubench__Job j = NPUBENCH__JOB__INIT;
    j.job_id = 9;
    j.spec = &spec;
    j.state = NPUBENCH__JOB_STATE__JOB_DONE;
    j.results = rp;
    j.n_results = 1;
    const Npubench__Job *jobs[] = {&j};
    capture c;
    nb_junit_print(cap_open(&c), jobs, 1);
    char *out = cap_close(&c);
    assert_non_null(strstr(out, "classname=\"npubench.run.SmolLM2-135M-Instruct.cpu/q4_1@b1\""));
    assert_null(strstr(out, "Smollm2 135M"));
    free(out);
    char name[256];
    assert_string_equal(nb_print_model_name(&e, name, sizeof name), "SmolLM2-135M-Instruct");
}

/* A matrix the caller stopped waiting for (a quarantined board's cell once held it): the
 * board that finished keeps its case; the rest is one pending error, counted. */
static void test_junit_pending_matrix(void **s)
{
    (void)s;
    build_fixture();
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__VERIFY;
    spec.matrix = 1;
    Npubench__JobResult done = NPUBENCH__JOB_RESULT__INIT;
    done.job_id = 41;
    done.outcome = NPUBENCH__OUTCOME__PASS;
    done.environment = &fx.env;
    Npubench__GateRecord g = NPUBENCH__GATE_RECORD__INIT;
    g.status = NPUBENCH__OUTCOME__PASS;
    Npubench__GateRecord *gp[1] = {&g};
    done.gates = gp;
    done.n_gates = 1;
    Npubench__JobResult *rp[1] = {&done};
    int64_t kids[3] = {41, 42, 43};
    Npubench__Job j = NPUBENCH__JOB__INIT;
    j.job_id = 40;
    j.spec = &spec;
    j.is_group = 1;
    j.state = NPUBENCH__JOB_STATE__JOB_RUNNING;
    j.results = rp;
    j.n_results = 1;
    j.child_job_ids = kids;
    j.n_child_job_ids = 3;
    const Npubench__Job *jobs[] = {&j};
    capture c;
    nb_junit_print(cap_open(&c), jobs, 1);
    char *out = cap_close(&c);
    print_message("%s", out);
    assert_non_null(strstr(out, "<testsuites name=\"npubench\" tests=\"2\" failures=\"0\" "
                                "errors=\"1\">"));
    assert_non_null(strstr(out, "<testcase classname=\"npubench.verify.m&lt;1&gt;.cpu/bf16@b1\" "
                                "name=\"prompt 0\" time=\"0.000\"/>"));
    assert_non_null(strstr(out, "name=\"job 40: 2 unfinished\""));
    assert_non_null(strstr(out, "<error type=\"pending\" message=\"pending: 2 of 3 board jobs "
                                "had not finished\">"));
    free(out);
}

/* The file validates against the schema CI dashboards read (tests/junit.xsd). */
static void expect_schema_valid(const char *path)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "xmllint --noout --schema '%s/tests/junit.xsd' '%s'",
             tu_require_src(), path);
    tu_result r = tu_run(cmd);
    if (r.code)
        fail_msg("%s does not validate:\n%s", path, r.out ? r.out : "");
    free(r.out);
}

/* A verify's records with the decode-path check: a flagged PASS stays a passing testcase with
 * the defect in its system-out; a strict run's FAIL opens its message with the defect; every
 * byte of the message, `"` `<` `&`, line breaks and control characters, escaped as an
 * attribute value (a newline kept raw would be normalized to a space by XML parsers, a `"`
 * would end the attribute). The document validates against tests/junit.xsd. */
static void test_junit_decode_path_and_attributes(void **s)
{
    (void)s;
    build_fixture();
    Npubench__DecodeCheck dc = NPUBENCH__DECODE_CHECK__INIT;
    dc.status = "fault", dc.steps = 4, dc.first_bad_step = 1, dc.max_diff = 2.125;
    dc.tolerance = 0.25, dc.note = "";
    fx.g_pass.decode_check = &dc;
    Npubench__GateRecord strict = NPUBENCH__GATE_RECORD__INIT;
    strict.index = 3, strict.status = NPUBENCH__OUTCOME__FAIL, strict.divergence_step = -1;
    strict.decode_strict_fail = 1, strict.decode_check = &dc;
    strict.fail_reason = "decode-path defect";
    strict.device_token_ref_rank = -1, strict.reference_token_dev_rank = -1;
    /* a FAIL whose texts carry every character an attribute must escape */
    fx.g_fail.device_text = "q\"<&>\n\t\x01z";
    Npubench__GateRecord *gates[] = {&fx.g_pass, &fx.g_fail, &strict};
    fx.vres.gates = gates, fx.vres.n_gates = 3;
    const Npubench__Job *jobs[] = {&fx.verify};
    capture c;
    nb_junit_print(cap_open(&c), jobs, 1);
    char *out = cap_close(&c);
    print_message("%s", strstr(out, "name=\"prompt 3\"") ? strstr(out, "name=\"prompt 3\"") : out);
    assert_non_null(strstr(out, "name=\"prompt 0\" time=\"1.500\">\n      <system-out>PASS "
                                "(decode-path defect): decode-path defect: decode step 1 differs "
                                "from a cache-free prefill of the same tokens by 2.12 logits "
                                "(tolerance 0.25)</system-out>\n    </testcase>"));
    assert_non_null(strstr(out, "<failure type=\"gate\" message=\"decode-path defect: decode step "
                                "1 differs from a cache-free prefill of the same tokens by 2.12 "
                                "logits (tolerance 0.25) (--strict; the top-k gate passed)\">"));
    assert_non_null(strstr(out, "device 12 &apos;q&quot;&lt;&amp;&gt;&#10;&#9;?z&apos;"));
    assert_null(strstr(out, "q\"<")); /* never raw */
    char path[4400], cmd[9000];
    snprintf(path, sizeof path, "%s/jd.xml", tu_group_tmp());
    nb_err err;
    assert_int_equal(nb_junit_write(path, jobs, 1, &err), NB_OK);
    expect_schema_valid(path);
    /* the parsed attribute is the text itself: the newline and tab survive, not as spaces */
    snprintf(cmd, sizeof cmd, "xmllint --xpath 'string(//testcase[@name=\"prompt 1\"]/failure/@message)' '%s'",
             path);
    tu_result r = tu_run(cmd);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "'q\"<&>\n\t?z'"));
    free(r.out);
    free(out);
}

static void test_junit_write(void **s)
{
    (void)s;
    build_fixture();
    const Npubench__Job *jobs[] = {&fx.verify, &fx.run, &fx.diag};
    char path[4400], want[4600];
    nb_err err;
    /* written whole: the same XML, no .tmp left */
    snprintf(path, sizeof path, "%s/j.xml", tu_group_tmp());
    assert_int_equal(nb_junit_write(path, jobs, 3, &err), NB_OK);
    char *got = tu_slurp(path);
    assert_string_equal(got, JUNIT_WANT);
    free(got);
    snprintf(want, sizeof want, "%s.tmp", path);
    assert_int_equal(access(want, F_OK), -1);
    /* every variant validates against the schema CI dashboards read (tests/junit.xsd) */
    expect_schema_valid(path);
    /* a directory that is not there */
    snprintf(path, sizeof path, "%s/no/j.xml", tu_group_tmp());
    assert_int_equal(nb_junit_write(path, jobs, 3, &err), NB_EIO);
    snprintf(want, sizeof want, "--junit %s.tmp: cannot create the file: No such file or "
             "directory", path);
    assert_string_equal(err.msg, want);
    /* a path that names a directory: written, then not renamed; the .tmp removed */
    snprintf(path, sizeof path, "%s/adir", tu_group_tmp());
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(nb_junit_write(path, jobs, 3, &err), NB_EIO);
    snprintf(want, sizeof want, "--junit %s: could not write the file", path);
    assert_string_equal(err.msg, want);
    snprintf(want, sizeof want, "%s.tmp", path);
    assert_int_equal(access(want, F_OK), -1);
    /* a path too long for its .tmp twin */
    memset(path, 'a', 4196);
    path[4196] = '\0';
    assert_int_equal(nb_junit_write(path, jobs, 3, &err), NB_EINVAL);
    assert_string_equal(err.msg, "--junit: the path is longer than 4195 bytes");
}

/* ---- nb_print_job ---- */

typedef struct printed {
    int code;
    char *out, *err;
} printed;

static printed print_job(const Npubench__Job *j, int show_text)
{
    nb_print_opts o = {.cmd = "job", .show_text = show_text};
    capture c;
    printed p;
    FILE *f = cap_open(&c);
    err_begin();
    p.code = nb_print_job(f, &o, j);
    p.err = err_end();
    p.out = cap_close(&c);
    return p;
}

static void expect_printed(const Npubench__Job *j, int show_text, int code, const char *out,
                           const char *err)
{
    printed p = print_job(j, show_text);
    print_message("[exit %d]\n%s%s", p.code, p.out, p.err);
    assert_string_equal(p.out, out);
    assert_string_equal(p.err, err);
    assert_int_equal(p.code, code);
    free(p.out);
    free(p.err);
}

static void test_print_job_errors(void **s)
{
    (void)s;
    build_fixture();
    Npubench__Job j = NPUBENCH__JOB__INIT;
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__RUN;
    j.job_id = 7, j.spec = &spec;
    /* cancelled, with and without a reason; expired is its own exit code */
    j.state = NPUBENCH__JOB_STATE__JOB_CANCELLED;
    expect_printed(&j, 0, 4, "", "npubench job: job 7 was cancelled\n");
    j.error = "by admin";
    expect_printed(&j, 0, 4, "", "npubench job: job 7 was cancelled: by admin\n");
    j.error = "expired: still queued after 1d";
    expect_printed(&j, 0, 5, "",
                   "npubench job: job 7 was cancelled: expired: still queued after 1d\n");
    /* finished without a result: failed is unavailable, done is an error */
    j.state = NPUBENCH__JOB_STATE__JOB_FAILED;
    j.error = "worker lost";
    expect_printed(&j, 0, 3, "",
                   "npubench job: error: job 7 failed without a result: worker lost\n");
    j.state = NPUBENCH__JOB_STATE__JOB_DONE;
    j.error = "";
    expect_printed(&j, 0, 2, "", "npubench job: error: job 7 done without a result\n");
    /* a result in error: its message, else its status's name */
    Npubench__JobResult r = NPUBENCH__JOB_RESULT__INIT, *rs[] = {&r};
    j.results = rs, j.n_results = 1;
    r.status = NPUBENCH__STATUS_CODE__UNAVAILABLE;
    r.status_message = "npu0: device busy";
    expect_printed(&j, 0, 2, "", "npubench job: error: npu0: device busy\n");
    r.status_message = "";
    expect_printed(&j, 0, 2, "", "npubench job: error: UNAVAILABLE\n");
    /* a run without metrics, or with metrics it cannot read */
    r.status = NPUBENCH__STATUS_CODE__OK;
    expect_printed(&j, 0, 2, "", "npubench job: error: result has no readable metrics\n");
    Npubench__Metrics m = NPUBENCH__METRICS__INIT;
    r.metrics = &m;
    expect_printed(&j, 0, 2, "",
                   "npubench job: error: result has no readable metrics: Metrics.samples: 0, "
                   "must be 1..100000\n");
    /* the other kinds' unreadable results, and a kind this CLI does not know */
    spec.kind = NPUBENCH__JOB_KIND__PROFILE;
    r.metrics = NULL;
    expect_printed(&j, 0, 2, "",
                   "npubench job: error: result unreadable: JobResult.metrics: absent (not a "
                   "profile result)\n");
    spec.kind = NPUBENCH__JOB_KIND__DIAGNOSIS;
    expect_printed(&j, 0, 2, "",
                   "npubench job: error: result unreadable: JobResult.diagnosis: absent (not "
                   "a diagnosis result)\n");
    spec.kind = NPUBENCH__JOB_KIND__VERIFY_FULL;
    expect_printed(&j, 0, 2, "",
                   "npubench job: error: result unreadable: JobResult.verify: absent (not a "
                   "verify result)\n");
    /* a health check prints (it was "job of unknown kind 6", exit 2): the probe its log
     * recorded, and the probe-only verdict of a board without a verify command */
    spec.kind = NPUBENCH__JOB_KIND__HEALTH;
    r.outcome = NPUBENCH__OUTCOME__PASS;
    r.log = "20:00:00.000 health check: device probe: driver 2.19, kernels avx2\n"
            "20:00:00.100 done\n";
    expect_printed(&j, 0, 0,
                   "[health] health check: device probe: driver 2.19, kernels avx2\n"
                   "[health] PASS (the device probe is the check: no verify command)\n",
                   "");
    r.outcome = NPUBENCH__OUTCOME__FAIL;
    r.log = "";
    expect_printed(&j, 0, 1,
                   "[health] FAIL (the device probe is the check: no verify command)\n", "");
    spec.kind = 99;
    expect_printed(&j, 0, 2, "", "npubench job: error: job of unknown kind 99\n");
    j.spec = NULL;
    expect_printed(&j, 0, 2, "", "npubench job: error: job of unknown kind 0\n");
}

/* A matrix group: a header per board's result, the run table, the generated text; a
 * regression turns that board's pass into exit 1, and the worst code of all is the exit. */
static void test_print_matrix(void **s)
{
    (void)s;
    build_fixture();
    Npubench__Sample smp = NPUBENCH__SAMPLE__INIT, *samples[] = {&smp};
    smp.prompt_tokens = 31, smp.generated_tokens = 2;
    Npubench__Metrics m = NPUBENCH__METRICS__INIT;
    m.samples = samples, m.n_samples = 1;
    m.setup_ms = 12.5, m.ttft_ms = 250, m.ttft_ms_stddev = 1.25;
    m.decode_ms_per_token = 20, m.decode_ms_per_token_stddev = 0.5, m.tpot_ms = 20.25;
    m.tps = 50, m.tps_stddev = 2;
    m.text = "Hello!";
    Npubench__Environment e1 = fx.env, e2;
    e1.model = "m", e1.threads = 4;
    e2 = e1;
    e2.board = "b2";
    Npubench__JobResult a = NPUBENCH__JOB_RESULT__INIT, b = NPUBENCH__JOB_RESULT__INIT,
                        c = NPUBENCH__JOB_RESULT__INIT;
    a.job_id = 12, a.worker_id = "b1@h", a.environment = &e1, a.metrics = &m;
    b = a;
    b.job_id = 13, b.worker_id = "b2@h", b.environment = &e2;
    b.regression = 1, b.regression_detail = "tps -12.3% (p=0.001)";
    c.job_id = 14; /* no environment: no header, no deployment line */
    c.metrics = &m;
    Npubench__JobResult *rs[] = {&a, &b, &c};
    Npubench__JobSpec spec = NPUBENCH__JOB_SPEC__INIT;
    spec.kind = NPUBENCH__JOB_KIND__RUN, spec.matrix = 1;
    Npubench__Job j = NPUBENCH__JOB__INIT;
    j.job_id = 11, j.spec = &spec, j.is_group = 1, j.state = NPUBENCH__JOB_STATE__JOB_DONE;
    j.results = rs, j.n_results = 3;
    const char *table = "Setup: 12.5 ms (once, outside every timed region)\n"
                        "Prompt tokens: 31, generated tokens: 2, repetitions: 1\n"
                        "Time to first token (TTFT): 0.250s (250.00 ms ± 1.25)\n"
                        "Decode: 20.00 ms/token ± 0.50 (TPOT 20.25 ms)\n"
                        "Tokens/second: 50.00 ± 2.00\n";
    char want[4096];
    snprintf(want, sizeof want,
             "== b1 (job 12, worker b1@h) ==\nDeployment: m cpu/bf16, 4 threads, kernels avx2\n"
             "%sGenerated text:\nHello!\n"
             "== b2 (job 13, worker b2@h) ==\nDeployment: m cpu/bf16, 4 threads, kernels avx2\n"
             "%sGenerated text:\nHello!\nRegression: tps -12.3%% (p=0.001)\n"
             "%sGenerated text:\nHello!\n",
             table, table, table);
    expect_printed(&j, 1, 1, want, "");
    /* not a matrix: no headers; without --text no text; a result in error wins (exit 2) */
    j.is_group = 0;
    b.regression = 0;
    c.status = NPUBENCH__STATUS_CODE__INTERNAL;
    snprintf(want, sizeof want,
             "Deployment: m cpu/bf16, 4 threads, kernels avx2\n%s"
             "Deployment: m cpu/bf16, 4 threads, kernels avx2\n%s",
             table, table);
    expect_printed(&j, 0, 2, want, "npubench job: error: INTERNAL\n");
}

/* One WatchJob answer of one event: state, done/total, message, and the token position. */
static void feed(nb_svc_progress *pr, int state, int done, int total, const char *msg, int tok,
                 int ntok, int finished)
{
    Npubench__Progress p = NPUBENCH__PROGRESS__INIT;
    p.done = done, p.total = total, p.message = (char *)msg;
    p.tokens_done = tok, p.tokens_total = ntok, p.unit = ntok ? "prompt" : "";
    Npubench__ProgressEvent e = NPUBENCH__PROGRESS_EVENT__INIT, *ep = &e;
    e.progress = &p, e.state = state;
    Npubench__WatchJobResponse w = NPUBENCH__WATCH_JOB_RESPONSE__INIT;
    w.events = &ep, w.n_events = 1, w.done = finished, w.state = state;
    nb_svc_print_progress(pr, 7, &w);
}

/* Progress per prompt and per token: on a terminal one line rewritten (\r, erase) at most
 * every 250 ms, a prompt's end a line of its own, the token line cleared at the end; on a
 * pipe plain lines, at most one token line a second. */
static void test_progress_tokens(void **s)
{
    (void)s;
    const int run = NPUBENCH__JOB_STATE__JOB_RUNNING, fin = NPUBENCH__JOB_STATE__JOB_DONE;
    capture c;
    nb_svc_progress pr = {.f = cap_open(&c), .kind = "verify-full", .tty = 1};
    feed(&pr, run, 2, 8, "prompt 1: PASS", 17, 32, 0);
    feed(&pr, run, 2, 8, "prompt 1: PASS", 18, 32, 0); /* within 250 ms: coalesced */
    usleep(300 * 1000);
    feed(&pr, run, 2, 8, "prompt 1: PASS", 30, 32, 0);
    feed(&pr, run, 3, 8, "prompt 2: FAIL", 0, 0, 0);
    feed(&pr, fin, 8, 8, "", 0, 0, 1);
    char *out = cap_close(&c);
    assert_string_equal(out, "[job 7] running 2/8 prompt 1: PASS\n"
                             "\r\033[K[job 7] running verify-full: prompt 3/8, token 17/32"
                             "\r\033[K[job 7] running verify-full: prompt 3/8, token 30/32"
                             "\r\033[K[job 7] running 3/8 prompt 2: FAIL\n"
                             "[job 7] done 8/8\n");
    free(out);
    nb_svc_progress plain = {.f = cap_open(&c), .tty = 2};
    feed(&plain, run, 0, 2, "running", 1, 16, 0);
    usleep(300 * 1000);
    feed(&plain, run, 0, 2, "running", 9, 16, 0); /* a pipe: one a second */
    feed(&plain, fin, 2, 2, "", 3, 16, 1);         /* the end: no token line */
    out = cap_close(&c);
    assert_string_equal(out, "[job 7] running 0/2 running\n"
                             "[job 7] running prompt 1/2, token 1/16\n"
                             "[job 7] done 2/2\n");
    free(out);
}

/* `npubench air scan` over the 19 models of mlir-air e972f294 (tests/fixtures/mlir-air/llms:
 * each Makefile's targets and variables, verify_adapter.py, where each inference script
 * prints extract_perf's lines): each job kind's entry point, and a loadable deployments file. */
static void test_air_scan(void **state)
{
    (void)state;
    const char *src = tu_require_src();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/mlir-air/llms", src);
    static const struct {
        const char *model, *dtype, *run, *profile, *verify;
        int full, no_tps, verdict_only;
    } want[] = {
        {"gemma3_4b_q4nx", "q4nx", "make ask N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify MAX_PROMPTS={max_prompts}", 1, 0, 0},
        {"llama31_8b_q4nx", "q4nx", "make profile N_TOKENS={n_tokens}",
         "make profile N_TOKENS={n_tokens}", "make verify", 1, 0, 0},
        {"llama32_1b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"llama32_1b_int4", "int4", "make run-inference N_TOKENS={n_tokens}",
         "make profile N_TOKENS={n_tokens}", "make verify", 1, 0, 0},
        {"llama32_1b_q4nx", "q4nx", "make run N_TOKENS={n_tokens}",
         "make profile N_TOKENS={n_tokens}", "make verify", 1, 0, 0},
        {"llama32_3b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"llama32_3b_q4nx", "q4nx", "make profile N_TOKENS={n_tokens}",
         "make profile N_TOKENS={n_tokens}", "make verify", 1, 0, 0},
        {"phi4_mini_q4nx", "q4nx", "make profile N_TOKENS={n_tokens}",
         "make profile N_TOKENS={n_tokens}", "make verify", 1, 0, 0},
        {"qwen25_0_5b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"qwen25_1_5b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"qwen25_3b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"qwen25_3b_q4", "q4", "make profile", "make profile",
         "make verify MAX_PROMPTS={max_prompts}", 1, 0, 0},
        {"qwen25_7b_q4nx", "q4nx", "make ask N_TOKENS={n_tokens}",
         "make profile N_TOKENS={n_tokens}", "make verify MAX_PROMPTS={max_prompts}", 1, 0, 0},
        {"qwen3_0_6b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"qwen3_1_7b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"qwen3_4b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"qwen3_8b_q4nx", "q4nx", "make ask N_TOKENS={n_tokens}",
         "make profile N_TOKENS={n_tokens}", "make verify MAX_PROMPTS={max_prompts}", 1, 0, 0},
        {"smollm2_1_7b", "bf16", "make run N_TOKENS={n_tokens}", "make profile N_TOKENS={n_tokens}",
         "make verify", 1, 0, 0},
        {"smolvla", "bf16", "make profile", "make profile", "make verify", 0, 1, 1},
    };
    nb_air_model *m = NULL;
    size_t n = 0;
    nb_err err;
    assert_int_equal(nb_air_scan(dir, &m, &n, &err), NB_OK);
    assert_int_equal(n, sizeof want / sizeof want[0]); /* bench/ and verify/ are no models */
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].name, want[i].model) || strcmp(m[i].dtype, want[i].dtype) ||
            strcmp(m[i].run, want[i].run) || strcmp(m[i].profile, want[i].profile) ||
            strcmp(m[i].verify, want[i].verify) || !m[i].verify_full[0] != !want[i].full ||
            !m[i].diagnosis[0] != !want[i].full || m[i].no_throughput != want[i].no_tps ||
            m[i].verdict_only != want[i].verdict_only || m[i].why[0])
            fail_msg("%s: run '%s', profile '%s', verify '%s', full %d, no tps %d, verdict "
                     "%d, why '%s'; expected %s: '%s', '%s', '%s', %d, %d, %d",
                     m[i].name, m[i].run, m[i].profile, m[i].verify, !!m[i].verify_full[0],
                     m[i].no_throughput, m[i].verdict_only, m[i].why, want[i].model, want[i].run,
                     want[i].profile, want[i].verify, want[i].full, want[i].no_tps,
                     want[i].verdict_only);
    }
    /* why an entry point is not the obvious one */
    assert_non_null(strstr(m[6].notes, "llama32_3b_q4nx_inference.py prints its metric lines "
                                       "only with --profile"));
    assert_non_null(strstr(m[3].notes, "`make run` runs llama32_1b_int4_prefill.py"));
    assert_non_null(strstr(m[2].notes, "fixes --max-prompts 2"));
    assert_non_null(strstr(m[18].notes, "regression gate"));
    /* the air backend: an entry per model whose adapter builds a runner and names its HF
     * checkout (not smolvla's gate, not int4's AWQ id bound to a name) */
    assert_string_equal(m[2].air_hf_id, "meta-llama/Llama-3.2-1B-Instruct");
    assert_string_equal(m[17].air_choice, "base");
    assert_string_equal(m[17].air_hf_id, "HuggingFaceTB/SmolLM2-1.7B");
    assert_non_null(strstr(m[18].air_why, "no build_runner"));
    assert_non_null(strstr(m[3].air_why, "is no HF id literal"));
    /* what the worker reads: every entry is a valid exec (and air) deployment */
    for (int with_air = 0; with_air < 2; with_air++) {
        nb_air_scan_air air = {with_air ? "/data/hf" : NULL, with_air ? "/opt/air/bin/python3" : NULL};
        json_object *doc = nb_air_scan_json(m, n, dir, &air);
        const char *text = json_object_to_json_string(doc);
        nb_deployment *deps = NULL;
        int nd = 0;
        if (nb_deployments_parse(text, strlen(text), "scan", &deps, &nd, &err))
            fail_msg("the scan's deployments file does not load: %s", err.msg);
        assert_int_equal(nd, with_air ? 19 + 17 : 19);
        assert_true(deps[18].exec->no_throughput && deps[18].exec->verdict_only);
        assert_int_equal(deps[0].exec->timeout_ms, 3600000);
        if (with_air) {
            assert_string_equal(deps[21].name, "llama32_1b-air");
            assert_string_equal(deps[21].backend, "air");
            assert_string_equal(deps[21].model, "/data/hf/Llama-3.2-1B-Instruct");
            assert_string_equal(deps[21].aliases[0], "llama32_1b");
            assert_non_null(strstr(text, "\"model\": \"smolvla-air\""));
        }
        nb_deployments_free(deps, nd);
        json_object_put(doc);
    }
    free(m);

    /* a model directory nothing maps: listed with why; no model at all: an error */
    char *tmp = tu_tmpdir();
    char p[1400];
    snprintf(p, sizeof p, "%s/oddball", tmp);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/oddball/Makefile", tmp);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("compile:\n\tpython3 build.py\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/oddball/verify_adapter.py", tmp);
    f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(nb_air_scan(tmp, &m, &n, &err), NB_OK);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].why, "no target npubench can read: no run, profile or verify target");
    json_object *doc = nb_air_scan_json(m, n, tmp, NULL);
    assert_non_null(strstr(json_object_to_json_string(doc), "\"unmapped\""));
    json_object_put(doc);
    free(m);
    snprintf(p, sizeof p, "%s/nothing-here", tmp);
    assert_int_equal(nb_air_scan(p, &m, &n, &err), NB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "cannot read the directory"));
    tu_rmrf(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_parse),       cmocka_unit_test(test_args_usage),
        cmocka_unit_test(test_args_duration),    cmocka_unit_test(test_junit_escape),
        cmocka_unit_test(test_junit_print),      cmocka_unit_test(test_junit_write),
        cmocka_unit_test(test_junit_decode_path_and_attributes),
        cmocka_unit_test(test_junit_pending_matrix),
        cmocka_unit_test(test_junit_model_name),
        cmocka_unit_test(test_print_job_errors), cmocka_unit_test(test_print_matrix),
        cmocka_unit_test(test_progress_tokens),
        cmocka_unit_test(test_air_scan),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
