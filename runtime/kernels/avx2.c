/*
** The AVX2 + FMA tier: compiled for those instructions, and only called
** when the CPU has both (dispatch.c asks gm_cpu_features).
*/
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"

enum { GEMV_AHEAD = 32 }; /* rows */

/* 8 bf16 -> 8 f32: widen to 32 bits and shift into the high half. */
static inline __m256 load8(const gm_bf16 *w)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)w);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* ---------------------------------------------------------------------- */
/* many rows: register tiles that widen bf16 weights as they load them */

/*
** 16 bf16 weights as 8 32-bit lanes (odd column high): shifted up, the even
** columns (0, 2, .., 14) as f32; masked, the odd ones (1, 3, .., 15). One
** shift and one and, neither on the FMA ports' critical path, so the tiles
** read W as it is, with no packed copy.
*/
#define WIDEN16(v, even, odd)                                                                   \
    const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));                          \
    const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)))

/* y[0..16) into even and odd columns, and back. */
static inline void split16(const float *y, __m256 *even, __m256 *odd)
{
    const __m256 a = _mm256_loadu_ps(y), b = _mm256_loadu_ps(y + 8);
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

static inline void join16(float *y, __m256 even, __m256 odd)
{
    const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    _mm256_storeu_ps(y, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(y + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

enum { FETCH_EVERY = 4 }; /* k-steps (~25 cycles of FMAs) per fetched line (gm_fetch) */

/*
** Y[0..R)[0..16) (+)= X[0..R)[0..kb) @ W[0..kb)[0..16), R = 6 or 4: 2R
** accumulators in registers, one load and two widening ops of W and R
** broadcasts of X per k; each sum adds its k terms in order. `first`: Y
** starts at 0. With copy set, each row of 16 weights read is also stored
** to P, contiguous, for the later blocks of rows. Written once for both
** R as a macro so that the accumulators stay named registers (8 of them,
** at R = 4, are just enough to cover the FMA latency).
*/
#define TILE(R, name, copy)                                                                                         \
    static void name(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *W, long ldw, gm_bf16 *P, int kb, \
                     int first, gm_ahead *fa)                                                                      \
    {                                                                                                              \
        gm_ahead a = *fa;                                                                                          \
        __m256 e0, o0, e1, o1, e2, o2, e3, o3, e4, o4, e5, o5;                                                     \
        e0 = o0 = e1 = o1 = e2 = o2 = e3 = o3 = e4 = o4 = e5 = o5 = _mm256_setzero_ps();                           \
        if (!first) {                                                                                              \
            split16(Y, &e0, &o0), split16(Y + ldy, &e1, &o1);                                                      \
            split16(Y + 2 * ldy, &e2, &o2), split16(Y + 3 * ldy, &e3, &o3);                                        \
            if (R == 6)                                                                                            \
                split16(Y + 4 * ldy, &e4, &o4), split16(Y + 5 * ldy, &e5, &o5);                                    \
        }                                                                                                          \
        const float *x0 = X, *x1 = X + ldx, *x2 = X + 2 * ldx, *x3 = X + 3 * ldx, *x4 = X + 4 * ldx;               \
        const float *x5 = X + 5 * ldx;                                                                             \
        for (int k = 0; k < kb; k++, W += ldw) {                                                                   \
            if (k % FETCH_EVERY == 0)                                                                              \
                gm_fetch(&a);                                                                                      \
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)W);                                \
            if (copy)                                                                                              \
                _mm256_store_si256((__m256i *)(void *)(P + 16 * k), v);                                            \
            WIDEN16(v, we, wo);                                                                                    \
            __m256 b = _mm256_broadcast_ss(x0 + k);                                                                \
            e0 = _mm256_fmadd_ps(b, we, e0), o0 = _mm256_fmadd_ps(b, wo, o0);                                      \
            b = _mm256_broadcast_ss(x1 + k);                                                                       \
            e1 = _mm256_fmadd_ps(b, we, e1), o1 = _mm256_fmadd_ps(b, wo, o1);                                      \
            b = _mm256_broadcast_ss(x2 + k);                                                                       \
            e2 = _mm256_fmadd_ps(b, we, e2), o2 = _mm256_fmadd_ps(b, wo, o2);                                      \
            b = _mm256_broadcast_ss(x3 + k);                                                                       \
            e3 = _mm256_fmadd_ps(b, we, e3), o3 = _mm256_fmadd_ps(b, wo, o3);                                      \
            if (R == 6) {                                                                                          \
                b = _mm256_broadcast_ss(x4 + k);                                                                   \
                e4 = _mm256_fmadd_ps(b, we, e4), o4 = _mm256_fmadd_ps(b, wo, o4);                                  \
                b = _mm256_broadcast_ss(x5 + k);                                                                   \
                e5 = _mm256_fmadd_ps(b, we, e5), o5 = _mm256_fmadd_ps(b, wo, o5);                                  \
            }                                                                                                      \
        }                                                                                                          \
        join16(Y, e0, o0), join16(Y + ldy, e1, o1), join16(Y + 2 * ldy, e2, o2), join16(Y + 3 * ldy, e3, o3);      \
        if (R == 6)                                                                                                \
            join16(Y + 4 * ldy, e4, o4), join16(Y + 5 * ldy, e5, o5);                                              \
        *fa = a;                                                                                                   \
    }

TILE(6, tile6, 0)
TILE(6, tile6_copy, 1)
TILE(4, tile4, 0)
TILE(4, tile4_copy, 1)

typedef void (*tile_fn)(float *, long, const float *, long, const gm_bf16 *, long, gm_bf16 *, int, int, gm_ahead *);

/* One to three rows (the last of a call), one at a time; copies when P is given. */
static void tile_rows(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *W, long ldw, gm_bf16 *P, int kb,
                      int first, int rows, gm_ahead *fa)
{
    for (int r = 0; r < rows; r++) {
        __m256 e = _mm256_setzero_ps(), o = e;
        if (!first)
            split16(Y + r * ldy, &e, &o);
        for (int k = 0; k < kb; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(W + k * ldw));
            if (P && r == 0)
                _mm256_store_si256((__m256i *)(void *)(P + 16 * k), v);
            WIDEN16(v, we, wo);
            const __m256 b = _mm256_broadcast_ss(X + r * ldx + k);
            e = _mm256_fmadd_ps(b, we, e), o = _mm256_fmadd_ps(b, wo, o);
        }
        join16(Y + r * ldy, e, o);
    }
    for (int k = 0; k < kb; k += FETCH_EVERY)
        gm_fetch(fa);
}

/*
** Columns [n0, n1), a few bands of GM_BAND: for each k-block, for each band,
** the first block of rows reads the band's weights from W (a strided run
** of each row) and leaves them in `panels`, 16 columns by KB rows each,
** contiguous; the later blocks of rows read them from there, free of cache
** set conflicts. The k-block of X is read by every band while it is in
** cache, and W row by row, as it lies in memory. Meanwhile the next band's
** weights are fetched, a line every few steps (not while the first block
** of rows reads W: the two would evict each other).
*/
static void band_avx2(const gm_band *b)
{
    gm_bf16 panels[KB * GM_BAND] __attribute__((aligned(32)));
    const int T = b->T, K = b->K, n16 = b->n0 + (b->n1 - b->n0) / 16 * 16;
    for (int k0 = 0; k0 < K; k0 += KB) {
        const int k1 = k0 + KB < K ? k0 + KB : K, kb = k1 - k0, first = k0 == 0;
        for (int s0 = b->n0; s0 < n16; s0 += GM_BAND) {
            const int s1 = s0 + GM_BAND < n16 ? s0 + GM_BAND : n16;
            /* next: this k-block of the next band, or the next k-block of the first */
            const int ns = s1 < n16 ? s1 : b->n0, nk = s1 < n16 ? k0 : k1, nw = ns + GM_BAND < n16 ? GM_BAND : n16 - ns;
            gm_ahead a = {(const char *)(b->W + (long)nk * b->ldw + ns), b->ldw * 2, nw * 2 / 64 + 2, 0,
                       nk < K ? (nk + KB < K ? KB : K - nk) : 0};
            /* blocks of 6 rows, and of 4 where 6 would leave 1 to 3 behind */
            for (int t = 0; t < T;) {
                const int left = T - t, rows = left >= 10 || left == 6 ? 6 : left >= 4 ? 4 : left;
                float *y = b->Y + (long)t * b->ldy;
                const float *x = b->X + (long)t * b->ldx + k0;
                const tile_fn tile = rows == 6 ? (t ? tile6 : tile6_copy) : rows == 4 ? (t ? tile4 : tile4_copy) : NULL;
                gm_ahead none = {0}, *fa = t || T < 10 ? &a : &none;
                gm_bf16 *p = panels;
                for (int n = s0; n < s1; n += 16, p += 16 * kb) {
                    const gm_bf16 *w = t ? p : b->W + (long)k0 * b->ldw + n;
                    const long ldw = t ? 16 : b->ldw;
                    if (tile)
                        tile(y + n, b->ldy, x, b->ldx, w, ldw, p, kb, first, fa);
                    else
                        tile_rows(y + n, b->ldy, x, b->ldx, w, ldw, t ? NULL : p, kb, first, rows, fa);
                }
                t += rows;
            }
        }
    }
    for (int t = 0; t < T; t++) /* the last columns, fewer than 16: plain sums, in the same order */
        for (int n = n16; n < b->n1; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s = fmaf(b->X[(long)t * b->ldx + k], gm_bf16_to_f32(b->W[(long)k * b->ldw + n]), s);
            b->Y[(long)t * b->ldy + n] = s;
        }
}

/*
** One row of X (decode): y[n0..n1) = x[0..K) @ W[0..K)[n0..n1). Rows in
** order, eight at a time, each sum adding its k terms in order, kept as
** even and odd columns in y until the end. Memory-bound, so the loop is
** lean (16 weights widened by one shift and one and) and reads eight rows
** at once: more of W in flight than four, and the sums go through L1 half
** as often. A run of columns shorter than the row is too short for the
** hardware prefetcher, so with fetch_ahead set each step of 16 columns also
** fetches four cache lines of the eight rows GEMV_AHEAD further on (each of
** their lines once in two steps); whole rows are one long run, which the
** prefetcher streams faster on its own.
*/
#define GEMV_ROW(v, b)                                                                          \
    do {                                                                                        \
        WIDEN16(v, we, wo);                                                                     \
        e = _mm256_fmadd_ps(b, we, e), o = _mm256_fmadd_ps(b, wo, o);                           \
    } while (0)

static void gemv_avx2(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1, int fetch_ahead)
{
    const int n16 = n0 + (n1 - n0) / 16 * 16;
    const long l = ldw;
    for (int n = n0; n < n1; n++)
        y[n] = 0.0f;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        const gm_bf16 *w = W + (long)k * l;
        const __m256 b0 = _mm256_broadcast_ss(x + k), b1 = _mm256_broadcast_ss(x + k + 1);
        const __m256 b2 = _mm256_broadcast_ss(x + k + 2), b3 = _mm256_broadcast_ss(x + k + 3);
        const __m256 b4 = _mm256_broadcast_ss(x + k + 4), b5 = _mm256_broadcast_ss(x + k + 5);
        const __m256 b6 = _mm256_broadcast_ss(x + k + 6), b7 = _mm256_broadcast_ss(x + k + 7);
        const int fetch = fetch_ahead && k + GEMV_AHEAD + 8 <= K;
        for (int n = n0, step = 0; n < n16; n += 16, step++) {
            if (fetch) { /* line step / 2 of rows 0-3 (even steps) or 4-7 (odd), GEMV_AHEAD rows on */
                const char *a = (const char *)(w + GEMV_AHEAD * l + n0) + (step & 1) * 8 * l + (step >> 1) * 64;
                _mm_prefetch(a, _MM_HINT_T0), _mm_prefetch(a + 2 * l, _MM_HINT_T0);
                _mm_prefetch(a + 4 * l, _MM_HINT_T0), _mm_prefetch(a + 6 * l, _MM_HINT_T0);
            }
            __m256 e = _mm256_loadu_ps(y + n), o = _mm256_loadu_ps(y + n + 8);
            const gm_bf16 *c = w + n;
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)c), b0);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(c + l)), b1);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(c + 2 * l)), b2);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(c + 3 * l)), b3);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(c + 4 * l)), b4);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(c + 5 * l)), b5);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(c + 6 * l)), b6);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(c + 7 * l)), b7);
            _mm256_storeu_ps(y + n, e), _mm256_storeu_ps(y + n + 8, o);
        }
    }
    for (; k < K; k++) {
        const __m256 b = _mm256_broadcast_ss(x + k);
        for (int n = n0; n < n16; n += 16) {
            __m256 e = _mm256_loadu_ps(y + n), o = _mm256_loadu_ps(y + n + 8);
            GEMV_ROW(_mm256_loadu_si256((const __m256i *)(const void *)(W + (long)k * l + n)), b);
            _mm256_storeu_ps(y + n, e), _mm256_storeu_ps(y + n + 8, o);
        }
    }
    for (int n = n0; n < n16; n += 16) /* even and odd columns back in order */
        join16(y + n, _mm256_loadu_ps(y + n), _mm256_loadu_ps(y + n + 8));
    for (int n = n16; n < n1; n++) {
        float s = 0.0f;
        for (int kk = 0; kk < K; kk++)
            s = fmaf(x[kk], gm_bf16_to_f32(W[(long)kk * ldw + n]), s);
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
    const char *next = (const char *)(Wn + 4 * ldw); /* the next four rows, fetched a line per row every 32 values */
    for (; k + 8 <= K; k += 8) {
        if (k % 32 == 0)
            for (int r = 0; r < 4; r++)
                _mm_prefetch(next + (r * ldw + k) * 2, _MM_HINT_T0);
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

static void dot_avx2(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows);

static void dot_rows_avx2(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1)
{
    int n = n0;
    for (; n + 4 <= n1; n += 4)
        dot4(Y + n, X, W + (long)n * K, K, K);
    for (; n < n1; n++)
        dot_avx2(Y + n, 0, X, 0, W + (long)n * K, K, 1);
}

static void dot_avx2(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows)
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
/* attention's products */

enum {
    AK = 16, /* keys per transposed chunk of the scores: two vectors of lanes */
    AD = 256, /* values of d per piece of a chunk: 16 KB of transposed keys, in L1 */
    AV = 256  /* keys per strip of 16 columns of V: 16 KB, in L1 */
};

/* The rows of the next register tile when `left` rows are left: 6, or 4 (4, 5, 7 or 8 left), or all of 1 to 3. */
static inline int tile_rows_left(int left) { return left == 7 || left == 8 ? 4 : left >= 6 ? 6 : left >= 4 ? 4 : left; }

/* dst[c * ldd + r] = src[r * lds + c] for r, c < 8: eight rows of eight floats to eight columns. */
static inline void transpose8x8(float *dst, long ldd, const float *src, long lds)
{
    const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds);
    const __m256 r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds);
    const __m256 r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds);
    const __m256 r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    /* pairs of rows interleaved, then quads: column c of rows 0-3 (low half) and c + 4 (high half) */
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(s3, s7, 0x31));
}

