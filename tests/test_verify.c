/*
** phase0 capture and verify (docs/verify.md): the rules on small hand-checked
** cases, one by one; then, on every golden model and the tiny
** full-vocabulary one, the reference against itself, our f32 runner as a
** candidate, and candidates perturbed from the reference (tests/verify_cases.py
** makes them with numpy and computes, on its own, the verdict the rules give).
*/
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "prompt_file.h"
#include "util.h"
#include "verify.h"

#define PY "/usr/bin/python3 " GM_SOURCE_DIR "/tests/verify_cases.py"

/* ---------------------------------------------------------------------- */
/* the rules, by hand */

/* The token gate on rows of 5: the walk, then its verdict; *d the divergence. */
static vf_verdict gate(const int32_t *ref, const int32_t *ref_top, const int32_t *cand, const int32_t *cand_top,
                       int steps, int *d, char *why, size_t size)
{
    vf_walk w;
    vf_walk_tokens(ref, ref_top, cand, cand_top, steps, 5, &w);
    *d = w.diverge;
    return vf_token_verdict(&w, why, size);
}

Test(verify_rules, top_k_orders_by_logit_then_the_smaller_id)
{
    const float lg[] = {1, 5, 3, 5, 2, NAN, 5, 0};
    int32_t ids[5];
    float v[5];
    vf_top_k(lg, 8, 5, ids, v);
    const int32_t want[] = {1, 3, 6, 2, 4}; /* three tied at 5: by id; a NaN is never among the best */
    for (int i = 0; i < 5; i++)
        cr_expect_eq(ids[i], want[i], "rank %d: %d", i, ids[i]);
    cr_expect_eq(v[0], 5.0f);
    cr_expect_eq(v[4], 2.0f);
}

Test(verify_rules, a_tie_at_the_top_k_boundary_keeps_the_smaller_id_in)
{
    /* ids 4 and 9 tie for 5th place: 4 is in the top-5, 9 is not */
    float lg[12] = {9, 8, 7, 6, 5, 0, 0, 0, 0, 5, 0, 0};
    int32_t top[5];
    vf_top_k(lg, 12, 5, top, NULL);
    cr_assert_eq(top[4], 4);
    const int32_t ref_ids[] = {0}, cand_nine[] = {9}, cand_four[] = {4};
    const int32_t cand_top[5] = {9, 0, 1, 2, 3};
    int d;
    char why[512];
    cr_expect_eq(gate(ref_ids, top, cand_nine, cand_top, 1, &d, why, sizeof why), VF_FAIL, "%s", why);
    /* the rule asks nothing of the candidate's own choice in its own top-5 */
    cr_expect_eq(gate(ref_ids, top, cand_four, cand_top, 1, &d, why, sizeof why), VF_OK, "%s", why);
    const int32_t cand_top4[5] = {4, 0, 1, 2, 3};
    cr_expect_eq(gate(ref_ids, top, cand_four, cand_top4, 1, &d, why, sizeof why), VF_OK, "%s", why);
}

/* The gate, one rule at a time: 3 steps, top-5 rows. */
typedef struct gate_case {
    int32_t ref[3], cand[3];
    int32_t ref_top[3][5], cand_top[3][5];
    int cand_has_top;
    vf_verdict want;
    int diverge;
} gate_case;

static const gate_case gate_cases[] = {
    /* the same tokens: OK, no divergence */
    {{1, 2, 3}, {1, 2, 3}, {{1}, {2}, {3}}, {{1}, {2}, {3}}, 1, VF_OK, -1},
    /* differ at step 1, each in the other's top-5: OK, and the walk stops there */
    {{1, 2, 3}, {1, 7, 99}, {{1}, {2, 7, 0, 0, 0}, {3}}, {{1}, {7, 2, 0, 0, 0}, {99}}, 1, VF_OK, 1},
    /* the candidate's token is not in the reference's top-5: FAIL */
    {{1, 2, 3}, {1, 8, 3}, {{1}, {2, 7, 6, 5, 4}, {3}}, {{1}, {8, 2, 0, 0, 0}, {3}}, 1, VF_FAIL, 1},
    /* the reference's token is not in the candidate's top-5: FAIL */
    {{1, 2, 3}, {1, 7, 3}, {{1}, {2, 7, 0, 0, 0}, {3}}, {{1}, {7, 6, 5, 4, 9}, {3}}, 1, VF_FAIL, 1},
    /* ids only, a divergence inside the reference's top-5: not checked */
    {{1, 2, 3}, {1, 7, 3}, {{1}, {2, 7, 0, 0, 0}, {3}}, {{0}}, 0, VF_UNCHECKED, 1},
    /* ids only, outside it: FAIL */
    {{1, 2, 3}, {5, 2, 3}, {{1, 2, 3, 4, 6}, {2}, {3}}, {{0}}, 0, VF_FAIL, 0},
    /* the 5th of the top-5 counts, a 6th would not */
    {{1, 2, 3}, {11, 2, 3}, {{1, 2, 3, 4, 11}, {2}, {3}}, {{11, 6, 5, 4, 1}, {2}, {3}}, 1, VF_OK, 0},
};

Test(verify_rules, the_token_gate_case_by_case)
{
    for (size_t i = 0; i < sizeof gate_cases / sizeof gate_cases[0]; i++) {
        const gate_case *c = &gate_cases[i];
        int d = -2;
        char why[512];
        vf_verdict v = gate(c->ref, &c->ref_top[0][0], c->cand, c->cand_has_top ? &c->cand_top[0][0] : NULL, 3, &d,
                            why, sizeof why);
        cr_expect_eq(v, c->want, "case %zu: %d, expected %d (%s)", i, v, c->want, why);
        cr_expect_eq(d, c->diverge, "case %zu: divergence at %d, expected %d", i, d, c->diverge);
        cr_expect(why[0] && !strchr(why, '\n'), "case %zu: one line", i);
    }
}

Test(verify_rules, every_rule_of_the_table_is_judged_and_one_fail_fails_the_prompt)
{
    /* a prompt whose tokens all agree and whose layer 0 is far off */
    int32_t ids[3] = {1, 2, 3};
    vf_layer l0 = {.name = "layer 0", .cos_whole = 0.5, .cos_min = 0.4};
    vf_prompt p = {.head_dim = 64, .n_steps = 3, .ref_ids = ids, .cand_ids = ids, .n_layers = 1, .layers = &l0};
    p.threshold = vf_threshold(64);
    vf_walk_tokens(ids, (int32_t[15]){0}, ids, NULL, 3, 5, &p.walk);
    cr_assert_eq(vf_judge(&p), VF_FAIL);
    cr_expect_eq(p.rule[VF_RULE_TOKENS].verdict, VF_OK, "%s", p.rule[VF_RULE_TOKENS].why);
    cr_expect_eq(p.rule[VF_RULE_BLOCK].verdict, VF_FAIL, "%s", p.rule[VF_RULE_BLOCK].why);
    cr_expect(strstr(p.rule[VF_RULE_BLOCK].why, "whole-tensor cosine 0.500000 < 0.99"), "%s", p.rule[VF_RULE_BLOCK].why);
    /* without layers and without the candidate's ids nothing fails: each rule says it was not checked */
    vf_prompt q = {.head_dim = 64};
    cr_assert_eq(vf_judge(&q), VF_OK);
    for (int k = 0; k < VF_N_RULES; k++) {
        cr_expect_eq(q.rule[k].verdict, VF_UNCHECKED, "%s", vf_rules[k].key);
        cr_expect(strncmp(q.rule[k].why, "not checked", 11) == 0, "%s: %s", vf_rules[k].key, q.rule[k].why);
        for (int j = 0; j < k; j++)
            cr_expect_str_neq(vf_rules[k].key, vf_rules[j].key, "each rule has its own key");
    }
}

Test(verify_rules, the_walk_ranks_each_choice_in_the_others_top_k_and_a_fail_names_both_directions)
{
    const int32_t ref[] = {4, 7}, cand[] = {4, 9};
    const int32_t ref_top[2][5] = {{4}, {7, 9, 1, 2, 3}}, cand_top[2][5] = {{4}, {9, 5, 7, 6, 8}};
    vf_walk w;
    char why[512];
    vf_walk_tokens(ref, &ref_top[0][0], cand, &cand_top[0][0], 2, 5, &w);
    cr_expect_eq(w.diverge, 1);
    cr_expect_eq(w.cand_rank_in_ref, 2, "the candidate's 9 is the reference's #2");
    cr_expect_eq(w.ref_rank_in_cand, 3, "the reference's 7 is the candidate's #3");
    cr_expect_eq(vf_token_verdict(&w, why, sizeof why), VF_OK, "%s", why);
    const int32_t far_ref_top[2][5] = {{4}, {7, 1, 2, 3, 5}}, far_cand_top[2][5] = {{4}, {9, 1, 2, 3, 5}};
    vf_walk_tokens(ref, &far_ref_top[0][0], cand, &far_cand_top[0][0], 2, 5, &w);
    cr_expect(w.cand_rank_in_ref == 0 && w.ref_rank_in_cand == 0);
    cr_expect_eq(vf_token_verdict(&w, why, sizeof why), VF_FAIL);
    cr_expect_str_eq(why, "step 1: the candidate chose 9, not in the reference's top-5 (7, 1, 2, 3, 5); the reference "
                          "chose 7, not in the candidate's top-5 (9, 1, 2, 3, 5)");
}

Test(verify_rules, the_lens_by_hand)
{
    /* 3 positions of 2: equal, opposite, zero in the candidate */
    const float ref[] = {1, 0, 0, 2, 3, 4}, cand[] = {1, 0, 0, -2, 0, 0};
    vf_layer l;
    gm_status st = {0};
    cr_assert_eq(vf_lens(ref, cand, 3, 2, &l, &st), 0);
    cr_expect_float_eq(l.pos_cos[0], 1.0, 1e-12);
    cr_expect_float_eq(l.pos_cos[1], -1.0, 1e-12);
    cr_expect_eq(l.pos_cos[2], 0.0, "a zero-norm row counts as 0");
    cr_expect_float_eq(l.cos_min, -1.0, 1e-12);
    cr_expect_float_eq(l.cos_median, 0.0, 1e-12);
    cr_expect_float_eq(l.cos_mean, 0.0, 1e-12);
    cr_expect_float_eq(l.cos_p5, -0.9, 1e-12); /* numpy: -1 + (0 - -1) * 0.05 * 2 */
    cr_expect_float_eq(l.max_abs, 4.0, 1e-12);
    cr_expect_float_eq(l.mean_abs, (0 + 0 + 0 + 4 + 3 + 4) / 6.0, 1e-12);
    /* relative error: |d| / max(|ref|, 1e-6); ref 0 and cand 0 gives 0 */
    cr_expect_float_eq(l.max_rel, 2.0, 1e-12);
    cr_expect_float_eq(l.cos_whole, (1 - 4.0) / (sqrt(30.0) * sqrt(5.0)), 1e-12);
    cr_expect_eq(l.nan, 0);
    free(l.pos_cos);
    const float with_nan[] = {1, 0, NAN, 2, 3, 4};
    cr_assert_eq(vf_lens(ref, with_nan, 3, 2, &l, &st), 0);
    cr_expect_eq(l.nan, 1);
    free(l.pos_cos);
    /* an Inf (docs/verify.md): counted, out of the error metrics, its position's cosine 0 and the whole's */
    const float with_inf[] = {1, 0, INFINITY, 2, 3, 4};
    cr_assert_eq(vf_lens(ref, with_inf, 3, 2, &l, &st), 0);
    cr_expect_eq(l.nan, 1);
    cr_expect_eq(l.pos_cos[1], 0.0, "a position with an Inf has cosine 0");
    cr_expect_float_eq(l.pos_cos[0], 1.0, 1e-12);
    cr_expect_eq(l.cos_whole, 0.0);
    cr_expect_float_eq(l.max_abs, 0.0, 1e-12, "the finite values agree");
    cr_expect_float_eq(l.mean_abs, 0.0, 1e-12);
    free(l.pos_cos);
    /* none finite: nothing measured, which is not a perfect 0 */
    const float all_nan[] = {NAN, NAN, NAN, NAN, NAN, NAN};
    cr_assert_eq(vf_lens(ref, all_nan, 3, 2, &l, &st), 0);
    cr_expect(l.nan == 6 && isnan(l.max_abs) && isnan(l.max_rel) && isnan(l.mean_abs), "max %g rel %g", l.max_abs,
              l.max_rel);
    free(l.pos_cos);
}

