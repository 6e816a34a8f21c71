/* nb_svg: one metric as an SVG chart — a line, points linked to their runs, error bars and
 * the regression check's noise band per series, flagged runs in red, events — in C, no JS. */
#include "nb_svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_stats.h"
#include "nb_time.h"

#define PAD_L 64 /* room for the y labels */
#define PAD_R 16
#define PAD_T 28
#define PAD_B 36

void nb_svg_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            /* XML 1.0 has no control characters but tab and newline */
            fputc(ch < 0x20 && ch != '\t' && ch != '\n' ? '?' : ch, f);
        }
    }
}

static const char *const palette[NB_SVG_PALETTE_N] = {
    "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#7f7f7f", "#bcbd22"};

const char *nb_svg_series_colour(size_t k)
{
    return palette[k % NB_SVG_PALETTE_N];
}

/* The band of pts[i]: the median of the finite values of the runs-many before it. */
static int band_at(const nb_svg_point *pts, size_t i, size_t runs, double rel, double *lo,
                   double *hi)
{
    if (!runs || i == 0)
        return 0;
    double base[256];
    size_t nb = 0, want = runs < 256 ? runs : 256;
    for (size_t j = i; j-- > 0 && nb < want;) {
        if (isfinite(pts[j].value))
            base[nb++] = pts[j].value;
    }
    if (!nb)
        return 0;
    double m = nb_stats_median(base, nb);
    if (!isfinite(m))
        return 0;
    *lo = m - fabs(m) * rel;
    *hi = m + fabs(m) * rel;
    return 1;
}

int nb_svg_band(const nb_svg_plot *p, size_t i, double *lo, double *hi)
{
    return band_at(p->pts, i, p->band_runs, p->band_rel, lo, hi);
}

static int series_band(const nb_svg_chart *c, const nb_svg_series *s, size_t i, double *lo,
                       double *hi)
{
    return band_at(s->pts, i, c->band_runs, c->band_rel, lo, hi);
}

/* The value axis: every series' points (with their stddev) and bands, with a margin, never
 * a zero-height range. */
static void y_range(const nb_svg_chart *c, double *ymin, double *ymax)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < c->n_series; k++) {
        const nb_svg_series *s = &c->series[k];
        for (size_t i = 0; i < s->n; i++) {
            double v = s->pts[i].value;
            if (!isfinite(v))
                continue;
            double sd = isfinite(s->pts[i].stddev) ? s->pts[i].stddev : 0;
            lo = fmin(lo, v - sd);
            hi = fmax(hi, v + sd);
            double bl, bh;
            if (series_band(c, s, i, &bl, &bh)) {
                lo = fmin(lo, bl);
                hi = fmax(hi, bh);
            }
        }
    }
    double span = hi - lo;
    if (!(span > 0))
        span = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1;
    *ymin = lo - span * 0.08;
    *ymax = hi + span * 0.08;
    /* a time or a rate is never negative: a band or an error bar must not draw it so */
    if (c->nonnegative && *ymin < 0)
        *ymin = 0;
}

void nb_svg_ticks(double lo, double hi, double *ticks, size_t cap, size_t *n)
{
    *n = 0;
    double span = hi - lo;
    if (!(span > 0) || !isfinite(span))
        return;
    double raw = span / 5, mag = pow(10, floor(log10(raw))), step = mag;
    for (int k = 0; k < 3; k++) {
        static const double m[3] = {1, 2, 5};
        if (raw <= m[k] * mag) {
            step = m[k] * mag;
            break;
        }
        step = 10 * mag;
    }
    for (double t = ceil(lo / step) * step; t <= hi + step * 1e-9 && *n < cap; t += step)
        ticks[(*n)++] = fabs(t) < step * 1e-9 ? 0 : t;
}

typedef struct frame {
    double ymin, ymax;
    size_t n;  /* slots */
    int pad;   /* half a slot of room each side (by commit) */
} frame;

static double px(const frame *fr, double slot)
{
    double w = NB_SVG_W - PAD_L - PAD_R;
    if (fr->pad)
        return PAD_L + w * (slot + 0.5) / (double)fr->n;
    return fr->n > 1 ? PAD_L + w * slot / (double)(fr->n - 1) : PAD_L + w / 2;
}

static double py(const frame *fr, double v)
{
    double h = NB_SVG_H_PX - PAD_T - PAD_B;
    return PAD_T + h * (1.0 - (v - fr->ymin) / (fr->ymax - fr->ymin));
}

