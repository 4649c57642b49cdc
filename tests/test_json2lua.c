/*
** json2lua: strict JSON to Lua values (generator/json2lua.h).
*/
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <lauxlib.h>
#include <lualib.h>

#include "json2lua.h"

static lua_State *L;

static void setup(void)
{
    L = luaL_newstate();
    cr_assert(L != NULL);
    luaL_openlibs(L);
    gm_json_open(L);
    lua_setglobal(L, "json");
}

static void teardown(void)
{
    lua_close(L);
}

/* Push the value of text (NUL-terminated) or fail the test. */
static void push_ok(const char *text)
{
    char err[512] = "";
    int top = lua_gettop(L);
    cr_assert_eq(gm_json_push(L, text, strlen(text), "t.json", err, sizeof err), 0,
                 "%s: %s", text, err);
    cr_assert_eq(lua_gettop(L), top + 1);
}

/* Run a Lua chunk that asserts things; fail the test with its message. */
static void run_lua(const char *chunk)
{
    if (luaL_dostring(L, chunk) != LUA_OK)
        cr_assert_fail("%s", lua_tostring(L, -1));
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert(buf != NULL);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* ------------------------------------------------------------------------ */
/* numbers */

Test(json2lua, integers_become_lua_integers, .init = setup, .fini = teardown)
{
    static const struct { const char *text; lua_Integer value; } cases[] = {
        {"896", 896},
        {"0", 0},
        {"-5", -5},
        {"-0", 0},
        {"9223372036854775807", INT64_MAX},
        {"-9223372036854775808", INT64_MIN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        push_ok(cases[i].text);
        cr_expect(lua_isinteger(L, -1), "%s should be an integer", cases[i].text);
        cr_expect_eq(lua_tointeger(L, -1), cases[i].value, "%s", cases[i].text);
        lua_pop(L, 1);
    }
}

Test(json2lua, fractions_and_exponents_become_floats, .init = setup, .fini = teardown)
{
    static const struct { const char *text; double value; } cases[] = {
        {"896.0", 896.0},
        {"1e-06", 1e-06},
        {"1E3", 1000.0},
        {"2e+2", 200.0},
        {"-0.5", -0.5},
        {"1000000.0", 1e6},
        {"0.1", 0.1},
        {"1e-400", 0.0}, /* underflow is not an error */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        push_ok(cases[i].text);
        cr_expect(lua_type(L, -1) == LUA_TNUMBER && !lua_isinteger(L, -1),
                  "%s should be a float", cases[i].text);
        cr_expect_eq(lua_tonumber(L, -1), cases[i].value, "%s", cases[i].text);
        lua_pop(L, 1);
    }
}

Test(json2lua, python_nan_and_infinity_become_non_finite_floats, .init = setup, .fini = teardown)
{
    push_ok("[NaN, Infinity, -Infinity]");
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    lua_rawgeti(L, -3, 3);
    cr_expect(!lua_isinteger(L, -3) && isnan(lua_tonumber(L, -3)), "NaN");
    cr_expect(!lua_isinteger(L, -2) && isinf(lua_tonumber(L, -2)) && lua_tonumber(L, -2) > 0, "Infinity");
    cr_expect(!lua_isinteger(L, -1) && isinf(lua_tonumber(L, -1)) && lua_tonumber(L, -1) < 0, "-Infinity");
    lua_pop(L, 4);
}

Test(json2lua, negative_zero_float_keeps_its_sign, .init = setup, .fini = teardown)
{
    push_ok("-0.0");
    cr_assert(!lua_isinteger(L, -1));
    cr_assert(signbit(lua_tonumber(L, -1)));
}

Test(json2lua, integers_beyond_int64_become_floats, .init = setup, .fini = teardown)
{
    static const char *const cases[] = {
        "9223372036854775808", "-9223372036854775809", "123456789012345678901234567890",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        push_ok(cases[i]);
        cr_expect(!lua_isinteger(L, -1), "%s should be a float", cases[i]);
        cr_expect_eq(lua_tonumber(L, -1), strtod(cases[i], NULL), "%s", cases[i]);
        lua_pop(L, 1);
    }
}

Test(json2lua, math_type_tells_896_from_896_0, .init = setup, .fini = teardown)
{
    run_lua("local t = json.decode('{\"a\": 896, \"b\": 896.0, \"c\": 1e-06}')\n"
            "assert(math.type(t.a) == 'integer')\n"
            "assert(math.type(t.b) == 'float')\n"
            "assert(math.type(t.c) == 'float' and t.c == 1e-06)\n");
}

/* ------------------------------------------------------------------------ */
/* strings */

Test(json2lua, strings_decode_every_escape, .init = setup, .fini = teardown)
{
    static const struct { const char *text; const char *bytes; size_t len; } cases[] = {
        {"\"plain\"", "plain", 5},
        {"\"\"", "", 0},
        {"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8},
        {"\"\\u00e9\"", "\xC3\xA9", 2},
        {"\"\\u20AC\"", "\xE2\x82\xAC", 3},
        {"\"\\uD83D\\uDE00\"", "\xF0\x9F\x98\x80", 4},
        {"\"\\uDBFF\\uDFFF\"", "\xF4\x8F\xBF\xBF", 4},
        {"\"a\\u0000b\"", "a\0b", 3},
        {"\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9},
        {"\"\x7F\"", "\x7F", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        push_ok(cases[i].text);
        cr_assert_eq(lua_type(L, -1), LUA_TSTRING);
        const char *s = lua_tolstring(L, -1, &len);
        cr_expect_eq(len, cases[i].len, "%s", cases[i].text);
        cr_expect(memcmp(s, cases[i].bytes, cases[i].len) == 0, "%s", cases[i].text);
        lua_pop(L, 1);
    }
}

/* ------------------------------------------------------------------------ */
/* null, objects, arrays */

Test(json2lua, null_is_a_sentinel_distinct_from_absent, .init = setup, .fini = teardown)
{
    push_ok("null");
    cr_assert_eq(lua_type(L, -1), LUA_TLIGHTUSERDATA);
    cr_assert_eq(lua_touserdata(L, -1), gm_json_null);
    lua_pop(L, 1);
    run_lua("local t = json.decode('{\"rope_scaling\": null}')\n"
            "assert(t.rope_scaling == json.null)\n"
            "assert(t.rope_scaling ~= nil)\n"
            "assert(t.absent == nil)\n");
}

Test(json2lua, objects_and_arrays_carry_distinct_metatables, .init = setup, .fini = teardown)
{
    push_ok("{}");
    push_ok("[]");
    cr_assert(lua_getmetatable(L, -2));
    luaL_getmetatable(L, GM_JSON_OBJECT_MT);
    cr_assert(lua_rawequal(L, -1, -2), "{} has the object metatable");
    lua_pop(L, 2);
    cr_assert(lua_getmetatable(L, -1));
    luaL_getmetatable(L, GM_JSON_ARRAY_MT);
    cr_assert(lua_rawequal(L, -1, -2), "[] has the array metatable");
    lua_pop(L, 2);
    cr_assert_eq(lua_getfield(L, -1, "n"), LUA_TNUMBER);
    cr_assert_eq(lua_tointeger(L, -1), 0);
}

Test(json2lua, arrays_have_n_and_keep_nulls, .init = setup, .fini = teardown)
{
    run_lua("local a = json.decode(' [1, null, \"x\", [true, false], {\"k\": []}] ')\n"
            "assert(a.n == 5 and #a == 5)\n"
            "assert(a[1] == 1 and a[2] == json.null and a[3] == 'x')\n"
            "assert(a[4].n == 2 and a[4][1] == true and a[4][2] == false)\n"
            "assert(a[5].k.n == 0)\n");
}

Test(json2lua, decode_raises_the_message_without_position, .init = setup, .fini = teardown)
{
    run_lua("local ok, msg = pcall(json.decode, '[1,', 'x.json')\n"
            "assert(not ok)\n"
            "assert(msg == 'x.json: expected a value, found end of input at line 1, column 4', msg)\n"
            "local ok2, msg2 = pcall(json.decode, '{')\n"
            "assert(msg2:sub(1, 6) == 'json: ', msg2)\n");
}

Test(json2lua, module_is_in_package_loaded, .init = setup, .fini = teardown)
{
    run_lua("local j = require('gm.json')\n"
            "assert(j == json and type(j.decode) == 'function')\n"
            "assert(getmetatable(j.decode('{}')) == j.object_mt)\n"
            "assert(getmetatable(j.decode('[]')) == j.array_mt)\n"
            "assert(j.object_mt ~= j.array_mt)\n");
}

Test(json2lua, open_works_as_a_requiref_openf)
{
    lua_State *S = luaL_newstate();
    luaL_openlibs(S);
    luaL_requiref(S, "gm.json", gm_json_open, 0);
    cr_assert_eq(lua_type(S, -1), LUA_TTABLE);
    cr_assert_eq(lua_gettop(S), 1);
    lua_pop(S, 1);
    cr_assert_eq(luaL_dostring(S, "return require('gm.json').decode('[7]')[1]"), LUA_OK);
    cr_assert_eq(lua_tointeger(S, -1), 7);
    lua_close(S);
}

/* ------------------------------------------------------------------------ */
/* errors */

Test(json2lua, errors_give_line_and_column, .init = setup, .fini = teardown)
{
    const char *text = "{\n  \"a\": 1\n    \"b\": 2\n}";
    char err[512];
    cr_assert_eq(gm_json_push(L, text, strlen(text), "config.json", err, sizeof err), -1);
    cr_assert_str_eq(err, "config.json: expected ',' or '}' after an object member at line 3, "
                          "column 5");
}

Test(json2lua, columns_count_characters_not_bytes, .init = setup, .fini = teardown)
{
    const char *text = "[\"\xC3\xA9\", x]";
    char err[512];
    cr_assert_eq(gm_json_push(L, text, strlen(text), "t", err, sizeof err), -1);
    cr_assert_str_eq(err, "t: expected a value, found 'x' at line 1, column 7");
}

Test(json2lua, duplicate_keys_are_named, .init = setup, .fini = teardown)
{
    const char *text = "{\"hidden_size\": 1,\n \"hidden_size\": 2}";
    char err[512];
    cr_assert_eq(gm_json_push(L, text, strlen(text), "config.json", err, sizeof err), -1);
    cr_assert_str_eq(err, "config.json: duplicate key 'hidden_size' at line 2, column 2");
}

Test(json2lua, errors_leave_the_stack_as_it_was, .init = setup, .fini = teardown)
{
    const char *text = "{\"a\": [1, 2, {\"b\": \"xyz\", \"c\": [3, \"\\uD800\"]}]}";
    char err[512];
    lua_pushinteger(L, 42);
    int top = lua_gettop(L);
    cr_assert_eq(gm_json_push(L, text, strlen(text), "t", err, sizeof err), -1);
    cr_assert_eq(lua_gettop(L), top);
    cr_assert_eq(lua_tointeger(L, -1), 42);
}

Test(json2lua, error_buffer_is_truncated_or_optional, .init = setup, .fini = teardown)
{
    char err[8];
    cr_assert_eq(gm_json_push(L, "[", 1, "config.json", err, sizeof err), -1);
    cr_assert_str_eq(err, "config.");
    cr_assert_eq(gm_json_push(L, "[", 1, "config.json", NULL, 0), -1);
}

Test(json2lua, million_open_brackets_fail_fast, .init = setup, .fini = teardown)
{
    size_t n = 1000000;
    char *text = malloc(n);
    char err[512];
    cr_assert(text != NULL);
    memset(text, '[', n);
    clock_t t0 = clock();
    cr_assert_eq(gm_json_push(L, text, n, "deep.json", err, sizeof err), -1);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    cr_assert(strstr(err, "nesting deeper than 256 levels") != NULL, "%s", err);
    cr_assert_lt(secs, 1.0);
    cr_assert_eq(lua_gettop(L), 0);
    free(text);
}

Test(json2lua, nesting_limit_is_exact, .init = setup, .fini = teardown)
{
    char text[2 * (GM_JSON_MAX_DEPTH + 1) + 1];
    char err[512];
    for (int depth = GM_JSON_MAX_DEPTH; depth <= GM_JSON_MAX_DEPTH + 1; depth++) {
        memset(text, '[', (size_t)depth);
        memset(text + depth, ']', (size_t)depth);
        int rc = gm_json_push(L, text, 2 * (size_t)depth, "t", err, sizeof err);
        cr_expect_eq(rc, depth <= GM_JSON_MAX_DEPTH ? 0 : -1, "depth %d", depth);
        lua_settop(L, 0);
    }
}

struct bad_case {
    const char *text;
    size_t len; /* 0: strlen(text) */
    const char *message; /* expected substring */
};

/*
** Criterion copies parameters into the test process, where pointers into
** this binary's data may not be valid (ASLR): pass indices instead.
*/
static const struct bad_case rejects_invalid_json_cases[] = {
    {"", 0, "expected a value, found end of input at line 1, column 1"},
    {" \n ", 0, "expected a value, found end of input at line 2, column 2"},
    {"01", 0, "leading zeros are not allowed"},
    {"-01", 0, "leading zeros are not allowed"},
    {"+1", 0, "expected a value, found '+'"},
    {"nan", 0, "expected a value, found 'n'"},
    {"Inf", 0, "expected a value, found 'I'"},
    {"-NaN", 0, "expected a digit after '-'"},
    {"+Infinity", 0, "expected a value, found '+'"},
    {"0x10", 0, "unexpected 'x' after the value"},
    {".5", 0, "expected a value, found '.'"},
    {"1.", 0, "expected a digit after '.'"},
    {"1.e3", 0, "expected a digit after '.'"},
    {"1e", 0, "expected a digit in the exponent"},
    {"1e+", 0, "expected a digit in the exponent"},
    {"1e400", 0, "number out of range"},
    {"-1e400", 0, "number out of range"},
    {"[1,]", 0, "expected a value, found ']'"},
    {"[1 2]", 0, "expected ',' or ']' after an array element at line 1, column 4"},
    {"[", 0, "expected a value, found end of input"},
    {"{\"a\":1,}", 0, "expected a string key in an object at line 1, column 8"},
    {"{a:1}", 0, "expected a string key in an object"},
    {"{\"a\" 1}", 0, "expected ':' after an object key"},
    {"{\"a\":1", 0, "expected ',' or '}' after an object member"},
    {"{\"a\":1,\"a\":2}", 0, "duplicate key 'a'"},
    {"\"abc", 0, "unterminated string at line 1, column 1"},
    {"\"abc\\", 0, "unterminated string"},
    {"\"a\x01z\"", 0, "control character 0x01 in a string"},
    {"\"a\nz\"", 0, "control character 0x0A in a string"},
    {"\"a\tz\"", 0, "control character 0x09 in a string"},
    {"\"\\x\"", 0, "invalid escape '\\x'"},
    {"\"\\'\"", 0, "invalid escape '\\''"},
    {"\"\\u12G4\"", 0, "invalid \\u escape"},
    {"\"\\u00\"", 0, "invalid \\u escape"},
    {"\"\\uD800\"", 0, "lone surrogate \\uD800"},
    {"\"\\uDC00\"", 0, "lone surrogate \\uDC00"},
    {"\"\\uD800\\u0041\"", 0, "lone surrogate \\uD800"},
    {"\"\\uD800\\uD800\"", 0, "lone surrogate \\uD800"},
    {"\"\xC0\xAF\"", 0, "invalid UTF-8"},         /* overlong '/' */
    {"\"\xE0\x80\xAF\"", 0, "invalid UTF-8"},     /* overlong, 3 bytes */
    {"\"\xF0\x80\x80\xAF\"", 0, "invalid UTF-8"}, /* overlong, 4 bytes */
    {"\"\xED\xA0\x80\"", 0, "invalid UTF-8"},     /* U+D800 encoded */
    {"\"\xF4\x90\x80\x80\"", 0, "invalid UTF-8"}, /* U+110000 */
    {"\"\xF5\x80\x80\x80\"", 0, "invalid UTF-8"},
    {"\"\x80\"", 0, "invalid UTF-8"},
    {"\"\xE2\x82\"", 0, "invalid UTF-8"},         /* truncated sequence */
    {"\"\xFF\"", 0, "invalid UTF-8"},
    {"tru", 0, "expected a value, found 't'"},
    {"nul", 0, "expected a value, found 'n'"},
    {"True", 0, "expected a value, found 'T'"},
    {"'a'", 0, "expected a value, found '''"},
    {"true false", 0, "unexpected 'f' after the value at line 1, column 6"},
    {"{} x", 0, "unexpected 'x' after the value"},
    {"[1]]", 0, "unexpected ']' after the value"},
    {"1\0", 2, "unexpected byte 0x00 after the value"},
    {"\xEF\xBB\xBF{}", 0, "expected a value, found byte 0xEF"},
    {"\v1", 0, "expected a value, found byte 0x0B"},
    {"[1,\n  2,\n  x]", 0, "expected a value, found 'x' at line 3, column 3"},
};
#define N_REJECTS_INVALID_JSON (sizeof rejects_invalid_json_cases / sizeof rejects_invalid_json_cases[0])

ParameterizedTestParameters(json2lua, rejects_invalid_json)
{
    static size_t idx[N_REJECTS_INVALID_JSON];
    for (size_t i = 0; i < N_REJECTS_INVALID_JSON; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_REJECTS_INVALID_JSON);
}

ParameterizedTest(size_t *i, json2lua, rejects_invalid_json, .init = setup, .fini = teardown)
{
    const struct bad_case *c = &rejects_invalid_json_cases[*i];
    char err[512] = "";
    size_t len = c->len ? c->len : strlen(c->text);
    int top = lua_gettop(L);
    cr_assert_eq(gm_json_push(L, c->text, len, "t.json", err, sizeof err), -1,
                 "accepted: %s", c->text);
    cr_assert_eq(lua_gettop(L), top);
    cr_assert(strncmp(err, "t.json: ", 8) == 0, "%s", err);
    cr_assert(strstr(err, c->message) != NULL, "got '%s', want '%s'", err, c->message);
}

/* ------------------------------------------------------------------------ */
/* the real inputs */

static void parse_all(const char *pattern, size_t min_files)
{
    glob_t g;
    char err[512];
    cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no files match %s", pattern);
    cr_assert_geq(g.gl_pathc, min_files, "%s", pattern);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        size_t len;
        char *text = slurp(g.gl_pathv[i], &len);
        cr_expect_eq(gm_json_push(L, text, len, g.gl_pathv[i], err, sizeof err), 0, "%s", err);
        cr_expect_eq(lua_type(L, -1), LUA_TTABLE, "%s", g.gl_pathv[i]);
        lua_settop(L, 0);
        free(text);
    }
    globfree(&g);
}

Test(json2lua, every_shared_config_parses, .init = setup, .fini = teardown)
{
    parse_all(GM_SHARED_DIR "/hub/*/*/config.json", 10);
    parse_all(GM_SHARED_DIR "/golden/*/config.json", 7);
    parse_all(GM_SHARED_DIR "/hub/*/*/model.safetensors.index.json", 1);
}

Test(json2lua, qwen_config_values_have_the_right_lua_types, .init = setup, .fini = teardown)
{
    size_t len;
    char *text = slurp(GM_SHARED_DIR "/hub/Qwen/Qwen3-0.6B/config.json", &len);
    push_ok(text);
    free(text);
    lua_setglobal(L, "cfg");
    run_lua("assert(math.type(cfg.hidden_size) == 'integer' and cfg.hidden_size == 1024)\n"
            "assert(math.type(cfg.rope_theta) == 'integer')\n"
            "assert(math.type(cfg.rms_norm_eps) == 'float' and cfg.rms_norm_eps == 1e-06)\n"
            "assert(cfg.rope_scaling == json.null and cfg.sliding_window == json.null)\n"
            "assert(cfg.tie_word_embeddings == true)\n"
            "assert(cfg.architectures.n == 1 and cfg.architectures[1] == 'Qwen3ForCausalLM')\n");
}
