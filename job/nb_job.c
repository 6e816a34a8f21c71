/* nb_job: the job rules every layer shares: kind and state names, spec validation, params,
 * and the model-matching rule the coordinator routes by and the worker resolves by. */
#include "nb_job.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nb_preset.h"
#include "nb_file.h"
#include "nb_utf8.h"

/* ---- kinds ------------------------------------------------------------------------------ */

/* Every parameter row, once; the kinds below pick theirs with their defaults. */
#define SPEC(f) 1, offsetof(Npubench__JobSpec, f), offsetof(nb_job_params, f)
#define KV(f) 0, 0, offsetof(nb_job_params, f)
static const char *const localize_names[] = {"fail", "divergence", "off", NULL};
static const nb_job_param_desc params[] = {
#define P_N_TOKENS (&params[0])
    {"n_tokens", NB_JOB_PT_INT, SPEC(n_tokens), 0, NB_JOB_N_TOKENS_MAX, NULL, "n-tokens",
     "tokens per prompt / run"},
#define P_K (&params[1])
    {"k", NB_JOB_PT_INT, SPEC(k), 0, NB_JOB_K_MAX, NULL, "k", "top-k of the gate"},
#define P_REPS (&params[2])
    {"reps", NB_JOB_PT_INT, SPEC(reps), 0, NB_JOB_REPS_MAX, NULL, "reps",
     "measured repetitions (run, profile)"},
#define P_MAX_PROMPTS (&params[3])
    {"max_prompts", NB_JOB_PT_INT, SPEC(max_prompts), 0, NB_JOB_PROMPTS_MAX, NULL, "max-prompts",
     "first N prompts"},
#define P_THREADS (&params[4])
    {NB_JOB_PARAM_THREADS, NB_JOB_PT_INT, KV(threads), 0, NB_JOB_THREADS_MAX, NULL, "threads",
     "kernel threads on the worker"},
#define P_MAX_SEQ (&params[5])
    {NB_JOB_PARAM_MAX_SEQ, NB_JOB_PT_INT, KV(max_seq), 0, NB_JOB_MAX_SEQ_MAX, NULL, NULL,
     "KV cache length"},
#define P_DEVICE (&params[6])
    {NB_JOB_PARAM_DEVICE, NB_JOB_PT_INT, KV(device), 0, NB_JOB_DEVICE_MAX, NULL, NULL,
     "device index"},
#define P_WARMUP (&params[7])
    {NB_JOB_PARAM_WARMUP, NB_JOB_PT_INT, KV(warmup), 0, NB_JOB_WARMUP_MAX, NULL, NULL,
     "untimed runs first"},
#define P_CHAT (&params[8])
    {NB_JOB_PARAM_CHAT, NB_JOB_PT_INT, KV(chat), 0, 1, NULL, NULL,
     "1 wraps the prompt in the chat template"},
#define P_IGNORE_EOS (&params[9])
    {NB_JOB_PARAM_IGNORE_EOS, NB_JOB_PT_INT, KV(ignore_eos), 0, 1, NULL, NULL,
     "1 generates every token past end-of-generation"},
#define P_STRICT (&params[10])
    {NB_JOB_PARAM_STRICT, NB_JOB_PT_INT, KV(strict), 0, 1, NULL, NULL,
     "1: a decode-path defect fails a gate PASS"},
#define P_LOCALIZE (&params[11])
    {NB_JOB_PARAM_LOCALIZE, NB_JOB_PT_ENUM, KV(localize), 0, 2, localize_names, NULL,
     "when a record gets a localization"},
#define P_REFERENCE (&params[12])
    {NB_JOB_PARAM_REFERENCE, NB_JOB_PT_TEXT, KV(reference), 0, 0, NULL, NULL,
     "the reference trace, a file of the worker's reference directory"},
#define P_PROMPTS_SHA256 (&params[13])
    {NB_JOB_PARAM_PROMPTS_SHA256, NB_JOB_PT_TEXT, KV(prompts_sha256), 0, 0, NULL, NULL,
     "sha256 of the prompts file explicit prompts came from"},
};
#undef SPEC
#undef KV
#define N_PARAMS (sizeof params / sizeof *params)

