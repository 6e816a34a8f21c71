/* test_loader: the tiny generated Llama loaded from GGUF in every type and
 * from safetensors (single, sharded); configs, shapes, values, q/k order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "testutil.h"

#include "nb_gguf.h"
#include "nb_model.h"
#include "nb_safetensors.h"
#include "tools/nb_tiny.h"

#define SEED 7

static char tmp[4096];

static const nb_ttype all_types[] = {NB_TT_F32, NB_TT_F16, NB_TT_BF16,
                                     NB_TT_Q8_0, NB_TT_Q4_0, NB_TT_Q4_1};

static nb_tiny_opts opts(nb_ttype t, int untied)
{
    nb_tiny_opts o = {.seed = SEED, .type = t, .untied = untied};
    return o;
}

static void path_of(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmp, name);
}

static int setup(void **state)
{
    (void)state;
    if (nb_tiny_mkdtemp(tmp, sizeof tmp, "test_loader"))
        return -1;
    char p[4200];
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
        nb_tiny_opts o = opts(all_types[i], 0);
        snprintf(p, sizeof p, "%s/tiny-%s.gguf", tmp, nb_ttype_name(all_types[i]));
        if (nb_tiny_write_gguf(&o, p))
            return -1;
    }
    nb_tiny_opts o = opts(NB_TT_F32, 1);
    path_of(p, sizeof p, "untied.gguf");
    if (nb_tiny_write_gguf(&o, p))
        return -1;
    path_of(p, sizeof p, "hf-untied");
    if (nb_tiny_write_hf(&o, p, 1))
        return -1;
    o = opts(NB_TT_F32, 0);
    o.no_permute = 1;
    path_of(p, sizeof p, "noperm.gguf");
    if (nb_tiny_write_gguf(&o, p))
        return -1;
    o = opts(NB_TT_Q4_1, 0);
    o.alignment = 64;
    path_of(p, sizeof p, "align64.gguf");
    if (nb_tiny_write_gguf(&o, p))
        return -1;
    const nb_ttype st_types[] = {NB_TT_F32, NB_TT_F16, NB_TT_BF16};
    for (int i = 0; i < 3; i++) {
        o = opts(st_types[i], 0);
        snprintf(p, sizeof p, "%s/hf-%s", tmp, nb_ttype_name(st_types[i]));
        if (nb_tiny_write_hf(&o, p, 1))
            return -1;
    }
    o = opts(NB_TT_BF16, 0);
    path_of(p, sizeof p, "hf-sharded");
    return nb_tiny_write_hf(&o, p, 2);
}

static int teardown(void **state)
{
    (void)state;
    nb_tiny_rmtree(tmp);
    return 0;
}

static nb_model *open_ok(const char *name)
{
    char p[4200];
    path_of(p, sizeof p, name);
    nb_model *m = NULL;
    nb_err err = {0};
    nb_code rc = nb_model_open(p, &m, &err);
    if (rc)
        fail_msg("%s: %s", p, err.msg);
    return m;
}

/* Model-side view of a generator tensor. */
static const nb_tensor *model_tensor(const nb_model *m, const nb_tiny_tensor *t)
{
    const nb_layer_weights *w = t->layer >= 0 ? nb_model_layer(m, t->layer) : NULL;
    switch (t->kind) {
    case NB_TINY_EMBD: return nb_model_tok_embd(m);
    case NB_TINY_ONORM: return nb_model_out_norm(m);
    case NB_TINY_HEAD: return nb_model_lm_head(m);
    case NB_TINY_ANORM: return &w->attn_norm;
    case NB_TINY_Q: return &w->wq;
    case NB_TINY_K: return &w->wk;
    case NB_TINY_V: return &w->wv;
    case NB_TINY_O: return &w->wo;
    case NB_TINY_FNORM: return &w->ffn_norm;
    case NB_TINY_GATE: return &w->w_gate;
    case NB_TINY_UP: return &w->w_up;
    default: return &w->w_down;
    }
}

