/* nb_trace: parses the npubench-hf-trace/1 JSON format with json-c.
 * Every field is type- and range-checked; hidden states arrive as base64 f32 or bf16. */
#include "nb_trace.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_base64.h"
#include "nb_bf16.h"
#include "nb_file.h"
#include "nb_json.h"
#include "nb_sha256.h"

#define TRACE_MAX_BYTES (512u << 20)
#define TRACE_MAX_PROMPTS 4096
#define TRACE_MAX_STEPS 4096
#define TRACE_MAX_IDS (1 << 20)

static nb_code get_int(const char *path, json_object *o, const char *key, int lo, int hi, int *out,
                       nb_err *err)
{
    int64_t x;
    nb_code rc = nb_json_need_int(o, NULL, key, 1, lo, hi, 0, &x, err);
    if (rc) {
        nb_err_prefix(err, "%s: ", path);
        return rc;
    }
    *out = (int)x;
    return NB_OK;
}

static void get_str(json_object *o, const char *key, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s", nb_json_str(o, key, "", NULL));
}

/* provenance.cpu, optional (older traces lack it): {model, flags: [..], torch_capability}. */
static void get_cpu(json_object *prov, nb_trace_cpu *c)
{
    json_object *o = nb_json_get_type(prov, "cpu", json_type_object);
    memset(c, 0, sizeof *c);
    if (!o)
        return;
    get_str(o, "model", c->model, sizeof c->model);
    get_str(o, "torch_capability", c->capability, sizeof c->capability);
    json_object *f = nb_json_get_type(o, "flags", json_type_array);
    size_t n = f ? json_object_array_length(f) : 0;
    for (size_t i = 0, len = 0; i < n && len < sizeof c->flags; i++) {
        json_object *v = json_object_array_get_idx(f, i);
        if (json_object_is_type(v, json_type_string))
            len += (size_t)snprintf(c->flags + len, sizeof c->flags - len, "%s%s",
                                    len ? " " : "", json_object_get_string(v));
    }
}

static nb_code dup_str(const char *path, json_object *o, const char *key, char **out, nb_err *err)
{
    const char *s;
    nb_code rc = nb_json_need_str(o, NULL, key, 1, NULL, &s, err);
    if (rc) {
        nb_err_prefix(err, "%s: ", path);
        return rc;
    }
    *out = strdup(s);
    return *out ? NB_OK : nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
}

static nb_code get_ids(const char *path, const char *what, json_object *arr, int32_t **ids, int *n,
                       nb_err *err)
{
    if (!arr || !json_object_is_type(arr, json_type_array))
        return nb_err_set(err, NB_EFORMAT, "%s: %s missing or not an array", path, what);
    size_t len = json_object_array_length(arr);
    if (len > TRACE_MAX_IDS)
        return nb_err_set(err, NB_EFORMAT, "%s: %s has %zu entries (limit %d)", path, what, len,
                          TRACE_MAX_IDS);
    *ids = malloc(sizeof(int32_t) * (len ? len : 1));
    if (!*ids)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < len; i++) {
        json_object *v = json_object_array_get_idx(arr, i);
        int64_t x = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
        if (x < 0 || x > INT32_MAX)
            return nb_err_set(err, NB_EFORMAT, "%s: %s[%zu] is not a valid token id", path, what,
                              i);
        (*ids)[i] = (int32_t)x;
    }
    *n = (int)len;
    return NB_OK;
}

