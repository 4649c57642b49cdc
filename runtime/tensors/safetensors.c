/*
** Strict safetensors reader (see gm/safetensors.h for the contract).
**
** Every rule of the reference implementation is one check here with one
** message. Tensor data is read straight out of a read-only mmap, so it is
** taken as little-endian, which is what this (x86-64) host is; element reads
** go through memcpy because the data section is only 8-byte aligned.
*/
#include "gm/safetensors.h"

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
#ifdef __SSE2__
#include <emmintrin.h>
#include <immintrin.h>
#endif

#define ST_MAX_EXACT 9007199254740992.0 /* 2^53: larger doubles are not exact integers */
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"
#define ST_SUFFIX ".safetensors"

/* ---------------------------------------------------------------------- */
/* dtypes */

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},   [ST_I8] = {"I8", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_I16] = {"I16", 2},         [ST_U16] = {"U16", 2}, [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},       [ST_I32] = {"I32", 4}, [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},         [ST_F64] = {"F64", 8}, [ST_I64] = {"I64", 8},
    [ST_U64] = {"U64", 8},
};

const char *st_dtype_name(st_dtype d)
{
    if ((unsigned)d >= ST_DTYPE_COUNT)
        return NULL;
    return dtypes[d].name;
}

size_t st_dtype_size(st_dtype d)
{
    if ((unsigned)d >= ST_DTYPE_COUNT)
        return 0;
    return dtypes[d].size;
}

static int dtype_from_name(const char *s, st_dtype *d)
{
    for (int i = 0; i < ST_DTYPE_COUNT; i++) {
        if (strcmp(s, dtypes[i].name) == 0) {
            *d = (st_dtype)i;
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* small helpers */

/* "[2, 3]" into buf (always NUL-terminated, cut if too long). */
static const char *fmt_shape(char *buf, size_t cap, int rank, const int64_t *shape)
{
    size_t used = 0;

    buf[0] = '\0';
    used += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}

/* Length of a valid UTF-8 sequence at s (n bytes left), or 0 when invalid. */
static size_t utf8_seq_len(const uint8_t *s, size_t n)
{
    uint32_t cp;
    size_t len;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2, cp = s[0] & 0x1Fu;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3, cp = s[0] & 0x0Fu;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4, cp = s[0] & 0x07u;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0u) != 0x80u)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Offset of the first invalid UTF-8 byte, or n when all are valid. */
static size_t utf8_check(const uint8_t *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t len = utf8_seq_len(s + i, n - i);
        if (len == 0)
            return i;
        i += len;
    }
    return n;
}

/* A JSON number that is an integer in [0, 2^53]. */
static int json_u53(const cJSON *item, uint64_t *v)
{
    if (!cJSON_IsNumber(item))
        return 0;
    double d = item->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_EXACT) || d != (double)(uint64_t)d)
        return 0;
    *v = (uint64_t)d;
    return 1;
}

/* The first key that appears twice among obj's members, or NULL. */
static const char *duplicate_key(const cJSON *obj)
{
    for (const cJSON *a = obj->child; a != NULL; a = a->next)
        for (const cJSON *b = a->next; b != NULL; b = b->next)
            if (strcmp(a->string, b->string) == 0)
                return a->string;
    return NULL;
}

static int read_full(int fd, void *buf, size_t n, size_t *got)
{
    size_t done = 0;

    while (done < n) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* ---------------------------------------------------------------------- */
/* header */

int st_header_len(const uint8_t *buf, size_t len, uint64_t *n, const char *what,
                  gm_status *st)
{
    uint64_t v = 0;

    if (len < 8)
        return gm_fail(st, GM_EFORMAT, "%s: header too small: %zu bytes, expected at least 8",
                       what, len);
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | buf[i];
    if (v > ST_MAX_HEADER)
        return gm_fail(st, GM_EFORMAT, "%s: header length %" PRIu64 " exceeds the limit of %u",
                       what, v, ST_MAX_HEADER);
    *n = v;
    return GM_OK;
}

static int parse_shape(st_tensor *t, const cJSON *shape, const char *what, gm_status *st)
{
    const cJSON *dim;
    int rank = 0;

    if (!cJSON_IsArray(shape))
        return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' has no shape array", what, t->name);
    cJSON_ArrayForEach(dim, shape) {
        uint64_t v;
        if (rank == ST_MAX_RANK)
            return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' has rank %d, expected at most %d",
                           what, t->name, cJSON_GetArraySize(shape), ST_MAX_RANK);
        if (!json_u53(dim, &v))
            return gm_fail(st, GM_EFORMAT,
                           "%s: tensor '%s' has shape entry %d that is not an integer in [0, 2^53]",
                           what, t->name, rank);
        t->shape[rank++] = (int64_t)v;
    }
    t->rank = rank;
    return GM_OK;
}

