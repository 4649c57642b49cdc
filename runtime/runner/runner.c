/*
** The baseline runner; see gm/runner.h. Each step below names the rounding
** HF applies in bf16 (bf() is "round to the nearest bf16"); in RT_F32 every
** bf() is the identity.
*/
#include "gm/runner.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    float *scores;         /* attention's scratch, one slot of att_slot floats per thread (attend_task) */
    int att_rows;          /* tokens per attention task */
    long att_lds, att_slot; /* max_tokens rounded up to 16: a slot's row of scores; floats per slot */
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
    /* the squares summed in double: value i into sum i % 4, two at a time (one chain had waited on each add) */
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, tail = 0.0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)x[i] * x[i], s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2], s3 += (double)x[i + 3] * x[i + 3];
    }
    for (; i < n; i++)
        tail += (double)x[i] * x[i];
    const double ss = ((s0 + s1) + (s2 + s3)) + tail;
    const float var = (float)ss / (float)n;
    const float r = 1.0f / sqrtf(var + (float)s->m->cfg.rms_norm_eps);
    gm_norm_scale(y, x, w, r, n, s->opt.precision == RT_BF16);
}

/* RoPE in the rotate-half layout at position p: x' = bf(bf(x*c) + bf(rot(x)*s)), rot(x) = (-x2, x1). */
static void rope(const rt_session *s, float *x, int p)
{
    const int h = s->hd / 2;
    gm_rope(x, s->cos + (long)p * h, s->sin + (long)p * h, h, s->opt.precision == RT_BF16);
}

/* ---------------------------------------------------------------------- */
/*
** Attention, blocked over keys. A task is one kv head and a block of tokens:
** its query rows are those tokens' rows of every query head that shares the
** kv head (consecutive heads), packed head by head, so that each block of
** keys and values, once in cache, serves all of them, on the tier's kernels.
**
** The softmax takes two passes over the key blocks, not an online one. An
** online (flash-attention) softmax keeps a running max and rescales the
** partial sums of exp() and of probs . V by exp(old max - new max) whenever
** the max grows: it would form the probabilities from a partial max and sum
** and add unnormalized, rescaled terms into the output, where HF rounds
** p = bf(exp(s - max) / sum) with the whole row's max and sum and then sums
** p . v once. So, per task, with every rounding where HF has it:
**   1. each key block's scores s = bf(bf(q . k) * scale) (two roundings), and
**      each row's max over its causal keys (gm_scale_max);
**   2. over each whole causal row, e = exp(s - max) in fp32 and their sum
**      (gm_exp_sum, in its fixed order);
**   3. key block by key block, p = bf(e / sum) (gm_div_round; 0 past the row's own
**      position: the causal mask), and probs . V added into one f32 sum per
**      output, in key order over the blocks, rounded once at the end.
** A task's scores are at most (its query rows) x (its keys) floats, in the
** scratch slot of the thread that runs it.
*/
enum {
    ATT_ROWS = 96, /* query rows per task: tokens x the heads of a kv head (one token's heads at least) */
    ATT_KEYS = 256 /* keys per block: 128 KB of K or of V at head_dim 128 */
};

typedef struct att_job {
    rt_session *s;
    int n, pos0, layer;
    int blocks;      /* blocks of s->att_rows tokens */
    atomic_int next; /* the next task: i is kv head i % nkv, block blocks - 1 - i / nkv (the longest first) */
} att_job;

