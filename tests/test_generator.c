/*
** gen-model as a user meets it: the binary run on the offline Hub copies in
** ../shared/hub and on snapshots altered in the test, checking exit status,
** the one-line message and what is (or is not) written.
*/
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gm/config.h"
#include "lua_host.h"
#include "util.h"

#define HUB GM_SHARED_DIR "/hub"

static char *out_dir; /* a fresh, not yet existing, output folder per test */
static char *work;    /* a fresh scratch folder per test */

static void setup(void)
{
    work = tu_tmpdir();
    char buf[4200];
    snprintf(buf, sizeof buf, "%s/models", work);
    out_dir = strdup(buf);
}

static void teardown(void)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", work);
    free(out_dir);
    free(work);
}

/* gen-model SOURCE --out out_dir [extra]; returns the exit status. */
static int gen(const char *source, const char *extra, char **out, char **err)
{
    char cmd[8192];
    int n = snprintf(cmd, sizeof cmd, "'%s' '%s' --out '%s' %s", GM_GEN_MODEL, source, out_dir, extra ? extra : "");
    cr_assert(n > 0 && (size_t)n < sizeof cmd, "command too long");
    return tu_run(cmd, out, err);
}

/* A failure says one line on stderr and leaves no output folder behind. */
static void assert_refused(int rc, int want_rc, const char *err, const char *want)
{
    cr_assert_eq(rc, want_rc, "exit %d, expected %d; stderr: %s", rc, want_rc, err);
    cr_assert_eq(tu_lines(err), 1, "expected one line, found: %s", err);
    cr_assert(strstr(err, want) != NULL, "expected '%s' in: %s", want, err);
    cr_assert(!tu_exists(out_dir), "%s was created", out_dir);
}

/* want as the line begins when it starts with '@': "gen-model: " and the source folder in its place */
static const char *at_dir(const char *dir, const char *want, char *buf, size_t size)
{
    if (want[0] != '@')
        return want;
    snprintf(buf, size, "gen-model: %s/%s", dir, want + 1);
    return buf;
}

TestSuite(generator, .init = setup, .fini = teardown, .timeout = 60);

/* ---------------------------------------------------------------------- */
/* scope */

typedef struct { const char *repo; const char *reason; const char *field; } refusal;

static const refusal refusals[] = {
    {"mistralai/Mistral-7B-v0.1", "sliding-window attention is out of scope", "sliding_window = 4096"},
    {"mistralai/Mixtral-8x7B-v0.1", "mixture-of-experts models are out of scope", "num_local_experts = 8"},
    {"google-t5/t5-small", "encoder-decoder models are out of scope", "is_encoder_decoder = true"},
    {"deepseek-ai/DeepSeek-V2-Lite", "multi-head latent attention (MLA) is out of scope", "kv_lora_rank = 512"},
};

Test(generator, refuses_every_out_of_scope_hub_repo_with_model_reason_and_field)
{
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        char src[4096], *err = NULL;
        snprintf(src, sizeof src, "%s/%s", HUB, refusals[i].repo);
        int rc = gen(src, NULL, NULL, &err);
        assert_refused(rc, 3, err, refusals[i].repo);
        cr_assert(strstr(err, refusals[i].reason), "%s: %s", refusals[i].repo, err);
        cr_assert(strstr(err, refusals[i].field), "%s: %s", refusals[i].repo, err);
        free(err);
    }
}

static const char *in_scope[][2] = {
    {"Qwen/Qwen2-0.5B", "qwen2_0_5b"},       {"Qwen/Qwen2-1.5B", "qwen2_1_5b"},
    {"Qwen/Qwen3-0.6B", "qwen3_0_6b"},       {"meta-llama/Llama-3.2-1B", "llama_3_2_1b"},
    {"meta-llama/Meta-Llama-3-8B", "meta_llama_3_8b"}, {"mistralai/Mistral-7B-v0.3", "mistral_7b_v0_3"},
};

Test(generator, scaffolds_every_in_scope_hub_repo_as_checked_in)
{
    for (size_t i = 0; i < sizeof in_scope / sizeof in_scope[0]; i++) {
        char src[4096], *out = NULL, *err = NULL;
        snprintf(src, sizeof src, "%s/%s", HUB, in_scope[i][0]);
        int rc = gen(src, NULL, &out, &err);
        cr_assert_eq(rc, 0, "%s: exit %d: %s", in_scope[i][0], rc, err);
        cr_assert(strstr(out, in_scope[i][1]), "%s", out);
        const char *files[] = {"_weights.c", "_weights.h", "_cpu_helpers.c", "_cpu_helpers.h"};
        for (size_t k = 0; k < 4; k++) {
            char a[4400], b[4400];
            snprintf(a, sizeof a, "%s/%s/%s%s", out_dir, in_scope[i][1], in_scope[i][1], files[k]);
            snprintf(b, sizeof b, "%s/models/%s/%s%s", GM_SOURCE_DIR, in_scope[i][1], in_scope[i][1], files[k]);
            size_t la, lb;
            char *da = tu_read(a, &la), *db = tu_read(b, &lb);
            cr_assert(da && db, "%s or %s unreadable", a, b);
            cr_assert(la == lb && memcmp(da, db, la) == 0, "%s differs from the checked-in %s", a, b);
            free(da);
            free(db);
        }
        free(out);
        free(err);
    }
}

/* ---------------------------------------------------------------------- */
/* config.json rules, on a copy of Qwen2-0.5B with one edit */

static char *snapshot_copy(const char *repo)
{
    char src[4096], dst[4200];
    snprintf(src, sizeof src, "%s/%s", HUB, repo);
    snprintf(dst, sizeof dst, "%s/%s", work, strrchr(repo, '/') + 1);
    tu_copy_dir(src, dst);
    return strdup(dst);
}

/* Replace the first occurrence of `from` in dir/config.json with `to`. */
static void edit_config(const char *dir, const char *from, const char *to)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = tu_read(path, NULL);
    char *at = strstr(text, from);
    cr_assert_not_null(at, "'%s' not in %s", from, path);
    size_t n = strlen(text) - strlen(from) + strlen(to);
    char *edited = malloc(n + 1);
    snprintf(edited, n + 1, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    tu_write(path, edited, n);
    free(edited);
    free(text);
}

typedef struct { const char *from, *to; int rc; const char *want; } config_case;

