/*
** The generated <id>_cpu_helpers.c of every golden model (rms_norm,
** attention_reference, softmax) against what the runner captured from the
** real weights (phase0 capture --ops all): rms_norm on a block's input gives
** its attn_norm and, on the last layer's output with the final norm's weights,
** final_norm.npy; attention_reference on q_rope, k_rope and v_proj gives attn.
** The helpers compute in f32 and round nowhere; the capture is bf16, rounded
** where Hugging Face rounds: each value may differ by what those roundings
** allow (the bound of each is written where it is checked), and no more.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/npy.h"
#include "gm/registry.h"
#include "golden_util.h"
#include "llama3_tied/llama3_tied_cpu_helpers.h"
#include "llama_f32_checkpoint/llama_f32_checkpoint_cpu_helpers.h"
#include "llama_untied/llama_untied_cpu_helpers.h"
#include "mistral_untied/mistral_untied_cpu_helpers.h"
#include "qwen2_tied/qwen2_tied_cpu_helpers.h"
#include "qwen3_tied/qwen3_tied_cpu_helpers.h"
#include "util.h"

#define U (1.0 / 256)          /* bf16's unit roundoff */
#define E32 (1.0 / 16777216.0) /* fp32's */

typedef struct helpers {
    const char *id;
    void (*rms_norm)(float *out, const float *x, const gm_bf16 *weight, int n);
    void (*attention)(float *out, const float *q, const float *k, const float *v, int seq_len, float *scores);
} helpers;

/* every golden but llama_untied_sharded, whose config and so whose helpers are llama_untied's */
#define HELPERS(id) {#id, id##_rms_norm, id##_attention_reference}
static const helpers all[] = {HELPERS(llama3_tied),    HELPERS(llama_f32_checkpoint), HELPERS(llama_untied),
                              HELPERS(mistral_untied), HELPERS(qwen2_tied),           HELPERS(qwen3_tied)};

static char *work;

static void setup(void) { work = tu_tmpdir(); }

static void teardown(void) { tu_rmtree(work); }

TestSuite(cpu_helpers, .init = setup, .fini = teardown, .timeout = 120);

static gm_npy npy(const char *dir, const char *file)
{
    char path[4400];
    gm_npy a;
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/p000/%s", dir, file);
    cr_assert_eq(gm_npy_read(path, &a, &st), 0, "%s", st.msg);
    return a;
}

/*
** RMSNorm rows: the helper's out against the capture's bf(w * bf(x * r)).
** Two roundings of bf16 move the exact value by at most (2U + U^2) of it; the
** helper's f32 sums and products by a few 1e-6 of it.
*/
static void expect_norm(const char *what, const helpers *h, const float *x, const float *got, const gm_bf16 *w,
                        int T, int H)
{
    float *out = malloc(sizeof *out * (size_t)H);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        h->rms_norm(out, x + (size_t)t * H, w, H);
        for (int i = 0; i < H; i++) {
            const double bound = (2 * U + U * U + 3e-5) * fabs(out[i]) + 1e-30;
            worst = fmax(worst, fabs((double)got[(size_t)t * H + i] - out[i]) / bound);
        }
    }
    cr_expect_leq(worst, 1.0, "%s %s: rms_norm differs by %.3g times what bf16's roundings allow", h->id, what, worst);
    free(out);
}

