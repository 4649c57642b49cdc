/*
** verify's rules (docs/verify.md, "The rules"): pure functions of arrays in
** memory, no files, no state. The measurements (the top-k order, the token
** walk, the lens) and the table of rules judged from them, vf_rules[], which
** the reports loop over. Every comparison is in double precision.
*/
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* the top-k order */

/* a before b in a top-k row: the larger logit, then the smaller id */
static int ahead(float la, int32_t a, float lb, int32_t b)
{
    return la > lb || (la == lb && a < b);
}

void vf_top_k(const float *logits, int V, int k, int32_t *ids, float *vals)
{
    if (k <= 0)
        return;
    rt_top_k(logits, V, k, ids); /* a NaN is never chosen over a number */
    if (vals)
        for (int j = 0; j < k; j++)
            vals[j] = ids[j] < 0 || isnan(logits[ids[j]]) ? -INFINITY : logits[ids[j]];
}

void vf_rule_order(int32_t *ids, float *logits, int w)
{
    for (int i = 0; i < w; i++) /* a NaN sorts last, as vf_top_k never chooses one */
        logits[i] = isnan(logits[i]) ? -INFINITY : logits[i];
    for (int i = 1; i < w; i++) /* insertion sort: rows are short */
        for (int j = i; j > 0 && ahead(logits[j], ids[j], logits[j - 1], ids[j - 1]); j--) {
            const float tv = logits[j];
            const int32_t ti = ids[j];
            logits[j] = logits[j - 1], ids[j] = ids[j - 1];
            logits[j - 1] = tv, ids[j - 1] = ti;
        }
}

int vf_first_repeat(const int32_t *row, int w)
{
    for (int i = 1; i < w; i++) /* rows are short */
        for (int j = 0; j < i; j++)
            if (row[j] == row[i])
                return i;
    return -1;
}

/* ---------------------------------------------------------------------- */
/* the token gate */

/* 1-based rank of id in row[0..k), 0 when it is not there */
static int rank_in(const int32_t *row, int k, int32_t id)
{
    for (int i = 0; i < k; i++)
        if (row[i] == id)
            return i + 1;
    return 0;
}

void vf_walk_tokens(const int32_t *ref_ids, const int32_t *ref_top, const int32_t *cand_ids, const int32_t *cand_top,
                    int steps, int top_width, vf_walk *w)
{
    memset(w, 0, sizeof *w);
    w->steps = steps;
    w->diverge = -1;
    w->has_cand_top = cand_top != NULL;
    for (int s = 0; s < steps; s++) {
        if (ref_ids[s] == cand_ids[s])
            continue;
        w->diverge = s;
        w->ref_id = ref_ids[s];
        w->cand_id = cand_ids[s];
        memcpy(w->ref_top, ref_top + (size_t)s * top_width, sizeof w->ref_top);
        w->cand_rank_in_ref = rank_in(w->ref_top, VF_GATE_K, w->cand_id);
        if (cand_top) {
            memcpy(w->cand_top, cand_top + (size_t)s * top_width, sizeof w->cand_top);
            w->ref_rank_in_cand = rank_in(w->cand_top, VF_GATE_K, w->ref_id);
        }
        return;
    }
}

