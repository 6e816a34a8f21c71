/* nb_dump_tensor: writes one model weight, rows in HF order, as raw bf16 (or
 * fp32) bytes, to compare the loader bit for bit against transformers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_model.h"

static const nb_tensor *pick(const nb_model *m, const char *which)
{
    if (!strcmp(which, "embd"))
        return nb_model_tok_embd(m);
    if (!strcmp(which, "out_norm"))
        return nb_model_out_norm(m);
    if (!strcmp(which, "lm_head"))
        return nb_model_lm_head(m);
    char *end;
    long l = strtol(which, &end, 10);
    if (end == which || *end != '.')
        return NULL;
    const nb_layer_weights *w = nb_model_layer(m, (int)l);
    if (!w)
        return NULL;
    const char *n = end + 1;
    static const char *names[9] = {"attn_norm", "wq", "wk", "wv", "wo",
                                   "ffn_norm", "w_gate", "w_up", "w_down"};
    const nb_tensor *t[9] = {&w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo,
                             &w->ffn_norm, &w->w_gate, &w->w_up, &w->w_down};
    for (int k = 0; k < 9; k++)
        if (!strcmp(n, names[k]))
            return t[k];
    return NULL;
}

int main(int argc, char **argv)
{
    int f32 = argc > 1 && !strcmp(argv[1], "--f32");
    if (argc - f32 != 4) {
        fprintf(stderr, "usage: nb_dump_tensor [--f32] MODEL WHICH OUT\n"
                        "  WHICH: embd | out_norm | lm_head | L.{attn_norm,wq,wk,wv,wo,"
                        "ffn_norm,w_gate,w_up,w_down}\n");
        return 2;
    }
    const char *path = argv[1 + f32], *which = argv[2 + f32], *out = argv[3 + f32];
    nb_model *m;
    nb_err err;
    if (nb_model_open(path, &m, &err)) {
        fprintf(stderr, "nb_dump_tensor: %s\n", err.msg);
        return 1;
    }
    const nb_tensor *t = pick(m, which);
    if (!t) {
        fprintf(stderr, "nb_dump_tensor: unknown weight '%s'\n", which);
        nb_model_close(m);
        return 2;
    }
    FILE *f = fopen(out, "wb");
    size_t es = f32 ? 4 : 2;
    void *row = malloc((size_t)t->cols * es);
    int ok = f && row;
    for (int64_t r = 0; ok && r < t->rows; r++) {
        if (f32)
            nb_tensor_row_f32(t, r, row);
        else
            nb_tensor_row_bf16(t, r, row);
        ok = fwrite(row, es, (size_t)t->cols, f) == (size_t)t->cols;
    }
    if (f)
        ok &= fclose(f) == 0;
    printf("%s %s %lld %lld\n", t->name, nb_ttype_name(t->type), (long long)t->rows,
           (long long)t->cols);
    free(row);
    nb_model_close(m);
    if (!ok) {
        fprintf(stderr, "nb_dump_tensor: cannot write %s\n", out);
        return 1;
    }
    return 0;
}
