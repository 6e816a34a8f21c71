/* nb_air: the worker's side of the air host: process (spawn, lock, restart with backoff, stop
 * within the grace), frames (bounded, versioned; engine/air_host.py documents the format). */
#include "nb_air.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nb_env.h"
#include "nb_json.h"
#include "nb_time.h"

enum { T_HELLO = 1, T_SETUP, T_PREFILL, T_DECODE, T_TOKENIZE, T_SHUTDOWN, T_OK = 0x80,
       T_ERROR = 0xFF };
#define HEADER_BYTES 24
#define MAX_JSON ((size_t)1 << 20)
#define TAIL_BYTES 8192
#define LINE_BYTES 2048
#define MAX_LAYERS 1024

struct nb_air {
    nb_air_cfg cfg;
    pid_t pid;
    int fd;      /* the frame socket */
    int log_fd;  /* the host's stdout + stderr */
    int lock_fd;
    uint32_t seq;
    nb_air_info info;
    double dead_at;    /* when the last host was lost (ms, nb_now_ms) */
    int fails_in_row;  /* crashes since the last good answer: the backoff's exponent */
    char tail[TAIL_BYTES];
    size_t tail_len;
    char line[LINE_BYTES + 1];
    size_t line_len;
    nb_air_line_fn on_line;
    nb_air_cancel_fn cancelled;
    void *user;
    /* the last answer */
    char *json_buf;
    uint8_t *bin;
    size_t bin_len, bin_cap;
    json_object *ans;
    const float **layer_ptrs; /* [2][MAX_LAYERS]: ffn_out, attn */
};

/* ---- configuration --------------------------------------------------------------------- */

void nb_air_cfg_default(nb_air_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->max_seq = 2048;
    snprintf(c->python, sizeof c->python, "python3");
    snprintf(c->host, sizeof c->host, "%s/engine/air_host.py", NB_SOURCE_DIR);
    snprintf(c->lock, sizeof c->lock, "%s", NB_AIR_LOCK_DEFAULT);
    snprintf(c->tokenizer, sizeof c->tokenizer, "auto");
    c->npu_attn = 1;
    c->lock_wait_ms = 1800 * 1000; /* the Makefiles' `flock -w 1800` */
    c->setup_timeout_ms = 3600 * 1000;
    c->step_timeout_ms = 600 * 1000;
    c->grace_ms = 5000;
    c->max_frame = (size_t)256 << 20;
    c->backoff_ms = 500;
    c->backoff_max_ms = 30000;
}

void nb_air_cfg_clear(nb_air_cfg *c)
{
    if (c->env)
        for (char **e = c->env; *e; e++)
            free(*e);
    free(c->env);
    c->env = NULL;
}

nb_code nb_air_cfg_copy(nb_air_cfg *dst, const nb_air_cfg *src, nb_err *err)
{
    *dst = *src;
    dst->env = NULL;
    size_t n = 0;
    while (src->env && src->env[n])
        n++;
    if (!src->env)
        return NB_OK;
    if (!(dst->env = calloc(n + 1, sizeof *dst->env)))
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(dst->env[i] = strdup(src->env[i]))) {
            nb_air_cfg_clear(dst);
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        }
    return NB_OK;
}

static nb_code env_field(json_object *o, const char *what, nb_air_cfg *c, nb_err *err)
{
    json_object *env;
    if (!json_object_object_get_ex(o, "env", &env))
        return NB_OK;
    if (!json_object_is_type(env, json_type_object))
        return nb_err_set(err, NB_EINVAL, "%s.env: expected an object of strings", what);
    size_t n = (size_t)json_object_object_length(env), i = 0;
    if (n > 256)
        return nb_err_set(err, NB_EINVAL, "%s.env: %zu variables, at most 256", what, n);
    if (!(c->env = calloc(n + 1, sizeof *c->env)))
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    json_object_object_foreach(env, k, v)
    {
        if (!json_object_is_type(v, json_type_string) || !*k || strchr(k, '='))
            return nb_err_set(err, NB_EINVAL, "%s.env.%s: expected a string value and a name "
                              "without '='", what, k);
        if (!strncmp(k, "NPUBENCH_", 9))
            return nb_err_set(err, NB_EINVAL, "%s.env.%s: NPUBENCH_* variables stay in the "
                              "worker", what, k);
        size_t len = strlen(k) + strlen(json_object_get_string(v)) + 2;
        if (!(c->env[i] = malloc(len)))
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        snprintf(c->env[i++], len, "%s=%s", k, json_object_get_string(v));
    }
    return NB_OK;
}

