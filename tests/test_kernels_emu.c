/* test_kernels_emu: the AVX-512 BF16 and AMX-BF16 linear kernels built over emulations of their
 * intrinsics (SDM semantics) and checked against portable, alone and inside the engine, on every CPU with AVX2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "kernels_testlib.h"
#include "nb_diagnosis.h"
#include "nb_engine.h"
#include "nb_kernels_impl.h"
#include "tools/nb_tiny.h"

/* nb_avx512.c over the emulated intrinsics (kernels_emu.c), nb_amx.c over
 * the emulated tiles (kernels_amx_emu.c). */
void nb_avx512_emu_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                               int j0, int j1);
nb_code nb_avx512_emu_wmat_finish(nb_wmat *w, nb_err *err);
void nb_amx_emu_linear_bf16(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                            int j0, int j1);
void nb_amx_emu_linear_int8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                            int j0, int j1);
float nb_amx_emu_dot_pair(float c0, const nb_bf16 a[2], const nb_bf16 b[2]);
/* nb_amx_vnni.c (the int8 tile loop on zmm registers) over the emulated intrinsics. */
void nb_amx_vnni_emu_linear_int8(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out,
                                 int j0, int j1);
/* nb_avx512_kquant.c over the emulated intrinsics (kernels_emu.c). */
void nb_avx512_emu_q8_0_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_emu_q4_1_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_emu_q5_0_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_emu_q4_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
void nb_avx512_emu_q6_k_gemv8(const nb_q8_act *x, const uint8_t *grp, int K, float out[8]);
extern const nb_kq_gemm_ops nb_avx512_emu_kq_gemm;
/* nb_avx512.c's attention loops over the emulated intrinsics. */
void nb_avx512_emu_attn_scores4(const float *kt, const float *const q[4], int lim, int hd,
                                float scale, float *const out[4]);
void nb_avx512_emu_attn_pv(float *const acc[], const float *const w[], int cnt, const float *v,
                           int n, int hd);

typedef void (*linear_fn)(const nb_wmat *W, const nb_bf16 *X, int n, void *Y, int f32out, int j0,
                          int j1);

/* Wv in VNNI16, as both paths finish it, from the same rows as portable's W:
 * every row reads back bit for bit (the layout loses nothing). */
static nb_wmat *vnni_copy(const uint8_t *data, int rows, int cols)
{
    nb_err err = {0};
    nb_wmat *Wv;
    assert_int_equal(nb_wmat_create(NB_W_BF16, rows, cols, &Wv, &err), NB_OK);
    for (int r = 0; r < rows; r++)
        nb_wmat_set_row(Wv, r, data + (size_t)r * cols * 2);
    assert_int_equal(nb_avx512_emu_wmat_finish(Wv, &err), NB_OK);
    assert_int_equal(Wv->layout, NB_LAYOUT_VNNI16);
    float *row = malloc(sizeof(float) * (size_t)cols);
    for (int r = 0; r < rows; r++) {
        nb_wmat_get_row_f32(Wv, r, row);
        const nb_bf16 *src = (const nb_bf16 *)data + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            if (row[c] != nb_bf16_to_f32(src[c]))
                fail_msg("VNNI16 row %d col %d reads back %g", r, c, row[c]);
    }
    free(row);
    return Wv;
}

static void run(const char *path, linear_fn fn, int rows, int cols, int n)
{
    nb_err err = {0};
    uint8_t *data = kt_rows(NB_W_BF16, rows, cols);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
    nb_wmat *W = kt_wmat_from(NB_W_BF16, rows, cols, data);
    assert_true(W != NULL);
    nb_wmat *Wv = vnni_copy(data, rows, cols);
    free(data);
    size_t out = (size_t)n * rows;
    nb_bf16 *X = malloc(sizeof(nb_bf16) * (size_t)n * cols);
    kt_fill_bf16(X, (size_t)n * cols, 1.0f);
    float *ref32 = malloc(out * 4), *got32 = malloc(out * 4);
    nb_bf16 *ref16 = malloc(out * 2), *got16 = malloc(out * 2);
    nb_linear_bf16_f32out(W, X, n, ref32);
    nb_linear_bf16(W, X, n, ref16);
    /* any path computes on any layout: portable reads VNNI16 rows, bit for bit */
    nb_linear_bf16_f32out(Wv, X, n, got32);
    assert_memory_equal(ref32, got32, out * 4);
    /* two slices, as two threads would split the rows */
    int mid = (rows / 2) & ~15;
    fn(Wv, X, n, got32, 1, 0, mid);
    fn(Wv, X, n, got32, 1, mid, rows);
    fn(Wv, X, n, got16, 0, 0, rows);
    float *mag = kt_abs_dots(W, X, n);
    float rel = (float)cols * 6e-8f;
    char what[96];
    snprintf(what, sizeof what, "%s (emulated) %dx%d n=%d", path, rows, cols, n);
    int bad = kt_check_f32(what, ref32, got32, mag, out, rel);
    for (size_t i = 0; i < out; i++)
        mag[i] *= rel;
    bad = bad || kt_check_bf16_tol(what, ref16, got16, out, mag, 0);
    if (bad)
        fail_msg("%s beyond fp32 rounding of portable", what);
    free(mag);
    free(X);
    free(ref32);
    free(got32);
    free(ref16);
    free(got16);
    nb_wmat_free(W);
    nb_wmat_free(Wv);
}

