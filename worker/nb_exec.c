/* nb_exec: command-line deployments: argv splitting, fork/exec with timeout and bounded
 * capture, and parsers for the reference tooling's (and our own CLI's) printed results. */
#include "nb_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_file.h"
#include "nb_job.h"
#include "nb_json.h"
#include "nb_time.h"

extern char **environ;

#define MAX_WORDS 4096
#define LINE_MAX_BYTES 4096
#define KILL_GRACE_MS 2000
#define REPORT_MAX_BYTES ((size_t)64 << 20)
#define DEFAULT_MAX_OUTPUT ((size_t)1 << 20)
#define DEFAULT_TIMEOUT_S 3600
#define TAIL_BYTES 300

/* ---- argv splitting ----------------------------------------------------------------- */

nb_code nb_exec_split(const char *line, char ***argv_out, int *argc_out, nb_err *err)
{
    *argv_out = NULL;
    if (argc_out)
        *argc_out = 0;
    size_t n = strlen(line);
    /* One block: pointer table first, then the words (never longer than the line). */
    size_t table = sizeof(char *) * (MAX_WORDS + 1);
    char **argv = malloc(table + n + 1 + n / 2 + 1);
    if (!argv)
        return nb_err_set(err, NB_ENOMEM, "out of memory splitting a command line");
    char *out = (char *)argv + table;
    int argc = 0, in_word = 0;
    enum { PLAIN, SQ, DQ } st = PLAIN;
    size_t quote_col = 0;
    for (size_t i = 0; i < n; i++) {
        char c = line[i];
        if (st == PLAIN) {
            if (c == ' ' || c == '\t' || c == '\n') {
                if (in_word) {
                    *out++ = '\0';
                    in_word = 0;
                }
                continue;
            }
            if (!in_word) {
                if (argc == MAX_WORDS) {
                    free(argv);
                    return nb_err_set(err, NB_EINVAL, "command line: more than %d words",
                                      MAX_WORDS);
                }
                argv[argc++] = out;
                in_word = 1;
            }
            if (c == '\'') {
                st = SQ;
                quote_col = i;
            } else if (c == '"') {
                st = DQ;
                quote_col = i;
            } else if (c == '\\') {
                if (i + 1 == n) {
                    free(argv);
                    return nb_err_set(err, NB_EINVAL,
                                      "command line: trailing backslash at column %zu", i + 1);
                }
                if (line[i + 1] == '\n') /* line continuation */
                    i++;
                else
                    *out++ = line[++i];
            } else
                *out++ = c;
        } else if (st == SQ) {
            if (c == '\'')
                st = PLAIN;
            else
                *out++ = c;
        } else {
            if (c == '"')
                st = PLAIN;
            else if (c == '\\' && i + 1 < n &&
                     strchr("\"\\$`\n", line[i + 1])) {
                if (line[++i] != '\n')
                    *out++ = line[i];
            } else
                *out++ = c;
        }
    }
    if (st != PLAIN) {
        free(argv);
        return nb_err_set(err, NB_EINVAL, "command line: unterminated %s quote opened at column %zu",
                          st == SQ ? "single" : "double", quote_col + 1);
    }
    if (in_word)
        *out++ = '\0';
    if (!argc) {
        free(argv);
        return nb_err_set(err, NB_EINVAL, "command line: empty");
    }
    argv[argc] = NULL;
    *argv_out = argv;
    if (argc_out)
        *argc_out = argc;
    return NB_OK;
}

nb_code nb_exec_shell_quote(const char *s, char *buf, size_t cap, nb_err *err)
{
    size_t o = 0;
#define PUT(ch)                                                                                  \
    do {                                                                                         \
        if (o + 1 >= cap)                                                                        \
            return nb_err_set(err, NB_ENOMEM, "shell-quoted argument longer than %zu bytes",     \
                              cap);                                                              \
        buf[o++] = (ch);                                                                         \
    } while (0)
    PUT('\'');
    for (; *s; s++) {
        if (*s == '\'') {
            PUT('\'');
            PUT('\\');
            PUT('\'');
            PUT('\'');
        } else
            PUT(*s);
    }
    PUT('\'');
#undef PUT
    buf[o] = '\0';
    return NB_OK;
}

/* ---- running a process ---------------------------------------------------------------- */

/* environ with overrides applied: a malloc'ed table pointing into both. */
static char **merged_env(char *const *over)
{
    size_t n0 = 0, n1 = 0;
    while (environ && environ[n0])
        n0++;
    while (over && over[n1])
        n1++;
    char **e = malloc(sizeof *e * (n0 + n1 + 1));
    if (!e)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n0; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t kl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int overridden = 0;
        for (size_t j = 0; j < n1 && !overridden; j++)
            overridden = !strncmp(over[j], environ[i], kl) && over[j][kl] == '=';
        if (!overridden)
            e[k++] = environ[i];
    }
    for (size_t j = 0; j < n1; j++)
        e[k++] = over[j];
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
    char **envp = merged_env(o->env);
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

/* ---- parsing -------------------------------------------------------------------------- */

