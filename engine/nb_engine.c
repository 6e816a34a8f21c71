/* nb_engine: the Llama-like forward pass over nb_kernels, in bf16 (HF rounding points), f32 or
 * q4_1, shaped by the family switches of nb_model_config. Prefill runs in chunks of whole-prompt
 * GEMMs; decode is the same code with n = 1. */
#include "nb_engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fault.h"
#include "nb_kernels.h"
#include "nb_time.h"

#define DEFAULT_MAX_SEQ 2048
#define PREFILL_CHUNK 128

/* A norm weight: Llama's in the activation type, a (1 + w) family's as fp32 1 + w. */
typedef void *normw;

typedef struct layer {
    nb_wmat *wq, *wk, *wv, *wo, *wg, *wu, *wd;
    normw attn_norm, ffn_norm;           /* dim elements */
    normw q_norm, k_norm;                /* head_dim elements, or NULL */
    normw post_attn_norm, post_ffn_norm; /* dim elements, or NULL */
    int window;                 /* keys a query sees (its own included); 0: all earlier ones */
    void *kc, *vc;              /* [max_seq][kv_dim], activation type */
} layer;

struct nb_engine {
    nb_dtype named; /* the dtype that names these weights (nb_engine_weights_dtype) */
    nb_model_config cfg;
    nb_engine_opts opts;
    int f32;      /* activations are fp32 (else bf16) */
    size_t esz;   /* bytes per activation element */
    int kv_dim, q_dim;
    nb_wmat *embd, *lm_head; /* lm_head == embd when tied */
    normw out_norm;
    layer *layers;
    float *rope_cos, *rope_sin; /* [max_seq][head_dim/2] */
    float *swa_cos, *swa_sin;   /* the sliding layers' own base, when they have one */
    float embed_scale;          /* 0: none */
    /* scratch for PREFILL_CHUNK rows */
    void *x, *xb, *q, *k, *v, *att, *g, *u;
    float *hid;    /* fp32 copy of rows for the layer hook */
    void *hid_act; /* PREFILL_CHUNK x dim activation rows: the post-norms' output */
    float *logits; /* vocab */
    void *lbuf;    /* vocab activation-typed logits (bf16 rounding) */
    int pos;       /* tokens in the cache */
    int high_water;/* cache rows written since the last reset */
    int fault_kv;  /* NPUBENCH_FAULT=kv_offset: decode writes KV one slot late */
    int decoding;  /* forward() of a decode step: the decode-only faults apply */
    int fault_mlp; /* NPUBENCH_FAULT=mlp_layer:N: layer N's down projection corrupted; -1 none */
    int fault_kv_short;    /* NPUBENCH_FAULT=kv_short: decode attends one KV position fewer */
    int fault_rope_decode; /* NPUBENCH_FAULT=rope_decode: decode rotates one position late */
    int fault_final_norm;  /* NPUBENCH_FAULT=final_norm: every 4th final-norm weight negated */
    nb_layer_hook hook;
    void *hook_user;
    nb_stage_hook stage_hook;
    void *stage_user;
    float *all_logits; /* nb_engine_prefill_logits: rows from position all_first on */
    int all_first;
    int prof_on;
    nb_op_stats prof[NB_OP_COUNT];
    size_t weight_bytes;
};

const char *nb_op_name(nb_op op)
{
    static const char *names[NB_OP_COUNT] = {
        "embedding", "rmsnorm", "qkv_proj", "rope", "kv_write", "attention", "o_proj",
        "gate_up_proj", "silu_mul", "down_proj", "residual", "final_norm", "lm_head"};
    return op < NB_OP_COUNT ? names[op] : "?";
}

void nb_engine_opts_default(nb_engine_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dtype = NB_DTYPE_BF16;
}

/* ---- setup --------------------------------------------------------------- */

/* The weight type a tensor gets in memory under a dtype. */
static nb_wtype wtype_for(nb_dtype d, nb_ttype stored)
{
    if (d == NB_DTYPE_F32)
        return NB_W_F32;
    if (d == NB_DTYPE_Q4_1 || d == NB_DTYPE_NATIVE) { /* every stored format with a native
                                                         * linear keeps its blocks */
        int w = nb_wtype_of_quant((nb_quant_fmt)stored);
        if (w >= 0)
            return (nb_wtype)w;
    }
    return NB_W_BF16;
}

/* Builds a weight matrix from a tensor view: quantized blocks are copied as
 * they are; everything else is dequantized to fp32 and, for bf16, rounded
 * to nearest-even exactly as HF's .to(bfloat16). */
static nb_code load_wmat_x(nb_dtype d, const nb_tensor *t, int corrupt, nb_wmat **out,
                           size_t *bytes, nb_err *err);

static nb_code load_wmat(nb_dtype d, const nb_tensor *t, nb_wmat **out, size_t *bytes,
                         nb_err *err)
{
    return load_wmat_x(d, t, 0, out, bytes, err);
}

/* The mlp_layer fault's weights: every element times -4, a sign flip and a gain no rounding
 * or quantization explains, so the layer's MLP output points the other way (docs/localization.md). */
#define FAULT_MLP_GAIN (-4.0f)

/* load_wmat, with corrupt: the tensor is dequantized (even under q4_1) and scaled by
 * FAULT_MLP_GAIN. */
