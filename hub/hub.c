/* The Hub client and the Hugging Face cache layout. See hub.h. */
#include "hub.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <pwd.h>

#include <openssl/evp.h>

#include "gm/lock.h"
#include "gm/safetensors.h"
#include "http.h"
#include "snapshot.h"

#define HEADER_PROBE 100001u /* huggingface_hub's first Range: bytes=0-100000 */

/*
** snprintf for paths: a path that does not fit becomes "" (every later file
** operation on it then fails with a message), never a shorter, wrong path.
*/
__attribute__((format(printf, 3, 4)))
static int pathf(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* environment */

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int env_true(const char *name)
{
    const char *v = env(name);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

/* The first line of a token file, trimmed; NULL when absent or empty. */
static char *read_token_file(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    gm_status ignore = {0};
    if (gm_read_file(path, 64u << 10, &text, &len, &ignore))
        return NULL;
    char *s = text;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strcspn(s, " \t\r\n");
    s[n] = '\0';
    char *tok = n ? strdup(s) : NULL;
    free(text);
    return tok;
}

/*
** A token from the environment as huggingface_hub's _clean_token makes it:
** every CR and LF removed, then the ends stripped of whitespace; NULL when
** nothing is left. (A CR LF inside one added a header of its own to every
** request.)
*/
static char *clean_token(const char *value)
{
    char *tok = malloc(strlen(value) + 1), *o = tok;
    if (!tok)
        return NULL;
    for (const char *p = value; *p; p++)
        if (*p != '\r' && *p != '\n')
            *o++ = *p;
    *o = '\0';
    const char *a = tok;
    while (*a == ' ' || *a == '\t' || *a == '\v' || *a == '\f')
        a++;
    size_t n = strlen(a);
    while (n && (a[n - 1] == ' ' || a[n - 1] == '\t' || a[n - 1] == '\v' || a[n - 1] == '\f'))
        n--;
    memmove(tok, a, n);
    tok[n] = '\0';
    if (!n) {
        free(tok);
        return NULL;
    }
    return tok;
}

/* The home folder of "~" (HOME, else the password entry's) or of "~user"; NULL when there is none. */
static const char *home_of(const char *user, size_t n)
{
    if (n == 0 && env("HOME"))
        return env("HOME");
    char name[256];
    if (n >= sizeof name)
        return NULL;
    memcpy(name, user, n);
    name[n] = '\0';
    const struct passwd *pw = n ? getpwnam(name) : getpwuid(getuid());
    return pw ? pw->pw_dir : NULL;
}

/*
** A path from the environment as huggingface_hub reads one: Python's
** os.path.expandvars(os.path.expanduser(v)). A leading ~ or ~user becomes
** that home folder (left as it is when there is none); then each $NAME or
** ${NAME} that is set becomes its value (an unset one stays as written, and
** what a value brings in is not expanded again).
*/
static int py_path(const char *v, char *out, size_t size)
{
    char user[PATH_MAX];
    if (v[0] == '~') {
        const size_t n = strcspn(v + 1, "/");
        const char *home = home_of(v + 1, n);
        if (home) {
            size_t h = strlen(home);
            while (h > 0 && home[h - 1] == '/')
                h--;
            if (pathf(user, sizeof user, "%.*s%s", (int)h, home, v + 1 + n))
                return -1;
            if (!user[0])
                strcpy(user, "/");
            v = user;
        }
    }
    size_t k = 0;
    for (const char *p = v; *p;) {
        const char *name = p + 1, *value = NULL;
        size_t n = 0, skip = 0;
        if (p[0] == '$' && p[1] == '{' && strchr(p + 2, '}')) {
            name = p + 2, n = (size_t)(strchr(p + 2, '}') - name), skip = n + 3;
        } else if (p[0] == '$') {
            n = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"), skip = n + 1;
        }
        if (n > 0 && n < 256) {
            char var[256];
            memcpy(var, name, n);
            var[n] = '\0';
            value = getenv(var);
        }
        const char *piece = value ? value : p;
        const size_t len = value ? strlen(value) : skip ? skip : 1;
        if (k + len >= size)
            return -1;
        memcpy(out + k, piece, len);
        k += len;
        p += skip ? skip : 1;
    }
    out[k] = '\0';
    return 0;
}

/* An environment path (py_path) into out, or one line naming the variable. */
static int env_path(const char *var, const char *v, char *out, size_t size, gm_status *st)
{
    if (py_path(v, out, size) != 0)
        return gm_fail(st, GM_EUSAGE, "%s: expected a path shorter than %zu bytes once expanded", var, size);
    return 0;
}

/*
** A place huggingface_hub reads from the environment: $var, else the older
** $legacy (NULL: none), else home/sub; expanded as py_path does, with an
** error naming the variable the path came from.
*/
static int env_place(const char *var, const char *legacy, const char *home, const char *sub, char *out, size_t size,
                     gm_status *st)
{
    char raw[PATH_MAX];
    const char *from = env(var) ? var : legacy && env(legacy) ? legacy : "HF_HOME";
    const int cut = strcmp(from, "HF_HOME") != 0 ? pathf(raw, sizeof raw, "%s", env(from))
                                                 : pathf(raw, sizeof raw, "%s/%s", home, sub);
    if (cut)
        return gm_fail(st, GM_EUSAGE, "%s: too long a path", from);
    return env_path(from, raw, out, size, st);
}

/* $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface; ~ and $VAR expanded as huggingface_hub does. */
static int hf_home(char *home, size_t size, gm_status *st)
{
    char raw[PATH_MAX];
    if (env("HF_HOME"))
        pathf(raw, sizeof raw, "%s", env("HF_HOME"));
    else if (env("XDG_CACHE_HOME"))
        pathf(raw, sizeof raw, "%s/huggingface", env("XDG_CACHE_HOME"));
    else if (home_of("", 0))
        pathf(raw, sizeof raw, "%s/.cache/huggingface", home_of("", 0));
    else
        return gm_fail(st, GM_EUSAGE, "cannot place the Hugging Face cache: set HF_HOME or HF_HUB_CACHE");
    return env_path("HF_HOME", raw, home, size, st);
}

/* org/name as one folder name, org--name, as huggingface_hub flattens a repo id. */
static void flat_repo(const char *repo, char *out, size_t size)
{
    size_t k = 0;
    for (const char *p = repo; *p && k + 3 < size; p++) {
        if (*p == '/') {
            out[k++] = '-';
            out[k++] = '-';
        } else {
            out[k++] = *p;
        }
    }
    out[k] = '\0';
}

/*
** The assets folder of gen-model: $HF_ASSETS_CACHE (else the older
** HUGGINGFACE_ASSETS_CACHE, else $HF_HOME/assets)/gen-model, expanded as
** huggingface_hub expands it.
*/
static int assets_root(const char *home, char *out, size_t size, gm_status *st)
{
    char assets[PATH_MAX];
    if (env_place("HF_ASSETS_CACHE", "HUGGINGFACE_ASSETS_CACHE", home, "assets", assets, sizeof assets, st))
        return st->code;
    return pathf(out, size, "%s/gen-model", assets) ? gm_fail(st, GM_EUSAGE, "%s/gen-model: too long a path", assets)
                                                    : 0;
}

static void heads_of(const char *assets, const char *repo, const char *commit, char *out, size_t size)
{
    char flat[512];
    flat_repo(repo, flat, sizeof flat);
    pathf(out, size, "%s/%s/headers/%s", assets, flat, commit);
}

int gm_heads_dir(const char *repo, const char *commit, char *out, size_t size, gm_status *st)
{
    char home[PATH_MAX], assets[PATH_MAX];
    if (hf_home(home, sizeof home, st) || assets_root(home, assets, sizeof assets, st))
        return st->code;
    heads_of(assets, repo, commit, out, size);
    return 0;
}

int gm_hub_init(gm_hub *h, gm_status *st)
{
    memset(h, 0, sizeof *h);
    const char *ep = env("HF_ENDPOINT");
    snprintf(h->endpoint, sizeof h->endpoint, "%s", ep ? ep : "https://huggingface.co");
    size_t n = strlen(h->endpoint);
    while (n > 0 && h->endpoint[n - 1] == '/')
        h->endpoint[--n] = '\0';

    char home[PATH_MAX];
    if (hf_home(home, sizeof home, st))
        return st->code;
    if (env_place("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", home, "hub", h->cache, sizeof h->cache, st) ||
        assets_root(home, h->assets, sizeof h->assets, st))
        return st->code;

    /* as huggingface_hub's get_token: the first variable set, cleaned; when that leaves nothing, the file */
    const char *var = env("HF_TOKEN") ? "HF_TOKEN" : "HUGGING_FACE_HUB_TOKEN";
    if (env(var) && (h->token = clean_token(env(var))) != NULL) {
        h->token_source = var;
    } else {
        static char path[PATH_MAX];
        if (env_place("HF_TOKEN_PATH", NULL, home, "token", path, sizeof path, st))
            return st->code;
        h->token = read_token_file(path);
        h->token_source = path;
    }
    h->offline = env_true("HF_HUB_OFFLINE");
    h->stall_seconds = env("HF_HUB_DOWNLOAD_TIMEOUT") ? strtol(env("HF_HUB_DOWNLOAD_TIMEOUT"), NULL, 10) : 10;
    if (h->stall_seconds <= 0)
        h->stall_seconds = 10;
    h->retry_ms = env("GM_HUB_RETRY_MS") ? strtol(env("GM_HUB_RETRY_MS"), NULL, 10) : 500;
    if (h->retry_ms < 0)
        h->retry_ms = 500;
    h->retries = 4;
    /* HF_HUB_DISABLE_PROGRESS_BARS read as huggingface_hub's _is_true reads it: 1, true, yes or on, any case; any
       other value (its 0 forces its bars on) leaves them as they are */
    h->progress = env_true("HF_HUB_DISABLE_PROGRESS_BARS") ? GM_PROGRESS_NONE
                  : isatty(STDERR_FILENO)                  ? GM_PROGRESS_BAR
                                                           : GM_PROGRESS_LINES;
    /* for the tests only, which cannot wait 10 s for a line: not a user's setting (hub.h) */
    h->progress_ms = env("GM_HUB_PROGRESS_MS") ? strtol(env("GM_HUB_PROGRESS_MS"), NULL, 10) : 10000;
    if (h->progress_ms <= 0)
        h->progress_ms = 10000;
    return 0;
}

void gm_hub_free(gm_hub *h)
{
    if (h->token) {
        memset(h->token, 0, strlen(h->token));
        free(h->token);
    }
    h->token = NULL;
}

/* ---------------------------------------------------------------------- */
/* the cache: models--org--name/{refs,blobs,snapshots} */

static int repo_dir(const gm_hub *h, const char *repo, char *out, size_t size, gm_status *st)
{
    char flat[512];
    flat_repo(repo, flat, sizeof flat);
    if (snprintf(out, size, "%s/models--%s", h->cache, flat) >= (int)size)
        return gm_fail(st, GM_EIO, "%s: cache path too long", h->cache);
    return 0;
}

static int is_commit(const char *s)
{
    if (strlen(s) != 40)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/*
** The lock huggingface_hub takes around a blob's download and rename:
** <cache>/.locks/models--org--name/<blob>.lock. Held, it means no other
** process (gen-model or Python) writes that blob meanwhile.
*/
static int lock_blob(const char *rdir, const char *blob, const char *file, uint64_t size, gm_status *st)
{
    char path[PATH_MAX], what[PATH_MAX + 320], part[PATH_MAX];
    const char *base = strrchr(rdir, '/');
    const int cache_len = base ? (int)(base - rdir) : 0;
    pathf(path, sizeof path, "%.*s/.locks/%s/%s.lock", cache_len, rdir, base ? base + 1 : rdir, blob);
    pathf(what, sizeof what, "the blob %s (%s)", blob, file);
    /* while the holder downloads, <blob>.incomplete grows: the wait says how far it has got */
    pathf(part, sizeof part, "%s/blobs/%s.incomplete", rdir, blob);
    return gm_lock(path, what, part, size, st);
}

/* Is snapshots/<commit>/<file> already the link to blobs/<blob>? (Then nothing is written: a read-only cache serves.) */
static int linked(const char *rdir, const char *commit, const char *file, const char *blob)
{
    char link[PATH_MAX], target[PATH_MAX], want[PATH_MAX];
    pathf(link, sizeof link, "%s/snapshots/%s/%s", rdir, commit, file);
    pathf(want, sizeof want, "../../blobs/%s", blob);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    return n > 0 && (size_t)n == strlen(want) && memcmp(target, want, (size_t)n) == 0;
}

/* snapshots/<commit>/<file> -> ../../blobs/<blob>, replacing any older link (none written when it is that link). */
static int link_blob(const char *rdir, const char *commit, const char *file, const char *blob, gm_status *st)
{
    char snap[PATH_MAX], link[PATH_MAX], tmp[PATH_MAX], target[PATH_MAX];
    if (linked(rdir, commit, file, blob))
        return 0;
    pathf(snap, sizeof snap, "%s/snapshots/%s", rdir, commit);
    if (gm_mkdir_p(snap, st))
        return st->code;
    pathf(link, sizeof link, "%s/%s", snap, file);
    if (gm_tmp_name(tmp, sizeof tmp, link) != 0)
        return gm_fail(st, GM_EIO, "%s: path too long", link);
    pathf(target, sizeof target, "../../blobs/%s", blob);
    unlink(tmp); /* a dead process's, one that had our pid */
    if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
        unlink(tmp);
        return gm_fail(st, GM_EIO, "%s: cannot link to %s: %s", link, target, strerror(errno));
    }
    return 0;
}

/* Does the file at path hold exactly data[0..len)? */
static int same_bytes(const char *path, const void *data, size_t len)
{
    char *text = NULL;
    size_t n = 0;
    gm_status ignore = {0};
    const int same = gm_read_file(path, len + 1, &text, &n, &ignore) == 0 && n == len && !memcmp(text, data, len);
    free(text);
    return same;
}

/* Store bytes as blobs/<blob> (atomically) and link them as snapshots/<commit>/<file>. */
static int cache_put(const char *rdir, const char *commit, const char *file, const char *blob,
                     const void *data, size_t len, gm_status *st)
{
    char dir[PATH_MAX], path[PATH_MAX];
    pathf(dir, sizeof dir, "%s/blobs", rdir);
    pathf(path, sizeof path, "%s/%s", dir, blob);
    /* already there, these bytes, linked: nothing to write, no lock to take (as huggingface_hub, on a read-only cache) */
    if (linked(rdir, commit, file, blob) && same_bytes(path, data, len))
        return 0;
    if (gm_mkdir_p(dir, st))
        return st->code;
    const int lock = lock_blob(rdir, blob, file, len, st);
    if (lock < 0)
        return st->code;
    /* a blob another process completed while this one waited is used as it is, unless its bytes are not these,
       which were checked against the blob's name (an earlier version cached a cut body under the right name) */
    if ((file_exists(path) && same_bytes(path, data, len)) || gm_write_file(path, data, len, st) == 0)
        link_blob(rdir, commit, file, blob, st);
    gm_unlock(lock);
    return st->code;
}

static int write_ref(const char *rdir, const char *revision, const char *commit, gm_status *st)
{
    char path[PATH_MAX];
    if (is_commit(revision) && !strcmp(revision, commit))
        return 0;
    pathf(path, sizeof path, "%s/refs/%s", rdir, revision);
    if (same_bytes(path, commit, strlen(commit)))
        return 0; /* as it is: nothing written (a read-only cache serves) */
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (gm_mkdir_p(path, st))
        return st->code;
    *slash = '/';
    return gm_write_file(path, commit, strlen(commit), st);
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The git blob id of data: sha1 over "blob <len>\0" and the bytes, the ETag the Hub gives a file not in LFS. */
static void git_blob_sha1_hex(const void *data, size_t len, char out[41])
{
    unsigned char md[20];
    unsigned int n = 0;
    char head[32];
    const int hl = snprintf(head, sizeof head, "blob %zu", len) + 1; /* with its NUL */
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    out[0] = '\0';
    if (c && EVP_DigestInit_ex(c, EVP_sha1(), NULL) && EVP_DigestUpdate(c, head, (size_t)hl) &&
        EVP_DigestUpdate(c, data, len) && EVP_DigestFinal_ex(c, md, &n))
        for (int i = 0; i < 20; i++)
            snprintf(out + 2 * i, 3, "%02x", md[i]);
    EVP_MD_CTX_free(c);
}

/* ---------------------------------------------------------------------- */
/* requests */

static int resolve_url(const gm_hub *h, const char *repo, const char *revision, const char *file,
                       char *out, size_t size, gm_status *st)
{
    char *rev = curl_easy_escape(NULL, revision, 0);
    if (!rev)
        return gm_fail(st, GM_ENOMEM, "out of memory");
    int n = snprintf(out, size, "%s/%s/resolve/%s/%s", h->endpoint, repo, rev, file);
    curl_free(rev);
    if (n < 0 || (size_t)n >= size)
        return gm_fail(st, GM_EUSAGE, "%s: URL too long", repo);
    return 0;
}

/* Room for the base64 of HF_ENDPOINT's user name and password (at most its 1024 bytes), with its NUL */
#define BASIC_SIZE (4 * (sizeof ((gm_hub *)0)->endpoint + 2) / 3 + 1)

/*
** Does HF_ENDPOINT carry a user name (and password)? Then, when no token takes their place, libcurl sends them
** with each request to that host as Basic credentials; their base64 ("user:password", percent-decoded, as libcurl
** decodes them) into basic unless it is NULL, for a server's echo of them to be hidden.
*/
static int endpoint_basic(const gm_hub *h, char *basic)
{
    CURLU *u = curl_url();
    char *user = NULL, *password = NULL, plain[sizeof h->endpoint];
    int has = 0;
    if (basic)
        basic[0] = '\0';
    if (u && !curl_url_set(u, CURLUPART_URL, h->endpoint, 0) &&
        !curl_url_get(u, CURLUPART_USER, &user, CURLU_URLDECODE)) {
        has = 1;
        curl_url_get(u, CURLUPART_PASSWORD, &password, CURLU_URLDECODE);
        const int n = snprintf(plain, sizeof plain, "%s:%s", user, password ? password : "");
        if (basic && n > 0 && (size_t)n < sizeof plain) /* BASIC_SIZE holds its base64 */
            EVP_EncodeBlock((unsigned char *)basic, (const unsigned char *)plain, n);
        memset(plain, 0, sizeof plain);
    }
    curl_free(user);
    curl_free(password);
    curl_url_cleanup(u);
    return has;
}

/*
** What a server said (X-Error-Message) for a message, into buf: the token and the Basic credentials of
** HF_ENDPOINT, should a server echo back the Authorization header it was sent, become "***", as they are never
** printed.
*/
static const char *server_said(const gm_hub *h, const char *text, char *buf, size_t size)
{
    char basic[BASIC_SIZE];
    endpoint_basic(h, basic);
    const char *const secrets[] = {h->token ? h->token : "", basic};
    size_t k = 0;
    for (const char *p = text; *p && k + 1 < size;) {
        size_t hidden = 0;
        for (size_t i = 0; i < 2 && !hidden; i++)
            if (secrets[i][0] && strncmp(p, secrets[i], strlen(secrets[i])) == 0)
                hidden = strlen(secrets[i]);
        if (hidden) {
            for (int i = 0; i < 3 && k + 1 < size; i++)
                buf[k++] = '*';
            p += hidden;
        } else {
            buf[k++] = *p++;
        }
    }
    buf[k] = '\0';
    memset(basic, 0, sizeof basic);
    return buf;
}

/* A non-2xx answer as the one line a user can act on. */
int gm_hub_error(const gm_hub *h, const char *repo, const char *revision, const char *file,
                 const gm_xfer *x, gm_status *st)
{
    const char *code = x->error_code;
    char ep[sizeof h->endpoint], said[3 * sizeof x->error_message];
    gm_url_for_message(h->endpoint, ep, sizeof ep);
    const char *msg = server_said(h, x->error_message, said, sizeof said), *colon = msg[0] ? ": " : "";
    if (!strcmp(code, "GatedRepo")) {
        if (!h->token)
            return gm_fail(st, GM_ENET, "%s: gated repo: %s needs a token; accept the licence at %s/%s, "
                           "then set HF_TOKEN to a token of that account", repo, file, ep, repo);
        return gm_fail(st, GM_ENET, "%s: gated repo: the token from %s has no access to %s; accept the "
                       "licence at %s/%s with that account", repo, h->token_source, file, ep, repo);
    }
    if (!strcmp(code, "RepoNotFound") && h->token) /* the Hub says so of a private repo the token cannot see */
        return gm_fail(st, GM_ENET, "%s: repo not found at %s (check the id; for a private repo, the token from %s "
                       "must be of an account with access to it)", repo, ep, h->token_source);
    if (!strcmp(code, "RepoNotFound"))
        return gm_fail(st, GM_ENET, "%s: repo not found at %s (check the id; a private repo needs HF_TOKEN)",
                       repo, ep);
    if (!strcmp(code, "RevisionNotFound"))
        return gm_fail(st, GM_ENET, "%s: revision '%s' not found", repo, revision);
    char u[4096];
    gm_url_for_message(x->url, u, sizeof u);
    if (!strcmp(code, "EntryNotFound"))
        return gm_fail(st, GM_EMISSING, "%s: file %s not found at revision '%s'", repo, file, revision);
    if (x->status == 404 && !code[0]) /* no error code of the Hub's: a mirror's, or an HF_ENDPOINT not a Hub */
        return gm_fail(st, GM_EMISSING, "%s: file %s not found at revision '%s' (%s: 404 without the Hub's "
                       "X-Error-Code; if HF_ENDPOINT %s is not a Hub, correct it)", repo, file, revision, u, ep);
    if (x->status == 401 && h->token)
        return gm_fail(st, GM_ENET, "%s: the Hub refused the token from %s for %s (401%s%s); check or renew it",
                       repo, h->token_source, file, colon, msg);
    if (x->status == 401 && endpoint_basic(h, NULL) && gm_http_same_origin(x->url, h->endpoint))
        /* no token: the credentials in HF_ENDPOINT went in its place, and were refused (HF_TOKEN is not the cure) */
        return gm_fail(st, GM_ENET, "%s: %s refused the user name and password in HF_ENDPOINT for %s (401%s%s); "
                       "check them", repo, ep, file, colon, msg);
    if (x->status == 401)
        return gm_fail(st, GM_ENET, "%s: the Hub refused %s (401%s%s); a private repo needs HF_TOKEN", repo, file,
                       colon, msg);
    if (x->status == 429)
        return gm_fail(st, GM_ENET, "GET %s: rate limited (429) after %d attempts; wait and try again", u,
                       x->attempts);
    if (x->status >= 500)
        return gm_fail(st, GM_ENET, "GET %s: server error %ld after %d attempts; try again later", u, x->status,
                       x->attempts);
    if (x->status == 403 && gm_http_same_origin(x->url, h->endpoint)) /* the Hub's own, without its error code */
        return gm_fail(st, GM_ENET, "GET %s: refused (403%s%s); %s", u, colon, msg,
                       h->token ? "check that the token's account has access to the repo"
                                : "a private repo needs HF_TOKEN of an account with access");
    if (x->status == 403) /* without the Hub's error code: a storage host's refusal, e.g. a signed URL expired */
        return gm_fail(st, GM_ENET, "GET %s: refused (403%s%s); a signed download link may have expired: run again, "
                       "which asks the Hub for a fresh one", u, colon, msg);
    return gm_fail(st, GM_ENET, "GET %s: unexpected HTTP status %ld%s%s; run again, or check HF_ENDPOINT", u,
                   x->status, colon, msg);
}

static int ok_status(long s) { return s >= 200 && s < 300; }

/* GET a small file of repo at revision into x (memory). */
static int get_small(gm_hub *h, gm_xfer *x, const char *repo, const char *revision, const char *file,
                     gm_status *st)
{
    char url[4096];
    if (resolve_url(h, repo, revision, file, url, sizeof url, st))
        return st->code;
    gm_xfer_init(x, url);
    x->max_body = 64u << 20;
    gm_xfer *one[1] = {x};
    if (gm_http_run(h, one, 1, st))
        return st->code;
    if (!ok_status(x->status))
        return gm_hub_error(h, repo, revision, file, x, st);
    if (x->capped)
        return gm_fail(st, GM_EFORMAT, "%s: %s is larger than 64 MiB", repo, file);
    /* a file outside LFS has its git blob id as ETag: a body that is not it is never cached */
    if (strlen(x->etag) == 40 && strspn(x->etag, "0123456789abcdef") == 40) {
        char got[41], u[512];
        git_blob_sha1_hex(x->body, x->len, got);
        if (strcmp(got, x->etag) != 0)
            return gm_fail(st, GM_ENET, "GET %s: the body (%zu bytes, git blob %s) is not the file the Hub announced "
                           "(ETag %s): a cut transfer, a proxy or a captive portal; run again, or check HF_ENDPOINT",
                           gm_url_for_message(x->url, u, sizeof u), x->len, got[0] ? got : "?", x->etag);
    }
    /* a file in LFS (a large tokenizer.json) has its sha256 in X-Linked-Etag, and its size in X-Linked-Size */
    if (strlen(x->linked_etag) == 64 && strspn(x->linked_etag, "0123456789abcdef") == 64) {
        char got[65], u[512];
        sha256_hex(x->body, x->len, got);
        if (strcmp(got, x->linked_etag) != 0 || (x->linked_size && x->linked_size != x->len))
            return gm_fail(st, GM_ENET, "%s: %s: GET %s: the body (%zu bytes, sha256 %s) is not the file the Hub "
                           "announced (X-Linked-Etag %s, X-Linked-Size %llu): a cut transfer or a proxy; run again, "
                           "or check HF_ENDPOINT", repo, file, gm_url_for_message(x->url, u, sizeof u), x->len, got,
                           x->linked_etag, (unsigned long long)x->linked_size);
    }
    return 0;
}

/*
** Cache a fetched small file under its blob name: the git ETag the Hub
** gives (hex), else the sha256 of the bytes.
*/
static int cache_file(const char *rdir, const char *commit, const char *file, const gm_xfer *x, gm_status *st)
{
    char blob[160];
    if (strlen(x->linked_etag) == 64 && strspn(x->linked_etag, "0123456789abcdef") == 64)
        pathf(blob, sizeof blob, "%s", x->linked_etag); /* in LFS: its sha256, which get_small checked */
    else if (x->etag[0] && strspn(x->etag, "0123456789abcdef") == strlen(x->etag))
        pathf(blob, sizeof blob, "%s", x->etag);
    else
        sha256_hex(x->body, x->len, blob);
    return cache_put(rdir, commit, file, blob, x->body, x->len, st);
}

static const char *commit_of(const char *dir);
static void rdir_of(const char *dir, char *out, size_t size);
static int fetch_config(gm_hub *h, const char *repo, const char *revision, char *dir, size_t dir_size,
                        gm_status *st);

static int offline_missing(const char *repo, const char *what, const char *where, gm_status *st)
{
    return gm_fail(st, GM_EMISSING, "%s: HF_HUB_OFFLINE=1 and the cache has no %s (looked in %s); "
                   "run once with network, or unset HF_HUB_OFFLINE", repo, what, where);
}

/* Does a file in any snapshot of the repo at rdir link to blobs/<blob>? */
static int linked_anywhere(const char *rdir, const char *blob)
{
    char snaps[PATH_MAX];
    pathf(snaps, sizeof snaps, "%s/snapshots", rdir);
    DIR *d = opendir(snaps);
    int found = 0;
    for (struct dirent *c; d && !found && (c = readdir(d)) != NULL;) {
        char sdir[PATH_MAX];
        if (c->d_name[0] == '.' || pathf(sdir, sizeof sdir, "%s/%s", snaps, c->d_name))
            continue;
        DIR *f = opendir(sdir);
        for (struct dirent *e; f && !found && (e = readdir(f)) != NULL;) {
            char path[PATH_MAX], target[PATH_MAX];
            ssize_t n;
            if (pathf(path, sizeof path, "%s/%s", sdir, e->d_name) == 0 &&
                (n = readlink(path, target, sizeof target - 1)) > 0) {
                target[n] = '\0';
                const char *base = strrchr(target, '/');
                found = strcmp(base ? base + 1 : target, blob) == 0;
            }
        }
        if (f)
            closedir(f);
    }
    if (d)
        closedir(d);
    return found;
}

int gm_heads_migrate(const char *dir, const char *heads)
{
    char rdir[PATH_MAX];
    int moved = 0;
    rdir_of(dir, rdir, sizeof rdir);
    DIR *d = opendir(dir);
    const size_t suffix = strlen(".safetensors.head");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        const size_t len = strlen(e->d_name);
        char path[PATH_MAX], to[PATH_MAX], target[PATH_MAX] = "";
        if (len <= suffix || strcmp(e->d_name + len - suffix, ".safetensors.head") != 0 ||
            pathf(path, sizeof path, "%s/%s", dir, e->d_name) || pathf(to, sizeof to, "%s/%s", heads, e->d_name))
            continue;
        const ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        char *text = NULL;
        size_t size = 0;
        gm_status ignore = {0};
        if (!file_exists(to) && (gm_read_file(path, ST_MAX_HEADER + 8, &text, &size, &ignore) ||
                                 gm_mkdir_p(heads, &ignore) || gm_write_file(to, text, size, &ignore))) {
            free(text);
            continue; /* left where it is, and read there */
        }
        free(text);
        unlink(path);
        moved++;
        const char *blob = strrchr(target, '/');
        if (n > 0 && blob && strncmp(target, "../../blobs/", 12) == 0 && !linked_anywhere(rdir, blob + 1)) {
            char b[PATH_MAX];
            if (pathf(b, sizeof b, "%s/blobs/%s", rdir, blob + 1) == 0)
                unlink(b);
        }
    }
    if (d)
        closedir(d);
    return moved;
}

int gm_hub_fetch_config(gm_hub *h, const char *repo, const char *revision,
                        char *dir, size_t dir_size, gm_status *st)
{
    if (fetch_config(h, repo, revision, dir, dir_size, st) == 0) {
        char heads[PATH_MAX];
        heads_of(h->assets, repo, commit_of(dir), heads, sizeof heads);
        gm_heads_migrate(dir, heads);
    }
    return st->code;
}

static int fetch_config(gm_hub *h, const char *repo, const char *revision,
                        char *dir, size_t dir_size, gm_status *st)
{
    char rdir[PATH_MAX];
    const char *why = NULL;
    if (!gm_revision_valid(revision, &why)) /* it names a file under refs/ */
        return gm_fail(st, GM_EUSAGE, "revision '%.200s': expected a branch, tag or commit, found %s", revision, why);
    if (repo_dir(h, repo, rdir, sizeof rdir, st))
        return st->code;
    if (h->offline) {
        char commit[64] = {0}, path[PATH_MAX];
        if (is_commit(revision)) {
            snprintf(commit, sizeof commit, "%s", revision);
        } else {
            pathf(path, sizeof path, "%s/refs/%s", rdir, revision);
            char *text = NULL;
            size_t len = 0;
            gm_status ignore = {0};
            if (gm_read_file(path, 256, &text, &len, &ignore))
                return offline_missing(repo, "record of this revision", path, st);
            snprintf(commit, sizeof commit, "%.*s", (int)strcspn(text, " \r\n"), text);
            free(text);
            if (!is_commit(commit))
                return gm_fail(st, GM_EFORMAT, "%s: expected a 40-hex commit id", path);
        }
        pathf(dir, dir_size, "%s/snapshots/%s", rdir, commit);
        pathf(path, sizeof path, "%s/config.json", dir);
        if (!file_exists(path))
            return offline_missing(repo, "config.json", dir, st);
        return 0;
    }
    gm_xfer x;
    if (get_small(h, &x, repo, revision, "config.json", st))
        goto out;
    const char *commit = x.commit[0] ? x.commit : revision;
    if (!is_commit(commit)) {
        gm_fail(st, GM_ENET, "%s: the Hub gave no commit id (X-Repo-Commit) for revision '%s'", repo, revision);
        goto out;
    }
    if (cache_file(rdir, commit, "config.json", &x, st) || write_ref(rdir, revision, commit, st))
        goto out;
    pathf(dir, dir_size, "%s/snapshots/%s", rdir, commit);
out:
    gm_xfer_free(&x);
    return st->code;
}

/* ---------------------------------------------------------------------- */
/* safetensors headers over HTTP Range */

/* The commit a snapshot folder belongs to: its own name. */
static const char *commit_of(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    return slash ? slash + 1 : dir;
}

/* The folder of a snapshot's repo: two levels up (models--org--name). */
static void rdir_of(const char *dir, char *out, size_t size)
{
    snprintf(out, size, "%s", dir);
    for (int i = 0; i < 2; i++) {
        char *slash = strrchr(out, '/');
        if (slash)
            *slash = '\0';
    }
}

static int has(const char *dir, const char *file, const char *suffix)
{
    char path[PATH_MAX];
    pathf(path, sizeof path, "%s/%s%s", dir, file, suffix);
    if (strcmp(suffix, ".head") != 0)
        return file_exists(path);
    /* a kept header counts when it reads whole and parses, as the snapshot reader will read it (a cut or garbled
       copy is fetched again) */
    uint8_t *bytes = NULL;
    size_t n = 0;
    gm_status ignore = {0};
    st_header h;
    const int sound = file_exists(path) && st_read_header_bytes(path, &bytes, &n, &ignore) == 0 &&
                      st_header_parse(&h, bytes, n, 0, path, &ignore) == 0;
    if (sound)
        st_header_free(&h);
    free(bytes);
    return sound;
}

/* Check a ranged answer: 206 with Content-Range starting at `start`, or a 200 we cut short. */
int gm_hub_check_range(const gm_xfer *x, uint64_t start, gm_status *st)
{
    char u[4096];
    if (x->status == 200)
        return 0; /* the server ignored Range; on_body stopped reading at max_body */
    unsigned long long a = 0, b = 0;
    if (x->status != 206 || sscanf(x->content_range, "bytes %llu-%llu/", &a, &b) != 2 || a != start || b < a)
        return gm_fail(st, GM_ENET, "GET %s: expected 206 with Content-Range bytes %llu-..., found %ld '%s'",
                       gm_url_for_message(x->url, u, sizeof u), (unsigned long long)start, x->status,
                       x->content_range);
    return 0;
}

typedef struct head_job {
    char file[256];
    gm_xfer x;
    uint8_t *bytes;
    size_t len, need;
} head_job;

/* Start (or continue) reading a header: Range from what is there to 8 + N. */
static int head_request(gm_hub *h, const char *repo, const char *commit, head_job *j, gm_status *st)
{
    char url[4096];
    if (resolve_url(h, repo, commit, j->file, url, sizeof url, st))
        return st->code;
    gm_xfer_free(&j->x);
    gm_xfer_init(&j->x, url);
    const size_t start = j->len, end = j->need ? j->need : HEADER_PROBE;
    snprintf(j->x.range, sizeof j->x.range, "%zu-%zu", start, end - 1);
    /* a 206 sends the end - start bytes asked for; a server that ignores Range sends the file from byte 0, of
       which the first `end` bytes are the whole header (head_take) */
    j->x.max_body = end;
    j->x.st_header = start == 0; /* read no further than the header, whatever was asked */
    return 0;
}

/* Take a header answer into j; j->need tells whether a second request is needed. */
static int head_take(const gm_hub *h, const char *repo, const char *commit, head_job *j, gm_status *st)
{
    gm_xfer *x = &j->x;
    if (!ok_status(x->status))
        return gm_hub_error(h, repo, commit, j->file, x, st);
    if (gm_hub_check_range(x, j->len, st))
        return st->code;
    if (x->status == 200)
        j->len = 0; /* Range ignored: the body is the file from its first byte, not the bytes after those we have */
    uint8_t *grown = realloc(j->bytes, j->len + x->len);
    if (!grown)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", j->file);
    j->bytes = grown;
    memcpy(j->bytes + j->len, x->body, x->len);
    j->len += x->len;
    uint64_t n = 0;
    if (st_header_len(j->bytes, j->len, &n, j->file, st))
        return st->code;
    const size_t total = 8 + (size_t)n;
    unsigned long long a = 0, b = 0, size = 0; /* the whole file's size, as a 206 gives it */
    if (x->status == 206 && sscanf(x->content_range, "bytes %llu-%llu/%llu", &a, &b, &size) == 3 && total > size)
        return gm_fail(st, GM_EFORMAT, "%s: the safetensors header says %zu bytes, more than the whole file's %llu: "
                       "not a safetensors file (%s at %s)", j->file, total, size, repo, commit);
    if (j->len >= total) {
        j->len = total;
        j->need = 0;
    } else if (j->need && j->len < j->need) {
        char u[4096];
        return gm_fail(st, GM_ENET, "GET %s: body truncated: %zu of %zu header bytes",
                       gm_url_for_message(x->url, u, sizeof u), j->len, j->need);
    } else {
        j->need = total;
    }
    return 0;
}

/* Fetch the headers of files[] in parallel and keep each as heads/<file>.head. */
static int fetch_heads(gm_hub *h, const char *repo, const char *dir, const char *heads, char **files, size_t n,
                       gm_status *st)
{
    const char *commit = commit_of(dir);
    head_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    gm_xfer **xs = calloc(n ? n : 1, sizeof *xs);
    if (!jobs || !xs) {
        gm_fail(st, GM_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(jobs[i].file, sizeof jobs[i].file, "%s", files[i]);
        jobs[i].x.fd = -1;
    }
    for (int round = 0; round < 2; round++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (round > 0 && !jobs[i].need)
                continue;
            if (head_request(h, repo, commit, &jobs[i], st))
                goto out;
            xs[k++] = &jobs[i].x;
        }
        if (k == 0)
            break;
        if (gm_http_run(h, xs, k, st))
            goto out;
        for (size_t i = 0; i < n; i++)
            if ((round == 0 || jobs[i].need) && head_take(h, repo, commit, &jobs[i], st))
                goto out;
    }
    /* each written whole under its own name (gm_write_file): writers of one header at once each rename a whole copy */
    if (gm_mkdir_p(heads, st))
        goto out;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        pathf(path, sizeof path, "%s/%s.head", heads, jobs[i].file);
        if (gm_write_file(path, jobs[i].bytes, jobs[i].len, st))
            goto out;
    }
out:
    for (size_t i = 0; jobs && i < n; i++) {
        gm_xfer_free(&jobs[i].x);
        free(jobs[i].bytes);
    }
    free(jobs);
    free(xs);
    return st->code;
}

/* Cache the index of a sharded repo; 1 when the repo has none (a 404). */
static int fetch_index(gm_hub *h, const char *repo, const char *dir, gm_status *st)
{
    char rdir[PATH_MAX];
    rdir_of(dir, rdir, sizeof rdir);
    gm_xfer x;
    if (get_small(h, &x, repo, commit_of(dir), "model.safetensors.index.json", st) == 0) {
        cache_file(rdir, commit_of(dir), "model.safetensors.index.json", &x, st);
    }
    gm_xfer_free(&x);
    return st->code;
}

/* The shard names of the cached index. */
static int shards_of(const char *dir, char ***names, size_t *n, gm_status *st)
{
    char path[PATH_MAX], *text = NULL;
    size_t len = 0;
    pathf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (gm_read_file(path, 64u << 20, &text, &len, st) == 0)
        st_index_shards(text, len, "model.safetensors.index.json", names, n, st);
    free(text);
    return st->code;
}

/* After the index was asked for too (and a Q4NX bundle): a 404 means the repo has no safetensors weights. */
static int no_weights(const char *repo, const char *dir, gm_status *st)
{
    if (st->code == GM_EMISSING)
        gm_fail(st, GM_EMISSING, "%s: neither model.safetensors nor model.safetensors.index.json is in the "
                "repo at %s (nor a Q4NX bundle, model.q4nx)", repo, commit_of(dir));
    return st->code;
}

#define Q4NX_FILE "model.q4nx" /* mlir-air's Q4NX bundle: the single safetensors file of its repos */

/* The index could not be fetched: 1 when it is not there (a 404: the repo may be a Q4NX bundle; st cleared). */
static int index_absent(gm_status *st)
{
    if (st->code != GM_EMISSING)
        return 0;
    gm_status_clear(st);
    return 1;
}

/* Is the repo single-file? Asks the Hub with a header probe of model.safetensors. */
int gm_hub_fetch_headers(gm_hub *h, const char *repo, const char *dir, char *heads, size_t heads_size,
                         gm_status *st)
{
    char *single[] = {"model.safetensors"}, *q4nx[] = {Q4NX_FILE};
    heads_of(h->assets, repo, commit_of(dir), heads, heads_size);
    if (has(dir, "model.safetensors", "") || has(heads, "model.safetensors", ".head") ||
        ((has(dir, Q4NX_FILE, "") || has(heads, Q4NX_FILE, ".head")) && !has(dir, "model.safetensors.index.json", "")))
        return 0;
    if (!has(dir, "model.safetensors.index.json", "")) {
        if (h->offline)
            return offline_missing(repo, "model.safetensors header or index", dir, st);
        /* as huggingface_hub decides: model.safetensors first, then the index; then a Q4NX bundle */
        gm_status probe = {0};
        if (fetch_heads(h, repo, dir, heads, single, 1, &probe) == 0)
            return 0;
        if (probe.code != GM_EMISSING) {
            *st = probe;
            return st->code;
        }
        if (fetch_index(h, repo, dir, st)) {
            gm_status bundle = {0};
            if (!index_absent(st) || fetch_heads(h, repo, dir, heads, q4nx, 1, &bundle) == 0)
                return st->code;
            return no_weights(repo, dir, (*st = bundle, st));
        }
    }
    char **names = NULL;
    size_t n = 0, k = 0;
    if (shards_of(dir, &names, &n, st))
        return st->code;
    char **need = calloc(n ? n : 1, sizeof *need);
    for (size_t i = 0; need && i < n; i++)
        if (!has(dir, names[i], "") && !has(heads, names[i], ".head"))
            need[k++] = names[i];
    if (!need)
        gm_fail(st, GM_ENOMEM, "out of memory");
    else if (k > 0 && h->offline)
        offline_missing(repo, need[0], dir, st);
    else if (k > 0)
        fetch_heads(h, repo, dir, heads, need, k, st);
    free(need);
    st_free_names(names, n);
    return st->code;
}

/* ---------------------------------------------------------------------- */
/* full downloads */

/* Hash what a partial download already holds (an interrupt stops it: -1, errno EINTR). */
static int hash_prefix(int fd, EVP_MD_CTX *sha, uint64_t *have)
{
    char buf[1 << 16];
    ssize_t r;
    *have = 0;
    if (lseek(fd, 0, SEEK_SET) != 0)
        return -1;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        if (gm_interrupted())
            return errno = EINTR, -1;
        EVP_DigestUpdate(sha, buf, (size_t)r);
        *have += (uint64_t)r;
    }
    return r < 0 ? -1 : 0;
}

