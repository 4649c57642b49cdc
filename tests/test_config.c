/*
** gm_config: the independent C reader of config.json (gm/config.h).
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "gm/config.h"

/* ------------------------------------------------------------------------ */
/* the shared snapshots and goldens */

struct expected {
    const char *path; /* under GM_SHARED_DIR */
    int n_layers, emb_dim, n_heads, n_kv_heads, head_dim, hidden_dim, vocab_size;
    double rope_base;
    bool tied;
    double eps;
    int max_pos;
    double llama3_factor; /* 0: default rope */
    int llama3_orig_max_pos;
    int bos, eos;
    gm_dtype dtype;
};

static const struct expected shared_configs[] = {
    {"/hub/Qwen/Qwen2-0.5B/config.json", 24, 896, 14, 2, 64, 4864, 151936, 1e6, true,
     1e-6, 131072, 0, 0, 151643, 151643, GM_DTYPE_BF16},
    {"/hub/Qwen/Qwen2-1.5B/config.json", 28, 1536, 12, 2, 128, 8960, 151936, 1e6, true,
     1e-6, 131072, 0, 0, 151643, 151643, GM_DTYPE_BF16},
    {"/hub/Qwen/Qwen3-0.6B/config.json", 28, 1024, 16, 8, 128, 3072, 151936, 1e6, true,
     1e-6, 40960, 0, 0, 151643, 151645, GM_DTYPE_BF16},
    {"/hub/meta-llama/Llama-3.2-1B/config.json", 16, 2048, 32, 8, 64, 8192, 128256, 5e5,
     true, 1e-5, 131072, 32.0, 8192, 128000, 128001, GM_DTYPE_BF16},
    {"/hub/meta-llama/Meta-Llama-3-8B/config.json", 32, 4096, 32, 8, 128, 14336, 128256,
     5e5, false, 1e-5, 8192, 0, 0, 128000, 128001, GM_DTYPE_BF16},
    {"/hub/mistralai/Mistral-7B-v0.3/config.json", 32, 4096, 32, 8, 128, 14336, 32768, 1e6,
     false, 1e-5, 32768, 0, 0, 1, 2, GM_DTYPE_BF16},
    {"/golden/llama3_tied/config.json", 2, 96, 4, 4, 24, 224, 384, 5e5, true, 1e-5, 4096,
     16.0, 48, 1, 2, GM_DTYPE_BF16},
    {"/golden/llama_f32_checkpoint/config.json", 2, 64, 4, 2, 16, 160, 320, 1e4, false,
     1e-6, 4096, 0, 0, 1, 2, GM_DTYPE_F32},
    {"/golden/llama_untied/config.json", 3, 96, 6, 2, 16, 256, 384, 1e4, false, 1e-5, 4096,
     0, 0, 1, 2, GM_DTYPE_BF16},
    {"/golden/llama_untied_sharded/config.json", 3, 96, 6, 2, 16, 256, 384, 1e4, false,
     1e-5, 4096, 0, 0, 1, 2, GM_DTYPE_BF16},
    {"/golden/mistral_untied/config.json", 3, 64, 4, 1, 16, 176, 263, 1e6, false, 1e-5,
     4096, 0, 0, 1, 2, GM_DTYPE_BF16},
    {"/golden/qwen2_tied/config.json", 2, 96, 6, 2, 16, 272, 384, 1e6, true, 1e-6, 4096, 0,
     0, 1, 2, GM_DTYPE_BF16},
    {"/golden/qwen3_tied/config.json", 2, 64, 4, 2, 48, 192, 384, 1e6, true, 1e-6, 4096, 0,
     0, 1, 2, GM_DTYPE_BF16},
};
#define N_SHARED (sizeof shared_configs / sizeof shared_configs[0])

/* Parameters are indices: see rejects_bad_configs below. */
ParameterizedTestParameters(config, reads_shared_configs)
{
    static size_t idx[N_SHARED];
    for (size_t i = 0; i < N_SHARED; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_SHARED);
}

