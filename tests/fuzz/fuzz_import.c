/* fuzz_import: a history import file (JSON or NDJSON runs) imported into a fresh in-memory
 * database, as `npubench import` and the Import RPC do. */
#include <stdint.h>

#include "fuzz_util.h"
#include "nb_db.h"
#include "nb_db_import.h"

/* One database for the process, emptied before each input (nb_db_clear): building a fresh
 * one per input (its migrations) took ~15 ms under ASan, 65 inputs/s. */
static nb_db *db;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".ndjson");
    nb_err err;
    if (!path || (!db && nb_db_open(":memory:", NULL, &db, &err)))
        return 0;
    if (nb_db_clear(db, &err)) { /* cannot happen in memory; start over if it does */
        nb_db_close(db);
        db = NULL;
        return 0;
    }
    nb_db_import_report rep;
    nb_db_import_file_ex(db, path, NULL, &rep, &err);
    nb_db_import_report_free(&rep);
    return 0;
}