nb_code nb_air_cfg_parse(json_object *o, const char *what, nb_air_cfg *c, nb_err *err)
{
    nb_air_cfg_default(c);
    if (!json_object_is_type(o, json_type_object))
        return nb_err_set(err, NB_EINVAL, "%s: expected an object", what);
    static const char *const known[] = {"llms_dir", "adapter", "model", "max_seq", "python",
                                        "host", "env", "cwd", "lock", "tokenizer", "npu_attn",
                                        "lock_wait_s", "setup_timeout_s", "step_timeout_s",
                                        "grace_s", "max_frame_mb", NULL};
    json_object_object_foreach(o, key, val)
    {
        (void)val;
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++)
            ok = !strcmp(key, known[i]);
        if (!ok)
            return nb_err_set(err, NB_EINVAL, "%s.%s: unknown key", what, key);
    }
    /* Fields through common/nb_json's readers (messages "what.key: must be ..."); a bad
     * field of a deployments file is a bad input, NB_EINVAL, as the checks below. */
    static const char *const tokenizers[] = {"auto", "hf", "none", NULL};
    struct { const char *key; char *dst; size_t cap; int required; } str[] = {
        {"llms_dir", c->llms_dir, sizeof c->llms_dir, 1}, {"adapter", c->adapter, sizeof c->adapter, 1},
        {"model", c->model, sizeof c->model, 0}, {"python", c->python, sizeof c->python, 0},
        {"host", c->host, sizeof c->host, 0}, {"cwd", c->cwd, sizeof c->cwd, 0},
        {"lock", c->lock, sizeof c->lock, 0}};
    struct { const char *key; int64_t *ms; double max_s; } t[] = {
        {"lock_wait_s", &c->lock_wait_ms, 86400}, {"setup_timeout_s", &c->setup_timeout_ms, 86400},
        {"step_timeout_s", &c->step_timeout_ms, 86400}, {"grace_s", &c->grace_ms, 600}};
    nb_code rc = NB_OK;
    for (size_t i = 0; i < sizeof str / sizeof *str && !rc; i++)
        rc = nb_json_need_strcpy(o, what, str[i].key, str[i].required, 0, str[i].dst, str[i].cap,
                                 err);
    int tk = -1, attn = c->npu_attn;
    int64_t max_seq = c->max_seq, frame_mb = (int64_t)(c->max_frame >> 20);
    if (!rc)
        rc = nb_json_need_enum(o, what, "tokenizer", 0, tokenizers, -1, &tk, err);
    if (!rc)
        rc = nb_json_need_int(o, what, "max_seq", 0, 1, 1 << 20, max_seq, &max_seq, err);
    if (!rc)
        rc = nb_json_need_bool(o, what, "npu_attn", 0, attn, &attn, err);
    for (size_t i = 0; i < sizeof t / sizeof *t && !rc; i++) {
        double d;
        rc = nb_json_need_num(o, what, t[i].key, 0, 0, t[i].max_s, (double)*t[i].ms / 1000.0,
                              &d, err);
        if (!rc)
            *t[i].ms = (int64_t)(d * 1000.0);
    }
    if (!rc)
        rc = nb_json_need_int(o, what, "max_frame_mb", 0, 1, 4096, frame_mb, &frame_mb, err);
    if (rc) {
        if (err && rc == NB_EFORMAT)
            err->code = NB_EINVAL;
        return rc == NB_EFORMAT ? NB_EINVAL : rc;
    }
    if (tk >= 0)
        snprintf(c->tokenizer, sizeof c->tokenizer, "%s", tokenizers[tk]);
    c->max_seq = (int)max_seq;
    c->npu_attn = attn;
    c->max_frame = (size_t)frame_mb << 20;
    for (const char *p = c->adapter; *p; p++)
        if (!(*p == '.' || *p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z')))
            return nb_err_set(err, NB_EINVAL, "%s.adapter '%s': expected a dotted module path",
                              what, c->adapter);
    if ((rc = env_field(o, what, c, err))) {
        nb_air_cfg_clear(c);
        return rc;
    }
    return NB_OK;
}

/* ---- the host's output ------------------------------------------------------------------ */

static void take_output(nb_air *h, const char *p, size_t n)
{
    size_t keep = n < TAIL_BYTES - 1 ? n : TAIL_BYTES - 1;
    const char *src = p + (n - keep);
    if (h->tail_len + keep >= TAIL_BYTES) {
        size_t drop = h->tail_len + keep - (TAIL_BYTES - 1);
        memmove(h->tail, h->tail + drop, h->tail_len - drop);
        h->tail_len -= drop;
    }
    memcpy(h->tail + h->tail_len, src, keep);
    h->tail_len += keep;
    h->tail[h->tail_len] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\n' && h->line_len < LINE_BYTES) {
            h->line[h->line_len++] = p[i];
            continue;
        }
        h->line[h->line_len] = '\0';
        if (h->on_line)
            h->on_line(h->user, h->line);
        h->line_len = 0;
        if (p[i] != '\n')
            h->line[h->line_len++] = p[i];
    }
}

