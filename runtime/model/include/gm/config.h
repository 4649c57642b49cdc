/*
** The model hyperparameters every generated <id>_Config carries, in one
** runtime type, and an independent reader of them from config.json.
**
** gen-model extracts the Config in Lua (generator/lua/config.lua); this C
** reader exists so that Phase 0's gate 3 (the generated Config equals
** config.json) compares against a second implementation of the rules, which
** GM_CONFIG_FIELDS below states field by field. Integer fields must be JSON
** integers (896.0 is an error naming the key); for an optional key, null
** means absent.
*/
#ifndef GM_CONFIG_H
#define GM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "gm/quant.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GM_MAX_EOS 8

typedef enum gm_rope_type { GM_ROPE_DEFAULT = 0, GM_ROPE_LLAMA3 = 1 } gm_rope_type;

typedef enum gm_dtype {
    GM_DTYPE_NONE = 0, /* config.json names no dtype */
    GM_DTYPE_BF16,
    GM_DTYPE_F16,
    GM_DTYPE_F32
} gm_dtype;

typedef struct gm_rope_scaling {
    gm_rope_type type;
    double factor;
    double low_freq_factor;
    double high_freq_factor;
    int original_max_position_embeddings;
} gm_rope_scaling;

/*
** The Config's fields, in the struct's order: X(kind, field, key, key5, rule). This list is the
** one description of them on the C side: it makes gm_config below, gm_config_diff's comparisons
** and the names they give, and the generator's conversion of its Lua Config into a gm_config
** (generator/lua_host.c). gm_config_parse reads config.json by its own code, field by field:
** the independent reading gate 3 needs, which these rules describe.
**   kind   how the field is held and compared: INT; TOKEN, an id or -1; DOUBLE; BOOL; ROPE, a
**          gm_rope_scaling; EOS, n_<field> ids in <field>[GM_MAX_EOS]; DTYPE, a gm_dtype; QUANT, a
**          gm_quant_config (gm/quant.h), compared field by field; ARCH,
**          a bool that comes with architectures[0] (generator/lua/families.lua), not read from
**          config.json: the caller sets it from the model's registry entry before comparing
**   key    its config.json key (transformers 4.x); key5, the 5.x spelling, or NULL
**   rule   what config.json holds there, and what its absence means
*/
#define GM_CONFIG_FIELDS(X)                                                                              \
    X(INT, n_layers, "num_hidden_layers", NULL, "decoder layers")                                        \
    X(INT, emb_dim, "hidden_size", NULL, "residual stream width")                                        \
    X(INT, n_heads, "num_attention_heads", NULL, "query heads")                                          \
    X(INT, n_kv_heads, "num_key_value_heads", NULL, "key/value heads (absent: n_heads)")                 \
    X(INT, head_dim, "head_dim", NULL, "per-head width (absent: emb_dim / n_heads)")                     \
    X(INT, hidden_dim, "intermediate_size", NULL, "MLP width")                                           \
    X(INT, vocab_size, "vocab_size", NULL, "vocabulary size")                                            \
    X(DOUBLE, rope_base, "rope_theta", "rope_parameters.rope_theta", "RoPE theta (absent: 10000.0)")     \
    X(BOOL, tie_word_embeddings, "tie_word_embeddings", NULL, "lm_head is the embedding table (absent: false)") \
    X(DOUBLE, rms_norm_eps, "rms_norm_eps", NULL, "RMSNorm epsilon")                                     \
    X(INT, max_position_embeddings, "max_position_embeddings", NULL, "longest position trained for")    \
    X(ROPE, rope_scaling, "rope_scaling", "rope_parameters",                                             \
      "rope_type (or type) \"llama3\" with factor, low_freq_factor, high_freq_factor and "              \
      "original_max_position_embeddings; \"default\", null or absent: none")                             \
    X(ARCH, qkv_bias, NULL, NULL, "the q, k and v projections have a bias")                              \
    X(ARCH, qk_norm, NULL, NULL, "q and k get a per-head RMSNorm before RoPE")                           \
    X(TOKEN, bos_token_id, "bos_token_id", NULL, "beginning-of-sequence id (absent or null: -1)")        \
    X(EOS, eos_token_ids, "eos_token_id", NULL, "end-of-sequence ids, an int or a list (absent, null or []: none)") \
    X(DTYPE, dtype, "torch_dtype", "dtype", "\"bfloat16\", \"float16\" or \"float32\" (absent or null: none); both present must agree") \
    X(QUANT, quant, "quantization_config", NULL,                                                         \
      "quant_method \"awq\" (bits 4, group_size, zero_point true, version \"gemm\"), \"gptq\" (bits 4, "          \
      "group_size, sym, desc_act, checkpoint_format \"gptq\" or \"gptq_v2\") or \"fp8\" (fmt \"e4m3\", "            \
      "activation_scheme \"dynamic\", weight_block_size [block_out, group_size]), absent keys as transformers "  \
      "defaults them; absent or null: none. A Q4NX bundle says it by its file, model.q4nx, not config.json: "  \
      "the caller sets it (gm_quant_q4nx())")

