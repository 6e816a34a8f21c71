/* nb_cmd: the subcommands behind `npubench <command>`, each returning an exit code.
 * Exit codes are the CLI's contract (nb_outcome.h): 0 pass, 1 gate fail or regression,
 * 2 usage/set-up/no verdict, 3 unavailable, 4 cancelled, 5 expired or timed out. */
#ifndef NB_CMD_H
#define NB_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nb_args.h"
#include "nb_embedded.h"
#include "nb_err.h"
#include "nb_out.h"
#include "nb_svc.h"

enum {
    NB_EXIT_OK = 0,
    NB_EXIT_FAIL = 1,
    NB_EXIT_USAGE = 2,
    NB_EXIT_UNAVAILABLE = 3,
    NB_EXIT_CANCELLED = 4,
    NB_EXIT_EXPIRED = 5,
    NB_EXIT_DATALOSS = 6 /* stored data damaged: restore before retrying */
};

int nb_cmd_exit_code(nb_code rc);
/* Parses a subcommand's flags (nb_args_parse): on an error prints it with the
 * usage and returns NB_EXIT_USAGE, after --help (*help set) prints the usage
 * to stdout and returns -1, else returns NB_EXIT_OK. */
int nb_cmd_parse(const char *cmd, const char *usage, int argc, char **argv, const nb_opt *opts,
                 int n_opts, const char **pos, int max_pos, int *n_pos, const int *help);
/* Prints "npubench <cmd>: error: <msg>" and maps the code. */
int nb_cmd_fail(const char *cmd, const nb_err *err);
/* Prints "npubench <cmd>: " + fmt (with arg) and returns NB_EXIT_USAGE. */
int nb_cmd_usage_error(const char *cmd, const char *fmt, const char *arg);

#define NB_CMD_DEFAULT_DB "var/npubench.db"

/* A service command's connection: to the coordinator the flags name or, where allowed, to an
 * embedded coordinator over the local database (db, default NB_CMD_DEFAULT_DB). */
typedef struct nb_cmd_conn {
    nb_svc *svc;
    nb_embedded *emb;
} nb_cmd_conn;

/* NB_EXIT_OK with *c open, else the exit code of the error it printed (a missing coordinator
 * is a usage error unless allow_local). An explicit db that does not exist is refused unless
 * allow_local is 2 (a command that stores: import). */
int nb_cmd_conn_open(const char *cmd, const nb_svc_flags *f, const char *db, int allow_local,
                     nb_cmd_conn *c);
void nb_cmd_conn_close(nb_cmd_conn *c);

/* How a job command reports the jobs it fetched: text as each command prints it, or a JSON
 * document (doc, already holding the command's own fields), and a JUnit file. */
typedef struct nb_cmd_report {
    const char *cmd;
    json_object *doc;  /* NULL = text */
    const char *junit; /* NULL = none */
    int list;          /* "jobs": [...] even for one job (wait), else "job": {...} */
} nb_cmd_report;

/* Adds "job" (or "jobs") and "exit_code" to r->doc and prints it, writes r->junit;
 * returns the highest exit code of the jobs' outcomes (2 when the JUnit file could not be
 * written). */
int nb_cmd_report_jobs(const nb_cmd_report *r, const Npubench__Job *const *jobs, size_t n);
/* Waits for job id until end_ms (0 = no deadline) into *out (free with nb_wire_free): the
 * finished job (with its log when log), or, once the deadline passed, the job as it stands
 * (outcome pending). */
nb_code nb_cmd_wait_job(nb_svc *svc, int64_t id, int64_t end_ms, int log, Npubench__Job **out,
                        nb_err *err);

/* A matrix's cells printed on f as they finish (nb_print_cell, "[job 11] " before each):
 * the groups' finished results read again at most once a second while one is awaited, each
 * printed once. Zero-initialise, then set svc, f, the groups and their kinds. */
#define NB_CMD_CELLS_MAX 1024
typedef struct nb_cmd_cells {
    nb_svc *svc;
    FILE *f;
    const int64_t *groups;
    const int *kinds;
    size_t n;
    nb_svc_progress *pr; /* NULL, or the progress lines printed too */
    int64_t seen[NB_CMD_CELLS_MAX];
    size_t n_seen;
    double last_ms;
} nb_cmd_cells;
/* Reads the groups (now when force, else when a second passed) and prints new cells. */
void nb_cmd_cells_poll(nb_cmd_cells *c, int force);
/* An nb_svc_watch_fn with ud = an nb_cmd_cells: its progress line, then the new cells. */
int nb_cmd_cells_watch(void *ud, int64_t job_id, const Npubench__WatchJobResponse *w);
/* nb_cmd_wait_job with fn(ud, ...) called on every answer while it waits. */
nb_code nb_cmd_wait_job_fn(nb_svc *svc, int64_t id, int64_t end_ms, int log,
                           nb_svc_watch_fn fn, void *ud, Npubench__Job **out, nb_err *err);
