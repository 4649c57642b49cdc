/* AVX2 + FMA pieces; this file is compiled for those instructions and only called when the CPU has them. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#include "kernels_impl.h"

enum { GEMV_AHEAD = 32 }; /* rows */

/* 8 bf16 -> 8 f32: widen to 32 bits and shift into the high half. */
static inline __m256 load8(const gm_bf16 *w)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)w);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

void gm_pack_avx2(float *dst, const gm_bf16 *W, long ldw, int k0, int k1, int n0, int ncols, int nr)
{
    /* row by row, so that W is read in contiguous runs; each row is split over the panels */
    const int kb = k1 - k0;
    for (int k = k0; k < k1; k++) {
        const gm_bf16 *w = W + (long)k * ldw + n0;
        /* the rows a little ahead, every cache line of them: W comes from memory once */
        const char *ahead = (const char *)(w + 16 * ldw);
        for (int b = 0; b < ncols * 2; b += 64)
            _mm_prefetch(ahead + b, _MM_HINT_T0);
        float *panel = dst;
        for (int n = 0; n < ncols; n += nr) {
            const int width = ncols - n < nr ? ncols - n : nr;
            float *d = panel + (long)(k - k0) * width;
            for (int j = 0; j < width; j += 8)
                _mm256_storeu_ps(d + j, load8(w + n + j));
            panel += (long)kb * width;
        }
    }
}

/*
** The register tiles: 4 rows x NR columns of accumulators in named
** registers (arrays of __m256 end up on the stack), one broadcast of X and
** NR/8 panel loads per k.
*/
static void micro_24(float *Y, long ldy, const float *X, long ldx, const float *P, int kb)
{
    float *y0 = Y, *y1 = Y + ldy, *y2 = Y + 2 * ldy, *y3 = Y + 3 * ldy;
    __m256 c00 = _mm256_loadu_ps(y0), c01 = _mm256_loadu_ps(y0 + 8), c02 = _mm256_loadu_ps(y0 + 16);
    __m256 c10 = _mm256_loadu_ps(y1), c11 = _mm256_loadu_ps(y1 + 8), c12 = _mm256_loadu_ps(y1 + 16);
    __m256 c20 = _mm256_loadu_ps(y2), c21 = _mm256_loadu_ps(y2 + 8), c22 = _mm256_loadu_ps(y2 + 16);
    __m256 c30 = _mm256_loadu_ps(y3), c31 = _mm256_loadu_ps(y3 + 8), c32 = _mm256_loadu_ps(y3 + 16);
    const float *x0 = X, *x1 = X + ldx, *x2 = X + 2 * ldx, *x3 = X + 3 * ldx;
    for (int k = 0; k < kb; k++, P += 24) {
        const __m256 w0 = _mm256_loadu_ps(P), w1 = _mm256_loadu_ps(P + 8), w2 = _mm256_loadu_ps(P + 16);
        __m256 b = _mm256_broadcast_ss(x0 + k);
        c00 = _mm256_fmadd_ps(b, w0, c00), c01 = _mm256_fmadd_ps(b, w1, c01), c02 = _mm256_fmadd_ps(b, w2, c02);
        b = _mm256_broadcast_ss(x1 + k);
        c10 = _mm256_fmadd_ps(b, w0, c10), c11 = _mm256_fmadd_ps(b, w1, c11), c12 = _mm256_fmadd_ps(b, w2, c12);
        b = _mm256_broadcast_ss(x2 + k);
        c20 = _mm256_fmadd_ps(b, w0, c20), c21 = _mm256_fmadd_ps(b, w1, c21), c22 = _mm256_fmadd_ps(b, w2, c22);
        b = _mm256_broadcast_ss(x3 + k);
        c30 = _mm256_fmadd_ps(b, w0, c30), c31 = _mm256_fmadd_ps(b, w1, c31), c32 = _mm256_fmadd_ps(b, w2, c32);
    }
    _mm256_storeu_ps(y0, c00), _mm256_storeu_ps(y0 + 8, c01), _mm256_storeu_ps(y0 + 16, c02);
    _mm256_storeu_ps(y1, c10), _mm256_storeu_ps(y1 + 8, c11), _mm256_storeu_ps(y1 + 16, c12);
    _mm256_storeu_ps(y2, c20), _mm256_storeu_ps(y2 + 8, c21), _mm256_storeu_ps(y2 + 16, c22);
    _mm256_storeu_ps(y3, c30), _mm256_storeu_ps(y3 + 8, c31), _mm256_storeu_ps(y3 + 16, c32);
}

