/* nb_cmd_history: the history commands — history, compare, reference — against a
 * coordinator or the local database through an embedded one. */
#include "nb_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_db_runs.h"
#include "nb_job.h"
#include "nb_json.h"
#include "nb_out.h"
#include "nb_outcome.h"
#include "nb_svc.h"
#include "nb_time.h"
#include "nb_verifypb.h"

/* ---------------------------------------------------------------- history */

typedef struct hist_run {
    const Npubench__HistoryRow *any;
    const Npubench__HistoryRow *m[3]; /* ttft, tps, gate */
} hist_run;

static int metric_slot(const char *m)
{
    return !strcmp(m, "ttft") ? 0 : !strcmp(m, "tps") ? 1 : !strcmp(m, "gate") ? 2 : -1;
}

/* Whether a row carries a gate verdict: a verify run's, or an imported row's verify status
 * (the nightly's `make verify` of that model that night). */
static int has_verdict(const Npubench__HistoryRow *r)
{
    return !strcmp(nb_job_kind_family(r->kind_name), "verify") || *r->verify_status;
}

/* The GATE column, in the outcome words the dashboard's gate cells and JSON use: pass / fail
 * (error) where there is a gate, with the prompts it stands on ("pass 8/8"; a smoke's 1/1);
 * an imported run shows the nightly's status as it was: pass, fail, skip, error, unknown (?);
 * "-" elsewhere. */
static const char *gate_word(const Npubench__HistoryRow *r, char *buf, size_t cap)
{
    static const char *const imported[][2] = {
        {"pass", "pass"}, {"fail", "fail"}, {"error", "error"}, {"skip", "skip"},
        {"unknown", "?"}};
    for (size_t i = 0; i < sizeof imported / sizeof imported[0]; i++)
        if (!strcmp(r->verify_status, imported[i][0]))
            return imported[i][1];
    if (!has_verdict(r))
        return "-";
    const char *w = nb_outcome_name(nb_outcome_of_verdict(r->outcome));
    if (r->gate_total > 0)
        snprintf(buf, cap, "%s %d/%d", w, r->gate_pass, r->gate_total);
    else
        snprintf(buf, cap, "%s", w);
    return buf;
}

static void fmt_metric(char *buf, size_t cap, const Npubench__HistoryRow *r)
{
    if (!r) {
        snprintf(buf, cap, "-");
        return;
    }
    if (r->reps > 1 && r->stddev > 0)
        snprintf(buf, cap, "%.2f ± %.2f", r->mean ? r->mean : r->value, r->stddev);
    else
        snprintf(buf, cap, "%.2f", r->value);
}

static json_object *hist_json(const hist_run *h)
{
    const Npubench__HistoryRow *r = h->any;
    json_object *o = json_object_new_object();
    char iso[32];
    nb_time_iso(iso, r->finished_unix_ms);
    json_object_object_add(o, "run_id", json_object_new_int64(r->run_id));
    json_object_object_add(o, "job_id", json_object_new_int64(r->job_id));
    json_object_object_add(o, "started_utc", json_object_new_string(iso));
    json_object_object_add(o, "model", json_object_new_string(r->model));
    json_object_object_add(o, "backend", json_object_new_string(r->backend));
    json_object_object_add(o, "dtype", json_object_new_string(r->dtype));
    json_object_object_add(o, "board", json_object_new_string(r->board));
    json_object_object_add(o, "deployment_id", json_object_new_int64(r->deployment_id));
    json_object_object_add(o, "kind", json_object_new_string(r->kind_name));
    nb_out_str(o, "series", r->series);
    nb_out_str(o, "series_label", r->series_label);
    json_object_object_add(o, "context_len",
                           r->context_len ? json_object_new_int64(r->context_len) : NULL);
    json_object_object_add(o, "generated_tokens", r->generated_tokens
                                                      ? json_object_new_int64(r->generated_tokens)
                                                      : NULL);
    json_object_object_add(o, "source", json_object_new_string(r->source));
    /* a flagged run is a fail, as `job`, JUnit and the exit code say */
    nb_out_str(o, "outcome",
               nb_outcome_name(nb_outcome_of_run(nb_outcome_of_verdict(r->outcome), r->regression)));
    char gbuf[48];
    nb_out_str(o, "gate", gate_word(h->m[2] ? h->m[2] : r, gbuf, sizeof gbuf)); /* as GATE */
    if (*r->verify_status)
        json_object_object_add(o, "verify_status", json_object_new_string(r->verify_status));
    json_object_object_add(o, "commit", json_object_new_string(r->npubench_commit));
    json_object_object_add(o, "model_digest", json_object_new_string(r->model_digest));
    json_object_object_add(o, "regression", json_object_new_boolean(r->regression));
    json_object *m = json_object_new_object();
    static const char *const names[3] = {"ttft_ms", "tps", "gate"};
    for (int i = 0; i < 3; i++) {
        if (!h->m[i])
            continue;
        json_object *v = json_object_new_object();
        json_object_object_add(v, "value", json_object_new_double(h->m[i]->value));
        if (h->m[i]->run_id != r->run_id) /* --latest: measured by an older run */
            json_object_object_add(v, "run_id", json_object_new_int64(h->m[i]->run_id));
        /* A spread needs repetitions: one number (every imported run) has none. */
        int spread = h->m[i]->reps > 1;
        if (i < 2) {
            json_object_object_add(v, "mean",
                                   spread ? json_object_new_double(h->m[i]->mean) : NULL);
            json_object_object_add(v, "stddev",
                                   spread ? json_object_new_double(h->m[i]->stddev) : NULL);
            json_object_object_add(v, "reps", h->m[i]->reps ? json_object_new_int(h->m[i]->reps)
                                                            : NULL);
        }
        json_object_object_add(m, names[i], v);
    }
    json_object_object_add(o, "metrics", m);
    return o;
}

