/* test_db: the history database: migrations, the job queue state machine,
 * runs and history queries, Mann-Whitney/regression, imports, kill -9 durability. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_db.h"
#include "nb_db_replay.h"
#include "nb_db_alias.h"
#include "nb_db_deploy.h"
#include "nb_db_import.h"
#include "nb_db_jobs.h"
#include "nb_db_regress.h"
#include "nb_db_results.h"
#include "nb_db_runs.h"
#include "nb_db_series.h"
#include "nb_db_schema.h"
#include "nb_db_traces.h"
#include "nb_db_workers.h"
#include "nb_stats.h"
#include "npubench.pb-c.h"
#include "testdb.h"
#include "testutil.h"

static char tmpdir[256];
static int64_t fake_now = 1700000000000LL;

static int64_t fake_clock(void *ud)
{
    (void)ud;
    return fake_now;
}

#define assert_close(a, b, tol)                                                              \
    do {                                                                                     \
        double a_ = (a), b_ = (b);                                                           \
        if (!(fabs(a_ - b_) <= (tol)))                                                       \
            fail_msg("%s = %.17g, expected %.17g (tol %g)", #a, a_, b_, (double)(tol));      \
    } while (0)

#define assert_ok(call)                                                                      \
    do {                                                                                     \
        nb_err e_ = {0};                                                                     \
        nb_code rc_ = (call);                                                                \
        if (rc_ != NB_OK)                                                                    \
            fail_msg("%s failed: %s: %s", #call, nb_code_name(rc_), e_.msg);                 \
    } while (0)

static void db_file(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s.db", tmpdir, name);
}

static void remove_db(const char *path)
{
    char p[600];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
}

/* A fresh database on the fake clock. */
static nb_db *fresh_db(const char *name)
{
    char path[512];
    db_file(path, sizeof path, name);
    remove_db(path);
    nb_db *db = NULL;
    nb_err err = {0};
    nb_code rc = nb_db_open(path, NULL, &db, &err);
    if (rc)
        fail_msg("open %s: %s", path, err.msg);
    nb_db_set_clock(db, fake_clock, NULL);
    return db;
}

static void close_db(nb_db *db)
{
    char path[512];
    snprintf(path, sizeof path, "%s", nb_db_path(db));
    nb_db_close(db);
    remove_db(path);
}

static int64_t sql_int(const char *path, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* Runs sql on the file behind npubench's back (a test's way to age or break a database). */
static void sql_exec(const char *path, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

/* Closes db, rolls its file back with sql (the older schema's shape), opens it again and checks
 * it migrated to the latest version: the database a user of the version before brings. */
static nb_db *rolled_back(nb_db *db, const char *sql)
{
    char path[512];
    snprintf(path, sizeof path, "%s", nb_db_path(db));
    nb_db_close(db);
    sql_exec(path, sql);
    nb_err err = {0};
    assert_int_equal(nb_db_open(path, NULL, &db, &err), NB_OK);
    int v = 0;
    assert_int_equal(nb_db_schema_version(db, &v, &err), NB_OK);
    assert_int_equal(v, nb_db_schema_latest());
    return db;
}

static void sql_text(const char *path, const char *sql, char *out, size_t size)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    snprintf(out, size, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
}

static int group_setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nb_test_db.XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

/* Also removes what a failed test left behind. */
static int group_teardown(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[600];
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    return rmdir(tmpdir);
}

static int64_t add_deployment(nb_db *db, const char *model, const char *backend,
                              const char *dtype, const char *board)
{
    nb_db_deployment d = {0};
    snprintf(d.model, sizeof d.model, "%s", model);
    snprintf(d.backend, sizeof d.backend, "%s", backend);
    snprintf(d.dtype, sizeof d.dtype, "%s", dtype);
    snprintf(d.board, sizeof d.board, "%s", board);
    int64_t id = 0;
    assert_ok(nb_db_deployment_upsert(db, &d, &id, &e_));
    return id;
}

static int64_t add_run(nb_db *db, int64_t dep, int64_t t, double tps, double ttft,
                       nb_db_outcome o)
{
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = dep;
    r.kind = "bench";
    r.outcome = o;
    r.started_ms = t;
    r.value[NB_METRIC_TPS] = tps;
    r.value[NB_METRIC_TTFT] = ttft;
    r.source = NB_SOURCE_SERVICE;
    int64_t id = 0;
    assert_ok(nb_db_run_insert(db, &r, &id, &e_));
    return id;
}

static nb_db_worker make_worker(const char *id, const char *board, const char *backends,
                                const char *tags, const char *deployments)
{
    nb_db_worker w;
    memset(&w, 0, sizeof w);
    snprintf(w.id, sizeof w.id, "%s", id);
    snprintf(w.board_name, sizeof w.board_name, "%s", board);
    snprintf(w.board_type, sizeof w.board_type, "%s", "npu4");
    snprintf(w.backends, sizeof w.backends, "%s", backends);
    snprintf(w.tags, sizeof w.tags, "%s", tags);
    snprintf(w.deployments, sizeof w.deployments, "%s", deployments);
    return w;
}

static int64_t enqueue(nb_db *db, const char *req, const char *kind, int prio,
                       const char *backend)
{
    nb_db_job_new j = {0};
    j.request_id = req;
    j.kind = kind;
    j.spec = "{}";
    j.spec_len = 2;
    j.priority = prio;
    j.sel.backend = backend;
    int64_t id = 0;
    assert_ok(nb_db_job_enqueue(db, &j, &id, NULL, &e_));
    return id;
}

/* ---- schema ---- */

static void test_migrate_and_reopen(void **state)
{
    (void)state;
    char path[512];
    db_file(path, sizeof path, "migrate");
    remove_db(path);
    nb_db *db = NULL;
    nb_err err = {0};
    assert_int_equal(nb_db_open(path, NULL, &db, &err), NB_OK);
    int v = -1;
    assert_ok(nb_db_schema_version(db, &v, &e_));
    assert_int_equal(v, nb_db_schema_latest());
    assert_true(nb_db_schema_latest() >= 1);
    int64_t dep = add_deployment(db, "m", "cpu", "q4_1", "b1");
    nb_db_close(db);

    char mode[16];
    sql_text(path, "PRAGMA journal_mode", mode, sizeof mode);
    assert_string_equal(mode, "wal");
    assert_int_equal(sql_int(path, "SELECT count(*) FROM schema_version"),
                     nb_db_schema_latest());

    /* Reopening applies nothing and keeps the data. */
    assert_int_equal(nb_db_open(path, NULL, &db, &err), NB_OK);
    assert_ok(nb_db_schema_version(db, &v, &e_));
    assert_int_equal(v, nb_db_schema_latest());
    nb_db_deployment d;
    assert_ok(nb_db_deployment_get(db, dep, &d, &e_));
    assert_string_equal(d.model, "m");
    /* foreign_keys is on: a run for a missing deployment is refused. */
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = 999;
    r.kind = "bench";
    r.started_ms = 1;
    int64_t id;
    assert_int_equal(nb_db_run_insert(db, &r, &id, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "deployment_id"));
    nb_db_close(db);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs"), 0);
    remove_db(path);
}

static void test_newer_schema_rejected(void **state)
{
    (void)state;
    char path[512];
    db_file(path, sizeof path, "newer");
    remove_db(path);
    nb_db *db = NULL;
    nb_err err = {0};
    assert_int_equal(nb_db_open(path, NULL, &db, &err), NB_OK);
    nb_db_close(db);
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO schema_version VALUES (%d, 'from the future', 0)",
             nb_db_schema_latest() + 1);
    sql_exec(path, sql);
    assert_int_equal(nb_db_open(path, NULL, &db, &err), NB_EUNSUPPORTED);
    assert_null(db);
    assert_non_null(strstr(err.msg, "newer"));
    remove_db(path);
}

static void test_foreign_files_rejected(void **state)
{
    (void)state;
    char path[512];
    db_file(path, sizeof path, "foreign");
    remove_db(path);
    sql_exec(path, "CREATE TABLE photos (id INTEGER)");
    nb_db *db = NULL;
    nb_err err = {0};
    assert_int_equal(nb_db_open(path, NULL, &db, &err), NB_EFORMAT);
    assert_non_null(strstr(err.msg, "not an npubench database"));
    remove_db(path);

    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("this is not a database, it is a text file that is long enough to have a header\n",
          f);
    fclose(f);
    /* SQLITE_NOTADB: a wrong file or a destroyed header; either way the history is gone. */
    assert_int_equal(nb_db_open(path, NULL, &db, &err), NB_EDATALOSS);
    assert_string_equal(nb_code_name(err.code), "DATA_LOSS");
    remove_db(path);
}

/* A damaged page (here: the file's last one overwritten) opens, but the start-up
 * integrity check refuses it as DATA_LOSS, not as a bad argument. */
static void test_corrupt_page_is_data_loss(void **state)
{
    (void)state;
    char path[512];
    db_file(path, sizeof path, "corrupt");
    remove_db(path);
    nb_db *db = NULL;
    assert_ok(nb_db_open(path, NULL, &db, &e_));
    for (int i = 0; i < 300; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "corrupt-%d", i);
        nb_db_job_new j = {0};
        j.request_id = rid;
        j.kind = "bench";
        j.spec = "{\"model\":\"SmolLM2-135M-Instruct, padded to fill pages quickly\"}";
        j.spec_len = strlen(j.spec);
        int64_t id;
        assert_ok(nb_db_job_enqueue(db, &j, &id, NULL, &e_));
    }
    assert_ok(nb_db_check(db, &e_));
    nb_db_close(db); /* the last connection checkpoints: everything is in the main file */
    assert_int_equal(tu_damage_tail(path), 0);
    nb_err err = {0};
    assert_ok(nb_db_open(path, NULL, &db, &e_));
    assert_int_equal(nb_db_check(db, &err), NB_EDATALOSS);
    assert_non_null(strstr(err.msg, "integrity check failed"));
    nb_db_close(db);
    remove_db(path);
}

/* Whole results commit with the caller's transaction or not at all, and retention
 * removes those of jobs finished before the cut-off only. */
static void test_results_transaction_and_retention(void **state)
{
    (void)state;
    char path[512];
    db_file(path, sizeof path, "results");
    remove_db(path);
    nb_db *db = NULL;
    assert_ok(nb_db_open(path, NULL, &db, &e_));
    nb_db_set_clock(db, fake_clock, NULL);
    int64_t ids[2];
    for (int i = 0; i < 2; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "res-%d", i);
        nb_db_job_new j = {0};
        j.request_id = rid;
        j.kind = "bench";
        j.spec = "{}";
        j.spec_len = 2;
        assert_ok(nb_db_job_enqueue(db, &j, &ids[i], NULL, &e_));
    }
    void *blob = NULL;
    size_t len = 0;
    nb_err err = {0};
    assert_ok(nb_db_begin(db, &e_));
    assert_ok(nb_db_result_put(db, ids[0], "abc", 3, &e_));
    nb_db_rollback(db);
    assert_int_equal(nb_db_result_get(db, ids[0], &blob, &len, &err), NB_ENOTFOUND);
    assert_ok(nb_db_begin(db, &e_));
    assert_ok(nb_db_result_put(db, ids[0], "abc", 3, &e_));
    assert_ok(nb_db_result_put(db, ids[1], "", 0, &e_));
    assert_ok(nb_db_commit(db, &e_));
    assert_ok(nb_db_result_get(db, ids[0], &blob, &len, &e_));
    assert_int_equal(len, 3);
    assert_memory_equal(blob, "abc", 3);
    free(blob);
    assert_ok(nb_db_result_get(db, ids[1], &blob, &len, &e_));
    assert_int_equal(len, 0);
    free(blob);
    /* Job 0 finished a day ago, job 1 is still queued. */
    char sql[200];
    snprintf(sql, sizeof sql, "UPDATE jobs SET state = 'done', finished_ms = %lld WHERE id = %lld",
             (long long)(fake_now - 86400000LL), (long long)ids[0]);
    sql_exec(path, sql);
    size_t n = 99;
    assert_ok(nb_db_results_prune(db, fake_now - 3600000LL, &n, &e_));
    assert_int_equal(n, 1);
    assert_int_equal(nb_db_result_get(db, ids[0], &blob, &len, &err), NB_ENOTFOUND);
    assert_ok(nb_db_result_get(db, ids[1], &blob, &len, &e_));
    free(blob);
    nb_db_close(db);
    remove_db(path);
}

/* ---- deployments and references ---- */

static void test_deployments_and_references(void **state)
{
    (void)state;
    nb_db *db = fresh_db("deploy");
    int64_t a = add_deployment(db, "SmolLM2", "cpu", "q4_1", "x86-01");
    int64_t a2 = add_deployment(db, "SmolLM2", "cpu", "q4_1", "x86-01");
    int64_t b = add_deployment(db, "SmolLM2", "npu", "bf16", "strix-01");
    assert_int_equal(a, a2);
    assert_int_not_equal(a, b);

    nb_db_deployment key = {0}, got;
    snprintf(key.model, sizeof key.model, "SmolLM2");
    snprintf(key.backend, sizeof key.backend, "npu");
    snprintf(key.dtype, sizeof key.dtype, "bf16");
    snprintf(key.board, sizeof key.board, "strix-01");
    assert_ok(nb_db_deployment_find(db, &key, &got, &e_));
    assert_int_equal(got.id, b);
    snprintf(key.board, sizeof key.board, "nope");
    nb_err err = {0};
    assert_int_equal(nb_db_deployment_find(db, &key, &got, &err), NB_ENOTFOUND);
    key.model[0] = '\0';
    assert_int_equal(nb_db_deployment_upsert(db, &key, &a2, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "deployment.model"));

    nb_db_deployment *list;
    size_t n;
    assert_ok(nb_db_deployment_list(db, "SmolLM2", &list, &n, &e_));
    assert_int_equal(n, 2);
    free(list);

    assert_int_equal(nb_db_reference_get(db, "SmolLM2", &got, &err), NB_ENOTFOUND);
    assert_ok(nb_db_reference_set(db, a, &e_));
    assert_ok(nb_db_reference_get(db, "SmolLM2", &got, &e_));
    assert_int_equal(got.id, a);
    assert_ok(nb_db_reference_set(db, b, &e_));
    assert_ok(nb_db_reference_get(db, "SmolLM2", &got, &e_));
    assert_int_equal(got.id, b);
    assert_int_equal(nb_db_reference_set(db, 12345, &err), NB_ENOTFOUND);
    assert_ok(nb_db_reference_clear(db, "SmolLM2", &e_));
    assert_int_equal(nb_db_reference_get(db, "SmolLM2", &got, &err), NB_ENOTFOUND);
    close_db(db);
}

/* ---- workers ---- */

static void test_workers(void **state)
{
    (void)state;
    nb_db *db = fresh_db("workers");
    fake_now = 1000000;
    nb_db_worker w = make_worker("w1", "strix-01", "npu,cpu", "lab-a", "*");
    assert_ok(nb_db_worker_upsert(db, &w, &e_));
    fake_now += 5000;
    nb_db_worker w2 = make_worker("w2", "x86-01", "cpu", "", "");
    assert_ok(nb_db_worker_upsert(db, &w2, &e_));
    nb_db_worker got;
    assert_ok(nb_db_worker_get(db, "w1", &got, &e_));
    assert_int_equal(got.first_seen_ms, 1000000);
    assert_int_equal(got.state, NB_WORKER_ALIVE);
    assert_string_equal(got.backends, "npu,cpu");

    /* w1 silent for 30 s, w2 for 25 s: both stale after 20 s. */
    fake_now = 1000000 + 30000;
    size_t ns = 0, ng = 0;
    assert_ok(nb_db_worker_sweep(db, 20000, 60000, &ns, &ng, &e_));
    assert_int_equal(ns, 2);
    assert_int_equal(ng, 0);
    assert_ok(nb_db_worker_touch(db, "w2", &e_));
    fake_now = 1000000 + 70000;
    assert_ok(nb_db_worker_sweep(db, 20000, 60000, &ns, &ng, &e_));
    assert_int_equal(ng, 1); /* w1, last seen 70 s ago */
    assert_ok(nb_db_worker_get(db, "w1", &got, &e_));
    assert_int_equal(got.state, NB_WORKER_GONE);
    assert_ok(nb_db_worker_get(db, "w2", &got, &e_));
    assert_int_equal(got.state, NB_WORKER_STALE);
    assert_int_equal(got.first_seen_ms, 1005000);
    nb_err err;
    assert_int_equal(nb_db_worker_touch(db, "w9", &err), NB_ENOTFOUND);
    nb_db_worker *all;
    size_t n;
    assert_ok(nb_db_worker_list(db, &all, &n, &e_));
    assert_int_equal(n, 2);
    free(all);
    assert_true(nb_db_list_has("npu, cpu", "cpu"));
    assert_true(nb_db_list_has(" npu ,cpu", "npu"));
    assert_false(nb_db_list_has("npu2,cpu", "npu"));
    assert_false(nb_db_list_has("", "npu"));
    close_db(db);
}

