/* nb_sched: which worker may run which job — selectors vs registered deployments, boards
 * and tags — plus submission (validation, verify-full shards, matrix fan-out) and the
 * queued reasons `npubench jobs` shows. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nb_coord_int.h"
#include "nb_db_boards.h"
#include "nb_dtype.h"
#include "nb_file.h"
#include "nb_job.h"
#include "nb_prompts.h"
#include "nb_time.h"
#include "nb_verify.h"

/* ---- selectors ---- */

/* "<model or *>/<dtype or *>"; dtypes never contain '/', so the last one splits. */
static void split_pattern(const char *pat, char *model, size_t mcap, char *dtype, size_t dcap)
{
    const char *slash = pat ? strrchr(pat, '/') : NULL;
    if (!slash) {
        snprintf(model, mcap, "%s", pat && *pat ? pat : "*");
        snprintf(dtype, dcap, "*");
        return;
    }
    size_t n = (size_t)(slash - pat);
    snprintf(model, mcap, "%.*s", (int)n, pat);
    snprintf(dtype, dcap, "%s", slash[1] ? slash + 1 : "*");
}

/* The dtype a reason names: the selector's word, else its enum's name (a selector may give
 * the enum alone), else "*". For messages only; matching never reads it back. */
static const char *dtype_shown(const char *word, int dtype_id)
{
    nb_dtype d;
    if (strcmp(word, "*") || nb_dtype_from_pb(dtype_id, &d))
        return word;
    return nb_dtype_name(d);
}

static nb_code check_name(const char *field, const char *s, size_t max, nb_err *err)
{
    size_t n = strlen(s);
    if (n >= max)
        return nb_err_set(err, NB_EINVAL, "%s: %zu bytes, the limit is %zu", field, n, max - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == ',')
            return nb_err_set(err, NB_EINVAL,
                              "%s: '%s' contains a comma or a control character", field, s);
    return NB_OK;
}

nb_code nb_sched_selector(const Npubench__JobSpec *spec, sched_sel *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    const Npubench__DeploymentSelector *s = spec->selector;
    const char *model = s && *s->model ? s->model : "*";
    const char *dtype = s && *s->dtype ? s->dtype : "*";
    /* The enum the job is matched by, from the wire, else from the word once here (an older
     * client's): a canonical engine name only, so the enum decides exactly as the name did. */
    nb_dtype dt;
    int id = !s ? 0 : s->dtype_id ? (int)s->dtype_id : nb_dtype_pb_of_name(s->dtype);
    if (id && nb_dtype_from_pb(id, &dt))
        return nb_err_set(err, NB_EINVAL, "selector.dtype_id: %d is not a dtype this "
                          "coordinator knows", id);
    out->sel.dtype_id = id;
    nb_code rc;
    if ((rc = check_name("selector.model", model, NB_DB_NAME_MAX - 16, err)) ||
        (rc = check_name("selector.dtype", dtype, 16, err)))
        return rc;
    if (strchr(dtype, '/'))
        return nb_err_set(err, NB_EINVAL, "selector.dtype: '%s' contains '/'", dtype);
    snprintf(out->deployment, sizeof out->deployment, "%s/%s", model, dtype);
    if (s) {
        if ((rc = check_name("selector.backend", s->backend, NB_DB_NAME_MAX, err)) ||
            (rc = check_name("selector.board", s->board, NB_DB_NAME_MAX, err)))
            return rc;
        size_t len = 0;
        for (size_t i = 0; i < s->n_tags; i++) {
            if (!*s->tags[i])
                return nb_err_set(err, NB_EINVAL, "selector.tags[%zu]: empty tag", i);
            if ((rc = check_name("selector.tags", s->tags[i], 64, err)))
                return rc;
            int w = snprintf(out->tags + len, sizeof out->tags - len, "%s%s", i ? "," : "",
                             s->tags[i]);
            if (w < 0 || (size_t)w >= sizeof out->tags - len)
                return nb_err_set(err, NB_EINVAL, "selector.tags: more than %zu bytes together",
                                  sizeof out->tags - 1);
            len += (size_t)w;
        }
        out->sel.backend = s->backend;
        out->sel.board = s->board;
    }
    out->sel.deployment = out->deployment;
    out->sel.tags = out->tags;
    return NB_OK;
}

static int dep_field_any(const char *s)
{
    return !s || !*s || !strcmp(s, "*");
}

