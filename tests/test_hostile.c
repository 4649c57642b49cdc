/*
** The hostile-input corpus: gen-model run on snapshots altered to attack it
** (strings that try to leave a C string or comment, path tricks, symlinks out
** of the folder, absurd dimensions, broken headers and offsets, deep JSON, a
** broken tokenizer). Every case must end with one line on stderr naming the
** problem, a non-zero exit, nothing written anywhere under the test's folder
** (which holds the snapshot, an existing models/ and a file outside both),
** and bounded time and peak memory.
*/
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define HUB GM_SHARED_DIR "/hub"
#define GOLDEN GM_SHARED_DIR "/golden"

#if defined(__SANITIZE_ADDRESS__)
#define RSS_LIMIT_KB (1024L * 1024) /* ASan's shadow memory and quarantine */
#else
#define RSS_LIMIT_KB (256L * 1024)
#endif
#define TIME_LIMIT_S 10.0

typedef struct hostile hostile;
/* Alter the snapshot copy in dir (work is the test's folder). */
typedef void (*mutate_fn)(const hostile *h, const char *dir, const char *work);

struct hostile {
    const char *what;
    const char *base;   /* a Hub copy "org/name" or "golden/<name>" */
    mutate_fn mutate;
    const char *a, *b;  /* the mutator's arguments */
    const char *extra;  /* extra gen-model arguments, one word each, space-separated */
    int rc;
    const char *want;   /* expected in the message */
};

/* ---------------------------------------------------------------------- */
/* mutators */

static char *path_in(const char *dir, const char *file)
{
    char buf[4400];
    snprintf(buf, sizeof buf, "%s/%s", dir, file);
    return strdup(buf);
}

/* Replace the first `a` in config.json with `b`. */
static void config_edit(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    char *p = path_in(dir, "config.json");
    size_t len;
    char *text = tu_read(p, &len);
    char *at = strstr(text, h->a);
    cr_assert_not_null(at, "'%s' not in %s", h->a, p);
    size_t na = strlen(h->a), nb = strlen(h->b);
    char *out = malloc(len - na + nb);
    memcpy(out, text, (size_t)(at - text));
    memcpy(out + (at - text), h->b, nb);
    memcpy(out + (at - text) + nb, at + na, len - (size_t)(at - text) - na);
    tu_write(p, out, len - na + nb);
    free(out);
    free(text);
    free(p);
}

/* Put a raw NUL byte after the first `a` in config.json. */
static void config_nul(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    char *p = path_in(dir, "config.json");
    size_t len;
    char *text = tu_read(p, &len);
    char *at = strstr(text, h->a);
    cr_assert_not_null(at);
    size_t cut = (size_t)(at - text) + strlen(h->a);
    char *out = malloc(len + 1);
    memcpy(out, text, cut);
    out[cut] = '\0';
    memcpy(out + cut + 1, text + cut, len - cut);
    tu_write(p, out, len + 1);
    free(out);
    free(text);
    free(p);
}

/* Insert `"deep": [[[...]]],` 1,000,000 levels deep at the start of file a's object. */
static void nest_deep(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    const size_t depth = 1000000;
    char *p = path_in(dir, h->a);
    size_t len;
    char *text = tu_read(p, &len);
    char *brace = strchr(text, '{');
    cr_assert_not_null(brace);
    size_t pre = (size_t)(brace - text) + 1, n = pre + 9 + 2 * depth + 1 + (len - pre);
    char *out = malloc(n);
    memcpy(out, text, pre);
    memcpy(out + pre, "\"deep\": ", 8);
    memset(out + pre + 8, '[', depth);
    memset(out + pre + 8 + depth, ']', depth);
    memcpy(out + pre + 8 + 2 * depth, ", ", 2);
    memcpy(out + pre + 10 + 2 * depth, text + pre, len - pre);
    tu_write(p, out, pre + 10 + 2 * depth + len - pre);
    free(out);
    free(text);
    free(p);
}