/* ---- queue ---- */

static void test_enqueue_idempotent(void **state)
{
    (void)state;
    nb_db *db = fresh_db("idem");
    nb_db_job_new j = {0};
    j.request_id = "req-1";
    j.kind = "bench";
    j.spec = "{\"model\":\"m\"}";
    j.spec_len = strlen(j.spec);
    int64_t id1 = 0, id2 = 0;
    int existed = -1;
    assert_ok(nb_db_job_enqueue(db, &j, &id1, &existed, &e_));
    assert_int_equal(existed, 0);
    assert_ok(nb_db_job_enqueue(db, &j, &id2, &existed, &e_));
    assert_int_equal(existed, 1);
    assert_int_equal(id1, id2);

    /* The same key for a different request is refused, not silently merged. */
    nb_db_job_new other = j;
    other.spec = "{\"model\":\"other\"}";
    other.spec_len = strlen(other.spec);
    nb_err err = {0};
    int64_t id3 = 0;
    assert_int_equal(nb_db_job_enqueue(db, &other, &id3, &existed, &err), NB_EMISMATCH);
    assert_int_equal(id3, id1);
    assert_non_null(strstr(err.msg, "req-1"));

    /* Without a request id every enqueue is a new job. */
    j.request_id = NULL;
    assert_ok(nb_db_job_enqueue(db, &j, &id2, &existed, &e_));
    assert_ok(nb_db_job_enqueue(db, &j, &id3, &existed, &e_));
    assert_int_not_equal(id2, id3);
    assert_int_not_equal(id1, id2);

    nb_db_job got;
    assert_ok(nb_db_job_get(db, id1, &got, &e_));
    assert_int_equal(got.state, NB_JOB_QUEUED);
    assert_int_equal(got.spec_len, j.spec_len);
    assert_memory_equal(got.spec, j.spec, j.spec_len);
    assert_string_equal(got.request_id, "req-1");
    assert_int_equal(got.max_attempts, NB_DB_DEFAULT_MAX_ATTEMPTS);
    assert_non_null(strstr(got.log, "enqueued bench"));
    nb_db_job_free(&got);
    int64_t found;
    assert_ok(nb_db_job_find_request(db, "req-1", &found, &e_));
    assert_int_equal(found, id1);
    assert_ok(nb_db_job_set_queued_reason(db, id1, "no worker serves backend 'npu'", &e_));
    assert_ok(nb_db_job_get(db, id1, &got, &e_));
    assert_string_equal(got.queued_reason, "no worker serves backend 'npu'");
    nb_db_job_free(&got);

    j.kind = "";
    assert_int_equal(nb_db_job_enqueue(db, &j, &id2, &existed, &err), NB_EINVAL);
    close_db(db);
}

static void test_priority_fifo(void **state)
{
    (void)state;
    nb_db *db = fresh_db("prio");
    int64_t ids[5];
    int prios[5] = {0, 5, 0, 5, 1};
    for (int i = 0; i < 5; i++) {
        fake_now = 2000000 + i; /* created in this order */
        ids[i] = enqueue(db, NULL, "bench", prios[i], NULL);
    }
    int64_t expect[5] = {ids[1], ids[3], ids[4], ids[0], ids[2]};
    nb_db_worker w = make_worker("w1", "b", "cpu", "", "");
    for (int i = 0; i < 5; i++) {
        nb_db_job job;
        int found = 0;
        assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 60000, &job, &found, &e_));
        assert_true(found);
        assert_int_equal(job.id, expect[i]);
        assert_int_equal(job.state, NB_JOB_LEASED);
        assert_string_equal(job.leased_worker, "w1");
        assert_int_equal(strlen(job.lease_id), 32);
        nb_db_job_free(&job);
    }
    nb_db_job job;
    int found = 1;
    assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 60000, &job, &found, &e_));
    assert_false(found);
    close_db(db);
}

static int reject_kind_profile(const nb_db_job *job, void *ud)
{
    int *calls = ud;
    (*calls)++;
    return strcmp(job->kind, "profile") != 0;
}

static void test_selector_matching(void **state)
{
    (void)state;
    nb_db *db = fresh_db("match");
    nb_db_job_new j = {0};
    j.kind = "verify";
    j.sel.backend = "npu";
    j.sel.tags = "lab-a, fast";
    j.sel.deployment = "llama-1b/bf16";
    int64_t npu_job;
    assert_ok(nb_db_job_enqueue(db, &j, &npu_job, NULL, &e_));
    nb_db_job_new p = {0};
    p.kind = "profile";
    p.priority = 10;
    int64_t prof_job;
    assert_ok(nb_db_job_enqueue(db, &p, &prof_job, NULL, &e_));
    nb_db_job_new pin = {0};
    pin.kind = "bench";
    pin.sel.worker = "w-special";
    pin.priority = 20;
    int64_t pin_job;
    assert_ok(nb_db_job_enqueue(db, &pin, &pin_job, NULL, &e_));

    nb_db_job got;
    assert_ok(nb_db_job_get(db, npu_job, &got, &e_));
    nb_db_worker cpu = make_worker("w-cpu", "x86", "cpu", "lab-a,fast", "*");
    nb_db_worker npu_notag = make_worker("w-npu1", "strix", "cpu,npu", "lab-a", "*");
    nb_db_worker npu_nodep = make_worker("w-npu2", "strix", "npu", "fast,lab-a", "other");
    nb_db_worker npu_ok = make_worker("w-npu3", "strix", "npu", "fast,lab-a,big",
                                      "x,llama-1b/bf16");
    char why[256];
    assert_false(nb_db_job_matches(&got, &cpu, why, sizeof why));
    assert_non_null(strstr(why, "backend 'npu'"));
    assert_false(nb_db_job_matches(&got, &npu_notag, why, sizeof why));
    assert_non_null(strstr(why, "tag 'fast'"));
    assert_false(nb_db_job_matches(&got, &npu_nodep, why, sizeof why));
    assert_non_null(strstr(why, "deployment"));
    assert_true(nb_db_job_matches(&got, &npu_ok, why, sizeof why));
    nb_db_job_free(&got);

    /* The predicate vetoes the profile job; the pinned job is not for us. */
    int calls = 0, found = 0;
    nb_db_job job;
    assert_ok(nb_db_job_lease(db, &npu_ok, reject_kind_profile, &calls, 1000, &job, &found,
                              &e_));
    assert_true(found);
    assert_int_equal(job.id, npu_job);
    assert_int_equal(calls, 2);
    nb_db_job_free(&job);
    /* A CPU worker takes the profile job; nobody but w-special the pinned one. */
    assert_ok(nb_db_job_lease(db, &cpu, NULL, NULL, 1000, &job, &found, &e_));
    assert_true(found);
    assert_int_equal(job.id, prof_job);
    nb_db_job_free(&job);
    assert_ok(nb_db_job_lease(db, &cpu, NULL, NULL, 1000, &job, &found, &e_));
    assert_false(found);
    /* A stale worker gets nothing. */
    nb_db_worker special = make_worker("w-special", "x86", "cpu", "", "");
    special.state = NB_WORKER_STALE;
    assert_ok(nb_db_job_lease(db, &special, NULL, NULL, 1000, &job, &found, &e_));
    assert_false(found);
    special.state = NB_WORKER_ALIVE;
    assert_ok(nb_db_job_lease(db, &special, NULL, NULL, 1000, &job, &found, &e_));
    assert_true(found);
    assert_int_equal(job.id, pin_job);
    nb_db_job_free(&job);

    nb_err err;
    assert_ok(nb_db_job_set_queued_reason(db, pin_job, "ignored: not queued", &e_));
    assert_int_equal(nb_db_job_set_queued_reason(db, 999, "x", &err), NB_ENOTFOUND);
    close_db(db);
}

/* The queue keeps a job's dtype enum (sel_dtype_id) as given; a database of the version
 * before gets it from the pattern's dtype word: the word after the last '/' (a model name may
 * hold one), a canonical engine name only (an exec label, another spelling, "*", none: 0). */
static void test_queue_dtype_enum_migrated(void **state)
{
    (void)state;
    nb_db *db = fresh_db("dtype_enum");
    static const struct {
        const char *pattern;
        int id;
    } rows[] = {{"HuggingFaceTB/SmolLM2-135M/q4_1", NPUBENCH__DTYPE__DTYPE_Q4_1},
                {"m/bf16", NPUBENCH__DTYPE__DTYPE_BF16},
                {"m/f32", NPUBENCH__DTYPE__DTYPE_F32},
                {"gemma3/native", NPUBENCH__DTYPE__DTYPE_NATIVE},
                {"m/BF16", 0},
                {"m/fp32", 0},
                {"m/int4-awq", 0},
                {"m/*", 0},
                {"m", 0},
                {"", 0}};
    enum { N = sizeof rows / sizeof rows[0] };
    int64_t ids[N];
    for (int i = 0; i < N; i++) {
        nb_db_job_new j = {0};
        j.kind = "run";
        j.sel.deployment = rows[i].pattern;
        j.sel.dtype_id = 7; /* kept as given, whatever the word */
        assert_ok(nb_db_job_enqueue(db, &j, &ids[i], NULL, &e_));
        nb_db_job got;
        assert_ok(nb_db_job_get(db, ids[i], &got, &e_));
        assert_int_equal(got.sel_dtype_id, 7);
        nb_db_job_free(&got);
    }
    db = rolled_back(db, "ALTER TABLE jobs DROP COLUMN sel_dtype_id; "
                         "DELETE FROM schema_version WHERE version >= 10");
    for (int i = 0; i < N; i++) {
        nb_db_job got;
        assert_ok(nb_db_job_get(db, ids[i], &got, &e_));
        if (got.sel_dtype_id != rows[i].id)
            fail_msg("'%s': sel_dtype_id %d, want %d", rows[i].pattern, got.sel_dtype_id,
                     rows[i].id);
        nb_db_job_free(&got);
    }
    close_db(db);
}

static void test_lease_expiry_requeue(void **state)
{
    (void)state;
    nb_db *db = fresh_db("expiry");
    fake_now = 5000000;
    nb_db_job_new j = {0};
    j.kind = "bench";
    j.max_attempts = 2;
    int64_t id;
    assert_ok(nb_db_job_enqueue(db, &j, &id, NULL, &e_));
    nb_db_worker w1 = make_worker("w1", "b", "cpu", "", "");
    nb_db_worker w2 = make_worker("w2", "b", "cpu", "", "");

    nb_db_job job;
    int found;
    assert_ok(nb_db_job_lease(db, &w1, NULL, NULL, 100, &job, &found, &e_));
    assert_true(found);
    assert_int_equal(job.lease_expiry_ms, 5000100);
    char lease1[NB_DB_LEASE_ID_MAX];
    snprintf(lease1, sizeof lease1, "%s", job.lease_id);
    nb_db_job_free(&job);

    /* Renewing before expiry keeps it alive past the old deadline. */
    fake_now += 50;
    int64_t exp;
    assert_ok(nb_db_job_renew(db, id, lease1, 100, &exp, &e_));
    assert_int_equal(exp, 5000150);
    assert_ok(nb_db_job_start(db, id, lease1, &e_));
    fake_now += 80; /* 5000130 < 5000150 */
    size_t nq = 9, nf = 9;
    assert_ok(nb_db_jobs_requeue_expired(db, &nq, &nf, &e_));
    assert_int_equal(nq, 0);
    assert_int_equal(nf, 0);

    fake_now += 100; /* expired */
    assert_ok(nb_db_jobs_requeue_expired(db, &nq, &nf, &e_));
    assert_int_equal(nq, 1);
    assert_int_equal(nf, 0);
    assert_ok(nb_db_job_get(db, id, &job, &e_));
    assert_int_equal(job.state, NB_JOB_QUEUED);
    assert_int_equal(job.attempts, 1);
    assert_non_null(strstr(job.queued_reason, "expired"));
    assert_non_null(strstr(job.queued_reason, "w1"));
    assert_string_equal(job.lease_id, "");
    nb_db_job_free(&job);

    /* The old holder learns it lost the lease. */
    nb_err err = {0};
    assert_int_equal(nb_db_job_renew(db, id, lease1, 100, &exp, &err), NB_EMISMATCH);
    assert_int_equal(nb_db_job_set_progress(db, id, lease1, 1, 2, "x", &err), NB_EMISMATCH);

    assert_ok(nb_db_job_lease(db, &w2, NULL, NULL, 100, &job, &found, &e_));
    assert_true(found);
    assert_int_equal(job.attempts, 1);
    nb_db_job_free(&job);
    fake_now += 1000;
    assert_ok(nb_db_jobs_requeue_expired(db, &nq, &nf, &e_));
    assert_int_equal(nq, 0);
    assert_int_equal(nf, 1);
    assert_ok(nb_db_job_get(db, id, &job, &e_));
    assert_int_equal(job.state, NB_JOB_FAILED);
    assert_int_equal(job.attempts, 2);
    assert_non_null(strstr(job.error, "gave up after 2 of 2 attempts"));
    assert_non_null(strstr(job.log, "leased to worker w2"));
    nb_db_job_free(&job);
    assert_ok(nb_db_job_lease(db, &w1, NULL, NULL, 100, &job, &found, &e_));
    assert_false(found);

    /* A worker that disappears hands its leases back at once. */
    int64_t id2 = enqueue(db, NULL, "bench", 0, NULL);
    assert_ok(nb_db_job_lease(db, &w1, NULL, NULL, 100000, &job, &found, &e_));
    assert_int_equal(job.id, id2);
    char lease2[NB_DB_LEASE_ID_MAX];
    snprintf(lease2, sizeof lease2, "%s", job.lease_id);
    nb_db_job_free(&job);
    assert_ok(nb_db_jobs_release_worker(db, "w1", "connection reset", &nq, &nf, &e_));
    assert_int_equal(nq, 1);
    assert_ok(nb_db_job_get(db, id2, &job, &e_));
    assert_int_equal(job.state, NB_JOB_QUEUED);
    assert_non_null(strstr(job.queued_reason, "connection reset"));
    nb_db_job_free(&job);
    /* ... and a worker shutting down releases its own lease. */
    assert_ok(nb_db_job_lease(db, &w2, NULL, NULL, 100000, &job, &found, &e_));
    snprintf(lease2, sizeof lease2, "%s", job.lease_id);
    nb_db_job_free(&job);
    assert_ok(nb_db_job_release(db, id2, lease2, "shutting down", &e_));
    assert_ok(nb_db_job_get(db, id2, &job, &e_));
    assert_int_equal(job.state, NB_JOB_QUEUED);
    assert_int_equal(job.attempts, 2);
    nb_db_job_free(&job);
    close_db(db);
}

static size_t runs_of_job(nb_db *db, int64_t job)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE job_id = %lld", (long long)job);
    return (size_t)sql_int(nb_db_path(db), sql);
}

