/*
** A bundle's files (docs/verify.md, "The bundle"): a folder of manifest.json
** and one folder per prompt (p000, p001, ...) of C-order .npy files, <i4 or
** <f4. capture writes every file; a candidate holds what its pipeline has.
*/
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "gm/io.h"
#include "gm/kernels.h"


/* dir/prompt/file (prompt NULL: dir/file); a path too long becomes "" and fails where it is opened */
void vf_path(char *out, size_t size, const char *dir, const char *prompt, const char *file)
{
    const int n = prompt ? snprintf(out, size, "%s/%s/%s", dir, prompt, file) : snprintf(out, size, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= size)
        out[0] = '\0';
}

int vf_save(const char *dir, const char *prompt, const char *file, gm_npy_type type, int rank,
                const int64_t *shape, const void *data, gm_status *st)
{
    char path[4096];
    vf_path(path, sizeof path, dir, prompt, file);
    return gm_npy_write(path, type, rank, shape, data, st);
}

static const char *type_name(gm_npy_type t) { return t == GM_NPY_F4 ? "<f4" : "<i4"; }

static void shape_text(char *out, size_t size, int rank, const int64_t *shape)
{
    size_t k = (size_t)snprintf(out, size, "[");
    for (int i = 0; i < rank && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < size)
        snprintf(out + k, size - k, "]");
}

/*
** bundle/prompt/file as `type` of `shape` (a -1 extent takes any size, then
** filled in). Absent: NULL with st clear (the caller decides whether it may
** be); wrong type or shape: NULL with one line naming the file and the field.
*/
void *vf_load(const char *dir, const char *prompt, const char *file, gm_npy_type type, int rank,
                  int64_t *shape, gm_status *st)
{
    char path[4096], want[128], got[128];
    vf_path(path, sizeof path, dir, prompt, file);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return NULL;
    gm_npy a;
    if (gm_npy_read(path, &a, st))
        return NULL;
    int ok = a.rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = shape[i] < 0 || shape[i] == a.shape[i];
    if (a.type != type) {
        gm_fail(st, GM_EFORMAT, "%s: dtype: expected %s, found %s", path, type_name(type), type_name(a.type));
    } else if (!ok) {
        shape_text(want, sizeof want, rank, shape);
        shape_text(got, sizeof got, a.rank, a.shape);
        gm_fail(st, GM_EFORMAT, "%s: shape: expected %s (-1: any), found %s", path, want, got);
    } else {
        for (int i = 0; i < rank; i++)
            shape[i] = a.shape[i];
        return a.data;
    }
    gm_npy_free(&a);
    return NULL;
}

/* FNV-1a over tokenizer.json's bytes: enough to tell two tokenizers apart */
static void tokenizer_id(const char *weights, char *out, size_t size)
{
    char path[4096], *text = NULL;
    size_t len = 0;
    gm_status ignore = {0};
    snprintf(path, sizeof path, "%s/tokenizer.json", weights);
    snprintf(out, size, "none");
    if (gm_read_file(path, 64u << 20, &text, &len, &ignore))
        return;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    snprintf(out, size, "fnv1a64:%016llx", (unsigned long long)h);
    free(text);
}

static int json_int(const cJSON *o, const char *key, int required, int *out, const char *path, gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (required)
            return gm_fail(st, GM_EFORMAT, "%s: %s: missing", path, key);
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e9)
        return gm_fail(st, GM_EFORMAT, "%s: %s: expected a non-negative integer", path, key);
    *out = (int)v->valuedouble;
    return 0;
}

static int json_str(const cJSON *o, const char *key, char *out, size_t size, const char *path, gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= size || strpbrk(v->valuestring, "\n\r"))
        return gm_fail(st, GM_EFORMAT, "%s: %s: expected a short one-line string", path, key);
    snprintf(out, size, "%s", v->valuestring);
    return 0;
}

void vf_manifest_free(vf_manifest *m)
{
    for (int i = 0; i < m->n_prompts; i++)
        free(m->texts[i]);
}

