/* nb_exec: the `exec` backend: a deployment defined by command lines (the reference
 * tooling's `make ... profile`, a Python runner, npubench itself), run with fork/exec
 * under a timeout, its output captured (bounded) and parsed the way the tooling prints. */
#ifndef NB_EXEC_H
#define NB_EXEC_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "npubench.pb-c.h"

/* ---- command lines ------------------------------------------------------------------ */

/* Splits a command line into a NULL-terminated argv with POSIX shell quoting rules but
 * no expansion: words separated by blanks; '...' literal; "..." literal except \" \\ \$
 * \` and \newline; a backslash outside quotes escapes the next character.  Unbalanced
 * quotes, a trailing backslash, an empty line or more than 4096 words are NB_EINVAL
 * naming the column.  *argv is one malloc block (free with free()); *argc may be NULL. */
nb_code nb_exec_split(const char *line, char ***argv, int *argc, nb_err *err);

/* Single-quotes s for /bin/sh into buf ("it's" -> 'it'\''s'); NB_ENOMEM when cap is short. */
nb_code nb_exec_shell_quote(const char *s, char *buf, size_t cap, nb_err *err);

/* ---- running a process -------------------------------------------------------------- */

typedef struct nb_exec_proc_opts {
    char *const *argv;        /* argv[0] is looked up in PATH (execvp) */
    const char *cwd;          /* NULL: the worker's */
    char *const *env;         /* "KEY=VALUE" added to (overriding) the worker's; NULL ok */
    int64_t timeout_ms;       /* <= 0: none; on expiry SIGTERM, then SIGKILL after 2 s */
    size_t max_output;        /* bytes of stdout+stderr kept [1 MiB]; the rest is counted */
    /* polled every 100 ms: non-zero kills the process (NB_ECANCELED) */
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

/* ---- parsing the reference tooling's output ---------------------------------------- */

typedef struct nb_exec_parsed {
    int has_ttft, has_tps, has_decode;
    double ttft_ms;             /* "Time to first token (TTFT): 0.123s" (or "... ms") */
    double tps;                 /* "Tokens/second: 42.1", or 1000 / decode when only that */
    double decode_ms_per_token; /* "End-to-end (per token) 23.4 ms" */
    int has_prompt_tokens, prompt_tokens;       /* "Prompt tokens: N" */
    int has_generated_tokens, generated_tokens; /* "generated tokens: N" */
    int gate;                   /* -1: no "[verify]" verdict, 0: PASS, 1: FAIL */
    int gate_passed, gate_total;/* "(P/T prompts pass)" when printed, else -1 */
    char report_path[1024];     /* a printed "Report: <path>.json" / "report: <path>" */
} nb_exec_parsed;

/* Scans output line by line; the last occurrence of each value wins (a repeated
 * benchmark prints one line per repetition: each TTFT/TPS line is also a sample).
 * Malformed numbers are ignored (the value stays absent). */
void nb_exec_parse(const char *output, size_t len, nb_exec_parsed *out);

/* Every TTFT (ms) and tokens/s value printed, in order, for the samples.  *ttft / *tps
 * are malloc'ed (free()); counts may differ. */
nb_code nb_exec_parse_samples(const char *output, size_t len, double **ttft, int *n_ttft,
                              double **tps, int *n_tps, nb_err *err);

/* Reads a verify report JSON (ours or the reference tooling's) and appends one
 * GateRecord per record/prompt from its `topk_checks` (and status / divergence_step
 * when given) to res->gates.  *failed gets the number of failing prompts.  Errors name
 * the file and the field. */
nb_code nb_exec_report_gates(const char *path, Npubench__JobResult *res, int *failed,
                             nb_err *err);

/* ---- deployments --------------------------------------------------------------------- */

typedef struct nb_exec_deploy nb_exec_deploy;

/* From a deployments-file entry's "exec" object (format in docs/service.md):
 * {"run": CMD, "verify": CMD, "verify_full": CMD, "diagnosis": CMD, "profile": CMD,
 *  "cwd": DIR, "env": {K: V}, "timeout_s": N, "report": PATH, "max_output_kb": N}
 * with CMD a string (split by nb_exec_split), an array of strings (argv), or
 * {"shell": "..."} (run by /bin/sh -c).  Placeholders {n_tokens} {k} {max_prompts}
 * {reps} {prompt} {prompt_begin} {prompt_end} {model} {dtype} in arguments are
 * replaced per job (shell-quoted in shell commands).  what names the entry in errors. */
nb_code nb_exec_deploy_parse(json_object *o, const char *what, nb_exec_deploy **out,
                             nb_err *err);
nb_code nb_exec_deploy_dup(const nb_exec_deploy *d, nb_exec_deploy **out, nb_err *err);
void nb_exec_deploy_free(nb_exec_deploy *d);
/* Whether a command is configured for kind (npubench.JobKind). */
int nb_exec_deploy_supports(const nb_exec_deploy *d, int kind);

typedef struct nb_exec_job_hooks {
    int (*cancelled)(void *user);
    void (*line)(void *user, const char *line);
    void *user;
} nb_exec_job_hooks;

/* Runs spec's kind on d (model and dtype fill {model} / {dtype}) and fills res: metrics
 * (one sample per TTFT/TPS pair printed), gates and outcome (from "[verify] PASS|FAIL"
 * and the report's topk_checks), report_json (the report file's text), log (the
 * output, bounded).  A process that timed out, crashed or printed nothing parseable
 * for its kind is an error: NB_ETIMEOUT / NB_EIO / NB_EFORMAT naming the command and
 * quoting the output's tail. */
nb_code nb_exec_job(const nb_exec_deploy *d, const char *model, const char *dtype,
                    const Npubench__JobSpec *spec, const nb_exec_job_hooks *hooks,
                    Npubench__JobResult *res, nb_err *err);

#endif