static int has_tag(const Npubench__WorkerInfo *w, const char *tag)
{
    for (size_t i = 0; i < w->n_tags; i++)
        if (!strcmp(w->tags[i], tag))
            return 1;
    return 0;
}

static void served_list(const Npubench__WorkerInfo *w, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < w->n_deployments && len < cap; i++) {
        const Npubench__Deployment *d = w->deployments[i];
        int n = snprintf(buf + len, cap - len, "%s%s %s/%s", i ? ", " : "",
                         dep_field_any(d->model) ? "*" : d->model,
                         dep_field_any(d->backend) ? "*" : d->backend,
                         dep_field_any(d->dtype) ? "*" : d->dtype);
        if (n < 0)
            break;
        len += (size_t)n;
    }
    if (!w->n_deployments)
        snprintf(buf, cap, "nothing");
}

static int info_has_tag(const void *user, const char *tag)
{
    return has_tag(user, tag);
}

int nb_sched_worker_serves(const Npubench__WorkerInfo *w, const char *worker_id,
                           const char *backend, const char *board, const char *deployment,
                           int dtype_id, const char *tags, const char *pin, char *why,
                           size_t why_cap, int *dep_out)
{
    char dummy[1];
    if (!why) {
        why = dummy;
        why_cap = sizeof dummy;
    }
    if (dep_out)
        *dep_out = -1;
    const nb_job_place p = {pin, board, NULL, tags};
    const nb_job_host h = {worker_id, w->board_name, w->board_type, info_has_tag, w};
    if (!nb_job_place_fits(&p, &h, why, why_cap))
        return 0;
    char model[NB_DB_NAME_MAX], dtype[32];
    split_pattern(deployment, model, sizeof model, dtype, sizeof dtype);
    nb_job_dep want = {.model = model, .backend = backend, .dtype = dtype, .dtype_id = dtype_id},
               deps[256];
    size_t n = w->n_deployments < 256 ? w->n_deployments : 256; /* Register's limit */
    for (size_t i = 0; i < n; i++)
        deps[i] = (nb_job_dep){w->deployments[i]->model,
                               w->deployments[i]->backend,
                               w->deployments[i]->dtype,
                               NULL,
                               w->deployments[i]->canonical,
                               (const char *const *)w->deployments[i]->aliases,
                               w->deployments[i]->n_aliases,
                               (int)w->deployments[i]->dtype_id};
    int i = nb_job_dep_pick(&want, deps, n, NULL);
    if (i >= 0) {
        if (dep_out)
            *dep_out = i;
        return 1;
    }
    char served[256];
    served_list(w, served, sizeof served);
    const char *shown = dtype_shown(dtype, dtype_id);
    snprintf(why, why_cap, "no worker serves model '%s'%s%s%s%s; %s serves %s", model,
             strcmp(shown, "*") ? " dtype " : "", strcmp(shown, "*") ? shown : "",
             backend && *backend ? " on backend " : "", backend && *backend ? backend : "",
             worker_id, served);
    return 0;
}

int nb_sched_pred(const nb_db_job *job, void *ud)
{
    const Npubench__WorkerInfo *w = ud;
    int dep = -1;
    if (!nb_sched_worker_serves(w, w->worker_id, job->sel_backend, job->sel_board,
                                job->sel_deployment, job->sel_dtype_id, job->sel_tags,
                                job->sel_worker, NULL, 0, &dep))
        return 0;
    /* A prompt-range shard run whole would verify every prompt under a shard's name. */
    return !nb_job_kind_is_shard(job->kind) || dep < 0 ||
           !w->deployments[dep]->no_prompt_range;
}

/* Joins items into a comma list that fits cap (whole items only). */
static void join_list(char *out, size_t cap, const char *const *items, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!items[i] || !*items[i] || nb_db_list_has(out, items[i]))
            continue;
        size_t need = strlen(items[i]) + (len ? 1 : 0);
        if (len + need >= cap)
            break;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", items[i]);
    }
}

