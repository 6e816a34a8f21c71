/* nb_executor: the resident deployment cache (LRU under a memory budget) and the executor
 * that turns one job into one JobResult, CPU engine or exec backend alike. */
#include "nb_executor.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_bench.h"
#include "nb_benchpb.h"
#include "nb_deploy.h"
#include "nb_diagnosis.h"
#include "nb_diagnosis_run.h"
#include "nb_exec.h"
#include "nb_exec_deploy.h"
#include "nb_file.h"
#include "nb_hash.h"
#include "nb_job.h"
#include "nb_jobpb.h"
#include "nb_json.h"
#include "nb_kernels.h"
#include "nb_lru.h"
#include "nb_preset.h"
#include "nb_probe.h"
#include "nb_report.h"
#include "nb_rpc.h"
#include "nb_runenv.h"
#include "nb_sha256.h"
#include "nb_time.h"
#include "nb_utf8.h"
#include "nb_verify.h"
#include "nb_verify_run.h"
#include "nb_verifypb.h"

#define LOG_MAX_BYTES (64 * 1024)
#define DEFAULT_BUDGET ((size_t)4 << 30)

/* ---- the context and its cache -------------------------------------------------------- */

typedef struct cache_entry {
    nb_deploy_spec spec;
    nb_deploy *d;
} cache_entry;

/* What was hashed for the advertisement, and the file's identity then: setup reuses the
 * digest while the file is unchanged instead of reading a 250 MB model a second time. */
typedef struct adv_cache {
    char digest[65];
    char stored_dtype[16]; /* nb_deploy_stored_dtype's name; "" = unknown or as declared */
    char hashed[1100]; /* the GGUF, or an HF directory's config.json */
    struct stat st;
    int tried;
} adv_cache;

struct nb_executor {
    nb_deployment *deps;
    adv_cache *adv;
    int n_deps;
    char board[128], board_type[64], refdir[1024], rundir[1024], reports_dir[1024];
    int client_paths; /* params reference may be a path: the client is this process */
    int threads;
    size_t budget;
    nb_lru *cache; /* of cache_entry, cost = nb_deploy_resident_bytes; created on the first setup */
    int setups;
};

