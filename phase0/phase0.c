/*
** phase0: the Phase 0 gates on a model's real weights, the list gates[] below,
** run in its order:
**   1 weights loadable: the generated loader loads every tensor with its shape
**   2 baseline runnable: the canonical prompt through the bf16 runner gives
**     finite, non-degenerate logits and a sane top-1
**   3 config consistent: every field of <id>_config_default(), and the architecture, equal config.json
** A short report (or --json), dumps for numpy (--dump), and the verdict
** recorded in models/<id>/docs/development_progress/progress.md and TODO.md.
** `phase0 capture` and `phase0 verify` are in verify/.
**
** A project builds this file for its own models (gm_phase0_program, or cc
** with pkg-config's genmodel-phase0), under whatever C standard it sets: so
** it asks for what it uses of POSIX (clock_gettime, setenv) itself, and
** compiles under -Wshadow.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gm/config.h"
#include "gm/cli.h"
#include "gm/embedded.h"
#include "gm/io.h"
#include "gm/kernels.h"
#include "gm/lock.h"
#include "gm/npy.h"
#include "gm/pool.h"
#include "gm/registry.h"
#include "gm/runner.h"
#include "gm/tokenizer.h"
#include "gm/utf8.h"
#include "config_check.h"
#include "prompt_file.h"
#include "record.h"
#include "verify.h"

extern const gm_embedded_file gm_prompts[]; /* prompts/base.txt, prompts/instruct.txt */

#ifndef GM_PHASE0_MODELS
#define GM_PHASE0_MODELS gm_models
#endif
extern const gm_model_entry *const GM_PHASE0_MODELS[]; /* the registry this program is linked with */

#ifndef GM_PHASE0_MODELS_DIR
#define GM_PHASE0_MODELS_DIR "models"
#endif

#ifndef GM_VERSION /* gm_phase0_program gives the installed version; a plain cc build may not */
#define GM_VERSION "(unversioned build)"
#endif

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_IO = 4 };

static const char usage_head[] =
    "usage: phase0 ID --weights DIR [--prompt TEXT | --tokens 1,2,3] [--instruct] [--json]\n"
    "              [--dump DIR] [--decode N] [--threads N] [--models DIR] [--no-record]\n"
    "       phase0 capture ID --weights DIR --out REF ...   the reference bundle for verify\n"
    "       phase0 verify REF CAND ...                      a candidate against it (Phases 2 and 3)\n"
    "\n"
    "Run Phase 0's gates for model ID (a folder under models/) on its real weights:\n";

static const char usage[] =
    "\n"
    "  --weights DIR   a model folder (config.json, safetensors, tokenizer.json) or a Hugging Face\n"
    "                  cache snapshot, as `gen-model download` prints; a quantized checkpoint's\n"
    "                  projections are dequantized to bf16 by its format's rule, and the gates run on those\n"
    "  --prompt TEXT   instead of the canonical prompt (\"The capital of France is\"; with\n"
    "                  --instruct, or an Instruct/Chat repo, the first instruct prompt)\n"
    "  --tokens LIST   token ids instead of a prompt (no tokenizer needed)\n"
    "  --json          the report as JSON on stdout\n"
    "  --dump DIR      logits.npy [T,V], embed.npy [T,H], layers.npy [L,T,H], final_norm.npy [T,H],\n"
    "                  tokens.npy [T], report.json, for numpy.load (report.json alone when the prefill\n"
    "                  did not run)\n"
    "  --decode N      then greedy-decode N tokens with the KV cache (tokens/s in the report)\n"
    "  --threads N     threads for the loader and the runner, 1 to 512 (default: GM_THREADS, else every\n"
    "                  core)\n"
    "  --models DIR    where models/<ID>/ lives, to record the verdict (default: " GM_PHASE0_MODELS_DIR ")\n"
    "  --no-record     leave progress.md and TODO.md alone\n"
    "  --version       the version, the runtime ABI and the kernel tier this CPU runs\n"
    "  --list          the model ids built in, one a line\n"
    "\n"
    "environment: GM_ISA=amx|avx512-bf16|avx512|avx2|portable runs that kernel tier instead of the widest\n"
    "this CPU has (the report names the tier that ran); GM_THREADS as --threads; GM_LOCK_TIMEOUT at most this many\n"
    "seconds to wait for models/<ID>/ while another run writes it (default: as long as it does)\n"
    "\n"
    "exit status: 0 all gates pass; 1 a gate failed; 2 usage; 4 file system error\n";

typedef struct gate {
    const char *name;
    int ran, pass;
    char detail[512];
    const char *cause, *where; /* from Phase 0's failure table */
} gate;

typedef struct run run;

/*
** The gates, in the order they run; each reads what the earlier ones left in
** the run (the weights gate 1 loaded, for gate 2). A new gate is an entry here.
*/
static void gate_weights(run *r, gate *g);
static void gate_baseline(run *r, gate *g);
static void gate_config(run *r, gate *g);

static const struct gate_def {
    const char *name, *what;
    void (*check)(run *r, gate *g);
} gates[] = {
    {"weights loadable", "every tensor of every layer loads with its shape", gate_weights},
    {"baseline runnable", "the canonical prompt gives finite, non-degenerate logits and a sane top-1", gate_baseline},
    {"config consistent", "the generated Config equals DIR/config.json", gate_config},
};

enum { N_GATES = sizeof gates / sizeof gates[0] };

struct run {
    const gm_model_entry *e;
    const char *weights, *prompt;
    char prompt_buf[1024];
    int32_t *tokens;
    int n_tokens;
    gm_tokenizer *tok;
    char tok_error[512]; /* why the tokenizer.json beside the weights could not be loaded ("" when it was, or is not there) */
    gate g[N_GATES];
    void *w;            /* the weights, once gate 1 loaded them (loaded) */
    int loaded;
    rt_layer *layers;
    rt_model m;         /* the runner's view of them */
    rt_options o;
    int have_top5;      /* the last position's logits were finite: top5*, logits_std, entropy_ratio hold */
    int logits_ok;      /* and gate 2 found them sane */
    int32_t top5[5];
    float top5_logit[5], top5_prob[5];
    char top5_text[5][64];
    double logits_std, entropy_ratio;
    double load_seconds, prefill_seconds, decode_seconds;
    int n_decode;       /* --decode N: greedy tokens after the prefill */
    int32_t *decoded;
    rt_result res;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set(gate *g, int pass, const char *cause, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void set(gate *g, int pass, const char *cause, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->detail, sizeof g->detail, fmt, ap);
    va_end(ap);
    g->ran = 1;
    g->pass = pass;
    g->cause = pass ? NULL : cause;
    g->where = pass ? NULL : where;
}

/* Prompt `skip` (from 0) of an embedded prompts file, read as verify reads one (prompt_file.h). */
static const char *canonical(const char *file, int skip, char *buf, size_t size)
{
    for (const gm_embedded_file *f = gm_prompts; f->name; f++) {
        if (strcmp(f->name, file) != 0)
            continue;
        p0_prompts ps;
        gm_status st = {0};
        const char *found = NULL;
        if (p0_prompts_read(f->name, f->data, strlen(f->data), skip + 1, &ps, &st) == 0 && ps.n > skip) {
            snprintf(buf, size, "%s", ps.p[skip].text);
            found = buf;
        }
        p0_prompts_free(&ps);
        return found;
    }
    return NULL;
}

/* The whole text of a canonical prompt file: "base" or "instruct" (for phase0 capture). */
static const char *prompt_file(const char *which)
{
    char name[64];
    snprintf(name, sizeof name, "prompts/%s.txt", which);
    for (const gm_embedded_file *f = gm_prompts; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f->data;
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* the gates */

static void gate_config(run *r, gate *g)
{
    char path[4096], diff[1024];
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/config.json", r->weights);
    if (p0_config_check(r->e, r->weights, diff, sizeof diff, &st)) {
        set(g, 0, access(path, R_OK) == 0 ? "config.json is not what the model's Config is read from: a field it "
            "needs is missing or malformed" : "config.json missing or unreadable",
            "the weights folder's config.json; gen-model download", "%s", st.msg);
        return;
    }
    if (diff[0])
        set(g, 0, "an extraction error (head_dim defaulted wrongly, tie_word_embeddings missed), or weights of "
                  "another model or revision", "config.json itself (never assume a default); regenerate with "
                  "gen-model from the repo these weights come from", "%s", diff);
    else
        set(g, 1, NULL, NULL, "every field of %s_config_default() and the architecture (%s) equal %s", r->e->id,
            r->e->arch, path);
}

/* " and dtype; the projections dequantized to bf16 from their AWQ tensors", or "" for a float checkpoint. */
static const char *dequantized(const gm_config *c)
{
    static const char *const what[] = {"", "; the projections dequantized to bf16 from their AWQ tensors "
        "(qweight, qzeros, scales)", "; the projections dequantized to bf16 from their GPTQ tensors (qweight, "
        "qzeros, scales, and g_idx where the checkpoint has one)", "; the projections dequantized to bf16 from their FP8 tensors (weight, "
        "weight_scale_inv)", "; the projections dequantized to bf16 from their Q4NX blocks"};
    return c->quant.method <= GM_QUANT_Q4NX ? what[c->quant.method] : "";
}

/*
** Progress where a person waits: on a terminal (stderr), one line rewritten
** in place while the weights load (the seconds so far) and while a prefill
** runs (the layers done); nothing when stderr is not a terminal.
*/
typedef struct ticker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    const char *what;
    double t0;
} ticker;

static void *tick(void *arg)
{
    ticker *k = arg;
    pthread_mutex_lock(&k->mu);
    while (!k->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&k->cv, &k->mu, &until);
        if (!k->done)
            fprintf(stderr, "\r  %s ... %.1f s", k->what, now() - k->t0);
    }
    pthread_mutex_unlock(&k->mu);
    fprintf(stderr, "\r\033[K");
    return NULL;
}

static void prefill_progress(void *ctx, int done, int n)
{
    (void)ctx;
    fprintf(stderr, done < n ? "\r  prefill: layer %d of %d" : "\r\033[K", done, n);
}

static void gate_weights(run *r, gate *g)
{
    gm_status st = {0};
    void *w = r->w;
    const double t0 = now();
    ticker k = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "loading the weights", t0};
    pthread_t th;
    const int show = isatty(STDERR_FILENO) && pthread_create(&th, NULL, tick, &k) == 0;
    const int rc = r->e->load(w, r->weights, &st);
    if (show) {
        pthread_mutex_lock(&k.mu);
        k.done = 1;
        pthread_cond_signal(&k.cv);
        pthread_mutex_unlock(&k.mu);
        pthread_join(th, NULL);
    }
    r->load_seconds = now() - t0;
    if (rc == 0) {
        r->loaded = 1;
        r->e->view(w, r->layers, &r->m);
        gm_config c;
        r->e->config(&c);
        set(g, 1, NULL, NULL, "every tensor of %d layers loaded with its shape%s in %.2f s%s", c.n_layers,
            c.quant.method ? " and dtype" : "", r->load_seconds, dequantized(&c));
    } else if (!p0_has_weights(r->weights)) {
        set(g, 0, "the weights are not there: a missing download, or a gated model without a token",
            "gen-model download <repo> (HF_TOKEN for gated models); the --weights folder", "%s", st.msg);
    } else {
        /* the likely cause follows the error: what went wrong says where to look */
        switch (st.code) {
        case GM_ESHORT:
            set(g, 0, "the download is incomplete: a file is shorter than its header says (an interrupted "
                "download or copy)", "fetch it again: gen-model download <repo> resumes and verifies it; or copy "
                "the file again", "%s", st.msg);
            break;
        case GM_ESHAPE:
        case GM_EDTYPE:
            set(g, 0, "a dtype or shape mismatch: the config extraction (head_dim, n_kv_heads, the hidden sizes) "
                "or the weights' dtype; for a quantized checkpoint, its quantization_config (group_size, "
                "weight_block_size) against its packed tensors", "config.json against the tensor's shape and dtype "
                "in the safetensors header; the generated Config", "%s", st.msg);
            break;
        case GM_EMISSING:
            set(g, 0, "a tensor is missing: HF names differ from the family's table (for a quantized checkpoint, "
                "from its format's parts)", "the safetensors index against the family's tensors "
                "(generator/lua/families.lua; quantized: generator/lua/quant.lua); the weights of another model?",
                "%s", st.msg);
            break;
        case GM_EIO:
        case GM_ENOMEM:
            if (strstr(st.msg, strerror(ENOENT))) /* a file the index names is not there */
                set(g, 0, "the download is incomplete: a shard the index names is not there", "fetch it again: "
                    "gen-model download <repo> fetches what is missing", "%s", st.msg);
            else
                set(g, 0, "the weights could not be read: the file system or memory", "the file and the error "
                    "named here", "%s", st.msg);
            break;
        default:
            set(g, 0, "a malformed safetensors file or index: a corrupt download, or not safetensors", "the file "
                "named here; fetch it again (gen-model download <repo>)", "%s", st.msg);
            break;
        }
    }
}

