/* testutil: helpers the cmocka tests share — run a command and capture its output, temp dirs.
 * Header-only because each tests/test_*.c is its own executable. */
#ifndef NB_TESTUTIL_H
#define NB_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct tu_result {
    int code;   /* exit status, or 128 + signal */
    char *out;  /* stdout and stderr together, NUL-terminated (caller frees) */
} tu_result;

/* Runs `sh -c cmd`, capturing both streams. */
static inline tu_result tu_run(const char *cmd)
{
    tu_result r = {-1, NULL};
    char *full;
    if (asprintf(&full, "(%s) 2>&1", cmd) < 0)
        return r;
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        return r;
    size_t cap = 1 << 16, len = 0;
    r.out = malloc(cap);
    size_t got;
    while (r.out && (got = fread(r.out + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 4096) {
            cap *= 2;
            char *n = realloc(r.out, cap);
            if (!n)
                break;
            r.out = n;
        }
    }
    if (r.out)
        r.out[len] = '\0';
    int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return r;
}

static inline const char *tu_env(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

/* The default model, or NULL when it has not been fetched. */
static inline const char *tu_model(void)
{
    static char path[2048];
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             tu_env("NB_SRC", "."));
    return access(path, R_OK) == 0 ? path : NULL;
}

/* mkdtemp under TMPDIR; the caller removes it with tu_rmrf. */
static inline char *tu_tmpdir(void)
{
    char *t;
    if (asprintf(&t, "%s/nbtest.XXXXXX", tu_env("TMPDIR", "/tmp")) < 0)
        return NULL;
    if (!mkdtemp(t)) {
        free(t);
        return NULL;
    }
    return t;
}

static inline void tu_rmrf(char *dir)
{
    if (!dir)
        return;
    char *cmd;
    if (asprintf(&cmd, "rm -rf '%s'", dir) >= 0) {
        int rc = system(cmd);
        (void)rc;
        free(cmd);
    }
    free(dir);
}


/* One scratch directory per test file: run the cmocka group with
 * tu_group_setup and tu_group_teardown and read the path as tu_group_tmp(). */
static inline char **tu_group_tmp_slot(void)
{
    static char *dir;
    return &dir;
}

static inline char *tu_group_tmp(void)
{
    return *tu_group_tmp_slot();
}

/* Overwrites the last 4 KiB of path (an SQLite page at the default page size) with junk,
 * as a failing disk would; 0 on success. */
static inline int tu_damage_tail(const char *path)
{
    FILE *f = fopen(path, "r+b");
    if (!f)
        return -1;
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    int bad = fseek(f, -(long)sizeof junk, SEEK_END) != 0 ||
              fwrite(junk, 1, sizeof junk, f) != sizeof junk;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

static inline int tu_group_setup(void **state)
{
    (void)state;
    *tu_group_tmp_slot() = tu_tmpdir();
    return tu_group_tmp() ? 0 : -1;
}

static inline int tu_group_teardown(void **state)
{
    (void)state;
    tu_rmrf(tu_group_tmp());
    *tu_group_tmp_slot() = NULL;
    return 0;
}

#endif
