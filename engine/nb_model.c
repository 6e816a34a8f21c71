/* nb_model: reads a Llama-like config from GGUF metadata or HF config.json, binds and
 * shape-checks every weight, and hides GGUF's q/k permutation and folded norms behind views. */
#include "nb_model.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nb_json.h"
#include "nb_safetensors.h"

#define CONFIG_MAX_BYTES (4u << 20)

/* Sanity bounds: far above any Llama we could run, low enough that products
 * of them cannot overflow int64. */
#define MAX_DIM 65536
#define MAX_LAYERS 1024
#define MAX_HEADS 1024
#define MAX_HEAD_DIM 1024
#define MAX_FFN (1 << 20)
#define MAX_VOCAB (1 << 24)
#define MAX_CTX (1 << 24)

/* What one Llama-like family does differently; a new family is a row here (and its tensor
 * names in gguf_names), not a fork of the engine. Values are the ones HF transformers uses. */
typedef struct arch_desc {
    const char *name;       /* general.architecture, also the prefix of its metadata keys */
    int qk_permuted;        /* llama.cpp's converter permuted q/k rows for its interleaved RoPE */
    int norm_folded;        /* the converter stored 1 + w for (1 + w) norms */
    int norm_unit_offset, post_norms, qk_norm, embed_scaled;
    nb_ffn_act act;
    float rope_theta;       /* base when the file names none */
    int swa_every;          /* global-layer period with a sliding window (HF's default pattern) */
    float rope_theta_swa;   /* sliding layers' base (HF's rope_local_base_freq default) */
} arch_desc;

static const arch_desc archs[] = {
    {"llama", 1, 0, 0, 0, 0, 0, NB_ACT_SILU, 10000.0f, 0, 0.0f},
    {"gemma3", 0, 1, 1, 1, 1, 1, NB_ACT_GELU_TANH, 1000000.0f, 6, 10000.0f},
};

static const arch_desc *arch_find(const char *p, size_t len)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strlen(archs[i].name) == len && !memcmp(archs[i].name, p, len))
            return &archs[i];
    return NULL;
}

struct nb_model {
    const arch_desc *arch;
    nb_model_format fmt;
    char *path;
    char *dir; /* HF only */
    const struct tensor_names *hf; /* HF only: the family's tensor names */
    nb_gguf *gguf;
    nb_safetensors *st;
    nb_model_config cfg;
    nb_tensor tok_embd, out_norm, lm_head;
    nb_layer_weights *layers;
    nb_ttype wtype;
};

/* ---- shared between formats ---- */

static nb_code find(const nb_model *m, const char *name, nb_tensor *t, nb_err *err)
{
    nb_code rc = m->gguf ? nb_gguf_find_tensor(m->gguf, name, t, err)
                         : nb_safetensors_find(m->st, name, t, err);
    if (rc == NB_ENOTFOUND)
        return nb_err_set(err, NB_ENOTFOUND, "%s: required tensor '%s' is missing", m->path, name);
    return rc;
}

/* Binds a weight and checks it is rows x cols (a vector when rows == 0).
 * what explains the expectation in terms of the config. */
static nb_code bind(const nb_model *m, const char *name, int64_t rows, int64_t cols,
                    const char *what, nb_tensor *t, nb_err *err)
{
    nb_code rc = find(m, name, t, err);
    if (rc)
        return rc;
    int want_dims = rows ? 2 : 1;
    int64_t want_rows = rows ? rows : 1;
    if (t->n_dims != want_dims || t->rows != want_rows || t->cols != cols) {
        if (rows)
            return nb_err_set(err, NB_EMISMATCH,
                              "%s: tensor '%s': shape %lldx%lld (%d-D), expected %lldx%lld (%s)",
                              m->path, name, (long long)t->rows, (long long)t->cols, t->n_dims,
                              (long long)rows, (long long)cols, what);
        return nb_err_set(err, NB_EMISMATCH,
                          "%s: tensor '%s': shape %lldx%lld (%d-D), expected a vector of %lld (%s)",
                          m->path, name, (long long)t->rows, (long long)t->cols, t->n_dims,
                          (long long)cols, what);
    }
    return NB_OK;
}

static nb_code bad_cfg(const nb_model *m, const char *field, double v, const char *rule,
                       nb_err *err)
{
    return nb_err_set(err, NB_EINVAL, "%s: config %s = %g: %s", m->path, field, v, rule);
}

static nb_code check_range(const nb_model *m, const char *field, int v, int max, nb_err *err)
{
    if (v < 1 || v > max) {
        char rule[64];
        snprintf(rule, sizeof rule, "must be in 1..%d", max);
        return bad_cfg(m, field, v, rule, err);
    }
    return NB_OK;
}

/* field names are the HF / GGUF key the value came from, so users can fix it */
typedef struct cfg_names {
    const char *layers, *dim, *ffn, *heads, *kv_heads, *head_dim, *vocab, *ctx, *eps, *theta, *swa;
} cfg_names;

