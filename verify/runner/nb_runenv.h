/* nb_runenv: where a result came from: the deployment as set up and this host, as a report
 * header and as the npubench.Environment a worker reports. */
#ifndef NB_RUNENV_H
#define NB_RUNENV_H

#include "nb_deploy.h"
#include "nb_err.h"
#include "nb_jobpb.h"
#include "nb_report.h"
#include "npubench.pb-c.h"

/* The report header of a result d produced on board (NULL: "local"). */
void nb_runenv_report(const nb_deploy *d, const char *board, nb_report_env *env);

/* ---- environment -----------------------------------------------------------------
 * Where a result came from: npubench version + commit, board name/type, CPU model
 * (/proc/cpuinfo "model name"), host name, backend, dtype, threads and kernels ISA as
 * running now, model name/path/sha256.  d may be NULL (exec deployments fill the rest
 * themselves); board and board_type may be NULL. */
nb_code nb_runenv_pb_new(const nb_deploy *d, const char *board, const char *board_type,
                         Npubench__Environment **out, nb_err *err);
/* Appends key=value to e's extras (the run's toolchain entries in the history); e NULL:
 * nothing. NB_ENOMEM with e unchanged when out of memory. */
nb_code nb_runenv_pb_extra(Npubench__Environment *e, const char *key, const char *value);
/* "model name" of /proc/cpuinfo (else the machine type from uname) into buf. */
void nb_runenv_cpu_model(char *buf, size_t cap);

#endif