static nb_code load_wmat_x(nb_dtype d, const nb_tensor *t, int corrupt, nb_wmat **out,
                           size_t *bytes, nb_err *err)
{
    nb_wtype wt = wtype_for(d, t->type);
    if (corrupt && wt != NB_W_F32)
        wt = NB_W_BF16;
    if (t->cols > INT32_MAX || t->rows > INT32_MAX)
        return nb_err_set(err, NB_EINVAL, "tensor '%s': too large", t->name);
    nb_code rc = nb_wmat_create(wt, (int)t->rows, (int)t->cols, out, err);
    if (rc)
        return nb_err_prefix(err, "tensor '%s': ", t->name);
    float *f = malloc(sizeof(float) * (size_t)t->cols);
    nb_bf16 *b = malloc(sizeof(nb_bf16) * (size_t)t->cols);
    if (!f || !b) {
        free(f);
        free(b);
        nb_wmat_free(*out);
        *out = NULL;
        return nb_err_set(err, NB_ENOMEM, "tensor '%s': out of memory", t->name);
    }
    for (int64_t r = 0; r < t->rows; r++) {
        const void *src = nb_tensor_row(t, r);
        if (nb_wtype_quantized(wt)) {
            nb_wmat_set_row(*out, (int)r, src);
            continue;
        }
        nb_dequant_row(t->type, src, t->cols, f);
        for (int64_t c = 0; corrupt && c < t->cols; c++)
            f[c] *= FAULT_MLP_GAIN;
        if (wt == NB_W_F32) {
            nb_wmat_set_row(*out, (int)r, f);
        } else {
            for (int64_t c = 0; c < t->cols; c++)
                b[c] = nb_f32_to_bf16(f[c]);
            nb_wmat_set_row(*out, (int)r, b);
        }
    }
    free(f);
    free(b);
    rc = nb_wmat_finish(*out, err);
    if (rc) {
        nb_wmat_free(*out);
        *out = NULL;
        return nb_err_prefix(err, "tensor '%s': ", t->name);
    }
    *bytes += nb_wmat_bytes(*out);
    return NB_OK;
}

/* A norm weight vector of n elements. HF holds the parameter in the activation dtype; a (1 + w)
 * family adds the 1 in fp32 at each call, which is done here once. */
/* The final_norm fault: every 4th weight negated, exact in any storage, so a quarter of the
 * normed channels point the other way in prefill and decode alike (docs/localization.md). */
static void corrupt_norm(const nb_engine *e, normw w, int n)
{
    for (int i = 0; i < n; i += 4) {
        if (e->f32 || e->cfg.norm_unit_offset)
            ((float *)w)[i] = -((float *)w)[i];
        else
            ((nb_bf16 *)w)[i] ^= 0x8000;
    }
}

static nb_code load_vec(const nb_engine *e, const nb_model *m, const nb_tensor *t, int n,
                        normw *out, nb_err *err)
{
    if (t->rows * t->cols != n)
        return nb_err_set(err, NB_EMISMATCH, "tensor '%s': %lld elements, expected %d", t->name,
                          (long long)(t->rows * t->cols), n);
    float *f = malloc(sizeof(float) * (size_t)n);
    if (!f)
        return nb_err_set(err, NB_ENOMEM, "tensor '%s': out of memory", t->name);
    nb_model_norm_row(m, t, f);
    if (e->cfg.norm_unit_offset) {
        for (int i = 0; i < n; i++)
            f[i] = 1.0f + (e->f32 ? f[i] : nb_round_bf16(f[i]));
        *out = f;
        return NB_OK;
    }
    if (e->f32) {
        *out = f;
        return NB_OK;
    }
    nb_bf16 *b = malloc(sizeof(nb_bf16) * (size_t)n);
    if (!b) {
        free(f);
        return nb_err_set(err, NB_ENOMEM, "tensor '%s': out of memory", t->name);
    }
    for (int i = 0; i < n; i++)
        b[i] = nb_f32_to_bf16(f[i]);
    free(f);
    *out = b;
    return NB_OK;
}

/* HF's inv_freq (fp32) for a base, with the llama3 long-context adjustment when scaled. */
static void rope_inv_freq(const nb_model_config *c, float theta, int scaled, float *inv)
{
    int hd = c->head_dim;
    for (int i = 0; i < hd / 2; i++) {
        float expo = (float)(2 * i) / (float)hd;
        inv[i] = 1.0f / powf(theta, expo);
    }
    if (!scaled || c->rope_scaling != NB_ROPE_LLAMA3)
        return;
    float old = (float)c->rope_orig_max_pos;
    float low_wl = old / c->rope_low_freq_factor, high_wl = old / c->rope_high_freq_factor;
    for (int i = 0; i < hd / 2; i++) {
        float wl = 2.0f * (float)M_PI / inv[i];
        float f = wl > low_wl ? inv[i] / c->rope_factor : inv[i];
        if (!(wl < high_wl) && !(wl > low_wl)) {
            float s = (old / wl - c->rope_low_freq_factor) /
                      (c->rope_high_freq_factor - c->rope_low_freq_factor);
            f = (1.0f - s) * f / c->rope_factor + s * f;
        }
        inv[i] = f;
    }
}

/* One cos/sin table pair for a base; the global layers' base carries the scaling. */
static nb_code rope_table(nb_engine *e, float theta, int scaled, float **cosp, float **sinp,
                          nb_err *err)
{
    int half = e->cfg.head_dim / 2, S = e->opts.max_seq;
    *cosp = malloc(sizeof(float) * (size_t)S * half);
    *sinp = malloc(sizeof(float) * (size_t)S * half);
    float *inv = malloc(sizeof(float) * (size_t)half);
    if (!*cosp || !*sinp || !inv) {
        free(inv);
        return nb_err_set(err, NB_ENOMEM, "out of memory for the RoPE table (%d positions)", S);
    }
    rope_inv_freq(&e->cfg, theta, scaled, inv);
    float *ct = *cosp, *st = *sinp;
    for (int p = 0; p < S; p++)
        for (int i = 0; i < half; i++) {
            float f = (float)p * inv[i];
            float c = cosf(f), s = sinf(f);
            /* HF casts cos/sin to the activation dtype before applying them */
            ct[(size_t)p * half + i] = e->f32 ? c : nb_round_bf16(c);
            st[(size_t)p * half + i] = e->f32 ? s : nb_round_bf16(s);
        }
    free(inv);
    return NB_OK;
}

