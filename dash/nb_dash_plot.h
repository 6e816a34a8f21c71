/* nb_dash_plot: a deployment's history of one metric as a chart — one series per series key
 * (nb_db_series), flags on the metric they concern, probe events, or an x axis by commit. */
#ifndef NB_DASH_PLOT_H
#define NB_DASH_PLOT_H

#include <stdio.h>

#include "nb_db_runs.h"
#include "nb_err.h"

typedef struct nb_dash_plot_in {
    const char *title, *unit;
    const nb_db_history_row *rows; /* oldest first, every one having metric */
    size_t n;
    nb_db_metric metric;  /* a point is red when the check flagged this metric of its run */
    size_t band_runs;     /* the regression check's baseline runs ... */
    double band_rel;      /* ... and minimum change (the band) */
    int by_commit;        /* x: the runs' commits in order (nb_dash_plot_commit); else time */
    int link;             /* points link to run-<id>.html */
} nb_dash_plot_in;

/* Which commit places runs on a commit axis: "mlir-air" when some row has an air_sha (the
 * mlir-air build is what a nightly measures), else "npubench" when some row has a commit,
 * else NULL (no commit axis to draw). */
const char *nb_dash_plot_commit(const nb_db_history_row *rows, size_t n);

/* Writes the chart (nb_svg_chart_write): a series per series key named in the legend, each
 * with its band; by time, a mark where the NPU driver, firmware or mlir-air commit differs
 * from the run before; by commit, a tick per commit (runs without one left out).
 * NB_ENOMEM, NB_EIO. */
nb_code nb_dash_plot_write(FILE *f, const nb_dash_plot_in *in, nb_err *err);

#endif