static void check_config(const nb_model *m, int tied)
{
    const nb_model_config *c = nb_model_cfg(m);
    assert_string_equal(c->arch, "llama");
    assert_int_equal(c->n_layers, NB_TINY_LAYERS);
    assert_int_equal(c->dim, NB_TINY_DIM);
    assert_int_equal(c->ffn_dim, NB_TINY_FFN);
    assert_int_equal(c->n_heads, NB_TINY_HEADS);
    assert_int_equal(c->n_kv_heads, NB_TINY_KV_HEADS);
    assert_int_equal(c->head_dim, NB_TINY_HEAD_DIM);
    assert_int_equal(c->vocab, NB_TINY_VOCAB);
    assert_int_equal(c->max_ctx, NB_TINY_CTX);
    assert_true(c->rms_eps == NB_TINY_RMS_EPS);
    assert_true(c->rope_theta == NB_TINY_ROPE_THETA);
    assert_int_equal(c->rope_scaling, NB_ROPE_NONE);
    assert_int_equal(c->tied_embeddings, tied);
    if (tied)
        assert_ptr_equal(nb_model_lm_head(m)->data, nb_model_tok_embd(m)->data);
    else
        assert_ptr_not_equal(nb_model_lm_head(m)->data, nb_model_tok_embd(m)->data);
    assert_null(nb_model_layer(m, NB_TINY_LAYERS));
    assert_null(nb_model_layer(m, -1));
}

static void check_shapes(const nb_model *m, const nb_tiny_opts *o)
{
    nb_tiny_tensor ts[NB_TINY_MAX_TENSORS];
    int nt = nb_tiny_tensors(o, ts);
    for (int i = 0; i < nt; i++) {
        const nb_tensor *t = model_tensor(m, &ts[i]);
        assert_int_equal(t->rows, ts[i].rows);
        assert_int_equal(t->cols, ts[i].cols);
        assert_int_equal(t->n_dims, ts[i].vec ? 1 : 2);
    }
}

static int64_t stored_row_of(const nb_tiny_opts *o, const nb_tiny_tensor *t, int64_t r)
{
    for (int64_t s = 0; s < t->rows; s++)
        if (nb_tiny_hf_row_of_stored(o, t, s) == r)
            return s;
    fail_msg("no stored row for %lld", (long long)r);
    return -1;
}

/* Element-at-a-time dequantization, written from the block layouts alone. */
static float hand_dequant(nb_ttype ty, const uint8_t *row, int64_t e)
{
    int64_t b = e / 32;
    int k = (int)(e % 32);
    uint16_t d16, m16;
    switch (ty) {
    case NB_TT_Q8_0: {
        const uint8_t *blk = row + 34 * b;
        memcpy(&d16, blk, 2);
        return (float)(int8_t)blk[2 + k] * nb_f16_to_f32(d16);
    }
    case NB_TT_Q4_0: {
        const uint8_t *blk = row + 18 * b;
        memcpy(&d16, blk, 2);
        int q = k < 16 ? blk[2 + k] & 15 : blk[2 + k - 16] >> 4;
        return nb_f16_to_f32(d16) * (float)(q - 8);
    }
    case NB_TT_Q4_1: {
        const uint8_t *blk = row + 20 * b;
        memcpy(&d16, blk, 2);
        memcpy(&m16, blk + 2, 2);
        int q = k < 16 ? blk[4 + k] & 15 : blk[4 + k - 16] >> 4;
        float dq = nb_f16_to_f32(d16) * (float)q;
        return dq + nb_f16_to_f32(m16);
    }
    default:
        fail_msg("not a quantized type");
        return 0;
    }
}