/* Set the value of the first weight_map entry of the index to b (raw JSON text). */
static void index_shard(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    char *p = path_in(dir, "model.safetensors.index.json");
    char *text = tu_read(p, NULL);
    char *wm = strstr(text, "\"weight_map\"");
    cr_assert_not_null(wm);
    char *colon = strchr(strchr(wm + 12, '{') + 1, ':'); /* the first entry's value */
    char *v0 = strchr(colon, '"'), *v1 = strchr(v0 + 1, '"');
    size_t n = strlen(text) - (size_t)(v1 + 1 - v0) + strlen(h->b);
    char *out = malloc(n + 1);
    snprintf(out, n + 1, "%.*s%s%s", (int)(v0 - text), text, h->b, v1 + 1);
    tu_write(p, out, n);
    free(out);
    free(text);
    free(p);
}

/* Write file a (in the snapshot) as the literal bytes b (a NULL b: empty). */
static void write_file(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    char *p = path_in(dir, h->a);
    tu_write(p, h->b ? h->b : "", h->b ? strlen(h->b) : 0);
    free(p);
}

/* The first 7 bytes of file a. */
static void truncate7(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    char *p = path_in(dir, h->a);
    char *text = tu_read(p, NULL);
    tu_write(p, text, 7);
    free(text);
    free(p);
}

/* A header claiming N = atoll(b) bytes followed by b[...] of padding: only the prefix and a little JSON. */
static void header_len(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    char *p = path_in(dir, h->a);
    uint64_t n = strtoull(h->b, NULL, 10);
    uint8_t buf[8 + 64];
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(n >> (8 * i));
    memset(buf + 8, ' ', 64);
    buf[8] = '{';
    tu_write(p, buf, sizeof buf);
    free(p);
}

/* Rewrite the safetensors header of file a with edit(), keeping the data. */
static void rewrite_header(const char *dir, const char *file, void (*edit)(cJSON *root, const char *arg),
                           const char *arg, size_t extra_data)
{
    char *p = path_in(dir, file);
    size_t len;
    uint8_t *bytes = (uint8_t *)tu_read(p, &len);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)bytes[i] << (8 * i);
    cJSON *root = cJSON_ParseWithLength((const char *)bytes + 8, (size_t)n);
    cr_assert_not_null(root, "%s: header does not parse", p);
    edit(root, arg);
    char *json = cJSON_PrintUnformatted(root);
    size_t m = strlen(json), data = len - 8 - (size_t)n;
    uint8_t *out = calloc(8 + m + data + extra_data, 1);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)m >> (8 * i));
    memcpy(out + 8, json, m);
    memcpy(out + 8 + m, bytes + 8 + n, data);
    tu_write(p, out, 8 + m + data + extra_data);
    free(out);
    cJSON_free(json);
    cJSON_Delete(root);
    free(bytes);
    free(p);
}

/* The tensor whose data starts last (or first). */
static cJSON *tensor_at(cJSON *root, int last)
{
    cJSON *best = NULL, *t;
    double best_at = 0;
    cJSON_ArrayForEach(t, root) {
        cJSON *off = cJSON_GetObjectItem(t, "data_offsets");
        if (!off)
            continue;
        double at = cJSON_GetArrayItem(off, 0)->valuedouble;
        if (!best || (last ? at > best_at : at < best_at)) {
            best = t;
            best_at = at;
        }
    }
    return best;
}

static void shift_offsets(cJSON *t, double by_begin, double by_end)
{
    cJSON *off = cJSON_GetObjectItem(t, "data_offsets");
    cJSON *b = cJSON_GetArrayItem(off, 0), *e = cJSON_GetArrayItem(off, 1);
    cJSON_SetNumberValue(b, b->valuedouble + by_begin);
    cJSON_SetNumberValue(e, e->valuedouble + by_end);
}

static void edit_overlap(cJSON *root, const char *arg)
{
    (void)arg;
    shift_offsets(tensor_at(root, 1), -2, -2); /* into the tensor before it, leaving 2 bytes at the end */
}

static void edit_hole(cJSON *root, const char *arg)
{
    (void)arg;
    shift_offsets(tensor_at(root, 1), 2, 2); /* 2 bytes nobody owns before the last tensor */
}

/* The file loses its last 2 bytes: the offsets now point past its end. */
static void truncate_data(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    char *p = path_in(dir, h->a);
    size_t len;
    char *bytes = tu_read(p, &len);
    tu_write(p, bytes, len - 2);
    free(bytes);
    free(p);
}

