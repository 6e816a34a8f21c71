/* nb_db_owners: which client identity (a named client key) submitted a job; a job without a
 * row belongs to no one in particular (the shared client key). */
#ifndef NB_DB_OWNERS_H
#define NB_DB_OWNERS_H

#include <stdint.h>

#include "nb_db.h"

/* Creates the tables if missing (job_owners, and owner_turns: the lease order's fair
 * share between owners, nb_db_jobs). */
nb_code nb_db_owner_open(nb_db *db, nb_err *err);
/* Records owner as job_id's (1..NB_DB_NAME_MAX-1 bytes). */
nb_code nb_db_owner_set(nb_db *db, int64_t job_id, const char *owner, nb_err *err);
/* The owner of job_id into out ("" when none). */
nb_code nb_db_owner_get(nb_db *db, int64_t job_id, char out[NB_DB_NAME_MAX], nb_err *err);

#endif