/* Each field's index: GM_CONFIG_n_layers, ..., and how many there are. */
enum {
#define GM_CONFIG_INDEX(kind, field, key, key5, rule) GM_CONFIG_##field,
    GM_CONFIG_FIELDS(GM_CONFIG_INDEX)
#undef GM_CONFIG_INDEX
    GM_CONFIG_N_FIELDS
};

#define GM_CONFIG_MEMBER_INT(f) int f;
#define GM_CONFIG_MEMBER_TOKEN(f) int f;
#define GM_CONFIG_MEMBER_DOUBLE(f) double f;
#define GM_CONFIG_MEMBER_BOOL(f) bool f;
#define GM_CONFIG_MEMBER_ARCH(f) bool f;
#define GM_CONFIG_MEMBER_ROPE(f) gm_rope_scaling f;
#define GM_CONFIG_MEMBER_EOS(f) int n_##f; int f[GM_MAX_EOS];
#define GM_CONFIG_MEMBER_DTYPE(f) gm_dtype f;
#define GM_CONFIG_MEMBER_QUANT(f) gm_quant_config f;

typedef struct gm_config {
#define GM_CONFIG_MEMBER(kind, field, key, key5, rule) GM_CONFIG_MEMBER_##kind(field)
    GM_CONFIG_FIELDS(GM_CONFIG_MEMBER)
#undef GM_CONFIG_MEMBER
    /*
    ** For a field config.json spells two ways (key5 not NULL): the key gm_config_parse read it
    ** from, one of the two, which gm_config_diff names; NULL where it was absent, or the Config
    ** was not read from config.json (a generated one). For n_kv_heads where config.json has no
    ** num_key_value_heads: "num_key_value_heads absent: num_attention_heads", where it came from.
    */
    const char *json_key[GM_CONFIG_N_FIELDS];
} gm_config;

/*
** Read *c from config.json text (len bytes), by the rules of GM_CONFIG_FIELDS.
** `what` names the file in messages. qkv_bias and qk_norm are left false.
*/
int gm_config_parse(gm_config *c, const char *json, size_t len,
                    const char *what, gm_status *st);

/* Same, from a file. */
int gm_config_read(gm_config *c, const char *path, gm_status *st);

/* "bfloat16", "float16", "float32" or "none". */
const char *gm_dtype_name(gm_dtype d);

/*
** config.json's architectures[0] ("Qwen2ForCausalLM") into out (size bytes),
** the architecture that decides qkv_bias and qk_norm. An error when the key
** is missing, is not a non-empty list of strings, or the name does not fit.
*/
int gm_config_parse_architecture(const char *json, size_t len, const char *what,
                                 char *out, size_t size, gm_status *st);
int gm_config_read_architecture(const char *path, char *out, size_t size, gm_status *st);

/*
** Compare every field of got (a generated Config) with want (config.json's,
** with qkv_bias and qk_norm set from the architecture); doubles exactly.
** Returns how many fields differ and writes them to out as one line,
** "dtype (torch_dtype) is bfloat16, config.json says float32; rms_norm_eps
** is 1e-06, config.json says 1e-05", in GM_CONFIG_FIELDS's order, with the
** config.json key in parentheses where its name differs: the one want was
** read from (want->json_key: dtype or torch_dtype, rope_parameters or
** rope_scaling), else the 4.x key. Cut with "..." at size bytes, always
** NUL-terminated; "" when they are equal. out may be NULL when size is 0.
*/
int gm_config_diff(const gm_config *got, const gm_config *want, char *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif
