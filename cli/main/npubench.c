/* npubench: the single binary; every subcommand lives in cli/.
 * Kept to one call so tests can link the CLI library directly. */
#include "nb_cli.h"

int main(int argc, char **argv)
{
    return nb_cli_main(argc, argv);
}