static nb_code validate_cfg(const nb_model *m, const cfg_names *f, nb_err *err)
{
    const nb_model_config *c = &m->cfg;
    nb_code rc;
    if ((rc = check_range(m, f->layers, c->n_layers, MAX_LAYERS, err)) ||
        (rc = check_range(m, f->dim, c->dim, MAX_DIM, err)) ||
        (rc = check_range(m, f->ffn, c->ffn_dim, MAX_FFN, err)) ||
        (rc = check_range(m, f->heads, c->n_heads, MAX_HEADS, err)) ||
        (rc = check_range(m, f->kv_heads, c->n_kv_heads, MAX_HEADS, err)) ||
        (rc = check_range(m, f->head_dim, c->head_dim, MAX_HEAD_DIM, err)) ||
        (rc = check_range(m, f->vocab, c->vocab, MAX_VOCAB, err)) ||
        (rc = check_range(m, f->ctx, c->max_ctx, MAX_CTX, err)))
        return rc;
    if (c->n_heads % c->n_kv_heads)
        return nb_err_set(err, NB_EINVAL, "%s: config %s = %d is not divisible by %s = %d",
                          m->path, f->heads, c->n_heads, f->kv_heads, c->n_kv_heads);
    if (c->head_dim % 2)
        return bad_cfg(m, f->head_dim, c->head_dim, "rotary embedding needs an even head size",
                       err);
    if (!(c->rms_eps > 0.0f && c->rms_eps < 1.0f))
        return bad_cfg(m, f->eps, c->rms_eps, "must be in (0, 1)", err);
    if (!(c->rope_theta > 0.0f && isfinite(c->rope_theta)))
        return bad_cfg(m, f->theta, c->rope_theta, "must be positive and finite", err);
    if (c->sliding_window < 0 || c->sliding_window > MAX_CTX)
        return bad_cfg(m, f->swa, c->sliding_window, "must be in 0..2^24", err);
    if (c->rope_scaling == NB_ROPE_LLAMA3) {
        if (!(c->rope_factor >= 1.0f && isfinite(c->rope_factor)))
            return bad_cfg(m, "rope scaling factor", c->rope_factor, "must be >= 1", err);
        if (!(c->rope_low_freq_factor > 0.0f && c->rope_high_freq_factor > c->rope_low_freq_factor &&
              isfinite(c->rope_high_freq_factor)))
            return bad_cfg(m, "rope scaling high_freq_factor", c->rope_high_freq_factor,
                           "needs 0 < low_freq_factor < high_freq_factor", err);
        if (c->rope_orig_max_pos < 1 || c->rope_orig_max_pos > MAX_CTX)
            return bad_cfg(m, "rope scaling original_max_position_embeddings",
                           c->rope_orig_max_pos, "must be in 1..2^24", err);
    }
    return NB_OK;
}

#define N_LAYER_TENSORS 13

typedef struct tensor_names {
    const char *embd, *norm, *head;
    /* printf formats taking the layer index, in nb_layer_weights order */
    const char *layer_fmt[N_LAYER_TENSORS];
} tensor_names;

static const tensor_names gguf_names = {
    "token_embd.weight", "output_norm.weight", "output.weight",
    {"blk.%d.attn_norm.weight", "blk.%d.attn_q.weight", "blk.%d.attn_k.weight",
     "blk.%d.attn_v.weight", "blk.%d.attn_output.weight", "blk.%d.ffn_norm.weight",
     "blk.%d.ffn_gate.weight", "blk.%d.ffn_up.weight", "blk.%d.ffn_down.weight",
     "blk.%d.attn_q_norm.weight", "blk.%d.attn_k_norm.weight",
     "blk.%d.post_attention_norm.weight", "blk.%d.post_ffw_norm.weight"}};

/* HF's Llama: post_attention_layernorm is the norm in front of the MLP. */
static const tensor_names hf_names = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
    {"model.layers.%d.input_layernorm.weight", "model.layers.%d.self_attn.q_proj.weight",
     "model.layers.%d.self_attn.k_proj.weight", "model.layers.%d.self_attn.v_proj.weight",
     "model.layers.%d.self_attn.o_proj.weight", "model.layers.%d.post_attention_layernorm.weight",
     "model.layers.%d.mlp.gate_proj.weight", "model.layers.%d.mlp.up_proj.weight",
     "model.layers.%d.mlp.down_proj.weight", NULL, NULL, NULL, NULL}};

/* HF's Gemma 3: pre_feedforward_layernorm feeds the MLP, and post_attention_layernorm norms
 * the attention output before the residual add (the GGUF's post_attention_norm). */
static const tensor_names hf_names_gemma3 = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
    {"model.layers.%d.input_layernorm.weight", "model.layers.%d.self_attn.q_proj.weight",
     "model.layers.%d.self_attn.k_proj.weight", "model.layers.%d.self_attn.v_proj.weight",
     "model.layers.%d.self_attn.o_proj.weight", "model.layers.%d.pre_feedforward_layernorm.weight",
     "model.layers.%d.mlp.gate_proj.weight", "model.layers.%d.mlp.up_proj.weight",
     "model.layers.%d.mlp.down_proj.weight", "model.layers.%d.self_attn.q_norm.weight",
     "model.layers.%d.self_attn.k_norm.weight", "model.layers.%d.post_attention_layernorm.weight",
     "model.layers.%d.post_feedforward_layernorm.weight"}};

/* An HF family: the architectures and model_type names config.json gives it. */
typedef struct hf_family {
    const char *arch;         /* archs[].name */
    const char *class_name;   /* "architectures" entry */
    const char *model_type;
    const tensor_names *names;
} hf_family;

static const hf_family hf_families[] = {
    {"llama", "LlamaForCausalLM", "llama", &hf_names},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", &hf_names_gemma3},
};

