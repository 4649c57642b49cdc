/*
** The reference side of Phases 2 and 3 (docs/verify.md): `phase0 capture`
** writes a bundle of what the bf16 reference computes for the canonical
** prompts, `phase0 verify REF CAND` compares a candidate bundle (an NPU
** pipeline's, written with numpy.save) with it under verify's rules.
**
** How the folder is cut (phase0/verify/):
**   rules.c     the rules: pure functions of arrays in memory, and vf_rules[], the table every report loops over
**   bundle.c    a bundle's files: paths, .npy in and out, manifest.json
**   gatefile.c  mlir-air's NPU capture (verify_runner.py --gate-phase capture-npu --gate-file F) as a candidate
**   capture.c   the runner's outputs written as a bundle
**   compare.c   two bundles read and measured into a vf_report
**   text.c, json.c, markdown.c, html.c   the reports
**   commands.c  `phase0 capture` and `phase0 verify`: options, prompts, exit status
** A new rule is one entry in vf_rules[] (and its judge in rules.c): every
** report shows it, and its FAIL fails the verdict.
*/
#ifndef GM_PHASE0_VERIFY_H
#define GM_PHASE0_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "gm/runner.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    VF_GATE_N_TOKENS = 32, /* greedy steps the gate walks */
    VF_GATE_K = 5,         /* the top-k of the token-set gate */
    VF_TOP_K = 20,         /* ids and logits kept per step in a bundle */
};

typedef enum vf_verdict { VF_OK = 0, VF_FAIL = 1, VF_UNCHECKED = 2 } vf_verdict;

/*
** One row of the lens: a layer's output (or the final norm), or one op inside
** a block; candidate against reference over T positions of H values.
*/
typedef struct vf_layer {
    char name[32];          /* "layer 0" .. "layer L-1", "final_norm"; an op: "layer 0 attn_norm" */
    int layer, op;          /* an op's layer and rt_op; op -1 for a row of the per-layer lens */
    double cos_whole;       /* the whole tensor as one vector */
    double cos_min, cos_p5, cos_median, cos_mean; /* over positions; a zero-norm row counts as 0 */
    double max_abs, mean_abs;                     /* |cand - ref| */
    double max_rel, mean_rel;                     /* |cand - ref| / max(|ref|, 1e-6) */
    long nan;                                     /* NaN or Inf values in the candidate */
    double *pos_cos;                              /* [T]: each position's cosine */
} vf_layer;

/* The lockstep walk of the token gate over one prompt (vf_walk_tokens). */
typedef struct vf_walk {
    int steps;             /* steps walked: what both runs hold, at most VF_GATE_N_TOKENS */
    int diverge;           /* the first step where the chosen ids differ, -1 when none */
    int32_t ref_id, cand_id;                     /* the chosen ids there */
    int32_t ref_top[VF_GATE_K], cand_top[VF_GATE_K]; /* each side's top-k there (cand_top: when has_cand_top) */
    int has_cand_top;      /* the candidate gave its top-k */
    int cand_rank_in_ref;  /* 1-based rank of the candidate's id in the reference's top-k; 0 not in it */
    int ref_rank_in_cand;  /* the same of the reference's id in the candidate's; 0 not in it or not known */
} vf_walk;

/* An op of a block as a bundle holds it: <prompt>/ops/<layer>/<name>.npy, [n_tokens][width] <f4. */
typedef struct vf_op_info {
    const char *name;       /* the file's name: "attn_norm" */
    const char *what;       /* what it is, for the manifest */
    const char *inputs[3];  /* the ops it reads (NULL-ended); q_rope and k_rope read q_norm, k_norm where there */
} vf_op_info;

extern const vf_op_info vf_ops[RT_N_OPS];

/* A rule's verdict on one prompt, and one line saying why. */
typedef struct vf_outcome {
    vf_verdict verdict;
    char why[512];
} vf_outcome;

/* The rules, in the order every report shows them. */
enum { VF_RULE_TOKENS, VF_RULE_BLOCK, VF_N_RULES };

/* One prompt's comparison. */
typedef struct vf_prompt {
    char name[64];             /* the bundle's folder for it: "p000"; unique within a report */
    char *text;                /* the prompt's text, NULL when given as ids */
    int n_tokens;              /* prompt tokens */
    int head_dim;              /* the model's, for the block gate's threshold */
    int n_steps;               /* steps both runs hold, at most VF_GATE_N_TOKENS (the walk may stop sooner, at diverge) */
    int32_t *ref_ids, *cand_ids; /* [n_steps] chosen tokens; both non-NULL when n_steps > 0, NULL when the candidate has no ids */
    char *ref_text, *cand_text;  /* the generated continuations decoded (not the prompt), NULL without a tokenizer */
    vf_walk walk;              /* the token gate's walk (walk.diverge -1 when none) */
    /* decoded with the tokenizer at the divergence (NULL without one, or without a divergence) */
    char *ref_chosen_text, *cand_chosen_text;  /* each side's chosen token */
    char *ref_top_text[VF_GATE_K], *cand_top_text[VF_GATE_K]; /* each side's top-k there */
    char *prefix_text;         /* the steps both agreed on before it, decoded ("" at step 0) */
    int n_warnings;            /* steps where a side's chosen id is not the first of its own top-k row */
    char warning[256];         /* the first of them */
    int T, n_layers;           /* the lens: n_layers rows (each layer, then final_norm), T positions */
    vf_layer *layers;          /* NULL when the candidate has no layers */
    int first_low;             /* first row whose per-position minimum cosine is below `threshold`, -1 none */
    double threshold;          /* the per-position threshold for this head_dim */
    int n_ops;                 /* the ops lens: each op both bundles hold, layer by layer, in rt_op order */
    vf_layer *ops;
    int first_low_op;          /* the first of them whose per-position minimum cosine is below `threshold`, -1 none */
    vf_outcome rule[VF_N_RULES]; /* each rule's verdict, vf_rules[i] */
    char checked[512], unchecked[512]; /* what the candidate allowed to check, and what not */
} vf_prompt;

