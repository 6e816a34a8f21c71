/* nb_job: the job rules every layer shares: kind and state names, spec validation, params,
 * and the model-matching rule the coordinator routes by and the worker resolves by. */
#include "nb_job.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nb_preset.h"
#include "nb_file.h"
#include "nb_utf8.h"

/* ---- kinds ------------------------------------------------------------------------------ */

static const nb_job_kind_desc kinds[] = {
    {NPUBENCH__JOB_KIND__RUN, "run", "run", "performance", NULL, NB_JOB_RUN_N_TOKENS_DEFAULT, 0,
     NB_JOB_RUN_REPS_DEFAULT, 0, 1},
    {NPUBENCH__JOB_KIND__VERIFY, "verify", "verify", "verify", NULL, NB_JOB_VERIFY_N_TOKENS,
     NB_JOB_VERIFY_K, 0, NB_JOB_VERIFY_PROMPTS, 0},
    {NPUBENCH__JOB_KIND__VERIFY_FULL, "verify-full", "verify_full", "verify",
     "verify-full-shard", 0, 0, 0, 0, 0},
    {NPUBENCH__JOB_KIND__DIAGNOSIS, "diagnosis", "diagnosis", "diagnosis", NULL, 0, 0, 0, 0, 0},
    {NPUBENCH__JOB_KIND__PROFILE, "profile", "profile", "performance", NULL,
     NB_JOB_PROFILE_N_TOKENS_DEFAULT, 0, NB_JOB_RUN_REPS_DEFAULT, 0, 1},
    {NPUBENCH__JOB_KIND__HEALTH, "health", "health", "health", NULL, 0, 0, 0, 0, 0},
};
#define N_KINDS (sizeof kinds / sizeof *kinds)

const nb_job_kind_desc *nb_job_kind_desc_of(int kind)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (kinds[i].kind == kind)
            return &kinds[i];
    return NULL;
}

const char *nb_job_kind_name(int kind)
{
    const nb_job_kind_desc *d = nb_job_kind_desc_of(kind);
    return d ? d->name : "unknown";
}

int nb_job_kind_parse(const char *name)
{
    for (size_t i = 0; name && i < N_KINDS; i++)
        if (!strcmp(name, kinds[i].name) || !strcmp(name, kinds[i].exec_key))
            return kinds[i].kind;
    return 0;
}

int nb_job_kind_is_shard(const char *name)
{
    for (size_t i = 0; name && i < N_KINDS; i++)
        if (kinds[i].shard && !strcmp(name, kinds[i].shard))
            return 1;
    return 0;
}

int nb_job_kind_parse_queued(const char *name)
{
    for (size_t i = 0; name && i < N_KINDS; i++)
        if (kinds[i].shard && !strcmp(name, kinds[i].shard))
            return kinds[i].kind;
    return nb_job_kind_parse(name);
}

const char *nb_job_kind_family(const char *name)
{
    const nb_job_kind_desc *d = nb_job_kind_desc_of(nb_job_kind_parse_queued(name));
    return d ? d->family : "performance";
}

/* ---- states ----------------------------------------------------------------------------- */

static const char *const state_names[] = {"queued", "leased", "running",
                                          "done",   "failed", "cancelled"};

const char *nb_job_state_name(nb_job_state s)
{
    return (unsigned)s <= NB_JOB_CANCELLED ? state_names[s] : "unknown";
}

nb_code nb_job_state_parse(const char *s, nb_job_state *out, nb_err *err)
{
    for (int i = 0; i <= NB_JOB_CANCELLED; i++) {
        if (s && strcmp(s, state_names[i]) == 0) {
            *out = (nb_job_state)i;
            return NB_OK;
        }
    }
    return nb_err_set(err, NB_EINVAL,
                      "job state '%s': expected queued, leased, running, done, failed or "
                      "cancelled",
                      s ? s : "(null)");
}

int nb_job_state_terminal(nb_job_state s)
{
    return s == NB_JOB_DONE || s == NB_JOB_FAILED || s == NB_JOB_CANCELLED;
}

