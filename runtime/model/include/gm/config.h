/*
** The model hyperparameters every generated <id>_Config carries, in one
** runtime type, and an independent reader of them from config.json.
**
** gen-model extracts the Config in Lua (generator/lua/config.lua); this C
** reader exists so that Phase 0's gate 3 (the generated Config equals
** config.json) compares against a second implementation of the rules:
**   n_layers <- num_hidden_layers        emb_dim <- hidden_size
**   n_heads <- num_attention_heads       n_kv_heads <- num_key_value_heads (absent: n_heads)
**   head_dim <- head_dim (absent: emb_dim / n_heads)
**   hidden_dim <- intermediate_size      vocab_size <- vocab_size
**   rope_base <- rope_theta, or rope_parameters.rope_theta (absent: 10000.0)
**   tie_word_embeddings (absent: false)  rms_norm_eps, max_position_embeddings
**   rope_scaling or rope_parameters: type "llama3" with factor, low_freq_factor,
**     high_freq_factor, original_max_position_embeddings; "default"/null = none
**   bos_token_id (absent/null: -1), eos_token_id (int or list; absent/null: none)
**   torch_dtype or dtype: "bfloat16" | "float16" | "float32"
**   qkv_bias, qk_norm: not read; they come with the architecture
**     (generator/lua/families.lua), which the caller knows from the model's
**     registry entry and sets before comparing
** Integer fields must be JSON integers (896.0 is an error naming the key).
*/
#ifndef GM_CONFIG_H
#define GM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "gm/status.h"

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

typedef struct gm_config {
    int n_layers;
    int emb_dim;
    int n_heads;
    int n_kv_heads;
    int head_dim;
    int hidden_dim;
    int vocab_size;
    double rope_base;
    bool tie_word_embeddings;
    double rms_norm_eps;
    int max_position_embeddings;
    gm_rope_scaling rope_scaling;
    bool qkv_bias;   /* set by the caller from the architecture, not by the reader */
    bool qk_norm;    /* likewise */
    int bos_token_id;
    int n_eos_token_ids;
    int eos_token_ids[GM_MAX_EOS];
    gm_dtype dtype;
} gm_config;

/*
** Read *c from config.json text (len bytes). `what` names the file in
** messages. qkv_bias and qk_norm are left false.
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
** is 1e-06, config.json says 1e-05" (the config.json key in parentheses
** where its name differs), cut with "..." at size bytes, always
** NUL-terminated; "" when they are equal. out may be NULL when size is 0.
*/
int gm_config_diff(const gm_config *got, const gm_config *want, char *out, size_t size);

#endif
