/*
** Internal: the matrix products (gm_tier's band, gemv, dot, dot_rows) and
** attention's two products of the AVX2 and AVX-512 tiers, written once in
** vf.h's width-generic operations: included after vf.h, with TIER(x) naming
** the functions, by avx2.c (8 lanes), avx512.c (16) and, through it,
** avx512_model.c (16 lanes on two AVX2 halves).
**
** Every output is one FMA chain in k order (in attention: over d, or over
** the keys, in order), whatever the width and the blocking, so products of
** bf16 values give the same bits on every one of these tiers and on the
** portable one. The sums of the dot products against W^T (the LM head) are
** the exception: lanes of VF_LANES, added across at the end (vf_hsum), which
** the portable tier's dot products copy at 8 (portable.c: avx2's bits).
**
** The register tiles keep their accumulators in named variables, one pair
** (even and odd columns) a row, unrolled for a row count that is a constant
** where each tile is instantiated (VF_EACH_ROWS), so the compiler keeps
** them all in registers: an array of vectors indexed in a loop would be
** kept in memory, each FMA then a load, an FMA and a store.
*/

enum {
    VL = VF_LANES,
    NC = 2 * VF_LANES, /* columns of a register tile: a vector of the even ones and one of the odd */
    GEMV_AHEAD = 32,   /* rows fetched ahead in gemv */
    PANEL_AHEAD = 1024, /* bytes of each run fetched ahead in gemv_panels */
    FETCH_EVERY = 64 / NC, /* k-steps per fetched line (gm_fetch): 4 of AVX2 tile6 (~24 cycles), 2 of AVX-512 tile8 */
    AK = NC,           /* keys per transposed chunk of the scores: two vectors of lanes */
    AD = 2048 / VL,    /* values of d per piece of a chunk: 16 KB of transposed keys, in L1 */
    AV = 2048 / VL     /* keys per strip of NC columns of V: 16 KB, in L1 */
};

/*
** The rows of the next register tile when `left` rows are left: as few
** tiles as VF_ROWS rows a tile allow, the rows shared among them as evenly
** as they go (32 rows on AVX2: 6, 6, 5, 5, 5, 5; on AVX-512, 20: 7, 7, 6).
** Not full tiles and a thin one or two at the end (6, 6, 6, 6, 4, 4): a
** tile of 4 rows is 8 chains of FMAs, no more than two FMA units of
** latency 4 keep busy, with none to spare (on a Zen 3 those took 1.01-1.11x
** the time of the even split, bench/HISTORY.md). Each output is the same
** sum in the same order whatever the tiles' heights.
*/
static inline int rows_next(int left)
{
    const int tiles = (left + VF_ROWS - 1) / VF_ROWS;
    return (left + tiles - 1) / tiles;
}

/* ---------------------------------------------------------------------- */
/* the register tile, of the products and of attention's */

enum { FROM_PANEL, FROM_W_TO_PANEL, FROM_W }; /* where a tile reads its second operand (below) */
enum { EVEN_ODD, WHOLE, PART };              /* how its outputs lie in C (below) */

