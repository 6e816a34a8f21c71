/* nb_exec_proc: one command run to completion in its own process group, under a timeout
 * and cancellation that reach the whole group, its output captured (bounded) line by line. */
#ifndef NB_EXEC_PROC_H
#define NB_EXEC_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

typedef struct nb_exec_proc_opts {
    char *const *argv;        /* argv[0] is looked up in PATH (execvp) */
    const char *cwd;          /* NULL: the worker's */
    char *const *env;         /* "KEY=VALUE" added to (overriding) the worker's; NULL ok */
    int64_t timeout_ms;       /* <= 0: none; on expiry SIGTERM, then SIGKILL after 2 s */
    size_t max_output;        /* bytes of stdout+stderr kept [1 MiB]; the rest is counted */
    /* polled every 100 ms: non-zero kills the process group (result.cancelled) */
    int (*cancelled)(void *user);
    /* called for each complete output line (without the newline), as it arrives */
    void (*line)(void *user, const char *line);
    void *user;
} nb_exec_proc_opts;

typedef struct nb_exec_proc_result {
    int exit_code;        /* when it exited, else -1 */
    int term_signal;      /* when a signal ended it, else 0 */
    int timed_out, cancelled;
    char *output;         /* stdout and stderr interleaved, NUL-terminated (malloc'ed) */
    size_t len;           /* bytes kept in output */
    size_t dropped;       /* bytes past max_output */
    double wall_ms;
} nb_exec_proc_result;

/* Runs the process to completion in its own process group (so the timeout and
 * cancellation reach its children: `make` spawns Python).  Returns NB_OK whenever the
 * process ran, whatever its exit status (read *out); errors are a missing program
 * (NB_ENOTFOUND naming it), a bad cwd, fork/pipe failures.  Free with
 * nb_exec_proc_result_free. */
nb_code nb_exec_proc_run(const nb_exec_proc_opts *o, nb_exec_proc_result *out, nb_err *err);
void nb_exec_proc_result_free(nb_exec_proc_result *r);

#endif
