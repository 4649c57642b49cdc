/*
** The baseline runner; see gm/runner.h. Each step below names the rounding
** HF applies in bf16 (bf() is "round to the nearest bf16"); in RT_F32 every
** bf() is the identity.
*/
#include "gm/runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gm/cpu.h"
#include "gm/kernels.h"
#include "gm/pool.h"
#include "gm/rope.h"

struct rt_session {
    const rt_model *m;
    rt_options opt;
    gm_pool *pool;
    int max_tokens, pos;   /* capacity and tokens already in the KV cache */
    int H, nh, nkv, hd, F, V, L;
    float *cos, *sin;      /* [max_tokens][hd/2], rounded to bf16 in RT_BF16 */
    float *x, *h, *q, *att, *o, *g, *u; /* activations of the tokens in flight */
    float *kc, *vc;        /* KV cache: [L][max_tokens][nkv*hd] */
    float *scores;         /* [nh][max_tokens] */
};

/* ---------------------------------------------------------------------- */
/* the element-wise steps */

static inline float bf(const rt_session *s, float v)
{
    return s->opt.precision == RT_BF16 ? gm_bf16_to_f32(gm_f32_to_bf16(v)) : v;
}

/*
** RMSNorm of n values: x32 * rsqrt(mean(x32^2) + eps), in fp32; then in bf16
** y = bf(w * bf(normed)), two roundings.
*/
static void rms_norm(const rt_session *s, float *y, const float *x, const gm_bf16 *w, int n)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float var = (float)ss / (float)n;
    const float r = 1.0f / sqrtf(var + (float)s->m->cfg.rms_norm_eps);
    gm_norm_scale(y, x, w, r, n, s->opt.precision == RT_BF16);
}

/* RoPE in the rotate-half layout at position p: x' = bf(bf(x*c) + bf(rot(x)*s)). */
static void rope(const rt_session *s, float *x, int p)
{
    const int h = s->hd / 2;
    const float *c = s->cos + (long)p * h, *sn = s->sin + (long)p * h;
    for (int i = 0; i < h; i++) {
        const float a = x[i], b = x[i + h];
        x[i] = bf(s, bf(s, a * c[i]) + bf(s, -b * sn[i]));
        x[i + h] = bf(s, bf(s, b * c[i]) + bf(s, a * sn[i]));
    }
}

/* ---------------------------------------------------------------------- */
/* attention: one task per query head */

typedef struct att_job {
    rt_session *s;
    int n, pos0, layer;
} att_job;

static void attend_head(void *ctx, int head)
{
    const att_job *j = ctx;
    rt_session *s = j->s;
    const int hd = s->hd, kvw = s->nkv * hd, qw = s->nh * hd;
    const int kvh = head / (s->nh / s->nkv); /* consecutive query heads share one kv head */
    const float scale = (float)(1.0 / sqrt((double)hd));
    const float *kc = s->kc + (long)j->layer * s->max_tokens * kvw;
    const float *vc = s->vc + (long)j->layer * s->max_tokens * kvw;
    float *sc = s->scores + (long)head * s->max_tokens;
    for (int t = 0; t < j->n; t++) {
        const int p = j->pos0 + t; /* attends to positions 0..p; later ones are masked */
        const float *q = s->q + (long)t * qw + head * hd;
        float max = -INFINITY;
        int k = 0;
        for (; k + 4 <= p + 1; k += 4) { /* four keys at a time: four independent sums, each over d in order */
            const float *k0 = kc + (long)k * kvw + kvh * hd, *k1 = k0 + kvw, *k2 = k1 + kvw, *k3 = k2 + kvw;
            float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
            for (int d = 0; d < hd; d++)
                d0 += q[d] * k0[d], d1 += q[d] * k1[d], d2 += q[d] * k2[d], d3 += q[d] * k3[d];
            sc[k] = d0, sc[k + 1] = d1, sc[k + 2] = d2, sc[k + 3] = d3;
        }
        for (; k <= p; k++) {
            const float *kv = kc + (long)k * kvw + kvh * hd;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++)
                dot += q[d] * kv[d];
            sc[k] = dot;
        }
        for (k = 0; k <= p; k++) {
            sc[k] = bf(s, bf(s, sc[k]) * scale); /* scores, then the scale: two roundings */
            if (sc[k] > max)
                max = sc[k];
        }
        float sum = 0.0f;
        for (k = 0; k <= p; k++) {
            sc[k] = expf(sc[k] - max);
            sum += sc[k];
        }
        for (k = 0; k <= p; k++)
            sc[k] = bf(s, sc[k] / sum); /* softmax in fp32, rounded once */
        float *out = s->att + (long)t * qw + head * hd;
        const float *v = vc + kvh * hd;
        int d = 0;
        for (; d + 4 <= hd; d += 4) { /* four outputs at a time, each summed over k in order */
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (k = 0; k <= p; k++) {
                const float *vk = v + (long)k * kvw + d;
                a0 += sc[k] * vk[0], a1 += sc[k] * vk[1], a2 += sc[k] * vk[2], a3 += sc[k] * vk[3];
            }
            out[d] = bf(s, a0), out[d + 1] = bf(s, a1), out[d + 2] = bf(s, a2), out[d + 3] = bf(s, a3);
        }
        for (; d < hd; d++) {
            float acc = 0.0f;
            for (k = 0; k <= p; k++)
                acc += sc[k] * v[(long)k * kvw + d];
            out[d] = bf(s, acc); /* probs . V, one rounding */
        }
    }
}

