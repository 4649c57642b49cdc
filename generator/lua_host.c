/* The Lua host: gen.lua runs inside pmain under lua_pcall, as lua.c does. */
#include "lua_host.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "gm/embedded.h"
#include "gm/lock.h"
#include "gm/safetensors.h"
#include "json2lua.h"

/* every snapshot/ copy fits too: regen reads back whatever gen-model wrote */
_Static_assert(GM_GEN_FILE_MAX >= ST_MAX_HEADER + 8, "a header copy must fit in GM_GEN_FILE_MAX");

typedef struct call {
    int config_only; /* run gen.check_config instead of gen.generate */
    const gm_snapshot *snap;
    const gm_gen_options *opt;
    gm_gen_result *out;
    gm_config *cfg;  /* check_config: the extracted Config, or NULL */
    gm_status *st;
} call;

/* Keep error tables from gen.lua as they are; give strings a traceback when verbose. */
static int msghandler(lua_State *L)
{
    if (lua_istable(L, 1))
        return 1;
    const char *msg = lua_tostring(L, 1);
    if (!msg)
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    if (lua_toboolean(L, lua_upvalueindex(1))) {
        luaL_traceback(L, L, msg, 1);
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    lua_pushstring(L, msg);
    return 1;
}

/* package.preload loader for an embedded module; upvalue 1 is its gm_embedded entry. */
static int load_embedded(lua_State *L)
{
    const gm_embedded_file *f = lua_touserdata(L, lua_upvalueindex(1));
    char chunkname[256];
    snprintf(chunkname, sizeof chunkname, "=generator/%s", f->name);
    if (luaL_loadbufferx(L, f->data, f->len, chunkname, "t") != LUA_OK)
        return lua_error(L);
    lua_call(L, 0, 1);
    return 1;
}

/*
** require("gm.runtime"): what the generated code must agree on with the
** runtime, from its one definition in C: the ABI version, GM_MAX_EOS, the
** reserved model ids (a set: reserved.gm == true), and GM_GEN_FILE_MAX.
*/
static int open_runtime(lua_State *L)
{
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, GM_RUNTIME_ABI);
    lua_setfield(L, -2, "abi");
    lua_pushinteger(L, GM_MAX_EOS);
    lua_setfield(L, -2, "max_eos");
    lua_pushinteger(L, GM_GEN_FILE_MAX);
    lua_setfield(L, -2, "max_file");
    lua_newtable(L);
    for (const char *const *r = gm_reserved_ids; *r; r++) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, *r);
    }
    lua_setfield(L, -2, "reserved");
    return 1;
}

static int strict_index(lua_State *L)
{
    return luaL_error(L, "undeclared global '%s'", lua_tostring(L, 2));
}

/* Libraries, embedded modules, and a _G that refuses undeclared names. */
static void setup(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_LOADLIBNAME, luaopen_package},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_STRLIBNAME, luaopen_string},
        {LUA_MATHLIBNAME, luaopen_math}, {LUA_UTF8LIBNAME, luaopen_utf8},
        {NULL, NULL}};
    for (const luaL_Reg *lib = libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    lua_setglobal(L, "dofile");
    lua_pushnil(L);
    lua_setglobal(L, "loadfile");

    lua_getglobal(L, "package");
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "path");
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "cpath");
    lua_pushnil(L);
    lua_setfield(L, -2, "loadlib");
    lua_getfield(L, -1, "preload");
    for (const gm_embedded_file *f = gm_embedded; f->name; f++) {
        size_t n = strlen(f->name);
        if (strncmp(f->name, "lua/", 4) != 0 || n < 8 || strcmp(f->name + n - 4, ".lua") != 0)
            continue;
        lua_pushlstring(L, f->name + 4, n - 8); /* "lua/gen.lua" -> "gen" */
        lua_pushlightuserdata(L, (void *)f);
        lua_pushcclosure(L, load_embedded, 1);
        lua_settable(L, -3);
    }
    lua_pop(L, 2); /* preload, package */

    luaL_requiref(L, "gm.json", gm_json_open, 0);
    lua_pop(L, 1);
    luaL_requiref(L, "gm.runtime", open_runtime, 0);
    lua_pop(L, 1);

    lua_pushglobaltable(L);
    lua_newtable(L);
    lua_pushcfunction(L, strict_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, strict_index);
    lua_setfield(L, -2, "__newindex");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
}

