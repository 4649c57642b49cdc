/*
** json2lua: a strict RFC 8259 parser that pushes Lua values directly, with
** one extension: NaN, Infinity and -Infinity, which Python's json writes for
** non-finite floats (the Config rules then decide whether a field may be one).
**
** Why a parser of its own, beside cJSON and the runtime's scanner
** (gm/json.h): the generator's Config rules need a number as written (896 a
** Lua integer, 896.0 a float), null apart from an absent key, {} apart from
** [], and messages with the line and column of the offending construct. cJSON
** keeps only doubles, and the scanner builds no values. It shares the
** runtime's UTF-8 rules (gm/utf8.h) and nesting cap (GM_JSON_MAX_DEPTH).
**
** A recursive-descent parser over a byte range. Every parse_* function
** either pushes exactly one value and returns 0, or records the first error
** (with its byte offset) and returns -1; gm_json_push then drops whatever
** the failed parse left on the stack. Recursion is bounded by
** GM_JSON_MAX_DEPTH, checked before descending, so hostile input such as a
** million '[' fails fast without exhausting the C stack.
*/
#include "json2lua.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "gm/utf8.h"

static char null_anchor;
void *const gm_json_null = &null_anchor;

typedef struct parser {
    lua_State *L;
    const char *start; /* first byte of the text */
    const char *p;     /* next byte to read */
    const char *end;   /* one past the last byte */
    int depth;         /* open arrays and objects */
    const char *what;
    char *err;
    size_t errsize;
} parser;

static int parse_value(parser *ps);

/* ------------------------------------------------------------------------ */
/* errors */

/*
** Record "<what>: <problem> at line L, column C" for the byte at `at`.
** Columns count characters (UTF-8 lead bytes), starting at 1.
*/
static int fail_at(parser *ps, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(parser *ps, const char *at, const char *fmt, ...)
{
    int line = 1, col = 1;
    if (ps->err == NULL || ps->errsize == 0)
        return -1;
    for (const char *q = ps->start; q < at; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)*q & 0xC0) != 0x80) {
            col++;
        }
    }
    char problem[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->errsize, "%s: %s at line %d, column %d", ps->what,
             problem, line, col);
    return -1;
}

/* Describe the byte at p for "found ..." in messages. */
static const char *describe(const parser *ps, const char *p, char buf[16])
{
    if (p >= ps->end)
        return "end of input";
    unsigned char c = (unsigned char)*p;
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* lexical helpers */

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int is_digit(const parser *ps, const char *p)
{
    return p < ps->end && *p >= '0' && *p <= '9';
}

/* Read 4 hex digits at p into *out; -1 if any is not a hex digit. */
static int hex4(const parser *ps, const char *p, unsigned *out)
{
    unsigned v = 0;
    if (ps->end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static void add_utf8(luaL_Buffer *b, unsigned cp)
{
    char s[4];
    luaL_addlstring(b, s, gm_utf8_encode(s, cp));
}

/* ------------------------------------------------------------------------ */
/* values */

/* A string starting at the opening quote; pushes its UTF-8 contents. */
static int parse_string(parser *ps)
{
    const char *open = ps->p++;
    luaL_Buffer b;
    luaL_buffinit(ps->L, &b);
    for (;;) {
        const char *run = ps->p; // copy unescaped runs in one go
        while (ps->p < ps->end) {
            unsigned char c = (unsigned char)*ps->p;
            if (c == '"' || c == '\\' || c < 0x20)
                break;
            size_t n = gm_utf8_valid_at((const uint8_t *)ps->p, (size_t)(ps->end - ps->p), NULL);
            if (n == 0)
                return fail_at(ps, ps->p, "invalid UTF-8 in a string");
            ps->p += n;
        }
        luaL_addlstring(&b, run, (size_t)(ps->p - run));
        if (ps->p >= ps->end)
            return fail_at(ps, open, "unterminated string");
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"')
            break;
        if (c < 0x20)
            return fail_at(ps, ps->p, "control character 0x%02X in a string", c);
        /* a backslash escape */
        const char *esc = ps->p++;
        if (ps->p >= ps->end)
            return fail_at(ps, open, "unterminated string");
        char e = *ps->p++;
        switch (e) {
        case '"': luaL_addchar(&b, '"'); break;
        case '\\': luaL_addchar(&b, '\\'); break;
        case '/': luaL_addchar(&b, '/'); break;
        case 'b': luaL_addchar(&b, '\b'); break;
        case 'f': luaL_addchar(&b, '\f'); break;
        case 'n': luaL_addchar(&b, '\n'); break;
        case 'r': luaL_addchar(&b, '\r'); break;
        case 't': luaL_addchar(&b, '\t'); break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(ps, ps->p, &cp) != 0)
                return fail_at(ps, esc, "invalid \\u escape (expected 4 hex digits)");
            ps->p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail_at(ps, esc, "lone surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                // a high surrogate must be followed by an escaped low one
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
                    hex4(ps, ps->p + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
                    return fail_at(ps, esc, "lone surrogate \\u%04X", cp);
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            add_utf8(&b, cp);
            break;
        }
        default:
            return fail_at(ps, esc, "invalid escape '\\%c' in a string", e);
        }
    }
    ps->p++; /* closing quote */
    luaL_pushresult(&b);
    return 0;
}

/*
** A number. The grammar is checked by hand; a lexeme without fraction or
** exponent that fits in int64 becomes a Lua integer, anything else a float
** from strtod (the generator never calls setlocale, so '.' is the radix).
*/
static int parse_number(parser *ps)
{
    const char *s = ps->p;
    bool is_int = true;
    if (*ps->p == '-')
        ps->p++;
    if (!is_digit(ps, ps->p))
        return fail_at(ps, ps->p, "expected a digit after '-'");
    if (*ps->p == '0' && is_digit(ps, ps->p + 1))
        return fail_at(ps, s, "leading zeros are not allowed in a number");
    while (is_digit(ps, ps->p))
        ps->p++;
    if (ps->p < ps->end && *ps->p == '.') {
        is_int = false;
        if (!is_digit(ps, ++ps->p))
            return fail_at(ps, ps->p, "expected a digit after '.' in a number");
        while (is_digit(ps, ps->p))
            ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        is_int = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (!is_digit(ps, ps->p))
            return fail_at(ps, ps->p, "expected a digit in the exponent of a number");
        while (is_digit(ps, ps->p))
            ps->p++;
    }

    if (is_int) {
        // accumulate negatively so that INT64_MIN fits
        bool neg = *s == '-';
        int64_t v = 0;
        const char *d = s + neg;
        for (; d < ps->p; d++) {
            int digit = *d - '0';
            if (v < (INT64_MIN + digit) / 10)
                break; /* overflow: fall through to a float */
            v = v * 10 - digit;
        }
        if (d == ps->p && (neg || v != INT64_MIN)) {
            lua_pushinteger(ps->L, (lua_Integer)(neg ? v : -v));
            return 0;
        }
    }

    // strtod needs a terminated copy; a lexeme is rarely longer than 32 bytes
    size_t n = (size_t)(ps->p - s);
    char small[64];
    char *copy = n < sizeof small ? small : malloc(n + 1);
    if (copy == NULL)
        return fail_at(ps, s, "out of memory");
    memcpy(copy, s, n);
    copy[n] = '\0';
    errno = 0;
    double x = strtod(copy, NULL);
    int overflow = errno == ERANGE && isinf(x);
    if (copy != small)
        free(copy);
    if (overflow)
        return fail_at(ps, s, "number out of range");
    lua_pushnumber(ps->L, x);
    return 0;
}

/* Open a container: enforce the depth limit and reserve stack slots. */
static int enter(parser *ps)
{
    if (++ps->depth > GM_JSON_MAX_DEPTH)
        return fail_at(ps, ps->p, "nesting deeper than %d levels", GM_JSON_MAX_DEPTH);
    // the container, a key, a value and a string buffer's box and metatable
    if (!lua_checkstack(ps->L, 6))
        return fail_at(ps, ps->p, "out of Lua stack space");
    return 0;
}

static int parse_array(parser *ps)
{
    if (enter(ps) != 0)
        return -1;
    ps->p++; /* '[' */
    lua_newtable(ps->L);
    lua_Integer n = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
    } else {
        for (;;) {
            if (parse_value(ps) != 0)
                return -1;
            lua_rawseti(ps->L, -2, ++n);
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
            } else if (ps->p < ps->end && *ps->p == ']') {
                ps->p++;
                break;
            } else {
                return fail_at(ps, ps->p, "expected ',' or ']' after an array element");
            }
        }
    }
    lua_pushinteger(ps->L, n);
    lua_setfield(ps->L, -2, "n"); /* no metatable yet, so a raw set */
    luaL_setmetatable(ps->L, GM_JSON_ARRAY_MT);
    ps->depth--;
    return 0;
}

static int parse_object(parser *ps)
{
    if (enter(ps) != 0)
        return -1;
    ps->p++; /* '{' */
    lua_newtable(ps->L);
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
    } else {
        for (;;) {
            skip_ws(ps);
            const char *key_at = ps->p;
            if (ps->p >= ps->end || *ps->p != '"')
                return fail_at(ps, ps->p, "expected a string key in an object");
            if (parse_string(ps) != 0)
                return -1;
            lua_pushvalue(ps->L, -1);
            if (lua_rawget(ps->L, -3) != LUA_TNIL) {
                size_t klen;
                const char *k = lua_tolstring(ps->L, -2, &klen);
                return fail_at(ps, key_at, "duplicate key '%.*s'",
                               (int)(klen > 80 ? 80 : klen), k);
            }
            lua_pop(ps->L, 1);
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':')
                return fail_at(ps, ps->p, "expected ':' after an object key");
            ps->p++;
            if (parse_value(ps) != 0)
                return -1;
            lua_rawset(ps->L, -3);
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
            } else if (ps->p < ps->end && *ps->p == '}') {
                ps->p++;
                break;
            } else {
                return fail_at(ps, ps->p, "expected ',' or '}' after an object member");
            }
        }
    }
    luaL_setmetatable(ps->L, GM_JSON_OBJECT_MT);
    ps->depth--;
    return 0;
}