/* Kt[c][j] = K[j][c] for c < dn, j < AK: keys nk to AK - 1 (a last, short chunk) are 0. */
static void transpose_keys(float *Kt, const float *K, long ldk, int nk, int dn)
{
    int c = 0;
    if (nk == AK)
        for (; c + 8 <= dn; c += 8) {
            transpose8x8(Kt + c * AK, AK, K + c, ldk);
            transpose8x8(Kt + c * AK + 8, AK, K + 8 * ldk + c, ldk);
        }
    for (; c < dn; c++)
        for (int j = 0; j < AK; j++)
            Kt[c * AK + j] = j < nk ? K[j * ldk + c] : 0.0f;
}

/* s[0..n) as two vectors (n <= 16; lanes past n are 0), and back. */
static inline void load16(const float *s, int n, __m256 *a, __m256 *b)
{
    if (n < AK) {
        float t[AK] = {0};
        memcpy(t, s, sizeof(float) * (size_t)n);
        *a = _mm256_loadu_ps(t), *b = _mm256_loadu_ps(t + 8);
        return;
    }
    *a = _mm256_loadu_ps(s), *b = _mm256_loadu_ps(s + 8);
}

static inline void store16(float *s, int n, __m256 a, __m256 b)
{
    if (n == AK) {
        _mm256_storeu_ps(s, a), _mm256_storeu_ps(s + 8, b);
        return;
    }
    float t[AK];
    _mm256_storeu_ps(t, a), _mm256_storeu_ps(t + 8, b);
    memcpy(s, t, sizeof(float) * (size_t)n);
}

