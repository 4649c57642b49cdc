/*
** The AMX tier: products against W in Hugging Face's (out, in) layout on
** tiles (TDPBF16PS), with the AVX-512 tier for everything else. Written in
** the tile operations of tile.h; compiled for AMX here and, as amx_model.c
** ("amx-model"), for their software model, which the tests run on any CPU;
** and, as amx_simde.c ("amx-simde"), for that model with the AVX-512 lines
** (AVX512_LINES: the packing and moving of operands in registers, which the
** model does value by value) on SIMDe's emulation (simde512.h).
**
** A tile product needs its operands in bf16 and its B operand in pairs
** along k. W's rows are contiguous along k, which is what an A operand is,
** so the product is computed transposed, Y^T = W X^T: 16 rows of W (16
** outputs) by 32 values of k load straight into an A tile from wherever W
** lies (as the file holds it: no transform), and X, small, is
** packed once per call into B tiles of pairs (nk_pack: 16 tokens by 16
** pairs of k a tile). So a product reads each weight byte once, into
** tiles, and does nothing else with it. nk_pack accepts X only when every
** value is a bf16 value (the runner's bf16 mode, where HF rounds every
** activation to bf16); the products are then exact, and only the order of
** the f32 sums differs from the FMA tiers (tile.h says how). Otherwise (f32
** mode), and for W in the (in, out) form, the AVX-512 tier runs.
**
** A block (nk_block) is a run of rows of W. Its stripes of 32 rows (or, for
** SwiGLU, 16 rows of gate beside the same 16 of up) meet X two blocks of 16
** tokens at a time: four C tiles of 16 x 16 outputs, two A tiles, two B
** tiles. k runs whole (up to GM_NK_KC values: longer rows are cut, the
** partial sums kept in Y between the pieces), and a block is about a
** megabyte of W per piece, so that it stays in L2 while every token block
** passes over it. Up to 32 tokens (a decode step, a short prompt) meet W
** in one pass, with nothing to keep in L2, and k runs whole however long
** (gm_nk_kc): each row of W is then one run of memory, not pieces read at
** different times (down's rows of 8960, nk_block alone on 2 threads of a
** Xeon: one token in 5 pieces at 24 GB/s, whole at 32; 32 tokens at 19
** and 30). The first pass, which reads W from memory, takes a stripe's
** two A tiles one after the other (half_run: 16 rows of W read side by
** side stream faster than 32); the later ones, from L2, load each of the
** four tiles once a step. A finished C tile is turned back to Y's (token,
** output) order, and once the block's outputs for two token blocks are complete,
** the epilogue (bias, rounding, SwiGLU, the residual add) finishes them
** while they are in cache.
**
** Attention's two products run on tiles too (below), so that on this tier
** every product of bf16 values sums in TDPBF16PS's order, the same for a
** decode step as for a prefill.
*/
#if defined(GM_SIMDE)
#pragma GCC target("avx2,fma")
#define TIER(x) x##_amx_simde
#define REST gm_tier_avx512_simde
#include "simde512.h"
#elif defined(GM_TILE_MODEL)
#pragma GCC target("avx2,fma")
#define TIER(x) x##_amx_model
#define REST gm_tier_avx512_model
#else
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx2,fma")
#define TIER(x) x##_amx
#define REST gm_tier_avx512
#endif
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"
#include "tile.h"
#if !defined(GM_TILE_MODEL) || defined(GM_SIMDE)
/* the lines that pack and move operands in AVX-512 registers: the hardware build's, and on SIMDe's emulation */
#define AVX512_LINES 1
#include "pairs16.h"
#endif

/* Tokens a B tile holds: all of them up to 16 (a decode step is one column), else 16. */
static inline int tile_tokens(int T) { return T < 16 ? T : 16; }

/* The B tile of token block tb, k-step s, in Xp: 16 rows of nt pairs. */
static inline const uint32_t *xp_tile(const void *Xp, int nt, int steps, int tb, int s)
{
    return (const uint32_t *)Xp + ((long)tb * steps + s) * 16 * nt;
}

static size_t TIER(nk_packed)(int T, int K)
{
    return (size_t)((T + 15) / 16) * (size_t)((K + 31) / 32) * 16 * (size_t)tile_tokens(T) * 4;
}

