/*
** What bounds the AMX tier's long prompts, measured: the 2 x 2 tile loop of
** nk_block (runtime/kernels/amx.c) taken apart, on one thread, each part in
** turn with the others in the same run.
**
**   bench_tiles [--k K] [--reps N]
**
** A unit is what nk_block's later passes do for one stripe and one token
** pair: 32 rows of W (two A tiles, rows K values apart, as the file holds
** them) against 32 tokens of packed X (two B tiles), K / 32 steps of four
** TDPBF16PS into four C tiles, which are stored at the unit's end. Ten
** stripes (about a megabyte of W at K = 1536, a block in L2) meet 16 token
** pairs (X of 512 tokens). Each line is the median of the repeats, in ns a
** TDPBF16PS (or a tile load) and GFLOP/s:
**   products alone, C never stored     the tile unit's own rate
**   products alone, C stored a unit    what a unit's end costs (the store
**                                      waits for the last product, the next
**                                      unit for the store)
**   tile loads alone, from L1 / from   a kilobyte tile's load
**   the block
**   the loop, operands in L1 / as      nk_block's loop, with its operands
**   nk_block reads them                held in L1 (the same eight steps over
**                                      again: wrong sums, a measurement) or
**                                      read from the block as it does
** At the default K the block (960 KB of W) and a token pair's X (96 KB)
** stay in a 2 MB L2; a K of 8960 (down's) reads them from further out.
** The values are not checked: this is timing only.
*/
#pragma GCC target("amx-tile,amx-bf16")
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gm/cli.h"
#include "gm/cpu.h"
#include "peaks.h"

enum { STRIPES = 10, PAIRS = 16, MAX_REPS = 64 };

typedef enum { PRODUCTS_UNSTORED, PRODUCTS_STORED, LOADS_L1, LOADS_L2, LOOP_L1, LOOP_L2, WAYS } way; /* NAMES[] */

static const char *const NAMES[WAYS] = {
    "products alone, C never stored", "products alone, C stored a unit", "tile loads alone, from L1",
    "tile loads alone, from the block", "the loop, operands in L1",       "the loop, as nk_block reads them"};

typedef struct operands {
    const uint16_t *W; /* STRIPES x 32 rows of K bf16 */
    const uint32_t *X; /* PAIRS x 2 token blocks x K / 32 tiles of 256 pairs */
    float *C;          /* a unit's four stored tiles */
    int K;
} operands;

/* One pass of every unit the way asks for; returns the TDPBF16PS (or tile loads) it issued. */
static double run(way w, const operands *o)
{
    const int K = o->K, steps = K / 32;
    const long sa = 2L * K;
    for (int p = 0; p < PAIRS; p++) {
        const uint32_t *b0 = o->X + (size_t)p * 2 * steps * 256, *b1 = b0 + (size_t)steps * 256;
        for (int st = 0; st < STRIPES; st++) {
            const uint16_t *a0 = o->W + (size_t)st * 32 * K, *a1 = a0 + 16L * K;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int s = 0; s < steps; s++) {
                const int q = w == LOADS_L1 || w == LOOP_L1 ? s % 8 : s; /* eight steps over again: L1 */
                if (w != PRODUCTS_UNSTORED && w != PRODUCTS_STORED) {
                    _tile_loadd(4, a0 + 32 * q, sa);
                    _tile_loadd(5, a1 + 32 * q, sa);
                    _tile_loadd(6, b0 + 256 * q, 64);
                    _tile_loadd(7, b1 + 256 * q, 64);
                }
                if (w != LOADS_L1 && w != LOADS_L2) {
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 5, 6);
                    _tile_dpbf16ps(2, 4, 7);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
            if (w == PRODUCTS_STORED || w == LOOP_L1 || w == LOOP_L2) {
                _tile_stored(0, o->C, 64);
                _tile_stored(1, o->C + 256, 64);
                _tile_stored(2, o->C + 512, 64);
                _tile_stored(3, o->C + 768, 64);
            }
        }
    }
    return 4.0 * PAIRS * STRIPES * steps;
}

int main(int argc, char **argv)
{
    int K = 1536, reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--k") && i + 1 < argc)
            K = (int)gm_cli_count(argv[++i], 1, 1 << 20); /* -1 for "abc": refused below */
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (int)gm_cli_count(argv[++i], 1, 1 << 20);
        else {
            const int help = !strcmp(argv[i], "--help"); /* asked for: stdout, exit 0 */
            fprintf(help ? stdout : stderr,
                    "usage: bench_tiles [--k K] [--reps N]   (K a multiple of 32, 256 to 65536; N 1 to %d)\n", MAX_REPS);
            return help ? 0 : 2;
        }
    }
    if (K < 256 || K > 65536 || K % 32 || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "bench_tiles: --k %d --reps %d: expected K a multiple of 32 in 256..65536 and N in 1..%d\n", K,
                reps, MAX_REPS);
        return 2;
    }
    if (!(gm_cpu_features() & GM_CPU_AMX_BF16)) {
        fprintf(stderr, "bench_tiles: this CPU (or its kernel) gives no AMX-BF16 tiles: nothing to measure here\n");
        return 1;
    }
    const size_t wn = (size_t)STRIPES * 32 * K, xn = (size_t)PAIRS * 2 * (K / 32) * 256;
    uint16_t *W = aligned_alloc(4096, wn * 2);
    uint32_t *X = aligned_alloc(4096, xn * 4);
    float *C = aligned_alloc(64, 4096);
    if (!W || !X || !C) {
        fprintf(stderr, "bench_tiles: out of memory for %zu bytes of W and %zu of X\n", wn * 2, xn * 4);
        return 1;
    }
    for (size_t i = 0; i < wn; i++)
        W[i] = 0x3C00; /* 2^-7 */
    for (size_t i = 0; i < xn; i++)
        X[i] = 0x3C003C00u;
    amx_tiles_16x64();
    const operands o = {W, X, C, K};
    double t[WAYS][MAX_REPS], n[WAYS] = {0};
    for (int r = 0; r < reps; r++) /* the ways in turns, so that a change in the machine meets them all */
        for (int w = 0; w < WAYS; w++) {
            const double t0 = now();
            n[w] = run((way)w, &o);
            t[w][r] = now() - t0;
        }
    _tile_release();
    printf("AMX tile loop, 1 thread, K %d: %d stripes of 32 rows of W (%.0f KB) by %d token pairs (%.0f KB of packed "
           "X); medians of %d\n",
           K, STRIPES, wn * 2 / 1024.0, PAIRS, xn * 4 / 1024.0, reps);
    for (int w = 0; w < WAYS; w++) {
        const double s = median(t[w], reps), ns = s / n[w] * 1e9;
        if (w == LOADS_L1 || w == LOADS_L2)
            printf("  %-40s %6.2f ns a 1 KB tile load (%.0f GB/s)\n", NAMES[w], ns, 1024 / ns);
        else
            printf("  %-40s %6.2f ns a TDPBF16PS, %6.0f GFLOP/s\n", NAMES[w], ns, 16384 / ns);
    }
    free(W);
    free(X);
    free(C);
    return 0;
}
