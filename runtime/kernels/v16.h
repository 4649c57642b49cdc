/*
** Internal: the 16-lane vector operations the AVX-512 tier (avx512.c) is
** written in, in two implementations of the same semantics: the AVX-512
** instructions themselves, and, with GM_V16_MODEL defined, a model made of
** two AVX2 halves (lanes 0-7 and 8-15), so that the AVX-512 kernels' source
** runs and is tested on a CPU without AVX-512 (avx512_model.c). Every
** operation is lane-wise IEEE arithmetic or a data movement, so the two
** give the same bits.
**
**   v16: 16 f32 lanes.  w32: 32 bf16 values, two to a 32-bit lane (the even
**   column low, the odd one high), as 64 bytes of a row of W load.
*/
#ifndef GM_V16_H
#define GM_V16_H

#include <immintrin.h>

#include "gm/bf16.h"

#ifndef GM_V16_MODEL

typedef __m512 v16;
typedef __m512i w32;

static inline v16 v16_zero(void) { return _mm512_setzero_ps(); }
static inline v16 v16_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v16_store(float *p, v16 v) { _mm512_storeu_ps(p, v); }
static inline v16 v16_bcast(const float *p) { return _mm512_set1_ps(*p); }
static inline v16 v16_fma(v16 a, v16 b, v16 c) { return _mm512_fmadd_ps(a, b, c); }
static inline w32 w32_load(const gm_bf16 *p) { return _mm512_loadu_si512((const void *)p); }
static inline void w32_store_aligned(gm_bf16 *p, w32 v) { _mm512_store_si512((void *)p, v); }
/* the even columns (0, 2, .., 30) as f32: shifted up; the odd ones: masked */
static inline v16 w32_even(w32 v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
static inline v16 w32_odd(w32 v) { return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u))); }

/* 16 bf16 as f32: widened to 32 bits and shifted into the high half */
static inline v16 v16_load_bf16(const gm_bf16 *p)
{
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* the sum of the 16 lanes: the two halves of 8 added, then 4 + 4, 2 + 2, 1 + 1 */
static inline float v16_hsum(v16 v)
{
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* y[0..32) into its even and odd columns, and back */
static inline void v16_split32(const float *y, v16 *even, v16 *odd)
{
    const __m512i e = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i o = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512 a = _mm512_loadu_ps(y), b = _mm512_loadu_ps(y + 16);
    *even = _mm512_permutex2var_ps(a, e, b);
    *odd = _mm512_permutex2var_ps(a, o, b);
}

static inline void v16_join32(float *y, v16 even, v16 odd)
{
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    _mm512_storeu_ps(y, _mm512_permutex2var_ps(even, lo, odd));
    _mm512_storeu_ps(y + 16, _mm512_permutex2var_ps(even, hi, odd));
}

#else /* the model: two AVX2 halves */

typedef struct v16 {
    __m256 lo, hi;
} v16;
typedef struct w32 {
    __m256i lo, hi; /* columns 0-15 and 16-31 */
} w32;

static inline v16 v16_zero(void) { return (v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline v16 v16_load(const float *p) { return (v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline void v16_store(float *p, v16 v) { _mm256_storeu_ps(p, v.lo), _mm256_storeu_ps(p + 8, v.hi); }
static inline v16 v16_bcast(const float *p) { return (v16){_mm256_broadcast_ss(p), _mm256_broadcast_ss(p)}; }
static inline v16 v16_fma(v16 a, v16 b, v16 c)
{
    return (v16){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
static inline w32 w32_load(const gm_bf16 *p)
{
    return (w32){_mm256_loadu_si256((const __m256i *)(const void *)p),
                 _mm256_loadu_si256((const __m256i *)(const void *)(p + 16))};
}
static inline void w32_store_aligned(gm_bf16 *p, w32 v)
{
    _mm256_store_si256((__m256i *)(void *)p, v.lo), _mm256_store_si256((__m256i *)(void *)(p + 16), v.hi);
}
static inline v16 w32_even(w32 v)
{
    return (v16){_mm256_castsi256_ps(_mm256_slli_epi32(v.lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(v.hi, 16))};
}
static inline v16 w32_odd(w32 v)
{
    const __m256i m = _mm256_set1_epi32((int)0xFFFF0000u);
    return (v16){_mm256_castsi256_ps(_mm256_and_si256(v.lo, m)), _mm256_castsi256_ps(_mm256_and_si256(v.hi, m))};
}
static inline v16 v16_load_bf16(const gm_bf16 *p)
{
    const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p + 8)));
    return (v16){_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
}
static inline float v16_hsum(v16 v)
{
    const __m256 h = _mm256_add_ps(v.lo, v.hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline void v16_split32(const float *y, v16 *even, v16 *odd)
{
    float e[16], o[16];
    for (int i = 0; i < 16; i++)
        e[i] = y[2 * i], o[i] = y[2 * i + 1];
    *even = v16_load(e), *odd = v16_load(o);
}
static inline void v16_join32(float *y, v16 even, v16 odd)
{
    float e[16], o[16];
    v16_store(e, even), v16_store(o, odd);
    for (int i = 0; i < 16; i++)
        y[2 * i] = e[i], y[2 * i + 1] = o[i];
}

#endif
#endif
