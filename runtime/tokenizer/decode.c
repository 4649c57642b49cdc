/*
** Decode: ids to their token strings, then the decoder steps in order, each
** over the whole list of strings (ByteFallback and ByteLevel join bytes across
** tokens, so a step cannot run token by token), then the strings joined; with
** no decoder in tokenizer.json, joined with spaces, as the reference does.
*/
#include "tokenizer_types.h"

#include <stdlib.h>
#include <string.h>

#include "gm/utf8.h"
#include "unicode.h"

/* A list of strings: spans of one buffer. */
typedef struct strs {
    gm_buf b;
    size_t *off, *len;
    size_t n, cap;
} strs;

static int strs_add(strs *v, const char *s, size_t n)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        size_t *o = realloc(v->off, cap * sizeof *o);
        if (o == NULL)
            return -1;
        v->off = o;
        size_t *l = realloc(v->len, cap * sizeof *l);
        if (l == NULL)
            return -1;
        v->len = l;
        v->cap = cap;
    }
    v->off[v->n] = v->b.n;
    v->len[v->n] = n;
    v->n++;
    return gm_buf_put(&v->b, s, n);
}

/* Extend the last string by n bytes of s (which must not point into v->b). */
static int strs_append_last(strs *v, const char *s, size_t n)
{
    v->len[v->n - 1] += n;
    return gm_buf_put(&v->b, s, n);
}

static void strs_free(strs *v)
{
    free(v->b.p);
    free(v->off);
    free(v->len);
}

/* all strings empty: no buffer yet, and NULL + 0 is undefined */
#define STR(v, i) ((v)->b.p ? (v)->b.p + (v)->off[i] : "")

static int dec_byte_level(const strs *in, strs *out)
{
    int16_t inv[0x144];
    gm_buf raw = {0}, lossy = {0};
    int rc = -1;

    for (int i = 0; i < 0x144; i++)
        inv[i] = -1;
    for (int b = 0; b < 256; b++)
        inv[tk_byte_to_cp[b]] = (int16_t)b;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = STR(in, i);
        size_t n = in->len[i], start = raw.n, j = 0;
        int ok = 1;
        while (j < n) {
            size_t adv;
            uint32_t c = gm_utf8_decode(s + j, n - j, &adv);
            if (c >= 0x144 || inv[c] < 0) {
                ok = 0;
                break;
            }
            char b = (char)inv[c];
            if (gm_buf_put(&raw, &b, 1) != 0)
                goto out;
            j += adv;
        }
        if (!ok) {
            // a token with a character outside the alphabet keeps its own bytes
            raw.n = start;
            if (gm_buf_put(&raw, s, n) != 0)
                goto out;
        }
    }
    if (tk_utf8_lossy(raw.p ? raw.p : "", raw.n, &lossy) != 0 || strs_add(out, lossy.p ? lossy.p : "", lossy.n) != 0)
        goto out;
    rc = 0;
out:
    free(raw.p);
    free(lossy.p);
    return rc;
}

static int byte_token(const char *s, size_t n, unsigned char *b)
{
    // "<0xNN>" with two hex digits, either case
    unsigned v = 0;
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *b = (unsigned char)v;
    return 1;
}

static int flush_bytes(gm_buf *bytes, strs *out)
{
    if (bytes->n == 0)
        return 0;
    // valid UTF-8 as a whole becomes one string; otherwise one U+FFFD per byte
    if (gm_utf8_check(bytes->p, bytes->n) == bytes->n) {
        if (strs_add(out, bytes->p, bytes->n) != 0)
            return -1;
    } else {
        for (size_t i = 0; i < bytes->n; i++)
            if (strs_add(out, "\xEF\xBF\xBD", 3) != 0)
                return -1;
    }
    bytes->n = 0;
    return 0;
}

static int dec_byte_fallback(const strs *in, strs *out)
{
    gm_buf bytes = {0};
    int rc = -1;

    for (size_t i = 0; i < in->n; i++) {
        unsigned char b;
        if (byte_token(STR(in, i), in->len[i], &b)) {
            if (gm_buf_put(&bytes, &b, 1) != 0)
                goto out;
            continue;
        }
        if (flush_bytes(&bytes, out) != 0 || strs_add(out, STR(in, i), in->len[i]) != 0)
            goto out;
    }
    if (flush_bytes(&bytes, out) != 0)
        goto out;
    rc = 0;
out:
    free(bytes.p);
    return rc;
}

