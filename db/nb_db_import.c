/* nb_db_import: perf.json / history.ndjson -> runs. Parses with json-c, maps
 * each object to a run, skips known external ids and reports bad rows by line. */
#include "nb_db_import.h"

#include <json-c/json.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nb_db_deploy.h"
#include "nb_db_int.h"
#include "nb_db_runs.h"
#include "nb_file.h"
#include "nb_json.h"
#include "nb_sha256.h"

#define MAX_TOOLCHAIN 256

typedef struct importer {
    nb_db *db;
    const char *path;
    const nb_db_import_opts *opts;
    nb_db_import_report *rep;
} importer;

static void record_bad(importer *im, size_t line, const char *msg)
{
    nb_db_import_report *r = im->rep;
    r->n_bad++;
    if (r->n_bad_kept >= NB_DB_IMPORT_BAD_KEEP)
        return;
    if (!r->bad) {
        r->bad = calloc(NB_DB_IMPORT_BAD_KEEP, sizeof *r->bad);
        if (!r->bad)
            return; /* counted, just not described */
    }
    nb_db_import_bad *b = &r->bad[r->n_bad_kept++];
    b->line = line;
    snprintf(b->msg, sizeof b->msg, "%s:%zu: %s", im->path, line, msg);
}

/* ---- canonical JSON, for ids of objects that carry no run id ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void buf_add(buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void buf_str(buf *b, const char *s) { buf_add(b, s, strlen(s)); }

typedef struct member {
    const char *key;
    json_object *val;
} member;

static int cmp_member(const void *a, const void *b)
{
    return strcmp(((const member *)a)->key, ((const member *)b)->key);
}

/* Keys sorted bytewise, no whitespace, numbers by value ("5", "5.0" and
 * "5e0" print alike), so formatting differences do not change the id. */
static void canon(buf *b, json_object *o, int depth)
{
    char num[64];
    if (depth > 64) {
        b->oom = 1;
        return;
    }
    switch (json_object_get_type(o)) {
    case json_type_null: buf_str(b, "null"); break;
    case json_type_boolean: buf_str(b, json_object_get_boolean(o) ? "true" : "false"); break;
    case json_type_int:
        snprintf(num, sizeof num, "%lld", (long long)json_object_get_int64(o));
        buf_str(b, num);
        break;
    case json_type_double: {
        double d = json_object_get_double(o);
        if (d == floor(d) && fabs(d) < 1e15)
            snprintf(num, sizeof num, "%.0f", d);
        else
            snprintf(num, sizeof num, "%.17g", d);
        buf_str(b, num);
        break;
    }
    case json_type_string:
        buf_str(b, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
        break;
    case json_type_array: {
        buf_str(b, "[");
        size_t n = json_object_array_length(o);
        for (size_t i = 0; i < n; i++) {
            if (i)
                buf_str(b, ",");
            canon(b, json_object_array_get_idx(o, i), depth + 1);
        }
        buf_str(b, "]");
        break;
    }
    case json_type_object: {
        size_t n = (size_t)json_object_object_length(o), k = 0;
        member *m = n ? malloc(n * sizeof *m) : NULL;
        if (n && !m) {
            b->oom = 1;
            return;
        }
        json_object_object_foreach(o, key, val)
        {
            if (k < n) {
                m[k].key = key;
                m[k].val = val;
                k++;
            }
        }
        qsort(m, k, sizeof *m, cmp_member);
        buf_str(b, "{");
        for (size_t i = 0; i < k; i++) {
            json_object *ks = json_object_new_string(m[i].key);
            if (!ks) {
                b->oom = 1;
                break;
            }
            if (i)
                buf_str(b, ",");
            canon(b, ks, depth + 1);
            json_object_put(ks);
            buf_str(b, ":");
            canon(b, m[i].val, depth + 1);
        }
        buf_str(b, "}");
        free(m);
        break;
    }
    }
}

/* ---- fields: read through common/nb_json; a bad row keeps the reader's message ---- */

static const char *type_name(json_object *v) { return json_type_to_name(json_object_get_type(v)); }

static int take(const nb_err *e, char *msg, size_t msz)
{
    snprintf(msg, msz, "%.*s", (int)(msz ? msz - 1 : 0), e->msg);
    return -1;
}

/* A token count: a number (extract_perf may print 128.0) that must be whole; -1 absent. */
static int need_count(json_object *o, const char *what, const char *key, int64_t *out,
                      char *msg, size_t msz)
{
    double d;
    nb_err e;
    *out = -1;
    if (nb_json_need_num(o, what, key, 0, 0, 1e15, NAN, &d, &e))
        return take(&e, msg, msz);
    if (isnan(d))
        return 0;
    if (d != floor(d)) {
        snprintf(msg, msz, "%s%s%s: must be a whole number of tokens 0..1e15, got %g",
                 what ? what : "", what ? "." : "", key, d);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

/* ---- timestamps ---- */

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if ((*p)[i] < '0' || (*p)[i] > '9')
            return -1;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* "YYYY-MM-DD", optionally "THH:MM[:SS[.frac]]" (or a space for T), then
 * optionally "Z" or "+HH:MM"/"-HHMM"; no zone means UTC. */
static int parse_time(const char *s, int64_t *ms)
{
    const char *p = s;
    int y, mo, d, h = 0, mi = 0, se = 0, frac_ms = 0, off = 0;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
        digits(&p, 2, &d))
        return -1;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1])
        return -1;
    if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return -1;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
            return -1;
        if (*p == ':') {
            p++;
            if (digits(&p, 2, &se))
                return -1;
            if (*p == '.' || *p == ',') {
                p++;
                int nd = 0, scale = 100;
                while (*p >= '0' && *p <= '9') {
                    if (nd < 3)
                        frac_ms += (*p - '0') * scale;
                    scale /= 10;
                    nd++;
                    p++;
                }
                if (!nd)
                    return -1;
            }
        }
        if (h > 23 || mi > 59 || se > 60)
            return -1;
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, oh, om;
            if (digits(&p, 2, &oh))
                return -1;
            if (*p == ':')
                p++;
            if (digits(&p, 2, &om) || oh > 23 || om > 59)
                return -1;
            off = sign * (oh * 60 + om);
        }
    }
    if (*p)
        return -1;
    int64_t days = days_from_civil(y, mo, d);
    *ms = ((days * 86400 + h * 3600 + mi * 60 + se) - (int64_t)off * 60) * 1000 + frac_ms;
    return 0;
}

/* ---- one object -> one run ---- */

/* mlir-air's example directories name their weight format last (llama32_1b_q4nx,
 * llama32_1b_int4, qwen25_3b_q4); the rest are bf16. "_q4nx" is before "_q4" only for
 * clarity: a name ends in one of them at most. */
static const nb_db_dtype_rule builtin_dtypes[] = {
    {"_q4nx", "q4nx"},
    {"_int4", "int4"},
    {"_q4", "q4"},
};

static const char *dtype_by_rules(const char *model, const nb_db_dtype_rule *r, size_t n)
{
    size_t len = strlen(model);
    for (size_t i = 0; i < n; i++) {
        size_t sl = r[i].suffix ? strlen(r[i].suffix) : 0;
        if (sl && sl <= len && !strcasecmp(model + len - sl, r[i].suffix) && r[i].dtype &&
            *r[i].dtype)
            return r[i].dtype;
    }
    return NULL;
}

const char *nb_db_dtype_of_model(const char *model, const nb_db_dtype_rule *extra,
                                 size_t n_extra)
{
    if (!model)
        return NULL;
    const char *d = dtype_by_rules(model, extra, n_extra);
    return d ? d : dtype_by_rules(model, builtin_dtypes,
                                  sizeof builtin_dtypes / sizeof builtin_dtypes[0]);
}

/* verify_status as mlir-air's nightly writes it (pass, fail, skip, or "" when verify did
 * not run or was not reported), plus the spellings other tools use. Only pass and fail
 * are gate verdicts; the rest are stored as ERROR with the status kept beside it. */
typedef struct status_map {
    const char *name, *word, *why;
    nb_db_outcome o;
} status_map;

static const status_map statuses[] = {
    {"pass", "pass", NULL, NB_OUTCOME_PASS},
    {"passed", "pass", NULL, NB_OUTCOME_PASS},
    {"ok", "pass", NULL, NB_OUTCOME_PASS},
    {"success", "pass", NULL, NB_OUTCOME_PASS},
    {"fail", "fail", NULL, NB_OUTCOME_FAIL},
    {"failed", "fail", NULL, NB_OUTCOME_FAIL},
    {"failure", "fail", NULL, NB_OUTCOME_FAIL},
    {"error", "error", "verify errored", NB_OUTCOME_ERROR},
    {"errored", "error", "verify errored", NB_OUTCOME_ERROR},
    {"skip", "skip", "verify skipped", NB_OUTCOME_ERROR},
    {"skipped", "skip", "verify skipped", NB_OUTCOME_ERROR},
    {"", "unknown", "verify status unknown (not reported)", NB_OUTCOME_ERROR},
};

/* s NULL (absent or null) reads as "". */
static const status_map *map_status(const char *s)
{
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (strcasecmp(s ? s : "", statuses[i].name) == 0)
            return &statuses[i];
    return NULL;
}