static int parse_offsets(st_tensor *t, const cJSON *offs, const char *what, gm_status *st)
{
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !json_u53(cJSON_GetArrayItem(offs, 0), &t->begin) ||
        !json_u53(cJSON_GetArrayItem(offs, 1), &t->end))
        return gm_fail(st, GM_EFORMAT,
                       "%s: tensor '%s' has bad data_offsets, expected [begin, end] integers in "
                       "[0, 2^53]",
                       what, t->name);
    if (t->begin > t->end)
        return gm_fail(st, GM_EFORMAT,
                       "%s: tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64
                       "], begin after end",
                       what, t->name, t->begin, t->end);
    return GM_OK;
}

/* dtype size x product(shape), overflow-checked, must equal end - begin. */
static int check_span(const st_tensor *t, const char *what, gm_status *st)
{
    char shape[160];
    uint64_t bytes = st_dtype_size(t->dtype);

    for (int i = 0; i < t->rank; i++) {
        if (__builtin_mul_overflow(bytes, (uint64_t)t->shape[i], &bytes))
            return gm_fail(st, GM_EFORMAT, "%s: tensor '%s': the size of %s %s overflows", what,
                           t->name, st_dtype_name(t->dtype),
                           fmt_shape(shape, sizeof shape, t->rank, t->shape));
    }
    if (bytes != t->end - t->begin)
        return gm_fail(st, GM_EFORMAT,
                       "%s: tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64
                       "], expected a span of %" PRIu64 " bytes for %s %s",
                       what, t->name, t->begin, t->end, bytes, st_dtype_name(t->dtype),
                       fmt_shape(shape, sizeof shape, t->rank, t->shape));
    return GM_OK;
}

static int parse_tensor(st_tensor *t, const cJSON *entry, const char *what, gm_status *st)
{
    const cJSON *dtype;
    const char *dup;

    if (!cJSON_IsObject(entry))
        return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' is not an object", what, t->name);
    if ((dup = duplicate_key(entry)) != NULL)
        return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' has a duplicate key '%s'", what, t->name,
                       dup);
    dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    if (!cJSON_IsString(dtype))
        return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' has no dtype string", what, t->name);
    if (!dtype_from_name(dtype->valuestring, &t->dtype))
        return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' has unknown dtype '%s'", what, t->name,
                       dtype->valuestring);
    if (parse_shape(t, cJSON_GetObjectItemCaseSensitive(entry, "shape"), what, st) ||
        parse_offsets(t, cJSON_GetObjectItemCaseSensitive(entry, "data_offsets"), what, st))
        return st->code;
    return check_span(t, what, st);
}

