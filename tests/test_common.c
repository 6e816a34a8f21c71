/* test_common: the small shared containers and utilities with values worked out by hand —
 * arena chunks and failure flag, base64 (RFC 4648 vectors), error prefixes and code names,
 * UTF-8 validation/sanitising/decoding, key files checked like ssh checks private keys, ages
 * in the unit people read them in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "nb_arena.h"
#include "nb_base64.h"
#include "nb_err.h"
#include "nb_secret.h"
#include "nb_term.h"
#include "nb_time.h"
#include "nb_utf8.h"
#include "testutil.h"

static int n_freed;
static void count_free(void *p)
{
    n_freed++;
    free(p);
}

static void test_arena(void **s)
{
    (void)s;
    nb_arena a = {0};
    char *x = nb_arena_alloc(&a, 10);
    assert_non_null(x);
    assert_int_equal((uintptr_t)x % 16, 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(x[i], 0);
    /* a request beyond the growth cap gets a chunk of its own behind the current one, and
     * the current chunk keeps serving small requests */
    unsigned char *big = nb_arena_alloc(&a, (size_t)3 << 20);
    assert_non_null(big);
    assert_int_equal(big[((size_t)3 << 20) - 1], 0);
    char *y = nb_arena_alloc(&a, 16);
    assert_ptr_equal(y, x + 16);
    assert_string_equal(nb_arena_strdup(&a, "hello"), "hello");
    assert_string_equal(nb_arena_strndup(&a, "hello", 3), "hel");
    assert_string_equal(nb_arena_strdup(&a, NULL), "");
    assert_string_equal(nb_arena_printf(&a, "%d-%s", 42, "x"), "42-x");
    int v[3] = {1, 2, 3};
    int *d = nb_arena_memdup(&a, v, sizeof v);
    assert_memory_equal(d, v, sizeof v);
    assert_non_null(nb_arena_alloc(&a, 0)); /* a distinct pointer even for 0 bytes */
    assert_int_equal(a.failed, 0);
    /* overflow: NULL and the flag, never a short allocation */
    assert_null(nb_arena_calloc(&a, SIZE_MAX / 2, 4));
    assert_int_equal(a.failed, 1);
    assert_null(nb_arena_alloc(&a, SIZE_MAX - 8));
    assert_int_equal(nb_arena_defer_free(&a, count_free, NULL), 0);
    assert_int_equal(nb_arena_defer_free(&a, count_free, malloc(8)), 0);
    assert_int_equal(nb_arena_defer_free(&a, count_free, malloc(8)), 0);
    n_freed = 0;
    nb_arena_free(&a);
    assert_int_equal(n_freed, 2);
    assert_int_equal(a.failed, 0);
    assert_null(a.head);
    nb_arena_free(&a); /* twice is harmless */
}

static void test_base64(void **s)
{
    (void)s;
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                        "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    nb_err err;
    for (int i = 0; i < 7; i++) {
        char *e;
        assert_int_equal(nb_base64_encode((const uint8_t *)plain[i], strlen(plain[i]), &e, &err),
                         NB_OK);
        assert_string_equal(e, coded[i]);
        free(e);
        uint8_t *d;
        size_t n;
        assert_int_equal(nb_base64_decode(coded[i], strlen(coded[i]), &d, &n, &err), NB_OK);
        assert_int_equal(n, strlen(plain[i]));
        assert_memory_equal(d, plain[i], n);
        free(d);
    }
    uint8_t *d = (uint8_t *)1;
    size_t n = 9;
    assert_int_equal(nb_base64_decode("Zm9", 3, &d, &n, &err), NB_EFORMAT);
    assert_string_equal(err.msg, "base64: length 3 is not a multiple of 4");
    assert_null(d);
    assert_int_equal(n, 0);
    assert_int_equal(nb_base64_decode("Zm 9", 4, &d, &n, &err), NB_EFORMAT);
    assert_string_equal(err.msg, "base64: invalid character at offset 2");
    assert_int_equal(nb_base64_decode("Z=9v", 4, &d, &n, &err), NB_EFORMAT); /* '=' inside */
    assert_string_equal(err.msg, "base64: invalid character at offset 1");
    assert_int_equal(nb_base64_decode("Zg==Zg==", 8, &d, &n, &err), NB_EFORMAT);
    assert_string_equal(err.msg, "base64: invalid character at offset 2");
}

