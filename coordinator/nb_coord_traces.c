/* nb_coord_traces: the HF reference trace cache (db/nb_db_traces). A trace is computed once
 * per model digest + prompt set (make hf-reference); the coordinator keeps its bytes and
 * ships them with each verify/diagnosis lease, so no worker ever needs HF for it. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_db_traces.h"
#include "nb_diagnosis.h"
#include "nb_file.h"
#include "nb_json.h"
#include "nb_prompts.h"
#include "nb_sha256.h"
#include "nb_trace.h"
#include "nb_verify.h"

#define TRACE_FILE_MAX ((size_t)256 << 20)

static int is_hex64(const char *s)
{
    if (!s || strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static const char *refdir(nb_coord *c)
{
    return c->refdir ? c->refdir : nb_verify_default_refdir();
}

/* The prompts digest a trace is keyed by: the set's file digest, or
 * "diag-" + the prompt's digest for diagnosis traces. */
static int trace_digest(nb_coord *c, const Npubench__JobSpec *spec, char *out, size_t cap,
                        int *diag)
{
    *diag = nb_job_kind_is(spec->kind, NB_JOB_FAMILY_DIAGNOSIS);
    if (*diag) {
        nb_prompts ps;
        nb_err e;
        const char *p = *spec->prompt ? spec->prompt : NB_DIAGNOSIS_DEFAULT_PROMPT;
        if (nb_prompts_single(p, &ps, &e))
            return 0;
        snprintf(out, cap, "diag-%s", ps.sha256);
        nb_prompts_free(&ps);
        return 1;
    }
    if (!nb_job_kind_is(spec->kind, NB_JOB_FAMILY_VERIFY))
        return 0;
    int n;
    char sha[65], path[1024];
    if (!nb_sched_prompt_set(c->o.prompts_dir, spec, &n, sha, path, sizeof path) || !sha[0])
        return 0;
    snprintf(out, cap, "%s", sha);
    return 1;
}

static int has_param(const Npubench__JobSpec *spec, const char *key)
{
    for (size_t i = 0; i < spec->n_params; i++)
        if (!strcmp(spec->params[i]->key, key) && *spec->params[i]->value)
            return 1;
    return 0;
}

static coord_trace_ix *ix_find(nb_coord *c, const char *model, const char *digest)
{
    for (size_t i = 0; i < c->n_traces; i++)
        if (!strcmp(c->traces[i].model_sha, model) && !strcmp(c->traces[i].prompts_sha, digest))
            return &c->traces[i];
    return NULL;
}

static void ix_put(nb_coord *c, const char *model, const char *digest, int n_tokens, int k)
{
    pthread_mutex_lock(&c->mu);
    coord_trace_ix *x = ix_find(c, model, digest);
    if (!x) {
        /* Oldest entry makes room; a miss only costs a file read. */
        if (c->n_traces == COORD_TRACE_IX) {
            memmove(c->traces, c->traces + 1, sizeof c->traces[0] * (COORD_TRACE_IX - 1));
            c->n_traces--;
        }
        x = &c->traces[c->n_traces++];
    }
    snprintf(x->model_sha, sizeof x->model_sha, "%s", model);
    snprintf(x->prompts_sha, sizeof x->prompts_sha, "%.64s", digest);
    x->n_tokens = n_tokens;
    x->k = k;
    pthread_mutex_unlock(&c->mu);
}

/* Loads and validates the trace at path (for model_sha), then caches its
 * bytes. Returns them (malloc'ed) or NULL. */
static uint8_t *cache_file(nb_coord *c, const char *path, const char *model_sha,
                           const char *digest, size_t *len)
{
    nb_trace *tr = NULL;
    nb_err e;
    if (nb_trace_load(path, &tr, &e) != NB_OK)
        return NULL;
    int ok = !strcmp(tr->model_sha256, model_sha);
    int n_tokens = tr->n_tokens > 0 ? tr->n_tokens : 1, k = tr->k > 0 ? tr->k : 1;
    nb_trace_free(tr);
    if (!ok)
        return NULL;
    char *data = NULL;
    if (nb_file_read(path, TRACE_FILE_MAX, &data, len, &e) != NB_OK)
        return NULL;
    nb_db_trace_key key = {model_sha, digest, n_tokens, k};
    if (nb_db_trace_put(c->db, &key, NULL, data, *len, &e) != NB_OK)
        nb_coord_log(c, "trace cache: %s", e.msg);
    else
        nb_coord_log(c, "trace cache: stored %s (%zu bytes) for model %.16s", path, *len,
                     model_sha);
    ix_put(c, model_sha, digest, n_tokens, k);
    return (uint8_t *)data;
}

