/*
** A bundle's files (docs/verify.md, "The bundle"): a folder of manifest.json
** and one folder per prompt (p000, p001, ...) of C-order .npy files, <i4 or
** <f4. capture writes every file; a candidate holds what its pipeline has.
*/
#include "internal.h"

#include <errno.h>
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
        int any = 0;
        for (int i = 0; i < rank; i++)
            any |= shape[i] < 0;
        gm_fail(st, GM_EFORMAT, "%s: shape: expected %s%s, found %s", path, want, any ? " (-1: any)" : "", got);
    } else {
        for (int i = 0; i < rank; i++)
            shape[i] = a.shape[i];
        return a.data;
    }
    gm_npy_free(&a);
    return NULL;
}

void vf_tokenizer_id(const char *path, char *out, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    gm_status ignore = {0};
    snprintf(out, size, "none");
    if (gm_read_file(path, 64u << 20, &text, &len, &ignore))
        return;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    snprintf(out, size, "fnv1a64:%016llx", (unsigned long long)h);
    free(text);
}

/* What a JSON value is, for a message: "found 1.5", "found a string", "found a list", .. */
static const char *json_found(const cJSON *v, char *buf, size_t size)
{
    if (cJSON_IsNumber(v)) {
        snprintf(buf, size, "found %.17g", v->valuedouble);
        return buf;
    }
    const char *what = cJSON_IsString(v) ? "a string" : cJSON_IsTrue(v) ? "true" : cJSON_IsFalse(v) ? "false"
                       : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "a list" : "an object";
    snprintf(buf, size, "found %s", what);
    return buf;
}

static int json_int(const cJSON *o, const char *key, int required, int *out, const char *path, gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (required)
            return gm_fail(st, GM_EFORMAT, "%s: %s: missing", path, key);
        return 0;
    }
    char found[64];
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e9)
        return gm_fail(st, GM_EFORMAT, "%s: %s: expected a non-negative integer, %s", path, key,
                       json_found(v, found, sizeof found));
    *out = (int)v->valuedouble;
    return 0;
}

static int json_str(const cJSON *o, const char *key, char *out, size_t size, const char *path, gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    char found[64];
    if (!cJSON_IsString(v))
        return gm_fail(st, GM_EFORMAT, "%s: %s: expected a short one-line string, %s", path, key,
                       json_found(v, found, sizeof found));
    if (strlen(v->valuestring) >= size || strpbrk(v->valuestring, "\n\r"))
        return gm_fail(st, GM_EFORMAT, "%s: %s: expected a short one-line string (at most %zu bytes), found %s", path,
                       key, size - 1, strpbrk(v->valuestring, "\n\r") ? "a line break" : "a longer one");
    snprintf(out, size, "%s", v->valuestring);
    return 0;
}

/*
** A prompt's "name", the folder of its files: a-z, 0-9, _ and -, shorter than
** size. A path (a '/' or '..', which would reach outside the bundle) is
** refused as one.
*/
static int prompt_name(const cJSON *p, int i, char *out, size_t size, const char *path, gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, "name");
    const char *name = cJSON_IsString(v) ? v->valuestring : "";
    const size_t n = strlen(name);
    if (strchr(name, '/') || strstr(name, ".."))
        return gm_fail(st, GM_EFORMAT, "%s: prompts[%d].name: expected a folder name like p000, found a path (a '/' "
                       "or '..')", path, i);
    if (!n || n >= size || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n)
        return gm_fail(st, GM_EFORMAT, "%s: prompts[%d].name: expected a folder name like p000 (a-z, 0-9, _ and -, "
                       "at most %zu characters)%s", path, i, size - 1,
                       cJSON_IsString(v) ? "" : v && !cJSON_IsNull(v) ? ", found no string" : ", found none");
    memcpy(out, name, n + 1);
    return 0;
}

void vf_manifest_free(vf_manifest *m)
{
    for (int i = 0; i < m->n_prompts; i++)
        free(m->texts[i]);
    free(m->op_layers);
    m->op_layers = NULL;
    m->n_op_layers = 0;
}

/* ---------------------------------------------------------------------- */
/* the ops inside a block */