static const config_case config_cases[] = {
    {"\"hidden_size\": 896,", "\"hidden_size\": 896.0,", 1, "@config.json: hidden_size must be an integer, found 896.0"},
    {"\"hidden_size\": 896,", "\"hidden_size\": \"896\",", 1, "@config.json: hidden_size must be an integer, found a string"},
    {"\"num_hidden_layers\": 24,", "", 1, "@config.json: required key 'num_hidden_layers' is missing"},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": 1000000.0, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0},", 3,
     "Qwen/Qwen2-0.5B: rope_scaling type 'yarn' is not supported (config.json: rope_scaling; supported: llama3)"},
    {"\"use_sliding_window\": false,", "\"use_sliding_window\": true,", 3,
     "sliding-window attention is out of scope (config.json: sliding_window = 131072)"},
    {"\"architectures\": [\n    \"Qwen2ForCausalLM\"\n  ],", "\"architectures\": \"Qwen2ForCausalLM\",", 1,
     "@config.json: architectures must be a non-empty list of strings"},
    {"Qwen2ForCausalLM", "GPT2LMHeadModel", 3, "architecture 'GPT2LMHeadModel' is not supported"},
    /* transformers builds the model model_type names, whatever architectures says */
    {"\"model_type\": \"qwen2\",", "\"model_type\": \"llama\",", 1,
     "@config.json: model_type 'llama' is not Qwen2ForCausalLM's ('qwen2'): transformers builds the model model_type "
     "names"},
    {"\"tie_word_embeddings\": true,", "\"tie_word_embeddings\": 1,", 1, "tie_word_embeddings must be true or false"},
    /* the scope rules' switches: Python takes 1, "yes" or [1] as true, and transformers builds what they switch on */
    {"\"use_sliding_window\": false,", "\"use_sliding_window\": 1,", 1,
     "@config.json: use_sliding_window: expected true or false, found 1"},
    {"\"use_sliding_window\": false,", "\"use_sliding_window\": false, \"attention_bias\": \"false\",", 1,
     "@config.json: attention_bias: expected true or false, found a string"},
    {"\"use_sliding_window\": false,", "\"use_sliding_window\": false, \"mlp_bias\": [1],", 1,
     "@config.json: mlp_bias: expected true or false, found"},
    {"\"num_key_value_heads\": 2,", "\"num_key_value_heads\": 3,", 1,
     "num_attention_heads 14 is not a multiple of num_key_value_heads 3"},
    {"{", "{\"hidden_size\": 1,", 1, "@config.json: duplicate key 'hidden_size'"},
    {"\"vocab_size\": 151936", "\"vocab_size\": 151936,", 1, "@config.json: expected a string key in an object at line 27, column 1"},
    /* Python's json writes NaN and Infinity: read as numbers, refused where a field must be finite */
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": Infinity,", 1, "rope_theta must be a finite fp32 value, found Infinity"},
    {"\"rms_norm_eps\": 1e-06,", "\"rms_norm_eps\": NaN,", 1, "rms_norm_eps must be a finite fp32 value, found NaN"},
    {"\"hidden_size\": 896,", "\"hidden_size\": -Infinity,", 1, "hidden_size must be an integer, found -Infinity"},
    /* Nemotron-H's config carries "time_step_limit": [0.0, Infinity]: the refusal is its architecture's */
    {"\"architectures\": [\n    \"Qwen2ForCausalLM\"\n  ],",
     "\"architectures\": [\"NemotronHForCausalLM\"], \"time_step_limit\": [0.0, Infinity],", 3,
     "architecture 'NemotronHForCausalLM' is not supported"},
};

Test(generator, config_errors_name_the_key_and_write_nothing)
{
    for (size_t i = 0; i < sizeof config_cases / sizeof config_cases[0]; i++) {
        const config_case *c = &config_cases[i];
        char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
        edit_config(dir, c->from, c->to);
        int rc = gen(dir, NULL, NULL, &err);
        char want[8192];
        assert_refused(rc, c->rc, err, at_dir(dir, c->want, want, sizeof want));
        free(err);
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        cr_assert_eq(system(cmd), 0);
        free(dir);
    }
}

Test(generator, reads_the_transformers_5_spelling_of_rope_and_dtype)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
    edit_config(dir, "\"rope_theta\": 1000000.0,", "\"rope_parameters\": {\"rope_theta\": 250000.0, \"rope_type\": \"default\"},");
    edit_config(dir, "\"torch_dtype\": \"bfloat16\",", "\"dtype\": \"float16\",");
    cr_assert_eq(gen(dir, "--name qwen5", NULL, &err), 0, "%s", err);
    char path[4400];
    snprintf(path, sizeof path, "%s/qwen5/qwen5_weights.c", out_dir);
    char *c = tu_read(path, NULL);
    cr_assert(strstr(c, ".rope_base = 250000.0,"), "rope_base not taken from rope_parameters");
    cr_assert(strstr(c, ".dtype = GM_DTYPE_F16,"), "dtype not taken from dtype");
    free(c);
    free(err);
    free(dir);
}

/* ---------------------------------------------------------------------- */
/* tensors: a header rewritten with one change */

/* Rewrite dir/model.safetensors.head after `edit` changed its JSON. */
static void edit_header(const char *dir, void (*edit)(cJSON *root))
{
    char path[4300];
    snprintf(path, sizeof path, "%s/model.safetensors.head", dir);
    size_t len;
    char *bytes = tu_read(path, &len);
    uint64_t n;
    memcpy(&n, bytes, 8);
    cJSON *root = cJSON_ParseWithLength(bytes + 8, n);
    cr_assert_not_null(root);
    edit(root);
    char *json = cJSON_PrintUnformatted(root);
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    char *out = malloc(8 + padded);
    uint64_t nl = padded;
    memcpy(out, &nl, 8);
    memset(out + 8, ' ', padded);
    memcpy(out + 8, json, jl);
    tu_write(path, out, 8 + padded);
    free(out);
    free(json);
    cJSON_Delete(root);
    free(bytes);
}

static void rename_up_proj(cJSON *root)
{
    cJSON *t = cJSON_DetachItemFromObjectCaseSensitive(root, "model.layers.3.mlp.up_proj.weight");
    cJSON_AddItemToObject(root, "model.layers.3.mlp.up_proj.weights", t);
}

static void reshape_q_proj(cJSON *root)
{
    cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "model.layers.0.self_attn.q_proj.weight");
    cJSON_ReplaceItemInObjectCaseSensitive(t, "shape", cJSON_Parse("[448, 1792]"));
}

static void retype_k_norm_to_i16(cJSON *root)
{
    cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "model.layers.5.self_attn.k_proj.bias");
    cJSON_ReplaceItemInObjectCaseSensitive(t, "dtype", cJSON_CreateString("I16"));
}