/* The trace's name for reports: its conventional path under the reference directory, that
 * directory as people name it ("verify/references", not this build's absolute source path). */
static void trace_name(nb_coord *c, const char *model_sha, const char *digest, int diag,
                       char *name, size_t cap)
{
    const char *dir = refdir(c);
    size_t n = strlen(NB_SOURCE_DIR);
    if (!strncmp(dir, NB_SOURCE_DIR, n) && dir[n] == '/')
        dir += n + 1;
    nb_trace_path(dir, model_sha, diag ? digest + 5 : digest, diag, name, cap);
}

uint8_t *nb_coord_traces_for_lease(nb_coord *c, const Npubench__JobSpec *spec,
                                   const char *model_sha, size_t *len, char sha_hex[65],
                                   char *name, size_t name_cap)
{
    *len = 0;
    sha_hex[0] = '\0';
    name[0] = '\0';
    char digest[80];
    int diag;
    if (!is_hex64(model_sha) || has_param(spec, "reference") ||
        !trace_digest(c, spec, digest, sizeof digest, &diag))
        return NULL;
    pthread_mutex_lock(&c->mu);
    coord_trace_ix *x = ix_find(c, model_sha, digest);
    coord_trace_ix hit;
    memset(&hit, 0, sizeof hit);
    if (x)
        hit = *x;
    pthread_mutex_unlock(&c->mu);
    uint8_t *bytes = NULL;
    nb_err e;
    if (x) {
        nb_db_trace_key key = {model_sha, digest, hit.n_tokens, hit.k};
        char *path = NULL;
        void *blob = NULL;
        if (nb_db_trace_get(c->db, &key, &path, &blob, len, NULL, &e) == NB_OK) {
            if (blob)
                bytes = blob;
            else if (path && nb_file_read(path, TRACE_FILE_MAX, (char **)&bytes, len, &e))
                bytes = NULL;
            free(path);
        }
    }
    if (!bytes) {
        char path[1200];
        nb_trace_path(refdir(c), model_sha, diag ? digest + 5 : digest, diag, path,
                      sizeof path);
        if (nb_file_exists(path))
            bytes = cache_file(c, path, model_sha, digest, len);
    }
    if (bytes) {
        nb_sha256_mem_hex(bytes, *len, sha_hex);
        trace_name(c, model_sha, digest, diag, name, name_cap);
    }
    return bytes;
}

void nb_coord_traces_confirm(nb_coord *c, const Npubench__JobSpec *spec, const Npubench__JobResult *res)
{
    if (res->status != NPUBENCH__STATUS_CODE__OK || !*res->report_json || !spec ||
        has_param(spec, "reference"))
        return;
    char digest[80];
    int diag;
    if (!trace_digest(c, spec, digest, sizeof digest, &diag))
        return;
    json_object *root = NULL;
    nb_err e;
    if (nb_json_parse(res->report_json, strlen(res->report_json), "report", &root, &e))
        return;
    json_object *cfg = nb_json_get(root, "config");
    const char *model = nb_json_str(cfg, "model_sha256", NULL, NULL);
    const char *path = diag ? nb_json_str(root, "reference", NULL, NULL)
                            : nb_json_str(nb_json_get(cfg, "reference"), "trace", NULL, NULL);
    if (is_hex64(model) && path && *path) {
        pthread_mutex_lock(&c->mu);
        int known = ix_find(c, model, digest) != NULL;
        pthread_mutex_unlock(&c->mu);
        /* The worker's committed trace, readable here (same host or a
         * shared tree): confirm it into the cache. */
        if (!known && nb_file_exists(path)) {
            size_t len;
            free(cache_file(c, path, model, digest, &len));
        }
    }
    json_object_put(root);
}
