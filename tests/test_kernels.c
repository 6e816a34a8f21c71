/* test_kernels: every kernel path this CPU has against the portable reference on random data,
 * 1 vs 2 threads bit for bit, attention against a filled cache, top-k ties, dispatch errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"
#include <pthread.h>

#include "kernels_testlib.h"
#include "nb_kernels.h"
#include "nb_kernels_impl.h"

/* The faster paths this CPU supports (portable is the reference). */
static nb_isa fast[3];
static int n_fast;

static int setup(void **state)
{
    (void)state;
    nb_err err = {0};
    for (nb_isa isa = NB_ISA_AVX2; isa <= NB_ISA_AMXBF16; isa++) {
        if (nb_kernels_set_isa(isa, &err) == NB_OK)
            fast[n_fast++] = isa;
        else
            fprintf(stderr, "[  SKIP    ] kernel path %s: %s\n", nb_isa_name(isa), err.msg);
    }
    nb_kernels_set_isa(NB_ISA_PORTABLE, &err);
    return nb_kernels_init(2, &err) == NB_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nb_kernels_shutdown();
    return 0;
}

static void use(nb_isa isa)
{
    nb_err err = {0};
    assert_int_equal(nb_kernels_set_isa(isa, &err), NB_OK);
}

static void threads(int n)
{
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(n, &err), NB_OK);
    assert_int_equal(nb_kernels_threads(), n);
}

/* ---- linear layers ---------------------------------------------------------- */

/* AVX2 reproduces portable bit for bit; AVX-512 BF16 sums in another order
 * (vdpbf16ps), so fp32 outputs get a rounding tolerance and bf16 outputs may
 * be one ulp off, rarely. */
static void check_linear(nb_isa isa, const char *what, const nb_wmat *W, const nb_bf16 *X, int n,
                         const float *ref32, const float *got32, const nb_bf16 *ref16,
                         const nb_bf16 *got16)
{
    size_t cnt = (size_t)n * nb_wmat_rows(W);
    int exact = isa == NB_ISA_AVX2 || nb_wmat_type(W) != NB_W_BF16;
    if (exact) {
        if (memcmp(ref32, got32, cnt * 4) || memcmp(ref16, got16, cnt * 2)) {
            for (size_t i = 0; i < cnt; i++)
                if (memcmp(&ref32[i], &got32[i], 4) || ref16[i] != got16[i]) {
                    fprintf(stderr, "%s: element %zu: ref %.9g got %.9g\n", what, i, ref32[i],
                            got32[i]);
                    break;
                }
            fail_msg("%s: %s differs from portable", what, nb_isa_name(isa));
        }
        return;
    }
    float *mag = kt_abs_dots(W, X, n);
    /* reordering a K-term fp32 sum moves it by at most ~K ulps of sum|terms| */
    float rel = (float)nb_wmat_cols(W) * 6e-8f;
    int bad = kt_check_f32(what, ref32, got32, mag, cnt, rel);
    for (size_t i = 0; i < cnt; i++)
        mag[i] *= rel;
    bad = bad || kt_check_bf16_tol(what, ref16, got16, cnt, mag, 0);
    free(mag);
    if (bad)
        fail_msg("%s: %s beyond fp32 rounding of portable", what, nb_isa_name(isa));
}

/* W as the portable path lays it out (reference) and as each fast path
 * does (PACK8), from the same rows. */
static void run_linear(nb_wtype t, int rows, int cols, int n)
{
    uint8_t *data = kt_rows(t, rows, cols);
    use(NB_ISA_PORTABLE);
    nb_wmat *W = kt_wmat_from(t, rows, cols, data);
    assert_non_null(W);
    size_t out = (size_t)n * rows;
    nb_bf16 *X = malloc(sizeof(nb_bf16) * (size_t)n * cols);
    kt_fill_bf16(X, (size_t)n * cols, 1.0f);
    float *ref32 = malloc(out * 4), *got32 = malloc(out * 4), *one = malloc(out * 4);
    nb_bf16 *ref16 = malloc(out * 2), *got16 = malloc(out * 2);
    nb_linear_bf16_f32out(W, X, n, ref32);
    nb_linear_bf16(W, X, n, ref16);
    for (int p = 0; p < n_fast; p++) {
        use(fast[p]);
        nb_wmat *Wp = kt_wmat_from(t, rows, cols, data);
        assert_non_null(Wp);
        memset(got32, 0xff, out * 4);
        memset(got16, 0xff, out * 2);
        nb_linear_bf16_f32out(Wp, X, n, got32);
        nb_linear_bf16(Wp, X, n, got16);
        char what[128];
        snprintf(what, sizeof what, "linear %s %dx%d n=%d %s", nb_wtype_name(t), rows, cols, n,
                 nb_isa_name(fast[p]));
        check_linear(fast[p], what, W, X, n, ref32, got32, ref16, got16);
        /* one thread gives the same bits as two */
        threads(1);
        nb_linear_bf16_f32out(Wp, X, n, one);
        threads(2);
        assert_memory_equal(one, got32, out * 4);
        /* the reference reads the packed layout too, bit for bit */
        use(NB_ISA_PORTABLE);
        nb_linear_bf16_f32out(Wp, X, n, got32);
        assert_memory_equal(ref32, got32, out * 4);
        nb_wmat_free(Wp);
    }
    use(NB_ISA_PORTABLE);
    free(data);
    free(X);
    free(ref32);
    free(got32);
    free(one);
    free(ref16);
    free(got16);
    nb_wmat_free(W);
}

static void test_linear_bf16_weights(void **state)
{
    (void)state;
    static const int cols[] = {64, 576, 1536, 13, 100};
    static const int ns[] = {1, 3, 17, 128};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            run_linear(NB_W_BF16, 37, cols[c], ns[k]);
            if (ns[k] <= 17)
                run_linear(NB_W_BF16, 200, cols[c], ns[k]);
        }
}

static void test_linear_quantized_weights(void **state)
{
    (void)state;
    static const nb_wtype ts[] = {NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
    static const int cols[] = {64, 576, 1536, 512};
    static const int ns[] = {1, 3, 17, 128};
    for (size_t q = 0; q < sizeof ts / sizeof *ts; q++)
        for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
            for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                if (cols[c] % kt_block_elems(ts[q]))
                    continue;
                run_linear(ts[q], 37, cols[c], ns[k]);
                if (ns[k] <= 17)
                    run_linear(ts[q], 200, cols[c], ns[k]);
            }
}