static int hist_cmp(const void *a, const void *b)
{
    const hist_run *x = a, *y = b;
    if (x->any->finished_unix_ms != y->any->finished_unix_ms)
        return x->any->finished_unix_ms < y->any->finished_unix_ms ? 1 : -1;
    return x->any->run_id < y->any->run_id ? 1 : x->any->run_id > y->any->run_id ? -1 : 0;
}

static int row_id_cmp(const void *a, const void *b)
{
    int64_t x = (*(const Npubench__HistoryRow *const *)a)->run_id,
            y = (*(const Npubench__HistoryRow *const *)b)->run_id;
    return x < y ? -1 : x > y;
}

/* One entry per run, newest first: the rows come one per (run, metric), grouped here by
 * sorting on the run id (--latest asks for every run: no quadratic scan).  NULL without
 * memory (then nothing is listed, as before any run). */
static hist_run *hist_runs(const Npubench__HistoryResponse *resp, size_t *n)
{
    size_t nrows = resp->n_rows, nr = 0;
    hist_run *runs = calloc(nrows ? nrows : 1, sizeof *runs);
    const Npubench__HistoryRow **rows = malloc((nrows ? nrows : 1) * sizeof *rows);
    if (!runs || !rows) {
        free(runs);
        free(rows);
        *n = 0;
        return NULL;
    }
    if (nrows)
        memcpy(rows, resp->rows, nrows * sizeof *rows);
    qsort(rows, nrows, sizeof *rows, row_id_cmp);
    for (size_t i = 0; i < nrows; i++) {
        const Npubench__HistoryRow *r = rows[i];
        if (!nr || runs[nr - 1].any->run_id != r->run_id)
            runs[nr++].any = r;
        int slot = metric_slot(r->metric);
        if (slot >= 0)
            runs[nr - 1].m[slot] = r;
    }
    free(rows);
    qsort(runs, nr, sizeof *runs, hist_cmp);
    *n = nr;
    return runs;
}

/* The deployment a run belongs to: model, board, backend, dtype. */
static int same_deployment(const Npubench__HistoryRow *a, const Npubench__HistoryRow *b)
{
    return !strcmp(a->model, b->model) && !strcmp(a->board, b->board) &&
           !strcmp(a->backend, b->backend) && !strcmp(a->dtype, b->dtype);
}

/* A run measured with a gate and nothing else (verify, verify-full, diagnosis). */
static int gate_only(const Npubench__HistoryRow *r)
{
    const char *f = nb_job_kind_family(r->kind_name);
    return !strcmp(f, "verify") || !strcmp(f, "diagnosis");
}

static int latest_cmp(const void *a, const void *b)
{
    const Npubench__HistoryRow *x = ((const hist_run *)a)->any, *y = ((const hist_run *)b)->any;
    int c = strcmp(x->model, y->model);
    if (!c)
        c = strcmp(x->board, y->board);
    if (!c)
        c = strcmp(x->backend, y->backend);
    if (!c)
        c = strcmp(x->dtype, y->dtype);
    if (!c)
        c = strcmp(x->kind_name, y->kind_name);
    if (!c)
        c = x->context_len < y->context_len ? -1 : x->context_len > y->context_len;
    return c ? c : strcmp(x->series, y->series);
}

/* --latest: runs[0..*n) (newest first) cut to one row per series (db/nb_db_series.h: the
 * deployment and what was measured: kind, context, tokens, prompt, threads), TTFT and TPS
 * from the newest run of that series measuring them, so a sweep's 131072-context point or a
 * cold `run` never stands for a warm `profile`. Each row carries its deployment's newest
 * gate verdict (a verify run's, or an imported row's nightly verify status); a deployment
 * with gate runs only has one row for them. Ordered by model, board, backend, dtype, kind,
 * context, so the models of a board (and the boards of a model) stand side by side. */
typedef struct latest_dep {
    const Npubench__HistoryRow *any, *gate; /* a run of it; its newest verdict */
    int perf;                               /* it has runs that are not gate runs */
} latest_dep;

static void keep_latest(hist_run *runs, size_t *n)
{
    size_t kept = 0, total = *n, nd = 0;
    latest_dep *deps = calloc(total ? total : 1, sizeof *deps);
    size_t *di = calloc(total ? total : 1, sizeof *di);
    if (!deps || !di) {
        free(deps);
        free(di);
        *n = 0;
        return;
    }
    /* per deployment (few): the newest verdict, and whether it measured more than a gate */
    for (size_t i = 0; i < total; i++) {
        const Npubench__HistoryRow *r = runs[i].any, *g = runs[i].m[2];
        size_t d = 0;
        while (d < nd && !same_deployment(deps[d].any, r))
            d++;
        if (d == nd)
            deps[nd++].any = r;
        di[i] = d;
        if (!deps[d].gate && g && has_verdict(g))
            deps[d].gate = g;
        deps[d].perf |= !gate_only(r);
    }
    for (size_t i = 0; i < total; i++) {
        const Npubench__HistoryRow *r = runs[i].any;
        const latest_dep *d = &deps[di[i]];
        if (gate_only(r) && d->perf)
            continue; /* its verdict rides on the deployment's measured rows */
        size_t k = 0;
        while (k < kept && !(gate_only(r) ? gate_only(runs[k].any) &&
                                                same_deployment(runs[k].any, r)
                                          : !strcmp(runs[k].any->series, r->series)))
            k++;
        if (k == kept) {
            runs[kept] = runs[i];
            runs[kept++].m[2] = d->gate;
            continue;
        }
        for (int m = 0; m < 2; m++)
            if (!runs[k].m[m])
                runs[k].m[m] = runs[i].m[m];
    }
    free(deps);
    free(di);
    qsort(runs, kept, sizeof *runs, latest_cmp);
    *n = kept;
}

