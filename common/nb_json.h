/* nb_json: strict parsing of whole JSON documents (json-c) with errors that
 * name the source and byte offset; config.json, safetensors headers, indexes. */
#ifndef NB_JSON_H
#define NB_JSON_H

#include <stddef.h>

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

#endif
