/*
** Internal: the handful of AMX tile operations the AMX tier (amx.c) is
** written in, in two implementations: the AMX-TILE and AMX-BF16
** instructions, and, with GM_TILE_MODEL defined, a software model of them
** with the ISA's semantics, so that the same kernel source runs and is
** tested on a CPU without AMX (amx_model.c, "amx-model"). The model also
** counts the bytes its tile loads read from a range the tests watch
** (gm_tile_watch), which shows how often a product reads each byte of W.
**
** The model follows the Intel SDM's operation of TDPBF16PS: for each row m
** of C and each column n, over the k pairs of one instruction, the even
** products and the odd products are summed apart, each step an f32 FMA
** rounded to nearest even with denormal inputs treated as zero and denormal
** results flushed to zero (DAZ = FTZ = 1, MXCSR neither read nor written);
** then the even sum and the odd sum are added, and that to C, rounded the
** same way. Products of two bf16 values are exact in f32, so only the order
** of the sums and the flushing near zero tell it from an FMA chain.
*/
#ifndef GM_TILE_H
#define GM_TILE_H

#include <stdint.h>
#include <string.h>

#include "gm/bf16.h"

/* Palette 1: eight tiles, each up to 16 rows of 64 bytes. */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16]; /* bytes per row, tiles 0-7 */
    uint8_t rows[16];
} tile_config;

#ifndef GM_TILE_MODEL
#include <immintrin.h>

/*
** GCC's tile macros are inline assembly that takes the address in a
** register and says nothing of the memory behind it, so the compiler could
** keep ordinary stores a tile load needs (an edge copy, a staged C tile)
** in flight, or drop them, and read what a tile store wrote before it is
** there. TILE_LOAD_STORED, for memory the same code has just written,
** and TILE_STORE put a compiler barrier on their memory side; TILE_LOAD,
** for what was written before the product began (W, the packed X), does
** not, so that the compiler keeps the loop's values in registers.
*/
#define TILE_MEMORY() __asm__ __volatile__("" ::: "memory")
#define TILE_CONFIG(c) _tile_loadconfig(c)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define TILE_LOAD_STORED(t, p, stride)                                                                           \
    do {                                                                                                         \
        TILE_MEMORY();                                                                                           \
        _tile_loadd(t, p, stride);                                                                               \
    } while (0)
#define TILE_STORE(t, p, stride)                                                                                 \
    do {                                                                                                         \
        _tile_stored(t, p, stride);                                                                              \
        TILE_MEMORY();                                                                                           \
    } while (0)
#define TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)

#else /* the model */
#include <math.h>
#include <stdatomic.h>

#include "kernels_impl.h"

/* the tile registers and the configuration, one set per thread as the hardware's */
static _Thread_local struct {
    tile_config cfg;
    uint8_t t[8][16 * 64];
} tm;

static inline void TILE_CONFIG(const tile_config *c) { tm.cfg = *c; }
static inline void TILE_RELEASE(void) { memset(&tm, 0, sizeof tm); }
static inline void TILE_ZERO(int t) { memset(tm.t[t], 0, sizeof tm.t[t]); }

static inline void TILE_LOAD(int t, const void *p, long stride)
{
    TILE_ZERO(t);
    for (int r = 0; r < tm.cfg.rows[t]; r++) {
        const uint8_t *row = (const uint8_t *)p + r * stride;
        memcpy(tm.t[t] + r * 64, row, tm.cfg.colsb[t]);
        if ((uintptr_t)row >= gm_tile_watch.lo && (uintptr_t)row < gm_tile_watch.hi)
            atomic_fetch_add_explicit(&gm_tile_watch.bytes, tm.cfg.colsb[t], memory_order_relaxed);
    }
}

#define TILE_LOAD_STORED TILE_LOAD

static inline void TILE_STORE(int t, void *p, long stride)
{
    for (int r = 0; r < tm.cfg.rows[t]; r++)
        memcpy((uint8_t *)p + r * stride, tm.t[t] + r * 64, tm.cfg.colsb[t]);
}

static inline float tile_daz(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }
#define tile_ftz tile_daz /* a denormal result becomes a zero of its sign */

static inline float tile_bf16(const uint8_t *row, int i)
{
    gm_bf16 v;
    memcpy(&v, row + 2 * i, 2);
    return tile_daz(gm_bf16_to_f32(v));
}

/* (A's and B's values widened, with DAZ, once an instruction rather than once a product) */
static inline void TILE_DP(int c, int a, int b)
{
    const int M = tm.cfg.rows[c], N = tm.cfg.colsb[c] / 4, K = tm.cfg.colsb[a] / 4;
    float av[16][32], bv[16][32]; /* av[m][2k + i], bv[n][2k + i]: pair k's i-th value of A's row m, of B's column n */
    for (int m = 0; m < M; m++)
        for (int k = 0; k < 2 * K; k++)
            av[m][k] = tile_bf16(tm.t[a] + m * 64, k);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            for (int i = 0; i < 2; i++)
                bv[n][2 * k + i] = tile_bf16(tm.t[b] + k * 64, 2 * n + i);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float even = 0.0f, odd = 0.0f, y;
            for (int k = 0; k < K; k++) {
                even = tile_ftz(fmaf(av[m][2 * k], bv[n][2 * k], even));
                odd = tile_ftz(fmaf(av[m][2 * k + 1], bv[n][2 * k + 1], odd));
            }
            memcpy(&y, tm.t[c] + m * 64 + 4 * n, 4);
            y = tile_ftz(tile_daz(y) + tile_ftz(even + odd));
            memcpy(tm.t[c] + m * 64 + 4 * n, &y, 4);
        }
}

#endif
#endif
