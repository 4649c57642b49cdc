/*
** Internal: the width-generic names the shared kernels are written in
** (vec_kernels.h, vec_steps.h): vf_* and vw_* are v16.h's, v8.h's or v1.h's
** operations as GM_VF_LANES is 16, 8 or 1, VF_LANES their lanes, and
** VF_ROWS the most rows of X a register tile holds at this width (two
** vectors of accumulators a row, and room for the weights and a broadcast):
** 6 of AVX2's 16 ymm registers, 8 of AVX-512's 32 zmm, and 2 on v16.h's
** model, whose every vector is two ymm. VF_EACH_ROWS(X) is X(1) .. X(VF_ROWS).
*/
#ifndef GM_VF_H
#define GM_VF_H

#include <string.h>

#if GM_VF_LANES == 16
#include "v16.h"
#define VF_(op) v16##op
#ifdef GM_V16_MODEL
#define VF_ROWS 2
#define VF_EACH_ROWS(X) X(1) X(2)
#else
#define VF_ROWS 8
#define VF_EACH_ROWS(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)
#endif
#elif GM_VF_LANES == 8
#include "v8.h"
#define VF_(op) v8##op
#define VF_ROWS 6
#define VF_EACH_ROWS(X) X(1) X(2) X(3) X(4) X(5) X(6)
#elif GM_VF_LANES == 1
#include "v1.h"
#define VF_(op) v1##op
#else
#error "GM_VF_LANES: 16, 8 or 1"
#endif

#define VF_LANES GM_VF_LANES
typedef VF_() vf;

#define vf_zero VF_(_zero)
#define vf_set1 VF_(_set1)
#define vf_load VF_(_load)
#define vf_store VF_(_store)
#define vf_bcast VF_(_bcast)
#define vf_fma VF_(_fma)
#define vf_add VF_(_add)
#define vf_sub VF_(_sub)
#define vf_mul VF_(_mul)
#define vf_div VF_(_div)
#define vf_min VF_(_min)
#define vf_max VF_(_max)
#define vf_load_part VF_(_load_part)
#define vf_store_part VF_(_store_part)
#define vf_load_bf16 VF_(_load_bf16)
#define vf_hsum VF_(_hsum)
#define vf_round_bf16 VF_(_round_bf16)
#define vf_exp2_halves VF_(_exp2_halves)
#define vf_nan_pass VF_(_nan_pass)

/* the products' operations: not at one lane */
#define vf_split VF_(_split)
#define vf_join VF_(_join)
#define vw VF_(w)
#define vw_load VF_(w_load)
#define vw_even VF_(w_even)
#define vw_odd VF_(w_odd)

/* p's lanes [0, m) when m < VF_LANES (the others 0, neither read nor written), else a whole vector */
static inline __attribute__((always_inline)) vf vf_load_n(const float *p, int m)
{
    return m == VF_LANES ? vf_load(p) : vf_load_part(p, m);
}

static inline __attribute__((always_inline)) void vf_store_n(float *p, int m, vf v)
{
    if (m == VF_LANES)
        vf_store(p, v);
    else
        vf_store_part(p, m, v);
}

static inline __attribute__((always_inline)) vf vf_load_bf16_n(const gm_bf16 *p, int m)
{
    if (m == VF_LANES)
        return vf_load_bf16(p);
    gm_bf16 t[VF_LANES] = {0};
    memcpy(t, p, sizeof(gm_bf16) * (size_t)m);
    return vf_load_bf16(t);
}

#endif
