/*
** The portable tier: plain C, with the same cache blocking and the same
** order of every sum as the wider tiers, so that each output is the same
** f32 sum (bit for bit where the products are exact: bf16 inputs), on W
** (in, out) row-major or in panels of any width (its form: GM_W_PANEL16,
** which the AVX2 tier reads as well), and W (out, in) in the AVX2 tier's
** 8 lanes. The element-wise steps and their exp are the vector tiers' source at one lane
** (vec_steps.h on v1.h), so they give the same bits. The load-time
** transposes use SSE2 where the compiler targets it (every x86-64 CPU has
** it), plain loops elsewhere; conversions are exact scalar code.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "kernels_impl.h"

enum {
    BAND = GM_BAND,
    NR = 24, /* packed panel width and register tile columns */
    MR = 4   /* register tile rows */
};

/* ---------------------------------------------------------------------- */
/* matrix products */

typedef uint16_t v8h __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));

/* the 8 bf16 at w as f32, values 0-3 and 4-7: each with a zero below it */
static inline __attribute__((always_inline)) void widen8(const gm_bf16 *w, v4f *lo, v4f *hi)
{
    v8h h;
    memcpy(&h, w, sizeof h);
    const v8h z = {0};
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    *lo = (v4f)__builtin_shufflevector(h, z, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = (v4f)__builtin_shufflevector(h, z, 4, 12, 5, 13, 6, 14, 7, 15);
#else
    *lo = (v4f)__builtin_shufflevector(z, h, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = (v4f)__builtin_shufflevector(z, h, 4, 12, 5, 13, 6, 14, 7, 15);
#endif
}

/*
** Rows [k0, k1) of columns [n0, n0 + ncols) of b's W, in (in, out) or in
** panels, as f32 panels of nr columns. A row of W holds the columns of one
** of its panels side by side, so the columns go in runs: neighbours in W
** and in one packed panel, each run widened eight values at a time. (One
** column at a time through a pointer each took a quarter of the band's
** time: the band at 32 rows, gate's, down's and q's shapes, 0.79-0.82x the
** time now on a Zen 4; at 4 rows 0.48x, at 128 rows 0.93x.)
*/
typedef struct pack_run {
    const gm_bf16 *w; /* its first column, row 0 */
    long ld;          /* from one row of W to the next */
    float *d;         /* its first column in the packed panel, row 0 */
    int width, len;   /* the packed panel's width; the run's columns */
} pack_run;

static void pack_portable(float *dst, const gm_band *b, int k0, int k1, int n0, int ncols, int nr)
{
    pack_run run[2 * BAND];
    int runs = 0;
    const int kb = k1 - k0;
    float *panel = dst;
    for (int n = 0; n < ncols; n += nr) {
        const int width = ncols - n < nr ? ncols - n : nr;
        for (int j = 0; j < width;) {
            long ld;
            const int c = n0 + n + j, left = width - j; /* its columns to the end of W's panel or the packed one */
            const gm_bf16 *w = gm_w_col(b->W, b->ldw, b->P, b->K, c, &ld);
            const int len = b->P && b->P - c % b->P < left ? b->P - c % b->P : left;
            run[runs++] = (pack_run){w, ld, panel + j, width, len};
            j += len;
        }
        panel += (long)kb * width;
    }
    for (int k = k0; k < k1; k++) /* row by row, as W lies in memory (panel by panel) */
        for (int r = 0; r < runs; r++) {
            const gm_bf16 *w = run[r].w + (long)k * run[r].ld;
            float *d = run[r].d + (long)(k - k0) * run[r].width;
            int j = 0;
            for (; j + 8 <= run[r].len; j += 8) {
                v4f lo, hi;
                widen8(w + j, &lo, &hi);
                memcpy(d + j, &lo, sizeof lo), memcpy(d + j + 4, &hi, sizeof hi);
            }
            for (; j < run[r].len; j++)
                d[j] = gm_bf16_to_f32(w[j]);
        }
}

/*
** y[i][0..m) += x[i][0..kb) @ columns [0, m) of P (rows ld floats apart)
** for i < R, each sum in k order; y's rows ldy apart, x's ldx. m and R are
** constants where it is inlined: 4 sums a vector of GCC's (SSE on x86-64;
** every operation lane-wise, the same bits as one at a time), kept in
** registers. With plain loops over a run-time width GCC kept the sums on the
** stack, a load, an add and a store a product (4-5x slower on a Zen 4). A
** whole panel (NR) is six vectors, and two rows of X take it at once, each
** value of P loaded once for both (twelve vectors: 0.93x the time of a row
** at a time, at 5-128 rows); the last panel's columns go 4 and then 1 at a
** time.
*/
static inline __attribute__((always_inline)) void micro_row(float *y, long ldy, const float *x, long ldx,
                                                            const float *P, long ld, int kb, const int m, const int R)
{
    v4f acc[2][NR / 4];
    for (int i = 0; i < R; i++)
        for (int q = 0; q < m / 4; q++)
            memcpy(&acc[i][q], y + i * ldy + 4 * q, sizeof acc[i][q]);
    for (int k = 0; k < kb; k++) {
        v4f xk[2];
        for (int i = 0; i < R; i++)
            xk[i] = (v4f){x[i * ldx + k], x[i * ldx + k], x[i * ldx + k], x[i * ldx + k]};
#pragma GCC unroll 6
        for (int q = 0; q < m / 4; q++) {
            v4f p;
            memcpy(&p, P + (long)k * ld + 4 * q, sizeof p);
            for (int i = 0; i < R; i++)
                acc[i][q] += xk[i] * p;
        }
    }
    for (int i = 0; i < R; i++)
        for (int q = 0; q < m / 4; q++)
            memcpy(y + i * ldy + 4 * q, &acc[i][q], sizeof acc[i][q]);
}

/* y[0] += x[0..kb) @ column 0 of P (rows ld apart): one sum in k order */
static inline void micro_col(float *y, const float *x, const float *P, long ld, int kb)
{
    float s = *y;
    for (int k = 0; k < kb; k++)
        s += x[k] * P[(long)k * ld];
    *y = s;
}

static void micro_portable(float *Y, long ldy, const float *X, long ldx, const float *P, int kb, int nr, int rows)
{
    int r = 0;
    for (; nr == NR && r + 2 <= rows; r += 2)
        micro_row(Y + r * ldy, ldy, X + r * ldx, ldx, P, NR, kb, NR, 2);
    for (; r < rows; r++) {
        float *y = Y + r * ldy;
        const float *x = X + r * ldx;
        if (nr == NR) {
            micro_row(y, 0, x, 0, P, NR, kb, NR, 1);
            continue;
        }
        int j = 0;
        for (; j + 4 <= nr; j += 4)
            micro_row(y + j, 0, x, 0, P + j, nr, kb, 4, 1);
        for (; j < nr; j++)
            micro_col(y + j, x, P + j, nr, kb);
    }
}

/*
** The portable band (any width, W (in, out) or in panels of any width): for
** each k-block and each BAND of columns, W is widened once into packed f32
** panels, which every block of MR rows of X then passes over.
*/
static void band_portable(const gm_band *b)
{
    float packed[KB * BAND];
    const int vec_end = b->n0 + (b->n1 - b->n0) / 8 * 8;
    for (int t = 0; t < b->T; t++)
        memset(b->Y + (long)t * b->ldy + b->n0, 0, sizeof(float) * (size_t)(b->n1 - b->n0));
    for (int k0 = 0; k0 < b->K; k0 += KB) {
        const int k1 = k0 + KB < b->K ? k0 + KB : b->K, kb = k1 - k0;
        for (int s0 = b->n0; s0 < vec_end; s0 += BAND) {
            const int s1 = s0 + BAND < vec_end ? s0 + BAND : vec_end;
            pack_portable(packed, b, k0, k1, s0, s1 - s0, NR);
            for (int t = 0; t < b->T; t += MR) {
                const float *p = packed;
                for (int n = s0; n < s1; n += NR) {
                    const int nr = s1 - n < NR ? s1 - n : NR;
                    micro_portable(b->Y + (long)t * b->ldy + n, b->ldy, b->X + (long)t * b->ldx + k0, b->ldx, p, kb,
                                   nr, b->T - t < MR ? b->T - t : MR);
                    p += (long)kb * nr;
                }
            }
        }
    }
    for (int n = vec_end; n < b->n1; n++) { /* the last columns, fewer than 8 */
        long ld;
        const gm_bf16 *w = gm_w_col(b->W, b->ldw, b->P, b->K, n, &ld);
        for (int t = 0; t < b->T; t++) {
            float s = 0.0f;
            for (int k = 0; k < b->K; k++)
                s += b->X[(long)t * b->ldx + k] * gm_bf16_to_f32(w[(long)k * ld]);
            b->Y[(long)t * b->ldy + n] = s;
        }
    }
}

static void gemv_portable(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1,
                          int fetch_ahead)
{
    (void)fetch_ahead;
    for (int n = n0; n < n1; n++)
        y[n] = 0.0f;
    int k = 0;
    for (; k + 4 <= K; k += 4) { /* rows of W in order, four at a time into y: one pass over memory */
        const gm_bf16 *w = W + (long)k * ldw;
        for (int n = n0; n < n1; n++) {
            float s = y[n];
            s += x[k] * gm_bf16_to_f32(w[n]);
            s += x[k + 1] * gm_bf16_to_f32(w[ldw + n]);
            s += x[k + 2] * gm_bf16_to_f32(w[2 * ldw + n]);
            s += x[k + 3] * gm_bf16_to_f32(w[3 * ldw + n]);
            y[n] = s;
        }
    }
    for (; k < K; k++)
        for (int n = n0; n < n1; n++)
            y[n] += x[k] * gm_bf16_to_f32(W[(long)k * ldw + n]);
}

/*
** y[0..m) = x[0..K) @ the m columns at w (rows ld apart), m <= 4, each sum
** in k order; m a constant where it is inlined, as in micro_row.
*/
static inline __attribute__((always_inline)) void panel_row(float *y, const float *x, const gm_bf16 *w, long ld,
                                                             int K, const int m)
{
    float acc[4];
    for (int j = 0; j < m; j++)
        acc[j] = 0.0f;
    for (int k = 0; k < K; k++) {
        const float xk = x[k];
#pragma GCC unroll 4
        for (int j = 0; j < m; j++)
            acc[j] += xk * gm_bf16_to_f32(w[(long)k * ld + j]);
    }
    memcpy(y, acc, sizeof(float) * (size_t)m);
}

/*
** a[0..4) += xk * the 16 bf16 at w as f32: each 32-bit pair of values split
** into its even column and its odd one (one shifted up, the other masked,
** as the byte order places them), so that a[0] and a[1] hold columns 0-7
** even and odd, a[2] and a[3] columns 8-15 (no zero register, as a zero
** below each value by interleaving would take).
*/
static inline __attribute__((always_inline)) void step16(v4f a[4], v4f xk, const gm_bf16 *w)
{
    v4u h0, h1;
    memcpy(&h0, w, sizeof h0), memcpy(&h1, w + 8, sizeof h1);
    const v4u hi = {0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u};
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    a[0] += xk * (v4f)(h0 & hi), a[1] += xk * (v4f)(h0 << 16);
    a[2] += xk * (v4f)(h1 & hi), a[3] += xk * (v4f)(h1 << 16);
#else
    a[0] += xk * (v4f)(h0 << 16), a[1] += xk * (v4f)(h0 & hi);
    a[2] += xk * (v4f)(h1 << 16), a[3] += xk * (v4f)(h1 & hi);
#endif
}

/* y[0..16) = step16's sums, even and odd columns interleaved back into order */
static inline __attribute__((always_inline)) void store16(float *y, const v4f a[4])
{
    for (int i = 0; i < 2; i++) {
        const v4f lo = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 4, 1, 5);
        const v4f hi = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 2, 6, 3, 7);
        memcpy(y + 8 * i, &lo, sizeof lo), memcpy(y + 8 * i + 4, &hi, sizeof hi);
    }
}