/* The progress bar's line ended, once (the bar is drawn with \r, so the next line would go after it) */
static void end_bar(int *bar)
{
    if (*bar)
        fputc('\n', stderr);
    *bar = 0;
}

/* One safetensors file into blobs/<sha256>, resumable, verified, then linked. */
/*
** A weights file fetched whole (the Hub's bytes, by their sha256) read as the gates will read it: its
** safetensors header against its size. Read from the blob, which no other client rewrites (a snapshot's
** link may be between its unlink and its symlink in huggingface_hub's hands), and named by its place in
** the snapshot too.
*/
static int blob_header_ok(const char *blob, const char *dir, const char *file, gm_status *st)
{
    struct stat sb;
    uint8_t *bytes = NULL;
    size_t n = 0;
    st_header h;
    if (stat(blob, &sb) != 0)
        return gm_fail(st, GM_EIO, "%s: %s", blob, strerror(errno));
    if (st_read_header_bytes(blob, &bytes, &n, st) == 0 &&
        st_header_parse(&h, bytes, n, (uint64_t)sb.st_size, blob, st) == 0)
        st_header_free(&h);
    free(bytes);
    char named[PATH_MAX];
    if (st->code && (pathf(named, sizeof named, "%s/%s", dir, file) || strcmp(named, blob) != 0))
        gm_prefix(st, "%s/%s", dir, file);
    return st->code;
}

