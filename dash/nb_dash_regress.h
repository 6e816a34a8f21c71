/* nb_dash_regress: the regressions page (each flagged run's regression: new, acknowledged by
 * whom and why, or fixed by which run or person) and the state row of a flagged run's page. */
#ifndef NB_DASH_REGRESS_H
#define NB_DASH_REGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "nb_dash.h"
#include "nb_dash_job.h"

/* Regressions a page lists, the newest. */
#define NB_DASH_REGRESS_MAX 500

/* regressions.html */
nb_code nb_dash_regress_page(nb_db *db, const nb_dash_opts *o, FILE *f, nb_err *err);

/* The overview's line: "<li>Regressions: N new, M acknowledged</li>" linked to the page. */
void nb_dash_regress_summary(FILE *f, nb_db *db);

/* The "Regression state" row of run run_id's table; nothing when the run opened none. */
void nb_dash_regress_run_row(FILE *f, nb_db *db, int64_t run_id);

/* The runs regressions.html links to (flagged and fixing runs), as fn(ud, 1, run_id). */
nb_code nb_dash_regress_export_ids(nb_db *db, nb_dash_job_id_fn fn, void *ud, nb_err *err);

#endif
