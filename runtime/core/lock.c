/* Inter-process locks on lock files; see gm/lock.h. */
#include "gm/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gm/io.h"

int gm_lock_timeout(void)
{
    const char *s = getenv("GM_LOCK_TIMEOUT");
    if (s == NULL || *s == '\0')
        return GM_LOCK_TIMEOUT_DEFAULT;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > 86400 * 365)
        return GM_LOCK_TIMEOUT_DEFAULT;
    return (int)v;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The size of the watched file, -1 when there is none. */
static long long size_of(const char *path)
{
    struct stat sb;
    return path && stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

int gm_lock(const char *path, const char *what, const char *watch, gm_status *st)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return gm_fail(st, GM_EIO, "%s: path too long", path), -1;
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (gm_mkdir_p(dir, st) != 0)
            return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return gm_fail(st, GM_EIO, "%s: cannot open the lock file: %s", path, strerror(errno)), -1;
    const int timeout = gm_lock_timeout();
    const double start = seconds();
    double since = start; /* the last sign of the holder's work */
    long long size = size_of(watch);
    int told = 0;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            gm_fail(st, GM_EIO, "%s: cannot lock: %s", path, strerror(errno));
            break;
        }
        const double now = seconds(), waited = now - start;
        const long long grown = size_of(watch);
        if (grown != size) {
            size = grown;
            since = now;
        }
        if (now - since >= timeout) {
            gm_fail(st, GM_EIO, "%s: still locked by another process after %d s with no sign of progress (%s); wait for it to finish, or "
                    "raise GM_LOCK_TIMEOUT", path, timeout, what);
            break;
        }
        if (!told && waited >= GM_LOCK_NOTICE_AFTER) {
            fprintf(stderr, "%s: waiting for %s: %s is locked by another process (giving up after %d s, "
                    "GM_LOCK_TIMEOUT)\n", program_invocation_short_name, what, path, timeout);
            told = 1;
        }
        usleep(20 * 1000);
    }
    close(fd);
    return -1;
}

void gm_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the only descriptor of the open file releases its flock */
}

int gm_lock_folder(const char *dir, gm_status *st)
{
    char path[4096], what[4096 + 16];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    const char *name = dir + n;
    while (name > dir && name[-1] != '/')
        name--;
    const int parent = name > dir ? (int)(name - dir) : 0;
    if (snprintf(path, sizeof path, "%.*s.%.*s.lock", parent, dir, (int)(dir + n - name), name) >= (int)sizeof path)
        return gm_fail(st, GM_EIO, "%s: path too long", dir), -1;
    snprintf(what, sizeof what, "%.*s/", (int)n, dir);
    return gm_lock(path, what, NULL, st);
}
