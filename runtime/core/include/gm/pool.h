/*
** A small fixed thread pool: gm_pool_run splits n tasks over the calling
** thread and the workers and returns when all are done. Workers sleep between
** runs. One pool serves one caller at a time.
*/
#ifndef GM_POOL_H
#define GM_POOL_H

typedef struct gm_pool gm_pool;

/* threads: total threads including the caller; <= 0 means every online core. */
gm_pool *gm_pool_new(int threads);
void gm_pool_free(gm_pool *p);
int gm_pool_threads(const gm_pool *p);

/* Call fn(ctx, i) for i in [0, n), spread over the threads; NULL p runs inline. */
void gm_pool_run(gm_pool *p, int n, void (*fn)(void *ctx, int i), void *ctx);

/* The thread count a program should use: GM_THREADS if set, else every online core. */
int gm_default_threads(void);

#endif
