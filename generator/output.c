/* Atomic output: build in a temporary folder, swap it in with one rename. */
#include "output.h"

#include "gm/io.h"
#include "gm/lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* mkdir -p for the folders inside the temporary tree. */
/* mkdir -p for the folders that will hold file `path`. */
static int make_parents(const char *path, gm_status *st)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        return 0;
    if (snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir)
        return gm_fail(st, GM_EIO, "%s: path too long", path);
    return gm_mkdir_p(dir, st);
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/*
** A test hook: GM_TEST_WRITE_DELAY_MS=n sleeps n ms after each file written
** into the temporary folder, so the tests can interrupt a write in progress.
*/
static void test_delay(void)
{
    const char *ms = getenv("GM_TEST_WRITE_DELAY_MS");
    if (ms && *ms) {
        struct timespec ts = {atoi(ms) / 1000, (long)(atoi(ms) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Signal sig is held back and will be acted on when let through (Linux keeps even an ignored one pending). */
static int held(const sigset_t *pending, int sig)
{
    struct sigaction sa;
    return sigismember(pending, sig) && sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN;
}

/* An interrupt arrived (and is held) while the new folder was being built; one ignored (nohup) is none. */
static int interrupted(void)
{
    sigset_t pending;
    return sigpending(&pending) == 0 && (held(&pending, SIGINT) || held(&pending, SIGTERM) || held(&pending, SIGHUP));
}

/* A living document is carried over only from a plain file, never through a symlink. */
static int is_regular(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Fill the temporary folder tmp with everything models/<id>/ will hold. */
static int fill(const char *tmp, const char *final, const gm_gen_result *r,
                const gm_snapshot *snap, gm_status *st)
{
    char path[PATH_MAX], old[PATH_MAX];
    for (size_t i = 0; i < r->n_files; i++) {
        const gm_gen_file *f = &r->files[i];
        if (snprintf(path, sizeof path, "%s/%s", tmp, f->path) >= (int)sizeof path ||
            snprintf(old, sizeof old, "%s/%s", final, f->path) >= (int)sizeof old)
            return gm_fail(st, GM_EIO, "%s/%s: path too long", final, f->path);
        if (make_parents(path, st))
            return st->code;
        if (f->keep && is_regular(old)) {
            char *text = NULL;
            size_t len = 0;
            if (gm_read_file(old, 64u << 20, &text, &len, st))
                return st->code;
            gm_write_file(path, text, len, st);
            free(text);
        } else {
            gm_write_file(path, f->text, f->len, st);
        }
        if (st->code)
            return st->code;
        test_delay();
    }
    if (snprintf(path, sizeof path, "%s/snapshot", tmp) >= (int)sizeof path)
        return gm_fail(st, GM_EIO, "%s/snapshot: path too long", tmp);
    if (mkdir(path, 0755) != 0)
        return gm_fail(st, GM_EIO, "%s: cannot create folder: %s", path, strerror(errno));
    return gm_snapshot_write(snap, path, st);
}

static int write_model(const char *out_dir, const gm_gen_result *r,
                       const gm_snapshot *snap, gm_status *st);


/*
** SIGINT, SIGTERM and SIGHUP are held back while the folder is built and
** swapped in, and delivered once it is done or cleaned up: an interrupt never
** leaves a temporary folder or a half-replaced model behind. One that arrives
** before the swap cancels it (the temporary folder is removed, the old folder
** kept), so an interrupted run changes nothing.
*/
int gm_write_model(const char *out_dir, const gm_gen_result *r,
                   const gm_snapshot *snap, gm_status *st)
{
    sigset_t hold, old;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    sigaddset(&hold, SIGHUP);
    /*
    ** One writer of models/<id>/ at a time (phase0's records take the same
    ** lock, a flock on out_dir itself): never a mixture. The wait for it can
    ** be interrupted; the signals are held only once the folder is ours.
    */
    char final[PATH_MAX];
    if (gm_mkdir_p(out_dir, st) != 0)
        return st->code;
    if (snprintf(final, sizeof final, "%s/%s", out_dir, r->id) >= (int)sizeof final)
        return gm_fail(st, GM_EIO, "%s/%s: path too long", out_dir, r->id);
    const int lock = gm_lock_folder(final, st);
    if (lock < 0)
        return st->code;
    sigprocmask(SIG_BLOCK, &hold, &old);
    write_model(out_dir, r, snap, st);
    sigprocmask(SIG_SETMASK, &old, NULL);
    gm_unlock(lock);
    return st->code;
}

/*
** Temporary folders of this model that a killed run (SIGKILL, a crash, a
** power cut) left behind. Called with the model's lock held, so no live
** writer owns one.
*/
static void remove_stale(const char *out_dir, const char *id)
{
    char prefix[PATH_MAX], path[PATH_MAX];
    snprintf(prefix, sizeof prefix, ".%s.tmp-", id);
    DIR *d = opendir(out_dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
            snprintf(path, sizeof path, "%s/%s", out_dir, e->d_name) < (int)sizeof path)
            gm_remove_tree(path);
    closedir(d);
}

/* The lock file earlier versions kept beside models/<id>/ (.<id>.lock): the lock is now out_dir's own. */
static void remove_old_lock(const char *out_dir, const char *id)
{
    char path[PATH_MAX];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/.%s.lock", out_dir, id) < (int)sizeof path && lstat(path, &sb) == 0 &&
        S_ISREG(sb.st_mode) && sb.st_size == 0)
        unlink(path);
}

static int write_model(const char *out_dir, const gm_gen_result *r,
                       const gm_snapshot *snap, gm_status *st)
{
    char final[PATH_MAX], tmp[PATH_MAX];
    remove_stale(out_dir, r->id);
    remove_old_lock(out_dir, r->id);
    if (snprintf(final, sizeof final, "%s/%s", out_dir, r->id) >= (int)sizeof final ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp-XXXXXX", out_dir, r->id) >= (int)sizeof tmp)
        return gm_fail(st, GM_EIO, "%s/%s: path too long", out_dir, r->id);
    if (!mkdtemp(tmp))
        return gm_fail(st, GM_EIO, "%s: cannot create a temporary folder: %s", out_dir, strerror(errno));
    if (chmod(tmp, 0755) != 0) {
        gm_fail(st, GM_EIO, "%s: chmod failed: %s", tmp, strerror(errno));
        goto fail;
    }
    if (fill(tmp, final, r, snap, st))
        goto fail;
    /* an interrupt before the swap cancels it: the old folder stays as it was */
    if (interrupted()) {
        gm_fail(st, GM_EIO, "%s: interrupted; left as it was", final);
        goto fail;
    }

    if (!exists(final)) {
        if (rename(tmp, final) != 0) {
            gm_fail(st, GM_EIO, "%s: rename from %s failed: %s", final, tmp, strerror(errno));
            goto fail;
        }
        return 0;
    }
    /* swap old and new in one step; the old tree then sits at tmp */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) != 0) {
        gm_fail(st, GM_EIO, "%s: cannot replace it with %s: %s", final, tmp, strerror(errno));
        goto fail;
    }
    if (gm_remove_tree(tmp) != 0)
        fprintf(stderr, "gen-model: warning: %s: the previous version could not be removed: %s\n",
                tmp, strerror(errno));
    return 0;
fail:
    gm_remove_tree(tmp);
    return st->code;
}
