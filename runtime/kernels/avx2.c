/*
** The AVX2 + FMA tier: compiled for those instructions, and only called
** when the CPU has both (dispatch.c asks gm_cpu_features). Its products and
** attention's products are vec_kernels.h at 8 lanes (v8.h), the source the
** AVX-512 tier runs at 16; the element-wise steps and the load-time
** transposes are its own.
*/
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"

#define GM_VF_LANES 8
#define TIER(x) x##_avx2
#include "vf.h"
#include "vec_kernels.h"

/* attention's products, for the wider tiers that name them (kernels_impl.h) */
void gm_attn_scores_avx2(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk, int d)
{
    attn_scores_avx2(S, lds, Q, ldq, nq, K, ldk, nk, d);
}

void gm_attn_values_avx2(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk, int d,
                         int accumulate)
{
    attn_values_avx2(O, ldo, P, ldp, nq, V, ldv, nk, d, accumulate);
}

/* ---------------------------------------------------------------------- */
/* the steps between the products */

/* 8 bf16 -> 8 f32: widen to 32 bits and shift into the high half. */
static inline __m256 load8(const gm_bf16 *w)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)w);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* To nearest bf16, ties to even; every NaN to 0x7FC0: gm_f32_to_bf16, eight at a time. */
static inline __m256 round8(__m256 v)
{
    const __m256i u = _mm256_castps_si256(v);
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)),
                                 _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)));
    r = _mm256_and_si256(r, _mm256_set1_epi32((int)0xFFFF0000u));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                           _mm256_set1_epi32(0x7F800000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC00000), nan));
}

static void finish_avx2(float *y, const gm_bf16 *bias, int n, int round)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(y + i);
        if (bias)
            v = _mm256_add_ps(v, load8(bias + i));
        _mm256_storeu_ps(y + i, round ? round8(v) : v);
    }
    for (; i < n; i++)
        y[i] = round1(bias ? y[i] + gm_bf16_to_f32(bias[i]) : y[i], round);
}

static void add_round_avx2(float *x, const float *y, int n, int round)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
        _mm256_storeu_ps(x + i, round ? round8(v) : v);
    }
    for (; i < n; i++)
        x[i] = round1(x[i] + y[i], round);
}

static void norm_scale_avx2(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round)
{
    const __m256 r = _mm256_set1_ps(inv);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), r);
        v = _mm256_mul_ps(load8(w + i), round ? round8(v) : v);
        _mm256_storeu_ps(y + i, round ? round8(v) : v);
    }
    for (; i < n; i++)
        y[i] = round1(gm_bf16_to_f32(w[i]) * round1(x[i] * inv, round), round);
}

static void swiglu_avx2(float *g, const float *u, int n, int round)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        float e[8]; /* the C library's expf, as the scalar path, so every value is the same */
        for (int j = 0; j < 8; j++)
            e[j] = expf(-g[i + j]);
        __m256 a = _mm256_div_ps(_mm256_loadu_ps(g + i), _mm256_add_ps(one, _mm256_loadu_ps(e)));
        a = _mm256_mul_ps(round ? round8(a) : a, _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(g + i, round ? round8(a) : a);
    }
    for (; i < n; i++)
        g[i] = round1(round1(g[i] / (1.0f + expf(-g[i])), round) * u[i], round);
}

/* ---------------------------------------------------------------------- */
/* load time: transposes */

