/* nb_gen_tiny: writes the tiny deterministic test Llama (see nb_tiny.h) as a
 * GGUF of a chosen type and/or an HF directory (config, tokenizer, safetensors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_tiny.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: nb_gen_tiny [--type f32|f16|bf16|q8_0|q4_0|q4_1] [--seed N] [--untied]\n"
            "                   [--out FILE.gguf] [--safetensors DIR [--shards N]]\n"
            "                   [--no-permute] [--alignment N]\n"
            "  --type       GGUF weight type, or the safetensors dtype (f32|f16|bf16)\n"
            "  --no-permute store GGUF q/k rows in HF order (a deliberately wrong file)\n");
}

int main(int argc, char **argv)
{
    nb_tiny_opts o = {.seed = 1, .type = NB_TT_F32};
    const char *out = NULL, *st_dir = NULL;
    int shards = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--untied")) {
            o.untied = 1;
        } else if (!strcmp(a, "--no-permute")) {
            o.no_permute = 1;
        } else if (v && !strcmp(a, "--type")) {
            int t = nb_ttype_from_name(v);
            if (t < 0) {
                fprintf(stderr, "nb_gen_tiny: unknown --type '%s'\n", v);
                return 2;
            }
            o.type = (nb_ttype)t;
            i++;
        } else if (v && !strcmp(a, "--seed")) {
            o.seed = strtoull(v, NULL, 0);
            i++;
        } else if (v && !strcmp(a, "--out")) {
            out = v;
            i++;
        } else if (v && !strcmp(a, "--safetensors")) {
            st_dir = v;
            i++;
        } else if (v && !strcmp(a, "--shards")) {
            shards = atoi(v);
            i++;
        } else if (v && !strcmp(a, "--alignment")) {
            o.alignment = (unsigned)strtoul(v, NULL, 0);
            if (!o.alignment || (o.alignment & (o.alignment - 1)) || o.alignment > 256) {
                fprintf(stderr, "nb_gen_tiny: --alignment must be a power of two <= 256\n");
                return 2;
            }
            i++;
        } else {
            usage();
            return 2;
        }
    }
    if (!out && !st_dir) {
        usage();
        return 2;
    }
    if (out && nb_tiny_write_gguf(&o, out)) {
        fprintf(stderr, "nb_gen_tiny: cannot write %s\n", out);
        return 1;
    }
    if (st_dir) {
        if (o.type != NB_TT_F32 && o.type != NB_TT_F16 && o.type != NB_TT_BF16) {
            fprintf(stderr, "nb_gen_tiny: safetensors needs --type f32, f16 or bf16\n");
            return 2;
        }
        if (shards < 1 || shards > 9) {
            fprintf(stderr, "nb_gen_tiny: --shards must be 1..9\n");
            return 2;
        }
        if (nb_tiny_write_hf(&o, st_dir, shards)) {
            fprintf(stderr, "nb_gen_tiny: cannot write %s\n", st_dir);
            return 1;
        }
    }
    return 0;
}
