/*
** A small fixed thread pool: gm_pool_run splits n tasks over the calling
** thread and the workers and returns when all are done. Workers sleep between
** runs. One pool serves one caller at a time.
*/
#ifndef GM_POOL_H
#define GM_POOL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gm_pool gm_pool;

/*
** At most this many threads in a pool: more than any CPU's cores, and a
** count past it is a typo, which would otherwise start thread after thread
** until the system's limit (each worker spins for a while after a run, so
** threads beyond the cores only slow a pool down).
*/
enum { GM_MAX_THREADS = 512 };

/* threads: total threads including the caller, at most GM_MAX_THREADS; <= 0 means every online core. */
gm_pool *gm_pool_new(int threads);
void gm_pool_free(gm_pool *p);
int gm_pool_threads(const gm_pool *p);

/* Call fn(ctx, i) for i in [0, n), spread over the threads; NULL p runs inline. */
void gm_pool_run(gm_pool *p, int n, void (*fn)(void *ctx, int i), void *ctx);

/* The thread count a program should use: GM_THREADS if it is a valid count, else every online core. */
int gm_default_threads(void);

/* s as a thread count, a whole number in [1, GM_MAX_THREADS] (a program's --threads or GM_THREADS), else -1. */
int gm_threads_parse(const char *s);

#ifdef __cplusplus
}
#endif

#endif
