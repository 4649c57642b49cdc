/* Internal: the per-ISA tile functions behind gm/kernels.h. */
#ifndef GM_KERNELS_IMPL_H
#define GM_KERNELS_IMPL_H

#include "gm/bf16.h"

/*
** Accumulate Y[t][n0..n0+16) += X[t][k0..k1) @ W[k0..k1)[n0..n0+16) for rows
** t in [0, rows), rows <= 4. ldx, ldw, ldy are row strides in elements.
*/
typedef void (*gm_tile_fn)(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *W, int ldw,
                           int k0, int k1, int rows);

/* Y[t][n] = dot(X[t][0..K), W[n][0..K)) for t < rows (<= 4), one n. */
typedef void (*gm_dot_fn)(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *Wn, int K,
                          int rows);

void gm_tile_avx2(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *W, int ldw, int k0, int k1,
                  int rows);
void gm_dot_avx2(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *Wn, int K, int rows);

#endif
