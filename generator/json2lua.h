/*
** JSON text to Lua values, strictly (RFC 8259), for the generator's Lua side.
**
** cJSON turns every number into a double, so `"hidden_size": 896.0` and
** `896` would look the same; the Config rules must tell them apart. Here a
** number written without fraction or exponent that fits in int64 becomes a
** Lua integer, any other number a Lua float. null becomes the unique value
** gm_json_null (a light userdata), distinct from an absent key. Objects and
** arrays become tables carrying the metatables gm_json_object_mt and
** gm_json_array_mt (registry keys), so Lua can tell `{}` from `[]`; arrays
** also get field n. Duplicate keys, invalid UTF-8, lone surrogates, control
** bytes in strings, trailing garbage and nesting deeper than
** GM_JSON_MAX_DEPTH are errors.
*/
#ifndef GM_JSON2LUA_H
#define GM_JSON2LUA_H

#include <stddef.h>

#include <lua.h>

#include "gm/json.h" /* GM_JSON_MAX_DEPTH */


/* Registry keys of the two metatables. */
#define GM_JSON_OBJECT_MT "gm.json.object"
#define GM_JSON_ARRAY_MT "gm.json.array"

/* The null sentinel (compare with lua_touserdata == gm_json_null). */
extern void *const gm_json_null;

/*
** Parse text and push the value. On a syntax error push nothing, write
** "<what>: <problem> at line L, column C" into err (errsize bytes) and
** return -1; return 0 on success. Lines and columns start at 1; a column
** counts characters, not bytes. Never raises a Lua error except for
** memory exhaustion.
*/
int gm_json_push(lua_State *L, const char *text, size_t len, const char *what,
                 char *err, size_t errsize);

/*
** Register the metatables and a module table {decode = f, null = sentinel,
** object_mt = ..., array_mt = ...} as package.loaded["gm.json"];
** json.decode(text, what) raises error(msg, 0) on bad input. Leaves the
** module table on the stack and returns 1, so it also serves as the openf
** of luaL_requiref.
*/
int gm_json_open(lua_State *L);

#endif
