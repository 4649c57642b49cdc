/*
** phase0 capture and phase0 verify (see verify.h and docs/verify.md).
**
** A bundle is a folder: manifest.json, and one folder per prompt (p000, p001,
** ...) of .npy files. capture writes every file; a candidate holds what its
** pipeline has, and verify checks what those files allow and says what it
** could not check. Every comparison is in double precision.
*/
#include "verify.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gm/cli.h"
#include "gm/io.h"
#include "gm/kernels.h"
#include "gm/npy.h"
#include "gm/registry.h"
#include "gm/runner.h"
#include "gm/tokenizer.h"
#include "record.h"

#define FORMAT "gm-verify/1"

/* ---------------------------------------------------------------------- */
/* the rules */

/* a before b in a top-k row: the larger logit, then the smaller id */
static int ahead(float la, int32_t a, float lb, int32_t b)
{
    return la > lb || (la == lb && a < b);
}

void vf_top_k(const float *logits, int V, int k, int32_t *ids, float *vals)
{
    int n = 0;
    float best[64];
    if (k <= 0)
        return;
    if (k > 64) /* callers ask for VF_TOP_K (20) at most */
        k = 64;
    for (int32_t i = 0; i < V; i++) {
        const float x = isnan(logits[i]) ? -INFINITY : logits[i]; /* a NaN is never chosen over a number */
        if (n == k && !ahead(x, i, best[k - 1], ids[k - 1]))
            continue;
        int at = n < k ? n++ : k - 1;
        while (at > 0 && ahead(x, i, best[at - 1], ids[at - 1])) {
            best[at] = best[at - 1];
            ids[at] = ids[at - 1];
            at--;
        }
        best[at] = x;
        ids[at] = i;
    }
    for (int j = n; j < k; j++)
        ids[j] = -1, best[j] = -INFINITY;
    if (vals)
        memcpy(vals, best, sizeof *vals * (size_t)k);
}

static int in_top(const int32_t *row, int k, int32_t id)
{
    for (int i = 0; i < k; i++)
        if (row[i] == id)
            return 1;
    return 0;
}

vf_verdict vf_token_gate(const int32_t *ref_ids, const int32_t *ref_top, const int32_t *cand_ids,
                         const int32_t *cand_top, int steps, int top_width, int k, int *diverge, char *why,
                         size_t why_size)
{
    *diverge = -1;
    for (int s = 0; s < steps; s++) {
        if (ref_ids[s] == cand_ids[s])
            continue;
        *diverge = s;
        const int cand_in_ref = in_top(ref_top + (size_t)s * top_width, k, cand_ids[s]);
        if (!cand_in_ref) {
            snprintf(why, why_size, "step %d: the candidate chose %d, not in the reference's top-%d", s, cand_ids[s], k);
            return VF_FAIL;
        }
        if (!cand_top) {
            snprintf(why, why_size, "step %d: the candidate chose %d, in the reference's top-%d; whether the "
                     "reference's %d is in the candidate's top-%d is not known (no topk_ids.npy)", s, cand_ids[s], k,
                     ref_ids[s], k);
            return VF_UNCHECKED;
        }
        if (!in_top(cand_top + (size_t)s * top_width, k, ref_ids[s])) {
            snprintf(why, why_size, "step %d: the reference's %d is not in the candidate's top-%d", s, ref_ids[s], k);
            return VF_FAIL;
        }
        snprintf(why, why_size, "step %d: first divergence (reference %d, candidate %d), each in the other's top-%d",
                 s, ref_ids[s], cand_ids[s], k);
        return VF_OK;
    }
    if (steps == 0) {
        snprintf(why, why_size, "not checked: the candidate holds no steps");
        return VF_UNCHECKED;
    }
    snprintf(why, why_size, "all %d steps chose the same tokens", steps);
    return VF_OK;
}

double vf_threshold(int head_dim)
{
    return head_dim <= 64 ? 0.99 : head_dim <= 128 ? 0.98 : 0.97;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy's default percentile: linear between the closest ranks of the sorted values */
static double percentile(const double *sorted, int n, double q)
{
    const double at = q * (n - 1);
    const int lo = (int)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0; /* a zero-norm row counts as 0 */
}

int vf_lens(const float *ref, const float *cand, int T, int H, vf_layer *l, gm_status *st)
{
    l->pos_cos = NULL;
    if (T < 1 || H < 1)
        return gm_fail(st, GM_EFORMAT, "the lens needs at least one position of one value, found %d x %d", T, H);
    double *sorted = malloc(sizeof *sorted * (size_t)T);
    l->pos_cos = malloc(sizeof *l->pos_cos * (size_t)T);
    if (!sorted || !l->pos_cos) {
        free(sorted);
        return gm_fail(st, GM_ENOMEM, "out of memory");
    }
    double sum = 0, abs_sum = 0, rel_sum = 0;
    l->max_abs = l->max_rel = 0;
    l->nan = 0;
    for (int t = 0; t < T; t++) {
        const double c = cosine(ref + (size_t)t * H, cand + (size_t)t * H, (size_t)H);
        l->pos_cos[t] = sorted[t] = isnan(c) ? 0.0 : c;
        sum += sorted[t];
    }
    const size_t n = (size_t)T * (size_t)H;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(cand[i])) {
            l->nan++;
            continue;
        }
        const double d = fabs((double)cand[i] - ref[i]), r = d / fmax(fabs((double)ref[i]), 1e-6);
        abs_sum += d;
        rel_sum += r;
        l->max_abs = fmax(l->max_abs, d);
        l->max_rel = fmax(l->max_rel, r);
    }
    qsort(sorted, (size_t)T, sizeof *sorted, cmp_double);
    l->cos_min = sorted[0];
    l->cos_p5 = percentile(sorted, T, 0.05);
    l->cos_median = percentile(sorted, T, 0.5);
    l->cos_mean = sum / T;
    l->cos_whole = l->nan ? 0.0 : cosine(ref, cand, n);
    l->mean_abs = n > (size_t)l->nan ? abs_sum / (double)(n - (size_t)l->nan) : NAN;
    l->mean_rel = n > (size_t)l->nan ? rel_sum / (double)(n - (size_t)l->nan) : NAN;
    free(sorted);
    return 0;
}