static void need_avx2(void)
{
    if (nb_kernels_cpu_isa() < NB_ISA_AVX2)
        tu_skip("the emulation runs on AVX2, which this CPU lacks");
}

static void test_avx512_linear_emulated(void **state)
{
    (void)state;
    need_avx2();
    static const int cols[] = {64, 576, 1536, 13, 100, 33};
    static const int ns[] = {1, 3, 4, 6, 17, 70};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            run("avx512bf16", nb_avx512_emu_linear_bf16, 37, cols[c], ns[k]);
    run("avx512bf16", nb_avx512_emu_linear_bf16, 200, 576, 1);
    run("avx512bf16", nb_avx512_emu_linear_bf16, 200, 64, 13);
}

/* Block-keeping weights on the AVX-512 path: its finish keeps them PACK8 and its linear hands
 * them to the AVX2 kernels, whose results are portable's bit for bit (two slices, as threads). */
static void test_avx512_quantized_emulated(void **state)
{
    (void)state;
    need_avx2();
    static const nb_wtype ts[] = {NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
    enum { ROWS = 40, COLS = 512 };
    nb_err err = {0};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++)
        for (int n = 1; n <= 5; n += 4) {
            uint8_t *data = kt_rows(ts[k], ROWS, COLS);
            assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
            nb_wmat *W = kt_wmat_from(ts[k], ROWS, COLS, data), *Wp;
            assert_non_null(W);
            assert_int_equal(nb_wmat_create(ts[k], ROWS, COLS, &Wp, &err), NB_OK);
            for (int r = 0; r < ROWS; r++)
                nb_wmat_set_row(Wp, r, data + kt_row_bytes(ts[k], COLS) * (size_t)r);
            assert_int_equal(nb_avx512_emu_wmat_finish(Wp, &err), NB_OK);
            assert_int_equal(Wp->layout, NB_LAYOUT_PACK8);
            nb_bf16 X[5 * COLS];
            kt_fill_bf16(X, (size_t)n * COLS, 1.0f);
            float ref[5 * ROWS], got[5 * ROWS];
            nb_linear_bf16_f32out(W, X, n, ref);
            nb_avx512_emu_linear_bf16(Wp, X, n, got, 1, 0, 16);
            nb_avx512_emu_linear_bf16(Wp, X, n, got, 1, 16, ROWS);
            if (memcmp(ref, got, sizeof(float) * (size_t)n * ROWS))
                fail_msg("%s n=%d: the AVX-512 path differs from portable", nb_wtype_name(ts[k]),
                         n);
            nb_wmat_free(W);
            nb_wmat_free(Wp);
            free(data);
        }
}

/* The AVX-512 VNNI kernels of the block-keeping types: the rows-in-lanes kernels of Q5_0, Q4_K
 * and Q6_K and Q8_0's prefill GEMM alone (against the portable dot and fp64), then behind the
 * public linear: a table with them swapped in, decode (n = 1) and prefill sizes (Q8_0's GEMM; and
 * its per-row kernel, in a table without the GEMM; the rows-in-lanes kernels at every n), two
 * threads, against portable bit for bit. */
static void test_avx512_kquant_emulated(void **state)
{
    (void)state;
    need_avx2();
    assert_int_equal(kt_check_gemv8("avx512vnni-emu", NB_W_Q5_0, nb_avx512_emu_q5_0_gemv8), 0);
    assert_int_equal(kt_check_gemv8("avx512vnni-emu", NB_W_Q4_K, nb_avx512_emu_q4_k_gemv8), 0);
    assert_int_equal(kt_check_gemv8("avx512vnni-emu", NB_W_Q6_K, nb_avx512_emu_q6_k_gemv8), 0);
    assert_int_equal(kt_check_kq_gemm("avx512vnni-emu", &nb_avx512_emu_kq_gemm), 0);
    static const nb_wtype ts[] = {NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
    static const int ns[] = {1, 37, -37}; /* -37: 37 rows, the table without the GEMM */
    enum { ROWS = 40, COLS = 512, N = 37 };
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++)
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            int n = ns[i] < 0 ? -ns[i] : ns[i];
            uint8_t *data = kt_rows(ts[k], ROWS, COLS);
            assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
            nb_wmat *W = kt_wmat_from(ts[k], ROWS, COLS, data);
            assert_non_null(W);
            nb_bf16 *X = malloc(sizeof(nb_bf16) * N * COLS);
            kt_fill_bf16(X, (size_t)n * COLS, 1.0f);
            float *ref = malloc(sizeof(float) * N * ROWS), *got = malloc(sizeof(float) * N * ROWS);
            nb_linear_bf16_f32out(W, X, n, ref);
            assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX2, &err), NB_OK);
            nb_wmat *Wp = kt_wmat_from(ts[k], ROWS, COLS, data);
            assert_non_null(Wp);
            emu = *nb_kernels_active();
            emu.q8_0_gemv8 = nb_avx512_emu_q8_0_gemv8;
            emu.q4_1_gemv8 = nb_avx512_emu_q4_1_gemv8;
            emu.q5_0_gemv8 = nb_avx512_emu_q5_0_gemv8;
            emu.q4_k_gemv8 = nb_avx512_emu_q4_k_gemv8;
            emu.q6_k_gemv8 = nb_avx512_emu_q6_k_gemv8;
            emu.kq_gemm = ns[i] < 0 ? NULL : &nb_avx512_emu_kq_gemm;
            nb_kernels_use_table(&emu);
            nb_linear_bf16_f32out(Wp, X, n, got);
            nb_kernels_use_table(NULL);
            if (memcmp(ref, got, sizeof(float) * (size_t)n * ROWS))
                fail_msg("%s n=%d%s: the emulated VNNI kernels differ from portable",
                         nb_wtype_name(ts[k]), n, ns[i] < 0 ? " (no GEMM)" : "");
            nb_wmat_free(W);
            nb_wmat_free(Wp);
            free(X);
            free(ref);
            free(got);
            free(data);
        }
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
}

