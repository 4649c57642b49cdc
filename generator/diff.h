/*
** Unified diffs of generated text, as `diff -u` prints them (diffutils, part of every Debian
** system): what `gen-model regen --check` and `gen-model preview` show a reviewer.
*/
#ifndef GM_DIFF_H
#define GM_DIFF_H

#include <stddef.h>
#include <stdio.h>

#include "gm/status.h"

/*
** Print to out the unified diff (3 lines of context) from text a to text b under the labels
** label_a and label_b ("a/models/x/x_weights.c"). A NULL text is an absent file (/dev/null).
** Returns 0 when the two are the same (nothing printed), 1 when they differ, or -1 when diff
** could not be run (st says why).
*/
int gm_diff_print(FILE *out, const char *label_a, const char *a, size_t la, const char *label_b,
                  const char *b, size_t lb, gm_status *st);

#endif
