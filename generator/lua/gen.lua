-- From a model snapshot to generated sources.
--
--   generate(snap, templates, templates_dir) -> { id = "qwen2_1_5b", files = { {path, text}, ... } }
--
-- snap (built by the C host from a local folder, the HF cache or the Hub):
--   repo     "Qwen/Qwen2-1.5B"          commit  40 hex digits, or nil
--   name     the id to use instead of the one derived from repo, or nil
--   config   config.json text           index   model.safetensors.index.json text, or nil
--   config_path, index_path   the files those were read from, as messages name them
--   shards   { {file = "model.safetensors", path = where its header was read from,
--              tensors = { {name, dtype, shape = {...}}, ... }}, ... }
--            each shard's header, already validated by the runtime's safetensors reader
-- templates: { ["weights.h"] = text, ... } from templates/*.tmpl, or --templates DIR's (templates_dir,
--            which errors name; default "templates")
--
-- Every check happens before anything is rendered; the host writes nothing
-- unless this returns.

local json = require("gm.json")
local E = require("errors")
local config = require("config")
local families = require("families")
local quant = require("quant")
local tmpl = require("tmpl")

local M = {}

local FLOAT_DTYPES = { BF16 = true, F16 = true, F32 = true }
local RESERVED = require("gm.runtime").reserved -- the set of gm_reserved_ids (hub/snapshot.c)
local RUNTIME_ABI = require("gm.runtime").abi -- GM_RUNTIME_ABI (gm/status.h): the generated code's contract
local MAX_FILE = require("gm.runtime").max_file -- GM_GEN_FILE_MAX (lua_host.h): the most regen reads back of a file

-- The C identifier of a repo: its name lower-cased, every run of other
-- characters turned into '_' (Qwen/Qwen2-1.5B -> qwen2_1_5b).
function M.model_id(repo)
  local name = repo:match("[^/]*$"):lower():gsub("[^a-z0-9]+", "_"):gsub("^_+", ""):gsub("_+$", "")
  if name == "" then E.raise("format", "repo id '%s' gives no usable C identifier; pass --name", repo) end
  if name:match("^%d") then name = "m" .. name end
  if RESERVED[name] then name = name .. "_model" end -- the runtime's prefixes (gm_model_id_valid)
  if #name > 128 then -- GM_MODEL_ID_MAX: regen finds a folder by it
    E.raise("format", "repo id '%s' gives a C identifier of %d characters, more than 128; pass --name", repo, #name)
  end
  return name
end

local function is_object(v) return type(v) == "table" and getmetatable(v) == json.object_mt end
local function is_array(v) return type(v) == "table" and getmetatable(v) == json.array_mt end

local function decode(text, file)
  local ok, v = pcall(json.decode, text, file)
  if not ok then E.raise("format", "%s", v) end
  if not is_object(v) then E.raise("format", "%s: expected a JSON object at the top level", file) end
  return v
end

-- Phase 0's scope check: which family, or a refusal naming the model, the
-- reason and the config field that showed it.
local function gate(cfg, repo, file)
  local archs = cfg.architectures
  if archs == nil then E.raise("format", "%s: required key 'architectures' is missing", file) end
  if not is_array(archs) or archs.n == 0 or type(archs[1]) ~= "string" then
    E.raise("format", "%s: architectures must be a non-empty list of strings, found %s", file,
      config.describe(archs))
  end
  local arch = archs[1]
  local function refuse(rule)
    E.raise("unsupported", "%s: %s (config.json: %s = %s)", repo, rule.why, rule.key,
      config.describe(cfg[rule.key]))
  end
  for _, key in ipairs(families.switches) do
    local v = cfg[key]
    if v ~= nil and v ~= json.null and type(v) ~= "boolean" then
      E.raise("format", "%s: %s: expected true or false, found %s", file, key, config.describe(v))
    end
  end
  for _, rule in ipairs(families.out_of_scope) do
    if rule.when(cfg) then refuse(rule) end
  end
  local family = families.by_arch[arch]
  if not family then
    E.raise("unsupported", "%s: architecture '%s' is not supported (config.json: architectures; supported: %s)",
      repo, arch:gsub("[^%w_.-]", "?"), table.concat(families.supported(), ", "))
  end
  local mt, want = cfg.model_type, families.model_type[arch]
  if mt ~= nil and mt ~= json.null and mt ~= want then
    E.raise("format", "%s: model_type %s is not %s's ('%s'): transformers builds the model model_type names; "
      .. "fix whichever of the two is wrong", file, type(mt) == "string" and "'" .. mt:sub(1, 40):gsub("[^%w_.-]", "?")
      .. "'" or config.describe(mt), arch, want)
  end
  for _, rule in ipairs(family.reject) do
    if rule.when(cfg) then refuse(rule) end
  end
  return arch, family
end

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

-- Evaluate a family's shape expressions over the Config.
local function eval_shape(exprs, cfg)
  local out = {}
  for i, e in ipairs(exprs) do
    out[i] = assert(load("return " .. e, "=shape", "t", cfg))()
  end
  return out
end

-- name -> {file, path, dtype, shape} over every shard, checked against the index.
local function tensor_table(snap, index)
  local where = {}
  for _, shard in ipairs(snap.shards) do
    for _, t in ipairs(shard.tensors) do
      if where[t.name] then
        E.raise("format", "%s: tensor '%s' also appears in %s", shard.path, t.name, where[t.name].path)
      end
      where[t.name] = { file = shard.file, path = shard.path, dtype = t.dtype, shape = t.shape }
    end
  end
  if index then
    local map = index.weight_map
    if not is_object(map) then
      E.raise("format", "%s: weight_map must be an object, found %s", snap.index_path, config.describe(map))
    end
    local names = {}
    for name in pairs(map) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local t = where[name]
      if not t then
        E.raise("missing", "%s: tensor '%s' is mapped to %s but absent from its header",
          snap.index_path, name, tostring(map[name]))
      elseif t.file ~= map[name] then
        E.raise("format", "%s: tensor '%s' is mapped to %s but found in %s",
          snap.index_path, name, tostring(map[name]), t.file)
      end
    end
    for name, t in pairs(where) do
      if map[name] == nil then
        E.raise("format", "%s: tensor '%s' is not in %s weight_map", t.path, name, snap.index_path)
      end
    end
  end
  return where
end

-- Check one expected tensor; returns its description for the templates. `note`, if any, ends each message.
local function expect(spec, hf, where, listing, cfg, consumed, note)
  local shape = eval_shape(spec.shape, cfg)
  local t = where[hf]
  note = note or ""
  if not t then
    E.raise("missing", "%s: tensor '%s' is missing (%s, %s)%s", listing, hf, spec.doc, shape_str(shape), note)
  end
  consumed[hf] = true
  if #t.shape ~= #shape then
    E.raise("shape", "%s: tensor '%s' has shape %s, expected %s%s", t.path, hf, shape_str(t.shape), shape_str(shape),
      note)
  end
  for i = 1, #shape do
    if t.shape[i] ~= shape[i] then
      E.raise("shape", "%s: tensor '%s' has shape %s, expected %s%s", t.path, hf, shape_str(t.shape),
        shape_str(shape), note)
    end
  end
  if not FLOAT_DTYPES[t.dtype] then
    E.raise("dtype", "%s: tensor '%s' has dtype %s, expected BF16, F16 or F32%s", t.path, hf, t.dtype, note)
  end
  return shape
end

-- One tensor of the family in a quantized checkpoint: a projection (or the
-- LM head, where the checkpoint quantized it) is checked as its format's parts
-- (quant.lua), which it returns; anything else is a float tensor as ever.
-- `first` is layer 0's parts of the same spec: every layer is held alike.
local function expect_any(spec, hf, where, listing, cfg, consumed, first, layer)
  local parts
  if quant.format(cfg.quant) and (spec.transpose or spec.linear) then
    parts = quant.parts(cfg.quant, hf, eval_shape(spec.shape, cfg), spec.shape, where, listing, consumed,
      not spec.transpose, first)
  end
  if layer and layer > 0 and (parts == nil) ~= (first == nil) then
    -- a checkpoint transformers loads (modules_to_not_convert may name one layer's projection), which the
    -- generated LayerWeights, one struct for every layer, cannot hold: not supported, rather than bad input
    E.raise("unsupported", "%s: '%s' is %s but layer 0's is %s: a projection quantized in some layers only (as "
      .. "quantization_config.modules_to_not_convert may leave it) is not supported", listing, hf,
      parts and "quantized" or "kept in float", first and "quantized" or "kept in float")
  end
  if layer and layer > 0 and parts and #parts ~= #first then
    -- an optional part (GPTQ's g_idx) that some layers hold and others lack: the loader's table, one for
    -- every layer, lists it for every layer or for none, so one layer's would be demanded or never read
    local here, there = {}, {}
    for _, v in ipairs(parts) do here[v.suffix] = true end
    for _, v in ipairs(first) do there[v.suffix] = true end
    for _, p in ipairs(quant.format(cfg.quant).parts) do
      if here[p.suffix] ~= there[p.suffix] then
        E.raise("unsupported", "%s: '%s' is %s but layer 0's is %s: a %s %s in some layers only is not supported "
          .. "(the generated loader reads the same parts in every layer)", listing,
          (hf:gsub("%.weight$", "." .. p.suffix)), here[p.suffix] and "there" or "missing",
          there[p.suffix] and "there" or "missing", quant.format(cfg.quant).title, p.suffix)
      end
    end
  end
  if not parts then
    -- a projection modules_to_not_convert keeps in float, which the file holds quantized: say why float is expected
    local note = (spec.transpose or spec.linear) and quant.kept_float_note(cfg.quant, hf, where) or nil
    expect(spec, hf, where, listing, cfg, consumed, note)
  end
  return parts
end

-- Gate 1 from the headers alone: every tensor the family needs is there with
-- its shape and a float dtype, or, quantized, as its format's parts; every
-- tensor present is consumed or ignored. `listing` names the file that lists
-- the tensors, for messages. Returns each quantized field's parts.
local function check_tensors(family, cfg, where, listing)
  local consumed, parts = {}, {}
  local ignore = {}
  for _, pat in ipairs(family.ignore) do
    for l = 0, cfg.n_layers - 1 do ignore[(pat:gsub("{L}", tostring(l)))] = true end
  end
  for _, spec in ipairs(family.globals) do
    if spec.tied and cfg.tie_word_embeddings then
      ignore[spec.hf] = true -- a tied model needs no lm_head.weight; some ship one anyway
      for _, name in ipairs(quant.part_names(cfg.quant, spec.hf)) do ignore[name] = true end -- quantized, too
    else
      parts[spec.field] = expect_any(spec, spec.hf, where, listing, cfg, consumed)
    end
  end
  for l = 0, cfg.n_layers - 1 do
    for _, spec in ipairs(family.layer) do
      local p = expect_any(spec, (spec.hf:gsub("{L}", tostring(l))), where, listing, cfg, consumed,
        parts[spec.field], l)
      if l == 0 then parts[spec.field] = p end
    end
  end
  local extra = {}
  for name in pairs(where) do
    if not consumed[name] and not ignore[name] then extra[#extra + 1] = name end
  end
  if #extra > 0 then
    table.sort(extra)
    E.raise("format", "%s: unexpected tensor '%s' in %s (%d tensor%s nothing consumes)", cfg._source,
      extra[1], where[extra[1]].path, #extra, #extra == 1 and "" or "s")
  end
  return parts
end

-- The Config's quant once the tensors are known: a Q4NX bundle says so by its
-- file; a checkpoint that holds quantized tensors without a
-- quantization_config is refused, naming one.
local function quant_of_files(cfg, snap, where)
  local fmt = #snap.shards == 1 and quant.format_of_file(snap.shards[1].file)
  if fmt then
    if cfg.quant.method ~= "none" then
      E.raise("format", "%s: quantization_config says %s, but the weights are %s's bundle %s",
        cfg._file, cfg.quant.method, fmt.title, fmt.file)
    end
    cfg.quant = quant.file_config(fmt)
  elseif cfg.quant.method == "none" then
    local name = quant.first_quantized(where)
    if name then
      E.raise("format", "%s: tensor '%s' (%s) is a quantized checkpoint's, but config.json has no "
        .. "quantization_config (supported: %s)", where[name].path, name, where[name].dtype, quant.supported())
    end
  end
end

-- ---------------------------------------------------------------------------
-- Rendering helpers, visible to templates.

-- A C string literal: printable ASCII kept, everything else escaped; '?' is
-- escaped too so that no trigraph can form.
local function c_str(s)
  return '"' .. s:gsub(".", function(ch)
    local b = ch:byte()
    if ch == '"' or ch == "\\" or ch == "?" then return "\\" .. ch end
    if b < 0x20 or b > 0x7E then return string.format("\\%03o", b) end
  end) .. '"'
end

-- Text safe inside a /* */ or // comment: printable ASCII only, no "*/",
-- no "/*", no trigraph, no line splice.
local function c_comment(s)
  return (s:gsub("[^ -~]", "?"):gsub("%*/", "*?"):gsub("/%*", "/?"):gsub("%?%?", "?_"):gsub("\\", "/"))