/* Reads what the host printed so far; 0 once its output is closed. */
static int drain_output(nb_air *h)
{
    char buf[4096];
    for (;;) {
        ssize_t r = read(h->log_fd, buf, sizeof buf);
        if (r > 0) {
            take_output(h, buf, (size_t)r);
            continue;
        }
        return !(r == 0 || (errno != EAGAIN && errno != EINTR));
    }
}

void nb_air_tail(const nb_air *h, char *buf, size_t cap)
{
    if (!cap)
        return;
    const char *t = h->tail;
    size_t n = h->tail_len;
    while (n && (t[n - 1] == '\n' || t[n - 1] == ' '))
        n--;
    if (n > cap - 1) {
        t += n - (cap - 1);
        n = cap - 1;
    }
    memcpy(buf, t, n);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = '|';
}

/* ---- process ------------------------------------------------------------------------------ */

static int cancelled(nb_air *h)
{
    return h->cancelled && h->cancelled(h->user);
}

static nb_code take_lock(nb_air *h, nb_err *err)
{
    if (!h->cfg.lock[0] || h->lock_fd >= 0)
        return NB_OK;
    int fd = open(h->cfg.lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return nb_err_set(err, NB_EIO, "air device lock %s: %s", h->cfg.lock, strerror(errno));
    double t0 = nb_now_ms();
    while (flock(fd, LOCK_EX | LOCK_NB)) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            int e = errno;
            close(fd);
            return nb_err_set(err, NB_EIO, "air device lock %s: flock: %s", h->cfg.lock,
                              strerror(e));
        }
        if (cancelled(h)) {
            close(fd);
            return nb_err_set(err, NB_ECANCELED, "cancelled waiting for the device lock %s",
                              h->cfg.lock);
        }
        if (nb_now_ms() - t0 >= (double)h->cfg.lock_wait_ms) {
            close(fd);
            return nb_err_set(err, NB_EUNAVAIL,
                              "air device lock %s: still held by another process after %.0f s "
                              "(lock_wait_s); a hand-run `make verify` or another worker has "
                              "the NPU",
                              h->cfg.lock, (double)h->cfg.lock_wait_ms / 1000.0);
        }
        nb_sleep_ms(50);
    }
    h->lock_fd = fd;
    return NB_OK;
}

static void drop_lock(nb_air *h)
{
    if (h->lock_fd >= 0) {
        flock(h->lock_fd, LOCK_UN);
        close(h->lock_fd);
        h->lock_fd = -1;
    }
}

static int reap(nb_air *h, int wait_ms, int *status)
{
    double t0 = nb_now_ms();
    for (;;) {
        pid_t w = waitpid(h->pid, status, WNOHANG);
        if (w == h->pid || (w < 0 && errno == ECHILD))
            return 1;
        if (nb_now_ms() - t0 >= wait_ms)
            return 0;
        drain_output(h);
        nb_sleep_ms(10);
    }
}

/* Ends the host: SHUTDOWN asked first when polite, then SIGTERM to its group after the
 * grace, SIGKILL a second later.  Leaves the lock to the caller. */