static void add_extra_tensor(cJSON *root)
{
    /* a zero-size tensor at the end keeps the offsets tiling */
    cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "model.norm.weight");
    cJSON *end = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "data_offsets"), 1);
    char spec[256];
    snprintf(spec, sizeof spec, "{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[%.0f,%.0f]}", end->valuedouble,
             end->valuedouble);
    cJSON_AddItemToObject(root, "model.layers.0.mlp.extra.weight", cJSON_Parse(spec));
}

typedef struct { void (*edit)(cJSON *); int rc; const char *want; } tensor_case;

static const tensor_case tensor_cases[] = {
    {rename_up_proj, 1, "tensor 'model.layers.3.mlp.up_proj.weight' is missing"},
    {reshape_q_proj, 1, "@model.safetensors.head: tensor 'model.layers.0.self_attn.q_proj.weight' has shape [448, 1792], expected [896, 896]"},
    {retype_k_norm_to_i16, 1, "@model.safetensors.head: tensor 'model.layers.5.self_attn.k_proj.bias' has dtype I16, expected BF16, F16 or F32"},
    {add_extra_tensor, 1, "unexpected tensor 'model.layers.0.mlp.extra.weight'"},
};

Test(generator, tensor_errors_name_file_tensor_expected_and_found)
{
    for (size_t i = 0; i < sizeof tensor_cases / sizeof tensor_cases[0]; i++) {
        char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
        edit_header(dir, tensor_cases[i].edit);
        int rc = gen(dir, NULL, NULL, &err);
        char want[8192];
        assert_refused(rc, tensor_cases[i].rc, err, at_dir(dir, tensor_cases[i].want, want, sizeof want));
        free(err);
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        cr_assert_eq(system(cmd), 0);
        free(dir);
    }
}

Test(generator, a_corrupt_header_is_one_line_naming_the_file)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
    char path[4300];
    snprintf(path, sizeof path, "%s/model.safetensors.head", dir);
    size_t len;
    char *bytes = tu_read(path, &len);
    memcpy(bytes + 8 + 100, "\"}{", 3); /* break the JSON */
    tu_write(path, bytes, len);
    int rc = gen(dir, NULL, NULL, &err);
    char want[8192];
    assert_refused(rc, 1, err, at_dir(dir, "@model.safetensors.head: ", want, sizeof want));
    free(bytes);
    free(err);
    free(dir);
}

Test(generator, a_sharded_repo_with_a_missing_shard_is_refused)
{
    char *dir = snapshot_copy("meta-llama/Meta-Llama-3-8B"), *err = NULL;
    char path[4300];
    snprintf(path, sizeof path, "%s/model-00003-of-00004.safetensors.head", dir);
    cr_assert_eq(remove(path), 0);
    int rc = gen(dir, NULL, NULL, &err);
    assert_refused(rc, 1, err, "model-00003-of-00004.safetensors");
    free(err);
    free(dir);
}

/* A folder without config.json is not a model folder: bad input (exit 1), as a missing shard is. */
Test(generator, a_folder_without_config_json_is_bad_input)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL, path[4300], want[4400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cr_assert_eq(remove(path), 0);
    int rc = gen(dir, NULL, NULL, &err);
    snprintf(want, sizeof want, "gen-model: %s: missing: a model folder holds config.json", path);
    assert_refused(rc, 1, err, want);
    free(err);
    free(dir);
}

/* A link to nothing (a cache snapshot whose blob was deleted) is named as one, wherever a file should be. */
Test(generator, a_symlink_to_nothing_is_named_as_one)
{
    static const struct {
        const char *repo, *file;
    } cases[] = {{"Qwen/Qwen2-0.5B", "config.json"},
                 {"Qwen/Qwen2-0.5B", "model.safetensors.head"},
                 {"meta-llama/Meta-Llama-3-8B", "model-00003-of-00004.safetensors.head"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = snapshot_copy(cases[i].repo), *err = NULL, path[4300], want[4400];
        snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
        cr_assert_eq(remove(path), 0);
        cr_assert_eq(symlink("../../blobs/deleted", path), 0);
        int rc = gen(dir, NULL, NULL, &err);
        snprintf(want, sizeof want, "gen-model: %s: a symlink to ../../blobs/deleted, which is not there", path);
        assert_refused(rc, 1, err, want);
        char rm[4400];
        snprintf(rm, sizeof rm, "rm -rf '%s'", dir); /* the next case copies its repo afresh */
        cr_assert_eq(system(rm), 0);
        free(err);
        free(dir);
    }
}

/* ---------------------------------------------------------------------- */
/* output */

Test(generator, same_input_gives_the_same_bytes_and_keeps_living_documents)
{
    char src[4096], *err = NULL;
    snprintf(src, sizeof src, "%s/Qwen/Qwen3-0.6B", HUB);
    cr_assert_eq(gen(src, NULL, NULL, &err), 0, "%s", err);
    free(err);
    char path[4400], todo[4400];
    snprintf(path, sizeof path, "%s/qwen3_0_6b/qwen3_0_6b_weights.c", out_dir);
    snprintf(todo, sizeof todo, "%s/qwen3_0_6b/TODO.md", out_dir);
    size_t l1, l2;
    char *first = tu_read(path, &l1);
    tu_write(todo, "edited by phase0\n", 17);
    /* the lock file an earlier version left beside the model goes too */
    char old_lock[4400];
    snprintf(old_lock, sizeof old_lock, "%s/.qwen3_0_6b.lock", out_dir);
    tu_write(old_lock, "", 0);
    cr_assert_eq(gen(src, NULL, NULL, &err), 0, "%s", err);
    char *second = tu_read(path, &l2);
    cr_assert(l1 == l2 && memcmp(first, second, l1) == 0, "a second run changed the bytes");
    char *kept = tu_read(todo, NULL);
    cr_assert_str_eq(kept, "edited by phase0\n");
    /* nothing is left beside the model: no temporary folder, no lock file (the lock is out_dir's own) */
    char cmd[4400], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -A '%s'", out_dir);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0);
    cr_assert_str_eq(out, "qwen3_0_6b\n");
    free(out);
    free(kept);
    free(first);
    free(second);
    free(err);
}

Test(generator, regenerates_from_its_own_snapshot_without_the_original)
{
    char src[4096], *err = NULL;
    snprintf(src, sizeof src, "%s/meta-llama/Meta-Llama-3-8B", HUB);
    cr_assert_eq(gen(src, NULL, NULL, &err), 0, "%s", err);
    free(err);
    char snap[4400], cmd[9000], *out = NULL;
    snprintf(snap, sizeof snap, "%s/meta_llama_3_8b/snapshot", out_dir);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/snap' && '%s' '%s/snap' --out '%s/again' && diff -r -x TODO.md -x docs '%s/meta_llama_3_8b' '%s/again/meta_llama_3_8b'",
             snap, work, GM_GEN_MODEL, work, work, out_dir, work);
    int rc = tu_run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "%s%s", out, err);
    free(out);
    free(err);
}

