/* nb_verifypb: verify, localization and diagnosis results <-> npubench.JobResult parts, built
 * from plain malloc blocks (nb_jobpb's rule).  Messages from the network are never trusted:
 * from_pb checks every count and index. */
#include "nb_verifypb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a reported message may ask from_pb to allocate. */
#define MAX_RECORDS 4096
#define MAX_STEPS 65536
#define MAX_LAYERS 4096

/* ---- top-k lists -------------------------------------------------------------------- */

static nb_code top_to_pb(const nb_gate_step *s, int k, Npubench__TopToken ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!s || k <= 0)
        return NB_OK;
    if (k > NB_GATE_K_MAX)
        k = NB_GATE_K_MAX;
    Npubench__TopToken **v = nb_jobpb_calloc((size_t)k, sizeof *v);
    if (!v)
        return NB_ENOMEM;
    for (int i = 0; i < k; i++) {
        v[i] = malloc(sizeof *v[i]);
        if (!v[i]) {
            for (int j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NB_ENOMEM;
        }
        npubench__top_token__init(v[i]);
        v[i]->token = s->topk[i];
        v[i]->logit = s->logits[i];
    }
    *out = v;
    *n = (size_t)k;
    return NB_OK;
}

/* A step known only by its chosen token: the rest of the top list is -1. */
static void step_of_token(nb_gate_step *s, int32_t token)
{
    memset(s, 0, sizeof *s);
    s->token = token;
    for (int i = 0; i < NB_GATE_K_MAX; i++)
        s->topk[i] = -1;
    s->topk[0] = token;
}

static nb_code top_from_pb(Npubench__TopToken *const *v, size_t n, const char *what,
                           nb_gate_step *s, nb_err *err)
{
    if (n > NB_GATE_K_MAX)
        return nb_err_set(err, NB_EINVAL, "%s: %zu entries, at most %d", what, n,
                          NB_GATE_K_MAX);
    for (size_t i = 0; i < n; i++) {
        s->topk[i] = v[i]->token;
        s->logits[i] = v[i]->logit;
    }
    return NB_OK;
}

/* ---- verify ------------------------------------------------------------------------- */

static nb_code ints_to_pb(const nb_gate_step *s, int n, int32_t **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (n <= 0 || !s)
        return NB_OK;
    int32_t *v = nb_jobpb_calloc((size_t)n, sizeof *v);
    if (!v)
        return NB_ENOMEM;
    for (int i = 0; i < n; i++)
        v[i] = s[i].token;
    *out = v;
    *n_out = (size_t)n;
    return NB_OK;
}

/* A localization as a message, NULL (and *ok 0) when out of memory. */
static Npubench__Localization *loc_to_pb(const nb_localization *l, int *ok)
{
    Npubench__Localization *m = malloc(sizeof *m);
    if (!m) {
        *ok = 0;
        return NULL;
    }
    npubench__localization__init(m);
    m->near_tie = l->near_tie;
    m->ref_margin = l->ref_margin;
    m->near_tie_band = l->band;
    m->kv = (int32_t)l->kv;
    m->kv_steps = l->kv_steps;
    m->kv_first_bad_step = l->kv_first_bad;
    m->kv_max_diff = l->kv_max_diff;
    m->kv_tolerance = l->kv_tol;
    m->layers_status = (int32_t)l->layers_status;
    m->step = l->step;
    m->first_layer = l->first_layer;
    m->threshold = l->threshold;
    m->final_norm_cos = l->final_cos;
    m->final_norm_max_abs = l->final_max_abs;
    m->ms = l->ms;
    int good = (m->verdict = nb_jobpb_strdup(l->verdict)) &&
               (m->summary = nb_jobpb_strdup(l->summary)) &&
               (m->source = nb_jobpb_strdup(l->source)) && (m->note = nb_jobpb_strdup(l->note)) &&
               (m->sub_block = nb_jobpb_strdup(l->sub_block));
    int n = l->layers ? l->n_layers : 0;
    if (good && n > 0) {
        good = (m->layers = nb_jobpb_calloc((size_t)n, sizeof *m->layers)) != NULL;
        for (int i = 0; good && i < n; i++) {
            Npubench__LayerState *L = malloc(sizeof *L);
            if (!(good = L != NULL))
                break;
            npubench__layer_state__init(L);
            L->layer = l->layers[i].layer;
            L->cos_attention = l->layers[i].cos_attn;
            L->max_abs_attention = l->layers[i].max_abs_attn;
            L->cos_mlp = l->layers[i].cos_mlp;
            L->max_abs_mlp = l->layers[i].max_abs_mlp;
            m->layers[m->n_layers++] = L;
        }
    }
    if (!good) {
        nb_jobpb_free(m);
        *ok = 0;
        return NULL;
    }
    return m;
}