/* ---------------------------------------------------------------------- */

/*
** The element-wise steps between the matrix products, one task per token
** (row), so that they too run on every thread.
*/
typedef struct row_job {
    rt_session *s;
    const rt_layer *w;
    int layer, pos0;
} row_job;

/* h = attn_norm(x) */
static void attn_norm_row(void *ctx, int t)
{
    const row_job *j = ctx;
    rms_norm(j->s, j->s->h + (long)t * j->s->H, j->s->x + (long)t * j->s->H, j->w->attn_norm, j->s->H);
}

/* Qwen3's per-head q_norm and k_norm, then RoPE, on q and on this layer's new keys */
static void qk_row(void *ctx, int t)
{
    const row_job *j = ctx;
    rt_session *s = j->s;
    const int hd = s->hd, qw = s->nh * hd, kvw = s->nkv * hd, l = j->layer;
    for (int hh = 0; hh < s->nh; hh++) {
        float *q = s->q + (long)t * qw + hh * hd;
        if (j->w->q_norm)
            rms_norm(s, q, q, j->w->q_norm, hd);
        rope(s, q, j->pos0 + t);
    }
    for (int hh = 0; hh < s->nkv; hh++) {
        float *k = s->kc + ((long)l * s->max_tokens + j->pos0 + t) * kvw + hh * hd;
        if (j->w->k_norm)
            rms_norm(s, k, k, j->w->k_norm, hd);
        rope(s, k, j->pos0 + t);
    }
}

/* x = bf(x + attention output), the residual; then h = ffn_norm(x) */
static void attn_residual_row(void *ctx, int t)
{
    const row_job *j = ctx;
    rt_session *s = j->s;
    float *x = s->x + (long)t * s->H;
    gm_add_round(x, s->o + (long)t * s->H, s->H, s->opt.precision == RT_BF16);
    rms_norm(s, s->h + (long)t * s->H, x, j->w->ffn_norm, s->H);
}

/*
** g = bf(bf(SiLU(g)) * u), SiLU in fp32: element by element, so the n rows
** are cut into equal parts, one per thread when there is one row (decode),
** each a whole number of cache lines.
*/
typedef struct swiglu_job {
    rt_session *s;
    long n, part;
} swiglu_job;

static void swiglu_part(void *ctx, int i)
{
    const swiglu_job *j = ctx;
    const long a = i * j->part, b = a + j->part < j->n ? a + j->part : j->n;
    gm_swiglu(j->s->g + a, j->s->u + a, (int)(b - a), j->s->opt.precision == RT_BF16);
}

/* x = bf(x + MLP output) */
static void mlp_residual_row(void *ctx, int t)
{
    const row_job *j = ctx;
    gm_add_round(j->s->x + (long)t * j->s->H, j->s->o + (long)t * j->s->H, j->s->H, j->s->opt.precision == RT_BF16);
}