/*
** Token blocks [t0 / 16, ..) up to t1 of X (T rows, ld floats apart, K
** values each) into Xp, nt tokens a tile: row r of tile (tb, s) holds, for
** each of its tokens t, the pair (X[t][k], X[t][k + 1]), k = 32 s + 2 r, low
** half first; zeros past K and past T. -1 when a value of X is not a bf16
** value (its low 16 bits set).
*/
static int pack_pairs(void *Xp, const float *X, long ld, int T, int K, int nt, int t0, int t1)
{
    const int steps = (K + 31) / 32;
    uint32_t inexact = 0;
    for (int tb = t0 / 16; tb * 16 < t1; tb++)
        for (int j = 0; j < nt; j++) {
            const int t = tb * 16 + j;
            const uint32_t *x = t < T ? (const uint32_t *)(const void *)(X + t * ld) : NULL;
            for (int s = 0; s < steps; s++) {
                uint32_t *d = (uint32_t *)xp_tile(Xp, nt, steps, tb, s) + j;
                for (int r = 0; r < 16; r++) {
                    const int k = 32 * s + 2 * r;
                    const uint32_t lo = x && k < K ? x[k] : 0, hi = x && k + 1 < K ? x[k + 1] : 0;
                    inexact |= (lo | hi) & 0xFFFFu;
                    d[r * nt] = (lo >> 16) | (hi & 0xFFFF0000u);
                }
            }
        }
    return inexact ? -1 : 0;
}

#ifdef AVX512_LINES
/*
** A whole tile: 16 tokens by 32 values of k. Each token's 32 values become
** its 16 pairs (the high halves of the floats, in order: one permute), and
** the 16 x 16 pairs are transposed in registers; the bits of the floats
** below their bf16 part are or'ed into low, which is returned.
*/
static inline __m512i pack_tile(uint32_t *d, const float *x, long ldx, __m512i low)
{
    __m512i r[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
        const __m512i a = _mm512_loadu_si512((const void *)(x + j * ldx));
        const __m512i b = _mm512_loadu_si512((const void *)(x + j * ldx + 16));
        low = _mm512_ternarylogic_epi32(low, a, b, 0xFE); /* low | a | b, one chain (an OR tree would keep all 32 live) */
        r[j] = high_halves(a, b);
    }
    transpose16(r);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        _mm512_store_si512((void *)(d + 16 * i), r[i]);
    return low;
}
#endif

/*
** Token blocks [t0 / 16, ..) up to t1 of X (T rows, ld floats apart, K
** values each) into Xp as nk_pack lays it out, nt tokens a tile: whole
** tiles in registers (pack_tile), the k tail and a last, partial token
** block value by value. -1 when a value is not a bf16 value.
*/
static int pack_b(void *Xp, const float *X, long ld, int T, int K, int nt, int t0, int t1)
{
    uint32_t inexact = 0;
#ifdef AVX512_LINES
    const int steps = (K + 31) / 32;
    if (nt == 16 && t0 % 16 == 0) {
        __m512i low = _mm512_setzero_si512();
        const int start = t0;
        for (; t0 + 16 <= t1 && t0 + 16 <= T; t0 += 16)
            for (int s = 0; s < K / 32; s++)
                low = pack_tile((uint32_t *)xp_tile(Xp, nt, steps, t0 / 16, s), X + (long)t0 * ld + 32 * s, ld, low);
        inexact = (uint32_t)has_low_bits(low);
        if (K % 32)
            for (int t = start; t < t0; t++) /* the k tail of the blocks above */
                for (int k = K / 32 * 32; k < 32 * steps; k += 2) {
                    const uint32_t *x = (const uint32_t *)(const void *)(X + (long)t * ld);
                    const uint32_t lo = k < K ? x[k] : 0, h = k + 1 < K ? x[k + 1] : 0;
                    inexact |= (lo | h) & 0xFFFFu;
                    ((uint32_t *)xp_tile(Xp, nt, steps, t / 16, k / 32))[(k % 32) / 2 * nt + t % 16] =
                        (lo >> 16) | (h & 0xFFFF0000u);
                }
        if (t0 >= t1)
            return inexact ? -1 : 0;
    }
#endif
    return pack_pairs(Xp, X, ld, T, K, nt, t0, t1) || inexact ? -1 : 0;
}

static int TIER(nk_pack)(void *Xp, const float *X, int T, int K, int t0, int t1)
{
    return pack_b(Xp, X, K, T, K, tile_tokens(T), t0, t1);
}

