/* nb_probe: sysfs and XRT's version file read without opening the device, so a probe never
 * disturbs a job or aborts in XRT (see kernels/xrt for the probe that opens it). */
#include "nb_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_jobpb.h"
#include "nb_kernels.h"
#include "nb_runenv.h"
#include "nb_version.h"

/* The first line of a small file, trimmed; 0 when absent or empty. */
static int first_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf[0] != '\0';
}

/* "BUILD_VERSION": "2.19.0" out of XRT's version.json (a flat object). */
static int xrt_version(char *buf, size_t cap)
{
    const char *root = getenv("XILINX_XRT");
    if (!root || !*root)
        return 0;
    char path[1024], text[4096];
    snprintf(path, sizeof path, "%s/version.json", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *k = strstr(text, "\"BUILD_VERSION\"");
    const char *q = k ? strchr(k + 15, '"') : NULL;
    const char *e = q ? strchr(q + 1, '"') : NULL;
    if (!e || e == q + 1)
        return 0;
    snprintf(buf, cap, "%.*s", (int)(e - q - 1), q + 1);
    return 1;
}

void nb_probe_read(nb_probe *p)
{
    memset(p, 0, sizeof *p);
    if (!first_line("/sys/module/amdxdna/version", p->driver, sizeof p->driver))
        snprintf(p->driver, sizeof p->driver, "unknown");
    if (!first_line("/sys/class/accel/accel0/device/fw_version", p->firmware,
                    sizeof p->firmware))
        snprintf(p->firmware, sizeof p->firmware, "unknown");
    if (!xrt_version(p->xrt, sizeof p->xrt))
        snprintf(p->xrt, sizeof p->xrt, "unknown");
    snprintf(p->kernel_path, sizeof p->kernel_path, "%s", nb_isa_name(nb_kernels_isa()));
    nb_runenv_cpu_model(p->cpu_model, sizeof p->cpu_model);
#ifdef __clang__
    const char *cc = "clang " __clang_version__;
#else
    const char *cc = "gcc " __VERSION__;
#endif
    snprintf(p->toolchain, sizeof p->toolchain, "%s, npubench %s", cc, nb_commit());
}

void nb_probe_line(const nb_probe *p, char *buf, size_t cap)
{
    snprintf(buf, cap, "driver %s, firmware %s, XRT %s, kernels %s, CPU %s, %s", p->driver,
             p->firmware, p->xrt, p->kernel_path, p->cpu_model, p->toolchain);
}

nb_code nb_probe_env_add(const nb_probe *p, Npubench__Environment *e)
{
    /* "unknown" says nothing about a change: left out, not stored as a version */
    const char *const key[2] = {"driver", "firmware"}, *const val[2] = {p->driver, p->firmware};
    for (int i = 0; i < 2; i++)
        if (strcmp(val[i], "unknown")) {
            nb_code rc = nb_runenv_pb_extra(e, key[i], val[i]);
            if (rc)
                return rc;
        }
    return NB_OK;
}
