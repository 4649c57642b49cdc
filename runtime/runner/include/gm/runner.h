/*
** The baseline runner: a CPU forward pass of a Llama-family decoder that
** agrees with Hugging Face transformers in bf16 (eager attention, fp32
** accumulation): every operation rounds to bf16 where HF's does
** (../shared/golden/README.md lists them). An f32 mode rounds nowhere and
** agrees with HF run in fp32.
**
** The generated weights plug in through rt_model: a view of pointers that
** each model's generated <id>_runner_view() fills. Nothing here knows a
** model's types.
*/
#ifndef GM_RUNNER_H
#define GM_RUNNER_H

#include <stdint.h>

#include "gm/bf16.h"
#include "gm/config.h"
#include "gm/kernels.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One decoder layer's weights; projections in the form rt_model.wform says. NULL: not in this family. */
typedef struct rt_layer {
    const gm_bf16 *attn_norm, *ffn_norm;      /* (emb) */
    const gm_bf16 *wq, *wk, *wv, *wo;         /* (emb, nh*hd), (emb, nkv*hd) x2, (nh*hd, emb) as (in, out) */
    const gm_bf16 *bq, *bk, *bv;              /* q/k/v bias (Qwen2) */
    const gm_bf16 *q_norm, *k_norm;           /* per-head RMSNorm weights (Qwen3), (hd) */
    const gm_bf16 *w_gate, *w_up, *w_down;    /* (emb, hidden) x2, (hidden, emb) */
} rt_layer;

typedef struct rt_model {
    gm_config cfg;
    gm_wform wform;           /* the projections' form: GM_W_KN (in, out) or GM_W_NK (out, in), row-major */
    const gm_bf16 *tok_embd;  /* (vocab, emb) */
    const gm_bf16 *out_norm;  /* (emb) */
    const gm_bf16 *lm_head;   /* (vocab, emb); the embedding table when tied */
    const rt_layer *layers;   /* cfg.n_layers of them */
} rt_model;

typedef enum rt_precision { RT_BF16 = 0, RT_F32 = 1 } rt_precision;

/*
** Where forward passes spent their time, added up over calls: wall seconds
** of the steps, as the calling thread sees them (every thread works in
** each), for a benchmark to show.
*/
typedef struct rt_profile {
    double projections; /* q/k/v, o, gate/up, down, with what they fold in: bias, rounding, SwiGLU, residual adds */
    double attention;   /* scores, softmax, probs . V */
    double elementwise; /* the embedding lookup, the norms, q/k norm and RoPE */
    double lm_head;     /* the final norm's output against the vocabulary */
    double conversions; /* X made bf16 for the tile products: a part of the projections and the LM head */
} rt_profile;

/*
** The ops of a decoder block, in the order the runner computes them. Each
** names the op's output; its input is the output of the op(s) before it
** (attention reads q_rope, k_rope and v). Widths: H = emb, Q = n_heads *
** head_dim, KV = n_kv_heads * head_dim, F = hidden.
*/
typedef enum rt_op {
    RT_OP_INPUT,         /* the block's input, the residual stream [H] */
    RT_OP_ATTN_NORM,     /* attn_norm(input) [H] */
    RT_OP_Q,             /* q after its projection, with the bias where the family has one (Qwen2) [Q] */
    RT_OP_K,             /* k likewise [KV] */
    RT_OP_V,             /* v likewise [KV] */
    RT_OP_Q_NORM,        /* q after the per-head RMSNorm (Qwen3 only) [Q] */
    RT_OP_K_NORM,        /* k after it (Qwen3 only) [KV] */
    RT_OP_Q_ROPE,        /* q after RoPE [Q] */
    RT_OP_K_ROPE,        /* k after RoPE [KV] */
    RT_OP_ATTN,          /* causal softmax(q k^T / sqrt(head_dim)) v, heads side by side, before o_proj [Q] */
    RT_OP_O_PROJ,        /* o_proj(attn) [H] */
    RT_OP_ATTN_RESIDUAL, /* input + o_proj [H] */
    RT_OP_FFN_NORM,      /* ffn_norm(attn_residual) [H] */
    RT_OP_GATE,          /* gate_proj(ffn_norm) [F] */
    RT_OP_UP,            /* up_proj(ffn_norm) [F] */
    RT_OP_SWIGLU,        /* silu(gate) * up [F] */
    RT_OP_DOWN,          /* down_proj(swiglu) [H] */
    RT_OP_OUTPUT,        /* attn_residual + down: the block's output [H] */
    RT_N_OPS
} rt_op;

/*
** An observer of the ops inside the blocks (rt_options.observer; op NULL:
** none). For each layer of each forward pass the runner asks wants(ctx,
** layer) (wants NULL: every layer); for a layer it wants, it calls op() once
** for every op of the block the family has, in rt_op order, with the op's
** output for the tokens in flight: n rows of width f32 values, row-major
** (bf16 values widened in RT_BF16). The rows are the runner's own, valid
** during the call only. An observed layer is materialized op by op: a fast
** path that fuses ops (an epilogue that adds the bias, SwiGLU, the residual,
** or rounds in a product) must fall back to the unfused steps for a layer
** wants() asks for, so that every op's output exists as written here; other
** layers may take the fast path. Observing changes no result.
*/
typedef struct rt_observer {
    int (*wants)(void *ctx, int layer);
    void (*op)(void *ctx, int layer, rt_op op, const float *rows, int n, int width);
    void *ctx;
} rt_observer;

typedef struct rt_options {
    rt_precision precision;
    int diagnosis;  /* keep every layer's output, the final norm and all positions' logits */
    int threads;    /* <= 0: gm_default_threads() */
    /* called after each decoder layer of a prefill of two or more tokens (NULL: none), for a progress line */
    void (*progress)(void *ctx, int layers_done, int n_layers);
    void *progress_ctx;
    rt_profile *profile;  /* NULL: none; else each step's time is added to it */
    rt_observer observer; /* the ops inside the blocks, for per-op capture (zero: none) */
} rt_options;

/*
** What a prefill returns. Lite mode: logits [1][V] at the last position.
** Diagnosis mode: logits [T][V], embed [T][H], layers [L][T][H] (each
** decoder layer's output, the residual stream after its MLP add),
** final_norm [T][H]. Values are f32 (bf16 values widened in RT_BF16).
*/
typedef struct rt_result {
    int n_tokens, vocab, emb, n_layers;
    int logit_rows;   /* 1 (lite) or n_tokens (diagnosis) */
    float *logits;
    int32_t top1;     /* argmax at the last position; ties go to the smaller id */
    float *embed, *layers, *final_norm; /* NULL in lite mode */
} rt_result;

typedef struct rt_session rt_session;

/*
** A session holds the scratch, the KV cache (for max_tokens positions) and the threads. o NULL: the
** defaults, as a zeroed rt_options (bf16, lite mode, every core).
*/
int rt_session_new(rt_session **s, const rt_model *m, const rt_options *o, int max_tokens, gm_status *st);
void rt_session_free(rt_session *s);

/* Run tokens[0..n) from position 0; the KV cache then holds them. Refused (st set), the session is as it was. */
int rt_prefill(rt_session *s, const int32_t *tokens, int n, rt_result *r, gm_status *st);

/* One more token at the next position, with the KV cache; r gets that position's logits. */
int rt_decode_step(rt_session *s, int32_t token, rt_result *r, gm_status *st);

void rt_result_free(rt_result *r); /* r NULL: nothing */

/*
** The k largest logits' ids, largest first, ties to the smaller id; a NaN
** ranks as -infinity (never chosen over a number). ids[j] is -1 for j >= n.
*/
void rt_top_k(const float *logits, int n, int k, int32_t *ids);

#ifdef __cplusplus
}
#endif

#endif
