/*
** Internal: what one instruction-set tier of the kernels provides, behind
** gm/kernels.h. dispatch.c picks a tier from gm_cpu_features() and splits
** the work over threads; each tier file (portable.c, avx2.c) fills one
** gm_tier with its pieces. A new tier is a new file and a new table.
*/
#ifndef GM_KERNELS_IMPL_H
#define GM_KERNELS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gm/bf16.h"
#include "gm/kernels.h"

/* v rounded once to bf16, when asked: the scalar steps of every tier. */
static inline float round1(float v, int round) { return round ? gm_bf16_to_f32(gm_f32_to_bf16(v)) : v; }

enum {
    KB = 256,      /* k-block: the rows of W a band multiplies before the next */
    GM_BAND = 192, /* output columns per band: a k-block of them (96 KB of bf16) stays in L2 */
    GM_NK_KC = 2048, /* the longest piece of k a GM_W_NK tile product of many tokens sums at once */
    GM_NK_BLOCK = 1 << 20 /* the bytes of W a block of such a product holds per piece of k: its share of L2 */
};

/*
** The piece of k a GM_W_NK tile product of T tokens sums at once: up to 32
** tokens (one pass of a block's tiles over W: nothing to keep in L2 for
** later passes) all of K, each row of W one run of memory; beyond, K cut
** into equal pieces of at most GM_NK_KC, whole k-steps.
*/
static inline int gm_nk_kc(int T, int K)
{
    if (T <= 32)
        return K;
    const int pieces = (K + GM_NK_KC - 1) / GM_NK_KC;
    return ((K + pieces - 1) / pieces + 31) / 32 * 32;
}

/*
** Y[t][n0..n1) = X[t][0..K) @ W[0..K)[n0..n1) for t < T, each sum in k
** order; W (in, out), row-major with rows ldw apart (P = 0), or in panels
** of P columns (ldw is then W's N, its columns in all; n0 a multiple of P).
*/
typedef struct gm_band {
    float *Y;
    const float *X;
    const gm_bf16 *W;
    long ldy, ldx, ldw;
    int T, K, n0, n1, P;
} gm_band;

/*
** Column n of W's row 0 (W (in, out), K rows) and in *ld the distance
** between its rows: W + n and ldw, row-major (P = 0); else in panel n / P,
** its rows as wide as the panel (P, or what is left of N = ldw in the last).
** Columns [n, n + m) of every row lie there when they are in one panel.
*/
static inline const gm_bf16 *gm_w_col(const gm_bf16 *W, long ldw, int P, int K, int n, long *ld)
{
    if (!P) {
        *ld = ldw;
        return W + n;
    }
    const long p0 = (long)n / P * P;
    *ld = ldw - p0 < P ? ldw - p0 : P;
    return W + p0 * K + (n - p0);
}

/*
** A block of a GM_W_NK product on tiles (nk_block): rows [n0, n1) of o's W
** (and of o2's, the up of a SwiGLU pair: each output then pairs a row of
** gate with the same row of up) against every row of X, as nk_pack left X
** in Xp; each output finished by ep (gm_ep_rows) once its sum is complete.
*/
typedef struct gm_nk_block {
    const struct gm_tier *k; /* the tier whose element-wise steps finish the outputs */
    const gm_out *o, *o2;
    const void *Xp;
    int T, K, n0, n1;
    gm_epilogue ep;
    int round;
} gm_nk_block;

/*
** The head of a test-only tier's table: hardware tier `tier`'s source run on AVX2 as `how`, "model"
** (on the software models of its operations) or "simde" (its AVX-512 intrinsics emulated, simde512.h):
** named "<tier>-<how>", run only when a test selects it.
*/
#define GM_TEST_TIER(tier, how) .name = tier "-" how, .needs = GM_CPU_AVX2 | GM_CPU_FMA, .model = 1, .stands_for = tier

