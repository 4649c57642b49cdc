/*
** The commands `phase0 capture` and `phase0 verify`: their options, the
** prompts they run, and the exit status (0 every rule holds, 1 a rule failed,
** 2 usage or bad input, 4 a file system error).
*/
#include "internal.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gm/cli.h"
#include "gm/io.h"
#include "gm/kernels.h"
#include "gm/registry.h"
#include "gm/tokenizer.h"
#include "prompt_file.h"


enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_IO = 4 };

static int exit_for(const gm_status *st)
{
    return st->code == GM_EUSAGE ? EXIT_USAGE : st->code == GM_EIO || st->code == GM_ENOMEM ? EXIT_IO : EXIT_USAGE;
}

int vf_parse_ids(const char *list, int32_t **out, int *n)
{
    int32_t *ids = malloc(sizeof *ids * (strlen(list) / 2 + 1)); /* at most one id in every two bytes */
    int k = 0;
    for (const char *p = list; ids && *p;) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') /* strtol would take a sign or spaces */
            break;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',') || (*end == ',' && !end[1]))
            break;
        ids[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
        if (!*p) {
            *out = ids;
            *n = k;
            return 0;
        }
    }
    free(ids);
    return -1;
}

/*
** The prompts of a prompts file (base.txt, instruct.txt or the user's), read
** as mlir-air's verify reads one (prompt_file.h), at most max of them, each
** tokenized as verify tokenizes: the raw text with the tokenizer's default
** special tokens, no chat template.
*/
static int prompts_from(const char *file, const char *text, const gm_tokenizer *tok, int max, vf_prompt_in *in, int *n,
                        gm_status *st)
{
    p0_prompts ps;
    if (p0_prompts_read(file, text, strlen(text), max, &ps, st))
        return st->code;
    for (int i = 0; i < ps.n; i++) {
        vf_prompt_in *p = &in[*n];
        size_t count = 0;
        gm_status e = {0};
        if (gm_tokenizer_encode(tok, ps.p[i].text, strlen(ps.p[i].text), 1, 1, &p->ids, &count, &e) || count == 0) {
            free(p->ids);
            p->ids = NULL;
            gm_fail(st, e.code ? e.code : GM_EFORMAT, "%s: line %d: %s", file, ps.p[i].line,
                    e.code ? e.msg : "the prompt has no tokens");
            break;
        }
        p->text = ps.p[i].text;
        ps.p[i].text = NULL;
        p->n = (int)count;
        (*n)++;
    }
    p0_prompts_free(&ps);
    return st->code;
}

static const char capture_usage[] =
    "usage: phase0 capture ID --weights DIR [--prompts base|instruct|FILE] [--max-prompts N] [--tokens LIST]\n"
    "                      [--steps N] [--f32] --out REF\n"
    "\n"
    "Write the bf16 reference bundle of model ID for verify (docs/verify.md): per prompt the tokens, the\n"
    "greedy ids of N steps (default 32) with their top-20 ids and logits, the last step's full logits, and\n"
    "the prefill's layer outputs and final norm, as .npy, with manifest.json.\n"
    "  --prompts    the canonical base or instruct prompts (default base), or a file of one prompt a line\n"
    "  --tokens     one prompt as ids (a model without a tokenizer)\n"
    "  --f32        the runner in f32 instead of bf16 (a candidate to compare, not a reference)\n"
    "  --rope-theta X  RoPE with theta X instead of the model's (a wrong candidate, to see verify catch it)\n";