#define ROW_LIST(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ROW_DECL(r) vf e##r = vf_zero(), o##r = vf_zero();
#define ROW_LOAD(r)                                                                                                \
    if (R > r) {                                                                                                   \
        if (lay == EVEN_ODD)                                                                                       \
            vf_split(C + r * ldc, &e##r, &o##r);                                                                   \
        else                                                                                                       \
            e##r = vf_load_n(C + r * ldc, n0), o##r = vf_load_n(C + r * ldc + VL, n1);                             \
    }
#define ROW_STEP(r)                                                                                                \
    if (R > r) {                                                                                                   \
        const vf b = vf_bcast(A + r * lda + k);                                                                    \
        e##r = vf_fma(b, we, e##r), o##r = vf_fma(b, wo, o##r);                                                   \
    }
#define ROW_STORE(r)                                                                                               \
    if (R > r) {                                                                                                   \
        if (lay == EVEN_ODD)                                                                                       \
            vf_join(C + r * ldc, e##r, o##r);                                                                      \
        else                                                                                                       \
            vf_store_n(C + r * ldc, n0, e##r), vf_store_n(C + r * ldc + VL, n1, o##r);                             \
    }

/*
** C[0..R)[0..n) (+)= A[0..R)[0..depth) @ B[0..depth)[0..n), n <= NC, R <=
** VF_ROWS, `from` and `lay` constants where it is inlined: 2R accumulators,
** two vectors of columns a row, and per step of depth R broadcasts of A and
** 2R FMAs, each sum adding its terms in order. Row k of B is two vectors of
** f32 read from B (FROM_PANEL, rows ldb floats apart), or NC bf16 weights
** loaded from W (rows ldw apart) and widened by a shift and an and, the even
** columns and the odd ones (FROM_W), and then also stored to the panel P,
** contiguous, for the later blocks of rows (FROM_W_TO_PANEL). C holds NC
** outputs a row as they lie and B its even and odd columns (EVEN_ODD: the
** products), or both NC columns in order (WHOLE), or the first n, the others
** neither read nor written (PART). load_c: the sums go on from C, else from
** 0. With fa, a line of the next band is fetched every FETCH_EVERY steps
** (gm_fetch).
*/
static inline __attribute__((always_inline)) void tile(float *C, long ldc, const float *A, long lda, const float *B,
                                                       long ldb, const gm_bf16 *W, long ldw, float *P, int depth,
                                                       int load_c, gm_ahead *fa, int n, const int R, const int from,
                                                       const int lay)
{
    const int n0 = lay != PART || n >= VL ? VL : n, n1 = lay != PART ? VL : n - n0;
    gm_ahead a = fa ? *fa : (gm_ahead){0};
    ROW_LIST(ROW_DECL)
    if (load_c) {
        ROW_LIST(ROW_LOAD)
    }
    for (int k = 0; k < depth; k++) {
        if (fa && k % FETCH_EVERY == 0)
            gm_fetch(&a);
        vf we, wo;
        if (from == FROM_PANEL) {
            we = vf_load_n(B + ldb * k, n0), wo = vf_load_n(B + ldb * k + VL, n1);
        } else {
            const vw v = vw_load(W + (long)k * ldw);
            we = vw_even(v), wo = vw_odd(v);
            if (from == FROM_W_TO_PANEL)
                vf_store(P + NC * k, we), vf_store(P + NC * k + VL, wo);
        }
        ROW_LIST(ROW_STEP)
    }
    ROW_LIST(ROW_STORE)
    if (fa)
        *fa = a;
}

typedef void (*tile_fn)(float *, long, const float *, long, const gm_bf16 *, long, float *, int, int, gm_ahead *);

/* tileR (from the panel), tileR_copy (from W, to the panel) and tileR_w (from W) for every R, and their table */
#define TILE_FN(r, suffix, from)                                                                                   \
    static void tile##r##suffix(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *W, long ldw,          \
                                float *P, int kb, int first, gm_ahead *fa)                                         \
    {                                                                                                              \
        tile(Y, ldy, X, ldx, P, NC, W, ldw, P, kb, !first, fa, NC, r, from, EVEN_ODD);                             \
    }
#define TILE_FNS(r) TILE_FN(r, , FROM_PANEL) TILE_FN(r, _copy, FROM_W_TO_PANEL) TILE_FN(r, _w, FROM_W)
VF_EACH_ROWS(TILE_FNS)
#define TILE_ENTRY(r) [r] = {tile##r, tile##r##_copy, tile##r##_w},
static const tile_fn tiles[VF_ROWS + 1][3] = {VF_EACH_ROWS(TILE_ENTRY)};

/*
** The lines of W that the band of columns [ns, ns + nw) reads in its
** k-block [nk, nk + kb): in (in, out), kb rows of 2 nw bytes, ldw apart; in
** panels of P, one contiguous run of kb rows of 2 P bytes in each panel.
*/
static inline gm_ahead band_lines(const gm_band *b, int ns, int nk, int nw, int kb)
{
    long ld;
    const char *p = (const char *)(gm_w_col(b->W, b->ldw, b->P, b->K, ns, &ld) + (long)nk * ld);
    if (!b->P)
        return (gm_ahead){p, b->ldw * 2, nw * 2 / 64 + 2, 0, kb};
    return (gm_ahead){p, (long)b->P * b->K * 2, kb * b->P * 2 / 64 + 1, 0, kb > 0 ? (nw + b->P - 1) / b->P : 0};
}

/*
** Columns [n0, n1), a few bands of GM_BAND: for each k-block, for each band,
** the first block of rows reads the band's weights from W and leaves them
** in `panels` as f32, NC columns by KB rows each, contiguous; the later
** blocks of rows read them from there, free of cache set conflicts and with
** no widening left to do, so that their inner loops are FMAs, loads and
** broadcasts only. The k-block of X is read by every band while it is in
** cache. W in panels (the FMA tiers' own form): a tile's k-block of NC
** columns lies in one panel, one contiguous run of memory, which the
** hardware prefetcher streams; in (in, out), a strided run of each row (a
** 3 KB row stride maps a k-block onto few sets). Meanwhile the next band's
** weights are fetched, a line every few steps (not while the first block of
** rows reads W: the two would evict each other, unless there are too few
** blocks for that). A block of rows that is the only one reads W and leaves
** no f32 panel. Each k-block's outputs are read and written again by the
** next one; at LONG_ROWS rows and more those of a band no longer stay in
** L2, and a tier may take longer k-blocks there, GM_LONG_KB rows (avx2.c).
*/
#ifndef GM_LONG_KB
#define GM_LONG_KB KB
#endif
enum { LONG_ROWS = 1024, PANEL_ROWS = GM_LONG_KB > KB ? GM_LONG_KB : KB };

static void TIER(band)(const gm_band *b)
{
    float panels[PANEL_ROWS * GM_BAND] __attribute__((aligned(64)));
    const int T = b->T, K = b->K, nt = b->n0 + (b->n1 - b->n0) / NC * NC;
    const int KB_T = T >= LONG_ROWS ? GM_LONG_KB : KB; /* the k-block, for T rows */
    for (int k0 = 0; k0 < K; k0 += KB_T) {
        const int k1 = k0 + KB_T < K ? k0 + KB_T : K, kb = k1 - k0, first = k0 == 0;
        for (int s0 = b->n0; s0 < nt; s0 += GM_BAND) {
            const int s1 = s0 + GM_BAND < nt ? s0 + GM_BAND : nt;
            /* next: this k-block of the next band, or the next k-block of the first */
            const int ns = s1 < nt ? s1 : b->n0, nk = s1 < nt ? k0 : k1, nw = ns + GM_BAND < nt ? GM_BAND : nt - ns;
            gm_ahead a = band_lines(b, ns, nk, nw, nk < K ? (nk + KB_T < K ? KB_T : K - nk) : 0);
            for (int t = 0; t < T;) {
                const int rows = rows_next(T - t);
                float *y = b->Y + (long)t * b->ldy;
                const float *x = b->X + (long)t * b->ldx + k0;
                const tile_fn fn = tiles[rows][t ? FROM_PANEL : rows < T ? FROM_W_TO_PANEL : FROM_W];
                gm_ahead none = {0}, *fa = t || T < VF_ROWS + 4 ? &a : &none;
                float *p = panels;
                for (int n = s0; n < s1; n += NC, p += NC * kb) {
                    long ld;
                    const gm_bf16 *w = gm_w_col(b->W, b->ldw, b->P, K, n, &ld);
                    fn(y + n, b->ldy, x, b->ldx, w + (long)k0 * ld, ld, p, kb, first, fa);
                }
                t += rows;
            }
        }
    }
    for (int n = nt; n < b->n1; n++) { /* the last columns, fewer than NC: plain sums, in the same order */
        long ld;
        const gm_bf16 *w = gm_w_col(b->W, b->ldw, b->P, K, n, &ld);
        for (int t = 0; t < T; t++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s = fmaf(b->X[(long)t * b->ldx + k], gm_bf16_to_f32(w[(long)k * ld]), s);
            b->Y[(long)t * b->ldy + n] = s;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* one row */

/*
** One row of X (decode): y[n0..n1) = x[0..K) @ W[0..K)[n0..n1). Rows in
** order, eight at a time, each sum adding its k terms in order, kept as
** even and odd columns in y until the end. Memory-bound, so the loop is
** lean (NC weights widened by one shift and one and) and reads eight rows
** at once: more of W in flight than four, and the sums go through L1 half
** as often. A run of columns shorter than the row is too short for the
** hardware prefetcher, so with fetch_ahead set each step of NC columns
** also fetches a line of four of the eight rows GEMV_AHEAD further on (of
** rows 0-3 on even steps, 4-7 on odd ones), VL / 8 lines each; whole rows
** are one long run, which the prefetcher streams faster on its own.
*/
#define GEMV_ROW(v, b)                                                                                             \
    do {                                                                                                           \
        const vw w_ = (v);                                                                                         \
        e = vf_fma(b, vw_even(w_), e), o = vf_fma(b, vw_odd(w_), o);                                               \
    } while (0)

static void TIER(gemv)(float *y, const float *x, const gm_bf16 *W, long ldw, int K, int n0, int n1, int fetch_ahead)
{
    const int nt = n0 + (n1 - n0) / NC * NC;
    const long l = ldw;
    for (int n = n0; n < n1; n++)
        y[n] = 0.0f;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        const gm_bf16 *w = W + (long)k * l;
        const vf b0 = vf_bcast(x + k), b1 = vf_bcast(x + k + 1), b2 = vf_bcast(x + k + 2), b3 = vf_bcast(x + k + 3);
        const vf b4 = vf_bcast(x + k + 4), b5 = vf_bcast(x + k + 5), b6 = vf_bcast(x + k + 6), b7 = vf_bcast(x + k + 7);
        const int fetch = fetch_ahead && k + GEMV_AHEAD + 8 <= K;
        for (int n = n0, step = 0; n < nt; n += NC, step++) {
            if (fetch) {
                const char *a = (const char *)(w + GEMV_AHEAD * l + n0) + (step & 1) * 8 * l + (step >> 1) * 8 * VL;
                for (int j = 0; j < VL / 8; j++) {
                    __builtin_prefetch(a + 64 * j, 0, 3), __builtin_prefetch(a + 2 * l + 64 * j, 0, 3);
                    __builtin_prefetch(a + 4 * l + 64 * j, 0, 3), __builtin_prefetch(a + 6 * l + 64 * j, 0, 3);
                }
            }
            vf e = vf_load(y + n), o = vf_load(y + n + VL);
            const gm_bf16 *c = w + n;
            GEMV_ROW(vw_load(c), b0);
            GEMV_ROW(vw_load(c + l), b1);
            GEMV_ROW(vw_load(c + 2 * l), b2);
            GEMV_ROW(vw_load(c + 3 * l), b3);
            GEMV_ROW(vw_load(c + 4 * l), b4);
            GEMV_ROW(vw_load(c + 5 * l), b5);
            GEMV_ROW(vw_load(c + 6 * l), b6);
            GEMV_ROW(vw_load(c + 7 * l), b7);
            vf_store(y + n, e), vf_store(y + n + VL, o);
        }
    }
    for (; k < K; k++) {
        const vf b = vf_bcast(x + k);
        for (int n = n0; n < nt; n += NC) {
            vf e = vf_load(y + n), o = vf_load(y + n + VL);
            GEMV_ROW(vw_load(W + (long)k * l + n), b);
            vf_store(y + n, e), vf_store(y + n + VL, o);
        }
    }
    for (int n = n0; n < nt; n += NC) /* even and odd columns back in order */
        vf_join(y + n, vf_load(y + n), vf_load(y + n + VL));
    for (int n = nt; n < n1; n++) {
        float s = 0.0f;
        for (int kk = 0; kk < K; kk++)
            s = fmaf(x[kk], gm_bf16_to_f32(W[(long)kk * ldw + n]), s);
        y[n] = s;
    }
}

/*
** One row of X against W in panels of P columns (decode): y[n0..n1) = x @
** W[0..K)[n0..n1), n0 a multiple of P. Four register tiles of NC columns
** (eight accumulators, enough FMAs in flight to hide their latency: each
** sum is one chain, in k order, kept in its register from the first k to
** the last), one from each quarter of the tiles, each reading its panel's
** rows front to back: four runs of memory far apart (as the AVX512_BF16
** tier's decode reads W), which the hardware prefetcher streams. (On a Zen
** 4 whose memory gave 56-60 GB/s on two threads, a decode step in turns
** with four neighbouring panels: 88-97% of it against 84-88% on the avx2
** tier, 91-98% against 90-93% on avx512; where it gave 33-35, 95-100% either
** way; on a Zen 3, avx2, 134.8 against 134.5 ms a step, medians of six:
** bench/HISTORY.md.) With
** GM_PANEL_FETCH (the tier file's choice) each of their lines is also
** fetched PANEL_AHEAD bytes ahead, to L2: on a Zen 4, a decode step's
** projections took 0.74-0.91x the time of fetching into L1 and 0.90-1.01x
** the time of no fetch, on the avx2 and avx512 tiers; on a Zen 3 (AVX2
** only: the avx2 tier's own CPUs), the fetch took 1.0-1.15x the time of
** none, into L2 or L1 alike, pair by pair on gate, q and down over one and
** two threads.
*/
#define PANEL_STEP(i)                                                                                              \
    do {                                                                                                           \
        const vw v_ = vw_load(w##i + k * l##i);                                                                    \
        e##i = vf_fma(b, vw_even(v_), e##i), o##i = vf_fma(b, vw_odd(v_), o##i);                                   \
    } while (0)

static void TIER(gemv_panels)(float *y, const float *x, const gm_bf16 *W, int K, int N, int P, int n0, int n1)
{
    const int nt = n0 + (n1 - n0) / NC * NC, d = (nt - n0) / NC / 4 * NC; /* a quarter's columns */
    int n = n0;
    for (; n < n0 + d; n += NC) {
        long l0, l1, l2, l3;
        const gm_bf16 *w0 = gm_w_col(W, N, P, K, n, &l0), *w1 = gm_w_col(W, N, P, K, n + d, &l1);
        const gm_bf16 *w2 = gm_w_col(W, N, P, K, n + 2 * d, &l2), *w3 = gm_w_col(W, N, P, K, n + 3 * d, &l3);
        vf e0 = vf_zero(), o0 = e0, e1 = e0, o1 = e0, e2 = e0, o2 = e0, e3 = e0, o3 = e0;
        for (long k = 0; k < K; k++) {
            const vf b = vf_bcast(x + k);
            if (GM_PANEL_FETCH && k % (64 / (2 * NC)) == 0) { /* a new line of each run, to L2 (prefetcht1) */
                __builtin_prefetch((const char *)(w0 + k * l0) + PANEL_AHEAD, 0, 2);
                __builtin_prefetch((const char *)(w1 + k * l1) + PANEL_AHEAD, 0, 2);
                __builtin_prefetch((const char *)(w2 + k * l2) + PANEL_AHEAD, 0, 2);
                __builtin_prefetch((const char *)(w3 + k * l3) + PANEL_AHEAD, 0, 2);
            }
            PANEL_STEP(0);
            PANEL_STEP(1);
            PANEL_STEP(2);
            PANEL_STEP(3);
        }
        vf_join(y + n, e0, o0), vf_join(y + n + d, e1, o1);
        vf_join(y + n + 2 * d, e2, o2), vf_join(y + n + 3 * d, e3, o3);
    }
    for (n = n0 + 4 * d; n < nt; n += NC) { /* the last tiles, fewer than four */
        long l0;
        const gm_bf16 *w0 = gm_w_col(W, N, P, K, n, &l0);
        vf e0 = vf_zero(), o0 = e0;
        for (long k = 0; k < K; k++) {
            const vf b = vf_bcast(x + k);
            PANEL_STEP(0);
        }
        vf_join(y + n, e0, o0);
    }
    for (; n < n1; n++) { /* the last columns, fewer than NC */
        long ld;
        const gm_bf16 *w = gm_w_col(W, N, P, K, n, &ld);
        float s = 0.0f;
        for (int k = 0; k < K; k++)
            s = fmaf(x[k], gm_bf16_to_f32(w[(long)k * ld]), s);
        y[n] = s;
    }
}

/* ---------------------------------------------------------------------- */
/* against W^T, rows of W as outputs (the LM head) */

/*
** Y[r * ldy] = dot(X[r * ldx][0..K), Wn[r * ldw][0..K)) for r < R (R a
** constant where it is inlined): R rows of X against one row of W (ldw 0),
** or one row of X against R rows of W (ldx 0), the next R rows of W then
** fetched a line a row every 32 values (with `ahead`), into L2: on a Zen 4
** the LM head's one row then took 0.58-0.74x the time of the same fetch
** into L1, on 8 and 16 lanes, 1 and 2 threads (bench/HISTORY.md). In
** VF_LANES lanes, added across at the end (vf_hsum), then the last values
** in order.
*/
static inline __attribute__((always_inline)) void dots(float *Y, long ldy, const float *X, long ldx,
                                                       const gm_bf16 *Wn, long ldw, int K, int ahead, const int R)
{
    vf a0 = vf_zero(), a1 = a0, a2 = a0, a3 = a0;
    const char *next = (const char *)(Wn + R * ldw);
    int k = 0;
    for (; k + VL <= K; k += VL) {
        if (ahead && k % 32 == 0)
            for (int r = 0; r < R; r++)
                __builtin_prefetch(next + (r * ldw + k) * 2, 0, 2);
        a0 = vf_fma(vf_load(X + k), vf_load_bf16(Wn + k), a0);
        if (R > 1)
            a1 = vf_fma(vf_load(X + ldx + k), vf_load_bf16(Wn + ldw + k), a1);
        if (R > 2)
            a2 = vf_fma(vf_load(X + 2 * ldx + k), vf_load_bf16(Wn + 2 * ldw + k), a2);
        if (R > 3)
            a3 = vf_fma(vf_load(X + 3 * ldx + k), vf_load_bf16(Wn + 3 * ldw + k), a3);
    }
    const vf acc[4] = {a0, a1, a2, a3};
    for (int r = 0; r < R; r++) {
        float s = vf_hsum(acc[r]);
        for (int j = k; j < K; j++)
            s = fmaf(X[r * ldx + j], gm_bf16_to_f32(Wn[r * ldw + j]), s);
        Y[r * ldy] = s;
    }
}

/* Y[t][n] = dot(X[t], Wn) for t < rows (<= 4), one row of W */
static void TIER(dot)(float *Y, long ldy, const float *X, long ldx, const gm_bf16 *Wn, int K, int rows)
{
    switch (rows) {
    case 4: dots(Y, ldy, X, ldx, Wn, 0, K, 0, 4); break;
    case 3: dots(Y, ldy, X, ldx, Wn, 0, K, 0, 3); break;
    case 2: dots(Y, ldy, X, ldx, Wn, 0, K, 0, 2); break;
    default: dots(Y, ldy, X, ldx, Wn, 0, K, 0, 1); break;
    }
}

/* Y[n] = dot(X, W[n]) for n in [n0, n1): four rows of W at once against one row of X, the next four fetched ahead */
static void TIER(dot_rows)(float *Y, const float *X, const gm_bf16 *W, int K, int n0, int n1)
{
    int n = n0;
    for (; n + 4 <= n1; n += 4)
        dots(Y + n, 1, X, 0, W + (long)n * K, K, K, 1, 4);
    for (; n < n1; n++)
        dots(Y + n, 0, X, 0, W + (long)n * K, 0, K, 0, 1);
}

/* ---------------------------------------------------------------------- */
/* attention's products */

/* Kt[c][j] = K[j][c] for c < dn, j < AK: keys nk to AK - 1 (a last, short chunk) are 0. */
static void transpose_keys(float *Kt, const float *K, long ldk, int nk, int dn)
{
    int c = 0;
    if (nk == AK)
        for (; c + 8 <= dn; c += 8)
            for (int j = 0; j < AK; j += 8)
                v8_transpose8(Kt + c * AK + j, AK, K + j * ldk + c, ldk);
    for (; c < dn; c++)
        for (int j = 0; j < AK; j++)
            Kt[c * AK + j] = j < nk ? K[j * ldk + c] : 0.0f;
}

/* the register tile over rows of A and C, in tiles of rows_next rows */
#define ATT_CASE(r)                                                                                                \
    case r:                                                                                                        \
        if (n == NC)                                                                                               \
            tile(c, ldc, a, lda, B, ldb, NULL, 0, NULL, depth, accumulate, NULL, n, r, FROM_PANEL, WHOLE);         \
        else                                                                                                       \
            tile(c, ldc, a, lda, B, ldb, NULL, 0, NULL, depth, accumulate, NULL, n, r, FROM_PANEL, PART);          \
        break;

static void att_tiles(float *C, long ldc, const float *A, long lda, int rows, const float *B, long ldb, int depth,
                      int n, int accumulate)
{
    for (int i = 0; i < rows;) {
        const int r = rows_next(rows - i);
        float *c = C + i * ldc;
        const float *a = A + i * lda;
        switch (r) { VF_EACH_ROWS(ATT_CASE) }
        i += r;
    }
}

/*
** The keys AK at a time, each chunk transposed once into Kt (a piece of AD
** values of d at a time, in L1) for every row of Q, which then meets it in
** register tiles: several query rows against AK keys, each sum over d in
** order, so that no lanes are added across.
*/
static void TIER(attn_scores)(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk,
                              int d)
{
    float Kt[AD * AK] __attribute__((aligned(64)));
    if (d <= 0) {
        for (int i = 0; i < nq; i++)
            memset(S + i * lds, 0, sizeof(float) * (size_t)(nk > 0 ? nk : 0));
        return;
    }
    for (int j = 0; j < nk; j += AK) {
        const int kn = nk - j < AK ? nk - j : AK;
        for (int c0 = 0; c0 < d; c0 += AD) {
            const int dn = d - c0 < AD ? d - c0 : AD, first = c0 == 0;
            transpose_keys(Kt, K + j * ldk + c0, ldk, kn, dn);
            att_tiles(S + j, lds, Q + c0, ldq, nq, Kt, AK, dn, kn, !first);
        }
    }
}

/*
** Keys AV at a time; in each block, strips of NC values of d outer, so that
** the block's strip of V (AV rows of 4 NC bytes, copied contiguous when
** more than one tile of rows will read it: V's rows are a few KB apart,
** which maps a strip onto a few cache sets) stays in L1 while every block
** of rows of P passes over it. The last values of d, fewer than NC, are
** read from V as it is, under a mask.
*/
static void TIER(attn_values)(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk,
                              int d, int accumulate)
{
    float Vp[AV * NC] __attribute__((aligned(64)));
    for (int j0 = 0; j0 == 0 || j0 < nk; j0 += AV) { /* once at least: accumulate = 0 writes O even when nk = 0 */
        const int kn = nk - j0 < AV ? nk - j0 : AV, acc = accumulate || j0 > 0;
        for (int c = 0; c < d; c += NC) {
            const int n = d - c < NC ? d - c : NC;
            const float *v = V + j0 * ldv + c;
            long lv = ldv;
            if (nq > VF_ROWS && n == NC) {
                for (int j = 0; j < kn; j++)
                    vf_store(Vp + NC * j, vf_load(v + j * ldv)), vf_store(Vp + NC * j + VL, vf_load(v + j * ldv + VL));
                v = Vp, lv = NC;
            }
            att_tiles(O + c, ldo, P + j0, ldp, nq, v, lv, kn, n, acc);
        }
    }
}