/* One more string in out: s[0, n) with each pat in it replaced by with (an empty pat: s as it is). */
static int add_replaced(strs *out, const char *s, size_t n, const char *pat, size_t plen, const char *with, size_t wlen)
{
    if (strs_add(out, "", 0) != 0)
        return -1;
    const size_t before = out->b.n;
    if (tk_replace_all(s, n, pat, plen, with, wlen, &out->b) != 0)
        return -1;
    out->len[out->n - 1] = out->b.n - before;
    return 0;
}

static int dec_replace(const tk_dec *d, const strs *in, strs *out)
{
    for (size_t i = 0; i < in->n; i++)
        if (add_replaced(out, STR(in, i), in->len[i], d->a, d->alen, d->b, d->blen) != 0)
            return -1;
    return 0;
}

static int dec_strip(const tk_dec *d, const strs *in, strs *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const char *s = STR(in, i);
        size_t a = 0, b = in->len[i];
        for (int k = 0; k < d->start && b - a >= d->alen && memcmp(s + a, d->a, d->alen) == 0; k++)
            a += d->alen;
        for (int k = 0; k < d->stop && b - a >= d->alen && memcmp(s + b - d->alen, d->a, d->alen) == 0; k++)
            b -= d->alen;
        if (strs_add(out, s + a, b - a) != 0)
            return -1;
    }
    return 0;
}

/*
** Metaspace: the replacement becomes a space, except in the first string,
** where every one of them goes (the one the encoder put in front, and any
** other, as the reference does), unless the scheme is never.
*/
static int dec_metaspace(const tk_dec *d, const strs *in, strs *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const int drop = i == 0 && d->start != TK_PREPEND_NEVER;
        if (add_replaced(out, STR(in, i), in->len[i], d->a, d->alen, " ", drop ? 0 : 1) != 0)
            return -1;
    }
    return 0;
}

static int dec_fuse(const strs *in, strs *out)
{
    if (strs_add(out, "", 0) != 0)
        return -1;
    for (size_t i = 0; i < in->n; i++)
        if (strs_append_last(out, STR(in, i), in->len[i]) != 0)
            return -1;
    return 0;
}

int gm_tokenizer_decode(const gm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                        size_t *len, gm_status *st)
{
    strs a = {0}, b = {0};
    gm_buf res = {0};
    int rc = 0;

    *text = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        // ids without a token are dropped, as the reference's decode does
        if (id < 0 || id >= t->n_ids || t->id_off[id] == UINT32_MAX)
            continue;
        if (skip_special && (t->id_flags[id] & TK_ID_SPECIAL))
            continue;
        if (strs_add(&a, t->arena.p + t->id_off[id], t->id_len[id]) != 0)
            goto nomem;
    }
    for (size_t k = 0; k < t->n_dec; k++) {
        const tk_dec *d = &t->dec[k];
        int r;
        b.n = 0;
        b.b.n = 0;
        switch (d->kind) {
        case TK_DEC_BYTE_LEVEL: r = dec_byte_level(&a, &b); break;
        case TK_DEC_BYTE_FALLBACK: r = dec_byte_fallback(&a, &b); break;
        case TK_DEC_REPLACE: r = dec_replace(d, &a, &b); break;
        case TK_DEC_STRIP: r = dec_strip(d, &a, &b); break;
        case TK_DEC_METASPACE: r = dec_metaspace(d, &a, &b); break;
        default: r = dec_fuse(&a, &b); break;
        }
        if (r != 0)
            goto nomem;
        strs swap = a;
        a = b;
        b = swap;
    }
    for (size_t i = 0; i < a.n; i++) {
        // without a decoder the reference joins tokens with spaces
        if (!t->has_decoder && i > 0 && gm_buf_put(&res, " ", 1) != 0)
            goto nomem;
        if (gm_buf_put(&res, STR(&a, i), a.len[i]) != 0)
            goto nomem;
    }
    if (gm_buf_put(&res, "", 1) != 0)
        goto nomem;
    *text = res.p;
    *len = res.n - 1;
    res.p = NULL;
    goto out;
nomem:
    rc = gm_fail(st, GM_ENOMEM, "%s: decode: out of memory", t->path);
out:
    free(res.p);
    strs_free(&a);
    strs_free(&b);
    return rc;
}