/* A toolchain value as text: strings as they are, anything else as JSON. */
static const char *value_text(json_object *v)
{
    if (json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* perf.json's toolchain object names what history.ndjson's flat columns name shorter;
 * both are stored under the short names so either file gives the same toolchain. */
static const char *toolchain_key(const char *key)
{
    static const char *const map[][2] = {{"mlir_air_sha", "air_sha"},
                                         {"mlir_aie_hash", "aie_hash"},
                                         {"llvm_aie_version", "peano"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(key, map[i][0]))
            return map[i][1];
    return key;
}

#define BAD(...)                                                                             \
    do {                                                                                     \
        snprintf(msg, msz, __VA_ARGS__);                                                     \
        return -1;                                                                           \
    } while (0)

/* Adds key=value unless key is already there (the first source wins) or the value is
 * empty (extract_perf writes "" for a toolchain it was not told, which says nothing). */
static int add_toolchain(nb_db_kv *tc, size_t *ntc, const char *key, json_object *val,
                         char *msg, size_t msz)
{
    if (!val)
        return 0;
    const char *k = toolchain_key(key), *v = value_text(val);
    if (!*v)
        return 0;
    for (size_t i = 0; i < *ntc; i++)
        if (!strcmp(tc[i].key, k))
            return 0;
    if (*ntc == MAX_TOOLCHAIN)
        BAD("toolchain: more than %d entries", MAX_TOOLCHAIN);
    tc[*ntc].key = k;
    tc[*ntc].value = v;
    (*ntc)++;
    return 0;
}

/* What one object maps to; strings point into the object, which outlives the insert. */
typedef struct mapped {
    nb_db_run run;
    nb_db_deployment dep;
    nb_db_kv tc[MAX_TOOLCHAIN];
    char ext[NB_DB_NAME_MAX];     /* external id: the row key, or a content digest */
    char mkey[2 * NB_DB_NAME_MAX]; /* measurement key */
    int keyed;                    /* ext is (run_id, model, runner), not a digest */
    int assumed;                  /* the row named no runner: the board is assumed */
    const char *board;            /* the board it is filed under */
} mapped;

static int map_run_id(json_object *obj, const char *model, const char *runner, int sweep,
                      int64_t ctx, mapped *mp, char *msg, size_t msz)
{
    json_object *rid = NULL;
    char id[NB_DB_NAME_MAX];
    if (!(rid = nb_json_get(obj, "run_id"))) {
        buf b = {0};
        canon(&b, obj, 0);
        if (b.oom) {
            free(b.p);
            BAD("object too deeply nested or out of memory");
        }
        char hex[65];
        nb_sha256_mem_hex(b.p, b.n, hex);
        free(b.p);
        snprintf(mp->ext, sizeof mp->ext, "sha256:%s", hex);
        return 0;
    }
    if (json_object_is_type(rid, json_type_string)) {
        const char *s = json_object_get_string(rid);
        if (!*s || strlen(s) >= sizeof id)
            BAD("run_id: empty or longer than %zu bytes", sizeof id - 1);
        snprintf(id, sizeof id, "%s", s);
    } else if (json_object_is_type(rid, json_type_int)) {
        snprintf(id, sizeof id, "%lld", (long long)json_object_get_int64(rid));
    } else {
        BAD("run_id: must be a string or an integer, got %s", type_name(rid));
    }
    /* Every model of one nightly shares the workflow's run_id: the row is the run, the
     * model and the runner (and, for a sweep, the context). */
    char ctxs[32] = "";
    if (sweep)
        snprintf(ctxs, sizeof ctxs, "/sweep:%lld", (long long)ctx);
    int n = snprintf(mp->ext, sizeof mp->ext, "%s/%s/%s%s", id, model, runner ? runner : "",
                     ctxs);
    if (n < 0 || (size_t)n >= sizeof mp->ext)
        BAD("run_id, model, runner: the row key is longer than %zu bytes",
            sizeof mp->ext - 1);
    mp->keyed = 1;
    return 0;
}

/* Fills mp from obj. Returns 0, or -1 with msg for a bad row. */
static int map_object(importer *im, json_object *obj, mapped *mp, char *msg, size_t msz)
{
    if (!json_object_is_type(obj, json_type_object))
        BAD("expected a JSON object, got %s", type_name(obj));
    const char *model, *runner, *ts, *date, *status, *backend, *dtype, *digest, *point;
    struct { const char *key; const char **out; } strs[] = {
        {"model", &model}, {"runner", &runner}, {"timestamp_utc", &ts}, {"date", &date},
        {"verify_status", &status}, {"backend", &backend}, {"dtype", &dtype},
        {"status", &point}, {"model_digest", &digest}};
    nb_err e;
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        if (nb_json_need_str(obj, NULL, strs[i].key, 0, NULL, strs[i].out, &e))
            return take(&e, msg, msz);
    if (!digest && nb_json_need_str(obj, NULL, "weights_digest", 0, NULL, &digest, &e))
        return take(&e, msg, msz);
    if (!model || !*model)
        BAD("model: required");
    if (strlen(model) >= NB_DB_NAME_MAX)
        BAD("model: longer than %d bytes", NB_DB_NAME_MAX - 1);
    if (runner && strlen(runner) >= NB_DB_NAME_MAX)
        BAD("runner: longer than %d bytes", NB_DB_NAME_MAX - 1);
    /* A row naming no runner (extract_perf's per-model perf.json says ""; history rows
     * written before mlir-air #1867 have no key) ran on the nightly's runner, which the
     * options may name otherwise; the report counts them. A copy naming its runner later
     * moves the run (see merge_measurement). */
    mp->assumed = !im->opts->board && !(runner && *runner);
    const char *board = im->opts->board ? im->opts->board
                        : runner && *runner
                            ? runner
                            : (im->opts->runner && *im->opts->runner ? im->opts->runner
                                                                     : NB_DB_IMPORT_NIGHTLY_RUNNER);
    if (strlen(board) >= NB_DB_NAME_MAX)
        BAD("board '%.40s': longer than %d bytes", board, NB_DB_NAME_MAX - 1);
    if (!backend)
        backend = im->opts->backend ? im->opts->backend : "npu";
    if (!dtype)
        dtype = im->opts->dtype;
    if (!dtype)
        dtype = nb_db_dtype_of_model(model, im->opts->dtypes, im->opts->n_dtypes);
    if (!dtype)
        dtype = "bf16";
    if (!*backend || strlen(backend) >= NB_DB_NAME_MAX)
        BAD("backend: empty or longer than %d bytes", NB_DB_NAME_MAX - 1);
    if (!*dtype || strlen(dtype) >= NB_DB_NAME_MAX)
        BAD("dtype: empty or longer than %d bytes", NB_DB_NAME_MAX - 1);
    if (digest && strlen(digest) >= NB_DB_DIGEST_MAX)
        BAD("model_digest: longer than %d bytes", NB_DB_DIGEST_MAX - 1);

    int64_t started = 0;
    if (ts) {
        if (parse_time(ts, &started))
            BAD("timestamp_utc: \"%.60s\" is not an ISO 8601 time "
                "(YYYY-MM-DDTHH:MM:SSZ)",
                ts);
    } else if (date) {
        if (parse_time(date, &started))
            BAD("date: \"%.60s\" is not a date (YYYY-MM-DD)", date);
    } else {
        BAD("timestamp_utc: required (or date)");
    }
    if (started <= 0)
        BAD("%s: time before 1970", ts ? "timestamp_utc" : "date");

    const status_map *sm = map_status(status);
    if (!sm)
        BAD("verify_status: must be pass, fail, skip, error, \"\" or null, got \"%.40s\"",
            status);

    json_object *metrics = obj, *mv = NULL;
    const char *mp_ = NULL;
    if ((mv = nb_json_get(obj, "metrics"))) {
        if (!json_object_is_type(mv, json_type_object))
            BAD("metrics: must be an object, got %s", type_name(mv));
        metrics = mv;
        mp_ = "metrics";
    }
    /* A sweep_history.ndjson row (one context of a decode sweep) carries the point's own
     * status and ms_per_token; a history/perf row has neither. */
    int sweep = point || json_object_object_get_ex(obj, "ms_per_token", NULL);
    double ttft, tps, ms_tok = NAN;
    int64_t ctx, ntok = -1;
    if (nb_json_need_num(metrics, mp_, "ttft_ms", 0, 0, DBL_MAX, NAN, &ttft, &e) ||
        nb_json_need_num(metrics, mp_, "decode_tokens_per_sec", 0, 0, DBL_MAX, NAN, &tps, &e) ||
        (sweep && nb_json_need_num(obj, NULL, "ms_per_token", 0, 0, DBL_MAX, NAN, &ms_tok, &e)))
        return take(&e, msg, msz);
    if (need_count(metrics, mp_, "context_len", &ctx, msg, msz))
        return -1;
    if (sweep && ctx < 0)
        BAD("context_len: required (a sweep point is one context length)");
    json_object *rp = NULL;
    if ((rp = nb_json_get(obj, "run_params"))) {
        if (!json_object_is_type(rp, json_type_object))
            BAD("run_params: must be an object, got %s", type_name(rp));
        if (need_count(rp, "run_params", "n_tokens", &ntok, msg, msz))
            return -1;
        const char *prompt;
        if (nb_json_need_str(rp, "run_params", "prompt", 0, NULL, &prompt, &e))
            return take(&e, msg, msz);
    }

    size_t ntc = 0;
    json_object *tco = NULL;
    if ((tco = nb_json_get(obj, "toolchain"))) {
        if (!json_object_is_type(tco, json_type_object))
            BAD("toolchain: must be an object, got %s", type_name(tco));
        json_object_object_foreach(tco, key, val)
        {
            if (add_toolchain(mp->tc, &ntc, key, val, msg, msz))
                return -1;
        }
    }
    static const char *const flat_tc[] = {"air_sha", "aie_hash", "peano"};
    for (size_t i = 0; i < sizeof flat_tc / sizeof flat_tc[0]; i++) {
        json_object *v = NULL;
        if (!(v = nb_json_get(obj, flat_tc[i])))
            continue;
        if (json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array))
            BAD("%s: must be a string, got %s", flat_tc[i], type_name(v));
        if (add_toolchain(mp->tc, &ntc, flat_tc[i], v, msg, msz))
            return -1;
    }

    mp->keyed = 0;
    if (map_run_id(obj, model, runner, sweep, ctx, mp, msg, msz))
        return -1;
    /* The measurement: extract_perf stamps timestamp_utc once and every later copy (the
     * combined perf.json, the history row) carries it unchanged. */
    char series[32] = "perf";
    if (sweep)
        snprintf(series, sizeof series, "sweep:%lld", (long long)ctx);
    snprintf(mp->mkey, sizeof mp->mkey, "%s|%lld|%s", model, (long long)started, series);

    nb_db_deployment *dep = &mp->dep;
    memset(dep, 0, sizeof *dep);
    nb_db_copy(dep->model, sizeof dep->model, model);
    nb_db_copy(dep->weights_digest, sizeof dep->weights_digest, digest);
    nb_db_copy(dep->backend, sizeof dep->backend, backend);
    nb_db_copy(dep->dtype, sizeof dep->dtype, dtype);
    nb_db_copy(dep->board, sizeof dep->board, board);
    mp->board = board;

    nb_db_run *run = &mp->run;
    nb_db_run_init(run);
    run->runner = runner && *runner ? runner : NULL;
    run->kind = sweep ? "sweep" : "bench";
    run->outcome = sm->o;
    run->error = sm->why;
    run->verify_status = sm->word;
    run->measurement_key = mp->mkey;
    run->started_ms = started;
    run->value[NB_METRIC_TTFT] = ttft;
    run->value[NB_METRIC_TPS] = tps;
    run->value[NB_METRIC_DECODE] = ms_tok;
    run->context_len = ctx;
    run->generated_tokens = ntok;
    /* One number per metric, as the source printed it: no repetitions, no spread. */
    run->reps = 0;
    run->env.board = board;
    run->env.backend = backend;
    run->env.dtype = dtype;
    run->env.model_digest = digest;
    run->report_json = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);
    run->source = NB_SOURCE_IMPORT;
    run->external_id = mp->ext;
    run->toolchain = mp->tc;
    run->n_toolchain = ntc;
    return 0;
}

/* ---- the same measurement from another file ---- */

/* Two copies of one number: equal, or one side lacks it (a copy may be a null row). */
static int agrees(sqlite3_stmt *st, int col, double v)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL || isnan(v) ||
           sqlite3_column_double(st, col) == v;
}