/* The runs a row's values come from, newest first: "7" (one run), "7,5" (--latest: the gate
 * of run 7, TTFT and TPS of run 5); their kinds the same way ("verify,run"). */
static void row_sources(const hist_run *h, char *ids, size_t icap, char *kinds, size_t kcap)
{
    const Npubench__HistoryRow *src[4] = {h->any, h->m[0], h->m[1], h->m[2]};
    size_t il = 0, kl = 0;
    ids[0] = kinds[0] = '\0';
    for (int i = 0; i < 4; i++) {
        if (!src[i])
            continue;
        int seen = 0, kseen = 0;
        for (int j = 0; j < i; j++) {
            seen |= src[j] && src[j]->run_id == src[i]->run_id;
            kseen |= src[j] && !strcmp(src[j]->kind_name, src[i]->kind_name);
        }
        if (!seen && il < icap)
            il += (size_t)snprintf(ids + il, icap - il, "%s%lld", il ? "," : "",
                                   (long long)src[i]->run_id);
        if (!kseen && kl < kcap) {
            kl += (size_t)snprintf(kinds + kl, kcap - kl, "%s%s", kl ? "," : "",
                                   src[i]->kind_name);
            /* a sweep's rows differ by their context alone: say which */
            if (!strcmp(src[i]->kind_name, "sweep") && src[i]->context_len > 0 && kl < kcap)
                kl += (size_t)snprintf(kinds + kl, kcap - kl, "@%lld",
                                       (long long)src[i]->context_len);
        }
    }
}

/* A metric's mean and standard deviation in two cells (csv/md: numbers, not "397.27 ±
 * 83.16"); the deviation "" without repetitions, the value "-" without the metric. */
static void split_metric(char *v, char *sd, size_t cap, const Npubench__HistoryRow *r)
{
    v[0] = sd[0] = '\0';
    if (!r) {
        snprintf(v, cap, "-");
        return;
    }
    int spread = r->reps > 1 && r->stddev > 0;
    snprintf(v, cap, "%.2f", spread && r->mean ? r->mean : r->value);
    if (spread)
        snprintf(sd, cap, "%.2f", r->stddev);
}

static nb_code history_row(nb_out_table *t, const hist_run *h, int machine, nb_err *err)
{
    const Npubench__HistoryRow *r = h->any;
    char id[80], kinds[80], date[32], dep[256], ttft[40], tps[40], ttft_sd[40], tps_sd[40];
    row_sources(h, id, sizeof id, kinds, sizeof kinds);
    nb_time_iso(date, r->finished_unix_ms);
    snprintf(dep, sizeof dep, "%s %s/%s @%s", r->model, r->backend, r->dtype, r->board);
    if (machine) {
        split_metric(ttft, ttft_sd, sizeof ttft, h->m[0]);
        split_metric(tps, tps_sd, sizeof tps, h->m[1]);
    } else {
        fmt_metric(ttft, sizeof ttft, h->m[0]);
        fmt_metric(tps, sizeof tps, h->m[1]);
    }
    char commit[16];
    snprintf(commit, sizeof commit, "%.12s", *r->npubench_commit ? r->npubench_commit : "-");
    const char *flag = r->regression                    ? "REGRESSION"
                       : !strcmp(r->source, "import") ? "imported"
                                                        : "";
    char gbuf[48];
    const char *gate = gate_word(h->m[2] ? h->m[2] : r, gbuf, sizeof gbuf);
    if (machine) {
        const char *cells[] = {id, date, dep, kinds, gate, ttft, ttft_sd, tps, tps_sd,
                               commit, flag};
        return nb_out_table_row(t, cells, err);
    }
    const char *cells[] = {id, date, dep, kinds, gate, ttft, tps, commit, flag};
    return nb_out_table_row(t, cells, err);
}

static int print_history_table(const hist_run *runs, size_t nr, nb_out_format fmt)
{
    static const char *const heads[] = {"RUN", "DATE (UTC)", "DEPLOYMENT", "KIND", "GATE",
                                        "TTFT ms", "TPS", "COMMIT", "FLAG"};
    static const char *const mheads[] = {"RUN",     "DATE (UTC)", "DEPLOYMENT", "KIND",
                                         "GATE",    "TTFT ms",    "TTFT sd",    "TPS",
                                         "TPS sd",  "COMMIT",     "FLAG"};
    int machine = fmt == NB_OUT_CSV || fmt == NB_OUT_MD;
    nb_err err;
    nb_out_table *t = machine ? nb_out_table_new(mheads, 11) : nb_out_table_new(heads, 9);
    if (!t)
        return nb_cmd_usage_error("history", "out of memory%s", "");
    for (size_t i = 0; i < nr; i++)
        if (history_row(t, &runs[i], machine, &err)) {
            nb_out_table_free(t);
            return nb_cmd_fail("history", &err);
        }
    nb_out_table_print(stdout, t, fmt);
    nb_out_table_free(t);
    return NB_EXIT_OK;
}