int nb_job_state_to_pb(nb_job_state s)
{
    return (int)s + 1;
}

const char *nb_job_pb_state_name(int pb_state)
{
    return pb_state == 0 ? "any" : nb_job_state_name((nb_job_state)(pb_state - 1));
}

/* ---- validation ----------------------------------------------------------------------- */

/* Integer params the worker reads, with their ranges. */
static const struct {
    const char *key;
    long lo, hi;
} int_params[] = {
    {NB_JOB_PARAM_THREADS, 0, NB_JOB_THREADS_MAX},
    {NB_JOB_PARAM_MAX_SEQ, 0, NB_JOB_MAX_SEQ_MAX},
    {NB_JOB_PARAM_WARMUP, 0, NB_JOB_WARMUP_MAX},
    {NB_JOB_PARAM_CHAT, 0, 1},
    {NB_JOB_PARAM_IGNORE_EOS, 0, 1},
    {NB_JOB_PARAM_DEVICE, 0, NB_JOB_DEVICE_MAX},
    {NB_JOB_PARAM_STRICT, 0, 1}, /* verify: a decode-path defect fails a gate PASS */
};

static int parse_long(const char *s, long *out)
{
    if (!s || !*s)
        return 0;
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (*e || errno)
        return 0;
    *out = v;
    return 1;
}

static nb_code check_text(const char *s, const char *field, nb_err *err)
{
    size_t n = strlen(s), bad;
    if (n > NB_JOB_PROMPT_MAX_BYTES)
        return nb_err_set(err, NB_EINVAL, "%s: %zu bytes, at most %d", field, n,
                          NB_JOB_PROMPT_MAX_BYTES);
    if (!nb_utf8_valid(s, n, &bad))
        return nb_err_set(err, NB_EINVAL, "%s: invalid UTF-8 at byte %zu", field, bad);
    return NB_OK;
}

