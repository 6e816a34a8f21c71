/* nb_junit: JUnit XML from Job messages — verdicts as failures, results that gave no verdict
 * (and jobs that never ran) as errors, so a CI dashboard counts what the exit code says. */
#include "nb_junit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nb_job.h"
#include "nb_outcome.h"
#include "nb_print.h"
#include "nb_rpc.h"
#include "nb_time.h"

/* The length of the valid UTF-8 sequence at s that XML 1.0 allows, 0 if none. */
static size_t xml_char_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return s[0] >= 0x20 || s[0] == '\t' || s[0] == '\n' || s[0] == '\r';
    size_t n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (!n || (n == 3 && s[0] > 0xEF))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    /* U+FFFE/U+FFFF and surrogates are not XML characters */
    if (n == 3 && s[0] == 0xEF && s[1] == 0xBF && s[2] >= 0xBE)
        return 0;
    if (n == 3 && s[0] == 0xED && s[1] >= 0xA0)
        return 0;
    if (n == 3 && s[0] == 0xE0 && s[1] < 0xA0)
        return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}

void nb_junit_escape(FILE *f, const char *str, int attr)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    while (*s) {
        size_t n = xml_char_len(s);
        if (!n) {
            fputc('?', f);
            s++;
            continue;
        }
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break; /* so "]]>" never appears */
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        /* in attributes, so that normalisation keeps them */
        case '\n': fputs(attr ? "&#10;" : "\n", f); break;
        case '\r': fputs("&#13;", f); break;
        case '\t': fputs(attr ? "&#9;" : "\t", f); break;
        default: fwrite(s, 1, n, f);
        }
        s += n;
    }
}

/* The deployment a result ran on, as the classname: "npubench.verify.MODEL.BACKEND/DTYPE@BOARD",
 * MODEL the display name every other output uses (never the GGUF's general.name, spaces and
 * all). */
static void classname(char *buf, size_t cap, int kind, const Npubench__JobResult *r)
{
    const Npubench__Environment *e = r ? r->environment : NULL;
    char name[256];
    snprintf(buf, cap, "npubench.%s.%s.%s/%s@%s", nb_job_kind_name(kind),
             e ? nb_print_model_name(e, name, sizeof name) : "?", e ? e->backend : "",
             e ? e->dtype : "", e ? e->board : "");
}

static void open_case(FILE *f, const char *cls, const char *name, double seconds)
{
    fputs("    <testcase classname=\"", f);
    nb_junit_escape(f, cls, 1);
    fputs("\" name=\"", f);
    nb_junit_escape(f, name, 1);
    fprintf(f, "\" time=\"%.3f\"", seconds > 0 ? seconds : 0.0);
}

/* <tag message="msg" type="type">body</tag> inside an open testcase. */
static void verdict(FILE *f, const char *tag, const char *type, const char *msg,
                    const char *body)
{
    fprintf(f, "      <%s type=\"%s\" message=\"", tag, type);
    nb_junit_escape(f, msg, 1);
    fputs("\">", f);
    nb_junit_escape(f, body, 0);
    fprintf(f, "</%s>\n", tag);
}

/* The top-1 minus top-2 logit on one side at the divergence: how close the call was. */
static int margin(Npubench__TopToken *const *top, size_t n, double *m)
{
    /* runners that report token ids only (exec) leave every logit 0: no margin to tell */
    if (n < 2 || (top[0]->logit == 0.0f && top[1]->logit == 0.0f))
        return 0;
    *m = (double)top[0]->logit - (double)top[1]->logit;
    return 1;
}

/* "diverged at step S: device D 'text' (ref rank R) vs reference F 'text' (device rank R)"
 * after lead into buf; returns its length (snprintf's: may exceed cap). */
static size_t divergence_text(const Npubench__GateRecord *g, const char *lead, char *buf,
                              size_t cap)
{
    char dr[32] = "", rr[32] = "";
    if (g->device_token_ref_rank >= 0)
        snprintf(dr, sizeof dr, " (ref rank %d)", g->device_token_ref_rank);
    if (g->reference_token_dev_rank >= 0)
        snprintf(rr, sizeof rr, " (device rank %d)", g->reference_token_dev_rank);
    int n = snprintf(buf, cap, "%sdiverged at step %d: device %d '%.200s'%s vs reference %d "
                     "'%.200s'%s", lead, g->divergence_step, g->device_token, g->device_text,
                     dr, g->reference_token, g->reference_text, rr);
    return n < 0 ? 0 : (size_t)n;
}

