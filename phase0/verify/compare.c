/*
** phase0 verify's comparison: for each prompt of the reference, what each
** side holds for it (a bundle's files, or a gate file's member for the
** candidate) is read into a `side` (NULL where a file is absent), measured
** (the token walk, the lens) into a vf_prompt, and judged by every rule of
** vf_rules[] (rules.c). What the candidate did not allow to check is said,
** not failed.
*/
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gm/tokenizer.h"

/* One bundle's arrays for one prompt; NULL where the bundle lacks the file. */
typedef struct side {
    int32_t *tokens;
    int64_t n_tokens;
    int32_t *ids;       /* [n_ids] chosen ids */
    int64_t n_ids;
    int32_t *rows;      /* [n_rows][VF_GATE_K] each step's top-k, in the rule's order */
    int64_t n_rows;
    float *layers;      /* [L][T][H] */
    float *final_norm;  /* [T][H] */
    float *last;        /* [V] the last step's logits */
} side;

static void side_free(side *s)
{
    free(s->tokens);
    free(s->ids);
    free(s->rows);
    free(s->layers);
    free(s->final_norm);
    free(s->last);
    memset(s, 0, sizeof *s);
}

static char *decode_text(const gm_tokenizer *t, const int32_t *ids, int n)
{
    char *text = NULL;
    size_t len = 0;
    gm_status ignore = {0};
    if (!t || gm_tokenizer_decode(t, ids, (size_t)n, 0, &text, &len, &ignore))
        return NULL;
    return text;
}

static void add_note(char *buf, size_t size, const char *what)
{
    size_t k = strlen(buf);
    snprintf(buf + k, size - k, "%s%s", k ? "; " : "", what);
}

/* ---------------------------------------------------------------------- */
/* a bundle's side of one prompt */

/* dir/name/file's n ids, each a token id of a vocabulary of V; else one line naming the first that is not. */
static int ids_in_vocab(const char *dir, const char *name, const char *file, const int32_t *ids, int64_t n, int64_t V,
                        gm_status *st)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return gm_fail(st, GM_EFORMAT, "%s/%s/%s: expected token ids in [0, %lld) (vocab_size), found %d at "
                           "element %lld", dir, name, file, (long long)V, ids[i], (long long)i);
    return 0;
}

/*
** The reference's dir/name/file, n values, finite: a NaN or an infinity there is a broken capture,
** not a result to measure a candidate against (the candidate's are counted by the lens, and fail it).
*/
/* The index of the first NaN or infinity of x[0..n) (x NULL: none), -1 when there is none; its name in *what. */
static int64_t first_nonfinite(const float *x, int64_t n, const char **what)
{
    for (int64_t i = 0; x && i < n; i++)
        if (!isfinite(x[i])) {
            *what = isnan(x[i]) ? "nan" : x[i] > 0 ? "inf" : "-inf";
            return i;
        }
    return -1;
}

static int ref_finite(const char *dir, const char *name, const char *file, const float *x, int64_t n, gm_status *st)
{
    const char *what;
    const int64_t i = first_nonfinite(x, n, &what);
    if (i >= 0)
        return gm_fail(st, GM_EFORMAT, "%s/%s/%s: expected finite values in the reference, found %s at element %lld",
                       dir, name, file, what, (long long)i);
    return 0;
}

