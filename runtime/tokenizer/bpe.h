/*
** The BPE model (not installed): its tables, which load.c fills from
** tokenizer.json's "model", and the function that turns one pre-token into
** ids. It knows nothing of added tokens, normalizers or pre-tokenizers.
*/
#ifndef GM_TK_BPE_H
#define GM_TK_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "maps.h"

typedef struct tk_bpe {
    tk_str_map vocab;   /* model.vocab, keys in the tokenizer's arena */
    tk_pair_map merges; /* model.merges: (left id, right id) -> (rank, merged id) */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;            /* -1: none */
    int32_t fallback_ids[256]; /* <0xNN>, -1 when absent or byte_fallback is off */
    /* byte-level (a ByteLevel pre-tokenizer): a word's symbols are its bytes in the GPT-2 alphabet */
    int byte_level;
    int32_t byte_ids[256];     /* vocab id of each byte's character, -1 when absent */
} tk_bpe;

/* Per-encode working memory, with a cache of word -> ids: one per thread. */
typedef struct tk_scratch tk_scratch;
tk_scratch *tk_scratch_new(void);
void tk_scratch_free(tk_scratch *s);

/* Append the ids of pre-token w[0, n) (normalized) to out; arena holds the vocab's keys. 0, or -1 (no memory). */
int tk_bpe_word(const tk_bpe *bpe, const char *arena, tk_scratch *s, const char *w, size_t n, tk_ids *out);

#endif
