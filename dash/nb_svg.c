/* nb_svg: one metric of a deployment as an SVG line plot — series, points linked to their
 * runs, the regression check's noise band, flagged runs in red — written in C, no JS. */
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

int nb_svg_band(const nb_svg_plot *p, size_t i, double *lo, double *hi)
{
    if (!p->band_runs || i == 0)
        return 0;
    double base[256];
    size_t nb = 0, want = p->band_runs < 256 ? p->band_runs : 256;
    for (size_t j = i; j-- > 0 && nb < want;) {
        if (isfinite(p->pts[j].value))
            base[nb++] = p->pts[j].value;
    }
    if (!nb)
        return 0;
    double m = nb_stats_median(base, nb);
    if (!isfinite(m))
        return 0;
    *lo = m - fabs(m) * p->band_rel;
    *hi = m + fabs(m) * p->band_rel;
    return 1;
}

/* The value axis: the points (with their stddev) and the band, with a margin, never a
 * zero-height range. */
static void y_range(const nb_svg_plot *p, double *ymin, double *ymax)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < p->n; i++) {
        double v = p->pts[i].value;
        if (!isfinite(v))
            continue;
        double s = isfinite(p->pts[i].stddev) ? p->pts[i].stddev : 0;
        lo = fmin(lo, v - s);
        hi = fmax(hi, v + s);
        double bl, bh;
        if (nb_svg_band(p, i, &bl, &bh)) {
            lo = fmin(lo, bl);
            hi = fmax(hi, bh);
        }
    }
    double span = hi - lo;
    if (!(span > 0))
        span = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1;
    *ymin = lo - span * 0.08;
    *ymax = hi + span * 0.08;
    /* a time or a rate is never negative: a band or an error bar must not draw it so */
    if (p->nonnegative && *ymin < 0)
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

/* Value ticks with gridlines, time ticks with gridlines, and the unit. */
static void write_grid(FILE *f, const nb_svg_plot *p, double ymin, double ymax, size_t n,
                       double (*pyf)(double ymin, double ymax, double v))
{
    double t[16];
    size_t nt;
    nb_svg_ticks(ymin, ymax, t, 16, &nt);
    for (size_t i = 0; i < nt; i++) {
        double y = pyf(ymin, ymax, t[i]);
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                   "stroke=\"#ddd\"/><text class=\"ytick\" x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\" fill=\"#444\">%.6g</text>\n",
                PAD_L, y, NB_SVG_W - PAD_R, y, PAD_L - 4, y + 4, t[i]);
    }
    /* up to 5 time ticks at evenly spaced runs (the axis is by run, in order) */
    size_t want = n < 5 ? n : 5;
    for (size_t k = 0; k < want && n > 1; k++) {
        size_t i = want > 1 ? k * (n - 1) / (want - 1) : 0;
        double w = NB_SVG_W - PAD_L - PAD_R, x = PAD_L + w * (double)i / (double)(n - 1);
        char iso[32];
        nb_time_iso(iso, p->pts[i].when_ms);
        fprintf(f, "<line class=\"xgrid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                   "stroke=\"#eee\"/><text class=\"xtick\" x=\"%.1f\" y=\"%d\" "
                   "text-anchor=\"middle\" fill=\"#444\" font-size=\"9\">%.5s %.5s</text>\n",
                x, PAD_T, x, NB_SVG_H_PX - PAD_B, x, NB_SVG_H_PX - PAD_B + 13, iso + 5,
                iso + 11);
    }
    if (p->unit && *p->unit) {
        fprintf(f, "<text class=\"ylabel\" x=\"12\" y=\"%d\" text-anchor=\"middle\" "
                   "transform=\"rotate(-90 12 %d)\" fill=\"#444\">",
                NB_SVG_H_PX / 2, NB_SVG_H_PX / 2);
        nb_svg_escape(f, p->unit);
        fputs("</text>\n", f);
    }
}

typedef struct frame {
    double ymin, ymax;
    size_t n;
} frame;

static double px(const frame *fr, size_t i)
{
    double w = NB_SVG_W - PAD_L - PAD_R;
    return fr->n > 1 ? PAD_L + w * (double)i / (double)(fr->n - 1) : PAD_L + w / 2;
}

static double py_of(double ymin, double ymax, double v)
{
    double h = NB_SVG_H_PX - PAD_T - PAD_B;
    return PAD_T + h * (1.0 - (v - ymin) / (ymax - ymin));
}

static double py(const frame *fr, double v)
{
    return py_of(fr->ymin, fr->ymax, v);
}

static void write_band(FILE *f, const nb_svg_plot *p, const frame *fr)
{
    /* upper edge left to right, lower edge back: one closed polygon per run of points
     * that have a band (a gap only where a point has none, i.e. the first). */
    size_t first = p->n;
    for (size_t i = 0; i < p->n; i++) {
        double lo, hi;
        if (isfinite(p->pts[i].value) && nb_svg_band(p, i, &lo, &hi)) {
            first = i;
            break;
        }
    }
    if (first >= p->n)
        return;
    fputs("<path class=\"band\" fill=\"#9ecae1\" fill-opacity=\"0.35\" stroke=\"none\" d=\"", f);
    int started = 0;
    for (size_t i = first; i < p->n; i++) {
        double lo, hi;
        if (!isfinite(p->pts[i].value) || !nb_svg_band(p, i, &lo, &hi))
            continue;
        fprintf(f, "%c%.1f,%.1f ", started ? 'L' : 'M', px(fr, i), py(fr, hi));
        started = 1;
    }
    for (size_t i = p->n; i-- > first;) {
        double lo, hi;
        if (!isfinite(p->pts[i].value) || !nb_svg_band(p, i, &lo, &hi))
            continue;
        fprintf(f, "L%.1f,%.1f ", px(fr, i), py(fr, lo));
    }
    fputs("Z\"><title>noise band: median of the previous runs &#177; the regression "
          "threshold</title></path>\n",
          f);
}

