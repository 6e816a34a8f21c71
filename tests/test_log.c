/* test_log: the shared log line: its format, the escaping that keeps a value from forging a
 * line or driving the terminal, the cut of long messages, and whole lines under threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_log.h"

/* Logs into a temporary file for the test; lines() reads back what was written. */
static FILE *sink;
static int old_fd;

static int setup(void **state)
{
    (void)state;
    sink = tmpfile();
    if (!sink)
        return -1;
    old_fd = nb_log_set_fd(fileno(sink));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nb_log_set_fd(old_fd);
    fclose(sink);
    return 0;
}

/* Everything logged so far (the caller frees it). */
static char *written(size_t *len)
{
    fflush(sink);
    long n = lseek(fileno(sink), 0, SEEK_END);
    assert_true(n >= 0);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fileno(sink), buf, (size_t)n, 0), n);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* "YYYY-MM-DDTHH:MM:SSZ " */
static void assert_stamp(const char *s)
{
    for (int i = 0; i < 20; i++) {
        char c = s[i];
        if (i == 4 || i == 7)
            assert_int_equal(c, '-');
        else if (i == 10)
            assert_int_equal(c, 'T');
        else if (i == 13 || i == 16)
            assert_int_equal(c, ':');
        else if (i == 19)
            assert_int_equal(c, 'Z');
        else
            assert_true(c >= '0' && c <= '9');
    }
    assert_int_equal(s[20], ' ');
}

static void test_format(void **state)
{
    (void)state;
    nb_log("npubench coordinator", "job %d submitted: %s", 7, "verify");
    size_t n;
    char *out = written(&n);
    assert_stamp(out);
    assert_string_equal(out + 21, "npubench coordinator: job 7 submitted: verify\n");
    free(out);
}

static void test_escapes_controls(void **state)
{
    (void)state;
    /* A value that tries to end the line and forge the next one, to move the cursor back,
     * to colour the terminal (ESC and the UTF-8 C1 CSI), plus tab and DEL. */
    nb_log("tag", "model %s",
           "x\n2026-01-01T00:00:00Z tag: forged\r\x1b[31mred\t\x7f\xc2\x9b" "0m");
    size_t n;
    char *out = written(&n);
    assert_int_equal(out[n - 1], '\n');
    assert_ptr_equal(strchr(out, '\n'), out + n - 1); /* one line, however the value reads */
    assert_null(strchr(out, '\r'));
    assert_null(strchr(out, '\x1b'));
    assert_string_equal(out + 21, "tag: model x\\n2026-01-01T00:00:00Z tag: forged\\r\\x1b[31mred"
                                  "\\t\\x7f\\xc2\\x9b0m\n");
    free(out);
}

static void test_utf8_kept(void **state)
{
    (void)state;
    /* Printable UTF-8, including the C2 lead byte of a non-control, goes through. */
    nb_log("tag", "%s", "caf\xc3\xa9 \xc2\xb5s \xe2\x9c\x93");
    size_t n;
    char *out = written(&n);
    assert_string_equal(out + 21, "tag: caf\xc3\xa9 \xc2\xb5s \xe2\x9c\x93\n");
    free(out);
}

static void test_long_message_cut(void **state)
{
    (void)state;
    size_t big = 3 * NB_LOG_LINE_MAX;
    char *msg = malloc(big + 1);
    assert_non_null(msg);
    memset(msg, '\n', big); /* each escapes to two bytes: the cut falls between escapes */
    msg[big] = '\0';
    nb_log("tag", "%s", msg);
    free(msg);
    size_t n;
    char *out = written(&n);
    assert_true(n <= NB_LOG_LINE_MAX);
    assert_int_equal(out[n - 1], '\n');
    assert_ptr_equal(strchr(out, '\n'), out + n - 1);
    assert_int_equal(out[n - 2], 'n'); /* the last escape is whole */
    assert_int_equal(out[n - 3], '\\');
    free(out);
}

static size_t format_line(char *line, size_t cap, const char *tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = nb_log_vformat(line, cap, tag, fmt, ap);
    va_end(ap);
    return n;
}

static void test_vformat_and_write(void **state)
{
    (void)state;
    /* The line handed elsewhere (the worker's log hook) is the one written, less the newline. */
    char line[NB_LOG_LINE_MAX];
    size_t len = format_line(line, sizeof line, "w", "job %d: %s", 3, "a\nb\x1b");
    assert_int_equal(len, strlen(line));
    assert_stamp(line);
    assert_string_equal(line + 21, "w: job 3: a\\nb\\x1b");
    /* A small buffer cuts the line and still terminates it. */
    char small[30];
    assert_int_equal(format_line(small, sizeof small, "w", "%s", "0123456789"), 29);
    assert_string_equal(small + 21, "w: 01234");
    /* Text that is already a line is escaped the same way: job output keeps its stamp. */
    nb_log_write("worker[1]: job: 2026-01-01T00:00:00Z | out\x1b[2J");
    size_t n;
    char *out = written(&n);
    assert_string_equal(out, "worker[1]: job: 2026-01-01T00:00:00Z | out\\x1b[2J\n");
    free(out);
}

/* Several threads logging at once: every line arrives whole. */
#define THREADS 4
#define PER_THREAD 500

static void *logger(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++)
        nb_log("t", "thread %d line %03d %s", id, i, "payload payload payload payload");
    return NULL;
}

static void test_threads_whole_lines(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, logger, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    size_t n;
    char *out = written(&n);
    int lines = 0;
    for (char *s = out, *nl; (nl = strchr(s, '\n')); s = nl + 1, lines++) {
        *nl = '\0';
        assert_stamp(s);
        int id, i;
        char tail[64];
        assert_int_equal(sscanf(s + 21, "t: thread %d line %d %63[^\n]", &id, &i, tail), 3);
        assert_int_equal(strlen(s + 21),
                         strlen("t: thread 0 line 000 payload payload payload payload"));
    }
    assert_int_equal(lines, THREADS * PER_THREAD);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escapes_controls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_utf8_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_message_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vformat_and_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_whole_lines, setup, teardown),
    };
    return tu_run_group(tests, NULL, NULL);
}
