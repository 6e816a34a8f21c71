/* fuzz_safetensors: a .safetensors file's header and tensor table, every tensor listed through
 * nb_safetensors_tensor_at. */
#include <stdint.h>

#include "fuzz_util.h"
#include "nb_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".safetensors");
    nb_safetensors *st = NULL;
    nb_err err;
    if (!path || nb_safetensors_open(path, &st, &err))
        return 0;
    nb_tensor t;
    for (size_t i = 0; nb_safetensors_tensor_at(st, i, &t, &err) == NB_OK; i++) {
    }
    nb_safetensors_close(st);
    return 0;
}
