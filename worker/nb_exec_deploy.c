/* nb_exec_deploy: an exec deployment's commands: parsing the deployments file's "exec"
 * object, splitting command lines, and filling a job's placeholders into its argv. */
#include "nb_exec_deploy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_job.h"
#include "nb_json.h"
#include "npubench.pb-c.h"

#define MAX_WORDS 4096
#define DEFAULT_MAX_OUTPUT ((size_t)1 << 20)
/* Twice what mlir-air's nightly allows one lit test (1800 s): a first run also compiles. */
#define DEFAULT_TIMEOUT_S 3600

/* ---- argv splitting ----------------------------------------------------------------- */

nb_code nb_exec_deploy_split(const char *line, char ***argv_out, int *argc_out, nb_err *err)
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

nb_code nb_exec_deploy_shell_quote(const char *s, char *buf, size_t cap, nb_err *err)
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

/* ---- deployments ---------------------------------------------------------------------- */

static int kind_index(int kind)
{
    return kind >= 1 && kind <= NB_EXEC_DEPLOY_KINDS ? kind - 1 : -1;
}

void nb_exec_deploy_free(nb_exec_deploy *d)
{
    if (!d)
        return;
    for (int i = 0; i < NB_EXEC_DEPLOY_KINDS; i++) {
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

/* words[0..n) copied into one block: the pointer table, then the strings. */
static char **pack_words(const char *const *words, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(words[i]) + 1;
    char **b = malloc(sizeof(char *) * (n + 1) + bytes);
    if (!b)
        return NULL;
    char *p = (char *)(b + n + 1);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(words[i]) + 1;
        memcpy(p, words[i], l);
        b[i] = p;
        p += l;
    }
    b[n] = NULL;
    return b;
}

/* An argv array (JSON strings) as one split-style block. */
static nb_code argv_of_array(json_object *a, const char *what, char ***out, nb_err *err)
{
    size_t n = json_object_array_length(a);
    if (!n || n > MAX_WORDS)
        return nb_err_set(err, NB_EINVAL, "%s: argv must have 1..%d strings", what, MAX_WORDS);
    const char **words = calloc(n, sizeof *words);
    if (!words)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(a, i);
        if (!json_object_is_type(s, json_type_string)) {
            free(words);
            return nb_err_set(err, NB_EINVAL, "%s[%zu]: not a string", what, i);
        }
        words[i] = json_object_get_string(s);
    }
    *out = pack_words(words, n);
    free(words);
    return *out ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory");
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
                if ((rc = nb_exec_deploy_split(json_object_get_string(val), &d->cmd[ki].argv, NULL,
                                        &e2))) {
                    nb_err_set(err, rc, "%s: %s", w, e2.msg);
                    break;
                }
            } else if (json_object_is_type(val, json_type_array)) {
                if ((rc = argv_of_array(val, w, &d->cmd[ki].argv, err)))
                    break;
            } else if (nb_json_get_type(val, "shell", json_type_string)) {
                const char *s = nb_json_str(val, "shell", "", NULL);
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
        } else if (!strcmp(key, "throughput") || !strcmp(key, "verify_report")) {
            if (!json_object_is_type(val, json_type_boolean)) {
                rc = nb_err_set(err, NB_EINVAL, "%s: must be true or false", w);
                break;
            }
            int off = !json_object_get_boolean(val);
            if (key[0] == 't')
                d->no_throughput = off;
            else
                d->verdict_only = off;
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
                            "profile, cwd, env, timeout_s, report, max_output_kb, throughput, "
                            "verify_report)",
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
    size_t n = 0;
    while (a[n])
        n++;
    return pack_words((const char *const *)a, n);
}

nb_code nb_exec_deploy_dup(const nb_exec_deploy *d, nb_exec_deploy **out, nb_err *err)
{
    *out = NULL;
    nb_exec_deploy *c = calloc(1, sizeof *c);
    if (!c)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    int ok = 1;
    for (int i = 0; i < NB_EXEC_DEPLOY_KINDS; i++) {
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
    c->no_throughput = d->no_throughput;
    c->verdict_only = d->verdict_only;
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

/* ---- one job's command -------------------------------------------------------------------- */

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
                            nb_exec_deploy_shell_quote(rep, quoted, qcap, &e) != NB_OK) {
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

void nb_exec_deploy_argv_free(char **argv)
{
    for (char **p = argv; p && *p; p++)
        free(*p);
    free(argv);
}

static char **job_argv(const nb_exec_deploy_cmd *c, const subst *v, int nv)
{
    if (c->shell) {
        char **a = calloc(4, sizeof *a);
        if (!a)
            return NULL;
        if (!(a[0] = strdup("/bin/sh")) || !(a[1] = strdup("-c")) ||
            !(a[2] = substitute(c->shell, v, nv, 1))) {
            nb_exec_deploy_argv_free(a);
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
            nb_exec_deploy_argv_free(a);
            return NULL;
        }
    return a;
}

nb_code nb_exec_deploy_argv(const nb_exec_deploy *d, int kind, const nb_exec_deploy_vars *v,
                            char ***argv, nb_err *err)
{
    *argv = NULL;
    if (!nb_exec_deploy_supports(d, kind))
        return nb_err_set(err, NB_EUNSUPPORTED, "exec deployment has no '%s' command",
                          nb_job_kind_name(kind));
    const struct {
        const char *name;
        int num;
        const char *str;
    } vals[] = {{"n_tokens", v->n_tokens, NULL},     {"k", v->k, NULL},
                {"max_prompts", v->max_prompts, NULL}, {"reps", v->reps, NULL},
                {"prompt", 0, v->prompt ? v->prompt : ""},
                {"prompt_begin", v->prompt_begin, NULL}, {"prompt_end", v->prompt_end, NULL},
                {"model", 0, v->model ? v->model : ""}, {"dtype", 0, v->dtype ? v->dtype : ""},
                {"prompts_file", 0, v->prompts_file ? v->prompts_file : ""}};
    enum { NV = sizeof vals / sizeof vals[0] };
    subst s[NV];
    for (int i = 0; i < NV; i++) {
        s[i].name = vals[i].name;
        snprintf(s[i].num, sizeof s[i].num, "%d", vals[i].num);
        s[i].value = vals[i].str ? vals[i].str : s[i].num;
    }
    if (!(*argv = job_argv(&d->cmd[kind_index(kind)], s, NV)))
        return nb_err_set(err, NB_ENOMEM, "out of memory building the '%s' command line",
                          nb_job_kind_name(kind));
    return NB_OK;
}

int nb_exec_deploy_uses(const nb_exec_deploy *d, int kind, const char *placeholder)
{
    if (!nb_exec_deploy_supports(d, kind))
        return 0;
    const nb_exec_deploy_cmd *c = &d->cmd[kind_index(kind)];
    if (c->shell)
        return strstr(c->shell, placeholder) != NULL;
    for (char **p = c->argv; *p; p++)
        if (strstr(*p, placeholder))
            return 1;
    return 0;
}

int nb_exec_deploy_takes_range(const nb_exec_deploy *d)
{
    return nb_exec_deploy_uses(d, NPUBENCH__JOB_KIND__VERIFY_FULL, "{prompt_begin}") &&
           nb_exec_deploy_uses(d, NPUBENCH__JOB_KIND__VERIFY_FULL, "{prompt_end}");
}