void nb_sched_db_worker(const Npubench__WorkerInfo *w, nb_db_worker *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", w->worker_id);
    snprintf(out->board_name, sizeof out->board_name, "%s", w->board_name);
    snprintf(out->board_type, sizeof out->board_type, "%s", w->board_type);
    snprintf(out->host, sizeof out->host, "%s", w->host);
    snprintf(out->version, sizeof out->version, "%s", w->version);
    snprintf(out->device_id, sizeof out->device_id, "%s", w->device_id);
    join_list(out->tags, sizeof out->tags, (const char *const *)w->tags, w->n_tags);
    const char *b[64];
    size_t nb = 0;
    for (size_t i = 0; i < w->n_backends && nb < 64; i++)
        b[nb++] = w->backends[i];
    for (size_t i = 0; i < w->n_deployments && nb < 64; i++)
        b[nb++] = w->deployments[i]->backend;
    join_list(out->backends, sizeof out->backends, b, nb);
    /* The db matches deployments exactly; nb_sched_pred does the real match. */
    snprintf(out->deployments, sizeof out->deployments, "*");
}

/* ---- prompt sets ---- */

int nb_sched_prompt_set(const char *root, const Npubench__JobSpec *spec, int *n, char sha[65],
                        char *path, size_t path_cap)
{
    *n = 0;
    sha[0] = '\0';
    path[0] = '\0';
    if (spec->n_prompts) {
        *n = (int)spec->n_prompts;
    } else {
        const char *set = spec->prompt_set;
        const char *model = spec->selector ? spec->selector->model : "";
        if (!*set)
            set = nb_verify_preset_set(model);
        /* Only names, only inside the root: what a client names is never opened
         * elsewhere, and reading it cannot block (nb_file_read). */
        nb_prompts ps;
        nb_err e;
        if (nb_verify_prompt_set_path(root, set, path, path_cap, &e) ||
            !nb_file_readable(path) || nb_prompts_load(path, &ps, &e) != NB_OK)
            return 0;
        *n = ps.n;
        memcpy(sha, ps.sha256, 65);
        nb_prompts_free(&ps);
    }
    if (spec->max_prompts > 0 && spec->max_prompts < *n)
        *n = spec->max_prompts;
    return *n > 0;
}

/* ---- the pool of workers as scheduling sees it ---- */

typedef struct pool_worker {
    Npubench__WorkerInfo *info; /* NULL: known to the db only (not re-registered yet) */
    nb_db_worker db;
    int busy;
    const char *held; /* why its board takes nothing now ("drained", ...); NULL = it may */
} pool_worker;

typedef struct pool {
    pool_worker *w;
    size_t n;
} pool;

static void pool_free(pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        nb_wire_free(p->w[i].info);
    free(p->w);
    p->w = NULL;
    p->n = 0;
}

static nb_code pool_load(nb_coord *c, pool *p, nb_err *err)
{
    memset(p, 0, sizeof *p);
    nb_db_worker *dbw = NULL;
    size_t ndb = 0;
    nb_code rc = nb_db_worker_list(c->db, &dbw, &ndb, err);
    if (rc)
        return rc;
    nb_db_job *busy = NULL;
    size_t nbusy = 0;
    nb_db_job_filter f = {.states = NB_JOB_STATE_BIT(NB_JOB_LEASED) |
                                    NB_JOB_STATE_BIT(NB_JOB_RUNNING),
                          .limit = 10000};
    if ((rc = nb_db_job_list(c->db, &f, &busy, &nbusy, err))) {
        free(dbw);
        return rc;
    }
    p->w = calloc(ndb ? ndb : 1, sizeof *p->w);
    if (!p->w) {
        free(dbw);
        nb_db_job_list_free(busy, nbusy);
        return nb_err_set(err, NB_ENOMEM, "scheduler: out of memory");
    }
    for (size_t i = 0; i < ndb; i++) {
        pool_worker *pw = &p->w[p->n++];
        pw->db = dbw[i];
        pw->info = nb_coord_reg_info(c, dbw[i].id);
        nb_db_board b;
        nb_err be;
        if (dbw[i].board_name[0] && nb_db_board_get(c->db, dbw[i].board_name, &b, &be) == NB_OK)
            pw->held = b.drained                       ? "drained"
                       : b.health == NB_HEALTH_FAILED ? "quarantined (failed its health check)"
                                                       : NULL;
        for (size_t j = 0; j < nbusy; j++)
            if (!strcmp(busy[j].leased_worker, dbw[i].id))
                pw->busy = 1;
    }
    free(dbw);
    nb_db_job_list_free(busy, nbusy);
    return NB_OK;
}

/* ---- submission ---- */