static void stop_host(nb_air *h, int polite, char *how, size_t cap)
{
    if (how && cap)
        how[0] = '\0';
    if (!h->pid)
        return;
    int st = 0, done = 0;
    if (polite && h->fd >= 0) {
        uint8_t hd[HEADER_BYTES] = {'N', 'B', 'A', 'H', NB_AIR_PROTOCOL, 0, T_SHUTDOWN, 0};
        if (send(h->fd, hd, sizeof hd, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof hd)
            done = reap(h, (int)h->cfg.grace_ms, &st);
    } else
        done = reap(h, 0, &st);
    if (!done) {
        kill(-h->pid, SIGTERM);
        if (!(done = reap(h, polite ? 1000 : (int)h->cfg.grace_ms, &st))) {
            kill(-h->pid, SIGKILL);
            done = reap(h, 5000, &st);
        }
    }
    kill(-h->pid, SIGKILL); /* stragglers of its group */
    drain_output(h);
    if (how && cap && done) {
        if (WIFSIGNALED(st))
            snprintf(how, cap, "killed by signal %d", WTERMSIG(st));
        else if (WIFEXITED(st))
            snprintf(how, cap, "exited with status %d", WEXITSTATUS(st));
    }
    if (h->fd >= 0)
        close(h->fd);
    if (h->log_fd >= 0)
        close(h->log_fd);
    h->fd = h->log_fd = -1;
    h->pid = 0;
    h->info.pid = 0;
}

static nb_code spawn(nb_air *h, nb_err *err)
{
    int sv[2] = {-1, -1}, lp[2] = {-1, -1};
    char **envp = NULL;
    static const char *const extra_env[] = {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"};
    size_t n_over = 0;
    while (h->cfg.env && h->cfg.env[n_over])
        n_over++;
    char **over = calloc(n_over + 3, sizeof *over);
    if (over) {
        over[0] = (char *)extra_env[0];
        over[1] = (char *)extra_env[1];
        for (size_t i = 0; i < n_over; i++)
            over[2 + i] = h->cfg.env[i];
        envp = nb_env_merged(over, "NPUBENCH_");
    }
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!over || !envp || devnull < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
        pipe2(lp, O_CLOEXEC)) {
        nb_code rc = nb_err_set(err, NB_EIO, "air host: cannot set up the child: %s",
                                strerror(errno));
        free(over);
        free(envp);
        for (int i = 0; i < 2; i++) {
            if (sv[i] >= 0)
                close(sv[i]);
            if (lp[i] >= 0)
                close(lp[i]);
        }
        if (devnull >= 0)
            close(devnull);
        return rc;
    }
    const char *cwd = h->cfg.cwd[0] ? h->cfg.cwd : h->cfg.llms_dir;
    char *argv[] = {h->cfg.python, "-u", h->cfg.host, "3", "3", NULL};
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* async-signal-safe only: the worker has other threads */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a worker killed by SIGKILL takes its host along */
        if (getppid() != parent)
            _exit(127);
        dup2(devnull, 0);
        dup2(lp[1], 1);
        dup2(lp[1], 2);
        dup2(sv[1], 3);
        if (chdir(cwd)) {
            static const char m[] = "air host: cannot enter the working directory\n";
            ssize_t w = write(2, m, sizeof m - 1);
            (void)w;
            _exit(127);
        }
        execvpe(argv[0], argv, envp);
        static const char m[] = "air host: cannot execute the python interpreter\n";
        ssize_t w = write(2, m, sizeof m - 1);
        (void)w;
        _exit(127);
    }
    int fork_errno = errno;
    close(sv[1]);
    close(lp[1]);
    close(devnull);
    free(over);
    free(envp);
    if (pid < 0) {
        close(sv[0]);
        close(lp[0]);
        return nb_err_set(err, NB_EIO, "air host: fork: %s", strerror(fork_errno));
    }
    setpgid(pid, pid);
    fcntl(lp[0], F_SETFL, fcntl(lp[0], F_GETFL) | O_NONBLOCK);
    h->pid = pid;
    h->fd = sv[0];
    h->log_fd = lp[0];
    h->tail_len = 0;
    h->tail[0] = '\0';
    h->line_len = 0;
    h->info.pid = pid;
    return NB_OK;
}

/* ---- frames -------------------------------------------------------------------------------- */

static void put_u16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

/* Writes or reads len bytes on the frame socket by deadline, draining the host's output
 * meanwhile (a host blocked on a full stderr pipe would never answer). */
static nb_code io_all(nb_air *h, int writing, void *buf, size_t len, double deadline, nb_err *err)
{
    uint8_t *p = buf;
    while (len) {
        struct pollfd pf[2] = {{h->fd, writing ? POLLOUT : POLLIN, 0}, {h->log_fd, POLLIN, 0}};
        double left = deadline - nb_now_ms();
        if (left <= 0)
            return nb_err_set(err, NB_ETIMEOUT, "timed out");
        int pr = poll(pf, h->log_fd >= 0 ? 2 : 1, left > 100 ? 100 : (int)left + 1);
        if (pr < 0 && errno != EINTR)
            return nb_err_set(err, NB_EIO, "poll: %s", strerror(errno));
        if (pr <= 0)
            continue;
        if (pf[1].revents && !drain_output(h)) { /* its output closed: stop polling it */
            close(h->log_fd);
            h->log_fd = -1;
        }
        if (!pf[0].revents)
            continue;
        ssize_t r = writing ? send(h->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(h->fd, p, len, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            len -= (size_t)r;
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR))
            return nb_err_set(err, NB_EIO, "the host closed its end");
    }
    return NB_OK;
}

/* The host is gone or broken: kill it, count it, and say so with its stderr tail. */
static nb_code host_lost(nb_air *h, const char *during, nb_code why, const char *what, nb_err *err)
{
    char how[64], tail[240];
    pid_t pid = h->pid;
    stop_host(h, 0, how, sizeof how);
    drop_lock(h);
    h->info.crashes++;
    h->fails_in_row++;
    h->dead_at = nb_now_ms();
    nb_air_tail(h, tail, sizeof tail);
    return nb_err_set(err, why == NB_ETIMEOUT ? NB_ETIMEOUT : NB_EIO,
                      "air host pid %d lost during %s (%s%s%s); its output ends: %s", (int)pid,
                      during, what, how[0] ? ", " : "", how, tail[0] ? tail : "(nothing)");
}

static void free_answer(nb_air *h)
{
    if (h->ans)
        json_object_put(h->ans);
    h->ans = NULL;
}

