/*
** Quantized checkpoints end to end, on tiny models tests/quant_models.py made
** from the goldens by each format's own rule (AWQ, GPTQ sym and asym with and
** without desc_act, FP8 with block scales, mlir-air's Q4NX bundle), scaffolded
** by this build's gen-model (quant_models/, phase0_quant): the loader's bf16
** equals numpy's dequantization bit for bit in every form; the parts stay
** where the file holds them; phase0 and capture run on each; an AWQ model's
** top-k gate passes against its own dequantized reference and fails against
** the bf16 original; each malformed checkpoint is one line; a GPTQ one of one
** group (group_size -1) says so in its comments; and the header-only
** snapshots of real repos in tests/data/quant scaffold.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awq_llama3/awq_llama3_weights.h"
#include "fp8_qwen3/fp8_qwen3_weights.h"
#include "gptq_mistral/gptq_mistral_weights.h"
#include "q4nx_llama3/q4nx_llama3_weights.h"
#include "gm/kernels.h"
#include "gm/npy.h"
#include "gm/registry.h"
#include "gm/safetensors.h"
#include "tiers.h"
#include "util.h"

extern const gm_model_entry *const gm_quant_models[];

/* Every expected/<tensor>.npy of model id against what the loader holds for it, in the given form. */
static int compare_expected(const gm_model_entry *e, gm_wform form)
{
    char dir[4096], path[4400];
    snprintf(dir, sizeof dir, "%s/%s", GM_QUANT_DIR, e->id);
    void *w = calloc(1, e->weights_size);
    gm_status st = {0};
    cr_assert_eq(e->load_form(w, dir, form, &st), 0, "%s: %s", e->id, st.msg);
    snprintf(path, sizeof path, "%s/expected", dir);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "%s", path);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        const size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".npy") != 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 4), de->d_name);
        snprintf(path, sizeof path, "%s/expected/%s", dir, de->d_name);
        gm_npy want;
        cr_assert_eq(gm_npy_read(path, &want, &st), 0, "%s", st.msg);
        const gm_tensor_spec *spec = NULL;
        const gm_bf16 *got = e->find(w, name, &spec);
        cr_assert_not_null(got, "%s: %s was not loaded", e->id, name);
        cr_assert(spec->quant != 0, "%s: %s is not a dequantized projection", e->id, name);
        const int64_t rows = want.shape[0], cols = want.shape[1];
        cr_assert(want.rank == 2 && rows == spec->shape[0] && cols == spec->shape[1], "%s: %s", e->id, name);
        const int32_t *bits = want.data;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                /* HF (out, in) at [r][c]; a projection where the form puts its input c of output r (gm_w_index) */
                const size_t at = spec->transpose ? gm_w_index(form, (size_t)cols, (size_t)rows, (size_t)c, (size_t)r)
                                                  : (size_t)(r * cols + c);
                if (got[at] != (gm_bf16)bits[r * cols + c])
                    cr_assert_fail("%s, form %d: %s[%lld][%lld] is 0x%04x, numpy's dequantization gives 0x%04x", e->id,
                                   form, name, (long long)r, (long long)c, got[at], (unsigned)bits[r * cols + c]);
            }
        gm_npy_free(&want);
        n++;
    }
    closedir(d);
    e->free(w);
    free(w);
    return n;
}

Test(quant, the_loader_dequantizes_every_projection_as_numpy_does_bit_for_bit_in_every_form)
{
    int models = 0;
    GM_FOR_EACH_MODEL(e, gm_quant_models) {
        gm_config c;
        e->config(&c);
        const int want = 7 * c.n_layers + (!strcmp(e->id, "gptq_llama") ? 1 : 0); /* its LM head is quantized too */
        /* every tier the CPU has: the rules' vector code (AVX-512 or AVX2) as the tier allows; portable's one value
           at a time */
        EACH_TIER(t) {
            for (int form = 0; form < GM_W_FORMS; form++) /* (in, out), (out, in), and (in, out) in either panels */
                cr_assert_eq(compare_expected(e, (gm_wform)form), want, "%s, %s, form %d: projections compared", e->id,
                             t, form);
        }
        models++;
    }
    gm_kernels_select(NULL);
    cr_assert_eq(models, 5);
}

