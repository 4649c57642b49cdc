/* A SOURCE into a checked snapshot: the one path every gen-model command takes to a model. */
#include "source.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "gm/cli.h"
#include "gm/lock.h"

int gm_revision_arg(const char *prog, const char *rev)
{
    const char *why = NULL;
    if (gm_revision_valid(rev, &why))
        return 0;
    gm_status st = {0}; /* gm_fail keeps the message one line, whatever rev holds */
    gm_fail(&st, GM_EUSAGE, "--revision: expected a branch, tag or commit, found %s%.200s%s%s", *rev ? "'" : "", rev,
            *rev ? "', which holds " : "", why);
    fprintf(stderr, "%s: %s\n", prog, st.msg);
    return -1;
}

int gm_exit_code(int code)
{
    switch (code) {
    case GM_OK: return GM_EXIT_OK;
    case GM_EUSAGE: return GM_EXIT_USAGE;
    case GM_EUNSUPPORTED: return GM_EXIT_REFUSED;
    case GM_EIO: return GM_EXIT_IO;
    case GM_ENET: return GM_EXIT_NETWORK;
    case GM_ELUA: return GM_EXIT_INTERNAL;
    default: return GM_EXIT_INPUT;
    }
}

int gm_command_start(void)
{
    signal(SIGXFSZ, SIG_IGN);
    gm_catch_interrupts();
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "gen-model: cannot initialise libcurl\n");
        return GM_EXIT_INTERNAL;
    }
    return 0;
}

void gm_command_end(void)
{
    curl_global_cleanup();
}

/*
** The Hub's settings, checked before the Hub is asked (hub.c reads them; empty is unset there, and
** here): HF_ENDPOINT an http:// or https:// URL with a host, HF_HUB_DOWNLOAD_TIMEOUT whole seconds
** above 0, as huggingface_hub reads it (int(), which takes no fraction). A bad one is GM_EUSAGE naming it.
** HF_ENDPOINT may hold a user name and password (https://user:secret@mirror): no message shows them.
*/
static int hub_settings_check(gm_status *st)
{
    const char *ep = getenv("HF_ENDPOINT"), *to = getenv("HF_HUB_DOWNLOAD_TIMEOUT");
    if (ep && *ep) {
        size_t scheme = strncasecmp(ep, "https://", 8) == 0 ? 8 : strncasecmp(ep, "http://", 7) == 0 ? 7 : 0;
        int bad = scheme == 0 || ep[scheme] == '\0' || ep[scheme] == '/';
        for (const unsigned char *c = (const unsigned char *)ep; *c && !bad; c++)
            bad = *c <= 0x20 || *c == 0x7F;
        /*
        ** An '@' after the host, or two before it: a password with an unencoded '/', '?', '#' or '@', which
        ** libcurl would not send as one. Messages hide only what comes before the host's '@', so the rest of
        ** such a password would show: this message shows none of the value.
        */
        const char *host = strstr(ep, "://") ? strstr(ep, "://") + 3 : ep, *at = strchr(host, '@');
        if (at && (strchr(at + 1, '@') || strcspn(host, "/?#") < (size_t)(at - host)))
            return gm_fail(st, GM_EUSAGE, "HF_ENDPOINT: expected a user name and password with any '/', '?', '#' "
                           "or '@' in them percent-encoded (%%2F, %%3F, %%23, %%40), and no '@' but the one before "
                           "the host; fix it");
        char shown[201];
        if (bad)
            return gm_fail(st, GM_EUSAGE, "HF_ENDPOINT: expected an http:// or https:// URL such as "
                           "https://huggingface.co, found '%s'; fix it or unset it",
                           gm_url_for_message(ep, shown, sizeof shown));
    }
    if (to && *to && gm_cli_count(to, 1, INT_MAX) < 0)
        return gm_fail(st, GM_EUSAGE, "HF_HUB_DOWNLOAD_TIMEOUT: expected a whole number of seconds above 0 "
                       "(as huggingface_hub reads it), found '%.200s'; fix it or unset it (default 10)", to);
    return 0;
}

int gm_sources_hub(gm_sources *s, gm_status *st)
{
    if (s->hub_ready)
        return 0;
    if (hub_settings_check(st) || gm_hub_init(&s->hub, st))
        return st->code;
    s->hub_ready = 1;
    return 0;
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int gm_source_read(gm_sources *s, const char *source, const char *repo, const gm_gen_options *opt,
                   gm_snapshot *snap, int *from_hub, gm_status *st)
{
    char cache_dir[PATH_MAX], heads[PATH_MAX] = "";
    gm_gen_options o = *opt;
    memset(snap, 0, sizeof *snap);
    *from_hub = !is_dir(source);
    if (*from_hub) {
        if (!gm_repo_id_valid(source) || !strchr(source, '/'))
            return gm_fail(st, GM_EUSAGE, "%s: expected a model folder or a Hub repo id ORG/NAME", source);
        if (gm_sources_hub(s, st))
            return st->code;
        if (gm_hub_fetch_config(&s->hub, source, s->revision ? s->revision : "main", cache_dir, sizeof cache_dir, st))
            return st->code;
        repo = source;
        source = cache_dir; /* .../models--org--name/snapshots/<commit>: repo and commit come from the path */
    }
    if (gm_snapshot_open_dir(snap, source, *from_hub ? NULL : repo, st))
        return st->code;
    /* the id chosen with --name is kept in the snapshot, so regeneration keeps it too */
    if (o.name) {
        free(snap->name);
        if (!(snap->name = strdup(o.name)))
            return gm_fail(st, GM_ENOMEM, "out of memory");
    }
    o.name = snap->name;
    /* gen-model's header copies of a cache snapshot live beside the cache, not in it (hub.h) */
    if (!*from_hub && snap->hf_cache && gm_heads_dir(snap->repo, snap->commit, heads, sizeof heads, st) == 0)
        gm_heads_migrate(source, heads);
    if (st->code || gm_check_config(snap, &o, NULL, st) ||
        (*from_hub && gm_hub_fetch_headers(&s->hub, repo, source, heads, sizeof heads, st)) ||
        gm_snapshot_read_headers(snap, source, heads[0] ? heads : NULL, st))
        gm_snapshot_free(snap);
    return st->code;
}

void gm_sources_report(const gm_sources *s)
{
    char endpoint[sizeof s->hub.endpoint];
    if (s->hub_ready && s->hub.requests)
        fprintf(stderr, "gen-model: %llu bytes in %u request%s from %s\n", (unsigned long long)s->hub.bytes,
                s->hub.requests, s->hub.requests == 1 ? "" : "s",
                gm_url_for_message(s->hub.endpoint, endpoint, sizeof endpoint));
}

void gm_sources_free(gm_sources *s)
{
    if (s->hub_ready)
        gm_hub_free(&s->hub);
    s->hub_ready = 0;
}
