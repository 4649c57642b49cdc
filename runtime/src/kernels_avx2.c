/* AVX2 + FMA tiles; this file is compiled for those instructions and only called when the CPU has them. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#include "kernels_impl.h"

/* 8 bf16 -> 8 f32: widen to 32 bits and shift into the high half. */
static inline __m256 load8(const gm_bf16 *w)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)w);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

void gm_tile_avx2(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *W, int ldw, int k0, int k1,
                  int rows)
{
    __m256 acc[4][2];
    for (int r = 0; r < 4; r++) {
        acc[r][0] = r < rows ? _mm256_loadu_ps(Y + (long)r * ldy) : _mm256_setzero_ps();
        acc[r][1] = r < rows ? _mm256_loadu_ps(Y + (long)r * ldy + 8) : _mm256_setzero_ps();
    }
    if (rows == 4) {
        for (int k = k0; k < k1; k++) {
            const __m256 w0 = load8(W + (long)k * ldw), w1 = load8(W + (long)k * ldw + 8);
            for (int r = 0; r < 4; r++) {
                const __m256 x = _mm256_broadcast_ss(X + (long)r * ldx + k);
                acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
            }
        }
    } else {
        for (int k = k0; k < k1; k++) {
            const __m256 w0 = load8(W + (long)k * ldw), w1 = load8(W + (long)k * ldw + 8);
            for (int r = 0; r < rows; r++) {
                const __m256 x = _mm256_broadcast_ss(X + (long)r * ldx + k);
                acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        _mm256_storeu_ps(Y + (long)r * ldy, acc[r][0]);
        _mm256_storeu_ps(Y + (long)r * ldy + 8, acc[r][1]);
    }
}

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void gm_dot_avx2(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *Wn, int K, int rows)
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
