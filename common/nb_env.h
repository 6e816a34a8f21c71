/* nb_env: the environment a child process gets: this process's, less a prefix's variables
 * (the worker's own secrets), with a deployment's overrides on top. */
#ifndef NB_ENV_H
#define NB_ENV_H

/* A malloc'ed NULL-terminated table pointing into environ and over (free the table only):
 * environ's entries, less those whose name starts with drop_prefix (NULL: none dropped) or
 * that over sets, then over's "K=V" entries (NULL ok).  NULL when out of memory. */
char **nb_env_merged(char *const *over, const char *drop_prefix);

#endif
