/* nb_coord_store: each committed JobResult kept whole in job_results, in the completion's own
 * transaction: `job ID` and shard merges get full fidelity, no acknowledged result lacks it. */
#include <stdio.h>
#include <stdlib.h>

#include "nb_coord_int.h"
#include "nb_db_results.h"
#include "nb_fault.h"
#include "nb_file.h"

/* Where versions before job_results kept the result; still read, pruned by retention. */
void nb_coord_store_legacy_path(const nb_coord *c, int64_t job_id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/job-%lld.pb", c->artifacts_dir, (long long)job_id);
}

nb_code nb_coord_store_put(nb_coord *c, int64_t job_id, const Npubench__JobResult *res, nb_err *err)
{
    if (nb_fault("result_store"))
        return nb_err_set(err, NB_EIO, "job %lld: storing the result: No space left on device "
                          "(fault injected)", (long long)job_id);
    uint8_t *pb;
    size_t len;
    nb_code rc = nb_wire_pack(res, &pb, &len, err);
    if (rc)
        return rc;
    rc = nb_db_result_put(c->db, job_id, pb, len, err);
    free(pb);
    return rc;
}

nb_code nb_coord_store_get(nb_coord *c, int64_t job_id, Npubench__JobResult **out, nb_err *err)
{
    *out = NULL;
    void *data = NULL;
    size_t len = 0;
    char path[1200] = "";
    nb_code rc = nb_db_result_get(c->db, job_id, &data, &len, err);
    if (rc == NB_ENOTFOUND) {
        nb_coord_store_legacy_path(c, job_id, path, sizeof path);
        if (!nb_file_exists(path))
            return nb_err_set(err, NB_ENOTFOUND, "job %lld: no stored result",
                              (long long)job_id);
        rc = nb_file_read(path, NB_DB_RESULT_MAX, (char **)&data, &len, err);
    }
    if (rc)
        return rc;
    rc = nb_wire_unpack(&npubench__job_result__descriptor, data, len, 0, out, err);
    free(data);
    if (rc)
        nb_err_prefix(err, "job %lld stored result%s%s: ", (long long)job_id, *path ? " " : "",
                      path);
    return rc;
}
