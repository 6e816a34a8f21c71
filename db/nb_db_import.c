/* nb_db_import: perf.json / history.ndjson -> runs. Parses with json-c, maps
 * each object to a run, skips known external ids and reports bad rows by line. */
#include "nb_db_import.h"

#include <json-c/json.h>
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

/* ---- field readers: 0 absent (or null), 1 present, -1 bad (msg filled) ---- */

static const char *type_name(json_object *v) { return json_type_to_name(json_object_get_type(v)); }

static int get_string(json_object *obj, const char *key, const char *field, const char **out,
                      char *msg, size_t msz)
{
    json_object *v = NULL;
    *out = NULL;
    if (!json_object_object_get_ex(obj, key, &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_string)) {
        snprintf(msg, msz, "field '%s': expected a string, got %s", field, type_name(v));
        return -1;
    }
    *out = json_object_get_string(v);
    return 1;
}

static int get_number(json_object *obj, const char *key, const char *field, double *out,
                      char *msg, size_t msz)
{
    json_object *v = NULL;
    *out = NAN;
    if (!json_object_object_get_ex(obj, key, &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
        if (json_object_is_type(v, json_type_string))
            snprintf(msg, msz, "field '%s': expected a number, got string \"%.60s\"", field,
                     json_object_get_string(v));
        else
            snprintf(msg, msz, "field '%s': expected a number, got %s", field, type_name(v));
        return -1;
    }
    double d = json_object_get_double(v);
    if (!isfinite(d) || d < 0) {
        snprintf(msg, msz, "field '%s': %g is not a finite value >= 0", field, d);
        return -1;
    }
    *out = d;
    return 1;
}

static int get_count(json_object *obj, const char *key, const char *field, int64_t *out,
                     char *msg, size_t msz)
{
    double d;
    *out = -1;
    int r = get_number(obj, key, field, &d, msg, msz);
    if (r <= 0)
        return r;
    if (d != floor(d) || d > 1e15) {
        snprintf(msg, msz, "field '%s': %g is not a whole number of tokens", field, d);
        return -1;
    }
    *out = (int64_t)d;
    return 1;
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

static int map_status(const char *s, nb_db_outcome *o)
{
    static const struct {
        const char *name;
        nb_db_outcome o;
    } t[] = {{"pass", NB_OUTCOME_PASS},    {"passed", NB_OUTCOME_PASS},
             {"ok", NB_OUTCOME_PASS},      {"success", NB_OUTCOME_PASS},
             {"fail", NB_OUTCOME_FAIL},    {"failed", NB_OUTCOME_FAIL},
             {"failure", NB_OUTCOME_FAIL}, {"error", NB_OUTCOME_ERROR},
             {"errored", NB_OUTCOME_ERROR}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (strcasecmp(s, t[i].name) == 0) {
            *o = t[i].o;
            return 0;
        }
    }
    return -1;
}

/* A toolchain value as text: strings as they are, anything else as JSON. */
static const char *value_text(json_object *v)
{
    if (json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
}

#define BAD(...)                                                                             \
    do {                                                                                     \
        snprintf(msg, msz, __VA_ARGS__);                                                     \
        return -1;                                                                           \
    } while (0)

/* Fills run/dep from obj. Returns 0, or -1 with msg for a bad row. Strings
 * in run point into obj (or ext), which must outlive the insert. */
static int map_object(importer *im, json_object *obj, nb_db_run *run, nb_db_deployment *dep,
                      nb_db_kv *tc, char *ext, size_t ext_size, char *msg, size_t msz)
{
    if (!json_object_is_type(obj, json_type_object))
        BAD("expected a JSON object, got %s", type_name(obj));
    const char *model, *runner, *ts, *date, *status, *backend, *dtype, *digest;
    if (get_string(obj, "model", "model", &model, msg, msz) < 0 ||
        get_string(obj, "runner", "runner", &runner, msg, msz) < 0 ||
        get_string(obj, "timestamp_utc", "timestamp_utc", &ts, msg, msz) < 0 ||
        get_string(obj, "date", "date", &date, msg, msz) < 0 ||
        get_string(obj, "verify_status", "verify_status", &status, msg, msz) < 0 ||
        get_string(obj, "backend", "backend", &backend, msg, msz) < 0 ||
        get_string(obj, "dtype", "dtype", &dtype, msg, msz) < 0)
        return -1;
    if (get_string(obj, "model_digest", "model_digest", &digest, msg, msz) < 0)
        return -1;
    if (!digest && get_string(obj, "weights_digest", "weights_digest", &digest, msg, msz) < 0)
        return -1;
    if (!model || !*model)
        BAD("field 'model': missing");
    if (strlen(model) >= NB_DB_NAME_MAX)
        BAD("field 'model': longer than %d bytes", NB_DB_NAME_MAX - 1);
    const char *board = im->opts->board ? im->opts->board : runner;
    if (!board || !*board)
        BAD("field 'runner': missing (it names the board; or import with a board)");
    if (strlen(board) >= NB_DB_NAME_MAX || (runner && strlen(runner) >= NB_DB_NAME_MAX))
        BAD("field 'runner': longer than %d bytes", NB_DB_NAME_MAX - 1);
    if (!backend)
        backend = im->opts->backend ? im->opts->backend : "npu";
    if (!dtype)
        dtype = im->opts->dtype ? im->opts->dtype : "bf16";
    if (!*backend || strlen(backend) >= NB_DB_NAME_MAX)
        BAD("field 'backend': empty or longer than %d bytes", NB_DB_NAME_MAX - 1);
    if (!*dtype || strlen(dtype) >= NB_DB_NAME_MAX)
        BAD("field 'dtype': empty or longer than %d bytes", NB_DB_NAME_MAX - 1);
    if (digest && strlen(digest) >= NB_DB_DIGEST_MAX)
        BAD("field 'model_digest': longer than %d bytes", NB_DB_DIGEST_MAX - 1);

    int64_t started = 0;
    if (ts) {
        if (parse_time(ts, &started))
            BAD("field 'timestamp_utc': \"%.60s\" is not an ISO 8601 time "
                "(YYYY-MM-DDTHH:MM:SSZ)",
                ts);
    } else if (date) {
        if (parse_time(date, &started))
            BAD("field 'date': \"%.60s\" is not a date (YYYY-MM-DD)", date);
    } else {
        BAD("field 'timestamp_utc': missing (and no 'date')");
    }
    if (started <= 0)
        BAD("field '%s': time before 1970", ts ? "timestamp_utc" : "date");

    nb_db_outcome outcome = NB_OUTCOME_ERROR;
    if (status && map_status(status, &outcome))
        BAD("field 'verify_status': unknown value \"%.40s\" (expected PASS, FAIL or ERROR)",
            status);

    json_object *metrics = obj, *mv = NULL;
    const char *mp = "";
    if (json_object_object_get_ex(obj, "metrics", &mv) && mv) {
        if (!json_object_is_type(mv, json_type_object))
            BAD("field 'metrics': expected an object, got %s", type_name(mv));
        metrics = mv;
        mp = "metrics.";
    }
    char fname[64];
    double ttft, tps;
    int64_t ctx, ntok = -1;
    snprintf(fname, sizeof fname, "%sttft_ms", mp);
    if (get_number(metrics, "ttft_ms", fname, &ttft, msg, msz) < 0)
        return -1;
    snprintf(fname, sizeof fname, "%sdecode_tokens_per_sec", mp);
    if (get_number(metrics, "decode_tokens_per_sec", fname, &tps, msg, msz) < 0)
        return -1;
    snprintf(fname, sizeof fname, "%scontext_len", mp);
    if (get_count(metrics, "context_len", fname, &ctx, msg, msz) < 0)
        return -1;
    json_object *rp = NULL;
    if (json_object_object_get_ex(obj, "run_params", &rp) && rp) {
        if (!json_object_is_type(rp, json_type_object))
            BAD("field 'run_params': expected an object, got %s", type_name(rp));
        if (get_count(rp, "n_tokens", "run_params.n_tokens", &ntok, msg, msz) < 0)
            return -1;
        const char *prompt;
        if (get_string(rp, "prompt", "run_params.prompt", &prompt, msg, msz) < 0)
            return -1;
    }

    size_t ntc = 0;
    json_object *tco = NULL;
    if (json_object_object_get_ex(obj, "toolchain", &tco) && tco) {
        if (!json_object_is_type(tco, json_type_object))
            BAD("field 'toolchain': expected an object, got %s", type_name(tco));
        json_object_object_foreach(tco, key, val)
        {
            if (!val)
                continue;
            if (ntc == MAX_TOOLCHAIN)
                BAD("field 'toolchain': more than %d entries", MAX_TOOLCHAIN);
            tc[ntc].key = key;
            tc[ntc].value = value_text(val);
            ntc++;
        }
    }
    static const char *const flat_tc[] = {"air_sha", "aie_hash", "peano"};
    for (size_t i = 0; i < sizeof flat_tc / sizeof flat_tc[0]; i++) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(obj, flat_tc[i], &v) || !v)
            continue;
        if (json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array))
            BAD("field '%s': expected a string, got %s", flat_tc[i], type_name(v));
        int dup = 0;
        for (size_t k = 0; k < ntc; k++)
            dup |= strcmp(tc[k].key, flat_tc[i]) == 0;
        if (dup)
            continue; /* the toolchain object's entry wins */
        if (ntc == MAX_TOOLCHAIN)
            BAD("field 'toolchain': more than %d entries", MAX_TOOLCHAIN);
        tc[ntc].key = flat_tc[i];
        tc[ntc].value = value_text(v);
        ntc++;
    }

    json_object *rid = NULL;
    if (json_object_object_get_ex(obj, "run_id", &rid) && rid) {
        if (json_object_is_type(rid, json_type_string)) {
            const char *s = json_object_get_string(rid);
            if (!*s || strlen(s) >= ext_size)
                BAD("field 'run_id': empty or longer than %zu bytes", ext_size - 1);
            snprintf(ext, ext_size, "%s", s);
        } else if (json_object_is_type(rid, json_type_int)) {
            snprintf(ext, ext_size, "%lld", (long long)json_object_get_int64(rid));
        } else {
            BAD("field 'run_id': expected a string or integer, got %s", type_name(rid));
        }
    } else {
        buf b = {0};
        canon(&b, obj, 0);
        if (b.oom) {
            free(b.p);
            BAD("object too deeply nested or out of memory");
        }
        char hex[65];
        nb_sha256_mem_hex(b.p, b.n, hex);
        free(b.p);
        snprintf(ext, ext_size, "sha256:%s", hex);
    }

    memset(dep, 0, sizeof *dep);
    nb_db_copy(dep->model, sizeof dep->model, model);
    nb_db_copy(dep->weights_digest, sizeof dep->weights_digest, digest);
    nb_db_copy(dep->backend, sizeof dep->backend, backend);
    nb_db_copy(dep->dtype, sizeof dep->dtype, dtype);
    nb_db_copy(dep->board, sizeof dep->board, board);

    nb_db_run_init(run);
    run->runner = runner;
    run->kind = "bench";
    run->outcome = outcome;
    if (!status)
        run->error = "not verified (no verify_status)";
    run->started_ms = started;
    run->value[NB_METRIC_TTFT] = ttft;
    run->value[NB_METRIC_TPS] = tps;
    run->context_len = ctx;
    run->generated_tokens = ntok;
    run->reps = 1;
    run->env.board = board;
    run->env.backend = backend;
    run->env.dtype = dtype;
    run->env.model_digest = digest;
    run->report_json = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);
    run->source = NB_SOURCE_IMPORT;
    run->external_id = ext;
    run->toolchain = tc;
    run->n_toolchain = ntc;
    return 0;
}

