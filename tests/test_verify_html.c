/*
** The page of `phase0 verify` (phase0/verify_html.c) on a report built by
** hand: two prompts, one whose gate passed with a lens of four rows (a NaN
** among its numbers and positions), one whose gate failed at step 5, without
** layers; hostile text in every string the page shows. The checks read the
** markup contract written at the top of verify_html.c, and Python's
** html.parser checks that the elements balance.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gm/utf8.h"
#include "util.h"
#include "verify.h"

enum { T = 6, ROWS = 4, STEPS = 8, DIVERGE = 5 };

static double pos_cos[ROWS][T];
static int32_t ids0[STEPS], ids1_ref[STEPS], ids1_cand[STEPS];
static vf_layer layers[ROWS];
static vf_layer ops[4]; /* layers 0 and 1, attn_norm and swiglu each; layer 1's swiglu the first low */
static vf_prompt prompts[2];
static vf_report report;
static char *dir, *page;
static size_t page_len;

#define HOSTILE "<script>alert(1)</script> \"&' caf\xc3\xa9"
#define HOSTILE_ESCAPED "&lt;script&gt;alert(1)&lt;/script&gt; &quot;&amp;&#39; caf\xc3\xa9"

static void build(void)
{
    memset(&report, 0, sizeof report);
    memset(prompts, 0, sizeof prompts);
    memset(layers, 0, sizeof layers);
    snprintf(report.model, sizeof report.model, "tiny<b>model</b>");
    snprintf(report.ref_commit, sizeof report.ref_commit, "0123abcd");
    snprintf(report.ref_kernels, sizeof report.ref_kernels, "avx2");
    snprintf(report.cand_label, sizeof report.cand_label, "npu <iframe onload=alert(2)>");
    report.head_dim = 64;
    report.n_prompts = 2;
    report.prompts = prompts;
    report.verdict = VF_FAIL;

    for (int i = 0; i < STEPS; i++) {
        ids0[i] = 100 + i;
        ids1_ref[i] = 200 + i;
        ids1_cand[i] = i < DIVERGE ? 200 + i : 900 + i;
    }

    /* p000: the gate passed; the lens has a NaN in layer 1 and layer 2 is the first below 0.99 */
    vf_prompt *p = &prompts[0];
    snprintf(p->name, sizeof p->name, "p000");
    p->text = HOSTILE;
    p->n_tokens = 12;
    p->n_steps = STEPS;
    p->ref_ids = ids0;
    p->cand_ids = ids0;
    p->ref_text = "the same text";
    p->cand_text = "the same text";
    p->walk.diverge = -1;
    p->rule[VF_RULE_TOKENS].verdict = VF_OK;
    snprintf(p->rule[VF_RULE_TOKENS].why, sizeof p->rule[0].why, "all %d steps agree", STEPS);
    p->T = T;
    p->n_layers = ROWS;
    p->layers = layers;
    p->first_low = 2;
    p->threshold = 0.99;
    p->rule[VF_RULE_BLOCK].verdict = VF_OK;
    snprintf(p->rule[VF_RULE_BLOCK].why, sizeof p->rule[0].why, "layer 0 min cosine 0.9995 >= 0.99");
    snprintf(p->checked, sizeof p->checked, "tokens, layers");
    snprintf(p->unchecked, sizeof p->unchecked, "candidate top-k");
    for (int r = 0; r < ROWS; r++) {
        vf_layer *l = &layers[r];
        if (r < ROWS - 1)
            snprintf(l->name, sizeof l->name, "layer %d", r);
        else
            snprintf(l->name, sizeof l->name, "final_norm");
        for (int t = 0; t < T; t++)
            pos_cos[r][t] = r == 2 ? 0.95 + 0.005 * t : 0.9999 - 0.0001 * t;
        l->pos_cos = pos_cos[r];
        l->cos_whole = 0.9998;
        l->cos_min = r == 2 ? 0.95 : 0.9994;
        l->cos_p5 = r == 2 ? 0.951 : 0.9995;
        l->cos_median = r == 2 ? 0.96 : 0.99975;
        l->cos_mean = l->cos_median;
        l->max_abs = 0.125;
        l->mean_abs = 1.5e-3;
        l->max_rel = 2.0;
        l->mean_rel = 0.01;
    }
    layers[1].cos_p5 = NAN;
    layers[1].max_rel = NAN;
    layers[1].nan = 3;
    pos_cos[1][2] = NAN;
    for (int k = 0; k < 4; k++) {
        ops[k] = layers[0];
        ops[k].layer = k / 2;
        ops[k].op = k % 2 ? RT_OP_SWIGLU : RT_OP_ATTN_NORM;
        snprintf(ops[k].name, sizeof ops[k].name, "layer %d %s", k / 2, k % 2 ? "swiglu" : "attn_norm");
    }
    ops[3].cos_min = 0.5;
    p->ops = ops;
    p->n_ops = 4;
    p->first_low_op = 3;

    /* p001: the gate failed at step 5; no layers; hostile why strings and a hostile, non-UTF-8 decoded text */
    p = &prompts[1];
    snprintf(p->name, sizeof p->name, "p001<i>");
    p->text = "second";
    p->n_tokens = 3;
    p->n_steps = STEPS;
    p->ref_ids = ids1_ref;
    p->cand_ids = ids1_cand;
    p->ref_text = "abc \xc3\xa9 x";
    p->cand_text = "abc \xc3\xa9 y<b>\x01\x7f\xff";
    p->walk = (vf_walk){.steps = STEPS, .diverge = DIVERGE, .ref_id = 200 + DIVERGE, .cand_id = 900 + DIVERGE,
                        .ref_top = {200 + DIVERGE, 1, 2, 3, 4}, .cand_top = {900 + DIVERGE, 6, 7, 8, 9},
                        .has_cand_top = 1, .cand_rank_in_ref = 0, .ref_rank_in_cand = 0};
    p->ref_chosen_text = "<i>ref</i>";
    p->prefix_text = "abc \xc3\xa9 ";
    p->n_warnings = 2;
    snprintf(p->warning, sizeof p->warning, "step 3: the candidate chose <b>7</b>, not the first");
    p->rule[VF_RULE_TOKENS].verdict = VF_FAIL;
    snprintf(p->rule[VF_RULE_TOKENS].why, sizeof p->rule[0].why, "step 5: </span><script>x</script> not in the top-5");
    p->first_low = -1;
    p->threshold = 0.99;
    p->rule[VF_RULE_BLOCK].verdict = VF_UNCHECKED;
    snprintf(p->rule[VF_RULE_BLOCK].why, sizeof p->rule[0].why, "no layers in the candidate");
    snprintf(p->checked, sizeof p->checked, "tokens");
    snprintf(p->unchecked, sizeof p->unchecked, "layers & top-k");
}

