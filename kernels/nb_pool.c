/* nb_pool: the persistent worker threads every parallel kernel runs on, and per-thread scratch.
 * Workers spin briefly between calls (decode issues ~150 calls a token), then park on a condvar. */
#include "nb_kernels_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long each side spins before sleeping on its condvar. Waking a thread
 * whose (virtual) CPU went idle can take milliseconds, and if either side
 * sleeps between the ~150 calls of a decode step the two fall into a convoy
 * of such wake-ups (4 ms a call was measured). So workers spin for 20 ms
 * after a call and the caller, which needs the result, for 200 ms; an idle
 * engine stops burning cores after that. Spinners never sched_yield: on a
 * loaded machine that hands the core to another process for a whole time
 * slice, and the two threads then take turns being late. */
#define WORKER_SPIN_NS 20000000LL
#define CALLER_SPIN_NS 200000000LL

typedef struct pool {
    pthread_t *threads; /* size - 1 workers; the caller is tid 0 */
    int size;
    atomic_uint gen;      /* bumped once per run: workers wait for a change */
    /* The shares of the current run, claimed one at a time by whoever comes first: nt << 16 |
     * the next unclaimed tid. The caller claims what no worker took by the time its own
     * share is done, so a worker the scheduler left off the CPU (a loaded host) costs the
     * run nothing; waiting for every worker to turn up cost up to a time slice per run. */
    atomic_uint claim;
    atomic_int done;      /* claimed shares (tid >= 1) finished in the current run */
    atomic_int busy;      /* a run is in flight */
    atomic_int sleepers;  /* workers parked on cv */
    atomic_int waiter;    /* the caller is parked on done_cv */
    atomic_int quit;
    /* The job: written by the caller before claim is reset (release), read by a worker
     * after it claimed a share (acquire); stable until every claimed share is done. */
    nb_pool_fn fn;
    void *arg;
    unsigned start_gen; /* gen when the workers were started */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
} pool;

static pool P = {
    .size = 1,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
    .done_mu = PTHREAD_MUTEX_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};
/* Serialises resize and shutdown (set-up time only). */
static pthread_mutex_t admin_mu = PTHREAD_MUTEX_INITIALIZER;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Waits until gen differs from seen; returns the new value. */
/* Spins until done(arg) or the budget runs out; returns whether done. */
static int spin_until(int (*done)(const void *), const void *arg, long long budget_ns)
{
    long long t0 = 0;
    for (unsigned spins = 0;; spins++) {
        if (done(arg))
            return 1;
        if ((spins & 255) == 255) {
            long long t = now_ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > budget_ns)
                return 0;
        }
        cpu_relax();
    }
}

static int gen_moved(const void *seen)
{
    return atomic_load_explicit(&P.gen, memory_order_acquire) != *(const unsigned *)seen;
}

static int all_done(const void *nt)
{
    return atomic_load_explicit(&P.done, memory_order_acquire) == *(const int *)nt - 1;
}

/* Takes the next unclaimed share of the current run: its tid, with nt in *nt, or -1
 * when every share is taken (also when the run is long over). */