const vf_op_info vf_ops[RT_N_OPS] = {
    [RT_OP_INPUT] = {"input", "the block's input: the residual stream", {NULL}},
    [RT_OP_ATTN_NORM] = {"attn_norm", "attn_norm(input)", {"input"}},
    [RT_OP_Q] = {"q_proj", "q after q_proj, with its bias where the family has one", {"attn_norm"}},
    [RT_OP_K] = {"k_proj", "k after k_proj, with its bias where the family has one", {"attn_norm"}},
    [RT_OP_V] = {"v_proj", "v after v_proj, with its bias where the family has one", {"attn_norm"}},
    [RT_OP_Q_NORM] = {"q_norm", "q after the per-head RMSNorm (Qwen3)", {"q_proj"}},
    [RT_OP_K_NORM] = {"k_norm", "k after the per-head RMSNorm (Qwen3)", {"k_proj"}},
    [RT_OP_Q_ROPE] = {"q_rope", "q after RoPE", {"q_norm"}},
    [RT_OP_K_ROPE] = {"k_rope", "k after RoPE", {"k_norm"}},
    [RT_OP_ATTN] = {"attn", "causal softmax(q k^T / sqrt(head_dim)) v, the heads side by side, before o_proj",
                    {"q_rope", "k_rope", "v_proj"}},
    [RT_OP_O_PROJ] = {"o_proj", "o_proj(attn)", {"attn"}},
    [RT_OP_ATTN_RESIDUAL] = {"attn_residual", "input + o_proj: the residual after attention", {"input", "o_proj"}},
    [RT_OP_FFN_NORM] = {"ffn_norm", "ffn_norm(attn_residual)", {"attn_residual"}},
    [RT_OP_GATE] = {"gate", "gate_proj(ffn_norm)", {"ffn_norm"}},
    [RT_OP_UP] = {"up", "up_proj(ffn_norm)", {"ffn_norm"}},
    [RT_OP_SWIGLU] = {"swiglu", "silu(gate) * up", {"gate", "up"}},
    [RT_OP_DOWN] = {"down", "down_proj(swiglu)", {"swiglu"}},
    [RT_OP_OUTPUT] = {"output", "attn_residual + down: the block's output (layers.npy's row)", {"attn_residual", "down"}},
};

int vf_op_width(const rt_model *m, rt_op op)
{
    const gm_config *c = &m->cfg;
    const int H = c->emb_dim, Q = c->n_heads * c->head_dim, KV = c->n_kv_heads * c->head_dim, F = c->hidden_dim;
    switch (op) {
    case RT_OP_Q_NORM: return m->layers[0].q_norm ? Q : 0;
    case RT_OP_K_NORM: return m->layers[0].k_norm ? KV : 0;
    case RT_OP_Q: case RT_OP_Q_ROPE: case RT_OP_ATTN: return Q;
    case RT_OP_K: case RT_OP_V: case RT_OP_K_ROPE: return KV;
    case RT_OP_GATE: case RT_OP_UP: case RT_OP_SWIGLU: return F;
    default: return H;
    }
}

void vf_op_path(char *out, size_t size, const char *dir, const char *prompt, int layer, rt_op op)
{
    char file[96];
    snprintf(file, sizeof file, "ops/%d/%s.npy", layer, vf_ops[op].name);
    vf_path(out, size, dir, prompt, file);
}

/* The manifest's "ops": its layers and each op's width. */
static int read_ops(const cJSON *j, vf_manifest *m, const char *path, gm_status *st)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "ops"), *ls, *list, *x;
    if (!o || cJSON_IsNull(o))
        return 0;
    ls = cJSON_GetObjectItemCaseSensitive(o, "layers");
    list = cJSON_GetObjectItemCaseSensitive(o, "list");
    if (!cJSON_IsArray(ls) || !cJSON_IsArray(list))
        return gm_fail(st, GM_EFORMAT, "%s: ops: expected {\"layers\": [...], \"list\": [...]}", path);
    if (!(m->op_layers = malloc(sizeof *m->op_layers * (size_t)(cJSON_GetArraySize(ls) + 1))))
        return gm_fail(st, GM_ENOMEM, "out of memory");
    cJSON_ArrayForEach(x, ls) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble > 1e6 || (m->n_layers && x->valuedouble >= m->n_layers))
            return gm_fail(st, GM_EFORMAT, "%s: ops.layers[%d]: expected a layer in [0, %d)", path, m->n_op_layers,
                           m->n_layers);
        m->op_layers[m->n_op_layers++] = (int)x->valuedouble;
    }
    int i = 0;
    cJSON_ArrayForEach(x, list) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(x, "name");
        int op = 0, width = 0;
        while (op < RT_N_OPS && !(cJSON_IsString(name) && strcmp(name->valuestring, vf_ops[op].name) == 0))
            op++;
        if (op == RT_N_OPS)
            return gm_fail(st, GM_EFORMAT, "%s: ops.list[%d].name: expected an op of the block (input, attn_norm, "
                           "... output)", path, i);
        if (json_int(x, "width", 1, &width, path, st))
            return st->code;
        m->op_width[op] = width;
        i++;
    }
    return 0;
}

/* dir/manifest.json: `model` and `prompts` required; the shapes when present. */
cJSON *vf_read_json(const char *path, size_t max, gm_status *st)
{
    char *text = NULL;
    size_t len = 0;
    if (gm_read_file(path, max, &text, &len, st))
        return NULL;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!j)
        gm_fail(st, GM_EFORMAT, "%s: expected JSON, found text that is not", path);
    return j;
}

