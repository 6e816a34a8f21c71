/* nb_svc: the CLI's coordinator client — connection flags, calls retried with their request
 * id, submit-and-wait over WatchJob long polls, and the live progress line. */
#include "nb_svc.h"

#include <ctype.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_file.h"
#include "nb_job.h"
#include "nb_rpc.h"
#include "nb_secret.h"
#include "nb_time.h"

struct nb_svc {
    nb_rpc_client *cli;
    int timeout_ms;
    int embedded; /* inproc: errors without the transport's decoration */
};

const char *nb_svc_url(const nb_svc_flags *f)
{
    if (f && f->coordinator && *f->coordinator)
        return f->coordinator;
    const char *e = getenv("NPUBENCH_COORDINATOR");
    return e && *e ? e : NULL;
}

nb_code nb_svc_secret(const nb_svc_flags *f, char **out, nb_err *err)
{
    *out = NULL;
    if (f && f->secret && *f->secret)
        return nb_secret_refuse_argv("--secret", "--secret-file", "NPUBENCH_SECRET", err);
    /* the admin key the coordinator's --admin-secret-file holds, as the docs name it */
    const char *admin = getenv("NPUBENCH_ADMIN_SECRET");
    if (f && f->admin && !(f->secret_file && *f->secret_file) && admin && *admin)
        return nb_secret_get("--secret-file", NULL, "NPUBENCH_ADMIN_SECRET", out, err);
    return nb_secret_get("--secret-file", f ? f->secret_file : NULL, "NPUBENCH_SECRET", out,
                         err);
}

nb_code nb_svc_coord_keys(const char *secret, const char *const files[3], char *keys[3],
                          nb_err *err)
{
    static const char *const flags[3] = {"--secret-file", "--worker-secret-file",
                                         "--admin-secret-file"};
    static const char *const envs[3] = {"NPUBENCH_SECRET", "NPUBENCH_WORKER_SECRET",
                                        "NPUBENCH_ADMIN_SECRET"};
    keys[0] = keys[1] = keys[2] = NULL;
    if (secret && *secret)
        return nb_secret_refuse_argv("--secret", "--secret-file", "NPUBENCH_SECRET", err);
    for (int i = 0; i < 3; i++) {
        nb_code rc = nb_secret_get(flags[i], files[i], envs[i], &keys[i], err);
        if (rc) {
            for (int j = 0; j < i; j++)
                nb_secret_free(keys[j]);
            return rc;
        }
    }
    return NB_OK;
}

