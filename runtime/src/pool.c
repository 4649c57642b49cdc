/* A fixed thread pool with work handed out by an atomic counter. */
#include "gm/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct gm_pool {
    int n_threads;
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation; /* bumped for every run */
    int busy;                 /* workers still inside the current run */
    int stop;
    /* the current run */
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

static void *worker(void *arg)
{
    gm_pool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int gm_default_threads(void)
{
    const char *env = getenv("GM_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

gm_pool *gm_pool_new(int threads)
{
    gm_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n_threads = threads > 0 ? threads : gm_default_threads();
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

void gm_pool_free(gm_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