/* Fills a step's top-k from JSON arrays of ids and logits. */
static nb_code parse_topk(const char *path, const char *where, json_object *ids, json_object *lg,
                          int k, nb_gate_step *s, nb_err *err)
{
    if (!ids || !json_object_is_type(ids, json_type_array) ||
        (int)json_object_array_length(ids) < k)
        return nb_err_set(err, NB_EFORMAT, "%s: %s.topk_ids missing or shorter than k=%d", path,
                          where, k);
    for (int j = 0; j < k; j++) {
        json_object *v = json_object_array_get_idx(ids, (size_t)j);
        int64_t x = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
        if (x < 0 || x > INT32_MAX)
            return nb_err_set(err, NB_EFORMAT, "%s: %s.topk_ids[%d] is not a token id", path,
                              where, j);
        s->topk[j] = (int32_t)x;
        s->logits[j] = 0.0f;
        if (lg && json_object_is_type(lg, json_type_array) &&
            (int)json_object_array_length(lg) > j)
            s->logits[j] = (float)json_object_get_double(json_object_array_get_idx(lg, (size_t)j));
    }
    return NB_OK;
}

/* Decodes base64 bf16 (little-endian) of exactly n elements into a new fp32 array. */
static nb_code decode_bf16(const char *path, const char *where, json_object *o, const char *key,
                           size_t n, float **out, nb_err *err)
{
    json_object *d = nb_json_get_type(o, key, json_type_string);
    if (!d)
        return nb_err_set(err, NB_EFORMAT, "%s: %s.%s missing or not a string", path, where, key);
    uint8_t *raw;
    size_t rlen;
    nb_code rc = nb_base64_decode(json_object_get_string(d), (size_t)json_object_get_string_len(d),
                                  &raw, &rlen, err);
    if (rc)
        return nb_err_prefix(err, "%s: %s.%s: ", path, where, key);
    if (rlen != n * 2) {
        free(raw);
        return nb_err_set(err, NB_EFORMAT, "%s: %s.%s has %zu bytes, expected %zu (bf16)", path,
                          where, key, rlen, n * 2);
    }
    *out = malloc(sizeof(float) * (n ? n : 1));
    if (!*out) {
        free(raw);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < n; i++)
        (*out)[i] = nb_bf16_to_f32((nb_bf16)(raw[2 * i] | raw[2 * i + 1] << 8));
    free(raw);
    return NB_OK;
}

/* prompts[idx].hidden: {encoding "bf16le-base64", n_layers, dim, positions: [{step, attn,
 * mlp, final_norm}]}, steps ascending and within the prompt's steps. */
static nb_code parse_states(const nb_trace *t, json_object *h, int idx, nb_trace_prompt *out,
                            nb_err *err)
{
    char where[80];
    snprintf(where, sizeof where, "prompts[%d].hidden", idx);
    const char *enc = nb_json_str(h, "encoding", "", NULL);
    if (strcmp(enc, "bf16le-base64"))
        return nb_err_set(err, NB_EFORMAT, "%s: %s.encoding '%.32s', expected bf16le-base64",
                          t->path, where, enc);
    nb_code rc;
    if ((rc = get_int(t->path, h, "n_layers", 1, 1024, &out->n_layers, err)) ||
        (rc = get_int(t->path, h, "dim", 1, 65536, &out->dim, err)))
        return nb_err_prefix(err, "%s: ", where);
    json_object *pos = nb_json_get_type(h, "positions", json_type_array);
    size_t n = pos ? json_object_array_length(pos) : 0;
    if (!pos || n > (size_t)out->n_steps)
        return nb_err_set(err, NB_EFORMAT, "%s: %s.positions missing or longer than the %d steps",
                          t->path, where, out->n_steps);
    size_t per = (size_t)out->n_layers * out->dim;
    if (per * 2 * n > TRACE_MAX_BYTES / 4)
        return nb_err_set(err, NB_EFORMAT, "%s: %s too large", t->path, where);
    out->states = calloc(n ? n : 1, sizeof *out->states);
    if (!out->states)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->path);
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(pos, i);
        nb_trace_states *st = &out->states[i];
        snprintf(where, sizeof where, "prompts[%d].hidden.positions[%zu]", idx, i);
        out->n_states = (int)i + 1; /* so a failure frees what was filled */
        if ((rc = get_int(t->path, p, "step", 0, out->n_steps - 1, &st->step, err)))
            return nb_err_prefix(err, "%s: ", where);
        if (i > 0 && st->step <= out->states[i - 1].step)
            return nb_err_set(err, NB_EFORMAT, "%s: %s.step %d: steps must ascend", t->path,
                              where, st->step);
        if ((rc = decode_bf16(t->path, where, p, "attn", per, &st->attn, err)) ||
            (rc = decode_bf16(t->path, where, p, "mlp", per, &st->mlp, err)) ||
            (rc = decode_bf16(t->path, where, p, "final_norm", (size_t)out->dim, &st->final,
                              err)))
            return rc;
    }
    out->n_states = (int)n;
    return NB_OK;
}