nb_code nb_svc_open(const nb_svc_flags *f, const char *url, nb_svc **out, nb_err *err)
{
    *out = NULL;
    char *secret = NULL;
    /* No flags (an embedded or test coordinator): no auth, whatever $NPUBENCH_SECRET says;
     * the lab's key is for the lab's coordinator, and an in-process one checks none. */
    nb_code rc = f ? nb_svc_secret(f, &secret, err) : NB_OK;
    if (rc)
        return rc;
    nb_svc *s = calloc(1, sizeof *s);
    if (!s) {
        nb_secret_free(secret);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    s->timeout_ms = f && f->call_timeout_s > 0 ? f->call_timeout_s * 1000
                    : f && f->timeout_ms > 0    ? f->timeout_ms
                                                : 30000;
    nb_rpc_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.secret = secret;
    ro.timeout_ms = s->timeout_ms;
    ro.tls_ca_file = f ? f->tls_ca : NULL;
    ro.tls_cert_key_file = f ? f->tls_cert : NULL;
    ro.tls_server_name = f ? f->tls_server_name : NULL;
    rc = nb_rpc_client_open(url, &ro, &s->cli, err);
    nb_secret_free(secret);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return NB_OK;
}

void nb_svc_close(nb_svc *s)
{
    if (!s)
        return;
    nb_rpc_client_close(s->cli);
    free(s);
}

static nb_code call_t(nb_svc *s, const char *method, const void *req,
                      const ProtobufCMessageDescriptor *desc, int timeout_ms, void *resp_out,
                      nb_err *err)
{
    *(void **)resp_out = NULL;
    char full[160];
    snprintf(full, sizeof full, "npubench.Client/%s", method);
    /* A retry after a timeout resends the same request under the same id: the server runs
     * it at most once. */
    uint64_t id = nb_rpc_client_new_id(s->cli);
    int status = 0;
    char *msg = NULL;
    nb_code rc = NB_OK;
    for (int attempt = 0; attempt < 3; attempt++) {
        free(msg);
        msg = NULL;
        rc = nb_rpc_call_pb_id(s->cli, id, full, req, desc, timeout_ms, resp_out, &status, &msg,
                               err);
        if (rc == NB_OK ||
            (status != NB_RPC_DEADLINE_EXCEEDED && status != NB_RPC_UNAVAILABLE))
            break;
    }
    /* The server's refusal: its status and message are what a user acts on. */
    if (rc && msg && *msg) {
        if (s->embedded)
            nb_err_set(err, rc, "%s", msg);
        else
            nb_err_set(err, rc, "%s: %s (%s from %s)", nb_rpc_status_name(status), msg, method,
                       nb_rpc_client_url(s->cli));
    } else if (rc && status > 0 && !s->embedded) {
        nb_err_prefix(err, "%s: ", nb_rpc_status_name(status));
    }
    free(msg);
    return rc;
}

nb_code nb_svc_call(nb_svc *s, const char *method, const void *req,
                    const ProtobufCMessageDescriptor *resp_desc, void *resp_out, nb_err *err)
{
    return call_t(s, method, req, resp_desc, s->timeout_ms, resp_out, err);
}

nb_code nb_svc_submit(nb_svc *s, const Npubench__JobSpec *spec, int shards, int64_t **ids,
                      size_t *n, nb_err *err)
{
    *ids = NULL;
    *n = 0;
    char key[40];
    snprintf(key, sizeof key, "cli-%016llx%016llx",
             (unsigned long long)nb_rpc_client_new_id(s->cli),
             (unsigned long long)nb_rpc_client_new_id(s->cli));
    Npubench__SubmitJobRequest req = NPUBENCH__SUBMIT_JOB_REQUEST__INIT;
    req.request_id = key;
    req.spec = (Npubench__JobSpec *)spec;
    req.shards = shards;
    Npubench__SubmitJobResponse *resp;
    nb_code rc = nb_svc_call(s, "SubmitJob", &req, &npubench__submit_job_response__descriptor,
                             &resp, err);
    if (rc)
        return rc;
    if (!resp->n_job_ids) {
        nb_wire_free(resp);
        return nb_err_set(err, NB_EINTERNAL, "SubmitJob: the coordinator returned no job id");
    }
    *ids = malloc(resp->n_job_ids * sizeof **ids);
    if (!*ids) {
        nb_wire_free(resp);
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    }
    memcpy(*ids, resp->job_ids, resp->n_job_ids * sizeof **ids);
    *n = resp->n_job_ids;
    nb_wire_free(resp);
    return NB_OK;
}

nb_code nb_svc_get_job(nb_svc *s, int64_t job_id, int include_log, Npubench__Job **out,
                       nb_err *err)
{
    *out = NULL;
    Npubench__GetJobRequest g = NPUBENCH__GET_JOB_REQUEST__INIT;
    g.job_id = job_id;
    g.include_log = include_log;
    Npubench__GetJobResponse *r;
    nb_code rc = nb_svc_call(s, "GetJob", &g, &npubench__get_job_response__descriptor, &r, err);
    if (rc)
        return rc;
    if (!r->job) {
        nb_wire_free(r);
        return nb_err_set(err, NB_EINTERNAL, "GetJob %lld: no job in the answer",
                          (long long)job_id);
    }
    *out = r->job;
    r->job = NULL;
    nb_wire_free(r);
    return NB_OK;
}

nb_code nb_svc_wait(nb_svc *s, int64_t job_id, int64_t timeout_ms, nb_svc_watch_fn fn, void *ud,
                    Npubench__Job **out, nb_err *err)
{
    *out = NULL;
    int64_t end = timeout_ms > 0 ? nb_wall_ms() + timeout_ms : 0;
    uint64_t seq = 0;
    for (;;) {
        int wait = 5000;
        if (end) {
            int64_t left = end - nb_wall_ms();
            if (left <= 0)
                return nb_err_set(err, NB_ETIMEOUT, "job %lld not finished after %lld ms",
                                  (long long)job_id, (long long)timeout_ms);
            if (left < wait)
                wait = (int)left;
        }
        Npubench__WatchJobRequest req = NPUBENCH__WATCH_JOB_REQUEST__INIT;
        req.job_id = job_id;
        req.after_seq = seq;
        req.wait_ms = wait;
        Npubench__WatchJobResponse *w;
        nb_code rc = call_t(s, "WatchJob", &req, &npubench__watch_job_response__descriptor,
                            wait + 10000, &w, err);
        if (rc)
            return rc;
        int stop = fn ? fn(ud, job_id, w) : 0;
        if (w->last_seq > seq)
            seq = w->last_seq;
        int done = w->done;
        nb_wire_free(w);
        if (done)
            break;
        if (stop)
            return nb_err_set(err, NB_ECANCELED, "stopped waiting for job %lld",
                              (long long)job_id);
    }
    return nb_svc_get_job(s, job_id, 0, out, err);
}

#define TOKEN_LINE_TTY_MS 250.0
#define TOKEN_LINE_PLAIN_MS 1000.0

/* A token line: printed when its rate allows; on a terminal it replaces the last one. */
static void token_line(nb_svc_progress *pr, int64_t job_id, const Npubench__ProgressEvent *e)
{
    const Npubench__Progress *p = e->progress;
    double now = nb_now_ms();
    if (pr->last_tok_ms > 0 &&
        now - pr->last_tok_ms < (pr->tty == 1 ? TOKEN_LINE_TTY_MS : TOKEN_LINE_PLAIN_MS))
        return;
    char where[64] = "";
    if (p->total > 0)
        snprintf(where, sizeof where, "%s %d/%d, ", *p->unit ? p->unit : "step",
                 p->done + 1 < p->total ? p->done + 1 : p->total, p->total);
    char line[256];
    snprintf(line, sizeof line, "[job %lld] %s %s%s%stoken %d/%d", (long long)job_id,
             nb_job_pb_state_name(e->state), pr->kind ? pr->kind : "", pr->kind ? ": " : "",
             where, p->tokens_done, p->tokens_total);
    if (!strcmp(line, pr->last_tok))
        return;
    snprintf(pr->last_tok, sizeof pr->last_tok, "%s", line);
    if (pr->tty == 1) {
        fprintf(pr->f, "\r\033[K%s", line);
        pr->open = 1;
    } else
        fprintf(pr->f, "%s\n", line);
    pr->last_tok_ms = now;
}

int nb_svc_print_progress(void *ud, int64_t job_id, const Npubench__WatchJobResponse *w)
{
    nb_svc_progress *pr = ud;
    if (!pr->tty)
        pr->tty = isatty(fileno(pr->f)) ? 1 : 2;
    for (size_t i = 0; i < w->n_events; i++) {
        const Npubench__ProgressEvent *e = w->events[i];
        const Npubench__Progress *p = e->progress;
        char line[sizeof pr->last];
        if (p && p->total > 0)
            snprintf(line, sizeof line, "[job %lld] %s %d/%d%s%.500s", (long long)job_id,
                     nb_job_pb_state_name(e->state), p->done, p->total, *p->message ? " " : "",
                     p->message);
        else
            snprintf(line, sizeof line, "[job %lld] %s%s%.500s", (long long)job_id,
                     nb_job_pb_state_name(e->state), p && *p->message ? ": " : "", p ? p->message : "");
        if (strcmp(line, pr->last)) {
            fprintf(pr->f, "%s%s\n", pr->open ? "\r\033[K" : "", line);
            pr->open = 0;
            memcpy(pr->last, line, sizeof line);
        }
        if (p && p->tokens_total > 0 && !w->done)
            token_line(pr, job_id, e);
    }
    if (w->done && pr->open) {
        fputs("\r\033[K", pr->f);
        pr->open = 0;
    }
    fflush(pr->f);
    return 0;
}

nb_code nb_svc_parse_date(const char *field, const char *s, int64_t *unix_ms, nb_err *err)
{
    int y, mo, d, h = 0, mi = 0, sec = 0;
    char tail = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && v > 100000000000LL) {
        *unix_ms = v;
        return NB_OK;
    }
    int n = sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &sec, &tail);
    if (!(n == 3 && strlen(s) == 10) && !(n == 7 && tail == 'Z') && !(n == 6))
        return nb_err_set(err, NB_EINVAL,
                          "%s '%s': expected YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or unix ms",
                          field, s);
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
        sec > 60 || y < 1970)
        return nb_err_set(err, NB_EINVAL, "%s '%s': not a valid date", field, s);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    *unix_ms = (int64_t)timegm(&tm) * 1000;
    if (tm.tm_mday != d) /* timegm moved a day the month lacks (02-30) into the next month */
        return nb_err_set(err, NB_EINVAL, "%s '%s': not a valid date", field, s);
    return NB_OK;
}
