/* nb_report: builds report documents with json-c and renders the same data as Markdown.
 * The JSON is also what workers ship back to the coordinator and what the history stores. */
#include "nb_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_job.h"
#include "nb_file.h"
#include "nb_json.h"
#include "nb_time.h"
#include "nb_version.h"

static json_object *ids_json(const nb_gate_step *s, int k)
{
    json_object *a = json_object_new_array();
    for (int i = 0; i < k; i++)
        json_object_array_add(a, json_object_new_int(s->topk[i]));
    return a;
}

json_object *nb_report_env_json(const nb_report_env *env)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "model", nb_json_new_str(env->model));
    json_object_object_add(o, "model_sha256", nb_json_new_str(env->model_sha256));
    json_object_object_add(o, "backend", nb_json_new_str(env->backend));
    json_object_object_add(o, "dtype", nb_json_new_str(env->dtype));
    json_object_object_add(o, "board", nb_json_new_str(env->board));
    json_object_object_add(o, "threads", json_object_new_int(env->threads));
    json_object_object_add(o, "kernels", nb_json_new_str(env->isa));
    json_object_object_add(o, "npubench", nb_json_new_str(NB_VERSION));
    json_object_object_add(o, "commit", nb_json_new_str(nb_commit()));
    return o;
}

json_object *nb_report_json_open(const char *kind)
{
    json_object *root = json_object_new_object();
    char iso[32];
    nb_time_iso(iso, nb_wall_ms());
    json_object_object_add(root, "kind", nb_json_new_str(kind));
    json_object_object_add(root, "timestamp_utc", nb_json_new_str(iso));
    return root;
}

/* "ref margin 0.125 (near tie)", "ref margin > 3.250" (device token outside the reference
 * top-k), or "" when the traces do not diverge. */
static void margin_text(const nb_gate_result *g, char *buf, size_t cap)
{
    if (isnan(g->ref_margin))
        buf[0] = '\0';
    else
        snprintf(buf, cap, "ref margin %s%.3f%s", g->ref_margin_beyond ? "> " : "",
                 g->ref_margin,
                 nb_gate_is_near_tie(g) ? " (near tie)" : "");
}

/* The reference's CPU in one line, or why it is unknown. */
static void cpu_text(const nb_trace_cpu *c, char *buf, size_t cap)
{
    if (!c->model[0] && !c->capability[0])
        snprintf(buf, cap, "not recorded (trace predates CPU provenance)");
    else
        snprintf(buf, cap, "%s (torch %s; %s)", c->model[0] ? c->model : "?",
                 c->capability[0] ? c->capability : "?", c->flags[0] ? c->flags : "no flags");
}

static json_object *cpu_json(const nb_trace_cpu *c)
{
    if (!c->model[0] && !c->capability[0])
        return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "model", nb_json_new_str(c->model));
    json_object_object_add(o, "flags", nb_json_new_str(c->flags));
    json_object_object_add(o, "torch_capability", nb_json_new_str(c->capability));
    return o;
}

json_object *nb_report_verify_json(const nb_verify_result *r, const nb_report_env *env,
                                   const char *kind)
{
    json_object *root = nb_report_json_open(kind);
    json_object *cfg = nb_report_env_json(env);
    json_object_object_add(cfg, "n_tokens", json_object_new_int(r->n_tokens));
    json_object_object_add(cfg, "k", json_object_new_int(r->k));
    json_object_object_add(cfg, "prompts_file", nb_json_new_str(r->prompts_path));
    json_object_object_add(cfg, "prompts_sha256", nb_json_new_str(r->prompts_sha256));
    json_object *ref = json_object_new_object();
    json_object_object_add(ref, "trace", nb_json_new_str(r->trace_path));
    json_object_object_add(ref, "trace_sha256", nb_json_new_str(r->trace_sha256));
    json_object_object_add(ref, "transformers", nb_json_new_str(r->trace_transformers));
    json_object_object_add(ref, "torch", nb_json_new_str(r->trace_torch));
    json_object_object_add(ref, "date", nb_json_new_str(r->trace_date));
    json_object_object_add(ref, "dtype", nb_json_new_str(r->trace_dtype));
    json_object_object_add(ref, "device", nb_json_new_str(r->trace_device));
    char warn[300];
    if (*nb_verify_trace_warning(r, warn, sizeof warn))
        json_object_object_add(ref, "warning", nb_json_new_str(warn));
    json_object_object_add(ref, "cpu", cpu_json(&r->trace_cpu));
    json_object_object_add(cfg, "reference", ref);
    json_object_object_add(root, "config", cfg);
    json_object *prompts = json_object_new_array();
    json_object *recs = json_object_new_array();
    for (int i = 0; i < r->n; i++) {
        const nb_verify_record *v = &r->recs[i];
        json_object_array_add(prompts, nb_json_new_str(v->prompt));
        json_object *o = json_object_new_object();
        json_object_object_add(o, "index", json_object_new_int(v->index));
        json_object_object_add(o, "prompt", nb_json_new_str(v->prompt));
        json_object_object_add(o, "prompt_tokens", json_object_new_int(v->n_prompt_ids));
        json_object_object_add(o, "steps", json_object_new_int(v->gate.n_steps));
        json_object_object_add(o, "divergence_step", json_object_new_int(v->gate.divergence));
        /* status: the production gate's; outcome adds the decode-path check to it */
        json_object_object_add(o, "status",
                               nb_json_new_str(v->gate.status == NB_GATE_PASS ? "PASS" : "FAIL"));
        json_object_object_add(o, "outcome", nb_json_new_str(nb_verify_record_word(v)));
        json_object_object_add(o, "fail_reason", nb_json_new_str(v->gate.reason));
        json_object *dc = nb_decode_check_json(&v->dcheck);
        if (dc)
            json_object_object_add(o, "decode_check", dc);
        /* At the divergence, or the last step when the sequences agree. */
        int at = v->gate.divergence >= 0 ? v->gate.divergence : v->gate.n_steps - 1;
        json_object *dev = json_object_new_object(), *rf = json_object_new_object();
        json_object_object_add(dev, "token", json_object_new_int(v->gate.dev_token));
        json_object_object_add(dev, "text", nb_json_new_str(v->dev_token_text));
        json_object_object_add(dev, "rank_in_reference",
                               json_object_new_int(v->gate.dev_rank_in_ref));
        json_object_object_add(rf, "token", json_object_new_int(v->gate.ref_token));
        json_object_object_add(rf, "text", nb_json_new_str(v->ref_token_text));
        json_object_object_add(rf, "rank_in_device", json_object_new_int(v->gate.ref_rank_in_dev));
        if (!isnan(v->gate.ref_margin)) {
            json_object_object_add(rf, "margin", json_object_new_double(v->gate.ref_margin));
            json_object_object_add(rf, "margin_beyond_topk",
                                   json_object_new_boolean(v->gate.ref_margin_beyond));
            if (!isnan(v->gate.near_tie_band))
                json_object_object_add(rf, "near_tie_band",
                                       json_object_new_double(v->gate.near_tie_band));
        }
        if (at >= 0) {
            json_object_object_add(dev, "topk", ids_json(&v->dev[at], r->k));
            json_object_object_add(rf, "topk", ids_json(&v->ref[at], r->k));
        }
        json_object_object_add(o, "device", dev);
        json_object_object_add(o, "reference", rf);
        json_object_object_add(o, "agreed_prefix", nb_json_new_str(v->agreed_text));
        json_object_object_add(o, "device_text", nb_json_new_str(v->dev_text));
        json_object_object_add(o, "reference_text", nb_json_new_str(v->ref_text));
        /* The reference tooling's name for the per-step walk. */
        json_object *checks = json_object_new_array();
        int last = v->gate.divergence >= 0 ? v->gate.divergence : v->gate.n_steps - 1;
        for (int s = 0; s <= last && s < v->gate.n_steps; s++) {
            json_object *c = json_object_new_object();
            json_object_object_add(c, "step", json_object_new_int(s));
            json_object_object_add(c, "device_token", json_object_new_int(v->dev[s].token));
            json_object_object_add(c, "reference_token", json_object_new_int(v->ref[s].token));
            json_object_object_add(c, "match",
                                   json_object_new_boolean(v->dev[s].token == v->ref[s].token));
            json_object_array_add(checks, c);
        }
        json_object_object_add(o, "topk_checks", checks);
        json_object *loc = nb_localize_json(&v->loc);
        if (loc)
            json_object_object_add(o, "localization", loc);
        json_object_object_add(o, "prefill_ms", json_object_new_double(v->prefill_ms));
        json_object_object_add(o, "decode_ms", json_object_new_double(v->decode_ms));
        json_object_array_add(recs, o);
    }
    json_object_object_add(root, "prompts", prompts);
    json_object_object_add(root, "records", recs);
    json_object *sum = json_object_new_object();
    json_object_object_add(sum, "status",
                           nb_json_new_str(r->status == NB_GATE_PASS ? "PASS" : "FAIL"));
    json_object_object_add(sum, "prompts", json_object_new_int(r->n));
    json_object_object_add(sum, "passed", json_object_new_int(r->n_pass));
    json_object_object_add(sum, "failed", json_object_new_int(r->n_fail));
    json_object_object_add(sum, "wall_ms", json_object_new_double(r->wall_ms));
    char word[64];
    json_object_object_add(sum, "outcome", nb_json_new_str(nb_verify_result_word(r, word,
                                                                                  sizeof word)));
    json_object_object_add(sum, "decode_path_defects", json_object_new_int(r->n_decode_faults));
    json_object_object_add(sum, "strict", json_object_new_boolean(r->strict));
    json_object_object_add(sum, "decode_check_ms", json_object_new_double(r->dcheck_ms));
    json_object_object_add(root, "summary", sum);
    return root;
}