int vf_manifest_read(const char *dir, vf_manifest *m, gm_status *st)
{
    char path[4096];
    memset(m, 0, sizeof *m);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) /* not a bundle: bad input, not a file system error */
        return gm_fail(st, GM_EFORMAT, "%s: missing: a bundle is a folder with manifest.json (docs/verify.md; a "
                       "candidate's may be a copy of the reference's)", path);
    cJSON *j = vf_read_json(path, 16u << 20, st);
    if (!j)
        return st->code;
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
        /* what capture ran with, read as given: a candidate's own words there are not checked */
        json_str(j, "precision", m->precision, sizeof m->precision, path, st);
        const cJSON *theta = cJSON_GetObjectItemCaseSensitive(j, "rope_theta");
        m->rope_theta = cJSON_IsNumber(theta) ? theta->valuedouble : 0;
        json_int(j, "vocab_size", 0, &m->vocab, path, st);
        json_int(j, "n_layers", 0, &m->n_layers, path, st);
        json_int(j, "emb_dim", 0, &m->emb, path, st);
        json_int(j, "head_dim", 0, &m->head_dim, path, st);
        json_int(j, "top_k", 0, &m->top_k, path, st);
        json_int(j, "steps", 0, &m->steps, path, st);
        if (!st->code)
            read_ops(j, m, path, st);
    }
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "prompts");
    if (!st->code && (!cJSON_IsArray(ps) || cJSON_GetArraySize(ps) < 1 || cJSON_GetArraySize(ps) > 256))
        gm_fail(st, GM_EFORMAT, "%s: prompts: expected a list of 1 to 256 prompts", path);
    const cJSON *p;
    cJSON_ArrayForEach(p, ps) {
        if (st->code)
            break;
        char name[16] = "";
        if (prompt_name(p, m->n_prompts, name, sizeof name, path, st))
            break;
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

/* "ops": the layers captured, where each op's file is, and each op the family has: what it reads, its shape */
static cJSON *ops_json(const rt_model *m, const unsigned char *ops)
{
    cJSON *o = cJSON_CreateObject(), *ls = cJSON_CreateArray(), *list = cJSON_CreateArray();
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (ops[l])
            cJSON_AddItemToArray(ls, cJSON_CreateNumber(l));
    cJSON_AddItemToObject(o, "layers", ls);
    cJSON_AddStringToObject(o, "file", "<prompt>/ops/<layer>/<name>.npy");
    for (int op = 0; op < RT_N_OPS; op++) {
        const int width = vf_op_width(m, (rt_op)op);
        if (!width)
            continue;
        cJSON *x = cJSON_CreateObject(), *in = cJSON_CreateArray(), *shape = cJSON_CreateArray();
        cJSON_AddStringToObject(x, "name", vf_ops[op].name);
        cJSON_AddStringToObject(x, "what", vf_ops[op].what);
        for (int k = 0; k < 3 && vf_ops[op].inputs[k]; k++) {
            const char *name = vf_ops[op].inputs[k];
            /* without Qwen3's norms RoPE reads the projection */
            if (!m->layers[0].q_norm && strcmp(name, "q_norm") == 0)
                name = "q_proj";
            if (!m->layers[0].k_norm && strcmp(name, "k_norm") == 0)
                name = "k_proj";
            cJSON_AddItemToArray(in, cJSON_CreateString(name));
        }
        cJSON_AddItemToObject(x, "inputs", in);
        cJSON_AddItemToArray(shape, cJSON_CreateString("n_tokens"));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(width));
        cJSON_AddItemToObject(x, "shape", shape);
        cJSON_AddNumberToObject(x, "width", width);
        cJSON_AddStringToObject(x, "dtype", "<f4");
        cJSON_AddItemToArray(list, x);
    }
    cJSON_AddItemToObject(o, "list", list);
    return o;
}

static cJSON *manifest_json(const gm_model_entry *e, const rt_model *m, const char *weights, int steps,
                            const vf_prompt_in *in, int n, int f32, const unsigned char *ops)
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
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", weights);
    vf_tokenizer_id(tpath, tok, sizeof tok);
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
    if (ops)
        cJSON_AddItemToObject(j, "ops", ops_json(m, ops));
    return j;
}

int vf_manifest_write(const char *dir, const gm_model_entry *e, const rt_model *m, const char *weights, int steps,
                      const vf_prompt_in *in, int n, int f32, const unsigned char *ops, gm_status *st)
{
    char path[4200];
    cJSON *j = manifest_json(e, m, weights, steps, in, n, f32, ops);
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    vf_path(path, sizeof path, dir, NULL, "manifest.json");
    if (!text)
        return gm_fail(st, GM_ENOMEM, "out of memory");
    gm_write_file(path, text, strlen(text), st);
    cJSON_free(text);
    return st->code;
}
