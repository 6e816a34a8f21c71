/* nb_verify_run: prompt set + trace + deployment -> per-prompt gate records.
 * Refuses to compare unless our tokenizer reproduces the reference's prompt ids exactly. */
#include "nb_verify_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_file.h"
#include "nb_generate.h"
#include "nb_localize_run.h"
#include "nb_time.h"
#include "nb_utf8.h"

static char *decode_ids(const nb_tokenizer *t, const int32_t *ids, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    nb_err e;
    if (nb_tokenizer_decode(t, ids, n, 0, &text, &len, &e) != NB_OK)
        return strdup("<undecodable>");
    char *clean = nb_utf8_sanitize(text, len);
    free(text);
    return clean;
}

static char *decode_steps(const nb_tokenizer *t, const nb_gate_step *s, int n)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!ids)
        return NULL;
    for (int i = 0; i < n; i++)
        ids[i] = s[i].token;
    char *r = decode_ids(t, ids, (size_t)n);
    free(ids);
    return r;
}

static nb_code check_ids(const nb_trace_prompt *tp, const int32_t *ids, size_t n, int idx,
                         const char *whose, nb_err *err)
{
    if ((int)n != tp->n_ids || memcmp(ids, tp->ids, n * sizeof *ids)) {
        size_t at = 0;
        while (at < n && (int)at < tp->n_ids && ids[at] == tp->ids[at])
            at++;
        return nb_err_set(err, NB_EMISMATCH,
                          "prompt %d: %s tokenizer gives %zu ids, the reference used %d (first "
                          "difference at position %zu); both sides must decode from identical "
                          "input — regenerate the trace with `make hf-reference` or fix the "
                          "tokenizer",
                          idx, whose, n, tp->n_ids, at);
    }
    return NB_OK;
}

/* The localization of a record that asks for one; a localization that cannot be made says
 * why in its note and never costs the record its verdict. */
static void localize_record(nb_deploy *d, const nb_trace_prompt *tp, const int32_t *ids,
                            int n_ids, int k, nb_localize_when when, nb_verify_record *rec)
{
    const nb_gate_result *g = &rec->gate;
    if (g->divergence < 0 || when == NB_LOCALIZE_OFF ||
        (when == NB_LOCALIZE_FAIL && g->status == NB_GATE_PASS))
        return;
    nb_err e;
    if (nb_localize_run(d, ids, n_ids, rec->dev, k, g, tp, &rec->loc, &e) == NB_OK)
        return;
    double ms = rec->loc.ms;
    memset(&rec->loc, 0, sizeof rec->loc);
    rec->loc.kv_first_bad = rec->loc.step = rec->loc.first_layer = -1;
    rec->loc.present = 1;
    rec->loc.ms = ms;
    snprintf(rec->loc.note, sizeof rec->loc.note, "localization failed: %.200s", e.msg);
    nb_localize_finish(&rec->loc, g);
}

static nb_code verify_prompt(nb_deploy *d, const nb_trace_prompt *tp, int idx, int n_tokens,
                             int k, const nb_cancel *cancel, const nb_token_hook *tok,
                             nb_localize_when when, nb_verify_record *rec, nb_err *err)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    nb_code rc = nb_tokenizer_encode(d->tok, tp->text, strlen(tp->text), 1, 1, &ids, &n_ids, err);
    if (rc)
        return nb_err_prefix(err, "prompt %d: ", idx);
    if ((rc = check_ids(tp, ids, n_ids, idx, "our", err))) {
        free(ids);
        return rc;
    }
    /* A backend that tokenizes on its own (an air adapter) must give the very same ids. */
    int32_t *own = NULL;
    int n_own = 0;
    nb_err e2;
    rc = nb_deploy_backend_tokenize(d, tp->text, &own, &n_own, &e2);
    if (rc == NB_OK)
        rc = check_ids(tp, own, (size_t)n_own, idx, "the backend's", err);
    else if (rc == NB_EUNSUPPORTED)
        rc = NB_OK;
    else
        *err = e2;
    free(own);
    if (rc) {
        free(ids);
        return rc;
    }
    nb_gen g;
    nb_gen_opts go = {.n_tokens = n_tokens, .k = k, .stop_eog = 0, .cancel = *cancel,
                      .on_token = *tok};
    rc = nb_generate(d, ids, (int)n_ids, &go, &g, err);
    if (rc) {
        free(ids);
        return nb_err_prefix(err, "prompt %d: ", idx);
    }
    rec->index = idx;
    rec->prompt = strdup(tp->text);
    rec->n_prompt_ids = (int)n_ids;
    rec->n_steps = g.n_steps;
    rec->dev = g.steps;
    g.steps = NULL;
    rec->ref = malloc(sizeof(nb_gate_step) * (size_t)n_tokens);
    rec->prefill_ms = g.prefill_ms;
    rec->decode_ms = g.decode_ms;
    nb_gen_free(&g);
    if (!rec->prompt || !rec->ref) {
        free(ids);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    memcpy(rec->ref, tp->steps, sizeof(nb_gate_step) * (size_t)n_tokens);
    nb_gate_check(rec->dev, rec->n_steps, rec->ref, n_tokens, k, &rec->gate);
    /* the gate cannot see a decode defect whose tokens stay in the top-k: check the decode
     * path on every record; a check that cannot run says why and costs no verdict */
    nb_err de;
    nb_decode_check_run(d, ids, (int)n_ids, rec->dev, rec->n_steps, k, NB_DECODE_CHECK_STEPS,
                        &rec->dcheck, &de);
    localize_record(d, tp, ids, (int)n_ids, k, when, rec);
    free(ids);
    rec->agreed_text = decode_steps(d->tok, rec->dev, rec->gate.agreed);
    rec->dev_text = decode_steps(d->tok, rec->dev, rec->n_steps);
    rec->ref_text = decode_steps(d->tok, rec->ref, n_tokens);
    if (rec->gate.divergence >= 0) {
        rec->dev_token_text = decode_ids(d->tok, &rec->gate.dev_token, 1);
        rec->ref_token_text = decode_ids(d->tok, &rec->gate.ref_token, 1);
    } else {
        rec->dev_token_text = strdup("");
        rec->ref_token_text = strdup("");
    }
    if (!rec->agreed_text || !rec->dev_text || !rec->ref_text || !rec->dev_token_text ||
        !rec->ref_token_text)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    return NB_OK;
}

