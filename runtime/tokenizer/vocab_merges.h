/*
** The fast readers of tokenizer.json's two big arrays (not installed),
** model.vocab and model.merges, straight into the maps BPE looks them up in.
*/
#ifndef GM_TK_VOCAB_MERGES_H
#define GM_TK_VOCAB_MERGES_H

#include <stdint.h>

#include "gm/buf.h"
#include "gm/status.h"
#include "maps.h"

/*
** The largest token id a tokenizer.json may give (2^24 - 1, the vocab bound
** of config.json): the id tables are as long as the largest id, so an id of
** 10^9 in a file of a few megabytes would take gigabytes.
*/
enum { TK_MAX_ID = (1 << 24) - 1 };

/*
** The object at p (leading whitespace allowed) into vocab: keys appended to
** arena, *n_ids raised to the highest id + 1; *after set past the object.
** Errors name path and the byte where they are, counted from file (the
** start of the file's text, which holds p). Returns 0 or st->code.
*/
int tk_read_vocab(const char *path, const char *file, const char *p, const char *end, const char **after, gm_buf *arena,
                  tk_str_map *vocab, int32_t *n_ids, gm_status *st);

/*
** The array at p into merges, each pair's tokens and their concatenation
** looked up in vocab (keys in arena): rank = index in the array, a later
** duplicate wins. Every token must be in the vocab. Errors as tk_read_vocab's.
*/
int tk_read_merges(const char *path, const char *file, const char *p, const char *end, const char **after, const tk_str_map *vocab,
                   const char *arena, tk_pair_map *merges, gm_status *st);

#endif
