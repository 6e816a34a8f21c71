/* nb_coord_merge: a sharded verify-full back into one result — each shard's JobResult to
 * an nb_verify_result, nb_verify_merge in prompt order, one report — so the outcome and the
 * report equal what one worker running every prompt would have produced. */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "nb_coord_int.h"
#include "nb_jobpb.h"
#include "nb_report.h"
#include "nb_verifypb.h"

/* A deep copy made of malloc blocks (the merged result frees it). */
static Npubench__Environment *env_copy(const Npubench__Environment *e, nb_err *err)
{
    uint8_t *pb;
    size_t len;
    Npubench__Environment *out = NULL;
    if (nb_wire_pack(e, &pb, &len, err))
        return NULL;
    if (nb_wire_unpack(&npubench__environment__descriptor, pb, len, 0, &out, err))
        out = NULL;
    free(pb);
    return out;
}

nb_code nb_coord_merge_verify_group(nb_coord *c, const nb_db_job *group, int64_t this_id,
                                    const Npubench__JobResult *this_res, nb_arena *a,
                                    Npubench__JobResult **out, nb_coord_boards *boards,
                                    nb_err *err)
{
    *out = NULL;
    boards->n = 0;
    nb_db_job *kids = NULL;
    size_t nk = 0;
    nb_db_job_filter f = {.parent_id = group->id, .limit = 10000, .oldest_first = 1};
    nb_code rc = nb_db_job_list(c->db, &f, &kids, &nk, err);
    if (rc)
        return rc;
    if (!nk) {
        nb_db_job_list_free(kids, nk);
        return nb_err_set(err, NB_EINTERNAL, "job %lld: a group without shards",
                          (long long)group->id);
    }
    Npubench__JobResult **parts = calloc(nk, sizeof *parts);
    if (!parts) {
        nb_db_job_list_free(kids, nk);
        return nb_err_set(err, NB_ENOMEM, "merge: out of memory");
    }
    for (size_t i = 0; i < nk && !rc; i++) {
        if (kids[i].id == this_id)
            continue;
        if ((rc = nb_coord_store_get(c, kids[i].id, &parts[i], err)))
            nb_err_prefix(err, "merging job %lld, shard job %lld: ", (long long)group->id,
                          (long long)kids[i].id);
    }
    nb_verify_result all;
    memset(&all, 0, sizeof all);
    int have = 0;
    Npubench__JobResult *m = NULL;
    char workers[NB_DB_NAME_MAX] = "";
    int64_t t0 = 0, t1 = 0;
    const Npubench__JobResult *first = NULL;
    for (size_t i = 0; i < nk && !rc; i++) {
        const Npubench__JobResult *r = kids[i].id == this_id ? this_res : parts[i];
        if (r->status != NPUBENCH__STATUS_CODE__OK) {
            rc = nb_err_set(err, NB_EINVAL, "shard job %lld did not run: %s",
                            (long long)kids[i].id, r->status_message);
            break;
        }
        if (!first)
            first = r;
        if (*r->worker_id && !strstr(workers, r->worker_id)) {
            size_t len = strlen(workers);
            snprintf(workers + len, sizeof workers - len, "%s%s", len ? "," : "",
                     r->worker_id);
        }
        if (r->started_unix_ms && (!t0 || r->started_unix_ms < t0))
            t0 = r->started_unix_ms;
        if (r->finished_unix_ms > t1)
            t1 = r->finished_unix_ms;
        nb_verify_result part;
        if ((rc = nb_verifypb_verify_from_pb(r, &part, err))) {
            nb_err_prefix(err, "shard job %lld: ", (long long)kids[i].id);
            break;
        }
        if (!have) {
            all = part; /* the first keeps the trace's provenance fields */
            have = 1;
        } else {
            rc = nb_verify_merge(&all, &part, err);
            nb_verify_result_free(&part);
        }
    }
    if (!rc) {
        m = nb_jobpb_result_new();
        if (!m || nb_arena_defer_free(a, nb_jobpb_free, m))
            rc = nb_err_set(err, NB_ENOMEM, "merge: out of memory");
    }
    if (!rc)
        rc = nb_verifypb_verify_to_pb(&all, m, err);
    if (!rc && first->environment && !(m->environment = env_copy(first->environment, err)))
        rc = err->code ? err->code : NB_ENOMEM;
    /* Shards on several boards: the merged run belongs to each of them (stored once per
     * board by the caller), never to a board made of their names joined. */
    for (size_t i = 0; i < nk && !rc; i++) {
        const Npubench__JobResult *r = kids[i].id == this_id ? this_res : parts[i];
        const char *b = r->environment ? r->environment->board : "";
        int dup = 0;
        for (size_t k = 0; k < boards->n; k++)
            dup |= !strcmp(boards->name[k], b);
        if (*b && !dup && boards->n < NB_COORD_MERGE_BOARDS)
            snprintf(boards->name[boards->n++], sizeof boards->name[0], "%s", b);
    }
    if (!rc) {
        m->job_id = group->id;
        m->status = NPUBENCH__STATUS_CODE__OK;
        m->started_unix_ms = t0;
        m->finished_unix_ms = t1;
        m->worker_id = nb_jobpb_strdup(workers);
        nb_report_env env;
        memset(&env, 0, sizeof env);
        if (m->environment)
            nb_verifypb_env_to_report(m->environment, &env);
        json_object *doc = nb_report_verify_json(&all, &env, nb_job_kind_name(NPUBENCH__JOB_KIND__VERIFY_FULL));
        m->report_json = doc ? nb_jobpb_strdup(json_object_to_json_string_ext(
                                   doc, JSON_C_TO_STRING_PRETTY))
                             : NULL;
        json_object_put(doc);
        if (!m->worker_id || !m->report_json)
            rc = nb_err_set(err, NB_ENOMEM, "merge: out of memory");
    }
    if (have)
        nb_verify_result_free(&all);
    for (size_t i = 0; i < nk; i++)
        nb_wire_free(parts[i]);
    free(parts);
    nb_db_job_list_free(kids, nk);
    if (!rc)
        *out = m;
    return rc;
}
