/*
** The AVX-512 tier: the AVX2 tier's blocking at 16 lanes, for many rows
** (band) and for one (gemv), written in the operations of v16.h. Compiled
** for AVX-512 F/BW/VL here, and for AVX2 as the software model of those
** operations in avx512_model.c ("avx512-model"), which the tests run on any
** CPU with AVX2; also the products against W^T (the LM head) at 16 lanes.
** The element-wise steps and the transposes are the AVX2 tier's: memory-bound,
** they gain nothing from wider registers.
**
** Every sum is an FMA chain in k order, as on the other tiers, so products
** of bf16 values give the same bits here as everywhere. VDPBF16PS
** (AVX512_BF16) is not used: it multiplies pairs of bf16 values and adds
** the odd product before the even one, each addition rounded to nearest
** even with denormal inputs and outputs flushed to zero, so its sums would
** differ from FMA's in order and near zero; it needs X in bf16 as well;
** and on the Sapphire Rapids Xeon its peak (123 GFLOP/s a thread) is half
** of the 16-lane FMA's (244). The benchmark measures both peaks.
*/
#ifdef GM_V16_MODEL
#pragma GCC target("avx2,fma")
#define TIER(x) x##_avx512_model
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#define TIER(x) x##_avx512
#endif
#include <math.h>

#include "gm/cpu.h"
#include "kernels_impl.h"
#include "v16.h"

enum { GEMV_AHEAD = 32, FETCH_EVERY = 4 }; /* rows fetched ahead in gemv; k-steps per line fetched in a tile */

/*
** Y[0..R)[0..32) (+)= X[0..R)[0..kb) @ W[0..kb)[0..32), R = 8 or 4: 2R
** accumulators (even and odd columns), one 64-byte load and two widening
** operations of W and R broadcasts of X per k, each sum in k order. With
** copy set, each row of 32 weights read is also stored to P, contiguous.
*/
#define TILE(R, name, copy)                                                                                         \
    static void name(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *W, long ldw, gm_bf16 *P, int kb, \
                     int first, gm_ahead *fa)                                                                      \
    {                                                                                                              \
        gm_ahead a = *fa;                                                                                          \
        v16 e[R], o[R];                                                                                            \
        for (int r = 0; r < R; r++) {                                                                              \
            e[r] = o[r] = v16_zero();                                                                              \
            if (!first)                                                                                            \
                v16_split32(Y + r * ldy, &e[r], &o[r]);                                                            \
        }                                                                                                          \
        for (int k = 0; k < kb; k++, W += ldw) {                                                                   \
            if (k % FETCH_EVERY == 0)                                                                              \
                gm_fetch(&a);                                                                                      \
            const w32 v = w32_load(W);                                                                             \
            if (copy)                                                                                              \
                w32_store_aligned(P + 32 * k, v);                                                                  \
            const v16 we = w32_even(v), wo = w32_odd(v);                                                           \
            for (int r = 0; r < R; r++) {                                                                          \
                const v16 b = v16_bcast(X + r * ldx + k);                                                          \
                e[r] = v16_fma(b, we, e[r]), o[r] = v16_fma(b, wo, o[r]);                                          \
            }                                                                                                      \
        }                                                                                                          \
        for (int r = 0; r < R; r++)                                                                                \
            v16_join32(Y + r * ldy, e[r], o[r]);                                                                   \
        *fa = a;                                                                                                   \
    }

TILE(8, tile8, 0)
TILE(8, tile8_copy, 1)
TILE(4, tile4, 0)
TILE(4, tile4_copy, 1)
TILE(1, tile1, 0)
TILE(1, tile1_copy, 1)

typedef void (*tile_fn)(float *, long, const float *, long, const gm_bf16 *, long, gm_bf16 *, int, int, gm_ahead *);

