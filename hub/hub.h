/*
** The Hugging Face Hub, over libcurl, and its cache, shared with the Python
** tools (huggingface_hub): what gen-model fetches lands in
** $HF_HUB_CACHE/models--org--name/{refs,blobs,snapshots}/ exactly where
** they look for it, and what they fetched is used without network.
**
** Scaffolding reads kilobytes: config.json, the index, and each safetensors
** header through HTTP Range requests. The header copies are gen-model's own,
** not the repo's files, so they are kept out of the shared snapshot (which
** holds only the repo's files, as every other tool expects) in the assets
** folder huggingface_hub gives downstream tools for their own files:
** $HF_ASSETS_CACHE (default $HF_HOME/assets)/gen-model/org--name/headers/
** <commit>/<file>.head. No tool of huggingface_hub looks there (scan_cache_dir
** and the checksum verification read $HF_HUB_CACHE); a cache snapshot folder
** given as SOURCE finds its headers there too.
**
** Environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN, then
** HUGGING_FACE_HUB_TOKEN, then the file HF_TOKEN_PATH or $HF_HOME/token;
** HF_HUB_CACHE (default $HF_HOME/hub, HF_HOME default ~/.cache/huggingface);
** HF_ASSETS_CACHE (default $HF_HOME/assets);
** HF_HUB_OFFLINE=1 (no network at all); HF_HUB_DOWNLOAD_TIMEOUT (seconds a
** transfer may stall, default 10); HF_HUB_DISABLE_PROGRESS_BARS=1 (no
** download progress, on a terminal or not); GM_HUB_RETRY_MS (first retry
** delay, default 500); GM_HUB_PROGRESS_MS (the time between two progress
** lines of a file when stderr is not a terminal, default 10000), for the
** tests only, which cannot wait 10 s for a line.
*/
#ifndef GM_HUB_H
#define GM_HUB_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "gm/status.h"

/*
** A download's progress on stderr: a bar redrawn with \r on a terminal; elsewhere (a CI job's log, a script's
** 2>file), where each \r would pile every redraw into one line, a plain line now and then; nothing with
** huggingface_hub's HF_HUB_DISABLE_PROGRESS_BARS=1.
*/
enum { GM_PROGRESS_NONE, GM_PROGRESS_BAR, GM_PROGRESS_LINES };

typedef struct gm_hub {
    char endpoint[1024];  /* no trailing '/'; may hold user:password@, so messages show gm_url_for_message's */
    char *token;          /* NULL when none; sent only to the endpoint's host, never printed */
    const char *token_source; /* "HF_TOKEN", a file path, ...: for messages */
    char cache[PATH_MAX];
    char assets[PATH_MAX]; /* $HF_ASSETS_CACHE/gen-model */
    int offline;
    long stall_seconds;
    long retry_ms;
    int retries;          /* further attempts after a retryable failure */
    int progress;         /* how downloads show their progress: GM_PROGRESS_* */
    long progress_ms;     /* GM_PROGRESS_LINES: at most one line a file this often (and one when it is complete) */
    uint64_t bytes;       /* body bytes received, all requests */
    unsigned requests;    /* HTTP requests made */
} gm_hub;

/*
** url (or HF_ENDPOINT) as a message or a summary shows it, into buf, which is
** returned: without its query string and fragment (a CDN's URL carries a
** signature), and with the user name and password before its host's '@'
** replaced by "***", scheme, host, port and path kept, since an HF_ENDPOINT
** of https://user:secret@mirror.example.com is how a private mirror is
** reached. Every URL gen-model prints goes through it; the requests keep the
** credentials (libcurl sends them from the URL).
*/
const char *gm_url_for_message(const char *url, char *buf, size_t size);

/* Read the environment; call once after curl_global_init. */
int gm_hub_init(gm_hub *h, gm_status *st);
void gm_hub_free(gm_hub *h);

/*
** Resolve revision (a branch, tag or commit) of repo and make sure the cache
** snapshot holds config.json. Online, the commit is what the Hub reports in
** X-Repo-Commit and refs/<revision> is updated; offline (HF_HUB_OFFLINE=1),
** refs/<revision> decides. *dir receives the snapshot folder
** ($HF_HUB_CACHE/models--org--name/snapshots/<commit>), from which header
** copies of earlier versions are moved out (gm_heads_migrate).
*/
int gm_hub_fetch_config(gm_hub *h, const char *repo, const char *revision,
                        char *dir, size_t dir_size, gm_status *st);

/*
** Add what the tensor check needs: model.safetensors's header, or
** model.safetensors.index.json (into the snapshot) and each shard's header
** (fetched in parallel), each as <file>.head in *heads (the snapshot's
** headers folder, see gm_heads_dir) unless the snapshot has the file or
** *heads its header. Tensor data is never downloaded.
*/
int gm_hub_fetch_headers(gm_hub *h, const char *repo, const char *dir,
                         char *heads, size_t heads_size, gm_status *st);

/*
** The folder of gen-model's header copies of repo at commit:
** $HF_ASSETS_CACHE (default $HF_HOME/assets)/gen-model/org--name/headers/<commit>.
*/
int gm_heads_dir(const char *repo, const char *commit, char *out, size_t size, gm_status *st);

/*
** Move the <file>.safetensors.head entries an earlier gen-model left in the
** cache snapshot dir into heads, and remove their blobs when no snapshot
** links to them any more, so that the snapshot holds only the repo's files.
** Best effort: an entry that cannot be moved stays and is read where it is.
** Returns how many were moved. gm_hub_fetch_config calls it.
*/
int gm_heads_migrate(const char *dir, const char *heads);

/*
** Download the full safetensors files (and config.json, the index, and
** tokenizer.json with tokenizer_config.json when the repo has them) into the
** cache: resumed from a partial <blob>.incomplete with Range, verified
** against the sha256 in X-Linked-Etag, and only then renamed into place.
** *dir receives the snapshot folder, which then is a complete model folder.
*/
int gm_hub_download(gm_hub *h, const char *repo, const char *revision,
                    char *dir, size_t dir_size, gm_status *st);

/* What the Hub answered, judged (hub.c; the fuzz harness calls them on hostile answers too). */
struct gm_xfer;

/* A non-2xx answer as the one line a user can act on (X-Error-Code, the status). */
int gm_hub_error(const gm_hub *h, const char *repo, const char *revision, const char *file,
                 const struct gm_xfer *x, gm_status *st);

/* A ranged answer: 206 with a Content-Range from start, or a 200 that on_body cut short. */
int gm_hub_check_range(const struct gm_xfer *x, uint64_t start, gm_status *st);

#endif