/*
** The first weight of the model that is NaN or Inf, as "layers[3].w_gate"
** (the runner's names), with how many of its values are; 0 when all are finite.
*/
static long nonfinite_weights(const rt_model *m, char *name, size_t size)
{
    const gm_config *c = &m->cfg;
    const long H = c->emb_dim, F = c->hidden_dim, V = c->vocab_size, D = c->head_dim;
    const long Q = (long)c->n_heads * D, KV = (long)c->n_kv_heads * D;
    struct { const char *field; long n; size_t off; } per_layer[] = {
        {"attn_norm", H, offsetof(rt_layer, attn_norm)}, {"ffn_norm", H, offsetof(rt_layer, ffn_norm)},
        {"wq", H * Q, offsetof(rt_layer, wq)}, {"wk", H * KV, offsetof(rt_layer, wk)},
        {"wv", H * KV, offsetof(rt_layer, wv)}, {"wo", Q * H, offsetof(rt_layer, wo)},
        {"bq", Q, offsetof(rt_layer, bq)}, {"bk", KV, offsetof(rt_layer, bk)}, {"bv", KV, offsetof(rt_layer, bv)},
        {"q_norm", D, offsetof(rt_layer, q_norm)}, {"k_norm", D, offsetof(rt_layer, k_norm)},
        {"w_gate", H * F, offsetof(rt_layer, w_gate)}, {"w_up", H * F, offsetof(rt_layer, w_up)},
        {"w_down", F * H, offsetof(rt_layer, w_down)}};
    struct { const char *field; long n; const gm_bf16 *w; } whole[] = {
        {"tok_embd", V * H, m->tok_embd}, {"out_norm", H, m->out_norm}, {"lm_head", V * H, m->lm_head}};
    long bad;
#define COUNT(w, n)                                                                                    \
    do {                                                                                               \
        bad = 0;                                                                                       \
        for (long k = 0; (w) && k < (n); k++)                                                          \
            bad += ((w)[k] & 0x7F80) == 0x7F80; /* all exponent bits set: Inf or NaN */                \
    } while (0)
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        COUNT(whole[i].w, whole[i].n);
        if (bad) {
            snprintf(name, size, "%s", whole[i].field);
            return bad;
        }
    }
    for (int l = 0; l < c->n_layers; l++)
        for (size_t i = 0; i < sizeof per_layer / sizeof per_layer[0]; i++) {
            const gm_bf16 *w; /* the field at its offset, copied out (no cast that would ask more alignment) */
            memcpy(&w, (const char *)&m->layers[l] + per_layer[i].off, sizeof w);
            COUNT(w, per_layer[i].n);
            if (bad) {
                snprintf(name, size, "layers[%d].%s", l, per_layer[i].field);
                return bad;
            }
        }
#undef COUNT
    return 0;
}

/* The prompt's ids: --tokens, or the prompt through the model's tokenizer. */
static int prompt_tokens(run *r, gm_status *st)
{
    if (r->tokens)
        return 0;
    if (!r->prompt) {
        r->prompt = canonical(p0_is_instruct(r->e->repo) ? "prompts/instruct.txt" : "prompts/base.txt",
                              p0_is_instruct(r->e->repo) ? 0 : 1, r->prompt_buf, sizeof r->prompt_buf);
    }
    if (!r->tok && r->tok_error[0]) /* there, and broken: that, not its absence */
        return gm_fail(st, GM_EFORMAT, "%s; the prompt needs the model's tokenizer.json (or pass --tokens)",
                       r->tok_error);
    if (!r->tok)
        return gm_fail(st, GM_EMISSING, "%s: no tokenizer.json to tokenize the prompt; put the tokenizer files "
                       "there (gen-model download fetches them) or pass --tokens", r->weights);
    size_t n = 0;
    if (gm_tokenizer_encode(r->tok, r->prompt, strlen(r->prompt), 1, 1, &r->tokens, &n, st))
        return st->code;
    r->n_tokens = (int)n;
    return 0;
}