static void micro_16(float *Y, long ldy, const float *X, long ldx, const float *P, int kb)
{
    float *y0 = Y, *y1 = Y + ldy, *y2 = Y + 2 * ldy, *y3 = Y + 3 * ldy;
    __m256 c00 = _mm256_loadu_ps(y0), c01 = _mm256_loadu_ps(y0 + 8);
    __m256 c10 = _mm256_loadu_ps(y1), c11 = _mm256_loadu_ps(y1 + 8);
    __m256 c20 = _mm256_loadu_ps(y2), c21 = _mm256_loadu_ps(y2 + 8);
    __m256 c30 = _mm256_loadu_ps(y3), c31 = _mm256_loadu_ps(y3 + 8);
    const float *x0 = X, *x1 = X + ldx, *x2 = X + 2 * ldx, *x3 = X + 3 * ldx;
    for (int k = 0; k < kb; k++, P += 16) {
        const __m256 w0 = _mm256_loadu_ps(P), w1 = _mm256_loadu_ps(P + 8);
        __m256 b = _mm256_broadcast_ss(x0 + k);
        c00 = _mm256_fmadd_ps(b, w0, c00), c01 = _mm256_fmadd_ps(b, w1, c01);
        b = _mm256_broadcast_ss(x1 + k);
        c10 = _mm256_fmadd_ps(b, w0, c10), c11 = _mm256_fmadd_ps(b, w1, c11);
        b = _mm256_broadcast_ss(x2 + k);
        c20 = _mm256_fmadd_ps(b, w0, c20), c21 = _mm256_fmadd_ps(b, w1, c21);
        b = _mm256_broadcast_ss(x3 + k);
        c30 = _mm256_fmadd_ps(b, w0, c30), c31 = _mm256_fmadd_ps(b, w1, c31);
    }
    _mm256_storeu_ps(y0, c00), _mm256_storeu_ps(y0 + 8, c01);
    _mm256_storeu_ps(y1, c10), _mm256_storeu_ps(y1 + 8, c11);
    _mm256_storeu_ps(y2, c20), _mm256_storeu_ps(y2 + 8, c21);
    _mm256_storeu_ps(y3, c30), _mm256_storeu_ps(y3 + 8, c31);
}

static void micro_8(float *Y, long ldy, const float *X, long ldx, const float *P, int kb)
{
    float *y0 = Y, *y1 = Y + ldy, *y2 = Y + 2 * ldy, *y3 = Y + 3 * ldy;
    __m256 c0 = _mm256_loadu_ps(y0), c1 = _mm256_loadu_ps(y1), c2 = _mm256_loadu_ps(y2), c3 = _mm256_loadu_ps(y3);
    for (int k = 0; k < kb; k++, P += 8) {
        const __m256 w = _mm256_loadu_ps(P);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(X + k), w, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(X + ldx + k), w, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(X + 2 * ldx + k), w, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(X + 3 * ldx + k), w, c3);
    }
    _mm256_storeu_ps(y0, c0), _mm256_storeu_ps(y1, c1), _mm256_storeu_ps(y2, c2), _mm256_storeu_ps(y3, c3);
}

/* Fewer than 4 rows: the same sums, one row at a time. */
static void micro_rows(float *Y, long ldy, const float *X, long ldx, const float *P, int kb, int nr, int rows)
{
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < nr; v += 8) {
            __m256 acc = _mm256_loadu_ps(Y + r * ldy + v);
            for (int k = 0; k < kb; k++)
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(X + r * ldx + k), _mm256_loadu_ps(P + (long)k * nr + v), acc);
            _mm256_storeu_ps(Y + r * ldy + v, acc);
        }
}

void gm_micro_avx2(float *Y, long ldy, const float *X, long ldx, const float *P, int kb, int nr, int rows)
{
    if (rows < 4)
        micro_rows(Y, ldy, X, ldx, P, kb, nr, rows);
    else if (nr == 24)
        micro_24(Y, ldy, X, ldx, P, kb);
    else if (nr == 16)
        micro_16(Y, ldy, X, ldx, P, kb);
    else
        micro_8(Y, ldy, X, ldx, P, kb);
}

