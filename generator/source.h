/*
** What gen-model's commands share: a SOURCE on the command line (a model
** folder, a Hugging Face cache snapshot or a Hub repo id) read into a checked
** snapshot, and the exit status a gm_status becomes.
*/
#ifndef GM_SOURCE_H
#define GM_SOURCE_H

#include "gm/status.h"
#include "hub.h"
#include "lua_host.h"
#include "snapshot.h"

enum {
    GM_EXIT_OK = 0,
    GM_EXIT_INPUT = 1,        /* malformed or inconsistent input: config, headers, tensors */
    GM_EXIT_USAGE = 2,        /* bad command line */
    GM_EXIT_REFUSED = 3,      /* the model is outside gen-model's scope */
    GM_EXIT_IO = 4,           /* a file could not be read or written */
    GM_EXIT_NETWORK = 5,      /* the Hub could not be reached or refused */
    GM_EXIT_INTERNAL = 70,    /* a bug in gen-model or a template */
    GM_EXIT_INTERRUPTED = 130 /* SIGINT, SIGTERM or SIGHUP: stopped, nothing half-written */
};

/* The exit status of a gm_status code. */
int gm_exit_code(int code);

/* --revision REV as a command takes it: not empty (a typo, not a revision the Hub lacks); else one line from prog, -1. */
int gm_revision_arg(const char *prog, const char *rev);

/*
** What a command that fetches or writes models sets up first: SIGXFSZ ignored (past
** RLIMIT_FSIZE a write fails with EFBIG and is cleaned up, instead of killing us mid-write),
** Ctrl-C, SIGTERM and SIGHUP caught (they stop transfers and lock waits: gm_interrupted()), and
** libcurl. 0, or one line said and GM_EXIT_INTERNAL; gm_command_end() undoes it.
*/
int gm_command_start(void);
void gm_command_end(void);

/* The Hub, set up on first use by the sources that need it. */
typedef struct gm_sources {
    gm_hub hub;
    int hub_ready;       /* gm_hub_init has run */
    const char *revision; /* of a Hub repo id: a branch, tag or commit */
} gm_sources;

/*
** Set up s->hub when it is not yet: HF_ENDPOINT and HF_HUB_DOWNLOAD_TIMEOUT checked first (a bad
** one is GM_EUSAGE, its message naming it, what was expected and what was found), then gm_hub_init.
*/
int gm_sources_hub(gm_sources *s, gm_status *st);

/*
** Read source into *snap, ready for gm_generate: a folder (repo, when not
** NULL, names its Hub repo) or, when no folder of that name exists, a Hub repo
** id ORG/NAME whose config.json and headers are fetched into the cache. The
** scope and the Config are checked before any header is read or fetched (a
** refusal is GM_EUNSUPPORTED). opt->name, when set, becomes the snapshot's
** id; *from_hub says whether the Hub was asked. On failure *snap is empty.
*/
int gm_source_read(gm_sources *s, const char *source, const char *repo, const gm_gen_options *opt,
                   gm_snapshot *snap, int *from_hub, gm_status *st);

/* "gen-model: N bytes in M requests from ENDPOINT" on stderr, when the Hub was asked (after a success). */
void gm_sources_report(const gm_sources *s);

void gm_sources_free(gm_sources *s);

#endif