Test(generator, a_template_error_names_template_and_line)
{
    char tdir[4300], src[4096], *err = NULL;
    snprintf(tdir, sizeof tdir, "%s/templates", work);
    tu_copy_dir(GM_SOURCE_DIR "/templates", tdir);
    char path[4400];
    snprintf(path, sizeof path, "%s/weights.c.tmpl", tdir);
    char *text = tu_read(path, NULL);
    /* line 4 becomes a reference to a field that does not exist */
    char *line4 = strchr(strchr(strchr(text, '\n') + 1, '\n') + 1, '\n') + 1;
    size_t n = strlen(text) + 64;
    char *edited = malloc(n);
    snprintf(edited, n, "%.*s// ${m.no_such_field}\n%s", (int)(line4 - text), text, line4);
    tu_write(path, edited, strlen(edited));
    snprintf(src, sizeof src, "%s/Qwen/Qwen2-0.5B", HUB);
    char extra[4400];
    snprintf(extra, sizeof extra, "--templates '%s'", tdir);
    int rc = gen(src, extra, NULL, &err);
    char want[4600]; /* named in the folder it was read from */
    snprintf(want, sizeof want, "%s/weights.c.tmpl:4: ${m.no_such_field} is nil", tdir);
    assert_refused(rc, 70, err, want);
    free(err);
    /* a line above the mark (a licence header): refused, as every later run would take the file for the user's */
    snprintf(edited, n, "/* SPDX-License-Identifier: Apache-2.0 */\n%s", text);
    tu_write(path, edited, strlen(edited));
    rc = gen(src, extra, NULL, &err);
    snprintf(want, sizeof want, "%s/weights.c.tmpl: its output must start with '// Code generated by gen-model'", tdir);
    assert_refused(rc, 70, err, want);
    free(edited);
    free(text);
    free(err);
}

Test(generator, scaffolding_again_keeps_the_users_files_and_refuses_another_repos_model_under_its_id)
{
    char src[4096], path[4400], cmd[9000], *out = NULL, *err = NULL;
    snprintf(src, sizeof src, "%s/Qwen/Qwen2-0.5B", HUB);
    cr_assert_eq(gen(src, NULL, NULL, &err), 0, "%s", err);
    free(err);
    /* the user's work beside the generated sources, a folder and a note in docs/ */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/qwen2_0_5b/npu' && echo mine > '%s/qwen2_0_5b/npu/attn.cc' && "
             "echo notes > '%s/qwen2_0_5b/docs/notes.md' && "
             "head -3 '%s/qwen2_0_5b/qwen2_0_5b_weights.h' > '%s/qwen2_0_5b/npu/copied.h'", /* a generated file's copy */
             out_dir, out_dir, out_dir, out_dir, out_dir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(gen(src, NULL, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "gen-model: kept ") && strstr(out, "/qwen2_0_5b/npu (not written by gen-model)") &&
              strstr(out, "/qwen2_0_5b/docs/notes.md (not written by gen-model)"), "%s", out);
    free(out), free(err);
    snprintf(path, sizeof path, "%s/qwen2_0_5b/npu/attn.cc", out_dir);
    char *mine = tu_read(path, NULL);
    cr_expect(mine && strcmp(mine, "mine\n") == 0, "%s is gone", path);
    free(mine);
    snprintf(path, sizeof path, "%s/qwen2_0_5b/npu/copied.h", out_dir);
    cr_expect(tu_exists(path), "%s, in a folder of the user's, is gone", path);
    /* a file of the user's where gen-model writes: refused, not overwritten */
    snprintf(path, sizeof path, "%s/qwen2_0_5b/qwen2_0_5b_registry.c", out_dir);
    tu_write(path, "my own\n", 7);
    cr_assert_eq(gen(src, NULL, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "/qwen2_0_5b/qwen2_0_5b_registry.c: yours (it does not start with '// Code generated by "
                     "gen-model')") && strstr(err, "move it out of the model folder") && tu_lines(err) == 1, "%s", err);
    free(out), free(err);
    mine = tu_read(path, NULL);
    cr_expect(mine && strcmp(mine, "my own\n") == 0, "%s was overwritten", path);
    free(mine);
    remove(path);
    /* another repo's model with the same id: its record would be this one's; refused, the folder as it was */
    snprintf(path, sizeof path, "%s/qwen2_0_5b/TODO.md", out_dir);
    char *before = tu_read(path, NULL);
    cr_assert_eq(gen(src, "--repo someone/Qwen2-0.5B", &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "/qwen2_0_5b/: holds the model of Qwen/Qwen2-0.5B, not someone/Qwen2-0.5B") &&
              strstr(err, "--name ID") && tu_lines(err) == 1, "%s", err);
    char *after = tu_read(path, NULL);
    cr_expect(before && after && strcmp(before, after) == 0, "TODO.md changed");
    free(before), free(after), free(out), free(err);
    /* under a name of its own it is scaffolded */
    cr_expect_eq(gen(src, "--repo someone/Qwen2-0.5B --name someones_qwen", NULL, &err), 0, "%s", err);
    free(err);
    /* a folder is one revision: --revision with it is a mistake, said so, not ignored */
    cr_expect_eq(gen(src, "--revision v9", NULL, &err), 2, "%s", err);
    cr_expect(strstr(err, "--revision: SOURCE ") && strstr(err, "is a folder, one revision already") &&
              tu_lines(err) == 1, "%s", err);
    free(err);
}

/* Qwen2-0.5B scaffolded with `option value`, as model `id`, which regen --check then finds unchanged. */
static void scaffold_then_regen(const char *option, const char *value, const char *id)
{
    char src[4096], extra[256], cmd[9000], *out = NULL, *err = NULL;
    snprintf(src, sizeof src, "%s/Qwen/Qwen2-0.5B", HUB);
    snprintf(extra, sizeof extra, "%s %s", option, value);
    cr_assert_eq(gen(src, extra, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' regen --check --models '%s' %s", GM_GEN_MODEL, out_dir, id);
    cr_expect_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, ": unchanged"), "%s", out);
    free(out), free(err);
}

Test(generator, a_long_repo_name_gives_an_id_that_regen_finds)
{
    /* a Hub repo's name may be 96 characters; the id made of it names the folder regen is given */
    char id[128], repo[140];
    memset(id, 'a', 96), id[96] = '\0';
    snprintf(repo, sizeof repo, "org/%s", id);
    scaffold_then_regen("--repo", repo, id);
    /* and a --name of the most characters an id may have, kept in snapshot/source.json */
    char name[129];
    memset(name, 'b', 128), name[128] = '\0';
    scaffold_then_regen("--name", name, name);
}

