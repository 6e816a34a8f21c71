/* nb_jobjson: a job as the JSON object of the npubench.job/1, wait/1 and submit/1 schemas —
 * ids, states, outcomes and raw numbers, no prose (docs/service.md lists the fields). */
#ifndef NB_JOBJSON_H
#define NB_JOBJSON_H

#include <json-c/json.h>

#include "nb_wire.h"

/* A new object for j (its results and their gate records included); NULL without memory. */
json_object *nb_jobjson_job(const Npubench__Job *j);

#endif