static nb_code bind_layers(nb_model *m, const tensor_names *nm, nb_err *err)
{
    const nb_model_config *c = &m->cfg;
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    struct {
        int64_t rows, cols;
        const char *what;
        int need;
    } shp[N_LAYER_TENSORS] = {
        {0, c->dim, "hidden size", 1},
        {q, c->dim, "n_heads*head_dim x hidden size", 1},
        {kv, c->dim, "n_kv_heads*head_dim x hidden size", 1},
        {kv, c->dim, "n_kv_heads*head_dim x hidden size", 1},
        {c->dim, q, "hidden size x n_heads*head_dim", 1},
        {0, c->dim, "hidden size", 1},
        {c->ffn_dim, c->dim, "intermediate size x hidden size", 1},
        {c->ffn_dim, c->dim, "intermediate size x hidden size", 1},
        {c->dim, c->ffn_dim, "hidden size x intermediate size", 1},
        {0, c->head_dim, "head_dim", c->qk_norm},
        {0, c->head_dim, "head_dim", c->qk_norm},
        {0, c->dim, "hidden size", c->post_norms},
        {0, c->dim, "hidden size", c->post_norms},
    };
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", m->path);
    for (int l = 0; l < c->n_layers; l++) {
        nb_layer_weights *w = &m->layers[l];
        nb_tensor *slot[N_LAYER_TENSORS] = {
            &w->attn_norm, &w->wq,     &w->wk,     &w->wv,             &w->wo,
            &w->ffn_norm,  &w->w_gate, &w->w_up,   &w->w_down,         &w->q_norm,
            &w->k_norm,    &w->post_attn_norm,     &w->post_ffn_norm};
        for (int k = 0; k < N_LAYER_TENSORS; k++) {
            if (!shp[k].need)
                continue;
            if (!nm->layer_fmt[k])
                return nb_err_set(err, NB_EUNSUPPORTED, "%s: %s weights are not supported in"
                                  " this format", m->path, c->arch);
            char name[NB_TENSOR_NAME_MAX];
            snprintf(name, sizeof name, nm->layer_fmt[k], l);
            nb_code rc = bind(m, name, shp[k].rows, shp[k].cols, shp[k].what, slot[k], err);
            if (rc)
                return rc;
        }
        if (m->gguf && m->arch->qk_permuted) { /* HF order is the contract */
            w->wq.qk_perm_heads = c->n_heads;
            w->wk.qk_perm_heads = c->n_kv_heads;
        }
    }
    return NB_OK;
}

/* Binds embedding, final norm and head; vocab must already be set. */
static nb_code bind_globals(nb_model *m, const tensor_names *nm, int want_head, nb_err *err)
{
    const nb_model_config *c = &m->cfg;
    nb_code rc;
    if ((rc = bind(m, nm->embd, c->vocab, c->dim, "vocab x hidden size", &m->tok_embd, err)) ||
        (rc = bind(m, nm->norm, 0, c->dim, "hidden size", &m->out_norm, err)))
        return rc;
    if (!want_head) {
        m->lm_head = m->tok_embd;
        m->cfg.tied_embeddings = 1;
        return NB_OK;
    }
    m->cfg.tied_embeddings = 0;
    return bind(m, nm->head, c->vocab, c->dim, "vocab x hidden size", &m->lm_head, err);
}

static void pick_weight_type(nb_model *m)
{
    int count[NB_TT_COUNT] = {0};
    count[m->tok_embd.type]++;
    if (!m->cfg.tied_embeddings)
        count[m->lm_head.type]++;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const nb_layer_weights *w = &m->layers[l];
        const nb_tensor *mats[7] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up,
                                    &w->w_down};
        for (int k = 0; k < 7; k++)
            count[mats[k]->type]++;
    }
    int best = 0;
    for (int t = 1; t < NB_TT_COUNT; t++)
        if (count[t] > count[best])
            best = t;
    m->wtype = (nb_ttype)best;
}

/* ---- GGUF ---- */

/* The metadata keys of a family are "<arch>.<suffix>". */
typedef struct akey {
    char s[96];
} akey;

static akey key_of(const nb_model *m, const char *suffix)
{
    akey k;
    snprintf(k.s, sizeof k.s, "%s.%s", m->arch->name, suffix);
    return k;
}

static nb_code gguf_int(const nb_model *m, const char *suffix, int required, int dflt, int *out,
                        nb_err *err)
{
    akey key = key_of(m, suffix);
    int64_t v;
    nb_code rc = nb_gguf_get_i64(m->gguf, key.s, &v, err);
    if (rc == NB_ENOTFOUND && !required) {
        *out = dflt;
        return NB_OK;
    }
    if (rc)
        return rc;
    if (v < 0 || v > INT32_MAX)
        return nb_err_set(err, NB_EINVAL, "%s: metadata '%s' = %lld is out of range", m->path,
                          key.s, (long long)v);
    *out = (int)v;
    return NB_OK;
}

static nb_code gguf_float(const nb_model *m, const char *suffix, int required, float dflt,
                          float *out, nb_err *err)
{
    akey key = key_of(m, suffix);
    double v;
    nb_code rc = nb_gguf_get_f64(m->gguf, key.s, &v, err);
    if (rc == NB_ENOTFOUND && !required) {
        *out = dflt;
        return NB_OK;
    }
    if (rc)
        return rc;
    *out = (float)v;
    return NB_OK;
}

static int str_is(nb_gguf_str s, const char *lit)
{
    return s.len == strlen(lit) && !memcmp(s.ptr, lit, s.len);
}