/* "(a, b, c, d, e)" */
static void row_text(char *out, size_t size, const int32_t *row)
{
    size_t k = (size_t)snprintf(out, size, "(");
    for (int i = 0; i < VF_GATE_K && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s%d", i ? ", " : "", row[i]);
    if (k < size)
        snprintf(out + k, size - k, ")");
}

vf_verdict vf_token_verdict(const vf_walk *w, char *why, size_t why_size)
{
    if (w->steps == 0) {
        snprintf(why, why_size, "not checked: the candidate holds no steps");
        return VF_UNCHECKED;
    }
    if (w->diverge < 0) {
        snprintf(why, why_size, "all %d steps chose the same tokens", w->steps);
        return VF_OK;
    }
    char rt[128], ct[128];
    row_text(rt, sizeof rt, w->ref_top);
    row_text(ct, sizeof ct, w->cand_top);
    const int s = w->diverge, k = VF_GATE_K, cand_in = w->cand_rank_in_ref > 0, ref_in = w->ref_rank_in_cand > 0;
    if (cand_in && ref_in) {
        snprintf(why, why_size, "step %d: first divergence (reference %d, candidate %d), each in the other's top-%d "
                 "(candidate's #%d in the reference's, reference's #%d in the candidate's)", s, w->ref_id, w->cand_id,
                 k, w->cand_rank_in_ref, w->ref_rank_in_cand);
        return VF_OK;
    }
    if (cand_in && !w->has_cand_top) {
        snprintf(why, why_size, "step %d: the candidate chose %d, #%d in the reference's top-%d; whether the "
                 "reference's %d is in the candidate's top-%d is not known (no topk_ids.npy)", s, w->cand_id,
                 w->cand_rank_in_ref, k, w->ref_id, k);
        return VF_UNCHECKED;
    }
    /* a FAIL: each direction that fails, both when both do */
    size_t n = (size_t)snprintf(why, why_size, "step %d: ", s);
    if (!cand_in && n < why_size)
        n += (size_t)snprintf(why + n, why_size - n, "the candidate chose %d, not in the reference's top-%d %s",
                              w->cand_id, k, rt);
    if (w->has_cand_top && !ref_in && n < why_size)
        snprintf(why + n, why_size - n, "%sthe reference chose %d, not in the candidate's top-%d %s",
                 cand_in ? "" : "; ", w->ref_id, k, ct);
    return VF_FAIL;
}

/* ---------------------------------------------------------------------- */
/* the lens */

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
    if (n == (size_t)l->nan) /* no finite value to measure: not a perfect 0 */
        l->max_abs = l->max_rel = NAN;
    free(sorted);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* the rules */

/* The top-k token-set gate over the first VF_GATE_N_TOKENS greedy steps. */
static vf_verdict judge_tokens(const vf_prompt *p, char *why, size_t size)
{
    if (!p->cand_ids) {
        snprintf(why, size, "not checked: the candidate has neither ids.npy nor topk_ids.npy");
        return VF_UNCHECKED;
    }
    const vf_verdict v = vf_token_verdict(&p->walk, why, size);
    const size_t n = strlen(why);
    if (p->walk.steps > 0 && p->walk.steps < VF_GATE_N_TOKENS && n < size)
        snprintf(why + n, size - n, "; %d of the gate's %d steps: what both bundles hold", p->walk.steps,
                 VF_GATE_N_TOKENS);
    return v;
}

const vf_layer *vf_block_row(const vf_prompt *p)
{
    if (p->layers && p->n_layers >= 1)
        return &p->layers[0];
    for (int i = 0; i < p->n_ops; i++)
        if (p->ops[i].layer == 0 && p->ops[i].op == RT_OP_OUTPUT)
            return &p->ops[i];
    return NULL;
}

/* Phase 2's single-block gate on layer 0: whole-tensor cosine >= 0.99, per-position minimum >= the threshold, no NaN. */
static vf_verdict judge_block(const vf_prompt *p, char *why, size_t size)
{
    const vf_layer *b = vf_block_row(p);
    if (!b) {
        snprintf(why, size, "not checked: the candidate has no layers.npy and no ops/0/output.npy");
        return VF_UNCHECKED;
    }
    if (b->nan) {
        snprintf(why, size, "layer 0 holds %ld NaN or Inf", b->nan);
        return VF_FAIL;
    }
    if (b->cos_whole < 0.99) {
        snprintf(why, size, "layer 0: whole-tensor cosine %.6f < 0.99", b->cos_whole);
        return VF_FAIL;
    }
    if (b->cos_min < p->threshold) {
        snprintf(why, size, "layer 0: per-position minimum cosine %.6f < %.2f (head_dim %d)", b->cos_min,
                 p->threshold, p->head_dim);
        return VF_FAIL;
    }
    snprintf(why, size, "layer 0: whole-tensor cosine %.6f >= 0.99, per-position minimum %.6f >= %.2f", b->cos_whole,
             b->cos_min, p->threshold);
    return VF_OK;
}

const vf_rule vf_rules[VF_N_RULES] = {
    [VF_RULE_TOKENS] = {"token_gate", "token gate (top-5, 32 steps)", judge_tokens},
    [VF_RULE_BLOCK] = {"block_gate", "phase 2 block gate", judge_block},
};

vf_verdict vf_judge(vf_prompt *p)
{
    vf_verdict all = VF_OK;
    for (int i = 0; i < VF_N_RULES; i++) {
        p->rule[i].verdict = vf_rules[i].judge(p, p->rule[i].why, sizeof p->rule[i].why);
        if (p->rule[i].verdict == VF_FAIL)
            all = VF_FAIL;
    }
    return all;
}

const char *vf_verdict_name(vf_verdict v)
{
    return v == VF_OK ? "OK" : v == VF_FAIL ? "FAIL" : "not checked";
}

const char *vf_overall_name(vf_verdict v) { return v == VF_OK ? "PASS" : v == VF_FAIL ? "FAIL" : "NOT CHECKED"; }

void vf_report_tally(vf_report *r)
{
    memset(r->count, 0, sizeof r->count);
    r->verdict = VF_OK;
    for (int i = 0; i < r->n_prompts; i++)
        for (int k = 0; k < VF_N_RULES; k++) {
            const vf_verdict v = r->prompts[i].rule[k].verdict;
            r->count[k][v == VF_OK ? 0 : v == VF_FAIL ? 1 : 2]++;
            if (v == VF_FAIL)
                r->verdict = VF_FAIL;
        }
    int judged = 0;
    for (int k = 0; k < VF_N_RULES; k++)
        judged += r->count[k][0] + r->count[k][1];
    if (!judged) /* no rule could judge any prompt: a candidate that holds nothing does not pass */
        r->verdict = VF_UNCHECKED;
}