static int check_metadata(const cJSON *meta, const char *what, gm_status *st)
{
    const cJSON *item;
    const char *dup;

    if (!cJSON_IsObject(meta))
        return gm_fail(st, GM_EFORMAT, "%s: __metadata__ is not an object", what);
    cJSON_ArrayForEach(item, meta) {
        if (!cJSON_IsString(item))
            return gm_fail(st, GM_EFORMAT, "%s: __metadata__ entry '%s' is not a string", what,
                           item->string);
    }
    if ((dup = duplicate_key(meta)) != NULL)
        return gm_fail(st, GM_EFORMAT, "%s: __metadata__ has a duplicate key '%s'", what, dup);
    return GM_OK;
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int cmp_by_offsets(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* Sorted by offsets, the tensors must cover [0, data_len) with no gap or overlap. */
static int check_tiling(st_header *h, const char *what, gm_status *st)
{
    const st_tensor **order = NULL;
    uint64_t at = 0;
    const st_tensor *prev = NULL;

    if (h->n_tensors > 0 && (order = malloc(h->n_tensors * sizeof *order)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory sorting %zu tensors", what, h->n_tensors);
    for (size_t i = 0; i < h->n_tensors; i++)
        order[i] = &h->tensors[i];
    if (h->n_tensors > 0)
        qsort(order, h->n_tensors, sizeof *order, cmp_by_offsets);
    for (size_t i = 0; i < h->n_tensors; i++) {
        const st_tensor *t = order[i];
        if (t->begin > at) {
            gm_fail(st, GM_EFORMAT,
                    "%s: tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64
                    "], expected to start at byte %" PRIu64 " (a hole in the data)",
                    what, t->name, t->begin, t->end, at);
            goto out;
        }
        if (t->begin < at) {
            gm_fail(st, GM_EFORMAT,
                    "%s: tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64
                    "], expected to start at byte %" PRIu64 " (overlaps tensor '%s')",
                    what, t->name, t->begin, t->end, at, prev->name);
            goto out;
        }
        at = t->end;
        prev = t;
    }
    h->data_len = at;
out:
    free(order);
    return st->code;
}

/* Collect the tensor entries of root into h->tensors (not yet validated as a whole). */
static int collect_tensors(st_header *h, const cJSON *root, const char *what, gm_status *st)
{
    const cJSON *item;
    size_t n = 0, n_meta = 0;

    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0)
            n_meta++;
        else
            n++;
    }
    if (n_meta > 1)
        return gm_fail(st, GM_EFORMAT, "%s: duplicate tensor name '__metadata__'", what);
    if (n > 0 && (h->tensors = calloc(n, sizeof *h->tensors)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory for %zu tensors", what, n);
    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (check_metadata(item, what, st))
                return st->code;
            continue;
        }
        st_tensor *t = &h->tensors[h->n_tensors];
        if ((t->name = strdup(item->string)) == NULL)
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", what);
        h->n_tensors++;
        if (parse_tensor(t, item, what, st))
            return st->code;
    }
    return GM_OK;
}

static int sort_and_check_names(st_header *h, const char *what, gm_status *st)
{
    if (h->n_tensors == 0)
        return GM_OK;
    qsort(h->tensors, h->n_tensors, sizeof *h->tensors, cmp_by_name);
    for (size_t i = 1; i < h->n_tensors; i++) {
        if (strcmp(h->tensors[i - 1].name, h->tensors[i].name) == 0)
            return gm_fail(st, GM_EFORMAT, "%s: duplicate tensor name '%s'", what,
                           h->tensors[i].name);
    }
    return GM_OK;
}

/* Offset of the first control byte JSON never allows raw (not tab, LF, CR), or n. */
static size_t control_check(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return i;
    }
    return n;
}

/* The byte-level rules before JSON: length, '{', UTF-8, no raw control bytes. */
static int check_header_bytes(const uint8_t *buf, size_t len, uint64_t n, const char *what,
                              gm_status *st)
{
    size_t bad;

    if (n > len - 8)
        return gm_fail(st, GM_EFORMAT,
                       "%s: header length %" PRIu64 " runs past the end: 8 + %" PRIu64
                       " > %zu bytes available",
                       what, n, n, len);
    if (n == 0)
        return gm_fail(st, GM_EFORMAT, "%s: header must start with '{', found an empty header",
                       what);
    if (buf[8] != '{')
        return gm_fail(st, GM_EFORMAT, "%s: header must start with '{', found byte 0x%02x", what,
                       buf[8]);
    if ((bad = utf8_check(buf + 8, (size_t)n)) != n)
        return gm_fail(st, GM_EFORMAT, "%s: header is not valid utf-8 at byte %zu", what, 8 + bad);
    if ((bad = control_check(buf + 8, (size_t)n)) != n)
        return gm_fail(st, GM_EFORMAT,
                       "%s: header is not valid json: control byte 0x%02x at byte %zu", what,
                       buf[8 + bad], 8 + bad);
    return GM_OK;
}

/* Bytes after the closing '}' may only be 0x20. */
static int check_padding(const uint8_t *buf, uint64_t n, const char *end, const char *what,
                         gm_status *st)
{
    const uint8_t *p = (const uint8_t *)end, *stop = buf + 8 + n;

    for (; p < stop; p++) {
        if (*p != ' ')
            return gm_fail(st, GM_EFORMAT,
                           "%s: byte 0x%02x at offset %td after the json header, expected only "
                           "space padding",
                           what, *p, p - buf);
    }
    return GM_OK;
}

int st_header_parse(st_header *h, const uint8_t *buf, size_t len, uint64_t file_size,
                    const char *what, gm_status *st)
{
    cJSON *root = NULL;
    const char *end = NULL;
    uint64_t n = 0;

    memset(h, 0, sizeof *h);
    gm_status_clear(st);
    if (st_header_len(buf, len, &n, what, st) || check_header_bytes(buf, len, n, what, st))
        goto out;
    root = cJSON_ParseWithLengthOpts((const char *)buf + 8, (size_t)n, &end, 0);
    if (root == NULL) {
        gm_fail(st, GM_EFORMAT, "%s: header is not valid json (error near byte %td)", what,
                end != NULL ? end - (const char *)buf : (ptrdiff_t)8);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        gm_fail(st, GM_EFORMAT, "%s: header is not a json object", what);
        goto out;
    }
    if (check_padding(buf, n, end, what, st) || collect_tensors(h, root, what, st) ||
        sort_and_check_names(h, what, st) || check_tiling(h, what, st))
        goto out;
    h->header_len = n;
    if (file_size != 0 && 8 + n + h->data_len != file_size)
        gm_fail(st, GM_EFORMAT,
                "%s: file is %" PRIu64 " bytes, expected 8 + %" PRIu64 " + %" PRIu64
                " = %" PRIu64 " (data section not fully covered)",
                what, file_size, n, h->data_len, 8 + n + h->data_len);
out:
    cJSON_Delete(root);
    if (st->code != GM_OK)
        st_header_free(h);
    return st->code;
}

static int cmp_key_tensor(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const st_tensor *)elem)->name);
}

