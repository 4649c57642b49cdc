/* Loading, finding and freeing weights through a generated tensor table. See gm/weights.h. */
#include "gm/weights.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gm/kernels.h"
#include "gm/pool.h"

/* The field spec s names, in layer `layer` for per-layer specs: a gm_bf16 *, or a part's typed pointer. */
static void *field(const gm_weights_layout *lay, const gm_tensor_spec *s, int layer)
{
    char *base = s->per_layer ? (char *)lay->layers + (size_t)layer * lay->layer_size
                              : (char *)lay->weights;
    return base + s->offset;
}

/* Every field is an object pointer: set and read as bytes, whatever its pointee's type. */
static void set_field(void *f, const void *p) { memcpy(f, &p, sizeof p); }

static const void *get_field(const void *f)
{
    const void *p;
    memcpy(&p, f, sizeof p);
    return p;
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

/*
** One tensor of the load: where its bytes are and where they go. A float
** tensor is used in place, copied (gm_place) or converted (or transposed)
** into the arena; a quantized part is kept as the file holds it, in place
** or copied; a dequantized projection has no tensor of its own: it is made
** from its parts.
*/
typedef enum item_kind { ITEM_FLOAT, ITEM_PART, ITEM_DEQUANT } item_kind;

typedef struct item {
    item_kind kind;
    const st_tensor *t; /* the file's tensor; NULL for a dequantized projection */
    st_source src;      /* the open file, from st_model */
    const void *data;   /* its bytes in the file's mapping */
    gm_src_type type;
    size_t rows, cols;  /* the file's (rows, cols), a vector as (n, 1); dequantized: its natural form's */
    size_t esize;       /* bytes an element in the file; dequantized: 2, the bf16 it is made into */
    int to;             /* float: gm_convert_rows' `to`: 0 as it is; a projection 1 (GM_W_KN) or its panel width */
    int transpose;      /* dequantized: held in the form its rule does not make ((in, out) for FP8 and Q4NX) */
    int panel;          /* dequantized: held in panels of this many outputs (gm_wform_panel); else 0 */
    int in_place;       /* used where it lies in the mapping (else placed in the arena) */
    size_t offset;      /* its place in the arena, in bytes */
    void *field;        /* the Weights field that points at it */
    const struct item *parts[GM_QUANT_MAX_PARTS]; /* dequantized: its parts, by number (NULL: absent) */
    gm_quant_parts qp;  /* dequantized: where its parts are, once placed */
    char name[256];     /* the HF name, for messages */
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
    const gm_quant_config *quant;
} plan;

enum {
    PIECE_BYTES = 8u << 20,  /* the rows one task loads */
    BLOCK_BYTES = 256u << 10 /* the rows read and converted at a time (convert_piece) */
};

/* A tensor's columns: its second dimension, or 1 for a vector. */
static size_t cols_of(const st_tensor *t) { return t->rank == 2 ? (size_t)t->shape[1] : 1; }

static size_t row_bytes(const item *it) { return it->cols * it->esize; }

/*
** Kept as the file holds it (bf16 not transposed, or a part): used in place,
** or read straight into the arena (else it is transposed, converted or
** dequantized).
*/
static int read_straight(const item *it)
{
    return it->kind == ITEM_PART || (it->kind == ITEM_FLOAT && !it->to && it->type == GM_SRC_BF16);
}

/*
** Written in the order of its rows: read straight, converted, put into
** panels, or dequantized in the rule's natural form or in panels (whole
** panels a piece). Not: a float transposed, nor a projection dequantized
** into the other form, whose piece writes a line of each of its rows per
** block of the rule's columns, over the whole piece (awq_other,
** other_by_transpose in dequant.c).
*/
static int writes_in_order(const item *it)
{
    if (it->kind == ITEM_DEQUANT)
        return !it->transpose || it->panel;
    return it->kind != ITEM_FLOAT || it->to != 1;
}

static void *dst_of(const plan *p, const item *it)
{
    return it->in_place ? (void *)(uintptr_t)it->data : (void *)(p->base + it->offset);
}

/*
** The rows the pieces of an item are cut along: the file's; a dequantized
** projection's as it is held (its rule's natural rows, or, held in the
** other form, its natural columns; in panels, its outputs, so that a piece
** is whole panels).
*/
static size_t rows_of(const item *it)
{
    if (it->kind != ITEM_DEQUANT)
        return it->rows;
    return it->panel ? it->qp.out : it->transpose ? it->cols : it->rows;
}

/* The rows of one piece of the item: about PIECE_BYTES of them, a whole multiple of 32. */
static size_t piece_rows(const item *it)
{
    const size_t bytes = it->kind != ITEM_DEQUANT ? row_bytes(it)
                         : 2 * (it->panel ? it->qp.in : it->transpose ? it->rows : it->cols);
    const size_t step = bytes ? PIECE_BYTES / bytes : rows_of(it);
    return step < 32 ? 32 : step / 32 * 32;
}

static gm_src_type src_type(st_dtype d) { return d == ST_F32 ? GM_SRC_F32 : d == ST_F16 ? GM_SRC_F16 : GM_SRC_BF16; }

/* An item for file tensor t, of the given kind: where its bytes are and its (rows, cols). */
static void from_file(item *it, item_kind kind, const st_tensor *t, const st_model *m)
{
    it->kind = kind;
    it->t = t;
    it->src = st_model_source(m, t);
    it->data = st_model_data(m, t);
    it->type = src_type(t->dtype);
    it->rows = (size_t)t->shape[0];
    it->cols = cols_of(t);
    it->esize = st_dtype_size(t->dtype);
}

static _Atomic int place_now = GM_PLACE_AUTO;

void gm_weights_set_place(gm_place place) { place_now = place; }

int gm_weights_place_arena(gm_place place, const char *thp)
{
    if (place != GM_PLACE_AUTO)
        return place == GM_PLACE_ARENA;
    char buf[256] = "";
    if (!thp) {
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
        if (f) {
            if (!fgets(buf, sizeof buf, f))
                buf[0] = 0;
            fclose(f);
        }
        thp = buf;
    }
    return strstr(thp, "[always]") != NULL || strstr(thp, "[madvise]") != NULL;
}

/*
** A float tensor: present, with its shape and a float dtype; used in place
** when it is bf16 kept as is and the load does not copy such tensors (copy).
*/
static int plan_float(item *it, const gm_tensor_spec *s, const gm_weights_layout *lay, const st_model *m, int copy,
                      gm_status *st)
{
    const st_tensor *t;
    if (st_model_check(m, it->name, s->rank, s->shape, s->transpose, &t, st))
        return st->code;
    from_file(it, ITEM_FLOAT, t, m);
    it->to = !s->transpose || lay->form == GM_W_NK ? 0 : lay->form == GM_W_KN ? 1 : gm_wform_panel(lay->form);
    it->in_place = !copy && read_straight(it) && it->data && (uintptr_t)it->data % 2 == 0;
    return 0;
}

/* A quantized part: present, with exactly its shape and dtype; used in place when aligned to its element. */
static int plan_part(item *it, const gm_tensor_spec *s, const st_model *m, gm_status *st)
{
    const st_tensor *t;
    if (st_model_check_as(m, it->name, s->rank, s->shape, (st_dtype)s->dtype, &t, st))
        return st->code;
    from_file(it, ITEM_PART, t, m);
    it->in_place = it->data && (uintptr_t)it->data % it->esize == 0;
    return 0;
}

/* A dequantized projection: its rule's natural form, and whether it is held in the other one. */
static int plan_dequant(item *it, const gm_tensor_spec *s, const gm_weights_layout *lay, gm_status *st)
{
    if (!lay->quant || (int)lay->quant->method != s->quant || s->rank != 2)
        return gm_fail(st, GM_EFORMAT, "tensor '%s': the loader's table dequantizes it as %s, the model's Config "
                       "says %s (regenerate the model's sources)", it->name, gm_quant_method_name(s->quant),
                       gm_quant_method_name(lay->quant ? lay->quant->method : GM_QUANT_NONE));
    const gm_wform natural = gm_quant_natural_form(lay->quant->method);
    const size_t out = (size_t)s->shape[0], in = (size_t)s->shape[1];
    it->kind = ITEM_DEQUANT;
    it->rows = natural == GM_W_KN ? in : out;
    it->cols = natural == GM_W_KN ? out : in;
    it->esize = 2;
    it->type = GM_SRC_BF16;
    const gm_wform held = s->transpose ? lay->form : GM_W_NK;
    it->panel = gm_wform_panel(held);
    it->transpose = (held == GM_W_NK ? GM_W_NK : GM_W_KN) != natural;
    it->qp.out = out;
    it->qp.in = in;
    return 0;
}

/*
** A dequantized projection's parts: the specs after its own (start[j] is
** spec j's first item), each checked against the shape and dtype its rule
** reads (gm_quant_check_part), so that a table and a file which agree with
** each other cannot make the rule read outside them.
*/
static int link_parts(plan *p, const gm_tensor_spec *specs, size_t n_specs, size_t i, int l, const size_t *start,
                      gm_status *st)
{
    item *it = &p->items[start[i] + (size_t)l];
    for (size_t j = i + 1; j < n_specs && specs[j].part; j++) {
        const item *part = &p->items[start[j] + (size_t)(specs[j].per_layer ? l : 0)];
        if (gm_quant_check_part(p->quant, it->qp.out, it->qp.in, specs[j].part, part->t->rank, part->t->shape,
                                (int)part->t->dtype, part->name, st))
            return st->code;
        it->parts[specs[j].part - 1] = part;
    }
    for (int k = 0; k < gm_quant_n_parts(p->quant->method); k++)
        if (!it->parts[k] && !gm_quant_part_optional(p->quant->method, k + 1))
            return gm_fail(st, GM_EFORMAT, "tensor '%s': the loader's table lists no part %d of it (%s) "
                           "(regenerate the model's sources)", it->name, k + 1, gm_quant_method_name(p->quant->method));
    return 0;
}

/*
** Plan: check every tensor the specs name (present, shape, dtype), decide
** where it is held (in place, or its place in the arena, 64-byte aligned:
** gm_weights_set_place), and cut it into pieces of about PIECE_BYTES, whole
** multiples of 32 rows.
*/
static int plan_load(plan *p, const gm_weights_layout *lay, const gm_tensor_spec *specs, size_t n_specs,
                     const st_model *m, const char *dir, gm_status *st)
{
    size_t n_items = 0, n_pieces = 0;
    size_t *start = calloc(n_specs ? n_specs : 1, sizeof *start);
    if (!start)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
    for (size_t i = 0; i < n_specs; i++) {
        start[i] = n_items;
        n_items += specs[i].per_layer ? (size_t)lay->n_layers : 1;
    }
    p->quant = lay->quant;
    const int copy = gm_weights_place_arena((gm_place)place_now, NULL);
    if (!(p->items = calloc(n_items ? n_items : 1, sizeof *p->items))) {
        free(start);
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
    }
    for (size_t i = 0; i < n_specs && !st->code; i++) {
        const gm_tensor_spec *s = &specs[i];
        for (int l = 0; l < (s->per_layer ? lay->n_layers : 1); l++) {
            item *it = &p->items[p->n_items++];
            name_of(it->name, sizeof it->name, s, l);
            it->field = field(lay, s, l);
            if (s->quant ? plan_dequant(it, s, lay, st) : s->part ? plan_part(it, s, m, st)
                                                                  : plan_float(it, s, lay, m, copy, st))
                break;
            it->offset = p->size;
            if (!it->in_place) {
                const size_t bytes = it->rows * it->cols * (it->kind == ITEM_PART ? it->esize : 2);
                p->size += (bytes + 63) / 64 * 64;
            }
            const size_t step = piece_rows(it), rows = rows_of(it);
            n_pieces += rows ? (rows + step - 1) / step : 1;
        }
    }
    for (size_t i = 0; i < n_specs && !st->code; i++)
        for (int l = 0; specs[i].quant && l < (specs[i].per_layer ? lay->n_layers : 1); l++)
            if (link_parts(p, specs, n_specs, i, l, start, st))
                break;
    free(start);
    if (st->code)
        return st->code;
    if (!(p->pieces = calloc(n_pieces ? n_pieces : 1, sizeof *p->pieces)) ||
        !(p->errors = calloc(n_pieces ? n_pieces : 1, sizeof *p->errors)))
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
    for (size_t i = 0; i < p->n_items; i++) {
        const item *it = &p->items[i];
        const size_t rows = rows_of(it), step = piece_rows(it);
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

/*
** Place: the arena, and every field pointing at its tensor's place, in it or
** in a mapping; each dequantized projection told where its parts are.
*/
static int place(plan *p, gm_arena *arena, gm_status *st)
{
    if (arena_new(arena, p->size, st))
        return st->code;
    p->base = arena->base;
    for (size_t i = 0; i < p->n_items; i++) {
        item *it = &p->items[i];
        set_field(it->field, dst_of(p, it));
        if (it->kind != ITEM_DEQUANT)
            continue;
        for (int k = 0; k < GM_QUANT_MAX_PARTS; k++)
            if (it->parts[k])
                it->qp.part[k] = dst_of(p, it->parts[k]);
        const int scales = gm_quant_scale_part(p->quant->method);
        if (scales)
            it->qp.scale_type = it->parts[scales - 1]->type;
        if (p->quant->method == GM_QUANT_GPTQ && it->parts[GM_GPTQ_G_IDX - 1])
            it->qp.g_idx_name = it->parts[GM_GPTQ_G_IDX - 1]->name;
    }
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
** n bytes of the item's file from byte `off` on into dst (pread, as a
** copying loader at its least does: the page cache's pages are neither
** mapped nor let go again); a read error or a file that ends early is the
** load's, in *err.
*/
static int read_at(const item *it, void *dst, uint64_t off, size_t n, gm_status *err)
{
    for (size_t got = 0; got < n;) {
        const ssize_t r = pread(it->src.fd, (uint8_t *)dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return gm_fail(err, GM_EIO, "%s: tensor '%s': read failed at byte %llu: %s", it->src.path, it->t->name,
                           (unsigned long long)(off + got), r < 0 ? strerror(errno) : "the file ends there");
        got += (size_t)r;
    }
    return 0;
}

/* Piece k's bytes, copied as they are, read from the file straight into the arena. */
static void read_piece(const plan *p, size_t k)
{
    const piece *pc = &p->pieces[k];
    const item *it = pc->it;
    const size_t rb = row_bytes(it);
    read_at(it, (uint8_t *)dst_of(p, it) + pc->r0 * rb, it->src.offset + pc->r0 * rb, (pc->r1 - pc->r0) * rb,
            &p->errors[k]);
}

/*
** Piece k converted or transposed into the arena: a block of rows at a time
** read from the file into a buffer that stays in cache (about BLOCK_BYTES,
** whole multiples of 32 rows, so that a block is whole panels), then
** converted from there. (Converting from the file's mapping instead, its
** pages mapped in and let go again, took 1.05-1.45x the time on a Zen 4.)
*/
static void convert_piece(const plan *p, size_t k)
{
    const piece *pc = &p->pieces[k];
    const item *it = pc->it;
    const size_t rb = row_bytes(it), fit = rb ? BLOCK_BYTES / rb / 32 * 32 : 0, block = fit ? fit : 32;
    if (!rb || pc->r1 == pc->r0)
        return;
    uint8_t *buf = malloc(block * rb);
    if (!buf) {
        gm_fail(&p->errors[k], GM_ENOMEM, "tensor '%s': out of memory to convert it", it->name);
        return;
    }
    for (size_t r = pc->r0; r < pc->r1; r += block) {
        const size_t n = pc->r1 - r < block ? pc->r1 - r : block;
        if (read_at(it, buf, it->src.offset + r * rb, n * rb, &p->errors[k]))
            break;
        gm_convert_rows(dst_of(p, it), buf, it->type, it->rows, it->cols, r, r + n, it->to);
    }
    free(buf);
}

/*
** Task k: piece k's rows into place. Copied as they are (bf16 into the
** arena's huge pages, or at an odd offset; a part not aligned to its
** element): read from the file straight into the arena (read_piece).
** Converted or transposed: read a block at a time and converted into the
** arena (convert_piece). Used in place: its pages of the mapping read in.
** Either way the process holds the arena and what is used in place, and no
** second copy of the file. Dequantized projections are the next pass's.
*/
static void load_piece(void *ctx, int k)
{
    const plan *p = ctx;
    const item *it = p->pieces[k].it;
    if (it->kind == ITEM_DEQUANT)
        return;
    if (it->in_place)
        populate_piece(p, (size_t)k);
    else if (read_straight(it))
        read_piece(p, (size_t)k);
    else
        convert_piece(p, (size_t)k);
}

/*
** Task k, once every part is in place: a dequantized projection's piece,
** rows [r0, r1) as it is held, whole: in its rule's natural form or in the
** other (gm_dequant_rows_other), so that the piece fills its own rows and
** no other; in panels, outputs [r0, r1), each panel the (in, out) form's
** columns of its outputs, made by whichever of the two gives (in, out).
*/
static void dequant_piece(void *ctx, int k)
{
    const plan *p = ctx;
    const piece *pc = &p->pieces[k];
    const item *it = pc->it;
    if (it->kind != ITEM_DEQUANT)
        return;
    gm_bf16 *dst = dst_of(p, it);
    gm_status *err = &p->errors[k];
    const gm_quant_config *q = p->quant;
    int rc = 0;
    if (it->panel) {
        /* outputs [r0, r1), whole panels: each the (in, out) form's columns [n, n + w), all its rows, [in][w] */
        const size_t P = (size_t)it->panel, in = it->qp.in, out = it->qp.out;
        for (size_t n = pc->r0; n < pc->r1 && !rc; n += P) {
            const size_t w = out - n < P ? out - n : P;
            rc = it->transpose ? gm_dequant_rows_other(q, &it->qp, 0, in, n, n + w, dst + n * in, err)
                               : gm_dequant_rows(q, &it->qp, 0, in, n, n + w, dst + n * in, err);
        }
    } else
        rc = it->transpose ? gm_dequant_rows_other(q, &it->qp, pc->r0, pc->r1, 0, it->rows, dst + pc->r0 * it->rows, err)
                           : gm_dequant_rows(q, &it->qp, pc->r0, pc->r1, 0, it->cols, dst + pc->r0 * it->cols, err);
    if (rc == GM_ENOMEM) /* the rule's own failures name their tensor; this one, the projection */
        gm_fail(err, GM_ENOMEM, "tensor '%s': out of memory to dequantize it", it->name);
    else if (rc == GM_EFORMAT && it->parts[GM_GPTQ_G_IDX - 1] && q->method == GM_QUANT_GPTQ)
        gm_prefix(err, "%s", it->parts[GM_GPTQ_G_IDX - 1]->src.path); /* a g_idx out of range: its file too */
}

/*
** The kernel zeroes a fresh page when it is first touched. Where a tensor
** is written in the order of its rows (writes_in_order), that is just
** before the write fills it, while the zeroes are still in cache, as for any
** copy. Where it is transposed, or dequantized into the other form, the
** writes scatter over the whole tensor or piece long after each page was
** zeroed, so those tensors are touched up front instead (task k: piece k's,
** when it is its tensor's first), zeroed in one stream (MADV_POPULATE_WRITE)
** rather than faulted in under the scattered writes. (Measured on AWQ held
** as (out, in), bench_runner --quant awq, six runs each way in turns: the
** load at 0.61-0.99x the bf16 copy-once touched, 0.83-1.25x faulted in.)
*/
static void touch_tensor(void *ctx, int k)
{
    const plan *p = ctx;
    const piece *pc = &p->pieces[k];
    if (pc->r0 != 0 || writes_in_order(pc->it))
        return;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const gm_bf16 *dst = dst_of(p, pc->it);
    const uintptr_t from = (uintptr_t)dst / page * page;
    const uintptr_t to = (uintptr_t)(dst + pc->it->rows * pc->it->cols);
#ifdef MADV_POPULATE_WRITE
    madvise((void *)from, to - from, MADV_POPULATE_WRITE); /* a hint: without it, pages fault in as written */
#else
    (void)from, (void)to;
#endif
}

/*
** Run: every piece on the pool's threads: the touch pass, the file's
** tensors, then (they read the parts the pass before placed) the
** dequantized projections; the first failure is the load's.
*/
static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(plan *p, gm_arena *arena, int threads, gm_status *st)
{
    gm_pool *pool = gm_pool_new(threads);
    gm_pool_run(pool, (int)p->n_pieces, touch_tensor, p);
    gm_pool_run(pool, (int)p->n_pieces, load_piece, p);
    int failed = 0, quantized = 0;
    for (size_t k = 0; k < p->n_pieces; k++) {
        failed |= p->errors[k].code != 0;
        quantized |= p->pieces[k].it->kind == ITEM_DEQUANT;
    }
    if (!failed && quantized) {
        const double t0 = seconds();
        gm_pool_run(pool, (int)p->n_pieces, dequant_piece, p);
        arena->dequant_seconds = seconds() - t0;
    }
    gm_pool_free(pool);
    for (size_t k = 0; k < p->n_pieces && !st->code; k++)
        if (p->errors[k].code)
            *st = p->errors[k];
    return st->code;
}

int gm_weights_load(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                    size_t n_specs, const char *dir, int threads, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    st_model *m = NULL;
    plan p = {0};
    memset(lay->arena, 0, sizeof *lay->arena);
    if (lay->form != GM_W_NK && lay->form != GM_W_KN && !gm_wform_panel(lay->form))
        return gm_fail(st, GM_EUSAGE, "%s: expected a weight form (GM_W_NK, GM_W_KN, GM_W_PANEL16 or GM_W_PANEL32), "
                       "found %d", dir, (int)lay->form);
    if (st_model_open(&m, dir, st) == GM_OK && plan_load(&p, lay, specs, n_specs, m, dir, st) == GM_OK &&
        place(&p, lay->arena, st) == GM_OK)
        run(&p, lay->arena, threads, st);
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
            set_field(field(lay, &specs[i], l), NULL);
}

const gm_bf16 *gm_weights_find(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                               size_t n_specs, const char *name,
                               const gm_tensor_spec **spec)
{
    char buf[256];
    for (size_t i = 0; i < n_specs; i++) {
        const int n = specs[i].per_layer ? lay->n_layers : 1;
        for (int l = 0; l < n && !specs[i].part; l++) {
            name_of(buf, sizeof buf, &specs[i], l);
            if (strcmp(buf, name) == 0) {
                if (spec)
                    *spec = &specs[i];
                return get_field(field(lay, &specs[i], l));
            }
        }
    }
    return NULL;
}

int gm_weights_load_tensor(const st_model *m, const char *name, int rank, const int64_t *shape, int transpose,
                           gm_bf16 **out, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
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
