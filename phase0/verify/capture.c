/*
** phase0 capture: the model's real weights through the runner, each prompt's
** prefill and greedy steps written as a bundle (bundle.c) into a temporary
** folder beside the output, renamed into place when complete.
*/
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gm/io.h"
#include "gm/runner.h"

static int capture_prompt(rt_session *s, const rt_model *m, const vf_prompt_in *in, int steps, const char *dir,
                          const char *name, gm_status *st)
{
    const gm_config *c = &m->cfg;
    const int64_t V = c->vocab_size, L = c->n_layers, H = c->emb_dim, T = in->n, K = VF_TOP_K;
    char sub[4096];
    vf_path(sub, sizeof sub, dir, NULL, name);
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
        if (vf_save(dir, name, "tokens.npy", GM_NPY_I4, 1, sh1, in->ids, st) ||
            vf_save(dir, name, "layers.npy", GM_NPY_F4, 3, sh3, res.layers, st) ||
            vf_save(dir, name, "final_norm.npy", GM_NPY_F4, 2, sh2, res.final_norm, st))
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
    if (!mkdtemp(tmp)) {
        gm_fail(st, GM_EIO, "%s: cannot create a temporary folder: %s", tmp, strerror(errno));
        goto out;
    }
    made = 1;
    chmod(tmp, 0755);
    int longest = 0;
    for (int i = 0; i < n; i++)
        longest = in[i].n > longest ? in[i].n : longest;
    const rt_options o = {.precision = co->f32 ? RT_F32 : RT_BF16, .diagnosis = 1, .threads = 0};
    if (rt_session_new(&s, &m, &o, longest + co->steps, st))
        goto out;
    for (int i = 0; i < n; i++) {
        char name[16];
        if (capture_prompt(s, &m, &in[i], co->steps, tmp, vf_prompt_name(in, i, name, sizeof name), st))
            goto out;
    }
    if (vf_manifest_write(tmp, e, &m, weights, co->steps, in, n, co->f32, st))
        goto out;
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