static nb_code build_rope(nb_engine *e, nb_err *err)
{
    const nb_model_config *c = &e->cfg;
    nb_code rc = rope_table(e, c->rope_theta, 1, &e->rope_cos, &e->rope_sin, err);
    if (rc || !c->sliding_window || c->rope_theta_swa <= 0.0f)
        return rc;
    return rope_table(e, c->rope_theta_swa, 0, &e->swa_cos, &e->swa_sin, err);
}

static nb_code alloc_buf(void **p, size_t n, nb_err *err)
{
    *p = calloc(1, n ? n : 1);
    return *p ? NB_OK : nb_err_set(err, NB_ENOMEM, "out of memory (%zu bytes)", n);
}

/* The shapes this engine computes: a context within the model's, even heads, whole groups. */
static nb_code check_shapes(const nb_engine *e, nb_err *err)
{
    const nb_model_config *c = &e->cfg;
    if (e->opts.max_seq < 1 || e->opts.max_seq > c->max_ctx || e->opts.max_seq > (1 << 20))
        return nb_err_set(err, NB_EINVAL, "max_seq %d: must be 1..%d (the model's context length)",
                          e->opts.max_seq, c->max_ctx);
    if (c->head_dim % 2 || c->n_heads % c->n_kv_heads)
        return nb_err_set(err, NB_EUNSUPPORTED, "head_dim %d / heads %d / kv heads %d unsupported",
                          c->head_dim, c->n_heads, c->n_kv_heads);
    /* the attention kernels scale by 1/sqrt(head_dim) */
    if (fabsf(c->attn_scale * sqrtf((float)c->head_dim) - 1.0f) > 1e-6f)
        return nb_err_set(err, NB_EUNSUPPORTED, "attention scale %g: only 1/sqrt(head_dim %d) is"
                          " supported", (double)c->attn_scale, c->head_dim);
    return NB_OK;
}

/* One layer linear's vote on its deployment's name: Q4_1 blocks, or anything else (another
 * block format, or bf16 / f32 where a linear is not kept quantized). */
static void name_vote(nb_wtype wt, int *q4_1, int *other)
{
    if (wt == NB_W_Q4_1)
        *q4_1 = 1;
    else
        *other = 1;
}

/* q4_1 and native lay out the same weights (wtype_for: every stored format with a native
 * linear keeps its blocks), so they are one deployment of a file and get one name, the file's
 * as llama.cpp's file type names it ("mostly Q4_1": the layers' linears, whatever the
 * embedding is): q4_1 when every layer linear kept is Q4_1 (SmolLM2's GGUF, its embedding
 * Q8_0), native when they mix formats (Gemma's Q5_0 / Q4_K / Q6_K). Other dtypes name
 * themselves. */
static nb_dtype weights_dtype(const nb_engine *e)
{
    nb_dtype d = e->opts.dtype;
    if (d != NB_DTYPE_Q4_1 && d != NB_DTYPE_NATIVE)
        return d;
    int q4_1 = 0, other = 0;
    for (int l = 0; l < e->cfg.n_layers; l++) {
        const layer *L = &e->layers[l];
        const nb_wmat *lw[7] = {L->wq, L->wk, L->wv, L->wo, L->wg, L->wu, L->wd};
        for (int i = 0; i < 7; i++)
            if (lw[i])
                name_vote(nb_wmat_type(lw[i]), &q4_1, &other);
    }
    return q4_1 && !other ? NB_DTYPE_Q4_1 : NB_DTYPE_NATIVE;
}

nb_dtype nb_engine_model_dtype(const nb_model *m, nb_dtype d)
{
    if (d != NB_DTYPE_Q4_1 && d != NB_DTYPE_NATIVE)
        return d;
    int q4_1 = 0, other = 0;
    for (int l = 0; l < nb_model_cfg(m)->n_layers; l++) {
        const nb_layer_weights *L = nb_model_layer(m, l);
        const nb_tensor *lw[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                  &L->w_down};
        for (int i = 0; i < 7; i++)
            if (lw[i]->data)
                name_vote(wtype_for(d, lw[i]->type), &q4_1, &other);
    }
    return q4_1 && !other ? NB_DTYPE_Q4_1 : NB_DTYPE_NATIVE;
}

