/*
** Hugging Face tokenizer.json in C, id-exact with the `tokenizers` library
** for byte-level BPE (Qwen2/2.5/3, Llama-3.x) and SentencePiece-style BPE
** with byte fallback (Mistral, Llama-2, TinyLlama), spelled either as the
** older files do (a Prepend and Replace normalizer) or as newer converters
** write them (a Metaspace pre-tokenizer and decoder, Mistral-7B-v0.3's kind).
**
** A loaded gm_tokenizer is immutable: encode and decode may run from several
** threads at once. Functions that can fail take a gm_status * last and return
** st->code; messages name the tokenizer.json file.
*/
#ifndef GM_TOKENIZER_H
#define GM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gm_tokenizer gm_tokenizer;
/* Load tokenizer.json (and tokenizer_config.json beside it, when present). */
int gm_tokenizer_load(gm_tokenizer **t, const char *tokenizer_json, gm_status *st);
void gm_tokenizer_free(gm_tokenizer *t);
/* Encode UTF-8 text: add_special = apply the post-processor (e.g. BOS); parse_special = match special added tokens in the text. *ids malloc'd. */
int gm_tokenizer_encode(const gm_tokenizer *t, const char *text, size_t len, int add_special, int parse_special, int32_t **ids, size_t *n, gm_status *st);
/* Decode ids (skip_special drops special tokens); *text malloc'd, NUL-terminated. */
int gm_tokenizer_decode(const gm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len, gm_status *st);
int gm_tokenizer_is_special(const gm_tokenizer *t, int32_t id);  /* an added token with special: true */
int32_t gm_tokenizer_vocab_size(const gm_tokenizer *t);           /* highest id + 1 */

/*
** Like gm_tokenizer_encode, but may split a large text at safe boundaries
** (newlines outside added tokens, for byte-level BPE) and encode the parts
** on up to n_threads threads. The ids are the same as gm_tokenizer_encode's.
*/
int gm_tokenizer_encode_mt(const gm_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                           int n_threads, int32_t **ids, size_t *n, gm_status *st);

/* Bytes of memory the loaded tokenizer holds (tables, strings, maps). */
size_t gm_tokenizer_memory(const gm_tokenizer *t);

/* An added token (special or not). */
int gm_tokenizer_is_added(const gm_tokenizer *t, int32_t id);

/* The id of a token string (added tokens first, then the model vocab), or -1. */
int32_t gm_tokenizer_token_id(const gm_tokenizer *t, const char *token);

/* The token string of an id (not NUL-terminated; *len set), or NULL when the id has none. */
const char *gm_tokenizer_token(const gm_tokenizer *t, int32_t id, size_t *len);

/*
** Emulate a quirk of tokenizers 0.23.2, the reference of ../shared/tokenizers:
** when special tokens are not parsed, a matched `special: false` added token
** gets the id at its position in the list of all added tokens with the
** specials first (Qwen3's <think> comes out as <|vision_end|>, 151653). Off
** by default, where such a token gets its own id. Call before sharing t.
*/
void gm_tokenizer_set_reference_quirks(gm_tokenizer *t, int on);

/* tokenizer_config.json's eos_token / bos_token as ids, or -1 when absent or unknown. */
int32_t gm_tokenizer_eos_id(const gm_tokenizer *t);
int32_t gm_tokenizer_bos_id(const gm_tokenizer *t);

#ifdef __cplusplus
}
#endif
#endif
