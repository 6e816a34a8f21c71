/* fuzz_import: a history import file (JSON or NDJSON runs) imported into a fresh in-memory
 * database, as `npubench import` and the Import RPC do. */
#include <stdint.h>

#include "fuzz_util.h"
#include "nb_db.h"
#include "nb_db_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".ndjson");
    nb_db *db = NULL;
    nb_err err;
    if (!path || nb_db_open(":memory:", NULL, &db, &err))
        return 0;
    nb_db_import_report rep;
    nb_db_import_file_ex(db, path, NULL, &rep, &err);
    nb_db_import_report_free(&rep);
    nb_db_close(db);
    return 0;
}