const st_tensor *st_header_find(const st_header *h, const char *name)
{
    if (h->n_tensors == 0)
        return NULL;
    return bsearch(name, h->tensors, h->n_tensors, sizeof *h->tensors, cmp_key_tensor);
}

void st_header_free(st_header *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->n_tensors; i++)
        free(h->tensors[i].name);
    free(h->tensors);
    memset(h, 0, sizeof *h);
}

int st_read_header_bytes(const char *path, uint8_t **bytes, size_t *n_bytes, gm_status *st)
{
    uint8_t prefix[8];
    uint8_t *buf = NULL;
    size_t got = 0;
    uint64_t n = 0;
    int fd;

    *bytes = NULL;
    *n_bytes = 0;
    gm_status_clear(st);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return gm_fail(st, GM_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (read_full(fd, prefix, sizeof prefix, &got) != 0) {
        gm_fail(st, GM_EIO, "%s: read failed: %s", path, strerror(errno));
        goto out;
    }
    if (st_header_len(prefix, got, &n, path, st))
        goto out;
    if ((buf = malloc(8 + (size_t)n)) == NULL) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory for a %" PRIu64 "-byte header", path, n);
        goto out;
    }
    memcpy(buf, prefix, 8);
    if (read_full(fd, buf + 8, (size_t)n, &got) != 0) {
        gm_fail(st, GM_EIO, "%s: read failed: %s", path, strerror(errno));
        goto out;
    }
    if (got != n) {
        gm_fail(st, GM_EFORMAT, "%s: file ends after %zu bytes, the header needs 8 + %" PRIu64,
                path, 8 + got, n);
        goto out;
    }
    *bytes = buf;
    *n_bytes = 8 + (size_t)n;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return st->code;
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

    *root = cJSON_ParseWithLengthOpts(json, len, NULL, 0);
    if (*root == NULL || !cJSON_IsObject(*root))
        return gm_fail(st, GM_EFORMAT, "%s: not a json object", what);
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

static int map_file(st_file *f, const char *dir, gm_status *st)
{
    char *path = join_path(dir, f->name);
    struct stat sb;
    void *map;
    int fd = -1;

    if (path == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", f->name);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &sb) != 0) {
        gm_fail(st, GM_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            gm_fail(st, GM_EIO, "%s: cannot mmap: %s", path, strerror(errno));
            goto out;
        }
        f->map = map;
    }
    st_header_parse(&f->h, f->map, f->size, f->size, f->name, st);
out:
    if (fd >= 0)
        close(fd);
    free(path);
    return st->code;
}

static int read_small_file(const char *path, char **text, size_t *len, gm_status *st)
{
    struct stat sb;
    size_t got = 0;
    int fd;

    *text = NULL;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &sb) != 0) {
        gm_fail(st, GM_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if ((*text = malloc((size_t)sb.st_size + 1)) == NULL) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    if (read_full(fd, *text, (size_t)sb.st_size, &got) != 0) {
        gm_fail(st, GM_EIO, "%s: read failed: %s", path, strerror(errno));
        goto out;
    }
    (*text)[got] = '\0';
    *len = got;
out:
    if (fd >= 0)
        close(fd);
    return st->code;
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

    if ((dup = duplicate_key(wm)) != NULL)
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
        gm_fail(st, GM_EMISSING, "%s: neither %s nor %s is present", m->dir, ST_SINGLE_NAME,
                ST_INDEX_NAME);
        goto out;
    }
    if (read_small_file(path, &text, &len, st) ||
        parse_index(text, len, ST_INDEX_NAME, &root, &wm, st) ||
        distinct_shards(wm, ST_INDEX_NAME, &names, &n_names, st) ||
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

static int open_single(st_model *m, gm_status *st)
{
    char *name = strdup(ST_SINGLE_NAME);

    if (name == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", m->dir);
    if (add_files(m, &name, 1, st) == GM_OK)
        merge_tensors(m, st);
    free(name);
    return st->code;
}

int st_model_open(st_model **out, const char *dir, gm_status *st)
{
    st_model *m = NULL;
    char *single = NULL;

    *out = NULL;
    gm_status_clear(st);
    if ((m = calloc(1, sizeof *m)) == NULL || (m->dir = strdup(dir)) == NULL ||
        (single = join_path(dir, ST_SINGLE_NAME)) == NULL) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
        goto out;
    }
    if (access(single, F_OK) == 0)
        open_single(m, st);
    else
        open_sharded(m, st);
out:
    free(single);
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
        st_header_free(&f->h);
        free(f->name);
    }
    free(m->files);
    free(m->all);
    free(m->dir);
    free(m);
}

/* ---------------------------------------------------------------------- */
/* loading as bf16 */

static void convert_run(gm_bf16 *dst, const uint8_t *src, size_t n, st_dtype dtype)
{
    if (dtype == ST_BF16) {
        memcpy(dst, src, n * 2);
    } else if (dtype == ST_F16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = gm_f32_to_bf16(gm_f16_to_f32(h));
        }
    } else { /* ST_F32: round to nearest even */
        for (size_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, src + 4 * i, 4);
            dst[i] = gm_f32_to_bf16(f);
        }
    }
}