end

-- A double literal that reads back to the same value, shortest first.
local function c_double(x)
  assert(math.type(x) == "float" and x == x and x ~= math.huge and x ~= -math.huge)
  if x == math.floor(x) and math.abs(x) < 1e15 then return string.format("%.1f", x) end
  local s
  for p = 1, 17 do
    s = string.format("%." .. p .. "g", x)
    if tonumber(s) == x then break end
  end
  if not s:find("[.e]") then s = s .. ".0" end
  return s
end

local function pad(s, n) return s .. string.rep(" ", math.max(1, n - #s)) end

local rope_types = { llama3 = "GM_ROPE_LLAMA3" }

-- Each Config field as the templates declare and initialize it: its name, its
-- C element type, whether it is an array (of `len` elements), its declaration
-- (made from those), its initializer and what TODO.md shows of its value.
local function config_fields(cfg)
  local out = {}
  local function add(ctype, name, init, doc, shown, len)
    out[#out + 1] = { name = name, ctype = ctype, is_array = len ~= nil, len = len,
      decl = ctype .. " " .. name .. (len and "[" .. len .. "]" or "") .. ";",
      init = init, doc = doc, shown = shown or init }
  end
  for _, f in ipairs(config.fields) do
    local v = cfg[f.name]
    local src = f.key .. (f.key5 and (" or " .. f.key5) or "")
    local doc = src .. ": " .. f.doc
    if f.type == "int" or f.type == "token" then
      add("int", f.name, tostring(v), doc)
    elseif f.type == "float" then
      add("double", f.name, c_double(v), doc, config.describe(v))
    elseif f.type == "bool" then
      add("bool", f.name, tostring(v), doc)
    elseif f.type == "dtype" then
      add("gm_dtype", f.name, config.dtypes[v] or "GM_DTYPE_NONE", doc, v)
    elseif f.type == "rope_scaling" then
      local init, shown = "{ .type = GM_ROPE_DEFAULT }", "none"
      if v then
        init = string.format("{ .type = %s, .factor = %s, .low_freq_factor = %s, .high_freq_factor = %s, "
          .. ".original_max_position_embeddings = %d }", rope_types[v.type], c_double(v.factor),
          c_double(v.low_freq_factor), c_double(v.high_freq_factor), v.original_max_position_embeddings)
        shown = string.format("%s: factor %s, low_freq_factor %s, high_freq_factor %s, "
          .. "original_max_position_embeddings %d", v.type, config.describe(v.factor),
          config.describe(v.low_freq_factor), config.describe(v.high_freq_factor), v.original_max_position_embeddings)
      end
      add("gm_rope_scaling", f.name, init, doc, shown)
    elseif f.type == "quant" then
      local init, parts = { ".method = GM_QUANT_" .. v.method:upper() }, {}
      for _, q in ipairs(quant.config_fields) do
        local x = v[q[1]]
        if q[2] ~= "method" and x ~= quant.none[q[1]] then
          init[#init + 1] = "." .. q[1] .. " = " .. tostring(x)
          parts[#parts + 1] = q[1] .. " " .. tostring(x)
        end
      end
      add("gm_quant_config", f.name, "{ " .. table.concat(init, ", ") .. " }", doc,
        v.method .. (#parts > 0 and ": " .. table.concat(parts, ", ") or ""))
    elseif f.type == "tokens" then
      add("int", "n_" .. f.name, tostring(#v), "how many " .. f.name)
      local ids = {}
      for i, id in ipairs(v) do ids[i] = tostring(id) end
      add("int", f.name, "{ " .. (#ids > 0 and table.concat(ids, ", ") or "0") .. " }", doc,
        #ids > 0 and table.concat(ids, ", ") or "none", "GM_MAX_EOS")
    end
  end
  for _, k in ipairs(families.implied) do
    add("bool", k, tostring(cfg[k]), "implied by the architecture")
  end
  return out
end

local C_TYPES = { I32 = "const int32_t *", F16 = "const uint16_t *", BF16 = "const gm_bf16 *",
  F32 = "const float *", F8_E4M3 = "const uint8_t *", I8 = "const uint8_t *" }

-- Template view of a quantized projection's parts: the field beside its own, each with its
-- shape as the file holds it, in the Config's terms.
local function part_views(spec, cfg, parts)
  local fmt = quant.format(cfg.quant)
  local out = {}
  for i, p in ipairs(parts) do
    out[i] = {
      field = spec.field .. "_" .. p.field, hf_pattern = (spec.hf:gsub("weight$", p.suffix):gsub("{L}", "%%d")),
      number = p.number, rank = #p.shape, hf_shape = table.concat(p.shape, ", "), st_dtype = "ST_" .. p.dtype,
      ctype = C_TYPES[p.dtype],
      comment = string.format("(%s) = (%s) %s%s, from %s: %s", table.concat(p.shape_names, ", "),
        table.concat(p.shape, ", "), p.dtype, p.dtype == "F16" and " bits" or "",
        spec.hf:gsub("weight$", p.suffix), p.doc),
    }
  end
  return out, fmt
end

-- Template view of one tensor spec: what the C field holds and where from.
local function tensor_view(spec, cfg, parts)
  local hf_shape = eval_shape(spec.shape, cfg)
  local names = spec.shape -- the expressions over the Config: "n_heads * head_dim"
  local held, held_names = hf_shape, names
  if spec.transpose then
    held = { hf_shape[2], hf_shape[1] }
    held_names = { names[2], names[1] }
  end
  local tied = spec.tied and cfg.tie_word_embeddings
  local comment = string.format("(%s) = (%s), from %s%s", table.concat(held_names, ", "),
    table.concat(held, ", "), spec.hf, spec.transpose and ", transposed (as stored in the form GM_W_NK)" or "")
  if tied then comment = string.format("(%s) = (%s), tied: aliases %s (%s, where a file has it, not read, as in transformers)",
      table.concat(held_names, ", "), table.concat(held, ", "), spec.tied, spec.hf) end
  local pviews, fmt
  if parts then
    pviews, fmt = part_views(spec, cfg, parts)
    comment = string.format("(%s) = (%s), bf16 dequantized (%s) from the %s below%s",
      table.concat(held_names, ", "), table.concat(held, ", "), fmt.title,
      #pviews == 1 and "field" or #pviews .. " fields", spec.transpose and "; (out, in) in the form GM_W_NK" or "")
  end
  return {
    parts = pviews, quant_c = fmt and fmt.c or "0",
    field = spec.field, hf = spec.hf, doc = spec.doc,
    hf_pattern = spec.hf:gsub("{L}", "%%d"),
    rank = #hf_shape,
    hf_shape = table.concat(hf_shape, ", "), hf_shape_names = table.concat(names, ", "),
    transpose = spec.transpose and "1" or "0",
    tied = tied and spec.tied or nil,
    comment = comment,
  }
end

-- A family's TODO.md prerequisites, each {field} replaced by that Config value.
local function prerequisites(family, cfg)
  local out = {}
  for i, p in ipairs(family.prerequisites) do
    out[i] = p:gsub("{([%w_]+)}", function(k)
      return tostring(cfg[k] or error("families.lua: prerequisite names unknown Config field '" .. k .. "'"))
    end)
  end
  return out
end

-- ---------------------------------------------------------------------------

-- The checks config.json alone decides: scope, then the Config. Run before
-- any safetensors header is read or fetched.
function M.check_config(snap)
  local file = snap.config_path
  local cfg_json = decode(snap.config, file)
  local arch, family = gate(cfg_json, snap.repo, file)
  local cfg = config.extract(cfg_json, file, snap.repo)
  if not cfg.quant then cfg.quant = quant.none end -- no quantization_config
  for _, k in ipairs(families.implied) do
    cfg[k] = family.implies[k]
    assert(type(cfg[k]) == "boolean", "families.lua: " .. arch .. " does not say whether it implies " .. k)
  end
  cfg._source, cfg._file = snap.repo, file
  return arch, family, cfg
end

function M.generate(snap, templates, templates_dir)
  local repo = snap.repo
  local arch, family, cfg = M.check_config(snap)
  local index = snap.index and decode(snap.index, snap.index_path) or nil

  local where = tensor_table(snap, index)
  quant_of_files(cfg, snap, where)
  local parts = check_tensors(family, cfg, where,
    index and snap.index_path or snap.shards[1] and snap.shards[1].path or "model.safetensors")

  local id = snap.name or M.model_id(repo)
  local view = {
    id = id, ID = id:upper(), repo = repo, commit = snap.commit, abi = RUNTIME_ABI,
    repo_comment = c_comment(repo), commit_comment = c_comment(snap.commit or "(no commit: local folder)"),
    repo_c = c_str(repo), commit_c = c_str(snap.commit or ""),
    arch = arch, arch_c = c_str(arch), cfg = cfg, fields = config_fields(cfg), implied = families.implied,
    prerequisites = prerequisites(family, cfg),
    globals = {}, layer = {}, tied = cfg.tie_word_embeddings,
    rms_norm_eps = c_double(cfg.rms_norm_eps),
  }
  for _, spec in ipairs(family.globals) do
    view.globals[#view.globals + 1] = tensor_view(spec, cfg, parts[spec.field])
  end
  for _, spec in ipairs(family.layer) do view.layer[#view.layer + 1] = tensor_view(spec, cfg, parts[spec.field]) end
  local fmt = quant.format(cfg.quant)
  view.quant = fmt
  if fmt then
    view.prerequisites[#view.prerequisites + 1] = fmt.prerequisite:gsub("{([%w_]+)}", function(k)
      return tostring(cfg.quant[k])
    end)
  end

  local env = {
    m = view, ipairs = ipairs, string = string, table = table, math = math, tostring = tostring,
    pad = pad, c_str = c_str, c_comment = c_comment, c_double = c_double,
  }
  local outputs = {
    { path = id .. "_weights.h", template = "weights.h" },
    { path = id .. "_weights.c", template = "weights.c" },
    { path = id .. "_cpu_helpers.h", template = "cpu_helpers.h" },
    { path = id .. "_cpu_helpers.c", template = "cpu_helpers.c" },
    { path = id .. "_registry.c", template = "registry.c" },
    { path = "TODO.md", template = "TODO.md", keep = true },
    { path = "docs/development_progress/progress.md", template = "progress.md", keep = true },
  }
  local files = {}
  for _, o in ipairs(outputs) do
    local src = templates[o.template] or error("no template named " .. o.template)
    local name = (templates_dir or "templates") .. "/" .. o.template .. ".tmpl"
    local text = tmpl.render(src, name, env)
    -- the line by which a later run tells gen-model's files from the user's (output.c, gm_model_file_ours):
    -- an output without it would be taken for the user's, and every later run would refuse to replace it
    local mark = "// Code generated by gen-model"
    if not o.keep and text:sub(1, #mark) ~= mark then
      error(name .. ": its output must start with '" .. mark .. "' (how gen-model tells its files in models/<id>/ "
        .. "from yours); put anything else after that line", 0)
    end
    if #text > MAX_FILE then
      E.raise("format", "%s: renders %s as %d bytes, more than gen-model writes into a model folder (at most %d, "
        .. "what regen reads back)", name, o.path, #text, MAX_FILE)
    end
    files[#files + 1] = { path = o.path, text = text, keep = o.keep or false }
  end
  return { id = id, files = files }
end

return M
