/*
** The matrix kernels against the plain reference kernel, on awkward shapes
** (one row, rows not a multiple of 4, columns not a multiple of 8, k-blocks
** with a tail), on every tier this CPU runs, with and without bias
** and rounding; the vectorized rounding on its edge cases; the element-wise
** steps, bit for bit across tiers; and the kernels' exp against e^x.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gm/bf16.h"
#include "gm/kernels.h"
#include "tiers.h"
#include "gm/pool.h"
#include "kernels_impl.h"

static unsigned seed = 1;
static float rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return (float)((seed >> 9) & 0xFFFF) / 32768.0f - 1.0f;
}

static void done(void) { gm_kernels_select(NULL); } /* the automatic choice again, after EACH_TIER (tiers.h) */

/*
** W[K][N] (in, out) as the given form lays it out, written here from the
** layout gm/kernels.h describes: (out, in) rows; or panels of P columns,
** one after another, each [K][w] row-major, w = P but in the last (N % P).
*/
static gm_bf16 *in_form(const gm_bf16 *W, int K, int N, gm_wform form)
{
    gm_bf16 *d = malloc(2 * (size_t)K * N + 2), *o = d;
    const int P = form == GM_W_PANEL16 ? 16 : form == GM_W_PANEL32 ? 32 : form == GM_W_KN ? N : 0;
    if (form == GM_W_NK) {
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                *o++ = W[(long)k * N + n];
        return d;
    }
    for (int p0 = 0; p0 < N; p0 += P) {
        const int w = N - p0 < P ? N - p0 : P;
        for (int k = 0; k < K; k++)
            for (int j = 0; j < w; j++)
                *o++ = W[(long)k * N + p0 + j];
    }
    return d;
}

/* The forms of W an (in, out) product reads: (in, out) and its panels */
static const gm_wform kn_forms[] = {GM_W_KN, GM_W_PANEL16, GM_W_PANEL32};
enum { KN_FORMS = sizeof kn_forms / sizeof kn_forms[0] };

/* Y = X @ W on the running tier, W (in, out) handed over in the given form (Wf: W in that form) */
static void product(gm_pool *pool, float *Y, const float *X, const gm_bf16 *Wf, const gm_bf16 *b, int T, int K, int N,
                    int round, gm_wform form)
{
    const gm_out o = {.Y = Y, .W = Wf, .bias = b, .N = N, .form = form};
    gm_matmul_outs(pool, X, T, K, &o, 1, round);
}

/*
** Every tier's products on each shape against the plain reference kernel: W (in, out) in each of its forms, with and
** without bias and rounding, and the X @ W^T kernel. The inputs, W's forms and the references are made once per
** shape, for every tier.
*/
static void check_shapes(gm_pool *pool)
{
    const int shapes[][3] = {{1, 64, 96}, {1, 300, 1000}, {3, 17, 5}, {5, 260, 200}, {32, 513, 390}, {7, 8, 8},
                             {4, 1, 24}, {33, 96, 263}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *X = malloc(sizeof(float) * (size_t)T * K), *Y = malloc(sizeof(float) * (size_t)T * N), *R[2][2];
        gm_bf16 *W = malloc(2 * (size_t)K * N), *b = malloc(2 * (size_t)N), *Wn = malloc(2 * (size_t)K * N);
        gm_bf16 *Wf[KN_FORMS];
        for (int i = 0; i < T * K; i++)
            X[i] = gm_bf16_to_f32(gm_f32_to_bf16(rnd()));
        for (int i = 0; i < K * N; i++)
            W[i] = gm_f32_to_bf16(rnd() / sqrtf((float)K));
        for (int i = 0; i < N; i++)
            b[i] = gm_f32_to_bf16(0.2f * rnd());
        for (int k = 0; k < K; k++) /* W as (N, K) rows for the X @ W^T kernel */
            for (int n = 0; n < N; n++)
                Wn[(long)n * K + k] = W[(long)k * N + n];
        for (int f = 0; f < KN_FORMS; f++)
            Wf[f] = in_form(W, K, N, kn_forms[f]);
        for (int round = 0; round < 2; round++) /* R[round][bias]: the reference does not depend on W's form */
            for (int bias = 0; bias < 2; bias++) {
                R[round][bias] = malloc(sizeof(float) * (size_t)T * N);
                gm_matmul_reference(R[round][bias], X, W, bias ? b : NULL, T, K, N, round);
            }
        EACH_TIER(tier) {
            for (int f = 0; f < KN_FORMS; f++)
                for (int round = 0; round < 2; round++)
                    for (int bias = 0; bias < 2; bias++) {
                        const float *r = R[round][bias];
                        product(pool, Y, X, Wf[f], bias ? b : NULL, T, K, N, round, kn_forms[f]);
                        for (int i = 0; i < T * N; i++) /* summation orders differ: a bf16 ulp at most */
                            cr_assert(fabsf(Y[i] - r[i]) <= 0.0079f * fabsf(r[i]) + 1e-5f,
                                      "%s form %d T=%d K=%d N=%d round=%d bias=%d: [%d] %g, reference %g", tier,
                                      kn_forms[f], T, K, N, round, bias, i, Y[i], r[i]);
                    }
            gm_matmul_nt(pool, Y, X, Wn, T, K, N, 0);
            const float *r = R[0][0]; /* without bias or rounding */
            for (int i = 0; i < T * N; i++)
                cr_assert(fabsf(Y[i] - r[i]) <= 1e-4f * (1 + fabsf(r[i])),
                          "%s nt T=%d K=%d N=%d: [%d] %g, reference %g", tier, T, K, N, i, Y[i], r[i]);
        }
        for (int f = 0; f < KN_FORMS; f++)
            free(Wf[f]);
        free(X), free(Y), free(R[0][0]), free(R[0][1]), free(R[1][0]), free(R[1][1]), free(W), free(b), free(Wn);
    }
}

Test(kernels, agree_with_the_reference_on_awkward_shapes_one_thread)
{
    check_shapes(NULL);
    done();
}

Test(kernels, agree_with_the_reference_on_two_threads)
{
    gm_pool *p = gm_pool_new(2);
    check_shapes(p);
    done();
    gm_pool_free(p);
}

Test(kernels, round_outputs_to_nearest_even_with_canonical_nan)
{
    /* one output per case: X = [v], W = [1]; N = 9 so the vector path and the tail both run */
    const uint32_t cases[] = {0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x7F7FFFFFu, 0xFF800000u,
                              0x7FA00001u, 0xFFC12345u, 0x00008000u, 0x80018000u};
    enum { N = 9 };
    float X[N * N] = {0}, Y[N * N];
    gm_bf16 W[N * N];
    for (int i = 0; i < N * N; i++)
        W[i] = (i / N == i % N) ? 0x3F80 : 0; /* the identity */
    for (int i = 0; i < N; i++)
        memcpy(&X[i * N + i], &cases[i], 4);
    EACH_TIER(t) {
        gm_matmul(NULL, Y, X, W, NULL, N, N, N, 1);
        for (int i = 0; i < N; i++) {
            float want;
            memcpy(&want, &cases[i], 4);
            want = gm_bf16_to_f32(gm_f32_to_bf16(want));
            uint32_t a, b;
            memcpy(&a, &Y[i * N + i], 4);
            memcpy(&b, &want, 4);
            cr_assert_eq(a, b, "%s, case 0x%08x: 0x%08x, expected 0x%08x", t, cases[i], a, b);
        }
    }
    done();
}

/* Random inputs for the tests below: X rounded to bf16 as activations are, W scaled as a projection. */
static void fill(float *X, int nx, gm_bf16 *W, int nw, int K)
{
    for (int i = 0; i < nx; i++)
        X[i] = gm_bf16_to_f32(gm_f32_to_bf16(rnd()));
    for (int i = 0; i < nw; i++)
        W[i] = gm_f32_to_bf16(rnd() / sqrtf((float)K));
}