static nb_code gguf_rope_scaling(nb_model *m, nb_err *err)
{
    nb_model_config *c = &m->cfg;
    nb_tensor t;
    if (nb_gguf_find_tensor(m->gguf, "rope_freqs.weight", &t, NULL) == NB_OK)
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: tensor 'rope_freqs.weight' (per-dimension rope frequency factors)"
                          " is not supported", m->path);
    nb_gguf_str ty;
    akey tk = key_of(m, "rope.scaling.type");
    nb_code rc = nb_gguf_get_str(m->gguf, tk.s, &ty, err);
    if (rc == NB_ENOTFOUND)
        return NB_OK;
    if (rc)
        return rc;
    if (str_is(ty, "none"))
        return NB_OK;
    /* llama3 scaling is Llama's; Gemma 3's larger models scale their global layers linearly,
     * which this engine does not do yet */
    if (!str_is(ty, "llama3") || strcmp(m->arch->name, "llama"))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: %s '%.*s' is not supported (none%s)", m->path, tk.s,
                          (int)(ty.len > 32 ? 32 : ty.len), ty.ptr,
                          strcmp(m->arch->name, "llama") ? " is" : ", llama3 are");
    c->rope_scaling = NB_ROPE_LLAMA3;
    if ((rc = gguf_float(m, "rope.scaling.factor", 1, 0, &c->rope_factor, err)) ||
        (rc = gguf_float(m, "rope.scaling.low_freq_factor", 1, 0, &c->rope_low_freq_factor,
                         err)) ||
        (rc = gguf_float(m, "rope.scaling.high_freq_factor", 1, 0, &c->rope_high_freq_factor,
                         err)) ||
        (rc = gguf_int(m, "rope.scaling.original_context_length", 1, 0, &c->rope_orig_max_pos,
                       err)))
        return rc;
    return NB_OK;
}

/* The switches every file of the family shares, from the table. */
static void family_switches(nb_model *m)
{
    nb_model_config *c = &m->cfg;
    const arch_desc *a = m->arch;
    snprintf(c->arch, sizeof c->arch, "%s", a->name);
    c->norm_unit_offset = a->norm_unit_offset;
    c->post_norms = a->post_norms;
    c->qk_norm = a->qk_norm;
    c->act = a->act;
    c->embed_scaled = a->embed_scaled;
}

/* The family's switches from the table, and its sliding window and soft-cap from the file. */
static nb_code gguf_family(nb_model *m, nb_err *err)
{
    nb_model_config *c = &m->cfg;
    const arch_desc *a = m->arch;
    family_switches(m);
    /* HF's query_pre_attn_scalar defaults to head_dim for Gemma 3 (GGUF does not store it) */
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    nb_code rc;
    if ((rc = gguf_float(m, "final_logit_softcapping", 0, 0.0f, &c->final_softcap, err)))
        return rc;
    if (!(c->final_softcap >= 0.0f && isfinite(c->final_softcap)))
        return bad_cfg(m, key_of(m, "final_logit_softcapping").s, c->final_softcap,
                       "must be positive and finite", err);
    float attn_cap;
    if ((rc = gguf_float(m, "attn_logit_softcapping", 0, 0.0f, &attn_cap, err)))
        return rc;
    if (attn_cap != 0.0f)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: %s = %g: attention soft-capping is not"
                          " supported", m->path, key_of(m, "attn_logit_softcapping").s,
                          (double)attn_cap);
    if (!a->swa_every)
        return NB_OK;
    if ((rc = gguf_int(m, "attention.sliding_window", 0, 0, &c->sliding_window, err)))
        return rc;
    c->swa_every = a->swa_every;
    c->rope_theta_swa = a->rope_theta_swa;
    return NB_OK;
}

