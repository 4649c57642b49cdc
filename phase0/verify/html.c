/*
** The page of `phase0 verify`: one self-contained HTML file that a browser
** opens with nothing else installed. Inline CSS and inline SVG only, no
** script, no URL of any kind; a Content-Security-Policy in the page forbids
** scripts and every fetch as well, so that even a mistake in the escaping
** below could neither run nor load anything.
**
** Everything that comes from the bundles (names, the prompt and decoded
** texts, the why strings) is hostile input: it goes through put_text, which
** escapes it and makes it well-formed UTF-8. Numbers never break the SVG:
** what is plotted is clamped to the plot and non-finite values are skipped
** there (the table prints them as nan, inf, -inf).
**
** The markup is a contract that tests and scripts reading the page rely on:
**   <p class="overall"><span class="verdict ok|fail|unchecked">   the report's verdict
**   <p class="counts">                              each rule's OK, FAIL and not checked counts
**   <table class="summary"> with one <tr class="summary-row"> per prompt, a column per rule
**   <section class="prompt" id="prompt-NAME">   NAME: the prompt's name, bytes outside [A-Za-z0-9_.-] as '_'
**     <pre class="prompt-text">                  the prompt's text (a <p class="prompt-text none"> without one)
**     <p class="rule KEY"><span class="verdict ...">  each rule of vf_rules[] (KEY: its key, token_gate,
**         block_gate), then <span class="why">
**     <p class="checked">, <p class="not-checked">
**     <p class="warning">                          a chosen id that is not the first of its own top-k
**     <table class="divergence"> at the first divergence: <tr class="ref">, <tr class="cand">, each
**         side's choice, its rank in the other's top-5 and its own top-5, decoded;
**         <p class="prefix"> the agreed steps before it, decoded
**     <div class="run ref">, <div class="run cand">: <p class="ids"> of <span class="tok">,
**         "tok diverged" from step `diverge` on, "tok diverged first" at it; <pre class="text">
**         with <mark class="diverged"> over what follows the two texts' common prefix
**     <svg class="cosine-plot"> with <polyline class="series-min">, "series-p5", "series-median",
**         <line class="threshold">, <line class="first-low"> (when there is one)
**     <svg class="position-plot"> of <rect class="cell">
**     <table class="lens"> with one <tr class="layer"> per row
**     <p class="ops-meta">, then per layer whose ops were compared an <svg class="ops-plot"> (the
**         cosine plot's series over its ops), and <table class="ops"> with one <tr class="op"> per op
** Verdict spans read OK, FAIL and "not checked"; a value outside vf_verdict is "unknown", class unchecked.
*/
#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/utf8.h"

/* ---------------------------------------------------------------- text */

/*
** s[0..n) as HTML text, also safe inside a quoted attribute value. The five
** special characters become references; an ill-formed UTF-8 sequence becomes
** U+FFFD (so the page is always well-formed UTF-8, whatever a tokenizer cut in
** half); C0 controls other than tab and newline become their visible Control
** Pictures (U+2400 + c, DEL U+2421) and C1 controls U+FFFD, since a browser
** would otherwise drop or misrender them and the reader should see they are there.
*/
static void put_text(FILE *out, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t adv;
        uint32_t cp = gm_utf8_decode(u + i, n - i, &adv);
        i += adv;
        switch (cp) {
        case '&': fputs("&amp;", out); continue;
        case '<': fputs("&lt;", out); continue;
        case '>': fputs("&gt;", out); continue;
        case '"': fputs("&quot;", out); continue;
        case '\'': fputs("&#39;", out); continue;
        case '\t':
        case '\n': fputc((int)cp, out); continue;
        default: break;
        }
        if (cp < 0x20)
            cp += 0x2400;
        else if (cp == 0x7F)
            cp = 0x2421;
        else if (cp >= 0x80 && cp < 0xA0)
            cp = 0xFFFD;
        char enc[4];
        fwrite(enc, 1, gm_utf8_encode(enc, cp), out);
    }
}

static void put_str(FILE *out, const char *s)
{
    put_text(out, s, strlen(s));
}

/* A char array of the report: its text up to the first NUL, never past its end even when it has none. */
#define put_field(out, a) put_text((out), (a), strnlen((a), sizeof(a)))

/* The id of prompt i's section: "prompt-" and its name with bytes outside [A-Za-z0-9_.-] as '_' (its index without a name). */
static void put_id(FILE *out, const vf_prompt *p, int i)
{
    size_t n = strnlen(p->name, sizeof p->name);
    fputs("prompt-", out);
    if (n == 0) {
        fprintf(out, "%d", i);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)p->name[k];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                   c == '.' || c == '-';
        fputc(keep ? c : '_', out);
    }
}

/* ---------------------------------------------------------------- numbers */

/* Non-finite values by name: glibc's printf would write "-nan" for some NaNs. */
static int put_nonfinite(FILE *out, double v)
{
    if (isnan(v))
        fputs("nan", out);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", out);
    else
        return 0;
    return 1;
}

