/*
** gm_config: the independent C reader of config.json (gm/config.h).
*/
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
    {"{" REQ ", \"rope_theta\": 1e999}", 0, GM_EFORMAT,
     C "rope_theta must be a positive normal fp32 value, found 1e999"},
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

Test(config, failure_leaves_the_output_untouched)
{
    gm_config c;
    gm_status st = {0};

    memset(&c, 0x5A, sizeof c);
    cr_assert_eq(parse(&c, "{\"hidden_size\": 896.0, " REQ_BUT_HIDDEN "}", &st), GM_EFORMAT);
    cr_expect_eq(c.n_layers, 0x5A5A5A5A);
    cr_assert_eq(parse(&c, "{" REQ "}", NULL), GM_OK); /* a NULL status is allowed */
}