/* The Q8 activations are a defined approximation, not a free one: each
 * output must sit within the quantization bound of the exact fp64 dot of
 * the dequantized weights, sum_b sum_t |w_t| * d_b / 2 (plus fp32 slack),
 * and a wrong nibble or lane order lands far outside it. */
static void test_linear_q8_activation_error(void **state)
{
    (void)state;
    static const nb_wtype ts[] = {NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
    enum { COLS = 768 }; /* whole 256-blocks for the k-quants */
    int rows = 24, cols = COLS, n = 5;
    for (size_t q = 0; q < sizeof ts / sizeof *ts; q++) {
        use(NB_ISA_PORTABLE);
        nb_wmat *W = kt_wmat(ts[q], rows, cols);
        assert_non_null(W);
        nb_bf16 *X = malloc(sizeof(nb_bf16) * (size_t)n * cols);
        kt_fill_bf16(X, (size_t)n * cols, 1.0f);
        float *y = malloc(sizeof(float) * (size_t)n * rows), w[COLS], x[COLS];
        nb_linear_bf16_f32out(W, X, n, y);
        double worst = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < rows; j++) {
                nb_wmat_get_row_f32(W, j, w);
                double exact = 0.0, bound = 0.0, mag = 0.0;
                for (int b = 0; b < cols / 32; b++) {
                    double amax = 0.0, wsum = 0.0;
                    for (int t = b * 32; t < b * 32 + 32; t++) {
                        x[t] = nb_bf16_to_f32(X[(size_t)i * cols + t]);
                        amax = fmax(amax, fabs(x[t]));
                        wsum += fabs(w[t]);
                        exact += (double)w[t] * x[t];
                        mag += fabs((double)w[t] * x[t]);
                    }
                    bound += wsum * (amax / 127.0) * (0.5 + 1e-5);
                }
                bound += 1e-5 * mag + 1e-30;
                double err = fabs((double)y[(size_t)i * rows + j] - exact);
                if (err > bound)
                    fail_msg("%s row %d x %d: %.9g vs exact %.9g, bound %.3g", nb_wtype_name(ts[q]),
                             j, i, y[(size_t)i * rows + j], exact, bound);
                worst = fmax(worst, err / bound);
            }
        /* the bound is not vacuous: typical errors use a fair share of it */
        assert_true(worst > 0.01);
        free(X);
        free(y);
        nb_wmat_free(W);
    }
}

/* The SIMD activation quantizer is the portable one bit for bit, edge
 * values included (zeros, NaN, inf, subnormals, exact halves). */
static void test_q8_quantize_row(void **state)
{
    (void)state;
    if (!n_fast)
        tu_skip("no SIMD kernel path on this CPU to compare with the portable quantizer");
    enum { K = 256 };
    float x[K];
    kt_fill_f32(x, K, 3.0f);
    for (int t = 32; t < 64; t++)
        x[t] = 0.0f;
    x[70] = NAN;
    x[100] = INFINITY;
    x[101] = -1.0f;
    for (int t = 128; t < 160; t++)
        x[t] = 1e-40f * (float)(t - 140);
    for (int t = 160; t < 192; t++)
        x[t] = (float)(t - 176) * 0.5f; /* amax 8 -> halves of the step */
    int8_t q0[K], q1[K];
    float d0[K / 32], d1[K / 32], s0[K / 32], s1[K / 32];
    nb_q8_quantize_row(x, K, q0, d0, s0);
    nb_avx2_q8_quantize_row(x, K, q1, d1, s1);
    assert_memory_equal(q0, q1, sizeof q0);
    assert_memory_equal(d0, d1, sizeof d0);
    assert_memory_equal(s0, s1, sizeof s0);
    assert_true(d0[1] == 0.0f && q0[40] == 0 && s0[1] == 0.0f);
    for (int t = 0; t < 32; t++) /* amax maps to +-127, the rest in between */
        assert_true(q0[t] >= -127 && q0[t] <= 127);
}

static void test_linear_f32(void **state)
{
    (void)state;
    static const int cols[] = {64, 576, 100, 7};
    static const int ns[] = {1, 3, 17, 64};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            int rows = 45, n = ns[k];
            uint8_t *data = kt_rows(NB_W_F32, rows, cols[c]);
            use(NB_ISA_PORTABLE);
            nb_wmat *W = kt_wmat_from(NB_W_F32, rows, cols[c], data);
            assert_non_null(W);
            float *X = malloc(sizeof(float) * (size_t)n * cols[c]);
            kt_fill_f32(X, (size_t)n * cols[c], 1.0f);
            size_t out = (size_t)n * rows;
            float *ref = malloc(out * 4), *got = malloc(out * 4);
            use(NB_ISA_PORTABLE);
            nb_linear_f32(W, X, n, ref);
            for (int p = 0; p < n_fast; p++) {
                use(fast[p]);
                nb_wmat *Wp = kt_wmat_from(NB_W_F32, rows, cols[c], data);
                assert_non_null(Wp);
                nb_linear_f32(Wp, X, n, got);
                assert_memory_equal(ref, got, out * 4); /* f32 weights: AVX2 kernel, exact */
                nb_wmat_free(Wp);
            }
            use(NB_ISA_PORTABLE);
            free(data);
            free(X);
            free(ref);
            free(got);
            nb_wmat_free(W);
        }
}

static int has_path(nb_isa isa)
{
    for (int p = 0; p < n_fast; p++)
        if (fast[p] == isa)
            return 1;
    return 0;
}

/* The portable dot's order (8 lanes over k, their tree, the K % 8 tail), each step by
 * mul-then-add or (fused) by FMA. */
static float lane_dot(const float *x, const float *w, int K, int fused)
{
    float a[8] = {0};
    int K8 = K & ~7;
    for (int t = 0; t < K8; t++)
        a[t % 8] = fused ? fmaf(x[t], w[t], a[t % 8]) : a[t % 8] + x[t] * w[t];
    float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (int t = K8; t < K; t++)
        s += x[t] * w[t];
    return s;
}

