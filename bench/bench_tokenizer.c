/* bench_tokenizer: our tokenizer's load and encode times on a GGUF's vocabulary over JSON lists
 * of texts; bench_tokenizer_vs_hf.sh runs HF's tokenizer on the same texts for the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "nb_gguf.h"
#include "nb_json.h"
#include "nb_time.h"
#include "nb_tokenizer.h"

#define REPS 7

typedef struct text {
    const char *s;
    size_t n;
} text;

/* Best of REPS: encode every text once (specials parsed, BOS as the model adds it). */
static int time_all(const nb_tokenizer *t, const text *tx, size_t n, double *best,
                    size_t *tokens)
{
    *best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = nb_now_ms();
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t *ids;
            size_t k;
            nb_err err = {0};
            if (nb_tokenizer_encode(t, tx[i].s, tx[i].n, 1, 1, &ids, &k, &err)) {
                fprintf(stderr, "text %zu: %s\n", i, err.msg);
                return -1;
            }
            total += k;
            free(ids);
        }
        double dt = nb_now_ms() - t0;
        if (dt < *best)
            *best = dt;
        *tokens = total;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf TEXTS.json...\n", argv[0]);
        return 2;
    }
    nb_err err = {0};
    nb_gguf *g = NULL;
    nb_tokenizer *t = NULL;
    json_object *docs[16];
    int nd = 0, rc = 2;
    size_t n = 0, cap = 0, joined = 0;
    text *tx = NULL;
    char *all = NULL;
    double t0 = nb_now_ms();
    if (nb_gguf_open(argv[1], &g, &err) || nb_tokenizer_from_gguf(g, &t, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    double load = nb_now_ms() - t0;
    for (int a = 2; a < argc && nd < 16; a++) {
        if (nb_json_read_file(argv[a], 64u << 20, &docs[nd], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            goto out;
        }
        json_object *arr = docs[nd++];
        size_t m = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
        for (size_t i = 0; i < m; i++) {
            json_object *s = json_object_array_get_idx(arr, i);
            if (!json_object_is_type(s, json_type_string))
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                text *nt = realloc(tx, cap * sizeof *nt);
                if (!nt)
                    goto out;
                tx = nt;
            }
            tx[n].s = json_object_get_string(s);
            tx[n].n = (size_t)json_object_get_string_len(s);
            joined += tx[n++].n + 1;
        }
    }
    /* all texts joined by newlines: one long prompt */
    if (!(all = malloc(joined + 1)))
        goto out;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(all + k, tx[i].s, tx[i].n);
        k += tx[i].n;
        all[k++] = '\n';
    }
    text one = {all, k};
    double each, whole;
    size_t toks_each, toks_whole;
    if (time_all(t, tx, n, &each, &toks_each) || time_all(t, &one, 1, &whole, &toks_whole))
        goto out;
    printf("npubench load_ms %.1f texts %zu tokens %zu encode_ms %.3f joined_bytes %zu "
           "joined_tokens %zu joined_ms %.3f\n", load, n, toks_each, each, k, toks_whole, whole);
    rc = 0;
out: /* one exit: every error path frees what was opened (checked under LeakSanitizer) */
    free(all);
    free(tx);
    for (int i = 0; i < nd; i++)
        json_object_put(docs[i]);
    nb_tokenizer_free(t);
    nb_gguf_close(g);
    return rc;
}