static void setup(void)
{
    char path[4200];
    gm_status st = {0};
    build();
    dir = tu_tmpdir();
    snprintf(path, sizeof path, "%s/report.html", dir);
    cr_assert_eq(vf_write_html(&report, path, &st), 0, "%s", st.msg);
    page = tu_read(path, &page_len);
    cr_assert_not_null(page);
}

static void teardown(void)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
    free(dir);
    free(page);
}

TestSuite(verify_html, .init = setup, .fini = teardown, .timeout = 60);

/* Occurrences of needle in s[0..n), case-insensitive when ci. */
static int count_n(const char *s, size_t n, const char *needle, int ci)
{
    size_t k = strlen(needle);
    int c = 0;
    for (size_t i = 0; i + k <= n; i++)
        c += ci ? strncasecmp(s + i, needle, k) == 0 : strncmp(s + i, needle, k) == 0;
    return c;
}

static int count(const char *needle)
{
    return count_n(page, page_len, needle, 0);
}

/* The text of the section of the prompt with this id, up to its </section> (malloc'd). */
static char *section(const char *id)
{
    char open[128];
    snprintf(open, sizeof open, "<section class=\"prompt\" id=\"%s\">", id);
    const char *b = strstr(page, open);
    cr_assert_not_null(b, "no %s", open);
    const char *e = strstr(b, "</section>");
    cr_assert_not_null(e);
    return strndup(b, (size_t)(e - b));
}

