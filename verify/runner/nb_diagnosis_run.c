/* nb_diagnosis_run: captures every layer's output during one prefill and compares it with
 * HF's.  Layers 0..L-2 are raw block outputs; the last is post-final-norm, matching HF's
 * hidden_states[-1]. */
#include "nb_diagnosis_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_kernels.h"
#include "nb_sha256.h"
#include "nb_verify.h"

typedef struct capture {
    float *rows; /* [n_layers][n_pos][dim] */
    int n_layers, n_pos, dim;
} capture;

static void on_layer(void *user, int layer, int pos0, int n, int dim, const float *hidden)
{
    capture *c = user;
    if (layer < 0 || layer >= c->n_layers || dim != c->dim || pos0 + n > c->n_pos)
        return;
    memcpy(c->rows + ((size_t)layer * c->n_pos + pos0) * dim, hidden,
           sizeof(float) * (size_t)n * dim);
}

/* The trace must hold this prompt's hidden states, at this model's shape. */
static nb_code check_hidden(const nb_trace *tr, const char *text, const nb_model_config *cfg,
                            nb_err *err)
{
    const nb_trace_hidden *h = tr->hidden;
    if (!h)
        return nb_err_set(err, NB_EFORMAT, "%s: no hidden_states (not a diagnosis trace)",
                          tr->path);
    if (strcmp(h->prompt, text))
        return nb_err_set(err, NB_EMISMATCH, "%s: trace is for prompt \"%s\", not \"%s\"",
                          tr->path, h->prompt, text);
    if (h->n_layers != cfg->n_layers || h->dim != cfg->dim || h->n_pos != h->n_ids)
        return nb_err_set(err, NB_EMISMATCH, "%s: trace has %d layers x %d dim, model %d x %d",
                          tr->path, h->n_layers, h->dim, cfg->n_layers, cfg->dim);
    return NB_OK;
}

/* The prompt's ids, which must be the ones HF ran. */
static nb_code encode_as_reference(nb_deploy *d, const char *text, const nb_trace_hidden *h,
                                   int32_t **ids, size_t *n_ids, nb_err *err)
{
    nb_code rc = nb_tokenizer_encode(d->tok, text, strlen(text), 1, 1, ids, n_ids, err);
    if (rc)
        return rc;
    if ((int)*n_ids != h->n_ids || memcmp(*ids, h->ids, *n_ids * sizeof **ids))
        return nb_err_set(err, NB_EMISMATCH,
                          "diagnosis prompt: our tokenizer's %zu ids differ from the reference's %d",
                          *n_ids, h->n_ids);
    return NB_OK;
}

/* One prefill with every layer's output captured, each layer compared with the trace's. */
static nb_code compare_prefill(nb_deploy *d, const nb_trace *tr, const char *text,
                               const int32_t *ids, size_t n_ids, nb_diagnosis_result *out,
                               nb_err *err)
{
    const nb_trace_hidden *h = tr->hidden;
    capture cap = {.n_layers = h->n_layers, .n_pos = h->n_pos, .dim = h->dim};
    cap.rows = calloc((size_t)h->n_layers * h->n_pos * h->dim, sizeof(float));
    out->layers = calloc((size_t)h->n_layers, sizeof *out->layers);
    if (!cap.rows || !out->layers) {
        free(cap.rows);
        return nb_err_set(err, NB_ENOMEM, "out of memory for hidden states");
    }
    const float *logits;
    nb_code rc = nb_deploy_set_layer_hook(d, on_layer, &cap, err);
    if (!rc)
        rc = nb_deploy_prefill(d, ids, (int)n_ids, &logits, err);
    nb_deploy_set_layer_hook(d, NULL, NULL, NULL);
    if (!rc) {
        out->k = tr->k;
        nb_topk_f32(logits, nb_deploy_vocab(d), tr->k, out->dev_final.topk,
                    out->dev_final.logits);
        out->dev_final.token = out->dev_final.topk[0];
        out->ref_final = h->final;
        snprintf(out->prompt, sizeof out->prompt, "%s", text);
        snprintf(out->trace_path, sizeof out->trace_path, "%s", tr->path);
        snprintf(out->trace_sha256, sizeof out->trace_sha256, "%s", tr->sha256);
        out->n_pos = h->n_pos;
        out->n_layers = h->n_layers;
        size_t per = (size_t)h->n_pos * h->dim;
        for (int l = 0; l < h->n_layers; l++) {
            out->layers[l].layer = l;
            out->layers[l].post_norm = l == h->n_layers - 1;
            nb_cos_stats_rows(cap.rows + per * l, h->data + per * l, h->n_pos, h->dim,
                              &out->layers[l].s);
        }
    }
    free(cap.rows);
    return rc;
}

nb_code nb_diagnosis_run(nb_deploy *d, const char *prompt, const char *trace_path,
                         const char *refdir, const nb_cancel *cancel, nb_diagnosis_result *out,
                         nb_err *err)
{
    memset(out, 0, sizeof *out);
    const char *text = prompt ? prompt : NB_DIAGNOSIS_DEFAULT_PROMPT;
    char digest[65];
    nb_sha256_mem_hex(text, strlen(text), digest);
    nb_trace *tr = NULL;
    nb_code rc = trace_path ? nb_trace_load(trace_path, &tr, err)
                            : nb_trace_find(refdir ? refdir : nb_verify_default_refdir(),
                                            d->model_sha256, digest, 1, &tr, err);
    if (rc)
        return rc;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!(rc = check_hidden(tr, text, nb_deploy_cfg(d), err)) &&
        !(rc = encode_as_reference(d, text, tr->hidden, &ids, &n_ids, err))) {
        if (nb_cancel_requested(cancel)) /* the one forward pass is the unit of work */
            rc = nb_err_set(err, NB_ECANCELED, "diagnosis cancelled before the forward pass");
        else
            rc = compare_prefill(d, tr, text, ids, n_ids, out, err);
    }
    free(ids);
    nb_trace_free(tr);
    if (rc)
        nb_diagnosis_result_free(out);
    return rc;
}
