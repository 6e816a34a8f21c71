/* nb_benchpb: run and profile results (engine/nb_bench) <-> npubench.Metrics and the profile's
 * phases and kernels, built from plain malloc blocks (nb_jobpb's rule); from_pb checks every
 * count and name, never trusting the message. */
#include "nb_benchpb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a reported message may ask from_pb to allocate. */
#define MAX_SAMPLES 100000

/* ---- run ---------------------------------------------------------------------------- */

nb_code nb_benchpb_run_to_pb(const nb_run_result *r, int warmup, Npubench__Metrics **out,
                           nb_err *err)
{
    *out = NULL;
    if (r->n < 1 || !r->samples)
        return nb_err_set(err, NB_EINTERNAL, "run result without samples");
    Npubench__Metrics *m = malloc(sizeof *m);
    if (!m)
        return nb_jobpb_oom(err);
    npubench__metrics__init(m);
    m->samples = nb_jobpb_calloc((size_t)r->n, sizeof *m->samples);
    int ok = m->samples != NULL;
    double lat = 0;
    for (int i = 0; ok && i < r->n; i++) {
        const nb_run_sample *s = &r->samples[i];
        Npubench__Sample *p = malloc(sizeof *p);
        if (!(ok = p != NULL))
            break;
        npubench__sample__init(p);
        p->rep = i;
        p->ttft_ms = s->ttft_ms;
        p->tps = s->tps;
        p->decode_ms_per_token = s->decode_ms_per_token;
        p->tpot_ms = s->tpot_ms;
        p->prompt_tokens = s->prompt_tokens;
        p->generated_tokens = s->generated_tokens;
        p->latency_ms = s->latency_ms;
        p->tokenize_ms = s->tokenize_ms;
        p->decode_ms = s->decode_ms;
        m->samples[m->n_samples++] = p;
        lat += s->latency_ms;
    }
    if (ok) {
        const nb_run_sample *last = &r->samples[r->n - 1];
        m->ttft_ms = r->ttft_ms.mean;
        m->tps = r->tps.mean;
        m->decode_ms_per_token = r->decode_ms_per_token.mean;
        m->tpot_ms = r->tpot_ms.mean;
        m->ttft_ms_stddev = r->ttft_ms.stddev;
        m->tps_stddev = r->tps.stddev;
        m->decode_ms_per_token_stddev = r->decode_ms_per_token.stddev;
        m->tpot_ms_stddev = r->tpot_ms.stddev;
        m->prompt_tokens = last->prompt_tokens;
        m->generated_tokens = last->generated_tokens;
        m->setup_ms = r->setup_ms;
        m->latency_ms = lat / r->n;
        m->warmup = warmup;
        ok = (m->text = nb_jobpb_strdup(r->text)) &&
             (m->prompt_text = nb_jobpb_strdup(r->prompt_text));
    }
    if (!ok) {
        nb_jobpb_free(m);
        return nb_jobpb_oom(err);
    }
    *out = m;
    return NB_OK;
}

nb_code nb_benchpb_run_from_pb(const Npubench__Metrics *m, nb_run_result *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (m->n_samples < 1 || m->n_samples > MAX_SAMPLES)
        return nb_err_set(err, NB_EINVAL, "Metrics.samples: %zu, must be 1..%d", m->n_samples,
                          MAX_SAMPLES);
    out->samples = nb_jobpb_calloc(m->n_samples, sizeof *out->samples);
    out->text = strdup(m->text ? m->text : "");
    out->prompt_text = strdup(m->prompt_text ? m->prompt_text : "");
    if (!out->samples || !out->text || !out->prompt_text) {
        nb_run_result_free(out);
        return nb_err_set(err, NB_ENOMEM, "out of memory reading Metrics");
    }
    for (size_t i = 0; i < m->n_samples; i++) {
        const Npubench__Sample *p = m->samples[i];
        nb_run_sample *s = &out->samples[i];
        s->tokenize_ms = p->tokenize_ms;
        s->ttft_ms = p->ttft_ms;
        s->decode_ms = p->decode_ms;
        s->latency_ms = p->latency_ms;
        s->tps = p->tps;
        s->decode_ms_per_token = p->decode_ms_per_token;
        s->tpot_ms = p->tpot_ms;
        s->prompt_tokens = p->prompt_tokens;
        s->generated_tokens = p->generated_tokens;
    }
    out->n = (int)m->n_samples;
    out->ttft_ms = (nb_stat){m->ttft_ms, m->ttft_ms_stddev};
    out->tps = (nb_stat){m->tps, m->tps_stddev};
    out->decode_ms_per_token = (nb_stat){m->decode_ms_per_token, m->decode_ms_per_token_stddev};
    out->tpot_ms = (nb_stat){m->tpot_ms, m->tpot_ms_stddev};
    out->setup_ms = m->setup_ms;
    return NB_OK;
}

/* ---- profile ------------------------------------------------------------------------ */

static Npubench__ProfilePhase *phase_new(const char *name, int64_t calls, double avg,
                                         double sd)
{
    Npubench__ProfilePhase *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    npubench__profile_phase__init(p);
    if (!(p->name = nb_jobpb_strdup(name))) {
        free(p);
        return NULL;
    }
    p->calls = calls;
    p->avg_ms = avg;
    p->total_ms = avg * (double)calls;
    p->stddev_ms = sd;
    return p;
}

