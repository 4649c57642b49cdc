/* What every benchmark program measures with: a monotonic clock and the median of samples. */
#ifndef GM_BENCH_UTIL_H
#define GM_BENCH_UTIL_H
#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n >= 1 (the upper of the middle two for even n); sorts v. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#endif