json_object *nb_report_diagnosis_json(const nb_diagnosis_result *r, const nb_report_env *env)
{
    json_object *root = nb_report_json_open("diagnosis");
    json_object_object_add(root, "config", nb_report_env_json(env));
    json_object_object_add(root, "prompt", nb_json_new_str(r->prompt));
    json_object_object_add(root, "positions", json_object_new_int(r->n_pos));
    json_object_object_add(root, "reference", nb_json_new_str(r->trace_path));
    json_object_object_add(root, "reference_sha256", nb_json_new_str(r->trace_sha256));
    json_object *layers = json_object_new_array();
    for (int l = 0; l < r->n_layers; l++) {
        const nb_diagnosis_layer *L = &r->layers[l];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "layer", json_object_new_int(L->layer));
        json_object_object_add(o, "post_final_norm", json_object_new_boolean(L->post_norm));
        json_object_object_add(o, "cos_min", json_object_new_double(L->s.min));
        json_object_object_add(o, "cos_p5", json_object_new_double(L->s.p5));
        json_object_object_add(o, "cos_median", json_object_new_double(L->s.median));
        json_object_object_add(o, "cos_mean", json_object_new_double(L->s.mean));
        json_object_object_add(o, "max_abs", json_object_new_double(L->s.max_abs));
        json_object_array_add(layers, o);
    }
    json_object_object_add(root, "layers", layers);
    json_object_object_add(root, "device_topk", ids_json(&r->dev_final, r->k));
    json_object_object_add(root, "reference_topk", ids_json(&r->ref_final, r->k));
    return root;
}

/* Markdown cells must not break the table. */
static void md_cell(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n')
            fputs("⏎", f);
        else if (*s == '\r')
            continue;
        else
            fputc(*s, f);
    }
}

static void md_ids(FILE *f, const nb_gate_step *s, int k)
{
    for (int i = 0; i < k; i++)
        fprintf(f, "%s%d", i ? ", " : "", s->topk[i]);
}

/* One record's localization: the verdict line, then the layers around the first drop. */
static void write_loc_md(FILE *f, const nb_verify_record *v)
{
    const nb_localization *l = &v->loc;
    fprintf(f, "\n### Prompt %d: %s\n\n", v->index, l->verdict);
    md_cell(f, l->summary);
    fprintf(f, "\n");
    if (l->note[0]) {
        fprintf(f, "\n_");
        md_cell(f, l->note);
        fprintf(f, "_\n");
    }
    if (!l->layers || l->n_layers <= 0)
        return;
    fprintf(f, "\n| Layer | cos after attention | max abs | cos after MLP | max abs |\n"
               "|---|---|---|---|---|\n");
    for (int i = 0; i < l->n_layers; i++) {
        const nb_loc_layer *L = &l->layers[i];
        fprintf(f, "| %s%d%s | %.5f | %.4g | %.5f | %.4g |\n", L->layer == l->first_layer ? "**" : "",
                L->layer, L->layer == l->first_layer ? "**" : "", L->cos_attn, L->max_abs_attn,
                L->cos_mlp, L->max_abs_mlp);
    }
    fprintf(f, "| final norm | | | %.5f | %.4g |\n", l->final_cos, l->final_max_abs);
}

