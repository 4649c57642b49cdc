/* Small helpers shared by the tests: temp folders, files, running gen-model. */
#ifndef GM_TEST_UTIL_H
#define GM_TEST_UTIL_H

#include <stddef.h>

/* A fresh temporary folder (static storage; one per call site is enough). */
char *tu_tmpdir(void);

/* rm -rf dir (a warning when it cannot), then free(dir): a suite's teardown of its tu_tmpdir(). */
void tu_rmtree(char *dir);

/* Whole file into a malloc'd NUL-terminated buffer; NULL if unreadable. */
char *tu_read(const char *path, size_t *len);
void tu_write(const char *path, const void *data, size_t len);
int tu_exists(const char *path);

/* rm -rf dir, warning (not failing) when it cannot. */
void tu_rm_rf(const char *dir);

/* cp -r src/. dst (dst created). */
void tu_copy_dir(const char *src, const char *dst);

/* Run a shell command; its exit status, with stdout and stderr captured (malloc'd). */
int tu_run(const char *cmd, char **out, char **err);

/* Number of lines in s (a final line without '\n' counts). */
int tu_lines(const char *s);

/*
** Run argv (argv[0] a path) with stdout and stderr captured (malloc'd, may be
** NULL to discard) and stdin from /dev/null; returns the exit status, or
** 128 + the signal that ended it. *max_rss_kb (when not NULL) receives the
** child's peak resident memory and *seconds its wall-clock time.
*/
int tu_run_argv(char *const argv[], char **out, char **err, long *max_rss_kb, double *seconds);

/*
** A text fingerprint of the tree at dir: every entry's path, type, size,
** mode and link target, and every file's sha256, sorted; "(absent)" when dir
** does not exist. Two equal fingerprints mean nothing was written.
*/
char *tu_tree_hash(const char *dir);

#endif
