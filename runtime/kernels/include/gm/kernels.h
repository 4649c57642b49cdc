/*
** The matrix kernels of the runner: bf16 weights, f32 activations, f32
** accumulation. Each output is one f32 sum (plus the bias) rounded once to
** bf16 when asked, which is how Hugging Face's bf16 linears behave.
** Work is split over the pool's threads by outputs. The widest tier the CPU
** has (gm/cpu.h) runs: AMX, AVX-512, AVX2+FMA, or the portable one.
**
** W comes in several forms (gm_wform): (in, out), the NPU pipeline's;
** (in, out) cut into panels of 16 or 32 columns, which the FMA tiers read
** best; and Hugging Face's (out, in), which the AMX tier reads straight
** into tiles; the loader gives the runner the running tier's form.
** Where X holds bf16 values (the runner's bf16 mode) every product is exact
** in f32, so only the order of the sums can tell the tiers apart: an
** (in, out) or a panel product is one FMA chain in k order on every tier
** (the same bits everywhere, in either form); an (out, in) one sums in
** TDPBF16PS's order on the AMX tiers and in lanes on the FMA ones
** (gm_tier_info says which). In f32 mode
** a fused multiply-add and a multiply-then-add differ in the last bits, and
** the AMX tier leaves X's products to the AVX-512 tier. The same choice of
** tier serves the load-time transposes at the end of this header.
*/
#ifndef GM_KERNELS_H
#define GM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gm/bf16.h"
#include "gm/pool.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
** How a weight matrix W of K inputs and N outputs lies in memory. Each tier
** reads one form best (gm_kernels_wform), and the loader puts projections
** in that form for the runner; every tier computes every form, the others
** on slower paths.
**
** The panel forms hold the (in, out) matrix as N / P panels of P columns
** (P = 16 or 32), one after another, each row-major [K][P]; when P does not
** divide N the last panel holds the N % P columns left, [K][N % P]. So
** W's element (k, n), input k of output n, is at
**     (n / P) * P * K + k * w + n % P,  w = min(P, N - (n / P) * P)
** (gm_w_index), and a run of whole panels is one run of memory: a register
** tile's k-block of P columns, or a thread's share of a one-row product.
*/
typedef enum gm_wform {
    GM_W_KN = 0,      /* (in, out) row-major, y = x @ W: the NPU pipeline's layout (the loader transposes HF's) */
    GM_W_NK = 1,      /* (out, in) row-major, y = x @ W^T: Hugging Face's own, as the file holds it */
    GM_W_PANEL16 = 2, /* (in, out) in panels of 16 columns: the AVX2 and portable tiers' */
    GM_W_PANEL32 = 3  /* (in, out) in panels of 32 columns: the AVX-512 tier's */
} gm_wform;

enum { GM_W_FORMS = 4 };

/* The panel width P of a panel form; 0 for GM_W_KN and GM_W_NK. */
static inline int gm_wform_panel(gm_wform form)
{
    return form == GM_W_PANEL16 ? 16 : form == GM_W_PANEL32 ? 32 : 0;
}

/* Where W's element (k, n) (input k, output n; W of K inputs and N outputs) lies in the given form. */
static inline size_t gm_w_index(gm_wform form, size_t K, size_t N, size_t k, size_t n)
{
    const size_t P = (size_t)gm_wform_panel(form);
    if (form == GM_W_NK)
        return n * K + k;
    if (!P)
        return k * N + n;
    const size_t p0 = n / P * P, w = N - p0 < P ? N - p0 : P;
    return p0 * K + k * w + n - p0;
}

/*
** Y[T][N] = X[T][K] @ W[K][N] (+ bias[N]); W is (in, out) row-major (GM_W_KN):
** gm_matmul_outs takes W in any form.
** bias may be NULL. round: round each output to bf16 (after adding the bias).
*/
void gm_matmul(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias,
               int T, int K, int N, int round);

/*
** One output of gm_matmul_outs: Y[T][N] = X @ W (+ bias[N]; bias may be
** NULL), W in the given form. R: the residual stream GM_EP_ADD adds into.
*/
typedef struct gm_out {
    float *Y;
    const gm_bf16 *W, *bias;
    int N;
    gm_wform form;
    float *R;
} gm_out;

enum { GM_MAX_OUTS = 4 };

/*
** What is done with each output once its sum is complete, where Hugging
** Face's bf16 ops round (r(): to bf16 when round is set, else nothing):
**   GM_EP_STORE   Y = r(sum + bias)
**   GM_EP_ADD     Y = r(sum + bias), then R = r(R + Y): a residual add
**   GM_EP_SWIGLU  outputs in pairs (gate, up), equal N: with g = r(gate's
**                 sum) and u = r(up's sum), gate's Y = r(r(g / (1 + exp(-g))) u)
**                 (SiLU in f32); up's Y holds u, or is scratch
** The tiers fold them into the products where they can (the outputs of a
** block of columns are finished while they are in cache); the values are
** those of the product, then the step, in any case.
*/
typedef enum gm_epilogue { GM_EP_STORE = 0, GM_EP_ADD, GM_EP_SWIGLU } gm_epilogue;

