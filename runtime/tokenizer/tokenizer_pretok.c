/*
** Text before the model: UTF-8 helpers, normalizers (utf8proc for the
** Unicode forms), the Split pre-tokenizer run by Oniguruma, and the
** byte-level alphabet.
**
** Regex engine: Oniguruma, the engine the reference runs its Split regexes on.
** Debian 12's PCRE2 10.42 also compiles them, but with PCRE2_UCP it counts
** U+180E as \s where the reference does not (input mongolian_fvs), and
** without UCP its \s is ASCII-only. Oniguruma 6.9.8 agrees with the
** reference everywhere except letters and digits newer than its Unicode
** tables; the reference uses Unicode 16, so \p{L} and \p{N} in a pattern are
** widened with the code points Unicode 16 adds (tk_regex_augment).
*/
#include "tokenizer_internal.h"

#include <oniguruma.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ------------------------------------------------------------------- UTF-8 */

int tk_utf8_lossy(const char *str, size_t n, gm_buf *out)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, start = 0, sub;

    if (gm_buf_reserve(out, n + 1) != 0)
        return -1;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = gm_utf8_valid_at(s + i, n - i, &sub);
        if (k > 0) {
            i += k;
            continue;
        }
        if (gm_buf_put(out, s + start, i - start) != 0 || gm_buf_put(out, "\xEF\xBF\xBD", 3) != 0)
            return -1;
        i += sub;
        start = i;
    }
    return gm_buf_put(out, s + start, n - start);
}

int tk_is_white_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Rust regex's \w: alphabetic, marks, decimal digits, connector punctuation, joiners. */
int tk_is_word_char(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D)
        return 1;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

/* GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves, the rest move to U+0100.. */
const uint16_t tk_byte_to_cp[256] = {
    0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107,
    0x108, 0x109, 0x10A, 0x10B, 0x10C, 0x10D, 0x10E, 0x10F,
    0x110, 0x111, 0x112, 0x113, 0x114, 0x115, 0x116, 0x117,
    0x118, 0x119, 0x11A, 0x11B, 0x11C, 0x11D, 0x11E, 0x11F,
    0x120, 0x021, 0x022, 0x023, 0x024, 0x025, 0x026, 0x027,
    0x028, 0x029, 0x02A, 0x02B, 0x02C, 0x02D, 0x02E, 0x02F,
    0x030, 0x031, 0x032, 0x033, 0x034, 0x035, 0x036, 0x037,
    0x038, 0x039, 0x03A, 0x03B, 0x03C, 0x03D, 0x03E, 0x03F,
    0x040, 0x041, 0x042, 0x043, 0x044, 0x045, 0x046, 0x047,
    0x048, 0x049, 0x04A, 0x04B, 0x04C, 0x04D, 0x04E, 0x04F,
    0x050, 0x051, 0x052, 0x053, 0x054, 0x055, 0x056, 0x057,
    0x058, 0x059, 0x05A, 0x05B, 0x05C, 0x05D, 0x05E, 0x05F,
    0x060, 0x061, 0x062, 0x063, 0x064, 0x065, 0x066, 0x067,
    0x068, 0x069, 0x06A, 0x06B, 0x06C, 0x06D, 0x06E, 0x06F,
    0x070, 0x071, 0x072, 0x073, 0x074, 0x075, 0x076, 0x077,
    0x078, 0x079, 0x07A, 0x07B, 0x07C, 0x07D, 0x07E, 0x121,
    0x122, 0x123, 0x124, 0x125, 0x126, 0x127, 0x128, 0x129,
    0x12A, 0x12B, 0x12C, 0x12D, 0x12E, 0x12F, 0x130, 0x131,
    0x132, 0x133, 0x134, 0x135, 0x136, 0x137, 0x138, 0x139,
    0x13A, 0x13B, 0x13C, 0x13D, 0x13E, 0x13F, 0x140, 0x141,
    0x142, 0x0A1, 0x0A2, 0x0A3, 0x0A4, 0x0A5, 0x0A6, 0x0A7,
    0x0A8, 0x0A9, 0x0AA, 0x0AB, 0x0AC, 0x143, 0x0AE, 0x0AF,
    0x0B0, 0x0B1, 0x0B2, 0x0B3, 0x0B4, 0x0B5, 0x0B6, 0x0B7,
    0x0B8, 0x0B9, 0x0BA, 0x0BB, 0x0BC, 0x0BD, 0x0BE, 0x0BF,
    0x0C0, 0x0C1, 0x0C2, 0x0C3, 0x0C4, 0x0C5, 0x0C6, 0x0C7,
    0x0C8, 0x0C9, 0x0CA, 0x0CB, 0x0CC, 0x0CD, 0x0CE, 0x0CF,
    0x0D0, 0x0D1, 0x0D2, 0x0D3, 0x0D4, 0x0D5, 0x0D6, 0x0D7,
    0x0D8, 0x0D9, 0x0DA, 0x0DB, 0x0DC, 0x0DD, 0x0DE, 0x0DF,
    0x0E0, 0x0E1, 0x0E2, 0x0E3, 0x0E4, 0x0E5, 0x0E6, 0x0E7,
    0x0E8, 0x0E9, 0x0EA, 0x0EB, 0x0EC, 0x0ED, 0x0EE, 0x0EF,
    0x0F0, 0x0F1, 0x0F2, 0x0F3, 0x0F4, 0x0F5, 0x0F6, 0x0F7,
    0x0F8, 0x0F9, 0x0FA, 0x0FB, 0x0FC, 0x0FD, 0x0FE, 0x0FF
};