/* The AVX2 kernels may use FMA only where every product is exact (bf16 X times bf16 W): the
 * f32 linear (fp32 X, f32 W) has inexact products, where only mul-then-add gives the
 * portable bits. At decode n, and at the prefill GEMM's n with a short last row tile, at a
 * model's K and with a K % 8 tail; and the data must make an FMA differ: in the same order,
 * the sums by FMA differ from mul-then-add's in most outputs. */
static void test_linear_inexact_products(void **state)
{
    (void)state;
    static const int ns[] = {1, 17, 128}, cols[] = {576, 100};
    enum { ROWS = 37 };
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
        int K = cols[c];
        uint8_t *data = kt_rows(NB_W_F32, ROWS, K);
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            int n = ns[k];
            size_t out = (size_t)n * ROWS, near = 0;
            float *X = malloc(sizeof(float) * (size_t)n * K);
            kt_fill_f32(X, (size_t)n * K, 1.0f);
            float *ref = malloc(out * 4), *got = malloc(out * 4);
            use(NB_ISA_PORTABLE);
            nb_wmat *W = kt_wmat_from(NB_W_F32, ROWS, K, data);
            assert_non_null(W);
            nb_linear_f32(W, X, n, ref);
            for (size_t o = 0; o < out; o++) {
                const float *x = X + (o / ROWS) * K, *w = (const float *)data + (o % ROWS) * K;
                float fused = lane_dot(x, w, K, 1);
                if (lane_dot(x, w, K, 0) != ref[o])
                    fail_msg("lane_dot is not the portable order");
                near += memcmp(&fused, &ref[o], 4) != 0;
            }
            if (near < out / 2)
                fail_msg("f32 linear n=%d: only %zu of %zu outputs show inexact products", n,
                         near, out);
            for (int p = 0; p < n_fast; p++) {
                use(fast[p]);
                nb_wmat *Wp = kt_wmat_from(NB_W_F32, ROWS, K, data);
                assert_non_null(Wp);
                memset(got, 0xff, out * 4);
                nb_linear_f32(Wp, X, n, got);
                if (memcmp(ref, got, out * 4))
                    fail_msg("f32 linear %dx%d n=%d: %s differs from portable", ROWS, K, n,
                             nb_isa_name(fast[p]));
                nb_wmat_free(Wp);
            }
            use(NB_ISA_PORTABLE);
            nb_wmat_free(W);
            free(X);
            free(ref);
            free(got);
        }
        free(data);
    }
}

/* Where products are exact the AVX2 decode and prefill kernels use FMA, which differs from
 * mul-then-add only for a product below 2^-126 (the rounded product loses bits there): so
 * with such products each prefill row must still equal its decode step's bits
 * (nb_kernels_row_exact's premise), which holds only if both kernels take the same steps. */
static void test_avx2_tiny_products_row_exact(void **state)
{
    (void)state;
    if (!has_path(NB_ISA_AVX2)) {
        fprintf(stderr, "[  SKIP    ] no AVX2 path\n");
        return;
    }
    enum { ROWS = 24, COLS = 576, N = 20 };
    uint8_t *data = kt_rows(NB_W_BF16, ROWS, COLS);
    nb_bf16 *w = (nb_bf16 *)data, *X = malloc(sizeof(nb_bf16) * N * COLS);
    /* |w| ~ 2^-64, |x| ~ 2^-60 .. 2^-83: products from 2^-124 down to below 2^-134, where
     * their 16 bits no longer fit a float and mulps rounds them, while sums stay ~2^-122
     * (ulp 2^-145), fine enough to see that rounding */
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
        w[i] = nb_f32_to_bf16(nb_bf16_to_f32(w[i]) * 0x1p-60f);
    kt_fill_bf16(X, (size_t)N * COLS, 1.0f);
    for (size_t i = 0; i < (size_t)N * COLS; i++)
        X[i] = nb_f32_to_bf16(ldexpf(nb_bf16_to_f32(X[i]), -60 - (int)(i * 7 % 24)));
    use(NB_ISA_AVX2);
    nb_wmat *W = kt_wmat_from(NB_W_BF16, ROWS, COLS, data);
    assert_non_null(W);
    float *all = malloc(sizeof(float) * N * ROWS), *one = malloc(sizeof(float) * N * ROWS);
    nb_linear_bf16_f32out(W, X, N, all);
    for (int i = 0; i < N; i++)
        nb_linear_bf16_f32out(W, X + (size_t)i * COLS, 1, one + (size_t)i * ROWS);
    size_t diff = 0, inexact = 0;
    for (size_t i = 0; i < (size_t)N * ROWS; i++)
        diff += memcmp(&all[i], &one[i], 4) != 0;
    /* the case is there: portable (mul then add) differs from the exact products' sums */
    use(NB_ISA_PORTABLE);
    nb_wmat *Wr = kt_wmat_from(NB_W_BF16, ROWS, COLS, data);
    assert_non_null(Wr);
    nb_linear_bf16_f32out(Wr, X, N, one);
    for (size_t i = 0; i < (size_t)N * ROWS; i++)
        inexact += memcmp(&all[i], &one[i], 4) != 0;
    nb_wmat_free(Wr);
    print_message("tiny products: %zu of %d outputs differ from mul-then-add's\n", inexact,
                  N * ROWS);
    if (inexact < (size_t)N * ROWS / 4)
        fail_msg("only %zu of %d outputs see a rounded product: the data misses the case",
                 inexact, N * ROWS);
    if (diff)
        fail_msg("%zu of %d prefill outputs differ from the decode step's", diff, N * ROWS);
    use(NB_ISA_PORTABLE);
    nb_wmat_free(W);
    free(all);
    free(one);
    free(X);
    free(data);
}

/* Engine-sized shapes at n = 1 and a full prefill chunk: the thread split,
 * the 8-row groups and the X blocking all cross real boundaries. */
static void test_linear_model_shapes(void **state)
{
    (void)state;
    run_linear(NB_W_BF16, 576, 576, 1);
    run_linear(NB_W_BF16, 1536, 576, 1);
    run_linear(NB_W_BF16, 576, 1536, 128);
    run_linear(NB_W_Q4_1, 576, 1536, 1);
    run_linear(NB_W_Q4_1, 192, 576, 128);
}