static void write_verify_md(FILE *f, const nb_verify_result *r, const nb_report_env *env,
                            const char *kind)
{
    char word[64], warn[300];
    fprintf(f, "# npubench %s — %s\n\n", kind, nb_verify_result_word(r, word, sizeof word));
    if (*nb_verify_trace_warning(r, warn, sizeof warn)) {
        fprintf(f, "> **Warning:** ");
        md_cell(f, warn);
        fprintf(f, "\n\n");
    }
    fprintf(f, "| Config | Value |\n|---|---|\n");
    fprintf(f, "| model | %s |\n| model sha256 | `%.16s` |\n", env->model, env->model_sha256);
    fprintf(f, "| backend / dtype | %s / %s |\n| board | %s |\n| threads / kernels | %d / %s |\n",
            env->backend, env->dtype, env->board, env->threads, env->isa);
    fprintf(f, "| tokens per prompt / k | %d / %d |\n", r->n_tokens, r->k);
    fprintf(f, "| prompts | %s (`%.16s`) |\n", r->prompts_path, r->prompts_sha256);
    char cpu[512];
    cpu_text(&r->trace_cpu, cpu, sizeof cpu);
    fprintf(f, "| reference | %s%s%.16s%s (transformers %s, torch %s, ", r->trace_path,
            *r->trace_sha256 ? " (`" : "", r->trace_sha256, *r->trace_sha256 ? "`)" : "",
            r->trace_transformers, r->trace_torch);
    md_cell(f, r->trace_dtype[0] ? r->trace_dtype : "dtype not recorded");
    fprintf(f, " on ");
    md_cell(f, r->trace_device[0] ? r->trace_device : "a device not recorded");
    fprintf(f, ") |\n");
    fprintf(f, "| reference CPU | ");
    md_cell(f, cpu);
    fprintf(f, " |\n\n");
    fprintf(f, "## Prompts\n\n| # | Prompt | Tokens |\n|---|---|---|\n");
    for (int i = 0; i < r->n; i++) {
        fprintf(f, "| %d | ", r->recs[i].index);
        md_cell(f, r->recs[i].prompt);
        fprintf(f, " | %d |\n", r->recs[i].n_prompt_ids);
    }
    fprintf(f, "\n## Top-k token check\n\n"
               "| # | Status | Divergence | Device token (rank in ref) | Reference token (rank "
               "in device) | Device top-%d | Reference top-%d |\n|---|---|---|---|---|---|---|\n",
            r->k, r->k);
    for (int i = 0; i < r->n; i++) {
        const nb_verify_record *v = &r->recs[i];
        fprintf(f, "| %d | %s | ", v->index, nb_verify_record_word(v));
        if (v->gate.divergence < 0) {
            fprintf(f, "none (%d/%d agree) | — | — | ", v->gate.agreed, v->gate.n_steps);
            md_ids(f, &v->dev[v->gate.n_steps - 1], r->k);
            fprintf(f, " | ");
            md_ids(f, &v->ref[v->gate.n_steps - 1], r->k);
        } else {
            int s = v->gate.divergence;
            fprintf(f, "step %d | %d `", s, v->gate.dev_token);
            md_cell(f, v->dev_token_text);
            char margin[64];
            margin_text(&v->gate, margin, sizeof margin);
            fprintf(f, "` (%d; %s) | %d `", v->gate.dev_rank_in_ref, margin, v->gate.ref_token);
            md_cell(f, v->ref_token_text);
            fprintf(f, "` (%d) | ", v->gate.ref_rank_in_dev);
            md_ids(f, &v->dev[s], r->k);
            fprintf(f, " | ");
            md_ids(f, &v->ref[s], r->k);
        }
        fprintf(f, " |\n");
        fprintf(f, "|  | agreed prefix: ");
        md_cell(f, v->agreed_text);
        if (v->gate.reason[0]) {
            fprintf(f, " — **");
            md_cell(f, v->gate.reason);
            fprintf(f, "**");
        }
        fprintf(f, " | | | | | |\n");
    }
    fprintf(f, "\n## Decode-path check\n\nDecode steps against a cache-free prefill of the same "
               "tokens, every prompt (docs/localization.md)%s.\n\n| # | Check |\n|---|---|\n",
            r->strict ? "; --strict: a defect fails the prompt" : "");
    for (int i = 0; i < r->n; i++) {
        char dsum[300];
        nb_decode_check_summary(&r->recs[i].dcheck, dsum, sizeof dsum);
        fprintf(f, "| %d | %s", r->recs[i].index,
                r->recs[i].dcheck.status == NB_LOC_KV_FAULT ? "**" : "");
        md_cell(f, dsum);
        fprintf(f, "%s |\n", r->recs[i].dcheck.status == NB_LOC_KV_FAULT ? "**" : "");
    }
    fprintf(f, "\nThe checks took %.1f ms of the run's %.1f ms.\n", r->dcheck_ms, r->wall_ms);
    int any = 0;
    for (int i = 0; i < r->n; i++)
        any |= r->recs[i].loc.present;
    if (any) {
        fprintf(f, "\n## Localization\n\nWhere each diverging prompt left the reference "
                   "(docs/localization.md).\n");
        for (int i = 0; i < r->n; i++)
            if (r->recs[i].loc.present)
                write_loc_md(f, &r->recs[i]);
    }
    fprintf(f, "\n**Summary:** %d/%d prompts pass — %s (%.1f s)\n", r->n_pass, r->n,
            nb_verify_result_word(r, word, sizeof word), r->wall_ms / 1000.0);
}