/* A real header of N = 100,000,000 bytes (the limit): '{' and spaces, never closed. */
static void header_big(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    const size_t n = 100000000;
    char *p = path_in(dir, h->a);
    uint8_t *buf = malloc(8 + n);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memset(buf + 8, ' ', n);
    buf[8] = '{';
    tu_write(p, buf, 8 + n);
    free(buf);
    free(p);
}

static void edit_span(cJSON *root, const char *arg)
{
    (void)arg;
    cJSON *shape = cJSON_GetObjectItem(tensor_at(root, 0), "shape");
    cJSON *d = cJSON_GetArrayItem(shape, 0);
    cJSON_SetNumberValue(d, d->valuedouble + 1); /* dtype x shape no longer fits the span */
}

static void edit_duplicate(cJSON *root, const char *arg)
{
    (void)arg;
    cJSON *t = tensor_at(root, 0);
    cJSON_AddItemToObject(root, t->string, cJSON_Duplicate(t, 1)); /* the same name twice */
}

static void edit_huge_dims(cJSON *root, const char *arg)
{
    (void)arg;
    cJSON *shape = cJSON_GetObjectItem(tensor_at(root, 0), "shape");
    cJSON *d = cJSON_GetArrayItem(shape, 0);
    cJSON_SetNumberValue(d, 4294967296.0); /* 2^32 x 2^32 x 2 bytes overflows */
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(4294967296.0));
}

typedef void (*header_edit)(cJSON *, const char *);

static void header(const hostile *h, const char *dir, const char *work)
{
    (void)work;
    static const struct { const char *name; header_edit fn; size_t extra; } edits[] = {
        {"overlap", edit_overlap, 0},  {"hole", edit_hole, 2},           
        {"span", edit_span, 0},        {"duplicate", edit_duplicate, 0}, {"huge_dims", edit_huge_dims, 0},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++)
        if (strcmp(edits[i].name, h->b) == 0) {
            rewrite_header(dir, h->a, edits[i].fn, NULL, edits[i].extra);
            return;
        }
    cr_assert_fail("no header edit '%s'", h->b);
}

/* Replace snapshot file a by a symlink to a copy of it in work/outside/ (or to b, relative, when given). */
static void symlink_out(const hostile *h, const char *dir, const char *work)
{
    char *p = path_in(dir, h->a), target[4400], cmd[13000];
    if (h->b) {
        snprintf(target, sizeof target, "%s", h->b);
    } else {
        snprintf(target, sizeof target, "%s/outside/%s", work, h->a);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/outside' && cp '%s' '%s'", work, p, target);
        cr_assert_eq(system(cmd), 0);
    }
    cr_assert_eq(unlink(p), 0);
    cr_assert_eq(symlink(target, p), 0);
    free(p);
}

/* An origin file (a) with the given JSON (b). */
static void origin(const hostile *h, const char *dir, const char *work)
{
    write_file(h, dir, work);
}

static void nothing(const hostile *h, const char *dir, const char *work)
{
    (void)h;
    (void)dir;
    (void)work;
}

/* ---------------------------------------------------------------------- */
/* the corpus */

#define QWEN "Qwen/Qwen2-0.5B"
#define SHARDED "mistralai/Mistral-7B-v0.3"
#define FULL "golden/llama_untied"
#define ARCH "\"Qwen2ForCausalLM\"\n"

