/*
** Recording a Phase 0 verdict in the model's living documents:
** docs/development_progress/progress.md gets one Phase 0 block (replaced, not
** duplicated, when phase0 runs again; a failure never replaces a recorded
** pass, it follows it until the next pass) and TODO.md gets Phase 0 ticked on
** a pass, or a blocker under "Active blockers" on a failure.
*/
#ifndef GM_PHASE0_RECORD_H
#define GM_PHASE0_RECORD_H

#include <stddef.h>

#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
** Put `entry` (Markdown, several lines, its first "## Phase 0: PASS ..." or
** "## Phase 0: FAIL ...") as the Phase 0 block of progress.md in model_dir: a
** pass alone; a failure after the pass the block holds, if it holds one.
*/
int p0_record_progress(const char *model_dir, const char *entry, gm_status *st);

/*
** Tick (pass) or untick Phase 0 in TODO.md, and set or clear the Phase 0
** blocker (blocker: one line of text, or NULL on a pass).
*/
int p0_record_todo(const char *model_dir, int pass, const char *blocker, gm_status *st);

/*
** s on one line for a report or a record (a token's text, a prompt): a
** newline shown as \n, other controls as \xNN, cut to fit out where a
** character ends. Returns out.
*/
const char *p0_shown(const char *s, char *out, size_t size);

/* s into out (size bytes), whole or cut where a character ends (UTF-8 stays UTF-8). Returns out. */
char *p0_cut(char *out, size_t size, const char *s);

/*
** s for a line of progress.md or TODO.md: p0_shown, with "<!--" written
** "<\\!--", so that no text of the user's (a prompt, a path) starts a
** comment, nor reads as the marks the records find their blocks by. With
** code set, s as a Markdown code span: between runs of backticks longer
** than any in s. Returns out.
*/
const char *p0_md(const char *s, int code, char *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif
