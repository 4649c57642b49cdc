/*
** Internals shared by the tokenizer's source files (not installed).
**
** tokenizer.c         load: tokenizer.json sections, added tokens, config
** tokenizer_json.c    a fast validating scanner for model.vocab and model.merges
** tokenizer_bpe.c     hash maps and the BPE model (merges, byte fallback, unk)
** tokenizer_pretok.c  normalizers, the Split regex (Oniguruma), byte-level map
** tokenizer_encode.c  the encode pipeline and decode
*/
#ifndef GM_TOKENIZER_INTERNAL_H
#define GM_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gm/buf.h"
#include "gm/json.h"
#include "gm/status.h"
#include "gm/utf8.h"
#include "gm/tokenizer.h"

/* ------------------------------------------------------------------ buffers */

/* A growable id vector. */
typedef struct tk_ids {
    int32_t *p;
    size_t n, cap;
} tk_ids;

int tk_ids_push(tk_ids *v, int32_t id);
int tk_ids_put(tk_ids *v, const int32_t *ids, size_t n);

/* ---------------------------------------------------------------- hash maps */

/* String -> id, keys stored in an arena (offset, length). */
typedef struct tk_str_slot {
    uint32_t off, len; /* len == UINT32_MAX: empty slot */
    int32_t id;
    uint32_t hash;
    uint64_t head; /* the key's first 8 bytes, zero-padded: short keys compare without the arena */
} tk_str_slot;

typedef struct tk_str_map {
    tk_str_slot *slots;
    size_t cap, count; /* cap is a power of two */
} tk_str_map;

uint32_t tk_hash(const void *p, size_t n);
int tk_str_map_init(tk_str_map *m, size_t expected);
void tk_str_map_free(tk_str_map *m);
/* The id of key, or -1. */
int32_t tk_str_map_get(const tk_str_map *m, const char *arena, const char *key, size_t len);
/* Insert or overwrite; key must already be in the arena at off. Returns 0 or -1 (no memory). */
int tk_str_map_put(tk_str_map *m, const char *arena, uint32_t off, uint32_t len, int32_t id);

/* (left id, right id) -> (rank, merged id). */
typedef struct tk_pair_slot {
    uint64_t key; /* UINT64_MAX: empty */
    uint32_t rank;
    int32_t id;
} tk_pair_slot;

typedef struct tk_pair_map {
    tk_pair_slot *slots;
    size_t cap, count;
} tk_pair_map;

int tk_pair_map_init(tk_pair_map *m, size_t expected);
void tk_pair_map_free(tk_pair_map *m);
/* Insert or overwrite (a later duplicate merge wins, as in the reference); grows. Returns 0 or -1. */
int tk_pair_map_put(tk_pair_map *m, int32_t a, int32_t b, uint32_t rank, int32_t id);

static inline const tk_pair_slot *tk_pair_map_get(const tk_pair_map *m, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = m->cap - 1;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;

    for (;;) {
        const tk_pair_slot *s = &m->slots[i];
        if (s->key == key)
            return s;
        if (s->key == UINT64_MAX)
            return NULL;
        i = (i + 1) & mask;
    }
}

/* ------------------------------------------------------------ the pipeline */

enum tk_norm_kind { TK_NORM_NFC, TK_NORM_NFD, TK_NORM_NFKC, TK_NORM_NFKD, TK_NORM_PREPEND, TK_NORM_REPLACE };

typedef struct tk_norm {
    int kind;
    char *a, *b; /* PREPEND: a = text; REPLACE: a = pattern, b = content */
    size_t alen, blen;
} tk_norm;

enum tk_split_behavior {
    TK_SPLIT_REMOVED,
    TK_SPLIT_ISOLATED,
    TK_SPLIT_MERGED_WITH_PREVIOUS,
    TK_SPLIT_MERGED_WITH_NEXT,
    TK_SPLIT_CONTIGUOUS
};

enum tk_pre_kind { TK_PRE_SPLIT, TK_PRE_BYTE_LEVEL };

typedef struct tk_pre {
    int kind;
    void *regex;  /* OnigRegex (SPLIT, or BYTE_LEVEL with use_regex) */
    int behavior; /* SPLIT */
    int invert;   /* SPLIT */
    int add_prefix_space; /* BYTE_LEVEL */
} tk_pre;

enum tk_dec_kind { TK_DEC_BYTE_LEVEL, TK_DEC_REPLACE, TK_DEC_BYTE_FALLBACK, TK_DEC_FUSE, TK_DEC_STRIP };

typedef struct tk_dec {
    int kind;
    char *a, *b; /* REPLACE: pattern, content; STRIP: a = content (one character) */
    size_t alen, blen;
    int start, stop; /* STRIP */
} tk_dec;

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

enum { TK_ID_ADDED = 1, TK_ID_SPECIAL = 2 };

struct gm_tokenizer {
    char *path;
    /* every token string lives in arena */
    gm_buf arena;
    int32_t n_ids;     /* highest id + 1 */
    uint32_t *id_off;  /* per id: arena offset, UINT32_MAX when the id has no string */
    uint32_t *id_len;
    uint8_t *id_flags;
    tk_str_map vocab;  /* model vocab */
    tk_str_map added_map; /* added-token contents */
    tk_pair_map merges;
    /* BPE options */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;
    int32_t fallback_ids[256]; /* <0xNN>, -1 when absent */
    /* byte-level: the pre-tokenizer maps bytes to the GPT-2 alphabet */
    int byte_level;
    int32_t byte_ids[256];     /* vocab id of each byte's character, -1 when absent */
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

/* tokenizer_json.c: fill t->vocab / t->merges from the spans of model.vocab and model.merges. */
int tk_load_vocab(gm_tokenizer *t, const char *p, const char *end, const char **after, gm_status *st);
int tk_load_merges(gm_tokenizer *t, const char *p, const char *end, const char **after, gm_status *st);

/* tokenizer_bpe.c: append the ids of one pre-token (already normalized). */
typedef struct tk_scratch tk_scratch;
tk_scratch *tk_scratch_new(void);
void tk_scratch_free(tk_scratch *s);
int tk_bpe_word(const gm_tokenizer *t, tk_scratch *s, const char *w, size_t n, tk_ids *out);

/* tokenizer_pretok.c */
int tk_regex_compile(void **re, const char *pattern, size_t len, const char *path, const char *where, gm_status *st);
void tk_regex_free(void *re);
/* The Split-with-Unicode-16 rewrite of a pattern (see tokenizer_pretok.c); malloc'd. */
char *tk_regex_augment(const char *pattern, size_t len, size_t *out_len);
int tk_normalize(const gm_tokenizer *t, const char *s, size_t n, gm_buf *out);
/* Pre-token spans as (start, end) pairs into s. */
typedef struct tk_spans {
    size_t *p; /* 2 per span */
    size_t n, cap;
} tk_spans;
int tk_pretokenize(const gm_tokenizer *t, const char *s, size_t n, tk_spans *out, gm_buf *tmp);
int tk_is_white_space(uint32_t c);
int tk_is_word_char(uint32_t c);
/* Rust String::from_utf8_lossy over b: invalid sequences become U+FFFD per maximal subpart. */
int tk_utf8_lossy(const char *s, size_t n, gm_buf *out);
extern const uint16_t tk_byte_to_cp[256];

#endif