static int is_special(const run *r, const gm_config *c, int32_t id)
{
    if (r->tok)
        return gm_tokenizer_is_special(r->tok, id);
    if (id == c->bos_token_id)
        return 1;
    for (int i = 0; i < c->n_eos_token_ids; i++)
        if (id == c->eos_token_ids[i])
            return 1;
    return 0;
}

static void gate_baseline(run *r, gate *g)
{
    gm_status st = {0};
    const rt_model *m = &r->m;
    const rt_options *o = &r->o;
    if (!r->loaded) {
        set(g, 0, "not run: the weights did not load", "gate 1", "skipped");
        return;
    }
    if (prompt_tokens(r, &st)) {
        set(g, 0, "tokenizer mismatch or missing: wrong BOS handling or chat template", "the tokenizer files; "
            "base vs instruct prompts", "%s", st.msg);
        return;
    }
    rt_session *s = NULL;
    double t0 = 0;
    rt_options with_progress = *o;
    if (isatty(STDERR_FILENO))
        with_progress.progress = prefill_progress;
    o = &with_progress;
    /* the positions that run: the last decoded token is not run */
    p0_note_positions("phase0", &m->cfg, r->n_tokens + (r->n_decode > 0 ? r->n_decode - 1 : 0));
    if (rt_session_new(&s, m, o, r->n_tokens + r->n_decode, &st) ||
        (t0 = now(), rt_prefill(s, r->tokens, r->n_tokens, &r->res, &st))) {
        /* --tokens out of the vocab is refused before the gates: ids a tokenizer gave are the tokenizer's */
        set(g, 0, "the prompt could not run",
            r->prompt ? "the tokenizer.json beside the weights: its ids against the model's vocab_size"
                      : "the --tokens ids; the model's vocab_size",
            "%s", st.msg);
        rt_session_free(s);
        return;
    }
    r->prefill_seconds = now() - t0;
    if (r->n_decode > 0) { /* greedy decode with the KV cache */
        r->decoded = malloc(sizeof *r->decoded * (size_t)r->n_decode);
        int32_t next = r->res.top1;
        rt_result step;
        t0 = now();
        for (int i = 0; r->decoded && i < r->n_decode; i++) {
            r->decoded[i] = next;
            if (i + 1 < r->n_decode) {
                if (rt_decode_step(s, next, &step, &st))
                    break;
                next = step.top1;
                rt_result_free(&step);
            }
        }
        r->decode_seconds = now() - t0;
    }
    rt_session_free(s);

    const int V = r->res.vocab;
    const float *lg = r->res.logits + (long)(r->res.logit_rows - 1) * V;
    int bad = 0;
    double sum = 0, sq = 0, max = -INFINITY;
    for (int i = 0; i < V; i++) {
        bad += !isfinite(lg[i]);
        sum += lg[i];
        sq += (double)lg[i] * lg[i];
        max = lg[i] > max ? lg[i] : max;
    }
    if (bad) {
        char name[64];
        const long in_weights = nonfinite_weights(m, name, sizeof name);
        if (in_weights > 0)
            set(g, 0, "NaN or Inf in the weights: a corrupt download", "fetch the weights again (gen-model download "
                "<repo>); the file that holds this tensor", "%d of %d logits are NaN or Inf; the weights hold "
                "them: %s has %ld", bad, V, name, in_weights);
        else
            set(g, 0, "a dtype problem in loading (every weight is finite)", "the bf16 path: the loader's "
                "conversions and the runner", "%d of %d logits are NaN or Inf", bad, V);
        return;
    }
    /* softmax, its entropy against the uniform distribution's log V */
    double z = 0, ent = 0;
    for (int i = 0; i < V; i++)
        z += exp(lg[i] - max);
    for (int i = 0; i < V; i++) {
        const double p = exp(lg[i] - max) / z;
        if (p > 0)
            ent -= p * log(p);
    }
    r->logits_std = sqrt(fmax(sq / V - (sum / V) * (sum / V), 0.0));
    r->entropy_ratio = ent / log((double)V);
    rt_top_k(lg, V, 5, r->top5);
    r->have_top5 = 1;
    for (int i = 0; i < 5; i++) {
        r->top5_logit[i] = lg[r->top5[i]];
        r->top5_prob[i] = (float)(exp(lg[r->top5[i]] - max) / z);
        r->top5_text[i][0] = '\0';
        char *text = NULL;
        size_t len = 0;
        gm_status ignore = {0};
        if (r->tok && gm_tokenizer_decode(r->tok, &r->top5[i], 1, 0, &text, &len, &ignore) == 0)
            p0_cut(r->top5_text[i], sizeof r->top5_text[i], text);
        free(text);
    }
    gm_config c;
    r->e->config(&c);
    const int32_t top = r->top5[0];
    /* degenerate: constant logits (std < 1e-3) or near-uniform probabilities (entropy > 99% of log V) */
    if (r->logits_std < 1e-3 || r->entropy_ratio > 0.99)
        set(g, 0, "a dtype problem in loading, or a corrupt download", "re-download; the bf16 path",
            "degenerate logits: std %.3g (must be >= 1e-3), entropy %.4f of log V (must be <= 0.99)", r->logits_std,
            r->entropy_ratio);
    else if (top < 0 || top >= c.vocab_size || is_special(r, &c, top))
        set(g, 0, "tokenizer mismatch: wrong BOS handling or chat template", "the tokenizer files; base vs "
            "instruct prompts", "top-1 %d is %s", top, top < 0 || top >= c.vocab_size ? "out of range" : "a special token");
    else
        set(g, r->logits_ok = 1, NULL, NULL, "%d tokens, top-1 %d (logit %.4g, p %.3f); logits finite, std %.3g, "
            "entropy %.3f of log V", r->n_tokens, top, r->top5_logit[0], r->top5_prob[0], r->logits_std,
            r->entropy_ratio);
}

