/* nb_json: one strict json-c parse per document; the tokener is told where
 * input ends so a bare number or a truncated document is reported, not hung on. */
#include "nb_json.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_file.h"

#define NB_JSON_MAX_DEPTH 64

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

nb_code nb_json_parse(const char *buf, size_t len, const char *what, json_object **out,
                      nb_err *err)
{
    *out = NULL;
    if (len > INT_MAX - 1)
        return nb_err_set(err, NB_ENOMEM, "%s: %zu bytes of JSON exceeds the parser limit (%d)",
                          what, len, INT_MAX - 1);
    json_tokener *tok = json_tokener_new_ex(NB_JSON_MAX_DEPTH);
    if (!tok)
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", what);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
    json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    if (!root && jerr == json_tokener_continue) {
        /* end of input: lets a top-level number finish, or reports truncation */
        root = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
        end = len;
    }
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        json_object_put(root);
        if (jerr == json_tokener_continue || jerr == json_tokener_success)
            return nb_err_set(err, NB_EFORMAT, "%s: invalid JSON: document ends early (%zu bytes)",
                              what, len);
        return nb_err_set(err, NB_EFORMAT, "%s: invalid JSON near byte %zu: %s", what,
                          end ? end - 1 : 0, json_tokener_error_desc(jerr));
    }
    for (size_t i = end; i < len; i++)
        if (!is_ws(buf[i])) {
            json_object_put(root);
            return nb_err_set(err, NB_EFORMAT,
                              "%s: invalid JSON: unexpected data at byte %zu after the document",
                              what, i);
        }
    *out = root;
    return NB_OK;
}

nb_code nb_json_read_file(const char *path, size_t max_bytes, json_object **out, nb_err *err)
{
    char *text;
    size_t len;
    *out = NULL;
    nb_code rc = nb_file_read(path, max_bytes, &text, &len, err);
    if (rc)
        return rc;
    rc = nb_json_parse(text, len, path, out, err);
    free(text);
    return rc;
}

/* ---- reading members ------------------------------------------------------------------ */

json_object *nb_json_get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || !key ||
        !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return v;
}

json_object *nb_json_get_type(json_object *o, const char *key, json_type t)
{
    json_object *v = nb_json_get(o, key);
    if (!v)
        return NULL;
    if (json_object_is_type(v, t) ||
        (t == json_type_double && json_object_is_type(v, json_type_int)))
        return v;
    return NULL;
}

json_object *nb_json_path(json_object *o, ...)
{
    va_list ap;
    va_start(ap, o);
    for (const char *k; o && (k = va_arg(ap, const char *));)
        o = nb_json_get(o, k);
    va_end(ap);
    return o;
}

const char *nb_json_str(json_object *o, const char *key, const char *dflt, size_t *len)
{
    json_object *v = nb_json_get_type(o, key, json_type_string);
    if (len)
        *len = v ? (size_t)json_object_get_string_len(v) : dflt ? strlen(dflt) : 0;
    return v ? json_object_get_string(v) : dflt;
}

int64_t nb_json_int(json_object *o, const char *key, int64_t dflt)
{
    json_object *v = nb_json_get_type(o, key, json_type_int);
    return v ? json_object_get_int64(v) : dflt;
}

double nb_json_num(json_object *o, const char *key, double dflt)
{
    json_object *v = nb_json_get_type(o, key, json_type_double);
    return v ? json_object_get_double(v) : dflt;
}

int nb_json_bool(json_object *o, const char *key, int dflt)
{
    json_object *v = nb_json_get_type(o, key, json_type_boolean);
    return v ? json_object_get_boolean(v) : dflt;
}

/* The field's path in messages: what.key, what alone for a value read by itself (key NULL),
 * key alone for a root object (what NULL or ""). */
static const char *field_path(const char *what, const char *key, char *buf, size_t cap)
{
    if (!key)
        return what ? what : "value";
    if (!what || !*what)
        return key;
    snprintf(buf, cap, "%s.%s", what, key);
    return buf;
}

/* The member to read (o itself when key is NULL); NULL (and *rc set) when absent. */
static json_object *member(json_object *o, const char *what, const char *key, int required,
                           nb_code *rc, nb_err *err)
{
    json_object *v = key ? nb_json_get(o, key) : o;
    if (json_object_is_type(v, json_type_null))
        v = NULL;
    *rc = NB_OK;
    if (!v && required) {
        char b[256];
        *rc = nb_err_set(err, NB_EFORMAT, "%s: required", field_path(what, key, b, sizeof b));
    }
    return v;
}

