/* nb_backend: the registry of backend tables and the lookups by name; the one place that
 * lists the backends (NB_BACKEND_LIST).  Each table lives in its own file beside this one. */
#include "nb_backend.h"

#include <stdio.h>
#include <string.h>

/* The registered backends, the default first.  A new backend: one X(name) here and its file
 * engine/nb_backend_<name>.c defining nb_backend_<name> (see nb_backend.h). */
#define NB_BACKEND_LIST X(cpu) X(xrt) X(exec) X(air)

#define X(n) extern const nb_backend_ops nb_backend_##n;
NB_BACKEND_LIST
#undef X

#define X(n) &nb_backend_##n,
static const nb_backend_ops *const registry[] = {NB_BACKEND_LIST};
#undef X

#define N_BACKENDS (sizeof registry / sizeof *registry)

const nb_backend_ops *nb_backend_find(const char *name)
{
    for (size_t i = 0; name && i < N_BACKENDS; i++)
        if (!strcmp(name, registry[i]->name))
            return registry[i];
    return NULL;
}

const nb_backend_ops *nb_backend_default(void)
{
    return registry[0];
}

const nb_backend_ops *nb_backend_at(size_t i)
{
    return i < N_BACKENDS ? registry[i] : NULL;
}

int nb_backend_can(const nb_backend_ops *ops, unsigned caps)
{
    return ops && (ops->caps & caps) == caps;
}

static int listed(const nb_backend_ops *ops, unsigned need, unsigned refuse)
{
    return nb_backend_can(ops, need) && !(ops->caps & refuse);
}

void nb_backend_names(unsigned need, unsigned refuse, const char *suffix, char *buf, size_t cap)
{
    size_t n = 0, k = 0, o = 0;
    for (size_t i = 0; i < N_BACKENDS; i++)
        n += (size_t)listed(registry[i], need, refuse);
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; i < N_BACKENDS && o < cap; i++) {
        if (!listed(registry[i], need, refuse))
            continue;
        const char *sep = !k ? "" : k + 1 == n ? " or " : ", ";
        int w = snprintf(buf + o, cap - o, "%s%s%s", sep, registry[i]->name, suffix ? suffix : "");
        o += w > 0 ? (size_t)w : 0;
        k++;
    }
}

nb_code nb_backend_lookup(const char *name, unsigned need, unsigned refuse, const char *what,
                          const nb_backend_ops **out, nb_err *err)
{
    const nb_backend_ops *ops = nb_backend_find(name);
    *out = NULL;
    if (listed(ops, need, refuse)) {
        *out = ops;
        return NB_OK;
    }
    char names[256];
    nb_backend_names(need, refuse, NULL, names, sizeof names);
    return nb_err_set(err, NB_EINVAL, "%sbackend '%s': expected %s", what ? what : "",
                      name ? name : "", names);
}