/* The number after prefix in line (skipping blanks), or 0 when absent/malformed. */
static int number_after(const char *line, const char *prefix, double *v, const char **end)
{
    const char *p = strstr(line, prefix);
    if (!p)
        return 0;
    p += strlen(prefix);
    while (*p == ' ' || *p == '\t')
        p++;
    char *e;
    errno = 0;
    double x = strtod(p, &e);
    if (e == p || errno || !isfinite(x) || x < 0)
        return 0;
    *v = x;
    if (end)
        *end = e;
    return 1;
}

/* TTFT in ms: "X.XXs" (the reference tooling, our CLI) or "X ms". */
static int ttft_of(const char *line, double *ms)
{
    double v;
    const char *e;
    if (!number_after(line, "Time to first token (TTFT):", &v, &e))
        return 0;
    while (*e == ' ')
        e++;
    if (e[0] == 'm' && e[1] == 's')
        *ms = v;
    else if (e[0] == 's' || e[0] == '\0' || e[0] == ' ' || e[0] == '(')
        *ms = v * 1000.0;
    else
        return 0;
    return 1;
}

static int tps_of(const char *line, double *tps)
{
    return number_after(line, "Tokens/second:", tps, NULL);
}

static int decode_of(const char *line, double *ms)
{
    double v;
    const char *e;
    if (!number_after(line, "End-to-end (per token)", &v, &e))
        return 0;
    while (*e == ' ')
        e++;
    if (e[0] != 'm' || e[1] != 's')
        return 0;
    *ms = v;
    return 1;
}

static int int_after(const char *line, const char *prefix, int *out)
{
    double v;
    if (!number_after(line, prefix, &v, NULL) || v > 1e9)
        return 0;
    *out = (int)v;
    return 1;
}

static void path_after(const char *line, const char *prefix, char *buf, size_t cap)
{
    const char *p = strstr(line, prefix);
    if (!p)
        return;
    p += strlen(prefix);
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, " \t\r\n");
    if (n < 6 || n >= cap || strncmp(p + n - 5, ".json", 5))
        return;
    memcpy(buf, p, n);
    buf[n] = '\0';
}

/* Calls fn for each line of output (a copy, NUL-terminated, at most LINE_MAX_BYTES). */
static void each_line(const char *s, size_t len, void (*fn)(void *, const char *), void *u)
{
    char line[LINE_MAX_BYTES + 1];
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != '\n')
            j++;
        size_t n = j - i < LINE_MAX_BYTES ? j - i : LINE_MAX_BYTES;
        memcpy(line, s + i, n);
        line[n] = '\0';
        if (n && line[n - 1] == '\r')
            line[n - 1] = '\0';
        fn(u, line);
        i = j + 1;
    }
}

static void parse_line(void *u, const char *line)
{
    nb_exec_parsed *p = u;
    double v;
    if (ttft_of(line, &v)) {
        p->has_ttft = 1;
        p->ttft_ms = v;
    }
    if (tps_of(line, &v)) {
        p->has_tps = 1;
        p->tps = v;
    }
    if (decode_of(line, &v)) {
        p->has_decode = 1;
        p->decode_ms_per_token = v;
    }
    int n;
    if (int_after(line, "Prompt tokens:", &n)) {
        p->has_prompt_tokens = 1;
        p->prompt_tokens = n;
    }
    if (int_after(line, "generated tokens:", &n)) {
        p->has_generated_tokens = 1;
        p->generated_tokens = n;
    }
    if (!strncmp(line, "[verify] PASS", 13) || !strncmp(line, "[verify] FAIL", 13)) {
        p->gate = line[9] == 'P' ? 0 : 1;
        int a, b;
        const char *paren = strchr(line, '(');
        if (paren && sscanf(paren, "(%d/%d prompts pass)", &a, &b) == 2 && a >= 0 && b >= a) {
            p->gate_passed = a;
            p->gate_total = b;
        }
    }
    /* The reference tooling prints "[verify] JSON:   <path>"; our CLI "Report: <path>.json". */
    if (strstr(line, "[verify] JSON:"))
        path_after(line, "[verify] JSON:", p->report_path, sizeof p->report_path);
    else if (!strncmp(line, "Report: ", 8) && !p->report_path[0])
        path_after(line, "Report:", p->report_path, sizeof p->report_path);
}

void nb_exec_parse(const char *output, size_t len, nb_exec_parsed *out)
{
    memset(out, 0, sizeof *out);
    out->gate = -1;
    out->gate_passed = out->gate_total = -1;
    each_line(output, len, parse_line, out);
    if (!out->has_tps && out->has_decode && out->decode_ms_per_token > 0) {
        out->has_tps = 1;
        out->tps = 1000.0 / out->decode_ms_per_token;
    }
    if (out->has_tps && !out->has_decode && out->tps > 0) {
        out->has_decode = 1;
        out->decode_ms_per_token = 1000.0 / out->tps;
    }
}

typedef struct sample_acc {
    double *ttft, *tps, *dec;
    int n_ttft, n_tps, n_dec, cap;
    int oom;
} sample_acc;

static void push(double **v, int *n, int cap, double x, int *oom)
{
    if (*n >= cap) {
        *oom = 1;
        return;
    }
    (*v)[(*n)++] = x;
}

static void sample_line(void *u, const char *line)
{
    sample_acc *a = u;
    double v;
    if (ttft_of(line, &v))
        push(&a->ttft, &a->n_ttft, a->cap, v, &a->oom);
    if (tps_of(line, &v))
        push(&a->tps, &a->n_tps, a->cap, v, &a->oom);
    if (decode_of(line, &v))
        push(&a->dec, &a->n_dec, a->cap, v, &a->oom);
}