/* ---------------------------------------------------------------------- */
/* the report */

static int all_pass(const run *r)
{
    for (int i = 0; i < N_GATES; i++)
        if (!r->g[i].pass)
            return 0;
    return 1;
}

static void print_text(const run *r)
{
    char shown[2048]; /* the prompt on one line: a line break in it must not start a line of the report */
    gm_config c;
    r->e->config(&c);
    printf("phase0 %s (%s @ %.12s) on %s\n", r->e->id, r->e->repo, r->e->commit[0] ? r->e->commit : "local",
           r->weights);
    if (r->prompt)
        printf("prompt: \"%s\"\n", p0_shown(r->prompt, shown, sizeof shown));
    if (r->tokens) {
        printf("tokens (%d):", r->n_tokens);
        for (int i = 0; i < r->n_tokens && i < 32; i++)
            printf(" %d", r->tokens[i]);
        printf("%s\n", r->n_tokens > 32 ? " ..." : "");
    }
    if (r->have_top5) {
        printf("top-5 at the last position:\n");
        for (int i = 0; i < 5; i++) {
            char t[160], q[170] = "";
            p0_shown(r->top5_text[i], t, sizeof t);
            if (r->tok)
                snprintf(q, sizeof q, "\"%s\"", t);
            printf("  %d. %7d  %-22s logit %9.4f  p %.4f\n", i + 1, r->top5[i], q, r->top5_logit[i], r->top5_prob[i]);
        }
        printf("logits: std %.4f, entropy %.4f of the uniform's (degenerate would be std < 0.001 or entropy > 0.99)\n",
               r->logits_std, r->entropy_ratio);
    }
    for (int i = 0; i < N_GATES; i++) {
        const gate *g = &r->g[i];
        printf("gate %d %-19s %s  %s\n", i + 1, g->name, g->pass ? "PASS" : "FAIL", g->detail);
        if (!g->pass)
            printf("       likely cause: %s\n       where to look: %s\n", g->cause, g->where);
    }
    if (r->decoded) {
        printf("greedy decode (%d tokens, %.2f tokens/s):", r->n_decode,
               r->decode_seconds > 0 ? (r->n_decode - 1) / r->decode_seconds : 0.0);
        for (int i = 0; i < r->n_decode; i++)
            printf(" %d", r->decoded[i]);
        printf("\n");
        if (r->tok) {
            char *text = NULL, shown_text[600];
            size_t len = 0;
            gm_status ignore = {0};
            if (gm_tokenizer_decode(r->tok, r->decoded, (size_t)r->n_decode, 0, &text, &len, &ignore) == 0) {
                p0_shown(text, shown_text, sizeof shown_text);
                printf("  \"%s\"\n", shown_text);
            }
            free(text);
        }
    }
    printf("Phase 0: %s  (load %.2f s, prefill %.3f s; kernels: %s)\n", all_pass(r) ? "PASS" : "FAIL",
           r->load_seconds, r->prefill_seconds, gm_kernels_name());
}

static cJSON *report_json(const run *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", r->e->id);
    cJSON_AddStringToObject(j, "repo", r->e->repo);
    cJSON_AddStringToObject(j, "commit", r->e->commit);
    cJSON_AddStringToObject(j, "weights", r->weights);
    if (r->prompt)
        cJSON_AddStringToObject(j, "prompt", r->prompt);
    cJSON *toks = cJSON_AddArrayToObject(j, "tokens");
    for (int i = 0; r->tokens && i < r->n_tokens; i++)
        cJSON_AddItemToArray(toks, cJSON_CreateNumber(r->tokens[i]));
    cJSON *ran = cJSON_AddArrayToObject(j, "gates");
    for (int i = 0; i < N_GATES; i++) {
        cJSON *g = cJSON_CreateObject();
        cJSON_AddNumberToObject(g, "gate", i + 1);
        cJSON_AddStringToObject(g, "name", r->g[i].name);
        cJSON_AddBoolToObject(g, "pass", r->g[i].pass);
        cJSON_AddStringToObject(g, "detail", r->g[i].detail);
        if (!r->g[i].pass) {
            cJSON_AddStringToObject(g, "likely_cause", r->g[i].cause);
            cJSON_AddStringToObject(g, "where_to_look", r->g[i].where);
        }
        cJSON_AddItemToArray(ran, g);
    }
    if (r->have_top5) {
        cJSON *top = cJSON_AddArrayToObject(j, "top5");
        for (int i = 0; i < 5; i++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "id", r->top5[i]);
            if (r->tok)
                cJSON_AddStringToObject(t, "text", r->top5_text[i]);
            cJSON_AddNumberToObject(t, "logit", r->top5_logit[i]);
            cJSON_AddNumberToObject(t, "probability", r->top5_prob[i]);
            cJSON_AddItemToArray(top, t);
        }
        cJSON_AddNumberToObject(j, "logits_std", r->logits_std);
        cJSON_AddNumberToObject(j, "entropy_ratio", r->entropy_ratio);
    }
    cJSON_AddStringToObject(j, "kernels", gm_kernels_name()); /* the instruction-set tier that ran: GM_ISA's names */
    cJSON_AddNumberToObject(j, "load_seconds", r->load_seconds);
    cJSON_AddNumberToObject(j, "prefill_seconds", r->prefill_seconds);
    if (r->decoded) {
        cJSON *d = cJSON_AddArrayToObject(j, "decode_tokens");
        for (int i = 0; i < r->n_decode; i++)
            cJSON_AddItemToArray(d, cJSON_CreateNumber(r->decoded[i]));
        /* the first token comes from the prefill; the other n - 1 are decode steps */
        cJSON_AddNumberToObject(j, "decode_tokens_per_second",
                                r->decode_seconds > 0 ? (r->n_decode - 1) / r->decode_seconds : 0.0);
    }
    cJSON_AddBoolToObject(j, "pass", all_pass(r));
    return j;
}

