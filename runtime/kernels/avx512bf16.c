/*
** The AVX512_BF16 tier ("avx512-bf16"): products against W in Hugging
** Face's (out, in) layout and attention's two products on VDPBF16PS, with
** the AVX-512 tier for everything else. For the CPUs where that instruction
** does twice the work of a 16-lane FMA in the same time (AMD Zen 4 and 5:
** 216 against 105 GFLOP/s a thread in bench_runner's peaks on a Zen 4),
** which is where an AVX-512 tier can be faster than the AVX2 one at all:
** Zen 4 runs a 16-lane FMA as two 8-lane ones. (On Intel's Sapphire Rapids
** it is the other way round, and the AMX tier runs there.)
**
** VDPBF16PS multiplies 16 pairs of bf16 values by 16 pairs and adds each
** pair's two products to a lane of f32 sums: the odd product first, then
** the even one, each addition rounded to nearest even, with denormal inputs
** and results flushed to zero (the Intel SDM's text; a Zen 4 gives those
** bits for every one of 14.4 million lanes of a probe). A row of W is
** contiguous along k, which is what the instruction's pairs are, so the
** product reads W as the file holds it (the loader copies its bytes as
** they are, no transform): 32 values of k of one output are one 64-byte load, and
** its sum is 16 lanes, added across once k is done. X is packed once per
** call into rows of bf16 (nk_pack, which accepts X only when every value
** is a bf16 value: the runner's bf16 mode; the products are then exact and
** only the order of the f32 sums differs from the FMA tiers). Otherwise (f32
** mode), and for W in the (in, out) form, the AVX-512 tier runs.
**
** The order of each sum (gm_tier_info's GM_SUMS_DPBF16; tests/test_kernels.c
** writes it out): lane l of 16 adds, for each 32 values of k in order (zeros
** past K), the products of k = 32 s + 2 l + 1 and then 32 s + 2 l, as above;
** then the lanes are added as v16_hsum adds them. It is the same for a decode
** step's one row as for a prefill's many, whatever the blocking. (Attention's
** products sum in one lane: below.)
**
** A block (nk_block) is a run of rows of W. Its tokens go a block at a time
** (as many as about 384 KB of packed X, which stays in L2; up to 32 tokens,
** all of them when they take at most 640 KB, so that W is read once: a
** 32-token prefill's down projection, 573 KB, took 1.2x the time in two
** blocks), and within that the rows of W go six at a time (a 64-byte piece
** of each, in L1 while the block's tokens pass over it) against four tokens
** at a time: a register tile of 4 x 6 sums, 24 of the 32 zmm registers, ten
** loads for 24 VDPBF16PS a step of k. A decode step's one token meets four
** rows at a time, one from each quarter of its rows (nk_row), four runs of
** W far apart, each fetched 1 KB ahead of its loads. Once a token block's
** outputs are complete, the epilogue (bias, rounding, SwiGLU, the residual
** add) finishes them.
**
** Compiled for AVX512_BF16 here, and, as avx512bf16_model.c
** ("avx512-bf16-model"), for a software model of VDPBF16PS on AVX2 (v16.h's
** model vectors), which the tests run on any CPU with AVX2; and, as
** avx512bf16_simde.c ("avx512-bf16-simde"), this source, its AVX-512 lines
** included, on SIMDe's emulation (simde512.h) with that model of VDPBF16PS.
*/
#if defined(GM_SIMDE)
#pragma GCC target("avx2,fma")
#define TIER(x) x##_avx512bf16_simde
#define REST gm_tier_avx512_simde
#include "simde512.h"
#elif defined(GM_BF16_MODEL)
#define GM_V16_MODEL 1
#pragma GCC target("avx2,fma")
#define TIER(x) x##_avx512bf16_model
#define REST gm_tier_avx512_model
#else
#pragma GCC target("avx512bf16,avx512f,avx512bw,avx512vl,avx2,fma")
#define TIER(x) x##_avx512bf16
#define REST gm_tier_avx512
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"
#include "v16.h"
#ifndef GM_BF16_MODEL
#include "pairs16.h"
#endif