nb_code nb_exec_parse_samples(const char *output, size_t len, double **ttft, int *n_ttft,
                              double **tps, int *n_tps, nb_err *err)
{
    *ttft = *tps = NULL;
    *n_ttft = *n_tps = 0;
    sample_acc a = {0};
    a.cap = 10000;
    a.ttft = malloc(sizeof(double) * (size_t)a.cap);
    a.tps = malloc(sizeof(double) * (size_t)a.cap);
    a.dec = malloc(sizeof(double) * (size_t)a.cap);
    if (!a.ttft || !a.tps || !a.dec) {
        free(a.ttft);
        free(a.tps);
        free(a.dec);
        return nb_err_set(err, NB_ENOMEM, "out of memory parsing samples");
    }
    each_line(output, len, sample_line, &a);
    if (!a.n_tps) /* only "End-to-end (per token) N ms": tps = 1000 / N */
        for (int i = 0; i < a.n_dec; i++)
            if (a.dec[i] > 0)
                a.tps[a.n_tps++] = 1000.0 / a.dec[i];
    free(a.dec);
    *ttft = a.ttft;
    *n_ttft = a.n_ttft;
    *tps = a.tps;
    *n_tps = a.n_tps;
    return NB_OK;
}

/* ---- report gates --------------------------------------------------------------------- */

static int jint(json_object *o, const char *key, int dflt)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !v)
        return dflt;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return dflt;
    return json_object_get_int(v);
}

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !v || !json_object_is_type(v, json_type_string))
        return "";
    return json_object_get_string(v);
}

static json_object *jget(json_object *o, const char *key, json_type t)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !v || !json_object_is_type(v, t))
        return NULL;
    return v;
}

static char *sdup(const char *s)
{
    return s && *s ? strdup(s) : (char *)protobuf_c_empty_string;
}

static int topk_list(json_object *arr, Npubench__TopToken ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!arr)
        return 1;
    size_t len = json_object_array_length(arr);
    if (len > 64)
        len = 64;
    if (!len)
        return 1;
    Npubench__TopToken **v = calloc(len, sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < len; i++) {
        v[i] = malloc(sizeof *v[i]);
        if (!v[i]) {
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return 0;
        }
        npubench__top_token__init(v[i]);
        v[i]->token = json_object_get_int(json_object_array_get_idx(arr, i));
    }
    *out = v;
    *n = len;
    return 1;
}

/* One GateRecord from a record of either format: ours ("records": index, steps,
 * divergence_step, status PASS/FAIL, device{token, rank_in_reference, topk},
 * reference{...}, topk_checks[{step, device_token, reference_token}]) or the reference
 * tooling's ("topk_checks": prompt_idx, n_steps, divergence_step|null, status OK/FAIL,
 * test_chosen_at_div, ref_chosen_at_div, test_topk_at_div, ref_topk_at_div, 1-based
 * ranks). */
static Npubench__GateRecord *gate_of(json_object *r, int ours)
{
    Npubench__GateRecord *g = malloc(sizeof *g);
    if (!g)
        return NULL;
    npubench__gate_record__init(g);
    const char *status = jstr(r, "status");
    int pass = !strcmp(status, "PASS") || !strcmp(status, "OK");
    g->status = pass ? NPUBENCH__OUTCOME__PASS : NPUBENCH__OUTCOME__FAIL;
    g->divergence_step = jint(r, "divergence_step", -1);
    g->device_token_ref_rank = g->reference_token_dev_rank = -1;
    g->top_step = g->divergence_step;
    int ok = (g->fail_reason = sdup(jstr(r, "fail_reason"))) != NULL;
    if (ours) {
        g->index = jint(r, "index", 0);
        g->steps = jint(r, "steps", 0);
        g->prompt_tokens = jint(r, "prompt_tokens", 0);
        json_object *dev = jget(r, "device", json_type_object),
                    *ref = jget(r, "reference", json_type_object);
        g->device_token = dev ? jint(dev, "token", -1) : -1;
        g->reference_token = ref ? jint(ref, "token", -1) : -1;
        if (dev)
            g->device_token_ref_rank = jint(dev, "rank_in_reference", -1);
        if (ref)
            g->reference_token_dev_rank = jint(ref, "rank_in_device", -1);
        ok = ok && (g->prompt = sdup(jstr(r, "prompt"))) &&
             (g->agreed_prefix = sdup(jstr(r, "agreed_prefix"))) &&
             (g->device_generation = sdup(jstr(r, "device_text"))) &&
             (g->reference_generation = sdup(jstr(r, "reference_text"))) &&
             topk_list(jget(dev, "topk", json_type_array), &g->device_top, &g->n_device_top) &&
             topk_list(jget(ref, "topk", json_type_array), &g->reference_top,
                       &g->n_reference_top);
        json_object *checks = jget(r, "topk_checks", json_type_array);
        size_t n = checks ? json_object_array_length(checks) : 0;
        if (ok && n) {
            g->device_tokens = calloc(n, sizeof *g->device_tokens);
            g->reference_tokens = calloc(n, sizeof *g->reference_tokens);
            ok = g->device_tokens && g->reference_tokens;
            for (size_t i = 0; ok && i < n; i++) {
                json_object *c = json_object_array_get_idx(checks, i);
                g->device_tokens[i] = json_object_is_type(c, json_type_object)
                                          ? jint(c, "device_token", -1) : -1;
                g->reference_tokens[i] = json_object_is_type(c, json_type_object)
                                             ? jint(c, "reference_token", -1) : -1;
            }
            if (ok)
                g->n_device_tokens = g->n_reference_tokens = n;
        }
        g->agreed = g->divergence_step >= 0 ? g->divergence_step : g->steps;
        if (g->top_step < 0)
            g->top_step = g->steps - 1;
    } else {
        g->index = jint(r, "prompt_idx", 0);
        g->steps = jint(r, "n_steps", 0);
        g->device_token = jint(r, "test_chosen_at_div", -1);
        g->reference_token = jint(r, "ref_chosen_at_div", -1);
        int tr = jint(r, "test_chosen_rank_in_ref", 0), rr = jint(r, "ref_chosen_rank_in_test", 0);
        g->device_token_ref_rank = tr > 0 ? tr - 1 : -1; /* 1-based there, 0-based here */
        g->reference_token_dev_rank = rr > 0 ? rr - 1 : -1;
        g->agreed = g->divergence_step >= 0 ? g->divergence_step : g->steps;
        ok = ok && (g->prompt = sdup(jstr(r, "prompt_text"))) &&
             (g->device_text = sdup(jstr(r, "test_chosen_text_at_div"))) &&
             (g->reference_text = sdup(jstr(r, "ref_chosen_text_at_div"))) &&
             (g->agreed_prefix = sdup(jstr(r, "agreed_prefix_text"))) &&
             topk_list(jget(r, "test_topk_at_div", json_type_array), &g->device_top,
                       &g->n_device_top) &&
             topk_list(jget(r, "ref_topk_at_div", json_type_array), &g->reference_top,
                       &g->n_reference_top);
    }
    if (!ok) {
        protobuf_c_message_free_unpacked(&g->base, NULL);
        return NULL;
    }
    return g;
}