static void test_no_duplicate_run(void **state)
{
    (void)state;
    nb_db *db = fresh_db("dup");
    fake_now = 7000000;
    int64_t dep = add_deployment(db, "m", "cpu", "q4_1", "b");
    int64_t id = enqueue(db, "r-dup", "bench", 0, NULL);
    nb_db_worker w1 = make_worker("w1", "b", "cpu", "", "");
    nb_db_worker w2 = make_worker("w2", "b", "cpu", "", "");
    nb_db_job job;
    int found;
    assert_ok(nb_db_job_lease(db, &w1, NULL, NULL, 100, &job, &found, &e_));
    char lease1[NB_DB_LEASE_ID_MAX], lease2[NB_DB_LEASE_ID_MAX];
    snprintf(lease1, sizeof lease1, "%s", job.lease_id);
    nb_db_job_free(&job);
    fake_now += 500;
    size_t nq, nf;
    assert_ok(nb_db_jobs_requeue_expired(db, &nq, &nf, &e_));
    assert_int_equal(nq, 1);
    assert_ok(nb_db_job_lease(db, &w2, NULL, NULL, 10000, &job, &found, &e_));
    snprintf(lease2, sizeof lease2, "%s", job.lease_id);
    assert_string_not_equal(lease1, lease2);
    nb_db_job_free(&job);

    nb_db_sample samples[3] = {{0, {100, 20.0, 50, 51}}, {1, {101, 20.5, 49, 50}},
                               {2, {99, 19.5, 51, 52}}};
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = dep;
    r.kind = "bench";
    r.outcome = NB_OUTCOME_PASS;
    r.started_ms = fake_now;
    r.value[NB_METRIC_TPS] = 20.0;
    r.samples = samples;
    r.n_samples = 3;
    r.source = NB_SOURCE_SERVICE;
    nb_db_job_result res = {NB_JOB_DONE, NULL, &r, 1};

    /* The first worker wakes up and reports: its lease is gone. */
    nb_err err = {0};
    int64_t rid = 0, rid2 = 0;
    int dup = -1;
    assert_int_equal(nb_db_job_complete(db, id, lease1, &res, &rid, &dup, &err), NB_EMISMATCH);
    assert_non_null(strstr(err.msg, "not current"));
    assert_int_equal(runs_of_job(db, id), 0);

    assert_ok(nb_db_job_complete(db, id, lease2, &res, &rid, &dup, &e_));
    assert_int_equal(dup, 0);
    assert_true(rid > 0);
    assert_int_equal(runs_of_job(db, id), 1);
    /* The ack was lost and w2 retries: same answer, nothing new written. */
    assert_ok(nb_db_job_complete(db, id, lease2, &res, &rid2, &dup, &e_));
    assert_int_equal(dup, 1);
    assert_int_equal(rid2, rid);
    assert_int_equal(runs_of_job(db, id), 1);
    assert_int_equal(nb_db_job_complete(db, id, lease1, &res, &rid2, &dup, &err),
                     NB_EMISMATCH);
    assert_int_equal(runs_of_job(db, id), 1);

    assert_ok(nb_db_job_get(db, id, &job, &e_));
    assert_int_equal(job.state, NB_JOB_DONE);
    assert_true(job.finished_ms > 0);
    nb_db_job_free(&job);
    nb_db_run got;
    assert_ok(nb_db_run_get(db, rid, &got, &e_));
    assert_int_equal(got.job_id, id);
    assert_string_equal(got.lease_id, lease2);
    assert_int_equal(got.n_samples, 3);
    nb_db_run_free(&got);

    /* The schema itself refuses a second run in the same slot of a job. */
    r.job_id = id;
    r.job_seq = 0;
    assert_int_equal(nb_db_run_insert(db, &r, &rid2, &err), NB_EINVAL);
    assert_int_equal(runs_of_job(db, id), 1);

    /* A failing run insert rolls the completion back entirely. */
    int64_t id2 = enqueue(db, NULL, "bench", 0, NULL);
    assert_ok(nb_db_job_lease(db, &w2, NULL, NULL, 10000, &job, &found, &e_));
    assert_int_equal(job.id, id2);
    nb_db_run bad[2] = {r, r};
    bad[0].job_id = 0;
    bad[1].job_id = 0;
    bad[1].deployment_id = 4242;
    nb_db_job_result res2 = {NB_JOB_DONE, NULL, bad, 2};
    assert_int_equal(nb_db_job_complete(db, id2, job.lease_id, &res2, NULL, NULL, &err),
                     NB_EINVAL);
    assert_int_equal(runs_of_job(db, id2), 0);
    nb_db_job j2;
    assert_ok(nb_db_job_get(db, id2, &j2, &e_));
    assert_int_equal(j2.state, NB_JOB_LEASED);
    nb_db_job_free(&j2);
    nb_db_job_result failed = {NB_JOB_FAILED, "model file missing", NULL, 0};
    assert_ok(nb_db_job_complete(db, id2, job.lease_id, &failed, NULL, &dup, &e_));
    nb_db_job_free(&job);
    assert_ok(nb_db_job_get(db, id2, &job, &e_));
    assert_int_equal(job.state, NB_JOB_FAILED);
    assert_string_equal(job.error, "model file missing");
    nb_db_job_free(&job);
    close_db(db);
}

static void test_cancel(void **state)
{
    (void)state;
    nb_db *db = fresh_db("cancel");
    int64_t q = enqueue(db, NULL, "bench", 0, NULL);
    int64_t l = enqueue(db, NULL, "verify", 0, NULL);
    assert_ok(nb_db_job_cancel(db, q, "user asked", &e_));
    nb_db_job job;
    assert_ok(nb_db_job_get(db, q, &job, &e_));
    assert_int_equal(job.state, NB_JOB_CANCELLED);
    assert_string_equal(job.error, "user asked");
    nb_db_job_free(&job);
    assert_ok(nb_db_job_cancel(db, q, "again", &e_)); /* idempotent */

    nb_db_worker w = make_worker("w1", "b", "cpu", "", "");
    int found;
    assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 10000, &job, &found, &e_));
    assert_true(found);
    assert_int_equal(job.id, l); /* never the cancelled one */
    char lease[NB_DB_LEASE_ID_MAX];
    snprintf(lease, sizeof lease, "%s", job.lease_id);
    nb_db_job_free(&job);
    assert_ok(nb_db_job_cancel(db, l, "superseded", &e_));
    nb_err err = {0};
    int64_t exp;
    assert_int_equal(nb_db_job_renew(db, l, lease, 1000, &exp, &err), NB_ECANCELED);
    assert_non_null(strstr(err.msg, "superseded"));
    nb_db_job_result res = {NB_JOB_DONE, NULL, NULL, 0};
    assert_int_equal(nb_db_job_complete(db, l, lease, &res, NULL, NULL, &err), NB_ECANCELED);
    assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 10000, &job, &found, &e_));
    assert_false(found);

    int64_t d = enqueue(db, NULL, "bench", 0, NULL);
    assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 10000, &job, &found, &e_));
    assert_ok(nb_db_job_complete(db, d, job.lease_id, &res, NULL, NULL, &e_));
    nb_db_job_free(&job);
    assert_int_equal(nb_db_job_cancel(db, d, "late", &err), NB_EMISMATCH);
    assert_int_equal(nb_db_job_cancel(db, 4242, "none", &err), NB_ENOTFOUND);

    nb_db_job *list;
    size_t n;
    nb_db_job_filter f = {.states = NB_JOB_STATE_BIT(NB_JOB_CANCELLED), .oldest_first = 1};
    assert_ok(nb_db_job_list(db, &f, &list, &n, &e_));
    assert_int_equal(n, 2);
    assert_int_equal(list[0].id, q);
    assert_int_equal(list[1].id, l);
    assert_null(list[0].spec);
    nb_db_job_list_free(list, n);
    close_db(db);
}

static void test_groups(void **state)
{
    (void)state;
    nb_db *db = fresh_db("groups");
    nb_db_job_new g = {0};
    g.kind = "matrix";
    g.is_group = 1;
    g.request_id = "matrix-1";
    int64_t gid, kids[3];
    assert_ok(nb_db_begin(db, &e_));
    assert_ok(nb_db_job_enqueue(db, &g, &gid, NULL, &e_));
    for (int i = 0; i < 3; i++) {
        nb_db_job_new c = {0};
        c.kind = "bench";
        c.parent_id = gid;
        assert_ok(nb_db_job_enqueue(db, &c, &kids[i], NULL, &e_));
    }
    assert_ok(nb_db_commit(db, &e_));

    nb_db_job job;
    assert_ok(nb_db_job_get(db, gid, &job, &e_));
    assert_int_equal(job.state, NB_JOB_RUNNING);
    assert_int_equal(job.progress_total, 3);
    nb_db_job_free(&job);

    nb_db_worker w = make_worker("w1", "b", "cpu", "", "");
    nb_db_job_result ok = {NB_JOB_DONE, NULL, NULL, 0};
    for (int i = 0; i < 2; i++) {
        int found;
        assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 10000, &job, &found, &e_));
        assert_true(found);
        assert_int_equal(job.id, kids[i]); /* the group itself is never leased */
        assert_ok(nb_db_job_complete(db, job.id, job.lease_id, &ok, NULL, NULL, &e_));
        nb_db_job_free(&job);
    }
    assert_ok(nb_db_job_get(db, gid, &job, &e_));
    assert_int_equal(job.state, NB_JOB_RUNNING);
    assert_int_equal(job.progress_done, 2);
    nb_db_job_free(&job);
    int found;
    assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 10000, &job, &found, &e_));
    nb_db_job_result bad = {NB_JOB_FAILED, "device lost", NULL, 0};
    assert_ok(nb_db_job_complete(db, job.id, job.lease_id, &bad, NULL, NULL, &e_));
    nb_db_job_free(&job);
    assert_ok(nb_db_job_get(db, gid, &job, &e_));
    assert_int_equal(job.state, NB_JOB_FAILED);
    assert_string_equal(job.error, "1 of 3 children failed");
    nb_db_job_free(&job);

    /* Cancelling a group cancels what has not finished, and the group. */
    int64_t g2, k2[2];
    g.request_id = "matrix-2";
    assert_ok(nb_db_job_enqueue(db, &g, &g2, NULL, &e_));
    for (int i = 0; i < 2; i++) {
        nb_db_job_new c = {0};
        c.kind = "bench";
        c.parent_id = g2;
        assert_ok(nb_db_job_enqueue(db, &c, &k2[i], NULL, &e_));
    }
    assert_ok(nb_db_job_cancel(db, g2, "stop the matrix", &e_));
    for (int i = 0; i < 2; i++) {
        assert_ok(nb_db_job_get(db, k2[i], &job, &e_));
        assert_int_equal(job.state, NB_JOB_CANCELLED);
        nb_db_job_free(&job);
    }
    assert_ok(nb_db_job_get(db, g2, &job, &e_));
    assert_int_equal(job.state, NB_JOB_CANCELLED);
    nb_db_job_free(&job);
    nb_db_job_filter f = {.parent_id = g2};
    nb_db_job *list;
    size_t n;
    assert_ok(nb_db_job_list(db, &f, &list, &n, &e_));
    assert_int_equal(n, 2);
    nb_db_job_list_free(list, n);
    f = (nb_db_job_filter){.parent_id = -1};
    assert_ok(nb_db_job_list(db, &f, &list, &n, &e_));
    assert_int_equal(n, 2); /* the two groups */
    nb_db_job_list_free(list, n);
    /* Children cannot join a finished group or a non-group. */
    nb_db_job_new c = {0};
    c.kind = "bench";
    c.parent_id = g2;
    int64_t x;
    nb_err err;
    assert_int_equal(nb_db_job_enqueue(db, &c, &x, NULL, &err), NB_EINVAL);
    c.parent_id = kids[0];
    assert_int_equal(nb_db_job_enqueue(db, &c, &x, NULL, &err), NB_EINVAL);
    close_db(db);
}

static void test_progress_and_log(void **state)
{
    (void)state;
    nb_db *db = fresh_db("progress");
    int64_t id = enqueue(db, NULL, "bench", 0, NULL);
    nb_db_worker w = make_worker("w1", "b", "cpu", "", "");
    nb_db_job job;
    int found;
    assert_ok(nb_db_job_lease(db, &w, NULL, NULL, 10000, &job, &found, &e_));
    char lease[NB_DB_LEASE_ID_MAX];
    snprintf(lease, sizeof lease, "%s", job.lease_id);
    nb_db_job_free(&job);
    assert_ok(nb_db_job_set_progress(db, id, lease, 3, 10, "rep 3/10", &e_));
    assert_ok(nb_db_job_append_log(db, id, "loading model", &e_));
    assert_ok(nb_db_job_append_log(db, id, "warmup done\n", &e_));
    assert_ok(nb_db_job_get(db, id, &job, &e_));
    assert_int_equal(job.state, NB_JOB_RUNNING);
    assert_true(job.started_ms > 0);
    assert_int_equal(job.progress_done, 3);
    assert_int_equal(job.progress_total, 10);
    assert_string_equal(job.progress_msg, "rep 3/10");
    const char *a = strstr(job.log, "loading model\n");
    const char *b = strstr(job.log, "warmup done\n");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    assert_null(strstr(job.log, "warmup done\n\n"));
    nb_db_job_free(&job);
    nb_err err;
    assert_int_equal(nb_db_job_set_progress(db, id, "not-the-lease", 4, 10, "", &err),
                     NB_EMISMATCH);
    assert_int_equal(nb_db_job_append_log(db, 999, "x", &err), NB_ENOTFOUND);

    /* The log is capped keeping its newest lines (a live log's end, the result line), the
     * oldest dropped and counted by a first line; it kept the oldest and dropped the end. */
    size_t big = 1u << 20;
    char *chunk = malloc(big + 1);
    assert_non_null(chunk);
    memset(chunk, 'x', big);
    chunk[big] = '\0';
    for (int i = 0; i < 9; i++)
        assert_ok(nb_db_job_append_log(db, id, chunk, &e_));
    assert_ok(nb_db_job_append_log(db, id, "after the cap", &e_));
    assert_ok(nb_db_job_get(db, id, &job, &e_));
    assert_true(strlen(job.log) <= NB_DB_JOB_LOG_MAX);
    assert_null(strstr(job.log, "warmup done")); /* the oldest went */
    long long lines = 0, bytes = 0;
    /* the first line (after its time stamp) */
    const char *mark = strstr(job.log, "[log trimmed: ");
    assert_non_null(mark);
    assert_true(mark < strchr(job.log, '\n'));
    assert_int_equal(sscanf(mark, "[log trimmed: %lld earlier lines (%lld bytes) dropped, "
                                     "the newest kept]\n", &lines, &bytes), 2);
    assert_true(lines >= 5 && bytes >= 5 * (long long)big);
    size_t len = strlen(job.log);
    assert_string_equal(job.log + len - strlen("after the cap\n"), "after the cap\n");
    nb_db_job_free(&job);
    /* a second trim adds to the first's counts, the marker still first, the sizes still true */
    for (int i = 0; i < 6; i++)
        assert_ok(nb_db_job_append_log(db, id, chunk, &e_));
    assert_ok(nb_db_job_append_log(db, id, "the end", &e_));
    free(chunk);
    assert_ok(nb_db_job_get(db, id, &job, &e_));
    assert_true(strlen(job.log) <= NB_DB_JOB_LOG_MAX);
    long long lines2 = 0, bytes2 = 0;
    mark = strstr(job.log, "[log trimmed: ");
    assert_non_null(mark);
    assert_true(mark < strchr(job.log, '\n'));
    assert_int_equal(sscanf(mark, "[log trimmed: %lld earlier lines (%lld bytes)", &lines2,
                            &bytes2), 2);
    assert_true(lines2 > lines && bytes2 > bytes);
    assert_null(strstr(mark + 1, "[log trimmed: "));
    assert_non_null(strstr(job.log, "the end\n"));
    nb_db_job_free(&job);

    nb_db_job_filter f = {.states = NB_JOB_STATE_BIT(NB_JOB_RUNNING), .kind = "bench",
                          .worker = "w1"};
    nb_db_job *list;
    size_t n;
    assert_ok(nb_db_job_list(db, &f, &list, &n, &e_));
    assert_int_equal(n, 1);
    assert_int_equal(list[0].id, id);
    nb_db_job_list_free(list, n);
    f.kind = "verify";
    assert_ok(nb_db_job_list(db, &f, &list, &n, &e_));
    assert_int_equal(n, 0);
    nb_db_job_list_free(list, n);
    close_db(db);
}

typedef struct lease_thread {
    const char *path;
    nb_db *shared; /* NULL: the thread opens its own connection */
    char worker[16];
    int64_t got[200];
    size_t n;
    nb_code rc;
    char msg[NB_ERR_MSG_MAX];
} lease_thread;

static void *lease_loop(void *arg)
{
    lease_thread *t = arg;
    nb_db *db = NULL;
    nb_err err = {0};
    nb_db_opts o = {.busy_timeout_ms = 60000};
    if (t->shared)
        db = t->shared;
    else
        t->rc = nb_db_open(t->path, &o, &db, &err);
    nb_db_worker w = make_worker(t->worker, "b", "cpu", "", "");
    while (!t->rc && t->n < 200) {
        nb_db_job job;
        int found = 0;
        t->rc = nb_db_job_lease(db, &w, NULL, NULL, 60000, &job, &found, &err);
        if (t->rc || !found)
            break;
        t->got[t->n++] = job.id;
        nb_db_job_free(&job);
    }
    if (t->rc)
        snprintf(t->msg, sizeof t->msg, "%s", err.msg);
    if (!t->shared)
        nb_db_close(db);
    return NULL;
}

