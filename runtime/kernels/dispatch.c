/* Matrix kernels: cache blocking, threads and the choice of instruction set. See gm/kernels.h. */
#include "gm/kernels.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels_impl.h"

enum {
    BAND = GM_BAND,
    CHUNK = 4,    /* neighbouring bands per task, sharing each k-block of X while it is in cache */
    NR = 24,      /* portable: packed panel width and register tile columns */
    MR = 4,       /* portable: register tile rows */
    GEMV_MIN = 64 /* one-row parts are whole multiples of this many columns */
};

/* ---------------------------------------------------------------------- */
/* the portable kernels */

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

/*
** The portable band (any width): for each k-block and each BAND of
** columns, W is widened once into packed f32 panels, which every block of
** MR rows of X then passes over.
*/
static void band_portable(const gm_band *b)
{
    float packed[KB * BAND];
    const int vec_end = b->n0 + (b->n1 - b->n0) / 8 * 8;
    for (int t = 0; t < b->T; t++)
        memset(b->Y + (long)t * b->ldy + b->n0, 0, sizeof(float) * (size_t)(b->n1 - b->n0));
    for (int k0 = 0; k0 < b->K; k0 += KB) {
        const int k1 = k0 + KB < b->K ? k0 + KB : b->K, kb = k1 - k0;
        for (int s0 = b->n0; s0 < vec_end; s0 += BAND) {
            const int s1 = s0 + BAND < vec_end ? s0 + BAND : vec_end;
            pack_portable(packed, b->W, b->ldw, k0, k1, s0, s1 - s0, NR);
            for (int t = 0; t < b->T; t += MR) {
                const float *p = packed;
                for (int n = s0; n < s1; n += NR) {
                    const int nr = s1 - n < NR ? s1 - n : NR;
                    micro_portable(b->Y + (long)t * b->ldy + n, b->ldy, b->X + (long)t * b->ldx + k0, b->ldx, p, kb,
                                   nr, b->T - t < MR ? b->T - t : MR);
                    p += (long)kb * nr;
                }
            }
        }
    }
    for (int t = 0; t < b->T; t++) /* the last columns, fewer than 8 */
        for (int n = vec_end; n < b->n1; n++) {
            float s = 0.0f;
            for (int k = 0; k < b->K; k++)
                s += b->X[(long)t * b->ldx + k] * gm_bf16_to_f32(b->W[(long)k * b->ldw + n]);
            b->Y[(long)t * b->ldy + n] = s;
        }
}