/* Attention with the AVX-512 loops swapped into the AVX2 table: the same bits as the AVX2 loops
 * (bf16 and f32; Gemma's 4 heads of 256 on one kv head in prefill and decode, heads of 64, and
 * a head of 40 past whole registers), two threads. */
static void test_attention_emulated(void **state)
{
    (void)state;
    need_avx2();
    static const int shapes[][5] = {/* n, pos0, heads, kv heads, hd */
                                    {33, 90, 4, 1, 256}, {1, 130, 4, 1, 256}, {17, 5, 9, 3, 64},
                                    {9, 20, 4, 1, 40}};
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    emu = nb_kernels_avx2;
    emu.attn_scores4 = nb_avx512_emu_attn_scores4;
    emu.attn_pv = nb_avx512_emu_attn_pv;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (int f32 = 0; f32 < 2; f32++) {
            int n = shapes[k][0], pos0 = shapes[k][1], nh = shapes[k][2], nkv = shapes[k][3];
            int hd = shapes[k][4], ctx = pos0 + n;
            size_t qn = (size_t)n * nh * hd, kvn = (size_t)ctx * nkv * hd, es = f32 ? 4 : 2;
            void *q = malloc(qn * es), *kc = malloc(kvn * es), *vc = malloc(kvn * es);
            void *ref = malloc(qn * es), *got = malloc(qn * es);
            kt_fill_qkv(q, qn, kc, vc, kvn, f32);
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 0)
                    assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX2, &err), NB_OK);
                else
                    nb_kernels_use_table(&emu);
                void *out = pass ? got : ref;
                if (f32)
                    nb_attention_f32(out, q, kc, vc, n, pos0, nh, nkv, hd);
                else
                    nb_attention_bf16(out, q, kc, vc, n, pos0, nh, nkv, hd);
            }
            nb_kernels_use_table(NULL);
            if (memcmp(ref, got, qn * es))
                fail_msg("attention %s n=%d pos0=%d heads %d/%d hd %d: the emulated AVX-512 "
                         "loops differ from the AVX2 ones", f32 ? "f32" : "bf16", n, pos0, nh,
                         nkv, hd);
            free(q);
            free(kc);
            free(vc);
            free(ref);
            free(got);
        }
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
}

/* Tiles from 16 rows up (smaller n hands over to the AVX-512 kernel, also
 * covered): partial A tiles (17, 33), partial C columns (rows 37, 200). */
static void test_amx_linear_emulated(void **state)
{
    (void)state;
    need_avx2();
    static const int cols[] = {64, 576, 13, 100, 33};
    static const int ns[] = {3, 16, 17, 33, 70};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            run("amx-bf16", nb_amx_emu_linear_bf16, 37, cols[c], ns[k]);
    run("amx-bf16", nb_amx_emu_linear_bf16, 200, 1536, 32);
}

/* Quantized prefill on an int8 tile loop (`lin`: the emulated AMX-INT8 tiles, or the loop on
 * zmm registers, emulated or real): W's type through `emu` (the AVX2 table with `lin` swapped
 * in; PACK8 as on the AMX and AVX-512 paths) against portable, f32 and bf16 outputs bit for bit,
 * on `threads` threads (the pool's 16-row chunks: a chunk of 16 columns runs one column tile);
 * 0 when equal. */
static int int8_vs_portable(nb_kernel_table *emu, linear_fn lin, const char *what,
                            nb_wtype type, int rows, int cols, int n, int threads)
{
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(threads, &err), NB_OK);
    uint8_t *data = kt_rows(type, rows, cols);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
    nb_wmat *W = kt_wmat_from(type, rows, cols, data);
    assert_non_null(W);
    nb_bf16 *X = malloc(sizeof(nb_bf16) * (size_t)n * cols);
    kt_fill_bf16(X, (size_t)n * cols, 1.0f);
    size_t out = (size_t)n * rows;
    float *ref = malloc(out * 4), *got = malloc(out * 4);
    nb_bf16 *ref16 = malloc(out * 2), *got16 = malloc(out * 2);
    nb_linear_bf16_f32out(W, X, n, ref);
    nb_linear_bf16(W, X, n, ref16);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX2, &err), NB_OK);
    nb_wmat *Wp = kt_wmat_from(type, rows, cols, data);
    assert_non_null(Wp);
    assert_int_equal(Wp->layout, NB_LAYOUT_PACK8);
    *emu = *nb_kernels_active();
    emu->linear_bf16 = lin;
    nb_kernels_use_table(emu);
    memset(got, 0xff, out * 4);
    memset(got16, 0xff, out * 2);
    nb_linear_bf16_f32out(Wp, X, n, got);
    nb_linear_bf16(Wp, X, n, got16);
    nb_kernels_use_table(NULL);
    int bad = memcmp(ref, got, out * 4) || memcmp(ref16, got16, out * 2);
    if (bad)
        print_error("%s %dx%d n=%d, %d threads: %s differs from portable\n",
                    nb_wtype_name(type), rows, cols, n, threads, what);
    nb_wmat_free(W);
    nb_wmat_free(Wp);
    free(X);
    free(ref);
    free(got);
    free(ref16);
    free(got16);
    free(data);
    return bad;
}

/* Every quantized type's prefill on the emulated int8 tiles (tdpbsud: Q4_1, Q4_K, Q5_0, Q6_K's
 * two K = 16 halves, the last two with the activation's offsets; tdpbssd: Q8_0), behind the public linear, 1 and 2 threads, bit for bit against portable, each
 * type at each K of 64/576/640 (the 32-block types) or 256/768/2048 (the k-quants) with rows x n
 * of: partial A tiles (n = 17, 33, 37, 20), a partial column tile and a missing second group
 * (rows 40, 200, 24), a partly filled PACK8 group (rows 37), decode sizes handed over (n = 1,
 * 15); then the shapes Gemma 3 270M's GGUF gives each type (Q5_0 and
 * Q8_0 at K = 640, rows 256/1024/2048 and a partial slice of the 262144-row output; Q4_K at K
 * 1024 and 2048, Q6_K at 2048, 640 rows); then a batch sharing X across all of them. `lin`
 * is the loop under test (`what` names it). */
static void int8_loop_cases(linear_fn lin, const char *what)
{
    static const nb_wtype types[] = {NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0, NB_W_Q4_K, NB_W_Q6_K};
    static const int k32[] = {64, 576, 640}, kk[] = {256, 768, 2048}; /* K per block size */
    static const int rn[][2] = {/* rows, n */
                                {40, 16}, {40, 17}, {200, 33}, {24, 37}, {37, 20}, {40, 1}, {40, 15}};
    static const struct {
        nb_wtype t;
        int rows, cols, n;
    } gemma[] = {{NB_W_Q5_0, 256, 640, 20},  {NB_W_Q5_0, 1024, 640, 17}, {NB_W_Q5_0, 2048, 640, 16},
                 {NB_W_Q8_0, 256, 640, 19},  {NB_W_Q8_0, 1000, 640, 17}, {NB_W_Q4_K, 640, 1024, 17},
                 {NB_W_Q4_K, 640, 2048, 16}, {NB_W_Q6_K, 640, 2048, 17}};
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    nb_err err = {0};
    int bad = 0, runs = 0;
    for (int t = 1; t <= 2; t++) {
        for (size_t y = 0; y < sizeof types / sizeof *types; y++)
            for (int c = 0; c < 3; c++)
                for (size_t s = 0; s < sizeof rn / sizeof *rn; s++, runs++) {
                    int cols = kt_block_elems(types[y]) == 256 ? kk[c] : k32[c];
                    bad += int8_vs_portable(&emu, lin, what, types[y], rn[s][0], cols,
                                            rn[s][1], t);
                }
        for (size_t g = 0; g < sizeof gemma / sizeof *gemma; g++, runs++)
            bad += int8_vs_portable(&emu, lin, what, gemma[g].t, gemma[g].rows, gemma[g].cols,
                                    gemma[g].n, t);
    }
    if (bad)
        fail_msg("%s: %d of %d cases differ from portable", what, bad, runs);
    /* A batch sharing X across every quantized type and bf16 (converted by other code into the
     * same per-thread scratch, between the int8 ones): each must find its own conversion and
     * give portable's bits. */
    enum { BR = 64, BC = 768, BN = 33, BM = 7 };
    static const nb_wtype bt[BM] = {NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0, NB_W_BF16,
                                    NB_W_Q4_K, NB_W_Q6_K, NB_W_Q4_1};
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    nb_bf16 *X = malloc(sizeof(nb_bf16) * BN * BC);
    kt_fill_bf16(X, (size_t)BN * BC, 1.0f);
    nb_wmat *Wr[BM], *Wb[BM];
    uint8_t *data[BM];
    nb_bf16 *ref[BM], *got[BM];
    for (int m = 0; m < BM; m++) {
        data[m] = kt_rows(bt[m], BR, BC);
        assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
        Wr[m] = kt_wmat_from(bt[m], BR, BC, data[m]);
        assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX2, &err), NB_OK);
        Wb[m] = kt_wmat_from(bt[m], BR, BC, data[m]);
        assert_true(Wr[m] && Wb[m]);
        ref[m] = malloc(sizeof(nb_bf16) * BN * BR);
        got[m] = malloc(sizeof(nb_bf16) * BN * BR);
    }
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
    for (int m = 0; m < BM; m++)
        nb_linear_bf16(Wr[m], X, BN, ref[m]);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX2, &err), NB_OK);
    emu = *nb_kernels_active();
    emu.linear_bf16 = lin;
    nb_kernels_use_table(&emu);
    nb_linear_bf16_batch((const nb_wmat *const *)Wb, got, BM, X, BN);
    nb_kernels_use_table(NULL);
    for (int m = 0; m < BM; m++) {
        /* bf16 ran on the bf16 tiles or the AVX-512 kernel: within fp32 rounding of portable,
         * checked by test_amx_linear_emulated and test_kernels; here its own memo must not leak
         * into the others */
        if (bt[m] != NB_W_BF16 && memcmp(ref[m], got[m], sizeof(nb_bf16) * BN * BR))
            fail_msg("%s, batch of every quantized type and bf16: matrix %d (%s) differs from "
                     "portable", what, m, nb_wtype_name(bt[m]));
        nb_wmat_free(Wr[m]);
        nb_wmat_free(Wb[m]);
        free(data[m]);
        free(ref[m]);
        free(got[m]);
    }
    free(X);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
}

