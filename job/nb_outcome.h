/* nb_outcome: what a job or run came to, as one word and one exit code — the contract a CI
 * script reads from `wait`, `job` and `submit --wait`, and the word every layer that shows an
 * outcome (CLI, JSON, JUnit, the worker's log, the dashboard through db/) prints. */
#ifndef NB_OUTCOME_H
#define NB_OUTCOME_H

#include "nb_err.h"
#include "nb_wire.h"

/* NB_OC_: nb_db_runs.h has NB_OUTCOME_PASS/FAIL/ERROR for what the history stores.
 * Ordered by exit code; NB_OC_PENDING (not finished) exits as EXPIRED does, because a
 * caller sees it when its --timeout ran out (or asks `job` about an unfinished job). */
typedef enum nb_outcome {
    NB_OC_PASS,        /* exit 0 */
    NB_OC_FAIL,        /* exit 1: a gate FAIL or a regression */
    NB_OC_ERROR,       /* exit 2: it ran but gave no verdict (crash, device timeout) */
    NB_OC_UNAVAILABLE, /* exit 3: it could not run (no worker left, lease lost) */
    NB_OC_CANCELLED,   /* exit 4 */
    NB_OC_EXPIRED,     /* exit 5: the job's or the caller's deadline passed first */
    NB_OC_PENDING      /* exit 5: still queued or running */
} nb_outcome;

#define NB_OC_COUNT 7

/* The exit codes, one line each, for --help and usage text. */
#define NB_OC_EXIT_HELP                                                                        \
    "exit codes: 0 pass, 1 gate fail or regression, 2 error (usage, set-up, no verdict),\n"   \
    "            3 unavailable, 4 cancelled, 5 expired or --timeout passed, 6 data loss\n"  \
    "            (the database is damaged: restore a backup); several jobs: the highest code"

/* "pass", "fail", "error", "unavailable", "cancelled", "expired", "pending". */
const char *nb_outcome_name(nb_outcome o);
/* The name back (as nb_outcome_name writes it); an error naming field and the words known. */
nb_code nb_outcome_parse(const char *field, const char *s, nb_outcome *o, nb_err *err);
int nb_outcome_exit(nb_outcome o);
/* A proto Outcome (a verdict: PASS, FAIL, else ERROR) as an nb_outcome. */
nb_outcome nb_outcome_of_verdict(int pb_outcome);
/* A stored run: its verdict (NB_OC_PASS, NB_OC_FAIL or NB_OC_ERROR, as nb_db_outcome orders
 * them too), made FAIL when the regression check flagged a PASS. */
nb_outcome nb_outcome_of_run(int verdict, int regression);
/* One result: its status (not OK: error), its verdict, a regression. */
nb_outcome nb_outcome_of_result(const Npubench__JobResult *r);
/* A job: its state, then the worst of its results (highest exit code). */
nb_outcome nb_outcome_of_job(const Npubench__Job *j);

#endif