Test(generator, ctrl_c_stops_a_template_that_never_ends)
{
    char tdir[4300], path[4400], cmd[16384], *out = NULL, *err = NULL;
    snprintf(tdir, sizeof tdir, "%s/templates", work);
    tu_copy_dir(GM_SOURCE_DIR "/templates", tdir);
    snprintf(path, sizeof path, "%s/cpu_helpers.h.tmpl", tdir);
    char *text = tu_read(path, NULL), *loop = malloc(strlen(text) + 64);
    sprintf(loop, "@ while true do end\n%s", text);
    tu_write(path, loop, strlen(loop));
    /* in the background, SIGINT as a terminal sends it (a shell's & would have it ignored) */
    snprintf(cmd, sizeof cmd, "(env --default-signal=INT '%s' '%s/Qwen/Qwen2-0.5B' --out '%s/out' --templates '%s' & "
             "p=$!; sleep 2; kill -INT $p; wait $p; echo \"status $?\")", GM_GEN_MODEL, HUB, work, tdir);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "status 130") && strstr(err, "gen-model: interrupted while rendering the templates; nothing "
              "was written") && tu_lines(err) == 1, "%s%s", out, err);
    snprintf(path, sizeof path, "%s/out", work);
    cr_expect(!tu_exists(path), "%s was made", path);
    free(out), free(err), free(text), free(loop);
}

Test(generator, usage_errors_exit_2_and_help_exits_0)
{
    char *out = NULL, *err = NULL;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s'", GM_GEN_MODEL);
    cr_assert_eq(tu_run(cmd, NULL, &err), 2);
    cr_assert(strstr(err, "expected one SOURCE"), "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' --help", GM_GEN_MODEL);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0);
    cr_assert(strstr(out, "usage: gen-model SOURCE"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' '%s/Qwen/Qwen2-0.5B' --name '../x'", GM_GEN_MODEL, HUB);
    cr_assert_eq(tu_run(cmd, NULL, &err), 2);
    cr_assert(strstr(err, "--name"), "%s", err);
    free(err);
}

/* ---------------------------------------------------------------------- */
/* hostile strings never reach C */

Test(generator, strings_in_config_json_cannot_inject_code)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
    /* a string field nothing checks (model_type is held to the architecture's) */
    edit_config(dir, "\"model_type\": \"qwen2\",",
                "\"model_type\": \"qwen2\", \"_name_or_path\": \"*/ int evil; /* \\\" \\n#include </etc/passwd> ?\?/\",");
    cr_assert_eq(gen(dir, NULL, NULL, &err), 0, "%s", err);
    /* and model_type itself: refused in one line, the string shown defanged */
    char *dir2 = snapshot_copy("Qwen/Qwen2-0.5B"), *err2 = NULL;
    edit_config(dir2, "\"model_type\": \"qwen2\",", "\"model_type\": \"*/ int evil; /* \\\" \\n#include </etc/passwd>\",");
    cr_assert_eq(gen(dir2, NULL, NULL, &err2), 1, "%s", err2);
    cr_assert(tu_lines(err2) == 1 && !strstr(err2, "*/") && !strstr(err2, "/etc"), "%s", err2);
    free(err2);
    free(dir2);
    char cmd[4400], *out = NULL;
    snprintf(cmd, sizeof cmd, "grep -rl -e evil -e passwd '%s'/qwen2_0_5b/*.[ch]", out_dir);
    cr_assert_neq(tu_run(cmd, &out, NULL), 0, "a config string reached the sources: %s", out);
    free(out);
    free(err);
    free(dir);
}

Test(generator, a_hostile_repo_id_in_the_origin_file_is_refused)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
    char path[4400];
    snprintf(path, sizeof path, "%s/.hub.json", dir);
    const char *evil = "{\"repo\": \"Qwen/x*/ int evil; /*\", \"commit\": null}";
    tu_write(path, evil, strlen(evil));
    int rc = gen(dir, NULL, NULL, &err);
    assert_refused(rc, 1, err, ".hub.json: expected \"repo\" to be a Hub repo id");
    free(err);
    free(dir);
}

/* ---------------------------------------------------------------------- */
/* the generator's Config rules (Lua) against the runtime's reader (C) */

typedef struct { const char *from, *to; } edit;

static const edit edge_cases[] = {
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": null, \"rope_parameters\": {\"rope_theta\": 250000.0},"},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": 1000000.0, \"rope_scaling\": null, \"rope_parameters\": "
     "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
     "\"original_max_position_embeddings\": 8192},"},
    {"\"torch_dtype\": \"bfloat16\",", "\"torch_dtype\": null, \"dtype\": \"float32\","},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": 1000000.0, \"rope_parameters\": {\"rope_theta\": 2000000.0},"},
    {"\"torch_dtype\": \"bfloat16\",", "\"torch_dtype\": \"bfloat16\", \"dtype\": \"float32\","},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": 1000000.0, \"rope_scaling\": {\"factor\": 2.0},"},
    {"\"num_key_value_heads\": 2,", "\"num_key_value_heads\": null,"},
    {"\"num_key_value_heads\": 2,", "\"num_key_value_heads\": 2, \"head_dim\": null,"},
    {"\"num_key_value_heads\": 2,", "\"num_key_value_heads\": 2, \"head_dim\": 128,"},
    {"\"eos_token_id\": 151643,", "\"eos_token_id\": [151643, 151645, 151646],"},
    {"\"eos_token_id\": 151643,", "\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9],"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": null,"},
    {"\"bos_token_id\": 151643,", ""},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": 1e300,"},
    {"\"rms_norm_eps\": 1e-06,", "\"rms_norm_eps\": 1e-320,"},
    {"\"rms_norm_eps\": 1e-06,", "\"rms_norm_eps\": null,"},
    {"\"hidden_size\": 896,", "\"hidden_size\": 8.96e2,"},
    {"\"intermediate_size\": 4864,", "\"intermediate_size\": -4864,"},
    {"\"tie_word_embeddings\": true,", "\"tie_word_embeddings\": null,"},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": 1000000,"},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": 1000000.0, \"time_step_limit\": [0.0, Infinity], "
     "\"floor\": -Infinity, \"unused\": NaN, \"text\": \"NaN Infinity\","},
    {"\"rope_theta\": 1000000.0,", "\"rope_theta\": NaN,"},
    {"\"rms_norm_eps\": 1e-06,", "\"rms_norm_eps\": -Infinity,"},
    {"\"num_key_value_heads\": 2,", "\"num_key_value_heads\": Infinity,"},
    {"\"eos_token_id\": 151643,", "\"eos_token_id\": [151643, NaN],"},
    /* quantization_config: each reader by its own rules, both with transformers' defaults */
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"awq\"},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"AWQ\", "
     "\"version\": \"GEMM\", \"group_size\": 64, \"bits\": 4, \"zero_point\": true},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"gptq\", "
     "\"bits\": 4, \"group_size\": -1, \"desc_act\": true, \"sym\": false, \"checkpoint_format\": \"gptq_v2\"},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"fp8\", "
     "\"weight_block_size\": [64, 32], \"activation_scheme\": \"dynamic\"},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": null,"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"mxfp4\"},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"gptq\"},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"awq\", "
     "\"bits\": 8},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"awq\", "
     "\"zero_point\": false},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"awq\", "
     "\"group_size\": 128.0},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"fp8\", "
     "\"weight_block_size\": [128, 0]},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"fp8\", "
     "\"weight_block_size\": null},"},
    {"\"bos_token_id\": 151643,", "\"bos_token_id\": 151643, \"quantization_config\": {\"quant_method\": \"gptq\", "
     "\"bits\": 4, \"group_size\": 3000000000},"},
};

/* The value of `.field = ` in a generated initializer. */
static double init_value(const char *src, const char *field)
{
    char key[64];
    snprintf(key, sizeof key, ".%s = ", field);
    const char *at = strstr(src, key);
    cr_assert_not_null(at, "no %s in the generated Config", field);
    return strtod(at + strlen(key), NULL);
}

Test(generator, lua_and_c_config_readers_agree_on_edge_cases)
{
    for (size_t i = 0; i < sizeof edge_cases / sizeof edge_cases[0]; i++) {
        char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL, path[4400];
        edit_config(dir, edge_cases[i].from, edge_cases[i].to);
        snprintf(path, sizeof path, "%s/config.json", dir);
        gm_config c;
        gm_status st = {0};
        const int c_ok = gm_config_read(&c, path, &st) == 0;
        const int rc = gen(dir, "--name edge", NULL, &err);
        /* a Config that changes shapes passes config.json and stops at the tensor check */
        const int lua_ok = rc == 0 || (rc == 1 && strstr(err, ": tensor '"));
        cr_assert_eq(lua_ok, c_ok, "case %zu (%s): gen-model %s (%s), the C reader %s (%s)", i, edge_cases[i].to,
                     lua_ok ? "accepts" : "refuses", err, c_ok ? "accepts" : "refuses", st.msg);
        if (rc == 0) {
            snprintf(path, sizeof path, "%s/edge/edge_weights.c", out_dir);
            char *src = tu_read(path, NULL);
            cr_expect_eq(init_value(src, "rope_base"), c.rope_base, "case %zu: rope_base", i);
            cr_expect_eq(init_value(src, "rms_norm_eps"), c.rms_norm_eps, "case %zu: rms_norm_eps", i);
            cr_expect_eq(init_value(src, "n_kv_heads"), c.n_kv_heads, "case %zu: n_kv_heads", i);
            cr_expect_eq(init_value(src, "head_dim"), c.head_dim, "case %zu: head_dim", i);
            cr_expect_eq(init_value(src, "bos_token_id"), c.bos_token_id, "case %zu: bos", i);
            cr_expect_eq(init_value(src, "n_eos_token_ids"), c.n_eos_token_ids, "case %zu: eos", i);
            cr_expect_eq(strstr(src, ".type = GM_ROPE_LLAMA3") != NULL, c.rope_scaling.type == GM_ROPE_LLAMA3,
                         "case %zu: rope_scaling", i);
            static const char *const dtypes[] = {"GM_DTYPE_NONE", "GM_DTYPE_BF16", "GM_DTYPE_F16", "GM_DTYPE_F32"};
            char want[64];
            snprintf(want, sizeof want, ".dtype = %s,", dtypes[c.dtype]);
            cr_expect(strstr(src, want), "case %zu: dtype %s", i, want);
            cr_expect_eq(strstr(src, ".tie_word_embeddings = true") != NULL, c.tie_word_embeddings, "case %zu", i);
            free(src);
        }
        free(err);
        char cmd[4400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, out_dir);
        cr_assert_eq(system(cmd), 0);
        free(dir);
    }
}

/* gm_check_config on dir/config.json: whether it passes, and the Config it hands back. */
static int lua_config(const char *dir, const char *repo, gm_config *out, gm_status *st)
{
    char path[4400];
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = tu_read(path, &len);
    cr_assert_not_null(text, "%s", path);
    gm_snapshot snap = {.repo = (char *)repo, .config = text, .config_len = len};
    gm_gen_options opt = {0};
    memset(out, 0x5A, sizeof *out);
    const int rc = gm_check_config(&snap, &opt, out, st);
    free(text);
    return rc;
}

Test(generator, check_config_hands_back_the_c_readers_config_on_the_edge_cases)
{
    for (size_t i = 0; i < sizeof edge_cases / sizeof edge_cases[0]; i++) {
        char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), path[4400], diff[1024];
        edit_config(dir, edge_cases[i].from, edge_cases[i].to);
        snprintf(path, sizeof path, "%s/config.json", dir);
        gm_config c, lua;
        gm_status cst = {0}, lst = {0};
        const int c_ok = gm_config_read(&c, path, &cst) == 0;
        const int lua_ok = lua_config(dir, "Qwen/Qwen2-0.5B", &lua, &lst) == 0;
        cr_assert_eq(lua_ok, c_ok, "case %zu (%s): check_config %s (%s), the C reader %s (%s)", i, edge_cases[i].to,
                     lua_ok ? "accepts" : "refuses", lst.msg, c_ok ? "accepts" : "refuses", cst.msg);
        if (c_ok) {
            cr_expect(lua.qkv_bias && !lua.qk_norm, "case %zu: Qwen2 has q/k/v bias and no q/k norm", i);
            c.qkv_bias = true;
            c.qk_norm = false;
            cr_expect_eq(gm_config_diff(&lua, &c, diff, sizeof diff), 0, "case %zu (%s): %s", i, edge_cases[i].to,
                         diff);
        }
        free(dir);
    }
}

Test(generator, check_config_hands_back_every_in_scope_repos_config)
{
    static const struct { const char *repo; bool qkv_bias, qk_norm; } repos[] = {
        {"Qwen/Qwen2-0.5B", true, false},         {"Qwen/Qwen2-1.5B", true, false},
        {"Qwen/Qwen3-0.6B", false, true},         {"meta-llama/Llama-3.2-1B", false, false},
        {"meta-llama/Meta-Llama-3-8B", false, false}, {"mistralai/Mistral-7B-v0.3", false, false},
    };
    for (size_t i = 0; i < sizeof repos / sizeof repos[0]; i++) {
        char dir[4200], path[4400], diff[1024];
        gm_config c, lua;
        gm_status st = {0};
        snprintf(dir, sizeof dir, "%s/%s", HUB, repos[i].repo);
        snprintf(path, sizeof path, "%s/config.json", dir);
        cr_assert_eq(gm_config_read(&c, path, &st), 0, "%s", st.msg);
        cr_assert_eq(lua_config(dir, repos[i].repo, &lua, &st), 0, "%s: %s", repos[i].repo, st.msg);
        c.qkv_bias = repos[i].qkv_bias;
        c.qk_norm = repos[i].qk_norm;
        cr_expect_eq(gm_config_diff(&lua, &c, diff, sizeof diff), 0, "%s: %s", repos[i].repo, diff);
    }
    /* NULL: only the check */
    char path[4400];
    size_t len;
    snprintf(path, sizeof path, "%s/Qwen/Qwen3-0.6B/config.json", HUB);
    char *text = tu_read(path, &len);
    gm_snapshot snap = {.repo = "Qwen/Qwen3-0.6B", .config = text, .config_len = len};
    gm_gen_options opt = {0};
    gm_status st = {0};
    cr_expect_eq(gm_check_config(&snap, &opt, NULL, &st), 0, "%s", st.msg);
    free(text);
}

Test(generator, a_repo_named_like_a_runtime_prefix_gets_another_id)
{
    /* gm_reserved_ids, as the host hands them to the generator */
    static const char *const names[] = {"gm", "st", "bf16"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char src[4096], extra[64], path[4300], *err = NULL;
        snprintf(src, sizeof src, "%s/Qwen/Qwen2-0.5B", HUB);
        snprintf(extra, sizeof extra, "--repo someone/%s", names[i]);
        cr_assert_eq(gen(src, extra, NULL, &err), 0, "%s: %s", names[i], err);
        snprintf(path, sizeof path, "%s/%s_model/%s_model_weights.h", out_dir, names[i], names[i]);
        cr_expect(tu_exists(path), "%s: no %s", names[i], path);
        free(err);
    }
}

Test(generator, a_mistral_window_stays_refused_whatever_use_sliding_window_says)
{
    char *dir = snapshot_copy("mistralai/Mistral-7B-v0.1"), *err = NULL;
    edit_config(dir, "\"sliding_window\": 4096,", "\"sliding_window\": 4096, \"use_sliding_window\": false,");
    int rc = gen(dir, NULL, NULL, &err);
    assert_refused(rc, 3, err, "sliding-window attention is out of scope");
    free(err);
    free(dir);
}

Test(generator, a_lone_q_lora_rank_is_named_as_the_field)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
    edit_config(dir, "\"hidden_act\": \"silu\",", "\"hidden_act\": \"silu\", \"q_lora_rank\": 1536,");
    int rc = gen(dir, NULL, NULL, &err);
    assert_refused(rc, 3, err, "(config.json: q_lora_rank = 1536)");
    free(err);
    free(dir);
}

Test(generator, names_from_hostile_headers_cannot_break_the_message_line)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
    edit_header(dir, rename_up_proj); /* then an evil extra name */
    char path[4400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = gen(dir, NULL, NULL, &err);
    cr_assert_eq(rc, 1);
    cr_assert_eq(tu_lines(err), 1, "%s", err);
    free(err);
    free(dir);
}

static void add_evil_tensor(cJSON *root)
{
    cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "model.norm.weight");
    cJSON *end = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "data_offsets"), 1);
    char spec[256];
    snprintf(spec, sizeof spec, "{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[%.0f,%.0f]}", end->valuedouble,
             end->valuedouble);
    cJSON_AddItemToObject(root, "evil\n#include <x>\x1b[31mred", cJSON_Parse(spec));
}

Test(generator, a_tensor_name_with_a_newline_and_an_escape_stays_on_one_line)
{
    char *dir = snapshot_copy("Qwen/Qwen2-0.5B"), *err = NULL;
    edit_header(dir, add_evil_tensor);
    int rc = gen(dir, NULL, NULL, &err);
    assert_refused(rc, 1, err, "unexpected tensor 'evil?#include <x>?[31mred'");
    free(err);
    free(dir);
}