/* Value ticks with gridlines, time or commit ticks, and the axes' names. */
static void write_grid(FILE *f, const nb_svg_chart *c, const frame *fr)
{
    double t[16];
    size_t nt;
    nb_svg_ticks(fr->ymin, fr->ymax, t, 16, &nt);
    for (size_t i = 0; i < nt; i++) {
        double y = py(fr, t[i]);
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                   "stroke=\"#ddd\"/><text class=\"ytick\" x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\" fill=\"#444\">%.6g</text>\n",
                PAD_L, y, NB_SVG_W - PAD_R, y, PAD_L - 4, y + 4, t[i]);
    }
    size_t n = fr->n;
    if (c->slot_text) {
        /* a tick per commit, every k-th when they would crowd (10 fit at 7 characters) */
        size_t every = n > 10 ? (n + 9) / 10 : 1;
        for (size_t i = 0; i < n; i += every) {
            double x = px(fr, (double)i);
            fprintf(f, "<line class=\"xgrid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                       "stroke=\"#eee\"/><text class=\"ctick\" x=\"%.1f\" y=\"%d\" "
                       "text-anchor=\"middle\" fill=\"#444\" font-size=\"9\" "
                       "font-family=\"monospace\">",
                    x, PAD_T, x, NB_SVG_H_PX - PAD_B, x, NB_SVG_H_PX - PAD_B + 13);
            char shortc[8];
            snprintf(shortc, sizeof shortc, "%s", c->slot_text[i] ? c->slot_text[i] : "");
            nb_svg_escape(f, shortc);
            fputs("<title>", f);
            nb_svg_escape(f, c->slot_text[i]);
            fputs("</title></text>\n", f);
        }
    } else if (c->slot_ms) {
        /* up to 5 time ticks at evenly spaced runs (the axis is by run, in order) */
        size_t want = n < 5 ? n : 5;
        for (size_t k = 0; k < want && n > 1; k++) {
            size_t i = want > 1 ? k * (n - 1) / (want - 1) : 0;
            double x = px(fr, (double)i);
            char iso[32];
            nb_time_iso(iso, c->slot_ms[i]);
            /* the end ticks' labels stay inside the picture */
            const char *anchor = k == 0 ? "start" : k + 1 == want ? "end" : "middle";
            fprintf(f, "<line class=\"xgrid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                       "stroke=\"#eee\"/><text class=\"xtick\" x=\"%.1f\" y=\"%d\" "
                       "text-anchor=\"%s\" fill=\"#444\" font-size=\"9\">%.5s %.5s</text>\n",
                    x, PAD_T, x, NB_SVG_H_PX - PAD_B, x, NB_SVG_H_PX - PAD_B + 13, anchor,
                    iso + 5, iso + 11);
        }
    }
    if (c->unit && *c->unit) {
        fprintf(f, "<text class=\"ylabel\" x=\"12\" y=\"%d\" text-anchor=\"middle\" "
                   "transform=\"rotate(-90 12 %d)\" fill=\"#444\">",
                NB_SVG_H_PX / 2, NB_SVG_H_PX / 2);
        nb_svg_escape(f, c->unit);
        fputs("</text>\n", f);
    }
}

static void write_band(FILE *f, const nb_svg_chart *c, const nb_svg_series *s, const frame *fr,
                       const char *colour)
{
    /* upper edge left to right, lower edge back: one closed polygon over the points that
     * have a band (all but the first) */
    size_t first = s->n;
    for (size_t i = 0; i < s->n; i++) {
        double lo, hi;
        if (isfinite(s->pts[i].value) && series_band(c, s, i, &lo, &hi)) {
            first = i;
            break;
        }
    }
    if (first >= s->n)
        return;
    fprintf(f, "<path class=\"band\" fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" d=\"",
            colour);
    int started = 0;
    size_t last = first;
    for (size_t i = first; i < s->n; i++) {
        double lo, hi;
        if (!isfinite(s->pts[i].value) || !series_band(c, s, i, &lo, &hi))
            continue;
        fprintf(f, "%c%.1f,%.1f ", started ? 'L' : 'M', px(fr, s->pts[i].slot),
                py(fr, hi));
        started = 1;
        last = i;
    }
    if (last == first) { /* one point with a band: a band as wide as a slot's gap */
        double lo, hi;
        series_band(c, s, first, &lo, &hi);
        double x = px(fr, s->pts[first].slot);
        fprintf(f, "M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f L%.1f,%.1f Z\">", x - 4, py(fr, hi), x + 4,
                py(fr, hi), x + 4, py(fr, lo), x - 4, py(fr, lo));
    } else {
        for (size_t i = s->n; i-- > first;) {
            double lo, hi;
            if (!isfinite(s->pts[i].value) || !series_band(c, s, i, &lo, &hi))
                continue;
            fprintf(f, "L%.1f,%.1f ", px(fr, s->pts[i].slot), py(fr, lo));
        }
        fputs("Z\">", f);
    }
    fprintf(f, "<title>noise band: median of the previous %zu runs of this series &#177; "
               "%.3g%%, the regression check's threshold</title></path>\n",
            c->band_runs, c->band_rel * 100);
}

