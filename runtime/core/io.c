/* Whole files in, files out atomically. See gm/io.h. */
#include "gm/io.h"

#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gm_open_regular(const char *path, struct stat *sb, gm_status *st)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO opens at once, to be refused below */
    if (fd < 0 && errno == ENOENT && gm_dangling(path, st)) {
        return -1;
    } else if (fd < 0 || fstat(fd, sb) != 0) {
        gm_fail(st, GM_EIO, "%s: cannot open: %s", path, strerror(errno));
    } else if (!S_ISREG(sb->st_mode)) {
        gm_fail(st, GM_EIO, "%s: expected a regular file", path);
    } else {
        return fd; /* (O_NONBLOCK changes nothing for a regular file's reads) */
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

int gm_dangling(const char *path, gm_status *st)
{
    char target[4096];
    struct stat sb;
    const ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0 || stat(path, &sb) == 0 || errno != ENOENT) /* a loop or a folder it may not read is no deleted blob */
        return 0;
    target[n] = '\0';
    return gm_fail(st, GM_EMISSING, "%s: a symlink to %s, which is not there (in a Hugging Face cache, a deleted "
                   "blob: fetch the repo again)", path, target);
}

int gm_read_file(const char *path, size_t max, char **data, size_t *len,
                 gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    *data = NULL;
    *len = 0;
    gm_status_clear(st);
    struct stat sb;
    const int fd = gm_open_regular(path, &sb, st);
    if (fd < 0)
        return st->code;
    char *buf = NULL;
    if ((uint64_t)sb.st_size > max) {
        gm_fail(st, GM_EFORMAT, "%s: expected at most %zu bytes, found %lld", path, max,
                (long long)sb.st_size);
        goto out;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    buf = malloc(n + 1);
    if (!buf) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory for %zu bytes", path, n);
        goto out;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            gm_fail(st, GM_EIO, "%s: read failed after %zu of %zu bytes: %s", path, got, n,
                    r < 0 ? strerror(errno) : "unexpected end of file");
            goto out;
        }
        got += (size_t)r;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return st->code;
}

int gm_tmp_name(char *out, size_t size, const char *path)
{
    static unsigned serial;
    const int n = snprintf(out, size, "%s.%ld.%u.tmp", path, (long)getpid(),
                           __atomic_fetch_add(&serial, 1u, __ATOMIC_RELAXED));
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

int gm_write_parts(const char *path, const gm_part *parts, size_t n_parts, gm_status *st)
{
    char tmp[4096]; /* (messages name path, the file the caller asked for: the temporary is gone after a failure) */
    if (gm_tmp_name(tmp, sizeof tmp, path) != 0)
        return gm_fail(st, GM_EIO, "%s: path too long", path);
    /* truncated, not exclusive: a file of this name is a dead process's (one that had our pid) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return gm_fail(st, GM_EIO, "%s: cannot create: %s", path, strerror(errno));
    for (size_t i = 0; i < n_parts; i++) {
        const char *p = parts[i].data;
        size_t left = parts[i].len;
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                gm_fail(st, GM_EIO, "%s: write failed: %s", path, strerror(errno));
                goto fail;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (fsync(fd) != 0) {
        gm_fail(st, GM_EIO, "%s: fsync failed: %s", path, strerror(errno));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        gm_fail(st, GM_EIO, "%s: close failed: %s", path, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        gm_fail(st, GM_EIO, "%s: rename from %s failed: %s", path, tmp, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return st->code;
}

int gm_write_file(const char *path, const void *data, size_t len, gm_status *st)
{
    const gm_part one = {data, len};
    return gm_write_parts(path, &one, 1, st);
}

int gm_mkdir_p(const char *dir, gm_status *st)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s/", dir) >= (int)sizeof buf)
        return gm_fail(st, GM_EIO, "%s: path too long", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return gm_fail(st, GM_EIO, "%s: cannot create folder: %s", buf, strerror(errno));
        *p = '/';
    }
    return 0;
}

/* nftw's callback: each entry, children first */
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int gm_remove_tree(const char *path)
{
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The folder above p, in place: "a/b/" and "a/b" give "a", "b" gives ".", "/b" gives "/". */
static void parent_of(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    char *slash = strrchr(p, '/');
    if (!slash)
        strcpy(p, ".");
    else
        slash[slash == p] = '\0';
}

/*
** An entry made in dir as the work will make its first one, a folder
** (mkdir) or a file, and taken away again: 0, or -1 with errno. The
** permission bits access() reads are not all: root passes them where the
** file system still refuses (/proc, a FUSE or network mount's own rules).
** Where the file system makes unnamed files (O_TMPFILE: ext4, xfs, btrfs,
** tmpfs) one of those is the try, so a run killed meanwhile leaves no name
** behind; elsewhere a hidden name, removed at once.
*/
static int try_entry(const char *dir, int folder)
{
    const int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0)
        return close(fd), 0;
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return -1; /* the file system would make it but refuses: read-only, no room, not allowed */
    char base[4200], tmp[4300];
    if (snprintf(base, sizeof base, "%s/.gm-check", dir) >= (int)sizeof base) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (int tries = 0; tries < 16; tries++) { /* (a name taken is a killed run's: the next serial) */
        if (gm_tmp_name(tmp, sizeof tmp, base) != 0) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (folder) {
            if (mkdir(tmp, 0700) == 0)
                return rmdir(tmp);
        } else {
            const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd >= 0) {
                close(fd);
                return unlink(tmp);
            }
        }
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

int gm_check_output(const char *opt, const char *path, int as_dir, gm_status *st)
{
    struct stat sb;
    char dir[4096];
    if (!*path || snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return gm_fail(st, GM_EIO, "%s '%s': expected a path of 1 to %zu bytes", opt, path, sizeof dir - 1);
    const int exists = stat(path, &sb) == 0;
    if (exists && !S_ISDIR(sb.st_mode) == !!as_dir)
        return gm_fail(st, GM_EIO, "%s %s: expected %s, found %s", opt, path, as_dir ? "a folder" : "a file",
                       as_dir ? "a file" : "a folder");
    /* the folder written in: path, a folder that exists, or else the nearest one above it that exists */
    int up = 0; /* how many folders above path it is */
    for (int here = exists && as_dir; !here;) {
        const int top = strcmp(dir, ".") == 0 || strcmp(dir, "/") == 0;
        parent_of(dir);
        up++;
        here = stat(dir, &sb) == 0;
        if (!here && (errno != ENOENT || top))
            return gm_fail(st, GM_EIO, "%s %s: %s: %s", opt, path, dir, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return gm_fail(st, GM_EIO, "%s %s: %s is a file, expected a folder", opt, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return gm_fail(st, GM_EIO, "%s %s: cannot write in %s: %s", opt, path, dir, strerror(errno));
    /* the first thing the work makes there: the file (path's own folder) or else a folder */
    const int folder = up > (as_dir ? 0 : 1);
    if (try_entry(dir, folder) != 0)
        return gm_fail(st, GM_EIO, "%s %s: cannot %s in %s: %s", opt, path, folder ? "make a folder" : "write a file",
                       dir, strerror(errno));
    return 0;
}