static nb_code parse_prompt(const nb_trace *t, json_object *p, int idx, nb_trace_prompt *out,
                            nb_err *err)
{
    char where[64];
    nb_code rc = dup_str(t->path, p, "text", &out->text, err);
    if (rc)
        return rc;
    snprintf(where, sizeof where, "prompts[%d].prompt_ids", idx);
    if ((rc = get_ids(t->path, where, nb_json_get(p, "prompt_ids"), &out->ids, &out->n_ids, err)))
        return rc;
    json_object *steps = nb_json_get_type(p, "steps", json_type_array);
    if (!steps)
        return nb_err_set(err, NB_EFORMAT, "%s: prompts[%d].steps missing", t->path, idx);
    size_t n = json_object_array_length(steps);
    if (n > TRACE_MAX_STEPS)
        return nb_err_set(err, NB_EFORMAT, "%s: prompts[%d] has %zu steps (limit %d)", t->path,
                          idx, n, TRACE_MAX_STEPS);
    out->steps = calloc(n ? n : 1, sizeof *out->steps);
    if (!out->steps)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->path);
    out->n_steps = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(steps, i);
        snprintf(where, sizeof where, "prompts[%d].steps[%zu]", idx, i);
        int tok;
        if ((rc = get_int(t->path, s, "token", 0, INT32_MAX, &tok, err)))
            return nb_err_prefix(err, "%s: ", where);
        out->steps[i].token = tok;
        if ((rc = parse_topk(t->path, where, nb_json_get(s, "topk_ids"),
                             nb_json_get(s, "topk_logits"), t->k, &out->steps[i], err)))
            return rc;
    }
    json_object *h = nb_json_get(p, "hidden");
    if (h && !json_object_is_type(h, json_type_null)) {
        if (!json_object_is_type(h, json_type_object))
            return nb_err_set(err, NB_EFORMAT, "%s: prompts[%d].hidden is not an object",
                              t->path, idx);
        return parse_states(t, h, idx, out, err);
    }
    return NB_OK;
}