/* Threads racing for the queue, each on its own connection (as separate
 * processes would be) or all on one shared handle: every job is leased
 * exactly once. */
static void race(int shared)
{
    nb_db *db = fresh_db(shared ? "race_shared" : "race");
    enum { N_JOBS = 120, N_THREADS = 4 };
    assert_ok(nb_db_begin(db, &e_));
    for (int i = 0; i < N_JOBS; i++)
        enqueue(db, NULL, "bench", i % 3, NULL);
    assert_ok(nb_db_commit(db, &e_));
    lease_thread t[N_THREADS];
    pthread_t th[N_THREADS];
    memset(t, 0, sizeof t);
    for (int i = 0; i < N_THREADS; i++) {
        t[i].path = nb_db_path(db);
        t[i].shared = shared ? db : NULL;
        snprintf(t[i].worker, sizeof t[i].worker, "w%d", i);
        assert_int_equal(pthread_create(&th[i], NULL, lease_loop, &t[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    int seen[N_JOBS + 1];
    memset(seen, 0, sizeof seen);
    size_t total = 0;
    for (int i = 0; i < N_THREADS; i++) {
        if (t[i].rc)
            fail_msg("thread %d: %s: %s", i, nb_code_name(t[i].rc), t[i].msg);
        for (size_t k = 0; k < t[i].n; k++) {
            assert_in_range(t[i].got[k], 1, N_JOBS);
            seen[t[i].got[k]]++;
        }
        total += t[i].n;
    }
    assert_int_equal(total, N_JOBS);
    for (int j = 1; j <= N_JOBS; j++)
        assert_int_equal(seen[j], 1);
    close_db(db);
}

static void test_concurrent_lease(void **state)
{
    (void)state;
    race(0);
    race(1);
}

/* ---- runs ---- */

static void test_run_roundtrip(void **state)
{
    (void)state;
    nb_db *db = fresh_db("roundtrip");
    int64_t dep = add_deployment(db, "SmolLM2-135M-Instruct", "cpu", "q4_1", "x86-01");
    nb_db_sample s[2] = {{0, {120.5, 41.0, 24.4, 24.9}}, {1, {119.5, NAN, 24.2, 24.7}}};
    nb_db_gate_check g[2] = {
        {0, "The capital of France is", 32, -1, 12, 12, " Paris", " Paris", 0, 0,
         "[[12,0.9]]", "[[12,0.91]]", 32, "PASS", NULL, NULL, NULL,
         "{\"status\":\"fault\",\"first_bad_step\":1}", "fault"},
        {1, "Once upon a time", 32, 17, 345, 678, " a", " the", 1, 2, "[]", "[]", 17, "FAIL",
         "top-1 differs at step 17 beyond tolerance", "{\"verdict\":\"layer\"}", "layer", NULL,
         NULL},
    };
    nb_db_layer_cosine c[2] = {{0, 0.9991, 0.9995, 0.99991, 0.99987, 0.0123},
                               {1, 0.998, 0.999, 0.9998, 0.9997, 0.05}};
    nb_db_profile_entry ph[2] = {{"prefill", 1, 118.0, 118.0}, {"decode", 31, 760.0, 24.5}};
    nb_db_profile_entry kn[1] = {{"matmul_q4_1", 930, 650.0, 0.699}};
    nb_db_kv tc[2] = {{"gcc", "12.2.0"}, {"sqlite", "3.40.1"}};
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = dep;
    r.worker_id = "w-cpu-1";
    r.kind = "verify";
    r.outcome = NB_OUTCOME_FAIL;
    r.started_ms = 1710000000000LL;
    r.finished_ms = 1710000005000LL;
    r.value[NB_METRIC_TTFT] = 120.0;
    r.value[NB_METRIC_TPS] = 41.0;
    r.mean[NB_METRIC_TTFT] = 120.0;
    r.stddev[NB_METRIC_TTFT] = 0.7071;
    r.prompt_tokens = 6;
    r.generated_tokens = 32;
    r.reps = 2;
    r.env.npubench_commit = "abc123def456";
    r.env.board = "x86-01";
    r.env.cpu_info = "AMD Ryzen 9 7940HS";
    r.env.backend = "cpu";
    r.env.dtype = "q4_1";
    r.env.threads = 8;
    r.env.model_digest = "b179c952";
    r.report_json = "{\"ok\":false}";
    r.regression = 1;
    r.regression_detail = "tps -12%";
    r.source = NB_SOURCE_LOCAL;
    r.samples = s;
    r.n_samples = 2;
    r.gate_checks = g;
    r.n_gate_checks = 2;
    r.cosines = c;
    r.n_cosines = 2;
    r.phases = ph;
    r.n_phases = 2;
    r.kernels = kn;
    r.n_kernels = 1;
    r.toolchain = tc;
    r.n_toolchain = 2;
    int64_t id;
    assert_ok(nb_db_run_insert(db, &r, &id, &e_));

    nb_db_run o;
    assert_ok(nb_db_run_get(db, id, &o, &e_));
    assert_int_equal(o.id, id);
    assert_int_equal(o.job_id, 0);
    assert_string_equal(o.kind, "verify");
    assert_int_equal(o.outcome, NB_OUTCOME_FAIL);
    assert_int_equal(o.finished_ms, r.finished_ms);
    assert_close(o.value[NB_METRIC_TTFT], 120.0, 0);
    assert_true(isnan(o.value[NB_METRIC_DECODE]));
    assert_close(o.stddev[NB_METRIC_TTFT], 0.7071, 0);
    assert_int_equal(o.context_len, -1);
    assert_int_equal(o.env.threads, 8);
    assert_string_equal(o.env.cpu_info, "AMD Ryzen 9 7940HS");
    assert_null(o.env.npu_info);
    assert_int_equal(o.regression, 1);
    assert_int_equal(o.source, NB_SOURCE_LOCAL);
    assert_int_equal(o.n_samples, 2);
    assert_true(isnan(o.samples[1].v[NB_METRIC_TPS]));
    assert_close(o.samples[1].v[NB_METRIC_TTFT], 119.5, 0);
    assert_int_equal(o.n_gate_checks, 2);
    assert_int_equal(o.gate_checks[0].divergence_step, -1);
    assert_int_equal(o.gate_checks[1].divergence_step, 17);
    assert_string_equal(o.gate_checks[1].ref_text, " the");
    assert_string_equal(o.gate_checks[1].status, "FAIL");
    assert_null(o.gate_checks[0].reason);
    assert_null(o.gate_checks[0].localization_json); /* schema 6: none when none was made */
    assert_string_equal(o.gate_checks[1].localization_json, "{\"verdict\":\"layer\"}");
    assert_string_equal(o.gate_checks[1].localization_verdict, "layer");
    /* schema 8: a PASS with a decode-path defect keeps both; none when none was made */
    assert_string_equal(o.gate_checks[0].decode_status, "fault");
    assert_non_null(strstr(o.gate_checks[0].decode_check_json, "\"first_bad_step\":1"));
    assert_null(o.gate_checks[1].decode_check_json);
    assert_null(o.gate_checks[1].decode_status);
    assert_int_equal(o.n_cosines, 2);
    assert_close(o.cosines[1].max_abs, 0.05, 0);
    assert_int_equal(o.n_phases, 2);
    assert_string_equal(o.phases[1].name, "decode");
    assert_int_equal(o.n_kernels, 1);
    assert_int_equal(o.kernels[0].calls, 930);
    assert_int_equal(o.n_toolchain, 2);
    assert_string_equal(o.toolchain[0].key, "gcc");
    nb_db_run_free(&o);

    /* Duplicate detail keys fail the whole insert. */
    nb_db_sample dups[2] = {{0, {1, 2, 3, 4}}, {0, {1, 2, 3, 4}}};
    r.samples = dups;
    nb_err err = {0};
    int64_t id2;
    assert_int_equal(nb_db_run_insert(db, &r, &id2, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "samples[1]"));
    assert_int_equal(sql_int(nb_db_path(db), "SELECT count(*) FROM runs"), 1);
    r.samples = s;
    r.kind = NULL;
    assert_int_equal(nb_db_run_insert(db, &r, &id2, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "run.kind"));
    r.kind = "verify";
    r.external_id = "ext-1";
    assert_ok(nb_db_run_insert(db, &r, &id2, &e_));
    assert_int_equal(nb_db_run_insert(db, &r, &id2, &err), NB_EMISMATCH);
    int64_t fid;
    assert_ok(nb_db_run_find_external(db, "ext-1", &fid, &e_));
    assert_int_equal(fid, id2);
    assert_int_equal(nb_db_run_get(db, 777, &o, &err), NB_ENOTFOUND);
    assert_ok(nb_db_run_set_regression(db, id, 0, NULL, &e_));
    assert_ok(nb_db_run_get(db, id, &o, &e_));
    assert_int_equal(o.regression, 0);
    assert_null(o.regression_detail);
    nb_db_run_free(&o);
    close_db(db);
}

static void test_history(void **state)
{
    (void)state;
    nb_db *db = fresh_db("history");
    int64_t a = add_deployment(db, "llama", "npu", "bf16", "strix-01");
    int64_t b = add_deployment(db, "llama", "npu", "bf16", "phoenix-01");
    int64_t c = add_deployment(db, "qwen", "npu", "bf16", "strix-01");
    int64_t a_cpu = add_deployment(db, "llama", "cpu", "q4_1", "strix-01");
    const int64_t day = 86400000LL, t0 = 1735689600000LL; /* 2025-01-01 */
    int64_t ra[10];
    for (int i = 0; i < 10; i++)
        ra[i] = add_run(db, a, t0 + i * day, 18.0 + i * 0.1, 400 - i,
                        i == 7 ? NB_OUTCOME_FAIL : NB_OUTCOME_PASS);
    for (int i = 0; i < 4; i++)
        add_run(db, b, t0 + i * day + 1, 11.0, 650, NB_OUTCOME_PASS);
    add_run(db, c, t0 + 5 * day, 33.0, 200, NB_OUTCOME_PASS);
    add_run(db, a_cpu, t0 + 6 * day, 40.0, 120, NB_OUTCOME_PASS);
    add_run(db, a, t0 + 11 * day, NAN, NAN, NB_OUTCOME_ERROR); /* no metrics */

    nb_db_history_query q = {.model = "llama", .board = "strix-01", .metric = NB_METRIC_TPS,
                             .since_ms = t0 + 3 * day, .limit = 100};
    nb_db_history_row *rows;
    size_t n;
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    /* strix-01 llama: npu runs 3..9 and the cpu run; the metric-less run is skipped */
    assert_int_equal(n, 8);
    for (size_t i = 1; i < n; i++)
        assert_true(rows[i - 1].started_ms >= rows[i].started_ms);
    assert_int_equal(rows[0].run_id, ra[9]);
    assert_close(rows[0].value, 18.9, 1e-9);
    assert_string_equal(rows[0].board, "strix-01");
    assert_string_equal(rows[0].model, "llama");
    free(rows);

    q.backend = "npu";
    q.limit = 3;
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 3);
    assert_int_equal(rows[0].run_id, ra[9]);
    assert_int_equal(rows[2].run_id, ra[7]);
    assert_string_equal(rows[2].backend, "npu");
    free(rows);

    q = (nb_db_history_query){.model = "llama", .board = "strix-01", .backend = "npu",
                              .metric = NB_METRIC_GATE};
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 10); /* ERROR runs have no gate result */
    assert_close(rows[2].value, 0.0, 0); /* run 7 failed */
    assert_int_equal(rows[2].outcome, NB_OUTCOME_FAIL);
    assert_close(rows[0].value, 1.0, 0);
    free(rows);

    q = (nb_db_history_query){.dtype = "bf16", .metric = NB_METRIC_TTFT};
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 15);
    free(rows);

    assert_ok(nb_db_runs_last(db, a, NB_METRIC_TPS, 4, &rows, &n, &e_));
    assert_int_equal(n, 4);
    assert_int_equal(rows[0].run_id, ra[9]);
    assert_int_equal(rows[3].run_id, ra[6]);
    free(rows);

    nb_db_board_summary *bs;
    q = (nb_db_history_query){.model = "llama", .metric = NB_METRIC_TPS};
    assert_ok(nb_db_history_by_board(db, &q, &bs, &n, &e_));
    assert_int_equal(n, 2);
    assert_string_equal(bs[0].board, "phoenix-01");
    assert_int_equal(bs[0].n_runs, 4);
    assert_close(bs[0].mean, 11.0, 1e-12);
    assert_string_equal(bs[1].board, "strix-01");
    assert_int_equal(bs[1].n_runs, 11);
    assert_close(bs[1].max, 40.0, 0);
    assert_close(bs[1].min, 18.0, 1e-12);
    assert_int_equal(bs[1].last_ms, t0 + 9 * day);
    free(bs);

    nb_db_metric m;
    assert_ok(nb_db_metric_parse("decode_ms_per_token", &m, &e_));
    assert_int_equal(m, NB_METRIC_DECODE);
    nb_err err;
    assert_int_equal(nb_db_metric_parse("speed", &m, &err), NB_EINVAL);
    q.limit = NB_DB_HISTORY_MAX + 1;
    assert_int_equal(nb_db_history(db, &q, &rows, &n, &err), NB_EINVAL);
    close_db(db);
}

/* history --until, --commit, --toolchain: a bound excludes its own instant, a commit and a
 * toolchain value select by prefix, a bare toolchain value matches any entry or the commit. */
static void test_history_filters(void **state)
{
    (void)state;
    nb_db *db = fresh_db("history-filters");
    int64_t d = add_deployment(db, "llama", "npu", "bf16", "strix-01");
    const int64_t day = 86400000LL, t0 = 1735689600000LL;
    static const char *const commits[3] = {"abc1234def", "abc9999000", "fed0000111"};
    static const char *const air[3] = {"5d0e8c1b", "5d0e8c1b", "e972f294"};
    int64_t ids[3];
    for (int i = 0; i < 3; i++) {
        nb_db_run r;
        nb_db_run_init(&r);
        r.deployment_id = d;
        r.kind = "bench";
        r.started_ms = t0 + i * day;
        r.value[NB_METRIC_TPS] = 10 + i;
        r.source = NB_SOURCE_SERVICE;
        r.env.npubench_commit = commits[i];
        nb_db_kv tc[2] = {{"air_sha", air[i]}, {"compiler", i == 2 ? "gcc 14.2" : "gcc 12.2"}};
        r.toolchain = tc;
        r.n_toolchain = 2;
        assert_ok(nb_db_run_insert(db, &r, &ids[i], &e_));
    }
    struct {
        nb_db_history_query q;
        size_t n;
        int64_t newest;
    } cases[] = {
        {{.until_ms = t0 + day}, 1, ids[0]},           /* before day 1: run 0 only */
        {{.until_ms = t0 + 2 * day + 1}, 3, ids[2]},
        {{.since_ms = t0 + day, .until_ms = t0 + 2 * day}, 1, ids[1]},
        {{.commit = "abc"}, 2, ids[1]},
        {{.commit = "abc1234def"}, 1, ids[0]},
        {{.commit = "abc12345"}, 0, 0},                /* longer than any commit it prefixes */
        {{.toolchain = "air_sha=5d0e"}, 2, ids[1]},
        {{.toolchain = "air_sha=e972"}, 1, ids[2]},
        {{.toolchain = "compiler=gcc 14"}, 1, ids[2]},
        {{.toolchain = "compiler=5d0e"}, 0, 0},        /* the value under another key */
        {{.toolchain = "gcc 12"}, 2, ids[1]},          /* bare: any entry */
        {{.toolchain = "fed0"}, 1, ids[2]},            /* bare: the commit too */
        {{.toolchain = "air_sha=5d0e", .commit = "abc9"}, 1, ids[1]},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        nb_db_history_query q = cases[i].q;
        q.metric = NB_METRIC_TPS;
        nb_db_history_row *rows;
        size_t n;
        assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
        if (n != cases[i].n)
            fail_msg("case %zu: %zu rows, expected %zu", i, n, cases[i].n);
        if (n)
            assert_int_equal(rows[0].run_id, cases[i].newest);
        free(rows);
    }
    close_db(db);
}

/* ---- statistics ---- */

/* Expected values come from scipy 1.17.1 (pip-installed into a scratch
 * directory, run with the project venv's Python 3.11):
 *   scipy.stats.mannwhitneyu(x, y, alternative='two-sided', method='exact'|'asymptotic')
 * and, for the tied sample, from enumerating all C(11, 6) = 462 splits of the
 * pooled midranks in Python (scipy's 'exact' ignores ties). */
static void test_mann_whitney_known_values(void **state)
{
    (void)state;
    const double x1[] = {1.1, 2.3, 3.5, 4.0, 5.2}, y1[] = {2.0, 6.1, 7.3, 8.4, 9.9, 10.5};
    nb_stats_mwu r;
    assert_ok(nb_stats_mann_whitney(x1, 5, y1, 6, NB_MWU_EXACT, &r, &e_));
    assert_close(r.u, 4.0, 0);
    assert_close(r.p, 0.051948051948051951, 1e-14);
    assert_true(r.exact);
    assert_ok(nb_stats_mann_whitney(x1, 5, y1, 6, NB_MWU_ASYMPTOTIC, &r, &e_));
    assert_close(r.p, 0.055234253718063828, 1e-12);
    assert_false(r.exact);
    assert_ok(nb_stats_mann_whitney(x1, 5, y1, 6, NB_MWU_AUTO, &r, &e_));
    assert_true(r.exact);

    const double x2[] = {1, 2, 2, 3, 3, 3}, y2[] = {2, 3, 4, 4, 5};
    assert_ok(nb_stats_mann_whitney(x2, 6, y2, 5, NB_MWU_EXACT, &r, &e_));
    assert_close(r.u, 5.5, 0);
    assert_close(r.p, 0.10822510822510822, 1e-14); /* 50 of 462 splits */
    assert_ok(nb_stats_mann_whitney(x2, 6, y2, 5, NB_MWU_ASYMPTOTIC, &r, &e_));
    assert_close(r.p, 0.088713691996776159, 1e-12);

    double x3[10], y3[10];
    for (int i = 0; i < 10; i++) {
        x3[i] = i;
        y3[i] = 10 + i;
    }
    assert_ok(nb_stats_mann_whitney(x3, 10, y3, 10, NB_MWU_EXACT, &r, &e_));
    assert_close(r.u, 0, 0);
    assert_close(r.p, 1.082508822446903e-05, 1e-17); /* 2 / C(20, 10) */
    assert_ok(nb_stats_mann_whitney(x3, 10, y3, 10, NB_MWU_ASYMPTOTIC, &r, &e_));
    assert_close(r.p, 0.00018267179110955002, 1e-15);

    /* 20 vs 20, no ties: the largest exact case. */
    const double x20[] = {50.002, 50.597, 49.452, 48.219, 49.091, 48.017, 50.12,
                          52.68,  49.016, 48.759, 50.98,  50.714, 50.211, 48.139,
                          49.941, 51.391, 47.312, 49.085, 46.198, 47.421};
    const double y20[] = {48.317, 51.53,  49.465, 52.543, 52.314, 51.626, 46.966,
                          50.923, 51.903, 52.227, 48.94,  51.044, 50.043, 50.382,
                          54.122, 50.385, 51.935, 53.769, 50.833, 51.777};
    assert_ok(nb_stats_mann_whitney(x20, 20, y20, 20, NB_MWU_AUTO, &r, &e_));
    assert_true(r.exact);
    assert_close(r.u, 88.0, 0);
    assert_close(r.p, 0.0019571244942430312, 1e-14);
    assert_ok(nb_stats_mann_whitney(x20, 20, y20, 20, NB_MWU_ASYMPTOTIC, &r, &e_));
    assert_close(r.p, 0.0025606152871445872, 1e-12);
    assert_close(nb_stats_mean(x20, 20), 49.36725, 1e-12);
    assert_close(nb_stats_stddev(x20, 20), 1.5622242535631854, 1e-12);
    assert_close(nb_stats_median(x20, 20), 49.2715, 1e-12);

    /* 25 vs 30 with ties: beyond the exact limit, AUTO is asymptotic. */
    double x25[25], y30[30];
    for (int i = 0; i < 25; i++)
        x25[i] = 100 + ((i * 37) % 23) * 0.5;
    for (int i = 0; i < 30; i++)
        y30[i] = 103 + ((i * 53) % 29) * 0.5;
    assert_ok(nb_stats_mann_whitney(x25, 25, y30, 30, NB_MWU_AUTO, &r, &e_));
    assert_false(r.exact);
    assert_close(r.u, 170.5, 0);
    assert_close(r.p, 0.00056116189238418913, 1e-14);
    nb_err err;
    assert_int_equal(nb_stats_mann_whitney(x25, 25, y30, 30, NB_MWU_EXACT, &r, &err),
                     NB_EINVAL);
    assert_int_equal(nb_stats_mann_whitney(x25, 0, y30, 30, NB_MWU_AUTO, &r, &err), NB_EINVAL);
    const double withnan[] = {1, NAN};
    assert_int_equal(nb_stats_mann_whitney(withnan, 2, y30, 3, NB_MWU_AUTO, &r, &err),
                     NB_EINVAL);
    /* All equal: no evidence. */
    const double same[] = {5, 5, 5};
    assert_ok(nb_stats_mann_whitney(same, 3, same, 3, NB_MWU_ASYMPTOTIC, &r, &e_));
    assert_close(r.p, 1.0, 0);
    assert_ok(nb_stats_mann_whitney(same, 3, same, 3, NB_MWU_EXACT, &r, &e_));
    assert_close(r.p, 1.0, 0);
    assert_true(isnan(nb_stats_stddev(same, 1)));
    assert_true(isnan(nb_stats_mean(same, 0)));
    assert_close(nb_stats_median(x2, 6), 2.5, 0);
}

/* 10 samples at v (a hair of spread) against 10 at 100: complete separation, p ~ 1e-5. */
static int flagged(double v, const nb_stats_regression_params *p, int *improvement)
{
    double cur[10], base[10];
    for (int i = 0; i < 10; i++) {
        base[i] = 100.0 + (i - 4.5) * 1e-9; /* median exactly 100 */
        cur[i] = v + (i - 4.5) * 1e-9;      /* median exactly v */
    }
    nb_stats_regression_result r;
    assert_ok(nb_stats_regression(cur, 10, base, 10, p, &r, &e_));
    assert_true(r.p < 0.001);
    if (improvement)
        *improvement = r.improvement;
    return r.regression;
}

/* The threshold exactly: a change of exactly min_rel_change is not flagged (strictly more
 * is), just under is not, just over is, and so is 1.5x the minimum; for throughput (down is
 * worse) and latency (up is worse) alike, and the same boundary for an improvement. Then the
 * same through the database's check with the configured minimum. */
static void test_regression_threshold_boundaries(void **state)
{
    (void)state;
    nb_stats_regression_params tps = {0.05, 0.05, 1}, lat = {0.05, 0.05, 0};
    int imp;
    assert_false(flagged(95.0, &tps, &imp));    /* exactly -5% */
    assert_false(imp);
    assert_false(flagged(95.01, &tps, NULL));   /* just under */
    assert_true(flagged(94.99, &tps, NULL));    /* just over */
    assert_true(flagged(92.5, &tps, NULL));     /* 1.5x the minimum */
    assert_false(flagged(105.0, &lat, &imp));   /* exactly +5% on a latency */
    assert_false(flagged(104.99, &lat, NULL));
    assert_true(flagged(105.01, &lat, NULL));
    assert_true(flagged(107.5, &lat, NULL));
    /* improvements: the same boundary the other way */
    flagged(105.0, &tps, &imp);
    assert_false(imp);
    flagged(105.01, &tps, &imp);
    assert_true(imp);
    flagged(94.99, &lat, &imp);
    assert_true(imp);
    /* another minimum moves the boundary with it */
    nb_stats_regression_params ten = {0.10, 0.05, 1};
    assert_false(flagged(90.0, &ten, NULL));
    assert_true(flagged(89.99, &ten, NULL));
    assert_false(flagged(92.5, &ten, NULL));

    /* Through the database: a bench deployment's baseline at 100, new runs around it. */
    nb_db *db = fresh_db("regress-bound");
    int64_t dep = add_deployment(db, "llama", "npu", "bf16", "edge-01");
    const int64_t t0 = 1735689600000LL;
    for (int k = 0; k < 3; k++) {
        nb_db_sample smp[4];
        for (int i = 0; i < 4; i++) {
            smp[i].rep = i;
            for (int m = 0; m < NB_METRIC_N; m++)
                smp[i].v[m] = NAN;
            smp[i].v[NB_METRIC_TPS] = 100.0 + (k * 4 + i - 5.5) * 1e-9;
        }
        nb_db_run r0;
        nb_db_run_init(&r0);
        r0.deployment_id = dep;
        r0.kind = "bench";
        r0.outcome = NB_OUTCOME_PASS;
        r0.started_ms = t0 + k * 1000;
        r0.value[NB_METRIC_TPS] = 100.0;
        r0.samples = smp;
        r0.n_samples = 4;
        int64_t id;
        assert_ok(nb_db_run_insert(db, &r0, &id, &e_));
    }
    static const struct {
        double v;
        int want;
    } cases[] = {{95.0, 0}, {95.01, 0}, {94.99, 1}, {92.5, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        nb_db_sample cur[6];
        for (int i = 0; i < 6; i++) {
            cur[i].rep = i;
            for (int m = 0; m < NB_METRIC_N; m++)
                cur[i].v[m] = NAN;
            cur[i].v[NB_METRIC_TPS] = cases[c].v + (i - 2.5) * 1e-9;
        }
        nb_db_run nr;
        nb_db_run_init(&nr);
        nr.deployment_id = dep;
        nr.kind = "bench";
        nr.started_ms = t0 + 9000;
        nr.samples = cur;
        nr.n_samples = 6;
        nb_db_regression_report rep;
        nb_db_regression_opts opts = NB_DB_REGRESSION_OPTS_DEFAULT;
        assert_ok(nb_db_run_check_regression(db, &nr, &opts, &rep, &e_));
        if (rep.regression != cases[c].want)
            fail_msg("TPS %g against 100 (min %.2f): regression %d, expected %d (%s)",
                     cases[c].v, opts.min_rel_change, rep.regression, cases[c].want,
                     rep.detail);
    }
    nb_db_close(db);
}

static void test_regression_needs_both(void **state)
{
    (void)state;
    nb_stats_regression_params tps = {0.05, 0.05, 1};
    nb_stats_regression_result r;
    /* 20% slower but only 2 vs 2 samples: not significant (min p = 1/3). */
    const double big_new[] = {16.0, 16.1}, big_base[] = {20.0, 20.1};
    assert_ok(nb_stats_regression(big_new, 2, big_base, 2, &tps, &r, &e_));
    assert_true(r.rel_change < -0.19);
    assert_true(r.p >= 0.05);
    assert_false(r.regression);

    /* Significant (complete separation, 10 vs 10) but only 1% slower. */
    double small_new[10], small_base[10], big_new10[10];
    for (int i = 0; i < 10; i++) {
        small_base[i] = 20.0 + i * 0.001;
        small_new[i] = 19.8 + i * 0.001;
        big_new10[i] = 17.0 + i * 0.001;
    }
    assert_ok(nb_stats_regression(small_new, 10, small_base, 10, &tps, &r, &e_));
    assert_true(r.p < 0.001);
    assert_close(r.rel_change, (19.8045 - 20.0045) / 20.0045, 1e-12);
    assert_false(r.regression);

    /* Both: flagged, with the relative change and p reported. */
    assert_ok(nb_stats_regression(big_new10, 10, small_base, 10, &tps, &r, &e_));
    assert_true(r.regression);
    assert_false(r.improvement);
    assert_close(r.rel_change, (17.0045 - 20.0045) / 20.0045, 1e-12);
    assert_close(r.p, 1.082508822446903e-05, 1e-17);

    /* The same drop is an improvement for a latency. */
    nb_stats_regression_params lat = {0.05, 0.05, 0};
    assert_ok(nb_stats_regression(big_new10, 10, small_base, 10, &lat, &r, &e_));
    assert_false(r.regression);
    assert_true(r.improvement);
    assert_ok(nb_stats_regression(small_base, 10, big_new10, 10, &lat, &r, &e_));
    assert_true(r.regression);
    nb_err err;
    nb_stats_regression_params badp = {0.05, 1.5, 1};
    assert_int_equal(nb_stats_regression(big_new10, 10, small_base, 10, &badp, &r, &err),
                     NB_EINVAL);

    /* Through the database: baseline pooled from the deployment's last runs. */
    nb_db *db = fresh_db("regress");
    int64_t dep = add_deployment(db, "llama", "npu", "bf16", "strix-01");
    int64_t old = add_deployment(db, "llama", "npu", "bf16", "phoenix-01");
    const int64_t t0 = 1735689600000LL;
    for (int k = 0; k < 6; k++) {
        nb_db_sample s[3];
        for (int i = 0; i < 3; i++) {
            s[i].rep = i;
            for (int m = 0; m < NB_METRIC_N; m++)
                s[i].v[m] = NAN;
            s[i].v[NB_METRIC_TPS] = 20.0 + 0.01 * (k * 3 + i);
        }
        nb_db_run r0;
        nb_db_run_init(&r0);
        r0.deployment_id = dep;
        r0.kind = "bench";
        r0.outcome = NB_OUTCOME_PASS;
        r0.started_ms = t0 + k * 1000;
        r0.value[NB_METRIC_TPS] = 20.0 + 0.01 * (k * 3 + 1);
        r0.samples = s;
        r0.n_samples = 3;
        int64_t id;
        assert_ok(nb_db_run_insert(db, &r0, &id, &e_));
    }
    add_run(db, old, t0, 5.0, 900, NB_OUTCOME_PASS); /* another deployment: not pooled */
    add_run(db, dep, t0 + 7000, 20.5, NAN, NB_OUTCOME_PASS); /* no samples: its value */
    double *base;
    size_t nb;
    assert_ok(nb_db_runs_baseline(db, dep, NB_METRIC_TPS, 3, 0, &base, &nb, &e_));
    assert_int_equal(nb, 1 + 3 + 3); /* newest run's value, then two runs x 3 samples */
    assert_close(base[0], 20.5, 0);
    assert_close(base[1], 20.15, 1e-12);
    free(base);

    /* Other series of the same deployment, newer: a cold `run` and one context of a decode
     * sweep. Never the baseline of a bench run (nor of each other). */
    static const char *const other_kind[] = {"run", "sweep"};
    for (int k = 0; k < 2; k++) {
        nb_db_run o;
        nb_db_run_init(&o);
        o.deployment_id = dep;
        o.kind = other_kind[k];
        o.outcome = NB_OUTCOME_PASS;
        o.started_ms = t0 + 8000 + k;
        o.value[NB_METRIC_TPS] = k ? 5.77 : 10.82;
        o.context_len = k ? 131072 : -1;
        int64_t id;
        assert_ok(nb_db_run_insert(db, &o, &id, &e_));
    }
    nb_db_series bench = {.kind = "bench"};
    char shape[NB_DB_SERIES_MAX];
    nb_db_series_shape(&bench, shape, sizeof shape);
    assert_string_equal(shape, "bench|ctx=-|gen=-|prompt=-|threads=-");
    assert_ok(nb_db_runs_baseline_series(db, dep, shape, NB_METRIC_TPS, 3, 0, &base, &nb, &e_));
    assert_int_equal(nb, 1 + 3 + 3);
    assert_close(base[0], 20.5, 0);
    free(base);
    nb_db_series sweep = {"llama32_1b_q4nx", "npu", "q4nx", "b", "sweep", 131072, -1, 0, 0};
    char key[NB_DB_SERIES_MAX];
    assert_string_equal(nb_db_series_key(&sweep, key, sizeof key),
                        "llama32_1b_q4nx|npu|q4nx|b|sweep|ctx=131072|gen=-|prompt=-|threads=-");
    nb_db_series_shape(&sweep, shape, sizeof shape);
    assert_ok(nb_db_runs_baseline_series(db, dep, shape, NB_METRIC_TPS, 10, 0, &base, &nb, &e_));
    assert_int_equal(nb, 1);
    assert_close(base[0], 5.77, 0);
    free(base);
    assert_string_equal(nb_db_series_label(&sweep, key, sizeof key), "sweep, context 131072");

    nb_db_sample cur[5];
    for (int i = 0; i < 5; i++) {
        cur[i].rep = i;
        for (int m = 0; m < NB_METRIC_N; m++)
            cur[i].v[m] = NAN;
        cur[i].v[NB_METRIC_TPS] = 17.0 + 0.01 * i;
    }
    nb_db_run nr;
    nb_db_run_init(&nr);
    nr.deployment_id = dep;
    nr.kind = "bench";
    nr.started_ms = t0 + 9000;
    nr.samples = cur;
    nr.n_samples = 5;
    nb_db_regression_report rep;
    nb_db_regression_opts opts = NB_DB_REGRESSION_OPTS_DEFAULT;
    assert_ok(nb_db_run_check_regression(db, &nr, &opts, &rep, &e_));
    assert_true(rep.regression);
    assert_true(rep.checked[NB_METRIC_TPS]);
    assert_false(rep.checked[NB_METRIC_TTFT]);
    assert_int_equal(rep.m[NB_METRIC_TPS].n_base, 19);
    assert_true(rep.m[NB_METRIC_TPS].p < 0.001);
    assert_non_null(strstr(rep.detail, "tps -1"));
    /* Same numbers, within 5%: not a regression however significant. */
    for (int i = 0; i < 5; i++)
        cur[i].v[NB_METRIC_TPS] = 19.5 + 0.01 * i;
    assert_ok(nb_db_run_check_regression(db, &nr, NULL, &rep, &e_));
    assert_true(rep.m[NB_METRIC_TPS].p < 0.001);
    assert_false(rep.regression);
    assert_string_equal(rep.detail, "");
    /* A warm profile has no baseline here: no profile ran on this deployment before. */
    nr.kind = "profile";
    assert_ok(nb_db_run_check_regression(db, &nr, NULL, &rep, &e_));
    assert_false(rep.checked[NB_METRIC_TPS]);
    close_db(db);
}

/* ---- import ---- */

/* new -> acknowledged (who, why) -> fixed by a later run of the same series back in the band,
 * never by a run of another series; closed by a person; refusals; old databases migrated. */
static void test_regression_lifecycle(void **state)
{
    (void)state;
    nb_db *db = fresh_db("lifecycle");
    int64_t dep = add_deployment(db, "SmolLM2-135M-Instruct", "cpu", "q4_1", "b1");
    int64_t t0 = 1700000000000LL;
    int flag = 0;
    for (int i = 0; i < 8; i++) {
        tdb_checked_run(db, dep, t0 + i * 1000, 100.0 + (i % 3) * 0.3, 4, &flag);
        assert_false(flag);
    }
    nb_db_regression *list = NULL;
    size_t n = 0;
    assert_ok(nb_db_regress_list(db, 0, 100, &list, &n, &e_));
    assert_int_equal(n, 0);
    /* flagged: a regression, new, with the baseline's median and the band */
    int64_t slow = tdb_checked_run(db, dep, t0 + 10000, 70.0, 4, &flag);
    assert_true(flag);
    nb_db_regression g;
    assert_ok(nb_db_regress_of_run(db, slow, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_NEW);
    assert_string_equal(nb_db_regress_state_name(g.state), "new");
    assert_string_equal(g.series,
                        "SmolLM2-135M-Instruct|cpu|q4_1|b1|profile|ctx=-|gen=32|prompt=6|threads=4");
    assert_string_equal(g.model, "SmolLM2-135M-Instruct");
    assert_non_null(strstr(g.detail, "tps -30"));
    assert_int_equal(g.n_metrics, 1);
    assert_string_equal(g.metrics[0].metric, "tps");
    assert_true(fabs(g.metrics[0].base_median - 100.3) < 0.5);
    assert_true(fabs(g.metrics[0].band - 0.05) < 1e-12);
    assert_true(g.metrics[0].higher_is_better);
    int64_t gid = g.id;

    /* a person acknowledges it: who and why required */
    nb_err err;
    assert_int_equal(nb_db_regress_ack(db, gid, "lead", "", NULL, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "--note"));
    assert_int_equal(nb_db_regress_ack(db, gid, "", "x", NULL, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "--by"));
    assert_int_equal(nb_db_regress_ack(db, 999999, "lead", "x", NULL, &err), NB_ENOTFOUND);
    assert_ok(nb_db_regress_ack(db, gid, "lead", "driver 2.19 decode, LAB-12", &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_ACKNOWLEDGED);
    assert_string_equal(g.ack_by, "lead");
    assert_string_equal(g.ack_note, "driver 2.19 decode, LAB-12");
    assert_true(g.ack_ms > 0);

    /* back in the band, but another series (1 thread): not fixed */
    tdb_checked_run(db, dep, t0 + 11000, 100.0, 1, &flag);
    assert_ok(nb_db_regress_get(db, gid, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_ACKNOWLEDGED);
    /* the same series still slow (median 90, outside the band) but too spread for the check to
     * flag it (p ~ 0.09): not fixed, the band decides */
    {
        static const double spread[5] = {60, 88, 90, 92, 150};
        nb_db_sample smp[5];
        for (int i = 0; i < 5; i++) {
            smp[i].rep = i;
            for (int m = 0; m < NB_METRIC_N; m++)
                smp[i].v[m] = NAN;
            smp[i].v[NB_METRIC_TPS] = spread[i];
        }
        nb_db_run r;
        nb_db_run_init(&r);
        r.deployment_id = dep;
        r.kind = "profile";
        r.started_ms = t0 + 12000;
        r.generated_tokens = 32;
        r.prompt_tokens = 6;
        r.env.threads = 4;
        r.value[NB_METRIC_TPS] = 90;
        r.samples = smp;
        r.n_samples = 5;
        nb_db_regression_report rep;
        assert_ok(nb_db_run_check_regression(db, &r, NULL, &rep, &e_));
        assert_false(rep.regression);
        int64_t rid;
        assert_ok(nb_db_run_insert(db, &r, &rid, &e_));
    }
    assert_ok(nb_db_regress_get(db, gid, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_ACKNOWLEDGED);
    /* the same series back inside the band: fixed, by that run */
    int64_t good = tdb_checked_run(db, dep, t0 + 13000, 99.5, 4, &flag);
    assert_false(flag);
    assert_ok(nb_db_regress_get(db, gid, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_FIXED);
    assert_int_equal(g.fixed_run_id, good);
    assert_string_equal(g.fixed_by, "");
    assert_string_equal(g.ack_by, "lead"); /* the acknowledgement stays on record */
    /* nothing more to do on a fixed one */
    assert_int_equal(nb_db_regress_ack(db, gid, "lead", "again", NULL, &err), NB_EMISMATCH);
    assert_non_null(strstr(err.msg, "already fixed"));
    assert_int_equal(nb_db_regress_close(db, gid, "lead", "", NULL, &err), NB_EMISMATCH);

    /* another one, closed by a person */
    int64_t slow2 = tdb_checked_run(db, dep, t0 + 20000, 50.0, 4, &flag);
    assert_true(flag);
    assert_ok(nb_db_regress_of_run(db, slow2, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_NEW);
    assert_ok(nb_db_regress_close(db, g.id, "lead", "board replaced", &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_FIXED);
    assert_string_equal(g.fixed_by, "lead");
    assert_int_equal(g.fixed_run_id, 0);
    assert_ok(nb_db_regress_list(db, NB_REGRESS_STATE_BIT(NB_REGRESS_NEW) |
                                         NB_REGRESS_STATE_BIT(NB_REGRESS_ACKNOWLEDGED),
                                 100, &list, &n, &e_));
    assert_int_equal(n, 0); /* the 90 run, if flagged, was back in the band at 99.5 too */
    free(list);
    assert_ok(nb_db_regress_list(db, NB_REGRESS_STATE_BIT(NB_REGRESS_FIXED), 100, &list, &n,
                                 &e_));
    assert_true(n >= 2);
    assert_true(list[0].id > list[n - 1].id); /* newest first */
    free(list);
    nb_db_regress_state st;
    assert_int_equal(nb_db_regress_state_parse("--state", "open", &st, &err), NB_EINVAL);
    assert_non_null(strstr(err.msg, "new, acknowledged or fixed"));

    /* a database of the version before: its flagged runs become new regressions */
    db = rolled_back(db, "DROP TABLE regression_metrics; DROP TABLE regressions; "
                         "ALTER TABLE jobs DROP COLUMN sel_dtype_id; "
                         "DELETE FROM schema_version WHERE version >= 9");
    assert_ok(nb_db_regress_of_run(db, slow, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_NEW);
    assert_int_equal(g.n_metrics, 0);
    assert_string_equal(g.series,
                        "SmolLM2-135M-Instruct|cpu|q4_1|b1|profile|ctx=-|gen=32|prompt=6|threads=4");
    assert_int_equal(nb_db_regress_of_run(db, good, &g, &err), NB_ENOTFOUND);
    /* without the check's numbers, a later unflagged run of its series fixes it */
    tdb_checked_run(db, dep, t0 + 30000, 100.0, 1, &flag);
    assert_ok(nb_db_regress_of_run(db, slow, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_NEW);
    good = tdb_checked_run(db, dep, t0 + 31000, 100.0, 4, &flag);
    assert_false(flag);
    assert_ok(nb_db_regress_of_run(db, slow, &g, &e_));
    assert_int_equal(g.state, NB_REGRESS_FIXED);
    assert_int_equal(g.fixed_run_id, good);
    close_db(db);
}

/* A database written while Gemma's display name kept its quantisation tag
 * ("gemma-3-270m-q4_k_m", schema 10) is renamed once to "gemma-3-270m" when it opens: no run,
 * regression or reference is lost, a deployment already stored under the new name takes the
 * old one's runs, and the old name still resolves as an alias. Imported names stay as the
 * nightly wrote them. */
static void test_model_rename_migrated(void **state)
{
    (void)state;
    static const char OLD[] = "gemma-3-270m-q4_k_m", NEW[] = "gemma-3-270m";
    nb_db *db = fresh_db("rename");
    int64_t old_b1 = add_deployment(db, OLD, "cpu", "native", "b1");
    int64_t new_b1 = add_deployment(db, NEW, "cpu", "native", "b1");
    int64_t old_b2 = add_deployment(db, OLD, "cpu", "native", "b2");
    int64_t imp = add_deployment(db, "nightly-q4_0", "npu", "q4_0", "b1");
    int64_t t0 = 1700000000000LL;
    int flag = 0;
    for (int i = 0; i < 6; i++)
        tdb_checked_run(db, old_b1, t0 + i * 1000, 100.0 + (i % 3) * 0.3, 4, NULL);
    int64_t slow = tdb_checked_run(db, old_b1, t0 + 10000, 70.0, 4, &flag);
    assert_true(flag);
    add_run(db, new_b1, t0 + 20000, 99.0, 10.0, NB_OUTCOME_PASS);
    add_run(db, old_b2, t0 + 20000, 99.0, 10.0, NB_OUTCOME_PASS);
    nb_db_run r;
    nb_db_run_init(&r);
    r.deployment_id = imp;
    r.kind = "bench";
    r.outcome = NB_OUTCOME_PASS;
    r.started_ms = t0;
    r.source = NB_SOURCE_IMPORT;
    int64_t id = 0;
    assert_ok(nb_db_run_insert(db, &r, &id, &e_));
    assert_ok(nb_db_reference_set(db, old_b1, &e_));
    assert_ok(nb_db_alias_set(db, "Gemma 3 270m", OLD, "result", &e_));
    assert_ok(nb_db_alias_set(db, "gemma3", OLD, "deployments", &e_));
    char path[512];
    snprintf(path, sizeof path, "%s", nb_db_path(db));
    int64_t runs = sql_int(path, "SELECT count(*) FROM runs");
    assert_int_equal(runs, 10);

    db = rolled_back(db, "DELETE FROM schema_version WHERE version >= 11");
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs"), runs);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deployments WHERE model = "
                                   "'gemma-3-270m-q4_k_m'"),
                     0);
    nb_db_deployment d;
    nb_err err;
    assert_int_equal(nb_db_deployment_get(db, old_b1, &d, &err), NB_ENOTFOUND);
    assert_ok(nb_db_deployment_get(db, new_b1, &d, &e_));
    assert_string_equal(d.model, NEW);
    char q[160];
    snprintf(q, sizeof q, "SELECT count(*) FROM runs WHERE deployment_id = %lld",
             (long long)new_b1);
    assert_int_equal(sql_int(path, q), 8); /* its own and the old name's */
    assert_ok(nb_db_deployment_get(db, old_b2, &d, &e_));
    assert_string_equal(d.model, NEW); /* renamed in place */
    assert_ok(nb_db_deployment_get(db, imp, &d, &e_));
    assert_string_equal(d.model, "nightly-q4_0");
    /* the regression follows: its deployment and its series */
    nb_db_regression g;
    assert_ok(nb_db_regress_of_run(db, slow, &g, &e_));
    assert_int_equal(g.deployment_id, new_b1);
    assert_string_equal(g.series,
                        "gemma-3-270m|cpu|native|b1|profile|ctx=-|gen=32|prompt=6|threads=4");
    /* every name it had resolves to the new one, the old name included */
    static const char *const names[] = {OLD, "Gemma 3 270m", "gemma3", NEW};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char out[NB_DB_NAME_MAX];
        assert_ok(nb_db_alias_resolve(db, names[i], out, sizeof out, &e_));
        if (strcmp(out, NEW))
            fail_msg("'%s' resolves to '%s'", names[i], out);
    }
    assert_ok(nb_db_reference_get(db, NEW, &d, &e_));
    assert_int_equal(d.id, new_b1);
    assert_ok(nb_db_reference_get(db, OLD, &d, &e_));
    assert_int_equal(d.id, new_b1);
    close_db(db);
}

static void data_path(char *buf, size_t size, const char *name)
{
    const char *src = getenv("NB_SRC");
    snprintf(buf, size, "%s/tests/data/db/%s", src && *src ? src : NB_SOURCE_DIR, name);
}

/* Kept answers (nb_db_replay): found until they expire, whole (status, message, payload),
 * gone once pruned; ids above 2^63 survive SQLite's signed integers. */
static void test_replay_answers(void **state)
{
    (void)state;
    nb_db *db = fresh_db("replay");
    assert_ok(nb_db_replay_open(db, 1000, &e_));
    uint64_t id = 0xfedcba9876543210ull, key = 0x8000000000000001ull;
    const uint8_t pl[] = {1, 2, 0, 3};
    assert_ok(nb_db_replay_record(db, id, key, 5000, 6, "seen", pl, sizeof pl, &e_));
    int found = 0, status = 0;
    char msg[64];
    uint8_t *out = NULL;
    size_t len = 0;
    assert_ok(nb_db_replay_lookup(db, id, key, 4999, &found, &status, msg, sizeof msg, &out,
                                  &len, &e_));
    assert_int_equal(found, 1);
    assert_int_equal(status, 6);
    assert_string_equal(msg, "seen");
    assert_int_equal(len, sizeof pl);
    assert_memory_equal(out, pl, sizeof pl);
    free(out);
    assert_ok(nb_db_replay_lookup(db, id, key + 1, 4999, &found, &status, msg, sizeof msg, &out,
                                  &len, &e_));
    assert_int_equal(found, 0);
    assert_ok(nb_db_replay_lookup(db, id, key, 5000, &found, &status, msg, sizeof msg, &out,
                                  &len, &e_));
    assert_int_equal(found, 0); /* expired */
    assert_ok(nb_db_replay_prune(db, 5001, &e_));
    assert_ok(nb_db_replay_lookup(db, id, key, 0, &found, &status, msg, sizeof msg, &out, &len,
                                  &e_));
    assert_int_equal(found, 0); /* pruned */
    nb_db_close(db);
}

static void test_import(void **state)
{
    (void)state;
    nb_db *db = fresh_db("import");
    char p[1024];
    size_t ni = 0, ns = 0;

    data_path(p, sizeof p, "perf_single.json");
    assert_ok(nb_db_import_file(db, p, &ni, &ns, &e_));
    assert_int_equal(ni, 1);
    assert_int_equal(ns, 0);
    nb_db_history_query q = {.model = "Llama-3.2-1B-Instruct", .metric = NB_METRIC_TPS};
    nb_db_history_row *rows;
    size_t n;
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 1);
    assert_close(rows[0].value, 18.42, 1e-12);
    assert_int_equal(rows[0].started_ms, 1741944413000LL); /* 2025-03-14T09:26:53Z */
    assert_string_equal(rows[0].board, "npu-strix-01");
    assert_string_equal(rows[0].backend, "npu");
    assert_string_equal(rows[0].dtype, "bf16");
    assert_int_equal(rows[0].source, NB_SOURCE_IMPORT);
    assert_int_equal(rows[0].outcome, NB_OUTCOME_PASS);
    nb_db_run run;
    assert_ok(nb_db_run_get(db, rows[0].run_id, &run, &e_));
    free(rows);
    assert_int_equal(run.context_len, 2048);
    assert_int_equal(run.generated_tokens, 128);
    assert_close(run.value[NB_METRIC_TTFT], 412.7, 1e-12);
    assert_int_equal(run.n_toolchain, 5);
    assert_string_equal(run.toolchain[0].key, "air_sha");
    assert_string_equal(run.toolchain[0].value, "c0ffee1d2b3a");
    assert_non_null(run.external_id);
    assert_int_equal(strncmp(run.external_id, "sha256:", 7), 0);
    assert_int_equal(strlen(run.external_id), 7 + 64);
    assert_non_null(strstr(run.report_json, "Hamlet"));
    nb_db_run_free(&run);
    /* Importing again: skipped, by the content-derived id. */
    assert_ok(nb_db_import_file(db, p, &ni, &ns, &e_));
    assert_int_equal(ni, 0);
    assert_int_equal(ns, 1);
    /* nb_db_clear: every row gone, the schema kept, ids start over (the fuzz harness's
     * fresh database per input) */
    int64_t first_run = 0;
    {
        nb_db_history_row *r0;
        size_t n0;
        assert_ok(nb_db_history(db, &q, &r0, &n0, &e_));
        first_run = r0[0].run_id;
        free(r0);
    }
    assert_ok(nb_db_clear(db, &e_));
    {
        nb_db_history_row *r0;
        size_t n0;
        assert_ok(nb_db_history(db, &q, &r0, &n0, &e_));
        assert_int_equal(n0, 0);
        free(r0);
    }
    assert_ok(nb_db_import_file(db, p, &ni, &ns, &e_));
    assert_int_equal(ni, 1);
    {
        nb_db_history_row *r0;
        size_t n0;
        assert_ok(nb_db_history(db, &q, &r0, &n0, &e_));
        assert_int_equal(n0, 1);
        assert_int_equal(r0[0].run_id, first_run);
        free(r0);
    }

    data_path(p, sizeof p, "perf_list.json");
    assert_ok(nb_db_import_file(db, p, &ni, &ns, &e_));
    assert_int_equal(ni, 3);
    assert_int_equal(ns, 0);
    q = (nb_db_history_query){.model = "Llama-3.2-1B-Instruct", .board = "npu-phoenix-02",
                              .metric = NB_METRIC_GATE};
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].outcome, NB_OUTCOME_FAIL);
    assert_int_equal(rows[0].started_ms, 1742029365000LL); /* 10:02:45+01:00 */
    free(rows);

    data_path(p, sizeof p, "history.ndjson");
    assert_ok(nb_db_import_file(db, p, &ni, &ns, &e_));
    assert_int_equal(ni, 5);
    assert_ok(nb_db_import_file(db, p, &ni, &ns, &e_));
    assert_int_equal(ni, 0);
    assert_int_equal(ns, 5);
    int64_t rid;
    assert_ok(nb_db_run_find_external(
        db, "nightly-20250312-0001/Llama-3.2-1B-Instruct/npu-strix-01", &rid, &e_));
    assert_ok(nb_db_run_get(db, rid, &run, &e_));
    assert_int_equal(run.outcome, NB_OUTCOME_FAIL);
    assert_int_equal(run.n_toolchain, 3);
    assert_string_equal(run.toolchain[0].key, "aie_hash"); /* sorted by key */
    assert_string_equal(run.toolchain[0].value, "1a2b3c4d");
    assert_string_equal(run.toolchain[1].key, "air_sha");
    assert_string_equal(run.toolchain[2].value, "19.0.0.2025031101");
    nb_db_run_free(&run);
    /* The row with only a date, and a null verify_status: midnight UTC, no verdict. */
    assert_ok(nb_db_run_find_external(
        db, "nightly-20250313-0001/Qwen2.5-0.5B-Instruct/npu-strix-01", &rid, &e_));
    assert_ok(nb_db_run_get(db, rid, &run, &e_));
    assert_int_equal(run.started_ms, 1741824000000LL);
    assert_int_equal(run.outcome, NB_OUTCOME_ERROR);
    assert_string_equal(run.verify_status, "unknown");
    assert_string_equal(run.error, "verify status unknown (not reported)");
    nb_db_run_free(&run);

    /* Bad rows: reported by line and field, good rows still imported. */
    data_path(p, sizeof p, "history_bad.ndjson");
    nb_db_import_report rep;
    nb_err err = {0};
    assert_int_equal(nb_db_import_file_ex(db, p, NULL, &rep, &err), NB_EFORMAT);
    assert_int_equal(rep.n_imported, 2);
    assert_int_equal(rep.n_bad, 5);
    assert_int_equal(rep.n_bad_kept, 5);
    size_t lines[5] = {2, 3, 4, 5, 7};
    const char *what[5] = {"ttft_ms: must be a finite number >= 0, got \"fast\"",
                           "invalid JSON",
                           "verify_status: must be pass, fail, skip, error, \"\" or null, "
                           "got \"MAYBE\"",
                           "model: required", "ttft_ms: must be a finite number >= 0, got -3"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(rep.bad[i].line, lines[i]);
        if (!strstr(rep.bad[i].msg, what[i]))
            fail_msg("bad row %d: '%s' lacks '%s'", i, rep.bad[i].msg, what[i]);
        char at[32];
        snprintf(at, sizeof at, ".ndjson:%zu: ", lines[i]);
        assert_non_null(strstr(rep.bad[i].msg, at));
    }
    assert_non_null(strstr(err.msg, "5 bad rows"));
    assert_non_null(strstr(err.msg, "history_bad.ndjson:2:"));
    nb_db_import_report_free(&rep);
    assert_ok(nb_db_run_find_external(
        db, "nightly-20250321-0003/Llama-3.2-1B-Instruct/npu-strix-01", &rid, &e_));
    assert_int_equal(nb_db_run_find_external(
                         db, "nightly-20250320-0002/Llama-3.2-1B-Instruct/npu-strix-01", &rid,
                         &err),
                     NB_ENOTFOUND);
    /* Re-import: the good rows are skipped, the bad ones reported again. */
    assert_int_equal(nb_db_import_file(db, p, &ni, &ns, &err), NB_EFORMAT);
    assert_int_equal(ni, 0);
    assert_int_equal(ns, 2);

    data_path(p, sizeof p, "perf_list_bad.json");
    assert_int_equal(nb_db_import_file_ex(db, p, NULL, &rep, &err), NB_EFORMAT);
    assert_int_equal(rep.n_imported, 2);
    assert_int_equal(rep.n_bad, 2);
    assert_int_equal(rep.bad[0].line, 4);
    assert_non_null(strstr(rep.bad[0].msg, "timestamp_utc"));
    assert_int_equal(rep.bad[1].line, 6);
    assert_non_null(strstr(rep.bad[1].msg, "metrics: must be an object"));
    nb_db_import_report_free(&rep);

    /* Options: another backend/dtype/board. */
    nb_db_import_opts o = {.backend = "npu-iron", .dtype = "bfp16", .board = "lab-board-7"};
    data_path(p, sizeof p, "perf_single.json");
    assert_ok(nb_db_import_file_ex(db, p, &o, &rep, &e_));
    /* Same object, same content id: already there, whatever the options. */
    assert_int_equal(rep.n_skipped, 1);
    nb_db_import_report_free(&rep);

    assert_int_equal(nb_db_import_file(db, "/nonexistent/perf.json", &ni, &ns, &err),
                     NB_ENOTFOUND);
    assert_int_equal(sql_int(nb_db_path(db), "SELECT count(*) FROM runs"), 1 + 3 + 5 + 2 + 2);
    close_db(db);
}

static void test_import_canonical_id(void **state)
{
    (void)state;
    nb_db *db = fresh_db("canon");
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a.json", tmpdir);
    snprintf(b, sizeof b, "%s/b.json", tmpdir);
    FILE *f = fopen(a, "w");
    assert_non_null(f);
    fputs("{\"model\":\"m\",\"runner\":\"r\",\"timestamp_utc\":\"2025-01-01T00:00:00Z\","
          "\"metrics\":{\"ttft_ms\":5.0,\"decode_tokens_per_sec\":10}}\n",
          f);
    fclose(f);
    /* Same content: other key order, spacing and number spelling. */
    f = fopen(b, "w");
    assert_non_null(f);
    fputs("{ \"metrics\": { \"decode_tokens_per_sec\": 10.0, \"ttft_ms\": 5 },\n"
          "  \"timestamp_utc\": \"2025-01-01T00:00:00Z\", \"runner\": \"r\", \"model\": \"m\" }\n",
          f);
    fclose(f);
    size_t ni, ns;
    assert_ok(nb_db_import_file(db, a, &ni, &ns, &e_));
    assert_int_equal(ni, 1);
    /* skipped as the same content (one digest), not merged as the same measurement: the
     * canonical form sorts the members, whatever order the file has them in */
    nb_db_import_report crep;
    assert_ok(nb_db_import_file_ex(db, b, NULL, &crep, &e_));
    assert_int_equal(crep.n_imported, 0);
    assert_int_equal(crep.n_skipped, 1);
    assert_int_equal(crep.n_merged, 0);
    nb_db_import_report_free(&crep);
    /* Different content: a new run. */
    f = fopen(b, "w");
    assert_non_null(f);
    fputs("{\"model\":\"m\",\"runner\":\"r\",\"timestamp_utc\":\"2025-01-01T00:00:00Z\","
          "\"metrics\":{\"ttft_ms\":5.5,\"decode_tokens_per_sec\":10}}",
          f);
    fclose(f);
    assert_ok(nb_db_import_file(db, b, &ni, &ns, &e_));
    assert_int_equal(ni, 1);
    /* Broken JSON in a single-object file: one bad row with its line. */
    f = fopen(b, "w");
    assert_non_null(f);
    fputs("{\n  \"model\": \"m\",\n  \"runner\": \n}\n", f);
    fclose(f);
    nb_db_import_report rep;
    nb_err err;
    assert_int_equal(nb_db_import_file_ex(db, b, NULL, &rep, &err), NB_EFORMAT);
    assert_int_equal(rep.n_bad, 1);
    assert_non_null(strstr(rep.bad[0].msg, "invalid JSON"));
    assert_non_null(strstr(rep.bad[0].msg, "line 4"));
    nb_db_import_report_free(&rep);
    unlink(a);
    unlink(b);
    close_db(db);
}

/* mlir-air's nightly files as its tools write them (tests/data/db/mlir-air/, shaped by
 * bench/extract_perf.py, the nightly's combine step and bench/append_history.py). */
static void mlir_air_path(char *buf, size_t size, const char *name)
{
    char sub[256];
    snprintf(sub, sizeof sub, "mlir-air/%s", name);
    data_path(buf, size, sub);
}

static int64_t run_of(nb_db *db, const char *ext)
{
    int64_t id = 0;
    assert_ok(nb_db_run_find_external(db, ext, &id, &e_));
    return id;
}

static void test_import_mlir_air(void **state)
{
    (void)state;
    nb_db *db = fresh_db("mlir_air");
    const char *path = nb_db_path(db);
    char p[1024];
    nb_db_import_report rep;

    /* extract_perf's per-model file: runner "", verify_status "", empty toolchain. */
    mlir_air_path(p, sizeof p, "llama32_1b_q4nx.perf.json");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 1);
    /* No runner named: filed under the nightly's runner, and said so. */
    assert_int_equal(rep.n_runner_assumed, 1);
    assert_string_equal(rep.runner_assumed, NB_DB_IMPORT_NIGHTLY_RUNNER);
    nb_db_import_report_free(&rep);
    int64_t q4 = sql_int(path, "SELECT id FROM runs");
    nb_db_run run;
    assert_ok(nb_db_run_get(db, q4, &run, &e_));
    assert_null(run.runner);
    assert_string_equal(run.env.board, "amdryzenai5pro340");
    assert_string_equal(run.env.dtype, "q4nx");
    assert_string_equal(run.verify_status, "unknown");
    assert_int_equal(run.outcome, NB_OUTCOME_ERROR);
    assert_int_equal(run.n_toolchain, 0);
    assert_int_equal(run.reps, 0);
    assert_true(isnan(run.mean[NB_METRIC_TPS]) && isnan(run.stddev[NB_METRIC_TPS]));
    assert_string_equal(run.measurement_key, "llama32_1b_q4nx|1787292729000|perf");
    nb_db_run_free(&run);
    /* Imported numbers have no invented spread: NULL, not 0.0. */
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs WHERE ttft_stddev IS NULL AND "
                                   "tps_stddev IS NULL AND tps_mean IS NULL AND reps IS NULL"),
                     1);

    /* The combined perf.json: the q4nx record is the same measurement, now with its
     * runner, toolchain and verify status; the others are new ("", skip, a null row). */
    mlir_air_path(p, sizeof p, "perf.json");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 4);
    assert_int_equal(rep.n_skipped, 1);
    assert_int_equal(rep.n_merged, 1);
    nb_db_import_report_free(&rep);
    assert_ok(nb_db_run_get(db, q4, &run, &e_));
    assert_string_equal(run.runner, "amdryzenai5pro340");
    assert_string_equal(run.env.board, "amdryzenai5pro340");
    assert_string_equal(run.verify_status, "pass");
    assert_int_equal(run.outcome, NB_OUTCOME_PASS);
    assert_null(run.error);
    assert_int_equal(run.n_toolchain, 3);
    assert_string_equal(run.toolchain[0].key, "aie_hash");
    assert_string_equal(run.toolchain[0].value, "7a3c1d9e0b2f");
    assert_string_equal(run.toolchain[1].key, "air_sha");
    assert_string_equal(run.toolchain[1].value, "e972f2942d41123f161276b27f991ef10da2a2e6");
    assert_string_equal(run.toolchain[2].key, "peano");
    assert_string_equal(run.toolchain[2].value, "21.0.0.2026080601+f4a72c27");
    assert_int_equal(strncmp(run.external_id, "sha256:", 7), 0);
    nb_db_deployment dep;
    assert_ok(nb_db_deployment_get(db, run.deployment_id, &dep, &e_));
    assert_string_equal(dep.board, "amdryzenai5pro340");
    nb_db_run_free(&run);

    /* history.ndjson: every model of a nightly shares its run_id; the 5 rows of run
     * 32458944539 are the perf.json measurements (stored once), the 2 of the earlier
     * nightly are new. */
    mlir_air_path(p, sizeof p, "history.ndjson");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 2);
    assert_int_equal(rep.n_skipped, 5);
    assert_int_equal(rep.n_merged, 5);
    assert_int_equal(rep.n_bad, 0);
    nb_db_import_report_free(&rep);
    assert_int_equal(run_of(db, "32458944539/llama32_1b_q4nx/amdryzenai5pro340"), q4);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs"), 7);
    /* Again: every row by its key, nothing merged. */
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 0);
    assert_int_equal(rep.n_skipped, 7);
    assert_int_equal(rep.n_merged, 0);
    nb_db_import_report_free(&rep);
    /* And the combined perf.json once more: the same measurements, nothing new. */
    mlir_air_path(p, sizeof p, "perf.json");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 0);
    assert_int_equal(rep.n_skipped, 5);
    nb_db_import_report_free(&rep);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs"), 7);

    /* verify_status "skip", "" and null: stored as such, neither PASS nor FAIL. */
    assert_ok(nb_db_run_get(db, run_of(db, "32458944539/qwen3_4b/amdryzenai5pro340"), &run,
                            &e_));
    assert_string_equal(run.verify_status, "skip");
    assert_int_equal(run.outcome, NB_OUTCOME_ERROR);
    assert_string_equal(run.error, "verify skipped");
    assert_close(run.value[NB_METRIC_TPS], 9.87, 1e-12);
    assert_int_equal(run.context_len, 7);
    nb_db_run_free(&run);
    assert_ok(nb_db_run_get(db, run_of(db, "32458944539/qwen25_0_5b/amdryzenai5pro340"), &run,
                            &e_));
    assert_string_equal(run.verify_status, "unknown");
    nb_db_run_free(&run);
    assert_ok(nb_db_run_get(db, run_of(db, "32166148043/llama32_1b/amdryzenai5pro340"), &run,
                            &e_));
    assert_string_equal(run.verify_status, "unknown");
    assert_string_equal(run.toolchain[1].value, "5d0e8c1b7f3a9e2d4c6b8a0f1e3d5c7b9a1f2e4d");
    nb_db_run_free(&run);
    /* The verify-failed model whose profile made no numbers: kept, metrics NULL. */
    assert_ok(nb_db_run_get(db, run_of(db, "32458944539/llama32_3b/amdryzenai5pro340"), &run,
                            &e_));
    assert_int_equal(run.outcome, NB_OUTCOME_FAIL);
    assert_true(isnan(run.value[NB_METRIC_TPS]));
    nb_db_run_free(&run);

    /* Toolchain filters, by prefix. */
    nb_db_history_query q = {.model = "llama32_1b_q4nx", .metric = NB_METRIC_TPS};
    nb_db_history_row *rows;
    size_t n;
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 2);
    free(rows);
    q.air_sha = "e972f29";
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 1);
    assert_close(rows[0].value, 64.12, 1e-12);
    assert_string_equal(rows[0].verify_status, "pass");
    assert_true(isnan(rows[0].stddev));
    free(rows);
    q = (nb_db_history_query){.aie_hash = "4f9b", .metric = NB_METRIC_TPS};
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].model, "llama32_1b_q4nx");
    assert_close(rows[0].value, 42.51, 1e-12);
    assert_string_equal(rows[1].model, "llama32_1b");
    free(rows);
    q = (nb_db_history_query){.peano = "21.0.0.2026080601", .air_sha = "e972",
                              .metric = NB_METRIC_TTFT};
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 4); /* llama32_3b has no TTFT */
    free(rows);
    q.peano = "22.";
    assert_ok(nb_db_history(db, &q, &rows, &n, &e_));
    assert_int_equal(n, 0);
    free(rows);

    /* Sweep rows are kept, one run per context, and sweep.json's copy is the same. */
    mlir_air_path(p, sizeof p, "sweep_history.ndjson");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 3);
    nb_db_import_report_free(&rep);
    mlir_air_path(p, sizeof p, "sweep.json");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 0);
    assert_int_equal(rep.n_merged, 3);
    nb_db_import_report_free(&rep);
    assert_ok(nb_db_run_get(
        db, run_of(db, "32458944539/llama32_1b_q4nx/amdryzenai5pro340/sweep:2048"), &run, &e_));
    assert_string_equal(run.kind, "sweep");
    assert_int_equal(run.context_len, 2048);
    assert_close(run.value[NB_METRIC_TPS], 66.1, 1e-12);
    assert_close(run.value[NB_METRIC_DECODE], 15.13, 1e-12);
    assert_true(isnan(run.value[NB_METRIC_TTFT]));
    nb_db_run_free(&run);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs WHERE kind = 'sweep' AND "
                                   "context_len = 65536 AND tps IS NULL"),
                     1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs"), 10);
    close_db(db);
}

