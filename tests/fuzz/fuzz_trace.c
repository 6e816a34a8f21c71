/* fuzz_trace: an HF reference trace (JSON: prompts, token ids, top-k) as verify and diagnosis
 * load it. */
#include <stdint.h>

#include "fuzz_util.h"
#include "nb_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".json");
    nb_trace *t = NULL;
    nb_err err;
    if (path && nb_trace_load(path, &t, &err) == NB_OK)
        nb_trace_free(t);
    return 0;
}