static nb_code parse_hidden(nb_trace *t, json_object *h, nb_err *err)
{
    nb_trace_hidden *hs = calloc(1, sizeof *hs);
    if (!hs)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", t->path);
    t->hidden = hs;
    nb_code rc;
    if ((rc = dup_str(t->path, h, "prompt", &hs->prompt, err)) ||
        (rc = get_ids(t->path, "hidden_states.prompt_ids", nb_json_get(h, "prompt_ids"),
                      &hs->ids, &hs->n_ids, err)) ||
        (rc = get_int(t->path, h, "n_layers", 1, 1024, &hs->n_layers, err)) ||
        (rc = get_int(t->path, h, "dim", 1, 65536, &hs->dim, err)) ||
        (rc = get_int(t->path, h, "n_pos", 1, 1 << 16, &hs->n_pos, err)))
        return rc;
    json_object *layers = nb_json_get(h, "layers");
    if (!layers || !json_object_is_type(layers, json_type_array) ||
        (int)json_object_array_length(layers) != hs->n_layers)
        return nb_err_set(err, NB_EFORMAT, "%s: hidden_states.layers must have n_layers=%d entries",
                          t->path, hs->n_layers);
    size_t per = (size_t)hs->n_pos * hs->dim;
    if (per * hs->n_layers > (size_t)(TRACE_MAX_BYTES / 4))
        return nb_err_set(err, NB_EFORMAT, "%s: hidden_states too large", t->path);
    hs->data = malloc(per * hs->n_layers * sizeof(float));
    if (!hs->data)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory for hidden states", t->path);
    for (int l = 0; l < hs->n_layers; l++) {
        json_object *L = json_object_array_get_idx(layers, (size_t)l);
        json_object *d = nb_json_get_type(L, "data", json_type_string);
        if (!d)
            return nb_err_set(err, NB_EFORMAT, "%s: hidden_states.layers[%d].data missing",
                              t->path, l);
        uint8_t *raw;
        size_t rlen;
        if ((rc = nb_base64_decode(json_object_get_string(d), (size_t)json_object_get_string_len(d),
                                   &raw, &rlen, err)))
            return nb_err_prefix(err, "%s: hidden_states.layers[%d].data: ", t->path, l);
        if (rlen != per * sizeof(float)) {
            free(raw);
            return nb_err_set(err, NB_EFORMAT,
                              "%s: hidden_states.layers[%d].data has %zu bytes, expected %zu",
                              t->path, l, rlen, per * sizeof(float));
        }
        memcpy(hs->data + per * l, raw, rlen); /* little-endian hosts only, as x86/arm */
        free(raw);
        if (l == hs->n_layers - 1) {
            json_object *pn = nb_json_get(L, "post_norm");
            hs->last_post_norm = pn && json_object_get_boolean(pn);
        }
    }
    json_object *fi = nb_json_get(h, "final_topk_ids");
    if (fi)
        rc = parse_topk(t->path, "hidden_states.final", fi,
                        nb_json_get(h, "final_topk_logits"), t->k, &hs->final, err);
    hs->final.token = hs->final.topk[0];
    return rc;
}

