/* nb_deployments: the deployments a worker serves: its deployments file (JSON, docs/service.md),
 * `worker --deploy` SPECs, or filled in code; exec entries carry their parsed commands. */
#ifndef NB_DEPLOYMENTS_H
#define NB_DEPLOYMENTS_H

#include <stddef.h>

#include "nb_err.h"
#include "nb_air.h"
#include "nb_exec_deploy.h"
#include "nb_dtype.h"
#include "nb_job.h"

/* Filled by the deployments file, or in code (empty name/backend/dtype get the defaults). */
typedef struct nb_deployment {
    char name[64];      /* unique label: "smollm-q4", defaults to "<model>-<backend>-<dtype>" */
    char model[1024];   /* selector for nb_deploy_open: "instruct", "base", a .gguf path */
    char backend[16];   /* "cpu" (default), "xrt" or "exec" */
    nb_dtype dtype;     /* an engine backend's dtype: the enum from the file to the engine */
    /* A whole-job (exec) backend's dtype: a free label of its commands ({dtype}, matching,
     * reports), "bf16" unless given; "" for the engine's backends, whose dtype is the enum. */
    char exec_dtype[16];
    int threads;        /* 0 = the worker's default */
    int max_seq;        /* 0 = the engine's default */
    unsigned device;    /* XRT device index */
    nb_exec_deploy *exec; /* backend "exec": its commands (owned) */
    nb_air_cfg *air;      /* backend "air": its verify adapter and host (owned) */
    /* The model's one name in the history ("" = nb_job_model_canon(model)) and its other
     * names there (mlir-air's model key, a GGUF general.name...): "canonical", "aliases". */
    char canonical[128];
    char aliases[NB_JOB_MODEL_ALIASES_MAX][128];
    int n_aliases;
} nb_deployment;

/* The dtype's one spelling for the wire, matching, names and logs: an exec deployment's label,
 * else nb_dtype_name of the enum (never parsed back). */
const char *nb_deployment_dtype(const nb_deployment *d);

/* The deployments file (JSON; format in docs/service.md, "Deployments file").
 * *out is malloc'ed (free with nb_deployments_free); errors name the file and the
 * entry ("deployments.json: deployments[2].backend 'gpu': expected cpu, xrt or exec"). */
nb_code nb_deployments_load(const char *path, nb_deployment **out, int *n, nb_err *err);
/* The same from a parsed JSON document; what names the source in errors. */
nb_code nb_deployments_parse(const char *json, size_t len, const char *what,
                                 nb_deployment **out, int *n, nb_err *err);
/* One deployment from a command-line SPEC, MODEL[:DTYPE[:BACKEND]] (`worker --deploy`):
 * "gemma3:q4_1", "instruct" (= instruct:bf16:cpu), "m.gguf::xrt"; an empty field keeps its
 * default, MODEL holds no ':'.  Checked like a file entry (backend "exec" needs a file for
 * its commands); errors start with what ("--deploy 2 'x:q9': dtype: ..."). */
nb_code nb_deployment_parse_spec(const char *spec, const char *what, nb_deployment *d,
                                 nb_err *err);
/* n SPECs (1..64, no deployment twice) into *out (free with nb_deployments_free). */
nb_code nb_deployments_from_specs(const char *const *specs, int n, nb_deployment **out,
                                  int *n_out, nb_err *err);
void nb_deployments_free(nb_deployment *d, int n);
/* Frees d->air (NULL ok) and clears it. */
void nb_deployment_air_free(nb_deployment *d);

#endif