static void check_values(const nb_model *m, const nb_tiny_opts *o)
{
    nb_tiny_tensor ts[NB_TINY_MAX_TENSORS];
    int nt = nb_tiny_tensors(o, ts);
    float got[256], want[256];
    nb_bf16 gb[256];
    for (int i = 0; i < nt; i++) {
        const nb_tiny_tensor *tt = &ts[i];
        const nb_tensor *t = model_tensor(m, tt);
        nb_ttype ty = nb_model_format_of(m) == NB_FMT_GGUF ? nb_tiny_gguf_type(o, tt) : o->type;
        assert_int_equal(t->type, ty);
        int quant = ty == NB_TT_Q8_0 || ty == NB_TT_Q4_0 || ty == NB_TT_Q4_1;
        size_t len = 0;
        uint8_t *bytes = quant ? nb_tiny_gguf_bytes(o, tt, &len) : NULL;
        size_t rb = nb_tiny_row_bytes(ty, tt->cols);
        double max_err = 0;
        for (int64_t r = 0; r < tt->rows; r++) {
            nb_tensor_row_f32(t, r, got);
            nb_tensor_row_bf16(t, r, gb);
            nb_tiny_hf_row_values(o, tt, r, want);
            for (int64_t c = 0; c < tt->cols; c++) {
                float w = want[c];
                if (quant) {
                    max_err = fmax(max_err, fabs((double)got[c] - w));
                    w = hand_dequant(ty, bytes + rb * (size_t)stored_row_of(o, tt, r), c);
                }
                if (memcmp(&got[c], &w, 4))
                    fail_msg("%s [%lld,%lld]: got %a want %a", t->name, (long long)r,
                             (long long)c, (double)got[c], (double)w);
                assert_int_equal(gb[c], nb_f32_to_bf16(w));
            }
        }
        /* the stored rows really are this tensor's rows, in the right order */
        if (quant)
            assert_true(max_err < (ty == NB_TT_Q8_0 ? 0.004 : 0.07));
        free(bytes);
    }
}

static void test_gguf_every_type(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
        nb_ttype ty = all_types[i];
        char name[64];
        snprintf(name, sizeof name, "tiny-%s.gguf", nb_ttype_name(ty));
        nb_model *m = open_ok(name);
        nb_tiny_opts o = opts(ty, 0);
        assert_int_equal(nb_model_format_of(m), NB_FMT_GGUF);
        assert_non_null(nb_model_gguf(m));
        assert_null(nb_model_dir(m));
        assert_string_equal(nb_model_cfg(m)->name, "tiny-llama");
        assert_string_equal(nb_model_weight_type(m), nb_ttype_name(ty));
        check_config(m, 1);
        check_shapes(m, &o);
        check_values(m, &o);
        assert_int_equal(nb_model_layer(m, 1)->wq.qk_perm_heads, NB_TINY_HEADS);
        assert_int_equal(nb_model_layer(m, 1)->wk.qk_perm_heads, NB_TINY_KV_HEADS);
        assert_int_equal(nb_model_layer(m, 1)->wv.qk_perm_heads, 0);
        nb_model_close(m);
    }
}

static void test_safetensors_single_and_sharded(void **state)
{
    (void)state;
    const nb_ttype st_types[] = {NB_TT_F32, NB_TT_F16, NB_TT_BF16};
    for (int i = 0; i < 4; i++) {
        nb_ttype ty = i < 3 ? st_types[i] : NB_TT_BF16;
        char name[64];
        if (i < 3)
            snprintf(name, sizeof name, "hf-%s", nb_ttype_name(ty));
        else
            snprintf(name, sizeof name, "hf-sharded");
        nb_model *m = open_ok(name);
        nb_tiny_opts o = opts(ty, 0);
        assert_int_equal(nb_model_format_of(m), NB_FMT_SAFETENSORS);
        assert_null(nb_model_gguf(m));
        assert_non_null(strstr(nb_model_dir(m), name));
        assert_string_equal(nb_model_cfg(m)->name, name);
        assert_string_equal(nb_model_weight_type(m), nb_ttype_name(ty));
        check_config(m, 1);
        check_shapes(m, &o);
        check_values(m, &o);
        assert_int_equal(nb_model_layer(m, 0)->wq.qk_perm_heads, 0);
        nb_model_close(m);
    }
}

