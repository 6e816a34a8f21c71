/* fuzz_deployments: a worker's deployments file (JSON), exec deployments and their commands
 * included, as nb_deployments_parse reads it. */
#include <stdint.h>

#include "nb_deployments.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_deployment *d = NULL;
    int n = 0;
    nb_err err;
    if (nb_deployments_parse((const char *)data, size, "fuzz", &d, &n, &err) == NB_OK)
        nb_deployments_free(d, n);
    return 0;
}