/*
** y[r][0..16) = x[0..K) @ the 16 columns at w[r] (rows ld[r] apart) for r <
** R, R a constant where it is inlined: R runs of W side by side, read as R
** streams at once, 4 sums a vector, each sum in k order. Three runs are
** twelve vectors of sums, which with x's value and two temporaries fit
** SSE's sixteen registers under GCC (clang 14 keeps one on the stack). (On a Zen 3, one thread, W from memory: 15.7-20
** GB/s, against 10.4-11.7 for one run at a time through an array of sums;
** in L2, 21.8-22.5 against 15.0-15.5.)
*/
static inline __attribute__((always_inline)) void runs_row16(float *const y[], const gm_bf16 *const w[],
                                                              const long ld[], const float *x, int K, const int R)
{
    v4f a[4] = {{0}}, b[4] = {{0}}, c[4] = {{0}};
    for (int k = 0; k < K; k++) {
        const v4f xk = {x[k], x[k], x[k], x[k]};
        step16(a, xk, w[0] + (long)k * ld[0]);
        if (R > 1)
            step16(b, xk, w[1] + (long)k * ld[1]);
        if (R > 2)
            step16(c, xk, w[2] + (long)k * ld[2]);
    }
    store16(y[0], a);
    if (R > 1)
        store16(y[1], b);
    if (R > 2)
        store16(y[2], c);
}

