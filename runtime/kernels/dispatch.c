/*
** The kernels' dispatch: which tier runs (the widest the CPU has, from
** gm_cpu_features), and how a product is cut into tasks for the pool's
** threads. The arithmetic itself is in the tier files. See gm/kernels.h.
*/
#include "gm/kernels.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"

enum {
    BAND = GM_BAND,
    CHUNK = 4,    /* neighbouring bands per task, sharing each k-block of X while it is in cache */
    MR = 4,       /* rows of X per dot call (gm_tier.dot takes at most 4) */
    GEMV_MIN = 64 /* one-row parts are whole multiples of this many columns */
};

/*
** The tiers, widest first. Without a selection the first whose instructions
** the CPU has (gm_cpu_features) runs, or the one GM_ISA names; the software
** models of the wider tiers (model set) run only when a test selects them.
*/
static const gm_tier *const tables[] = {&gm_tier_amx,  &gm_tier_amx_model, &gm_tier_avx512, &gm_tier_avx512_model,
                                        &gm_tier_avx2, &gm_tier_portable};
enum { TIERS = sizeof tables / sizeof tables[0] };

/* The tables with every entry a table leaves NULL taken from its base, filled once before main. */
static gm_tier tiers_full[TIERS];
static const gm_tier *tiers[TIERS];

static void inherit(gm_tier *k, const gm_tier *from)
{
#define FROM_BASE(f) (k->f = k->f ? k->f : from->f)
    FROM_BASE(band), FROM_BASE(band_bf16), FROM_BASE(gemv), FROM_BASE(dot), FROM_BASE(dot_rows);
    FROM_BASE(finish), FROM_BASE(add_round), FROM_BASE(norm_scale), FROM_BASE(swiglu), FROM_BASE(transpose);
    FROM_BASE(attn_scores), FROM_BASE(attn_values);
    FROM_BASE(exp_sum);
#undef FROM_BASE
}

__attribute__((constructor)) static void fill_tiers(void)
{
    for (int i = 0; i < TIERS; i++) {
        tiers_full[i] = *tables[i];
        for (const gm_tier *b = tables[i]->base; b; b = b->base)
            inherit(&tiers_full[i], b);
        tiers[i] = &tiers_full[i];
    }
}

static _Atomic(const gm_tier *) selected; /* gm_kernels_select's choice; NULL: the chosen one */
static _Atomic(const gm_tier *) chosen;   /* GM_ISA's, or the widest this CPU runs: found once */

static int runs_here(const gm_tier *k) { return (gm_cpu_features() & k->needs) == k->needs; }

static const gm_tier *by_name(const char *name)
{
    for (size_t i = 0; i < TIERS; i++)
        if (!strcmp(tiers[i]->name, name))
            return tiers[i];
    return NULL;
}

/*
** The tier GM_ISA names, when this CPU runs it; without GM_ISA, the widest
** it runs (never a model). A GM_ISA that names no tier this CPU runs gives
** the portable one, so nothing runs what it was told not to;
** gm_kernels_check says why.
*/
static const gm_tier *choose(void)
{
    const char *isa = getenv("GM_ISA");
    if (isa && *isa) {
        const gm_tier *k = by_name(isa);
        return k && !k->model && runs_here(k) ? k : tiers[TIERS - 1];
    }
    for (size_t i = 0; i < TIERS; i++)
        if (!tiers[i]->model && runs_here(tiers[i]))
            return tiers[i];
    return tiers[TIERS - 1];
}

static const gm_tier *tier(void)
{
    const gm_tier *k = atomic_load_explicit(&selected, memory_order_relaxed);
    if (!k && !(k = atomic_load_explicit(&chosen, memory_order_relaxed))) {
        k = choose(); /* any thread may be first: every choice is the same */
        atomic_store_explicit(&chosen, k, memory_order_relaxed);
    }
    return k;
}

const gm_tier *gm_tier_current(void) { return tier(); }

const char *gm_kernels_name(void) { return tier()->name; }

int gm_kernels_select(const char *name)
{
    const gm_tier *k = name ? by_name(name) : NULL;
    if (name && (!k || !runs_here(k)))
        return -1;
    atomic_store_explicit(&selected, k, memory_order_relaxed);
    return 0;
}

