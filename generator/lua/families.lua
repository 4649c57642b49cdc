-- Architecture knowledge, in one place, as data.
--
-- For each in-scope HF architecture string: the tensors it must have (HF
-- name with {L} for the layer index, the C field it fills, its shape in HF
-- order as expressions over Config, and flags), the HF tensors it may carry
-- and nothing consumes, the Config fields the architecture implies (they are
-- not in config.json), what its port needs before the NPU flow starts (the
-- TODO.md prerequisites), and the configurations of it that are refused.
-- `out_of_scope` lists what is refused whatever the architecture claims; it
-- is checked first, so a model is refused for what it is (MoE, MLA, ...)
-- rather than for its name.
--
-- A new in-scope family is a new entry here, not new C, as long as its
-- layers are made of what the runner already computes: RMSNorm, q/k/v/o
-- projections with optional q/k/v biases and per-head q/k norms, RoPE
-- (default or llama3 scaling), causal GQA attention, a SwiGLU MLP. Its
-- tensors map onto the fields of rt_layer / rt_model (runtime/runner/include/
-- gm/runner.h), by field name; the generated loader, registry entry and
-- TODO.md follow from this table. What still needs C:
--   * a tensor with no rt_layer field (a post-attention norm, a bias on o or
--     the MLP): a field in rt_layer and the step in runtime/runner/runner.c;
--   * an operation the runner lacks (sliding-window masks, another
--     activation, a new RoPE scaling type): the runner, and, for RoPE,
--     runtime/model/rope.c and both config readers (config.lua here, and
--     runtime/model/config.c, which gate 3 checks against);
--   * a new implied Config field (M.implied): a field of gm_config
--     (runtime/model/include/gm/config.h) and of gm_model_entry.

local json = require("gm.json")

---@class gm.TensorSpec
---@field field string       C field in <id>_LayerWeights or <id>_Weights
---@field hf string          HF tensor name; "{L}" is the layer index
---@field shape string[]     HF order (outermost first); Lua expressions over Config
---@field transpose? true     a projection: HF (out, in) handed over as (in, out)
---@field tied? string       when tie_word_embeddings, this field aliases that one
---@field linear? true       a linear layer's (out, in) weight held as HF holds it: a quantized checkpoint
---                          may hold it quantized (projections, `transpose`, always are; quant.lua)
---@field doc string         what it is, for the generated comment

---@class gm.Rule
---@field key string         the config.json field that shows the problem
---@field when fun(cfg: table): boolean
---@field why string         what is refused, and why

---@class gm.Family
---@field globals gm.TensorSpec[]
---@field layer gm.TensorSpec[]
---@field ignore string[]    HF tensors that may be present and are consumed on purpose
---@field implies table<string, any>   Config fields set by the architecture (every name of M.implied)
---@field prerequisites string[]   TODO.md lines: what the port needs beyond the common flow; {field} is a Config value
---@field reject gm.Rule[]

local function set(v) return v ~= nil and v ~= json.null end
local function positive(key) return function(c) return math.type(c[key]) and c[key] > 0 end end

local M = {}

-- The Config fields an architecture implies, in the order of the generated
-- <id>_Config (and of gm_config and gm_model_entry, which carry them too).
M.implied = { "qkv_bias", "qk_norm" }

-- config.json's switches the scope rules read: true or false (or absent, or null) and nothing else, since
-- Python takes 1, "false" or [1] as true and transformers would build what they switch on
M.switches = { "attention_bias", "mlp_bias", "use_sliding_window" }