void vf_report_free(vf_report *r)
{
    for (int i = 0; r->prompts && i < r->n_prompts; i++) {
        vf_prompt *p = &r->prompts[i];
        free(p->text);
        free(p->ref_ids);
        free(p->cand_ids);
        free(p->ref_text);
        free(p->cand_text);
        for (int k = 0; p->layers && k < p->n_layers; k++)
            free(p->layers[k].pos_cos);
        free(p->layers);
    }
    free(r->prompts);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------------- */
/* bundles */

/* dir/prompt/file (prompt NULL: dir/file); a path too long becomes "" and fails where it is opened */
static void path_of(char *out, size_t size, const char *dir, const char *prompt, const char *file)
{
    const int n = prompt ? snprintf(out, size, "%s/%s/%s", dir, prompt, file) : snprintf(out, size, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= size)
        out[0] = '\0';
}

static int save(const char *dir, const char *prompt, const char *file, gm_npy_type type, int rank,
                const int64_t *shape, const void *data, gm_status *st)
{
    char path[4096];
    path_of(path, sizeof path, dir, prompt, file);
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
static void *load(const char *dir, const char *prompt, const char *file, gm_npy_type type, int rank,
                  int64_t *shape, gm_status *st)
{
    char path[4096], want[128], got[128];
    path_of(path, sizeof path, dir, prompt, file);
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

/* The manifest's fields that say which model and tokenizer a bundle is of. */
typedef struct manifest {
    char model[128], commit[96], kernels[32], tokenizer[32];
    int vocab, n_layers, emb, head_dim, top_k, steps, n_prompts;
    char names[256][16];
    char *texts[256];
} manifest;

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

static void manifest_free(manifest *m)
{
    for (int i = 0; i < m->n_prompts; i++)
        free(m->texts[i]);
}

/* dir/manifest.json: `model` and `prompts` required; the shapes when present. */
static int read_manifest(const char *dir, manifest *m, gm_status *st)
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
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT) != 0)
        gm_fail(st, GM_EFORMAT, "%s: format: expected \"%s\"", path, FORMAT);
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
        manifest_free(m);
    return st->code;
}

/* ---------------------------------------------------------------------- */
/* capture */

typedef struct prompt_in {
    char *text;     /* NULL: given as ids */
    int32_t *ids;
    int n;
    char name[16];  /* its folder: the candidate's name for it, or "" for p000, p001, ... */
} prompt_in;

static const char *prompt_name(const prompt_in *in, int i, char *buf, size_t size)
{
    if (in[i].name[0])
        return in[i].name;
    snprintf(buf, size, "p%03d", i);
    return buf;
}

static int capture_prompt(rt_session *s, const rt_model *m, const prompt_in *in, int steps, const char *dir,
                          const char *name, gm_status *st)
{
    const gm_config *c = &m->cfg;
    const int64_t V = c->vocab_size, L = c->n_layers, H = c->emb_dim, T = in->n, K = VF_TOP_K;
    char sub[4096];
    path_of(sub, sizeof sub, dir, NULL, name);
    if (mkdir(sub, 0755) != 0)
        return gm_fail(st, GM_EIO, "%s: cannot create folder: %s", sub, strerror(errno));
    rt_result res;
    if (rt_prefill(s, in->ids, in->n, &res, st))
        return st->code;
    int32_t *ids = malloc(sizeof *ids * (size_t)steps), *top = malloc(sizeof *top * (size_t)(steps * K));
    float *vals = malloc(sizeof *vals * (size_t)(steps * K)), *last = malloc(sizeof *last * (size_t)V);
    if (!ids || !top || !vals || !last) {
        gm_fail(st, GM_ENOMEM, "out of memory");
        goto out;
    }
    {
        const int64_t sh1[1] = {T}, sh3[3] = {L, T, H}, sh2[2] = {T, H};
        if (save(dir, name, "tokens.npy", GM_NPY_I4, 1, sh1, in->ids, st) ||
            save(dir, name, "layers.npy", GM_NPY_F4, 3, sh3, res.layers, st) ||
            save(dir, name, "final_norm.npy", GM_NPY_F4, 2, sh2, res.final_norm, st))
            goto out;
    }
    for (int step = 0; step < steps; step++) {
        const float *lg = res.logits + (size_t)(res.logit_rows - 1) * (size_t)V;
        vf_top_k(lg, (int)V, (int)K, top + (size_t)step * K, vals + (size_t)step * K);
        ids[step] = top[(size_t)step * K]; /* greedy: the top-1, ties to the smaller id */
        if (step + 1 == steps) {
            memcpy(last, lg, sizeof *last * (size_t)V);
            break;
        }
        rt_result_free(&res);
        if (rt_decode_step(s, ids[step], &res, st))
            goto out;
    }
    {
        const int64_t s1[1] = {steps}, s2[2] = {steps, K}, v1[1] = {V};
        if (save(dir, name, "ids.npy", GM_NPY_I4, 1, s1, ids, st) ||
            save(dir, name, "topk_ids.npy", GM_NPY_I4, 2, s2, top, st) ||
            save(dir, name, "topk_logits.npy", GM_NPY_F4, 2, s2, vals, st) ||
            save(dir, name, "last_logits.npy", GM_NPY_F4, 1, v1, last, st))
            goto out;
    }
out:
    rt_result_free(&res);
    free(ids);
    free(top);
    free(vals);
    free(last);
    return st->code;
}

static cJSON *manifest_json(const gm_model_entry *e, const rt_model *m, const char *weights, int steps,
                            const prompt_in *in, int n, int f32)
{
    char tok[32];
    cJSON *j = cJSON_CreateObject(), *ps = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "format", FORMAT);
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
        cJSON_AddStringToObject(p, "name", prompt_name(in, i, name, sizeof name));
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