#ifdef __SSE2__
/* An 8 x 8 block of 16-bit values: rows of src (stride ls) to rows of dst (stride ld). */
static inline void transpose8(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    __m128i a[8], b[8], c[8];
    for (int i = 0; i < 8; i++)
        a[i] = _mm_loadu_si128((const __m128i *)(const void *)(src + i * ls));
    for (int i = 0; i < 4; i++) {
        b[2 * i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
        b[2 * i + 1] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
    }
    c[0] = _mm_unpacklo_epi32(b[0], b[2]), c[1] = _mm_unpackhi_epi32(b[0], b[2]);
    c[2] = _mm_unpacklo_epi32(b[1], b[3]), c[3] = _mm_unpackhi_epi32(b[1], b[3]);
    c[4] = _mm_unpacklo_epi32(b[4], b[6]), c[5] = _mm_unpackhi_epi32(b[4], b[6]);
    c[6] = _mm_unpacklo_epi32(b[5], b[7]), c[7] = _mm_unpackhi_epi32(b[5], b[7]);
    for (int i = 0; i < 4; i++) {
        _mm_storeu_si128((__m128i *)(void *)(dst + (2 * i) * ld), _mm_unpacklo_epi64(c[i], c[i + 4]));
        _mm_storeu_si128((__m128i *)(void *)(dst + (2 * i + 1) * ld), _mm_unpackhi_epi64(c[i], c[i + 4]));
    }
}

/*
** 32 rows x 8 columns of src into 8 destination runs of 32 values (64
** bytes, one cache line when aligned): transposed in a small buffer, then
** each run written whole, streamed past the cache when it is aligned.
*/
static inline void transpose32x8(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    gm_bf16 tmp[8 * 32] __attribute__((aligned(64)));
    for (int g = 0; g < 4; g++)
        transpose8(tmp + 8 * g, 32, src + 8 * g * ls, ls);
    const int aligned = (((uintptr_t)dst | ld * 2) % 16) == 0;
    for (int i = 0; i < 8; i++) {
        const __m128i *t = (const __m128i *)(const void *)(tmp + 32 * i);
        __m128i *d = (__m128i *)(void *)(dst + i * ld);
        if (aligned) {
            _mm_stream_si128(d, t[0]), _mm_stream_si128(d + 1, t[1]);
            _mm_stream_si128(d + 2, t[2]), _mm_stream_si128(d + 3, t[3]);
        } else {
            _mm_storeu_si128(d, t[0]), _mm_storeu_si128(d + 1, t[1]);
            _mm_storeu_si128(d + 2, t[2]), _mm_storeu_si128(d + 3, t[3]);
        }
    }
}
#endif

#if defined(__x86_64__) || defined(__i386__)
#define GM_AVX2_TRANSPOSE 1
/*
** 16 x 16 values of src (rows, stride ls) into o[c] = column c, rows 0-15.
** The unpacks work within 128-bit halves, so each half is an 8-column
** transpose of its own (columns 0-7 low, 8-15 high): three rounds of
** unpacks per 8 rows, then the two groups of 8 rows joined half by half.
*/
__attribute__((target("avx2"))) static inline void transpose16(__m256i o[16], const gm_bf16 *src, size_t ls)
{
    __m256i col[2][8]; /* [rows 0-7 or 8-15][c]: column c in the low half, c + 8 in the high */
    for (int g = 0; g < 2; g++) {
        __m256i a[8], p[8], q[8];
        for (int i = 0; i < 8; i++)
            a[i] = _mm256_loadu_si256((const __m256i *)(const void *)(src + (8 * g + i) * ls));
        for (int i = 0; i < 4; i++) {
            p[i] = _mm256_unpacklo_epi16(a[2 * i], a[2 * i + 1]);     /* rows 2i, 2i+1; columns 0-3 */
            p[i + 4] = _mm256_unpackhi_epi16(a[2 * i], a[2 * i + 1]); /* columns 4-7 */
        }
        for (int h = 0; h < 2; h++) {
            const __m256i *ph = p + 4 * h;
            q[4 * h] = _mm256_unpacklo_epi32(ph[0], ph[1]);     /* rows 0-3, columns 0-1 (+4h) */
            q[4 * h + 1] = _mm256_unpackhi_epi32(ph[0], ph[1]); /* rows 0-3, columns 2-3 */
            q[4 * h + 2] = _mm256_unpacklo_epi32(ph[2], ph[3]); /* rows 4-7, columns 0-1 */
            q[4 * h + 3] = _mm256_unpackhi_epi32(ph[2], ph[3]); /* rows 4-7, columns 2-3 */
            col[g][4 * h] = _mm256_unpacklo_epi64(q[4 * h], q[4 * h + 2]);
            col[g][4 * h + 1] = _mm256_unpackhi_epi64(q[4 * h], q[4 * h + 2]);
            col[g][4 * h + 2] = _mm256_unpacklo_epi64(q[4 * h + 1], q[4 * h + 3]);
            col[g][4 * h + 3] = _mm256_unpackhi_epi64(q[4 * h + 1], q[4 * h + 3]);
        }
    }
    for (int c = 0; c < 8; c++) {
        o[c] = _mm256_permute2x128_si256(col[0][c], col[1][c], 0x20);
        o[c + 8] = _mm256_permute2x128_si256(col[0][c], col[1][c], 0x31);
    }
}

/*
** 32 rows x 16 columns of src into 16 destination runs of 32 values (64
** bytes each, one cache line when aligned), streamed past the cache then.
*/
__attribute__((target("avx2"))) static void transpose32x16(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    __m256i top[16], bottom[16];
    for (int i = 0; i < 32; i++) /* these rows 128 columns on: the source is read in 32-byte steps across rows */
        _mm_prefetch((const char *)(src + i * ls + 128), _MM_HINT_T0);
    transpose16(top, src, ls);
    transpose16(bottom, src + 16 * ls, ls);
    const int aligned = (((uintptr_t)dst | ld * 2) % 32) == 0;
    for (int c = 0; c < 16; c++) {
        __m256i *d = (__m256i *)(void *)(dst + c * ld);
        if (aligned)
            _mm256_stream_si256(d, top[c]), _mm256_stream_si256(d + 1, bottom[c]);
        else
            _mm256_storeu_si256(d, top[c]), _mm256_storeu_si256(d + 1, bottom[c]);
    }
}

static int have_avx2(void)
{
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2");
    }
    return cached;
}
#endif

