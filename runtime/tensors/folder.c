/*
** A model folder: model.safetensors, or model.safetensors.index.json and the
** shards its weight_map names, each file opened, memory-mapped read-only and
** validated in full (see gm/safetensors.h for the contract). Tensor data is
** taken as little-endian, which is what this (x86-64) host is.
*/
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gm/io.h"
#include "gm/json.h"
#include "st_internal.h"

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"
#define ST_Q4NX_NAME "model.q4nx" /* mlir-air's Q4NX bundle: one safetensors file by another name */
#define ST_SUFFIX ".safetensors"
#define ST_MAX_INDEX (64u << 20) /* an index is kilobytes; the cap bounds what a hostile one costs */

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* ---------------------------------------------------------------------- */
/* index */

static int check_shard_name(const char *s, const char *what, gm_status *st)
{
    size_t n = strlen(s), suffix = strlen(ST_SUFFIX);

    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7F)
            return gm_fail(st, GM_EFORMAT, "%s: shard name has a control byte 0x%02x", what,
                           (unsigned char)*p);
    }
    if (n <= suffix || strcmp(s + n - suffix, ST_SUFFIX) != 0 || strchr(s, '/') != NULL ||
        strstr(s, "..") != NULL)
        return gm_fail(st, GM_EFORMAT,
                       "%s: shard name '%s' is not a plain file name ending in '.safetensors'",
                       what, s);
    return GM_OK;
}

/* Parse an index: *root owns the tree, *wm points at its weight_map object. */
static int parse_index(const char *json, size_t len, const char *what, cJSON **root,
                       const cJSON **wm, gm_status *st)
{
    const cJSON *item;

    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (*root == NULL || !cJSON_IsObject(*root))
        return gm_fail(st, GM_EFORMAT, "%s: not a json object", what);
    if (gm_json_ws(end, json + len) != json + len) /* as Python's json.load: nothing but spaces after it */
        return gm_fail(st, GM_EFORMAT, "%s: expected the end of the file after the JSON object at byte %zu, found "
                       "more", what, (size_t)(end - json));
    *wm = cJSON_GetObjectItemCaseSensitive(*root, "weight_map");
    if (!cJSON_IsObject(*wm))
        return gm_fail(st, GM_EFORMAT, "%s: weight_map is missing or not an object", what);
    if ((*wm)->child == NULL)
        return gm_fail(st, GM_EFORMAT, "%s: weight_map is empty", what);
    cJSON_ArrayForEach(item, *wm) {
        if (!cJSON_IsString(item))
            return gm_fail(st, GM_EFORMAT, "%s: weight_map entry '%s' is not a string", what,
                           item->string);
        if (check_shard_name(item->valuestring, what, st))
            return st->code;
    }
    return GM_OK;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct values of weight_map, sorted. */
static int distinct_shards(const cJSON *wm, const char *what, char ***shards, size_t *n_shards,
                           gm_status *st)
{
    const cJSON *item;
    size_t n = 0, kept = 0;
    char **names = NULL;

    cJSON_ArrayForEach(item, wm) n++;
    if ((names = calloc(n, sizeof *names)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", what);
    cJSON_ArrayForEach(item, wm) names[kept++] = item->valuestring;
    qsort(names, n, sizeof *names, cmp_str_ptr);
    kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept > 0 && strcmp(names[kept - 1], names[i]) == 0)
            continue;
        names[kept++] = names[i];
    }
    for (size_t i = 0; i < kept; i++) {
        if ((names[i] = strdup(names[i])) == NULL) {
            st_free_names(names, i);
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", what);
        }
    }
    *shards = names;
    *n_shards = kept;
    return GM_OK;
}

int st_index_shards(const char *json, size_t len, const char *what, char ***shards,
                    size_t *n_shards, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    cJSON *root = NULL;
    const cJSON *wm = NULL;

    *shards = NULL;
    *n_shards = 0;
    gm_status_clear(st);
    if (parse_index(json, len, what, &root, &wm, st) == GM_OK)
        distinct_shards(wm, what, shards, n_shards, st);
    cJSON_Delete(root);
    return st->code;
}

void st_free_names(char **names, size_t n)
{
    if (names == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* ---------------------------------------------------------------------- */
/* model: a folder of memory-mapped files */

typedef struct st_file {
    char *name;         /* file name inside the folder, used in messages */
    char *path;         /* folder/name */
    int fd;             /* open until st_model_close: the loader reads the tensors through it */
    const uint8_t *map; /* the whole file, read-only; NULL for an empty file */
    size_t size;
    st_header h;
} st_file;

typedef struct st_entry {
    const st_tensor *t;
    size_t file;
    int seen; /* set while cross-checking against weight_map */
} st_entry;

struct st_model {
    char *dir;
    st_file *files;
    size_t n_files;
    st_entry *all; /* every tensor of every file, sorted by name */
    size_t n_all;
};

/* Open, map and validate file f of folder dir; f->fd stays open. */
static int map_file(st_file *f, const char *dir, gm_status *st)
{
    struct stat sb;
    void *map;

    if ((f->path = join_path(dir, f->name)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", f->name);
    if ((f->fd = gm_open_regular(f->path, &sb, st)) < 0)
        return st->code;
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
        if (map == MAP_FAILED)
            return gm_fail(st, GM_EIO, "%s: cannot mmap: %s", f->path, strerror(errno));
        f->map = map;
    }
    return st_header_parse(&f->h, f->map, f->size, f->size, f->path, st); /* named with its folder: which model's */
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->t->name, ((const st_entry *)b)->t->name);
}

static int cmp_key_entry(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const st_entry *)elem)->t->name);
}