/* A cosine (%.6f) and an error (%.3g). */
static void put_cos(FILE *out, double v)
{
    if (!put_nonfinite(out, v))
        fprintf(out, "%.6f", v);
}

static void put_err(FILE *out, double v)
{
    if (!put_nonfinite(out, v))
        fprintf(out, "%.3g", v);
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/*
** The threshold the plots use: the prompt's, or 0.99 when it is not a usable
** cosine (the colour scale below needs threshold < 1); the legends print it.
*/
static double plot_threshold(const vf_prompt *p)
{
    return isfinite(p->threshold) && p->threshold > -1 && p->threshold < 1 ? p->threshold : 0.99;
}

/* ---------------------------------------------------------------- verdicts */

static void put_verdict(FILE *out, vf_verdict v)
{
    switch (v) {
    case VF_OK: fputs("<span class=\"verdict ok\">OK</span>", out); return;
    case VF_FAIL: fputs("<span class=\"verdict fail\">FAIL</span>", out); return;
    case VF_UNCHECKED: fputs("<span class=\"verdict unchecked\">not checked</span>", out); return;
    }
    fputs("<span class=\"verdict unchecked\">unknown</span>", out);
}

/* ---------------------------------------------------------------- the page's head */

static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;color:#222;margin:1.5em auto;max-width:1180px;padding:0 1em}\n"
    "h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.25em;margin:.3em 0}h3{font-size:1.05em;margin:1.2em 0 .3em}\n"
    "h4{margin:.2em 0;font-size:1em}\n"
    ".verdict{font-weight:bold;padding:0 .45em;border-radius:3px;white-space:nowrap}\n"
    ".verdict.ok{background:#c8e6c9;color:#1b5e20}.verdict.fail{background:#ffcdd2;color:#b71c1c}\n"
    ".verdict.unchecked{background:#e0e0e0;color:#424242}\n"
    ".overall{font-size:1.2em}\n"
    "section.prompt{border-top:3px solid #bbb;margin-top:2.2em;padding-top:.4em}\n"
    "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f5f5f5;padding:.5em;margin:.3em 0;"
    "font:13px/1.4 ui-monospace,monospace}\n"
    ".none{color:#757575;font-style:italic}\n"
    ".runs{display:grid;grid-template-columns:1fr 1fr;gap:1em}\n"
    ".run{min-width:0}\n"
    ".ids{font:12px/1.9 ui-monospace,monospace;margin:.3em 0}\n"
    ".tok{display:inline-block;padding:0 .3em;border:1px solid #ddd;border-radius:2px;margin:0 1px}\n"
    ".tok.diverged{background:#ffe0b2;border-color:#fb8c00}.tok.first{outline:2px solid #e65100}\n"
    "mark.diverged{background:#ffe0b2}\n"
    "table{border-collapse:collapse;margin:.4em 0}\n"
    "th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;font-variant-numeric:tabular-nums}\n"
    "th{background:#f5f5f5}.name,.key{text-align:left}\n"
    "td.low{background:#ffcdd2}td.bad{background:#b71c1c;color:#fff}\n"
    "svg{display:block;margin:.5em 0;max-width:100%;height:auto;font:11px system-ui,sans-serif}\n";

static void put_head(FILE *out, const vf_report *r)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", out);
    /* nothing may run or be fetched: the page needs its own inline styles and nothing else */
    fputs("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n",
          out);
    fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>phase0 verify: ", out);
    put_field(out, r->model);
    fprintf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", css);
}

/* ---------------------------------------------------------------- the report's header */

static void put_meta_row(FILE *out, const char *key, const char *value, size_t cap)
{
    fprintf(out, "<tr><th class=\"key\">%s</th><td class=\"name\">", key);
    if (strnlen(value, cap) > 0)
        put_text(out, value, strnlen(value, cap));
    else
        fputs("<span class=\"none\">not given</span>", out);
    fputs("</td></tr>\n", out);
}

/* The name of prompt p's first row below the threshold, or "none". */
static void put_first_low(FILE *out, const vf_prompt *p)
{
    if (p->layers && p->first_low >= 0 && p->first_low < p->n_layers)
        put_field(out, p->layers[p->first_low].name);
    else
        fputs("none", out);
}

