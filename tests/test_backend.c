/* test_backend: the backend tables (engine/nb_backend.h): every registered table keeps the
 * promises of its capabilities, lookups and messages come from the registry, and a deployment
 * runs through its table alone (a wrapping table sees every step; missing capabilities refuse). */
#include "testutil.h"

#include "nb_backend.h"
#include "nb_deploy.h"
#include "nb_generate.h"
#include "nb_kernels.h"
#include "tools/nb_tiny.h"

/* What each capability promises of the table; a new backend is checked here by its entry. */
static void test_tables_keep_their_caps(void **state)
{
    (void)state;
    const nb_backend_ops *ops;
    size_t n = 0;
    for (size_t i = 0; (ops = nb_backend_at(i)); i++, n++) {
        assert_non_null(ops->name);
        assert_ptr_equal(nb_backend_find(ops->name), ops); /* names are unique */
        if (ops->caps & NB_BACKEND_WHOLE_JOB) {
            assert_null(ops->open);
            assert_false(ops->caps & (NB_BACKEND_STEPS | NB_BACKEND_LAYER_STATES |
                                      NB_BACKEND_REPREFILL | NB_BACKEND_PROFILE));
        } else {
            assert_non_null(ops->open);
        }
        if (ops->caps & NB_BACKEND_STEPS) {
            assert_non_null(ops->close);
            assert_non_null(ops->prefill);
            assert_non_null(ops->decode_step);
            assert_non_null(ops->max_seq);
            assert_non_null(ops->resident_bytes);
        }
        if (ops->caps & (NB_BACKEND_LAYER_STATES | NB_BACKEND_REPREFILL | NB_BACKEND_PROFILE))
            assert_true(ops->caps & NB_BACKEND_STEPS);
        if (ops->caps & NB_BACKEND_LAYER_STATES) {
            assert_non_null(ops->set_layer_hook);
            assert_non_null(ops->set_stage_hook);
        }
        if (ops->caps & NB_BACKEND_REPREFILL)
            assert_non_null(ops->prefill_logits);
        if (ops->caps & NB_BACKEND_PROFILE) {
            assert_non_null(ops->profile);
            assert_non_null(ops->profile_reset);
            assert_non_null(ops->profile_stats);
        }
    }
    assert_true(n >= 3);
    assert_ptr_equal(nb_backend_at(0), nb_backend_default());
    assert_string_equal(nb_backend_default()->name, "cpu");
    assert_null(nb_backend_find("gpu"));
    assert_null(nb_backend_find("CPU")); /* exact, as files and the wire spell it */
    assert_null(nb_backend_find(NULL));
    assert_true(nb_backend_can(nb_backend_find("exec"), NB_BACKEND_WHOLE_JOB));
    assert_false(nb_backend_can(NULL, 0));
}

static void test_names_and_lookup(void **state)
{
    (void)state;
    char buf[128];
    nb_backend_names(0, 0, NULL, buf, sizeof buf);
    assert_string_equal(buf, "cpu, xrt, exec or air");
    nb_backend_names(NB_BACKEND_DEVICE, 0, ":N", buf, sizeof buf);
    assert_string_equal(buf, "cpu:N or xrt:N");
    nb_backend_names(0, NB_BACKEND_WHOLE_JOB, NULL, buf, sizeof buf);
    assert_string_equal(buf, "cpu, xrt or air");
    nb_backend_names(NB_BACKEND_STEPS, 0, NULL, buf, 2); /* truncated, still terminated */
    assert_string_equal(buf, "c");

    const nb_backend_ops *ops;
    nb_err err;
    assert_int_equal(nb_backend_lookup("xrt", 0, 0, "x: ", &ops, &err), NB_OK);
    assert_ptr_equal(ops, nb_backend_find("xrt"));
    assert_int_equal(nb_backend_lookup("gpu", 0, 0, "deployments[0].", &ops, &err), NB_EINVAL);
    assert_null(ops);
    assert_string_equal(err.msg, "deployments[0].backend 'gpu': expected cpu, xrt, exec or air");
    assert_int_equal(nb_backend_lookup("exec", 0, NB_BACKEND_WHOLE_JOB, NULL, &ops, &err),
                     NB_EINVAL);
    assert_string_equal(err.msg, "backend 'exec': expected cpu, xrt or air");
}

/* exec runs whole jobs: nb_deploy_open refuses it as it refuses an unknown name; xrt without
 * XRT answers unavailable from its probe, before any model is looked at. */
static void test_open_refusals(void **state)
{
    (void)state;
    nb_deploy_spec s;
    nb_deploy *d = NULL;
    nb_err err;
    nb_deploy_spec_default(&s);
    assert_string_equal(s.backend, "cpu");
    snprintf(s.backend, sizeof s.backend, "exec");
    assert_int_equal(nb_deploy_open(&s, &d, &err), NB_EINVAL);
    assert_null(d);
    assert_string_equal(err.msg, "backend 'exec': expected cpu, xrt or air");
    snprintf(s.backend, sizeof s.backend, "gpu");
    assert_int_equal(nb_deploy_open(&s, &d, &err), NB_EINVAL);
    assert_string_equal(err.msg, "backend 'gpu': expected cpu, xrt or air");
    unsetenv("XILINX_XRT");
    snprintf(s.backend, sizeof s.backend, "xrt");
    snprintf(s.model, sizeof s.model, "/nonexistent/model.gguf");
    assert_int_equal(nb_deploy_open(&s, &d, &err), NB_EUNAVAIL);
    assert_null(d);
}

/* ---- a deployment through its table -------------------------------------------------- */

