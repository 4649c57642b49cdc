/*
** What the files of phase0/verify/ share among themselves (verify.h is what
** phase0.c and the tests see): a bundle's files (bundle.c), mlir-air's NPU
** capture (gatefile.c), capture (capture.c), the comparison (compare.c) and
** the text, JSON and Markdown reports.
*/
#ifndef GM_PHASE0_VERIFY_INTERNAL_H
#define GM_PHASE0_VERIFY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gm/npy.h"
#include "gm/registry.h"
#include "verify.h"

#define VF_FORMAT "gm-verify/1"

enum { VF_MAX_PROMPTS = 256 };

/* ---------------------------------------------------------------- bundle.c */

/* dir/prompt/file (prompt NULL: dir/file); a path too long becomes "" and fails where it is opened */
void vf_path(char *out, size_t size, const char *dir, const char *prompt, const char *file);

/* "fnv1a64:<hex>", FNV-1a over the bytes of the tokenizer.json at path (enough to tell two apart); "none" without one */
void vf_tokenizer_id(const char *path, char *out, size_t size);

int vf_save(const char *dir, const char *prompt, const char *file, gm_npy_type type, int rank, const int64_t *shape,
            const void *data, gm_status *st);

/*
** bundle/prompt/file as `type` of `shape` (a -1 extent takes any size, then
** filled in). Absent: NULL with st clear (the caller decides whether it may
** be); wrong type or shape: NULL with one line naming the file and the field.
*/
void *vf_load(const char *dir, const char *prompt, const char *file, gm_npy_type type, int rank, int64_t *shape,
              gm_status *st);

/* The manifest's fields that say which model and tokenizer a bundle is of, and its prompts. */
typedef struct vf_manifest {
    char model[160], commit[96], kernels[32], tokenizer[32], precision[16]; /* model: an id of up to 128 (GM_MODEL_ID_MAX) */
    int vocab, n_layers, emb, head_dim, top_k, steps, n_prompts;
    double rope_theta;            /* the RoPE theta it ran with; 0: not recorded */
    char names[VF_MAX_PROMPTS][16];
    char *texts[VF_MAX_PROMPTS];
    int n_op_layers, *op_layers;  /* "ops": the layers whose ops the bundle holds (malloc'd) */
    int op_width[RT_N_OPS];       /* each op's width; 0: not in the bundle */
} vf_manifest;

/* dir/manifest.json: `format`, `model` and `prompts` required; the shapes when present. */
int vf_manifest_read(const char *dir, vf_manifest *m, gm_status *st);
void vf_manifest_free(vf_manifest *m);

/* A prompt to capture: its text (NULL: given as ids), its ids, its folder's name ("": p000, p001, ...). */
typedef struct vf_prompt_in {
    char *text;
    int32_t *ids;
    int n;
    char name[16];
} vf_prompt_in;

/* Prompt i's folder: its own name, or p000, p001, ... */
const char *vf_prompt_name(const vf_prompt_in *in, int i, char *buf, size_t size);

/* The manifest of a capture into dir/manifest.json; ops[layer] nonzero: that layer's ops are captured (NULL none). */
int vf_manifest_write(const char *dir, const gm_model_entry *e, const rt_model *m, const char *weights, int steps,
                      const vf_prompt_in *in, int n, int f32, const unsigned char *ops, gm_status *st);

/* The width of op's output in model m, 0 when m's family has no such op (Qwen3's q_norm and k_norm). */
int vf_op_width(const rt_model *m, rt_op op);

/* <prompt>/ops/<layer>/<op>.npy under dir, as vf_path makes paths. */
void vf_op_path(char *out, size_t size, const char *dir, const char *prompt, int layer, rt_op op);

/* ---------------------------------------------------------------- gatefile.c */

/* One prompt of mlir-air's NPU capture: `steps` chosen ids and each step's top-k (its first VF_GATE_K ids). */
typedef struct vf_gate_prompt {
    int steps;
    int32_t *chosen;  /* [steps] */
    int32_t *topk;    /* [steps][VF_GATE_K] */
} vf_gate_prompt;

typedef struct vf_gate_file {
    int n;
    vf_gate_prompt *p;  /* p[i]: member "i" */
} vf_gate_file;

/*
** The file verify_runner.py --gate-phase capture-npu --gate-file F writes:
** prompts "0" .. "n-1" (exactly n of them; with at_least, n or more), ids in
** [0, vocab). Anything else is one line naming the file and the field.
*/
int vf_gate_file_read(const char *path, int n, int at_least, int vocab, vf_gate_file *g, gm_status *st);
void vf_gate_file_free(vf_gate_file *g);

/* ---------------------------------------------------------------- capture.c */

typedef struct vf_capture_opts {
    const char *prog;   /* for the notes on stderr */
    int steps;          /* greedy steps after the prefill */
    const unsigned char *ops; /* [n_layers]: nonzero, that layer's ops are captured too (NULL: none) */
    int f32;            /* the runner in f32 (a candidate, not a reference) */
    double rope_theta;  /* > 0: RoPE with this theta instead of the model's (a wrong candidate on purpose) */
} vf_capture_opts;

/* The whole bundle of prompts in[0..n) into a temporary folder beside out, renamed to out when complete. */
int vf_capture(const gm_model_entry *e, const char *weights, const vf_prompt_in *in, int n, const vf_capture_opts *o,
               const char *out, gm_status *st);

/* ---------------------------------------------------------------- compare.c */

typedef struct vf_verify_opts {
    const char *tokenizer; /* tokenizer.json for the texts; NULL, or a path that is not there: ids only */
    int max_prompts;       /* judge the reference's first N prompts; 0 all */
    const char *ref_label; /* what the reports call the reference (NULL: its folder) */
    const gm_model_entry *const *models; /* the built-in models, for the reference's own RoPE theta (NULL: none) */
} vf_verify_opts;

/* The candidate cand, a bundle or a gate file (gatefile.c), against the reference bundle ref. */
int vf_verify(const char *ref, const char *cand, const vf_verify_opts *o, vf_report *r, gm_status *st);

/* ---------------------------------------------------------------- text.c, json.c, markdown.c */

void vf_print_text(const vf_report *r, FILE *out);

/* put(out, r) into path: built in memory, then written at once via a temporary name (a reader never sees half) */
int vf_write_report(const vf_report *r, const char *path, void (*put)(FILE *out, const vf_report *r), gm_status *st);

/* path's JSON (at most max bytes): NULL with one line in st when it cannot be read or is not JSON */
struct cJSON *vf_read_json(const char *path, size_t max, gm_status *st);

/* text as their report shows a decoded token: in double quotes, \\ | \n \r \t escaped as _md_escape does (malloc'd) */
char *vf_md_quoted(const char *text);

/* a prompt as their report's prompt_text: its first 60 characters, then "…" when it is longer (malloc'd) */
char *vf_short_prompt(const char *text);

struct cJSON;
struct cJSON *vf_report_json(const vf_report *r);

#endif