/* What every kind that opens a deployment takes: the deployment's values unless set. */
#define DEPLOY_PARAMS                                                                             {P_THREADS, 0, "the deployment's (0 = all cores)"},                                              {P_MAX_SEQ, 0, "the deployment's (0 = the engine's)"},                                       {P_DEVICE, 0, "the deployment's"}
#define VERIFY_PARAMS                                                                             {P_LOCALIZE, NB_LOCALIZE_FAIL, NULL}, {P_STRICT, 0, NULL},                                       {P_REFERENCE, 0, "the reference directory's trace of the model"},                            {P_PROMPTS_SHA256, 0, NULL}
#define BENCH_PARAMS(n_tokens)                                                                    {P_N_TOKENS, n_tokens, NULL}, {P_REPS, NB_JOB_RUN_REPS_DEFAULT, NULL}, {P_WARMUP, 1, NULL},         {P_CHAT, 1, "the model's (its chat template when it has one)"},                              {P_IGNORE_EOS, 0, NULL}

static const nb_job_kind_param run_params[] = {
    BENCH_PARAMS(NB_JOB_RUN_N_TOKENS_DEFAULT), DEPLOY_PARAMS, {NULL, 0, NULL}};
static const nb_job_kind_param profile_params[] = {
    BENCH_PARAMS(NB_JOB_PROFILE_N_TOKENS_DEFAULT), DEPLOY_PARAMS, {NULL, 0, NULL}};
static const nb_job_kind_param verify_params[] = {
    {P_N_TOKENS, NB_JOB_VERIFY_N_TOKENS, NULL}, {P_K, NB_JOB_VERIFY_K, NULL},
    {P_MAX_PROMPTS, NB_JOB_VERIFY_PROMPTS, NULL}, VERIFY_PARAMS, DEPLOY_PARAMS, {NULL, 0, NULL}};
static const nb_job_kind_param verify_full_params[] = {
    {P_N_TOKENS, 0, "the reference trace's"}, {P_K, 0, "the reference trace's"},
    {P_MAX_PROMPTS, 0, "all of the set"}, VERIFY_PARAMS, DEPLOY_PARAMS, {NULL, 0, NULL}};
static const nb_job_kind_param diagnosis_params[] = {
    {P_REFERENCE, 0, "the reference directory's trace of the model"}, DEPLOY_PARAMS,
    {NULL, 0, NULL}};
static const nb_job_kind_param health_params[] = {DEPLOY_PARAMS, {NULL, 0, NULL}};

static const nb_job_kind_desc kinds[] = {
    {NPUBENCH__JOB_KIND__RUN, "run", "run", NB_JOB_FAMILY_PERFORMANCE,
     "TTFT, decode tok/s, per-token ms", NULL, 1, "generate text; print setup, TTFT, decode ms/token and tokens/s", run_params},
    {NPUBENCH__JOB_KIND__VERIFY, "verify", "verify", NB_JOB_FAMILY_VERIFY,
     "gate records (first prompts against the reference trace)", NULL, 0,
     "the production gate: 2 prompts x 32 tokens vs HF bf16", verify_params},
    {NPUBENCH__JOB_KIND__VERIFY_FULL, "verify-full", "verify_full", NB_JOB_FAMILY_VERIFY,
     "gate records of every prompt of the set", "verify-full-shard", 0,
     "the gate on every prompt of the set", verify_full_params},
    {NPUBENCH__JOB_KIND__DIAGNOSIS, "diagnosis", "diagnosis", NB_JOB_FAMILY_DIAGNOSIS,
     "per-layer cosines against the reference", NULL, 0,
     "per-layer cosine vs HF (informational)", diagnosis_params},
    {NPUBENCH__JOB_KIND__PROFILE, "profile", "profile", NB_JOB_FAMILY_PERFORMANCE,
     "metrics and a per-kernel time breakdown", NULL, 1, "per-phase and per-kernel milliseconds",
     profile_params},
    {NPUBENCH__JOB_KIND__HEALTH, "health", "health", NB_JOB_FAMILY_HEALTH,
     "the board's health check", NULL, 0, "the board's health check: device probe, then a short verify", health_params},
};
#define N_KINDS (sizeof kinds / sizeof *kinds)

const nb_job_kind_desc *nb_job_kind_at(size_t i)
{
    return i < N_KINDS ? &kinds[i] : NULL;
}

const nb_job_param_desc *nb_job_param_at(size_t i)
{
    return i < N_PARAMS ? &params[i] : NULL;
}

const nb_job_param_desc *nb_job_param_find(const char *key)
{
    for (size_t i = 0; key && i < N_PARAMS; i++)
        if (!strcmp(key, params[i].key))
            return &params[i];
    return NULL;
}

const nb_job_kind_param *nb_job_kind_param_of(const nb_job_kind_desc *d, const char *key)
{
    for (const nb_job_kind_param *kp = d ? d->params : NULL; key && kp && kp->p; kp++)
        if (!strcmp(kp->p->key, key))
            return kp;
    return NULL;
}

