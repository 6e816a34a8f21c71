/* nb_air_scan: a catalog of mlir-air's LLM examples: reads programming_examples/llms/<model>
 * (its Makefile's targets, the inference script they run, verify_adapter.py) into exec entries. */
#ifndef NB_AIR_SCAN_H
#define NB_AIR_SCAN_H

#include <json-c/json.h>
#include <stddef.h>

#include "nb_err.h"

/* What one model's directory maps to. Commands are `make TARGET VAR={placeholder}` lines run
 * in the model's directory (exec "cwd"); "" where the job kind has none. */
typedef struct nb_air_model {
    char name[128];  /* the directory name: mlir-air's model key, the nightly's "model" */
    char dtype[32];  /* from the name (db/nb_db_import.h's suffix rules), else bf16 */
    char cwd[1024];
    char run[256], profile[256], verify[256], verify_full[256], diagnosis[256];
    int no_throughput; /* a latency, no tok/s (smolvla's action chunk): exec "throughput" */
    int verdict_only;  /* verify prints a verdict and writes no report: "verify_report" */
    char notes[1024];  /* why an entry point is not the obvious one, "; "-separated */
    char why[512];     /* non-empty: not mapped at all, and why */
    /* The air backend (docs/service.md, "`air` deployments"): the adapter's DEFAULT_MODEL and
     * the HF id its MODEL_CHOICES gives it; air_why non-empty: no air entry, and why. */
    char air_choice[64], air_hf_id[256], air_why[256];
} nb_air_model;

/* Where the air entries' models and interpreter are on the board; NULL models_dir: no air
 * entries. Each entry's model is models_dir/<the HF id's last part>. */
typedef struct nb_air_scan_air {
    const char *models_dir, *python;
} nb_air_scan_air;

/* Every model directory below llms_dir (a directory with a Makefile and a verify_adapter.py),
 * sorted by name; *out malloc'ed (free()). Errors: llms_dir unreadable. */
nb_code nb_air_scan(const char *llms_dir, nb_air_model **out, size_t *n, nb_err *err);

/* The deployments file of the mapped models: {"deployments": [exec entries, and air entries
 * "<model>-air" when air names a models_dir], "unmapped": [{"model", "why"}], "notes":
 * {model: text}}; the worker reads "deployments" only. llms_dir: the air entries' llms_dir. */
json_object *nb_air_scan_json(const nb_air_model *m, size_t n, const char *llms_dir,
                              const nb_air_scan_air *air);

#endif
