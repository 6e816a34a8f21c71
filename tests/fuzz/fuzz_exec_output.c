/* fuzz_exec_output: what an exec deployment's tooling prints (metrics lines, samples), its
 * command lines split into argv, and its verify / diagnosis report documents. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "nb_exec_deploy.h"
#include "nb_exec_out.h"
#include "nb_exec_report.h"
#include "nb_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_exec_out p;
    nb_exec_out_parse((const char *)data, size, &p);
    double *ttft = NULL, *tps = NULL;
    int nt = 0, np = 0;
    nb_err err;
    if (nb_exec_out_samples((const char *)data, size, &ttft, &nt, &tps, &np, &err) == NB_OK) {
        free(ttft);
        free(tps);
    }
    char *line = fuzz_text(data, size);
    char **argv = NULL;
    int argc = 0;
    if (nb_exec_deploy_split(line, &argv, &argc, &err) == NB_OK)
        free(argv); /* one block */
    free(line);
    json_object *root = NULL;
    if (nb_json_parse((const char *)data, size, "report", &root, &err) == NB_OK) {
        nb_verify_result vr;
        if (nb_exec_report_verify(root, "report", 5, &vr, &err) == NB_OK)
            nb_verify_result_free(&vr);
        nb_diagnosis_result dr;
        if (nb_exec_report_diagnosis(root, "report", &dr, &err) == NB_OK)
            nb_diagnosis_result_free(&dr);
        json_object_put(root);
    }
    return 0;
}