/* The batch entry computes what the single calls do, bit for bit. */
static void test_linear_batch(void **state)
{
    (void)state;
    static const int rows[3] = {576, 192, 200};
    for (int p = -1; p < n_fast; p++) {
        use(p < 0 ? NB_ISA_PORTABLE : fast[p]);
        for (int n = 1; n <= 17; n += 16) {
            nb_wmat *W[3];
            nb_bf16 *Y[3], *R[3];
            for (int k = 0; k < 3; k++) {
                W[k] = kt_wmat(k == 2 ? NB_W_Q4_1 : NB_W_BF16, rows[k], 576);
                assert_non_null(W[k]);
                Y[k] = malloc(sizeof(nb_bf16) * (size_t)n * rows[k]);
                R[k] = malloc(sizeof(nb_bf16) * (size_t)n * rows[k]);
            }
            nb_bf16 *X = malloc(sizeof(nb_bf16) * (size_t)n * 576);
            kt_fill_bf16(X, (size_t)n * 576, 1.0f);
            nb_linear_bf16_batch((const nb_wmat *const *)W, Y, 3, X, n);
            for (int k = 0; k < 3; k++) {
                nb_linear_bf16(W[k], X, n, R[k]);
                assert_memory_equal(Y[k], R[k], sizeof(nb_bf16) * (size_t)n * rows[k]);
                nb_wmat_free(W[k]);
                free(Y[k]);
                free(R[k]);
            }
            free(X);
        }
    }
    use(NB_ISA_PORTABLE);
}

/* ---- element-wise ------------------------------------------------------------- */

static void test_rmsnorm_add(void **state)
{
    (void)state;
    static const int dims[] = {576, 64, 13};
    for (size_t d = 0; d < 3; d++) {
        int dim = dims[d], n = 70;
        size_t cnt = (size_t)n * dim;
        nb_bf16 *x = malloc(cnt * 2), *w = malloc((size_t)dim * 2), *ref = malloc(cnt * 2),
                *got = malloc(cnt * 2), *dx = malloc(cnt * 2), *ra = malloc(cnt * 2);
        kt_fill_bf16(x, cnt, 3.0f);
        kt_fill_bf16(w, (size_t)dim, 1.0f);
        kt_fill_bf16(dx, cnt, 1.0f);
        use(NB_ISA_PORTABLE);
        nb_rmsnorm_bf16(ref, x, w, n, dim, 1e-5f);
        memcpy(ra, x, cnt * 2);
        nb_add_bf16(ra, dx, cnt);
        for (int p = 0; p < n_fast; p++) {
            use(fast[p]);
            nb_rmsnorm_bf16(got, x, w, n, dim, 1e-5f);
            assert_memory_equal(ref, got, cnt * 2);
            memcpy(got, x, cnt * 2);
            nb_add_bf16(got, dx, cnt);
            assert_memory_equal(ra, got, cnt * 2);
        }
        use(NB_ISA_PORTABLE);
        free(x);
        free(w);
        free(ref);
        free(got);
        free(dx);
        free(ra);
    }
}

static void test_rope(void **state)
{
    (void)state;
    static const int hds[] = {64, 12};
    for (int k = 0; k < 2; k++) {
        int heads = 9, hd = hds[k], half = hd / 2;
        size_t cnt = (size_t)heads * hd;
        nb_bf16 *x = malloc(cnt * 2), *ref = malloc(cnt * 2), *got = malloc(cnt * 2);
        float *c = malloc(sizeof(float) * (size_t)half), *s = malloc(sizeof(float) * (size_t)half);
        kt_fill_bf16(x, cnt, 2.0f);
        for (int i = 0; i < half; i++) {
            c[i] = nb_round_bf16(cosf(37.0f * (float)i / (float)half));
            s[i] = nb_round_bf16(sinf(37.0f * (float)i / (float)half));
        }
        use(NB_ISA_PORTABLE);
        memcpy(ref, x, cnt * 2);
        nb_rope_bf16(ref, heads, hd, c, s);
        for (int p = 0; p < n_fast; p++) {
            use(fast[p]);
            memcpy(got, x, cnt * 2);
            nb_rope_bf16(got, heads, hd, c, s);
            assert_memory_equal(ref, got, cnt * 2);
        }
        use(NB_ISA_PORTABLE);
        free(x);
        free(ref);
        free(got);
        free(c);
        free(s);
    }
}

static void test_silu_mul(void **state)
{
    (void)state;
    size_t n = 40000 + 5; /* parallel, with a scalar tail */
    nb_bf16 *g = malloc(n * 2), *u = malloc(n * 2), *ref = malloc(n * 2), *got = malloc(n * 2);
    float *gf = malloc(n * 4), *uf = malloc(n * 4), *rf = malloc(n * 4), *of = malloc(n * 4);
    kt_fill_bf16(g, n, 4.0f);
    kt_fill_bf16(u, n, 1.0f);
    for (size_t i = 0; i < n; i++) {
        /* f32: sweep the whole exp range, including overflow and underflow */
        gf[i] = -110.0f + 220.0f * (float)i / (float)n;
        uf[i] = 1.0f;
    }
    static const float special[] = {-INFINITY, INFINITY, -88.8f, -88.7f, -87.3f, 88.8f, -103.9f,
                                    -104.1f, 0.0f, -0.0f};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        gf[i] = special[i];
    use(NB_ISA_PORTABLE);
    nb_silu_mul_bf16(ref, g, u, n);
    nb_silu_mul_f32(rf, gf, uf, n);
    for (int p = 0; p < n_fast; p++) {
        use(fast[p]);
        nb_silu_mul_bf16(got, g, u, n);
        if (kt_check_bf16("silu_mul bf16", ref, got, n))
            fail_msg("silu_mul bf16 (%s) beyond fp32 rounding", nb_isa_name(fast[p]));
        nb_silu_mul_f32(of, gf, uf, n);
        /* exp within 2 ulp, then a divide: 4 ulp of the result */
        if (kt_check_f32("silu_mul f32", rf, of, NULL, n, 4.8e-7f))
            fail_msg("silu_mul f32 (%s) beyond fp32 rounding", nb_isa_name(fast[p]));
    }
    use(NB_ISA_PORTABLE);
    free(g);
    free(u);
    free(ref);
    free(got);
    free(gf);
    free(uf);
    free(rf);
    free(of);
}

/* ---- attention ------------------------------------------------------------------ */

/* SmolLM2's heads (9 query, 3 kv, 64 wide) unless n_kv is given: then 4 query heads
 * share them, as in Gemma 3 270M, and decode splits a kv group across threads. */