static nb_code open_gguf(nb_model *m, nb_err *err)
{
    nb_model_config *c = &m->cfg;
    nb_code rc = nb_gguf_open(m->path, &m->gguf, err);
    if (rc)
        return rc;
    m->fmt = NB_FMT_GGUF;
    nb_gguf_str s;
    if ((rc = nb_gguf_get_str(m->gguf, "general.architecture", &s, err)))
        return rc;
    if (!(m->arch = arch_find(s.ptr, s.len)))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: general.architecture '%.*s' is not supported (llama, gemma3 are)",
                          m->path, (int)(s.len > 32 ? 32 : s.len), s.ptr);
    const char *an = m->arch->name;
    snprintf(c->arch, sizeof c->arch, "%s", an);
    if (nb_gguf_get_str(m->gguf, "general.name", &s, NULL) == NB_OK && s.len) {
        snprintf(c->name, sizeof c->name, "%.*s", (int)(s.len > 127 ? 127 : s.len), s.ptr);
    } else {
        const char *b = strrchr(m->path, '/');
        snprintf(c->name, sizeof c->name, "%s", b ? b + 1 : m->path);
    }
    int rope_dims, key_len, val_len;
    if ((rc = gguf_int(m, "block_count", 1, 0, &c->n_layers, err)) ||
        (rc = gguf_int(m, "embedding_length", 1, 0, &c->dim, err)) ||
        (rc = gguf_int(m, "feed_forward_length", 1, 0, &c->ffn_dim, err)) ||
        (rc = gguf_int(m, "attention.head_count", 1, 0, &c->n_heads, err)) ||
        (rc = gguf_int(m, "attention.head_count_kv", 0, c->n_heads, &c->n_kv_heads, err)) ||
        (rc = gguf_int(m, "context_length", 1, 0, &c->max_ctx, err)) ||
        (rc = gguf_float(m, "attention.layer_norm_rms_epsilon", 1, 0, &c->rms_eps, err)) ||
        (rc = gguf_float(m, "rope.freq_base", 0, m->arch->rope_theta, &c->rope_theta, err)))
        return rc;
    if (c->n_heads < 1)
        return bad_cfg(m, key_of(m, "attention.head_count").s, c->n_heads, "must be positive",
                       err);
    int dflt_hd = c->dim % c->n_heads ? 0 : c->dim / c->n_heads;
    if ((rc = gguf_int(m, "attention.key_length", 0, dflt_hd, &key_len, err)) ||
        (rc = gguf_int(m, "attention.value_length", 0, key_len, &val_len, err)) ||
        (rc = gguf_int(m, "rope.dimension_count", 0, key_len, &rope_dims, err)))
        return rc;
    if (!key_len)
        return nb_err_set(err, NB_EINVAL,
                          "%s: %s.embedding_length %d is not divisible by"
                          " %s.attention.head_count %d (and no %s.attention.key_length)",
                          m->path, an, c->dim, an, c->n_heads, an);
    if (val_len != key_len)
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: %s.attention.value_length %d differs from key_length %d",
                          m->path, an, val_len, key_len);
    if (rope_dims != key_len)
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: %s.rope.dimension_count %d: partial rotary embedding (head size"
                          " %d) is not supported", m->path, an, rope_dims, key_len);
    c->head_dim = key_len;
    if ((rc = gguf_rope_scaling(m, err)) || (rc = gguf_family(m, err)))
        return rc;
    nb_tensor embd;
    if ((rc = find(m, gguf_names.embd, &embd, err)))
        return rc;
    if (embd.rows > MAX_VOCAB)
        return bad_cfg(m, "vocab (token_embd.weight rows)", (double)embd.rows, "too large", err);
    c->vocab = (int)embd.rows;
    int vs;
    if ((rc = gguf_int(m, "vocab_size", 0, c->vocab, &vs, err)))
        return rc;
    if (vs != c->vocab)
        return nb_err_set(err, NB_EMISMATCH,
                          "%s: %s.vocab_size %d but token_embd.weight has %d rows", m->path, an,
                          vs, c->vocab);
    nb_gguf_vtype et;
    uint64_t ntok;
    if (nb_gguf_get_arr_info(m->gguf, "tokenizer.ggml.tokens", &et, &ntok, NULL) == NB_OK &&
        ntok != (uint64_t)c->vocab)
        return nb_err_set(err, NB_EMISMATCH,
                          "%s: tokenizer.ggml.tokens has %llu entries but token_embd.weight has"
                          " %d rows", m->path, (unsigned long long)ntok, c->vocab);
    akey k_layers = key_of(m, "block_count"), k_dim = key_of(m, "embedding_length"),
         k_ffn = key_of(m, "feed_forward_length"), k_heads = key_of(m, "attention.head_count"),
         k_kv = key_of(m, "attention.head_count_kv"), k_hd = key_of(m, "attention.key_length"),
         k_ctx = key_of(m, "context_length"),
         k_eps = key_of(m, "attention.layer_norm_rms_epsilon"),
         k_theta = key_of(m, "rope.freq_base"), k_swa = key_of(m, "attention.sliding_window");
    cfg_names names = {k_layers.s, k_dim.s,  k_ffn.s, k_heads.s, k_kv.s,    k_hd.s,
                       "vocab",    k_ctx.s,  k_eps.s, k_theta.s, k_swa.s};
    if ((rc = validate_cfg(m, &names, err)))
        return rc;
    nb_tensor head;
    int has_head = nb_gguf_find_tensor(m->gguf, gguf_names.head, &head, NULL) == NB_OK;
    if ((rc = bind_globals(m, &gguf_names, has_head, err)))
        return rc;
    return bind_layers(m, &gguf_names, err);
}

/* ---- HF directory ---- */

/* config.json is the user's input: a bad value there is NB_EINVAL, the code the CLI reports
 * as a usage error, where nb_json's checked reads call a wrong member a damaged file. */
/* config.json's fields read as "PATH: key: ..." and are a bad input (NB_EINVAL), not a
 * malformed file. */
static nb_code cfg_code(const char *cfgp, nb_code rc, nb_err *err)
{
    if (rc != NB_EFORMAT)
        return rc;
    nb_err_prefix(err, "%s: ", cfgp);
    if (err)
        err->code = NB_EINVAL;
    return NB_EINVAL;
}

static nb_code cfg_int(const char *cfgp, json_object *o, const char *key, int required, int dflt,
                       int *out, nb_err *err)
{
    int64_t x;
    nb_code rc = nb_json_need_int(o, NULL, key, required, 0, INT32_MAX, dflt, &x, err);
    if (!rc)
        *out = (int)x;
    return cfg_code(cfgp, rc, err);
}

static nb_code cfg_num(const char *cfgp, json_object *o, const char *key, int required,
                       float dflt, float *out, nb_err *err)
{
    double x;
    nb_code rc = nb_json_need_num(o, NULL, key, required, -DBL_MAX, DBL_MAX, dflt, &x, err);
    if (!rc)
        *out = (float)x;
    return cfg_code(cfgp, rc, err);
}

static nb_code hf_arch(const char *cfgp, json_object *root, const hf_family **out, nb_err *err)
{
    const size_t nf = sizeof hf_families / sizeof hf_families[0];
    const char *mt = nb_json_str(root, "model_type", NULL, NULL);
    json_object *archs_j = nb_json_get(root, "architectures");
    const char *a0 = NULL;
    if (archs_j && json_object_is_type(archs_j, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(archs_j); i++) {
            json_object *a = json_object_array_get_idx(archs_j, i);
            const char *s = json_object_is_type(a, json_type_string) ? json_object_get_string(a)
                                                                     : NULL;
            for (size_t f = 0; s && f < nf; f++)
                if (!strcmp(s, hf_families[f].class_name)) {
                    *out = &hf_families[f];
                    return NB_OK;
                }
            if (!a0)
                a0 = s;
        }
    }
    for (size_t f = 0; mt && f < nf; f++)
        if (!strcmp(mt, hf_families[f].model_type)) {
            *out = &hf_families[f];
            return NB_OK;
        }
    return nb_err_set(err, NB_EUNSUPPORTED,
                      "%s: architecture %s (model_type %s) is not supported (LlamaForCausalLM /"
                      " llama, Gemma3ForCausalLM / gemma3_text are)", cfgp, a0 ? a0 : "(none)",
                      mt ? mt : "(none)");
}