static const hostile corpus[] = {
    /* strings that try to leave a C string or comment */
    {"arch_close_comment", QWEN, config_edit, ARCH, "\"Qwen2ForCausalLM*/ int evil; /*\"\n", NULL, 3, "is not supported"},
    {"arch_escaped_quote", QWEN, config_edit, ARCH, "\"Qwen2ForCausalLM\\\"; int evil; //\"\n", NULL, 3, "is not supported"},
    {"arch_newline", QWEN, config_edit, ARCH, "\"Qwen2ForCausalLM\\n#include </etc/passwd>\"\n", NULL, 3, "is not supported"},
    {"arch_escaped_nul", QWEN, config_edit, ARCH, "\"Qwen2ForCausalLM\\u0000evil\"\n", NULL, 3, "is not supported"},
    {"arch_trigraph", QWEN, config_edit, ARCH, "\"Qwen2ForCausalLM?\?/\"\n", NULL, 3, "is not supported"},
    {"arch_raw_newline", QWEN, config_edit, ARCH, "\"Qwen2ForCausalLM\n*/\"\n", NULL, 1, "config.json"},
    {"arch_raw_nul", QWEN, config_nul, "\"Qwen2ForCausal", NULL, NULL, 1, "config.json"},
    {"arch_not_utf8", QWEN, config_edit, ARCH, "\"Qwen2ForCausalLM\xff\xfe\"\n", NULL, 1, "config.json"},
    {"dtype_close_comment", QWEN, config_edit, "\"bfloat16\"", "\"bfloat16*/\"", NULL, 1, "torch_dtype must be one of"},
    {"rope_type_quote", QWEN, config_edit, "\"rope_theta\"", "\"rope_scaling\": {\"rope_type\": \"llama3\\\"*/\"}, \"rope_theta\"",
     NULL, 3, "is not supported"},
    /* architectures not a list of strings */
    {"arch_object", QWEN, config_edit, "[\n    " ARCH "  ]", "{\"a\": 1}", NULL, 1, "architectures"},
    {"arch_number", QWEN, config_edit, "[\n    " ARCH "  ]", "7", NULL, 1, "architectures"},
    {"arch_null", QWEN, config_edit, "[\n    " ARCH "  ]", "null", NULL, 1, "architectures"},
    {"arch_empty", QWEN, config_edit, "[\n    " ARCH "  ]", "[]", NULL, 1, "architectures"},
    {"arch_list_of_number", QWEN, config_edit, "[\n    " ARCH "  ]", "[1]", NULL, 1, "architectures"},
    /* shard names that leave the folder */
    {"shard_dotdot", SHARDED, index_shard, NULL, "\"../model-00001-of-00003.safetensors\"", NULL, 1, "not a plain file name"},
    {"shard_absolute", SHARDED, index_shard, NULL, "\"/etc/model.safetensors\"", NULL, 1, "not a plain file name"},
    {"shard_subdir", SHARDED, index_shard, NULL, "\"sub/model.safetensors\"", NULL, 1, "not a plain file name"},
    {"shard_escaped_nul", SHARDED, index_shard, NULL, "\"model-00001-of-00003.safetensors\\u0000/../../x\"", NULL, 1,
     "model.safetensors.index.json"},
    {"shard_nul_first", SHARDED, index_shard, NULL, "\"x\\u0000.safetensors\"", NULL, 1, "not a plain file name"},
    /* repo ids and --name */
    {"name_dotdot", QWEN, nothing, NULL, NULL, "--name ../evil", 2, "--name"},
    {"name_slash", QWEN, nothing, NULL, NULL, "--name a/b", 2, "--name"},
    {"repo_dotdot", QWEN, nothing, NULL, NULL, "--repo ../evil", 2, "--repo"},
    {"repo_dotdot_name", QWEN, nothing, NULL, NULL, "--repo org/..", 2, "--repo"},
    {"repo_three_parts", QWEN, nothing, NULL, NULL, "--repo a/b/c", 2, "--repo"},
    {"origin_repo_dotdot", QWEN, origin, ".hub.json", "{\"repo\": \"../../etc\", \"commit\": null}", NULL, 1, ".hub.json"},
    {"origin_name_dotdot", QWEN, origin, ".hub.json", "{\"repo\": \"a/b\", \"commit\": null, \"name\": \"../x\"}", NULL, 1,
     ".hub.json: expected \"name\""},
    {"origin_commit_path", QWEN, origin, ".hub.json", "{\"repo\": \"a/b\", \"commit\": \"../../../../../tmp/x\"}", NULL, 1,
     ".hub.json: expected \"commit\""},
    /* symlinks out of the snapshot */
    {"link_config_out", QWEN, symlink_out, "config.json", NULL, NULL, 1, "outside the model folder"},
    {"link_header_out", QWEN, symlink_out, "model.safetensors.head", NULL, NULL, 1, "outside the model folder"},
    {"link_shard_out", SHARDED, symlink_out, "model-00002-of-00003.safetensors.head", NULL, NULL, 1, "outside the model folder"},
    {"link_index_out", SHARDED, symlink_out, "model.safetensors.index.json", NULL, NULL, 1, "outside the model folder"},
    {"link_origin_out", QWEN, symlink_out, ".hub.json", NULL, NULL, 1, "outside the model folder"},
    {"link_to_etc", QWEN, symlink_out, "config.json", "/etc/hostname", NULL, 1, "outside the model folder"},
    /* dimensions */
    {"layers_2e9", QWEN, config_edit, "\"num_hidden_layers\": 24", "\"num_hidden_layers\": 2000000000", NULL, 1,
     "num_hidden_layers must be at most 1024"},
    {"vocab_int_max", QWEN, config_edit, "\"vocab_size\": 151936", "\"vocab_size\": 2147483647", NULL, 1, "vocab_size must be at most"},
    {"tensor_terabytes", QWEN, config_edit, "\"hidden_size\": 896", "\"hidden_size\": 1048576, \"head_dim\": 64", NULL, 1,
     "vocab_size x hidden_size = 159316443136 elements in one tensor"},
    {"product_overflows_int", QWEN, config_edit, "\"num_attention_heads\": 14",
     "\"num_attention_heads\": 65536, \"head_dim\": 65536", NULL, 1, "num_attention_heads x head_dim x hidden_size"},
    {"layers_over_int", QWEN, config_edit, "\"num_hidden_layers\": 24", "\"num_hidden_layers\": 9007199254740993", NULL, 1,
     "num_hidden_layers"},
    {"hidden_zero", QWEN, config_edit, "\"hidden_size\": 896", "\"hidden_size\": 0", NULL, 1, "hidden_size must be in"},
    {"heads_negative", QWEN, config_edit, "\"num_attention_heads\": 14", "\"num_attention_heads\": -14", NULL, 1,
     "num_attention_heads must be in"},
    {"header_dims_overflow", QWEN, header, "model.safetensors.head", "huge_dims", NULL, 1, "model.safetensors"},
    /* header sizes */
    {"header_0_bytes", QWEN, write_file, "model.safetensors.head", NULL, NULL, 1, "header too small: 0 bytes"},
    {"header_7_bytes", QWEN, truncate7, "model.safetensors.head", NULL, NULL, 1, "header too small: 7 bytes"},
    {"header_100mb_plus_1", QWEN, header_len, "model.safetensors.head", "100000001", NULL, 1, "exceeds the limit of 100000000"},
    {"header_100mb_short", QWEN, header_len, "model.safetensors.head", "100000000", NULL, 1, "model.safetensors"},
    {"header_100mb_real", QWEN, header_big, "model.safetensors.head", NULL, NULL, 1, "model.safetensors"},
    {"header_2_64_minus_1", QWEN, header_len, "model.safetensors.head", "18446744073709551615", NULL, 1, "exceeds the limit"},
    /* offsets and names */
    {"offsets_overlap", FULL, header, "model.safetensors", "overlap", NULL, 1, "model.safetensors"},
    {"offsets_hole", FULL, header, "model.safetensors", "hole", NULL, 1, "model.safetensors"},
    {"offsets_past_file", FULL, truncate_data, "model.safetensors", NULL, NULL, 1, "model.safetensors"},
    {"offsets_disagree_with_shape", FULL, header, "model.safetensors", "span", NULL, 1, "model.safetensors"},
    {"overlap_header_only", QWEN, header, "model.safetensors.head", "overlap", NULL, 1, "model.safetensors"},
    {"duplicate_tensor", QWEN, header, "model.safetensors.head", "duplicate", NULL, 1, "duplicate"},
    {"duplicate_tensor_full", FULL, header, "model.safetensors", "duplicate", NULL, 1, "duplicate"},
    /* deep JSON */
    {"deep_config", QWEN, nest_deep, "config.json", NULL, NULL, 1, "config.json"},
    {"deep_index", SHARDED, nest_deep, "model.safetensors.index.json", NULL, NULL, 1, "model.safetensors.index.json"},
};