static void test_amx_int8_emulated(void **state)
{
    (void)state;
    need_avx2();
    int8_loop_cases(nb_amx_emu_linear_int8, "the emulated int8 tiles");
}

/* The AVX-512 path's quantized prefill linear where the CPU has AVX-512 VNNI (the dispatcher's
 * choice: the int8 tile loop on zmm registers), else NULL. */
static linear_fn vnni_native(void)
{
    nb_err err = {0};
    if (nb_kernels_cpu_isa() < NB_ISA_AVX512BF16)
        return NULL;
    assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX512BF16, &err), NB_OK);
    linear_fn f = nb_kernels_active()->linear_bf16;
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
    return f == nb_amx_vnni_linear_int8 ? f : NULL;
}

/* The same cases on the int8 tile loop with its tile instructions on zmm registers
 * (nb_amx_vnni.c: vpdpbusd, TDPBSSD as (A xor 0x80) . B - 128 sum B): over the emulated
 * intrinsics on every host, and natively where the CPU has AVX-512 VNNI. */
static void test_vnni_int8_loop(void **state)
{
    (void)state;
    need_avx2();
    int8_loop_cases(nb_amx_vnni_emu_linear_int8, "the int8 loop on emulated zmm registers");
    linear_fn native = vnni_native();
    if (native)
        int8_loop_cases(native, "the int8 loop on zmm registers (avx512 vnni)");
    else if (nb_kernels_cpu_isa() >= NB_ISA_AVX512BF16 && __builtin_cpu_supports("avx512vnni"))
        fail_msg("the CPU has AVX-512 VNNI but the avx512bf16 path's linear is not the int8 loop "
                 "on zmm registers (nb_dispatch.c)");
    else
        print_message("no AVX-512 VNNI: the native int8 loop on zmm registers not run\n");
}

/* Behind the public calls: the thread pool's row chunks on 2 threads, a
 * batch sharing X (the per-call activation copy is made once per thread
 * and reused across chunks and matrices) and calls in a row on one buffer
 * refilled in place (new values must not meet the old copy). Both
 * emulated paths; the AMX one also hands short calls to the AVX-512 one. */
static void test_emulated_behind_public_calls(void **state)
{
    (void)state;
    need_avx2();
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    static const linear_fn fns[] = {nb_avx512_emu_linear_bf16, nb_amx_emu_linear_bf16};
    enum { COUNT = 3, COLS = 96, N = 40 };
    static const int rows[COUNT] = {200, 64, 37};
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    for (int f = 0; f < 2; f++) {
        emu = nb_kernels_avx2;
        emu.linear_bf16 = fns[f];
        emu.wmat_finish = nb_avx512_emu_wmat_finish;
        nb_wmat *W[COUNT], *Wv[COUNT];
        nb_bf16 *ref[COUNT], *got[COUNT];
        for (int k = 0; k < COUNT; k++) {
            uint8_t *data = kt_rows(NB_W_BF16, rows[k], COLS);
            assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
            W[k] = kt_wmat_from(NB_W_BF16, rows[k], COLS, data);
            nb_kernels_use_table(&emu);
            Wv[k] = kt_wmat_from(NB_W_BF16, rows[k], COLS, data);
            assert_true(W[k] && Wv[k] && Wv[k]->layout == NB_LAYOUT_VNNI16);
            free(data);
            ref[k] = malloc(sizeof(nb_bf16) * N * rows[k]);
            got[k] = malloc(sizeof(nb_bf16) * N * rows[k]);
        }
        nb_bf16 *X = malloc(sizeof(nb_bf16) * N * COLS);
        /* each call refills X in place: same pointer, same shape the last time */
        static const int ns[] = {N - 1, N, N};
        for (int call = 0; call < 3; call++) {
            int n = ns[call];
            kt_fill_bf16(X, (size_t)N * COLS, 1.0f);
            assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
            nb_linear_bf16_batch((const nb_wmat *const *)W, ref, COUNT, X, n);
            nb_kernels_use_table(&emu);
            nb_linear_bf16_batch((const nb_wmat *const *)Wv, got, COUNT, X, n);
            for (int k = 0; k < COUNT; k++) {
                float *mag = kt_abs_dots(W[k], X, n);
                for (int i = 0; i < n * rows[k]; i++)
                    mag[i] *= (float)COLS * 6e-8f;
                if (kt_check_bf16_tol(f ? "amx-bf16 batch" : "avx512bf16 batch", ref[k],
                                      got[k], (size_t)n * rows[k], mag, 0))
                    fail_msg("emulated path %d, call %d, matrix %d, n=%d", f, call, k, n);
                free(mag);
            }
        }
        nb_kernels_use_table(NULL);
        free(X);
        for (int k = 0; k < COUNT; k++) {
            nb_wmat_free(W[k]);
            nb_wmat_free(Wv[k]);
            free(ref[k]);
            free(got[k]);
        }
    }
}

/* Rows of linear(W, X, N) against linear(W, X row i, 1) for each i, under the active table,
 * with fp32 outputs (before the bf16 rounding that would hide most differences): the number
 * of outputs that differ in any bit. */
static size_t rows_vs_decode(const nb_wmat *W, const nb_bf16 *X, int n, int cols)
{
    int rows = nb_wmat_rows(W);
    float *all = malloc(sizeof(float) * (size_t)n * rows);
    float *one = malloc(sizeof(float) * (size_t)n * rows);
    assert_true(all && one);
    nb_linear_bf16_f32out(W, X, n, all);
    for (int i = 0; i < n; i++)
        nb_linear_bf16_f32out(W, X + (size_t)i * cols, 1, one + (size_t)i * rows);
    size_t diff = 0;
    for (size_t i = 0; i < (size_t)n * rows; i++)
        diff += memcmp(&all[i], &one[i], sizeof(float)) != 0;
    free(all);
    free(one);
    return diff;
}

/* The decode-path check's premise (verify/nb_localize.c): under nb_kernels_row_exact every
 * path computes each row of a prefill-sized linear as its decode step (n = 1) does, bit for
 * bit: portable and AVX2 (bf16 and the block types), the AVX-512 BF16 kernel and the AMX
 * table (both emulated here; the real AVX-512 one too where the CPU has it). Without it the
 * AMX tile kernel's rows differ from its decode kernel's (another summation order): what
 * made a clean AMX engine's decode and prefill differ by 0.3-0.6 logits. */
static void test_row_exact_on_every_path(void **state)
{
    (void)state;
    need_avx2();
    nb_err err = {0};
    assert_int_equal(nb_kernels_init(2, &err), NB_OK);
    enum { ROWS = 64, COLS = 576, N = 37 };
    nb_bf16 *X = malloc(sizeof(nb_bf16) * N * COLS);
    kt_fill_bf16(X, (size_t)N * COLS, 1.0f);
    static const nb_wtype types[] = {NB_W_BF16, NB_W_Q4_1, NB_W_Q8_0, NB_W_Q5_0};
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    /* 0 portable, 1 avx2, 2 avx512bf16 (real: with AVX-512 VNNI the block types' prefill on the
     * int8 loop on zmm registers), 3 avx512 (emulated), 4 amx (emulated), 5 amx with the int8
     * tiles for the block types (emulated), 6 the int8 loop on zmm registers (emulated; no
     * linear_bf16_rows, as the avx512bf16 table has none) */
    for (int p = 0; p < 7; p++) {
        if (p == 2 && nb_kernels_cpu_isa() < NB_ISA_AVX512BF16)
            continue;
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            if (((p == 3 || p == 4) && types[t] != NB_W_BF16) ||
                ((p == 5 || p == 6) && types[t] == NB_W_BF16))
                continue; /* the block types run on the AVX2 kernels there */
            if (p < 3) {
                assert_int_equal(nb_kernels_set_isa(p == 0   ? NB_ISA_PORTABLE
                                                    : p == 1 ? NB_ISA_AVX2
                                                             : NB_ISA_AVX512BF16,
                                                    &err),
                                 NB_OK);
            } else {
                emu = nb_kernels_avx2;
                emu.linear_bf16 = p == 3   ? nb_avx512_emu_linear_bf16
                                  : p == 4 ? nb_amx_emu_linear_bf16
                                  : p == 5 ? nb_amx_emu_linear_int8
                                           : nb_amx_vnni_emu_linear_int8;
                emu.linear_bf16_rows = p == 3 || p == 6 ? NULL : nb_avx512_emu_linear_bf16;
                emu.wmat_finish = nb_avx512_emu_wmat_finish;
                nb_kernels_use_table(&emu);
            }
            nb_wmat *W = kt_wmat(types[t], ROWS, COLS);
            assert_non_null(W);
            nb_kernels_row_exact(1);
            size_t exact = rows_vs_decode(W, X, N, COLS);
            nb_kernels_row_exact(0);
            size_t plain = rows_vs_decode(W, X, N, COLS);
            print_message("path %d %s: %zu of %d outputs differ from the decode kernel's "
                          "(row-exact), %zu (plain)\n", p, nb_wtype_name(types[t]), exact,
                          N * ROWS, plain);
            if (exact)
                fail_msg("path %d %s: row-exact rows differ from the decode step's", p,
                         nb_wtype_name(types[t]));
            if (p == 4 && !plain) /* (the int8 tiles' integer sums may well agree) */
                fail_msg("the AMX tile kernel's rows equal its decode kernel's: the premise of "
                         "linear_bf16_rows is gone");
            nb_wmat_free(W);
            nb_kernels_use_table(NULL);
        }
    }
    free(X);
}

/* The engine end to end on the tiny bf16 model (dim 64, ffn 128, tied
 * head): a 40-token prefill (AMX tiles in every linear) and 3 decode steps
 * (the AVX-512 kernel) on the emulated table against portable: the VNNI16
 * finish, embedding rows read back from it, batches and the pool, wired as
 * the dispatcher wires them. Rounding differences would cross bf16
 * roundings layer after layer, so the bound is on the logits as a whole:
 * cosine >= 0.9999 and the same top token. (The tiny weights are k/256,
 * so its dots are exact in fp32 and the paths in fact agree bit for bit.) */
static void engine_logits_as(const nb_model *m, const nb_kernel_table *t, int threads,
                             nb_dtype dtype, int n, float *out)
{
    nb_err err = {0};
    int vocab = nb_model_cfg(m)->vocab;
    if (t)
        nb_kernels_use_table(t);
    else
        assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
    nb_engine_opts o;
    nb_engine_opts_default(&o);
    o.dtype = dtype;
    o.max_seq = 64;
    o.threads = threads;
    nb_engine *e;
    if (nb_engine_setup(m, &o, &e, &err))
        fail_msg("engine setup: %s", err.msg);
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = 3 + (i * 37) % 250;
    const float *logits;
    assert_int_equal(nb_engine_prefill(e, ids, n, &logits, &err), NB_OK);
    memcpy(out, logits, sizeof(float) * (size_t)vocab);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(nb_engine_decode_step(e, ids[s], n + s, &logits, &err), NB_OK);
        memcpy(out + (size_t)(s + 1) * vocab, logits, sizeof(float) * (size_t)vocab);
    }
    nb_engine_free(e);
    nb_kernels_use_table(NULL);
}

static void engine_logits(const nb_model *m, const nb_kernel_table *t, int threads, float *out)
{
    engine_logits_as(m, t, threads, NB_DTYPE_BF16, 40, out);
}

/* The engine with its quantized weights kept (dtype native) on the AVX2 table, and on it with
 * the emulated AMX-INT8 linear: every linear of the n-token prefill on the int8 tiles, the
 * decode steps on the AVX2 kernels. Both compute every quantized linear as the reference does
 * and share every other op, so the logits must agree bit for bit. 0 when they do. */
static int engine_int8_vs_avx2(const nb_model *m, linear_fn lin, int threads, int n,
                               const char *what)
{
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    nb_err err = {0};
    size_t cnt = (size_t)4 * nb_model_cfg(m)->vocab;
    float *ref = malloc(sizeof(float) * cnt), *got = malloc(sizeof(float) * cnt);
    assert_true(ref && got);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_AVX2, &err), NB_OK);
    engine_logits_as(m, nb_kernels_active(), threads, NB_DTYPE_NATIVE, n, ref);
    emu = *nb_kernels_active();
    emu.linear_bf16 = lin;
    engine_logits_as(m, &emu, threads, NB_DTYPE_NATIVE, n, got);
    int bad = memcmp(ref, got, sizeof(float) * cnt) != 0;
    if (bad)
        print_error("%s native, %d threads: logits on the int8 loop differ from avx2's\n", what,
                    threads);
    free(ref);
    free(got);
    assert_int_equal(nb_kernels_set_isa(NB_ISA_PORTABLE, &err), NB_OK);
    return bad;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        b = x[i] > x[b] ? i : b;
    return b;
}

/* The tiny model as a GGUF of `to` in a new temporary directory dir (the caller removes it with
 * nb_tiny_rmtree), opened. */
static nb_model *tiny_open(nb_tiny_opts to, char *dir, size_t dn)
{
    char path[4200];
    assert_int_equal(nb_tiny_mkdtemp(dir, dn, "test_kernels_emu"), 0);
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    assert_int_equal(nb_tiny_write_gguf(&to, path), 0);
    nb_model *m = NULL;
    nb_err err = {0};
    if (nb_model_open(path, &m, &err))
        fail_msg("%s: %s", path, err.msg);
    return m;
}

static void test_engine_on_emulated_paths(void **state)
{
    (void)state;
    need_avx2();
    char dir[4096];
    nb_model *m = tiny_open((nb_tiny_opts){.seed = 7, .type = NB_TT_BF16}, dir, sizeof dir);
    enum { STEPS = 4 };
    static float ref[STEPS * NB_TINY_VOCAB], got[STEPS * NB_TINY_VOCAB];
    engine_logits(m, NULL, 2, ref);
    static const linear_fn fns[] = {nb_avx512_emu_linear_bf16, nb_amx_emu_linear_bf16};
    static nb_kernel_table emu; /* static: still valid if a failed check skips the restore */
    /* 1 thread: whole matrices per call, so every C tile of a 32x32 block
     * is used; 2: the pool's 16-row chunks */
    for (int c = 0; c < 4; c++) {
        int f = c / 2, threads = 1 + c % 2;
        emu = nb_kernels_avx2;
        emu.linear_bf16 = fns[f];
        emu.wmat_finish = nb_avx512_emu_wmat_finish;
        engine_logits(m, &emu, threads, got);
        nb_cos_stats cs; /* cosine per step (row) of the logits */
        nb_cos_stats_rows(ref, got, STEPS, NB_TINY_VOCAB, &cs);
        if (!(cs.min >= 0.9999))
            fail_msg("%s (emulated) engine, %d threads: logits cosine %.7f",
                     f ? "amx-bf16" : "avx512bf16", threads, cs.min);
        for (int s = 0; s < STEPS; s++)
            assert_int_equal(argmax(ref + (size_t)s * NB_TINY_VOCAB, NB_TINY_VOCAB),
                             argmax(got + (size_t)s * NB_TINY_VOCAB, NB_TINY_VOCAB));
    }
    nb_model_close(m);
    nb_tiny_rmtree(dir);
}