/* The stored run holding mp's measurement: the same key, from a source whose runner
 * agrees (equal, or one side did not know it) and whose numbers agree (JSON carries them
 * unchanged from file to file, so equal means equal); 0 when there is none. A copy
 * with other numbers is another measurement and is stored as one. */
static nb_code find_measurement(nb_db *db, const mapped *mp, int64_t *id, nb_err *err)
{
    static const char sql[] = "SELECT id, COALESCE(runner, ''), ttft_ms, tps, "
                              "decode_ms_per_token, context_len FROM runs "
                              "WHERE measurement_key = ? ORDER BY id";
    sqlite3_stmt *st;
    *id = 0;
    nb_code rc = nb_db_stmt(db, sql, &st, err);
    if (rc)
        return rc;
    nb_db_bind_str(st, 1, mp->mkey);
    const nb_db_run *r = &mp->run;
    const char *runner = r->runner ? r->runner : "";
    double ctx = r->context_len >= 0 ? (double)r->context_len : NAN;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *sr = (const char *)sqlite3_column_text(st, 1);
        if ((!*runner || !*sr || !strcmp(sr, runner)) &&
            agrees(st, 2, r->value[NB_METRIC_TTFT]) && agrees(st, 3, r->value[NB_METRIC_TPS]) &&
            agrees(st, 4, r->value[NB_METRIC_DECODE]) && agrees(st, 5, ctx)) {
            *id = sqlite3_column_int64(st, 0);
            break;
        }
    }
    if (s != SQLITE_ROW && s != SQLITE_DONE)
        rc = nb_db_sqlerr(db, err, "looking up the measurement");
    nb_db_done(st);
    return rc;
}