/* The sha256 of what sha has hashed so far, in hex (sha itself left as it is). */
static void sha_hex_so_far(const EVP_MD_CTX *sha, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || !EVP_MD_CTX_copy_ex(c, sha) || !EVP_DigestFinal_ex(c, md, &n))
        n = 0;
    EVP_MD_CTX_free(c);
    out[0] = '\0';
    for (unsigned i = 0; i < n && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/*
** Is the blob there, complete? With the size the Hub gives, as huggingface_hub
** takes it; with another size, only when its bytes are its name's sha256 (the
** Hub's size header wrong, the file right). Another size and other bytes: cut
** short, or not this file.
*/
static int blob_usable(const char *blob, const char *etag, uint64_t size)
{
    struct stat sb;
    if (stat(blob, &sb) != 0)
        return 0;
    if ((uint64_t)sb.st_size == size)
        return 1;
    const int fd = open(blob, O_RDONLY | O_CLOEXEC);
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    uint64_t n = 0;
    char got[65] = "";
    if (fd >= 0 && sha && EVP_DigestInit_ex(sha, EVP_sha256(), NULL) && hash_prefix(fd, sha, &n) == 0)
        sha_hex_so_far(sha, got);
    EVP_MD_CTX_free(sha);
    if (fd >= 0)
        close(fd);
    return strcmp(got, etag) == 0;
}

static int download_file(gm_hub *h, const char *repo, const char *dir, const char *file, gm_status *st)
{
    char rdir[PATH_MAX], url[4096], blob[PATH_MAX], part[PATH_MAX], u[4096];
    const char *commit = commit_of(dir);
    int bar = 0, lines = 0;
    double since = 0, line_at = 0, ended = 0; /* the log lines' times: the start, the last line, the end */
    uint64_t moved = 0;                       /* and the bytes this run received, over every attempt */
    rdir_of(dir, rdir, sizeof rdir);
    if (resolve_url(h, repo, commit, file, url, sizeof url, st))
        return st->code;

    gm_xfer meta;
    gm_xfer_init(&meta, url);
    meta.head_only = 1;
    gm_xfer *one[1] = {&meta};
    if (gm_http_run(h, one, 1, st) || (!ok_status(meta.status) && !(meta.status >= 300 && meta.status < 400) &&
                                       gm_hub_error(h, repo, commit, file, &meta, st))) {
        gm_xfer_free(&meta);
        return st->code;
    }
    char etag[160];
    snprintf(etag, sizeof etag, "%s", meta.linked_etag[0] ? meta.linked_etag : meta.etag);
    /* the Hub's X-Linked-Size; a server that answers the HEAD with the file itself (200) gives its Content-Length */
    const uint64_t size = meta.linked_size ? meta.linked_size : meta.status == 200 ? meta.content_length : 0;
    gm_xfer_free(&meta);
    if (strlen(etag) != 64 || strspn(etag, "0123456789abcdef") != 64)
        return gm_fail(st, GM_ENET, "HEAD %s: expected a sha256 in X-Linked-Etag, found '%.80s'",
                       gm_url_for_message(url, u, sizeof u), etag);
    if (size == 0)
        return gm_fail(st, GM_ENET, "HEAD %s: expected the file's size in X-Linked-Size, found none",
                       gm_url_for_message(url, u, sizeof u));

    pathf(blob, sizeof blob, "%s/blobs/%s", rdir, etag);
    pathf(part, sizeof part, "%s.incomplete", blob);
    if (blob_usable(blob, etag, size))
        return blob_header_ok(blob, dir, file, st) || link_blob(rdir, commit, file, etag, st);
    char blobs[PATH_MAX];
    pathf(blobs, sizeof blobs, "%s/blobs", rdir);
    if (gm_mkdir_p(blobs, st))
        return st->code;
    /*
    ** The blob's lock, held from here to the rename: one process at a time
    ** writes <blob>.incomplete (so a resumed download is this blob's bytes
    ** alone), and one that waited finds the blob complete and links it.
    */
    const int lock = lock_blob(rdir, etag, file, size, st);
    if (lock < 0)
        return st->code;
    if (blob_usable(blob, etag, size)) {
        link_blob(rdir, commit, file, etag, st);
        gm_unlock(lock);
        return st->code;
    }
    if (file_exists(blob) && !file_exists(part) && rename(blob, part) != 0) {
        /* a blob of another size and other bytes (cut by a full disk, or a copy): fetched again, from its bytes on */
        gm_unlock(lock);
        return gm_fail(st, GM_EIO, "%s: not the %llu bytes of X-Linked-Size, and cannot be moved aside to resume: %s",
                       blob, (unsigned long long)size, strerror(errno));
    }

    int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        gm_unlock(lock);
        return gm_fail(st, GM_EIO, "%s: cannot open: %s", part, strerror(errno));
    }
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    uint64_t have = 0;
    if (!sha || !EVP_DigestInit_ex(sha, EVP_sha256(), NULL) || hash_prefix(fd, sha, &have) != 0) {
        gm_fail(st, GM_EIO, "%s: cannot read the partial download: %s", part, strerror(errno));
        goto out;
    }
    if (have > size) {
        /* longer than the file: not a prefix of it; start over */
        if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0 || !EVP_DigestInit_ex(sha, EVP_sha256(), NULL)) {
            gm_fail(st, GM_EIO, "%s: cannot truncate the partial download: %s", part, strerror(errno));
            goto out;
        }
        have = 0;
    }
    /* a partial file that already has every byte (its writer stopped before the rename) is only checked and moved */
    bar = h->progress == GM_PROGRESS_BAR && have < size; /* drawn: a newline ends it before any other line */
    lines = h->progress == GM_PROGRESS_LINES && have < size;
    since = line_at = gm_http_now();
    uint64_t expect = size; /* the bytes a complete file has: X-Linked-Size, unless the server's end says otherwise */
    for (int attempt = 1; have < size; attempt++) {
        /* the file holds exactly the `have` bytes hashed so far; the transfer appends after them */
        if (ftruncate(fd, (off_t)have) != 0 || lseek(fd, (off_t)have, SEEK_SET) != (off_t)have) {
            gm_fail(st, GM_EIO, "%s: cannot set the partial download's end: %s", part, strerror(errno));
            goto out;
        }
        gm_xfer x;
        gm_xfer_init(&x, url);
        x.fd = fd;
        x.sha = sha;
        x.label = file;
        x.have = have;
        x.total = size;
        x.since = since;
        x.moved = moved;
        x.line_at = line_at;
        if (have > 0)
            snprintf(x.range, sizeof x.range, "%llu-", (unsigned long long)have);
        one[0] = &x;
        int rc = gm_http_run(h, one, 1, st);
        have = (x.restarted ? 0 : have) + x.written;
        moved += x.written;
        line_at = x.line_at;
        const int ok = !rc && x.result == CURLE_OK && ok_status(x.status);
        const CURLcode result = x.result;
        const long status = x.status, retry_after = x.retry_after;
        if (x.write_errno || x.bad_range) { /* no retry mends these; what is in the file stays, to resume */
            if (x.write_errno)
                gm_fail(st, GM_EIO, "%s: cannot write: %s; %llu of %llu bytes stay there for the next run to resume",
                        part, strerror(x.write_errno), (unsigned long long)have, (unsigned long long)size);
            else
                gm_fail(st, GM_ENET, "GET %s: asked for the bytes from %llu on, the server sent Content-Range "
                        "'%.80s'", gm_url_for_message(url, u, sizeof u), (unsigned long long)x.have,
                        x.content_range);
            gm_xfer_free(&x);
            goto out;
        }
        if (x.overlong) { /* a huge or endless body: cut at the file's size; no retry mends it, nor is the part kept */
            char cl[48] = "none";
            if (x.content_length)
                snprintf(cl, sizeof cl, "%llu", (unsigned long long)x.content_length);
            gm_fail(st, GM_ENET, "GET %s: expected the %llu bytes of X-Linked-Size, the server sent more (status %ld, "
                    "Content-Length %s) and was cut off there; nothing cached, the partial file removed",
                    gm_url_for_message(url, u, sizeof u), (unsigned long long)size, x.status, cl);
            unlink(part);
            gm_xfer_free(&x);
            goto out;
        }
        unsigned long long whole = 0; /* a 416's Content-Range: where the server's file ends */
        const int ends = !rc && x.result == CURLE_OK && x.status == 416 &&
                         sscanf(x.content_range, "bytes */%llu", &whole) == 1;
        if (ends && whole == have && have != size) {
            /* the file ends where the partial one does, before X-Linked-Size: complete, if its sha256 is the name */
            gm_xfer_free(&x);
            expect = have;
            break;
        }
        if (ends && whole != size) { /* it ends before X-Linked-Size says: no retry mends it, nor is the part kept */
            gm_fail(st, GM_ENET, "GET %s: the server's file has %llu bytes, X-Linked-Size says %llu (the Hub and its "
                    "storage disagree); nothing cached, the partial file removed", gm_url_for_message(url, u, sizeof u),
                    whole, (unsigned long long)size);
            unlink(part);
            gm_xfer_free(&x);
            goto out;
        }
        if (!rc && x.result == CURLE_OK && !ok_status(x.status) && !(x.status == 429 || x.status >= 500)) {
            gm_hub_error(h, repo, commit, file, &x, st);
            gm_xfer_free(&x);
            goto out;
        }
        gm_xfer_free(&x);
        if (!rc && gm_interrupted())
            rc = gm_fail(st, GM_EIO, "interrupted");
        if (rc && gm_interrupted()) {
            /* what arrived is in the partial file, whole: the next run (or huggingface_hub) resumes from it */
            gm_fail(st, GM_EIO, "interrupted: %s stays in %s (%llu of %llu bytes) for the next run to resume",
                    file, part, (unsigned long long)have, (unsigned long long)size);
        }
        if (rc)
            goto out;
        if (ok && have == size)
            break;
        if (ok && have > size) {
            gm_fail(st, GM_ENET, "GET %s: %llu bytes, more than the %llu of X-Linked-Size", gm_url_for_message(url, u,
                    sizeof u), (unsigned long long)have, (unsigned long long)size);
            goto out;
        }
        if (attempt > h->retries) {
            char why[64];
            if (result == CURLE_OK && status >= 400)
                snprintf(why, sizeof why, status == 429 ? "HTTP 429: rate limited" : "HTTP %ld: server error", status);
            gm_fail(st, GM_ENET, "GET %s: %llu of %llu bytes after %d attempts (%s); run the download again "
                    "to resume", gm_url_for_message(url, u, sizeof u), (unsigned long long)have,
                    (unsigned long long)size, attempt,
                    result != CURLE_OK ? curl_easy_strerror(result) : status >= 400 ? why : "short body");
            goto out;
        }
        /* the backoff, or what a Retry-After asks for; Ctrl-C ends it */
        const long delay = gm_http_retry_ms(h, attempt, retry_after);
        for (long waited = 0; waited < delay && !gm_interrupted(); waited += 50)
            usleep((useconds_t)(delay - waited < 50 ? delay - waited : 50) * 1000u);
        if (gm_interrupted()) {
            gm_fail(st, GM_EIO, "interrupted: %s stays in %s (%llu of %llu bytes) for the next run to resume",
                    file, part, (unsigned long long)have, (unsigned long long)size);
            goto out;
        }
    }
    end_bar(&bar);
    ended = gm_http_now();
    char got[65];
    sha_hex_so_far(sha, got);
    if (strcmp(got, etag) != 0) {
        unlink(part);
        gm_fail(st, GM_ENET, "%s: sha256 %s does not match the Hub's X-Linked-Etag %s; the partial file was "
                "removed, run the download again", file, got, etag);
        goto out;
    }
    struct stat sb = {0};
    if (expect != size) /* kept on its sha256, which is the check that matters; the disagreement is said */
        fprintf(stderr, "gen-model: note: %s: the server's file has %llu bytes where X-Linked-Size says %llu; its sha256 "
                "is the Hub's, so it is kept\n", file, (unsigned long long)expect, (unsigned long long)size);
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != expect) { /* what is hashed is what is there, or no rename */
        gm_fail(st, GM_EIO, "%s: %llu bytes, expected %llu; remove it and run the download again", part,
                (unsigned long long)sb.st_size, (unsigned long long)expect);
        goto out;
    }
    if (fsync(fd) != 0 || rename(part, blob) != 0) {
        gm_fail(st, GM_EIO, "%s: cannot move into place: %s", blob, strerror(errno));
        goto out;
    }
    if (blob_header_ok(blob, dir, file, st) == 0 && link_blob(rdir, commit, file, etag, st) == 0 && lines)
        gm_http_progress_line(file, expect, expect, moved, ended - since, 1); /* a log's line: the file is in place */