/*
** 16 x 16 values of src (rows, stride ls) into o[c] = column c, rows 0-15.
** The unpacks work within 128-bit halves, so each half is an 8-column
** transpose of its own (columns 0-7 low, 8-15 high): three rounds of
** unpacks per 8 rows, then the two groups of 8 rows joined half by half.
*/
static inline void transpose16(__m256i o[16], const gm_bf16 *src, size_t ls)
{
    __m256i col[2][8]; /* [rows 0-7 or 8-15][c]: column c in the low half, c + 8 in the high */
    for (int g = 0; g < 2; g++) {
        __m256i a[8], p[8], q[8];
        for (int i = 0; i < 8; i++)
            a[i] = _mm256_loadu_si256((const __m256i *)(const void *)(src + (8 * g + i) * ls));
        for (int i = 0; i < 4; i++) {
            p[i] = _mm256_unpacklo_epi16(a[2 * i], a[2 * i + 1]);     /* rows 2i, 2i+1; columns 0-3 */
            p[i + 4] = _mm256_unpackhi_epi16(a[2 * i], a[2 * i + 1]); /* columns 4-7 */
        }
        for (int h = 0; h < 2; h++) {
            const __m256i *ph = p + 4 * h;
            q[4 * h] = _mm256_unpacklo_epi32(ph[0], ph[1]);     /* rows 0-3, columns 0-1 (+4h) */
            q[4 * h + 1] = _mm256_unpackhi_epi32(ph[0], ph[1]); /* rows 0-3, columns 2-3 */
            q[4 * h + 2] = _mm256_unpacklo_epi32(ph[2], ph[3]); /* rows 4-7, columns 0-1 */
            q[4 * h + 3] = _mm256_unpackhi_epi32(ph[2], ph[3]); /* rows 4-7, columns 2-3 */
            col[g][4 * h] = _mm256_unpacklo_epi64(q[4 * h], q[4 * h + 2]);
            col[g][4 * h + 1] = _mm256_unpackhi_epi64(q[4 * h], q[4 * h + 2]);
            col[g][4 * h + 2] = _mm256_unpacklo_epi64(q[4 * h + 1], q[4 * h + 3]);
            col[g][4 * h + 3] = _mm256_unpackhi_epi64(q[4 * h + 1], q[4 * h + 3]);
        }
    }
    for (int c = 0; c < 8; c++) {
        o[c] = _mm256_permute2x128_si256(col[0][c], col[1][c], 0x20);
        o[c + 8] = _mm256_permute2x128_si256(col[0][c], col[1][c], 0x31);
    }
}

/*
** 32 rows x 16 columns of src into 16 destination runs of 32 values (64
** bytes each, one cache line when aligned), streamed past the cache then.
*/
static void transpose32x16(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    __m256i top[16], bottom[16];
    for (int i = 0; i < 32; i++) /* these rows 128 columns on: the source is read in 32-byte steps across rows */
        _mm_prefetch((const char *)(src + i * ls + 128), _MM_HINT_T0);
    transpose16(top, src, ls);
    transpose16(bottom, src + 16 * ls, ls);
    const int aligned = (((uintptr_t)dst | ld * 2) % 32) == 0;
    for (int c = 0; c < 16; c++) {
        __m256i *d = (__m256i *)(void *)(dst + c * ld);
        if (aligned)
            _mm256_stream_si256(d, top[c]), _mm256_stream_si256(d + 1, bottom[c]);
        else
            _mm256_storeu_si256(d, top[c]), _mm256_storeu_si256(d + 1, bottom[c]);
    }
}

/*
** The 32 x 16 tiles of a block; the rows past the last 32 and the columns
** past the last 16 go to the portable transpose.
*/
static void transpose_avx2(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0)
{
    const size_t n32 = n / 32 * 32, c16 = n32 ? cols / 16 * 16 : 0;
    for (size_t c = 0; c < c16; c += 16)
        for (size_t r = 0; r < n32; r += 32)
            transpose32x16(dst + c * rows + r0 + r, rows, blk + r * cols + c, cols);
    _mm_sfence();
    gm_transpose_part_portable(dst, blk + n32 * cols, n - n32, rows, cols, r0 + n32, 0, c16);
    gm_transpose_part_portable(dst, blk, n, rows, cols, r0, c16, cols);
}

const gm_tier gm_tier_avx2 = {
    .name = "avx2",
    .needs = GM_CPU_AVX2 | GM_CPU_FMA,
    .band = band_avx2,
    .gemv = gemv_avx2,
    .dot = dot_avx2,
    .dot_rows = dot_rows_avx2,
    .finish = finish_avx2,
    .add_round = add_round_avx2,
    .norm_scale = norm_scale_avx2,
    .swiglu = swiglu_avx2,
    .transpose = transpose_avx2,
    .attn_scores = attn_scores_avx2,
    .attn_values = attn_values_avx2,
};
