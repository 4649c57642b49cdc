/*
** The normalizers: the four Unicode forms (on utf8proc), Prepend and a
** literal Replace. Each step writes a fresh buffer and the two are swapped,
** so a step never reads what it is writing.
*/
#include "normalize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* Stable sort of cp[0..n) by combining class (cc[] alongside): insertion for the short runs text has, else buckets. */
static int order_run(utf8proc_int32_t *cp, unsigned char *cc, size_t n, utf8proc_int32_t *tmp)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && cc[j - 1] > cc[j]; j--) {
                const utf8proc_int32_t c = cp[j];
                const unsigned char k = cc[j];
                cp[j] = cp[j - 1], cc[j] = cc[j - 1];
                cp[j - 1] = c, cc[j - 1] = k;
            }
        return 0;
    }
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++)
        start[cc[i] + 1]++;
    for (int c = 0; c < 256; c++)
        start[c + 1] += start[c];
    for (size_t i = 0; i < n; i++)
        tmp[start[cc[i]]++] = cp[i];
    memcpy(cp, tmp, n * sizeof *cp);
    for (size_t i = 0; i < n; i++) /* the classes, in their new order */
        cc[i] = (unsigned char)utf8proc_get_property(cp[i])->combining_class;
    return 0;
}

/*
** One of the four forms, as utf8proc_map gives it, in time linear in the
** text: each code point decomposed on its own (utf8proc_decompose_char),
** every run of combining marks put in canonical order by a stable sort of
** its classes (utf8proc_map orders them by swapping neighbours, which takes
** the square of a run's length: a run of 200,000 marks, seconds per 10,000,
** never ended), then composed and encoded by utf8proc_reencode.
*/
static int unicode_form(int kind, const char *s, size_t n, gm_buf *out)
{
    utf8proc_option_t opt = UTF8PROC_STABLE;
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
    /* the code points of the decomposition: counted first (a call with no room says how many it needs), then made */
    utf8proc_int32_t *cp = NULL, *tmp = NULL;
    unsigned char *cc = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;
    for (int pass = 0; pass < 2; pass++) {
        len = 0;
        for (utf8proc_ssize_t r = 0; r < (utf8proc_ssize_t)n;) {
            utf8proc_int32_t c;
            int bound = UTF8PROC_BOUNDCLASS_START;
            r += utf8proc_iterate((const utf8proc_uint8_t *)s + r, (utf8proc_ssize_t)n - r, &c);
            if (c < 0)
                goto out;
            const utf8proc_ssize_t k =
                utf8proc_decompose_char(c, cp ? cp + len : NULL, cp ? (utf8proc_ssize_t)(cap - len) : 0, opt, &bound);
            if (k < 0 || (cp && (size_t)k > cap - len))
                goto out;
            len += (size_t)k;
        }
        if (!cp && (len > SIZE_MAX / sizeof *cp - 1 || !(cp = malloc(((cap = len) + 1) * sizeof *cp))))
            goto out; /* one more for utf8proc_reencode's closing NUL */
    }
    if (!(cc = malloc(len ? len : 1)) || !(tmp = malloc((len ? len : 1) * sizeof *tmp)))
        goto out;
    for (i = 0; i < len; i++)
        cc[i] = (unsigned char)utf8proc_get_property(cp[i])->combining_class;
    for (i = 0; i < len;) { /* each run of marks (class > 0) in canonical order */
        size_t j = i;
        while (j < len && cc[j])
            j++;
        if (j - i > 1)
            order_run(cp + i, cc + i, j - i, tmp);
        i = j > i ? j : i + 1;
    }
    const utf8proc_ssize_t bytes = utf8proc_reencode(cp, (utf8proc_ssize_t)len, opt);
    if (bytes >= 0)
        rc = gm_buf_put(out, cp, (size_t)bytes);
out:
    free(tmp);
    free(cc);
    free(cp);
    return rc;
}

int tk_replace_all(const char *s, size_t n, const char *pat, size_t plen, const char *with, size_t wlen, gm_buf *out)
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

int tk_normalize(const tk_norm *steps, size_t n_steps, const char *s, size_t n, gm_buf *out)
{
    gm_buf a = {0};
    int rc = 0;

    out->n = 0;
    if (gm_buf_put(out, s, n) != 0)
        return -1;
    for (size_t k = 0; k < n_steps; k++) {
        const tk_norm *m = &steps[k];
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
            rc = tk_replace_all(out->p, out->n, m->a, m->alen, m->b, m->blen, &a);
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
