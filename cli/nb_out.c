/* nb_out: tables and JSON documents for the printing commands, so each command builds its
 * rows once and --format picks how they look. */
#include "nb_out.h"

#include <stdlib.h>
#include <string.h>

nb_code nb_out_format_of(const nb_out_flags *f, nb_out_format *out, nb_err *err)
{
    *out = f->json ? NB_OUT_JSON : NB_OUT_TEXT;
    if (!f->format)
        return NB_OK;
    static const char *const names[] = {"text", "json", "csv", "md"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(f->format, names[i])) {
            if (f->json && i != NB_OUT_JSON)
                return nb_err_set(err, NB_EINVAL, "--json and --format %s: pick one",
                                  f->format);
            *out = (nb_out_format)i;
            return NB_OK;
        }
    return nb_err_set(err, NB_EINVAL, "--format '%s': expected text, json, csv or md",
                      f->format);
}

json_object *nb_out_doc(const char *cmd)
{
    char schema[64];
    snprintf(schema, sizeof schema, "npubench.%s/1", cmd);
    json_object *o = json_object_new_object();
    nb_out_str(o, "schema", schema);
    return o;
}

void nb_out_print_doc(FILE *f, json_object *doc)
{
    fprintf(f, "%s\n",
            json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
                                                    JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(doc);
}

void nb_out_str(json_object *o, const char *key, const char *v)
{
    json_object_object_add(o, key, json_object_new_string(v ? v : ""));
}

void nb_out_i64(json_object *o, const char *key, long long v)
{
    json_object_object_add(o, key, json_object_new_int64(v));
}

void nb_out_num(json_object *o, const char *key, double v)
{
    json_object_object_add(o, key, json_object_new_double(v));
}

void nb_out_bool(json_object *o, const char *key, int v)
{
    json_object_object_add(o, key, json_object_new_boolean(v != 0));
}

/* ---------------------------------------------------------------- tables */

struct nb_out_table {
    int n_cols;
    size_t n_rows, cap; /* rows, heading row included */
    char **cells;       /* n_rows * n_cols */
};

static nb_code add_row(nb_out_table *t, const char *const *cells, nb_err *err)
{
    if (t->n_rows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, cap * (size_t)t->n_cols * sizeof *c);
        if (!c)
            return nb_err_set(err, NB_ENOMEM, "out of memory (table of %zu rows)", cap);
        t->cells = c;
        t->cap = cap;
    }
    char **row = t->cells + t->n_rows * (size_t)t->n_cols;
    for (int i = 0; i < t->n_cols; i++) {
        row[i] = strdup(cells[i] ? cells[i] : "");
        if (!row[i]) {
            while (i--)
                free(row[i]);
            return nb_err_set(err, NB_ENOMEM, "out of memory");
        }
    }
    t->n_rows++;
    return NB_OK;
}

nb_out_table *nb_out_table_new(const char *const *heads, int n_cols)
{
    nb_out_table *t = calloc(1, sizeof *t);
    nb_err err;
    if (t)
        t->n_cols = n_cols;
    if (t && add_row(t, heads, &err)) {
        free(t);
        t = NULL;
    }
    return t;
}

nb_code nb_out_table_row(nb_out_table *t, const char *const *cells, nb_err *err)
{
    return add_row(t, cells, err);
}

/* Display width: code points, so "±" pads like one column. */
static size_t width(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static void print_text(FILE *f, const nb_out_table *t)
{
    size_t w[64] = {0};
    int nc = t->n_cols < 64 ? t->n_cols : 64;
    for (size_t r = 0; r < t->n_rows; r++)
        for (int c = 0; c < nc; c++) {
            size_t x = width(t->cells[r * (size_t)t->n_cols + (size_t)c]);
            if (x > w[c])
                w[c] = x;
        }
    for (size_t r = 0; r < t->n_rows; r++) {
        for (int c = 0; c < nc; c++) {
            const char *s = t->cells[r * (size_t)t->n_cols + (size_t)c];
            fputs(s, f);
            if (c + 1 < nc)
                fprintf(f, "%*s", (int)(w[c] - width(s) + 1), "");
        }
        fputc('\n', f);
    }
}

static void csv_cell(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A Markdown cell: | escaped, line breaks as spaces, so one row stays one line. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
}

void nb_out_table_print(FILE *f, const nb_out_table *t, nb_out_format fmt)
{
    if (fmt == NB_OUT_TEXT) {
        print_text(f, t);
        return;
    }
    for (size_t r = 0; r < t->n_rows; r++) {
        if (fmt == NB_OUT_MD)
            fputs("| ", f);
        for (int c = 0; c < t->n_cols; c++) {
            const char *s = t->cells[r * (size_t)t->n_cols + (size_t)c];
            if (fmt == NB_OUT_CSV) {
                if (c)
                    fputc(',', f);
                csv_cell(f, s);
            } else {
                md_cell(f, s);
                fputs(c + 1 < t->n_cols ? " | " : " |", f);
            }
        }
        fputc('\n', f);
        if (fmt == NB_OUT_MD && r == 0) {
            for (int c = 0; c < t->n_cols; c++)
                fputs("|---", f);
            fputs("|\n", f);
        }
    }
}

void nb_out_table_free(nb_out_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_rows * (size_t)t->n_cols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}