/*
** The A tile of rows [n, n + 16) of W (rows of K values), k-step s: straight
** from W, or, where the tile would reach past the last row (valid < 16) or
** past K, through `edge` with zeros there.
*/
static inline const gm_bf16 *a_tile(const gm_bf16 *W, int K, int n, int valid, int s, gm_bf16 *edge, long *stride)
{
    const int k = 32 * s;
    if (valid == 16 && k + 32 <= K) {
        *stride = (long)K * 2;
        return W + (long)n * K + k;
    }
    const int kn = K - k < 32 ? K - k : 32;
    memset(edge, 0, 16 * 32 * 2);
    for (int i = 0; i < valid; i++)
        memcpy(edge + 32 * i, W + (long)(n + i) * K + k, (size_t)kn * 2);
    *stride = 64;
    return edge;
}

enum {
    AHEAD = 8, /* k-steps ahead whose lines of W are fetched from memory (4 and 8 beat 16 and 32, bench/HISTORY.md) */
    NEXT_A = 2 /* and from L2, in the later passes: the A tiles' lines (their B tiles' gain nothing; 1-4 alike) */
};

/* Rows [n, n + rows) of W (rows of K values), their line at k: fetched to L1 */
static inline void fetch_rows(const gm_bf16 *W, int K, int n, int rows, int k)
{
    const char *p = (const char *)(W + (long)n * K + k);
    for (int i = 0; i < rows; i++, p += (long)K * 2)
        _mm_prefetch(p, _MM_HINT_T0);
}

/* C tile `c` (16 outputs n.. by tokens t..) to and from Y, through buf: the `rows` outputs and `cols` tokens inside Y */
#ifdef AVX512_LINES
/* (a 16 x 16 transpose in registers, the rows and columns outside Y masked off) */
static void c_out(const float *buf, const gm_out *o, int t, int cols, int n, int rows)
{
    __m512i r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_load_si512((const void *)(buf + 16 * i));
    transpose16(r);
    const __mmask16 m = (__mmask16)((1u << rows) - 1);
    for (int j = 0; j < cols; j++)
        _mm512_mask_storeu_epi32(o->Y + (long)(t + j) * o->N + n, m, r[j]);
}

static void c_in(float *buf, const gm_out *o, int t, int cols, int n, int rows)
{
    __m512i r[16];
    const __mmask16 m = (__mmask16)((1u << rows) - 1);
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        r[j] = j < cols ? _mm512_maskz_loadu_epi32(m, o->Y + (long)(t + j) * o->N + n) : _mm512_setzero_si512();
    transpose16(r);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        _mm512_store_si512((void *)(buf + 16 * i), r[i]);
}
#else
static void c_out(const float *buf, const gm_out *o, int t, int cols, int n, int rows)
{
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            o->Y[(long)(t + j) * o->N + n + i] = buf[16 * i + j];
}

static void c_in(float *buf, const gm_out *o, int t, int cols, int n, int rows)
{
    memset(buf, 0, 16 * 16 * 4);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            buf[16 * i + j] = o->Y[(long)(t + j) * o->N + n + i];
}
#endif

/*
** A stripe's four C tiles to Y from the stage (to_y), or from Y into it:
** tile i is A0 or A1 (i % 2: outputs n.., v0 of them, or m.., v1) by the
** first or the second token block (i / 2: c0 or c1 tokens), as far as the
** stripe and the tokens reach.
*/
static void stripe_move(float (*c)[256], const gm_out *o0, const gm_out *o1, int t, int c0, int c1, int n, int m,
                        int v0, int v1, int to_y)
{
    for (int i = 0; i < 4; i++) {
        const gm_out *o = i % 2 ? o1 : o0;
        const int ti = t + 16 * (i / 2), cols = i / 2 ? c1 : c0, first = i % 2 ? m : n, rows = i % 2 ? v1 : v0;
        if (!cols || !rows)
            continue;
        if (to_y)
            c_out(c[i], o, ti, cols, first, rows);
        else
            c_in(c[i], o, ti, cols, first, rows);
    }
}

