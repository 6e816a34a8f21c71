/* nb_db_boards: what the lab knows about each board beyond its workers' liveness: health
 * (LAVA's health checks: unknown, ok, failed = quarantined), drain, consecutive job errors. */
#ifndef NB_DB_BOARDS_H
#define NB_DB_BOARDS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_db.h"

typedef enum nb_db_health {
    NB_HEALTH_UNKNOWN = 0, /* never checked */
    NB_HEALTH_OK,
    NB_HEALTH_FAILED       /* quarantined: only health checks are leased to it */
} nb_db_health;

const char *nb_db_health_name(nb_db_health h); /* "unknown", "ok", "failed" */

typedef struct nb_db_board {
    char board[NB_DB_NAME_MAX];
    nb_db_health health;
    int64_t checked_ms;        /* the last check's end; 0 = never */
    char detail[NB_DB_MSG_MAX];
    int job_errors;            /* consecutive jobs without a verdict */
    int drained;               /* takes no new job */
    int64_t check_job_id;      /* the pending health check; 0 = none */
} nb_db_board;

/* The board's row; one never written reads as unknown health, not drained (NB_OK). */
nb_code nb_db_board_get(nb_db *db, const char *board, nb_db_board *out, nb_err *err);

/* Every board with a row, by name. *out malloc'ed (free()); NULL when *n == 0. */
nb_code nb_db_board_list(nb_db *db, nb_db_board **out, size_t *n, nb_err *err);

nb_code nb_db_board_set_drained(nb_db *db, const char *board, int drained, nb_err *err);

/* A health check ended: health, detail, checked now, no check pending; an ok one also
 * clears the error count. */
nb_code nb_db_board_set_health(nb_db *db, const char *board, nb_db_health health,
                               const char *detail, nb_err *err);

/* The pending check's job id (0 = none). */
nb_code nb_db_board_set_check(nb_db *db, const char *board, int64_t job_id, nb_err *err);

/* A job on the board ended: with a verdict (error = 0) the error count restarts, without
 * one it grows; *errors (may be NULL) = the count now. */
nb_code nb_db_board_job_ended(nb_db *db, const char *board, int error, int *errors,
                              nb_err *err);

#endif