/*
** gm_matmul for up to GM_MAX_OUTS outputs that share the input X (q, k and
** v; gate and up) in one parallel run: the threads split the work of all of
** them, so each reads longer runs of memory and none waits between them.
** Every output of one call has the same form.
*/
void gm_matmul_outs(gm_pool *p, const float *X, int T, int K, const gm_out *outs, int n_outs, int round);

/* gm_matmul_outs, each output finished by ep. */
void gm_matmul_ep(gm_pool *p, const float *X, int T, int K, const gm_out *outs, int n_outs, int round,
                  gm_epilogue ep);

/*
** Y[T][N] = X[T][K] @ W[N][K]^T: W's rows are the outputs (GM_W_NK), as the
** (vocab, emb) lm_head and embedding table are stored.
*/
void gm_matmul_nt(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, int T, int K, int N,
                  int round);

/*
** The element-wise steps of a forward pass, over n values. Each rounds to
** bf16 where Hugging Face's bf16 ops do when round is set (else stays f32).
*/
void gm_add_round(float *x, const float *y, int n, int round);                                   /* x = r(x + y) */
void gm_norm_scale(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round);   /* y = r(w r(x inv)) */
void gm_swiglu(float *g, const float *u, int n, int round); /* g = r(r(g / (1 + exp(-g))) u): SiLU(gate) * up */
/* RoPE's rotate-half pairs, i < h: x[i], x[i + h] = r(r(x[i] c[i]) - r(x[i + h] s[i])), r(r(x[i + h] c[i]) + r(x[i] s[i])) */
void gm_rope(float *x, const float *c, const float *s, int h, int round);

/*
** y[i] = exp(x[i] - m) for i < n (y may be x), the softmax's exponentials,
** and their sum, in one order on every tier: 16 partial sums from 0, sum j
** adding y[j], y[j + 16], y[j + 32], .. in turn, then s[j] + s[j + 8] for
** j < 8, the first 4 of those plus the last 4, and (s0 + s2) + (s1 + s3).
** The exp here and in gm_swiglu is the kernels' own, within 0.77 ulp of e^x
** (vec_steps.h), written once for every tier: the same bits everywhere.
*/
float gm_exp_sum(float *y, const float *x, int n, float m);

/*
** The softmax's other steps, lane-wise IEEE arithmetic (the same bits on
** every tier), r() the bf16 rounding when round is set:
**   gm_scale_max  sc[0..n) = r(r(sc) scale); returns the max of m and them
**   gm_div_round  y[0..n) = r(y / d)
*/
float gm_scale_max(float *sc, int n, float scale, int round, float m);
void gm_div_round(float *y, int n, float d, int round);

/*
** Attention's two products, as the runner's blocked attention calls them, one
** block of query rows against one block of keys, on the calling thread (the
** runner splits attention into tasks itself). Rows are ldq, ldk, lds, ldv,
** ldp and ldo floats apart. Each output is one f32 sum in a fixed order and
** nothing is rounded: where the inputs hold bf16 values (the runner's bf16
** mode) every product is exact in f32 and every tier that sums in the same
** order gives the same bits (gm_tier_info's nk_sums: GM_SUMS_LANES tiers in
** increasing order, below; the others in their instruction's order).
**
** gm_attn_scores: S[i][j] = dot(Q[i][0..d), K[j][0..d)) for i < nq, j < nk,
** each a sum over d in increasing order.
**
** gm_attn_values: O[i][0..d) (+)= the sum over j < nk, in increasing j, of
** P[i][j] * V[j][0..d), for i < nq. accumulate = 0 overwrites O; otherwise
** the sums go on from O's values, so that calls over consecutive blocks of
** keys give the one sum over all of them, in key order (on the GM_SUMS_TILES
** and GM_SUMS_DPBF16 tiers, for bf16 values: blocks of a multiple of 32 keys
** but the last, or of 2 on GM_SUMS_DPBF16, as the runner's are).
*/
void gm_attn_scores(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk, int d);
void gm_attn_values(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk, int d,
                    int accumulate);

/*
** The instruction-set tier the kernels above and below use: "amx",
** "avx512-bf16", "avx512", "avx2" or "portable", as GM_ISA names them, the
** widest this CPU has unless GM_ISA or gm_kernels_select says otherwise.
*/
const char *gm_kernels_name(void);