static void write_diag_md(FILE *f, const nb_diagnosis_result *r, const nb_report_env *env)
{
    fprintf(f, "# npubench diagnosis (informational)\n\n");
    fprintf(f, "Model %s (%s/%s), prompt \"", env->model, env->backend, env->dtype);
    md_cell(f, r->prompt);
    fprintf(f, "\", %d positions, reference %s%s%.16s%s\n\n", r->n_pos, r->trace_path,
            *r->trace_sha256 ? " (`" : "", r->trace_sha256, *r->trace_sha256 ? "`)" : "");
    fprintf(f, "| Layer | cos min | cos p5 | cos median | cos mean | max_abs |\n"
               "|---|---|---|---|---|---|\n");
    for (int l = 0; l < r->n_layers; l++) {
        const nb_diagnosis_layer *L = &r->layers[l];
        fprintf(f, "| L%d%s | %.6f | %.6f | %.6f | %.6f | %.4g |\n", L->layer,
                L->post_norm ? " (post final norm)" : "", L->s.min, L->s.p5, L->s.median,
                L->s.mean, L->s.max_abs);
    }
    fprintf(f, "\nLast position top-%d: device ", r->k);
    md_ids(f, &r->dev_final, r->k);
    fprintf(f, "; reference ");
    md_ids(f, &r->ref_final, r->k);
    fprintf(f, "\n");
}

/* Writes json + md side by side with the same timestamped stem. */
static nb_code write_pair(const char *dir, const char *prefix, json_object *doc,
                          void (*md)(FILE *, const void *, const void *, const char *),
                          const void *a, const void *b, const char *kind, char *json_path,
                          size_t cap, nb_err *err)
{
    nb_code rc = nb_file_mkdirs(dir, err);
    if (rc)
        return rc;
    char stamp[20], jp[1200], mp[1200], model[128];
    nb_time_stamp(stamp, nb_wall_ms());
    /* named with the model (two models' reports in one folder read apart): its one display
     * name (the file's, without directory, quantisation and .gguf), file-name-safe */
    const nb_report_env *env = b;
    const char *m = env && env->model[0] ? env->model : "model";
    nb_job_model_canon(m, model, sizeof model); /* "SmolLM2-135M-Instruct" */
    for (char *c = model; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '-' || *c == '_'))
            *c = '-';
    snprintf(jp, sizeof jp, "%s/%s_%s_%s.json", dir, prefix, model, stamp);
    snprintf(mp, sizeof mp, "%s/%s_%s_%s.md", dir, prefix, model, stamp);
    /* a matrix's boards report the same model in the same second: -2, -3, ... apart */
    for (int n = 2; nb_file_exists(jp) && n < 1000; n++) {
        snprintf(jp, sizeof jp, "%s/%s_%s_%s-%d.json", dir, prefix, model, stamp, n);
        snprintf(mp, sizeof mp, "%s/%s_%s_%s-%d.md", dir, prefix, model, stamp, n);
    }
    const char *js = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    if ((rc = nb_file_write(jp, js, strlen(js), err)))
        return rc;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return nb_err_set(err, NB_ENOMEM, "out of memory for the markdown report");
    md(f, a, b, kind);
    fclose(f);
    rc = nb_file_write(mp, buf, len, err);
    free(buf);
    if (!rc && json_path)
        snprintf(json_path, cap, "%s", jp);
    return rc;
}

