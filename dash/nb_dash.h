/* nb_dash: the read-only dashboard's pages rendered from the history database — boards,
 * queue, gate matrix, per-deployment TTFT/TPS plots, runs — served live and exported. */
#ifndef NB_DASH_H
#define NB_DASH_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"
#include "nb_err.h"

/* What only the serving process knows; zero-initialise, then set what you have. */
typedef struct nb_dash_opts {
    int draining;          /* the coordinator's drain: 1 on, 0 off, -1 unknown (export) */
    int64_t now_ms;        /* "now" for ages [the wall clock] */
    size_t band_runs;      /* noise band: the regression check's baseline runs [10] */
    double band_rel;       /* ... and its minimum relative change [0.05] */
    size_t max_points;     /* runs per plot, the newest [100] */
    size_t max_finished;   /* finished jobs listed under the queue [50] */
    const char *generated_by; /* footer text, e.g. "coordinator tcp://...", escaped */
} nb_dash_opts;

/* Page names are flat and relative, so the same links work served at "/" and as files:
 * index.html, boards.html, queue.html, matrix.html, deployment-<id>.html,
 * deployment-<id>-ttft.svg, deployment-<id>-tps.svg, run-<id>.html, job-<id>.html, and
 * job-<id>-log.json?after=SEQ (served only: a name may carry a query, which only it reads). */
#define NB_DASH_NAME_MAX 64

/* Renders the page called name into *out (malloc'ed, NUL-terminated; free()), its
 * length into *len and its MIME type into *ctype (static). NB_ENOTFOUND for a name
 * that is no page or an id that is not in the database (the message names it); NB_EINVAL
 * for a job page named by what is no job id, or a bad query (a 400, not a 404);
 * NB_EIO/NB_ENOMEM otherwise. opts NULL = the defaults. */
nb_code nb_dash_page(nb_db *db, const nb_dash_opts *opts, const char *name, char **out,
                       size_t *len, const char **ctype, nb_err *err);

/* Called once per exported file, in order; a non-zero code stops the export. */
typedef nb_code (*nb_dash_sink)(void *ud, const char *name, const char *data, size_t len,
                                  nb_err *err);

/* Every page reachable from index.html: the four overview pages, each deployment's page
 * and plots, the regressions page, the page of every job the queue lists, and of every run
 * those link to (at most max_points per deployment plus the matrix's, the regressions' and
 * the jobs'), and of the job of each of those runs with what its page links to (its group,
 * a group's jobs and their runs). *n_files (may be NULL) gets the count. */
nb_code nb_dash_export(nb_db *db, const nb_dash_opts *opts, nb_dash_sink sink, void *ud,
                         size_t *n_files, nb_err *err);

#endif