---@type gm.Rule[]
M.out_of_scope = {
  { key = "is_encoder_decoder", why = "encoder-decoder models are out of scope",
    when = function(c) return c.is_encoder_decoder == true end },
  { key = "kv_lora_rank", why = "multi-head latent attention (MLA) is out of scope",
    when = function(c) return set(c.kv_lora_rank) end },
  { key = "q_lora_rank", why = "multi-head latent attention (MLA) is out of scope",
    when = function(c) return set(c.q_lora_rank) end },
  { key = "num_local_experts", why = "mixture-of-experts models are out of scope",
    when = positive("num_local_experts") },
  { key = "n_routed_experts", why = "mixture-of-experts models are out of scope",
    when = positive("n_routed_experts") },
  { key = "num_experts", why = "mixture-of-experts models are out of scope",
    when = positive("num_experts") },
  { key = "layer_types", why = "sliding-window attention is out of scope",
    when = function(c)
      if type(c.layer_types) ~= "table" then return false end
      for _, t in ipairs(c.layer_types) do if t == "sliding_attention" then return true end end
      return false
    end },
}

local function tensor(field, hf, shape, doc, extra)
  local t = { field = field, hf = hf, shape = shape, doc = doc }
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

-- Sliding-window attention, two ways: Llama and Mistral apply any sliding_window
-- that is set; Qwen2 and Qwen3 configs carry a numeric sliding_window together
-- with use_sliding_window, and only `true` turns the window on.
local window_always = { key = "sliding_window", why = "sliding-window attention is out of scope",
  when = function(c) return set(c.sliding_window) end }
local window_if_used = { key = "sliding_window", why = "sliding-window attention is out of scope",
  when = function(c) return set(c.sliding_window) and c.use_sliding_window == true end }

local attention_bias = { key = "attention_bias", why = "biased attention projections are not in the Llama layout",
  when = function(c) return c.attention_bias == true end }
local mlp_bias = { key = "mlp_bias", why = "biased MLP projections are not in the Llama layout",
  when = function(c) return c.mlp_bias == true end }
local not_silu = { key = "hidden_act", why = "only SiLU-gated MLPs (SwiGLU) are in scope",
  when = function(c) return set(c.hidden_act) and c.hidden_act ~= "silu" end }

local q_out = "n_heads * head_dim"
local kv_out = "n_kv_heads * head_dim"

---@type gm.Family
local llama = {
  globals = {
    tensor("tok_embd", "model.embed_tokens.weight", { "vocab_size", "emb_dim" }, "token embedding table"),
    tensor("out_norm", "model.norm.weight", { "emb_dim" }, "final RMSNorm weight"),
    tensor("lm_head", "lm_head.weight", { "vocab_size", "emb_dim" }, "output projection",
      { tied = "tok_embd", linear = true }),
  },
  layer = {
    tensor("attn_norm", "model.layers.{L}.input_layernorm.weight", { "emb_dim" }, "RMSNorm before attention"),
    tensor("wq", "model.layers.{L}.self_attn.q_proj.weight", { q_out, "emb_dim" }, "query projection",
      { transpose = true }),
    tensor("wk", "model.layers.{L}.self_attn.k_proj.weight", { kv_out, "emb_dim" }, "key projection",
      { transpose = true }),
    tensor("wv", "model.layers.{L}.self_attn.v_proj.weight", { kv_out, "emb_dim" }, "value projection",
      { transpose = true }),
    tensor("wo", "model.layers.{L}.self_attn.o_proj.weight", { "emb_dim", q_out }, "attention output projection",
      { transpose = true }),
    tensor("ffn_norm", "model.layers.{L}.post_attention_layernorm.weight", { "emb_dim" }, "RMSNorm before the MLP"),
    tensor("w_gate", "model.layers.{L}.mlp.gate_proj.weight", { "hidden_dim", "emb_dim" }, "MLP gate projection",
      { transpose = true }),
    tensor("w_up", "model.layers.{L}.mlp.up_proj.weight", { "hidden_dim", "emb_dim" }, "MLP up projection",
      { transpose = true }),
    tensor("w_down", "model.layers.{L}.mlp.down_proj.weight", { "emb_dim", "hidden_dim" }, "MLP down projection",
      { transpose = true }),
  },
  -- old checkpoints saved the RoPE buffer; it is recomputed from Config
  ignore = { "model.layers.{L}.self_attn.rotary_emb.inv_freq" },
  implies = { qkv_bias = false, qk_norm = false },
  prerequisites = {},
  reject = { attention_bias, mlp_bias, not_silu, window_always },
}

