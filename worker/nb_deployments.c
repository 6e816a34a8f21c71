/* nb_deployments: parses the deployments file or the --deploy SPECs a worker is started with;
 * both go through one check, and every error names the source, the entry and the field. */
#include "nb_deployments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_backend.h"
#include "nb_engine.h"
#include "nb_json.h"
#include "nb_file.h"

#define DEPLOYMENTS_FILE_MAX ((size_t)1 << 20)
#define DEPLOYMENTS_MAX 64

void nb_deployments_free(nb_deployment *d, int n)
{
    for (int i = 0; d && i < n; i++) {
        nb_exec_deploy_free(d[i].exec);
        nb_deployment_air_free(&d[i]);
    }
    free(d);
}

/* "aliases": the model's other names in the history, e.g. ["llama32_1b"]. */
static nb_code parse_aliases(json_object *v, const char *what, nb_deployment *d, nb_err *err)
{
    if (!json_object_is_type(v, json_type_array))
        return nb_err_set(err, NB_EINVAL, "%s: must be a list of strings", what);
    size_t n = json_object_array_length(v);
    if (n > NB_JOB_MODEL_ALIASES_MAX)
        return nb_err_set(err, NB_EINVAL, "%s: %zu aliases, the limit is %d", what, n,
                          NB_JOB_MODEL_ALIASES_MAX);
    for (size_t i = 0; i < n; i++) {
        char w[192];
        snprintf(w, sizeof w, "%s[%zu]", what, i);
        nb_code rc = nb_json_need_strcpy(json_object_array_get_idx(v, i), w, NULL, 1, 1,
                                         d->aliases[i], sizeof d->aliases[i], err);
        if (rc)
            return rc;
    }
    d->n_aliases = (int)n;
    return NB_OK;
}

void nb_deployment_air_free(nb_deployment *d)
{
    if (d->air) {
        nb_air_cfg_clear(d->air);
        free(d->air);
        d->air = NULL;
    }
}

/* The name of the backend that takes an "air" object, for messages. */
static const char *adapter_backend(void)
{
    for (size_t i = 0; nb_backend_at(i); i++)
        if (nb_backend_can(nb_backend_at(i), NB_BACKEND_ADAPTER))
            return nb_backend_at(i)->name;
    return "?";
}

/* An adapter backend's "air" object: required with it, refused without it. */
static nb_code check_air(nb_deployment *d, const nb_backend_ops *ops, json_object *air,
                         const char *what, const char *sep, nb_err *err)
{
    if (!nb_backend_can(ops, NB_BACKEND_ADAPTER)) {
        if (air)
            return nb_err_set(err, NB_EINVAL, "%s%sair: only for backend \"%s\"", what, sep,
                              adapter_backend());
        return NB_OK;
    }
    if (!air)
        return nb_err_set(err, NB_EINVAL, "%s%sair: required for backend \"%s\" (only a "
                          "deployments file can name its adapter)", what, sep, ops->name);
    char w[200];
    snprintf(w, sizeof w, "%s%sair", what, sep);
    if (!(d->air = malloc(sizeof *d->air)))
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    nb_code rc = nb_air_cfg_parse(air, w, d->air, err);
    if (rc) {
        free(d->air);
        d->air = NULL;
        return rc;
    }
    if (d->max_seq)
        d->air->max_seq = d->max_seq;
    return NB_OK;
}

/* What every entry must satisfy, however it was given (file entry or --deploy SPEC): a
 * known backend and dtype, exec commands exactly with backend "exec", and a name.  sep joins
 * what and the field in errors ("deployments[2].dtype", "--deploy 1 'x:q9': dtype"). */
static nb_code check_one(nb_deployment *d, const char *dtype, json_object *exec,
                         json_object *air, const char *what, const char *sep, nb_err *err)
{
    char field[200];
    const nb_backend_ops *ops;
    snprintf(field, sizeof field, "%s%s", what, sep);
    nb_code rc = nb_backend_lookup(d->backend, 0, 0, field, &ops, err);
    if (rc)
        return rc;
    /* A whole-job backend's commands come with it; the others run the engine's dtypes. */
    int is_exec = nb_backend_can(ops, NB_BACKEND_WHOLE_JOB);
    if (!is_exec) {
        nb_err e2;
        if (nb_dtype_parse(dtype, &d->dtype, &e2))
            return nb_err_set(err, NB_EINVAL, "%s%sdtype: %s", what, sep, e2.msg);
        if (exec)
            return nb_err_set(err, NB_EINVAL, "%s%sexec: only for backend \"exec\"", what, sep);
        if ((rc = check_air(d, ops, air, what, sep, err)))
            return rc;
    } else {
        if (air)
            return nb_err_set(err, NB_EINVAL, "%s%sair: only for backend \"%s\"", what, sep,
                              adapter_backend());
        if (!exec)
            return nb_err_set(err, NB_EINVAL, "%s%sexec: required for backend \"exec\" (only a "
                              "deployments file can give its commands)", what, sep);
        if ((rc = nb_exec_deploy_parse(exec, what, &d->exec, err)))
            return rc;
        snprintf(d->exec_dtype, sizeof d->exec_dtype, "%s", dtype);
    }
    if (!d->name[0])
        snprintf(d->name, sizeof d->name, "%.36s-%.12s-%.12s", d->model, d->backend,
                 nb_deployment_dtype(d));
    return NB_OK;
}