/* A selector no registered deployment can ever serve (by model, backend and dtype, whatever
 * the workers' liveness, boards or tags) is refused now, naming what is served, instead of
 * waiting in the queue until it expires. Nothing is refused before any worker registered. */
static nb_code check_servable(nb_coord *c, const sched_sel *ss, nb_err *err)
{
    pool p;
    nb_code rc = pool_load(c, &p, err);
    if (rc)
        return rc;
    char known[NB_DB_MSG_MAX] = "";
    size_t kl = 0;
    int registered = 0, served = 0;
    for (size_t i = 0; i < p.n && !served; i++) {
        const Npubench__WorkerInfo *w = p.w[i].info;
        if (!w)
            continue;
        registered = 1;
        served = nb_sched_worker_serves(w, p.w[i].db.id, ss->sel.backend, NULL,
                                        ss->sel.deployment, ss->sel.dtype_id, NULL, NULL,
                                        NULL, 0, NULL);
        for (size_t k = 0; k < w->n_deployments && kl + 1 < sizeof known; k++) {
            const Npubench__Deployment *d = w->deployments[k];
            char one[NB_DB_NAME_MAX * 2];
            snprintf(one, sizeof one, "%s %s/%s", d->model, d->backend, d->dtype);
            if (strstr(known, one))
                continue;
            kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s", kl ? ", " : "", one);
            for (size_t a = 0; a < d->n_aliases && kl + 1 < sizeof known; a++)
                kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s", a ? ", " : " (also ",
                                       d->aliases[a]);
            if (d->n_aliases && kl + 1 < sizeof known)
                kl += (size_t)snprintf(known + kl, sizeof known - kl, ")");
        }
    }
    pool_free(&p);
    if (!registered || served)
        return NB_OK;
    char model[NB_DB_NAME_MAX], dtype[32];
    split_pattern(ss->sel.deployment, model, sizeof model, dtype, sizeof dtype);
    const char *shown = dtype_shown(dtype, ss->sel.dtype_id);
    return nb_err_set(err, NB_ENOTFOUND,
                      "selector model '%s'%s%s%s%s: no registered worker serves it, so it "
                      "would wait until it expires; served: %s",
                      model, strcmp(shown, "*") ? " dtype " : "", strcmp(shown, "*") ? shown : "",
                      ss->sel.backend && *ss->sel.backend ? " backend " : "",
                      ss->sel.backend ? ss->sel.backend : "", known);
}

static nb_code pack_spec(const Npubench__JobSpec *spec, uint8_t **pb, size_t *len, nb_err *err)
{
    nb_code rc = nb_wire_pack(spec, pb, len, err);
    if (!rc && *len > NB_DB_SPEC_MAX)
        rc = nb_err_set(err, NB_EINVAL, "job spec: %zu bytes packed, the limit is %u", *len,
                        NB_DB_SPEC_MAX);
    return rc;
}

typedef struct child_plan {
    uint8_t *spec;
    size_t len;
    char board[NB_DB_NAME_MAX]; /* matrix: the board it is pinned to */
    const char *kind;
} child_plan;

/* A request id names one submission: job id was enqueued under it, and spec must be the
 * one it was enqueued with (else the reuse is refused, naming the id: a silent answer with
 * the old job would run something the client did not ask for). */
static nb_code same_request(nb_coord *c, const char *request_id, int64_t id,
                            const Npubench__JobSpec *spec, nb_err *err)
{
    nb_db_job j;
    nb_code rc = nb_db_job_get(c->db, id, &j, err);
    if (rc)
        return rc;
    uint8_t *pb = NULL;
    size_t len = 0;
    if (!(rc = nb_wire_pack(spec, &pb, &len, err)) &&
        (j.spec_format != NB_SPEC_PROTO || j.spec_len != len || memcmp(j.spec, pb, len)))
        rc = nb_err_set(err, NB_EINVAL,
                        "SubmitJobRequest.request_id: '%s' was already used for job %lld with a "
                        "different spec; a request id names one submission, give a new one",
                        request_id, (long long)id);
    free(pb);
    nb_db_job_free(&j);
    return rc;
}