Test(verify_rules, the_block_threshold_follows_head_dim)
{
    cr_expect_eq(vf_threshold(16), 0.99);
    cr_expect_eq(vf_threshold(64), 0.99);
    cr_expect_eq(vf_threshold(128), 0.98);
    cr_expect_eq(vf_threshold(256), 0.97);
}

/* ---------------------------------------------------------------------- */
/* the commands on real models */

static const char *const goldens[] = {"llama3_tied", "llama_f32_checkpoint", "llama_untied", "llama_untied_sharded",
                                      "mistral_untied", "qwen2_tied", "qwen3_tied"};

static char *work;

static void setup(void) { work = tu_tmpdir(); }

static void teardown(void) { tu_rmtree(work); }

TestSuite(verify, .init = setup, .fini = teardown, .timeout = 120);

/* phase0 capture of a golden into work/<out>; extra options appended. */
static char *capture(const char *id, const char *out, const char *extra)
{
    char *toks = tg_tokens_arg(id), cmd[16384], *err = NULL, *dir = malloc(4400);
    snprintf(dir, 4400, "%s/%s", work, out);
    snprintf(cmd, sizeof cmd, "'%s' capture %s --weights '%s/golden/%s' %s --out '%s' %s", GM_PHASE0, id,
             GM_SHARED_DIR, id, toks, dir, extra ? extra : "");
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s: %s", id, err);
    free(err);
    free(toks);
    return dir;
}

/* phase0 verify REF CAND --json: the exit status, the report parsed. */
static int verify_json(const char *ref, const char *cand, cJSON **report, char **err)
{
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --json", GM_PHASE0, ref, cand);
    int rc = tu_run(cmd, &out, err);
    *report = cJSON_Parse(out);
    free(out);
    return rc;
}

static const cJSON *prompt0(const cJSON *report)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(report, "prompts"), 0);
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItem(o, a);
    x = b ? cJSON_GetObjectItem(x, b) : x;
    return cJSON_IsString(x) ? x->valuestring : "(absent)";
}

Test(verify, the_reference_passes_against_itself_on_every_golden)
{
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        char *ref = capture(goldens[i], goldens[i], NULL), *err = NULL;
        cJSON *r;
        int rc = verify_json(ref, ref, &r, &err);
        cr_assert_eq(rc, 0, "%s: exit %d: %s", goldens[i], rc, err);
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "pass")), "%s", goldens[i]);
        const cJSON *p = prompt0(r);
        cr_expect_str_eq(str_at(p, "token_gate", "verdict"), "OK");
        cr_expect_str_eq(str_at(p, "block_gate", "verdict"), "OK");
        const cJSON *lens = cJSON_GetObjectItem(p, "lens");
        cr_assert(cJSON_GetArraySize(lens) >= 3, "%s: every layer and the final norm", goldens[i]);
        const cJSON *l;
        cJSON_ArrayForEach(l, lens) cr_expect_eq(cJSON_GetObjectItem(l, "cos_min")->valuedouble, 1.0, "%s", goldens[i]);
        cJSON_Delete(r);
        free(err);
        free(ref);
    }
}

Test(verify, the_reference_computed_on_the_fly_needs_only_the_candidate)
{
    char *ref = capture("qwen3_tied", "ref", NULL), cmd[16384], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s/golden/qwen3_tied' '%s'", GM_PHASE0, GM_SHARED_DIR, ref);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_assert(strstr(out, "verify: PASS"), "%s", out);
    cr_expect(strstr(out, "the ops lens (36 of the reference's 36 op outputs)"), "the ops of the layers the candidate "
              "has, computed too:\n%s", out);
    free(out);
    free(err);
    free(ref);
}

Test(verify, the_tiny_full_vocabulary_model_with_its_canonical_prompts)
{
    char cmd[16384], *out = NULL, *err = NULL, ref[4400], html[4400];
    snprintf(ref, sizeof ref, "%s/tiny", work);
    snprintf(html, sizeof html, "%s/report.html", work);
    snprintf(cmd, sizeof cmd, "'%s' capture tiny_qwen --weights '%s' --prompts base --max-prompts 3 --out '%s'",
             GM_PHASE0_TINY, GM_TINY_DIR, ref);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --tokenizer '%s/tokenizer.json' --html '%s'", GM_PHASE0_TINY, ref,
             ref, GM_TINY_DIR, html);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_assert(strstr(out, "The capital of France is"), "the prompt's text is reported:\n%s", out);
    cr_assert(strstr(out, "verify: PASS"), "%s", out);
    char *page = tu_read(html, NULL);
    cr_assert_not_null(page);
    cr_expect(!strstr(page, "http://") && !strstr(page, "https://") && !strstr(page, "src="), "nothing fetched");
    cr_expect(strstr(page, "<p class=\"overall\"><span class=\"verdict ok\""), "the overall verdict");
    int sections = 0, plots = 0;
    for (const char *q = page; (q = strstr(q, "<section class=\"prompt\"")); q++)
        sections++;
    for (const char *q = page; (q = strstr(q, "<svg class=\"cosine-plot\"")); q++)
        plots++;
    cr_expect_eq(sections, 3, "one section a prompt");
    cr_expect_eq(plots, 3, "one cosine plot a prompt");
    cr_expect(strstr(page, "The capital of France is"), "the prompt's text");
    cr_expect(strstr(page, "<div class=\"run ref\">") && strstr(page, "<pre class=\"text\">"),
              "the generated texts side by side");
    cr_expect(strstr(out, "reference: ") && strstr(out, "candidate: "), "the texts on the terminal:\n%s", out);
    free(page);
    free(out);
    free(err);
}

Test(verify, on_the_fly_keeps_the_candidates_own_prompt_names)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none"), *cand = NULL, cmd[16384], *out = NULL, *err = NULL;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/named", work);
    snprintf(cmd, sizeof cmd, PY " make '%s' '%s' renamed", ref, dir);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    cand = dir;
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s/golden/qwen2_tied' '%s'", GM_PHASE0, GM_SHARED_DIR, cand);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_assert(strstr(out, "\nfirst (") && strstr(out, "verify: PASS"), "%s", out);
    free(out);
    free(err);
    /* and against a bundle: the candidate's manifest names its folder, prompt by prompt */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, cand);
    cr_expect_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "verify: PASS"), "%s", out);
    free(out), free(err);
    /* a candidate that lists fewer prompts than the reference: said so, with the option that judges the first ones */
    char two[4400];
    snprintf(two, sizeof two, "%s/two", work); /* the reference with its prompt twice, as p000 and p001 */
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && cp -r '%s/p000' '%s/p001' && /usr/bin/python3 -c \"import json,sys; "
             "f=sys.argv[1]+'/manifest.json'; m=json.load(open(f)); p=dict(m['prompts'][0]); p['name']='p001'; "
             "m['prompts'].append(p); json.dump(m, open(f, 'w'))\" '%s'", ref, two, two, two, two);
    cr_assert_eq(system(cmd), 0);
    const char *one = ref;
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, two, one);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "/ref/manifest.json: prompts: expected 2 (the reference's), found 1; give --max-prompts 1") &&
              tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --max-prompts 1", GM_PHASE0, two, one);
    cr_expect_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    free(out), free(err);
    free(ref);
}

Test(verify, a_candidate_of_no_steps_is_not_checked_rather_than_passed)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none"), cmd[16384], *out = NULL, *err = NULL, dir[4400];
    snprintf(dir, sizeof dir, "%s/empty", work);
    snprintf(cmd, sizeof cmd, PY " make '%s' '%s' ids-only && /usr/bin/python3 -c \"import numpy as np,sys; "
             "np.save(sys.argv[1] + '/p000/ids.npy', np.zeros(0, np.int32))\" '%s'", ref, dir, dir);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, dir);
    cr_assert_eq(tu_run(cmd, &out, &err), 1, "%s%s", out, err);
    cr_assert(strstr(out, "not checked: the candidate holds no steps"), "%s", out);
    /* no gate could judge anything: that is no pass */
    cr_assert(strstr(out, "verify: NOT CHECKED\n"), "%s", out);
    cr_assert(strstr(err, "no gate could be checked on any prompt") && tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    cJSON *j = NULL;
    cr_assert_eq(verify_json(ref, dir, &j, &err), 1, "%s", err);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "pass")), "the JSON report says pass");
    cJSON_Delete(j);
    free(err);
    free(ref);
}

Test(verify, our_f32_runner_as_a_candidate_passes_with_cosines_near_one)
{
    char *ref = capture("llama_untied", "ref", NULL), *cand = capture("llama_untied", "f32", "--f32"), *err = NULL;
    cJSON *r;
    int rc = verify_json(ref, cand, &r, &err);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(prompt0(r), "lens")) {
        const double c = cJSON_GetObjectItem(l, "cos_min")->valuedouble;
        cr_expect(c > 0.999 && c < 1.0, "%s: per-position minimum cosine %.8f", str_at(l, "name", NULL), c);
    }
    cJSON_Delete(r);
    free(err);
    free(ref);
    free(cand);
}

