/*
** Internal: the AVX-512 intrinsics on a CPU without AVX-512, for the tests.
** Included first by a tier file compiled as its "-simde" twin (GM_SIMDE:
** avx512_simde.c, avx512bf16_simde.c, amx_simde.c), it maps each _mm512_
** name the kernels use to an emulation that computes every lane as the
** instruction does, out of AVX2 operations: SIMDe's (libsimde-dev), and
** below, ours for the few that SIMDe 0.7 lacks. So the hardware tiers' own
** source, the lines their software models replace included (v16.h's
** AVX-512 half, the packing in registers of pairs16.h and amx.c), runs in
** the tests on any CPU with AVX2.
**
** Not SIMDe's: VDPBF16PS, whose order of sums and flushing to zero SIMDe
** does not follow (avx512bf16.c takes its own model of it), and the AMX
** tiles (tile.h's model). The masked loads and stores touch only the
** lanes of their mask, as the hardware's do (a lane past the end of an
** array is not read), and the aligned loads and stores trap on an address
** that is not 64-byte aligned, where the hardware faults. GCC's own
** declarations come first (immintrin.h), so that SIMDe takes its types and
** maps only the names.
*/
#ifndef GM_SIMDE512_H
#define GM_SIMDE512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#define SIMDE_ENABLE_NATIVE_ALIASES 1
#include <simde/x86/avx512.h>
#undef I /* complex.h's, which SIMDe includes: the kernels name a dimension I */

typedef int32_t gm_simde_i32 __attribute__((vector_size(64)));
typedef uint32_t gm_simde_u32 __attribute__((vector_size(64)));
typedef float gm_simde_f32 __attribute__((vector_size(64)));
typedef uint16_t gm_simde_u16 __attribute__((vector_size(32)));

/* where the hardware raises #GP: an aligned access to an address that is not */
static inline void gm_simde_aligned(const void *p)
{
    if ((uintptr_t)p % 64)
        __builtin_trap();
}

static inline __m512i gm_simde_load_si512(const void *p)
{
    gm_simde_aligned(p);
    return simde_mm512_load_si512(p);
}
static inline void gm_simde_store_si512(void *p, __m512i v)
{
    gm_simde_aligned(p);
    simde_mm512_store_si512(p, v);
}

/* the lanes of k, from p or to p; the others 0 and not read (or not written) */
static inline __m512i gm_simde_maskz_loadu_epi32(__mmask16 k, const void *p)
{
    uint32_t v[16] = {0};
    for (int i = 0; i < 16; i++)
        if (k >> i & 1)
            memcpy(&v[i], (const char *)p + 4 * i, 4);
    __m512i r;
    memcpy(&r, v, 64);
    return r;
}
static inline void gm_simde_mask_storeu_epi32(void *p, __mmask16 k, __m512i a)
{
    uint32_t v[16];
    memcpy(v, &a, 64);
    for (int i = 0; i < 16; i++)
        if (k >> i & 1)
            memcpy((char *)p + 4 * i, &v[i], 4);
}

static inline __m256i gm_simde_cvtepi32_epi16(__m512i a) /* each lane's low 16 bits */
{
    return (__m256i)__builtin_convertvector((gm_simde_u32)a, gm_simde_u16);
}
static inline __m512i gm_simde_cvtepu16_epi32(__m256i a)
{
    return (__m512i)__builtin_convertvector((gm_simde_u16)a, gm_simde_u32);
}
static inline __m512 gm_simde_cvtepi32_ps(__m512i a) /* rounded to nearest even, as MXCSR has it */
{
    return (__m512)__builtin_convertvector((gm_simde_i32)a, gm_simde_f32);
}
static inline __m512i gm_simde_srai_epi32(__m512i a, unsigned n) /* past 31: the sign in every bit */
{
    return (__m512i)((gm_simde_i32)a >> (n > 31 ? 31 : n));
}

#undef _mm512_load_si512
#undef _mm512_store_si512
#undef _mm512_srai_epi32 /* a macro in GCC's own header when not optimizing (-O0), which <immintrin.h> brings in */
#define _mm512_load_si512(p) gm_simde_load_si512(p)
#define _mm512_store_si512(p, v) gm_simde_store_si512(p, v)
#define _mm512_stream_si512(p, v) gm_simde_store_si512(p, v)
#define _mm512_maskz_loadu_epi32(k, p) gm_simde_maskz_loadu_epi32(k, p)
#define _mm512_maskz_loadu_ps(k, p) _mm512_castsi512_ps(gm_simde_maskz_loadu_epi32(k, p))
#define _mm512_mask_storeu_epi32(p, k, v) gm_simde_mask_storeu_epi32(p, k, v)
#define _mm512_mask_storeu_ps(p, k, v) gm_simde_mask_storeu_epi32(p, k, _mm512_castps_si512(v))
#define _mm512_cvtepi32_epi16(a) gm_simde_cvtepi32_epi16(a)
#define _mm512_cvtepu16_epi32(a) gm_simde_cvtepu16_epi32(a)
#define _mm512_cvtepi32_ps(a) gm_simde_cvtepi32_ps(a)
#define _mm512_srai_epi32(a, n) gm_simde_srai_epi32(a, n)

#endif