/* Every weight in the engine's layout, and each layer's KV cache. */
static nb_code load_weights(nb_engine *e, const nb_model *m, nb_dtype dtype, nb_err *err)
{
    const nb_model_config *c = &e->cfg;
    nb_code rc;
    if ((rc = load_wmat(dtype, nb_model_tok_embd(m), &e->embd, &e->weight_bytes, err)))
        return rc;
    if (c->tied_embeddings)
        e->lm_head = e->embd;
    else if ((rc = load_wmat(dtype, nb_model_lm_head(m), &e->lm_head, &e->weight_bytes, err)))
        return rc;
    if ((rc = load_vec(e, m, nb_model_out_norm(m), c->dim, &e->out_norm, err)))
        return rc;
    if (e->fault_final_norm)
        corrupt_norm(e, e->out_norm, c->dim);
    e->layers = calloc((size_t)c->n_layers, sizeof *e->layers);
    if (!e->layers)
        return nb_err_set(err, NB_ENOMEM, "out of memory for %d layers", c->n_layers);
    size_t kv_bytes = (size_t)e->opts.max_seq * e->kv_dim * e->esz;
    for (int l = 0; l < c->n_layers; l++) {
        const nb_layer_weights *w = nb_model_layer(m, l);
        layer *L = &e->layers[l];
        if ((rc = load_wmat(dtype, &w->wq, &L->wq, &e->weight_bytes, err)) ||
            (rc = load_wmat(dtype, &w->wk, &L->wk, &e->weight_bytes, err)) ||
            (rc = load_wmat(dtype, &w->wv, &L->wv, &e->weight_bytes, err)) ||
            (rc = load_wmat(dtype, &w->wo, &L->wo, &e->weight_bytes, err)) ||
            (rc = load_wmat(dtype, &w->w_gate, &L->wg, &e->weight_bytes, err)) ||
            (rc = load_wmat(dtype, &w->w_up, &L->wu, &e->weight_bytes, err)) ||
            (rc = load_wmat_x(dtype, &w->w_down, l == e->fault_mlp, &L->wd, &e->weight_bytes,
                              err)) ||
            (rc = load_vec(e, m, &w->attn_norm, c->dim, &L->attn_norm, err)) ||
            (rc = load_vec(e, m, &w->ffn_norm, c->dim, &L->ffn_norm, err)) ||
            (rc = alloc_buf(&L->kc, kv_bytes, err)) || (rc = alloc_buf(&L->vc, kv_bytes, err)))
            return rc;
        if (c->qk_norm && ((rc = load_vec(e, m, &w->q_norm, c->head_dim, &L->q_norm, err)) ||
                           (rc = load_vec(e, m, &w->k_norm, c->head_dim, &L->k_norm, err))))
            return rc;
        if (c->post_norms &&
            ((rc = load_vec(e, m, &w->post_attn_norm, c->dim, &L->post_attn_norm, err)) ||
             (rc = load_vec(e, m, &w->post_ffn_norm, c->dim, &L->post_ffn_norm, err))))
            return rc;
        L->window = nb_model_layer_is_swa(c, l) ? c->sliding_window : 0;
    }
    return NB_OK;
}

/* The activations of one prefill chunk, and the logits. */
static nb_code alloc_activations(nb_engine *e, nb_err *err)
{
    const nb_model_config *c = &e->cfg;
    size_t R = PREFILL_CHUNK;
    nb_code rc;
    if ((rc = alloc_buf(&e->x, R * c->dim * e->esz, err)) ||
        (rc = alloc_buf(&e->xb, R * c->dim * e->esz, err)) ||
        (rc = alloc_buf(&e->q, R * e->q_dim * e->esz, err)) ||
        (rc = alloc_buf(&e->k, R * e->kv_dim * e->esz, err)) ||
        (rc = alloc_buf(&e->v, R * e->kv_dim * e->esz, err)) ||
        (rc = alloc_buf(&e->att, R * e->q_dim * e->esz, err)) ||
        (rc = alloc_buf(&e->g, R * c->ffn_dim * e->esz, err)) ||
        (rc = alloc_buf(&e->u, R * c->ffn_dim * e->esz, err)) ||
        (rc = alloc_buf((void **)&e->hid, R * c->dim * sizeof(float), err)) ||
        (rc = alloc_buf(&e->hid_act, R * c->dim * e->esz, err)) ||
        (rc = alloc_buf((void **)&e->logits, (size_t)c->vocab * sizeof(float), err)) ||
        (rc = alloc_buf(&e->lbuf, (size_t)c->vocab * e->esz, err)))
        return rc;
    return NB_OK;
}

nb_code nb_engine_setup(const nb_model *m, const nb_engine_opts *o, nb_engine **out,
                        nb_err *err)
{
    *out = NULL;
    nb_engine *e = calloc(1, sizeof *e);
    if (!e)
        return nb_err_set(err, NB_ENOMEM, "out of memory for the engine");
    e->cfg = *nb_model_cfg(m);
    e->opts = *o;
    const nb_model_config *c = &e->cfg;
    if (e->opts.max_seq == 0)
        e->opts.max_seq = DEFAULT_MAX_SEQ < c->max_ctx ? DEFAULT_MAX_SEQ : c->max_ctx;
    e->f32 = o->dtype == NB_DTYPE_F32;
    e->esz = e->f32 ? sizeof(float) : sizeof(nb_bf16);
    e->kv_dim = c->n_kv_heads * c->head_dim;
    e->q_dim = c->n_heads * c->head_dim;
    /* HF: a float32 sqrt(dim) cast to the weights' dtype */
    if (c->embed_scaled) {
        float sc = (float)sqrt((double)c->dim);
        e->embed_scale = e->f32 ? sc : nb_round_bf16(sc);
    }
    e->fault_kv = nb_fault("kv_offset");
    e->fault_kv_short = nb_fault("kv_short");
    e->fault_rope_decode = nb_fault("rope_decode");
    e->fault_final_norm = nb_fault("final_norm");
    long fl = -1;
    int has_mlp = nb_fault_arg("mlp_layer", &fl);
    e->fault_mlp = has_mlp == 1 ? (int)fl : -1;
    nb_code rc;
    if (has_mlp < 0 || (has_mlp == 1 && fl >= c->n_layers))
        rc = nb_err_set(err, NB_EINVAL,
                        "NPUBENCH_FAULT mlp_layer: expected mlp_layer:N with N in 0..%d (the "
                        "model's layers)", c->n_layers - 1);
    else
        rc = NB_OK;
    if (rc || (rc = check_shapes(e, err)) || (rc = nb_kernels_init(o->threads, err)) ||
        (rc = load_weights(e, m, o->dtype, err)) || (rc = build_rope(e, err)) ||
        (rc = alloc_activations(e, err))) {
        nb_engine_free(e);
        return rc;
    }
    e->named = weights_dtype(e);
    *out = e;
    return NB_OK;
}

