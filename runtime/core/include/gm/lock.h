/*
** Exclusive locks between processes: flock() on a lock file, as Python's
** filelock (and so huggingface_hub) takes them on Linux, so that gen-model,
** phase0 and the Python tools wait for one another on a shared folder.
*/
#ifndef GM_LOCK_H
#define GM_LOCK_H

#include <stdint.h>

#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* After this many seconds of waiting, one line on stderr says what is waited on. */
enum { GM_LOCK_NOTICE_AFTER = 3 };

/*
** Take an exclusive lock on path (created, with its folders, when missing).
** A held flock is a live holder (the kernel releases it when its holder dies,
** however it dies), so the wait lasts while it is held: after
** GM_LOCK_NOTICE_AFTER seconds one line on stderr says what is waited on
** (what: "the blob ...", "models/x/") and how far the holder has got, when
** watch (NULL: none) names the file it writes (a download's
** <blob>.incomplete, total bytes when whole; 0: unknown); the line is redrawn
** in place on a terminal and repeated every 30 s on a pipe. Only when the
** user sets GM_LOCK_TIMEOUT does a bound apply: after that many seconds (0:
** at once) the wait fails with GM_EIO and one line. An interrupt caught by
** gm_catch_interrupts ends the wait too. Returns the lock's descriptor
** (>= 0), or -1 with st set. The lock lasts until gm_unlock or the process
** ends, however it ends: a killed holder leaves no stale lock.
*/
int gm_lock(const char *path, const char *what, const char *watch, uint64_t total, gm_status *st);

/*
** The lock of a folder that is replaced whole or edited in place
** (models/<id>/): flock on the folder that holds it (models/), opened
** read-only. That folder exists before the first scaffold and is never
** replaced, so the lock outlives every swap of models/<id>/ and leaves no
** file behind; one lock per --out folder, held for the milliseconds a
** scaffold writes or phase0 records. Waits as gm_lock does.
*/
int gm_lock_folder(const char *dir, gm_status *st);

/* Release a lock from gm_lock (fd < 0: nothing). The lock file stays, as filelock leaves it. */
void gm_unlock(int fd);

/* The bound gm_lock waits for: GM_LOCK_TIMEOUT, a whole number of seconds; -1 when unset (none), -2 when not one. */
int gm_lock_timeout(void);

/* GM_LOCK_TIMEOUT unset or a bound; else GM_EUSAGE and one line (gm_lock fails so too): for a program's start. */
int gm_lock_check_env(gm_status *st);

/*
** SIGINT, SIGTERM and SIGHUP set a flag instead of ending the process (no
** SA_RESTART), so that a long step (a transfer, a lock wait) can stop,
** leave what the next run resumes, release its locks and say so. A signal
** ignored when the program started (nohup's SIGHUP) stays ignored.
** gm_interrupted() is the signal that arrived, or 0 (also when never caught).
*/
void gm_catch_interrupts(void);
int gm_interrupted(void);

#ifdef __cplusplus
}
#endif

#endif
