/*
** UTF-8 as RFC 3629 defines it (table 1): no overlong forms, no UTF-16
** surrogates (U+D800..DFFF), nothing past U+10FFFF. The one validator the
** safetensors reader, the tokenizer and the generator's JSON parser share.
*/
#ifndef GM_UTF8_H
#define GM_UTF8_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The length a sequence starting with byte c has (1..4), or 0 when no well-formed sequence starts with c. */
int gm_utf8_lead_len(unsigned char c);

/*
** The length of the well-formed sequence at s (n bytes left), 1..4, or 0
** when it is ill-formed. Then *sub, when not NULL, is the length of its
** maximal well-formed prefix (at least 1): the unit one U+FFFD replaces
** under Unicode's "maximal subpart" rule, as Rust's from_utf8_lossy applies it.
*/
size_t gm_utf8_valid_at(const uint8_t *s, size_t n, size_t *sub);

/* The offset of the first byte of the first ill-formed sequence in s, or n when all of it is well-formed. */
size_t gm_utf8_check(const void *s, size_t n);

/* The code point at s and its length in *adv; an ill-formed sequence gives U+FFFD and its maximal subpart. */
uint32_t gm_utf8_decode(const void *s, size_t n, size_t *adv);

/* cp (at most U+10FFFF) as UTF-8 into out; returns its length, 1..4. */
size_t gm_utf8_encode(char out[4], uint32_t cp);

#ifdef __cplusplus
}
#endif

#endif