ParameterizedTest(size_t *i, config, reads_shared_configs)
{
    const struct expected *e = &shared_configs[*i];
    char path[512];
    gm_config c;
    gm_status st = {0};

    snprintf(path, sizeof path, "%s%s", GM_SHARED_DIR, e->path);
    cr_assert_eq(gm_config_read(&c, path, &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.n_layers, e->n_layers);
    cr_expect_eq(c.emb_dim, e->emb_dim);
    cr_expect_eq(c.n_heads, e->n_heads);
    cr_expect_eq(c.n_kv_heads, e->n_kv_heads);
    cr_expect_eq(c.head_dim, e->head_dim);
    cr_expect_eq(c.hidden_dim, e->hidden_dim);
    cr_expect_eq(c.vocab_size, e->vocab_size);
    cr_expect_eq(c.rope_base, e->rope_base);
    cr_expect_eq(c.tie_word_embeddings, e->tied);
    cr_expect_eq(c.rms_norm_eps, e->eps);
    cr_expect_eq(c.max_position_embeddings, e->max_pos);
    if (e->llama3_factor > 0) {
        cr_expect_eq(c.rope_scaling.type, GM_ROPE_LLAMA3);
        cr_expect_eq(c.rope_scaling.factor, e->llama3_factor);
        cr_expect_eq(c.rope_scaling.low_freq_factor, 1.0);
        cr_expect_eq(c.rope_scaling.high_freq_factor, 4.0);
        cr_expect_eq(c.rope_scaling.original_max_position_embeddings, e->llama3_orig_max_pos);
    } else {
        cr_expect_eq(c.rope_scaling.type, GM_ROPE_DEFAULT);
    }
    cr_expect_eq(c.bos_token_id, e->bos);
    cr_expect_eq(c.n_eos_token_ids, 1);
    cr_expect_eq(c.eos_token_ids[0], e->eos);
    cr_expect_eq(c.dtype, e->dtype);
    cr_expect(!c.qkv_bias && !c.qk_norm);
}

Test(config, out_of_scope_snapshots_are_rejected_or_read)
{
    gm_config c;
    gm_status st = {0};

    cr_assert_eq(gm_config_read(&c, GM_SHARED_DIR "/hub/deepseek-ai/DeepSeek-V2-Lite/config.json",
                                &st), GM_EUNSUPPORTED);
    cr_assert(strstr(st.msg, "rope_scaling type 'yarn' is not supported (supported: llama3)"),
              "%s", st.msg);
    cr_assert_eq(gm_config_read(&c, GM_SHARED_DIR "/hub/google-t5/t5-small/config.json", &st),
                 GM_EMISSING);
    cr_assert(strstr(st.msg, "required key 'num_hidden_layers' is missing"), "%s", st.msg);
    // sliding windows and experts are the generator's business, not the reader's
    cr_assert_eq(gm_config_read(&c, GM_SHARED_DIR "/hub/mistralai/Mistral-7B-v0.1/config.json",
                                &st), GM_OK, "%s", st.msg);
    cr_assert_eq(gm_config_read(&c, GM_SHARED_DIR "/hub/mistralai/Mixtral-8x7B-v0.1/config.json",
                                &st), GM_OK, "%s", st.msg);
}

Test(config, read_reports_a_missing_file)
{
    gm_config c;
    gm_status st = {0};

    cr_assert_eq(gm_config_read(&c, "/nonexistent/config.json", &st), GM_EIO);
    cr_assert_str_eq(st.msg, "/nonexistent/config.json: cannot open: No such file or directory");
}

/* ------------------------------------------------------------------------ */
/* inline configs */

#define LAYERS "\"num_hidden_layers\": 2"
#define HIDDEN "\"hidden_size\": 64"
#define HEADS "\"num_attention_heads\": 4"
#define INTER "\"intermediate_size\": 128"
#define VOCAB "\"vocab_size\": 100"
#define EPS "\"rms_norm_eps\": 1e-05"
#define MAXPOS "\"max_position_embeddings\": 256"
#define REQ_BUT_HIDDEN LAYERS ", " HEADS ", " INTER ", " VOCAB ", " EPS ", " MAXPOS
#define REQ HIDDEN ", " REQ_BUT_HIDDEN

static int parse(gm_config *c, const char *json, gm_status *st)
{
    return gm_config_parse(c, json, strlen(json), "config.json", st);
}

Test(config, minimal_config_gets_the_defaults)
{
    gm_config c;
    gm_status st = {0};

    cr_assert_eq(parse(&c, "{" REQ "}", &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.n_kv_heads, 4);
    cr_expect_eq(c.head_dim, 16);
    cr_expect_eq(c.rope_base, 10000.0);
    cr_expect(!c.tie_word_embeddings);
    cr_expect_eq(c.rope_scaling.type, GM_ROPE_DEFAULT);
    cr_expect_eq(c.bos_token_id, -1);
    cr_expect_eq(c.n_eos_token_ids, 0);
    cr_expect_eq(c.dtype, GM_DTYPE_NONE);
    cr_expect_eq(c.rms_norm_eps, 1e-05);
}

Test(config, optional_keys_treat_null_as_absent)
{
    gm_config c;
    gm_status st = {0};
    const char *json = "{" REQ ", \"num_key_value_heads\": null, \"head_dim\": null, "
                       "\"bos_token_id\": null, \"eos_token_id\": null, \"rope_scaling\": null, "
                       "\"rope_theta\": null, \"torch_dtype\": null}";

    cr_assert_eq(parse(&c, json, &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.n_kv_heads, 4);
    cr_expect_eq(c.head_dim, 16);
    cr_expect_eq(c.bos_token_id, -1);
    cr_expect_eq(c.n_eos_token_ids, 0);
    cr_expect_eq(c.rope_base, 10000.0);
    cr_expect_eq(c.dtype, GM_DTYPE_NONE);
}

Test(config, transformers_5_spelling_is_read)
{
    gm_config c;
    gm_status st = {0};
    const char *json = "{" REQ ", \"rope_parameters\": {\"rope_theta\": 500000.0, "
                       "\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                       "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}, "
                       "\"dtype\": \"bfloat16\"}";

    cr_assert_eq(parse(&c, json, &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.rope_base, 5e5);
    cr_expect_eq(c.rope_scaling.type, GM_ROPE_LLAMA3);
    cr_expect_eq(c.rope_scaling.factor, 8.0);
    cr_expect_eq(c.rope_scaling.low_freq_factor, 1.0);
    cr_expect_eq(c.rope_scaling.high_freq_factor, 4.0);
    cr_expect_eq(c.rope_scaling.original_max_position_embeddings, 8192);
    cr_expect_eq(c.dtype, GM_DTYPE_BF16);
}

Test(config, transformers_5_default_rope_and_float16)
{
    gm_config c;
    gm_status st = {0};
    const char *json = "{" REQ ", \"rope_parameters\": {\"rope_theta\": 1000000, "
                       "\"rope_type\": \"default\"}, \"dtype\": \"float16\"}";

    cr_assert_eq(parse(&c, json, &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.rope_base, 1e6);
    cr_expect_eq(c.rope_scaling.type, GM_ROPE_DEFAULT);
    cr_expect_eq(c.dtype, GM_DTYPE_F16);
}

Test(config, legacy_type_key_and_default_scaling)
{
    gm_config c;
    gm_status st = {0};

    cr_assert_eq(parse(&c, "{" REQ ", \"rope_scaling\": {\"type\": \"default\"}}", &st), GM_OK,
                 "%s", st.msg);
    cr_expect_eq(c.rope_scaling.type, GM_ROPE_DEFAULT);
    cr_assert_eq(parse(&c, "{" REQ ", \"rope_scaling\": {\"type\": \"llama3\", \"factor\": 2, "
                           "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                           "\"original_max_position_embeddings\": 64}}", &st), GM_OK,
                 "%s", st.msg);
    cr_expect_eq(c.rope_scaling.type, GM_ROPE_LLAMA3);
    cr_expect_eq(c.rope_scaling.factor, 2.0);
}

Test(config, eos_token_id_may_be_a_list)
{
    gm_config c;
    gm_status st = {0};

    cr_assert_eq(parse(&c, "{" REQ ", \"bos_token_id\": 0, \"eos_token_id\": [128001, 128008, "
                           "128009]}", &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.bos_token_id, 0);
    cr_assert_eq(c.n_eos_token_ids, 3);
    cr_expect_eq(c.eos_token_ids[0], 128001);
    cr_expect_eq(c.eos_token_ids[1], 128008);
    cr_expect_eq(c.eos_token_ids[2], 128009);
    cr_assert_eq(parse(&c, "{" REQ ", \"eos_token_id\": []}", &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.n_eos_token_ids, 0);
    cr_assert_eq(parse(&c, "{" REQ ", \"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8]}", &st), GM_OK,
                 "%s", st.msg);
    cr_expect_eq(c.n_eos_token_ids, GM_MAX_EOS);
}

Test(config, explicit_head_dim_need_not_divide_hidden_size)
{
    gm_config c;
    gm_status st = {0};

    cr_assert_eq(parse(&c, "{\"hidden_size\": 66, " REQ_BUT_HIDDEN ", \"head_dim\": 128}", &st),
                 GM_OK, "%s", st.msg);
    cr_expect_eq(c.head_dim, 128);
}

Test(config, embedded_nul_in_a_string_value_is_harmless)
{
    gm_config c;
    gm_status st = {0};

    cr_assert_eq(parse(&c, "{" REQ ", \"model_type\": \"a\\u0000b\"}", &st), GM_OK, "%s",
                 st.msg);
}

Test(config, a_key_holding_a_nul_is_another_key)
{
    gm_config c;
    gm_status st = {0};

    /* as in Python's json: "torch_dtype\u0000x" is not torch_dtype */
    cr_assert_eq(parse(&c, "{" REQ ", \"torch_dtype\\u0000x\": \"float32\"}", &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.dtype, GM_DTYPE_NONE);
    cr_assert_eq(parse(&c, "{" REQ ", \"torch_dtype\\u0000x\": \"float32\", \"torch_dtype\": \"bfloat16\", "
                           "\"a\\u0000x\": 1, \"a\\u0000y\": 2}", &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.dtype, GM_DTYPE_BF16);
}

/* quantization_config, each method with transformers' defaults for what it leaves out (gm/config.h) */
Test(config, quantization_config_is_read_with_each_methods_defaults)
{
    gm_config c;
    gm_status st = {0};
    cr_assert_eq(parse(&c, "{" REQ "}", &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.quant.method, GM_QUANT_NONE);
    cr_assert_eq(parse(&c, "{" REQ ", \"quantization_config\": null}", &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.quant.method, GM_QUANT_NONE);
    cr_assert_eq(parse(&c, "{" REQ ", \"quantization_config\": {\"quant_method\": \"AWQ\", \"version\": \"GEMM\"}}", &st),
                 GM_OK, "%s", st.msg);
    cr_expect(c.quant.method == GM_QUANT_AWQ && c.quant.bits == 4 && c.quant.group_size == 128 && c.quant.zero_point);
    cr_assert_eq(parse(&c, "{" REQ ", \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
                           "\"group_size\": -1, \"checkpoint_format\": \"gptq_v2\"}}", &st), GM_OK, "%s", st.msg);
    cr_expect(c.quant.method == GM_QUANT_GPTQ && c.quant.group_size == -1 && c.quant.sym && !c.quant.desc_act &&
              c.quant.gptq_v2);
    cr_assert_eq(parse(&c, "{" REQ ", \"quantization_config\": {\"quant_method\": \"fp8\", "
                           "\"weight_block_size\": [64, 32]}}", &st), GM_OK, "%s", st.msg);
    cr_expect(c.quant.method == GM_QUANT_FP8 && c.quant.bits == 8 && c.quant.block_out == 64 && c.quant.group_size == 32);
    cr_assert_eq(parse(&c, "{" REQ ", \"quantization_config\": {\"quant_method\": \"fp8\"}}", &st), GM_OK);
    cr_expect(c.quant.block_out == 128 && c.quant.group_size == 128, "weight_block_size defaults to [128, 128]");
}

Test(config, quantization_config_outside_what_is_read_is_one_line)
{
    static const struct { const char *q; int code; const char *msg; } bad[] = {
        {"{\"quant_method\": \"bitsandbytes\"}", GM_EUNSUPPORTED,
         "config.json: quantization_config.quant_method 'bitsandbytes' is not supported (supported: awq, gptq, fp8)"},
        {"{\"bits\": 4}", GM_EMISSING, "config.json: required key 'quantization_config.quant_method' is missing"},
        {"{\"quant_method\": \"gptq\"}", GM_EMISSING, "config.json: required key 'quantization_config.bits' is missing"},
        {"{\"quant_method\": \"awq\", \"bits\": 8}", GM_EUNSUPPORTED,
         "config.json: quantization_config.bits 8 is not supported (supported: 4)"},
        {"{\"quant_method\": \"awq\", \"version\": \"gemv\"}", GM_EUNSUPPORTED,
         "config.json: quantization_config.version 'gemv' is not supported (supported: gemm)"},
        {"{\"quant_method\": \"awq\", \"group_size\": -1}", GM_EFORMAT,
         "config.json: quantization_config.group_size must be positive, found -1"},
        {"{\"quant_method\": \"fp8\", \"fmt\": \"e5m2\"}", GM_EUNSUPPORTED,
         "config.json: quantization_config.fmt 'e5m2' is not supported (supported: e4m3)"},
        {"{\"quant_method\": \"fp8\", \"weight_block_size\": [128]}", GM_EFORMAT,
         "config.json: quantization_config.weight_block_size must be a list of two positive integers, found an array"},
        /* null is not the default (128, 128): transformers' FineGrainedFP8Config refuses it */
        {"{\"quant_method\": \"fp8\", \"weight_block_size\": null}", GM_EFORMAT,
         "config.json: quantization_config.weight_block_size must be a list of two positive integers, found null "
         "(gen-model reads FP8 with a scale a block: set it to the [outputs, inputs] of the blocks "
         "weight_scale_inv was made with, or leave the key out for transformers' default [128, 128])"},
        {"[\"awq\"]", GM_EFORMAT, "config.json: quantization_config must be an object, found an array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[1024];
        gm_config c;
        gm_status st = {0};
        snprintf(json, sizeof json, "{" REQ ", \"quantization_config\": %s}", bad[i].q);
        cr_expect_eq(parse(&c, json, &st), bad[i].code, "case %zu: %s", i, st.msg);
        cr_expect_str_eq(st.msg, bad[i].msg, "case %zu", i);
    }
}

Test(config, dtype_names)
{
    cr_expect_str_eq(gm_dtype_name(GM_DTYPE_BF16), "bfloat16");
    cr_expect_str_eq(gm_dtype_name(GM_DTYPE_F16), "float16");
    cr_expect_str_eq(gm_dtype_name(GM_DTYPE_F32), "float32");
    cr_expect_str_eq(gm_dtype_name(GM_DTYPE_NONE), "none");
}

struct bad_config {
    const char *json;
    size_t len; /* 0: strlen(json) */
    int code;
    const char *message; /* the whole message */
};

#define C "config.json: "

/*
** Criterion copies parameters into the test process, where pointers into
** this binary's data may not be valid (ASLR): pass indices instead.
*/
static const struct bad_config rejects_bad_configs_cases[] = {
    {"{\"hidden_size\": 896.0, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found 896.0"},
    {"{\"hidden_size\": \"896\", " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found a string"},
    {"{\"hidden_size\": 8.96e2, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found 8.96e2"},
    {"{\"hidden_size\": 1E3, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found 1E3"},
    {"{\"hidden_size\": 064, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "invalid JSON: leading zeros are not allowed at line 1, column 17"}, /* RFC 8259, as the generator reads it */
    {"{\"hidden_size\": null, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found null"},
    {"{\"hidden_size\": true, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found a boolean"},
    {"{\"hidden_size\": [64], " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found an array"},
    {"{\"hidden_size\": 0, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be positive, found 0"},
    {"{\"hidden_size\": -64, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be positive, found -64"},
    {"{\"hidden_size\": 4294967296, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be positive, found 4294967296"},
    // the key is escaped in the text: still found, by position
    {"{\"hidden\\u005fsize\": 896.0, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found 896.0"},
    {"{" REQ_BUT_HIDDEN "}", 0, GM_EMISSING, C "required key 'hidden_size' is missing"},
    {"{" HIDDEN ", " LAYERS ", " HEADS ", " INTER ", " VOCAB ", " MAXPOS "}", 0, GM_EMISSING,
     C "required key 'rms_norm_eps' is missing"},
    {"{" HIDDEN ", " LAYERS ", " HEADS ", " INTER ", " VOCAB ", " EPS "}", 0, GM_EMISSING,
     C "required key 'max_position_embeddings' is missing"},
    {"{" REQ ", \"head_dim\": 16.0}", 0, GM_EFORMAT,
     C "head_dim must be an integer, found 16.0"},
    {"{" REQ ", \"num_key_value_heads\": 3}", 0, GM_EFORMAT,
     C "num_attention_heads 4 is not a multiple of num_key_value_heads 3"},
    {"{" REQ ", \"num_key_value_heads\": 0}", 0, GM_EFORMAT,
     C "num_key_value_heads must be positive, found 0"},
    {"{\"hidden_size\": 66, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "head_dim is absent and hidden_size 66 is not divisible by num_attention_heads 4"},
    {"{" REQ ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}", 0,
     GM_EUNSUPPORTED, C "rope_scaling type 'yarn' is not supported (supported: llama3)"},
    {"{" REQ ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}", 0,
     GM_EUNSUPPORTED, C "rope_scaling type 'linear' is not supported (supported: llama3)"},
    {"{" REQ ", \"rope_parameters\": {\"rope_theta\": 1e4, \"rope_type\": \"dynamic\"}}", 0,
     GM_EUNSUPPORTED,
     C "rope_parameters type 'dynamic' is not supported (supported: llama3)"},
    {"{" REQ ", \"rope_scaling\": {\"factor\": 4.0}}", 0, GM_EMISSING,
     C "required key 'rope_scaling.rope_type' is missing"},
    {"{" REQ ", \"rope_scaling\": {\"rope_type\": 3}}", 0, GM_EFORMAT,
     C "rope_scaling.rope_type must be a string, found 3"},
    {"{" REQ ", \"rope_scaling\": \"llama3\"}", 0, GM_EFORMAT,
     C "rope_scaling must be an object, found a string"},
    {"{" REQ ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1.0, "
     "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}", 0,
     GM_EMISSING, C "required key 'rope_scaling.factor' is missing"},
    {"{" REQ ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, "
     "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
     "\"original_max_position_embeddings\": 8192.0}}", 0, GM_EFORMAT,
     C "rope_scaling.original_max_position_embeddings must be an integer, found 8192.0"},
    {"{" REQ ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": \"32\", "
     "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
     "\"original_max_position_embeddings\": 8192}}", 0, GM_EFORMAT,
     C "rope_scaling.factor must be a number, found a string"},
    {"{" REQ ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"rope_type\": \"yarn\"}}", 0,
     GM_EFORMAT, C "duplicate key 'rope_type'"},
    {"{" REQ ", \"rope_theta\": 10000.0, \"rope_parameters\": {\"rope_theta\": 500000.0}}",
     0, GM_EFORMAT,
     C "rope_theta 10000 and rope_parameters.rope_theta 500000 disagree"},
    {"{" REQ ", \"rope_theta\": 0}", 0, GM_EFORMAT,
     C "rope_theta must be a positive normal fp32 value, found 0"},
    /* Python's json writes NaN and Infinity; a field that must be finite says so */
    {"{" REQ ", \"rope_theta\": Infinity}", 0, GM_EFORMAT, C "rope_theta must be a finite number, found Infinity"},
    {"{" REQ ", \"rope_theta\": NaN}", 0, GM_EFORMAT, C "rope_theta must be a finite number, found NaN"},
    {"{\"hidden_size\": -Infinity, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT,
     C "hidden_size must be an integer, found -Infinity"},
    {"{\"hidden_size\": NaN, " REQ_BUT_HIDDEN "}", 0, GM_EFORMAT, C "hidden_size must be an integer, found NaN"},
    {"{" REQ ", \"x\": nan}", 0, GM_EFORMAT, C "invalid JSON at line 1, column 176"},
    {"{" REQ ", \"rope_theta\": 1e999}", 0, GM_EFORMAT,
     C "rope_theta must be a finite number, found 1e999"},
    {"{" HIDDEN ", " LAYERS ", " HEADS ", " INTER ", " VOCAB ", " MAXPOS
     ", \"rms_norm_eps\": \"1e-5\"}", 0, GM_EFORMAT,
     C "rms_norm_eps must be a number, found a string"},
    {"{" REQ ", \"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", 0, GM_EUNSUPPORTED,
     C "eos_token_id has 9 entries, at most 8 are supported"},
    {"{" REQ ", \"eos_token_id\": [1, 2.0]}", 0, GM_EFORMAT,
     C "eos_token_id[1] must be an integer, found 2.0"},
    {"{" REQ ", \"eos_token_id\": [1, \"2\"]}", 0, GM_EFORMAT,
     C "eos_token_id[1] must be an integer, found a string"},
    {"{" REQ ", \"eos_token_id\": -1}", 0, GM_EFORMAT,
     C "eos_token_id must be non-negative, found -1"},
    {"{" REQ ", \"eos_token_id\": {\"a\": 1}}", 0, GM_EFORMAT,
     C "eos_token_id must be an integer, found an object"},
    {"{" REQ ", \"bos_token_id\": 1.5}", 0, GM_EFORMAT,
     C "bos_token_id must be an integer, found 1.5"},
    {"{" REQ ", \"tie_word_embeddings\": \"true\"}", 0, GM_EFORMAT,
     C "tie_word_embeddings must be a boolean, found a string"},
    {"{" REQ ", \"tie_word_embeddings\": 1}", 0, GM_EFORMAT,
     C "tie_word_embeddings must be a boolean, found 1"},
    {"{" REQ ", \"torch_dtype\": \"int8\"}", 0, GM_EUNSUPPORTED,
     C "torch_dtype 'int8' is not supported (supported: bfloat16, float16, float32)"},
    {"{" REQ ", \"dtype\": 16}", 0, GM_EFORMAT, C "dtype must be a string, found 16"},
    {"{" REQ ", \"torch_dtype\": \"bfloat16\", \"dtype\": \"float32\"}", 0, GM_EFORMAT,
     C "torch_dtype 'bfloat16' and dtype 'float32' disagree"},
    {"{" REQ ", \"hidden_size\": 64}", 0, GM_EFORMAT, C "duplicate key 'hidden_size'"},
    // a NUL in a name: cJSON's copy stops there, the text's does not
    {"{" REQ ", \"torch_dtype\": \"bfloat16\\u0000x\"}", 0, GM_EFORMAT,
     C "torch_dtype 'bfloat16\\u0000...' holds a NUL character"},
    {"{" REQ ", \"rope_scaling\": {\"rope_type\": \"default\\u0000\"}}", 0, GM_EFORMAT,
     C "rope_scaling.rope_type 'default\\u0000...' holds a NUL character"},
    {"{" REQ ", \"a\\u0000x\": 1, \"a\\u0000x\": 2}", 0, GM_EFORMAT, C "duplicate key 'a'"},
    {"{" HIDDEN ", " LAYERS ", " HEADS ", " INTER ", " VOCAB ", " MAXPOS ", \"rms_norm_eps\\u0000\": 1e-05}", 0,
     GM_EMISSING, C "required key 'rms_norm_eps' is missing"},
    // an exponent past the first 47 characters still makes it no integer
    {"{" REQ ", \"bos_token_id\": 10000000000000000000000000000000000000000000000e-45}", 0, GM_EFORMAT,
     C "bos_token_id must be an integer, found 10000000000000000000000000000000000000000000..."},
    {"{\"a\": }", 0, GM_EFORMAT, C "invalid JSON at line 1, column 7"},
    {"{" REQ "} x", 0, GM_EFORMAT, C "unexpected data after the JSON value at line 1, column 171"},
    {"{" REQ "}\0", 0, GM_EFORMAT, NULL}, /* len patched below: a NUL after the object */
{"{\"a\":\0 1}", 9, GM_EFORMAT, C "NUL byte at line 1, column 6"},
    {"[1]", 0, GM_EFORMAT, C "the top level must be an object, found an array"},
    {"", 0, GM_EFORMAT, C "empty file"},
};
#define N_REJECTS_BAD_CONFIGS (sizeof rejects_bad_configs_cases / sizeof rejects_bad_configs_cases[0])

ParameterizedTestParameters(config, rejects_bad_configs)
{
    static size_t idx[N_REJECTS_BAD_CONFIGS];
    for (size_t i = 0; i < N_REJECTS_BAD_CONFIGS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_REJECTS_BAD_CONFIGS);
}

ParameterizedTest(size_t *i, config, rejects_bad_configs)
{
    const struct bad_config *b = &rejects_bad_configs_cases[*i];
    gm_config c;
    gm_status st = {0};
    size_t len = b->len ? b->len : strlen(b->json);

    if (b->message == NULL)
        len++; /* include the terminating NUL byte in the text */
    cr_assert_eq(gm_config_parse(&c, b->json, len, "config.json", &st), b->code,
                 "%s -> code %d: %s", b->json, st.code, st.msg);
    if (b->message != NULL)
        cr_assert_str_eq(st.msg, b->message);
    else
        cr_assert_str_eq(st.msg, C "NUL byte at line 1, column 170");
}

Test(config, python_nan_and_infinity_are_numbers_where_no_field_needs_them)
{
    gm_config c;
    gm_status st = {0};
    /* Nemotron-H's config has "time_step_limit": [0.0, Infinity]; strings holding the words stay strings */
    const char *json = "{" REQ ", \"time_step_limit\": [0.0, Infinity], \"floor\": -Infinity, \"u\": NaN, "
                       "\"s\": \"NaN Infinity\", \"rope_theta\": 500000.0}";
    cr_assert_eq(parse(&c, json, &st), GM_OK, "%s", st.msg);
    cr_expect_eq(c.rope_base, 500000.0);
    cr_expect_eq(c.rms_norm_eps, 1e-05);
}

Test(config, failure_leaves_the_output_untouched)
{
    gm_config c;
    gm_status st = {0};

    memset(&c, 0x5A, sizeof c);
    cr_assert_eq(parse(&c, "{\"hidden_size\": 896.0, " REQ_BUT_HIDDEN "}", &st), GM_EFORMAT);
    cr_expect_eq(c.n_layers, 0x5A5A5A5A);
    cr_assert_eq(parse(&c, "{" REQ "}", NULL), GM_OK); /* a NULL status is allowed */
}

/* ------------------------------------------------------------------------ */
/* gm_config_diff: what gate 3 and the fuzz harness compare with */

/* A Config with every field set to something a model has: llama3 rope, two eos ids. */
#define FULL "{" REQ ", \"num_key_value_heads\": 2, \"rope_theta\": 500000.0, \"bos_token_id\": 1, " \
             "\"eos_token_id\": [2, 3], \"torch_dtype\": \"bfloat16\", \"rope_scaling\": {" \
             "\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, " \
             "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}, \"quantization_config\": {" \
             "\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"desc_act\": true, \"sym\": false}}"

static gm_config full_config(void)
{
    gm_config c;
    gm_status st = {0};
    cr_assert_eq(parse(&c, FULL, &st), GM_OK, "%s", st.msg);
    return c;
}

/* Field i of c changed to another value a generator could write; what the diff must say. */
static const char *change_field(gm_config *c, size_t i)
{
    switch (i) {
    case 0: c->n_layers = 3; return "n_layers (num_hidden_layers) is 3, config.json says 2";
    case 1: c->emb_dim = 128; return "emb_dim (hidden_size) is 128, config.json says 64";
    case 2: c->n_heads = 8; return "n_heads (num_attention_heads) is 8, config.json says 4";
    case 3: c->n_kv_heads = 4; return "n_kv_heads (num_key_value_heads) is 4, config.json says 2";
    case 4: c->head_dim = 32; return "head_dim is 32, config.json says 16";
    case 5: c->hidden_dim = 256; return "hidden_dim (intermediate_size) is 256, config.json says 128";
    case 6: c->vocab_size = 101; return "vocab_size is 101, config.json says 100";
    case 7: c->rope_base = 1e6; return "rope_base (rope_theta) is 1000000, config.json says 500000";
    case 8: c->tie_word_embeddings = true; return "tie_word_embeddings is true, config.json says false";
    case 9: c->rms_norm_eps = 1e-6; return "rms_norm_eps is 1e-06, config.json says 1e-05";
    case 10: c->max_position_embeddings = 512; return "max_position_embeddings is 512, config.json says 256";
    case 11:
        c->rope_scaling.type = GM_ROPE_DEFAULT;
        return "rope_scaling.type (rope_scaling.rope_type) is default, config.json says llama3";
    case 12: c->rope_scaling.factor = 32; return "rope_scaling.factor is 32, config.json says 8";
    case 13: c->rope_scaling.low_freq_factor = 2; return "rope_scaling.low_freq_factor is 2, config.json says 1";
    case 14: c->rope_scaling.high_freq_factor = 8; return "rope_scaling.high_freq_factor is 8, config.json says 4";
    case 15:
        c->rope_scaling.original_max_position_embeddings = 128;
        return "rope_scaling.original_max_position_embeddings is 128, config.json says 64";
    case 16: c->qkv_bias = true; return "qkv_bias (from architectures[0]) is true, config.json says false";
    case 17: c->qk_norm = true; return "qk_norm (from architectures[0]) is true, config.json says false";
    case 18: c->bos_token_id = -1; return "bos_token_id is -1, config.json says 1";
    case 19: c->n_eos_token_ids = 1; return "eos_token_ids (eos_token_id) is [2], config.json says [2, 3]";
    case 20: c->eos_token_ids[1] = 4; return "eos_token_ids (eos_token_id) is [2, 4], config.json says [2, 3]";
    case 21:
        c->eos_token_ids[0] = 3, c->eos_token_ids[1] = 2;
        return "eos_token_ids (eos_token_id) is [3, 2], config.json says [2, 3]";
    case 22: c->n_eos_token_ids = 0; return "eos_token_ids (eos_token_id) is [], config.json says [2, 3]";
    case 23: c->dtype = GM_DTYPE_F32; return "dtype (torch_dtype) is float32, config.json says bfloat16";
    case 24: c->dtype = GM_DTYPE_NONE; return "dtype (torch_dtype) is none, config.json says bfloat16";
    case 25:
        c->quant.method = GM_QUANT_AWQ;
        return "quant.method (quantization_config.quant_method) is awq, config.json says gptq";
    case 26: c->quant.bits = 8; return "quant.bits (quantization_config.bits) is 8, config.json says 4";
    case 27:
        c->quant.group_size = 128;
        return "quant.group_size (quantization_config.group_size) is 128, config.json says 32";
    case 28:
        c->quant.block_out = 128;
        return "quant.block_out (quantization_config.weight_block_size[0]) is 128, config.json says 0";
    case 29:
        c->quant.zero_point = true;
        return "quant.zero_point (quantization_config.zero_point) is true, config.json says false";
    case 30: c->quant.sym = true; return "quant.sym (quantization_config.sym) is true, config.json says false";
    case 31:
        c->quant.desc_act = false;
        return "quant.desc_act (quantization_config.desc_act) is false, config.json says true";
    case 32:
        c->quant.gptq_v2 = true;
        return "quant.gptq_v2 (quantization_config.checkpoint_format gptq_v2) is true, config.json says false";
    default: return NULL;
    }
}

Test(config_diff, equal_configs_differ_in_nothing)
{
    gm_config a = full_config(), b = full_config();
    char out[256];

    memset(out, 'x', sizeof out);
    cr_expect_eq(gm_config_diff(&a, &b, out, sizeof out), 0);
    cr_expect_str_eq(out, "");
    // eos slots past the count are not part of the Config
    b.eos_token_ids[5] = 99;
    cr_expect_eq(gm_config_diff(&a, &b, out, sizeof out), 0, "%s", out);
}

Test(config_diff, every_field_is_compared_and_named)
{
    size_t i;
    for (i = 0; change_field(&(gm_config){0}, i) != NULL; i++) {
        gm_config want = full_config(), got = want;
        const char *says = change_field(&got, i);
        char out[512];
        cr_expect_eq(gm_config_diff(&got, &want, out, sizeof out), 1, "change %zu: %s", i, out);
        cr_expect_str_eq(out, says, "change %zu", i);
    }
    cr_assert_eq(i, 33);
}

Test(config_diff, several_fields_are_one_line_counted_in_field_order)
{
    gm_config want = full_config(), got = want;
    char out[512];

    got.dtype = GM_DTYPE_BF16;
    want.dtype = GM_DTYPE_F32;
    got.rms_norm_eps = 1e-6;
    cr_assert_eq(gm_config_diff(&got, &want, out, sizeof out), 2);
    cr_expect_str_eq(out, "rms_norm_eps is 1e-06, config.json says 1e-05; "
                          "dtype (torch_dtype) is bfloat16, config.json says float32");
    for (size_t i = 0; change_field(&got, i) != NULL; i++)
        ;
    /* every change at once: 19 fields, and the eos list and dtype changed several times over; of the quantization,
       whose method changed, only that */
    cr_expect_eq(gm_config_diff(&got, &want, out, sizeof out), 22, "%s", out);
    cr_expect_null(strchr(out, '\n'));
}

Test(config_diff, doubles_compare_exactly_and_show_the_digits_that_differ)
{
    gm_config want = full_config(), got = want;
    char out[256];

    got.rms_norm_eps = nextafter(want.rms_norm_eps, 1.0);
    cr_assert_eq(gm_config_diff(&got, &want, out, sizeof out), 1);
    cr_expect_str_eq(out, "rms_norm_eps is 1.0000000000000003e-05, config.json says 1e-05");
    got = want;
    got.rope_base = 1e20; /* whole numbers in full only while that stays short */
    cr_assert_eq(gm_config_diff(&got, &want, out, sizeof out), 1);
    cr_expect_str_eq(out, "rope_base (rope_theta) is 1e+20, config.json says 500000");
}

Test(config_diff, a_short_buffer_cuts_the_line_and_keeps_the_count)
{
    gm_config want = full_config(), got = want;
    char full[4096], out[4200];
    size_t i, len;

    for (i = 0; change_field(&got, i) != NULL; i++)
        ;
    const int n = gm_config_diff(&got, &want, full, sizeof full);
    len = strlen(full);
    cr_assert_lt(len, sizeof full - 1, "the whole line must fit the reference buffer");
    cr_expect_eq(gm_config_diff(&got, &want, NULL, 0), n);
    for (size_t size = 1; size <= len + 2; size++) {
        memset(out, '#', sizeof out);
        cr_assert_eq(gm_config_diff(&got, &want, out, size), n, "size %zu", size);
        for (size_t k = size; k < sizeof out; k++)
            cr_assert_eq(out[k], '#', "size %zu: byte %zu written", size, k);
        const size_t got_len = strlen(out);
        cr_assert_lt(got_len, size, "size %zu", size);
        if (size > len) {
            cr_assert_str_eq(out, full, "size %zu", size);
        } else if (size >= 4) { /* cut: what fits, ending in "..." */
            cr_assert_eq(got_len, size - 1, "size %zu", size);
            cr_assert_eq(strncmp(out, full, size - 4), 0, "size %zu: %s", size, out);
            cr_assert_str_eq(out + size - 4, "...", "size %zu", size);
        } else {
            cr_assert_eq(strncmp(out, full, got_len), 0, "size %zu", size);
        }
    }
}

Test(config_diff, architecture_is_read_from_architectures)
{
    char arch[32];
    gm_status st = {0};
    const char *ok = "{\"architectures\": [\"Qwen2ForCausalLM\", \"Other\"]}";

    cr_assert_eq(gm_config_parse_architecture(ok, strlen(ok), "c.json", arch, sizeof arch, &st), GM_OK,
                 "%s", st.msg);
    cr_expect_str_eq(arch, "Qwen2ForCausalLM");
    cr_expect_eq(gm_config_parse_architecture("{}", 2, "c.json", arch, sizeof arch, &st), GM_EMISSING);
    cr_expect_str_eq(st.msg, "c.json: required key 'architectures' is missing");
    cr_expect_eq(gm_config_parse_architecture("{\"architectures\": []}", 21, "c.json", arch, sizeof arch, &st),
                 GM_EFORMAT);
    cr_expect_str_eq(st.msg, "c.json: architectures must be a non-empty list of strings");
    cr_expect_eq(gm_config_parse_architecture(ok, strlen(ok), "c.json", arch, 16, &st), GM_EFORMAT);
    cr_expect_str_eq(st.msg, "c.json: architectures[0] is longer than 15 bytes");
    const char *nul = "{\"architectures\": [\"Qwen2ForCausalLM\\u0000x\"]}";
    cr_expect_eq(gm_config_parse_architecture(nul, strlen(nul), "c.json", arch, sizeof arch, &st), GM_EFORMAT);
    cr_expect_str_eq(st.msg, "c.json: architectures[0] 'Qwen2ForCausalLM\\u0000...' holds a NUL character");
    cr_expect_eq(gm_config_parse_architecture("[1]", 3, "c.json", arch, sizeof arch, &st), GM_EFORMAT);
    cr_expect_str_eq(st.msg, "c.json: the top level must be an object, found an array");
    cr_expect_eq(gm_config_read_architecture(GM_SHARED_DIR "/golden/qwen3_tied/config.json", arch, sizeof arch,
                                             &st), GM_OK, "%s", st.msg);
    cr_expect_str_eq(arch, "Qwen3ForCausalLM");
}

/* The key config.json used is the one named: transformers 5.x's dtype and rope_parameters, or 4.x's. */
Test(config_diff, names_the_key_config_json_used)
{
    static const char five[] = "{" REQ ", \"dtype\": \"bfloat16\", \"rope_parameters\": {\"rope_theta\": 500000.0, "
                               "\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                               "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}, \"quantization_config\": {" \
             "\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"desc_act\": true, \"sym\": false}}";
    gm_config want, got;
    gm_status st = {0};
    char out[1024];

    cr_assert_eq(parse(&want, five, &st), GM_OK, "%s", st.msg);
    cr_expect_str_eq(want.json_key[GM_CONFIG_dtype], "dtype");
    cr_expect_str_eq(want.json_key[GM_CONFIG_rope_scaling], "rope_parameters");
    cr_expect_str_eq(want.json_key[GM_CONFIG_rope_base], "rope_parameters.rope_theta");
    got = want;
    memset(got.json_key, 0, sizeof got.json_key); /* a generated Config knows no keys */
    got.dtype = GM_DTYPE_F32;
    got.rope_base = 1e6;
    got.rope_scaling.factor = 32;
    cr_assert_eq(gm_config_diff(&got, &want, out, sizeof out), 3, "%s", out);
    cr_expect_str_eq(out, "rope_base (rope_parameters.rope_theta) is 1000000, config.json says 500000; "
                          "rope_scaling.factor (rope_parameters.factor) is 32, config.json says 8; "
                          "dtype is float32, config.json says bfloat16");
    got.rope_scaling.type = GM_ROPE_DEFAULT;
    got.rope_scaling.factor = 8;
    got.rope_base = want.rope_base;
    got.dtype = want.dtype;
    cr_assert_eq(gm_config_diff(&got, &want, out, sizeof out), 1, "%s", out);
    cr_expect_str_eq(out, "rope_scaling.type (rope_parameters.rope_type) is default, config.json says llama3");

    /* 4.x spellings name theirs; a key config.json lacks is named by its 4.x spelling */
    want = full_config();
    cr_expect_str_eq(want.json_key[GM_CONFIG_dtype], "torch_dtype");
    cr_expect_str_eq(want.json_key[GM_CONFIG_rope_scaling], "rope_scaling");
    cr_expect_str_eq(want.json_key[GM_CONFIG_rope_base], "rope_theta");
    cr_assert_eq(parse(&want, "{" REQ "}", &st), GM_OK, "%s", st.msg);
    cr_expect_null(want.json_key[GM_CONFIG_dtype]);
    got = want;
    got.dtype = GM_DTYPE_BF16;
    cr_assert_eq(gm_config_diff(&got, &want, out, sizeof out), 1, "%s", out);
    cr_expect_str_eq(out, "dtype (torch_dtype) is bfloat16, config.json says none");
    /* a head count config.json leaves to its default says where the value came from */
    got = want;
    got.n_kv_heads = 1;
    cr_assert_eq(gm_config_diff(&got, &want, out, sizeof out), 1, "%s", out);
    char exp[128];
    snprintf(exp, sizeof exp, "n_kv_heads (num_key_value_heads absent: num_attention_heads) is 1, config.json says %d",
             want.n_heads);
    cr_expect_str_eq(out, exp);
}