void gm_gemv_avx2(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1)
{
    /*
    ** Rows of W in order, four at a time, the band's sums kept in y (L1);
    ** each sum still adds its k terms in order. A band is a short run of
    ** each row, too short for the hardware prefetcher, so each step also
    ** fetches one cache line of the rows AHEAD rows further on: the
    ** memory reads stay in flight while the sums are done.
    */
    const int n8 = n0 + (n1 - n0) / 8 * 8;
    for (int n = n0; n < n1; n++)
        y[n] = 0.0f;
    int k = 0;
    for (; k + 4 <= K; k += 4) {
        const gm_bf16 *w0 = W + (long)k * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
        const __m256 b0 = _mm256_broadcast_ss(x + k), b1 = _mm256_broadcast_ss(x + k + 1);
        const __m256 b2 = _mm256_broadcast_ss(x + k + 2), b3 = _mm256_broadcast_ss(x + k + 3);
        const char *ahead = (const char *)(w0 + GEMV_AHEAD * ldw + n0);
        const int fetch = k + GEMV_AHEAD + 4 <= K;
        for (int n = n0, i = 0; n < n8; n += 8, i++) {
            if (fetch) /* step i: line i / 4 of row i % 4 */
                _mm_prefetch(ahead + (i & 3) * ldw * 2 + (i >> 2) * 64, _MM_HINT_T0);
            __m256 a = _mm256_loadu_ps(y + n);
            a = _mm256_fmadd_ps(b0, load8(w0 + n), a);
            a = _mm256_fmadd_ps(b1, load8(w1 + n), a);
            a = _mm256_fmadd_ps(b2, load8(w2 + n), a);
            a = _mm256_fmadd_ps(b3, load8(w3 + n), a);
            _mm256_storeu_ps(y + n, a);
        }
    }
    for (; k < K; k++) {
        const __m256 b = _mm256_broadcast_ss(x + k);
        for (int n = n0; n < n8; n += 8)
            _mm256_storeu_ps(y + n, _mm256_fmadd_ps(b, load8(W + (long)k * ldw + n), _mm256_loadu_ps(y + n)));
    }
    for (int n = n8; n < n1; n++) {
        float s = 0.0f;
        for (int kk = 0; kk < K; kk++)
            s += x[kk] * gm_bf16_to_f32(W[(long)kk * ldw + n]);
        y[n] = s;
    }
}

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One row of X against four rows of W: four independent sums, so FMA latency is hidden. */
static void dot4(float *Y, const float *X, const gm_bf16 *Wn, long ldw, int K)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        const __m256 x = _mm256_loadu_ps(X + k);
        a0 = _mm256_fmadd_ps(x, load8(Wn + k), a0);
        a1 = _mm256_fmadd_ps(x, load8(Wn + ldw + k), a1);
        a2 = _mm256_fmadd_ps(x, load8(Wn + 2 * ldw + k), a2);
        a3 = _mm256_fmadd_ps(x, load8(Wn + 3 * ldw + k), a3);
    }
    __m256 acc[4] = {a0, a1, a2, a3};
    for (int r = 0; r < 4; r++) {
        float s = hsum(acc[r]);
        for (int j = k; j < K; j++)
            s += X[j] * gm_bf16_to_f32(Wn[r * ldw + j]);
        Y[r] = s;
    }
}

void gm_dot_rows_avx2(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1)
{
    int n = n0;
    for (; n + 4 <= n1; n += 4)
        dot4(Y + n, X, W + (long)n * K, K, K);
    for (; n < n1; n++)
        gm_dot_avx2(Y + n, 0, X, 0, W + (long)n * K, K, 1);
}

void gm_dot_avx2(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows)
{
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        const __m256 w = load8(Wn + k);
        for (int r = 0; r < rows; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(X + (long)r * ldx + k), w, acc[r]);
    }
    for (int r = 0; r < rows; r++) {
        float s = hsum(acc[r]);
        for (int j = k; j < K; j++)
            s += X[(long)r * ldx + j] * gm_bf16_to_f32(Wn[j]);
        Y[(long)r * ldy] = s;
    }
}

void gm_finish_avx2(float *y, const gm_bf16 *bias, int n, int round)
{
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7FFF);
    const __m256i high = _mm256_set1_epi32((int)0xFFFF0000u), abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i inf = _mm256_set1_epi32(0x7F800000), qnan = _mm256_set1_epi32(0x7FC00000);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(y + i);
        if (bias)
            v = _mm256_add_ps(v, load8(bias + i));
        if (round) { /* to nearest bf16, ties to even; every NaN to 0x7FC0, as gm_f32_to_bf16 */
            const __m256i u = _mm256_castps_si256(v);
            __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, half), _mm256_and_si256(_mm256_srli_epi32(u, 16), one));
            r = _mm256_and_si256(r, high);
            const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
            v = _mm256_castsi256_ps(_mm256_blendv_epi8(r, qnan, nan));
        }
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) {
        float v = y[i] + (bias ? gm_bf16_to_f32(bias[i]) : 0.0f);
        y[i] = round ? gm_bf16_to_f32(gm_f32_to_bf16(v)) : v;
    }
}
