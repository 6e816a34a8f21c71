/* nb_db_schema: the database's schema version and its ordered migrations.
 * nb_db_open applies them; this header lets tools report where a file stands. */
#ifndef NB_DB_SCHEMA_H
#define NB_DB_SCHEMA_H

#include "nb_db.h"

/* The newest schema version this program knows (the number of migrations). */
int nb_db_schema_latest(void);

/* The version recorded in the open database's schema_version table. */
nb_code nb_db_schema_version(nb_db *db, int *version, nb_err *err);

#endif