/*
** C[0..R)[0..n) (+)= A[0..R)[0..depth) @ B[0..depth)[0..n), n <= 16, R = 1
** to 6 (a constant where it is inlined): 2R accumulators, lanes 16 columns;
** per step of depth two loads of B, R broadcasts of A and 2R FMAs, each sum
** adding its terms in order. Attention's both products: the scores (A the
** queries, B the transposed keys, depth d, a piece at a time) and probs . V
** (A the probabilities, B a strip of 16 values of d, depth the keys).
** accumulate: the sums go on from C, else C starts at 0.
*/
static inline __attribute__((always_inline)) void tile16(float *C, long ldc, const float *A, long lda, const float *B,
                                                         long ldb, int depth, int n, int accumulate, int R)
{
    const __m256 z = _mm256_setzero_ps();
    __m256 a0 = z, b0 = z, a1 = z, b1 = z, a2 = z, b2 = z, a3 = z, b3 = z, a4 = z, b4 = z, a5 = z, b5 = z;
    if (accumulate) {
        load16(C, n, &a0, &b0);
        if (R > 1)
            load16(C + ldc, n, &a1, &b1);
        if (R > 2)
            load16(C + 2 * ldc, n, &a2, &b2);
        if (R > 3)
            load16(C + 3 * ldc, n, &a3, &b3);
        if (R > 4)
            load16(C + 4 * ldc, n, &a4, &b4);
        if (R > 5)
            load16(C + 5 * ldc, n, &a5, &b5);
    }
    for (int c = 0; c < depth; c++) {
        const __m256 k0 = _mm256_loadu_ps(B + c * ldb), k1 = _mm256_loadu_ps(B + c * ldb + 8);
        __m256 q = _mm256_broadcast_ss(A + c);
        a0 = _mm256_fmadd_ps(q, k0, a0), b0 = _mm256_fmadd_ps(q, k1, b0);
        if (R > 1) {
            q = _mm256_broadcast_ss(A + lda + c);
            a1 = _mm256_fmadd_ps(q, k0, a1), b1 = _mm256_fmadd_ps(q, k1, b1);
        }
        if (R > 2) {
            q = _mm256_broadcast_ss(A + 2 * lda + c);
            a2 = _mm256_fmadd_ps(q, k0, a2), b2 = _mm256_fmadd_ps(q, k1, b2);
        }
        if (R > 3) {
            q = _mm256_broadcast_ss(A + 3 * lda + c);
            a3 = _mm256_fmadd_ps(q, k0, a3), b3 = _mm256_fmadd_ps(q, k1, b3);
        }
        if (R > 4) {
            q = _mm256_broadcast_ss(A + 4 * lda + c);
            a4 = _mm256_fmadd_ps(q, k0, a4), b4 = _mm256_fmadd_ps(q, k1, b4);
        }
        if (R > 5) {
            q = _mm256_broadcast_ss(A + 5 * lda + c);
            a5 = _mm256_fmadd_ps(q, k0, a5), b5 = _mm256_fmadd_ps(q, k1, b5);
        }
    }
    store16(C, n, a0, b0);
    if (R > 1)
        store16(C + ldc, n, a1, b1);
    if (R > 2)
        store16(C + 2 * ldc, n, a2, b2);
    if (R > 3)
        store16(C + 3 * ldc, n, a3, b3);
    if (R > 4)
        store16(C + 4 * ldc, n, a4, b4);
    if (R > 5)
        store16(C + 5 * ldc, n, a5, b5);
}