static nb_code existing_ids(nb_coord *c, int64_t id, int64_t **ids, size_t *n, nb_err *err)
{
    nb_db_job *kids = NULL;
    size_t nk = 0;
    nb_db_job_filter f = {.parent_id = id, .limit = 10000, .oldest_first = 1};
    nb_code rc = nb_db_job_list(c->db, &f, &kids, &nk, err);
    if (rc)
        return rc;
    *ids = malloc((nk + 1) * sizeof **ids);
    if (!*ids) {
        nb_db_job_list_free(kids, nk);
        return nb_err_set(err, NB_ENOMEM, "submit: out of memory");
    }
    (*ids)[0] = id;
    for (size_t i = 0; i < nk; i++)
        (*ids)[i + 1] = kids[i].id;
    *n = nk + 1;
    nb_db_job_list_free(kids, nk);
    return NB_OK;
}

/* A board a matrix left out, and why ("drained", "quarantined (...)"). */
typedef struct left_out {
    char board[NB_DB_NAME_MAX];
    char why[64];
} left_out;

/* Matrix: one child per board among the live workers that serve spec; boards that take no
 * work now (drained, quarantined) into left (room for as many as workers), not planned. */
static nb_code plan_matrix(nb_coord *c, const Npubench__JobSpec *spec, const sched_sel *ss,
                           child_plan **plans, size_t *np, left_out **left_out_p,
                           size_t *n_left, nb_err *err)
{
    pool p;
    *n_left = 0;
    *left_out_p = NULL;
    nb_code rc = pool_load(c, &p, err);
    if (rc)
        return rc;
    left_out *left = *left_out_p = calloc(p.n ? p.n : 1, sizeof *left);
    if (!left) {
        pool_free(&p);
        return nb_err_set(err, NB_ENOMEM, "submit: out of memory");
    }
    *plans = calloc(p.n ? p.n : 1, sizeof **plans);
    *np = 0;
    if (!*plans) {
        pool_free(&p);
        return nb_err_set(err, NB_ENOMEM, "submit: out of memory");
    }
    char why[NB_DB_MSG_MAX] = "no worker is registered";
    Npubench__JobSpec child = *spec;
    Npubench__DeploymentSelector sel = NPUBENCH__DEPLOYMENT_SELECTOR__INIT;
    if (spec->selector)
        sel = *spec->selector;
    child.selector = &sel;
    child.matrix = 0;
    for (size_t i = 0; i < p.n && !rc; i++) {
        pool_worker *w = &p.w[i];
        if (w->db.state != NB_WORKER_ALIVE || !w->info) {
            snprintf(why, sizeof why, "worker %s is %s", w->db.id,
                     w->info ? nb_db_worker_state_name(w->db.state) : "not re-registered");
            continue;
        }
        if (!nb_sched_worker_serves(w->info, w->db.id, ss->sel.backend, ss->sel.board,
                                    ss->deployment, ss->sel.dtype_id, ss->tags, NULL, why,
                                    sizeof why, NULL))
            continue;
        int dup = 0;
        for (size_t k = 0; k < *np; k++)
            dup |= !strcmp((*plans)[k].board, w->info->board_name);
        for (size_t k = 0; k < *n_left; k++)
            dup |= !strcmp(left[k].board, w->info->board_name);
        if (dup)
            continue;
        if (w->held) {
            /* A drained or quarantined board takes nothing but its health check: its cell
             * would wait out the caller's --timeout and hide the other boards' results. It
             * is left out, and the group's log says which and why. */
            if (*n_left < p.n) {
                snprintf(left[*n_left].board, sizeof left[*n_left].board, "%s",
                         w->info->board_name);
                snprintf(left[*n_left].why, sizeof left[*n_left].why, "%s", w->held);
                (*n_left)++;
            }
            continue;
        }
        child_plan *cp = &(*plans)[(*np)++];
        snprintf(cp->board, sizeof cp->board, "%s", w->info->board_name);
        sel.board = cp->board;
        cp->kind = nb_job_kind_name(spec->kind);
        rc = pack_spec(&child, &cp->spec, &cp->len, err);
    }
    pool_free(&p);
    if (!rc && *np == 0 && *n_left) /* the boards that would serve it, not the others */
        rc = nb_err_set(err, NB_ENOTFOUND,
                        "matrix: no board can take it now: board %s is %s%s", left[0].board,
                        left[0].why, *n_left > 1 ? " (and others held likewise)" : "");
    else if (!rc && *np == 0)
        rc = nb_err_set(err, NB_ENOTFOUND, "matrix: no live worker matches the selector (%s)",
                        why);
    return rc;
}

