/*
** The pre-tokenizers: Split, run by Oniguruma with the reference's rules for
** matches, behaviours and invert, ByteLevel's GPT-2 regex (the byte to
** alphabet mapping of ByteLevel happens in BPE, on the model's side, so that
** a pre-token stays a span of the normalized text), and Metaspace, the one
** step that writes text: SentencePiece's replacement (U+2581) for each space
** and in front of a piece.
**
** Regex engine: Oniguruma, the engine the reference runs its Split regexes on.
** Debian 12's PCRE2 10.42 also compiles them, but with PCRE2_UCP it counts
** U+180E as \s where the reference does not (input mongolian_fvs), and
** without UCP its \s is ASCII-only. Oniguruma 6.9.8 agrees with the
** reference everywhere except letters and digits newer than its Unicode
** tables; the reference uses Unicode 16, so \p{L} and \p{N} in a pattern are
** widened with the code points Unicode 16 adds (regex_augment).
*/
#include "pretokenize.h"

#include <oniguruma.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/buf.h"
#include "gm/utf8.h"

/* ------------------------------------------------------------------- regex */

static const uint32_t unicode16_letters[][2] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0xA7CD}, {0xA7DA, 0xA7DC}, {0x105C0, 0x105F3},
    {0x10D4A, 0x10D65}, {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x1123F, 0x11240},
    {0x11380, 0x11389}, {0x1138B, 0x1138B}, {0x1138E, 0x1138E}, {0x11390, 0x113B5},
    {0x113B7, 0x113B7}, {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0},
    {0x11F02, 0x11F02}, {0x11F04, 0x11F10}, {0x11F12, 0x11F33}, {0x1342F, 0x1342F},
    {0x13441, 0x13446}, {0x13460, 0x143FA}, {0x16100, 0x1611D}, {0x16D40, 0x16D6C},
    {0x18CFF, 0x18CFF}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1DF25, 0x1DF2A},
    {0x1E030, 0x1E06D}, {0x1E4D0, 0x1E4EB}, {0x1E5D0, 0x1E5ED}, {0x1E5F0, 0x1E5F0},
    {0x2B739, 0x2B739}, {0x2EBF0, 0x2EE5D}, {0x31350, 0x323AF},
};
static const uint32_t unicode16_numbers[][2] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11F50, 0x11F59},
    {0x16130, 0x16139}, {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1D2C0, 0x1D2D3},
    {0x1E4F0, 0x1E4F9}, {0x1E5F1, 0x1E5FA},
};

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;

static void onig_init_once(void)
{
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    onig_initialize(&enc, 1);
}

static int put_ranges(gm_buf *b, const uint32_t (*r)[2], size_t n)
{
    char tmp[48];
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", (unsigned)r[i][0], (unsigned)r[i][1]);
        if (k < 0 || (size_t)k >= sizeof tmp || gm_buf_put(b, tmp, (size_t)k) != 0)
            return -1;
    }
    return 0;
}

/*
** Rewrite \p{L} and \p{N} so that they also take the letters and numbers
** Unicode 16 added after Oniguruma's tables: inside a bracket class the
** ranges are appended, outside the property becomes a class. Ranges the
** engine already knows are harmless.
*/
static char *regex_augment(const char *p, size_t n, size_t *out_len)
{
    gm_buf b = {0};
    int depth = 0;

    for (size_t i = 0; i < n;) {
        if (p[i] == '\\' && i + 1 < n) {
            int letter = n - i >= 5 && memcmp(p + i, "\\p{L}", 5) == 0;
            int number = n - i >= 5 && memcmp(p + i, "\\p{N}", 5) == 0;
            if (letter || number) {
                const uint32_t (*r)[2] = letter ? unicode16_letters : unicode16_numbers;
                size_t rn = letter ? sizeof unicode16_letters / sizeof *unicode16_letters
                                   : sizeof unicode16_numbers / sizeof *unicode16_numbers;
                if ((depth == 0 && gm_buf_put(&b, "[", 1) != 0) || gm_buf_put(&b, p + i, 5) != 0 ||
                    put_ranges(&b, r, rn) != 0 || (depth == 0 && gm_buf_put(&b, "]", 1) != 0))
                    goto fail;
                i += 5;
                continue;
            }
            if (gm_buf_put(&b, p + i, 2) != 0)
                goto fail;
            i += 2;
            continue;
        }
        if (p[i] == '[')
            depth++;
        else if (p[i] == ']' && depth > 0)
            depth--;
        if (gm_buf_put(&b, p + i, 1) != 0)
            goto fail;
        i++;
    }
    if (gm_buf_put(&b, "", 1) != 0)
        goto fail;
    *out_len = b.n - 1;
    return b.p;
fail:
    free(b.p);
    return NULL;
}