/*
** dir/name's ids.npy and topk_ids.npy: s->ids, and s->rows (the first
** VF_GATE_K ids of each row). When topk_logits.npy is beside them, each row is
** first put in the rule's order (logit descending, the smaller id first on
** ties), whatever order the file has: a tie at the boundary decides by id.
** Every id is one of the V of the vocabulary, and a row holds different ids;
** the reference's logits are finite.
*/
static int load_choices(const char *dir, const char *name, int64_t V, int is_ref, side *s, gm_status *st)
{
    int64_t ish[1] = {-1}, tsh[2] = {-1, -1};
    if (!(s->ids = vf_load(dir, name, "ids.npy", GM_NPY_I4, 1, ish, st)) && st->code)
        return st->code;
    s->n_ids = s->ids ? ish[0] : 0;
    if (ids_in_vocab(dir, name, "ids.npy", s->ids, s->n_ids, V, st))
        return st->code;
    tsh[0] = s->ids ? ish[0] : -1;
    int32_t *top = vf_load(dir, name, "topk_ids.npy", GM_NPY_I4, 2, tsh, st);
    if (!top)
        return st->code;
    if (tsh[1] < VF_GATE_K) {
        free(top);
        return gm_fail(st, GM_EFORMAT, "%s/%s/topk_ids.npy: shape: expected at least %d ids a step, found %lld", dir,
                       name, VF_GATE_K, (long long)tsh[1]);
    }
    const size_t w = (size_t)tsh[1];
    if (ids_in_vocab(dir, name, "topk_ids.npy", top, tsh[0] * tsh[1], V, st)) {
        free(top);
        return st->code;
    }
    for (int64_t r = 0; r < tsh[0]; r++) {
        const int rep = vf_first_repeat(top + r * w, (int)w);
        if (rep >= 0) {
            gm_fail(st, GM_EFORMAT, "%s/%s/topk_ids.npy: row %lld: expected %zu different ids, found %d twice", dir,
                    name, (long long)r, w, top[r * w + rep]);
            free(top);
            return st->code;
        }
    }
    int64_t lsh[2] = {tsh[0], tsh[1]};
    float *lg = vf_load(dir, name, "topk_logits.npy", GM_NPY_F4, 2, lsh, st);
    if (!st->code && is_ref)
        ref_finite(dir, name, "topk_logits.npy", lg, tsh[0] * tsh[1], st);
    const char *what;
    const int64_t bad = !st->code && !is_ref ? first_nonfinite(lg, tsh[0] * tsh[1], &what) : -1;
    if (bad >= 0) /* the candidate's rows then have no order */
        gm_fail(st, GM_EFORMAT, "%s/%s/topk_logits.npy: expected finite logits, found %s at step %lld, column %lld: "
                "the candidate's run overflowed there (its top-k cannot be put in order)", dir, name, what,
                (long long)(bad / (int64_t)w), (long long)(bad % (int64_t)w));
    s->n_rows = tsh[0];
    s->rows = malloc(sizeof *s->rows * (size_t)(s->n_rows ? s->n_rows : 1) * VF_GATE_K);
    if (!st->code && !s->rows)
        gm_fail(st, GM_ENOMEM, "out of memory");
    for (int64_t r = 0; !st->code && r < s->n_rows; r++) {
        if (lg)
            vf_rule_order(top + r * w, lg + r * w, (int)w);
        memcpy(s->rows + r * VF_GATE_K, top + r * w, sizeof *s->rows * VF_GATE_K);
    }
    free(lg);
    free(top);
    return st->code;
}

/*
** dir/name's layers.npy [L][T][H] and final_norm.npy [T][H], each when there; the reference's
** (is_ref) required, as capture writes both, and finite.
*/
static int load_layers(const char *dir, const char *name, int64_t L, int64_t T, int64_t H, int is_ref, side *s,
                       gm_status *st)
{
    int64_t lsh[3] = {L, T, H}, nsh[2] = {T, H};
    if (!(s->layers = vf_load(dir, name, "layers.npy", GM_NPY_F4, 3, lsh, st)) && st->code)
        return st->code;
    s->final_norm = vf_load(dir, name, "final_norm.npy", GM_NPY_F4, 2, nsh, st);
    if (st->code || !is_ref)
        return st->code;
    if (!s->layers || !s->final_norm)
        return gm_fail(st, GM_EFORMAT, "%s/%s/%s: missing from the reference (capture writes it)", dir, name,
                       s->layers ? "final_norm.npy" : "layers.npy");
    if (ref_finite(dir, name, "layers.npy", s->layers, L * T * H, st) ||
        ref_finite(dir, name, "final_norm.npy", s->final_norm, T * H, st))
        return st->code;
    return 0;
}

