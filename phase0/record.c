/*
** Phase 0's marks in progress.md and TODO.md, idempotent, written via rename;
** and the one-line text of a token that they and the reports show.
*/
#include "record.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gm/io.h"

/*
** The first k bytes of out, where text copied as it is was cut before a byte
** `next`: fewer, when that byte is inside a character (a UTF-8 continuation
** byte), so that none of the character is kept.
*/
static size_t whole_chars(const char *out, size_t k, unsigned char next)
{
    if ((next & 0xC0) != 0x80)
        return k;
    while (k > 0 && ((unsigned char)out[k - 1] & 0xC0) == 0x80)
        k--;
    return k - (k > 0); /* and its first byte */
}

const char *p0_shown(const char *s, char *out, size_t size)
{
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (; *p && k + 5 < size; p++) {
        if (*p == '\n')
            k += (size_t)snprintf(out + k, size - k, "\\n");
        else if (*p < 0x20 || *p == 0x7F)
            k += (size_t)snprintf(out + k, size - k, "\\x%02x", *p);
        else
            out[k++] = (char)*p;
    }
    k = whole_chars(out, k, *p);
    out[k] = '\0';
    return out;
}

char *p0_cut(char *out, size_t size, const char *s)
{
    size_t n = strlen(s);
    if (n >= size)
        n = size - 1;
    memcpy(out, s, n);
    out[whole_chars(out, n, (unsigned char)s[n])] = '\0';
    return out;
}

const char *p0_md(const char *s, int code, char *out, size_t size)
{
    char *shown = malloc(size);
    if (!shown) {
        out[0] = '\0';
        return out;
    }
    p0_shown(s, shown, size);
    int fence = 0; /* the longest run of backticks in s, plus one */
    for (int i = 0, run = 0; shown[i]; i++)
        if ((run = shown[i] == '`' ? run + 1 : 0) > fence - 1)
            fence = run + 1;
    fence = code ? (fence ? fence : 1) : 0;
    const int pad = code && fence > 1; /* a space inside the fence, so that s may start or end with a backtick */
    size_t k = 0;
    for (int i = 0; i < fence + pad && k + 1 < size; i++)
        out[k++] = i < fence ? '`' : ' ';
    const char *p = shown;
    for (; *p && k + 6 + (size_t)fence < size; p++) {
        if (strncmp(p, "<!--", 4) == 0)
            out[k++] = '<', out[k++] = '\\', p++;
        out[k++] = *p;
    }
    k = whole_chars(out, k, (unsigned char)*p);
    for (int i = 0; i < fence + pad && k + 1 < size; i++)
        out[k++] = i < pad ? ' ' : '`';
    out[k] = '\0';
    free(shown);
    return out;
}

#define BEGIN "<!-- phase0:begin -->"
#define END "<!-- phase0:end -->"
#define BLOCKER_MARK "<!-- phase0 -->"
#define HEADING "## Phase 0:"          /* an entry's first line */
#define PASS_HEADING "## Phase 0: PASS" /* a pass's */

/* The new text is built in a memory stream, then written over the old file. */
/* The file at path read into *old, and a memory stream for its new text; NULL on failure, st set. */
static FILE *begin(const char *path, char **old, size_t *len, char **buf, size_t *blen, gm_status *st)
{
    if (gm_read_file(path, 16u << 20, old, len, st))
        return NULL;
    FILE *out = open_memstream(buf, blen);
    if (!out) {
        free(*old);
        *old = NULL;
        gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
    }
    return out;
}

/*
** The new text over the old file: where a symbolic link leads (the link is
** the user's, and so is the file it names), with the file's own permissions.
*/
static int finish(FILE *out, char **buf, size_t *len, const char *path, gm_status *st)
{
    if (fclose(out) != 0 || !*buf)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
    char real[PATH_MAX];
    struct stat sb;
    const char *to = realpath(path, real) ? real : path;
    const int had = stat(to, &sb) == 0;
    if (gm_write_file(to, *buf, *len, st) == 0 && had && chmod(to, sb.st_mode & 07777) != 0)
        gm_fail(st, GM_EIO, "%s: cannot keep its permissions: %s", path, strerror(errno));
    free(*buf);
    return st->code;
}

