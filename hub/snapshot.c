/* Snapshots: from a folder in, to models/<id>/snapshot/ out. */
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gm/io.h"
#include "gm/safetensors.h"

#define MAX_JSON_FILE (64u << 20) /* config.json and index files are kilobytes */

static int name_part_valid(const char *s, size_t n)
{
    if (n == 0 || n > 96)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 (i > 0 && (c == '.' || c == '_' || c == '-'));
        if (!ok || (c == '.' && s[i - 1] == '.'))
            return 0;
    }
    return 1;
}

int gm_repo_id_valid(const char *repo)
{
    const size_t n = strlen(repo);
    /* as huggingface_hub's validate_repo_id: "--" would flatten two ids into one cache folder (a--b/c, a/b--c) */
    if (strstr(repo, "--") || (n >= 4 && strcmp(repo + n - 4, ".git") == 0))
        return 0;
    const char *slash = strchr(repo, '/');
    if (!slash)
        return name_part_valid(repo, strlen(repo));
    return name_part_valid(repo, (size_t)(slash - repo)) &&
           name_part_valid(slash + 1, strlen(slash + 1));
}

int gm_revision_valid(const char *rev, const char **why)
{
    const size_t n = strlen(rev);
    const char *w = NULL;
    if (n == 0)
        w = "an empty string";
    else if (rev[0] == '/' || rev[n - 1] == '/' || strstr(rev, "//"))
        w = "an empty part between slashes";
    else if (rev[0] == '.' || strstr(rev, "/."))
        w = "a part that starts with '.'";
    else if (strstr(rev, ".."))
        w = "'..'";
    else if (strstr(rev, "@{") || strcmp(rev, "@") == 0)
        w = "'@{' or is '@', which git refuses in a ref name";
    else if (rev[n - 1] == '.')
        w = "a '.' ending, which git refuses in a ref name";
    for (const char *part = rev; !w && *part;) { /* per part between slashes: git's rules are a component's */
        const size_t k = strcspn(part, "/");
        if (k >= 5 && memcmp(part + k - 5, ".lock", 5) == 0)
            w = "a part that ends in '.lock', which git refuses in a ref name";
        part += k + (part[k] == '/');
    }
    for (const unsigned char *p = (const unsigned char *)rev; !w && *p; p++)
        if (*p < 0x20 || *p == 0x7f || strchr(" ~^:?*[\\", *p))
            w = "a control byte, a space or one of ~^:?*[\\";
    if (why)
        *why = w;
    return w == NULL;
}

const char *const gm_reserved_ids[] = {"gm", "st", "bf16", NULL};

int gm_model_id_valid(const char *id)
{
    const size_t n = strlen(id);
    if (n == 0 || n > GM_MODEL_ID_MAX || !((id[0] >= 'a' && id[0] <= 'z') || id[0] == '_'))
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    for (const char *const *r = gm_reserved_ids; *r; r++)
        if (strcmp(id, *r) == 0)
            return 0;
    return 1;
}

