/* test_cli_errors: bad input through the real binary — a clear message naming the field, exit 2
 * (3: device unavailable, 4: damaged database), never a crash. Runs under ASan/UBSan in CI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>

#include "nb_job.h"
#include "testutil.h"

static char cmd[8192];

/* Runs npubench with args behind a shell prefix (env settings, timeout); checks exit code
 * and that the output names `want`. */
static void expect_with(const char *prefix, const char *args, int code, const char *want)
{
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s' %s 2>&1", tu_env("NB_SRC", "."), prefix,
             tu_env("NB_BIN", "npubench"), args);
    tu_result r = tu_run(cmd);
    print_message("$ npubench %s\n%s", args, r.out ? r.out : "");
    assert_int_equal(r.code, code);
    assert_non_null(r.out);
    assert_non_null(strstr(r.out, want));
    assert_null(strstr(r.out, "AddressSanitizer"));
    assert_null(strstr(r.out, "runtime error"));
    free(r.out);
}

static void expect(const char *args, int code, const char *want)
{
    expect_with("", args, code, want);
}

/* Writes the first n bytes of the real model (or garbage) to tmp/name. */
static void write_prefix(const char *name, long n, const char *magic)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", tu_group_tmp(), name);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    if (magic) {
        fwrite(magic, 1, strlen(magic), out);
    } else {
        const char *m = tu_model();
        FILE *in = m ? fopen(m, "rb") : NULL;
        assert_non_null(in);
        char buf[65536];
        long left = n;
        while (left > 0) {
            size_t got = fread(buf, 1, left < (long)sizeof buf ? (size_t)left : sizeof buf, in);
            if (!got)
                break;
            fwrite(buf, 1, got, out);
            left -= (long)got;
        }
        fclose(in);
    }
    fclose(out);
}

/* Keys never on the command line, key files owner-only, no unauthenticated listen beyond
 * loopback unless --insecure, which is warned about and logs the address really bound. */
/* submit's and submit matrix's kind parameters come from job/'s rows: every row with an option
 * is refused one past its limit, the message naming the option and the range, before any
 * dial. */
static void test_submit_param_limits(void **s)
{
    (void)s;
    int n = 0;
    for (size_t i = 0; nb_job_param_at(i); i++) {
        const nb_job_param_desc *p = nb_job_param_at(i);
        if (!p->option)
            continue;
        char args[128], want[128];
        snprintf(args, sizeof args, "submit run --%s %ld", p->option, p->hi + 1);
        snprintf(want, sizeof want, "--%s: %ld is outside the allowed range %ld..%ld", p->option,
                 p->hi + 1, p->lo, p->hi);
        expect(args, 2, want);
        /* submit matrix takes the same options from the same rows */
        snprintf(args, sizeof args, "submit matrix --models instruct --boards t --%s %ld",
                 p->option, p->hi + 1);
        expect(args, 2, want);
        n++;
    }
    assert_true(n >= 5); /* n-tokens, k, reps, max-prompts, threads */
}