void nb_engine_free(nb_engine *e)
{
    if (!e)
        return;
    if (e->layers) {
        for (int l = 0; l < e->cfg.n_layers; l++) {
            layer *L = &e->layers[l];
            nb_wmat_free(L->wq);
            nb_wmat_free(L->wk);
            nb_wmat_free(L->wv);
            nb_wmat_free(L->wo);
            nb_wmat_free(L->wg);
            nb_wmat_free(L->wu);
            nb_wmat_free(L->wd);
            free(L->attn_norm);
            free(L->ffn_norm);
            free(L->q_norm);
            free(L->k_norm);
            free(L->post_attn_norm);
            free(L->post_ffn_norm);
            free(L->kc);
            free(L->vc);
        }
        free(e->layers);
    }
    if (e->lm_head != e->embd)
        nb_wmat_free(e->lm_head);
    nb_wmat_free(e->embd);
    free(e->out_norm);
    free(e->rope_cos);
    free(e->rope_sin);
    free(e->swa_cos);
    free(e->swa_sin);
    free(e->x);
    free(e->xb);
    free(e->q);
    free(e->k);
    free(e->v);
    free(e->att);
    free(e->g);
    free(e->u);
    free(e->hid);
    free(e->hid_act);
    free(e->logits);
    free(e->lbuf);
    free(e);
}

/* ---- forward ------------------------------------------------------------- */

#define AT(buf, i, width) ((void *)((char *)(buf) + (size_t)(i) * (size_t)(width) * e->esz))

static inline double prof_begin(const nb_engine *e)
{
    return e->prof_on ? nb_now_ms() : 0.0;
}

static inline void prof_end(nb_engine *e, nb_op op, double t0)
{
    if (e->prof_on) {
        e->prof[op].calls++;
        e->prof[op].total_ms += nb_now_ms() - t0;
    }
}

static void linear(nb_engine *e, const nb_wmat *w, const void *x, int n, void *y)
{
    if (e->f32)
        nb_linear_f32(w, (const float *)x, n, y);
    else
        nb_linear_bf16(w, (const nb_bf16 *)x, n, y);
}

/* y[k] = x . w[k]^T for linears of one input: one pool hand-off for all of them. */
static void linear_batch(nb_engine *e, const nb_wmat *const *w, void *const *y, int count,
                         const void *x, int n)
{
    if (e->f32)
        nb_linear_f32_batch(w, (float *const *)y, count, (const float *)x, n);
    else
        nb_linear_bf16_batch(w, (nb_bf16 *const *)y, count, (const nb_bf16 *)x, n);
}

/* n rows of dim. */
static void rmsnorm_rows(nb_engine *e, void *y, const void *x, const normw w, int n, int dim)
{
    if (e->f32)
        nb_rmsnorm_f32(y, x, w, n, dim, e->cfg.rms_eps);
    else if (e->cfg.norm_unit_offset)
        nb_rmsnorm_f32w_bf16(y, x, w, n, dim, e->cfg.rms_eps);
    else
        nb_rmsnorm_bf16(y, x, w, n, dim, e->cfg.rms_eps);
}

static void rmsnorm(nb_engine *e, void *y, const void *x, const normw w, int n)
{
    rmsnorm_rows(e, y, x, w, n, e->cfg.dim);
}

static void add(nb_engine *e, void *x, const void *d, size_t n)
{
    if (e->f32)
        nb_add_f32(x, d, n);
    else
        nb_add_bf16(x, d, n);
}

/* The rows as fp32 in e->hid (the hooks' view of the activations). */
static const float *rows_f32(nb_engine *e, int n, const void *rows)
{
    size_t cnt = (size_t)n * e->cfg.dim;
    if (e->f32)
        return rows;
    const nb_bf16 *b = rows;
    for (size_t i = 0; i < cnt; i++)
        e->hid[i] = nb_bf16_to_f32(b[i]);
    return e->hid;
}

static void call_stage(nb_engine *e, int l, nb_stage st, int pos0, int n, const void *rows)
{
    e->stage_hook(e->stage_user, l, st, pos0, n, e->cfg.dim, rows_f32(e, n, rows));
}

static void call_hook(nb_engine *e, int l, int pos0, int n, const void *rows)
{
    e->hook(e->hook_user, l, pos0, n, e->cfg.dim, rows_f32(e, n, rows));
}

static void embed(nb_engine *e, const int32_t *ids, int n)
{
    int dim = e->cfg.dim;
    double t = prof_begin(e);
    float *row = e->hid; /* scratch: one fp32 embedding row */
    for (int i = 0; i < n; i++) {
        nb_wmat_get_row_f32(e->embd, ids[i], row);
        if (e->embed_scale != 0.0f)
            for (int d = 0; d < dim; d++) /* exact in fp32 for bf16 operands; rounded below */
                row[d] *= e->embed_scale;
        if (e->f32) {
            memcpy(AT(e->x, i, dim), row, sizeof(float) * dim);
        } else {
            nb_bf16 *xr = (nb_bf16 *)AT(e->x, i, dim);
            for (int d = 0; d < dim; d++)
                xr[d] = nb_f32_to_bf16(row[d]);
        }
    }
    prof_end(e, NB_OP_EMBED, t);
}

