/*
** Internal: floats that hold bf16 values into the pairs of the bf16
** dot-product instructions (TDPBF16PS, VDPBF16PS), in AVX-512 registers:
** each float's bf16 half, the floats' other bits checked, and 16 x 16
** 32-bit values (pairs) transposed. Shared by amx.c and avx512bf16.c, in
** their hardware builds and their builds on emulated AVX-512 (simde512.h;
** their software models pack value by value).
*/
#ifndef GM_PAIRS16_H
#define GM_PAIRS16_H

#include <immintrin.h>

/*
** r[i][j] to r[j][i]: sixteen rows of sixteen 32-bit values, transposed in
** registers. Inlined and unrolled, so that the stages between stay in
** registers (as a function over arrays and loops, GCC ran every stage
** through the stack); where a caller unrolls its loads and stores of r as
** well (amx.c's), r stays in registers too.
*/
static inline __attribute__((always_inline)) void transpose16(__m512i r[16])
{
    __m512i a[16], b[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
        b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    /* b[4g + q] holds, in each 128-bit lane L, column 4L + q of rows 4g..4g+3 */
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        const __m512i x0 = _mm512_shuffle_i32x4(b[q], b[4 + q], 0x44), x1 = _mm512_shuffle_i32x4(b[q], b[4 + q], 0xEE);
        const __m512i y0 = _mm512_shuffle_i32x4(b[8 + q], b[12 + q], 0x44);
        const __m512i y1 = _mm512_shuffle_i32x4(b[8 + q], b[12 + q], 0xEE);
        r[q] = _mm512_shuffle_i32x4(x0, y0, 0x88);
        r[4 + q] = _mm512_shuffle_i32x4(x0, y0, 0xDD);
        r[8 + q] = _mm512_shuffle_i32x4(x1, y1, 0x88);
        r[12 + q] = _mm512_shuffle_i32x4(x1, y1, 0xDD);
    }
}

/* The bf16 parts of 32 floats (a the first 16, b the next) in order: each float's high half, one permute */
static inline __m512i high_halves(__m512i a, __m512i b)
{
    const __m512i hi = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25,
                                        23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi16(a, hi, b);
}

/* Whether a float or'ed into low had bits below its bf16 part: it was not a bf16 value */
static inline int has_low_bits(__m512i low) { return _mm512_test_epi16_mask(low, _mm512_set1_epi32(0xFFFF)) != 0; }

#endif
