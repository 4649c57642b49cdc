/*
** The normalizers: the four Unicode forms (on utf8proc), Prepend and a
** literal Replace. Each step writes a fresh buffer and the two are swapped,
** so a step never reads what it is writing.
*/
#include "normalize.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

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