/* --metric, --since and --kind into req; NB_EXIT_OK, or the usage error it printed. */
static int history_filters(const char *metric, const char *since, const char *kind,
                           Npubench__HistoryRequest *req)
{
    nb_err err;
    if (metric) {
        nb_db_metric m;
        if (nb_db_metric_parse(metric, &m, &err) ||
            (m != NB_METRIC_TPS && m != NB_METRIC_TTFT && m != NB_METRIC_GATE))
            return nb_cmd_usage_error("history", "--metric '%s': expected tps, ttft or gate",
                                             metric);
        req->metric = (char *)nb_db_metric_name(m);
    }
    if (since && nb_svc_parse_date("--since", since, &req->since_unix_ms, &err))
        return nb_cmd_usage_error("history", "%s", err.msg);
    if (kind) {
        /* a job's kind, or one only imports store: a nightly's profile row (bench) or one
         * context of its decode sweep (sweep) */
        static const char *const stored[] = {"bench", "sweep"};
        int known = (req->kind = nb_job_kind_parse(kind)) != 0;
        for (size_t i = 0; !known && i < sizeof stored / sizeof stored[0]; i++)
            known = !strcmp(kind, stored[i]);
        if (!known)
            return nb_cmd_usage_error("history", "--kind '%s': expected run, profile, verify, "
                                                 "verify-full, diagnosis, bench or sweep",
                                      kind);
        req->kind_name = (char *)kind;
    }
    return NB_EXIT_OK;
}

/* The runs as an npubench.history/1 document, or a table, or a line saying there are none. */
static int print_history(const hist_run *runs, size_t nr, nb_out_format fmt, const char *model)
{
    if (fmt == NB_OUT_JSON) {
        json_object *doc = nb_out_doc("history"), *arr = json_object_new_array();
        for (size_t i = 0; i < nr; i++)
            json_object_array_add(arr, hist_json(&runs[i]));
        json_object_object_add(doc, "runs", arr);
        nb_out_print_doc(stdout, doc);
        return NB_EXIT_OK;
    }
    if (!nr && fmt == NB_OUT_TEXT) {
        printf("no runs%s%s in the history\n", model ? " of " : "", model ? model : "");
        return NB_EXIT_OK;
    }
    return print_history_table(runs, nr, fmt);
}

int nb_cmd_history(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *model = NULL, *board = NULL, *metric = NULL, *since = NULL, *db = NULL,
               *backend = NULL, *dtype = NULL, *kind = NULL, *air_sha = NULL,
               *aie_hash = NULL, *peano = NULL, *until = NULL, *commit = NULL, *toolchain = NULL;
    nb_out_flags of = {0};
    int limit = 50, help = 0, latest = 0, context = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"model", NB_OPT_STR, &model, 0, 0, "model (instruct, a name or a path)"},
        {"board", NB_OPT_STR, &board, 0, 0, "only this board"},
        {"backend", NB_OPT_STR, &backend, 0, 0, "only this backend"},
        {"dtype", NB_OPT_STR, &dtype, 0, 0, "only this dtype"},
        {"kind", NB_OPT_STR, &kind, 0, 0,
         "only runs of this kind (run, profile, verify, ..., bench, sweep)"},
        {"context", NB_OPT_INT, &context, 1, 1 << 30,
         "only runs at this context length (a sweep's points)"},
        {"air-sha", NB_OPT_STR, &air_sha, 0, 0, "only imported runs of this mlir-air SHA (prefix)"},
        {"aie-hash", NB_OPT_STR, &aie_hash, 0, 0, "only imported runs of this mlir-aie hash (prefix)"},
        {"peano", NB_OPT_STR, &peano, 0, 0, "only imported runs of this Peano version (prefix)"},
        {"metric", NB_OPT_STR, &metric, 0, 0, "tps, ttft or gate (default: all three)"},
        {"since", NB_OPT_STR, &since, 0, 0, "YYYY-MM-DD[THH:MM:SSZ] (UTC)"},
        {"until", NB_OPT_STR, &until, 0, 0, "runs started before this date (UTC)"},
        {"commit", NB_OPT_STR, &commit, 0, 0, "only runs of this npubench commit (prefix)"},
        {"toolchain", NB_OPT_STR, &toolchain, 0, 0,
         "only runs with this toolchain entry: KEY=VALUE or VALUE (prefix)"},
        {"limit", NB_OPT_INT, &limit, 1, 100000, "newest N runs (default 50)"},
        {"latest", NB_OPT_FLAG, &latest, 0, 0,
         "the newest run of each series (deployment, kind, context, tokens), side by side"},
        NB_OUT_OPTS(of),
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " NB_CMD_DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    int rc = nb_cmd_parse("history",
                          "npubench history [--model M] [--latest] [--board B] [--metric tps|ttft|gate] "
                          "[--since DATE] [--until DATE] [--commit SHA] [--toolchain K=V] "
                          "[--json|--format csv|md]",
                          argc, argv, opts, NB_NOPTS(opts), NULL, 0, NULL, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    nb_out_format fmt;
    if (nb_out_format_of(&of, &fmt, &err))
        return nb_cmd_usage_error("history", "%s", err.msg);
    Npubench__HistoryRequest req = NPUBENCH__HISTORY_REQUEST__INIT;
    if ((rc = history_filters(metric, since, kind, &req)))
        return rc;
    if (until && nb_svc_parse_date("--until", until, &req.until_unix_ms, &err))
        return nb_cmd_usage_error("history", "%s", err.msg);
    if (until && since && req.until_unix_ms <= req.since_unix_ms)
        return nb_cmd_usage_error("history", "--until %s is not after --since", until);
    req.commit = (char *)(commit ? commit : "");
    req.toolchain = (char *)(toolchain ? toolchain : "");
    req.model = (char *)(model ? model : "");
    req.board = (char *)(board ? board : "");
    req.backend = (char *)(backend ? backend : "");
    req.dtype = (char *)(dtype ? dtype : "");
    req.air_sha = (char *)(air_sha ? air_sha : "");
    req.aie_hash = (char *)(aie_hash ? aie_hash : "");
    req.peano = (char *)(peano ? peano : "");
    req.context_len = context;
    /* --latest looks at every run the filters keep, then cuts: a deployment whose newest
     * run is older than the others' last 50 still has its row. */
    req.limit = latest ? NB_DB_HISTORY_MAX : limit;
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("history", &sf, db, 1, &c)))
        return rc;
    Npubench__HistoryResponse *resp;
    if (nb_svc_call(c.svc, "History", &req, &npubench__history_response__descriptor, &resp,
                    &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("history", &err);
    }
    size_t nr = 0;
    hist_run *runs = hist_runs(resp, &nr);
    if (latest && runs)
        keep_latest(runs, &nr);
    if (nr > (size_t)limit)
        nr = (size_t)limit;
    rc = print_history(runs, nr, fmt, model);
    free(runs);
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return rc; /* history reports; only submit --wait and compare fail on it */
}

