/* Internal: the per-ISA pieces behind gm/kernels.h. */
#ifndef GM_KERNELS_IMPL_H
#define GM_KERNELS_IMPL_H

#include "gm/bf16.h"

/* v rounded once to bf16, when asked: the scalar steps of every kernel. */
static inline float round1(float v, int round) { return round ? gm_bf16_to_f32(gm_f32_to_bf16(v)) : v; }

enum {
    KB = 256,     /* k-block: the rows of W a band multiplies before the next */
    GM_BAND = 192 /* output columns per band: a k-block of them (96 KB of bf16) stays in L2 */
};

/* Y[t][n0..n1) = X[t][0..K) @ W[0..K)[n0..n1) for t < T, each sum in k order. */
typedef struct gm_band {
    float *Y;
    const float *X;
    const gm_bf16 *W;
    long ldy, ldx, ldw;
    int T, K, n0, n1;
} gm_band;

/*
** y[n0..n1) = x[0..K) @ W[0..K)[n0..n1): one row, W streamed once, row by
** row. fetch_ahead: fetch the rows ahead, for a run of columns too short
** for the hardware prefetcher (not for whole rows, which it streams itself).
*/
typedef void (*gm_gemv_fn)(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1,
                           int fetch_ahead);

/* Y[t][n] = dot(X[t][0..K), W[n][0..K)) for t < rows (<= 4), one n. */
typedef void (*gm_dot_fn)(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows);

void gm_band_avx2(const gm_band *b);
void gm_gemv_avx2(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1, int fetch_ahead);
void gm_dot_avx2(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows);

/* y[0..n) += bias (may be NULL), then rounded to bf16 when round is set. */
void gm_finish_avx2(float *y, const gm_bf16 *bias, int n, int round);

/* gm_add_round, gm_norm_scale and gm_swiglu (gm/kernels.h). */
void gm_add_round_avx2(float *x, const float *y, int n, int round);
void gm_norm_scale_avx2(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round);
void gm_swiglu_avx2(float *g, const float *u, int n, int round);

/* Y[n] = dot(X[0..K), W[n][0..K)) for n in [n0, n1): one row of X against many rows of W. */
void gm_dot_rows_avx2(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1);

#endif
