/* nb_version: what this binary is: the release (NB_VERSION, set by CMake) and the commit it was
 * built from, refreshed on every build so stored results never carry a stale commit. */
#ifndef NB_VERSION_H
#define NB_VERSION_H

/* The short commit hash, with "-dirty" when the tree had uncommitted
 * changes, or "unknown" outside a git checkout. Static storage. */
const char *nb_commit(void);

#endif