static void test_safetensors_api(void **state)
{
    (void)state;
    char p[4200];
    nb_err err;
    nb_safetensors *st;
    path_of(p, sizeof p, "hf-sharded");
    assert_int_equal(nb_safetensors_open_dir(p, &st, &err), NB_OK);
    assert_int_equal(nb_safetensors_n_files(st), 2);
    assert_int_equal(nb_safetensors_n_tensors(st), 2 + 9 * NB_TINY_LAYERS);
    assert_non_null(strstr(nb_safetensors_path(st), "model.safetensors.index.json"));
    nb_tensor a, b;
    for (size_t i = 1; i < nb_safetensors_n_tensors(st); i++) {
        assert_int_equal(nb_safetensors_tensor_at(st, i - 1, &a, &err), NB_OK);
        assert_int_equal(nb_safetensors_tensor_at(st, i, &b, &err), NB_OK);
        assert_true(strcmp(a.name, b.name) < 0);
    }
    assert_int_equal(nb_safetensors_tensor_at(st, 999, &a, &err), NB_EINVAL);
    assert_non_null(strstr(nb_safetensors_file_of(st, "model.embed_tokens.weight"),
                           "model-00001-of-00002.safetensors"));
    assert_non_null(strstr(nb_safetensors_file_of(st, "model.norm.weight"),
                           "model-00002-of-00002.safetensors"));
    assert_null(nb_safetensors_file_of(st, "nope"));
    assert_int_equal(nb_safetensors_find(st, "nope.weight", &a, &err), NB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "nope.weight"));
    assert_int_equal(nb_safetensors_find(st, "model.norm.weight", &a, &err), NB_OK);
    assert_int_equal(a.rows, 1);
    assert_int_equal(a.cols, NB_TINY_DIM);
    assert_int_equal(a.n_dims, 1);
    assert_int_equal(a.type, NB_TT_BF16);
    assert_int_equal(a.row_bytes, 2 * NB_TINY_DIM);
    nb_safetensors_close(st);
    /* a shard opened directly is a checkpoint of its own tensors */
    path_of(p, sizeof p, "hf-sharded/model-00002-of-00002.safetensors");
    assert_int_equal(nb_safetensors_open(p, &st, &err), NB_OK);
    assert_int_equal(nb_safetensors_n_files(st), 1);
    assert_int_equal(nb_safetensors_find(st, "model.embed_tokens.weight", &a, &err),
                     NB_ENOTFOUND);
    nb_safetensors_close(st);
}

/* Same seed: GGUF (lossless types) and safetensors hold bit-identical bf16. */
static void test_gguf_matches_safetensors(void **state)
{
    (void)state;
    const char *ggufs[] = {"tiny-F32.gguf", "tiny-F16.gguf", "tiny-BF16.gguf"};
    const char *dirs[] = {"hf-BF16", "hf-F32", "hf-sharded"};
    nb_tiny_opts o = opts(NB_TT_F32, 0);
    nb_tiny_tensor ts[NB_TINY_MAX_TENSORS];
    int nt = nb_tiny_tensors(&o, ts);
    nb_bf16 x[256], y[256];
    for (int g = 0; g < 3; g++) {
        nb_model *a = open_ok(ggufs[g]), *b = open_ok(dirs[g]);
        for (int i = 0; i < nt; i++) {
            const nb_tensor *ta = model_tensor(a, &ts[i]), *tb = model_tensor(b, &ts[i]);
            for (int64_t r = 0; r < ta->rows; r++) {
                nb_tensor_row_bf16(ta, r, x);
                nb_tensor_row_bf16(tb, r, y);
                if (memcmp(x, y, sizeof(nb_bf16) * (size_t)ta->cols))
                    fail_msg("%s vs %s: %s row %lld differs", ggufs[g], dirs[g], ta->name,
                             (long long)r);
            }
        }
        nb_model_close(a);
        nb_model_close(b);
    }
}

/* GGUF stores q/k permuted; logical rows must equal the HF rows byte for
 * byte, and a file written without the permutation must not. */
static void test_qk_unpermutation(void **state)
{
    (void)state;
    nb_model *g = open_ok("tiny-F32.gguf"), *h = open_ok("hf-F32"), *np = open_ok("noperm.gguf");
    int differs = 0;
    for (int l = 0; l < NB_TINY_LAYERS; l++) {
        const nb_layer_weights *wg = nb_model_layer(g, l), *wh = nb_model_layer(h, l),
                               *wn = nb_model_layer(np, l);
        const nb_tensor *pairs[2][3] = {{&wg->wq, &wh->wq, &wn->wq}, {&wg->wk, &wh->wk, &wn->wk}};
        for (int k = 0; k < 2; k++) {
            const nb_tensor *tg = pairs[k][0], *th = pairs[k][1], *tn = pairs[k][2];
            assert_int_equal(tg->rows, th->rows);
            int64_t hd = NB_TINY_HEAD_DIM;
            for (int64_t r = 0; r < tg->rows; r++) {
                assert_memory_equal(nb_tensor_row(tg, r), nb_tensor_row(th, r), th->row_bytes);
                /* stored row h*hd + 2i + j holds HF row h*hd + j*hd/2 + i */
                int64_t hh = r / hd, j = (r % hd) / (hd / 2), i = (r % hd) % (hd / 2);
                assert_memory_equal(tg->data + (size_t)(hh * hd + 2 * i + j) * tg->row_bytes,
                                    nb_tensor_row(th, r), th->row_bytes);
                differs |= memcmp(nb_tensor_row(tn, r), nb_tensor_row(th, r), th->row_bytes);
            }
        }
        /* v is never permuted */
        for (int64_t r = 0; r < wg->wv.rows; r++)
            assert_memory_equal(nb_tensor_row(&wg->wv, r), nb_tensor_row(&wh->wv, r),
                                wh->wv.row_bytes);
    }
    assert_true(differs);
    nb_model_close(g);
    nb_model_close(h);
    nb_model_close(np);
}

