/* UTF-8 by RFC 3629's table of well-formed byte sequences; see gm/utf8.h. */
#include "gm/utf8.h"

int gm_utf8_lead_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF)
        return 3;
    if (c >= 0xF0 && c <= 0xF4)
        return 4;
    return 0; /* a continuation byte, an overlong lead (C0, C1) or F5..FF */
}

size_t gm_utf8_valid_at(const uint8_t *s, size_t n, size_t *sub)
{
    const unsigned char c = s[0];
    const size_t need = (size_t)gm_utf8_lead_len(c);
    unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */

    if (sub)
        *sub = 1;
    if (need <= 1)
        return need;
    if (c == 0xE0)
        lo = 0xA0; /* overlong 3-byte forms */
    else if (c == 0xED)
        hi = 0x9F; /* surrogates */
    else if (c == 0xF0)
        lo = 0x90; /* overlong 4-byte forms */
    else if (c == 0xF4)
        hi = 0x8F; /* past U+10FFFF */
    for (size_t i = 1; i < need; i++) {
        if (i >= n)
            return 0;
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF))
            return 0;
        if (sub)
            *sub = i + 1;
    }
    return need;
}

size_t gm_utf8_check(const void *str, size_t n)
{
    const uint8_t *s = str;
    size_t i = 0;

    while (i < n) {
        if (s[i] < 0x80) { /* ASCII runs without a call */
            i++;
            continue;
        }
        const size_t k = gm_utf8_valid_at(s + i, n - i, NULL);
        if (k == 0)
            return i;
        i += k;
    }
    return n;
}

uint32_t gm_utf8_decode(const void *str, size_t n, size_t *adv)
{
    const uint8_t *s = str;
    size_t sub;
    const size_t k = gm_utf8_valid_at(s, n, &sub);

    *adv = k ? k : sub;
    switch (k) {
    case 0: return 0xFFFD;
    case 1: return s[0];
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
               (s[3] & 0x3F);
    }
}

size_t gm_utf8_encode(char out[4], uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