enum {
    DR = 4,            /* tokens a register tile holds */
    DC = 6,            /* rows of W it holds: DR x DC sums in registers */
    DREG = 4,          /* regions of W a decode step reads at once (nk_row), at most DC */
    XBLOCK = 384 << 10, /* bytes of packed X a token block holds: its share of L2 */
    XWHOLE = 640 << 10  /* up to 32 tokens, this much X is one block: W is then read once */
};

/* K rounded up to whole steps of 32: a packed row of X */
static inline int k_padded(int K) { return (K + 31) / 32 * 32; }

static size_t TIER(nk_packed)(int T, int K) { return (size_t)T * (size_t)k_padded(K) * sizeof(gm_bf16); }

/*
** Rows [0, n) of M (d values each, ld apart) into Mp as bf16, rows of
** k_padded(d), zeros past d. -1 when a value of M is not a bf16 value (its
** low 16 bits set).
*/
static int pack_rows(gm_bf16 *Mp, const float *M, long ld, int n, int d)
{
    const int dp = k_padded(d);
    uint32_t inexact = 0;
    for (int t = 0; t < n; t++) {
        const uint32_t *x = (const uint32_t *)(const void *)(M + (long)t * ld);
        uint16_t *o = (uint16_t *)Mp + (long)t * dp;
        int k = 0;
#ifndef GM_BF16_MODEL
        __m512i low = _mm512_setzero_si512();
        for (; k + 16 <= d; k += 16) {
            const __m512i u = _mm512_loadu_si512((const void *)(x + k));
            low = _mm512_or_si512(low, u);
            _mm256_storeu_si256((__m256i *)(void *)(o + k), _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
        }
        inexact |= (uint32_t)has_low_bits(low);
#endif
        for (; k < d; k++) {
            inexact |= x[k] & 0xFFFFu;
            o[k] = (uint16_t)(x[k] >> 16);
        }
        for (; k < dp; k++)
            o[k] = 0;
    }
    return inexact ? -1 : 0;
}

/* Rows [t0, t1) of X (T rows of K values) into Xp as pack_rows packs them (t0's row at t0's place). */
static int TIER(nk_pack)(void *Xp, const float *X, int T, int K, int t0, int t1)
{
    t1 = t1 < T ? t1 : T;
    return t0 < t1 ? pack_rows((gm_bf16 *)Xp + (long)t0 * k_padded(K), X + (long)t0 * K, K, t1 - t0, K) : 0;
}

/* ---------------------------------------------------------------------- */
/* VDPBF16PS, and its model */

#if !defined(GM_BF16_MODEL) && !defined(GM_SIMDE)
static inline v16 dp(v16 acc, v16w a, v16w b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
#else
/* |v| below the smallest normal: a zero of its sign (DAZ on the inputs, FTZ on the results) */
static inline v8 flush8(v8 v)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, v), _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ);
    return _mm256_blendv_ps(v, _mm256_and_ps(v, sign), tiny);
}

static inline v8 dp8(v8 acc, v8w a, v8w b)
{
    acc = flush8(acc);
    acc = flush8(v8_fma(flush8(v8w_odd(a)), flush8(v8w_odd(b)), acc));
    return flush8(v8_fma(flush8(v8w_even(a)), flush8(v8w_even(b)), acc));
}

#ifdef GM_BF16_MODEL
static inline v16 dp(v16 acc, v16w a, v16w b) { return (v16){dp8(acc.lo, a.lo, b.lo), dp8(acc.hi, a.hi, b.hi)}; }
#else /* SIMDe's vectors of 16 lanes: the model on their two halves */
static inline v16 dp(v16 acc, v16w a, v16w b)
{
    v8 c[2];
    v8w x[2], y[2];
    memcpy(c, &acc, sizeof c), memcpy(x, &a, sizeof x), memcpy(y, &b, sizeof y);
    c[0] = dp8(c[0], x[0], y[0]), c[1] = dp8(c[1], x[1], y[1]);
    memcpy(&acc, c, sizeof acc);
    return acc;
}
#endif
#endif