/* Bytes of tensor `name` in a safetensors file read whole (*file, malloc'd), and its size; NULL when absent. */
static const uint8_t *file_tensor(const char *path, const char *name, uint8_t **file, size_t *bytes)
{
    size_t len;
    *file = (uint8_t *)tu_read(path, &len);
    cr_assert_not_null(*file, "%s", path);
    st_header h;
    gm_status st = {0};
    cr_assert_eq(st_header_parse(&h, *file, len, len, path, &st), 0, "%s", st.msg);
    const st_tensor *t = st_header_find(&h, name);
    const uint8_t *p = t ? *file + 8 + h.header_len + t->begin : NULL;
    *bytes = t ? (size_t)(t->end - t->begin) : 0;
    st_header_free(&h);
    return p;
}

Test(quant, the_parts_are_the_files_own_bytes_in_typed_fields_beside_each_projection)
{
    awq_llama3_Weights *w = calloc(1, sizeof *w);
    gm_status st = {0};
    cr_assert_eq(awq_llama3_weights_load(w, GM_QUANT_DIR "/awq_llama3", &st), 0, "%s", st.msg);
    cr_assert_eq(w->config.quant.method, GM_QUANT_AWQ);
    cr_assert_eq(w->config.quant.group_size, 32, "the group size is in the Config");
    struct { const char *name; const void *got; } parts[] = {
        {"model.layers.1.self_attn.q_proj.qweight", w->layers[1].wq_qweight},
        {"model.layers.1.self_attn.q_proj.qzeros", w->layers[1].wq_qzeros},
        {"model.layers.1.self_attn.q_proj.scales", w->layers[1].wq_scales},
        {"model.layers.0.mlp.down_proj.qweight", w->layers[0].w_down_qweight},
        {"model.layers.0.mlp.down_proj.scales", w->layers[0].w_down_scales},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        uint8_t *file;
        size_t n;
        const uint8_t *want = file_tensor(GM_QUANT_DIR "/awq_llama3/model.safetensors", parts[i].name, &file, &n);
        cr_assert(want && parts[i].got && n > 0 && memcmp(parts[i].got, want, n) == 0, "%s: not the file's bytes",
                  parts[i].name);
        free(file);
    }
    awq_llama3_weights_free(w);
    cr_assert_null(w->layers[1].wq_qweight, "free clears the parts' fields");
    free(w);
}

static int run(const char *cmd, char **out, char **err) { return tu_run(cmd, out, err); }

#define TOKENS "3,4,5,6,7,8,9,10" /* a prompt where AWQ's tokens and the bf16 original's part (test below) */

Test(quant, phase0_passes_its_three_gates_on_every_quantized_model, .timeout = 60)
{
    const char *ids[] = {"awq_llama3", "fp8_qwen3", "gptq_llama", "gptq_mistral", "q4nx_llama3"};
    const char *names[] = {"AWQ tensors (qweight, qzeros, scales)", "FP8 tensors (weight, weight_scale_inv)",
                           "GPTQ tensors", "GPTQ tensors", "Q4NX blocks"};
    for (size_t i = 0; i < 5; i++) {
        char cmd[8192], *out = NULL, *err = NULL;
        snprintf(cmd, sizeof cmd, "'%s' %s --weights '%s/%s' --tokens " TOKENS " --no-record", GM_PHASE0_QUANT, ids[i],
                 GM_QUANT_DIR, ids[i]);
        cr_assert_eq(run(cmd, &out, &err), 0, "%s: %s%s", ids[i], out, err);
        cr_assert(strstr(out, "gate 1 weights loadable    PASS") && strstr(out, "gate 2 baseline runnable   PASS") &&
                      strstr(out, "gate 3 config consistent   PASS") && strstr(out, "Phase 0: PASS"), "%s:\n%s", ids[i], out);
        cr_assert(strstr(out, "with its shape and dtype") && strstr(out, names[i]), "%s: gate 1 says what it "
                  "dequantized:\n%s", ids[i], out);
        free(out), free(err);
    }
}