/* The whole bundle into a temporary folder beside out, renamed to out when complete. */
static int capture(const gm_model_entry *e, const char *weights, const prompt_in *in, int n, int steps, int f32,
                   double rope_theta, const char *out, gm_status *st)
{
    struct stat sb;
    if (stat(out, &sb) == 0)
        return gm_fail(st, GM_EUSAGE, "%s: already exists; remove it or choose another --out", out);
    void *w = calloc(1, e->weights_size);
    rt_layer *layers = calloc((size_t)e->n_layers, sizeof *layers);
    rt_session *s = NULL;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", out);
    int loaded = 0, made = 0;
    if (!w || !layers) {
        gm_fail(st, GM_ENOMEM, "out of memory");
        goto out;
    }
    if (e->load(w, weights, st))
        goto out;
    loaded = 1;
    rt_model m;
    e->view(w, layers, &m);
    if (rope_theta > 0) /* a wrong candidate on purpose: verify must catch it */
        m.cfg.rope_base = rope_theta;
    if (!mkdtemp(tmp)) {
        gm_fail(st, GM_EIO, "%s: cannot create a temporary folder: %s", tmp, strerror(errno));
        goto out;
    }
    made = 1;
    chmod(tmp, 0755);
    int longest = 0;
    for (int i = 0; i < n; i++)
        longest = in[i].n > longest ? in[i].n : longest;
    const rt_options o = {.precision = f32 ? RT_F32 : RT_BF16, .diagnosis = 1, .threads = 0};
    if (rt_session_new(&s, &m, &o, longest + steps, st))
        goto out;
    for (int i = 0; i < n; i++) {
        char name[16];
        if (capture_prompt(s, &m, &in[i], steps, tmp, prompt_name(in, i, name, sizeof name), st))
            goto out;
    }
    cJSON *j = manifest_json(e, &m, weights, steps, in, n, f32);
    char *text = j ? cJSON_Print(j) : NULL, path[4200];
    cJSON_Delete(j);
    snprintf(path, sizeof path, "%s/manifest.json", tmp);
    if (!text)
        gm_fail(st, GM_ENOMEM, "out of memory");
    else
        gm_write_file(path, text, strlen(text), st);
    cJSON_free(text);
    if (!st->code && rename(tmp, out) != 0)
        gm_fail(st, GM_EIO, "%s: rename from %s failed: %s", out, tmp, strerror(errno));
    else if (!st->code)
        made = 0;
out:
    if (made && gm_remove_tree(tmp) != 0)
        fprintf(stderr, "phase0: warning: %s could not be removed: %s\n", tmp, strerror(errno));
    rt_session_free(s);
    if (loaded)
        e->free(w);
    free(w);
    free(layers);
    return st->code;
}

/* ---------------------------------------------------------------------- */
/* verify */

static char *decode_text(const gm_tokenizer *t, const int32_t *ids, int n)
{
    char *text = NULL;
    size_t len = 0;
    gm_status ignore = {0};
    if (!t || gm_tokenizer_decode(t, ids, (size_t)n, 0, &text, &len, &ignore))
        return NULL;
    return text;
}

static void add_note(char *buf, size_t size, const char *what)
{
    size_t k = strlen(buf);
    snprintf(buf + k, size - k, "%s%s", k ? "; " : "", what);
}

/*
** The first VF_GATE_K ids of each of `steps` rows of top [rows][width] (a
** malloc'd [steps][VF_GATE_K]). When topk_logits.npy is beside it, each row
** is first put in the rule's order (logit descending, the smaller id first on
** ties), whatever order the file has: a tie at the boundary decides by id.
*/
static int32_t *gate_rows(const char *dir, const char *name, const int32_t *top, const int64_t *shape, int steps,
                          gm_status *st)
{
    int64_t lsh[2] = {shape[0], shape[1]};
    float *lg = load(dir, name, "topk_logits.npy", GM_NPY_F4, 2, lsh, st);
    if (st->code)
        return NULL;
    int32_t *rows = malloc(sizeof *rows * (size_t)(steps ? steps : 1) * VF_GATE_K);
    const int w = (int)shape[1];
    int32_t *ids = malloc(sizeof *ids * (size_t)w);
    float *v = malloc(sizeof *v * (size_t)w);
    if (!rows || !ids || !v) {
        free(rows);
        rows = NULL;
        gm_fail(st, GM_ENOMEM, "out of memory");
    }
    for (int s = 0; rows && s < steps; s++) {
        memcpy(ids, top + (size_t)s * w, sizeof *ids * (size_t)w);
        if (lg) {
            for (int i = 0; i < w; i++) /* a NaN sorts last, as vf_top_k never chooses one */
                v[i] = isnan(lg[(size_t)s * w + i]) ? -INFINITY : lg[(size_t)s * w + i];
            for (int i = 1; i < w; i++) /* insertion sort: rows are short */
                for (int j = i; j > 0 && ahead(v[j], ids[j], v[j - 1], ids[j - 1]); j--) {
                    const float tv = v[j];
                    const int32_t ti = ids[j];
                    v[j] = v[j - 1], ids[j] = ids[j - 1];
                    v[j - 1] = tv, ids[j - 1] = ti;
                }
        }
        memcpy(rows + (size_t)s * VF_GATE_K, ids, sizeof *rows * VF_GATE_K);
    }
    free(ids);
    free(v);
    free(lg);
    return rows;
}

