/*
** The AMX tier: products of two or more rows on tiles (TDPBF16PS), with
** the AVX-512 tier for one row and for everything else. Written in the tile
** operations of tile.h; compiled for AMX here and, as amx_model.c
** ("amx-model"), for their software model, which the tests run on any CPU.
**
** A tile product needs X in bf16: dispatch.c converts X once per call and
** only calls band_bf16 when every value converted exactly, which is the
** runner's bf16 mode, where HF rounds every activation to bf16; the
** products are then exact, and only the order of the f32 sums differs from
** the other tiers (tile.h says how). Otherwise (f32 mode) the AVX-512 band runs.
**
** W stays in the loader's (in, out) layout, with no second copy. For each
** k-block of AKB rows and each band of GM_BAND columns, the band's rows are
** packed by pairs along k into B tiles in `panel` (192 KB, in L2), fetching
** the rows FETCH_AHEAD further on as they go, and every block of 32 rows of X is
** multiplied against the panel: four C tiles (32 x 32 outputs) per step of
** 32 k. A 32-row prefill thus reads each weight byte once, and the packing
** is the only work per byte besides the products.
*/
#ifdef GM_TILE_MODEL
#pragma GCC target("avx2,fma")
#define TIER(x) x##_amx_model
#define REST gm_tier_avx512_model
#else
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx2,fma")
#define TIER(x) x##_amx
#define REST gm_tier_avx512
#endif
#include <immintrin.h>

#include "gm/cpu.h"
#include "kernels_impl.h"
#include "tile.h"

enum {
    AKB = 512,            /* rows of W per panel: 16 steps of 32 */
    STEPS = AKB / 32,
    NB = GM_BAND / 16,    /* B tiles across a band */
    FETCH_AHEAD = 16,     /* rows of W fetched ahead of the packing */
};

/* B tile (step s, column block c) of the panel: 16 rows of 16 pairs */
#define PANEL(p, s, c) ((p) + ((long)(s) * NB + (c)) * 512)

/*
** Rows [k0, k1) of W, columns [s0, s1), into the panel's B tiles: row r of
** tile (s, c) holds the pairs (W[k][n], W[k + 1][n]), k = k0 + 32 s + 2 r,
** for its 16 columns n; rows past k1 and columns past s1 are zeros.
*/
static void pack(gm_bf16 *panel, const gm_band *b, int k0, int k1, int s0, int s1)
{
    const int nb = (s1 - s0 + 15) / 16, steps = (k1 - k0 + 31) / 32;
    for (int s = 0; s < steps; s++)
        for (int r = 0; r < 16; r++) {
            const int k = k0 + 32 * s + 2 * r;
            const gm_bf16 *r0 = k < k1 ? b->W + (long)k * b->ldw : NULL;
            const gm_bf16 *r1 = k + 1 < k1 ? r0 + b->ldw : NULL;
            if (k + FETCH_AHEAD + 1 < b->K) /* two rows FETCH_AHEAD on, a line of 32 columns each */
                for (int n = s0; n < s1; n += 32) {
                    _mm_prefetch((const char *)(b->W + (long)(k + FETCH_AHEAD) * b->ldw + n), _MM_HINT_T0);
                    _mm_prefetch((const char *)(b->W + (long)(k + FETCH_AHEAD + 1) * b->ldw + n), _MM_HINT_T0);
                }
            for (int c = 0; c < nb; c++) {
                const int n = s0 + 16 * c, cnt = s1 - n < 16 ? s1 - n : 16;
                tile_pack_pairs(PANEL(panel, s, c) + 32 * r, r0 ? r0 + n : NULL, r1 ? r1 + n : NULL, cnt);
            }
        }
}

/* A C tile's 16 x 16 outputs at rows t.., columns n.. that are inside [0, T) x [.., s1), through edge */
static void edge_in(float *edge, const gm_band *b, int t, int n, int s1, int first)
{
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            edge[i * 16 + j] = !first && t + i < b->T && n + j < s1 ? b->Y[(long)(t + i) * b->ldy + n + j] : 0.0f;
}

static void edge_out(const float *edge, const gm_band *b, int t, int n, int s1)
{
    for (int i = 0; i < 16 && t + i < b->T; i++)
        for (int j = 0; j < 16 && n + j < s1; j++)
            b->Y[(long)(t + i) * b->ldy + n + j] = edge[i * 16 + j];
}