nb_code nb_job_validate_spec(const Npubench__JobSpec *s, nb_err *err)
{
    if (s->kind < NPUBENCH__JOB_KIND__RUN || s->kind > NPUBENCH__JOB_KIND__HEALTH)
        return nb_err_set(err, NB_EINVAL,
                          "JobSpec.kind %d: must be RUN, VERIFY, VERIFY_FULL, DIAGNOSIS, PROFILE "
                          "or HEALTH",
                          (int)s->kind);
    if (s->n_tokens < 0 || s->n_tokens > NB_JOB_N_TOKENS_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.n_tokens %d: must be 0..%d (0 = default)",
                          s->n_tokens, NB_JOB_N_TOKENS_MAX);
    if (s->k < 0 || s->k > NB_JOB_K_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.k %d: must be 0..%d (0 = default)", s->k,
                          NB_JOB_K_MAX);
    if (s->reps < 0 || s->reps > NB_JOB_REPS_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.reps %d: must be 0..%d (0 = default)",
                          s->reps, NB_JOB_REPS_MAX);
    if (s->max_prompts < 0 || s->max_prompts > NB_JOB_PROMPTS_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.max_prompts %d: must be 0..%d (0 = all)",
                          s->max_prompts, NB_JOB_PROMPTS_MAX);
    if (s->priority < -NB_JOB_PRIORITY_MAX || s->priority > NB_JOB_PRIORITY_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.priority %d: must be %d..%d", s->priority,
                          -NB_JOB_PRIORITY_MAX, NB_JOB_PRIORITY_MAX);
    if (s->timeout_ms < 0 || s->timeout_ms > NB_JOB_TIMEOUT_MS_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.timeout_ms %lld: must be 0..%lld (0 = default)",
                          (long long)s->timeout_ms, (long long)NB_JOB_TIMEOUT_MS_MAX);
    if (s->expire_after_ms < -1 || s->expire_after_ms > NB_JOB_EXPIRE_MS_MAX)
        return nb_err_set(err, NB_EINVAL,
                          "JobSpec.expire_after_ms %lld: must be -1..%lld (0 = the coordinator's "
                          "default, -1 = never)",
                          (long long)s->expire_after_ms, (long long)NB_JOB_EXPIRE_MS_MAX);
    if (s->shard) {
        const Npubench__Shard *h = s->shard;
        if (h->prompt_begin < 0 || h->prompt_end <= h->prompt_begin ||
            h->prompt_end > NB_JOB_PROMPTS_MAX)
            return nb_err_set(err, NB_EINVAL,
                              "JobSpec.shard [%d, %d): need 0 <= prompt_begin < prompt_end <= %d",
                              h->prompt_begin, h->prompt_end, NB_JOB_PROMPTS_MAX);
        if (s->max_prompts > 0 && h->prompt_end > s->max_prompts)
            return nb_err_set(err, NB_EINVAL,
                              "JobSpec.shard [%d, %d): past max_prompts %d", h->prompt_begin,
                              h->prompt_end, s->max_prompts);
        if (h->count < 0 || h->index < 0 || (h->count > 0 && h->index >= h->count))
            return nb_err_set(err, NB_EINVAL, "JobSpec.shard index %d of %d: out of range",
                              h->index, h->count);
    }
    nb_code rc;
    if (s->prompt && (rc = check_text(s->prompt, "JobSpec.prompt", err)))
        return rc;
    if (s->prompt_set && *s->prompt_set && (rc = nb_job_prompt_set_check(s->prompt_set, err)))
        return rc;
    if (s->n_prompts > NB_JOB_PROMPTS_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.prompts: %zu, at most %d", s->n_prompts,
                          NB_JOB_PROMPTS_MAX);
    for (size_t i = 0; i < s->n_prompts; i++) {
        char f[48];
        snprintf(f, sizeof f, "JobSpec.prompts[%zu]", i);
        if ((rc = check_text(s->prompts[i], f, err)))
            return rc;
        if (!*s->prompts[i] || strchr(s->prompts[i], '\n'))
            return nb_err_set(err, NB_EINVAL, "%s: must be one non-empty line", f);
    }
    if (s->n_params > NB_JOB_PARAMS_MAX)
        return nb_err_set(err, NB_EINVAL, "JobSpec.params: %zu, at most %d", s->n_params,
                          NB_JOB_PARAMS_MAX);
    for (size_t i = 0; i < s->n_params; i++) {
        const Npubench__KeyValue *kv = s->params[i];
        if (!kv->key || !*kv->key)
            return nb_err_set(err, NB_EINVAL, "JobSpec.params[%zu]: empty key", i);
        if (strlen(kv->key) > NB_JOB_PARAM_KEY_MAX ||
            (kv->value && strlen(kv->value) > NB_JOB_PARAM_VALUE_MAX))
            return nb_err_set(err, NB_EINVAL, "JobSpec.params[%zu]: key over %d or value over "
                              "%d bytes", i, NB_JOB_PARAM_KEY_MAX, NB_JOB_PARAM_VALUE_MAX);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(s->params[j]->key, kv->key))
                return nb_err_set(err, NB_EINVAL, "JobSpec.params %s: duplicate key", kv->key);
        nb_localize_when when;
        nb_code lrc;
        if (!strcmp(kv->key, NB_JOB_PARAM_LOCALIZE) &&
            (lrc = nb_job_localize_parse(kv->value, "JobSpec.params localize", &when, err)))
            return lrc;
        for (size_t p = 0; p < sizeof int_params / sizeof *int_params; p++) {
            long v;
            if (strcmp(kv->key, int_params[p].key))
                continue;
            if (!parse_long(kv->value, &v) || v < int_params[p].lo || v > int_params[p].hi)
                return nb_err_set(err, NB_EINVAL, "JobSpec.params %s '%.32s': must be an integer "
                                  "%ld..%ld", kv->key, kv->value ? kv->value : "",
                                  int_params[p].lo, int_params[p].hi);
        }
    }
    return NB_OK;
}

