/*
** A small validating JSON scanner for the two big arrays of tokenizer.json.
**
** model.vocab (150k entries) and model.merges (up to 280k pairs) are most of
** an 11-17 MB file; building a cJSON tree for them costs ~100 ms, so they are
** read here straight into the tokenizer's arena and hash maps. Everything else
** in the file is small and goes through cJSON. The scanner follows RFC 8259:
** strings must be valid (no raw control bytes, known escapes, paired
** surrogates), numbers well-formed, and nesting at most 256 deep.
*/
#include "tokenizer_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *tk_json_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static int hex4(const char *p, const char *end, uint32_t *v)
{
    uint32_t x = 0;

    if (end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *v = x;
    return 0;
}

static size_t put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/*
** Decode the string at p (which must be '"') and append its UTF-8 bytes to
** out (when out is not NULL). Returns 0, or -1 with *err set.
*/
int tk_json_string(const char *p, const char *end, tk_buf *out, const char **after, const char **err)
{
    if (p >= end || *p != '"') {
        *err = p >= end ? "truncated" : "expected a string";
        *after = p;
        return -1;
    }
    p++;
    for (;;) {
        const char *run = p;
        // copy the longest run without escapes or the closing quote in one go
        while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
            p++;
        if (out != NULL && p > run && tk_buf_put(out, run, (size_t)(p - run)) != 0) {
            *err = "out of memory";
            goto bad;
        }
        if (p >= end) {
            *err = "truncated";
            goto bad;
        }
        if (*p == '"') {
            *after = p + 1;
            return 0;
        }
        if ((unsigned char)*p < 0x20) {
            *err = "control character in a string";
            goto bad;
        }
        // an escape
        if (end - p < 2) {
            *err = "truncated";
            goto bad;
        }
        char c = p[1], one = 0;
        uint32_t cp;
        switch (c) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u':
            if (hex4(p + 2, end, &cp) != 0) {
                *err = end - p < 6 ? "truncated" : "bad \\u escape";
                goto bad;
            }
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                *err = "lone trailing surrogate in a \\u escape";
                goto bad;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) != 0 || lo < 0xDC00 ||
                    lo > 0xDFFF) {
                    *err = "lone leading surrogate in a \\u escape";
                    goto bad;
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (out != NULL) {
                char u[4];
                if (tk_buf_put(out, u, put_utf8(u, cp)) != 0) {
                    *err = "out of memory";
                    goto bad;
                }
            }
            continue;
        default:
            *err = "unknown escape in a string";
            goto bad;
        }
        if (out != NULL && tk_buf_put(out, &one, 1) != 0) {
            *err = "out of memory";
            goto bad;
        }
        p += 2;
    }
bad:
    *after = p;
    return -1;
}

static int skip_number(const char *p, const char *end, const char **after)
{
    const char *s = p;

    if (p < end && *p == '-')
        p++;
    if (p >= end)
        goto bad;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        goto bad;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9')
            goto bad;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            goto bad;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    *after = p;
    return 0;
bad:
    *after = p > s ? p : s;
    return -1;
}