static void write_series(FILE *f, const nb_svg_chart *c, size_t k, const frame *fr)
{
    const nb_svg_series *s = &c->series[k];
    const char *col = nb_svg_series_colour(k);
    fprintf(f, "<g class=\"series-%zu\" data-series=\"%zu\">\n", k, k);
    write_band(f, c, s, fr, col);
    /* error bars: mean +- stddev over the run's repetitions, clipped to the axis */
    for (size_t i = 0; i < s->n; i++) {
        const nb_svg_point *q = &s->pts[i];
        if (!isfinite(q->value) || !isfinite(q->stddev) || !(q->stddev > 0))
            continue;
        double lo = fmax(q->value - q->stddev, fr->ymin);
        double hi = fmin(q->value + q->stddev, fr->ymax);
        double x = px(fr, q->slot);
        fprintf(f, "<line class=\"errbar\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"%s\" stroke-opacity=\"0.6\"/>\n",
                x, py(fr, lo), x, py(fr, hi), col);
    }
    /* the line through the finite points, in run order */
    fprintf(f, "<path class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" d=\"",
            col);
    int started = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->pts[i].value))
            continue;
        fprintf(f, "%c%.1f,%.1f ", started ? 'L' : 'M', px(fr, s->pts[i].slot),
                py(fr, s->pts[i].value));
        started = 1;
    }
    fputs("\"/>\n", f);
    for (size_t i = 0; i < s->n; i++) {
        const nb_svg_point *q = &s->pts[i];
        if (!isfinite(q->value))
            continue;
        char when[32];
        nb_time_iso(when, q->when_ms);
        if (c->link_prefix)
            fprintf(f, "<a href=\"run-%lld.html\">", (long long)q->run_id);
        fprintf(f,
                "<circle class=\"pt%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\">"
                "<title>run %lld, %s: %.4g",
                q->regression ? " regression" : "", px(fr, q->slot), py(fr, q->value),
                q->regression ? 5 : 3, q->regression ? NB_SVG_FLAG_COLOUR : col,
                (long long)q->run_id, when, q->value);
        if (isfinite(q->stddev))
            fprintf(f, " &#177; %.3g", q->stddev);
        fprintf(f, "%s</title></circle>", q->regression ? " REGRESSION" : "");
        fputs(c->link_prefix ? "</a>\n" : "\n", f);
    }
    fputs("</g>\n", f);
}

/* Events: a line halfway between the two runs it came between (whole pixels, so the line
 * is its colour and not a blend), labels stacked where they would overlap. */
static void write_marks(FILE *f, const nb_svg_chart *c, const frame *fr)
{
    for (size_t m = 0; m < c->n_marks; m++) {
        const nb_svg_mark *k = &c->marks[m];
        if (k->slot == 0 || k->slot >= fr->n)
            continue;
        double x = floor(px(fr, (double)k->slot - 0.5)) + 0.5; /* whole pixels 1 wide */
        /* a label a row lower for each earlier one it would run into (same gap or close) */
        size_t same = 0;
        for (size_t j = 0; j < m; j++)
            same += c->marks[j].slot > 0 && c->marks[j].slot < fr->n &&
                    fabs(floor(px(fr, (double)c->marks[j].slot - 0.5)) + 0.5 - x) < 90;
        fprintf(f, "<line class=\"event\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                   "stroke=\"%s\" stroke-width=\"3\"><title>",
                x, PAD_T, x, NB_SVG_H_PX - PAD_B, NB_SVG_EVENT_COLOUR);
        nb_svg_escape(f, k->label);
        fprintf(f, "</title></line><text class=\"event-label\" x=\"%.0f\" y=\"%zu\" "
                   "fill=\"#a64b00\" font-size=\"9\">",
                x + 3, (size_t)PAD_T + 9 + 10 * same);
        nb_svg_escape(f, k->label);
        fputs("</text>\n", f);
    }
}

