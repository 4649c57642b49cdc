/*
** A prompts file (phase0/prompts/base.txt, instruct.txt, or the user's), read
** as mlir-air's verify reads one (programming_examples/llms/verify,
** verify_runner.py): the text split into lines where Python's
** str.splitlines() splits (\n, \r\n, \r, \v, \f, \x1c, \x1d, \x1e, U+0085,
** U+2028, U+2029), each line stripped of the whitespace Python's str.strip()
** removes (those, \t, \x1f, space, U+00A0, U+1680, U+2000..U+200A, U+202F,
** U+205F, U+3000), and the lines left empty or starting with '#' skipped. So
** a CRLF file gives the prompts its LF copy gives, and an indented comment
** is a comment.
*/
#ifndef GM_PHASE0_PROMPT_FILE_H
#define GM_PHASE0_PROMPT_FILE_H

#include <stddef.h>

#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct p0_prompt {
    char *text;   /* the stripped line, NUL-terminated */
    int line;     /* its line number, from 1, counted as str.splitlines() counts */
} p0_prompt;

typedef struct p0_prompts {
    int n;
    p0_prompt *p;
} p0_prompts;

/*
** The prompts of text[0..len) (`file` names it in errors), at most max of
** them (0: all). Text that is not UTF-8, or holds a NUL byte, is one line
** naming the file and the line.
*/
int p0_prompts_read(const char *file, const char *text, size_t len, int max, p0_prompts *out, gm_status *st);
void p0_prompts_free(p0_prompts *ps);

/* An instruct (chat-tuned) checkpoint, by its repo id (Instruct, -it, Chat): its canonical prompts are instruct's. */
int p0_is_instruct(const char *repo);

#ifdef __cplusplus
}
#endif

#endif
