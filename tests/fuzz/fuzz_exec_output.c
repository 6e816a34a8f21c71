/* fuzz_exec_output: what an exec deployment's tooling prints (metrics lines, samples), its
 * command lines split into argv, and its verify report file. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "nb_exec.h"
#include "nb_jobpb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_exec_parsed p;
    nb_exec_parse((const char *)data, size, &p);
    double *ttft = NULL, *tps = NULL;
    int nt = 0, np = 0;
    nb_err err;
    if (nb_exec_parse_samples((const char *)data, size, &ttft, &nt, &tps, &np, &err) == NB_OK) {
        free(ttft);
        free(tps);
    }
    char *line = fuzz_text(data, size);
    char **argv = NULL;
    int argc = 0;
    if (nb_exec_split(line, &argv, &argc, &err) == NB_OK)
        free(argv); /* one block */
    free(line);
    const char *path = fuzz_file(data, size, ".json");
    Npubench__JobResult *res = nb_jobpb_result_new();
    int failed = 0;
    if (path && res)
        nb_exec_report_gates(path, res, &failed, &err);
    nb_jobpb_free(res);
    return 0;
}