static int in_range(int32_t x, int lo, int hi)
{
    return x >= lo && x <= hi;
}

/* The message back into v->loc: enums and steps range-checked, strings bounded by the
 * struct's fields (it came off the network). */
nb_code nb_verifypb_localization_from_pb(const Npubench__Localization *m, const char *what,
                                      nb_localization *l, nb_err *err)
{
    memset(l, 0, sizeof *l);
    if (!in_range(m->kv, 0, NB_LOC_KV_FAULT) || !in_range(m->layers_status, 0, NB_LOC_LAYERS_FAULT))
        return nb_err_set(err, NB_EINVAL, "%s.localization: kv %d / layers_status %d: must be 0..2",
                          what, m->kv, m->layers_status);
    if (!in_range(m->kv_first_bad_step, -1, MAX_STEPS) || !in_range(m->step, -1, MAX_STEPS) ||
        !in_range(m->kv_steps, 0, MAX_STEPS) || !in_range(m->first_layer, -1, 65536))
        return nb_err_set(err, NB_EINVAL,
                          "%s.localization: a step or layer outside -1..%d (kv_steps %d, "
                          "kv_first_bad_step %d, step %d, first_layer %d)",
                          what, MAX_STEPS, m->kv_steps, m->kv_first_bad_step, m->step,
                          m->first_layer);
    if (m->n_layers > 65536)
        return nb_err_set(err, NB_EINVAL, "%s.localization.layers: %zu, at most 65536", what,
                          m->n_layers);
    l->present = 1;
    snprintf(l->verdict, sizeof l->verdict, "%s", m->verdict ? m->verdict : "");
    snprintf(l->summary, sizeof l->summary, "%s", m->summary ? m->summary : "");
    snprintf(l->source, sizeof l->source, "%s", m->source ? m->source : "");
    snprintf(l->note, sizeof l->note, "%s", m->note ? m->note : "");
    snprintf(l->sub_block, sizeof l->sub_block, "%s", m->sub_block ? m->sub_block : "");
    l->near_tie = m->near_tie;
    l->ref_margin = m->ref_margin;
    l->band = m->near_tie_band;
    l->kv = (nb_loc_kv)m->kv;
    l->kv_steps = m->kv_steps;
    l->kv_first_bad = m->kv_first_bad_step;
    l->kv_max_diff = m->kv_max_diff;
    l->kv_tol = m->kv_tolerance;
    l->layers_status = (nb_loc_layers)m->layers_status;
    l->step = m->step;
    l->first_layer = m->first_layer;
    l->threshold = m->threshold;
    l->final_cos = m->final_norm_cos;
    l->final_max_abs = m->final_norm_max_abs;
    l->ms = m->ms;
    if (m->n_layers) {
        l->layers = nb_jobpb_calloc(m->n_layers, sizeof *l->layers);
        if (!l->layers)
            return nb_err_set(err, NB_ENOMEM, "out of memory reading %s.localization", what);
        l->n_layers = (int)m->n_layers;
        for (size_t i = 0; i < m->n_layers; i++) {
            const Npubench__LayerState *L = m->layers[i];
            l->layers[i] = (nb_loc_layer){L->layer, L->cos_attention, L->max_abs_attention,
                                          L->cos_mlp, L->max_abs_mlp};
        }
    }
    return NB_OK;
}

