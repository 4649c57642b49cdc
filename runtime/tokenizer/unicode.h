/*
** Character facts the tokenizer's parts share (not installed): the GPT-2
** byte-level alphabet, the two Unicode classes added-token matching tests,
** and Rust's lossy UTF-8 decode. Bottom layer: nothing else of the tokenizer
** is called from here.
*/
#ifndef GM_TK_UNICODE_H
#define GM_TK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "gm/buf.h"

/* GPT-2's byte-to-unicode map: the code point that stands for each byte in a byte-level vocab. */
extern const uint16_t tk_byte_to_cp[256];

/* Byte b's character in that alphabet as UTF-8 into u; its length, 1 or 2 (every code point is below U+0800). */
static inline size_t tk_byte_char(unsigned char b, char u[2])
{
    uint16_t cp = tk_byte_to_cp[b];
    if (cp < 0x80) {
        u[0] = (char)cp;
        return 1;
    }
    u[0] = (char)(0xC0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Unicode's White_Space property, as Rust's char::is_whitespace (lstrip / rstrip). */
int tk_is_white_space(uint32_t c);

/* Rust regex's \w (single_word): alphabetic, marks, decimal digits, connector punctuation, joiners. */
int tk_is_word_char(uint32_t c);

/* Rust String::from_utf8_lossy of s appended to out: invalid sequences become U+FFFD per maximal subpart. */
int tk_utf8_lossy(const char *s, size_t n, gm_buf *out);

#endif