/*
** One row against W in panels of P: each panel's columns in [n0, n1), its
** rows in order; whole runs of 16 columns three at a time where they lie
** inside their panels, the rest 4 and then 1 at a time.
*/
static void gemv_panels_portable(float *y, const float *x, const gm_bf16 *W, int K, int N, int P, int n0, int n1)
{
    for (int n = n0; n < n1;) {
        long ld[3];
        const gm_bf16 *w[3];
        float *yr[3];
        int R = 0;
        for (int c = n; R < 3 && c + 16 <= n1; R++, c += 16) {
            w[R] = gm_w_col(W, N, P, K, c, &ld[R]);
            if (c / P * P + ld[R] - c < 16) /* the run would cross into the next panel */
                break;
            yr[R] = y + c;
        }
        if (R == 3)
            runs_row16(yr, w, ld, x, K, 3);
        else if (R == 2)
            runs_row16(yr, w, ld, x, K, 2);
        else if (R == 1)
            runs_row16(yr, w, ld, x, K, 1);
        if (R) {
            n += 16 * R;
            continue;
        }
        long l;
        const gm_bf16 *wc = gm_w_col(W, N, P, K, n, &l);
        const int end = n / P * P + (int)l, m = (end < n1 ? end : n1) - n; /* the panel's columns from n */
        int j = 0;
        for (; j + 4 <= m; j += 4)
            panel_row(y + n + j, x, wc + j, l, K, 4);
        for (; j < m; j++)
            panel_row(y + n + j, x, wc + j, l, K, 1);
        n += m;
    }
}

