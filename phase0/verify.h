/*
** The reference side of Phases 2 and 3 (docs/verify.md): `phase0 capture`
** writes a bundle of what the bf16 reference computes for the canonical
** prompts, `phase0 verify REF CAND` compares a candidate bundle (an NPU
** pipeline's, written with numpy.save) with it under verify's rules: the
** top-k token-set gate, the per-layer cosine lens and the Phase 2
** single-block gate.
*/
#ifndef GM_PHASE0_VERIFY_H
#define GM_PHASE0_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "gm/status.h"

enum {
    VF_GATE_N_TOKENS = 32, /* greedy steps the gate walks */
    VF_GATE_K = 5,         /* the top-k of the token-set gate */
    VF_TOP_K = 20,         /* ids and logits kept per step in a bundle */
};

typedef enum vf_verdict { VF_OK = 0, VF_FAIL = 1, VF_UNCHECKED = 2 } vf_verdict;

/* One layer (or the final norm) of the lens: candidate against reference over T positions of H values. */
typedef struct vf_layer {
    char name[32];          /* "layer 0" .. "layer L-1", "final_norm" */
    double cos_whole;       /* the whole tensor as one vector */
    double cos_min, cos_p5, cos_median, cos_mean; /* over positions; a zero-norm row counts as 0 */
    double max_abs, mean_abs;                     /* |cand - ref| */
    double max_rel, mean_rel;                     /* |cand - ref| / max(|ref|, 1e-6) */
    long nan;                                     /* NaN or Inf values in the candidate */
    double *pos_cos;                              /* [T]: each position's cosine */
} vf_layer;

/* One prompt's comparison. */
typedef struct vf_prompt {
    char name[64];             /* the bundle's folder for it: "p000"; unique within a report */
    char *text;                /* the prompt's text, NULL when given as ids */
    int n_tokens;              /* prompt tokens */
    int n_steps;               /* steps both runs hold, at most VF_GATE_N_TOKENS (the walk may stop sooner, at diverge) */
    int32_t *ref_ids, *cand_ids; /* [n_steps] chosen tokens; both non-NULL when n_steps > 0, NULL when the candidate has no ids */
    char *ref_text, *cand_text;  /* the generated continuations decoded (not the prompt), NULL without a tokenizer */
    int diverge;               /* first step where the chosen tokens differ, -1 when none */
    vf_verdict gate;           /* the top-k token-set gate */
    char gate_why[512];        /* one line: why OK, FAIL or not checked */
    int T, n_layers;           /* the lens: n_layers rows (each layer, then final_norm), T positions */
    vf_layer *layers;          /* NULL when the candidate has no layers */
    int first_low;             /* first row whose per-position minimum cosine is below `threshold`, -1 none */
    double threshold;          /* the per-position threshold for this head_dim */
    vf_verdict block;          /* Phase 2's single-block gate on layer 0 */
    char block_why[512];
    char checked[512], unchecked[512]; /* what the candidate allowed to check, and what not */
} vf_prompt;

typedef struct vf_report {
    char model[128], ref_commit[96], ref_kernels[32], cand_label[256];
    int head_dim;
    int n_prompts;
    vf_prompt *prompts;
    vf_verdict verdict;        /* FAIL if any gate failed; else OK */
} vf_report;

/*
** The gate on one prompt, by verify's rules: walk both runs in lockstep; at
** the first step where the chosen ids differ the result is OK when the
** candidate's id is in the reference's top-k and the reference's id is in
** the candidate's top-k (cand_top NULL: not checked), else FAIL; the walk
** stops there. Top-k rows hold ids by logit, descending, the smaller id first
** on ties (vf_top_k makes them). *diverge receives the step, -1 when none.
*/
vf_verdict vf_token_gate(const int32_t *ref_ids, const int32_t *ref_top, const int32_t *cand_ids,
                         const int32_t *cand_top, int steps, int top_width, int k, int *diverge, char *why,
                         size_t why_size);

/* The k best ids of logits[0..V) in ids[], their logits in vals[] (NULL: not wanted): descending, ties to the smaller id. */
void vf_top_k(const float *logits, int V, int k, int32_t *ids, float *vals);

/* The lens on one tensor [T][H]: fills l (l->pos_cos malloc'd). */
int vf_lens(const float *ref, const float *cand, int T, int H, vf_layer *l, gm_status *st);

/* The per-position cosine threshold of Phase 2 for head_dim: 0.99 up to 64, 0.98 up to 128, 0.97 beyond. */
double vf_threshold(int head_dim);

/* "1,2,3" as ids (malloc'd): 0, or -1 for anything else (a sign, a gap, a trailing comma). */
int vf_parse_ids(const char *list, int32_t **out, int *n);

/* The HTML page: self-contained, inline SVG, nothing fetched (verify_html.c). */
int vf_write_html(const vf_report *r, const char *path, gm_status *st);

void vf_report_free(vf_report *r);

/*
** The commands, from phase0's main: argv[0] is "capture" or "verify". models:
** the model table the program links; prompts("base"|"instruct"): the text
** of a canonical prompt file. Each returns the exit status.
*/
struct gm_model_entry;
int vf_capture_main(int argc, char **argv, const struct gm_model_entry *const *models,
                    const char *(*prompts)(const char *which));
int vf_verify_main(int argc, char **argv, const struct gm_model_entry *const *models);

#endif
