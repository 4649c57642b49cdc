/*
** gm_diff_print: equal texts are told apart in memory; differing ones are written to a private
** temporary folder and handed to diff(1) with their labels, its output going straight to out.
*/
#include "diff.h"

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gm/io.h"

extern char **environ;

/* "/dev/null" for an absent text, else a file in dir holding it. */
static int side(const char *dir, const char *name, const char *text, size_t len, char *path, size_t size,
                gm_status *st)
{
    if (!text) {
        snprintf(path, size, "/dev/null");
        return 0;
    }
    snprintf(path, size, "%s/%s", dir, name);
    return gm_write_file(path, text, len, st);
}

int gm_diff_print(FILE *out, const char *label_a, const char *a, size_t la, const char *label_b,
                  const char *b, size_t lb, gm_status *st)
{
    if ((a == NULL) == (b == NULL) && (a == NULL || (la == lb && memcmp(a, b, la) == 0)))
        return 0;
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], pa[PATH_MAX + 8], pb[PATH_MAX + 8];
    /* -1 on every failure, as the callers read it (a code would read as "differs", and the diff be lost unsaid) */
    if (snprintf(dir, sizeof dir, "%s/gen-model-diff-XXXXXX", tmp && *tmp ? tmp : "/tmp") >= (int)sizeof dir)
        return gm_fail(st, GM_EIO, "TMPDIR: path too long"), -1;
    if (!mkdtemp(dir))
        return gm_fail(st, GM_EIO, "%s: cannot create a temporary folder for the diff (TMPDIR): %s", dir,
                       strerror(errno)), -1;
    int rc = 1;
    if (side(dir, "a", a, la, pa, sizeof pa, st) || side(dir, "b", b, lb, pb, sizeof pb, st)) {
        rc = -1;
        goto out;
    }
    char *argv[] = {"diff", "-u", "--label", (char *)label_a, "--label", (char *)label_b, pa, pb, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fileno(out), STDOUT_FILENO);
    fflush(out);
    pid_t pid;
    int err = posix_spawnp(&pid, "diff", &fa, NULL, argv, environ), status = 0;
    posix_spawn_file_actions_destroy(&fa);
    if (err) {
        gm_fail(st, GM_EIO, "cannot run diff (diffutils) to show %s: %s", label_b, strerror(err));
        rc = -1;
        goto out;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    /* diff: 0 the same, 1 different, 2 trouble (it said why on stderr) */
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
        gm_fail(st, GM_EIO, "diff failed on %s (exit status %d)", label_b,
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)), rc = -1;
out:
    if (a)
        unlink(pa);
    if (b)
        unlink(pb);
    rmdir(dir);
    return rc;
}
