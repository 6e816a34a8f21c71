/* nb_coord_disk: new work refused while free disk is short (accepted jobs still commit), and the
 * retention of temporary files and stored results, enforced at start and hourly. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "nb_coord_int.h"
#include "nb_db_results.h"
#include "nb_fault.h"
#include "nb_time.h"

#define TEMP_MAX_AGE_MS (3600LL * 1000)  /* no request keeps a temporary file longer */
#define RETENTION_PERIOD_MS (3600LL * 1000)
#define DAY_MS (24LL * 3600 * 1000)

/* Free bytes for unprivileged writers on the filesystem holding path. */
static nb_code free_bytes(const char *path, unsigned long long *out, nb_err *err)
{
    struct statvfs sv;
    if (statvfs(path, &sv) != 0)
        return nb_err_set(err, NB_EIO, "%s: statvfs: %s", path, strerror(errno));
    *out = (unsigned long long)sv.f_bavail * sv.f_frsize;
    return NB_OK;
}

nb_code nb_coord_disk_room(nb_coord *c, nb_err *err)
{
    unsigned long long need = (unsigned long long)c->o.min_free_mb << 20, have = 0;
    nb_code rc = free_bytes(c->artifacts_dir, &have, err);
    if (rc)
        return rc;
    if (nb_fault("disk_full"))
        have = 0;
    if (have >= need)
        return NB_OK;
    nb_coord_log(c, "disk full: %llu MiB free in %s, below --min-free-mb %d: refusing new work",
              have >> 20, c->artifacts_dir, c->o.min_free_mb);
    return nb_err_set(err, NB_ENOMEM,
                      "coordinator disk full: %llu MiB free in %s, new work needs at least %d "
                      "MiB (--min-free-mb); results of accepted jobs are still stored",
                      have >> 20, c->artifacts_dir, c->o.min_free_mb);
}

/* Temporary entries: Import's upload directories and nb_file_write's temp files. */
static int is_temp(const char *name)
{
    return !strncmp(name, "import-", 7) || strstr(name, ".tmp.") != NULL;
}

/* Result files of versions before job_results ("job-N.pb"). */
static int is_legacy_result(const char *name)
{
    size_t n = strlen(name);
    return !strncmp(name, "job-", 4) && n > 7 && !strcmp(name + n - 3, ".pb");
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[4096];
        if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub)
            unlink(sub); /* import directories hold one file */
    }
    closedir(d);
    rmdir(path);
}

/* Removes temp entries older than an hour and legacy result files older than the
 * retention; returns how many went. */
static size_t sweep_dir(nb_coord *c, int64_t now, int64_t keep_results_ms)
{
    DIR *d = opendir(c->artifacts_dir);
    if (!d)
        return 0;
    size_t gone = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int temp = is_temp(e->d_name), legacy = is_legacy_result(e->d_name);
        if (!temp && !(legacy && keep_results_ms > 0))
            continue;
        char path[2048];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", c->artifacts_dir, e->d_name) >=
                (int)sizeof path || lstat(path, &st) != 0)
            continue;
        int64_t age = now - (int64_t)st.st_mtime * 1000;
        if (age > (temp ? TEMP_MAX_AGE_MS : keep_results_ms)) {
            remove_tree(path);
            gone++;
        }
    }
    closedir(d);
    return gone;
}

void nb_coord_retention(nb_coord *c)
{
    int64_t now = nb_wall_ms();
    if (now < c->next_retention_ms)
        return;
    c->next_retention_ms = now + RETENTION_PERIOD_MS;
    int64_t keep_ms = c->o.retention_days > 0 ? c->o.retention_days * DAY_MS : 0;
    size_t files = sweep_dir(c, now, keep_ms), rows = 0;
    nb_err err;
    if (keep_ms && nb_db_results_prune(c->db, now - keep_ms, &rows, &err))
        nb_coord_log(c, "retention: %s", err.msg);
    if (files || rows)
        nb_coord_log(c, "retention: removed %zu file%s from %s and %zu stored result%s older "
                  "than %d days", files, files == 1 ? "" : "s", c->artifacts_dir, rows,
                  rows == 1 ? "" : "s", c->o.retention_days);
}