nb_code nb_exec_report_gates(const char *path, Npubench__JobResult *res, int *failed,
                             nb_err *err)
{
    *failed = 0;
    json_object *root;
    nb_code rc = nb_json_read_file(path, REPORT_MAX_BYTES, &root, err);
    if (rc)
        return rc;
    json_object *arr = jget(root, "topk_checks", json_type_array);
    int ours = 0;
    if (!arr) {
        arr = jget(root, "records", json_type_array);
        ours = 1;
    }
    if (!arr) {
        json_object_put(root);
        return nb_err_set(err, NB_EFORMAT, "%s: neither 'topk_checks' nor 'records' is an array",
                          path);
    }
    size_t n = json_object_array_length(arr);
    if (n > 4096) {
        json_object_put(root);
        return nb_err_set(err, NB_EFORMAT, "%s: %zu records, at most 4096", path, n);
    }
    Npubench__GateRecord **gates = realloc(res->gates, sizeof *gates * (res->n_gates + n + 1));
    if (!gates) {
        json_object_put(root);
        return nb_err_set(err, NB_ENOMEM, "out of memory reading %s", path);
    }
    res->gates = gates;
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(arr, i);
        if (!json_object_is_type(r, json_type_object)) {
            json_object_put(root);
            return nb_err_set(err, NB_EFORMAT, "%s: %s[%zu] is not an object", path,
                              ours ? "records" : "topk_checks", i);
        }
        Npubench__GateRecord *g = gate_of(r, ours);
        if (!g) {
            json_object_put(root);
            return nb_err_set(err, NB_ENOMEM, "out of memory reading %s", path);
        }
        if (g->status != NPUBENCH__OUTCOME__PASS)
            (*failed)++;
        gates[res->n_gates++] = g;
    }
    json_object_put(root);
    return NB_OK;
}

/* ---- deployments ---------------------------------------------------------------------- */

/* Commands are indexed by npubench.JobKind - 1. */
#define K_N NPUBENCH__JOB_KIND__PROFILE

typedef struct exec_cmd {
    char **argv;   /* split words (one block), or NULL */
    char *shell;   /* /bin/sh -c text, or NULL */
} exec_cmd;

struct nb_exec_deploy {
    exec_cmd cmd[K_N];
    char *cwd;
    char **env;    /* "K=V", NULL-terminated */
    int64_t timeout_ms;
    size_t max_output;
    char *report;  /* a report path the commands write, or NULL */
};

static int kind_index(int kind)
{
    return kind >= 1 && kind <= K_N ? kind - 1 : -1;
}

void nb_exec_deploy_free(nb_exec_deploy *d)
{
    if (!d)
        return;
    for (int i = 0; i < K_N; i++) {
        free(d->cmd[i].argv);
        free(d->cmd[i].shell);
    }
    free(d->cwd);
    for (char **e = d->env; e && *e; e++)
        free(*e);
    free(d->env);
    free(d->report);
    free(d);
}

