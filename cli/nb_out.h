/* nb_out: the CLI's output formats — a table printed as text, CSV or Markdown, and JSON
 * documents that carry their schema name ("npubench.<cmd>/1", docs/service.md). */
#ifndef NB_OUT_H
#define NB_OUT_H

#include <json-c/json.h>
#include <stdio.h>

#include "nb_args.h"
#include "nb_err.h"

typedef enum nb_out_format { NB_OUT_TEXT, NB_OUT_JSON, NB_OUT_CSV, NB_OUT_MD } nb_out_format;

/* The flags every printing command takes: --json, and --format where it prints a table. */
typedef struct nb_out_flags {
    int json;
    const char *format; /* text, json, csv, md; NULL = text (or json with --json) */
} nb_out_flags;

#define NB_OUT_JSON_OPT(f)                                                                     \
    {"json", NB_OPT_FLAG, &(f).json, 0, 0, "JSON (schema in docs/service.md)"}
#define NB_OUT_OPTS(f)                                                                         \
    NB_OUT_JSON_OPT(f), {"format", NB_OPT_STR, &(f).format, 0, 0, "text, json, csv or md"}

/* The format the flags ask for; an error names --format and the formats known. */
nb_code nb_out_format_of(const nb_out_flags *f, nb_out_format *out, nb_err *err);

/* A new JSON document {"schema": "npubench.<cmd>/1"}; the caller adds its fields. */
json_object *nb_out_doc(const char *cmd);
/* Prints doc (pretty, one trailing newline) and releases it. */
void nb_out_print_doc(FILE *f, json_object *doc);
/* json-c helpers that keep the builders short: add a string (NULL = ""), an int64, a
 * double, a bool. */
void nb_out_str(json_object *o, const char *key, const char *v);
void nb_out_i64(json_object *o, const char *key, long long v);
void nb_out_num(json_object *o, const char *key, double v);
void nb_out_bool(json_object *o, const char *key, int v);

/* A table of strings, printed at the end in one format. */
typedef struct nb_out_table nb_out_table;

/* The column headings (copied); NULL without memory. */
nb_out_table *nb_out_table_new(const char *const *heads, int n_cols);
/* Appends a row of n_cols cells (copied; NULL = ""). */
nb_code nb_out_table_row(nb_out_table *t, const char *const *cells, nb_err *err);
/* Text: columns padded to their widest cell, the last one unpadded; CSV: RFC 4180 quoting;
 * Markdown: a pipe table with | escaped. */
void nb_out_table_print(FILE *f, const nb_out_table *t, nb_out_format fmt);
void nb_out_table_free(nb_out_table *t);

#endif
