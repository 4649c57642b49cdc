/*
** phase0 verify --json: the report for tools. Per prompt, each rule of
** vf_rules[] as an object under its key ({"verdict", "why"}), the token
** gate's walk beside its verdict, and the lens; then "topk_checks" and
** "summary" as mlir-air's report.py writes them (dump_json), so a harness
** that reads theirs reads ours; non-finite numbers as null.
*/
#include "internal.h"

#include <math.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

static cJSON *num(double x) { return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

static cJSON *ids(const int32_t *v, int n)
{
    return v ? cJSON_CreateIntArray(v, n) : cJSON_CreateArray();
}

/* The token gate's walk, added to its rule's object. */
static void add_walk(cJSON *g, const vf_prompt *p)
{
    cJSON_AddNumberToObject(g, "steps", p->n_steps);
    cJSON_AddItemToObject(g, "diverge", p->walk.diverge >= 0 ? cJSON_CreateNumber(p->walk.diverge) : cJSON_CreateNull());
    cJSON_AddItemToObject(g, "reference_ids", ids(p->ref_ids, p->ref_ids ? p->n_steps : 0));
    cJSON_AddItemToObject(g, "candidate_ids", ids(p->cand_ids, p->cand_ids ? p->n_steps : 0));
    if (p->ref_text && p->cand_text) {
        cJSON_AddStringToObject(g, "reference_text", p->ref_text);
        cJSON_AddStringToObject(g, "candidate_text", p->cand_text);
    }
}

static cJSON *lens_row(const vf_layer *x)
{
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
    return y;
}

/* A string field that may be absent: null */
static cJSON *str_or_null(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *quoted_or_null(const char *s)
{
    char *q = s ? vf_md_quoted(s) : NULL;
    cJSON *j = str_or_null(q);
    free(q);
    return j;
}

/* 0 (not in it, or not known) as null */
static cJSON *rank_or_null(int rank)
{
    return rank > 0 ? cJSON_CreateNumber(rank) : cJSON_CreateNull();
}

/*
** Prompt i's token gate as mlir-air's report.py writes a TopKCheckRecord
** into "topk_checks" ("pair": "npu_vs_hf", the candidate in the NPU's place and
** the reference in HF's), its fields named and valued as theirs: texts quoted
** and escaped as their _md_escape does, null where theirs is None.
*/
static cJSON *topk_check(const vf_prompt *p, int i)
{
    const vf_walk *w = &p->walk;
    const int div = w->diverge >= 0;
    cJSON *o = cJSON_CreateObject();
    char *shortened = vf_short_prompt(p->text ? p->text : "");
    cJSON_AddStringToObject(o, "pair", "npu_vs_hf");
    cJSON_AddNumberToObject(o, "prompt_idx", i);
    cJSON_AddStringToObject(o, "prompt_text", shortened);
    free(shortened);
    cJSON_AddNumberToObject(o, "n_steps", p->n_steps);
    cJSON_AddNumberToObject(o, "k", VF_GATE_K);
    cJSON_AddItemToObject(o, "divergence_step", div ? cJSON_CreateNumber(w->diverge) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "test_chosen_at_div", div ? cJSON_CreateNumber(w->cand_id) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "ref_chosen_at_div", div ? cJSON_CreateNumber(w->ref_id) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "test_topk_at_div",
                          div && w->has_cand_top ? cJSON_CreateIntArray(w->cand_top, VF_GATE_K) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "ref_topk_at_div", div ? cJSON_CreateIntArray(w->ref_top, VF_GATE_K) : cJSON_CreateNull());
    const vf_outcome *g = &p->rule[VF_RULE_TOKENS];
    cJSON_AddStringToObject(o, "status", vf_verdict_name(g->verdict));
    cJSON_AddItemToObject(o, "fail_reason", str_or_null(g->verdict == VF_FAIL ? g->why : NULL));
    cJSON_AddItemToObject(o, "test_chosen_rank_in_ref", rank_or_null(div ? w->cand_rank_in_ref : 0));
    cJSON_AddItemToObject(o, "ref_chosen_rank_in_test", rank_or_null(div ? w->ref_rank_in_cand : 0));
    cJSON_AddItemToObject(o, "test_chosen_text_at_div", quoted_or_null(p->cand_chosen_text));
    cJSON_AddItemToObject(o, "ref_chosen_text_at_div", quoted_or_null(p->ref_chosen_text));
    cJSON_AddItemToObject(o, "agreed_prefix_text", quoted_or_null(p->prefix_text));
    /* ours beside theirs: both top-k lists decoded */
    cJSON *tt = cJSON_CreateArray(), *rt = cJSON_CreateArray();
    for (int k = 0; div && k < VF_GATE_K; k++) {
        cJSON_AddItemToArray(rt, str_or_null(p->ref_top_text[k]));
        if (w->has_cand_top)
            cJSON_AddItemToArray(tt, str_or_null(p->cand_top_text[k]));
    }
    cJSON_AddItemToObject(o, "test_topk_text_at_div", tt);
    cJSON_AddItemToObject(o, "ref_topk_text_at_div", rt);
    return o;
}

cJSON *vf_report_json(const vf_report *r)
{
    cJSON *j = cJSON_CreateObject(), *ps = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "model", r->model);
    cJSON_AddStringToObject(j, "candidate", r->cand_label);
    cJSON_AddStringToObject(j, "reference", r->ref_label);
    if (r->ref_not[0]) /* capture's --f32 or --rope-theta: a candidate made on purpose, taken as the reference */
        cJSON_AddStringToObject(j, "reference_not_bf16_reference", r->ref_not);
    cJSON_AddBoolToObject(j, "pass", r->verdict == VF_OK);
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddNumberToObject(o, "n_tokens", p->n_tokens);
        for (int k = 0; k < VF_N_RULES; k++) {
            cJSON *g = cJSON_CreateObject();
            cJSON_AddStringToObject(g, "verdict", vf_verdict_name(p->rule[k].verdict));
            cJSON_AddStringToObject(g, "why", p->rule[k].why);
            if (k == VF_RULE_TOKENS)
                add_walk(g, p);
            cJSON_AddItemToObject(o, vf_rules[k].key, g);
        }
        if (p->layers) {
            cJSON *ls = cJSON_CreateArray();
            for (int l = 0; l < p->n_layers; l++)
                cJSON_AddItemToArray(ls, lens_row(&p->layers[l]));
            cJSON_AddItemToObject(o, "lens", ls);
            cJSON_AddItemToObject(o, "first_below_threshold",
                                  p->first_low >= 0 ? cJSON_CreateString(p->layers[p->first_low].name) : cJSON_CreateNull());
            cJSON_AddNumberToObject(o, "threshold", p->threshold);
        }
        if (p->ops) { /* the ops inside the blocks: each row with its layer and op's name */
            cJSON *os = cJSON_CreateArray();
            for (int k = 0; k < p->n_ops; k++) {
                cJSON *y = lens_row(&p->ops[k]);
                cJSON_AddNumberToObject(y, "layer", p->ops[k].layer);
                cJSON_AddStringToObject(y, "op", vf_ops[p->ops[k].op].name);
                cJSON_AddItemToArray(os, y);
            }
            cJSON_AddItemToObject(o, "ops", os);
            cJSON_AddItemToObject(o, "first_op_below_threshold",
                                  p->first_low_op >= 0 ? cJSON_CreateString(p->ops[p->first_low_op].name)
                                                       : cJSON_CreateNull());
        }
        cJSON_AddStringToObject(o, "checked", p->checked);
        cJSON_AddStringToObject(o, "not_checked", p->unchecked);
        cJSON_AddNumberToObject(o, "warnings", p->n_warnings);
        cJSON_AddItemToObject(o, "warning", str_or_null(p->n_warnings ? p->warning : NULL));
        cJSON_AddItemToArray(ps, o);
    }
    cJSON_AddItemToObject(j, "prompts", ps);
    cJSON *tc = cJSON_CreateArray();
    for (int i = 0; i < r->n_prompts; i++)
        if (r->prompts[i].cand_ids) /* a prompt the token gate could walk */
            cJSON_AddItemToArray(tc, topk_check(&r->prompts[i], i));
    cJSON_AddItemToObject(j, "topk_checks", tc);
    /* their summary's counts, and each rule's */
    cJSON *sum = cJSON_CreateObject(), *rules = cJSON_CreateObject();
    int layers = 0;
    for (int i = 0; i < r->n_prompts; i++)
        layers += r->prompts[i].layers ? r->prompts[i].n_layers : 0;
    cJSON_AddNumberToObject(sum, "n_layer_records", layers);
    cJSON_AddNumberToObject(sum, "topk_passed", r->count[VF_RULE_TOKENS][VF_OK]);
    cJSON_AddNumberToObject(sum, "topk_failed", r->count[VF_RULE_TOKENS][VF_FAIL]);
    for (int k = 0; k < VF_N_RULES; k++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "ok", r->count[k][VF_OK]);
        cJSON_AddNumberToObject(c, "fail", r->count[k][VF_FAIL]);
        cJSON_AddNumberToObject(c, "not_checked", r->count[k][VF_UNCHECKED]);
        cJSON_AddItemToObject(rules, vf_rules[k].key, c);
    }
    cJSON_AddItemToObject(sum, "rules", rules);
    cJSON_AddItemToObject(j, "summary", sum);
    return j;
}