#define LEGEND_ROW 15

static void write_legend(FILE *f, const nb_svg_chart *c, int y0)
{
    int y = y0;
    for (size_t k = 0; k < c->n_series; k++, y += LEGEND_ROW) {
        const nb_svg_series *s = &c->series[k];
        const char *col = nb_svg_series_colour(k);
        fprintf(f, "<g class=\"legend-entry\" data-series=\"%zu\"><line x1=\"%d\" y1=\"%d\" "
                   "x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/><circle cx=\"%d\" "
                   "cy=\"%d\" r=\"3\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">",
                k, PAD_L, y - 4, PAD_L + 18, y - 4, col, PAD_L + 9, y - 4, col, PAD_L + 24, y);
        nb_svg_escape(f, s->label && *s->label ? s->label : "(unnamed)");
        size_t n = 0;
        for (size_t i = 0; i < s->n; i++)
            n += isfinite(s->pts[i].value) != 0;
        fprintf(f, " (%zu run%s)</text></g>\n", n, n == 1 ? "" : "s");
    }
    fprintf(f, "<text class=\"legend-note\" x=\"%d\" y=\"%d\" fill=\"#666\" font-size=\"9\">"
               "shaded: each series' noise band, the median of its previous %zu runs &#177; "
               "%.3g%% (the regression check's)</text>\n<text class=\"legend-note\" x=\"%d\" "
               "y=\"%d\" fill=\"#666\" font-size=\"9\">red: a run flagged on this metric%s"
               "</text>\n",
            PAD_L, y, c->band_runs, c->band_rel * 100, PAD_L, y + 11,
            c->n_marks ? "; orange: the NPU driver, firmware or mlir-air commit changed" : "");
}

static size_t chart_finite(const nb_svg_chart *c)
{
    size_t finite = 0;
    for (size_t k = 0; k < c->n_series; k++)
        for (size_t i = 0; i < c->series[k].n; i++)
            finite += isfinite(c->series[k].pts[i].value) != 0;
    return finite;
}

nb_code nb_svg_chart_write(FILE *f, const nb_svg_chart *c, nb_err *err)
{
    size_t finite = chart_finite(c);
    /* a legend only where a series is named (nb_svg_plot_write's single series is not) */
    int legend = c->n_series > 0 && c->series[0].label && finite;
    int h = NB_SVG_H_PX + (legend ? LEGEND_ROW * (int)(c->n_series + 1) + 16 : 0);
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n"
            "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">",
            NB_SVG_W, h, NB_SVG_W, h, NB_SVG_W, h, PAD_L);
    nb_svg_escape(f, c->title);
    fputs("</text>\n", f);
    if (!finite) {
        fprintf(f, "<text class=\"nodata\" x=\"%d\" y=\"%d\">no data</text>\n</svg>\n",
                NB_SVG_W / 2 - 24, NB_SVG_H_PX / 2);
        return ferror(f) ? nb_err_set(err, NB_EIO, "svg: write failed") : NB_OK;
    }
    frame fr = {0, 0, c->n_slots ? c->n_slots : 1, c->slot_text != NULL};
    y_range(c, &fr.ymin, &fr.ymax);
    /* axes and the min / max labels */
    fprintf(f,
            "<path class=\"axis\" stroke=\"#444\" fill=\"none\" d=\"M%d,%d L%d,%d L%d,%d\"/>\n",
            PAD_L, PAD_T, PAD_L, NB_SVG_H_PX - PAD_B, NB_SVG_W - PAD_R, NB_SVG_H_PX - PAD_B);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", PAD_L - 4,
            py(&fr, fr.ymax) + 4, fr.ymax);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", PAD_L - 4,
            py(&fr, fr.ymin), fr.ymin);
    if (c->slot_ms) {
        /* the first and last runs' dates: the time ticks give month-day and time */
        char a[32], b[32];
        nb_time_iso(a, c->slot_ms[0]);
        nb_time_iso(b, c->slot_ms[fr.n - 1]);
        fprintf(f, "<text class=\"xrange\" x=\"%d\" y=\"%d\" fill=\"#666\" font-size=\"9\">"
                   "%.10s</text>\n", PAD_L, NB_SVG_H_PX - 6, a);
        fprintf(f, "<text class=\"xrange\" x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#666\" "
                   "font-size=\"9\">%.10s</text>\n", NB_SVG_W - PAD_R, NB_SVG_H_PX - 6, b);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#666\">%zu run%s%s%s (%s "
               "is better)</text>\n",
            (NB_SVG_W + PAD_L) / 2, NB_SVG_H_PX - 6, finite, finite == 1 ? "" : "s",
            c->xlabel ? " by " : "", c->xlabel ? c->xlabel : "",
            c->higher_is_better ? "higher" : "lower");
    write_grid(f, c, &fr);
    write_marks(f, c, &fr);
    for (size_t k = 0; k < c->n_series; k++)
        write_series(f, c, k, &fr);
    if (legend)
        write_legend(f, c, NB_SVG_H_PX + LEGEND_ROW);
    fputs("</svg>\n", f);
    return ferror(f) ? nb_err_set(err, NB_EIO, "svg: write failed") : NB_OK;
}