/* half_run's step on A tile `at` into C tiles c0 and c1 (literals: the instructions name their tiles) */
#define HALF_STEP(at, c0, c1)                                                                                    \
    do {                                                                                                         \
        TILE_LOAD_STORED(at, a, sa);                                                                             \
        TILE_LOAD(6, xp_tile(b->Xp, nt, steps, tb, s), 4 * nt);                                                  \
        TILE_DP(c0, at, 6);                                                                                      \
        if (two) {                                                                                               \
            TILE_LOAD(7, xp_tile(b->Xp, nt, steps, tb + 1, s), 4 * nt);                                          \
            TILE_DP(c1, at, 7);                                                                                  \
        }                                                                                                        \
    } while (0)

/*
** The A tile of rows [row, row + valid) of o against one token block (tb)
** or, with two, the next as well, k-steps [s0, se): C tiles half and
** half + 2, A tile 4 + half, B tiles 6 and 7. On the first token blocks
** (tb 0) W comes from memory: this tile's lines are fetched AHEAD steps
** ahead, and near its end the first of the tile after it (rows nrow.. of on).
** A stripe's two A tiles run one after the other while W comes from memory,
** each along the whole piece of k: 16 rows of W read side by side instead
** of 32, which the memory system streams faster (bench/HISTORY.md: a
** 32-token prefill's projections in 0.83-0.87x the time, a decode step's in
** 0.91x). Each output's sum is the same.
*/
static void half_run(const gm_nk_block *b, int tb, int two, const gm_out *o, int row, int valid, const gm_out *on,
                     int nrow, int s0, int se, gm_bf16 *edge, int half)
{
    const int K = b->K, N = o->N, nt = tile_tokens(b->T), steps = (K + 31) / 32;
    for (int s = s0; s < se; s++) {
        if (tb == 0) {
            const int next = s0 + s + AHEAD - se; /* the step of the tile after this one, once past its end */
            if (next < s0)
                fetch_rows(o->W, K, row, valid, 32 * (s + AHEAD));
            else if (next < se && nrow < b->n1 && nrow < N)
                fetch_rows(on->W, K, nrow, N - nrow < 16 ? N - nrow : 16, 32 * next);
        }
        long sa;
        const gm_bf16 *a = a_tile(o->W, K, row, valid, s, edge, &sa);
        if (half)
            HALF_STEP(5, 1, 3);
        else
            HALF_STEP(4, 0, 2);
    }
}
#undef HALF_STEP

/* C tile `tile` (a literal: the instructions name their tiles) from the stage, or zero on the first piece of k */
#define C_LOAD(tile)                                                                                             \
    do {                                                                                                         \
        if (first)                                                                                               \
            TILE_ZERO(tile);                                                                                     \
        else                                                                                                     \
            TILE_LOAD_STORED(tile, stage[i][tile], 64);                                                          \
    } while (0)

enum { SG = 8 }; /* stripes whose C tiles are staged before any of them is read back */

