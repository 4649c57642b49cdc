/* RoPE tables in HF's fp32 arithmetic; see gm/rope.h for the formulas. */
#include "gm/rope.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/*
** HF's llama3 rule on one frequency, each operation an fp32 rounding as
** torch performs it: wavelen = reciprocal(inv) * 2pi, compared against
** N / low_freq_factor and N / high_freq_factor; the band in between is
** interpolated with smooth = (N * reciprocal(wavelen) - l) / (h - l).
*/
static float llama3_scale(float inv, const gm_rope_scaling *s)
{
    const float two_pi = (float)(2.0 * M_PI);
    const float factor = (float)s->factor;
    const float lo = (float)s->low_freq_factor, hi = (float)s->high_freq_factor;
    const float n = (float)s->original_max_position_embeddings;
    const float low_wl = n / lo, high_wl = n / hi;
    const float wavelen = (1.0f / inv) * two_pi;

    if (wavelen > low_wl)
        return inv / factor;
    if (wavelen < high_wl)
        return inv;
    // HF computes high_freq_factor - low_freq_factor on Python floats, then divides in fp32
    const float smooth = ((1.0f / wavelen) * n - lo) / (float)(s->high_freq_factor - s->low_freq_factor);
    return ((1.0f - smooth) * inv) / factor + smooth * inv;
}

void gm_rope_inv_freq(float *inv_freq, int head_dim, double rope_base,
                      const gm_rope_scaling *scaling)
{
    const float base = (float)rope_base;
    for (int i = 0; i < head_dim / 2; i++) {
        const float e = (float)(2 * i) / (float)head_dim;
        // torch's fp32 pow: the exact power rounded once to fp32
        const float p = (float)pow((double)base, (double)e);
        float inv = 1.0f / p;
        if (scaling && scaling->type == GM_ROPE_LLAMA3)
            inv = llama3_scale(inv, scaling);
        inv_freq[i] = inv;
    }
}

int gm_rope_table(gm_bf16 **table, int seq_len, int head_dim, double rope_base,
                  const gm_rope_scaling *scaling, gm_status *st)
{
    *table = NULL;
    if (head_dim <= 0 || head_dim % 2 || seq_len <= 0)
        return gm_fail(st, GM_EUSAGE, "rope table: expected a positive even head_dim "
                       "and a positive seq_len, found head_dim %d, seq_len %d",
                       head_dim, seq_len);
    if ((size_t)seq_len > SIZE_MAX / sizeof(gm_bf16) / (size_t)head_dim)
        return gm_fail(st, GM_ENOMEM, "rope table: %d x %d entries overflow", seq_len, head_dim);
    if (!((float)rope_base > 0.0f && rope_base <= FLT_MAX)) /* in f32, as it is used: 0, -5, NaN or 1e-300 gave NaN */
        return gm_fail(st, GM_EUSAGE, "rope table: expected a finite positive rope_theta, found %g", rope_base);

    const int h = head_dim / 2;
    float *inv = malloc((size_t)h * sizeof *inv);
    gm_bf16 *t = malloc((size_t)seq_len * (size_t)head_dim * sizeof *t);
    if (!inv || !t) {
        free(inv);
        free(t);
        return gm_fail(st, GM_ENOMEM, "rope table: out of memory for %d x %d", seq_len, head_dim);
    }
    gm_rope_inv_freq(inv, head_dim, rope_base, scaling);
    for (int p = 0; p < seq_len; p++) {
        gm_bf16 *row = t + (size_t)p * (size_t)head_dim;
        for (int i = 0; i < h; i++) {
            const float angle = (float)p * inv[i];
            // cos/sin of an fp32 angle, rounded once to fp32, then to bf16
            row[i] = gm_f32_to_bf16((float)cos((double)angle));
            row[h + i] = gm_f32_to_bf16((float)sin((double)angle));
        }
    }
    free(inv);
    *table = t;
    return 0;
}