/* One prompt: what both bundles hold for it, compared. */
static int verify_prompt(const char *ref, const char *cand, const manifest *rm, int i, const gm_tokenizer *tok,
                         vf_prompt *p, gm_status *st)
{
    const char *name = rm->names[i];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->text = rm->texts[i] ? strdup(rm->texts[i]) : NULL;
    p->diverge = p->first_low = -1;
    p->threshold = vf_threshold(rm->head_dim);
    int64_t tsh[1] = {-1}, csh[1], ish[1] = {-1}, top_sh[2] = {-1, rm->top_k}, ctop_sh[2];
    int32_t *rt = NULL, *ct = NULL, *rtop = NULL, *ctop = NULL, *rids = NULL, *cids = NULL;
    float *rl = NULL, *cl = NULL, *rn = NULL, *cn = NULL;
    char dir[4200], label[64];
    snprintf(dir, sizeof dir, "%s/%s", cand, name);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        gm_fail(st, GM_EFORMAT, "%s: missing: the candidate has no folder for prompt %s", dir, name);
        goto out;
    }
    if (!(rt = load(ref, name, "tokens.npy", GM_NPY_I4, 1, tsh, st))) {
        if (!st->code)
            gm_fail(st, GM_EFORMAT, "%s/%s/tokens.npy: missing from the reference", ref, name);
        goto out;
    }
    p->n_tokens = (int)tsh[0];
    if (p->n_tokens < 1) {
        gm_fail(st, GM_EFORMAT, "%s/%s/tokens.npy: shape: expected at least one token, found none", ref, name);
        goto out;
    }
    csh[0] = tsh[0];
    if (!(ct = load(cand, name, "tokens.npy", GM_NPY_I4, 1, csh, st)) && st->code)
        goto out;
    if (ct && memcmp(ct, rt, sizeof *rt * (size_t)tsh[0]) != 0) {
        gm_fail(st, GM_EFORMAT, "%s/%s/tokens.npy: the prompt's tokens differ from the reference's", cand, name);
        goto out;
    }
    /* the token gate */
    if (!(rids = load(ref, name, "ids.npy", GM_NPY_I4, 1, ish, st)) ||
        !(rtop = load(ref, name, "topk_ids.npy", GM_NPY_I4, 2, (top_sh[0] = ish[0], top_sh), st))) {
        if (!st->code)
            gm_fail(st, GM_EFORMAT, "%s/%s: the reference lacks ids.npy or topk_ids.npy", ref, name);
        goto out;
    }
    if (top_sh[1] < VF_GATE_K) {
        gm_fail(st, GM_EFORMAT, "%s/%s/topk_ids.npy: shape: expected at least %d ids a step, found %lld", ref, name,
                VF_GATE_K, (long long)top_sh[1]);
        goto out;
    }
    int64_t cish[1] = {-1};
    if (!(cids = load(cand, name, "ids.npy", GM_NPY_I4, 1, cish, st)) && st->code)
        goto out;
    ctop_sh[0] = cids ? cish[0] : -1;
    ctop_sh[1] = -1;
    if (!(ctop = load(cand, name, "topk_ids.npy", GM_NPY_I4, 2, ctop_sh, st)) && st->code)
        goto out;
    if (ctop && ctop_sh[1] < VF_GATE_K) {
        gm_fail(st, GM_EFORMAT, "%s/%s/topk_ids.npy: shape: expected at least %d ids a step, found %lld", cand, name,
                VF_GATE_K, (long long)ctop_sh[1]);
        goto out;
    }
    const int from_top = !cids && ctop; /* a top-k only candidate: each row's first id (in the rule's order) */
    if (cids || ctop) {
        const int64_t have = cids ? cish[0] : ctop_sh[0];
        int steps = (int)(have < ish[0] ? have : ish[0]);
        steps = steps < VF_GATE_N_TOKENS ? steps : VF_GATE_N_TOKENS;
        /* each side's rows at the gate's width, in the rule's order when its logits are there */
        int32_t *crow = NULL, *rrow = NULL;
        if (ctop && !(crow = gate_rows(cand, name, ctop, ctop_sh, steps, st)))
            goto out;
        if (!(rrow = gate_rows(ref, name, rtop, top_sh, steps, st))) {
            free(crow);
            goto out;
        }
        p->n_steps = steps;
        p->ref_ids = malloc(sizeof *p->ref_ids * (size_t)(steps ? steps : 1));
        p->cand_ids = malloc(sizeof *p->cand_ids * (size_t)(steps ? steps : 1));
        if (!p->ref_ids || !p->cand_ids) {
            free(crow);
            free(rrow);
            gm_fail(st, GM_ENOMEM, "out of memory");
            goto out;
        }
        memcpy(p->ref_ids, rids, sizeof *rids * (size_t)steps);
        for (int s = 0; s < steps; s++)
            p->cand_ids[s] = from_top ? crow[(size_t)s * VF_GATE_K] : cids[s];
        p->gate = vf_token_gate(p->ref_ids, rrow, p->cand_ids, crow, steps, VF_GATE_K, VF_GATE_K, &p->diverge,
                                p->gate_why, sizeof p->gate_why);
        free(crow);
        free(rrow);
        if (steps < VF_GATE_N_TOKENS) {
            char more[128];
            snprintf(more, sizeof more, " (%d of the gate's %d steps: what both bundles hold)", steps, VF_GATE_N_TOKENS);
            add_note(p->gate_why, sizeof p->gate_why, more + 1);
        }
        snprintf(label, sizeof label, "the token gate (%s)",
                 from_top ? "top-k only: each step's first id as its choice" : ctop ? "ids, top-k" : "ids only");
        add_note(p->checked, sizeof p->checked, label);
        p->ref_text = decode_text(tok, p->ref_ids, steps);
        p->cand_text = decode_text(tok, p->cand_ids, steps);
    } else {
        p->gate = VF_UNCHECKED;
        snprintf(p->gate_why, sizeof p->gate_why, "not checked: the candidate has neither ids.npy nor topk_ids.npy");
        add_note(p->unchecked, sizeof p->unchecked, "the token gate (no ids.npy, no topk_ids.npy)");
    }
    /* the lens and the block gate */
    const int64_t T = tsh[0], L = rm->n_layers, H = rm->emb;
    int64_t lsh[3] = {L, T, H}, nsh[2] = {T, H};
    rl = load(ref, name, "layers.npy", GM_NPY_F4, 3, lsh, st);
    if (st->code)
        goto out;
    cl = load(cand, name, "layers.npy", GM_NPY_F4, 3, lsh, st);
    if (st->code)
        goto out;
    rn = load(ref, name, "final_norm.npy", GM_NPY_F4, 2, nsh, st);
    cn = rn ? load(cand, name, "final_norm.npy", GM_NPY_F4, 2, nsh, st) : NULL;
    if (st->code)
        goto out;
    if (rl && cl) {
        p->T = (int)T;
        p->n_layers = (int)L + (cn ? 1 : 0);
        p->layers = calloc((size_t)p->n_layers, sizeof *p->layers);
        for (int l = 0; l < p->n_layers; l++) {
            vf_layer *x = &p->layers[l];
            const float *a = l < L ? rl + (size_t)l * T * H : rn, *b = l < L ? cl + (size_t)l * T * H : cn;
            if (l < L)
                snprintf(x->name, sizeof x->name, "layer %d", l);
            else
                snprintf(x->name, sizeof x->name, "final_norm");
            if (vf_lens(a, b, (int)T, (int)H, x, st))
                goto out;
            if (p->first_low < 0 && (x->cos_min < p->threshold || x->nan))
                p->first_low = l;
        }
        const vf_layer *b0 = &p->layers[0];
        if (b0->nan)
            p->block = VF_FAIL, snprintf(p->block_why, sizeof p->block_why, "layer 0 holds %ld NaN or Inf", b0->nan);
        else if (b0->cos_whole < 0.99)
            p->block = VF_FAIL, snprintf(p->block_why, sizeof p->block_why,
                                         "layer 0: whole-tensor cosine %.6f < 0.99", b0->cos_whole);
        else if (b0->cos_min < p->threshold)
            p->block = VF_FAIL, snprintf(p->block_why, sizeof p->block_why,
                                         "layer 0: per-position minimum cosine %.6f < %.2f (head_dim %d)", b0->cos_min,
                                         p->threshold, rm->head_dim);
        else
            p->block = VF_OK, snprintf(p->block_why, sizeof p->block_why,
                                       "layer 0: whole-tensor cosine %.6f >= 0.99, per-position minimum %.6f >= %.2f",
                                       b0->cos_whole, b0->cos_min, p->threshold);
        add_note(p->checked, sizeof p->checked, cn ? "the lens (layers, final_norm)" : "the lens (layers)");
        add_note(p->checked, sizeof p->checked, "the Phase 2 block gate");
        if (!cn)
            add_note(p->unchecked, sizeof p->unchecked, "final_norm (no final_norm.npy)");
    } else {
        p->block = VF_UNCHECKED;
        snprintf(p->block_why, sizeof p->block_why, "not checked: the %s has no layers.npy",
                 rl ? "candidate" : "reference");
        add_note(p->unchecked, sizeof p->unchecked, "the lens and the Phase 2 block gate (no layers.npy)");
    }