/* Merge every file's tensors into m->all, sorted; a name in two files is an error. */
static int merge_tensors(st_model *m, gm_status *st)
{
    size_t n = 0, k = 0;

    for (size_t i = 0; i < m->n_files; i++)
        n += m->files[i].h.n_tensors;
    if (n > 0 && (m->all = calloc(n, sizeof *m->all)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory for %zu tensors", m->dir, n);
    for (size_t i = 0; i < m->n_files; i++) {
        for (size_t j = 0; j < m->files[i].h.n_tensors; j++)
            m->all[k++] = (st_entry){&m->files[i].h.tensors[j], i, 0};
    }
    m->n_all = n;
    if (n > 0)
        qsort(m->all, n, sizeof *m->all, cmp_entry);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(m->all[i - 1].t->name, m->all[i].t->name) == 0)
            return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' is in both %s and %s", m->dir,
                           m->all[i].t->name, m->files[m->all[i - 1].file].name,
                           m->files[m->all[i].file].name);
    }
    return GM_OK;
}

static st_entry *find_entry(const st_model *m, const char *name)
{
    if (m->n_all == 0)
        return NULL;
    return bsearch(name, m->all, m->n_all, sizeof *m->all, cmp_key_entry);
}

/* weight_map and the shard headers must agree both ways. */
static int cross_check(st_model *m, const cJSON *wm, gm_status *st)
{
    const cJSON *item;
    const char *dup;

    if ((dup = st_duplicate_key(wm)) != NULL)
        return gm_fail(st, GM_EFORMAT, "%s: weight_map names tensor '%s' twice", ST_INDEX_NAME,
                       dup);
    cJSON_ArrayForEach(item, wm) {
        st_entry *e = find_entry(m, item->string);
        if (e == NULL)
            return gm_fail(st, GM_EMISSING, "%s: tensor '%s' is mapped to %s but missing from it",
                           ST_INDEX_NAME, item->string, item->valuestring);
        if (strcmp(m->files[e->file].name, item->valuestring) != 0)
            return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' is mapped to %s but found in %s",
                           ST_INDEX_NAME, item->string, item->valuestring,
                           m->files[e->file].name);
        e->seen = 1;
    }
    for (size_t i = 0; i < m->n_all; i++) {
        if (!m->all[i].seen)
            return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' is not in the weight_map of %s",
                           m->files[m->all[i].file].name, m->all[i].t->name, ST_INDEX_NAME);
    }
    return GM_OK;
}

