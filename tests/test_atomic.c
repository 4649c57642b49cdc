/*
** Atomic output: an interrupted or failed gen-model leaves models/ exactly as
** it was. A model is generated once, its sources edited so that a new run
** would change them, and then gen-model is run again and interrupted
** (SIGINT/SIGTERM while the new folder is written, slowed by the
** GM_TEST_WRITE_DELAY_MS hook, and at random times) or starved of disk
** (RLIMIT_FSIZE). models/ must then hash as before, or, for an interrupt that
** came after the swap, exactly as a complete run leaves it: never a mixture,
** never a temporary folder left behind.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define SNAP GM_SHARED_DIR "/hub/Qwen/Qwen2-0.5B"

static char *work, *models, *before, *complete;

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* models/ with qwen2_0_5b/ in it, edited; `before` is its hash, `complete` the hash after a full run. */
static void setup(void)
{
    char path[4400], *argv[6], *err = NULL;
    work = tu_tmpdir();
    snprintf(path, sizeof path, "%s/models", work);
    models = strdup(path);
    argv[0] = GM_GEN_MODEL;
    argv[1] = SNAP;
    argv[2] = "--out";
    argv[3] = models;
    argv[4] = NULL;
    int rc = tu_run_argv(argv, NULL, &err, NULL, NULL);
    cr_assert_eq(rc, 0, "first run: %s", err);
    free(err);
    sh("echo '// edited' >> '%s/qwen2_0_5b/qwen2_0_5b_weights.c' && echo extra > '%s/qwen2_0_5b/snapshot/extra'", models,
       models);
    sh("cp -a '%s' '%s.orig'", models, models);
    before = tu_tree_hash(models);
    /* what a complete second run leaves */
    snprintf(path, sizeof path, "%s/full", work);
    sh("cp -a '%s' '%s'", models, path);
    argv[3] = path;
    rc = tu_run_argv(argv, NULL, &err, NULL, NULL);
    cr_assert_eq(rc, 0, "second run: %s", err);
    free(err);
    complete = tu_tree_hash(path);
    cr_assert_str_neq(before, complete, "a second run should change the edited model");
}

static void teardown(void)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", work);
    free(work);
    free(models);
    free(before);
    free(complete);
}

TestSuite(atomic, .init = setup, .fini = teardown, .timeout = 120);

