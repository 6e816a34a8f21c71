/* nb_db_series: the series key of a run, in C and as an SQL function, one rule for the
 * history, the regression baseline, the dashboard and compare. */
#include "nb_db_series.h"

#include <sqlite3.h>
#include <stdio.h>

static void count(char *buf, size_t cap, int64_t v)
{
    if (v > 0)
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "-");
}

char *nb_db_series_shape(const nb_db_series *s, char *buf, size_t cap)
{
    char c[24], g[24], p[24], t[24];
    count(c, sizeof c, s->context_len);
    count(g, sizeof g, s->generated_tokens);
    count(p, sizeof p, s->prompt_tokens);
    count(t, sizeof t, s->threads);
    if (cap)
        snprintf(buf, cap, "%s|ctx=%s|gen=%s|prompt=%s|threads=%s", s->kind ? s->kind : "", c,
                 g, p, t);
    return buf;
}

char *nb_db_series_key(const nb_db_series *s, char *buf, size_t cap)
{
    char shape[NB_DB_SERIES_MAX];
    nb_db_series_shape(s, shape, sizeof shape);
    if (cap)
        snprintf(buf, cap, "%s|%s|%s|%s|%s", s->model ? s->model : "",
                 s->backend ? s->backend : "", s->dtype ? s->dtype : "",
                 s->board ? s->board : "", shape);
    return buf;
}

char *nb_db_series_label(const nb_db_series *s, char *buf, size_t cap)
{
    size_t n = 0;
    if (!cap)
        return buf;
    buf[0] = '\0';
#define ADD(...)                                                                               \
    do {                                                                                       \
        if (n < cap)                                                                           \
            n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                              \
    } while (0)
    ADD("%s", s->kind ? s->kind : "");
    if (s->context_len > 0)
        ADD(", context %lld", (long long)s->context_len);
    if (s->prompt_tokens > 0)
        ADD(", prompt %lld tokens", (long long)s->prompt_tokens);
    if (s->generated_tokens > 0)
        ADD(", %lld tokens", (long long)s->generated_tokens);
    if (s->threads > 0)
        ADD(", %d threads", s->threads);
#undef ADD
    return buf;
}

static int64_t arg_count(sqlite3_value *v)
{
    return sqlite3_value_type(v) == SQLITE_NULL ? -1 : sqlite3_value_int64(v);
}

static void sql_shape(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    nb_db_series s = {.kind = (const char *)sqlite3_value_text(argv[0]),
                      .context_len = arg_count(argv[1]),
                      .generated_tokens = arg_count(argv[2]),
                      .prompt_tokens = arg_count(argv[3]),
                      .threads = (int)arg_count(argv[4])};
    char buf[NB_DB_SERIES_MAX];
    nb_db_series_shape(&s, buf, sizeof buf);
    sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
}

int nb_db_series_register(struct sqlite3 *h)
{
    return sqlite3_create_function(h, "nb_series_shape", 5,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                   sql_shape, NULL, NULL);
}