/* verify's JSON against the verdict and lens verify_cases.py computes on its own. */
static void assert_as_the_rules_say(const char *ref, const char *cand, const char *label)
{
    char cmd[16384], *want_text = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, PY " expect '%s' '%s'", ref, cand);
    cr_assert_eq(tu_run(cmd, &want_text, &err), 0, "%s: %s", label, err);
    free(err);
    cJSON *want = cJSON_Parse(want_text), *got;
    int rc = verify_json(ref, cand, &got, &err);
    const int pass = cJSON_IsTrue(cJSON_GetObjectItem(want, "pass"));
    cr_assert_eq(rc, pass ? 0 : 1, "%s: exit %d, the rules say %s: %s", label, rc, pass ? "pass" : "fail", err);
    const cJSON *wp = prompt0(want), *gp = prompt0(got);
    cr_expect_str_eq(str_at(gp, "token_gate", "verdict"), str_at(wp, "token_gate", NULL), "%s: token gate", label);
    const cJSON *wd = cJSON_GetObjectItem(wp, "diverge"), *gd = cJSON_GetObjectItem(cJSON_GetObjectItem(gp, "token_gate"), "diverge");
    cr_expect_eq(cJSON_IsNull(wd) ? -1 : wd->valueint, cJSON_IsNull(gd) ? -1 : gd->valueint, "%s: divergence", label);
    /* their record's ranks: each side's choice in the other's top-5, null when not in it */
    const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(got, "topk_checks"), 0);
    for (int k = 0; tc && k < 2; k++) {
        const char *key = k ? "ref_chosen_rank_in_test" : "test_chosen_rank_in_ref";
        const cJSON *w = cJSON_GetObjectItem(wp, key), *g = cJSON_GetObjectItem(tc, key);
        cr_expect_eq(cJSON_IsNull(w) ? 0 : w->valueint, cJSON_IsNull(g) ? 0 : g->valueint, "%s: %s", label, key);
    }
    const cJSON *wl = cJSON_GetObjectItem(wp, "lens"), *gl = cJSON_GetObjectItem(gp, "lens");
    if (wl) {
        cr_expect_str_eq(str_at(gp, "block_gate", "verdict"), str_at(wp, "block_gate", NULL), "%s: block gate", label);
        cr_assert_eq(cJSON_GetArraySize(gl), cJSON_GetArraySize(wl), "%s", label);
        for (int i = 0; i < cJSON_GetArraySize(wl); i++) {
            const char *keys[] = {"cos", "cos_min", "cos_p5", "cos_median", "cos_mean", "max_abs"};
            for (size_t k = 0; k < 6; k++) {
                const double a = cJSON_GetObjectItem(cJSON_GetArrayItem(gl, i), keys[k])->valuedouble,
                             b = cJSON_GetObjectItem(cJSON_GetArrayItem(wl, i), keys[k])->valuedouble;
                cr_expect(fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)), "%s: row %d %s: %.12g, numpy %.12g", label, i,
                          keys[k], a, b);
            }
        }
        const cJSON *wf = cJSON_GetObjectItem(wp, "first_below_threshold");
        const char *gf = str_at(gp, "first_below_threshold", NULL);
        if (cJSON_IsNull(wf))
            cr_expect_str_eq(gf, "(absent)", "%s: no row below the threshold", label);
        else
            cr_expect_str_eq(gf, str_at(cJSON_GetArrayItem(gl, wf->valueint), "name", NULL), "%s: first row below",
                             label);
    }
    cJSON_Delete(want);
    cJSON_Delete(got);
    free(want_text);
    free(err);
}

static char *perturbed(const char *ref, const char *name, const char *mode, const char *arg)
{
    char cmd[16384], *dir = malloc(4400), *err = NULL;
    snprintf(dir, 4400, "%s/%s", work, name);
    snprintf(cmd, sizeof cmd, PY " make '%s' '%s' %s %s", ref, dir, mode, arg ? arg : "");
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    return dir;
}

Test(verify, perturbed_candidates_get_the_verdict_the_rules_give)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none");
    static const struct { const char *name, *mode, *arg; int pass; } cases[] = {
        {"swap", "swap", "0,1", 0},          {"noise-small", "noise", "0.0001", 1}, {"noise-mid", "noise", "0.05", -1},
        {"noise-big", "noise", "0.5", 0},    {"inside", "inside", "3", 1},         {"outside", "outside", "3", 0},
        {"ids-only", "ids-only", NULL, 1},   {"topk-only", "topk-only", NULL, 1},  {"tie-in", "tie-in", "2", 1},
        {"tie-out", "tie-out", "2", 0},      {"topk-reversed", "topk-reversed", NULL, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *cand = perturbed(ref, cases[i].name, cases[i].mode, cases[i].arg);
        assert_as_the_rules_say(ref, cand, cases[i].name);
        if (cases[i].pass >= 0) { /* and the verdict a person expects of it */
            char cmd[16384], *out = NULL;
            snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, cand);
            cr_expect_eq(tu_run(cmd, &out, NULL), cases[i].pass ? 0 : 1, "%s:\n%s", cases[i].name, out);
            free(out);
        }
        free(cand);
    }
    free(ref);
}

Test(verify, a_wrong_rope_theta_fails_at_layer_0)
{
    char *ref = capture("qwen3_tied", "ref", NULL), *cand = capture("qwen3_tied", "rope", "--rope-theta 10"), *err = NULL;
    assert_as_the_rules_say(ref, cand, "rope_theta 10");
    cJSON *r;
    cr_assert_eq(verify_json(ref, cand, &r, &err), 1, "%s", err);
    cr_expect_str_eq(str_at(prompt0(r), "block_gate", "verdict"), "FAIL");
    cr_expect_str_eq(str_at(prompt0(r), "first_below_threshold", NULL), "layer 0");
    cr_expect_null(cJSON_GetObjectItem(r, "reference_not_bf16_reference"), "the reference is one");
    cJSON_Delete(r);
    free(err);
    /* the wrong one taken as REF by mistake: judged, and said to be no reference */
    cr_assert_eq(verify_json(cand, cand, &r, &err), 0, "%s", err);
    cr_expect_str_eq(str_at(r, "reference_not_bf16_reference", NULL),
                     "it was captured with rope_theta 10 (--rope-theta), not qwen3_tied's 1000000");
    cr_expect(strstr(err, "warning: ") && strstr(err, "/rope is no bf16 reference of qwen3_tied") &&
              strstr(err, "capture it without that option"), "%s", err);
    cJSON_Delete(r);
    free(err);
    free(ref);
    free(cand);
}

Test(verify, a_partial_candidate_says_what_was_not_checked)
{
    char *ref = capture("llama3_tied", "ref", "--ops none"), *cand = perturbed(ref, "ids", "ids-only", NULL);
    char cmd[16384];
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0, "%s", out);
    cr_assert(strstr(out, "not checked: the lens (no layers.npy); the Phase 2 block gate (no layers.npy, no "
                          "ops/0/output.npy)"), "%s", out);
    cr_assert(strstr(out, "checked: the token gate (ids only)"), "%s", out);
    free(out);
    /* without tokens.npy the prompt's identity is taken on trust: said so */
    snprintf(cmd, sizeof cmd, "rm '%s/p000/tokens.npy' && '%s' verify '%s' '%s'", cand, GM_PHASE0, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0, "%s", out);
    cr_assert(strstr(out, "the prompt's tokens (no tokens.npy: the reference's are taken)"), "%s", out);
    free(out);
    /* --model is a gate file's: for a bundle that names another model, one line */
    char *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s/golden/llama3_tied' '%s' --model qwen2_tied", GM_PHASE0,
             GM_SHARED_DIR, ref);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "--model qwen2_tied: the candidate's manifest names llama3_tied") && tu_lines(err) == 1,
              "%s", err);
    free(out);
    free(err);
    free(ref);
    free(cand);
}

/* Bad input: one line naming the file and the field, exit 2. */
Test(verify, bad_candidates_are_one_line_naming_the_file_and_field)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none"), *other = capture("qwen3_tied", "other", "--ops none");
    struct { const char *edit, *want; } cases[] = {
        {"python3 -c \"import numpy as np,sys; d=sys.argv[1]+'/p000/'; x=np.load(d+'layers.npy'); "
         "np.save(d+'layers.npy', x[:, :-1])\" \"$1\"", "p000/layers.npy: shape: expected"},
        {"python3 -c \"import numpy as np,sys; d=sys.argv[1]+'/p000/'; x=np.load(d+'ids.npy'); "
         "np.save(d+'ids.npy', x.astype(np.float32))\" \"$1\"", "p000/ids.npy: dtype: expected <i4, found <f4"},
        {"sed -i 's/\"tokenizer\":[[:space:]]*\"[^\"]*\"/\"tokenizer\": \"fnv1a64:0000000000000000\"/' \"$1/manifest.json\"",
         "manifest.json: tokenizer: expected"},
        /* not a bundle: bad input, not a file system error */
        {"rm \"$1/manifest.json\"", "manifest.json: missing: a bundle is a folder with manifest.json"},
        /* a field of the wrong type says what it found */
        {"python3 -c \"import json,sys; f=sys.argv[1]+'/manifest.json'; m=json.load(open(f)); m['vocab_size']=5.5; "
         "json.dump(m,open(f,'w'))\" \"$1\"", "manifest.json: vocab_size: expected a non-negative integer, found 5.5"},
        {"python3 -c \"import json,sys; f=sys.argv[1]+'/manifest.json'; m=json.load(open(f)); m['precision']=7; "
         "json.dump(m,open(f,'w'))\" \"$1\"", "manifest.json: precision: expected a short one-line string, found 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32], cmd[16384], *err = NULL, *cand;
        snprintf(name, sizeof name, "bad%zu", i);
        cand = perturbed(ref, name, "noise", "0");
        /* each edit is a small script, given the candidate's folder as $1 */
        char script[4500];
        snprintf(script, sizeof script, "%s/edit.sh", work);
        tu_write(script, cases[i].edit, strlen(cases[i].edit));
        snprintf(cmd, sizeof cmd, "PATH=/usr/bin:$PATH sh '%s' '%s'", script, cand);
        cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
        free(err);
        cJSON *r;
        cr_expect_eq(verify_json(ref, cand, &r, &err), 2, "case %zu", i);
        cr_expect(strstr(err, cases[i].want) && tu_lines(err) == 1, "case %zu: %s", i, err);
        cJSON_Delete(r);
        free(err);
        free(cand);
    }
    /* a candidate of another model */
    cJSON *r;
    char *err = NULL;
    cr_expect_eq(verify_json(ref, other, &r, &err), 2);
    cr_expect(strstr(err, "manifest.json: model: expected \"qwen2_tied\""), "%s", err);
    cJSON_Delete(r);
    free(err);
    free(ref);
    free(other);
}

/* ---------------------------------------------------------------------- */
/* prompts files */

/*
** A prompts file as their verify_runner.py reads it, CRLF ends: blank lines, a
** line of spaces, comments indented by spaces and tabs, prompts with spaces
** around them (Unicode's too: U+00A0, U+3000, \x1f), and the other line ends
** Python's splitlines() knows (a lone \r, \v, \f, \x1c, U+0085, U+2028).
*/
static const char crlf_prompts[] =
    "# Prompts, CRLF\r\n"
    "\r\n"
    "The capital of France is  \r\n"
    "   \r\n"
    "  # an indented comment\r\n"
    "\t# a tabbed comment\r\n"
    "\xc2\xa0 GPU stands for\xe3\x80\x80\x1f\r\n"
    "one\rtwo\x0bthree\x0c four \x1c"
    "five\xc2\x85six\xe2\x80\xa8seven\r\n"
    "a # inside is kept\r\n"
    "\r\n";

