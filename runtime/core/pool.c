/*
** A fixed thread pool with work handed out by an atomic counter.
**
** A forward pass is a chain of short parallel runs (a decode step is about
** 250 of them, each a fraction of a millisecond), so waking a sleeping
** thread for each would cost more than the run. Workers therefore spin for
** a while after a run, watching for the next one, and only then sleep on
** the condition variable; the caller spins likewise for the workers to
** finish. An idle pool sleeps after SPIN_NS.
*/
#include "gm/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "gm/cli.h"

enum { SPIN_NS = 200 * 1000 };

struct gm_pool {
    int n_threads;
    long long spin_ns;       /* SPIN_NS, or 0 when there are more threads than processors to run them */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_ulong generation; /* bumped for every run */
    atomic_int busy;         /* workers still inside the current run */
    atomic_int stop;
    int sleepers;            /* workers waiting on wake (under mu) */
    int caller_waits;        /* the caller waits on done (under mu) */
    /* the current run, written before generation is bumped */
    void (*fn)(void *, int);
    void *ctx;
    int n;
    atomic_int next;
};

static void drain(gm_pool *p)
{
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        p->fn(p->ctx, i);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spin until done(p, arg) holds or the pool's spin time passes; whether it holds. */
static int spin_until(gm_pool *p, int (*done)(gm_pool *, unsigned long), unsigned long arg)
{
    if (!p->spin_ns)
        return done(p, arg);
    const long long end = now_ns() + p->spin_ns;
    for (int i = 1;; i++) {
        if (done(p, arg))
            return 1;
        relax();
        if (i % 256 == 0 && now_ns() > end)
            return done(p, arg);
    }
}

static int new_run(gm_pool *p, unsigned long seen)
{
    return atomic_load(&p->stop) || atomic_load(&p->generation) != seen;
}

static int all_done(gm_pool *p, unsigned long unused)
{
    (void)unused;
    return atomic_load(&p->busy) == 0;
}

static void *worker(void *arg)
{
    gm_pool *p = arg;
    unsigned long seen = 0;
    for (;;) {
        if (!spin_until(p, new_run, seen)) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (!new_run(p, seen))
                pthread_cond_wait(&p->wake, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            break;
        seen = atomic_load(&p->generation);
        drain(p);
        if (atomic_fetch_sub(&p->busy, 1) == 1) {
            pthread_mutex_lock(&p->mu);
            if (p->caller_waits)
                pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

int gm_threads_parse(const char *s) { return (int)gm_cli_count(s, 1, GM_MAX_THREADS); }

int gm_default_threads(void)
{
    const int env = gm_threads_parse(getenv("GM_THREADS"));
    if (env > 0)
        return env;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > GM_MAX_THREADS ? GM_MAX_THREADS : n > 0 ? (int)n : 1;
}

gm_pool *gm_pool_new(int threads)
{
    gm_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n_threads = threads > GM_MAX_THREADS ? GM_MAX_THREADS : threads > 0 ? threads : gm_default_threads();
    /*
    ** More threads than processors: a spinning thread holds the processor a
    ** working one waits for (64 threads on 2 cores ran a prefill 60x slower),
    ** so each sleeps at once instead.
    */
    cpu_set_t cpus;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int usable = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : (int)online;
    p->spin_ns = usable > 0 && p->n_threads > usable ? 0 : SPIN_NS;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->workers = calloc((size_t)p->n_threads, sizeof *p->workers);
    int started = 0;
    for (int i = 0; p->workers && i < p->n_threads - 1; i++, started++)
        if (pthread_create(&p->workers[i], NULL, worker, p) != 0)
            break;
    p->n_threads = started + 1;
    return p;
}

static void wake_sleepers(gm_pool *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

void gm_pool_free(gm_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    wake_sleepers(p);
    for (int i = 0; i < p->n_threads - 1; i++)
        pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->workers);
    free(p);
}

int gm_pool_threads(const gm_pool *p)
{
    return p ? p->n_threads : 1;
}

void gm_pool_run(gm_pool *p, int n, void (*fn)(void *ctx, int i), void *ctx)
{
    if (!p || p->n_threads == 1 || n <= 1) {
        for (int i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy, p->n_threads - 1);
    atomic_fetch_add(&p->generation, 1); /* publishes the run to spinning workers */
    wake_sleepers(p);
    drain(p);
    if (!spin_until(p, all_done, 0)) {
        pthread_mutex_lock(&p->mu);
        p->caller_waits = 1;
        while (atomic_load(&p->busy) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        p->caller_waits = 0;
        pthread_mutex_unlock(&p->mu);
    }
}
