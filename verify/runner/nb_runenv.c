/* nb_runenv: where a result came from, read from the deployment and this host: the report
 * header (nb_report_env) and the reported npubench.Environment. */
#include "nb_runenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "nb_kernels.h"
#include "nb_version.h"

void nb_runenv_report(const nb_deploy *d, const char *board, nb_report_env *env)
{
    memset(env, 0, sizeof *env);
    snprintf(env->model, sizeof env->model, "%s", d->model_path);
    snprintf(env->model_sha256, sizeof env->model_sha256, "%s", d->model_sha256);
    snprintf(env->backend, sizeof env->backend, "%s", d->spec.backend);
    snprintf(env->dtype, sizeof env->dtype, "%s", nb_dtype_name(d->dtype));
    snprintf(env->board, sizeof env->board, "%s", board ? board : "local");
    env->threads = nb_kernels_threads();
    snprintf(env->isa, sizeof env->isa, "%s", nb_isa_name(nb_kernels_isa()));
}

/* ---- environment -------------------------------------------------------------------- */

void nb_runenv_cpu_model(char *buf, size_t cap)
{
    if (!cap)
        return;
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10))
                continue;
            const char *v = strchr(line, ':');
            if (!v)
                continue;
            v++;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(buf, cap, "%s", v);
            buf[strcspn(buf, "\n")] = '\0';
            break;
        }
        fclose(f);
    }
    if (!buf[0]) {
        struct utsname u;
        snprintf(buf, cap, "%s", uname(&u) == 0 ? u.machine : "unknown");
    }
}

static Npubench__KeyValue *kv_new(const char *k, const char *v)
{
    Npubench__KeyValue *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    npubench__key_value__init(p);
    if (!(p->key = nb_jobpb_strdup(k)) || !(p->value = nb_jobpb_strdup(v))) {
        nb_jobpb_free(p);
        return NULL;
    }
    return p;
}

nb_code nb_runenv_pb_extra(Npubench__Environment *e, const char *key, const char *value)
{
    if (!e)
        return NB_OK;
    Npubench__KeyValue **v = realloc(e->extra, sizeof *v * (e->n_extra + 1));
    if (!v)
        return NB_ENOMEM;
    e->extra = v;
    if (!(v[e->n_extra] = kv_new(key, value)))
        return NB_ENOMEM;
    e->n_extra++;
    return NB_OK;
}

nb_code nb_runenv_pb_new(const nb_deploy *d, const char *board, const char *board_type,
                         Npubench__Environment **out, nb_err *err)
{
    *out = NULL;
    Npubench__Environment *e = malloc(sizeof *e);
    if (!e)
        return nb_jobpb_oom(err);
    npubench__environment__init(e);
    char cpu[256], host[256] = "", cores[32];
    nb_runenv_cpu_model(cpu, sizeof cpu);
    if (gethostname(host, sizeof host - 1))
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    snprintf(cores, sizeof cores, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    e->threads = nb_kernels_threads();
    int ok = (e->npubench_version = nb_jobpb_strdup(NB_VERSION)) &&
             (e->npubench_commit = nb_jobpb_strdup(nb_commit())) &&
             (e->board = nb_jobpb_strdup(board ? board : "local")) &&
             (e->board_type = nb_jobpb_strdup(board_type)) &&
             (e->cpu_info = nb_jobpb_strdup(cpu)) && (e->host = nb_jobpb_strdup(host)) &&
             (e->compiler = nb_jobpb_strdup("gcc " __VERSION__)) &&
             (e->kernels_isa = nb_jobpb_strdup(nb_isa_name(nb_kernels_isa())));
    if (ok && d) {
        e->dtype_id = (Npubench__Dtype)nb_dtype_to_pb(d->dtype); /* the enum, and its name */
        ok = (e->backend = nb_jobpb_strdup(d->spec.backend)) &&
             (e->dtype = nb_jobpb_strdup(nb_dtype_name(d->dtype))) &&
             (e->model = nb_jobpb_strdup(d->model_name)) &&
             (e->model_path = nb_jobpb_strdup(d->model_path)) &&
             (e->model_digest = nb_jobpb_strdup(d->model_sha256));
    }
    if (ok) {
        e->extra = nb_jobpb_calloc(1, sizeof *e->extra);
        ok = e->extra && (e->extra[0] = kv_new("online_cores", cores)) != NULL;
        if (ok)
            e->n_extra = 1;
    }
    if (!ok) {
        nb_jobpb_free(e);
        return nb_jobpb_oom(err);
    }
    *out = e;
    return NB_OK;
}