/* dir/manifest.json: `model` and `prompts` required; the shapes when present. */
int vf_manifest_read(const char *dir, vf_manifest *m, gm_status *st)
{
    char path[4096], *text = NULL;
    size_t len = 0;
    memset(m, 0, sizeof *m);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (gm_read_file(path, 16u << 20, &text, &len, st))
        return st->code;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return gm_fail(st, GM_EFORMAT, "%s: expected a JSON object", path);
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, VF_FORMAT) != 0)
        gm_fail(st, GM_EFORMAT, "%s: format: expected \"%s\"", path, VF_FORMAT);
    else if (json_str(j, "model", m->model, sizeof m->model, path, st) == 0 && !m->model[0])
        gm_fail(st, GM_EFORMAT, "%s: model: missing", path);
    if (!st->code) {
        json_str(j, "commit", m->commit, sizeof m->commit, path, st);
        json_str(j, "kernels", m->kernels, sizeof m->kernels, path, st);
        json_str(j, "tokenizer", m->tokenizer, sizeof m->tokenizer, path, st);
        json_int(j, "vocab_size", 0, &m->vocab, path, st);
        json_int(j, "n_layers", 0, &m->n_layers, path, st);
        json_int(j, "emb_dim", 0, &m->emb, path, st);
        json_int(j, "head_dim", 0, &m->head_dim, path, st);
        json_int(j, "top_k", 0, &m->top_k, path, st);
        json_int(j, "steps", 0, &m->steps, path, st);
    }
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "prompts");
    if (!st->code && (!cJSON_IsArray(ps) || cJSON_GetArraySize(ps) < 1 || cJSON_GetArraySize(ps) > 256))
        gm_fail(st, GM_EFORMAT, "%s: prompts: expected a list of 1 to 256 prompts", path);
    const cJSON *p;
    cJSON_ArrayForEach(p, ps) {
        if (st->code)
            break;
        char name[16] = "";
        if (json_str(p, "name", name, sizeof name, path, st))
            break;
        if (!name[0] || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(name)) {
            gm_fail(st, GM_EFORMAT, "%s: prompts[%d].name: expected a folder name like p000", path, m->n_prompts);
            break;
        }
        for (int k = 0; k < m->n_prompts; k++)
            if (strcmp(m->names[k], name) == 0)
                gm_fail(st, GM_EFORMAT, "%s: prompts[%d].name: \"%s\" names another prompt too", path, m->n_prompts,
                        name);
        if (st->code)
            break;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        snprintf(m->names[m->n_prompts], sizeof m->names[0], "%s", name);
        m->texts[m->n_prompts++] = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    }
    cJSON_Delete(j);
    if (st->code)
        vf_manifest_free(m);
    return st->code;
}

/* ---------------------------------------------------------------------- */
/* the manifest a capture writes */

const char *vf_prompt_name(const vf_prompt_in *in, int i, char *buf, size_t size)
{
    if (in[i].name[0])
        return in[i].name;
    snprintf(buf, size, "p%03d", i);
    return buf;
}

static cJSON *manifest_json(const gm_model_entry *e, const rt_model *m, const char *weights, int steps,
                            const vf_prompt_in *in, int n, int f32)
{
    char tok[32];
    cJSON *j = cJSON_CreateObject(), *ps = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "format", VF_FORMAT);
    cJSON_AddStringToObject(j, "model", e->id);
    cJSON_AddStringToObject(j, "repo", e->repo);
    if (e->commit[0])
        cJSON_AddStringToObject(j, "commit", e->commit);
    else
        cJSON_AddNullToObject(j, "commit");
    cJSON_AddStringToObject(j, "kernels", gm_kernels_name());
    cJSON_AddStringToObject(j, "precision", f32 ? "f32" : "bf16");
    cJSON_AddNumberToObject(j, "rope_theta", m->cfg.rope_base);
    tokenizer_id(weights, tok, sizeof tok);
    cJSON_AddStringToObject(j, "tokenizer", tok);
    cJSON_AddNumberToObject(j, "vocab_size", m->cfg.vocab_size);
    cJSON_AddNumberToObject(j, "n_layers", m->cfg.n_layers);
    cJSON_AddNumberToObject(j, "emb_dim", m->cfg.emb_dim);
    cJSON_AddNumberToObject(j, "head_dim", m->cfg.head_dim);
    cJSON_AddNumberToObject(j, "top_k", VF_TOP_K);
    cJSON_AddNumberToObject(j, "steps", steps);
    for (int i = 0; i < n; i++) {
        cJSON *p = cJSON_CreateObject();
        char name[16];
        cJSON_AddStringToObject(p, "name", vf_prompt_name(in, i, name, sizeof name));
        if (in[i].text)
            cJSON_AddStringToObject(p, "text", in[i].text);
        else
            cJSON_AddNullToObject(p, "text");
        cJSON_AddNumberToObject(p, "n_tokens", in[i].n);
        cJSON_AddItemToArray(ps, p);
    }
    cJSON_AddItemToObject(j, "prompts", ps);
    return j;
}

int vf_manifest_write(const char *dir, const gm_model_entry *e, const rt_model *m, const char *weights, int steps,
                      const vf_prompt_in *in, int n, int f32, gm_status *st)
{
    char path[4200];
    cJSON *j = manifest_json(e, m, weights, steps, in, n, f32);
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    vf_path(path, sizeof path, dir, NULL, "manifest.json");
    if (!text)
        return gm_fail(st, GM_ENOMEM, "out of memory");
    gm_write_file(path, text, strlen(text), st);
    cJSON_free(text);
    return st->code;
}