/* A decode-path check as a message, NULL when there is none to send or out of memory
 * (then *ok 0). */
static Npubench__DecodeCheck *dcheck_to_pb(const nb_decode_check *c, int *ok)
{
    if (c->status == NB_LOC_KV_UNCHECKED && !c->note[0])
        return NULL;
    Npubench__DecodeCheck *m = malloc(sizeof *m);
    if (!m) {
        *ok = 0;
        return NULL;
    }
    npubench__decode_check__init(m);
    m->steps = c->steps;
    m->first_bad_step = c->first_bad;
    m->max_diff = c->max_diff;
    m->tolerance = c->tol;
    m->ms = c->ms;
    if (!(m->status = nb_jobpb_strdup(nb_decode_check_status_name(c->status))) ||
        !(m->note = nb_jobpb_strdup(c->note))) {
        nb_jobpb_free(m);
        *ok = 0;
        return NULL;
    }
    return m;
}

/* The message back (it came off the network): an unknown status or a step out of range is
 * an error naming the field. */
nb_code nb_verifypb_decode_check_from_pb(const Npubench__DecodeCheck *m, const char *what,
                                      nb_decode_check *c, nb_err *err)
{
    nb_decode_check_init(c);
    if (!m)
        return NB_OK;
    int st = -1;
    for (int i = 0; i <= NB_LOC_KV_FAULT; i++)
        if (m->status && !strcmp(m->status, nb_decode_check_status_name((nb_loc_kv)i)))
            st = i;
    if (st < 0)
        return nb_err_set(err, NB_EINVAL,
                          "%s.decode_check.status '%.32s': expected unchecked, clean or fault",
                          what, m->status ? m->status : "");
    if (!in_range(m->steps, 0, MAX_STEPS) || !in_range(m->first_bad_step, -1, MAX_STEPS))
        return nb_err_set(err, NB_EINVAL,
                          "%s.decode_check: steps %d / first_bad_step %d outside 0..%d / -1..%d",
                          what, m->steps, m->first_bad_step, MAX_STEPS, MAX_STEPS);
    c->status = (nb_loc_kv)st;
    c->steps = m->steps;
    c->first_bad = m->first_bad_step;
    c->max_diff = m->max_diff;
    c->tol = m->tolerance;
    c->ms = m->ms;
    snprintf(c->note, sizeof c->note, "%s", m->note ? m->note : "");
    return NB_OK;
}