const char *nb_job_kind_list(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_KINDS && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                !i ? "" : i + 1 < N_KINDS ? ", " : " or ", kinds[i].name);
    return buf;
}

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
    return d ? d->family : NB_JOB_FAMILY_PERFORMANCE;
}

int nb_job_kind_is(int kind, const char *family)
{
    const nb_job_kind_desc *d = nb_job_kind_desc_of(kind);
    return d && !strcmp(d->family, family);
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

/* The index of s among an ENUM row's names, -1 when none. */
static int enum_index(const nb_job_param_desc *p, const char *s)
{
    for (int i = 0; s && p->names[i]; i++)
        if (!strcmp(s, p->names[i]))
            return i;
    return -1;
}

/* "fail, divergence or off" */
static const char *names_list(const nb_job_param_desc *p, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; p->names[i] && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                !i ? "" : p->names[i + 1] ? ", " : " or ", p->names[i]);
    return buf;
}

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
    char kinds[128];
    if (!nb_job_kind_desc_of(s->kind))
        return nb_err_set(err, NB_EINVAL, "JobSpec.kind %d: must be a kind with a descriptor (%s)",
                          (int)s->kind, nb_job_kind_list(kinds, sizeof kinds));
    for (size_t i = 0; i < N_PARAMS; i++) {
        const nb_job_param_desc *p = &params[i];
        int32_t v = p->in_spec ? *(const int32_t *)((const char *)s + p->spec_off) : 0;
        if (p->in_spec && (v < p->lo || v > p->hi))
            return nb_err_set(err, NB_EINVAL, "JobSpec.%s %d: must be %ld..%ld (0 = the kind's "
                              "default)", p->key, v, p->lo, p->hi);
    }
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
        const nb_job_param_desc *p = nb_job_param_find(kv->key);
        long v;
        if (!p || p->in_spec || p->type == NB_JOB_PT_TEXT)
            continue;
        if (p->type == NB_JOB_PT_ENUM) {
            char list[96];
            if (enum_index(p, kv->value) < 0)
                return nb_err_set(err, NB_EINVAL, "JobSpec.params %s '%.32s': expected %s",
                                  kv->key, kv->value ? kv->value : "",
                                  names_list(p, list, sizeof list));
        } else if (!parse_long(kv->value, &v) || v < p->lo || v > p->hi) {
            return nb_err_set(err, NB_EINVAL, "JobSpec.params %s '%.32s': must be an integer "
                              "%ld..%ld", kv->key, kv->value ? kv->value : "", p->lo, p->hi);
        }
    }
    return NB_OK;
}