nb_code nb_job_localize_parse(const char *s, const char *field, nb_localize_when *out,
                              nb_err *err)
{
    static const char *const names[] = {"fail", "divergence", "off"};
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, names[i])) {
            *out = (nb_localize_when)i;
            return NB_OK;
        }
    return nb_err_set(err, NB_EINVAL, "%s '%.32s': expected fail, divergence or off", field,
                      s ? s : "");
}

nb_code nb_job_prompt_set_check(const char *name, nb_err *err)
{
    if (!nb_file_plain_name(name))
        return nb_err_set(err, NB_EINVAL,
                          "JobSpec.prompt_set: '%.64s' is not a prompt set name (letters, "
                          "digits, '.', '_', '-'); a file's prompts travel as JobSpec.prompts",
                          name);
    return NB_OK;
}

static const char *param(const Npubench__JobSpec *s, const char *key)
{
    for (size_t i = 0; i < s->n_params; i++)
        if (!strcmp(s->params[i]->key, key))
            return s->params[i]->value;
    return NULL;
}

static long param_int(const Npubench__JobSpec *s, const char *key)
{
    long v;
    return parse_long(param(s, key), &v) && v >= 0 ? v : -1;
}

void nb_job_params_read(const Npubench__JobSpec *s, nb_job_params *p)
{
    memset(p, 0, sizeof *p);
    p->threads = param_int(s, NB_JOB_PARAM_THREADS);
    p->max_seq = param_int(s, NB_JOB_PARAM_MAX_SEQ);
    p->device = param_int(s, NB_JOB_PARAM_DEVICE);
    p->warmup = param_int(s, NB_JOB_PARAM_WARMUP);
    p->chat = param_int(s, NB_JOB_PARAM_CHAT);
    p->ignore_eos = param_int(s, NB_JOB_PARAM_IGNORE_EOS);
    p->strict = param_int(s, NB_JOB_PARAM_STRICT);
    const char *when = param(s, NB_JOB_PARAM_LOCALIZE);
    p->has_localize = when && nb_job_localize_parse(when, NB_JOB_PARAM_LOCALIZE, &p->localize,
                                                    NULL) == NB_OK;
    p->reference = param(s, NB_JOB_PARAM_REFERENCE);
    p->prompts_sha256 = param(s, NB_JOB_PARAM_PROMPTS_SHA256);
}

long nb_job_param_or(long v, long dflt)
{
    return v >= 0 ? v : dflt;
}


/* ---- model matching ------------------------------------------------------------------- */

void nb_job_model_canon(const char *model, char *out, size_t cap)
{
    if (!model)
        model = "";
    const char *preset = nb_preset_model(model);
    if (preset)
        model = preset;
    const char *base = strrchr(model, '/');
    base = base && base[1] ? base + 1 : model;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%.1000s", base);
    size_t n = strlen(tmp);
    if (n > 5 && !strcasecmp(tmp + n - 5, ".gguf"))
        tmp[n -= 5] = '\0';
    /* "Name.Q4_1" / "Name.F16": the quantisation is the deployment's dtype. */
    char *dot = strrchr(tmp, '.');
    if (dot && strchr("QqFfBb", dot[1]) && dot[1] && isdigit((unsigned char)dot[2]))
        *dot = '\0';
    else if (dot && !strcasecmp(dot, ".bf16"))
        *dot = '\0';
    snprintf(out, cap, "%s", tmp);
}

const char *nb_job_model_resolve(const char *name, const nb_job_alias *aliases, size_t n)
{
    if (!name || !*name || !n)
        return name;
    char c[1024];
    nb_job_model_canon(name, c, sizeof c);
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(aliases[i].alias, name) || !strcasecmp(aliases[i].alias, c))
            return aliases[i].model;
    return name;
}

int nb_job_model_match_aliased(const char *sel, const char *model, const char *name,
                               const nb_job_alias *aliases, size_t n)
{
    int m = nb_job_model_match(sel, model, name);
    if (m || !n)
        return m;
    const char *a = nb_job_model_resolve(sel, aliases, n);
    const char *b = nb_job_model_resolve(model, aliases, n);
    if (a == sel && b == model)
        return 0;
    return nb_job_model_match(a, b, NULL) >= 2 ? 2 : 0;
}

