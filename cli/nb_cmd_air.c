/* nb_cmd_air: `npubench air scan LLMS_DIR`, an mlir-air checkout's LLM examples as a
 * deployments file (cli/nb_air_scan.h), with what could not be mapped and why. */
#include "nb_cmd.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_air_scan.h"
#include "nb_args.h"
#include "nb_file.h"

static const char usage[] = "npubench air scan LLMS_DIR [--out FILE] [--air MODELS_DIR "
                            "[--python PY]]  (mlir-air's programming_examples/llms)";

int nb_cmd_air(int argc, char **argv)
{
    const char *out = NULL, *air_dir = NULL, *python = NULL;
    int help = 0;
    nb_opt opts[] = {
        {"out", NB_OPT_STR, &out, 0, 0, "write the deployments file here (default: stdout)"},
        {"air", NB_OPT_STR, &air_dir, 0, 0,
         "also an air entry per model, its HF checkout under this directory"},
        {"python", NB_OPT_STR, &python, 0, 0, "the air entries' interpreter (mlir-air's env)"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[2];
    int np = 0;
    int rc = nb_cmd_parse("air", usage, argc, argv, opts, NB_NOPTS(opts), pos, 2, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (np != 2 || strcmp(pos[0], "scan"))
        return nb_cmd_usage_error("air", "expected 'scan LLMS_DIR'%s", "");
    nb_err err;
    nb_air_model *m = NULL;
    size_t n = 0;
    /* the entries' directories are the board's: absolute, whatever the worker's cwd */
    char abs[4096];
    const char *dir = realpath(pos[1], abs) ? abs : pos[1];
    if (nb_air_scan(dir, &m, &n, &err))
        return nb_cmd_fail("air", &err);
    if (python && !air_dir)
        return nb_cmd_usage_error("air", "--python: only with --air MODELS_DIR%s", "");
    nb_air_scan_air air = {air_dir, python};
    json_object *doc = nb_air_scan_json(m, n, dir, &air);
    const char *text =
        json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                JSON_C_TO_STRING_NOSLASHESCAPE);
    rc = NB_EXIT_OK;
    if (!out) {
        printf("%s\n", text);
    } else if (nb_file_write(out, text, strlen(text), &err)) {
        rc = nb_cmd_fail("air", &err);
    }
    /* the summary on stderr: the file stays a deployments file on stdout */
    size_t mapped = 0;
    for (size_t i = 0; i < n; i++)
        mapped += !m[i].why[0];
    fprintf(stderr, "npubench air scan: %zu model%s, %zu mapped\n", n, n == 1 ? "" : "s",
            mapped);
    for (size_t i = 0; i < n; i++) {
        if (m[i].why[0])
            fprintf(stderr, "  %s: not mapped: %s\n", m[i].name, m[i].why);
        else if (m[i].notes[0])
            fprintf(stderr, "  %s: %s\n", m[i].name, m[i].notes);
        if (air_dir && m[i].air_why[0])
            fprintf(stderr, "  %s-air: not mapped: %s\n", m[i].name, m[i].air_why);
    }
    json_object_put(doc);
    free(m);
    return rc;
}