int tk_regex_compile(void **re, const char *pattern, size_t len, const char *path, const char *where, gm_status *st)
{
    OnigErrorInfo info;
    regex_t *r = NULL;
    size_t alen;
    char *aug;
    int rc;

    pthread_once(&onig_once, onig_init_once);
    aug = regex_augment(pattern, len, &alen);
    if (aug == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: %s: out of memory", path, where);
    rc = onig_new(&r, (const UChar *)aug, (const UChar *)aug + alen, ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                  ONIG_SYNTAX_DEFAULT, &info);
    free(aug);
    if (rc != ONIG_NORMAL) {
        UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, rc, &info);
        return gm_fail(st, GM_EFORMAT, "%s: %s: regex does not compile: %s", path, where, (const char *)msg);
    }
    *re = r;
    return 0;
}

void tk_regex_free(void *re)
{
    if (re != NULL)
        onig_free((regex_t *)re);
}

/* ---------------------------------------------------------- pre-tokenizers */

static int spans_push(tk_spans *v, size_t a, size_t b)
{
    if (v->n + 1 > v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        size_t *p = realloc(v->p, cap * 2 * sizeof *p);
        if (p == NULL)
            return -1;
        v->p = p;
        v->cap = cap;
    }
    v->p[2 * v->n] = a;
    v->p[2 * v->n + 1] = b;
    v->n++;
    return 0;
}

/* Pieces of s[a, b): (start, end, is_match) triples, as the reference's find_matches gives them. */
typedef struct piece {
    size_t a, b;
    int match;
} piece;

typedef struct pieces {
    piece *p;
    size_t n, cap;
} pieces;

static int pieces_push(pieces *v, size_t a, size_t b, int match)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        piece *p = realloc(v->p, cap * sizeof *p);
        if (p == NULL)
            return -1;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = (piece){a, b, match};
    return 0;
}

/*
** All matches of re in s[a, b), with the onig crate's find_iter rules for empty matches. -1 out of
** memory, or -2 with *err Oniguruma's code when the search itself fails (its retry or stack limits).
*/
static int find_matches(regex_t *re, OnigRegion *region, const char *s, size_t a, size_t b, pieces *out, int *err)
{
    const UChar *str = (const UChar *)s + a, *end = (const UChar *)s + b;
    size_t n = b - a, last_end = 0, prev = 0;
    int have_last = 0;
    size_t last_match_end = 0;

    out->n = 0;
    while (last_end <= n) {
        int r = onig_search(re, str, end, str + last_end, end, region, ONIG_OPTION_NONE);
        if (r == ONIG_MISMATCH)
            break;
        if (r < 0) {
            *err = r;
            return -2;
        }
        size_t ms = (size_t)region->beg[0], me = (size_t)region->end[0];
        if (me == ms && have_last && last_match_end == me) {
            size_t adv = 1;
            if (last_end < n) {
                int k = gm_utf8_lead_len((unsigned char)s[a + last_end]);
                adv = k > 0 ? (size_t)k : 1;
            }
            last_end += adv;
            continue;
        }
        last_end = me;
        last_match_end = me;
        have_last = 1;
        if (prev != ms && pieces_push(out, a + prev, a + ms, 0) != 0)
            return -1;
        if (pieces_push(out, a + ms, a + me, 1) != 0)
            return -1;
        prev = me;
    }
    if (prev != n && pieces_push(out, a + prev, b, 0) != 0)
        return -1;
    return 0;
}