/* ---------------------------------------------------------------- compare */

static const char *metric_label(const char *m)
{
    return !strcmp(m, "ttft")     ? "TTFT (ms)"
           : !strcmp(m, "tps")    ? "TPS (tokens/s)"
           : !strcmp(m, "decode") ? "Decode (ms/token)"
           : !strcmp(m, "tpot")   ? "TPOT (ms)"
                                  : m;
}

static void fmt_value(char *buf, size_t cap, double v)
{
    if (v > 0)
        snprintf(buf, cap, "%.2f", v);
    else
        snprintf(buf, cap, "-");
}

/* "p=0.0079 (5 vs 5)": the U test's p over the samples it saw; "-" without both sides. */
static void fmt_p(char *buf, size_t cap, const Npubench__CompareRow *r)
{
    if (r->p_value < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "p=%.2g (%d vs %d)", r->p_value, r->n, r->base_n);
}

/* "FAIL at step 3", "PASS", "PASS, diverged at 7", "-" (not in that run). */
static void fmt_gate(char *buf, size_t cap, const char *status, int step)
{
    if (!*status)
        snprintf(buf, cap, "-");
    else if (step >= 0)
        snprintf(buf, cap, "%s, diverged at step %d", status, step);
    else
        snprintf(buf, cap, "%s", status);
}

static void print_prompt_changes(const Npubench__CompareResponse *resp)
{
    printf("\nVerify: %d prompt%s in both runs, %zu changed outcome or divergence step\n",
           resp->prompts_compared, resp->prompts_compared == 1 ? "" : "s",
           resp->n_prompt_changes);
    if (!resp->n_prompt_changes)
        return;
    char head[40];
    snprintf(head, sizeof head, "Base (run %lld)", (long long)resp->base_run_id);
    printf("%-6s | %-28s | %-28s | %s\n", "Prompt", head, "New", "Text");
    printf("-------|------------------------------|------------------------------|------\n");
    for (size_t i = 0; i < resp->n_prompt_changes; i++) {
        const Npubench__PromptChange *c = resp->prompt_changes[i];
        char b[64], v[64];
        fmt_gate(b, sizeof b, c->base_status, c->base_divergence_step);
        fmt_gate(v, sizeof v, c->status, c->divergence_step);
        printf("%-6d | %-28s | %-28s | %.60s\n", c->index, b, v, c->prompt);
    }
}

/* The noise band (%) and significance level the coordinator judged by (its report says). */
static void compare_rule(const Npubench__CompareResponse *resp, double *tol, double *alpha)
{
    *tol = 5;
    *alpha = 0.05;
    json_object *doc = resp->report_json ? json_tokener_parse(resp->report_json) : NULL, *v;
    if (doc && json_object_object_get_ex(doc, "tolerance_pct", &v))
        *tol = json_object_get_double(v);
    if (doc && json_object_object_get_ex(doc, "alpha", &v))
        *alpha = json_object_get_double(v);
    json_object_put(doc);
}

/* The two runs named, then one row per compared metric (base, new, change, the U test's p),
 * then the verify prompts that changed. */