static void run_attention_shape(int n, int pos0, int f32, int n_kv, int hd)
{
    int n_heads = n_kv == 3 ? 9 : 4, ctx = pos0 + n;
    size_t qn = (size_t)n * n_heads * hd, kvn = (size_t)ctx * n_kv * hd;
    size_t es = f32 ? 4 : 2;
    void *q = malloc(qn * es), *kc = malloc(kvn * es), *vc = malloc(kvn * es);
    void *ref = malloc(qn * es), *got = malloc(qn * es), *one = malloc(qn * es);
    kt_fill_qkv(q, qn, kc, vc, kvn, f32);
    char what[96];
    snprintf(what, sizeof what, "attention %s n=%d pos0=%d heads %d/%d", f32 ? "f32" : "bf16", n,
             pos0, n_heads, n_kv);
    use(NB_ISA_PORTABLE);
    if (f32)
        nb_attention_f32(ref, q, kc, vc, n, pos0, n_heads, n_kv, hd);
    else
        nb_attention_bf16(ref, q, kc, vc, n, pos0, n_heads, n_kv, hd);
    void *avx2 = malloc(qn * es);
    for (int p = 0; p < n_fast; p++) {
        use(fast[p]);
        for (int t = 1; t <= 2; t++) {
            threads(t);
            if (f32)
                nb_attention_f32(got, q, kc, vc, n, pos0, n_heads, n_kv, hd);
            else
                nb_attention_bf16(got, q, kc, vc, n, pos0, n_heads, n_kv, hd);
            if (t == 1)
                memcpy(one, got, qn * es);
            else
                assert_memory_equal(one, got, qn * es);
        }
        /* the AVX-512 loops are the AVX2 ones 16 lanes wide: the same bits */
        if (fast[p] == NB_ISA_AVX2)
            memcpy(avx2, got, qn * es);
        else if (fast[p] == NB_ISA_AVX512BF16 && memcmp(avx2, got, qn * es))
            fail_msg("%s: the AVX-512 attention differs from the AVX2 one", what);
        /* outputs are convex combinations of values of magnitude ~1: fp32
         * rounding of exp and of the softmax sum is relative to that */
        int bad = 0;
        if (f32) {
            const float *r = ref, *g = got;
            for (size_t i = 0; i < qn && !bad; i++)
                if (fabsf(r[i] - g[i]) > 2e-6f * (1.0f + fabsf(r[i]))) {
                    fprintf(stderr, "%s: element %zu: ref %.9g got %.9g\n", what, i, r[i], g[i]);
                    bad = 1;
                }
        } else {
            float tol = 2e-6f; /* values ~1, weights summing to 1 */
            bad = kt_check_bf16_tol(what, ref, got, qn, &tol, 1);
        }
        if (bad)
            fail_msg("%s (%s) beyond fp32 rounding", what, nb_isa_name(fast[p]));
    }
    use(NB_ISA_PORTABLE);
    free(avx2);
    free(q);
    free(kc);
    free(vc);
    free(ref);
    free(got);
    free(one);
}

static void run_attention(int n, int pos0, int f32)
{
    run_attention_shape(n, pos0, f32, 3, 64);
}

static void test_attention_decode(void **state)
{
    (void)state;
    static const int pos[] = {0, 7, 300};
    for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < 3; i++) {
            run_attention(1, pos[i], f);
            run_attention_shape(1, pos[i], f, 1, 256);
            run_attention_shape(1, pos[i], f, 2, 32);
        }
}

static void test_attention_prefill(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        run_attention(17, 0, f);
        run_attention(128, 128, f); /* the second chunk of a 256-token prompt */
        run_attention(5, 130, f);
        run_attention_shape(33, 90, f, 1, 256); /* Gemma 3 270M: 4 heads of 256, one kv head */
        run_attention_shape(9, 20, f, 1, 40);   /* a head past whole 16-lane registers */
    }
}

/* ---- pool ---------------------------------------------------------------------- */

typedef struct conc {
    const nb_wmat *W;
    const nb_bf16 *X;
    const float *ref;
    int n, ok;
} conc;

static void *conc_main(void *p)
{
    conc *c = p;
    size_t out = (size_t)c->n * nb_wmat_rows(c->W);
    float *y = malloc(out * 4);
    c->ok = 1;
    for (int r = 0; r < 20; r++) {
        nb_linear_bf16_f32out(c->W, c->X, c->n, y);
        if (memcmp(y, c->ref, out * 4))
            c->ok = 0;
    }
    free(y);
    return NULL;
}

/* Two callers at once: one gets the pool, the other runs inline; both
 * must get the right answer (and TSan must stay quiet). */
