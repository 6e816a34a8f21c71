/* fuzz_prompts: a prompt-set file (one prompt a line, comments, escapes) as verify reads it
 * through nb_prompts_load. */
#include <stdint.h>

#include "fuzz_util.h"
#include "nb_prompts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".txt");
    nb_prompts p;
    nb_err err;
    if (path && nb_prompts_load(path, &p, &err) == NB_OK)
        nb_prompts_free(&p);
    return 0;
}
