/*
** What gen-model works from: the bytes a model's scaffolding depends on, and
** nothing else. A local folder, the Hugging Face cache or the Hub all produce
** the same gm_snapshot, and models/<id>/snapshot/ keeps it so that anyone can
** regenerate the same sources offline.
*/
#ifndef GM_SNAPSHOT_H
#define GM_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "gm/io.h"
#include "gm/status.h"

typedef struct gm_shard {
    char *file;       /* "model.safetensors", "model-00001-of-00004.safetensors" */
    uint8_t *header;  /* the file's first 8 + N bytes */
    size_t header_len;
    uint64_t file_size; /* the whole file's size when known, else 0 */
    char *path;         /* the file its header was read from (the shard, or its .head), for messages; or NULL */
} gm_shard;

typedef struct gm_snapshot {
    char *repo;         /* "Qwen/Qwen2-1.5B" */
    char *commit;       /* 40 hex digits, or NULL for a local folder without one */
    char *name;         /* the model id chosen with --name, or NULL: the one derived from repo */
    char *config;       /* config.json bytes, NUL-terminated */
    char *config_path;  /* the file they were read from, for messages; or NULL */
    size_t config_len;
    char *index;        /* model.safetensors.index.json bytes, or NULL */
    size_t index_len;
    char *index_path;   /* the file they were read from, for messages; or NULL */
    gm_shard *shards;   /* sorted by file name */
    size_t n_shards;
    int hf_cache;       /* the folder is a Hugging Face cache snapshot: repo and commit came from its path */
} gm_snapshot;

/*
** Start a snapshot from a folder laid out like a Hub repo: read config.json
** and find the repo id and commit, from, in order: repo_override;
** source.json (written by gen-model beside a snapshot); .hub.json (an offline
** Hub copy); a Hugging Face cache path .../models--org--name/snapshots/<commit>;
** the folder's name. On failure *s is left empty.
*/
int gm_snapshot_open_dir(gm_snapshot *s, const char *dir,
                         const char *repo_override, gm_status *st);

/*
** Add the tensor list: model.safetensors, or model.safetensors.index.json and
** every shard its weight_map names, each read only as far as its header (a
** file may be complete, or only <file>.head in dir or, when heads is not
** NULL, in heads: a cache snapshot's headers folder). Every header is validated.
*/
int gm_snapshot_read_headers(gm_snapshot *s, const char *dir, const char *heads, gm_status *st);

/* One file of a written snapshot: its name in snapshot/ and its bytes (NUL-terminated). */
typedef struct gm_snapshot_file {
    char *name;
    char *data;
    size_t len;
} gm_snapshot_file;

/*
** What models/<id>/snapshot/ holds for s, in this order: config.json, the
** index if any, <file>.head for every shard, and source.json (repo, commit
** and the --name, if one was given). *files is freshly allocated: free it
** with gm_snapshot_files_free(*files, *n).
*/
int gm_snapshot_files(const gm_snapshot *s, gm_snapshot_file **files, size_t *n, gm_status *st);
void gm_snapshot_files_free(gm_snapshot_file *files, size_t n);

/* Write gm_snapshot_files(s) into folder dir, which must exist. */
int gm_snapshot_write(const gm_snapshot *s, const char *dir, gm_status *st);

void gm_snapshot_free(gm_snapshot *s);

/*
** repo, commit and name (--name) into s from path, a snapshot's source.json
** ({"repo": ..., "commit": ..., "name": ...}), each checked; else st says
** which is wrong.
*/
int gm_snapshot_read_origin(gm_snapshot *s, const char *path, gm_status *st);

/* A Hub repo id: "name" or "org/name", each part [A-Za-z0-9][A-Za-z0-9._-]*, no ".." or "--", no ".git" ending. */
int gm_repo_id_valid(const char *repo);

/*
** A revision (branch, tag, commit, refs/pr/N) that can name a file under the
** cache's refs/ as git's check-ref-format allows a ref name: no empty or
** "."-led component (so no ".."), no leading, trailing or doubled "/", no
** control bytes, space or any of ~^:?*[\, no "@{", no part ending in ".lock",
** no "." ending. 0 and
** why (a short phrase) when it is not.
*/
int gm_revision_valid(const char *rev, const char **why);

/*
** A model id: [a-z_][a-z0-9_]*, at most GM_MODEL_ID_MAX characters (a Hub
** repo's name is at most 96, and an id derived from one adds at most 6), and
** not a prefix the runtime owns (gm_reserved_ids), whose symbols and header
** guards it would clash with.
*/
enum { GM_MODEL_ID_MAX = 128 };
int gm_model_id_valid(const char *id);

/*
** Those prefixes, NULL-terminated: "gm", "st", "bf16". The one list: the Lua
** host hands it to the generator (require("gm.runtime").reserved), which
** renames a repo whose id would be one of them.
*/
extern const char *const gm_reserved_ids[];

#endif