/* ---------------------------------------------------------------------- */
/* against W^T, rows of W as outputs (the LM head) */

/* lanes 0-3 and 4-7 added across as v8_hsum adds them: ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)) */
static inline float hsum8(v4f lo, v4f hi)
{
    const v4f s = lo + hi;
    return (s[0] + s[2]) + (s[1] + s[3]);
}

/*
** Y[r * ldy] = dot(X[r * ldx][0..K), Wn[r * ldw][0..K)) for r < R (R a
** constant where it is inlined): R rows of X against one row of W (ldw 0),
** or one row of X against R rows of W (ldx 0), the next R rows of W then
** fetched a line a row every 32 values (with `ahead`), into L2. In the
** avx2 tier's order (vec_kernels.h's dots at 8 lanes): lane j sums the
** products at k = j mod 8, here as two vectors of 4, added across at the
** end as v8_hsum does, then the last values in order; for bf16 inputs,
** whose products are exact, the same bits. (The loop before, sixteen rows
** a pass in k order, a lane a row, spent as many shuffles turning W's rows into lanes
** as multiplies: the LM head's shape on a Zen 3, one thread, 11-14 GB/s
** with W in L2 and 10-11 from memory, against 21-24 and 16-17 now; on two
** threads 13-21 against 17-29.)
*/
static inline __attribute__((always_inline)) void dots8(float *Y, long ldy, const float *X, long ldx,
                                                        const gm_bf16 *Wn, long ldw, int K, int ahead, const int R)
{
    v4f a[4] = {{0}}, b[4] = {{0}}; /* row r's lanes 0-3 in a[r], 4-7 in b[r] */
    const char *next = (const char *)(Wn + R * ldw);
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        if (ahead && k % 32 == 0)
            for (int r = 0; r < R; r++)
                __builtin_prefetch(next + (r * ldw + k) * 2, 0, 2);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            v4f xl, xh, wl, wh;
            memcpy(&xl, X + r * ldx + k, sizeof xl), memcpy(&xh, X + r * ldx + k + 4, sizeof xh);
            widen8(Wn + r * ldw + k, &wl, &wh);
            a[r] += xl * wl, b[r] += xh * wh;
        }
    }
    for (int r = 0; r < R; r++) {
        float s = hsum8(a[r], b[r]);
        for (int j = k; j < K; j++)
            s = fmaf(X[r * ldx + j], gm_bf16_to_f32(Wn[r * ldw + j]), s);
        Y[r * ldy] = s;
    }
}