/*
** Tiles 0-3 hold C: A0 (0, 2) and A1 (1, 3) by the first (0, 1) and second
** (2, 3) token block; 4-5 the two A tiles, 6-7 the two B tiles. A stripe is
** rows [n, n + 16) of W0 and rows [n1, n1 + 16) of W1: of one output, n1 =
** n + 16; of a SwiGLU pair, gate's and up's same rows.
*/
static void TIER(nk_block)(const gm_nk_block *b)
{
    float stage[SG][4][256] __attribute__((aligned(64)));
    gm_bf16 edge[2][16 * 32] __attribute__((aligned(64)));
    const int T = b->T, K = b->K, N = b->o->N, nt = tile_tokens(T), tblocks = (T + 15) / 16, steps = (K + 31) / 32;
    const int pair = b->o2 != NULL, h = pair ? 16 : 32, kc = gm_nk_kc(T, K);
    const gm_out *o0 = b->o, *o1 = pair ? b->o2 : b->o;
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = t == 4 || t == 5 ? 64 : (uint16_t)(4 * nt); /* A: 32 bf16; C and B: a column per token */
    }
    TILE_CONFIG(&cfg);
    for (int k0 = 0; k0 < K; k0 += kc) {
        const int k1 = k0 + kc < K ? k0 + kc : K, first = k0 == 0, last = k1 == K;
        for (int tb = 0; tb < tblocks; tb += 2) {
            const int t = 16 * tb, two = tb + 1 < tblocks;
            const int c0 = T - t < 16 ? T - t : 16, c1 = two ? (T - t - 16 < 16 ? T - t - 16 : 16) : 0;
            /*
            ** SG stripes at a time: their C tiles go to the stage, and only
            ** then back to Y (a vector load of what a tile store has just
            ** written waits for it, and the tiles with it)
            */
            for (int g = b->n0; g < b->n1; g += SG * h) {
                const int ns = (b->n1 - g + h - 1) / h < SG ? (b->n1 - g + h - 1) / h : SG;
#define STRIPE(i, n, m, v0, v1)                                                                                  \
    const int n = g + (i) * h, m = pair ? n : n + 16; /* A1's first row, in o1 */                             \
    const int v0 = N - n < 16 ? N - n : 16, v1 = N - m < 0 ? 0 : N - m < 16 ? N - m : 16
                if (!first)
                    for (int i = 0; i < ns; i++) {
                        STRIPE(i, n, m, v0, v1);
                        stripe_move(stage[i], o0, o1, t, c0, c1, n, m, v0, v1, 0);
                    }
                for (int i = 0; i < ns; i++) {
                    STRIPE(i, n, m, v0, v1);
                    C_LOAD(0);
                    if (v1)
                        C_LOAD(1);
                    if (two) {
                        C_LOAD(2);
                        if (v1)
                            C_LOAD(3);
                    }
                    int s = k0 / 32;
                    const int se = (k1 + 31) / 32;
                    if (tb == 0 || !two) { /* W from memory, or one token block: one A tile at a time */
                        for (int half = 0; half < (v1 ? 2 : 1); half++)
                            half_run(b, tb, two, half ? o1 : o0, half ? m : n, half ? v1 : v0, half || !v1 ? o0 : o1,
                                     half || !v1 ? n + h : m, s, se, edge[half], half);
                    } else { /* W in L2: both A tiles by both B tiles, each tile loaded once a step */
                        if (v0 == 16 && v1 == 16) { /* whole tiles: the loop that does most of the work */
                            const gm_bf16 *a0 = o0->W + (long)n * K, *a1 = o1->W + (long)m * K;
                            const uint32_t *b0 = xp_tile(b->Xp, nt, steps, tb, 0);
                            const uint32_t *b1 = xp_tile(b->Xp, nt, steps, tb + 1, 0);
                            const long sa = (long)K * 2;
                            const int sw = se < K / 32 ? se : K / 32; /* k-steps whole in W */
                            for (; s < sw; s++) {
                                if (s + NEXT_A < sw) { /* L2 to L1 ahead of the tile loads (0.93-0.95x the time at 512 rows) */
                                    fetch_rows(o0->W, K, n, 16, 32 * (s + NEXT_A));
                                    fetch_rows(o1->W, K, m, 16, 32 * (s + NEXT_A));
                                }
                                TILE_LOAD(4, a0 + 32 * s, sa);
                                TILE_LOAD(5, a1 + 32 * s, sa);
                                TILE_LOAD(6, b0 + 256 * s, 64);
                                TILE_LOAD(7, b1 + 256 * s, 64);
                                TILE_DP(0, 4, 6);
                                TILE_DP(1, 5, 6);
                                TILE_DP(2, 4, 7);
                                TILE_DP(3, 5, 7);
                            }
                        }
                        for (; s < se; s++) { /* the rest: a stripe past the last row, a k tail */
                            long sa;
                            const gm_bf16 *a = a_tile(o0->W, K, n, v0, s, edge[0], &sa);
                            TILE_LOAD_STORED(4, a, sa);
                            TILE_LOAD(6, xp_tile(b->Xp, nt, steps, tb, s), 4 * nt);
                            TILE_LOAD(7, xp_tile(b->Xp, nt, steps, tb + 1, s), 4 * nt);
                            TILE_DP(0, 4, 6);
                            TILE_DP(2, 4, 7);
                            if (v1) {
                                a = a_tile(o1->W, K, m, v1, s, edge[1], &sa);
                                TILE_LOAD_STORED(5, a, sa);
                                TILE_DP(1, 5, 6);
                                TILE_DP(3, 5, 7);
                            }
                        }
                    }
                    TILE_STORE(0, stage[i][0], 64);
                    if (v1)
                        TILE_STORE(1, stage[i][1], 64);
                    if (two) {
                        TILE_STORE(2, stage[i][2], 64);
                        if (v1)
                            TILE_STORE(3, stage[i][3], 64);
                    }
                }
                for (int i = 0; i < ns; i++) {
                    STRIPE(i, n, m, v0, v1);
                    stripe_move(stage[i], o0, o1, t, c0, c1, n, m, v0, v1, 1);
                }
#undef STRIPE
            }
            if (last) /* the block's outputs for these tokens are complete: finished while they are in cache */
                gm_ep_rows(b->k, o0, b->o2, b->ep, b->round, t, t + c0 + c1, b->n0, b->n1 < N ? b->n1 : N);
        }
    }
    TILE_RELEASE();
}