static void gate_case(FILE *f, const char *cls, const Npubench__GateRecord *g)
{
    char name[64];
    snprintf(name, sizeof name, "prompt %d", g->index);
    open_case(f, cls, name, (g->prefill_ms + g->decode_ms) / 1000.0);
    const Npubench__DecodeCheck *dc = g->decode_check;
    int defect = dc && dc->status && !strcmp(dc->status, "fault");
    char dmsg[256];
    snprintf(dmsg, sizeof dmsg, "decode-path defect: decode step %d differs from a cache-free "
             "prefill of the same tokens by %.3g logits (tolerance %.2f)",
             dc ? dc->first_bad_step : -1, dc ? dc->max_diff : 0.0, dc ? dc->tolerance : 0.0);
    if (g->status == NPUBENCH__OUTCOME__PASS) {
        if (!defect) {
            fputs("/>\n", f);
            return;
        }
        /* the production gate passed: a PASS, flagged where CI logs show it */
        fputs(">\n      <system-out>PASS (decode-path defect): ", f);
        nb_junit_escape(f, dmsg, 0);
        fputs("</system-out>\n    </testcase>\n", f);
        return;
    }
    fputs(">\n", f);
    char msg[2048];
    size_t len = g->decode_strict_fail
                     ? (size_t)snprintf(msg, sizeof msg, "%s (--strict; the top-k gate passed)",
                                        dmsg)
                     : 0;
    /* a strict run's decode-path FAIL without a divergence: the defect is the whole message */
    if (!g->decode_strict_fail || g->divergence_step >= 0)
        len += divergence_text(g, len ? "; " : "", msg + len, sizeof msg - len);
    double m;
    if (margin(g->reference_top, g->n_reference_top, &m) && len < sizeof msg)
        len += (size_t)snprintf(msg + len, sizeof msg - len, ", reference margin %.3f", m);
    if (margin(g->device_top, g->n_device_top, &m) && len < sizeof msg)
        len += (size_t)snprintf(msg + len, sizeof msg - len, ", device margin %.3f", m);
    /* Where it broke, with the FAIL itself (docs/localization.md). */
    const Npubench__Localization *loc = g->localization;
    if (loc && loc->summary && *loc->summary && len < sizeof msg)
        snprintf(msg + len, sizeof msg - len, "; localized: %.600s", loc->summary);
    char body[4096];
    snprintf(body, sizeof body, "%s\nagreed prefix: %.3000s%s%.400s", g->fail_reason,
             g->agreed_prefix, loc && loc->note && *loc->note ? "\nlocalization: " : "",
             loc && loc->note ? loc->note : "");
    if (g->status == NPUBENCH__OUTCOME__FAIL)
        verdict(f, "failure", "gate", msg, body);
    else
        verdict(f, "error", "gate", *g->fail_reason ? g->fail_reason : "the prompt did not run",
                body);
    fputs("    </testcase>\n", f);
}

static double result_seconds(const Npubench__JobResult *r)
{
    return r->finished_unix_ms > r->started_unix_ms
               ? (double)(r->finished_unix_ms - r->started_unix_ms) / 1000.0
               : 0.0;
}

/* A result that did not run, or a run/profile/diagnosis: one testcase. */
static void result_case(FILE *f, const char *cls, int kind, const Npubench__JobResult *r)
{
    const nb_job_kind_desc *d = nb_job_kind_desc_of(kind);
    const char *name = d && d->regression ? "regression check" : nb_job_kind_name(kind);
    open_case(f, cls, name, result_seconds(r));
    nb_outcome o = nb_outcome_of_result(r);
    if (o == NB_OC_PASS) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n", f);
    if (r->status != NPUBENCH__STATUS_CODE__OK)
        verdict(f, "error", nb_rpc_status_name(r->status), r->status_message, "");
    else if (o == NB_OC_FAIL)
        verdict(f, "failure", r->regression ? "regression" : "gate",
                r->regression ? r->regression_detail : "the gate failed", "");
    else
        verdict(f, "error", "error", "no verdict", "");
    fputs("    </testcase>\n", f);
}

/* A verify's result that ran: one testcase per prompt; anything else: one for the result. */
static int per_prompt(int kind, const Npubench__JobResult *r)
{
    return nb_job_kind_is(kind, NB_JOB_FAMILY_VERIFY) && r->status == NPUBENCH__STATUS_CODE__OK && r->n_gates;
}

typedef struct counts {
    int tests, failures, errors;
} counts;

/* A group still running: how many of its children have no result yet (0 otherwise). */
static size_t unfinished_children(const Npubench__Job *j)
{
    if (nb_outcome_of_job(j) != NB_OC_PENDING || !j->n_results ||
        j->n_child_job_ids <= j->n_results)
        return 0;
    return j->n_child_job_ids - j->n_results;
}

