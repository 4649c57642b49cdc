/* The command-line programs' shared messages; see gm/cli.h. */
#include "gm/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gm_cli_bad_option(const char *prog, int c, char *const *argv)
{
    /* a long option is the word getopt just passed, up to any '='; a short one is its letter, in optopt */
    const char *word = optind > 0 && argv[optind - 1] ? argv[optind - 1] : "";
    char shown[64];
    if (strncmp(word, "--", 2) == 0)
        snprintf(shown, sizeof shown, "%.*s", (int)strcspn(word, "="), word);
    else
        snprintf(shown, sizeof shown, "-%c", optopt ? optopt : '?');
    if (c == ':')
        fprintf(stderr, "%s: option '%s' needs a value; see %s --help\n", prog, shown, prog);
    else
        fprintf(stderr, "%s: unknown option '%s'; see %s --help\n", prog, shown, prog);
}

long gm_cli_count(const char *s, long lo, long hi)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    const long n = strtol(s, &end, 10);
    return *end || errno || n < lo || n > hi ? -1 : n;
}