/*
** n rows of bf16, row-major in blk, into columns [r0, r0 + n) of dst
** (cols, rows). Columns outer, rows inner: the 8 destination rows of a
** column group get their runs written in order, n * 2 bytes each, so that
** memory sees a few long streams rather than scattered lines; the source
** lines stay in L1 across the 4 column groups that share them.
*/
static void transpose_block(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0)
{
    size_t c = 0, r = 0;
#ifdef __SSE2__
    const size_t n32 = n / 32 * 32, n8 = n / 8 * 8;
#ifdef GM_AVX2_TRANSPOSE
    if (have_avx2() && n32) {
        for (; c + 16 <= cols; c += 16)
            for (size_t rr = 0; rr < n32; rr += 32)
                transpose32x16(dst + c * rows + r0 + rr, rows, blk + rr * cols + c, cols);
        for (size_t cc = 0; cc < c; cc += 8) /* the rows past the last group of 32 */
            for (size_t rr = n32; rr < n8; rr += 8)
                transpose8(dst + cc * rows + r0 + rr, rows, blk + rr * cols + cc, cols);
    }
#endif
    for (; c + 8 <= cols; c += 8) {
        size_t rr = 0;
        for (; rr < n32; rr += 32)
            transpose32x8(dst + c * rows + r0 + rr, rows, blk + rr * cols + c, cols);
        for (; rr < n8; rr += 8)
            transpose8(dst + c * rows + r0 + rr, rows, blk + rr * cols + c, cols);
    }
    for (size_t rr = 0; rr < n8; rr++) /* columns left over past the last group of 8 */
        for (size_t cc = c; cc < cols; cc++)
            dst[cc * rows + r0 + rr] = blk[rr * cols + cc];
    r = n8;
    _mm_sfence();
#endif
    for (; r < n; r++) /* rows left over */
        for (size_t cc = 0; cc < cols; cc++)
            dst[cc * rows + r0 + r] = blk[r * cols + cc];
}

