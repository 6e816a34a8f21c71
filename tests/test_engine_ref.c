/* test_engine_ref: the engine's f32 path on the tiny Llama (GGUF and HF safetensors, plain and
 * llama3-scaled RoPE) against an independent fp64 forward pass written here from HF's formulas:
 * every layer's hidden state in prefill and the logits of prefill and each decode step. */
#include <math.h>

#include "ref64.h"
#include "testutil.h"

#include "nb_engine.h"
#include "nb_kernels.h"
#include "nb_model.h"
#include "tools/nb_tiny.h"

enum { D = NB_TINY_DIM, H = NB_TINY_HEADS, KV = NB_TINY_KV_HEADS, HD = NB_TINY_HEAD_DIM,
       F = NB_TINY_FFN, V = NB_TINY_VOCAB, L = NB_TINY_LAYERS, MAXP = 16 };

/* llama3 scaling for the scaled variant: with theta 1e5 and hd 16 the wavelengths run from 6
 * to ~1.5e5, so old/high = 16 and old/low = 64 put frequencies in all three of its bands. */
#define R_FACTOR 8.0
#define R_LOW 1.0
#define R_HIGH 4.0
#define R_OLD 64

/* f32 against fp64: each output is a sum of at most F = 128 products, rounded a few times
 * per layer; 2e-5 of the largest magnitude is ~20x what the f32 path shows and ~400x
 * smaller than the smallest mutation this test exists for (RMSNorm over dim-1: 0.8%). */
#define TOL 2e-5

typedef struct ref_model {
    nb_tiny_opts o;
    nb_tiny_tensor t[NB_TINY_MAX_TENSORS];
    int nt;
    int llama3;
    double kc[L][MAXP][KV * HD], vc[L][MAXP][KV * HD];
    double hidden[L][MAXP][D]; /* what the engine's layer hook reports, per position */
} ref_model;

static const nb_tiny_tensor *tensor(const ref_model *m, int kind, int layer)
{
    for (int i = 0; i < m->nt; i++)
        if (m->t[i].kind == kind && m->t[i].layer == layer)
            return &m->t[i];
    fail_msg("tiny tensor kind %d layer %d missing", kind, layer);
    return NULL;
}

/* y[r] = sum_c W[r][c] x[c] (nn.Linear, HF row order). */
static void linear(const ref_model *m, int kind, int layer, const double *x, double *y)
{
    const nb_tiny_tensor *t = tensor(m, kind, layer);
    for (int64_t r = 0; r < t->rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < t->cols; c++)
            s += (double)nb_tiny_value(&m->o, t, r, c) * x[c];
        y[r] = s;
    }
}

/* LlamaRMSNorm: w * x / sqrt(mean(x^2) + eps), the mean over all D elements. */
static void rmsnorm(const ref_model *m, int kind, int layer, const double *x, double *y)
{
    const nb_tiny_tensor *t = tensor(m, kind, layer);
    double inv = ref64_rms_inv(x, D, NB_TINY_RMS_EPS);
    for (int i = 0; i < D; i++)
        y[i] = (double)nb_tiny_value(&m->o, t, 0, i) * x[i] * inv;
}

/* HF's inv_freq: theta^(-2i/hd), then _compute_llama3_parameters when scaled. */
static double inv_freq(const ref_model *m, int i)
{
    double f = pow((double)NB_TINY_ROPE_THETA, -2.0 * i / HD);
    if (!m->llama3)
        return f;
    double wl = 2 * M_PI / f, low_wl = R_OLD / R_LOW, high_wl = R_OLD / R_HIGH;
    if (wl < high_wl)
        return f;
    if (wl > low_wl)
        return f / R_FACTOR;
    double s = (R_OLD / wl - R_LOW) / (R_HIGH - R_LOW);
    return (1 - s) * f / R_FACTOR + s * f;
}