static int skip_value(const char *p, const char *end, int depth, const char **after, const char **err)
{
    p = tk_json_ws(p, end);
    if (p >= end) {
        *err = "truncated";
        *after = p;
        return -1;
    }
    if (depth > 256) {
        *err = "nesting deeper than 256";
        *after = p;
        return -1;
    }
    switch (*p) {
    case '"':
        return tk_json_string(p, end, NULL, after, err);
    case '{':
    case '[': {
        char close = *p == '{' ? '}' : ']';
        int object = *p == '{';
        p = tk_json_ws(p + 1, end);
        if (p < end && *p == close) {
            *after = p + 1;
            return 0;
        }
        for (;;) {
            if (object) {
                if (tk_json_string(tk_json_ws(p, end), end, NULL, &p, err) != 0)
                    goto fail;
                p = tk_json_ws(p, end);
                if (p >= end || *p != ':') {
                    *err = p >= end ? "truncated" : "expected ':'";
                    goto fail;
                }
                p++;
            }
            if (skip_value(p, end, depth + 1, &p, err) != 0)
                goto fail;
            p = tk_json_ws(p, end);
            if (p < end && *p == ',') {
                p++;
                continue;
            }
            if (p < end && *p == close) {
                *after = p + 1;
                return 0;
            }
            *err = p >= end ? "truncated" : object ? "expected ',' or '}'" : "expected ',' or ']'";
            goto fail;
        }
    fail:
        *after = p;
        return -1;
    }
    case 't':
    case 'f':
    case 'n': {
        const char *word = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t n = strlen(word);
        if ((size_t)(end - p) < n) {
            *err = "truncated";
            *after = end;
            return -1;
        }
        if (memcmp(p, word, n) != 0) {
            *err = "unexpected character";
            *after = p;
            return -1;
        }
        *after = p + n;
        return 0;
    }
    default:
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            if (skip_number(p, end, after) != 0) {
                *err = *after >= end ? "truncated" : "bad number";
                return -1;
            }
            return 0;
        }
        *err = "unexpected character";
        *after = p;
        return -1;
    }
}

int tk_json_skip(const char *p, const char *end, const char **after, const char **err)
{
    return skip_value(p, end, 0, after, err);
}

/* ------------------------------------------------------------- model.vocab */

static uint32_t parse_index(const char *p, const char *end, const char **after, int *ok)
{
    // vocab ids are non-negative integers written without fraction or exponent
    uint64_t v = 0;
    const char *s = p;

    *ok = 0;
    while (p < end && *p >= '0' && *p <= '9' && p - s < 11)
        v = v * 10 + (uint64_t)(*p++ - '0');
    *after = p;
    if (p == s || (p - s > 1 && *s == '0') || v > INT32_MAX - 1)
        return 0;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')))
        return 0;
    *ok = 1;
    return (uint32_t)v;
}

static int fail_at(gm_tokenizer *t, const char *where, const char *base, const char *p, const char *err,
                   gm_status *st)
{
    return gm_fail(st, GM_EFORMAT, "%s: %s: %s at byte %zu", t->path, where, err, (size_t)(p - base));
}

/*
** Parse the object at p into t->vocab (keys into the arena); *after is set
** past it. Entries are collected first so the map is sized once, exactly.
*/
int tk_load_vocab(gm_tokenizer *t, const char *p, const char *end, const char **after, gm_status *st)
{
    const char *base = p, *err = NULL;
    uint32_t *e = NULL; /* (off, len, id) triples */
    size_t n = 0, cap = 0;
    int ok, rc = 0;

    p = tk_json_ws(p, end);
    if (p >= end || *p != '{') {
        rc = fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected an object", st);
        goto out;
    }
    p = tk_json_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
        goto build;
    }
    for (;;) {
        size_t off = t->arena.n;
        uint32_t id;
        if (tk_json_string(p, end, &t->arena, &p, &err) != 0) {
            rc = fail_at(t, "model.vocab", base, p, err, st);
            goto out;
        }
        p = tk_json_ws(p, end);
        if (p >= end || *p != ':') {
            rc = fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected ':'", st);
            goto out;
        }
        p = tk_json_ws(p + 1, end);
        id = parse_index(p, end, &p, &ok);
        if (!ok) {
            rc = fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected a non-negative integer id", st);
            goto out;
        }
        if (t->arena.n > UINT32_MAX / 2) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.vocab: too large", t->path);
            goto out;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 1024;
            uint32_t *ne = realloc(e, nc * 3 * sizeof *ne);
            if (ne == NULL) {
                rc = gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", t->path);
                goto out;
            }
            e = ne;
            cap = nc;
        }
        e[3 * n] = (uint32_t)off;
        e[3 * n + 1] = (uint32_t)(t->arena.n - off);
        e[3 * n + 2] = id;
        n++;
        if ((int32_t)id + 1 > t->n_ids)
            t->n_ids = (int32_t)id + 1;
        p = tk_json_ws(p, end);
        if (p < end && *p == ',') {
            p = tk_json_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}') {
            p++;
            break;
        }
        rc = fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected ',' or '}'", st);
        goto out;
    }
