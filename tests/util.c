#include "util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

char *tu_tmpdir(void)
{
    char tmpl[] = "/tmp/gm-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    cr_assert_not_null(d, "mkdtemp failed");
    return strdup(d);
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
    snprintf(full, sizeof full, "%s >'%s' 2>'%s' </dev/null", cmd, po, pe);
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