static void print_compare_table(const Npubench__CompareResponse *resp, int against)
{
    printf("%s\n%s %s\n", resp->label, against ? "reference:" : "vs", resp->base_label);
    /* Two models are not each other's baseline: a demanding reader must see that no
     * verdict was drawn, not a silent PASS. */
    if (resp->cross_model)
        printf("cross-model comparison%s: side by side (TTFT, TPS, gate, ratios), no regression "
               "verdict\n", resp->cross_board ? ", across boards" : "");
    else if (resp->cross_board)
        printf("same model across boards: compared as usual\n");
    if (resp->cross_model && (*resp->gate || *resp->base_gate))
        printf("gate: run %lld %s, run %lld %s\n", (long long)resp->run_id,
               *resp->gate ? resp->gate : "-", (long long)resp->base_run_id,
               *resp->base_gate ? resp->base_gate : "-");
    if (*resp->matched)
        printf("matched: %s\n", resp->matched);
    if (resp->n_rows) {
        char bh[32], nh[32];
        snprintf(bh, sizeof bh, "Base (run %lld)", (long long)resp->base_run_id);
        snprintf(nh, sizeof nh, "New (run %lld)", (long long)resp->run_id);
        /* "×" is two bytes and one column: widths count bytes */
        printf("\n%-18s | %-14s | %-14s | %-17s | %s\n", "Metric", bh, nh, "Change (× / %)",
               "Mann-Whitney");
        printf("-------------------|----------------|----------------|------------------|"
               "-------------\n");
    }
    for (size_t i = 0; i < resp->n_rows; i++) {
        const Npubench__CompareRow *r = resp->rows[i];
        char b[32], v[32], d[48], p[48];
        fmt_value(b, sizeof b, r->base_value);
        fmt_value(v, sizeof v, r->value);
        if (r->base_value > 0 && r->value > 0)
            snprintf(d, sizeof d, "%.2f× / %+.1f%%", r->value / r->base_value, r->delta_pct);
        else
            snprintf(d, sizeof d, "-");
        fmt_p(p, sizeof p, r);
        /* "~" as benchstat: the samples cannot tell this change from noise */
        printf("%-18s | %-14s | %-14s | %-*s | %s%s\n", metric_label(r->metric), b, v,
               strstr(d, "×") ? 17 : 16, d, p,
               r->regression ? "  REGRESSION" : r->significant ? "" : "  ~");
    }
    if (resp->n_rows && !resp->cross_model) {
        double tol, alpha;
        compare_rule(resp, &tol, &alpha);
        printf("REGRESSION = worse beyond the noise band (±%g%%) and Mann-Whitney p < %g; "
               "~ = not significant\n", tol, alpha);
    }
    /* Prompt i of one model's set is not prompt i of the other's: no per-prompt diff. */
    if (!resp->cross_model && (resp->prompts_compared || resp->n_prompt_changes))
        print_prompt_changes(resp);
    /* the verdict in the words job, wait and JSON use, with the exit code it gives */
    nb_outcome o = nb_outcome_of_verdict(resp->outcome);
    printf("Outcome: %s (exit %d)\n", nb_outcome_name(o), nb_outcome_exit(o));
}

/* npubench.compare/1: ids and raw values, one row per metric the coordinator compared. */
static json_object *compare_json(const Npubench__CompareResponse *resp, int exit_code)
{
    json_object *doc = nb_out_doc("compare"), *rows = nb_verifypb_compare_rows_json(resp);
    nb_out_i64(doc, "run_id", resp->run_id);
    nb_out_i64(doc, "base_run_id", resp->base_run_id);
    nb_out_i64(doc, "base_job_id", resp->base_job_id);
    nb_out_str(doc, "outcome", nb_outcome_name(nb_outcome_of_verdict(resp->outcome)));
    nb_out_i64(doc, "exit_code", exit_code);
    double tol, alpha;
    compare_rule(resp, &tol, &alpha);
    nb_out_num(doc, "noise_band_pct", tol);
    nb_out_str(doc, "test", "mann-whitney-u two-sided");
    char a[32];
    snprintf(a, sizeof a, "%g", alpha); /* 0.05, not 0.050000000000000003 */
    json_object_object_add(doc, "alpha", json_object_new_double_s(alpha, a));
    nb_out_str(doc, "gate", resp->gate);
    nb_out_str(doc, "base_gate", resp->base_gate);
    nb_out_str(doc, "scope", resp->cross_model   ? "cross-model"
                             : resp->cross_board ? "cross-board"
                                                 : "same");
    json_object_object_add(doc, "rows", rows);
    nb_out_str(doc, "kind", resp->kind);
    nb_out_str(doc, "base_kind", resp->base_kind);
    if (*resp->matched)
        nb_out_str(doc, "matched", resp->matched);
    nb_out_i64(doc, "prompts_compared", resp->prompts_compared);
    json_object *pcs = json_object_new_array();
    for (size_t i = 0; i < resp->n_prompt_changes; i++) {
        const Npubench__PromptChange *c = resp->prompt_changes[i];
        json_object *o = json_object_new_object();
        nb_out_i64(o, "index", c->index);
        nb_out_str(o, "prompt", c->prompt);
        nb_out_str(o, "base_status", c->base_status);
        nb_out_str(o, "status", c->status);
        nb_out_i64(o, "base_divergence_step", c->base_divergence_step);
        nb_out_i64(o, "divergence_step", c->divergence_step);
        json_object_array_add(pcs, o);
    }
    json_object_object_add(doc, "prompt_changes", pcs);
    return doc;
}

/* --format csv|md: every row the coordinator compared, base and new side by side. */
static nb_code print_compare_rows(const Npubench__CompareResponse *resp, nb_out_format fmt,
                                  nb_err *err)
{
    static const char *const heads[] = {"metric", "base_run", "base", "run", "value",
                                        "delta_pct", "regression", "p_value"};
    nb_out_table *t = nb_out_table_new(heads, 8);
    if (!t)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    char br[24], rn[24];
    snprintf(br, sizeof br, "%lld", (long long)resp->base_run_id);
    snprintf(rn, sizeof rn, "%lld", (long long)resp->run_id);
    nb_code rc = NB_OK;
    for (size_t i = 0; !rc && i < resp->n_rows; i++) {
        const Npubench__CompareRow *r = resp->rows[i];
        char b[32], v[32], d[32];
        snprintf(b, sizeof b, "%.4f", r->base_value);
        snprintf(v, sizeof v, "%.4f", r->value);
        snprintf(d, sizeof d, "%+.2f", r->delta_pct);
        char p[32] = "";
        if (r->p_value >= 0)
            snprintf(p, sizeof p, "%.4g", r->p_value);
        const char *cells[] = {r->metric, br, b, rn, v, d, r->regression ? "yes" : "no", p};
        rc = nb_out_table_row(t, cells, err);
    }
    if (!rc)
        nb_out_table_print(stdout, t, fmt);
    nb_out_table_free(t);
    return rc;
}