static nb_code hf_rope(nb_model *m, const char *cfgp, json_object *root, nb_err *err)
{
    nb_model_config *c = &m->cfg;
    /* transformers 5 nests theta and scaling in rope_parameters; older
     * configs have rope_theta and rope_scaling at top level */
    json_object *rp = nb_json_get(root, "rope_parameters");
    json_object *rs = rp ? rp : nb_json_get(root, "rope_scaling");
    nb_code rc;
    float theta_top;
    if ((rc = cfg_num(cfgp, root, "rope_theta", 0, 10000.0f, &theta_top, err)) ||
        (rc = cfg_num(cfgp, rp, "rope_theta", 0, theta_top, &c->rope_theta, err)))
        return rc;
    if (!rs)
        return NB_OK;
    if (!json_object_is_type(rs, json_type_object))
        return nb_err_set(err, NB_EINVAL, "%s: '%s' must be an object", cfgp,
                          rp ? "rope_parameters" : "rope_scaling");
    const char *ty = nb_json_str(rs, "rope_type", NULL, NULL);
    if (!ty)
        ty = nb_json_str(rs, "type", NULL, NULL);
    if (!ty || !strcmp(ty, "default"))
        return NB_OK;
    if (strcmp(ty, "llama3"))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: rope_type '%.32s' is not supported (default, llama3 are)", cfgp, ty);
    c->rope_scaling = NB_ROPE_LLAMA3;
    if ((rc = cfg_num(cfgp, rs, "factor", 1, 0, &c->rope_factor, err)) ||
        (rc = cfg_num(cfgp, rs, "low_freq_factor", 1, 0, &c->rope_low_freq_factor, err)) ||
        (rc = cfg_num(cfgp, rs, "high_freq_factor", 1, 0, &c->rope_high_freq_factor, err)) ||
        (rc = cfg_int(cfgp, rs, "original_max_position_embeddings", 1, 0,
                       &c->rope_orig_max_pos, err)))
        return rc;
    return NB_OK;
}

/* A soft-cap: absent or null is none; else a finite number >= 0. */
static nb_code cfg_cap(const char *cfgp, json_object *root, const char *key, float *out,
                       nb_err *err)
{
    json_object *v = nb_json_get(root, key);
    *out = 0.0f;
    if (!v || json_object_is_type(v, json_type_null))
        return NB_OK;
    nb_code rc = cfg_num(cfgp, root, key, 1, 0.0f, out, err);
    if (!rc && !(*out >= 0.0f && isfinite(*out)))
        return nb_err_set(err, NB_EINVAL, "%s: '%s' = %g must be >= 0 and finite", cfgp, key,
                          (double)*out);
    return rc;
}

/* One layer type's RoPE base under transformers 5's rope_parameters.<type>; default RoPE only. */
static nb_code gemma_rope_of(const char *cfgp, json_object *rp, const char *type, float dflt,
                             float *out, nb_err *err)
{
    json_object *t = nb_json_get(rp, type);
    *out = dflt;
    if (!t)
        return NB_OK;
    if (!json_object_is_type(t, json_type_object))
        return nb_err_set(err, NB_EINVAL, "%s: 'rope_parameters.%s' must be an object", cfgp, type);
    const char *ty = nb_json_str(t, "rope_type", NULL, NULL);
    if (ty && strcmp(ty, "default"))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: rope_parameters.%s.rope_type '%.32s' is not supported (default is)",
                          cfgp, type, ty);
    return cfg_num(cfgp, t, "rope_theta", 0, dflt, out, err);
}

/* What config.json says of Gemma 3 beyond Llama's keys: the GELU-tanh MLP, the attention
 * scale, soft-caps, the sliding window, which layers slide, and both RoPE bases. */