static void test_untied(void **state)
{
    (void)state;
    const char *names[] = {"untied.gguf", "hf-untied"};
    nb_tiny_opts o = opts(NB_TT_F32, 1);
    for (int i = 0; i < 2; i++) {
        nb_model *m = open_ok(names[i]);
        check_config(m, 0);
        check_shapes(m, &o);
        check_values(m, &o);
        nb_model_close(m);
    }
}

static void test_gguf_metadata(void **state)
{
    (void)state;
    char p[4200];
    nb_err err;
    nb_gguf *g;
    path_of(p, sizeof p, "tiny-Q4_1.gguf");
    assert_int_equal(nb_gguf_open(p, &g, &err), NB_OK);
    assert_int_equal(nb_gguf_version(g), 3);
    assert_string_equal(nb_gguf_path(g), p);
    nb_tiny_vocab *v = malloc(sizeof *v);
    assert_non_null(v);
    nb_tiny_build_vocab(v);
    const nb_gguf_str *toks;
    uint64_t n;
    assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", &toks, &n, &err), NB_OK);
    assert_int_equal(n, NB_TINY_VOCAB);
    for (int i = 0; i < v->n; i++) {
        assert_int_equal(toks[i].len, strlen(v->tok[i]));
        assert_memory_equal(toks[i].ptr, v->tok[i], toks[i].len);
    }
    free(v);
    nb_gguf_vtype et;
    assert_int_equal(nb_gguf_get_arr_info(g, "tokenizer.ggml.token_type", &et, &n, &err), NB_OK);
    assert_int_equal(et, NB_GGUF_INT32);
    int32_t tt[NB_TINY_VOCAB];
    assert_int_equal(nb_gguf_get_arr_i32(g, "tokenizer.ggml.token_type", tt, n, &err), NB_OK);
    assert_int_equal(tt[0], 3);
    assert_int_equal(tt[NB_TINY_VOCAB - 1], 1);
    assert_int_equal(nb_gguf_get_arr_i32(g, "tokenizer.ggml.token_type", tt, 5, &err), NB_EINVAL);
    float ft[NB_TINY_VOCAB];
    assert_int_equal(nb_gguf_get_arr_f32(g, "tokenizer.ggml.token_type", ft, n, &err), NB_OK);
    assert_true(ft[0] == 3.0f);
    assert_int_equal(nb_gguf_get_arr_i32(g, "tokenizer.ggml.tokens", tt, n, &err), NB_EFORMAT);
    assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.merges", &toks, &n, &err), NB_OK);
    assert_int_equal(n, NB_TINY_N_MERGES);
    assert_memory_equal(toks[8].ptr, "Ġt he", toks[8].len);
    uint64_t u;
    int64_t s;
    double d;
    int bv;
    nb_gguf_str str;
    assert_int_equal(nb_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &u, &err), NB_OK);
    assert_int_equal(u, NB_TINY_BOS);
    assert_int_equal(nb_gguf_get_i64(g, "llama.block_count", &s, &err), NB_OK);
    assert_int_equal(s, NB_TINY_LAYERS);
    assert_int_equal(nb_gguf_get_f64(g, "llama.rope.freq_base", &d, &err), NB_OK);
    assert_true(d == 100000.0);
    assert_int_equal(nb_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &bv, &err), NB_OK);
    assert_int_equal(bv, 0);
    assert_int_equal(nb_gguf_get_str(g, "tokenizer.chat_template", &str, &err), NB_OK);
    assert_int_equal(str.len, strlen(nb_tiny_chat_template));
    assert_memory_equal(str.ptr, nb_tiny_chat_template, str.len);
    assert_int_equal(nb_gguf_get_str(g, "tokenizer.ggml.pre", &str, &err), NB_OK);
    assert_int_equal(str.len, 6);
    assert_memory_equal(str.ptr, "smollm", 6);
    /* wrong type and absent keys name the key */
    assert_int_equal(nb_gguf_get_u64(g, "general.name", &u, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "general.name"));
    assert_non_null(strstr(err.msg, "string"));
    assert_int_equal(nb_gguf_get_f64(g, "llama.block_count", &d, &err), NB_EFORMAT);
    assert_int_equal(nb_gguf_get_str(g, "tokenizer.ggml.tokens", &str, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "array of string"));
    assert_int_equal(nb_gguf_get_bool(g, "llama.block_count", &bv, &err), NB_EFORMAT);
    assert_int_equal(nb_gguf_get_u64(g, "no.such.key", &u, &err), NB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "no.such.key"));
    assert_false(nb_gguf_has(g, "no.such.key"));
    assert_true(nb_gguf_has(g, "general.architecture"));
    /* enumeration in file order */
    nb_gguf_vtype vt;
    assert_true(nb_gguf_n_kv(g) > 20);
    assert_int_equal(nb_gguf_kv_at(g, 0, &str, &vt, &err), NB_OK);
    assert_int_equal(str.len, strlen("general.architecture"));
    assert_memory_equal(str.ptr, "general.architecture", str.len);
    assert_int_equal(vt, NB_GGUF_STRING);
    assert_string_equal(nb_gguf_vtype_name(vt), "string");
    assert_int_equal(nb_gguf_kv_at(g, nb_gguf_n_kv(g), &str, &vt, &err), NB_EINVAL);
    /* tensors */
    assert_int_equal(nb_gguf_n_tensors(g), 2 + 9 * NB_TINY_LAYERS);
    nb_tensor t;
    assert_int_equal(nb_gguf_tensor_at(g, 0, &t, &err), NB_OK);
    assert_string_equal(t.name, "token_embd.weight");
    assert_int_equal(t.type, NB_TT_Q8_0);
    assert_int_equal(nb_gguf_tensor_at(g, 999, &t, &err), NB_EINVAL);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.1.ffn_down.weight", &t, &err), NB_OK);
    assert_int_equal(t.rows, NB_TINY_DIM);
    assert_int_equal(t.cols, NB_TINY_FFN);
    assert_int_equal(t.row_bytes, NB_TINY_FFN / 32 * 20);
    assert_int_equal(t.qk_perm_heads, 0);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.9.ffn_down.weight", &t, &err), NB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "blk.9.ffn_down.weight"));
    nb_gguf_close(g);
}