typedef struct gm_tier {
    const char *name; /* what gm_kernels_name() reports: GM_ISA's name, or a model's */
    unsigned needs;   /* the GM_CPU_* extensions it runs on */
    int model;        /* a software model of a wider tier, run only when selected */
    const char *stands_for; /* a model: the tier it models (NULL: itself) */
    gm_wform wform;         /* the form of W it reads best (gm_tier_info) */
    gm_nk_sums nk_sums;     /* the order of a GM_W_NK product's sums (gm_tier_info) */
    int lanes;

    /* every entry a table leaves NULL is its base's (dispatch.c fills them in once): what a wider tier reuses */
    const struct gm_tier *base;

    /*
    ** The band above: many rows of X. Panels of a multiple of panel_unit
    ** columns are read as they lie (dispatch.c hands any other width to the
    ** portable tier, whose unit is 1).
    */
    void (*band)(const gm_band *b);
    int panel_unit;

    /*
    ** y[n0..n1) = x[0..K) @ W[0..K)[n0..n1): one row, W streamed once, row by
    ** row. fetch_ahead: fetch the rows ahead, for a run of columns too short
    ** for the hardware prefetcher (not for whole rows, which it streams itself).
    */
    void (*gemv)(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1, int fetch_ahead);

    /*
    ** y[n0..n1) = x[0..K) @ W[0..K)[n0..n1), one row, W in panels of P
    ** columns (N in all; n0 a multiple of P, P a multiple of panel_unit): each
    ** panel read front to back, a few side by side, a run of memory the
    ** hardware prefetcher streams.
    */
    void (*gemv_panels)(float *y, const float *x, const gm_bf16 *W, int K, int N, int P, int n0, int n1);

    /* Y[t][n] = dot(X[t][0..K), W[n][0..K)) for t < rows (<= 4), one n. */
    void (*dot)(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows);

    /* Y[n] = dot(X[0..K), W[n][0..K)) for n in [n0, n1): one row of X against many rows of W; NULL: dot, row by row */
    void (*dot_rows)(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1);

    /* y[0..n) += bias (may be NULL), then rounded to bf16 when round is set. */
    void (*finish)(float *y, const gm_bf16 *bias, int n, int round);

    /* gm_add_round, gm_norm_scale, gm_swiglu and gm_rope (gm/kernels.h) */
    void (*add_round)(float *x, const float *y, int n, int round);
    void (*norm_scale)(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round);
    void (*swiglu)(float *g, const float *u, int n, int round);
    void (*rope)(float *x, const float *c, const float *s, int h, int round);

    /* rows [0, n) of blk (n rows of cols bf16 values) into columns [r0, r0 + n) of dst (cols, rows) */
    void (*transpose)(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0);

    /* n values of src, of the given type, to bf16 at dst: gm_convert_portable's bits */
    void (*convert)(gm_bf16 *dst, const void *src, size_t n, gm_src_type type);

    /* gm_dequant4_row and gm_dequant4_block (gm/kernels.h): gm_dequant4_*_portable's bits */
    void (*dequant4_row)(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                         const float *s, size_t N);
    void (*dequant4_block)(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const unsigned *sh, const int32_t *z,
                           const float *s, size_t R, size_t I);

    /*
    ** The same rows into the panel form of P columns (gm/kernels.h) of the
    ** (cols, rows) transposed matrix at dst: row r of blk is column r0 + r
    ** (any r0: a panel's rows may come in several calls).
    */
    void (*panels)(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0, int P);

    /*
    ** A GM_W_NK product of bf16 values on tiles (NULL: none; such products
    ** then run as dot products). nk_packed: the bytes X takes packed;
    ** nk_pack: rows [t0, t1) of X (T rows of K) into Xp, 0, or -1 when a
    ** value is not a bf16 value (then the dot products run); nk_block: one
    ** block (above).
    */
    size_t (*nk_packed)(int T, int K);
    int (*nk_pack)(void *Xp, const float *X, int T, int K, int t0, int t1);
    void (*nk_block)(const gm_nk_block *b);

    /* gm_attn_scores and gm_attn_values (gm/kernels.h) */
    void (*attn_scores)(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk, int d);
    void (*attn_values)(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk, int d,
                        int accumulate);

    /* gm_exp_sum (gm/kernels.h): the softmax's exponentials and their sum, in the one order it documents */
    float (*exp_sum)(float *y, const float *x, int n, float m);

    /* gm_scale_max and gm_div_round (gm/kernels.h): the softmax's other two steps */
    float (*scale_max)(float *sc, int n, float scale, int round, float m);
    void (*div_round)(float *y, int n, float d, int round);
} gm_tier;

