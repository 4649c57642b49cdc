#include "fuzz_util.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_scratch(void)
{
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

const char *fz_scratch(void)
{
    if (dir[0])
        return dir;
    struct stat sb;
    const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/gm-fuzz-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    atexit(remove_scratch);
    return dir;
}

void fz_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

size_t fz_split(const uint8_t *data, size_t size, const uint8_t **parts, size_t *lens, size_t max)
{
    const size_t sep = sizeof FZ_SEP - 1;
    size_t n = 0, start = 0;
    for (size_t i = 0; n + 1 < max && i + sep <= size; i++) {
        if (memcmp(data + i, FZ_SEP, sep) == 0) {
            parts[n] = data + start;
            lens[n++] = i - start;
            start = i + sep;
            i += sep - 1;
        }
    }
    parts[n] = data + start;
    lens[n++] = size - start;
    return n;
}