Test(verify_html, escapes_hostile_text)
{
    cr_expect_eq(count(HOSTILE_ESCAPED), 1, "the prompt's text, escaped");
    cr_expect_eq(count("&lt;/span&gt;&lt;script&gt;x&lt;/script&gt;"), 1, "the gate's why, escaped");
    cr_expect_eq(count("npu &lt;iframe onload=alert(2)&gt;"), 1);
    cr_expect_eq(count("tiny&lt;b&gt;model&lt;/b&gt;"), 3, "title, heading, meta table");
    cr_expect_eq(count("layers &amp; top-k"), 1);
    cr_expect_eq(count_n(page, page_len, "<script", 1), 0, "no raw script tag anywhere");
    cr_expect_eq(count_n(page, page_len, "<iframe", 1), 0);
    cr_expect_eq(count("<i>"), 0);
    cr_expect_eq(count("<b>model"), 0);
    /* the name also makes the id: bytes outside [A-Za-z0-9_.-] as '_' */
    cr_expect_eq(count("<section class=\"prompt\" id=\"prompt-p001_i_\">"), 1);
    cr_expect_eq(count("<h2>p001&lt;i&gt;</h2>"), 1);
}

Test(verify_html, fetches_nothing)
{
    cr_expect_eq(count_n(page, page_len, "http://", 1), 0);
    cr_expect_eq(count_n(page, page_len, "https://", 1), 0);
    cr_expect_eq(count_n(page, page_len, "src=", 1), 0);
    cr_expect_eq(count_n(page, page_len, "url(", 1), 0);
    cr_expect_eq(count_n(page, page_len, "@import", 1), 0);
    cr_expect_eq(count_n(page, page_len, "<link", 1), 0);
    cr_expect_eq(count_n(page, page_len, "<img", 1), 0);
    cr_expect_eq(count_n(page, page_len, "xmlns", 1), 0, "inline SVG in HTML5 needs no namespace");
    /* the one "http" is the policy that forbids scripts and fetches */
    cr_expect_eq(count_n(page, page_len, "http", 1), 1);
    cr_expect_eq(count("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                       "style-src 'unsafe-inline'\">"),
                 1);
}

Test(verify_html, well_formed_utf8)
{
    cr_expect_eq(gm_utf8_check(page, page_len), page_len, "ill-formed UTF-8 at byte %zu",
                 gm_utf8_check(page, page_len));
    /* the candidate's \x01 and \x7f as their Control Pictures, its \xff as U+FFFD */
    cr_expect_eq(count("y&lt;b&gt;\xe2\x90\x81\xe2\x90\xa1\xef\xbf\xbd"), 1);
}

Test(verify_html, verdicts)
{
    cr_expect_eq(count("<p class=\"overall\"><span class=\"verdict fail\">FAIL</span>"), 1);
    char *s0 = section("prompt-p000"), *s1 = section("prompt-p001_i_");
    cr_expect_not_null(strstr(s0, "<p class=\"rule token_gate\"><span class=\"verdict ok\">OK</span>"));
    cr_expect_not_null(strstr(s0, "<p class=\"rule block_gate\"><span class=\"verdict ok\">OK</span>"));
    cr_expect_not_null(strstr(s1, "<p class=\"rule token_gate\"><span class=\"verdict fail\">FAIL</span>"));
    cr_expect_not_null(strstr(s1, "<p class=\"rule block_gate\"><span class=\"verdict unchecked\">not checked</span>"));
    cr_expect_not_null(strstr(s1, "<p class=\"not-checked\"><b>not checked:</b> layers &amp; top-k</p>"));
    cr_expect_eq(count("<p class=\"counts\">"), 1, "each rule's counts");
    /* the summary: one row per prompt, linking to its section */
    cr_expect_eq(count("<tr class=\"summary-row\">"), 2);
    cr_expect_eq(count("<a href=\"#prompt-p001_i_\">"), 1);
    free(s0);
    free(s1);
}