/* Completes stored run id with what this copy adds: the row key for a copy that had
 * none, a runner (moving the run off board "unknown"), a verify status that was
 * unknown, missing metrics, counts and toolchain entries. What was stored wins. */
static nb_code merge_measurement(nb_db *db, int64_t id, mapped *mp, nb_err *err)
{
    static const char upd[] =
        "UPDATE runs SET "
        "external_id = CASE WHEN ?1 IS NOT NULL AND (external_id IS NULL OR "
        "  external_id LIKE 'sha256:%') THEN ?1 ELSE external_id END, "
        "outcome = CASE WHEN COALESCE(verify_status, 'unknown') = 'unknown' THEN ?2 "
        "  ELSE outcome END, "
        "error = CASE WHEN COALESCE(verify_status, 'unknown') = 'unknown' THEN ?3 "
        "  ELSE error END, "
        "verify_status = CASE WHEN COALESCE(verify_status, 'unknown') = 'unknown' THEN ?4 "
        "  ELSE verify_status END, "
        "ttft_ms = COALESCE(ttft_ms, ?5), tps = COALESCE(tps, ?6), "
        "decode_ms_per_token = COALESCE(decode_ms_per_token, ?7), "
        "context_len = COALESCE(context_len, ?8), "
        "generated_tokens = COALESCE(generated_tokens, ?9) WHERE id = ?10";
    static const char move[] = "UPDATE runs SET runner = ?1, board = ?2, deployment_id = ?3 "
                               "WHERE id = ?4 AND COALESCE(runner, '') = ''";
    static const char tc_ins[] =
        "INSERT OR IGNORE INTO toolchain (run_id, key, value) VALUES (?, ?, ?)";
    const nb_db_run *r = &mp->run;
    sqlite3_stmt *st;
    nb_code rc = nb_db_stmt(db, upd, &st, err);
    if (rc)
        return rc;
    nb_db_bind_opt_str(st, 1, mp->keyed ? mp->ext : NULL);
    nb_db_bind_str(st, 2, nb_db_outcome_name(r->outcome));
    nb_db_bind_opt_str(st, 3, r->error);
    nb_db_bind_str(st, 4, r->verify_status);
    nb_db_bind_opt_double(st, 5, r->value[NB_METRIC_TTFT]);
    nb_db_bind_opt_double(st, 6, r->value[NB_METRIC_TPS]);
    nb_db_bind_opt_double(st, 7, r->value[NB_METRIC_DECODE]);
    nb_db_bind_opt_int(st, 8, r->context_len, r->context_len >= 0);
    nb_db_bind_opt_int(st, 9, r->generated_tokens, r->generated_tokens >= 0);
    sqlite3_bind_int64(st, 10, id);
    if ((rc = nb_db_step_done(db, st, err, "merging the measurement")))
        return rc;
    if (r->runner) {
        int64_t dep_id;
        if ((rc = nb_db_deployment_upsert(db, &mp->dep, &dep_id, err)) ||
            (rc = nb_db_stmt(db, move, &st, err)))
            return rc;
        nb_db_bind_str(st, 1, r->runner);
        nb_db_bind_str(st, 2, mp->dep.board);
        sqlite3_bind_int64(st, 3, dep_id);
        sqlite3_bind_int64(st, 4, id);
        if ((rc = nb_db_step_done(db, st, err, "recording the measurement's runner")))
            return rc;
    }
    for (size_t i = 0; i < r->n_toolchain && !rc; i++) {
        if ((rc = nb_db_stmt(db, tc_ins, &st, err)))
            return rc;
        sqlite3_bind_int64(st, 1, id);
        nb_db_bind_str(st, 2, r->toolchain[i].key);
        nb_db_bind_str(st, 3, r->toolchain[i].value);
        rc = nb_db_step_done(db, st, err, "merging the toolchain");
    }
    return rc;
}

