/*
** phase0 capture: the model's real weights through the runner, each prompt's
** prefill and greedy steps written as a bundle (bundle.c) into a temporary
** folder beside the output, renamed into place when complete. The ops inside
** the chosen layers come from the runner's observer (rt_observer) during the
** prefill, each written as it is made.
*/
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_check.h"
#include "gm/io.h"
#include "gm/lock.h"
#include "gm/runner.h"

/* The observer's state: which layers, where their ops go, the first error. */
typedef struct op_sink {
    const unsigned char *layers; /* [n_layers] nonzero: capture its ops */
    int active;                  /* during a prefill only */
    const char *dir, *prompt;
    gm_status st;
} op_sink;

static int sink_wants(void *ctx, int layer)
{
    const op_sink *k = ctx;
    return k->active && k->layers && k->layers[layer];
}

/* mkdir that may find the folder there */
static int make_dir(const char *path, gm_status *st)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return gm_fail(st, GM_EIO, "%s: cannot create folder: %s", path, strerror(errno));
    return 0;
}

static void sink_op(void *ctx, int layer, rt_op op, const float *rows, int n, int width)
{
    op_sink *k = ctx;
    char path[4300], sub[64];
    if (k->st.code) /* the first error is the one reported */
        return;
    snprintf(sub, sizeof sub, "ops/%d", layer);
    vf_path(path, sizeof path, k->dir, k->prompt, "ops");
    if (make_dir(path, &k->st))
        return;
    vf_path(path, sizeof path, k->dir, k->prompt, sub);
    if (make_dir(path, &k->st))
        return;
    vf_op_path(path, sizeof path, k->dir, k->prompt, layer, op);
    gm_npy_write(path, GM_NPY_F4, 2, (const int64_t[]){n, width}, rows, &k->st);
}

/* x[0..n) finite; else st says which of prompt's outputs is not, and where to look */
static int nonfinite(gm_status *st, const char *prompt, const char *what, const float *x, size_t n, const char *look)
{
    for (size_t i = 0; x && i < n; i++)
        if (!isfinite(x[i]))
            return gm_fail(st, GM_EFORMAT, "prompt %s: the runner's %s hold %s (element %zu): no reference is written "
                           "from them; the weights hold NaN or Inf: %s", prompt, what, isnan(x[i]) ? "NaN" : "Inf", i,
                           look);
    return 0;
}