const char *nb_deployment_dtype(const nb_deployment *d)
{
    return d->exec_dtype[0] ? d->exec_dtype : nb_dtype_name(d->dtype);
}

/* One file entry; its fields through common/nb_json's readers ("what.key: must be ..."). */
static nb_code parse_one(json_object *o, const char *what, nb_deployment *d, nb_err *err)
{
    static const char *const known[] = {"name", "model", "backend", "dtype", "threads",
                                        "max_seq", "device", "exec", "air", "canonical",
                                        "aliases", NULL};
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "%s", nb_backend_default()->name);
    char dtype[sizeof d->exec_dtype] = "bf16"; /* the enum's, or an exec label: by backend */
    if (!json_object_is_type(o, json_type_object))
        return nb_err_set(err, NB_EINVAL, "%s: must be an object", what);
    json_object_object_foreach(o, key, v)
    {
        (void)v;
        int i = 0;
        while (known[i] && strcmp(key, known[i]))
            i++;
        if (!known[i])
            return nb_err_set(err, NB_EINVAL, "%s.%s: unknown key (expected name, model, "
                              "backend, dtype, threads, max_seq, device, exec, air, canonical, "
                              "aliases)", what, key);
    }
    struct { const char *key; char *dst; size_t cap; int required; } str[] = {
        {"name", d->name, sizeof d->name, 0}, {"model", d->model, sizeof d->model, 1},
        {"backend", d->backend, sizeof d->backend, 0}, {"dtype", dtype, sizeof dtype, 0},
        {"canonical", d->canonical, sizeof d->canonical, 0}};
    struct { const char *key; int64_t hi, v; } num[] = {
        {"threads", NB_JOB_THREADS_MAX, 0}, {"max_seq", NB_JOB_MAX_SEQ_MAX, 0},
        {"device", NB_JOB_DEVICE_MAX, 0}};
    nb_code rc = NB_OK;
    for (size_t i = 0; i < sizeof str / sizeof *str && !rc; i++)
        rc = nb_json_need_strcpy(o, what, str[i].key, str[i].required, 1, str[i].dst,
                                 str[i].cap, err);
    for (size_t i = 0; i < sizeof num / sizeof *num && !rc; i++)
        rc = nb_json_need_int(o, what, num[i].key, 0, 0, num[i].hi, 0, &num[i].v, err);
    json_object *aliases = nb_json_get(o, "aliases");
    if (!rc && aliases) {
        char w[160];
        snprintf(w, sizeof w, "%s.aliases", what);
        rc = parse_aliases(aliases, w, d, err);
    }
    if (rc)
        return rc;
    d->threads = (int)num[0].v;
    d->max_seq = (int)num[1].v;
    d->device = (unsigned)num[2].v;
    return check_one(d, dtype, nb_json_get(o, "exec"), nb_json_get(o, "air"), what, ".", err);
}