nb_code nb_job_localize_parse(const char *s, const char *field, nb_localize_when *out,
                              nb_err *err)
{
    char list[96];
    int i = enum_index(P_LOCALIZE, s);
    if (i >= 0) {
        *out = (nb_localize_when)i;
        return NB_OK;
    }
    return nb_err_set(err, NB_EINVAL, "%s '%.32s': expected %s", field, s ? s : "",
                      names_list(P_LOCALIZE, list, sizeof list));
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

/* Each row's value: the spec's field or params entry when set, else the kind's default, else
 * -1 (NULL; 0 for a JobSpec field): an entry that inherits leaves it to the deployment, the
 * model or the trace. */
void nb_job_params_read(const Npubench__JobSpec *s, nb_job_params *p)
{
    const nb_job_kind_desc *d = nb_job_kind_desc_of(s->kind);
    for (size_t i = 0; i < N_PARAMS; i++) {
        const nb_job_param_desc *r = &params[i];
        const nb_job_kind_param *kp = nb_job_kind_param_of(d, r->key);
        char *dst = (char *)p + r->field;
        if (r->type == NB_JOB_PT_TEXT) {
            *(const char **)dst = param(s, r->key);
            continue;
        }
        long v = -1;
        if (r->in_spec) {
            int32_t x = *(const int32_t *)((const char *)s + r->spec_off);
            v = x > 0 ? x : -1;
        } else if (r->type == NB_JOB_PT_ENUM) {
            v = enum_index(r, param(s, r->key));
        } else if (!parse_long(param(s, r->key), &v) || v < 0) {
            v = -1;
        }
        if (v < 0 && kp && !kp->inherit)
            v = kp->dflt;
        if (v < 0 && r->in_spec) /* a field's 0 is the wire's "unset": the trace's, all */
            v = 0;
        *(long *)dst = v;
    }
}

void nb_job_param_set(Npubench__JobSpec *s, const nb_job_param_desc *p, long v,
                      Npubench__KeyValue *kv, char *buf, size_t cap)
{
    if (p->in_spec) {
        *(int32_t *)((char *)s + p->spec_off) = (int32_t)v;
        return;
    }
    npubench__key_value__init(kv);
    if (p->type == NB_JOB_PT_ENUM && v >= 0 && v <= p->hi)
        snprintf(buf, cap, "%s", p->names[v]);
    else
        snprintf(buf, cap, "%ld", v);
    kv->key = (char *)p->key;
    kv->value = buf;
    s->params[s->n_params++] = kv;
}

long nb_job_param_or(long v, long dflt)
{
    return v >= 0 ? v : dflt;
}


/* ---- model matching ------------------------------------------------------------------- */

/* Whether s (to its end) is a quantisation tag, case-insensitively: f16, f32, bf16, fp16,
 * fp32; q<n> with "_<n>" / "_k" / "_s" / "_m" / "_l" parts (q4_0, q8_0, q4_k_m, q6_k,
 * q4_0_4_4); iq<n> with letter parts (iq4_xs, iq2_xxs, iq4_nl). */
static int is_quant_tag(const char *s)
{
    static const char *const floats[] = {"f16", "f32", "bf16", "fp16", "fp32"};
    for (size_t i = 0; i < sizeof floats / sizeof *floats; i++)
        if (!strcasecmp(s, floats[i]))
            return 1;
    int iq = tolower((unsigned char)s[0]) == 'i';
    s += iq;
    if (tolower((unsigned char)*s) != 'q' || !isdigit((unsigned char)s[1]))
        return 0;
    for (s++; isdigit((unsigned char)*s); s++)
        ;
    while (*s == '_') {
        const char *p = ++s;
        if (iq)
            while (isalpha((unsigned char)*s))
                s++;
        else if (isdigit((unsigned char)*s))
            while (isdigit((unsigned char)*s))
                s++;
        else if (*s && strchr("ksmlKSML", *s))
            s++;
        if (s == p)
            return 0;
    }
    return !*s;
}

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
    /* "Name.Q4_1", "name-q4_k_m", "Name_F16": the quantisation is the deployment's dtype,
     * not the model's. The first separator whose rest is one tag: the longest tag. */
    for (size_t i = 1; i + 1 < n; i++)
        if (strchr("-_.", tmp[i]) && is_quant_tag(tmp + i + 1)) {
            tmp[i] = '\0';
            break;
        }
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

/* ---- a worker's deployments as people read them ------------------------------------- */

const char *nb_job_dep_name(const Npubench__Deployment *d, char *buf, size_t cap)
{
    if (*d->canonical)
        return d->canonical;
    nb_job_model_canon(d->model, buf, cap);
    return *buf ? buf : d->model;
}

const char *nb_job_dep_stored_dtype(const Npubench__Deployment *d)
{
    return *d->stored_dtype ? d->stored_dtype : d->dtype;
}

static int dep_same(const Npubench__Deployment *a, const Npubench__Deployment *b)
{
    char na[256], nb[256];
    return !strcmp(a->backend, b->backend) &&
           !strcasecmp(nb_job_dep_stored_dtype(a), nb_job_dep_stored_dtype(b)) &&
           !strcmp(a->digest, b->digest) &&
           !strcmp(nb_job_dep_name(a, na, sizeof na), nb_job_dep_name(b, nb, sizeof nb));
}

size_t nb_job_dep_first(Npubench__Deployment *const *deps, size_t k)
{
    for (size_t j = 0; j < k; j++)
        if (dep_same(deps[j], deps[k]))
            return j;
    return k;
}

void nb_job_dep_text(Npubench__Deployment *const *deps, size_t n, size_t k,
                     const char *also_sep, char *out, size_t cap)
{
    const Npubench__Deployment *d = deps[k];
    const char *stored = nb_job_dep_stored_dtype(d);
    char name[256];
    size_t len = (size_t)snprintf(out, cap, "%s %s/%s", nb_job_dep_name(d, name, sizeof name),
                                  d->backend, stored);
    int also = 0;
    for (size_t j = k; j < n && len < cap; j++) {
        const char *w = deps[j]->dtype;
        int dup = !strcasecmp(w, stored) || nb_job_dep_first(deps, j) != k;
        for (size_t i = k; i < j && !dup; i++)
            dup = nb_job_dep_first(deps, i) == k && !strcasecmp(deps[i]->dtype, w);
        if (dup)
            continue;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", also++ ? also_sep : " (also ", w);
    }
    if (also && len < cap)
        snprintf(out + len, cap - len, ")");
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
    if (want->dtype_id && d->dtype_id) {
        if (want->dtype_id != d->dtype_id)
            return 0;
    } else if (!any(want->dtype) && !any(d->dtype) && strcasecmp(want->dtype, d->dtype)) {
        return 0;
    }
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
