/*
** phase0 verify's report on the terminal: per prompt, each rule of vf_rules[]
** with its verdict and why, the generated texts, the lens table; the verdict.
*/
#include "internal.h"

#include <stdio.h>

#include "record.h"

void vf_print_text(const vf_report *r, FILE *out)
{
    fprintf(out, "verify %s: candidate %s against the reference (%s%s%s)\n", r->model, r->cand_label,
            r->ref_kernels[0] ? "kernels " : "", r->ref_kernels, r->ref_commit[0] ? ", commit " : "");
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        char text[600];
        fprintf(out, "\n%s (%d tokens)%s%s\n", p->name, p->n_tokens, p->text ? ": " : "",
                p->text ? p0_shown(p->text, text, sizeof text) : "");
        for (int k = 0; k < VF_N_RULES; k++) {
            fprintf(out, "  %-30s %-11s %s\n", vf_rules[k].title, vf_verdict_name(p->rule[k].verdict), p->rule[k].why);
            if (k == VF_RULE_TOKENS && p->ref_text && p->cand_text) {
                char a[600], b[600];
                fprintf(out, "  reference: %s\n  candidate: %s\n", p0_shown(p->ref_text, a, sizeof a),
                        p0_shown(p->cand_text, b, sizeof b));
            }
        }
        if (p->layers) {
            fprintf(out, "  %-12s %10s %10s %10s %10s %10s %10s %10s %6s\n", "lens", "cos", "min", "p5", "median",
                    "mean", "max|err|", "max rel", "nan");
            for (int l = 0; l < p->n_layers; l++) {
                const vf_layer *x = &p->layers[l];
                fprintf(out, "  %-12s %10.6f %10.6f %10.6f %10.6f %10.6f %10.3g %10.3g %6ld%s\n", x->name,
                        x->cos_whole, x->cos_min, x->cos_p5, x->cos_median, x->cos_mean, x->max_abs, x->max_rel,
                        x->nan, l == p->first_low ? "  <- first below the threshold" : "");
            }
            if (p->first_low >= 0)
                fprintf(out, "  first row whose per-position cosine falls below %.2f: %s\n", p->threshold,
                        p->layers[p->first_low].name);
        }
        if (p->checked[0])
            fprintf(out, "  checked: %s\n", p->checked);
        if (p->unchecked[0])
            fprintf(out, "  not checked: %s\n", p->unchecked);
    }
    fprintf(out, "\nverify: %s\n", r->verdict == VF_FAIL ? "FAIL" : "PASS");
}