/* The first line from `from` on that is `mark` alone (spaces around it, and a CR, allowed); NULL when none. */
static const char *mark_line(const char *text, const char *from, const char *mark)
{
    const size_t n = strlen(mark);
    for (const char *p = from; (p = strstr(p, mark)); p += n) {
        const char *a = p, *z = p + n;
        while (a > text && (a[-1] == ' ' || a[-1] == '\t'))
            a--;
        while (*z == ' ' || *z == '\t' || *z == '\r')
            z++;
        if ((a == text || a[-1] == '\n') && (*z == '\n' || !*z))
            return a;
    }
    return NULL;
}

/* text to out, each line ended as the file ends its lines (eol) */
static void put_lines(FILE *out, const char *text, const char *eol)
{
    for (size_t n; *text; text += n + (text[n] == '\n')) {
        n = strcspn(text, "\n");
        fwrite(text, 1, n, out);
        if (text[n] == '\n')
            fputs(eol, out);
    }
}

/*
** The pass recorded in the Phase 0 block's lines [from, to): from its
** heading to the next entry's or the block's end, blank lines at its end
** left out (*n bytes); NULL when the block holds none.
*/
static const char *recorded_pass(const char *from, const char *to, size_t *n)
{
    const char *pass = NULL, *line = from;
    for (; line < to; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] == '\n')) {
        if (!pass && strncmp(line, PASS_HEADING, strlen(PASS_HEADING)) == 0)
            pass = line;
        else if (pass && strncmp(line, HEADING, strlen(HEADING)) == 0)
            break;
    }
    if (!pass)
        return NULL;
    const char *z = line < to ? line : to;
    while (z > pass && strchr(" \t\r\n", z[-1]))
        z--;
    *n = (size_t)(z - pass);
    return pass;
}

int p0_record_progress(const char *model_dir, const char *entry, gm_status *st)
{
    char path[4096], *old = NULL, *buf = NULL;
    size_t len = 0, blen = 0;
    snprintf(path, sizeof path, "%s/docs/development_progress/progress.md", model_dir);
    FILE *out = begin(path, &old, &len, &buf, &blen, st);
    if (!out)
        return st->code;
    /* the markers as whole lines: a line that only mentions them is the user's */
    const char *b = mark_line(old, old, BEGIN), *e = b ? mark_line(old, b + strlen(BEGIN), END) : NULL;
    const char *eol = strstr(old, "\r\n") ? "\r\n" : "\n"; /* the file's own line ends */
    if (b && e) { /* replace the previous Phase 0 entry where it stands; a failure keeps the pass before it */
        const char *body = b + strcspn(b, "\n") + 1; /* (the begin line is ended: the end line follows it) */
        size_t n = 0;
        const char *pass = strncmp(entry, PASS_HEADING, strlen(PASS_HEADING)) != 0 ? recorded_pass(body, e, &n) : NULL;
        e += strcspn(e, "\n");
        e += *e == '\n';
        fwrite(old, 1, (size_t)(b - old), out);
        put_lines(out, BEGIN "\n", eol);
        if (pass) { /* as it stands, its own line ends, then a blank line */
            fwrite(pass, 1, n, out);
            fprintf(out, "%s%s", eol, eol);
        }
        put_lines(out, entry, eol), put_lines(out, END "\n", eol);
        fputs(e, out);
    } else {
        fprintf(out, "%s%s%s", old, len > 0 && old[len - 1] != '\n' ? eol : "", eol);
        put_lines(out, BEGIN "\n", eol), put_lines(out, entry, eol), put_lines(out, END "\n", eol);
    }
    free(old);
    return finish(out, &buf, &blen, path, st);
}

