/*
** The AVX-512 tier: vec_kernels.h and vec_steps.h, the AVX2 tier's source,
** at 16 lanes (v16.h): register tiles of up to 8 rows by 32 columns for many
** rows (band), 32 columns a step for one (gemv), on W in panels of 32
** columns, its form (GM_W_PANEL32: a tile's k-block is one run of memory),
** the products against W^T (the LM head), attention's two products and the
** element-wise steps.
** Compiled for AVX-512 F/BW/VL here, and for AVX2 as the software model of
** those operations in avx512_model.c ("avx512-model"), which the tests run
** on any CPU with AVX2; and, as avx512_simde.c ("avx512-simde"), this same
** source with its AVX-512 intrinsics emulated (simde512.h), so that the
** lines only the hardware build has run in the tests on any CPU too. The
** load-time transposes and conversions are the AVX2 tier's.
**
** Every sum is an FMA chain in k order, as on the other tiers, so products
** of bf16 values give the same bits here as everywhere. VDPBF16PS
** (AVX512_BF16) is not used here: it sums pairs of products in its own
** order, with denormals flushed to zero, and needs X in bf16; on the
** Sapphire Rapids Xeon its peak is half of the 16-lane FMA's (90 against
** 175 GFLOP/s a thread, bench_runner), on a Zen 4 twice (216 against 105).
** The avx512-bf16 tier (avx512bf16.c) is the one that uses it.
*/
#if defined(GM_SIMDE)
#pragma GCC target("avx2,fma")
#define TIER(x) x##_avx512_simde
#include "simde512.h"
#elif defined(GM_V16_MODEL)
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
#define GM_PANEL_FETCH 1 /* decode fetches W's runs ahead too (gemv_panels) */
#include "vf.h"
#include "vec_kernels.h"
#include "vec_steps.h"

#ifndef GM_V16_MODEL
/*
** AWQ in the other form, as the AVX2 tier's block does it, each output's 32
** values two vectors of 16 lanes: the same words, arithmetic and bits. (The
** model takes the AVX2 tier's block, which gives the same bits.)
*/
static void dequant4_block_avx512(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const unsigned *sh,
                                  const int32_t *z, const float *s, size_t R, size_t I)
{
    if (I != 32 || R != 64) { /* (64 outputs: the eight word columns the transposes read are there) */
        gm_dequant4_block_portable(d, ld, w, W, sh, z, s, R, I);
        return;
    }
    const __m512i mask = _mm512_set1_epi32(15);
    const int aligned = (((uintptr_t)d | ld * 2) % 64) == 0;
    __m512i wide[2][8]; /* wide[h][j]: word column j of inputs 16h..16h+15 */
    for (int h = 0; h < 2; h++) {
        __m256i lo[8], hi[8];
        v8_transpose8_words(lo, w + 16 * h * W, W), v8_transpose8_words(hi, w + (16 * h + 8) * W, W);
        for (int j = 0; j < 8; j++)
            wide[h][j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[j]), hi[j], 1);
    }
    for (size_t r = 0; r < R; r++) {
        const __m512i zr = _mm512_set1_epi32(z[r]);
        const __m512 sr = _mm512_set1_ps(s[r]);
        __m256i b[2];
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_and_si512(_mm512_srli_epi32(wide[h][r / 8], sh[r % 8]), mask);
            const v16 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zr)), sr);
            b[h] = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(vf_round_bf16(f)), 16));
        }
        const __m512i row = _mm512_inserti64x4(_mm512_castsi256_si512(b[0]), b[1], 1);
        if (aligned)
            _mm512_stream_si512((void *)(d + r * ld), row);
        else
            _mm512_storeu_si512((void *)(d + r * ld), row);
    }
}
#endif

const gm_tier TIER(gm_tier) = {
#if defined(GM_SIMDE)
    GM_TEST_TIER("avx512", "simde"),
#elif defined(GM_V16_MODEL)
    GM_TEST_TIER("avx512", "model"),
#else
    .name = "avx512",
    .needs = GM_CPU_AVX512 | GM_CPU_AVX2 | GM_CPU_FMA,
#endif
    .wform = GM_W_PANEL32,
    .lanes = 16,
    .base = &gm_tier_avx2, /* the transposes, conversions and 4-bit rows */
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
    .rope = TIER(rope),
    .attn_scores = TIER(attn_scores),
    .attn_values = TIER(attn_values),
    .exp_sum = TIER(exp_sum),
    .scale_max = TIER(scale_max),
    .div_round = TIER(div_round),
#ifndef GM_V16_MODEL
    .dequant4_block = dequant4_block_avx512,
#endif
};