int nb_job_model_match_declared(const char *sel, const char *model, const char *name,
                                const char *canonical, const char *const *aliases, size_t n)
{
    nb_job_alias al[NB_JOB_MODEL_ALIASES_MAX + 2];
    char canon[256];
    if (canonical && *canonical)
        snprintf(canon, sizeof canon, "%s", canonical);
    else
        nb_job_model_canon(model ? model : "", canon, sizeof canon);
    size_t k = 0;
    al[k++] = (nb_job_alias){model ? model : "", canon};
    al[k++] = (nb_job_alias){canon, canon};
    for (size_t i = 0; i < n && k < sizeof al / sizeof al[0]; i++)
        al[k++] = (nb_job_alias){aliases[i], canon};
    return nb_job_model_match_aliased(sel, model, name, al, k);
}

int nb_job_model_match(const char *sel, const char *model, const char *name)
{
    if (!sel || !*sel || !strcmp(sel, "*") || !model || !*model || !strcmp(model, "*"))
        return 1;
    if (!strcasecmp(sel, model) || (name && *name && !strcasecmp(sel, name)))
        return 3;
    char a[1024], b[1024];
    nb_job_model_canon(sel, a, sizeof a);
    nb_job_model_canon(model, b, sizeof b);
    return a[0] && !strcasecmp(a, b) ? 2 : 0;
}

/* ---- worker matching ---------------------------------------------------------------- */

static int any(const char *s)
{
    return !s || !*s || !strcmp(s, "*");
}

int nb_job_dep_match(const nb_job_dep *want, const nb_job_dep *d)
{
    if (!any(want->backend) && !any(d->backend) && strcmp(want->backend, d->backend))
        return 0;
    if (!any(want->dtype) && !any(d->dtype) && strcasecmp(want->dtype, d->dtype))
        return 0;
    return nb_job_model_match_declared(want->model, d->model, d->name, d->canonical, d->aliases,
                                       d->n_aliases);
}

int nb_job_dep_pick(const nb_job_dep *want, const nb_job_dep *deps, size_t n, int *score)
{
    int best = -1, top = 0;
    for (size_t i = 0; i < n; i++) {
        int m = nb_job_dep_match(want, &deps[i]);
        if (m > top) {
            top = m;
            best = (int)i;
        }
    }
    if (score)
        *score = top;
    return best;
}

int nb_job_place_fits(const nb_job_place *p, const nb_job_host *h, char *why, size_t cap)
{
    char dummy[1];
    if (!why) {
        why = dummy;
        cap = sizeof dummy;
    }
    if (p->worker && *p->worker && strcmp(p->worker, h->id)) {
        snprintf(why, cap, "pinned to worker '%s'", p->worker);
        return 0;
    }
    if (p->board && *p->board && strcmp(p->board, h->board ? h->board : "")) {
        snprintf(why, cap, "needs board '%s'; worker '%s' is on '%s'", p->board, h->id,
                 h->board ? h->board : "");
        return 0;
    }
    if (p->board_type && *p->board_type && strcmp(p->board_type, h->board_type ? h->board_type : "")) {
        snprintf(why, cap, "needs board type '%s'; worker '%s' is '%s'", p->board_type, h->id,
                 h->board_type ? h->board_type : "");
        return 0;
    }
    for (const char *q = p->tags ? p->tags : ""; *q;) {
        while (*q == ' ' || *q == ',')
            q++;
        const char *s = q;
        while (*q && *q != ',')
            q++;
        const char *e = q;
        while (e > s && e[-1] == ' ')
            e--;
        if (e == s)
            continue;
        char tag[128];
        snprintf(tag, sizeof tag, "%.*s", (int)(e - s < (long)sizeof tag ? e - s : (long)sizeof tag - 1), s);
        if (!h->has_tag(h->user, tag)) {
            snprintf(why, cap, "needs tag '%s'; worker '%s' is not tagged so", tag, h->id);
            return 0;
        }
    }
    if (cap)
        why[0] = '\0';
    return 1;
}
