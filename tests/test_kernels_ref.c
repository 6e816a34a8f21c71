/* test_kernels_ref: each row kernel on one ISA (argv[1]; ctest runs one entry per ISA) against an
 * independent fp64 formula written here from HF's definitions, not against another kernel. */
#include <math.h>

#include "ref64.h"
#include "testutil.h"

#include "kernels_testlib.h"
#include "nb_kernels.h"

/* f32 kernels: fp32 rounding of a short sum, far below any formula error (>= 1e-3). */
#define F32_TOL 2e-6
/* bf16 kernels round where HF rounds; the fp64 twin rounds at the same points, so they agree
 * but for a last-place tie now and then: at most 1 ulp, on at most 3% of the elements. */
#define BF16_ULPS 1
#define BF16_OFF_FRAC 0.03

static nb_isa isa = NB_ISA_PORTABLE;

static double rb(double v) { return (double)nb_round_bf16((float)v); }

/* Worst |got - want| over n relative to max |want|, which must be a meaningful scale. */
static void check_f32(const char *what, const float *got, const double *want, size_t n)
{
    double worst = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]));
        mag = fmax(mag, fabs(want[i]));
    }
    assert_true(mag > 0.1);
    if (worst / mag > F32_TOL)
        fail_msg("%s (%s): rel err %.3g beyond %g of the fp64 formula", what, nb_isa_name(isa),
                 worst / mag, F32_TOL);
}

static void check_bf16(const char *what, const nb_bf16 *got, const double *want, size_t n)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        int u = kt_bf16_ulps(got[i], nb_f32_to_bf16((float)want[i]));
        if (u > BF16_ULPS)
            fail_msg("%s (%s): element %zu: %.6g, the formula %.6g (%d ulps)", what,
                     nb_isa_name(isa), i, nb_bf16_to_f32(got[i]), want[i], u);
        off += u != 0;
    }
    if ((double)off > BF16_OFF_FRAC * (double)n)
        fail_msg("%s (%s): %zu of %zu elements off by an ulp", what, nb_isa_name(isa), off, n);
}

static void to_bf16(nb_bf16 *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = nb_f32_to_bf16(src[i]);
}

/* LlamaRMSNorm: y = w * x / sqrt(mean over all dim of x^2 + eps); bf16: h = bf16(x * inv),
 * y = bf16(w * h). */
static void test_rmsnorm(void **state)
{
    (void)state;
    static const int dims[] = {8, 64, 576};
    enum { N = 6, MAXD = 576 };
    static float x[N * MAXD], w[MAXD], y[N * MAXD];
    static nb_bf16 xb[N * MAXD], wb[MAXD], yb[N * MAXD];
    static double want[N * MAXD], wantb[N * MAXD];
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++) {
        int dim = dims[d];
        size_t cnt = (size_t)N * dim;
        kt_fill_f32(x, cnt, 2.0f);
        kt_fill_f32(w, (size_t)dim, 1.0f);
        to_bf16(xb, x, cnt);
        to_bf16(wb, w, (size_t)dim);
        const float eps = 1e-5f;
        for (int r = 0; r < N; r++) {
            double xd[MAXD], xbd[MAXD];
            for (int t = 0; t < dim; t++) {
                xd[t] = x[r * dim + t];
                xbd[t] = nb_bf16_to_f32(xb[r * dim + t]);
            }
            double inv = ref64_rms_inv(xd, dim, eps), invb = ref64_rms_inv(xbd, dim, eps);
            for (int t = 0; t < dim; t++) {
                want[r * dim + t] = (double)w[t] * xd[t] * inv;
                wantb[r * dim + t] = rb(nb_bf16_to_f32(wb[t]) * rb(xbd[t] * invb));
            }
        }
        nb_rmsnorm_f32(y, x, w, N, dim, eps);
        check_f32("rmsnorm f32", y, want, cnt);
        nb_rmsnorm_bf16(yb, xb, wb, N, dim, eps);
        check_bf16("rmsnorm bf16", yb, wantb, cnt);
    }
}

/* HF rotate_half at position pos with inv_freq theta^(-2i/hd): (a, b) = (x[i], x[i+hd/2]) ->
 * (a cos - b sin, b cos + a sin); bf16 rounds each product and each sum. */
