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

/* Parse the object at p into t->vocab; ids are recorded in t->id_off/len later. */
int tk_load_vocab(gm_tokenizer *t, const char *p, const char *end, gm_status *st)
{
    const char *base = p, *err = NULL;
    int ok;

    // entries take at least ~12 bytes each in practice, which sizes the map
    if (tk_str_map_init(&t->vocab, (size_t)(end - p) / 12 + 16) != 0)
        return gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", t->path);
    p = tk_json_ws(p, end);
    if (p >= end || *p != '{')
        return fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected an object", st);
    p = tk_json_ws(p + 1, end);
    if (p < end && *p == '}')
        return 0;
    for (;;) {
        size_t off = t->arena.n;
        uint32_t id;
        if (tk_json_string(p, end, &t->arena, &p, &err) != 0)
            return fail_at(t, "model.vocab", base, p, err, st);
        p = tk_json_ws(p, end);
        if (p >= end || *p != ':')
            return fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected ':'", st);
        p = tk_json_ws(p + 1, end);
        id = parse_index(p, end, &p, &ok);
        if (!ok)
            return fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected a non-negative integer id",
                           st);
        if (t->arena.n - off > UINT32_MAX / 2 || t->arena.n > UINT32_MAX / 2)
            return gm_fail(st, GM_EFORMAT, "%s: model.vocab: too large", t->path);
        // a duplicate key overwrites the earlier entry (the last one wins, as in a HashMap)
        if (tk_str_map_put(&t->vocab, t->arena.p, (uint32_t)off, (uint32_t)(t->arena.n - off), (int32_t)id) != 0)
            return gm_fail(st, GM_ENOMEM, "%s: model.vocab: out of memory", t->path);
        if ((int32_t)id + 1 > t->n_ids)
            t->n_ids = (int32_t)id + 1;
        p = tk_json_ws(p, end);
        if (p < end && *p == ',') {
            p = tk_json_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}')
            break;
        return fail_at(t, "model.vocab", base, p, p >= end ? "truncated" : "expected ',' or '}'", st);
    }
    return 0;
}

/* ------------------------------------------------------------ model.merges */

static int merge_token(gm_tokenizer *t, const char *s, size_t n, size_t index, int32_t *id, gm_status *st)
{
    *id = tk_str_map_get(&t->vocab, t->arena.p, s, n);
    if (*id < 0)
        return gm_fail(st, GM_EFORMAT, "%s: model.merges[%zu]: token '%.*s' is not in model.vocab", t->path, index,
                       (int)(n > 64 ? 64 : n), s);
    return 0;
}

/*
** One merge: both tokens and their concatenation must be vocab entries (the
** reference reports MergeTokenOutOfVocabulary otherwise). The rank is the index.
*/
static int add_merge(gm_tokenizer *t, tk_buf *tmp, size_t split, size_t index, gm_status *st)
{
    int32_t a, b, ab;

    if (merge_token(t, tmp->p, split, index, &a, st) != 0 ||
        merge_token(t, tmp->p + split, tmp->n - split, index, &b, st) != 0 ||
        merge_token(t, tmp->p, tmp->n, index, &ab, st) != 0)
        return st->code;
    tk_pair_map_put(&t->merges, a, b, (uint32_t)index, ab);
    return 0;
}

int tk_load_merges(gm_tokenizer *t, const char *p, const char *end, gm_status *st)
{
    const char *base = p, *err = NULL;
    tk_buf tmp = {0};
    size_t index = 0;
    int rc = 0;

    if (tk_pair_map_init(&t->merges, (size_t)(end - p) / 10 + 16) != 0) {
        rc = gm_fail(st, GM_ENOMEM, "%s: model.merges: out of memory", t->path);
        goto out;
    }
    p = tk_json_ws(p, end);
    if (p >= end || *p != '[') {
        rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected an array", st);
        goto out;
    }
    p = tk_json_ws(p + 1, end);
    if (p < end && *p == ']')
        goto out;
    for (;; index++) {
        size_t split;
        tmp.n = 0;
        if (p < end && *p == '"') {
            // "a b": no vocab entry holds a space, so the one space splits it exactly
            if (tk_json_string(p, end, &tmp, &p, &err) != 0) {
                rc = fail_at(t, "model.merges", base, p, err, st);
                goto out;
            }
            char *sp = memchr(tmp.p, ' ', tmp.n);
            if (sp == NULL || memchr(sp + 1, ' ', tmp.n - (size_t)(sp + 1 - tmp.p)) != NULL) {
                rc = gm_fail(st, GM_EFORMAT, "%s: model.merges[%zu]: expected \"left right\" with one space, found '%.*s'",
                             t->path, index, (int)(tmp.n > 64 ? 64 : tmp.n), tmp.p ? tmp.p : "");
                goto out;
            }
            split = (size_t)(sp - tmp.p);
            memmove(sp, sp + 1, tmp.n - split - 1);
            tmp.n--;
        } else if (p < end && *p == '[') {
            p = tk_json_ws(p + 1, end);
            if (tk_json_string(p, end, &tmp, &p, &err) != 0) {
                rc = fail_at(t, "model.merges", base, p, err, st);
                goto out;
            }
            split = tmp.n;
            p = tk_json_ws(p, end);
            if (p >= end || *p != ',') {
                rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected a pair [\"left\", \"right\"]", st);
                goto out;
            }
            p = tk_json_ws(p + 1, end);
            if (tk_json_string(p, end, &tmp, &p, &err) != 0) {
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
        if (index >= UINT32_MAX - 1) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.merges: too many merges", t->path);
            goto out;
        }
        if (add_merge(t, &tmp, split, index, st) != 0) {
            rc = st->code;
            goto out;
        }
        p = tk_json_ws(p, end);
        if (p < end && *p == ',') {
            p = tk_json_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']')
            break;
        rc = fail_at(t, "model.merges", base, p, p >= end ? "truncated" : "expected ',' or ']'", st);
        goto out;
    }
out:
    free(tmp.p);
    return rc;
}