out:
    free(rt);
    free(ct);
    free(rtop);
    free(ctop);
    free(rids);
    free(cids);
    free(rl);
    free(cl);
    free(rn);
    free(cn);
    return st->code;
}

/* Both manifests describe one model and one tokenizer, each field the candidate gives. */
static int same_model(const manifest *r, const manifest *c, const char *cand, gm_status *st)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", cand);
    if (strcmp(r->model, c->model) != 0)
        return gm_fail(st, GM_EFORMAT, "%s: model: expected \"%s\" (the reference's), found \"%s\"", path, r->model,
                       c->model);
    if (c->tokenizer[0] && r->tokenizer[0] && strcmp(r->tokenizer, c->tokenizer) != 0)
        return gm_fail(st, GM_EFORMAT, "%s: tokenizer: expected \"%s\" (the reference's), found \"%s\"", path,
                       r->tokenizer, c->tokenizer);
    const struct { const char *name; int a, b; } f[] = {{"vocab_size", r->vocab, c->vocab},
                                                        {"n_layers", r->n_layers, c->n_layers},
                                                        {"emb_dim", r->emb, c->emb},
                                                        {"head_dim", r->head_dim, c->head_dim}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].b && f[i].a != f[i].b)
            return gm_fail(st, GM_EFORMAT, "%s: %s: expected %d (the reference's), found %d", path, f[i].name,
                           f[i].a, f[i].b);
    return 0;
}

static int verify(const char *ref, const char *cand, const char *tokenizer, vf_report *r, gm_status *st)
{
    manifest rm, cm;
    memset(r, 0, sizeof *r);
    if (read_manifest(ref, &rm, st))
        return st->code;
    const struct { const char *key; int v; } need[] = {{"vocab_size", rm.vocab}, {"n_layers", rm.n_layers},
                                                        {"emb_dim", rm.emb}, {"head_dim", rm.head_dim},
                                                        {"top_k", rm.top_k}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].v < 1) {
            manifest_free(&rm);
            return gm_fail(st, GM_EFORMAT, "%s/manifest.json: %s: missing or 0 (a reference gives its shapes)", ref,
                           need[i].key);
        }
    if (read_manifest(cand, &cm, st)) {
        manifest_free(&rm);
        return st->code;
    }
    gm_tokenizer *tok = NULL; /* for the generated texts: without one the report shows ids */
    struct stat sb;
    if (tokenizer && stat(tokenizer, &sb) == 0 && gm_tokenizer_load(&tok, tokenizer, st))
        goto out;
    if (same_model(&rm, &cm, cand, st))
        goto out;
    snprintf(r->model, sizeof r->model, "%s", rm.model);
    snprintf(r->ref_commit, sizeof r->ref_commit, "%s", rm.commit);
    snprintf(r->ref_kernels, sizeof r->ref_kernels, "%s", rm.kernels);
    snprintf(r->cand_label, sizeof r->cand_label, "%s", cand);
    r->head_dim = rm.head_dim;
    r->prompts = calloc((size_t)rm.n_prompts, sizeof *r->prompts);
    r->verdict = VF_OK;
    for (int i = 0; i < rm.n_prompts; i++) {
        r->n_prompts = i + 1;
        if (verify_prompt(ref, cand, &rm, i, tok, &r->prompts[i], st))
            goto out;
        if (r->prompts[i].gate == VF_FAIL || r->prompts[i].block == VF_FAIL)
            r->verdict = VF_FAIL;
    }
out:
    gm_tokenizer_free(tok);
    manifest_free(&rm);
    manifest_free(&cm);
    return st->code;
}

/* ---------------------------------------------------------------------- */
/* reports */

static const char *verdict_name(vf_verdict v) { return v == VF_OK ? "OK" : v == VF_FAIL ? "FAIL" : "not checked"; }

static void print_text(const vf_report *r)
{
    printf("verify %s: candidate %s against the reference (%s%s%s)\n", r->model, r->cand_label,
           r->ref_kernels[0] ? "kernels " : "", r->ref_kernels, r->ref_commit[0] ? ", commit " : "");
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        char text[600];
        printf("\n%s (%d tokens)%s%s\n", p->name, p->n_tokens, p->text ? ": " : "",
               p->text ? p0_shown(p->text, text, sizeof text) : "");
        printf("  token gate (top-%d, %d steps)  %-11s %s\n", VF_GATE_K, p->n_steps, verdict_name(p->gate), p->gate_why);
        if (p->ref_text && p->cand_text) {
            char a[600], b[600];
            printf("  reference: %s\n  candidate: %s\n", p0_shown(p->ref_text, a, sizeof a),
                   p0_shown(p->cand_text, b, sizeof b));
        }
        printf("  phase 2 block gate             %-11s %s\n", verdict_name(p->block), p->block_why);
        if (p->layers) {
            printf("  %-12s %10s %10s %10s %10s %10s %10s %10s %6s\n", "lens", "cos", "min", "p5", "median",
                   "mean", "max|err|", "max rel", "nan");
            for (int l = 0; l < p->n_layers; l++) {
                const vf_layer *x = &p->layers[l];
                printf("  %-12s %10.6f %10.6f %10.6f %10.6f %10.6f %10.3g %10.3g %6ld%s\n", x->name, x->cos_whole,
                       x->cos_min, x->cos_p5, x->cos_median, x->cos_mean, x->max_abs, x->max_rel, x->nan,
                       l == p->first_low ? "  <- first below the threshold" : "");
            }
            if (p->first_low >= 0)
                printf("  first row whose per-position cosine falls below %.2f: %s\n", p->threshold,
                       p->layers[p->first_low].name);
        }
        if (p->checked[0])
            printf("  checked: %s\n", p->checked);
        if (p->unchecked[0])
            printf("  not checked: %s\n", p->unchecked);
    }
    printf("\nverify: %s\n", r->verdict == VF_FAIL ? "FAIL" : "PASS");
}

static cJSON *num(double x) { return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

static cJSON *report_json(const vf_report *r)
{
    cJSON *j = cJSON_CreateObject(), *ps = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "model", r->model);
    cJSON_AddStringToObject(j, "candidate", r->cand_label);
    cJSON_AddBoolToObject(j, "pass", r->verdict != VF_FAIL);
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddNumberToObject(o, "n_tokens", p->n_tokens);
        cJSON *g = cJSON_CreateObject();
        cJSON_AddStringToObject(g, "verdict", verdict_name(p->gate));
        cJSON_AddStringToObject(g, "why", p->gate_why);
        cJSON_AddNumberToObject(g, "steps", p->n_steps);
        cJSON_AddItemToObject(g, "diverge", p->diverge >= 0 ? cJSON_CreateNumber(p->diverge) : cJSON_CreateNull());
        cJSON_AddItemToObject(g, "reference_ids", cJSON_CreateIntArray(p->ref_ids ? p->ref_ids : (int[]){0},
                                                                        p->ref_ids ? p->n_steps : 0));
        cJSON_AddItemToObject(g, "candidate_ids", cJSON_CreateIntArray(p->cand_ids ? p->cand_ids : (int[]){0},
                                                                        p->cand_ids ? p->n_steps : 0));
        if (p->ref_text && p->cand_text) {
            cJSON_AddStringToObject(g, "reference_text", p->ref_text);
            cJSON_AddStringToObject(g, "candidate_text", p->cand_text);
        }
        cJSON_AddItemToObject(o, "token_gate", g);
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "verdict", verdict_name(p->block));
        cJSON_AddStringToObject(b, "why", p->block_why);
        cJSON_AddItemToObject(o, "block_gate", b);
        if (p->layers) {
            cJSON *ls = cJSON_CreateArray();
            for (int l = 0; l < p->n_layers; l++) {
                const vf_layer *x = &p->layers[l];
                cJSON *y = cJSON_CreateObject();
                cJSON_AddStringToObject(y, "name", x->name);
                cJSON_AddItemToObject(y, "cos", num(x->cos_whole));
                cJSON_AddItemToObject(y, "cos_min", num(x->cos_min));
                cJSON_AddItemToObject(y, "cos_p5", num(x->cos_p5));
                cJSON_AddItemToObject(y, "cos_median", num(x->cos_median));
                cJSON_AddItemToObject(y, "cos_mean", num(x->cos_mean));
                cJSON_AddItemToObject(y, "max_abs", num(x->max_abs));
                cJSON_AddItemToObject(y, "mean_abs", num(x->mean_abs));
                cJSON_AddItemToObject(y, "max_rel", num(x->max_rel));
                cJSON_AddItemToObject(y, "mean_rel", num(x->mean_rel));
                cJSON_AddNumberToObject(y, "nan", (double)x->nan);
                cJSON_AddItemToArray(ls, y);
            }
            cJSON_AddItemToObject(o, "lens", ls);
            cJSON_AddItemToObject(o, "first_below_threshold",
                                  p->first_low >= 0 ? cJSON_CreateString(p->layers[p->first_low].name) : cJSON_CreateNull());
            cJSON_AddNumberToObject(o, "threshold", p->threshold);
        }
        cJSON_AddStringToObject(o, "checked", p->checked);
        cJSON_AddStringToObject(o, "not_checked", p->unchecked);
        cJSON_AddItemToArray(ps, o);
    }
    cJSON_AddItemToObject(j, "prompts", ps);
    return j;
}

