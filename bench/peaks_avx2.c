/* The AVX2 tier's loops for bench_runner (peaks.h); built for AVX2 and FMA only. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#include "peaks.h"

double peak_avx2_fma(long iters, float *sink)
{
    const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
    /* 12 independent chains in named registers (an array would live on the stack) */
    __m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3);
    __m256 a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5), a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7);
    __m256 a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9), a10 = _mm256_set1_ps(10), a11 = _mm256_set1_ps(11);
    for (long it = 0; it < iters; it++) {
        a0 = _mm256_fmadd_ps(a0, b, c), a1 = _mm256_fmadd_ps(a1, b, c), a2 = _mm256_fmadd_ps(a2, b, c);
        a3 = _mm256_fmadd_ps(a3, b, c), a4 = _mm256_fmadd_ps(a4, b, c), a5 = _mm256_fmadd_ps(a5, b, c);
        a6 = _mm256_fmadd_ps(a6, b, c), a7 = _mm256_fmadd_ps(a7, b, c), a8 = _mm256_fmadd_ps(a8, b, c);
        a9 = _mm256_fmadd_ps(a9, b, c), a10 = _mm256_fmadd_ps(a10, b, c), a11 = _mm256_fmadd_ps(a11, b, c);
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                                 _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
    *sink = _mm256_cvtss_f32(s);
    return (double)iters * 12 * 16;
}

/* eight 32-byte loads into eight accumulators: 256 bytes */
#define READ8(q)                                                                            \
    a0 = _mm256_add_epi32(a0, _mm256_load_si256((const __m256i *)(const void *)((q) + 0)));   \
    a1 = _mm256_add_epi32(a1, _mm256_load_si256((const __m256i *)(const void *)((q) + 32)));  \
    a2 = _mm256_add_epi32(a2, _mm256_load_si256((const __m256i *)(const void *)((q) + 64)));  \
    a3 = _mm256_add_epi32(a3, _mm256_load_si256((const __m256i *)(const void *)((q) + 96)));  \
    a4 = _mm256_add_epi32(a4, _mm256_load_si256((const __m256i *)(const void *)((q) + 128))); \
    a5 = _mm256_add_epi32(a5, _mm256_load_si256((const __m256i *)(const void *)((q) + 160))); \
    a6 = _mm256_add_epi32(a6, _mm256_load_si256((const __m256i *)(const void *)((q) + 192))); \
    a7 = _mm256_add_epi32(a7, _mm256_load_si256((const __m256i *)(const void *)((q) + 224)))

/*
** streams runs of n / streams bytes, read side by side 256 bytes at a time
** (more runs in flight for the hardware prefetcher), each line fetched
** `ahead` bytes ahead while that stays inside its run.
*/
uint32_t read_avx2(const uint8_t *p, size_t n, size_t ahead, int streams)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const size_t run = n / (size_t)streams, stop = ahead && ahead < run ? run - ahead : 0;
    size_t i = 0;
    for (; i < stop; i += 256)
        for (int s = 0; s < streams; s++) {
            const uint8_t *q = p + (size_t)s * run + i;
            const char *f = (const char *)(q + ahead);
            _mm_prefetch(f, _MM_HINT_T0);
            _mm_prefetch(f + 64, _MM_HINT_T0);
            _mm_prefetch(f + 128, _MM_HINT_T0);
            _mm_prefetch(f + 192, _MM_HINT_T0);
            READ8(q);
        }
    for (; i < run; i += 256)
        for (int s = 0; s < streams; s++) {
            READ8(p + (size_t)s * run + i);
        }
    const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                                       _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));
    return (uint32_t)_mm256_extract_epi32(sum, 0);
}