static void gemv_portable(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1,
                          int fetch_ahead)
{
    (void)fetch_ahead;
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

/* One row of X is memory-bound: n columns or rows split into one run per thread, whole multiples of GEMV_MIN. */
static int per_thread(int n, int threads)
{
    return ((n + threads - 1) / threads + GEMV_MIN - 1) / GEMV_MIN * GEMV_MIN;
}

/* ---------------------------------------------------------------------- */

/*
** One call: X against one or more weights. Task t of a blocked run is chunk
** t - first[i] of output i (first[] counts the chunks before each output);
** task t of a one-row run is thread t's work (gemv_part).
*/
typedef struct mm_job {
    const float *X;
    int T, K, round, n_outs;
    const gm_out *outs;
    int first[GM_MAX_OUTS + 1];
    int threads, whole_from; /* one row: outputs [whole_from, n_outs) are read whole, one thread each */
    void (*band)(const gm_band *);
    gm_gemv_fn gemv;
} mm_job;

/* The bias and the one rounding of columns [n0, n1) of output o's T rows. */
static void finish(const gm_out *o, int T, int round, int n0, int n1)
{
    for (int t = 0; t < T; t++) {
        float *y = o->Y + (long)t * o->N + n0;
        const gm_bf16 *b = o->bias ? o->bias + n0 : NULL;
        if (use_avx2()) {
            gm_finish_avx2(y, b, n1 - n0, round);
            continue;
        }
        for (int n = 0; n < n1 - n0; n++)
            y[n] = round1(b ? y[n] + gm_bf16_to_f32(b[n]) : y[n], round);
    }
}

/*
** Task i: chunk i - first[o] of output o, up to CHUNK neighbouring bands of
** BAND columns, multiplied a k-block at a time.
*/
static void matmul_chunk(void *ctx, int i)
{
    const mm_job *j = ctx;
    int oi = 0;
    while (i >= j->first[oi + 1])
        oi++;
    const gm_out *o = &j->outs[oi];
    const int c0 = (i - j->first[oi]) * CHUNK * BAND, c1 = c0 + CHUNK * BAND < o->N ? c0 + CHUNK * BAND : o->N;
    const gm_band b = {o->Y, j->X, o->W, o->N, j->K, o->N, j->T, j->K, c0, c1};
    j->band(&b);
    finish(o, j->T, j->round, c0, c1);
}

/*
** One row of X: memory-bound, so W is streamed once with no packing. The
** outputs read whole go one to a thread, each front to back, a long run of
** memory the hardware prefetcher streams by itself (gate and up on two
** threads, k and v). The others are split by columns, each thread taking
** its share of every row, a run too short for the prefetcher, so the kernel
** fetches it ahead (q, o, down). Splitting a matrix by rows instead would
** change the order of each sum.
*/
static void gemv_part(void *ctx, int t)
{
    const mm_job *j = ctx;
    for (int oi = 0; oi < j->n_outs; oi++) {
        const gm_out *o = &j->outs[oi];
        int n0 = 0, n1 = o->N;
        if (oi < j->whole_from) { /* this thread's share of the columns */
            const int part = per_thread(o->N, j->threads);
            n0 = t * part, n1 = n0 + part < o->N ? n0 + part : o->N;
        } else if ((oi - j->whole_from) % j->threads != t) {
            continue;
        }
        if (n0 < n1) {
            j->gemv(o->Y, j->X, o->W, o->N, j->K, n0, n1, n1 - n0 < o->N);
            finish(o, j->T, j->round, n0, n1);
        }
    }
}

void gm_matmul_outs(gm_pool *p, const float *X, int T, int K, const gm_out *outs, int n_outs, int round)
{
    if (n_outs > GM_MAX_OUTS) {
        gm_matmul_outs(p, X, T, K, outs, GM_MAX_OUTS, round);
        gm_matmul_outs(p, X, T, K, outs + GM_MAX_OUTS, n_outs - GM_MAX_OUTS, round);
        return;
    }
    const int avx2 = use_avx2();
    mm_job j = {.X = X, .T = T, .K = K, .round = round, .n_outs = n_outs, .outs = outs,
                .band = avx2 ? gm_band_avx2 : band_portable, .gemv = avx2 ? gm_gemv_avx2 : gemv_portable};
    for (int i = 0; i < n_outs; i++)
        j.first[i + 1] = j.first[i] + (outs[i].N + CHUNK * BAND - 1) / (CHUNK * BAND);
    if (T > 1) {
        gm_pool_run(p, j.first[n_outs], matmul_chunk, &j);
        return;
    }
    /* the longest tail of equal outputs that the threads share evenly goes whole: k and v, gate and up */
    j.threads = gm_pool_threads(p);
    j.whole_from = j.threads == 1 ? 0 : n_outs;
    for (int i = n_outs - 1; j.threads > 1 && i >= 0 && outs[i].N == outs[n_outs - 1].N; i--)
        if ((n_outs - i) % j.threads == 0)
            j.whole_from = i;
    gm_pool_run(p, j.threads, gemv_part, &j);
}

void gm_matmul(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias, int T, int K, int N,
               int round)
{
    const gm_out o = {Y, W, bias, N};
    gm_matmul_outs(p, X, T, K, &o, 1, round);
}

/* Y = X @ W^T, one band of BAND outputs per task. */
typedef struct nt_job {
    float *Y;
    const float *X;
    const gm_bf16 *W;
    int T, K, N, round;
    gm_dot_fn dot;
    int band; /* rows of W per task */
} nt_job;

static void matmul_nt_band(void *ctx, int i)
{
    const nt_job *j = ctx;
    const gm_out o = {j->Y, j->W, NULL, j->N};
    const int n0 = i * j->band, n1 = n0 + j->band < j->N ? n0 + j->band : j->N;
    if (n0 >= n1)
        return;
    if (j->T == 1 && j->dot == gm_dot_avx2) { /* the LM head in decode and lite prefill */
        gm_dot_rows_avx2(j->Y, j->X, j->W, j->K, n0, n1);
        finish(&o, j->T, j->round, n0, n1);
        return;
    }
    for (int t = 0; t < j->T; t += MR) {
        const int rows = j->T - t < MR ? j->T - t : MR;
        for (int n = n0; n < n1; n++)
            j->dot(j->Y + (long)t * j->N + n, j->N, j->X + (long)t * j->K, j->K, j->W + (long)n * j->K, j->K, rows);
    }
    finish(&o, j->T, j->round, n0, n1);
}

void gm_matmul_nt(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, int T, int K, int N, int round)
{
    /* one row of X is memory-bound: one contiguous run of W's rows per thread */
    const int band = T > 1 ? BAND : per_thread(N, gm_pool_threads(p));
    nt_job j = {Y, X, W, T, K, N, round, use_avx2() ? gm_dot_avx2 : dot_portable, band};
    gm_pool_run(p, (N + band - 1) / band, matmul_nt_band, &j);
}

void gm_add_round(float *x, const float *y, int n, int round)
{
    if (use_avx2()) {
        gm_add_round_avx2(x, y, n, round);
        return;
    }
    for (int i = 0; i < n; i++)
        x[i] = round1(x[i] + y[i], round);
}

void gm_norm_scale(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round)
{
    if (use_avx2()) {
        gm_norm_scale_avx2(y, x, w, inv, n, round);
        return;
    }
    for (int i = 0; i < n; i++)
        y[i] = round1(gm_bf16_to_f32(w[i]) * round1(x[i] * inv, round), round);
}

void gm_swiglu(float *g, const float *u, int n, int round)
{
    if (use_avx2()) {
        gm_swiglu_avx2(g, u, n, round);
        return;
    }
    for (int i = 0; i < n; i++)
        g[i] = round1(round1(g[i] / (1.0f + expf(-g[i])), round) * u[i], round);
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
            Y[(long)t * N + n] = round1(s, round);
        }
}
