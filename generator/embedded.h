/* The generator's Lua modules and templates, compiled into the binary. */
#ifndef GM_EMBEDDED_H
#define GM_EMBEDDED_H

#include <stddef.h>

typedef struct gm_embedded_file {
    const char *name; /* "lua/gen.lua", "templates/weights.c.tmpl" */
    const char *data; /* NUL-terminated */
    size_t len;
} gm_embedded_file;

/* Terminated by an entry whose name is NULL. */
extern const gm_embedded_file gm_embedded[];

#endif