/* The snapshot as gen.lua reads it (see the comment at the top of gen.lua). */
static void push_snapshot(lua_State *L, const call *c)
{
    const gm_snapshot *s = c->snap;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, s->repo);
    lua_setfield(L, -2, "repo");
    if (s->commit) {
        lua_pushstring(L, s->commit);
        lua_setfield(L, -2, "commit");
    }
    if (c->opt->name) {
        lua_pushstring(L, c->opt->name);
        lua_setfield(L, -2, "name");
    }
    lua_pushlstring(L, s->config, s->config_len);
    lua_setfield(L, -2, "config");
    lua_pushstring(L, s->config_path ? s->config_path : "config.json");
    lua_setfield(L, -2, "config_path");
    if (s->index) {
        lua_pushlstring(L, s->index, s->index_len);
        lua_setfield(L, -2, "index");
        lua_pushstring(L, s->index_path ? s->index_path : "model.safetensors.index.json");
        lua_setfield(L, -2, "index_path");
    }
    lua_createtable(L, (int)s->n_shards, 0);
    for (size_t i = 0; i < s->n_shards; i++) {
        const gm_shard *sh = &s->shards[i];
        st_header h;
        if (st_header_parse(&h, sh->header, sh->header_len, sh->file_size, sh->file, c->st))
            luaL_error(L, "%s", c->st->msg); /* validated when read: not expected */
        lua_createtable(L, 0, 3);
        lua_pushstring(L, sh->file);
        lua_setfield(L, -2, "file");
        lua_pushstring(L, sh->path ? sh->path : sh->file);
        lua_setfield(L, -2, "path");
        lua_createtable(L, (int)h.n_tensors, 0);
        for (size_t k = 0; k < h.n_tensors; k++) {
            const st_tensor *t = &h.tensors[k];
            lua_createtable(L, 0, 3);
            lua_pushstring(L, t->name);
            lua_setfield(L, -2, "name");
            lua_pushstring(L, st_dtype_name(t->dtype));
            lua_setfield(L, -2, "dtype");
            lua_createtable(L, t->rank, 0);
            for (int d = 0; d < t->rank; d++) {
                lua_pushinteger(L, t->shape[d]);
                lua_rawseti(L, -2, d + 1);
            }
            lua_setfield(L, -2, "shape");
            lua_rawseti(L, -2, (lua_Integer)k + 1);
        }
        st_header_free(&h);
        lua_setfield(L, -2, "tensors");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "shards");
}

/* templates/<name>.tmpl, embedded or read from opt->templates_dir. */
static void push_templates(lua_State *L, const call *c)
{
    lua_newtable(L);
    for (const gm_embedded_file *f = gm_embedded; f->name; f++) {
        size_t n = strlen(f->name);
        if (strncmp(f->name, "templates/", 10) != 0 || n < 15 || strcmp(f->name + n - 5, ".tmpl") != 0)
            continue;
        lua_pushlstring(L, f->name + 10, n - 15); /* "weights.c" */
        if (c->opt->templates_dir) {
            char path[4096];
            char *text = NULL;
            size_t len = 0;
            snprintf(path, sizeof path, "%s/%s", c->opt->templates_dir, f->name + 10);
            if (gm_read_file(path, 16u << 20, &text, &len, c->st))
                luaL_error(L, "%s", c->st->msg);
            lua_pushlstring(L, text, len);
            free(text);
        } else {
            lua_pushlstring(L, f->data, f->len);
        }
        lua_settable(L, -3);
    }
}

static char *dup_field(lua_State *L, int idx, const char *key, size_t *len)
{
    lua_getfield(L, idx, key);
    size_t n = 0;
    const char *s = luaL_checklstring(L, -1, &n);
    char *copy = malloc(n + 1);
    if (!copy)
        luaL_error(L, "out of memory");
    memcpy(copy, s, n + 1);
    lua_pop(L, 1);
    if (len)
        *len = n;
    return copy;
}

