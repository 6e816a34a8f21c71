/* nb_args: a small getopt_long replacement that validates as it parses.
 * Accepts --name value and --name=value; "--" ends the flags. */
#include "nb_args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const nb_opt *find(const nb_opt *opts, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
            return &opts[i];
    return NULL;
}

static nb_code set_int(const nb_opt *o, const char *v, nb_err *err)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end)
        return nb_err_set(err, NB_EINVAL, "--%s: '%s' is not an integer", o->name, v);
    if (x < o->lo || x > o->hi)
        return nb_err_set(err, NB_EINVAL, "--%s: %ld is outside the allowed range %ld..%ld",
                          o->name, x, o->lo, o->hi);
    *(int *)o->dst = (int)x;
    return NB_OK;
}

nb_code nb_args_parse(int argc, char **argv, const nb_opt *opts, int n_opts, const char **pos,
                      int max_pos, int *n_pos, nb_err *err)
{
    int np = 0, flags_done = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        /* -h is the one short flag: every command's --help, as users type it first. */
        if (!flags_done && !strcmp(a, "-h") && find(opts, n_opts, "help", 4))
            a = "--help";
        if (flags_done || strncmp(a, "--", 2) || !a[2]) {
            if (!flags_done && !strcmp(a, "--")) {
                flags_done = 1;
                continue;
            }
            if (np >= max_pos)
                return nb_err_set(err, NB_EINVAL, "unexpected argument '%s'", a);
            pos[np++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const nb_opt *o = find(opts, n_opts, name, len);
        if (!o)
            return nb_err_set(err, NB_EINVAL, "unknown option '--%.*s'", (int)len, name);
        if (o->type == NB_OPT_FLAG) {
            if (eq)
                return nb_err_set(err, NB_EINVAL, "--%s takes no value", o->name);
            *(int *)o->dst = o->lo ? (int)o->lo : 1;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc)
                return nb_err_set(err, NB_EINVAL, "--%s needs a value", o->name);
            v = argv[++i];
        }
        /* a flag was handled above: what is left takes the value */
        if (o->type == NB_OPT_INT) {
            nb_code rc = set_int(o, v, err);
            if (rc)
                return rc;
        } else if (o->type == NB_OPT_LIST) {
            nb_strlist *l = o->dst;
            if (l->n >= NB_LIST_MAX)
                return nb_err_set(err, NB_EINVAL, "--%s given more than %d times", o->name,
                                  NB_LIST_MAX);
            l->items[l->n++] = v;
        } else {
            *(const char **)o->dst = v; /* NB_OPT_STR */
        }
    }
    if (n_pos)
        *n_pos = np;
    return NB_OK;
}

void nb_args_usage(FILE *f, const char *usage, const nb_opt *opts, int n_opts)
{
    fprintf(f, "usage: %s\n", usage);
    for (int i = 0; i < n_opts; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s", opts[i].name,
                 opts[i].type == NB_OPT_FLAG ? "" : opts[i].type == NB_OPT_INT ? " N" : " V");
        fprintf(f, "  %-24s %s\n", left, opts[i].help ? opts[i].help : "");
    }
}

nb_code nb_args_duration(const char *field, const char *s, int64_t max_ms, int64_t *ms,
                         nb_err *err)
{
    if (!strcmp(s, "never")) {
        *ms = -1;
        return NB_OK;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double unit = !*end || !strcmp(end, "s") ? 1e3
                  : !strcmp(end, "ms")       ? 1
                  : !strcmp(end, "m")        ? 60e3
                  : !strcmp(end, "h")        ? 3600e3
                  : !strcmp(end, "d")        ? 86400e3
                                             : 0;
    if (errno || end == s || !unit || !(v > 0))
        return nb_err_set(err, NB_EINVAL,
                          "%s '%s': expected a positive duration such as 90s, 15m, 2h, 1d "
                          "(plain numbers are seconds) or 'never'",
                          field, s);
    if (v * unit > (double)max_ms)
        return nb_err_set(err, NB_EINVAL, "%s '%s': exceeds the limit of %lld s", field, s,
                          (long long)(max_ms / 1000));
    *ms = (int64_t)(v * unit + 0.5);
    if (*ms < 1)
        *ms = 1;
    return NB_OK;
}