static void test_concurrent_callers(void **state)
{
    (void)state;
    nb_isa isa = n_fast ? fast[0] : NB_ISA_PORTABLE;
    use(isa);
    threads(2);
    nb_wmat *W = kt_wmat(NB_W_BF16, 256, 576);
    assert_non_null(W);
    int n = 3;
    nb_bf16 *X = malloc(sizeof(nb_bf16) * (size_t)n * 576);
    kt_fill_bf16(X, (size_t)n * 576, 1.0f);
    float *ref = malloc(sizeof(float) * (size_t)n * 256);
    nb_linear_bf16_f32out(W, X, n, ref);
    conc c[2] = {{W, X, ref, n, 0}, {W, X, ref, n, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, conc_main, &c[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_true(c[0].ok && c[1].ok);
    /* more threads than cores, then back */
    threads(3);
    float *y = malloc(sizeof(float) * (size_t)n * 256);
    nb_linear_bf16_f32out(W, X, n, y);
    assert_memory_equal(ref, y, sizeof(float) * (size_t)n * 256);
    threads(2);
    free(y);
    free(X);
    free(ref);
    nb_wmat_free(W);
    use(NB_ISA_PORTABLE);
}

/* ---- top-k, dispatch, matrices ---------------------------------------------------- */

static void test_topk_ties(void **state)
{
    (void)state;
    float x[10] = {1.0f, 3.0f, 3.0f, NAN, 2.0f, 3.0f, -INFINITY, 2.0f, NAN, 0.5f};
    int32_t ids[10];
    float vals[10];
    nb_topk_f32(x, 10, 4, ids, vals);
    int32_t want[4] = {1, 2, 5, 4}; /* ties to the smaller index */
    assert_memory_equal(ids, want, sizeof want);
    nb_topk_f32(x, 10, 10, ids, vals);
    int32_t all[10] = {1, 2, 5, 4, 7, 0, 9, 6, 3, 8}; /* NaN last, in index order */
    assert_memory_equal(ids, all, sizeof all);
    float same[5] = {7, 7, 7, 7, 7};
    nb_topk_f32(same, 5, 1, ids, vals);
    assert_int_equal(ids[0], 0);
}

/* qsort order of the top-k rule: larger value, then smaller id; NaN after every number. */
static const float *topk_keys;
static int topk_cmp(const void *a, const void *b)
{
    int32_t ia = *(const int32_t *)a, ib = *(const int32_t *)b;
    float va = topk_keys[ia], vb = topk_keys[ib];
    int na = isnan(va), nbn = isnan(vb);
    if (na != nbn)
        return na - nbn;
    if (!na && va != vb)
        return va > vb ? -1 : 1;
    return ia < ib ? -1 : 1;
}

/* A vocabulary of coarse values (many ties at the k-th place), NaN (one among the first k,
 * so numbers must displace a held NaN) and infinities, against a full sort: the early
 * reject below the k-th value must take the full rule whenever a NaN is compared. */
static void test_topk_vocab(void **state)
{
    (void)state;
    enum { N = 49152 };
    float *x = malloc(sizeof(float) * N);
    int32_t *order = malloc(sizeof(int32_t) * N), ids[64];
    float vals[64];
    assert_non_null(x);
    assert_non_null(order);
    uint32_t r = 7;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)((r >> 8) % 50) * 0.5f - 5.0f; /* ~1000 copies of each value */
        if (i % 4099 == 3)
            x[i] = NAN;
        order[i] = i;
    }
    x[N - 1] = INFINITY;
    x[N / 2] = -INFINITY;
    topk_keys = x;
    qsort(order, N, sizeof *order, topk_cmp);
    static const int ks[] = {1, 5, 10, 64};
    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) {
        nb_topk_f32(x, N, ks[c], ids, vals);
        assert_memory_equal(ids, order, sizeof(int32_t) * (size_t)ks[c]);
        for (int i = 0; i < ks[c]; i++)
            assert_true(vals[i] == x[ids[i]]);
    }
    /* all NaN: the first k ids in order */
    for (int i = 0; i < N; i++)
        x[i] = NAN;
    nb_topk_f32(x, N, 5, ids, vals);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ids[i], i);
    free(x);
    free(order);
}

static void test_dispatch(void **state)
{
    (void)state;
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(-1, &err), NB_EINVAL);
    assert_int_equal(nb_kernels_init(1025, &err), NB_EINVAL);
    assert_int_equal(nb_kernels_set_isa((nb_isa)7, &err), NB_EINVAL);
    assert_string_equal(nb_isa_name(NB_ISA_AVX512BF16), "avx512bf16");
    if (n_fast < 2) {
        err.msg[0] = '\0';
        assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX512BF16, &err), NB_EUNSUPPORTED);
        assert_non_null(strstr(err.msg, "avx512bf16"));
    }
    assert_int_equal(nb_kernels_init(0, &err), NB_OK);
    assert_true(nb_kernels_threads() >= 1);
    threads(2);
    nb_wmat *w;
    assert_int_equal(nb_wmat_create(NB_W_Q4_1, 4, 40, &w, &err), NB_EINVAL);
    /* k-quant rows hold whole 256-value super-blocks: the message names the type and size */
    assert_int_equal(nb_wmat_create(NB_W_Q4_K, 4, 640, &w, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "q4_k needs cols to be a multiple of 256"));
    /* the stored formats with a native linear, and only those */
    assert_int_equal(nb_wtype_of_quant(NB_QUANT_Q5_0), NB_W_Q5_0);
    assert_int_equal(nb_wtype_of_quant(NB_QUANT_Q4_K), NB_W_Q4_K);
    assert_int_equal(nb_wtype_of_quant(NB_QUANT_Q6_K), NB_W_Q6_K);
    assert_int_equal(nb_wtype_of_quant(NB_QUANT_Q8_0), NB_W_Q8_0);
    assert_int_equal(nb_wtype_of_quant(NB_QUANT_Q4_0), -1);
    assert_int_equal(nb_wtype_of_quant(NB_QUANT_BF16), -1);
    assert_true(nb_wtype_quantized(NB_W_Q6_K) && !nb_wtype_quantized(NB_W_BF16));
    assert_int_equal(nb_wmat_create(NB_W_BF16, 0, 40, &w, &err), NB_EINVAL);
}

/* The rows-in-lanes kernels of Q5_0, Q4_K and Q6_K of the host's paths, alone: the AVX2 ones and,
 * where the CPU has VNNI, the AVX-512 ones (test_kernels_emu runs their emulated twins
 * everywhere); behind the public linear they are in test_linear_quantized_weights. */
static void test_q_gemv8(void **state)
{
    (void)state;
    if (!__builtin_cpu_supports("avx2"))
        tu_skip("the kernels need AVX2, which this CPU lacks");
    assert_int_equal(kt_check_gemv8("avx2", NB_W_Q5_0, nb_avx2_q5_0_gemv8), 0);
    assert_int_equal(kt_check_gemv8("avx2", NB_W_Q4_K, nb_avx2_q4_k_gemv8), 0);
    assert_int_equal(kt_check_gemv8("avx2", NB_W_Q6_K, nb_avx2_q6_k_gemv8), 0);
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni"))
        tu_skip("AVX-512 VNNI: not on this CPU (the emulated twins are tested)");
    assert_int_equal(kt_check_gemv8("avx512vnni", NB_W_Q5_0, nb_avx512_q5_0_gemv8), 0);
    assert_int_equal(kt_check_gemv8("avx512vnni", NB_W_Q4_K, nb_avx512_q4_k_gemv8), 0);
    assert_int_equal(kt_check_gemv8("avx512vnni", NB_W_Q6_K, nb_avx512_q6_k_gemv8), 0);
}

/* The prefill GEMM of the AVX-512 path (VNNI) against the per-row definition and fp64; behind
 * the public linear it is in test_linear_quantized_weights' n >= 4 cases (and many X blocks in
 * test_linear_quantized_long). test_kernels_emu runs its emulated twin everywhere. */
