/* nb_exec_proc: fork/exec with its own process group, timeout (SIGTERM, then SIGKILL),
 * cancellation and bounded capture of stdout+stderr. */
#include "nb_exec_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nb_env.h"
#include "nb_secret.h"
#include "nb_time.h"

#define LINE_MAX_BYTES 4096
#define KILL_GRACE_MS 2000
#define DEFAULT_MAX_OUTPUT ((size_t)1 << 20)

/* The child's environment (nb_env_merged) without the key variables: a job that prints its
 * environment must not put the worker's key in its log. */
static char **job_env(char *const *over)
{
    char **e = nb_env_merged(over, NULL);
    size_t k = 0;
    for (size_t i = 0; e && e[i]; i++)
        if (!nb_secret_env_entry(e[i]))
            e[k++] = e[i];
    if (e)
        e[k] = NULL;
    return e;
}

typedef struct capture {
    char *buf;
    size_t len, cap, dropped;
    char line[LINE_MAX_BYTES + 1];
    size_t line_len;
    const nb_exec_proc_opts *o;
} capture;

static void emit_line(capture *c)
{
    c->line[c->line_len] = '\0';
    if (c->o->line)
        c->o->line(c->o->user, c->line);
    c->line_len = 0;
}

static void take(capture *c, const char *p, size_t n)
{
    size_t room = c->cap - c->len;
    size_t keep = n < room ? n : room;
    memcpy(c->buf + c->len, p, keep);
    c->len += keep;
    c->dropped += n - keep;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            emit_line(c);
            continue;
        }
        if (c->line_len == LINE_MAX_BYTES) /* over-long lines arrive in pieces */
            emit_line(c);
        c->line[c->line_len++] = p[i];
    }
}

static void kill_group(pid_t pid, int sig)
{
    if (kill(-pid, sig) && errno == ESRCH)
        kill(pid, sig);
}

nb_code nb_exec_proc_run(const nb_exec_proc_opts *o, nb_exec_proc_result *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    out->exit_code = -1;
    if (!o->argv || !o->argv[0])
        return nb_err_set(err, NB_EINVAL, "exec: empty argv");
    if (o->cwd && *o->cwd && access(o->cwd, X_OK))
        return nb_err_set(err, NB_ENOTFOUND, "exec %s: working directory %s: %s", o->argv[0],
                          o->cwd, strerror(errno));
    capture c = {.o = o};
    c.cap = o->max_output ? o->max_output : DEFAULT_MAX_OUTPUT;
    c.buf = malloc(c.cap + 1);
    char **envp = job_env(o->env);
    int outp[2] = {-1, -1}, errp[2] = {-1, -1};
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!c.buf || !envp || devnull < 0 || pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        nb_code rc = nb_err_set(err, !c.buf || !envp ? NB_ENOMEM : NB_EIO,
                                "exec %s: cannot set up the child: %s", o->argv[0],
                                strerror(errno));
        free(c.buf);
        free(envp);
        if (devnull >= 0)
            close(devnull);
        for (int i = 0; i < 2; i++) {
            if (outp[i] >= 0)
                close(outp[i]);
            if (errp[i] >= 0)
                close(errp[i]);
        }
        return rc;
    }
    double t0 = nb_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        /* Child: async-signal-safe calls only (the worker has other threads). */
        setpgid(0, 0);
        dup2(devnull, 0);
        dup2(outp[1], 1);
        dup2(outp[1], 2);
        if (o->cwd && *o->cwd && chdir(o->cwd)) {
            int e = errno;
            ssize_t w = write(errp[1], &e, sizeof e);
            (void)w;
            _exit(127);
        }
        execvpe(o->argv[0], o->argv, envp);
        int e = errno;
        ssize_t w = write(errp[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    int fork_errno = errno;
    close(outp[1]);
    close(errp[1]);
    close(devnull);
    free(envp);
    if (pid < 0) {
        close(outp[0]);
        close(errp[0]);
        free(c.buf);
        return nb_err_set(err, NB_EIO, "exec %s: fork: %s", o->argv[0], strerror(fork_errno));
    }
    setpgid(pid, pid); /* also from here, so kill(-pid) works before the child runs */
    int child_errno = 0;
    ssize_t got = read(errp[0], &child_errno, sizeof child_errno);
    close(errp[0]);
    if (got == (ssize_t)sizeof child_errno) {
        waitpid(pid, NULL, 0);
        close(outp[0]);
        free(c.buf);
        return nb_err_set(err, child_errno == ENOENT ? NB_ENOTFOUND : NB_EIO,
                          "exec %s: %s", o->argv[0], strerror(child_errno));
    }
    double kill_at = 0; /* when SIGKILL follows the SIGTERM */
    char chunk[8192];
    int open_out = 1;
    for (;;) {
        double now = nb_now_ms();
        if (!out->timed_out && !out->cancelled) {
            if (o->timeout_ms > 0 && now - t0 >= (double)o->timeout_ms)
                out->timed_out = 1;
            else if (o->cancelled && o->cancelled(o->user))
                out->cancelled = 1;
            if (out->timed_out || out->cancelled) {
                kill_group(pid, SIGTERM);
                kill_at = now + KILL_GRACE_MS;
            }
        } else if (kill_at > 0 && now >= kill_at) {
            kill_group(pid, SIGKILL);
            kill_at = -1;
        }
        if (open_out) {
            struct pollfd p = {outp[0], POLLIN, 0};
            int pr = poll(&p, 1, 100);
            if (pr > 0) {
                ssize_t r = read(outp[0], chunk, sizeof chunk);
                if (r > 0)
                    take(&c, chunk, (size_t)r);
                else if (r == 0 || (errno != EINTR && errno != EAGAIN))
                    open_out = 0;
            }
            continue;
        }
        /* Output closed: the child (and everything that inherited the pipe) is done,
         * or has closed it; wait for the child itself, still honouring the timeout. */
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (WIFEXITED(st))
                out->exit_code = WEXITSTATUS(st);
            else if (WIFSIGNALED(st))
                out->term_signal = WTERMSIG(st);
            break;
        }
        if (w < 0 && errno != EINTR)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    close(outp[0]);
    if (kill_at > 0 || out->timed_out || out->cancelled)
        kill_group(pid, SIGKILL); /* stragglers of the group */
    if (c.line_len)
        emit_line(&c);
    c.buf[c.len] = '\0';
    out->output = c.buf;
    out->len = c.len;
    out->dropped = c.dropped;
    out->wall_ms = nb_now_ms() - t0;
    return NB_OK;
}

void nb_exec_proc_result_free(nb_exec_proc_result *r)
{
    free(r->output);
    memset(r, 0, sizeof *r);
}
