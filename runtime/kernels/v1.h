/*
** Internal: v8.h's element-wise operations at one lane, in plain C (fmaf for
** the fused multiply-add), for the portable tier: through vf.h the
** element-wise steps and the exp of vec_steps.h are one source on every
** tier, and since each operation is the same IEEE operation on every lane,
** the portable tier gives the same bits as the vector ones.
*/
#ifndef GM_V1_H
#define GM_V1_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gm/bf16.h"

typedef float v1;

static inline v1 v1_zero(void) { return 0.0f; }
static inline v1 v1_set1(float x) { return x; }
static inline v1 v1_load(const float *p) { return *p; }
static inline void v1_store(float *p, v1 v) { *p = v; }
static inline v1 v1_fma(v1 a, v1 b, v1 c) { return fmaf(a, b, c); }
static inline v1 v1_add(v1 a, v1 b) { return a + b; }
static inline v1 v1_sub(v1 a, v1 b) { return a - b; }
static inline v1 v1_mul(v1 a, v1 b) { return a * b; }
static inline v1 v1_div(v1 a, v1 b) { return a / b; }
static inline v1 v1_min(v1 a, v1 b) { return a < b ? a : b; } /* as MINSS: b where either is NaN */
static inline v1 v1_max(v1 a, v1 b) { return a > b ? a : b; }
static inline v1 v1_load_part(const float *p, int n) { return n > 0 ? *p : 0.0f; }
static inline void v1_store_part(float *p, int n, v1 v)
{
    if (n > 0)
        *p = v;
}
static inline v1 v1_load_bf16(const gm_bf16 *p) { return gm_bf16_to_f32(*p); }
static inline float v1_hsum(v1 v) { return v; }
static inline v1 v1_round_bf16(v1 v) { return gm_bf16_to_f32(gm_f32_to_bf16(v)); }

static inline v1 v1_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline void v1_exp2_halves(v1 t, v1 *a, v1 *b)
{
    uint32_t u;
    memcpy(&u, &t, 4);
    const int32_t n = (int32_t)(u - 0x4B400000u), n1 = n >= 0 ? n / 2 : -((1 - n) / 2); /* n >> 1, rounded down */
    *a = v1_bits((uint32_t)(n1 + 127) << 23);
    *b = v1_bits((uint32_t)(n - n1 + 127) << 23);
}

static inline v1 v1_nan_pass(v1 x, v1 r) { return x != x ? x + x : r; }

#endif