nb_code nb_svg_plot_write(FILE *f, const nb_svg_plot *p, nb_err *err)
{
    size_t n = p->n ? p->n : 1;
    nb_svg_point *pts = malloc(n * sizeof *pts);
    int64_t *ms = malloc(n * sizeof *ms);
    if (!pts || !ms) {
        free(pts);
        free(ms);
        return nb_err_set(err, NB_ENOMEM, "svg: out of memory");
    }
    for (size_t i = 0; i < p->n; i++) {
        pts[i] = p->pts[i];
        pts[i].slot = (double)i;
        ms[i] = p->pts[i].when_ms;
    }
    nb_svg_series s = {NULL, pts, p->n};
    nb_svg_chart c = {.title = p->title, .unit = p->unit,
                      .higher_is_better = p->higher_is_better,
                      .nonnegative = p->nonnegative, .link_prefix = p->link_prefix,
                      .band_runs = p->band_runs, .band_rel = p->band_rel,
                      .series = &s, .n_series = 1, .n_slots = p->n, .slot_ms = ms};
    nb_code rc = nb_svg_chart_write(f, &c, err);
    free(pts);
    free(ms);
    return rc;
}

nb_code nb_svg_bars_write(FILE *f, const char *title, const char *unit,
                          const char *const *names, const double *values, size_t n,
                          nb_err *err)
{
    const int left = 150, right = 70, top = 28, bar = 16, gap = 6, bottom = 34;
    int h = top + (int)n * (bar + gap) + bottom;
    double hi = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(values[i]) && values[i] > hi)
            hi = values[i];
    if (!(hi > 0))
        hi = 1;
    double t[16];
    size_t nt;
    nb_svg_ticks(0, hi, t, 16, &nt);
    if (nt && t[nt - 1] < hi) /* the axis ends at a tick past the longest bar */
        hi = t[nt - 1] + (nt > 1 ? t[1] - t[0] : hi);
    nb_svg_ticks(0, hi, t, 16, &nt);
    double w = NB_SVG_W - left - right;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"bars\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n"
            "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">",
            NB_SVG_W, h, NB_SVG_W, h, NB_SVG_W, h, left);
    nb_svg_escape(f, title);
    fputs("</text>\n", f);
    for (size_t i = 0; i < nt; i++) {
        double x = left + w * t[i] / hi;
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                   "stroke=\"#ddd\"/><text class=\"ytick\" x=\"%.1f\" y=\"%d\" "
                   "text-anchor=\"middle\" fill=\"#444\">%.6g</text>\n",
                x, top, x, h - bottom, x, h - bottom + 14, t[i]);
    }
    if (unit && *unit) {
        fprintf(f, "<text class=\"ylabel\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                   "fill=\"#444\">",
                left + w / 2, h - 6);
        nb_svg_escape(f, unit);
        fputs("</text>\n", f);
    }
    for (size_t i = 0; i < n; i++) {
        double v = isfinite(values[i]) && values[i] > 0 ? values[i] : 0;
        int y = top + (int)i * (bar + gap);
        fprintf(f, "<text class=\"barname\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6,
                y + bar - 4);
        nb_svg_escape(f, names[i]);
        fprintf(f, "</text><rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                   "fill=\"#08519c\"><title>",
                left, y, w * v / hi, bar);
        nb_svg_escape(f, names[i]);
        fprintf(f, ": %.4g</title></rect><text class=\"barvalue\" x=\"%.1f\" y=\"%d\">%.4g"
                   "</text>\n",
                values[i], left + w * v / hi + 4, y + bar - 4, values[i]);
    }
    fprintf(f, "<path class=\"axis\" stroke=\"#444\" fill=\"none\" d=\"M%d,%d L%d,%d\"/>\n"
               "</svg>\n",
            left, top - 4, left, h - bottom);
    return ferror(f) ? nb_err_set(err, NB_EIO, "svg: write failed") : NB_OK;
}

