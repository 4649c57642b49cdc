/*
** struct gm_tokenizer (not installed): the loaded tokenizer as load.c
** builds it and the two pipelines, encode.c and decode.c, read it. Only
** those three files include this header; the parts below them (normalize,
** pretokenize, bpe, vocab_merges, maps, unicode) take just the tables they
** work on and never see the whole tokenizer.
**
** The added tokens, their matchers and the decoder steps are declared here
** rather than in a part's header because no part below offers code for them:
** load.c fills them in and one pipeline reads them.
*/
#ifndef GM_TK_TOKENIZER_TYPES_H
#define GM_TK_TOKENIZER_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "gm/buf.h"
#include "gm/tokenizer.h"
#include "maps.h"
#include "normalize.h"
#include "pretokenize.h"

/* An added token of tokenizer.json's added_tokens (encode.c matches them in the text). */
typedef struct tk_added {
    int32_t id;
    uint32_t off, len; /* content in the arena */
    uint32_t noff, nlen; /* normalized content (normalized tokens only) */
    int32_t quirk_id;    /* see gm_tokenizer_set_reference_quirks */
    unsigned special : 1, lstrip : 1, rstrip : 1, single_word : 1, normalized : 1;
} tk_added;

/* Added tokens to match in one pass: those with normalized false, or true. */
typedef struct tk_matcher {
    uint32_t *order;   /* indices into t->added, sorted by first byte then length, descending */
    uint32_t first[257]; /* order[first[c] .. first[c+1]) start with byte c */
    size_t count;
} tk_matcher;

/* A decoder step (decode.c runs them in order). */
enum tk_dec_kind {
    TK_DEC_BYTE_LEVEL,
    TK_DEC_REPLACE,
    TK_DEC_BYTE_FALLBACK,
    TK_DEC_FUSE,
    TK_DEC_STRIP,
    TK_DEC_METASPACE
};

typedef struct tk_dec {
    int kind;
    char *a, *b; /* REPLACE: pattern, content; STRIP: a = content (one character); METASPACE: a = replacement */
    size_t alen, blen;
    int start, stop; /* STRIP; METASPACE: start = its tk_prepend */
} tk_dec;

/* id_flags bits */
enum { TK_ID_ADDED = 1, TK_ID_SPECIAL = 2 };

struct gm_tokenizer {
    char *path;
    /* every token string lives in arena */
    gm_buf arena;
    int32_t n_ids;     /* highest id + 1 */
    uint32_t *id_off;  /* per id: arena offset, UINT32_MAX when the id has no string */
    uint32_t *id_len;
    uint8_t *id_flags;
    tk_bpe bpe;        /* the model: vocab, merges, byte fallback, byte-level */
    tk_str_map added_map; /* added-token contents */
    /* pipeline */
    tk_norm *norm;
    size_t n_norm;
    tk_pre *pre;
    size_t n_pre;
    tk_dec *dec;
    size_t n_dec;
    int has_decoder;
    int32_t *pp_before, *pp_after; /* post-processor ids around the sequence */
    size_t n_before, n_after;
    /* added tokens */
    tk_added *added;
    size_t n_added;
    tk_matcher match_raw, match_norm;
    int quirks;
    /* encode_mt may split at "\n" + ASCII graphic */
    int mt_safe;
    /* tokenizer_config.json */
    int32_t eos_id, bos_id;
};

#endif
