/* Matrix kernels: cache blocking, threads and the choice of instruction set. See gm/kernels.h. */
#include "gm/kernels.h"

#include <stddef.h>
#include <string.h>

#include "kernels_impl.h"

enum {
    BAND = 64,   /* output columns per task */
    TILE_N = 16, /* columns per register tile */
    TILE_T = 4,  /* rows per register tile */
    BLOCK_K = 256 /* rows of W kept hot in L1 while every row block of X passes over them */
};

/* ---------------------------------------------------------------------- */
/* portable tiles, the same shapes as the AVX2 ones */

static void tile_portable(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *W, int ldw, int k0, int k1,
                          int rows)
{
    for (int r = 0; r < rows; r++) {
        float acc[TILE_N];
        memcpy(acc, Y + (long)r * ldy, sizeof acc);
        for (int k = k0; k < k1; k++) {
            const float x = X[(long)r * ldx + k];
            const gm_bf16 *w = W + (long)k * ldw;
            for (int j = 0; j < TILE_N; j++)
                acc[j] += x * gm_bf16_to_f32(w[j]);
        }
        memcpy(Y + (long)r * ldy, acc, sizeof acc);
    }
}

static void dot_portable(float *Y, int ldy, const float *X, int ldx, const gm_bf16 *Wn, int K, int rows)
{
    for (int r = 0; r < rows; r++) {
        float s = 0.0f;
        for (int k = 0; k < K; k++)
            s += X[(long)r * ldx + k] * gm_bf16_to_f32(Wn[k]);
        Y[(long)r * ldy] = s;
    }
}

static int force_portable;

void gm_kernels_force_portable(int on) { force_portable = on; }

static int have_avx2(void)
{
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return cached;
}

static int use_avx2(void) { return !force_portable && have_avx2(); }

const char *gm_kernels_name(void) { return use_avx2() ? "avx2+fma" : "portable"; }

/* ---------------------------------------------------------------------- */

typedef struct mm_job {
    float *Y;
    const float *X;
    const gm_bf16 *W, *bias;
    int T, K, N, round;
    gm_tile_fn tile;
    gm_dot_fn dot;
} mm_job;

/* The bias and the one rounding of every output of columns [n0, n1). */
static void finish(const mm_job *j, int n0, int n1)
{
    for (int t = 0; t < j->T; t++) {
        float *y = j->Y + (long)t * j->N;
        for (int n = n0; n < n1; n++) {
            float v = y[n];
            if (j->bias)
                v += gm_bf16_to_f32(j->bias[n]);
            y[n] = j->round ? gm_bf16_to_f32(gm_f32_to_bf16(v)) : v;
        }
    }
}

/* Task i: output columns [i * BAND, (i + 1) * BAND). */
static void matmul_band(void *ctx, int i)
{
    const mm_job *j = ctx;
    const int n0 = i * BAND, n1 = n0 + BAND < j->N ? n0 + BAND : j->N;
    for (int t = 0; t < j->T; t++)
        memset(j->Y + (long)t * j->N + n0, 0, sizeof(float) * (size_t)(n1 - n0));
    int n = n0;
    for (; n + TILE_N <= n1; n += TILE_N)
        for (int k0 = 0; k0 < j->K; k0 += BLOCK_K) {
            const int k1 = k0 + BLOCK_K < j->K ? k0 + BLOCK_K : j->K;
            for (int t = 0; t < j->T; t += TILE_T)
                j->tile(j->Y + (long)t * j->N + n, j->N, j->X + (long)t * j->K, j->K, j->W + n, j->N, k0, k1,
                        j->T - t < TILE_T ? j->T - t : TILE_T);
        }
    for (; n < n1; n++) /* a last partial tile: columns one by one */
        for (int t = 0; t < j->T; t++) {
            float s = 0.0f;
            for (int k = 0; k < j->K; k++)
                s += j->X[(long)t * j->K + k] * gm_bf16_to_f32(j->W[(long)k * j->N + n]);
            j->Y[(long)t * j->N + n] = s;
        }
    finish(j, n0, n1);
}

void gm_matmul(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias, int T, int K, int N,
               int round)
{
    mm_job j = {Y, X, W, bias, T, K, N, round, use_avx2() ? gm_tile_avx2 : tile_portable, NULL};
    gm_pool_run(p, (N + BAND - 1) / BAND, matmul_band, &j);
}

/* Task i: outputs [i * BAND, (i + 1) * BAND) of Y = X @ W^T. */
static void matmul_nt_band(void *ctx, int i)
{
    const mm_job *j = ctx;
    const int n0 = i * BAND, n1 = n0 + BAND < j->N ? n0 + BAND : j->N;
    for (int t = 0; t < j->T; t += TILE_T) {
        const int rows = j->T - t < TILE_T ? j->T - t : TILE_T;
        for (int n = n0; n < n1; n++)
            j->dot(j->Y + (long)t * j->N + n, j->N, j->X + (long)t * j->K, j->K, j->W + (long)n * j->K, j->K, rows);
    }
    finish(j, n0, n1);
}

void gm_matmul_nt(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, int T, int K, int N, int round)
{
    mm_job j = {Y, X, W, NULL, T, K, N, round, NULL, use_avx2() ? gm_dot_avx2 : dot_portable};
    gm_pool_run(p, (N + BAND - 1) / BAND, matmul_nt_band, &j);
}

void gm_matmul_reference(float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias, int T, int K, int N,
                         int round)
{
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += X[(long)t * K + k] * gm_bf16_to_f32(W[(long)k * N + n]);
            if (bias)
                s += gm_bf16_to_f32(bias[n]);
            Y[(long)t * N + n] = round ? gm_bf16_to_f32(gm_f32_to_bf16(s)) : s;
        }
}