/* One request and its answer (h->ans, h->bin).  An ERROR answer becomes the error. */
static nb_code call(nb_air *h, int type, json_object *req, const void *bin, size_t bin_len,
                    int64_t timeout_ms, const char *during, nb_err *err)
{
    free_answer(h);
    const char *js = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
    size_t jl = strlen(js);
    uint8_t hd[HEADER_BYTES];
    memcpy(hd, "NBAH", 4);
    put_u16(hd + 4, NB_AIR_PROTOCOL);
    put_u16(hd + 6, (unsigned)type);
    put_u32(hd + 8, ++h->seq);
    put_u32(hd + 12, (uint32_t)jl);
    put_u32(hd + 16, (uint32_t)bin_len);
    put_u32(hd + 20, (uint32_t)((uint64_t)bin_len >> 32));
    double deadline = nb_now_ms() + (double)timeout_ms;
    nb_err e;
    nb_code rc;
    if ((rc = io_all(h, 1, hd, sizeof hd, deadline, &e)) ||
        (rc = io_all(h, 1, (void *)js, jl, deadline, &e)) ||
        (bin_len && (rc = io_all(h, 1, (void *)bin, bin_len, deadline, &e))) ||
        (rc = io_all(h, 0, hd, sizeof hd, deadline, &e)))
        return host_lost(h, during, rc, e.msg, err);
    size_t ajl = get_u32(hd + 12);
    uint64_t abl = get_u64(hd + 16);
    if (memcmp(hd, "NBAH", 4) || (hd[4] | hd[5] << 8) != NB_AIR_PROTOCOL)
        return host_lost(h, during, NB_EIO, "an answer without the protocol's magic and version",
                         err);
    if (ajl > MAX_JSON || abl > h->cfg.max_frame) {
        char m[160];
        snprintf(m, sizeof m, "an answer of %zu + %llu bytes, over the bounds %zu + %zu",
                 ajl, (unsigned long long)abl, MAX_JSON, h->cfg.max_frame);
        return host_lost(h, during, NB_EIO, m, err);
    }
    unsigned atype = (unsigned)(hd[6] | hd[7] << 8);
    if (get_u32(hd + 8) != h->seq && atype != T_ERROR)
        return host_lost(h, during, NB_EIO, "an answer to another request", err);
    char *jbuf = realloc(h->json_buf, ajl + 1);
    if (!jbuf)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    h->json_buf = jbuf;
    if (abl > h->bin_cap) {
        uint8_t *nb = realloc(h->bin, (size_t)abl);
        if (!nb)
            return nb_err_set(err, NB_ENOMEM, "out of memory for a %llu-byte answer",
                              (unsigned long long)abl);
        h->bin = nb;
        h->bin_cap = (size_t)abl;
    }
    if ((rc = io_all(h, 0, jbuf, ajl, deadline, &e)) ||
        (abl && (rc = io_all(h, 0, h->bin, (size_t)abl, deadline, &e))))
        return host_lost(h, during, rc, e.msg, err);
    jbuf[ajl] = '\0';
    h->bin_len = (size_t)abl;
    h->ans = json_tokener_parse(jbuf);
    if (!h->ans || !json_object_is_type(h->ans, json_type_object))
        return host_lost(h, during, NB_EIO, "an answer whose JSON does not parse", err);
    if (atype == T_ERROR) {
        const char *kind = nb_json_str(h->ans, "kind", "?", NULL);
        const char *msg = nb_json_str(h->ans, "message", "", NULL);
        if (!strcmp(kind, "frame") || !strcmp(kind, "version")) {
            char m[300];
            snprintf(m, sizeof m, "it refused the frame: %.250s", msg);
            return host_lost(h, during, NB_EIO, m, err);
        }
        return nb_err_set(err, !strcmp(kind, "request") ? NB_EINVAL : NB_EIO,
                          "air host: %s: %s%.400s", during,
                          !strcmp(kind, "adapter") ? "the adapter raised " : "", msg);
    }
    if (atype != (unsigned)(type | T_OK))
        return host_lost(h, during, NB_EIO, "an answer of another type", err);
    return NB_OK;
}