Test(quant, gate_3_compares_the_quantization_config_fields)
{
    char *dir = tu_tmpdir(), cmd[8192], *out = NULL, *err = NULL, path[4400];
    tu_copy_dir(GM_QUANT_DIR "/gptq_llama", dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *cfg = tu_read(path, NULL), *at = strstr(cfg, "\"sym\": true");
    cr_assert_not_null(at, "%s", cfg);
    memcpy(at, "\"sym\":false", 11); /* sym false changes no shape: only gate 3 sees it */
    tu_write(path, cfg, strlen(cfg));
    free(cfg);
    snprintf(cmd, sizeof cmd, "'%s' gptq_llama --weights '%s' --tokens " TOKENS " --no-record", GM_PHASE0_QUANT, dir);
    cr_assert_eq(run(cmd, &out, &err), 1, "%s%s", out, err);
    cr_assert(strstr(out, "gate 1 weights loadable    PASS") &&
                  strstr(out, "gate 3 config consistent   FAIL  quant.sym (quantization_config.sym) is true, config.json "
                              "says false"), "%s", out);
    free(out), free(err);
    tu_rmtree(dir);
}

Test(quant, capture_writes_a_reference_bundle_for_every_quantized_model, .timeout = 60)
{
    const char *ids[] = {"awq_llama3", "fp8_qwen3", "gptq_llama", "gptq_mistral", "q4nx_llama3"};
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < 5; i++) {
        char cmd[8192], *out = NULL, *err = NULL, path[4400];
        snprintf(cmd, sizeof cmd, "'%s' capture %s --weights '%s/%s' --tokens " TOKENS " --steps 4 --ops first --out '%s/%s'",
                 GM_PHASE0_QUANT, ids[i], GM_QUANT_DIR, ids[i], dir, ids[i]);
        cr_assert_eq(run(cmd, &out, &err), 0, "%s: %s%s", ids[i], out, err);
        snprintf(path, sizeof path, "%s/%s/p000/ops/0/q_proj.npy", dir, ids[i]);
        cr_assert(tu_exists(path), "%s: %s", ids[i], path);
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, ids[i]);
        char *m = tu_read(path, NULL);
        cr_assert(m && strstr(m, ids[i]), "%s", path);
        free(m), free(out), free(err);
    }
    tu_rmtree(dir);
}