/* dir/name's last_logits.npy [V], every logit finite; when there (required: the reference's, which capture writes). */
static int load_last_logits(const char *dir, const char *name, int64_t V, int required, side *s, gm_status *st)
{
    int64_t sh[1] = {V};
    if (!(s->last = vf_load(dir, name, "last_logits.npy", GM_NPY_F4, 1, sh, st))) {
        if (!st->code && required)
            gm_fail(st, GM_EFORMAT, "%s/%s/last_logits.npy: missing from the reference", dir, name);
        return st->code;
    }
    const char *what;
    const int64_t v = first_nonfinite(s->last, V, &what);
    if (v >= 0)
        return gm_fail(st, GM_EFORMAT, "%s/%s/last_logits.npy: expected finite logits, found %s at [%lld]", dir, name,
                       what, (long long)v);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* the measurements */

/*
** A side's last step held to its last_logits.npy: their top-k in the rule's
** order is that step's top-k row (without rows, their first id is its chosen
** id); else a warning, as for a choice that is not the first of its own row.
*/
static void check_last_step(const side *s, const char *who, int64_t V, vf_prompt *p)
{
    const int64_t last = (s->rows ? s->n_rows : s->n_ids) - 1;
    if (!s->last || last < 0 || V < VF_GATE_K)
        return;
    int32_t top[VF_GATE_K];
    vf_top_k(s->last, (int)V, VF_GATE_K, top, NULL);
    const int32_t *row = s->rows ? s->rows + last * VF_GATE_K : s->ids + last;
    if (memcmp(top, row, sizeof *top * (s->rows ? VF_GATE_K : 1)) == 0 || p->n_warnings++ > 0)
        return;
    if (s->rows)
        snprintf(p->warning, sizeof p->warning, "step %lld: the %s's last_logits.npy ranks (%d, %d, %d, %d, %d) "
                 "first, its top-%d there is (%d, %d, %d, %d, %d): its choice and its logits disagree",
                 (long long)last, who, top[0], top[1], top[2], top[3], top[4], VF_GATE_K, row[0], row[1], row[2],
                 row[3], row[4]);
    else
        snprintf(p->warning, sizeof p->warning, "step %lld: the %s's last_logits.npy ranks %d first, it chose %d: "
                 "its choice and its logits disagree", (long long)last, who, top[0], row[0]);
}

/* The token walk: ref and cand's choices over the steps both hold. */
static int measure_tokens(const side *ref, const side *cand, const gm_tokenizer *tok, vf_prompt *p, gm_status *st)
{
    if (!cand->ids && !cand->rows) {
        add_note(p->unchecked, sizeof p->unchecked, "the token gate (no ids.npy, no topk_ids.npy)");
        return 0;
    }
    const int from_top = !cand->ids; /* a top-k only candidate: each row's first id (in the rule's order) */
    const int64_t have = cand->ids ? cand->n_ids : cand->n_rows;
    int steps = (int)(have < ref->n_ids ? have : ref->n_ids);
    steps = steps < VF_GATE_N_TOKENS ? steps : VF_GATE_N_TOKENS;
    p->n_steps = steps;
    p->ref_ids = malloc(sizeof *p->ref_ids * (size_t)(steps ? steps : 1));
    p->cand_ids = malloc(sizeof *p->cand_ids * (size_t)(steps ? steps : 1));
    if (!p->ref_ids || !p->cand_ids)
        return gm_fail(st, GM_ENOMEM, "out of memory");
    memcpy(p->ref_ids, ref->ids, sizeof *p->ref_ids * (size_t)steps);
    for (int s = 0; s < steps; s++)
        p->cand_ids[s] = from_top ? cand->rows[(size_t)s * VF_GATE_K] : cand->ids[s];
    vf_walk_tokens(p->ref_ids, ref->rows, p->cand_ids, cand->rows, steps, VF_GATE_K, &p->walk);
    /* a side whose chosen id is not the first of its own top-k row: its choice and its logits disagree */
    const side *both[2] = {ref, from_top ? NULL : cand};
    for (int k = 0; k < 2; k++)
        for (int s = 0; both[k] && both[k]->rows && s < steps && s < both[k]->n_rows; s++) {
            const int32_t *row = both[k]->rows + (size_t)s * VF_GATE_K;
            if (both[k]->ids[s] == row[0])
                continue;
            if (p->n_warnings++ == 0)
                snprintf(p->warning, sizeof p->warning, "step %d: the %s chose %d, not the first id of its own top-%d "
                         "(%d, %d, %d, %d, %d): its choice and its logits disagree", s, k ? "candidate" : "reference",
                         both[k]->ids[s], VF_GATE_K, row[0], row[1], row[2], row[3], row[4]);
        }
    const vf_walk *w = &p->walk;
    if (w->diverge >= 0 && tok) { /* what the report shows at the divergence, as text */
        p->ref_chosen_text = decode_text(tok, &w->ref_id, 1);
        p->cand_chosen_text = decode_text(tok, &w->cand_id, 1);
        for (int k = 0; k < VF_GATE_K; k++) {
            p->ref_top_text[k] = decode_text(tok, &w->ref_top[k], 1);
            p->cand_top_text[k] = w->has_cand_top ? decode_text(tok, &w->cand_top[k], 1) : NULL;
        }
        p->prefix_text = w->diverge > 0 ? decode_text(tok, p->cand_ids, w->diverge) : strdup("");
    }
    char label[96];
    snprintf(label, sizeof label, "the token gate (%s)",
             from_top ? "top-k only: each step's first id as its choice" : cand->rows ? "ids, top-k" : "ids only");
    add_note(p->checked, sizeof p->checked, label);
    p->ref_text = decode_text(tok, p->ref_ids, steps);
    p->cand_text = decode_text(tok, p->cand_ids, steps);
    return 0;
}

/* The lens: each layer and the final norm, when both sides hold them. */
static int measure_lens(const side *ref, const side *cand, int L, int T, int H, vf_prompt *p, gm_status *st)
{
    if (!ref->layers || !cand->layers) {
        add_note(p->unchecked, sizeof p->unchecked, "the lens (no layers.npy)");
        return 0;
    }
    const int norm = ref->final_norm && cand->final_norm;
    p->T = T;
    p->n_layers = L + norm;
    if (!(p->layers = calloc((size_t)p->n_layers, sizeof *p->layers)))
        return gm_fail(st, GM_ENOMEM, "out of memory");
    for (int l = 0; l < p->n_layers; l++) {
        vf_layer *x = &p->layers[l];
        const size_t at = (size_t)l * T * H;
        const float *a = l < L ? ref->layers + at : ref->final_norm, *b = l < L ? cand->layers + at : cand->final_norm;
        if (l < L)
            snprintf(x->name, sizeof x->name, "layer %d", l);
        else
            snprintf(x->name, sizeof x->name, "final_norm");
        x->layer = l < L ? l : -1;
        x->op = -1;
        if (vf_lens(a, b, T, H, x, st))
            return st->code;
        if (p->first_low < 0 && (x->cos_min < p->threshold || x->nan))
            p->first_low = l;
    }
    add_note(p->checked, sizeof p->checked, norm ? "the lens (layers, final_norm)" : "the lens (layers)");
    add_note(p->checked, sizeof p->checked, "the Phase 2 block gate");
    if (!norm)
        add_note(p->unchecked, sizeof p->unchecked, "final_norm (no final_norm.npy)");
    return 0;
}

/*
** The ops lens: each op of each layer the reference captured whose file the
** candidate holds too, [T][width] on both sides; the first below the
** threshold named. Reference files are required; the candidate's are what it has.
*/
static int measure_ops(const char *ref, const char *cand, const vf_manifest *rm, const char *name, const char *cname,
                       int T, vf_prompt *p, gm_status *st)
{
    int wanted = 0;
    for (int i = 0; i < rm->n_op_layers; i++)
        for (int op = 0; op < RT_N_OPS; op++)
            wanted += rm->op_width[op] > 0;
    if (!wanted)
        return 0;
    if (!(p->ops = calloc((size_t)wanted, sizeof *p->ops)))
        return gm_fail(st, GM_ENOMEM, "out of memory");
    for (int i = 0; i < rm->n_op_layers; i++)
        for (int op = 0; op < RT_N_OPS; op++) {
            if (!rm->op_width[op])
                continue;
            const int l = rm->op_layers[i];
            char file[96];
            snprintf(file, sizeof file, "ops/%d/%s.npy", l, vf_ops[op].name);
            int64_t sh[2] = {T, rm->op_width[op]};
            float *a = vf_load(ref, name, file, GM_NPY_F4, 2, sh, st), *b = NULL;
            if (!a && !st->code)
                gm_fail(st, GM_EFORMAT, "%s/%s/%s: missing from the reference (its manifest lists it)", ref, name,
                        file);
            if (!st->code)
                ref_finite(ref, name, file, a, (int64_t)T * rm->op_width[op], st);
            if (!st->code)
                b = vf_load(cand, cname, file, GM_NPY_F4, 2, sh, st);
            if (a && b) {
                vf_layer *x = &p->ops[p->n_ops];
                snprintf(x->name, sizeof x->name, "layer %d %s", l, vf_ops[op].name);
                x->layer = l;
                x->op = op;
                if (vf_lens(a, b, T, rm->op_width[op], x, st) == 0) {
                    if (p->first_low_op < 0 && (x->cos_min < p->threshold || x->nan))
                        p->first_low_op = p->n_ops;
                    p->n_ops++;
                }
            }
            free(a);
            free(b);
            if (st->code)
                return st->code;
        }
    char note[128];
    snprintf(note, sizeof note, "the ops lens (%d of the reference's %d op outputs)", p->n_ops, wanted);
    if (p->n_ops)
        add_note(p->checked, sizeof p->checked, note);
    else
        add_note(p->unchecked, sizeof p->unchecked, "the ops lens (no ops/ files)");
    return 0;
}

/* ---------------------------------------------------------------------- */

/* dup of n ids (NULL when out of memory) */
static int32_t *copy_ids(const int32_t *ids, size_t n)
{
    int32_t *c = malloc(sizeof *c * (n ? n : 1));
    if (c)
        memcpy(c, ids, sizeof *c * n);
    return c;
}

/* The candidate's side from prompt i of a gate file: its steps must be the reference's (at most the gate's). */
static int gate_side(const char *cand, const vf_gate_prompt *g, int i, const side *ref, side *c, gm_status *st)
{
    const int64_t want = ref->n_ids < VF_GATE_N_TOKENS ? ref->n_ids : VF_GATE_N_TOKENS;
    if (g->steps != want)
        return gm_fail(st, GM_EFORMAT, "%s: \"%d\".chosen: expected %lld steps (the reference's, at most the gate's "
                       "%d), found %d", cand, i, (long long)want, VF_GATE_N_TOKENS, g->steps);
    c->n_ids = c->n_rows = g->steps;
    if (!(c->ids = copy_ids(g->chosen, (size_t)g->steps)) ||
        !(c->rows = copy_ids(g->topk, (size_t)g->steps * VF_GATE_K)))
        return gm_fail(st, GM_ENOMEM, "out of memory");
    return 0;
}

/* One prompt: what both sides hold for it, read, measured and judged (gp: a gate file's member, NULL for a bundle). */
static int verify_prompt(const char *ref, const char *cand, const char *cname, const vf_gate_prompt *gp,
                         const vf_manifest *rm, int i,
                         const gm_tokenizer *tok, vf_prompt *p, gm_status *st)
{
    const char *name = rm->names[i];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->text = rm->texts[i] ? strdup(rm->texts[i]) : NULL;
    p->walk.diverge = p->first_low = p->first_low_op = -1;
    p->head_dim = rm->head_dim;
    p->threshold = vf_threshold(rm->head_dim);
    side r = {0}, c = {0};
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", cand, cname);
    struct stat sb;
    int64_t tsh[1] = {-1};
    if (!gp && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        gm_fail(st, GM_EFORMAT, "%s: missing: the candidate has no folder for prompt %s", dir, cname);
        goto out;
    }
    if (!(r.tokens = vf_load(ref, name, "tokens.npy", GM_NPY_I4, 1, tsh, st))) {
        if (!st->code)
            gm_fail(st, GM_EFORMAT, "%s/%s/tokens.npy: missing from the reference", ref, name);
        goto out;
    }
    p->n_tokens = (int)(r.n_tokens = tsh[0]);
    if (p->n_tokens < 1) {
        gm_fail(st, GM_EFORMAT, "%s/%s/tokens.npy: shape: expected at least one token, found none", ref, name);
        goto out;
    }
    if (ids_in_vocab(ref, name, "tokens.npy", r.tokens, r.n_tokens, rm->vocab, st))
        goto out;
    if (!gp && !(c.tokens = vf_load(cand, cname, "tokens.npy", GM_NPY_I4, 1, tsh, st)) && st->code)
        goto out;
    if (!gp && !c.tokens)
        add_note(p->unchecked, sizeof p->unchecked, "the prompt's tokens (no tokens.npy: the reference's are taken)");
    if (c.tokens && memcmp(c.tokens, r.tokens, sizeof *r.tokens * (size_t)tsh[0]) != 0) {
        int i = 0;
        while (c.tokens[i] == r.tokens[i])
            i++;
        gm_fail(st, GM_EFORMAT, "%s/%s/tokens.npy: the prompt's tokens differ from the reference's at position %d: "
                "%d, the reference's %d", cand, cname, i, (int)c.tokens[i], (int)r.tokens[i]);
        goto out;
    }
    if (load_choices(ref, name, rm->vocab, 1, &r, st))
        goto out;
    if (!r.ids || !r.rows) {
        gm_fail(st, GM_EFORMAT, "%s/%s: the reference lacks ids.npy or topk_ids.npy", ref, name);
        goto out;
    }
    if (gp ? gate_side(cand, gp, i, &r, &c, st) : load_choices(cand, cname, rm->vocab, 0, &c, st))
        goto out;
    if (load_last_logits(ref, name, rm->vocab, 1, &r, st) ||
        (!gp && load_last_logits(cand, cname, rm->vocab, 0, &c, st)))
        goto out;
    if (load_layers(ref, name, rm->n_layers, r.n_tokens, rm->emb, 1, &r, st) ||
        (!gp && load_layers(cand, cname, rm->n_layers, r.n_tokens, rm->emb, 0, &c, st)))
        goto out;
    if (measure_tokens(&r, &c, tok, p, st))
        goto out;
    check_last_step(&r, "reference", rm->vocab, p);
    check_last_step(&c, "candidate", rm->vocab, p);
    if (gp) /* mlir-air's NPU capture: ids and top-k, nothing else */
        add_note(p->unchecked, sizeof p->unchecked, "the prompt's tokens (a gate file holds none: the reference's "
                 "are taken, captured from the same prompts file); the lens and the Phase 2 block gate (a gate file "
                 "holds no layers)");
    else if (measure_lens(&r, &c, rm->n_layers, p->n_tokens, rm->emb, p, st) ||
             measure_ops(ref, cand, rm, name, cname, p->n_tokens, p, st))
        goto out;
    else if (!p->layers && vf_block_row(p)) /* the block gate on ops/0/output.npy, where a block-only candidate has it */
        add_note(p->checked, sizeof p->checked, "the Phase 2 block gate (on ops/0/output.npy)");
    else if (!p->layers)
        add_note(p->unchecked, sizeof p->unchecked, "the Phase 2 block gate (no layers.npy, no ops/0/output.npy)");
    if (c.last) {
        const int64_t steps = c.rows ? c.n_rows : c.n_ids;
        char note[160];
        snprintf(note, sizeof note, "the last step's logits (last_logits.npy: [%d], finite%s)", rm->vocab,
                 !steps ? "" : c.rows ? ", its top-5 the step's top-k row" : ", its top-1 the step's choice");
        add_note(p->checked, sizeof p->checked, note);
    } else if (!gp) {
        add_note(p->unchecked, sizeof p->unchecked, "the last step's logits (no last_logits.npy)");
    }
    vf_judge(p);
out:
    side_free(&r);
    side_free(&c);
    return st->code;
}

/* Both manifests describe one model and one tokenizer, each field the candidate gives. */
static int same_model(const vf_manifest *r, const vf_manifest *c, const char *cand, gm_status *st)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", cand);
    if (strcmp(r->model, c->model) != 0)
        return gm_fail(st, GM_EFORMAT, "%s: model: expected \"%s\" (the reference's), found \"%s\"", path, r->model,
                       c->model);
    if (c->tokenizer[0] && r->tokenizer[0] && strcmp(r->tokenizer, c->tokenizer) != 0)
        return gm_fail(st, GM_EFORMAT, "%s: tokenizer: expected \"%s\" (the reference's), found \"%s\"", path,
                       r->tokenizer, c->tokenizer);
    const struct { const char *name; int a, b; } f[] = {{"vocab_size", r->vocab, c->vocab},
                                                        {"n_layers", r->n_layers, c->n_layers},
                                                        {"emb_dim", r->emb, c->emb},
                                                        {"head_dim", r->head_dim, c->head_dim}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].b && f[i].a != f[i].b)
            return gm_fail(st, GM_EFORMAT, "%s: %s: expected %d (the reference's), found %d", path, f[i].name,
                           f[i].a, f[i].b);
    return 0;
}

