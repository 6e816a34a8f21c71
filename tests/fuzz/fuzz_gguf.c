/* fuzz_gguf: a GGUF file through the model loader (header, metadata, tensor table, the
 * config and tokenizer built from it). */
#include <stdint.h>

#include "fuzz_util.h"
#include "nb_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".gguf");
    nb_model *m = NULL;
    nb_err err;
    if (path && nb_model_open(path, &m, &err) == NB_OK)
        nb_model_close(m);
    return 0;
}
