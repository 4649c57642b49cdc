/*
** Files compiled into a program by cmake/embed.cmake, so that it needs nothing beside it at run
** time: gen-model's Lua modules and templates (gm_embedded), phase0's canonical prompts
** (gm_prompts). Each table is written at build time as an array of this type.
*/
#ifndef GM_EMBEDDED_H
#define GM_EMBEDDED_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gm_embedded_file {
    const char *name; /* "lua/gen.lua", "templates/weights.c.tmpl", "prompts/base.txt" */
    const char *data; /* NUL-terminated */
    size_t len;       /* without the NUL */
} gm_embedded_file;

/* gen-model's table, terminated by an entry whose name is NULL (generator/CMakeLists.txt). */
extern const gm_embedded_file gm_embedded[];

#ifdef __cplusplus
}
#endif

#endif