build:
    if (tk_str_map_init(&t->vocab, n) != 0) {
        rc = gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", t->path);
        goto out;
    }
    // a duplicate key overwrites the earlier entry (the last one wins, as in a HashMap)
    for (size_t i = 0; i < n; i++)
        if (tk_str_map_put(&t->vocab, t->arena.p, e[3 * i], e[3 * i + 1], (int32_t)e[3 * i + 2]) != 0) {
            rc = gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", t->path);
            goto out;
        }
    *after = p;
out:
    free(e);
    return rc;
}

/* ------------------------------------------------------------ model.merges */

/*
** Merges are read in three steps: parse the array into a list of strings
** (sequential), resolve each pair's three vocab ids (on two threads: the
** lookups are cache misses in a large table, most of the load time), then
** insert them in order (a later duplicate wins, as in the reference).
*/
typedef struct merge_list {
    tk_buf text;    /* "ab" spellings back to back */
    uint32_t *e;    /* per merge: text offset, split, length */
    int32_t *ids;   /* per merge: a, b, ab */
    size_t n, cap;
} merge_list;

typedef struct resolve_job {
    const gm_tokenizer *t;
    const merge_list *m;
    size_t from, to;
    size_t bad;      /* first failing index, or SIZE_MAX */
    int bad_part;    /* 0 left, 1 right, 2 both */
} resolve_job;

static void *resolve(void *arg)
{
    resolve_job *j = arg;
    const gm_tokenizer *t = j->t;
    const merge_list *m = j->m;

    j->bad = SIZE_MAX;
    for (size_t i = j->from; i < j->to; i++) {
        const char *s = m->text.p + m->e[3 * i];
        size_t split = m->e[3 * i + 1], len = m->e[3 * i + 2];
        int32_t *ids = m->ids + 3 * i;
        ids[0] = tk_str_map_get(&t->vocab, t->arena.p, s, split);
        ids[1] = tk_str_map_get(&t->vocab, t->arena.p, s + split, len - split);
        ids[2] = tk_str_map_get(&t->vocab, t->arena.p, s, len);
        if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0) {
            j->bad = i;
            j->bad_part = ids[0] < 0 ? 0 : ids[1] < 0 ? 1 : 2;
            break;
        }
    }
    return NULL;
}

static int list_add(merge_list *m, size_t off, size_t split, size_t len)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4096;
        uint32_t *e = realloc(m->e, cap * 3 * sizeof *e);
        if (e == NULL)
            return -1;
        m->e = e;
        m->cap = cap;
    }
    m->e[3 * m->n] = (uint32_t)off;
    m->e[3 * m->n + 1] = (uint32_t)split;
    m->e[3 * m->n + 2] = (uint32_t)len;
    m->n++;
    return 0;
}