Test(verify_html, divergence)
{
    char *s0 = section("prompt-p000"), *s1 = section("prompt-p001_i_");
    cr_expect_null(strstr(s0, "diverged"), "p000's runs agree");
    /* steps 5..7 marked in both runs, step 5 as the first */
    cr_expect_eq(count_n(s1, strlen(s1), "<span class=\"tok diverged", 0), 2 * (STEPS - DIVERGE));
    cr_expect_eq(count_n(s1, strlen(s1), "<span class=\"tok diverged first\" title=\"step 5\">", 0), 2);
    cr_expect_eq(count_n(s1, strlen(s1), "<span class=\"tok\" title=\"step 4\">204</span>", 0), 2);
    cr_expect_not_null(strstr(s1, "title=\"step 5\">905</span>"), "the candidate's id at step 5");
    /* the texts: marked from their common prefix "abc é " on */
    cr_expect_not_null(strstr(s1, "<pre class=\"text\">abc \xc3\xa9 <mark class=\"diverged\">x</mark></pre>"));
    cr_expect_not_null(strstr(s1, "<pre class=\"text\">abc \xc3\xa9 <mark class=\"diverged\">y&lt;b&gt;"));
    /* at the divergence: each side's choice, its rank in the other's top-5, its own top-5; the agreed prefix */
    cr_expect_null(strstr(s0, "class=\"divergence\""), "p000 has no divergence");
    cr_expect_not_null(strstr(s1, "<tr class=\"ref\"><td class=\"name\">reference</td><td class=\"name\">205 "
                                  "<q>&lt;i&gt;ref&lt;/i&gt;</q></td><td class=\"low\">not in it</td>"));
    cr_expect_not_null(strstr(s1, "<tr class=\"cand\"><td class=\"name\">candidate</td><td class=\"name\">905</td>"),
                       "no text without a decoded token");
    cr_expect_not_null(strstr(s1, "<p class=\"prefix\">agreed before it (steps 0-4): <q>abc \xc3\xa9 </q></p>"));
    cr_expect_not_null(strstr(s1, "<p class=\"warning\"><b>warning:</b> step 3: the candidate chose &lt;b&gt;7&lt;/b&gt;"
                                  ", not the first (and at other steps too)</p>"));
    free(s0);
    free(s1);
}

/* Each points="..." attribute holds only numbers: no nan or inf leaks into the SVG. */
static void expect_finite_points(void)
{
    int n = 0;
    for (const char *s = strstr(page, "points=\""); s; s = strstr(s, "points=\"")) {
        s += strlen("points=\"");
        size_t k = strcspn(s, "\"");
        cr_expect_eq(strspn(s, "0123456789., -"), k, "points=\"%.*s\"", (int)k, s);
        cr_expect_gt(k, 0);
        n++;
    }
    cr_expect_eq(n, 9, "the lens's three series and each layer of ops' three");
}

Test(verify_html, ops)
{
    cr_expect_eq(count("<svg class=\"ops-plot\""), 2, "one plot for each layer of ops");
    cr_expect_eq(count("<tr class=\"op\">"), 4);
    cr_expect_eq(count("is below the threshold: layer 1 swiglu</p>"), 1);
    cr_expect_eq(count("<h4>layer 1</h4>"), 1);
}

Test(verify_html, lens)
{
    /* the lens is what comes before the ops (Test ops) */
    const char *ops = strstr(page, "<h3>The ops inside the blocks</h3>");
    cr_assert_not_null(ops);
    const size_t cut = (size_t)(ops - page);
#define count(needle) count_n(page, cut, (needle), 0)
    cr_expect_eq(count("<tr class=\"layer\">"), ROWS);
    cr_expect_eq(count("<svg class=\"cosine-plot\""), 1);
    cr_expect_eq(count("<svg class=\"position-plot\""), 1);
    cr_expect_eq(count("<table class=\"lens\">"), 1);
    cr_expect_eq(count("<polyline class=\"series-min\""), 1);
    cr_expect_eq(count("<polyline class=\"series-p5\""), 1);
    cr_expect_eq(count("<polyline class=\"series-median\""), 1);
    cr_expect_eq(count("<line class=\"threshold\""), 1);
    cr_expect_eq(count("<line class=\"first-low\""), 1);
    cr_expect_eq(count("<rect class=\"cell\""), ROWS * T);
    cr_expect_eq(count_n(page, page_len, "<p class=\"no-lens none\">", 0), 1, "p001 has no layers");
    expect_finite_points();
    /* the NaNs: printed as nan in the table, black in the per-position plot */
    cr_expect_eq(count("<td class=\"bad\">nan</td>"), 2, "layer 1's cos_p5 and max_rel");
    cr_expect_eq(count("<td class=\"bad\">3</td>"), 1, "layer 1's NaN count");
    cr_expect_eq(count("fill=\"#000000\"><title>layer 1, position 2: nan</title>"), 1);
    cr_expect_eq(count("<td>0.999400</td>"), 3, "cos_min, %.6f");
    cr_expect_eq(count("<td class=\"low\">0.950000</td>"), 1, "layer 2's cos_min, below 0.99");
    cr_expect_eq(count("<td>0.0015</td>"), ROWS, "mean_abs, %.3g");
    cr_expect_eq(count("final_norm <b class=\"first-low\">"), 0);
    cr_expect_eq(count("layer 2 <b class=\"first-low\">(first low)</b>"), 1);
#undef count
}

