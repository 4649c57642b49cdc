-- Quantized checkpoint formats, as data, beside the families table.
--
-- For each format in scope: how a checkpoint says it is one (config.json's
-- quantization_config.quant_method, or, for mlir-air's Q4NX bundle, its file
-- model.q4nx); the quantization_config fields it reads (the key, its type,
-- the default transformers gives it, the values supported, the field of the
-- Config's `quant` it sets); the tensors that stand for one projection in
-- place of its float `.weight`, its parts (the suffix that replaces
-- `weight` in its name, the dtypes it may have, its shape in the file as
-- expressions over the projection's `inputs` and `outputs` and the Config's
-- quant sizes, the C field beside the projection's that points at it, what
-- it is); what must divide what; and its dequantization rule, which the
-- runtime implements as `c` (runtime/model/dequant.c; gm/quant.h numbers
-- the parts in this order and says the rule in full). Every format's
-- projections are dequantized to bf16 by that rule for the reference; the
-- parts are kept as they are for the NPU pipeline.
--
-- A new format is an entry here and its rule in dequant.c. Anything else a
-- config.json's quantization_config names is refused in one line.

local json = require("gm.json")
local E = require("errors")

---@class gm.QuantField
---@field key string          the quantization_config key
---@field type "int"|"bool"|"string"|"pair"|"modules"
---@field default any         what transformers assumes when the key is absent (nil: required)
---@field null? string        where transformers refuses null (rather than taking it for the default): what to do
---@field supported? any[]    the values gen-model reads (others are refused, naming them)
---@field sets? string|string[]   the Config quant field(s) it fills
---@field check? fun(v: any): string|nil   a further rule: what is wrong, or nil

---@class gm.QuantPart
---@field suffix string       replaces `weight` in the projection's HF name
---@field field string        the C field is the projection's field .. "_" .. this
---@field dtypes string[]     the safetensors dtypes it may have (the first layer's is every layer's)
---@field shape string[]      in the file; over inputs, outputs, group, groups, block_out, cdiv()
---@field doc string
---@field optional? true      may be absent (then the rule does without it)
---@field required_by? string a Config quant flag that makes an optional part required

---@class gm.QuantFormat
---@field name string         "awq": the Config's quant.method
---@field method? string      quantization_config.quant_method
---@field file? string        the weights file that says it, instead (Q4NX)
---@field title string
---@field c string            the runtime's gm_quant_method
---@field fields gm.QuantField[]
---@field implied? table      Config quant fields the format fixes
---@field parts gm.QuantPart[]
---@field sizes? string      the config's sizes a part's shape follows, as config.json names them, for
---                           messages: "{field}" is that Config quant field (none: the format's own sizes)
---@field divides string[][]  {a, b}: a must divide b, for every quantized projection
---@field natural string      the form the rule makes row by row
---@field rule string
---@field prerequisite string TODO.md: what the NPU side of the port needs

local M = {}

-- The Config's quant of a float checkpoint: every field, zero.
M.none = { method = "none", bits = 0, group_size = 0, block_out = 0, zero_point = false, sym = false,
  desc_act = false, gptq_v2 = false }

-- The Config quant fields in the order of gm_quant_config (gm/quant.h), with their C types.
M.config_fields = { { "method", "method" }, { "bits", "int" }, { "group_size", "int" }, { "block_out", "int" },
  { "zero_point", "bool" }, { "sym", "bool" }, { "desc_act", "bool" }, { "gptq_v2", "bool" } }

local modules_to_not_convert = { key = "modules_to_not_convert", type = "modules", default = json.null }

---@type gm.QuantFormat[]
M.formats = {
  {
    name = "awq", method = "awq", title = "AWQ", c = "GM_QUANT_AWQ",
    fields = {
      { key = "bits", type = "int", default = 4, supported = { 4 }, sets = "bits" },
      { key = "group_size", type = "int", default = 128, sets = "group_size",
        check = function(v) return v < 1 and "must be positive" or nil end },
      { key = "zero_point", type = "bool", default = true, supported = { true }, sets = "zero_point" },
      { key = "version", type = "string", default = "gemm", supported = { "gemm" } },
      modules_to_not_convert,
    },
    parts = {
      { suffix = "qweight", field = "qweight", dtypes = { "I32" }, shape = { "inputs", "outputs // 8" },
        doc = "4-bit weights, eight a word along the outputs in AWQ's order 0 2 4 6 1 3 5 7" },
      { suffix = "qzeros", field = "qzeros", dtypes = { "I32" }, shape = { "inputs // group", "outputs // 8" },
        doc = "4-bit zero points, a row a group of inputs, packed as qweight" },
      { suffix = "scales", field = "scales", dtypes = { "F16", "BF16" }, shape = { "inputs // group", "outputs" },
        doc = "scales, a row a group of inputs" },
    },
    sizes = "group_size {group_size}",
    divides = { { "group", "inputs" }, { "8", "outputs" } },
    natural = "(in, out)",
    rule = "W[k][n] = (q[k][n] - z[k/g][n]) * s[k/g][n]",
    prerequisite = "Phase 1: the int4 kernels read each projection's `qweight`, `qzeros` and `scales` as AutoAWQ's\n"
      .. "  GEMM layout packs them (eight 4-bit values a word along the outputs, in the order 0 2 4 6 1 3 5 7;\n"
      .. "  group size {group_size}); the bf16 reference runs on the same weights dequantized by\n"
      .. "  W[k][n] = (q[k][n] - z[k/g][n]) * s[k/g][n].",
  },
  {
    name = "gptq", method = "gptq", title = "GPTQ", c = "GM_QUANT_GPTQ",
    fields = {
      { key = "bits", type = "int", supported = { 4 }, sets = "bits" },
      { key = "group_size", type = "int", default = 128, sets = "group_size",
        check = function(v) return (v < 1 and v ~= -1) and "must be positive, or -1 (one group)" or nil end },
      { key = "sym", type = "bool", default = true, sets = "sym" },
      { key = "desc_act", type = "bool", default = false, sets = "desc_act" },
      { key = "checkpoint_format", type = "string", default = "gptq", supported = { "gptq", "gptq_v2" },
        sets = "gptq_v2" },
    },
    parts = {
      { suffix = "qweight", field = "qweight", dtypes = { "I32" }, shape = { "inputs // 8", "outputs" },
        doc = "4-bit weights, eight a word along the inputs" },
      { suffix = "qzeros", field = "qzeros", dtypes = { "I32" }, shape = { "groups", "outputs // 8" },
        doc = "4-bit zero points (minus one in checkpoint_format gptq), a row a group" },
      { suffix = "scales", field = "scales", dtypes = { "F16", "BF16" }, shape = { "groups", "outputs" },
        doc = "scales, a row a group" },
      { suffix = "g_idx", field = "g_idx", dtypes = { "I32" }, shape = { "inputs" }, optional = true,
        required_by = "desc_act", doc = "each input's group" },
    },
    sizes = "group_size {group_size}",
    divides = { { "8", "inputs" }, { "8", "outputs" } },
    natural = "(in, out)",
    rule = "W[k][n] = (q[k][n] - (z[g(k)][n] + 1)) * s[g(k)][n] (gptq_v2: without the + 1), g(k) = g_idx[k] or k/g",
    prerequisite = "Phase 1: the int4 kernels read each projection's `qweight`, `qzeros`, `scales` (and `g_idx`) as\n"
      .. "  GPTQ packs them (eight 4-bit values a word along the inputs; group size {group_size}); the bf16\n"
      .. "  reference runs on the same weights dequantized by W[k][n] = (q[k][n] - (z[g(k)][n] + 1)) * s[g(k)][n]\n"
      .. "  (checkpoint_format gptq_v2: without the + 1).",
  },
  {
    name = "fp8", method = "fp8", title = "FP8", c = "GM_QUANT_FP8",
    fields = {
      { key = "fmt", type = "string", default = "e4m3", supported = { "e4m3" } },
      { key = "activation_scheme", type = "string", default = "dynamic", supported = { "dynamic" } },
      -- null is refused: transformers' FineGrainedFP8Config takes len() of it and raises (vLLM reads it as one
      -- scale a tensor, which this format's rule does not read); an absent key is transformers' (128, 128)
      { key = "weight_block_size", type = "pair", default = { 128, 128 }, sets = { "block_out", "group_size" },
        null = "gen-model reads FP8 with a scale a block: set it to the [outputs, inputs] of the blocks "
          .. "weight_scale_inv was made with, or leave the key out for transformers' default [128, 128]" },
      modules_to_not_convert,
    },
    implied = { bits = 8 },
    parts = {
      { suffix = "weight", field = "fp8", dtypes = { "F8_E4M3" }, shape = { "outputs", "inputs" },
        doc = "FP8 e4m3 weights" },
      { suffix = "weight_scale_inv", field = "scale_inv", dtypes = { "F32", "BF16", "F16" },
        shape = { "cdiv(outputs, block_out)", "cdiv(inputs, group)" }, doc = "a scale a block" },
    },
    sizes = "weight_block_size [{block_out}, {group_size}]",
    divides = {},
    natural = "(out, in)",
    rule = "W[n][k] = e4m3(w[n][k]) * s[n/bo][k/bi] (an f32 product)",
    prerequisite = "Phase 1: the FP8 kernels read each projection's `fp8` and `scale_inv` (e4m3 weights, one scale\n"
      .. "  a {block_out} x {group_size} block); the bf16 reference runs on the same weights dequantized by\n"
      .. "  W[n][k] = e4m3(w[n][k]) * s[n/bo][k/bi].",
  },
  {
    name = "q4nx", file = "model.q4nx", title = "Q4NX", c = "GM_QUANT_Q4NX",
    fields = {},
    implied = { bits = 4, group_size = 32, block_out = 32 },
    parts = {
      { suffix = "weight", field = "q4nx", dtypes = { "I8" },
        shape = { "cdiv(outputs, 32) * cdiv(inputs, 256)", "5120" },
        doc = "Q4NX blocks of 32 rows x 256 inputs (bf16 scales and mins a group of 32 inputs, then the nibbles)" },
    },
    divides = {},
    natural = "(out, in)",
    rule = "W[n][k] = scale * q + min (f32)",
    prerequisite = "Phase 1: the Q4NX kernels read each projection's `q4nx` as mlir-air's model.q4nx holds it\n"
      .. "  (32 x 256 blocks, a bf16 scale and min a group of 32 inputs); the bf16 reference runs on the same\n"
      .. "  weights dequantized by W = scale * q + min.",
  },
}

M.by_method, M.by_file, M.by_name = {}, {}, {}
for _, f in ipairs(M.formats) do
  M.by_name[f.name] = f
  if f.method then M.by_method[f.method] = f end
  if f.file then M.by_file[f.file] = f end
end

-- "awq, gptq, fp8, and mlir-air's Q4NX bundle (model.q4nx)", for messages.
function M.supported()
  local methods, files = {}, {}
  for _, f in ipairs(M.formats) do
    if f.method then methods[#methods + 1] = f.method else files[#files + 1] = f.file end
  end
  return table.concat(methods, ", ") .. ", and mlir-air's Q4NX bundle (" .. table.concat(files, ", ") .. ")"
end

local INT_MAX = 2147483647

local function is_object(v) return type(v) == "table" and getmetatable(v) == json.object_mt end
local function is_array(v) return type(v) == "table" and getmetatable(v) == json.array_mt end

local function shown(v) return require("config").describe(v) end

local function quoted(v)
  return type(v) == "string" and "'" .. v:sub(1, 40):gsub("[^%w_.-]", "?") .. "'" or shown(v)
end

-- One quantization_config field by its rule; its value (the default when absent).
local function read_field(fmt, f, q, repo, file)
  local v, what = q[f.key], "quantization_config." .. f.key
  local want = ({ int = "an integer of at most 2147483647", bool = "true or false", string = "a string",
    pair = "a list of two positive integers", modules = "a list of module names or null" })[f.type]
  if v == json.null and f.null then
    E.raise("format", "%s: %s must be %s, found null (%s)", file, what, want, f.null)
  end
  if v == nil or v == json.null then
    if f.default == nil then E.raise("missing", "%s: required key '%s' is missing (%s)", file, what, fmt.title) end
    return f.default
  end
  local function int(x) return math.type(x) == "integer" and x <= INT_MAX end
  local ok = f.type == "int" and int(v) or f.type == "bool" and type(v) == "boolean"
    or f.type == "string" and type(v) == "string"
    or f.type == "pair" and is_array(v) and v.n == 2 and int(v[1]) and int(v[2]) and v[1] > 0 and v[2] > 0
    or f.type == "modules" and is_array(v)
  if not ok then E.raise("format", "%s: %s must be %s, found %s", file, what, want, shown(v)) end
  if f.type == "modules" then
    for i = 1, v.n do
      if type(v[i]) ~= "string" then
        E.raise("format", "%s: %s[%d] must be a string, found %s", file, what, i - 1, shown(v[i]))
      end
    end
  end
  if f.type == "string" then v = v:lower() end -- names compare without case (transformers lowercases AWQ's version)
  if f.supported then
    local known = false
    for _, s in ipairs(f.supported) do known = known or s == v end
    if not known then
      local list = {}
      for i, s in ipairs(f.supported) do list[i] = tostring(s) end
      E.raise("unsupported", "%s: %s with %s = %s is not supported (config.json: %s; supported: %s)", repo,
        fmt.title, f.key, quoted(v), what, table.concat(list, ", "))
    end
  end
  local why = f.check and f.check(v)
  if why then E.raise("format", "%s: %s %s, found %s", file, what, why, shown(v)) end
  return v
end

-- The Config's quant from config.json's quantization_config (nil or absent: not quantized),
-- and the format; refused in one line when gen-model does not read it.
function M.read_config(v, repo, file)
  file = file or "config.json"
  if v == nil or v == json.null then return M.none, nil end
  if not is_object(v) then
    E.raise("format", "%s: quantization_config must be an object, found %s", file, shown(v))
  end
  local method = v.quant_method
  if method == nil or method == json.null then
    E.raise("missing", "%s: required key 'quantization_config.quant_method' is missing", file)
  end
  if type(method) ~= "string" then
    E.raise("format", "%s: quantization_config.quant_method must be a string, found %s", file, shown(method))
  end
  local fmt = M.by_method[method:lower()]
  if not fmt then
    E.raise("unsupported", "%s: quantization method %s is not supported (config.json: "
      .. "quantization_config.quant_method; supported: %s)", repo, quoted(method), M.supported())
  end
  local q = {}
  for k, x in pairs(M.none) do q[k] = x end
  q.method = fmt.name
  for k, x in pairs(fmt.implied or {}) do q[k] = x end
  local not_convert = {}
  for _, f in ipairs(fmt.fields) do
    local x = read_field(fmt, f, v, repo, file)
    if f.key == "checkpoint_format" then
      q.gptq_v2 = x == "gptq_v2"
    elseif f.type == "pair" then
      q[f.sets[1]], q[f.sets[2]] = x[1], x[2]
    elseif f.type == "modules" then
      for i = 1, (x == json.null and 0 or x.n) do not_convert[#not_convert + 1] = x[i] end
    elseif f.sets then
      q[f.sets] = x
    end
  end
  q._not_convert = not_convert
  return q, fmt
end

-- The Config's quant of a Q4NX bundle (the file says it; its config.json has no quantization_config).
function M.file_config(fmt)
  local q = {}
  for k, x in pairs(M.none) do q[k] = x end
  q.method = fmt.name
  for k, x in pairs(fmt.implied) do q[k] = x end
  q._not_convert = {}
  return q
end

-- The format a weights file name says (model.q4nx), or nil.
function M.format_of_file(file) return M.by_file[file] end

function M.format(q) return q and q.method ~= "none" and M.by_name[q.method] or nil end

-- ---------------------------------------------------------------------------
-- the parts of one projection

local function cdiv(a, b) return (a + b - 1) // b end

-- The environment a part's shape expressions are evaluated in.
local function shape_env(q, inputs, outputs)
  local group = q.group_size == -1 and inputs or q.group_size
  return { inputs = inputs, outputs = outputs, group = group, groups = cdiv(inputs, group),
    block_out = q.block_out, cdiv = cdiv }
end

local function eval(e, env) return assert(load("return " .. e, "=quant shape", "t", env))() end

-- A part's shape expression in the Config's terms, for the generated comments:
-- "inputs // group" with the projection's in and out expressions ("emb_dim") put in. With group_size -1
-- (one_group) a group is all the inputs, and there is one.
local function shape_name(e, in_name, out_name, one_group)
  return (e:gsub("()([%a_][%w_]*)()", function(at, w, after)
    -- an operand of an operator gets parentheses; the whole expression, or a function's argument, none
    local alone = (at == 1 or e:sub(at - 1, at - 1):match("[(,]")) and (after > #e or e:sub(after, after):match("[),]"))
    local function wrap(x) return x:find("[^%w_]") and not alone and "(" .. x .. ")" or x end
    if w == "inputs" then return wrap(in_name) elseif w == "outputs" then return wrap(out_name)
    elseif w == "group" then return one_group and wrap(in_name) or "group_size"
    elseif w == "groups" then
      return one_group and "1" or (in_name:find("[^%w_]") and "(" .. in_name .. ")" or in_name) .. " // group_size"
    else return w end
  end))
end

-- Does modules_to_not_convert keep this module (a substring of its name, as transformers matches)? The entry that does.
local function not_converted(q, module)
  for _, m in ipairs(q._not_convert or {}) do
    if module:find(m, 1, true) then return m end
  end
  return nil
end

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

-- ", with group_size 32", ", with weight_block_size [128, 128]": the sizes the parts' shapes follow, in
-- config.json's terms (a group_size of -1 with the inputs it makes one group of); "" where the format fixes them.
local function sizes_said(fmt, q, inputs)
  if not fmt.sizes then return "" end
  local said = fmt.sizes:gsub("{([%w_]+)}", function(k) return tostring(q[k]) end)
  if q.group_size == -1 then said = said .. string.format(" (one group of the %d inputs)", inputs) end
  return ", with " .. said
end

-- Would the checkpoint hold this projection quantized? Its first part is there, in a dtype of the format.
local function present(fmt, base, where)
  local p = fmt.parts[1]
  local t = where[base .. "." .. p.suffix]
  if not t then return false end
  for _, d in ipairs(p.dtypes) do if t.dtype == d then return true end end
  return false
end

--[[
Check projection `hf` (its float ".weight" name) of a quantized checkpoint
against its format's parts, as the family's spec gives its (out, in) shape
(and the expressions it comes from, for the comments). Returns its parts'
views for the templates, or nil when the checkpoint keeps it as a float
tensor: modules_to_not_convert names it, or `optional` (the LM head) and its
first part is absent. `first` is the same projection's parts in layer 0, or
nil: every layer's must have the same dtypes. Marks what it consumed.
]]
function M.parts(q, hf, out_in, names, where, listing, consumed, optional, first)
  local fmt = M.format(q)
  local base = hf:gsub("%.weight$", "")
  if not_converted(q, base) or (optional and not present(fmt, base, where)) then return nil end
  local outputs, inputs = out_in[1], out_in[2]
  local env = shape_env(q, inputs, outputs)
  for _, d in ipairs(fmt.divides) do
    local a, b = eval(d[1], env), eval(d[2], env)
    if b % a ~= 0 then
      E.raise("shape", "%s: %s projection '%s' has %d %s, not a multiple of %s", listing, fmt.title, base, b, d[2],
        d[1] == "group" and "group_size " .. a or tostring(a))
    end
  end
  local views = {}
  for i, p in ipairs(fmt.parts) do
    local name = base .. "." .. p.suffix
    local t = where[name]
    local shape = {}
    for j, e in ipairs(p.shape) do shape[j] = eval(e, env) end
    if not t then
      if p.optional and not (p.required_by and q[p.required_by]) then goto continue end
      local also = ""
      if i == 1 and where[hf] then
        also = string.format("; the file holds '%s' (%s %s) instead", hf, where[hf].dtype, shape_str(where[hf].shape))
      end
      E.raise("missing", "%s: tensor '%s' is missing (%s: %s, %s %s; config.json's quantization_config says %s)%s",
        listing, name, fmt.title, p.doc, table.concat(p.dtypes, " or "), shape_str(shape), fmt.name, also)
    end
    consumed[name] = true
    local same = #t.shape == #shape
    for j = 1, #shape do same = same and t.shape[j] == shape[j] end
    if not same then
      E.raise("shape", "%s: tensor '%s' has shape %s, expected %s (%s: %s%s)", t.path, name,
        shape_str(t.shape), shape_str(shape), fmt.title, p.doc, sizes_said(fmt, q, inputs))
    end
    local known = false
    for _, d in ipairs(p.dtypes) do known = known or t.dtype == d end
    local before = first and first[#views + 1]
    if not known or (before and before.dtype ~= t.dtype) then
      E.raise("dtype", "%s: tensor '%s' has dtype %s, expected %s (%s: %s)", t.path, name, t.dtype,
        before and before.dtype or table.concat(p.dtypes, " or "), fmt.title, p.doc)
    end
    local snames, doc, one_group = {}, p.doc, q.group_size == -1
    for j, e in ipairs(p.shape) do
      snames[j] = shape_name(e, names[2], names[1], one_group)
      -- a shape of groups says why it has one
      if one_group and e:find("group") and doc == p.doc then
        doc = string.format("%s, with group_size -1 (one group of the %s inputs)", doc, names[2])
      end
    end
    views[#views + 1] = { number = i, suffix = p.suffix, field = p.field, dtype = t.dtype, shape = shape,
      shape_names = snames, doc = doc, name = name }
    ::continue::
  end
  return views
end

--[[
Projection `hf` (its float ".weight" name), kept in float because
modules_to_not_convert names it, while the file holds it quantized (its
format's first part, in a dtype of the format): what to add to the message of
its float check, which then fails; else "".
]]
function M.kept_float_note(q, hf, where)
  local fmt = M.format(q)
  local base = hf:gsub("%.weight$", "")
  local m = fmt and not_converted(q, base)
  if not m or not present(fmt, base, where) then return "" end
  local name = base .. "." .. fmt.parts[1].suffix
  local held = name == hf and "it" or string.format("'%s' (%s %s)", name, where[name].dtype, shape_str(where[name].shape))
  return string.format("; config.json's quantization_config.modules_to_not_convert names %s, which keeps it in "
    .. "float, but the file holds %s quantized as %s", quoted(m), held, fmt.title)
end

-- The first tensor, in name order, that only a quantized checkpoint holds (packed weights, FP8 or I8 ones), or nil.
function M.first_quantized(where)
  local names = {}
  for name, t in pairs(where) do
    if name:match("%.qweight$") or name:match("%.qzeros$") or name:match("_scale_inv$")
      or t.dtype == "F8_E4M3" or t.dtype == "F8_E5M2" or (t.dtype == "I8" and name:match("%.weight$")) then
      names[#names + 1] = name
    end
  end
  table.sort(names)
  return names[1]
end

-- The names of a (tied, so unloaded) projection's parts a checkpoint may hold anyway, for the ignore list.
function M.part_names(q, hf)
  local fmt = M.format(q)
  local base, out = hf:gsub("%.weight$", ""), {}
  for _, p in ipairs(fmt and fmt.parts or {}) do out[#out + 1] = base .. "." .. p.suffix end
  return out
end

return M