static void md_verify_thunk(FILE *f, const void *a, const void *b, const char *kind)
{
    write_verify_md(f, a, b, kind);
}

static void md_diag_thunk(FILE *f, const void *a, const void *b, const char *kind)
{
    (void)kind;
    write_diag_md(f, a, b);
}

nb_code nb_report_write_verify(const char *dir, const nb_verify_result *r,
                               const nb_report_env *env, const char *kind, char *json_path,
                               size_t cap, nb_err *err)
{
    json_object *doc = nb_report_verify_json(r, env, kind);
    nb_code rc = write_pair(dir, "verify_topk_token", doc, md_verify_thunk, r, env, kind,
                            json_path, cap, err);
    json_object_put(doc);
    return rc;
}

nb_code nb_report_write_diagnosis(const char *dir, const nb_diagnosis_result *r,
                                  const nb_report_env *env, char *json_path, size_t cap,
                                  nb_err *err)
{
    json_object *doc = nb_report_diagnosis_json(r, env);
    nb_code rc = write_pair(dir, "diagnosis", doc, md_diag_thunk, r, env, "diagnosis",
                            json_path, cap, err);
    json_object_put(doc);
    return rc;
}

void nb_report_print_verify(FILE *f, const nb_verify_result *r, const nb_report_env *env)
{
    char word[64], warn[300], dsum[300], name[256];
    /* the model's display name, as run, workers and history name it; the digest (what a
     * trace is made for) beside it */
    nb_job_model_canon(env->model, name, sizeof name);
    fprintf(f, "[verify] model %s%s%.16s%s %s/%s, %d prompts x %d tokens, top-%d\n",
            *name ? name : "?", *env->model_sha256 ? " (" : "", env->model_sha256,
            *env->model_sha256 ? ")" : "", env->backend, env->dtype, r->n, r->n_tokens, r->k);
    if (*nb_verify_trace_warning(r, warn, sizeof warn))
        fprintf(f, "[verify] warning: %s\n", warn);
    for (int i = 0; i < r->n; i++) {
        const nb_verify_record *v = &r->recs[i];
        if (v->gate.divergence < 0)
            fprintf(f, "  prompt %d: %s  (all %d steps agree)\n", v->index,
                    nb_verify_record_word(v), v->gate.n_steps);
        else {
            char margin[64];
            margin_text(&v->gate, margin, sizeof margin);
            /* a rank of -1 means "not in the other side's top list": said by leaving it out */
            char dr[112] = "", rr[32] = "";
            if (v->gate.dev_rank_in_ref >= 0)
                snprintf(dr, sizeof dr, " (ref rank %d%s%s)", v->gate.dev_rank_in_ref,
                         margin[0] ? ", " : "", margin);
            else if (margin[0])
                snprintf(dr, sizeof dr, " (%s)", margin);
            if (v->gate.ref_rank_in_dev >= 0)
                snprintf(rr, sizeof rr, " (device rank %d)", v->gate.ref_rank_in_dev);
            fprintf(f, "  prompt %d: %s  diverge at step %d: device %d%s vs reference %d%s%s%s\n",
                    v->index, nb_verify_record_word(v), v->gate.divergence, v->gate.dev_token, dr, v->gate.ref_token, rr,
                    v->gate.reason[0] ? " — " : "", v->gate.reason);
            if (v->loc.present)
                fprintf(f, "    localized: %s%s%s\n", v->loc.summary, v->loc.note[0] ? " — " : "",
                        v->loc.note);
        }
        if (v->dcheck.status == NB_LOC_KV_FAULT) {
            nb_decode_check_summary(&v->dcheck, dsum, sizeof dsum);
            fprintf(f, "    %s\n", dsum);
        }
    }
    fprintf(f, "[verify] %s (%d/%d prompts pass)\n", nb_verify_result_word(r, word, sizeof word),
            r->n_pass, r->n);
}