void st_convert_rows(gm_bf16 *dst, const void *src, st_dtype dtype, size_t rows, size_t cols, size_t r0,
                     size_t r1, int transpose)
{
    /* rows per block: bf16 is transposed in place, other dtypes are converted into a buffer first */
    const size_t block = dtype == ST_BF16 ? 256 : 32, es = st_dtype_size(dtype);
    if (!transpose) {
        convert_run(dst + r0 * cols, src, (r1 - r0) * cols, dtype);
        return;
    }
    gm_bf16 *tmp = dtype == ST_BF16 ? NULL : malloc(block * cols * 2);
    if (dtype != ST_BF16 && !tmp) { /* no memory for a block: one value at a time, the same result */
        for (size_t r = r0; r < r1; r++)
            for (size_t c = 0; c < cols; c++)
                convert_run(dst + c * rows + r, (const uint8_t *)src + ((r - r0) * cols + c) * es, 1, dtype);
        return;
    }
    for (size_t r = r0; r < r1; r += block) {
        const size_t n = r1 - r < block ? r1 - r : block;
        const uint8_t *s = (const uint8_t *)src + (r - r0) * cols * es;
        const gm_bf16 *blk = (const gm_bf16 *)(const void *)s;
        if (tmp) {
            convert_run(tmp, s, n * cols, dtype);
            blk = tmp;
        }
        transpose_block(dst, blk, n, rows, cols, r);
    }
    free(tmp);
}

