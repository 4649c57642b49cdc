/*
** Internal: the 16-lane vector operations of the AVX-512 tier, the twin of
** v8.h (the same operations at 16 lanes; vf.h gives both the names the
** shared kernels are written in), in two implementations of the same
** semantics: the AVX-512 instructions themselves, and, with GM_V16_MODEL
** defined, a model made of two of v8.h's AVX2 halves (lanes 0-7 and 8-15),
** so that the AVX-512 kernels' source runs and is tested on a CPU without
** AVX-512 (avx512_model.c). Every operation is lane-wise IEEE arithmetic or
** a data movement, and the one sum across lanes (v16_hsum) adds the two
** halves and then as v8_hsum does in both, so the two give the same bits.
** (The first also runs without AVX-512, its instructions emulated, in the
** tests' avx512-simde tier: simde512.h.)
**
**   v16: 16 f32 lanes.  v16w: 32 bf16 values, two to a 32-bit lane (the even
**   column low, the odd one high), as 64 bytes of a row of W load, or one
**   pair in every lane (v16w_pair).
*/
#ifndef GM_V16_H
#define GM_V16_H

#include <immintrin.h>

#include "gm/bf16.h"
#include "v8.h"

#ifndef GM_V16_MODEL

typedef __m512 v16;
typedef __m512i v16w;

static inline v16 v16_zero(void) { return _mm512_setzero_ps(); }
static inline v16 v16_set1(float x) { return _mm512_set1_ps(x); }
static inline v16 v16_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v16_store(float *p, v16 v) { _mm512_storeu_ps(p, v); }
static inline v16 v16_bcast(const float *p) { return _mm512_set1_ps(*p); }
static inline v16 v16_fma(v16 a, v16 b, v16 c) { return _mm512_fmadd_ps(a, b, c); }
static inline v16 v16_add(v16 a, v16 b) { return _mm512_add_ps(a, b); }
static inline v16 v16_sub(v16 a, v16 b) { return _mm512_sub_ps(a, b); }
static inline v16 v16_mul(v16 a, v16 b) { return _mm512_mul_ps(a, b); }
static inline v16 v16_div(v16 a, v16 b) { return _mm512_div_ps(a, b); }
static inline v16 v16_min(v16 a, v16 b) { return _mm512_min_ps(a, b); }
static inline v16 v16_max(v16 a, v16 b) { return _mm512_max_ps(a, b); }

/* lanes [0, n) of p, 0 <= n <= 16, under a mask: the others are 0 and not read (or written) */
static inline __mmask16 v16_mask(int n) { return (__mmask16)((1u << n) - 1u); }
static inline v16 v16_load_part(const float *p, int n) { return _mm512_maskz_loadu_ps(v16_mask(n), p); }
static inline void v16_store_part(float *p, int n, v16 v) { _mm512_mask_storeu_ps(p, v16_mask(n), v); }

static inline v16 v16_load_bf16(const gm_bf16 *p)
{
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline v16w v16w_load(const gm_bf16 *p) { return _mm512_loadu_si512((const void *)p); }
static inline v16w v16w_pair(const gm_bf16 *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}
static inline v16 v16w_even(v16w v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
static inline v16 v16w_odd(v16w v)
{
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* the sum of the 16 lanes: the two halves of 8 added, then as v8_hsum */
static inline float v16_hsum(v16 v)
{
    return v8_hsum(_mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

/* y[0..32) into its even and odd columns, and back */
static inline void v16_split(const float *y, v16 *even, v16 *odd)
{
    const __m512i e = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i o = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512 a = _mm512_loadu_ps(y), b = _mm512_loadu_ps(y + 16);
    *even = _mm512_permutex2var_ps(a, e, b);
    *odd = _mm512_permutex2var_ps(a, o, b);
}

static inline void v16_join(float *y, v16 even, v16 odd)
{
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    _mm512_storeu_ps(y, _mm512_permutex2var_ps(even, lo, odd));
    _mm512_storeu_ps(y + 16, _mm512_permutex2var_ps(even, hi, odd));
}

static inline v16 v16_round_bf16(v16 v)
{
    const __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)),
                                 _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
    r = _mm512_and_si512(r, _mm512_set1_epi32((int)0xFFFF0000u));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                   _mm512_set1_epi32(0x7F800000));
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC00000)));
}