-- A family that is Llama plus `delta`: extra layer tensors (each placed
-- after the field its `after` names), implied fields, prerequisites,
-- and its own rejections in place of Llama's where given.
local function extends(base, delta)
  local f = { globals = base.globals, ignore = base.ignore, layer = {}, implies = {},
    prerequisites = delta.prerequisites or base.prerequisites, reject = delta.reject or base.reject }
  for _, t in ipairs(base.layer) do
    f.layer[#f.layer + 1] = t
    for _, a in ipairs(delta.layer_add or {}) do
      if a.after == t.field then f.layer[#f.layer + 1] = a end
    end
  end
  for k, v in pairs(base.implies) do f.implies[k] = v end
  for k, v in pairs(delta.implies or {}) do f.implies[k] = v end
  return f
end

---@type table<string, gm.Family>
M.by_arch = {
  LlamaForCausalLM = llama,
  MistralForCausalLM = llama, -- without sliding window (out_of_scope checks it)
  Qwen2ForCausalLM = extends(llama, {
    layer_add = {
      tensor("bq", "model.layers.{L}.self_attn.q_proj.bias", { q_out }, "query bias (added before RoPE)",
        { after = "wv" }),
      tensor("bk", "model.layers.{L}.self_attn.k_proj.bias", { kv_out }, "key bias (added before RoPE)",
        { after = "wv" }),
      tensor("bv", "model.layers.{L}.self_attn.v_proj.bias", { kv_out }, "value bias",
        { after = "wv" }),
    },
    implies = { qkv_bias = true },
    prerequisites = {
      "Phase 2: the NPU kernels have no bias, so the q/k/v biases (`bq`, `bk`, `bv`) are added on the\n"
        .. "  host around the bias-free kernels, before RoPE, using RoPE(q + bq) = RoPE(q) + RoPE(bq)\n"
        .. "  (and likewise for k); v's bias is added to the value projection's output.",
    },
    reject = { not_silu, window_if_used }, -- Qwen2's bias is implied, not configured
  }),
  Qwen3ForCausalLM = extends(llama, {
    layer_add = {
      tensor("q_norm", "model.layers.{L}.self_attn.q_norm.weight", { "head_dim" },
        "per-head RMSNorm on q, before RoPE", { after = "wv" }),
      tensor("k_norm", "model.layers.{L}.self_attn.k_norm.weight", { "head_dim" },
        "per-head RMSNorm on k, before RoPE", { after = "wv" }),
    },
    implies = { qk_norm = true },
    prerequisites = {
      "Phase 2: `q_norm` and `k_norm` are RMSNorms over each head (head_dim {head_dim}) applied to q and k\n"
        .. "  after the projection and before RoPE.",
    },
    reject = { attention_bias, mlp_bias, not_silu, window_if_used },
  }),
}

-- The model_type each architecture's config.json carries: transformers builds
-- the model model_type names (AutoConfig, then AutoModelForCausalLM by the
-- config's class), whatever architectures says, so a config whose two
-- disagree is refused rather than scaffolded as the architecture.
M.model_type = {
  LlamaForCausalLM = "llama",
  MistralForCausalLM = "mistral",
  Qwen2ForCausalLM = "qwen2",
  Qwen3ForCausalLM = "qwen3",
}
for arch in pairs(M.by_arch) do assert(M.model_type[arch], "families.lua: no model_type for " .. arch) end

-- Architectures in a stable order, for messages.
function M.supported()
  local names = {}
  for k in pairs(M.by_arch) do names[#names + 1] = k end
  table.sort(names)
  return names
end

return M