/*
** mlir-air's int4 gate: a candidate run on the AWQ weights (here the reference's own run of them, as an
** NPU running the same dequantized weights would give) passes against the reference built from the same
** dequantized weights (verify --weights, computed on the fly), and fails against the bf16 original's,
** where the quantization moves a token out of the other side's top-5.
*/
Test(quant, an_awq_top_k_gate_passes_on_its_dequantized_reference_and_fails_on_the_bf16_original, .timeout = 60)
{
    char *dir = tu_tmpdir(), cmd[16384], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' capture awq_llama3 --weights '%s/awq_llama3' --tokens " TOKENS " --ops none --out '%s/awq'",
             GM_PHASE0_QUANT, GM_QUANT_DIR, dir);
    cr_assert_eq(run(cmd, &out, &err), 0, "%s%s", out, err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify --weights '%s/awq_llama3' '%s/awq'", GM_PHASE0_QUANT, GM_QUANT_DIR, dir);
    cr_assert_eq(run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_assert(strstr(out, "token gate (top-5, 32 steps): 1 OK, 0 FAIL") && strstr(out, "verify: PASS"), "%s", out);
    free(out), free(err);

    /* the bf16 original's reference; the candidate with its manifest, as a harness writes one */
    snprintf(cmd, sizeof cmd, "'%s' capture llama3_tied --weights '%s/golden/llama3_tied' --tokens " TOKENS
             " --ops none --out '%s/bf16' && cp '%s/bf16/manifest.json' '%s/awq/manifest.json'", GM_PHASE0, GM_SHARED_DIR,
             dir, dir, dir);
    cr_assert_eq(run(cmd, &out, &err), 0, "%s%s", out, err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "'%s' verify '%s/bf16' '%s/awq'", GM_PHASE0, dir, dir);
    cr_assert_eq(run(cmd, &out, &err), 1, "%s%s", out, err);
    cr_assert(strstr(out, "token gate (top-5, 32 steps)   FAIL") && strstr(out, "not in the reference's top-5") &&
                  strstr(out, "token gate (top-5, 32 steps): 0 OK, 1 FAIL") && strstr(out, "verify: FAIL"), "%s", out);
    free(out), free(err);
    tu_rmtree(dir);
}

/* DST: a copy of quantized model SRC broken one way (tests/quant_models.py break). */
static void broken(const char *src, const char *dst, const char *mode, const char *golden)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/quant_models.py' break '%s/%s' '%s' %s %s%s%s", GM_SOURCE_DIR,
             GM_QUANT_DIR, src, dst, mode, golden ? "'" : "", golden ? golden : "", golden ? "'" : "");
    cr_assert_eq(run(cmd, NULL, NULL), 0, "%s", cmd);
}