/* What Python makes of `text`, read as their verify reads a prompts file: the list as JSON (malloc'd). */
static char *python_prompts(const char *text, size_t len)
{
    char path[4400], cmd[9000], *out = NULL, *err = NULL;
    snprintf(path, sizeof path, "%s/prompts.txt", work);
    tu_write(path, text, len);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import json, pathlib, sys; print(json.dumps([l.strip() for l in "
             "pathlib.Path(sys.argv[1]).read_text(encoding='utf-8').splitlines() if l.strip() and not "
             "l.strip().startswith('#')]))\" '%s'", path);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    free(err);
    return out;
}

Test(verify, a_prompts_file_is_read_as_their_verify_reads_it)
{
    p0_prompts ps;
    gm_status st = {0};
    cr_assert_eq(p0_prompts_read("crlf.txt", crlf_prompts, sizeof crlf_prompts - 1, 0, &ps, &st), 0, "%s", st.msg);
    char *want_text = python_prompts(crlf_prompts, sizeof crlf_prompts - 1);
    cJSON *want = cJSON_Parse(want_text);
    cr_assert_eq(ps.n, cJSON_GetArraySize(want), "%d prompts, Python reads %d: %s", ps.n, cJSON_GetArraySize(want),
                 want_text);
    for (int i = 0; i < ps.n; i++)
        cr_expect_str_eq(ps.p[i].text, cJSON_GetArrayItem(want, i)->valuestring, "prompt %d", i);
    cr_expect_str_eq(ps.p[0].text, "The capital of France is");
    cr_expect_eq(ps.p[0].line, 3, "line numbers count as splitlines() counts");
    /* the file with LF ends gives the same prompts; at most max of them */
    char lf[sizeof crlf_prompts];
    size_t n = 0;
    for (size_t i = 0; i + 1 < sizeof crlf_prompts; i++)
        if (!(crlf_prompts[i] == '\r' && crlf_prompts[i + 1] == '\n'))
            lf[n++] = crlf_prompts[i];
    p0_prompts lps;
    cr_assert_eq(p0_prompts_read("lf.txt", lf, n, 2, &lps, &st), 0, "%s", st.msg);
    cr_assert_eq(lps.n, 2);
    for (int i = 0; i < lps.n; i++)
        cr_expect_str_eq(lps.p[i].text, ps.p[i].text);
    p0_prompts_free(&lps);
    p0_prompts_free(&ps);
    cJSON_Delete(want);
    free(want_text);
    /* not UTF-8: one line naming the file and the line */
    cr_expect_neq(p0_prompts_read("bad.txt", "ok\r\nbad \xff\r\n", 10, 0, &ps, &st), 0);
    cr_expect_str_eq(st.msg, "bad.txt: line 2: expected UTF-8 text, found the byte 0xff");
}

Test(verify, capture_runs_a_crlf_prompts_file_as_their_verify_would)
{
    char path[4400], ref[4400], cmd[16384], *out = NULL, *err = NULL;
    snprintf(path, sizeof path, "%s/crlf.txt", work);
    snprintf(ref, sizeof ref, "%s/ref", work);
    char *want_text = python_prompts(crlf_prompts, sizeof crlf_prompts - 1);
    tu_write(path, crlf_prompts, sizeof crlf_prompts - 1);
    /* --max-prompts 0: all of them */
    snprintf(cmd, sizeof cmd, "'%s' capture tiny_qwen --weights '%s' --prompts-file '%s' --max-prompts 0 --steps 1 "
             "--ops none --out '%s'", GM_PHASE0_TINY, GM_TINY_DIR, path, ref);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    snprintf(path, sizeof path, "%s/manifest.json", ref);
    char *text = tu_read(path, NULL);
    cJSON *m = cJSON_Parse(text), *want = cJSON_Parse(want_text);
    const cJSON *ps = cJSON_GetObjectItem(m, "prompts");
    cr_assert_eq(cJSON_GetArraySize(ps), cJSON_GetArraySize(want), "%s", want_text);
    for (int i = 0; i < cJSON_GetArraySize(ps); i++)
        cr_expect_str_eq(str_at(cJSON_GetArrayItem(ps, i), "text", NULL), cJSON_GetArrayItem(want, i)->valuestring);
    cJSON_Delete(m);
    cJSON_Delete(want);
    free(text);
    free(want_text);
    free(out);
    free(err);
}

/* ---------------------------------------------------------------------- */
/* the options mlir-air's verify_runner.py has, with its meaning */

/* The manifest of bundle dir, parsed. */
static cJSON *manifest_of(const char *dir)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    char *text = tu_read(path, NULL);
    cr_assert_not_null(text, "%s", path);
    cJSON *m = cJSON_Parse(text);
    free(text);
    return m;
}

/* phase0_tiny capture with `opts` into work/<name>; the exit status, stderr in *err. */
static int capture_tiny(const char *name, const char *opts, char **err)
{
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' capture tiny_qwen --weights '%s' %s --out '%s/%s'", GM_PHASE0_TINY, GM_TINY_DIR,
             opts, work, name);
    int rc = tu_run(cmd, &out, err);
    free(out);
    return rc;
}

/* Prompt i's text in bundle work/<name>. */
static char *prompt_text(const char *name, int i, int *n)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", work, name);
    cJSON *m = manifest_of(dir);
    const cJSON *ps = cJSON_GetObjectItem(m, "prompts");
    *n = cJSON_GetArraySize(ps);
    char *t = strdup(str_at(cJSON_GetArrayItem(ps, i), "text", NULL));
    cJSON_Delete(m);
    return t;
}

Test(verify, prompt_style_and_prompt_choose_the_prompts_as_theirs_do_at_capture_and_on_the_fly)
{
    char *err = NULL, *t;
    int n;
    char cmd[16384], *out = NULL;
    /* --prompt-style instruct --max-prompts 2: the first two instruct prompts */
    cr_assert_eq(capture_tiny("instruct", "--prompt-style instruct --max-prompts 2 --steps 1 --ops none", &err), 0,
                 "%s", err);
    free(err);
    t = prompt_text("instruct", 1, &n);
    cr_expect_eq(n, 2);
    cr_expect(strncmp(t, "Briefly describe the major milestones", 37) == 0, "%s", t);
    free(t);
    /* with --weights the options choose the prompts the reference is computed for */
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s' --prompt-style instruct --max-prompts 2 '%s/instruct'",
             GM_PHASE0_TINY, GM_TINY_DIR, work);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "p001 (") && strstr(out, "Briefly describe") && strstr(out, "verify: PASS"), "%s", out);
    free(out);
    free(err);
    /* without --weights REF has its own prompts */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s/instruct' '%s/instruct' --prompt-style base", GM_PHASE0_TINY, work,
             work);
    cr_assert_eq(tu_run(cmd, &out, &err), 2);
    cr_expect(strstr(err, "they need --weights DIR") && tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);
    /* verify takes --threads as phase0 and capture do */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s/instruct' '%s/instruct' --threads 2x", GM_PHASE0_TINY, work, work);
    cr_assert_eq(tu_run(cmd, &out, &err), 2);
    cr_expect(strstr(err, "phase0 verify: --threads: expected a whole number in [1, 512], found '2x'") &&
              tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s/instruct' '%s/instruct' --threads 1", GM_PHASE0_TINY, work, work);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    free(out);
    free(err);
    /* --prompt: one prompt, as given (theirs tokenizes --prompt as it is: not stripped, no comment) */
    cr_assert_eq(capture_tiny("one", "--prompt '  # one prompt ' --steps 1 --ops none --threads 1", &err), 0, "%s",
                 err);
    free(err);
    t = prompt_text("one", 0, &n);
    cr_expect_eq(n, 1);
    cr_expect_str_eq(t, "  # one prompt ");
    free(t);
    /* bad values and clashes: one line, exit 2 */
    static const char *const bad[][2] = {
        {"--prompt-style chat", "--prompt-style: expected base or instruct, found 'chat'"},
        {"--max-prompts -1", "--max-prompts: expected a whole number in [0, 256], found '-1'"},
        {"--max-prompts 257", "--max-prompts: expected a whole number in [0, 256], found '257'"},
        {"--steps 2x", "--steps: expected a whole number in [1, 4096], found '2x'"},
        {"--threads 0", "--threads: expected a whole number in [1, 512], found '0'"},
        {"--prompt a --prompts-file b", "--prompt, --prompts-file and --tokens each choose the prompts: give one"},
        {"--prompts-file /nonexistent/p.txt", "/nonexistent/p.txt"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(capture_tiny("bad", bad[i][0], &err), 2, "%s", bad[i][0]);
        cr_expect(strstr(err, bad[i][1]) && tu_lines(err) == 1, "%s: %s", bad[i][0], err);
        free(err);
    }
}

Test(verify, a_prompt_runs_at_most_its_first_2048_tokens)
{
    char cmd[80000], *out = NULL, *err = NULL, ref[4400];
    snprintf(ref, sizeof ref, "%s/long", work);
    /* the smallest golden, one step, no ops: the prefill of 2048 tokens is the test's whole cost */
    int k = snprintf(cmd, sizeof cmd, "'%s' capture llama_f32_checkpoint --weights '%s/golden/llama_f32_checkpoint' "
                     "--steps 1 --ops none --out '%s' --tokens ", GM_PHASE0, GM_SHARED_DIR, ref);
    for (int i = 0; i < 2100; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, "%s%d", i ? "," : "", 3 + i % 300); /* vocab 320 */
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(err, "prompt 0 has 2100 tokens; its first 2048 run"), "%s", err);
    cJSON *m = manifest_of(ref);
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "prompts"), 0), "n_tokens")->valueint,
                 2048);
    cJSON_Delete(m);
    free(out);
    free(err);
}

/* Whether s holds every one of the NULL-terminated needles; the first it lacks in *missing. */
static int holds_all(const char *s, const char *const *needles, const char **missing)
{
    for (; *needles; needles++)
        if (!strstr(s, *needles)) {
            *missing = *needles;
            return 0;
        }
    return 1;
}

