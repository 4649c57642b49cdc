-- config.json -> Config: the Phase 0 extraction rules, as data.
--
-- Each field names its C type, the config.json key it comes from (with the
-- transformers 5.x spelling where one exists) and what happens when the key
-- is absent: `default` (a constant), `default_from` (another field) or
-- `derive` (an expression over fields read before it). A field with none of
-- these is required. Integers must be JSON integers: 896.0 is an error.

local json = require("gm.json")
local E = require("errors")

---@class gm.ConfigField
---@field name string         C field name in <id>_Config
---@field key string|nil      config.json key (transformers 4.x spelling)
---@field key5 string|nil     the transformers 5.x spelling, "obj.key"
---@field type "int"|"float"|"bool"|"token"|"tokens"|"dtype"|"rope_scaling"
---@field default any|nil
---@field default_from string|nil
---@field derive string|nil
---@field doc string

---@type gm.ConfigField[]
local fields = {
  { name = "n_layers", key = "num_hidden_layers", type = "int", doc = "decoder layers" },
  { name = "emb_dim", key = "hidden_size", type = "int", doc = "residual stream width" },
  { name = "n_heads", key = "num_attention_heads", type = "int", doc = "query heads" },
  { name = "n_kv_heads", key = "num_key_value_heads", type = "int", default_from = "n_heads",
    doc = "key/value heads (absent: n_heads)" },
  { name = "head_dim", key = "head_dim", type = "int", derive = "emb_dim // n_heads",
    doc = "per-head width (absent: emb_dim / n_heads)" },
  { name = "hidden_dim", key = "intermediate_size", type = "int", doc = "MLP width" },
  { name = "vocab_size", key = "vocab_size", type = "int", doc = "vocabulary size" },
  { name = "rope_base", key = "rope_theta", key5 = "rope_parameters.rope_theta", type = "float",
    default = 10000.0, doc = "RoPE theta (absent: 10000.0)" },
  { name = "tie_word_embeddings", key = "tie_word_embeddings", type = "bool", default = false,
    doc = "lm_head is the embedding table (absent: false)" },
  { name = "rms_norm_eps", key = "rms_norm_eps", type = "float", doc = "RMSNorm epsilon" },
  { name = "max_position_embeddings", key = "max_position_embeddings", type = "int",
    doc = "longest position the model was trained for" },
  { name = "rope_scaling", key = "rope_scaling", key5 = "rope_parameters", type = "rope_scaling",
    default = false, doc = "RoPE frequency scaling (llama3 or none)" },
  { name = "bos_token_id", key = "bos_token_id", type = "token", default = -1,
    doc = "beginning-of-sequence id (-1: none)" },
  { name = "eos_token_ids", key = "eos_token_id", type = "tokens", default = {},
    doc = "end-of-sequence ids (eos_token_id may be a list)" },
  { name = "dtype", key = "torch_dtype", key5 = "dtype", type = "dtype", default = "none",
    doc = "checkpoint dtype named by config.json" },
  { name = "quant", key = "quantization_config", type = "quant", default = false,
    doc = "how the projections are quantized, and the sizes (none; Q4NX: a model.q4nx bundle)" },
}

local dtypes = { bfloat16 = "GM_DTYPE_BF16", float16 = "GM_DTYPE_F16", float32 = "GM_DTYPE_F32" }
local MAX_EOS = require("gm.runtime").max_eos -- GM_MAX_EOS (gm/config.h), handed over by the host
local INT_MAX = 2147483647

local M = { fields = fields, dtypes = dtypes }

-- Upper bounds on the dimensions ({field, config.json key, bound}) and on the
-- elements of one tensor (2^34: 32 GiB of bf16).
M.limits = {
  { "n_layers", "num_hidden_layers", 1024 },
  { "emb_dim", "hidden_size", 1 << 20 },
  { "n_heads", "num_attention_heads", 1 << 16 },
  { "n_kv_heads", "num_key_value_heads", 1 << 16 },
  { "head_dim", "head_dim", 1 << 16 },
  { "hidden_dim", "intermediate_size", 1 << 22 },
  { "vocab_size", "vocab_size", 1 << 24 },
  { "max_position_embeddings", "max_position_embeddings", 1 << 28 },
}
M.MAX_TENSOR = 1 << 34

local function fail(fmt, ...) E.raise("format", fmt, ...) end

local function is_null(v) return v == json.null end

