/* nb_coord_store: every committed JobResult kept whole (packed protobuf, one file per job
 * under the artifacts directory), so `job ID` and shard merges get full fidelity back. */
#include <stdio.h>
#include <stdlib.h>

#include "nb_coord_int.h"
#include "nb_file.h"

#define STORE_MAX_BYTES ((size_t)64 << 20)

static void path_of(const nb_coord *c, int64_t job_id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/job-%lld.pb", c->artifacts_dir, (long long)job_id);
}

nb_code nb_coord_store_put(nb_coord *c, int64_t job_id, const Npubench__JobResult *res, nb_err *err)
{
    uint8_t *pb;
    size_t len;
    nb_code rc = nb_wire_pack(res, &pb, &len, err);
    if (rc)
        return rc;
    char path[1200];
    path_of(c, job_id, path, sizeof path);
    rc = nb_file_write(path, pb, len, err); /* temp file + rename: never half a result */
    free(pb);
    return rc;
}

nb_code nb_coord_store_get(nb_coord *c, int64_t job_id, Npubench__JobResult **out, nb_err *err)
{
    *out = NULL;
    char path[1200];
    path_of(c, job_id, path, sizeof path);
    if (!nb_file_exists(path))
        return nb_err_set(err, NB_ENOTFOUND, "job %lld: no stored result (%s)",
                          (long long)job_id, path);
    char *data;
    size_t len;
    nb_code rc = nb_file_read(path, STORE_MAX_BYTES, &data, &len, err);
    if (rc)
        return rc;
    rc = nb_wire_unpack(&npubench__job_result__descriptor, (const uint8_t *)data, len, 0, out,
                        err);
    free(data);
    if (rc)
        nb_err_prefix(err, "%s: ", path);
    return rc;
}
