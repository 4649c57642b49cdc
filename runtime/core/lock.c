/* Inter-process locks on lock files; see gm/lock.h. */
#include "gm/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gm/io.h"

static volatile sig_atomic_t caught;

static void on_interrupt(int sig)
{
    caught = sig;
}

void gm_catch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt; /* no SA_RESTART: a blocking call returns EINTR */
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction was;
        /* one ignored when we started stays ignored: nohup's SIGHUP, a shell's background SIGINT */
        if (sigaction(sigs[i], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

int gm_interrupted(void)
{
    return caught;
}

enum { TIMEOUT_MAX = 86400 * 365 };

int gm_lock_timeout(void)
{
    const char *s = getenv("GM_LOCK_TIMEOUT");
    if (s == NULL || *s == '\0')
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s < '0' || *s > '9' || errno != 0 || *end != '\0' || v > TIMEOUT_MAX)
        return -2;
    return (int)v;
}

int gm_lock_check_env(gm_status *st)
{
    if (gm_lock_timeout() == -2)
        return gm_fail(st, GM_EUSAGE, "GM_LOCK_TIMEOUT: expected a whole number of seconds in [0, %d], found '%s'",
                       TIMEOUT_MAX, getenv("GM_LOCK_TIMEOUT"));
    return 0;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* How far the holder has got, from the size of the file it writes: "; it has 3.1 of 9.8 MB so far". */
static void progress(const char *watch, uint64_t total, char *out, size_t size)
{
    struct stat sb;
    out[0] = '\0';
    if (!watch || stat(watch, &sb) != 0)
        return;
    if (total)
        snprintf(out, size, "; it has written %.1f of %.1f MB so far", (double)sb.st_size / 1e6, (double)total / 1e6);
    else
        snprintf(out, size, "; it has written %.1f MB so far", (double)sb.st_size / 1e6);
}

/* Wait for an exclusive flock on fd (open on path); the fd, or -1 with st set (fd closed). */
static int wait_lock(int fd, const char *path, const char *what, const char *watch, uint64_t total, gm_status *st)
{
    const int timeout = gm_lock_timeout(), tty = isatty(STDERR_FILENO);
    const double start = seconds();
    if (gm_lock_check_env(st)) { /* a bound mistyped is not no bound: "2s" waited for ever */
        close(fd);
        return -1;
    }
    double told = 0; /* when the last line was drawn; 0: none yet */
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (told && tty)
                fputc('\n', stderr);
            return fd;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) {
            gm_fail(st, GM_EIO, "%s: cannot lock: %s", path, strerror(errno));
            break;
        }
        if (caught) {
            if (told && tty)
                fputc('\n', stderr);
            gm_fail(st, GM_EIO, "interrupted while waiting for %s (%s is locked by another process); nothing was "
                    "changed", what, path);
            break;
        }
        const double now = seconds(), waited = now - start;
        if (timeout >= 0 && waited >= timeout) {
            if (told && tty)
                fputc('\n', stderr);
            gm_fail(st, GM_EIO, "%s: still locked by another process after %d s (%s); wait for it to finish, or "
                    "raise or unset GM_LOCK_TIMEOUT", path, timeout, what);
            break;
        }
        if (waited >= GM_LOCK_NOTICE_AFTER && (!told || now - told >= (tty ? 1.0 : 30.0))) {
            char far[128], bound[96];
            progress(watch, total, far, sizeof far);
            if (timeout >= 0)
                snprintf(bound, sizeof bound, "giving up after %d s, GM_LOCK_TIMEOUT", timeout);
            else
                snprintf(bound, sizeof bound, "waiting while it is held; GM_LOCK_TIMEOUT sets a bound");
            fprintf(stderr, "%s%s: waiting for %s: %s is locked by another process%s (%.0f s; %s)%s",
                    tty ? "\r" : "", program_invocation_short_name, what, path, far, waited, bound,
                    tty ? "\033[K" : "\n");
            fflush(stderr);
            told = now;
        }
        usleep(20 * 1000);
    }
    close(fd);
    return -1;
}

int gm_lock(const char *path, const char *what, const char *watch, uint64_t total, gm_status *st)
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
    return wait_lock(fd, path, what, watch, total, st);
}

void gm_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the only descriptor of the open file releases its flock */
}

int gm_lock_folder(const char *dir, gm_status *st)
{
    char parent[4096], what[4096 + 16];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    const char *name = dir + n;
    while (name > dir && name[-1] != '/')
        name--;
    if (name == dir)
        snprintf(parent, sizeof parent, ".");
    else if (snprintf(parent, sizeof parent, "%.*s", name - dir > 1 ? (int)(name - dir - 1) : 1, dir) >=
             (int)sizeof parent)
        return gm_fail(st, GM_EIO, "%s: path too long", dir), -1;
    snprintf(what, sizeof what, "%.*s/", (int)n, dir);
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return gm_fail(st, GM_EIO, "%s: cannot open the folder to lock %s: %s", parent, what, strerror(errno)), -1;
    return wait_lock(fd, parent, what, NULL, 0, st);
}
