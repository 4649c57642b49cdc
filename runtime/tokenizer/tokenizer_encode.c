/*
** Encode and decode.
**
** Encode follows the reference's order: added tokens with normalized false
** are cut out of the raw text (leftmost-longest, honouring lstrip, rstrip and
** single_word; special ones only when parse_special); each stretch between
** them is normalized, then cut again at added tokens with normalized true,
** pre-tokenized, and each pre-token run through BPE. The post-processor's
** ids go around the whole sequence.
*/
#include "tokenizer_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct enc_ctx {
    const gm_tokenizer *t;
    int parse_special;
    tk_scratch *scratch;
    gm_buf norm, tmp;
    tk_spans spans;
    tk_ids out;
} enc_ctx;

static void ctx_free(enc_ctx *c)
{
    tk_scratch_free(c->scratch);
    free(c->norm.p);
    free(c->tmp.p);
    free(c->spans.p);
    free(c->out.p);
}

/* ------------------------------------------------------------ added tokens */

static size_t trim_ws_left(const char *s, size_t start, size_t floor)
{
    // move start left over White_Space characters, not below floor
    size_t i = start;
    while (i > floor) {
        size_t j = i - 1;
        while (j > floor && ((unsigned char)s[j] & 0xC0) == 0x80)
            j--;
        size_t adv;
        uint32_t c = gm_utf8_decode(s + j, i - j, &adv);
        if (!tk_is_white_space(c))
            break;
        i = j;
    }
    return i;
}

static size_t trim_ws_right(const char *s, size_t stop, size_t n)
{
    while (stop < n) {
        size_t adv;
        uint32_t c = gm_utf8_decode(s + stop, n - stop, &adv);
        if (!tk_is_white_space(c))
            break;
        stop += adv;
    }
    return stop;
}

static int word_before(const char *s, size_t i)
{
    if (i == 0)
        return 0;
    size_t j = i - 1, adv;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80)
        j--;
    return tk_is_word_char(gm_utf8_decode(s + j, i - j, &adv));
}

static int word_after(const char *s, size_t i, size_t n)
{
    size_t adv;
    return i < n && tk_is_word_char(gm_utf8_decode(s + i, n - i, &adv));
}

