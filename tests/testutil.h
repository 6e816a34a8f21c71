/* testutil: helpers the cmocka tests share — run a command and capture its output, temp dirs,
 * honest skips (tu_skip, tu_require*), a process-group watchdog, polls with deadlines.
 * Header-only because each tests/test_*.c is its own executable; every main returns
 * tu_run_group(...) instead of cmocka_run_group_tests(...). */
#ifndef NB_TESTUTIL_H
#define NB_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
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

/* ---- honest skips ----
 * ctest runs every test with SKIP_RETURN_CODE TU_SKIP_RC: a file whose tests all pass or skip,
 * with at least one skipped, is reported "Skipped", never "Passed"; a failure still wins. */
#define TU_SKIP_RC 77

/* Non-zero under CI (CI set to anything but "", "0" or "false"): there a test that cannot
 * run fails instead of skipping. */
static inline int tu_ci(void)
{
    const char *c = getenv("CI");
    return c && *c && strcmp(c, "0") && strcmp(c, "false");
}

static inline int *tu_skips(void)
{
    static int n;
    return &n;
}

/* Skips the running test with the reason printed; for what a host may legitimately lack
 * (an ISA): allowed under CI too. The format must be a string literal. */
#define tu_skip(...)                                                                    \
    do {                                                                                \
        print_message("[  SKIP    ] " __VA_ARGS__);                                     \
        print_message("\n");                                                            \
        (*tu_skips())++;                                                                \
        skip();                                                                         \
    } while (0)

/* A precondition of the test (a model, the source tree, a tool): when it does not hold the
 * test fails under CI and is skipped, reason printed, elsewhere. */
#define tu_require(cond, ...)                                                           \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            if (tu_ci())                                                                \
                fail_msg("CI=true and this test cannot run: " __VA_ARGS__);             \
            tu_skip(__VA_ARGS__);                                                       \
        }                                                                               \
    } while (0)

/* The default model, or NULL when it has not been fetched. */
static inline const char *tu_model(void)
{
    static char path[2048];
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             tu_env("NB_SRC", "."));
    return access(path, R_OK) == 0 ? path : NULL;
}

/* The source tree (NB_SRC, set by ctest), required as tu_require does. */
static inline const char *tu_require_src(void)
{
    const char *src = getenv("NB_SRC");
    tu_require(src && *src && access(src, R_OK | X_OK) == 0,
               "the source tree (NB_SRC=%s) is not readable", src ? src : "(unset)");
    return src;
}

/* The default model's path, required as tu_require does. */
static inline const char *tu_require_model(void)
{
    tu_require_src();
    const char *m = tu_model();
    tu_require(m != NULL, "models/SmolLM2-135M-Instruct.Q4_1.gguf is not fetched "
                          "(scripts/fetch_model.sh)");
    return m;
}

/* ---- processes: every test runs in a process group of its own, watched ----
 * tu_init makes the test its group's leader and forks a watchdog that, once the test has
 * exited for any reason (a failed assertion, abort, a ctest timeout's SIGKILL), kills what is
 * left in the group: TERM, then KILL after a second. At a normal exit tu_group_exit also
 * fails the run when a process it started is still alive in the group. */
static inline pid_t *tu_watchdog_pid(void)
{
    static pid_t pid;
    return &pid;
}

static inline void tu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static inline double tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Live (not zombie) members of our process group other than us and the watchdog; their pids
 * in out[cap]. */
static inline int tu_group_members(pid_t *out, int cap)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    pid_t self = getpid(), pg = getpgrp();
    while ((e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || pid == self || pid == *tu_watchdog_pid())
            continue;
        char p[64], buf[512];
        snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        const char *rp = strrchr(buf, ')'); /* comm may hold spaces */
        char state;
        int ppid, pgrp;
        if (rp && sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == (int)pg &&
            state != 'Z' && n < cap)
            out[n++] = pid;
    }
    closedir(d);
    return n;
}

static inline void tu_init(void)
{
    if (getpgrp() != getpid() && setpgid(0, 0))
        return; /* not our own group: never signal one we share */
    pid_t parent = getpid();
    pid_t w = fork();
    if (w != 0) {
        *tu_watchdog_pid() = w > 0 ? w : 0;
        return;
    }
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    for (int fd = 0; fd < 1024; fd++)
        close(fd); /* hold none of ctest's pipes open */
    while (getppid() == parent)
        tu_sleep_ms(100);
    if (getpgrp() != parent)
        _exit(0);
    kill(-parent, SIGTERM);
    *tu_watchdog_pid() = getpid();
    pid_t left[1];
    for (int i = 0; i < 10 && tu_group_members(left, 1); i++)
        tu_sleep_ms(100);
    kill(-parent, SIGKILL); /* us too */
    _exit(0);
}

