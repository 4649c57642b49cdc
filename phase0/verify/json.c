/*
** phase0 verify --json: the report for tools. Per prompt, each rule of
** vf_rules[] as an object under its key ({"verdict", "why"}), the token
** gate's walk beside its verdict, and the lens; non-finite numbers as null.
*/
#include "internal.h"

#include <math.h>

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

cJSON *vf_report_json(const vf_report *r)
{
    cJSON *j = cJSON_CreateObject(), *ps = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "model", r->model);
    cJSON_AddStringToObject(j, "candidate", r->cand_label);
    cJSON_AddBoolToObject(j, "pass", r->verdict != VF_FAIL);
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
        cJSON_AddStringToObject(o, "checked", p->checked);
        cJSON_AddStringToObject(o, "not_checked", p->unchecked);
        cJSON_AddItemToArray(ps, o);
    }
    cJSON_AddItemToObject(j, "prompts", ps);
    return j;
}