/* tile16 over rows of A and C, blocks of 6, and of 4 where 6 would leave 1 or 2 behind */
static void tiles16(float *C, long ldc, const float *A, long lda, int rows, const float *B, long ldb, int depth, int n,
                    int accumulate)
{
    for (int i = 0; i < rows;) {
        const int r = tile_rows_left(rows - i);
        float *c = C + i * ldc;
        const float *a = A + i * lda;
        switch (r) {
        case 6: tile16(c, ldc, a, lda, B, ldb, depth, n, accumulate, 6); break;
        case 4: tile16(c, ldc, a, lda, B, ldb, depth, n, accumulate, 4); break;
        case 3: tile16(c, ldc, a, lda, B, ldb, depth, n, accumulate, 3); break;
        case 2: tile16(c, ldc, a, lda, B, ldb, depth, n, accumulate, 2); break;
        default: tile16(c, ldc, a, lda, B, ldb, depth, n, accumulate, 1); break;
        }
        i += r;
    }
}

/*
** The keys AK at a time, each chunk transposed once into Kt (a piece of AD
** values of d at a time, in L1) for every row of Q, which then meets it in
** register tiles of up to 6 rows: several query rows against 16 keys, each
** sum over d in order, so that no lanes are added across.
*/
void gm_attn_scores_avx2(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk, int d)
{
    float Kt[AD * AK] __attribute__((aligned(32)));
    if (d <= 0) {
        for (int i = 0; i < nq; i++)
            memset(S + i * lds, 0, sizeof(float) * (size_t)(nk > 0 ? nk : 0));
        return;
    }
    for (int j = 0; j < nk; j += AK) {
        const int kn = nk - j < AK ? nk - j : AK;
        for (int c0 = 0; c0 < d; c0 += AD) {
            const int dn = d - c0 < AD ? d - c0 : AD, first = c0 == 0;
            transpose_keys(Kt, K + j * ldk + c0, ldk, kn, dn);
            tiles16(S + j, lds, Q + c0, ldq, nq, Kt, AK, dn, kn, !first);
        }
    }
}