/* ---------------------------------------------------------------------- */
/* the commands */

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_IO = 4 };

static int exit_for(const gm_status *st)
{
    return st->code == GM_EUSAGE ? EXIT_USAGE : st->code == GM_EIO || st->code == GM_ENOMEM ? EXIT_IO : EXIT_USAGE;
}

int vf_parse_ids(const char *list, int32_t **out, int *n)
{
    int32_t *ids = malloc(sizeof *ids * (strlen(list) / 2 + 1)); /* at most one id in every two bytes */
    int k = 0;
    for (const char *p = list; ids && *p;) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') /* strtol would take a sign or spaces */
            break;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',') || (*end == ',' && !end[1]))
            break;
        ids[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
        if (!*p) {
            *out = ids;
            *n = k;
            return 0;
        }
    }
    free(ids);
    return -1;
}

/* The prompts of a file (one a line, # comments): base.txt, instruct.txt or the user's. */
static int prompts_from(const char *file, const char *text, const gm_tokenizer *tok, int max, prompt_in *in, int *n,
                        gm_status *st)
{
    int line_no = 0;
    for (const char *line = text; *line && *n < max;) {
        size_t len = strcspn(line, "\n");
        line_no++;
        if (len > 0 && line[0] != '#') {
            prompt_in *p = &in[*n];
            size_t count = 0;
            if (!(p->text = strndup(line, len)))
                return gm_fail(st, GM_ENOMEM, "out of memory");
            /* verify's tokenization: the raw text with the tokenizer's default special tokens, no chat template */
            gm_status e = {0};
            if (gm_tokenizer_encode(tok, p->text, len, 1, 1, &p->ids, &count, &e) || count == 0) {
                free(p->text);
                free(p->ids);
                p->text = NULL, p->ids = NULL;
                return gm_fail(st, e.code ? e.code : GM_EFORMAT, "%s: line %d: %s", file, line_no,
                               e.code ? e.msg : "the prompt has no tokens");
            }
            p->n = (int)count;
            (*n)++;
        }
        line += len + (line[len] == '\n');
    }
    return 0;
}

static const char capture_usage[] =
    "usage: phase0 capture ID --weights DIR [--prompts base|instruct|FILE] [--max-prompts N] [--tokens LIST]\n"
    "                      [--steps N] [--f32] --out REF\n"
    "\n"
    "Write the bf16 reference bundle of model ID for verify (docs/verify.md): per prompt the tokens, the\n"
    "greedy ids of N steps (default 32) with their top-20 ids and logits, the last step's full logits, and\n"
    "the prefill's layer outputs and final norm, as .npy, with manifest.json.\n"
    "  --prompts    the canonical base or instruct prompts (default base), or a file of one prompt a line\n"
    "  --tokens     one prompt as ids (a model without a tokenizer)\n"
    "  --f32        the runner in f32 instead of bf16 (a candidate to compare, not a reference)\n"
    "  --rope-theta X  RoPE with theta X instead of the model's (a wrong candidate, to see verify catch it)\n";