static int commit_valid(const char *c)
{
    if (strlen(c) != 40)
        return 0;
    for (const char *p = c; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

static int path_join(char *out, size_t size, const char *dir, const char *file,
                     gm_status *st)
{
    if (snprintf(out, size, "%s/%s", dir, file) >= (int)size)
        return gm_fail(st, GM_EIO, "%s/%s: path too long", dir, file);
    return 0;
}

static int check_link(const char *dir, const char *path, gm_status *st);

/* path_join for a file gen-model reads from the snapshot: its symlinks must stay inside. */
static int input_path(char *out, size_t size, const char *dir, const char *file, gm_status *st)
{
    return path_join(out, size, dir, file, st) || check_link(dir, out, st);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/*
** The folder a snapshot's symlinks may point into: the snapshot folder
** itself, or, for a Hugging Face cache snapshot .../models--org--name/
** snapshots/<commit> (whose files link to ../../blobs/<sha>), the whole
** models--org--name folder. malloc'd; NULL when dir cannot be resolved.
*/
static char *link_root(const char *dir)
{
    char *root = realpath(dir, NULL);
    if (!root)
        return NULL;
    char *last = strrchr(root, '/');
    if (last && last > root) {
        *last = '\0';
        char *snaps = strrchr(root, '/');
        if (snaps && strcmp(snaps + 1, "snapshots") == 0) {
            *snaps = '\0';
            char *repo = strrchr(root, '/');
            if (repo && strncmp(repo + 1, "models--", 8) == 0)
                return root;
            *snaps = '/';
        }
        *last = '/';
    }
    return root;
}

/*
** path (a file of snapshot folder dir) may be a symlink only to a file inside
** link_root(dir): a hostile snapshot must not make gen-model read, and copy
** into models/<id>/snapshot/, a file from elsewhere (~/.ssh/id_rsa as
** config.json). A dangling link is left for the caller's open to report.
*/
static int check_link(const char *dir, const char *path, gm_status *st)
{
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISLNK(sb.st_mode))
        return 0;
    char *target = realpath(path, NULL), *root = link_root(dir);
    if (target && root) {
        size_t n = strlen(root);
        if (strncmp(target, root, n) != 0 || (target[n] != '/' && !(n == 1 && root[0] == '/')))
            gm_fail(st, GM_EFORMAT, "%s: a symlink to %s, outside the model folder %s", path, target, root);
    } else if (target && !root) {
        gm_fail(st, GM_EIO, "%s: cannot resolve: %s", dir, strerror(errno));
    }
    free(target);
    free(root);
    return st->code;
}

int gm_snapshot_read_origin(gm_snapshot *s, const char *path, gm_status *st)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    if (gm_read_file(path, 1u << 20, &text, &len, st))
        return st->code;
    root = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(root)) {
        gm_fail(st, GM_EFORMAT, "%s: expected a JSON object {\"repo\": ..., \"commit\": ...}, found %s", path,
                root ? "another JSON value" : "text that is not JSON");
        goto out;
    }
    const cJSON *repo = cJSON_GetObjectItemCaseSensitive(root, "repo");
    const cJSON *commit = cJSON_GetObjectItemCaseSensitive(root, "commit");
    if (!cJSON_IsString(repo) || !gm_repo_id_valid(repo->valuestring)) {
        gm_fail(st, GM_EFORMAT, "%s: expected \"repo\" to be a Hub repo id like \"org/name\"", path);
        goto out;
    }
    if (commit && !cJSON_IsNull(commit) &&
        (!cJSON_IsString(commit) || !commit_valid(commit->valuestring))) {
        gm_fail(st, GM_EFORMAT, "%s: expected \"commit\" to be 40 lower-case hex digits or null", path);
        goto out;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (name && (!cJSON_IsString(name) || !gm_model_id_valid(name->valuestring))) {
        gm_fail(st, GM_EFORMAT, "%s: expected \"name\" to be a model id of 1 to %d lower-case letters, digits "
                "and '_'", path, GM_MODEL_ID_MAX);
        goto out;
    }
    s->repo = strdup(repo->valuestring);
    if (cJSON_IsString(commit))
        s->commit = strdup(commit->valuestring);
    if (name)
        s->name = strdup(name->valuestring);
    if (!s->repo || (cJSON_IsString(commit) && !s->commit) || (name && !s->name))
        gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
out:
    cJSON_Delete(root);
    free(text);
    return st->code;
}

/*
** The repo id and commit of a folder with no origin file: a Hugging Face
** cache snapshot path .../models--org--name/snapshots/<commit>, else the
** folder's own name.
*/
static int origin_from_path(gm_snapshot *s, const char *dir, gm_status *st)
{
    char *abs = realpath(dir, NULL);
    if (!abs)
        return gm_fail(st, GM_EIO, "%s: cannot resolve: %s", dir, strerror(errno));
    char *base = strrchr(abs, '/');
    base = base ? base + 1 : abs;
    char *snaps = base > abs + 1 ? base - 1 : NULL; /* the '/' before base */
    if (snaps && commit_valid(base)) {
        *snaps = '\0';
        char *parent = strrchr(abs, '/');
        if (parent && strcmp(parent + 1, "snapshots") == 0) {
            *parent = '\0';
            char *cache = strrchr(abs, '/');
            cache = cache ? cache + 1 : abs;
            if (strncmp(cache, "models--", 8) == 0) {
                char repo[256];
                const char *sep = strstr(cache + 8, "--");
                if (sep)
                    snprintf(repo, sizeof repo, "%.*s/%s", (int)(sep - cache - 8), cache + 8, sep + 2);
                else
                    snprintf(repo, sizeof repo, "%s", cache + 8);
                if (gm_repo_id_valid(repo)) {
                    s->repo = strdup(repo);
                    s->commit = strdup(base);
                    s->hf_cache = 1;
                    free(abs);
                    return s->repo && s->commit ? 0 : gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
                }
            }
        }
        *snaps = '/';
    }
    if (!gm_repo_id_valid(base)) {
        gm_fail(st, GM_EUSAGE, "%s: folder name '%s' is not usable as a repo id; pass --repo ORG/NAME",
                dir, base);
        free(abs);
        return st->code;
    }
    s->repo = strdup(base);
    free(abs);
    return s->repo ? 0 : gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
}

/* path = folder/file.head, when it exists; its links checked against folder. */
static int head_in(char *path, size_t size, const char *folder, const char *file, gm_status *st)
{
    if (snprintf(path, size, "%s/%s.head", folder, file) >= (int)size)
        return gm_fail(st, GM_EIO, "%s/%s.head: path too long", folder, file), 0;
    return exists(path) && check_link(folder, path, st) == 0;
}

/* Read the header of shard file `file` in dir, complete or as file.head (in dir, else in heads). */
static int read_shard(gm_shard *sh, const char *dir, const char *heads, const char *file, gm_status *st)
{
    char path[4096];
    struct stat sb;
    sh->file = strdup(file);
    if (!sh->file)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", file);
    if (input_path(path, sizeof path, dir, file, st))
        return st->code;
    if (stat(path, &sb) == 0) {
        sh->file_size = (uint64_t)sb.st_size;
    } else if (!head_in(path, sizeof path, dir, file, st) && !st->code &&
               !(heads && head_in(path, sizeof path, heads, file, st))) {
        const char *const where[] = {dir, dir, heads}, *const suffix[] = {"", ".head", ".head"};
        for (int i = 0; i < 3 && !st->code; i++) /* a link to nothing is named as one */
            if (where[i] && snprintf(path, sizeof path, "%s/%s%s", where[i], file, suffix[i]) < (int)sizeof path)
                gm_dangling(path, st);
        if (st->code)
            return st->code;
        if (heads)
            return gm_fail(st, GM_EMISSING, "%s: neither %s nor %s.head is present (nor in %s)", dir, file, file,
                           heads);
        return gm_fail(st, GM_EMISSING, "%s: neither %s nor %s.head is present", dir, file, file);
    }
    if (st->code)
        return st->code;
    if (!(sh->path = strdup(path)))
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
    if (st_read_header_bytes(path, &sh->header, &sh->header_len, st))
        return st->code;
    /* validated here once so every later step can trust it */
    st_header h;
    if (st_header_parse(&h, sh->header, sh->header_len, sh->file_size, path, st))
        return st->code;
    st_header_free(&h);
    return 0;
}

/* The JSON file at path into *data, and path into *kept, which messages name it by. */
static int read_kept(const char *path, char **data, size_t *len, char **kept, gm_status *st)
{
    if (gm_read_file(path, MAX_JSON_FILE, data, len, st))
        return st->code;
    if (!(*kept = strdup(path)))
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
    return 0;
}

int gm_snapshot_open_dir(gm_snapshot *s, const char *dir,
                         const char *repo_override, gm_status *st)
{
    char path[4096];
    memset(s, 0, sizeof *s);

    struct stat sb;
    if (stat(dir, &sb) != 0)
        return gm_fail(st, GM_EIO, "%s: expected a model folder, found none (%s)", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return gm_fail(st, GM_EIO, "%s: expected a model folder, found a file", dir);

    if (input_path(path, sizeof path, dir, "config.json", st))
        goto fail;
    if (!exists(path)) { /* not a model folder: bad input, as a folder without weights is */
        if (!gm_dangling(path, st))
            gm_fail(st, GM_EMISSING, "%s: missing: a model folder holds config.json", path);
        goto fail;
    }
    if (read_kept(path, &s->config, &s->config_len, &s->config_path, st))
        goto fail;

    if (repo_override) {
        if (!gm_repo_id_valid(repo_override)) {
            gm_fail(st, GM_EUSAGE, "--repo: expected a Hub repo id like \"org/name\", found '%s'",
                    repo_override);
            goto fail;
        }
        s->repo = strdup(repo_override);
    } else if (path_join(path, sizeof path, dir, "source.json", st) == 0 && exists(path)) {
        if (check_link(dir, path, st) || gm_snapshot_read_origin(s, path, st))
            goto fail;
    } else if (path_join(path, sizeof path, dir, ".hub.json", st) == 0 && exists(path)) {
        if (check_link(dir, path, st) || gm_snapshot_read_origin(s, path, st))
            goto fail;
    } else if (origin_from_path(s, dir, st)) {
        goto fail;
    }
    if (st->code)
        goto fail;
    return 0;
fail:
    gm_snapshot_free(s);
    return st->code;
}

/* Is the single file `file` there: complete, or as file.head in dir or in heads? */
static int has_single(const char *dir, const char *heads, const char *file)
{
    char path[4096];
    return (snprintf(path, sizeof path, "%s/%s", dir, file) < (int)sizeof path && exists(path)) ||
           (snprintf(path, sizeof path, "%s/%s.head", dir, file) < (int)sizeof path && exists(path)) ||
           (snprintf(path, sizeof path, "%s/%s.head", heads ? heads : dir, file) < (int)sizeof path && exists(path));
}

/* The one file of a single-file model: its header into s. */
static int read_single(gm_snapshot *s, const char *dir, const char *heads, const char *file, gm_status *st)
{
    if (!(s->shards = calloc(1, sizeof *s->shards)))
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
    s->n_shards = 1;
    return read_shard(&s->shards[0], dir, heads, file, st);
}

int gm_snapshot_read_headers(gm_snapshot *s, const char *dir, const char *heads, gm_status *st)
{
    char path[4096];
    char **names = NULL;
    size_t n_names = 0;
    if (has_single(dir, heads, "model.safetensors"))
        return read_single(s, dir, heads, "model.safetensors", st);
    if (input_path(path, sizeof path, dir, "model.safetensors.index.json", st))
        goto fail;
    if (!exists(path)) {
        if (has_single(dir, heads, "model.q4nx")) /* mlir-air's Q4NX bundle: one safetensors file by another name */
            return read_single(s, dir, heads, "model.q4nx", st);
        static const char *const weights[] = {"model.safetensors", "model.safetensors.head",
                                              "model.safetensors.index.json", "model.q4nx", "model.q4nx.head"};
        for (size_t i = 0; i < sizeof weights / sizeof weights[0] && !st->code; i++)
            if (path_join(path, sizeof path, dir, weights[i], st) == 0)
                gm_dangling(path, st);
        if (!st->code)
            gm_fail(st, GM_EMISSING, "%s: expected model.safetensors or model.safetensors.index.json (or a Q4NX "
                    "bundle, model.q4nx), found none", dir);
        goto fail;
    }
    if (read_kept(path, &s->index, &s->index_len, &s->index_path, st))
        goto fail;
    if (st_index_shards(s->index, s->index_len, path, &names, &n_names, st))
        goto fail;
    s->shards = calloc(n_names ? n_names : 1, sizeof *s->shards);
    if (!s->shards) {
        gm_fail(st, GM_ENOMEM, "%s: out of memory", dir);
        goto fail;
    }
    s->n_shards = n_names;
    for (size_t i = 0; i < n_names; i++)
        if (read_shard(&s->shards[i], dir, heads, names[i], st))
            goto fail;
fail:
    st_free_names(names, n_names);
    return st->code;
}

/* A copy of n bytes, NUL-terminated, into f->data (1 on success). */
static int file_set(gm_snapshot_file *f, const char *name, const void *data, size_t n)
{
    f->name = strdup(name);
    f->data = malloc(n + 1);
    if (!f->name || !f->data)
        return 0;
    memcpy(f->data, data, n);
    f->data[n] = '\0';
    f->len = n;
    return 1;
}

int gm_snapshot_files(const gm_snapshot *s, gm_snapshot_file **out, size_t *n_out, gm_status *st)
{
    const size_t cap = 3 + s->n_shards;
    gm_snapshot_file *f = calloc(cap, sizeof *f);
    size_t n = 0;
    char name[4096];
    *out = NULL;
    *n_out = 0;
    if (!f)
        return gm_fail(st, GM_ENOMEM, "snapshot: out of memory");
    int ok = file_set(&f[n++], "config.json", s->config, s->config_len);
    if (ok && s->index)
        ok = file_set(&f[n++], "model.safetensors.index.json", s->index, s->index_len);
    for (size_t i = 0; ok && i < s->n_shards; i++) {
        snprintf(name, sizeof name, "%s.head", s->shards[i].file); /* shard names are plain and short */
        ok = file_set(&f[n++], name, s->shards[i].header, s->shards[i].header_len);
    }
    /* repo and commit were validated on the way in: plain characters only */
    char origin[512], id[GM_MODEL_ID_MAX + 32] = "";
    if (s->name)
        snprintf(id, sizeof id, ",\n  \"name\": \"%s\"", s->name);
    int len = snprintf(origin, sizeof origin, "{\n  \"repo\": \"%s\",\n  \"commit\": %s%s%s%s\n}\n", s->repo,
                       s->commit ? "\"" : "", s->commit ? s->commit : "null", s->commit ? "\"" : "", id);
    if (ok && (len < 0 || len >= (int)sizeof origin)) {
        gm_snapshot_files_free(f, n);
        return gm_fail(st, GM_EFORMAT, "source.json: repo id too long");
    }
    if (ok)
        ok = file_set(&f[n++], "source.json", origin, (size_t)len);
    if (!ok) {
        gm_snapshot_files_free(f, n);
        return gm_fail(st, GM_ENOMEM, "snapshot: out of memory");
    }
    *out = f;
    *n_out = n;
    return 0;
}

void gm_snapshot_files_free(gm_snapshot_file *f, size_t n)
{
    for (size_t i = 0; f && i < n; i++) {
        free(f[i].name);
        free(f[i].data);
    }
    free(f);
}

int gm_snapshot_write(const gm_snapshot *s, const char *dir, gm_status *st)
{
    gm_snapshot_file *f;
    size_t n;
    char path[4096];
    if (gm_snapshot_files(s, &f, &n, st))
        return st->code;
    for (size_t i = 0; i < n && !st->code; i++)
        if (path_join(path, sizeof path, dir, f[i].name, st) == 0)
            gm_write_file(path, f[i].data, f[i].len, st);
    gm_snapshot_files_free(f, n);
    return st->code;
}

void gm_snapshot_free(gm_snapshot *s)
{
    free(s->repo);
    free(s->commit);
    free(s->name);
    free(s->config);
    free(s->config_path);
    free(s->index);
    free(s->index_path);
    for (size_t i = 0; i < s->n_shards; i++) {
        free(s->shards[i].file);
        free(s->shards[i].path);
        free(s->shards[i].header);
    }
    free(s->shards);
    memset(s, 0, sizeof *s);
}