/* What one run compares: steps per prompt, top-k, and the prompts [first, last). */
typedef struct plan {
    int n_tokens, k, first, last;
} plan;

/* Whether the trace's prompts are ps's, text for text: the same set in another file (its
 * comments and blank lines gone, as a job's prompts travel), whose digest differs. */
static int same_texts(const nb_trace *tr, const nb_prompts *ps)
{
    if (tr->n_prompts != ps->n)
        return 0;
    for (int i = 0; i < ps->n; i++)
        if (!tr->prompts[i].text || strcmp(tr->prompts[i].text, ps->items[i]))
            return 0;
    return 1;
}

/* The prompt set's digest: its file's, or (a copy) the original's as the caller says, when
 * that is a digest at all (it names a trace file: hex only). */
static const char *set_digest(const nb_verify_opts *o, const nb_prompts *ps)
{
    const char *h = o->prompts_sha256;
    if (!h || strlen(h) != 64 || strspn(h, "0123456789abcdef") != 64)
        return ps->sha256;
    return h;
}

/* The trace must be of this model and this very prompt set. */
static nb_code check_trace(const nb_trace *tr, const nb_deploy *d, const nb_prompts *ps,
                           const char *ppath, nb_err *err)
{
    if (strcmp(tr->model_sha256, d->model_sha256))
        return nb_err_set(err, NB_EMISMATCH, "%s: made for model %.16s, deployment has %.16s",
                          tr->path, tr->model_sha256, d->model_sha256);
    if ((strcmp(tr->prompts_sha256, ps->sha256) && !same_texts(tr, ps)) ||
        tr->n_prompts != ps->n)
        return nb_err_set(err, NB_EMISMATCH,
                          "%s: made for prompt set %.16s (%d prompts), %s is %.16s (%d prompts); "
                          "regenerate with `make hf-reference`",
                          tr->path, tr->prompts_sha256, tr->n_prompts, ppath, ps->sha256, ps->n);
    return NB_OK;
}

/* The options against the trace: no more steps nor a wider top-k than it kept, a prompt
 * range within the set, each prompt of it the set's line with steps enough. */
static nb_code make_plan(const nb_verify_opts *o, const nb_trace *tr, const nb_prompts *ps,
                         const char *ppath, plan *p, nb_err *err)
{
    p->n_tokens = o->n_tokens ? o->n_tokens : tr->n_tokens;
    p->k = o->k ? o->k : tr->k;
    if (p->n_tokens < 1 || p->n_tokens > tr->n_tokens)
        return nb_err_set(err, NB_EINVAL, "n_tokens %d: the reference has %d steps per prompt",
                          p->n_tokens, tr->n_tokens);
    if (p->k < 1 || p->k > tr->k)
        return nb_err_set(err, NB_EINVAL, "k %d: the reference kept top-%d", p->k, tr->k);
    int total = ps->n;
    if (o->max_prompts < 0 || o->first < 0 || o->count < 0)
        return nb_err_set(err, NB_EINVAL, "max_prompts/first/count must be >= 0");
    if (o->max_prompts > 0 && o->max_prompts < total)
        total = o->max_prompts;
    p->first = o->first;
    p->last = o->count ? o->first + o->count : total;
    if (p->first >= total || p->last > total)
        return nb_err_set(err, NB_EINVAL, "prompt range [%d, %d) outside the set's %d prompts",
                          p->first, p->last, total);
    for (int i = p->first; i < p->last; i++)
        if (tr->prompts[i].n_steps < p->n_tokens || strcmp(tr->prompts[i].text, ps->items[i]))
            return nb_err_set(err, NB_EMISMATCH, "%s: prompt %d differs from %s line or is short",
                              tr->path, i, ppath);
    return NB_OK;
}