/* The nightly's history before mlir-air #1867 (no runner key; verify_status pass, fail,
 * skip or "", never null; sweep rows without verify_status) and after it (runner named):
 * one board, the dtype each model name says, every status kept. */
static void test_import_mlir_air_pre1867(void **state)
{
    (void)state;
    nb_db *db = fresh_db("mlir_air_old");
    const char *path = nb_db_path(db);
    char p[1024];
    nb_db_import_report rep;
    mlir_air_path(p, sizeof p, "history_pre1867.ndjson");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 6);
    assert_int_equal(rep.n_runner_assumed, 6);
    assert_string_equal(rep.runner_assumed, "amdryzenai5pro340");
    nb_db_import_report_free(&rep);
    mlir_air_path(p, sizeof p, "sweep_history_pre1867.ndjson");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_imported, 3);
    assert_int_equal(rep.n_runner_assumed, 3);
    nb_db_import_report_free(&rep);
    /* The newer rows name the runner: the same boards, no phantom "unknown". */
    mlir_air_path(p, sizeof p, "history.ndjson");
    assert_ok(nb_db_import_file_ex(db, p, NULL, &rep, &e_));
    assert_int_equal(rep.n_runner_assumed, 0);
    nb_db_import_report_free(&rep);
    assert_int_equal(sql_int(path, "SELECT count(DISTINCT board) FROM deployments"), 1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deployments WHERE board = "
                                   "'amdryzenai5pro340'"),
                     sql_int(path, "SELECT count(*) FROM deployments"));
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deployments WHERE model = "
                                   "'llama32_1b_q4nx'"),
                     1);
    /* The dtype from the model's name. */
    static const char *const dt[][2] = {{"llama32_1b", "bf16"},     {"llama32_1b_int4", "int4"},
                                        {"llama32_1b_q4nx", "q4nx"}, {"qwen25_3b_q4", "q4"},
                                        {"qwen25_7b_q4nx", "q4nx"},  {"llama32_3b", "bf16"}};
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT count(*) FROM deployments WHERE model = '%s' AND "
                 "dtype = '%s'", dt[i][0], dt[i][1]);
        assert_int_equal(sql_int(path, q), 1);
    }
    /* Every verify status kept as the nightly wrote it. */
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs r JOIN deployments d ON d.id = "
                                   "r.deployment_id WHERE d.model = 'llama32_3b' AND "
                                   "r.verify_status = 'fail' AND r.outcome = 'FAIL' AND r.external_id LIKE '31842207719/%'"),
                     1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs r JOIN deployments d ON d.id = "
                                   "r.deployment_id WHERE d.model = 'qwen25_3b_q4' AND "
                                   "r.kind = 'bench' AND r.verify_status = 'skip'"),
                     1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs r JOIN deployments d ON d.id = "
                                   "r.deployment_id WHERE d.model = 'qwen25_7b_q4nx' AND "
                                   "r.verify_status = 'unknown'"),
                     1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM runs WHERE kind = 'sweep' AND "
                                   "verify_status = 'unknown'"),
                     3);
    close_db(db);

    /* A lab's own runner name, and a deployments file's dtype rule before the built-ins. */
    db = fresh_db("mlir_air_old2");
    path = nb_db_path(db);
    nb_db_dtype_rule rules[] = {{"_q4", "q4_k"}};
    nb_db_import_opts o = {.runner = "hx370-lab", .dtypes = rules, .n_dtypes = 1};
    mlir_air_path(p, sizeof p, "history_pre1867.ndjson");
    assert_ok(nb_db_import_file_ex(db, p, &o, &rep, &e_));
    assert_string_equal(rep.runner_assumed, "hx370-lab");
    nb_db_import_report_free(&rep);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deployments WHERE board <> "
                                   "'hx370-lab'"),
                     0);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deployments WHERE model = "
                                   "'qwen25_3b_q4' AND dtype = 'q4_k'"),
                     1);
    assert_string_equal(nb_db_dtype_of_model("Qwen25_7B_Q4NX", NULL, 0), "q4nx");
    assert_null(nb_db_dtype_of_model("smolvla", NULL, 0));
    close_db(db);
}

