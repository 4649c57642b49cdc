/*
** NumPy .npy reader and writer (see gm/npy.h).
**
** The reader is strict: magic, version 1.0 (2.0 and 3.0 are accepted for
** their 4-byte header length), a dict with exactly the keys descr ('<f4' or
** '<i4'), fortran_order (False) and shape (a tuple of non-negative integers),
** and a file size equal to preamble + count * 4. Data is copied as stored:
** little-endian, which is this (x86-64) host's byte order.
*/
#include "gm/npy.h"

#include "gm/io.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define NPY_MAX_FILE ((size_t)1 << 40) /* read whole: the cap only guards the size arithmetic */

/* ---------------------------------------------------------------------- */
/* header dict parsing: a tiny cursor over the Python literal */

typedef struct npy_cursor {
    const char *p, *end;
} npy_cursor;

static void skip_spaces(npy_cursor *c)
{
    while (c->p < c->end && *c->p == ' ')
        c->p++;
}

/* Consume ch (after optional spaces); 1 if it was there. */
static int accept(npy_cursor *c, char ch)
{
    skip_spaces(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Consume the exact text s (after optional spaces). */
static int accept_word(npy_cursor *c, const char *s)
{
    size_t n = strlen(s);

    skip_spaces(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

/* A quoted string ('x' or "x", no escapes) into out; 1 on success. */
static int parse_string(npy_cursor *c, char *out, size_t cap)
{
    char quote;
    size_t n = 0;

    skip_spaces(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return 0;
    quote = *c->p++;
    while (c->p < c->end && *c->p != quote) {
        if (*c->p == '\\' || n + 1 >= cap)
            return 0;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return 0;
    c->p++;
    out[n] = '\0';
    return 1;
}

/* A non-negative decimal integer that fits int64. */
static int parse_dim(npy_cursor *c, int64_t *v)
{
    int64_t x = 0;
    int digits = 0;

    skip_spaces(c);
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, *c->p - '0', &x))
            return 0;
        c->p++;
        digits++;
    }
    *v = x;
    return digits > 0;
}

/* "(a, b, c)" with the Python rules: rank 1 needs its trailing comma. */
static int parse_shape(npy_cursor *c, gm_npy *a)
{
    if (!accept(c, '('))
        return 0;
    a->rank = 0;
    if (accept(c, ')'))
        return 1;
    for (;;) {
        if (a->rank == GM_NPY_MAX_RANK || !parse_dim(c, &a->shape[a->rank]))
            return 0;
        a->rank++;
        if (accept(c, ')'))
            return a->rank > 1;
        if (!accept(c, ','))
            return 0;
        if (accept(c, ')'))
            return 1;
    }
}

static int parse_value(npy_cursor *c, const char *key, gm_npy *a, const char *path, gm_status *st)
{
    char descr[16];

    if (strcmp(key, "descr") == 0) {
        if (!parse_string(c, descr, sizeof descr))
            return gm_fail(st, GM_EFORMAT, "%s: npy descr is not a string", path);
        if (strcmp(descr, "<f4") == 0)
            a->type = GM_NPY_F4;
        else if (strcmp(descr, "<i4") == 0)
            a->type = GM_NPY_I4;
        else
            return gm_fail(st, GM_EFORMAT, "%s: npy descr is '%s', expected '<f4' or '<i4'", path,
                           descr);
    } else if (strcmp(key, "fortran_order") == 0) {
        if (accept_word(c, "True"))
            return gm_fail(st, GM_EFORMAT, "%s: npy fortran_order is True, expected False", path);
        if (!accept_word(c, "False"))
            return gm_fail(st, GM_EFORMAT, "%s: npy fortran_order is not False", path);
    } else if (strcmp(key, "shape") == 0) {
        if (!parse_shape(c, a))
            return gm_fail(st, GM_EFORMAT,
                           "%s: npy shape is not a tuple of at most %d non-negative integers",
                           path, GM_NPY_MAX_RANK);
    } else {
        return gm_fail(st, GM_EFORMAT, "%s: npy header has an unexpected key '%s'", path, key);
    }
    return GM_OK;
}

/* The header dict, then spaces and a final '\n'. */
static int parse_dict(const char *text, size_t len, gm_npy *a, const char *path, gm_status *st)
{
    npy_cursor c = {text, text + len};
    int seen[3] = {0, 0, 0};
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    char key[32];

    if (len == 0 || text[len - 1] != '\n')
        return gm_fail(st, GM_EFORMAT, "%s: npy header does not end in a newline", path);
    c.end = text + len - 1;
    if (!accept(&c, '{'))
        return gm_fail(st, GM_EFORMAT, "%s: npy header is not a dict", path);
    while (!accept(&c, '}')) {
        int k;
        if (!parse_string(&c, key, sizeof key) || !accept(&c, ':'))
            return gm_fail(st, GM_EFORMAT, "%s: npy header dict is malformed", path);
        for (k = 0; k < 3 && strcmp(key, keys[k]) != 0; k++)
            ;
        if (k < 3 && seen[k]++)
            return gm_fail(st, GM_EFORMAT, "%s: npy header repeats key '%s'", path, key);
        if (parse_value(&c, key, a, path, st))
            return st->code;
        if (!accept(&c, ',')) {
            if (!accept(&c, '}'))
                return gm_fail(st, GM_EFORMAT, "%s: npy header dict is malformed", path);
            break;
        }
    }
    skip_spaces(&c);
    if (c.p != c.end)
        return gm_fail(st, GM_EFORMAT, "%s: npy header has bytes after the dict", path);
    for (int k = 0; k < 3; k++) {
        if (!seen[k])
            return gm_fail(st, GM_EFORMAT, "%s: npy header has no '%s'", path, keys[k]);
    }
    return GM_OK;
}

/* ---------------------------------------------------------------------- */
/* reading */

/* Magic and version; *start and *hlen locate the header text. */
static int parse_preamble(const uint8_t *b, size_t len, size_t *start, size_t *hlen,
                          const char *path, gm_status *st)
{
    if (len < 10 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return gm_fail(st, GM_EFORMAT, "%s: not an npy file (bad magic)", path);
    if (b[7] != 0 || b[6] < 1 || b[6] > 3)
        return gm_fail(st, GM_EFORMAT, "%s: npy version %u.%u, expected 1.0, 2.0 or 3.0", path,
                       b[6], b[7]);
    if (b[6] == 1) {
        *start = 10;
        *hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else {
        if (len < 12)
            return gm_fail(st, GM_EFORMAT, "%s: npy file ends inside its preamble", path);
        *start = 12;
        *hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    }
    if (*hlen > len - *start)
        return gm_fail(st, GM_EFORMAT, "%s: npy header length %zu runs past the end of the file",
                       path, *hlen);
    return GM_OK;
}

/* Product of the dims, overflow-checked, and the data size in bytes. */
static int npy_count(int rank, const int64_t *shape, size_t *count, size_t *bytes)
{
    size_t n = 1;

    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(n, (size_t)shape[i], &n))
            return 0;
    }
    *count = n;
    return !__builtin_mul_overflow(n, (size_t)4, bytes);
}

int gm_npy_read(const char *path, gm_npy *out, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    uint8_t *file = NULL;
    size_t len = 0, start = 0, hlen = 0, bytes = 0;
    gm_npy a;

    memset(out, 0, sizeof *out);
    memset(&a, 0, sizeof a);
    gm_status_clear(st);
    char *text = NULL;
    if (gm_read_file(path, NPY_MAX_FILE, &text, &len, st))
        goto out;
    file = (uint8_t *)text;
    if (parse_preamble(file, len, &start, &hlen, path, st) ||
        parse_dict((const char *)file + start, hlen, &a, path, st))
        goto out;
    if (!npy_count(a.rank, a.shape, &a.count, &bytes)) {
        gm_fail(st, GM_EFORMAT, "%s: npy shape overflows", path);
        goto out;
    }
    if (len - start - hlen != bytes) {
        gm_fail(st, GM_EFORMAT, "%s: npy file is %zu bytes, expected %zu + %zu * 4 = %zu", path,
                len, start + hlen, a.count, start + hlen + bytes);
        goto out;
    }
    if ((a.data = malloc(bytes ? bytes : 1)) == NULL) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory for %zu bytes", path, bytes);
        goto out;
    }
    memcpy(a.data, file + start + hlen, bytes);
    *out = a;
out:
    free(file);
    return st->code;
}

void gm_npy_free(gm_npy *a)
{
    if (a == NULL)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------------- */
/* writing */

/* The v1.0 preamble, padded with spaces to a multiple of 64 and ending in '\n'. */
static size_t format_preamble(char *buf, size_t cap, gm_npy_type type, int rank,
                              const int64_t *shape)
{
    size_t n = 10, total;

    memcpy(buf, NPY_MAGIC "\x01\x00", 8);
    n += (size_t)snprintf(buf + n, cap - n, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                          type == GM_NPY_F4 ? "<f4" : "<i4");
    for (int i = 0; i < rank; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    n += (size_t)snprintf(buf + n, cap - n, "%s), }", rank == 1 ? "," : "");
    total = (n + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    memset(buf + n, ' ', total - n - 1);
    buf[total - 1] = '\n';
    buf[8] = (char)((total - 10) & 0xFF);
    buf[9] = (char)((total - 10) >> 8);
    return total;
}

int gm_npy_write(const char *path, gm_npy_type type, int rank, const int64_t *shape,
                 const void *data, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    char preamble[512]; // 8 dims of at most 20 digits fit easily
    size_t count, bytes;

    gm_status_clear(st);
    if ((type != GM_NPY_F4 && type != GM_NPY_I4) || rank < 0 || rank > GM_NPY_MAX_RANK ||
        !npy_count(rank, shape, &count, &bytes))
        return gm_fail(st, GM_EUSAGE, "%s: cannot write npy: bad type, rank or shape", path);
    const gm_part parts[] = {{preamble, format_preamble(preamble, sizeof preamble, type, rank, shape)},
                             {data, bytes}};
    return gm_write_parts(path, parts, 2, st);
}