/* Verify-full shards: how many idle live workers serve spec, and whether every live one
 * that does can run a prompt range (*ranges_ok): one that cannot (an exec deployment
 * driving mlir-air's verify runner) makes verify-full one job. */
static int idle_matching(nb_coord *c, const sched_sel *ss, int *ranges_ok)
{
    pool p;
    nb_err e;
    *ranges_ok = 0;
    if (pool_load(c, &p, &e))
        return 0;
    int n = 0;
    *ranges_ok = 1;
    for (size_t i = 0; i < p.n; i++) {
        pool_worker *w = &p.w[i];
        int dep = -1;
        if (w->db.state != NB_WORKER_ALIVE || !w->info ||
            !nb_sched_worker_serves(w->info, w->db.id, ss->sel.backend, ss->sel.board,
                                    ss->deployment, ss->sel.dtype_id, ss->tags, NULL, NULL, 0,
                                    &dep))
            continue;
        n += !w->busy;
        if (dep >= 0 && w->info->deployments[dep]->no_prompt_range)
            *ranges_ok = 0;
    }
    pool_free(&p);
    return n;
}

static nb_code plan_shards(nb_coord *c, const Npubench__JobSpec *spec, int want,
                           child_plan **plans, size_t *np, nb_err *err)
{
    *plans = NULL;
    *np = 0;
    int P;
    char sha[65], path[1024];
    if (!nb_sched_prompt_set(c->o.prompts_dir, spec, &P, sha, path, sizeof path))
        return NB_OK; /* the set cannot be read here: the worker runs it whole */
    int S = want;
    if (S > P)
        S = P;
    if (S > c->o.max_shards)
        S = c->o.max_shards;
    if (S < 2)
        return NB_OK;
    *plans = calloc((size_t)S, sizeof **plans);
    if (!*plans)
        return nb_err_set(err, NB_ENOMEM, "submit: out of memory");
    Npubench__JobSpec child = *spec;
    Npubench__Shard sh = NPUBENCH__SHARD__INIT;
    child.shard = &sh;
    nb_code rc = NB_OK;
    for (int i = 0; i < S && !rc; i++) {
        sh.index = i;
        sh.count = S;
        sh.prompt_begin = (int)((long)P * i / S);
        sh.prompt_end = (int)((long)P * (i + 1) / S);
        child_plan *cp = &(*plans)[(*np)++];
        cp->kind = nb_job_kind_desc_of(spec->kind)->shard;
        rc = pack_spec(&child, &cp->spec, &cp->len, err);
    }
    return rc;
}

static void plans_free(child_plan *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++)
        free(p[i].spec);
    free(p);
}

/* How long after its submission a job expires in the queue: its own expiry, else the
 * coordinator's default; 0 = never. */
static int64_t expiry_of(const nb_coord *c, const Npubench__JobSpec *spec)
{
    int64_t after = spec->expire_after_ms ? spec->expire_after_ms : c->o.expire_after_ms;
    return after > 0 ? after : 0;
}

