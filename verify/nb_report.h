/* nb_report: verify, diagnosis and run/profile reports as JSON (machine) and Markdown (people).
 * Files land as reports/<kind>_YYYYMMDD-HHMMSS.{json,md}, like the reference flow. */
#ifndef NB_REPORT_H
#define NB_REPORT_H

#include <json-c/json.h>
#include <stdio.h>

#include "nb_diagnosis.h"
#include "nb_verify.h"
#include "npubench.pb-c.h"

/* What every report header carries about where it ran. */
typedef struct nb_report_env {
    char model[1024], model_sha256[65], backend[16], dtype[16], board[64];
    int threads;
    char isa[32];
} nb_report_env;

/* JSON documents (caller releases with json_object_put). */
/* The opening every report shares: {"kind", "timestamp_utc": now}. */
json_object *nb_report_json_open(const char *kind);
/* The deployment and build a result came from (a report's "config"). */
json_object *nb_report_env_json(const nb_report_env *env);
json_object *nb_report_verify_json(const nb_verify_result *r, const nb_report_env *env,
                                   const char *kind);
json_object *nb_report_diagnosis_json(const nb_diagnosis_result *r, const nb_report_env *env);

/* Writes <dir>/<prefix>_<stamp>.json and .md; paths (if non-NULL) receive
 * the JSON path. */
nb_code nb_report_write_verify(const char *dir, const nb_verify_result *r,
                               const nb_report_env *env, const char *kind, char *json_path,
                               size_t cap, nb_err *err);
nb_code nb_report_write_diagnosis(const char *dir, const nb_diagnosis_result *r,
                                  const nb_report_env *env, char *json_path, size_t cap,
                                  nb_err *err);

/* A run's or profile's report from its JobResult (metrics set): {"kind", "timestamp_utc",
 * "config", "metrics" with every sample, and a profile's "phases" and "kernels" in ms}; the
 * worker ships it as report_json, the CLI writes it (nb_report_write_bench) beside verify's
 * as <dir>/<kind>_<model>_<stamp>.json and .md. */
json_object *nb_report_bench_json(const Npubench__JobResult *res, const char *kind,
                                  const nb_report_env *env);
nb_code nb_report_write_bench(const char *dir, const Npubench__JobResult *res,
                              const nb_report_env *env, const char *kind, char *json_path,
                              size_t cap, nb_err *err);

/* The console summary of a verify run (what `npubench verify` prints). */
void nb_report_print_verify(FILE *f, const nb_verify_result *r, const nb_report_env *env);
void nb_report_print_diagnosis(FILE *f, const nb_diagnosis_result *r);

#endif
