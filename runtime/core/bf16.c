/*
** Out-of-line bf16 helpers (see gm/bf16.h): exact IEEE half widening and
** array narrowing with torch's round-to-nearest-even.
*/
#include "gm/bf16.h"

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float gm_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;

    if (exp == 0x1F) // inf, or NaN with its payload kept
        return f32_from_bits(sign | 0x7F800000u | (mant << 13));
    if (exp != 0)
        return f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
    if (mant == 0)
        return f32_from_bits(sign);
    // Subnormal half: mant * 2^-24. Normalise so the leading 1 lands on bit 10;
    // every half subnormal is a normal f32.
    int shift = 0;
    while ((mant & 0x400u) == 0) {
        mant <<= 1;
        shift++;
    }
    mant &= 0x3FFu;
    return f32_from_bits(sign | ((uint32_t)(127 - 15 + 1 - shift) << 23) | (mant << 13));
}

void gm_f32_to_bf16_n(gm_bf16 *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gm_f32_to_bf16(src[i]);
}