/* Quantized prefill on the int8 tile loop inside the engine: the tiny model as Q4_1 (its
 * embedding Q8_0) and, where the source tree has it (NB_SRC, models/), Gemma 3 270M's GGUF
 * (Q5_0, Q4_K, Q6_K, Q8_0 at their real shapes), 1 and 2 threads, against the AVX2 path bit
 * for bit: on the emulated AMX tiles, and on zmm registers (emulated for the tiny model; Gemma
 * natively where the CPU has AVX-512 VNNI, else emulated). */
static void test_engine_on_int8_tiles(void **state)
{
    (void)state;
    need_avx2();
    char dir[4096], path[4200];
    nb_err err = {0};
    nb_model *m = tiny_open((nb_tiny_opts){.seed = 11, .type = NB_TT_Q4_1}, dir, sizeof dir);
    linear_fn vnni = vnni_native();
    if (!vnni)
        vnni = nb_amx_vnni_emu_linear_int8;
    int bad = engine_int8_vs_avx2(m, nb_amx_emu_linear_int8, 1, 40, "tiny q4_1, amx tiles") +
              engine_int8_vs_avx2(m, nb_amx_emu_linear_int8, 2, 40, "tiny q4_1, amx tiles") +
              engine_int8_vs_avx2(m, nb_amx_vnni_emu_linear_int8, 2, 40, "tiny q4_1, zmm tiles");
    nb_model_close(m);
    nb_tiny_rmtree(dir);
    const char *src = getenv("NB_SRC");
    if (src && *src) {
        snprintf(path, sizeof path, "%s/models/gemma-3-270m-q4_k_m.gguf", src);
        if (!access(path, R_OK)) {
            if (nb_model_open(path, &m, &err))
                fail_msg("%s: %s", path, err.msg);
            /* 17: a partial A tile */
            bad += engine_int8_vs_avx2(m, nb_amx_emu_linear_int8, 2, 17, "gemma3, amx tiles");
            bad += engine_int8_vs_avx2(m, vnni, 2, 17, "gemma3, zmm tiles");
            nb_model_close(m);
        } else {
            print_message("no %s: Gemma 3 not run\n", path);
        }
    }
    if (bad)
        fail_msg("%d engine runs differ", bad);
}

/* The emulated TDPBF16PS itself: the documented DAZ/FTZ and one rounding
 * per product step. */
static void test_amx_emulated_semantics(void **state)
{
    (void)state;
    const nb_bf16 one = nb_f32_to_bf16(1.0f), denorm = 0x0001, tiny = 0x0080; /* 2^-126 */
    nb_bf16 a[2] = {one, one}, b[2] = {nb_f32_to_bf16(3.0f), nb_f32_to_bf16(-0.5f)};
    assert_true(nb_amx_emu_dot_pair(1.0f, a, b) == 3.5f);
    nb_bf16 ad[2] = {denorm, 0}, bd[2] = {nb_f32_to_bf16(1e30f), 0};
    assert_true(nb_amx_emu_dot_pair(0.0f, ad, bd) == 0.0f); /* DAZ: not 9e-16 */
    nb_bf16 at[2] = {tiny, 0}, bt[2] = {nb_f32_to_bf16(0.5f), 0};
    assert_true(nb_amx_emu_dot_pair(0.0f, at, bt) == 0.0f); /* FTZ: 2^-127 flushed */
    /* 1 + 2^-24 + 2^-24 rounds twice (each to 1) under one rounding per step */
    nb_bf16 ar[2] = {nb_f32_to_bf16(0x1p-24f), nb_f32_to_bf16(0x1p-24f)}, br[2] = {one, one};
    assert_true(nb_amx_emu_dot_pair(1.0f, ar, br) == 1.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx512_linear_emulated),
        cmocka_unit_test(test_avx512_quantized_emulated),
        cmocka_unit_test(test_amx_linear_emulated),
        cmocka_unit_test(test_amx_int8_emulated),
        cmocka_unit_test(test_vnni_int8_loop),
        cmocka_unit_test(test_avx512_kquant_emulated),
        cmocka_unit_test(test_attention_emulated),
        cmocka_unit_test(test_emulated_behind_public_calls),
        cmocka_unit_test(test_engine_on_emulated_paths),
        cmocka_unit_test(test_engine_on_int8_tiles),
        cmocka_unit_test(test_row_exact_on_every_path),
        cmocka_unit_test(test_amx_emulated_semantics),
    };
    int rc = tu_run_group(tests, NULL, NULL);
    nb_kernels_shutdown();
    return rc;
}
