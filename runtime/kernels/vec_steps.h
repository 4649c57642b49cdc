/*
** Internal: the element-wise steps (gm_tier's finish, add_round, norm_scale,
** swiglu, rope, exp_sum, scale_max and div_round) and the exp they use, written once in vf.h's
** operations: included after vf.h, with TIER(x) naming the functions, by
** avx2.c (8 lanes), avx512.c and avx512_model.c (16) and portable.c (1: plain
** C). Every step is lane-wise IEEE arithmetic, each lane the same sequence of
** operations, so every tier gives the same bits; the one sum, exp_sum's, is
** taken in the same order everywhere (below).
**
** vf_exp(x): e^x within 0.77 ulp (every float against the double e^x: at
** most 0.765, at x = -0x1.5edcb4p+6, whose result is denormal, and 0.656 where
** the result is normal; the same bits as the C library's expf for 99.94% of
** them); -inf gives +0, +inf and x >= 88.72284 give inf, NaN stays NaN
** (quieted), and a result below 2^-126 is rounded a second time, to its
** denormal. Its steps:
**   n = round(x log2(e)), by adding 1.5 * 2^23 in the same fused multiply-add;
**   x - n ln2 = r1 - n LN2_LO, r1 = x - n LN2_HI exact (one FMA, |r1| < 0.35),
**   LN2_HI + LN2_LO = ln 2 within 2^-52;
**   e^r = 1 + r + r^2 q(r), q a degree-5 fit of (e^r - 1 - r) / r^2 on
**   |r| <= 0.3467 (relative error 2^-30 after its coefficients are rounded
**   to f32); 1 + r1 is taken as the sum hi = fl(1 + r1) and its exact error,
**   so that the only large rounding is the last, hi + (error - n LN2_LO +
**   r^2 q(r));
**   times 2^n as two normal powers of two, 2^(n >> 1) then 2^(n - (n >> 1)),
**   exact for a normal result and one rounding for a denormal one (x is
**   clamped to [-104, 89] first: n stays in [-150, 129]).
** Its operations are FMAs, adds, multiplies and bit operations, and no
** product is added after it is rounded: a compiler allowed to fuse a
** multiply and an add (-ffp-contract=fast, GNU C's default) finds nothing
** to fuse, so every tier computes the same operations.
*/

enum { STEP_LANES = 16 }; /* exp_sum's partial sums: lanes of 16 on every tier */

static inline vf vf_round_if(vf v, int round) { return round ? vf_round_bf16(v) : v; }

static inline vf vf_exp(vf x)
{
    const float LOG2E = 0x1.715476p+0f, SHIFTER = 0x1.8p+23f; /* 1.5 * 2^23: its ulp is 1 */
    const float LN2_HI = 0x1.62e430p-1f, LN2_LO = -0x1.05c610p-29f;
    const vf one = vf_set1(1.0f);
    const vf xc = vf_min(vf_max(x, vf_set1(-104.0f)), vf_set1(89.0f));
    const vf t = vf_fma(xc, vf_set1(LOG2E), vf_set1(SHIFTER)), n = vf_sub(t, vf_set1(SHIFTER));
    const vf r1 = vf_fma(n, vf_set1(-LN2_HI), xc), r = vf_fma(n, vf_set1(-LN2_LO), r1);
    const vf hi = vf_add(one, r1), lo = vf_fma(n, vf_set1(-LN2_LO), vf_sub(r1, vf_sub(hi, one)));
    vf q = vf_fma(vf_set1(0x1.a12516p-13f), r, vf_set1(0x1.6d434ep-10f));
    q = vf_fma(q, r, vf_set1(0x1.1110e0p-7f));
    q = vf_fma(q, r, vf_set1(0x1.5554e8p-5f));
    q = vf_fma(q, r, vf_set1(0x1.555556p-3f));
    q = vf_fma(q, r, vf_set1(0x1p-1f));
    const vf p = vf_add(hi, vf_fma(vf_mul(r, r), q, lo));
    vf a, b;
    vf_exp2_halves(t, &a, &b);
    return vf_nan_pass(x, vf_mul(vf_mul(p, a), b));
}