/*
** Cache lines of W to fetch while a register tile runs (avx2.c, avx512.c):
** `rows` rows from p, stride bytes apart, `lines` lines of each, one line a
** call, so that the weights the next band reads are in cache by its turn.
*/
typedef struct gm_ahead {
    const char *p;
    long stride;
    int lines, line, rows;
} gm_ahead;

static inline void gm_fetch(gm_ahead *a)
{
    if (a->rows > 0) {
        __builtin_prefetch(a->p + a->line * 64, 0, 2); /* to L2 and in: prefetcht1 */
        if (++a->line == a->lines) {
            a->line = 0;
            a->p += a->stride;
            a->rows--;
        }
    }
}

/*
** The amx-model's count of the bytes its tile loads read from [lo, hi)
** (tile.h; amx_model.c holds it): how the tests see how often a product
** reads each byte of W.
*/
typedef struct gm_tile_watch_range {
    uintptr_t lo, hi;
    _Atomic size_t bytes;
} gm_tile_watch_range;
extern gm_tile_watch_range gm_tile_watch;

/* The tier that runs now (dispatch.c). */
const gm_tier *gm_tier_current(void);

/* A tier's table as it runs, every entry it leaves NULL filled from its base (dispatch.c). */
const gm_tier *gm_tier_filled(const gm_tier *table);

/*
** The epilogue ep (gm/kernels.h) on rows [t0, t1), columns [n0, n1) of o's
** Y (and o2's, for GM_EP_SWIGLU), which hold the complete sums, on tier k's
** element-wise steps (dispatch.c).
*/
void gm_ep_rows(const gm_tier *k, const gm_out *o, const gm_out *o2, gm_epilogue ep, int round, int t0, int t1,
                int n0, int n1);

extern const gm_tier gm_tier_portable;
extern const gm_tier gm_tier_avx2;
extern const gm_tier gm_tier_avx512, gm_tier_avx512_model; /* avx512.c, avx512_model.c */
extern const gm_tier gm_tier_amx, gm_tier_amx_model;       /* amx.c, amx_model.c */
extern const gm_tier gm_tier_avx512bf16, gm_tier_avx512bf16_model; /* avx512bf16.c, avx512bf16_model.c */
#ifdef GM_HAVE_SIMDE /* the hardware tiers' source on SIMDe's AVX-512 (simde512.h), for the tests */
extern const gm_tier gm_tier_avx512_simde, gm_tier_avx512bf16_simde, gm_tier_amx_simde; /* *_simde.c */
#endif

/* The portable panels (gm_tier.panels): a transpose of each panel's rows, one panel after another. */
void gm_panels_portable(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0, int P);

/* The portable transpose of rows [0, n) of blk, columns [c0, c1) only: what a wider tier leaves over. */
void gm_transpose_part_portable(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0,
                                size_t c0, size_t c1);

/*
** Attention's products (gm/kernels.h) of the portable and the AVX2 tiers;
** the wider tiers' tables point at the AVX2 ones.
*/
void gm_attn_scores_portable(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk,
                             int d);
void gm_attn_values_portable(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk,
                             int d, int accumulate);
void gm_attn_scores_avx2(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk, int d);
void gm_attn_values_avx2(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk, int d,
                         int accumulate);

/* n values of type src at src as bf16 at dst (round to nearest even; bf16 copied). */
void gm_convert_portable(gm_bf16 *dst, const void *src, size_t n, gm_src_type type);
void gm_dequant4_row_portable(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                              const float *s, size_t N);
void gm_dequant4_block_portable(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const unsigned *sh,
                                const int32_t *z, const float *s, size_t R, size_t I);

#endif