/*
** The Lua Config (config.lua's fields, plus qkv_bias and qk_norm) as a
** gm_config, field by field as GM_CONFIG_FIELDS (gm/config.h) lists them.
** config.lua promises each field's type; anything else, or a field the list
** has and the Lua Config lacks, is a generator bug, reported as one (GM_ELUA).
*/
static void field(lua_State *L, int idx, const char *key, int type, const char *what)
{
    if (lua_getfield(L, idx, key) != type)
        luaL_error(L, "gen.check_config: Config.%s must be %s, found a %s", key, what, luaL_typename(L, -1));
}

/* The integer at the top of the stack, popped; `key` names it in the error. */
static int pop_int(lua_State *L, const char *key)
{
    if (!lua_isinteger(L, -1))
        luaL_error(L, "gen.check_config: Config.%s must be an integer, found a %s", key, luaL_typename(L, -1));
    const lua_Integer v = lua_tointeger(L, -1);
    if (v < INT_MIN || v > INT_MAX)
        luaL_error(L, "gen.check_config: Config.%s = %I does not fit an int", key, v);
    lua_pop(L, 1);
    return (int)v;
}

static int config_int(lua_State *L, int idx, const char *key)
{
    lua_getfield(L, idx, key);
    return pop_int(L, key);
}