/* Each malformed checkpoint: gen-model's exit status and its one line naming the tensor or field; nothing written. */
Test(quant, each_malformed_checkpoint_is_one_line_and_nothing_is_written, .timeout = 60)
{
    static const struct { const char *mode, *src; int status; const char *line; } cases[] = {
        {"missing-scales", "awq_llama3", 1, "gen-model: %s/model.safetensors: tensor 'model.layers.0.self_attn.q_proj.scales' "
         "is missing (AWQ: scales, a row a group of inputs, F16 or BF16 [3, 96]; config.json's quantization_config says "
         "awq)\n"},
        {"wrong-group", "awq_llama3", 1, "gen-model: %s/model.safetensors: tensor 'model.layers.0.self_attn.q_proj.qzeros' has "
         "shape [3, 12], expected [6, 12] (AWQ: 4-bit zero points, a row a group of inputs, packed as qweight, with "
         "group_size 16)\n"},
        {"off-by-one", "awq_llama3", 1, "gen-model: %s/model.safetensors: tensor 'model.layers.1.self_attn.k_proj.qweight' has "
         "shape [97, 12], expected [96, 12] (AWQ: "},
        {"unknown-method", "gptq_llama", 3, "quantization method 'bitsandbytes' is not supported (config.json: "
         "quantization_config.quant_method; supported: awq, gptq, fp8, and mlir-air's Q4NX bundle (model.q4nx))\n"},
        {"one-layer-plain", "awq_llama3", 3, "gen-model: %s/model.safetensors: 'model.layers.1.self_attn.q_proj.weight' is "
         "kept in float but layer 0's is quantized: a projection quantized in some layers only (as "
         "quantization_config.modules_to_not_convert may leave it) is not supported\n"},
        {"g-idx-some-layers", "gptq_llama", 3, "gen-model: %s/model.safetensors: "
         "'model.layers.1.self_attn.q_proj.g_idx' is there but layer 0's is missing: a GPTQ g_idx in some layers only "
         "is not supported (the generated loader reads the same parts in every layer)\n"},
        {"not-convert-quantized", "awq_llama3", 1, "gen-model: %s/model.safetensors: tensor "
         "'model.layers.0.mlp.gate_proj.weight' is missing (MLP gate projection, [224, 96]); config.json's "
         "quantization_config.modules_to_not_convert names 'mlp', which keeps it in float, but the file holds "
         "'model.layers.0.mlp.gate_proj.qweight' (I32 [96, 28]) quantized as AWQ\n"},
        {"block-size-mismatch", "fp8_qwen3", 1, "gen-model: %s/model.safetensors: tensor "
         "'model.layers.0.self_attn.q_proj.weight_scale_inv' has shape [6, 1], expected [3, 1] (FP8: a scale a block, "
         "with weight_block_size [64, 64])\n"},
        {"block-size-zero", "fp8_qwen3", 1, "gen-model: %s/config.json: quantization_config.weight_block_size must be a "
         "list of two positive integers, found [0, 64]\n"},
        /* null is not the default [128, 128]: transformers' FineGrainedFP8Config refuses it */
        {"block-size-null", "fp8_qwen3", 1, "gen-model: %s/config.json: quantization_config.weight_block_size "
         "must be a list of two positive integers, found null (gen-model reads FP8 with a scale a block: set it to "
         "the [outputs, inputs] of the blocks weight_scale_inv was made with, or leave the key out for "
         "transformers' default [128, 128])\n"},
        {"no-config", "fp8_qwen3", 1, "(F8_E4M3) is a quantized checkpoint's, but config.json has no quantization_config "
         "(supported: awq, gptq, fp8, and mlir-air's Q4NX bundle (model.q4nx))\n"},
        {"config-over-bf16", "awq_llama3", 1, "gen-model: %s/model.safetensors: tensor 'model.layers.0.self_attn.q_proj.qweight' "
         "is missing (AWQ: 4-bit weights, eight a word along the outputs in AWQ's order 0 2 4 6 1 3 5 7, I32 [96, 12]; "
         "config.json's quantization_config says awq); the file holds 'model.layers.0.self_attn.q_proj.weight' (BF16 "
         "[96, 96]) instead\n"},
    };
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[4400], out_dir[4400], cmd[16384], golden[4400], *out = NULL, *err = NULL;
        snprintf(src, sizeof src, "%s/%s", dir, cases[i].mode);
        snprintf(golden, sizeof golden, "%s/golden/llama3_tied", GM_SHARED_DIR);
        broken(cases[i].src, src, cases[i].mode, !strcmp(cases[i].mode, "config-over-bf16") ? golden : NULL);
        snprintf(out_dir, sizeof out_dir, "%s/out", dir);
        char *before = tu_tree_hash(out_dir);
        snprintf(cmd, sizeof cmd, "'%s' '%s' --out '%s'", GM_GEN_MODEL, src, out_dir);
        const int rc = run(cmd, &out, &err);
        cr_expect_eq(rc, cases[i].status, "%s: exit %d: %s", cases[i].mode, rc, err);
        char line[8192]; /* the file named by its path, in the source folder */
        snprintf(line, sizeof line, cases[i].line, src);
        cr_expect(strstr(err, line) && tu_lines(err) == 1, "%s: %s", cases[i].mode, err);
        char *after = tu_tree_hash(out_dir);
        cr_expect_str_eq(after, before, "%s: something was written", cases[i].mode);
        free(before), free(after), free(out), free(err);
    }
    tu_rmtree(dir);
}

/* The same checkpoints under sources generated for the right one: gate 1's loader, or gate 3, names what differs. */
Test(quant, the_loader_and_gate_3_name_what_a_malformed_checkpoint_breaks, .timeout = 60)
{
    static const struct { const char *mode, *line, *src; } cases[] = {
        {"missing-scales", "gate 1 weights loadable    FAIL  %s: tensor 'model.layers.0.self_attn.q_proj.scales' is "
                           "missing\n", NULL},
        {"g-idx-out-of-range", "gate 1 weights loadable    FAIL  %s/model.safetensors: tensor "
                               "'model.layers.0.self_attn.q_proj.g_idx': input 0 is in group 10", "gptq_mistral"},
        {"off-by-one", "gate 1 weights loadable    FAIL  model.safetensors: tensor "
                       "'model.layers.1.self_attn.k_proj.qweight' has shape [97, 12], expected [96, 12]\n", NULL},
        {"wrong-group", "gate 3 config consistent   FAIL  quant.group_size (quantization_config.group_size) is 32, "
                        "config.json says 16\n", NULL},
    };
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[4400], cmd[16384], line[1024], *out = NULL, *err = NULL;
        snprintf(src, sizeof src, "%s/%s", dir, cases[i].mode);
        const char *model = cases[i].src ? cases[i].src : "awq_llama3";
        broken(model, src, cases[i].mode, NULL);
        snprintf(cmd, sizeof cmd, "'%s' %s --weights '%s' --tokens " TOKENS " --no-record", GM_PHASE0_QUANT, model, src);
        cr_expect_eq(run(cmd, &out, &err), 1, "%s: %s%s", cases[i].mode, out, err);
        snprintf(line, sizeof line, cases[i].line, src);
        cr_expect(strstr(out, line), "%s:\n%s", cases[i].mode, out);
        free(out), free(err);
    }
    tu_rmtree(dir);
}

