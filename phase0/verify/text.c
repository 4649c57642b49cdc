/*
** phase0 verify's report on the terminal: per prompt, each rule of vf_rules[]
** with its verdict and why; at the first divergence both chosen tokens with
** their rank in the other side's top-5, both top-5 lists and the agreed
** prefix; the generated texts; the lens table, and the ops lens; then each
** rule's counts and the verdict.
*/
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "gm/io.h"
#include "record.h"

int vf_write_report(const vf_report *r, const char *path, void (*put)(FILE *out, const vf_report *r), gm_status *st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory for the report", path);
    put(out, r);
    const int failed = ferror(out);
    if (fclose(out) != 0 || failed || !buf) {
        free(buf);
        return gm_fail(st, GM_ENOMEM, "%s: out of memory for the report", path);
    }
    const int rc = gm_write_file(path, buf, len, st);
    free(buf);
    return rc;
}

/* id and its decoded text, "17 \" the\"" (just the id without a tokenizer) */
static void put_token(FILE *out, int32_t id, const char *text)
{
    char t[200];
    if (text)
        fprintf(out, "%d \"%s\"", id, p0_shown(text, t, sizeof t));
    else
        fprintf(out, "%d", id);
}

/* " (#2 in the reference's top-5)" or " (not in the reference's top-5)", or nothing when not known */
static void put_rank(FILE *out, int rank, int known, const char *other)
{
    if (!known)
        fprintf(out, " (the %s's top-%d is not known)", other, VF_GATE_K);
    else if (rank > 0)
        fprintf(out, " (#%d in the %s's top-%d)", rank, other, VF_GATE_K);
    else
        fprintf(out, " (not in the %s's top-%d)", other, VF_GATE_K);
}

static void put_top(FILE *out, const char *label, const int32_t *ids, char *const *texts)
{
    fprintf(out, "    %s top-%d:", label, VF_GATE_K);
    for (int k = 0; k < VF_GATE_K; k++) {
        fputs(k ? ", " : " ", out);
        put_token(out, ids[k], texts[k]);
    }
    fputc('\n', out);
}

/* What the token gate saw at the first divergence. */
static void put_divergence(FILE *out, const vf_prompt *p)
{
    const vf_walk *w = &p->walk;
    if (w->diverge < 0)
        return;
    fprintf(out, "    at step %d the candidate chose ", w->diverge);
    put_token(out, w->cand_id, p->cand_chosen_text);
    put_rank(out, w->cand_rank_in_ref, 1, "reference");
    fputs(", the reference chose ", out);
    put_token(out, w->ref_id, p->ref_chosen_text);
    put_rank(out, w->ref_rank_in_cand, w->has_cand_top, "candidate");
    fputc('\n', out);
    put_top(out, "reference", w->ref_top, p->ref_top_text);
    if (w->has_cand_top)
        put_top(out, "candidate", w->cand_top, p->cand_top_text);
    if (p->prefix_text && w->diverge > 0) {
        char t[600];
        fprintf(out, "    agreed before it (steps 0-%d): \"%s\"\n", w->diverge - 1,
                p0_shown(p->prefix_text, t, sizeof t));
    }
}

/* A lens table: each row's cosines and errors, the first below the threshold named. */
static void put_lens(FILE *out, const char *title, const vf_layer *rows, int n, int first_low, double threshold,
                     const char *what)
{
    fprintf(out, "  %-22s %10s %10s %10s %10s %10s %10s %10s %6s\n", title, "cos", "min", "p5", "median", "mean",
            "max|err|", "max rel", "nan");
    for (int l = 0; l < n; l++) {
        const vf_layer *x = &rows[l];
        fprintf(out, "  %-22s %10.6f %10.6f %10.6f %10.6f %10.6f %10.3g %10.3g %6ld%s\n", x->name, x->cos_whole,
                x->cos_min, x->cos_p5, x->cos_median, x->cos_mean, x->max_abs, x->max_rel, x->nan,
                l == first_low ? "  <- first below the threshold" : "");
    }
    if (first_low >= 0)
        fprintf(out, "  first %s whose per-position cosine falls below %.2f: %s\n", what, threshold,
                rows[first_low].name);
}

void vf_print_text(const vf_report *r, FILE *out)
{
    fprintf(out, "verify %s: candidate %s against the reference %s (%s%s%s%s)\n", r->model, r->cand_label,
            r->ref_label, r->ref_kernels[0] ? "kernels " : "", r->ref_kernels, r->ref_commit[0] ? ", commit " : "",
            r->ref_commit);
    if (r->ref_not[0])
        fprintf(out, "note: the reference is no bf16 reference of %s: %s\n", r->model, r->ref_not);
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        char text[600];
        fprintf(out, "\n%s (%d tokens)%s%s\n", p->name, p->n_tokens, p->text ? ": " : "",
                p->text ? p0_shown(p->text, text, sizeof text) : "");
        for (int k = 0; k < VF_N_RULES; k++) {
            fprintf(out, "  %-30s %-11s %s\n", vf_rules[k].title, vf_verdict_name(p->rule[k].verdict), p->rule[k].why);
            if (k != VF_RULE_TOKENS)
                continue;
            put_divergence(out, p);
            if (p->ref_text && p->cand_text) {
                char a[600], b[600];
                fprintf(out, "  reference: %s\n  candidate: %s\n", p0_shown(p->ref_text, a, sizeof a),
                        p0_shown(p->cand_text, b, sizeof b));
            }
        }
        if (p->n_warnings)
            fprintf(out, "  warning: %s%s\n", p->warning, p->n_warnings > 1 ? " (and at other steps too)" : "");
        if (p->layers)
            put_lens(out, "lens", p->layers, p->n_layers, p->first_low, p->threshold, "row");
        if (p->ops && p->n_ops > 0) /* (none in common: no empty table) */
            put_lens(out, "ops", p->ops, p->n_ops, p->first_low_op, p->threshold, "op");
        if (p->checked[0])
            fprintf(out, "  checked: %s\n", p->checked);
        if (p->unchecked[0])
            fprintf(out, "  not checked: %s\n", p->unchecked);
    }
    fputc('\n', out);
    for (int k = 0; k < VF_N_RULES; k++)
        fprintf(out, "%s: %d OK, %d FAIL, %d not checked (of %d prompts)\n", vf_rules[k].title, r->count[k][VF_OK],
                r->count[k][VF_FAIL], r->count[k][VF_UNCHECKED], r->n_prompts);
    fprintf(out, "verify: %s\n", vf_overall_name(r->verdict));
}