/* rotate_half on each head: (a, b) = (x[i], x[i + hd/2]) -> (a cos - b sin, b cos + a sin). */
static void rope(const ref_model *m, double *x, int heads, int pos)
{
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < HD / 2; i++) {
            double ang = pos * inv_freq(m, i), c = cos(ang), s = sin(ang);
            double *a = &x[h * HD + i], *b = &x[h * HD + i + HD / 2];
            double a0 = *a, b0 = *b;
            *a = a0 * c - b0 * s;
            *b = b0 * c + a0 * s;
        }
}

/* One token at pos through every layer; logits[V] of it. */
static void forward(ref_model *m, int32_t tok, int pos, double *logits)
{
    const nb_tiny_tensor *embd = tensor(m, NB_TINY_EMBD, -1);
    double x[D], h[D], q[H * HD], att[H * HD], o[D], g[F], u[F];
    for (int i = 0; i < D; i++)
        x[i] = nb_tiny_value(&m->o, embd, tok, i);
    for (int l = 0; l < L; l++) {
        rmsnorm(m, NB_TINY_ANORM, l, x, h);
        linear(m, NB_TINY_Q, l, h, q);
        linear(m, NB_TINY_K, l, h, m->kc[l][pos]);
        linear(m, NB_TINY_V, l, h, m->vc[l][pos]);
        rope(m, q, H, pos);
        rope(m, m->kc[l][pos], KV, pos);
        for (int hh = 0; hh < H; hh++) {
            int kvh = hh / (H / KV);
            ref64_attend(&q[hh * HD], &m->kc[l][0][kvh * HD], &m->vc[l][0][kvh * HD], pos + 1,
                         KV * HD, HD, &att[hh * HD]);
        }
        linear(m, NB_TINY_O, l, att, o);
        for (int i = 0; i < D; i++)
            x[i] += o[i];
        rmsnorm(m, NB_TINY_FNORM, l, x, h);
        linear(m, NB_TINY_GATE, l, h, g);
        linear(m, NB_TINY_UP, l, h, u);
        for (int i = 0; i < F; i++)
            g[i] = ref64_silu(g[i]) * u[i];
        linear(m, NB_TINY_DOWN, l, g, o);
        for (int i = 0; i < D; i++)
            x[i] += o[i];
        memcpy(m->hidden[l][pos], x, sizeof x);
    }
    rmsnorm(m, NB_TINY_ONORM, -1, x, h);
    memcpy(m->hidden[L - 1][pos], h, sizeof h); /* HF's hidden_states[-1]: after the norm */
    linear(m, NB_TINY_EMBD, -1, h, logits); /* tied head */
}

/* Worst |got - want| over n, relative to max |want|. */
static double rel_err(const float *got, const double *want, int n)
{
    double worst = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]));
        mag = fmax(mag, fabs(want[i]));
    }
    assert_true(mag > 0.1); /* a meaningful scale, not a model of zeros */
    return worst / mag;
}

typedef struct hook_state {
    const ref_model *m;
    double worst;
    int calls;
} hook_state;

static void on_layer(void *user, int layer, int pos0, int n, int dim, const float *hidden)
{
    hook_state *hs = user;
    assert_int_equal(dim, D);
    for (int r = 0; r < n; r++)
        hs->worst = fmax(hs->worst, rel_err(hidden + (size_t)r * D, hs->m->hidden[layer][pos0 + r], D));
    hs->calls++;
}

/* Opens path with the engine in f32 and checks prefill of a 7-token prompt (hidden states of
 * every layer and position, last logits) and 4 decode steps against the fp64 forward. */