static Npubench__GateRecord *gate_to_pb(const nb_verify_result *r, const nb_verify_record *v)
{
    Npubench__GateRecord *g = malloc(sizeof *g);
    if (!g)
        return NULL;
    npubench__gate_record__init(g);
    const nb_gate_result *gr = &v->gate;
    g->index = v->index;
    g->steps = gr->n_steps;
    g->divergence_step = gr->divergence;
    g->device_token = gr->dev_token;
    g->reference_token = gr->ref_token;
    g->device_token_ref_rank = gr->dev_rank_in_ref;
    g->reference_token_dev_rank = gr->ref_rank_in_dev;
    g->status = gr->status == NB_GATE_PASS && !v->strict_fail ? NPUBENCH__OUTCOME__PASS
                                                              : NPUBENCH__OUTCOME__FAIL;
    g->decode_strict_fail = v->strict_fail;
    char dsum[300];
    nb_decode_check_summary(&v->dcheck, dsum, sizeof dsum);
    g->prompt_tokens = v->n_prompt_ids;
    g->prefill_ms = v->prefill_ms;
    g->decode_ms = v->decode_ms;
    g->agreed = gr->agreed;
    /* The step the reports show: the divergence, or the last one compared. */
    int at = gr->divergence >= 0 ? gr->divergence : gr->n_steps - 1;
    g->top_step = at;
    int ok = (g->prompt = nb_jobpb_strdup(v->prompt)) &&
             (g->device_text = nb_jobpb_strdup(v->dev_token_text)) &&
             (g->reference_text = nb_jobpb_strdup(v->ref_token_text)) &&
             (g->agreed_prefix = nb_jobpb_strdup(v->agreed_text)) &&
             (g->fail_reason = nb_jobpb_strdup(v->strict_fail ? dsum : gr->reason)) &&
             (g->device_generation = nb_jobpb_strdup(v->dev_text)) &&
             (g->reference_generation = nb_jobpb_strdup(v->ref_text));
    if (ok && at >= 0 && at < v->n_steps)
        ok = top_to_pb(&v->dev[at], r->k, &g->device_top, &g->n_device_top) == NB_OK;
    if (ok && at >= 0 && at < r->n_tokens)
        ok = top_to_pb(&v->ref[at], r->k, &g->reference_top, &g->n_reference_top) == NB_OK;
    if (ok)
        ok = ints_to_pb(v->dev, v->n_steps, &g->device_tokens, &g->n_device_tokens) == NB_OK &&
             ints_to_pb(v->ref, r->n_tokens, &g->reference_tokens, &g->n_reference_tokens) ==
                 NB_OK;
    if (ok && v->loc.present)
        g->localization = loc_to_pb(&v->loc, &ok);
    if (ok)
        g->decode_check = dcheck_to_pb(&v->dcheck, &ok);
    if (!ok) {
        nb_jobpb_free(g);
        return NULL;
    }
    return g;
}

nb_code nb_verifypb_verify_to_pb(const nb_verify_result *r, Npubench__JobResult *out, nb_err *err)
{
    if (r->n < 0 || (r->n > 0 && !r->recs))
        return nb_err_set(err, NB_EINTERNAL, "verify result: %d records without storage", r->n);
    Npubench__GateRecord **gates = nb_jobpb_calloc((size_t)r->n, sizeof *gates);
    Npubench__VerifySummary *vs = malloc(sizeof *vs);
    if (!gates || !vs) {
        free(gates);
        free(vs);
        return nb_jobpb_oom(err);
    }
    npubench__verify_summary__init(vs);
    vs->k = r->k;
    vs->n_tokens = r->n_tokens;
    vs->wall_ms = r->wall_ms;
    vs->passed = r->n_pass;
    vs->failed = r->n_fail;
    int ok = (vs->prompts_path = nb_jobpb_strdup(r->prompts_path)) &&
             (vs->prompts_sha256 = nb_jobpb_strdup(r->prompts_sha256)) &&
             (vs->trace_path = nb_jobpb_strdup(r->trace_path)) &&
             (vs->trace_sha256 = nb_jobpb_strdup(r->trace_sha256)) &&
             (vs->trace_transformers = nb_jobpb_strdup(r->trace_transformers)) &&
             (vs->trace_torch = nb_jobpb_strdup(r->trace_torch)) &&
             (vs->trace_date = nb_jobpb_strdup(r->trace_date)) &&
             (vs->trace_cpu_model = nb_jobpb_strdup(r->trace_cpu.model)) &&
             (vs->trace_cpu_flags = nb_jobpb_strdup(r->trace_cpu.flags)) &&
             (vs->trace_cpu_capability = nb_jobpb_strdup(r->trace_cpu.capability)) &&
             (vs->trace_dtype = nb_jobpb_strdup(r->trace_dtype)) &&
             (vs->trace_device = nb_jobpb_strdup(r->trace_device));
    vs->decode_faults = r->n_decode_faults;
    vs->strict = r->strict;
    vs->decode_check_ms = r->dcheck_ms;
    int n = 0;
    for (; ok && n < r->n; n++)
        ok = (gates[n] = gate_to_pb(r, &r->recs[n])) != NULL;
    if (!ok) {
        for (int i = 0; i < n; i++)
            nb_jobpb_free(gates[i]);
        free(gates);
        nb_jobpb_free(vs);
        return nb_jobpb_oom(err);
    }
    out->gates = gates;
    out->n_gates = (size_t)r->n;
    out->verify = vs;
    out->outcome =
        r->status == NB_GATE_PASS ? NPUBENCH__OUTCOME__PASS : NPUBENCH__OUTCOME__FAIL;
    return NB_OK;
}