/*
** Columns [n0, n1) as avx2.c's band, at 32 columns a tile: for each k-block,
** for each band of GM_BAND columns, the first block of rows reads W and
** leaves the band's weights in `panels`; the later blocks read them there.
*/
static void TIER(band)(const gm_band *b)
{
    gm_bf16 panels[KB * GM_BAND] __attribute__((aligned(64)));
    const int T = b->T, K = b->K, n32 = b->n0 + (b->n1 - b->n0) / 32 * 32;
    for (int k0 = 0; k0 < K; k0 += KB) {
        const int k1 = k0 + KB < K ? k0 + KB : K, kb = k1 - k0, first = k0 == 0;
        for (int s0 = b->n0; s0 < n32; s0 += GM_BAND) {
            const int s1 = s0 + GM_BAND < n32 ? s0 + GM_BAND : n32;
            const int ns = s1 < n32 ? s1 : b->n0, nk = s1 < n32 ? k0 : k1, nw = ns + GM_BAND < n32 ? GM_BAND : n32 - ns;
            gm_ahead a = {(const char *)(b->W + (long)nk * b->ldw + ns), b->ldw * 2, nw * 2 / 64 + 2, 0,
                       nk < K ? (nk + KB < K ? KB : K - nk) : 0};
            /* blocks of 8 rows, of 4 where 8 would leave 1 to 3 behind, and single rows last */
            for (int t = 0; t < T;) {
                const int left = T - t, rows = left >= 12 || left == 8 ? 8 : left >= 4 ? 4 : 1;
                float *y = b->Y + (long)t * b->ldy;
                const float *x = b->X + (long)t * b->ldx + k0;
                const tile_fn tile = rows == 8 ? (t ? tile8 : tile8_copy)
                                     : rows == 4 ? (t ? tile4 : tile4_copy)
                                                 : (t ? tile1 : tile1_copy);
                gm_ahead none = {0}, *fa = t || T < 12 ? &a : &none;
                gm_bf16 *p = panels;
                for (int n = s0; n < s1; n += 32, p += 32 * kb) {
                    const gm_bf16 *w = t ? p : b->W + (long)k0 * b->ldw + n;
                    tile(y + n, b->ldy, x, b->ldx, w, t ? 32 : b->ldw, p, kb, first, fa);
                }
                t += rows;
            }
        }
    }
    for (int t = 0; t < T; t++) /* the last columns, fewer than 32: plain sums, in the same order */
        for (int n = n32; n < b->n1; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s = fmaf(b->X[(long)t * b->ldx + k], gm_bf16_to_f32(b->W[(long)k * b->ldw + n]), s);
            b->Y[(long)t * b->ldy + n] = s;
        }
}

/*
** One row of X (decode), as avx2.c's gemv at 32 columns a step: rows in
** order, eight at a time, each sum in k order, kept as even and odd
** columns in y until the end; with fetch_ahead, the rows GEMV_AHEAD on are
** fetched a line of each of four rows every step (a 64-byte step is one line).
*/
static void TIER(gemv)(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1, int fetch_ahead)
{
    const int n32 = n0 + (n1 - n0) / 32 * 32;
    const long l = ldw;
    for (int n = n0; n < n1; n++)
        y[n] = 0.0f;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        const gm_bf16 *w = W + (long)k * l;
        v16 bx[8];
        for (int i = 0; i < 8; i++)
            bx[i] = v16_bcast(x + k + i);
        const int fetch = fetch_ahead && k + GEMV_AHEAD + 8 <= K;
        for (int n = n0, step = 0; n < n32; n += 32, step++) {
            if (fetch) { /* this step's line of rows 0-3 (even steps: of the line pair) or 4-7 */
                const char *a = (const char *)(w + GEMV_AHEAD * l + n0) + (step & 1) * 8 * l + (step >> 1) * 128;
                _mm_prefetch(a, _MM_HINT_T0), _mm_prefetch(a + 2 * l, _MM_HINT_T0);
                _mm_prefetch(a + 4 * l, _MM_HINT_T0), _mm_prefetch(a + 6 * l, _MM_HINT_T0);
                _mm_prefetch(a + 64, _MM_HINT_T0), _mm_prefetch(a + 2 * l + 64, _MM_HINT_T0);
                _mm_prefetch(a + 4 * l + 64, _MM_HINT_T0), _mm_prefetch(a + 6 * l + 64, _MM_HINT_T0);
            }
            v16 e = v16_load(y + n), o = v16_load(y + n + 16);
            const gm_bf16 *c = w + n;
            for (int i = 0; i < 8; i++) {
                const w32 v = w32_load(c + i * l);
                e = v16_fma(bx[i], w32_even(v), e), o = v16_fma(bx[i], w32_odd(v), o);
            }
            v16_store(y + n, e), v16_store(y + n + 16, o);
        }
    }
    for (; k < K; k++) {
        const v16 b = v16_bcast(x + k);
        for (int n = n0; n < n32; n += 32) {
            const w32 v = w32_load(W + (long)k * l + n);
            v16_store(y + n, v16_fma(b, w32_even(v), v16_load(y + n)));
            v16_store(y + n + 16, v16_fma(b, w32_odd(v), v16_load(y + n + 16)));
        }
    }
    for (int n = n0; n < n32; n += 32) /* even and odd columns back in order */
        v16_join32(y + n, v16_load(y + n), v16_load(y + n + 16));
    for (int n = n32; n < n1; n++) {
        float s = 0.0f;
        for (int kk = 0; kk < K; kk++)
            s = fmaf(x[kk], gm_bf16_to_f32(W[(long)kk * ldw + n]), s);
        y[n] = s;
    }
}

