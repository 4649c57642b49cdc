/* Loading, finding and freeing weights through a generated tensor table. See gm/weights.h. */
#include "gm/weights.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gm/kernels.h"
#include "gm/pool.h"

/* The gm_bf16 * field that spec s names, in layer `layer` for per-layer specs. */
static gm_bf16 **field(const gm_weights_layout *lay, const gm_tensor_spec *s, int layer)
{
    char *base = s->per_layer ? (char *)lay->layers + (size_t)layer * lay->layer_size
                              : (char *)lay->weights;
    return (gm_bf16 **)(void *)(base + s->offset);
}

static void name_of(char *buf, size_t size, const gm_tensor_spec *s, int layer)
{
    if (s->per_layer)
        snprintf(buf, size, s->hf_name, layer);
    else
        snprintf(buf, size, "%s", s->hf_name);
}

/* ---------------------------------------------------------------------- */
/* the parallel load: open, plan, place, run */

/* One tensor of the load: where its bytes are and where they go. */
typedef struct item {
    const st_tensor *t;
    st_source src;      /* the open file, from st_model */
    const void *data;   /* its bytes in the file's mapping */
    gm_src_type type;
    int to;             /* gm_convert_rows' `to`: 0 as it is; a projection 1 (GM_W_KN) or its panel width */
    int in_place;       /* used where it lies in the mapping (else copied into the arena) */
    size_t offset;      /* its place in the arena, in bytes */
    gm_bf16 **field;    /* the Weights field that points at it */
} item;

/* Rows [r0, r1) of one item: a task's share of the reading. */
typedef struct piece {
    const item *it;
    size_t r0, r1;
} piece;

typedef struct plan {
    item *items;
    size_t n_items;
    piece *pieces;
    size_t n_pieces;
    size_t size;        /* the arena's bytes */
    char *base;         /* the arena, once placed */
    gm_status *errors;  /* one per piece; the first failure is reported */
} plan;

enum {
    PIECE_BYTES = 8u << 20, /* the rows one task loads */
    BLOCK_ROWS = 256        /* the rows converted or transposed at a time */
};

/* A tensor's columns: its second dimension, or 1 for a vector. */
static size_t cols_of(const st_tensor *t) { return t->rank == 2 ? (size_t)t->shape[1] : 1; }

static size_t row_bytes(const item *it) { return cols_of(it->t) * st_dtype_size(it->t->dtype); }

/* bf16 kept as is: used in place, or read straight into the arena (else it is transposed or converted). */
static int read_straight(const item *it) { return !it->to && it->type == GM_SRC_BF16; }

static gm_bf16 *dst_of(const plan *p, const item *it)
{
    return it->in_place ? (gm_bf16 *)(uintptr_t)it->data : (gm_bf16 *)(void *)(p->base + it->offset);
}

/* The rows of one piece of the item: about PIECE_BYTES of them, a whole multiple of 32. */
static size_t piece_rows(const item *it)
{
    const size_t step = row_bytes(it) ? PIECE_BYTES / row_bytes(it) : (size_t)it->t->shape[0];
    return step < 32 ? 32 : step / 32 * 32;
}

static gm_src_type src_type(st_dtype d) { return d == ST_F32 ? GM_SRC_F32 : d == ST_F16 ? GM_SRC_F16 : GM_SRC_BF16; }

/*
** Plan: check every tensor the specs name (present, shape, float dtype),
** decide where it is held (in place, or its place in the arena, 64-byte
** aligned), and cut it into pieces of about PIECE_BYTES, whole multiples
** of 32 rows.
*/
static int plan_load(plan *p, const gm_weights_layout *lay, const gm_tensor_spec *specs, size_t n_specs,
                     const st_model *m, const char *dir, gm_status *st)
{
    size_t n_items = 0, n_pieces = 0;
    for (size_t i = 0; i < n_specs; i++)
        n_items += specs[i].per_layer ? (size_t)lay->n_layers : 1;
    if (!(p->items = calloc(n_items ? n_items : 1, sizeof *p->items)))
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
    for (size_t i = 0; i < n_specs; i++) {
        const gm_tensor_spec *s = &specs[i];
        for (int l = 0; l < (s->per_layer ? lay->n_layers : 1); l++) {
            char name[256];
            const st_tensor *t;
            name_of(name, sizeof name, s, l);
            if (st_model_check(m, name, s->rank, s->shape, s->transpose, &t, st))
                return st->code;
            item *it = &p->items[p->n_items++];
            const gm_wform f = lay->form;
            const int to = !s->transpose || f == GM_W_NK ? 0 : f == GM_W_KN ? 1 : gm_wform_panel(f);
            *it = (item){t, st_model_source(m, t), st_model_data(m, t), src_type(t->dtype), to, 0, p->size,
                         field(lay, s, l)};
            it->in_place = read_straight(it) && it->data && (uintptr_t)it->data % 2 == 0;
            if (!it->in_place) {
                const size_t bytes = (size_t)t->shape[0] * cols_of(t) * 2;
                p->size += (bytes + 63) / 64 * 64;
            }
            const size_t rows = (size_t)t->shape[0], step = piece_rows(it);
            n_pieces += rows ? (rows + step - 1) / step : 1;
        }
    }
    if (!(p->pieces = calloc(n_pieces ? n_pieces : 1, sizeof *p->pieces)) ||
        !(p->errors = calloc(n_pieces ? n_pieces : 1, sizeof *p->errors)))
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
    for (size_t i = 0; i < p->n_items; i++) {
        const item *it = &p->items[i];
        const size_t rows = (size_t)it->t->shape[0], step = piece_rows(it);
        size_t r = 0;
        do {
            p->pieces[p->n_pieces++] = (piece){it, r, r + step < rows ? r + step : rows};
            r += step;
        } while (r < rows);
    }
    return 0;
}