static char *dup_or_null(const char *s, int *ok)
{
    char *d = strdup(s ? s : "");
    if (!d)
        *ok = 0;
    return d;
}

static nb_code gate_from_pb(const Npubench__GateRecord *g, int i, int k, int n_tokens,
                            nb_verify_record *v, nb_err *err)
{
    char what[96];
    snprintf(what, sizeof what, "JobResult.gates[%d]", i);
    if (g->steps < 0 || (size_t)g->steps > g->n_device_tokens ||
        (size_t)g->steps > g->n_reference_tokens)
        return nb_err_set(err, NB_EINVAL,
                          "%s.steps %d: must be 0..min(device_tokens %zu, reference_tokens %zu)",
                          what, g->steps, g->n_device_tokens, g->n_reference_tokens);
    if (g->n_device_tokens > MAX_STEPS || g->n_reference_tokens > MAX_STEPS)
        return nb_err_set(err, NB_EINVAL, "%s: %zu/%zu tokens, at most %d", what,
                          g->n_device_tokens, g->n_reference_tokens, MAX_STEPS);
    if (g->divergence_step < -1 || g->divergence_step >= (g->steps ? g->steps : 1))
        return nb_err_set(err, NB_EINVAL, "%s.divergence_step %d: must be -1..%d", what,
                          g->divergence_step, g->steps - 1);
    if (g->top_step < -1 || g->top_step >= (g->steps ? g->steps : 1) ||
        (g->steps > 0 && g->top_step < 0))
        return nb_err_set(err, NB_EINVAL, "%s.top_step %d: must be -1..%d", what, g->top_step,
                          g->steps - 1);
    if (g->agreed < 0 || g->agreed > g->steps)
        return nb_err_set(err, NB_EINVAL, "%s.agreed %d: must be 0..%d", what, g->agreed,
                          g->steps);
    v->index = g->index;
    v->n_prompt_ids = g->prompt_tokens;
    v->prefill_ms = g->prefill_ms;
    v->decode_ms = g->decode_ms;
    v->n_steps = (int)g->n_device_tokens;
    /* Reports index ref[] up to the result's n_tokens: never allocate less. */
    size_t n_ref = g->n_reference_tokens > (size_t)n_tokens ? g->n_reference_tokens
                                                            : (size_t)n_tokens;
    v->dev = nb_jobpb_calloc(g->n_device_tokens, sizeof *v->dev);
    v->ref = nb_jobpb_calloc(n_ref, sizeof *v->ref);
    int ok = v->dev && v->ref;
    v->prompt = dup_or_null(g->prompt, &ok);
    v->dev_token_text = dup_or_null(g->device_text, &ok);
    v->ref_token_text = dup_or_null(g->reference_text, &ok);
    v->agreed_text = dup_or_null(g->agreed_prefix, &ok);
    v->dev_text = dup_or_null(g->device_generation, &ok);
    v->ref_text = dup_or_null(g->reference_generation, &ok);
    if (!ok)
        return nb_err_set(err, NB_ENOMEM, "out of memory reading %s", what);
    for (size_t s = 0; s < g->n_device_tokens; s++)
        step_of_token(&v->dev[s], g->device_tokens[s]);
    for (size_t s = 0; s < n_ref; s++)
        step_of_token(&v->ref[s], s < g->n_reference_tokens ? g->reference_tokens[s] : -1);
    if (g->top_step >= 0) {
        char w2[128];
        snprintf(w2, sizeof w2, "%s.device_top", what);
        nb_code rc = top_from_pb(g->device_top, g->n_device_top, w2, &v->dev[g->top_step], err);
        if (rc)
            return rc;
        snprintf(w2, sizeof w2, "%s.reference_top", what);
        rc = top_from_pb(g->reference_top, g->n_reference_top, w2, &v->ref[g->top_step], err);
        if (rc)
            return rc;
    }
    nb_gate_result *gr = &v->gate;
    memset(gr, 0, sizeof *gr);
    gr->ref_margin = NAN;
    /* The margin is not sent: it follows from the reference top-k at the divergence. */
    if (g->divergence_step >= 0 && g->top_step == g->divergence_step && g->n_reference_top)
        nb_gate_margin(&v->ref[g->top_step], k < (int)g->n_reference_top ? k
                                                : (int)g->n_reference_top,
                       g->device_token, gr);
    /* a strict run's decode-path FAIL is the gate's PASS (nb_verify_summarise sets it again) */
    gr->status = g->status == NPUBENCH__OUTCOME__PASS || g->decode_strict_fail ? NB_GATE_PASS
                                                                               : NB_GATE_FAIL;
    gr->n_steps = g->steps;
    gr->agreed = g->agreed;
    gr->divergence = g->divergence_step;
    gr->dev_token = g->device_token;
    gr->ref_token = g->reference_token;
    gr->dev_rank_in_ref = g->device_token_ref_rank;
    gr->ref_rank_in_dev = g->reference_token_dev_rank;
    snprintf(gr->reason, sizeof gr->reason, "%s",
             g->fail_reason && !g->decode_strict_fail ? g->fail_reason : "");
    if (g->decode_check) {
        nb_code rc = nb_verifypb_decode_check_from_pb(g->decode_check, what, &v->dcheck, err);
        if (rc)
            return rc;
    } else {
        nb_decode_check_init(&v->dcheck);
    }
    if (g->localization)
        return nb_verifypb_localization_from_pb(g->localization, what, &v->loc, err);
    return NB_OK;
}