Test(kernels, grouped_outputs_and_any_thread_count_give_the_same_bits)
{
    /*
    ** q/k/v-like groups of outputs, more than a run takes (they are split),
    ** one row and many, W (in, out) and in panels. One-row runs on 2 threads
    ** give each thread one of {32, 32} and of {64, 64} whole and split the
    ** others by columns (by whole panels); on 3 threads they split every
    ** output. Each output's bits are those of the (in, out) product alone.
    */
    const int Ns[] = {200, 1000, 32, 32, 17, 64, 64};
    enum { K = 300, OUTS = 7 };
    for (int threads = 2; threads <= 3; threads++) {
        gm_pool *pool = gm_pool_new(threads);
        EACH_TIER(t) {
            const int Ts[] = {1, 7, 33};
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                const int T = Ts[ti];
                float *X = malloc(sizeof(float) * T * K), *Y[OUTS], *R[OUTS];
                gm_bf16 *W[OUTS], *Wf[OUTS];
                gm_out outs[OUTS];
                for (int o = 0; o < OUTS; o++) {
                    Y[o] = malloc(sizeof(float) * T * Ns[o]);
                    R[o] = malloc(sizeof(float) * T * Ns[o]);
                    W[o] = malloc(2 * (size_t)K * Ns[o]);
                    fill(X, T * K, W[o], K * Ns[o], K);
                }
                for (int o = 0; o < OUTS; o++) /* alone, on one thread, (in, out): once, for every form */
                    gm_matmul(NULL, R[o], X, W[o], NULL, T, K, Ns[o], 1);
                for (int f = 0; f < KN_FORMS; f++) {
                    for (int o = 0; o < OUTS; o++) {
                        Wf[o] = in_form(W[o], K, Ns[o], kn_forms[f]);
                        outs[o] = (gm_out){.Y = Y[o], .W = Wf[o], .N = Ns[o], .form = kn_forms[f]};
                    }
                    gm_matmul_outs(pool, X, T, K, outs, OUTS, 1);
                    for (int o = 0; o < OUTS; o++) {
                        cr_assert(memcmp(R[o], Y[o], sizeof(float) * T * Ns[o]) == 0,
                                  "%s T=%d form %d: output %d (N=%d) differs grouped on %d threads from alone on 1",
                                  gm_kernels_name(), T, kn_forms[f], o, Ns[o], threads);
                        free(Wf[o]);
                    }
                }
                for (int o = 0; o < OUTS; o++)
                    free(Y[o]), free(R[o]), free(W[o]);
                free(X);
            }
        }
        done();
        gm_pool_free(pool);
    }
}

static float daz(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }

/*
** A sum of products as TDPBF16PS forms it, written here from the Intel SDM
** apart from the kernels' model: for each 32 terms (one instruction, zeros
** past n), the even and the odd products summed apart, each step rounded to
** nearest even with denormals flushed to zero; then the two added, and that
** to the sum, which starts at acc. x[k * xs] * y[k * ys] for k < n.
*/
static float tile_sum(const float *x, long xs, const float *y, long ys, int n, float acc)
{
    for (int k0 = 0; k0 < n; k0 += 32) {
        float even = 0.0f, odd = 0.0f;
        for (int k = k0; k < k0 + 32; k += 2) {
            const float x0 = k < n ? x[k * xs] : 0.0f, x1 = k + 1 < n ? x[(k + 1) * xs] : 0.0f;
            const float y0 = k < n ? y[k * ys] : 0.0f, y1 = k + 1 < n ? y[(k + 1) * ys] : 0.0f;
            even = daz(fmaf(daz(x0), daz(y0), even));
            odd = daz(fmaf(daz(x1), daz(y1), odd));
        }
        acc = daz(daz(acc) + daz(even + odd));
    }
    return acc;
}

/* One output of X against Wn (N, K) rows, as a tiles tier sums it */
static float tile_order(const float *x, const gm_bf16 *Wn, int K, int n)
{
    float *w = malloc(sizeof(float) * (size_t)K);
    for (int k = 0; k < K; k++)
        w[k] = gm_bf16_to_f32(Wn[(long)n * K + k]);
    const float y = tile_sum(x, 1, w, 1, K, 0.0f);
    free(w);
    return y;
}

/*
** One output of X against Wn (N, K) rows as VDPBF16PS sums it, written here
** from the Intel SDM apart from the kernels' model: 16 lanes, lane l adding,
** for each 32 values of k in order (zeros past K), the product of k = 32 s
** + 2 l + 1 and then that of 32 s + 2 l, each step rounded to nearest even
** with denormals flushed to zero; then the lanes added as v16_hsum adds them
** (lane l and l + 8, those four and four apart, two and two, the last two).
*/
static float dp_order(const float *x, const gm_bf16 *Wn, int K, int n)
{
    float lane[16] = {0};
    for (int k0 = 0; k0 < K; k0 += 32)
        for (int l = 0; l < 16; l++)
            for (int k = k0 + 2 * l + 1; k >= k0 + 2 * l; k--)
                if (k < K)
                    lane[l] = daz(fmaf(daz(x[k]), daz(gm_bf16_to_f32(Wn[(long)n * K + k])), daz(lane[l])));
    float h[8], q[4];
    for (int i = 0; i < 8; i++)
        h[i] = lane[i] + lane[i + 8];
    for (int i = 0; i < 4; i++)
        q[i] = h[i] + h[i + 4];
    return (q[0] + q[2]) + (q[1] + q[3]);
}

/*
** One output of attention's products as VDPBF16PS sums it in one lane (the
** avx512-bf16 tiers' scores and probs . V), from the same text: from acc, for each pair of
** terms in order (a zero past n), the product of 2 q + 1 and then that of
** 2 q, each step rounded to nearest even with denormals flushed to zero.
** x[k] * y[k * ys] for k < n.
*/
static float dp_pairs(const float *x, const float *y, long ys, int n, float acc)
{
    for (int q = 0; 2 * q < n; q++)
        for (int k = 2 * q + 1; k >= 2 * q; k--)
            if (k < n)
                acc = daz(fmaf(daz(x[k]), daz(y[k * ys]), daz(acc)));
    return acc;
}

/* S[T][N]: X @ Wn^T's sums as a tier that sums in `order` (TDPBF16PS's or VDPBF16PS's) forms them */
static void order_sums(float *S, gm_nk_sums order, const float *X, const gm_bf16 *Wn, int T, int K, int N)
{
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++)
            S[(long)t * N + n] = order == GM_SUMS_TILES ? tile_order(X + (long)t * K, Wn, K, n)
                                                        : dp_order(X + (long)t * K, Wn, K, n);
}

/* Y as that tier makes it from those sums: then the bias and the one rounding */
static void order_reference(float *Y, const float *S, const gm_bf16 *b, int T, int N, int round)
{
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            const float y = S[(long)t * N + n] + gm_bf16_to_f32(b[n]);
            Y[(long)t * N + n] = round ? gm_bf16_to_f32(gm_f32_to_bf16(y)) : y;
        }
}

/* the first tier that summed in some number of lanes, and its outputs */
typedef struct first_of {
    const char *tier;
    float *Y;
} first_of;

/* W[K][N] as Wn[N][K] */
static gm_bf16 *rows_of(const gm_bf16 *W, int K, int N)
{
    gm_bf16 *Wn = malloc(2 * (size_t)K * N);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            Wn[(long)n * K + k] = W[(long)k * N + n];
    return Wn;
}