/* A --timeout passed: cancels job id as expired ("expired: WHO gave up after N s") unless
 * keep, so nothing runs that no one awaits; says which on stderr as `npubench CMD: ...`. */
void nb_cmd_give_up(nb_svc *svc, const char *cmd, const char *who, int64_t id, int timeout_s,
                    int keep);
/* "JOB" positional words as ids; the usage error it printed, or NB_EXIT_OK. */
int nb_cmd_job_ids(const char *cmd, const char *const *pos, int np, int64_t *ids);

/* The job kinds' parameters that have an option (job/nb_job.c's rows: the option's name, its
 * limits from job/nb_limits.h, its help), as `submit` and `submit matrix` take them
 * (cli/nb_cmd_params.c). */
#define NB_CMD_PARAMS_MAX 32 /* rows of job/nb_job.c's parameter table */
typedef struct nb_cmd_params {
    int value[NB_CMD_PARAMS_MAX]; /* by row; 0: not given (the kind's default) */
} nb_cmd_params;
/* What a JobSpec's params point into while it is sent. */
typedef struct nb_cmd_params_buf {
    Npubench__KeyValue kv[NB_CMD_PARAMS_MAX];
    Npubench__KeyValue *kvp[NB_CMD_PARAMS_MAX];
    char val[NB_CMD_PARAMS_MAX][16];
} nb_cmd_params_buf;
/* A command's options into opts (room for n_head + NB_CMD_PARAMS_MAX + n_tail): head, one per
 * row with an option (filling p), tail; returns how many. */
int nb_cmd_params_opts(nb_cmd_params *p, const nb_opt *head, int n_head, const nb_opt *tail,
                       int n_tail, nb_opt *opts);
/* Puts the given values on spec: JobSpec fields, or params entries pointing into buf, which
 * must outlive spec. */
void nb_cmd_params_apply(const nb_cmd_params *p, Npubench__JobSpec *spec,
                         nb_cmd_params_buf *buf);

/* How long ago unix ms `ms` was: "42s", "5m", "3h", "2d". */
void nb_cmd_fmt_age(char *buf, size_t cap, int64_t ms);

/* The local commands (cli/nb_cmd_local.c). */
int nb_cmd_run(int argc, char **argv);
int nb_cmd_verify(int argc, char **argv);
int nb_cmd_verify_full(int argc, char **argv);
int nb_cmd_diagnosis(int argc, char **argv);
int nb_cmd_profile(int argc, char **argv);
int nb_cmd_worker(int argc, char **argv); /* cli/nb_cmd_worker.c */

/* The service commands, one file per family. */
int nb_cmd_coordinator(int argc, char **argv); /* cli/nb_cmd_coordinator.c */
int nb_cmd_submit(int argc, char **argv);      /* cli/nb_cmd_jobs.c */
int nb_cmd_submit_matrix(int argc, char **argv); /* cli/nb_cmd_matrix.c: submit matrix */
int nb_cmd_jobs(int argc, char **argv);
int nb_cmd_job(int argc, char **argv);
int nb_cmd_cancel(int argc, char **argv);
int nb_cmd_wait(int argc, char **argv);        /* cli/nb_cmd_wait.c */
int nb_cmd_workers(int argc, char **argv);     /* cli/nb_cmd_worker.c */
int nb_cmd_history(int argc, char **argv);     /* cli/nb_cmd_history.c */
int nb_cmd_compare(int argc, char **argv);
int nb_cmd_reference(int argc, char **argv);
int nb_cmd_import(int argc, char **argv);      /* cli/nb_cmd_import.c */
int nb_cmd_tokenize(int argc, char **argv);    /* cli/nb_cmd_tokenize.c */
int nb_cmd_air(int argc, char **argv);         /* cli/nb_cmd_air.c */
int nb_cmd_dash(int argc, char **argv);        /* cli/nb_cmd_dash.c: report --html */
int nb_cmd_regressions(int argc, char **argv); /* cli/nb_cmd_regress.c */

#endif