/* An array the answer points into: n elements of dtype (4-byte f32 or 8-byte i64). */
static nb_code blob(nb_air *h, json_object *desc, const char *name, const char *dtype,
                    const void **out, int *n, nb_err *err)
{
    if (!desc || !json_object_is_type(desc, json_type_object))
        return nb_err_set(err, NB_EFORMAT, "air host answer: %s: expected an array descriptor",
                          name);
    int64_t off = nb_json_int(desc, "off", -1), cnt = nb_json_int(desc, "n", -1);
    size_t es = !strcmp(dtype, "f32") ? 4 : 8;
    if (strcmp(nb_json_str(desc, "dtype", "", NULL), dtype) || off < 0 || cnt < 0 ||
        (uint64_t)off % es || (uint64_t)off + (uint64_t)cnt * es > h->bin_len || cnt > INT32_MAX)
        return nb_err_set(err, NB_EFORMAT,
                          "air host answer: %s: dtype %s, off %lld, n %lld outside the %zu bytes "
                          "sent (expected %s)",
                          name, nb_json_str(desc, "dtype", "?", NULL), (long long)off, (long long)cnt,
                          h->bin_len, dtype);
    *out = h->bin + off;
    *n = (int)cnt;
    return NB_OK;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

static nb_code start(nb_air *h, nb_err *err)
{
    nb_code rc = take_lock(h, err);
    if (rc)
        return rc;
    if ((rc = spawn(h, err))) {
        drop_lock(h);
        return rc;
    }
    json_object *req = json_object_new_object();
    json_object_object_add(req, "version", json_object_new_int(NB_AIR_PROTOCOL));
    rc = call(h, T_HELLO, req, NULL, 0, 60000, "HELLO", err);
    json_object_put(req);
    if (rc) {
        stop_host(h, 0, NULL, 0);
        drop_lock(h);
        return rc;
    }
    req = json_object_new_object();
    json_object_object_add(req, "llms_dir", json_object_new_string(h->cfg.llms_dir));
    json_object_object_add(req, "adapter", json_object_new_string(h->cfg.adapter));
    if (h->cfg.model[0])
        json_object_object_add(req, "model", json_object_new_string(h->cfg.model));
    json_object_object_add(req, "max_seq", json_object_new_int(h->cfg.max_seq));
    json_object_object_add(req, "npu_attn", json_object_new_boolean(h->cfg.npu_attn));
    json_object_object_add(req, "lite_mode", json_object_new_boolean(1));
    json_object_object_add(req, "tokenizer", json_object_new_string(h->cfg.tokenizer));
    h->info.setups++;
    rc = call(h, T_SETUP, req, NULL, 0, h->cfg.setup_timeout_ms, "SETUP", err);
    json_object_put(req);
    if (rc) {
        if (h->pid) { /* the adapter raised: the host lives, but has no runner */
            char tail[240];
            nb_air_tail(h, tail, sizeof tail);
            stop_host(h, 1, NULL, 0);
            drop_lock(h);
            h->fails_in_row++;
            h->dead_at = nb_now_ms();
            nb_err_prefix(err, "%s (%s): ", h->cfg.adapter, h->cfg.llms_dir);
        }
        return rc;
    }
    h->info.setup_ms = nb_json_num(h->ans, "setup_ms", 0);
    h->info.n_layers = (int)nb_json_int(h->ans, "n_layers", 0);
    h->info.tokenizer = nb_json_bool(h->ans, "tokenizer", 0);
    h->info.layers = nb_json_bool(h->ans, "layers", 0);
    snprintf(h->info.runner, sizeof h->info.runner, "%s", nb_json_str(h->ans, "runner", "", NULL));
    snprintf(h->info.model_name, sizeof h->info.model_name, "%s",
             nb_json_str(h->ans, "model_name", "", NULL));
    snprintf(h->info.hf_reference, sizeof h->info.hf_reference, "%s",
             nb_json_str(h->ans, "hf_reference", "", NULL));
    return NB_OK;
}

/* A live host, restarting a lost one once its backoff has passed. */
static nb_code ensure_up(nb_air *h, nb_err *err)
{
    if (h->pid)
        return NB_OK;
    if (h->fails_in_row) {
        double wait = (double)h->cfg.backoff_ms;
        for (int i = 1; i < h->fails_in_row && wait < (double)h->cfg.backoff_max_ms; i++)
            wait *= 2;
        if (wait > (double)h->cfg.backoff_max_ms)
            wait = (double)h->cfg.backoff_max_ms;
        while (nb_now_ms() < h->dead_at + wait) {
            if (cancelled(h))
                return nb_err_set(err, NB_ECANCELED, "cancelled while the air host restarts");
            nb_sleep_ms(20);
        }
    }
    return start(h, err);
}

nb_code nb_air_open(const nb_air_cfg *cfg, nb_air **out, nb_err *err)
{
    *out = NULL;
    if (!cfg->llms_dir[0] || !cfg->adapter[0])
        return nb_err_set(err, NB_EINVAL, "air: llms_dir and adapter are required");
    nb_air *h = calloc(1, sizeof *h);
    if (!h)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    h->fd = h->log_fd = h->lock_fd = -1;
    nb_code rc = nb_air_cfg_copy(&h->cfg, cfg, err);
    if (!rc && !(h->layer_ptrs = calloc(2 * MAX_LAYERS, sizeof *h->layer_ptrs)))
        rc = nb_err_set(err, NB_ENOMEM, "out of memory");
    if (!rc)
        rc = start(h, err);
    if (rc) {
        nb_air_close(h);
        return rc;
    }
    *out = h;
    return NB_OK;
}

void nb_air_drain(nb_air *h)
{
    if (!h)
        return;
    stop_host(h, 1, NULL, 0);
    drop_lock(h);
}

void nb_air_close(nb_air *h)
{
    if (!h)
        return;
    nb_air_drain(h);
    free_answer(h);
    free(h->json_buf);
    free(h->bin);
    free(h->layer_ptrs);
    nb_air_cfg_clear(&h->cfg);
    free(h);
}

void nb_air_set_hooks(nb_air *h, nb_air_line_fn line, nb_air_cancel_fn cancel, void *user)
{
    h->on_line = line;
    h->cancelled = cancel;
    h->user = user;
}

void nb_air_info_get(const nb_air *h, nb_air_info *out)
{
    *out = h->info;
}

/* ---- requests ------------------------------------------------------------------------------ */

static json_object *desc_json(size_t off, size_t n, const char *dtype)
{
    json_object *d = json_object_new_object();
    json_object_object_add(d, "off", json_object_new_int64((int64_t)off));
    json_object_object_add(d, "n", json_object_new_int64((int64_t)n));
    json_object_object_add(d, "dtype", json_object_new_string(dtype));
    return d;
}

static nb_code logits_of(nb_air *h, const float **logits, int *vocab, int32_t *top1,
                         double *host_ms, nb_err *err)
{
    json_object *d = NULL;
    json_object_object_get_ex(h->ans, "logits", &d);
    const void *p;
    nb_code rc = blob(h, d, "logits", "f32", &p, vocab, err);
    if (rc)
        return rc;
    if (*vocab < 1)
        return nb_err_set(err, NB_EFORMAT, "air host answer: logits: empty");
    *logits = p;
    int64_t t = nb_json_int(h->ans, "top1_token", -1);
    if (t < 0 || t >= *vocab)
        return nb_err_set(err, NB_EFORMAT, "air host answer: top1_token %lld outside the "
                          "vocabulary of %d", (long long)t, *vocab);
    *top1 = (int32_t)t;
    *host_ms = nb_json_num(h->ans, "host_ms", 0);
    h->fails_in_row = 0;
    return NB_OK;
}

/* The per-layer states of a prefill answer: each [n][dim], n and dim the same throughout. */
static nb_code layers_of(nb_air *h, int n, nb_air_prefill_out *out, nb_err *err)
{
    json_object *arr = NULL, *fh = NULL;
    json_object_object_get_ex(h->ans, "layers", &arr);
    json_object_object_get_ex(h->ans, "final_hidden_normed", &fh);
    size_t nl = arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    if (nl > MAX_LAYERS)
        return nb_err_set(err, NB_EFORMAT, "air host answer: %zu layers, at most %d", nl, MAX_LAYERS);
    const float **ffn = h->layer_ptrs, **attn = h->layer_ptrs + MAX_LAYERS;
    int dim = 0, got = 0;
    for (size_t l = 0; l < nl; l++) {
        json_object *lo = json_object_array_get_idx(arr, l), *d;
        ffn[l] = attn[l] = NULL;
        const char *names[2] = {"ffn_out", "attn_residual"};
        const float **dst[2] = {&ffn[l], &attn[l]};
        for (int k = 0; k < 2; k++) {
            if (!json_object_object_get_ex(lo, names[k], &d))
                continue;
            const void *p;
            int cnt;
            char what[64];
            snprintf(what, sizeof what, "layers[%zu].%s", l, names[k]);
            nb_code rc = blob(h, d, what, "f32", &p, &cnt, err);
            if (rc)
                return rc;
            if (!dim && cnt % n == 0)
                dim = cnt / n;
            if (!dim || cnt != n * dim)
                return nb_err_set(err, NB_EFORMAT, "air host answer: %s: %d floats, expected "
                                  "%d positions x %d", what, cnt, n, dim);
            *dst[k] = p;
            got = 1;
        }
    }
    out->final_normed = NULL;
    if (fh && json_object_is_type(fh, json_type_object)) {
        const void *p;
        int cnt;
        nb_code rc = blob(h, fh, "final_hidden_normed", "f32", &p, &cnt, err);
        if (rc)
            return rc;
        if (!dim && cnt % n == 0)
            dim = cnt / n;
        if (dim && cnt == n * dim)
            out->final_normed = p;
    }
    out->n_layers = got ? (int)nl : 0;
    out->n_pos = n;
    out->dim = dim;
    out->ffn_out = got ? ffn : NULL;
    out->attn = got ? attn : NULL;
    return NB_OK;
}

nb_code nb_air_prefill(nb_air *h, const int32_t *ids, int n, int want_layers,
                       nb_air_prefill_out *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (n < 1 || n > h->cfg.max_seq)
        return nb_err_set(err, NB_EINVAL, "air prefill: %d tokens, expected 1..max_seq %d", n,
                          h->cfg.max_seq);
    nb_code rc = ensure_up(h, err);
    if (rc)
        return rc;
    int64_t *wide = malloc(sizeof *wide * (size_t)n);
    if (!wide)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        wide[i] = ids[i];
    json_object *req = json_object_new_object();
    json_object_object_add(req, "ids", desc_json(0, (size_t)n, "i64"));
    json_object_object_add(req, "layers", json_object_new_boolean(want_layers));
    double t0 = nb_now_ms();
    rc = call(h, T_PREFILL, req, wide, sizeof *wide * (size_t)n, h->cfg.step_timeout_ms,
              "PREFILL", err);
    out->call_ms = nb_now_ms() - t0;
    json_object_put(req);
    free(wide);
    if (!rc)
        rc = logits_of(h, &out->logits, &out->vocab, &out->top1, &out->host_ms, err);
    if (!rc && want_layers)
        rc = layers_of(h, n, out, err);
    return rc;
}

nb_code nb_air_decode_step(nb_air *h, int32_t token, int pos, nb_air_step_out *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (pos < 0 || pos >= h->cfg.max_seq || token < 0)
        return nb_err_set(err, NB_EINVAL, "air decode_step: token %d at pos %d, expected "
                          "pos 0..%d", token, pos, h->cfg.max_seq - 1);
    nb_code rc = ensure_up(h, err);
    if (rc)
        return rc;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "token", json_object_new_int(token));
    json_object_object_add(req, "pos", json_object_new_int(pos));
    double t0 = nb_now_ms();
    rc = call(h, T_DECODE, req, NULL, 0, h->cfg.step_timeout_ms, "DECODE", err);
    out->call_ms = nb_now_ms() - t0;
    json_object_put(req);
    return rc ? rc : logits_of(h, &out->logits, &out->vocab, &out->top1, &out->host_ms, err);
}