/* Causal attention of n query rows at pos0.. over the cache; with a window, each query sees
 * only the last `window` positions (its own included), as HF's sliding mask. */
static void attend(nb_engine *e, const layer *L, int n, int pos0)
{
    const nb_model_config *c = &e->cfg;
    /* kv_short: the query at pos0 sees positions 0..pos0-1, its own key and value unread */
    if (e->decoding && e->fault_kv_short && n == 1 && pos0 > 0)
        pos0--;
    int hd = c->head_dim;
    if (!L->window || pos0 + n <= L->window) {
        if (e->f32)
            nb_attention_f32(e->att, e->q, L->kc, L->vc, n, pos0, c->n_heads, c->n_kv_heads, hd);
        else
            nb_attention_bf16(e->att, e->q, L->kc, L->vc, n, pos0, c->n_heads, c->n_kv_heads,
                              hd);
        return;
    }
    /* past the window: one query at a time over its own slice of the cache */
    for (int i = 0; i < n; i++) {
        int p = pos0 + i, start = p - L->window + 1 > 0 ? p - L->window + 1 : 0;
        void *o = AT(e->att, i, e->q_dim);
        const void *q = AT(e->q, i, e->q_dim);
        const void *kc = AT(L->kc, start, e->kv_dim), *vc = AT(L->vc, start, e->kv_dim);
        if (e->f32)
            nb_attention_f32(o, q, kc, vc, 1, p - start, c->n_heads, c->n_kv_heads, hd);
        else
            nb_attention_bf16(o, q, kc, vc, 1, p - start, c->n_heads, c->n_kv_heads, hd);
    }
}

/* y = norm(y) in place for a family with norms on the block outputs. */
static void post_norm(nb_engine *e, void *y, const normw w, int n)
{
    if (!w)
        return;
    double t = prof_begin(e);
    rmsnorm(e, e->hid_act, y, w, n);
    memcpy(y, e->hid_act, (size_t)n * e->cfg.dim * e->esz);
    prof_end(e, NB_OP_RMSNORM, t);
}

/* x += [post_norm](attention(norm(x))) for one layer; the new keys and values go to the cache
 * at pos0 + slot_shift. */
static void attention_block(nb_engine *e, layer *L, int n, int pos0, int slot_shift)
{
    const nb_model_config *c = &e->cfg;
    int hd = c->head_dim, half = hd / 2;
    double t = prof_begin(e);
    rmsnorm(e, e->xb, e->x, L->attn_norm, n);
    prof_end(e, NB_OP_RMSNORM, t);

    t = prof_begin(e);
    const nb_wmat *qkv[3] = {L->wq, L->wk, L->wv};
    void *qkv_out[3] = {e->q, e->k, e->v};
    linear_batch(e, qkv, qkv_out, 3, e->xb, n);
    prof_end(e, NB_OP_QKV_PROJ, t);

    if (L->q_norm) { /* per head, in place: rows of head_dim */
        t = prof_begin(e);
        rmsnorm_rows(e, e->q, e->q, L->q_norm, n * c->n_heads, hd);
        rmsnorm_rows(e, e->k, e->k, L->k_norm, n * c->n_kv_heads, hd);
        prof_end(e, NB_OP_RMSNORM, t);
    }

    t = prof_begin(e);
    const float *ctab = L->window && e->swa_cos ? e->swa_cos : e->rope_cos;
    const float *stab = L->window && e->swa_sin ? e->swa_sin : e->rope_sin;
    int late = e->decoding && e->fault_rope_decode && pos0 + n < e->opts.max_seq ? 1 : 0;
    for (int i = 0; i < n; i++) {
        const float *cs = ctab + (size_t)(pos0 + i + late) * half;
        const float *sn = stab + (size_t)(pos0 + i + late) * half;
        if (e->f32) {
            nb_rope_f32((float *)AT(e->q, i, e->q_dim), c->n_heads, hd, cs, sn);
            nb_rope_f32((float *)AT(e->k, i, e->kv_dim), c->n_kv_heads, hd, cs, sn);
        } else {
            nb_rope_bf16((nb_bf16 *)AT(e->q, i, e->q_dim), c->n_heads, hd, cs, sn);
            nb_rope_bf16((nb_bf16 *)AT(e->k, i, e->kv_dim), c->n_kv_heads, hd, cs, sn);
        }
    }
    prof_end(e, NB_OP_ROPE, t);

    t = prof_begin(e);
    memcpy(AT(L->kc, pos0 + slot_shift, e->kv_dim), e->k, (size_t)n * e->kv_dim * e->esz);
    memcpy(AT(L->vc, pos0 + slot_shift, e->kv_dim), e->v, (size_t)n * e->kv_dim * e->esz);
    prof_end(e, NB_OP_KV_WRITE, t);

    t = prof_begin(e);
    attend(e, L, n, pos0);
    prof_end(e, NB_OP_ATTENTION, t);

    t = prof_begin(e);
    linear(e, L->wo, e->att, n, e->xb);
    prof_end(e, NB_OP_O_PROJ, t);
    post_norm(e, e->xb, L->post_attn_norm, n);
    t = prof_begin(e);
    add(e, e->x, e->xb, (size_t)n * c->dim);
    prof_end(e, NB_OP_RESIDUAL, t);
}

