/* The validating JSON scanner; see gm/json.h. */
#include "gm/json.h"

#include <stdint.h>
#include <string.h>

#include "gm/utf8.h"

const char *gm_json_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static int hex4(const char *p, const char *end, uint32_t *v)
{
    uint32_t x = 0;

    if (end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *v = x;
    return 0;
}

int gm_json_string(const char *p, const char *end, gm_buf *out, const char **after, const char **err)
{
    if (p >= end || *p != '"') {
        *err = p >= end ? "truncated" : "expected a string";
        *after = p;
        return -1;
    }
    p++;
    for (;;) {
        const char *run = p;
        // copy the longest run without escapes or the closing quote in one go
        while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
            p++;
        if (out != NULL && p > run && gm_buf_put(out, run, (size_t)(p - run)) != 0) {
            *err = "out of memory";
            goto bad;
        }
        if (p >= end) {
            *err = "truncated";
            goto bad;
        }
        if (*p == '"') {
            *after = p + 1;
            return 0;
        }
        if ((unsigned char)*p < 0x20) {
            *err = "control character in a string";
            goto bad;
        }
        // an escape
        if (end - p < 2) {
            *err = "truncated";
            goto bad;
        }
        char c = p[1], one = 0;
        uint32_t cp;
        switch (c) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u':
            if (hex4(p + 2, end, &cp) != 0) {
                *err = end - p < 6 ? "truncated" : "bad \\u escape";
                goto bad;
            }
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                *err = "lone trailing surrogate in a \\u escape";
                goto bad;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) != 0 || lo < 0xDC00 ||
                    lo > 0xDFFF) {
                    *err = "lone leading surrogate in a \\u escape";
                    goto bad;
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (out != NULL) {
                char u[4];
                if (gm_buf_put(out, u, gm_utf8_encode(u, cp)) != 0) {
                    *err = "out of memory";
                    goto bad;
                }
            }
            continue;
        default:
            *err = "unknown escape in a string";
            goto bad;
        }
        if (out != NULL && gm_buf_put(out, &one, 1) != 0) {
            *err = "out of memory";
            goto bad;
        }
        p += 2;
    }
bad:
    *after = p;
    return -1;
}

int gm_json_number(const char *p, const char *end, const char **after, const char **err)
{
    const char *start = p;
    *err = "bad number";
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        goto bad;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9') {
            *err = "leading zeros are not allowed";
            *after = start;
            return -1;
        }
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    } else {
        goto bad;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9')
            goto bad;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            goto bad;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    *after = p;
    return 0;
bad:
    if (p >= end)
        *err = "truncated";
    *after = p;
    return -1;
}

size_t gm_json_nonfinite(const char *p, const char *end)
{
    static const char *const words[] = {"NaN", "Infinity", "-Infinity"};
    for (int i = 0; i < 3; i++) {
        const size_t n = strlen(words[i]);
        if ((size_t)(end - p) >= n && memcmp(p, words[i], n) == 0)
            return n;
    }
    return 0;
}

static int skip_value(const char *p, const char *end, int depth, int py, const char **after, const char **err)
{
    p = gm_json_ws(p, end);
    if (p >= end) {
        *err = "truncated";
        *after = p;
        return -1;
    }
    if (depth > GM_JSON_MAX_DEPTH) {
        *err = "nesting deeper than 256";
        *after = p;
        return -1;
    }
    switch (*p) {
    case '"':
        return gm_json_string(p, end, NULL, after, err);
    case '{':
    case '[': {
        char close = *p == '{' ? '}' : ']';
        int object = *p == '{';
        p = gm_json_ws(p + 1, end);
        if (p < end && *p == close) {
            *after = p + 1;
            return 0;
        }
        for (;;) {
            if (object) {
                if (gm_json_string(gm_json_ws(p, end), end, NULL, &p, err) != 0)
                    goto fail;
                p = gm_json_ws(p, end);
                if (p >= end || *p != ':') {
                    *err = p >= end ? "truncated" : "expected ':'";
                    goto fail;
                }
                p++;
            }
            if (skip_value(p, end, depth + 1, py, &p, err) != 0)
                goto fail;
            p = gm_json_ws(p, end);
            if (p < end && *p == ',') {
                p++;
                continue;
            }
            if (p < end && *p == close) {
                *after = p + 1;
                return 0;
            }
            *err = p >= end ? "truncated" : object ? "expected ',' or '}'" : "expected ',' or ']'";
            goto fail;
        }
    fail:
        *after = p;
        return -1;
    }
    case 't':
    case 'f':
    case 'n': {
        const char *word = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t n = strlen(word);
        if ((size_t)(end - p) < n) {
            *err = "truncated";
            *after = end;
            return -1;
        }
        if (memcmp(p, word, n) != 0) {
            *err = "unexpected character";
            *after = p;
            return -1;
        }
        *after = p + n;
        return 0;
    }
    default:
        if (py && gm_json_nonfinite(p, end) > 0) {
            *after = p + gm_json_nonfinite(p, end);
            return 0;
        }
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            if (gm_json_number(p, end, after, err) != 0)
                return -1;
            return 0;
        }
        *err = "unexpected character";
        *after = p;
        return -1;
    }
}

int gm_json_skip(const char *p, const char *end, const char **after, const char **err)
{
    return skip_value(p, end, 0, 0, after, err);
}

int gm_json_skip_py(const char *p, const char *end, const char **after, const char **err)
{
    return skip_value(p, end, 0, 1, after, err);
}