static int apply_behavior(const tk_pre *pre, pieces *m, tk_spans *out)
{
    size_t first = out->n;
    int prev_match = 0;

    if (pre->invert)
        for (size_t i = 0; i < m->n; i++)
            m->p[i].match = !m->p[i].match;
    switch (pre->behavior) {
    case TK_SPLIT_REMOVED:
        for (size_t i = 0; i < m->n; i++)
            if (!m->p[i].match && spans_push(out, m->p[i].a, m->p[i].b) != 0)
                return -1;
        break;
    case TK_SPLIT_ISOLATED:
        for (size_t i = 0; i < m->n; i++)
            if (spans_push(out, m->p[i].a, m->p[i].b) != 0)
                return -1;
        break;
    case TK_SPLIT_MERGED_WITH_PREVIOUS:
        for (size_t i = 0; i < m->n; i++) {
            if (m->p[i].match && !prev_match && out->n > first)
                out->p[2 * (out->n - 1) + 1] = m->p[i].b;
            else if (spans_push(out, m->p[i].a, m->p[i].b) != 0)
                return -1;
            prev_match = m->p[i].match;
        }
        break;
    case TK_SPLIT_MERGED_WITH_NEXT:
        // walk backwards, then reverse what was added
        for (size_t i = m->n; i-- > 0;) {
            if (m->p[i].match && !prev_match && out->n > first)
                out->p[2 * (out->n - 1)] = m->p[i].a;
            else if (spans_push(out, m->p[i].a, m->p[i].b) != 0)
                return -1;
            prev_match = m->p[i].match;
        }
        for (size_t i = first, j = out->n; i + 1 < j; i++, j--) {
            size_t x0 = out->p[2 * i], x1 = out->p[2 * i + 1];
            out->p[2 * i] = out->p[2 * (j - 1)];
            out->p[2 * i + 1] = out->p[2 * (j - 1) + 1];
            out->p[2 * (j - 1)] = x0;
            out->p[2 * (j - 1) + 1] = x1;
        }
        break;
    default: /* TK_SPLIT_CONTIGUOUS */
        for (size_t i = 0; i < m->n; i++) {
            if (m->p[i].match == prev_match && out->n > first)
                out->p[2 * (out->n - 1) + 1] = m->p[i].b;
            else if (spans_push(out, m->p[i].a, m->p[i].b) != 0)
                return -1;
            prev_match = m->p[i].match;
        }
        break;
    }
    // drop empty pieces
    size_t k = first;
    for (size_t i = first; i < out->n; i++)
        if (out->p[2 * i] != out->p[2 * i + 1]) {
            out->p[2 * k] = out->p[2 * i];
            out->p[2 * k + 1] = out->p[2 * i + 1];
            k++;
        }
    out->n = k;
    return 0;
}

/*
** The one line for a search Oniguruma gave up on: the file, the step's pattern (its first 80 bytes),
** Oniguruma's reason. Its limits (retries, stack) are GM_EUNSUPPORTED: the file and the text are
** well-formed, the regex backtracks more on this text than the engine allows.
*/
static int search_failed(const tk_pre *pre, int err, const char *path, gm_status *st)
{
    UChar why[ONIG_MAX_ERROR_MESSAGE_LEN];
    const char *hint = "; simplify the regex in the file or tokenize shorter text";
    int code = GM_EUNSUPPORTED;
    if (err == ONIGERR_MEMORY) {
        code = GM_ENOMEM;
        hint = "";
    }
    onig_error_code_to_str(why, err);
    if (pre->kind == TK_PRE_BYTE_LEVEL)
        return gm_fail(st, code, "%s: pre_tokenizer: ByteLevel's regex failed to match the text: %s%s", path,
                       (const char *)why, *hint ? "; tokenize shorter text" : "");
    const char *pat = pre->pattern ? pre->pattern : "";
    return gm_fail(st, code, "%s: pre_tokenizer: Split %s '%.80s%s' failed to match the text: %s%s", path,
                   pre->is_regex ? "regex" : "pattern", pat, strlen(pat) > 80 ? "..." : "", (const char *)why, hint);
}