nb_code nb_sched_submit(nb_coord *c, const Npubench__SubmitJobRequest *req, int64_t **ids,
                        size_t *n, int *duplicate, nb_err *err)
{
    *ids = NULL;
    *n = 0;
    *duplicate = 0;
    const Npubench__JobSpec *spec = req->spec;
    if (!spec)
        return nb_err_set(err, NB_EINVAL, "SubmitJobRequest.spec: required");
    nb_code rc = check_name("request_id", req->request_id, NB_DB_NAME_MAX, err);
    if (rc)
        return rc;
    if (req->shards < 0 || req->shards > NB_JOB_SHARDS_MAX)
        return nb_err_set(err, NB_EINVAL, "shards: %d is outside 0..%d", req->shards, NB_JOB_SHARDS_MAX);
    if ((rc = nb_job_validate_spec(spec, err)))
        return rc;
    if (req->shards > 1 && (spec->kind != NPUBENCH__JOB_KIND__VERIFY_FULL || spec->shard))
        return nb_err_set(err, NB_EINVAL,
                          "shards: only an unsharded VERIFY_FULL job can be split (kind %s)",
                          nb_job_kind_name(spec->kind));
    sched_sel ss;
    if ((rc = nb_sched_selector(spec, &ss, err)) || (rc = check_servable(c, &ss, err)))
        return rc;
    if (*req->request_id) {
        int64_t id;
        if (nb_db_job_find_request(c->db, req->request_id, &id, err) == NB_OK) {
            if ((rc = same_request(c, req->request_id, id, spec, err)))
                return rc;
            *duplicate = 1;
            return existing_ids(c, id, ids, n, err);
        }
    }

    child_plan *plans = NULL;
    size_t np = 0, n_left = 0;
    left_out *left = NULL;
    const char *group_kind = NULL;
    if (spec->matrix) {
        if ((rc = plan_matrix(c, spec, &ss, &plans, &np, &left, &n_left, err)))
            goto out;
        group_kind = NB_JOB_GROUP_MATRIX;
    } else if (spec->kind == NPUBENCH__JOB_KIND__VERIFY_FULL && !spec->shard) {
        int ranges_ok;
        int idle = idle_matching(c, &ss, &ranges_ok);
        int want = !ranges_ok ? 1 : req->shards > 0 ? req->shards : idle;
        if ((rc = plan_shards(c, spec, want, &plans, &np, err)))
            goto out;
        group_kind = nb_job_kind_name(NPUBENCH__JOB_KIND__VERIFY_FULL);
    }
    uint8_t *pb;
    size_t len;
    if ((rc = pack_spec(spec, &pb, &len, err)))
        goto out;
    nb_db_job_new top = {
        .request_id = req->request_id,
        .kind = np ? group_kind : nb_job_kind_name(spec->kind),
        .spec = pb,
        .spec_len = len,
        .spec_format = NB_SPEC_PROTO,
        .sel = ss.sel,
        .priority = spec->priority,
        .max_attempts = c->o.max_attempts,
        .is_group = np > 0,
        .expire_after_ms = expiry_of(c, spec),
    };
    *ids = malloc((np + 1) * sizeof **ids);
    if (!*ids) {
        free(pb);
        rc = nb_err_set(err, NB_ENOMEM, "submit: out of memory");
        goto out;
    }
    int existed = 0;
    /* The ack to the client comes after this commit: an acknowledged job is
     * in the database, children included. */
    if ((rc = nb_db_begin(c->db, err))) {
        free(pb);
        goto out;
    }
    rc = nb_db_job_enqueue(c->db, &top, &(*ids)[0], &existed, err);
    free(pb);
    for (size_t i = 0; i < np && !rc && !existed; i++) {
        nb_db_job_new kid = top;
        kid.request_id = NULL;
        kid.kind = plans[i].kind;
        kid.spec = plans[i].spec;
        kid.spec_len = plans[i].len;
        kid.parent_id = (*ids)[0];
        kid.is_group = 0;
        kid.expire_after_ms = 0; /* the group's expiry covers its children */
        if (plans[i].board[0])
            kid.sel.board = plans[i].board;
        rc = nb_db_job_enqueue(c->db, &kid, &(*ids)[i + 1], NULL, err);
    }
    if (rc || existed) {
        nb_db_rollback(c->db);
        int64_t first = (*ids)[0];
        free(*ids);
        *ids = NULL;
        if (!rc) {
            *duplicate = 1;
            rc = existing_ids(c, first, ids, n, err);
        }
        goto out;
    }
    if ((rc = nb_db_commit(c->db, err))) {
        free(*ids);
        *ids = NULL;
        goto out;
    }
    *n = np + 1;
    nb_coord_stat_add(c, &c->stats.submitted, 1);
    char extra[64] = "";
    if (np)
        snprintf(extra, sizeof extra, " as %zu %s", np,
                 spec->matrix ? "board jobs" : "prompt-range shards");
    nb_coord_log(c, "job %lld submitted: %s %s%s", (long long)(*ids)[0],
                 nb_job_kind_name(spec->kind), ss.deployment, extra);
    for (size_t i = 0; i < n_left; i++) {
        char line[NB_DB_MSG_MAX];
        nb_err le;
        snprintf(line, sizeof line, "matrix: board %s left out: %s (no cell; undrain it or let "
                 "its health check pass)", left[i].board, left[i].why);
        nb_db_job_append_log(c->db, (*ids)[0], line, &le);
        nb_coord_log(c, "job %lld: %s", (long long)(*ids)[0], line);
    }
    nb_coord_changed(c, (*ids)[0], 0);
    nb_coord_queue_changed(c);
out:
    plans_free(plans, np);
    free(left);
    return rc;
}

