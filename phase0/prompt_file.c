/* A prompts file, read as mlir-air's verify reads one: see prompt_file.h. */
#include "prompt_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gm/utf8.h"

/* Where Python's str.splitlines() ends a line (\r\n is one end, handled by the caller). */
static int line_break(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
}

/* What Python's str.isspace() holds true, so what str.strip() removes. */
static int space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The code point at s[0..n), well-formed (the caller checked the whole text), and its length. */
static uint32_t at(const char *s, size_t n, size_t *len)
{
    return gm_utf8_decode(s, n, len);
}

/* The start of the code point that ends at s + b (b > 0): back over continuation bytes. */
static size_t back(const char *s, size_t b)
{
    size_t a = b - 1;
    while (a > 0 && ((unsigned char)s[a] & 0xC0) == 0x80)
        a--;
    return a;
}

int p0_is_instruct(const char *repo)
{
    static const char *const marks[] = {"instruct", "Instruct", "-it", "chat", "Chat"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (strstr(repo, marks[i]))
            return 1;
    return 0;
}

void p0_prompts_free(p0_prompts *ps)
{
    for (int i = 0; i < ps->n; i++)
        free(ps->p[i].text);
    free(ps->p);
    ps->p = NULL;
    ps->n = 0;
}

/* The line number (from 1) of byte `off`, as str.splitlines() counts lines. */
static int line_of(const char *text, size_t off)
{
    int line = 1;
    for (size_t i = 0; i < off;) {
        size_t k;
        const uint32_t c = at(text + i, off - i, &k);
        if (line_break(c) && !(c == '\r' && i + 1 < off && text[i + 1] == '\n'))
            line++;
        i += k;
    }
    return line;
}

int p0_prompts_read(const char *file, const char *text, size_t len, int max, p0_prompts *out, gm_status *st)
{
    memset(out, 0, sizeof *out);
    const size_t bad = gm_utf8_check(text, len);
    if (bad < len)
        return gm_fail(st, GM_EFORMAT, "%s: line %d: expected UTF-8 text, found the byte 0x%02x", file,
                       line_of(text, bad), (unsigned char)text[bad]);
    const char *nul = memchr(text, '\0', len);
    if (nul)
        return gm_fail(st, GM_EFORMAT, "%s: line %d: expected text, found a NUL byte", file,
                       line_of(text, (size_t)(nul - text)));
    int line = 0;
    for (size_t i = 0; i < len && (max <= 0 || out->n < max);) {
        /* the line [a, b), and where the next begins */
        size_t a = i, b = i, k;
        uint32_t c = 0;
        while (b < len && !line_break(c = at(text + b, len - b, &k)))
            b += k;
        i = b < len ? b + k + (c == '\r' && b + 1 < len && text[b + 1] == '\n') : len;
        line++;
        while (a < b && space(at(text + a, b - a, &k)))
            a += k;
        while (b > a && space(at(text + back(text, b), b - back(text, b), &k)))
            b = back(text, b);
        if (a == b || text[a] == '#')
            continue;
        p0_prompt *grown = realloc(out->p, sizeof *out->p * (size_t)(out->n + 1));
        char *t = grown ? strndup(text + a, b - a) : NULL;
        if (grown)
            out->p = grown;
        if (!t) {
            p0_prompts_free(out);
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", file);
        }
        out->p[out->n++] = (p0_prompt){t, line};
    }
    return 0;
}