static double config_number(lua_State *L, int idx, const char *key)
{
    field(L, idx, key, LUA_TNUMBER, "a number");
    double v = (double)lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static bool config_bool(lua_State *L, int idx, const char *key)
{
    field(L, idx, key, LUA_TBOOLEAN, "a boolean");
    bool v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* rope_scaling: false (none) or { type = "llama3", factor, ... } */
static void config_rope(lua_State *L, int idx, const char *key, gm_rope_scaling *rs)
{
    if (lua_getfield(L, idx, key) == LUA_TTABLE) {
        const int t = lua_gettop(L);
        lua_getfield(L, t, "type");
        if (!lua_isstring(L, -1) || strcmp(lua_tostring(L, -1), "llama3") != 0)
            luaL_error(L, "gen.check_config: Config.%s.type must be \"llama3\"", key);
        lua_pop(L, 1);
        rs->type = GM_ROPE_LLAMA3;
        rs->factor = config_number(L, t, "factor");
        rs->low_freq_factor = config_number(L, t, "low_freq_factor");
        rs->high_freq_factor = config_number(L, t, "high_freq_factor");
        rs->original_max_position_embeddings = config_int(L, t, "original_max_position_embeddings");
    } else if (!lua_isboolean(L, -1) || lua_toboolean(L, -1)) {
        luaL_error(L, "gen.check_config: Config.%s must be false or a table, found a %s", key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
}

/* A list of at most GM_MAX_EOS ids into ids; how many. */
static int config_ids(lua_State *L, int idx, const char *key, int *ids)
{
    field(L, idx, key, LUA_TTABLE, "a list");
    const lua_Unsigned n = lua_rawlen(L, -1);
    if (n > GM_MAX_EOS)
        luaL_error(L, "gen.check_config: Config.%s has %d ids, at most %d fit", key, (int)n, GM_MAX_EOS);
    for (lua_Unsigned i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i);
        ids[i - 1] = pop_int(L, key);
    }
    lua_pop(L, 1);
    return (int)n;
}

/* A dtype by gm_dtype_name's names. */
static gm_dtype config_dtype(lua_State *L, int idx, const char *key)
{
    field(L, idx, key, LUA_TSTRING, "a string");
    const char *name = lua_tostring(L, -1);
    gm_dtype d = GM_DTYPE_NONE;
    while (d <= GM_DTYPE_F32 && strcmp(name, gm_dtype_name(d)) != 0)
        d++;
    if (d > GM_DTYPE_F32)
        luaL_error(L, "gen.check_config: Config.%s '%s' is not a dtype", key, name);
    lua_pop(L, 1);
    return d;
}

/* The quant table (quant.lua's, every field of gm_quant_config by name) as a gm_quant_config. */
static void config_quant(lua_State *L, int idx, const char *key, gm_quant_config *q)
{
    field(L, idx, key, LUA_TTABLE, "a table");
    const int t = lua_gettop(L);
    field(L, t, "method", LUA_TSTRING, "a string");
    const char *name = lua_tostring(L, -1);
    int m = GM_QUANT_NONE;
    while (m <= GM_QUANT_Q4NX && strcmp(name, gm_quant_method_name((gm_quant_method)m)) != 0)
        m++;
    if (m > GM_QUANT_Q4NX)
        luaL_error(L, "gen.check_config: Config.%s.method '%s' is not a gm_quant_method", key, name);
    lua_pop(L, 1);
    q->method = (gm_quant_method)m;
    q->bits = config_int(L, t, "bits");
    q->group_size = config_int(L, t, "group_size");
    q->block_out = config_int(L, t, "block_out");
    q->zero_point = config_bool(L, t, "zero_point");
    q->sym = config_bool(L, t, "sym");
    q->desc_act = config_bool(L, t, "desc_act");
    q->gptq_v2 = config_bool(L, t, "gptq_v2");
    lua_pop(L, 1);
}

/* Every field of GM_CONFIG_FIELDS, by its kind, from the Lua Config at idx. */
static void to_config(lua_State *L, int idx, gm_config *c)
{
    memset(c, 0, sizeof *c);
#define TO_INT(f) c->f = config_int(L, idx, #f);
#define TO_TOKEN(f) c->f = config_int(L, idx, #f);
#define TO_DOUBLE(f) c->f = config_number(L, idx, #f);
#define TO_BOOL(f) c->f = config_bool(L, idx, #f);
#define TO_ARCH(f) c->f = config_bool(L, idx, #f); /* families.lua's implied flags, set by check_config */
#define TO_ROPE(f) config_rope(L, idx, #f, &c->f);
#define TO_EOS(f) c->n_##f = config_ids(L, idx, #f, c->f);
#define TO_DTYPE(f) c->f = config_dtype(L, idx, #f);
#define TO_QUANT(f) config_quant(L, idx, #f, &c->f);
#define TO(kind, field, key, key5, rule) TO_##kind(field)
    GM_CONFIG_FIELDS(TO)
#undef TO
#undef TO_INT
#undef TO_TOKEN
#undef TO_DOUBLE
#undef TO_BOOL
#undef TO_ARCH
#undef TO_ROPE
#undef TO_EOS
#undef TO_DTYPE
#undef TO_QUANT
}

static int pmain(lua_State *L)
{
    call *c = lua_touserdata(L, 1);
    setup(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "gen");
    lua_call(L, 1, 1);
    if (c->config_only) {
        lua_getfield(L, -1, "check_config");
        push_snapshot(L, c);
        lua_call(L, 1, 3); /* arch, family, cfg */
        if (c->cfg)
            to_config(L, lua_gettop(L), c->cfg);
        return 0;
    }
    lua_getfield(L, -1, "generate");
    push_snapshot(L, c);
    push_templates(L, c);
    lua_pushstring(L, c->opt->templates_dir ? c->opt->templates_dir : "templates"); /* as errors name them */
    lua_call(L, 3, 1);

    gm_gen_result *r = c->out;
    int res = lua_gettop(L);
    r->id = dup_field(L, res, "id", NULL);
    lua_getfield(L, res, "files");
    size_t n = (size_t)luaL_len(L, -1);
    r->files = calloc(n ? n : 1, sizeof *r->files);
    if (!r->files)
        return luaL_error(L, "out of memory");
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        gm_gen_file *f = &r->files[r->n_files++];
        f->path = dup_field(L, -1, "path", NULL);
        f->text = dup_field(L, -1, "text", &f->len);
        lua_getfield(L, -1, "keep");
        f->keep = lua_toboolean(L, -1);
        lua_pop(L, 2);
    }
    return 0;
}

static int code_of_kind(const char *kind)
{
    static const struct { const char *kind; int code; } kinds[] = {
        {"format", GM_EFORMAT}, {"missing", GM_EMISSING}, {"shape", GM_ESHAPE},
        {"dtype", GM_EDTYPE},   {"unsupported", GM_EUNSUPPORTED},
    };
    for (size_t i = 0; kind && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kind, kinds[i].kind) == 0)
            return kinds[i].code;
    return GM_ELUA;
}

static int run(call *c);

int gm_check_config(const gm_snapshot *snap, const gm_gen_options *opt, gm_config *out,
                    gm_status *st)
{
    gm_gen_result unused = {0};
    call c = {1, snap, opt, &unused, out, st};
    return run(&c);
}

int gm_generate(const gm_snapshot *snap, const gm_gen_options *opt,
                gm_gen_result *out, gm_status *st)
{
    call c = {0, snap, opt, out, NULL, st};
    memset(out, 0, sizeof *out);
    return run(&c);
}

/*
** Every 100,000 Lua instructions: a caught Ctrl-C (gm_catch_interrupts) ends
** the render, which a template that loops would otherwise never do.
*/
static void stop_if_interrupted(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (gm_interrupted())
        luaL_error(L, "interrupted");
}

/* Run pmain in a fresh interpreter; Lua errors become st. */
static int run(call *c)
{
    gm_gen_result *out = c->out;
    const gm_gen_options *opt = c->opt;
    gm_status *st = c->st;
    lua_State *L = luaL_newstate();
    if (!L)
        return gm_fail(st, GM_ENOMEM, "cannot create the Lua state: out of memory");
    lua_sethook(L, stop_if_interrupted, LUA_MASKCOUNT, 100000);
    lua_pushboolean(L, opt->verbose);
    lua_pushcclosure(L, msghandler, 1);
    lua_pushcfunction(L, pmain);
    lua_pushlightuserdata(L, c);
    if (lua_pcall(L, 1, 0, 1) != LUA_OK) {
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "kind");
            lua_getfield(L, -2, "msg");
            gm_fail(st, code_of_kind(lua_tostring(L, -2)), "%s", lua_tostring(L, -1));
        } else if (st->code == GM_OK) {
            gm_fail(st, GM_ELUA, "%s", lua_tostring(L, -1));
        }
        gm_gen_result_free(out);
    }
    lua_close(L);
    if (st->code && gm_interrupted()) {
        gm_status_clear(st);
        gm_fail(st, GM_EIO, "interrupted while rendering the templates; nothing was written");
    }
    return st->code;
}