nb_code nb_air_tokenize(nb_air *h, const char *text, int32_t **ids, int *n, nb_err *err)
{
    *ids = NULL;
    *n = 0;
    nb_code rc = ensure_up(h, err);
    if (rc)
        return rc;
    if (!h->info.tokenizer)
        return nb_err_set(err, NB_EUNSUPPORTED, "air deployment %s has no tokenizer (tokenizer "
                          "'%s'; transformers not importable?)", h->cfg.adapter, h->cfg.tokenizer);
    json_object *req = json_object_new_object();
    json_object_object_add(req, "text", json_object_new_string(text));
    rc = call(h, T_TOKENIZE, req, NULL, 0, h->cfg.step_timeout_ms, "TOKENIZE", err);
    json_object_put(req);
    json_object *d = NULL;
    const void *p;
    int cnt;
    if (!rc)
        json_object_object_get_ex(h->ans, "ids", &d);
    if (!rc && !(rc = blob(h, d, "ids", "i64", &p, &cnt, err))) {
        if (!(*ids = malloc(sizeof **ids * (size_t)(cnt ? cnt : 1))))
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        for (int i = 0; i < cnt; i++) {
            int64_t v;
            memcpy(&v, (const uint8_t *)p + 8 * (size_t)i, 8);
            (*ids)[i] = (int32_t)v;
        }
        *n = cnt;
    }
    return rc;
}