static nb_code hf_gemma3(nb_model *m, const char *cfgp, json_object *root, nb_err *err)
{
    nb_model_config *c = &m->cfg;
    nb_code rc;
    const char *act = nb_json_str(root, "hidden_activation", NULL, NULL);
    if (!act)
        act = nb_json_str(root, "hidden_act", NULL, NULL);
    if (act && strcmp(act, "gelu_pytorch_tanh"))
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "%s: hidden_activation '%.32s' is not supported (gelu_pytorch_tanh is)",
                          cfgp, act);
    int qpas;
    if ((rc = cfg_int(cfgp, root, "query_pre_attn_scalar", 0, c->head_dim, &qpas, err)))
        return rc;
    if (qpas < 1)
        return nb_err_set(err, NB_EINVAL, "%s: query_pre_attn_scalar %d must be positive", cfgp,
                          qpas);
    c->attn_scale = 1.0f / sqrtf((float)qpas);
    float attn_cap;
    if ((rc = cfg_cap(cfgp, root, "final_logit_softcapping", &c->final_softcap, err)) ||
        (rc = cfg_cap(cfgp, root, "attn_logit_softcapping", &attn_cap, err)))
        return rc;
    if (attn_cap != 0.0f)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: attn_logit_softcapping = %g: attention"
                          " soft-capping is not supported", cfgp, (double)attn_cap);
    if ((rc = cfg_int(cfgp, root, "sliding_window", 0, 4096, &c->sliding_window, err)))
        return rc;
    /* the pattern: layer l is global when (l + 1) % P == 0; layer_types, when given, must
     * follow it (the engine has no other placement of global layers) */
    int P;
    if ((rc = cfg_int(cfgp, root, "_sliding_window_pattern", 0, m->arch->swa_every, &P, err)) ||
        (rc = cfg_int(cfgp, root, "sliding_window_pattern", 0, P, &P, err)))
        return rc;
    if (P < 1)
        return nb_err_set(err, NB_EINVAL, "%s: sliding_window_pattern %d must be positive", cfgp, P);
    c->swa_every = P;
    json_object *lt = nb_json_get(root, "layer_types");
    if (lt) {
        if (!json_object_is_type(lt, json_type_array) ||
            (int)json_object_array_length(lt) != c->n_layers)
            return nb_err_set(err, NB_EINVAL, "%s: 'layer_types' must be an array of %d entries"
                              " (num_hidden_layers)", cfgp, c->n_layers);
        for (int l = 0; l < c->n_layers; l++) {
            json_object *e = json_object_array_get_idx(lt, (size_t)l);
            const char *ty = json_object_is_type(e, json_type_string) ? json_object_get_string(e)
                                                                      : "";
            int swa = !strcmp(ty, "sliding_attention");
            if (!swa && strcmp(ty, "full_attention"))
                return nb_err_set(err, NB_EINVAL, "%s: layer_types[%d] '%.32s': expected"
                                  " sliding_attention or full_attention", cfgp, l, ty);
            if (swa != ((l + 1) % P != 0))
                return nb_err_set(err, NB_EUNSUPPORTED, "%s: layer_types[%d] is %s, which the"
                                  " pattern of one global layer in %d does not give", cfgp, l,
                                  ty, P);
        }
    }
    json_object *rp = nb_json_get(root, "rope_parameters");
    if (rp && !json_object_is_type(rp, json_type_object))
        return nb_err_set(err, NB_EINVAL, "%s: 'rope_parameters' must be an object", cfgp);
    json_object *rs = nb_json_get(root, "rope_scaling");
    if (rs && !json_object_is_type(rs, json_type_null))
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: rope_scaling is not supported for Gemma 3"
                          " (its larger models scale their global layers linearly)", cfgp);
    float theta, theta_swa;
    if ((rc = cfg_num(cfgp, root, "rope_theta", 0, m->arch->rope_theta, &theta, err)) ||
        (rc = cfg_num(cfgp, root, "rope_local_base_freq", 0, m->arch->rope_theta_swa, &theta_swa,
                      err)))
        return rc;
    if (rp && ((rc = gemma_rope_of(cfgp, rp, "full_attention", theta, &c->rope_theta, err)) ||
               (rc = gemma_rope_of(cfgp, rp, "sliding_attention", theta_swa, &c->rope_theta_swa,
                                   err))))
        return rc;
    if (!rp) {
        c->rope_theta = theta;
        c->rope_theta_swa = theta_swa;
    }
    if (!(c->rope_theta_swa > 0.0f && isfinite(c->rope_theta_swa)))
        return nb_err_set(err, NB_EINVAL, "%s: the sliding layers' rope_theta %g must be positive"
                          " and finite", cfgp, (double)c->rope_theta_swa);
    json_object *tie = nb_json_get(root, "tie_word_embeddings");
    if (!tie) /* Gemma3TextConfig's default */
        c->tied_embeddings = 1;
    return NB_OK;
}

static nb_code hf_config(nb_model *m, json_object *root, const char *cfgp, nb_err *err)
{
    nb_model_config *c = &m->cfg;
    nb_code rc;
    if (!json_object_is_type(root, json_type_object))
        return nb_err_set(err, NB_EFORMAT, "%s: not a JSON object", cfgp);
    const hf_family *fam = NULL;
    if ((rc = hf_arch(cfgp, root, &fam, err)))
        return rc;
    m->hf = fam->names;
    m->arch = arch_find(fam->arch, strlen(fam->arch));
    family_switches(m);
    const char *b = strrchr(m->dir, '/');
    snprintf(c->name, sizeof c->name, "%s", b && b[1] ? b + 1 : m->dir);
    if ((rc = cfg_int(cfgp, root, "num_hidden_layers", 1, 0, &c->n_layers, err)) ||
        (rc = cfg_int(cfgp, root, "hidden_size", 1, 0, &c->dim, err)) ||
        (rc = cfg_int(cfgp, root, "intermediate_size", 1, 0, &c->ffn_dim, err)) ||
        (rc = cfg_int(cfgp, root, "num_attention_heads", 1, 0, &c->n_heads, err)) ||
        (rc = cfg_int(cfgp, root, "num_key_value_heads", 0, c->n_heads, &c->n_kv_heads,
                       err)) ||
        (rc = cfg_int(cfgp, root, "max_position_embeddings", 0, 2048, &c->max_ctx, err)) ||
        (rc = cfg_num(cfgp, root, "rms_norm_eps", 0, 1e-6f, &c->rms_eps, err)))
        return rc;
    if (c->n_heads < 1)
        return bad_cfg(m, "num_attention_heads", c->n_heads, "must be positive", err);
    int dflt_hd = c->dim % c->n_heads ? 0 : c->dim / c->n_heads;
    if ((rc = cfg_int(cfgp, root, "head_dim", 0, dflt_hd, &c->head_dim, err)))
        return rc;
    if (!c->head_dim)
        return nb_err_set(err, NB_EINVAL,
                          "%s: hidden_size %d is not divisible by num_attention_heads %d (and no"
                          " head_dim)", cfgp, c->dim, c->n_heads);
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    json_object *tie = nb_json_get(root, "tie_word_embeddings");
    if (tie && !json_object_is_type(tie, json_type_boolean))
        return nb_err_set(err, NB_EINVAL, "%s: 'tie_word_embeddings' must be true or false", cfgp);
    c->tied_embeddings = tie ? json_object_get_boolean(tie) : 0;
    if (!strcmp(m->arch->name, "gemma3"))
        return hf_gemma3(m, cfgp, root, err);
    return hf_rope(m, cfgp, root, err);
}