/* An argv array (JSON strings) as one split-style block. */
static nb_code argv_of_array(json_object *a, const char *what, char ***out, nb_err *err)
{
    size_t n = json_object_array_length(a);
    if (!n || n > MAX_WORDS)
        return nb_err_set(err, NB_EINVAL, "%s: argv must have 1..%d strings", what, MAX_WORDS);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(a, i);
        if (!json_object_is_type(s, json_type_string))
            return nb_err_set(err, NB_EINVAL, "%s[%zu]: not a string", what, i);
        bytes += (size_t)json_object_get_string_len(s) + 1;
    }
    char **argv = malloc(sizeof(char *) * (n + 1) + bytes);
    if (!argv)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    char *p = (char *)(argv + n + 1);
    for (size_t i = 0; i < n; i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(a, i));
        argv[i] = p;
        size_t l = strlen(s) + 1;
        memcpy(p, s, l);
        p += l;
    }
    argv[n] = NULL;
    *out = argv;
    return NB_OK;
}

nb_code nb_exec_deploy_parse(json_object *o, const char *what, nb_exec_deploy **out,
                             nb_err *err)
{
    *out = NULL;
    if (!json_object_is_type(o, json_type_object))
        return nb_err_set(err, NB_EINVAL, "%s.exec: must be an object", what);
    nb_exec_deploy *d = calloc(1, sizeof *d);
    if (!d)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    d->timeout_ms = (int64_t)DEFAULT_TIMEOUT_S * 1000;
    d->max_output = DEFAULT_MAX_OUTPUT;
    nb_code rc = NB_OK;
    int n_cmds = 0;
    json_object_object_foreach(o, key, val)
    {
        char w[256];
        snprintf(w, sizeof w, "%s.exec.%s", what, key);
        int ki = kind_index(nb_job_kind_parse(key));
        if (ki >= 0) {
            if (d->cmd[ki].argv || d->cmd[ki].shell) {
                rc = nb_err_set(err, NB_EINVAL, "%s: given twice", w);
                break;
            }
            if (json_object_is_type(val, json_type_string)) {
                nb_err e2;
                if ((rc = nb_exec_split(json_object_get_string(val), &d->cmd[ki].argv, NULL,
                                        &e2))) {
                    nb_err_set(err, rc, "%s: %s", w, e2.msg);
                    break;
                }
            } else if (json_object_is_type(val, json_type_array)) {
                if ((rc = argv_of_array(val, w, &d->cmd[ki].argv, err)))
                    break;
            } else if (json_object_is_type(val, json_type_object) &&
                       jget(val, "shell", json_type_string)) {
                const char *s = json_object_get_string(jget(val, "shell", json_type_string));
                if (!*s) {
                    rc = nb_err_set(err, NB_EINVAL, "%s.shell: empty", w);
                    break;
                }
                if (!(d->cmd[ki].shell = strdup(s))) {
                    rc = nb_err_set(err, NB_ENOMEM, "out of memory");
                    break;
                }
            } else {
                rc = nb_err_set(err, NB_EINVAL,
                                "%s: expected a command line, an argv array or {\"shell\": ...}",
                                w);
                break;
            }
            n_cmds++;
        } else if (!strcmp(key, "cwd")) {
            if (!json_object_is_type(val, json_type_string) ||
                !(d->cwd = strdup(json_object_get_string(val)))) {
                rc = nb_err_set(err, NB_EINVAL, "%s: must be a directory path", w);
                break;
            }
        } else if (!strcmp(key, "report")) {
            if (!json_object_is_type(val, json_type_string) ||
                !(d->report = strdup(json_object_get_string(val)))) {
                rc = nb_err_set(err, NB_EINVAL, "%s: must be a file path", w);
                break;
            }
        } else if (!strcmp(key, "timeout_s") || !strcmp(key, "max_output_kb")) {
            int is_t = key[0] == 't';
            double lim = is_t ? 7 * 24 * 3600 : 1 << 20;
            if (!json_object_is_type(val, json_type_int) && !json_object_is_type(val, json_type_double)) {
                rc = nb_err_set(err, NB_EINVAL, "%s: must be a number", w);
                break;
            }
            double v = json_object_get_double(val);
            if (!(v > 0 && v <= lim)) {
                rc = nb_err_set(err, NB_EINVAL, "%s %g: must be in (0, %g]", w, v, lim);
                break;
            }
            if (is_t)
                d->timeout_ms = (int64_t)(v * 1000.0);
            else
                d->max_output = (size_t)v * 1024;
        } else if (!strcmp(key, "env")) {
            if (!json_object_is_type(val, json_type_object)) {
                rc = nb_err_set(err, NB_EINVAL, "%s: must be an object of strings", w);
                break;
            }
            size_t n = (size_t)json_object_object_length(val), i = 0;
            if (!(d->env = calloc(n + 1, sizeof *d->env))) {
                rc = nb_err_set(err, NB_ENOMEM, "out of memory");
                break;
            }
            json_object_object_foreach(val, ek, ev)
            {
                if (!*ek || strchr(ek, '=') || !json_object_is_type(ev, json_type_string)) {
                    rc = nb_err_set(err, NB_EINVAL,
                                    "%s.%s: names must be non-empty without '=', values strings",
                                    w, ek);
                    break;
                }
                if (asprintf(&d->env[i], "%s=%s", ek, json_object_get_string(ev)) < 0) {
                    d->env[i] = NULL;
                    rc = nb_err_set(err, NB_ENOMEM, "out of memory");
                    break;
                }
                i++;
            }
            if (rc)
                break;
        } else {
            rc = nb_err_set(err, NB_EINVAL,
                            "%s: unknown key (expected run, verify, verify_full, diagnosis, "
                            "profile, cwd, env, timeout_s, report, max_output_kb)",
                            w);
            break;
        }
    }
    if (!rc && !n_cmds)
        rc = nb_err_set(err, NB_EINVAL, "%s.exec: no command for any job kind", what);
    if (rc) {
        nb_exec_deploy_free(d);
        return rc;
    }
    *out = d;
    return NB_OK;
}

