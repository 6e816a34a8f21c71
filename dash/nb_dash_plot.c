/* nb_dash_plot: history rows grouped by series key into nb_svg's series, slots by time or by
 * commit, and the events between consecutive runs read from their toolchain entries. */
#include "nb_dash_plot.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_svg.h"

/* The commit a row sits at on the axis of kind which ("mlir-air" or "npubench"). */
static const char *row_commit(const nb_db_history_row *r, const char *which)
{
    return !strcmp(which, "mlir-air") ? r->air_sha : r->commit;
}

const char *nb_dash_plot_commit(const nb_db_history_row *rows, size_t n)
{
    const char *which = NULL;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].air_sha[0])
            return "mlir-air";
        if (rows[i].commit[0])
            which = "npubench";
    }
    return which;
}

#define EVENT_LABEL_MAX (NB_DB_NAME_MAX + 16)

typedef struct work {
    char (*keys)[NB_DB_SERIES_MAX];
    char (*labels)[NB_DB_SERIES_MAX];
    size_t *sidx, *slot, n_series, n_slots;
    nb_svg_point *pts;
    nb_svg_series *series;
    int64_t *slot_ms;
    const char **slot_text;
    nb_svg_mark *marks;
    char (*mark_text)[EVENT_LABEL_MAX];
    size_t n_marks;
    double *x; /* each row's x (its slot, spread by commit) */
} work;

static void work_free(work *w)
{
    free(w->keys);
    free(w->labels);
    free(w->sidx);
    free(w->slot);
    free(w->pts);
    free(w->series);
    free(w->slot_ms);
    free(w->slot_text);
    free(w->marks);
    free(w->mark_text);
    free(w->x);
}

static int work_alloc(work *w, size_t n)
{
    memset(w, 0, sizeof *w);
    size_t m = n ? n : 1;
    w->keys = malloc(m * sizeof *w->keys);
    w->labels = malloc(m * sizeof *w->labels);
    w->sidx = malloc(m * sizeof *w->sidx);
    w->slot = malloc(m * sizeof *w->slot);
    w->pts = malloc(m * sizeof *w->pts);
    w->series = malloc(m * sizeof *w->series);
    w->slot_ms = malloc(m * sizeof *w->slot_ms);
    w->slot_text = malloc(m * sizeof *w->slot_text);
    w->marks = malloc(3 * m * sizeof *w->marks);
    w->mark_text = malloc(3 * m * sizeof *w->mark_text);
    w->x = malloc(m * sizeof *w->x);
    return w->x && w->keys && w->labels && w->sidx && w->slot && w->pts && w->series && w->slot_ms &&
           w->slot_text && w->marks && w->mark_text;
}

/* The x slot of each row (SIZE_MAX: not on this axis). */
static void place(const nb_dash_plot_in *in, const char *which, work *w)
{
    for (size_t i = 0; i < in->n; i++) {
        const nb_db_history_row *r = &in->rows[i];
        if (!which) { /* by time: a slot per run, in order */
            w->slot[i] = w->n_slots;
            w->slot_ms[w->n_slots++] = r->started_ms;
            continue;
        }
        const char *c = row_commit(r, which);
        w->slot[i] = SIZE_MAX;
        if (!*c)
            continue;
        size_t s = 0;
        while (s < w->n_slots && strcmp(w->slot_text[s], c))
            s++;
        if (s == w->n_slots)
            w->slot_text[w->n_slots++] = c;
        w->slot[i] = s;
    }
    /* the runs of one commit side by side around its tick, oldest left (stacked on one x
     * they would hide each other and draw their line straight up and down) */
    size_t *of = which ? calloc(w->n_slots ? w->n_slots : 1, 2 * sizeof *of) : NULL;
    for (size_t i = 0; of && i < in->n; i++)
        if (w->slot[i] != SIZE_MAX)
            of[2 * w->slot[i]]++;
    for (size_t i = 0; i < in->n; i++) {
        w->x[i] = (double)w->slot[i];
        if (!of || w->slot[i] == SIZE_MAX)
            continue;
        size_t *c = &of[2 * w->slot[i]], k = c[1]++; /* runs of the slot, this one's rank */
        if (c[0] > 1)
            w->x[i] += -0.4 + 0.8 * (double)k / (double)(c[0] - 1);
    }
    free(of); /* out of memory: the runs of a commit stacked at its tick, still all drawn */
}