/* "P: must be <want>, got <value as JSON>": the one shape of a wrong value's message. */
static nb_code bad_value(const char *what, const char *key, json_object *v, nb_err *err,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static nb_code bad_value(const char *what, const char *key, json_object *v, nb_err *err,
                         const char *fmt, ...)
{
    char b[256], want[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    return nb_err_set(err, NB_EFORMAT, "%s: must be %s, got %.60s",
                      field_path(what, key, b, sizeof b), want,
                      json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
}

nb_code nb_json_need_int(json_object *o, const char *what, const char *key, int required,
                         int64_t lo, int64_t hi, int64_t dflt, int64_t *out, nb_err *err)
{
    nb_code rc;
    json_object *v = member(o, what, key, required, &rc, err);
    if (!v) {
        *out = dflt;
        return rc;
    }
    int64_t x = json_object_get_int64(v);
    if (!json_object_is_type(v, json_type_int) || x < lo || x > hi) {
        /* An upper bound of INT32_MAX only guards the C int it lands in, not a limit anyone
         * chose, so 0..INT32_MAX reads as "non-negative" rather than a ten-digit range. */
        if (lo == 0 && hi >= INT32_MAX)
            return bad_value(what, key, v, err, "a non-negative integer");
        return bad_value(what, key, v, err, "an integer %lld..%lld", (long long)lo,
                         (long long)hi);
    }
    *out = x;
    return NB_OK;
}

nb_code nb_json_need_num(json_object *o, const char *what, const char *key, int required,
                         double lo, double hi, double dflt, double *out, nb_err *err)
{
    nb_code rc;
    json_object *v = member(o, what, key, required, &rc, err);
    if (!v) {
        *out = dflt;
        return rc;
    }
    double d = json_object_get_double(v);
    if ((!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) ||
        !isfinite(d) || d < lo || d > hi) {
        if (lo <= -DBL_MAX && hi >= DBL_MAX)
            return bad_value(what, key, v, err, "a finite number");
        if (hi >= DBL_MAX)
            return bad_value(what, key, v, err, "a finite number >= %g", lo);
        return bad_value(what, key, v, err, "a number %g..%g", lo, hi);
    }
    *out = d;
    return NB_OK;
}

nb_code nb_json_need_str(json_object *o, const char *what, const char *key, int required,
                         const char *dflt, const char **out, nb_err *err)
{
    nb_code rc;
    json_object *v = member(o, what, key, required, &rc, err);
    if (!v) {
        *out = dflt;
        return rc;
    }
    if (!json_object_is_type(v, json_type_string))
        return bad_value(what, key, v, err, "a string");
    *out = json_object_get_string(v);
    return NB_OK;
}

nb_code nb_json_need_strcpy(json_object *o, const char *what, const char *key, int required,
                            size_t min_len, char *dst, size_t cap, nb_err *err)
{
    nb_code rc;
    json_object *v = member(o, what, key, required, &rc, err);
    if (!v)
        return rc;
    size_t n = json_object_is_type(v, json_type_string) ? (size_t)json_object_get_string_len(v)
                                                        : 0;
    if (!json_object_is_type(v, json_type_string) || n < min_len || n >= cap) {
        if (min_len)
            return bad_value(what, key, v, err, "a string of %zu..%zu bytes", min_len, cap - 1);
        return bad_value(what, key, v, err, "a string of at most %zu bytes", cap - 1);
    }
    memcpy(dst, json_object_get_string(v), n + 1);
    return NB_OK;
}

nb_code nb_json_need_bool(json_object *o, const char *what, const char *key, int required,
                          int dflt, int *out, nb_err *err)
{
    nb_code rc;
    json_object *v = member(o, what, key, required, &rc, err);
    if (!v) {
        *out = dflt;
        return rc;
    }
    if (!json_object_is_type(v, json_type_boolean))
        return bad_value(what, key, v, err, "true or false");
    *out = json_object_get_boolean(v);
    return NB_OK;
}

nb_code nb_json_need_enum(json_object *o, const char *what, const char *key, int required,
                          const char *const *names, int dflt, int *out, nb_err *err)
{
    nb_code rc;
    json_object *v = member(o, what, key, required, &rc, err);
    if (!v) {
        *out = dflt;
        return rc;
    }
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    for (int i = 0; s && names[i]; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return NB_OK;
        }
    char list[128];
    size_t len = 0;
    for (int i = 0; names[i] && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
    return bad_value(what, key, v, err, "%s", list);
}

/* ---- building documents --------------------------------------------------------------- */

json_object *nb_json_new_str(const char *s)
{
    return json_object_new_string(s ? s : "");
}