static char **dup_argv(char **a)
{
    if (!a)
        return NULL;
    size_t n = 0, bytes = 0;
    for (; a[n]; n++)
        bytes += strlen(a[n]) + 1;
    char **b = malloc(sizeof(char *) * (n + 1) + bytes);
    if (!b)
        return NULL;
    char *p = (char *)(b + n + 1);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(a[i]) + 1;
        memcpy(p, a[i], l);
        b[i] = p;
        p += l;
    }
    b[n] = NULL;
    return b;
}

nb_code nb_exec_deploy_dup(const nb_exec_deploy *d, nb_exec_deploy **out, nb_err *err)
{
    *out = NULL;
    nb_exec_deploy *c = calloc(1, sizeof *c);
    if (!c)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    int ok = 1;
    for (int i = 0; i < K_N; i++) {
        if (d->cmd[i].argv)
            ok &= (c->cmd[i].argv = dup_argv(d->cmd[i].argv)) != NULL;
        if (d->cmd[i].shell)
            ok &= (c->cmd[i].shell = strdup(d->cmd[i].shell)) != NULL;
    }
    if (d->cwd)
        ok &= (c->cwd = strdup(d->cwd)) != NULL;
    if (d->report)
        ok &= (c->report = strdup(d->report)) != NULL;
    if (d->env) {
        size_t n = 0;
        while (d->env[n])
            n++;
        if ((c->env = calloc(n + 1, sizeof *c->env)))
            for (size_t i = 0; i < n; i++)
                ok &= (c->env[i] = strdup(d->env[i])) != NULL;
        else
            ok = 0;
    }
    c->timeout_ms = d->timeout_ms;
    c->max_output = d->max_output;
    if (!ok) {
        nb_exec_deploy_free(c);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    *out = c;
    return NB_OK;
}

int nb_exec_deploy_supports(const nb_exec_deploy *d, int kind)
{
    int k = kind_index(kind);
    return k >= 0 && (d->cmd[k].argv || d->cmd[k].shell);
}

/* ---- jobs ------------------------------------------------------------------------------- */

typedef struct subst {
    const char *name;
    const char *value; /* points at num or at the caller's string */
    char num[32];
} subst;

/* Replaces {name} placeholders in s (quoted for the shell when quote). NULL on OOM. */
static char *substitute(const char *s, const subst *v, int nv, int quote)
{
    size_t cap = strlen(s) + 1, len = 0;
    char *o = malloc(cap);
    if (!o)
        return NULL;
    while (*s) {
        const char *rep = NULL;
        char *quoted = NULL;
        size_t skip = 0;
        if (*s == '{')
            for (int i = 0; i < nv && !rep; i++) {
                size_t l = strlen(v[i].name);
                if (!strncmp(s + 1, v[i].name, l) && s[1 + l] == '}') {
                    rep = v[i].value;
                    skip = l + 2;
                    if (quote) {
                        size_t qcap = 4 * strlen(rep) + 3;
                        nb_err e;
                        if (!(quoted = malloc(qcap)) ||
                            nb_exec_shell_quote(rep, quoted, qcap, &e) != NB_OK) {
                            free(quoted);
                            free(o);
                            return NULL;
                        }
                        rep = quoted;
                    }
                }
            }
        const char *add = rep ? rep : s;
        size_t n = rep ? strlen(rep) : 1;
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *t = realloc(o, cap);
            if (!t) {
                free(quoted);
                free(o);
                return NULL;
            }
            o = t;
        }
        memcpy(o + len, add, n);
        len += n;
        free(quoted);
        s += rep ? skip : 1;
    }
    o[len] = '\0';
    return o;
}

static void free_words(char **w)
{
    for (char **p = w; p && *p; p++)
        free(*p);
    free(w);
}

/* The per-job argv (each word malloc'ed; free with free_words). */
static char **job_argv(const exec_cmd *c, const subst *v, int nv)
{
    if (c->shell) {
        char **a = calloc(4, sizeof *a);
        if (!a)
            return NULL;
        if (!(a[0] = strdup("/bin/sh")) || !(a[1] = strdup("-c")) ||
            !(a[2] = substitute(c->shell, v, nv, 1))) {
            free_words(a);
            return NULL;
        }
        return a;
    }
    size_t n = 0;
    while (c->argv[n])
        n++;
    char **a = calloc(n + 1, sizeof *a);
    if (!a)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(a[i] = substitute(c->argv[i], v, nv, 0))) {
            free_words(a);
            return NULL;
        }
    return a;
}

static int uses_placeholder(const exec_cmd *c, const char *ph)
{
    if (c->shell)
        return strstr(c->shell, ph) != NULL;
    for (char **p = c->argv; *p; p++)
        if (strstr(*p, ph))
            return 1;
    return 0;
}