static void test_keys_and_exposure(void **s)
{
    (void)s;
    const char *noenv = "env -u NPUBENCH_SECRET -u NPUBENCH_WORKER_SECRET -u "
                        "NPUBENCH_ADMIN_SECRET";
    char key[4096], args[8192];
    snprintf(key, sizeof key, "%s/open.key", tu_group_tmp());
    FILE *f = fopen(key, "w");
    assert_non_null(f);
    fputs("k3y\n", f);
    fclose(f);
    assert_int_equal(chmod(key, 0644), 0);
    snprintf(args, sizeof args, "coordinator --listen ipc://%s/k.sock --db %s/k.db --secret k3y",
             tu_group_tmp(), tu_group_tmp());
    expect_with(noenv, args, 2, "use --secret-file FILE (mode 0600) or $NPUBENCH_SECRET");
    expect_with(noenv, "jobs --coordinator ipc:///nonexistent --secret k3y", 2,
                "--secret: a key on the command line is visible to every user in ps");
    snprintf(args, sizeof args, "worker --coordinator ipc:///x --board b --secret-file %s", key);
    expect_with(noenv, args, 2, "mode 0644 lets other users read or change the key");
    /* a key file with a leading NUL (a raw random key) is refused, naming the file: it used
     * to read as an empty key, which started the coordinator without authentication */
    char nulkey[4096];
    snprintf(nulkey, sizeof nulkey, "%s/nul.key", tu_group_tmp());
    f = fopen(nulkey, "wb");
    assert_non_null(f);
    fwrite("\0raw-random-bytes-0123456789", 1, 28, f);
    fclose(f);
    assert_int_equal(chmod(nulkey, 0600), 0);
    snprintf(args, sizeof args,
             "coordinator --listen ipc://%s/nul.sock --db %s/nul.db --secret-file %s",
             tu_group_tmp(), tu_group_tmp(), nulkey);
    char want[4200];
    snprintf(want, sizeof want, "%s: a NUL byte at offset 0", nulkey);
    expect_with(noenv, args, 2, want);
    snprintf(args, sizeof args, "jobs --coordinator ipc://%s/nul.sock --secret-file %s",
             tu_group_tmp(), nulkey);
    expect_with(noenv, args, 2, want);
    snprintf(args, sizeof args, "coordinator --listen tcp://0.0.0.0:0 --db %s/k.db",
             tu_group_tmp());
    expect_with(noenv, args, 2, "reaches beyond this host, and no key is set");
    snprintf(args, sizeof args, "coordinator --listen tcp://0.0.0.0:0 --db %s/k.db --insecure",
             tu_group_tmp());
    expect_with("timeout --preserve-status -s TERM 2 env -u NPUBENCH_SECRET", args, 0,
                "WARNING: --insecure: tcp://0.0.0.0:0 serves without authentication");
    expect_with("timeout --preserve-status -s TERM 2 env -u NPUBENCH_SECRET", args, 0,
                "listening on tcp://0.0.0.0:");
}

/* make run PROMPT='$(shell touch F)' used to run the command (make expands variable values,
 * and the recipe pasted the prompt into a shell line); now the prompt is text only. */
static void test_makefile_prompt_is_text(void **s)
{
    (void)s;
    char flag[1024], cmd2[8192];
    snprintf(flag, sizeof flag, "%s/make-ran", tu_group_tmp());
    snprintf(cmd2, sizeof cmd2,
             "make -n -s -C '%s' run BUILD='%s/b' PROMPT='$(shell touch %s) `touch %s`' 2>&1",
             tu_env("NB_SRC", "."), tu_group_tmp(), flag, flag);
    tu_result r = tu_run(cmd2);
    print_message("%s", r.out ? r.out : "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "--prompt \"$NB_PROMPT\""));
    free(r.out);
    assert_int_equal(access(flag, F_OK), -1);
}

static void test_usage_errors(void **s)
{
    (void)s;
    expect("frobnicate", 2, "unknown command 'frobnicate'");
    expect("run --n-tokens 0", 2, "--n-tokens: 0 is outside the allowed range 1..4096");
    expect("run --n-tokens abc", 2, "--n-tokens: 'abc' is not an integer");
    expect("verify --k 99", 2, "--k: 99 is outside the allowed range");
    /* the CLI's ranges are the job's (job/nb_limits.h), refused before any dial */
    expect("submit run --reps 101", 2, "--reps: 101 is outside the allowed range 0..100");
    expect("submit verify --k 21", 2, "--k: 21 is outside the allowed range 0..20");
    expect("submit run --priority 1001", 2,
           "--priority: 1001 is outside the allowed range -1000..1000");
    expect("run --reps 101", 2, "--reps: 101 is outside the allowed range 1..100");
    expect("run --threads 1025", 2, "--threads: 1025 is outside the allowed range 0..1024");
    expect("run --bogus", 2, "unknown option '--bogus'");
    /* worker --deploy: the SPEC, its field and limit named, before any dial */
    expect("worker --coordinator ipc:///x --board b --deploy gemma3:q9", 2,
           "npubench worker: --deploy 1 'gemma3:q9': dtype: dtype 'q9': expected bf16, f32, "
           "q4_1 or native");
    expect("worker --coordinator ipc:///x --board b --deploy instruct --deploy a:b:c:d", 2,
           "npubench worker: --deploy 2 'a:b:c:d': more than 3 fields, expected "
           "MODEL[:DTYPE[:BACKEND]]");
    expect("worker --coordinator ipc:///x --board b --deploy instruct --deployments d.json", 2,
           "npubench worker: --deploy and --deployments: give one or the other");
    expect("run --dtype int3", 2, "--dtype: dtype 'int3': expected bf16, f32, q4_1 or native");
    expect("run --model /nonexistent.gguf", 2, "/nonexistent.gguf");
}

