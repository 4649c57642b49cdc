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
#include <time.h>

#include "gm/cpu.h"
#include "kernels_impl.h"

enum {
    BAND = GM_BAND,
    CHUNK = 4,    /* neighbouring bands per task on one thread, sharing each k-block of X while it is in cache */
    TASKS_EACH = 8, /* on more threads, tasks of an output for each thread (chunk_bands) */
    MR = 4,       /* rows of X per dot call (gm_tier.dot takes at most 4) */
    GEMV_MIN = 64 /* one-row parts are whole multiples of this many columns */
};

/*
** The tiers, widest first. Without a selection the first whose instructions
** the CPU has (gm_cpu_features) runs, or the one GM_ISA names; the software
** models of the wider tiers (model set) run only when a test selects them.
*/
static const gm_tier *const tables[] = {
    &gm_tier_amx,    &gm_tier_amx_model,    &gm_tier_avx512bf16, &gm_tier_avx512bf16_model,
    &gm_tier_avx512, &gm_tier_avx512_model,
#ifdef GM_HAVE_SIMDE
    &gm_tier_amx_simde, &gm_tier_avx512bf16_simde, &gm_tier_avx512_simde,
#endif
    &gm_tier_avx2,   &gm_tier_portable};
enum { TIERS = sizeof tables / sizeof tables[0] };

/* The tables with every entry a table leaves NULL taken from its base, filled once before main; their traits. */
static gm_tier tiers_full[TIERS];
static const gm_tier *tiers[TIERS];
static gm_tier_info infos[TIERS];

static void inherit(gm_tier *k, const gm_tier *from)
{
#define FROM_BASE(f) (k->f = k->f ? k->f : from->f)
    FROM_BASE(band), FROM_BASE(panel_unit), FROM_BASE(gemv), FROM_BASE(gemv_panels);
    FROM_BASE(dot), FROM_BASE(dot_rows);
    FROM_BASE(nk_packed), FROM_BASE(nk_pack), FROM_BASE(nk_block);
    FROM_BASE(finish), FROM_BASE(add_round), FROM_BASE(norm_scale), FROM_BASE(swiglu), FROM_BASE(rope);
    FROM_BASE(transpose);
    FROM_BASE(panels), FROM_BASE(convert), FROM_BASE(dequant4_row), FROM_BASE(dequant4_block);
    FROM_BASE(attn_scores), FROM_BASE(attn_values);
    FROM_BASE(exp_sum), FROM_BASE(scale_max), FROM_BASE(div_round);
#undef FROM_BASE
}