/* ---- model aliases ---- */

static void test_model_aliases(void **state)
{
    (void)state;
    nb_db *db = fresh_db("aliases");
    char out[NB_DB_NAME_MAX];
    assert_ok(nb_db_alias_resolve(db, "llama32_1b", out, sizeof out, &e_));
    assert_string_equal(out, "llama32_1b"); /* no alias: itself */
    assert_ok(nb_db_alias_set(db, "llama32_1b", "Llama-3.2-1B-Instruct", "deployments", &e_));
    assert_ok(nb_db_alias_resolve(db, "LLAMA32_1B", out, sizeof out, &e_));
    assert_string_equal(out, "Llama-3.2-1B-Instruct");
    /* A chain collapses: an alias of an alias names the canonical model. */
    assert_ok(nb_db_alias_set(db, "llama32_1b_q4nx", "llama32_1b", "deployments", &e_));
    assert_ok(nb_db_alias_resolve(db, "llama32_1b_q4nx", out, sizeof out, &e_));
    assert_string_equal(out, "Llama-3.2-1B-Instruct");
    /* So does one made canonical later: its aliases follow it. */
    assert_ok(nb_db_alias_set(db, "b179c9523d0e6a0f", "SmolLM2-135M-Instruct", "result", &e_));
    assert_ok(nb_db_alias_set(db, "SmolLM2-135M-Instruct", "smollm2_135m", "deployments", &e_));
    assert_ok(nb_db_alias_resolve(db, "b179c9523d0e6a0f", out, sizeof out, &e_));
    assert_string_equal(out, "smollm2_135m");
    /* The canonical name itself is no alias. */
    assert_ok(nb_db_alias_set(db, "smollm2_135m", "SmolLM2-135M-Instruct", "result", &e_));
    nb_db_alias *al;
    size_t n;
    assert_ok(nb_db_alias_list(db, &al, &n, &e_));
    assert_int_equal(n, 4);
    assert_string_equal(al[0].alias, "llama32_1b");
    assert_string_equal(al[0].model, "Llama-3.2-1B-Instruct");
    assert_string_equal(al[0].origin, "deployments");
    assert_string_equal(al[1].alias, "llama32_1b_q4nx");
    assert_string_equal(al[2].alias, "b179c9523d0e6a0f");
    assert_string_equal(al[2].model, "smollm2_135m");
    assert_string_equal(al[2].origin, "result");
    assert_string_equal(al[3].alias, "SmolLM2-135M-Instruct");
    free(al);
    nb_err err;
    char big[NB_DB_NAME_MAX + 1];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(nb_db_alias_set(db, big, "m", "t", &err), NB_EINVAL);
    assert_string_equal(err.msg, "model alias: 128+ bytes, limit is 127");
    assert_int_equal(nb_db_alias_set(db, "", "m", "t", &err), NB_EINVAL);

    /* The reference of a model is found under any of its names. */
    nb_db_deployment d = {0};
    snprintf(d.model, sizeof d.model, "llama32_1b");
    snprintf(d.backend, sizeof d.backend, "npu");
    snprintf(d.dtype, sizeof d.dtype, "bf16");
    snprintf(d.board, sizeof d.board, "amdryzenai5pro340");
    int64_t id;
    assert_ok(nb_db_deployment_upsert(db, &d, &id, &e_));
    assert_ok(nb_db_reference_set(db, id, &e_));
    nb_db_deployment ref;
    const char *names[] = {"llama32_1b", "Llama-3.2-1B-Instruct", "llama32_1b_q4nx"};
    for (size_t i = 0; i < 3; i++) {
        assert_ok(nb_db_reference_get(db, names[i], &ref, &e_));
        assert_int_equal(ref.id, id);
    }
    assert_int_equal(nb_db_reference_get(db, "qwen25_0_5b", &ref, &err), NB_ENOTFOUND);
    close_db(db);
}