Test(kernels, products_of_bf16_values_give_the_same_bits_on_every_tier)
{
    /*
    ** With X holding bf16 values (the runner's bf16 mode), every product x * w
    ** is exact in f32, so a fused multiply-add and a multiply then an add round
    ** alike, and each output of an (in, out) product, one sum in k order, is
    ** the same on every tier, the AMX ones too (they leave that form to the
    ** AVX-512 tier), with W (in, out) or in panels of 16 or 32 columns (on
    ** every tier, whichever it reads best). An (out, in) product sums in the tier's order
    ** (gm_tier_info): in lanes on the FMA tiers, the same bits on tiers of as
    ** many lanes (portable and avx2 at 8, avx512 and its model at 16), in
    ** TDPBF16PS's order on the tiles tiers and in
    ** VDPBF16PS's on the avx512-bf16 ones, checked against tile_order and
    ** dp_order bit for bit on the software models. On the hardware the
    ** check is logged, not asserted, on these inputs: each model follows
    ** the SDM's text, and the sums below are inexact, so a difference between
    ** the text and the silicon would show here first (the next test asserts
    ** hardware and model agree where every sum is exact, and the golden tests
    ** run the hardware tier end to end). The FMA tiers' lanes: within a bf16
    ** ulp of the reference.
    */
    const int shapes[][3] = {{1, 300, 1000}, {1, 1536, 256}, {1, 520, 301}, /* a row's rows left past whole regions */
                             {2, 64, 48}, {7, 260, 200}, {32, 513, 390}, {33, 96, 263}, {70, 2100, 40},
                             {1030, 1600, 32}}; /* a long prompt: the FMA tiers' longer k-blocks (GM_LONG_KB) */
    gm_pool *pool = gm_pool_new(2);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *X = malloc(sizeof(float) * T * K), *Y[3];
        for (int i = 0; i < 3; i++)
            Y[i] = malloc(sizeof(float) * T * N);
        gm_bf16 *W = malloc(2 * (size_t)K * N), *b = malloc(2 * (size_t)N);
        fill(X, T * K, W, K * N, K);
        gm_bf16 *Wn = rows_of(W, K, N), *Wp[KN_FORMS] = {NULL};
        for (int f = 1; f < KN_FORMS; f++)
            Wp[f] = in_form(W, K, N, kn_forms[f]);
        for (int i = 0; i < N; i++)
            b[i] = gm_f32_to_bf16(0.2f * rnd());
        float *sums[GM_SUMS_DPBF16 + 1] = {NULL}; /* each SDM order's (order_sums), once: when a tier first needs it */
        for (int round = 0; round < 2; round++) {
            first_of by_lanes[2] = {{NULL, malloc(sizeof(float) * T * N)}, {NULL, malloc(sizeof(float) * T * N)}};
            gm_kernels_select("portable");
            gm_matmul(pool, Y[0], X, W, b, T, K, N, round);
            EACH_TIER(t) {
                gm_matmul(pool, Y[1], X, W, b, T, K, N, round);
                cr_assert(memcmp(Y[0], Y[1], sizeof(float) * T * N) == 0,
                          "T=%d K=%d N=%d round=%d: (in, out) on %s and portable differ", T, K, N, round, t);
                for (int f = 1; f < KN_FORMS; f++) { /* the panels: the same sums, the same bits */
                    product(pool, Y[1], X, Wp[f], b, T, K, N, round, kn_forms[f]);
                    cr_assert(memcmp(Y[0], Y[1], sizeof(float) * T * N) == 0,
                              "T=%d K=%d N=%d round=%d: form %d on %s and (in, out) on portable differ", T, K, N, round,
                              kn_forms[f], t);
                }
                const gm_out o = {.Y = Y[1], .W = Wn, .bias = b, .N = N, .form = GM_W_NK};
                gm_matmul_outs(pool, X, T, K, &o, 1, round);
                const gm_tier_info *ti = gm_kernels_info(t);
                const int sdm = ti->nk_sums != GM_SUMS_LANES; /* an instruction's order, from the SDM */
                const char *order = ti->nk_sums == GM_SUMS_TILES ? "TDPBF16PS's order" : "VDPBF16PS's order";
                if (!sdm) { /* tiers that sum in as many lanes sum alike: the same bits (portable and avx2, at 8) */
                    cr_assert(ti->lanes == 8 || ti->lanes == 16, "%s: %d lanes", t, ti->lanes);
                    first_of *first = &by_lanes[ti->lanes == 8 ? 0 : 1];
                    if (!first->tier) {
                        first->tier = t;
                        memcpy(first->Y, Y[1], sizeof(float) * T * N);
                    } else
                        cr_assert(memcmp(first->Y, Y[1], sizeof(float) * T * N) == 0,
                                  "T=%d K=%d N=%d round=%d: (out, in) on %s and %s, both in %d lanes, differ", T, K, N,
                                  round, t, first->tier, ti->lanes);
                }
                if (sdm && !sums[ti->nk_sums]) {
                    sums[ti->nk_sums] = malloc(sizeof(float) * T * N);
                    order_sums(sums[ti->nk_sums], ti->nk_sums, X, Wn, T, K, N);
                }
                if (sdm)
                    order_reference(Y[2], sums[ti->nk_sums], b, T, N, round);
                if (sdm && ti->model) {
                    cr_assert(memcmp(Y[2], Y[1], sizeof(float) * T * N) == 0,
                              "T=%d K=%d N=%d round=%d: %s and %s differ", T, K, N, round, t, order);
                    continue;
                }
                const float *want = sdm ? Y[2] : Y[0];
                int same = 0;
                for (int i = 0; i < T * N; i++) {
                    same += memcmp(&want[i], &Y[1][i], 4) == 0;
                    cr_assert(fabsf(want[i] - Y[1][i]) <= 0.0079f * fabsf(want[i]) + 1e-6f, "%s [%d]: %g, expected %g",
                              t, i, Y[1][i], want[i]);
                }
                cr_log_info("%s, (out, in), T=%d K=%d N=%d round=%d: %d of %d outputs bit-identical to %s", t, T, K, N,
                            round, same, T * N, sdm ? order : "k order");
            }
            free(by_lanes[0].Y), free(by_lanes[1].Y);
        }
        free(X), free(Y[0]), free(Y[1]), free(Y[2]), free(W), free(Wn), free(b);
        for (int f = 1; f < KN_FORMS; f++)
            free(Wp[f]);
        for (int i = 0; i <= GM_SUMS_DPBF16; i++)
            free(sums[i]);
    }
    done();
    gm_pool_free(pool);
}

Test(kernels, exact_sums_give_the_same_bits_on_every_tier_the_amx_ones_too)
{
    /* small integers: every partial sum exact in f32, so any order of the sums gives the same bits */
    const int shapes[][3] = {{1, 64, 48}, {2, 64, 48}, {17, 300, 200}, {32, 513, 390}, {50, 1536, 100}, {40, 2200, 70}};
    gm_pool *pool = gm_pool_new(2);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *X = malloc(sizeof(float) * T * K), *Y[2] = {malloc(sizeof(float) * T * N), malloc(sizeof(float) * T * N)};
        gm_bf16 *W = malloc(2 * (size_t)K * N);
        for (int i = 0; i < T * K; i++)
            X[i] = (float)((int)(rnd() * 3.0f));
        for (int i = 0; i < K * N; i++)
            W[i] = gm_f32_to_bf16((float)((int)(rnd() * 3.0f)));
        gm_bf16 *Wn = rows_of(W, K, N);
        gm_kernels_select("portable");
        gm_matmul(pool, Y[0], X, W, NULL, T, K, N, 0);
        EACH_TIER(t) {
            gm_matmul(pool, Y[1], X, W, NULL, T, K, N, 0);
            cr_assert(memcmp(Y[0], Y[1], sizeof(float) * T * N) == 0, "T=%d K=%d N=%d: %s and portable differ", T, K, N, t);
            gm_matmul_nt(pool, Y[1], X, Wn, T, K, N, 0);
            cr_assert(memcmp(Y[0], Y[1], sizeof(float) * T * N) == 0, "T=%d K=%d N=%d: (out, in) on %s and portable differ",
                      T, K, N, t);
        }
        free(X), free(Y[0]), free(Y[1]), free(W), free(Wn);
    }
    done();
    gm_pool_free(pool);
}

/*
** Where exp's results are special or its reduction changes case: infinities, NaN, zeros, denormal inputs, the
** overflow threshold (e^88.72284 > FLT_MAX), the last normal and denormal results (-87.33655, -103.97208), the
** clamps, the edges of its reduced range (multiples of ln 2 / 2) and of the rounding to an integer n.
*/
static const float exp_edges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f,
                                  1e-30f, -1e-30f, 88.72283f, 88.72284f, 88.7229f, 89.0f, 89.5f, 90.0f, 1e30f,
                                  -87.33654f, -87.33655f, -87.4f, -100.0f, -103.972f, -103.9721f, -103.98f, -104.0f,
                                  -104.5f, -200.0f, -1e30f, 0.34657359f, -0.34657359f, 0.3465736f, 1.0397208f,
                                  -1.0397208f, 0.6931472f, 1.0f, -1.0f, 0.5f, 2.0f, 10.0f, -10.0f, 64.0f, -64.0f,
                                  88.0f, -88.0f, 0x1.8p-2f, 3.4657359f};