Test(verify, the_report_fields_theirs_has_no_strict_and_max_prompts)
{
    char *err = NULL, cmd[16384], *out = NULL, ref[4400], cand[4400], md[4400];
    /* the default style for a base repo is base (theirs is instruct): base.txt's first prompts */
    cr_assert_eq(capture_tiny("ref", "--max-prompts 3 --steps 3 --ops none", &err), 0, "%s", err);
    free(err);
    int n;
    char *t = prompt_text("ref", 1, &n);
    cr_expect_eq(n, 3);
    cr_expect_str_eq(t, "The capital of France is");
    free(t);
    snprintf(ref, sizeof ref, "%s/ref", work);
    snprintf(cand, sizeof cand, "%s/out", work);
    snprintf(md, sizeof md, "%s/report.md", work);
    /* at step 1 each side's choice is outside the other's top-5 */
    snprintf(cmd, sizeof cmd, PY " make '%s' '%s' outside 1", ref, cand);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0_TINY, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, NULL), 1, "%s", out);
    free(out);
    /* --no-strict: the FAIL reported, exit 0 */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --no-strict", GM_PHASE0_TINY, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", out);
    cr_expect(strstr(out, "\nverify: FAIL\n"), "the report still says FAIL:\n%s", out);
    cr_expect(strstr(out, "token gate (top-5, 32 steps): 0 OK, 3 FAIL, 0 not checked (of 3 prompts)"), "%s", out);
    free(out);
    free(err);
    /* the JSON's topk_checks and summary, and the Markdown report, as theirs */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --json --md '%s' --tokenizer '%s/tokenizer.json'", GM_PHASE0_TINY,
             ref, cand, md, GM_TINY_DIR);
    cr_assert_eq(tu_run(cmd, &out, &err), 1, "%s", err);
    cJSON *r = cJSON_Parse(out);
    free(out);
    free(err);
    const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "topk_checks"), 0);
    cr_assert_not_null(tc);
    cr_expect_str_eq(str_at(tc, "pair", NULL), "npu_vs_hf");
    cr_expect_str_eq(str_at(tc, "status", NULL), "FAIL");
    cr_expect_str_eq(str_at(tc, "prompt_text", NULL), "GPU stands for");
    cr_expect_eq(cJSON_GetObjectItem(tc, "divergence_step")->valueint, 1);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(tc, "test_chosen_rank_in_ref")) &&
              cJSON_IsNull(cJSON_GetObjectItem(tc, "ref_chosen_rank_in_test")),
              "neither choice is in the other's top-5");
    const char *reason = str_at(tc, "fail_reason", NULL);
    cr_expect(strstr(reason, "the candidate chose") && strstr(reason, "; the reference chose"), "both directions: %s",
              reason);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(tc, "ref_topk_at_div")), 5);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(tc, "test_topk_text_at_div")), 5, "both top-5 lists decoded");
    const char *chosen = str_at(tc, "test_chosen_text_at_div", NULL), *prefix = str_at(tc, "agreed_prefix_text", NULL);
    cr_expect(chosen[0] == '"' && chosen[strlen(chosen) - 1] == '"', "quoted as theirs: %s", chosen);
    cr_expect(prefix[0] == '"' && strlen(prefix) > 2, "the agreed step decoded, quoted: %s", prefix);
    const cJSON *sum = cJSON_GetObjectItem(r, "summary");
    cr_expect_eq(cJSON_GetObjectItem(sum, "topk_passed")->valueint, 0);
    cr_expect_eq(cJSON_GetObjectItem(sum, "topk_failed")->valueint, 3);
    char *page = tu_read(md, NULL), row[600];
    cr_assert_not_null(page);
    snprintf(row, sizeof row, "| 0 | GPU stands for | 3 | 1 | %s", chosen);
    cJSON_Delete(r);
    const char *want[] = {"# Verify report", "Result: **FAIL**",
                          "Top-k token gate: 0 PASS / 3 FAIL (across 3 prompt-pair checks)", "| 0 | GPU stands for |",
                          row, "*Prompt 0 agreed prefix (steps 0-0):* ", "*Prompt 0 FAIL:* step 1: the candidate chose",
                          "*Prompt 0 reference top-5 at step 1:*", "*Prompt 0 candidate top-5 at step 1:*",
                          "_3/3 prompts failed top-5 inclusion at first divergence._",
                          "| Layer | cos_p5 | cos_min | cos_median | max_abs |", NULL};
    const char *missing = NULL;
    cr_expect(holds_all(page, want, &missing), "the Markdown lacks \"%s\":\n%s", missing, page);
    free(page);
    /* --max-prompts 1: the first prompt only */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --json --max-prompts 1", GM_PHASE0_TINY, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, NULL), 1);
    r = cJSON_Parse(out);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "prompts")), 1, "the first prompt only");
    cJSON_Delete(r);
    free(out);
    /* a chosen id that is not the first of its own top-k row: a warning, as their runner gives */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && " PY " make '%s' '%s' not-first 2", cand, ref, cand);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --json", GM_PHASE0_TINY, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    cr_expect(strstr(err, "warning: p000 step 2: the candidate chose") &&
              strstr(err, "not the first id of its own top-5"), "%s", err);
    r = cJSON_Parse(out);
    cr_expect_eq(cJSON_GetObjectItem(prompt0(r), "warnings")->valueint, 1);
    cJSON_Delete(r);
    free(out);
    free(err);
}

/* ---------------------------------------------------------------------- */
/* mlir-air's NPU capture (--gate-phase capture-npu --gate-file F) as the candidate */

/* verify_cases.py gate: ref's choices as their gate file work/<name>, changed by mode */
static char *gate_file(const char *ref, const char *name, const char *mode)
{
    char cmd[16384], *path = malloc(4400), *err = NULL;
    snprintf(path, 4400, "%s/%s", work, name);
    snprintf(cmd, sizeof cmd, PY " gate '%s' '%s' %s", ref, path, mode);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    return path;
}

Test(verify, their_gate_file_gets_the_verdict_the_rules_give)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none");
    static const struct { const char *name, *mode; int pass; } cases[] = {
        {"same.json", "same", 1}, {"inside.json", "inside 3", 1}, {"outside.json", "outside 3", 0},
        {"inside-fail.json", "inside-fail 3", 0}}; /* its choice in the reference's top-5, not the reverse */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *cand = gate_file(ref, cases[i].name, cases[i].mode), *err = NULL;
        assert_as_the_rules_say(ref, cand, cases[i].name);
        cJSON *r;
        cr_expect_eq(verify_json(ref, cand, &r, &err), cases[i].pass ? 0 : 1, "%s: %s", cases[i].name, err);
        const char *unchecked = str_at(prompt0(r), "not_checked", NULL);
        cr_expect(strstr(unchecked, "a gate file holds none") && strstr(unchecked, "a gate file holds no layers"),
                  "%s: %s", cases[i].name, unchecked);
        cJSON_Delete(r);
        free(err);
        free(cand);
    }
    free(ref);
}

Test(verify, a_gate_file_that_does_not_match_the_reference_is_one_line)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none");
    static const struct { const char *name, *mode, *want; } cases[] = {
        {"drop.json", "drop-prompt", "drop.json: prompts: expected 1 (the reference's), found 0"},
        {"short.json", "short", "short.json: \"0\".chosen: expected 32 steps (the reference's, at most the gate's 32), "
                                "found 31"},
        {"narrow.json", "narrow", "narrow.json: \"0\".topk[0]: expected a row of at least 5 ids (their k), found 4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *cand = gate_file(ref, cases[i].name, cases[i].mode), *err = NULL;
        cJSON *r;
        cr_expect_eq(verify_json(ref, cand, &r, &err), 2, "%s", cases[i].name);
        cr_expect(strstr(err, cases[i].want) && tu_lines(err) == 1, "%s: %s", cases[i].name, err);
        cJSON_Delete(r);
        free(err);
        free(cand);
    }
    /* not their format at all, and an id outside the vocabulary */
    static const struct { const char *text, *want; } bad[] = {
        {"[1, 2]", "expected a JSON object of prompts \"0\", \"1\", ..."},
        {"{\"0\": {\"chosen\": [1], \"topk\": [[1, 2, 3, 4, 384]]}}", "\"0\".topk[0][4]: expected a token id in [0, 384)"},
        {"{\"1\": {\"chosen\": [], \"topk\": []}}", "\"0\": missing (the reference's prompt 0 of 1"},
        {"{\"0\": {\"chosen\": [1.5], \"topk\": [[1, 2, 3, 4, 5]]}}",
         "\"0\".chosen[0]: expected a token id in [0, 384), found a number that is not a whole one"},
        {"{\"0\": {\"chosen\": [7], \"topk\": [[7, 7, 7, 7, 7]]}}", "\"0\".topk[0]: expected 5 different ids, found 7 twice"},
        {"{\"0\": {\"chosen\": [1], \"topk\": [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]}}",
         "\"0\": expected a top-k row for each chosen id, found 1 chosen ids and 2 topk rows"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[4400], *err = NULL;
        snprintf(path, sizeof path, "%s/bad%zu.json", work, i);
        tu_write(path, bad[i].text, strlen(bad[i].text));
        cJSON *r;
        cr_expect_eq(verify_json(ref, path, &r, &err), 2, "%s", bad[i].text);
        cr_expect(strstr(err, bad[i].want) && tu_lines(err) == 1, "%s: %s", bad[i].text, err);
        cJSON_Delete(r);
        free(err);
    }
    free(ref);
}

Test(verify, a_gate_file_with_the_reference_computed_on_the_fly)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none"), *cand = gate_file(ref, "same.json", "same");
    char *toks = tg_tokens_arg("qwen2_tied"), cmd[16384], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s/golden/qwen2_tied' --model qwen2_tied %s '%s'", GM_PHASE0,
             GM_SHARED_DIR, toks, cand);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "verify: PASS") && strstr(out, "computed now from"), "%s", out);
    free(out);
    free(err);
    /* a gate file names no model: with seven built in, --model says which */
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s/golden/qwen2_tied' %s '%s'", GM_PHASE0, GM_SHARED_DIR, toks,
             cand);
    cr_assert_eq(tu_run(cmd, &out, &err), 2);
    cr_expect(strstr(err, "a gate file names no model: give --model ID") && tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);
    free(toks);
    free(cand);
    free(ref);
}

/* ---------------------------------------------------------------------- */
/* the ops inside the blocks (capture --ops) */

Test(verify, the_ops_capture_of_every_golden_family_against_a_float64_numpy_forward)
{
    /* every golden family (Llama, with Llama 3's RoPE scaling, an F32 checkpoint; Mistral's MQA; Qwen2's bias;
       Qwen3's q/k norm), every op of every layer, in bf16 and in f32 */
    char cmd[32768], *out = NULL, *err = NULL;
    int k = snprintf(cmd, sizeof cmd, "/usr/bin/python3 " GM_SOURCE_DIR "/tests/ops_reference.py");
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        char name[64];
        if (strcmp(goldens[i], "llama_untied_sharded") == 0) /* llama_untied's weights in three files */
            continue;
        snprintf(name, sizeof name, "%s-bf16", goldens[i]);
        char *b = capture(goldens[i], name, "--ops all --steps 1");
        snprintf(name, sizeof name, "%s-f32", goldens[i]);
        char *f = capture(goldens[i], name, "--ops all --steps 1 --f32");
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " '%s/golden/%s' '%s' '%s/golden/%s' '%s'", GM_SHARED_DIR,
                      goldens[i], b, GM_SHARED_DIR, goldens[i], f);
        /* the manifest names each op with its shape and dtype; Qwen3's norms only where the family has them */
        cJSON *m = manifest_of(b);
        const cJSON *ops = cJSON_GetObjectItem(m, "ops"), *op;
        int q_norm = 0, n = 0;
        cJSON_ArrayForEach(op, cJSON_GetObjectItem(ops, "list")) {
            q_norm |= strcmp(str_at(op, "name", NULL), "q_norm") == 0;
            cr_expect_str_eq(str_at(op, "dtype", NULL), "<f4");
            cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(op, "shape")), 2);
            n++;
        }
        cr_expect_eq(q_norm, strcmp(goldens[i], "qwen3_tied") == 0, "%s: q_norm", goldens[i]);
        cr_expect_eq(n, q_norm ? 18 : 16, "%s: the block's ops", goldens[i]);
        cJSON_Delete(m);
        free(b);
        free(f);
    }
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    cJSON *r = cJSON_Parse(out);
    cr_assert_not_null(r, "%s", out);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "%s", out);
    cr_expect_geq(cJSON_GetObjectItem(r, "checked")->valueint, 6 * 2 * 2 * 15, "every op of every layer: %s", out);
    cJSON_Delete(r);
    free(out);
    free(err);
}