static void attend_task(rt_session *s, const att_job *j, float *slot, int kvh, int blk)
{
    const int hd = s->hd, g = s->nh / s->nkv, kvw = s->nkv * hd, qw = s->nh * hd;
    const int t0 = blk * s->att_rows, R = j->n - t0 < s->att_rows ? j->n - t0 : s->att_rows;
    const int nq = g * R, nk = j->pos0 + t0 + R; /* keys 0 .. the position of the block's last token */
    const long lds = (nk + 15) / 16 * 16, rows = (long)g * s->att_rows;
    const float scale = (float)(1.0 / sqrt((double)hd));
    const int round = s->opt.precision == RT_BF16;
    float *S = slot, *Q = S + rows * s->att_lds, *O = Q + rows * hd, *max = O + rows * hd, *sum = max + rows;
    const float *K = s->kc + (long)j->layer * s->max_tokens * kvw + kvh * hd;
    const float *V = s->vc + (long)j->layer * s->max_tokens * kvw + kvh * hd;

    /* row i = h * R + r: token t0 + r of query head kvh * g + h, at position pos0 + t0 + r */
    for (int h = 0; h < g; h++)
        for (int r = 0; r < R; r++)
            memcpy(Q + ((long)h * R + r) * hd, s->q + (long)(t0 + r) * qw + (long)(kvh * g + h) * hd,
                   sizeof(float) * (size_t)hd);
    for (int i = 0; i < nq; i++)
        max[i] = -INFINITY;
    for (int k0 = 0; k0 < nk; k0 += ATT_KEYS) { /* 1. */
        const int nb = nk - k0 < ATT_KEYS ? nk - k0 : ATT_KEYS;
        gm_attn_scores(S + k0, lds, Q, hd, nq, K + (long)k0 * kvw, kvw, nb, hd);
        for (int i = 0; i < nq; i++) {
            const int p = j->pos0 + t0 + i % R, end = p + 1 < k0 + nb ? p + 1 : k0 + nb;
            if (end > k0)
                max[i] = gm_scale_max(S + i * lds + k0, end - k0, scale, round, max[i]);
        }
    }
    /*
    ** 2. e = exp(s - max) and the row's sum, on the tier (gm_exp_sum: its own
    ** exp, within 0.77 ulp, and the sum in 16 lanes). That the exp is not the
    ** C library's expf (within 0.502 ulp) and the order not the keys' keeps
    ** agreement with HF: HF's own CPU softmax takes exp as a vectorized
    ** polynomial too (torch's, within 1 ulp) and sums in lanes, and every
    ** p = bf(e / sum) is then rounded to bf16, 2^16 f32 ulps, so an ulp or two
    ** changes p only where e / sum lies that close to a bf16 rounding midpoint
    ** (the goldens' bf16 logits stayed bit-identical to HF's where they were).
    */
    for (int i = 0; i < nq; i++) {
        float *sc = S + i * lds;
        sum[i] = gm_exp_sum(sc, sc, j->pos0 + t0 + i % R + 1, max[i]);
    }
    for (int k0 = 0; k0 < nk; k0 += ATT_KEYS) { /* 3. */
        const int nb = nk - k0 < ATT_KEYS ? nk - k0 : ATT_KEYS;
        for (int i = 0; i < nq; i++) {
            const int end = j->pos0 + t0 + i % R + 1, n = end - k0 < 0 ? 0 : end - k0 < nb ? end - k0 : nb;
            gm_div_round(S + i * lds + k0, n, sum[i], round); /* the softmax in fp32, rounded once */
            memset(S + i * lds + k0 + n, 0, sizeof(float) * (size_t)(nb - n)); /* the causal mask */
        }
        gm_attn_values(O, hd, S + k0, lds, nq, V + (long)k0 * kvw, kvw, nb, hd, k0 > 0);
    }
    for (int h = 0; h < g; h++)
        for (int r = 0; r < R; r++) {
            const float *o = O + ((long)h * R + r) * hd;
            float *out = s->att + (long)(t0 + r) * qw + (long)(kvh * g + h) * hd;
            for (int d = 0; d < hd; d++)
                out[d] = bf(s, o[d]); /* probs . V, one rounding */
        }
}

/* Pool task `slot`: tasks taken in turn until none is left, in that slot's scratch. */
static void attend_slot(void *ctx, int slot)
{
    att_job *j = ctx;
    rt_session *s = j->s;
    float *mem = s->scores + slot * s->att_slot;
    for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->blocks * s->nkv;)
        attend_task(s, j, mem, i % s->nkv, j->blocks - 1 - i / s->nkv);
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
    int qk;          /* qk_row's steps: QK_NORM, QK_ROPE or both */
} row_job;

enum { QK_NORM = 1, QK_ROPE = 2 };

/* h = attn_norm(x) */
static void attn_norm_row(void *ctx, int t)
{
    const row_job *j = ctx;
    rms_norm(j->s, j->s->h + (long)t * j->s->H, j->s->x + (long)t * j->s->H, j->w->attn_norm, j->s->H);
}

/* Qwen3's per-head q_norm and k_norm, then RoPE, on q and on this layer's new keys (the steps j->qk asks for) */
static void qk_row(void *ctx, int t)
{
    const row_job *j = ctx;
    rt_session *s = j->s;
    const int hd = s->hd, qw = s->nh * hd, kvw = s->nkv * hd, l = j->layer;
    for (int hh = 0; hh < s->nh; hh++) {
        float *q = s->q + (long)t * qw + hh * hd;
        if (j->w->q_norm && (j->qk & QK_NORM))
            rms_norm(s, q, q, j->w->q_norm, hd);
        if (j->qk & QK_ROPE)
            rope(s, q, j->pos0 + t);
    }
    for (int hh = 0; hh < s->nkv; hh++) {
        float *k = s->kc + ((long)l * s->max_tokens + j->pos0 + t) * kvw + hh * hd;
        if (j->w->k_norm && (j->qk & QK_NORM))
            rms_norm(s, k, k, j->w->k_norm, hd);
        if (j->qk & QK_ROPE)
            rope(s, k, j->pos0 + t);
    }
}

/* g = bf(bf(SiLU(g)) * u): SwiGLU apart from the products, for an observed layer */
static void swiglu_row(void *ctx, int t)
{
    const row_job *j = ctx;
    rt_session *s = j->s;
    gm_swiglu(s->g + (long)t * s->F, s->u + (long)t * s->F, s->F, s->opt.precision == RT_BF16);
}

/* h = ffn_norm(x), x already holding the residual stream after attention */
static void ffn_norm_row(void *ctx, int t)
{
    const row_job *j = ctx;
    rt_session *s = j->s;
    rms_norm(s, s->h + (long)t * s->H, s->x + (long)t * s->H, j->w->ffn_norm, s->H);
}

/*
** The profile's stopwatch (rt_options.profile): MARK(w, field) adds the time
** since the last mark to that field, less what the kernels spent packing X
** meanwhile, which goes to conversions.
*/
typedef struct stopwatch {
    rt_profile *p;
    double t, pack;
} stopwatch;

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static stopwatch watch(rt_profile *p)
{
    return p ? (stopwatch){p, seconds(), gm_kernels_pack_seconds()} : (stopwatch){0};
}

static void lap(stopwatch *w, double *field)
{
    const double t = seconds(), pack = gm_kernels_pack_seconds();
    *field += t - w->t - (pack - w->pack);
    w->p->conversions += pack - w->pack;
    w->t = t, w->pack = pack;
}

#define MARK(w, field)                                                                                           \
    do {                                                                                                         \
        if ((w).p)                                                                                               \
            lap(&(w), &(w).p->field);                                                                            \
    } while (0)

/* An op's output to the observer, when it watches this layer (see rt_observer). */
static void see(const rt_session *s, int watch, int layer, rt_op op, const float *rows, int n, int width)
{
    if (watch)
        s->opt.observer.op(s->opt.observer.ctx, layer, op, rows, n, width);
}