/* Y[t][n] = dot(X[t], Wn) for t < rows (<= 4), one row of W */
static void dot_portable(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows)
{
    switch (rows) {
    case 4: dots8(Y, ldy, X, ldx, Wn, 0, K, 0, 4); break;
    case 3: dots8(Y, ldy, X, ldx, Wn, 0, K, 0, 3); break;
    case 2: dots8(Y, ldy, X, ldx, Wn, 0, K, 0, 2); break;
    default: dots8(Y, ldy, X, ldx, Wn, 0, K, 0, 1); break;
    }
}

/* Y[n] = dot(X, W[n]) for n in [n0, n1): four rows of W at once against one row of X, the next four fetched ahead */
static void dot_rows_portable(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1)
{
    int n = n0;
    for (; n + 4 <= n1; n += 4)
        dots8(Y + n, 1, X, 0, W + (long)n * K, K, K, 1, 4);
    for (; n < n1; n++)
        dots8(Y + n, 0, X, 0, W + (long)n * K, 0, K, 0, 1);
}

/* ---------------------------------------------------------------------- */
/* the steps between them: vec_steps.h at one lane (v1.h), the same source and bits as the vector tiers' */

#define GM_VF_LANES 1
#define TIER(x) x##_portable
#include "vf.h"
#include "vec_steps.h"

/* ---------------------------------------------------------------------- */
/* attention's products: plain loops, each output one sum in the promised order */

void gm_attn_scores_portable(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk,
                             int d)
{
    for (int i = 0; i < nq; i++) {
        const float *q = Q + i * ldq;
        float *s = S + i * lds;
        int j = 0;
        for (; j + 4 <= nk; j += 4) { /* four keys at a time: four independent sums, each over d in order */
            const float *k0 = K + j * ldk, *k1 = k0 + ldk, *k2 = k1 + ldk, *k3 = k2 + ldk;
            float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
            for (int c = 0; c < d; c++)
                d0 += q[c] * k0[c], d1 += q[c] * k1[c], d2 += q[c] * k2[c], d3 += q[c] * k3[c];
            s[j] = d0, s[j + 1] = d1, s[j + 2] = d2, s[j + 3] = d3;
        }
        for (; j < nk; j++) {
            const float *k = K + j * ldk;
            float acc = 0.0f;
            for (int c = 0; c < d; c++)
                acc += q[c] * k[c];
            s[j] = acc;
        }
    }
}

void gm_attn_values_portable(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk,
                             int d, int accumulate)
{
    for (int i = 0; i < nq; i++) {
        float *o = O + i * ldo;
        const float *p = P + i * ldp;
        if (!accumulate)
            memset(o, 0, sizeof(float) * (size_t)d);
        for (int j = 0; j < nk; j++) /* keys in order; each output of the row adds its term */
            for (int c = 0; c < d; c++)
                o[c] += p[j] * V[j * ldv + c];
    }
}

/* ---------------------------------------------------------------------- */
/* load time: conversions and transposes */

void gm_convert_portable(gm_bf16 *dst, const void *source, size_t n, gm_src_type type)
{
    const uint8_t *src = source;
    if (type == GM_SRC_BF16) {
        memcpy(dst, src, n * 2);
    } else if (type == GM_SRC_F16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = gm_f32_to_bf16(gm_f16_to_f32(h));
        }
    } else { /* GM_SRC_F32: round to nearest even */
        for (size_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, src + 4 * i, 4);
            dst[i] = gm_f32_to_bf16(f);
        }
    }
}