/* ---- reference traces ---- */

static void test_traces(void **state)
{
    (void)state;
    nb_db *db = fresh_db("traces");
    nb_db_trace_key k = {"b179c952", "5e1f00aa", 32, 5};
    char *path;
    void *blob;
    size_t len;
    nb_err err;
    assert_int_equal(nb_db_trace_get(db, &k, &path, &blob, &len, NULL, &err), NB_ENOTFOUND);
    assert_ok(nb_db_trace_put(db, &k, "/var/cache/npubench/t1.bin", NULL, 0, &e_));
    int64_t created = 0;
    assert_ok(nb_db_trace_get(db, &k, &path, &blob, &len, &created, &e_));
    assert_string_equal(path, "/var/cache/npubench/t1.bin");
    assert_null(blob);
    assert_true(created > 0);
    free(path);
    const unsigned char bytes[5] = {1, 0, 2, 0, 3};
    assert_ok(nb_db_trace_put(db, &k, NULL, bytes, sizeof bytes, &e_)); /* replaces */
    assert_ok(nb_db_trace_get(db, &k, &path, &blob, &len, NULL, &e_));
    assert_null(path);
    assert_int_equal(len, 5);
    assert_memory_equal(blob, bytes, 5);
    free(blob);
    nb_db_trace_key k2 = k;
    k2.k = 10;
    assert_int_equal(nb_db_trace_get(db, &k2, &path, &blob, &len, NULL, &err), NB_ENOTFOUND);
    assert_int_equal(nb_db_trace_put(db, &k2, "p", bytes, 1, &err), NB_EINVAL);
    k2.n_tokens = 0;
    assert_int_equal(nb_db_trace_put(db, &k2, "p", NULL, 0, &err), NB_EINVAL);
    assert_ok(nb_db_trace_delete(db, &k, &e_));
    assert_int_equal(nb_db_trace_delete(db, &k, &err), NB_ENOTFOUND);
    close_db(db);
}

