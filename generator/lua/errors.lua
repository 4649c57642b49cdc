-- User-facing failures raised from Lua, carried to the C host as tables so it
-- can choose the exit status: {kind = "format"|"missing"|"shape"|"dtype"|
-- "unsupported", msg = "<one line>"}. A plain string error is a bug in the
-- generator or a template (kind "internal").

local M = {}

M.mt = { __tostring = function(e) return e.msg end }

---@param kind string
---@param fmt string
function M.raise(kind, fmt, ...)
  error(setmetatable({ kind = kind, msg = string.format(fmt, ...) }, M.mt), 0)
end

return M