static nb_code open_hf(nb_model *m, nb_err *err)
{
    nb_model_config *c = &m->cfg;
    m->fmt = NB_FMT_SAFETENSORS;
    if (!(m->dir = strdup(m->path)))
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    size_t dl = strlen(m->dir);
    while (dl > 1 && m->dir[dl - 1] == '/')
        m->dir[--dl] = '\0';
    char cfgp[4096];
    if (snprintf(cfgp, sizeof cfgp, "%s/config.json", m->dir) >= (int)sizeof cfgp)
        return nb_err_set(err, NB_EINVAL, "%s: path too long", m->dir);
    json_object *root;
    nb_code rc = nb_json_read_file(cfgp, CONFIG_MAX_BYTES, &root, err);
    if (rc)
        return rc;
    rc = hf_config(m, root, cfgp, err);
    int vocab_cfg = 0;
    if (!rc)
        rc = cfg_int(cfgp, root, "vocab_size", 0, 0, &vocab_cfg, err);
    json_object_put(root);
    if (rc)
        return rc;
    if ((rc = nb_safetensors_open_dir(m->dir, &m->st, err)))
        return rc;
    nb_tensor embd;
    if ((rc = find(m, m->hf->embd, &embd, err)))
        return rc;
    if (embd.rows > MAX_VOCAB)
        return bad_cfg(m, "vocab (model.embed_tokens.weight rows)", (double)embd.rows,
                       "too large", err);
    c->vocab = (int)embd.rows;
    if (vocab_cfg && vocab_cfg != c->vocab)
        return nb_err_set(err, NB_EMISMATCH,
                          "%s: vocab_size %d but model.embed_tokens.weight has %d rows", cfgp,
                          vocab_cfg, c->vocab);
    static const cfg_names names = {
        "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
        "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
        "rms_norm_eps", "rope_theta", "sliding_window"};
    if ((rc = validate_cfg(m, &names, err)))
        return rc;
    /* tied, or no lm_head at all: the head is the embedding (as HF ties it) */
    nb_tensor head;
    int want_head = !c->tied_embeddings &&
                    nb_safetensors_find(m->st, m->hf->head, &head, NULL) == NB_OK;
    if ((rc = bind_globals(m, m->hf, want_head, err)))
        return rc;
    return bind_layers(m, m->hf, err);
}

/* ---- public ---- */

nb_code nb_model_open(const char *path, nb_model **out, nb_err *err)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return nb_err_set(err, NB_ENOTFOUND, "%s: no such model file or directory", path);
    nb_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    nb_code rc = S_ISDIR(sb.st_mode) ? open_hf(m, err) : open_gguf(m, err);
    if (rc) {
        nb_model_close(m);
        return rc;
    }
    pick_weight_type(m);
    *out = m;
    return NB_OK;
}

void nb_model_close(nb_model *m)
{
    if (!m)
        return;
    nb_gguf_close(m->gguf);
    nb_safetensors_close(m->st);
    free(m->layers);
    free(m->dir);
    free(m->path);
    free(m);
}

int nb_model_layer_is_swa(const nb_model_config *c, int l)
{
    return c->sliding_window > 0 && c->swa_every > 0 && (l + 1) % c->swa_every != 0;
}

void nb_model_norm_row(const nb_model *m, const nb_tensor *t, float *dst)
{
    nb_dequant_row(t->type, t->data, t->cols, dst);
    /* HF's GGUF loader subtracts the 1 again, in fp32, before its dtype cast */
    if (m->fmt == NB_FMT_GGUF && m->arch->norm_folded)
        for (int64_t i = 0; i < t->cols; i++)
            dst[i] = dst[i] - 1.0f;
}

const nb_model_config *nb_model_cfg(const nb_model *m)
{
    return &m->cfg;
}

nb_model_format nb_model_format_of(const nb_model *m)
{
    return m->fmt;
}

const char *nb_model_path(const nb_model *m)
{
    return m->path;
}

const nb_tensor *nb_model_tok_embd(const nb_model *m)
{
    return &m->tok_embd;
}

const nb_tensor *nb_model_out_norm(const nb_model *m)
{
    return &m->out_norm;
}

const nb_tensor *nb_model_lm_head(const nb_model *m)
{
    return &m->lm_head;
}

const nb_layer_weights *nb_model_layer(const nb_model *m, int l)
{
    return l >= 0 && l < m->cfg.n_layers ? &m->layers[l] : NULL;
}

const nb_gguf *nb_model_gguf(const nb_model *m)
{
    return m->gguf;
}

const char *nb_model_dir(const nb_model *m)
{
    return m->dir;
}

const char *nb_model_weight_type(const nb_model *m)
{
    return nb_ttype_name(m->wtype);
}