static void test_err(void **s)
{
    (void)s;
    nb_err err;
    assert_int_equal(nb_err_set(&err, NB_EINVAL, "--k: %d is outside 1..%d", 99, 10), NB_EINVAL);
    assert_int_equal(nb_err_prefix(&err, "%s: ", "verify"), NB_EINVAL);
    assert_string_equal(err.msg, "verify: --k: 99 is outside 1..10");
    assert_int_equal(nb_err_set(NULL, NB_EIO, "ignored"), NB_EIO);
    assert_int_equal(nb_err_prefix(NULL, "x"), NB_OK);
    /* a prefix as long as the buffer keeps the message terminated, the prefix first */
    char longp[NB_ERR_MSG_MAX + 20];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    nb_err_set(&err, NB_EFORMAT, "tail");
    nb_err_prefix(&err, "%s", longp);
    assert_int_equal(strlen(err.msg), NB_ERR_MSG_MAX - 1);
    assert_int_equal(err.msg[0], 'p');
    assert_null(strstr(err.msg, "tail"));
    nb_err_set(&err, NB_EFORMAT, "tail");
    nb_err_prefix(&err, "%.*s", NB_ERR_MSG_MAX - 3, longp);
    assert_int_equal(strlen(err.msg), NB_ERR_MSG_MAX - 1);
    assert_string_equal(err.msg + NB_ERR_MSG_MAX - 3, "ta");
    nb_err_clear(&err);
    assert_int_equal(err.code, NB_OK);
    assert_string_equal(err.msg, "");
    nb_err_clear(NULL);
    static const char *const names[] = {
        "OK",        "INVALID_ARGUMENT", "IO_ERROR",    "RESOURCE_EXHAUSTED",  "BAD_FORMAT",
        "UNIMPLEMENTED", "NOT_FOUND",    "FAILED_PRECONDITION", "UNAVAILABLE",
        "DEADLINE_EXCEEDED", "UNAUTHENTICATED", "CANCELLED", "INTERNAL", "DATA_LOSS"};
    for (int c = NB_OK; c <= NB_EDATALOSS; c++)
        assert_string_equal(nb_code_name((nb_code)c), names[c]);
    assert_string_equal(nb_code_name((nb_code)99), "UNKNOWN");
}