/*
** For tests and benchmarks: run the named tier from now on, one of
** gm_kernels_tiers() (the tiers above and the software models of the wider
** ones, "amx-model", "avx512-bf16-model" and "avx512-model", which run their kernels' source on
** a CPU without those instructions); NULL: the automatic choice again.
** Returns 0, or -1 when the name is unknown or this CPU cannot run it.
*/
int gm_kernels_select(const char *name);

/*
** GM_ISA, when set: 0 when it is unset or names a tier this CPU runs; else
** GM_EUSAGE and one line naming the value and the tiers this CPU does run.
** (A bad GM_ISA runs the portable tier, so a caller that skips this check
** never runs a tier it was told not to.)
*/
int gm_kernels_check(gm_status *st);

/* Every tier's name, widest first, NULL-terminated: available here or not. */
const char *const *gm_kernels_tiers(void);

/*
** The order of the sums of a GM_W_NK product of bf16 values (an (in, out)
** or panel one is one FMA chain in k order on every tier; tests/test_kernels.c
** writes each order out from the SDM's text), and of attention's two
** products of bf16 values (over d, or over the keys):
*/
typedef enum gm_nk_sums {
    GM_SUMS_LANES = 0,  /* `lanes` partial sums added across at the end; attention in order */
    GM_SUMS_TILES = 1,  /* TDPBF16PS's: pairs of k, 32 at a time (amx.c); attention the same */
    GM_SUMS_DPBF16 = 2  /* VDPBF16PS's: 16 lanes of pairs of k, added across at the end (avx512bf16.c); attention one
                           lane's pairs in order, the odd term of each first */
} gm_nk_sums;

/* What a tier is, for the loader, the tests and the benchmark. */
typedef struct gm_tier_info {
    const char *name;       /* GM_ISA's name, or a software model's ("amx-model") */
    const char *stands_for; /* the hardware tier whose kernel source it runs: its own name, or the modelled one's */
    int model;              /* a software model: runs only when selected */
    gm_wform wform;         /* the form of W its products read best, which the loader gives the runner */
    gm_nk_sums nk_sums;     /* the order of a GM_W_NK product's sums, above */
    int lanes;              /* GM_SUMS_LANES: how many (also the dot products' for X that is not bf16) */
} gm_tier_info;

/* The named tier's traits (NULL: the running tier's); NULL for a name no tier has. */
const gm_tier_info *gm_kernels_info(const char *name);

/* The running tier's gm_kernels_info(NULL)->wform: the form the loader gives the runner (panels, on FMA tiers). */
gm_wform gm_kernels_wform(void);

/* Seconds spent so far by the products this thread called, making X bf16 (packing it) for the tile products. */
double gm_kernels_pack_seconds(void);

/* The plain reference: one dot product per output, no blocking, one thread. */
void gm_matmul_reference(float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias,
                         int T, int K, int N, int round);

/* ---------------------------------------------------------------------- */
/* load time: tensors as stored into the layout the kernels read */

/* The float types a checkpoint stores (safetensors BF16, F16, F32). */
typedef enum gm_src_type { GM_SRC_BF16, GM_SRC_F16, GM_SRC_F32 } gm_src_type;

/*
** Rows [r0, r1) of a (rows, cols) tensor of type src_type into dst, which
** holds the whole tensor as bf16 (round to nearest even), as `to` says: 0,
** row-major as is; 1, transposed to (cols, rows) (GM_W_KN, of an (out, in)
** projection); P > 1, transposed and held in panels of P of its columns (the
** panel forms above: GM_W_PANEL16 and GM_W_PANEL32 are P = 16 and 32). src
** points at row r0. Safe to call from several threads at once on disjoint
** rows of one tensor.
*/
void gm_convert_rows(gm_bf16 *dst, const void *src, gm_src_type src_type, size_t rows, size_t cols, size_t r0,
                     size_t r1, int to);

/*
** 4-bit dequantization (AWQ, GPTQ; gm/quant.h) on the running tier, every
** value bf16((q - z) * s), the product in f32, rounded to nearest even:
**   row    d[n] for n < N from q the 4 bits at shift sh[n % 8] of w[n / 8]
**          (sh: eight values a word along the row), or, sh NULL, at
**          `shift` of w[n]; zero point z[n], scale s[n]
**   block  d[r * ld + i] for r < R, i < I (the other form) from q the 4
**          bits at shift sh[r % 8] of w[i * W + r / 8]; z[r], s[r]
** The vector tiers may stream the block's stores past the cache:
** gm_stream_fence orders them before what follows.
*/
void gm_dequant4_row(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                     const float *s, size_t N);
void gm_dequant4_block(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const unsigned *sh, const int32_t *z,
                       const float *s, size_t R, size_t I);
void gm_stream_fence(void);

#ifdef __cplusplus
}
#endif

#endif