out:
    end_bar(&bar);
    EVP_MD_CTX_free(sha);
    close(fd);
    gm_unlock(lock);
    return st->code;
}

/* A file the repo may or may not have (tokenizer.json ...): cached when there, skipped on a 404. */
static int fetch_optional(gm_hub *h, const char *repo, const char *dir, const char *file, gm_status *st)
{
    char rdir[PATH_MAX];
    if (has(dir, file, "") || h->offline)
        return 0;
    rdir_of(dir, rdir, sizeof rdir);
    gm_xfer x;
    gm_status probe = {0};
    if (get_small(h, &x, repo, commit_of(dir), file, &probe) == 0) {
        cache_file(rdir, commit_of(dir), file, &x, st);
    } else if (probe.code != GM_EMISSING) {
        *st = probe;
    }
    gm_xfer_free(&x);
    return st->code;
}

/* The tokenizer files, kept with the weights (phase0 reads them from there). */
static int fetch_tokenizer(gm_hub *h, const char *repo, const char *dir, gm_status *st)
{
    if (fetch_optional(h, repo, dir, "tokenizer.json", st) == 0)
        fetch_optional(h, repo, dir, "tokenizer_config.json", st);
    return st->code;
}

/*
** A weights file the snapshot has, read as the gates will (its header against
** its size): a file cut short says so, and offline what mends it.
*/
static int snapshot_whole(const gm_hub *h, const char *dir, const char *file, gm_status *st)
{
    char path[PATH_MAX];
    gm_status whole = {0};
    if (pathf(path, sizeof path, "%s/%s", dir, file) || blob_header_ok(path, dir, file, &whole) == 0)
        return 0;
    return gm_fail(st, whole.code, "%s%s", whole.msg, h->offline ? "; HF_HUB_OFFLINE=1: unset it to fetch the file "
                   "again" : "");
}

