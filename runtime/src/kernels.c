/* Matrix kernels: cache blocking, threads and the choice of instruction set. See gm/kernels.h. */
#include "gm/kernels.h"

#include <stddef.h>
#include <string.h>

#include "kernels_impl.h"

enum {
    NR = 24,       /* panel width: the register tile's columns */
    MR = 4,        /* register tile rows */
    KB = 256,      /* k-block: a packed panel (KB x NR floats, 24 KB) stays in L1 */
    BAND = 192,    /* output columns per task (eight panels); the task's packed block (192 KB) stays in L2 */
    GEMV_MIN = 64  /* gemv bands are whole multiples of this many columns */
};

/* ---------------------------------------------------------------------- */
/* portable pieces, the same shapes as the AVX2 ones */

static void pack_portable(float *dst, const gm_bf16 *W, long ldw, int k0, int k1, int n0, int ncols, int nr)
{
    const int kb = k1 - k0;
    for (int k = k0; k < k1; k++) {
        float *panel = dst;
        for (int n = 0; n < ncols; n += nr) {
            const int width = ncols - n < nr ? ncols - n : nr;
            float *d = panel + (long)(k - k0) * width;
            for (int j = 0; j < width; j++)
                d[j] = gm_bf16_to_f32(W[(long)k * ldw + n0 + n + j]);
            panel += (long)kb * width;
        }
    }
}

static void micro_portable(float *Y, long ldy, const float *X, long ldx, const float *P, int kb, int nr, int rows)
{
    for (int r = 0; r < rows; r++) {
        float acc[NR];
        memcpy(acc, Y + r * ldy, sizeof(float) * (size_t)nr);
        for (int k = 0; k < kb; k++) {
            const float x = X[r * ldx + k];
            for (int j = 0; j < nr; j++)
                acc[j] += x * P[(long)k * nr + j];
        }
        memcpy(Y + r * ldy, acc, sizeof(float) * (size_t)nr);
    }
}

static void gemv_portable(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1)
{
    for (int n = n0; n < n1; n++)
        y[n] = 0.0f;
    for (int k = 0; k < K; k++) /* rows of W in order: one pass over memory */
        for (int n = n0; n < n1; n++)
            y[n] += x[k] * gm_bf16_to_f32(W[(long)k * ldw + n]);
}

static void dot_portable(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows)
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
    gm_pack_fn pack;
    gm_micro_fn micro;
    gm_gemv_fn gemv;
    gm_dot_fn dot;
    int band; /* gemv: columns per thread */
} mm_job;