/* The header-only snapshots of one real repo of each format (tests/data/hub) scaffold, their parts in LayerWeights. */
Test(quant, the_real_repos_header_only_snapshots_scaffold_with_their_documented_parts)
{
    static const struct { const char *repo, *id, *fields[3]; } snaps[] = {
        {"Qwen/Qwen2-1.5B-Instruct-AWQ", "qwen2_1_5b_instruct_awq",
         {"const int32_t *wq_qweight;    /* (emb_dim, (n_heads * head_dim) // 8) = (1536, 192) I32",
          "const uint16_t *w_down_scales; /* (hidden_dim // group_size, emb_dim) = (70, 1536) F16 bits",
          ".quant = { .method = GM_QUANT_AWQ, .bits = 4, .group_size = 128, .zero_point = true }"}},
        {"Qwen/Qwen2-1.5B-Instruct-GPTQ-Int4", "qwen2_1_5b_instruct_gptq_int4",
         {"const int32_t *w_down_qweight; /* (hidden_dim // 8, emb_dim) = (1120, 1536) I32",
          "const int32_t *wq_g_idx;      /* (emb_dim) = (1536) I32",
          ".quant = { .method = GM_QUANT_GPTQ, .bits = 4, .group_size = 128, .sym = true }"}},
        {"Qwen/Qwen3-0.6B-FP8", "qwen3_0_6b_fp8",
         {"const uint8_t *wq_fp8;        /* (n_heads * head_dim, emb_dim) = (2048, 1024) F8_E4M3",
          "const gm_bf16 *wq_scale_inv;  /* (cdiv(n_heads * head_dim, block_out), cdiv(emb_dim, group_size)) = (16, 8) BF16",
          ".quant = { .method = GM_QUANT_FP8, .bits = 8, .group_size = 128, .block_out = 128 }"}},
        {"FastFlowLM/Llama-3.2-1B-NPU2", "llama_3_2_1b_npu2",
         {"const uint8_t *wq_q4nx;       /* (cdiv(n_heads * head_dim, 32) * cdiv(emb_dim, 256), 5120) = (512, 5120) I8",
          "const uint8_t *w_down_q4nx;   /* (cdiv(emb_dim, 32) * cdiv(hidden_dim, 256), 5120) = (2048, 5120) I8",
          ".quant = { .method = GM_QUANT_Q4NX, .bits = 4, .group_size = 32, .block_out = 32 }"}},
    };
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof snaps / sizeof snaps[0]; i++) {
        char cmd[16384], path[4400], *err = NULL;
        snprintf(cmd, sizeof cmd, "'%s' '%s/tests/data/hub/%s' --out '%s'", GM_GEN_MODEL, GM_SOURCE_DIR, snaps[i].repo, dir);
        cr_assert_eq(run(cmd, NULL, &err), 0, "%s: %s", snaps[i].repo, err);
        free(err);
        snprintf(path, sizeof path, "%s/%s/%s_weights.h", dir, snaps[i].id, snaps[i].id);
        char *h = tu_read(path, NULL);
        snprintf(path, sizeof path, "%s/%s/%s_weights.c", dir, snaps[i].id, snaps[i].id);
        char *c = tu_read(path, NULL);
        cr_assert(h && c, "%s", path);
        for (int f = 0; f < 2; f++)
            cr_expect(strstr(h, snaps[i].fields[f]), "%s: no '%s' in its LayerWeights", snaps[i].repo, snaps[i].fields[f]);
        cr_expect(strstr(c, snaps[i].fields[2]), "%s: no '%s' in its Config", snaps[i].repo, snaps[i].fields[2]);
        free(h), free(c);
    }
    tu_rmtree(dir);
}