static int resolve_all(gm_tokenizer *t, merge_list *m, gm_status *st)
{
    resolve_job j[2] = {{t, m, 0, m->n / 2, 0, 0}, {t, m, m->n / 2, m->n, 0, 0}};
    pthread_t tid;
    int threaded;

    m->ids = malloc((m->n ? m->n : 1) * 3 * sizeof *m->ids);
    if (m->ids == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", t->path);
    threaded = m->n >= 4096 && pthread_create(&tid, NULL, resolve, &j[1]) == 0;
    resolve(&j[0]);
    if (threaded)
        pthread_join(tid, NULL);
    else
        resolve(&j[1]);
    for (int k = 0; k < 2; k++)
        if (j[k].bad != SIZE_MAX) {
            size_t i = j[k].bad;
            const char *s = m->text.p + m->e[3 * i];
            size_t split = m->e[3 * i + 1], len = m->e[3 * i + 2];
            const char *tok = j[k].bad_part == 1 ? s + split : s;
            size_t tlen = j[k].bad_part == 0 ? split : j[k].bad_part == 1 ? len - split : len;
            return gm_fail(st, GM_EFORMAT, "%s: model.merges[%zu]: token '%.*s' is not in model.vocab", t->path, i,
                           (int)(tlen > 64 ? 64 : tlen), tok);
        }
    if (tk_pair_map_init(&t->merges, m->n) != 0)
        return gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", t->path);
    for (size_t i = 0; i < m->n; i++)
        if (tk_pair_map_put(&t->merges, m->ids[3 * i], m->ids[3 * i + 1], (uint32_t)i, m->ids[3 * i + 2]) != 0)
            return gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", t->path);
    return 0;
}

int tk_load_merges(gm_tokenizer *t, const char *p, const char *end, const char **after, gm_status *st)
{
    const char *base = p, *err = NULL;
    merge_list m = {0};
    tk_buf *tmp = &m.text;
    size_t index = 0;
    int rc = 0;

    p = tk_json_ws(p, end);
    if (p >= end || *p != '[') {
        rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected an array", st);
        goto out;
    }
    p = tk_json_ws(p + 1, end);
    if (p < end && *p == ']') {
        p++;
        goto done;
    }
    for (;; index++) {
        size_t split, start = tmp->n;
        if (p < end && *p == '"') {
            // "a b": no vocab entry holds a space, so the one space splits it exactly
            if (tk_json_string(p, end, tmp, &p, &err) != 0) {
                rc = fail_at(t, "model.merges", base, p, err, st);
                goto out;
            }
            size_t qn = tmp->n - start;
            char *q = qn ? tmp->p + start : ""; // an empty first merge leaves tmp unallocated (NULL + 0)
            char *sp = qn ? memchr(q, ' ', qn) : NULL;
            if (sp == NULL || memchr(sp + 1, ' ', qn - (size_t)(sp + 1 - q)) != NULL) {
                rc = gm_fail(st, GM_EFORMAT, "%s: model.merges[%zu]: expected \"left right\" with one space, found '%.*s'",
                             t->path, index, (int)(qn > 64 ? 64 : qn), q);
                goto out;
            }
            split = (size_t)(sp - q);
            memmove(sp, sp + 1, qn - split - 1);
            tmp->n--;
        } else if (p < end && *p == '[') {
            p = tk_json_ws(p + 1, end);
            if (tk_json_string(p, end, tmp, &p, &err) != 0) {
                rc = fail_at(t, "model.merges", base, p, err, st);
                goto out;
            }
            split = tmp->n - start;
            p = tk_json_ws(p, end);
            if (p >= end || *p != ',') {
                rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected a pair [\"left\", \"right\"]", st);
                goto out;
            }
            p = tk_json_ws(p + 1, end);
            if (tk_json_string(p, end, tmp, &p, &err) != 0) {
                rc = fail_at(t, "model.merges", base, p, err, st);
                goto out;
            }
            p = tk_json_ws(p, end);
            if (p >= end || *p != ']') {
                rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected a pair [\"left\", \"right\"]", st);
                goto out;
            }
            p++;
        } else {
            rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected \"a b\" or [\"a\", \"b\"]", st);
            goto out;
        }
        if (index >= UINT32_MAX - 1 || tmp->n > UINT32_MAX / 2) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.merges: too large", t->path);
            goto out;
        }
        if (list_add(&m, start, split, tmp->n - start) != 0) {
            rc = gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", t->path);
            goto out;
        }
        p = tk_json_ws(p, end);
        if (p < end && *p == ',') {
            p = tk_json_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']') {
            p++;
            break;
        }
        rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected ',' or ']'", st);
        goto out;
    }
done:
    if ((rc = resolve_all(t, &m, st)) != 0)
        goto out;
    *after = p;
out:
    free(m.text.p);
    free(m.e);
    free(m.ids);
    return rc;
}