enum { EXP_EDGES = sizeof exp_edges / sizeof exp_edges[0] };

/*
** The element-wise steps of the current tier, into r[0..6): r[3] and r[4] gm_exp_sum's, of g and of u, with their
** sums; r[5] RoPE's pairs, x's first n / 2 values against its next n / 2, g and u as cos and sin.
*/
static void element_wise(float r[6][1007], float sums[2], const float *x, const float *y, const gm_bf16 *w,
                         const float *g, const float *u, int n, int round)
{
    memcpy(r[0], x, sizeof(float) * n);
    gm_add_round(r[0], y, n, round);
    gm_norm_scale(r[1], x, w, 0.37f, n, round);
    memcpy(r[2], g, sizeof(float) * n);
    gm_swiglu(r[2], u, n, round);
    sums[0] = gm_exp_sum(r[3], g, n, 0.0f);
    memcpy(r[4], u, sizeof(float) * n); /* in place, as the runner calls it */
    sums[1] = gm_exp_sum(r[4], r[4], n, 3.5f);
    memcpy(r[5], x, sizeof(float) * n);
    gm_rope(r[5], g, u, n / 2, round);
}

/* r() of the element-wise steps: bf16 in bf16 mode, as the scalar code rounds */
static float maybe_bf16(float v, int round) { return round ? gm_bf16_to_f32(gm_f32_to_bf16(v)) : v; }

Test(kernels, element_wise_steps_give_the_same_bits_on_every_tier)
{
    enum { N = 1000 + 7 }; /* vector body and a tail */
    float x[N], y[N], w32[N], g[N], u[N];
    gm_bf16 w[N];
    for (int i = 0; i < N; i++) {
        x[i] = 4.0f * rnd(), y[i] = 4.0f * rnd(), w32[i] = 1.0f + 0.1f * rnd();
        w[i] = gm_f32_to_bf16(w32[i]), g[i] = 8.0f * rnd(), u[i] = 2.0f * rnd();
    }
    x[3] = NAN, g[5] = -INFINITY, g[6] = 90.0f, g[7] = -90.0f; /* NaN canonical, exp overflow and underflow */
    for (int i = 0; i < EXP_EDGES; i++) /* exp's edges as gate values, and their negations (SiLU takes exp(-g)) */
        g[20 + i] = exp_edges[i], g[20 + EXP_EDGES + i] = -exp_edges[i];
    for (int i = 0; i < 300; i++) /* the whole range of exp, and beyond */
        g[200 + i] = 230.0f * rnd();
    for (int round = 0; round < 2; round++) {
        static float ref[6][N], r[6][N];
        float ref_sums[2], sums[2];
        gm_kernels_select("portable");
        element_wise(ref, ref_sums, x, y, w, g, u, N, round);
        EACH_TIER(t) {
            element_wise(r, sums, x, y, w, g, u, N, round);
            for (int f = 0; f < 6; f++)
                cr_assert(memcmp(r[f], ref[f], sizeof r[f]) == 0, "step %d round=%d: %s and portable differ", f, round, t);
            /* g's holds NaNs of both signs, and which of two NaNs an addition passes on is the compiler's choice */
            cr_assert(isnan(sums[0]) && isnan(ref_sums[0]), "exp_sum of NaNs: %s %a, portable %a", t, sums[0], ref_sums[0]);
            cr_assert(memcmp(&sums[1], &ref_sums[1], 4) == 0, "exp_sum's sum: %s %a, portable %a", t, sums[1], ref_sums[1]);
        }
        /* and each is the single rounding it promises */
        for (int i = 0; i < N; i++) {
            const float add = x[i] + y[i];
            const float want = round ? gm_bf16_to_f32(gm_f32_to_bf16(add)) : add;
            cr_assert(memcmp(&ref[0][i], &want, 4) == 0 || (isnan(want) && isnan(ref[0][i])), "add [%d]", i);
        }
        /* RoPE as HF's bf16 ops take it, x c + rotate_half(x) s with rotate_half(x) = (-x2, x1), each op rounded */
        for (int i = 0; i < N / 2; i++) {
            const float a = x[i], b = x[i + N / 2], c = g[i], sn = u[i];
            const float want[2] = {maybe_bf16(maybe_bf16(a * c, round) + maybe_bf16(-b * sn, round), round),
                                   maybe_bf16(maybe_bf16(b * c, round) + maybe_bf16(a * sn, round), round)};
            for (int k = 0; k < 2; k++) {
                const float got = ref[5][i + k * (N / 2)];
                cr_assert(memcmp(&got, &want[k], 4) == 0 || (isnan(want[k]) && isnan(got)), "rope [%d] round=%d: %a, want %a",
                          i + k * (N / 2), round, got, want[k]);
            }
        }
    }
    done();
}

Test(kernels, softmax_scale_max_and_div_round_are_the_scalar_steps_on_every_tier)
{
    enum { N = 1000 + 7 };
    static float x[N], got[N];
    for (int i = 0; i < N; i++)
        x[i] = -20.0f + 4.0f * rnd(); /* all negative: a max taken over a vector's unused lanes would be 0 */
    x[9] = NAN, x[10] = -INFINITY, x[11] = -0.0f;
    const int sizes[] = {N, 1, 5, 16, 17, 40};
    for (int round = 0; round < 2; round++)
        for (int c = 0; c < (int)(sizeof sizes / sizeof sizes[0]); c++) {
            const int n = sizes[c], from = n == N ? 0 : 12; /* the short runs start past the NaN and the zero */
            const float scale = 0.0883883476f;
            float want_max = -INFINITY;
            float want[N];
            for (int i = 0; i < n; i++) {
                want[i] = maybe_bf16(maybe_bf16(x[from + i], round) * scale, round);
                want_max = want[i] > want_max ? want[i] : want_max;
            }
            EACH_TIER(t) {
                memcpy(got, x + from, sizeof(float) * (size_t)n);
                const float m = gm_scale_max(got, n, scale, round, -INFINITY);
                for (int i = 0; i < n; i++)
                    cr_assert(memcmp(&got[i], &want[i], 4) == 0 || (isnan(want[i]) && isnan(got[i])),
                              "%s: scale_max n=%d round=%d [%d]: %a, the scalar step %a", t, n, round, i, got[i], want[i]);
                cr_assert(m == want_max, "%s: scale_max n=%d round=%d: max %a, the scalar step's %a", t, n, round, m,
                          want_max);
                memcpy(got, x + from, sizeof(float) * (size_t)n);
                gm_div_round(got, n, 3.7f, round);
                for (int i = 0; i < n; i++) {
                    const float w = maybe_bf16(x[from + i] / 3.7f, round);
                    cr_assert(memcmp(&got[i], &w, 4) == 0 || (isnan(w) && isnan(got[i])),
                              "%s: div_round n=%d round=%d [%d]: %a, the scalar step %a", t, n, round, i, got[i], w);
                }
            }
        }
    done();
}

