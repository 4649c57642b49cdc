/* Internal: what the header and folder halves of the safetensors reader share. */
#ifndef GM_ST_INTERNAL_H
#define GM_ST_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "gm/safetensors.h"

/* "[2, 3]" into buf (always NUL-terminated, cut if too long). */
const char *st_fmt_shape(char *buf, size_t cap, int rank, const int64_t *shape);

/* The first key that appears twice among obj's members, or NULL. */
const char *st_duplicate_key(const cJSON *obj);

#endif