/* probs . V for the last values of d, fewer than 16: one vector, the lanes of m only (1 to 8 of them). */
static inline __attribute__((always_inline)) void values_tile8(float *O, long ldo, const float *P, long ldp,
                                                               const float *V, long ldv, int nk, int acc, __m256i m,
                                                               int R)
{
    const __m256 z = _mm256_setzero_ps();
    __m256 a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z;
    if (acc) {
        a0 = _mm256_maskload_ps(O, m);
        if (R > 1)
            a1 = _mm256_maskload_ps(O + ldo, m);
        if (R > 2)
            a2 = _mm256_maskload_ps(O + 2 * ldo, m);
        if (R > 3)
            a3 = _mm256_maskload_ps(O + 3 * ldo, m);
        if (R > 4)
            a4 = _mm256_maskload_ps(O + 4 * ldo, m);
        if (R > 5)
            a5 = _mm256_maskload_ps(O + 5 * ldo, m);
    }
    for (int j = 0; j < nk; j++) {
        const __m256 v = _mm256_maskload_ps(V + j * ldv, m);
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(P + j), v, a0);
        if (R > 1)
            a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(P + ldp + j), v, a1);
        if (R > 2)
            a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(P + 2 * ldp + j), v, a2);
        if (R > 3)
            a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(P + 3 * ldp + j), v, a3);
        if (R > 4)
            a4 = _mm256_fmadd_ps(_mm256_broadcast_ss(P + 4 * ldp + j), v, a4);
        if (R > 5)
            a5 = _mm256_fmadd_ps(_mm256_broadcast_ss(P + 5 * ldp + j), v, a5);
    }
    _mm256_maskstore_ps(O, m, a0);
    if (R > 1)
        _mm256_maskstore_ps(O + ldo, m, a1);
    if (R > 2)
        _mm256_maskstore_ps(O + 2 * ldo, m, a2);
    if (R > 3)
        _mm256_maskstore_ps(O + 3 * ldo, m, a3);
    if (R > 4)
        _mm256_maskstore_ps(O + 4 * ldo, m, a4);
    if (R > 5)
        _mm256_maskstore_ps(O + 5 * ldo, m, a5);
}