#define N_CORPUS (sizeof corpus / sizeof corpus[0])

/*
** Criterion may re-execute the binary for each test, where pointers in the
** parameters would not survive address randomization: pass indices.
*/
static int corpus_index[N_CORPUS];

ParameterizedTestParameters(hostile, corpus)
{
    for (size_t i = 0; i < N_CORPUS; i++)
        corpus_index[i] = (int)i;
    return cr_make_param_array(int, corpus_index, N_CORPUS);
}

static void rm_rf(const char *dir)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
}

/* argv for gen-model SOURCE --out OUT extra... (extra split at spaces, in place) */
static int make_argv(char **argv, char *src, char *out, char *extra)
{
    int n = 0;
    argv[n++] = GM_GEN_MODEL;
    argv[n++] = src;
    argv[n++] = "--out";
    argv[n++] = out;
    for (char *tok = extra ? strtok(extra, " ") : NULL; tok && n < 15; tok = strtok(NULL, " "))
        argv[n++] = tok;
    argv[n] = NULL;
    return n;
}

/* A work folder with models/keep_me/ (an existing model) and outside/ beside the snapshot copy. */
static char *prepare(const char *base, char **snap)
{
    char *work = tu_tmpdir(), src[4400], dst[4400], cmd[9000];
    const char *leaf = strrchr(base, '/') + 1;
    if (strncmp(base, "golden/", 7) == 0)
        snprintf(src, sizeof src, "%s/%s", GOLDEN, leaf);
    else
        snprintf(src, sizeof src, "%s/%s", HUB, base);
    snprintf(dst, sizeof dst, "%s/%s", work, leaf);
    if (strncmp(base, "golden/", 7) == 0) {
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s'/*.json '%s'/*.safetensors '%s'/ && chmod -R u+w '%s'", dst, src,
                 src, dst, dst);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    } else {
        tu_copy_dir(src, dst);
    }
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/models/keep_me' '%s/outside' && echo old > '%s/models/keep_me/keep_me_weights.c'",
             work, work, work);
    cr_assert_eq(system(cmd), 0);
    *snap = strdup(dst);
    return work;
}