Test(verify, ops_chooses_the_layers_and_bad_layers_are_one_line)
{
    char *toks = tg_tokens_arg("llama_untied"), cmd[16384], *out = NULL, *err = NULL, path[4400];
    /* the default: the first and the last layer */
    char *ref = capture("llama_untied", "default", "--steps 1");
    snprintf(path, sizeof path, "%s/p000/ops/1", ref);
    cr_expect(!tu_exists(path), "layer 1 of 3 is neither first nor last");
    snprintf(path, sizeof path, "%s/p000/ops/2/attn.npy", ref);
    cr_expect(tu_exists(path), "the last layer's ops");
    free(ref);
    ref = capture("llama_untied", "one", "--steps 1 --ops 1");
    snprintf(path, sizeof path, "%s/p000/ops/0", ref);
    cr_expect(!tu_exists(path));
    snprintf(path, sizeof path, "%s/p000/ops/1/swiglu.npy", ref);
    cr_expect(tu_exists(path));
    free(ref);
    ref = capture("llama_untied", "none", "--steps 1 --ops none");
    snprintf(path, sizeof path, "%s/p000/ops", ref);
    cr_expect(!tu_exists(path));
    cJSON *m = manifest_of(ref);
    cr_expect_null(cJSON_GetObjectItem(m, "ops"));
    cJSON_Delete(m);
    free(ref);
    static const char *const bad[] = {"3", "first,x", "-1", "1,", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' capture llama_untied --weights '%s/golden/llama_untied' %s --ops '%s' --out "
                 "'%s/bad'", GM_PHASE0, GM_SHARED_DIR, toks, bad[i], work);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "--ops '%s'", bad[i]);
        cr_expect(strstr(err, "--ops: expected layers in [0, 2]") && tu_lines(err) == 1, "%s", err);
        free(out);
        free(err);
    }
    free(toks);
}

Test(verify, a_perturbed_op_is_named_first_in_every_report)
{
    char *ref = capture("qwen2_tied", "ref", NULL), *cand = perturbed(ref, "cand", "op-noise", "0/swiglu/0.5");
    char cmd[16384], *out = NULL, *err = NULL, md[4400], html[4400];
    snprintf(md, sizeof md, "%s/r.md", work);
    snprintf(html, sizeof html, "%s/r.html", work);
    /* the ops lens is a diagnosis: the block's output is the reference's, every gate holds */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --md '%s' --html '%s'", GM_PHASE0, ref, cand, md, html);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "first op whose per-position cosine falls below 0.99: layer 0 swiglu"), "%s", out);
    cr_expect(strstr(out, "layer 0 down") && strstr(out, "layer 1 output"), "every op of layers 0 and 1:\n%s", out);
    free(out);
    free(err);
    cJSON *r;
    cr_assert_eq(verify_json(ref, cand, &r, &err), 0, "%s", err);
    cr_expect_str_eq(str_at(prompt0(r), "first_op_below_threshold", NULL), "layer 0 swiglu");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(prompt0(r), "ops")), 2 * 16);
    cJSON_Delete(r);
    free(err);
    char *page = tu_read(md, NULL);
    cr_expect(page && strstr(page, "First op whose per-position cosine falls below 0.99: layer 0 swiglu"), "%s", page);
    cr_expect(page && strstr(page, "| layer 0 swiglu (first low) |"), "%s", page);
    free(page);
    page = tu_read(html, NULL);
    cr_assert_not_null(page);
    cr_expect(strstr(page, "is below the threshold: layer 0 swiglu</p>"), "the HTML names it");
    int plots = 0;
    for (const char *q = page; (q = strstr(q, "<svg class=\"ops-plot\"")); q++)
        plots++;
    cr_expect_eq(plots, 2, "one plot of the ops of each layer captured");
    free(page);
    free(cand);
    free(ref);
}

/* Phase 2's candidate is one block: its ops/0/output.npy, without layers.npy, is what the block gate judges */
Test(verify, a_block_only_candidate_is_judged_on_its_ops_0_output)
{
    char *ref = capture("qwen2_tied", "ref", "--ops 0"), cmd[16384], *out = NULL, *err = NULL, dir[4400];
    snprintf(dir, sizeof dir, "%s/block", work);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && rm '%s'/p*/layers.npy '%s'/p*/final_norm.npy", ref, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, dir);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "checked: the token gate") && strstr(out, "the Phase 2 block gate (on ops/0/output.npy)"),
              "%s", out);
    free(out), free(err);
    /* the block's output negated: the gate fails on it */
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import numpy as np,glob,sys\n"
             "for f in glob.glob(sys.argv[1] + '/p*/ops/0/output.npy'): np.save(f, -np.load(f))\" '%s'", dir);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, dir);
    cr_assert_eq(tu_run(cmd, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(out, "layer 0: whole-tensor cosine -1.000000 < 0.99") && strstr(out, "verify: FAIL"), "%s", out);
    free(out), free(err);
    free(ref);
}

/* A report that cannot be written, and options that name nothing there: one line, before any work where it can be */
Test(verify, unwritable_reports_and_options_naming_nothing_are_one_line)
{
    char *ref = capture("llama_untied", "ref", "--ops none --steps 2"), cmd[16384], *out = NULL, *err = NULL;
    /* standard output on a full disk: the report is not there, exit 4 */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --json > /dev/full", GM_PHASE0, ref, ref);
    cr_expect_eq(tu_run(cmd, &out, &err), 4, "%s%s", out, err);
    cr_expect(strstr(err, "the report could not be written to standard output: No space left on device") &&
              tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    char same[4400], both[9000], same_want[9000], weights[4400];
    snprintf(same, sizeof same, "%s/same.out", work);
    snprintf(both, sizeof both, "--html '%s' --md '%s'", same, same);
    snprintf(same_want, sizeof same_want, "the same file as --md %s; give the two reports two files", same);
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    const struct { const char *args, *want; } cases[] = {
        {"--html ''", "--html '': expected the path of a file"},
        {"--md '' ", "--md '': expected the path of a file"},
        {"--tokenizer /", "--tokenizer /: expected the model's tokenizer.json, found a folder"},
        {both, same_want},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *want = cases[i].want;
        snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' %s", GM_PHASE0, ref, ref, cases[i].args);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s: %s%s", cases[i].args, out, err);
        cr_expect(!*out && strstr(err, want) && tu_lines(err) == 1, "%s: %s\nwanted: %s", cases[i].args, err, want);
        free(out), free(err);
    }
    /* a weights folder that is not there is named as such, not as its missing tokenizer */
    snprintf(cmd, sizeof cmd, "'%s' capture llama_untied --weights /nonexistent --tokens 1,2 --out '%s/x'", GM_PHASE0,
             work);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "--weights /nonexistent: expected the model's folder") && strstr(err, "found nothing there") &&
              tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    /* mlir-air's `--prompts topk_token` is no prompts file here */
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s' '%s' --prompts topk_token", GM_PHASE0, weights, ref);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "--prompts topk_token: no such prompts file") && tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    /* a candidate whose prompt differs says where */
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/cand' && /usr/bin/python3 -c \"import numpy as np,sys\n"
             "f = sys.argv[1] + '/cand/p000/tokens.npy'; t = np.load(f); t[1] += 1; np.save(f, t)\" '%s' && '%s' verify "
             "'%s' '%s/cand'", ref, work, work, GM_PHASE0, ref, work);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "tokens.npy: the prompt's tokens differ from the reference's at position 1: ") &&
              tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    free(ref);
}

/* ---------------------------------------------------------------------- */
/* bad options and damaged files are refused at once, in one line */

Test(verify, capture_refuses_a_rope_theta_that_f32_frequencies_cannot_hold)
{
    char *toks = tg_tokens_arg("llama_untied"), cmd[16384], *out = NULL, *err = NULL, dir[4400];
    snprintf(dir, sizeof dir, "%s/bad", work);
    static const char *const bad[] = {"abc", "-5", "0", "nan", "1e400", "inf", "", " 5", "10x", "1e-300", "0.5", "1e39"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' capture llama_untied --weights '%s/golden/llama_untied' %s --rope-theta '%s' "
                 "--out '%s'", GM_PHASE0, GM_SHARED_DIR, toks, bad[i], dir);
        char want[256];
        snprintf(want, sizeof want, "--rope-theta: expected a number from 1 to 3.40282e+38 (models use 1e4 to 1e7), "
                 "found '%s'", bad[i]);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "--rope-theta '%s'", bad[i]);
        cr_expect(strstr(err, want) && tu_lines(err) == 1, "--rope-theta '%s': %s", bad[i], err);
        cr_expect(!tu_exists(dir), "--rope-theta '%s': no bundle written", bad[i]);
        tu_rm_rf(dir);
        free(out);
        free(err);
    }
    free(toks);
}

/* One damage of dir/p000/last_logits.npy, by name (a little numpy, given the bundle and the damage). */
static const char damage_py[] =
    "import os, sys, numpy as np\n"
    "f, mode = sys.argv[1] + '/p000/last_logits.npy', sys.argv[2]\n"
    "b = open(f, 'rb').read()\n"
    "if mode == 'truncated': b = b[:200]\n"
    "elif mode == 'header': b = b[:8] + (65000).to_bytes(2, 'little') + b[10:]\n"
    "elif mode == 'i4': b = b.replace(b\"'<f4'\", b\"'<i4'\", 1)\n"
    "elif mode == 'object': b = b.replace(b\"'<f4'\", b\"'|O'\", 1).replace(b'\\n', b' \\n', 1)\n"
    "elif mode == 'nan' or mode == 'inf' or mode == 'short' or mode == 'top':\n"
    "    x = np.load(f)\n"
    "    if mode == 'nan': x[7] = np.nan\n"
    "    if mode == 'inf': x[7] = -np.inf\n"
    "    if mode == 'short': x = x[:-1]\n"
    "    if mode == 'top': x[x.argmax()] = x.min() - 1  # its top-5 is no longer the last step's own\n"
    "    np.save(f, x)\n"
    "    b = open(f, 'rb').read()\n"
    "if mode == 'missing': os.remove(f)\n"
    "else: open(f, 'wb').write(b)\n";

/* A copy of ref as work/name with its last_logits.npy damaged by mode. */
static char *damaged(const char *ref, const char *name, const char *mode)
{
    char cmd[16384], script[4400], *dir = perturbed(ref, name, "noise", "0"), *err = NULL;
    snprintf(script, sizeof script, "%s/damage.py", work);
    tu_write(script, damage_py, strlen(damage_py));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' %s", script, dir, mode);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    return dir;
}