static void test_alignment_64(void **state)
{
    (void)state;
    char p[4200];
    nb_err err;
    nb_gguf *g;
    path_of(p, sizeof p, "align64.gguf");
    assert_int_equal(nb_gguf_open(p, &g, &err), NB_OK);
    nb_tensor first, t;
    assert_int_equal(nb_gguf_tensor_at(g, 0, &first, &err), NB_OK);
    for (uint64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
        assert_int_equal(nb_gguf_tensor_at(g, i, &t, &err), NB_OK);
        assert_int_equal((t.data - first.data) % 64, 0);
    }
    nb_gguf_close(g);
    nb_model *m = open_ok("align64.gguf");
    nb_tiny_opts o = opts(NB_TT_Q4_1, 0);
    o.alignment = 64;
    check_values(m, &o);
    nb_model_close(m);
}

/* The tool writes exactly what the library writes in-process. */
static void test_generator_tool(void **state)
{
    (void)state;
    const char *tools = getenv("NB_TOOLS");
    tu_require(tools && *tools, "NB_TOOLS (the built tools/ folder) is not set");
    char out[4200], dir[4200], cmd[9000];
    path_of(out, sizeof out, "tool.gguf");
    path_of(dir, sizeof dir, "tool-hf");
    snprintf(cmd, sizeof cmd,
             "'%s/nb_gen_tiny' --type q4_1 --seed 7 --out '%s' && "
             "'%s/nb_gen_tiny' --type bf16 --seed 7 --safetensors '%s' --shards 2",
             tools, out, tools, dir);
    assert_int_equal(system(cmd), 0);
    uint8_t *a = NULL;
    size_t na = 0;
    assert_int_equal(nb_tiny_read_file(out, &a, &na), 0);
    nb_tiny_opts o = opts(NB_TT_Q4_1, 0);
    nb_tiny_buf img;
    assert_int_equal(nb_tiny_gguf_image(&o, &img), 0);
    assert_int_equal(na, img.n);
    assert_memory_equal(a, img.p, na);
    free(a);
    free(img.p);
    char p1[4300], p2[4300];
    snprintf(p1, sizeof p1, "%s/model-00002-of-00002.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/hf-sharded/model-00002-of-00002.safetensors", tmp);
    uint8_t *b = NULL;
    size_t nb = 0;
    assert_int_equal(nb_tiny_read_file(p1, &a, &na), 0);
    assert_int_equal(nb_tiny_read_file(p2, &b, &nb), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    /* a different seed gives different weights */
    snprintf(cmd, sizeof cmd, "'%s/nb_gen_tiny' --type q4_1 --seed 8 --out '%s'", tools, out);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(nb_tiny_read_file(out, &a, &na), 0);
    assert_int_equal(nb_tiny_gguf_image(&o, &img), 0);
    assert_int_equal(na, img.n);
    assert_true(memcmp(a, img.p, na) != 0);
    free(a);
    free(img.p);
    /* bad arguments are refused */
    snprintf(cmd, sizeof cmd, "'%s/nb_gen_tiny' --type q4_1 --safetensors '%s/x' 2>/dev/null",
             tools, tmp);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

/* SmolLM2-135M-Instruct, when the checkout has it (models/ is not in git). */
static void test_real_model(void **state)
{
    (void)state;
    const char *src = getenv("NB_SRC");
    char p[4200];
    snprintf(p, sizeof p, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", src ? src : NB_SOURCE_DIR);
    tu_require(nb_tiny_file_exists(p), "%s is not fetched (scripts/fetch_model.sh)", p);
    nb_model *m;
    nb_err err;
    assert_int_equal(nb_model_open(p, &m, &err), NB_OK);
    const nb_model_config *c = nb_model_cfg(m);
    assert_int_equal(c->n_layers, 30);
    assert_int_equal(c->dim, 576);
    assert_int_equal(c->n_heads, 9);
    assert_int_equal(c->n_kv_heads, 3);
    assert_int_equal(c->head_dim, 64);
    assert_int_equal(c->ffn_dim, 1536);
    assert_int_equal(c->vocab, 49152);
    assert_int_equal(c->max_ctx, 8192);
    assert_int_equal(c->tied_embeddings, 1);
    assert_true(c->rope_theta == 100000.0f);
    assert_true(c->rms_eps == 1e-5f);
    assert_string_equal(nb_model_weight_type(m), "Q4_1");
    assert_int_equal(nb_model_tok_embd(m)->type, NB_TT_Q8_0);
    assert_int_equal(nb_model_layer(m, 29)->wq.type, NB_TT_Q4_1);
    assert_int_equal(nb_model_layer(m, 29)->attn_norm.type, NB_TT_F32);
    const nb_gguf_str *toks;
    uint64_t n;
    assert_int_equal(nb_gguf_get_arr_str(nb_model_gguf(m), "tokenizer.ggml.tokens", &toks, &n,
                                         &err), NB_OK);
    assert_int_equal(n, 49152);
    assert_memory_equal(toks[1].ptr, "<|im_start|>", toks[1].len);
    nb_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_every_type),
        cmocka_unit_test(test_safetensors_single_and_sharded),
        cmocka_unit_test(test_safetensors_api),
        cmocka_unit_test(test_gguf_matches_safetensors),
        cmocka_unit_test(test_qk_unpermutation),
        cmocka_unit_test(test_untied),
        cmocka_unit_test(test_gguf_metadata),
        cmocka_unit_test(test_alignment_64),
        cmocka_unit_test(test_generator_tool),
        cmocka_unit_test(test_real_model),
    };
    return tu_run_group(tests, setup, teardown);
}