int vf_capture_main(int argc, char **argv, const gm_model_entry *const *models, const char *(*prompts)(const char *))
{
    static const struct option longopts[] = {
        {"weights", required_argument, 0, 'w'}, {"prompts", required_argument, 0, 'p'},
        {"max-prompts", required_argument, 0, 'm'}, {"tokens", required_argument, 0, 't'},
        {"steps", required_argument, 0, 's'}, {"out", required_argument, 0, 'o'},
        {"f32", no_argument, 0, 'f'}, {"rope-theta", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *weights = NULL, *which = "base", *out = NULL, *tokens = NULL;
    int max = 256, steps = VF_GATE_N_TOKENS, f32 = 0, c;
    double rope_theta = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":w:p:m:t:s:o:fr:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'w': weights = optarg; break;
        case 'p': which = optarg; break;
        case 'm': max = atoi(optarg); break;
        case 't': tokens = optarg; break;
        case 's': steps = atoi(optarg); break;
        case 'o': out = optarg; break;
        case 'f': f32 = 1; break;
        case 'r': rope_theta = atof(optarg); break;
        case 'h': fputs(capture_usage, stdout); return EXIT_PASS;
        default: gm_cli_bad_option("phase0 capture", c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !weights || !out) {
        fprintf(stderr, "phase0 capture: expected a model id, --weights DIR and --out REF; see phase0 capture --help\n");
        return EXIT_USAGE;
    }
    if (steps < 1 || steps > 4096 || max < 1 || max > 256) {
        fprintf(stderr, "phase0 capture: --steps in [1, 4096] and --max-prompts in [1, 256]\n");
        return EXIT_USAGE;
    }
    const gm_model_entry *e = gm_registry_find(models, argv[optind]);
    if (!e) {
        fprintf(stderr, "phase0 capture: no model '%s' is built in\n", argv[optind]);
        return EXIT_USAGE;
    }
    vf_prompt_in in[VF_MAX_PROMPTS] = {{0}};
    int n = 0, code = EXIT_PASS;
    gm_status st = {0};
    gm_tokenizer *tok = NULL;
    if (tokens) {
        if (vf_parse_ids(tokens, &in[0].ids, &in[0].n)) {
            fprintf(stderr, "phase0 capture: --tokens: expected ids like 1,2,3, found '%s'\n", tokens);
            return EXIT_USAGE;
        }
        n = 1;
    } else {
        char tpath[4200], *file = NULL;
        size_t len;
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", weights);
        const char *text = strcmp(which, "base") == 0 || strcmp(which, "instruct") == 0 ? prompts(which) : NULL;
        if (!text && strcmp(which, "base") != 0 && strcmp(which, "instruct") != 0 &&
            gm_read_file(which, 1u << 20, &file, &len, &st) == 0)
            text = file;
        if (!st.code && gm_tokenizer_load(&tok, tpath, &st) == 0)
            prompts_from(which, text, tok, max, in, &n, &st);
        free(file);
        if (!st.code && n == 0)
            gm_fail(&st, GM_EFORMAT, "%s: no prompts", which);
    }
    if (!st.code)
        vf_capture(e, weights, in, n, &(vf_capture_opts){.steps = steps, .f32 = f32, .rope_theta = rope_theta}, out, &st);
    if (st.code) {
        fprintf(stderr, "phase0 capture: %s\n", st.msg);
        code = exit_for(&st);
    } else {
        printf("phase0 capture: wrote %s: %d prompt%s, %d steps each, kernels %s\n", out, n, n == 1 ? "" : "s",
               steps, gm_kernels_name());
    }
    for (int i = 0; i < n; i++) {
        free(in[i].text);
        free(in[i].ids);
    }
    gm_tokenizer_free(tok);
    return code;
}

static const char verify_usage[] =
    "usage: phase0 verify REF CAND [--tokenizer FILE] [--json] [--html FILE]\n"
    "       phase0 verify --weights DIR CAND [--json] [--html FILE]\n"
    "\n"
    "Compare a candidate bundle (an NPU pipeline's outputs, docs/verify.md) with the reference: the\n"
    "top-5 token-set gate over 32 greedy steps, the per-layer cosine lens, and Phase 2's single-block\n"
    "gate on layer 0. With --weights the reference is computed on the fly for the candidate's prompts.\n"
    "--tokenizer (default with --weights: DIR/tokenizer.json) shows the generated texts, not only ids.\n"
    "exit status: 0 every gate holds; 1 a gate failed; 2 usage or bad input; 4 file system error\n";

int vf_verify_main(int argc, char **argv, const gm_model_entry *const *models)
{
    static const struct option longopts[] = {{"json", no_argument, 0, 'j'}, {"html", required_argument, 0, 'H'},
                                             {"weights", required_argument, 0, 'w'},
                                             {"tokenizer", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *html = NULL, *weights = NULL, *tokenizer = NULL;
    char tpath[4200] = "";
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":jH:w:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'H': html = optarg; break;
        case 'w': weights = optarg; break;
        case 't': tokenizer = optarg; break;
        case 'h': fputs(verify_usage, stdout); return EXIT_PASS;
        default: gm_cli_bad_option("phase0 verify", c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - (weights ? 1 : 2)) {
        fprintf(stderr, "phase0 verify: expected REF CAND, or --weights DIR CAND; see phase0 verify --help\n");
        return EXIT_USAGE;
    }
    const char *cand = argv[argc - 1];
    char ref[4200] = "";
    gm_status st = {0};
    vf_report r = {0};
    int code, made_ref = 0;
    if (weights) { /* the reference, computed now for the candidate's prompts and steps */
        vf_manifest cm;
        if (vf_manifest_read(cand, &cm, &st) == 0) {
            const gm_model_entry *e = gm_registry_find(models, cm.model);
            vf_prompt_in in[VF_MAX_PROMPTS] = {{0}};
            /* the gate walks VF_GATE_N_TOKENS steps: the reference needs no more than that */
            int steps = cm.steps > 0 && cm.steps < VF_GATE_N_TOKENS ? cm.steps : VF_GATE_N_TOKENS;
            if (!e)
                gm_fail(&st, GM_EFORMAT, "%s/manifest.json: model: \"%s\" is not built in", cand, cm.model);
            for (int i = 0; !st.code && i < cm.n_prompts; i++) {
                int64_t sh[1] = {-1};
                in[i].ids = vf_load(cand, cm.names[i], "tokens.npy", GM_NPY_I4, 1, sh, &st);
                if (!in[i].ids && !st.code)
                    gm_fail(&st, GM_EFORMAT, "%s/%s/tokens.npy: missing: the reference needs the prompt", cand,
                            cm.names[i]);
                in[i].n = (int)sh[0];
                in[i].text = cm.texts[i] ? strdup(cm.texts[i]) : NULL;
                snprintf(in[i].name, sizeof in[i].name, "%s", cm.names[i]); /* the reference's folders are the candidate's */
            }
            /* a name no other folder has (mkdtemp), freed for capture, which builds and renames into it */
            snprintf(ref, sizeof ref, "%s.ref-XXXXXX", cand);
            if (!st.code && (!mkdtemp(ref) || rmdir(ref) != 0))
                gm_fail(&st, GM_EIO, "%s: cannot make a temporary name: %s", ref, strerror(errno));
            if (!st.code && vf_capture(e, weights, in, cm.n_prompts, &(vf_capture_opts){.steps = steps}, ref, &st) == 0)
                made_ref = 1;
            for (int i = 0; i < cm.n_prompts; i++) {
                free(in[i].ids);
                free(in[i].text);
            }
            vf_manifest_free(&cm);
        }
    } else {
        snprintf(ref, sizeof ref, "%s", argv[optind]);
    }
    if (!tokenizer && weights) { /* the model's own, beside its weights */
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", weights);
        tokenizer = tpath;
    }
    if (!st.code)
        vf_verify(ref, cand, tokenizer, &r, &st);
    if (made_ref && gm_remove_tree(ref) != 0)
        fprintf(stderr, "phase0 verify: warning: %s could not be removed: %s\n", ref, strerror(errno));
    if (st.code) {
        fprintf(stderr, "phase0 verify: %s\n", st.msg);
        vf_report_free(&r);
        return exit_for(&st);
    }
    if (json) {
        cJSON *j = vf_report_json(&r);
        char *text = cJSON_Print(j);
        puts(text);
        cJSON_free(text);
        cJSON_Delete(j);
    } else {
        vf_print_text(&r, stdout);
    }
    code = r.verdict == VF_FAIL ? EXIT_FAIL : EXIT_PASS;
    if (html && vf_write_html(&r, html, &st)) {
        fprintf(stderr, "phase0 verify: %s\n", st.msg);
        code = EXIT_IO;
    }
    vf_report_free(&r);
    return code;
}
