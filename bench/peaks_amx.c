/*
** The AMX tier's loop for bench_runner (peaks.h); built for AMX-TILE and
** AMX-BF16 only, run only where gm_cpu_features() has GM_CPU_AMX_BF16, which
** also means the kernel has granted this process the tile data state.
*/
#pragma GCC target("amx-tile,amx-bf16")
#include <immintrin.h>
#include <string.h>

#include "peaks.h"

/* The 64-byte tile configuration LDTILECFG reads (palette 1). */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16]; /* bytes per row of tile i */
    uint8_t rows[16];
} tile_config;

_Static_assert(sizeof(tile_config) == 64, "the tile configuration is 64 bytes");

/*
** GCC's _tile_loadd (and LDTILECFG's operand) do not tell the compiler which
** memory they read: this makes every store to *p happen before.
*/
#define STORES_DONE(p) __asm__ volatile("" : : "r"(p) : "memory")

/*
** Eight tiles of 16 rows x 64 bytes: C0-C3 (16x16 f32) accumulate, A4-A5
** (16x32 bf16) and B6-B7 (16 pairs of rows x 16 columns of bf16) are read.
** Each round issues four TDPBF16PS on the four independent accumulators
** (Cij += Ai Bj), 16 * 16 * 32 * 2 flops each.
*/
void amx_tiles_16x64(void)
{
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    STORES_DONE(&cfg);
    _tile_loadconfig(&cfg);
}

double peak_amx_bf16(long iters, float *sink)
{
    _Alignas(64) uint16_t a[16 * 32], b[16 * 32];
    _Alignas(64) float c[4][16 * 16];
    for (int i = 0; i < 16 * 32; i++) {
        a[i] = 0x3F00; /* 0.5 in bf16 */
        b[i] = 0x3980; /* 2^-12 */
    }
    amx_tiles_16x64();
    STORES_DONE(a);
    STORES_DONE(b);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
    _tile_release();
    STORES_DONE(c);
    *sink = c[0][0] + c[1][0] + c[2][0] + c[3][0];
    return (double)iters * 4 * (16.0 * 16 * 32 * 2);
}