/* GPTQ's group_size -1 (one group of all the inputs): the comments give the parts' one row, not inputs // -1. */
Test(quant, a_gptq_checkpoint_of_one_group_says_so_in_its_comments)
{
    static const char *const fields[] = {
        "const uint16_t *wo_scales;    /* (1, emb_dim) = (1, 96) F16 bits, from "
        "model.layers.{L}.self_attn.o_proj.scales: scales, a row a group, with group_size -1 (one group of the "
        "n_heads * head_dim inputs) */",
        "const int32_t *w_down_qzeros; /* (1, emb_dim // 8) = (1, 12) I32, from model.layers.{L}.mlp.down_proj.qzeros: "
        "4-bit zero points (minus one in checkpoint_format gptq), a row a group, with group_size -1 (one group of the "
        "hidden_dim inputs) */",
        "const int32_t *wq_qweight;    /* (emb_dim // 8, n_heads * head_dim) = (12, 96) I32, from "
        "model.layers.{L}.self_attn.q_proj.qweight: 4-bit weights, eight a word along the inputs */",
    };
    char *dir = tu_tmpdir();
    char src[4400], cmd[16384], path[4400], *err = NULL;
    snprintf(src, sizeof src, "%s/one-group", dir);
    broken("gptq_llama", src, "one-group", NULL);
    snprintf(cmd, sizeof cmd, "'%s' '%s' --out '%s/out'", GM_GEN_MODEL, src, dir);
    cr_assert_eq(run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(path, sizeof path, "%s/out/one_group/one_group_weights.h", dir);
    char *h = tu_read(path, NULL);
    cr_assert_not_null(h, "%s", path);
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        cr_expect(strstr(h, fields[f]), "no '%s' in its LayerWeights", fields[f]);
    cr_expect_null(strstr(h, "// group_size"), "a shape of inputs // group_size with group_size -1");
    free(h);
    tu_rmtree(dir);
}

/*
** Rows [r0, r1) x columns [c0, c1) of gm_dequant_rows, or of gm_dequant_rows_other (the natural form's transpose),
** against the same block of the whole rows' result.
*/
static void assert_block(const char *what, const gm_quant_config *q, const gm_quant_parts *p, size_t rows, size_t cols,
                         int other, size_t r0, size_t r1, size_t c0, size_t c1)
{
    gm_status st = {0};
    gm_bf16 *whole = calloc(rows * cols, 2), *block = calloc((r1 - r0) * (c1 - c0), 2);
    cr_assert_eq(gm_dequant_rows(q, p, 0, rows, 0, cols, whole, &st), 0, "%s: %s", what, st.msg);
    cr_assert_eq((other ? gm_dequant_rows_other : gm_dequant_rows)(q, p, r0, r1, c0, c1, block, &st), 0, "%s: %s", what,
                 st.msg);
    for (size_t r = r0; r < r1; r++)
        for (size_t c = c0; c < c1; c++)
            cr_assert_eq(block[(r - r0) * (c1 - c0) + c - c0], other ? whole[c * cols + r] : whole[r * cols + c],
                         "%s%s: [%zu][%zu]", what, other ? ", the other form" : "", r, c);
    free(whole), free(block);
}

/* The loader cuts a projection held in the other form into blocks of the rule's columns: each gives the same bits. */
Test(quant, a_block_of_either_form_dequantizes_as_the_whole_rows_do)
{
    gm_status st = {0};
    awq_llama3_Weights *a = calloc(1, sizeof *a);
    gptq_mistral_Weights *g = calloc(1, sizeof *g);
    fp8_qwen3_Weights *f = calloc(1, sizeof *f);
    q4nx_llama3_Weights *x = calloc(1, sizeof *x);
    cr_assert_eq(awq_llama3_weights_load(a, GM_QUANT_DIR "/awq_llama3", &st), 0, "%s", st.msg);
    cr_assert_eq(gptq_mistral_weights_load(g, GM_QUANT_DIR "/gptq_mistral", &st), 0, "%s", st.msg);
    cr_assert_eq(fp8_qwen3_weights_load(f, GM_QUANT_DIR "/fp8_qwen3", &st), 0, "%s", st.msg);
    cr_assert_eq(q4nx_llama3_weights_load(x, GM_QUANT_DIR "/q4nx_llama3", &st), 0, "%s", st.msg);
    /* AWQ: w_gate, (in 96, out 224) natural; GPTQ: w_down with its g_idx, (176, 64); FP8: wo, (out 64, in 192) with
       blocks of 64 inputs; Q4NX: w_down, (96, 224) in one padded block of inputs */
    const awq_llama3_LayerWeights *al = &a->layers[1];
    const gm_quant_parts ap = {{al->w_gate_qweight, al->w_gate_qzeros, al->w_gate_scales, NULL}, GM_SRC_BF16, 224, 96, NULL};
    assert_block("awq", &a->config.quant, &ap, 96, 224, 0, 5, 40, 32, 96);
    assert_block("awq", &a->config.quant, &ap, 96, 224, 0, 0, 96, 200, 224);
    const gptq_mistral_LayerWeights *gl = &g->layers[2];
    const gm_quant_parts gp = {{gl->w_down_qweight, gl->w_down_qzeros, gl->w_down_scales, gl->w_down_g_idx}, GM_SRC_F16,
                               64, 176, "g_idx"};
    assert_block("gptq", &g->config.quant, &gp, 176, 64, 0, 3, 170, 8, 40);
    const fp8_qwen3_LayerWeights *fl = &f->layers[0];
    const gm_quant_parts fp = {{fl->wo_fp8, fl->wo_scale_inv, NULL, NULL}, GM_SRC_BF16, 64, 192, NULL};
    assert_block("fp8", &f->config.quant, &fp, 64, 192, 0, 30, 64, 40, 136);
    const q4nx_llama3_LayerWeights *xl = &x->layers[1];
    const gm_quant_parts xp = {{xl->w_down_q4nx, NULL, NULL, NULL}, GM_SRC_BF16, 96, 224, NULL};
    assert_block("q4nx", &x->config.quant, &xp, 96, 224, 0, 31, 65, 20, 101);
    /* the other form, on every tier's code (AWQ's in 16 lanes, 8 or one value at a time): AWQ's straight from its
       words (inputs cut inside a group and off the eight a vector takes, outputs past a strip of 128), the others'
       transposed */
    EACH_TIER(t) {
        assert_block("awq", &a->config.quant, &ap, 96, 224, 1, 8, 200, 5, 91);
        assert_block("awq", &a->config.quant, &ap, 96, 224, 1, 0, 224, 0, 96);
        assert_block("gptq", &g->config.quant, &gp, 176, 64, 1, 16, 64, 3, 170);
        assert_block("fp8", &f->config.quant, &fp, 64, 192, 1, 40, 136, 30, 64);
        assert_block("q4nx", &x->config.quant, &xp, 96, 224, 1, 20, 101, 31, 65);
    }
    gm_kernels_select(NULL);
    awq_llama3_weights_free(a), gptq_mistral_weights_free(g), fp8_qwen3_weights_free(f), q4nx_llama3_weights_free(x);
    free(a), free(g), free(f), free(x);
}