/* A backend that only has steps: it counts calls and hands them to the cpu table, as an
 * out-of-process backend (air) would hand them to its host. */
static struct {
    const nb_backend_ops *cpu;
    int prefills, decodes, last_pos;
} wrap;

static nb_code w_prefill(void *be, const int32_t *ids, int n, const float **logits, nb_err *err)
{
    wrap.prefills++;
    return wrap.cpu->prefill(be, ids, n, logits, err);
}

static nb_code w_decode(void *be, int32_t token, int pos, const float **logits, nb_err *err)
{
    wrap.decodes++;
    wrap.last_pos = pos;
    return wrap.cpu->decode_step(be, token, pos, logits, err);
}

static int w_max_seq(const void *be) { return wrap.cpu->max_seq(be); }

static const nb_backend_ops steps_only = {
    .name = "steps-only",
    .caps = NB_BACKEND_STEPS,
    .prefill = w_prefill,
    .decode_step = w_decode,
    .max_seq = w_max_seq,
};

static int layers_seen;

static void on_layer(void *user, int layer, int pos0, int n, int dim, const float *hidden)
{
    (void)user, (void)pos0, (void)n, (void)dim, (void)hidden;
    layers_seen |= 1 << layer;
}

static void test_deploy_through_table(void **state)
{
    (void)state;
    char path[1000];
    assert_true(snprintf(path, sizeof path, "%.900s/tiny-q8.gguf", tu_group_tmp()) < 1000);
    nb_tiny_opts to = {.seed = 5, .type = NB_TT_Q8_0};
    assert_int_equal(nb_tiny_write_gguf(&to, path), 0);
    nb_deploy_spec s;
    nb_deploy_spec_default(&s);
    snprintf(s.model, sizeof s.model, "%.999s", path);
    s.dtype = NB_DTYPE_F32;
    s.threads = 1;
    nb_deploy *d = NULL;
    nb_err err;
    assert_int_equal(nb_deploy_open(&s, &d, &err), NB_OK);
    assert_ptr_equal(d->ops, nb_backend_find("cpu"));
    char desc[256];
    nb_deploy_describe(d, desc, sizeof desc);
    assert_non_null(strstr(desc, " cpu/f32"));
    assert_int_equal(nb_deploy_vocab(d), NB_TINY_VOCAB);
    assert_true(nb_deploy_max_seq(d) > 0 && nb_deploy_max_seq(d) <= NB_TINY_CTX);
    assert_true(nb_deploy_resident_bytes(d) > 0);

    const int32_t ids[] = {1, 72, 101, 108, 108, 111};
    nb_gen_opts go = {.n_tokens = 5, .k = 3};
    nb_gen ref, got;
    assert_int_equal(nb_deploy_profile(d, 1, &err), NB_OK);
    assert_int_equal(nb_generate(d, ids, 6, &go, &ref, &err), NB_OK);
    assert_int_equal(nb_deploy_profile(d, 0, &err), NB_OK);
    assert_int_equal(nb_deploy_profile_stats(d)[NB_OP_LM_HEAD].calls, 5);
    assert_int_equal(nb_deploy_set_layer_hook(d, on_layer, NULL, &err), NB_OK);
    const float *logits;
    assert_int_equal(nb_deploy_prefill(d, ids, 6, &logits, &err), NB_OK);
    assert_int_equal(nb_deploy_set_layer_hook(d, NULL, NULL, &err), NB_OK);
    assert_int_equal(layers_seen, (1 << NB_TINY_LAYERS) - 1);

    /* The same deployment behind a table with steps only: the same tokens, every step
     * through the table, and what it lacks refused by name. */
    wrap.cpu = d->ops;
    d->ops = &steps_only;
    assert_int_equal(nb_generate(d, ids, 6, &go, &got, &err), NB_OK);
    assert_int_equal(wrap.prefills, 1);
    assert_int_equal(wrap.decodes, 4);
    assert_int_equal(wrap.last_pos, 6 + 4 - 1);
    assert_int_equal(got.n_steps, ref.n_steps);
    for (int i = 0; i < got.n_steps; i++)
        assert_memory_equal(&got.steps[i], &ref.steps[i], sizeof got.steps[i]);
    assert_int_equal(nb_deploy_set_layer_hook(d, on_layer, NULL, &err), NB_EUNSUPPORTED);
    assert_string_equal(err.msg, "backend 'steps-only' has no per-layer states");
    assert_int_equal(nb_deploy_set_layer_hook(d, NULL, NULL, &err), NB_OK);
    assert_int_equal(nb_deploy_set_stage_hook(d, NULL, NULL, &err), NB_OK);
    float row[NB_TINY_VOCAB];
    assert_int_equal(nb_deploy_prefill_logits(d, ids, 2, 1, row, &err), NB_EUNSUPPORTED);
    assert_string_equal(err.msg, "backend 'steps-only' has no cache-free re-prefill");
    assert_int_equal(nb_deploy_profile(d, 1, &err), NB_EUNSUPPORTED);
    assert_null(nb_deploy_profile_stats(d));
    assert_int_equal(nb_deploy_resident_bytes(d), 0);
    d->ops = wrap.cpu;
    nb_gen_free(&ref);
    nb_gen_free(&got);
    nb_deploy_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_keep_their_caps),
        cmocka_unit_test(test_names_and_lookup),
        cmocka_unit_test(test_open_refusals),
        cmocka_unit_test(test_deploy_through_table),
    };
    int rc = tu_run_group(tests, tu_group_setup, tu_group_teardown);
    nb_kernels_shutdown();
    return rc;
}
