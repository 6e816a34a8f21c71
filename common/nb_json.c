/* nb_json: one strict json-c parse per document; the tokener is told where
 * input ends so a bare number or a truncated document is reported, not hung on. */
#include "nb_json.h"

#include <limits.h>
#include <stdlib.h>

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