static void put_header(FILE *out, const vf_report *r)
{
    fputs("<h1>phase0 verify: ", out);
    put_field(out, r->model);
    fputs("</h1>\n<p class=\"overall\">", out);
    put_verdict(out, r->verdict);
    fprintf(out, " over %d prompt%s (FAIL when any prompt's gate failed)</p>\n", r->n_prompts > 0 ? r->n_prompts : 0,
            r->n_prompts == 1 ? "" : "s");
    fputs("<table class=\"meta\">\n", out);
    put_meta_row(out, "model", r->model, sizeof r->model);
    put_meta_row(out, "reference commit", r->ref_commit, sizeof r->ref_commit);
    put_meta_row(out, "reference kernels", r->ref_kernels, sizeof r->ref_kernels);
    put_meta_row(out, "candidate", r->cand_label, sizeof r->cand_label);
    if (r->ref_not[0])
        put_meta_row(out, "reference is no bf16 reference", r->ref_not, sizeof r->ref_not);
    fprintf(out, "<tr><th class=\"key\">head_dim</th><td class=\"name\">%d</td></tr>\n</table>\n", r->head_dim);

    fputs("<p class=\"counts\">", out);
    for (int k = 0; k < VF_N_RULES; k++)
        fprintf(out, "%s%s: %d OK, %d FAIL, %d not checked", k ? "; " : "", vf_rules[k].title, r->count[k][VF_OK],
                r->count[k][VF_FAIL], r->count[k][VF_UNCHECKED]);
    fputs("</p>\n<table class=\"summary\">\n<thead><tr><th class=\"name\">prompt</th>", out);
    for (int k = 0; k < VF_N_RULES; k++)
        fprintf(out, "<th>%s</th>", vf_rules[k].title);
    fputs("<th>first divergence</th><th class=\"name\">first low row</th></tr></thead>\n<tbody>\n", out);
    for (int i = 0; r->prompts && i < r->n_prompts; i++) {
        const vf_prompt *p = &r->prompts[i];
        fputs("<tr class=\"summary-row\"><td class=\"name\"><a href=\"#", out);
        put_id(out, p, i);
        fputs("\">", out);
        put_field(out, p->name);
        fputs("</a></td>", out);
        for (int k = 0; k < VF_N_RULES; k++) {
            fputs("<td>", out);
            put_verdict(out, p->rule[k].verdict);
            fputs("</td>", out);
        }
        if (p->walk.diverge >= 0)
            fprintf(out, "<td>step %d</td>", p->walk.diverge);
        else
            fputs("<td>none</td>", out);
        fputs("<td class=\"name\">", out);
        put_first_low(out, p);
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody>\n</table>\n", out);
}

/* ---------------------------------------------------------------- the token gate */

/* ids[0..n) as numbers, from step `diverge` on marked (diverge < 0: none). */
static void put_ids(FILE *out, const int32_t *ids, int n, int diverge)
{
    if (!ids) {
        fputs("<p class=\"ids none\">no chosen tokens</p>\n", out);
        return;
    }
    fputs("<p class=\"ids\">", out);
    for (int i = 0; i < n; i++) {
        const char *cls = diverge < 0 || i < diverge ? "tok" : i == diverge ? "tok diverged first" : "tok diverged";
        fprintf(out, "<span class=\"%s\" title=\"step %d\">%ld</span> ", cls, i, (long)ids[i]);
    }
    fputs("</p>\n", out);
}

/*
** The length of the common prefix of a and b, moved back to the first byte of
** a character, so that the marked part of either text never starts inside one.
*/
static size_t common_prefix(const char *a, const char *b)
{
    size_t n = 0;
    while (a[n] && a[n] == b[n])
        n++;
    while (n > 0 && (((unsigned char)a[n] & 0xC0) == 0x80 || ((unsigned char)b[n] & 0xC0) == 0x80))
        n--;
    return n;
}

/* One run's decoded text, what follows the first prefix bytes marked (prefix = its length: nothing marked). */
static void put_run_text(FILE *out, const char *text, size_t prefix)
{
    if (!text) {
        fputs("<p class=\"text none\">no decoded text (no tokenizer)</p>\n", out);
        return;
    }
    size_t n = strlen(text);
    fputs("<pre class=\"text\">", out);
    put_text(out, text, prefix);
    if (prefix < n) {
        fputs("<mark class=\"diverged\">", out);
        put_text(out, text + prefix, n - prefix);
        fputs("</mark>", out);
    }
    fputs("</pre>\n", out);
}

/* Each rule's verdict and why; what was checked and what not. */
static void put_rules(FILE *out, const vf_prompt *p)
{
    fputs("<h3>Rules</h3>\n", out);
    for (int k = 0; k < VF_N_RULES; k++) {
        fprintf(out, "<p class=\"rule %s\">", vf_rules[k].key);
        put_verdict(out, p->rule[k].verdict);
        fprintf(out, " <b>%s</b> <span class=\"why\">", vf_rules[k].title);
        put_field(out, p->rule[k].why);
        fputs("</span></p>\n", out);
    }
    fputs("<p class=\"checked\"><b>checked:</b> ", out);
    put_field(out, p->checked);
    fputs("</p>\n<p class=\"not-checked\"><b>not checked:</b> ", out);
    if (p->unchecked[0])
        put_field(out, p->unchecked);
    else
        fputs("nothing: the candidate held every file", out);
    fputs("</p>\n", out);
}

/* A token as "id text" (the text when decoded). */
static void put_token(FILE *out, int32_t id, const char *text)
{
    fprintf(out, "%ld", (long)id);
    if (text) {
        fputs(" <q>", out);
        put_str(out, text);
        fputs("</q>", out);
    }
}

/* At the first divergence: each side's choice, its rank in the other's top-k, its own top-k; the agreed prefix. */
static void put_divergence(FILE *out, const vf_prompt *p)
{
    const vf_walk *w = &p->walk;
    if (w->diverge < 0 || !p->cand_ids)
        return;
    fprintf(out, "<table class=\"divergence\">\n<thead><tr><th class=\"name\">step %d</th><th class=\"name\">chose"
            "</th><th>rank in the other's top-%d</th><th class=\"name\">own top-%d</th></tr></thead>\n<tbody>\n",
            w->diverge, VF_GATE_K, VF_GATE_K);
    for (int side = 0; side < 2; side++) {
        const int rank = side ? w->cand_rank_in_ref : w->ref_rank_in_cand, known = side || w->has_cand_top;
        fprintf(out, "<tr class=\"%s\"><td class=\"name\">%s</td><td class=\"name\">", side ? "cand" : "ref",
                side ? "candidate" : "reference");
        put_token(out, side ? w->cand_id : w->ref_id, side ? p->cand_chosen_text : p->ref_chosen_text);
        if (!known)
            fputs("</td><td>not known</td><td class=\"name\">", out);
        else if (rank > 0)
            fprintf(out, "</td><td>#%d</td><td class=\"name\">", rank);
        else
            fputs("</td><td class=\"low\">not in it</td><td class=\"name\">", out);
        for (int k = 0; k < VF_GATE_K && (!side || w->has_cand_top); k++) {
            fputs(k ? ", " : "", out);
            put_token(out, side ? w->cand_top[k] : w->ref_top[k], side ? p->cand_top_text[k] : p->ref_top_text[k]);
        }
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody>\n</table>\n", out);
    if (p->prefix_text && w->diverge > 0) {
        fprintf(out, "<p class=\"prefix\">agreed before it (steps 0-%d): <q>", w->diverge - 1);
        put_str(out, p->prefix_text);
        fputs("</q></p>\n", out);
    }
}

/* Both runs' chosen tokens and texts, side by side. */
static void put_runs(FILE *out, const vf_prompt *p)
{
    const int steps = p->n_steps > 0 ? p->n_steps : 0, diverge = p->walk.diverge;
    fputs("<h3>Generated tokens</h3>\n", out);
    if (!p->ref_ids || !p->cand_ids)
        fputs("<p class=\"diverge\">nothing to compare: a run has no chosen tokens</p>\n", out);
    else if (diverge >= 0)
        fprintf(out, "<p class=\"diverge\">the chosen tokens differ first at step %d of %d</p>\n", diverge, steps);
    else
        fprintf(out, "<p class=\"diverge\">the chosen tokens agree on all %d steps</p>\n", steps);
    put_divergence(out, p);
    if (p->n_warnings) {
        fputs("<p class=\"warning\"><b>warning:</b> ", out);
        put_field(out, p->warning);
        fprintf(out, "%s</p>\n", p->n_warnings > 1 ? " (and at other steps too)" : "");
    }

    /* both texts are marked from where they stop agreeing, which need not be the diverging token's start */
    size_t ref_prefix = p->ref_text ? strlen(p->ref_text) : 0, cand_prefix = p->cand_text ? strlen(p->cand_text) : 0;
    if (p->ref_text && p->cand_text)
        ref_prefix = cand_prefix = common_prefix(p->ref_text, p->cand_text);
    fputs("<div class=\"runs\">\n<div class=\"run ref\">\n<h4>reference</h4>\n", out);
    put_ids(out, p->ref_ids, steps, diverge);
    put_run_text(out, p->ref_text, ref_prefix);
    fputs("</div>\n<div class=\"run cand\">\n<h4>candidate</h4>\n", out);
    put_ids(out, p->cand_ids, steps, diverge);
    put_run_text(out, p->cand_text, cand_prefix);
    fputs("</div>\n</div>\n", out);
}

/* ---------------------------------------------------------------- the cosine plot */

enum {
    PLOT_W = 900,               /* both plots' width in SVG units */
    COS_H = 340,                /* the cosine plot's height */
    COS_L = 70, COS_R = 20, COS_T = 34, COS_B = 86, /* its margins: y labels, legend, rotated x labels */
    MAX_X_LABELS = 40,          /* row names under the cosine plot, at most */
};

/* One series of the cosine plot: which field of vf_layer, its class and colour. */
typedef struct series {
    const char *cls, *label, *color;
    size_t offset;
} series;

static const series all_series[] = {
    {"series-min", "min", "#c62828", offsetof(vf_layer, cos_min)},
    {"series-p5", "p5", "#ef6c00", offsetof(vf_layer, cos_p5)},
    {"series-median", "median", "#1565c0", offsetof(vf_layer, cos_median)},
};

static double series_value(const vf_layer *l, const series *s)
{
    double v;
    memcpy(&v, (const char *)l + s->offset, sizeof v);
    return v;
}

/* The plot's coordinates: rows along x, cosines in [lo, hi] along y. */
typedef struct frame {
    int n;
    double lo, hi;
    double x0, x1, y0, y1; /* the plotting area: x0 left, y0 top */
} frame;

static double fx(const frame *f, int row)
{
    return f->n > 1 ? f->x0 + (f->x1 - f->x0) * row / (f->n - 1) : (f->x0 + f->x1) / 2;
}

/* Only finite values are passed here; they are clamped to the range, so every coordinate stays finite and inside. */
static double fy(const frame *f, double v)
{
    return f->y1 - (clamp(v, f->lo, f->hi) - f->lo) / (f->hi - f->lo) * (f->y1 - f->y0);
}

/* rows[0..n) of p along x (its lens, or one layer's ops), their cosines along y; the SVG's class cls */
static void put_cosine_plot(FILE *out, const vf_prompt *p, const vf_layer *rows, int n, int first_low,
                            const char *cls, const char *label)
{
    const double thr = plot_threshold(p);
    frame f = {n, 1, 1, COS_L, PLOT_W - COS_R, COS_T, COS_H - COS_B};
    /* the y range: from the lowest finite value (cosines clamped to [-1, 1]) or the threshold up to 1, with headroom */
    for (int i = 0; i < n; i++)
        for (size_t s = 0; s < sizeof all_series / sizeof *all_series; s++) {
            double v = series_value(&rows[i], &all_series[s]);
            if (isfinite(v) && clamp(v, -1, 1) < f.lo)
                f.lo = clamp(v, -1, 1);
        }
    if (thr < f.lo)
        f.lo = thr;
    double span = 1 - f.lo < 1e-3 ? 1e-3 : 1 - f.lo;
    f.lo = 1 - span * 1.08 < -1 ? -1 : 1 - span * 1.08;
    f.hi = 1 + span * 0.03;

    fprintf(out,
            "<svg class=\"%s\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
            "aria-label=\"%s: min, p5 and median over positions\">\n",
            cls, PLOT_W, COS_H, PLOT_W, COS_H, label);
    fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#ffffff\" stroke=\"#999999\"/>\n", f.x0,
            f.y0, f.x1 - f.x0, f.y1 - f.y0);
    /* y axis: five ticks across the range */
    for (int k = 0; k <= 4; k++) {
        double v = f.lo + (f.hi - f.lo) * k / 4, y = fy(&f, v);
        fprintf(out, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#eee\"/>", f.x0, f.x1, y, y);
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">%.4f</text>\n", f.x0 - 4, y + 4, v);
    }
    fprintf(out, "<text x=\"14\" y=\"%.2f\" transform=\"rotate(-90 14 %.2f)\" text-anchor=\"middle\">cosine</text>\n",
            (f.y0 + f.y1) / 2, (f.y0 + f.y1) / 2);
    /* x axis: the rows' names, every step-th when there are many */
    int step = n > MAX_X_LABELS ? (n + MAX_X_LABELS - 1) / MAX_X_LABELS : 1;
    for (int i = 0; i < n; i++) {
        if (i % step != 0 && i != n - 1)
            continue;
        double x = fx(&f, i), y = f.y1 + 12;
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" transform=\"rotate(-45 %.2f %.2f)\" text-anchor=\"end\">", x, y, x,
                y);
        put_field(out, rows[i].name);
        fputs("</text>\n", out);
    }
    /* the threshold, dashed */
    double ty = fy(&f, thr);
    fprintf(out,
            "<line class=\"threshold\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#616161\" "
            "stroke-dasharray=\"6 4\"/>\n<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#616161\">threshold "
            "%.4g</text>\n",
            f.x0, f.x1, ty, ty, f.x1 - 4, ty - 4, thr);
    /* the first row below it: a vertical line with its name */
    if (first_low >= 0 && first_low < n) {
        double x = fx(&f, first_low);
        fprintf(out,
                "<line class=\"first-low\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#6a1b9a\" "
                "stroke-width=\"1.5\" stroke-dasharray=\"2 3\"/>\n<text class=\"first-low\" x=\"%.2f\" y=\"%.2f\" "
                "fill=\"#6a1b9a\" text-anchor=\"%s\">first low: ",
                x, x, f.y0, f.y1, x + (first_low > n / 2 ? -4 : 4), f.y0 + 12, first_low > n / 2 ? "end" : "start");
        put_field(out, rows[first_low].name);
        fputs("</text>\n", out);
    }
    /* the series: a polyline through the finite values, a dot with its value on each */
    for (size_t s = 0; s < sizeof all_series / sizeof *all_series; s++) {
        const series *se = &all_series[s];
        fprintf(out, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", se->cls,
                se->color);
        const char *sep = "";
        for (int i = 0; i < n; i++) {
            double v = series_value(&rows[i], se);
            if (isfinite(v)) {
                fprintf(out, "%s%.2f,%.2f", sep, fx(&f, i), fy(&f, v));
                sep = " ";
            }
        }
        fputs("\"/>\n", out);
        for (int i = 0; i < n; i++) {
            double v = series_value(&rows[i], se);
            if (!isfinite(v))
                continue;
            fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2\" fill=\"%s\"><title>", fx(&f, i), fy(&f, v),
                    se->color);
            put_field(out, rows[i].name);
            fprintf(out, ": %s %.6f</title></circle>\n", se->label, v);
        }
    }
    /* rows with a non-finite value in any series: the dots are missing there, say why */
    for (int i = 0; i < n; i++) {
        int bad = 0;
        for (size_t s = 0; s < sizeof all_series / sizeof *all_series; s++)
            bad |= !isfinite(series_value(&rows[i], &all_series[s]));
        if (bad)
            fprintf(out, "<text class=\"nan-mark\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" fill=\"#b71c1c\">nan</text>\n",
                    fx(&f, i), f.y1 - 4);
    }
    /* the legend, above the plot */
    double lx = f.x0;
    for (size_t s = 0; s < sizeof all_series / sizeof *all_series; s++, lx += 110)
        fprintf(out,
                "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"14\" y2=\"14\" stroke=\"%s\" stroke-width=\"2\"/>"
                "<text x=\"%.2f\" y=\"18\">cosine %s</text>\n",
                lx, lx + 20, all_series[s].color, lx + 24, all_series[s].label);
    fprintf(out,
            "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"14\" y2=\"14\" stroke=\"#616161\" stroke-dasharray=\"6 4\"/>"
            "<text x=\"%.2f\" y=\"18\">threshold</text>\n</svg>\n",
            lx, lx + 20, lx + 24);
}

/* ---------------------------------------------------------------- the per-position plot */

enum {
    POS_LABELS = 110,   /* the row names' column */
    POS_T = 8,          /* top margin */
    MAX_COLUMNS = 128,  /* positions beyond this many are binned, each cell the worst of its bin */
    POS_ROWS_H = 420,   /* what all rows together aim at, in SVG units */
};

typedef struct rgb {
    double r, g, b;
} rgb;

static rgb mix(rgb a, rgb b, double t)
{
    return (rgb){a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

static const rgb c_nan = {0, 0, 0}, c_none = {224, 224, 224};
static const rgb c_pass_lo = {212, 225, 87}, c_pass_hi = {27, 94, 32}; /* threshold .. 1 */
static const rgb c_fail_hi = {255, 152, 0}, c_fail_lo = {183, 28, 28}; /* just below the threshold .. far below */

/* The cosines shaded red below this: 4 times the threshold's distance from 1 below it. */
static double fail_floor(double thr)
{
    return thr - 4 * (1 - thr) < -1 ? -1 : thr - 4 * (1 - thr);
}

/* A cell's colour: a step at the threshold, so that just below and just above never look alike. */
static rgb heat(double v, double thr)
{
    if (!isfinite(v))
        return c_nan;
    if (v >= thr)
        return mix(c_pass_lo, c_pass_hi, clamp((v - thr) / (1 - thr), 0, 1));
    double lo = fail_floor(thr);
    return mix(c_fail_hi, c_fail_lo, clamp((thr - v) / (thr - lo), 0, 1));
}

static void put_fill(FILE *out, rgb c)
{
    fprintf(out, "#%02x%02x%02x", (unsigned)lround(clamp(c.r, 0, 255)), (unsigned)lround(clamp(c.g, 0, 255)),
            (unsigned)lround(clamp(c.b, 0, 255)));
}

/* The legend's swatch at (x, y): w wide, its colour and label. */
static void put_swatch(FILE *out, double x, double y, double w, rgb c, const char *label)
{
    fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"10\" fill=\"", x, y, w);
    put_fill(out, c);
    fprintf(out, "\" stroke=\"#999\"/><text x=\"%.2f\" y=\"%.2f\">%s</text>\n", x + w + 4, y + 9, label);
}

static void put_position_plot(FILE *out, const vf_prompt *p)
{
    const int n = p->n_layers, T = p->T;
    const double thr = plot_threshold(p);
    if (T <= 0) {
        fputs("<p class=\"position-plot none\">no positions</p>\n", out);
        return;
    }
    const int cols = T < MAX_COLUMNS ? T : MAX_COLUMNS;
    double rh = clamp((double)POS_ROWS_H / n, 3, 14), cw = (double)(PLOT_W - POS_LABELS - 10) / cols;
    double grid_h = rh * n, axis_y = POS_T + grid_h, height = axis_y + 70;
    int label_step = rh >= 9 ? 1 : (int)ceil(9 / rh);

    if (cols < T)
        fprintf(out,
                "<p class=\"position-note\">%d positions in %d columns: each cell is the lowest cosine of its "
                "positions (nan when any is not finite)</p>\n",
                T, cols);
    fprintf(out,
            "<svg class=\"position-plot\" viewBox=\"0 0 %d %.0f\" width=\"%d\" height=\"%.0f\" role=\"img\" "
            "aria-label=\"cosine per position and row\">\n<g shape-rendering=\"crispEdges\">\n",
            PLOT_W, ceil(height), PLOT_W, ceil(height));
    for (int r = 0; r < n; r++) {
        const vf_layer *l = &p->layers[r];
        double y = POS_T + r * rh;
        if (r % label_step == 0) {
            fprintf(out, "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\">", POS_LABELS - 6, y + rh / 2 + 4);
            put_field(out, l->name);
            fputs("</text>\n", out);
        }
        if (!l->pos_cos) {
            fprintf(out, "<rect class=\"cell\" x=\"%d\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"", POS_LABELS,
                    y, cw * cols, rh);
            put_fill(out, c_none);
            fputs("\"><title>", out);
            put_field(out, l->name);
            fputs(": no per-position cosines</title></rect>\n", out);
            continue;
        }
        for (int c = 0; c < cols; c++) {
            /* positions [a, b) of this column; the worst of them, a non-finite one worst of all */
            int a = (int)((long long)c * T / cols), b = (int)((long long)(c + 1) * T / cols);
            double v = l->pos_cos[a];
            for (int t = a + 1; t < b && isfinite(v); t++)
                if (!isfinite(l->pos_cos[t]) || l->pos_cos[t] < v)
                    v = l->pos_cos[t];
            fprintf(out, "<rect class=\"cell\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"",
                    POS_LABELS + c * cw, y, cw, rh);
            put_fill(out, heat(v, thr));
            fputs("\"><title>", out);
            put_field(out, l->name);
            if (b - a > 1)
                fprintf(out, ", positions %d-%d: lowest ", a, b - 1);
            else
                fprintf(out, ", position %d: ", a);
            put_cos(out, v);
            fputs("</title></rect>\n", out);
        }
    }
    fputs("</g>\n", out);
    /* the position axis: about eight ticks, the last position always */
    int tick = T > 8 ? (T + 7) / 8 : 1;
    for (int t = 0; t < T; t += tick) {
        double x = POS_LABELS + (t + 0.5) * cw * cols / T;
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%d</text>\n", x, axis_y + 14, t);
    }
    if ((T - 1) % tick != 0)
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%d</text>\n",
                POS_LABELS + (T - 0.5) * cw * cols / T, axis_y + 14, T - 1);
    fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">position</text>\n",
            POS_LABELS + cw * cols / 2, axis_y + 28);

    /* the legend: the failing shades (floor .. threshold), the passing ones (threshold .. 1), nan, no data */
    double ly = axis_y + 42, lx = POS_LABELS, lo = fail_floor(thr);
    for (int k = 0; k < 20; k++) {
        double v = k < 10 ? lo + (thr - lo) * k / 10.0 : thr + (1 - thr) * (k - 9) / 10.0;
        fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"12\" height=\"10\" fill=\"", lx + 12 * k, ly);
        put_fill(out, heat(v, thr));
        fputs("\"/>\n", out);
    }
    fprintf(out,
            "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">&#8804;%.4g</text>"
            "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">threshold %.4g</text>"
            "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">1</text>\n",
            lx, ly + 22, lo, lx + 120, ly + 22, thr, lx + 240, ly + 22);
    put_swatch(out, lx + 280, ly, 12, c_nan, "nan or inf");
    put_swatch(out, lx + 380, ly, 12, c_none, "no data");
    fputs("</svg>\n", out);
}

/* ---------------------------------------------------------------- the lens table */

/* A cosine cell, marked low when below the threshold (and bad when not finite). */
static void put_cos_cell(FILE *out, double v, double thr, int mark_low)
{
    const char *cls = !isfinite(v) ? " class=\"bad\"" : mark_low && v < thr ? " class=\"low\"" : "";
    fprintf(out, "<td%s>", cls);
    put_cos(out, v);
    fputs("</td>", out);
}

static void put_err_cell(FILE *out, double v)
{
    fprintf(out, "<td%s>", isfinite(v) ? "" : " class=\"bad\"");
    put_err(out, v);
    fputs("</td>", out);
}

/* rows[0..n) of p as a table of class cls, each row a <tr class="row_cls"> */
static void put_lens_table(FILE *out, const vf_prompt *p, const vf_layer *rows, int n, int first_low, const char *cls,
                           const char *row_cls)
{
    const double thr = p->threshold; /* only marks cells: a NaN threshold marks none */
    fprintf(out, "<table class=\"%s\">\n<thead><tr><th>#</th><th class=\"name\">row</th><th>cos whole</th><th>cos min</th>"
            "<th>cos p5</th><th>cos median</th><th>cos mean</th><th>max abs</th><th>mean abs</th><th>max rel</th>"
            "<th>mean rel</th><th>nan/inf</th></tr></thead>\n<tbody>\n", cls);
    for (int i = 0; i < n; i++) {
        const vf_layer *l = &rows[i];
        fprintf(out, "<tr class=\"%s\"><td>%d</td><td class=\"name\">", row_cls, i);
        put_field(out, l->name);
        if (i == first_low)
            fputs(" <b class=\"first-low\">(first low)</b>", out);
        fputs("</td>", out);
        put_cos_cell(out, l->cos_whole, thr, 0);
        put_cos_cell(out, l->cos_min, thr, 1);
        put_cos_cell(out, l->cos_p5, thr, 1);
        put_cos_cell(out, l->cos_median, thr, 1);
        put_cos_cell(out, l->cos_mean, thr, 0);
        put_err_cell(out, l->max_abs);
        put_err_cell(out, l->mean_abs);
        put_err_cell(out, l->max_rel);
        put_err_cell(out, l->mean_rel);
        fprintf(out, "<td%s>%ld</td></tr>\n", l->nan != 0 ? " class=\"bad\"" : "", l->nan);
    }
    fputs("</tbody>\n</table>\n", out);
}

static void put_lens(FILE *out, const vf_prompt *p)
{
    fputs("<h3>Per-layer cosine lens</h3>\n", out);
    if (!p->layers || p->n_layers <= 0) {
        fputs("<p class=\"no-lens none\">the candidate has no layers</p>\n", out);
        return;
    }
    fprintf(out, "<p class=\"lens-meta\">%d rows (each layer, then the final norm), %d positions; threshold ",
            p->n_layers, p->T > 0 ? p->T : 0);
    put_cos(out, p->threshold);
    fputs("; first row whose lowest per-position cosine is below it: ", out);
    put_first_low(out, p);
    fputs("</p>\n", out);
    put_cosine_plot(out, p, p->layers, p->n_layers, p->first_low, "cosine-plot", "per-layer cosine");
    put_position_plot(out, p);
    put_lens_table(out, p, p->layers, p->n_layers, p->first_low, "lens", "layer");
}

/* The ops inside the blocks: for each layer captured, a plot of its ops; one table of them all. */
static void put_ops(FILE *out, const vf_prompt *p)
{
    if (!p->ops || p->n_ops <= 0)
        return;
    fputs("<h3>The ops inside the blocks</h3>\n<p class=\"ops-meta\">each op's output against the reference's, "
          "per layer captured; first op whose lowest per-position cosine is below the threshold: ", out);
    if (p->first_low_op >= 0 && p->first_low_op < p->n_ops)
        put_field(out, p->ops[p->first_low_op].name);
    else
        fputs("none", out);
    fputs("</p>\n", out);
    for (int a = 0; a < p->n_ops;) {
        int b = a;
        while (b < p->n_ops && p->ops[b].layer == p->ops[a].layer)
            b++;
        const int first = p->first_low_op >= a && p->first_low_op < b ? p->first_low_op - a : -1;
        char label[64];
        snprintf(label, sizeof label, "layer %d: each op's cosine", p->ops[a].layer);
        fprintf(out, "<h4>layer %d</h4>\n", p->ops[a].layer);
        put_cosine_plot(out, p, p->ops + a, b - a, first, "ops-plot", label);
        a = b;
    }
    put_lens_table(out, p, p->ops, p->n_ops, p->first_low_op, "ops", "op");
}

/* ---------------------------------------------------------------- one prompt, the page */

static void put_prompt(FILE *out, const vf_prompt *p, int i)
{
    fputs("<section class=\"prompt\" id=\"", out);
    put_id(out, p, i);
    fputs("\">\n<h2>", out);
    put_field(out, p->name);
    fprintf(out, "</h2>\n<p class=\"prompt-meta\">%d prompt tokens</p>\n", p->n_tokens);
    if (p->text) {
        fputs("<pre class=\"prompt-text\">", out);
        put_str(out, p->text);
        fputs("</pre>\n", out);
    } else {
        fputs("<p class=\"prompt-text none\">given as token ids</p>\n", out);
    }
    put_rules(out, p);
    put_runs(out, p);
    put_lens(out, p);
    put_ops(out, p);
    fputs("</section>\n", out);
}

static void put_page(FILE *out, const vf_report *r)
{
    put_head(out, r);
    put_header(out, r);
    for (int i = 0; r->prompts && i < r->n_prompts; i++)
        put_prompt(out, &r->prompts[i], i);
    fputs("</body>\n</html>\n", out);
}

int vf_write_html(const vf_report *r, const char *path, gm_status *st)
{
    return vf_write_report(r, path, put_page, st); /* one atomic write: a reader never sees half a page */
}