/*
** Metaspace on each piece of in, as the reference does it: the piece's
** spaces become the replacement, and the replacement goes in front of a
** piece that does not already start with it where the scheme says (always:
** every piece; first: the piece that starts where the input text starts;
** never: none; an empty piece gets nothing, but none reaches here). With
** split, each piece is then cut before every replacement (MergedWithNext:
** "\u2581\u2581a" is "\u2581" and "\u2581a"). The pieces are written anew,
** one after the other, into buf, and out's spans index that text. (The
** reference's "first" asks whether the piece starts at byte 0 of the
** original text; here it is byte 0 of the normalized text: the two differ
** only where a normalizer removes the first characters and a normalized
** added token then cuts the text.)
*/
static int metaspace(const tk_pre *pre, const char *s, const tk_spans *in, int at_start, gm_buf *buf, tk_spans *out)
{
    const char *rep = pre->rep;
    const size_t rl = pre->replen;
    buf->n = 0;
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const size_t a = in->p[2 * i], b = in->p[2 * i + 1], start = buf->n;
        const int leads = s[a] == ' ' || (b - a >= rl && memcmp(s + a, rep, rl) == 0);
        const int prefix = !leads && (pre->prepend == TK_PREPEND_ALWAYS ||
                                      (pre->prepend == TK_PREPEND_FIRST && at_start && a == 0));
        if (prefix && gm_buf_put(buf, rep, rl) != 0)
            return -1;
        for (size_t j = a; j < b;) { /* the run up to the next space, then the replacement for it */
            const char *sp = memchr(s + j, ' ', b - j);
            const size_t e = sp ? (size_t)(sp - s) : b;
            if (gm_buf_put(buf, s + j, e - j) != 0 || (sp && gm_buf_put(buf, rep, rl) != 0))
                return -1;
            j = sp ? e + 1 : b;
        }
        size_t from = start;
        if (pre->split) /* a cut before every replacement but one at the piece's start */
            for (size_t j = start + 1; j + rl <= buf->n; j++)
                if (memcmp(buf->p + j, rep, rl) == 0) {
                    if (spans_push(out, from, j) != 0)
                        return -1;
                    from = j;
                }
        if (spans_push(out, from, buf->n) != 0)
            return -1;
    }
    return 0;
}

int tk_pretokenize(const tk_pre *steps, size_t n_steps, const char *s, size_t n, int at_start, gm_buf *buf,
                   const char **text, tk_spans *out, const char *path, gm_status *st)
{
    tk_spans next = {0};
    pieces m = {0};
    OnigRegion *region = NULL;
    int rc = GM_ENOMEM, err = 0;

    out->n = 0;
    *text = s;
    if (n == 0)
        return 0;
    if (spans_push(out, 0, n) != 0)
        return gm_fail(st, GM_ENOMEM, "%s: encode: out of memory", path);
    for (size_t k = 0; k < n_steps; k++) {
        const tk_pre *pre = &steps[k];
        if (pre->kind == TK_PRE_METASPACE) { /* (the loader takes one Metaspace step at most: buf is written once) */
            if (metaspace(pre, s, out, at_start, buf, &next) != 0)
                goto out;
            s = *text = buf->p;
            tk_spans swap = *out;
            *out = next;
            next = swap;
            continue;
        }
        if (pre->regex == NULL)
            continue;
        if (region == NULL && (region = onig_region_new()) == NULL)
            goto out;
        next.n = 0;
        for (size_t i = 0; i < out->n; i++) {
            int r = find_matches(pre->regex, region, s, out->p[2 * i], out->p[2 * i + 1], &m, &err);
            if (r == -2) {
                rc = search_failed(pre, err, path, st);
                goto out;
            }
            if (r != 0 || apply_behavior(pre, &m, &next) != 0)
                goto out;
        }
        tk_spans swap = *out;
        *out = next;
        next = swap;
    }
    rc = 0;
out:
    if (rc == GM_ENOMEM)
        gm_fail(st, GM_ENOMEM, "%s: encode: out of memory", path);
    if (region != NULL)
        onig_region_free(region, 1);
    free(next.p);
    free(m.p);
    return rc;
}