/* A run's driver, firmware or mlir-air commit differing from the run before it: an event
 * at its slot. Unrecorded ("") on either side says nothing. */
static void events(const nb_dash_plot_in *in, work *w)
{
    for (size_t i = 1; i < in->n; i++) {
        const nb_db_history_row *a = &in->rows[i - 1], *b = &in->rows[i];
        const char *const what[3] = {"driver", "firmware", "mlir-air"};
        const char *const was[3] = {a->driver, a->firmware, a->air_sha};
        const char *const now[3] = {b->driver, b->firmware, b->air_sha};
        for (int k = 0; k < 3; k++) {
            if (!*was[k] || !*now[k] || !strcmp(was[k], now[k]))
                continue;
            snprintf(w->mark_text[w->n_marks], EVENT_LABEL_MAX, "%s %.*s", what[k],
                     k == 2 ? 7 : NB_DB_NAME_MAX, now[k]);
            w->marks[w->n_marks] = (nb_svg_mark){w->slot[i], w->mark_text[w->n_marks]};
            w->n_marks++;
        }
    }
}

nb_code nb_dash_plot_write(FILE *f, const nb_dash_plot_in *in, nb_err *err)
{
    work w;
    if (!work_alloc(&w, in->n)) {
        work_free(&w);
        return nb_err_set(err, NB_ENOMEM, "plot: out of memory");
    }
    const char *which = in->by_commit ? nb_dash_plot_commit(in->rows, in->n) : NULL;
    if (in->by_commit && !which)
        which = "npubench"; /* no commits: every run left out, the chart says "no data" */
    place(in, which, &w);
    /* a series per key, in the order of its first run */
    for (size_t i = 0; i < in->n; i++) {
        nb_db_series se = nb_db_history_row_series(&in->rows[i]);
        char key[NB_DB_SERIES_MAX];
        nb_db_series_key(&se, key, sizeof key);
        size_t s = 0;
        while (s < w.n_series && strcmp(w.keys[s], key))
            s++;
        if (s == w.n_series) {
            memcpy(w.keys[s], key, sizeof key);
            nb_db_series_label(&se, w.labels[s], sizeof w.labels[s]);
            w.n_series++;
        }
        w.sidx[i] = s;
    }
    size_t np = 0;
    for (size_t s = 0; s < w.n_series; s++) {
        w.series[s] = (nb_svg_series){w.labels[s], &w.pts[np], 0};
        for (size_t i = 0; i < in->n; i++) {
            const nb_db_history_row *r = &in->rows[i];
            if (w.sidx[i] != s || w.slot[i] == SIZE_MAX)
                continue;
            w.pts[np++] = (nb_svg_point){
                .run_id = r->run_id,
                .when_ms = r->started_ms,
                .value = r->value,
                .stddev = r->reps > 1 ? r->stddev : NAN,
                /* a TTFT-only regression is red on the TTFT plot alone */
                .regression = (int)((r->regression_metrics >> in->metric) & 1u),
                .slot = w.x[i],
            };
            w.series[s].n++;
        }
    }
    if (!which)
        events(in, &w);
    char title[256];
    snprintf(title, sizeof title, "%s%s%s%s", in->title, which ? " by " : "",
             which ? which : "", which ? " commit" : "");
    char xlabel[32];
    snprintf(xlabel, sizeof xlabel, "%s commit", which ? which : "");
    nb_svg_chart c = {.title = title,
                      .unit = in->unit,
                      .higher_is_better = nb_db_metric_higher_is_better(in->metric),
                      .nonnegative = 1,
                      .link_prefix = in->link,
                      .band_runs = in->band_runs,
                      .band_rel = in->band_rel,
                      .series = w.series,
                      .n_series = w.n_series,
                      .n_slots = w.n_slots,
                      .slot_ms = which ? NULL : w.slot_ms,
                      .slot_text = which ? w.slot_text : NULL,
                      .xlabel = which ? xlabel : NULL,
                      .marks = w.marks,
                      .n_marks = w.n_marks};
    nb_code rc = nb_svg_chart_write(f, &c, err);
    work_free(&w);
    return rc;
}
