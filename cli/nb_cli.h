/* nb_cli: the npubench command line (local commands, service commands, history).
 * Returns the process exit code: 0 pass, 1 gate fail/regression, 2 usage/set-up, 3 unavailable. */
#ifndef NB_CLI_H
#define NB_CLI_H

int nb_cli_main(int argc, char **argv);

#endif
