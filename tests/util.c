#include "util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

char *tu_tmpdir(void)
{
    char tmpl[] = "/tmp/gm-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    cr_assert_not_null(d, "mkdtemp failed");
    return strdup(d);
}

void tu_rmtree(char *dir)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
    free(dir);
}

char *tu_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = '\0';
    if (len)
        *len = got;
    return buf;
}

void tu_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

int tu_exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

void tu_rm_rf(const char *dir)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
}

void tu_copy_dir(const char *src, const char *dst)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s'/. '%s'/ && chmod -R u+w '%s'", dst, src, dst, dst);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

int tu_run(const char *cmd, char **out, char **err)
{
    char *dir = tu_tmpdir();
    char full[16384], po[4200], pe[4200];
    snprintf(po, sizeof po, "%s/stdout", dir);
    snprintf(pe, sizeof pe, "%s/stderr", dir);
    /*
    ** The shell's own descriptors redirected first, so that they are the whole command's, and no
    ** process of it holds the test's output (ctest's pipe) if criterion kills the test on its timeout.
    */
    snprintf(full, sizeof full, "exec >'%s' 2>'%s' </dev/null; %s", po, pe, cmd);
    int rc = system(full);
    char *o = tu_read(po, NULL), *e = tu_read(pe, NULL);
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
    snprintf(full, sizeof full, "rm -rf '%s'", dir);
    if (system(full) != 0)
        cr_log_warn("could not remove %s", dir);
    free(dir);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int tu_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n')
            n++;
    if (*s && s[strlen(s) - 1] != '\n')
        n++;
    return n;
}

int tu_run_argv(char *const argv[], char **out, char **err, long *max_rss_kb, double *seconds)
{
    char *dir = tu_tmpdir();
    char po[4200], pe[4200], cmd[4300];
    snprintf(po, sizeof po, "%s/stdout", dir);
    snprintf(pe, sizeof pe, "%s/stderr", dir);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed");
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY), o = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            e = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || o < 0 || e < 0 || dup2(in, 0) < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    cr_assert_eq(wait4(pid, &status, 0, &ru), pid, "wait4 failed");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (max_rss_kb)
        *max_rss_kb = ru.ru_maxrss;
    if (seconds)
        *seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    char *o = tu_read(po, NULL), *e = tu_read(pe, NULL);
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
    free(dir);
    return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

char *tu_tree_hash(const char *dir)
{
    char cmd[8192], *out = NULL;
    if (!tu_exists(dir))
        return strdup("(absent)");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && { find . -printf '%%p %%y %%s %%m %%l\\n' | LC_ALL=C sort; "
             "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; }",
             dir);
    int rc = tu_run(cmd, &out, NULL);
    cr_assert_eq(rc, 0, "tree hash of %s failed", dir);
    return out;
}
