/* fuzz_tokenizer: a model's tokenizer (SmolLM2's, or NB_FUZZ_GGUF's) encoding arbitrary bytes
 * (with and without special-token parsing) and decoding arbitrary ids; the first byte picks
 * the mode. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_gguf.h"
#include "nb_tokenizer.h"

static nb_tokenizer *tok;
static nb_gguf *gguf;

/* At exit, so LeakSanitizer's end-of-run check sees nothing of ours. */
static void release(void)
{
    nb_tokenizer_free(tok);
    nb_gguf_close(gguf);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* NB_FUZZ_GGUF picks another model's vocabulary (e.g. Gemma 3's SentencePiece one) */
    const char *dir = getenv("NPUBENCH_MODELS"), *file = getenv("NB_FUZZ_GGUF");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : NB_SOURCE_DIR "/models",
             file && *file ? file : "SmolLM2-135M-Instruct.Q4_1.gguf");
    nb_err err;
    if (nb_gguf_open(path, &gguf, &err) || nb_tokenizer_from_gguf(gguf, &tok, &err)) {
        fprintf(stderr, "fuzz_tokenizer: %s (scripts/fetch_model.sh)\n", err.msg);
        exit(1);
    }
    atexit(release); /* the file stays open until then: the tokenizer may point into it */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    nb_err err;
    int mode = data[0];
    data++;
    size--;
    if (mode & 1) {
        size_t n = size / sizeof(int32_t);
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        if (!ids)
            return 0;
        if (n)
            memcpy(ids, data, n * sizeof *ids);
        char *text = NULL;
        size_t len = 0;
        if (nb_tokenizer_decode(tok, ids, n, (mode >> 1) & 1, &text, &len, &err) == NB_OK)
            free(text);
        free(ids);
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        if (nb_tokenizer_encode(tok, (const char *)data, size, (mode >> 1) & 1, (mode >> 2) & 1,
                                &ids, &n, &err) == NB_OK)
            free(ids);
    }
    return 0;
}
