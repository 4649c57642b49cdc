/*
** The normalizer steps (not installed): what load.c reads from
** tokenizer.json's "normalizer" and normalize.c applies, in order, to each
** stretch of text between raw added tokens and to each normalized added token.
*/
#ifndef GM_TK_NORMALIZE_H
#define GM_TK_NORMALIZE_H

#include <stddef.h>

#include "gm/buf.h"

enum tk_norm_kind { TK_NORM_NFC, TK_NORM_NFD, TK_NORM_NFKC, TK_NORM_NFKD, TK_NORM_PREPEND, TK_NORM_REPLACE };

typedef struct tk_norm {
    int kind;
    char *a, *b; /* PREPEND: a = text; REPLACE: a = pattern, b = content */
    size_t alen, blen;
} tk_norm;

/* Append s[0, n) to out with each pat in it replaced by with (an empty pat: s as it is). 0, or -1 (no memory). */
int tk_replace_all(const char *s, size_t n, const char *pat, size_t plen, const char *with, size_t wlen, gm_buf *out);

/* Apply steps[0 .. n_steps) to s; out is reset and receives the result. 0, or -1 (no memory, utf8proc failed). */
int tk_normalize(const tk_norm *steps, size_t n_steps, const char *s, size_t n, gm_buf *out);

#endif