/* ---------------------------------------------------------------------- */
/* the register tile */

/*
** FETCH_STEPS: the k-steps between two bursts of the next rows' fetches (pf,
** pn lines, spread over the product): the steps run in a loop of their own,
** W's and X's loads and the VDPBF16PS only. With the fetches in every step,
** GCC kept one of a step's rows of W on the stack in the 3 x 6 tile, at -O2
** and -O3 (scripts/check-registers.py).
** A single token's product (a decode step) is bound by W's reads alone: it
** fetches every step, each row's line ROW_AHEAD steps (1 KB) ahead, into L2
** (prefetcht1), and past a row's end the same line of the next rows (pf,
** rows K * 2 bytes apart). On a Zen 4, the tier's own CPU, that took
** 0.65-0.88x the time of the same fetch into L1 (2 KB ahead about the same,
** 512 bytes slower) and 0.84-0.93x the time of the bursts to L2 that the
** prefills keep (bench/HISTORY.md). On a Sapphire Rapids the fetch into L1
** took 0.74-0.76x the time of the bursts; the AMX tier's fetch there is as
** fast into L2 as into L1. (A prefill's last tile of one token gets only
** its share of the next rows, pn lines from pf, and fetches within that.)
*/
enum { FETCH_STEPS = 8, ROW_AHEAD = 16 };

/*
** Y[i * ldy + j * ldc] = the sum of X's row i (packed, rows kp apart) and
** W's row j (K values; the tile's rows ldr apart: K, or a decode step's
** regions apart), in the order above, for i < R, j < C (constants where it
** is inlined: the R x C sums stay in registers). The last piece of k, when
** K is not whole steps of 32, comes from a copy of W's rows with zeros past
** K (X's packed rows have them already).
*/
static inline __attribute__((always_inline)) void dp_tile(float *Y, long ldy, long ldc, const gm_bf16 *X, int kp,
                                                          const gm_bf16 *W, int K, long ldr, const char *pf, int pn,
                                                          const int R, const int C)
{
    v16 acc[DR][DC];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int j = 0; j < C; j++)
            acc[i][j] = v16_zero();
    const int whole = K / 32, ps = whole > 0 ? (pn + whole - 1) / whole : 0, every = R == 1 ? 1 : FETCH_STEPS;
    for (int s0 = 0; s0 < whole; s0 += every) {
        const int s1 = s0 + every < whole ? s0 + every : whole;
        if (R == 1) /* one token: each row's line ROW_AHEAD steps on, into L2; past its end, the next rows' */
            for (int j = 0; j < C; j++) {
                const int a = s0 + ROW_AHEAD;
                const long at = j * ldr * 2 + 64L * (a - whole); /* past the end: bytes into pf */
                if (a < whole)
                    __builtin_prefetch(W + j * ldr + 32 * a, 0, 2);
                else if (at < 64L * pn)
                    __builtin_prefetch(pf + at, 0, 2);
            }
        else
            for (int q = s0 * ps; q < s1 * ps && q < pn; q++)
                __builtin_prefetch(pf + 64 * q, 0, 2); /* to L2 and in: prefetcht1 */
        for (int s = s0; s < s1; s++) {
            v16w w[DC];
#pragma GCC unroll 8
            for (int j = 0; j < C; j++)
                w[j] = v16w_load(W + j * ldr + 32 * s);
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) {
                const v16w x = v16w_load(X + (long)i * kp + 32 * s);
#pragma GCC unroll 8
                for (int j = 0; j < C; j++)
                    acc[i][j] = dp(acc[i][j], x, w[j]);
            }
        }
    }
    if (whole * 32 < K) {
        gm_bf16 tail[DC][32] __attribute__((aligned(64)));
        memset(tail, 0, sizeof tail);
        for (int j = 0; j < C; j++)
            memcpy(tail[j], W + j * ldr + 32 * whole, sizeof(gm_bf16) * (size_t)(K - 32 * whole));
        for (int i = 0; i < R; i++) {
            const v16w x = v16w_load(X + (long)i * kp + 32 * whole);
            for (int j = 0; j < C; j++)
                acc[i][j] = dp(acc[i][j], x, v16w_load(tail[j]));
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int j = 0; j < C; j++)
            Y[i * ldy + j * ldc] = v16_hsum(acc[i][j]);
}