/* Imports one parsed object. NB_OK also for bad or skipped rows (they are
 * counted); any other code is a database failure that aborts the import. */
static nb_code import_object(importer *im, json_object *obj, size_t line, nb_err *err)
{
    char msg[NB_DB_MSG_MAX - 64];
    char ext[NB_DB_NAME_MAX];
    nb_db_run run;
    nb_db_deployment dep;
    nb_db_kv *tc = malloc(MAX_TOOLCHAIN * sizeof *tc);
    if (!tc)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", im->path);
    msg[0] = '\0';
    if (map_object(im, obj, &run, &dep, tc, ext, sizeof ext, msg, sizeof msg)) {
        record_bad(im, line, msg);
        free(tc);
        return NB_OK;
    }
    int64_t existing;
    nb_err e;
    nb_err_clear(&e);
    nb_code rc = nb_db_run_find_external(im->db, ext, &existing, &e);
    if (rc == NB_OK) {
        im->rep->n_skipped++;
        free(tc);
        return NB_OK;
    }
    if (rc != NB_ENOTFOUND) {
        free(tc);
        return nb_err_set(err, rc, "%s", e.msg);
    }
    rc = nb_db_deployment_upsert(im->db, &dep, &run.deployment_id, &e);
    if (!rc)
        rc = nb_db_run_insert(im->db, &run, &existing, &e);
    free(tc);
    if (rc == NB_EINVAL || rc == NB_EMISMATCH) {
        record_bad(im, line, e.msg);
        return NB_OK;
    }
    if (rc)
        return nb_err_set(err, rc, "%s", e.msg);
    im->rep->n_imported++;
    return NB_OK;
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
                rc = import_object(im, o, line, err);
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
        rc = import_object(im, o, line, err);
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
            nb_code rc = import_object(im, o, count_lines(data, s) + 1, err);
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
    static const nb_db_import_opts dflt = {NULL, NULL, NULL};
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