static void assert_hostile_refused(const hostile *h, int rc, const char *err, const char *before, const char *after,
                                   long rss, double secs)
{
    cr_assert_eq(rc, h->rc, "%s: exit %d, expected %d; stderr: %s", h->what, rc, h->rc, err);
    cr_assert_eq(tu_lines(err), 1, "%s: expected one line, found: %s", h->what, err);
    cr_assert(strncmp(err, "gen-model: ", 11) == 0, "%s: %s", h->what, err);
    cr_assert(strstr(err, h->want), "%s: expected '%s' in: %s", h->what, h->want, err);
    cr_assert_str_eq(after, before, "%s: something was written", h->what);
    cr_assert_lt(rss, RSS_LIMIT_KB, "%s: peak memory %ld KB, limit %ld KB", h->what, rss, RSS_LIMIT_KB);
    cr_assert_lt(secs, TIME_LIMIT_S, "%s: took %.1f s", h->what, secs);
}

ParameterizedTest(int *index, hostile, corpus, .timeout = 60)
{
    const hostile *h = &corpus[*index];
    char *snap, *work = prepare(h->base, &snap);
    h->mutate(h, snap, work);
    char *before = tu_tree_hash(work);
    char out[4400], extra[256] = "", *argv[16], *err = NULL;
    snprintf(out, sizeof out, "%s/models", work);
    if (h->extra)
        snprintf(extra, sizeof extra, "%s", h->extra);
    make_argv(argv, snap, out, extra);
    long rss = 0;
    double secs = 0;
    int rc = tu_run_argv(argv, NULL, &err, &rss, &secs);
    char *after = tu_tree_hash(work);
    cr_log_info("%s: exit %d, %ld KB, %.2f s: %s", h->what, rc, rss, secs, err);
    assert_hostile_refused(h, rc, err, before, after, rss, secs);
    free(before);
    free(after);
    free(err);
    rm_rf(work);
    free(work);
    free(snap);
}

/* ---------------------------------------------------------------------- */
/* a Hugging Face cache snapshot links into its own blobs/: allowed; elsewhere: refused */