nb_code nb_verifypb_verify_from_pb(const Npubench__JobResult *res, nb_verify_result *out,
                                nb_err *err)
{
    memset(out, 0, sizeof *out);
    const Npubench__VerifySummary *vs = res->verify;
    if (!vs)
        return nb_err_set(err, NB_EINVAL, "JobResult.verify: absent (not a verify result)");
    if (vs->k < 1 || vs->k > NB_GATE_K_MAX)
        return nb_err_set(err, NB_EINVAL, "JobResult.verify.k %d: must be 1..%d", vs->k,
                          NB_GATE_K_MAX);
    if (vs->n_tokens < 0 || vs->n_tokens > MAX_STEPS)
        return nb_err_set(err, NB_EINVAL, "JobResult.verify.n_tokens %d: must be 0..%d",
                          vs->n_tokens, MAX_STEPS);
    if (res->n_gates > MAX_RECORDS)
        return nb_err_set(err, NB_EINVAL, "JobResult.gates: %zu records, at most %d",
                          res->n_gates, MAX_RECORDS);
    out->recs = nb_jobpb_calloc(res->n_gates, sizeof *out->recs);
    if (!out->recs)
        return nb_err_set(err, NB_ENOMEM, "out of memory reading JobResult.gates");
    out->k = vs->k;
    out->n_tokens = vs->n_tokens;
    snprintf(out->prompts_path, sizeof out->prompts_path, "%s", vs->prompts_path);
    snprintf(out->prompts_sha256, sizeof out->prompts_sha256, "%s", vs->prompts_sha256);
    snprintf(out->trace_path, sizeof out->trace_path, "%s", vs->trace_path);
    snprintf(out->trace_sha256, sizeof out->trace_sha256, "%s", vs->trace_sha256);
    snprintf(out->trace_transformers, sizeof out->trace_transformers, "%s",
             vs->trace_transformers);
    snprintf(out->trace_torch, sizeof out->trace_torch, "%s", vs->trace_torch);
    snprintf(out->trace_date, sizeof out->trace_date, "%s", vs->trace_date);
    snprintf(out->trace_cpu.model, sizeof out->trace_cpu.model, "%s", vs->trace_cpu_model);
    snprintf(out->trace_cpu.flags, sizeof out->trace_cpu.flags, "%s", vs->trace_cpu_flags);
    snprintf(out->trace_cpu.capability, sizeof out->trace_cpu.capability, "%s",
             vs->trace_cpu_capability);
    snprintf(out->trace_dtype, sizeof out->trace_dtype, "%s", vs->trace_dtype);
    snprintf(out->trace_device, sizeof out->trace_device, "%s", vs->trace_device);
    out->wall_ms = vs->wall_ms;
    for (size_t i = 0; i < res->n_gates; i++) {
        /* counted before filling, so nb_verify_result_free releases partial records */
        out->n++;
        nb_code rc = gate_from_pb(res->gates[i], (int)i, vs->k, vs->n_tokens, &out->recs[i], err);
        if (rc) {
            nb_verify_result_free(out);
            return rc;
        }
    }
    out->strict = vs->strict;
    nb_verify_summarise(out);
    return NB_OK;
}