typedef void (*dp_fn)(float *, long, long, const gm_bf16 *, int, const gm_bf16 *, int, long, const char *, int);

#define DP_FN(r, c)                                                                                              \
    static void dp##r##x##c(float *Y, long ldy, long ldc, const gm_bf16 *X, int kp, const gm_bf16 *W, int K,      \
                            long ldr, const char *pf, int pn)                                                    \
    {                                                                                                            \
        dp_tile(Y, ldy, ldc, X, kp, W, K, ldr, pf, pn, r, c);                                                    \
    }
#define DP_ROW(r) DP_FN(r, 1) DP_FN(r, 2) DP_FN(r, 3) DP_FN(r, 4) DP_FN(r, 5) DP_FN(r, 6)
DP_ROW(1)
DP_ROW(2)
DP_ROW(3)
DP_ROW(4)
#define DP_ENTRY(r) {NULL, dp##r##x1, dp##r##x2, dp##r##x3, dp##r##x4, dp##r##x5, dp##r##x6
static const dp_fn dp_fns[DR + 1][DC + 1] = {
    {NULL}, DP_ENTRY(1)}, DP_ENTRY(2)}, DP_ENTRY(3)}, DP_ENTRY(4)}}; /* [tokens][rows of W] */

/* rows [n, n + c) of W against tokens [t, t + r) of Xp, r <= DR, c <= DC */
static void dp_run(const gm_out *o, const gm_bf16 *Xp, int kp, int K, int t, int r, int n, int c, const char *pf,
                   int pn)
{
    float *y = o->Y + (long)t * o->N + n;
    const gm_bf16 *x = Xp + (long)t * kp, *w = o->W + (long)n * K;
    dp_fns[r][c](y, o->N, 1, x, kp, w, K, K, pf, pn);
}

/*
** One token (a decode step), rows [n0, n1) of W: cut into DREG regions of
** `span` rows, each product takes one row of every region, so its DREG runs
** of W lie far apart (as the read bandwidth probe's runs do) rather than in
** one piece of memory; each row's last lines fetch the next row of its
** region. The rows past DREG whole regions go as the prefill's tiles do. On a
** Zen 4, 28 layers' projections in turns with eight neighbouring rows:
** 0.89-0.94x the time on 2 threads, 0.88-0.91x on 1 (eight regions then);
** four regions against eight, a decode step on 2 threads in turns, 97-100%
** of the read bandwidth against 88-100% where the memory gave 33-36 GB/s,
** 91-94% against 79-83% where it gave 58-61 (bench/HISTORY.md). The same
** sums: each output is its row's.
*/
static void nk_row(const gm_nk_block *b, const gm_bf16 *Xp, int n1)
{
    const int K = b->K, kp = k_padded(K), span = (n1 - b->n0) / DREG;
    const long ldr = (long)span * K, last = (ldr * (DREG - 1) + K) * 2 / 64; /* the lines past a row's end to fetch */
    for (const gm_out *o = b->o; o; o = o == b->o ? b->o2 : NULL) {
        for (int g = 0, n = b->n0; g < span; g++, n++)
            dp_fns[1][DREG](o->Y + n, 1, span, Xp, kp, o->W + (long)n * K, K, ldr,
                            (const char *)(o->W + (long)(n + 1) * K), g + 1 < span ? (int)last : 0);
        for (int n = b->n0 + DREG * span; n < n1; n += DC)
            dp_run(o, Xp, kp, K, 0, 1, n, n1 - n < DC ? n1 - n : DC, NULL, 0);
    }
    gm_ep_rows(b->k, b->o, b->o2, b->ep, b->round, 0, 1, b->n0, n1);
}