/* Imports one parsed object. NB_OK also for bad or skipped rows (they are
 * counted); any other code is a database failure that aborts the import. */
static nb_code import_object(importer *im, json_object *obj, size_t line, nb_err *err)
{
    char msg[NB_DB_MSG_MAX - 64];
    mapped *mp = malloc(sizeof *mp);
    if (!mp)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", im->path);
    msg[0] = '\0';
    if (map_object(im, obj, mp, msg, sizeof msg)) {
        record_bad(im, line, msg);
        free(mp);
        return NB_OK;
    }
    if (mp->assumed) {
        nb_db_import_report *r = im->rep;
        r->n_runner_assumed++;
        nb_db_copy(r->runner_assumed, sizeof r->runner_assumed, mp->board);
    }
    int64_t existing = 0;
    nb_err e;
    nb_err_clear(&e);
    nb_code rc = nb_db_run_find_external(im->db, mp->ext, &existing, &e);
    if (rc == NB_OK) {
        im->rep->n_skipped++;
        free(mp);
        return NB_OK;
    }
    if (rc == NB_ENOTFOUND)
        rc = find_measurement(im->db, mp, &existing, &e);
    if (!rc && existing) {
        rc = merge_measurement(im->db, existing, mp, &e);
        if (!rc) {
            im->rep->n_skipped++;
            im->rep->n_merged++;
        }
    } else if (!rc) {
        rc = nb_db_deployment_upsert(im->db, &mp->dep, &mp->run.deployment_id, &e);
        if (!rc)
            rc = nb_db_run_insert(im->db, &mp->run, &existing, &e);
        if (!rc)
            im->rep->n_imported++;
    }
    free(mp);
    if (rc == NB_EINVAL || rc == NB_EMISMATCH) {
        record_bad(im, line, e.msg);
        return NB_OK;
    }
    if (rc)
        return nb_err_set(err, rc, "%s", e.msg);
    return NB_OK;
}