/* Tokens tokens[0..n) at positions pos0.. through every layer; x ends as the last layer's output. */
static void forward(rt_session *s, const int32_t *tokens, int n, rt_result *r)
{
    const rt_model *m = s->m;
    const int H = s->H, hd = s->hd, qw = s->nh * hd, kvw = s->nkv * hd, F = s->F;
    const int pos0 = s->pos, round = s->opt.precision == RT_BF16, threads = gm_pool_threads(s->pool);
    const gm_wform f = m->wform;

    stopwatch sw = watch(s->opt.profile);
    for (int t = 0; t < n; t++) /* the embedding: a row lookup, exact */
        for (int i = 0; i < H; i++)
            s->x[(long)t * H + i] = gm_bf16_to_f32(m->tok_embd[(long)tokens[t] * H + i]);
    if (r->embed)
        memcpy(r->embed, s->x, sizeof(float) * (size_t)n * H);

    for (int l = 0; l < s->L; l++) {
        const rt_layer *w = &m->layers[l];
        float *kc = s->kc + ((long)l * s->max_tokens + pos0) * kvw;
        float *vc = s->vc + ((long)l * s->max_tokens + pos0) * kvw;
        row_job rj = {s, w, l, pos0, QK_NORM | QK_ROPE};
        /* an observed layer: every op's output as it is made (rt_observer) */
        const rt_observer *ob = &s->opt.observer;
        const int watch = ob->op && (!ob->wants || ob->wants(ob->ctx, l));

        see(s, watch, l, RT_OP_INPUT, s->x, n, H);
        gm_pool_run(s->pool, n, attn_norm_row, &rj);
        MARK(sw, elementwise);
        see(s, watch, l, RT_OP_ATTN_NORM, s->h, n, H);
        /* q/k/v projections, the bias (Qwen2) inside the one rounding, before RoPE */
        const gm_out qkv[] = {{.Y = s->q, .W = w->wq, .bias = w->bq, .N = qw, .form = f},
                              {.Y = kc, .W = w->wk, .bias = w->bk, .N = kvw, .form = f},
                              {.Y = vc, .W = w->wv, .bias = w->bv, .N = kvw, .form = f}};
        gm_matmul_outs(s->pool, s->h, n, H, qkv, 3, round);
        MARK(sw, projections);
        see(s, watch, l, RT_OP_Q, s->q, n, qw);
        see(s, watch, l, RT_OP_K, kc, n, kvw);
        see(s, watch, l, RT_OP_V, vc, n, kvw);
        if (watch && w->q_norm) { /* the per-head norms apart from RoPE, to be seen between them */
            rj.qk = QK_NORM;
            gm_pool_run(s->pool, n, qk_row, &rj);
            see(s, watch, l, RT_OP_Q_NORM, s->q, n, qw);
            see(s, watch, l, RT_OP_K_NORM, kc, n, kvw);
            rj.qk = QK_ROPE;
        }
        gm_pool_run(s->pool, n, qk_row, &rj);
        MARK(sw, elementwise);
        see(s, watch, l, RT_OP_Q_ROPE, s->q, n, qw);
        see(s, watch, l, RT_OP_K_ROPE, kc, n, kvw);
        att_job job = {.s = s, .n = n, .pos0 = pos0, .layer = l, .blocks = (n + s->att_rows - 1) / s->att_rows};
        atomic_init(&job.next, 0);
        gm_pool_run(s->pool, threads, attend_slot, &job);
        MARK(sw, attention);
        see(s, watch, l, RT_OP_ATTN, s->att, n, qw);
        /* o_proj, and the residual x = bf(x + bf(o)) as each output is done */
        const gm_out o_proj = {.Y = s->o, .W = w->wo, .N = H, .form = f, .R = s->x};
        gm_matmul_ep(s->pool, s->att, n, qw, &o_proj, 1, round, GM_EP_ADD);
        MARK(sw, projections);
        see(s, watch, l, RT_OP_O_PROJ, s->o, n, H);
        see(s, watch, l, RT_OP_ATTN_RESIDUAL, s->x, n, H);
        gm_pool_run(s->pool, n, ffn_norm_row, &rj);
        MARK(sw, elementwise);
        see(s, watch, l, RT_OP_FFN_NORM, s->h, n, H);
        /*
        ** gate and up, and g = bf(bf(SiLU(g)) * u) (SiLU in fp32) as each pair
        ** of outputs is done; an observed layer's gate and up whole first
        */
        const gm_out gate_up[] = {{.Y = s->g, .W = w->w_gate, .N = F, .form = f},
                                  {.Y = s->u, .W = w->w_up, .N = F, .form = f}};
        if (watch) {
            gm_matmul_outs(s->pool, s->h, n, H, gate_up, 2, round);
            see(s, watch, l, RT_OP_GATE, s->g, n, F);
            see(s, watch, l, RT_OP_UP, s->u, n, F);
            gm_pool_run(s->pool, n, swiglu_row, &rj);
        } else {
            gm_matmul_ep(s->pool, s->h, n, H, gate_up, 2, round, GM_EP_SWIGLU);
        }
        see(s, watch, l, RT_OP_SWIGLU, s->g, n, F);
        /* down, and the residual x = bf(x + bf(down)) */
        const gm_out down = {.Y = s->o, .W = w->w_down, .N = H, .form = f, .R = s->x};
        gm_matmul_ep(s->pool, s->g, n, F, &down, 1, round, GM_EP_ADD);
        MARK(sw, projections);
        see(s, watch, l, RT_OP_DOWN, s->o, n, H);
        see(s, watch, l, RT_OP_OUTPUT, s->x, n, H);
        if (r->layers) /* diagnosis runs are whole prefills: n == r->n_tokens */
            memcpy(r->layers + (long)l * n * H, s->x, sizeof(float) * (size_t)n * H);
        if (s->opt.progress && n > 1)
            s->opt.progress(s->opt.progress_ctx, l + 1, s->L);
    }
    s->pos += n;

    /* the final norm and the LM head: every position in diagnosis mode, the last one in lite mode */
    const int first = r->logit_rows == n ? 0 : n - 1;
    for (int t = first; t < n; t++)
        rms_norm(s, s->h + (long)(t - first) * H, s->x + (long)t * H, m->out_norm, H);
    if (r->final_norm)
        memcpy(r->final_norm, s->h, sizeof(float) * (size_t)n * H);
    MARK(sw, elementwise);
    gm_matmul_nt(s->pool, r->logits, s->h, m->lm_head, r->logit_rows, H, s->V, round);
    MARK(sw, lm_head);
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
    static const rt_options defaults; /* o NULL: every option zero (bf16, lite mode, every core) */
    if (!o)
        o = &defaults;
    const gm_config *c = &m->cfg;
    *out = NULL;
    int rc;
    if ((rc = gm_kernels_check(st)) != 0) /* GM_ISA names a tier this CPU lacks: say so rather than run another */
        return rc;
    if (max_tokens <= 0)
        return gm_fail(st, GM_EUSAGE, "runner: expected a positive token capacity, found %d", max_tokens);
    if (c->n_layers < 0 || c->emb_dim <= 0 || c->hidden_dim <= 0 || c->vocab_size <= 0)
        return gm_fail(st, GM_EFORMAT, "runner: expected positive sizes, found n_layers %d, emb_dim %d, hidden_dim %d, "
                       "vocab_size %d", c->n_layers, c->emb_dim, c->hidden_dim, c->vocab_size);
    if (c->n_heads <= 0 || c->n_kv_heads <= 0 || c->head_dim <= 0 || c->n_heads % c->n_kv_heads || c->head_dim % 2)
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
    s->pool = gm_pool_new(o->threads);
    /* attention: at most ATT_ROWS query rows a task, each with a row of scores for every key */
    const int group = s->nh / s->nkv;
    s->att_rows = ATT_ROWS / group > 0 ? ATT_ROWS / group : 1;
    s->att_lds = ((long)max_tokens + 15) / 16 * 16;
    s->att_slot = (long)group * s->att_rows * (s->att_lds + 2L * s->hd + 2);
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
    s->scores = alloc_f((size_t)gm_pool_threads(s->pool) * (size_t)s->att_slot, &ok);
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

/* tokens[0..n) at position `from`: within the session's capacity, in the vocabulary (the session unchanged) */
static int check_tokens(const rt_session *s, int from, const int32_t *tokens, int n, gm_status *st)
{
    if (n <= 0)
        return gm_fail(st, GM_EUSAGE, "runner: expected at least one token");
    if (from + n > s->max_tokens)
        return gm_fail(st, GM_EUSAGE, "runner: %d tokens after %d exceed the capacity of %d", n, from, s->max_tokens);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->V)
            return gm_fail(st, GM_EUSAGE, "runner: token %d at position %d is outside the vocabulary [0, %d)",
                           tokens[i], from + i, s->V);
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
    /* a prefill refused leaves the session as it was: a decode after it goes on from the last context */
    int rc;
    if ((rc = check_tokens(s, 0, tokens, n, st)) != 0 || (rc = result_new(s, r, n, s->opt.diagnosis, st)) != 0)
        return rc; /* (st may be NULL: gm_fail's code, not st's) */
    s->pos = 0;
    forward(s, tokens, n, r);
    return 0;
}