static void TIER(nk_block)(const gm_nk_block *b)
{
    const int T = b->T, K = b->K, kp = k_padded(K), N = b->o->N, n1 = b->n1 < N ? b->n1 : N;
    const gm_bf16 *Xp = b->Xp;
    if (T == 1) {
        nk_row(b, Xp, n1);
        return;
    }
    int tb = XBLOCK / (kp * (int)sizeof(gm_bf16)) / DR * DR;
    tb = tb < DR ? DR : T <= 32 && (long)T * kp * (long)sizeof(gm_bf16) <= XWHOLE ? T : tb;
    for (int t0 = 0; t0 < T; t0 += tb) {
        const int t1 = t0 + tb < T ? t0 + tb : T;
        for (int n = b->n0; n < n1; n += DC) {
            const int c = n1 - n < DC ? n1 - n : DC;
            /*
            ** the next rows, one run of memory, fetched a share of it in each
            ** tile of tokens that meets these
            */
            const int cn = n + c < n1 ? (n1 - n - c < DC ? n1 - n - c : DC) : 0;
            const int lines = (int)((long)cn * K * 2 / 64), tiles = (t1 - t0 + DR - 1) / DR;
            const int share = (lines + tiles - 1) / tiles;
            for (const gm_out *o = b->o; o; o = o == b->o ? b->o2 : NULL) {
                const char *next = (const char *)(o->W + (long)(n + c) * K);
                for (int t = t0, i = 0; t < t1; t += DR, i++) {
                    const int from = i * share < lines ? i * share : lines;
                    const int pn = lines - from < share ? lines - from : share;
                    dp_run(o, Xp, kp, K, t, t1 - t < DR ? t1 - t : DR, n, c, next + 64L * from, pn);
                }
            }
        }
        gm_ep_rows(b->k, b->o, b->o2, b->ep, b->round, t0, t1, b->n0, n1);
    }
}

/* ---------------------------------------------------------------------- */
/*
** Attention's two products, for bf16 values (the runner's bf16 mode: Q, K,
** V and the probabilities are bf16 values before them), on VDPBF16PS;
** anything else goes to the AVX-512 tier. Each output is one lane's sum
** over pairs (of d for a score, of keys for probs . V): 2p + 1 and then 2p
** (the instruction's odd product first), in order from the call's first
** (zeros past its last), going on from O's value when accumulating, so that
** calls over consecutive blocks of an even number of keys (the runner's)
** give the one sum over all of them. No sum across lanes: d is 64 or 128,
** where a projection's 16 lanes added across would cost as much as the
** products (the first form of this, the projections' 4 x 6 tile over d,
** took 1.26x the AVX-512 tier's time).
**
** The rows of Q and of P are packed as nk_pack packs X (pack_rows), and a
** pair of one row broadcast to every lane (v16w_pair) meets 16 columns of
** the other operand's pairs: V packed as pairs of keys (pack_pairs: row p
** holds V[2p] low and V[2p + 1] high in each column), K as pairs of d
** turned so that a key is a column (pack_cols, 16 x 16 transposes). The
** register tile (pv_tile) holds 3 rows by 8 vectors of 16 columns, 24 of
** the 32 zmm registers, eight loads and three broadcasts for 24 VDPBF16PS a
** pair; a block of 32 pairs (16 KB at 128 columns) stays in L1 while every
** row passes (pv_blocks). Packing is per call: about a fifth of the
** products' time at the runner's blocks (96 query rows, 256 keys).
*/
enum {
    PR = 3,  /* rows (of Q or P) a register tile holds */
    PC = 8,  /* vectors of 16 columns (keys, or d) it holds: PR x PC sums in registers */
    PB = 32  /* pairs a pass over the rows takes: 32 x 128 columns of K or V packed, 16 KB, in L1 */
};