typedef struct vf_report {
    char model[160], ref_commit[96], ref_kernels[32], cand_label[256], ref_label[256]; /* model: up to 128 */
    char ref_not[320];         /* why REF is no bf16 reference of its model ("captured with --f32"); "" when it is */
    int head_dim;
    int n_prompts;
    vf_prompt *prompts;
    vf_verdict verdict;        /* FAIL if any rule failed on any prompt; not checked if none judged any; else OK */
    int count[VF_N_RULES][3];  /* per rule, the prompts it judged OK, FAIL and not checked (vf_verdict's order) */
} vf_report;

/*
** A rule: a pure function of what a prompt's comparison measured. `key` is
** its name in the JSON report and its class in the HTML page; `title` what the
** text, Markdown and HTML reports call it.
*/
typedef struct vf_rule {
    const char *key, *title;
    vf_verdict (*judge)(const vf_prompt *p, char *why, size_t why_size);
} vf_rule;

extern const vf_rule vf_rules[VF_N_RULES];

/*
** Layer 0's output as the Phase 2 block gate judges it: the lens's first row,
** or, for a candidate without layers.npy (one block run on the NPU), the ops
** lens's row of ops/0/output.npy, the same values; NULL when neither is there.
*/
const vf_layer *vf_block_row(const vf_prompt *p);

/* Every rule on p (p->rule[]); returns VF_FAIL when any failed, else VF_OK. */
vf_verdict vf_judge(vf_prompt *p);

/* "OK", "FAIL", "not checked" */
const char *vf_verdict_name(vf_verdict v);

/* The report's verdict as the text and Markdown reports end on it: "PASS", "FAIL", "NOT CHECKED" */
const char *vf_overall_name(vf_verdict v);

/*
** The token gate's walk, by verify's rules: both runs in lockstep over
** `steps`; at the first step where the chosen ids differ it records both
** ids, both top-k rows and each id's rank in the other side's row; the walk
** stops there. Rows hold `top_width` ids (the first k count) by logit,
** descending, the smaller id first on ties (vf_top_k makes them); cand_top
** NULL: the candidate's row is not known.
*/
void vf_walk_tokens(const int32_t *ref_ids, const int32_t *ref_top, const int32_t *cand_ids, const int32_t *cand_top,
                    int steps, int top_width, vf_walk *w);

/*
** The token gate's verdict on a walk: OK when the runs agree, or at the first
** divergence each side's id is in the other's top-k; FAIL when either is not
** (why names both directions when both fail); not checked when the candidate's
** row is needed and not known, or there were no steps.
*/
vf_verdict vf_token_verdict(const vf_walk *w, char *why, size_t why_size);

/* The k best ids of logits[0..V) in ids[], their logits in vals[] (NULL: not wanted): descending, ties to the smaller id. */
void vf_top_k(const float *logits, int V, int k, int32_t *ids, float *vals);

/*
** A row of w ids and their logits, both sorted in place into the rule's order
** (logit descending, the smaller id first; a NaN becomes -inf and sorts last).
*/
void vf_rule_order(int32_t *ids, float *logits, int w);

/* The first of row[0..w) that an earlier one repeats (its index), or -1: a top-k row holds w different ids. */
int vf_first_repeat(const int32_t *row, int w);

/* The lens on one tensor [T][H]: fills l (l->pos_cos malloc'd). */
int vf_lens(const float *ref, const float *cand, int T, int H, vf_layer *l, gm_status *st);

/* The per-position cosine threshold of Phase 2 for head_dim: 0.99 up to 64, 0.98 up to 128, 0.97 beyond. */
double vf_threshold(int head_dim);

/* "1,2,3" as ids (malloc'd): 0, or -1 for anything else (a sign, a gap, a trailing comma). */
int vf_parse_ids(const char *list, int32_t **out, int *n);

/* r->verdict and r->count[][] from its prompts' rule outcomes. */
void vf_report_tally(vf_report *r);

/* The Markdown report, laid out as mlir-air's report.py lays out theirs, with ours beside (markdown.c). */
int vf_write_md(const vf_report *r, const char *path, gm_status *st);

/* The HTML page: self-contained, inline SVG, nothing fetched (html.c). */
int vf_write_html(const vf_report *r, const char *path, gm_status *st);

void vf_report_free(vf_report *r);

/*
** The commands, from phase0's main: argv[0] is "capture" or "verify". models:
** the model table the program links; canonical("base"|"instruct"): the text
** of a canonical prompts file. Each returns the exit status.
*/
struct gm_model_entry;
int vf_capture_main(int argc, char **argv, const struct gm_model_entry *const *models,
                    const char *(*canonical)(const char *which));
int vf_verify_main(int argc, char **argv, const struct gm_model_entry *const *models,
                   const char *(*canonical)(const char *which));

#ifdef __cplusplus
}
#endif

#endif