Test(kernels, convert_rows_transposes_and_makes_panels_of_awkward_shapes_exactly_on_every_tier)
{
    /*
    ** rows and columns around the 32 x 16, 16 x 16 and 8 x 8 blocks and the
    ** panels; row ranges that do not start at 0 (nor at a panel); bf16 as it
    ** lies, and f32 rounded on the way; into (in, out) (1) and panels of 16,
    ** 32 and 24 columns, each element where gm_w_index says, as in_form lays
    ** the panel forms out
    */
    const size_t shapes[][2] = {{32, 16}, {33, 17}, {64, 48}, {70, 40}, {257, 300}, {5, 3}, {1, 1}, {96, 1536}};
    const int tos[] = {1, 16, 32, 24};
    EACH_TIER(t)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t ti = 0; ti < sizeof tos / sizeof tos[0]; ti++)
            for (int f32 = 0; f32 < 2; f32++) {
                const size_t rows = shapes[s][0], cols = shapes[s][1], es = f32 ? 4 : 2;
                const int to = tos[ti];
                uint8_t *src = malloc(es * rows * cols);
                gm_bf16 *want = malloc(2 * rows * cols), *dst = malloc(2 * rows * cols);
                for (size_t i = 0; i < rows * cols; i++) {
                    const uint32_t bits = (uint32_t)(i * 2654435761u >> 7) & 0x7F7FFFFFu; /* finite */
                    float v;
                    memcpy(&v, &bits, 4);
                    if (f32)
                        memcpy(src + 4 * i, &v, 4);
                    else
                        memcpy(src + 2 * i, &(gm_bf16){(gm_bf16)bits}, 2);
                    want[i] = f32 ? gm_f32_to_bf16(v) : (gm_bf16)bits;
                }
                memset(dst, 0xAB, 2 * rows * cols);
                const size_t cut = rows / 3; /* two calls, as the loader's pieces make them */
                const gm_src_type type = f32 ? GM_SRC_F32 : GM_SRC_BF16;
                gm_convert_rows(dst, src, type, rows, cols, 0, cut, to);
                gm_convert_rows(dst, src + cut * cols * es, type, rows, cols, cut, rows, to);
                /* (rows, cols) is HF's (out, in): row r is output r, column c input c, of W (in, out) = (cols, rows) */
                gm_bf16 *kn = malloc(2 * rows * cols);
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = 0; c < cols; c++)
                        kn[c * rows + r] = want[r * cols + c];
                const gm_wform form = to == 1 ? GM_W_KN : to == 16 ? GM_W_PANEL16 : GM_W_PANEL32;
                gm_bf16 *laid = to == 24 ? NULL : in_form(kn, (int)cols, (int)rows, form);
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = 0; c < cols; c++) {
                        const size_t p0 = r / to * to, w = rows - p0 < (size_t)to ? rows - p0 : (size_t)to;
                        const size_t at = to == 1 ? c * rows + r : p0 * cols + c * w + r - p0;
                        if (dst[at] != want[r * cols + c])
                            cr_assert_fail("%s, %zux%zu to %d%s: [%zu][%zu] is 0x%04x, expected 0x%04x", t, rows, cols,
                                           to, f32 ? " from f32" : "", r, c, dst[at], want[r * cols + c]);
                        if (laid)
                            cr_assert_eq(at, gm_w_index(form, cols, rows, c, r), "gm_w_index(%d, %zu, %zu)", form, c,
                                         r);
                    }
                if (laid)
                    cr_assert(memcmp(laid, dst, 2 * rows * cols) == 0, "%s, %zux%zu to %d: not as in_form", t, rows,
                              cols, to);
                free(src), free(want), free(dst), free(kn), free(laid);
            }
    done();
}

/* Every F16 value, and F32 values around bf16's ties, specials and denormals, as gm_f32_to_bf16 rounds them. */
Test(kernels, convert_rows_rounds_every_f16_and_awkward_f32_values_as_the_scalar_code_on_every_tier)
{
    enum { N16 = 65536 + 5, N32 = 4096 + 3 }; /* counts past whole vectors: the tails too */
    uint16_t *h = malloc(2 * N16);
    float *f = malloc(4 * N32);
    gm_bf16 *dst = malloc(2 * N16), *want16 = malloc(2 * N16), *want32 = malloc(2 * N32);
    for (size_t i = 0; i < N16; i++)
        h[i] = (uint16_t)i, want16[i] = gm_f32_to_bf16(gm_f16_to_f32(h[i]));
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F800000u, 0xFF800000u,
                                0x7FC00000u, 0xFF800001u, 0x7F800001u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu,
                                0x7F7FFFFFu, 0x7F7F8000u, 0x0080FFFFu, 0xBF808000u};
    for (size_t i = 0; i < N32; i++) {
        const uint32_t u = i < 16 ? special[i] : (uint32_t)(i * 2654435761u) ^ (i % 3 ? 0 : 0x8000u); /* ties */
        memcpy(&f[i], &u, 4);
        want32[i] = gm_f32_to_bf16(f[i]);
    }
    EACH_TIER(t) {
        gm_convert_rows(dst, h, GM_SRC_F16, N16, 1, 0, N16, 0);
        for (size_t i = 0; i < N16; i++)
            cr_assert_eq(dst[i], want16[i], "%s: F16 0x%04x gives 0x%04x, expected 0x%04x", t, h[i], dst[i], want16[i]);
        gm_convert_rows(dst, f, GM_SRC_F32, N32, 1, 0, N32, 0);
        for (size_t i = 0; i < N32; i++)
            cr_assert_eq(dst[i], want32[i], "%s: F32 %a gives 0x%04x, expected 0x%04x", t, (double)f[i], dst[i], want32[i]);
        gm_convert_rows(dst, h, GM_SRC_F16, 241, 271, 0, 241, 1); /* transposed, through the block's buffer */
        for (size_t r = 0; r < 241; r++)
            for (size_t c = 0; c < 271; c++)
                cr_assert_eq(dst[c * 241 + r], want16[r * 271 + c], "%s: F16 transposed [%zu][%zu]", t, r, c);
    }
    done();
    free(h), free(f), free(dst), free(want16), free(want32);
}

/* ---------------------------------------------------------------------- */
/* attention's products */

/*
** A bound on an f32 sum of n terms (any order, fused or not) against the
** exact one: n units of f32 rounding (2^-24) of the sum of their magnitudes,
** and twice that for slack.
*/
static double sum_bound(int n, double magnitudes) { return 2.0 * (n + 1) * 0x1p-24 * magnitudes + 1e-30; }

/* bf: Q, K and the probabilities bf16 values, as the runner's bf16 mode has them (the tiles tiers' own products) */
static void check_attention(const char *tier, int bf)
{
    const int ds[] = {1, 7, 16, 24, 45, 128, 300}, nks[] = {1, 3, 17, 300};
    enum { PAD = 5, MAXQ = 7, MAXK = 300, MAXD = 300 };
    const long ldq = MAXD + 3, ldk = MAXD + PAD, lds = MAXK + PAD, ldo = MAXD + 1;
    float *Q = malloc(sizeof(float) * MAXQ * ldq), *K = malloc(sizeof(float) * MAXK * ldk);
    float *S = malloc(sizeof(float) * MAXQ * lds), *O = malloc(sizeof(float) * MAXQ * ldo);
    float *O0 = malloc(sizeof(float) * MAXQ * ldo);
    double *exact = malloc(sizeof(double) * MAXQ * MAXK), *mags = malloc(sizeof(double) * MAXQ * MAXK);
    double *vexact[2] = {malloc(sizeof(double) * MAXQ * ldo), malloc(sizeof(double) * MAXQ * ldo)};
    double *vmags[2] = {malloc(sizeof(double) * MAXQ * ldo), malloc(sizeof(double) * MAXQ * ldo)};
    for (long i = 0; i < MAXQ * ldq; i++)
        Q[i] = rnd();
    for (long i = 0; i < MAXK * ldk; i++)
        K[i] = rnd();
    for (long i = 0; bf && i < MAXQ * ldq; i++)
        Q[i] = gm_bf16_to_f32(gm_f32_to_bf16(Q[i]));
    for (long i = 0; bf && i < MAXK * ldk; i++)
        K[i] = gm_bf16_to_f32(gm_f32_to_bf16(K[i]));
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
        const int d = ds[di];
        /* the exact scores over d, each row of Q against each of K, and their magnitudes: once, for every nk and nq */
        for (int i = 0; i < MAXQ; i++)
            for (int j = 0; j < MAXK; j++) {
                double ref = 0, mag = 0;
                for (int c = 0; c < d; c++) {
                    const double t = (double)Q[i * ldq + c] * K[j * ldk + c];
                    ref += t, mag += fabs(t);
                }
                exact[i * MAXK + j] = ref, mags[i * MAXK + j] = mag;
            }
        for (size_t ki = 0; ki < sizeof nks / sizeof nks[0]; ki++)
            for (int nq = 1; nq <= MAXQ; nq++) {
                const int nk = nks[ki];
                /* scores: Q rows against K rows; S's entries past nk stay as they were */
                for (long i = 0; i < MAXQ * lds; i++)
                    S[i] = -7.0f;
                gm_attn_scores(S, lds, Q, ldq, nq, K, ldk, nk, d);
                for (int i = 0; i < MAXQ; i++)
                    for (int j = 0; j < lds; j++) {
                        const float got = S[i * lds + j];
                        if (i >= nq || j >= nk) {
                            cr_assert_eq(got, -7.0f, "%s scores nq=%d nk=%d d=%d: wrote [%d][%d]", tier, nq, nk, d, i, j);
                            continue;
                        }
                        const double ref = exact[i * MAXK + j], mag = mags[i * MAXK + j];
                        cr_assert(fabs(got - ref) <= sum_bound(d, mag), "%s scores nq=%d nk=%d d=%d: [%d][%d] %.9g, exact %.9g",
                                  tier, nq, nk, d, i, j, got, ref);
                    }
                /* values: the scores as P (any floats will do) times K's rows as V, overwriting and accumulating */
                for (long i = 0; bf && i < MAXQ * lds; i++)
                    S[i] = gm_bf16_to_f32(gm_f32_to_bf16(S[i]));
                for (long i = 0; i < MAXQ * ldo; i++)
                    O0[i] = rnd();
                /* the exact values, overwriting (from 0) and accumulating (from O0), and their magnitudes: one pass */
                for (int i = 0; i < nq; i++)
                    for (int c = 0; c < d; c++) {
                        double ref[2] = {0.0, O0[i * ldo + c]}, mag[2] = {0.0, fabs(ref[1])};
                        for (int j = 0; j < nk; j++) {
                            const double t = (double)S[i * lds + j] * K[j * ldk + c];
                            ref[0] += t, mag[0] += fabs(t), ref[1] += t, mag[1] += fabs(t);
                        }
                        for (int a = 0; a < 2; a++)
                            vexact[a][i * ldo + c] = ref[a], vmags[a][i * ldo + c] = mag[a];
                    }
                for (int accumulate = 0; accumulate < 2; accumulate++) {
                    memcpy(O, O0, sizeof(float) * MAXQ * ldo);
                    gm_attn_values(O, ldo, S, lds, nq, K, ldk, nk, d, accumulate);
                    for (int i = 0; i < MAXQ; i++)
                        for (int c = 0; c < ldo; c++) {
                            const float got = O[i * ldo + c];
                            if (i >= nq || c >= d) {
                                cr_assert_eq(got, O0[i * ldo + c], "%s values nq=%d nk=%d d=%d: wrote [%d][%d]", tier, nq,
                                             nk, d, i, c);
                                continue;
                            }
                            const double ref = vexact[accumulate][i * ldo + c], mag = vmags[accumulate][i * ldo + c];
                            cr_assert(fabs(got - ref) <= sum_bound(nk + accumulate, mag),
                                      "%s values nq=%d nk=%d d=%d accumulate=%d: [%d][%d] %.9g, exact %.9g", tier, nq,
                                      nk, d, accumulate, i, c, got, ref);
                        }
                }
            }
    }
    free(Q), free(K), free(S), free(O), free(O0), free(exact), free(mags);
    free(vexact[0]), free(vexact[1]), free(vmags[0]), free(vmags[1]);
}

Test(kernels, attention_products_agree_with_exact_sums_on_awkward_shapes_on_every_tier)
{
    EACH_TIER(t) {
        check_attention(t, 0);
        check_attention(t, 1);
    }
    done();
}

Test(kernels, attention_products_of_bf16_values_give_the_same_bits_on_every_tier)
{
    /*
    ** With bf16 values in Q, K, P and V (the runner's bf16 mode) every product
    ** is exact in f32, and each output is one sum in the tier's order
    ** (gm_tier_info's nk_sums, as for the projections): over d, or over the
    ** keys, in order on the FMA tiers, which give the same bits; on the tiles
    ** tiers in TDPBF16PS's order (tile_sum), on the avx512-bf16 ones in one
    ** lane of VDPBF16PS's pairs (dp_pairs, over d or over the keys), checked bit for bit on the software models (on the hardware
    ** within a bf16 ulp and logged, as for the projections). Blocks of
    ** queries that are not whole register tiles, d past a piece of the AVX2
    ** transpose, keys and d past whole tiles, an odd number of keys, keys
    ** past a block of pairs, d past a register tile's columns.
    */
    const int shapes[][3] = {{1, 300, 128}, {6, 256, 64}, {11, 33, 48}, {96, 257, 16}, {5, 40, 260}, {7, 17, 24}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int nq = shapes[s][0], nk = shapes[s][1], d = shapes[s][2];
        float *Q = malloc(sizeof(float) * nq * d), *K = malloc(sizeof(float) * nk * d), *P = malloc(sizeof(float) * nq * nk);
        float *O0 = malloc(sizeof(float) * nq * d), *S[4], *O[4];
        for (int k = 0; k < 4; k++)
            S[k] = malloc(sizeof(float) * nq * nk), O[k] = malloc(sizeof(float) * nq * d);
        for (int i = 0; i < nq * d; i++)
            Q[i] = gm_bf16_to_f32(gm_f32_to_bf16(rnd())), O0[i] = rnd();
        for (int i = 0; i < nk * d; i++)
            K[i] = gm_bf16_to_f32(gm_f32_to_bf16(rnd()));
        for (int i = 0; i < nq * nk; i++)
            P[i] = gm_bf16_to_f32(gm_f32_to_bf16(0.5f + 0.5f * rnd()));
        for (int i = 0; i < nq; i++)
            for (int j = 0; j < nk; j++) {
                S[2][i * nk + j] = tile_sum(Q + i * d, 1, K + j * d, 1, d, 0.0f);
                S[3][i * nk + j] = dp_pairs(Q + i * d, K + j * d, 1, d, 0.0f);
            }
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            for (int i = 0; i < nq; i++)
                for (int c = 0; c < d; c++) {
                    const float from = accumulate ? O0[i * d + c] : 0.0f;
                    O[2][i * d + c] = tile_sum(P + i * nk, 1, K + c, d, nk, from);
                    O[3][i * d + c] = dp_pairs(P + i * nk, K + c, d, nk, from);
                }
            gm_kernels_select("portable");
            gm_attn_scores(S[0], nk, Q, d, nq, K, d, nk, d);
            memcpy(O[0], O0, sizeof(float) * nq * d);
            gm_attn_values(O[0], d, P, nk, nq, K, d, nk, d, accumulate);
            EACH_TIER(t) {
                gm_attn_scores(S[1], nk, Q, d, nq, K, d, nk, d);
                memcpy(O[1], O0, sizeof(float) * nq * d);
                gm_attn_values(O[1], d, P, nk, nq, K, d, nk, d, accumulate);
                const gm_tier_info *ti = gm_kernels_info(t);
                const int sdm = ti->nk_sums != GM_SUMS_LANES, w = ti->nk_sums == GM_SUMS_TILES ? 2 : sdm ? 3 : 0;
                const float *ws = S[w], *wo = O[w];
                const char *what = w == 2 ? "the SDM's tile order" : w == 3 ? "the SDM's VDPBF16PS order" : "portable";
                if (!sdm || ti->model) {
                    cr_assert(memcmp(ws, S[1], sizeof(float) * nq * nk) == 0, "scores nq=%d nk=%d d=%d: %s and %s differ",
                              nq, nk, d, t, what);
                    cr_assert(memcmp(wo, O[1], sizeof(float) * nq * d) == 0,
                              "values nq=%d nk=%d d=%d accumulate=%d: %s and %s differ", nq, nk, d, accumulate, t, what);
                    continue;
                }
                int same = 0;
                for (int i = 0; i < nq * nk; i++) {
                    same += memcmp(&ws[i], &S[1][i], 4) == 0;
                    cr_assert(fabsf(ws[i] - S[1][i]) <= 1e-5f * (1 + fabsf(ws[i])), "%s scores [%d]: %g, %g", t, i,
                              S[1][i], ws[i]);
                }
                for (int i = 0; i < nq * d; i++) {
                    same += memcmp(&wo[i], &O[1][i], 4) == 0;
                    cr_assert(fabsf(wo[i] - O[1][i]) <= 1e-5f * (1 + fabsf(wo[i])), "%s values [%d]: %g, %g", t, i,
                              O[1][i], wo[i]);
                }
                cr_log_info("%s attention nq=%d nk=%d d=%d: %d of %d outputs bit-identical to %s", t, nq, nk, d, same,
                            nq * (nk + d), what);
            }
        }
        free(Q), free(K), free(P), free(O0);
        for (int k = 0; k < 4; k++)
            free(S[k]), free(O[k]);
    }
    done();
}