static int capture_prompt(rt_session *s, const rt_model *m, const vf_prompt_in *in, int steps, const char *dir,
                          const char *name, op_sink *sink, const char *look, gm_status *st)
{
    const gm_config *c = &m->cfg;
    const int64_t V = c->vocab_size, L = c->n_layers, H = c->emb_dim, T = in->n, K = VF_TOP_K;
    char sub[4096];
    vf_path(sub, sizeof sub, dir, NULL, name);
    if (mkdir(sub, 0755) != 0)
        return gm_fail(st, GM_EIO, "%s: cannot create folder: %s", sub, strerror(errno));
    rt_result res;
    *sink = (op_sink){.layers = sink->layers, .active = 1, .dir = dir, .prompt = name}; /* the prefill's ops only */
    const int failed = rt_prefill(s, in->ids, in->n, &res, st);
    sink->active = 0;
    if (failed)
        return st->code;
    if (sink->st.code) {
        rt_result_free(&res);
        return gm_fail(st, sink->st.code, "%s", sink->st.msg);
    }
    /* a reference is finite: NaN or Inf out of the runner is the weights' (gate 2 names the tensor) */
    if (nonfinite(st, name, "layers", res.layers, (size_t)(L * T * H), look) ||
        nonfinite(st, name, "final_norm", res.final_norm, (size_t)(T * H), look)) {
        rt_result_free(&res);
        return st->code;
    }
    int32_t *ids = malloc(sizeof *ids * (size_t)steps), *top = malloc(sizeof *top * (size_t)(steps * K));
    float *vals = malloc(sizeof *vals * (size_t)(steps * K)), *last = malloc(sizeof *last * (size_t)V);
    if (!ids || !top || !vals || !last) {
        gm_fail(st, GM_ENOMEM, "out of memory");
        goto out;
    }
    {
        const int64_t sh1[1] = {T}, sh3[3] = {L, T, H}, sh2[2] = {T, H};
        if (vf_save(dir, name, "tokens.npy", GM_NPY_I4, 1, sh1, in->ids, st) ||
            vf_save(dir, name, "layers.npy", GM_NPY_F4, 3, sh3, res.layers, st) ||
            vf_save(dir, name, "final_norm.npy", GM_NPY_F4, 2, sh2, res.final_norm, st))
            goto out;
    }
    for (int step = 0; step < steps; step++) {
        const float *lg = res.logits + (size_t)(res.logit_rows - 1) * (size_t)V;
        if (nonfinite(st, name, "logits", lg, (size_t)V, look))
            goto out;
        vf_top_k(lg, (int)V, (int)K, top + (size_t)step * K, vals + (size_t)step * K);
        ids[step] = top[(size_t)step * K]; /* greedy: the top-1, ties to the smaller id */
        if (step + 1 == steps) {
            memcpy(last, lg, sizeof *last * (size_t)V);
            break;
        }
        rt_result_free(&res);
        if (gm_interrupted()) {
            gm_fail(st, GM_EIO, "interrupted at %s step %d: no bundle written", name, step);
            goto out;
        }
        if (rt_decode_step(s, ids[step], &res, st))
            goto out;
    }
    {
        const int64_t s1[1] = {steps}, s2[2] = {steps, K}, v1[1] = {V};
        if (vf_save(dir, name, "ids.npy", GM_NPY_I4, 1, s1, ids, st) ||
            vf_save(dir, name, "topk_ids.npy", GM_NPY_I4, 2, s2, top, st) ||
            vf_save(dir, name, "topk_logits.npy", GM_NPY_F4, 2, s2, vals, st) ||
            vf_save(dir, name, "last_logits.npy", GM_NPY_F4, 1, v1, last, st))
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

int vf_capture(const gm_model_entry *e, const char *weights, const vf_prompt_in *in, int n, const vf_capture_opts *co,
               const char *out, gm_status *st)
{
    struct stat sb;
    if (stat(out, &sb) == 0)
        return gm_fail(st, GM_EUSAGE, "%s: already exists; remove it or choose another --out", out);
    /* gate 3 first: the weights must be those of the model the entry was generated from */
    char diff[1024];
    if (p0_config_check(e, weights, diff, sizeof diff, st))
        return st->code;
    if (diff[0])
        return gm_fail(st, GM_EFORMAT, "%s/config.json: not the model %s was generated from (%s): a reference from "
                       "these weights would be another model's; use its own weights, or scaffold these with gen-model",
                       weights, e->id, diff);
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
    if (co->rope_theta > 0) /* a wrong candidate on purpose: verify must catch it */
        m.cfg.rope_base = co->rope_theta;
    gm_catch_interrupts(); /* Ctrl-C ends the run at the next step, and the temporary folder goes */
    if (!mkdtemp(tmp)) {
        gm_fail(st, GM_EIO, "%s: cannot create a temporary folder: %s", tmp, strerror(errno));
        goto out;
    }
    made = 1;
    chmod(tmp, 0755);
    int longest = 0;
    for (int i = 0; i < n; i++)
        longest = in[i].n > longest ? in[i].n : longest;
    op_sink sink = {.layers = co->ops};
    char look[600]; /* where to look when the runner's outputs are not finite */
    snprintf(look, sizeof look, "phase0 %s --weights %s (gate 2) names the tensor", e->id, weights);
    const rt_options o = {.precision = co->f32 ? RT_F32 : RT_BF16, .diagnosis = 1, .threads = 0,
                          .observer = {sink_wants, sink_op, &sink}};
    p0_note_positions(co->prog, &m.cfg, longest + co->steps - 1); /* the last step's token is not run */
    if (rt_session_new(&s, &m, &o, longest + co->steps, st))
        goto out;
    for (int i = 0; i < n; i++) {
        char name[16];
        if (capture_prompt(s, &m, &in[i], co->steps, tmp, vf_prompt_name(in, i, name, sizeof name), &sink, look, st))
            goto out;
        if (gm_interrupted()) {
            gm_fail(st, GM_EIO, "interrupted after %s: no bundle written", name);
            goto out;
        }
    }
    if (vf_manifest_write(tmp, e, &m, weights, co->steps, in, n, co->f32, co->ops, st))
        goto out;
    if (gm_interrupted()) {
        gm_fail(st, GM_EIO, "interrupted: no bundle written");
        goto out;
    }
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
