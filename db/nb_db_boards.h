/* nb_db_boards: what the lab knows about each board beyond its workers' liveness: health
 * (LAVA's health checks: unknown, ok, failed = quarantined), drain, consecutive job errors,
 * and the driver / firmware / XRT versions its worker read at registration. */
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

#define NB_DB_BOARD_TEXT_MAX 256 /* each version string, CPU model and toolchain */

/* As worker/nb_probe reads them; "" = never reported, "unknown" = the probe read nothing. */
typedef struct nb_db_board_versions {
    char driver[NB_DB_BOARD_TEXT_MAX];   /* amdxdna module */
    char firmware[NB_DB_BOARD_TEXT_MAX]; /* the NPU's */
    char xrt[NB_DB_BOARD_TEXT_MAX];
    char kernel_path[NB_DB_BOARD_TEXT_MAX]; /* the ISA the CPU kernels dispatch to */
    char cpu_model[NB_DB_BOARD_TEXT_MAX];
    char toolchain[NB_DB_BOARD_TEXT_MAX];   /* compiler and npubench commit */
} nb_db_board_versions;

typedef struct nb_db_board {
    char board[NB_DB_NAME_MAX];
    nb_db_health health;
    int64_t checked_ms;        /* the last check's end; 0 = never */
    char detail[NB_DB_MSG_MAX];
    int job_errors;            /* consecutive jobs without a verdict */
    int drained;               /* takes no new job */
    int64_t check_job_id;      /* the last health check queued; 0 = none */
    int check_pending;         /* out: that check is still queued or running */
    nb_db_board_versions versions;
    int64_t versions_ms;       /* when they were reported; 0 = never */
} nb_db_board;

/* What `workers` and the dashboard call the board's health: "checking" while a check is
 * pending, else nb_db_health_name. */
const char *nb_db_board_health_label(const nb_db_board *b);

/* The board's row; one never written reads as unknown health, not drained (NB_OK). */
nb_code nb_db_board_get(nb_db *db, const char *board, nb_db_board *out, nb_err *err);

/* Every board with a row, by name. *out malloc'ed (free()); NULL when *n == 0. */
nb_code nb_db_board_list(nb_db *db, nb_db_board **out, size_t *n, nb_err *err);

nb_code nb_db_board_set_drained(nb_db *db, const char *board, int drained, nb_err *err);

/* A health check ended: health, detail, checked now, no check pending; an ok one also
 * clears the error count. */
nb_code nb_db_board_set_health(nb_db *db, const char *board, nb_db_health health,
                               const char *detail, nb_err *err);

/* The versions a worker of the board reported at its registration (now); NB_EINVAL naming
 * the field when one is NB_DB_BOARD_TEXT_MAX bytes or longer. */
nb_code nb_db_board_set_versions(nb_db *db, const char *board, const nb_db_board_versions *v,
                                 nb_err *err);

/* The pending check's job id (0 = none). */
nb_code nb_db_board_set_check(nb_db *db, const char *board, int64_t job_id, nb_err *err);

/* A job on the board ended: with a verdict (error = 0) the error count restarts, without
 * one it grows; *errors (may be NULL) = the count now. */
nb_code nb_db_board_job_ended(nb_db *db, const char *board, int error, int *errors,
                              nb_err *err);

#endif