/*
** Attention rows: the helper's out against the capture's, whose scores are
** rounded twice (bf(bf(q.k) * scale)), probabilities once, probs . v once.
** A score moved by at most delta moves each probability by a factor within
** e^(+-2 delta); so an output by rho * sum_j p_j |v_j| with rho = e^(2
** delta)(1 + U)(1 + eta) - 1, eta the f32 exp and sums of both sides, plus the
** one rounding of the sum (U of it).
*/
static void expect_attention(const char *what, const helpers *h, const gm_config *c, const float *q, const float *k,
                             const float *v, const float *got, int T)
{
    const int nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim, g = nh / nkv;
    const size_t qw = (size_t)nh * hd, kvw = (size_t)nkv * hd;
    float *out = malloc(sizeof *out * (size_t)T * qw), *scores = malloc(sizeof *scores * (size_t)T);
    double *p = malloc(sizeof *p * (size_t)T), worst = 0;
    const double scale = (float)(1.0 / sqrt((double)hd));
    h->attention(out, q, k, v, T, scores);
    for (int t = 0; t < T; t++)
        for (int head = 0; head < nh; head++) {
            const float *qt = q + t * qw + (size_t)head * hd;
            double delta = 0, max = -INFINITY, sum = 0;
            for (int j = 0; j <= t; j++) {
                const float *kj = k + j * kvw + (size_t)(head / g) * hd;
                double s = 0, acc = 0;
                for (int d = 0; d < hd; d++)
                    s += (double)qt[d] * kj[d], acc += fabs((double)qt[d] * kj[d]);
                p[j] = s * scale;
                delta = fmax(delta, (2 * U + U * U) * fabs(p[j]) + 2 * hd * E32 * acc * scale);
                max = fmax(max, p[j]);
            }
            for (int j = 0; j <= t; j++)
                sum += p[j] = exp(p[j] - max);
            const double eta = (2.0 * t + 10) * E32, rho = exp(2 * delta) * (1 + U) * (1 + eta) - 1;
            for (int d = 0; d < hd; d++) {
                double pv = 0;
                for (int j = 0; j <= t; j++)
                    pv += p[j] / sum * fabs((double)v[j * kvw + (size_t)(head / g) * hd + d]);
                const size_t at = t * qw + (size_t)head * hd + d;
                const double bound =
                    rho * pv + 2 * (t + 1) * E32 * (1 + rho) * pv + U * (fabs(out[at]) + rho * pv) + 1e-30;
                worst = fmax(worst, fabs((double)got[at] - out[at]) / bound);
            }
        }
    cr_expect_leq(worst, 1.0, "%s %s: attention_reference differs by %.3g times what bf16's roundings allow", h->id,
                  what, worst);
    free(out);
    free(scores);
    free(p);
}

Test(cpu_helpers, reproduce_the_captured_attn_norm_attention_and_final_norm_of_every_golden)
{
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const helpers *h = &all[i];
        const gm_model_entry *e = gm_registry_find(gm_golden_models, h->id);
        cr_assert_not_null(e, "%s", h->id);
        char weights[4200], dir[4400], cmd[16384], *err = NULL, *toks = tg_tokens_arg(h->id);
        snprintf(weights, sizeof weights, "%s/golden/%s", GM_SHARED_DIR, h->id);
        snprintf(dir, sizeof dir, "%s/%s", work, h->id);
        snprintf(cmd, sizeof cmd, "'%s' capture %s --weights '%s' %s --steps 1 --ops all --out '%s'", GM_PHASE0, h->id,
                 weights, toks, dir);
        cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
        free(err);
        free(toks);
        void *w = calloc(1, e->weights_size);
        rt_layer *layers = calloc((size_t)e->n_layers, sizeof *layers);
        rt_model m;
        gm_status st = {0};
        cr_assert_eq(e->load(w, weights, &st), 0, "%s", st.msg);
        e->view(w, layers, &m);
        const gm_config *c = &m.cfg;
        const int H = c->emb_dim, L = c->n_layers;
        for (int l = 0; l < L; l++) {
            char f[6][64], what[32];
            const char *names[] = {"input", "attn_norm", "q_rope", "k_rope", "v_proj", "attn"};
            gm_npy a[6];
            for (int k = 0; k < 6; k++) {
                snprintf(f[k], sizeof f[k], "ops/%d/%s.npy", l, names[k]);
                a[k] = npy(dir, f[k]);
            }
            const int T = (int)a[0].shape[0];
            snprintf(what, sizeof what, "layer %d", l);
            expect_norm(what, h, a[0].data, a[1].data, layers[l].attn_norm, T, H);
            expect_attention(what, h, c, a[2].data, a[3].data, a[4].data, a[5].data, T);
            for (int k = 0; k < 6; k++)
                gm_npy_free(&a[k]);
        }
        /* the helper's production use: the final norm before the LM head, on the last layer's raw output */
        gm_npy ls = npy(dir, "layers.npy"), fn = npy(dir, "final_norm.npy");
        const int T = (int)fn.shape[0];
        expect_norm("final norm", h, (const float *)ls.data + (size_t)(L - 1) * T * H, fn.data, m.out_norm, T, H);
        gm_npy_free(&ls);
        gm_npy_free(&fn);
        e->free(w);
        free(w);
        free(layers);
    }
}