/* 4-bit dequantization (gm_dequant4_row, gm_dequant4_block): a value at a time */
void gm_dequant4_row_portable(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                              const float *s, size_t N)
{
    for (size_t n = 0; n < N; n++) {
        const uint32_t q = sh ? (w[n / 8] >> sh[n % 8]) & 15u : (w[n] >> shift) & 15u;
        d[n] = gm_f32_to_bf16((float)((int32_t)q - z[n]) * s[n]);
    }
}

void gm_dequant4_block_portable(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const unsigned *sh,
                                const int32_t *z, const float *s, size_t R, size_t I)
{
    for (size_t r = 0; r < R; r++)
        for (size_t i = 0; i < I; i++)
            d[r * ld + i] = gm_f32_to_bf16((float)((int32_t)((w[i * W + r / 8] >> sh[r % 8]) & 15u) - z[r]) * s[r]);
}

#ifdef __SSE2__
/*
** An 8 x 8 block of 16-bit values: rows of src (stride ls) to rows of dst
** (stride ld). Straight-line, so that the 8 rows, 16 unpacks between and 8
** results stay in SSE registers (over arrays and loops they went through
** the stack, at a third of the speed).
*/
#define ROW(i) _mm_loadu_si128((const __m128i *)(const void *)(src + (i) * ls))
#define PUT(j, v) _mm_storeu_si128((__m128i *)(void *)(dst + (j) * ld), v)
static inline __attribute__((always_inline)) void transpose8(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    const __m128i a0 = ROW(0), a1 = ROW(1), a2 = ROW(2), a3 = ROW(3), a4 = ROW(4), a5 = ROW(5), a6 = ROW(6), a7 = ROW(7);
    /* pairs of rows: b0 rows 0, 1 of columns 0-3, b1 of columns 4-7; b2, b3 rows 2, 3; ... */
    const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);
    const __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);
    const __m128i b4 = _mm_unpacklo_epi16(a4, a5), b5 = _mm_unpackhi_epi16(a4, a5);
    const __m128i b6 = _mm_unpacklo_epi16(a6, a7), b7 = _mm_unpackhi_epi16(a6, a7);
    /* fours of rows: c0 rows 0-3 of columns 0-1, c1 of 2-3, c2 of 4-5, c3 of 6-7; c4-c7 rows 4-7 */
    const __m128i c0 = _mm_unpacklo_epi32(b0, b2), c1 = _mm_unpackhi_epi32(b0, b2);
    const __m128i c2 = _mm_unpacklo_epi32(b1, b3), c3 = _mm_unpackhi_epi32(b1, b3);
    const __m128i c4 = _mm_unpacklo_epi32(b4, b6), c5 = _mm_unpackhi_epi32(b4, b6);
    const __m128i c6 = _mm_unpacklo_epi32(b5, b7), c7 = _mm_unpackhi_epi32(b5, b7);
    PUT(0, _mm_unpacklo_epi64(c0, c4)), PUT(1, _mm_unpackhi_epi64(c0, c4));
    PUT(2, _mm_unpacklo_epi64(c1, c5)), PUT(3, _mm_unpackhi_epi64(c1, c5));
    PUT(4, _mm_unpacklo_epi64(c2, c6)), PUT(5, _mm_unpackhi_epi64(c2, c6));
    PUT(6, _mm_unpacklo_epi64(c3, c7)), PUT(7, _mm_unpackhi_epi64(c3, c7));
}
#undef ROW
#undef PUT

/*
** 32 rows x 8 columns of src into 8 destination runs of 32 values (64
** bytes, one cache line when aligned): transposed in a small buffer, then
** each run written whole, streamed past the cache when it is aligned.
*/
static inline void transpose32x8(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    gm_bf16 tmp[8 * 32] __attribute__((aligned(64)));
    for (int g = 0; g < 4; g++)
        transpose8(tmp + 8 * g, 32, src + 8 * g * ls, ls);
    const int aligned = (((uintptr_t)dst | ld * 2) % 16) == 0;
    for (int i = 0; i < 8; i++) {
        const __m128i *t = (const __m128i *)(const void *)(tmp + 32 * i);
        __m128i *d = (__m128i *)(void *)(dst + i * ld);
        if (aligned) {
            _mm_stream_si128(d, t[0]), _mm_stream_si128(d + 1, t[1]);
            _mm_stream_si128(d + 2, t[2]), _mm_stream_si128(d + 3, t[3]);
        } else {
            _mm_storeu_si128(d, t[0]), _mm_storeu_si128(d + 1, t[1]);
            _mm_storeu_si128(d + 2, t[2]), _mm_storeu_si128(d + 3, t[3]);
        }
    }
}
#endif

