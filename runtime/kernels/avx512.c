/*
** The AVX-512 tier: vec_kernels.h and vec_steps.h, the AVX2 tier's source,
** at 16 lanes (v16.h): register tiles of up to 8 rows by 32 columns for many
** rows (band), 32 columns a step for one (gemv), on W in panels of 32
** columns, its form (GM_W_PANEL32: a tile's k-block is one run of memory),
** the products against W^T (the LM head), attention's two products and the
** element-wise steps.
** Compiled for AVX-512 F/BW/VL here, and for AVX2 as the software model of
** those operations in avx512_model.c ("avx512-model"), which the tests run
** on any CPU with AVX2. The load-time transposes and conversions are the AVX2 tier's.
**
** Every sum is an FMA chain in k order, as on the other tiers, so products
** of bf16 values give the same bits here as everywhere. VDPBF16PS
** (AVX512_BF16) is not used: it multiplies pairs of bf16 values and adds
** the odd product before the even one, each addition rounded to nearest
** even with denormal inputs and outputs flushed to zero, so its sums would
** differ from FMA's in order and near zero; it needs X in bf16 as well;
** and on the Sapphire Rapids Xeon its peak is half of the 16-lane FMA's
** (90 against 175 GFLOP/s a thread, bench_runner). The benchmark measures both peaks.
*/
#ifdef GM_V16_MODEL
#pragma GCC target("avx2,fma")
#define TIER(x) x##_avx512_model
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#define TIER(x) x##_avx512
#endif
#include <math.h>
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"

#define GM_VF_LANES 16
#include "vf.h"
#include "vec_kernels.h"
#include "vec_steps.h"

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
    .wform = GM_W_PANEL32,
    .lanes = 16,
    .base = &gm_tier_avx2, /* the transposes and conversions */
    .band = TIER(band),
    .panel_unit = NC,
    .gemv = TIER(gemv),
    .gemv_panels = TIER(gemv_panels),
    .dot = TIER(dot),
    .dot_rows = TIER(dot_rows),
    .finish = TIER(finish),
    .add_round = TIER(add_round),
    .norm_scale = TIER(norm_scale),
    .swiglu = TIER(swiglu),
    .attn_scores = TIER(attn_scores),
    .attn_values = TIER(attn_values),
    .exp_sum = TIER(exp_sum),
};