/* ---------------------------------------------------------------------- */
/*
** Attention's two products on tiles, for bf16 values (the runner's bf16
** mode); others go to the base tier. Each call packs what it multiplies
** (its block of queries and keys, or of probabilities and values: small
** beside the product, which reuses each packed value 16 times or more):
**   scores  S = Q K^T: A tiles of Q's rows (16 rows by 32 of d), B tiles of
**           K's rows in pairs along d, as nk_pack packs X; S is C's own layout
**   values  O (+)= P V: A tiles of P's rows (16 rows by 32 keys), B tiles of
**           V in pairs of keys; O accumulates in C tiles loaded from O
** Each output is one f32 sum in TDPBF16PS's order (over d; over the keys, 32
** at a time, in order), the same for a decode step's few rows as for a
** prefill's many.
*/

/* rows [0, rows) of X (ld floats apart) as bf16, cols values each, into A (16 * ceil(rows / 16) rows of acols); -1 if inexact */
static int pack_a(gm_bf16 *A, int acols, const float *X, long ld, int rows, int cols)
{
    const int arows = (rows + 15) / 16 * 16;
#ifdef AVX512_LINES
    /* 32 values a step, each float's high half (one permute), zeros past cols (acols is a multiple of 32) */
    __m512i low = _mm512_setzero_si512();
    for (int i = 0; i < arows; i++)
        for (int c = 0; c < acols; c += 32) {
            const int n0 = i < rows ? (cols - c < 0 ? 0 : cols - c < 16 ? cols - c : 16) : 0;
            const int n1 = i < rows ? (cols - c - 16 < 0 ? 0 : cols - c - 16 < 16 ? cols - c - 16 : 16) : 0;
            const float *x = n0 ? X + (long)i * ld + c : X; /* past the last row or column: nothing is read */
            const __m512i a = _mm512_maskz_loadu_epi32((__mmask16)((1u << n0) - 1), x);
            const __m512i b = _mm512_maskz_loadu_epi32((__mmask16)((1u << n1) - 1), n1 ? x + 16 : X);
            low = _mm512_or_si512(low, _mm512_or_si512(a, b));
            _mm512_storeu_si512((void *)(A + (long)i * acols + c), high_halves(a, b));
        }
    return has_low_bits(low) ? -1 : 0;
#else
    uint32_t low = 0;
    for (int i = 0; i < arows; i++) {
        const uint32_t *x = i < rows ? (const uint32_t *)(const void *)(X + i * ld) : NULL;
        for (int c = 0; c < acols; c++) {
            const uint32_t v = x && c < cols ? x[c] : 0;
            low |= v & 0xFFFFu;
            A[(long)i * acols + c] = (gm_bf16)(v >> 16);
        }
    }
    return low ? -1 : 0;
#endif
}