/* A pointer's worth of memory for n packed values: 64-byte aligned, whole lines (NULL: none, or n = 0) */
static void *packed_alloc(size_t bytes) { return bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL; }

/*
** V's rows [0, nk) (d values each, ld apart) as pairs of keys into Vp: row
** p (dv >= d values apart) holds, in column c, V[2p][c]'s bf16 bits low and
** V[2p + 1][c]'s high (0 past nk and past d). -1 when a value is not a bf16
** value.
*/
static int pack_pairs(uint32_t *Vp, const float *V, long ld, int nk, int d, int dv)
{
    uint32_t low = 0;
    for (int p = 0; p < (nk + 1) / 2; p++) {
        const uint32_t *a = (const uint32_t *)(const void *)(V + 2L * p * ld);
        const uint32_t *b = 2 * p + 1 < nk ? a + ld : NULL;
        uint32_t *o = Vp + (long)p * dv;
        int c = 0;
#ifndef GM_BF16_MODEL
        const __m512i top = _mm512_set1_epi32((int)0xFFFF0000u);
        __m512i bits = _mm512_setzero_si512();
        for (; c + 16 <= d; c += 16) {
            const __m512i u = _mm512_loadu_si512((const void *)(a + c));
            const __m512i h = b ? _mm512_loadu_si512((const void *)(b + c)) : _mm512_setzero_si512();
            bits = _mm512_or_si512(bits, _mm512_or_si512(u, h));
            _mm512_store_si512((void *)(o + c), _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_and_si512(h, top)));
        }
        low |= (uint32_t)has_low_bits(bits);
#endif
        for (; c < d; c++) {
            const uint32_t u = a[c], h = b ? b[c] : 0;
            low |= (u | h) & 0xFFFFu;
            o[c] = (u >> 16) | (h & 0xFFFF0000u);
        }
        for (; c < dv; c++)
            o[c] = 0;
    }
    return low ? -1 : 0;
}

/*
** K's rows [0, nk) (d values each, ld apart) as columns of pairs of d into
** Kp: row p (nkv values apart, nkv >= nk a multiple of 16) holds, in column
** j, K[j][2p]'s bf16 bits low and K[j][2p + 1]'s high (0 past d and past
** nk). -1 when a value is not a bf16 value.
*/
static int pack_cols(uint32_t *Kp, const float *K, long ld, int nk, int d, int nkv)
{
    const int np = (d + 1) / 2;
    uint32_t low = 0;
    for (int j0 = 0; j0 < nkv; j0 += 16)
        for (int p0 = 0; p0 < np; p0 += 16) {
#ifndef GM_BF16_MODEL
            /* row i: key j0 + i, its 32 values from 2 p0 as 16 pairs */
            const int n = d - 2 * p0 < 32 ? d - 2 * p0 : 32;
            const __mmask16 m0 = (__mmask16)((1u << (n < 16 ? n : 16)) - 1u), m1 = (__mmask16)((1u << (n - 16 > 0 ? n - 16 : 0)) - 1u);
            __m512i r[16], bits = _mm512_setzero_si512();
            for (int i = 0; i < 16; i++) {
                const float *k = K + (long)(j0 + i) * ld + 2 * p0;
                const __m512i a = j0 + i < nk ? _mm512_maskz_loadu_epi32(m0, k) : _mm512_setzero_si512();
                const __m512i b = j0 + i < nk ? _mm512_maskz_loadu_epi32(m1, k + 16) : _mm512_setzero_si512();
                bits = _mm512_or_si512(bits, _mm512_or_si512(a, b));
                r[i] = high_halves(a, b);
            }
            low |= (uint32_t)has_low_bits(bits);
            transpose16(r);
            for (int q = 0; q < 16 && p0 + q < np; q++)
                _mm512_store_si512((void *)(Kp + (long)(p0 + q) * nkv + j0), r[q]);
#else
            for (int q = 0; q < 16 && p0 + q < np; q++)
                for (int i = 0; i < 16; i++) {
                    const int j = j0 + i, p = p0 + q;
                    const uint32_t *k = (const uint32_t *)(const void *)(K + (long)j * ld);
                    const uint32_t a = j < nk ? k[2 * p] : 0, b = j < nk && 2 * p + 1 < d ? k[2 * p + 1] : 0;
                    low |= (a | b) & 0xFFFFu;
                    Kp[(long)p * nkv + j] = (a >> 16) | (b & 0xFFFF0000u);
                }
#endif
        }
    return low ? -1 : 0;
}