/* -------------------------------------------------------------- normalizers */

static int unicode_form(int kind, const char *s, size_t n, gm_buf *out)
{
    utf8proc_option_t opt = UTF8PROC_STABLE;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r;
    size_t i;

    // ASCII is unchanged by every normalization form
    for (i = 0; i < n && (unsigned char)s[i] < 0x80; i++)
        ;
    if (i == n)
        return gm_buf_put(out, s, n);
    switch (kind) {
    case TK_NORM_NFC: opt |= UTF8PROC_COMPOSE; break;
    case TK_NORM_NFD: opt |= UTF8PROC_DECOMPOSE; break;
    case TK_NORM_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst, opt);
    if (r < 0)
        return -1;
    int rc = gm_buf_put(out, dst, (size_t)r);
    free(dst);
    return rc;
}

static int replace_all(const char *s, size_t n, const char *pat, size_t plen, const char *with, size_t wlen,
                       gm_buf *out)
{
    size_t i = 0, start = 0;

    if (plen == 0)
        return gm_buf_put(out, s, n);
    while (i + plen <= n) {
        if (s[i] == pat[0] && memcmp(s + i, pat, plen) == 0) {
            if (gm_buf_put(out, s + start, i - start) != 0 || gm_buf_put(out, with, wlen) != 0)
                return -1;
            i += plen;
            start = i;
        } else {
            i++;
        }
    }
    return gm_buf_put(out, s + start, n - start);
}

/* Apply the normalizer steps to s; out receives the result (out is reset). */
int tk_normalize(const gm_tokenizer *t, const char *s, size_t n, gm_buf *out)
{
    gm_buf a = {0};
    int rc = 0;

    out->n = 0;
    if (gm_buf_put(out, s, n) != 0)
        return -1;
    for (size_t k = 0; k < t->n_norm; k++) {
        const tk_norm *m = &t->norm[k];
        a.n = 0;
        switch (m->kind) {
        case TK_NORM_PREPEND:
            // the reference prepends only to a non-empty string
            if (out->n == 0)
                continue;
            rc = gm_buf_put(&a, m->a, m->alen);
            if (rc == 0)
                rc = gm_buf_put(&a, out->p, out->n);
            break;
        case TK_NORM_REPLACE:
            rc = replace_all(out->p, out->n, m->a, m->alen, m->b, m->blen, &a);
            break;
        default:
            rc = unicode_form(m->kind, out->p, out->n, &a);
            break;
        }
        if (rc != 0)
            goto out;
        gm_buf swap = *out;
        *out = a;
        a = swap;
    }
out:
    free(a.p);
    return rc;
}

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
char *tk_regex_augment(const char *p, size_t n, size_t *out_len)
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
    aug = tk_regex_augment(pattern, len, &alen);
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

/* All matches of re in s[a, b), with the onig crate's find_iter rules for empty matches. */
static int find_matches(regex_t *re, OnigRegion *region, const char *s, size_t a, size_t b, pieces *out)
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
        if (r < 0)
            return -1;
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
** Split s[0, n) into pre-tokens. With no splitting step the whole text is
** one pre-token. tmp is scratch space owned by the caller.
*/
int tk_pretokenize(const gm_tokenizer *t, const char *s, size_t n, tk_spans *out, gm_buf *tmp)
{
    tk_spans next = {0};
    pieces m = {0};
    OnigRegion *region = NULL;
    int rc = -1;

    (void)tmp;
    out->n = 0;
    if (n == 0)
        return 0;
    if (spans_push(out, 0, n) != 0)
        return -1;
    for (size_t k = 0; k < t->n_pre; k++) {
        const tk_pre *pre = &t->pre[k];
        if (pre->regex == NULL)
            continue;
        if (region == NULL && (region = onig_region_new()) == NULL)
            goto out;
        next.n = 0;
        for (size_t i = 0; i < out->n; i++) {
            if (find_matches(pre->regex, region, s, out->p[2 * i], out->p[2 * i + 1], &m) != 0 ||
                apply_behavior(pre, &m, &next) != 0)
                goto out;
        }
        tk_spans swap = *out;
        *out = next;
        next = swap;
    }
    rc = 0;
out:
    if (region != NULL)
        onig_region_free(region, 1);
    free(next.p);
    free(m.p);
    return rc;
}