/* Fresh memory for size bytes, asking for huge pages (fewer faults on first touch); none for 0 bytes. */
static int arena_new(gm_arena *a, size_t size, gm_status *st)
{
    if (size == 0)
        return 0;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return gm_fail(st, GM_ENOMEM, "weights: cannot allocate %zu bytes: %s", size, strerror(errno));
#ifdef MADV_HUGEPAGE
    madvise(m, size, MADV_HUGEPAGE);
#endif
    a->base = m;
    a->size = size;
    return 0;
}

/* Place: the arena, and every field pointing at its tensor's place, in it or in a mapping. */
static int place(plan *p, gm_arena *arena, gm_status *st)
{
    if (arena_new(arena, p->size, st))
        return st->code;
    p->base = arena->base;
    for (size_t i = 0; i < p->n_items; i++)
        *p->items[i].field = dst_of(p, &p->items[i]);
    return 0;
}

/*
** Piece k's pages of the mapping read in and mapped now (MADV_POPULATE_READ,
** or one read a page where the kernel lacks it), so that no product meets
** a page fault and a read error is the load's, in errors[k], not a signal.
*/
static int populate_piece(const plan *p, size_t k)
{
    const piece *pc = &p->pieces[k];
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), rb = row_bytes(pc->it);
    const uintptr_t from = ((uintptr_t)pc->it->data + pc->r0 * rb) / page * page;
    const uintptr_t to = (uintptr_t)pc->it->data + pc->r1 * rb;
    if (to <= from)
        return 0;
#ifdef MADV_POPULATE_READ
    if (madvise((void *)from, to - from, MADV_POPULATE_READ) == 0)
        return 0;
    if (errno != EINVAL)
        return gm_fail(&p->errors[k], GM_EIO, "%s: tensor '%s': read failed: %s", pc->it->src.path, pc->it->t->name,
                       strerror(errno));
#endif
    volatile uint8_t sink = 0;
    for (uintptr_t a = from; a < to; a += page)
        sink ^= *(const volatile uint8_t *)a;
    (void)sink;
    return 0;
}

/*
** Task k: piece k's rows into place, from the file's mapping, its pages
** read in first. Used in place: nothing more. Copied (bf16 at an odd
** offset) or converted or transposed: BLOCK_ROWS rows at a time into the
** arena; then the piece's pages are let go (MADV_DONTNEED: the page cache
** keeps them), so that the process holds the arena and what is used in
** place, and no second copy of the file.
*/
static void load_piece(void *ctx, int k)
{
    const plan *p = ctx;
    const piece *pc = &p->pieces[k];
    const item *it = pc->it;
    const size_t rows = (size_t)it->t->shape[0], cols = cols_of(it->t), rb = row_bytes(it);
    if (populate_piece(p, (size_t)k) || it->in_place)
        return;
    gm_bf16 *dst = dst_of(p, it);
    const uint8_t *src = (const uint8_t *)it->data + pc->r0 * rb;
    if (read_straight(it)) {
        memcpy(dst + pc->r0 * cols, src, (pc->r1 - pc->r0) * rb);
    } else {
        for (size_t r = pc->r0; r < pc->r1; r += BLOCK_ROWS) {
            const size_t n = pc->r1 - r < BLOCK_ROWS ? pc->r1 - r : BLOCK_ROWS;
            gm_convert_rows(dst, src + (r - pc->r0) * rb, it->type, rows, cols, r, r + n, it->to);
        }
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t from = ((uintptr_t)src + page - 1) / page * page; /* whole pages of this piece only */
    const uintptr_t to = ((uintptr_t)src + (pc->r1 - pc->r0) * rb) / page * page;
    if (to > from)
        madvise((void *)from, to - from, MADV_DONTNEED);
}

/*
** The kernel zeroes a fresh page when it is first touched. Where a tensor
** is read straight in, or put into panels (a piece's rows are whole panels,
** one run of the arena, written front to back), that is just before the
** piece's writes fill it, while the zeroes are still in cache, as for any
** copy. Where it is transposed, the writes scatter over the whole tensor
** long after each page was zeroed, so those tensors (and the converted ones)
** are touched up front instead (task k: piece k's, when it is its tensor's
** first), zeroed in one stream (MADV_POPULATE_WRITE) rather than faulted in
** under the transposes.
*/
static void touch_tensor(void *ctx, int k)
{
    const plan *p = ctx;
    const piece *pc = &p->pieces[k];
    if (pc->r0 != 0 || read_straight(pc->it) || pc->it->to > 1)
        return;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const gm_bf16 *dst = dst_of(p, pc->it);
    const uintptr_t from = (uintptr_t)dst / page * page;
    const uintptr_t to = (uintptr_t)(dst + (size_t)pc->it->t->shape[0] * cols_of(pc->it->t));
#ifdef MADV_POPULATE_WRITE
    madvise((void *)from, to - from, MADV_POPULATE_WRITE); /* a hint: without it, pages fault in as written */
#else
    (void)from, (void)to;
#endif
}

/* Run: every piece on the pool's threads, the touch pass first; the first failure is the load's. */
static int run(plan *p, int threads, gm_status *st)
{
    gm_pool *pool = gm_pool_new(threads);
    gm_pool_run(pool, (int)p->n_pieces, touch_tensor, p);
    gm_pool_run(pool, (int)p->n_pieces, load_piece, p);
    gm_pool_free(pool);
    for (size_t k = 0; k < p->n_pieces && !st->code; k++)
        if (p->errors[k].code)
            *st = p->errors[k];
    return st->code;
}

int gm_weights_load(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                    size_t n_specs, const char *dir, int threads, gm_status *st)
{
    st_model *m = NULL;
    plan p = {0};
    memset(lay->arena, 0, sizeof *lay->arena);
    if (st_model_open(&m, dir, st) == GM_OK && plan_load(&p, lay, specs, n_specs, m, dir, st) == GM_OK &&
        place(&p, lay->arena, st) == GM_OK)
        run(&p, threads, st);
    free(p.items);
    free(p.pieces);
    free(p.errors);
    lay->arena->files = m; /* the mappings the tensors used in place live in, until gm_weights_free */
    if (st->code)
        gm_weights_free(lay, specs, n_specs);
    return st->code;
}

void gm_weights_free(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                     size_t n_specs)
{
    if (lay->arena->base)
        munmap(lay->arena->base, lay->arena->size);
    st_model_close(lay->arena->files);
    memset(lay->arena, 0, sizeof *lay->arena);
    for (size_t i = 0; i < n_specs; i++)
        for (int l = 0; l < (specs[i].per_layer ? lay->n_layers : 1); l++)
            *field(lay, &specs[i], l) = NULL;
}

const gm_bf16 *gm_weights_find(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                               size_t n_specs, const char *name,
                               const gm_tensor_spec **spec)
{
    char buf[256];
    for (size_t i = 0; i < n_specs; i++) {
        const int n = specs[i].per_layer ? lay->n_layers : 1;
        for (int l = 0; l < n; l++) {
            name_of(buf, sizeof buf, &specs[i], l);
            if (strcmp(buf, name) == 0) {
                if (spec)
                    *spec = &specs[i];
                return *field(lay, &specs[i], l);
            }
        }
    }
    return NULL;
}

int gm_weights_load_tensor(const st_model *m, const char *name, int rank, const int64_t *shape, int transpose,
                           gm_bf16 **out, gm_status *st)
{
    const st_tensor *t;
    size_t count, bytes;
    gm_bf16 *buf;

    *out = NULL;
    if (st_model_check(m, name, rank, shape, transpose, &t, st))
        return st->code;
    const st_source src = st_model_source(m, t);
    count = (size_t)((t->end - t->begin) / st_dtype_size(t->dtype));
    if (__builtin_mul_overflow(count, sizeof *buf, &bytes))
        return gm_fail(st, GM_ENOMEM, "%s: tensor '%s' is too large to load", src.path, name);
    if ((buf = malloc(bytes ? bytes : 1)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory for tensor '%s' (%zu bytes)", src.path, name, bytes);
    if (transpose)
        gm_convert_rows(buf, st_model_data(m, t), src_type(t->dtype), (size_t)t->shape[0], (size_t)t->shape[1], 0,
                        (size_t)t->shape[0], 1);
    else
        gm_convert_rows(buf, st_model_data(m, t), src_type(t->dtype), count, 1, 0, count, 0);
    *out = buf;
    return GM_OK;
}