/* x += [post_norm](down(act(gate(norm(x))) * up(norm(x)))) for one layer. */
static void ffn_block(nb_engine *e, layer *L, int n)
{
    const nb_model_config *c = &e->cfg;
    double t = prof_begin(e);
    rmsnorm(e, e->xb, e->x, L->ffn_norm, n);
    prof_end(e, NB_OP_RMSNORM, t);
    t = prof_begin(e);
    const nb_wmat *gu[2] = {L->wg, L->wu};
    void *gu_out[2] = {e->g, e->u};
    linear_batch(e, gu, gu_out, 2, e->xb, n);
    prof_end(e, NB_OP_GATE_UP_PROJ, t);
    t = prof_begin(e);
    size_t cnt = (size_t)n * c->ffn_dim;
    if (c->act == NB_ACT_GELU_TANH) {
        if (e->f32)
            nb_gelu_mul_f32(e->g, e->g, e->u, cnt);
        else
            nb_gelu_mul_bf16(e->g, e->g, e->u, cnt);
    } else if (e->f32) {
        nb_silu_mul_f32(e->g, e->g, e->u, cnt);
    } else {
        nb_silu_mul_bf16(e->g, e->g, e->u, cnt);
    }
    prof_end(e, NB_OP_SILU_MUL, t);
    t = prof_begin(e);
    linear(e, L->wd, e->g, n, e->xb);
    prof_end(e, NB_OP_DOWN_PROJ, t);
    post_norm(e, e->xb, L->post_ffn_norm, n);
    t = prof_begin(e);
    add(e, e->x, e->xb, (size_t)n * c->dim);
    prof_end(e, NB_OP_RESIDUAL, t);
}

/* Row i's logits from the final-normed rows in xb, into e->logits. */
static void row_logits(nb_engine *e, int i)
{
    double t = prof_begin(e);
    if (e->f32) {
        nb_linear_f32(e->lm_head, AT(e->xb, i, e->cfg.dim), 1, e->logits);
    } else {
        /* HF's bf16 lm_head returns bf16 logits: round them the same way so
         * ties appear where the reference sees them. */
        nb_linear_bf16(e->lm_head, AT(e->xb, i, e->cfg.dim), 1, e->lbuf);
        const nb_bf16 *lb = e->lbuf;
        for (int i = 0; i < e->cfg.vocab; i++)
            e->logits[i] = nb_bf16_to_f32(lb[i]);
    }
    float cap = e->cfg.final_softcap;
    if (cap > 0.0f) /* HF: three tensor ops, each rounded to the activation dtype */
        for (int i = 0; i < e->cfg.vocab; i++) {
            float v = e->logits[i];
            e->logits[i] = e->f32 ? tanhf(v / cap) * cap
                                  : nb_round_bf16(nb_round_bf16(tanhf(nb_round_bf16(v / cap))) *
                                                  cap);
        }
    prof_end(e, NB_OP_LM_HEAD, t);
}

/* Runs n tokens at positions pos0.. through every layer. decode selects the
 * fault switch's write slot; want_logits computes the last row's logits. */
static void forward(nb_engine *e, const int32_t *ids, int n, int pos0, int decode,
                    int want_logits)
{
    const nb_model_config *c = &e->cfg;
    int dim = c->dim;
    embed(e, ids, n);
    e->decoding = decode;
    /* Off by one slot during decode only: the gate must notice. */
    int slot_shift = decode && e->fault_kv && pos0 + 1 < e->opts.max_seq ? 1 : 0;
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &e->layers[l];
        attention_block(e, L, n, pos0, slot_shift);
        if (e->stage_hook)
            call_stage(e, l, NB_STAGE_ATTN, pos0, n, e->x);
        ffn_block(e, L, n);
        if (e->stage_hook)
            call_stage(e, l, NB_STAGE_MLP, pos0, n, e->x);
        if (e->hook && l < c->n_layers - 1)
            call_hook(e, l, pos0, n, e->x);
    }

    /* Only the rows someone reads go through the final norm. */
    int all = e->hook || e->stage_hook || e->all_logits;
    int first = all ? 0 : n - 1;
    if (!all && !want_logits)
        return;
    double t = prof_begin(e);
    rmsnorm(e, AT(e->xb, first, dim), AT(e->x, first, dim), e->out_norm, n - first);
    prof_end(e, NB_OP_FINAL_NORM, t);
    if (e->hook)
        call_hook(e, c->n_layers - 1, pos0, n, e->xb);
    if (e->stage_hook)
        call_stage(e, c->n_layers - 1, NB_STAGE_FINAL, pos0, n, e->xb);
    for (int i = 0; e->all_logits && i < n; i++)
        if (pos0 + i >= e->all_first) {
            row_logits(e, i);
            memcpy(e->all_logits + (size_t)(pos0 + i - e->all_first) * c->vocab, e->logits,
                   sizeof(float) * (size_t)c->vocab);
        }
    if (want_logits)
        row_logits(e, n - 1);
}

/* Under the kv_offset fault every cache row starts as NaN, as uninitialised
 * memory would in a real engine: the slot a late write skips is then read
 * as garbage, not as a harmless zero. Only the fault mode pays for this. */
static void poison_cache(nb_engine *e)
{
    size_t n = (size_t)e->opts.max_seq * e->kv_dim;
    for (int l = 0; l < e->cfg.n_layers; l++) {
        if (e->f32) {
            float *k = e->layers[l].kc, *v = e->layers[l].vc;
            for (size_t i = 0; i < n; i++)
                k[i] = v[i] = NAN;
        } else {
            nb_bf16 *k = e->layers[l].kc, *v = e->layers[l].vc;
            for (size_t i = 0; i < n; i++)
                k[i] = v[i] = 0x7fc0; /* bf16 quiet NaN */
        }
    }
}