nb_code nb_svg_plot_write(FILE *f, const nb_svg_plot *p, nb_err *err)
{
    size_t finite = 0;
    for (size_t i = 0; i < p->n; i++)
        finite += isfinite(p->pts[i].value) != 0;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n"
            "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">",
            NB_SVG_W, NB_SVG_H_PX, NB_SVG_W, NB_SVG_H_PX, NB_SVG_W, NB_SVG_H_PX, PAD_L);
    nb_svg_escape(f, p->title);
    fputs("</text>\n", f);
    if (!finite) {
        fprintf(f, "<text class=\"nodata\" x=\"%d\" y=\"%d\">no data</text>\n</svg>\n",
                NB_SVG_W / 2 - 24, NB_SVG_H_PX / 2);
        return ferror(f) ? nb_err_set(err, NB_EIO, "svg: write failed") : NB_OK;
    }
    frame fr = {0, 0, p->n};
    y_range(p, &fr.ymin, &fr.ymax);
    /* axes and the min / max labels */
    fprintf(f,
            "<path class=\"axis\" stroke=\"#444\" fill=\"none\" d=\"M%d,%d L%d,%d L%d,%d\"/>\n",
            PAD_L, PAD_T, PAD_L, NB_SVG_H_PX - PAD_B, NB_SVG_W - PAD_R, NB_SVG_H_PX - PAD_B);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", PAD_L - 4,
            py(&fr, fr.ymax) + 4, fr.ymax);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", PAD_L - 4,
            py(&fr, fr.ymin), fr.ymin);
    /* the first and last runs' dates: the time ticks (write_grid) give month-day and time */
    char a[32], b[32];
    nb_time_iso(a, p->pts[0].when_ms);
    nb_time_iso(b, p->pts[p->n - 1].when_ms);
    fprintf(f, "<text class=\"xrange\" x=\"%d\" y=\"%d\" fill=\"#666\" font-size=\"9\">%.10s"
               "</text>\n", PAD_L, NB_SVG_H_PX - 6, a);
    fprintf(f, "<text class=\"xrange\" x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#666\" "
               "font-size=\"9\">%.10s</text>\n", NB_SVG_W - PAD_R, NB_SVG_H_PX - 6, b);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#666\">%zu run%s (%s "
               "is better)</text>\n",
            (NB_SVG_W + PAD_L) / 2, NB_SVG_H_PX - 6, p->n, p->n == 1 ? "" : "s",
            p->higher_is_better ? "higher" : "lower");
    write_grid(f, p, fr.ymin, fr.ymax, p->n, py_of);
    write_band(f, p, &fr);
    /* error bars: mean +- stddev over the run's repetitions, clipped to the axis */
    for (size_t i = 0; i < p->n; i++) {
        const nb_svg_point *q = &p->pts[i];
        if (!isfinite(q->value) || !isfinite(q->stddev) || !(q->stddev > 0))
            continue;
        double lo = fmax(q->value - q->stddev, fr.ymin), hi = fmin(q->value + q->stddev, fr.ymax);
        fprintf(f, "<line class=\"errbar\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#08519c\" stroke-opacity=\"0.6\"/>\n",
                px(&fr, i), py(&fr, lo), px(&fr, i), py(&fr, hi));
    }
    /* the series: one path through the finite points, in run order */
    fputs("<path class=\"series\" fill=\"none\" stroke=\"#08519c\" stroke-width=\"1.5\" d=\"", f);
    int started = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (!isfinite(p->pts[i].value))
            continue;
        fprintf(f, "%c%.1f,%.1f ", started ? 'L' : 'M', px(&fr, i), py(&fr, p->pts[i].value));
        started = 1;
    }
    fputs("\"/>\n", f);
    for (size_t i = 0; i < p->n; i++) {
        const nb_svg_point *q = &p->pts[i];
        if (!isfinite(q->value))
            continue;
        char when[32];
        nb_time_iso(when, q->when_ms);
        if (p->link_prefix)
            fprintf(f, "<a href=\"run-%lld.html\">", (long long)q->run_id);
        fprintf(f,
                "<circle class=\"pt%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\">"
                "<title>run %lld, %s: %.4g",
                q->regression ? " regression" : "", px(&fr, i), py(&fr, q->value),
                q->regression ? 5 : 3, q->regression ? "#d62728" : "#08519c",
                (long long)q->run_id, when, q->value);
        if (isfinite(q->stddev))
            fprintf(f, " &#177; %.3g", q->stddev);
        fprintf(f, "%s</title></circle>", q->regression ? " REGRESSION" : "");
        fputs(p->link_prefix ? "</a>\n" : "\n", f);
    }
    fputs("</svg>\n", f);
    return ferror(f) ? nb_err_set(err, NB_EIO, "svg: write failed") : NB_OK;
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