/*
** The statement after n for each vector of [0, n) in turn, i its first value
** and m its values: whole vectors (m is VF_LANES, a constant the compiler
** folds into plain loads and stores), then the last m < VF_LANES values,
** under a mask.
*/
#define EACH_VECTOR(n, ...)                                                                                        \
    do {                                                                                                           \
        int i = 0;                                                                                                 \
        for (; i + VF_LANES <= (n); i += VF_LANES) {                                                               \
            const int m = VF_LANES;                                                                                \
            __VA_ARGS__;                                                                                           \
        }                                                                                                          \
        if (i < (n)) {                                                                                             \
            const int m = (n) - i;                                                                                 \
            __VA_ARGS__;                                                                                           \
        }                                                                                                          \
    } while (0)

/* y[0..n) += bias (may be NULL), then rounded to bf16 when round is set */
static inline __attribute__((always_inline)) void finish_n(float *y, const gm_bf16 *bias, int m, int round)
{
    vf v = vf_load_n(y, m);
    if (bias)
        v = vf_add(v, vf_load_bf16_n(bias, m));
    vf_store_n(y, m, vf_round_if(v, round));
}

static void TIER(finish)(float *y, const gm_bf16 *bias, int n, int round)
{
    EACH_VECTOR(n, finish_n(y + i, bias ? bias + i : NULL, m, round));
}

/* x = r(x + y) */
static void TIER(add_round)(float *x, const float *y, int n, int round)
{
    EACH_VECTOR(n, vf_store_n(x + i, m, vf_round_if(vf_add(vf_load_n(x + i, m), vf_load_n(y + i, m)), round)));
}

/* y = r(w r(x inv)) */
static void TIER(norm_scale)(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round)
{
    const vf r = vf_set1(inv);
    EACH_VECTOR(n, vf_store_n(y + i, m,
                              vf_round_if(vf_mul(vf_load_bf16_n(w + i, m),
                                                 vf_round_if(vf_mul(vf_load_n(x + i, m), r), round)),
                                          round)));
}

/* g = r(r(g / (1 + exp(-g))) u): SiLU(gate) * up; -g as 0 - g, whose exp is the same (e^+0 = e^-0 = 1) */
static inline __attribute__((always_inline)) void swiglu_n(float *g, const float *u, int m, int round)
{
    const vf x = vf_load_n(g, m);
    const vf a = vf_round_if(vf_div(x, vf_add(vf_set1(1.0f), vf_exp(vf_sub(vf_zero(), x)))), round);
    vf_store_n(g, m, vf_round_if(vf_mul(a, vf_load_n(u, m)), round));
}

static void TIER(swiglu)(float *g, const float *u, int n, int round)
{
    EACH_VECTOR(n, swiglu_n(g + i, u + i, m, round));
}

/*
** RoPE's rotate-half pairs: x[i], x[i + h] = r(r(a c) - r(b s)), r(r(b c) + r(a s)), a = x[i], b = x[i + h],
** c and s the position's cos and sin: HF's x c + rotate_half(x) s, each product and the sum rounded.
*/
static inline __attribute__((always_inline)) void rope_n(float *x, const float *c, const float *s, int h, int m,
                                                          int round)
{
    const vf a = vf_load_n(x, m), b = vf_load_n(x + h, m), cv = vf_load_n(c, m), sv = vf_load_n(s, m);
    vf_store_n(x, m, vf_round_if(vf_sub(vf_round_if(vf_mul(a, cv), round), vf_round_if(vf_mul(b, sv), round)), round));
    vf_store_n(x + h, m,
               vf_round_if(vf_add(vf_round_if(vf_mul(b, cv), round), vf_round_if(vf_mul(a, sv), round)), round));
}

