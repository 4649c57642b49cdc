/*
** Internal: the 8-lane vector operations of the AVX2 tier (AVX2 + FMA), the
** twin of v16.h: the same operations at 8 lanes, so that one source of
** kernels (vec_kernels.h, through vf.h) serves both tiers, and v16.h's
** software model is made of two of these. Every operation is lane-wise IEEE
** arithmetic or a data movement.
**
**   v8: 8 f32 lanes.  v8w: 16 bf16 values, two to a 32-bit lane (the even
**   column low, the odd one high), as 32 bytes of a row of W load.
*/
#ifndef GM_V8_H
#define GM_V8_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "gm/bf16.h"

typedef __m256 v8;
typedef __m256i v8w;

static inline v8 v8_zero(void) { return _mm256_setzero_ps(); }
static inline v8 v8_set1(float x) { return _mm256_set1_ps(x); }
static inline v8 v8_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v8_store(float *p, v8 v) { _mm256_storeu_ps(p, v); }
static inline v8 v8_bcast(const float *p) { return _mm256_broadcast_ss(p); }
static inline v8 v8_fma(v8 a, v8 b, v8 c) { return _mm256_fmadd_ps(a, b, c); }
static inline v8 v8_add(v8 a, v8 b) { return _mm256_add_ps(a, b); }
static inline v8 v8_sub(v8 a, v8 b) { return _mm256_sub_ps(a, b); }
static inline v8 v8_mul(v8 a, v8 b) { return _mm256_mul_ps(a, b); }
static inline v8 v8_div(v8 a, v8 b) { return _mm256_div_ps(a, b); }
/* as MINPS and MAXPS: a < b ? a : b and a > b ? a : b (b where either is NaN) */
static inline v8 v8_min(v8 a, v8 b) { return _mm256_min_ps(a, b); }
static inline v8 v8_max(v8 a, v8 b) { return _mm256_max_ps(a, b); }

/* lanes [0, n) of p, 0 <= n <= 8; the others are 0 and not read (or written, by store_part) */
static inline __m256i v8_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline v8 v8_load_part(const float *p, int n) { return _mm256_maskload_ps(p, v8_mask(n)); }
static inline void v8_store_part(float *p, int n, v8 v) { _mm256_maskstore_ps(p, v8_mask(n), v); }

/* 8 bf16 as f32: widened to 32 bits and shifted into the high half */
static inline v8 v8_load_bf16(const gm_bf16 *p)
{
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline v8w v8w_load(const gm_bf16 *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
/* the pair p[0], p[1] in every 32-bit lane */
static inline v8w v8w_pair(const gm_bf16 *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}
/* the even columns (0, 2, .., 14) as f32: shifted up; the odd ones: masked. One shift and one and. */
static inline v8 v8w_even(v8w v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
static inline v8 v8w_odd(v8w v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* the sum of the 8 lanes: 4 + 4, then 2 + 2, then 1 + 1 */
static inline float v8_hsum(v8 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* y[0..16) into its even and odd columns, and back */
static inline void v8_split(const float *y, v8 *even, v8 *odd)
{
    const __m256 a = _mm256_loadu_ps(y), b = _mm256_loadu_ps(y + 8);
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

static inline void v8_join(float *y, v8 even, v8 odd)
{
    const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    _mm256_storeu_ps(y, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(y + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

/* To the nearest bf16 (as f32), ties to even; every NaN to 0x7FC0: gm_f32_to_bf16, lane by lane. */
static inline v8 v8_round_bf16(v8 v)
{
    const __m256i u = _mm256_castps_si256(v);
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)),
                                 _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)));
    r = _mm256_and_si256(r, _mm256_set1_epi32((int)0xFFFF0000u));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                           _mm256_set1_epi32(0x7F800000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC00000), nan));
}

/*
** t holds 1.5 * 2^23 + n, n an integer in [-150, 129] (vf_exp's rounding):
** *a = 2^(n >> 1) and *b = 2^(n - (n >> 1)), two normal powers of two whose
** product is 2^n.
*/
static inline void v8_exp2_halves(v8 t, v8 *a, v8 *b)
{
    const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000));
    const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1), bias = _mm256_set1_epi32(127);
    *a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    *b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
}

/* r, but x + x (x, quieted) in the lanes where x is a NaN */
static inline v8 v8_nan_pass(v8 x, v8 r)
{
    return _mm256_blendv_ps(r, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* r[i][j] to r[j][i]: eight vectors of eight values, transposed in registers */
static inline void v8_transpose8_regs(__m256 r[8])
{
    /* pairs of rows interleaved, then quads: column c of rows 0-3 (low half) and c + 4 (high half) */
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* Rows [0, 8) of src (each 8 32-bit words, ls apart) as columns: o[j] holds word j of each row. */
static inline void v8_transpose8_words(__m256i o[8], const uint32_t *src, size_t ls)
{
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i * ls)));
    v8_transpose8_regs(r);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        o[j] = _mm256_castps_si256(r[j]);
}

/* dst[c * ldd + r] = src[r * lds + c] for r, c < 8: eight rows of eight floats to eight columns */
static inline void v8_transpose8(float *dst, long ldd, const float *src, long lds)
{
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(src + i * lds);
    v8_transpose8_regs(r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        _mm256_storeu_ps(dst + i * ldd, r[i]);
}

#endif