nb_code nb_svg_cosines_write(FILE *f, const long *layer, const double *attn, const double *mlp,
                             size_t n, long first, double threshold, nb_err *err)
{
    double lo = isfinite(threshold) ? threshold : 1;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(attn[i]))
            lo = fmin(lo, attn[i]);
        if (isfinite(mlp[i]))
            lo = fmin(lo, mlp[i]);
    }
    double hi = 1.0;
    lo -= (hi - lo) * 0.08 + 1e-6;
    double w = NB_SVG_W - PAD_L - PAD_R, h = NB_SVG_H_PX - PAD_T - PAD_B;
#define CX(i) (PAD_L + (n > 1 ? w * (double)(i) / (double)(n - 1) : w / 2))
#define CY(v) (PAD_T + h * (1.0 - ((v) - lo) / (hi - lo)))
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"cosines\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n"
            "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">Cosine to the "
            "reference per layer (blue: after attention, green: after the MLP)</text>\n",
            NB_SVG_W, NB_SVG_H_PX, NB_SVG_W, NB_SVG_H_PX, NB_SVG_W, NB_SVG_H_PX, PAD_L);
    double t[16];
    size_t nt;
    nb_svg_ticks(lo, hi, t, 16, &nt);
    for (size_t i = 0; i < nt; i++)
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                   "stroke=\"#ddd\"/><text class=\"ytick\" x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\" fill=\"#444\">%.6g</text>\n",
                PAD_L, CY(t[i]), NB_SVG_W - PAD_R, CY(t[i]), PAD_L - 4, CY(t[i]) + 4, t[i]);
    size_t every = n > 16 ? (n + 15) / 16 : 1;
    for (size_t i = 0; i < n; i += every)
        fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                   "fill=\"#444\">%ld</text>\n",
                CX(i), NB_SVG_H_PX - PAD_B + 14, layer[i]);
    fprintf(f, "<text class=\"xlabel\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
               "fill=\"#444\">layer</text>\n",
            PAD_L + w / 2, NB_SVG_H_PX - 6);
    if (isfinite(threshold) && threshold >= lo && threshold <= hi)
        fprintf(f, "<line class=\"threshold\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                   "stroke=\"#c00\" stroke-dasharray=\"4 3\"><title>threshold %.4g</title>"
                   "</line>\n",
                PAD_L, CY(threshold), NB_SVG_W - PAD_R, CY(threshold), threshold);
    const double *ser[2] = {attn, mlp};
    static const char *const cls[2] = {"cos-attn", "cos-mlp"}, *const col[2] = {"#08519c",
                                                                               "#31a354"};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<path class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" d=\"",
                cls[s], col[s]);
        int pen = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(ser[s][i])) {
                pen = 0;
                continue;
            }
            fprintf(f, "%c%.1f,%.1f ", pen ? 'L' : 'M', CX(i), CY(ser[s][i]));
            pen = 1;
        }
        fputs("\"/>\n", f);
        for (size_t i = 0; i < n; i++)
            if (isfinite(ser[s][i]))
                fprintf(f, "<circle class=\"cpt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\">"
                           "<title>layer %ld: %.5f</title></circle>\n",
                        CX(i), CY(ser[s][i]), col[s], layer[i], ser[s][i]);
    }
    if (first >= 0 && (size_t)first < n) {
        double v = isfinite(mlp[first]) ? mlp[first] : attn[first];
        fprintf(f, "<line class=\"drop\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                   "stroke=\"#c00\"/>\n",
                CX(first), PAD_T, CX(first), NB_SVG_H_PX - PAD_B);
        if (isfinite(v))
            fprintf(f, "<circle class=\"drop\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" "
                       "stroke=\"#c00\" stroke-width=\"2\"><title>first drop: layer %ld, "
                       "%.5f</title></circle>\n",
                    CX(first), CY(v), layer[first], v);
    }
#undef CX
#undef CY
    fprintf(f, "<path class=\"axis\" stroke=\"#444\" fill=\"none\" d=\"M%d,%d L%d,%d L%d,%d\"/>"
               "\n</svg>\n",
            PAD_L, PAD_T, PAD_L, NB_SVG_H_PX - PAD_B, NB_SVG_W - PAD_R, NB_SVG_H_PX - PAD_B);
    return ferror(f) ? nb_err_set(err, NB_EIO, "svg: write failed") : NB_OK;
}