static int check_load(const st_tensor *t, const char *file, int rank, const int64_t *shape,
                      int transpose, gm_status *st)
{
    char found[160], want[160];
    int same = t->rank == rank;

    for (int i = 0; same && i < rank; i++)
        same = t->shape[i] == shape[i];
    if (!same)
        return gm_fail(st, GM_ESHAPE, "%s: tensor '%s' has shape %s, expected %s", file, t->name,
                       fmt_shape(found, sizeof found, t->rank, t->shape),
                       fmt_shape(want, sizeof want, rank < 0 ? 0 : rank, shape));
    if (transpose && rank != 2)
        return gm_fail(st, GM_ESHAPE, "%s: tensor '%s' has rank %d, transposing needs rank 2",
                       file, t->name, rank);
    if (t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F32)
        return gm_fail(st, GM_EDTYPE, "%s: tensor '%s' has dtype %s, expected BF16, F16 or F32",
                       file, t->name, st_dtype_name(t->dtype));
    return GM_OK;
}

int st_model_check(const st_model *m, const char *name, int rank, const int64_t *shape, int transpose,
                   const st_tensor **out, gm_status *st)
{
    const char *file = NULL;
    const st_tensor *t;
    *out = NULL;
    gm_status_clear(st);
    if ((t = st_model_find(m, name, &file)) == NULL)
        return gm_fail(st, GM_EMISSING, "%s: tensor '%s' is missing", m->dir, name);
    if (check_load(t, file, rank, shape, transpose, st))
        return st->code;
    *out = t;
    return GM_OK;
}

void st_model_source(const st_model *m, const st_tensor *t, const char **dir, const char **file,
                     uint64_t *offset)
{
    const st_file *f = file_of(m, t);
    *dir = m->dir;
    *file = f->name;
    *offset = 8 + f->h.header_len + t->begin;
}

int st_model_load_bf16(const st_model *m, const char *name, int rank, const int64_t *shape,
                       int transpose, gm_bf16 **out, gm_status *st)
{
    const char *file = NULL;
    const st_tensor *t;
    size_t count, bytes;
    gm_bf16 *buf = NULL;

    *out = NULL;
    gm_status_clear(st);
    if ((t = st_model_find(m, name, &file)) == NULL)
        return gm_fail(st, GM_EMISSING, "%s: tensor '%s' is missing", m->dir, name);
    if (check_load(t, file, rank, shape, transpose, st))
        return st->code;
    count = (size_t)((t->end - t->begin) / st_dtype_size(t->dtype));
    if (__builtin_mul_overflow(count, sizeof *buf, &bytes))
        return gm_fail(st, GM_ENOMEM, "%s: tensor '%s' is too large to load", file, name);
    if ((buf = malloc(bytes ? bytes : 1)) == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory for tensor '%s' (%zu bytes)", file,
                       name, bytes);
    if (transpose)
        st_convert_rows(buf, st_model_data(m, t), t->dtype, (size_t)t->shape[0], (size_t)t->shape[1], 0,
                        (size_t)t->shape[0], 1);
    else
        st_convert_rows(buf, st_model_data(m, t), t->dtype, count, 1, 0, count, 0);
    *out = buf;
    return GM_OK;
}