static void make_cache(const char *work, const char *blob_dir)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "set -e; cd '%s'; r=hub/models--Qwen--Qwen2-0.5B; s=$r/snapshots/0123456789abcdef0123456789abcdef01234567; "
             "mkdir -p $r/blobs $s hub/models--other--repo/blobs; "
             "for f in config.json model.safetensors.head; do "
             "b=$(sha256sum '%s/Qwen/Qwen2-0.5B/'$f | cut -c1-64); cp '%s/Qwen/Qwen2-0.5B/'$f %s/$b; "
             "ln -s ../../../../%s/$b $s/$f; done; chmod -R u+w hub",
             work, HUB, HUB, blob_dir, blob_dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(hostile, a_cache_snapshot_may_link_into_its_own_blobs, .timeout = 60)
{
    char *work = tu_tmpdir(), src[4400], out[4400], *argv[8], *err = NULL;
    make_cache(work, "hub/models--Qwen--Qwen2-0.5B/blobs");
    snprintf(src, sizeof src, "%s/hub/models--Qwen--Qwen2-0.5B/snapshots/0123456789abcdef0123456789abcdef01234567", work);
    snprintf(out, sizeof out, "%s/models", work);
    make_argv(argv, src, out, NULL);
    int rc = tu_run_argv(argv, NULL, &err, NULL, NULL);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    free(err);
    rm_rf(work);
    free(work);
}

Test(hostile, a_cache_snapshot_may_not_link_into_another_repo, .timeout = 60)
{
    char *work = tu_tmpdir(), src[4400], out[4400], *argv[8], *err = NULL;
    make_cache(work, "hub/models--other--repo/blobs");
    snprintf(src, sizeof src, "%s/hub/models--Qwen--Qwen2-0.5B/snapshots/0123456789abcdef0123456789abcdef01234567", work);
    snprintf(out, sizeof out, "%s/models", work);
    make_argv(argv, src, out, NULL);
    int rc = tu_run_argv(argv, NULL, &err, NULL, NULL);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
    cr_assert(strstr(err, "outside the model folder"), "%s", err);
    cr_assert(!tu_exists(out), "%s was created", out);
    free(err);
    rm_rf(work);
    free(work);
}

/* ---------------------------------------------------------------------- */
/* tokenizer.json: broken merges and deep nesting, through gen-model tokenize */

typedef struct { const char *what; const char *json; int deep; const char *want; } tok_case;

static const tok_case tok_cases[] = {
    {"merge_of_missing_tokens", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, "
                                "\"merges\": [\"a q\"]}}", 0, "tokenizer.json"},
    {"merge_result_missing", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\", \"b\"]]}}",
     0, "tokenizer.json"},
    {"merge_not_a_pair", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"ab\"]}}",
     0, "tokenizer.json"},
    {"nested_1e6", NULL, 1, "tokenizer.json"},
    /* the id tables are as long as the largest id: one of 10^9 would take gigabytes */
    {"vocab_id_1e9", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1000000000}, \"merges\": []}}", 0,
     "model.vocab: expected an integer id from 0 to 16777215, found '1000000000' at byte"},
    {"vocab_id_negative", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": -3}, \"merges\": []}}", 0,
     "model.vocab: expected an integer id from 0 to 16777215, found '-3' at byte"},
    {"added_id_2e9", "{\"added_tokens\": [{\"id\": 2000000000, \"content\": \"<x>\"}], \"model\": {\"type\": \"BPE\", "
     "\"vocab\": {\"a\": 0}, \"merges\": []}}", 0, "added_tokens[0].id: expected an integer from 0 to 16777215, found 2000000000"},
};

#define N_TOK (sizeof tok_cases / sizeof tok_cases[0])
static int tok_index[N_TOK];

ParameterizedTestParameters(hostile, tokenizer)
{
    for (size_t i = 0; i < N_TOK; i++)
        tok_index[i] = (int)i;
    return cr_make_param_array(int, tok_index, N_TOK);
}