void nb_report_print_diagnosis(FILE *f, const nb_diagnosis_result *r)
{
    fprintf(f, "[diagnosis] prompt \"%s\" (%d positions) — informational, never fails\n",
            r->prompt, r->n_pos);
    fprintf(f, "%-22s %9s %9s %9s %9s %9s\n", "layer", "cos_min", "cos_p5", "cos_med",
            "cos_mean", "max_abs");
    for (int l = 0; l < r->n_layers; l++) {
        const nb_diagnosis_layer *L = &r->layers[l];
        char name[32];
        snprintf(name, sizeof name, "L%d%s", L->layer, L->post_norm ? " (post-norm)" : "");
        fprintf(f, "%-22s %9.6f %9.6f %9.6f %9.6f %9.4g\n", name, L->s.min, L->s.p5,
                L->s.median, L->s.mean, L->s.max_abs);
    }
}

/* ---- run / profile -------------------------------------------------------------------- */

json_object *nb_report_bench_json(const Npubench__JobResult *res, const char *kind,
                                  const nb_report_env *env)
{
    const Npubench__Metrics *m = res->metrics;
    json_object *root = nb_report_json_open(kind);
    json_object_object_add(root, "config", nb_report_env_json(env));
    json_object *mj = json_object_new_object();
#define D(name, v) json_object_object_add(mj, name, json_object_new_double(v))
    D("ttft_ms", m->ttft_ms);
    D("ttft_ms_stddev", m->ttft_ms_stddev);
    D("tps", m->tps);
    D("tps_stddev", m->tps_stddev);
    D("decode_ms_per_token", m->decode_ms_per_token);
    D("decode_ms_per_token_stddev", m->decode_ms_per_token_stddev);
    D("tpot_ms", m->tpot_ms);
    D("tpot_ms_stddev", m->tpot_ms_stddev);
    D("setup_ms", m->setup_ms);
    D("latency_ms", m->latency_ms);
#undef D
    json_object_object_add(mj, "prompt_tokens", json_object_new_int(m->prompt_tokens));
    json_object_object_add(mj, "generated_tokens", json_object_new_int(m->generated_tokens));
    json_object_object_add(mj, "warmup", json_object_new_int(m->warmup));
    json_object *samples = json_object_new_array();
    for (size_t i = 0; i < m->n_samples; i++) {
        const Npubench__Sample *s = m->samples[i];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "rep", json_object_new_int(s->rep));
        json_object_object_add(o, "ttft_ms", json_object_new_double(s->ttft_ms));
        json_object_object_add(o, "tps", json_object_new_double(s->tps));
        json_object_object_add(o, "decode_ms_per_token",
                               json_object_new_double(s->decode_ms_per_token));
        json_object_object_add(o, "tpot_ms", json_object_new_double(s->tpot_ms));
        json_object_object_add(o, "latency_ms", json_object_new_double(s->latency_ms));
        json_object_object_add(o, "generated_tokens", json_object_new_int(s->generated_tokens));
        json_object_array_add(samples, o);
    }
    json_object_object_add(mj, "samples", samples);
    json_object_object_add(root, "metrics", mj);
    if (res->n_phases || res->n_kernels) {
        json_object *ph = json_object_new_array(), *kn = json_object_new_array();
        for (size_t i = 0; i < res->n_phases; i++) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "name", json_object_new_string(res->phases[i]->name));
            json_object_object_add(o, "calls", json_object_new_int64(res->phases[i]->calls));
            json_object_object_add(o, "avg_ms", json_object_new_double(res->phases[i]->avg_ms));
            json_object_object_add(o, "stddev_ms",
                                   json_object_new_double(res->phases[i]->stddev_ms));
            json_object_object_add(o, "total_ms",
                                   json_object_new_double(res->phases[i]->total_ms));
            json_object_array_add(ph, o);
        }
        for (size_t i = 0; i < res->n_kernels; i++) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "name", json_object_new_string(res->kernels[i]->name));
            json_object_object_add(o, "calls", json_object_new_int64(res->kernels[i]->calls));
            json_object_object_add(o, "total_ms",
                                   json_object_new_double(res->kernels[i]->total_ms));
            json_object_object_add(o, "avg_ms", json_object_new_double(res->kernels[i]->avg_ms));
            json_object_array_add(kn, o);
        }
        json_object_object_add(root, "phases", ph);
        json_object_object_add(root, "kernels", kn);
    }
    return root;
}