/* sweep.json: one record per model, its points a curve over context_len. Each point
 * becomes the row append_history.py would write to sweep_history.ndjson. */
static nb_code import_sweep(importer *im, json_object *rec, json_object *points, size_t line,
                            nb_err *err)
{
    if (!json_object_is_type(points, json_type_array)) {
        char msg[128];
        snprintf(msg, sizeof msg, "points: must be a list, got %s",
                 type_name(points));
        record_bad(im, line, msg);
        return NB_OK;
    }
    static const char *const from_rec[] = {"model", "timestamp_utc", "runner", "verify_status",
                                           "toolchain", "run_id"};
    nb_code rc = NB_OK;
    size_t n = json_object_array_length(points);
    for (size_t i = 0; i < n && !rc; i++) {
        json_object *pt = json_object_array_get_idx(points, i);
        if (!json_object_is_type(pt, json_type_object)) {
            char msg[128];
            snprintf(msg, sizeof msg, "points[%zu]: must be an object, got %s", i,
                     type_name(pt));
            record_bad(im, line, msg);
            continue;
        }
        json_object *row = json_object_new_object();
        if (!row)
            return nb_err_set(err, NB_ENOMEM, "%s: out of memory", im->path);
        for (size_t k = 0; k < sizeof from_rec / sizeof from_rec[0]; k++) {
            json_object *v;
            if (json_object_object_get_ex(rec, from_rec[k], &v))
                json_object_object_add(row, from_rec[k], json_object_get(v));
        }
        json_object_object_foreach(pt, key, val)
        {
            json_object_object_add(row, key, json_object_get(val));
        }
        if (!json_object_object_get_ex(row, "status", NULL))
            json_object_object_add(row, "status", json_object_new_string(""));
        rc = import_object(im, row, line, err);
        json_object_put(row);
    }
    return rc;
}

/* One top-level object of any accepted file. */
static nb_code import_record(importer *im, json_object *obj, size_t line, nb_err *err)
{
    json_object *points = NULL;
    if (json_object_is_type(obj, json_type_object) &&
        (points = nb_json_get(obj, "points")))
        return import_sweep(im, obj, points, line, err);
    return import_object(im, obj, line, err);
}

/* ---- file shapes ---- */

static size_t count_lines(const char *from, const char *to)
{
    size_t n = 0;
    for (const char *p = from; p < to; p++)
        n += *p == '\n';
    return n;
}

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Parses one JSON value at p; *next = just past it, or where parsing
 * stopped on error (then NULL is returned and msg says why). */
static json_object *parse_at(json_tokener *tok, const char *p, const char *end,
                             const char **next, char *msg, size_t msz)
{
    json_tokener_reset(tok);
    size_t n = (size_t)(end - p);
    *next = p;
    if (n > (size_t)INT32_MAX) {
        snprintf(msg, msz, "JSON value too large");
        return NULL;
    }
    json_object *o = json_tokener_parse_ex(tok, p, (int)n);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t at = json_tokener_get_parse_end(tok);
    *next = p + (at < n ? at : n);
    if (!o && je == json_tokener_continue) {
        snprintf(msg, msz, "invalid JSON: unexpected end of input");
        return NULL;
    }
    if (je != json_tokener_success) {
        snprintf(msg, msz, "invalid JSON: %s", json_tokener_error_desc(je));
        json_object_put(o);
        return NULL;
    }
    return o;
}

static nb_code import_ndjson(importer *im, const char *data, size_t len, json_tokener *tok,
                             nb_err *err)
{
    const char *p = data, *end = data + len;
    size_t line = 1;
    nb_code rc = NB_OK;
    while (p < end && !rc) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *s = skip_ws(p, le);
        if (s < le) {
            char msg[NB_DB_MSG_MAX - 64];
            const char *next = s;
            json_object *o = parse_at(tok, s, le, &next, msg, sizeof msg);
            if (!o) {
                record_bad(im, line, msg);
            } else if (skip_ws(next, le) != le) {
                record_bad(im, line, "invalid JSON: more than one value on the line");
            } else {
                rc = import_record(im, o, line, err);
            }
            json_object_put(o);
        }
        line++;
        p = nl ? nl + 1 : end;
    }
    return rc;
}

/* A JSON list is read element by element, so each bad element is reported
 * with the line it starts on and the good ones still import. */