/* Children a test started in the background: tu_track them when forked, tu_kill ends one
 * (SIGKILL, reaped); tu_teardown_kill, a cmocka teardown, ends the rest after the test
 * passed or failed, so a failed test leaves nothing running into the next one. */
enum { TU_TRACK_MAX = 64 };
static inline pid_t *tu_tracked(void)
{
    static pid_t pids[TU_TRACK_MAX];
    return pids;
}

static inline void tu_track(pid_t pid)
{
    for (int i = 0; i < TU_TRACK_MAX; i++)
        if (tu_tracked()[i] <= 0) {
            tu_tracked()[i] = pid;
            return;
        }
    fail_msg("more than %d background processes", TU_TRACK_MAX);
}

static inline void tu_kill(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    for (int i = 0; i < TU_TRACK_MAX; i++)
        if (tu_tracked()[i] == pid)
            tu_tracked()[i] = 0;
}

static inline int tu_teardown_kill(void **state)
{
    (void)state;
    for (int i = 0; i < TU_TRACK_MAX; i++)
        tu_kill(tu_tracked()[i]);
    return 0;
}

/* What main returns: cmocka's failure count, else TU_SKIP_RC when a test skipped, and a
 * failure when a process the tests started outlived them (it is killed). */
static inline int tu_group_exit(int failed)
{
    pid_t left[16];
    int n = getpgrp() == getpid() ? tu_group_members(left, 16) : 0;
    for (int i = 0; i < n; i++) {
        char p[64], comm[64] = "?";
        snprintf(p, sizeof p, "/proc/%d/comm", (int)left[i]);
        FILE *f = fopen(p, "r");
        if (f) {
            if (fgets(comm, sizeof comm, f))
                comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        fprintf(stderr, "[  LEAK    ] pid %d (%s) outlived the tests; killed\n", (int)left[i],
                comm);
        kill(left[i], SIGKILL);
    }
    if (failed || n)
        return failed + n;
    if (*tu_skips()) {
        fprintf(stderr, "[  SKIPPED ] %d test(s) skipped: ctest reports this file Skipped\n",
                *tu_skips());
        return TU_SKIP_RC;
    }
    return 0;
}

#define tu_run_group(tests, setup, teardown)                                            \
    (tu_init(), tu_group_exit(cmocka_run_group_tests(tests, setup, teardown)))

/* Polls cond (an expression) every 20 ms until it holds or ms pass; its value. */
#define tu_poll(ms, cond)                                                               \
    ({                                                                                  \
        double tu_deadline_ = tu_now_ms() + (ms);                                       \
        int tu_ok_;                                                                     \
        while (!(tu_ok_ = !!(cond)) && tu_now_ms() < tu_deadline_)                      \
            tu_sleep_ms(20);                                                            \
        tu_ok_;                                                                         \
    })

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

/* The whole text of path, NUL-terminated (the caller frees); fails the test, naming the
 * path, when it cannot be read. */
static inline char *tu_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 4096) {
            char *n = realloc(buf, cap *= 2);
            if (!n)
                free(buf);
            buf = n;
        }
    }
    fclose(f);
    assert_non_null(buf);
    buf[len] = '\0';
    return buf;
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

/* ---- driving the npubench binary (tests that run the service through its CLI) ---- */

/* Environment without any key or default coordinator, so only the flags count. */
#define TU_NOENV                                                                                  \
    "env -u NPUBENCH_SECRET -u NPUBENCH_WORKER_SECRET -u NPUBENCH_ADMIN_SECRET "              \
    "-u NPUBENCH_COORDINATOR "

/* `npubench ARGS` in the background through `sh -c`, without the key variables (TU_NOENV), its
 * output appended to tmp/log (a restarted daemon keeps its earlier lines); tracked, so a failed
 * test still reaps it. */