static void test_rope(void **state)
{
    (void)state;
    enum { HEADS = 5, HD = 64, HALF = HD / 2, CNT = HEADS * HD };
    static const int pos[] = {0, 1, 17, 1000};
    float x[CNT], c[HALF], s[HALF], cb[HALF], sb[HALF];
    nb_bf16 xb[CNT];
    double want[CNT], wantb[CNT];
    for (size_t k = 0; k < sizeof pos / sizeof *pos; k++) {
        kt_fill_f32(x, CNT, 2.0f);
        to_bf16(xb, x, CNT);
        for (int i = 0; i < HALF; i++) {
            double ang = pos[k] * pow(10000.0, -2.0 * i / HD);
            c[i] = (float)cos(ang);
            s[i] = (float)sin(ang);
            cb[i] = nb_round_bf16(c[i]);
            sb[i] = nb_round_bf16(s[i]);
        }
        for (int h = 0; h < HEADS; h++)
            for (int i = 0; i < HALF; i++) {
                int ia = h * HD + i, ib = ia + HALF;
                double a = x[ia], b = x[ib];
                want[ia] = a * cos(pos[k] * pow(10000.0, -2.0 * i / HD)) -
                           b * sin(pos[k] * pow(10000.0, -2.0 * i / HD));
                want[ib] = b * cos(pos[k] * pow(10000.0, -2.0 * i / HD)) +
                           a * sin(pos[k] * pow(10000.0, -2.0 * i / HD));
                a = nb_bf16_to_f32(xb[ia]);
                b = nb_bf16_to_f32(xb[ib]);
                wantb[ia] = rb(rb(a * cb[i]) + rb(-b * sb[i]));
                wantb[ib] = rb(rb(b * cb[i]) + rb(a * sb[i]));
            }
        nb_rope_f32(x, HEADS, HD, c, s);
        check_f32("rope f32", x, want, CNT);
        nb_rope_bf16(xb, HEADS, HD, cb, sb);
        check_bf16("rope bf16", xb, wantb, CNT);
    }
}

/* SiLU-gated MLP product: silu(g) * u = g / (1 + e^-g) * u; bf16: bf16(bf16(silu(g)) * u). */
static void test_silu_mul(void **state)
{
    (void)state;
    enum { N = 777 };
    float g[N], u[N], y[N];
    nb_bf16 gb[N], ub[N], yb[N];
    double want[N], wantb[N];
    kt_fill_f32(g, N, 4.0f);
    kt_fill_f32(u, N, 1.0f);
    to_bf16(gb, g, N);
    to_bf16(ub, u, N);
    for (int i = 0; i < N; i++) {
        want[i] = ref64_silu(g[i]) * u[i];
        wantb[i] = rb(rb(ref64_silu(nb_bf16_to_f32(gb[i]))) * nb_bf16_to_f32(ub[i]));
    }
    nb_silu_mul_f32(y, g, u, N);
    check_f32("silu_mul f32", y, want, N);
    nb_silu_mul_bf16(yb, gb, ub, N);
    check_bf16("silu_mul bf16", yb, wantb, N);
}

/* Causal GQA attention: softmax(q.k / sqrt(hd)) . v over positions 0..pos, query head h on kv
 * head h / (heads / kv); bf16 rounds only the output. */
