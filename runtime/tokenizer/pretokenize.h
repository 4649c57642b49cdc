/*
** The pre-tokenizer steps (not installed): what load.c reads from
** tokenizer.json's "pre_tokenizer" (Split, ByteLevel, Metaspace) and pretokenize.c runs
** to cut normalized text into the pre-tokens BPE sees, plus the regex
** compiler the loader builds those steps with.
*/
#ifndef GM_TK_PRETOKENIZE_H
#define GM_TK_PRETOKENIZE_H

#include <stddef.h>

#include "gm/buf.h"
#include "gm/status.h"

enum tk_split_behavior {
    TK_SPLIT_REMOVED,
    TK_SPLIT_ISOLATED,
    TK_SPLIT_MERGED_WITH_PREVIOUS,
    TK_SPLIT_MERGED_WITH_NEXT,
    TK_SPLIT_CONTIGUOUS
};

enum tk_pre_kind { TK_PRE_SPLIT, TK_PRE_BYTE_LEVEL, TK_PRE_METASPACE };

/* Metaspace's prepend_scheme (its decoder's too): where the replacement goes in front of a piece */
enum tk_prepend { TK_PREPEND_ALWAYS, TK_PREPEND_FIRST, TK_PREPEND_NEVER };

typedef struct tk_pre {
    int kind;
    void *regex;  /* OnigRegex (SPLIT, or BYTE_LEVEL with use_regex) */
    int behavior; /* SPLIT */
    int invert;   /* SPLIT */
    int add_prefix_space; /* BYTE_LEVEL */
    char *pattern;        /* SPLIT: tokenizer.json's pattern as written, for messages (owned) */
    int is_regex;         /* SPLIT: the pattern was {"Regex": ...}, not {"String": ...} */
    char *rep;            /* METASPACE: the replacement, one character (owned) */
    size_t replen;        /* METASPACE: its bytes */
    int prepend;          /* METASPACE: a tk_prepend */
    int split;            /* METASPACE: cut each piece before every replacement */
} tk_pre;

/*
** Compile a Split regex (widened to Unicode 16's letters and numbers, see
** pretokenize.c) into *re; errors name path and where, the tokenizer.json
** and the section the pattern came from.
*/
int tk_regex_compile(void **re, const char *pattern, size_t len, const char *path, const char *where, gm_status *st);
void tk_regex_free(void *re);

/* Pre-token spans as (start, end) pairs into the text. */
typedef struct tk_spans {
    size_t *p; /* 2 per span */
    size_t n, cap;
} tk_spans;

/*
** Split s[0, n) by steps[0 .. n_steps) into out (reset), spans of *text: s itself, or, after a
** Metaspace step (which writes text: its replacement for spaces and in front of pieces), the
** rewritten text in *buf. at_start: s begins where the input text begins (Metaspace's "first").
** With no step that splits the whole text is one pre-token. A regex the engine gives up on
** (Oniguruma's backtracking limits) is GM_EUNSUPPORTED, its message naming path, the step's pattern
** and Oniguruma's reason; out of memory is GM_ENOMEM.
*/
int tk_pretokenize(const tk_pre *steps, size_t n_steps, const char *s, size_t n, int at_start, gm_buf *buf,
                   const char **text, tk_spans *out, const char *path, gm_status *st);

#endif