static void test_corrupt_models(void **s)
{
    (void)s;
    char args[4096];
    write_prefix("magic.gguf", 0, "NOPE this is not a gguf file at all, padding padding");
    snprintf(args, sizeof args, "run --model '%s/magic.gguf'", tu_group_tmp());
    expect(args, 2, "magic");
    tu_require_model();
    long cuts[] = {10, 100, 5000, 1500000, 50000000};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        char name[64];
        snprintf(name, sizeof name, "cut%ld.gguf", cuts[i]);
        write_prefix(name, cuts[i], NULL);
        snprintf(args, sizeof args, "verify --model '%s/%s'", tu_group_tmp(), name);
        expect(args, 2, name);
    }
}

static void test_bad_prompts(void **s)
{
    (void)s;
    tu_require_model();
    expect("run --n-tokens 2 --reps 1 --warmup 0 --prompt \"$(printf 'caf\\303 bad')\"", 2,
           "invalid UTF-8 at byte offset 3");
    char path[4096], args[4200];
    snprintf(path, sizeof path, "%s/bad.txt", tu_group_tmp());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("# comment\nfine prompt\nbroken \xff\xfe prompt\n", f);
    fclose(f);
    snprintf(args, sizeof args, "verify --prompts-file '%s'", path);
    expect(args, 2, "bad.txt:3: invalid UTF-8");
    /* a prompt set with no committed trace says how to make one */
    snprintf(path, sizeof path, "%s/new.txt", tu_group_tmp());
    f = fopen(path, "wb");
    fputs("A prompt nobody has traced yet\n", f);
    fclose(f);
    snprintf(args, sizeof args, "verify --prompts-file '%s'", path);
    expect(args, 2, "make hf-reference");
}

static void test_xrt_unavailable(void **s)
{
    (void)s;
    expect("run --backend xrt --n-tokens 2", 3, "xrt backend");
    expect("run --backend tpu", 2, "backend 'tpu'");
}

/* A damaged history database is DATA_LOSS (exit 6) at the coordinator's start, whether a
 * page is overwritten or the file is no database at all — not a usage error. */
static void test_damaged_database(void **s)
{
    (void)s;
    char args[4096], db[2048];
    snprintf(db, sizeof db, "%s/damaged.db", tu_group_tmp());
    snprintf(args, sizeof args, "import tests/data/db/history.ndjson --db '%s'", db);
    expect(args, 0, "5 runs imported");
    assert_int_equal(tu_damage_tail(db), 0);
    snprintf(args, sizeof args, "coordinator --listen 'ipc://%s/dmg.sock' --db '%s' --quiet",
             tu_group_tmp(), db);
    expect(args, 6, "integrity check failed");
    write_prefix("text.db", 0,
                 "this is not a database, it is a text file that is long enough to have a "
                 "header\n");
    snprintf(args, sizeof args, "coordinator --listen 'ipc://%s/dmg.sock' --db '%s/text.db' "
             "--quiet", tu_group_tmp(), tu_group_tmp());
    expect(args, 6, "file is not a database");
}

/* Help and formats say what the code does: gemma3 among --model's words, submit's kinds
 * with health and matrix, exit code 6 in --help; reference show --format csv is a table;
 * workers drain signs with $NPUBENCH_ADMIN_SECRET (it was refused: the client key). */
