/* fuzz_requests: every message a coordinator or worker unpacks from the network (the first
 * byte picks which), packed back, and a carried JobSpec through the job validation. */
#include <stdint.h>
#include <stdlib.h>

#include "nb_job.h"
#include "nb_wire.h"

static const ProtobufCMessageDescriptor *const messages[] = {
    &npubench__submit_job_request__descriptor,     &npubench__get_job_request__descriptor,
    &npubench__list_jobs_request__descriptor,      &npubench__cancel_job_request__descriptor,
    &npubench__list_workers_request__descriptor,   &npubench__watch_job_request__descriptor,
    &npubench__history_request__descriptor,        &npubench__compare_request__descriptor,
    &npubench__set_reference_request__descriptor,  &npubench__import_request__descriptor,
    &npubench__register_request__descriptor,       &npubench__heartbeat__descriptor,
    &npubench__lease_job_request__descriptor,      &npubench__report_progress_request__descriptor,
    &npubench__report_result_request__descriptor,  &npubench__release_job_request__descriptor,
    &npubench__health_check_request__descriptor,
    /* what a worker or client unpacks from the coordinator */
    &npubench__register_response__descriptor,      &npubench__heartbeat_response__descriptor,
    &npubench__lease_job_response__descriptor,     &npubench__report_progress_response__descriptor,
    &npubench__report_result_response__descriptor, &npubench__release_job_response__descriptor,
    &npubench__submit_job_response__descriptor,    &npubench__get_job_response__descriptor,
    &npubench__list_jobs_response__descriptor,     &npubench__list_workers_response__descriptor,
    &npubench__watch_job_response__descriptor,     &npubench__history_response__descriptor,
    &npubench__compare_response__descriptor,       &npubench__import_response__descriptor,
    /* the dashboard export: asked by a client, its files unpacked by `report --html` */
    &npubench__dashboard_request__descriptor,      &npubench__dashboard_response__descriptor,
};
#define N_MESSAGES (sizeof messages / sizeof *messages)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *d = messages[data[0] % N_MESSAGES];
    nb_err err;
    ProtobufCMessage *m = NULL;
    if (nb_wire_unpack(d, data + 1, size - 1, 0, &m, &err))
        return 0;
    uint8_t *out;
    size_t len;
    if (nb_wire_pack(m, &out, &len, &err) == NB_OK)
        free(out);
    if (d == &npubench__submit_job_request__descriptor) {
        const Npubench__SubmitJobRequest *r = (const void *)m;
        if (r->spec)
            nb_job_validate_spec(r->spec, &err);
    } else if (d == &npubench__lease_job_response__descriptor) {
        const Npubench__LeaseJobResponse *r = (const void *)m;
        if (r->lease && r->lease->spec)
            nb_job_validate_spec(r->lease->spec, &err);
    }
    nb_wire_free(m);
    return 0;
}
