/* nb_svg: server-side SVG charts of one metric over runs — a line, its points, error bars and
 * noise band per series, a legend, events and commit ticks on the x axis (no JS, no CDN). */
#ifndef NB_SVG_H
#define NB_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nb_err.h"

/* One run on the plot, oldest first. */
typedef struct nb_svg_point {
    int64_t run_id;   /* the point links to run-<id>.html */
    int64_t when_ms;  /* started, unix ms (axis labels and tooltips) */
    double value;     /* the headline value; NaN points are left out */
    double stddev;    /* over the run's repetitions; NaN = unknown */
    int regression;   /* flagged by the regression check */
    double slot;      /* nb_svg_chart: its x position (0 .. n_slots - 1; by commit, within
                       * +-0.4 of its commit's slot) */
} nb_svg_point;

typedef struct nb_svg_plot {
    const char *title;       /* e.g. "TPS (tokens/s)"; escaped here */
    const nb_svg_point *pts;
    size_t n;
    int higher_is_better;    /* which side of the band is "worse" (labels only) */
    size_t band_runs;        /* the band: median of the previous N runs ... */
    double band_rel;         /* ... times (1 +- this), the check's minimum change */
    int link_prefix;         /* 1: points link to run-<id>.html (relative) */
    const char *unit;        /* the value axis's label ("ms", "tokens/s"); NULL: none */
    int nonnegative;         /* a quantity never below 0: the axis starts at 0 at most */
} nb_svg_plot;

#define NB_SVG_W 640
#define NB_SVG_H_PX 240

/* Colours a reader (and a screenshot test) tells apart: a flagged run's point, an event's
 * line, and series k's line, points, error bars and band (never red nor orange). */
#define NB_SVG_FLAG_COLOUR "#d62728"
#define NB_SVG_EVENT_COLOUR "#ff7f0e"
#define NB_SVG_PALETTE_N 8
const char *nb_svg_series_colour(size_t k); /* "#rrggbb", cycling */

/* One series of a chart: the runs of one series key, oldest first. */
typedef struct nb_svg_series {
    const char *label;        /* the legend's words ("profile, 32 tokens"); escaped here */
    const nb_svg_point *pts;  /* each with its slot */
    size_t n;
} nb_svg_series;

/* An event on the x axis: a vertical line between slot - 1 and slot, with its label. */
typedef struct nb_svg_mark {
    size_t slot;
    const char *label; /* "driver 2.20.0"; escaped here */
} nb_svg_mark;

/* Several series over a shared x axis of n_slots positions: by time (slot_ms[i]: when the
 * run at slot i started) or by commit (slot_text[i]: the commit of slot i, in order; the axis
 * keeps half a slot each side, so the runs of one commit can sit beside its tick). */
typedef struct nb_svg_chart {
    const char *title, *unit; /* escaped here; unit NULL: none */
    int higher_is_better, nonnegative, link_prefix; /* as nb_svg_plot */
    size_t band_runs;         /* each series' band: median of its previous N runs ... */
    double band_rel;          /* ... times (1 +- this) */
    const nb_svg_series *series;
    size_t n_series;
    size_t n_slots;
    const int64_t *slot_ms;         /* time axis (xtick); NULL when by commit */
    const char *const *slot_text;   /* commit axis (ctick), shown to 7 characters */
    const char *xlabel;             /* the x axis's name ("mlir-air commit"); NULL: none */
    const nb_svg_mark *marks;
    size_t n_marks;
} nb_svg_chart;

/* One series, x by run: nb_svg_chart_write without a legend. Writes one <svg> element
 * (width NB_SVG_W x NB_SVG_H_PX) to f: the band as one <path
 * class="band">, the series as one <path class="series">, a <circle> per point (class
 * "pt", or "pt regression"), a <line class="errbar"> per point with a stddev, axes with
 * their min/max labels, value ticks at round steps (<text class="ytick"> with a <line
 * class="grid">), time ticks (<text class="xtick"> with a <line class="xgrid">) and the
 * unit (<text class="ylabel">). With fewer than one finite point it writes an <svg> that
 * says "no data". NB_EIO when f fails. */
nb_code nb_svg_plot_write(FILE *f, const nb_svg_plot *p, nb_err *err);

/* Writes one <svg class="plot">: per series k a <g class="series-k" data-series="k"> holding
 * its band (<path class="band">), error bars (<line class="errbar">), line (<path
 * class="series">) and points (<circle class="pt"> or "pt regression", red), all in
 * nb_svg_series_colour(k); a legend below the axes with a <g class="legend-entry"> per
 * series naming it (and the band's rule in a <text class="legend-note">); each mark as a
 * <line class="event"> with a <text class="event-label">; value ticks with gridlines; time
 * ticks (<text class="xtick">) or commit ticks (<text class="ctick">). No finite point: an
 * <svg> that says "no data". NB_EIO when f fails. */
nb_code nb_svg_chart_write(FILE *f, const nb_svg_chart *c, nb_err *err);

/* A horizontal bar chart (a profile's per-phase or per-kernel milliseconds): one <rect
 * class="bar"> per item with its name and value, a value axis from 0 with round ticks
 * (<text class="ytick">, a <line class="grid"> each) and the unit. NB_EIO when f fails. */
nb_code nb_svg_bars_write(FILE *f, const char *title, const char *unit,
                          const char *const *names, const double *values, size_t n,
                          nb_err *err);

/* Per-layer cosines as a line chart: one <path class="cos-attn"> and one <path
 * class="cos-mlp"> over the layers (layer[i] names entry i on the axis) (a <circle class="cpt"> per finite value), the threshold
 * as a dashed <line class="threshold">, the first drop (layer index first, -1: none) as a
 * <line class="drop"> with a <circle class="drop">, value ticks with gridlines, layer ticks.
 * NaN values are gaps. NB_EIO when f fails. */
nb_code nb_svg_cosines_write(FILE *f, const long *layer, const double *attn, const double *mlp,
                             size_t n, long first, double threshold, nb_err *err);

/* The value ticks of [lo, hi]: a round step (1, 2 or 5 times a power of ten) giving 3 to
 * 8 ticks, the first at or above lo; their count (at most cap) into *n. */
void nb_svg_ticks(double lo, double hi, double *ticks, size_t cap, size_t *n);

/* The band of point i: the median of the finite values of points [i - band_runs, i)
 * times (1 -+ band_rel) into *lo and *hi; 0 when i has no earlier finite point. */
int nb_svg_band(const nb_svg_plot *p, size_t i, double *lo, double *hi);

/* Writes s to f escaped for HTML/XML text and attribute values (& < > " '); bytes XML
 * cannot carry (control characters) become '?'. NULL writes nothing. */
void nb_svg_escape(FILE *f, const char *s);

#endif
