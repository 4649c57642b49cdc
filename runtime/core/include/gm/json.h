/*
** A small validating JSON scanner over a byte range, to RFC 8259's grammar:
** strings without raw control bytes, only the known escapes, surrogate
** escapes in pairs; numbers in JSON's grammar; nesting at most
** GM_JSON_MAX_DEPTH. It does not check that the bytes of a string are UTF-8
** (nor does cJSON); a reader that needs that calls gm_utf8_check. It builds no tree: it skips values and decodes strings
** where they lie, so a reader can see a value's own text.
**
** Two readers use it where a tree is not enough: the tokenizer, for the
** 150k-entry vocab and 280k merges of tokenizer.json, read straight into its
** tables (a cJSON tree for them costs ~100 ms); the config.json reader, to
** see a number as written (cJSON keeps only a double: 896 and 896.0 look alike).
**
** Each function returns 0 with *after just past what it read, or -1 with
** *after at the offending byte and *err a short lower-case description.
*/
#ifndef GM_JSON_H
#define GM_JSON_H

#include "gm/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GM_JSON_MAX_DEPTH 256

/* p moved past JSON whitespace (space, tab, CR, LF). */
const char *gm_json_ws(const char *p, const char *end);

/* The string at p (which must be '"'); its decoded UTF-8 bytes are appended to out unless out is NULL. */
int gm_json_string(const char *p, const char *end, gm_buf *out, const char **after, const char **err);

/* The number at p: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
int gm_json_number(const char *p, const char *end, const char **after, const char **err);

/* One value at p (leading whitespace allowed), of any type, nested at most GM_JSON_MAX_DEPTH deep. */
int gm_json_skip(const char *p, const char *end, const char **after, const char **err);

/*
** The same, also taking NaN, Infinity and -Infinity as numbers: Python's json
** writes them for non-finite floats, so config.json files carry them.
*/
int gm_json_skip_py(const char *p, const char *end, const char **after, const char **err);

/* The length of the non-finite literal Python's json writes (NaN, Infinity, -Infinity) at p, else 0. */
size_t gm_json_nonfinite(const char *p, const char *end);

#ifdef __cplusplus
}
#endif

#endif