/* Match a literal keyword (true, false, null) exactly. */
static int literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return 0;
    ps->p += n;
    return 1;
}

static int parse_value(parser *ps)
{
    char buf[16];
    skip_ws(ps);
    if (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '{') return parse_object(ps);
        if (c == '[') return parse_array(ps);
        if (c == '"') return parse_string(ps);
        // Python's json writes these for float('nan') and float('inf'), so real config.json files carry them
        if (literal(ps, "NaN")) { lua_pushnumber(ps->L, (lua_Number)NAN); return 0; }
        if (literal(ps, "Infinity")) { lua_pushnumber(ps->L, (lua_Number)HUGE_VAL); return 0; }
        if (literal(ps, "-Infinity")) { lua_pushnumber(ps->L, (lua_Number)-HUGE_VAL); return 0; }
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps);
        if (literal(ps, "true")) { lua_pushboolean(ps->L, 1); return 0; }
        if (literal(ps, "false")) { lua_pushboolean(ps->L, 0); return 0; }
        if (literal(ps, "null")) { lua_pushlightuserdata(ps->L, gm_json_null); return 0; }
    }
    return fail_at(ps, ps->p, "expected a value, found %s", describe(ps, ps->p, buf));
}

/* ------------------------------------------------------------------------ */
/* public entry points */

int gm_json_push(lua_State *L, const char *text, size_t len, const char *what,
                 char *err, size_t errsize)
{
    int top = lua_gettop(L);
    parser ps = {L, text, text, text + len, 0, what ? what : "json", err, errsize};
    char buf[16];
    int rc = -1;

    if (!lua_checkstack(L, 6)) {
        fail_at(&ps, text, "out of Lua stack space");
        return -1;
    }
    // the metatables must exist even if gm_json_open was never called
    luaL_newmetatable(L, GM_JSON_OBJECT_MT);
    luaL_newmetatable(L, GM_JSON_ARRAY_MT);
    lua_settop(L, top);

    if (parse_value(&ps) != 0)
        goto out;
    skip_ws(&ps);
    if (ps.p < ps.end) {
        fail_at(&ps, ps.p, "unexpected %s after the value", describe(&ps, ps.p, buf));
        goto out;
    }
    rc = 0;
out:
    if (rc != 0)
        lua_settop(L, top);
    return rc;
}

/* json.decode(text [, what]): the value, or error(msg, 0). */
static int json_decode(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *what = luaL_optstring(L, 2, "json");
    char err[512];
    if (gm_json_push(L, text, len, what, err, sizeof err) != 0) {
        lua_pushstring(L, err);
        return lua_error(L);
    }
    return 1;
}

int gm_json_open(lua_State *L)
{
    luaL_newmetatable(L, GM_JSON_OBJECT_MT);
    luaL_newmetatable(L, GM_JSON_ARRAY_MT);
    lua_pop(L, 2);

    lua_createtable(L, 0, 4);
    lua_pushcfunction(L, json_decode);
    lua_setfield(L, -2, "decode");
    lua_pushlightuserdata(L, gm_json_null);
    lua_setfield(L, -2, "null");
    luaL_getmetatable(L, GM_JSON_OBJECT_MT);
    lua_setfield(L, -2, "object_mt");
    luaL_getmetatable(L, GM_JSON_ARRAY_MT);
    lua_setfield(L, -2, "array_mt");

    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "gm.json");
    lua_pop(L, 1);
    return 1; /* the module table, as luaL_requiref expects */
}