int gm_templates_check(const char *dir, gm_status *st)
{
    char path[4096];
    for (const gm_embedded_file *f = gm_embedded; f->name; f++) {
        if (strncmp(f->name, "templates/", 10) != 0)
            continue;
        char *text = NULL;
        size_t len = 0;
        if (snprintf(path, sizeof path, "%s/%s", dir, f->name + 10) >= (int)sizeof path)
            return gm_fail(st, GM_EIO, "%s: path too long", dir);
        if (gm_read_file(path, 16u << 20, &text, &len, st))
            return st->code;
        free(text);
    }
    /* and no template of its own that nothing would render: a reviewer would read "unchanged" as "fine" */
    DIR *d = opendir(dir);
    if (!d)
        return gm_fail(st, GM_EIO, "%s: cannot list: %s", dir, strerror(errno));
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        const size_t n = strlen(de->d_name);
        if (n <= 5 || strcmp(de->d_name + n - 5, ".tmpl") != 0)
            continue;
        int known = 0;
        for (const gm_embedded_file *f = gm_embedded; f->name && !known; f++)
            known = strncmp(f->name, "templates/", 10) == 0 && strcmp(f->name + 10, de->d_name) == 0;
        if (!known) {
            char names[512] = "";
            for (const gm_embedded_file *f = gm_embedded; f->name; f++)
                if (strncmp(f->name, "templates/", 10) == 0)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "",
                             f->name + 10);
            gm_fail(st, GM_EUSAGE, "%s/%s: not a template gen-model renders (it renders %s); a new output is an "
                    "entry of outputs in generator/lua/gen.lua", dir, de->d_name, names);
            break;
        }
    }
    closedir(d);
    return st->code;
}

void gm_gen_result_free(gm_gen_result *r)
{
    for (size_t i = 0; i < r->n_files; i++) {
        free(r->files[i].path);
        free(r->files[i].text);
    }
    free(r->files);
    free(r->id);
    memset(r, 0, sizeof *r);
}