/*
** O[i * ldo + 16 c + l] (+)= the sums over pairs of keys p < np of row i's
** pair p of P (Pp's rows kpp apart) times column 16 c + l of Vp's row p (dv
** apart), for i < R and c < C (constants where it is inlined: the R x C
** sums stay in registers), l < 16, or l < last in the last vector (the
** others neither read nor written). From O's values when accumulate is set,
** else from zero.
*/
static inline __attribute__((always_inline)) void pv_tile(float *O, long ldo, const gm_bf16 *Pp, long kpp,
                                                          const uint32_t *Vp, long dv, int np, int last, int accumulate,
                                                          const int R, const int C)
{
    v16 acc[PR][PC];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            acc[i][c] = !accumulate      ? v16_zero()
                        : c + 1 < C      ? v16_load(O + i * ldo + 16 * c)
                                         : v16_load_part(O + i * ldo + 16 * c, last);
    for (int p = 0; p < np; p++) {
        v16w x[PR];
#pragma GCC unroll 8
        for (int i = 0; i < R; i++)
            x[i] = v16w_pair(Pp + i * kpp + 2 * p);
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const v16w v = v16w_load((const gm_bf16 *)(const void *)(Vp + p * dv + 16 * c));
#pragma GCC unroll 8
            for (int i = 0; i < R; i++)
                acc[i][c] = dp(acc[i][c], x[i], v);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            if (c + 1 < C)
                v16_store(O + i * ldo + 16 * c, acc[i][c]);
            else
                v16_store_part(O + i * ldo + 16 * c, last, acc[i][c]);
        }
}

typedef void (*pv_fn)(float *, long, const gm_bf16 *, long, const uint32_t *, long, int, int, int);

#define PV_FN(r, c)                                                                                              \
    static void pv##r##x##c(float *O, long ldo, const gm_bf16 *Pp, long kpp, const uint32_t *Vp, long dv, int np, \
                            int last, int accumulate)                                                            \
    {                                                                                                            \
        pv_tile(O, ldo, Pp, kpp, Vp, dv, np, last, accumulate, r, c);                                            \
    }
#define PV_ROW(r) PV_FN(r, 1) PV_FN(r, 2) PV_FN(r, 3) PV_FN(r, 4) PV_FN(r, 5) PV_FN(r, 6) PV_FN(r, 7) PV_FN(r, 8)
PV_ROW(1)
PV_ROW(2)
PV_ROW(3)
#define PV_ENTRY(r) {NULL, pv##r##x1, pv##r##x2, pv##r##x3, pv##r##x4, pv##r##x5, pv##r##x6, pv##r##x7, pv##r##x8}
static const pv_fn pv_fns[PR + 1][PC + 1] = {{NULL}, PV_ENTRY(1), PV_ENTRY(2), PV_ENTRY(3)}; /* [rows][vectors] */