/*
** V's rows [0, nk) (ld floats apart, d values each) in pairs of keys: tile
** (s, c), 16 rows of 16 u32, row r holding (V[32 s + 2 r][16 c + i],
** V[32 s + 2 r + 1][16 c + i]) for i < 16; zeros past nk and d. -1 if inexact.
*/
static int pack_v(uint32_t *Vp, const float *V, long ld, int nk, int d)
{
    const int ks = (nk + 31) / 32, dc = (d + 15) / 16;
#ifdef AVX512_LINES
    /* 16 columns a step: the two keys' values side by side, low half first; zeros past nk and d */
    const __m512i top = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512i low = _mm512_setzero_si512();
    for (int s = 0; s < ks; s++)
        for (int r = 0; r < 16; r++) {
            const int j = 32 * s + 2 * r;
            for (int c = 0; c < 16 * dc; c += 16) {
                const __mmask16 m = (__mmask16)((1u << (d - c < 16 ? d - c : 16)) - 1);
                /* a key past the last: nothing is read (its pointer is V's own) */
                const __m512i lo = _mm512_maskz_loadu_epi32(j < nk ? m : 0, j < nk ? V + (long)j * ld + c : V);
                const __m512i h =
                    _mm512_maskz_loadu_epi32(j + 1 < nk ? m : 0, j + 1 < nk ? V + (long)(j + 1) * ld + c : V);
                low = _mm512_or_si512(low, _mm512_or_si512(lo, h));
                _mm512_store_si512((void *)(Vp + ((long)s * dc + c / 16) * 256 + r * 16),
                                   _mm512_or_si512(_mm512_srli_epi32(lo, 16), _mm512_and_si512(h, top)));
            }
        }
    return has_low_bits(low) ? -1 : 0;
#else
    uint32_t low = 0;
    for (int s = 0; s < ks; s++)
        for (int r = 0; r < 16; r++) {
            const int j = 32 * s + 2 * r;
            const uint32_t *v0 = j < nk ? (const uint32_t *)(const void *)(V + j * ld) : NULL;
            const uint32_t *v1 = j + 1 < nk ? (const uint32_t *)(const void *)(V + (j + 1) * ld) : NULL;
            for (int c = 0; c < 16 * dc; c++) {
                const uint32_t lo = v0 && c < d ? v0[c] : 0, hi = v1 && c < d ? v1[c] : 0;
                low |= (lo | hi) & 0xFFFFu;
                Vp[((long)s * dc + c / 16) * 256 + r * 16 + c % 16] = (lo >> 16) | (hi & 0xFFFF0000u);
            }
        }
    return low ? -1 : 0;
#endif
}

/* The 16 x 16 C tile at rows i.., columns j.. of M (ld floats apart, rows x cols inside it) in or out, through buf */
static void m_in(float *buf, const float *M, long ld, int i, int j, int rows, int cols)
{
    memset(buf, 0, 16 * 16 * 4);
    for (int a = 0; a < 16 && i + a < rows; a++)
        for (int b = 0; b < 16 && j + b < cols; b++)
            buf[16 * a + b] = M[(i + a) * ld + j + b];
}

static void m_out(const float *buf, float *M, long ld, int i, int j, int rows, int cols)
{
    for (int a = 0; a < 16 && i + a < rows; a++)
        for (int b = 0; b < 16 && j + b < cols; b++)
            M[(i + a) * ld + j + b] = buf[16 * a + b];
}

/* C tile `tile` at (i, j) of M: straight when whole, else through buf */
#define M_LOAD(tile, M, ld, i, j, rows, cols)                                                                    \
    do {                                                                                                         \
        if ((i) + 16 <= (rows) && (j) + 16 <= (cols)) {                                                          \
            TILE_LOAD_STORED(tile, (M) + (i) * (ld) + (j), (ld) * 4);                                            \
        } else {                                                                                                 \
            m_in(buf, M, ld, i, j, rows, cols);                                                                  \
            TILE_LOAD_STORED(tile, buf, 64);                                                                     \
        }                                                                                                        \
    } while (0)

#define M_STORE(tile, M, ld, i, j, rows, cols)                                                                   \
    do {                                                                                                         \
        if ((i) + 16 <= (rows) && (j) + 16 <= (cols)) {                                                          \
            TILE_STORE(tile, (M) + (i) * (ld) + (j), (ld) * 4);                                                  \
        } else {                                                                                                 \
            TILE_STORE(tile, buf, 64);                                                                           \
            m_out(buf, M, ld, i, j, rows, cols);                                                                 \
        }                                                                                                        \
    } while (0)

static void config_full(void)
{
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++)
        cfg.rows[t] = 16, cfg.colsb[t] = 64;
    TILE_CONFIG(&cfg);
}

