/* nb_json: strict parsing of whole JSON documents (json-c) with errors that
 * name the source and byte offset; config.json, safetensors headers, indexes. */
#ifndef NB_JSON_H
#define NB_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "nb_err.h"

/* Parses exactly one JSON value from buf[0, len) in json-c's strict mode;
 * only whitespace may follow it. buf need not be NUL-terminated. what names
 * the source in errors ("model.safetensors: header"). On success *out holds
 * one reference (release with json_object_put). Invalid JSON is NB_EFORMAT. */
nb_code nb_json_parse(const char *buf, size_t len, const char *what, json_object **out,
                      nb_err *err);
/* nb_file_read (capped at max_bytes) + nb_json_parse, errors naming path. */
nb_code nb_json_read_file(const char *path, size_t max_bytes, json_object **out, nb_err *err);

/* ---- reading members ------------------------------------------------------------------
 * The one set of accessors every reader of JSON uses.  None of them trusts the document:
 * o may be NULL or of any type, and a member of the wrong type reads as absent. */

/* Member key of object o; NULL when o is no object, key is absent or its value is null. */
json_object *nb_json_get(json_object *o, const char *key);
/* Member key when it is of type t (a json_type_int member also counts as a double). */
json_object *nb_json_get_type(json_object *o, const char *key, json_type t);
/* o.k1.k2... (a NULL-terminated list of keys); NULL where any step is missing. */
json_object *nb_json_path(json_object *o, ...) __attribute__((sentinel));
/* A string member, else dflt; *len (optional) gets its length. */
const char *nb_json_str(json_object *o, const char *key, const char *dflt, size_t *len);
/* An integer member (a JSON integer), else dflt. */
int64_t nb_json_int(json_object *o, const char *key, int64_t dflt);
/* A number member (integer or double), else dflt. */
double nb_json_num(json_object *o, const char *key, double dflt);
/* A boolean member, else dflt. */
int nb_json_bool(json_object *o, const char *key, int dflt);

/* Checked reads for documents that must be right (configs, traces, deployments files, imported
 * rows): the one set of typed field readers.  what is the path of object o ("deployments[2]",
 * "metrics"; NULL or "" for a root object) and key the member, so messages name the field as
 * what.key; with key NULL, o itself is the value and what its whole path ("aliases[1]").
 * Every message has one shape, naming the field and its limit:
 *   "deployments[2].threads: must be an integer 0..1024, got 5000"
 *   "deployments[2].model: required"
 * A JSON null reads as absent.  When absent: NB_EFORMAT "required" if required, else *out =
 * dflt (the string copy leaves dst as it was).  A wrong type or a value outside the limits is
 * NB_EFORMAT; a caller whose input is a user's argument maps that to its own code. */
nb_code nb_json_need_int(json_object *o, const char *what, const char *key, int required,
                         int64_t lo, int64_t hi, int64_t dflt, int64_t *out, nb_err *err);
/* A finite number lo..hi (hi = DBL_MAX: no upper limit). */
nb_code nb_json_need_num(json_object *o, const char *what, const char *key, int required,
                         double lo, double hi, double dflt, double *out, nb_err *err);
/* *out points into the document (valid while it lives); dflt when absent and optional. */
nb_code nb_json_need_str(json_object *o, const char *what, const char *key, int required,
                         const char *dflt, const char **out, nb_err *err);
/* A string of min_len..cap-1 bytes copied into dst[cap]. */
nb_code nb_json_need_strcpy(json_object *o, const char *what, const char *key, int required,
                            size_t min_len, char *dst, size_t cap, nb_err *err);
nb_code nb_json_need_bool(json_object *o, const char *what, const char *key, int required,
                          int dflt, int *out, nb_err *err);
/* One of names (NULL-terminated); *out its index. */
nb_code nb_json_need_enum(json_object *o, const char *what, const char *key, int required,
                          const char *const *names, int dflt, int *out, nb_err *err);

/* ---- building documents ---------------------------------------------------------------- */

/* A string value; NULL becomes "" (json-c would crash on it), so a field whose source was
 * never filled in still appears in the document. */
json_object *nb_json_new_str(const char *s);

#endif