Test(verify, last_logits_is_read_checked_and_a_damaged_one_is_one_line_naming_it)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none"), cmd[16384], *out = NULL, *err = NULL;
    /* the reference against itself: the last step's logits checked, and said so */
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, ref);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "checked: ") && strstr(out, "the last step's logits (last_logits.npy"), "%s", out);
    free(out);
    free(err);
    /* a candidate without it: not checked, and said so */
    char *cand = perturbed(ref, "ids", "ids-only", NULL);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "not checked: ") && strstr(out, "the last step's logits (no last_logits.npy)"), "%s", out);
    free(out);
    free(err);
    free(cand);
    /* logits whose top-5 is not the last step's own top-k row: the pipeline's choice and its logits disagree */
    cand = damaged(ref, "top", "top");
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, cand);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "a warning, not a FAIL: %s%s", out, err);
    cr_expect(strstr(err, "warning: p000 step 31: the candidate's last_logits.npy ranks"), "%s", err);
    free(out);
    free(err);
    free(cand);
    /* damaged, on either side: one line naming the file, exit 2 */
    static const struct { const char *mode, *want; } cases[] = {
        {"truncated", "npy file is 200 bytes"},   {"header", "header length 65000"},
        {"i4", "dtype: expected <f4, found <i4"}, {"object", "npy descr is '|O'"},
        {"nan", "expected finite logits, found nan at [7]"}, {"inf", "expected finite logits, found -inf at [7]"},
        {"short", "shape: expected [384], found [383]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int side = 0; side < 2; side++) {
            char name[64], file[4500];
            snprintf(name, sizeof name, "%s-%s", cases[i].mode, side ? "ref" : "cand");
            char *bad = damaged(ref, name, cases[i].mode);
            snprintf(file, sizeof file, "%s/p000/last_logits.npy: ", bad);
            snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, side ? bad : ref, side ? ref : bad);
            cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s: %s%s", name, out, err);
            cr_expect(strstr(err, file) && strstr(err, cases[i].want) && tu_lines(err) == 1, "%s: %s", name, err);
            cr_expect_str_eq(out, "", "%s: no report", name);
            free(out);
            free(err);
            free(bad);
        }
    /* a NaN among the candidate's top-k logits: its run overflowed, and its rows have no order to judge */
    cand = perturbed(ref, "nan-logit", "nan-logit", NULL);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, ref, cand);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "/nan-logit/p000/topk_logits.npy: expected finite logits, found nan at step 0, column 1") &&
              tu_lines(err) == 1 && !*out, "%s%s", out, err);
    free(out), free(err), free(cand);
    /* the reference must hold it: capture always writes it */
    char *bad = damaged(ref, "missing", "missing");
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, bad, ref);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "p000/last_logits.npy: missing from the reference") && tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);
    free(bad);
    free(ref);
}

Test(verify, output_paths_are_checked_before_any_work)
{
    char *ref = capture("llama_untied", "ref", "--ops none --steps 2"), *toks = tg_tokens_arg("llama_untied");
    char cmd[16384], *out = NULL, *err = NULL, afile[4400], path[4500];
    snprintf(afile, sizeof afile, "%s/afile", work);
    tu_write(afile, "x", 1);
    static const struct { const char *opt, *dir, *found; } cases[] = {
        {"--html", "afile", "is not a folder"},
        {"--md", "no/such/dir", "does not exist"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[9000];
        snprintf(path, sizeof path, "%s/%s/r.out", work, cases[i].dir);
        snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' %s '%s'", GM_PHASE0, ref, ref, cases[i].opt, path);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s: %s%s", cases[i].opt, out, err);
        cr_expect_str_eq(out, "", "%s: no work done, no report printed", cases[i].opt);
        snprintf(want, sizeof want, "phase0 verify: %s %s: expected a file in a writable folder; %s/%s %s",
                 cases[i].opt, path, work, cases[i].dir, cases[i].found);
        cr_expect(strstr(err, want) && tu_lines(err) == 1, "%s:\n%s\nwanted: %s", cases[i].opt, err, want);
        free(out);
        free(err);
    }
    /* a report over one of the bundle's files, or both reports in one file: refused before any work */
    char inside[4500], both[4500];
    snprintf(inside, sizeof inside, "%s/p000/layers.npy", ref);
    snprintf(both, sizeof both, "%s/report", work);
    const char *const clobber[][2] = {{"--md", inside}, {"--html", inside}, {"--md", both}};
    for (size_t i = 0; i < sizeof clobber / sizeof clobber[0]; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' verify '%s' '%s' %s '%s'%s", work, GM_PHASE0, ref, ref,
                 clobber[i][0], clobber[i][1], i == 2 ? " --html ./report" : "");
        char *before = tu_read(inside, NULL);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s %s: %s%s", clobber[i][0], clobber[i][1], out, err);
        cr_expect(strstr(err, i == 2 ? "the same file as --md" : "inside the bundle") && tu_lines(err) == 1 && !*out,
                  "%s", err);
        char *after = tu_read(inside, NULL);
        cr_expect(before && after && strcmp(before, after) == 0, "%s was written over", inside);
        free(before), free(after), free(out), free(err);
    }
    /* the bundles' order swapped, or a file where the reference's folder belongs */
    snprintf(path, sizeof path, "%s/manifest.json", ref);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, path, ref);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "manifest.json: expected a capture folder") && strstr(err, "REF comes first") &&
              tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' /dev/null", GM_PHASE0, ref);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "CAND /dev/null: expected a capture folder or a gate file") && tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    /* capture's --out: the folder it goes in, at once, by the name the user gave */
    snprintf(path, sizeof path, "%s/afile/ref", work);
    snprintf(cmd, sizeof cmd, "'%s' capture llama_untied --weights '%s/golden/llama_untied' %s --out '%s'", GM_PHASE0,
             GM_SHARED_DIR, toks, path);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    char want[9000];
    snprintf(want, sizeof want, "phase0 capture: --out %s: expected a new folder in a writable folder; %s is not a "
             "folder", path, afile);
    cr_expect(strstr(err, want) && tu_lines(err) == 1 && !strstr(err, ".tmp-"), "%s\nwanted: %s", err, want);
    free(out);
    free(err);
    /* and one that is there already */
    snprintf(cmd, sizeof cmd, "'%s' capture llama_untied --weights '%s/golden/llama_untied' %s --out '%s'", GM_PHASE0,
             GM_SHARED_DIR, toks, ref);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "already exists") && tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);
    free(toks);
    free(ref);
}

/* Ctrl-C, a trailing slash, an empty --out, a NUL in a prompts file: what a shell user meets */
Test(verify, capture_stopped_by_ctrl_c_leaves_nothing_and_takes_its_paths_as_a_shell_gives_them)
{
    char cmd[16384], *out = NULL, *err = NULL, path[4400];
    /* SIGINT in the middle: the process ends by that signal, and no temporary folder stays */
    snprintf(cmd, sizeof cmd, "cd '%s' && (env --default-signal=INT '%s' capture tiny_qwen --weights '%s' --tokens "
             "1,2 --steps 3000 --ops all --out '%s/stopped' & p=$!; sleep 2; kill -INT $p; wait $p; "
             "echo \"status $?\")", work, GM_PHASE0_TINY, GM_TINY_DIR, work); /* (a shell's & ignores SIGINT) */
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "status 130") && strstr(err, "phase0 capture: interrupted at p") &&
              strstr(err, "no bundle written"), "%s%s", out, err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c stopped", work);
    cr_expect_eq(tu_run(cmd, &out, NULL), 1, "left behind: %s", out); /* grep -c finds none: status 1 */
    free(out);
    /* REF/ as shell completion writes it: the bundle REF, its temporary name beside it */
    cr_expect_eq(capture_tiny("slash/", "--tokens 1,2 --steps 2", &err), 0, "%s", err);
    free(err);
    snprintf(path, sizeof path, "%s/slash/manifest.json", work);
    cr_expect(tu_exists(path), "%s", path);
    snprintf(cmd, sizeof cmd, "'%s' capture tiny_qwen --weights '%s' --tokens 1,2 --out ''", GM_PHASE0_TINY,
             GM_TINY_DIR);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "--out '': expected the path of a new folder") && tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    /* a NUL inside a prompts file's line: refused, not the line cut at it */
    snprintf(path, sizeof path, "%s/nul.txt", work);
    tu_write(path, "x\0y\n", 4);
    snprintf(cmd, sizeof cmd, "--prompts-file '%s' --steps 2", path);
    cr_expect_eq(capture_tiny("nul", cmd, &err), 2, "%s", err);
    cr_expect(strstr(err, "nul.txt: line 1: expected text, found a NUL byte") && tu_lines(err) == 1, "%s", err);
    free(err);
}

/* A folder without tokenizer.json: capture says what to do (put it there, or give --tokens), exit 2 */
Test(verify, capture_without_a_tokenizer_says_what_to_do)
{
    char cmd[16384], *out = NULL, *err = NULL, want[4600];
    snprintf(cmd, sizeof cmd, "'%s' capture llama_untied --weights '%s/golden/llama_untied' --out '%s/ref'", GM_PHASE0,
             GM_SHARED_DIR, work);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    snprintf(want, sizeof want, "%s/golden/llama_untied/tokenizer.json: not there: the prompts need the model's "
             "tokenizer.json", GM_SHARED_DIR);
    cr_expect(strstr(err, want) && strstr(err, "or give --tokens IDS") && tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);
}

Test(verify, a_prompt_name_with_a_path_in_it_is_refused_for_that)
{
    char *ref = capture("llama_untied", "ref", "--ops none --steps 2"), cmd[16384], *out = NULL, *err = NULL;
    static const char *const names[] = {"../../x", "../../../../../../../../x", "a/b", ".."};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s/cand' && cp -r '%s' '%s/cand' && /usr/bin/python3 -c \"import json,sys; "
                 "f=sys.argv[1]+'/manifest.json'; m=json.load(open(f)); m['prompts'][0]['name']=sys.argv[2]; "
                 "json.dump(m, open(f, 'w'))\" '%s/cand' '%s' && '%s' verify '%s' '%s/cand'", work, ref, work, work,
                 names[i], GM_PHASE0, ref, work);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s: %s%s", names[i], out, err);
        cr_expect(strstr(err, "manifest.json: prompts[0].name: expected a folder name like p000, found a path "
                              "(a '/' or '..')") && tu_lines(err) == 1, "%s: %s", names[i], err);
        free(out);
        free(err);
    }
    free(ref);
}

/* The Markdown report of a prompt whose text, name and decoded tokens hold what Markdown would render. */
Test(verify_rules, the_markdown_report_escapes_what_the_bundle_gives_it)
{
    int32_t ref_ids[2] = {5, 6}, cand_ids[2] = {5, 9};
    char prefix[] = "<b>agreed</b>", chosen[] = "`x` & <i>";
    vf_prompt p = {.text = "a <script>x</script> | y `z` & w\nnext *em* [l](u)", .n_tokens = 3, .n_steps = 2,
                   .ref_ids = ref_ids, .cand_ids = cand_ids, .first_low = -1, .first_low_op = -1,
                   .prefix_text = prefix, .cand_chosen_text = chosen, .ref_chosen_text = chosen};
    snprintf(p.name, sizeof p.name, "p000");
    vf_walk_tokens(ref_ids, (const int32_t[]){5, 1, 2, 3, 4, 6, 9, 1, 2, 3}, cand_ids,
                   (const int32_t[]){5, 1, 2, 3, 4, 9, 6, 1, 2, 3}, 2, VF_GATE_K, &p.walk);
    vf_judge(&p);
    vf_report r = {.n_prompts = 1, .prompts = &p, .head_dim = 64};
    snprintf(r.model, sizeof r.model, "m<b>");
    snprintf(r.cand_label, sizeof r.cand_label, "cand|x");
    snprintf(r.ref_label, sizeof r.ref_label, "ref");
    snprintf(r.ref_kernels, sizeof r.ref_kernels, "<k>");
    vf_report_tally(&r);
    char *dir = tu_tmpdir(), path[4200];
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/r.md", dir);
    cr_assert_eq(vf_write_md(&r, path, &st), 0, "%s", st.msg);
    char *page = tu_read(path, NULL);
    cr_assert_not_null(page);
    cr_expect_null(strchr(page, '<'), "no raw HTML anywhere:\n%s", page);
    for (const char *q = page; (q = strchr(q, '`')); q++)
        cr_expect(q > page && q[-1] == '\\', "a backtick unescaped:\n%s", page);
    cr_expect(strstr(page, "| 0 | a &lt;script&gt;x&lt;/script&gt; \\| y \\`z\\` &amp; w next \\*em\\* \\[l\\](u) |\n"),
              "the prompt's text, escaped, on one row:\n%s", page);
    cr_expect(strstr(page, "model=m&lt;b&gt;, reference=ref (kernels &lt;k&gt;), candidate=cand\\|x"), "%s", page);
    cr_expect(strstr(page, "&lt;b&gt;agreed&lt;/b&gt;"), "the agreed prefix:\n%s", page);
    free(page);
    tu_rmtree(dir);
}

/*
** capture and verify --weights run gate 3 first: weights whose config.json is not the one the model was
** generated from (another revision's rope_theta, another architecture) are one line naming the file and the
** field, exit 2, and no reference is written.
*/
Test(verify, weights_of_another_config_are_refused_before_a_reference_is_made)
{
    static const struct { const char *edit, *field; } cases[] = {
        {"c['rope_theta'] = 500000.0", "rope_base (rope_theta) is 10000, config.json says 500000"},
        {"c['num_hidden_layers'] = 2", "num_hidden_layers"},
        {"c['architectures'] = ['Qwen2ForCausalLM']", "config.json says Qwen2ForCausalLM"},
    };
    char *ref = capture("llama_untied", "ref", "--ops none --steps 2"), *toks = tg_tokens_arg("llama_untied");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char w[4400], cmd[16384], want[4600], out_dir[4400], *out = NULL, *err = NULL;
        snprintf(w, sizeof w, "%s/w%zu", work, i);
        snprintf(cmd, sizeof cmd, "cp -r '%s/golden/llama_untied' '%s' && chmod -R u+w '%s' && python3 -c \"import json; "
                 "p='%s/config.json'; c=json.load(open(p)); %s; json.dump(c, open(p, 'w'))\"", GM_SHARED_DIR, w, w, w,
                 cases[i].edit);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        snprintf(want, sizeof want, "%s/config.json: not the model llama_untied was generated from (", w);
        snprintf(out_dir, sizeof out_dir, "%s/cap%zu", work, i);
        snprintf(cmd, sizeof cmd, "'%s' capture llama_untied --weights '%s' %s --out '%s'", GM_PHASE0, w, toks, out_dir);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "capture, %s: %s%s", cases[i].edit, out, err);
        cr_expect(strstr(err, want) && strstr(err, cases[i].field) && tu_lines(err) == 1, "capture, %s: %s",
                  cases[i].edit, err);
        cr_expect(!tu_exists(out_dir), "capture, %s: %s was written", cases[i].edit, out_dir);
        free(out), free(err), out = err = NULL;
        snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s' '%s'", GM_PHASE0, w, ref);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "verify, %s: %s%s", cases[i].edit, out, err);
        cr_expect(strstr(err, want) && strstr(err, cases[i].field) && tu_lines(err) == 1, "verify, %s: %s",
                  cases[i].edit, err);
        free(out), free(err);
    }
    free(toks);
    free(ref);
}

static const char ref_damage_py[] =
    "import os, sys, glob, numpy as np\n"
    "d, mode = sys.argv[1] + '/p000/', sys.argv[2]\n"
    "def edit(f, fn):\n"
    "    x = np.load(d + f); fn(x); np.save(d + f, x)\n"
    "if mode == 'nan-layers': edit('layers.npy', lambda x: x.__setitem__((0, 1, 2), np.nan))\n"
    "if mode == 'inf-norm': edit('final_norm.npy', lambda x: x.__setitem__((0, 3), np.inf))\n"
    "if mode == 'nan-op': edit(os.path.relpath(sorted(glob.glob(d + 'ops/0/*.npy'))[0], d), lambda x: x.__setitem__((0, 0), np.nan))\n"
    "if mode == 'nan-topk-logits': edit('topk_logits.npy', lambda x: x.__setitem__((2, 1), np.nan))\n"
    "if mode == 'vocab-ids': edit('ids.npy', lambda x: x.__setitem__(4, 999))\n"
    "if mode == 'vocab-tokens': edit('tokens.npy', lambda x: x.__setitem__(0, -1))\n"
    "if mode == 'repeat-topk': edit('topk_ids.npy', lambda x: x.__setitem__((3, 2), x[3, 0]))\n"
    "if mode == 'no-layers': os.remove(d + 'layers.npy')\n"
    "if mode == 'no-norm': os.remove(d + 'final_norm.npy')\n";

/*
** The reference is the ground truth: a NaN or an infinity in it, an id outside the vocabulary, a top-k row that
** repeats an id, or a file capture always writes gone is one line naming the file, exit 2, before any verdict; a
** perfect candidate is never failed for it. The candidate's ids are held to the vocabulary and its rows to
** different ids the same way (its NaNs are the lens's to count, and fail it).
*/
Test(verify, a_broken_reference_is_one_line_naming_the_file_not_a_verdict_on_the_candidate)
{
    char *ref = capture("llama_untied", "ref", NULL), cmd[16384], script[4400], *out = NULL, *err = NULL;
    snprintf(script, sizeof script, "%s/ref_damage.py", work);
    tu_write(script, ref_damage_py, strlen(ref_damage_py));
    static const struct { const char *mode, *file, *want; int cand_too; } cases[] = {
        {"nan-layers", "layers.npy", "expected finite values in the reference, found nan at element ", 0},
        {"inf-norm", "final_norm.npy", "expected finite values in the reference, found inf at element ", 0},
        {"nan-op", "ops/0/", "expected finite values in the reference, found nan at element 0", 0},
        {"nan-topk-logits", "topk_logits.npy", "expected finite values in the reference, found nan at element ", 0},
        {"vocab-ids", "ids.npy", "expected token ids in [0, 384) (vocab_size), found 999 at element 4", 1},
        {"vocab-tokens", "tokens.npy", "expected token ids in [0, 384) (vocab_size), found -1 at element 0", 0},
        {"repeat-topk", "topk_ids.npy", "row 3: expected 20 different ids, found ", 1},
        {"no-layers", "layers.npy", "missing from the reference (capture writes it)", 0},
        {"no-norm", "final_norm.npy", "missing from the reference (capture writes it)", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = perturbed(ref, cases[i].mode, "noise", "0"), file[4500];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' %s", script, bad, cases[i].mode);
        cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s: %s", cases[i].mode, err);
        free(err);
        snprintf(file, sizeof file, "%s/p000/%s", bad, cases[i].file);
        for (int side = 0; side < 1 + cases[i].cand_too; side++) {
            snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s'", GM_PHASE0, side ? ref : bad, side ? bad : ref);
            cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s (%s): %s%s", cases[i].mode, side ? "candidate" : "reference",
                         out, err);
            cr_expect(strstr(err, file) && strstr(err, cases[i].want) && tu_lines(err) == 1, "%s (%s): %s",
                      cases[i].mode, side ? "candidate" : "reference", err);
            cr_expect_str_eq(out, "", "%s: no report", cases[i].mode);
            free(out), free(err);
        }
        free(bad);
    }
    free(ref);
}

/* --tokenizer names a file that must be there, and be the reference's tokenizer (its manifest's hash). */
Test(verify, a_tokenizer_that_is_missing_or_another_models_is_one_line)
{
    char *ref = capture("qwen2_tied", "ref", "--ops none --steps 4"), cmd[16384], *out = NULL, *err = NULL;
    char other[4400];
    snprintf(other, sizeof other, "%s/tokenizers/qwen3/tokenizer.json", GM_SHARED_DIR);
    const struct { const char *file, *want; } cases[] = {
        {"/nonexistent/tokenizer.json", "--tokenizer /nonexistent/tokenizer.json: expected the model's tokenizer.json, "
                                        "found nothing there"},
        {other, "more than the reference's vocab_size 384: another model's tokenizer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --tokenizer '%s'", GM_PHASE0, ref, ref, cases[i].file);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s: %s%s", cases[i].file, out, err);
        cr_expect(strstr(err, cases[i].want) && tu_lines(err) == 1, "%s: %s", cases[i].file, err);
        free(out), free(err);
    }
    /* a reference captured with a tokenizer.json beside the weights records its hash: that file is taken (a
       vocabulary larger than the model's is then no matter), and another one is refused by the hash */
    char w[4400], own[4500], *toks = tg_tokens_arg("qwen2_tied"), *ref2 = malloc(4400);
    snprintf(w, sizeof w, "%s/w", work);
    snprintf(own, sizeof own, "%s/tokenizer.json", w);
    snprintf(cmd, sizeof cmd, "cp -r '%s/golden/qwen2_tied' '%s' && chmod -R u+w '%s' && cp '%s/tokenizers/qwen2_5/"
             "tokenizer.json' '%s'", GM_SHARED_DIR, w, w, GM_SHARED_DIR, own);
    cr_assert_eq(system(cmd), 0);
    snprintf(ref2, 4400, "%s/ref2", work);
    snprintf(cmd, sizeof cmd, "'%s' capture qwen2_tied --weights '%s' %s --ops none --steps 4 --out '%s'", GM_PHASE0, w,
             toks, ref2);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --tokenizer '%s'", GM_PHASE0, ref2, ref2, own);
    cr_expect_eq(tu_run(cmd, &out, &err), 0, "its own tokenizer: %s%s", out, err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s' '%s' --tokenizer '%s'", GM_PHASE0, ref2, ref2, other);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "not the reference's tokenizer (") && strstr(err, "manifest.json: tokenizer fnv1a64:") &&
              tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    free(toks);
    free(ref2);
    free(ref);
}

/* capture of weights that hold NaN: no reference written (it would hold NaN everywhere), one line saying where to look */
Test(verify, capture_refuses_to_write_a_reference_of_nan)
{
    char w[4400], cmd[16384], out_dir[4400], *out = NULL, *err = NULL, *toks = tg_tokens_arg("qwen3_tied");
    snprintf(w, sizeof w, "%s/w", work);
    snprintf(cmd, sizeof cmd, "cp -r '%s/golden/qwen3_tied' '%s' && chmod -R u+w '%s' && /usr/bin/python3 -c \""
             "import json, struct; p = '%s/model.safetensors'; b = bytearray(open(p, 'rb').read()); "
             "n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); s, e = h['model.norm.weight']['data_offsets']; "
             "b[8 + n + s:8 + n + e] = b'\\\\xc0\\\\x7f' * ((e - s) // 2); open(p, 'wb').write(b)\"",
             GM_SHARED_DIR, w, w, w);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(out_dir, sizeof out_dir, "%s/ref", work);
    snprintf(cmd, sizeof cmd, "'%s' capture qwen3_tied --weights '%s' %s --out '%s'", GM_PHASE0, w, toks, out_dir);
    cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "the runner's final_norm hold NaN") && strstr(err, "no reference is written") &&
              strstr(err, "phase0 qwen3_tied --weights ") && tu_lines(err) == 1, "%s", err);
    cr_expect(!tu_exists(out_dir), "%s was written", out_dir);
    free(out), free(err), free(toks);
}
