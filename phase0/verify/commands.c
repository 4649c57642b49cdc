/*
** The commands `phase0 capture` and `phase0 verify`: their options (those
** mlir-air's verify_runner.py has, with its meaning: --prompt-style,
** --prompts-file, --prompt, --max-prompts, --no-strict), the prompts they
** run, and the exit status (0 every rule holds, 1 a rule failed, 2 usage or
** bad input, 4 a file system error).
*/
#include "internal.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gm/cli.h"
#include "gm/io.h"
#include "gm/kernels.h"
#include "gm/lock.h"
#include "gm/registry.h"
#include "gm/tokenizer.h"
#include "prompt_file.h"

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_IO = 4 };

enum {
    VF_MAX_PROMPT_TOKENS = 2048, /* a prompt's tokens beyond these are cut, as their verify cuts them (max_seq) */
};

/*
** The exit status for st; after an interrupt (capture's temporary folder
** removed), the signal again with its default action, as a shell expects of
** a program Ctrl-C stopped.
*/
static int exit_for(const gm_status *st)
{
    const int sig = gm_interrupted();
    if (sig) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
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


/* arg as a whole number in [lo, hi] (gm_cli_count), or one line naming the option and -1 */
static int parse_count(const char *prog, const char *opt, const char *arg, int lo, int hi, int *out)
{
    const long v = gm_cli_count(arg, lo, hi);
    if (v < 0) {
        fprintf(stderr, "%s: %s: expected a whole number in [%d, %d], found '%s'\n", prog, opt, lo, hi, arg);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/*
** arg as a RoPE theta: a number (strtod's forms, no leading spaces) from 1 to
** FLT_MAX; below 1 its frequencies 1/theta^(2i/d) outgrow f32 (1e-300 gave
** NaN layers that looked like the weights'). Else one line and -1.
*/
static int parse_theta(const char *prog, const char *opt, const char *arg, double *out)
{
    char *end;
    errno = 0;
    const double v = strtod(arg, &end);
    if (!*arg || *end || errno || !(v >= 1 && v <= FLT_MAX) || arg[0] == ' ') {
        fprintf(stderr, "%s: %s: expected a number from 1 to %g (models use 1e4 to 1e7), found '%s'\n", prog, opt,
                (double)FLT_MAX, arg);
        return -1;
    }
    *out = v;
    return 0;
}

/* The file `path` as its folder's real path and its name; 0 when that folder does not resolve. */
static int resolved(const char *path, char *out, size_t size)
{
    char where[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    snprintf(where, sizeof where, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    return *base && realpath(where, real) && snprintf(out, size, "%s/%s", strcmp(real, "/") ? real : "", base) < (int)size;
}

/* Whether a report at `path` would be written over `other`: that file (inside 0), or into that folder (inside 1). */
static int same_or_inside(const char *path, const char *other, int inside)
{
    char a[PATH_MAX + 256], b[PATH_MAX + 256];
    if (!resolved(path, a, sizeof a))
        return 0;
    if (!inside)
        return resolved(other, b, sizeof b) && strcmp(a, b) == 0;
    if (!realpath(other, b))
        return 0;
    const size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '/' || (n == 1 && b[0] == '/'));
}

/*
** path, an output that --opt names, can be made: its folder exists and is a
** writable folder (and, for a new folder, nothing is at path yet); else one
** line naming the option and the path as given, and -1. Checked before any
** work, so that a mistyped path costs nothing.
*/
static int check_output(const char *prog, const char *opt, const char *path, int new_folder)
{
    char dir[4200];
    struct stat sb;
    size_t n = strlen(path);
    if (!n) {
        fprintf(stderr, "%s: %s '': expected the path of %s\n", prog, opt, new_folder ? "a new folder" : "a file");
        return -1;
    }
    while (n > 1 && path[n - 1] == '/') /* ref/ is ref */
        n--;
    while (n > 0 && path[n - 1] != '/')
        n--;
    while (n > 1 && path[n - 1] == '/')
        n--;
    snprintf(dir, sizeof dir, "%.*s", n ? (int)n : 1, n ? path : ".");
    const char *found = stat(dir, &sb) != 0 ? "does not exist"
                        : !S_ISDIR(sb.st_mode) ? "is not a folder"
                        : access(dir, W_OK | X_OK) != 0 ? "is not writable" : NULL;
    if (found) {
        fprintf(stderr, "%s: %s %s: expected %s in a writable folder; %s %s\n", prog, opt, path,
                new_folder ? "a new folder" : "a file", dir, found);
        return -1;
    }
    if (new_folder ? lstat(path, &sb) == 0 : stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, opt, path,
                new_folder ? "already exists; remove it or choose another --out" : "expected a file, found a folder");
        return -1;
    }
    return 0;
}

/*
** path, an input --opt names, is a folder (want_dir) or a regular file (what
** it holds is checked as it is read); else one line saying what was
** expected (`what`) and what is there, and -1. Checked before any work.
*/
static int check_input(const char *prog, const char *opt, const char *path, int want_dir, const char *what)
{
    struct stat sb;
    const int there = stat(path, &sb) == 0;
    if (there && (want_dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)))
        return 0;
    fprintf(stderr, "%s: %s %s: expected %s, found %s\n", prog, opt, path, what,
            !there ? (errno == ENOENT || errno == ENOTDIR ? "nothing there" : strerror(errno))
            : S_ISDIR(sb.st_mode) ? "a folder" : want_dir ? "a file" : "no regular file");
    return -1;
}

#define WEIGHTS_FOLDER "the model's folder (its safetensors, config.json and tokenizer.json)"

/* ---------------------------------------------------------------------- */
/* the prompts */

/* Which prompts run: the options capture and `verify --weights` share. */
typedef struct prompt_opts {
    const char *style;  /* --prompt-style base|instruct; NULL: by the model's repo */
    const char *file;   /* --prompts-file FILE */
    const char *text;   /* --prompt TEXT: one prompt */
    const char *tokens; /* --tokens LIST: one prompt as ids */
    int max;            /* --max-prompts N: the first N; 0 all */
} prompt_opts;

enum { OPT_STYLE = 1000, OPT_FILE, OPT_PROMPT, OPT_OLD_PROMPTS, OPT_NO_STRICT, OPT_MD, OPT_MODEL, OPT_OPS, OPT_THREADS };

/* --threads N, as phase0's: the loader's and the runner's threads (both read GM_THREADS); -1 on a bad N */
static int threads_option(const char *prog, const char *arg)
{
    if (gm_threads_parse(arg) < 0) {
        fprintf(stderr, "%s: --threads: expected a whole number in [1, %d], found '%s'\n", prog, GM_MAX_THREADS, arg);
        return -1;
    }
    setenv("GM_THREADS", arg, 1);
    return 0;
}

#define PROMPT_LONGOPTS                                                                                                \
    {"prompt-style", required_argument, 0, OPT_STYLE}, {"prompts-file", required_argument, 0, OPT_FILE},              \
        {"prompt", required_argument, 0, OPT_PROMPT}, {"prompts", required_argument, 0, OPT_OLD_PROMPTS},             \
        {"max-prompts", required_argument, 0, 'm'}

/* c, a prompt option, into po: 1 taken, 0 not a prompt option, -1 a bad value (said on stderr). */
static int prompt_option(const char *prog, int c, const char *arg, prompt_opts *po)
{
    switch (c) {
    case OPT_OLD_PROMPTS: /* ours before their names: base, instruct or a file */
        if (strcmp(arg, "base") != 0 && strcmp(arg, "instruct") != 0) {
            if (access(arg, F_OK) != 0) { /* mlir-air's `--prompts topk_token`, say: not a file name */
                fprintf(stderr, "%s: --prompts %s: no such prompts file (--prompts is the older spelling of "
                        "--prompts-file FILE and --prompt-style base|instruct; the top-5 token gate always runs)\n",
                        prog, arg);
                return -1;
            }
            po->file = arg;
            return 1;
        }
        /* fall through */
    case OPT_STYLE:
        if (strcmp(arg, "base") != 0 && strcmp(arg, "instruct") != 0) {
            fprintf(stderr, "%s: --prompt-style: expected base or instruct, found '%s'\n", prog, arg);
            return -1;
        }
        po->style = arg;
        return 1;
    case OPT_FILE: po->file = arg; return 1;
    case OPT_PROMPT: po->text = arg; return 1;
    case 't': po->tokens = arg; return 1;
    case 'm': return parse_count(prog, "--max-prompts", arg, 0, VF_MAX_PROMPTS, &po->max) ? -1 : 1;
    default: return 0;
    }
}

/* --prompt, --prompts-file and --tokens each choose the prompts: at most one of them (a style yields to a file). */
static int prompt_conflict(const char *prog, const prompt_opts *po)
{
    if (!!po->text + !!po->file + !!po->tokens > 1) {
        fprintf(stderr, "%s: --prompt, --prompts-file and --tokens each choose the prompts: give one of them\n", prog);
        return -1;
    }
    return 0;
}

/* One prompt, tokenized as verify tokenizes: the raw text, the tokenizer's default special tokens, no chat template. */
static int tokenize(const gm_tokenizer *tok, const char *text, vf_prompt_in *in, gm_status *st)
{
    size_t count = 0;
    gm_status e = {0};
    if (gm_tokenizer_encode(tok, text, strlen(text), 1, 1, &in->ids, &count, &e) || count == 0) {
        free(in->ids);
        in->ids = NULL;
        return gm_fail(st, e.code ? e.code : GM_EFORMAT, "%s", e.code ? e.msg : "the prompt has no tokens");
    }
    in->n = (int)count;
    return 0;
}

/*
** The prompts of a prompts file (base.txt, instruct.txt or the user's), read
** as mlir-air's verify reads one (prompt_file.h), at most max of them (0:
** all, up to VF_MAX_PROMPTS), each tokenized.
*/
static int prompts_from(const char *file, const char *text, size_t len, const gm_tokenizer *tok, int max,
                        vf_prompt_in *in, int *n, gm_status *st)
{
    p0_prompts ps;
    if (p0_prompts_read(file, text, len, max > 0 ? max : VF_MAX_PROMPTS + 1, &ps, st))
        return st->code;
    if (ps.n > VF_MAX_PROMPTS) {
        p0_prompts_free(&ps);
        return gm_fail(st, GM_EUSAGE, "%s: more than %d prompts; --max-prompts N runs the first N", file,
                       VF_MAX_PROMPTS);
    }
    for (int i = 0; i < ps.n; i++) {
        vf_prompt_in *p = &in[*n];
        if (tokenize(tok, ps.p[i].text, p, st)) {
            gm_prefix(st, "%s: line %d", file, ps.p[i].line);
            break;
        }
        p->text = ps.p[i].text;
        ps.p[i].text = NULL;
        (*n)++;
    }
    p0_prompts_free(&ps);
    return st->code;
}

/*
** The prompts po chooses for model e: --tokens, --prompt (as given, not
** stripped, as their --prompt), --prompts-file, or the canonical file of
** --prompt-style (default: instruct for an Instruct or Chat repo, else base);
** at most po->max; each cut to its first VF_MAX_PROMPT_TOKENS tokens (a note
** on stderr says so).
*/
static int gather_prompts(const char *prog, const prompt_opts *po, const gm_model_entry *e, const char *weights,
                          const char *(*canonical)(const char *), vf_prompt_in *in, int *n, gm_status *st)
{
    *n = 0;
    if (po->tokens) {
        if (vf_parse_ids(po->tokens, &in[0].ids, &in[0].n))
            return gm_fail(st, GM_EUSAGE, "--tokens: expected ids like 1,2,3, found '%s'", po->tokens);
        *n = 1;
    } else {
        char tpath[4200], *file = NULL;
        size_t len;
        const char *style = po->style ? po->style : p0_is_instruct(e->repo) ? "instruct" : "base";
        const char *name = po->file ? po->file : style, *text = NULL;
        gm_tokenizer *tok = NULL;
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", weights);
        if (po->file && gm_read_file(po->file, 16u << 20, &file, &len, st) == 0)
            text = file;
        else if (po->file)
            st->code = GM_EUSAGE; /* a prompts file that cannot be read is bad input, not a file system error */
        else if (!po->file && !po->text && !(text = canonical(style)))
            gm_fail(st, GM_EUSAGE, "%s: no such canonical prompts", style);
        struct stat tsb;
        if (!st->code && stat(tpath, &tsb) != 0) /* what to do instead, as phase0's gate 2 says */
            gm_fail(st, GM_EUSAGE, "%s: not there: the prompts need the model's tokenizer.json; put it in the weights "
                    "folder (gen-model download fetches it), or give --tokens IDS", tpath);
        if (!st->code && gm_tokenizer_load(&tok, tpath, st) == 0) {
            if (po->text) {
                if (!(in[0].text = strdup(po->text)))
                    gm_fail(st, GM_ENOMEM, "out of memory");
                else if (tokenize(tok, po->text, &in[0], st) == 0)
                    *n = 1;
                else
                    gm_prefix(st, "--prompt");
            } else {
                prompts_from(name, text, file ? len : strlen(text), tok, po->max, in, n, st); /* a file's NULs too */
            }
        }
        free(file);
        gm_tokenizer_free(tok);
        if (!st->code && *n == 0)
            gm_fail(st, GM_EFORMAT, "%s: no prompts", name);
    }
    for (int i = 0; i < *n; i++)
        if (in[i].n > VF_MAX_PROMPT_TOKENS) {
            fprintf(stderr, "%s: note: prompt %d has %d tokens; its first %d run, as mlir-air's verify runs them\n",
                    prog, i, in[i].n, VF_MAX_PROMPT_TOKENS);
            in[i].n = VF_MAX_PROMPT_TOKENS;
        }
    return st->code;
}

static void free_prompts(vf_prompt_in *in, int n)
{
    for (int i = 0; i < n; i++) {
        free(in[i].text);
        free(in[i].ids);
    }
}

/* ---------------------------------------------------------------------- */
/* phase0 capture */

/*
** --ops LAYERS into mask[0..L): a comma list of layer numbers and the words
** first and last; all; none (then *any is 0). One line on stderr and -1 when
** it is none of these.
*/
static int parse_layers(const char *prog, const char *spec, int L, unsigned char *mask, int *any)
{
    memset(mask, 0, (size_t)L);
    *any = 0;
    if (strcmp(spec, "none") == 0)
        return 0;
    if (strcmp(spec, "all") == 0) {
        memset(mask, 1, (size_t)L);
        return *any = 1, 0;
    }
    for (const char *p = spec;;) {
        const size_t n = strcspn(p, ",");
        char item[32];
        int l = -1;
        snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item ? n : sizeof item - 1), p);
        if (strcmp(item, "first") == 0)
            l = 0;
        else if (strcmp(item, "last") == 0)
            l = L - 1;
        else if (n > 0 && n < 10 && strspn(item, "0123456789") == n)
            l = atoi(item);
        if (l < 0 || l >= L) {
            fprintf(stderr, "%s: --ops: expected layers in [0, %d] (numbers, first, last), all or none, found '%s'\n",
                    prog, L - 1, spec);
            return -1;
        }
        mask[l] = 1;
        *any = 1;
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

static const char capture_usage[] =
    "usage: phase0 capture ID --weights DIR [--prompt-style base|instruct | --prompts-file FILE | --prompt TEXT |\n"
    "                      --tokens LIST] [--max-prompts N] [--steps N] [--ops LAYERS] [--f32] [--rope-theta X]\n"
    "                      [--threads N] --out REF\n"
    "\n"
    "Write the bf16 reference bundle of model ID for verify (docs/verify.md): per prompt the tokens, the\n"
    "greedy ids of N steps (default 32) with their top-20 ids and logits, the last step's full logits, the\n"
    "prefill's layer outputs and final norm, and the output of every op inside the chosen layers (the\n"
    "test vectors of Phase 1's kernels and Phase 2's block), as .npy, with manifest.json. For a quantized\n"
    "checkpoint (AWQ, GPTQ, FP8, Q4NX) the reference runs on its own weights dequantized to bf16 by its\n"
    "format's rule: the same dequantized weights an int4 or FP8 NPU pipeline computes with. DIR/config.json\n"
    "must be the one ID was generated from (gate 3), else nothing is captured.\n"
    "  --prompt-style S   the canonical prompts, phase0/prompts/S.txt: base or instruct (default: instruct\n"
    "                     for an Instruct or Chat repo, else base; mlir-air's verify defaults to instruct)\n"
    "  --prompts-file F   a file of one prompt a line, read as their verify reads one: each line stripped,\n"
    "                     blank lines and '#' lines skipped, CRLF or LF\n"
    "  --prompt TEXT      one prompt\n"
    "  --tokens LIST      one prompt as ids (a model without a tokenizer)\n"
    "  --prompts X        the same as --prompt-style X for base or instruct, else --prompts-file X\n"
    "  --max-prompts N    the first N prompts (0, the default: all, at most 256)\n"
    "  --steps N          greedy steps (default 32); a prompt runs at most its first 2048 tokens\n"
    "  --ops LAYERS       the layers whose ops are written, PROMPT/ops/LAYER/OP.npy: numbers and first, last\n"
    "                     (comma-separated), all or none (default first,last)\n"
    "  --f32              the runner in f32 instead of bf16 (a candidate to compare, not a reference)\n"
    "  --rope-theta X     RoPE with theta X (1 to 3.4e38) instead of the model's (a wrong candidate, to see verify\n"
    "                     catch it)\n"
    "  --threads N        threads for the loader and the runner, 1 to 512 (default: GM_THREADS, else every core)\n";

int vf_capture_main(int argc, char **argv, const gm_model_entry *const *models, const char *(*canonical)(const char *))
{
    static const struct option longopts[] = {
        {"weights", required_argument, 0, 'w'}, PROMPT_LONGOPTS, {"tokens", required_argument, 0, 't'},
        {"steps", required_argument, 0, 's'}, {"out", required_argument, 0, 'o'}, {"f32", no_argument, 0, 'f'},
        {"rope-theta", required_argument, 0, 'r'}, {"ops", required_argument, 0, OPT_OPS},
        {"threads", required_argument, 0, OPT_THREADS}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *prog = "phase0 capture", *weights = NULL, *out = NULL, *ops = "first,last";
    prompt_opts po = {0};
    int steps = VF_GATE_N_TOKENS, f32 = 0, c, taken;
    double rope_theta = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":w:m:t:s:o:fr:h", longopts, NULL)) != -1) {
        if ((taken = prompt_option(prog, c, optarg, &po)) != 0) {
            if (taken < 0)
                return EXIT_USAGE;
            continue;
        }
        switch (c) {
        case 'w': weights = optarg; break;
        case 's':
            if (parse_count(prog, "--steps", optarg, 1, 4096, &steps))
                return EXIT_USAGE;
            break;
        case 'o': out = optarg; break;
        case 'f': f32 = 1; break;
        case 'r':
            if (parse_theta(prog, "--rope-theta", optarg, &rope_theta))
                return EXIT_USAGE;
            break;
        case OPT_OPS: ops = optarg; break;
        case OPT_THREADS:
            if (threads_option(prog, optarg))
                return EXIT_USAGE;
            break;
        case 'h': fputs(capture_usage, stdout); return EXIT_PASS;
        default: gm_cli_bad_option(prog, c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !weights || !out) {
        fprintf(stderr, "%s: expected a model id, --weights DIR and --out REF; see phase0 capture --help\n", prog);
        return EXIT_USAGE;
    }
    char out_buf[4096]; /* REF/ is REF: the bundle and its temporary name beside it */
    size_t out_len = strlen(out);
    while (out_len > 1 && out[out_len - 1] == '/')
        out_len--;
    if (!out_len || out_len >= sizeof out_buf || (out_len == 1 && out[0] == '/')) {
        fprintf(stderr, "%s: --out '%s': expected the path of a new folder\n", prog, out);
        return EXIT_USAGE;
    }
    snprintf(out_buf, sizeof out_buf, "%.*s", (int)out_len, out);
    out = out_buf;
    if (prompt_conflict(prog, &po) || check_output(prog, "--out", out, 1))
        return EXIT_USAGE;
    const gm_model_entry *e = gm_registry_find(models, argv[optind]);
    if (!e) {
        fprintf(stderr, "%s: no model '%s' is built in\n", prog, argv[optind]);
        return EXIT_USAGE;
    }
    if (check_input(prog, "--weights", weights, 1, WEIGHTS_FOLDER))
        return EXIT_USAGE;
    unsigned char *mask = calloc((size_t)e->n_layers, 1);
    int any = 0;
    if (!mask || parse_layers(prog, ops, e->n_layers, mask, &any)) {
        free(mask);
        return mask ? EXIT_USAGE : EXIT_IO;
    }
    vf_prompt_in in[VF_MAX_PROMPTS] = {{0}};
    int n = 0, code = EXIT_PASS;
    gm_status st = {0};
    if (gather_prompts(prog, &po, e, weights, canonical, in, &n, &st) == 0)
        vf_capture(e, weights, in, n,
                   &(vf_capture_opts){
                       .prog = prog, .steps = steps, .f32 = f32, .rope_theta = rope_theta, .ops = any ? mask : NULL},
                   out, &st);
    free(mask);
    if (st.code) {
        fprintf(stderr, "%s: %s\n", prog, st.msg);
        code = exit_for(&st);
    } else {
        printf("%s: wrote %s: %d prompt%s, %d steps each, kernels %s\n", prog, out, n, n == 1 ? "" : "s", steps,
               gm_kernels_name());
    }
    free_prompts(in, n);
    return code;
}

/* ---------------------------------------------------------------------- */
/* phase0 verify */

static const char verify_usage[] =
    "usage: phase0 verify REF CAND [--tokenizer FILE] [--max-prompts N] [--no-strict] [--json] [--md FILE]\n"
    "                     [--html FILE]\n"
    "       phase0 verify --weights DIR CAND [--model ID] [--prompt-style S | --prompts-file F | --prompt TEXT |\n"
    "                     --tokens LIST] [--max-prompts N] [--threads N] [--no-strict] [--json] [--md FILE]\n"
    "                     [--html FILE]\n"
    "\n"
    "Compare a candidate with the reference: the top-5 token-set gate over 32 greedy steps, the per-layer\n"
    "cosine lens (and the lens of the ops inside the blocks both hold: the first op below the threshold),\n"
    "and Phase 2's single-block gate on layer 0 (docs/verify.md). CAND is a bundle (an NPU\n"
    "pipeline's outputs as .npy), or the JSON file mlir-air's verify_runner.py --gate-phase capture-npu\n"
    "--gate-file F writes (each prompt's chosen ids and top-k, keyed by its index in the prompts file:\n"
    "REF captured from the same prompts). With --weights the reference is computed on the fly: for the\n"
    "candidate bundle's own prompt tokens, or for the prompts --prompt-style, --prompts-file, --prompt or\n"
    "--tokens choose (as capture's: --prompt-style defaults to instruct for an Instruct or Chat repo, else\n"
    "base, where mlir-air's verify defaults to instruct; a gate file's by default the canonical ones).\n"
    "  --tokenizer FILE   shows the generated texts, not only ids: the reference's own tokenizer.json (default\n"
    "                     with --weights: DIR/tokenizer.json, when there)\n"
    "  --max-prompts N    judge the first N prompts (0, the default: all)\n"
    "  --model ID         with --weights and a gate file: the model (default: the one built in, if one)\n"
    "  --no-strict        a FAIL is reported, and the exit status is 0 (as mlir-air's verify --no-strict)\n"
    "  --json             the report as JSON on stdout (with mlir-air's topk_checks and summary)\n"
    "  --md FILE          the report as Markdown, laid out as mlir-air's report.py lays out theirs\n"
    "  --html FILE        a self-contained page: the texts side by side, the cosine plots of layers and ops\n"
    "  --threads N        with --weights: threads for the loader and the runner, 1 to 512 (default: GM_THREADS,\n"
    "                     else every core)\n"
    "exit status: 0 every gate holds (or --no-strict); 1 a gate failed; 2 usage or bad input; 4 file system error\n";

/* The model of a gate file, which names none: --model ID, or the one model the program has. */
static const gm_model_entry *gate_model(const char *cand, const char *id, const gm_model_entry *const *models,
                                        gm_status *st)
{
    int n = 0;
    GM_FOR_EACH_MODEL(e, models)
        n++;
    if (id || n != 1) {
        const gm_model_entry *e = id ? gm_registry_find(models, id) : NULL;
        if (!e)
            gm_fail(st, GM_EUSAGE, "%s: a gate file names no model: %s", cand,
                    id ? "--model names none that is built in (phase0 --list)" : "give --model ID (phase0 --list)");
        return e;
    }
    return models[0];
}

/*
** The reference for the candidate, computed now into a fresh folder beside it
** (*made: remove it after): for the prompts the options choose, or, for a
** bundle without them, for its own prompt tokens.
*/
static int reference_now(const char *prog, const prompt_opts *po, const char *model, const char *weights,
                         const char *cand, const gm_model_entry *const *models, const char *(*canonical)(const char *),
                         char *ref, size_t size, int *made, gm_status *st)
{
    vf_manifest cm = {0};
    struct stat sb;
    const int gate = stat(cand, &sb) == 0 && S_ISREG(sb.st_mode);
    if (!gate && vf_manifest_read(cand, &cm, st))
        return st->code;
    if (!gate && model && strcmp(model, cm.model) != 0) {
        gm_fail(st, GM_EUSAGE, "--model %s: the candidate's manifest names %s (--model is for a gate file, which "
                "names none)", model, cm.model);
        vf_manifest_free(&cm);
        return st->code;
    }
    const gm_model_entry *e = gate ? gate_model(cand, model, models, st) : gm_registry_find(models, cm.model);
    vf_prompt_in in[VF_MAX_PROMPTS] = {{0}};
    int n = 0;
    /* the gate walks VF_GATE_N_TOKENS steps: the reference needs no more than that */
    const int steps = cm.steps > 0 && cm.steps < VF_GATE_N_TOKENS ? cm.steps : VF_GATE_N_TOKENS;
    if (!e && !gate)
        gm_fail(st, GM_EFORMAT, "%s/manifest.json: model: \"%s\" is not built in", cand, cm.model);
    if (e && (gate || po->style || po->file || po->text || po->tokens)) /* the prompts the options choose: p000, ... */
        gather_prompts(prog, po, e, weights, canonical, in, &n, st);
    else if (e) /* the candidate's own prompts, in its folders */
        for (int i = 0; !st->code && i < cm.n_prompts && (po->max == 0 || i < po->max); i++, n++) {
            int64_t sh[1] = {-1};
            in[i].ids = vf_load(cand, cm.names[i], "tokens.npy", GM_NPY_I4, 1, sh, st);
            if (!in[i].ids && !st->code)
                gm_fail(st, GM_EFORMAT, "%s/%s/tokens.npy: missing: the reference needs the prompt", cand,
                        cm.names[i]);
            in[i].n = (int)sh[0];
            in[i].text = cm.texts[i] ? strdup(cm.texts[i]) : NULL;
            snprintf(in[i].name, sizeof in[i].name, "%s", cm.names[i]); /* the reference's folders are the candidate's */
        }
    /* the ops of the layers the candidate has them of (its first prompt's ops/<layer>/ folders) */
    unsigned char *ops = e && !gate && cm.n_prompts ? calloc((size_t)e->n_layers, 1) : NULL;
    int any = 0;
    for (int l = 0; ops && l < e->n_layers; l++) {
        char path[4400], sub[32];
        snprintf(sub, sizeof sub, "ops/%d", l);
        vf_path(path, sizeof path, cand, cm.names[0], sub);
        any |= ops[l] = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    }
    /* a name no other folder has (mkdtemp), freed for capture, which builds and renames into it */
    snprintf(ref, size, "%s.ref-XXXXXX", cand);
    if (!st->code && (!mkdtemp(ref) || rmdir(ref) != 0))
        gm_fail(st, GM_EIO, "%s: cannot make a temporary name: %s", ref, strerror(errno));
    const vf_capture_opts co = {.prog = prog, .steps = steps, .ops = any ? ops : NULL};
    if (!st->code && vf_capture(e, weights, in, n, &co, ref, st) == 0)
        *made = 1;
    free(ops);
    free_prompts(in, n);
    vf_manifest_free(&cm);
    return st->code;
}

int vf_verify_main(int argc, char **argv, const gm_model_entry *const *models, const char *(*canonical)(const char *))
{
    static const struct option longopts[] = {
        {"json", no_argument, 0, 'j'}, {"html", required_argument, 0, 'H'}, {"weights", required_argument, 0, 'w'},
        {"tokenizer", required_argument, 0, 'T'}, PROMPT_LONGOPTS, {"no-strict", no_argument, 0, OPT_NO_STRICT},
        {"md", required_argument, 0, OPT_MD}, {"model", required_argument, 0, OPT_MODEL},
        {"tokens", required_argument, 0, 't'}, {"threads", required_argument, 0, OPT_THREADS},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *prog = "phase0 verify", *html = NULL, *md = NULL, *weights = NULL, *tokenizer = NULL, *model = NULL;
    char tpath[4200] = "", ref_label[4300] = "";
    prompt_opts po = {0};
    int json = 0, strict = 1, c, taken;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":jH:w:m:t:h", longopts, NULL)) != -1) {
        if ((taken = prompt_option(prog, c, optarg, &po)) != 0) {
            if (taken < 0)
                return EXIT_USAGE;
            continue;
        }
        switch (c) {
        case 'j': json = 1; break;
        case 'H': html = optarg; break;
        case 'w': weights = optarg; break;
        case 'T': tokenizer = optarg; break;
        case OPT_NO_STRICT: strict = 0; break;
        case OPT_MD: md = optarg; break;
        case OPT_MODEL: model = optarg; break;
        case OPT_THREADS:
            if (threads_option(prog, optarg))
                return EXIT_USAGE;
            break;
        case 'h': fputs(verify_usage, stdout); return EXIT_PASS;
        default: gm_cli_bad_option(prog, c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - (weights ? 1 : 2)) {
        fprintf(stderr, "%s: expected REF CAND, or --weights DIR CAND; see phase0 verify --help\n", prog);
        return EXIT_USAGE;
    }
    if (!weights && (po.style || po.file || po.text || po.tokens || model)) {
        fprintf(stderr, "%s: --prompt-style, --prompts-file, --prompt, --tokens and --model choose what a reference is "
                "computed for: they need --weights DIR (REF holds its own)\n", prog);
        return EXIT_USAGE;
    }
    if (prompt_conflict(prog, &po) || (html && check_output(prog, "--html", html, 0)) ||
        (md && check_output(prog, "--md", md, 0)))
        return EXIT_USAGE;
    if ((tokenizer && check_input(prog, "--tokenizer", tokenizer, 0, "the model's tokenizer.json")) ||
        (weights && check_input(prog, "--weights", weights, 1, WEIGHTS_FOLDER)))
        return EXIT_USAGE;
    const char *cand = argv[argc - 1];
    const char *const outs[2] = {html, md}, *const folders[2] = {weights ? NULL : argv[optind], cand};
    for (int i = 0; i < 2; i++) /* a report written over a bundle's own file, or over the other report */
        for (int k = 0; outs[i] && k < 3; k++) {
            const char *other = k < 2 ? folders[k] : i == 0 ? md : NULL;
            if (other && same_or_inside(outs[i], other, k < 2)) {
                fprintf(stderr, "%s: %s %s: %s %s; %s\n", prog, i ? "--md" : "--html", outs[i],
                        k < 2 ? "inside the bundle" : "the same file as --md", other,
                        k < 2 ? "write the report outside the bundles" : "give the two reports two files");
                return EXIT_USAGE;
            }
        }
    char ref[4200] = "";
    gm_status st = {0};
    vf_report r = {0};
    int code, made_ref = 0;
    if (weights)
        reference_now(prog, &po, model, weights, cand, models, canonical, ref, sizeof ref, &made_ref, &st);
    else
        snprintf(ref, sizeof ref, "%s", argv[optind]);
    if (weights) { /* the model's own tokenizer, beside its weights */
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", weights);
        if (!tokenizer && access(tpath, F_OK) == 0) /* when there: a model without one shows ids */
            tokenizer = tpath;
        snprintf(ref_label, sizeof ref_label, "computed now from %s", weights);
    }
    if (!st.code)
        vf_verify(ref, cand, &(vf_verify_opts){.tokenizer = tokenizer, .max_prompts = po.max, .models = models,
                                               .ref_label = ref_label[0] ? ref_label : NULL}, &r, &st);
    if (made_ref && gm_remove_tree(ref) != 0)
        fprintf(stderr, "%s: warning: %s could not be removed: %s\n", prog, ref, strerror(errno));
    if (gm_interrupted()) { /* while the reference was computed (capture's message speaks of its bundle), or since */
        gm_status_clear(&st);
        gm_fail(&st, GM_EIO, "interrupted; no report written");
    }
    if (st.code) {
        fprintf(stderr, "%s: %s\n", prog, st.msg);
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
    if (r.ref_not[0])
        fprintf(stderr, "%s: warning: %s is no bf16 reference of %s: %s; capture it without that option\n", prog, ref,
                r.model, r.ref_not);
    for (int i = 0; i < r.n_prompts; i++) /* as their runner warns of it */
        if (r.prompts[i].n_warnings)
            fprintf(stderr, "%s: warning: %s %s%s\n", prog, r.prompts[i].name, r.prompts[i].warning,
                    r.prompts[i].n_warnings > 1 ? " (and at other steps too)" : "");
    if (fflush(stdout) != 0 || ferror(stdout)) { /* a full disk, a closed pipe: the report is not there */
        fprintf(stderr, "%s: the report could not be written to standard output: %s\n", prog, strerror(errno));
        vf_report_free(&r);
        return EXIT_IO;
    }
    if (r.verdict == VF_UNCHECKED)
        fprintf(stderr, "%s: %s: no gate could be checked on any prompt (each prompt's \"not checked\" says what is "
                "missing), so nothing passed\n", prog, cand);
    code = r.verdict != VF_OK && strict ? EXIT_FAIL : EXIT_PASS;
    if (r.verdict != VF_OK && !strict)
        fprintf(stderr, "%s: %s, reported; exit status 0 (--no-strict)\n", prog, vf_overall_name(r.verdict));
    if ((html && vf_write_html(&r, html, &st)) || (md && vf_write_md(&r, md, &st))) {
        fprintf(stderr, "%s: %s\n", prog, st.msg);
        code = EXIT_IO;
    }
    vf_report_free(&r);
    return code;
}
