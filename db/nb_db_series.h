/* nb_db_series: what a run measured, as one key. Runs of one series are like with like:
 * history --latest, the regression baseline, the dashboard's plots and compare use it. */
#ifndef NB_DB_SERIES_H
#define NB_DB_SERIES_H

#include <stddef.h>
#include <stdint.h>

struct sqlite3;

/* The parts of a series. A run's kind tells what ran ("run": `make run` or npubench's own
 * generation, cold; "profile": warm TTFT and the profiler's numbers; "bench": a nightly's
 * history row, its `make profile`; "sweep": one context of a decode sweep; "verify" ...);
 * the counts tell with what: the KV depth decoded at, the tokens generated, the prompt (by
 * its length in tokens: the text itself is not stored) and the CPU threads. A count not
 * known (<= 0) is its own value "-": a run that did not say is not like one that did. */
typedef struct nb_db_series {
    const char *model, *backend, *dtype, *board; /* the deployment; NULL = "" */
    const char *kind;                            /* NULL = "" */
    int64_t context_len, generated_tokens, prompt_tokens; /* <= 0: unknown */
    int threads;                                 /* <= 0: unknown */
} nb_db_series;

/* Enough for any key of NB_DB_NAME_MAX-bounded names. */
#define NB_DB_SERIES_MAX 768

/* The whole key: "model|backend|dtype|board|" then the shape (below). Equal keys, one
 * series; cap >= NB_DB_SERIES_MAX never truncates. Returns buf. */
char *nb_db_series_key(const nb_db_series *s, char *buf, size_t cap);

/* The measurement alone, for runs of one deployment:
 * "kind|ctx=N|gen=N|prompt=N|threads=N" (N "-" when unknown). Returns buf. */
char *nb_db_series_shape(const nb_db_series *s, char *buf, size_t cap);

/* For people: "sweep, context 131072", "run, context 6, 128 tokens", "verify". */
char *nb_db_series_label(const nb_db_series *s, char *buf, size_t cap);

/* Registers the SQL function nb_series_shape(kind, context_len, generated_tokens,
 * prompt_tokens, threads) on a connection, so queries select a series with the very same
 * rule (the regression baseline). 0 on success, an SQLite code otherwise. */
int nb_db_series_register(struct sqlite3 *h);

#endif
