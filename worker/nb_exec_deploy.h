/* nb_exec_deploy: an exec deployment's commands: the deployments file's "exec" object, its
 * command lines (split without a shell, or run by /bin/sh) and their per-job placeholders. */
#ifndef NB_EXEC_DEPLOY_H
#define NB_EXEC_DEPLOY_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

/* ---- command lines ------------------------------------------------------------------ */

/* Splits a command line into a NULL-terminated argv with POSIX shell quoting rules but
 * no expansion: words separated by blanks; '...' literal; "..." literal except \" \\ \$
 * \` and \newline; a backslash outside quotes escapes the next character.  Unbalanced
 * quotes, a trailing backslash, an empty line or more than 4096 words are NB_EINVAL
 * naming the column.  *argv is one malloc block (free with free()); *argc may be NULL. */
nb_code nb_exec_deploy_split(const char *line, char ***argv, int *argc, nb_err *err);

/* Single-quotes s for /bin/sh into buf ("it's" -> 'it'\''s'); NB_ENOMEM when cap is short. */
nb_code nb_exec_deploy_shell_quote(const char *s, char *buf, size_t cap, nb_err *err);

/* ---- deployments ----------------------------------------------------------------------- */

/* One slot per npubench.JobKind (RUN .. PROFILE), indexed by kind - 1. */
#define NB_EXEC_DEPLOY_KINDS 5

typedef struct nb_exec_deploy_cmd {
    char **argv;   /* split words (one block), or NULL */
    char *shell;   /* /bin/sh -c text, or NULL */
} nb_exec_deploy_cmd;

typedef struct nb_exec_deploy {
    nb_exec_deploy_cmd cmd[NB_EXEC_DEPLOY_KINDS];
    char *cwd;          /* NULL: the worker's */
    char **env;         /* "K=V", NULL-terminated, or NULL */
    int64_t timeout_ms; /* per command run */
    size_t max_output;  /* bytes of output kept */
    char *report;       /* a report path the commands write (relative to cwd), or NULL */
    /* "throughput": false: run/profile report a latency only (smolvla's action chunk, its
     * TTFT formats); a TTFT line is then required instead of a throughput. */
    int no_throughput;
    /* "verify_report": false: verify's printed [verify] PASS / FAIL is the verdict (smolvla's
     * regression gate writes no report); one gate record stands for it. */
    int verdict_only;
} nb_exec_deploy;

/* From a deployments-file entry's "exec" object (format in docs/service.md):
 * {"run": CMD, "verify": CMD, "verify_full": CMD, "diagnosis": CMD, "profile": CMD,
 *  "cwd": DIR, "env": {K: V}, "timeout_s": N, "report": PATH, "max_output_kb": N,
 *  "throughput": BOOL, "verify_report": BOOL}
 * with CMD a string (split by nb_exec_deploy_split), an array of strings (argv), or
 * {"shell": "..."} (run by /bin/sh -c).  what names the entry in errors. */
nb_code nb_exec_deploy_parse(json_object *o, const char *what, nb_exec_deploy **out,
                             nb_err *err);
nb_code nb_exec_deploy_dup(const nb_exec_deploy *d, nb_exec_deploy **out, nb_err *err);
void nb_exec_deploy_free(nb_exec_deploy *d);
/* Whether a command is configured for kind (npubench.JobKind). */
int nb_exec_deploy_supports(const nb_exec_deploy *d, int kind);
/* Whether kind's command mentions placeholder ("{reps}"); 0 without a command. */
int nb_exec_deploy_uses(const nb_exec_deploy *d, int kind, const char *placeholder);
/* Whether the verify_full command can run a prompt range: it takes both {prompt_begin}
 * and {prompt_end}.  mlir-air's verify runner takes --max-prompts only, so a deployment
 * driving it cannot, and its verify-full must run as one job. */
int nb_exec_deploy_takes_range(const nb_exec_deploy *d);

/* ---- one job's command ------------------------------------------------------------------ */

/* The values of the placeholders {n_tokens} {k} {max_prompts} {reps} {prompt}
 * {prompt_begin} {prompt_end} {model} {dtype} {prompts_file} (a file holding the job's
 * prompt set, one prompt a line; "" when the job names none). */
typedef struct nb_exec_deploy_vars {
    int n_tokens, k, max_prompts, reps, prompt_begin, prompt_end;
    const char *prompt, *model, *dtype, *prompts_file;
} nb_exec_deploy_vars;

/* kind's command with the placeholders replaced (shell-quoted inside shell commands, so
 * a value is always one word): a NULL-terminated argv, each word malloc'ed (free with
 * nb_exec_deploy_argv_free).  NB_EUNSUPPORTED when kind has no command. */
nb_code nb_exec_deploy_argv(const nb_exec_deploy *d, int kind, const nb_exec_deploy_vars *v,
                            char ***argv, nb_err *err);
void nb_exec_deploy_argv_free(char **argv);

#endif