/* The Phase 0 entry of progress.md. */
static void progress_entry(const run *r, char *out, size_t size)
{
    gm_config c;
    r->e->config(&c);
    char date[32], text[160], top[200], verdicts[4000] = "", detail[1200], why[1300];
    const time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&t));
    if (r->tok) /* the top-1 as text where there is a tokenizer, else as its id */
        snprintf(top, sizeof top, "\"%s\" (id %d)", p0_md(r->top5_text[0], 0, text, sizeof text), r->top5[0]);
    else
        snprintf(top, sizeof top, "id %d", r->top5[0]);
    for (int i = 0, k = 0; i < N_GATES && k < (int)sizeof verdicts; i++) { /* a failed gate with what it said */
        why[0] = '\0';
        if (!r->g[i].pass)
            snprintf(why, sizeof why, " (%s)", p0_md(r->g[i].detail, 0, detail, sizeof detail));
        k += snprintf(verdicts + k, sizeof verdicts - (size_t)k, "%s%d %s %s%s", i ? "; " : "", i + 1, gates[i].name,
                      r->g[i].pass ? "PASS" : "FAIL", why);
    }
    char baseline[3000], prompt[2000], weights[4200];
    if (r->have_top5) /* the numbers gate 2 measured, and only those */
        snprintf(baseline, sizeof baseline, "%s%s%s%d tokens; top-1 %s, logit %.4f, probability %.4f; "
                 "logits %s (std %.3f, entropy %.3f of uniform)", r->prompt ? "prompt \"" : "",
                 r->prompt ? p0_md(r->prompt, 0, prompt, sizeof prompt) : "", r->prompt ? "\", " : "", r->n_tokens,
                 top, r->top5_logit[0], r->top5_prob[0], r->logits_ok ? "OK" : "not OK", r->logits_std,
                 r->entropy_ratio);
    else if (r->res.logits) /* it ran, and its logits were not finite: nothing to show but what gate 2 said */
        snprintf(baseline, sizeof baseline, "ran, logits not finite (%s)", p0_md(r->g[1].detail, 0, prompt, sizeof prompt));
    else if (r->g[1].cause && strncmp(r->g[1].cause, "not run", 7) == 0) /* it never ran, and says why */
        snprintf(baseline, sizeof baseline, "%s", r->g[1].cause);
    else /* it stopped before the prefill (its detail may name a path) */
        snprintf(baseline, sizeof baseline, "not run (%s: %s)", r->g[1].cause ? r->g[1].cause : "?",
                 p0_md(r->g[1].detail, 0, prompt, sizeof prompt));
    snprintf(out, size,
             "## Phase 0: %s (%s)\n"
             "- Model: %s @ %s (`%s`), weights from %s\n"
             "- Resolved config: n_layers %d, emb_dim %d, n_heads %d, n_kv_heads %d, head_dim %d, hidden_dim %d, "
             "vocab %d, rope_base %.17g, tie_word_embeddings %s\n"
             "- CPU helpers kept: rms_norm, attention_reference, softmax\n"
             "- Baseline: %s\n"
             "- Gates: %s\n",
             all_pass(r) ? "PASS" : "FAIL", date, r->e->repo, r->e->commit[0] ? r->e->commit : "(local)", r->e->id,
             p0_md(r->weights, 1, weights, sizeof weights), c.n_layers, c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size,
             c.rope_base, c.tie_word_embeddings ? "true" : "false", baseline, verdicts);
}

static int record(const run *r, const char *models_dir, gm_status *st)
{
    char dir[4096], entry[12288], blocker[2600] = "", detail[1800];
    snprintf(dir, sizeof dir, "%s/%s", models_dir, r->e->id);
    for (int i = 0; i < N_GATES && !blocker[0]; i++) /* what failed, as the report says it, then why and what next */
        if (!r->g[i].pass)
            snprintf(blocker, sizeof blocker, "Phase 0 gate %d (%s) fails: %s (likely cause: %s; next: %s)", i + 1,
                     r->g[i].name, p0_md(r->g[i].detail, 0, detail, sizeof detail), r->g[i].cause, r->g[i].where);
    progress_entry(r, entry, sizeof entry);
    /* the folder's lock (gen-model takes it too): two records at once each read what the other wrote */
    const int lock = gm_lock_folder(dir, st);
    if (lock < 0)
        return st->code;
    if (p0_record_progress(dir, entry, st) == 0)
        p0_record_todo(dir, all_pass(r), blocker[0] ? blocker : NULL, st);
    gm_unlock(lock);
    return st->code;
}