static void test_help_and_admin_key(void **s)
{
    (void)s;
    expect("run --help", 0, "instruct (default), base, gemma3, a .gguf or an HF dir");
    expect("submit --help", 0, "npubench submit {run,verify,verify-full,diagnosis,profile,health}");
    expect("submit --help", 0, "npubench submit matrix --models A,B --boards TAG");
    expect("submit --help", 0, "instruct (default), base, gemma3, or a model name");
    expect("--help", 0, "6 data loss");
    /* the job-kind commands' words and help are their descriptors': a kind with a command
     * here (its --help works) is listed as "  WORD  HELP" */
    int local = 0;
    for (size_t i = 0; nb_job_kind_at(i); i++) {
        const nb_job_kind_desc *d = nb_job_kind_at(i);
        char a[64], line[256];
        snprintf(a, sizeof a, "%s --help >/dev/null", d->name);
        snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tu_env("NB_BIN", "npubench"), a);
        tu_result r = tu_run(cmd);
        free(r.out);
        if (r.code)
            continue; /* submit-only (health) */
        snprintf(line, sizeof line, "  %-14s %s\n", d->name, d->help);
        expect("--help", 0, line);
        local++;
    }
    assert_int_equal(local, 5);
    char db[1200], args[4096];
    snprintf(db, sizeof db, "%s/ref.db", tu_group_tmp());
    snprintf(args, sizeof args, "import tests/data/db/history.ndjson --db '%s'", db);
    expect(args, 0, "5 runs imported");
    snprintf(args, sizeof args, "reference set --run 1 --db '%s'", db);
    expect(args, 0, "reference of Llama-3.2-1B-Instruct: deployment 1");
    snprintf(args, sizeof args, "reference show --format csv --db '%s'", db);
    expect(args, 0, "model,deployment_id,deployment,set (UTC),runs,latest_run_id\n"
                    "Llama-3.2-1B-Instruct,1,Llama-3.2-1B-Instruct npu/bf16 on npu-strix-01,");
    /* a keyed coordinator: the admin key from the environment for drain, not the client's */
    char sh[8192];
    const char *ck = "client-key-0123456789abcdef", *ak = "admin-key-0123456789abcdef";
    snprintf(sh, sizeof sh,
             "cd '%s'; B='%s'; env NPUBENCH_SECRET=%s NPUBENCH_ADMIN_SECRET=%s \"$B\" "
             "coordinator --listen ipc://%s/adm.sock --db %s/adm.db >%s/adm.log 2>&1 & P=$!; "
             "for i in $(seq 100); do [ -S %s/adm.sock ] && break; sleep 0.1; done; "
             "env NPUBENCH_SECRET=%s NPUBENCH_ADMIN_SECRET=%s \"$B\" workers drain nob "
             "--coordinator ipc://%s/adm.sock 2>&1; "
             "env -u NPUBENCH_ADMIN_SECRET NPUBENCH_SECRET=%s \"$B\" workers drain nob "
             "--coordinator ipc://%s/adm.sock 2>&1; kill $P; wait $P",
             tu_env("NB_SRC", "."), tu_env("NB_BIN", "npubench"), ck, ak, tu_group_tmp(),
             tu_group_tmp(), tu_group_tmp(), tu_group_tmp(), ck, ak, tu_group_tmp(), ck,
             tu_group_tmp());
    tu_result r = tu_run(sh);
    print_message("%s", r.out ? r.out : "");
    assert_non_null(r.out);
    /* with the admin key: authorized, so the board's absence is the answer */
    assert_non_null(strstr(r.out, "NOT_FOUND: DrainRequest.board 'nob': no worker of that board "
                                  "has registered"));
    /* without it: the client key is refused */
    assert_non_null(strstr(r.out, "PERMISSION_DENIED: npubench.Client/Drain: needs the admin "
                                  "credential"));
    free(r.out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_submit_param_limits),
        cmocka_unit_test(test_keys_and_exposure),
        cmocka_unit_test(test_makefile_prompt_is_text),
        cmocka_unit_test(test_corrupt_models),
        cmocka_unit_test(test_bad_prompts),
        cmocka_unit_test(test_xrt_unavailable),
        cmocka_unit_test(test_damaged_database),
        cmocka_unit_test(test_help_and_admin_key),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