/* ---------------------------------------------------------------------- */
/* the epilogues, and what a tile product reads */

/*
** Each epilogue is the product, then the step, whatever the tier folds into
** its products: GM_EP_ADD is the stored output added into R with one
** rounding; GM_EP_SWIGLU is gate and up stored, then gm_swiglu. Every form
** of W, one row and many (more than two blocks of 32 tokens), k longer
** than a piece of the tile products (2100 > GM_NK_KC) and with a tail,
** outputs past a stripe, on 2 threads.
*/
Test(kernels, epilogues_are_the_product_then_the_step_on_every_tier)
{
    const int shapes[][3] = {{1, 300, 200}, {7, 64, 48}, {70, 2100, 72}, {33, 96, 263}};
    gm_pool *pool = gm_pool_new(2);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        const size_t ny = (size_t)T * N;
        float *X = malloc(sizeof(float) * T * K), *R0 = malloc(sizeof(float) * ny);
        float *g = malloc(sizeof(float) * ny), *u = malloc(sizeof(float) * ny), *g2 = malloc(sizeof(float) * ny);
        float *u2 = malloc(sizeof(float) * ny), *R = malloc(sizeof(float) * ny), *want = malloc(sizeof(float) * ny);
        gm_bf16 *W[2] = {malloc(2 * (size_t)K * N), malloc(2 * (size_t)K * N)}, *Wf[GM_W_FORMS][2];
        gm_bf16 *b = malloc(2 * (size_t)N);
        fill(X, T * K, W[0], K * N, K);
        fill(X, 0, W[1], K * N, K);
        for (int f = 0; f < GM_W_FORMS; f++)
            Wf[f][0] = in_form(W[0], K, N, (gm_wform)f), Wf[f][1] = in_form(W[1], K, N, (gm_wform)f);
        for (int i = 0; i < N; i++)
            b[i] = gm_f32_to_bf16(0.2f * rnd());
        for (size_t i = 0; i < ny; i++)
            R0[i] = gm_bf16_to_f32(gm_f32_to_bf16(4.0f * rnd()));
        EACH_TIER(t)
        for (int form = 0; form < GM_W_FORMS; form++)
            for (int round = 0; round < 2; round++) {
                const gm_bf16 *const *w = (const gm_bf16 *const *)Wf[form];
                /* the residual add */
                const gm_out plain = {.Y = want, .W = w[0], .bias = b, .N = N, .form = (gm_wform)form};
                gm_matmul_outs(pool, X, T, K, &plain, 1, round);
                memcpy(R, R0, sizeof(float) * ny);
                const gm_out add = {.Y = g, .W = w[0], .bias = b, .N = N, .form = (gm_wform)form, .R = R};
                gm_matmul_ep(pool, X, T, K, &add, 1, round, GM_EP_ADD);
                cr_assert(memcmp(g, want, sizeof(float) * ny) == 0, "%s form %d T=%d: GM_EP_ADD's Y", t, form, T);
                for (size_t i = 0; i < ny; i++) {
                    float x = R0[i];
                    gm_add_round(&x, &want[i], 1, round);
                    cr_assert(memcmp(&x, &R[i], 4) == 0, "%s form %d T=%d K=%d N=%d round=%d: R[%zu] %g, expected %g",
                              t, form, T, K, N, round, i, R[i], x);
                }
                /* SwiGLU */
                const gm_out gu[] = {{.Y = g, .W = w[0], .N = N, .form = (gm_wform)form},
                                     {.Y = u, .W = w[1], .N = N, .form = (gm_wform)form}};
                gm_matmul_outs(pool, X, T, K, gu, 2, round);
                gm_swiglu(g, u, (int)ny, round);
                const gm_out gu2[] = {{.Y = g2, .W = w[0], .N = N, .form = (gm_wform)form},
                                      {.Y = u2, .W = w[1], .N = N, .form = (gm_wform)form}};
                gm_matmul_ep(pool, X, T, K, gu2, 2, round, GM_EP_SWIGLU);
                cr_assert(memcmp(g, g2, sizeof(float) * ny) == 0, "%s form %d T=%d K=%d N=%d round=%d: GM_EP_SWIGLU",
                          t, form, T, K, N, round);
            }
        free(X), free(R0), free(g), free(u), free(g2), free(u2), free(R), free(want), free(b);
        for (int i = 0; i < 2; i++) {
            free(W[i]);
            for (int f = 0; f < GM_W_FORMS; f++)
                free(Wf[f][i]);
        }
    }
    done();
    gm_pool_free(pool);
}

/* a tile product on its own thread, and what that thread's gm_kernels_pack_seconds says after it */
typedef struct packing {
    gm_pool *pool;
    const float *X;
    gm_out out;
    int T, K;
    double before, after;
} packing;

static void *product_on_its_thread(void *arg)
{
    packing *c = arg;
    c->before = gm_kernels_pack_seconds();
    gm_matmul_outs(c->pool, c->X, c->T, c->K, &c->out, 1, 1);
    c->after = gm_kernels_pack_seconds();
    return NULL;
}

/*
** The time spent packing X for the tiles (rt_profile.conversions) is the
** calling thread's: two sessions profiled on two threads do not count each
** other's.
*/
Test(kernels, packing_time_counts_for_the_thread_that_calls_the_product)
{
    enum { T = 32, K = 256, N = 64 };
    cr_assert_eq(gm_kernels_select("amx-model"), 0);
    float *X = malloc(sizeof(float) * T * K), *Y = malloc(sizeof(float) * T * N);
    gm_bf16 *W = malloc(2 * (size_t)K * N);
    fill(X, T * K, W, K * N, K);
    packing c = {gm_pool_new(1), X, {.Y = Y, .W = W, .N = N, .form = GM_W_NK}, T, K, 0, 0};
    const double mine = gm_kernels_pack_seconds();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, product_on_its_thread, &c), 0);
    pthread_join(th, NULL);
    cr_assert_gt(c.after, c.before, "the calling thread counts its packing");
    cr_assert_eq(gm_kernels_pack_seconds(), mine, "another thread's packing is not counted here");
    gm_pool_free(c.pool);
    free(X), free(Y), free(W);
    done();
}

/*
** The AMX tier's products against W (out, in) read each byte of W once, on
** tiles, and nothing else of it: on the software model, a 32-row product
** (a prefill's, one token block pair) loads exactly W's bytes into tiles,
** for one output, for a SwiGLU pair, and for one row (decode); shapes whose
** rows and k fill whole tiles, so no edge copy reads W either.
*/
Test(kernels, amx_products_read_each_weight_byte_once)
{
    const int shapes[][3] = {{32, 1536, 256}, {32, 2560, 96}, {1, 1536, 256}, {17, 64, 512}};
    gm_pool *pool = gm_pool_new(2);
    cr_assert_eq(gm_kernels_select("amx-model"), 0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        const size_t bytes = 2 * (size_t)K * N;
        float *X = malloc(sizeof(float) * T * K), *Y[2] = {malloc(sizeof(float) * T * N), malloc(sizeof(float) * T * N)};
        gm_bf16 *W = malloc(2 * bytes); /* gate's rows, then up's */
        fill(X, T * K, W, 2 * K * N, K);
        gm_tile_watch.lo = (uintptr_t)W, gm_tile_watch.hi = (uintptr_t)W + bytes;
        atomic_store(&gm_tile_watch.bytes, 0);
        const gm_out one = {.Y = Y[0], .W = W, .N = N, .form = GM_W_NK};
        gm_matmul_outs(pool, X, T, K, &one, 1, 1);
        cr_assert_eq(atomic_load(&gm_tile_watch.bytes), bytes, "T=%d K=%d N=%d: %zu bytes of W loaded, W has %zu", T, K,
                     N, atomic_load(&gm_tile_watch.bytes), bytes);
        gm_tile_watch.hi = (uintptr_t)W + 2 * bytes;
        atomic_store(&gm_tile_watch.bytes, 0);
        const gm_out pair[] = {{.Y = Y[0], .W = W, .N = N, .form = GM_W_NK},
                               {.Y = Y[1], .W = W + (size_t)K * N, .N = N, .form = GM_W_NK}};
        gm_matmul_ep(pool, X, T, K, pair, 2, 1, GM_EP_SWIGLU);
        cr_assert_eq(atomic_load(&gm_tile_watch.bytes), 2 * bytes, "T=%d K=%d N=%d, SwiGLU: %zu bytes of W loaded", T, K,
                     N, atomic_load(&gm_tile_watch.bytes));
        gm_tile_watch.lo = gm_tile_watch.hi = 0;
        free(X), free(Y[0]), free(Y[1]), free(W);
    }
    done();
    gm_pool_free(pool);
}