Test(generator, name_is_kept_in_the_snapshot_and_reserved_prefixes_are_refused)
{
    char src[4096], *err = NULL, cmd[9000];
    snprintf(src, sizeof src, "%s/Qwen/Qwen2-0.5B", HUB);
    cr_assert_eq(gen(src, "--name tiny", NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' '%s/tiny/snapshot' --out '%s/again' && diff -r '%s/tiny' '%s/again/tiny'",
             GM_GEN_MODEL, out_dir, work, out_dir, work);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    cr_assert_eq(gen(src, "--name gm", NULL, &err), 2);
    free(err);
}

Test(generator, out_creates_the_missing_parent_folders)
{
    char deep[4400], *err = NULL, cmd[9000], path[4500];
    snprintf(deep, sizeof deep, "%s/new/parent/dir", work);
    snprintf(cmd, sizeof cmd, "'%s' '%s/Qwen/Qwen2-0.5B' --out '%s'", GM_GEN_MODEL, HUB, deep);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/qwen2_0_5b/qwen2_0_5b_weights.c", deep);
    cr_assert(tu_exists(path), "%s was not written", path);
    free(err);
}

Test(generator, version_and_a_bad_option_are_one_line_each)
{
    char cmd[4200], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' --version", GM_GEN_MODEL);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0);
    cr_expect(strncmp(out, "gen-model ", 10) == 0 && strstr(out, "runtime ABI ") && strstr(out, "kernels ") &&
                  tu_lines(out) == 1, "%s", out);
    free(out);
    const char *bad[][2] = {{"--bogus", "unknown option '--bogus'"}, {"-x", "unknown option '-x'"},
                            {"--out", "option '--out' needs a value"}, {"--bogus=1", "unknown option '--bogus'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", GM_GEN_MODEL, bad[i][0]);
        cr_expect_eq(tu_run(cmd, NULL, &err), 2, "%s", bad[i][0]);
        cr_expect(strstr(err, bad[i][1]) && strstr(err, "see gen-model --help") && tu_lines(err) == 1 &&
                      !strstr(err, "usage:"), "%s: %s", bad[i][0], err);
        free(err);
    }
}

/* Every subcommand's --help is its own, and a usage mistake is one line that points at it. */
Test(generator, subcommands_have_their_own_help_and_one_line_usage_errors)
{
    char cmd[4200], *out = NULL, *err = NULL;
    const char *helps[][2] = {{"download --help", "usage: gen-model download ORG/NAME"},
                              {"tokenize --help", "usage: gen-model tokenize TOKENIZER_JSON"},
                              {"regen --help", "usage: gen-model regen"},
                              {"preview --help", "usage: gen-model preview"}};
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", GM_GEN_MODEL, helps[i][0]);
        cr_expect_eq(tu_run(cmd, &out, NULL), 0, "%s", helps[i][0]);
        cr_expect(strncmp(out, helps[i][1], strlen(helps[i][1])) == 0, "%s printed:\n%s", helps[i][0], out);
        free(out);
    }
    const char *bad[][2] = {{"tokenize", "expected one TOKENIZER_JSON, found 0; see gen-model tokenize --help"},
                            {"tokenize a.json b.json", "expected one TOKENIZER_JSON, found 2; see gen-model tokenize --help"},
                            {"tokenize --bogus a.json", "unknown option '--bogus'; see gen-model tokenize --help"},
                            {"download", "expected one ORG/NAME, found 0; see gen-model download --help"},
                            {"download --bogus a/b", "unknown option '--bogus'; see gen-model download --help"},
                            /* the scaffold's options are not download's: refused, not ignored */
                            {"download --out x a/b", "unknown option '--out'; see gen-model download --help"},
                            {"download -n x a/b", "unknown option '-n'; see gen-model download --help"},
                            {"download --templates t a/b", "unknown option '--templates'; see gen-model download --help"},
                            {"regen --bogus", "unknown option '--bogus'; see gen-model regen --help"},
                            {"preview", "see gen-model preview --help"},
                            /* an empty revision is a typo, not a revision the Hub lacks (exit 5 before) */
                            {"Qwen/Qwen2-0.5B --revision ''", "--revision: expected a branch, tag or commit, found an "
                             "empty string"},
                            {"download -R '' Qwen/Qwen2-0.5B", "--revision: expected a branch, tag or commit"},
                            {"preview --revision '' x", "preview: --revision: expected a branch, tag or commit"},
                            /* a revision names a file under the cache's refs/: none that climbs out of it */
                            {"download --revision ../../../../escaped Qwen/Qwen2-0.5B",
                             "found '../../../../escaped', which holds a part that starts with '.'"},
                            {"download --revision /etc/x Qwen/Qwen2-0.5B", "which holds an empty part between slashes"},
                            {"Qwen/Qwen2-0.5B --revision 'main/../../x'", "which holds a part that starts with '.'"},
                            {"download --revision 'a b' Qwen/Qwen2-0.5B", "which holds a control byte, a space"},
                            {"preview --templates . --revision v1.lock x", "which holds a part that ends in '.lock'"},
                            {"download --revision a.lock/b Qwen/Qwen2-0.5B", "which holds a part that ends in '.lock'"},
                            {"download --revision v1. Qwen/Qwen2-0.5B", "which holds a '.' ending"},
                            /* "--" flattens two ids into one cache folder (a--b/c and a/b--c): the Hub refuses it */
                            {"download a--b/c", "expected a Hub repo id ORG/NAME, found 'a--b/c'"},
                            {"download a/b--c", "expected a Hub repo id ORG/NAME, found 'a/b--c'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", GM_GEN_MODEL, bad[i][0]);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s", bad[i][0]);
        cr_expect(strstr(err, bad[i][1]) && tu_lines(err) == 1 && !strstr(err, "usage:") && !*out, "%s: %s",
                  bad[i][0], err);
        free(out);
        free(err);
    }
}

/* --out naming a file, or a path through one, is one line saying so, before anything is read or written. */
Test(generator, out_naming_a_file_is_one_line_saying_it_is_not_a_folder)
{
    char file[4400], cmd[9000], *err = NULL;
    snprintf(file, sizeof file, "%s/afile", work);
    tu_write(file, "x", 1);
    char through[4500];
    snprintf(through, sizeof through, "--out %s/g1: %s is a file, expected a folder", file, file);
    const char *outs[][2] = {{"", "expected a folder, found a file"}, {"/g1", through}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s' '%s/Qwen/Qwen2-0.5B' --out '%s%s'", GM_GEN_MODEL, HUB, file, outs[i][0]);
        cr_expect_eq(tu_run(cmd, NULL, &err), 2, "--out %s%s: %s", file, outs[i][0], err);
        cr_expect(strstr(err, "gen-model: --out ") && strstr(err, "expected a folder") && strstr(err, outs[i][1]) &&
                      tu_lines(err) == 1, "--out %s%s: %s", file, outs[i][0], err);
        free(err);
    }
    char *text = tu_read(file, NULL);
    cr_assert_str_eq(text, "x", "the file was changed");
    free(text);
}

/* tokenize --decode: ids as a list or words; a word that is not an id of the vocabulary is named alone. */
Test(generator, tokenize_decode_names_the_one_word_that_is_not_an_id)
{
    char cmd[8192], *out = NULL, *err = NULL;
    const char *tok = GM_SHARED_DIR "/tokenizers/qwen3/tokenizer.json";
    snprintf(cmd, sizeof cmd, "printf '[9707, 11, 1879]\\n' | '%s' tokenize '%s' --decode", GM_GEN_MODEL, tok);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    cr_expect_str_eq(out, "Hello, world\n");
    free(out), free(err);
    const char *bad[][2] = {{"5 9999999999 1 2", "id 2: expected a token id in [0, 151669), found '9999999999'\n"},
                            {"5 12abc 7", "id 2: expected a token id in [0, 151669), found '12abc'\n"},
                            {"5 6 -3", "id 3: expected a token id in [0, 151669), found '-3'\n"},
                            /* a NUL does not end the list: what follows it is not dropped without a word */
                            {"5 6\\0 7", "stdin: byte 3: expected a token id, found a NUL byte\n"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "printf '%s\\n' | '%s' tokenize '%s' --decode", bad[i][0], GM_GEN_MODEL, tok);
        cr_expect_eq(tu_run(cmd, &out, &err), 1, "%s: %s", bad[i][0], err);
        cr_expect(strstr(err, bad[i][1]) && tu_lines(err) == 1, "%s: %s", bad[i][0], err);
        free(out), free(err);
    }
    /* endless input on stdin: one line at the bound, either way, not all of memory */
    for (int decode = 0; decode < 2; decode++) {
        snprintf(cmd, sizeof cmd, "head -c 300000000 /dev/zero | '%s' tokenize '%s'%s", GM_GEN_MODEL, tok,
                 decode ? " --decode" : "");
        cr_expect_eq(tu_run(cmd, &out, &err), 1, "%s", err);
        cr_expect(strstr(err, "stdin: expected at most 268435456 bytes, found more") && tu_lines(err) == 1, "%s", err);
        free(out), free(err);
    }
}