static void write_bench_md(FILE *f, const Npubench__JobResult *res, const nb_report_env *env,
                           const char *kind)
{
    const Npubench__Metrics *m = res->metrics;
    char name[256];
    nb_job_model_canon(env->model, name, sizeof name);
    fprintf(f, "# npubench %s — %s\n\n", kind, *name ? name : "?");
    fprintf(f, "| Config | Value |\n|---|---|\n");
    fprintf(f, "| model | %s |\n| model sha256 | `%.16s` |\n", env->model, env->model_sha256);
    fprintf(f, "| backend / dtype | %s / %s |\n| board | %s |\n| threads / kernels | %d / %s |\n",
            env->backend, env->dtype, env->board, env->threads, env->isa);
    fprintf(f, "| prompt / generated tokens | %d / %d |\n| repetitions (+ warm-up) | %zu (+%d) |\n\n",
            m->prompt_tokens, m->generated_tokens, m->n_samples, m->warmup);
    fprintf(f, "## Metrics\n\n| Metric | Mean | Stddev |\n|---|---|---|\n");
    fprintf(f, "| setup ms (once) | %.2f | |\n", m->setup_ms);
    fprintf(f, "| TTFT ms | %.2f | %.2f |\n", m->ttft_ms, m->ttft_ms_stddev);
    fprintf(f, "| decode ms/token | %.3f | %.3f |\n", m->decode_ms_per_token,
            m->decode_ms_per_token_stddev);
    fprintf(f, "| TPOT ms | %.3f | %.3f |\n", m->tpot_ms, m->tpot_ms_stddev);
    fprintf(f, "| tokens/second | %.2f | %.2f |\n", m->tps, m->tps_stddev);
    if (res->n_phases) {
        fprintf(f, "\n## Phases\n\n| Phase | Calls | Avg ms | Stddev ms | Total ms |\n"
                   "|---|---|---|---|---|\n");
        for (size_t i = 0; i < res->n_phases; i++) {
            const Npubench__ProfilePhase *ph = res->phases[i];
            fprintf(f, "| ");
            md_cell(f, ph->name);
            fprintf(f, " | %lld | %.3f | %.3f | %.2f |\n", (long long)ph->calls, ph->avg_ms,
                    ph->stddev_ms, ph->total_ms);
        }
    }
    if (res->n_kernels) {
        fprintf(f, "\n## Kernels (all repetitions)\n\n| Kernel | Calls | Total ms | Avg ms |\n"
                   "|---|---|---|---|\n");
        for (size_t i = 0; i < res->n_kernels; i++) {
            const Npubench__ProfileKernel *k = res->kernels[i];
            fprintf(f, "| ");
            md_cell(f, k->name);
            fprintf(f, " | %lld | %.2f | %.4f |\n", (long long)k->calls, k->total_ms, k->avg_ms);
        }
    }
}

static void md_bench_thunk(FILE *f, const void *a, const void *b, const char *kind)
{
    write_bench_md(f, a, b, kind);
}

nb_code nb_report_write_bench(const char *dir, const Npubench__JobResult *res,
                              const nb_report_env *env, const char *kind, char *json_path,
                              size_t cap, nb_err *err)
{
    if (!res->metrics)
        return nb_err_set(err, NB_EINVAL, "the %s result has no metrics to report", kind);
    json_object *doc = nb_report_bench_json(res, kind, env);
    nb_code rc = write_pair(dir, kind, doc, md_bench_thunk, res, env, kind, json_path, cap, err);
    json_object_put(doc);
    return rc;
}