void nb_engine_reset(nb_engine *e)
{
    if (e->fault_kv) {
        poison_cache(e);
    } else if (e->high_water > 0) {
        /* Clear what the last sequence wrote so runs stay reproducible
         * whatever ran before. */
        size_t bytes = (size_t)e->high_water * e->kv_dim * e->esz;
        for (int l = 0; l < e->cfg.n_layers; l++) {
            memset(e->layers[l].kc, 0, bytes);
            memset(e->layers[l].vc, 0, bytes);
        }
    }
    e->pos = 0;
    e->high_water = 0;
}

static nb_code check_ids(const nb_engine *e, const int32_t *ids, int n, nb_err *err)
{
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= e->cfg.vocab)
            return nb_err_set(err, NB_EINVAL, "token id %d at position %d: outside vocab 0..%d",
                              ids[i], i, e->cfg.vocab - 1);
    return NB_OK;
}

nb_code nb_engine_prefill(nb_engine *e, const int32_t *ids, int n, const float **logits,
                          nb_err *err)
{
    if (n < 1)
        return nb_err_set(err, NB_EINVAL, "prefill: empty prompt (0 tokens)");
    if (n > e->opts.max_seq)
        return nb_err_set(err, NB_EINVAL, "prefill: prompt of %d tokens exceeds max_seq %d", n,
                          e->opts.max_seq);
    nb_code rc = check_ids(e, ids, n, err);
    if (rc)
        return rc;
    nb_engine_reset(e);
    for (int p0 = 0; p0 < n; p0 += PREFILL_CHUNK) {
        int cnt = n - p0 < PREFILL_CHUNK ? n - p0 : PREFILL_CHUNK;
        forward(e, ids + p0, cnt, p0, 0, p0 + cnt == n);
    }
    e->pos = n;
    e->high_water = n;
    *logits = e->logits;
    return NB_OK;
}

nb_code nb_engine_decode_step(nb_engine *e, int32_t token, int pos, const float **logits,
                              nb_err *err)
{
    if (pos != e->pos)
        return nb_err_set(err, NB_EINVAL, "decode_step: pos %d but the cache holds %d tokens",
                          pos, e->pos);
    if (pos >= e->opts.max_seq)
        return nb_err_set(err, NB_EINVAL, "decode_step: pos %d reaches max_seq %d", pos,
                          e->opts.max_seq);
    nb_code rc = check_ids(e, &token, 1, err);
    if (rc)
        return rc;
    forward(e, &token, 1, pos, 1, 1);
    e->pos = pos + 1;
    int hw = e->pos + (e->fault_kv ? 1 : 0);
    if (hw > e->opts.max_seq)
        hw = e->opts.max_seq;
    if (hw > e->high_water)
        e->high_water = hw;
    *logits = e->logits;
    return NB_OK;
}

void nb_engine_set_layer_hook(nb_engine *e, nb_layer_hook hook, void *user)
{
    e->hook = hook;
    e->hook_user = user;
}

const char *nb_stage_name(nb_stage s)
{
    switch (s) {
    case NB_STAGE_ATTN: return "attention";
    case NB_STAGE_MLP: return "mlp";
    case NB_STAGE_FINAL: return "final_norm";
    }
    return "?";
}

void nb_engine_set_stage_hook(nb_engine *e, nb_stage_hook hook, void *user)
{
    e->stage_hook = hook;
    e->stage_user = user;
}

nb_code nb_engine_prefill_logits(nb_engine *e, const int32_t *ids, int n, int first, float *out,
                                 nb_err *err)
{
    if (first < 0 || first >= n)
        return nb_err_set(err, NB_EINVAL, "prefill_logits: first %d outside the %d positions",
                          first, n);
    e->all_logits = out;
    e->all_first = first;
    const float *last;
    /* the prompt exactly as a generation's prefill runs it: the cache its decode steps read */
    nb_code rc = nb_engine_prefill(e, ids, first + 1, &last, err);
    /* the rest as more prefill chunks, each linear per row on the decode step's kernel */
    if (!rc && n > first + 1 && (rc = check_ids(e, ids + first + 1, n - first - 1, err)) == NB_OK &&
        n > e->opts.max_seq)
        rc = nb_err_set(err, NB_EINVAL, "prefill_logits: %d positions exceed max_seq %d", n,
                        e->opts.max_seq);
    nb_kernels_row_exact(1);
    for (int p0 = first + 1; !rc && p0 < n; p0 += PREFILL_CHUNK) {
        int cnt = n - p0 < PREFILL_CHUNK ? n - p0 : PREFILL_CHUNK;
        forward(e, ids + p0, cnt, p0, 0, 0);
        e->pos = p0 + cnt;
        if (e->pos > e->high_water)
            e->high_water = e->pos;
    }
    nb_kernels_row_exact(0);
    e->all_logits = NULL;
    return rc;
}

void nb_engine_profile(nb_engine *e, int on)
{
    e->prof_on = on;
}

void nb_engine_profile_reset(nb_engine *e)
{
    memset(e->prof, 0, sizeof e->prof);
}

const nb_op_stats *nb_engine_profile_stats(const nb_engine *e)
{
    return e->prof;
}

int nb_engine_vocab(const nb_engine *e) { return e->cfg.vocab; }
int nb_engine_max_seq(const nb_engine *e) { return e->opts.max_seq; }
nb_dtype nb_engine_dtype(const nb_engine *e) { return e->opts.dtype; }
nb_dtype nb_engine_weights_dtype(const nb_engine *e) { return e->named; }
const nb_model_config *nb_engine_cfg(const nb_engine *e) { return &e->cfg; }
size_t nb_engine_weight_bytes(const nb_engine *e) { return e->weight_bytes; }