/* ---------------------------------------------------------------------- */
/* the products' register tiles */

Test(kernels, every_register_tile_height_gives_the_same_bits_as_portable)
{
    /*
    ** T = 1 to 21 rows: every tile height of every tier (1 to 8 rows), the
    ** rows left over, two k-blocks, tail columns (N = 200: a last panel of 8
    ** columns in either panel form, a last tile of 8 on AVX2 and of 8 on
    ** AVX-512), W (in, out) and in panels, on 1 and 2 threads: every output
    ** the bits of the portable tier's (in, out) product on 1 thread.
    */
    const int Ks[] = {40, 300};
    enum { N = 200, MAXT = 21, MAXK = 300 };
    gm_pool *pools[2] = {gm_pool_new(1), gm_pool_new(2)};
    float *X = malloc(sizeof(float) * MAXT * MAXK), *Y[2] = {malloc(sizeof(float) * MAXT * N), malloc(sizeof(float) * MAXT * N)};
    gm_bf16 *W = malloc(2 * (size_t)MAXK * N);
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
        for (int T = 1; T <= MAXT; T++) {
            const int K = Ks[ki];
            fill(X, T * K, W, K * N, K);
            gm_bf16 *Wf[KN_FORMS];
            for (int f = 0; f < KN_FORMS; f++)
                Wf[f] = in_form(W, K, N, kn_forms[f]);
            gm_kernels_select("portable");
            gm_matmul(pools[0], Y[0], X, W, NULL, T, K, N, 0);
            EACH_TIER(t) /* one sum in k order on every tier, the AMX ones' being AVX-512's */
            for (int f = 0; f < KN_FORMS; f++)
                for (int th = 0; th < 2; th++) {
                    product(pools[th], Y[1], X, Wf[f], NULL, T, K, N, 0, kn_forms[f]);
                    cr_assert(memcmp(Y[0], Y[1], sizeof(float) * T * N) == 0,
                              "T=%d K=%d form %d, %d thread(s): %s and portable differ", T, K, kn_forms[f], th + 1, t);
                }
            for (int f = 0; f < KN_FORMS; f++)
                free(Wf[f]);
        }
    done();
    gm_pool_free(pools[0]), gm_pool_free(pools[1]);
    free(X), free(Y[0]), free(Y[1]), free(W);
}

/* ---------------------------------------------------------------------- */
/* the kernels' exp */

/* One unit in the last place of the float nearest r > 0 (2^-149 for denormals). */
static double ulp_at(double r)
{
    int e;
    frexp(r, &e);
    return r < 0x1p-126 ? 0x1p-149 : ldexp(1.0, e - 24);
}

Test(kernels, exp_is_within_0_77_ulp_of_e_to_the_x_on_every_tier)
{
    /* every 65537th float (all exponents, both signs) and the edges, through gm_exp_sum with m = 0: y = exp(x) */
    enum { N = 65536 + EXP_EDGES };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    for (int i = 0; i < 65536; i++) {
        const uint32_t b = (uint32_t)i * 65537u;
        memcpy(&x[i], &b, 4);
    }
    memcpy(x + 65536, exp_edges, sizeof exp_edges);
    EACH_TIER(t) {
        gm_exp_sum(y, x, N, 0.0f);
        double worst = 0;
        int same = 0;
        for (int i = 0; i < N; i++) {
            const double r = exp((double)x[i]);
            const float libc = expf(x[i]);
            same += memcmp(&libc, &y[i], 4) == 0;
            if (isnan(x[i])) {
                cr_assert(isnan(y[i]), "%s: exp(%a) = %a, not NaN", t, x[i], y[i]);
                continue;
            }
            if (r >= 0x1p128) { /* past FLT_MAX by more than an ulp: inf */
                cr_assert(isinf(y[i]) && y[i] > 0, "%s: exp(%a) = %a, not inf", t, x[i], y[i]);
                continue;
            }
            const double err = fabs((double)y[i] - r) / ulp_at(r);
            cr_assert(err <= 0.77, "%s: exp(%a) = %a, %.3f ulp from %a", t, x[i], y[i], err, r);
            worst = err > worst ? err : worst;
        }
        const float one = 1.0f, inf = INFINITY, zero = 0.0f;
        for (int i = 65536; i < N; i++) { /* results that are exact */
            const float xi = x[i];
            if (xi == 0.0f || fabsf(xi) == 0x1p-149f || fabsf(xi) == 1e-30f)
                cr_assert(memcmp(&y[i], &one, 4) == 0, "%s: exp(%a) = %a, not 1", t, xi, y[i]);
            if (xi == -INFINITY || xi <= -104.0f)
                cr_assert(memcmp(&y[i], &zero, 4) == 0, "%s: exp(%a) = %a, not +0", t, xi, y[i]);
            if (xi >= 88.72284f)
                cr_assert(memcmp(&y[i], &inf, 4) == 0, "%s: exp(%a) = %a, not inf", t, xi, y[i]);
        }
        cr_log_info("%s: exp at most %.3f ulp from e^x; %.2f%% the same bits as the C library's expf", t, worst,
                    100.0 * same / N);
    }
    done();
    free(x), free(y);
}

Test(kernels, exp_sum_adds_in_its_documented_order_on_every_tier)
{
    /* 16 partial sums, value k into sum k % 16 in turn; then j + 8 into j, j + 4 into j, and (0 + 2) + (1 + 3) */
    const int ns[] = {0, 1, 2, 7, 15, 16, 17, 31, 32, 33, 100, 257, 1000};
    enum { MAXN = 1000, PAST = 17 };
    float x[MAXN], y[MAXN + PAST];
    for (int i = 0; i < MAXN; i++)
        x[i] = 20.0f * rnd() - 10.0f;
    EACH_TIER(t)
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        const int n = ns[c];
        for (int i = 0; i < MAXN + PAST; i++)
            y[i] = -7.0f;
        const float got = gm_exp_sum(y, x, n, 0.3f);
        float s[16] = {0};
        for (int k = 0; k < n; k++)
            s[k % 16] += y[k];
        for (int j = 0; j < 8; j++)
            s[j] += s[j + 8];
        for (int j = 0; j < 4; j++)
            s[j] += s[j + 4];
        const float want = (s[0] + s[2]) + (s[1] + s[3]);
        cr_assert(memcmp(&got, &want, 4) == 0, "%s n=%d: sum %a, in the documented order %a", t, n, got, want);
        for (int i = n; i < MAXN + PAST; i++)
            cr_assert_eq(y[i], -7.0f, "%s n=%d: wrote y[%d]", t, n, i);
        float one;
        for (int k = 0; k < n; k += 37) { /* each value as a call of its own computes it */
            gm_exp_sum(&one, x + k, 1, 0.3f);
            cr_assert(memcmp(&one, &y[k], 4) == 0, "%s n=%d: y[%d] %a, alone %a", t, n, k, y[k], one);
        }
    }
    done();
}
