/*
** The matrix kernels against the plain reference kernel, on awkward shapes
** (one row, rows not a multiple of 4, columns not a multiple of 8, k-blocks
** with a tail), on the AVX2 path and the portable one, with and without bias
** and rounding; and the vectorized rounding on its edge cases.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gm/bf16.h"
#include "gm/kernels.h"
#include "gm/pool.h"

static unsigned seed = 1;
static float rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return (float)((seed >> 9) & 0xFFFF) / 32768.0f - 1.0f;
}

static void check_shapes(int portable, gm_pool *pool)
{
    gm_kernels_force_portable(portable);
    const int shapes[][3] = {{1, 64, 96}, {1, 300, 1000}, {3, 17, 5}, {5, 260, 200}, {32, 513, 390}, {7, 8, 8},
                             {4, 1, 24}, {33, 96, 263}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *X = malloc(sizeof(float) * (size_t)T * K), *Y = malloc(sizeof(float) * (size_t)T * N);
        float *R = malloc(sizeof(float) * (size_t)T * N), *Wt = NULL;
        gm_bf16 *W = malloc(2 * (size_t)K * N), *b = malloc(2 * (size_t)N), *Wn = malloc(2 * (size_t)K * N);
        for (int i = 0; i < T * K; i++)
            X[i] = gm_bf16_to_f32(gm_f32_to_bf16(rnd()));
        for (int i = 0; i < K * N; i++)
            W[i] = gm_f32_to_bf16(rnd() / sqrtf((float)K));
        for (int i = 0; i < N; i++)
            b[i] = gm_f32_to_bf16(0.2f * rnd());
        for (int k = 0; k < K; k++) /* W as (N, K) rows for the X @ W^T kernel */
            for (int n = 0; n < N; n++)
                Wn[(long)n * K + k] = W[(long)k * N + n];
        for (int round = 0; round < 2; round++)
            for (int bias = 0; bias < 2; bias++) {
                gm_matmul(pool, Y, X, W, bias ? b : NULL, T, K, N, round);
                gm_matmul_reference(R, X, W, bias ? b : NULL, T, K, N, round);
                for (int i = 0; i < T * N; i++) /* summation orders differ: a bf16 ulp at most */
                    cr_assert(fabsf(Y[i] - R[i]) <= 0.0079f * fabsf(R[i]) + 1e-5f,
                              "%s T=%d K=%d N=%d round=%d bias=%d: [%d] %g, reference %g",
                              portable ? "portable" : gm_kernels_name(), T, K, N, round, bias, i, Y[i], R[i]);
            }
        gm_matmul_nt(pool, Y, X, Wn, T, K, N, 0);
        gm_matmul_reference(R, X, W, NULL, T, K, N, 0);
        for (int i = 0; i < T * N; i++)
            cr_assert(fabsf(Y[i] - R[i]) <= 1e-4f * (1 + fabsf(R[i])), "nt T=%d K=%d N=%d: [%d] %g, reference %g", T,
                      K, N, i, Y[i], R[i]);
        free(X), free(Y), free(R), free(W), free(b), free(Wn), free(Wt);
    }
    gm_kernels_force_portable(0);
}

Test(kernels, agree_with_the_reference_on_awkward_shapes_one_thread)
{
    check_shapes(0, NULL);
    check_shapes(1, NULL);
}

Test(kernels, agree_with_the_reference_on_two_threads)
{
    gm_pool *p = gm_pool_new(2);
    check_shapes(0, p);
    check_shapes(1, p);
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
    for (int portable = 0; portable < 2; portable++) {
        gm_kernels_force_portable(portable);
        gm_matmul(NULL, Y, X, W, NULL, N, N, N, 1);
        for (int i = 0; i < N; i++) {
            float want;
            memcpy(&want, &cases[i], 4);
            want = gm_bf16_to_f32(gm_f32_to_bf16(want));
            uint32_t a, b;
            memcpy(&a, &Y[i * N + i], 4);
            memcpy(&b, &want, 4);
            cr_assert_eq(a, b, "case 0x%08x: 0x%08x, expected 0x%08x", cases[i], a, b);
        }
    }
    gm_kernels_force_portable(0);
}