/* ---- queue expiry ---- */

void nb_sched_expire(nb_coord *c)
{
    /* An expiry is honoured within a tenth of a second; the sweeper runs more often. */
    int64_t now = nb_wall_ms();
    if (now < c->next_expire_ms)
        return;
    c->next_expire_ms = now + 100;
    nb_err err;
    int64_t *ids = NULL;
    size_t n = 0;
    if (nb_db_jobs_expire(c->db, now, &ids, &n, &err)) {
        nb_coord_log(c, "sweep: expiring queued jobs: %s", err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        nb_coord_log(c, "job %lld expired in the queue", (long long)ids[i]);
        nb_coord_changed(c, ids[i], 0);
    }
    if (n) {
        nb_coord_stat_add(c, &c->stats.cancelled, n);
        nb_coord_queue_changed(c);
    }
    free(ids);
}

/* ---- queued reasons ---- */

static void reason_for(const nb_db_job *j, pool *p, char *out, size_t cap)
{
    int live = 0, idle = 0, why_live = 0;
    char why[NB_DB_MSG_MAX] = "", dead[NB_DB_MSG_MAX] = "";
    for (size_t i = 0; i < p->n; i++) {
        pool_worker *w = &p->w[i];
        if (!w->info) {
            if (!dead[0])
                snprintf(dead, sizeof dead, "worker %s has not re-registered since the "
                         "coordinator restarted", w->db.id);
            continue;
        }
        char wy[NB_DB_MSG_MAX];
        if (!nb_sched_worker_serves(w->info, w->db.id, j->sel_backend, j->sel_board,
                                    j->sel_deployment, j->sel_dtype_id, j->sel_tags,
                                    j->sel_worker, wy, sizeof wy, NULL)) {
            /* A live worker's reason beats a stale one's. */
            if (!why[0] || (w->db.state == NB_WORKER_ALIVE && !why_live)) {
                snprintf(why, sizeof why, "%s", wy);
                why_live = w->db.state == NB_WORKER_ALIVE;
            }
            continue;
        }
        if (w->db.state != NB_WORKER_ALIVE) {
            snprintf(dead, sizeof dead, "worker %s could run it but is %s", w->db.id,
                     nb_db_worker_state_name(w->db.state));
            continue;
        }
        /* Health checks run on a quarantined board; nothing runs on a drained one. */
        if (w->held && (nb_job_kind_parse(j->kind) != NPUBENCH__JOB_KIND__HEALTH ||
                        !strcmp(w->held, "drained"))) {
            snprintf(dead, sizeof dead, "board %s could run it but is %s", w->db.board_name,
                     w->held);
            continue;
        }
        live++;
        idle += !w->busy;
    }
    if (live && !idle)
        snprintf(out, cap, "waiting for a free worker (%d can run it, all busy)", live);
    else if (live)
        out[0] = '\0';
    else if (!p->n)
        snprintf(out, cap, "no worker is registered");
    else /* each part cut to 200 bytes: the reason is shown on one line */
        snprintf(out, cap, "no live worker can run it: %.200s%s%.200s", why[0] ? why : dead,
                 why[0] && dead[0] ? "; " : "", why[0] ? dead : "");
}

void nb_sched_update_reasons(nb_coord *c)
{
    nb_err e;
    nb_db_job *q = NULL;
    size_t nq = 0;
    nb_db_job_filter f = {.states = NB_JOB_STATE_BIT(NB_JOB_QUEUED), .limit = 500,
                          .oldest_first = 1};
    if (nb_db_job_list(c->db, &f, &q, &nq, &e) || !nq) {
        nb_db_job_list_free(q, nq);
        return;
    }
    pool p;
    if (pool_load(c, &p, &e) == NB_OK) {
        for (size_t i = 0; i < nq; i++) {
            if (q[i].is_group)
                continue;
            char r[NB_DB_MSG_MAX];
            reason_for(&q[i], &p, r, sizeof r);
            /* A retry keeps the requeue's own reason while workers exist. */
            if (!r[0] && q[i].attempts > 0)
                continue;
            if (strcmp(r, q[i].queued_reason))
                nb_db_job_set_queued_reason(c->db, q[i].id, r, &e);
        }
        pool_free(&p);
    }
    nb_db_job_list_free(q, nq);
}
