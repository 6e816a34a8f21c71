/* nb_cmd: the subcommands behind `npubench <command>`, each returning an exit code.
 * Exit codes are the CLI's contract: 0 pass, 1 gate fail or regression, 2 usage/set-up, 3 unavailable. */
#ifndef NB_CMD_H
#define NB_CMD_H

#include <stdio.h>

#include "nb_args.h"
#include "nb_bench.h"
#include "nb_err.h"

enum {
    NB_EXIT_OK = 0,
    NB_EXIT_FAIL = 1,
    NB_EXIT_USAGE = 2,
    NB_EXIT_UNAVAILABLE = 3,
    NB_EXIT_DATALOSS = 4 /* stored data damaged: restore before retrying */
};

int nb_cmd_exit_code(nb_code rc);
/* Parses a subcommand's flags (nb_args_parse): on an error prints it with the
 * usage and returns NB_EXIT_USAGE, after --help (*help set) prints the usage
 * to stdout and returns -1, else returns NB_EXIT_OK. */
int nb_cmd_parse(const char *cmd, const char *usage, int argc, char **argv, const nb_opt *opts,
                 int n_opts, const char **pos, int max_pos, int *n_pos, const int *help);
/* Prints "npubench <cmd>: error: <msg>" and maps the code. */
int nb_cmd_fail(const char *cmd, const nb_err *err);

int nb_cmd_run(int argc, char **argv);
int nb_cmd_verify(int argc, char **argv);
int nb_cmd_verify_full(int argc, char **argv);
int nb_cmd_diagnosis(int argc, char **argv);
int nb_cmd_profile(int argc, char **argv);
int nb_cmd_worker(int argc, char **argv); /* cli/nb_cmd_worker.c */

/* The service commands (cli/nb_cmd_service.c). */
int nb_cmd_coordinator(int argc, char **argv);
int nb_cmd_submit(int argc, char **argv);
int nb_cmd_jobs(int argc, char **argv);
int nb_cmd_job(int argc, char **argv);
int nb_cmd_cancel(int argc, char **argv);
int nb_cmd_workers(int argc, char **argv);
int nb_cmd_history(int argc, char **argv);
int nb_cmd_compare(int argc, char **argv);
int nb_cmd_reference(int argc, char **argv);
int nb_cmd_import(int argc, char **argv);

void nb_cmd_print_run(FILE *f, const nb_run_result *r);
void nb_cmd_print_profile(FILE *f, const nb_profile_result *p);

#endif