int vf_capture_main(int argc, char **argv, const gm_model_entry *const *models, const char *(*prompts)(const char *))
{
    static const struct option longopts[] = {
        {"weights", required_argument, 0, 'w'}, {"prompts", required_argument, 0, 'p'},
        {"max-prompts", required_argument, 0, 'm'}, {"tokens", required_argument, 0, 't'},
        {"steps", required_argument, 0, 's'}, {"out", required_argument, 0, 'o'},
        {"f32", no_argument, 0, 'f'}, {"rope-theta", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *weights = NULL, *which = "base", *out = NULL, *tokens = NULL;
    int max = 256, steps = VF_GATE_N_TOKENS, f32 = 0, c;
    double rope_theta = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":w:p:m:t:s:o:fr:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'w': weights = optarg; break;
        case 'p': which = optarg; break;
        case 'm': max = atoi(optarg); break;
        case 't': tokens = optarg; break;
        case 's': steps = atoi(optarg); break;
        case 'o': out = optarg; break;
        case 'f': f32 = 1; break;
        case 'r': rope_theta = atof(optarg); break;
        case 'h': fputs(capture_usage, stdout); return EXIT_PASS;
        default: gm_cli_bad_option("phase0 capture", c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !weights || !out) {
        fprintf(stderr, "phase0 capture: expected a model id, --weights DIR and --out REF; see phase0 capture --help\n");
        return EXIT_USAGE;
    }
    if (steps < 1 || steps > 4096 || max < 1 || max > 256) {
        fprintf(stderr, "phase0 capture: --steps in [1, 4096] and --max-prompts in [1, 256]\n");
        return EXIT_USAGE;
    }
    const gm_model_entry *e = gm_registry_find(models, argv[optind]);
    if (!e) {
        fprintf(stderr, "phase0 capture: no model '%s' is built in\n", argv[optind]);
        return EXIT_USAGE;
    }
    prompt_in in[256] = {{0}};
    int n = 0, code = EXIT_PASS;
    gm_status st = {0};
    gm_tokenizer *tok = NULL;
    if (tokens) {
        if (vf_parse_ids(tokens, &in[0].ids, &in[0].n)) {
            fprintf(stderr, "phase0 capture: --tokens: expected ids like 1,2,3, found '%s'\n", tokens);
            return EXIT_USAGE;
        }
        n = 1;
    } else {
        char tpath[4200], *file = NULL;
        size_t len;
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", weights);
        const char *text = strcmp(which, "base") == 0 || strcmp(which, "instruct") == 0 ? prompts(which) : NULL;
        if (!text && strcmp(which, "base") != 0 && strcmp(which, "instruct") != 0 &&
            gm_read_file(which, 1u << 20, &file, &len, &st) == 0)
            text = file;
        if (!st.code && gm_tokenizer_load(&tok, tpath, &st) == 0)
            prompts_from(which, text, tok, max, in, &n, &st);
        free(file);
        if (!st.code && n == 0)
            gm_fail(&st, GM_EFORMAT, "%s: no prompts", which);
    }
    if (!st.code)
        capture(e, weights, in, n, steps, f32, rope_theta, out, &st);
    if (st.code) {
        fprintf(stderr, "phase0 capture: %s\n", st.msg);
        code = exit_for(&st);
    } else {
        printf("phase0 capture: wrote %s: %d prompt%s, %d steps each, kernels %s\n", out, n, n == 1 ? "" : "s",
               steps, gm_kernels_name());
    }
    for (int i = 0; i < n; i++) {
        free(in[i].text);
        free(in[i].ids);
    }
    gm_tokenizer_free(tok);
    return code;
}

static const char verify_usage[] =
    "usage: phase0 verify REF CAND [--tokenizer FILE] [--json] [--html FILE]\n"
    "       phase0 verify --weights DIR CAND [--json] [--html FILE]\n"
    "\n"
    "Compare a candidate bundle (an NPU pipeline's outputs, docs/verify.md) with the reference: the\n"
    "top-5 token-set gate over 32 greedy steps, the per-layer cosine lens, and Phase 2's single-block\n"
    "gate on layer 0. With --weights the reference is computed on the fly for the candidate's prompts.\n"
    "--tokenizer (default with --weights: DIR/tokenizer.json) shows the generated texts, not only ids.\n"
    "exit status: 0 every gate holds; 1 a gate failed; 2 usage or bad input; 4 file system error\n";

int vf_verify_main(int argc, char **argv, const gm_model_entry *const *models)
{
    static const struct option longopts[] = {{"json", no_argument, 0, 'j'}, {"html", required_argument, 0, 'H'},
                                             {"weights", required_argument, 0, 'w'},
                                             {"tokenizer", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *html = NULL, *weights = NULL, *tokenizer = NULL;
    char tpath[4200] = "";
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":jH:w:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'H': html = optarg; break;
        case 'w': weights = optarg; break;
        case 't': tokenizer = optarg; break;
        case 'h': fputs(verify_usage, stdout); return EXIT_PASS;
        default: gm_cli_bad_option("phase0 verify", c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - (weights ? 1 : 2)) {
        fprintf(stderr, "phase0 verify: expected REF CAND, or --weights DIR CAND; see phase0 verify --help\n");
        return EXIT_USAGE;
    }
    const char *cand = argv[argc - 1];
    char ref[4200] = "";
    gm_status st = {0};
    vf_report r = {0};
    int code, made_ref = 0;
    if (weights) { /* the reference, computed now for the candidate's prompts and steps */
        manifest cm;
        if (read_manifest(cand, &cm, &st) == 0) {
            const gm_model_entry *e = gm_registry_find(models, cm.model);
            prompt_in in[256] = {{0}};
            /* the gate walks VF_GATE_N_TOKENS steps: the reference needs no more than that */
            int steps = cm.steps > 0 && cm.steps < VF_GATE_N_TOKENS ? cm.steps : VF_GATE_N_TOKENS;
            if (!e)
                gm_fail(&st, GM_EFORMAT, "%s/manifest.json: model: \"%s\" is not built in", cand, cm.model);
            for (int i = 0; !st.code && i < cm.n_prompts; i++) {
                int64_t sh[1] = {-1};
                in[i].ids = load(cand, cm.names[i], "tokens.npy", GM_NPY_I4, 1, sh, &st);
                if (!in[i].ids && !st.code)
                    gm_fail(&st, GM_EFORMAT, "%s/%s/tokens.npy: missing: the reference needs the prompt", cand,
                            cm.names[i]);
                in[i].n = (int)sh[0];
                in[i].text = cm.texts[i] ? strdup(cm.texts[i]) : NULL;
                snprintf(in[i].name, sizeof in[i].name, "%s", cm.names[i]); /* the reference's folders are the candidate's */
            }
            /* a name no other folder has (mkdtemp), freed for capture, which builds and renames into it */
            snprintf(ref, sizeof ref, "%s.ref-XXXXXX", cand);
            if (!st.code && (!mkdtemp(ref) || rmdir(ref) != 0))
                gm_fail(&st, GM_EIO, "%s: cannot make a temporary name: %s", ref, strerror(errno));
            if (!st.code && capture(e, weights, in, cm.n_prompts, steps, 0, 0, ref, &st) == 0)
                made_ref = 1;
            for (int i = 0; i < cm.n_prompts; i++) {
                free(in[i].ids);
                free(in[i].text);
            }
            manifest_free(&cm);
        }
    } else {
        snprintf(ref, sizeof ref, "%s", argv[optind]);
    }
    if (!tokenizer && weights) { /* the model's own, beside its weights */
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", weights);
        tokenizer = tpath;
    }
    if (!st.code)
        verify(ref, cand, tokenizer, &r, &st);
    if (made_ref && gm_remove_tree(ref) != 0)
        fprintf(stderr, "phase0 verify: warning: %s could not be removed: %s\n", ref, strerror(errno));
    if (st.code) {
        fprintf(stderr, "phase0 verify: %s\n", st.msg);
        vf_report_free(&r);
        return exit_for(&st);
    }
    if (json) {
        cJSON *j = report_json(&r);
        char *text = cJSON_Print(j);
        puts(text);
        cJSON_free(text);
        cJSON_Delete(j);
    } else {
        print_text(&r);
    }
    code = r.verdict == VF_FAIL ? EXIT_FAIL : EXIT_PASS;
    if (html && vf_write_html(&r, html, &st)) {
        fprintf(stderr, "phase0 verify: %s\n", st.msg);
        code = EXIT_IO;
    }
    vf_report_free(&r);
    return code;
}
