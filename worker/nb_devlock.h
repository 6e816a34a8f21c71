/* nb_devlock: one worker per device, claimed with an flock'ed lock file per device id.
 * A second worker for the same device refuses at start, naming the holder's pid. */
#ifndef NB_DEVLOCK_H
#define NB_DEVLOCK_H

#include <stddef.h>

#include "nb_err.h"

typedef struct nb_devlock nb_devlock;

/* The directory lock files live in: $XDG_RUNTIME_DIR/npubench when that is set, else
 * /tmp/npubench-<uid>; created (mode 0700) if missing. */
nb_code nb_devlock_dir(char *buf, size_t cap, nb_err *err);

/* Claims device_id ("cpu:0", "xrt:1": letters, digits and ":._-" only) with an exclusive
 * flock on <dir>/device-<id>.lock (dir NULL: nb_devlock_dir) and writes our pid into it.
 * The lock dies with the process (also on kill -9), so nothing stale is left to clean.
 * NB_EUNAVAIL when another process (or another claim in this one) holds it:
 * "device cpu:0 is already claimed by pid 1234 (lock /run/user/1000/npubench/
 * device-cpu_0.lock)"; NB_EINVAL for a bad id; NB_EIO for file errors. */
nb_code nb_devlock_acquire(const char *device_id, const char *dir, nb_devlock **out,
                           nb_err *err);
/* Releases the claim and frees l (the file stays, unlocked). NULL ok. */
void nb_devlock_release(nb_devlock *l);
const char *nb_devlock_path(const nb_devlock *l);

#endif