static void test_attention(void **state)
{
    (void)state;
    enum { HEADS = 6, KVH = 2, HD = 32, CTX = 40, QD = HEADS * HD, KD = KVH * HD };
    static const int shapes[][2] = {{1, 0}, {1, 39}, {7, 0}, {5, 20}}; /* n, pos0 */
    static float q[CTX * QD], kc[CTX * KD], vc[CTX * KD], out[CTX * QD];
    static nb_bf16 qb[CTX * QD], kb[CTX * KD], vb[CTX * KD], outb[CTX * QD];
    static double want[CTX * QD], wantb[CTX * QD];
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        int n = shapes[k][0], pos0 = shapes[k][1];
        kt_fill_f32(q, (size_t)n * QD, 1.5f);
        kt_fill_f32(kc, (size_t)CTX * KD, 1.5f);
        kt_fill_f32(vc, (size_t)CTX * KD, 1.0f);
        to_bf16(qb, q, (size_t)n * QD);
        to_bf16(kb, kc, (size_t)CTX * KD);
        to_bf16(vb, vc, (size_t)CTX * KD);
        static double qd[2][CTX * QD], kd[2][CTX * KD], vd[2][CTX * KD];
        for (size_t i = 0; i < (size_t)n * QD; i++) {
            qd[0][i] = q[i];
            qd[1][i] = nb_bf16_to_f32(qb[i]);
        }
        for (size_t i = 0; i < (size_t)CTX * KD; i++) {
            kd[0][i] = kc[i];
            kd[1][i] = nb_bf16_to_f32(kb[i]);
            vd[0][i] = vc[i];
            vd[1][i] = nb_bf16_to_f32(vb[i]);
        }
        for (int bf = 0; bf < 2; bf++)
            for (int r = 0; r < n; r++)
                for (int h = 0; h < HEADS; h++) {
                    int kvh = h / (HEADS / KVH);
                    double *o = &(bf ? wantb : want)[r * QD + h * HD];
                    ref64_attend(&qd[bf][r * QD + h * HD], &kd[bf][kvh * HD], &vd[bf][kvh * HD],
                                 pos0 + r + 1, KD, HD, o);
                    for (int i = 0; bf && i < HD; i++)
                        o[i] = rb(o[i]);
                }
        nb_attention_f32(out, q, kc, vc, n, pos0, HEADS, KVH, HD);
        check_f32("attention f32", out, want, (size_t)n * QD);
        nb_attention_bf16(outb, qb, kb, vb, n, pos0, HEADS, KVH, HD);
        check_bf16("attention bf16", outb, wantb, (size_t)n * QD);
    }
}

/* nn.Linear in f32: Y = X . W^T. */
static void test_linear_f32(void **state)
{
    (void)state;
    enum { ROWS = 37, COLS = 96, N = 3 };
    static float w[ROWS * COLS], x[N * COLS], y[N * ROWS];
    static double want[N * ROWS];
    kt_fill_f32(w, ROWS * COLS, 0.5f);
    kt_fill_f32(x, N * COLS, 1.0f);
    nb_wmat *W;
    nb_err err = {0};
    assert_int_equal(nb_wmat_create(NB_W_F32, ROWS, COLS, &W, &err), NB_OK);
    for (int r = 0; r < ROWS; r++)
        nb_wmat_set_row(W, r, &w[r * COLS]);
    assert_int_equal(nb_wmat_finish(W, &err), NB_OK);
    for (int i = 0; i < N; i++)
        for (int r = 0; r < ROWS; r++) {
            double s = 0;
            for (int c = 0; c < COLS; c++)
                s += (double)x[i * COLS + c] * w[r * COLS + c];
            want[i * ROWS + r] = s;
        }
    nb_linear_f32(W, x, N, y);
    check_f32("linear f32", y, want, N * ROWS);
    nb_wmat_free(W);
}

/* Quantized weights meet activations quantized per 32-block to 8 bits (d = amax / 127), so each
 * output is the exact fp64 dot of the dequantized weights with x up to at most
 * sum_b d_b / 2 * sum_t |w_t| (plus fp32 rounding); a wrong nibble, scale or lane lands far
 * outside that, and typical errors use a fair share of it (the bound is not vacuous). */
static void test_linear_quantized(void **state)
{
    (void)state;
    static const nb_wtype ts[] = {NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
    enum { ROWS = 40, COLS = 512, N = 5 };
    static nb_bf16 x[N * COLS];
    static float y[N * ROWS], w[COLS];
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) {
        kt_fill_bf16(x, N * COLS, 1.0f);
        nb_wmat *W = kt_wmat(ts[k], ROWS, COLS);
        assert_non_null(W);
        for (int n = 1; n <= N; n += N - 1) { /* decode and prefill kernels */
            nb_linear_bf16_f32out(W, x, n, y);
            double worst = 0;
            for (int r = 0; r < ROWS; r++) {
                nb_wmat_get_row_f32(W, r, w);
                for (int i = 0; i < n; i++) {
                    double exact = 0, bound = 0, mag = 0;
                    for (int b = 0; b < COLS / 32; b++) {
                        double amax = 0, wabs = 0;
                        for (int t = b * 32; t < b * 32 + 32; t++) {
                            double xv = nb_bf16_to_f32(x[i * COLS + t]);
                            amax = fmax(amax, fabs(xv));
                            wabs += fabs(w[t]);
                            exact += w[t] * xv;
                            mag += fabs(w[t] * xv);
                        }
                        bound += amax / 127 / 2 * wabs;
                    }
                    bound = bound * (1 + 1e-5) + 1e-5 * mag;
                    double e = fabs(y[i * ROWS + r] - exact);
                    if (e > bound)
                        fail_msg("linear %s (%s) n=%d row %d x %d: %.9g, fp64 %.9g, bound %.3g",
                                 nb_wtype_name(ts[k]), nb_isa_name(isa), n, r, i,
                                 (double)y[i * ROWS + r], exact, bound);
                    worst = fmax(worst, e / bound);
                }
            }
            assert_true(worst > 0.01);
        }
        nb_wmat_free(W);
    }
}

