/* nb_outcome: a job's state and results folded into one outcome and its exit code, so every
 * command that reports a job exits the same way for the same job. */
#include "nb_outcome.h"

#include <string.h>

static const char *const NAMES[NB_OC_COUNT] = {
    "pass", "fail", "error", "unavailable", "cancelled", "expired", "pending"};

const char *nb_outcome_name(nb_outcome o)
{
    return (unsigned)o < NB_OC_COUNT ? NAMES[o] : "error";
}

nb_code nb_outcome_parse(const char *field, const char *s, nb_outcome *o, nb_err *err)
{
    for (int i = 0; i < NB_OC_COUNT; i++)
        if (!strcmp(s, NAMES[i])) {
            *o = (nb_outcome)i;
            return NB_OK;
        }
    return nb_err_set(err, NB_EINVAL,
                      "%s '%s': expected pass, fail, error, unavailable, cancelled, expired or "
                      "pending", field, s);
}

int nb_outcome_exit(nb_outcome o)
{
    return o == NB_OC_PENDING ? 5 : (int)o;
}

nb_outcome nb_outcome_of_verdict(int pb_outcome)
{
    return pb_outcome == NPUBENCH__OUTCOME__PASS   ? NB_OC_PASS
           : pb_outcome == NPUBENCH__OUTCOME__FAIL ? NB_OC_FAIL
                                                   : NB_OC_ERROR;
}

nb_outcome nb_outcome_of_run(int verdict, int regression)
{
    nb_outcome o =
        verdict == NB_OC_PASS || verdict == NB_OC_FAIL ? (nb_outcome)verdict : NB_OC_ERROR;
    return regression && o == NB_OC_PASS ? NB_OC_FAIL : o;
}

nb_outcome nb_outcome_of_result(const Npubench__JobResult *r)
{
    /* A worker ran it and got no verdict. Not told apart by status: a runner's crash (NB_EIO)
     * travels as UNAVAILABLE like a missing device would. */
    if (r->status != NPUBENCH__STATUS_CODE__OK || r->outcome == NPUBENCH__OUTCOME__ERROR)
        return NB_OC_ERROR;
    return nb_outcome_of_run(nb_outcome_of_verdict(r->outcome), r->regression);
}

/* The coordinator says why it ended a job only in words; an expiry is the one told apart. */
static int expired(const Npubench__Job *j)
{
    return strstr(j->error, "expire") != NULL;
}

nb_outcome nb_outcome_of_job(const Npubench__Job *j)
{
    switch (j->state) {
    case NPUBENCH__JOB_STATE__JOB_CANCELLED:
        return expired(j) ? NB_OC_EXPIRED : NB_OC_CANCELLED;
    case NPUBENCH__JOB_STATE__JOB_DONE:
    case NPUBENCH__JOB_STATE__JOB_FAILED:
        break;
    default:
        return NB_OC_PENDING;
    }
    if (!j->n_results)
        return expired(j)                                     ? NB_OC_EXPIRED
               : j->state == NPUBENCH__JOB_STATE__JOB_FAILED ? NB_OC_UNAVAILABLE
                                                              : NB_OC_ERROR;
    nb_outcome worst = NB_OC_PASS;
    for (size_t i = 0; i < j->n_results; i++) {
        nb_outcome o = nb_outcome_of_result(j->results[i]);
        if (o > worst)
            worst = o;
    }
    return worst;
}
