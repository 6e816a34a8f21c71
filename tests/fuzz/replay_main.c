/* replay_main: a harness outside libFuzzer, as a cmocka test fed every file of its corpus (seeds
 * and crash inputs kept as regressions), so ctest and the sanitizer build rerun them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static const char *corpus_dir;

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void test_corpus(void **state)
{
    (void)state;
    DIR *d = opendir(corpus_dir);
    assert_non_null(d);
    int fed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", corpus_dir, e->d_name);
        size_t len;
        uint8_t *buf = slurp(path, &len);
        /* An exact copy of the input's length: ASan sees any read past its end. */
        uint8_t *exact = malloc(len ? len : 1);
        assert_non_null(exact);
        memcpy(exact, buf, len);
        free(buf);
        assert_int_equal(LLVMFuzzerTestOneInput(exact, len), 0);
        free(exact);
        fed++;
    }
    closedir(d);
    print_message("%d inputs from %s\n", fed, corpus_dir);
    assert_true(fed > 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    corpus_dir = argv[1];
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_corpus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