/*
** O (ldo apart) (+)= Pp's nq rows (kpp apart) times Vp's np rows (dv apart)
** of pairs as pv_tile sums them, for O's columns [0, n): register tiles
** over blocks of PB pairs, which stay in L1 while every row passes.
*/
static void pv_blocks(float *O, long ldo, const gm_bf16 *Pp, long kpp, const uint32_t *Vp, long dv, int nq, int np, int n,
                      int accumulate)
{
    const int nv = (n + 15) / 16;
    for (int p0 = 0; p0 < np; p0 += PB) {
        const int b = np - p0 < PB ? np - p0 : PB;
        for (int c0 = 0; c0 < nv; c0 += PC) {
            const int c = nv - c0 < PC ? nv - c0 : PC, last = c0 + c < nv ? 16 : n - 16 * (nv - 1);
            for (int i = 0; i < nq; i += PR)
                pv_fns[nq - i < PR ? nq - i : PR][c](O + (long)i * ldo + 16 * c0, ldo, Pp + (long)i * kpp + 2 * p0, kpp,
                                                     Vp + (long)p0 * dv + 16 * c0, dv, b, last, accumulate || p0 > 0);
        }
    }
}

static void TIER(attn_scores)(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk,
                              int d)
{
    const int dq = k_padded(d), np = (d + 1) / 2, nv = (nk + 15) / 16, nkv = 16 * nv;
    gm_bf16 *Qp = nq > 0 && nk > 0 && d > 0 ? packed_alloc(sizeof(gm_bf16) * (size_t)nq * dq) : NULL;
    uint32_t *Kp = Qp ? packed_alloc(sizeof(uint32_t) * (size_t)np * nkv) : NULL;
    if (!Kp || pack_rows(Qp, Q, ldq, nq, d) || pack_cols(Kp, K, ldk, nk, d, nkv)) {
        free(Qp), free(Kp);
        gm_tier_filled(&REST)->attn_scores(S, lds, Q, ldq, nq, K, ldk, nk, d); /* f32, nothing to do, or no memory */
        return;
    }
    pv_blocks(S, lds, Qp, dq, Kp, nkv, nq, np, nk, 0);
    free(Qp), free(Kp);
}

static void TIER(attn_values)(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk,
                              int d, int accumulate)
{
    const int kpp = k_padded(nk), np = (nk + 1) / 2, nv = (d + 15) / 16, dv = 16 * nv;
    gm_bf16 *Pp = nq > 0 && nk > 0 && d > 0 ? packed_alloc(sizeof(gm_bf16) * (size_t)nq * kpp) : NULL;
    uint32_t *Vp = Pp ? packed_alloc(sizeof(uint32_t) * (size_t)np * dv) : NULL;
    if (!Vp || pack_rows(Pp, P, ldp, nq, nk) || pack_pairs(Vp, V, ldv, nk, d, dv)) {
        free(Pp), free(Vp);
        gm_tier_filled(&REST)->attn_values(O, ldo, P, ldp, nq, V, ldv, nk, d, accumulate);
        return;
    }
    pv_blocks(O, ldo, Pp, kpp, Vp, dv, nq, np, d, accumulate);
    free(Pp), free(Vp);
}

const gm_tier TIER(gm_tier) = {
#if defined(GM_SIMDE)
    GM_TEST_TIER("avx512-bf16", "simde"),
#elif defined(GM_BF16_MODEL)
    GM_TEST_TIER("avx512-bf16", "model"),
#else
    .name = "avx512-bf16",
    .needs = GM_CPU_AVX512_BF16 | GM_CPU_AVX512 | GM_CPU_AVX2 | GM_CPU_FMA,
#endif
    .wform = GM_W_NK,
    .nk_sums = GM_SUMS_DPBF16,
    .lanes = 16, /* its base's dot products, for X that is not bf16 */
    .base = &REST, /* everything but the products against (out, in) */
    .nk_packed = TIER(nk_packed),
    .nk_pack = TIER(nk_pack),
    .nk_block = TIER(nk_block),
    .attn_scores = TIER(attn_scores),
    .attn_values = TIER(attn_values),
};
