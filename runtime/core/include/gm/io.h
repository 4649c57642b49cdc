/* Small-file helpers: read a whole file, write one atomically. */
#ifndef GM_IO_H
#define GM_IO_H

#include <stddef.h>

#include "gm/status.h"

/* Read a whole regular file (at most max bytes) into a malloc'd NUL-terminated buffer. */
int gm_read_file(const char *path, size_t max, char **data, size_t *len, gm_status *st);

/* Write data to path via path.tmp, fsync, then rename: never a half-written file. */
int gm_write_file(const char *path, const void *data, size_t len, gm_status *st);

/* mkdir -p: dir and every folder above it (0755). */
int gm_mkdir_p(const char *dir, gm_status *st);

#endif
