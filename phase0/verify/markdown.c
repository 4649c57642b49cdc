/*
** phase0 verify --md FILE: the report as Markdown, laid out as mlir-air's
** report.py lays out theirs (dump_markdown): the result, the top-k gate's
** pass and fail counts, the prompts table, the top-k inclusion table with
** each side's choice and its rank in the other's top-5, the agreed prefixes
** and the failure reasons, the per-layer table. Then what ours adds: every
** rule of vf_rules[] per prompt, both top-5 lists at the divergence decoded,
** the warnings. Text from the bundle is escaped, so that no renderer reads
** it as markup (put_cell).
*/
#include "internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


char *vf_md_quoted(const char *text)
{
    size_t n = strlen(text), k = 0;
    char *out = malloc(2 * n + 3);
    if (!out)
        return NULL;
    out[k++] = '"';
    for (const char *c = text; *c; c++) {
        const char *esc = *c == '\\' ? "\\\\" : *c == '|' ? "\\|" : *c == '\n' ? "\\n" : *c == '\r' ? "\\r"
                        : *c == '\t' ? "\\t" : NULL;
        if (esc)
            memcpy(out + k, esc, 2), k += 2;
        else
            out[k++] = *c;
    }
    out[k++] = '"';
    out[k] = '\0';
    return out;
}

char *vf_short_prompt(const char *text)
{
    size_t n = 0, chars = 0;
    while (text[n] && chars < 60) { /* characters, not bytes: UTF-8 continuation bytes do not count */
        n++;
        while (((unsigned char)text[n] & 0xC0) == 0x80)
            n++;
        chars++;
    }
    const int longer = text[n] != '\0';
    char *out = malloc(n + 4);
    if (out)
        snprintf(out, n + 4, "%.*s%s", (int)n, text, longer ? "\xe2\x80\xa6" : "");
    return out;
}

/*
** Text from the bundle (a prompt, a decoded token, a name) in a table cell or
** a line: what a Markdown renderer would read as markup is escaped (<, > and
** & as entities; | ` * _ [ ] ~ and \ by a backslash), newlines become
** spaces (theirs for the prompts table), so the text shows as written.
*/
static void put_cell(FILE *out, const char *s)
{
    for (; *s; s++)
        if (*s == '<' || *s == '>' || *s == '&')
            fputs(*s == '<' ? "&lt;" : *s == '>' ? "&gt;" : "&amp;", out);
        else if (strchr("|`*_[]~\\", *s))
            fprintf(out, "\\%c", *s);
        else
            fputc(*s == '\n' || *s == '\r' ? ' ' : *s, out);
}

/* A decoded token as theirs shows it, "text", or id=N without a tokenizer; the id beside. */
static void put_choice(FILE *out, int32_t id, const char *text, int rank, int known)
{
    char *q = text ? vf_md_quoted(text) : NULL;
    if (q) {
        put_cell(out, q);
        fprintf(out, " id=%d", id);
    } else {
        fprintf(out, "id=%d", id);
    }
    free(q);
    if (!known)
        fputs(" (?)", out);
    else if (rank > 0)
        fprintf(out, " (#%d)", rank);
    else
        fputs(" (\xe2\x9c\x97)", out);
}