static int add_files(st_model *m, char **names, size_t n, gm_status *st)
{
    if ((m->files = calloc(n, sizeof *m->files)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", m->dir);
    for (size_t i = 0; i < n; i++) {
        m->files[i].name = names[i];
        m->files[i].fd = -1;
        names[i] = NULL;
        m->n_files++;
        if (map_file(&m->files[i], m->dir, st))
            return st->code;
    }
    return GM_OK;
}

static int open_sharded(st_model *m, gm_status *st)
{
    char *path = join_path(m->dir, ST_INDEX_NAME);
    char *text = NULL, **names = NULL;
    size_t len = 0, n_names = 0;
    cJSON *root = NULL;
    const cJSON *wm = NULL;

    if (path == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", m->dir);
    if (access(path, F_OK) != 0) {
        static const char *const links[] = {ST_SINGLE_NAME, ST_INDEX_NAME, ST_Q4NX_NAME};
        for (size_t i = 0; i < 3 && !st->code; i++) { /* a link to nothing is not a missing download */
            char *p = join_path(m->dir, links[i]);
            if (p)
                gm_dangling(p, st);
            free(p);
        }
        if (!st->code)
            gm_fail(st, GM_EMISSING, "%s: neither %s nor %s is present (nor a Q4NX bundle, %s)", m->dir,
                    ST_SINGLE_NAME, ST_INDEX_NAME, ST_Q4NX_NAME);
        goto out;
    }
    if (gm_read_file(path, ST_MAX_INDEX, &text, &len, st) ||
        parse_index(text, len, path, &root, &wm, st) || distinct_shards(wm, path, &names, &n_names, st) ||
        add_files(m, names, n_names, st) || merge_tensors(m, st))
        goto out;
    cross_check(m, wm, st);
out:
    st_free_names(names, n_names);
    cJSON_Delete(root);
    free(text);
    free(path);
    return st->code;
}

static int open_single(st_model *m, const char *file, gm_status *st)
{
    char *name = strdup(file);

    if (name == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", m->dir);
    if (add_files(m, &name, 1, st) == GM_OK)
        merge_tensors(m, st);
    free(name);
    return st->code;
}

int st_model_open(st_model **out, const char *dir, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    st_model *m = NULL;
    char *single = NULL, *q4nx = NULL, *index = NULL;

    *out = NULL;
    gm_status_clear(st);
    struct stat sb;
    if (stat(dir, &sb) != 0) /* a mistyped path: said as such, not as a folder without weights */
        return gm_fail(st, GM_EMISSING, "%s: expected a model folder, found none (%s)", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return gm_fail(st, GM_EMISSING, "%s: expected a model folder, found a file", dir);
    if ((m = calloc(1, sizeof *m)) == NULL || (m->dir = strdup(dir)) == NULL ||
        (single = join_path(dir, ST_SINGLE_NAME)) == NULL || (q4nx = join_path(dir, ST_Q4NX_NAME)) == NULL ||
        (index = join_path(dir, ST_INDEX_NAME)) == NULL) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
        goto out;
    }
    if (access(single, F_OK) == 0)
        open_single(m, ST_SINGLE_NAME, st);
    else if (access(index, F_OK) != 0 && access(q4nx, F_OK) == 0)
        open_single(m, ST_Q4NX_NAME, st);
    else
        open_sharded(m, st);
out:
    free(single);
    free(q4nx);
    free(index);
    if (st->code != GM_OK)
        st_model_close(m);
    else
        *out = m;
    return st->code;
}

const st_tensor *st_model_find(const st_model *m, const char *name, const char **file)
{
    const st_entry *e = find_entry(m, name);

    if (e == NULL)
        return NULL;
    if (file != NULL)
        *file = m->files[e->file].name;
    return e->t;
}

size_t st_model_n_tensors(const st_model *m)
{
    return m->n_all;
}

static const st_file *file_of(const st_model *m, const st_tensor *t)
{
    for (size_t i = 0; i < m->n_files; i++) {
        const st_header *h = &m->files[i].h;
        if (h->n_tensors > 0 && t >= h->tensors && t < h->tensors + h->n_tensors)
            return &m->files[i];
    }
    return NULL;
}

const void *st_model_data(const st_model *m, const st_tensor *t)
{
    const st_file *f = file_of(m, t);

    if (f == NULL || f->map == NULL)
        return NULL;
    return f->map + 8 + f->h.header_len + t->begin;
}

void st_model_close(st_model *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->n_files; i++) {
        st_file *f = &m->files[i];
        if (f->map != NULL)
            munmap((void *)f->map, f->size);
        if (f->fd >= 0)
            close(f->fd);
        st_header_free(&f->h);
        free(f->name);
        free(f->path);
    }
    free(m->files);
    free(m->all);
    free(m->dir);
    free(m);
}

/* ---------------------------------------------------------------------- */
/* checks */

static int check_shape(const st_tensor *t, const char *file, int rank, const int64_t *shape, gm_status *st)
{
    char found[160], want[160];
    int same = t->rank == rank;

    for (int i = 0; same && i < rank; i++)
        same = t->shape[i] == shape[i];
    if (!same)
        return gm_fail(st, GM_ESHAPE, "%s: tensor '%s' has shape %s, expected %s", file, t->name,
                       st_fmt_shape(found, sizeof found, t->rank, t->shape),
                       st_fmt_shape(want, sizeof want, rank < 0 ? 0 : rank, shape));
    return GM_OK;
}

static int check_load(const st_tensor *t, const char *file, int rank, const int64_t *shape,
                      int transpose, gm_status *st)
{
    if (check_shape(t, file, rank, shape, st))
        return st->code;
    if (transpose && rank != 2)
        return gm_fail(st, GM_ESHAPE, "%s: tensor '%s' has rank %d, transposing needs rank 2",
                       file, t->name, rank);
    if (t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F32)
        return gm_fail(st, GM_EDTYPE, "%s: tensor '%s' has dtype %s, expected BF16, F16 or F32",
                       file, t->name, st_dtype_name(t->dtype));
    return GM_OK;
}

/*
** Tensor `name` checked for its shape and either a float dtype it can be
** loaded from (dtype < 0; rank 2 when it is to be transposed) or exactly
** dtype; *out receives it.
*/
static int check(const st_model *m, const char *name, int rank, const int64_t *shape, int transpose, int dtype,
                 const st_tensor **out, gm_status *st)
{
    const char *file = NULL;
    const st_tensor *t;
    *out = NULL;
    gm_status_clear(st);
    if ((t = st_model_find(m, name, &file)) == NULL)
        return gm_fail(st, GM_EMISSING, "%s: tensor '%s' is missing", m->dir, name);
    if (dtype < 0 ? check_load(t, file, rank, shape, transpose, st) : check_shape(t, file, rank, shape, st))
        return st->code;
    if (dtype >= 0 && t->dtype != (st_dtype)dtype)
        return gm_fail(st, GM_EDTYPE, "%s: tensor '%s' has dtype %s, expected %s", file, name,
                       st_dtype_name(t->dtype), st_dtype_name((st_dtype)dtype));
    *out = t;
    return GM_OK;
}

int st_model_check(const st_model *m, const char *name, int rank, const int64_t *shape, int transpose,
                   const st_tensor **out, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    return check(m, name, rank, shape, transpose, -1, out, st);
}

int st_model_check_as(const st_model *m, const char *name, int rank, const int64_t *shape, st_dtype dtype,
                      const st_tensor **out, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    return check(m, name, rank, shape, 0, (int)dtype, out, st);
}

st_source st_model_source(const st_model *m, const st_tensor *t)
{
    const st_file *f = file_of(m, t);
    return (st_source){f->fd, f->path, 8 + f->h.header_len + t->begin};
}