nb_code nb_deployments_parse(const char *json, size_t len, const char *what,
                                 nb_deployment **out, int *n_out, nb_err *err)
{
    *out = NULL;
    *n_out = 0;
    json_object *root;
    nb_code rc = nb_json_parse(json, len, what, &root, err);
    if (rc)
        return rc;
    json_object *arr = root;
    if (json_object_is_type(root, json_type_object) &&
        !json_object_object_get_ex(root, "deployments", &arr))
        arr = NULL;
    if (!arr || !json_object_is_type(arr, json_type_array)) {
        json_object_put(root);
        return nb_err_set(err, NB_EINVAL, "%s: expected {\"deployments\": [...]} or an array",
                          what);
    }
    size_t n = json_object_array_length(arr);
    if (!n || n > DEPLOYMENTS_MAX) {
        json_object_put(root);
        return nb_err_set(err, NB_EINVAL, "%s: %zu deployments, must be 1..%d", what, n,
                          DEPLOYMENTS_MAX);
    }
    nb_deployment *d = calloc(n, sizeof *d);
    if (!d) {
        json_object_put(root);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    int got = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char w[128];
        snprintf(w, sizeof w, "%.80s: deployments[%zu]", what, i);
        rc = parse_one(json_object_array_get_idx(arr, i), w, &d[i], err);
        if (rc == NB_EFORMAT) /* a field read by common/nb_json: a bad entry, as the others */
            rc = err ? (err->code = NB_EINVAL) : NB_EINVAL;
        if (!rc)
            got++;
        for (size_t j = 0; !rc && j < i; j++)
            if (!strcmp(d[j].name, d[i].name))
                rc = nb_err_set(err, NB_EINVAL, "%s.name '%s': used twice", w, d[i].name);
    }
    json_object_put(root);
    if (rc) {
        nb_deployments_free(d, got + 1 > (int)n ? (int)n : got + 1);
        return rc;
    }
    *out = d;
    *n_out = (int)n;
    return NB_OK;
}

nb_code nb_deployments_load(const char *path, nb_deployment **out, int *n,
                                nb_err *err)
{
    char *buf;
    size_t len;
    nb_code rc = nb_file_read(path, DEPLOYMENTS_FILE_MAX, &buf, &len, err);
    if (rc)
        return rc;
    rc = nb_deployments_parse(buf, len, path, out, n, err);
    free(buf);
    return rc;
}

/* One field of a SPEC into buf: empty keeps the default already there. */
static nb_code spec_field(const char *from, size_t len, const char *what, const char *field,
                          char *buf, size_t cap, nb_err *err)
{
    if (len >= cap)
        return nb_err_set(err, NB_EINVAL, "%s: %s is %zu bytes, the limit is %zu", what, field,
                          len, cap - 1);
    if (len)
        snprintf(buf, cap, "%.*s", (int)len, from);
    return NB_OK;
}

nb_code nb_deployment_parse_spec(const char *spec, const char *what, nb_deployment *d,
                                 nb_err *err)
{
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "%s", nb_backend_default()->name);
    char dtype[sizeof d->exec_dtype] = "bf16";
    const char *part[3] = {spec, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    int n = 1;
    for (const char *p = spec; *p; p++)
        if (*p == ':') {
            if (n == 3)
                return nb_err_set(err, NB_EINVAL, "%s: more than 3 fields, expected "
                                  "MODEL[:DTYPE[:BACKEND]]", what);
            part[n++] = p + 1;
        }
    for (int i = 0; i < n; i++)
        len[i] = i + 1 < n ? (size_t)(part[i + 1] - part[i] - 1) : strlen(part[i]);
    if (!len[0])
        return nb_err_set(err, NB_EINVAL, "%s: MODEL is empty, expected "
                          "MODEL[:DTYPE[:BACKEND]] (e.g. instruct:bf16, gemma3:native)", what);
    nb_code rc = spec_field(part[0], len[0], what, "MODEL", d->model, sizeof d->model, err);
    if (!rc && n > 1)
        rc = spec_field(part[1], len[1], what, "DTYPE", dtype, sizeof dtype, err);
    if (!rc && n > 2)
        rc = spec_field(part[2], len[2], what, "BACKEND", d->backend, sizeof d->backend, err);
    return rc ? rc : check_one(d, dtype, NULL, NULL, what, ": ", err);
}

nb_code nb_deployments_from_specs(const char *const *specs, int n, nb_deployment **out,
                                  int *n_out, nb_err *err)
{
    *out = NULL;
    *n_out = 0;
    if (n <= 0 || n > DEPLOYMENTS_MAX)
        return nb_err_set(err, NB_EINVAL, "--deploy: %d given, must be 1..%d", n,
                          DEPLOYMENTS_MAX);
    nb_deployment *d = calloc((size_t)n, sizeof *d);
    if (!d)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        char w[160];
        snprintf(w, sizeof w, "--deploy %d '%.100s'", i + 1, specs[i] ? specs[i] : "");
        nb_code rc = nb_deployment_parse_spec(specs[i] ? specs[i] : "", w, &d[i], err);
        for (int j = 0; !rc && j < i; j++)
            if (!strcmp(d[j].name, d[i].name))
                rc = nb_err_set(err, NB_EINVAL, "%s: the same deployment (%s) as --deploy %d",
                                w, d[i].name, j + 1);
        if (rc) {
            nb_deployments_free(d, n);
            return rc;
        }
    }
    *out = d;
    *n_out = n;
    return NB_OK;
}
