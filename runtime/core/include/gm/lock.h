/*
** Exclusive locks between processes: flock() on a lock file, as Python's
** filelock (and so huggingface_hub) takes them on Linux, so that gen-model,
** phase0 and the Python tools wait for one another on a shared folder.
*/
#ifndef GM_LOCK_H
#define GM_LOCK_H

#include "gm/status.h"

/* How long a lock is waited for, in seconds, unless GM_LOCK_TIMEOUT says otherwise. */
enum { GM_LOCK_TIMEOUT_DEFAULT = 600, GM_LOCK_NOTICE_AFTER = 3 };

/*
** Take an exclusive lock on path (created, with its folders, when missing).
** While another process holds it, wait: after GM_LOCK_NOTICE_AFTER seconds
** one line on stderr says what is waited on (what: "the blob ...", "models/x/");
** after GM_LOCK_TIMEOUT seconds (default GM_LOCK_TIMEOUT_DEFAULT; 0: fail at
** once) fail with GM_EIO and one line. watch (NULL: none) is a file whose
** growth shows that the holder is at work, a download's <blob>.incomplete:
** the bound then counts from its last growth, so that a long download is
** waited for to its end. Returns the lock's descriptor (>= 0),
** or -1 with st set. The lock lasts until gm_unlock or the process ends,
** however it ends: a killed holder leaves no stale lock.
*/
int gm_lock(const char *path, const char *what, const char *watch, gm_status *st);

/*
** The lock of a folder that is replaced whole or edited in place (models/<id>/):
** gm_lock on its sibling .<name>.lock, which outlives any swap of the folder.
*/
int gm_lock_folder(const char *dir, gm_status *st);

/* Release a lock from gm_lock (fd < 0: nothing). The lock file stays, as filelock leaves it. */
void gm_unlock(int fd);

/* The bound gm_lock waits for: GM_LOCK_TIMEOUT when it is a whole number of seconds, else the default. */
int gm_lock_timeout(void);

#endif
