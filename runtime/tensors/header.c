/*
** The safetensors header: its length prefix, its bytes and its JSON, every
** rule of the reference implementation one check with one message (see
** gm/safetensors.h for the contract).
*/
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gm/io.h"
#include "gm/utf8.h"
#include "st_internal.h"

#define ST_MAX_EXACT 9007199254740992.0 /* 2^53: larger doubles are not exact integers */

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
const char *st_fmt_shape(char *buf, size_t cap, int rank, const int64_t *shape)
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
const char *st_duplicate_key(const cJSON *obj)
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

/* ---------------------------------------------------------------------- */
/* header */

int st_header_len(const uint8_t *buf, size_t len, uint64_t *n, const char *what,
                  gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
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
                           st_fmt_shape(shape, sizeof shape, t->rank, t->shape));
    }
    if (bytes != t->end - t->begin)
        return gm_fail(st, GM_EFORMAT,
                       "%s: tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64
                       "], expected a span of %" PRIu64 " bytes for %s %s",
                       what, t->name, t->begin, t->end, bytes, st_dtype_name(t->dtype),
                       st_fmt_shape(shape, sizeof shape, t->rank, t->shape));
    return GM_OK;
}

static int parse_tensor(st_tensor *t, const cJSON *entry, const char *what, gm_status *st)
{
    const cJSON *dtype;
    const char *dup;

    if (!cJSON_IsObject(entry))
        return gm_fail(st, GM_EFORMAT, "%s: tensor '%s' is not an object", what, t->name);
    if ((dup = st_duplicate_key(entry)) != NULL)
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
    if ((dup = st_duplicate_key(meta)) != NULL)
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
    if ((bad = gm_utf8_check(buf + 8, (size_t)n)) != n)
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

/*
** Every number of the header written as an integer: the reference implementation reads shape and
** data_offsets into unsigned integers (serde), which 96.0 or 9.6e1 is not, though cJSON's double holds
** them whole. Strings are skipped (their escapes too); a number is a run of -+.0-9eE outside them.
*/
static int check_integers(const char *p, const char *end, const uint8_t *buf, const char *what, gm_status *st)
{
    for (int in_string = 0; p < end; p++) {
        if (in_string) {
            if (*p == '\\')
                p++;
            else if (*p == '"')
                in_string = 0;
        } else if (*p == '"') {
            in_string = 1;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            const char *s = p;
            int whole = 1;
            for (; p < end && *p && strchr("-+.0123456789eE", *p); p++)
                whole &= !strchr(".eE", *p);
            if (!whole)
                return gm_fail(st, GM_EFORMAT, "%s: header: expected an integer, found '%.*s' at byte %td", what,
                               (int)(p - s < 24 ? p - s : 24), s, s - (const char *)buf);
            p--;
        }
    }
    return GM_OK;
}

int st_header_parse(st_header *h, const uint8_t *buf, size_t len, uint64_t file_size,
                    const char *what, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
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
        sort_and_check_names(h, what, st) || check_tiling(h, what, st) ||
        check_integers((const char *)buf + 8, end, buf, what, st))
        goto out;
    h->header_len = n;
    if (file_size != 0 && 8 + n + h->data_len > file_size)
        gm_fail(st, GM_ESHORT,
                "%s: file is %" PRIu64 " bytes, its header describes 8 + %" PRIu64 " + %" PRIu64 " = %" PRIu64
                ": the file is incomplete (an interrupted download or copy)",
                what, file_size, n, h->data_len, 8 + n + h->data_len);
    else if (file_size != 0 && 8 + n + h->data_len != file_size)
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
    GM_STATUS_OR_LOCAL(st);
    uint8_t prefix[8];
    uint8_t *buf = NULL;
    size_t got = 0;
    uint64_t n = 0;
    int fd;

    *bytes = NULL;
    *n_bytes = 0;
    gm_status_clear(st);
    struct stat sb;
    if ((fd = gm_open_regular(path, &sb, st)) < 0)
        return st->code;
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
        gm_fail(st, GM_ESHORT, "%s: file ends after %zu bytes, the header needs 8 + %" PRIu64
                ": the file is incomplete (an interrupted download or copy)", path, 8 + got, n);
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