ParameterizedTest(int *index, hostile, tokenizer, .timeout = 60)
{
    const tok_case *c = &tok_cases[*index];
    char *work = tu_tmpdir(), path[4400], *argv[4], *err = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", work);
    if (c->deep) {
        const size_t depth = 1000000;
        char *s = malloc(2 * depth + 64);
        size_t n = (size_t)sprintf(s, "{\"model\": ");
        memset(s + n, '[', depth);
        memset(s + n + depth, ']', depth);
        n += 2 * depth;
        s[n++] = '}';
        tu_write(path, s, n);
        free(s);
    } else {
        tu_write(path, c->json, strlen(c->json));
    }
    char *before = tu_tree_hash(work);
    argv[0] = GM_GEN_MODEL;
    argv[1] = "tokenize";
    argv[2] = path;
    argv[3] = NULL;
    long rss = 0;
    double secs = 0;
    int rc = tu_run_argv(argv, NULL, &err, &rss, &secs);
    char *after = tu_tree_hash(work);
    cr_assert_eq(rc, 1, "%s: exit %d: %s", c->what, rc, err);
    cr_assert_eq(tu_lines(err), 1, "%s: %s", c->what, err);
    cr_assert(strstr(err, c->want), "%s: %s", c->what, err);
    cr_assert_str_eq(after, before, "%s: something was written", c->what);
    cr_assert_lt(rss, RSS_LIMIT_KB, "%s: peak memory %ld KB", c->what, rss);
    cr_assert_lt(secs, TIME_LIMIT_S, "%s: took %.1f s", c->what, secs);
    free(before);
    free(after);
    free(err);
    rm_rf(work);
    free(work);
}

/*
** A run of 400,000 combining marks through a tokenizer with an NFC normalizer (Qwen's): their canonical order is
** a sort, not a pass of swaps per mark (which took the square of the run: not done in two minutes); the ids come,
** in bounded time and memory.
*/
Test(hostile, a_long_run_of_combining_marks_is_normalized_in_bounded_time)
{
    char *work = tu_tmpdir(), text[4400], cmd[9300], *out = NULL, *err = NULL;
    snprintf(text, sizeof text, "%s/text", work);
    const size_t pairs = 200000;
    char *t = malloc(1 + 4 * pairs);
    t[0] = 'a';
    for (size_t i = 0; i < pairs; i++) /* U+0301 (class 230) then U+0316 (class 220): each pair out of order */
        memcpy(t + 1 + 4 * i, "\xcc\x81\xcc\x96", 4);
    tu_write(text, t, 1 + 4 * pairs);
    free(t);
    snprintf(cmd, sizeof cmd, "'%s' tokenize '%s/tokenizers/qwen3/tokenizer.json' < '%s' | wc -w", GM_GEN_MODEL,
             GM_SHARED_DIR, text);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    long rss = 0;
    double secs = 0;
    int rc = tu_run_argv(argv, &out, &err, &rss, &secs);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert_gt(atol(out), 1000, "%s", out);
    cr_assert_lt(secs, TIME_LIMIT_S, "took %.1f s", secs);
    cr_assert_lt(rss, RSS_LIMIT_KB, "peak memory %ld KB", rss);
    free(out);
    free(err);
    rm_rf(work);
    free(work);
}

/*
** A pre_tokenizer regex that backtracks past the regex engine's limits on the text given: one line
** naming the file and the regex with the engine's reason, exit 3 (not "out of memory"), in bounded time.
*/
Test(hostile, a_pre_tokenizer_regex_that_backtracks_too_much_is_one_line)
{
    char *work = tu_tmpdir(), path[4400], text[4400], cmd[9300], *err = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", work);
    snprintf(text, sizeof text, "%s/text", work);
    const char *json = "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(((a+)+)+)+$\"}, "
                       "\"behavior\": \"Isolated\", \"invert\": false}, \"model\": {\"type\": \"BPE\", "
                       "\"vocab\": {\"a\": 0, \"b\": 1, \"\\n\": 2}, \"merges\": []}}";
    tu_write(path, json, strlen(json));
    tu_write(text, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\n", 52);
    snprintf(cmd, sizeof cmd, "'%s' tokenize '%s' < '%s'", GM_GEN_MODEL, path, text);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    long rss = 0;
    double secs = 0;
    int rc = tu_run_argv(argv, NULL, &err, &rss, &secs);
    cr_assert_eq(rc, 3, "exit %d: %s", rc, err);
    cr_assert_eq(tu_lines(err), 1, "%s", err);
    cr_assert(strstr(err, path) && strstr(err, "Split regex '(((a+)+)+)+$' failed to match the text: ") &&
              strstr(err, "retry-limit") && !strstr(err, "out of memory"), "%s", err);
    cr_assert_lt(secs, TIME_LIMIT_S, "took %.1f s", secs);
    cr_assert_lt(rss, RSS_LIMIT_KB, "peak memory %ld KB", rss);
    free(err);
    rm_rf(work);
    free(work);
}