/* The run ids (RUN_A RUN_B, or RUN --against reference) into ids; NB_EXIT_OK, or the usage
 * error it printed. */
static int compare_ids(const char *against, const char *const *pos, int np, long long ids[2])
{
    if (against && strcmp(against, "reference"))
        return nb_cmd_usage_error("compare", "--against '%s': only 'reference' is known", against);
    if ((against && np != 1) || (!against && np != 2))
        return nb_cmd_usage_error("compare", "expected OLD NEW (two run ids, the base first), or RUN --against "
                                  "reference%s",
                                  "");
    for (int i = 0; i < np; i++) {
        char *end;
        ids[i] = strtoll(pos[i], &end, 10);
        if (*end || ids[i] <= 0)
            return nb_cmd_usage_error("compare", "'%s' is not a run id", pos[i]);
    }
    return NB_EXIT_OK;
}

int nb_cmd_compare(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *against = NULL, *db = NULL;
    nb_out_flags of = {0};
    int jobs = 0, tol = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"against", NB_OPT_STR, &against, 0, 0, "'reference': the model's reference deployment"},
        {"jobs", NB_OPT_FLAG, &jobs, 0, 0, "the ids are job ids, not run ids"},
        {"tolerance", NB_OPT_INT, &tol, 0, 1000,
         "noise band in %: a regression is a change beyond it with Mann-Whitney p < 0.05 "
         "(default 5)"},
        NB_OUT_OPTS(of),
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " NB_CMD_DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[2];
    int np = 0;
    int rc =
        nb_cmd_parse("compare", "npubench compare OLD NEW | compare RUN --against reference",
                     argc, argv, opts, NB_NOPTS(opts), pos, 2, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    long long ids[2] = {0, 0};
    if ((rc = compare_ids(against, pos, np, ids)))
        return rc;
    nb_err err;
    nb_out_format fmt;
    if (nb_out_format_of(&of, &fmt, &err))
        return nb_cmd_usage_error("compare", "%s", err.msg);
    Npubench__CompareRequest req = NPUBENCH__COMPARE_REQUEST__INIT;
    /* OLD NEW, as git diff and benchstat: the first is the base; with --against the one
     * id is the new run */
    long long nw = against ? ids[0] : ids[1], old = against ? 0 : ids[0];
    if (jobs) {
        req.job_id = nw;
        req.base_job_id = old;
    } else {
        req.run_id = nw;
        req.base_run_id = old;
    }
    req.tolerance_pct = tol;
    nb_cmd_conn c;
    if ((rc = nb_cmd_conn_open("compare", &sf, db, 1, &c)))
        return rc;
    Npubench__CompareResponse *resp;
    if (nb_svc_call(c.svc, "Compare", &req, &npubench__compare_response__descriptor, &resp,
                    &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("compare", &err);
    }
    rc = nb_outcome_exit(nb_outcome_of_verdict(resp->outcome));
    if (fmt == NB_OUT_TEXT)
        print_compare_table(resp, against != NULL);
    else if (fmt == NB_OUT_JSON)
        nb_out_print_doc(stdout, compare_json(resp, rc));
    else if (print_compare_rows(resp, fmt, &err))
        rc = nb_cmd_fail("compare", &err);
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return rc;
}

/* ---------------------------------------------------------------- reference */

/* reference show [MODEL]: one line per model, or its deployment; NB_EXIT_OK or the error. */
static int reference_show(nb_cmd_conn *c, const char *model, nb_out_format fmt)
{
    Npubench__GetReferenceRequest req = NPUBENCH__GET_REFERENCE_REQUEST__INIT;
    req.model = (char *)(model ? model : "");
    nb_err err;
    Npubench__GetReferenceResponse *resp;
    if (nb_svc_call(c->svc, "GetReference", &req, &npubench__get_reference_response__descriptor,
                    &resp, &err))
        return nb_cmd_fail("reference", &err);
    if (fmt == NB_OUT_JSON) {
        json_object *doc = nb_out_doc("reference"), *arr = json_object_new_array();
        for (size_t i = 0; i < resp->n_references; i++) {
            const Npubench__Reference *x = resp->references[i];
            json_object *o = json_object_new_object();
            nb_out_str(o, "model", x->model);
            nb_out_i64(o, "deployment_id", x->deployment_id);
            nb_out_str(o, "deployment", x->description);
            nb_out_i64(o, "set_unix_ms", x->set_unix_ms);
            nb_out_i64(o, "runs", x->runs);
            nb_out_i64(o, "latest_run_id", x->latest_run_id);
            json_object_array_add(arr, o);
        }
        json_object_object_add(doc, "references", arr);
        nb_out_print_doc(stdout, doc);
    } else if (fmt == NB_OUT_CSV || fmt == NB_OUT_MD) {
        /* a table like every other --format: one row per model, even none */
        static const char *const heads[] = {"model",        "deployment_id", "deployment",
                                            "set (UTC)",    "runs",          "latest_run_id"};
        nb_out_table *t = nb_out_table_new(heads, 6);
        nb_code trc = t ? NB_OK : nb_err_set(&err, NB_ENOMEM, "out of memory");
        for (size_t i = 0; !trc && i < resp->n_references; i++) {
            const Npubench__Reference *x = resp->references[i];
            char id[24], iso[32], runs[24], last[24];
            snprintf(id, sizeof id, "%lld", (long long)x->deployment_id);
            nb_time_iso(iso, x->set_unix_ms);
            snprintf(runs, sizeof runs, "%d", x->runs);
            snprintf(last, sizeof last, "%lld", (long long)x->latest_run_id);
            const char *cells[] = {x->model, id, x->description, iso, runs,
                                   x->latest_run_id ? last : ""};
            trc = nb_out_table_row(t, cells, &err);
        }
        if (!trc)
            nb_out_table_print(stdout, t, fmt);
        nb_out_table_free(t);
        nb_wire_free(resp);
        return trc ? nb_cmd_fail("reference", &err) : NB_EXIT_OK;
    } else if (!resp->n_references) {
        printf("no reference is set%s%s\n", model ? " for " : "", model ? model : "");
    }
    for (size_t i = 0; fmt != NB_OUT_JSON && i < resp->n_references; i++) {
        const Npubench__Reference *x = resp->references[i];
        char iso[32];
        nb_time_iso(iso, x->set_unix_ms);
        printf("%s: deployment %lld (%s), set %s, %d run%s", x->model,
               (long long)x->deployment_id, x->description, iso, x->runs,
               x->runs == 1 ? "" : "s");
        if (x->latest_run_id)
            printf(", latest run %lld", (long long)x->latest_run_id);
        printf("\n");
    }
    nb_wire_free(resp);
    return NB_EXIT_OK;
}

/* The SetReference request of `set DEPLOYMENT | set --run N | set --job N` or `unset MODEL`;
 * NB_EXIT_OK or the usage error it printed. */
static int reference_request(const char *const *pos, int np, int run, int job,
                             Npubench__SetReferenceRequest *req)
{
    if (!strcmp(pos[0], "unset")) {
        if (np != 2)
            return nb_cmd_usage_error("reference", "unset: name the MODEL (any of its names)%s",
                                      "");
        req->unset = 1;
        req->model = (char *)pos[1];
    } else if (np == 2) {
        char *end;
        long long d = strtoll(pos[1], &end, 10);
        if (*end || d <= 0)
            return nb_cmd_usage_error("reference", "'%s' is not a deployment id", pos[1]);
        req->deployment_id = d;
    } else if (run) {
        req->run_id = run;
    } else if (job) {
        req->job_id = job;
    } else {
        return nb_cmd_usage_error("reference", "set: name a DEPLOYMENT id, --run N or --job N%s",
                                  "");
    }
    return NB_EXIT_OK;
}

int nb_cmd_reference(int argc, char **argv)
{
    nb_svc_flags sf = {0};
    const char *db = NULL;
    nb_out_flags of = {0};
    int run = 0, job = 0, help = 0;
    nb_opt opts[] = {
        NB_SVC_OPTS(sf),
        {"run", NB_OPT_INT, &run, 1, 2147483647, "set: the deployment of this history run"},
        {"job", NB_OPT_INT, &job, 1, 2147483647, "set: the deployment of this job's run"},
        NB_OUT_OPTS(of),
        {"db", NB_OPT_STR, &db, 0, 0, "local database (default " NB_CMD_DEFAULT_DB ")"},
        {"help", NB_OPT_FLAG, &help, 0, 0, "this help"},
    };
    const char *pos[2];
    int np = 0;
    int rc = nb_cmd_parse("reference",
                          "npubench reference set DEPLOYMENT | set --run N | set --job N | "
                          "show [MODEL] | unset MODEL",
                          argc, argv, opts, NB_NOPTS(opts), pos, 2, &np, &help);
    if (rc)
        return rc < 0 ? 0 : rc;
    nb_err err;
    nb_out_format fmt;
    if (nb_out_format_of(&of, &fmt, &err))
        return nb_cmd_usage_error("reference", "%s", err.msg);
    if (!np || (strcmp(pos[0], "set") && strcmp(pos[0], "show") && strcmp(pos[0], "unset")))
        return nb_cmd_usage_error("reference", "expected 'set DEPLOYMENT' (a deployment id from "
                                               "`npubench history --json`), 'show [MODEL]' or "
                                               "'unset MODEL'%s",
                                  "");
    Npubench__SetReferenceRequest req = NPUBENCH__SET_REFERENCE_REQUEST__INIT;
    if (strcmp(pos[0], "show") && (rc = reference_request(pos, np, run, job, &req)))
        return rc;
    nb_cmd_conn c;
    sf.admin = strcmp(pos[0], "show") != 0; /* set / unset */
    if ((rc = nb_cmd_conn_open("reference", &sf, db, 1, &c)))
        return rc;
    if (!strcmp(pos[0], "show")) {
        rc = reference_show(&c, np == 2 ? pos[1] : NULL, fmt);
        nb_cmd_conn_close(&c);
        return rc;
    }
    Npubench__SetReferenceResponse *resp;
    if (nb_svc_call(c.svc, "SetReference", &req, &npubench__set_reference_response__descriptor,
                    &resp, &err)) {
        nb_cmd_conn_close(&c);
        return nb_cmd_fail("reference", &err);
    }
    if (req.unset)
        printf("reference of %s unset (was deployment %lld, %s)", resp->model,
               (long long)resp->previous_deployment_id, resp->description);
    else
        printf("reference of %s: deployment %lld (%s)", resp->model,
               (long long)resp->deployment_id, resp->description);
    if (!req.unset && resp->previous_deployment_id &&
        resp->previous_deployment_id != resp->deployment_id)
        printf(", was deployment %lld", (long long)resp->previous_deployment_id);
    printf("\n");
    nb_wire_free(resp);
    nb_cmd_conn_close(&c);
    return NB_EXIT_OK;
}