/* "`make -C x profile`" for messages, bounded. */
static void describe(char *const *argv, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; argv[i] && o + 4 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " " : "", argv[i]);
    if (o >= cap - 4 && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
}

static void tail_of(const char *s, size_t len, char *buf, size_t cap)
{
    size_t n = len < TAIL_BYTES ? len : TAIL_BYTES;
    snprintf(buf, cap, "%.*s", (int)n, s + len - n);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static nb_code add_sample(Npubench__Metrics *m, double ttft, double tps, int have_ttft)
{
    Npubench__Sample **v = realloc(m->samples, sizeof *v * (m->n_samples + 1));
    if (!v)
        return NB_ENOMEM;
    m->samples = v;
    Npubench__Sample *s = malloc(sizeof *s);
    if (!s)
        return NB_ENOMEM;
    npubench__sample__init(s);
    s->rep = (int32_t)m->n_samples;
    s->ttft_ms = have_ttft ? ttft : 0;
    s->tps = tps;
    s->decode_ms_per_token = tps > 0 ? 1000.0 / tps : 0;
    s->tpot_ms = s->decode_ms_per_token;
    v[m->n_samples++] = s;
    return NB_OK;
}

static void mean_sd(Npubench__Metrics *m, size_t off, double *mean, double *sd)
{
    size_t n = m->n_samples;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += *(double *)((char *)m->samples[i] + off);
    *mean = n ? s / (double)n : 0;
    double q = 0;
    for (size_t i = 0; i < n; i++) {
        double d = *(double *)((char *)m->samples[i] + off) - *mean;
        q += d * d;
    }
    *sd = n > 1 ? sqrt(q / (double)(n - 1)) : 0;
}

nb_code nb_exec_job(const nb_exec_deploy *d, const char *model, const char *dtype,
                    const Npubench__JobSpec *spec, const nb_exec_job_hooks *hooks,
                    Npubench__JobResult *res, nb_err *err)
{
    int ki = kind_index(spec->kind);
    if (ki < 0 || !nb_exec_deploy_supports(d, spec->kind))
        return nb_err_set(err, NB_EUNSUPPORTED, "exec deployment has no '%s' command",
                          nb_job_kind_name(spec->kind));
    const exec_cmd *c = &d->cmd[ki];
    int is_verify = spec->kind == NPUBENCH__JOB_KIND__VERIFY ||
                    spec->kind == NPUBENCH__JOB_KIND__VERIFY_FULL;
    int is_bench = spec->kind == NPUBENCH__JOB_KIND__RUN ||
                   spec->kind == NPUBENCH__JOB_KIND__PROFILE;
    subst v[9];
    int nv = 0;
#define SETN(nm, val)                                                                            \
    do {                                                                                         \
        v[nv].name = nm;                                                                         \
        snprintf(v[nv].num, sizeof v[nv].num, "%d", (int)(val));                                  \
        v[nv].value = v[nv].num;                                                                 \
        nv++;                                                                                    \
    } while (0)
#define SETS(nm, str)                                                                            \
    do {                                                                                         \
        v[nv].name = nm;                                                                         \
        v[nv].value = (str);                                                                     \
        nv++;                                                                                    \
    } while (0)
    int is_short_verify = spec->kind == NPUBENCH__JOB_KIND__VERIFY;
    int n_tokens = spec->n_tokens                              ? spec->n_tokens
                   : is_short_verify                           ? NB_JOB_VERIFY_N_TOKENS
                   : spec->kind == NPUBENCH__JOB_KIND__RUN     ? NB_JOB_RUN_N_TOKENS_DEFAULT
                                                               : NB_JOB_PROFILE_N_TOKENS_DEFAULT;
    SETN("n_tokens", n_tokens);
    SETN("k", spec->k ? spec->k : NB_JOB_VERIFY_K);
    SETN("max_prompts", spec->max_prompts  ? spec->max_prompts
                        : is_short_verify ? NB_JOB_VERIFY_PROMPTS
                                          : 0);
    SETN("reps", spec->reps ? spec->reps : 1);
    SETS("prompt", spec->prompt && *spec->prompt ? spec->prompt : "The capital of France is");
    SETN("prompt_begin", spec->shard ? spec->shard->prompt_begin : 0);
    SETN("prompt_end", spec->shard ? spec->shard->prompt_end : 0);
    SETS("model", model ? model : "");
    SETS("dtype", dtype ? dtype : "");
#undef SETN
#undef SETS
    /* A command that takes {reps} repeats itself; otherwise run it once per repetition. */
    int runs = is_bench && !uses_placeholder(c, "{reps}") && spec->reps > 1 ? spec->reps : 1;
    char **argv = job_argv(c, v, nv);
    if (!argv)
        return nb_err_set(err, NB_ENOMEM, "out of memory building the command line");
    char what[512];
    describe(argv, what, sizeof what);
    Npubench__Metrics *m = NULL;
    if (is_bench) {
        if (!(m = malloc(sizeof *m))) {
            free_words(argv);
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        }
        npubench__metrics__init(m);
    }
    nb_code rc = NB_OK;
    nb_exec_parsed last;
    memset(&last, 0, sizeof last);
    last.gate = -1;
    char *report_text = NULL;
    int report_failed = -1;
    for (int r = 0; r < runs && !rc; r++) {
        nb_exec_proc_opts po = {.argv = argv, .cwd = d->cwd, .env = d->env,
                                .timeout_ms = d->timeout_ms, .max_output = d->max_output,
                                .cancelled = hooks ? hooks->cancelled : NULL,
                                .line = hooks ? hooks->line : NULL,
                                .user = hooks ? hooks->user : NULL};
        if (spec->timeout_ms > 0 && spec->timeout_ms < po.timeout_ms)
            po.timeout_ms = spec->timeout_ms;
        nb_exec_proc_result pr;
        if ((rc = nb_exec_proc_run(&po, &pr, err)))
            break;
        char tail[TAIL_BYTES + 8];
        tail_of(pr.output, pr.len, tail, sizeof tail);
        nb_exec_parse(pr.output, pr.len, &last);
        if (pr.cancelled)
            rc = nb_err_set(err, NB_ECANCELED, "`%s` cancelled", what);
        else if (pr.timed_out)
            rc = nb_err_set(err, NB_ETIMEOUT, "`%s` timed out after %.0f s; output tail: %s",
                            what, (double)po.timeout_ms / 1000.0, tail);
        else if (pr.term_signal)
            rc = nb_err_set(err, NB_EIO, "`%s` killed by signal %d (%s); output tail: %s", what,
                            pr.term_signal, strsignal(pr.term_signal), tail);
        else if (pr.exit_code != 0 && !(is_verify && last.gate == 1))
            rc = nb_err_set(err, NB_EIO, "`%s` exited with status %d; output tail: %s", what,
                            pr.exit_code, tail);
        else if (is_bench) {
            double *tt = NULL, *tp = NULL;
            int nt = 0, np = 0;
            if ((rc = nb_exec_parse_samples(pr.output, pr.len, &tt, &nt, &tp, &np, err)) == NB_OK) {
                if (!np && !nt)
                    rc = nb_err_set(err, NB_EFORMAT,
                                    "`%s` printed no 'Time to first token (TTFT):', "
                                    "'Tokens/second:' or 'End-to-end (per token)' line; output "
                                    "tail: %s",
                                    what, tail);
                int n = nt > np ? nt : np;
                for (int i = 0; !rc && i < n; i++)
                    if (add_sample(m, i < nt ? tt[i] : (nt ? tt[nt - 1] : 0),
                                   i < np ? tp[i] : (np ? tp[np - 1] : 0), nt > 0))
                        rc = nb_err_set(err, NB_ENOMEM, "out of memory");
            }
            free(tt);
            free(tp);
        } else if (is_verify && last.gate < 0)
            rc = nb_err_set(err, NB_EFORMAT,
                            "`%s` printed no '[verify] PASS' or '[verify] FAIL' line; output "
                            "tail: %s",
                            what, tail);
        nb_exec_proc_result_free(&pr);
    }
    free_words(argv);
    /* The report: configured path first, else the one the command printed. */
    const char *rpath = d->report ? d->report : last.report_path[0] ? last.report_path : NULL;
    if (!rc && rpath && (is_verify || spec->kind == NPUBENCH__JOB_KIND__DIAGNOSIS)) {
        char *text = NULL;
        size_t len = 0;
        nb_err e2;
        if (nb_file_read(rpath, REPORT_MAX_BYTES, &text, &len, &e2) == NB_OK) {
            report_text = text;
            if (is_verify && (rc = nb_exec_report_gates(rpath, res, &report_failed, err)))
                nb_err_prefix(err, "`%s` report: ", what);
        } else if (d->report)
            rc = nb_err_set(err, e2.code, "`%s`: configured report: %s", what, e2.msg);
    }
    if (rc) {
        if (m)
            protobuf_c_message_free_unpacked(&m->base, NULL);
        free(report_text);
        return rc;
    }
    if (is_bench) {
        mean_sd(m, offsetof(Npubench__Sample, ttft_ms), &m->ttft_ms, &m->ttft_ms_stddev);
        mean_sd(m, offsetof(Npubench__Sample, tps), &m->tps, &m->tps_stddev);
        mean_sd(m, offsetof(Npubench__Sample, decode_ms_per_token), &m->decode_ms_per_token,
                &m->decode_ms_per_token_stddev);
        mean_sd(m, offsetof(Npubench__Sample, tpot_ms), &m->tpot_ms, &m->tpot_ms_stddev);
        if (last.has_prompt_tokens)
            m->prompt_tokens = last.prompt_tokens;
        m->generated_tokens = last.has_generated_tokens ? last.generated_tokens : n_tokens;
        m->requested_tokens = n_tokens;
        for (size_t i = 0; i < m->n_samples; i++) {
            m->samples[i]->prompt_tokens = m->prompt_tokens;
            m->samples[i]->generated_tokens = m->generated_tokens;
        }
        res->metrics = m;
        res->outcome = NPUBENCH__OUTCOME__PASS;
    } else if (is_verify)
        res->outcome = last.gate == 0 ? NPUBENCH__OUTCOME__PASS : NPUBENCH__OUTCOME__FAIL;
    else
        res->outcome = NPUBENCH__OUTCOME__PASS; /* diagnosis is informational */
    if (report_text)
        res->report_json = report_text;
    return NB_OK;
}