nb_code nb_air_raw(nb_air *h, const void *bytes, size_t len, char *answer, size_t cap,
                   nb_err *err)
{
    nb_code rc = ensure_up(h, err);
    if (rc)
        return rc;
    double deadline = nb_now_ms() + 10000;
    uint8_t hd[HEADER_BYTES];
    nb_err e;
    if ((rc = io_all(h, 1, (void *)bytes, len, deadline, &e)) ||
        (rc = io_all(h, 0, hd, sizeof hd, deadline, &e)))
        return host_lost(h, "RAW", rc, e.msg, err);
    size_t jl = get_u32(hd + 12);
    if (jl > MAX_JSON || get_u64(hd + 16))
        return host_lost(h, "RAW", NB_EIO, "an oversized error answer", err);
    char *j = malloc(jl + 1);
    if (!j)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    if ((rc = io_all(h, 0, j, jl, deadline, &e))) {
        free(j);
        return host_lost(h, "RAW", rc, e.msg, err);
    }
    j[jl] = '\0';
    unsigned type = (unsigned)(hd[6] | hd[7] << 8);
    snprintf(answer, cap, "%u %s", type, j);
    free(j);
    if (type == T_ERROR && (strstr(answer, "\"kind\":\"frame\"") ||
                            strstr(answer, "\"kind\":\"version\""))) {
        nb_err e2;
        host_lost(h, "RAW", NB_EIO, "it refused the frame", &e2); /* it exits: reap it */
    }
    return NB_OK;
}
