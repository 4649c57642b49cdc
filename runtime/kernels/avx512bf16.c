/*
** The AVX512_BF16 tier ("avx512-bf16"): products against W in Hugging
** Face's (out, in) layout on VDPBF16PS, with the AVX-512 tier for
** everything else. For the CPUs where that instruction does twice the work
** of a 16-lane FMA in the same time (AMD Zen 4 and 5: 216 against 105
** GFLOP/s a thread in bench_runner's peaks on a Zen 4), which is where an
** AVX-512 tier can be faster than the AVX2 one at all: Zen 4 runs a 16-lane
** FMA as two 8-lane ones. (On Intel's Sapphire Rapids it is the other way
** round, and the AMX tier runs there.)
**
** VDPBF16PS multiplies 16 pairs of bf16 values by 16 pairs and adds each
** pair's two products to a lane of f32 sums: the odd product first, then
** the even one, each addition rounded to nearest even, with denormal inputs
** and results flushed to zero (the Intel SDM's text; a Zen 4 gives those
** bits for every one of 14.4 million lanes of a probe). A row of W is
** contiguous along k, which is what the instruction's pairs are, so the
** product reads W as the file holds it (the loader maps the file: no copy,
** no transform): 32 values of k of one output are one 64-byte load, and
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
** step's one row as for a prefill's many, whatever the blocking.
**
** A block (nk_block) is a run of rows of W. Its tokens go a block at a time
** (as many as about 384 KB of packed X, which stays in L2), and within that
** the rows of W go six at a time (a 64-byte piece of each, in L1 while the
** block's tokens pass over it) against four tokens at a time: a register
** tile of 4 x 6 sums, 24 of the 32 zmm registers, ten loads for 24
** VDPBF16PS a step of k. A decode step's one token meets eight rows at a time,
** one from each eighth of its rows (nk_row), eight runs of W far apart, each
** fetched 1 KB ahead of its loads. Once a token block's outputs are
** complete, the epilogue (bias, rounding, SwiGLU, the residual add) finishes
** them.
**
** Compiled for AVX512_BF16 here, and, as avx512bf16_model.c
** ("avx512-bf16-model"), for a software model of VDPBF16PS on AVX2 (v16.h's
** model vectors), which the tests run on any CPU with AVX2.
*/
#ifdef GM_BF16_MODEL
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
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"
#include "v16.h"

enum {
    DR = 4,            /* tokens a register tile holds */
    DC = 6,            /* rows of W it holds: DR x DC sums in registers */
    DC1 = 8,           /* rows of W for a single token (decode): more of W in flight */
    XBLOCK = 384 << 10 /* bytes of packed X a token block holds: its share of L2 */
};

/* K rounded up to whole steps of 32: a packed row of X */
static inline int k_padded(int K) { return (K + 31) / 32 * 32; }

static size_t TIER(nk_packed)(int T, int K) { return (size_t)T * (size_t)k_padded(K) * sizeof(gm_bf16); }

/*
** Rows [t0, t1) of X (T rows of K values) into Xp as bf16, rows of
** k_padded(K), zeros past K. -1 when a value of X is not a bf16 value (its
** low 16 bits set).
*/
static int TIER(nk_pack)(void *Xp, const float *X, int T, int K, int t0, int t1)
{
    const int kp = k_padded(K);
    uint32_t inexact = 0;
    for (int t = t0; t < t1 && t < T; t++) {
        const uint32_t *x = (const uint32_t *)(const void *)(X + (long)t * K);
        uint16_t *d = (uint16_t *)Xp + (long)t * kp;
        int k = 0;
#ifndef GM_BF16_MODEL
        __m512i low = _mm512_setzero_si512();
        for (; k + 16 <= K; k += 16) {
            const __m512i u = _mm512_loadu_si512((const void *)(x + k));
            low = _mm512_or_si512(low, u);
            _mm256_storeu_si256((__m256i *)(void *)(d + k), _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
        }
        inexact |= (uint32_t)_mm512_test_epi32_mask(low, _mm512_set1_epi32(0xFFFF));
#endif
        for (; k < K; k++) {
            inexact |= x[k] & 0xFFFFu;
            d[k] = (uint16_t)(x[k] >> 16);
        }
        for (; k < kp; k++)
            d[k] = 0;
    }
    return inexact ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* VDPBF16PS, and its model */

#ifndef GM_BF16_MODEL
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

static inline v16 dp(v16 acc, v16w a, v16w b) { return (v16){dp8(acc.lo, a.lo, b.lo), dp8(acc.hi, a.hi, b.hi)}; }
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
    v16 acc[DR][DC1];
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
            v16w w[DC1];
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
        gm_bf16 tail[DC1][32] __attribute__((aligned(64)));
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
DP_FN(1, 7)
DP_FN(1, 8)
#define DP_ENTRY(r) {NULL, dp##r##x1, dp##r##x2, dp##r##x3, dp##r##x4, dp##r##x5, dp##r##x6
static const dp_fn dp_fns[DR + 1][DC1 + 1] = {
    {NULL}, DP_ENTRY(1), dp1x7, dp1x8}, DP_ENTRY(2)}, DP_ENTRY(3)}, DP_ENTRY(4)}}; /* [tokens][rows of W] */

/* rows [n, n + c) of W against tokens [t, t + r) of Xp, r <= DR, c <= DC (or, for one token, c <= DC1) */
static void dp_run(const gm_out *o, const gm_bf16 *Xp, int kp, int K, int t, int r, int n, int c, const char *pf,
                   int pn)
{
    float *y = o->Y + (long)t * o->N + n;
    const gm_bf16 *x = Xp + (long)t * kp, *w = o->W + (long)n * K;
    dp_fns[r][c](y, o->N, 1, x, kp, w, K, K, pf, pn);
}

/*
** One token (a decode step), rows [n0, n1) of W: cut into DC1 regions of
** `span` rows, each product takes one row of every region, so its DC1 runs
** of W lie far apart (as the read bandwidth probe's runs do) rather than in
** one 24 KB piece of memory; each row's last lines fetch the next row of its
** region. The rows past DC1 whole regions go as the prefill's tiles do. On a
** Zen 4, 28 layers' projections in turns with eight neighbouring rows:
** 0.89-0.94x the time on 2 threads, 0.88-0.91x on 1 (bench/HISTORY.md). The
** same sums: each output is its row's.
*/
static void nk_row(const gm_nk_block *b, const gm_bf16 *Xp, int n1)
{
    const int K = b->K, kp = k_padded(K), span = (n1 - b->n0) / DC1;
    const long ldr = (long)span * K, last = (ldr * (DC1 - 1) + K) * 2 / 64; /* the lines past a row's end to fetch */
    for (const gm_out *o = b->o; o; o = o == b->o ? b->o2 : NULL) {
        for (int g = 0, n = b->n0; g < span; g++, n++)
            dp1x8(o->Y + n, 1, span, Xp, kp, o->W + (long)n * K, K, ldr,
                  (const char *)(o->W + (long)(n + 1) * K), g + 1 < span ? (int)last : 0);
        for (int n = b->n0 + DC1 * span; n < n1; n += DC1)
            dp_run(o, Xp, kp, K, 0, 1, n, n1 - n < DC1 ? n1 - n : DC1, NULL, 0);
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
    tb = tb < DR ? DR : tb;
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

const gm_tier TIER(gm_tier) = {
#ifdef GM_BF16_MODEL
    .name = "avx512-bf16-model",
    .needs = GM_CPU_AVX2 | GM_CPU_FMA,
    .model = 1,
    .stands_for = "avx512-bf16",
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
};