int vf_verify(const char *ref, const char *cand, const vf_verify_opts *o, vf_report *r, gm_status *st)
{
    const char *tokenizer = o->tokenizer;
    vf_manifest rm, cm = {0};
    vf_gate_file gf = {0};
    struct stat sb;
    const int gate = stat(cand, &sb) == 0 && S_ISREG(sb.st_mode); /* a file: mlir-air's NPU capture */
    memset(r, 0, sizeof *r);
    if (!gate && stat(cand, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return gm_fail(st, GM_EUSAGE, "CAND %s: expected a capture folder or a gate file (.json), found neither", cand);
    if (stat(ref, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return gm_fail(st, GM_EUSAGE, "REF %s: expected a capture folder (phase0 capture --out writes one), found a "
                       "file%s", ref, gate ? "" : "; REF comes first, then CAND");
    if (vf_manifest_read(ref, &rm, st))
        return st->code;
    const struct { const char *key; int v; } need[] = {{"vocab_size", rm.vocab}, {"n_layers", rm.n_layers},
                                                        {"emb_dim", rm.emb}, {"head_dim", rm.head_dim},
                                                        {"top_k", rm.top_k}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].v < 1) {
            vf_manifest_free(&rm);
            return gm_fail(st, GM_EFORMAT, "%s/manifest.json: %s: missing or 0 (a reference gives its shapes)", ref,
                           need[i].key);
        }
    const int n = o->max_prompts > 0 && o->max_prompts < rm.n_prompts ? o->max_prompts : rm.n_prompts;
    if (gate ? vf_gate_file_read(cand, n, o->max_prompts > 0, rm.vocab, &gf, st) : vf_manifest_read(cand, &cm, st)) {
        vf_manifest_free(&rm);
        return st->code;
    }
    gm_tokenizer *tok = NULL; /* for the generated texts: without one the report shows ids */
    char tid[32];
    const char *rtok = rm.tokenizer[0] ? rm.tokenizer : "none"; /* not given: not known, as when capture had none */
    if (tokenizer) { /* it must be the reference's: its texts would be another vocabulary's */
        vf_tokenizer_id(tokenizer, tid, sizeof tid);
        if (stat(tokenizer, &sb) != 0) {
            gm_fail(st, GM_EUSAGE, "--tokenizer %s: not there (%s)", tokenizer, strerror(errno));
            goto out;
        }
        if (gm_tokenizer_load(&tok, tokenizer, st))
            goto out;
        if (strcmp(rtok, "none") != 0 && strcmp(tid, rtok) != 0) {
            gm_fail(st, GM_EUSAGE, "--tokenizer %s: not the reference's tokenizer (%s/manifest.json: tokenizer %s, this "
                    "file %s); give the model's own tokenizer.json", tokenizer, ref, rtok, tid);
            goto out;
        }
        if (strcmp(rtok, "none") == 0 && gm_tokenizer_vocab_size(tok) > rm.vocab) { /* nothing else to go by */
            gm_fail(st, GM_EUSAGE, "--tokenizer %s: ids up to %d, more than the reference's vocab_size %d: another "
                    "model's tokenizer", tokenizer, gm_tokenizer_vocab_size(tok) - 1, rm.vocab);
            goto out;
        }
    }
    if (!gate && same_model(&rm, &cm, cand, st))
        goto out;
    snprintf(r->model, sizeof r->model, "%s", rm.model);
    snprintf(r->ref_commit, sizeof r->ref_commit, "%s", rm.commit);
    snprintf(r->ref_kernels, sizeof r->ref_kernels, "%s", rm.kernels);
    snprintf(r->cand_label, sizeof r->cand_label, "%s", cand);
    snprintf(r->ref_label, sizeof r->ref_label, "%s", o->ref_label ? o->ref_label : ref);
    /* capture's options for a wrong candidate on purpose: such a REF is judged against, and said to be one */
    const gm_model_entry *e = o->models ? gm_registry_find(o->models, rm.model) : NULL;
    gm_config cfg;
    if (e)
        e->config(&cfg);
    if (rm.precision[0] && strcmp(rm.precision, "bf16") != 0)
        snprintf(r->ref_not, sizeof r->ref_not, "it was captured in %s (--f32), not bf16", rm.precision);
    else if (e && rm.rope_theta > 0 && (float)rm.rope_theta != (float)cfg.rope_base)
        snprintf(r->ref_not, sizeof r->ref_not, "it was captured with rope_theta %.9g (--rope-theta), not %s's %.9g",
                 rm.rope_theta, rm.model, (double)cfg.rope_base);
    r->head_dim = rm.head_dim;
    if (!(r->prompts = calloc((size_t)n, sizeof *r->prompts))) {
        gm_fail(st, GM_ENOMEM, "out of memory");
        goto out;
    }
    /*
    ** A candidate bundle's prompt folders: by the reference's names where its
    ** manifest lists them, else by its own names in the reference's order
    ** (the candidate's own names for the same prompts).
    */
    if (!gate && cm.n_prompts > 0 && cm.n_prompts < n) {
        gm_fail(st, GM_EFORMAT, "%s/manifest.json: prompts: expected %d (the reference's%s), found %d; give "
                "--max-prompts %d to judge the first %d", cand, n, n < rm.n_prompts ? ", cut by --max-prompts" : "",
                cm.n_prompts, cm.n_prompts, cm.n_prompts);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        r->n_prompts = i + 1;
        const char *cname = rm.names[i];
        int listed = gate || cm.n_prompts == 0;
        for (int k = 0; !listed && k < cm.n_prompts; k++)
            listed = strcmp(cm.names[k], rm.names[i]) == 0;
        if (!listed)
            cname = cm.names[i];
        if (verify_prompt(ref, cand, cname, gate ? &gf.p[i] : NULL, &rm, i, tok, &r->prompts[i], st))
            goto out;
    }
    vf_report_tally(r);
out:
    gm_tokenizer_free(tok);
    vf_manifest_free(&rm);
    vf_manifest_free(&cm);
    vf_gate_file_free(&gf);
    return st->code;
}

void vf_report_free(vf_report *r)
{
    for (int i = 0; r->prompts && i < r->n_prompts; i++) {
        vf_prompt *p = &r->prompts[i];
        free(p->text);
        free(p->ref_ids);
        free(p->cand_ids);
        free(p->ref_text);
        free(p->cand_text);
        free(p->ref_chosen_text);
        free(p->cand_chosen_text);
        free(p->prefix_text);
        for (int k = 0; k < VF_GATE_K; k++) {
            free(p->ref_top_text[k]);
            free(p->cand_top_text[k]);
        }
        for (int k = 0; p->layers && k < p->n_layers; k++)
            free(p->layers[k].pos_cos);
        free(p->layers);
        for (int k = 0; p->ops && k < p->n_ops; k++)
            free(p->ops[k].pos_cos);
        free(p->ops);
    }
    free(r->prompts);
    memset(r, 0, sizeof *r);
}
