/* nb_cli: subcommand dispatch for the npubench binary.
 * Each subcommand parses its own flags and returns an exit code. */
#include "nb_cli.h"

#include <stdio.h>
#include <string.h>

int nb_cli_main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        printf("usage: npubench <command> [options]\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("npubench %s (%s)\n", NB_VERSION, NB_GIT_COMMIT);
        return 0;
    }
    fprintf(stderr, "npubench: unknown command '%s'\n", argv[1]);
    return 2;
}