/*
** Rows [0, n) of blk, columns [c0, c1), into dst (cols, rows), at columns
** [r0, r0 + n). Columns outer, rows inner: the 8 destination rows of a
** column group get their runs written in order, n * 2 bytes each, so that
** memory sees a few long streams rather than scattered lines; the source
** lines stay in L1 across the 4 column groups that share them.
*/
void gm_transpose_part_portable(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0,
                                size_t c0, size_t c1)
{
    size_t r = 0;
#ifdef __SSE2__
    const size_t n32 = n / 32 * 32, n8 = n / 8 * 8;
    size_t c = c0;
    for (; c + 8 <= c1; c += 8) {
        size_t rr = 0;
        for (; rr < n32; rr += 32)
            transpose32x8(dst + c * rows + r0 + rr, rows, blk + rr * cols + c, cols);
        for (; rr < n8; rr += 8)
            transpose8(dst + c * rows + r0 + rr, rows, blk + rr * cols + c, cols);
    }
    for (size_t rr = 0; rr < n8; rr++) /* columns left over past the last group of 8 */
        for (size_t cc = c; cc < c1; cc++)
            dst[cc * rows + r0 + rr] = blk[rr * cols + cc];
    r = n8;
    _mm_sfence();
#endif
    for (; r < n; r++) /* rows left over */
        for (size_t cc = c0; cc < c1; cc++)
            dst[cc * rows + r0 + r] = blk[r * cols + cc];
}

static void transpose_portable(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0)
{
    gm_transpose_part_portable(dst, blk, n, rows, cols, r0, 0, cols);
}

/*
** Into panels of P: the rows of each panel transposed into it, a (cols, w)
** matrix (w its width: P, or the rows left in the last) that starts at its
** first row times cols.
*/
void gm_panels_portable(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0, int P)
{
    for (size_t r = 0; r < n;) {
        const size_t p0 = (r0 + r) / (size_t)P * (size_t)P, w = rows - p0 < (size_t)P ? rows - p0 : (size_t)P;
        const size_t q = r0 + r - p0, m = w - q < n - r ? w - q : n - r; /* rows q.. of this panel, m of them */
        gm_transpose_part_portable(dst + p0 * cols, blk + r * cols, m, w, cols, q, 0, cols);
        r += m;
    }
}

/* ---------------------------------------------------------------------- */

void gm_matmul_reference(float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias, int T, int K, int N,
                         int round)
{
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += X[(long)t * K + k] * gm_bf16_to_f32(W[(long)k * N + n]);
            if (bias)
                s += gm_bf16_to_f32(bias[n]);
            Y[(long)t * N + n] = round1(s, round);
        }
}

const gm_tier gm_tier_portable = {
    .name = "portable",
    .wform = GM_W_PANEL16,
    .lanes = 8, /* its (out, in) products sum as the avx2 tier's do */
    .band = band_portable,
    .panel_unit = 1, /* any width */
    .gemv = gemv_portable,
    .gemv_panels = gemv_panels_portable,
    .dot = dot_portable,
    .dot_rows = dot_rows_portable,
    .finish = finish_portable,
    .add_round = add_round_portable,
    .norm_scale = norm_scale_portable,
    .swiglu = swiglu_portable,
    .rope = rope_portable,
    .transpose = transpose_portable,
    .panels = gm_panels_portable,
    .convert = gm_convert_portable,
    .dequant4_row = gm_dequant4_row_portable,
    .dequant4_block = gm_dequant4_block_portable,
    .attn_scores = gm_attn_scores_portable,
    .attn_values = gm_attn_values_portable,
    .exp_sum = exp_sum_portable,
    .scale_max = scale_max_portable,
    .div_round = div_round_portable,
};