/* argv[1] names the ISA; a CPU without it skips (reason printed), as the emulated AVX-512
 * twin (test_kernels_emu) still runs. */
static int pick_isa(void **state)
{
    (void)state;
    nb_err err = {0};
    return nb_kernels_set_isa(isa, &err) == NB_OK && nb_kernels_init(2, &err) == NB_OK ? 0 : -1;
}

static void test_isa_present(void **state)
{
    (void)state;
    if (nb_kernels_isa() != isa)
        tu_skip("kernel path %s: this CPU lacks it", nb_isa_name(isa));
}

/* Gemma3RMSNorm: y = x / sqrt(mean(x^2) + eps) * w in fp32, w = 1 + HF's parameter; bf16
 * rounds once, at the end (no rounding of the normalized row, unlike Llama's). */
static void test_rmsnorm_f32w(void **state)
{
    (void)state;
    enum { N = 5, DIM = 256 };
    static float x[N * DIM], w[DIM];
    static nb_bf16 xb[N * DIM], yb[N * DIM];
    static double want[N * DIM];
    kt_fill_f32(x, (size_t)N * DIM, 40.0f); /* Gemma's residual stream is large */
    kt_fill_f32(w, DIM, 1.0f);
    for (int t = 0; t < DIM; t++)
        w[t] = 1.0f + nb_round_bf16(w[t]);
    to_bf16(xb, x, (size_t)N * DIM);
    const float eps = 1e-6f;
    for (int r = 0; r < N; r++) {
        double xbd[DIM];
        for (int t = 0; t < DIM; t++)
            xbd[t] = nb_bf16_to_f32(xb[r * DIM + t]);
        double inv = ref64_rms_inv(xbd, DIM, eps);
        for (int t = 0; t < DIM; t++)
            want[r * DIM + t] = xbd[t] * inv * (double)w[t];
    }
    nb_rmsnorm_f32w_bf16(yb, xb, w, N, DIM, eps);
    check_bf16("rmsnorm f32w bf16", yb, want, (size_t)N * DIM);
    /* and bit for bit the fp32 formula with one sequential sum of squares per row, whatever
     * the rows (4 at a time and a tail) and the pool's split (150 rows pass its threshold) */
    enum { NB = 150 };
    static nb_bf16 xl[NB * DIM], yl[NB * DIM];
    kt_fill_bf16(xl, (size_t)NB * DIM, 40.0f);
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    for (int n = 1; n <= NB; n += n < 9 ? 1 : 141) {
        nb_rmsnorm_f32w_bf16(yl, xl, w, n, DIM, eps);
        for (int r = 0; r < n; r++) {
            float ss = 0.0f;
            for (int t = 0; t < DIM; t++) {
                float v = nb_bf16_to_f32(xl[r * DIM + t]);
                ss += v * v;
            }
            float inv = 1.0f / sqrtf(ss / (float)DIM + eps);
            for (int t = 0; t < DIM; t++) {
                nb_bf16 e = nb_f32_to_bf16((nb_bf16_to_f32(xl[r * DIM + t]) * inv) * w[t]);
                if (e != yl[r * DIM + t])
                    fail_msg("rmsnorm f32w bf16 n=%d row %d col %d: 0x%04x, want 0x%04x", n, r,
                             t, yl[r * DIM + t], e);
            }
        }
    }
    nb_kernels_shutdown();
}

