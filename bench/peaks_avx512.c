/*
** The AVX-512 tier's loops for bench_runner (peaks.h): zmm FMAs, VDPBF16PS and
** 64-byte loads; built for AVX-512 F and BF16 only, run only where
** gm_cpu_features() has GM_CPU_AVX512 (and GM_CPU_AVX512_BF16 for VDPBF16PS).
*/
#pragma GCC target("avx512f,avx512bf16")
#include <immintrin.h>

#include "peaks.h"

/* 16 independent chains, half the zmm registers: enough for two FMA units of latency 4 */
double peak_avx512_fma(long iters, float *sink)
{
    const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
    __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3);
    __m512 a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7);
    __m512 a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
    __m512 a12 = _mm512_set1_ps(12), a13 = _mm512_set1_ps(13), a14 = _mm512_set1_ps(14), a15 = _mm512_set1_ps(15);
    for (long it = 0; it < iters; it++) {
        a0 = _mm512_fmadd_ps(a0, b, c), a1 = _mm512_fmadd_ps(a1, b, c), a2 = _mm512_fmadd_ps(a2, b, c);
        a3 = _mm512_fmadd_ps(a3, b, c), a4 = _mm512_fmadd_ps(a4, b, c), a5 = _mm512_fmadd_ps(a5, b, c);
        a6 = _mm512_fmadd_ps(a6, b, c), a7 = _mm512_fmadd_ps(a7, b, c), a8 = _mm512_fmadd_ps(a8, b, c);
        a9 = _mm512_fmadd_ps(a9, b, c), a10 = _mm512_fmadd_ps(a10, b, c), a11 = _mm512_fmadd_ps(a11, b, c);
        a12 = _mm512_fmadd_ps(a12, b, c), a13 = _mm512_fmadd_ps(a13, b, c), a14 = _mm512_fmadd_ps(a14, b, c);
        a15 = _mm512_fmadd_ps(a15, b, c);
    }
    const __m512 s = _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                      _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                      _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * 16 * 32;
}

/*
** VDPBF16PS: each f32 lane += a[2i] b[2i] + a[2i+1] b[2i+1], 32 bf16 pairs a
** zmm, counted as 64 flops. 16 independent chains; the products are small
** (0.5 x 2^-12), so the sums stay far from overflow.
*/
double peak_avx512_bf16(long iters, float *sink)
{
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f / 4096), _mm512_set1_ps(1.0f / 4096));
    __m512 c0 = _mm512_set1_ps(0), c1 = _mm512_set1_ps(1), c2 = _mm512_set1_ps(2), c3 = _mm512_set1_ps(3);
    __m512 c4 = _mm512_set1_ps(4), c5 = _mm512_set1_ps(5), c6 = _mm512_set1_ps(6), c7 = _mm512_set1_ps(7);
    __m512 c8 = _mm512_set1_ps(8), c9 = _mm512_set1_ps(9), c10 = _mm512_set1_ps(10), c11 = _mm512_set1_ps(11);
    __m512 c12 = _mm512_set1_ps(12), c13 = _mm512_set1_ps(13), c14 = _mm512_set1_ps(14), c15 = _mm512_set1_ps(15);
    for (long it = 0; it < iters; it++) {
        c0 = _mm512_dpbf16_ps(c0, a, b), c1 = _mm512_dpbf16_ps(c1, a, b), c2 = _mm512_dpbf16_ps(c2, a, b);
        c3 = _mm512_dpbf16_ps(c3, a, b), c4 = _mm512_dpbf16_ps(c4, a, b), c5 = _mm512_dpbf16_ps(c5, a, b);
        c6 = _mm512_dpbf16_ps(c6, a, b), c7 = _mm512_dpbf16_ps(c7, a, b), c8 = _mm512_dpbf16_ps(c8, a, b);
        c9 = _mm512_dpbf16_ps(c9, a, b), c10 = _mm512_dpbf16_ps(c10, a, b), c11 = _mm512_dpbf16_ps(c11, a, b);
        c12 = _mm512_dpbf16_ps(c12, a, b), c13 = _mm512_dpbf16_ps(c13, a, b), c14 = _mm512_dpbf16_ps(c14, a, b);
        c15 = _mm512_dpbf16_ps(c15, a, b);
    }
    const __m512 s = _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                      _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                      _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * 16 * 64;
}

/* four 64-byte loads into four accumulators: 256 bytes */
#define READ4(q)                                                                   \
    a0 = _mm512_add_epi32(a0, _mm512_load_si512((const void *)((q) + 0)));        \
    a1 = _mm512_add_epi32(a1, _mm512_load_si512((const void *)((q) + 64)));       \
    a2 = _mm512_add_epi32(a2, _mm512_load_si512((const void *)((q) + 128)));      \
    a3 = _mm512_add_epi32(a3, _mm512_load_si512((const void *)((q) + 192)))

/* as read_avx2, with 64-byte loads */
uint32_t read_avx512(const uint8_t *p, size_t n, size_t ahead, int streams)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
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
            READ4(q);
        }
    for (; i < run; i += 256)
        for (int s = 0; s < streams; s++) {
            READ4(p + (size_t)s * run + i);
        }
    return (uint32_t)_mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)));
}