nb_code nb_benchpb_profile_to_pb(const nb_profile_result *p, int warmup, Npubench__JobResult *out,
                               nb_err *err)
{
    Npubench__Metrics *m = NULL;
    nb_code rc = nb_benchpb_run_to_pb(&p->run, warmup, &m, err);
    if (rc)
        return rc;
    m->requested_tokens = p->n_tokens;
    int dec = p->run.samples[p->run.n - 1].generated_tokens - 1;
    const nb_op_stats *lm = &p->ops[NB_OP_LM_HEAD];
    Npubench__ProfilePhase **ph = nb_jobpb_calloc(4, sizeof *ph);
    Npubench__ProfileKernel **kv = nb_jobpb_calloc(NB_OP_COUNT, sizeof *kv);
    int ok = ph && kv;
    size_t nph = 0, nk = 0;
    if (ok) {
        ph[nph] = phase_new("setup", 1, p->setup_ms, 0.0);
        ok = ph[nph++] != NULL;
    }
    if (ok) {
        ph[nph] = phase_new("prefill", p->reps, p->prefill_ms.mean, p->prefill_ms.stddev);
        ok = ph[nph++] != NULL;
    }
    if (ok) {
        ph[nph] = phase_new("decode", (int64_t)p->reps * (dec > 0 ? dec : 0),
                            p->decode_avg_ms.mean, p->decode_avg_ms.stddev);
        ok = ph[nph++] != NULL;
    }
    if (ok) {
        ph[nph] = phase_new("lm_head", lm->calls, p->lm_head_ms, 0.0);
        ok = ph[nph++] != NULL;
    }
    for (int i = 0; ok && i < NB_OP_COUNT; i++) {
        const nb_op_stats *s = &p->ops[i];
        if (!s->calls)
            continue;
        Npubench__ProfileKernel *k = malloc(sizeof *k);
        if (!(ok = k != NULL))
            break;
        npubench__profile_kernel__init(k);
        kv[nk++] = k;
        k->calls = s->calls;
        k->total_ms = s->total_ms;
        k->avg_ms = s->total_ms / (double)s->calls;
        ok = (k->name = nb_jobpb_strdup(nb_op_name((nb_op)i))) &&
             (k->device = nb_jobpb_strdup("cpu"));
    }
    if (!ok) {
        for (size_t i = 0; ph && i < nph; i++)
            nb_jobpb_free(ph[i]);
        for (size_t i = 0; kv && i < nk; i++)
            nb_jobpb_free(kv[i]);
        free(ph);
        free(kv);
        nb_jobpb_free(m);
        return nb_jobpb_oom(err);
    }
    out->metrics = m;
    out->phases = ph;
    out->n_phases = nph;
    out->kernels = kv;
    out->n_kernels = nk;
    out->outcome = NPUBENCH__OUTCOME__PASS;
    return NB_OK;
}

nb_code nb_benchpb_profile_from_pb(const Npubench__JobResult *res, nb_profile_result *out,
                                 nb_err *err)
{
    memset(out, 0, sizeof *out);
    if (!res->metrics)
        return nb_err_set(err, NB_EINVAL, "JobResult.metrics: absent (not a profile result)");
    nb_code rc = nb_benchpb_run_from_pb(res->metrics, &out->run, err);
    if (rc)
        return rc;
    out->reps = out->run.n;
    out->n_tokens = res->metrics->requested_tokens;
    out->prompt_tokens = out->run.samples[0].prompt_tokens;
    out->setup_ms = res->metrics->setup_ms;
    for (size_t i = 0; i < res->n_phases; i++) {
        const Npubench__ProfilePhase *p = res->phases[i];
        if (!strcmp(p->name, "setup"))
            out->setup_ms = p->avg_ms;
        else if (!strcmp(p->name, "prefill"))
            out->prefill_ms = (nb_stat){p->avg_ms, p->stddev_ms};
        else if (!strcmp(p->name, "decode"))
            out->decode_avg_ms = (nb_stat){p->avg_ms, p->stddev_ms};
        else if (!strcmp(p->name, "lm_head"))
            out->lm_head_ms = p->avg_ms;
        /* other phases (other backends') have no slot here */
    }
    for (size_t i = 0; i < res->n_kernels; i++) {
        const Npubench__ProfileKernel *k = res->kernels[i];
        int op = -1;
        for (int j = 0; j < NB_OP_COUNT && op < 0; j++)
            if (!strcmp(k->name, nb_op_name((nb_op)j)))
                op = j;
        if (op < 0) {
            nb_profile_result_free(out);
            return nb_err_set(err, NB_EINVAL, "JobResult.kernels[%zu].name '%.64s': not a cpu op",
                              i, k->name);
        }
        if (k->calls < 0) {
            nb_profile_result_free(out);
            return nb_err_set(err, NB_EINVAL, "JobResult.kernels[%zu].calls %lld: negative", i,
                              (long long)k->calls);
        }
        out->ops[op].calls = (long)k->calls;
        out->ops[op].total_ms = k->total_ms;
    }
    return NB_OK;
}