/* s (of size n) += ", " name */
static void append(char *s, size_t n, const char *name)
{
    const size_t len = strlen(s);
    snprintf(s + len, n - len, "%s%s", len ? ", " : "", name);
}

int gm_kernels_check(gm_status *st)
{
    const char *isa = getenv("GM_ISA");
    if (!isa || !*isa)
        return 0;
    char names[96] = "", have[96] = "";
    for (size_t i = 0; i < TIERS; i++)
        if (!tiers[i]->model) {
            append(names, sizeof names, tiers[i]->name);
            if (runs_here(tiers[i]))
                append(have, sizeof have, tiers[i]->name);
        }
    const gm_tier *k = by_name(isa);
    if (!k || k->model)
        return gm_fail(st, GM_EUSAGE, "GM_ISA: expected one of %s; found \"%.40s\"", names, isa);
    if (!runs_here(k))
        return gm_fail(st, GM_EUSAGE, "GM_ISA=%s: this CPU has no %s tier (it has: %s); unset GM_ISA or choose one of those",
                       isa, isa, have);
    return 0;
}

const char *const *gm_kernels_tiers(void)
{
    static const char *names[TIERS + 1];
    for (size_t i = 0; i < TIERS; i++)
        names[i] = tiers[i]->name;
    return names;
}

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
    const gm_tier *k;
    const gm_bf16 *Xb; /* X in bf16, for the tier's band_bf16 (NULL: its band) */
    long ldxb;
} mm_job;

/* The bias and the one rounding of columns [n0, n1) of output o's T rows. */
static void finish(const gm_tier *k, const gm_out *o, int T, int round, int n0, int n1)
{
    for (int t = 0; t < T; t++)
        k->finish(o->Y + (long)t * o->N + n0, o->bias ? o->bias + n0 : NULL, n1 - n0, round);
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
    const gm_band b = {o->Y, j->X, o->W, o->N, j->K, o->N, j->T, j->K, c0, c1, j->Xb, j->ldxb};
    (j->Xb ? j->k->band_bf16 : j->k->band)(&b);
    finish(j->k, o, j->T, j->round, c0, c1);
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
            j->k->gemv(o->Y, j->X, o->W, o->N, j->K, n0, n1, n1 - n0 < o->N);
            finish(j->k, o, j->T, j->round, n0, n1);
        }
    }
}

/* X as bf16 for a band_bf16: rows t of T (padded to 16), K values each (padded to 32), and whether all are exact */
typedef struct bf16_job {
    gm_bf16 *Xb;
    const float *X;
    int T, K;
    long ld;
    atomic_int inexact;
} bf16_job;

static void to_bf16_row(void *ctx, int t)
{
    bf16_job *j = ctx;
    gm_bf16 *d = j->Xb + (long)t * j->ld;
    int inexact = 0;
    for (int k = 0; t < j->T && k < j->K; k++) {
        const float x = j->X[(long)t * j->K + k];
        uint32_t u;
        memcpy(&u, &x, 4);
        d[k] = (gm_bf16)(u >> 16);
        inexact |= (u & 0xFFFF) != 0;
    }
    for (long k = t < j->T ? j->K : 0; k < j->ld; k++)
        d[k] = 0;
    if (inexact)
        atomic_store_explicit(&j->inexact, 1, memory_order_relaxed);
}

/* X in bf16, on the pool's threads, when every value is a bf16 value (the runner's bf16 mode); else NULL */
static gm_bf16 *to_bf16(gm_pool *p, const float *X, int T, int K, long *ld)
{
    const int rows = (T + 15) / 16 * 16;
    *ld = (K + 31) / 32 * 32;
    bf16_job j = {aligned_alloc(64, ((size_t)rows * *ld * 2 + 63) / 64 * 64), X, T, K, *ld, 0};
    if (!j.Xb)
        return NULL; /* no memory for the copy: the f32 band, the same products */
    gm_pool_run(p, rows, to_bf16_row, &j);
    if (atomic_load_explicit(&j.inexact, memory_order_relaxed)) {
        free(j.Xb);
        return NULL;
    }
    return j.Xb;
}

