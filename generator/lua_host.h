/*
** The embedded Lua 5.4 interpreter that runs the generator (generator/lua/)
** over a snapshot and renders templates/. Lua sees no io, os or debug
** library, no file loaders and no undeclared globals: the generator is a pure
** function from a snapshot to a list of files, and the host does all writing.
*/
#ifndef GM_LUA_HOST_H
#define GM_LUA_HOST_H

#include <stddef.h>

#include "gm/config.h"
#include "gm/status.h"
#include "snapshot.h"

/*
** The largest file gen-model writes into models/<id>/, and so the most regen reads back of one:
** a rendered output (gen.lua refuses a larger one, naming it) or a snapshot/ copy (a
** safetensors header is at most ST_MAX_HEADER + 8 bytes, config.json and an index 64 MiB).
*/
#define GM_GEN_FILE_MAX (128u << 20)

typedef struct gm_gen_file {
    char *path;  /* relative to models/<id>/ */
    char *text;
    size_t len;
    int keep;    /* a living document: an existing copy is kept, not replaced */
} gm_gen_file;

typedef struct gm_gen_result {
    char *id;    /* the model id, a C identifier */
    gm_gen_file *files;
    size_t n_files;
} gm_gen_result;

typedef struct gm_gen_options {
    const char *name;          /* the model id to use, or NULL to derive it from the repo */
    const char *templates_dir; /* read templates from here instead of the embedded copies */
    int verbose;               /* a Lua traceback with internal errors */
} gm_gen_options;

/*
** What config.json alone decides, before any tensor header is read: the
** scope check (a refusal is GM_EUNSUPPORTED) and the Config's types and
** required keys. snap needs only repo and config. When out is not NULL and
** the check passes, *out is the Config the generator extracted (qkv_bias and
** qk_norm from the architecture), for comparing with gm_config_parse's.
*/
int gm_check_config(const gm_snapshot *snap, const gm_gen_options *opt, gm_config *out,
                    gm_status *st);

/*
** Check the snapshot (scope, Config, tensors) and render every output.
** Errors keep the message the generator gives; the code tells a refusal
** (GM_EUNSUPPORTED) from bad input (GM_EFORMAT, GM_EMISSING, GM_ESHAPE,
** GM_EDTYPE) and from a bug in a template or the generator (GM_ELUA). An
** output over GM_GEN_FILE_MAX bytes is GM_EFORMAT, naming it.
*/
int gm_generate(const gm_snapshot *snap, const gm_gen_options *opt,
                gm_gen_result *out, gm_status *st);

void gm_gen_result_free(gm_gen_result *r);

/*
** Whether folder dir holds every template gm_generate reads (templates/<name>.tmpl
** as built in), and no other <name>.tmpl, which nothing would render: 0, or st
** names the first it cannot read, or the first it does not know.
*/
int gm_templates_check(const char *dir, gm_status *st);

#endif