static nb_code import_list(importer *im, const char *data, size_t len, json_tokener *tok,
                           nb_err *err)
{
    const char *end = data + len;
    const char *p = skip_ws(data, end) + 1; /* past '[' */
    nb_code rc = NB_OK;
    char msg[NB_DB_MSG_MAX - 64];
    for (size_t idx = 0; !rc; idx++) {
        p = skip_ws(p, end);
        size_t line = count_lines(data, p) + 1;
        if (p == end) {
            record_bad(im, line, "invalid JSON: the list is not closed with ']'");
            break;
        }
        if (*p == ']') {
            if (skip_ws(p + 1, end) != end)
                record_bad(im, count_lines(data, p) + 1,
                           "invalid JSON: content after the closing ']'");
            break;
        }
        if (idx > 0) {
            if (*p != ',') {
                record_bad(im, line, "invalid JSON: expected ',' or ']' between list items");
                break;
            }
            p = skip_ws(p + 1, end);
            line = count_lines(data, p) + 1;
        }
        const char *next = p;
        json_object *o = parse_at(tok, p, end, &next, msg, sizeof msg);
        if (!o) {
            char full[NB_DB_MSG_MAX];
            snprintf(full, sizeof full,
                     "list item %zu: %.300s at line %zu; the rest of the file is skipped",
                     idx + 1, msg, count_lines(data, next) + 1);
            record_bad(im, line, full);
            break;
        }
        rc = import_record(im, o, line, err);
        json_object_put(o);
        p = next;
    }
    return rc;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcasecmp(s + n - m, suf) == 0;
}

static nb_code import_data(importer *im, const char *data, size_t len, json_tokener *tok,
                           nb_err *err)
{
    const char *end = data + len;
    const char *s = skip_ws(data, end);
    if (s == end)
        return NB_OK; /* empty file: nothing to import */
    if (*s == '[')
        return import_list(im, data, len, tok, err);
    if (!has_suffix(im->path, ".ndjson") && !has_suffix(im->path, ".jsonl")) {
        /* One (possibly pretty-printed) object, unless more follow: then
         * it is newline-delimited after all. */
        char msg[NB_DB_MSG_MAX - 64];
        const char *next = s;
        json_object *o = parse_at(tok, s, end, &next, msg, sizeof msg);
        if (o && skip_ws(next, end) == end) {
            nb_code rc = import_record(im, o, count_lines(data, s) + 1, err);
            json_object_put(o);
            return rc;
        }
        json_object_put(o);
        if (!o) {
            char full[NB_DB_MSG_MAX];
            snprintf(full, sizeof full, "%.300s at line %zu", msg, count_lines(data, next) + 1);
            record_bad(im, count_lines(data, s) + 1, full);
            return NB_OK;
        }
    }
    return import_ndjson(im, data, len, tok, err);
}

nb_code nb_db_import_file_ex(nb_db *db, const char *path, const nb_db_import_opts *opts,
                             nb_db_import_report *rep, nb_err *err)
{
    static const nb_db_import_opts dflt = {0};
    memset(rep, 0, sizeof *rep);
    if (!path || !*path)
        return nb_err_set(err, NB_EINVAL, "import: path is empty");
    char *data = NULL;
    size_t len = 0;
    nb_code rc = nb_file_read(path, NB_DB_IMPORT_FILE_MAX, &data, &len, err);
    if (rc)
        return rc;
    json_tokener *tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
    if (!tok) {
        free(data);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", path);
    }
    importer im = {db, path, opts ? opts : &dflt, rep};
    rc = nb_db_begin(db, err);
    if (!rc) {
        rc = import_data(&im, data, len, tok, err);
        if (rc)
            nb_db_rollback(db);
        else
            rc = nb_db_commit(db, err);
    }
    json_tokener_free(tok);
    free(data);
    if (rc) {
        nb_db_import_report_free(rep);
        return nb_err_prefix(err, "importing %s: ", path);
    }
    if (rep->n_bad)
        return nb_err_set(err, NB_EFORMAT,
                          "%s: %zu bad row%s skipped (%zu imported, %zu already present); "
                          "first: %s",
                          path, rep->n_bad, rep->n_bad == 1 ? "" : "s", rep->n_imported,
                          rep->n_skipped, rep->n_bad_kept ? rep->bad[0].msg : "(not kept)");
    return NB_OK;
}

void nb_db_import_report_free(nb_db_import_report *rep)
{
    if (!rep)
        return;
    free(rep->bad);
    memset(rep, 0, sizeof *rep);
}

nb_code nb_db_import_file(nb_db *db, const char *path, size_t *n_imported, size_t *n_skipped,
                          nb_err *err)
{
    nb_db_import_report rep;
    nb_code rc = nb_db_import_file_ex(db, path, NULL, &rep, err);
    if (n_imported)
        *n_imported = rep.n_imported;
    if (n_skipped)
        *n_skipped = rep.n_skipped;
    nb_db_import_report_free(&rep);
    return rc;
}