static void count_job(const Npubench__Job *j, int kind, counts *c)
{
    if (unfinished_children(j)) {
        c->tests++;
        c->errors++;
    }
    if (!j->n_results) {
        c->tests = 1;
        c->errors = nb_outcome_of_job(j) != NB_OC_PASS;
        return;
    }
    for (size_t i = 0; i < j->n_results; i++) {
        const Npubench__JobResult *r = j->results[i];
        if (per_prompt(kind, r)) {
            for (size_t g = 0; g < r->n_gates; g++) {
                c->tests++;
                c->failures += r->gates[g]->status == NPUBENCH__OUTCOME__FAIL;
                c->errors += r->gates[g]->status != NPUBENCH__OUTCOME__FAIL &&
                             r->gates[g]->status != NPUBENCH__OUTCOME__PASS;
            }
            continue;
        }
        nb_outcome o = nb_outcome_of_result(r);
        c->tests++;
        c->failures += o == NB_OC_FAIL;
        c->errors += o != NB_OC_FAIL && o != NB_OC_PASS;
    }
}

static void job_suite(FILE *f, const Npubench__Job *j)
{
    int kind = j->spec ? j->spec->kind : 0;
    counts c = {0, 0, 0};
    count_job(j, kind, &c);
    char iso[32];
    nb_time_iso(iso, j->created_unix_ms > 0 ? j->created_unix_ms : 0);
    double secs = j->finished_unix_ms > j->started_unix_ms && j->started_unix_ms > 0
                      ? (double)(j->finished_unix_ms - j->started_unix_ms) / 1000.0
                      : 0.0;
    fprintf(f,
            "  <testsuite name=\"job %lld %s\" id=\"%lld\" tests=\"%d\" failures=\"%d\" "
            "errors=\"%d\" skipped=\"0\" time=\"%.3f\" timestamp=\"%.19s\">\n",
            (long long)j->job_id, nb_job_kind_name(kind), (long long)j->job_id, c.tests,
            c.failures, c.errors, secs, iso);
    char cls[512];
    for (size_t i = 0; i < j->n_results; i++) {
        const Npubench__JobResult *r = j->results[i];
        classname(cls, sizeof cls, kind, r);
        if (per_prompt(kind, r))
            for (size_t g = 0; g < r->n_gates; g++)
                gate_case(f, cls, r->gates[g]);
        else
            result_case(f, cls, kind, r);
    }
    size_t left = unfinished_children(j);
    if (left) {
        /* the finished boards keep their cases above; the rest is one pending error */
        char name[64], msg[256];
        snprintf(name, sizeof name, "job %lld: %zu unfinished", (long long)j->job_id, left);
        snprintf(cls, sizeof cls, "npubench.%s", nb_job_kind_name(kind));
        open_case(f, cls, name, secs);
        fputs(">\n", f);
        snprintf(msg, sizeof msg, "pending: %zu of %zu board jobs had not finished", left,
                 j->n_child_job_ids);
        verdict(f, "error", "pending", msg, j->queued_reason);
        fputs("    </testcase>\n", f);
    }
    if (!j->n_results) {
        nb_outcome o = nb_outcome_of_job(j);
        char name[64], msg[1200];
        snprintf(name, sizeof name, "job %lld", (long long)j->job_id);
        snprintf(cls, sizeof cls, "npubench.%s", nb_job_kind_name(kind));
        open_case(f, cls, name, secs);
        fputs(">\n", f);
        snprintf(msg, sizeof msg, "%s: job %s%s%.1000s", nb_outcome_name(o),
                 nb_job_pb_state_name(j->state), *j->error ? ": " : "", j->error);
        verdict(f, "error", nb_outcome_name(o), msg, j->queued_reason);
        fputs("    </testcase>\n", f);
    }
    if (*j->log) {
        fputs("    <system-out>", f);
        nb_junit_escape(f, j->log, 0);
        fputs("</system-out>\n", f);
    }
    fputs("  </testsuite>\n", f);
}

void nb_junit_print(FILE *f, const Npubench__Job *const *jobs, size_t n)
{
    counts all = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        counts c = {0, 0, 0};
        count_job(jobs[i], jobs[i]->spec ? jobs[i]->spec->kind : 0, &c);
        all.tests += c.tests;
        all.failures += c.failures;
        all.errors += c.errors;
    }
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"npubench\" "
            "tests=\"%d\" failures=\"%d\" errors=\"%d\">\n",
            all.tests, all.failures, all.errors);
    for (size_t i = 0; i < n; i++)
        job_suite(f, jobs[i]);
    fputs("</testsuites>\n", f);
}

nb_code nb_junit_write(const char *path, const Npubench__Job *const *jobs, size_t n,
                       nb_err *err)
{
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return nb_err_set(err, NB_EINVAL, "--junit: the path is longer than %zu bytes",
                          sizeof tmp - 5);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return nb_err_set(err, NB_EIO, "--junit %s: cannot create the file: %s", tmp,
                          strerror(errno));
    nb_junit_print(f, jobs, n);
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        remove(tmp);
        return nb_err_set(err, NB_EIO, "--junit %s: could not write the file", path);
    }
    return NB_OK;
}