/* C tile `tile` (a literal: the instructions name their tiles) from and to Y, or through edge where the block leaves it */
#define C_LOAD(tile, t, n)                                                                                       \
    do {                                                                                                         \
        if ((t) + 16 <= b->T && (n) + 16 <= s1) {                                                                \
            if (first)                                                                                           \
                TILE_ZERO(tile);                                                                                 \
            else                                                                                                 \
                TILE_LOAD(tile, b->Y + (long)(t) * b->ldy + (n), sy);                                            \
        } else {                                                                                                 \
            edge_in(edge, b, t, n, s1, first);                                                                   \
            TILE_LOAD(tile, edge, 64);                                                                           \
        }                                                                                                        \
    } while (0)

#define C_STORE(tile, t, n)                                                                                      \
    do {                                                                                                         \
        if ((t) + 16 <= b->T && (n) + 16 <= s1) {                                                                \
            TILE_STORE(tile, b->Y + (long)(t) * b->ldy + (n), sy);                                               \
        } else {                                                                                                 \
            TILE_STORE(tile, edge, 64);                                                                          \
            edge_out(edge, b, t, n, s1);                                                                         \
        }                                                                                                        \
    } while (0)

/*
** Y[t][n0..n1) = Xb[t] @ W for t < T (>= 2): tiles 0-3 hold C (rows t..t+16
** and t+16..t+32, by columns n..n+16 and n+16..n+32), 4-5 the two A tiles
** (32 k of 16 rows of Xb), 6-7 the two B tiles.
*/
static void TIER(band_bf16)(const gm_band *b)
{
    gm_bf16 panel[STEPS * NB * 512] __attribute__((aligned(64)));
    float edge[16 * 16] __attribute__((aligned(64)));
    const long sx = b->ldxb * 2, sy = b->ldy * 4;
    tile_config cfg;
    tile_config_full(&cfg);
    TILE_CONFIG(&cfg);
    for (int k0 = 0; k0 < b->K; k0 += AKB) {
        const int k1 = k0 + AKB < b->K ? k0 + AKB : b->K, steps = (k1 - k0 + 31) / 32, first = k0 == 0;
        for (int s0 = b->n0; s0 < b->n1; s0 += GM_BAND) {
            const int s1 = s0 + GM_BAND < b->n1 ? s0 + GM_BAND : b->n1, nb = (s1 - s0 + 15) / 16;
            pack(panel, b, k0, k1, s0, s1);
            for (int t = 0; t < b->T; t += 32) {
                const int two = t + 16 < b->T; /* a second block of 16 rows */
                for (int c = 0; c < nb; c += 2) {
                    const int n = s0 + 16 * c, pair = c + 1 < nb;
                    C_LOAD(0, t, n);
                    if (pair)
                        C_LOAD(1, t, n + 16);
                    if (two) {
                        C_LOAD(2, t + 16, n);
                        if (pair)
                            C_LOAD(3, t + 16, n + 16);
                    }
                    for (int s = 0; s < steps; s++) {
                        const gm_bf16 *xa = b->Xb + (long)t * b->ldxb + k0 + 32 * s;
                        TILE_LOAD(4, xa, sx);
                        TILE_LOAD(6, PANEL(panel, s, c), 64);
                        TILE_DP(0, 4, 6);
                        if (pair) {
                            TILE_LOAD(7, PANEL(panel, s, c + 1), 64);
                            TILE_DP(1, 4, 7);
                        }
                        if (two) {
                            TILE_LOAD(5, xa + 16 * b->ldxb, sx);
                            TILE_DP(2, 5, 6);
                            if (pair)
                                TILE_DP(3, 5, 7);
                        }
                    }
                    C_STORE(0, t, n);
                    if (pair)
                        C_STORE(1, t, n + 16);
                    if (two) {
                        C_STORE(2, t + 16, n);
                        if (pair)
                            C_STORE(3, t + 16, n + 16);
                    }
                }
            }
        }
    }
    TILE_RELEASE();
}

const gm_tier TIER(gm_tier) = {
#ifdef GM_TILE_MODEL
    .name = "amx-model",
    .needs = GM_CPU_AVX2 | GM_CPU_FMA,
    .model = 1,
#else
    .name = "amx",
    .needs = GM_CPU_AMX_BF16 | GM_CPU_AVX512 | GM_CPU_AVX2 | GM_CPU_FMA,
#endif
    .base = &REST, /* everything but the tile products */
    .band_bf16 = TIER(band_bf16),
};
