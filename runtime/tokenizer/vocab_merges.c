/*
** Readers for the two big arrays of tokenizer.json on the validating
** scanner of gm/json.h.
**
** model.vocab (150k entries) and model.merges (up to 280k pairs) are most of
** an 11-17 MB file; building a cJSON tree for them costs ~100 ms, so they are
** read here straight into the tokenizer's arena and hash maps. Everything else
** in the file is small and goes through cJSON in load.c. The scanner follows
** RFC 8259: strings must be valid (no raw control bytes, known escapes, paired
** surrogates), numbers well-formed, and nesting at most 256 deep.
*/
#include "vocab_merges.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/json.h"

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

static int fail_at(const char *path, const char *where, const char *base, const char *p, const char *err,
                   gm_status *st)
{
    return gm_fail(st, GM_EFORMAT, "%s: %s: %s at byte %zu", path, where, err, (size_t)(p - base));
}

/* Entries are collected first so the map is sized once, exactly. */
int tk_read_vocab(const char *path, const char *file, const char *p, const char *end, const char **after,
                  gm_buf *arena, tk_str_map *vocab, int32_t *n_ids, gm_status *st)
{
    const char *base = file, *err = NULL; /* a message's byte is the file's, where an editor finds it */
    uint32_t *e = NULL; /* (off, len, id) triples */
    size_t n = 0, cap = 0;
    int ok, rc = 0;

    p = gm_json_ws(p, end);
    if (p >= end || *p != '{') {
        rc = fail_at(path, "model.vocab", base, p,
                     p >= end ? "truncated" : *p == '[' ? "expected an object, found an array" : "expected an object", st);
        goto out;
    }
    p = gm_json_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
        goto build;
    }
    for (;;) {
        size_t off = arena->n;
        uint32_t id;
        if (gm_json_string(p, end, arena, &p, &err) != 0) {
            rc = fail_at(path, "model.vocab", base, p, err, st);
            goto out;
        }
        p = gm_json_ws(p, end);
        if (p >= end || *p != ':') {
            rc = fail_at(path, "model.vocab", base, p, p >= end ? "truncated" : "expected ':'", st);
            goto out;
        }
        p = gm_json_ws(p + 1, end);
        const char *at = p;
        id = parse_index(p, end, &p, &ok);
        if (!ok || id > TK_MAX_ID) {
            char what[96];
            int shown = 0; /* the value as written, up to the next delimiter (-3 stops the digits at once) */
            while (at + shown < end && shown < 24 && !strchr(",}] \t\r\n", at[shown]))
                shown++;
            snprintf(what, sizeof what, "expected an integer id from 0 to %d, found '%.*s'", TK_MAX_ID, shown, at);
            rc = fail_at(path, "model.vocab", base, at, p >= end ? "truncated" : what, st);
            goto out;
        }
        if (arena->n > UINT32_MAX / 2) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.vocab: too large", path);
            goto out;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 1024;
            uint32_t *ne = realloc(e, nc * 3 * sizeof *ne);
            if (ne == NULL) {
                rc = gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", path);
                goto out;
            }
            e = ne;
            cap = nc;
        }
        e[3 * n] = (uint32_t)off;
        e[3 * n + 1] = (uint32_t)(arena->n - off);
        e[3 * n + 2] = id;
        n++;
        if ((int32_t)id + 1 > *n_ids)
            *n_ids = (int32_t)id + 1;
        p = gm_json_ws(p, end);
        if (p < end && *p == ',') {
            p = gm_json_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}') {
            p++;
            break;
        }
        rc = fail_at(path, "model.vocab", base, p, p >= end ? "truncated" : "expected ',' or '}'", st);
        goto out;
    }
build:
    if (tk_str_map_init(vocab, n) != 0) {
        rc = gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", path);
        goto out;
    }
    // a duplicate key overwrites the earlier entry (the last one wins, as in a HashMap)
    for (size_t i = 0; i < n; i++)
        if (tk_str_map_put(vocab, arena->p, e[3 * i], e[3 * i + 1], (int32_t)e[3 * i + 2]) != 0) {
            rc = gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", path);
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
    gm_buf text;    /* "ab" spellings back to back */
    uint32_t *e;    /* per merge: text offset, split, length */
    int32_t *ids;   /* per merge: a, b, ab */
    size_t n, cap;
} merge_list;

typedef struct resolve_job {
    const tk_str_map *vocab;
    const char *arena;
    const merge_list *m;
    size_t from, to;
    size_t bad;      /* first failing index, or SIZE_MAX */
    int bad_part;    /* 0 left, 1 right, 2 both */
} resolve_job;

