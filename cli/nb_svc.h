/* nb_svc: the CLI's side of the service — connecting to a coordinator, calling it with
 * retries that keep the request id, submit-and-wait with live progress (results print
 * through nb_print). */
#ifndef NB_SVC_H
#define NB_SVC_H

#include <stdint.h>
#include <stdio.h>

#include "nb_args.h"
#include "nb_err.h"
#include "nb_wire.h"

/* The connection flags every service command takes. */
typedef struct nb_svc_flags {
    const char *coordinator; /* URL; NULL = $NPUBENCH_COORDINATOR */
    const char *secret;      /* given: refused (argv is public); keys come from files */
    const char *secret_file;
    const char *tls_ca, *tls_cert;
    int call_timeout_s;      /* per call, 0 = 30 s */
    int timeout_ms;          /* the same in ms: the deprecated --timeout-ms */
    const char *tls_server_name; /* name the server's certificate must carry [URL host] */
    int admin; /* an admin action: without --secret-file, $NPUBENCH_ADMIN_SECRET first */
} nb_svc_flags;

#define NB_SVC_OPTS(f)                                                                           \
    {"coordinator", NB_OPT_STR, &(f).coordinator, 0, 0,                                          \
     "coordinator URL (default $NPUBENCH_COORDINATOR)"},                                         \
        {"secret", NB_OPT_STR, &(f).secret, 0, 0, "refused: use --secret-file"},                 \
        {"secret-file", NB_OPT_STR, &(f).secret_file, 0, 0,                                      \
         "key file, mode 0600 (default $NPUBENCH_SECRET)"},                                      \
        {"tls-ca", NB_OPT_STR, &(f).tls_ca, 0, 0, "CA certificate for tls+tcp:// (PEM)"},       \
        {"tls-cert", NB_OPT_STR, &(f).tls_cert, 0, 0, "client certificate + key (PEM)"},        \
        {"tls-server-name", NB_OPT_STR, &(f).tls_server_name, 0, 0,                              \
         "DNS name in the server's certificate (needed for IP-address URLs)"},                   \
        {"call-timeout", NB_OPT_INT, &(f).call_timeout_s, 0, 3600,                          \
         "per-call timeout in s (default 30)"},                                                 \
        {"timeout-ms", NB_OPT_INT, &(f).timeout_ms, 0, 3600000,                                 \
         "deprecated: --call-timeout in ms"}

/* The coordinator URL the flags name (flag, else $NPUBENCH_COORDINATOR), or NULL. */
const char *nb_svc_url(const nb_svc_flags *f);

/* The key (--secret-file, mode 0600, else $NPUBENCH_SECRET) into *out (nb_secret_free;
 * NULL when none); --secret on the command line is refused. */
nb_code nb_svc_secret(const nb_svc_flags *f, char **out, nb_err *err);

/* The coordinator's keys per role, client/worker/admin, from files[i] else
 * $NPUBENCH_SECRET / $NPUBENCH_WORKER_SECRET / $NPUBENCH_ADMIN_SECRET (NULL when none;
 * nb_secret_free each); a secret given on the command line is refused. */
nb_code nb_svc_coord_keys(const char *secret, const char *const files[3], char *keys[3],
                          nb_err *err);

typedef struct nb_svc nb_svc;

/* Connects to url with f's secret/TLS (f may be NULL: no auth). Fails with
 * NB_EUNAVAIL naming the URL when nothing listens there. */
nb_code nb_svc_open(const nb_svc_flags *f, const char *url, nb_svc **out, nb_err *err);
void nb_svc_close(nb_svc *s);

/* Calls "npubench.Client/<method>" with req (a generated message) and
 * unpacks the answer as resp_desc into *(T **)resp_out (free with
 * nb_wire_free). A timeout or a lost connection is retried (3 tries) with
 * the same request id, so a mutating call runs at most once. */
nb_code nb_svc_call(nb_svc *s, const char *method, const void *req,
                    const ProtobufCMessageDescriptor *resp_desc, void *resp_out, nb_err *err);

/* SubmitJob with a fresh idempotency key; *ids malloc'ed ([0] = the job to
 * watch). */
nb_code nb_svc_submit(nb_svc *s, const Npubench__JobSpec *spec, int shards, int64_t **ids,
                      size_t *n, nb_err *err);

/* GetJob: *out (free with nb_wire_free), with its log when include_log. */
nb_code nb_svc_get_job(nb_svc *s, int64_t job_id, int include_log, Npubench__Job **out,
                       nb_err *err);

/* Called after every WatchJob answer while waiting (w->n_events is 0 when
 * nothing changed); a non-zero return stops the wait with NB_ECANCELED. */
typedef int (*nb_svc_watch_fn)(void *ud, int64_t job_id, const Npubench__WatchJobResponse *w);

/* Waits (WatchJob long polls) until job_id is terminal or timeout_ms passed
 * (0 = no limit: NB_ETIMEOUT otherwise), then fetches it: *out (free with
 * nb_wire_free) carries state, error and the committed results. */
nb_code nb_svc_wait(nb_svc *s, int64_t job_id, int64_t timeout_ms, nb_svc_watch_fn fn, void *ud,
                    Npubench__Job **out, nb_err *err);

/* Prints a live progress line "[job 12] running 3/8 prompt 2: PASS" on f when it changed,
 * and inside a unit "[job 12] running verify-full: prompt 3/8, token 17/32" at most every
 * 250 ms on a TTY (one line rewritten with \r) and every second otherwise (plain lines):
 * an nb_svc_watch_fn with ud = an nb_svc_progress (zero-initialise the rest). */
typedef struct nb_svc_progress {
    FILE *f;
    const char *kind; /* NULL, or the job's kind named in token lines ("verify-full") */
    char last[640];   /* the line printed last */
    char last_tok[256]; /* the token line printed last */
    double last_tok_ms; /* when a token line was printed last */
    int tty;          /* 0: not asked yet, 1: f is a terminal, 2: it is not */
    int open;         /* a token line ends the terminal's text without a newline */
} nb_svc_progress;
int nb_svc_print_progress(void *ud, int64_t job_id, const Npubench__WatchJobResponse *w);

/* "2024-05-01", "2024-05-01T10:00:00Z" (UTC) or unix milliseconds. */
nb_code nb_svc_parse_date(const char *field, const char *s, int64_t *unix_ms, nb_err *err);

#endif
