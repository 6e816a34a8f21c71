/* nb_exec: the `exec` backend's job runner: one JobSpec on an exec deployment (mlir-air's
 * scripts, `make verify`, `make profile`, npubench itself), its output and report to a JobResult. */
#ifndef NB_EXEC_H
#define NB_EXEC_H

#include "nb_err.h"
#include "nb_exec_deploy.h"
#include "npubench.pb-c.h"

typedef struct nb_exec_job_hooks {
    int (*cancelled)(void *user);              /* polled: non-zero stops the command */
    void (*line)(void *user, const char *line);/* each output line, and npubench's notes */
    void *user;
} nb_exec_job_hooks;

/* Runs spec's kind on d (model and dtype fill {model} / {dtype}) and fills res the way a
 * CPU deployment's job does, so the CLI, the coordinator and history treat both alike:
 *  - run / profile: metrics with extract_perf's definitions (nb_exec_out), one sample per
 *    command run (a command without {reps} runs spec->reps times) or, for a command that
 *    repeats itself, per printed line; PASS.  No usable decode throughput is NB_EFORMAT.
 *  - verify / verify-full: the report's records as gates + JobResult.verify, the outcome
 *    from them (a FAIL is NB_OK with outcome FAIL).  No readable report is NB_EFORMAT.
 *  - diagnosis: the report's layers as cosines + JobResult.diagnosis; PASS.
 * The report is exec.report when configured, else the path the command printed, relative
 * to exec.cwd; report_json gets its text.  A shard of a verify-full on a deployment whose
 * command cannot take a prompt range is NB_EUNSUPPORTED before anything runs.  A command
 * that timed out, was killed or exited non-zero (verify: without its FAIL verdict) is
 * NB_ETIMEOUT / NB_EIO naming the command and quoting the output's tail. */
nb_code nb_exec_job(const nb_exec_deploy *d, const char *model, const char *dtype,
                    const Npubench__JobSpec *spec, const nb_exec_job_hooks *hooks,
                    Npubench__JobResult *res, nb_err *err);

#endif