/* The result's records and the provenance of what it compares against. */
static nb_code start_result(nb_verify_result *out, const plan *p, const char *ppath,
                            const nb_prompts *ps, const nb_trace *tr, nb_err *err)
{
    out->recs = calloc((size_t)(p->last - p->first), sizeof *out->recs);
    if (!out->recs)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    out->k = p->k;
    out->n_tokens = p->n_tokens;
    snprintf(out->prompts_path, sizeof out->prompts_path, "%s", ppath);
    snprintf(out->prompts_sha256, sizeof out->prompts_sha256, "%s", ps->sha256);
    snprintf(out->trace_path, sizeof out->trace_path, "%s", tr->path);
    snprintf(out->trace_sha256, sizeof out->trace_sha256, "%s", tr->sha256);
    snprintf(out->trace_transformers, sizeof out->trace_transformers, "%s", tr->transformers);
    snprintf(out->trace_torch, sizeof out->trace_torch, "%s", tr->torch);
    snprintf(out->trace_date, sizeof out->trace_date, "%s", tr->date);
    out->trace_cpu = tr->cpu;
    snprintf(out->trace_dtype, sizeof out->trace_dtype, "%s", tr->dtype);
    snprintf(out->trace_device, sizeof out->trace_device, "%s", tr->device);
    return NB_OK;
}

/* Each prompt of the plan in turn, until the first error or a cancel; progress after each. */
static nb_code run_prompts(nb_deploy *d, const nb_verify_opts *o, const nb_trace *tr,
                           const plan *p, nb_verify_result *out, nb_err *err)
{
    nb_code rc = NB_OK;
    nb_cancel cancel = {o->cancelled, o->progress_user};
    if (o->progress) /* the total from the start, so the first prompt's tokens have one */
        o->progress(o->progress_user, 0, p->last - p->first, "verifying");
    for (int i = p->first; i < p->last; i++) {
        if (nb_cancel_requested(&cancel))
            return nb_err_set(err, NB_ECANCELED, "verify cancelled after %d of %d prompts",
                              out->n, p->last - p->first);
        rc = verify_prompt(d, &tr->prompts[i], i, p->n_tokens, p->k, &cancel, &o->on_token,
                           o->localize, &out->recs[out->n], err);
        out->n++;
        if (rc)
            return rc;
        if (o->progress) {
            char msg[96];
            snprintf(msg, sizeof msg, "prompt %d: %s", i,
                     out->recs[out->n - 1].gate.status == NB_GATE_PASS ? "PASS" : "FAIL");
            o->progress(o->progress_user, out->n, p->last - p->first, msg);
        }
    }
    return rc;
}

nb_code nb_verify_run(nb_deploy *d, const nb_verify_opts *o, nb_verify_result *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    double t0 = nb_now_ms();
    char ppath[1024];
    if (o->prompts_file)
        snprintf(ppath, sizeof ppath, "%s", o->prompts_file);
    else
        nb_verify_default_prompts(d->preset, ppath, sizeof ppath);
    nb_prompts ps;
    nb_code rc = nb_prompts_load(ppath, &ps, err);
    if (rc)
        return rc;
    nb_trace *tr = NULL;
    if (o->reference)
        rc = nb_trace_load(o->reference, &tr, err);
    else
        rc = nb_trace_find(o->refdir ? o->refdir : nb_verify_default_refdir(), d->model_sha256,
                           set_digest(o, &ps), 0, &tr, err);
    plan p = {0};
    if (!rc)
        rc = check_trace(tr, d, &ps, ppath, err);
    if (!rc)
        rc = make_plan(o, tr, &ps, ppath, &p, err);
    if (!rc) {
        /* recorded as the set it is (the original file's digest), not as the copy's */
        if (strcmp(set_digest(o, &ps), ps.sha256) && same_texts(tr, &ps))
            snprintf(ps.sha256, sizeof ps.sha256, "%s", set_digest(o, &ps));
        rc = start_result(out, &p, ppath, &ps, tr, err);
    }
    if (!rc) {
        out->strict = o->strict;
        rc = run_prompts(d, o, tr, &p, out, err);
        nb_verify_summarise(out);
        out->wall_ms = nb_now_ms() - t0;
    }
    nb_trace_free(tr);
    nb_prompts_free(&ps);
    if (rc)
        nb_verify_result_free(out);
    return rc;
}