local function describe(v)
  if is_null(v) then return "null" end
  local t = math.type(v) or type(v)
  if t == "float" and (v ~= v or math.abs(v) == math.huge) then -- as Python's json writes them
    return v ~= v and "NaN" or v > 0 and "Infinity" or "-Infinity"
  end
  if t == "float" then -- shortest text that reads back to the same value
    if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%.1f", v) end
    local text
    for p = 1, 17 do
      text = string.format("%." .. p .. "g", v)
      if tonumber(text) == v then break end
    end
    return text:find("[.eEn]") and text or text .. ".0"
  end
  if t == "integer" then return tostring(v) end
  if v == nil then return "absent" end
  if t == "table" and getmetatable(v) == json.array_mt then -- a short list of scalars as written; others by length
    local parts = {}
    for i, e in ipairs(v) do
      if i > 8 or type(e) == "table" then return string.format("a list of %d", #v) end
      parts[i] = describe(e)
    end
    return "[" .. table.concat(parts, ", ") .. "]"
  end
  if t == "table" then return "an object" end
  if t == "boolean" then return tostring(v) end
  if t == "string" then
    local s = v:sub(1, 40):gsub("[^%w _./:-]", "?")
    return "a string '" .. s .. (#v > 40 and "...'" or "'")
  end
  return "a " .. t
end
M.describe = describe

-- Look a field up in the 4.x spelling, then the 5.x one. JSON null counts as
-- absent. Returns the value (nil when absent), the key it came from, and
-- whether a key was present but null. Two spellings that disagree are an
-- error rather than a silent choice.
local function lookup(cfg, f, file)
  local function get(path)
    if not path then return nil, false end
    local obj, sub = path:match("^([^.]+)%.(.+)$")
    local v
    if obj then
      local o = cfg[obj]
      if type(o) == "table" and getmetatable(o) == json.object_mt then v = o[sub] end
    else
      v = cfg[path]
    end
    if is_null(v) then return nil, true end
    return v, false
  end
  local v4, null4 = get(f.key)
  local v5, null5 = get(f.key5)
  if v4 ~= nil and v5 ~= nil and type(v4) ~= "table" and v4 ~= v5 then
    fail("%s: %s = %s and %s = %s disagree", file, f.key, describe(v4), f.key5, describe(v5))
  end
  if v4 ~= nil then return v4, f.key, false end
  if v5 ~= nil then return v5, f.key5, false end
  return nil, f.key or f.key5, null4 or null5
end

local function int(v, what, file, lo)
  if math.type(v) ~= "integer" then
    fail("%s: %s must be an integer, found %s", file, what, describe(v))
  end
  if v < (lo or 1) or v > INT_MAX then
    fail("%s: %s must be in [%d, %d], found %d", file, what, lo or 1, INT_MAX, v)
  end
  return v
end

-- Config floats are used in fp32 (RoPE, RMSNorm): they must be finite there.
local FLT_MAX = 3.4028234663852886e38
local FLT_MIN = 1.1754943508222875e-38

local function num(v, what, file)
  if math.type(v) == nil then
    fail("%s: %s must be a number, found %s", file, what, describe(v))
  end
  local x = v + 0.0
  if x ~= x or math.abs(x) > FLT_MAX then
    fail("%s: %s must be a finite fp32 value, found %s", file, what, describe(v))
  end
  return x
end

local function rope_scaling(v, what, file, repo)
  if type(v) ~= "table" or getmetatable(v) ~= json.object_mt then
    fail("%s: %s must be an object or null, found %s", file, what, describe(v))
  end
  local kind = v.rope_type
  if kind == nil or is_null(kind) then kind = v.type end
  if kind == nil or is_null(kind) then
    -- rope_parameters always exists in 5.x and holds rope_theta; rope_scaling must say what it scales
    if what == "rope_scaling" then fail("%s: rope_scaling has no rope_type", file) end
    return false
  end
  if kind == "default" then return false end
  if type(kind) ~= "string" then
    fail("%s: %s.rope_type must be a string, found %s", file, what, describe(kind))
  end
  if kind ~= "llama3" then
    -- a refusal names the model, and the key by the file's own name, as families.lua's do
    E.raise("unsupported", "%s: %s type '%s' is not supported (config.json: %s; supported: llama3)", repo, what,
      (kind:sub(1, 40):gsub("[^%w_.-]", "?")), what)
  end
  local s = { type = "llama3" }
  for _, k in ipairs({ "factor", "low_freq_factor", "high_freq_factor" }) do
    if v[k] == nil then fail("%s: %s.%s is missing", file, what, k) end
    s[k] = num(v[k], what .. "." .. k, file)
    if s[k] <= 0 then fail("%s: %s.%s must be positive", file, what, k) end
  end
  if s.high_freq_factor <= s.low_freq_factor then
    fail("%s: %s.high_freq_factor must exceed low_freq_factor", file, what)
  end
  local k = "original_max_position_embeddings"
  if v[k] == nil then fail("%s: %s.%s is missing", file, what, k) end
  s[k] = int(v[k], what .. "." .. k, file)
  return s
end

local readers = {
  int = function(v, what, file) return int(v, what, file) end,
  float = num,
  bool = function(v, what, file)
    if type(v) ~= "boolean" then
      fail("%s: %s must be true or false, found %s", file, what, describe(v))
    end
    return v
  end,
  token = function(v, what, file)
    return int(v, what, file, 0)
  end,
  tokens = function(v, what, file)
    if math.type(v) then return { int(v, what, file, 0) } end
    if type(v) ~= "table" or getmetatable(v) ~= json.array_mt then
      fail("%s: %s must be an integer or a list of integers, found %s",
        file, what, describe(v))
    end
    if v.n > MAX_EOS then
      fail("%s: %s lists %d ids, at most %d are supported", file, what, v.n, MAX_EOS)
    end
    local ids = {}
    for i = 1, v.n do ids[i] = int(v[i], string.format("%s[%d]", what, i - 1), file, 0) end
    return ids
  end,
  dtype = function(v, what, file)
    if type(v) ~= "string" or not dtypes[v] then
      fail("%s: %s must be one of bfloat16, float16, float32, found %s", file, what,
        type(v) == "string" and ("'" .. v:gsub("[^%w_.-]", "?") .. "'") or describe(v))
    end
    return v
  end,
  rope_scaling = rope_scaling,
  quant = function(v, _, file, repo) return (require("quant").read_config(v, repo, file)) end,
}

-- Extract the Config from a decoded config.json. `file` names it in errors.
function M.extract(cfg, file, repo)
  local c = {}
  for _, f in ipairs(fields) do
    local v, key, was_null = lookup(cfg, f, file)
    if v == nil then
      if f.default ~= nil then
        c[f.name] = f.default
      elseif f.default_from then
        c[f.name] = c[f.default_from]
      elseif f.derive then
        c[f.name] = assert(load("return " .. f.derive, "=derive", "t", c))()
      else
        fail("%s: required key '%s' is %s", file, key, was_null and "null" or "missing")
      end
    else
      c[f.name] = readers[f.type](v, key, file, repo)
    end
  end
  -- consistency the shapes rely on
  if c.emb_dim % c.n_heads ~= 0 and (cfg.head_dim == nil or is_null(cfg.head_dim)) then
    fail("%s: hidden_size %d is not a multiple of num_attention_heads %d and head_dim is absent",
      file, c.emb_dim, c.n_heads)
  end
  if c.n_heads % c.n_kv_heads ~= 0 then
    fail("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
      file, c.n_heads, c.n_kv_heads)
  end
  if c.head_dim % 2 ~= 0 then
    fail("%s: head_dim must be even for RoPE, found %d", file, c.head_dim)
  end
  -- Explicit bounds, so that a hostile config.json cannot make the generator
  -- (which lists every layer's tensors) or the generated loader (which sizes
  -- tables from these fields) run for hours or ask for terabytes. The largest
  -- public decoders are far inside them (Llama-3.1-405B: 126 layers, hidden
  -- 16384, 53248 MLP, vocab 128256).
  for _, b in ipairs(M.limits) do
    if c[b[1]] > b[3] then
      fail("%s: %s must be at most %d, found %d", file, b[2], b[3], c[b[1]])
    end
  end
  for _, p in ipairs({ { "vocab_size", "hidden_size" }, { "intermediate_size", "hidden_size" },
                       { "num_attention_heads x head_dim", "hidden_size" } }) do
    local a = p[1] == "vocab_size" and c.vocab_size or p[1] == "intermediate_size" and c.hidden_dim
      or c.n_heads * c.head_dim
    if a * c.emb_dim > M.MAX_TENSOR then
      fail("%s: %s x %s = %d elements in one tensor, at most %d (%d GiB of bf16) are supported",
        file, p[1], p[2], a * c.emb_dim, M.MAX_TENSOR, M.MAX_TENSOR * 2 >> 30)
    end
  end
  -- both are used in fp32 (RMSNorm, RoPE)
  for _, k in ipairs({ { "rms_norm_eps", "rms_norm_eps" }, { "rope_base", "rope_theta" } }) do
    if c[k[1]] < FLT_MIN then
      fail("%s: %s must be a positive normal fp32 value, found %s", file, k[2], describe(c[k[1]]))
    end
  end
  return c
end

return M