/* Tokens tokens[0..n) at positions pos0.. through every layer; x ends as the last layer's output. */
static void forward(rt_session *s, const int32_t *tokens, int n, rt_result *r)
{
    const rt_model *m = s->m;
    const int H = s->H, hd = s->hd, qw = s->nh * hd, kvw = s->nkv * hd, F = s->F;
    const int pos0 = s->pos, round = s->opt.precision == RT_BF16, threads = gm_pool_threads(s->pool);

    for (int t = 0; t < n; t++) /* the embedding: a row lookup, exact */
        for (int i = 0; i < H; i++)
            s->x[(long)t * H + i] = gm_bf16_to_f32(m->tok_embd[(long)tokens[t] * H + i]);
    if (r->embed)
        memcpy(r->embed, s->x, sizeof(float) * (size_t)n * H);

    for (int l = 0; l < s->L; l++) {
        const rt_layer *w = &m->layers[l];
        float *kc = s->kc + ((long)l * s->max_tokens + pos0) * kvw;
        float *vc = s->vc + ((long)l * s->max_tokens + pos0) * kvw;
        row_job rj = {s, w, l, pos0};

        gm_pool_run(s->pool, n, attn_norm_row, &rj);
        /* q/k/v projections, the bias (Qwen2) inside the one rounding, before RoPE */
        const gm_out qkv[] = {{s->q, w->wq, w->bq, qw}, {kc, w->wk, w->bk, kvw}, {vc, w->wv, w->bv, kvw}};
        gm_matmul_outs(s->pool, s->h, n, H, qkv, 3, round);
        gm_pool_run(s->pool, n, qk_row, &rj);
        att_job job = {s, n, pos0, l};
        gm_pool_run(s->pool, s->nh, attend_head, &job);
        gm_matmul(s->pool, s->o, s->att, w->wo, NULL, n, qw, H, round);
        gm_pool_run(s->pool, n, attn_residual_row, &rj);
        const gm_out gate_up[] = {{s->g, w->w_gate, NULL, F}, {s->u, w->w_up, NULL, F}};
        gm_matmul_outs(s->pool, s->h, n, H, gate_up, 2, round);
        swiglu_job sj = {s, (long)n * F, n > 1 ? F : ((F + threads - 1) / threads + 15) / 16 * 16};
        gm_pool_run(s->pool, (int)((sj.n + sj.part - 1) / sj.part), swiglu_part, &sj);
        gm_matmul(s->pool, s->o, s->g, w->w_down, NULL, n, F, H, round);
        gm_pool_run(s->pool, n, mlp_residual_row, &rj);
        if (r->layers) /* diagnosis runs are whole prefills: n == r->n_tokens */
            memcpy(r->layers + (long)l * n * H, s->x, sizeof(float) * (size_t)n * H);
    }
    s->pos += n;

    /* the final norm and the LM head: every position in diagnosis mode, the last one in lite mode */
    const int first = r->logit_rows == n ? 0 : n - 1;
    for (int t = first; t < n; t++)
        rms_norm(s, s->h + (long)(t - first) * H, s->x + (long)t * H, m->out_norm, H);
    if (r->final_norm)
        memcpy(r->final_norm, s->h, sizeof(float) * (size_t)n * H);
    gm_matmul_nt(s->pool, r->logits, s->h, m->lm_head, r->logit_rows, H, s->V, round);
    int32_t top;
    rt_top_k(r->logits + (long)(r->logit_rows - 1) * s->V, s->V, 1, &top);
    r->top1 = top;
}

/* ---------------------------------------------------------------------- */

static float *alloc_f(size_t n, int *ok)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    *ok &= p != NULL;
    return p;
}

int rt_session_new(rt_session **out, const rt_model *m, const rt_options *o, int max_tokens, gm_status *st)
{
    const gm_config *c = &m->cfg;
    *out = NULL;
    if (gm_isa_check(st)) /* GM_ISA names a tier this CPU lacks: say so rather than run another */
        return st->code;
    if (max_tokens <= 0)
        return gm_fail(st, GM_EUSAGE, "runner: expected a positive token capacity, found %d", max_tokens);
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads || c->head_dim % 2)
        return gm_fail(st, GM_EFORMAT, "runner: unusable head layout %d/%d x %d", c->n_heads, c->n_kv_heads,
                       c->head_dim);
    rt_session *s = calloc(1, sizeof *s);
    if (!s)
        return gm_fail(st, GM_ENOMEM, "runner: out of memory");
    s->m = m;
    s->opt = *o;
    s->max_tokens = max_tokens;
    s->H = c->emb_dim, s->nh = c->n_heads, s->nkv = c->n_kv_heads, s->hd = c->head_dim;
    s->F = c->hidden_dim, s->V = c->vocab_size, s->L = c->n_layers;
    const size_t T = (size_t)max_tokens, qw = (size_t)s->nh * s->hd, kvw = (size_t)s->nkv * s->hd;
    const size_t wide = qw > (size_t)s->H ? qw : (size_t)s->H;
    int ok = 1;
    s->cos = alloc_f(T * (size_t)s->hd / 2, &ok);
    s->sin = alloc_f(T * (size_t)s->hd / 2, &ok);
    s->x = alloc_f(T * s->H, &ok);
    s->h = alloc_f(T * wide, &ok);
    s->q = alloc_f(T * qw, &ok);
    s->att = alloc_f(T * qw, &ok);
    s->o = alloc_f(T * s->H, &ok);
    s->g = alloc_f(T * s->F, &ok);
    s->u = alloc_f(T * s->F, &ok);
    s->kc = alloc_f((size_t)s->L * T * kvw, &ok);
    s->vc = alloc_f((size_t)s->L * T * kvw, &ok);
    s->scores = alloc_f((size_t)s->nh * T, &ok);
    s->pool = gm_pool_new(o->threads);
    if (!ok || !s->pool) {
        rt_session_free(s);
        return gm_fail(st, GM_ENOMEM, "runner: out of memory for %d tokens", max_tokens);
    }
    /* HF's tables: angles and cos/sin in fp32, cast to the activation dtype */
    const int h = s->hd / 2;
    float *inv = alloc_f((size_t)h, &ok);
    if (!ok) {
        rt_session_free(s);
        return gm_fail(st, GM_ENOMEM, "runner: out of memory");
    }
    gm_rope_inv_freq(inv, s->hd, c->rope_base, &c->rope_scaling);
    for (int p = 0; p < max_tokens; p++)
        for (int i = 0; i < h; i++) {
            const float a = (float)p * inv[i];
            s->cos[(long)p * h + i] = bf(s, (float)cos((double)a));
            s->sin[(long)p * h + i] = bf(s, (float)sin((double)a));
        }
    free(inv);
    *out = s;
    return 0;
}

