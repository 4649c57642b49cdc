/*
** bfloat16 as torch computes it: widening is exact, narrowing rounds to
** nearest with ties to even, every NaN becomes the canonical 0x7FC0 and
** subnormals are kept (torch's c10 round_to_nearest_even).
*/
#ifndef GM_BF16_H
#define GM_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t gm_bf16;

static inline float gm_bf16_to_f32(gm_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline gm_bf16 gm_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0;
    return (gm_bf16)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* IEEE half to f32, exact (subnormals, infinities and NaN included). */
float gm_f16_to_f32(uint16_t h);

/* Round every element of an f32 array to bf16. */
void gm_f32_to_bf16_n(gm_bf16 *dst, const float *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif
