/* nb_probe: what a worker can read about its device and software without running a job —
 * NPU driver / firmware / XRT versions, the CPU backend's kernel path and CPU model, the
 * toolchain — for its registration (`workers`) and its health checks. */
#ifndef NB_PROBE_H
#define NB_PROBE_H

#include <stddef.h>

#include "nb_err.h"

typedef struct nb_probe {
    char driver[128];   /* amdxdna module version; "unknown" */
    char firmware[128]; /* the NPU's firmware version; "unknown" */
    char xrt[128];      /* XRT's build version; "unknown" */
    char kernel_path[64]; /* the ISA the CPU kernels dispatch to ("avx2", ...) */
    char cpu_model[256];
    char toolchain[192];  /* compiler and npubench commit */
} nb_probe;

/* Fills p; never fails: what cannot be read is "unknown". Reads sysfs and
 * $XILINX_XRT/version.json only (no device is opened, nothing is run). */
void nb_probe_read(nb_probe *p);

/* One line for a job's log: "driver 2.19.0, firmware 1.5.2.380, XRT unknown, kernels avx2,
 * CPU AMD EPYC ..." into buf. */
void nb_probe_line(const nb_probe *p, char *buf, size_t cap);

/* Adds the probe's NPU driver and firmware versions, where it read them, to a result's
 * environment extras (toolchain entries "driver", "firmware"): stored with each run, so
 * the dashboard can mark where they change between a board's runs. NB_ENOMEM. */
struct Npubench__Environment;
nb_code nb_probe_env_add(const nb_probe *p, struct Npubench__Environment *e);

#endif