/* The bias and the one rounding of every output of columns [n0, n1). */
static void finish(const mm_job *j, int n0, int n1)
{
    if (use_avx2()) {
        for (int t = 0; t < j->T; t++)
            gm_finish_avx2(j->Y + (long)t * j->N + n0, j->bias ? j->bias + n0 : NULL, n1 - n0, j->round);
        return;
    }
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

/*
** Task i: output columns [i * BAND, (i + 1) * BAND). For each k-block, the
** band of W is widened once into packed f32 panels, which every block of
** MR rows of X then passes over: each weight is converted once and used T
** times from cache.
*/
static void matmul_band(void *ctx, int i)
{
    const mm_job *j = ctx;
    const int n0 = i * BAND, n1 = n0 + BAND < j->N ? n0 + BAND : j->N;
    float packed[KB * BAND] __attribute__((aligned(32)));
    for (int t = 0; t < j->T; t++)
        memset(j->Y + (long)t * j->N + n0, 0, sizeof(float) * (size_t)(n1 - n0));
    const int vec_end = n0 + (n1 - n0) / 8 * 8; /* panels cover whole groups of 8 columns */
    for (int k0 = 0; k0 < j->K; k0 += KB) {
        const int k1 = k0 + KB < j->K ? k0 + KB : j->K, kb = k1 - k0;
        j->pack(packed, j->W, j->N, k0, k1, n0, vec_end - n0, NR);
        float *p;
        /*
        ** Each block of MR rows of X stays in L1 while it passes over the
        ** band's panels. Meanwhile the next k-block's rows of W are fetched
        ** into the cache a few at a time, so the next pack does not wait
        ** for memory.
        */
        const int next_end = k1 + KB < j->K ? k1 + KB : j->K;
        const int calls = ((j->T + MR - 1) / MR) * ((vec_end - n0 + NR - 1) / NR);
        const int per_call = calls > 0 ? (next_end - k1 + calls - 1) / calls : 0;
        int ahead = k1;
        for (int t = 0; t < j->T; t += MR) {
            p = packed;
            for (int n = n0; n < vec_end; n += NR) {
                const int nr = vec_end - n < NR ? vec_end - n : NR;
                for (int r = 0; r < per_call && ahead < next_end; r++, ahead++)
                    for (int b = 0; b < (n1 - n0) * 2; b += 64)
                        __builtin_prefetch((const char *)(j->W + (long)ahead * j->N + n0) + b, 0, 2);
                j->micro(j->Y + (long)t * j->N + n, j->N, j->X + (long)t * j->K + k0, j->K, p, kb, nr,
                         j->T - t < MR ? j->T - t : MR);
                p += (long)kb * nr;
            }
        }
    }
    for (int n = vec_end; n < n1; n++) /* the last columns, fewer than 8 */
        for (int t = 0; t < j->T; t++) {
            float s = 0.0f;
            for (int k = 0; k < j->K; k++)
                s += j->X[(long)t * j->K + k] * gm_bf16_to_f32(j->W[(long)k * j->N + n]);
            j->Y[(long)t * j->N + n] = s;
        }
    finish(j, n0, n1);
}

/*
** One row of X: memory-bound, so W is streamed once with no packing, each
** thread taking one wide band of columns so that it reads long runs of
** every row.
*/
static void gemv_band(void *ctx, int i)
{
    const mm_job *j = ctx;
    const int n0 = i * j->band, n1 = n0 + j->band < j->N ? n0 + j->band : j->N;
    if (n0 >= n1)
        return;
    j->gemv(j->Y, j->X, j->W, j->N, j->K, n0, n1);
    finish(j, n0, n1);
}

void gm_matmul(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias, int T, int K, int N,
               int round)
{
    const int avx2 = use_avx2();
    mm_job j = {Y, X, W, bias, T, K, N, round, avx2 ? gm_pack_avx2 : pack_portable,
                avx2 ? gm_micro_avx2 : micro_portable, avx2 ? gm_gemv_avx2 : gemv_portable, NULL, 0};
    if (T == 1) {
        const int threads = gm_pool_threads(p);
        j.band = ((N + threads - 1) / threads + GEMV_MIN - 1) / GEMV_MIN * GEMV_MIN;
        gm_pool_run(p, threads, gemv_band, &j);
    }
    else
        gm_pool_run(p, (N + BAND - 1) / BAND, matmul_band, &j);
}

/* Task i: outputs [i * BAND, (i + 1) * BAND) of Y = X @ W^T. */
static void matmul_nt_band(void *ctx, int i)
{
    const mm_job *j = ctx;
    const int n0 = i * BAND, n1 = n0 + BAND < j->N ? n0 + BAND : j->N;
    if (j->T == 1 && j->dot == gm_dot_avx2) { /* the LM head in decode and lite prefill */
        gm_dot_rows_avx2(j->Y, j->X, j->W, j->K, n0, n1);
        finish(j, n0, n1);
        return;
    }
    for (int t = 0; t < j->T; t += MR) {
        const int rows = j->T - t < MR ? j->T - t : MR;
        for (int n = n0; n < n1; n++)
            j->dot(j->Y + (long)t * j->N + n, j->N, j->X + (long)t * j->K, j->K, j->W + (long)n * j->K, j->K, rows);
    }
    finish(j, n0, n1);
}

void gm_matmul_nt(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, int T, int K, int N, int round)
{
    mm_job j = {Y, X, W, NULL, T, K, N, round, NULL, NULL, NULL, use_avx2() ? gm_dot_avx2 : dot_portable, 0};
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