nb_code nb_executor_new(const nb_executor_opts *o, nb_executor **out, nb_err *err)
{
    *out = NULL;
    nb_executor *c = calloc(1, sizeof *c);
    if (!c)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    c->n_deps = o->n_deployments > 0 ? o->n_deployments : 0;
    c->deps = calloc((size_t)(c->n_deps ? c->n_deps : 1), sizeof *c->deps);
    c->adv = calloc((size_t)(c->n_deps ? c->n_deps : 1), sizeof *c->adv);
    if (!c->deps || !c->adv) {
        nb_executor_free(c);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    for (int i = 0; i < c->n_deps; i++) {
        c->deps[i] = o->deployments[i];
        c->deps[i].exec = NULL;
        c->deps[i].air = NULL;
        nb_deployment *d = &c->deps[i];
        if (!d->backend[0]) /* filled in code (embedded mode) rather than from a file */
            snprintf(d->backend, sizeof d->backend, "%s", nb_backend_default()->name);
        /* filled in code: a whole-job backend's label defaults as a file's entry does */
        const nb_backend_ops *ops = nb_backend_find(d->backend);
        if (ops && nb_backend_can(ops, NB_BACKEND_WHOLE_JOB) && !d->exec_dtype[0])
            snprintf(d->exec_dtype, sizeof d->exec_dtype, "bf16");
        if (!d->name[0])
            snprintf(d->name, sizeof d->name, "%.36s-%.12s-%.12s", d->model, d->backend,
                     nb_deployment_dtype(d));
        nb_code rc = NB_OK;
        if (o->deployments[i].exec)
            rc = nb_exec_deploy_dup(o->deployments[i].exec, &c->deps[i].exec, err);
        if (!rc && o->deployments[i].air) {
            if (!(d->air = malloc(sizeof *d->air)))
                rc = nb_err_set(err, NB_ENOMEM, "out of memory");
            else if ((rc = nb_air_cfg_copy(d->air, o->deployments[i].air, err))) {
                free(d->air);
                d->air = NULL;
            }
        }
        if (rc) {
            nb_executor_free(c);
            return rc;
        }
    }
    snprintf(c->board, sizeof c->board, "%s", o->board && *o->board ? o->board : "local");
    snprintf(c->board_type, sizeof c->board_type, "%s", o->board_type ? o->board_type : "");
    snprintf(c->refdir, sizeof c->refdir, "%s", o->refdir ? o->refdir : "");
    c->client_paths = o->client_paths;
    snprintf(c->rundir, sizeof c->rundir, "%s", o->rundir && *o->rundir ? o->rundir : "/tmp");
    snprintf(c->reports_dir, sizeof c->reports_dir, "%s", o->reports_dir ? o->reports_dir : "");
    c->threads = o->threads;
    c->budget = o->mem_budget_bytes ? o->mem_budget_bytes : DEFAULT_BUDGET;
    *out = c;
    return NB_OK;
}

void nb_executor_free(nb_executor *c)
{
    if (!c)
        return;
    nb_lru_free(c->cache);
    for (int i = 0; i < c->n_deps; i++) {
        nb_exec_deploy_free(c->deps[i].exec);
        nb_deployment_air_free(&c->deps[i]);
    }
    free(c->deps);
    free(c->adv);
    free(c);
}

int nb_executor_release_devices(nb_executor *c)
{
    int holds = 0;
    for (int i = 0; i < c->n_deps && !holds; i++)
        holds = nb_backend_can(nb_backend_find(c->deps[i].backend), NB_BACKEND_ADAPTER);
    if (!holds || !c->cache)
        return 0;
    nb_executor_cache_stats st;
    nb_executor_stats(c, &st);
    nb_lru_free(c->cache); /* closes each deployment: an air host stops, its lock is freed */
    c->cache = NULL;       /* made again by the next setup */
    return st.resident;
}

void nb_executor_stats(const nb_executor *c, nb_executor_cache_stats *out)
{
    nb_lru_stats ls = {0};
    if (c->cache)
        nb_lru_get_stats(c->cache, &ls);
    out->resident = (int)ls.count;
    out->setups = c->setups;
    out->evictions = (int)ls.evicted;
    out->resident_bytes = ls.cost;
}

void nb_executor_backends(const nb_executor *c, const char **out, size_t cap, size_t *n)
{
    const nb_backend_ops *ops;
    *n = 0;
    for (size_t b = 0; (ops = nb_backend_at(b)); b++) {
        int used = 0;
        for (int i = 0; i < c->n_deps && !used; i++)
            used = nb_backend_find(c->deps[i].backend) == ops;
        if (used && *n < cap)
            out[(*n)++] = ops->name;
    }
}

/* The file nb_deploy digests for a model path: the GGUF, or an HF directory's config.json. */
static int digest_file(const char *path, char *p, size_t cap)
{
    struct stat st;
    if (stat(path, &st))
        return -1;
    snprintf(p, cap, S_ISDIR(st.st_mode) ? "%s/config.json" : "%s", path);
    return 0;
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* As nb_deploy computes it, with the identity of the file hashed (stat before and after:
 * a file rewritten while it was read keeps no digest). */
static void model_digest(const char *path, adv_cache *a)
{
    struct stat after;
    nb_err e;
    a->digest[0] = '\0';
    if (digest_file(path, a->hashed, sizeof a->hashed) || stat(a->hashed, &a->st))
        return;
    if (nb_sha256_file(a->hashed, a->digest, &e) || stat(a->hashed, &after) ||
        !same_file(&a->st, &after))
        a->digest[0] = '\0';
}

/* The advertisement's digest of model's file when that file has not changed since. */
static void known_digest(const nb_executor *c, const char *model, char out[65])
{
    char path[1024], preset[16], p[1100];
    struct stat st;
    nb_err e;
    out[0] = '\0';
    if (nb_deploy_resolve_model(model, path, sizeof path, preset, sizeof preset, &e) ||
        digest_file(path, p, sizeof p) || stat(p, &st))
        return;
    for (int i = 0; i < c->n_deps; i++)
        if (c->adv[i].digest[0] && !strcmp(c->adv[i].hashed, p) && same_file(&c->adv[i].st, &st)) {
            memcpy(out, c->adv[i].digest, 65);
            return;
        }
}

/* The deployments file's aliases, for the history's one identity per model. */
static int advertise_aliases(const nb_deployment *d, Npubench__Deployment *p)
{
    if (!d->n_aliases)
        return 0;
    if (!(p->aliases = calloc((size_t)d->n_aliases, sizeof *p->aliases)))
        return -1;
    for (int k = 0; k < d->n_aliases; k++)
        if (!(p->aliases[p->n_aliases++] = strdup(d->aliases[k])))
            return -1;
    return 0;
}

nb_code nb_executor_advertise(nb_executor *c, Npubench__Deployment ***out, size_t *n,
                             nb_err *err)
{
    *out = NULL;
    *n = 0;
    Npubench__Deployment **v = calloc((size_t)(c->n_deps ? c->n_deps : 1), sizeof *v);
    if (!v)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    for (int i = 0; i < c->n_deps; i++) {
        const nb_deployment *d = &c->deps[i];
        /* The digest lets the coordinator find (and ship) the HF trace; hashing a
         * model takes a moment, so it is done once per process. */
        const nb_backend_ops *ops = nb_backend_find(d->backend);
        if (!c->adv[i].tried && nb_backend_can(ops, NB_BACKEND_READS_MODEL)) {
            char path[1024], preset[16];
            nb_err e2;
            c->adv[i].tried = 1;
            if (nb_deploy_resolve_model(d->model, path, sizeof path, preset, sizeof preset,
                                        &e2) == NB_OK)
                model_digest(path, &c->adv[i]);
            /* q4_1 and native of one file are one deployment: listed under its one name */
            nb_dtype sd;
            if (!d->exec_dtype[0] &&
                nb_deploy_stored_dtype(d->model, d->backend, d->dtype, &sd, &e2) == NB_OK)
                snprintf(c->adv[i].stored_dtype, sizeof c->adv[i].stored_dtype, "%s",
                         nb_dtype_name(sd));
        }
        Npubench__Deployment *p = malloc(sizeof *p);
        if (!p) {
            for (int j = 0; j < i; j++)
                nb_jobpb_free(v[j]);
            free(v);
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        }
        npubench__deployment__init(p);
        v[i] = p;
        p->dtype_id = d->exec_dtype[0] ? NPUBENCH__DTYPE__DTYPE_UNSPECIFIED
                                       : (Npubench__Dtype)nb_dtype_to_pb(d->dtype);
        p->no_prompt_range = !nb_backend_can(ops, NB_BACKEND_PROMPT_RANGES) ||
                             (d->exec && !nb_exec_deploy_takes_range(d->exec));
        if (!(p->model = nb_jobpb_strdup(d->model)) || !(p->backend = nb_jobpb_strdup(d->backend)) ||
            !(p->dtype = nb_jobpb_strdup(nb_deployment_dtype(d))) ||
            !(p->digest = nb_jobpb_strdup(c->adv[i].digest)) ||
            !(p->canonical = nb_jobpb_strdup(d->canonical)) ||
            !(p->stored_dtype = nb_jobpb_strdup(c->adv[i].stored_dtype)) ||
            advertise_aliases(d, p)) {
            for (int j = 0; j <= i; j++)
                nb_jobpb_free(v[j]);
            free(v);
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        }
    }
    *out = v;
    *n = (size_t)c->n_deps;
    return NB_OK;
}

static nb_code resolve(nb_executor *c, const Npubench__JobSpec *s, const nb_deployment **out,
                       nb_err *err)
{
    const Npubench__DeploymentSelector *sel = s->selector;
    *out = NULL;
    nb_job_dep want = {.model = sel ? sel->model : NULL,
                       .backend = sel ? sel->backend : NULL,
                       .dtype = sel ? sel->dtype : NULL,
                       .dtype_id = sel ? (int)sel->dtype_id : 0};
    size_t nd = (size_t)(c->n_deps ? c->n_deps : 1);
    nb_job_dep *deps = calloc(nd, sizeof *deps);
    /* each entry's declared names ("aliases") as the pointers matching takes */
    const char **names = calloc(nd * NB_JOB_MODEL_ALIASES_MAX, sizeof *names);
    if (!deps || !names) {
        free(deps);
        free(names);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    for (int i = 0; i < c->n_deps; i++) {
        const nb_deployment *d = &c->deps[i];
        const char **al = names + (size_t)i * NB_JOB_MODEL_ALIASES_MAX;
        for (int a = 0; a < d->n_aliases && a < NB_JOB_MODEL_ALIASES_MAX; a++)
            al[a] = d->aliases[a];
        deps[i] = (nb_job_dep){d->model,     d->backend, nb_deployment_dtype(d),
                               d->name,      d->canonical, al,
                               (size_t)d->n_aliases,
                               d->exec_dtype[0] ? 0 : nb_dtype_to_pb(d->dtype)};
    }
    int best = nb_job_dep_pick(&want, deps, (size_t)c->n_deps, NULL);
    free(deps);
    free(names);
    if (best >= 0) {
        *out = &c->deps[best];
        return NB_OK;
    }
    char have[512] = "";
    size_t o = 0;
    for (int i = 0; i < c->n_deps && o < sizeof have - 1; i++)
        o += (size_t)snprintf(have + o, sizeof have - o, "%s%s (%s %s/%s)", i ? ", " : "",
                              c->deps[i].name, c->deps[i].model, c->deps[i].backend,
                              nb_deployment_dtype(&c->deps[i]));
    return nb_err_set(err, NB_ENOTFOUND,
                      "no deployment on this worker serves model '%s' backend '%s' dtype '%s'; "
                      "it serves: %s",
                      sel && sel->model ? sel->model : "", sel && sel->backend ? sel->backend : "",
                      sel && sel->dtype ? sel->dtype : "", c->n_deps ? have : "nothing");
}


static int spec_equal(const nb_deploy_spec *a, const nb_deploy_spec *b)
{
    return !strcmp(a->model, b->model) && !strcmp(a->backend, b->backend) &&
           a->dtype == b->dtype && a->threads == b->threads && a->max_seq == b->max_seq &&
           a->device == b->device && a->backend_cfg == b->backend_cfg;
}

static uint64_t spec_hash(const nb_deploy_spec *s)
{
    return nb_hash_str(s->model) ^ nb_hash_str(s->backend);
}

static int entry_match(const void *value, const void *key)
{
    return spec_equal(&((const cache_entry *)value)->spec, key);
}

static void entry_close(void *user, void *value)
{
    cache_entry *e = value;
    nb_deploy_close(e->d);
    free(e);
}

static int resident_count(const nb_executor *c)
{
    nb_executor_cache_stats st;
    nb_executor_stats(c, &st);
    return st.resident;
}

/* The resident deployment for spec, set up on a miss; least recently used ones are
 * closed while the total exceeds the budget (never the one just asked for). */
static nb_code cache_get(nb_executor *c, const nb_deploy_spec *spec, nb_deploy **out,
                         int *fresh, nb_err *err)
{
    *fresh = 0;
    nb_code rc;
    if (!c->cache) {
        nb_lru_opts lo = {.max_cost = c->budget, .match = entry_match, .drop = entry_close};
        if ((rc = nb_lru_new(&lo, &c->cache, err)))
            return rc;
    }
    nb_lru_node *n = nb_lru_find(c->cache, spec_hash(spec), spec);
    if (n) {
        nb_lru_touch(c->cache, n);
        *out = ((cache_entry *)nb_lru_value(n))->d;
        return NB_OK;
    }
    cache_entry *e = calloc(1, sizeof *e);
    if (!e)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    e->spec = *spec;
    known_digest(c, spec->model, e->spec.model_sha256);
    rc = nb_deploy_open(&e->spec, &e->d, err);
    c->setups++;
    /* Buffers are allocated but not touched yet: refusing now costs no resident memory. */
    size_t need = rc == NB_OK ? nb_deploy_resident_bytes(e->d) : 0;
    if (rc == NB_OK && need > c->budget) {
        rc = nb_err_set(err, NB_ENOMEM,
                        "deployment %s: needs %zu MiB (weights + KV cache for max_seq %d), "
                        "the worker's memory budget is %zu MiB (--mem-budget-mb)",
                        spec->model, need >> 20, spec->max_seq ? spec->max_seq : 2048,
                        c->budget >> 20);
        nb_deploy_close(e->d);
    } else if (rc == NB_OK && (rc = nb_lru_put(c->cache, spec_hash(spec), e, need, NULL,
                                        err)) != NB_OK)
        nb_deploy_close(e->d);
    if (rc) {
        free(e);
        return rc;
    }
    *out = e->d;
    *fresh = 1;
    return NB_OK;
}

/* ---- job log --------------------------------------------------------------------------- */

typedef struct job_run {
    nb_executor *ctx;
    const nb_executor_hooks *hooks;
    char *log;
    size_t log_len;
    int log_full;
    const char *unit; /* what progress counts: "prompt", "repetition" */
} job_run;

static void job_log(job_run *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void log_line(job_run *j, const char *text)
{
    char iso[32], line[1200];
    nb_time_iso(iso, nb_wall_ms());
    snprintf(line, sizeof line, "%s %s", iso, text);
    if (j->hooks && j->hooks->log)
        j->hooks->log(j->hooks->user, line);
    if (j->log_full || !j->log)
        return;
    size_t n = strlen(line);
    if (j->log_len + n + 2 > LOG_MAX_BYTES) {
        static const char cut[] = "... (log truncated)\n";
        if (j->log_len + sizeof cut <= LOG_MAX_BYTES + 1) {
            memcpy(j->log + j->log_len, cut, sizeof cut - 1);
            j->log_len += sizeof cut - 1;
        }
        j->log_full = 1;
        j->log[j->log_len] = '\0';
        return;
    }
    memcpy(j->log + j->log_len, line, n);
    j->log_len += n;
    j->log[j->log_len++] = '\n';
    j->log[j->log_len] = '\0';
}

static void job_log(job_run *j, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log_line(j, text);
}

static void exec_line(void *u, const char *line)
{
    job_run *j = u;
    job_log(j, "| %s", line);
}

static int exec_cancelled(void *u)
{
    job_run *j = u;
    return j->hooks && j->hooks->cancelled ? j->hooks->cancelled(j->hooks->user) : 0;
}

static void progress(job_run *j, int done, int total, const char *msg)
{
    if (j->hooks && j->hooks->progress)
        j->hooks->progress(j->hooks->user, done, total, msg);
}

static void step_progress(void *u, int done, int total, const char *msg)
{
    job_run *j = u;
    job_log(j, "%d/%d %s", done, total, msg);
    progress(j, done, total, msg);
}

static void step_tokens(void *u, int done, int total)
{
    job_run *j = u;
    if (j->hooks && j->hooks->tokens)
        j->hooks->tokens(j->hooks->user, j->unit, done, total);
}

/* ---- reports ---------------------------------------------------------------------------- */

/* Writes the report pair into dir (a scratch dir when none is configured) and moves
 * the JSON and Markdown texts into res. */
static nb_code attach_report(job_run *j, const nb_verify_result *vr, const nb_diagnosis_result *dr,
                             const nb_report_env *env, const char *kind,
                             Npubench__JobResult *res, nb_err *err)
{
    char scratch[1100] = "", path[1200];
    const char *dir = j->ctx->reports_dir;
    if (!*dir) {
        snprintf(scratch, sizeof scratch, "%s/npubench-report-XXXXXX", j->ctx->rundir);
        if (!mkdtemp(scratch))
            return nb_err_set(err, NB_EIO, "%s: cannot create a scratch directory: %s",
                              j->ctx->rundir, strerror(errno));
        dir = scratch;
    }
    nb_code rc = vr ? nb_report_write_verify(dir, vr, env, kind, path, sizeof path, err)
                    : nb_report_write_diagnosis(dir, dr, env, path, sizeof path, err);
    char md[1200];
    snprintf(md, sizeof md, "%.*s.md", (int)(strlen(path) > 5 ? strlen(path) - 5 : 0), path);
    if (!rc) {
        char *t;
        size_t len;
        if ((rc = nb_file_read(path, (size_t)64 << 20, &t, &len, err)) == NB_OK) {
            res->report_json = t;
            if ((rc = nb_file_read(md, (size_t)64 << 20, &t, &len, err)) == NB_OK)
                res->report_md = t;
        }
        if (!rc && !*scratch)
            job_log(j, "report: %s (+ .md)", path);
    }
    if (*scratch) {
        unlink(path);
        unlink(md);
        rmdir(scratch);
    }
    return rc;
}

/* The RUN/PROFILE report (nb_report_bench_json) as the result's report_json. */
static nb_code bench_report(const Npubench__JobResult *res, const char *kind,
                            const nb_report_env *env, Npubench__JobResult *out, nb_err *err)
{
    json_object *root = nb_report_bench_json(res, kind, env);
    const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    out->report_json = strdup(s ? s : "{}");
    json_object_put(root);
    return out->report_json ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory");
}

/* ---- running the kinds ----------------------------------------------------------------- */

/* A trace shipped with the lease, written once under rundir (named by its digest). */
static nb_code lease_trace(job_run *j, char *path, size_t cap, nb_err *err)
{
    const nb_executor_hooks *h = j->hooks;
    path[0] = '\0';
    if (!h || !h->reference_trace || !h->reference_trace_len)
        return NB_OK;
    char hex[65];
    nb_sha256_mem_hex(h->reference_trace, h->reference_trace_len, hex);
    if (h->reference_trace_sha256 && *h->reference_trace_sha256 &&
        strcasecmp(hex, h->reference_trace_sha256))
        return nb_err_set(err, NB_EMISMATCH,
                          "Lease.reference_trace: sha256 %.16s, the lease says %.16s", hex,
                          h->reference_trace_sha256);
    snprintf(path, cap, "%s/trace-%.16s.json", j->ctx->rundir, hex);
    if (nb_file_exists(path))
        return NB_OK;
    nb_code rc = nb_file_write(path, h->reference_trace, h->reference_trace_len, err);
    if (!rc)
        job_log(j, "reference trace from the coordinator: %s", path);
    return rc;
}

/* A report names the leased trace as the coordinator found it ("verify/references/..."),
 * not the scratch copy lease_trace wrote; its digest (the bytes') stays beside it. */
static void leased_trace_name(job_run *j, char *path, size_t cap)
{
    const char *name = j->hooks ? j->hooks->reference_trace_path : NULL;
    if (name && *name)
        snprintf(path, cap, "%s", name);
}

/* The prompt set of a verify job: "" = the preset's, a set named inside the prompts
 * directory, or the spec's explicit prompts written to a file under rundir (*temp = 1:
 * the caller deletes it after the job, or every job would leave its prompts behind). */
static nb_code prompts_path(job_run *j, const Npubench__JobSpec *s, char *buf, size_t cap,
                            int *temp, nb_err *err)
{
    buf[0] = '\0';
    *temp = 0;
    if (s->n_prompts) {
        size_t len = 0;
        for (size_t i = 0; i < s->n_prompts; i++)
            len += strlen(s->prompts[i]) + 1;
        char *text = malloc(len + 1), *p = text;
        if (!text)
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        for (size_t i = 0; i < s->n_prompts; i++)
            p += sprintf(p, "%s\n", s->prompts[i]);
        char hex[65];
        nb_sha256_mem_hex(text, len, hex);
        snprintf(buf, cap, "%s/prompts-%.16s.txt", j->ctx->rundir, hex);
        nb_code rc = nb_file_write(buf, text, len, err);
        free(text);
        *temp = rc == NB_OK;
        return rc;
    }
    const char *set = s->prompt_set;
    if (!set || !*set)
        return NB_OK; /* nb_verify picks the preset's */
    nb_code rc = nb_verify_prompt_set_path(NULL, set, buf, cap, err);
    /* missing, unreadable or not a regular file: one answer, so it tells nothing */
    if (!rc && !nb_file_readable(buf))
        rc = nb_err_set(err, NB_ENOTFOUND,
                        "JobSpec.prompt_set: no prompt set '%s' that this worker can read", set);
    return rc;
}

/* params reference: a trace file named inside the worker's reference directory; a path only
 * from a client in this very process (embedded mode), which could open it anyway. */
static nb_code reference_path(job_run *j, const Npubench__JobSpec *s, char *buf, size_t cap,
                              nb_err *err)
{
    buf[0] = '\0';
    nb_job_params jp;
    nb_job_params_read(s, &jp);
    const char *ref = jp.reference;
    if (!ref || !*ref)
        return NB_OK;
    if (j->ctx->client_paths) {
        snprintf(buf, cap, "%s", ref);
        return NB_OK;
    }
    if (!nb_file_plain_name(ref))
        return nb_err_set(err, NB_EINVAL,
                          "params reference: '%.64s' is not a trace name; name a file of the "
                          "worker's reference directory",
                          ref);
    snprintf(buf, cap, "%s/%s", j->ctx->refdir[0] ? j->ctx->refdir : nb_verify_default_refdir(),
             ref);
    if (!nb_file_readable(buf))
        return nb_err_set(err, NB_ENOTFOUND,
                          "params reference: no trace '%s' that this worker can read", ref);
    return NB_OK;
}

/* The cores this process may run on (affinity, cgroup cpusets), else the online count. */
static int usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Never more kernel threads than cores: `params threads=1024` on a 2-core board is clamped
 * (and logged) instead of starting 1024 threads that only fight over two cores. */
static int cap_threads(job_run *j, int want)
{
    int cores = usable_cores();
    if (want <= cores)
        return want;
    job_log(j, "threads=%d: clamped to %d, the cores this worker may use", want, cores);
    return cores;
}

static nb_code run_verify(job_run *j, nb_deploy *d, const Npubench__JobSpec *s, int full,
                          Npubench__JobResult *res, nb_err *err)
{
    char ppath[1100], trace[1200], ref[1200];
    int temp = 0;
    nb_code rc = prompts_path(j, s, ppath, sizeof ppath, &temp, err);
    if (!rc)
        rc = lease_trace(j, trace, sizeof trace, err);
    if (!rc)
        rc = reference_path(j, s, ref, sizeof ref, err);
    if (rc) {
        if (temp)
            unlink(ppath);
        return rc;
    }
    nb_verify_opts vo = {0};
    vo.prompts_file = ppath[0] ? ppath : NULL;
    vo.reference = ref[0] ? ref : trace[0] ? trace : NULL;
    vo.refdir = j->ctx->refdir[0] ? j->ctx->refdir : NULL;
    /* checked with the spec (nb_job): an unknown value never reaches here; the kind's
     * defaults are applied by the reader */
    nb_job_params jp;
    nb_job_params_read(s, &jp);
    vo.max_prompts = (int)jp.max_prompts;
    vo.n_tokens = (int)jp.n_tokens;
    vo.k = (int)jp.k;
    if (s->shard) {
        vo.first = s->shard->prompt_begin;
        vo.count = s->shard->prompt_end - s->shard->prompt_begin;
    }
    vo.localize = (nb_localize_when)jp.localize;
    vo.strict = jp.strict == 1;
    vo.prompts_sha256 = s->n_prompts ? jp.prompts_sha256 : NULL;
    vo.progress = step_progress;
    vo.progress_user = j;
    j->unit = "prompt";
    vo.on_token = (nb_token_hook){step_tokens, j};
    vo.cancelled = exec_cancelled;
    nb_verify_result vr;
    rc = nb_verify_run(d, &vo, &vr, err);
    if (temp)
        unlink(ppath);
    if (rc)
        return rc;
    if (!ref[0] && trace[0])
        leased_trace_name(j, vr.trace_path, sizeof vr.trace_path);
    job_log(j, "[verify] %s (%d/%d prompts pass; decode-path defects: %d%s; decode-path checks "
            "%.0f of %.0f ms)", vr.status == NB_GATE_PASS ? "PASS" : "FAIL", vr.n_pass, vr.n,
            vr.n_decode_faults, vr.strict ? ", --strict" : "", vr.dcheck_ms, vr.wall_ms);
    rc = nb_verifypb_verify_to_pb(&vr, res, err);
    if (!rc) {
        nb_report_env env;
        nb_runenv_report(d, j->ctx->board, &env);
        rc = attach_report(j, &vr, NULL, &env, nb_job_kind_name(s->kind), res, err);
    }
    nb_verify_result_free(&vr);
    return rc;
}

static nb_code run_diagnosis(job_run *j, nb_deploy *d, const Npubench__JobSpec *s,
                             Npubench__JobResult *res, nb_err *err)
{
    char trace[1200], ref[1200];
    nb_code rc = lease_trace(j, trace, sizeof trace, err);
    if (!rc)
        rc = reference_path(j, s, ref, sizeof ref, err);
    if (rc)
        return rc;
    nb_diagnosis_result dr;
    progress(j, 0, 1, "diagnosis");
    nb_cancel cancel = {exec_cancelled, j};
    rc = nb_diagnosis_run(d, s->prompt && *s->prompt ? s->prompt : NULL,
                          ref[0] ? ref : trace[0] ? trace : NULL,
                          j->ctx->refdir[0] ? j->ctx->refdir : NULL, &cancel, &dr, err);
    if (rc)
        return rc;
    if (!ref[0] && trace[0])
        leased_trace_name(j, dr.trace_path, sizeof dr.trace_path);
    progress(j, 1, 1, "diagnosis done");
    job_log(j, "[diagnosis] %d layers over %d positions", dr.n_layers, dr.n_pos);
    rc = nb_verifypb_diagnosis_to_pb(&dr, res, err);
    if (!rc) {
        nb_report_env env;
        nb_runenv_report(d, j->ctx->board, &env);
        rc = attach_report(j, NULL, &dr, &env, "diagnosis", res, err);
    }
    nb_diagnosis_result_free(&dr);
    return rc;
}

static nb_code run_bench(job_run *j, nb_deploy *d, const Npubench__JobSpec *s, int profile,
                         Npubench__JobResult *res, nb_err *err)
{
    nb_run_opts ro;
    nb_run_opts_default(&ro);
    ro.prompt = s->prompt && *s->prompt ? s->prompt : NULL;
    nb_job_params jp; /* the kind's defaults applied (job/nb_job.c) */
    nb_job_params_read(s, &jp);
    ro.n_tokens = (int)jp.n_tokens;
    ro.reps = (int)jp.reps;
    ro.warmup = (int)jp.warmup;
    ro.chat = (int)jp.chat; /* -1: the model's default */
    ro.stop_eog = !jp.ignore_eos;
    ro.cancel = (nb_cancel){exec_cancelled, j};
    ro.progress = step_progress; /* one step per timed repetition (it stayed at 0/N) */
    ro.progress_user = j;
    j->unit = "repetition";
    ro.on_token = (nb_token_hook){step_tokens, j};
    if (exec_cancelled(j))
        return nb_err_set(err, NB_ECANCELED, "cancelled before start");
    progress(j, 0, ro.reps, profile ? "profiling" : "running");
    nb_code rc;
    if (profile) {
        nb_profile_result p;
        if ((rc = nb_bench_profile(d, &ro, &p, err)))
            return rc;
        rc = nb_benchpb_profile_to_pb(&p, ro.warmup, res, err);
        nb_profile_result_free(&p);
    } else {
        nb_run_result r;
        if ((rc = nb_bench_run(d, &ro, &r, err)))
            return rc;
        rc = nb_benchpb_run_to_pb(&r, ro.warmup, &res->metrics, err);
        if (!rc)
            res->outcome = NPUBENCH__OUTCOME__PASS;
        nb_run_result_free(&r);
    }
    if (rc)
        return rc;
    progress(j, ro.reps, ro.reps, "done");
    job_log(j, "TTFT %.2f ms ± %.2f, %.2f tokens/s ± %.2f over %zu repetitions (+%d warm-up)",
            res->metrics->ttft_ms, res->metrics->ttft_ms_stddev, res->metrics->tps,
            res->metrics->tps_stddev, res->metrics->n_samples, ro.warmup);
    nb_report_env env;
    nb_runenv_report(d, j->ctx->board, &env);
    return bench_report(res, profile ? "profile" : "run", &env, res, err);
}

static nb_code fill_env_deploy(job_run *j, const nb_deploy *d, const nb_deployment *dep,
                               Npubench__JobResult *res, nb_err *err)
{
    nb_code rc = nb_runenv_pb_new(d, j->ctx->board, j->ctx->board_type, &res->environment, err);
    if (rc)
        return rc;
    nb_probe pr;
    nb_probe_read(&pr);
    if (nb_probe_env_add(&pr, res->environment))
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    if (d)
        return NB_OK;
    Npubench__Environment *e = res->environment;
    if (!(e->backend = nb_jobpb_strdup(dep->backend)) || !(e->dtype = nb_jobpb_strdup(nb_deployment_dtype(dep))) ||
        !(e->model = nb_jobpb_strdup(dep->model)))
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    return NB_OK;
}

/* One executor function per kind that opens a deployment (its descriptor is job/nb_job.c's;
 * health runs as a short verify). */
static nb_code exec_run(job_run *j, nb_deploy *d, const Npubench__JobSpec *s,
                        Npubench__JobResult *res, nb_err *err)
{
    return run_bench(j, d, s, 0, res, err);
}

static nb_code exec_profile(job_run *j, nb_deploy *d, const Npubench__JobSpec *s,
                            Npubench__JobResult *res, nb_err *err)
{
    return run_bench(j, d, s, 1, res, err);
}

static nb_code exec_verify(job_run *j, nb_deploy *d, const Npubench__JobSpec *s,
                           Npubench__JobResult *res, nb_err *err)
{
    return run_verify(j, d, s, 0, res, err);
}

static nb_code exec_verify_full(job_run *j, nb_deploy *d, const Npubench__JobSpec *s,
                                Npubench__JobResult *res, nb_err *err)
{
    return run_verify(j, d, s, 1, res, err);
}

static const struct {
    int kind;
    nb_code (*run)(job_run *, nb_deploy *, const Npubench__JobSpec *, Npubench__JobResult *,
                   nb_err *);
} executors[] = {
    {NPUBENCH__JOB_KIND__RUN, exec_run},
    {NPUBENCH__JOB_KIND__PROFILE, exec_profile},
    {NPUBENCH__JOB_KIND__VERIFY, exec_verify},
    {NPUBENCH__JOB_KIND__VERIFY_FULL, exec_verify_full},
    {NPUBENCH__JOB_KIND__DIAGNOSIS, run_diagnosis},
};

static nb_code execute(job_run *j, const Npubench__JobSpec *s, Npubench__JobResult *res,
                       nb_err *err)
{
    nb_code rc = nb_job_validate_spec(s, err);
    if (rc)
        return rc;
    if (s->kind == NPUBENCH__JOB_KIND__HEALTH) {
        /* LAVA's health job: what the device reports, then a short verify through it. */
        nb_probe pr;
        char line[1024];
        nb_probe_read(&pr);
        nb_probe_line(&pr, line, sizeof line);
        job_log(j, "health check: device probe: %s", line);
        Npubench__JobSpec v = *s;
        v.kind = NPUBENCH__JOB_KIND__VERIFY;
        v.max_prompts = 1;
        if (!v.n_tokens)
            v.n_tokens = 4;
        const nb_deployment *hd;
        if (resolve(j->ctx, &v, &hd, err) == NB_OK && hd->exec &&
            !nb_exec_deploy_supports(hd->exec, NPUBENCH__JOB_KIND__VERIFY)) {
            /* Nothing to verify with: the probe is all a check can do there. */
            job_log(j, "health check: %s has no verify command; the device probe is the check",
                    hd->name);
            res->outcome = NPUBENCH__OUTCOME__PASS;
            return fill_env_deploy(j, NULL, hd, res, err);
        }
        return execute(j, &v, res, err);
    }
    const nb_deployment *dep;
    if ((rc = resolve(j->ctx, s, &dep, err)))
        return rc;
    job_log(j, "%s on deployment %s (%s %s/%s)", nb_job_kind_name(s->kind), dep->name, dep->model,
            dep->backend, nb_deployment_dtype(dep));
    if (dep->exec) {
        if ((rc = fill_env_deploy(j, NULL, dep, res, err)))
            return rc;
        nb_exec_job_hooks eh = {exec_cancelled, exec_line, j};
        progress(j, 0, 1, "exec");
        rc = nb_exec_job(dep->exec, dep->model, dep->exec_dtype, s, &eh, res, err);
        if (!rc)
            progress(j, 1, 1, "exec done");
        return rc;
    }
    nb_deploy_spec ds;
    nb_deploy_spec_default(&ds);
    /* "base" and "instruct" share the GGUF but not the prompt template or set. */
    const char *selm = s->selector ? s->selector->model : NULL;
    const char *model = dep->model;
    if (nb_preset_model(selm) && nb_job_model_match(selm, dep->model, NULL) >= 2)
        model = selm;
    snprintf(ds.model, sizeof ds.model, "%s", model);
    snprintf(ds.backend, sizeof ds.backend, "%s", dep->backend);
    ds.dtype = dep->dtype; /* the enum the deployments file was read into */
    nb_job_params jp;
    nb_job_params_read(s, &jp);
    ds.threads = cap_threads(j, (int)nb_job_param_or(jp.threads, dep->threads ? dep->threads
                                                                             : j->ctx->threads));
    ds.max_seq = (int)nb_job_param_or(jp.max_seq, dep->max_seq);
    ds.device = (unsigned)nb_job_param_or(jp.device, dep->device);
    ds.backend_cfg = dep->air; /* the deployment's own: one resident host per entry */
    nb_deploy *d = NULL;
    int fresh = 0;
    if ((rc = cache_get(j->ctx, &ds, &d, &fresh, err)))
        return rc;
    if (fresh)
        job_log(j, "set up %s %s/%s in %.1f ms (resident from now on; %d resident)",
                d->model_name, ds.backend, nb_dtype_name(ds.dtype), d->setup_ms, resident_count(j->ctx));
    /* The kernel pool is one per process and a setup sizes it: a resident deployment reused
     * after another job's `threads` resized it must get its own count back, or one job's
     * parameters would leak into every later job on this worker. */
    else if ((rc = nb_kernels_init(ds.threads, err)))
        return rc;
    if ((rc = fill_env_deploy(j, d, dep, res, err)))
        return rc;
    /* a backend's own process (an air host) prints into this job's log while it runs */
    nb_deploy_set_job_hooks(d, exec_line, exec_cancelled, j);
    size_t e = 0;
    while (e < sizeof executors / sizeof *executors && executors[e].kind != (int)s->kind)
        e++;
    rc = e < sizeof executors / sizeof *executors
             ? executors[e].run(j, d, s, res, err)
             : nb_err_set(err, NB_EINTERNAL, "kind %d passed validation but has no executor",
                          (int)s->kind);
    nb_deploy_set_job_hooks(d, NULL, NULL, NULL);
    return rc;
}

nb_code nb_executor_run(nb_executor *c, const Npubench__JobSpec *spec, int64_t job_id,
                       const nb_executor_hooks *hooks, Npubench__JobResult **out, nb_err *err)
{
    *out = NULL;
    Npubench__JobResult *res = nb_jobpb_result_new();
    job_run j = {.ctx = c, .hooks = hooks, .log = malloc(LOG_MAX_BYTES + 1)};
    if (!res || !j.log) {
        free(j.log);
        nb_jobpb_free(res);
        return nb_err_set(err, NB_ENOMEM, "out of memory for the job result");
    }
    j.log[0] = '\0';
    res->job_id = job_id;
    res->started_unix_ms = nb_wall_ms();
    if (spec->shard) {
        if (!(res->shard = malloc(sizeof *res->shard))) {
            free(j.log);
            nb_jobpb_free(res);
            return nb_err_set(err, NB_ENOMEM, "out of memory for the job result");
        }
        *res->shard = *spec->shard;
    }
    nb_code rc = execute(&j, spec, res, err);
    res->finished_unix_ms = nb_wall_ms();
    if (rc) {
        job_log(&j, "error: %s", err->msg);
        res->status = (Npubench__StatusCode)nb_rpc_status_from_code(rc);
        res->outcome = NPUBENCH__OUTCOME__ERROR;
        char *m = nb_jobpb_strdup(err->msg);
        if (m) {
            if (res->status_message != protobuf_c_empty_string)
                free(res->status_message);
            res->status_message = m;
        }
    } else
        job_log(&j, "finished in %.1f s", (double)(res->finished_unix_ms - res->started_unix_ms) / 1000.0);
    res->log = j.log;
    *out = res;
    return rc;
}