/* GELU-tanh gate: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u; bf16 rounds the
 * activation and the product. g stays above -3: further down, 1 + tanh cancels in fp32 (to 0
 * from about -6 on) as it does in PyTorch, which an fp64 formula does not model. */
static void test_gelu_mul(void **state)
{
    (void)state;
    enum { N = 777 };
    float g[N], u[N], y[N];
    nb_bf16 gb[N], ub[N], yb[N];
    double want[N], wantb[N];
    kt_fill_f32(g, N, 2.0f);
    for (int i = 0; i < N; i++)
        g[i] = g[i] < -3.0f ? -3.0f : g[i];
    kt_fill_f32(u, N, 1.0f);
    to_bf16(gb, g, N);
    to_bf16(ub, u, N);
    for (int i = 0; i < N; i++) {
        double a = g[i], ab = nb_bf16_to_f32(gb[i]);
        double ga = 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
        double gab = 0.5 * ab * (1 + tanh(sqrt(2 / M_PI) * (ab + 0.044715 * ab * ab * ab)));
        want[i] = ga * u[i];
        wantb[i] = rb(rb(gab) * nb_bf16_to_f32(ub[i]));
    }
    nb_gelu_mul_f32(y, g, u, N);
    check_f32("gelu_mul f32", y, want, N);
    nb_gelu_mul_bf16(yb, gb, ub, N);
    check_bf16("gelu_mul bf16", yb, wantb, N);
}

/* The bf16 gate reads its activation from a table of every bf16 input: all 65536 of them (NaN
 * and infinities included, u = 1 and u = -3) against the fp32 formula in PyTorch's order,
 * rounded where HF rounds, bit for bit; and across the pool's split (n past the threshold). */
static void test_gelu_mul_every_input(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    nb_bf16 *g = malloc(sizeof(nb_bf16) * N), *u = malloc(sizeof(nb_bf16) * N);
    nb_bf16 *y = malloc(sizeof(nb_bf16) * N);
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    for (int k = 0; k < 2; k++) {
        float uv = k ? -3.0f : 1.0f;
        for (int i = 0; i < N; i++) {
            g[i] = (nb_bf16)i;
            u[i] = nb_f32_to_bf16(uv);
        }
        nb_gelu_mul_bf16(y, g, u, N);
        for (int i = 0; i < N; i++) {
            float x = nb_bf16_to_f32(g[i]);
            float inner = 0.7978845608028654f * (x + 0.044715f * (x * x * x));
            float a = nb_round_bf16(0.5f * x * (1.0f + tanhf(inner)));
            nb_bf16 want = nb_f32_to_bf16(a * uv);
            int both_nan = isnan(nb_bf16_to_f32(want)) && isnan(nb_bf16_to_f32(y[i]));
            if (want != y[i] && !both_nan)
                fail_msg("gelu_mul bf16: g=0x%04x u=%g gives 0x%04x, want 0x%04x", i, (double)uv,
                         y[i], want);
        }
    }
    nb_kernels_shutdown();
    free(g);
    free(u);
    free(y);
}

int main(int argc, char **argv)
{
    const char *want = argc > 1 ? argv[1] : "portable";
    for (nb_isa i = NB_ISA_PORTABLE; i <= NB_ISA_AVX512BF16; i++)
        if (!strcmp(nb_isa_name(i), want))
            isa = i;
    if (strcmp(nb_isa_name(isa), want)) {
        fprintf(stderr, "unknown ISA '%s'\n", want);
        return 2;
    }
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_isa_present), cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),        cmocka_unit_test(test_silu_mul),
        cmocka_unit_test(test_attention),   cmocka_unit_test(test_linear_f32),
        cmocka_unit_test(test_linear_quantized),
        cmocka_unit_test(test_rmsnorm_f32w), cmocka_unit_test(test_gelu_mul), cmocka_unit_test(test_gelu_mul_every_input),
    };
    const struct CMUnitTest only[] = {cmocka_unit_test(test_isa_present)};
    nb_err err = {0};
    int have = nb_kernels_set_isa(isa, &err) == NB_OK;
    nb_kernels_set_isa(NB_ISA_PORTABLE, &err);
    int rc = have ? tu_run_group(all, pick_isa, NULL) : tu_run_group(only, NULL, NULL);
    nb_kernels_shutdown();
    return rc;
}