/* ---- durability ---- */

/* A job acknowledged (enqueue returned) must survive kill -9 right after. */
static void test_durability_kill9(void **state)
{
    (void)state;
    char path[512];
    db_file(path, sizeof path, "kill9");
    remove_db(path);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        nb_db *db = NULL;
        nb_err err;
        if (nb_db_open(path, NULL, &db, &err))
            _exit(2);
        nb_db_job_new j = {0};
        j.request_id = "acked-before-crash";
        j.kind = "bench";
        j.spec = "{\"model\":\"SmolLM2\"}";
        j.spec_len = strlen(j.spec);
        int64_t id = 0;
        if (nb_db_job_enqueue(db, &j, &id, NULL, &err))
            _exit(3);
        /* The "acknowledgement" to the client. */
        if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id)
            _exit(4);
        for (;;)
            pause(); /* never closes the database */
    }
    close(fds[1]);
    int64_t id = 0;
    assert_int_equal(read(fds[0], &id, sizeof id), (ssize_t)sizeof id);
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(fds[0]);

    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    assert_int_equal(access(wal, F_OK), 0); /* the commit lives only in the WAL */

    nb_db *db = NULL;
    assert_ok(nb_db_open(path, NULL, &db, &e_));
    nb_db_job job;
    assert_ok(nb_db_job_get(db, id, &job, &e_));
    assert_int_equal(job.state, NB_JOB_QUEUED);
    assert_string_equal(job.request_id, "acked-before-crash");
    assert_memory_equal(job.spec, "{\"model\":\"SmolLM2\"}", job.spec_len);
    nb_db_job_free(&job);
    /* The client retries after the restart: same job. */
    nb_db_job_new j = {0};
    j.request_id = "acked-before-crash";
    j.kind = "bench";
    j.spec = "{\"model\":\"SmolLM2\"}";
    j.spec_len = strlen(j.spec);
    int64_t again;
    int existed;
    assert_ok(nb_db_job_enqueue(db, &j, &again, &existed, &e_));
    assert_int_equal(again, id);
    assert_true(existed);
    nb_db_close(db);
    remove_db(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_and_reopen),
        cmocka_unit_test(test_queue_dtype_enum_migrated),
        cmocka_unit_test(test_newer_schema_rejected),
        cmocka_unit_test(test_foreign_files_rejected),
        cmocka_unit_test(test_deployments_and_references),
        cmocka_unit_test(test_workers),
        cmocka_unit_test(test_enqueue_idempotent),
        cmocka_unit_test(test_priority_fifo),
        cmocka_unit_test(test_selector_matching),
        cmocka_unit_test(test_lease_expiry_requeue),
        cmocka_unit_test(test_no_duplicate_run),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_progress_and_log),
        cmocka_unit_test(test_concurrent_lease),
        cmocka_unit_test(test_run_roundtrip),
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_history_filters),
        cmocka_unit_test(test_mann_whitney_known_values),
        cmocka_unit_test(test_regression_needs_both),
        cmocka_unit_test(test_regression_lifecycle),
        cmocka_unit_test(test_model_rename_migrated),
        cmocka_unit_test(test_regression_threshold_boundaries),
        cmocka_unit_test(test_replay_answers),
        cmocka_unit_test(test_import),
        cmocka_unit_test(test_import_canonical_id),
        cmocka_unit_test(test_import_mlir_air),
        cmocka_unit_test(test_import_mlir_air_pre1867),
        cmocka_unit_test(test_model_aliases),
        cmocka_unit_test(test_traces),
        cmocka_unit_test(test_durability_kill9),
        cmocka_unit_test(test_corrupt_page_is_data_loss),
        cmocka_unit_test(test_results_transaction_and_retention),
    };
    return tu_run_group(tests, group_setup, group_teardown);
}