static void check_engine(const char *path, int llama3)
{
    static ref_model m; /* ~100 KB of caches: not on the stack */
    memset(&m, 0, sizeof m);
    m.o = (nb_tiny_opts){.seed = 11, .type = NB_TT_F32};
    m.nt = nb_tiny_tensors(&m.o, m.t);
    m.llama3 = llama3;
    nb_model *model;
    nb_err err = {0};
    if (nb_model_open(path, &model, &err) != NB_OK)
        fail_msg("%s: %s", path, err.msg);
    nb_engine_opts eo;
    nb_engine_opts_default(&eo);
    eo.dtype = NB_DTYPE_F32;
    eo.max_seq = 64;
    eo.threads = 2;
    nb_engine *e;
    if (nb_engine_setup(model, &eo, &e, &err) != NB_OK)
        fail_msg("%s: %s", path, err.msg);
    nb_model_close(model);
    assert_int_equal(nb_engine_cfg(e)->rope_scaling, llama3 ? NB_ROPE_LLAMA3 : NB_ROPE_NONE);

    static const int32_t prompt[] = {NB_TINY_BOS, 72, 259 + 3, 101, 298, 44, 9};
    static const int32_t decode[] = {120, 2, 299, 58};
    enum { NP = sizeof prompt / sizeof *prompt, ND = sizeof decode / sizeof *decode };
    double want[V];
    for (int p = 0; p < NP; p++)
        forward(&m, prompt[p], p, want);
    hook_state hs = {&m, 0, 0};
    nb_engine_set_layer_hook(e, on_layer, &hs);
    const float *logits;
    assert_int_equal(nb_engine_prefill(e, prompt, NP, &logits, &err), NB_OK);
    nb_engine_set_layer_hook(e, NULL, NULL);
    assert_true(hs.calls >= L);
    double worst = rel_err(logits, want, V);
    print_message("%s: prefill hidden states rel err %.3g, logits %.3g\n", path, hs.worst, worst);
    if (hs.worst > TOL || worst > TOL)
        fail_msg("prefill beyond %g of the fp64 reference (hidden %.3g, logits %.3g)", TOL,
                 hs.worst, worst);
    for (int s = 0; s < ND; s++) {
        forward(&m, decode[s], NP + s, want);
        assert_int_equal(nb_engine_decode_step(e, decode[s], NP + s, &logits, &err), NB_OK);
        worst = rel_err(logits, want, V);
        if (worst > TOL)
            fail_msg("decode step %d (pos %d): logits rel err %.3g beyond %g", s, NP + s, worst,
                     TOL);
    }
    nb_engine_free(e);
}

static void test_gguf_f32(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/tiny-f32.gguf", tu_group_tmp());
    nb_tiny_opts o = {.seed = 11, .type = NB_TT_F32};
    assert_int_equal(nb_tiny_write_gguf(&o, path), 0);
    check_engine(path, 0);
}

/* The HF directory path, with config.json's rope_scaling set to llama3. */
static void test_hf_llama3_rope(void **state)
{
    (void)state;
    char dir[4200], cfg[4300];
    snprintf(dir, sizeof dir, "%s/tiny-llama3", tu_group_tmp());
    nb_tiny_opts o = {.seed = 11, .type = NB_TT_F32};
    assert_int_equal(nb_tiny_write_hf(&o, dir, 1), 0);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    uint8_t *txt;
    size_t n;
    assert_int_equal(nb_tiny_read_file(cfg, &txt, &n), 0);
    static const char from[] = "\"rope_scaling\": null";
    long at = nb_tiny_find(txt, n, from, strlen(from), 0);
    assert_true(at > 0);
    nb_tiny_buf b = {0};
    nb_tiny_put(&b, txt, (size_t)at);
    nb_tiny_printf(&b, "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %g, "
                   "\"low_freq_factor\": %g, \"high_freq_factor\": %g, "
                   "\"original_max_position_embeddings\": %d}",
                   R_FACTOR, R_LOW, R_HIGH, R_OLD);
    size_t rest = (size_t)at + strlen(from);
    nb_tiny_put(&b, txt + rest, n - rest);
    free(txt);
    assert_int_equal(nb_tiny_write_file(cfg, b.p, b.n), 0);
    free(b.p);
    check_engine(dir, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_f32),
        cmocka_unit_test(test_hf_llama3_rope),
    };
    int rc = tu_run_group(tests, tu_group_setup, tu_group_teardown);
    nb_kernels_shutdown();
    return rc;
}