/* ---- diagnosis ---------------------------------------------------------------------- */

nb_code nb_verifypb_diagnosis_to_pb(const nb_diagnosis_result *r, Npubench__JobResult *out,
                                 nb_err *err)
{
    if (r->n_layers < 0 || (r->n_layers > 0 && !r->layers))
        return nb_err_set(err, NB_EINTERNAL, "diagnosis result: %d layers without storage",
                          r->n_layers);
    Npubench__LayerCosine **c = nb_jobpb_calloc((size_t)r->n_layers, sizeof *c);
    Npubench__DiagnosisSummary *ds = malloc(sizeof *ds);
    int ok = c && ds;
    int n = 0;
    if (ds) {
        npubench__diagnosis_summary__init(ds);
        ds->positions = r->n_pos;
        ds->k = r->k;
        ok = ok && (ds->prompt = nb_jobpb_strdup(r->prompt)) &&
             (ds->trace_path = nb_jobpb_strdup(r->trace_path)) &&
             (ds->trace_sha256 = nb_jobpb_strdup(r->trace_sha256)) &&
             top_to_pb(&r->dev_final, r->k, &ds->device_top, &ds->n_device_top) == NB_OK &&
             top_to_pb(&r->ref_final, r->k, &ds->reference_top, &ds->n_reference_top) == NB_OK;
    }
    for (; ok && n < r->n_layers; n++) {
        const nb_diagnosis_layer *L = &r->layers[n];
        Npubench__LayerCosine *lc = malloc(sizeof *lc);
        if (!(ok = lc != NULL))
            break;
        npubench__layer_cosine__init(lc);
        c[n] = lc;
        char name[32];
        snprintf(name, sizeof name, "L%d", L->layer);
        lc->layer = L->layer;
        lc->post_norm = L->post_norm != 0;
        lc->min = L->s.min;
        lc->p5 = L->s.p5;
        lc->median = L->s.median;
        lc->mean = L->s.mean;
        lc->max_abs = L->s.max_abs;
        ok = (lc->name = nb_jobpb_strdup(name)) != NULL;
    }
    if (!ok) {
        for (int i = 0; c && i < n; i++)
            nb_jobpb_free(c[i]);
        free(c);
        nb_jobpb_free(ds);
        return nb_jobpb_oom(err);
    }
    out->cosines = c;
    out->n_cosines = (size_t)r->n_layers;
    out->diagnosis = ds;
    out->outcome = NPUBENCH__OUTCOME__PASS;
    return NB_OK;
}

nb_code nb_verifypb_diagnosis_from_pb(const Npubench__JobResult *res, nb_diagnosis_result *out,
                                   nb_err *err)
{
    memset(out, 0, sizeof *out);
    const Npubench__DiagnosisSummary *ds = res->diagnosis;
    if (!ds)
        return nb_err_set(err, NB_EINVAL, "JobResult.diagnosis: absent (not a diagnosis result)");
    if (ds->k < 0 || ds->k > NB_GATE_K_MAX)
        return nb_err_set(err, NB_EINVAL, "JobResult.diagnosis.k %d: must be 0..%d", ds->k,
                          NB_GATE_K_MAX);
    if (res->n_cosines > MAX_LAYERS)
        return nb_err_set(err, NB_EINVAL, "JobResult.cosines: %zu layers, at most %d",
                          res->n_cosines, MAX_LAYERS);
    nb_code rc = top_from_pb(ds->device_top, ds->n_device_top, "JobResult.diagnosis.device_top",
                             &out->dev_final, err);
    if (!rc)
        rc = top_from_pb(ds->reference_top, ds->n_reference_top,
                         "JobResult.diagnosis.reference_top", &out->ref_final, err);
    if (rc)
        return rc;
    out->dev_final.token = ds->n_device_top ? out->dev_final.topk[0] : -1;
    out->ref_final.token = ds->n_reference_top ? out->ref_final.topk[0] : -1;
    out->layers = nb_jobpb_calloc(res->n_cosines, sizeof *out->layers);
    if (!out->layers)
        return nb_err_set(err, NB_ENOMEM, "out of memory reading JobResult.cosines");
    snprintf(out->prompt, sizeof out->prompt, "%s", ds->prompt);
    snprintf(out->trace_path, sizeof out->trace_path, "%s", ds->trace_path);
    snprintf(out->trace_sha256, sizeof out->trace_sha256, "%s", ds->trace_sha256);
    out->n_pos = ds->positions;
    out->k = ds->k;
    out->n_layers = (int)res->n_cosines;
    for (size_t i = 0; i < res->n_cosines; i++) {
        const Npubench__LayerCosine *c = res->cosines[i];
        nb_diagnosis_layer *L = &out->layers[i];
        L->layer = c->layer;
        L->post_norm = c->post_norm;
        L->s = (nb_cos_stats){c->min, c->p5, c->median, c->mean, c->max_abs};
    }
    return NB_OK;
}

void nb_verifypb_env_to_report(const Npubench__Environment *e, nb_report_env *out)
{
    memset(out, 0, sizeof *out);
    const char *model = e->model_path && *e->model_path ? e->model_path : e->model;
    snprintf(out->model, sizeof out->model, "%s", model ? model : "");
    snprintf(out->model_sha256, sizeof out->model_sha256, "%s", e->model_digest);
    snprintf(out->backend, sizeof out->backend, "%s", e->backend);
    snprintf(out->dtype, sizeof out->dtype, "%s", e->dtype);
    snprintf(out->board, sizeof out->board, "%s", e->board);
    out->threads = e->threads;
    snprintf(out->isa, sizeof out->isa, "%s", e->kernels_isa);
}

/* ---- compare -------------------------------------------------------------------------- */

json_object *nb_verifypb_compare_rows_json(const Npubench__CompareResponse *resp)
{
    json_object *rows = json_object_new_array();
    for (size_t i = 0; i < resp->n_rows; i++) {
        const Npubench__CompareRow *r = resp->rows[i];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "metric", json_object_new_string(r->metric ? r->metric : ""));
        json_object_object_add(o, "base_value", json_object_new_double(r->base_value));
        json_object_object_add(o, "value", json_object_new_double(r->value));
        json_object_object_add(o, "delta_pct", json_object_new_double(r->delta_pct));
        json_object_object_add(o, "regression", json_object_new_boolean(r->regression != 0));
        json_object_object_add(o, "p_value",
                               r->p_value >= 0 ? json_object_new_double(r->p_value) : NULL);
        json_object_object_add(o, "n", json_object_new_int64(r->n));
        json_object_object_add(o, "base_n", json_object_new_int64(r->base_n));
        json_object_object_add(o, "significant", json_object_new_boolean(r->significant != 0));
        json_object_array_add(rows, o);
    }
    return rows;
}