__attribute__((constructor)) static void fill_tiers(void)
{
    for (int i = 0; i < TIERS; i++) {
        tiers_full[i] = *tables[i];
        for (const gm_tier *b = tables[i]->base; b; b = b->base)
            inherit(&tiers_full[i], b);
        tiers[i] = &tiers_full[i];
        const gm_tier *k = tables[i];
        infos[i] = (gm_tier_info){k->name, k->stands_for ? k->stands_for : k->name, k->model, k->wform, k->nk_sums,
                                  k->lanes};
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

const gm_tier *gm_tier_filled(const gm_tier *table)
{
    for (size_t i = 0; i < TIERS; i++)
        if (tables[i] == table)
            return tiers[i];
    return table;
}

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

const gm_tier_info *gm_kernels_info(const char *name)
{
    const gm_tier *k = name ? by_name(name) : tier();
    return k ? &infos[k - tiers_full] : NULL;
}

gm_wform gm_kernels_wform(void) { return tier()->wform; }

/* One row of X is memory-bound: n columns or rows split into one run per thread, whole multiples of GEMV_MIN. */
static int per_thread(int n, int threads)
{
    return ((n + threads - 1) / threads + GEMV_MIN - 1) / GEMV_MIN * GEMV_MIN;
}

/* ---------------------------------------------------------------------- */
/* the epilogues */

void gm_ep_rows(const gm_tier *k, const gm_out *o, const gm_out *o2, gm_epilogue ep, int round, int t0, int t1,
                int n0, int n1)
{
    const int n = n1 - n0;
    for (int t = t0; t < t1 && n > 0; t++) {
        float *y = o->Y + (long)t * o->N + n0;
        k->finish(y, o->bias ? o->bias + n0 : NULL, n, round);
        if (ep == GM_EP_ADD) {
            k->add_round(o->R + (long)t * o->N + n0, y, n, round);
        } else if (ep == GM_EP_SWIGLU) {
            float *u = o2->Y + (long)t * o2->N + n0;
            k->finish(u, o2->bias ? o2->bias + n0 : NULL, n, round);
            k->swiglu(y, u, n, round);
        }
    }
}

/* ---------------------------------------------------------------------- */

/*
** One call: X against one or more weights, in units: an output, or for
** GM_EP_SWIGLU a pair (gate, up) whose columns are done together. Task t of
** a blocked run is part t - first[u] of unit u (first[] counts the parts
** before each unit); task t of a one-row run ((in, out) or panels) is
** thread t's work (gemv_part).
*/
typedef struct mm_job {
    const float *X;
    int T, K, round, n_units, step; /* step: outputs a unit (2 for SwiGLU pairs) */
    int P;                          /* W in panels of P columns; 0: (in, out) row-major or (out, in) */
    const gm_out *outs;
    gm_epilogue ep;
    int first[GM_MAX_OUTS + 1], rows[GM_MAX_OUTS]; /* a unit's parts, and the outputs (columns or rows) of each */
    int threads, whole_from; /* one row: outputs [whole_from, n_outs) are read whole, one thread each */
    const gm_tier *k;
    const void *Xp; /* X as the tier's nk_pack left it, for its nk_block */
} mm_job;

/* The unit and the range [*n0, *n1) of its outputs that task i covers. */
static int unit_part(const mm_job *j, int i, int *n0, int *n1)
{
    int u = 0;
    while (i >= j->first[u + 1])
        u++;
    const int N = j->outs[u * j->step].N;
    *n0 = (i - j->first[u]) * j->rows[u];
    *n1 = *n0 + j->rows[u] < N ? *n0 + j->rows[u] : N;
    return u;
}

/* Unit u split into parts of `rows` outputs: the task counts in first[] */
static void set_parts(mm_job *j, int u, int rows)
{
    const int N = j->outs[u * j->step].N;
    j->rows[u] = rows > 0 ? rows : 1;
    j->first[u + 1] = j->first[u] + (N + j->rows[u] - 1) / j->rows[u];
}

/*
** Task i ((in, out) or panels, T > 1): up to CHUNK neighbouring bands of
** BAND columns of a unit (whole panels: BAND is a multiple of 32),
** multiplied a k-block at a time.
*/
static void matmul_chunk(void *ctx, int i)
{
    const mm_job *j = ctx;
    int c0, c1;
    const int u = unit_part(j, i, &c0, &c1);
    const gm_out *o = &j->outs[u * j->step], *o2 = j->step == 2 ? o + 1 : NULL;
    for (const gm_out *w = o; w; w = w == o ? o2 : NULL) {
        const gm_band b = {w->Y, j->X, w->W, w->N, j->K, w->N, j->T, j->K, c0, c1, j->P};
        j->k->band(&b);
    }
    gm_ep_rows(j->k, o, o2, j->ep, j->round, 0, j->T, c0, c1);
}

/*
** One row of X ((in, out) or panels): memory-bound, so W is streamed once
** with no packing. The outputs read whole go one to a thread, each front to
** back, a long run of memory the hardware prefetcher streams by itself
** (gate and up on two threads, k and v). The others are split by columns
** (q, o, down; splitting a matrix by rows instead would change the order of
** each sum): in panels each thread's share is whole panels, again one run
** of memory; in (in, out) it is a share of every row, a run too short for
** the prefetcher, so the kernel fetches it ahead. A SwiGLU pair is finished
** afterwards (swiglu_part), its two outputs being on two threads.
*/
static void gemv_part(void *ctx, int t)
{
    const mm_job *j = ctx;
    const int n_outs = j->n_units * j->step;
    for (int oi = 0; oi < n_outs; oi++) {
        const gm_out *o = &j->outs[oi];
        int n0 = 0, n1 = o->N;
        if (oi < j->whole_from) { /* this thread's share of the columns */
            const int part = per_thread(o->N, j->threads);
            n0 = t * part, n1 = n0 + part < o->N ? n0 + part : o->N;
        } else if ((oi - j->whole_from) % j->threads != t) {
            continue;
        }
        if (n0 < n1) {
            if (j->P)
                j->k->gemv_panels(o->Y, j->X, o->W, j->K, o->N, j->P, n0, n1);
            else
                j->k->gemv(o->Y, j->X, o->W, o->N, j->K, n0, n1, n1 - n0 < o->N);
            if (j->ep != GM_EP_SWIGLU)
                gm_ep_rows(j->k, o, NULL, j->ep, j->round, 0, 1, n0, n1);
        }
    }
}

static void swiglu_part(void *ctx, int i)
{
    const mm_job *j = ctx;
    int n0, n1;
    const int u = unit_part(j, i, &n0, &n1);
    gm_ep_rows(j->k, &j->outs[2 * u], &j->outs[2 * u + 1], GM_EP_SWIGLU, j->round, 0, 1, n0, n1);
}

/*
** The bands a task takes (T > 1): CHUNK on one thread; on more, few enough
** that every output is at least TASKS_EACH tasks for each thread, so that a
** thread the machine's neighbours slow hands its share to the others, and
** at least one: o and down, eight bands, were one task a thread. On a Zen 3
** with two threads (bench/HISTORY.md), 28 layers' projections at 32 rows
** took 0.93x the time they took in tasks of CHUNK bands (medians of 30
** runs each, in turns), at 512 rows no longer.
*/
static int chunk_bands(int N, int threads)
{
    if (threads == 1)
        return CHUNK;
    const int c = (N + BAND - 1) / BAND / (TASKS_EACH * threads);
    return c < 1 ? 1 : c > CHUNK ? CHUNK : c;
}

/*
** W (in, out), row-major or in panels. A tier whose register tiles are
** wider than the panels (AVX-512's 32 columns on panels of 16) hands the
** product to the portable tier, which reads panels of any width.
*/
static void matmul_kn(gm_pool *p, mm_job *j)
{
    const int n_outs = j->n_units * j->step;
    j->P = gm_wform_panel(j->outs[0].form);
    if (j->P % j->k->panel_unit)
        j->k = tiers[TIERS - 1];
    if (j->T > 1) {
        for (int u = 0; u < j->n_units; u++)
            set_parts(j, u, chunk_bands(j->outs[u * j->step].N, gm_pool_threads(p)) * BAND);
        gm_pool_run(p, j->first[j->n_units], matmul_chunk, j);
        return;
    }
    /* the longest tail of equal outputs that the threads share evenly goes whole: k and v, gate and up (per_thread's
       shares of the others are whole multiples of GEMV_MIN columns, so of whole panels too) */
    j->threads = gm_pool_threads(p);
    j->whole_from = j->threads == 1 ? 0 : n_outs;
    for (int i = n_outs - 1; j->threads > 1 && i >= 0 && j->outs[i].N == j->outs[n_outs - 1].N; i--)
        if ((n_outs - i) % j->threads == 0)
            j->whole_from = i;
    gm_pool_run(p, j->threads, gemv_part, j);
    if (j->ep == GM_EP_SWIGLU) {
        for (int u = 0; u < j->n_units; u++)
            set_parts(j, u, per_thread(j->outs[2 * u].N, j->threads));
        gm_pool_run(p, j->first[j->n_units], swiglu_part, j);
    }
}

/* ---------------------------------------------------------------------- */
/* W (out, in): the rows of W are the outputs */

/* Task i on tiles: a block of a unit's rows against every row of the packed X. */
static void nk_tiles(void *ctx, int i)
{
    const mm_job *j = ctx;
    int n0, n1;
    const int u = unit_part(j, i, &n0, &n1);
    const gm_out *o = &j->outs[u * j->step];
    const gm_nk_block b = {j->k, o, j->step == 2 ? o + 1 : NULL, j->Xp, j->T, j->K, n0, n1, j->ep, j->round};
    j->k->nk_block(&b);
}

/*
** Task i as dot products (X not in bf16, or a tier without tiles): each row
** of W against the rows of X, MR at a time; one row of X against many rows
** of W with the tier's dot_rows.
*/
static void nk_dots(void *ctx, int i)
{
    const mm_job *j = ctx;
    int n0, n1;
    const int u = unit_part(j, i, &n0, &n1);
    const gm_out *o = &j->outs[u * j->step], *o2 = j->step == 2 ? o + 1 : NULL;
    for (const gm_out *w = o; w; w = w == o ? o2 : NULL) {
        if (j->T == 1 && j->k->dot_rows) {
            j->k->dot_rows(w->Y, j->X, w->W, j->K, n0, n1);
            continue;
        }
        for (int t = 0; t < j->T; t += MR) {
            const int rows = j->T - t < MR ? j->T - t : MR;
            for (int n = n0; n < n1; n++)
                j->k->dot(w->Y + (long)t * w->N + n, w->N, j->X + (long)t * j->K, j->K, w->W + (long)n * j->K, j->K,
                          rows);
        }
    }
    gm_ep_rows(j->k, o, o2, j->ep, j->round, 0, j->T, n0, n1);
}

typedef struct pack_job {
    const mm_job *j;
    void *Xp;
    atomic_int inexact;
} pack_job;

/* Task i: token block i of X into the tier's packed form */
static void nk_pack_block(void *ctx, int i)
{
    pack_job *pj = ctx;
    const mm_job *j = pj->j;
    if (j->k->nk_pack(pj->Xp, j->X, j->T, j->K, 16 * i, 16 * i + 16 < j->T ? 16 * i + 16 : j->T))
        atomic_store_explicit(&pj->inexact, 1, memory_order_relaxed);
}

/*
** The rows of W a block takes. One or a few rows of X are memory-bound:
** each thread streams one contiguous run of every matrix (rows of W lie one
** after another). Many rows: a block of about GM_NK_BLOCK bytes of each
** piece of k, which stays in L2 while every block of X passes over it, and
** enough blocks for every thread.
*/
static int nk_rows(const mm_job *j, int N, int threads)
{
    const int unit = j->step == 2 ? 16 : 32, fit = GM_NK_BLOCK / (2 * j->step * gm_nk_kc(j->T, j->K));
    int parts = j->T > 32 ? (N + fit - 1) / fit : 1;
    parts = (parts + threads - 1) / threads * threads; /* as many for each thread */
    const int rows = (N + parts - 1) / parts;
    return rows < unit ? unit : (rows + unit - 1) / unit * unit;
}

static _Thread_local unsigned long long pack_ns; /* gm_kernels_pack_seconds: the packing is timed on the calling thread */

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

double gm_kernels_pack_seconds(void) { return (double)pack_ns / 1e9; }

/*
** The memory X is packed into, kept from one product to the next: a
** prefill's down projection packs 2048 tokens x 8960 values, 37 MB, and
** fresh memory each time was the kernel mapping and zeroing its pages
** (three quarters of what the packing took). Taken and given back by an atomic
** exchange, so products running at once each have their own; it grows to
** the largest asked for, up to PACK_KEEP (a longer prompt's buffer is
** freed after its product), and is held until the process ends. The 64
** bytes before the buffer hold its size.
*/
enum { PACK_KEEP = 64 << 20 };
static _Atomic(unsigned char *) spare_pack;

static void *pack_take(size_t bytes)
{
    const size_t size = (bytes + 63) / 64 * 64;
    unsigned char *b = atomic_exchange(&spare_pack, NULL);
    if (b && *(size_t *)(void *)b >= size)
        return b + 64;
    free(b);
    if (!(b = aligned_alloc(64, size + 64)))
        return NULL;
    *(size_t *)(void *)b = size;
    return b + 64;
}

static void pack_give(void *Xp)
{
    unsigned char *b = Xp ? (unsigned char *)Xp - 64 : NULL;
    if (b && *(size_t *)(void *)b > PACK_KEEP)
        free(b);
    else if (b)
        free(atomic_exchange(&spare_pack, b));
}

static void matmul_nk(gm_pool *p, mm_job *j)
{
    const int threads = gm_pool_threads(p);
    const gm_tier *k = j->k;
    void *Xp = NULL;
    if (k->nk_block && (Xp = pack_take(k->nk_packed(j->T, j->K)))) {
        pack_job pj = {j, Xp, 0};
        const unsigned long long t0 = now_ns();
        gm_pool_run(p, (j->T + 15) / 16, nk_pack_block, &pj);
        pack_ns += now_ns() - t0;
        if (atomic_load_explicit(&pj.inexact, memory_order_relaxed)) {
            pack_give(Xp); /* f32 values: the dot products */
            Xp = NULL;
        }
    }
    for (int u = 0; u < j->n_units; u++)
        set_parts(j, u, Xp ? nk_rows(j, j->outs[u * j->step].N, threads) : per_thread(j->outs[u * j->step].N, threads));
    j->Xp = Xp;
    gm_pool_run(p, j->first[j->n_units], Xp ? nk_tiles : nk_dots, j);
    pack_give(Xp);
}

/* ---------------------------------------------------------------------- */

void gm_matmul_ep(gm_pool *p, const float *X, int T, int K, const gm_out *outs, int n_outs, int round,
                  gm_epilogue ep)
{
    if (n_outs > GM_MAX_OUTS) {
        const int first = ep == GM_EP_SWIGLU ? GM_MAX_OUTS / 2 * 2 : GM_MAX_OUTS;
        gm_matmul_ep(p, X, T, K, outs, first, round, ep);
        gm_matmul_ep(p, X, T, K, outs + first, n_outs - first, round, ep);
        return;
    }
    mm_job j = {.X = X, .T = T, .K = K, .round = round, .outs = outs, .ep = ep, .k = tier()};
    j.step = ep == GM_EP_SWIGLU ? 2 : 1;
    j.n_units = n_outs / j.step;
    if (T <= 0 || j.n_units <= 0)
        return;
    if (outs[0].form == GM_W_NK)
        matmul_nk(p, &j);
    else
        matmul_kn(p, &j);
}

void gm_matmul_outs(gm_pool *p, const float *X, int T, int K, const gm_out *outs, int n_outs, int round)
{
    gm_matmul_ep(p, X, T, K, outs, n_outs, round, GM_EP_STORE);
}

void gm_matmul(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, const gm_bf16 *bias, int T, int K, int N,
               int round)
{
    const gm_out o = {.Y = Y, .W = W, .bias = bias, .N = N};
    gm_matmul_outs(p, X, T, K, &o, 1, round);
}

void gm_matmul_nt(gm_pool *p, float *Y, const float *X, const gm_bf16 *W, int T, int K, int N, int round)
{
    const gm_out o = {.Y = Y, .W = W, .N = N, .form = GM_W_NK};
    gm_matmul_outs(p, X, T, K, &o, 1, round);
}

void gm_add_round(float *x, const float *y, int n, int round) { tier()->add_round(x, y, n, round); }

void gm_norm_scale(float *y, const float *x, const gm_bf16 *w, float inv, int n, int round)
{
    tier()->norm_scale(y, x, w, inv, n, round);
}

void gm_swiglu(float *g, const float *u, int n, int round) { tier()->swiglu(g, u, n, round); }

void gm_rope(float *x, const float *c, const float *s, int h, int round) { tier()->rope(x, c, s, h, round); }

/* ---------------------------------------------------------------------- */
/* load time */

void gm_dequant4_row(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                     const float *s, size_t N)
{
    tier()->dequant4_row(d, w, sh, shift, z, s, N);
}

void gm_dequant4_block(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const unsigned *sh, const int32_t *z,
                       const float *s, size_t R, size_t I)
{
    tier()->dequant4_block(d, ld, w, W, sh, z, s, R, I);
}

void gm_stream_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_sfence();
#endif
}

static size_t src_size(gm_src_type type) { return type == GM_SRC_F32 ? 4 : 2; }

void gm_convert_rows(gm_bf16 *dst, const void *src, gm_src_type type, size_t rows, size_t cols, size_t r0, size_t r1,
                     int to)
{
    /* rows per block: bf16 is transposed in place, other types are converted into a buffer first */
    const size_t block = type == GM_SRC_BF16 ? 256 : 32, es = src_size(type);
    const gm_tier *k = tier();
    if (!to) {
        k->convert(dst + r0 * cols, src, (r1 - r0) * cols, type);
        return;
    }
    gm_bf16 *tmp = type == GM_SRC_BF16 ? NULL : malloc(block * cols * 2);
    if (type != GM_SRC_BF16 && !tmp) { /* no memory for a block: one value at a time, the same result */
        const size_t P = to == 1 ? rows : (size_t)to; /* the transpose: one panel of every row */
        for (size_t r = r0; r < r1; r++) {
            const size_t p0 = r / P * P, w = rows - p0 < P ? rows - p0 : P;
            for (size_t c = 0; c < cols; c++)
                gm_convert_portable(dst + p0 * cols + c * w + (r - p0),
                                    (const uint8_t *)src + ((r - r0) * cols + c) * es, 1, type);
        }
        return;
    }
    for (size_t r = r0; r < r1; r += block) {
        const size_t n = r1 - r < block ? r1 - r : block;
        const uint8_t *s = (const uint8_t *)src + (r - r0) * cols * es;
        const gm_bf16 *blk = (const gm_bf16 *)(const void *)s;
        if (tmp) {
            k->convert(tmp, s, n * cols, type);
            blk = tmp;
        }
        if (to == 1)
            k->transpose(dst, blk, n, rows, cols, r);
        else
            k->panels(dst, blk, n, rows, cols, r, to);
    }
    free(tmp);
}