/* Is line[0..n) the placeholder "- none" (and nothing else but spaces)? */
static int is_none(const char *line, size_t n)
{
    if (n < 6 || strncmp(line, "- none", 6) != 0)
        return 0;
    for (size_t i = 6; i < n; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n')
            return 0;
    return 1;
}

/*
** The blockers section's body: what was kept of it (every line but the
** placeholder and our previous blocker, trailing blank lines trimmed), then
** on a failure our blocker line and the user's notes indented under the
** previous one (`notes`, nn bytes; on a pass they go with the blocker they
** were about), or the placeholder if nothing is left; each line ended as the
** file ends its lines.
*/
static void end_blockers(FILE *out, const char *kept, size_t n, const char *notes, size_t nn, int pass,
                         const char *blocker, const char *eol)
{
    while (n && (kept[n - 1] == '\n' || kept[n - 1] == ' ' || kept[n - 1] == '\t' || kept[n - 1] == '\r'))
        n--;
    if (n) {
        fwrite(kept, 1, n, out);
        fputs(eol, out);
    }
    if (!pass && blocker) {
        fprintf(out, "- %s " BLOCKER_MARK "%s", blocker, eol);
        fwrite(notes, 1, nn, out);
        if (nn && notes[nn - 1] != '\n')
            fputs(eol, out);
    } else if (!n)
        fprintf(out, "- none%s", eol);
}

/*
** TODO.md: Phase 0's box ticked or not, and our blocker line in "## Active
** blockers" put or taken away (the section added at the end on a failure, if
** the file has none); everything else, in that section too (other blockers,
** their continuation lines, notes), kept as it was.
*/
int p0_record_todo(const char *model_dir, int pass, const char *blocker, gm_status *st)
{
    char path[4096], *old = NULL, *buf = NULL;
    size_t len = 0, blen = 0;
    snprintf(path, sizeof path, "%s/TODO.md", model_dir);
    FILE *out = begin(path, &old, &len, &buf, &blen, st);
    if (!out)
        return st->code;
    char *kept = malloc(len + 1), *notes = malloc(len + 1); /* the blockers section's lines kept, in order; the
                                                                 user's lines indented under our blocker */
    size_t nk = 0, nn = 0;
    if (!kept || !notes) {
        free(kept), free(notes);
        fclose(out);
        free(buf);
        free(old);
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
    }
    const char *eol = strstr(old, "\r\n") ? "\r\n" : "\n"; /* the file's own line ends */
    int in_section = 0, found = 0, under_ours = 0;
    for (const char *line = old; *line;) {
        const size_t n = strcspn(line, "\n") + (line[strcspn(line, "\n")] == '\n');
        const int ended = line[n - 1] == '\n';
        if (in_section && strncmp(line, "## ", 3) == 0) { /* the end of the blockers section */
            end_blockers(out, kept, nk, notes, nn, pass, blocker, eol);
            fputs(eol, out);
            in_section = 0;
        }
        if (strncmp(line, "- [", 3) == 0 && strchr(" xX", line[3]) && strncmp(line + 4, "] Phase 0:", 10) == 0) {
            const char *box = pass ? "- [x]" : "- [ ]";
            if (in_section) { /* where it stands, in the section too */
                memcpy(kept + nk, box, 5);
                memcpy(kept + nk + 5, line + 5, n - 5);
                nk += n;
            } else {
                fputs(box, out);
                fwrite(line + 5, 1, n - 5, out);
            }
        } else if (strncmp(line, "## Active blockers", 18) == 0) {
            fwrite(line, 1, n, out);
            if (!ended) /* the heading is the file's last line */
                fputs(eol, out);
            in_section = found = 1;
            nk = nn = 0;
            under_ours = 0;
        } else if (in_section) {
            /* ours goes (what is indented under it follows the new one); the rest but the placeholder is kept */
            if (memmem(line, n, BLOCKER_MARK, strlen(BLOCKER_MARK))) {
                under_ours = 1;
            } else if (under_ours && (line[0] == ' ' || line[0] == '\t')) {
                memcpy(notes + nn, line, n);
                nn += n;
            } else {
                under_ours = 0;
                if (!is_none(line, n)) {
                    memcpy(kept + nk, line, n);
                    nk += n;
                }
            }
        } else {
            fwrite(line, 1, n, out);
        }
        line += n;
    }
    if (in_section) /* the section ran to the end of the file */
        end_blockers(out, kept, nk, notes, nn, pass, blocker, eol);
    else if (!found && !pass && blocker) /* no section: a failure still goes under one */
        fprintf(out, "%s%s## Active blockers%s- %s " BLOCKER_MARK "%s", len && old[len - 1] != '\n' ? eol : "", eol,
                eol, blocker, eol);
    free(kept), free(notes);
    free(old);
    return finish(out, &buf, &blen, path, st);
}