static int dump(const run *r, const char *dir, gm_status *st)
{
    char path[4096];
    const rt_result *x = &r->res;
    const int64_t T = x->n_tokens, V = x->vocab, H = x->emb, L = x->n_layers;
    if (gm_mkdir_p(dir, st))
        return st->code;
    struct { const char *name; gm_npy_type type; int rank; int64_t shape[3]; const void *data; } files[] = {
        {"tokens.npy", GM_NPY_I4, 1, {T}, r->tokens},
        {"logits.npy", GM_NPY_F4, 2, {T, V}, x->logits},
        {"embed.npy", GM_NPY_F4, 2, {T, H}, x->embed},
        {"layers.npy", GM_NPY_F4, 3, {L, T, H}, x->layers},
        {"final_norm.npy", GM_NPY_F4, 2, {T, H}, x->final_norm},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        if (!x->logits) { /* the prefill never ran: report.json alone, and no earlier run's arrays left to mislead */
            if (unlink(path) != 0 && errno != ENOENT)
                return gm_fail(st, GM_EIO, "%s: cannot remove an earlier run's file: %s", path, strerror(errno));
            continue;
        }
        if (gm_npy_write(path, files[i].type, files[i].rank, files[i].shape, files[i].data, st))
            return st->code;
    }
    cJSON *j = report_json(r);
    char *text = cJSON_Print(j);
    snprintf(path, sizeof path, "%s/report.json", dir);
    gm_write_parts(path, (const gm_part[]){{text, strlen(text)}, {"\n", 1}}, 2, st);
    cJSON_free(text);
    cJSON_Delete(j);
    return st->code;
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"weights", required_argument, 0, 'w'}, {"prompt", required_argument, 0, 'p'},
        {"tokens", required_argument, 0, 't'},  {"instruct", no_argument, 0, 'i'},
        {"json", no_argument, 0, 'j'},          {"dump", required_argument, 0, 'd'},
        {"threads", required_argument, 0, 'T'}, {"models", required_argument, 0, 'm'},
        {"no-record", no_argument, 0, 'n'},     {"help", no_argument, 0, 'h'},
        {"decode", required_argument, 0, 'D'},  {"version", no_argument, 0, 'V'},
        {"list", no_argument, 0, 'L'},
        {0, 0, 0, 0}};
    const char *env_threads = getenv("GM_THREADS"); /* checked here, as --threads is: the pool reads it later */
    if (env_threads && *env_threads && gm_threads_parse(env_threads) < 0) {
        fprintf(stderr, "phase0: GM_THREADS: expected a whole number in [1, %d], found '%s'\n", GM_MAX_THREADS,
                env_threads);
        return EXIT_USAGE;
    }
    gm_status env = {0};
    if (gm_lock_check_env(&env)) { /* before the work, not when the record waits for its lock */
        fprintf(stderr, "phase0: %s\n", env.msg);
        return EXIT_USAGE;
    }
    if (argc > 1 && (strcmp(argv[1], "capture") == 0 || strcmp(argv[1], "verify") == 0)) {
        gm_status isa = {0};
        if (gm_kernels_check(&isa)) {
            fprintf(stderr, "phase0: %s\n", isa.msg);
            return EXIT_USAGE;
        }
        return strcmp(argv[1], "capture") == 0 ? vf_capture_main(argc - 1, argv + 1, GM_PHASE0_MODELS, prompt_file)
                                               : vf_verify_main(argc - 1, argv + 1, GM_PHASE0_MODELS, prompt_file);
    }
    run r = {0};
    const char *dump_dir = NULL, *models_dir = GM_PHASE0_MODELS_DIR, *tokens_arg = NULL;
    int json = 0, no_record = 0, instruct = 0, c;
    gm_status isa = {0};
    if (gm_kernels_check(&isa)) { /* before anything is allocated */
        fprintf(stderr, "phase0: %s\n", isa.msg);
        return EXIT_USAGE;
    }
    rt_options *o = &r.o;
    *o = (rt_options){.precision = RT_BF16, .diagnosis = 0, .threads = 0};
    while ((c = getopt_long(argc, argv, ":w:p:t:ijd:T:m:nhD:VL", longopts, NULL)) != -1) {
        switch (c) {
        case 'w': r.weights = optarg; break;
        case 'p': r.prompt = optarg; break;
        case 't': tokens_arg = optarg; break; /* read once every other check has passed: nothing to free before */
        case 'i': instruct = 1; break;
        case 'j': json = 1; break;
        case 'd': dump_dir = optarg; o->diagnosis = 1; break;
        case 'T':
            if ((o->threads = gm_threads_parse(optarg)) < 0) {
                fprintf(stderr, "phase0: --threads: expected a whole number in [1, %d], found '%s'\n", GM_MAX_THREADS,
                        optarg);
                return EXIT_USAGE;
            }
            setenv("GM_THREADS", optarg, 1); /* the loader's threads too */
            break;
        case 'D':
            if ((r.n_decode = (int)gm_cli_count(optarg, 1, 4096)) < 0) {
                fprintf(stderr, "phase0: --decode: expected a token count in [1, 4096], found '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'm': models_dir = optarg; break;
        case 'n': no_record = 1; break;
        case 'h':
            fputs(usage_head, stdout);
            for (int i = 0; i < N_GATES; i++)
                printf("  %d %-18s %s\n", i + 1, gates[i].name, gates[i].what);
            fputs(usage, stdout);
            return EXIT_PASS;
        case 'L': /* the built-in model ids, one a line (for shell completion) */
            GM_FOR_EACH_MODEL(e, GM_PHASE0_MODELS)
                puts(e->id);
            return EXIT_PASS;
        case 'V':
            printf("phase0 %s (runtime ABI %d, kernels %s)\n", GM_VERSION, GM_RUNTIME_ABI, gm_kernels_name());
            return EXIT_PASS;
        default: gm_cli_bad_option("phase0", c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !r.weights) {
        fprintf(stderr, "phase0: expected a model id and --weights DIR; see phase0 --help\n");
        return EXIT_USAGE;
    }
    if (!(r.e = gm_registry_find(GM_PHASE0_MODELS, argv[optind]))) {
        fprintf(stderr, "phase0: no model '%s' is built in; scaffold it with gen-model, rebuild, and run again "
                "(built in:", argv[optind]);
        GM_FOR_EACH_MODEL(e, GM_PHASE0_MODELS)
            fprintf(stderr, " %s", e->id);
        fprintf(stderr, ")\n");
        return EXIT_USAGE;
    }
    if ((r.prompt || instruct) && tokens_arg) {
        fprintf(stderr, "phase0: --%s and --tokens each choose the prompt: give one of them\n",
                r.prompt ? "prompt" : "instruct");
        return EXIT_USAGE;
    }
    if (r.prompt && !*r.prompt) {
        fprintf(stderr, "phase0: --prompt: expected text, found an empty string; leave it out for the canonical "
                "prompt\n");
        return EXIT_USAGE;
    }
    const size_t bad = r.prompt ? gm_utf8_check(r.prompt, strlen(r.prompt)) : 0;
    if (r.prompt && r.prompt[bad]) { /* a typo, not a tokenizer at fault: nothing is run or recorded */
        fprintf(stderr, "phase0: --prompt: expected UTF-8 text, found byte 0x%02x at offset %zu\n",
                (unsigned char)r.prompt[bad], bad);
        return EXIT_USAGE;
    }
    if (instruct && !r.prompt)
        r.prompt = canonical("prompts/instruct.txt", 0, r.prompt_buf, sizeof r.prompt_buf);

    /* a typo is not a gate failure: nothing runs, and nothing recorded is replaced */
    struct stat wsb;
    const int found = stat(r.weights, &wsb) == 0;
    if (!found || !S_ISDIR(wsb.st_mode)) {
        fprintf(stderr, "phase0: --weights %s: expected a model folder, found %s; give the folder of config.json and "
                "the safetensors (gen-model download ORG/NAME prints it)\n", r.weights,
                found ? "a file" : errno == ENOENT ? "none" : strerror(errno));
        return EXIT_USAGE;
    }
    /* where the verdict goes, before the gates run rather than after */
    if (!no_record) {
        static const char *const docs[] = {"TODO.md", "docs/development_progress/progress.md"};
        for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
            char doc[4400];
            snprintf(doc, sizeof doc, "%s/%s/%s", models_dir, r.e->id, docs[i]);
            if (access(doc, R_OK | W_OK) != 0) {
                fprintf(stderr, "phase0: %s: cannot record the verdict there (%s); give --models DIR, the folder "
                        "that holds %s/ (gen-model regen writes its documents again), or --no-record\n", doc,
                        strerror(errno), r.e->id);
                return EXIT_USAGE;
            }
        }
    }

    char tpath[4096];
    gm_status st = {0};
    if (dump_dir && gm_check_output("--dump", dump_dir, 1, &st)) { /* before the work, not after it */
        fprintf(stderr, "phase0: %s\n", st.msg);
        return EXIT_USAGE; /* (as capture's and verify's outputs: a place given that cannot be written) */
    }
    if (tokens_arg && vf_parse_ids(tokens_arg, &r.tokens, &r.n_tokens)) {
        fprintf(stderr, "phase0: --tokens: expected ids like 1,2,3, found '%s'\n", tokens_arg);
        return EXIT_USAGE;
    }
    gm_config cfg;
    r.e->config(&cfg);
    for (int i = 0; i < r.n_tokens; i++) /* positions from 0, as the runner's, verify's and Python's */
        if (r.tokens[i] < 0 || r.tokens[i] >= cfg.vocab_size) {
            fprintf(stderr, "phase0: --tokens: expected ids in [0, %d) (%s's vocab_size), found %d at position %d\n",
                    cfg.vocab_size, r.e->id, (int)r.tokens[i], i);
            free(r.tokens);
            return EXIT_USAGE;
        }
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", r.weights);
    struct stat sb;
    if (stat(tpath, &sb) == 0 && gm_tokenizer_load(&r.tok, tpath, &st)) {
        snprintf(r.tok_error, sizeof r.tok_error, "%s", st.msg);
        if (tokens_arg) /* the ids are given: the tokenizer would only have shown the top-5 as text */
            fprintf(stderr, "phase0: warning: %s; the top-5 is shown without text\n", st.msg);
        gm_status_clear(&st);
    }

    r.w = calloc(1, r.e->weights_size);
    r.layers = calloc((size_t)r.e->n_layers, sizeof *r.layers);
    if (!r.w || !r.layers) {
        fprintf(stderr, "phase0: out of memory\n");
        return EXIT_IO;
    }
    for (int i = 0; i < N_GATES; i++) {
        r.g[i].name = gates[i].name;
        gates[i].check(&r, &r.g[i]);
    }

    if (json) {
        cJSON *j = report_json(&r);
        char *text = cJSON_Print(j);
        puts(text);
        cJSON_free(text);
        cJSON_Delete(j);
    } else {
        print_text(&r);
    }
    int code = all_pass(&r) ? EXIT_PASS : EXIT_FAIL;
    if (!no_record && record(&r, models_dir, &st)) {
        fprintf(stderr, "phase0: could not record the verdict: %s\n", st.msg);
        code = EXIT_IO;
    }
    if (dump_dir && dump(&r, dump_dir, &st)) {
        fprintf(stderr, "phase0: %s\n", st.msg);
        code = EXIT_IO;
    }
    if (r.loaded)
        r.e->free(r.w);
    free(r.w);
    free(r.layers);
    free(r.tokens);
    free(r.decoded);
    rt_result_free(&r.res);
    gm_tokenizer_free(r.tok);
    return code;
}
