/*
** Whole files: the one reader every part of the program uses for a file it
** takes in whole (config.json, an index, tokenizer.json, .npy), with a
** regular-file check and a size cap that bounds what a hostile file costs;
** and writers that never leave a half-written file behind.
*/
#ifndef GM_IO_H
#define GM_IO_H

#include <stddef.h>
#include <sys/stat.h>

#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
** Read a whole regular file of at most max bytes into a malloc'd buffer with
** a NUL after its last byte. Errors: it cannot be opened, is not a regular
** file (GM_EIO), is larger than max (GM_EFORMAT, naming both sizes).
*/
int gm_read_file(const char *path, size_t max, char **data, size_t *len, gm_status *st);

/*
** Open path for reading, only if it is a regular file (a FIFO or a device in
** its place is refused at once, never waited on): its descriptor, with *sb
** its fstat, or -1 with GM_EIO in st ("cannot open", "expected a regular
** file", naming path). The readers of whole files, headers and shards share it.
*/
int gm_open_regular(const char *path, struct stat *sb, gm_status *st);

/*
** Is path a symlink to nothing (a Hugging Face cache snapshot whose blob was
** deleted)? Then GM_EMISSING in st, one line naming the link and its target,
** and that code; 0 when path is no such link. For the places that find a
** file missing, so that they say why.
*/
int gm_dangling(const char *path, gm_status *st);

/*
** Write data to path via a temporary of this process's own in the same folder
** (path.<pid>.<n>.tmp), fsync, then rename: never a half-written file, and
** writers of one path in several processes each rename a whole file of their own.
*/
int gm_write_file(const char *path, const void *data, size_t len, gm_status *st);

/* The same for a file written in parts, one after the other. */
typedef struct gm_part {
    const void *data;
    size_t len;
} gm_part;

int gm_write_parts(const char *path, const gm_part *parts, size_t n_parts, gm_status *st);

/*
** A temporary name beside path of this process's own (path.<pid>.<n>.tmp): writers of one
** path in several processes, or threads of one, never share one. 0, or -1 when it does not fit.
*/
int gm_tmp_name(char *out, size_t size, const char *path);

/* rm -rf path (links not followed): 0, or -1 with errno. */
int gm_remove_tree(const char *path);

/* mkdir -p: dir and every folder above it (0755). */
int gm_mkdir_p(const char *dir, gm_status *st);

/*
** Before the work whose result goes there: whether a program can write the
** file path (as_dir 0) or make the folder path and write into it (as_dir 1).
** path must not be a folder (a file) or must be one (a folder) if it
** exists, and the nearest folder above it that exists (the folder itself,
** for one that exists) must be a folder this process may write in: tried,
** by making there what the work makes first (a file in path's own folder,
** else a folder) and removing it at once, since the permission bits do not
** say all (root passes them on /proc). 0, or GM_EIO with one line naming
** opt (the option, "--dump") and path as given.
*/
int gm_check_output(const char *opt, const char *path, int as_dir, gm_status *st);

#ifdef __cplusplus
}
#endif

#endif