static inline pid_t tu_spawn(const char *log, const char *fmt, ...)
{
    char line[4096], full[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "cd '%s' && exec " TU_NOENV "'%s' %s >>'%s/%s' 2>&1",
             tu_env("NB_SRC", "."), tu_env("NB_BIN", "npubench"), line, tu_group_tmp(), log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    tu_track(pid);
    return pid;
}

/* A child of parent whose command line contains needle (the first found), 0 when none: how a
 * test finds the helper process a worker started (an air host) without being its parent. */
static inline pid_t tu_child_running(pid_t parent, const char *needle)
{
    DIR *dir = opendir("/proc");
    pid_t found = 0;
    struct dirent *e;
    while (dir && !found && (e = readdir(dir))) {
        char path[300], buf[4096];
        pid_t p = (pid_t)atoi(e->d_name);
        if (p <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
        FILE *f = fopen(path, "r");
        int ppid = 0;
        if (f) {
            if (fgets(buf, sizeof buf, f)) {
                char *rp = strrchr(buf, ')');
                if (rp && sscanf(rp + 2, "%*c %d", &ppid) != 1)
                    ppid = 0;
            }
            fclose(f);
        }
        if (ppid != parent)
            continue;
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)p);
        f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        for (size_t i = 0; i < n; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[n] = '\0';
        if (strstr(buf, needle))
            found = p;
    }
    if (dir)
        closedir(dir);
    return found;
}

/* An ipc:// listener at path accepts connections and completes nng's SP handshake (as a
 * req0 peer). The socket file alone is not enough: it appears at bind(), before listen().
 * The handshake is completed, not cut short: a peer leaving mid-handshake is what the
 * server has to recover from (test_rpc), not what a readiness probe should do. */
static inline int tu_ipc_ready(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return 0;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    static const unsigned char hello[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0}; /* req0 */
    unsigned char got[8];
    size_t n = 0;
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             write(fd, hello, sizeof hello) == (ssize_t)sizeof hello;
    while (ok && n < sizeof got) {
        ssize_t r = read(fd, got + n, sizeof got - n);
        if (r <= 0)
            ok = 0;
        else
            n += (size_t)r;
    }
    close(fd);
    return ok && got[0] == 0 && got[1] == 'S' && got[2] == 'P' && got[3] == 0;
}

static inline int tu_exited(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == pid;
}

/* SIGTERM and a clean exit (which also writes a coverage build's counters), else SIGKILL. */
static inline void tu_stop(pid_t *pid)
{
    if (*pid <= 0)
        return;
    kill(*pid, SIGTERM);
    if (!tu_poll(20000, tu_exited(*pid)))
        tu_kill(*pid);
    for (int i = 0; i < TU_TRACK_MAX; i++)
        if (tu_tracked()[i] == *pid)
            tu_tracked()[i] = 0;
    *pid = 0;
}

static inline tu_result tu_run_cli(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && " TU_NOENV "'%s' %s", tu_env("NB_SRC", "."),
             tu_env("NB_BIN", "npubench"), args);
    return tu_run(cmd);
}

/* 1 when out has a line equal to line (n bytes), or starting with it when prefix. */
static inline int tu_has_line(const char *out, const char *line, size_t n, int prefix)
{
    for (const char *at = out; (at = strstr(at, line)); at++)
        if ((at == out || at[-1] == '\n') && (prefix || at[n] == '\n' || at[n] == '\0'))
            return 1;
    return 0;
}

/* Asserts that every line of want (lines separated by '\n') is a whole line of out; a want
 * line ending in '*' only has to start one (for ages, hosts and timings). */
static inline void tu_expect_lines(const char *out, const char *want)
{
    for (const char *w = want; *w;) {
        size_t n = strcspn(w, "\n");
        char line[1024];
        int prefix = n > 0 && w[n - 1] == '*';
        snprintf(line, sizeof line, "%.*s", (int)(n - (size_t)prefix), w);
        if (!tu_has_line(out, line, n - (size_t)prefix, prefix))
            fail_msg("no line \"%s\"%s in the output", line, prefix ? "..." : "");
        w += n + (w[n] == '\n');
    }
}

/* Runs `npubench ARGS` (printf-style); asserts the exit code and the lines of want
 * (expect_lines). The output (caller frees). */
static inline char *tu_cli(int code, const char *want, const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    tu_result r = tu_run_cli(args);
    print_message("$ npubench %s  [exit %d]\n%s", args, r.code, r.out ? r.out : "");
    assert_non_null(r.out);
    assert_int_equal(r.code, code);
    tu_expect_lines(r.out, want);
    assert_null(strstr(r.out, "AddressSanitizer"));
    assert_null(strstr(r.out, "runtime error"));
    return r.out;
}


#endif