nb_code nb_trace_load(const char *path, nb_trace **out, nb_err *err)
{
    *out = NULL;
    json_object *root;
    nb_code rc = nb_json_read_file(path, TRACE_MAX_BYTES, &root, err);
    if (rc)
        return rc;
    nb_trace *t = calloc(1, sizeof *t);
    if (!t) {
        json_object_put(root);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    snprintf(t->path, sizeof t->path, "%s", path);
    if ((rc = nb_sha256_file(path, t->sha256, err)))
        goto done;
    char fmt[64];
    get_str(root, "format", fmt, sizeof fmt);
    if (strcmp(fmt, "npubench-hf-trace/1")) {
        rc = nb_err_set(err, NB_EFORMAT, "%s: field 'format' is '%s', expected npubench-hf-trace/1",
                        path, fmt);
        goto done;
    }
    json_object *prov = nb_json_get_type(root, "provenance", json_type_object);
    if (!prov) {
        rc = nb_err_set(err, NB_EFORMAT, "%s: field 'provenance' missing", path);
        goto done;
    }
    get_str(prov, "model_sha256", t->model_sha256, sizeof t->model_sha256);
    get_str(prov, "prompts_sha256", t->prompts_sha256, sizeof t->prompts_sha256);
    if (!t->prompts_sha256[0])
        get_str(prov, "prompt_sha256", t->prompts_sha256, sizeof t->prompts_sha256);
    get_str(prov, "transformers", t->transformers, sizeof t->transformers);
    get_str(prov, "torch", t->torch, sizeof t->torch);
    get_str(prov, "dtype", t->dtype, sizeof t->dtype);
    get_str(prov, "attn_implementation", t->attn, sizeof t->attn);
    get_str(prov, "date", t->date, sizeof t->date);
    get_cpu(prov, &t->cpu);
    char dev[32], gpu[56];
    get_str(prov, "device", dev, sizeof dev);
    get_str(prov, "gpu", gpu, sizeof gpu);
    if (!dev[0] && t->cpu.model[0])
        snprintf(dev, sizeof dev, "cpu");
    snprintf(t->device, sizeof t->device, "%s%s%s%s", dev, gpu[0] ? " (" : "", gpu,
             gpu[0] ? ")" : "");
    if (strlen(t->model_sha256) != 64) {
        rc = nb_err_set(err, NB_EFORMAT, "%s: provenance.model_sha256 missing or malformed", path);
        goto done;
    }
    if ((rc = get_int(path, root, "n_tokens", 0, TRACE_MAX_STEPS, &t->n_tokens, err)) ||
        (rc = get_int(path, root, "k", 1, NB_GATE_K_MAX, &t->k, err)))
        goto done;
    json_object *chat = nb_json_get(root, "chat");
    t->chat = chat && json_object_get_boolean(chat);
    json_object *prompts = nb_json_get_type(root, "prompts", json_type_array);
    if (prompts) {
        size_t n = json_object_array_length(prompts);
        if (n > TRACE_MAX_PROMPTS) {
            rc = nb_err_set(err, NB_EFORMAT, "%s: %zu prompts (limit %d)", path, n,
                            TRACE_MAX_PROMPTS);
            goto done;
        }
        t->prompts = calloc(n ? n : 1, sizeof *t->prompts);
        if (!t->prompts) {
            rc = nb_err_set(err, NB_ENOMEM, "out of memory");
            goto done;
        }
        t->n_prompts = (int)n;
        for (size_t i = 0; i < n && !rc; i++)
            rc = parse_prompt(t, json_object_array_get_idx(prompts, i), (int)i, &t->prompts[i],
                              err);
        if (rc)
            goto done;
    }
    json_object *hid = nb_json_get_type(root, "hidden_states", json_type_object);
    if (hid)
        rc = parse_hidden(t, hid, err);
done:
    json_object_put(root);
    if (rc)
        nb_trace_free(t);
    else
        *out = t;
    return rc;
}

void nb_trace_free(nb_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_prompts; i++) {
        free(t->prompts[i].text);
        free(t->prompts[i].ids);
        free(t->prompts[i].steps);
        for (int j = 0; j < t->prompts[i].n_states; j++) {
            free(t->prompts[i].states[j].attn);
            free(t->prompts[i].states[j].mlp);
            free(t->prompts[i].states[j].final);
        }
        free(t->prompts[i].states);
    }
    free(t->prompts);
    if (t->hidden) {
        free(t->hidden->prompt);
        free(t->hidden->ids);
        free(t->hidden->data);
        free(t->hidden);
    }
    free(t);
}

void nb_trace_path(const char *dir, const char *model_sha, const char *digest, int diag,
                   char *out, size_t cap)
{
    snprintf(out, cap, "%s/%.16s-%s%.16s.json", dir, model_sha, diag ? "diag-" : "", digest);
}

nb_code nb_trace_find(const char *dir, const char *model_sha, const char *digest, int diag,
                      nb_trace **out, nb_err *err)
{
    char path[1024];
    nb_trace_path(dir, model_sha, digest, diag, path, sizeof path);
    *out = NULL;
    if (!nb_file_exists(path))
        return nb_err_set(err, NB_ENOTFOUND,
                          "no HF reference trace for model %.16s and %s %.16s (looked for %s); "
                          "generate it with `make hf-reference` (needs scripts/setup_hf.sh) or "
                          "pass --reference TRACE",
                          model_sha, diag ? "prompt" : "prompt set", digest, path);
    nb_code rc = nb_trace_load(path, out, err);
    if (rc)
        return rc;
    if (strcmp((*out)->model_sha256, model_sha)) {
        nb_err_set(err, NB_EMISMATCH, "%s: trace was made for model %.16s, not %.16s; regenerate "
                   "with `make hf-reference`", path, (*out)->model_sha256, model_sha);
        nb_trace_free(*out);
        *out = NULL;
        return NB_EMISMATCH;
    }
    return NB_OK;
}