static void TIER(rope)(float *x, const float *c, const float *s, int h, int round)
{
    EACH_VECTOR(h, rope_n(x + i, c + i, s + i, h, m, round));
}

#define SUM_LIST(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define SUM_DECL(g) vf a##g = vf_zero();
#define SUM_STEP(g)                                                                                                \
    if (G > g)                                                                                                     \
        a##g = vf_add(a##g, vf_load(y + i + g * VF_LANES));
#define SUM_LAST(g) /* the last values, fewer than 16: lanes past n add 0 */                                     \
    if (G > g && i + g * VF_LANES < n) {                                                                           \
        const int c = n - i - g * VF_LANES;                                                                        \
        a##g = vf_add(a##g, vf_load_part(y + i + g * VF_LANES, c < VF_LANES ? c : VF_LANES));                      \
    }
#define SUM_OUT(g)                                                                                                 \
    if (G > g)                                                                                                     \
        vf_store(s + g * VF_LANES, a##g);

/*
** y[i] = exp(x[i] - m) for i < n (y may be x), and their sum, in one order
** on every tier: 16 partial sums from 0, sum j adding y[j], y[j + 16],
** y[j + 32], .. in turn; then s[j] + s[j + 8] for j < 8, of those the
** first 4 plus the last 4, then (s0 + s2) + (s1 + s3). The exponentials
** first, then the sums over y (in L1 by then), G vectors of lanes in named
** variables, so that the exp's many constants do not push them to memory.
*/
static float TIER(exp_sum)(float *y, const float *x, int n, float m)
{
    enum { G = STEP_LANES / VF_LANES }; /* vectors of lanes a group of 16 values */
    const vf vm = vf_set1(m);
    EACH_VECTOR(n, vf_store_n(y + i, m, vf_exp(vf_sub(vf_load_n(x + i, m), vm))));
    SUM_LIST(SUM_DECL)
    int i = 0;
    for (; i + STEP_LANES <= n; i += STEP_LANES) {
        SUM_LIST(SUM_STEP)
    }
    SUM_LIST(SUM_LAST)
    float s[STEP_LANES];
    SUM_LIST(SUM_OUT)
    for (int j = 0; j < 8; j++)
        s[j] += s[j + 8];
    for (int j = 0; j < 4; j++)
        s[j] += s[j + 4];
    return (s[0] + s[2]) + (s[1] + s[3]);
}

/*
** sc[0..n) = r(r(sc) scale), attention's scaled scores, and the max of m and
** them, taken in lanes: it can differ from a left-to-right max only in the
** sign of a zero, which exp(s - max) does not see (a NaN is passed over, as
** by v > m ? v : m).
*/
static float TIER(scale_max)(float *sc, int n, float scale, int round, float m)
{
    const vf s = vf_set1(scale);
    vf top = vf_set1(m);
    float lanes[VF_LANES];
    int i = 0;
    for (; i + VF_LANES <= n; i += VF_LANES) {
        const vf v = vf_round_if(vf_mul(vf_round_if(vf_load(sc + i), round), s), round);
        vf_store(sc + i, v);
        top = vf_max(v, top);
    }
    vf_store(lanes, top);
    for (int j = 0; j < VF_LANES; j++)
        m = lanes[j] > m ? lanes[j] : m;
    if (i < n) { /* the last values, fewer than a vector */
        const vf v = vf_round_if(vf_mul(vf_round_if(vf_load_n(sc + i, n - i), round), s), round);
        vf_store_n(sc + i, n - i, v);
        vf_store(lanes, v);
        for (int j = 0; j < n - i; j++)
            m = lanes[j] > m ? lanes[j] : m;
    }
    return m;
}

/* y[0..n) = r(y / d): the softmax's probabilities, rounded once */
static void TIER(div_round)(float *y, int n, float d, int round)
{
    const vf v = vf_set1(d);
    EACH_VECTOR(n, vf_store_n(y + i, m, vf_round_if(vf_div(vf_load_n(y + i, m), v), round)));
}