/*
** The next added token in s[from, n): leftmost-longest among m's tokens, as
** an Aho-Corasick LeftmostLongest iterator finds them; a match that is
** skipped (a special token while not parsing them, a failed single_word)
** still consumes its text. Returns 1 with the token's span and id, else 0.
*/
static int next_added(const gm_tokenizer *t, const tk_matcher *m, int norm, int parse_special, const char *s,
                      size_t n, size_t from, size_t floor, size_t *ms, size_t *me, int32_t *id)
{
    size_t i = from;

    if (m->count == 0)
        return 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        uint32_t k0 = m->first[c], k1 = m->first[c + 1];
        const tk_added *hit = NULL;
        size_t hlen = 0;
        for (uint32_t k = k0; k < k1; k++) {
            const tk_added *a = &t->added[m->order[k]];
            const char *p = t->arena.p + (norm ? a->noff : a->off);
            size_t len = norm ? a->nlen : a->len;
            if (len <= n - i && memcmp(s + i, p, len) == 0) {
                hit = a;
                hlen = len;
                break;
            }
        }
        if (hit == NULL) {
            i++;
            continue;
        }
        size_t start = i, stop = i + hlen;
        if ((hit->special && !parse_special) ||
            (hit->single_word && (word_before(s, start) || word_after(s, stop, n)))) {
            i = stop;
            continue;
        }
        if (hit->lstrip)
            start = trim_ws_left(s, start, floor);
        if (hit->rstrip)
            stop = trim_ws_right(s, stop, n);
        *ms = start;
        *me = stop;
        *id = !parse_special && t->quirks && !hit->special ? hit->quirk_id : hit->id;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ encode */

static int model_piece(enc_ctx *c, const char *s, size_t n)
{
    const gm_tokenizer *t = c->t;

    if (n == 0)
        return 0;
    if (tk_pretokenize(t, s, n, &c->spans, &c->tmp) != 0)
        return -1;
    for (size_t i = 0; i < c->spans.n; i++) {
        size_t a = c->spans.p[2 * i], b = c->spans.p[2 * i + 1];
        if (tk_bpe_word(t, c->scratch, s + a, b - a, &c->out) != 0)
            return -1;
    }
    return 0;
}

/* One stretch between raw added tokens: normalize, cut at normalized added tokens, model. */
static int normalized_piece(enc_ctx *c, const char *s, size_t n)
{
    const gm_tokenizer *t = c->t;
    const char *ns = s;
    size_t nn = n, pos = 0, ms, me;
    int32_t id;

    if (n == 0)
        return 0;
    if (t->n_norm > 0) {
        if (tk_normalize(t, s, n, &c->norm) != 0)
            return -1;
        ns = c->norm.p;
        nn = c->norm.n;
    }
    if (t->match_norm.count == 0)
        return model_piece(c, ns, nn);
    // the normalized text may be reused by model_piece's callees; keep our own copy
    char *copy = malloc(nn ? nn : 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, ns, nn);
    int rc = 0;
    while (rc == 0 && next_added(t, &t->match_norm, 1, c->parse_special, copy, nn, pos, pos, &ms, &me, &id)) {
        rc = model_piece(c, copy + pos, ms - pos);
        if (rc == 0)
            rc = tk_ids_push(&c->out, id);
        pos = me;
    }
    if (rc == 0)
        rc = model_piece(c, copy + pos, nn - pos);
    free(copy);
    return rc;
}

static int encode_text(enc_ctx *c, const char *s, size_t n)
{
    const gm_tokenizer *t = c->t;
    size_t pos = 0, ms, me;
    int32_t id;

    while (next_added(t, &t->match_raw, 0, c->parse_special, s, n, pos, pos, &ms, &me, &id)) {
        if (normalized_piece(c, s + pos, ms - pos) != 0 || tk_ids_push(&c->out, id) != 0)
            return -1;
        pos = me;
    }
    return normalized_piece(c, s + pos, n - pos);
}

static int check_text(const gm_tokenizer *t, const char *text, size_t len, gm_status *st)
{
    size_t bad = gm_utf8_check(text, len);
    (void)t;
    if (bad != len)
        return gm_fail(st, GM_EFORMAT, "text: invalid UTF-8 at byte %zu", bad);
    return 0;
}

int gm_tokenizer_encode(const gm_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                        int32_t **ids, size_t *n, gm_status *st)
{
    enc_ctx c = {0};
    int rc = 0;

    *ids = NULL;
    *n = 0;
    if ((rc = check_text(t, text, len, st)) != 0)
        return rc;
    c.t = t;
    c.parse_special = parse_special;
    c.scratch = tk_scratch_new();
    if (c.scratch == NULL || (add_special && tk_ids_put(&c.out, t->pp_before, t->n_before) != 0) ||
        encode_text(&c, text, len) != 0 || (add_special && tk_ids_put(&c.out, t->pp_after, t->n_after) != 0) ||
        tk_ids_push(&c.out, 0) != 0) {
        rc = gm_fail(st, GM_ENOMEM, "%s: encode: out of memory", t->path);
        goto out;
    }
    c.out.n--; // the pushed 0 only guarantees a non-NULL buffer for empty results
    *ids = c.out.p;
    *n = c.out.n;
    c.out.p = NULL;
out:
    ctx_free(&c);
    return rc;
}

/* ----------------------------------------------------------- multi-thread */

typedef struct mt_job {
    const gm_tokenizer *t;
    const char *s;
    size_t n;
    int parse_special;
    int32_t *ids;
    size_t count;
    int rc;
    gm_status st;
} mt_job;

static void *mt_run(void *arg)
{
    mt_job *j = arg;
    j->rc = gm_tokenizer_encode(j->t, j->s, j->n, 0, j->parse_special, &j->ids, &j->count, &j->st);
    return NULL;
}

/* A cut at or after want: just after a "\n" that an ASCII graphic character follows. */
static size_t safe_cut(const char *s, size_t n, size_t want)
{
    for (size_t i = want ? want : 1; i < n; i++)
        if (s[i - 1] == '\n' && s[i] > 0x20 && s[i] < 0x7F)
            return i;
    return n;
}

enum { MT_MIN_BYTES = 1 << 16, MT_MAX_THREADS = 16 };

int gm_tokenizer_encode_mt(const gm_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                           int n_threads, int32_t **ids, size_t *n, gm_status *st)
{
    mt_job jobs[MT_MAX_THREADS];
    pthread_t tid[MT_MAX_THREADS];
    int started[MT_MAX_THREADS] = {0};
    size_t k = 0, pos = 0, total;
    int rc = 0;

    if (n_threads > MT_MAX_THREADS)
        n_threads = MT_MAX_THREADS;
    if (!t->mt_safe || n_threads < 2 || len < MT_MIN_BYTES)
        return gm_tokenizer_encode(t, text, len, add_special, parse_special, ids, n, st);
    *ids = NULL;
    *n = 0;
    if ((rc = check_text(t, text, len, st)) != 0)
        return rc;
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < n_threads && pos < len; i++) {
        size_t cut = i == n_threads - 1 ? len : safe_cut(text, len, pos + (len - pos) / (size_t)(n_threads - i));
        jobs[k] = (mt_job){t, text + pos, cut - pos, parse_special, NULL, 0, 0, {0, {0}}};
        k++;
        pos = cut;
    }
    for (size_t i = 1; i < k; i++)
        started[i] = pthread_create(&tid[i], NULL, mt_run, &jobs[i]) == 0;
    mt_run(&jobs[0]);
    for (size_t i = 1; i < k; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            mt_run(&jobs[i]);
    }
    total = add_special ? t->n_before + t->n_after : 0;
    for (size_t i = 0; i < k; i++) {
        if (jobs[i].rc != 0 && rc == 0) {
            rc = jobs[i].rc;
            if (st != NULL)
                *st = jobs[i].st;
        }
        total += jobs[i].count;
    }
    if (rc == 0) {
        int32_t *p = malloc((total ? total : 1) * sizeof *p);
        if (p == NULL) {
            rc = gm_fail(st, GM_ENOMEM, "%s: encode: out of memory", t->path);
        } else {
            size_t o = 0;
            if (add_special && t->n_before) {
                memcpy(p, t->pp_before, t->n_before * sizeof *p);
                o += t->n_before;
            }
            for (size_t i = 0; i < k; i++) {
                if (jobs[i].count)
                    memcpy(p + o, jobs[i].ids, jobs[i].count * sizeof *p);
                o += jobs[i].count;
            }
            if (add_special && t->n_after) {
                memcpy(p + o, t->pp_after, t->n_after * sizeof *p);
                o += t->n_after;
            }
            *ids = p;
            *n = o;
        }
    }
    for (size_t i = 0; i < k; i++)
        free(jobs[i].ids);
    return rc;
}

/* ------------------------------------------------------------------ decode */

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

static int dec_replace(const tk_dec *d, const strs *in, strs *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const char *s = STR(in, i);
        size_t n = in->len[i], j = 0, start = 0;
        if (strs_add(out, "", 0) != 0)
            return -1;
        while (d->alen > 0 && j + d->alen <= n) {
            if (memcmp(s + j, d->a, d->alen) == 0) {
                if (strs_append_last(out, s + start, j - start) != 0 || strs_append_last(out, d->b, d->blen) != 0)
                    return -1;
                j += d->alen;
                start = j;
            } else {
                j++;
            }
        }
        if (strs_append_last(out, s + start, n - start) != 0)
            return -1;
    }
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
