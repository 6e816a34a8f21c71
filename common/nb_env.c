/* nb_env: environ merged with overrides for a child, a prefix's variables left out, so a
 * secret in the worker's environment (NPUBENCH_*) never reaches a deployment's process. */
#include "nb_env.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

char **nb_env_merged(char *const *over, const char *drop_prefix)
{
    size_t n0 = 0, n1 = 0, pl = drop_prefix ? strlen(drop_prefix) : 0;
    while (environ && environ[n0])
        n0++;
    while (over && over[n1])
        n1++;
    char **e = malloc(sizeof *e * (n0 + n1 + 1));
    if (!e)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n0; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t kl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int skip = pl && !strncmp(environ[i], drop_prefix, pl);
        for (size_t j = 0; j < n1 && !skip; j++)
            skip = !strncmp(over[j], environ[i], kl) && over[j][kl] == '=';
        if (!skip)
            e[k++] = environ[i];
    }
    for (size_t j = 0; j < n1; j++)
        e[k++] = over[j];
    e[k] = NULL;
    return e;
}