Test(verify_html, elements_balance)
{
    if (tu_run("python3 -c 'import html.parser'", NULL, NULL) != 0)
        cr_skip_test("no python3 with html.parser");
    static const char script[] =
        "import sys\n"
        "from html.parser import HTMLParser\n"
        "VOID = {'area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr'}\n"
        "class Check(HTMLParser):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stack, self.errors, self.opened = [], [], {}\n"
        "    def handle_starttag(self, tag, attrs):\n"
        "        self.opened[tag] = self.opened.get(tag, 0) + 1\n"
        "        if tag not in VOID:\n"
        "            self.stack.append((tag, self.getpos()[0]))\n"
        "    def handle_startendtag(self, tag, attrs):\n"
        "        self.opened[tag] = self.opened.get(tag, 0) + 1\n"
        "    def handle_endtag(self, tag):\n"
        "        if self.stack and self.stack[-1][0] == tag:\n"
        "            self.stack.pop()\n"
        "        else:\n"
        "            top = self.stack[-1][0] if self.stack else 'nothing'\n"
        "            self.errors.append('line %d: </%s> where <%s> is open' % (self.getpos()[0], tag, top))\n"
        "c = Check()\n"
        "c.feed(open(sys.argv[1], encoding='utf-8').read())\n"
        "c.close()\n"
        "c.errors += ['line %d: <%s> never closed' % (line, tag) for tag, line in c.stack]\n"
        "for want in sys.argv[2:]:\n"
        "    tag, n = want.split('=')\n"
        "    if c.opened.get(tag, 0) != int(n):\n"
        "        c.errors.append('%d <%s>, expected %s' % (c.opened.get(tag, 0), tag, n))\n"
        "print('\\n'.join(c.errors))\n"
        "sys.exit(1 if c.errors else 0)\n";
    char path[4200], cmd[9000], *out = NULL, *err = NULL;
    snprintf(path, sizeof path, "%s/check.py", dir);
    tu_write(path, script, sizeof script - 1);
    /* two sections; two plots for the one prompt with layers and one for each layer of its ops; the meta, summary,
       lens, ops and divergence tables */
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s/report.html' section=2 svg=4 table=5 polyline=9 html=1 body=1", path,
             dir);
    int rc = tu_run(cmd, &out, &err);
    cr_expect_eq(rc, 0, "%s%s", out ? out : "", err ? err : "");
    free(out);
    free(err);
}

Test(verify_html, empty_report)
{
    char path[4200];
    gm_status st = {0};
    vf_report empty = {.verdict = VF_OK};
    snprintf(path, sizeof path, "%s/empty.html", dir);
    cr_assert_eq(vf_write_html(&empty, path, &st), 0, "%s", st.msg);
    char *s = tu_read(path, NULL);
    cr_assert_not_null(s);
    cr_expect_not_null(strstr(s, "<p class=\"overall\"><span class=\"verdict ok\">OK</span>"));
    cr_expect_null(strstr(s, "<section"));
    cr_expect_not_null(strstr(s, "</html>\n"));
    free(s);
}

Test(verify_html, unwritable_path)
{
    char path[4200];
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/no/such/folder/report.html", dir);
    cr_expect_eq(vf_write_html(&report, path, &st), GM_EIO);
    cr_expect_eq(st.code, GM_EIO);
    cr_expect_not_null(strstr(st.msg, "no/such/folder"), "%s", st.msg);
    cr_expect_null(strchr(st.msg, '\n'), "one line: %s", st.msg);
    cr_expect_eq(tu_exists(path), 0);
}
