/* testdb.h: what the tests linked with nb_db share to seed a history — a fresh database, a
 * deployment, and a profile run checked for regressions as the coordinator checks it. */
#ifndef NB_TESTDB_H
#define NB_TESTDB_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nb_db.h"
#include "nb_db_deploy.h"
#include "nb_db_runs.h"
#include "testutil.h"

/* The database NAME in the group's temporary folder, opened (fresh unless it exists). */
static inline nb_db *tdb_open(const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", tu_group_tmp(), name);
    nb_db *db = NULL;
    nb_err err = {0};
    if (nb_db_open(path, NULL, &db, &err))
        fail_msg("%s", err.msg);
    return db;
}

/* SmolLM2-135M-Instruct cpu/q4_1 on board: its id. */
static inline int64_t tdb_deployment(nb_db *db, const char *board)
{
    nb_db_deployment d;
    memset(&d, 0, sizeof d);
    snprintf(d.model, sizeof d.model, "SmolLM2-135M-Instruct");
    snprintf(d.backend, sizeof d.backend, "cpu");
    snprintf(d.dtype, sizeof d.dtype, "q4_1");
    snprintf(d.board, sizeof d.board, "%s", board);
    int64_t id = 0;
    nb_err err = {0};
    if (nb_db_deployment_upsert(db, &d, &id, &err))
        fail_msg("%s", err.msg);
    return id;
}

/* A profile run of dep at t (32 tokens, 6 prompt tokens, threads): 5 repetitions around tps,
 * checked for regressions with the default options and stored with the verdict and the
 * check's numbers, as the coordinator commits a result; *flag (may be NULL) = flagged. */
static inline int64_t tdb_checked_run(nb_db *db, int64_t dep, int64_t t, double tps, int threads,
                                      int *flag)
{
    nb_db_sample smp[5];
    for (int i = 0; i < 5; i++) {
        smp[i].rep = i;
        for (int m = 0; m < NB_METRIC_N; m++)
            smp[i].v[m] = NAN;
        smp[i].v[NB_METRIC_TPS] = tps + (i - 2) * 0.5;
    }
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = dep;
    r.kind = "profile";
    r.outcome = NB_OUTCOME_PASS;
    r.started_ms = t;
    r.generated_tokens = 32;
    r.prompt_tokens = 6;
    r.env.threads = threads;
    r.value[NB_METRIC_TPS] = tps;
    r.samples = smp;
    r.n_samples = 5;
    r.source = NB_SOURCE_SERVICE;
    nb_db_regression_report rep;
    nb_err err = {0};
    if (nb_db_run_check_regression(db, &r, NULL, &rep, &err))
        fail_msg("%s", err.msg);
    if (rep.regression) {
        r.regression = 1;
        r.regression_detail = rep.detail;
        r.regression_report = &rep;
    }
    if (flag)
        *flag = rep.regression;
    int64_t id = 0;
    if (nb_db_run_insert(db, &r, &id, &err))
        fail_msg("%s", err.msg);
    return id;
}

#endif