int rt_decode_step(rt_session *s, int32_t token, rt_result *r, gm_status *st)
{
    int rc;
    if ((rc = check_tokens(s, s->pos, &token, 1, st)) != 0 || (rc = result_new(s, r, 1, 0, st)) != 0)
        return rc;
    forward(s, &token, 1, r);
    return 0;
}

void rt_result_free(rt_result *r)
{
    if (!r)
        return;
    free(r->logits);
    free(r->embed);
    free(r->layers);
    free(r->final_norm);
    memset(r, 0, sizeof *r);
}

/* a logit as the top-k order sees it: a NaN is never chosen over a number */
static float top_key(float x) { return isnan(x) ? -INFINITY : x; }

void rt_top_k(const float *logits, int n, int k, int32_t *ids)
{
    for (int j = 0; j < k; j++)
        ids[j] = -1;
    for (int i = 0; i < n; i++) {
        /* insert i if it beats the current k-th; equal logits keep the smaller id first */
        const float x = top_key(logits[i]);
        int at = k;
        while (at > 0 && (ids[at - 1] < 0 || x > top_key(logits[ids[at - 1]]) ||
                          (x == top_key(logits[ids[at - 1]]) && i < ids[at - 1])))
            at--;
        if (at >= k)
            continue;
        for (int j = k - 1; j > at; j--)
            ids[j] = ids[j - 1];
        ids[at] = i;
    }
}