static inline void v16_exp2_halves(v16 t, v16 *a, v16 *b)
{
    const __m512i n = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000));
    const __m512i n1 = _mm512_srai_epi32(n, 1), n2 = _mm512_sub_epi32(n, n1), bias = _mm512_set1_epi32(127);
    *a = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    *b = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
}

static inline v16 v16_nan_pass(v16 x, v16 r)
{
    return _mm512_mask_add_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, x);
}

#else /* the model: two AVX2 halves, each v8.h's operation */

typedef struct v16 {
    v8 lo, hi;
} v16;
typedef struct v16w {
    v8w lo, hi; /* columns 0-15 and 16-31 */
} v16w;

static inline v16 v16_zero(void) { return (v16){v8_zero(), v8_zero()}; }
static inline v16 v16_set1(float x) { return (v16){v8_set1(x), v8_set1(x)}; }
static inline v16 v16_load(const float *p) { return (v16){v8_load(p), v8_load(p + 8)}; }
static inline void v16_store(float *p, v16 v) { v8_store(p, v.lo), v8_store(p + 8, v.hi); }
static inline v16 v16_bcast(const float *p) { return (v16){v8_bcast(p), v8_bcast(p)}; }
static inline v16 v16_fma(v16 a, v16 b, v16 c) { return (v16){v8_fma(a.lo, b.lo, c.lo), v8_fma(a.hi, b.hi, c.hi)}; }
static inline v16 v16_add(v16 a, v16 b) { return (v16){v8_add(a.lo, b.lo), v8_add(a.hi, b.hi)}; }
static inline v16 v16_sub(v16 a, v16 b) { return (v16){v8_sub(a.lo, b.lo), v8_sub(a.hi, b.hi)}; }
static inline v16 v16_mul(v16 a, v16 b) { return (v16){v8_mul(a.lo, b.lo), v8_mul(a.hi, b.hi)}; }
static inline v16 v16_div(v16 a, v16 b) { return (v16){v8_div(a.lo, b.lo), v8_div(a.hi, b.hi)}; }
static inline v16 v16_min(v16 a, v16 b) { return (v16){v8_min(a.lo, b.lo), v8_min(a.hi, b.hi)}; }
static inline v16 v16_max(v16 a, v16 b) { return (v16){v8_max(a.lo, b.lo), v8_max(a.hi, b.hi)}; }
static inline v16 v16_load_part(const float *p, int n)
{
    return (v16){v8_load_part(p, n < 8 ? n : 8), v8_load_part(p + 8, n - 8)};
}
static inline void v16_store_part(float *p, int n, v16 v)
{
    v8_store_part(p, n < 8 ? n : 8, v.lo), v8_store_part(p + 8, n - 8, v.hi);
}
static inline v16 v16_load_bf16(const gm_bf16 *p) { return (v16){v8_load_bf16(p), v8_load_bf16(p + 8)}; }
static inline v16w v16w_load(const gm_bf16 *p) { return (v16w){v8w_load(p), v8w_load(p + 16)}; }
static inline v16w v16w_pair(const gm_bf16 *p) { return (v16w){v8w_pair(p), v8w_pair(p)}; }
static inline v16 v16w_even(v16w v) { return (v16){v8w_even(v.lo), v8w_even(v.hi)}; }
static inline v16 v16w_odd(v16w v) { return (v16){v8w_odd(v.lo), v8w_odd(v.hi)}; }
static inline float v16_hsum(v16 v) { return v8_hsum(v8_add(v.lo, v.hi)); }
static inline void v16_split(const float *y, v16 *even, v16 *odd)
{
    v8_split(y, &even->lo, &odd->lo), v8_split(y + 16, &even->hi, &odd->hi);
}
static inline void v16_join(float *y, v16 even, v16 odd)
{
    v8_join(y, even.lo, odd.lo), v8_join(y + 16, even.hi, odd.hi);
}
static inline v16 v16_round_bf16(v16 v) { return (v16){v8_round_bf16(v.lo), v8_round_bf16(v.hi)}; }
static inline void v16_exp2_halves(v16 t, v16 *a, v16 *b)
{
    v8_exp2_halves(t.lo, &a->lo, &b->lo), v8_exp2_halves(t.hi, &a->hi, &b->hi);
}
static inline v16 v16_nan_pass(v16 x, v16 r) { return (v16){v8_nan_pass(x.lo, r.lo), v8_nan_pass(x.hi, r.hi)}; }

#endif
#endif
