/* Loading, finding and freeing weights through a generated tensor table. See gm/weights.h. */
#include "gm/weights.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
/* the parallel load */

typedef struct piece {
    gm_bf16 *dst;          /* the whole tensor */
    const st_tensor *t;
    int transpose;
    int file;              /* index into the open files */
    uint64_t offset;       /* of the tensor's first byte in that file */
    size_t r0, r1;         /* the rows of this piece */
} piece;

typedef struct load_job {
    piece *pieces;
    size_t n_pieces;
    int *fds;
    char **paths;
    gm_status *errors;     /* one per piece; the first failure is reported */
} load_job;

enum {
    PIECE_BYTES = 8u << 20, /* the rows one task loads */
    BLOCK_ROWS = 256        /* the rows read at a time into a buffer to be transposed or converted */
};

/* A tensor's columns: its second dimension, or 1 for a vector. */
static size_t cols_of(const st_tensor *t) { return t->rank == 2 ? (size_t)t->shape[1] : 1; }

/* Whether piece p is bf16 kept as is, read straight into the arena (else it is transposed or converted). */
static int read_straight(const piece *p) { return !p->transpose && p->t->dtype == ST_BF16; }

/* `bytes` of the tensor, from byte `at` of piece p's first row on, into buf: 0, or the failure in errors[i]. */
static int read_rows(const load_job *j, const piece *p, int i, uint8_t *buf, size_t at, size_t bytes)
{
    const size_t row_bytes = cols_of(p->t) * st_dtype_size(p->t->dtype);
    for (size_t got = 0; got < bytes;) {
        const ssize_t k = pread(j->fds[p->file], buf + got, bytes - got,
                                (off_t)(p->offset + p->r0 * row_bytes + at + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return gm_fail(&j->errors[i], GM_EIO, "%s: tensor '%s': read failed: %s", j->paths[p->file],
                           p->t->name, k < 0 ? strerror(errno) : "unexpected end of file");
        got += (size_t)k;
    }
    return 0;
}

/*
** A piece's rows into place. bf16 kept as is: read straight into the arena,
** the least any copying loader can do. Transposed or converted: read
** BLOCK_ROWS rows at a time into a buffer (768 KB for the 3 KB rows of
** most projections, in cache), and from there into the arena. Reading
** rather than mapping the file spares the page tables of its 4 KB pages,
** and no page of the file stays resident.
*/
static void load_piece(void *ctx, int i)
{
    const load_job *j = ctx;
    const piece *p = &j->pieces[i];
    const size_t rows = (size_t)p->t->shape[0], cols = cols_of(p->t), row_bytes = cols * st_dtype_size(p->t->dtype);
    if (read_straight(p)) {
        read_rows(j, p, i, (uint8_t *)(p->dst + p->r0 * cols), 0, (p->r1 - p->r0) * row_bytes);
        return;
    }
    const size_t block = p->r1 - p->r0 < BLOCK_ROWS ? p->r1 - p->r0 : BLOCK_ROWS;
    if (block == 0 || row_bytes == 0)
        return;
    uint8_t *buf = malloc(block * row_bytes);
    if (!buf) {
        gm_fail(&j->errors[i], GM_ENOMEM, "%s: tensor '%s': out of memory for a buffer of %zu bytes",
                j->paths[p->file], p->t->name, block * row_bytes);
        return;
    }
    for (size_t r = p->r0; r < p->r1; r += block) {
        const size_t n = p->r1 - r < block ? p->r1 - r : block;
        if (read_rows(j, p, i, buf, (r - p->r0) * row_bytes, n * row_bytes))
            break;
        st_convert_rows(p->dst, buf, p->t->dtype, rows, cols, r, r + n, p->transpose);
    }
    free(buf);
}

/*
** The kernel zeroes a fresh page when it is first touched. Where a tensor
** is read straight in, that is just before the read fills it, while the
** zeroes are still in cache, as for any copy. Where it is transposed, the
** writes scatter over the whole tensor long after each page was zeroed,
** so those tensors are touched up front instead (task i: piece i's, when it
** is a tensor's first), zeroed in one stream (MADV_POPULATE_WRITE) rather
** than faulted in under the transposes.
*/
static void touch_tensor(void *ctx, int i)
{
    const load_job *j = ctx;
    const piece *p = &j->pieces[i];
    if (p->r0 != 0 || read_straight(p))
        return;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t from = (uintptr_t)p->dst / page * page;
    const uintptr_t to = (uintptr_t)(p->dst + (size_t)p->t->shape[0] * cols_of(p->t));
#ifdef MADV_POPULATE_WRITE
    madvise((void *)from, to - from, MADV_POPULATE_WRITE); /* a hint: without it, pages fault in as written */
#else
    (void)from, (void)to;
#endif
}

/* Fresh memory for size bytes, asking for huge pages (fewer faults on first touch). */
static int arena_new(gm_arena *a, size_t size, gm_status *st)
{
    void *m = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return gm_fail(st, GM_ENOMEM, "weights: cannot allocate %zu bytes: %s", size, strerror(errno));
#ifdef MADV_HUGEPAGE
    madvise(m, size, MADV_HUGEPAGE);
#endif
    a->base = m;
    a->size = size ? size : 1;
    return 0;
}

int gm_weights_load(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                    size_t n_specs, const char *dir, int threads, gm_status *st)
{
    st_model *m = NULL;
    char name[256];
    piece *pieces = NULL;
    size_t n_pieces = 0, cap = 0, total = 0;
    load_job job = {0};
    int n_files = 0;
    memset(lay->arena, 0, sizeof *lay->arena);
    if (st_model_open(&m, dir, st))
        return st->code;

    /* check every tensor, place it in the arena, cut it into pieces of about PIECE_BYTES */
    for (size_t i = 0; i < n_specs; i++) {
        const gm_tensor_spec *s = &specs[i];
        for (int l = 0; l < (s->per_layer ? lay->n_layers : 1); l++) {
            const st_tensor *t;
            name_of(name, sizeof name, s, l);
            if (st_model_check(m, name, s->rank, s->shape, s->transpose, &t, st))
                goto out;
            const size_t rows = (size_t)t->shape[0], cols = cols_of(t);
            const size_t bytes = rows * cols * 2, row_bytes = cols * st_dtype_size(t->dtype);
            size_t step = row_bytes ? PIECE_BYTES / row_bytes : rows;
            step = step < 32 ? 32 : step / 32 * 32;
            const char *fdir, *file;
            uint64_t offset;
            st_model_source(m, t, &fdir, &file, &offset);
            int fi = 0;
            while (fi < n_files && strcmp(job.paths[fi] + strlen(fdir) + 1, file) != 0)
                fi++;
            if (fi == n_files) {
                char **paths = realloc(job.paths, sizeof *paths * (size_t)(n_files + 1));
                int *fds = realloc(job.fds, sizeof *fds * (size_t)(n_files + 1));
                if (paths)
                    job.paths = paths;
                if (fds)
                    job.fds = fds;
                if (!paths || !fds || !(job.paths[n_files] = malloc(strlen(fdir) + strlen(file) + 2))) {
                    gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
                    goto out;
                }
                sprintf(job.paths[n_files], "%s/%s", fdir, file);
                if ((job.fds[n_files] = open(job.paths[n_files], O_RDONLY | O_CLOEXEC)) < 0) {
                    gm_fail(st, GM_EIO, "%s: cannot open: %s", job.paths[n_files], strerror(errno));
                    free(job.paths[n_files]);
                    goto out;
                }
                n_files++;
            }
            for (size_t r = 0; r < rows || (rows == 0 && r == 0); r += step) {
                if (n_pieces == cap) {
                    cap = cap ? 2 * cap : 256;
                    piece *grown = realloc(pieces, sizeof *pieces * cap);
                    if (!grown) {
                        gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
                        goto out;
                    }
                    pieces = grown;
                }
                pieces[n_pieces++] = (piece){(gm_bf16 *)(uintptr_t)total, t, s->transpose, fi, offset, r,
                                             r + step < rows ? r + step : rows};
                if (rows == 0)
                    break;
            }
            *field(lay, s, l) = (gm_bf16 *)(uintptr_t)total; /* an offset until the arena exists */
            total += (bytes + 63) / 64 * 64;
        }
    }
    if (arena_new(lay->arena, total, st))
        goto out;
    char *base = lay->arena->base;
    for (size_t i = 0; i < n_pieces; i++)
        pieces[i].dst = (gm_bf16 *)(void *)(base + (uintptr_t)pieces[i].dst);
    for (size_t i = 0; i < n_specs; i++)
        for (int l = 0; l < (specs[i].per_layer ? lay->n_layers : 1); l++) {
            gm_bf16 **f = field(lay, &specs[i], l);
            *f = (gm_bf16 *)(void *)(base + (uintptr_t)*f);
        }

    job.pieces = pieces;
    job.n_pieces = n_pieces;
    job.errors = calloc(n_pieces ? n_pieces : 1, sizeof *job.errors);
    if (!job.errors) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
        goto out;
    }
    gm_pool *pool = gm_pool_new(threads);
    gm_pool_run(pool, (int)n_pieces, touch_tensor, &job);
    gm_pool_run(pool, (int)n_pieces, load_piece, &job);
    gm_pool_free(pool);
    for (size_t i = 0; i < n_pieces && !st->code; i++)
        if (job.errors[i].code)
            *st = job.errors[i];
out:
    for (int i = 0; i < n_files; i++) {
        close(job.fds[i]);
        free(job.paths[i]);
    }
    free(job.fds);
    free(job.paths);
    free(job.errors);
    free(pieces);
    st_model_close(m);
    if (st->code)
        gm_weights_free(lay, specs, n_specs);
    return st->code;
}

void gm_weights_free(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                     size_t n_specs)
{
    if (lay->arena->base)
        munmap(lay->arena->base, lay->arena->size);
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