static void put_number(FILE *out, const char *fmt, double v)
{
    if (isfinite(v))
        fprintf(out, fmt, v);
    else
        fputs(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", out);
}

/* The prompts the token gate walked: a topk check each, as theirs counts them. */
static int walked_count(const vf_report *r)
{
    int n = 0;
    for (int i = 0; i < r->n_prompts; i++)
        n += r->prompts[i].cand_ids != NULL;
    return n;
}

static void put_topk(FILE *out, const vf_report *r)
{
    const int walked = walked_count(r);
    if (!walked)
        return;
    fprintf(out, "\n## Top-k token inclusion \xe2\x80\x94 npu_vs_hf (k=%d, %d/%d PASS)\n\n", VF_GATE_K,
            r->count[VF_RULE_TOKENS][VF_OK], walked);
    fputs("| # | Prompt | Steps | Diverge step | candidate choice (rank in reference) | reference choice (rank in "
          "candidate) | Status |\n|--:|--------|------:|-------------:|---------|---------|:-------|\n", out);
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        const vf_walk *w = &p->walk;
        if (!p->cand_ids)
            continue;
        char *shortened = vf_short_prompt(p->text ? p->text : "");
        fprintf(out, "| %d | ", i);
        put_cell(out, shortened ? shortened : "");
        free(shortened);
        fprintf(out, " | %d | ", p->n_steps);
        if (w->diverge < 0) {
            fputs("\xe2\x80\x94 | (all match) | (all match)", out);
        } else {
            fprintf(out, "%d | ", w->diverge);
            put_choice(out, w->cand_id, p->cand_chosen_text, w->cand_rank_in_ref, 1);
            fputs(" | ", out);
            put_choice(out, w->ref_id, p->ref_chosen_text, w->ref_rank_in_cand, w->has_cand_top);
        }
        fprintf(out, " | %s |\n", vf_verdict_name(p->rule[VF_RULE_TOKENS].verdict));
    }
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        if (p->cand_ids && p->prefix_text && p->prefix_text[0] && p->walk.diverge > 0) {
            char *q = vf_md_quoted(p->prefix_text);
            fprintf(out, "\n*Prompt %d agreed prefix (steps 0-%d):* ", i, p->walk.diverge - 1);
            put_cell(out, q ? q : "");
            fputc('\n', out);
            free(q);
        }
    }
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        if (p->cand_ids && p->rule[VF_RULE_TOKENS].verdict == VF_FAIL) {
            fprintf(out, "\n*Prompt %d FAIL:* ", i);
            put_cell(out, p->rule[VF_RULE_TOKENS].why);
            fputc('\n', out);
        }
    }
    for (int i = 0; i < r->n_prompts; i++) { /* ours: both top-5 lists at the divergence */
        const vf_prompt *p = &r->prompts[i];
        const vf_walk *w = &p->walk;
        if (!p->cand_ids || w->diverge < 0)
            continue;
        for (int side = 0; side < 2; side++) {
            const int32_t *ids = side ? w->cand_top : w->ref_top;
            char *const *texts = side ? p->cand_top_text : p->ref_top_text;
            if (side && !w->has_cand_top)
                continue;
            fprintf(out, "\n*Prompt %d %s top-%d at step %d:* ", i, side ? "candidate" : "reference", VF_GATE_K,
                    w->diverge);
            for (int k = 0; k < VF_GATE_K; k++) {
                fputs(k ? ", " : "", out);
                put_choice(out, ids[k], texts[k], k + 1, 1);
            }
            fputc('\n', out);
        }
    }
    if (r->count[VF_RULE_TOKENS][VF_FAIL])
        fprintf(out, "\n_%d/%d prompts failed top-%d inclusion at first divergence._\n",
                r->count[VF_RULE_TOKENS][VF_FAIL], walked, VF_GATE_K);
}

static void put_rules(FILE *out, const vf_report *r)
{
    fputs("\n## Rules\n\n| # | prompt |", out);
    for (int k = 0; k < VF_N_RULES; k++)
        fprintf(out, " %s |", vf_rules[k].title);
    fputs(" first row below the threshold |\n|--:|--------|", out);
    for (int k = 0; k < VF_N_RULES; k++)
        fputs(":-------|", out);
    fputs("--------|\n", out);
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        fprintf(out, "| %d | ", i);
        put_cell(out, p->name);
        fputs(" |", out);
        for (int k = 0; k < VF_N_RULES; k++)
            fprintf(out, " %s |", vf_verdict_name(p->rule[k].verdict));
        fprintf(out, " %s |\n", p->layers && p->first_low >= 0 ? p->layers[p->first_low].name : "none");
    }
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        for (int k = 0; k < VF_N_RULES; k++) {
            fprintf(out, "\n*Prompt %d %s:* %s \xe2\x80\x94 ", i, vf_rules[k].title, vf_verdict_name(p->rule[k].verdict));
            put_cell(out, p->rule[k].why);
            fputc('\n', out);
        }
        if (p->unchecked[0]) {
            fprintf(out, "\n*Prompt %d not checked:* ", i);
            put_cell(out, p->unchecked);
            fputc('\n', out);
        }
        if (p->n_warnings) {
            fprintf(out, "\n*Prompt %d warning:* ", i);
            put_cell(out, p->warning);
            fprintf(out, "%s\n", p->n_warnings > 1 ? " (and at other steps too)" : "");
        }
    }
}

/* A lens table, their columns first (cos_p5, cos_min, cos_median, max_abs), then ours. */
/* The columns of a lens table: theirs (cos_p5, cos_min, cos_median, max_abs), then ours. */
static const struct column {
    const char *name, *fmt;
    size_t offset;
} columns[] = {{"cos_p5", "%.6f", offsetof(vf_layer, cos_p5)},      {"cos_min", "%.6f", offsetof(vf_layer, cos_min)},
               {"cos_median", "%.6f", offsetof(vf_layer, cos_median)}, {"max_abs", "%.4g", offsetof(vf_layer, max_abs)},
               {"cos", "%.6f", offsetof(vf_layer, cos_whole)},       {"cos_mean", "%.6f", offsetof(vf_layer, cos_mean)},
               {"max_rel", "%.4g", offsetof(vf_layer, max_rel)}};

static void put_rows(FILE *out, const char *head, const vf_layer *rows, int n, int first_low)
{
    const size_t nc = sizeof columns / sizeof columns[0];
    fprintf(out, "| %s |", head);
    for (size_t c = 0; c < nc; c++)
        fprintf(out, " %s |", columns[c].name);
    fputs(" nan |\n|------:|", out);
    for (size_t c = 0; c <= nc; c++)
        fputs("-------:|", out);
    fputc('\n', out);
    for (int l = 0; l < n; l++) {
        const vf_layer *x = &rows[l];
        fprintf(out, "| %s%s |", x->name, l == first_low ? " (first low)" : "");
        for (size_t c = 0; c < nc; c++) {
            double v;
            memcpy(&v, (const char *)x + columns[c].offset, sizeof v);
            fputc(' ', out);
            put_number(out, columns[c].fmt, v);
            fputs(" |", out);
        }
        fprintf(out, " %ld |\n", x->nan);
    }
}

static void put_lens(FILE *out, const vf_report *r)
{
    for (int i = 0; i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        if (p->layers) {
            fprintf(out, "\n## Per-layer hidden state (ffn_out, candidate vs reference), prompt %d\n\n", i);
            put_rows(out, "Layer", p->layers, p->n_layers, p->first_low);
        }
        if (p->ops) {
            fprintf(out, "\n## The ops inside the blocks (candidate vs reference), prompt %d\n\n", i);
            put_rows(out, "Op", p->ops, p->n_ops, p->first_low_op);
            fprintf(out, "\nFirst op whose per-position cosine falls below %.2f: %s\n", p->threshold,
                    p->first_low_op >= 0 ? p->ops[p->first_low_op].name : "none");
        }
    }
}

static void put_report(FILE *out, const vf_report *r)
{
    fputs("# Verify report\n\nConfig: model=", out);
    put_cell(out, r->model);
    fputs(", reference=", out);
    put_cell(out, r->ref_label);
    fputs(" (kernels ", out);
    put_cell(out, r->ref_kernels[0] ? r->ref_kernels : "not given");
    fputs(r->ref_commit[0] ? ", commit " : "", out);
    put_cell(out, r->ref_commit);
    fputs("), candidate=", out);
    put_cell(out, r->cand_label);
    fprintf(out, ", head_dim=%d\n\nResult: **%s**\n", r->head_dim, vf_overall_name(r->verdict));
    fprintf(out, "\nTop-k token gate: %d PASS / %d FAIL (across %d prompt-pair checks)\n",
            r->count[VF_RULE_TOKENS][VF_OK], r->count[VF_RULE_TOKENS][VF_FAIL], walked_count(r));
    for (int k = 0; k < VF_N_RULES; k++)
        fprintf(out, "\n%s: %d OK, %d FAIL, %d not checked\n", vf_rules[k].title, r->count[k][VF_OK],
                r->count[k][VF_FAIL], r->count[k][VF_UNCHECKED]);
    fputs("\n## Prompts\n\n| # | Prompt |\n|--:|--------|\n", out);
    for (int i = 0; i < r->n_prompts; i++) {
        fprintf(out, "| %d | ", i);
        put_cell(out, r->prompts[i].text ? r->prompts[i].text : "(given as ids)");
        fputs(" |\n", out);
    }
    put_topk(out, r);
    put_rules(out, r);
    put_lens(out, r);
}

int vf_write_md(const vf_report *r, const char *path, gm_status *st)
{
    return vf_write_report(r, path, put_report, st);
}