void rt_session_free(rt_session *s)
{
    if (!s)
        return;
    gm_pool_free(s->pool);
    free(s->cos);
    free(s->sin);
    free(s->x);
    free(s->h);
    free(s->q);
    free(s->att);
    free(s->o);
    free(s->g);
    free(s->u);
    free(s->kc);
    free(s->vc);
    free(s->scores);
    free(s);
}

static int check_tokens(const rt_session *s, const int32_t *tokens, int n, gm_status *st)
{
    if (n <= 0)
        return gm_fail(st, GM_EUSAGE, "runner: expected at least one token");
    if (s->pos + n > s->max_tokens)
        return gm_fail(st, GM_EUSAGE, "runner: %d tokens after %d exceed the capacity of %d", n, s->pos,
                       s->max_tokens);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->V)
            return gm_fail(st, GM_EUSAGE, "runner: token %d at position %d is outside the vocabulary [0, %d)",
                           tokens[i], i, s->V);
    return 0;
}

static int result_new(const rt_session *s, rt_result *r, int n, int diagnosis, gm_status *st)
{
    memset(r, 0, sizeof *r);
    r->n_tokens = n, r->vocab = s->V, r->emb = s->H, r->n_layers = s->L;
    r->logit_rows = diagnosis ? n : 1;
    int ok = 1;
    r->logits = alloc_f((size_t)r->logit_rows * s->V, &ok);
    if (diagnosis) {
        r->embed = alloc_f((size_t)n * s->H, &ok);
        r->layers = alloc_f((size_t)s->L * n * s->H, &ok);
        r->final_norm = alloc_f((size_t)n * s->H, &ok);
    }
    if (!ok) {
        rt_result_free(r);
        return gm_fail(st, GM_ENOMEM, "runner: out of memory for the results of %d tokens", n);
    }
    return 0;
}

int rt_prefill(rt_session *s, const int32_t *tokens, int n, rt_result *r, gm_status *st)
{
    s->pos = 0;
    if (check_tokens(s, tokens, n, st) || result_new(s, r, n, s->opt.diagnosis, st))
        return st->code;
    forward(s, tokens, n, r);
    return 0;
}

int rt_decode_step(rt_session *s, int32_t token, rt_result *r, gm_status *st)
{
    if (check_tokens(s, &token, 1, st) || result_new(s, r, 1, 0, st))
        return st->code;
    forward(s, &token, 1, r);
    return 0;
}

void rt_result_free(rt_result *r)
{
    free(r->logits);
    free(r->embed);
    free(r->layers);
    free(r->final_norm);
    memset(r, 0, sizeof *r);
}

void rt_top_k(const float *logits, int n, int k, int32_t *ids)
{
    for (int j = 0; j < k; j++)
        ids[j] = -1;
    for (int i = 0; i < n; i++) {
        /* insert i if it beats the current k-th; equal logits keep the smaller id first */
        int at = k;
        while (at > 0 && (ids[at - 1] < 0 || logits[i] > logits[ids[at - 1]] ||
                          (logits[i] == logits[ids[at - 1]] && i < ids[at - 1])))
            at--;
        if (at >= k)
            continue;
        for (int j = k - 1; j > at; j--)
            ids[j] = ids[j - 1];
        ids[at] = i;
    }
}