int gm_hub_download(gm_hub *h, const char *repo, const char *revision,
                    char *dir, size_t dir_size, gm_status *st)
{
    if (gm_hub_fetch_config(h, repo, revision, dir, dir_size, st))
        return st->code;
    if (h->offline) {
        if (!has(dir, "model.safetensors", "") && !has(dir, "model.safetensors.index.json", "") &&
            !has(dir, Q4NX_FILE, ""))
            return offline_missing(repo, "model.safetensors", dir, st);
    } else if (!has(dir, "model.safetensors.index.json", "")) {
        /* single file, unless the Hub has no model.safetensors; then the index, then a Q4NX bundle */
        gm_status probe = {0};
        if (download_file(h, repo, dir, "model.safetensors", &probe) == 0)
            return fetch_tokenizer(h, repo, dir, st);
        if (probe.code != GM_EMISSING) {
            *st = probe;
            return st->code;
        }
        if (fetch_index(h, repo, dir, st)) {
            gm_status bundle = {0};
            if (!index_absent(st))
                return st->code;
            if (download_file(h, repo, dir, Q4NX_FILE, &bundle) == 0)
                return fetch_tokenizer(h, repo, dir, st);
            return no_weights(repo, dir, (*st = bundle, st));
        }
    }
    char **names = NULL;
    size_t n = 0;
    const char *single = has(dir, "model.safetensors", "")                                              ? "model.safetensors"
                         : has(dir, Q4NX_FILE, "") && !has(dir, "model.safetensors.index.json", "") ? Q4NX_FILE
                                                                                                     : NULL;
    if (single) {
        /* read as the gates will; online a cut one is fetched again (here too when an index lies beside it) */
        gm_status whole = {0};
        if (snapshot_whole(h, dir, single, &whole)) {
            if (h->offline)
                return *st = whole, st->code;
            if (download_file(h, repo, dir, single, st))
                return st->code;
        }
        return fetch_tokenizer(h, repo, dir, st);
    }
    if (shards_of(dir, &names, &n, st))
        return st->code;
    for (size_t i = 0; i < n && !st->code; i++) {
        /*
        ** a link to a complete blob, or the complete file itself: huggingface_hub moves a blob into the
        ** snapshot where the file system has no symlinks, and cp -rL copies a cache that way
        */
        gm_status whole = {0};
        if (has(dir, names[i], "") && snapshot_whole(h, dir, names[i], &whole) == 0)
            continue;
        if (whole.code && h->offline) /* online, a cut file is fetched again, resumed from its bytes (download_file) */
            *st = whole;
        else if (h->offline)
            offline_missing(repo, names[i], dir, st);
        else
            download_file(h, repo, dir, names[i], st);
    }
    st_free_names(names, n);
    return st->code ? st->code : fetch_tokenizer(h, repo, dir, st);
}