/*
** C[rows][cols] (+)= A B on tiles: A packed as pack_a left it (arows of
** acols bf16, steps of 32), B as tiles (s, c) of 16 pair-rows by 16
** columns, bstride u32 apart from one c to the next and bstep from one s
** to the next; C in M (ld floats apart), loaded when accumulate.
*/
static void tiles_mm(float *M, long ld, int rows, int cols, const gm_bf16 *A, int acols, const uint32_t *B, long bstep,
                     long bstride, int steps, int accumulate)
{
    float buf[16 * 16] __attribute__((aligned(64)));
    config_full();
    for (int i = 0; i < rows; i += 32) {
        const int two = i + 16 < rows;
        for (int j = 0; j < cols; j += 32) {
            const int pair = j + 16 < cols;
            if (accumulate) {
                M_LOAD(0, M, ld, i, j, rows, cols);
                if (pair)
                    M_LOAD(1, M, ld, i, j + 16, rows, cols);
                if (two) {
                    M_LOAD(2, M, ld, i + 16, j, rows, cols);
                    if (pair)
                        M_LOAD(3, M, ld, i + 16, j + 16, rows, cols);
                }
            } else {
                TILE_ZERO(0);
                TILE_ZERO(1);
                TILE_ZERO(2);
                TILE_ZERO(3);
            }
            for (int s = 0; s < steps; s++) {
                TILE_LOAD(4, A + (long)i * acols + 32 * s, acols * 2);
                TILE_LOAD(6, B + s * bstep + (j / 16) * bstride, 64);
                TILE_DP(0, 4, 6);
                if (pair) {
                    TILE_LOAD(7, B + s * bstep + (j / 16 + 1) * bstride, 64);
                    TILE_DP(1, 4, 7);
                }
                if (two) {
                    TILE_LOAD(5, A + (long)(i + 16) * acols + 32 * s, acols * 2);
                    TILE_DP(2, 5, 6);
                    if (pair)
                        TILE_DP(3, 5, 7);
                }
            }
            M_STORE(0, M, ld, i, j, rows, cols);
            if (pair)
                M_STORE(1, M, ld, i, j + 16, rows, cols);
            if (two) {
                M_STORE(2, M, ld, i + 16, j, rows, cols);
                if (pair)
                    M_STORE(3, M, ld, i + 16, j + 16, rows, cols);
            }
        }
    }
    TILE_RELEASE();
}

/* Memory for packed operands: 64-byte aligned, as whole tiles are stored into it in registers' widths */
static void *tiles_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static void TIER(attn_scores)(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk,
                              int d)
{
    const int ds = (d + 31) / 32, acols = 32 * ds;
    gm_bf16 *A = d > 0 && nq > 0 && nk > 0 ? tiles_alloc((size_t)(nq + 15) / 16 * 16 * acols * 2) : NULL;
    uint32_t *B = A ? tiles_alloc((size_t)(nk + 15) / 16 * ds * 1024) : NULL;
    if (!B || pack_a(A, acols, Q, ldq, nq, d) || pack_b(B, K, ldk, nk, d, 16, 0, nk)) {
        free(A), free(B);
        gm_tier_filled(&REST)->attn_scores(S, lds, Q, ldq, nq, K, ldk, nk, d); /* f32, nothing to do, or no memory */
        return;
    }
    /* B tile (key block c, d-step s) lies at (c * ds + s) * 256: bstep 256, bstride 256 * ds */
    tiles_mm(S, lds, nq, nk, A, acols, B, 256, 256L * ds, ds, 0);
    free(A), free(B);
}

static void TIER(attn_values)(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk,
                              int d, int accumulate)
{
    const int ks = (nk + 31) / 32, acols = 32 * ks, dc = (d + 15) / 16;
    gm_bf16 *A = d > 0 && nq > 0 && nk > 0 ? tiles_alloc((size_t)(nq + 15) / 16 * 16 * acols * 2) : NULL;
    uint32_t *B = A ? tiles_alloc((size_t)ks * dc * 1024) : NULL;
    if (!B || pack_a(A, acols, P, ldp, nq, nk) || pack_v(B, V, ldv, nk, d)) {
        free(A), free(B);
        gm_tier_filled(&REST)->attn_values(O, ldo, P, ldp, nq, V, ldv, nk, d, accumulate);
        return;
    }
    tiles_mm(O, ldo, nq, d, A, acols, B, 256L * dc, 256, ks, accumulate);
    free(A), free(B);
}

const gm_tier TIER(gm_tier) = {
#if defined(GM_SIMDE)
    GM_TEST_TIER("amx", "simde"),
#elif defined(GM_TILE_MODEL)
    GM_TEST_TIER("amx", "model"),
#else
    .name = "amx",
    .needs = GM_CPU_AMX_BF16 | GM_CPU_AVX512 | GM_CPU_AVX2 | GM_CPU_FMA,
#endif
    .wform = GM_W_NK,
    .nk_sums = GM_SUMS_TILES,
    .lanes = 16, /* its base's dot products, for X that is not bf16 */
    .base = &REST, /* everything but the tile products */
    .nk_packed = TIER(nk_packed),
    .nk_pack = TIER(nk_pack),
    .nk_block = TIER(nk_block),
    .attn_scores = TIER(attn_scores),
    .attn_values = TIER(attn_values),
};