static int claim_share(int *nt)
{
    unsigned w = atomic_load_explicit(&P.claim, memory_order_acquire);
    for (;;) {
        unsigned next = w & 0xffffu, n = w >> 16;
        if (next >= n)
            return -1;
        if (atomic_compare_exchange_weak_explicit(&P.claim, &w, w + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *nt = (int)n;
            return (int)next;
        }
    }
}

/* Runs a claimed share and counts it; the share that completes the run wakes a parked
 * caller (seq_cst: Dekker with the caller's waiter flag). */
static void run_share(int tid, int nt)
{
    P.fn(P.arg, tid, nt);
    if (atomic_fetch_add(&P.done, 1) == nt - 2 && atomic_load(&P.waiter)) {
        pthread_mutex_lock(&P.done_mu);
        pthread_cond_signal(&P.done_cv);
        pthread_mutex_unlock(&P.done_mu);
    }
}

static unsigned wait_gen(unsigned seen)
{
    unsigned g;
    if (spin_until(gen_moved, &seen, WORKER_SPIN_NS))
        return atomic_load_explicit(&P.gen, memory_order_acquire);
    pthread_mutex_lock(&P.mu);
    atomic_fetch_add(&P.sleepers, 1); /* seq_cst: pairs with the caller's gen bump */
    while ((g = atomic_load(&P.gen)) == seen)
        pthread_cond_wait(&P.cv, &P.mu);
    atomic_fetch_sub(&P.sleepers, 1);
    pthread_mutex_unlock(&P.mu);
    return g;
}

static void *worker(void *p)
{
    (void)p;
    unsigned seen = P.start_gen;
    for (;;) {
        seen = wait_gen(seen);
        if (atomic_load_explicit(&P.quit, memory_order_acquire))
            break;
        int t, nt;
        while ((t = claim_share(&nt)) >= 0)
            run_share(t, nt);
    }
    return NULL;
}

static void wake_workers(void)
{
    if (atomic_load(&P.sleepers) > 0) {
        pthread_mutex_lock(&P.mu);
        pthread_cond_broadcast(&P.cv);
        pthread_mutex_unlock(&P.mu);
    }
}

static void wait_done(int nt)
{
    if (spin_until(all_done, &nt, CALLER_SPIN_NS))
        return;
    pthread_mutex_lock(&P.done_mu);
    atomic_store(&P.waiter, 1);
    while (atomic_load(&P.done) < nt - 1)
        pthread_cond_wait(&P.done_cv, &P.done_mu);
    atomic_store(&P.waiter, 0);
    pthread_mutex_unlock(&P.done_mu);
}

static void stop_workers(void)
{
    if (!P.threads)
        return;
    atomic_store(&P.quit, 1);
    atomic_fetch_add_explicit(&P.gen, 1, memory_order_seq_cst);
    pthread_mutex_lock(&P.mu);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    for (int i = 0; i < P.size - 1; i++)
        pthread_join(P.threads[i], NULL);
    free(P.threads);
    P.threads = NULL;
    P.size = 1;
    atomic_store(&P.quit, 0);
}

nb_code nb_pool_resize(int n, nb_err *err)
{
    if (n < 1)
        n = 1;
    pthread_mutex_lock(&admin_mu);
    if (n == P.size) {
        pthread_mutex_unlock(&admin_mu);
        return NB_OK;
    }
    stop_workers();
    if (n == 1) {
        pthread_mutex_unlock(&admin_mu);
        return NB_OK;
    }
    P.threads = calloc((size_t)n - 1, sizeof *P.threads);
    if (!P.threads) {
        pthread_mutex_unlock(&admin_mu);
        return nb_err_set(err, NB_ENOMEM, "out of memory for %d kernel threads", n);
    }
    /* Workers wait for gen to move past its value now, so a restarted
     * pool does not mistake the last run of the old one for a new job. */
    P.start_gen = atomic_load(&P.gen);
    int started = 0;
    for (; started < n - 1; started++) {
        int rc = pthread_create(&P.threads[started], NULL, worker, (void *)(intptr_t)(started + 1));
        if (rc) {
            P.size = started + 1;
            stop_workers();
            pthread_mutex_unlock(&admin_mu);
            return nb_err_set(err, NB_EINTERNAL, "starting kernel thread %d of %d: %s",
                              started + 1, n, strerror(rc));
        }
    }
    P.size = n;
    pthread_mutex_unlock(&admin_mu);
    return NB_OK;
}

int nb_pool_size(void)
{
    return P.size;
}

void nb_pool_run(nb_pool_fn fn, void *arg, int want)
{
    int nt = want < P.size ? want : P.size;
    if (nt <= 1 || atomic_exchange_explicit(&P.busy, 1, memory_order_acquire)) {
        fn(arg, 0, 1);
        return;
    }
    P.fn = fn;
    P.arg = arg;
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.claim, (unsigned)nt << 16 | 1u, memory_order_release);
    atomic_fetch_add(&P.gen, 1); /* seq_cst: wakes the workers, pairs with sleepers */
    wake_workers();
    fn(arg, 0, nt);
    int t, n;
    while ((t = claim_share(&n)) >= 0) /* shares no worker came for */
        run_share(t, n);
    wait_done(nt);
    atomic_store_explicit(&P.busy, 0, memory_order_release);
}

void nb_pool_shutdown(void)
{
    pthread_mutex_lock(&admin_mu);
    stop_workers();
    pthread_mutex_unlock(&admin_mu);
}

/* ---- per-thread scratch --------------------------------------------------- */

typedef struct scratch {
    void *p;
    size_t cap;
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v)
{
    scratch *s = v;
    if (s) {
        free(s->p);
        free(s);
    }
}

static void scratch_init(void)
{
    pthread_key_create(&scratch_key, scratch_free);
}

void *nb_scratch(size_t bytes)
{
    pthread_once(&scratch_once, scratch_init);
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    if (bytes > s->cap) {
        size_t cap = bytes + bytes / 4;
        cap = (cap + 63) & ~(size_t)63;
        if (cap < bytes) /* overflow */
            return NULL;
        void *p = aligned_alloc(64, cap);
        if (!p)
            return NULL;
        free(s->p);
        s->p = p;
        s->cap = cap;
    }
    return s->p;
}

void nb_scratch_release(void)
{
    pthread_once(&scratch_once, scratch_init);
    scratch *s = pthread_getspecific(scratch_key);
    if (s) {
        pthread_setspecific(scratch_key, NULL);
        scratch_free(s);
    }
}

void *nb_scratch_or_die(size_t bytes)
{
    void *p = nb_scratch(bytes);
    if (!p)
        abort(); /* sizes are bounded by the model at setup: this is true OOM */
    return p;
}