static void *resolve(void *arg)
{
    resolve_job *j = arg;
    const tk_str_map *vocab = j->vocab;
    const char *arena = j->arena;
    const merge_list *m = j->m;

    j->bad = SIZE_MAX;
    for (size_t i = j->from; i < j->to; i++) {
        const char *s = m->text.p + m->e[3 * i];
        size_t split = m->e[3 * i + 1], len = m->e[3 * i + 2];
        int32_t *ids = m->ids + 3 * i;
        ids[0] = tk_str_map_get(vocab, arena, s, split);
        ids[1] = tk_str_map_get(vocab, arena, s + split, len - split);
        ids[2] = tk_str_map_get(vocab, arena, s, len);
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

static int resolve_all(const char *path, const tk_str_map *vocab, const char *arena, merge_list *m,
                       tk_pair_map *merges, gm_status *st)
{
    resolve_job j[2] = {{vocab, arena, m, 0, m->n / 2, 0, 0}, {vocab, arena, m, m->n / 2, m->n, 0, 0}};
    pthread_t tid;
    int threaded;

    m->ids = malloc((m->n ? m->n : 1) * 3 * sizeof *m->ids);
    if (m->ids == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", path);
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
            return gm_fail(st, GM_EFORMAT, "%s: model.merges[%zu]: token '%.*s' is not in model.vocab", path, i,
                           (int)(tlen > 64 ? 64 : tlen), tok);
        }
    if (tk_pair_map_init(merges, m->n) != 0)
        return gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", path);
    for (size_t i = 0; i < m->n; i++)
        if (tk_pair_map_put(merges, m->ids[3 * i], m->ids[3 * i + 1], (uint32_t)i, m->ids[3 * i + 2]) != 0)
            return gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", path);
    return 0;
}

int tk_read_merges(const char *path, const char *file, const char *p, const char *end, const char **after,
                   const tk_str_map *vocab, const char *arena, tk_pair_map *merges, gm_status *st)
{
    const char *base = file, *err = NULL;
    merge_list m = {0};
    gm_buf *tmp = &m.text;
    size_t index = 0;
    int rc = 0;

    p = gm_json_ws(p, end);
    if (p >= end || *p != '[') {
        rc = fail_at(path, "model.merges", base, p,
                     p >= end ? "truncated" : *p == '{' ? "expected an array, found an object" : "expected an array", st);
        goto out;
    }
    p = gm_json_ws(p + 1, end);
    if (p < end && *p == ']') {
        p++;
        goto done;
    }
    for (;; index++) {
        size_t split, start = tmp->n;
        if (p < end && *p == '"') {
            // "a b": no vocab entry holds a space, so the one space splits it exactly
            if (gm_json_string(p, end, tmp, &p, &err) != 0) {
                rc = fail_at(path, "model.merges", base, p, err, st);
                goto out;
            }
            size_t qn = tmp->n - start;
            char *q = qn ? tmp->p + start : ""; // an empty first merge leaves tmp unallocated (NULL + 0)
            char *sp = qn ? memchr(q, ' ', qn) : NULL;
            if (sp == NULL || memchr(sp + 1, ' ', qn - (size_t)(sp + 1 - q)) != NULL) {
                rc = gm_fail(st, GM_EFORMAT, "%s: model.merges[%zu]: expected \"left right\" with one space, found '%.*s'",
                             path, index, (int)(qn > 64 ? 64 : qn), q);
                goto out;
            }
            split = (size_t)(sp - q);
            memmove(sp, sp + 1, qn - split - 1);
            tmp->n--;
        } else if (p < end && *p == '[') {
            p = gm_json_ws(p + 1, end);
            if (gm_json_string(p, end, tmp, &p, &err) != 0) {
                rc = fail_at(path, "model.merges", base, p, err, st);
                goto out;
            }
            split = tmp->n - start;
            p = gm_json_ws(p, end);
            if (p >= end || *p != ',') {
                rc = fail_at(path, "model.merges", base, p,
                             p >= end ? "truncated" : "expected a pair [\"left\", \"right\"]", st);
                goto out;
            }
            p = gm_json_ws(p + 1, end);
            if (gm_json_string(p, end, tmp, &p, &err) != 0) {
                rc = fail_at(path, "model.merges", base, p, err, st);
                goto out;
            }
            p = gm_json_ws(p, end);
            if (p >= end || *p != ']') {
                rc = fail_at(path, "model.merges", base, p,
                             p >= end ? "truncated" : "expected a pair [\"left\", \"right\"]", st);
                goto out;
            }
            p++;
        } else {
            rc = fail_at(path, "model.merges", base, p, p >= end ? "truncated" : "expected \"a b\" or [\"a\", \"b\"]",
                         st);
            goto out;
        }
        if (index >= UINT32_MAX - 1 || tmp->n > UINT32_MAX / 2) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.merges: too large", path);
            goto out;
        }
        if (list_add(&m, start, split, tmp->n - start) != 0) {
            rc = gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", path);
            goto out;
        }
        p = gm_json_ws(p, end);
        if (p < end && *p == ',') {
            p = gm_json_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']') {
            p++;
            break;
        }
        rc = fail_at(path, "model.merges", base, p, p >= end ? "truncated" : "expected ',' or ']'", st);
        goto out;
    }
done:
    if ((rc = resolve_all(path, vocab, arena, &m, merges, st)) != 0)
        goto out;
    *after = p;
out:
    free(m.text.p);
    free(m.e);
    free(m.ids);
    return rc;
}