/*
** Against W^T, rows of W as outputs (the LM head): y[n] = dot(x, W[n]) in
** 16 lanes, summed across them at the end (v16_hsum), then the tail in order.
** Four rows of W at once against one row of X, the next four fetched ahead.
*/
static void dot4(float *Y, const float *X, const gm_bf16 *Wn, long ldw, int K)
{
    v16 a[4] = {v16_zero(), v16_zero(), v16_zero(), v16_zero()};
    const char *next = (const char *)(Wn + 4 * ldw); /* a line of each of the next four rows every 32 values */
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        if (k % 32 == 0)
            for (int r = 0; r < 4; r++)
                _mm_prefetch(next + (r * ldw + k) * 2, _MM_HINT_T0);
        const v16 x = v16_load(X + k);
        for (int r = 0; r < 4; r++)
            a[r] = v16_fma(x, v16_load_bf16(Wn + r * ldw + k), a[r]);
    }
    for (int r = 0; r < 4; r++) {
        float s = v16_hsum(a[r]);
        for (int j = k; j < K; j++)
            s += X[j] * gm_bf16_to_f32(Wn[r * ldw + j]);
        Y[r] = s;
    }
}

/* Y[t][n] = dot(X[t], Wn) for t < rows (<= 4), one row of W */
static void TIER(dot)(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows)
{
    v16 acc[4] = {v16_zero(), v16_zero(), v16_zero(), v16_zero()};
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        const v16 w = v16_load_bf16(Wn + k);
        for (int r = 0; r < rows; r++)
            acc[r] = v16_fma(v16_load(X + (long)r * ldx + k), w, acc[r]);
    }
    for (int r = 0; r < rows; r++) {
        float s = v16_hsum(acc[r]);
        for (int j = k; j < K; j++)
            s += X[(long)r * ldx + j] * gm_bf16_to_f32(Wn[j]);
        Y[(long)r * ldy] = s;
    }
}

static void TIER(dot_rows)(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1)
{
    int n = n0;
    for (; n + 4 <= n1; n += 4)
        dot4(Y + n, X, W + (long)n * K, K, K);
    for (; n < n1; n++)
        TIER(dot)(Y + n, 0, X, 0, W + (long)n * K, K, 1);
}

const gm_tier TIER(gm_tier) = {
#ifdef GM_V16_MODEL
    .name = "avx512-model",
    .needs = GM_CPU_AVX2 | GM_CPU_FMA,
    .model = 1,
    .stands_for = "avx512",
#else
    .name = "avx512",
    .needs = GM_CPU_AVX512 | GM_CPU_AVX2 | GM_CPU_FMA,
#endif
    .lanes = 16,
    .base = &gm_tier_avx2, /* the element-wise steps, the transposes, attention */
    .band = TIER(band),
    .gemv = TIER(gemv),
    .dot = TIER(dot),
    .dot_rows = TIER(dot_rows),
};