/* Put models/ back as it was before the run. */
static void restore(void)
{
    char cmd[13500];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s.orig' '%s'", models, models, models);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* A temporary folder gen-model builds in models/ (".qwen2_0_5b.tmp-XXXXXX"). */
static int has_tmp(void)
{
    DIR *d = opendir(models);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        found |= strncmp(e->d_name, ".qwen2_0_5b.tmp-", 16) == 0;
    if (d)
        closedir(d);
    return found;
}

/*
** Start gen-model. A signal that lands between fork and exec must kill the
** child outright, not run the test framework's handlers in a copy of the
** test: they are held across the fork and reset to their defaults first.
*/
static pid_t spawn_ignoring(const char *delay_ms, int ignored);

static pid_t spawn(const char *delay_ms)
{
    return spawn_ignoring(delay_ms, 0);
}

/* spawn, with signal `ignored` (0: none) ignored from the start, as nohup ignores SIGHUP. */
static pid_t spawn_ignoring(const char *delay_ms, int ignored)
{
    sigset_t hold, old;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    sigprocmask(SIG_BLOCK, &hold, &old);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (ignored)
            signal(ignored, SIG_IGN);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        if (delay_ms)
            setenv("GM_TEST_WRITE_DELAY_MS", delay_ms, 1);
        execl(GM_GEN_MODEL, GM_GEN_MODEL, SNAP, "--out", models, (char *)NULL);
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    cr_assert(pid >= 0);
    return pid;
}

static void interrupt_while_writing(int sig)
{
    pid_t pid = spawn("100");
    int seen = 0;
    for (int i = 0; i < 2000 && !seen; i++) { /* up to 20 s for the temporary folder to appear */
        seen = has_tmp();
        if (!seen)
            usleep(10000);
    }
    cr_assert(seen, "gen-model never started writing");
    usleep(150000); /* a file or two into the write */
    cr_assert_eq(kill(pid, sig), 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 130, "expected exit 130 after signal %d, status 0x%x",
              sig, status);
    char *after = tu_tree_hash(models);
    cr_assert_str_eq(after, before, "models/ changed after signal %d during the write", sig);
    cr_assert(!has_tmp(), "a temporary folder was left behind");
    free(after);
}

Test(atomic, sigint_while_writing_leaves_models_as_it_was)
{
    interrupt_while_writing(SIGINT);
}

Test(atomic, sigterm_while_writing_leaves_models_as_it_was)
{
    interrupt_while_writing(SIGTERM);
}

Test(atomic, a_sighup_ignored_from_the_start_stays_ignored_as_under_nohup)
{
    pid_t pid = spawn_ignoring("100", SIGHUP);
    int seen = 0;
    for (int i = 0; i < 2000 && !seen; i++) {
        seen = has_tmp();
        if (!seen)
            usleep(10000);
    }
    cr_assert(seen, "gen-model never started writing");
    cr_assert_eq(kill(pid, SIGHUP), 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
    char *after = tu_tree_hash(models);
    cr_assert_str_eq(after, complete, "the run did not complete");
    free(after);
}

Test(atomic, interrupts_at_random_times_never_leave_a_mixture)
{
    srand((unsigned)time(NULL));
    int unchanged = 0, replaced = 0;
    for (int i = 0; i < 24; i++) {
        pid_t pid = spawn(NULL);
        usleep((useconds_t)(rand() % 150000)); /* a full run takes tens of ms */
        kill(pid, i % 2 ? SIGTERM : SIGINT);
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        char *after = tu_tree_hash(models);
        cr_assert(strcmp(after, before) == 0 || strcmp(after, complete) == 0,
                  "iteration %d: models/ is neither as it was nor as a complete run leaves it:\n%s\nbefore:\n%s", i,
                  after, before);
        cr_assert(!has_tmp(), "iteration %d: a temporary folder was left behind", i);
        if (strcmp(after, before) == 0) {
            unchanged++;
        } else {
            replaced++;
            restore();
        }
        free(after);
    }
    cr_log_info("random interrupts: %d left models/ as it was, %d came after the swap", unchanged, replaced);
}

Test(atomic, a_full_disk_leaves_models_as_it_was)
{
    /* RLIMIT_FSIZE stands in for a full disk: writes past it fail with EFBIG */
    static const char *const limits[] = {"--fsize=600", "--fsize=2000", "--fsize=20000", "--fsize=60000"};
    int failed = 0;
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        char *argv[8], *err = NULL;
        argv[0] = "/usr/bin/prlimit";
        argv[1] = (char *)limits[i];
        argv[2] = GM_GEN_MODEL;
        argv[3] = SNAP;
        argv[4] = "--out";
        argv[5] = models;
        argv[6] = NULL;
        int rc = tu_run_argv(argv, NULL, &err, NULL, NULL);
        char *after = tu_tree_hash(models);
        if (rc == 0) {
            cr_assert_str_eq(after, complete, "%s: a run that succeeded left a different tree", limits[i]);
            restore();
        } else {
            failed++;
            cr_assert_eq(rc, 4, "%s: exit %d, expected 4; stderr: %s", limits[i], rc, err);
            cr_assert_eq(tu_lines(err), 1, "%s: %s", limits[i], err);
            cr_assert(strstr(err, "File too large"), "%s: %s", limits[i], err);
            cr_assert_str_eq(after, before, "%s: models/ changed", limits[i]);
            cr_assert(!has_tmp(), "%s: a temporary folder was left behind", limits[i]);
        }
        free(after);
        free(err);
    }
    cr_assert_geq(failed, 2, "the file size limits never made a write fail");
}
