/* Internal: the per-ISA pieces behind gm/kernels.h. */
#ifndef GM_KERNELS_IMPL_H
#define GM_KERNELS_IMPL_H

#include "gm/bf16.h"

/*
** Widen W[k0..k1)[n0..n0+ncols) (bf16, row stride ldw; ncols a multiple of
** 8) into f32 panels of nr columns (the last one may be narrower), each
** k-major and contiguous: panel p starts at dst + p * (k1 - k0) * nr. What
** the micro-kernels read.
*/
typedef void (*gm_pack_fn)(float *dst, const gm_bf16 *W, long ldw, int k0, int k1, int n0, int ncols, int nr);

/*
** Y[t][0..nr) += X[t][0..kb) @ P[0..kb)[0..nr) for t < rows (rows <= 4),
** where P is a packed panel of width nr (24, 16 or 8).
*/
typedef void (*gm_micro_fn)(float *Y, long ldy, const float *X, long ldx, const float *P, int kb, int nr, int rows);

/* y[n0..n1) = x[0..K) @ W[0..K)[n0..n1): one row, W streamed once, row by row. */
typedef void (*gm_gemv_fn)(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1);

/* Y[t][n] = dot(X[t][0..K), W[n][0..K)) for t < rows (<= 4), one n. */
typedef void (*gm_dot_fn)(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows);

void gm_pack_avx2(float *dst, const gm_bf16 *W, long ldw, int k0, int k1, int n0, int ncols, int nr);
void gm_micro_avx2(float *Y, long ldy, const float *X, long ldx, const float *P, int kb, int nr, int rows);
void gm_gemv_avx2(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1);
void gm_dot_avx2(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows);

/* y[0..n) += bias (may be NULL), then rounded to bf16 when round is set. */
void gm_finish_avx2(float *y, const gm_bf16 *bias, int n, int round);

/* Y[n] = dot(X[0..K), W[n][0..K)) for n in [n0, n1): one row of X against many rows of W. */
void gm_dot_rows_avx2(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1);

#endif
