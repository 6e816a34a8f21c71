/* nb_cmd_tokenize: `npubench tokenize` — the ids and pieces our tokenizer gives a text or each
 * line of a prompt file, for any model, as verify encodes them (so they can be held against HF's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_cmd.h"
#include "nb_deploy.h"
#include "nb_json.h"
#include "nb_prompts.h"

/* A piece as a JSON string literal: quoted, every byte that is not printable ASCII escaped
 * (\uXXXX for control bytes, \xHH for bytes >= 0x80, which may be part of a character the
 * next piece completes), so a terminal or a diff never sees raw control bytes. */
static void put_piece(FILE *f, const char *b, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else if (c >= 0x80)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* One text: "text N: C ids", then one "  id  piece" line per id; or, with ids_only, the ids
 * on one line (what bench/bench_tokenizer_vs_hf.sh compares). */
static nb_code show(const nb_tokenizer *t, int index, const char *text, int add_bos,
                    int special, int ids_only, nb_err *err)
{
    int32_t *ids = NULL;
    size_t n = 0;
    nb_code rc = nb_tokenizer_encode(t, text, strlen(text), add_bos, special, &ids, &n, err);
    if (rc)
        return nb_err_prefix(err, "text %d: ", index);
    if (ids_only) {
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    } else {
        printf("text %d: %zu ids\n", index, n);
        for (size_t i = 0; i < n && !rc; i++) {
            const char *b;
            size_t len;
            if ((rc = nb_tokenizer_piece(t, ids[i], &b, &len, err)) == NB_OK) {
                printf("  %-7d ", ids[i]);
                put_piece(stdout, b, len);
                printf("\n");
            }
        }
    }
    free(ids);
    return rc;
}

/* A JSON array's strings (other members skipped, as the HF side of
 * bench/bench_tokenizer_vs_hf.sh skips them) as a prompt list; ps->items owned. */
static nb_code load_json_texts(const char *path, nb_prompts *ps, nb_err *err)
{
    json_object *arr = NULL;
    nb_code rc = nb_json_read_file(path, 64u << 20, &arr, err);
    if (rc)
        return rc;
    if (!json_object_is_type(arr, json_type_array)) {
        json_object_put(arr);
        return nb_err_set(err, NB_EFORMAT, "%s: not a JSON array of strings", path);
    }
    size_t n = json_object_array_length(arr);
    memset(ps, 0, sizeof *ps);
    ps->items = calloc(n ? n : 1, sizeof *ps->items);
    int oom = !ps->items;
    for (size_t i = 0; !oom && i < n; i++) {
        json_object *s = json_object_array_get_idx(arr, i);
        if (!json_object_is_type(s, json_type_string))
            continue;
        oom = !(ps->items[ps->n] = strdup(json_object_get_string(s)));
        ps->n += !oom;
    }
    json_object_put(arr);
    if (oom) {
        nb_prompts_free(ps);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    return NB_OK;
}

int nb_cmd_tokenize(int argc, char **argv)
{
    const char *model = "instruct", *text = NULL, *prompts_file = NULL, *texts_json = NULL;
    int help = 0, no_bos = 0, split_special = 0, ids_only = 0, chat = 0;
    nb_opt opts[] = {
        {"model", NB_OPT_STR, &model, 0, 0, "preset (instruct, base, gemma3) or a model path"},
        {"text", NB_OPT_STR, &text, 0, 0, "the text to encode"},
        {"prompts-file", NB_OPT_STR, &prompts_file, 0, 0, "encode each prompt of a set"},
        {"texts-json", NB_OPT_STR, &texts_json, 0, 0, "encode each string of a JSON array"},
        {"chat", NB_OPT_FLAG, &chat, 0, 0, "render the model's chat template around each text first"},
        {"no-bos", NB_OPT_FLAG, &no_bos, 0, 0, "without the model's special tokens (HF add_special_tokens=False)"},
        {"split-special", NB_OPT_FLAG, &split_special, 0, 0, "special-token text as plain text"},
        {"ids", NB_OPT_FLAG, &ids_only, 0, 0, "only the ids, one line per text"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *usage = "npubench tokenize [--model M] (--text T | --prompts-file F | "
                        "--texts-json F) [options]\n"
                        "  prints, per text, the ids our tokenizer gives (as verify encodes the "
                        "prompts:\n  the model's special tokens, special-token text parsed) and "
                        "each id's piece\n  (raw bytes, escaped: \\xHH for bytes >= 0x80)";
    int rc = nb_cmd_parse("tokenize", usage, argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL,
                          &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!!text + !!prompts_file + !!texts_json != 1)
        return nb_cmd_usage_error("tokenize", "%s",
                                  "give exactly one of --text, --prompts-file and --texts-json");
    nb_err err;
    nb_prompts ps = {0};
    if (prompts_file ? nb_prompts_load(prompts_file, &ps, &err)
        : texts_json ? load_json_texts(texts_json, &ps, &err)
                     : nb_prompts_single(text, &ps, &err))
        return nb_cmd_fail("tokenize", &err);
    nb_model *m = NULL;
    nb_tokenizer *t = NULL;
    nb_code c = nb_deploy_open_tokenizer(model, &m, &t, &err);
    for (int i = 0; !c && i < ps.n; i++) {
        char *rendered = NULL;
        if (chat && (c = nb_tokenizer_chat(t, ps.items[i], &rendered, &err)) != NB_OK)
            break;
        /* a chat template carries its own BOS: encode it without, as apply_chat_template */
        c = show(t, i, rendered ? rendered : ps.items[i], chat ? 0 : !no_bos, !split_special,
                 ids_only, &err);
        free(rendered);
    }
    nb_tokenizer_free(t);
    nb_model_close(m);
    nb_prompts_free(&ps);
    return c ? nb_cmd_fail("tokenize", &err) : NB_EXIT_OK;
}
