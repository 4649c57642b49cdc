/*
** Attention's two products and its softmax's steps (gm/kernels.h):
** each call runs on the calling thread, on the tier that runs the
** projections; the arithmetic is in the tier files.
*/
#include "gm/kernels.h"

#include "kernels_impl.h"

void gm_attn_scores(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk, int d)
{
    gm_tier_current()->attn_scores(S, lds, Q, ldq, nq, K, ldk, nk, d);
}

void gm_attn_values(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk, int d,
                    int accumulate)
{
    gm_tier_current()->attn_values(O, ldo, P, ldp, nq, V, ldv, nk, d, accumulate);
}

float gm_exp_sum(float *y, const float *x, int n, float m) { return gm_tier_current()->exp_sum(y, x, n, m); }

float gm_scale_max(float *sc, int n, float scale, int round, float m)
{
    return gm_tier_current()->scale_max(sc, n, scale, round, m);
}

void gm_div_round(float *y, int n, float d, int round) { gm_tier_current()->div_round(y, n, d, round); }