/*
** Keys AV at a time; in each block, columns of 16 values of d outer, so that
** the block's strip of V (AV rows of 64 bytes, copied contiguous when more
** than one tile of rows will read it: V's rows are a few KB apart, which
** maps a strip onto a few cache sets) stays in L1 while every block of up
** to 6 rows of P passes over it. The last values of d, fewer than 16, a
** vector of 8 (masked) at a time, read from V as it is.
*/
void gm_attn_values_avx2(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk, int d,
                         int accumulate)
{
    float Vp[AV * 16] __attribute__((aligned(32)));
    for (int j0 = 0; j0 == 0 || j0 < nk; j0 += AV) { /* once at least: accumulate = 0 writes O even when nk = 0 */
        const int kn = nk - j0 < AV ? nk - j0 : AV, acc = accumulate || j0 > 0;
        const float *pj = P + j0;
        int c = 0;
        for (; c + 16 <= d; c += 16) {
            const float *v = V + j0 * ldv + c;
            long lv = ldv;
            if (nq > 6) {
                for (int j = 0; j < kn; j++) {
                    _mm256_store_ps(Vp + 16 * j, _mm256_loadu_ps(v + j * ldv));
                    _mm256_store_ps(Vp + 16 * j + 8, _mm256_loadu_ps(v + j * ldv + 8));
                }
                v = Vp, lv = 16;
            }
            tiles16(O + c, ldo, pj, ldp, nq, v, lv, kn, 16, acc);
        }
        for (; c < d; c += 8) {
            const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(d - c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            const float *v = V + j0 * ldv + c;
            for (int i = 0; i < nq;) {
                const int rows = tile_rows_left(nq - i);
                float *o = O + i * ldo + c;
                const float *p = pj + i * ldp;
                switch (rows) {
                case 6: values_tile8(o, ldo, p, ldp, v, ldv, kn, acc, m, 6); break;
                case 4: values_tile8(o, ldo, p, ldp, v, ldv, kn, acc, m, 4); break;
                case 3: values_tile8(o, ldo, p, ldp, v, ldv, kn, acc, m, 3); break;
                case 2: values_tile8(o, ldo, p, ldp, v, ldv, kn, acc, m, 2); break;
                default: values_tile8(o, ldo, p, ldp, v, ldv, kn, acc, m, 1); break;
                }
                i += rows;
            }
        }
    }
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
    .lanes = 8,
    .band = band_avx2,
    .gemv = gemv_avx2,
    .dot = dot_avx2,
    .dot_rows = dot_rows_avx2,
    .finish = finish_avx2,
    .add_round = add_round_avx2,
    .norm_scale = norm_scale_avx2,
    .swiglu = swiglu_avx2,
    .transpose = transpose_avx2,
    .attn_scores = gm_attn_scores_avx2,
    .attn_values = gm_attn_values_avx2,
};
