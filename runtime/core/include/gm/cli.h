/*
** What the command-line programs share: the one line an unknown option or a
** missing value gets (the help is for --help, not for every mistake), and
** the reading of a count.
*/
#ifndef GM_CLI_H
#define GM_CLI_H

#ifdef __cplusplus
extern "C" {
#endif

/*
** After getopt_long returned '?' or ':' (the optstring must start with ':'
** so that getopt itself prints nothing): "PROG: unknown option '--x'; see
** PROG --help" or "PROG: option '--x' needs a value; ...", on one line.
*/
void gm_cli_bad_option(const char *prog, int c, char *const *argv);

/*
** s as a whole number in [lo, hi] (0 <= lo <= hi), digits only: no sign, no
** spaces, nothing after them (atoi would take "3abc" as 3 and overflow on a
** long one); -1 when it is not one.
*/
long gm_cli_count(const char *s, long lo, long hi);

#ifdef __cplusplus
}
#endif

#endif