static void test_utf8(void **s)
{
    (void)s;
    size_t bad = 99;
    assert_true(nb_utf8_valid("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10, &bad));
    assert_int_equal(bad, 99);
    /* overlong, surrogate, above U+10FFFF, stray continuation, truncated */
    static const struct {
        const char *s;
        size_t n, off;
    } no[] = {{"ab\xc0\xaf", 4, 2},   {"\xe0\x80\xaf", 3, 0},    {"x\xed\xa0\x80", 4, 1},
              {"\xf4\x90\x80\x80", 4, 0}, {"\x80", 1, 0},        {"ok\xe2\x82", 4, 2},
              {"\xf5\x80\x80\x80", 4, 0}, {"\xe2\x28\xa1", 3, 0}};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        assert_false(nb_utf8_valid(no[i].s, no[i].n, &bad));
        assert_int_equal(bad, no[i].off);
        assert_int_equal(nb_utf8_valid_prefix(no[i].s, no[i].n), no[i].off);
        assert_false(nb_utf8_valid(no[i].s, no[i].n, NULL));
    }
    char *z = nb_utf8_sanitize("a\xff" "b\x00" "c\xe2\x82", 7);
    assert_string_equal(z, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd");
    free(z);
    uint32_t cp;
    assert_int_equal(nb_utf8_decode("A", &cp), 1);
    assert_int_equal(cp, 0x41);
    assert_int_equal(nb_utf8_decode("\xc3\xa9", &cp), 2);
    assert_int_equal(cp, 0xe9);
    assert_int_equal(nb_utf8_decode("\xe2\x82\xac", &cp), 3);
    assert_int_equal(cp, 0x20ac);
    assert_int_equal(nb_utf8_decode("\xf0\x9f\x98\x80", &cp), 4);
    assert_int_equal(cp, 0x1f600);
    static const uint32_t sp[] = {9, 10, 13, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x200a,
                                  0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
        assert_true(nb_utf8_is_space(sp[i]));
    static const uint32_t nsp[] = {8, 14, 'a', 0x200b, 0x2027, 0xfeff};
    for (size_t i = 0; i < sizeof nsp / sizeof *nsp; i++)
        assert_false(nb_utf8_is_space(nsp[i]));
}

static const char *key_file(const char *name, const char *content, mode_t mode)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", tu_group_tmp(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static void test_secret_files(void **s)
{
    (void)s;
    nb_err err;
    char *k = (char *)1, msg[8192];
    const char *p = key_file("ok.key", "s3cret-0123456789 \n\n", 0600);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_OK);
    assert_string_equal(k, "s3cret-0123456789"); /* trailing whitespace is not part of the key */
    nb_secret_free(k);
    p = key_file("open.key", "s3cret", 0640);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_EAUTH);
    assert_null(k);
    snprintf(msg, sizeof msg, "%s: mode 0640 lets other users read or change the key; it must "
             "be 0600 (chmod 600 %s)", p, p);
    assert_string_equal(err.msg, msg);
    p = key_file("empty.key", " \n", 0600);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_EINVAL);
    snprintf(msg, sizeof msg, "%s: the key file is empty", p);
    assert_string_equal(err.msg, msg);
    char big[NB_SECRET_FILE_MAX + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    p = key_file("big.key", big, 0600);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_EINVAL);
    snprintf(msg, sizeof msg, "%s: 4097 bytes, the limit for a key file is 4096", p);
    assert_string_equal(err.msg, msg);
    /* a FIFO in the key's place: refused at once, never waited on */
    char fifo[4096];
    snprintf(fifo, sizeof fifo, "%s/fifo.key", tu_group_tmp());
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(nb_secret_read_file(fifo, &k, &err), NB_EINVAL);
    snprintf(msg, sizeof msg, "%s: not a regular file", fifo);
    assert_string_equal(err.msg, msg);
    snprintf(fifo, sizeof fifo, "%s/missing.key", tu_group_tmp());
    assert_int_equal(nb_secret_read_file(fifo, &k, &err), NB_ENOTFOUND);
    /* nb_secret_get: the file wins, named by its flag; else the environment; else none */
    assert_int_equal(nb_secret_get("--secret-file", fifo, "NB_TEST_KEY", &k, &err),
                     NB_ENOTFOUND);
    assert_true(strncmp(err.msg, "--secret-file: ", 15) == 0);
    setenv("NB_TEST_KEY", "from-env-0123456789", 1);
    assert_int_equal(nb_secret_get("--secret-file", NULL, "NB_TEST_KEY", &k, &err), NB_OK);
    assert_string_equal(k, "from-env-0123456789");
    nb_secret_free(k);
    setenv("NB_TEST_KEY", "short", 1); /* the variable is checked as a file is */
    assert_int_equal(nb_secret_get("--secret-file", NULL, "NB_TEST_KEY", &k, &err), NB_EINVAL);
    assert_null(k);
    assert_string_equal(err.msg, "$NB_TEST_KEY: a key of 5 bytes; the minimum is 16");
    unsetenv("NB_TEST_KEY");
    assert_int_equal(nb_secret_get("--secret-file", "", "NB_TEST_KEY", &k, &err), NB_OK);
    assert_null(k);
    assert_int_equal(nb_secret_refuse_argv("--secret", "--secret-file", "NPUBENCH_SECRET", &err),
                     NB_EINVAL);
    assert_string_equal(err.msg, "--secret: a key on the command line is visible to every user "
                                 "in ps; use --secret-file FILE (mode 0600) or $NPUBENCH_SECRET");
    nb_secret_free(NULL);
}

/* Writes n raw bytes to tmp/name with mode 0600. */
static const char *key_file_bytes(const char *name, const void *bytes, size_t n)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", tu_group_tmp(), name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0);
    return path;
}

/* Key files are text of 16..4096 printable bytes: a NUL byte (leading, as 1 raw key from
 * /dev/urandom in 256 has, or inside), a control or non-ASCII byte, or a short key is
 * refused naming the file and the offset; a leading NUL used to leave an empty key, which
 * turned authentication off. */
static void test_secret_file_content(void **s)
{
    (void)s;
    nb_err err;
    char *k = (char *)1, msg[8192];
    static const char lead_nul[] = "\0abcdefghijklmnopqrstuvwxyz0123456789";
    const char *p = key_file_bytes("nul0.key", lead_nul, sizeof lead_nul - 1);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_EINVAL);
    assert_null(k);
    snprintf(msg, sizeof msg, "%s: a NUL byte at offset 0", p);
    assert_true(strncmp(err.msg, msg, strlen(msg)) == 0);
    static const char mid_nul[] = "abcdefghijklmnopqr\0stuvwxyz";
    p = key_file_bytes("nul18.key", mid_nul, sizeof mid_nul - 1);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_EINVAL);
    snprintf(msg, sizeof msg, "%s: a NUL byte at offset 18", p);
    assert_true(strncmp(err.msg, msg, strlen(msg)) == 0);
    static const unsigned char raw[] = {0x41, 0x42, 0xff, 0x10, 0x43, 0x44, 0x45, 0x46, 0x47,
                                        0x48, 0x49, 0x4a, 0x4b, 0x4c, 0x4d, 0x4e, 0x4f, 0x50};
    p = key_file_bytes("raw.key", raw, sizeof raw);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_EINVAL);
    snprintf(msg, sizeof msg, "%s: byte 0xff at offset 2: a key is printable ASCII", p);
    assert_true(strncmp(err.msg, msg, strlen(msg)) == 0);
    p = key_file("short.key", "k3y\n", 0600);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_EINVAL);
    snprintf(msg, sizeof msg, "%s: a key of 3 bytes; the minimum is 16", p);
    assert_string_equal(err.msg, msg);
    /* base64 of 32 random bytes, as the docs advise: accepted */
    p = key_file("b64.key", "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=\n", 0600);
    assert_int_equal(nb_secret_read_file(p, &k, &err), NB_OK);
    assert_int_equal(strlen(k), 44);
    nb_secret_free(k);
}

/* Named client keys: "NAME KEY" lines, comments and blank lines skipped, each key checked;
 * a bad line is named by file and number. */
static void test_secret_named(void **s)
{
    (void)s;
    nb_err err;
    char **names, **keys, msg[8192];
    int n = -1;
    const char *p = key_file("clients.key",
                             "# lab\n\nalice alice-key-0123456789\n  bob\tbob-key-0123456789ab  \n",
                             0600);
    assert_int_equal(nb_secret_read_named(p, &names, &keys, &n, &err), NB_OK);
    assert_int_equal(n, 2);
    assert_string_equal(names[1], "bob");
    assert_string_equal(keys[1], "bob-key-0123456789ab");
    nb_secret_free_named(names, keys, n);
    p = key_file("clients-bad.key", "alice alice-key-0123456789\nbad/name k3y-0123456789abcdef\n",
                 0600);
    assert_int_equal(nb_secret_read_named(p, &names, &keys, &n, &err), NB_EINVAL);
    assert_int_equal(n, 0);
    snprintf(msg, sizeof msg, "%s:2: expected NAME KEY", p);
    assert_true(strncmp(err.msg, msg, strlen(msg)) == 0);
    p = key_file("clients-open.key", "alice alice-key-0123456789\n", 0644);
    assert_int_equal(nb_secret_read_named(p, &names, &keys, &n, &err), NB_EAUTH);
}

/* nb_term_escape: control bytes and C1 controls as \xHH, lines kept when asked, a second
 * pass changes nothing, a C2 at the end of a chunk waits for its next byte. */
static void test_term_escape(void **s)
{
    (void)s;
    char out[256];
    const char in[] = "a\x1b]0;t\x07" "b\r\n\tc\xc2\x9b" "2J\x7f\xc3\xa9";
    nb_term_escape(out, sizeof out, in, strlen(in), NB_TERM_KEEP_LINES, NULL);
    assert_string_equal(out, "a\\x1b]0;t\\x07b\\r\n\tc\\xc2\\x9b2J\\x7f\xc3\xa9");
    nb_term_escape(out, sizeof out, in, strlen(in), 0, NULL);
    assert_string_equal(out, "a\\x1b]0;t\\x07b\\r\\n\\tc\\xc2\\x9b2J\\x7f\xc3\xa9");
    char again[256];
    nb_term_escape(again, sizeof again, out, strlen(out), 0, NULL);
    assert_string_equal(again, out);
    size_t used = 0;
    nb_term_escape(out, sizeof out, "ab\xc2", 3, 0, &used);
    assert_int_equal(used, 2);
    assert_string_equal(out, "ab");
    /* never an escape cut in half */
    nb_term_escape(out, 6, "ab\x1b", 3, 0, NULL);
    assert_string_equal(out, "ab");
}

/* Each unit up to just below the next one's threshold; the future reads 0 s. */
static void test_age(void **s)
{
    (void)s;
    const int64_t now = 1800000000000LL;
    const struct {
        int64_t ago_s, value;
        char unit;
    } t[] = {{0, 0, 's'},     {119, 119, 's'},   {120, 2, 'm'},      {7199, 119, 'm'},
             {7200, 2, 'h'},  {172799, 47, 'h'}, {172800, 2, 'd'},   {86400 * 400, 400, 'd'},
             {-5, 0, 's'}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char unit = '?';
        assert_int_equal(nb_time_age(now, now - t[i].ago_s * 1000, &unit), t[i].value);
        assert_int_equal(unit, t[i].unit);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena),   cmocka_unit_test(test_base64),
        cmocka_unit_test(test_err),     cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_secret_files),
        cmocka_unit_test(test_secret_file_content),
        cmocka_unit_test(test_term_escape),
        cmocka_unit_test(test_secret_named), cmocka_unit_test(test_age),
    };
    return tu_run_group(tests, tu_group_setup, tu_group_teardown);
}
