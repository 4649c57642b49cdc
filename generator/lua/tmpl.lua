-- The template engine: templates read like the C they produce.
--
-- Two rules:
--   * a line whose first column is '@' is Lua code and produces no output;
--   * ${expr} in any other line is replaced by the value of the Lua
--     expression; a nil value is an error naming template and line.
-- Every template line becomes exactly one line of the compiled chunk, so a Lua
-- error in a template also names the template's own line.

local M = {}

-- Compile template text into a Lua chunk source. Line k of the result holds
-- the code of template line k.
local function translate(src)
  local out = {}
  local n = 0
  for line in (src:sub(-1) == "\n" and src or src .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    local code
    if line:sub(1, 1) == "@" then
      code = line:sub(2)
    else
      local parts, pos = {}, 1
      for s, expr, e in line:gmatch("()%${(.-)}()") do
        if s > pos then parts[#parts + 1] = string.format("%q", line:sub(pos, s - 1)) end
        parts[#parts + 1] = string.format("_val(%s, %q)", expr, expr)
        pos = e
      end
      if line:find("${", pos, true) then
        error(string.format("line %d: unterminated ${", n), 0)
      end
      -- %q would write a newline as backslash-newline, adding a chunk line
      parts[#parts + 1] = string.format("%q", line:sub(pos)) .. ' .. "\\n"'
      code = "_put(" .. table.concat(parts, ", ") .. ")"
    end
    out[n] = code
  end
  -- the prelude shares line 1 so that numbering stays aligned
  out[1] = "local _put, _val = ...; " .. (out[1] or "")
  return table.concat(out, "\n")
end

-- Render template text `src` (named `name` in errors) with the names in
-- `env` visible to its code. Unknown globals are errors, not nil.
function M.render(src, name, env)
  local ok, code = pcall(translate, src)
  if not ok then error(name .. ": " .. code, 0) end
  local scope = setmetatable({}, {
    __index = function(_, k)
      local v = env[k]
      if v == nil then error(string.format("'%s' is not defined", k), 2) end
      return v
    end,
    __newindex = function(_, k) error(string.format("assignment to global '%s'", k), 2) end,
  })
  local chunk, err = load(code, "=" .. name, "t", scope)
  if not chunk then error(err, 0) end
  local buf = {}
  local function put(...)
    for i = 1, select("#", ...) do buf[#buf + 1] = select(i, ...) end
  end
  local function val(v, expr)
    if v == nil then error(string.format("${%s} is nil", expr), 2) end
    local t = type(v)
    if t ~= "string" and t ~= "number" then
      error(string.format("${%s} is a %s, not a string or number", expr, t), 2)
    end
    return v
  end
  local okr, rerr = pcall(chunk, put, val)
  if not okr then error(rerr, 0) end
  return table.concat(buf)
end

return M