static void test_kq_gemm(void **state)
{
    (void)state;
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni"))
        tu_skip("AVX-512 VNNI: not on this CPU (the emulated twin is tested)");
    assert_int_equal(kt_check_kq_gemm("avx512vnni", &nb_avx512_kq_gemm), 0);
}

/* Prefill longer than one block of activation rows (the GEMM's blocks of pair records, and
 * the per-row kernels' X blocks), odd, on every path against portable bit for bit. */
static void test_linear_quantized_long(void **state)
{
    (void)state;
    static const nb_wtype ts[] = {NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K, NB_W_Q8_0};
    for (size_t q = 0; q < sizeof ts / sizeof *ts; q++)
        run_linear(ts[q], 24, 2048, 301);
}

static void test_get_row(void **state)
{
    (void)state;
    for (int p = 0; p < n_fast; p++) { /* packed rows read back as set */
        static const nb_wtype ts[] = {NB_W_BF16, NB_W_F32, NB_W_Q4_1, NB_W_Q8_0,
                                      NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
        for (int k = 0; k < 7; k++) {
            int C = kt_block_elems(ts[k]) == 256 ? 512 : 96;
            uint8_t *data = kt_rows(ts[k], 13, C);
            use(NB_ISA_PORTABLE);
            nb_wmat *a = kt_wmat_from(ts[k], 13, C, data);
            use(fast[p]);
            nb_wmat *b = kt_wmat_from(ts[k], 13, C, data);
            /* AVX-512 and AMX keep bf16 in VNNI pairs of 16 columns, the rest in 8-row packs */
            int want = ts[k] == NB_W_BF16 && fast[p] >= NB_ISA_AVX512BF16 ? NB_LAYOUT_VNNI16
                                                                          : NB_LAYOUT_PACK8;
            assert_true(a && b && b->layout == want);
            float ra[512], rb[512];
            for (int r = 0; r < 13; r++) {
                nb_wmat_get_row_f32(a, r, ra);
                nb_wmat_get_row_f32(b, r, rb);
                assert_memory_equal(ra, rb, sizeof(float) * (size_t)C);
            }
            nb_wmat_free(a);
            nb_wmat_free(b);
            free(data);
        }
    }
    use(NB_ISA_PORTABLE);
    nb_wmat *W = kt_wmat(NB_W_Q4_1, 3, 64);
    assert_non_null(W);
    float row[64], blk0[32], blk1[32];
    nb_wmat_get_row_f32(W, 2, row);
    nb_quant_block_f32(NB_QUANT_Q4_1, W->data + 2 * W->row_bytes, blk0);
    nb_quant_block_f32(NB_QUANT_Q4_1, W->data + 2 * W->row_bytes + 20, blk1);
    assert_memory_equal(row, blk0, sizeof blk0);
    assert_memory_equal(row + 32, blk1, sizeof blk1);
    nb_wmat_free(W);
    /* and the block function is gguf-py's formula */
    uint8_t blk[20] = {0};
    uint16_t d = 0x3c00 /* 1.0 */, m = 0xc000 /* -2.0 */;
    memcpy(blk, &d, 2);
    memcpy(blk + 2, &m, 2);
    blk[4] = 0x53; /* q[0] = 3, q[16] = 5 */
    float out[32];
    nb_quant_block_f32(NB_QUANT_Q4_1, blk, out);
    assert_true(out[0] == 1.0f && out[16] == 3.0f && out[1] == -2.0f);
}

/* The LM head's row-range call: exactly the rows asked for, each the full linear's value bit
 * for bit, every row reported done once by a callback, on every path; bad ranges refused. */
typedef struct head_seen {
    int *hits;
    const float *y;
    int bad;
} head_seen;

static void head_done(void *user, int j0, int j1, const float *Y)
{
    head_seen *h = user;
    if (Y != h->y || j0 >= j1)
        h->bad = 1;
    for (int j = j0; j < j1; j++)
        h->hits[j]++;
}

static void test_head_rows(void **state)
{
    (void)state;
    enum { V = 1000, D = 640 };
    static const int ranges[][2] = {{0, V}, {16, 999}, {992, V}, {480, 481}};
    nb_bf16 x[D];
    kt_fill_bf16(x, D, 1.0f);
    uint8_t *data = kt_rows(NB_W_Q8_0, V, D);
    float *full = malloc(sizeof(float) * V), *y = malloc(sizeof(float) * V);
    int *hits = malloc(sizeof(int) * V);
    threads(2);
    for (int p = -1; p < n_fast; p++) {
        use(p < 0 ? NB_ISA_PORTABLE : fast[p]);
        nb_wmat *W = kt_wmat_from(NB_W_Q8_0, V, D, data);
        assert_non_null(W);
        nb_linear_bf16_f32out(W, x, 1, full);
        for (size_t k = 0; k < sizeof ranges / sizeof *ranges; k++) {
            int r0 = ranges[k][0], r1 = ranges[k][1];
            memset(y, 0xff, sizeof(float) * V);
            memset(hits, 0, sizeof(int) * V);
            head_seen h = {hits, y, 0};
            nb_err err = {0};
            assert_int_equal(nb_linear_head_rows(W, x, y, r0, r1, head_done, &h, &err), NB_OK);
            assert_false(h.bad);
            for (int j = 0; j < V; j++) {
                int in = j >= r0 && j < r1;
                assert_int_equal(hits[j], in);
                if (in)
                    assert_memory_equal(&y[j], &full[j], sizeof(float));
                else
                    assert_int_equal(((uint32_t *)y)[j], 0xffffffffu); /* untouched */
            }
            /* without a callback: the same values */
            memset(y, 0xff, sizeof(float) * V);
            assert_int_equal(nb_linear_head_rows(W, x, y, r0, r1, NULL, NULL, &err), NB_OK);
            assert_memory_equal(y + r0, full + r0, sizeof(float) * (size_t)(r1 - r0));
        }
        nb_err err = {0};
        assert_int_equal(nb_linear_head_rows(W, x, y, 8, 100, NULL, NULL, &err), NB_EINVAL);
        assert_non_null(strstr(err.msg, "multiple of 16"));
        assert_int_equal(nb_linear_head_rows(W, x, y, 0, V + 1, NULL, NULL, &err), NB_EINVAL);
        assert_non_null(strstr(err.msg, "[0, 1000)"));
        assert_int_equal(nb_linear_head_rows(W, x, y, 32, 16, NULL, NULL, &err), NB_EINVAL);
        assert_int_equal(nb_linear_head_rows(W, x, y, 32, 32, head_done, NULL, &err), NB_OK);
        nb_wmat_free(W);
    }
    use(NB_ISA_PORTABLE);
    free(data);
    free(full);
    free(y);
    free(hits);
}

/* A Sapphire Rapids-class CPU as CPUID reads it, under an OS that saves every state. */
static nb_cpu_facts amx_host(void)
{
    nb_cpu_facts f = {.osxsave = 1, .avx = 1, .fma = 1, .f16c = 1, .avx2 = 1, .avx512f = 1,
                      .avx512bw = 1, .avx512vl = 1, .avx512bf16 = 1, .vnni = 1, .amx_tile = 1,
                      .amx_bf16 = 1, .amx_int8 = 1, .xcr0 = 0x600e7, .tiles_permitted = 1};
    return f;
}

static nb_isa picked(const nb_cpu_facts *f, nb_dispatch_choice *c)
{
    nb_dispatch_pick(f, c);
    return c->best;
}

/* The dispatcher's decision for hosts this machine is not: an AMX CPU whose tile state Linux
 * refuses runs the AVX-512 path as a whole (its VNNI decode kernels and the int8 loop on zmm
 * for quantized prefill), never a tile instruction; state the OS does not save is never used. */
static void test_dispatch_hosts(void **state)
{
    (void)state;
    nb_dispatch_choice c;
    nb_kernel_table avx512, amx;

    nb_cpu_facts f = amx_host();
    assert_int_equal(picked(&f, &c), NB_ISA_AMXBF16);
    assert_true(c.vnni && c.amx_int8);
    nb_dispatch_build(&c, &avx512, &amx);
    assert_int_equal(amx.isa, NB_ISA_AMXBF16);
    assert_ptr_equal(amx.linear_bf16, nb_amx_linear_int8);
    assert_ptr_equal(amx.linear_bf16_rows, nb_avx512_linear_bf16);
    assert_ptr_equal(amx.q4_1_gemv8, nb_avx512_q4_1_gemv8);

    f.tiles_permitted = 0; /* arch_prctl refused: older kernel, seccomp, small sigaltstack */
    assert_int_equal(picked(&f, &c), NB_ISA_AVX512BF16);
    assert_true(c.vnni);
    assert_false(c.amx_int8);
    nb_dispatch_build(&c, &avx512, &amx);
    assert_int_equal(avx512.isa, NB_ISA_AVX512BF16);
    assert_ptr_equal(avx512.linear_bf16, nb_amx_vnni_linear_int8);
    assert_ptr_equal(avx512.q4_1_gemv8, nb_avx512_q4_1_gemv8);
    assert_ptr_equal(avx512.q6_k_gemv8, nb_avx512_q6_k_gemv8);
    assert_ptr_equal(avx512.kq_gemm, &nb_avx512_kq_gemm);
    assert_ptr_equal(avx512.wmat_finish, nb_avx512_wmat_finish);

    f = amx_host();
    f.xcr0 = 0xe7; /* the OS does not save XTILECFG/XTILEDATA */
    assert_int_equal(picked(&f, &c), NB_ISA_AVX512BF16);

    f = amx_host();
    f.amx_int8 = 0; /* bf16 tiles only: quantized prefill keeps the bf16 tile kernel's path */
    assert_int_equal(picked(&f, &c), NB_ISA_AMXBF16);
    nb_dispatch_build(&c, &avx512, &amx);
    assert_ptr_equal(amx.linear_bf16, nb_amx_linear_bf16);

    f = amx_host();
    f.amx_tile = f.amx_bf16 = f.amx_int8 = 0;
    f.xcr0 = 0xe7;
    f.vnni = 0; /* AVX-512 BF16 without VNNI: the AVX2 quantized kernels, the bf16 GEMM */
    assert_int_equal(picked(&f, &c), NB_ISA_AVX512BF16);
    nb_dispatch_build(&c, &avx512, &amx);
    assert_ptr_equal(avx512.linear_bf16, nb_avx512_linear_bf16);
    assert_ptr_equal(avx512.q4_1_gemv8, nb_kernels_avx2.q4_1_gemv8);

    f = amx_host();
    f.xcr0 = 0x7; /* ZMM state not saved (AVX-512 off in the OS) */
    assert_int_equal(picked(&f, &c), NB_ISA_AVX2);
    assert_false(c.vnni || c.amx_int8);

    f = amx_host();
    f.avx512bf16 = 0; /* Skylake-SP, Ice Lake: AVX-512 without BF16 */
    assert_int_equal(picked(&f, &c), NB_ISA_AVX2);

    f = amx_host();
    f.fma = 0;
    assert_int_equal(picked(&f, &c), NB_ISA_PORTABLE);
    f = amx_host();
    f.osxsave = 0;
    assert_int_equal(picked(&f, &c), NB_ISA_PORTABLE);
    f = amx_host();
    f.xcr0 = 0x3; /* YMM state not saved */
    assert_int_equal(picked(&f, &c), NB_ISA_PORTABLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_bf16_weights),
        cmocka_unit_test(test_linear_quantized_weights),
        cmocka_unit_test(test_linear_q8_activation_error),
        cmocka_unit_test(test_q8_quantize_row),
        cmocka_unit_test(test_linear_f32),
        cmocka_unit_test(test_linear_inexact_products),
        cmocka_unit_test(test_avx2_tiny_products_row_exact),
        cmocka_unit_test(test_linear_model_shapes),
        cmocka_unit_test(test_linear_batch),
        cmocka_unit_test(test_rmsnorm_add),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_silu_mul),
        cmocka_unit_test(test_attention_decode),
        cmocka_unit_test(test_attention_prefill),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_topk_ties),
        cmocka_unit_test(test_topk_vocab),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_dispatch_hosts),
        cmocka_unit_test(test_get_row),
        cmocka_unit_test(test_q_gemv8),
        cmocka_unit_test(test_kq_gemm),
        cmocka_unit_test(test_linear_quantized_long),
        cmocka_unit_test(test_head_rows),
    };
    return tu_run_group(tests, setup, teardown);
}