void gm_matmul_outs(gm_pool *p, const float *X, int T, int K, const gm_out *outs, int n_outs, int round)
{
    if (n_outs > GM_MAX_OUTS) {
        gm_matmul_outs(p, X, T, K, outs, GM_MAX_OUTS, round);
        gm_matmul_outs(p, X, T, K, outs + GM_MAX_OUTS, n_outs - GM_MAX_OUTS, round);
        return;
    }
    mm_job j = {.X = X, .T = T, .K = K, .round = round, .n_outs = n_outs, .outs = outs, .k = tier()};
    for (int i = 0; i < n_outs; i++)
        j.first[i + 1] = j.first[i] + (outs[i].N + CHUNK * BAND - 1) / (CHUNK * BAND);
    if (T > 1) {
        gm_bf16 *xb = j.k->band_bf16 ? to_bf16(p, X, T, K, &j.ldxb) : NULL;
        j.Xb = xb;
        gm_pool_run(p, j.first[n_outs], matmul_chunk, &j);
        free(xb);
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
    const gm_tier *k;
    int band; /* rows of W per task */
} nt_job;

static void matmul_nt_band(void *ctx, int i)
{
    const nt_job *j = ctx;
    const gm_out o = {j->Y, j->W, NULL, j->N};
    const int n0 = i * j->band, n1 = n0 + j->band < j->N ? n0 + j->band : j->N;
    if (n0 >= n1)
        return;
    if (j->T == 1 && j->k->dot_rows) { /* the LM head in decode and lite prefill */
        j->k->dot_rows(j->Y, j->X, j->W, j->K, n0, n1);
        finish(j->k, &o, j->T, j->round, n0, n1);
        return;
    }
    for (int t = 0; t < j->T; t += MR) {
        const int rows = j->T - t < MR ? j->T - t : MR;
        for (int n = n0; n < n1; n++)
            j->k->dot(j->Y + (long)t * j->N + n, j->N, j->X + (long)t * j->K, j->K, j->W + (long)n * j->K, j->K, rows);
    }
    finish(j->k, &o, j->T, j->round, n0, n1);
}

void gm_matmul_nt(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, int T, int K, int N, int round)
{
    /* one row of X is memory-bound: one contiguous run of W's rows per thread */
    const int band = T > 1 ? BAND : per_thread(N, gm_pool_threads(p));
    nt_job j = {Y, X, W, T, K, N, round, tier(), band};
    gm_pool_run(p, (N + band - 1) / band, matmul_nt_band, &j);
}

void gm_add_round(float *x, const float *y, int n, int round) { tier()->add_round(x, y, n, round); }

void gm_norm_scale(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round)
{
    tier()->norm_scale(y, x, w, inv, n, round);
}

void gm_swiglu(float *g, const float *u, int n, int round) { tier()->swiglu(g, u, n, round); }

/* ---------------------------------------------------------------------- */
/* load time */

static size_t src_size(gm_src_type type) { return type == GM_SRC_F32 ? 4 : 2; }

void gm_convert_rows(gm_bf16 *dst, const void *src, gm_src_type type, size_t rows, size_t cols, size_t r0, size_t r1,
                     int transpose)
{
    /* rows per block: bf16 is transposed in place, other types are converted into a buffer first */
    const size_t block = type == GM_SRC_BF16 ? 256 : 32, es = src_size(type);
    if (!transpose) {
        gm_convert_portable(dst + r0 * cols, src, (r1 - r0) * cols, type);
        return;
    }
    const gm_tier *k = tier();
    gm_bf16 *tmp = type == GM_SRC_BF16 ? NULL : malloc(block * cols * 2);
    if (type != GM_SRC_BF16 && !tmp) { /* no memory for a block: one value at a time, the same result */
        for (size_t r = r0; r < r1; r++)
            for (size_t c = 0; c < cols; c++)
                gm_convert_portable(dst + c * rows + r, (const uint8_t *)src + ((r - r0) * cols + c) * es, 1, type);
        return;
    }
    for (size_t r = r0; r < r1; r += block) {
        const size_t n = r1 - r < block ? r1 - r : block;
        const uint8_t *s = (const uint8_t *)src + (r - r0) * cols * es;
        const gm_bf16 *blk = (const gm_bf16 *)(const void *)s;
        if (tmp) {
            gm_convert_portable(tmp, s, n * cols, type);
            blk = tmp;
        }
        k->transpose(dst, blk, n, rows, cols, r);
    }
    free(tmp);
}
