/* nb_jobpb: the rule every result message follows (plain malloc blocks, one free for what was
 * built here and what was unpacked); the conversions live beside their results. */
#include "nb_jobpb.h"

#include <stdlib.h>
#include <string.h>

Npubench__JobResult *nb_jobpb_result_new(void)
{
    Npubench__JobResult *r = malloc(sizeof *r);
    if (r)
        npubench__job_result__init(r);
    return r;
}

void nb_jobpb_free(void *msg)
{
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
}

char *nb_jobpb_strdup(const char *s)
{
    if (!s || !*s)
        return (char *)protobuf_c_empty_string;
    return strdup(s);
}

void *nb_jobpb_calloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

nb_code nb_jobpb_oom(nb_err *err)
{
    return nb_err_set(err, NB_ENOMEM, "out of memory building the job result");
}
